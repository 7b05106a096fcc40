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

void model_file_write(const char* path, const GPT2Config* cfg, const float* params) {
    int32_t h[HEADER_INTS] = {0};
    h[0] = MODEL_MAGIC;
    h[1] = MODEL_VERSION_FP32;
    header_put_config(h, cfg);
    ParamLayout layout = gpt2_param_layout(cfg);
    char tmp[4200];
    FILE* f = atomic_open(path, tmp, sizeof(tmp));
    fwrite_check(h, sizeof(int32_t), HEADER_INTS, f, tmp);
    fwrite_check(params, sizeof(float), layout.num_parameters, f, tmp);
    atomic_close(f, tmp, path);
}

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

void model_file_read_params(const char* path, const GPT2Config* expect, float* params) {
    GPT2Config cfg;
    int version;
    FILE* f = model_file_open(path, &cfg, &version);
    if (!config_equal(&cfg, expect))
        fatal("model file %s holds a different model (L=%d C=%d NH=%d) than expected (L=%d C=%d NH=%d)", path,
              cfg.num_layers, cfg.channels, cfg.num_heads, expect->num_layers, expect->channels, expect->num_heads);
    size_t n = gpt2_param_layout(&cfg).num_parameters;
    if (version == MODEL_VERSION_FP32) {
        fread_check(params, sizeof(float), n, f, path);
    } else {
        // bf16 is the top half of an fp32: widen in place, back to front.
        uint16_t* half = (uint16_t*)params;
        fread_check(half, sizeof(uint16_t), n, f, path);
        for (size_t i = n; i-- > 0;) {
            uint32_t bits = (uint32_t)half[i] << 16;
            memcpy(&params[i], &bits, sizeof(float));
        }
    }
    fclose(f);
}

void state_file_write(const char* path, const GPT2Config* cfg, const TrainState* st, const float* m,
                      const float* v, size_t n) {
    int32_t h[HEADER_INTS] = {0};
    h[0] = STATE_MAGIC;
    h[1] = STATE_VERSION;
    header_put_config(h, cfg);
    h[8] = st->B; h[9] = st->T; h[10] = st->num_processes;
    int64_t w[STATE_WORDS] = {0};
    w[0] = st->step;
    w[1] = (int64_t)st->rng_state;
    w[2] = st->train_pos.epoch; w[3] = st->train_pos.shard_pos; w[4] = st->train_pos.window_pos;
    w[5] = (int64_t)n;
    char tmp[4200];
    FILE* f = atomic_open(path, tmp, sizeof(tmp));
    fwrite_check(h, sizeof(int32_t), HEADER_INTS, f, tmp);
    fwrite_check(w, sizeof(int64_t), STATE_WORDS, f, tmp);
    fwrite_check(m, sizeof(float), n, f, tmp);
    fwrite_check(v, sizeof(float), n, f, tmp);
    atomic_close(f, tmp, path);
}

void state_file_read(const char* path, const GPT2Config* cfg, TrainState* st, float* m, float* v, size_t n) {
    FILE* f = fopen_check(path, "rb");
    long size = file_size(f, path);
    int32_t h[HEADER_INTS];
    int64_t w[STATE_WORDS];
    long expect = (long)(sizeof(h) + sizeof(w) + 2 * n * sizeof(float));
    if (size < (long)sizeof(h)) fatal("state file %s is too small (%ld bytes) to hold a header", path, size);
    fread_check(h, sizeof(int32_t), HEADER_INTS, f, path);
    if (h[0] != STATE_MAGIC) fatal("state file %s has magic %d, expected %d (a training-state file)", path, h[0], STATE_MAGIC);
    if (h[1] != STATE_VERSION) fatal("state file %s has version %d, expected %d", path, h[1], STATE_VERSION);
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
    fread_check(m, sizeof(float), n, f, path);
    fread_check(v, sizeof(float), n, f, path);
    fclose(f);
}
