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
    dl->nsamples = (int64_t*)malloc_check(dl->nfiles * sizeof(int64_t), "data file samples");
    double t0 = wall_time_ms();
    Checksum sum;
    checksum_init(&sum);
    Progress progress;  // a large data set takes a while to check: say how far it is
    progress_begin(&progress, "data: checking", "shards", dl->nfiles);
    int64_t most = 0;
    for (int i = 0; i < dl->nfiles; i++) {
        dl->files[i] = strdup(g.gl_pathv[i]);
        if (!dl->files[i]) fatal("out of host memory listing data files");
        dl->ntok[i] = shard_check(dl->files[i], vocab_size, &sum);
        progress_update(&progress, i + 1);
        dl->total_tokens += (long long)dl->ntok[i];
        dl->nsamples[i] = dl->ntok[i] < 1 ? 0 : (int64_t)((dl->ntok[i] - 1) / (size_t)T);
        dl->total_samples += dl->nsamples[i];
        if (dl->nsamples[i] > most) most = dl->nsamples[i];
    }
    globfree(&g);
    dl->data_sum = checksum_final(&sum);
    dl->check_ms = wall_time_ms() - t0;
    int64_t batch = (int64_t)B * nproc;
    dl->epoch_batches = dl->total_samples / batch;
    if (dl->epoch_batches == 0)
        fatal("data %s holds %lld samples of T+1 = %d tokens, fewer than one batch of B*ranks = %lld "
              "(B=%d, T=%d, ranks=%d)", pattern, (long long)dl->total_samples, T + 1, (long long)batch, B, T, nproc);
    dl->shard_order = (int64_t*)malloc_check(dl->nfiles * sizeof(int64_t), "shard order");
    dl->shard_start = (int64_t*)malloc_check((dl->nfiles + 1) * sizeof(int64_t), "shard starts");
    if (shuffle) dl->sample_order = (int64_t*)malloc_check(most * sizeof(int64_t), "sample order");
    dl->buf = (uint16_t*)malloc_check(((size_t)B * T + 1) * sizeof(uint16_t), "batch buffer");
    dl->inputs = (int*)malloc_check((size_t)B * T * sizeof(int), "batch inputs");
    dl->targets = (int*)malloc_check((size_t)B * T * sizeof(int), "batch targets");
    dl->order_epoch = dl->perm_shard = dl->open_shard = -1;
    dataloader_reset(dl);
}

void dataloader_locate(DataLoader* dl, int64_t index, int64_t* epoch, int64_t* shard, int64_t* sample_in_shard) {
    int64_t e = index / dl->total_samples, i = index % dl->total_samples;
    if (e != dl->order_epoch) {
        seeded_permutation(dl->shard_order, dl->nfiles, dl->shuffle, dl->seed, (uint64_t)e, 0xFFFFFFFFu);
        dl->shard_start[0] = 0;
        for (int k = 0; k < dl->nfiles; k++) dl->shard_start[k + 1] = dl->shard_start[k] + dl->nsamples[dl->shard_order[k]];
        dl->order_epoch = e;
        dl->perm_shard = -1;
    }
    // The last place in the order whose shard starts at or before i; a shard without samples starts
    // where the next one does and is passed over.
    int lo = 0, hi = dl->nfiles - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (dl->shard_start[mid] <= i) lo = mid;
        else hi = mid - 1;
    }
    int64_t s = dl->shard_order[lo], within = i - dl->shard_start[lo];
    if (dl->shuffle && dl->perm_shard != s) {
        seeded_permutation(dl->sample_order, dl->nsamples[s], 1, dl->seed, (uint64_t)e, (uint64_t)s);
        dl->perm_shard = s;
    }
    *epoch = e;
    *shard = s;
    *sample_in_shard = dl->shuffle ? dl->sample_order[within] : within;
}

// Reads n consecutive samples of shard s from sample q on (n*T+1 tokens) into dl->buf.
static void dataloader_read(DataLoader* dl, int64_t s, int64_t q, int n) {
    const char* path = dl->files[s];
    if (dl->open_shard != s) {
        if (dl->file) fclose(dl->file);
        dl->file = NULL;
        shard_open(path, &dl->file);
        dl->open_shard = s;
    }
    size_t start = (size_t)q * dl->T, count = (size_t)n * dl->T + 1;
    if (fseek(dl->file, (long)(SHARD_HEADER_INTS * sizeof(int32_t) + start * sizeof(uint16_t)), SEEK_SET) != 0)
        fatal("cannot seek in data file %s", path);
    fread_check(dl->buf, sizeof(uint16_t), count, dl->file, path);
    for (size_t i = 0; i < count; i++) {
        if (dl->buf[i] >= dl->vocab_size)
            fatal("data file %s: token %u at position %zu is out of range (vocabulary has %d tokens)", path,
                  dl->buf[i], start + i, dl->vocab_size);
    }
}

void dataloader_next_batch(DataLoader* dl) {
    int B = dl->B, T = dl->T;
    int64_t first = dl->pos + (int64_t)dl->rank * B;
    int64_t e, s, q;
    dataloader_locate(dl, first, &e, &s, &q);
    for (int b = 0; b < B;) {
        // A run of samples that follow each other in one file is one read (the whole batch, in order):
        // row b+j's inputs are its tokens j*T.., its targets the same shifted by one.
        int n = 1;
        int64_t e2, s2 = s, q2 = q;
        while (b + n < B) {
            dataloader_locate(dl, first + b + n, &e2, &s2, &q2);
            if (s2 != s || q2 != q + n) break;
            n++;
        }
        dataloader_read(dl, s, q, n);
        for (size_t i = 0; i < (size_t)n * T; i++) {
            dl->inputs[(size_t)b * T + i] = dl->buf[i];
            dl->targets[(size_t)b * T + i] = dl->buf[i + 1];
        }
        b += n;
        s = s2;
        q = q2;
    }
    dl->pos += (int64_t)B * dl->nproc;
}

void dataloader_reset(DataLoader* dl) { dataloader_set_pos(dl, 0); }

int64_t dataloader_get_pos(const DataLoader* dl) { return dl->pos; }

void dataloader_set_pos(DataLoader* dl, int64_t samples) {
    if (samples < 0) fatal("data position %lld is negative", (long long)samples);
    dl->pos = samples;
}

void dataloader_fingerprint(const DataLoader* dl, char* out, size_t cap) {
    snprintf(out, cap, "%d shard%s, %lld tokens, checksum %016llx", dl->nfiles, dl->nfiles == 1 ? "" : "s",
             dl->total_tokens, (unsigned long long)dl->data_sum);
}

void dataloader_free(DataLoader* dl) {
    if (dl->file) fclose(dl->file);
    for (int i = 0; i < dl->nfiles; i++) free(dl->files[i]);
    free(dl->files); free(dl->ntok); free(dl->nsamples); free(dl->shard_order); free(dl->shard_start);
    free(dl->sample_order); free(dl->buf); free(dl->inputs); free(dl->targets);
    memset(dl, 0, sizeof(*dl));
}
