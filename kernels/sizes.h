// kernels/sizes.h: the device memory each kernel family needs beyond its inputs and outputs
// (scratch and workspace), as plain C: the kernel headers size their launches by these, and the
// memory planner (common/memory_plan.c) sums them on a machine with no CUDA. One formula each,
// so what the planner predicts is what a launch uses.
#ifndef KERNELS_SIZES_H
#define KERNELS_SIZES_H

#include <stddef.h>

// ---- LayerNorm backward (kernels/layernorm.cuh) ----
#define LAYERNORM_SMEM_LIMIT (48 * 1024)       // forward: stay within the default dynamic shared memory
#define LAYERNORM_BWD_MAX_WARPS 32             // rows in flight per backward block (1,024 threads)
#define LAYERNORM_BWD_MIN_ROWS 4               // rows per backward block at least (small N: fewer blocks)
#define LAYERNORM_BWD_MAX_GRID 256             // backward blocks at most (one an SM: every GPU so far has fewer SMs)
#define LAYERNORM_BWD_GROUP 16                 // block partials a first-level reducer adds

// Channels of one partial, padded to whole warps of W-wide packs.
static inline int layernorm_backward_padded(int C, int W) { return (C + 32 * W - 1) / (32 * W) * 32 * W; }
// Warps per block: as many (up to 32) as keep the warps' accumulators (2*CP floats each) within
// smem_limit, the bytes of shared memory a block may have on the device (its opt-in limit); 0 means
// even one does not fit, and the single warp of each block accumulates straight into its scratch
// partial in global memory.
static inline int layernorm_backward_warps(int CP, size_t smem_limit) {
    size_t per_warp = (size_t)2 * CP * sizeof(float);
    size_t w = smem_limit / per_warp;
    return w > LAYERNORM_BWD_MAX_WARPS ? LAYERNORM_BWD_MAX_WARPS : (int)w;
}
// Blocks: one an SM (the warps above fill its shared memory, so a second would not fit), each a
// contiguous share of the rows; fewer when N is small (LAYERNORM_BWD_MIN_ROWS rows a block at
// least). Every block writes one fp32 partial of 2*C floats, so the fewer blocks the fewer bytes:
// at d48 (N = 8192) 132 partials on an H100 are 3% of the rows' bytes, where 256 blocks of 32
// rows, two an SM, were 7%. sms = the device's SM count.
static inline int layernorm_backward_blocks_max(int N) {
    int g = (N + LAYERNORM_BWD_MIN_ROWS - 1) / LAYERNORM_BWD_MIN_ROWS;
    return g < LAYERNORM_BWD_MAX_GRID ? g : LAYERNORM_BWD_MAX_GRID;
}
static inline int layernorm_backward_blocks(int N, int sms) {
    int g = layernorm_backward_blocks_max(N);
    return sms > 0 && sms < g ? sms : g;
}
// First-level reduction groups of the grid's partials.
static inline int layernorm_backward_groups(int G) { return (G + LAYERNORM_BWD_GROUP - 1) / LAYERNORM_BWD_GROUP; }
// Counters at the scratch's start: one per group and one for the groups, for the largest grid (any
// device's grid fits), padded to 4 words so the partials stay 16-byte aligned. They must be zero
// before the first call (cudaMemset once); each call leaves them zero.
static inline size_t layernorm_backward_counters(int N, int C, size_t floatx_bytes) {
    return ((size_t)layernorm_backward_groups(layernorm_backward_blocks_max(N)) + 1 + 3) / 4 * 4;
}
// fp32 scratch of the backward over N rows of C channels with floatx_bytes-wide elements: the
// counters, then one partial slot (2*CP floats) per block and one per group, for the largest grid
// and the larger CP (the 128-bit width's) of the two widths. What the planner counts does not
// depend on the device; a device with fewer SMs leaves the tail unused.
static inline size_t layernorm_backward_scratch_floats_for(int N, int C, size_t floatx_bytes) {
    int CP = layernorm_backward_padded(C, (int)(16 / floatx_bytes));
    int G = layernorm_backward_blocks_max(N);
    return layernorm_backward_counters(N, C, floatx_bytes) + ((size_t)G + layernorm_backward_groups(G)) * 2 * CP;
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

// ---- attention (kernels/attention.cuh, kernels/flash_fwd.cuh, kernels/flash_bwd.cuh) ----
#define ATTENTION_FLASH_TILE 64  // the flash kernels' query and key tile (FLASH_ROWS = FLASH_COLS)
// Whether attention_forward and attention_backward run the flash kernels (mma.sync) rather than the
// tiled WMMA ones: 16-bit floatX (mma.sync has no fp32 inputs) at the head sizes their shared memory
// and tests cover. One predicate, so the scratch planned is the scratch the launched kernels use.
static inline int attention_uses_flash(int HS, size_t floatx_bytes) {
    return floatx_bytes == 2 && (HS == 32 || HS == 64);
}
// The flash backward's scratch: D = rowsum(dout * out), one fp32 per (b, h, t), written by its dQ
// kernel and read by its dK/dV kernel (dQ itself needs no scratch: one query-major pass writes it).
static inline size_t flash_backward_scratch_floats(int B, int T, int NH, int HS) {
    (void)HS;
    return (size_t)B * NH * T;
}
// attention_backward's fp32 scratch: D = rowsum(dout * out), one per (b, h, t), in either backward
// (the flash one's, above, or the tiled one's).
static inline size_t attention_backward_scratch_floats_for(int B, int T, int NH, int HS, size_t floatx_bytes) {
    if (attention_uses_flash(HS, floatx_bytes)) return flash_backward_scratch_floats(B, T, NH, HS);
    return (size_t)B * NH * T;
}

// ---- encoder backward's plan (kernels/encoder.cuh) ----
#define ENCODER_BWD_WARPS 16  // warps (slots) per block
// Ints the plan array (host and device) must hold for BT = B*T positions. Slots: a short run takes
// one, a split run ENCODER_BWD_WARPS but has more than ENCODER_SPLIT_MIN > ENCODER_BWD_WARPS
// positions, and padding only fills the last block, so slots < BT + ENCODER_BWD_WARPS.
static inline size_t encoder_plan_ints(int BT) { return (size_t)BT + 4 * ((size_t)BT + ENCODER_BWD_WARPS); }

// ---- global norm (kernels/global_norm.cuh): two fp32 partials per block, and the count of blocks done ----
#define GLOBAL_NORM_BLOCKS 1024
#define GLOBAL_NORM_SCRATCH_FLOATS (2 * GLOBAL_NORM_BLOCKS + 1)

#endif
