// kernels/layernorm.cuh: LayerNorm over rows of C (eps 1e-5), forward, fused residual + forward,
// the residual add alone, and backward.
//   layernorm_forward:  out = (x - mean) * rstd * weight + bias      OVERWRITES out (N,C) floatX,
//                       mean (N) and rstd (N) fp32 (saved for backward)
//   fused_residual_layernorm_forward: residual = (floatX)(a + b)      OVERWRITES residual (N,C) floatX,
//                       then LayerNorm of the ROUNDED residual into out, mean, rstd as above
//   residual_forward:   out = (floatX)(a + b)                          OVERWRITES out (n) floatX
//   layernorm_backward: dinp += (N,C), dweight += (C), dbias += (C)   ACCUMULATE, floatX
//                       (dinp is the residual stream's gradient; dweight/dbias sum micro-steps),
//                       or dweight = , dbias = (OVERWRITE) when accumulate is 0
// Reference: layernorm_forward_cpu, residual_forward_cpu, layernorm_backward_cpu (accumulates).
// Statistics and every sum are fp32 (mean first, then the variance around it, as the reference
// does); each stored floatX is rounded once. One warp per row; 128-bit accesses when C % X128 == 0
// and the bases are 16-byte aligned, scalar ones otherwise.
//
// Determinism: every sum has a fixed order given (N, C), the chosen width and the device's SM count
// and shared memory: a lane sums its own elements in order, the warp combines lanes with a fixed
// butterfly; dweight/dbias are summed per block in shared memory (warp partials added in warp
// order), written per block to scratch, and the blocks' partials are then added in a fixed order
// in the same kernel by the last blocks to finish (a fenced counter finds them; no float atomics).
#pragma once

#include <stdint.h>

#include "common.cuh"
#include "sizes.h"

#define LAYERNORM_EPS 1e-5f
#define LAYERNORM_FWD_WARPS 4         // rows (warps) per forward block
// LAYERNORM_SMEM_LIMIT and the backward's sizes (LAYERNORM_BWD_*): kernels/sizes.h

// ---- forward ----

// One warp per row. Pass 1 reads the row (FUSED: a + b, rounded and stored as the residual), sums
// it and keeps a copy in shared memory when CACHE is set (else passes 2 and 3 re-read the row
// from global memory: the input, or the residual just written by the same lane); pass 2 sums the
// squared deviations; pass 3 writes the output. Each lane only ever reads back the packs it
// wrote itself, so no barrier is needed, and the kernel has none. CACHE is a template argument so
// the re-reads are plain shared-memory loads, not generic ones through a pointer that may be
// either: for sm_90 in FP16, ptxas (nvcc 13) then fits the cached 128-bit kernels in 32 registers
// (40 with the run-time choice), 16 blocks (64 warps) an SM, so the 8,192 rows of B = 8, T = 1024
// are one wave on an H100 rather than 1.3. (BF16 and sm_80 stay at 39-40; asking ptxas for 32 with
// __launch_bounds__ spills 12-16 bytes there, so it is not asked.)
template <int W, bool FUSED, bool CACHE>
__global__ void __launch_bounds__(32 * LAYERNORM_FWD_WARPS)
    layernorm_forward_kernel(floatX* residual, floatX* out, float* mean, float* rstd, const floatX* inp,
                             const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C) {
    extern __shared__ int4 layernorm_fwd_smem[];  // int4: 16-byte aligned rows of C floatX
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * LAYERNORM_FWD_WARPS + warp;
    if (row >= N) return;  // a whole warp leaves; the kernel has no block barrier
    const size_t off = (size_t)row * C;
    floatX* smem_row = (floatX*)layernorm_fwd_smem + (size_t)warp * C;
    const floatX* src = CACHE ? smem_row : FUSED ? residual + off : inp + off;
    const int packs = C / W;

    float sum = 0.0f;
    for (int p = lane; p < packs; p += 32) {
        floatx_pack<W> x;
        if (FUSED) {
            floatx_pack<W> a = pack_load<W>(inp + off + p * W), b = pack_load<W>(inp2 + off + p * W);
#pragma unroll
            for (int k = 0; k < W; k++) x.v[k] = (floatX)((float)a.v[k] + (float)b.v[k]);
            pack_store<W>(residual + off + p * W, x);
        } else {
            x = pack_load<W>(inp + off + p * W);
        }
        if (CACHE) pack_store<W>(smem_row + p * W, x);
#pragma unroll
        for (int k = 0; k < W; k++) sum += (float)x.v[k];
    }
    const float m = warp_reduce_sum(sum) / C;

    float var = 0.0f;
    for (int p = lane; p < packs; p += 32) {
        floatx_pack<W> x = pack_load<W>(src + p * W);
#pragma unroll
        for (int k = 0; k < W; k++) {
            float d = (float)x.v[k] - m;
            var += d * d;
        }
    }
    const float s = 1.0f / sqrtf(warp_reduce_sum(var) / C + LAYERNORM_EPS);

    for (int p = lane; p < packs; p += 32) {
        floatx_pack<W> x = pack_load<W>(src + p * W);
        floatx_pack<W> w = pack_load<W>(weight + p * W), b = pack_load<W>(bias + p * W), o;
#pragma unroll
        for (int k = 0; k < W; k++) o.v[k] = (floatX)(((float)x.v[k] - m) * s * (float)w.v[k] + (float)b.v[k]);
        pack_store<W>(out + off + p * W, o);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

// Shared by both forward launchers: picks the width (128-bit only when every row of every tensor
// starts 16-byte aligned) and whether the row copy fits in shared memory.
static inline void layernorm_forward_launch(bool fused, floatX* residual, floatX* out, float* mean, float* rstd,
                                            const floatX* inp, const floatX* inp2, const floatX* weight,
                                            const floatX* bias, int N, int C, cudaStream_t stream) {
    if (N == 0) return;
    bool vec = C % X128 == 0 && aligned16(out) && aligned16(inp) && aligned16(weight) && aligned16(bias) &&
               (!fused || (aligned16(residual) && aligned16(inp2)));
    size_t smem = (size_t)LAYERNORM_FWD_WARPS * C * sizeof(floatX);
    const bool cache = smem <= LAYERNORM_SMEM_LIMIT;
    if (!cache) smem = 0;
    const int grid = ceil_div(N, LAYERNORM_FWD_WARPS), block = 32 * LAYERNORM_FWD_WARPS;
    // The instance for (width, fused, cache), one of eight, each launched by its own name (the CPU
    // runtime and the kernel report know a kernel by the name its launch is written with).
    if (vec && fused && cache)
        layernorm_forward_kernel<X128, true, true><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else if (vec && fused)
        layernorm_forward_kernel<X128, true, false><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else if (vec && cache)
        layernorm_forward_kernel<X128, false, true><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else if (vec)
        layernorm_forward_kernel<X128, false, false><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else if (fused && cache)
        layernorm_forward_kernel<1, true, true><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else if (fused)
        layernorm_forward_kernel<1, true, false><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else if (cache)
        layernorm_forward_kernel<1, false, true><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    else
        layernorm_forward_kernel<1, false, false><<<grid, block, smem, stream>>>(residual, out, mean, rstd, inp, inp2, weight,
            bias, N, C);
    cudaCheckLaunch("layernorm_forward_kernel");
}

// out (N,C) floatX overwritten; mean, rstd (N) fp32 overwritten; reads inp (N,C), weight, bias (C).
// Launch: ceil(N/4) blocks of 4 warps, one warp per row; dynamic shared memory 4*C floatX (the
// rows' copies) when that is <= 48 KiB, else none (the row is re-read from global memory).
static inline void layernorm_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* weight,
                                     const floatX* bias, int N, int C, cudaStream_t stream) {
    layernorm_forward_launch(false, nullptr, out, mean, rstd, inp, nullptr, weight, bias, N, C, stream);
}

// residual (N,C) = (floatX)(a + b) overwritten; then out, mean, rstd as layernorm_forward, computed
// from the rounded residual (what backward will read). residual may alias a or b (each lane reads
// its elements before writing them); out must not alias a, b or residual. Same launch shape.
static inline void fused_residual_layernorm_forward(floatX* residual, floatX* out, float* mean, float* rstd,
                                                    const floatX* a, const floatX* b, const floatX* weight,
                                                    const floatX* bias, int N, int C, cudaStream_t stream) {
    layernorm_forward_launch(true, residual, out, mean, rstd, a, b, weight, bias, N, C, stream);
}

// ---- the residual add alone ----

#define RESIDUAL_BLOCK 256

// One thread per pack of W elements.
template <int W>
__global__ void residual_forward_kernel(floatX* out, const floatX* a, const floatX* b, size_t packs) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= packs) return;
    floatx_pack<W> x = pack_load<W>(a + p * W), y = pack_load<W>(b + p * W), o;
#pragma unroll
    for (int k = 0; k < W; k++) o.v[k] = (floatX)((float)x.v[k] + (float)y.v[k]);
    pack_store<W>(out + p * W, o);
}

// out (n) = (floatX)(a + b) overwritten, each element one rounding of the fp32 sum: bit for bit the
// residual fused_residual_layernorm_forward stores, without the LayerNorm (a pipeline stage's last
// layer: the LayerNorm after it is the next stage's). out may alias a or b. Launch: a thread per
// 128-bit pack (per element when n or a base is not aligned to one), blocks of 256.
static inline void residual_forward(floatX* out, const floatX* a, const floatX* b, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    if (n % X128 == 0 && aligned16(out) && aligned16(a) && aligned16(b))
        residual_forward_kernel<X128><<<(unsigned)ceil_div_size(n / X128, RESIDUAL_BLOCK), RESIDUAL_BLOCK, 0, stream>>>(
            out, a, b, n / X128);
    else
        residual_forward_kernel<1><<<(unsigned)ceil_div_size(n, RESIDUAL_BLOCK), RESIDUAL_BLOCK, 0, stream>>>(out, a, b, n);
    cudaCheckLaunch("residual_forward_kernel");
}

// ---- backward ----
//
// Each warp accumulates dbias and dweight in shared memory in a padded, lane-interleaved order: a
// lane's j-th pack of W channels (channels (j*32 + lane)*W + k) sits at index (j*W + k)*32 + lane,
// so the 32 lanes of a warp hit 32 consecutive floats (no bank conflicts) and each lane owns
// exactly the indices equal to its lane mod 32. CP = that padded length per array. A block's
// partial in scratch (a slot of 2*CP floats, [dbias | dweight]) is in channel order, C floats of
// each half written (the padding is never touched), except when the accumulators do not fit in
// shared memory: then the block's single warp accumulates straight into its slot, interleaved.
// The sizes (warps, blocks, groups, counters, scratch) live in kernels/sizes.h, where the memory
// planner reads them too.
static inline size_t layernorm_backward_scratch_floats(int N, int C) {
    return layernorm_backward_scratch_floats_for(N, C, sizeof(floatX));
}

// The channel of index q (0 <= q < CP) of one half of a slot, or >= C for padding.
template <int W, bool ACC_SMEM>
__device__ inline int layernorm_backward_channel(int q) {
    if (ACC_SMEM) return q;  // channel order
    int j = q / (32 * W), k = (q / 32) % W, l = q % 32;
    return (j * 32 + l) * W + k;
}

// Block g takes the contiguous rows g*N/G .. (g+1)*N/G - 1, dealt to its warps in turn. Per row:
// pass 1 sums dnorm = weight*dout and dnorm*norm (and adds dout and norm*dout to the warp's
// dbias/dweight accumulators), pass 2 re-reads the row (L1/L2) and adds the input gradient. The
// block adds its warps' accumulators in warp order into its partial. Then, in the same launch, a
// two-level fixed-order reduction: the last block of each group of LAYERNORM_BWD_GROUP consecutive
// blocks to finish adds the group's partials in block order into the group's partial, and the
// last group to finish adds the group partials in group order to dweight/dbias's old values (or to
// 0 when not accumulate: the same bits as after a memset) and rounds once. Which block comes last
// varies; every sum's order does not: bit-identical run to run.
// ACC_SMEM (the warps' accumulators in shared memory, else the single warp's in its scratch partial)
// is a template argument, as the forward's CACHE is, so the accumulators' reads and writes are shared
// or global loads and stores the compiler knows, not generic ones (the SASS mix counted 57-61 of
// those when the choice was made at run time).
template <int W, bool ACC_SMEM>
__global__ void __launch_bounds__(32 * LAYERNORM_BWD_MAX_WARPS)
    layernorm_backward_kernel(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch, size_t counters,
                              const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                              const float* rstd, int N, int C, int CP, int accumulate) {
    extern __shared__ float layernorm_bwd_smem[];  // [warps][2*CP]
    __shared__ int last_flag;
    const int wpb = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int G = gridDim.x, groups = (G + LAYERNORM_BWD_GROUP - 1) / LAYERNORM_BWD_GROUP;  // sizes.h's, on the device
    const int group = blockIdx.x / LAYERNORM_BWD_GROUP;
    unsigned* group_counter = (unsigned*)scratch + group;
    unsigned* top_counter = (unsigned*)scratch + groups;
    float* partials = scratch + counters;                    // [G][2*CP]
    float* group_partials = partials + (size_t)G * 2 * CP;  // [groups][2*CP]
    float* part = partials + (size_t)blockIdx.x * 2 * CP;
    float* acc = ACC_SMEM ? layernorm_bwd_smem + (size_t)warp * 2 * CP : part;  // global: wpb == 1
    for (int i = lane; i < 2 * CP; i += 32) acc[i] = 0.0f;  // each lane zeroes only what it owns
    const int packs = C / W;
    const int row0 = (int)((long long)blockIdx.x * N / G), row_end = (int)((long long)(blockIdx.x + 1) * N / G);

    for (int row = row0 + warp; row < row_end; row += wpb) {
        const size_t off = (size_t)row * C;
        const float m = mean[row], s = rstd[row];
        float dn_sum = 0.0f, dn_norm_sum = 0.0f;
        for (int p = lane, j = 0; p < packs; p += 32, j++) {
            floatx_pack<W> d = pack_load<W>(dout + off + p * W), x = pack_load<W>(inp + off + p * W);
            floatx_pack<W> w = pack_load<W>(weight + p * W);
#pragma unroll
            for (int k = 0; k < W; k++) {
                float dv = (float)d.v[k], norm = ((float)x.v[k] - m) * s, dn = (float)w.v[k] * dv;
                dn_sum += dn;
                dn_norm_sum += dn * norm;
                int a = (j * W + k) * 32 + lane;
                acc[a] += dv;
                acc[CP + a] += norm * dv;
            }
        }
        const float dn_mean = warp_reduce_sum(dn_sum) / C;
        const float dn_norm_mean = warp_reduce_sum(dn_norm_sum) / C;
        for (int p = lane; p < packs; p += 32) {
            floatx_pack<W> d = pack_load<W>(dout + off + p * W), x = pack_load<W>(inp + off + p * W);
            floatx_pack<W> w = pack_load<W>(weight + p * W), g = pack_load<W>(dinp + off + p * W);
#pragma unroll
            for (int k = 0; k < W; k++) {
                float norm = ((float)x.v[k] - m) * s, dn = (float)w.v[k] * (float)d.v[k];
                g.v[k] = (floatX)((float)g.v[k] + (dn - dn_mean - norm * dn_norm_mean) * s);
            }
            pack_store<W>(dinp + off + p * W, g);
        }
    }
    if (ACC_SMEM) {
        // The warps' accumulators in warp order, out of the interleaved order into channel order.
        __syncthreads();
        for (int i = threadIdx.x; i < 2 * CP; i += blockDim.x) {
            const int q = i % CP, c = layernorm_backward_channel<W, false>(q);
            if (c >= C) continue;
            float t = 0.0f;
            for (int w = 0; w < wpb; w++) t += layernorm_bwd_smem[(size_t)w * 2 * CP + i];
            part[i - q + c] = t;
        }
    }

    // Level 1: the group's partials, in block order (read from L2: other SMs wrote them).
    const int first = group * LAYERNORM_BWD_GROUP, members = min(LAYERNORM_BWD_GROUP, G - first);
    if (!block_last_to_arrive(group_counter, members, &last_flag)) return;
    float* gpart = group_partials + (size_t)group * 2 * CP;
    for (int i = threadIdx.x; i < 2 * CP; i += blockDim.x) {
        if (layernorm_backward_channel<W, ACC_SMEM>(i % CP) >= C) continue;
        float t = 0.0f;
        for (int b = 0; b < members; b++) t += __ldcg(partials + (size_t)(first + b) * 2 * CP + i);
        gpart[i] = t;
    }
    // Level 2: the group partials in group order, into the channels.
    if (!block_last_to_arrive(top_counter, groups, &last_flag)) return;
    for (int i = threadIdx.x; i < 2 * CP; i += blockDim.x) {
        const int c = layernorm_backward_channel<W, ACC_SMEM>(i % CP);
        if (c >= C) continue;
        float t = 0.0f;
        for (int g = 0; g < groups; g++) t += __ldcg(group_partials + (size_t)g * 2 * CP + i);
        floatX* dst = i < CP ? dbias : dweight;
        const float old = accumulate ? (float)dst[c] : 0.0f;
        dst[c] = (floatX)(old + t);
    }
}

// The kernel's dynamic shared memory above 48 KiB must be allowed once per instantiation (only the
// ACC_SMEM ones have any).
template <int W>
static inline void layernorm_backward_allow_smem(size_t smem) {
    static size_t allowed = 48 * 1024;
    if (smem > allowed) {
        cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel<W, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)smem));
        allowed = smem;
    }
}

// The device's SM count and per-block shared memory limit (opt-in), asked once per device: the
// backward's grid and block are sized by them.
struct LayerNormBwdDevice {
    int sms;
    size_t smem;
};
static inline LayerNormBwdDevice layernorm_backward_device() {
    static LayerNormBwdDevice known[16];
    int dev = 0, sms = 0, smem = 0;
    cudaCheck(cudaGetDevice(&dev));
    if (dev >= 0 && dev < 16 && known[dev].sms > 0) return known[dev];
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaCheck(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const LayerNormBwdDevice d = {sms, (size_t)smem};
    if (dev >= 0 && dev < 16) known[dev] = d;
    return d;
}

// dinp (N,C) +=, dweight (C) +=, dbias (C) += (floatX); with accumulate 0, dweight and dbias are
// overwritten instead (the first micro-step of a step writes its gradients: no memset before it).
// Reads dout, inp (N,C), weight (C), and the forward's mean, rstd (N, fp32). dinp must not alias
// dout or inp.
// scratch: layernorm_backward_scratch_floats(N, C) fp32; its first layernorm_backward_counters
// words are counters that must be zero before the first call (a cudaMemset once, when it is
// allocated), and every call leaves them zero; the rest is overwritten. Calls on one stream with
// the same N and C may share it.
// Launch: one kernel of one block an SM (fewer for small N), each block as many warps (up to 32)
// as its shared memory holds accumulators for (2*CP floats a warp; no more than its rows in a grid
// short of the SMs): the fewest partials, in one full wave. At d48 on an H100: 132 blocks of 16
// warps (224 KiB), where 256 blocks of 32 rows, two of 6 warps an SM, wrote twice the partials.
// The launch shape depends only on N, C, the width (128-bit when C % X128 == 0 and the bases are
// 16-byte aligned) and the device, so results are bit-identical from run to run on one kind of GPU
// (another SM count sums in another order).
static inline void layernorm_backward(floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                                      const floatX* dout, const floatX* inp, const floatX* weight, const float* mean,
                                      const float* rstd, int N, int C, int accumulate, cudaStream_t stream) {
    if (N == 0 || C == 0) return;
    const bool vec = C % X128 == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    const int W = vec ? X128 : 1;
    const int CP = layernorm_backward_padded(C, W);
    const LayerNormBwdDevice dev = layernorm_backward_device();
    const int G = layernorm_backward_blocks(N, dev.sms);
    // A grid short of the SMs (small N) has blocks of at most LAYERNORM_BWD_MIN_ROWS rows: no more
    // warps than rows. A full grid keeps the warps that fit whatever N is, so the launch shape is
    // the same at every N from SMs * LAYERNORM_BWD_MIN_ROWS rows on (the kernel report's counts
    // at batch 1 and 2 then add up to batch 8 exactly).
    const int wpb_fit = layernorm_backward_warps(CP, dev.smem), rows = (N + G - 1) / G;
    const int wpb = wpb_fit <= 0 ? 1 : (G < dev.sms && rows < wpb_fit) ? rows : wpb_fit, acc_in_smem = wpb_fit > 0;
    const size_t counters = layernorm_backward_counters(N, C, sizeof(floatX));
    const size_t smem = acc_in_smem ? (size_t)wpb * 2 * CP * sizeof(float) : 0;
    if (vec && acc_in_smem) {
        layernorm_backward_allow_smem<X128>(smem);
        layernorm_backward_kernel<X128, true><<<G, 32 * wpb, smem, stream>>>(dinp, dweight, dbias, scratch, counters,
                                                                             dout, inp, weight, mean, rstd, N, C, CP, accumulate);
    } else if (vec) {
        layernorm_backward_kernel<X128, false><<<G, 32 * wpb, smem, stream>>>(dinp, dweight, dbias, scratch, counters,
                                                                              dout, inp, weight, mean, rstd, N, C, CP, accumulate);
    } else if (acc_in_smem) {
        layernorm_backward_allow_smem<1>(smem);
        layernorm_backward_kernel<1, true><<<G, 32 * wpb, smem, stream>>>(dinp, dweight, dbias, scratch, counters, dout,
                                                                          inp, weight, mean, rstd, N, C, CP, accumulate);
    } else {
        layernorm_backward_kernel<1, false><<<G, 32 * wpb, smem, stream>>>(dinp, dweight, dbias, scratch, counters, dout,
                                                                           inp, weight, mean, rstd, N, C, CP, accumulate);
    }
    cudaCheckLaunch("layernorm_backward_kernel");
}
