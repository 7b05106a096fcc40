// engine.h: the contract between the training driver and an engine that does the arithmetic.
//
// The driver (train_loop.c) owns everything engines share: flags, data, the schedule, logging,
// validation, sampling and when to checkpoint. An engine owns the model's tensors and runs
// forward, backward and the update: the C reference engine on the CPU (reference/gpt2_cpu.c) or
// the GPU engine (train_gpt2.cu). main() picks one with engine_select(); the driver sees only
// this struct.
//
// What crosses the boundary is small on purpose, so that an engine may shard its state over
// ranks, keep it in reduced precision or on another device: fp32 weights once at start-up,
// token ids per micro-step, one StepResult per optimizer step (the only device-to-host sync of
// a training step), logits for sampling, and file paths for checkpoints, which the engine writes
// and reads itself.
//
// Lifetimes:
// - inputs and targets passed to micro_step or forward are read during the call only;
// - logits of forward(..., targets = NULL, ...) stay valid until the next micro_step or forward
//   (a micro-step's backward overwrites them in place with their gradient);
// - gradients accumulate over micro-steps and are zeroed by optimizer_step.
#ifndef COMMON_ENGINE_H
#define COMMON_ENGINE_H

#include <stddef.h>

#include "checkpoint.h"
#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float beta1, beta2, eps, weight_decay;
    // The driver's outlier guard (--skip-outliers): skip the update, as for a non-finite gradient
    // but leaving the loss scale alone, when the step's loss or gradient norm is above these
    // (0 = no limit).
    float skip_loss_above, skip_norm_above;
} AdamWConfig;

// The precision of parameters, gradients and activations (optimizer state is always fp32).
typedef enum { PRECISION_FP32, PRECISION_FP16, PRECISION_BF16 } Precision;
const char* precision_name(Precision p);

// Where the optimizer lives (--offload): on the device, or its fp32 master weights, m and v in
// pinned host memory with AdamW on CPU threads; GRADS also sends the gradients down layer by layer
// as backward produces them, keeping no full-size gradient buffer on the device.
typedef enum { OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_GRADS } Offload;

#define PP_MAX_STAGES 64      // -pp: the most pipeline stages

// What an engine is made for; main() fills it from the flags (train_setup).
typedef struct {
    Precision precision;      // asked for: the GPU build's (make PRECISION=...); the C engine is fp32 always
    int B, T;                 // the largest micro-batch: activations are sized for it, once
    int recompute;            // activation recompute level: 0 keeps every activation, 1 recomputes GELU,
                              // 2 also the LayerNorms, 3 whole blocks from kept block inputs
    int recompute_every;      // level 3: keep every K-th block's input; 0 = the K that keeps the fewest bytes
    int zero_stage;           // ZeRO stage; 0 = every rank holds all state
    size_t memory_budget;     // device bytes a rank may use (--max-memory), 0 = no limit
    int offload;              // an Offload
    int no_overlap;           // ZeRO stages 0, 1: reduce the gradients after backward, not beside it
    // The planner's (the engine does not read them): the card and link a step is timed on (--gpu,
    // --link; "" = PLAN_CARD, nvlink) and the host's AdamW rate for offload's time, parameters a
    // second (0 = PLAN_HOST_ADAMW_PER_S).
    char plan_card[48], plan_link[32];
    double host_adamw_per_s;
                              // (--overlap 0; the same bits, for comparison)
    int rank, num_ranks;      // this process among the ranks (rank 0 of 1 without MPI)
    int local_rank;           // its place on its machine: the GPU it binds
    float loss_scale_init;    // FP16 dynamic loss scaling: the first scale (PyTorch: 65536)
    int loss_scale_interval;  // FP16: consecutive finite steps before the scale doubles (PyTorch: 2000)
    int gelu_fusion;          // GPU: 0 = separate GELU kernels, 1 = GELU in the matmul's forward epilogue,
                              // 2 = forward and backward epilogues, -1 = by the GPU (2 on sm_90 and
                              // newer, 0 before; the engine's options then say which)
    int tf32;                 // GPU, fp32 build: 1 = matmuls on TF32 tensor cores (llm.c's -f)
    long total_batch;         // tokens per optimizer step (-d), for memory advice; 0 = B*T*ranks
    // Pipeline parallelism (-pp, common/pipeline.h): num_ranks = pp_stages x data-parallel ranks, rank
    // r in stage r / (num_ranks / pp_stages); stage s holds pp_layers[s] layers after those of the
    // stages before it. 0 or 1 stage: the whole model on every rank.
    int pp_stages;
    int pp_layers[PP_MAX_STAGES];
    int micro_steps;          // micro-steps per optimizer step: the pipeline's micro-batches (0 = 1)
} EngineOptions;

// What one optimizer step did, read by the driver once per step.
typedef struct {
    float loss;        // mean loss over the step's micro-steps (weighted by their dloss_scale)
    float grad_norm;   // global L2 norm of the unscaled gradients, before clipping
    int applied;       // 1 = the update was applied; 0 = skipped (FP16: a gradient was inf or NaN)
    float loss_scale;  // the loss scale this step's backward used (1 without FP16 loss scaling)
} StepResult;

// Named byte counts of what the engine allocated, for the start-up report: each component as the
// planner predicted it (common/memory_plan.h), as allocated, and as the device counted it (the drop
// in cudaMemGetInfo's free memory across its allocation; -1 where not measured).
#define MEMORY_REPORT_MAX 24
typedef struct {
    int count;
    struct {
        const char* name;
        size_t bytes;        // allocated
        size_t planned;      // the plan's figure
        long long measured;  // the device's count, -1 = not measured (host memory, the C engine)
        int host;            // 1: host memory
    } items[MEMORY_REPORT_MAX];
    // The device as a whole (0 = no device): its memory, and what was in use (by every process on
    // it) before the engine allocated, after, and at most since (sampled after each optimizer step).
    size_t device_bytes, used_before, used_after, used_peak;
} MemoryReport;
// Adds a component with planned = bytes, measured = -1, in device memory.
void memory_report_add(MemoryReport* r, const char* name, size_t bytes);

typedef struct Engine Engine;
struct Engine {
    char name[256];       // one line for the start-up report: engine, precision, device
    GPT2Config config;
    EngineOptions options;
    Precision precision;  // what it computes in
    double peak_flops;    // the device's dense peak FLOP/s at this precision; 0 = unknown (no MFU printed)
    char peak_note[256];  // a GPU engine's "mfu:" line: the peak and its source, or why MFU is not shown
    int loss_scaling;     // 1 = FP16 dynamic loss scaling: a skipped update is its normal answer to an
                          // overflow; without it a skipped update means training diverged
    const char* kind;     // "gpu" or "cpu": which engine_select made (NULL when made directly)
    void* self;

    // The weights, fp32 in gpt2_param_layout() order (a fresh init or a model file).
    void (*set_params)(Engine* e, const float* params);

    // One training micro-step: forward and backward over B x T tokens (at most options.B x T).
    // Gradients accumulate until optimizer_step. dloss_scale = d(step objective)/d(this micro-step's
    // mean loss): 1/accumulation steps. The loss stays in the engine until optimizer_step.
    // is_last_micro_step lets an engine start its gradient reduction as backward produces it (and a
    // pipelined one, -pp, run its schedule over the step's micro-steps, whose tokens it kept).
    void (*micro_step)(Engine* e, const int* inputs, const int* targets, int B, int T, float dloss_scale,
                       int is_last_micro_step);

    // The update after the step's micro-steps: the mean loss and the global gradient norm, clipping
    // to clip (0 = off; PyTorch's rule: scale by clip / (norm + 1e-6) when the norm exceeds clip),
    // then AdamW with lr. A non-finite gradient skips the update entirely (weights, m, v and the
    // count of applied updates stay bit for bit); with FP16 loss scaling it also halves the scale
    // (never below LOSS_SCALE_MIN), which doubles after options.loss_scale_interval finite steps. A loss or norm above
    // opt->skip_loss_above / skip_norm_above (when > 0) skips the update the same way, the scale
    // counting it as a finite step. Zeroes the gradients.
    StepResult (*optimizer_step)(Engine* e, const AdamWConfig* opt, float lr, float clip);

    // Evaluation and sampling: forward only. With targets, returns the mean loss; without, 0.
    float (*forward)(Engine* e, const int* inputs, const int* targets, int B, int T);
    // The V logits at row b, position t of the last forward without targets, into out (host, fp32).
    void (*logits_at)(Engine* e, int b, int t, float* out);
    // The B x T per-position losses of the last forward with targets, into out (host, fp32): what
    // a multiple-choice eval (HellaSwag) scores completions by.
    void (*token_losses)(Engine* e, float* out);

    // Checkpoints: the model file from the fp32 master weights (llm.c's version 3) and the state
    // file with the driver's TrainState, the engine's counters (applied updates, loss scale) and
    // AdamW's m and v. load reads both back into the engine and fills *st.
    void (*checkpoint_save)(Engine* e, const char* model_path, const char* state_path, const TrainState* st);
    void (*checkpoint_load)(Engine* e, const char* model_path, const char* state_path, TrainState* st);

    // What the engine allocated, by component (parameters, gradients, master weights, m, v,
    // activations, scratch, workspace, ...), and the total.
    void (*memory_report)(Engine* e, MemoryReport* r);
    void (*destroy)(Engine* e);
};

// Makes an engine, or returns NULL after writing into why (one phrase) the reason it cannot.
typedef Engine* (*EngineCreateFn)(const GPT2Config* cfg, const EngineOptions* opts, char* why, size_t why_cap);

// The engine for flag value `which`: "gpu" (fatal, naming --engine, when gpu_create is NULL or
// fails), "cpu", or "auto": the GPU when one can be used, else the CPU engine after printing
// one line saying why. gpu_create may be NULL (a build without CUDA).
Engine* engine_select(const char* which, EngineCreateFn gpu_create, EngineCreateFn cpu_create, const GPT2Config* cfg,
                      const EngineOptions* opts);

#ifdef __cplusplus
}
#endif
#endif
