// kernels/sizes.h: the device memory each kernel family needs beyond its inputs and outputs
// (scratch and workspace), as plain C: the kernel headers size their launches by these, and the
// memory planner (common/memory_plan.c) sums them on a machine with no CUDA. One formula each,
// so what the planner predicts is what a launch uses.
#ifndef KERNELS_SIZES_H
#define KERNELS_SIZES_H

#include <stddef.h>

// ---- LayerNorm backward (kernels/layernorm.cuh) ----
#define LAYERNORM_BWD_WARPS 4             // rows in flight per backward block (fewer when C is large)
#define LAYERNORM_BWD_MAX_BLOCKS 512      // backward grid: at most this many blocks, whatever the device
#define LAYERNORM_SMEM_LIMIT (48 * 1024)  // stay within the default dynamic shared memory

// Channels of one partial, padded to whole warps of W-wide packs.
static inline int layernorm_backward_padded(int C, int W) { return (C + 32 * W - 1) / (32 * W) * 32 * W; }
// Warps per block for a padded length: as many as keep the warps' accumulators (2*CP floats each)
// within the default shared memory; 0 means even one does not fit, and the single warp of each
// block accumulates straight into its scratch partial in global memory.
static inline int layernorm_backward_warps(int CP) {
    for (int w = LAYERNORM_BWD_WARPS; w >= 1; w--)
        if ((size_t)w * 2 * CP * sizeof(float) <= LAYERNORM_SMEM_LIMIT) return w;
    return 0;
}
static inline int layernorm_backward_blocks(int N, int CP) {
    int w = layernorm_backward_warps(CP);
    int per = w > 0 ? w : 1;
    int g = (N + per - 1) / per;
    return g < LAYERNORM_BWD_MAX_BLOCKS ? g : LAYERNORM_BWD_MAX_BLOCKS;
}
// fp32 scratch of the backward over N rows of C channels with floatx_bytes-wide elements: one
// partial (2*CP floats) per block. Sized for the 128-bit width (16 / floatx_bytes elements a
// pack), whose CP and block count are the larger ones.
static inline size_t layernorm_backward_scratch_floats_for(int N, int C, size_t floatx_bytes) {
    int CP = layernorm_backward_padded(C, (int)(16 / floatx_bytes));
    return (size_t)layernorm_backward_blocks(N, CP) * 2 * CP;
}

// ---- matmul (kernels/matmul.cuh) ----
#define MATMUL_WORKSPACE_BYTES ((size_t)32 << 20)  // cuBLASLt's workspace, allocated once
#define MATMUL_DBIAS_CHUNK_ROWS 64  // rows of dout per fp32 partial: partials move 8/64 of dout's fp16 bytes
#define MATMUL_DBIAS_COUNTERS 4096  // column-group counters at the scratch's start (zero between calls)
// The bias gradient's scratch: the counters, then one fp32 row of OC partials per chunk of rows.
static inline size_t matmul_dbias_scratch_floats(int N, int OC) {
    size_t n = (size_t)(N > 0 ? N : 0);
    return MATMUL_DBIAS_COUNTERS + (n + MATMUL_DBIAS_CHUNK_ROWS - 1) / MATMUL_DBIAS_CHUNK_ROWS * (size_t)(OC > 0 ? OC : 0);
}

// ---- attention backward (kernels/attention.cuh): D = rowsum(dout * out), one per (b, h, t) ----
static inline size_t attention_backward_scratch_floats(int B, int T, int NH) { return (size_t)B * NH * T; }

// ---- encoder backward's plan (kernels/encoder.cuh) ----
#define ENCODER_BWD_WARPS 16  // warps (slots) per block
// Ints the plan array (host and device) must hold for BT = B*T positions. Slots: a short run takes
// one, a split run ENCODER_BWD_WARPS but has more than ENCODER_SPLIT_MIN > ENCODER_BWD_WARPS
// positions, and padding only fills the last block, so slots < BT + ENCODER_BWD_WARPS.
static inline size_t encoder_plan_ints(int BT) { return (size_t)BT + 4 * ((size_t)BT + ENCODER_BWD_WARPS); }

// ---- global norm (kernels/global_norm.cuh): two fp32 partials per block ----
#define GLOBAL_NORM_BLOCKS 1024

#endif
