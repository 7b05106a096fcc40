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

#include "util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256

// Writes tokens as one shard, atomically (temporary file, then rename).
void shard_write(const char* path, const uint16_t* tokens, size_t n);
// Writes a shard's header and tokens to an open stream (path names it in errors).
void shard_write_stream(FILE* f, const char* path, const uint16_t* tokens, size_t n);
// Opens a shard, checks its magic, version and size; returns its token count. Fatal on a bad file.
size_t shard_open(const char* path, FILE** f_out);
// Reads a whole shard through: fatal, naming the file and the position, at the first token id at
// or above vocab_size. Adds the tokens to sum (may be NULL). Returns the token count.
size_t shard_check(const char* path, int vocab_size, Checksum* sum);
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
    // What dataloader_init found reading every shard through (so a bad token stops the run at
    // start-up, not hours in): the tokens, a checksum of the shards' contents in order, and the time.
    long long total_tokens;
    uint64_t data_sum;
    double check_ms;
    int64_t order_epoch;    // epoch whose shard order is in shard_order, -1 if none
    int64_t loaded_shard;   // shard that is open and whose window order is current, -1 if none
    FILE* file;             // open handle on the current shard
    uint16_t* buf;          // B*T+1 raw tokens
    int* inputs;            // B*T
    int* targets;           // B*T
} DataLoader;

// pattern: a glob (or one path) of shards. Token ids must be below vocab_size: every shard is read
// through once here to check it. Fatal, naming the pattern or file, when nothing matches, a shard
// is malformed or holds a bad token, or no shard holds one window.
void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int nproc,
                     int shuffle, uint64_t seed, int vocab_size);
// Fills dl->inputs and dl->targets with the next batch and advances.
void dataloader_next_batch(DataLoader* dl);
// Back to the first batch of epoch 0 (used for validation passes).
void dataloader_reset(DataLoader* dl);
DataLoaderPos dataloader_get_pos(const DataLoader* dl);
// Fatal unless pos is a position this loader can reach (inside its shards' windows).
void dataloader_set_pos(DataLoader* dl, DataLoaderPos pos);
// Batches taken from epoch 0's start to reach pos; -1 (with why) if pos is not a reachable position.
int64_t dataloader_batches_before(DataLoader* dl, DataLoaderPos pos, char* why, size_t why_cap);
// "3 shards, 123456 tokens, checksum 0123456789abcdef": what the data was, for run records.
void dataloader_fingerprint(const DataLoader* dl, char* out, size_t cap);
void dataloader_free(DataLoader* dl);

#ifdef __cplusplus
}
#endif
#endif
