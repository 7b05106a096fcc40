// checkpoint.c: reading and writing model and training-state files (see checkpoint.h).
//
// Every check returns its reason into a caller's buffer (the *_check and *_read_head helpers), so
// the same code serves the engines' fatal readers and checkpoint_verify, which must survive a
// damaged file to try an older one. Sizes come from headers only after the header's shape has
// passed gpt2_config_check, whose bounds keep every product exact in 64 bits.
#include "checkpoint.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

#define HEADER_INTS 256
#define STATE_WORDS 32
#define SUM_WORD 13  // header words 13 and 14: the checksum; word 12: CHECKSUM_TAG
#define RUN_WORD 15  // header words 15 and 16: the run id of a checkpoint's files
#define STEP_WORD 17  // a model file's header word 17: its checkpoint's step
#define HEADER_BYTES ((long long)HEADER_INTS * 4)
#define WORDS_BYTES ((long long)STATE_WORDS * 8)
#define VERIFY_CHUNK ((size_t)1 << 20)  // floats per read when a file is checked through

// A fuzzing build (test/reliability) lets mutated files past their checksums, to test what lies behind.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define SUMS_DIFFER(got, want) ((got) != (want) && 0)
#else
#define SUMS_DIFFER(got, want) ((got) != (want))
#endif

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

void gpt2_config_diff(const GPT2Config* mine, const GPT2Config* file, char* out, size_t cap) {
    struct { const char* name; int a, b; } f[] = {
        {"L", mine->num_layers, file->num_layers},       {"C", mine->channels, file->channels},
        {"NH", mine->num_heads, file->num_heads},        {"V", mine->vocab_size, file->vocab_size},
        {"Vp", mine->padded_vocab_size, file->padded_vocab_size}, {"maxT", mine->max_seq_len, file->max_seq_len},
    };
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i].a == f[i].b || used >= cap) continue;
        int n = snprintf(out + used, cap - used, "%s%s %d in this run, %d in the file", used ? "; " : "", f[i].name,
                         f[i].a, f[i].b);
        if (n > 0) used += (size_t)n;
    }
}

static uint64_t header_sum(const int32_t* h) {
    return (uint64_t)(uint32_t)h[SUM_WORD] | (uint64_t)(uint32_t)h[SUM_WORD + 1] << 32;
}

static uint64_t header_run(const int32_t* h) {
    return (uint64_t)(uint32_t)h[RUN_WORD] | (uint64_t)(uint32_t)h[RUN_WORD + 1] << 32;
}

static void header_put_run(int32_t* h, uint64_t run_id) {
    h[RUN_WORD] = (int32_t)(uint32_t)run_id;
    h[RUN_WORD + 1] = (int32_t)(uint32_t)(run_id >> 32);
}

// Where entry i of the parameters lies, for an error: "lnfb[63]", or "wte[32323] (row 505 of 512: a
// padding row, past the vocabulary's 500)".
static void param_entry_name(const GPT2Config* cfg, size_t i, char* out, size_t cap) {
    ParamLayout lay = gpt2_param_layout(cfg);
    int k = GPT2_NUM_PARAM_TENSORS - 1;
    while (k > 0 && i < lay.tensors[k].offset) k--;
    size_t j = i - lay.tensors[k].offset;
    if (k == PT_WTE) {
        size_t row = j / (size_t)cfg->channels;
        char pad[96] = "";
        if (row >= (size_t)cfg->vocab_size)
            snprintf(pad, sizeof(pad), ": a padding row, past the vocabulary's %d", cfg->vocab_size);
        snprintf(out, cap, "wte[%zu] (row %zu of %d%s)", j, row, cfg->padded_vocab_size, pad);
    } else {
        snprintf(out, cap, "%s[%zu]", lay.tensors[k].name, j);
    }
}

// 0 with why naming the tensor when a value of data (entries first.. of the model) is not finite.
static int params_finite(const float* data, size_t count, size_t first, const GPT2Config* cfg, const char* path,
                         char* why, size_t cap) {
    size_t nonfinite = 0;
    for (size_t i = 0; i < count; i++) nonfinite += !isfinite(data[i]);  // no branch: it vectorizes
    if (nonfinite == 0) return 1;
    size_t bad = 0;
    while (isfinite(data[bad])) bad++;
    char where[160];
    param_entry_name(cfg, first + bad, where, sizeof(where));
    snprintf(why, cap, "model file %s: %s is %g; a model's weights must be finite (NaN or Inf there makes every step's "
             "gradients NaN)", path, where, data[bad]);
    return 0;
}

// The header as the checksum sees it: the checksum's own words zero.
static void sum_header(Checksum* c, const int32_t* h) {
    int32_t copy[HEADER_INTS];
    memcpy(copy, h, sizeof(copy));
    copy[SUM_WORD] = copy[SUM_WORD + 1] = 0;
    checksum_update(c, copy, sizeof(copy));
}

static long long file_bytes(FILE* f) {
    if (fseek(f, 0, SEEK_END) != 0) return -1;
    long long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) return -1;
    return n;
}

// Reads exactly n bytes or says how the file ended.
static int read_exact(FILE* f, void* dst, size_t n, const char* path, char* why, size_t cap) {
    if (fread(dst, 1, n, f) == n) return 1;
    snprintf(why, cap, "file %s is truncated (it ended while reading it)", path);
    return 0;
}

static long long pad4(long long n) { return (n + 3) / 4 * 4; }

// ---------------------------------------------------------------------------------------------
// Model files: header checks

// Checks a model header against the file's size; fills cfg and *elem (bytes per parameter).
static int model_header_check(const int32_t* h, long long size, const char* path, GPT2Config* cfg, int* elem,
                              char* why, size_t cap) {
    if (h[0] != MODEL_MAGIC) {
        snprintf(why, cap, "model file %s has magic %d, expected %d (a GPT-2 model file)", path, h[0], MODEL_MAGIC);
        return 0;
    }
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16) {
        snprintf(why, cap, "model file %s has version %d, expected %d (fp32) or %d (bf16)", path, h[1],
                 MODEL_VERSION_FP32, MODEL_VERSION_BF16);
        return 0;
    }
    *cfg = header_get_config(h);
    char what[4300];
    snprintf(what, sizeof(what), "model file %s", path);
    if (!gpt2_config_check(cfg, what, why, cap)) return 0;
    *elem = h[1] == MODEL_VERSION_FP32 ? 4 : 2;
    long long expect = HEADER_BYTES + (long long)gpt2_param_layout(cfg).num_parameters * *elem;
    if (size != expect) {
        snprintf(why, cap, "model file %s is %lld bytes, expected %lld for its header's model (L=%d C=%d Vp=%d maxT=%d)",
                 path, size, expect, cfg->num_layers, cfg->channels, cfg->padded_vocab_size, cfg->max_seq_len);
        return 0;
    }
    return 1;
}

// Opens a `kind` file ("model", "state") and reads its header into h, its size into *size; the file
// is left after the header. NULL with why filled in when it cannot be opened or is too small.
static FILE* header_open_try(const char* path, const char* kind, int32_t* h, long long* size, char* why, size_t cap) {
    FILE* f = fopen_read_try(path, why, cap);
    if (!f) return NULL;
    *size = file_bytes(f);
    if (*size < HEADER_BYTES) {
        snprintf(why, cap, "%s file %s is too small (%lld bytes) to hold a header", kind, path, *size);
        fclose(f);
        return NULL;
    }
    if (!read_exact(f, h, HEADER_BYTES, path, why, cap)) {
        fclose(f);
        return NULL;
    }
    return f;
}

// Opens a model file, checks its header; the file is left after the header.
static FILE* model_open_try(const char* path, int32_t* h, GPT2Config* cfg, int* elem, char* why, size_t cap) {
    long long size;
    FILE* f = header_open_try(path, "model", h, &size, why, cap);
    if (f && !model_header_check(h, size, path, cfg, elem, why, cap)) {
        fclose(f);
        return NULL;
    }
    return f;
}

// ---------------------------------------------------------------------------------------------
// State files: header, words and record

typedef struct {
    int32_t h[HEADER_INTS];
    int64_t w[STATE_WORDS];
    char record[RUN_RECORD_MAX];
    GPT2Config cfg;
    size_t n;        // parameters
    StateShard shard;  // the part of m and v this file holds (words 16-19; the whole when absent)
    Checksum sum;    // of the bytes read so far
} StateHead;

static int state_header_check(const int32_t* h, long long size, const char* path, StateHead* s, char* why,
                              size_t cap) {
    if (h[0] != STATE_MAGIC) {
        snprintf(why, cap, "state file %s has magic %d, expected %d (a training-state file)", path, h[0], STATE_MAGIC);
        return 0;
    }
    if (h[1] < 1 || h[1] > STATE_VERSION) {
        snprintf(why, cap, "state file %s has version %d, expected 1 to %d", path, h[1], STATE_VERSION);
        return 0;
    }
    s->cfg = header_get_config(h);
    char what[4300];
    snprintf(what, sizeof(what), "state file %s", path);
    if (!gpt2_config_check(&s->cfg, what, why, cap)) return 0;
    s->n = gpt2_param_layout(&s->cfg).num_parameters;
    if (h[8] <= 0 || h[9] <= 0 || h[10] <= 0) {
        snprintf(why, cap, "state file %s has batch B=%d T=%d ranks=%d, expected positive values", path, h[8], h[9], h[10]);
        return 0;
    }
    long long record = h[1] >= 3 ? h[11] : 0;
    if (record < 0 || record >= RUN_RECORD_MAX) {
        snprintf(why, cap, "state file %s has a run record of %lld bytes, expected 0 to %d", path, record, RUN_RECORD_MAX - 1);
        return 0;
    }
    if (h[1] >= 3 && h[12] != CHECKSUM_TAG) {
        snprintf(why, cap, "state file %s (version %d) has no checksum tag", path, h[1]);
        return 0;
    }
    (void)size;  // checked once the words say how much of m and v the file holds
    return 1;
}

static double word_double(int64_t w) {
    double d;
    memcpy(&d, &w, sizeof(d));
    return d;
}

static int64_t double_word(double d) {
    int64_t w;
    memcpy(&w, &d, sizeof(w));
    return w;
}

// The words' values that no writer produces: a damaged or forged file.
static int state_words_check(const StateHead* s, const char* path, char* why, size_t cap) {
    const int64_t* w = s->w;
    const char* bad = NULL;
    if (w[5] != (int64_t)s->n) bad = "parameter count (word 5) does not match its header's model";
    else if (w[0] < 0 || w[0] > CHECKPOINT_MAX_STEP) bad = "step (word 0) is negative or above 10^9";
    else if (w[2] < 0 || w[3] < 0 || w[4] < 0) bad = "data position (words 2-4) is negative";
    else if (s->h[1] >= 4 && (w[3] != 0 || w[4] != 0)) bad = "words 3-4 (unused since version 4) are not zero";
    else if (s->h[1] >= 2 && (w[8] < 0 || w[8] > w[0])) bad = "AdamW update count (word 8) is outside 0..step";
    else if (s->h[1] >= 2 && !(word_double(w[9]) >= 0 && isfinite(word_double(w[9]))))
        bad = "loss scale (word 9) is negative or not finite";
    else if (s->h[1] >= 2 && word_double(w[9]) != 0 && word_double(w[9]) < LOSS_SCALE_MIN)
        bad = "loss scale (word 9) is below the minimum of 1 (0 means none)";
    else if (s->h[1] >= 2 && w[10] < 0) bad = "loss-scale step count (word 10) is negative";
    else if (w[19] != 0 && (w[19] < 1 || w[19] > 1 << 20 || w[18] < 0 || w[18] >= w[19] || w[16] < 0 || w[17] < 0 ||
                            w[16] + w[17] > (int64_t)s->n))
        bad = "shard (words 16-19: first entry, entries, index, files) is not a part of the parameters";
    else if (s->h[1] >= 3) {
        if (w[11] < 0 || w[11] > w[0]) bad = "outlier-guard step count (word 11) is outside 0..step";
        for (int i = 12; i <= 15 && !bad; i++)
            if (!isfinite(word_double(w[i])) || ((i == 13 || i == 15) && word_double(w[i]) < 0))
                bad = "outlier-guard statistics (words 12-15) are not finite or a variance is negative";
    }
    if (bad) snprintf(why, cap, "state file %s: its %s", path, bad);
    return bad == NULL;
}

// Opens a state file and reads everything before m and v: header, words, record, all checked.
static FILE* state_open_try(const char* path, StateHead* s, char* why, size_t cap) {
    int32_t* h = s->h;
    long long size;
    FILE* f = header_open_try(path, "state", h, &size, why, cap);
    if (!f) return NULL;
    if (!state_header_check(h, size, path, s, why, cap) || !read_exact(f, s->w, WORDS_BYTES, path, why, cap)) {
        fclose(f);
        return NULL;
    }
    checksum_init(&s->sum);
    sum_header(&s->sum, h);
    checksum_update(&s->sum, s->w, WORDS_BYTES);
    long long rec = h[1] >= 3 ? h[11] : 0;
    // Words 16-19 say which part of m and v the file holds; zeros (files of one process, and every
    // file before sharding) mean all of it.
    int sharded = s->w[19] != 0;
    s->shard.first = sharded && s->w[16] >= 0 ? (size_t)s->w[16] : 0;
    s->shard.count = sharded && s->w[17] >= 0 ? (size_t)s->w[17] : s->n;
    s->shard.index = sharded ? (int)s->w[18] : 0;
    s->shard.files = sharded ? (int)s->w[19] : 1;
    if (s->shard.count > s->n || s->shard.first > s->n - s->shard.count) {
        snprintf(why, cap, "state file %s: its shard (words 16-17: entries %zu..+%zu) lies outside its %zu parameters",
                 path, s->shard.first, s->shard.count, s->n);
        fclose(f);
        return NULL;
    }
    long long expect = HEADER_BYTES + WORDS_BYTES + pad4(rec) + 8LL * (long long)s->shard.count;
    if (size != expect) {
        snprintf(why, cap, "state file %s is %lld bytes, expected %lld for its header (L=%d C=%d Vp=%d maxT=%d, %zu "
                 "entries of m and v)", path, size, expect, s->cfg.num_layers, s->cfg.channels,
                 s->cfg.padded_vocab_size, s->cfg.max_seq_len, s->shard.count);
        fclose(f);
        return NULL;
    }
    memset(s->record, 0, sizeof(s->record));
    if (rec > 0) {
        if (!read_exact(f, s->record, (size_t)pad4(rec), path, why, cap)) {
            fclose(f);
            return NULL;
        }
        checksum_update(&s->sum, s->record, (size_t)pad4(rec));
        // Text without NULs, zero padding after it: anything else is not what a writer wrote.
        if (memchr(s->record, '\0', (size_t)rec) != NULL) {
            snprintf(why, cap, "state file %s: its run record holds a NUL byte", path);
            fclose(f);
            return NULL;
        }
        for (long long i = rec; i < pad4(rec); i++) {
            if (s->record[i] != '\0') {
                snprintf(why, cap, "state file %s: its run record's padding is not zero", path);
                fclose(f);
                return NULL;
            }
        }
    }
    return f;
}

static void state_head_fill(const StateHead* s, TrainState* st, OptimizerCounters* oc) {
    const int64_t* w = s->w;
    // Fields one at a time: the caller's record buffer is as large as ours, no copy of the rest.
    st->B = s->h[8]; st->T = s->h[9]; st->num_processes = s->h[10];
    st->step = w[0];
    st->run_id = header_run(s->h);
    st->rng_state = (uint64_t)w[1];
    st->train_samples = s->h[1] >= 4 ? w[2] : -1;
    st->stats_count = 0;
    st->loss_mean = st->loss_var = st->norm_mean = st->norm_var = 0.0;
    memcpy(st->record, s->record, sizeof(st->record));
    if (s->h[1] == 1) {  // written before engines kept counters: every step was an update, no loss scaling
        oc->adam_steps = w[0];
        oc->loss_scale = 0.0;
        oc->scale_good_steps = 0;
        return;
    }
    oc->adam_steps = w[8];
    oc->loss_scale = word_double(w[9]);
    oc->scale_good_steps = w[10];
    if (s->h[1] >= 3) {
        st->stats_count = w[11];
        st->loss_mean = word_double(w[12]); st->loss_var = word_double(w[13]);
        st->norm_mean = word_double(w[14]); st->norm_var = word_double(w[15]);
    }
}

// ---------------------------------------------------------------------------------------------
// Writing

static void writer_write(CheckpointWriter* w, const void* data, size_t bytes) {
    fwrite_check(data, 1, bytes, w->f, w->tmp);
    checksum_update(&w->sum, data, bytes);
}

static void writer_begin(CheckpointWriter* w, const char* path, int32_t* header, size_t payload) {
    snprintf(w->path, sizeof(w->path), "%s", path);
    w->f = atomic_open(path, w->tmp, sizeof(w->tmp));
    w->expect = payload;
    w->done = 0;
    header[12] = CHECKSUM_TAG;
    header[SUM_WORD] = header[SUM_WORD + 1] = 0;  // filled in by checkpoint_commit
    checksum_init(&w->sum);
    writer_write(w, header, HEADER_BYTES);
}

static void model_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st) {
    int32_t h[HEADER_INTS] = {0};
    h[0] = MODEL_MAGIC;
    h[1] = MODEL_VERSION_FP32;
    header_put_config(h, cfg);
    if (st) {
        header_put_run(h, st->run_id);
        h[STEP_WORD] = (int32_t)st->step;  // at most CHECKPOINT_MAX_STEP: an int32
    }
    writer_begin(w, path, h, gpt2_param_layout(cfg).num_parameters);
}

void model_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg) { model_begin(w, path, cfg, NULL); }

void model_file_begin_checkpoint(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st) {
    model_begin(w, path, cfg, st);
}

void state_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st,
                      const OptimizerCounters* oc, size_t n) {
    StateShard whole = {0, n, 0, 1};
    state_file_begin_shard(w, path, cfg, st, oc, n, &whole);
}

void state_file_begin_shard(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st,
                            const OptimizerCounters* oc, size_t n, const StateShard* shard) {
    if (shard->files < 1 || shard->index < 0 || shard->index >= shard->files || shard->first + shard->count > n)
        fatal("writing %s: shard %d of %d (entries %zu..+%zu) is not a part of %zu parameters", path, shard->index,
              shard->files, shard->first, shard->count, n);
    size_t record = strnlen(st->record, RUN_RECORD_MAX);
    if (record >= RUN_RECORD_MAX) fatal("writing %s: the run record is not a string of under %d bytes", path, RUN_RECORD_MAX);
    int32_t h[HEADER_INTS] = {0};
    h[0] = STATE_MAGIC;
    h[1] = STATE_VERSION;
    header_put_config(h, cfg);
    h[8] = st->B; h[9] = st->T; h[10] = st->num_processes;
    h[11] = (int32_t)record;
    header_put_run(h, st->run_id);
    int64_t words[STATE_WORDS] = {0};
    words[0] = st->step;
    words[1] = (int64_t)st->rng_state;
    if (st->train_samples < 0) fatal("writing %s: the data position %lld is negative", path, (long long)st->train_samples);
    words[2] = st->train_samples;
    words[5] = (int64_t)n;
    words[8] = oc->adam_steps;
    words[9] = double_word(oc->loss_scale);
    words[10] = oc->scale_good_steps;
    words[11] = st->stats_count;
    words[12] = double_word(st->loss_mean); words[13] = double_word(st->loss_var);
    words[14] = double_word(st->norm_mean); words[15] = double_word(st->norm_var);
    if (shard->files > 1 || shard->count != n) {
        words[16] = (int64_t)shard->first; words[17] = (int64_t)shard->count;
        words[18] = shard->index; words[19] = shard->files;
    }
    writer_begin(w, path, h, 2 * shard->count);
    writer_write(w, words, WORDS_BYTES);
    char padded[RUN_RECORD_MAX + 4] = {0};
    memcpy(padded, st->record, record);
    writer_write(w, padded, (size_t)pad4((long long)record));
}

void checkpoint_put(CheckpointWriter* w, const float* data, size_t count) {
    if (w->done + count > w->expect)
        fatal("writing %s: %zu more values than the file holds", w->path, w->done + count - w->expect);
    writer_write(w, data, count * sizeof(float));
    w->done += count;
}

void checkpoint_commit(CheckpointWriter* w) {
    if (w->done != w->expect) fatal("writing %s: %zu of %zu values were written", w->path, w->done, w->expect);
    uint64_t sum = checksum_final(&w->sum);
    int32_t words[2] = {(int32_t)(uint32_t)sum, (int32_t)(uint32_t)(sum >> 32)};
    if (fseek(w->f, SUM_WORD * 4, SEEK_SET) != 0) fatal("cannot seek in file %s", w->tmp);
    fwrite_check(words, sizeof(int32_t), 2, w->f, w->tmp);
    atomic_close(w->f, w->tmp, w->path);
    w->f = NULL;
}

// ---------------------------------------------------------------------------------------------
// Reading, streamed

void model_file_read_config(const char* path, GPT2Config* cfg) {
    int32_t h[HEADER_INTS];
    int elem;
    char why[4600];
    FILE* f = model_open_try(path, h, cfg, &elem, why, sizeof(why));
    if (!f) fatal("%s", why);
    fclose(f);
}

uint64_t model_file_check(const char* path, GPT2Config* cfg) {
    CheckpointReader r;
    model_file_read_config(path, cfg);
    model_file_open_read(&r, path, cfg);
    // Every value is read (and checked finite by checkpoint_get), with or without a checksum.
    float* buf = (float*)malloc_check(VERIFY_CHUNK * sizeof(float), "model check buffer");
    for (size_t done = 0; done < r.expect; done += VERIFY_CHUNK)
        checkpoint_get(&r, buf, r.expect - done < VERIFY_CHUNK ? r.expect - done : VERIFY_CHUNK);
    free(buf);
    uint64_t sum = checksum_final(&r.sum);
    checkpoint_close(&r);
    return sum;
}

void model_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* expect) {
    int32_t h[HEADER_INTS];
    GPT2Config cfg;
    int elem;
    char why[4600];
    r->f = model_open_try(path, h, &cfg, &elem, why, sizeof(why));
    if (!r->f) fatal("%s", why);
    if (!config_equal(&cfg, expect)) {
        char diff[512];
        gpt2_config_diff(expect, &cfg, diff, sizeof(diff));
        fatal("model file %s holds a different model than this run's: %s", path, diff);
    }
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->expect = gpt2_param_layout(&cfg).num_parameters;
    r->done = 0;
    r->bf16 = elem == 2;
    r->model = 1;
    r->cfg = cfg;
    r->run_id = header_run(h);
    r->step = h[STEP_WORD];
    r->has_sum = h[12] == CHECKSUM_TAG;
    r->want = header_sum(h);
    checksum_init(&r->sum);
    sum_header(&r->sum, h);
}

void state_file_open_read_shard(CheckpointReader* r, const char* path, const GPT2Config* cfg, TrainState* st,
                                OptimizerCounters* oc, size_t n, StateShard* shard) {
    static StateHead s;  // 8 KiB of record: not on an engine's stack
    char why[4600];
    FILE* f = state_open_try(path, &s, why, sizeof(why));
    if (!f) fatal("%s", why);
    if (!config_equal(&s.cfg, cfg)) {
        char diff[512];
        gpt2_config_diff(cfg, &s.cfg, diff, sizeof(diff));
        fatal("state file %s was written for another model than this run's: %s", path, diff);
    }
    if (s.n != n) fatal("state file %s holds %zu parameters, expected %zu", path, s.n, n);
    if (!state_words_check(&s, path, why, sizeof(why))) fatal("%s", why);
    state_head_fill(&s, st, oc);
    *shard = s.shard;
    r->f = f;
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->expect = 2 * s.shard.count;
    r->done = 0;
    r->bf16 = 0;
    r->model = 0;
    r->cfg = s.cfg;
    r->run_id = header_run(s.h);
    r->step = s.w[0];
    r->has_sum = s.h[1] >= 3;
    r->want = header_sum(s.h);
    r->sum = s.sum;
}

void state_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* cfg, TrainState* st,
                          OptimizerCounters* oc, size_t n) {
    StateShard shard;
    state_file_open_read_shard(r, path, cfg, st, oc, n, &shard);
    if (shard.files != 1)
        fatal("state file %s is shard %d of %d of a sharded checkpoint; expected a whole one", path, shard.index,
              shard.files);
}

void state_shard_path(char* out, size_t cap, const char* state_path, int index) {
    size_t len = strlen(state_path);
    if (index == 0) {
        snprintf(out, cap, "%s", state_path);
    } else if (len > 4 && strcmp(state_path + len - 4, ".bin") == 0) {
        snprintf(out, cap, "%.*s.rank%03d.bin", (int)(len - 4), state_path, index);
    } else {
        snprintf(out, cap, "%s.rank%03d", state_path, index);
    }
}

void state_read_range(const char* state_path, const GPT2Config* cfg, TrainState* st, OptimizerCounters* oc, size_t n,
                      size_t first, size_t count, StateSink sink, void* ctx, float* buf, size_t buf_floats) {
    CheckpointReader r;
    StateShard shard;
    state_file_open_read_shard(&r, state_path, cfg, st, oc, n, &shard);
    int files = shard.files;
    for (int k = 0; k < files; k++) {
        if (k > 0) {
            char path[4300];
            TrainState other;
            OptimizerCounters other_oc;
            state_shard_path(path, sizeof(path), state_path, k);
            state_file_open_read_shard(&r, path, cfg, &other, &other_oc, n, &shard);
            if (shard.files != files || shard.index != k || other.step != st->step ||
                other_oc.adam_steps != oc->adam_steps || other.run_id != st->run_id)
                fatal("state file %s does not belong with %s (shard %d of %d at step %lld of run %016llx, expected "
                      "shard %d of %d at step %lld of run %016llx)", path, state_path, shard.index, shard.files,
                      (long long)other.step, (unsigned long long)other.run_id, k, files, (long long)st->step,
                      (unsigned long long)st->run_id);
        } else if (shard.index != 0) {
            fatal("state file %s is shard %d of a checkpoint, expected its first", state_path, shard.index);
        }
        // m, then v, read through (their checksum covers the whole file); the overlap goes to sink.
        for (int which = 0; which < 2; which++) {
            for (size_t done = 0; done < shard.count;) {
                size_t k2 = shard.count - done < buf_floats ? shard.count - done : buf_floats;
                checkpoint_get(&r, buf, k2);
                size_t a = shard.first + done, b = a + k2;  // entries of this piece
                size_t lo = a > first ? a : first, hi = b < first + count ? b : first + count;
                if (lo < hi) sink(ctx, which, lo - first, buf + (lo - a), hi - lo);
                done += k2;
            }
        }
        checkpoint_close(&r);
    }
}

void checkpoint_get(CheckpointReader* r, float* data, size_t count) {
    if (r->done + count > r->expect)
        fatal("reading %s: asked for %zu values past its end", r->path, r->done + count - r->expect);
    if (!r->bf16) {
        fread_check(data, sizeof(float), count, r->f, r->path);
        checksum_update(&r->sum, data, count * sizeof(float));
    } else {
        // bf16 is the top half of an fp32: read into the back half of data, widen front to back.
        uint16_t* half = (uint16_t*)(data + count) - count;
        fread_check(half, sizeof(uint16_t), count, r->f, r->path);
        checksum_update(&r->sum, half, count * sizeof(uint16_t));
        for (size_t i = 0; i < count; i++) {
            uint32_t bits = (uint32_t)half[i] << 16;
            memcpy(&data[i], &bits, sizeof(float));
        }
    }
    char why[4600];
    if (r->model && !params_finite(data, count, r->done, &r->cfg, r->path, why, sizeof(why))) fatal("%s", why);
    r->done += count;
    if (r->done == r->expect && r->has_sum && SUMS_DIFFER(checksum_final(&r->sum), r->want))
        fatal("file %s is damaged: its checksum is %016llx, its header says %016llx", r->path,
              (unsigned long long)checksum_final(&r->sum), (unsigned long long)r->want);
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

void model_file_write_checkpoint(const char* path, const GPT2Config* cfg, const float* params, const TrainState* st) {
    CheckpointWriter w;
    model_file_begin_checkpoint(&w, path, cfg, st);
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

// ---------------------------------------------------------------------------------------------
// Verifying a pair

// Reads the rest of f through sum; with check_moments, the values are AdamW's m then v (n each):
// m finite, v finite and >= 0, as every update leaves them. With model (a model file's config), the
// values are its weights: the first that is not finite goes into *nonfinite (reading goes on, so a
// damaged file is still called damaged by its checksum first).
static int verify_payload(FILE* f, Checksum* sum, size_t count, int elem, size_t n, int check_moments,
                          const GPT2Config* model, char* nonfinite, size_t nonfinite_cap, const char* path, char* why,
                          size_t cap) {
    float* buf = (float*)malloc_check(VERIFY_CHUNK * sizeof(float), "checkpoint check buffer");
    int ok = 1;
    for (size_t done = 0; done < count && ok;) {
        size_t k = count - done < VERIFY_CHUNK ? count - done : VERIFY_CHUNK;
        if (!read_exact(f, buf, k * (size_t)elem, path, why, cap)) { ok = 0; break; }
        checksum_update(sum, buf, k * (size_t)elem);
        if (model && !nonfinite[0]) {
            if (elem == 2) {  // bf16: widen in place, back to front
                const uint16_t* half = (const uint16_t*)buf;
                for (size_t i = k; i-- > 0;) {
                    uint32_t bits = (uint32_t)half[i] << 16;
                    memcpy(&buf[i], &bits, sizeof(float));
                }
            }
            params_finite(buf, k, done, model, path, nonfinite, nonfinite_cap);
        }
        for (size_t i = 0; i < k && check_moments; i++) {
            int is_v = done + i >= n;
            if (!isfinite(buf[i]) || (is_v && buf[i] < 0)) {
                snprintf(why, cap, "state file %s: AdamW %s[%zu] is %g, which no update leaves", path, is_v ? "v" : "m",
                         (done + i) % n, buf[i]);
                ok = 0;
                break;
            }
        }
        done += k;
    }
    free(buf);
    return ok;
}

static int sum_matches(const Checksum* sum, uint64_t want, const char* kind, const char* path, char* why, size_t cap) {
    uint64_t got = checksum_final(sum);
    if (!SUMS_DIFFER(got, want)) return 1;
    snprintf(why, cap, "%s file %s is damaged: its checksum is %016llx, its header says %016llx", kind, path,
             (unsigned long long)got, (unsigned long long)want);
    return 0;
}

CheckpointStatus checkpoint_verify(const char* model_path, const char* state_path, const GPT2Config* cfg,
                                   TrainState* st, OptimizerCounters* oc, char* why, size_t cap) {
    static StateHead s;
    int32_t h[HEADER_INTS];
    GPT2Config mcfg;
    int elem;
    // The state file first: it says whether its model file must carry a checksum.
    FILE* f = state_open_try(state_path, &s, why, cap);
    if (!f) return CHECKPOINT_DAMAGED;
    int ok = verify_payload(f, &s.sum, 2 * s.shard.count, 4, s.shard.count, 1, NULL, NULL, 0, state_path, why, cap) &&
             (s.h[1] < 3 || sum_matches(&s.sum, header_sum(s.h), "state", state_path, why, cap)) &&
             state_words_check(&s, state_path, why, cap);
    fclose(f);
    if (!ok) return CHECKPOINT_DAMAGED;
    if (s.shard.index != 0) {
        snprintf(why, cap, "state file %s is shard %d of a checkpoint, expected its first", state_path, s.shard.index);
        return CHECKPOINT_DAMAGED;
    }
    // A sharded checkpoint is whole only with every rank's file: each intact, of this step, and
    // together covering every parameter once, in order.
    static StateHead o;
    size_t covered = s.shard.first + s.shard.count;
    for (int k = 1; k < s.shard.files && ok; k++) {
        char path[4300];
        state_shard_path(path, sizeof(path), state_path, k);
        FILE* g = state_open_try(path, &o, why, cap);
        if (!g) return CHECKPOINT_DAMAGED;
        ok = verify_payload(g, &o.sum, 2 * o.shard.count, 4, o.shard.count, 1, NULL, NULL, 0, path, why, cap) &&
             sum_matches(&o.sum, header_sum(o.h), "state", path, why, cap) && state_words_check(&o, path, why, cap);
        fclose(g);
        if (ok && (o.shard.index != k || o.shard.files != s.shard.files || o.w[0] != s.w[0] || o.shard.first != covered)) {
            snprintf(why, cap, "state file %s is not shard %d of %d at step %lld following entry %zu (it says shard %d "
                     "of %d at step %lld from entry %zu)", path, k, s.shard.files, (long long)s.w[0], covered,
                     o.shard.index, o.shard.files, (long long)o.w[0], o.shard.first);
            ok = 0;
        }
        if (ok && header_run(o.h) != header_run(s.h)) {
            snprintf(why, cap, "state file %s is from another run than %s (run id %016llx, not %016llx): a checkpoint's "
                     "files must all come from one run", path, state_path, (unsigned long long)header_run(o.h),
                     (unsigned long long)header_run(s.h));
            ok = 0;
        }
        covered = o.shard.first + o.shard.count;
    }
    if (ok && covered != s.n) {
        snprintf(why, cap, "state file %s: its %d shard files cover %zu of %zu parameters", state_path, s.shard.files,
                 covered, s.n);
        ok = 0;
    }
    if (!ok) return CHECKPOINT_DAMAGED;

    f = model_open_try(model_path, h, &mcfg, &elem, why, cap);
    if (!f) return CHECKPOINT_DAMAGED;
    Checksum sum;
    checksum_init(&sum);
    sum_header(&sum, h);
    size_t n = gpt2_param_layout(&mcfg).num_parameters;
    char nonfinite[4600] = "";
    ok = verify_payload(f, &sum, n, elem, n, 0, &mcfg, nonfinite, sizeof(nonfinite), model_path, why, cap);
    fclose(f);
    if (!ok) return CHECKPOINT_DAMAGED;
    if (h[12] == CHECKSUM_TAG) {
        if (!sum_matches(&sum, header_sum(h), "model", model_path, why, cap)) return CHECKPOINT_DAMAGED;
    } else if (s.h[1] >= 3) {
        snprintf(why, cap, "model file %s has no checksum, though its state file %s (version %d) does", model_path,
                 state_path, s.h[1]);
        return CHECKPOINT_DAMAGED;
    }
    if (nonfinite[0]) {  // no run writes these: FP32 and BF16 stop at a non-finite step, FP16 skips it
        snprintf(why, cap, "%s", nonfinite);
        return CHECKPOINT_DAMAGED;
    }
    // One run, one step: the model file must be the one written with these state files.
    if (header_run(h) != header_run(s.h) || (header_run(h) != 0 && h[STEP_WORD] != s.w[0])) {
        snprintf(why, cap, "model file %s is not from the run and step of its state file %s (model: run %016llx step "
                 "%d; state: run %016llx step %lld): a checkpoint's files must all come from one run", model_path,
                 state_path, (unsigned long long)header_run(h), h[STEP_WORD], (unsigned long long)header_run(s.h),
                 (long long)s.w[0]);
        return CHECKPOINT_DAMAGED;
    }

    char diff[512];
    if (!config_equal(&mcfg, &s.cfg)) {
        gpt2_config_diff(&mcfg, &s.cfg, diff, sizeof(diff));
        snprintf(why, cap, "model file %s and state file %s hold different models (model file vs state file: %s)",
                 model_path, state_path, diff);
        return CHECKPOINT_DAMAGED;
    }
    if (!config_equal(&mcfg, cfg)) {
        gpt2_config_diff(cfg, &mcfg, diff, sizeof(diff));
        snprintf(why, cap, "checkpoint %s holds a different model than this run's: %s", model_path, diff);
        return CHECKPOINT_MISMATCH;
    }
    state_head_fill(&s, st, oc);
    return CHECKPOINT_OK;
}

// ---- llm.c's state files ----

#define LLMC_STATE_MAGIC 20240527
#define LLMC_STATE_VERSION 1
#define LLMC_MT19937_BYTES 2520  // its mt19937_state: seed (8), left and next (8), 624 words, 2 words
#define LLMC_HEADER_BYTES 1024

void llmc_state_path(const char* dir, long step, int rank, char* path, size_t cap) {
    snprintf(path, cap, "%s/state_%08ld_%05d.bin", dir, step, rank);
}

static void llmc_read_exact(FILE* f, const char* path, void* out, size_t bytes, const char* what) {
    if (fread(out, 1, bytes, f) != bytes) fatal("llm.c state file %s is truncated: it ends inside %s", path, what);
}

// Opens one rank's file and reads its header into ls (magic and version checked); *size: its bytes.
static FILE* llmc_file_open(const char* path, LlmcState* ls, uint64_t* size) {
    FILE* f = fopen(path, "rb");
    if (!f) fatal("llm.c state file %s cannot be opened: %s", path, strerror(errno));
    int32_t h[256];
    llmc_read_exact(f, path, h, sizeof(h), "its 1024-byte header");
    if (h[0] != LLMC_STATE_MAGIC)
        fatal("llm.c state file %s has magic %d, expected %d (llm.c's state_STEP_RANK.bin)", path, h[0], LLMC_STATE_MAGIC);
    if (h[1] != LLMC_STATE_VERSION)
        fatal("llm.c state file %s has version %d, expected %d", path, h[1], LLMC_STATE_VERSION);
    memset(ls, 0, sizeof(*ls));
    ls->num_processes = h[2];
    ls->rank = h[3];
    ls->master_weights = h[4];
    ls->shuffle = h[5];
    ls->step = h[10];
    memcpy(&ls->shard_idx, &h[30], 8);
    memcpy(&ls->sample_idx, &h[32], 8);
    if (ls->step < 0) fatal("llm.c state file %s holds step %lld, expected a step >= 0", path, (long long)ls->step);
    if ((ls->master_weights != 0 && ls->master_weights != 1) || (ls->shuffle != 0 && ls->shuffle != 1))
        fatal("llm.c state file %s: header words 4 and 5 are %d and %d, expected 0 or 1 each", path, ls->master_weights,
              ls->shuffle);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) fatal("llm.c state file %s cannot be read: %s", path, strerror(errno));
    *size = (uint64_t)sb.st_size;
    return f;
}

// The size a file of `entries` AdamW entries a buffer would have: header, m, v (and master
// weights), and with shuffling the loader's tail, whose two counts are read from where they would
// stand. 0 when those counts cannot be this file's (the entries are then not the file's).
static uint64_t llmc_size_for(FILE* f, uint64_t size, const LlmcState* ls, uint64_t entries) {
    uint64_t expect = LLMC_HEADER_BYTES + (uint64_t)(2 + ls->master_weights) * entries * sizeof(float);
    if (!ls->shuffle) return expect;
    uint64_t nshards = 0, nsamples = 0;
    if (size < expect + 8 || fseek(f, (long)expect, SEEK_SET) != 0 || fread(&nshards, 8, 1, f) != 1 ||
        nshards > (size - expect) / 4)
        return 0;
    uint64_t at = expect + 8 + nshards * 4;
    if (size < at + 8 || fseek(f, (long)at, SEEK_SET) != 0 || fread(&nsamples, 8, 1, f) != 1 ||
        nsamples > (size - expect) / 4)
        return 0;
    return at + 8 + nsamples * 4 + LLMC_MT19937_BYTES;
}

// llm.c's ZeRO-1 (llmc/zero.cuh, gpt2_update): every tensor is cut per layer (the 12 layer tensors)
// or whole (wte, wpe, lnf), each piece split into num_processes equal parts; a rank's buffer holds its
// part of every piece, tensor after tensor, layer after layer. Fatal when a piece does not split.
static void llmc_shard_check(const ParamLayout* lay, int layers, int nproc, const char* path) {
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) {
        const ParamTensor* t = &lay->tensors[i];
        size_t piece = (i >= PT_LN1W && i <= PT_FCPROJB) ? t->numel / (size_t)layers : t->numel;
        if (piece % (size_t)nproc != 0)
            fatal("llm.c state file %s holds 1/%d of the parameters (ZeRO-1), but tensor %s's %zu entries a layer do "
                  "not split %d ways as llm.c's sharding needs (another model?)", path, nproc, t->name, piece, nproc);
    }
}

// Places rank `rank`'s buffer (part) into full (the whole, in parameter order).
static void llmc_shard_scatter(const ParamLayout* lay, int layers, int nproc, int rank, const float* part, float* full) {
    size_t at = 0;
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) {
        const ParamTensor* t = &lay->tensors[i];
        int slices = (i >= PT_LN1W && i <= PT_FCPROJB) ? layers : 1;
        size_t piece = t->numel / (size_t)slices, share = piece / (size_t)nproc;
        for (int l = 0; l < slices; l++) {
            memcpy(full + t->offset + (size_t)l * piece + (size_t)rank * share, part + at, share * sizeof(float));
            at += share;
        }
    }
}

void llmc_states_read(const char* dir, long step, const GPT2Config* cfg, LlmcState* ls, float* m, float* v,
                      float* master) {
    ParamLayout lay = gpt2_param_layout(cfg);
    size_t n = lay.num_parameters;
    char path[4200], path0[4200];
    llmc_state_path(dir, step, 0, path0, sizeof(path0));
    uint64_t size;
    FILE* f = llmc_file_open(path0, ls, &size);
    int nproc = ls->num_processes;
    if (nproc < 1) fatal("llm.c state file %s says %d processes wrote it, expected 1 or more", path0, nproc);
    if (ls->rank != 0) fatal("llm.c state file %s is rank %d's, expected rank 0's (its name)", path0, ls->rank);
    // Without ZeRO every rank keeps all of m and v; with ZeRO-1 (llm.c's -z 1, only when the
    // parameters split evenly) each keeps 1/nproc. llm.c's header does not say which: the size does.
    uint64_t whole = llmc_size_for(f, size, ls, n);
    uint64_t part = nproc > 1 && n % (size_t)nproc == 0 ? llmc_size_for(f, size, ls, n / (size_t)nproc) : 0;
    if (size == part) ls->zero = 1;
    else if (size != whole) {
        uint64_t plain = LLMC_HEADER_BYTES + (uint64_t)(2 + ls->master_weights) * n * sizeof(float);
        char alt[160] = "";
        if (nproc > 1 && n % (size_t)nproc == 0)
            snprintf(alt, sizeof(alt), " or %llu (1/%d of them each, llm.c's ZeRO-1)",
                     (unsigned long long)(LLMC_HEADER_BYTES + (plain - LLMC_HEADER_BYTES) / (uint64_t)nproc), nproc);
        fatal("llm.c state file %s is %llu bytes; a model of %zu parameters needs %llu%s (header, m, v%s%s)%s", path0,
              (unsigned long long)size, n, (unsigned long long)(whole ? whole : plain), alt,
              ls->master_weights ? ", master weights" : "", ls->shuffle ? ", the shuffled loader's state" : "",
              size > plain ? ": the file is longer (another model?)" : ": the file is truncated");
    }
    size_t entries = ls->zero ? n / (size_t)nproc : n;
    if (ls->zero) llmc_shard_check(&lay, cfg->num_layers, nproc, path0);
    float* buf = m && ls->zero ? (float*)malloc_check(entries * sizeof(float), "an llm.c state buffer") : NULL;
    // Every rank's file: all of one checkpoint (same header but the rank, same size); with ZeRO-1
    // each adds its part, without it rank 0's copy is the state (the others hold the same).
    for (int k = 0; k < nproc; k++) {
        LlmcState o;
        if (k > 0) {
            fclose(f);
            llmc_state_path(dir, step, k, path, sizeof(path));
            FILE* g = fopen(path, "rb");
            if (!g)
                fatal("llm.c's checkpoint of step %ld has no state file %s (%s): rank 0's file %s says %d processes "
                      "wrote it", step, path, strerror(errno), path0, nproc);
            fclose(g);
            f = llmc_file_open(path, &o, &size);
            if (o.num_processes != nproc)
                fatal("llm.c state file %s says %d processes wrote it; rank 0's file %s says %d", path, o.num_processes,
                      path0, nproc);
            if (o.rank != k) fatal("llm.c state file %s is rank %d's, expected rank %d's (its name)", path, o.rank, k);
            const char* field = o.step != ls->step ? "step" : o.master_weights != ls->master_weights ? "master weights"
                                : o.shuffle != ls->shuffle ? "shuffle" : o.shard_idx != ls->shard_idx ? "shard index"
                                : o.sample_idx != ls->sample_idx ? "sample index" : NULL;
            if (field)
                fatal("llm.c state file %s disagrees with rank 0's %s on the %s (header words 4, 5, 10, 30-33 must be "
                      "equal): not one checkpoint", path, path0, field);
            uint64_t want = llmc_size_for(f, size, &o, entries);
            if (size != want)
                fatal("llm.c state file %s is %llu bytes; like rank 0's %s it should hold %zu entries a buffer, %llu "
                      "bytes", path, (unsigned long long)size, path0, entries, (unsigned long long)want);
        }
        if (!m || (k > 0 && !ls->zero)) continue;
        fseek(f, LLMC_HEADER_BYTES, SEEK_SET);
        float* outs[3] = {m, v, master};
        const char* names[3] = {"AdamW m", "AdamW v", "the master weights"};
        for (int b = 0; b < 2 + ls->master_weights; b++) {
            if (!outs[b]) break;
            float* dst = ls->zero ? buf : outs[b];
            llmc_read_exact(f, k ? path : path0, dst, entries * sizeof(float), names[b]);
            if (ls->zero) llmc_shard_scatter(&lay, cfg->num_layers, nproc, k, buf, outs[b]);
        }
    }
    fclose(f);
    free(buf);
    if (m) {
        for (size_t i = 0; i < n; i++)
            if (!isfinite(m[i]) || !isfinite(v[i]) || v[i] < 0.0f)
                fatal("llm.c state files %s...: AdamW entry %zu is m=%g v=%g, expected finite values and v >= 0",
                      path0, i, m[i], v[i]);
    }
    if (nproc < 99999) {  // a file of one more rank: left from another run, which these are not
        llmc_state_path(dir, step, nproc, path, sizeof(path));
        struct stat sb;
        if (stat(path, &sb) == 0)
            fatal("llm.c state file %s is there, but rank 0's file %s says %d process%s wrote the checkpoint", path,
                  path0, nproc, nproc == 1 ? "" : "es");
    }
}
