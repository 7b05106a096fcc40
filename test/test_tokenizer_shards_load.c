// test_tokenizer_shards_load.c: checks the shards text_to_shards wrote against the token stream
// computed independently (test_tokenizer_shards.py, or the reference tokenizer), and that the
// data loader reads them back batch by batch.
//
//   build/test_tokenizer_shards_load NAME PREFIX EXPECTED.u16 NDOCS VAL_RULE VAL_N SHARD_TOKENS B T
//     VAL_RULE: "tokens" (the first VAL_N tokens are validation) or "every" (every VAL_N-th
//     document); documents start at the 50256s of the expected stream.
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "dataloader.h"
#include "test.h"
#include "tokenizer.h"
#include "util.h"

typedef struct {
    uint16_t* t;
    size_t n;
} Stream;

static void push(Stream* s, const uint16_t* t, size_t n) {
    s->t = (uint16_t*)realloc(s->t, (s->n + n + 1) * sizeof(uint16_t));
    if (!s->t) fatal("out of memory");
    memcpy(s->t + s->n, t, n * sizeof(uint16_t));
    s->n += n;
}

// The shards of one split: names numbered from `first` without gaps, every shard but the last
// full, and together exactly `want`.
static void check_split(const char* name, const char* prefix, const char* split, int first, const Stream* want,
                        long shard_tokens) {
    char pattern[4200], why[512] = "", label[256];
    snprintf(pattern, sizeof(pattern), "%s_%s_*.bin", prefix, split);
    snprintf(label, sizeof(label), "%s_%s_shards", name, split);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    size_t nfiles = rc == 0 ? g.gl_pathc : 0;
    Stream got = {NULL, 0};
    int ok = 1;
    for (size_t i = 0; i < nfiles && ok; i++) {
        char expect_name[4200];
        snprintf(expect_name, sizeof(expect_name), "%s_%s_%06d.bin", prefix, split, first + (int)i);
        size_t n;
        uint16_t* t = shard_load(g.gl_pathv[i], &n);
        if (strcmp(g.gl_pathv[i], expect_name) != 0) {
            snprintf(why, sizeof(why), "shard %.200s, expected %.200s", g.gl_pathv[i], expect_name);
            ok = 0;
        } else if (i + 1 < nfiles && (long)n != shard_tokens) {
            snprintf(why, sizeof(why), "%s holds %zu tokens, expected a full shard of %ld", g.gl_pathv[i], n, shard_tokens);
            ok = 0;
        }
        push(&got, t, n);
        free(t);
    }
    if (ok && (got.n != want->n || (want->n && memcmp(got.t, want->t, want->n * sizeof(uint16_t)) != 0))) {
        size_t i = 0;
        while (i < got.n && i < want->n && got.t[i] == want->t[i]) i++;
        snprintf(why, sizeof(why), "%zu shards hold %zu tokens, expected %zu; first difference at token %zu", nfiles, got.n,
                 want->n, i);
        ok = 0;
    }
    test_report(ok, label, why);
    if (rc == 0) globfree(&g);
    free(got.t);
}

// One epoch through the data loader (no shuffling) gives every shard's samples (T+1 tokens from each
// multiple of T) in order, shard after shard: batch j's row b is the epoch's sample j*B + b.
static void check_loader(const char* name, const char* prefix, const char* split, const Stream* want, int B, int T) {
    char pattern[4200], why[256] = "", label[256];
    snprintf(pattern, sizeof(pattern), "%s_%s_*.bin", prefix, split);
    snprintf(label, sizeof(label), "%s_%s_dataloader", name, split);
    DataLoader dl;
    dataloader_init(&dl, pattern, B, T, 0, 1, 0, 1, GPT2_VOCAB_SIZE);
    int ok = 1;
    int64_t samples = 0;
    size_t base = 0;
    for (int f = 0; f < dl.nfiles; f++) {
        samples += dl.ntok[f] < 1 ? 0 : (int64_t)((dl.ntok[f] - 1) / (size_t)T);
        base += dl.ntok[f];
    }
    if (samples != dl.total_samples) {
        snprintf(why, sizeof(why), "the shards hold %lld samples, the loader counts %lld", (long long)samples,
                 (long long)dl.total_samples);
        ok = 0;
    }
    // Walk the shards beside the batches: shard f, its sample q, the stream's offset of shard f.
    int f = 0;
    int64_t q = 0;
    size_t offset = 0;
    for (int64_t j = 0; j < dl.epoch_batches && ok; j++) {
        dataloader_next_batch(&dl);
        for (int b = 0; b < B && ok; b++) {
            while ((size_t)(q + 1) * T + 1 > dl.ntok[f]) {  // past shard f's last whole sample
                offset += dl.ntok[f++];
                q = 0;
            }
            const uint16_t* x = want->t + offset + (size_t)q * T;
            for (int i = 0; i < T; i++) {
                if (dl.inputs[b * T + i] != x[i] || dl.targets[b * T + i] != x[i + 1]) {
                    snprintf(why, sizeof(why), "batch %lld row %d (shard %d sample %lld) position %d: input %d target "
                             "%d, expected %d %d", (long long)j, b, f, (long long)q, i, dl.inputs[b * T + i],
                             dl.targets[b * T + i], x[i], x[i + 1]);
                    ok = 0;
                    break;
                }
            }
            q++;
        }
    }
    if (ok && base != want->n) {
        snprintf(why, sizeof(why), "shards hold %zu tokens, expected %zu", base, want->n);
        ok = 0;
    }
    test_report(ok, label, why);
    dataloader_free(&dl);
}

int main(int argc, char** argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: %s NAME PREFIX EXPECTED.u16 NDOCS VAL_RULE VAL_N SHARD_TOKENS B T\n", argv[0]);
        return 1;
    }
    const char *name = argv[1], *prefix = argv[2], *rule = argv[5];
    long ndocs = atol(argv[4]), val_n = atol(argv[6]), shard_tokens = atol(argv[7]);
    int B = atoi(argv[8]), T = atoi(argv[9]);
    FILE* f = fopen_check(argv[3], "rb");
    long bytes = file_size(f, argv[3]);
    Stream all = {(uint16_t*)malloc_check((size_t)bytes + 2, "expected"), (size_t)bytes / 2};
    fread_check(all.t, 2, all.n, f, argv[3]);
    fclose(f);

    // Documents start at each end-of-text token (the text itself never encodes to one here).
    long eots = 0;
    for (size_t i = 0; i < all.n; i++) eots += all.t[i] == GPT2_EOT;
    char why[128];
    snprintf(why, sizeof(why), "%ld end-of-text tokens for %ld documents, or the stream does not start with one", eots, ndocs);
    char label[256];
    snprintf(label, sizeof(label), "%s_eot_before_each_document", name);
    test_report(eots == ndocs && (all.n == 0 || all.t[0] == GPT2_EOT), label, why);

    Stream val = {NULL, 0}, train = {NULL, 0};
    if (!strcmp(rule, "tokens")) {
        size_t k = (size_t)val_n < all.n ? (size_t)val_n : all.n;
        push(&val, all.t, k);
        push(&train, all.t + k, all.n - k);
    } else {
        long doc = -1;
        size_t start = 0;
        for (size_t i = 0; i <= all.n; i++) {
            if (i == all.n || all.t[i] == GPT2_EOT) {
                if (doc >= 0) push((doc + 1) % val_n == 0 ? &val : &train, all.t + start, i - start);
                doc++;
                start = i;
            }
        }
    }
    check_split(name, prefix, "val", 0, &val, shard_tokens);
    check_split(name, prefix, "train", 1, &train, shard_tokens);
    check_loader(name, prefix, "train", &train, B, T);
    if (val.n > (size_t)B * T) check_loader(name, prefix, "val", &val, B, T);
    free(all.t); free(val.t); free(train.t);
    return test_finish();
}
