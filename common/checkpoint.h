// checkpoint.h: model files (llm.c's format) and training-state files.
//
// Model file: 256 int32 header {20240326, version, maxT, V, L, NH, C, Vp, 0...}, then every
// parameter in gpt2_param_layout() order: version 3 stores fp32 (this project writes 3),
// version 5 stores bf16 (llm.c's other format; read and widened to fp32).
// State file: 256 int32 header {20241130, 1, maxT, V, L, NH, C, Vp, B, T, ranks, 0...}, then
// TrainState as 32 int64, then AdamW m and v as fp32. With the model file of the same step it
// holds everything a resumed run needs to continue bit for bit.
// Both are written to a temporary file and renamed, so a crash never leaves half a file.
#ifndef COMMON_CHECKPOINT_H
#define COMMON_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "dataloader.h"
#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAGIC 20240326
#define MODEL_VERSION_FP32 3
#define MODEL_VERSION_BF16 5
#define STATE_MAGIC 20241130
#define STATE_VERSION 1

typedef struct {
    int64_t step;            // optimizer steps completed
    uint64_t rng_state;      // the sampler's RNG
    DataLoaderPos train_pos; // where the next training batch starts
    int B, T, num_processes; // the batch geometry the position refers to
} TrainState;

void model_file_write(const char* path, const GPT2Config* cfg, const float* params);
// Reads the header of a model file into cfg (validated). Fatal on a wrong magic, version or size.
void model_file_read_config(const char* path, GPT2Config* cfg);
// Reads the parameters into params (cfg's layout, fp32). Fatal if the file does not match cfg.
void model_file_read_params(const char* path, const GPT2Config* cfg, float* params);

void state_file_write(const char* path, const GPT2Config* cfg, const TrainState* st, const float* m,
                      const float* v, size_t n);
// Fatal if the file was written for another model or batch geometry.
void state_file_read(const char* path, const GPT2Config* cfg, TrainState* st, float* m, float* v, size_t n);

#ifdef __cplusplus
}
#endif
#endif
