// train_gpt2.cu: the GPU trainer. GPT-2 in mixed precision on one CUDA GPU: floatX (FP16 by
// default, BF16 or FP32; make PRECISION=...) parameters, gradients and activations, fp32 master
// weights and AdamW state, FP16 dynamic loss scaling, hand-written kernels (kernels/*.cuh) and
// cuBLASLt matrix products. main() at the bottom chooses this engine or the C reference engine
// and hands it to the shared driver (common/train_loop.c), which knows engines only through
// common/engine.h.
//
// The file reads as the story of a training step:
//   1. the engine's state: four tensor groups (parameters, gradients, optimizer state,
//      activations) plus scratch, each one allocation carved by a layout table
//   2. forward: embedding, L blocks (LayerNorm, attention, MLP, residual adds fused into the next
//      LayerNorm), final LayerNorm, logits
//   3. ranks and ZeRO: gradients all-reduced (stage 0), reduce-scattered (1) or reduced to their
//      owner as backward produces them (2, 3); each rank updates its shard; parameters gathered
//      back after the update (1: piece by piece beside the next forward; 2: all-gathered) or layer
//      by layer before use (3) (the collectives themselves, and
//      their contract, in train_gpt2_zero.cuh)
//   4. backward: the fused classifier, then the blocks in reverse; parameter gradients accumulate;
//      4b. pipeline stages (-pp): each rank runs its stage's layers of forward and backward over the
//      step's micro-batches in 1F1B, activations to the next stage and their gradients back (the
//      schedule and its contract in train_gpt2_pipe.cuh)
//   5. the optimizer step: one sync for the loss and the gradient norm, loss-scale decision, AdamW
//   6. weights in and out: start-up weights and checkpoints, streamed through a host buffer
//   7. the Engine contract and main()
// The same file builds with nvcc (./train_gpt2) and through the CPU runtime (./train_gpt2_emu).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#if defined(USE_NCCL)
#include <nccl.h>
#endif

// cuBLASLt and NCCL through pointers loaded when the engine starts (before the headers that call them)
#include "cuda_libs.cuh"

#include "common.cuh"
#include "adamw.cuh"
#include "attention.cuh"
#include "classifier.cuh"
#include "encoder.cuh"
#include "gelu.cuh"
#include "global_norm.cuh"
#include "layernorm.cuh"
#include "matmul.cuh"
#include "shard.cuh"

#include "checkpoint.h"
#include "comm_plan.h"
#include "engine.h"
#include "gpt2_config.h"
#include "gpt2_cpu.h"
#include "gpu_peak.h"
#include "memory_plan.h"
#include "ranks.h"
#include "tensor_layout.h"
#include "train_loop.h"
#include "util.h"

// ============================================================================================
// 1. The engine's state
// ============================================================================================

#define STAGE_FLOATS MEM_STAGE_FLOATS  // host staging for weights and checkpoints: 16 MiB
#define OFFLOAD_PIECES 8  // --offload: the optimizer range's pieces, copied and updated in a pipeline

typedef struct {
    GPT2Config cfg;
    ParamLayout layout;
    EngineOptions opts;
    size_t n;               // parameters
    cudaStream_t stream;
    MatmulContext mm;

    // Ranks and ZeRO (section 3: train_gpt2_zero.cuh). The parameters are split into num_ranks contiguous shards of
    // `shard` entries (the last ones padded: any count works); rank r owns [r*shard, +shard).
    int rank, num_ranks, stage;  // with -pp: the stage's data-parallel ranks (world_* below: every rank)
    size_t shard;           // entries per shard: n rounded up to a multiple of num_ranks, divided
    size_t padded;          // shard * num_ranks: the length of params and grads
    size_t shard_begin, shard_n;  // this rank's shard: first entry, real entries in it (<= shard)
    size_t opt_begin, opt_n;      // what this rank's optimizer keeps: all n (stage 0) or its shard
#if defined(USE_NCCL)
    ncclComm_t comm;        // over the ranks above (NULL with one)
    ncclComm_t world_comm;  // over every rank: comm itself without -pp (NULL with one rank)
    ncclComm_t pipe_comm, tied_comm;  // -pp: the replica's stages; its first and last stage (section 4b)
#endif
    // Pipeline stages (section 4b: train_gpt2_pipe.cuh): this rank's stage; cfg, layout, n and every
    // buffer below are the stage's (the whole model without -pp), model the whole model's shape.
    PipeStage pipe;
    GPT2Config model;
    int pp;                 // pipeline stages > 1
    int world_rank, world_ranks;
    void* acts_all;         // pipe.in_flight copies of one micro-batch's activations, acts_bytes each
    size_t acts_bytes;
    int* h_tokens;          // -pp: the step's micro-batches (inputs, then targets, B*T each), until the schedule
    float* h_dloss;         // their dloss_scale
    int queued;             // micro-batches given this step
    cudaEvent_t pipe_ready, pipe_received, pipe_done;
    cudaStream_t comm_stream;     // stage 2: gradient reductions, overlapped with backward
    cudaEvent_t bucket_ready[2], bucket_free[2], edge_ready, edge_free, comm_done;
    int overlap;            // stages 0, 1 over ranks: gradients reduced as the last micro-step's backward
                            // finishes them, on comm_stream (0 with --overlap 0: after backward)
    int grads_reduced;      // the step's gradients were reduced that way (reduce_step_gradients waits)
    cudaEvent_t overlap_ready;
    // Stage 1 with overlap: after the update each rank's shard goes back to the others piece by piece
    // on comm_stream (the embeddings, layer 0, 1, ..., the final LayerNorm: forward's order), and the
    // next forward waits for each piece just before it reads it. params_ready[0]: the embeddings,
    // [1 + l]: layer l, [L + 1]: the final LayerNorm (NULL unless stage 1 with overlap);
    // params_pending: gathers issued that the compute stream has not all waited for yet.
    cudaEvent_t* params_ready;
    int params_pending;
    // Stage 3: no rank holds the whole model. Each layer's parameters are gathered from their owners
    // into one of two buffers (layer l into layer_params[l % 2], laid out as the gradient buckets)
    // before its forward and its backward, the next layer's while this one computes; the embeddings'
    // and the final LayerNorm's into theirs at the start of each forward pass.
    floatX* layer_params[2];
    floatX* embed_params;   // wte, wpe (wte is the classifier too: held until backward's end)
    floatX* lnf_params;
    int gathered[2];        // the layer buffer b holds or is receiving (-1: none; every pass starts anew)
    int edges_gathered;
    cudaEvent_t gather_free[2], gather_done[2], edge_gather_free, edge_gather_done;
    size_t params_first;    // the parameter params[0] holds: 0, or at stage 3 shard_begin
    size_t params_n;        // the real parameters params holds: n, or at stage 3 shard_n

    // One allocation each.
    floatX* params;         // padded, in gpt2_param_layout() order, every rank the whole model;
                            // stage 3: this rank's shard only (shard entries)
    floatX* grads;          // stages 0, 1: padded, same order; stages 2, 3: the buckets below
    floatX* layer_bucket[2];  // stage 2: one layer's gradients (its 12 tensors' slices), two in turn
    floatX* embed_bucket;   // stage 2: wte and wpe gradients (contiguous in the parameter order)
    floatX* lnf_bucket;     // stage 2: the final LayerNorm's
    size_t bucket_offset[GPT2_NUM_PARAM_TENSORS];  // a layer tensor's slice within a layer bucket
    size_t layer_bucket_n;
    floatX* shard_grads;    // this rank's reduced gradients (shard entries): stage 1 a view of grads
                            // (reduce-scattered in place), stage 2 its own buffer
    float* grad_acc;        // stage 2: their fp32 sum over the step's micro-steps
    float* dev_stage;       // stages 1, 2 in FP16/BF16 over ranks: STAGE_FLOATS to gather the master copy
    float* master;          // fp32 master weights of [opt_begin, +opt_n); NULL in FP32 on the device
                            // (params are the master)
    float* m;
    float* v;
    int offload;            // master, m, v live in pinned host memory; AdamW runs on CPU threads
    int offload_grads;      // --offload grads: the buckets' reduced gradients go down as backward makes
                            // them, summed in fp32 on the host (no full-size gradient buffer on the device)
    int bucketed;           // gradients in per-layer buckets: stage 2 or offload_grads
    int grads_fresh;        // not bucketed: the gradient buffer holds nothing of this step yet, so the
                            // next backward writes it (beta = 0) instead of adding to it after a memset
    floatX* h_offload;      // offload: opt_n floatX, pinned: the gradients down, the weights back up
    floatX* h_landing;      // offload_grads: where the buckets land, in the buckets' layout (pinned)
    float* h_grad_acc;      // offload_grads: the step's fp32 gradient sums of the optimizer range
    int landing_layer[2];   // offload_grads: the layer whose copy into landing bucket b awaits its sum (-1 none)
    cudaEvent_t landed[2], edge_landed;
    cudaEvent_t offload_down[OFFLOAD_PIECES], offload_up;  // offload: the update's pipeline (offload_adamw)
    void* acts_base;
    void* scratch_base;
    void* workspace;
    TensorGroup acts, scratch;

    // The memory plan the groups above were allocated by (common/memory_plan.h), and what each
    // component's allocation took from the device's free memory (cudaMemGetInfo before and after).
    MemoryPlan plan;
    size_t allocated[MEM_COUNT];
    long long measured[MEM_COUNT];
    size_t device_bytes, used_before, used_after, used_peak;

    // Host buffers made once: no allocation inside the step loop.
    float* h_stage;         // STAGE_FLOATS fp32
    floatX* h_stage_x;      // STAGE_FLOATS floatX
    int* h_plan;            // the encoder plan for the current micro-step
    int64_t* h_keys;        // its sort keys
    float h_stats[4];

    int recompute_every;    // K: layers per segment at recompute level 3
    int cur_B, cur_T;       // shape of the last forward
    int logits_valid;       // a forward without targets left logits to read

    // Optimizer counters (saved in the state file).
    long long adam_steps;   // AdamW updates applied
    double loss_scale;      // FP16 only; 1 otherwise
    long long good_steps;   // finite steps since the scale last changed
} GPUEngine;

#if defined(ENABLE_FP16)
static const int USE_LOSS_SCALING = 1;
static const Precision BUILD_PRECISION = PRECISION_FP16;
#elif defined(ENABLE_BF16)
static const int USE_LOSS_SCALING = 0;
static const Precision BUILD_PRECISION = PRECISION_BF16;
#else
static const int USE_LOSS_SCALING = 0;
static const Precision BUILD_PRECISION = PRECISION_FP32;
#endif

// Views into the groups. Layer tensors are stacked with the capacity's stride, so the views of a
// smaller B x T stay inside their slice.
template <class T>
static T* act_ptr(GPUEngine* g, int slot, int layer = 0) {
    const TensorSlot* s = &g->acts.slots[slot];
    return (T*)((char*)g->acts_base + s->offset + (size_t)layer * s->per_layer * dtype_bytes(s->dtype, sizeof(floatX)));
}
template <class T>
static T* scratch_ptr(GPUEngine* g, int slot) {
    return (T*)((char*)g->scratch_base + g->scratch.slots[slot].offset);
}
static int is_layer_tensor(int tensor) { return tensor >= PT_LN1W && tensor <= PT_FCPROJB; }
// The index of a tensor's first entry (layer's slice) in the parameter order.
static size_t param_index(GPUEngine* g, int tensor, int layer = 0) {
    const ParamTensor* t = &g->layout.tensors[tensor];
    int stacked = is_layer_tensor(tensor);  // the per-layer tensors, stacked over L
    return t->offset + (stacked ? (size_t)layer * (t->numel / g->cfg.num_layers) : 0);
}
// Where forward and backward read a parameter tensor: the whole model (stages 0-2) or, at stage 3,
// the gather buffer that holds it (section 3 gathers it first; using one not gathered is a bug).
static floatX* param_ptr(GPUEngine* g, int tensor, int layer = 0) {
    size_t global = param_index(g, tensor, layer);
    if (g->stage != 3) return g->params + global;
    if (is_layer_tensor(tensor)) {
        if (g->gathered[layer % 2] != layer) fatal("internal error: layer %d's parameters read before being gathered", layer);
        return g->layer_params[layer % 2] + g->bucket_offset[tensor];
    }
    if (!g->edges_gathered) fatal("internal error: the embeddings' parameters read before being gathered");
    if (tensor == PT_WTE || tensor == PT_WPE) return g->embed_params + global;
    return g->lnf_params + (global - g->layout.tensors[PT_LNFW].offset);
}

// Where backward adds a tensor's gradient: the full gradient buffer (stages 0, 1) or, at stages 2, 3,
// the bucket that holds it until its reduction (one of two layer buckets, taken in turn by layer).
static floatX* grad_ptr(GPUEngine* g, int tensor, int layer = 0) {
    size_t global = param_index(g, tensor, layer);
    if (!g->bucketed) return g->grads + global;
    if (is_layer_tensor(tensor)) return g->layer_bucket[layer % 2] + g->bucket_offset[tensor];
    if (tensor == PT_WTE || tensor == PT_WPE) return g->embed_bucket + global;  // wte, wpe lead the parameters
    return g->lnf_bucket + (global - g->layout.tensors[PT_LNFW].offset);
}

// Stage 3's gathers of the parameters forward and backward read (section 3, train_gpt2_zero.cuh).
static void zero3_begin_pass(GPUEngine* g);
static void zero3_layer(GPUEngine* g, int l);
static void zero3_prefetch(GPUEngine* g, int l);
static void zero3_backward_layer(GPUEngine* g, int l);
static void zero1_wait_lnf(GPUEngine* g);  // stage 1 with overlap: the final LayerNorm's gather
// Used by the pipeline (section 4b) before their sections.
static void upload_tokens(GPUEngine* g, int slot, const int* tokens, int n);
static void download_to_file(GPUEngine* g, CheckpointWriter* w, const float* src, size_t n, int on_host);
static const float* master_weights(GPUEngine* g, int* on_host);

// Out of device memory: the plan and the cheapest change that fits what the device had for this
// engine, then one line naming the component (never a bare CUDA error).
static void out_of_memory(GPUEngine* g, int k, size_t bytes, size_t free_b, size_t total_b) {
    // What the engine could have: the device's memory less what was in use before it allocated,
    // with the context back in (the plan counts it among its estimates).
    size_t budget = total_b - g->used_before + g->plan.items[MEM_CUDA_CONTEXT].bytes;
    memory_plan_print(&g->plan, stdout);
    MemoryFit fit = memory_plan_fit(&g->model, &g->opts, 1, budget, comm_plan_step_seconds);
    memory_fit_print(&fit, &g->opts, budget, stdout);
    fflush(stdout);
    fatal("out of GPU memory allocating the %s: %.1f MiB asked, %.1f MiB free of %.1f MiB; the plan above needs "
          "%.1f MiB with its estimates", g->plan.items[k].name, bytes / 1048576.0, free_b / 1048576.0,
          total_b / 1048576.0, g->plan.device_total / 1048576.0);
}

// Component k of the plan: exactly its bytes, from the device (counted as the device sees them:
// its free memory before and after) or from pinned host memory. NULL for a component of 0 bytes.
static void* component_alloc(GPUEngine* g, int k) {
    const MemItem* it = &g->plan.items[k];
    g->allocated[k] = it->bytes;
    g->measured[k] = it->where == MEM_ON_HOST ? -1 : 0;
    if (it->bytes == 0) return NULL;
    void* p = NULL;
    if (it->where == MEM_ON_HOST) {
        if (cudaMallocHost(&p, it->bytes) != cudaSuccess) {
            cudaGetLastError();
            fatal("out of pinned host memory allocating the %s: %.1f MiB (the plan's host memory: %.1f MiB in all)",
                  it->name, it->bytes / 1048576.0, g->plan.host_bytes / 1048576.0);
        }
        return p;
    }
    size_t free0 = 0, free1 = 0, total = 0;
    cudaCheck(cudaMemGetInfo(&free0, &total));
    if (cudaMalloc(&p, it->bytes) != cudaSuccess) {
        cudaGetLastError();
        out_of_memory(g, k, it->bytes, free0, total);
    }
    cudaCheck(cudaMemGetInfo(&free1, &total));
    g->measured[k] = (long long)free0 - (long long)free1;
    return p;
}

// ============================================================================================
// 2. Forward
// ============================================================================================

// Where layer l's activations live at the engine's recompute level (common/tensor_layout.h): their
// own slice (level 0), a buffer shared by all layers for what backward rebuilds (levels 1, 2), or
// slot l % K of a segment's worth of layers (level 3).
typedef struct {
    floatX* ln1; float* ln1_mean; float* ln1_rstd; floatX* qkv; floatX* atty; float* lse; floatX* residual2;
    floatX* ln2; float* ln2_mean; float* ln2_rstd; floatX* fch; floatX* fch_gelu;
    floatX* residual3;  // level 3, a segment's last layer: the next segment's kept input
    floatX* residual;   // the layer's input: the embedding or the previous layer's residual3
} LayerActs;

static int act_slot(GPUEngine* g, int slot, int l) {
    size_t layers = g->acts.slots[slot].layers;
    return layers == 1 ? 0 : l % (int)layers;
}

static floatX* residual_out(GPUEngine* g, int l) {
    int K = g->recompute_every, L = g->cfg.num_layers;
    if (g->opts.recompute == 3 && (l + 1) % K == 0 && l + 1 < L) return act_ptr<floatX>(g, ACT_BLOCK_INPUTS, (l + 1) / K - 1);
    return act_ptr<floatX>(g, ACT_RESIDUAL3, act_slot(g, ACT_RESIDUAL3, l));
}

static LayerActs layer_acts(GPUEngine* g, int l) {
    LayerActs a;
#define VIEW(T, slot) act_ptr<T>(g, slot, act_slot(g, slot, l))
    a.ln1 = VIEW(floatX, ACT_LN1); a.ln1_mean = VIEW(float, ACT_LN1_MEAN); a.ln1_rstd = VIEW(float, ACT_LN1_RSTD);
    a.qkv = VIEW(floatX, ACT_QKV); a.atty = VIEW(floatX, ACT_ATTY); a.lse = VIEW(float, ACT_ATT_LSE);
    a.residual2 = VIEW(floatX, ACT_RESIDUAL2);
    a.ln2 = VIEW(floatX, ACT_LN2); a.ln2_mean = VIEW(float, ACT_LN2_MEAN); a.ln2_rstd = VIEW(float, ACT_LN2_RSTD);
    a.fch = VIEW(floatX, ACT_FCH); a.fch_gelu = VIEW(floatX, ACT_FCH_GELU);
#undef VIEW
    a.residual3 = residual_out(g, l);
    a.residual = l == 0 ? act_ptr<floatX>(g, ACT_ENCODED) : residual_out(g, l - 1);
    return a;
}

// Layer l's forward from its ln1 (already computed) to its output residual3, the residual add fused
// with the next LayerNorm (the next layer's ln1, or the final one). Without to_output it stops
// after the MLP's GELU: the last layer of a segment that level 3 recomputes for backward, whose
// output is the next segment's kept input and whose LayerNorm belongs to that segment.
static void layer_forward(GPUEngine* g, int l, int B, int T, int to_output) {
    const GPT2Config* c = &g->cfg;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, HS = C / NH, BT = B * T;
    cudaStream_t st = g->stream;
    floatX* proj = scratch_ptr<floatX>(g, SCR_PROJ);
    LayerActs a = layer_acts(g, l);
    zero3_layer(g, l);  // stage 3: this layer's parameters here, the next layer's gathered meanwhile
                        // (stage 1 after an update: this layer's gather waited for)
    if (to_output) zero3_prefetch(g, l + 1);

    // attention
    matmul_forward(&g->mm, a.qkv, NULL, a.ln1, param_ptr(g, PT_QKVW, l), param_ptr(g, PT_QKVB, l), BT, C, 3 * C, st);
    attention_forward(a.atty, a.lse, a.qkv, B, T, NH, HS, st);
    matmul_forward(&g->mm, proj, NULL, a.atty, param_ptr(g, PT_ATTPROJW, l), param_ptr(g, PT_ATTPROJB, l), BT, C, C, st);
    fused_residual_layernorm_forward(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual, proj,
                                     param_ptr(g, PT_LN2W, l), param_ptr(g, PT_LN2B, l), BT, C, st);
    // MLP: GELU in the matmul's epilogue (-ge 1, 2) or its own kernel. With recompute the forward
    // uses the kernel too, so the GELU that backward rebuilds has the bits forward used.
    if (g->opts.gelu_fusion >= 1 && g->opts.recompute == 0) {
        matmul_forward(&g->mm, a.fch_gelu, a.fch, a.ln2, param_ptr(g, PT_FCW, l), param_ptr(g, PT_FCB, l), BT, C, 4 * C, st);
    } else {
        matmul_forward(&g->mm, a.fch, NULL, a.ln2, param_ptr(g, PT_FCW, l), param_ptr(g, PT_FCB, l), BT, C, 4 * C, st);
        gelu_forward(a.fch_gelu, a.fch, (size_t)BT * 4 * C, st);
    }
    if (!to_output) return;  // a recomputed segment's last layer: backward needs nothing past the GELU
    matmul_forward(&g->mm, proj, NULL, a.fch_gelu, param_ptr(g, PT_FCPROJW, l), param_ptr(g, PT_FCPROJB, l), BT,
                   4 * C, C, st);
    if (l + 1 < L) {
        LayerActs n = layer_acts(g, l + 1);
        zero3_layer(g, l + 1);  // its LayerNorm's parameters
        fused_residual_layernorm_forward(a.residual3, n.ln1, n.ln1_mean, n.ln1_rstd, a.residual2, proj,
                                         param_ptr(g, PT_LN1W, l + 1), param_ptr(g, PT_LN1B, l + 1), BT, C, st);
    } else if (g->pipe.head) {
        zero1_wait_lnf(g);  // stage 1: the final LayerNorm's parameters gathered since the update
        fused_residual_layernorm_forward(a.residual3, act_ptr<floatX>(g, ACT_LNF), act_ptr<float>(g, ACT_LNF_MEAN),
                                         act_ptr<float>(g, ACT_LNF_RSTD), a.residual2, proj, param_ptr(g, PT_LNFW),
                                         param_ptr(g, PT_LNFB), BT, C, st);
    } else {  // a pipeline stage before the last: the LayerNorm after its last layer is the next stage's
        residual_forward(a.residual3, a.residual2, proj, (size_t)BT * C, st);
    }
}

// Embedding and the blocks up to the logits, over the B x T tokens already in ACT_INPUTS. A
// pipeline stage runs its layers only: after the first, from the previous stage's output (received
// into ACT_ENCODED, section 4b); before the last, up to its last layer's output.
static void gpu_forward_pass(GPUEngine* g, int B, int T) {
    const GPT2Config* c = &g->cfg;
    int L = c->num_layers, C = c->channels, Vp = c->padded_vocab_size, BT = B * T;
    cudaStream_t st = g->stream;
    zero3_begin_pass(g);  // stage 3: the embeddings' and final LayerNorm's parameters gathered
                          // (stage 1 after an update: the embeddings' gather waited for)
    if (g->pipe.embed)
        encoder_forward(act_ptr<floatX>(g, ACT_ENCODED), act_ptr<int>(g, ACT_INPUTS), param_ptr(g, PT_WTE),
                        param_ptr(g, PT_WPE), B, T, C, st);
    LayerActs a0 = layer_acts(g, 0);
    zero3_layer(g, 0);
    layernorm_forward(a0.ln1, a0.ln1_mean, a0.ln1_rstd, a0.residual, param_ptr(g, PT_LN1W), param_ptr(g, PT_LN1B), BT, C, st);
    for (int l = 0; l < L; l++) layer_forward(g, l, B, T, 1);
    if (g->pipe.head)
        matmul_forward(&g->mm, act_ptr<floatX>(g, ACT_LOGITS), NULL, act_ptr<floatX>(g, ACT_LNF), param_ptr(g, PT_WTE),
                       NULL, BT, C, Vp, st);
}

// ============================================================================================
// 3. Ranks and ZeRO
// ============================================================================================
// Every rank runs forward and backward on its own micro-batch with the whole model. Gradients
// carry 1/num_ranks (in backward's dloss), so summing them over ranks gives the global mean.
//   stage 0: the full gradients are all-reduced; every rank updates every parameter.
//   stage 1: the full gradients are reduce-scattered: each rank gets the sum of its shard,
//            updates it (its master weights, m and v are only the shard), and the parameters are
//            all-gathered; by default piece by piece (the embeddings, each layer, the final
//            LayerNorm) on the second stream, each waited for by the next forward just before it
//            reads it (--overlap 0: one all-gather after the update; the same bits).
//   Both reduce layer by layer on a second stream as the step's last backward finishes each
//   layer's gradients (--overlap 0: all at once after backward; the same bits).
//   stage 2: no full gradient buffer: backward writes each layer's gradients into a bucket that is
//            reduced straight to the ranks owning its entries (on a second stream, while backward
//            goes on), and each rank adds its share into an fp32 shard accumulator.
//   stage 3: stage 2's gradients, and no whole model either: each rank keeps its shard of the
//            parameters; forward and backward gather each layer's from their owners into one of
//            two buffers just before it runs, the next layer's on the second stream meanwhile
//            (zero3_begin_pass, zero3_layer, zero3_prefetch, zero3_backward_layer); nothing is
//            gathered after the update.
// The story calls into it from four places: at stage 3 forward and backward (and level 3's
// recompute) gather each layer's parameters before reading them (zero3_begin_pass, zero3_layer,
// zero3_prefetch, zero3_backward_layer: declared in section 1; at stage 1 the same calls, and
// zero1_wait_lnf, make the forward after an update wait for each piece's gather); backward opens and reduces the buckets
// (bucket_begin_edges, bucket_begin_layer, bucket_reduce_layer, bucket_reduce_edges; stages 0, 1:
// overlap_reduce_layer, overlap_reduce_edges); the optimizer step gets its shard's gradient
// (reduce_step_gradients), sums the step's statistics (reduce_step_stats) and, after updating its
// shard, gathers the whole model (gather_parameters); the engine opens and closes the communicator
// (zero_comm_init, zero_comm_destroy). The collectives, what each waits for and on which stream it
// runs are in train_gpt2_zero.cuh, whose first screen is the contract.
#include "train_gpt2_zero.cuh"

// ============================================================================================
// 4. Backward
// ============================================================================================

// Level 3: re-runs the forward of the segment whose last layer is `last` from its kept input, so
// its layers' activations are in their slots again (the last layer's up to its GELU).
static void recompute_segment(GPUEngine* g, int last, int B, int T) {
    int K = g->recompute_every, first = last / K * K, C = g->cfg.channels;
    LayerActs a = layer_acts(g, first);
    zero3_layer(g, first);  // stage 3: the segment's layers gathered again, in forward's order
    layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.residual, param_ptr(g, PT_LN1W, first),
                      param_ptr(g, PT_LN1B, first), B * T, C, g->stream);
    for (int l = first; l <= last; l++) layer_forward(g, l, B, T, l < last);
}

// Gradients of the last forward's loss, times dloss_scale and the loss scale, ADDED to grads.
// reduce: the step's last micro-step with g->overlap: each layer's gradients are reduced over the
// ranks as soon as they are final (section 3).
static void gpu_backward_pass(GPUEngine* g, int B, int T, float dloss_scale, int plan_blocks, int reduce) {
    const GPT2Config* c = &g->cfg;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, HS = C / NH, V = c->vocab_size,
        Vp = c->padded_vocab_size;
    int BT = B * T, level = g->opts.recompute;
    cudaStream_t st = g->stream;
    floatX* dln = scratch_ptr<floatX>(g, SCR_PROJ);
    floatX* dresidual = scratch_ptr<floatX>(g, SCR_DRESIDUAL);
    floatX* dbig = scratch_ptr<floatX>(g, SCR_DBIG);
    float* ln_scratch = scratch_ptr<float>(g, SCR_LN);
    float* bias_scratch = scratch_ptr<float>(g, SCR_DBIAS);
    floatX* logits = act_ptr<floatX>(g, ACT_LOGITS);

    // The objective is the mean loss over B*T tokens times dloss_scale (1/accumulation steps), times
    // the loss scale in FP16 so small gradients stay representable; optimizer_step divides it out.
    // With several ranks each carries 1/num_ranks, so the sum over ranks is the global mean.
    float dloss = (float)(g->loss_scale * dloss_scale / ((double)BT * g->num_ranks));
    // Parameter gradients: written by a step's first backward (no 3 GB memset at d48 before it), added
    // to by the others; the buckets are zeroed as each is taken, so they always add.
    const int acc = g->bucketed || !g->grads_fresh;
    g->grads_fresh = 0;
    if (g->bucketed) bucket_begin_edges(g);
    if (g->pipe.head) {
        float* stats = scratch_ptr<float>(g, SCR_STATS);
        fused_classifier(logits, act_ptr<float>(g, ACT_LOSSES), act_ptr<int>(g, ACT_TARGETS), dloss, BT, V, Vp, 1, stats,
                         dloss_scale, (unsigned*)(stats + 4), st);
        matmul_backward(&g->mm, dln, grad_ptr(g, PT_WTE), NULL, bias_scratch, logits, act_ptr<floatX>(g, ACT_LNF),
                        param_ptr(g, PT_WTE), NULL, BT, C, Vp, acc, st);
        cudaCheck(cudaMemsetAsync(dresidual, 0, (size_t)BT * C * sizeof(floatX), st));
        layernorm_backward(dresidual, grad_ptr(g, PT_LNFW), grad_ptr(g, PT_LNFB), ln_scratch, dln,
                           layer_acts(g, L - 1).residual3, param_ptr(g, PT_LNFW), act_ptr<float>(g, ACT_LNF_MEAN),
                           act_ptr<float>(g, ACT_LNF_RSTD), BT, C, acc, st);
    }  // else (a pipeline stage before the last) dresidual holds its output's gradient, from the next stage
    // dresidual now holds d(residual3) of the last layer; each layer turns it into d(its input).
    for (int l = L - 1; l >= 0; l--) {
        if (level == 3 && (l == L - 1 || (l + 1) % g->recompute_every == 0)) recompute_segment(g, l, B, T);
        zero3_backward_layer(g, l);  // stage 3: its parameters here, the layer below's gathered meanwhile
        if (g->bucketed) bucket_begin_layer(g, l);
        LayerActs a = layer_acts(g, l);
        // MLP: d(fcproj out) = dresidual; the residual branch passes dresidual through unchanged.
        if (level == 1 || level == 2) gelu_forward(a.fch_gelu, a.fch, (size_t)BT * 4 * C, st);  // rebuild
        const floatX* pre_gelu = g->opts.gelu_fusion == 2 ? a.fch : NULL;
        matmul_backward(&g->mm, dbig, grad_ptr(g, PT_FCPROJW, l), grad_ptr(g, PT_FCPROJB, l), bias_scratch, dresidual,
                        a.fch_gelu, param_ptr(g, PT_FCPROJW, l), pre_gelu, BT, 4 * C, C, acc, st);
        if (!pre_gelu) gelu_backward(dbig, a.fch, dbig, (size_t)BT * 4 * C, st);
        if (level == 2)  // rebuild ln2 from the kept residual; the kernel is deterministic, so same bits
            layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, param_ptr(g, PT_LN2W, l),
                              param_ptr(g, PT_LN2B, l), BT, C, st);
        matmul_backward(&g->mm, dln, grad_ptr(g, PT_FCW, l), grad_ptr(g, PT_FCB, l), bias_scratch, dbig, a.ln2,
                        param_ptr(g, PT_FCW, l), NULL, BT, C, 4 * C, acc, st);
        layernorm_backward(dresidual, grad_ptr(g, PT_LN2W, l), grad_ptr(g, PT_LN2B, l), ln_scratch, dln, a.residual2,
                           param_ptr(g, PT_LN2W, l), a.ln2_mean, a.ln2_rstd, BT, C, acc, st);
        // attention: dresidual is now d(residual2) = d(attention projection out)
        matmul_backward(&g->mm, dln, grad_ptr(g, PT_ATTPROJW, l), grad_ptr(g, PT_ATTPROJB, l), bias_scratch, dresidual,
                        a.atty, param_ptr(g, PT_ATTPROJW, l), NULL, BT, C, C, acc, st);
        attention_backward(dbig, scratch_ptr<float>(g, SCR_ATT), dln, a.qkv, a.atty, a.lse, B, T, NH, HS, st);
        if (level == 2)
            layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.residual, param_ptr(g, PT_LN1W, l),
                              param_ptr(g, PT_LN1B, l), BT, C, st);
        matmul_backward(&g->mm, dln, grad_ptr(g, PT_QKVW, l), grad_ptr(g, PT_QKVB, l), bias_scratch, dbig, a.ln1,
                        param_ptr(g, PT_QKVW, l), NULL, BT, C, 3 * C, acc, st);
        layernorm_backward(dresidual, grad_ptr(g, PT_LN1W, l), grad_ptr(g, PT_LN1B, l), ln_scratch, dln, a.residual,
                           param_ptr(g, PT_LN1W, l), a.ln1_mean, a.ln1_rstd, BT, C, acc, st);
        if (g->bucketed) bucket_reduce_layer(g, l);
        else if (reduce) overlap_reduce_layer(g, l);
    }
    if (g->pipe.embed) {
        // The embedding's backward adds into wte's gradient, which the classifier's product writes
        // first; a first pipeline stage without the classifier starts the step's from zero.
        if (!g->pipe.head && !acc)
            cudaCheck(cudaMemsetAsync(grad_ptr(g, PT_WTE), 0, g->layout.tensors[PT_WTE].numel * sizeof(floatX), st));
        encoder_backward(grad_ptr(g, PT_WTE), grad_ptr(g, PT_WPE), dresidual, scratch_ptr<int>(g, SCR_PLAN), plan_blocks,
                         B, T, C, acc, st);
    }  // else dresidual is the gradient of the stage's input, for the previous stage
    if (g->bucketed) bucket_reduce_edges(g);
    else if (reduce) overlap_reduce_edges(g);
}

// 4b. Pipeline stages: the 1F1B schedule over the step's micro-batches, the activations and their
// gradients between neighbouring stages, the tied embedding's gradient, checkpoints written whole
// (train_gpt2_pipe.cuh, whose first screen is the contract). The story calls into it from the
// micro-step (pipe_micro_step: the step's last runs the schedule, which runs gpu_forward_pass and
// gpu_backward_pass per micro-batch), evaluation (pipe_forward_only, pipe_logits_row), the
// optimizer step (pipe_step_gradients, pipe_norm_skip), checkpoints (pipe_checkpoint_save,
// pipe_state_sink) and the engine's making (pipe_comm_init).
#include "train_gpt2_pipe.cuh"

// ============================================================================================
// 5. The optimizer step
// ============================================================================================

// The device's memory in use now (every process on it), kept as the peak; over --max-memory it
// ends the run: the budget is checked against what the device really holds, not only the plan.
static void device_usage_sample(GPUEngine* g) {
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    size_t used = total_b - free_b;
    if (used > g->used_peak) g->used_peak = used;
    if (g->opts.memory_budget && used > g->opts.memory_budget)
        fatal("flag --max-memory is %.2f GiB, and the device has %.2f GiB in use (planned for this rank: %.2f GiB, "
              "with estimates)", g->opts.memory_budget / 1073741824.0, used / 1073741824.0,
              g->plan.device_total / 1073741824.0);
}

// --offload grads, before the update: the host's fp32 sums rounded to floatX (as stage 2 rounds its
// shard) into the buffer AdamW reads, and this rank's shard's squared norm and non-finite count
// into the device's stats, where the ranks sum them as usual.
static void offload_step_gradients(GPUEngine* g, float* stats) {
    size_t n = g->opt_n;
    size_t a = g->shard_begin - g->opt_begin, b = a + g->shard_n;  // this rank's shard within the range
    double sum = 0.0, bad = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum, bad)
    for (size_t i = 0; i < n; i++) {
        floatX x = host_float_to_floatx(g->h_grad_acc[i]);  // CUDA's rounding, branch-free (common.cuh)
        g->h_offload[i] = x;
        float f = host_floatx_to_float(x);
        if (i >= a && i < b) {
            sum += (double)f * f;
            bad += isfinite(f) ? 0.0 : 1.0;
        }
    }
    g->h_stats[2] = (float)sum;
    g->h_stats[3] = (float)bad;
    // No synchronization needed: the step's download into h_stats (gpu_optimizer_step) is on the same
    // stream, so this upload has read its bytes before that overwrites them (test_stream_sync.sh
    // checks every such claim of this file).
    cudaCheck(cudaMemcpyAsync(stats + 2, g->h_stats + 2, 2 * sizeof(float), cudaMemcpyHostToDevice, g->stream));
}

static void zero_step_state(GPUEngine* g) {
    if (g->offload_grads) memset(g->h_grad_acc, 0, g->opt_n * sizeof(float));  // the host is past the step's last use
    else if (g->stage < 2) g->grads_fresh = 1;  // the next backward writes them: no memset (its padding stays 0)
    else cudaCheck(cudaMemsetAsync(g->grad_acc, 0, g->shard_n * sizeof(float), g->stream));
    cudaCheck(cudaMemsetAsync(scratch_ptr<float>(g, SCR_STATS), 0, sizeof(float), g->stream));  // the step's loss
}

// One AdamW update's constants.
typedef struct {
    float lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale;
} AdamWStep;

// fn(a, b, wd) for each parameter tensor's part [a, b) of the global range [lo, hi), with the
// tensor's weight decay (none for biases and LayerNorm weights), in order.
static_assert(GPT2_NUM_PARAM_TENSORS <= ADAMW_MAX_SEGMENTS, "one AdamW launch takes every tensor's part");
template <typename F>
static void for_each_tensor_part(GPUEngine* g, size_t lo, size_t hi, float weight_decay, F fn) {
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++) {
        const ParamTensor* t = &g->layout.tensors[k];
        size_t a = t->offset > lo ? t->offset : lo;
        size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a < b) fn(a, b, t->weight_decay ? weight_decay : 0.0f);
    }
}

// --offload: AdamW for this rank's optimizer range on the CPU threads, in OFFLOAD_PIECES pieces so
// that the copies hide under the CPU's work. Every piece's gradients are queued down at once on the
// compute stream (one copy direction); the host updates piece k as soon as its copy has landed,
// while later pieces are still coming down, and sends piece k's weights up on the comm stream (the
// other direction) while it updates piece k + 1. The compute stream waits for the last upload
// before anything reads the weights, and the next step's copies into the same pinned buffer queue
// behind that wait. The uploads overwrite weights that earlier work on both streams read: the host
// synchronized with the compute stream (which had waited for the comm stream) for the step's
// statistics, so none of that work is pending. With --offload grads the gradients are on the host
// already; only the uploads overlap. At stage 3 the range is the rank's parameter shard
// (params_first = opt_begin): the uploads land in the device's shard, which the next pass's gathers
// (queued behind them on the comm stream) read; nothing is all-gathered.
static void offload_adamw(GPUEngine* g, const floatX* opt_grads, const AdamWStep* u) {
    size_t piece = ceil_div_size(g->opt_n, OFFLOAD_PIECES);
    // Piece k is [begin_of(k), begin_of(k + 1)).
    auto begin_of = [&](int k) { return (size_t)k * piece < g->opt_n ? (size_t)k * piece : g->opt_n; };
    for (int k = 0; k < OFFLOAD_PIECES && !g->offload_grads; k++) {
        size_t a = begin_of(k), b = begin_of(k + 1);
        if (a < b)
            cudaCheck(cudaMemcpyAsync(g->h_offload + a, opt_grads + a, (b - a) * sizeof(floatX),
                                      cudaMemcpyDeviceToHost, g->stream));
        cudaCheck(cudaEventRecord(g->offload_down[k], g->stream));
    }
    for (int k = 0; k < OFFLOAD_PIECES; k++) {
        size_t a = begin_of(k), b = begin_of(k + 1);
        if (!g->offload_grads) cudaCheck(cudaEventSynchronize(g->offload_down[k]));
        for_each_tensor_part(g, g->opt_begin + a, g->opt_begin + b, u->weight_decay, [&](size_t x, size_t y, float wd) {
            size_t o = x - g->opt_begin;
            adamw_update_host(g->h_offload + o, g->master + o, g->m + o, g->v + o, y - x, u->lr, u->beta1, u->beta2,
                              u->bc1, u->bc2, u->eps, wd, u->grad_scale);
        });
        if (a < b)
            cudaCheck(cudaMemcpyAsync(g->params + (g->opt_begin - g->params_first) + a, g->h_offload + a,
                                      (b - a) * sizeof(floatX), cudaMemcpyHostToDevice, g->comm_stream));
    }
    cudaCheck(cudaEventRecord(g->offload_up, g->comm_stream));
    cudaCheck(cudaStreamWaitEvent(g->stream, g->offload_up, 0));
}

static StepResult gpu_optimizer_step(Engine* e, const AdamWConfig* opt, float lr, float clip) {
    GPUEngine* g = (GPUEngine*)e->self;
    float* stats = scratch_ptr<float>(g, SCR_STATS);
    const floatX* shard_grads = NULL;
    if (g->offload_grads) offload_step_gradients(g, stats);  // the sums are on the host already
    else {
        pipe_step_gradients(g);  // -pp: the tied embedding's two gradients summed (section 4b)
        shard_grads = reduce_step_gradients(g);  // this rank's shard of the summed gradients
        size_t skip = pipe_norm_skip(g);  // -pp: the last stage's copy of wte counts once, on the first
        global_norm_squared(stats + 2, scratch_ptr<float>(g, SCR_NORM), shard_grads + skip, g->shard_n - skip, g->stream);
    }
    reduce_step_stats(g, stats);
    // The one device-to-host copy of a training step: loss, squared norm, non-finite count. Into
    // pageable memory it returns complete (CUDA's rule); the synchronization says so, and stays right
    // if h_stats ever moves to pinned memory.
    cudaCheck(cudaMemcpyAsync(g->h_stats, stats, 4 * sizeof(float), cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));

    StepResult r;
    r.loss = g->h_stats[0] / g->num_ranks;
    r.loss_scale = (float)g->loss_scale;
    r.grad_norm = (float)(sqrt((double)g->h_stats[2]) / g->loss_scale);
    int finite = g->h_stats[3] == 0.0f && isfinite(g->h_stats[2]);  // the same on every rank: the stats are summed
    int outlier = (opt->skip_loss_above > 0 && r.loss > opt->skip_loss_above) ||
                  (opt->skip_norm_above > 0 && r.grad_norm > opt->skip_norm_above);  // the driver's guard
    r.applied = finite && !outlier;
    if (r.applied) {
        float clip_scale = 1.0f;
        if (clip > 0.0f && r.grad_norm > clip) clip_scale = clip / (r.grad_norm + 1e-6f);
        float grad_scale = (float)(clip_scale / g->loss_scale);
        g->adam_steps++;
        float bc1 = 1.0f - powf(opt->beta1, (float)g->adam_steps);
        float bc2 = 1.0f - powf(opt->beta2, (float)g->adam_steps);
        // The gradient of the optimizer range's first entry (stage 0: the whole model's).
        const floatX* opt_grads = g->stage == 0 ? g->grads : shard_grads;
        AdamWStep u = {lr, opt->beta1, opt->beta2, bc1, bc2, opt->eps, opt->weight_decay, grad_scale};
        if (g->offload) offload_adamw(g, opt_grads, &u);
        else {
            // The whole range in one launch, each tensor's part with its decay: one partial last wave
            // and one launch gap a step, not one a tensor.
            size_t lo = g->opt_begin, hi = g->opt_begin + g->opt_n;
            AdamWSegments seg = {};  // no parts yet
            for_each_tensor_part(g, lo, hi, u.weight_decay,
                                 [&](size_t a, size_t b, float wd) { adamw_segments_add(&seg, b - lo, wd); });
            adamw_update_segments(g->params + (lo - g->params_first), g->master, opt_grads, g->m, g->v, g->opt_n, &seg,
                                  u.lr, u.beta1, u.beta2, u.bc1, u.bc2, u.eps, u.grad_scale, g->stream);
        }
        gather_parameters(g);
    }
    // PyTorch GradScaler's rule: halve on an overflow, double after `interval` finite steps in a row.
    if (USE_LOSS_SCALING) {
        if (!finite) {
            // Halved, never below LOSS_SCALE_MIN (the driver stops a run whose gradients stay
            // non-finite there).
            g->loss_scale = g->loss_scale * 0.5 < LOSS_SCALE_MIN ? LOSS_SCALE_MIN : g->loss_scale * 0.5;
            g->good_steps = 0;
        } else if (++g->good_steps >= g->opts.loss_scale_interval) {
            if (isfinite((float)(g->loss_scale * 2.0))) g->loss_scale *= 2.0;
            g->good_steps = 0;
        }
    }
    zero_step_state(g);
    device_usage_sample(g);
    return r;
}

// ============================================================================================
// 6. Weights in and out
// ============================================================================================

// fp32 weights [offset, offset + count) into the master copy (when there is one) and the floatX
// parameters; count <= STAGE_FLOATS, src in host memory.
static void upload_weights(GPUEngine* g, size_t offset, const float* src, size_t count) {
    size_t a = offset > g->opt_begin ? offset : g->opt_begin;  // the part this rank's master copy holds
    size_t b = offset + count < g->opt_begin + g->opt_n ? offset + count : g->opt_begin + g->opt_n;
    if (g->master && a < b) {
        if (g->offload) memcpy(g->master + (a - g->opt_begin), src + (a - offset), (b - a) * sizeof(float));
        else cudaCheck(cudaMemcpy(g->master + (a - g->opt_begin), src + (a - offset), (b - a) * sizeof(float),
                                  cudaMemcpyHostToDevice));
    }
#pragma omp parallel for
    for (size_t i = 0; i < count; i++) g->h_stage_x[i] = (floatX)src[i];
    // The part of them this rank's parameters hold (all but at stage 3).
    a = offset > g->params_first ? offset : g->params_first;
    b = offset + count < g->params_first + g->params_n ? offset + count : g->params_first + g->params_n;
    if (a < b)
        cudaCheck(cudaMemcpy(g->params + (a - g->params_first), g->h_stage_x + (a - offset), (b - a) * sizeof(floatX),
                             cudaMemcpyHostToDevice));
}

// The fp32 weights a model file is written from: the master copy, or in FP32 the parameters
// themselves (equal to an offloaded master copy; at stage 3 this rank's shard of them, as the
// master copy is). *on_host: they are in host memory.
static const float* master_weights(GPUEngine* g, int* on_host) {
#if defined(ENABLE_FP32)
    *on_host = 0;
    return g->params;
#else
    *on_host = g->offload;
    return g->master;
#endif
}

// The stage's tensors in the model's parameter order: fn(first entry here, first entry in the
// model's order, count) for each tensor it holds (the whole model: each tensor where it is).
template <class Fn>
static void for_each_stage_slice(GPUEngine* g, Fn fn) {
    ParamLayout whole = gpt2_param_layout(&g->model);
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++) {
        const ParamTensor* t = &g->layout.tensors[k];
        const ParamTensor* w = &whole.tensors[k];
        size_t layer = is_layer_tensor(k) ? w->numel / g->model.num_layers : 0;
        if (t->numel) fn(t->offset, w->offset + (size_t)g->pipe.first_layer * layer, t->numel);
    }
}

// fn(first entry here, its offset in the piece, count) for each part of the model's entries
// [global, global + count) that the stage holds.
template <class Fn>
static void for_each_held(GPUEngine* g, size_t global, size_t count, Fn fn) {
    for_each_stage_slice(g, [&](size_t here, size_t first, size_t n) {
        size_t a = global > first ? global : first, b = global + count < first + n ? global + count : first + n;
        if (a < b) fn(here + (a - first), a - global, b - a);
    });
}

// The model's fp32 weights [global, global + count) from host memory (count <= STAGE_FLOATS): the
// stage's part of them uploaded.
static void upload_model_piece(GPUEngine* g, size_t global, const float* src, size_t count) {
    for_each_held(g, global, count, [&](size_t here, size_t off, size_t k) { upload_weights(g, here, src + off, k); });
}

static void gpu_set_params(Engine* e, const float* params) {
    GPUEngine* g = (GPUEngine*)e->self;
    size_t n = gpt2_param_layout(&g->model).num_parameters;
    for (size_t i = 0; i < n; i += STAGE_FLOATS) upload_model_piece(g, i, params + i, n - i < STAGE_FLOATS ? n - i : STAGE_FLOATS);
}

// n fp32 values into the file: from the device through the staging buffer, or (on_host: offloaded
// optimizer state) straight from host memory.
static void download_to_file(GPUEngine* g, CheckpointWriter* w, const float* src, size_t n, int on_host) {
    if (on_host) {
        checkpoint_put(w, src, n);
        return;
    }
    for (size_t i = 0; i < n; i += STAGE_FLOATS) {
        size_t count = n - i < STAGE_FLOATS ? n - i : STAGE_FLOATS;
        cudaCheck(cudaMemcpy(g->h_stage, src + i, count * sizeof(float), cudaMemcpyDeviceToHost));
        checkpoint_put(w, g->h_stage, count);
    }
}

// The model file's weights: rank 0 writes them; every rank takes part when the fp32 master copy is
// sharded (stages 1, 2 in FP16/BF16, stage 3 in every precision): each shard in turn is broadcast
// from its owner through a device staging buffer. In FP32 at stages 0-2 the parameters themselves
// are the master, whole on every rank.
static void write_model_file(GPUEngine* g, const char* model_path, const TrainState* st) {
    CheckpointWriter w;
    if (g->rank == 0) model_file_begin_checkpoint(&w, model_path, &g->model, st);
    int on_host = 0;
    const float* weights = master_weights(g, &on_host);
    int whole = g->num_ranks == 1 ||
                (g->stage < 3 && (!g->master || g->stage == 0 || sizeof(floatX) == sizeof(float)));
    if (whole) {
        if (g->rank == 0) download_to_file(g, &w, weights, g->n, on_host);
    } else {
#if defined(USE_NCCL)
        for (int owner = 0; owner < g->num_ranks; owner++) {
            size_t first = owner * g->shard, count = first >= g->n ? 0 : (g->n - first < g->shard ? g->n - first : g->shard);
            for (size_t i = 0; i < count; i += STAGE_FLOATS) {
                size_t k = count - i < STAGE_FLOATS ? count - i : STAGE_FLOATS;
                if (g->rank == owner)
                    cudaCheck(cudaMemcpyAsync(g->dev_stage, weights + i, k * sizeof(float),
                                              on_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice, g->stream));
                ncclCheck(ncclBroadcast(g->dev_stage, g->dev_stage, k, ncclFloat32, owner, g->comm, g->stream));
                if (g->rank == 0) {
                    cudaCheck(cudaMemcpyAsync(g->h_stage, g->dev_stage, k * sizeof(float), cudaMemcpyDeviceToHost, g->stream));
                    cudaCheck(cudaStreamSynchronize(g->stream));
                    checkpoint_put(&w, g->h_stage, k);
                }
            }
        }
        cudaCheck(cudaStreamSynchronize(g->stream));
#else
        collectives_missing(g);
#endif
    }
    if (g->rank == 0) checkpoint_commit(&w);
}

// Collective with several ranks: each writes its part of the optimizer state (all of it on rank 0
// at stage 0, where every rank holds the same), then, once every part is on disk (a barrier), rank
// 0 writes the model file: its presence says the checkpoint is complete.
static void gpu_checkpoint_save(Engine* e, const char* model_path, const char* state_path, const TrainState* st) {
    GPUEngine* g = (GPUEngine*)e->self;
    cudaCheck(cudaStreamSynchronize(g->stream));
    cudaCheck(cudaStreamSynchronize(g->comm_stream));
    OptimizerCounters oc = {g->adam_steps, USE_LOSS_SCALING ? g->loss_scale : 0.0, g->good_steps};
    if (g->pp) {  // the same files, whole, from every stage's pieces (section 4b)
        pipe_checkpoint_save(g, model_path, state_path, st, &oc);
        return;
    }
    int sharded = g->stage > 0 && g->num_ranks > 1;
    if (sharded || g->rank == 0) {
        StateShard part = {0, g->n, 0, 1};
        if (sharded) {
            part.first = g->shard_begin < g->n ? g->shard_begin : g->n;
            part.count = g->shard_n;
            part.index = g->rank;
            part.files = g->num_ranks;
        }
        char path[4300];
        state_shard_path(path, sizeof(path), state_path, part.index);
        CheckpointWriter w;
        state_file_begin_shard(&w, path, &g->model, st, &oc, g->n, &part);
        download_to_file(g, &w, g->m, g->opt_n, g->offload);
        download_to_file(g, &w, g->v, g->opt_n, g->offload);
        checkpoint_commit(&w);
    }
    ranks_barrier();
    write_model_file(g, model_path, st);
    ranks_barrier();
}

static void upload_state_piece(void* ctx, int which, size_t offset, const float* data, size_t count) {
    GPUEngine* g = (GPUEngine*)ctx;
    float* dst = (which == 0 ? g->m : g->v) + offset;
    if (g->offload) memcpy(dst, data, count * sizeof(float));
    else cudaCheck(cudaMemcpy(dst, data, count * sizeof(float), cudaMemcpyHostToDevice));
}

// -pp: a piece of the model's m or v (offset in the model's order): the part in this rank's
// optimizer range of what its stage holds.
static void pipe_state_sink(void* ctx, int which, size_t offset, const float* data, size_t count) {
    GPUEngine* g = (GPUEngine*)ctx;
    for_each_held(g, offset, count, [&](size_t here, size_t off, size_t k) {
        size_t a = here > g->opt_begin ? here : g->opt_begin;
        size_t b = here + k < g->opt_begin + g->opt_n ? here + k : g->opt_begin + g->opt_n;
        if (a < b) upload_state_piece(g, which, a - g->opt_begin, data + off + (a - here), b - a);
    });
}

// Every rank reads the whole model file and, from however many state files the checkpoint has,
// the part of m and v it keeps: a run resumes on any number of ranks, any ZeRO stage and any
// pipeline stages (a stage reads the whole of m and v, keeping its part).
static void gpu_checkpoint_load(Engine* e, const char* model_path, const char* state_path, TrainState* st) {
    GPUEngine* g = (GPUEngine*)e->self;
    cudaCheck(cudaStreamSynchronize(g->stream));
    size_t n = gpt2_param_layout(&g->model).num_parameters;
    CheckpointReader r;
    model_file_open_read(&r, model_path, &g->model);
    for (size_t i = 0; i < n; i += STAGE_FLOATS) {
        size_t count = n - i < STAGE_FLOATS ? n - i : STAGE_FLOATS;
        checkpoint_get(&r, g->h_stage, count);
        upload_model_piece(g, i, g->h_stage, count);
    }
    checkpoint_close(&r);
    OptimizerCounters oc;
    if (g->pp)
        state_read_range(state_path, &g->model, st, &oc, n, 0, n, pipe_state_sink, g, g->h_stage, STAGE_FLOATS);
    else
        state_read_range(state_path, &g->model, st, &oc, n, g->opt_begin, g->opt_n, upload_state_piece, g, g->h_stage,
                         STAGE_FLOATS);
    g->adam_steps = oc.adam_steps;
    // A file from a run without loss scaling (the C engine, BF16, FP32) leaves the scale at its start.
    if (USE_LOSS_SCALING && oc.loss_scale > 0) {
        g->loss_scale = oc.loss_scale;
        g->good_steps = oc.scale_good_steps;
    }
}

// ============================================================================================
// 7. The Engine contract
// ============================================================================================

static GPUEngine* self_of(Engine* e) { return (GPUEngine*)e->self; }

static void check_shape(GPUEngine* g, int B, int T) {
    if (B < 1 || T < 1 || B > g->opts.B || T > g->opts.T)
        fatal("GPU engine: a batch of B=%d T=%d exceeds the B=%d T=%d it was made for", B, T, g->opts.B, g->opts.T);
}

static void upload_tokens(GPUEngine* g, int slot, const int* tokens, int n) {
    cudaCheck(cudaMemcpyAsync(act_ptr<int>(g, slot), tokens, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, g->stream));
}

static void gpu_micro_step(Engine* e, const int* inputs, const int* targets, int B, int T, float dloss_scale,
                           int is_last) {
    GPUEngine* g = self_of(e);
    check_shape(g, B, T);
    if (g->pp) {  // kept until the step's last, which runs the schedule (section 4b)
        pipe_micro_step(g, inputs, targets, B, T, dloss_scale, is_last);
        return;
    }
    int BT = B * T;
    upload_tokens(g, ACT_INPUTS, inputs, BT);
    upload_tokens(g, ACT_TARGETS, targets, BT);
    gpu_forward_pass(g, B, T);
    // While the GPU runs the forward, group the positions by token for the embedding's backward.
    int plan_blocks = encoder_backward_plan(g->h_plan, g->h_keys, inputs, BT);
    cudaCheck(cudaMemcpyAsync(scratch_ptr<int>(g, SCR_PLAN), g->h_plan,
                              encoder_plan_used_ints(BT, plan_blocks) * sizeof(int), cudaMemcpyHostToDevice, g->stream));
    gpu_backward_pass(g, B, T, dloss_scale, plan_blocks, g->overlap && is_last);
    g->cur_B = B;
    g->cur_T = T;
    g->logits_valid = 0;
}

static float gpu_forward(Engine* e, const int* inputs, const int* targets, int B, int T) {
    GPUEngine* g = self_of(e);
    check_shape(g, B, T);
    if (g->pp) {  // through the replica's stages (section 4b)
        g->cur_B = B;
        g->cur_T = T;
        g->logits_valid = targets == NULL;
        return pipe_forward_only(g, inputs, targets, B, T);
    }
    int BT = B * T;
    upload_tokens(g, ACT_INPUTS, inputs, BT);
    gpu_forward_pass(g, B, T);
    g->cur_B = B;
    g->cur_T = T;
    g->logits_valid = targets == NULL;
    if (!targets) return 0.0f;
    upload_tokens(g, ACT_TARGETS, targets, BT);
    float* stats = scratch_ptr<float>(g, SCR_STATS);
    cudaCheck(cudaMemsetAsync(stats + 1, 0, sizeof(float), g->stream));
    fused_classifier(act_ptr<floatX>(g, ACT_LOGITS), act_ptr<float>(g, ACT_LOSSES), act_ptr<int>(g, ACT_TARGETS), 0.0f,
                     BT, g->cfg.vocab_size, g->cfg.padded_vocab_size, 0, stats + 1, 1.0f, (unsigned*)(stats + 4),
                     g->stream);
    float loss;
    cudaCheck(cudaMemcpyAsync(&loss, stats + 1, sizeof(float), cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
    return loss;
}

static void gpu_logits_at(Engine* e, int b, int t, float* out) {
    GPUEngine* g = self_of(e);
    if (!g->logits_valid) fatal("GPU engine: logits_at needs a forward without targets first");
    int V = g->cfg.vocab_size;
    const floatX* row = act_ptr<floatX>(g, ACT_LOGITS) + ((size_t)b * g->cur_T + t) * g->cfg.padded_vocab_size;
    if (g->pp) {
        pipe_logits_row(g, row, V);  // from the last stage, to every rank
    } else {
        cudaCheck(cudaMemcpyAsync(g->h_stage_x, row, (size_t)V * sizeof(floatX), cudaMemcpyDeviceToHost, g->stream));
        cudaCheck(cudaStreamSynchronize(g->stream));
    }
    for (int v = 0; v < V; v++) out[v] = (float)g->h_stage_x[v];
}

static void gpu_token_losses(Engine* e, float* out) {
    GPUEngine* g = self_of(e);
    if (g->pp) fatal("GPU engine: per-position losses come from the last pipeline stage alone (the driver refuses -h 1 with -pp)");
    cudaCheck(cudaMemcpyAsync(out, act_ptr<float>(g, ACT_LOSSES), (size_t)g->cur_B * g->cur_T * sizeof(float),
                              cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
}

// Each component of the plan: planned, allocated, measured (the estimates are the planner's alone).
static void gpu_memory_report(Engine* e, MemoryReport* r) {
    GPUEngine* g = self_of(e);
    for (int k = 0; k < MEM_COUNT; k++) {
        const MemItem* it = &g->plan.items[k];
        if (it->estimate) continue;
        memory_report_add(r, it->name, g->allocated[k]);
        r->items[r->count - 1].planned = it->bytes;
        r->items[r->count - 1].measured = g->measured[k];
        r->items[r->count - 1].host = it->where == MEM_ON_HOST;
    }
    r->device_bytes = g->device_bytes;
    r->used_before = g->used_before;
    r->used_after = g->used_after;
    r->used_peak = g->used_peak;
}

static void gpu_destroy(Engine* e) {
    GPUEngine* g = self_of(e);
    cudaCheck(cudaStreamSynchronize(g->stream));
    cudaCheck(cudaStreamSynchronize(g->comm_stream));
    matmul_context_destroy(&g->mm);
    if (g->pp) pipe_comm_destroy(g);
    zero_comm_destroy(g);
    void* parts[MEM_COUNT] = {0};
    parts[MEM_PARAMS] = g->params;
    parts[MEM_PARAM_GATHER] = g->layer_params[0];
    parts[MEM_GRADS] = g->grads;
    parts[MEM_GRAD_SHARD] = g->bucketed ? g->shard_grads : NULL;  // else a view of grads
    parts[MEM_GRAD_ACC] = g->offload_grads ? (void*)g->h_grad_acc : (void*)g->grad_acc;
    parts[MEM_MASTER] = g->master;
    parts[MEM_ADAM_M] = g->m;
    parts[MEM_ADAM_V] = g->v;
    parts[MEM_ACTIVATIONS] = g->acts_all;
    parts[MEM_SCRATCH] = g->scratch_base;
    parts[MEM_WORKSPACE] = g->workspace;
    parts[MEM_DEVICE_STAGE] = g->dev_stage;
    parts[MEM_OFFLOAD_BUFFER] = g->h_offload;
    parts[MEM_HOST_STAGE] = g->h_stage;
    for (int k = 0; k < MEM_COUNT; k++) {
        if (!parts[k]) continue;
        if (g->plan.items[k].where == MEM_ON_HOST) cudaCheck(cudaFreeHost(parts[k]));
        else cudaCheck(cudaFree(parts[k]));
    }
    cudaEvent_t events[] = {g->bucket_ready[0], g->bucket_ready[1], g->bucket_free[0], g->bucket_free[1], g->edge_ready,
                            g->edge_free, g->comm_done, g->landed[0], g->landed[1], g->edge_landed,
                            g->offload_up, g->overlap_ready, g->gather_free[0], g->gather_free[1],
                            g->gather_done[0], g->gather_done[1], g->edge_gather_free, g->edge_gather_done};
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) cudaCheck(cudaEventDestroy(events[i]));
    for (int k = 0; k < OFFLOAD_PIECES; k++) cudaCheck(cudaEventDestroy(g->offload_down[k]));
    cudaEvent_t pipe_events[] = {g->pipe_ready, g->pipe_received, g->pipe_done};
    for (size_t i = 0; i < sizeof(pipe_events) / sizeof(pipe_events[0]); i++) cudaCheck(cudaEventDestroy(pipe_events[i]));
    for (int i = 0; g->params_ready && i < g->cfg.num_layers + 2; i++) cudaCheck(cudaEventDestroy(g->params_ready[i]));
    free(g->params_ready);
    cudaCheck(cudaStreamDestroy(g->comm_stream));
    cudaCheck(cudaStreamDestroy(g->stream));
    free(g->h_plan);
    free(g->h_keys);
    free(g->h_tokens);
    free(g->h_dloss);
    free(g);
    free(e);
}

// What each recompute level would keep, from the same table the engine allocates by.
static void print_recompute_levels(const GPT2Config* cfg, const EngineOptions* opts, int K) {
    printf("recompute: level %d | activations by level:", opts->recompute);
    for (int level = 0; level <= 3; level++) {
        TensorGroup t;
        gpt2_activation_layout(&t, cfg, opts->B, opts->T, sizeof(floatX), level, opts->recompute_every);
        printf(" %d: %.1f MiB%s", level, t.bytes / 1048576.0, level < 3 ? "," : "");
    }
    printf(" (level 3: segments of %d layers, each keeping only its input)\n", K);
}

// The device's peak for MFU at this precision, from the table in common/gpu_peak.c; 0 = unknown,
// with the reason in note (the start-up report's "mfu:" line).
static double device_peak_flops(const cudaDeviceProp* p, char* note, size_t note_cap) {
#if defined(CUDA_CPU)
    (void)p;
    snprintf(note, note_cap, "not shown: an emulated device (the CPU runtime) has no GPU peak; the step line shows tokens/s");
    return 0.0;
#else
    return gpu_peak_flops(p->name, p->major, p->minor, BUILD_PRECISION, note, note_cap);
#endif
}

static Engine* gpu_engine_create(const GPT2Config* cfg, const EngineOptions* opts, char* why, size_t why_cap) {
    // The driver first (cuda_libs.cuh): a machine without one loads nothing heavy, and hears so
    // plainly, not as cudart's "driver version is insufficient".
    if (!cuda_libs_driver(why, why_cap)) return NULL;
    if (opts->precision != BUILD_PRECISION) {
        snprintf(why, why_cap, "this GPU engine was built for %s, not %s (make train PRECISION=...)",
                 precision_name(BUILD_PRECISION), precision_name(opts->precision));
        return NULL;
    }
    int HS = cfg->channels / cfg->num_heads;
    if (HS % 16 != 0 || HS > 128) {
        snprintf(why, why_cap, "head size %d is not a multiple of 16 up to 128 (the attention kernel's tiles)", HS);
        return NULL;
    }
    if (opts->zero_stage < 0 || opts->zero_stage > 3) {
        snprintf(why, why_cap, "ZeRO stage %d: the GPU engine has stages 0, 1, 2 and 3", opts->zero_stage);
        return NULL;
    }
#if !defined(USE_NCCL)
    if (opts->num_ranks > 1) {
        snprintf(why, why_cap, "%d ranks need NCCL, and this trainer was built without it", opts->num_ranks);
        return NULL;
    }
#endif
    if (opts->pp_stages > 1 && (opts->zero_stage >= 2 || opts->offload != OFFLOAD_NONE)) {
        snprintf(why, why_cap, "-pp %d combines a stage's ranks with ZeRO stage 0 or 1 and no --offload", opts->pp_stages);
        return NULL;
    }
    // The libraries before the device query: a missing one is named even where cudart's query would
    // fail with a vaguer error. NCCL only for a run of several ranks.
    if (!cuda_libs_load(opts->num_ranks > 1, why, why_cap)) return NULL;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        snprintf(why, why_cap, "cudaGetDeviceCount: %s", err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device");
        cudaGetLastError();
        return NULL;
    }
    int device = opts->local_rank % count;  // one GPU a rank, by the rank's place on its machine
    cudaCheck(cudaSetDevice(device));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));
#if defined(ENABLE_BF16)
    if (prop.major < 8) {
        snprintf(why, why_cap, "%.120s (sm_%d%d) has no bf16 tensor cores; build with PRECISION=FP16", prop.name,
                 prop.major, prop.minor);
        return NULL;
    }
#endif

    GPUEngine* g = (GPUEngine*)calloc_check(1, sizeof(GPUEngine), "GPU engine");
    g->opts = *opts;
    // -ge -1 (the default): llm.c's rule by the GPU. On sm_90 and newer cuBLASLt fuses GELU into the
    // product (the kernel report predicts the step 5% faster at d48 on an H100, and others measured it
    // faster there); on older GPUs llm.c's authors measured it slower, so the separate kernels stay.
    if (g->opts.gelu_fusion < 0) g->opts.gelu_fusion = prop.major >= 9 ? 2 : 0;
    g->loss_scale = USE_LOSS_SCALING ? opts->loss_scale_init : 1.0;
    cudaCheck(cudaStreamCreate(&g->stream));
    cudaCheck(cudaStreamCreate(&g->comm_stream));
    cudaEvent_t* events[] = {&g->bucket_ready[0], &g->bucket_ready[1], &g->bucket_free[0], &g->bucket_free[1],
                             &g->edge_ready, &g->edge_free, &g->comm_done, &g->landed[0], &g->landed[1],
                             &g->edge_landed, &g->offload_up, &g->overlap_ready, &g->gather_free[0],
                             &g->gather_free[1], &g->gather_done[0], &g->gather_done[1], &g->edge_gather_free,
                             &g->edge_gather_done};
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
        cudaCheck(cudaEventCreateWithFlags(events[i], cudaEventDisableTiming));
    for (int k = 0; k < OFFLOAD_PIECES; k++)
        cudaCheck(cudaEventCreateWithFlags(&g->offload_down[k], cudaEventDisableTiming));
    cudaEvent_t* pipe_events[] = {&g->pipe_ready, &g->pipe_received, &g->pipe_done};
    for (size_t i = 0; i < sizeof(pipe_events) / sizeof(pipe_events[0]); i++)
        cudaCheck(cudaEventCreateWithFlags(pipe_events[i], cudaEventDisableTiming));

    // The plan (common/memory_plan.h): the shards, buckets and tables everything below is carved by.
    // Any parameter count splits over any rank count (the last shard padded). With -pp the rank's
    // stage: its layers (cfg), its tensors (layout) and its stage's data-parallel ranks.
    memory_plan_make(&g->plan, cfg, opts);
    if (g->plan.floatx_bytes != sizeof(floatX)) fatal("memory plan: %zu-byte elements, this build's are %zu",
                                                      g->plan.floatx_bytes, sizeof(floatX));
    g->model = *cfg;
    g->pipe = g->plan.pipe;
    g->pp = g->pipe.stages > 1;
    g->cfg = g->plan.stage_cfg;
    g->layout = gpt2_stage_param_layout(cfg, g->pipe.num_layers, g->pipe.embed, g->pipe.head);
    g->n = g->layout.num_parameters;
    g->world_rank = opts->rank;
    g->world_ranks = opts->num_ranks > 0 ? opts->num_ranks : 1;
    size_t R = (size_t)g->pipe.dp_ranks;
    g->rank = g->pipe.dp_rank;
    g->num_ranks = (int)R;
    g->stage = opts->zero_stage;
    g->offload = opts->offload != OFFLOAD_NONE;
    g->offload_grads = opts->offload == OFFLOAD_GRADS;
    g->bucketed = g->stage >= 2 || g->offload_grads;
    // With -pp the gradients are reduced after the schedule (a stage's last backward is not the
    // step's last micro-step's alone).
    g->overlap = !g->bucketed && g->num_ranks > 1 && !opts->no_overlap && !g->pp;
    if (g->stage == 1 && g->overlap) {  // one event a piece of the gather after the update
        g->params_ready = (cudaEvent_t*)malloc_check((size_t)(g->cfg.num_layers + 2) * sizeof(cudaEvent_t), "events");
        for (int i = 0; i < g->cfg.num_layers + 2; i++)
            cudaCheck(cudaEventCreateWithFlags(&g->params_ready[i], cudaEventDisableTiming));
    }
    g->landing_layer[0] = g->landing_layer[1] = -1;
    g->gathered[0] = g->gathered[1] = -1;
    g->shard = g->plan.shard;
    g->padded = g->plan.padded;
    g->shard_begin = g->plan.shard_begin;
    g->shard_n = g->plan.shard_n;
    g->opt_begin = g->plan.opt_begin;
    g->opt_n = g->plan.opt_n;
    g->params_first = g->stage == 3 ? g->shard_begin : 0;
    g->params_n = g->stage == 3 ? g->shard_n : g->n;
    g->layer_bucket_n = g->plan.layer_bucket_n;
    memcpy(g->bucket_offset, g->plan.bucket_offset, sizeof(g->bucket_offset));
    g->recompute_every = g->plan.recompute_every;
    g->acts = g->plan.acts;
    g->scratch = g->plan.scratch;
    // A budget the plan already exceeds is refused before anything is allocated.
    if (opts->memory_budget && g->plan.device_total > opts->memory_budget) {
        if (g->rank == 0) {
            memory_plan_print(&g->plan, stdout);
            MemoryFit fit = memory_plan_fit(cfg, opts, 1, opts->memory_budget, comm_plan_step_seconds);  // the model's shape: the planner's
            memory_fit_print(&fit, opts, opts->memory_budget, stdout);
        }
        fatal("flag --max-memory is %.2f GiB per rank; the plan above needs %.2f GiB (with estimates)",
              opts->memory_budget / 1073741824.0, g->plan.device_total / 1073741824.0);
    }
    zero_comm_init(g);  // one communicator over every rank (section 3)
    if (g->pp) pipe_comm_init(g);  // the stage's, the replica's and the tied embedding's (section 4b)

    // The tensor groups, each one allocation of the plan's size, measured as the device counts it.
    cudaCheck(cudaFree(0));  // the context first: it is not the engine's to count
    {
        size_t free_b = 0, total_b = 0;
        cudaCheck(cudaMemGetInfo(&free_b, &total_b));
        g->device_bytes = total_b;
        g->used_before = total_b - free_b;
    }
    g->params = (floatX*)component_alloc(g, MEM_PARAMS);
    cudaCheck(cudaMemset(g->params, 0, g->plan.items[MEM_PARAMS].bytes));  // the padding stays zero
    if (g->stage == 3) {  // the gather buffers, laid out as the gradient buckets
        g->layer_params[0] = (floatX*)component_alloc(g, MEM_PARAM_GATHER);
        cudaCheck(cudaMemset(g->layer_params[0], 0, g->plan.items[MEM_PARAM_GATHER].bytes));
        g->layer_params[1] = g->layer_params[0] + g->layer_bucket_n;
        g->embed_params = g->layer_params[0] + 2 * g->layer_bucket_n;
        g->lnf_params = g->embed_params + g->plan.embed_n;
    }
    g->grads = (floatX*)component_alloc(g, MEM_GRADS);
    cudaCheck(cudaMemset(g->grads, 0, g->plan.items[MEM_GRADS].bytes));  // the padding, and wpe's rows past T
    g->grads_fresh = 1;
    if (g->bucketed) {  // two layer buckets, the embeddings', the final LayerNorm's
        g->layer_bucket[0] = g->grads;
        g->layer_bucket[1] = g->grads + g->layer_bucket_n;
        g->embed_bucket = g->grads + 2 * g->layer_bucket_n;
        g->lnf_bucket = g->embed_bucket + g->plan.embed_n;
    }
    if (g->bucketed) g->shard_grads = (floatX*)component_alloc(g, MEM_GRAD_SHARD);  // NULL with offload grads
    else g->shard_grads = g->grads + g->shard_begin;  // stage 1 reduce-scatters in place
    if (g->offload_grads) {
        g->h_grad_acc = (float*)component_alloc(g, MEM_GRAD_ACC);
        if (g->h_grad_acc) memset(g->h_grad_acc, 0, g->plan.items[MEM_GRAD_ACC].bytes);
    } else {
        g->grad_acc = (float*)component_alloc(g, MEM_GRAD_ACC);
        if (g->grad_acc) cudaCheck(cudaMemset(g->grad_acc, 0, g->plan.items[MEM_GRAD_ACC].bytes));
    }
    g->dev_stage = (float*)component_alloc(g, MEM_DEVICE_STAGE);
    g->master = (float*)component_alloc(g, MEM_MASTER);
    g->m = (float*)component_alloc(g, MEM_ADAM_M);
    g->v = (float*)component_alloc(g, MEM_ADAM_V);
    if (g->offload) {
        memset(g->m, 0, g->plan.items[MEM_ADAM_M].bytes);
        memset(g->v, 0, g->plan.items[MEM_ADAM_V].bytes);
    } else {
        cudaCheck(cudaMemset(g->m, 0, g->plan.items[MEM_ADAM_M].bytes));
        cudaCheck(cudaMemset(g->v, 0, g->plan.items[MEM_ADAM_V].bytes));
    }
    if (g->world_rank == 0) print_recompute_levels(&g->cfg, opts, g->recompute_every);
    // One micro-batch's activations a copy; 1F1B keeps pipe.in_flight of them (1 without -pp).
    g->acts_all = component_alloc(g, MEM_ACTIVATIONS);
    g->acts_base = g->acts_all;
    g->acts_bytes = g->acts.bytes;
    g->scratch_base = component_alloc(g, MEM_SCRATCH);
    g->workspace = component_alloc(g, MEM_WORKSPACE);
    matmul_context_init(&g->mm, g->workspace, MATMUL_WORKSPACE_BYTES);
    // -f: TF32 concerns fp32 operands only, and needs sm_80's tensor cores (as llm.c decides it).
    const int tf32 = sizeof(floatX) == 4 && opts->tf32 && prop.major >= 8;
    matmul_context_set_tf32(&g->mm, tf32);
    cudaCheck(cudaMemset(g->scratch_base, 0, g->scratch.bytes));
    g->h_offload = (floatX*)component_alloc(g, MEM_OFFLOAD_BUFFER);
    if (g->offload_grads) g->h_landing = g->h_offload + g->opt_n;  // then the buckets' landing area
    g->h_stage = (float*)component_alloc(g, MEM_HOST_STAGE);
    g->h_stage_x = (floatX*)(g->h_stage + STAGE_FLOATS);
    {
        size_t free_b = 0, total_b = 0;
        cudaCheck(cudaMemGetInfo(&free_b, &total_b));
        g->used_after = g->used_peak = total_b - free_b;
    }

    int BT = opts->B * opts->T;
    g->h_plan = (int*)malloc_check(encoder_plan_ints(BT) * sizeof(int), "encoder plan");
    g->h_keys = (int64_t*)malloc_check((size_t)BT * sizeof(int64_t), "encoder plan keys");
    g->allocated[MEM_HOST_PLAN] = encoder_plan_ints(BT) * sizeof(int) + (size_t)BT * sizeof(int64_t);
    g->measured[MEM_HOST_PLAN] = -1;
    if (g->pp) {  // pageable: the uploads from it take their bytes when issued
        int m = opts->micro_steps > 0 ? opts->micro_steps : 1;
        g->h_tokens = (int*)malloc_check(g->plan.items[MEM_PIPE_TOKENS].bytes, "pipeline tokens");
        g->h_dloss = (float*)malloc_check((size_t)m * sizeof(float), "pipeline micro-batch scales");
    }
    g->allocated[MEM_PIPE_TOKENS] = g->plan.items[MEM_PIPE_TOKENS].bytes;
    g->measured[MEM_PIPE_TOKENS] = -1;

    Engine* e = (Engine*)calloc_check(1, sizeof(Engine), "engine");
    e->self = g;
    e->config = *cfg;
    e->options = g->opts;  // the options as resolved for this GPU (-ge -1's choice)
    e->precision = BUILD_PRECISION;
    e->peak_flops = device_peak_flops(&prop, e->peak_note, sizeof(e->peak_note));
    e->loss_scaling = USE_LOSS_SCALING;
    MemoryReport mr;
    memset(&mr, 0, sizeof(mr));
    gpu_memory_report(e, &mr);
    size_t total = 0;
    for (int i = 0; i < mr.count; i++) total += mr.items[i].host ? 0 : mr.items[i].bytes;
    char scaling[64] = "", zero[64] = "";
    if (USE_LOSS_SCALING) snprintf(scaling, sizeof(scaling), ", loss scale from %g", g->loss_scale);
    if (R > 1 || g->stage > 0) snprintf(zero, sizeof(zero), ", ZeRO stage %d over %d ranks", g->stage, (int)R);
    char pipe[160] = "";
    if (g->pp)
        snprintf(pipe, sizeof(pipe), ", pipeline stage %d of %d (layers %d-%d%s%s, %d micro-batches in flight)",
                 g->pipe.stage, g->pipe.stages, g->pipe.first_layer, g->pipe.first_layer + g->pipe.num_layers - 1,
                 g->pipe.embed ? ", embeddings" : "", g->pipe.head ? ", final LayerNorm and classifier" : "",
                 g->pipe.in_flight);
    // which attention kernels run: on an sm_90 this first call checks the wgmma ones against mma.sync
    const char* attention = attention_kernels_name(cfg->channels / cfg->num_heads);
    snprintf(e->name, sizeof(e->name), "GPU engine (%s%s%s, gelu fusion %d%s%s) on %.80s (sm_%d%d), %.1f MiB, attention %s",
             PRECISION_NAME, tf32 ? " with TF32 matmuls" : "", scaling, g->opts.gelu_fusion, zero, pipe, prop.name,
             prop.major, prop.minor, total / 1048576.0, attention);
    e->set_params = gpu_set_params;
    e->micro_step = gpu_micro_step;
    e->optimizer_step = gpu_optimizer_step;
    e->forward = gpu_forward;
    e->logits_at = gpu_logits_at;
    e->token_losses = gpu_token_losses;
    e->checkpoint_save = gpu_checkpoint_save;
    e->checkpoint_load = gpu_checkpoint_load;
    e->memory_report = gpu_memory_report;
    e->destroy = gpu_destroy;
    return e;
}

// A test program includes this file with TRAIN_GPT2_NO_MAIN defined and drives the engine through
// the contract (test/test_gpu_engine.cu).
#ifndef TRAIN_GPT2_NO_MAIN
// The device's name for --plan's time (train_device_name), NULL without a GPU.
static const char* device_name(void) {
    static cudaDeviceProp prop;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return NULL;
    return prop.name;
}

int main(int argc, char** argv) {
    TrainSetup s;
    train_device_name = device_name;
    train_setup(&s, argc, argv, BUILD_PRECISION);
    Engine* e = engine_select(s.opts.engine, gpu_engine_create, gpt2_cpu_engine_create, &s.config, &s.engine_options);
    return train_run(&s, e);
}
#endif
