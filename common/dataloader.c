// dataloader.c: reading and writing data shards, and batching them (see dataloader.h).
#define _POSIX_C_SOURCE 200809L
#include "dataloader.h"

#include <glob.h>
#include <string.h>

#include "rng.h"
#include "util.h"

void shard_write_stream(FILE* f, const char* path, const uint16_t* tokens, size_t n) {
    if (n > INT32_MAX) fatal("shard %s: %zu tokens exceed the format's limit of %d", path, n, INT32_MAX);
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int32_t)n;
    fwrite_check(header, sizeof(int32_t), SHARD_HEADER_INTS, f, path);
    fwrite_check(tokens, sizeof(uint16_t), n, f, path);
}

void shard_write(const char* path, const uint16_t* tokens, size_t n) {
    char tmp[4200];
    FILE* f = atomic_open(path, tmp, sizeof(tmp));
    shard_write_stream(f, tmp, tokens, n);
    atomic_close(f, tmp, path);
}

size_t shard_open(const char* path, FILE** f_out) {
    FILE* f = fopen_check(path, "rb");
    long size = file_size(f, path);
    int32_t header[SHARD_HEADER_INTS];
    if (size < (long)sizeof(header)) fatal("data file %s is too small to be a shard (%ld bytes)", path, size);
    fread_check(header, sizeof(int32_t), SHARD_HEADER_INTS, f, path);
    if (header[0] != SHARD_MAGIC)
        fatal("data file %s has magic %d, expected %d (a token shard)", path, header[0], SHARD_MAGIC);
    if (header[1] != SHARD_VERSION)
        fatal("data file %s has version %d, expected %d", path, header[1], SHARD_VERSION);
    if (header[2] < 0) fatal("data file %s has a negative token count", path);
    long expect = (long)sizeof(header) + (long)header[2] * 2;
    if (size != expect)
        fatal("data file %s is %ld bytes but its header says %d tokens (%ld bytes)", path, size, header[2], expect);
    if (f_out) *f_out = f; else fclose(f);
    return (size_t)header[2];
}

#define CHECK_CHUNK ((size_t)1 << 20)  // tokens per read

size_t shard_check(const char* path, int vocab_size, Checksum* sum) {
    FILE* f;
    size_t n = shard_open(path, &f);
    uint16_t* buf = (uint16_t*)malloc_check(CHECK_CHUNK * sizeof(uint16_t), "shard check buffer");
    if (sum) {
        uint64_t count = n;  // shard boundaries count too: two shards are not their concatenation
        checksum_update(sum, &count, sizeof(count));
    }
    for (size_t done = 0; done < n;) {
        size_t k = n - done < CHECK_CHUNK ? n - done : CHECK_CHUNK;
        fread_check(buf, sizeof(uint16_t), k, f, path);
        for (size_t i = 0; i < k; i++) {
            if (buf[i] >= vocab_size)
                fatal("data file %s: token %u at position %zu is out of range (vocabulary has %d tokens)", path, buf[i],
                      done + i, vocab_size);
        }
        if (sum) checksum_update(sum, buf, k * sizeof(uint16_t));
        done += k;
    }
    free(buf);
    fclose(f);
    return n;
}

uint16_t* shard_load(const char* path, size_t* n_out) {
    FILE* f;
    size_t n = shard_open(path, &f);
    uint16_t* tokens = (uint16_t*)malloc_check(n * sizeof(uint16_t), path);
    fread_check(tokens, sizeof(uint16_t), n, f, path);
    fclose(f);
    *n_out = n;
    return tokens;
}

static int64_t dataloader_windows(const DataLoader* dl, int64_t shard) {
    size_t span = (size_t)dl->B * dl->T * dl->nproc;
    return dl->ntok[shard] < 1 ? 0 : (int64_t)((dl->ntok[shard] - 1) / span);
}

// The permutation of [0, n) for (seed, a, b): identity when not shuffling.
static void seeded_permutation(int64_t* out, int64_t n, int shuffle, uint64_t seed, uint64_t a, uint64_t b) {
    for (int64_t i = 0; i < n; i++) out[i] = i;
    if (!shuffle) return;
    uint64_t s = rng_seed(seed ^ splitmix64(a * 0x100000001B3ull + b + 1));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&s, (uint64_t)i + 1);
        int64_t t = out[i]; out[i] = out[j]; out[j] = t;
    }
}

// Makes pos point at an existing window, moving past empty shards and epochs; opens the shard.
static void dataloader_settle(DataLoader* dl) {
    for (;;) {
        if (dl->pos.shard_pos >= dl->nfiles) {
            dl->pos.epoch++;
            dl->pos.shard_pos = 0;
            dl->pos.window_pos = 0;
        }
        if (dl->order_epoch != dl->pos.epoch) {
            seeded_permutation(dl->shard_order, dl->nfiles, dl->shuffle, dl->seed, (uint64_t)dl->pos.epoch, 0xFFFFFFFFu);
            dl->order_epoch = dl->pos.epoch;
            dl->loaded_shard = -1;
        }
        int64_t shard = dl->shard_order[dl->pos.shard_pos];
        if (dl->pos.window_pos < dataloader_windows(dl, shard)) {
            if (dl->loaded_shard != shard) {
                if (dl->file) fclose(dl->file);
                shard_open(dl->files[shard], &dl->file);
                seeded_permutation(dl->window_order, dataloader_windows(dl, shard), dl->shuffle, dl->seed,
                                   (uint64_t)dl->pos.epoch, (uint64_t)shard);
                dl->loaded_shard = shard;
            }
            return;
        }
        dl->pos.shard_pos++;
        dl->pos.window_pos = 0;
    }
}

void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int nproc,
                     int shuffle, uint64_t seed, int vocab_size) {
    memset(dl, 0, sizeof(*dl));
    dl->B = B; dl->T = T; dl->rank = rank; dl->nproc = nproc;
    dl->shuffle = shuffle; dl->seed = seed; dl->vocab_size = vocab_size;
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == 0) globfree(&g);
        fatal("no data file matches %s", pattern);
    }
    if (g.gl_pathc > 1000000) fatal("data %s matches %zu files, more than the limit of 1000000", pattern, g.gl_pathc);
    dl->nfiles = (int)g.gl_pathc;
    dl->files = (char**)malloc_check(dl->nfiles * sizeof(char*), "data file names");
    dl->ntok = (size_t*)malloc_check(dl->nfiles * sizeof(size_t), "data file sizes");
    double t0 = wall_time_ms();
    Checksum sum;
    checksum_init(&sum);
    Progress progress;  // a large data set takes a while to check: say how far it is
    progress_begin(&progress, "data: checking", "shards", dl->nfiles);
    for (int i = 0; i < dl->nfiles; i++) {
        dl->files[i] = strdup(g.gl_pathv[i]);
        if (!dl->files[i]) fatal("out of host memory listing data files");
        dl->ntok[i] = shard_check(dl->files[i], vocab_size, &sum);
        progress_update(&progress, i + 1);
        dl->total_tokens += (long long)dl->ntok[i];
        int64_t w = dataloader_windows(dl, i);
        dl->total_windows += w;
        if (w > dl->nwin_max) dl->nwin_max = w;
    }
    globfree(&g);
    dl->data_sum = checksum_final(&sum);
    dl->check_ms = wall_time_ms() - t0;
    if (dl->total_windows == 0)
        fatal("data %s: no shard holds B*T*ranks+1 = %lld tokens (B=%d, T=%d, ranks=%d)", pattern,
              (long long)B * T * nproc + 1, B, T, nproc);
    dl->shard_order = (int64_t*)malloc_check(dl->nfiles * sizeof(int64_t), "shard order");
    dl->window_order = (int64_t*)malloc_check(dl->nwin_max * sizeof(int64_t), "window order");
    dl->buf = (uint16_t*)malloc_check(((size_t)B * T + 1) * sizeof(uint16_t), "batch buffer");
    dl->inputs = (int*)malloc_check((size_t)B * T * sizeof(int), "batch inputs");
    dl->targets = (int*)malloc_check((size_t)B * T * sizeof(int), "batch targets");
    dl->loaded_shard = -1;
    dataloader_reset(dl);
}

void dataloader_next_batch(DataLoader* dl) {
    dataloader_settle(dl);
    int64_t shard = dl->loaded_shard;
    size_t BT = (size_t)dl->B * dl->T;
    size_t start = (size_t)dl->window_order[dl->pos.window_pos] * BT * dl->nproc + (size_t)dl->rank * BT;
    const char* path = dl->files[shard];
    if (fseek(dl->file, (long)(SHARD_HEADER_INTS * sizeof(int32_t) + start * sizeof(uint16_t)), SEEK_SET) != 0)
        fatal("cannot seek in data file %s", path);
    fread_check(dl->buf, sizeof(uint16_t), BT + 1, dl->file, path);
    for (size_t i = 0; i <= BT; i++) {
        if (dl->buf[i] >= dl->vocab_size)
            fatal("data file %s: token %u at position %zu is out of range (vocabulary has %d tokens)", path,
                  dl->buf[i], start + i, dl->vocab_size);
    }
    for (size_t i = 0; i < BT; i++) {
        dl->inputs[i] = dl->buf[i];
        dl->targets[i] = dl->buf[i + 1];
    }
    dl->pos.window_pos++;
    if (dl->pos.window_pos >= dataloader_windows(dl, shard)) {
        dl->pos.shard_pos++;
        dl->pos.window_pos = 0;
    }
}

void dataloader_reset(DataLoader* dl) {
    DataLoaderPos zero = {0, 0, 0};
    dataloader_set_pos(dl, zero);
}

DataLoaderPos dataloader_get_pos(const DataLoader* dl) { return dl->pos; }

int64_t dataloader_batches_before(DataLoader* dl, DataLoaderPos pos, char* why, size_t cap) {
    int64_t before;
    if (pos.epoch < 0 || pos.shard_pos < 0 || pos.shard_pos > dl->nfiles || pos.window_pos < 0 ||
        __builtin_mul_overflow(pos.epoch, dl->total_windows, &before)) {
        snprintf(why, cap, "data position (epoch %lld, shard %lld, window %lld) does not fit the %d data files",
                 (long long)pos.epoch, (long long)pos.shard_pos, (long long)pos.window_pos, dl->nfiles);
        return -1;
    }
    // That epoch's shard order; the loader recomputes its own after any set_pos.
    seeded_permutation(dl->shard_order, dl->nfiles, dl->shuffle, dl->seed, (uint64_t)pos.epoch, 0xFFFFFFFFu);
    dl->order_epoch = -1;
    for (int64_t i = 0; i < pos.shard_pos; i++) before += dataloader_windows(dl, dl->shard_order[i]);
    // Inside a shard's windows, or at the start of a shard (which may have none: the loader skips it).
    int64_t here = pos.shard_pos < dl->nfiles ? dataloader_windows(dl, dl->shard_order[pos.shard_pos]) : 0;
    if (pos.window_pos != 0 && pos.window_pos >= here) {
        snprintf(why, cap, "data position (epoch %lld, shard %lld, window %lld) is past that shard's %lld windows",
                 (long long)pos.epoch, (long long)pos.shard_pos, (long long)pos.window_pos, (long long)here);
        return -1;
    }
    if (__builtin_add_overflow(before, pos.window_pos, &before)) {
        snprintf(why, cap, "data position (epoch %lld, ...) is too far", (long long)pos.epoch);
        return -1;
    }
    return before;
}

void dataloader_set_pos(DataLoader* dl, DataLoaderPos pos) {
    char why[256];
    if (dataloader_batches_before(dl, pos, why, sizeof(why)) < 0) fatal("%s", why);
    dl->pos = pos;
    dl->order_epoch = -1;  // orders are recomputed for the new position
}

void dataloader_fingerprint(const DataLoader* dl, char* out, size_t cap) {
    snprintf(out, cap, "%d shard%s, %lld tokens, checksum %016llx", dl->nfiles, dl->nfiles == 1 ? "" : "s",
             dl->total_tokens, (unsigned long long)dl->data_sum);
}

void dataloader_free(DataLoader* dl) {
    if (dl->file) fclose(dl->file);
    for (int i = 0; i < dl->nfiles; i++) free(dl->files[i]);
    free(dl->files); free(dl->ntok); free(dl->shard_order); free(dl->window_order);
    free(dl->buf); free(dl->inputs); free(dl->targets);
    memset(dl, 0, sizeof(*dl));
}
