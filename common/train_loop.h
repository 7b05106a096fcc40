// train_loop.h: the training driver both engines share: flags, data, the step loop,
// validation, sampling, logging and checkpoints. An engine only does the arithmetic.
#ifndef COMMON_TRAIN_LOOP_H
#define COMMON_TRAIN_LOOP_H

#include <stddef.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

// Makes a GPU engine, or returns NULL after writing why none can be used into why.
typedef Engine* (*EngineCreateFn)(const GPT2Config* cfg, int B, int T, char* why, size_t why_cap);

// The trainer's main(). gpu_create may be NULL (a build without CUDA).
int train_main(int argc, char** argv, EngineCreateFn gpu_create);

// One optimizer step after gradients were accumulated: global norm, clipping to `clip`
// (0 = off; PyTorch's rule: scale by clip / (norm + 1e-6) when the norm exceeds clip),
// then AdamW with step count t (from 1). Returns the norm before clipping.
float engine_optimizer_step(Engine* e, const AdamWConfig* opt, float lr, float clip, int t);

#ifdef __cplusplus
}
#endif
#endif
