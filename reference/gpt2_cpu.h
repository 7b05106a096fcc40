// gpt2_cpu.h: the C reference engine: GPT-2 in fp32 on the CPU (OpenMP), forward, backward
// and AdamW, built from the layers in ops_cpu.h. Tests use it directly; the trainer uses it
// through the Engine contract (engine.h) when no GPU can be used.
#ifndef REFERENCE_GPT2_CPU_H
#define REFERENCE_GPT2_CPU_H

#include <stddef.h>

#include "engine.h"
#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NUM_ACT_TENSORS 23

// Activations of one forward pass, views into one buffer (layer tensors stacked over L).
typedef struct {
    float* encoded;    // (B, T, C)
    float* ln1;        // (L, B, T, C)
    float* ln1_mean;   // (L, B, T)
    float* ln1_rstd;   // (L, B, T)
    float* qkv;        // (L, B, T, 3C)
    float* atty;       // (L, B, T, C)
    float* att;        // (L, B, NH, T, T)
    float* attproj;    // (L, B, T, C)
    float* residual2;  // (L, B, T, C)
    float* ln2;        // (L, B, T, C)
    float* ln2_mean;   // (L, B, T)
    float* ln2_rstd;   // (L, B, T)
    float* fch;        // (L, B, T, 4C)
    float* fch_gelu;   // (L, B, T, 4C)
    float* fcproj;     // (L, B, T, C)
    float* residual3;  // (L, B, T, C)
    float* lnf;        // (B, T, C)
    float* lnf_mean;   // (B, T)
    float* lnf_rstd;   // (B, T)
    float* logits;     // (B, T, Vp)
    float* probs;      // (B, T, Vp)
    float* losses;     // (B, T)
    float* scratch;    // (B, T, C) spare
} ActTensors;

typedef struct {
    GPT2Config config;
    ParamLayout layout;
    int B, T;             // capacity the activations were sized for
    float* params;
    float* grads;
    float* m;
    float* v;
    double* norm_partials;  // one per fixed chunk of the gradient norm
    float* acts_memory;
    float* grad_acts_memory;
    size_t num_acts;
    ActTensors acts;       // views for the last forward's B, T
    ActTensors grad_acts;
    int cur_B, cur_T;
    const int* inputs;     // of the last forward (the caller keeps them alive until backward)
    const int* targets;
    float mean_loss;
    double step_loss;      // the current optimizer step's loss so far (the Engine contract's micro-steps)
    long long adam_steps;  // AdamW updates applied: the bias correction's t
} GPT2CPU;

// Allocates parameters, gradients, optimizer state and activations for up to B x T once.
void gpt2_cpu_init(GPT2CPU* model, const GPT2Config* cfg, int B, int T);
void gpt2_cpu_free(GPT2CPU* model);
float gpt2_cpu_forward(GPT2CPU* model, const int* inputs, const int* targets, int B, int T);
void gpt2_cpu_zero_grad(GPT2CPU* model);
void gpt2_cpu_backward(GPT2CPU* model, float dloss_scale);
float gpt2_cpu_grad_norm(GPT2CPU* model);
void gpt2_cpu_update(GPT2CPU* model, const AdamWConfig* opt, float lr, float grad_scale, int t);
// Bytes the engine allocates for B x T (parameters, grads, m, v, activations, their grads).
size_t gpt2_cpu_bytes(const GPT2Config* cfg, int B, int T);

// The Engine contract around a GPT2CPU (the engine owns it; destroy frees it). fp32, one process:
// returns NULL (with why) for options it cannot honour (ranks, ZeRO).
Engine* gpt2_cpu_engine_create(const GPT2Config* cfg, const EngineOptions* opts, char* why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
