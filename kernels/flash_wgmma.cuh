// kernels/flash_wgmma.cuh: the flash attention kernels' Hopper path (FP16 and BF16, head sizes 32 and
// 64): the causal forward and the two backward kernels of kernels/flash_fwd.cuh and kernels/flash_bwd.cuh
// with their tile products on wgmma (kernels/wgmma.cuh: sm_90a's warpgroup matrix product, about 96%
// of the dense tensor peak where mma.sync reaches about 65%), everything else as there: the same
// arguments, layouts, lse convention, scratch (D) and results up to the products' summation order.
// kernels/attention.cuh launches these where flash_wgmma_available() (an sm_90 GPU running this
// file's sm_90a code, or the CPU runtime emulating one, where a start-up check finds them agreeing
// with the mma.sync kernels), the mma.sync kernels elsewhere.
// kernels/test_attention.cu checks them against the C engine; dev/cuda/test_flash_fwd.cu and
// test_flash_bwd.cu against double-precision references with derived bounds, beside the mma.sync
// kernels.
//
// The forward (attention_forward_flash_wgmma_kernel): a block is one warpgroup (4 warps, 128 threads)
// owning a 64-row query tile of one (batch, head), each warp 16 rows (wgmma's M = 64 split as the
// instruction splits it), Q's fragments in registers (A from registers). Key/value tiles of 64 stream
// through two shared buffers by cp.async in kernels/wgmma.cuh's tile layout (tile j+1 in flight while
// the warpgroup computes on tile j). Per tile:
//   S = Q K^T: HS / 16 wgmma m64n64k16 (K K-major), the first with scale-d 0, one commit and wait;
//   the online softmax in registers exactly as flash_fwd.cuh's (raw-score max, the scale folded into
//   the one fma of each exponent, ex2.approx; the mask on the diagonal tile only, peeled out of the
//   loop), P packed (rounded to T) into A fragments;
//   O = O alpha + P V: 4 wgmma m64nHSk16 (V MN-major), one commit and wait.
// The warp waits for each product before the softmax that needs it: no overlap of the products with
// the exponentials inside a warpgroup (FlashAttention-3's ping-pong and intra-warpgroup pipelining are
// not here); other blocks on the SM fill those gaps.
//
// Shared memory: Q and K, V x 2 buffers, 5 tiles of 64 x HS: 40 KiB at HS = 64 (static, under the
// 48 KiB default).
//
// ptxas (nvcc 13.0, sm_90a, f16 and bf16 alike), none spilling: the forward 124 registers at HS = 64
// (83 at 32), the dq kernel 154 (122), the kv kernel 158 (118): 4, 3 and 3 blocks (16, 12, 12 warps)
// an SM at HS = 64, against 4 blocks of 2 warps for the mma.sync kernels. Their hot loops in sm_90a
// SASS (make sass-mix): the forward 287 instructions a key tile (8 HGMMA, 34 MUFU), the dq kernel 242
// (12 HGMMA), the kv kernel 337 a query tile (24 HGMMA), against 663, 678 and 844 for the mma.sync
// kernels' (which cover 32 rows a warp, these 16).
// Predicted, not measured (the kernel report's model, docs/kernel_report_fp16.md; d48, B = 8, T = 1024,
// FP16, H100 SXM): the forward 5.4 ms a step, the dq kernel 5.6, the kv kernel 6.9, 17.9 in all against
// 21.3 for the mma.sync kernels on the same GPU; each bound by the sum of its tensor (wgmma at 0.96 of
// the dense peak), special-function and instruction-issue time. The hardware decides: the GPU check
// times both families side by side (dev/cuda/bench_kernels.cu).
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.cuh"
#include "flash_bwd.cuh"
#include "flash_fwd.cuh"
#include "wgmma.cuh"

constexpr int FLASH_WG_THREADS = 128;  // one warpgroup a block

// 1 in the code compiled with wgmma (sm_90a, or the CPU runtime), 0 elsewhere: read by the host from
// the module the device loaded (cudaMemcpyFromSymbol), so a binary without sm_90a code never launches
// the kernels below on an H100.
#if defined(WGMMA_AVAILABLE)
__device__ int flash_wgmma_built = 1;
#else
__device__ int flash_wgmma_built = 0;
#endif

template <class T, int HS>
void flash_forward_wgmma(T* out, float* lse, const T* qkv, int B, int seq, int NH, cudaStream_t stream);
template <class T, int HS>
void flash_backward_wgmma(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                          int seq, int NH, cudaStream_t stream);

// The wgmma kernels beside the mma.sync ones on this device, before the first is trusted: both
// families' forward and backward on one small problem (B = 1, 1 head, T = 72: a whole tile, a
// diagonal one and a partial one), the worst difference of out and dqkv as a share of the largest
// |value|. The two compute the same sums with the same roundings to T, in other orders within each
// product: a share of a few units of T's rounding (2^-8 in bf16). A wrong fragment or descriptor
// layout moves values by their own size. The buffers are allocated and freed here, once a process.
template <class T, int HS>
static double flash_wgmma_disagreement() {
    const int B = 1, seq = 72, NH = 1, C = NH * HS;
    const size_t n_qkv = (size_t)B * seq * 3 * C, n_out = (size_t)B * seq * C, n_lse = (size_t)B * NH * seq;
    T* h = (T*)malloc((n_qkv + n_out) * sizeof(T));
    T *d, *outs[2], *dqkvs[2];
    float *lse, *scratch;
    if (!h) return INFINITY;
    uint32_t state = 12345u;
    for (size_t i = 0; i < n_qkv + n_out; i++) {  // q, k, v, dout in [-1, 1]
        state = state * 1664525u + 1013904223u;
        h[i] = (T)((float)(state >> 8) / 8388608.0f - 1.0f);
    }
    cudaCheck(cudaMalloc(&d, (n_qkv + n_out) * sizeof(T)));
    for (int k = 0; k < 2; k++) {
        cudaCheck(cudaMalloc(&outs[k], n_out * sizeof(T)));
        cudaCheck(cudaMalloc(&dqkvs[k], n_qkv * sizeof(T)));
    }
    cudaCheck(cudaMalloc(&lse, n_lse * sizeof(float)));
    cudaCheck(cudaMalloc(&scratch, flash_backward_scratch_floats(B, seq, NH, HS) * sizeof(float)));
    cudaCheck(cudaMemcpy(d, h, (n_qkv + n_out) * sizeof(T), cudaMemcpyHostToDevice));
    const T *qkv = d, *dout = d + n_qkv;
    flash_forward<T, HS>(outs[0], lse, qkv, B, seq, NH, 0);
    flash_backward<T, HS>(dqkvs[0], scratch, dout, qkv, outs[0], lse, B, seq, NH, 0);
    flash_forward_wgmma<T, HS>(outs[1], lse, qkv, B, seq, NH, 0);
    flash_backward_wgmma<T, HS>(dqkvs[1], scratch, dout, qkv, outs[1], lse, B, seq, NH, 0);
    cudaCheckLaunch("flash_wgmma_disagreement's kernels");
    double worst = 0.0;
    for (int part = 0; part < 2; part++) {
        const size_t n = part ? n_qkv : n_out;
        T* a = (T*)malloc(2 * n * sizeof(T));
        if (!a) { worst = INFINITY; break; }
        cudaCheck(cudaMemcpy(a, part ? dqkvs[0] : outs[0], n * sizeof(T), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(a + n, part ? dqkvs[1] : outs[1], n * sizeof(T), cudaMemcpyDeviceToHost));
        double big = 0.0, diff = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double x = (float)a[i], y = (float)a[n + i];
            big = fmax(big, fabs(x));
            diff = fmax(diff, isfinite(y) ? fabs(x - y) : INFINITY);
        }
        worst = fmax(worst, big > 0.0 ? diff / big : diff);
        free(a);
    }
    cudaCheck(cudaFree(d));
    for (int k = 0; k < 2; k++) {
        cudaCheck(cudaFree(outs[k]));
        cudaCheck(cudaFree(dqkvs[k]));
    }
    cudaCheck(cudaFree(lse));
    cudaCheck(cudaFree(scratch));
    free(h);
    return worst;
}
#define FLASH_WGMMA_AGREE 0.05  // the share flash_wgmma_disagreement may reach: ten bf16 roundings

// Whether attention runs this file's kernels: the current device is compute capability 9.0 (wgmma is
// sm_90a's, not a later architecture's), its loaded code has them, and they agree with the mma.sync
// kernels there (flash_wgmma_disagreement, in the build's 16-bit type at both head sizes): otherwise
// one warning line and the mma.sync kernels. Asked once per process, at start-up (the engine's report
// names the kernels it chose), so the check's allocations come before the training loop.
static inline int flash_wgmma_available() {
    static int cached = -1;
    if (cached < 0) {
        int dev = 0, major = 0, minor = 0, built = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        if (major == 9 && minor == 0) cudaCheck(cudaMemcpyFromSymbol(&built, flash_wgmma_built, sizeof(int)));
        if (built == 1) {
#if defined(ENABLE_BF16)
            typedef __nv_bfloat16 X;
#else
            typedef __half X;  // (the FP32 build runs no flash kernel and asks nothing)
#endif
            const double worst = fmax(flash_wgmma_disagreement<X, 64>(), flash_wgmma_disagreement<X, 32>());
            if (!(worst <= FLASH_WGMMA_AGREE)) {
                fprintf(stderr, "warning: flash attention: the wgmma kernels differ from the mma.sync ones on this GPU by "
                                "%.3g of the largest value (at most %g expected); attention runs on mma.sync\n",
                        worst, FLASH_WGMMA_AGREE);
                built = 0;
            }
        }
        cached = built == 1;
    }
    return cached;
}

// The block (THREADS threads) copies ROWS rows of HS elements (global row stride `stride` elements)
// into a tile in kernels/wgmma.cuh's layout, one 16-byte cp.async per chunk in the calling thread's
// current group; rows at or past `valid` (>= 1) become zeros (src-size 0, from row valid - 1's address,
// which lies in the tensor). Each thread copies CPT consecutive chunks of one row: one
// address computed, the copies at constant offsets from it in global and in shared memory (a row's
// chunk c lands 64 elements after chunk c - 1 in the layout), and one zero-fill predicate a row.
// A warp's copies of one step write whole 128-byte core matrices (no bank conflicts) and read whole
// 32-byte sectors over its CPT steps.
template <class T, int HS, int THREADS, int ROWS>
__device__ __forceinline__ void flash_wg_load_rows(T* dst, const T* src, size_t stride, int valid) {
    constexpr int VECS = HS / 8;                   // 16-byte chunks a row
    constexpr int CPT = ROWS * VECS / THREADS;     // chunks a thread
    constexpr int TPR = VECS / CPT;                // threads a row
    static_assert(CPT >= 1 && VECS % CPT == 0 && THREADS % TPR == 0, "a thread's chunks: part of one row");
    const int r = threadIdx.x / TPR, c0 = (threadIdx.x % TPR) * CPT;
    const T* from = src + (size_t)min(r, valid - 1) * stride + c0 * 8;
    T* to = dst + wg_tile_offset<HS>(r, c0 * 8);
    const int bytes = r < valid ? 16 : 0;
#pragma unroll
    for (int k = 0; k < CPT; k++) mma_cp_async_cg16(to + k * 64, from + k * 8, bytes);
}

// One key tile of the forward for a warp's 16 rows (the online softmax as flash_fwd_tile's). DIAG:
// the diagonal tile, keys past each row masked.
template <class T, int HS, bool DIAG>
__device__ __forceinline__ void flash_wg_fwd_tile(float (&o)[HS / 8][4], float (&m)[2], float (&l)[2],
                                                  const uint32_t (&qf)[HS / 16][4], WgDesc kd, WgDesc vd,
                                                  float sl2, int warp, int lane) {
    const int g = lane >> 2, t = lane & 3;
    float s[FLASH_COLS / 8][4];  // S: the warp's 16 rows x 64 keys
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++)
        wgmma_rs<T, FLASH_COLS, 0>(s, qf[kc], wg_desc_at(kd, wg_kstep_kmajor<HS, T>(kc)), kc > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(s);
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < FLASH_COLS / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (DIAG) {  // row and key within the tile
                const int row = warp * 16 + g + (i >> 1) * 8, key = n * 8 + 2 * t + (i & 1);
                if (key > row) s[n][i] = -INFINITY;
            }
            mx[i >> 1] = fmaxf(mx[i >> 1], s[n][i]);
        }
    float alpha[2], msc[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float m_new = fmaxf(m[r], mx[r]);  // finite: the row sees at least one key by now
        msc[r] = m_new * sl2;
        alpha[r] = mma_ex2(m[r] * sl2 - msc[r]);  // 2^-inf = 0 on the first tile
        m[r] = m_new;
        l[r] *= alpha[r];
    }
    uint32_t pf[FLASH_COLS / 16][4];  // P as A fragments, 16 keys each
#pragma unroll
    for (int n = 0; n < FLASH_COLS / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float p = mma_ex2(fmaf(s[n][i], sl2, -msc[i >> 1]));  // masked: 2^-inf = 0
            s[n][i] = p;
            l[i >> 1] += p;  // l sums the unrounded p, so lse is exact to fp32
        }
#pragma unroll
    for (int kc = 0; kc < FLASH_COLS / 16; kc++) mma_pack_a<T>(pf[kc], s[2 * kc], s[2 * kc + 1]);
#pragma unroll
    for (int d = 0; d < HS / 8; d++) {
        o[d][0] *= alpha[0];
        o[d][1] *= alpha[0];
        o[d][2] *= alpha[1];
        o[d][3] *= alpha[1];
    }
    wgmma_fence();
    wgmma_hold(o);
#pragma unroll
    for (int kc = 0; kc < FLASH_COLS / 16; kc++) wgmma_rs<T, HS, 1>(o, pf[kc], wg_desc_at(vd, wg_kstep_mnmajor<HS, T>(kc)), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(o);
}

// out (B,T,C) and lse (B,NH,T fp32) from qkv (B,T,3C), C = NH*HS; grid (ceil(T/64), NH, B) of 128 threads.
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_WG_THREADS)
    attention_forward_flash_wgmma_kernel(T* out, float* lse, const T* qkv, int seq, int NH) {
    __shared__ __align__(128) T sQ[FLASH_ROWS * HS];
    __shared__ __align__(128) T sK[2][FLASH_COLS * HS];
    __shared__ __align__(128) T sV[2][FLASH_COLS * HS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3;
    const int q_tile = gridDim.x - 1 - blockIdx.x;  // the tiles with the most keys start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int q0 = q_tile * FLASH_ROWS;
    const T* qkv_bh = qkv + (size_t)b * seq * C3 + (size_t)h * HS;
    const float sl2 = FLASH_LOG2E / sqrtf((float)HS);  // scale * log2(e)

    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sQ, qkv_bh + (size_t)q0 * C3, C3, seq - q0);
    mma_cp_async_commit();  // group: Q
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sK[0], qkv_bh + C, C3, seq);
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sV[0], qkv_bh + 2 * C, C3, seq);
    mma_cp_async_commit();  // group: key tile 0
    mma_cp_async_wait<1>();  // Q done, tile 0 still in flight
    __syncthreads();

    uint32_t qf[HS / 16][4];  // the warp's 16 query rows as A fragments, one per 16 columns of HS
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++)
        mma_ldmatrix_x4(qf[kc], &sQ[wg_tile_offset<HS>(warp * 16 + (lane & 15), kc * 16 + (lane >> 4) * 8)]);
    float o[HS / 8][4];  // O: 16 rows x HS
#pragma unroll
    for (int d = 0; d < HS / 8; d++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[d][i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows g and g+8 (raw scores)
    float l[2] = {0.0f, 0.0f};            // this lane's part of their running sums

    // the two buffers' descriptors; buffer 1 is one tile (64 HS elements) after buffer 0
    const WgDesc kd = wg_tile_kmajor<HS>(sK[0]), vd = wg_tile_mnmajor<HS>(sV[0]);
    constexpr uint32_t BUF = FLASH_COLS * HS * sizeof(T) / 16;  // a buffer, in the address field's units
    for (int j = 0; j < q_tile; j++) {
        const int k1 = (j + 1) * FLASH_COLS;  // prefetch into the buffers the barrier ending j-1 freed
        const T* kv1 = qkv_bh + (size_t)k1 * C3;
        flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sK[(j + 1) & 1], kv1 + C, C3, seq - k1);
        flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sV[(j + 1) & 1], kv1 + 2 * C, C3, seq - k1);
        mma_cp_async_commit();
        mma_cp_async_wait<1>();  // tile j's group done, j+1's still in flight
        __syncthreads();         // every thread's copies of tile j have landed
        const uint32_t b = (j & 1) * BUF;
        flash_wg_fwd_tile<T, HS, false>(o, m, l, qf, WgDesc{kd.lo + b, kd.hi}, WgDesc{vd.lo + b, vd.hi}, sl2, warp,
                                        lane);
        __syncthreads();  // the warpgroup's products read tile j's buffers until their waits: all done
    }
    mma_cp_async_wait<0>();
    __syncthreads();
    const uint32_t bd = (q_tile & 1) * BUF;
    flash_wg_fwd_tile<T, HS, true>(o, m, l, qf, WgDesc{kd.lo + bd, kd.hi}, WgDesc{vd.lo + bd, vd.hi}, sl2, warp, lane);

    // out = O / l, lse = (m sl2 + log2 l) ln 2, l summed over the 4 lanes of the row first
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const float lr = l[r];
        const float inv_l = 1.0f / lr;  // l >= 1: the row's max contributes 2^0
        const int row = q0 + warp * 16 + g + r * 8;
        if (row >= seq) continue;
        T* orow = out + ((size_t)b * seq + row) * C + (size_t)h * HS;
#pragma unroll
        for (int d = 0; d < HS / 8; d++)
            flash_store2<T>(orow + d * 8 + 2 * t, o[d][2 * r] * inv_l, o[d][2 * r + 1] * inv_l);
        if (t == 0) lse[((size_t)b * NH + h) * seq + row] = (m[r] * sl2 + log2f(lr)) * FLASH_LN2;
    }
}

// The forward on wgmma: arguments and results as flash_forward's (kernels/flash_fwd.cuh). Launch: grid
// (ceil(T/64), NH, B), 128 threads, static shared memory 5 x 64 x HS elements (40 KiB at HS = 64).
template <class T, int HS>
void flash_forward_wgmma(T* out, float* lse, const T* qkv, int B, int seq, int NH, cudaStream_t stream) {
    if (B <= 0 || seq <= 0 || NH <= 0) return;
    dim3 grid((seq + FLASH_ROWS - 1) / FLASH_ROWS, NH, B);
    attention_forward_flash_wgmma_kernel<T, HS><<<grid, FLASH_WG_THREADS, 0, stream>>>(out, lse, qkv, seq, NH);
}

// ---- the backward on wgmma: flash_bwd.cuh's two kernels (why two, and why D is handed over, there) ----
//
// flash_backward_dq_wgmma_kernel (query-major, first): a block is one warpgroup owning a 64-row query
// tile, each warp 16 rows; Q's and dO's fragments in registers (A from registers); D = rowsum(dO o O)
// of its rows computed in the prologue and written to scratch for the kv kernel, as flash_bwd.cuh's.
// Key tiles 0..i stream through two shared buffers (K, V in the tile layout). Per tile:
//   S = Q K^T and dP = dO V^T: 2 HS / 16 wgmma m64n64k16 (K and V K-major), one commit and wait;
//   P = 2^(S sl2 - L), the mask on the diagonal tile only; dS = P (dP - D), packed (rounded to T)
//   into A fragments;
//   dQ += dS K: 4 wgmma m64nHSk16 (K MN-major), one commit and wait.
// 3 tile products a pair, as flash_bwd.cuh's dq kernel.
template <class T, int HS, bool DIAG>
__device__ __forceinline__ void flash_wg_dq_tile(float (&dq)[HS / 8][4], const uint32_t (&qf)[HS / 16][4],
                                                 const uint32_t (&of)[HS / 16][4], const float (&L)[2],
                                                 const float (&D)[2], WgDesc kd, WgDesc kdt, WgDesc vd, float sl2,
                                                 int warp, int lane) {
    const int g = lane >> 2, t = lane & 3;
    float s[FLASH_COLS / 8][4], dp[FLASH_COLS / 8][4];  // S and dP: the warp's 16 rows x 64 keys
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++)
        wgmma_rs<T, FLASH_COLS, 0>(s, qf[kc], wg_desc_at(kd, wg_kstep_kmajor<HS, T>(kc)), kc > 0);
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++)
        wgmma_rs<T, FLASH_COLS, 0>(dp, of[kc], wg_desc_at(vd, wg_kstep_kmajor<HS, T>(kc)), kc > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(s);
    wgmma_hold(dp);
    uint32_t df[FLASH_COLS / 16][4];  // dS as A fragments, 16 keys each
#pragma unroll
    for (int n = 0; n < FLASH_COLS / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float x = fmaf(s[n][i], sl2, -L[i >> 1]);
            if (DIAG) {  // row and key within the tiles
                const int row = warp * 16 + g + (i >> 1) * 8, key = n * 8 + 2 * t + (i & 1);
                if (key > row) x = -INFINITY;
            }
            dp[n][i] = mma_ex2(x) * (dp[n][i] - D[i >> 1]);
        }
#pragma unroll
    for (int kc = 0; kc < FLASH_COLS / 16; kc++) mma_pack_a<T>(df[kc], dp[2 * kc], dp[2 * kc + 1]);
    wgmma_fence();
    wgmma_hold(dq);
#pragma unroll
    for (int kc = 0; kc < FLASH_COLS / 16; kc++) wgmma_rs<T, HS, 1>(dq, df[kc], wg_desc_at(kdt, wg_kstep_mnmajor<HS, T>(kc)), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(dq);
}

// dQ of one 64-row query tile, and D of its rows into Dsum (B,NH,T fp32) for the kv kernel. Grid
// (ceil(T/64), NH, B) of 128 threads.
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_WG_THREADS)
    flash_backward_dq_wgmma_kernel(T* dqkv, float* Dsum, const T* dout, const T* qkv, const T* out, const float* lse,
                                   int seq, int NH) {
    // Q and dO arrive in the second K/V buffer, are loaded into registers, and give the buffer up
    // before tile 1 is copied into it.
    __shared__ __align__(128) T sK[2][FLASH_COLS * HS];
    __shared__ __align__(128) T sV[2][FLASH_COLS * HS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3;
    const int q_tile = gridDim.x - 1 - blockIdx.x;  // the tiles with the most keys start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int q0 = q_tile * FLASH_ROWS;
    const T* qkv_bh = qkv + (size_t)b * seq * C3 + (size_t)h * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const float sl2 = scale * FLASH_LOG2E;

    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sK[1], qkv_bh + (size_t)q0 * C3, C3, seq - q0);
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sV[1], dout + ((size_t)b * seq + q0) * C + (size_t)h * HS,
                                                             C, seq - q0);
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sK[0], qkv_bh + C, C3, seq);
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sV[0], qkv_bh + 2 * C, C3, seq);
    mma_cp_async_commit();  // group: Q, dO and key tile 0
    // lse of this lane's rows (g and g+8 of the warp's 16), in base 2; +inf past T makes P = 0 there
    float L[2], D[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int q = q0 + warp * 16 + g + r * 8;
        L[r] = q < seq ? lse[((size_t)b * NH + h) * seq + q] * FLASH_LOG2E : INFINITY;
    }
    mma_cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[HS / 16][4], of[HS / 16][4];  // the warp's rows of Q and dO as A fragments
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        const int off = wg_tile_offset<HS>(warp * 16 + (lane & 15), kc * 16 + (lane >> 4) * 8);
        mma_ldmatrix_x4(qf[kc], &sK[1][off]);
        mma_ldmatrix_x4(of[kc], &sV[1][off]);
    }
    // D of rows g and g+8: the 4 lanes of a row take a quarter of HS each (dO from shared memory, O
    // from global, 16-byte vectors of 8), summed by two shuffles; a row past T reads O's last row
    // against a zero dO row (the copy's fill), so D is 0 there, with no branch before the shuffles.
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = warp * 16 + g + r * 8, q = q0 + row;
        const uint4* o4 = reinterpret_cast<const uint4*>(out + ((size_t)b * seq + min(q, seq - 1)) * C +
                                                         (size_t)h * HS + t * (HS / 4));
        // dO's vectors: consecutive chunks of a row are 64 elements apart in the tile layout
        D[r] = flash_row_dot<T, HS, 64>(o4, &sV[1][wg_tile_offset<HS>(row, t * (HS / 4))]);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int q = q0 + warp * 16 + g + r * 8;
        if (t == 0 && q < seq) Dsum[((size_t)b * NH + h) * seq + q] = D[r];
    }
    __syncthreads();  // every warp has its Q and dO fragments and D: tile 1 may overwrite the buffers

    float dq[HS / 8][4];  // dQ: 16 rows x HS
#pragma unroll
    for (int d = 0; d < HS / 8; d++)
#pragma unroll
        for (int i = 0; i < 4; i++) dq[d][i] = 0.0f;

    // the two buffers' descriptors (K both ways: B of S = Q K^T and of dQ += dS K); buffer 1 is one
    // tile after buffer 0
    const WgDesc kd = wg_tile_kmajor<HS>(sK[0]), kdt = wg_tile_mnmajor<HS>(sK[0]), vd = wg_tile_kmajor<HS>(sV[0]);
    constexpr uint32_t BUF = FLASH_COLS * HS * sizeof(T) / 16;  // a buffer, in the address field's units
    const T* kv1 = qkv_bh + C;  // key tile j+1's first K row (its V row C further)
    for (int j = 0; j < q_tile; j++) {
        kv1 += FLASH_COLS * C3;  // prefetch into the buffers the barrier ending j-1 freed
        const int left = seq - (j + 1) * FLASH_COLS;
        flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sK[(j + 1) & 1], kv1, C3, left);
        flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sV[(j + 1) & 1], kv1 + C, C3, left);
        mma_cp_async_commit();
        mma_cp_async_wait<1>();  // tile j's group done, j+1's still in flight
        __syncthreads();         // every thread's copies of tile j have landed
        const uint32_t b = (j & 1) * BUF;
        flash_wg_dq_tile<T, HS, false>(dq, qf, of, L, D, WgDesc{kd.lo + b, kd.hi}, WgDesc{kdt.lo + b, kdt.hi},
                                       WgDesc{vd.lo + b, vd.hi}, sl2, warp, lane);
        __syncthreads();  // the products read tile j's buffers until their waits: all done
    }
    mma_cp_async_wait<0>();
    __syncthreads();
    const uint32_t bd = (q_tile & 1) * BUF;
    flash_wg_dq_tile<T, HS, true>(dq, qf, of, L, D, WgDesc{kd.lo + bd, kd.hi}, WgDesc{kdt.lo + bd, kdt.hi},
                                  WgDesc{vd.lo + bd, vd.hi}, sl2, warp, lane);

#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int q = q0 + warp * 16 + g + r * 8;
        if (q >= seq) continue;
        T* qrow = dqkv + ((size_t)b * seq + q) * C3 + (size_t)h * HS;
#pragma unroll
        for (int d = 0; d < HS / 8; d++)
            flash_store2<T>(qrow + d * 8 + 2 * t, dq[d][0 + 2 * r] * scale, dq[d][1 + 2 * r] * scale);
    }
}

// flash_backward_kv_wgmma_kernel (key-major, second; reads D): a block is one warpgroup owning a
// 64-key tile, each warp 16 keys, K's and V's fragments in registers (A from registers). Query tiles
// i >= j (Q and dO, the tile layout) stream through two shared buffers, their lse and D beside them.
// Per query tile, in two passes of FLASH_WG_KV_QUERIES = 32 queries (S^T and dP^T of 32 queries beside
// dK and dV in registers):
//   S^T = K Q^T and dP^T = V dO^T: 2 HS / 16 wgmma m64n32k16 (Q and dO K-major), one commit and wait;
//   P^T = 2^(S^T sl2 - L), the mask on the diagonal tile only; dS^T = P^T (dP^T - D); both packed
//   (rounded to T) into A fragments;
//   dV += P^T dO and dK += dS^T Q: 2 + 2 wgmma m64nHSk16 (dO and Q MN-major), one commit and wait.
// dK and dV stay in registers until one write at the end (dK scaled by 1/sqrt(HS)). 4 tile products a
// pair, as flash_bwd.cuh's kv kernel.
constexpr int FLASH_WG_KV_QUERIES = 32;

// qd, qdt, od, odt: the tile's Q and dO as K-major (B of S^T = K Q^T, dP^T = V dO^T) and MN-major (B of
// dK += dS^T Q, dV += P^T dO) operands.
template <class T, int HS, bool DIAG>
__device__ __forceinline__ void flash_wg_kv_tile(float (&dk)[HS / 8][4], float (&dv)[HS / 8][4],
                                                 const uint32_t (&kf)[HS / 16][4], const uint32_t (&vf)[HS / 16][4],
                                                 WgDesc qd, WgDesc qdt, WgDesc od, WgDesc odt, const float* sL,
                                                 const float* sD, float sl2, int warp, int lane) {
    constexpr int QC = FLASH_WG_KV_QUERIES;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int pass = 0; pass < FLASH_ROWS / QC; pass++) {
        // the pass's queries: whole groups of 8 rows, this many bytes into the tiles
        constexpr uint32_t PASS = QC / 8 * (HS / 8) * 64 * sizeof(T);
        float s[QC / 8][4], dp[QC / 8][4];  // S^T, dP^T: the warp's 16 keys x QC queries
        wgmma_fence();
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
            wgmma_rs<T, QC, 0>(s, kf[kc], wg_desc_at(qd, pass * PASS + wg_kstep_kmajor<HS, T>(kc)), kc > 0);
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
            wgmma_rs<T, QC, 0>(dp, vf[kc], wg_desc_at(od, pass * PASS + wg_kstep_kmajor<HS, T>(kc)), kc > 0);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(s);
        wgmma_hold(dp);
        // P^T = 2^(S^T sl2 - L), masked on the diagonal; dS^T = P^T (dP^T - D)
        uint32_t pf[QC / 16][4], df[QC / 16][4];
#pragma unroll
        for (int n = 0; n < QC / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int q = pass * QC + n * 8 + 2 * t + (i & 1);  // the query within the tile
                float x = fmaf(s[n][i], sl2, -sL[q]);
                if (DIAG) {  // the key within the tile
                    const int key = warp * 16 + g + (i >> 1) * 8;
                    if (key > q) x = -INFINITY;
                }
                const float p = mma_ex2(x);
                s[n][i] = p;
                dp[n][i] = p * (dp[n][i] - sD[q]);
            }
#pragma unroll
        for (int kc = 0; kc < QC / 16; kc++) {
            mma_pack_a<T>(pf[kc], s[2 * kc], s[2 * kc + 1]);
            mma_pack_a<T>(df[kc], dp[2 * kc], dp[2 * kc + 1]);
        }
        wgmma_fence();
        wgmma_hold(dv);
        wgmma_hold(dk);
#pragma unroll
        for (int kc = 0; kc < QC / 16; kc++)
            wgmma_rs<T, HS, 1>(dv, pf[kc], wg_desc_at(odt, pass * PASS + wg_kstep_mnmajor<HS, T>(kc)), 1);
#pragma unroll
        for (int kc = 0; kc < QC / 16; kc++)
            wgmma_rs<T, HS, 1>(dk, df[kc], wg_desc_at(qdt, pass * PASS + wg_kstep_mnmajor<HS, T>(kc)), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(dv);
        wgmma_hold(dk);
    }
}

// dK, dV of the block's 64 keys into dqkv, from D (Dsum, written by flash_backward_dq_wgmma_kernel).
// Grid (ceil(T/64), NH, B) of 128 threads.
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_WG_THREADS)
    flash_backward_kv_wgmma_kernel(T* dqkv, const float* Dsum, const T* dout, const T* qkv, const float* lse, int seq,
                                   int NH) {
    __shared__ __align__(128) T sQ[2][FLASH_ROWS * HS];
    __shared__ __align__(128) T sdO[2][FLASH_ROWS * HS];
    __shared__ float sL[FLASH_ROWS], sD[FLASH_ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3;
    const int k_tile = blockIdx.x;  // key tile 0 sees every query tile: the longest blocks start first
    const int n_tiles = gridDim.x;
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int k0 = k_tile * FLASH_COLS;
    const T* qkv_bh = qkv + (size_t)b * seq * C3 + (size_t)h * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const float sl2 = scale * FLASH_LOG2E;

    // K and V into the second buffers, into registers, then the buffers are free
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sQ[1], qkv_bh + (size_t)k0 * C3 + C, C3, seq - k0);
    flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_COLS>(sdO[1], qkv_bh + (size_t)k0 * C3 + 2 * C, C3, seq - k0);
    mma_cp_async_commit();
    mma_cp_async_wait<0>();
    __syncthreads();
    uint32_t kf[HS / 16][4], vf[HS / 16][4];  // the warp's keys of K and V as A fragments
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        const int off = wg_tile_offset<HS>(warp * 16 + (lane & 15), kc * 16 + (lane >> 4) * 8);
        mma_ldmatrix_x4(kf[kc], &sQ[1][off]);
        mma_ldmatrix_x4(vf[kc], &sdO[1][off]);
    }
    __syncthreads();  // every warp has its fragments: buffers 1 are free
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int d = 0; d < HS / 8; d++)
#pragma unroll
        for (int i = 0; i < 4; i++) dk[d][i] = dv[d][i] = 0.0f;

    const T* dout_bh = dout + (size_t)b * seq * C + (size_t)h * HS;
    const float *lse_bh = lse + ((size_t)b * NH + h) * seq, *D_bh = Dsum + ((size_t)b * NH + h) * seq;
    {  // the first query tile (the diagonal one) into buffer 0
        const int q0 = k_tile * FLASH_ROWS;
        flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sQ[0], qkv_bh + (size_t)q0 * C3, C3, seq - q0);
        flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sdO[0], dout_bh + (size_t)q0 * C, C, seq - q0);
        mma_cp_async_commit();
    }
    // Query tile qt's Q and dO landed in buffer (qt - k_tile) & 1, its lse and D in sL, sD, with tile
    // qt+1's copies in flight into the other buffer (freed by the barrier ending qt-1).
    auto tile_ready = [&](int qt) {
        const int q0 = qt * FLASH_ROWS, buf = (qt - k_tile) & 1;
        if (qt + 1 < n_tiles) {  // prefetch query tile qt+1 into the buffer the barrier ending qt-1 freed
            const int q1 = q0 + FLASH_ROWS;
            flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sQ[buf ^ 1], qkv_bh + (size_t)q1 * C3, C3, seq - q1);
            flash_wg_load_rows<T, HS, FLASH_WG_THREADS, FLASH_ROWS>(sdO[buf ^ 1], dout_bh + (size_t)q1 * C, C, seq - q1);
            mma_cp_async_commit();
        }
        flash_tile_stats(sL, sD, lse_bh, D_bh, q0, seq);
        if (qt + 1 < n_tiles) mma_cp_async_wait<1>();  // tile qt's group done, qt+1's in flight
        else mma_cp_async_wait<0>();
        __syncthreads();
    };
    // The buffers' descriptors, both ways; buffer 1 is one tile after buffer 0.
    const WgDesc qd = wg_tile_kmajor<HS>(sQ[0]), qdt = wg_tile_mnmajor<HS>(sQ[0]);
    const WgDesc od = wg_tile_kmajor<HS>(sdO[0]), odt = wg_tile_mnmajor<HS>(sdO[0]);
    constexpr uint32_t BUF = FLASH_ROWS * HS * sizeof(T) / 16;  // a buffer, in the address field's units
    // The diagonal tile k_tile, then the wholly visible ones after it.
    tile_ready(k_tile);
    flash_wg_kv_tile<T, HS, true>(dk, dv, kf, vf, qd, qdt, od, odt, sL, sD, sl2, warp, lane);
    __syncthreads();  // Q, dO, lse and D of this tile are about to be replaced
    for (int qt = k_tile + 1; qt < n_tiles; qt++) {
        tile_ready(qt);
        const uint32_t b = ((qt - k_tile) & 1) * BUF;
        flash_wg_kv_tile<T, HS, false>(dk, dv, kf, vf, WgDesc{qd.lo + b, qd.hi}, WgDesc{qdt.lo + b, qdt.hi},
                                       WgDesc{od.lo + b, od.hi}, WgDesc{odt.lo + b, odt.hi}, sL, sD, sl2, warp, lane);
        __syncthreads();
    }

#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int key = k0 + warp * 16 + g + r * 8;
        if (key >= seq) continue;
        T* krow = dqkv + ((size_t)b * seq + key) * C3 + C + (size_t)h * HS;
#pragma unroll
        for (int d = 0; d < HS / 8; d++) {
            flash_store2<T>(krow + d * 8 + 2 * t, dk[d][2 * r] * scale, dk[d][2 * r + 1] * scale);
            flash_store2<T>(krow + C + d * 8 + 2 * t, dv[d][2 * r], dv[d][2 * r + 1]);
        }
    }
}

// The backward on wgmma: arguments, results and scratch as flash_backward's (kernels/flash_bwd.cuh).
// Launches flash_backward_dq_wgmma_kernel (it writes D) then flash_backward_kv_wgmma_kernel (it reads
// D), grid (ceil(T/64), NH, B), 128 threads each, static shared memory (32 KiB each at HS = 64).
template <class T, int HS>
void flash_backward_wgmma(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                          int seq, int NH, cudaStream_t stream) {
    if (B <= 0 || seq <= 0 || NH <= 0) return;
    dim3 grid((seq + FLASH_ROWS - 1) / FLASH_ROWS, NH, B);
    flash_backward_dq_wgmma_kernel<T, HS><<<grid, FLASH_WG_THREADS, 0, stream>>>(dqkv, scratch, dout, qkv, out, lse,
                                                                                seq, NH);
    flash_backward_kv_wgmma_kernel<T, HS><<<grid, FLASH_WG_THREADS, 0, stream>>>(dqkv, scratch, dout, qkv, lse, seq,
                                                                                NH);
}
