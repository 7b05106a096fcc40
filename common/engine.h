// engine.h: the contract between the training driver and an engine that does the arithmetic.
//
// The driver (train_loop.c) owns everything both engines share: flags, data, schedule,
// logging, validation, sampling and checkpoints. An engine owns the model's tensors and runs
// forward, backward and the update, on the CPU (reference/) or on a GPU (train_gpt2.cu).
// Parameters and optimizer state cross this boundary as fp32 in gpt2_param_layout() order.
#ifndef COMMON_ENGINE_H
#define COMMON_ENGINE_H

#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float beta1, beta2, eps, weight_decay;
} AdamWConfig;

typedef struct Engine Engine;
struct Engine {
    char name[160];  // one line for the start-up report
    GPT2Config config;
    void* self;
    void (*set_params)(Engine* e, const float* params);
    void (*get_params)(Engine* e, float* params);
    void (*set_opt_state)(Engine* e, const float* m, const float* v);
    void (*get_opt_state)(Engine* e, float* m, float* v);
    // Forward over B*T tokens (B, T at most what the engine was made for). With targets,
    // returns the mean cross-entropy loss; without (NULL), returns 0 and only logits are valid.
    float (*forward)(Engine* e, const int* inputs, const int* targets, int B, int T);
    // The V logits at row b, position t of the last forward, into out (host memory).
    void (*logits_at)(Engine* e, int b, int t, float* out);
    void (*zero_grad)(Engine* e);
    // Backward of the last forward (which had targets); gradients accumulate. dloss_scale is
    // d(objective)/d(mean loss of this micro-batch): 1/accumulation_steps.
    void (*backward)(Engine* e, float dloss_scale);
    // Global L2 norm of the accumulated gradients.
    float (*grad_norm)(Engine* e);
    // One AdamW step (t counts from 1) with the gradients multiplied by grad_scale (clipping).
    void (*update)(Engine* e, const AdamWConfig* opt, float lr, float grad_scale, int t);
    void (*destroy)(Engine* e);
};

#ifdef __cplusplus
}
#endif
#endif
