// checkpoint.c: reading and writing model and training-state files (see checkpoint.h).
#include "checkpoint.h"

#include <string.h>

#include "util.h"

#define HEADER_INTS 256
#define STATE_WORDS 32

static void header_put_config(int32_t* h, const GPT2Config* cfg) {
    h[2] = cfg->max_seq_len; h[3] = cfg->vocab_size; h[4] = cfg->num_layers;
    h[5] = cfg->num_heads; h[6] = cfg->channels; h[7] = cfg->padded_vocab_size;
}

static GPT2Config header_get_config(const int32_t* h) {
    GPT2Config cfg;
    cfg.max_seq_len = h[2]; cfg.vocab_size = h[3]; cfg.num_layers = h[4];
    cfg.num_heads = h[5]; cfg.channels = h[6]; cfg.padded_vocab_size = h[7];
    return cfg;
}

static int config_equal(const GPT2Config* a, const GPT2Config* b) {
    return a->max_seq_len == b->max_seq_len && a->vocab_size == b->vocab_size && a->num_layers == b->num_layers &&
           a->num_heads == b->num_heads && a->channels == b->channels && a->padded_vocab_size == b->padded_vocab_size;
}

// ---------------------------------------------------------------------------------------------
// Writing

static void writer_begin(CheckpointWriter* w, const char* path, const int32_t* header, size_t payload) {
    snprintf(w->path, sizeof(w->path), "%s", path);
    w->f = atomic_open(path, w->tmp, sizeof(w->tmp));
    w->expect = payload;
    w->done = 0;
    fwrite_check(header, sizeof(int32_t), HEADER_INTS, w->f, w->tmp);
}

void model_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg) {
    int32_t h[HEADER_INTS] = {0};
    h[0] = MODEL_MAGIC;
    h[1] = MODEL_VERSION_FP32;
    header_put_config(h, cfg);
    writer_begin(w, path, h, gpt2_param_layout(cfg).num_parameters);
}

void state_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st,
                      const OptimizerCounters* oc, size_t n) {
    int32_t h[HEADER_INTS] = {0};
    h[0] = STATE_MAGIC;
    h[1] = STATE_VERSION;
    header_put_config(h, cfg);
    h[8] = st->B; h[9] = st->T; h[10] = st->num_processes;
    int64_t words[STATE_WORDS] = {0};
    words[0] = st->step;
    words[1] = (int64_t)st->rng_state;
    words[2] = st->train_pos.epoch; words[3] = st->train_pos.shard_pos; words[4] = st->train_pos.window_pos;
    words[5] = (int64_t)n;
    words[8] = oc->adam_steps;
    memcpy(&words[9], &oc->loss_scale, sizeof(double));
    words[10] = oc->scale_good_steps;
    writer_begin(w, path, h, 2 * n);
    fwrite_check(words, sizeof(int64_t), STATE_WORDS, w->f, w->tmp);
}

void checkpoint_put(CheckpointWriter* w, const float* data, size_t count) {
    if (w->done + count > w->expect)
        fatal("writing %s: %zu more values than the file holds", w->path, w->done + count - w->expect);
    fwrite_check(data, sizeof(float), count, w->f, w->tmp);
    w->done += count;
}

void checkpoint_commit(CheckpointWriter* w) {
    if (w->done != w->expect) {
        fclose(w->f);
        remove(w->tmp);
        fatal("writing %s: %zu of %zu values were written", w->path, w->done, w->expect);
    }
    atomic_close(w->f, w->tmp, w->path);
    w->f = NULL;
}

// ---------------------------------------------------------------------------------------------
// Reading

// Opens a model file and checks header and size; returns the open file positioned after the header.
static FILE* model_file_open(const char* path, GPT2Config* cfg, int* version) {
    FILE* f = fopen_check(path, "rb");
    long size = file_size(f, path);
    int32_t h[HEADER_INTS];
    if (size < (long)sizeof(h)) fatal("model file %s is too small (%ld bytes) to hold a header", path, size);
    fread_check(h, sizeof(int32_t), HEADER_INTS, f, path);
    if (h[0] != MODEL_MAGIC) fatal("model file %s has magic %d, expected %d (a GPT-2 model file)", path, h[0], MODEL_MAGIC);
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16)
        fatal("model file %s has version %d, expected %d (fp32) or %d (bf16)", path, h[1], MODEL_VERSION_FP32,
              MODEL_VERSION_BF16);
    *cfg = header_get_config(h);
    gpt2_config_validate(cfg, path);
    *version = h[1];
    size_t elem = h[1] == MODEL_VERSION_FP32 ? 4 : 2;
    long expect = (long)sizeof(h) + (long)(gpt2_param_layout(cfg).num_parameters * elem);
    if (size != expect)
        fatal("model file %s is %ld bytes, expected %ld for its header's model (L=%d C=%d Vp=%d maxT=%d)", path, size,
              expect, cfg->num_layers, cfg->channels, cfg->padded_vocab_size, cfg->max_seq_len);
    return f;
}

void model_file_read_config(const char* path, GPT2Config* cfg) {
    int version;
    fclose(model_file_open(path, cfg, &version));
}

void model_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* expect) {
    GPT2Config cfg;
    int version;
    r->f = model_file_open(path, &cfg, &version);
    if (!config_equal(&cfg, expect))
        fatal("model file %s holds a different model (L=%d C=%d NH=%d) than expected (L=%d C=%d NH=%d)", path,
              cfg.num_layers, cfg.channels, cfg.num_heads, expect->num_layers, expect->channels, expect->num_heads);
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->expect = gpt2_param_layout(&cfg).num_parameters;
    r->done = 0;
    r->bf16 = version == MODEL_VERSION_BF16;
}

void state_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* cfg, TrainState* st,
                          OptimizerCounters* oc, size_t n) {
    FILE* f = fopen_check(path, "rb");
    long size = file_size(f, path);
    int32_t h[HEADER_INTS];
    int64_t w[STATE_WORDS];
    long expect = (long)(sizeof(h) + sizeof(w) + 2 * n * sizeof(float));
    if (size < (long)sizeof(h)) fatal("state file %s is too small (%ld bytes) to hold a header", path, size);
    fread_check(h, sizeof(int32_t), HEADER_INTS, f, path);
    if (h[0] != STATE_MAGIC) fatal("state file %s has magic %d, expected %d (a training-state file)", path, h[0], STATE_MAGIC);
    if (h[1] != 1 && h[1] != STATE_VERSION)
        fatal("state file %s has version %d, expected 1 or %d", path, h[1], STATE_VERSION);
    GPT2Config fcfg = header_get_config(h);
    if (!config_equal(&fcfg, cfg))
        fatal("state file %s was written for another model (L=%d C=%d), this run has L=%d C=%d", path,
              fcfg.num_layers, fcfg.channels, cfg->num_layers, cfg->channels);
    if (size != expect) fatal("state file %s is %ld bytes, expected %ld", path, size, expect);
    fread_check(w, sizeof(int64_t), STATE_WORDS, f, path);
    if (w[5] != (int64_t)n) fatal("state file %s holds %lld parameters, expected %zu", path, (long long)w[5], n);
    st->B = h[8]; st->T = h[9]; st->num_processes = h[10];
    st->step = w[0];
    st->rng_state = (uint64_t)w[1];
    st->train_pos.epoch = w[2]; st->train_pos.shard_pos = w[3]; st->train_pos.window_pos = w[4];
    if (h[1] == 1) {  // written before engines kept counters: every step was an update, no loss scaling
        oc->adam_steps = w[0];
        oc->loss_scale = 0.0;
        oc->scale_good_steps = 0;
    } else {
        oc->adam_steps = w[8];
        memcpy(&oc->loss_scale, &w[9], sizeof(double));
        oc->scale_good_steps = w[10];
    }
    r->f = f;
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->expect = 2 * n;
    r->done = 0;
    r->bf16 = 0;
}

void checkpoint_get(CheckpointReader* r, float* data, size_t count) {
    if (r->done + count > r->expect)
        fatal("reading %s: asked for %zu values past its end", r->path, r->done + count - r->expect);
    if (!r->bf16) {
        fread_check(data, sizeof(float), count, r->f, r->path);
    } else {
        // bf16 is the top half of an fp32: read into the back half of data, widen front to back.
        uint16_t* half = (uint16_t*)(data + count) - count;
        fread_check(half, sizeof(uint16_t), count, r->f, r->path);
        for (size_t i = 0; i < count; i++) {
            uint32_t bits = (uint32_t)half[i] << 16;
            memcpy(&data[i], &bits, sizeof(float));
        }
    }
    r->done += count;
}

void checkpoint_close(CheckpointReader* r) {
    fclose(r->f);
    r->f = NULL;
}

// ---------------------------------------------------------------------------------------------
// Whole buffers

void model_file_write(const char* path, const GPT2Config* cfg, const float* params) {
    CheckpointWriter w;
    model_file_begin(&w, path, cfg);
    checkpoint_put(&w, params, w.expect);
    checkpoint_commit(&w);
}

void model_file_read_params(const char* path, const GPT2Config* cfg, float* params) {
    CheckpointReader r;
    model_file_open_read(&r, path, cfg);
    checkpoint_get(&r, params, r.expect);
    checkpoint_close(&r);
}

void state_file_write(const char* path, const GPT2Config* cfg, const TrainState* st, const OptimizerCounters* oc,
                      const float* m, const float* v, size_t n) {
    CheckpointWriter w;
    state_file_begin(&w, path, cfg, st, oc, n);
    checkpoint_put(&w, m, n);
    checkpoint_put(&w, v, n);
    checkpoint_commit(&w);
}

void state_file_read(const char* path, const GPT2Config* cfg, TrainState* st, OptimizerCounters* oc, float* m,
                     float* v, size_t n) {
    CheckpointReader r;
    state_file_open_read(&r, path, cfg, st, oc, n);
    checkpoint_get(&r, m, n);
    checkpoint_get(&r, v, n);
    checkpoint_close(&r);
}
