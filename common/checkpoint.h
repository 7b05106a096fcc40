// checkpoint.h: model files (llm.c's format) and training-state files.
//
// Model file: 256 int32 header {20240326, version, maxT, V, L, NH, C, Vp, 0...}, then every
// parameter in gpt2_param_layout() order: version 3 stores fp32 (this project writes 3),
// version 5 stores bf16 (llm.c's other format; read and widened to fp32).
// State file: 256 int32 header {20241130, version 2, maxT, V, L, NH, C, Vp, B, T, ranks, 0...},
// then 32 int64 words: the driver's TrainState (0: step, 1: RNG, 2-4: data position, 5: parameter
// count) and the engine's OptimizerCounters (8: AdamW updates applied, 9: loss scale as the bits
// of a double, 10: finite steps since the scale changed), then AdamW m and v as fp32. With the
// model file of the same step it holds everything a resumed run needs to continue bit for bit.
// Version 1 files (no counters; every step was applied, no loss scale) still load.
// Both files are written to a temporary file and renamed, so a crash never leaves half a file.
//
// Engines whose weights and state live elsewhere (a GPU) stream them through a writer and a
// reader in pieces of any size: begin (header), put/get (payload in order), commit/close.
#ifndef COMMON_CHECKPOINT_H
#define COMMON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dataloader.h"
#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define STATE_MAGIC 20241130
#define STATE_VERSION 2

typedef struct {
    int64_t step;            // optimizer steps completed
    uint64_t rng_state;      // the sampler's RNG
    DataLoaderPos train_pos; // where the next training batch starts
    int B, T, num_processes; // the batch geometry the position refers to
} TrainState;

// What an engine counts beside m and v; resume needs them to continue bit for bit.
typedef struct {
    int64_t adam_steps;        // AdamW updates applied: the bias correction's t (skipped steps don't count)
    double loss_scale;         // FP16 dynamic loss scale; 0 = the writer used none
    int64_t scale_good_steps;  // consecutive finite steps since the scale last changed
} OptimizerCounters;

// ---- streaming ----
typedef struct {
    FILE* f;
    char tmp[4200];
    char path[4200];
    size_t expect, done;  // payload floats
} CheckpointWriter;

typedef struct {
    FILE* f;
    char path[4200];
    size_t expect, done;  // payload floats
    int bf16;             // a version 5 model file: 2 bytes an entry, widened on reading
} CheckpointReader;

void model_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg);
// n: parameters; the payload is m (n floats) then v (n floats).
void state_file_begin(CheckpointWriter* w, const char* path, const GPT2Config* cfg, const TrainState* st,
                      const OptimizerCounters* oc, size_t n);
void checkpoint_put(CheckpointWriter* w, const float* data, size_t count);
// Fatal if the payload is incomplete; else the file appears under its name.
void checkpoint_commit(CheckpointWriter* w);

// Fatal (naming the file) on a wrong magic, version, size or a model other than cfg.
void model_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* cfg);
void state_file_open_read(CheckpointReader* r, const char* path, const GPT2Config* cfg, TrainState* st,
                          OptimizerCounters* oc, size_t n);
void checkpoint_get(CheckpointReader* r, float* data, size_t count);
void checkpoint_close(CheckpointReader* r);

// ---- whole buffers ----
void model_file_write(const char* path, const GPT2Config* cfg, const float* params);
// Reads the header of a model file into cfg (validated). Fatal on a wrong magic, version or size.
void model_file_read_config(const char* path, GPT2Config* cfg);
// Reads the parameters into params (cfg's layout, fp32). Fatal if the file does not match cfg.
void model_file_read_params(const char* path, const GPT2Config* cfg, float* params);

void state_file_write(const char* path, const GPT2Config* cfg, const TrainState* st, const OptimizerCounters* oc,
                      const float* m, const float* v, size_t n);
void state_file_read(const char* path, const GPT2Config* cfg, TrainState* st, OptimizerCounters* oc, float* m,
                     float* v, size_t n);

#ifdef __cplusplus
}
#endif
#endif
