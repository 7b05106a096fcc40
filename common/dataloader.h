// dataloader.h: token data shards (llm.c's format) and the loader that cuts them into batches.
//
// A shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens.
// A sample is T+1 consecutive tokens starting at a multiple of T in its shard (so consecutive
// samples share one token): its first T are a sequence's inputs, its last T the targets. An
// epoch is every sample of every shard once, in an order that is a function of the seed, the
// epoch and the sample's index only: the shards in a seeded permutation per epoch (-sf 1; name
// order with -sf 0), and each shard's samples in a seeded permutation of their own (file order
// with -sf 0), one shard after another, so reads stay within a shard. Epochs follow each other
// as one sequence, indexed by the global sample count.
//
// Batch j (a micro-step's, over all ranks) is samples j*B*nproc .. +B*nproc of that sequence,
// and rank r takes B of them from r*B on. With G = B*nproc*micro-steps samples a step, step s
// reads samples s*G .. +G, micro-step m of rank r those from s*G + (m*nproc + r)*B: every split
// of one global batch (ranks x micro-steps x B) reads the same samples in the same step. The
// loader's whole position is one number, the samples read over all ranks, which a training-state
// file saves: a resume on any number of ranks continues the same sequence.
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
    int B, T, rank, nproc, shuffle, vocab_size;
    uint64_t seed;
    int nfiles;
    char** files;
    size_t* ntok;            // tokens in each shard
    int64_t* nsamples;       // samples in each shard: (tokens - 1) / T
    int64_t total_samples;   // samples in one epoch over all shards
    int64_t epoch_batches;   // whole batches of B*nproc samples in one epoch (what a val pass reads)
    int64_t pos;             // samples read over all ranks: the next batch starts at this one
    // What dataloader_init found reading every shard through (so a bad token stops the run at
    // start-up, not hours in): the tokens, a checksum of the shards' contents in order, and the time.
    long long total_tokens;
    uint64_t data_sum;
    double check_ms;
    // The order, computed as the sequence reaches it: one epoch's shard order with the samples of
    // the epoch before each of its shards, and one shard's sample order.
    int64_t order_epoch;     // epoch whose shard order is in shard_order, -1 if none
    int64_t* shard_order;    // nfiles
    int64_t* shard_start;    // nfiles + 1: samples of the epoch before shard_order[i]
    int64_t perm_shard;      // shard whose sample order (of order_epoch) is in sample_order, -1 if none
    int64_t* sample_order;   // capacity: the most samples of a shard (NULL unshuffled: file order)
    int64_t open_shard;      // shard whose file is open, -1 if none
    FILE* file;
    uint16_t* buf;           // B*T+1 raw tokens
    int* inputs;             // B*T
    int* targets;            // B*T
} DataLoader;

// pattern: a glob (or one path) of shards. Token ids must be below vocab_size: every shard is read
// through once here to check it. Fatal, naming the pattern or file, when nothing matches, a shard
// is malformed or holds a bad token, or the shards hold fewer than one batch (B*nproc samples).
void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int nproc,
                     int shuffle, uint64_t seed, int vocab_size);
// Fills dl->inputs and dl->targets with this rank's B samples of the next batch and advances past
// the whole batch (B*nproc samples).
void dataloader_next_batch(DataLoader* dl);
// Back to the first batch of epoch 0 (used for validation passes).
void dataloader_reset(DataLoader* dl);
// The samples read over all ranks; setting it moves to any point of the sequence (fatal if negative).
int64_t dataloader_get_pos(const DataLoader* dl);
void dataloader_set_pos(DataLoader* dl, int64_t samples);
// Where sample `index` of the sequence lies: its epoch, its shard (a file index) and its place in
// that shard (the sample starting at token sample_in_shard*T).
void dataloader_locate(DataLoader* dl, int64_t index, int64_t* epoch, int64_t* shard, int64_t* sample_in_shard);
// "3 shards, 123456 tokens, checksum 0123456789abcdef": what the data was, for run records.
void dataloader_fingerprint(const DataLoader* dl, char* out, size_t cap);
void dataloader_free(DataLoader* dl);

#ifdef __cplusplus
}
#endif
#endif
