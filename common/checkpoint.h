// checkpoint.h: model files (llm.c's format) and training-state files.
//
// Model file: 256 int32 header {20240326, version, maxT, V, L, NH, C, Vp, 0, 0, 0, 0, tag, sum_lo,
// sum_hi, run_lo, run_hi, step, 0...}, then every parameter in gpt2_param_layout() order: version 3
// stores fp32 (this project writes 3), version 5 stores bf16 (llm.c's other format; read and widened
// to fp32). llm.c reads header words 0-7 only, so our files load there and llm.c's (no tag) load here.
// Words 15-17 tie a checkpoint's model file to its state files: the run id and the step (0s in a
// model file that is not part of a checkpoint). Every value is finite: a NaN or Inf anywhere, the
// padding rows of wte included, is refused naming the file, the tensor and the entry.
//
// State file (version 4): 256 int32 header {20241130, 4, maxT, V, L, NH, C, Vp, B, T, ranks,
// record_bytes, tag, sum_lo, sum_hi, run_lo, run_hi, 0...}; 32 int64 words: the driver's TrainState (0: step,
// 1: RNG, 2: data position as the samples read over all ranks, 3-4: 0, 5: parameter count, 11: outlier-guard steps seen, 12-15: the guard's
// loss mean and variance and gradient-norm mean and variance, as the bits of doubles), the
// engine's OptimizerCounters (8: AdamW updates applied, 9: loss scale as the bits of a double,
// 10: finite steps since the scale changed) and the shard (16-19: first entry, entries, index,
// files; 0s = the whole of m and v, see StateShard); then the run record: record_bytes of text,
// zero-padded to a multiple of 4 (what made the run's trajectory, "name value" per line, see
// train_loop.c); then AdamW m and v (the file's entries) as fp32. With the model file of the same step it holds everything a resumed
// run needs to continue bit for bit. Versions 1 (no counters), 2 (no checksum, no record) and 3
// (words 2-4: the position of the loader before samples were ordered one by one, which this one
// cannot place: train_samples -1) still load.
//
// The run id (header words 15 and 16 of every file of a checkpoint: model, state and each shard)
// says which run wrote it (train_loop.c: a hash of what decides a fresh run's bytes, kept by every
// resume); a checkpoint whose files carry different run ids, or whose model file another step, is
// a mix of two runs and is treated as damaged. Files written before run ids hold 0 there.
//
// The checksum (tag CHECKSUM_TAG in header word 12, the value in words 13 and 14) covers every
// byte of the file with words 13 and 14 read as zero: flipped bits, a zeroed block or a file cut
// and padded back to size are found. Writers compute it as the payload streams through
// checkpoint_put; readers as it streams through checkpoint_get, and the last get of a file whose
// sum differs is fatal. checkpoint_verify reads a pair through without loading it, for a resume
// that must choose the newest intact checkpoint.
// Both files are written to a temporary file and renamed, so a crash never leaves half a file.
//
// Engines whose weights and state live elsewhere (a GPU) stream them through a writer and a
// reader in pieces of any size: begin (header), put/get (payload in order), commit/close.
#ifndef COMMON_CHECKPOINT_H
#define COMMON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpt2_config.h"
#include "util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define STATE_MAGIC 20241130
#define STATE_VERSION 4
#define CHECKSUM_TAG 0x4B534843  // "CHSK": header words 13 and 14 hold the file's checksum
#define RUN_RECORD_MAX 8192      // bytes of a state file's run record, with its terminating NUL
#define CHECKPOINT_MAX_STEP 1000000000LL

typedef struct {
    int64_t step;            // optimizer steps completed
    uint64_t rng_state;      // the sampler's RNG
    // Samples of T+1 tokens the run has read over all ranks: the next step's first (dataloader.h);
    // -1 read from a file of version 1 to 3, which recorded an older loader's position.
    int64_t train_samples;
    int B, T, num_processes; // the batch geometry of the run that wrote it
    // The outlier guard (--skip-outliers): exponential moving mean and variance of the loss and
    // of the gradient norm over the finite steps seen, so a resumed run decides as an unbroken one.
    int64_t stats_count;
    double loss_mean, loss_var, norm_mean, norm_var;
    // Which run wrote the checkpoint (header words 15-16 of each of its files); 0 = not recorded.
    uint64_t run_id;
    // What made this run's trajectory, "name value" per line (flags, data fingerprints), written
    // by the driver and compared on resume; "" in files of versions 1 and 2.
    char record[RUN_RECORD_MAX];
} TrainState;

// The part of AdamW's m and v one state file holds. A run of several ranks that shards its
// optimizer state writes one file per rank: state_STEP.bin (index 0, which also says how many
// files there are) and state_STEP.rankNNN.bin for index NNN (state_shard_path). Their int64 words
// 16-19 hold first, count, index and files; files of one process leave them 0 (the whole).
typedef struct {
    size_t first, count;  // entries [first, first + count) of the parameters
    int index, files;
} StateShard;

// The FP16 loss scale never falls below this (DeepSpeed's min_loss_scale): below 1 the scale
// shrinks the gradients instead of guarding them, and halving it forever would reach 0.
#define LOSS_SCALE_MIN 1.0

// What an engine counts beside m and v; resume needs them to continue bit for bit.
typedef struct {
    int64_t adam_steps;        // AdamW updates applied: the bias correction's t (skipped steps don't count)
    double loss_scale;         // FP16 dynamic loss scale (>= LOSS_SCALE_MIN); 0 = the writer used none
    int64_t scale_good_steps;  // consecutive finite steps since the scale last changed
} OptimizerCounters;

// ---- streaming ----
typedef struct {
    FILE* f;
    char tmp[4200];
    char path[4200];
    size_t expect, done;  // payload floats
    Checksum sum;         // of every byte written so far
} CheckpointWriter;

typedef struct {
    FILE* f;
    char path[4200];
    size_t expect, done;  // payload floats
    int bf16;             // a version 5 model file: 2 bytes an entry, widened on reading
    int model;            // a model file: every value is checked to be finite, naming its tensor
    GPT2Config cfg;       // its model (to name the tensor of an entry)
    uint64_t run_id;      // header words 15-16 (0: not part of a checkpoint, or older)
    int64_t step;         // a model file's word 17: the checkpoint's step
    int has_sum;          // the file carries a checksum, checked at the last get
    uint64_t want;        // that checksum
    Checksum sum;         // of every byte read so far
} CheckpointReader;

void model_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg);
// The model file of a checkpoint: st's run id and step in its header.
void model_file_begin_checkpoint(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st);
// n: parameters; the payload is m (n floats) then v (n floats).
void state_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st,
                      const OptimizerCounters* oc, size_t n);
// One rank's part of a sharded checkpoint; the payload is m then v of shard->count entries each.
void state_file_begin_shard(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st,
                            const OptimizerCounters* oc, size_t n, const StateShard* shard);
void checkpoint_put(CheckpointWriter* w, const float* data, size_t count);
// Fatal if the payload is incomplete; else the file appears under its name.
void checkpoint_commit(CheckpointWriter* w);

// Fatal (naming the file) on a wrong magic, version, size, a model other than cfg, or (at the
// last checkpoint_get) a checksum that does not match.
void model_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* cfg);
void state_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* cfg, TrainState* st,
                          OptimizerCounters* oc, size_t n);
// Any file of a checkpoint, whole or one shard (said in *shard); the payload is m then v of shard->count.
void state_file_open_read_shard(CheckpointReader* r, const char* path, const GPT2Config* cfg, TrainState* st,
                                OptimizerCounters* oc, size_t n, StateShard* shard);
void checkpoint_get(CheckpointReader* r, float* data, size_t count);
void checkpoint_close(CheckpointReader* r);

// The path of shard `index` of the checkpoint whose first state file is state_path.
void state_shard_path(char* out, size_t cap, const char* state_path, int index);
// Reads entries [first, first + count) of m and v from a checkpoint however it was sharded (every
// file of it read through and checked), handing each piece to sink: which = 0 for m, 1 for v,
// offset from `first`. st and oc come from its first file. buf: buf_floats of scratch. This is how
// a run resumes on another number of ranks, or one process resumes a sharded run.
typedef void (*StateSink)(void* ctx, int which, size_t offset, const float* data, size_t count);
void state_read_range(const char* state_path, const GPT2Config* cfg, TrainState* st, OptimizerCounters* oc, size_t n,
                      size_t first, size_t count, StateSink sink, void* ctx, float* buf, size_t buf_floats);

// ---- whole buffers ----
void model_file_write(const char* path, const GPT2Config* cfg, const float* params);
void model_file_write_checkpoint(const char* path, const GPT2Config* cfg, const float* params, const TrainState* st);
// Reads the header of a model file into cfg (validated). Fatal on a wrong magic, version or size.
void model_file_read_config(const char* path, GPT2Config* cfg);
// The same, then the whole file read through: its checksum (when it has one: llm.c's files have
// none) and every value finite. Returns a checksum of the file's contents (the header's when it has
// one, else one computed here), which ranks compare to see that they read the same model.
uint64_t model_file_check(const char* path, GPT2Config* cfg);
// Reads the parameters into params (cfg's layout, fp32). Fatal if the file does not match cfg.
void model_file_read_params(const char* path, const GPT2Config* cfg, float* params);

void state_file_write(const char* path, const GPT2Config* cfg, const TrainState* st, const OptimizerCounters* oc,
                      const float* m, const float* v, size_t n);
void state_file_read(const char* path, const GPT2Config* cfg, TrainState* st, OptimizerCounters* oc, float* m,
                     float* v, size_t n);

// ---- llm.c's optimizer state (train_gpt2.cu, state_STEP_RANK.bin, one per process), read for a resume ----
// 256 int32 header words: 0 magic 20240527, 1 version 1, 2 processes, 3 rank, 4 fp32 master
// weights follow m and v, 5 the loader shuffled, 10 step, 20-23 two stochastic-rounding RNG words
// (each rank its own), 30-33 (size_t) shard and sample index; then m, v (and master weights) as
// fp32: all of them in every rank's file, or with llm.c's ZeRO-1 (-z 1) each rank's 1/processes of
// every tensor's layer (see llmc_shard_scatter); with shuffling, the loader's permutations and its
// MT19937 state.
typedef struct {
    int num_processes, rank, master_weights, shuffle;
    int zero;  // 1: the files hold llm.c's ZeRO-1 shards (told by their size)
    int64_t step;
    uint64_t shard_idx, sample_idx;
} LlmcState;
void llmc_state_path(const char* dir, long step, int rank, char* path, size_t cap);
// Reads llm.c's checkpoint state of `step` in dir, for a model of cfg: rank 0's file says how many
// processes wrote it; every rank's file must be there (and no more), name its rank and agree with
// rank 0's header (step, master weights, shuffle, data position) and size. m, v (and master when the
// files have master weights), n floats each in parameter order, get the whole state, mapped from
// the shards; m NULL checks only (headers and sizes). Fatal in one line naming the file and what
// was expected.
void llmc_states_read(const char* dir, long step, const GPT2Config* cfg, LlmcState* ls, float* m, float* v,
                      float* master);

// ---- checking a pair before a resume ----
typedef enum {
    CHECKPOINT_OK,        // both files intact; st and oc filled
    CHECKPOINT_DAMAGED,   // unreadable, truncated, a checksum or a field that cannot be right: try an older one
    CHECKPOINT_MISMATCH,  // intact but written for another model than cfg: no older one will do
} CheckpointStatus;
// Reads both files through (without loading them anywhere) and says which; why names the file.
CheckpointStatus checkpoint_verify(const char* model_path, const char* state_path, const GPT2Config* cfg,
                                   TrainState* st, OptimizerCounters* oc, char* why, size_t why_cap);
// "L 2 here, 1 in the file; C ..." for the fields where two configs differ.
void gpt2_config_diff(const GPT2Config* mine, const GPT2Config* file, char* out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
