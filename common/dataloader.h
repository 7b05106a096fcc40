// dataloader.h: token data shards (llm.c's format) and the loader that cuts them into batches.
//
// A shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens.
// A batch takes B*T+1 consecutive tokens per rank: inputs are the first B*T, targets the
// same shifted by one. A "window" is B*T*nproc tokens; rank r of nproc reads the r-th B*T
// slice of each window, so ranks see distinct tokens and together cover the window.
// With shuffling, the order of shards (per epoch) and of windows inside each shard are
// seeded permutations, so the loader's whole position is three integers: that is what
// a training-state file saves to resume bit for bit.
#ifndef COMMON_DATALOADER_H
#define COMMON_DATALOADER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

// Writes tokens as one shard, atomically (temporary file, then rename).
void shard_write(const char* path, const uint16_t* tokens, size_t n);
// Opens a shard, checks its magic, version and size; returns its token count. Fatal on a bad file.
size_t shard_open(const char* path, FILE** f_out);
// Reads a whole shard into a new buffer (caller frees); used by tools and tests.
uint16_t* shard_load(const char* path, size_t* n_out);

typedef struct {
    int64_t epoch;       // passes completed over all shards
    int64_t shard_pos;   // index into this epoch's shard order
    int64_t window_pos;  // index into the current shard's window order
} DataLoaderPos;

typedef struct {
    int B, T, rank, nproc, shuffle, vocab_size;
    uint64_t seed;
    int nfiles;
    char** files;
    size_t* ntok;        // tokens in each shard
    int64_t* shard_order;
    int64_t* window_order;  // permutation of the current shard's windows (capacity: max over shards)
    int64_t nwin_max;
    int64_t total_windows;  // windows in one epoch over all shards
    DataLoaderPos pos;
    int64_t order_epoch;    // epoch whose shard order is in shard_order, -1 if none
    int64_t loaded_shard;   // shard that is open and whose window order is current, -1 if none
    FILE* file;             // open handle on the current shard
    uint16_t* buf;          // B*T+1 raw tokens
    int* inputs;            // B*T
    int* targets;           // B*T
} DataLoader;

// pattern: a glob (or one path) of shards. Token ids must be below vocab_size.
// Fatal, naming the pattern or file, when nothing matches or no shard holds one window.
void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int nproc,
                     int shuffle, uint64_t seed, int vocab_size);
// Fills dl->inputs and dl->targets with the next batch and advances.
void dataloader_next_batch(DataLoader* dl);
// Back to the first batch of epoch 0 (used for validation passes).
void dataloader_reset(DataLoader* dl);
DataLoaderPos dataloader_get_pos(const DataLoader* dl);
void dataloader_set_pos(DataLoader* dl, DataLoaderPos pos);
void dataloader_free(DataLoader* dl);

#ifdef __cplusplus
}
#endif
#endif
