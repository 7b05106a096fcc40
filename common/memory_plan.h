// memory_plan.h: every byte the GPU engine will allocate, computed before anything is allocated,
// on any machine (no CUDA needed): the planner behind `--plan`, `--memory-budget`, `--max-memory`
// and the out-of-memory advice, and the numbers the GPU engine allocates by.
//
// One source of truth: the engine calls memory_plan_make() with its options and carves each
// allocation from the plan's sizes (shards, buckets, the activation and scratch tables of
// tensor_layout.h, whose kernel scratch sizes come from kernels/sizes.h). What the planner prints
// is what the engine asks cudaMalloc for, component by component; the start-up report prints
// both, and the device's own count beside them.
//
// Figures that no allocation of the engine's makes (the CUDA context, NCCL's buffers) are marked
// as estimates; they count toward a budget but are not part of "planned = allocated".
#ifndef COMMON_MEMORY_PLAN_H
#define COMMON_MEMORY_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "engine.h"
#include "gpt2_config.h"
#include "pipeline.h"
#include "tensor_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

// The components, in the order the start-up report and --plan print them.
enum {
    MEM_PARAMS,         // floatX parameters, the whole model on every rank (padded to the shards);
                        // stage 3: only this rank's shard
    MEM_PARAM_GATHER,   // stage 3: floatX gather buffers: two layers' parameters, the embeddings', the
                        // final LayerNorm's (the layout of the gradient buckets)
    MEM_GRADS,          // floatX gradients: the whole model (stages 0, 1) or per-layer buckets (stage 2)
    MEM_GRAD_SHARD,     // floatX: this rank's reduced gradients (stages 1, 2)
    MEM_GRAD_ACC,       // fp32: their sum over the step's micro-steps (stage 2)
    MEM_MASTER,         // fp32 master weights of this rank's optimizer range (none in FP32 on the device)
    MEM_ADAM_M,         // fp32 AdamW m
    MEM_ADAM_V,         // fp32 AdamW v
    MEM_ACTIVATIONS,    // the activation table (tensor_layout.h) at the recompute level
    MEM_SCRATCH,        // the scratch table: activation gradients and kernels' partial sums
    MEM_WORKSPACE,      // cuBLASLt's workspace
    MEM_DEVICE_STAGE,   // fp32 staging to gather sharded master weights into a model file
    MEM_OFFLOAD_BUFFER, // host, pinned: gradients down and weights up, floatX, this rank's range
    MEM_HOST_STAGE,     // host, pinned: weights and checkpoints in and out (fp32 + floatX)
    MEM_HOST_PLAN,      // host: the encoder backward's plan and its sort keys
    MEM_PIPE_TOKENS,    // host: -pp, the step's micro-batches' tokens, kept for the schedule (1F1B)
    MEM_CUDA_CONTEXT,   // estimate: the CUDA context, its kernels and cuBLASLt's handle
    MEM_NCCL,           // estimate: NCCL's communicator buffers (several ranks)
    MEM_COUNT
};

typedef enum { MEM_ON_DEVICE, MEM_ON_HOST } MemWhere;

typedef struct {
    const char* name;
    size_t bytes;
    MemWhere where;
    int estimate;  // 1: not an allocation of the engine's; a typical figure for the budget
} MemItem;

// Typical sizes of what the engine does not allocate itself (named as estimates wherever printed).
#define MEM_CUDA_CONTEXT_ESTIMATE ((size_t)512 << 20)  // CUDA 12/13 context with lazy loading + cuBLASLt
#define MEM_NCCL_ESTIMATE ((size_t)384 << 20)          // NCCL 2.x buffers and channels, one communicator
#define MEM_STAGE_FLOATS ((size_t)1 << 22)              // host staging, fp32 elements (16 MiB)

typedef struct {
    GPT2Config cfg;          // the model
    EngineOptions opts;
    size_t floatx_bytes;     // 2 (FP16, BF16) or 4 (FP32)
    // The rank's pipeline stage (common/pipeline.h; the whole model without -pp) and its shape: the
    // model's with the stage's layers. Everything below is the stage's: its parameters in
    // gpt2_stage_param_layout() order, sharded over its data-parallel ranks.
    PipeStage pipe;
    GPT2Config stage_cfg;
    // The shapes the engine allocates by.
    size_t n;                // parameters
    size_t shard, padded;    // entries per rank's shard (n rounded up to the ranks), shard * ranks
    size_t shard_begin, shard_n;  // this rank's shard: first entry, real entries (<= shard)
    size_t opt_begin, opt_n;      // the range this rank's optimizer keeps: all (stage 0) or its shard
    size_t layer_bucket_n;   // stages 2, 3: one layer's gradients (its 12 tensors' slices); stage 3's
                             // parameter gather buffers have the same layout
    size_t bucket_offset[GPT2_NUM_PARAM_TENSORS];  // a layer tensor's slice within a layer bucket
    size_t embed_n, lnf_n;   // stage 2: the wte + wpe bucket, the final LayerNorm's
    int recompute_every;     // K at recompute level 3
    TensorGroup acts, scratch;  // acts: one micro-batch's; the stage keeps pipe.in_flight of them
    MemItem items[MEM_COUNT];
    size_t device_bytes;     // what the engine allocates on the device (no estimates)
    size_t device_total;     // with the estimates: what a budget is checked against
    size_t host_bytes;       // host memory the engine allocates (pinned and not)
} MemoryPlan;

// The trainer's limits on a step's shape, which the planner keeps to as well: one validation for
// both (run_shape_check), so the planner never plans or suggests what the trainer refuses.
// B*T*ranks tokens per micro-step (B*T is an int in the engines' layers and kernels), micro-steps
// per optimizer step.
#define RUN_MAX_TOKENS_PER_MICRO_STEP (1L << 24)
#define RUN_MAX_MICRO_STEPS (1L << 20)
// Whether the trainer runs micro-batches of B sequences of T tokens on `ranks` ranks with
// total_batch tokens per optimizer step (-1 = one micro-step): 1 with the micro-steps per step in
// *accum, else 0 with why naming the flags and the limit. Products are exact in 64 bits (B, T <
// 2^31, ranks <= 2^20).
int run_shape_check(long B, long T, long ranks, long total_batch, long* accum, char* why, size_t cap);

// The plan of rank opts->rank of opts->num_ranks (rank 0's shard is never smaller than another's:
// plan rank 0 for the per-rank figure; with -pp, rank 0 of each stage, memory_plan_stage_rank).
// opts->precision picks the element size.
void memory_plan_make(MemoryPlan* p, const GPT2Config* cfg, const EngineOptions* opts);
// The first rank of pipeline stage s (its data-parallel rank 0) under opts.
int memory_plan_stage_rank(const EngineOptions* opts, int s);
// With -pp: the first rank of the stage whose plan needs the most device memory (device_total): the
// rank's figure (--plan and a budget check plan it). Without: 0.
int memory_plan_largest_stage(const GPT2Config* cfg, const EngineOptions* opts);
// With -pp: the stages in a table (layers, what else each holds, micro-batches in flight, planned
// device memory, the largest marked) under a line with the bubble; nothing without.
void memory_plan_print_stages(const GPT2Config* cfg, const EngineOptions* opts, FILE* f);
// With -pp (opts->pp_stages > 1): the layer split into opts->pp_layers that minimises the largest
// stage's planned device memory (device_total; the first stage keeps the most micro-batches in
// flight and the embeddings, the last the classifier's logits): each stage as many layers as fit
// under the least such maximum, then those beyond L taken back one at a time from the stage whose
// plan is the largest. Needs the rest of opts (ranks, micro_steps, B, T, ...).
void memory_plan_pp_split(const GPT2Config* cfg, EngineOptions* opts);

// The table: each component (device or host, estimates marked), the totals, and the activation
// table tensor by tensor (per layer and in all), under a heading naming the configuration.
void memory_plan_print(const MemoryPlan* p, FILE* f);
// The same as the members of one JSON object (for scripts: --plan --json), with the budget's answer
// when budget > 0 (memory_plan_fit_step, for a step of accum micro-steps, keep_step as there): from
// "model" to the last, without the object's braces or a newline, so that the caller can add members
// of its own (--plan --json adds comm_plan.h's "communication") and close it. With -pp also
// "pipeline" (stages, data-parallel ranks, micro-steps, bubble, the plan's stage) and "by_stage"
// (each stage's first layer, layers, micro-batches in flight, device_bytes, device_total, and its
// components as name -> bytes).
// A step's predicted seconds, by which the budget's changes are ranked: p's (its rank's) with accum
// micro-steps, and in model (cap bytes, may be NULL) which model predicted it. comm_plan.h's
// comm_plan_step_seconds is the one the trainer passes (the planner's own time model lives there, with
// the communication the step does not hide).
typedef double (*PlanStepSeconds)(const MemoryPlan* p, int accum, char* model, size_t cap);
void memory_plan_print_json_members(const MemoryPlan* p, size_t budget, int accum, int keep_step, PlanStepSeconds step,
                                    FILE* f);

// What fits in a budget of device bytes per rank (with -pp: on the largest stage).
typedef struct {
    int fits;              // the plan as asked fits
    int max_B;             // the largest micro-batch that fits with everything else as asked and that
                           // the trainer accepts (0: none)
    int found;             // a change was found that fits (when !fits)
    EngineOptions change;  // its options (B, recompute, zero_stage, offload changed)
    int accum_factor;      // micro-steps per optimizer step multiply by this (B divided by it)
    long total_batch;      // tokens per optimizer step, kept: the -d to pass with the smaller -b
    double seconds_lost;   // its predicted cost per optimizer step
    double step_seconds;   // the predicted step it is measured against (the PlanStepSeconds given)
    char time_model[256];  // which model predicted it
    size_t change_bytes;   // its device_total
    char what[256];        // the change as flags to pass, e.g. "-r 1 -b 8 -d 32768"
} MemoryFit;
// accum = micro-steps per optimizer step as asked (a change keeps the step's tokens). keep_step: the
// step's tokens are fixed (-d was given), so max_B must also divide the step's sequences per rank
// (B * accum) as the trainer requires. Every B, accumulation and the step it suggests passes
// run_shape_check. The changes are ranked by step (the fastest that fits first).
MemoryFit memory_plan_fit_step(const GPT2Config* cfg, const EngineOptions* opts, int accum, int keep_step,
                               size_t budget, PlanStepSeconds step);
// memory_plan_fit_step without a fixed step (the engine's out-of-memory advice).
MemoryFit memory_plan_fit(const GPT2Config* cfg, const EngineOptions* opts, int accum, size_t budget,
                          PlanStepSeconds step);
void memory_fit_print(const MemoryFit* fit, const EngineOptions* opts, size_t budget, FILE* f);

// "48GiB", "48GB", "1.5TiB", "512MiB", "4096" (bytes), at least one byte: fatal, naming the flag,
// on anything else (unreadable, negative, 0 or under a byte, more than 64 bits count).
size_t memory_size_parse(const char* text, const char* flag);
const char* offload_name(int offload);

// ---- the planner's time: the card it assumes, and the estimate where the kernel report's counts
// do not reach ----
// comm_plan.h's predicted step (the budget advice's PlanStepSeconds) takes its compute from the
// kernel report's model (time_model.h) on the card --gpu names, else PLAN_CARD; where the counts do
// not cover a configuration, the FLOP count at PLAN_MFU of the card's peak with recompute's extra work.
#define PLAN_CARD "H100 SXM"
#define PLAN_MFU 0.40
// The stated card's dense peak in `precision` (gpu_peak.c's row for PLAN_CARD).
double plan_card_peak(Precision precision);
// Recompute's extra work as a fraction of a step's compute, by level: measured where known (llm.c's
// +0.7% for GELU), else the level's re-run forward (level 3: every block's forward again, a third of
// a step).
double plan_recompute_fraction(int level);
// PCIe 4.0 x16: 32 GB/s raw per direction, about 25 achievable (assumed), whatever link the ranks
// have (comm_plan.h's COMM_HOST_LINK).
#define PLAN_HOST_LINK_BYTES_PER_S 25e9
// The host's AdamW (kernels/adamw.cuh's adamw_update_host, offload's update), parameters a second:
// build/dev/bench_adamw_host_fp16 measured 1.83 G on this project's 2-core AMD EPYC machine with
// nothing else running (docs/memory.md, section 6); --host-adamw gives another machine's figure.
#define PLAN_HOST_ADAMW_PER_S 1.83e9

#ifdef __cplusplus
}
#endif
#endif
