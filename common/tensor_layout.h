// tensor_layout.h: tables of named tensors that share one allocation, and GPT-2's activation
// table for the GPU engine.
//
// One table, three uses: the engine carves its one allocation per group from it (base +
// slot offset), the start-up report prints its sizes, and the memory planner sums it without
// allocating anything. A size that exists in only one place cannot drift.
#ifndef COMMON_TENSOR_LAYOUT_H
#define COMMON_TENSOR_LAYOUT_H

#include <stddef.h>

#include "gpt2_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// DT_FLOATX is the engine's compute precision (2 bytes in FP16/BF16 builds, 4 in FP32).
typedef enum { DT_FLOATX, DT_FP32, DT_INT32 } DType;

#define TENSOR_ALIGN 256  // every slot starts on this many bytes (vector loads, cuBLASLt)
#define TENSOR_GROUP_MAX 32

typedef struct {
    const char* name;
    DType dtype;
    size_t layers;     // L for tensors stacked per layer, else 1
    size_t per_layer;  // elements in one layer's slice
    size_t offset;     // bytes from the group's base
    size_t bytes;      // layers * per_layer * element size
} TensorSlot;

typedef struct {
    const char* name;
    size_t floatx_bytes;
    int count;
    TensorSlot slots[TENSOR_GROUP_MAX];
    size_t bytes;  // the whole group, with alignment
} TensorGroup;

void tensor_group_init(TensorGroup* g, const char* name, size_t floatx_bytes);
// Appends a slot; returns its index. Fatal past TENSOR_GROUP_MAX.
int tensor_group_add(TensorGroup* g, const char* name, DType dtype, size_t layers, size_t per_layer);
size_t dtype_bytes(DType dtype, size_t floatx_bytes);

// The GPU engine's activations of one forward at micro-batch B x T, for an activation recompute
// level (the enum is the slot index; "L x" marks a tensor stacked over layers):
//   0  every activation kept.
//   1  the GELU output is not kept: ACT_FCH_GELU holds one layer, rebuilt in backward from ACT_FCH.
//   2  also the LayerNorm outputs: ACT_LN1 and ACT_LN2 hold one layer each, rebuilt in backward
//      from the kept residual stream (their mean and rstd stay per layer).
//   3  whole blocks: the layers run in segments of K (recompute_every); only each segment's input
//      is kept (ACT_BLOCK_INPUTS, one per segment after the first, whose input is ACT_ENCODED),
//      the per-layer tensors hold K layers (layer l in slot l % K), and backward re-runs a
//      segment's forward before going back through it. By default K is the one that keeps the fewest
//      bytes (gpt2_recompute_every), not sqrt(L): a layer's working set is ~16x a segment's input.
enum {
    ACT_ENCODED,    // (B,T,C)     floatX  token + position embedding: layer 0's residual input
    ACT_LN1,        // L x (B,T,C) floatX
    ACT_LN1_MEAN,   // L x (B,T)   fp32
    ACT_LN1_RSTD,   // L x (B,T)   fp32
    ACT_QKV,        // L x (B,T,3C) floatX
    ACT_ATTY,       // L x (B,T,C) floatX  attention output, before the projection
    ACT_ATT_LSE,    // L x (B,NH,T) fp32   flash attention's logsumexp per row (no T x T matrix)
    ACT_RESIDUAL2,  // L x (B,T,C) floatX  residual + attention projection
    ACT_LN2,        // L x (B,T,C) floatX
    ACT_LN2_MEAN,   // L x (B,T)   fp32
    ACT_LN2_RSTD,   // L x (B,T)   fp32
    ACT_FCH,        // L x (B,T,4C) floatX GELU input
    ACT_FCH_GELU,   // L x (B,T,4C) floatX GELU output
    ACT_RESIDUAL3,  // L x (B,T,C) floatX  the layer's output
    ACT_LNF,        // (B,T,C)     floatX
    ACT_LNF_MEAN,   // (B,T)       fp32
    ACT_LNF_RSTD,   // (B,T)       fp32
    ACT_LOGITS,     // (B,T,Vp)    floatX  overwritten in place by their gradient in backward
    ACT_LOSSES,     // (B,T)       fp32
    ACT_INPUTS,     // (B,T)       int32
    ACT_TARGETS,    // (B,T)       int32
    ACT_BLOCK_INPUTS,  // level 3: (segments - 1) x (B,T,C) floatX, the kept inputs of segments 1..
    ACT_COUNT
};
// Scratch: buffers that live within one pass (activation gradients, partial sums). The table is
// built beside the activations', sized by the kernels' own formulas (kernels/sizes.h).
enum {
    SCR_PROJ,       // (B,T,C) floatX: a projection's output before the residual add; in backward, the
                    // gradient of a LayerNorm's output / the attention output
    SCR_DRESIDUAL,  // (B,T,C) floatX: the residual stream's gradient, accumulated layer by layer
    SCR_DBIG,       // (B,T,4C) floatX: the MLP hidden gradient, then the qkv gradient
    SCR_LN,         // fp32 partial sums of LayerNorm's weight and bias gradients
    SCR_DBIAS,      // fp32 partial sums of the bias gradients
    SCR_ATT,        // fp32 attention backward's per-row terms (D; either backward, kernels/sizes.h)
    SCR_NORM,       // fp32 partial sums of the gradient norm
    SCR_STATS,      // fp32 [0] the step's loss, [1] an evaluation's loss, [2] sum of squared grads, [3] non-finite count,
                    // [4] (an unsigned) the classifier's count of blocks done, 0 between launches
    SCR_PLAN,       // int32 the encoder backward's grouping of positions by token
    SCR_COUNT
};

void gpt2_scratch_layout(TensorGroup* g, const GPT2Config* cfg, int B, int T, size_t floatx_bytes);

// K for level 3: the request if positive (at most L), else the K whose layout is the smallest.
int gpt2_recompute_every(const GPT2Config* cfg, int B, int T, size_t floatx_bytes, int requested);
void gpt2_activation_layout(TensorGroup* g, const GPT2Config* cfg, int B, int T, size_t floatx_bytes, int recompute,
                            int recompute_every);
// One pipeline stage's (common/pipeline.h), cfg holding its layers: without the head (a stage before
// the last) the final LayerNorm's, the logits', the losses' and the targets' slots are empty, without
// the embeddings (a stage after the first) the input tokens'; ACT_ENCODED is then the stage's input,
// the previous stage's output.
void gpt2_stage_activation_layout(TensorGroup* g, const GPT2Config* cfg, int embed, int head, int B, int T,
                                  size_t floatx_bytes, int recompute, int recompute_every);

#ifdef __cplusplus
}
#endif
#endif
