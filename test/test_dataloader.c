// test_dataloader.c: the data loader: targets shift inputs by one, ranks read distinct parts
// of each window, shuffling is a seeded permutation per epoch, and a saved position resumes
// the exact stream.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataloader.h"
#include "test.h"
#include "util.h"

#define B 2
#define T 8

static char dir[] = "/tmp/test_dataloader_XXXXXX";
static char pattern[4200];

// Three shards whose tokens encode their own global position: shard s, position i -> s*10000 + i.
static void write_shards(void) {
    size_t sizes[3] = {1000, 333, 1500};
    for (int s = 0; s < 3; s++) {
        uint16_t* tok = (uint16_t*)malloc_check(sizes[s] * 2, "tokens");
        for (size_t i = 0; i < sizes[s]; i++) tok[i] = (uint16_t)(s * 10000 + i);
        char path[4200];
        snprintf(path, sizeof(path), "%s/shard_%d.bin", dir, s);
        shard_write(path, tok, sizes[s]);
        free(tok);
    }
    snprintf(pattern, sizeof(pattern), "%s/shard_*.bin", dir);
}

int main(void) {
    if (!mkdtemp(dir)) fatal("cannot make a temp dir");
    write_shards();
    DataLoader r0, r1;
    dataloader_init(&r0, pattern, B, T, 0, 2, 0, 0, 50257);
    dataloader_init(&r1, pattern, B, T, 1, 2, 0, 0, 50257);
    // windows of 2*B*T = 32 tokens: (1000-1)/32 = 31, (333-1)/32 = 10, (1500-1)/32 = 46
    CHECK(r0.total_windows == 31 + 10 + 46, "windows per epoch count whole windows with one spare token");
    int ok_shift = 1, ok_ranks = 1, ok_order = 1;
    for (int k = 0; k < r0.total_windows; k++) {
        dataloader_next_batch(&r0);
        dataloader_next_batch(&r1);
        for (int i = 0; i < B * T; i++) {
            if (r0.targets[i] != r0.inputs[i] + 1 || r1.targets[i] != r1.inputs[i] + 1) ok_shift = 0;
            if (r1.inputs[i] != r0.inputs[i] + B * T) ok_ranks = 0;  // rank 1 reads the next B*T
        }
        int shard = k < 31 ? 0 : k < 41 ? 1 : 2;
        int w = k < 31 ? k : k < 41 ? k - 31 : k - 41;
        if (r0.inputs[0] != shard * 10000 + w * 2 * B * T) ok_order = 0;
    }
    CHECK(ok_shift, "targets are the inputs shifted by one");
    CHECK(ok_ranks, "rank 1 reads the B*T tokens after rank 0's in each window");
    CHECK(ok_order, "unshuffled: shards in name order, windows in file order");
    dataloader_next_batch(&r0);
    CHECK(r0.pos.epoch == 1 && r0.inputs[0] == 0, "after an epoch the loader wraps to epoch 1");
    dataloader_free(&r0);
    dataloader_free(&r1);

    // Shuffled: each epoch visits every window once, in a seeded order that changes per epoch.
    DataLoader s, s2, s3;
    dataloader_init(&s, pattern, B, T, 0, 1, 1, 42, 50257);
    dataloader_init(&s3, pattern, B, T, 0, 1, 1, 43, 50257);
    int64_t n = s.total_windows;
    int* first = (int*)calloc_check(2 * n, sizeof(int), "firsts");
    int* other_seed = (int*)calloc_check(n, sizeof(int), "firsts");
    for (int64_t k = 0; k < 2 * n; k++) {
        dataloader_next_batch(&s);
        first[k] = s.inputs[0];
        if (k < n) {
            dataloader_next_batch(&s3);
            other_seed[k] = s3.inputs[0];
        }
    }
    int perm_ok = 1, identity = 1, same_as_epoch0 = 1, same_as_seed43 = 1;
    for (int64_t k = 0; k < n; k++) {
        int count = 0;
        for (int64_t j = 0; j < n; j++) count += first[j] == first[k];
        if (count != 1 || (first[k] % 10000) % (B * T) != 0) perm_ok = 0;
        int shard = first[k] / 10000;
        (void)shard;
        if (k > 0 && first[k] < first[k - 1]) identity = 0;
        if (first[n + k] != first[k]) same_as_epoch0 = 0;
        if (other_seed[k] != first[k]) same_as_seed43 = 0;
    }
    CHECK(perm_ok, "shuffled: an epoch visits each window exactly once");
    CHECK(!identity, "shuffled: the order is not the file order");
    CHECK(!same_as_epoch0, "shuffled: epoch 1's order differs from epoch 0's");
    CHECK(!same_as_seed43, "shuffled: another seed gives another order");

    // Resume: a loader set to a saved position reproduces the rest of the stream.
    dataloader_reset(&s);
    for (int k = 0; k < 50; k++) dataloader_next_batch(&s);
    DataLoaderPos pos = dataloader_get_pos(&s);
    int expect[120];
    for (int k = 0; k < 120; k++) {
        dataloader_next_batch(&s);
        expect[k] = s.inputs[3];
    }
    dataloader_init(&s2, pattern, B, T, 0, 1, 1, 42, 50257);
    dataloader_set_pos(&s2, pos);
    int same = 1;
    for (int k = 0; k < 120; k++) {
        dataloader_next_batch(&s2);
        same &= s2.inputs[3] == expect[k];
    }
    CHECK(same, "a restored position continues the same stream, across the epoch boundary");
    dataloader_free(&s);
    dataloader_free(&s2);
    dataloader_free(&s3);
    free(first);
    free(other_seed);

    // Shard helpers: shard_load returns what shard_write wrote.
    size_t cnt;
    char path[4200];
    snprintf(path, sizeof(path), "%s/shard_1.bin", dir);
    uint16_t* tok = shard_load(path, &cnt);
    CHECK(cnt == 333 && tok[0] == 10000 && tok[332] == 10332, "shard_load reads back shard_write's tokens");
    free(tok);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/shard_%d.bin", dir, i);
        unlink(path);
    }
    rmdir(dir);
    return test_finish();
}
