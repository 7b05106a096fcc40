// test_dataloader.c: the data loader. A row is one sample (T+1 consecutive tokens from a multiple
// of T; targets shift inputs by one); the order is the seed's, the epoch's and the global sample
// index's alone, so every split of a global batch (ranks x micro-steps x B) reads the same samples
// at the same places of each step, across epoch boundaries; an epoch reads every sample exactly
// once whatever the split; unshuffled it is the file order; shuffled, a seeded permutation of the
// shards and of each shard's samples that changes per epoch; a saved position (a sample count)
// continues the same sequence on another split.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataloader.h"
#include "test.h"
#include "util.h"

#define T 8
#define NSHARDS 4
#define G 12      // samples a step, over all ranks and micro-steps
#define STEPS 62  // over two epochs: each boundary falls inside a step (352 is not a multiple of 12)

static char dir[] = "/tmp/test_dataloader_XXXXXX";
static char pattern[4200];
// Shard s's token at position i is s*10000 + i, so a row names its sample. Shard 3 is shorter than
// one sample (T+1 tokens) and is passed over.
static const size_t sizes[NSHARDS] = {1000, 333, 1500, 5};
static int64_t samples_in[NSHARDS];  // (tokens - 1) / T: 124, 41, 187, 0
static int64_t N;                    // samples in an epoch: 352

static void write_shards(void) {
    for (int s = 0; s < NSHARDS; s++) {
        uint16_t* tok = (uint16_t*)malloc_check(sizes[s] * 2, "tokens");
        for (size_t i = 0; i < sizes[s]; i++) tok[i] = (uint16_t)(s * 10000 + i);
        char path[4200];
        snprintf(path, sizeof(path), "%s/shard_%d.bin", dir, s);
        shard_write(path, tok, sizes[s]);
        free(tok);
        samples_in[s] = (int64_t)(sizes[s] - 1) / T;
        N += samples_in[s];
    }
    snprintf(pattern, sizeof(pattern), "%s/shard_*.bin", dir);
}

// A sample's id: shard*1000 + its index in the shard (every shard here has fewer than 1000).
static int sample_id(int first_token) { return first_token / 10000 * 1000 + first_token % 10000 / T; }

// Reads `steps` steps of the split (R ranks, M micro-steps, B each: R*M*B = G) into seq, each step's
// samples at the place of the global batch its rank and micro-step take them from, (m*R + r)*B + b.
// Returns 0 (with why) if a row is not one sample: T+1 consecutive tokens of one shard from a
// multiple of T, targets the inputs shifted by one.
static int read_split(int R, int M, int B, int shuffle, uint64_t seed, int steps, int* seq, char* why, size_t cap) {
    DataLoader dl[4];
    for (int r = 0; r < R; r++) dataloader_init(&dl[r], pattern, B, T, r, R, shuffle, seed, 50257);
    int ok = 1;
    for (int s = 0; s < steps; s++) {
        for (int m = 0; m < M; m++) {
            for (int r = 0; r < R; r++) {
                dataloader_next_batch(&dl[r]);
                for (int b = 0; b < B; b++) {
                    const int* in = dl[r].inputs + b * T;
                    const int* tg = dl[r].targets + b * T;
                    for (int t = 0; t < T && ok; t++) {
                        if (in[t] != in[0] + t || tg[t] != in[0] + t + 1 || in[0] % 10000 % T != 0) {
                            snprintf(why, cap, "split %dx%dx%d, step %d, rank %d, row %d: token %d is %d, target %d",
                                     R, M, B, s, r, b, t, in[t], tg[t]);
                            ok = 0;
                        }
                    }
                    seq[s * G + (m * R + r) * B + b] = sample_id(in[0]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) dataloader_free(&dl[r]);
    return ok;
}

// 1 if seq[from..from+N) holds every sample of the epoch exactly once.
static int one_epoch(const int* seq, int from) {
    static int seen[NSHARDS * 1000];
    memset(seen, 0, sizeof(seen));
    for (int k = from; k < from + N; k++) {
        int s = seq[k] / 1000, q = seq[k] % 1000;
        if (s < 0 || s >= NSHARDS || q >= samples_in[s] || seen[seq[k]]++) return 0;
    }
    return 1;
}

int main(void) {
    if (!mkdtemp(dir)) fatal("cannot make a temp dir");
    write_shards();
    DataLoader probe;
    dataloader_init(&probe, pattern, 3, T, 0, 2, 1, 42, 50257);
    CHECK(probe.total_samples == N && N == 352 && probe.epoch_batches == N / 6,
          "an epoch counts every shard's whole samples of T+1 tokens (a shard shorter than one holds none)");
    dataloader_free(&probe);

    // Splits of one global batch of G = 12 samples: ranks x micro-steps x B.
    static const int splits[][3] = {{1, 1, 12}, {1, 4, 3}, {2, 2, 3}, {4, 1, 3}, {3, 2, 2}, {2, 3, 2}, {1, 12, 1}, {4, 3, 1}};
    const int nsplits = (int)(sizeof(splits) / sizeof(splits[0]));
    static int ref[2][STEPS * G], seq[STEPS * G];
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        const char* how = shuffle ? "shuffled" : "unshuffled";
        int rows_ok = 1, same = 1, epochs = 1;
        char why[256] = "", label[160];
        for (int i = 0; i < nsplits; i++) {
            int* out = i == 0 ? ref[shuffle] : seq;
            rows_ok &= read_split(splits[i][0], splits[i][1], splits[i][2], shuffle, 42, STEPS, out, why, sizeof(why));
            if (i > 0 && memcmp(out, ref[shuffle], sizeof(seq)) != 0) {
                if (same) snprintf(why, sizeof(why), "split %dx%dx%d differs from 1x1x12", splits[i][0], splits[i][1], splits[i][2]);
                same = 0;
            }
            epochs &= one_epoch(out, 0) && one_epoch(out, (int)N);
        }
        snprintf(label, sizeof(label), "%s: every row is one sample of T+1 consecutive tokens", how);
        test_report(rows_ok, label, why);
        snprintf(label, sizeof(label), "%s: 8 splits of a 12-sample batch (1x1x12 ... 4x3x1) read the same samples at "
                 "the same places of every step, over two epoch boundaries", how);
        test_report(same, label, why);
        snprintf(label, sizeof(label), "%s: epochs 0 and 1 each read every sample exactly once, in every split", how);
        test_report(epochs, label, "a sample is missing or read twice");
    }

    // Unshuffled: shards in name order, samples in file order, epoch after epoch.
    int in_order = 1;
    for (int k = 0, e = 0; e < 2; e++)
        for (int s = 0; s < NSHARDS; s++)
            for (int q = 0; q < samples_in[s]; q++, k++) in_order &= ref[0][k] == s * 1000 + q;
    CHECK(in_order, "unshuffled: shards in name order, samples in file order, the next epoch after the last");

    // Shuffled: another order, another per epoch and per seed, each shard's samples together.
    static int other_seed[STEPS * G];
    char why[256];
    read_split(1, 1, G, 1, 43, STEPS, other_seed, why, sizeof(why));
    int identity = 1, changes = 0;
    for (int k = 0; k < N; k++) {
        identity &= ref[1][k] == ref[0][k];
        if (k > 0 && ref[1][k] / 1000 != ref[1][k - 1] / 1000) changes++;
    }
    CHECK(!identity, "shuffled: the order is not the file order");
    CHECK(memcmp(ref[1], ref[1] + N, N * sizeof(int)) != 0, "shuffled: epoch 1's order differs from epoch 0's");
    CHECK(memcmp(ref[1], other_seed, N * sizeof(int)) != 0, "shuffled: another seed gives another order");
    CHECK(changes == 2, "shuffled: an epoch reads one shard's samples after another (3 shards with samples, 2 changes)");

    // The position: the samples read over all ranks. One saved on a split continues the same
    // sequence on another, and locate names where a sample lies.
    DataLoader a;
    dataloader_init(&a, pattern, 3, T, 0, 1, 1, 42, 50257);
    for (int k = 0; k < 4 * 40; k++) dataloader_next_batch(&a);  // 40 steps of 4 micro-steps of 3
    int64_t pos = dataloader_get_pos(&a);
    CHECK(pos == 40 * G, "after 40 steps of 1x4x3 the position is 480 samples");
    dataloader_free(&a);
    DataLoader r2[2];
    for (int r = 0; r < 2; r++) {
        dataloader_init(&r2[r], pattern, 3, T, r, 2, 1, 42, 50257);
        dataloader_set_pos(&r2[r], pos);
    }
    int cont = 1;
    for (int s = 40; s < STEPS; s++)
        for (int m = 0; m < 2; m++)
            for (int r = 0; r < 2; r++) {
                dataloader_next_batch(&r2[r]);
                for (int b = 0; b < 3; b++) cont &= sample_id(r2[r].inputs[b * T]) == ref[1][s * G + (m * 2 + r) * 3 + b];
            }
    CHECK(cont, "a position saved on 1 process x 4 micro-steps, set on 2 ranks x 2, continues the same sequence");
    int located = 1;
    for (int64_t k = 0; k < STEPS * G; k += 7) {
        int64_t e, sh, q;
        dataloader_locate(&r2[0], k, &e, &sh, &q);
        located &= e == k / N && sh * 1000 + q == ref[1][k];
    }
    CHECK(located, "dataloader_locate names each sample's epoch, shard and place in it");
    for (int r = 0; r < 2; r++) dataloader_free(&r2[r]);

    // Shard helpers: shard_load returns what shard_write wrote.
    size_t cnt;
    char path[4200];
    snprintf(path, sizeof(path), "%s/shard_1.bin", dir);
    uint16_t* tok = shard_load(path, &cnt);
    CHECK(cnt == 333 && tok[0] == 10000 && tok[332] == 10332, "shard_load reads back shard_write's tokens");
    free(tok);
    for (int i = 0; i < NSHARDS; i++) {
        snprintf(path, sizeof(path), "%s/shard_%d.bin", dir, i);
        unlink(path);
    }
    rmdir(dir);
    return test_finish();
}
