// kernels/flash_bwd.cuh: the FlashAttention-2-style causal attention backward (FP16 and BF16, head
// sizes 32 and 64) through kernels/mma.cuh, the companion of kernels/flash_fwd.cuh (issue 17). Same
// arguments, layouts and lse convention as kernels/attention.cuh's backward: attention.cuh includes
// this file and its attention_backward launches flash_backward wherever attention_uses_flash()
// (kernels/sizes.h) says so, the tiled backward (attention_backward_tiled) elsewhere.
// kernels/test_attention.cu checks it against the C engine's backward; dev/cuda/test_flash_bwd.cu
// against a double-precision reference with derived bounds, against the tiled backward, and for
// bit-identical repeats.
//
// flash_backward_kv_kernel: a block of 4 warps owns a 64-key tile of one (batch, head); each warp 16 of
// its keys, their K and V fragments loaded once into registers. It loops over the query tiles at or
// after its key tile. Per query tile (64 rows, Q and dO copied into shared memory by cp.async):
//   prologue: D = rowsum(dO o O) of the tile's 64 rows (fp32, from global while the copies fly) and
//             lse log2(e), into shared memory: no separate row-dot kernel. Each block recomputes D for
//             the query tiles it visits (64 HS FMAs a row, against 5 x 64 x HS mma FLOPs a row) and
//             reads O's tile once more (a third stream beside Q and dO);
//   S^T = K Q^T and dP^T = V dO^T (mma m16n8k16, fp32; each warp 16 keys x 64 queries in registers);
//   P^T = 2^(S^T scale log2(e) - lse log2(e)) (ex2.approx), the causal mask on the diagonal tile only
//        (and there the 16-query chunks wholly before a warp's keys are skipped);
//   dS^T = P^T (dP^T - D);
//   dV += P^T dO and dK += dS^T Q: P^T and dS^T's accumulators packed (rounded to T) into A
//        fragments, dO's and Q's B fragments by ldmatrix .trans; dK and dV stay in registers until
//        one write at the end (dK scaled by 1/sqrt(HS));
//   dQ partial = dS K: dS (rounded to T, as for dK) goes through shared memory transposed to
//        [query][key], and each warp multiplies 16 query rows of it by the block's K tile.
// That is 5 tile products per (key tile, query tile) pair, against attention.cuh's 7.
//
// dQ, deterministically and without float atomics: each (key tile j, query tile i) pair writes its
// 64 x HS fp32 dQ partial to its own slot of scratch (slots of (b, h) in triangular order
// i (i + 1) / 2 + j); flash_backward_dq_kernel then sums, per query row, the partials of key tiles
// 0..i in that order, scales and rounds once to T. Bit-identical run to run.
// Why this rather than a query-major dQ pass: a second pass recomputes S and dP (2 of the 7 products
// attention.cuh pays) and re-reads K, V, Q, dO; the partials cost no products but memory and its
// traffic: n (n + 1) / 2 slots of 64 HS fp32 per (b, h), n = ceil(T / 64), i.e. (n + 1) / 2 times
// dQ in fp32 (T = 1024, HS = 64: 8.5 x; B = 8, NH = 12: 214 MB of scratch), each written once and
// read once. flash_backward_scratch_floats() (kernels/sizes.h, so the memory planner counts it as the
// attention scratch) gives the size. A GPU measurement decides; FA2's atomicAdd into an fp32 dQ is
// cheaper still but not deterministic, and the trainer promises bit-identical weights run to run.
//
// Rows past T: Q, dO, K and V rows past T are zero-filled by the copies; lse of a query row past T
// is +inf in shared memory so its P is 2^-inf = 0; key rows past T give dS K = 0 rows; nothing past
// T is written to dqkv.
//
// Shared memory: K, V, Q, dO tiles and dS (64 x (64 + 8)) as T, lse and D as fp32: 46 KiB at HS = 64,
// static (under the 48 KiB default). Not double-buffered yet: Q/dO of tile i+1 are copied after tile i
// is done (there is no room for a second buffer in static shared memory at HS = 64).
//
// ptxas (nvcc 13.0, -Xptxas -v; f16 and bf16 the same):
//   flash_backward_kv_kernel<HS=64>: sm_90 238 registers, sm_80 236; no spills; 46592 bytes smem.
//   flash_backward_kv_kernel<HS=32>: sm_90 163 registers, sm_80 168; no spills; 30208 bytes smem.
//   flash_backward_dq_kernel: sm_90 34 registers, sm_80 39; no spills, no shared memory.
// At HS = 64 the registers (S^T, dP^T, dK, dV accumulators: 128 floats, K and V fragments: 32) allow
// 2 blocks (8 warps) an SM, as attention.cuh's backward; the shared memory would allow 4 on sm_90.
// Predicted, not measured (the kernel report's model by hand, H100 SXM, FP16, B = 8, T = 1024; see
// docs/speed.md): DRAM-bound on the partials (445.6 MB a layer at d48 written, then read), kv 199 us
// and dq 235 us a layer, 20.9 ms a step at d48 against the tiled backward's 8.05 ms: at T = 1024 the
// partials' traffic costs more than the 2 products they save.
// Next steps, for a GPU to measure: fewer partials (two key tiles a block, or a fixed-order reduction
// into one fp32 dQ inside the kv kernel), double-buffer Q/dO (dynamic shared memory), hold V or K in
// shared memory rather than registers to reach 3 blocks an SM, and compare with a dQ pass.
#pragma once

#include <math.h>

#include "flash_fwd.cuh"
#include "sizes.h"

static_assert(FLASH_ROWS == ATTENTION_FLASH_TILE && FLASH_COLS == ATTENTION_FLASH_TILE,
              "kernels/sizes.h sizes the dQ partials by ATTENTION_FLASH_TILE");

constexpr int FLASHB_LDS = FLASH_COLS + 8;  // row stride of the shared dS tile ([query][key])

__device__ __forceinline__ float flashb_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float flashb_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T flashb_round(float x);
template <> __device__ __forceinline__ __half flashb_round<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 flashb_round<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// dK, dV of the block's 64 keys into dqkv; dQ partials into dq_part. Grid (ceil(T/64), NH, B).
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_THREADS)
    flash_backward_kv_kernel(T* dqkv, float* dq_part, const T* dout, const T* qkv, const T* out, const float* lse,
                             int seq, int NH) {
    typedef FlashGeom<HS> G;
    __shared__ __align__(16) T sK[FLASH_COLS * G::LD];
    __shared__ __align__(16) T sV[FLASH_COLS * G::LD];
    __shared__ __align__(16) T sQ[FLASH_ROWS * G::LD];
    __shared__ __align__(16) T sdO[FLASH_ROWS * G::LD];
    __shared__ __align__(16) T sdS[FLASH_ROWS * FLASHB_LDS];
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

    flash_load_rows<T, HS>(sK, qkv_bh + (size_t)k0 * C3 + C, C3, FLASH_COLS, seq - k0);
    flash_load_rows<T, HS>(sV, qkv_bh + (size_t)k0 * C3 + 2 * C, C3, FLASH_COLS, seq - k0);
    mma_cp_async_commit();
    mma_cp_async_wait<0>();
    __syncthreads();
    uint32_t kf[HS / 16][4], vf[HS / 16][4];  // this warp's 16 keys of K and V as A fragments
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        mma_ldmatrix_x4(kf[kc], &sK[(warp * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8]);
        mma_ldmatrix_x4(vf[kc], &sV[(warp * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8]);
    }
    float dk[HS / 8][4], dv[HS / 8][4];
#pragma unroll
    for (int d = 0; d < HS / 8; d++)
#pragma unroll
        for (int i = 0; i < 4; i++) dk[d][i] = dv[d][i] = 0.0f;

    for (int qt = k_tile; qt < n_tiles; qt++) {
        const int q0 = qt * FLASH_ROWS;
        flash_load_rows<T, HS>(sQ, qkv_bh + (size_t)q0 * C3, C3, FLASH_ROWS, seq - q0);
        flash_load_rows<T, HS>(sdO, dout + ((size_t)b * seq + q0) * C + (size_t)h * HS, C, FLASH_ROWS, seq - q0);
        mma_cp_async_commit();
        {  // D and lse of the tile's rows: two threads a row, each half of HS, while the copies fly
            const int r = threadIdx.x >> 1, half = threadIdx.x & 1, q = q0 + r;
            float acc = 0.0f;
            if (q < seq) {
                const size_t off = ((size_t)b * seq + q) * C + (size_t)h * HS + half * (HS / 2);
#pragma unroll 8
                for (int c = 0; c < HS / 2; c++) acc += flashb_f(dout[off + c]) * flashb_f(out[off + c]);
            }
            acc += __shfl_xor_sync(0xffffffffu, acc, 1);
            if (half == 0) {
                sD[r] = acc;
                sL[r] = q < seq ? lse[((size_t)b * NH + h) * seq + q] * FLASH_LOG2E : INFINITY;
            }
        }
        mma_cp_async_wait<0>();
        __syncthreads();
        const bool diag = qt == k_tile;
        // on the diagonal, queries before this warp's first key (chunks np < warp) are all masked
        const int first = diag ? warp : 0;

        float s[FLASH_ROWS / 8][4], dp[FLASH_ROWS / 8][4];  // S^T, dP^T: 16 keys x 64 queries
#pragma unroll
        for (int n = 0; n < FLASH_ROWS / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[n][i] = dp[n][i] = 0.0f;
#pragma unroll
        for (int np = 0; np < FLASH_ROWS / 16; np++) {
            if (np < first) continue;
#pragma unroll
            for (int kc = 0; kc < HS / 16; kc++) {
                // x4: queries np*16 + 0..7 (head columns kc*16 + 0-7, 8-15), then np*16 + 8..15
                const int off = (np * 16 + (lane & 7) + (lane >> 4) * 8) * G::LD + kc * 16 + ((lane >> 3) & 1) * 8;
                uint32_t bq[4], bo[4];
                mma_ldmatrix_x4(bq, &sQ[off]);
                mma_ldmatrix_x4(bo, &sdO[off]);
                const uint32_t q0f[2] = {bq[0], bq[1]}, q1f[2] = {bq[2], bq[3]};
                const uint32_t o0f[2] = {bo[0], bo[1]}, o1f[2] = {bo[2], bo[3]};
                mma_m16n8k16<T>(s[2 * np], kf[kc], q0f, s[2 * np]);
                mma_m16n8k16<T>(s[2 * np + 1], kf[kc], q1f, s[2 * np + 1]);
                mma_m16n8k16<T>(dp[2 * np], vf[kc], o0f, dp[2 * np]);
                mma_m16n8k16<T>(dp[2 * np + 1], vf[kc], o1f, dp[2 * np + 1]);
            }
        }
        // P^T = 2^(S^T sl2 - L), masked on the diagonal; dS^T = P^T (dP^T - D). P in s, dS in dp.
#pragma unroll
        for (int n = 0; n < FLASH_ROWS / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int key = warp * 16 + g + (i >> 1) * 8, q = n * 8 + 2 * t + (i & 1);  // within the tiles
                float x = s[n][i] * sl2 - sL[q];
                if (diag && key > q) x = -INFINITY;
                const float p = mma_ex2(x);
                s[n][i] = p;
                dp[n][i] = p * (dp[n][i] - sD[q]);
            }
        // dV += P^T dO, dK += dS^T Q, 16 queries at a time
#pragma unroll
        for (int kc = 0; kc < FLASH_ROWS / 16; kc++) {
            if (kc < first) continue;
            const uint32_t pa[4] = {mma_pack2<T>(s[2 * kc][0], s[2 * kc][1]), mma_pack2<T>(s[2 * kc][2], s[2 * kc][3]),
                                    mma_pack2<T>(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                                    mma_pack2<T>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
            const uint32_t da[4] = {mma_pack2<T>(dp[2 * kc][0], dp[2 * kc][1]),
                                    mma_pack2<T>(dp[2 * kc][2], dp[2 * kc][3]),
                                    mma_pack2<T>(dp[2 * kc + 1][0], dp[2 * kc + 1][1]),
                                    mma_pack2<T>(dp[2 * kc + 1][2], dp[2 * kc + 1][3])};
#pragma unroll
            for (int dc = 0; dc < HS / 16; dc++) {
                const int off = (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * G::LD + dc * 16 + (lane >> 4) * 8;
                uint32_t bo[4], bq[4];
                mma_ldmatrix_x4_trans(bo, &sdO[off]);
                mma_ldmatrix_x4_trans(bq, &sQ[off]);
                const uint32_t o0f[2] = {bo[0], bo[1]}, o1f[2] = {bo[2], bo[3]};
                const uint32_t q0f[2] = {bq[0], bq[1]}, q1f[2] = {bq[2], bq[3]};
                mma_m16n8k16<T>(dv[2 * dc], pa, o0f, dv[2 * dc]);
                mma_m16n8k16<T>(dv[2 * dc + 1], pa, o1f, dv[2 * dc + 1]);
                mma_m16n8k16<T>(dk[2 * dc], da, q0f, dk[2 * dc]);
                mma_m16n8k16<T>(dk[2 * dc + 1], da, q1f, dk[2 * dc + 1]);
            }
        }
        // dS, rounded to T as in the packed fragments, into shared memory as [query][key]
#pragma unroll
        for (int n = 0; n < FLASH_ROWS / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int key = warp * 16 + g + (i >> 1) * 8, q = n * 8 + 2 * t + (i & 1);
                sdS[q * FLASHB_LDS + key] = flashb_round<T>(dp[n][i]);
            }
        __syncthreads();
        // dQ partial of query rows warp*16..+15: dS (16 x 64 keys) K (64 keys x HS)
        float dq[HS / 8][4];
#pragma unroll
        for (int d = 0; d < HS / 8; d++)
#pragma unroll
            for (int i = 0; i < 4; i++) dq[d][i] = 0.0f;
        // on the diagonal, keys after this warp's last query (chunks kc > warp) have dS = 0
        const int last = diag ? warp : FLASH_COLS / 16 - 1;
#pragma unroll
        for (int kc = 0; kc < FLASH_COLS / 16; kc++) {
            if (kc > last) continue;
            uint32_t a[4];
            mma_ldmatrix_x4(a, &sdS[(warp * 16 + (lane & 15)) * FLASHB_LDS + kc * 16 + (lane >> 4) * 8]);
#pragma unroll
            for (int dc = 0; dc < HS / 16; dc++) {
                uint32_t bk[4];
                mma_ldmatrix_x4_trans(bk, &sK[(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * G::LD + dc * 16 + (lane >> 4) * 8]);
                const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
                mma_m16n8k16<T>(dq[2 * dc], a, b0, dq[2 * dc]);
                mma_m16n8k16<T>(dq[2 * dc + 1], a, b1, dq[2 * dc + 1]);
            }
        }
        float* part = dq_part + (((size_t)b * NH + h) * ((size_t)n_tiles * (n_tiles + 1) / 2) +
                                 (size_t)qt * (qt + 1) / 2 + k_tile) * (FLASH_ROWS * HS);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float* prow = part + (size_t)(warp * 16 + g + r * 8) * HS;
#pragma unroll
            for (int d = 0; d < HS / 8; d++)
                *reinterpret_cast<float2*>(prow + d * 8 + 2 * t) = make_float2(dq[d][2 * r], dq[d][2 * r + 1]);
        }
        __syncthreads();  // Q, dO, dS, lse and D are about to be replaced
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

// dQ of one 64-row query tile: the partials of key tiles 0..qt summed in that order. Grid (ceil(T/64), NH, B).
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_THREADS)
    flash_backward_dq_kernel(T* dqkv, const float* dq_part, int seq, int NH) {
    const int qt = blockIdx.x, n_tiles = gridDim.x, h = blockIdx.y, b = blockIdx.z;
    const int q0 = qt * FLASH_ROWS;
    const size_t C3 = 3 * (size_t)NH * HS, slot = FLASH_ROWS * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const float* base = dq_part + (((size_t)b * NH + h) * ((size_t)n_tiles * (n_tiles + 1) / 2) +
                                   (size_t)qt * (qt + 1) / 2) * slot;
    for (int i = threadIdx.x; i < FLASH_ROWS * HS / 2; i += FLASH_THREADS) {
        const int r = i / (HS / 2), c = (i % (HS / 2)) * 2;
        if (q0 + r >= seq) break;  // rows ascend with i
        float2 acc = make_float2(0.0f, 0.0f);
        for (int j = 0; j <= qt; j++) {
            const float2 v = *reinterpret_cast<const float2*>(base + j * slot + (size_t)r * HS + c);
            acc.x += v.x;
            acc.y += v.y;
        }
        flash_store2<T>(dqkv + ((size_t)b * seq + q0 + r) * C3 + (size_t)h * HS + c, acc.x * scale, acc.y * scale);
    }
}

// dqkv (B,T,3C) OVERWRITTEN with dq, dk, dv, from dout (B,T,C), qkv (B,T,3C), the forward's out
// (B,T,C) and lse (B,NH,T fp32), C = NH*HS a multiple of 8; scratch: flash_backward_scratch_floats
// (kernels/sizes.h) fp32, OVERWRITTEN (the kv kernel writes every slot the dq kernel reads). Launches
// flash_backward_kv_kernel then flash_backward_dq_kernel, grid (ceil(T/64), NH, B), 128 threads each,
// static shared memory only (46 KiB at HS = 64: under the 48 KiB default, no cudaFuncSetAttribute).
template <class T, int HS>
void flash_backward(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                    int seq, int NH, cudaStream_t stream) {
    if (B <= 0 || seq <= 0 || NH <= 0) return;
    dim3 grid((seq + FLASH_ROWS - 1) / FLASH_ROWS, NH, B);
    flash_backward_kv_kernel<T, HS><<<grid, FLASH_THREADS, 0, stream>>>(dqkv, scratch, dout, qkv, out, lse, seq, NH);
    flash_backward_dq_kernel<T, HS><<<grid, FLASH_THREADS, 0, stream>>>(dqkv, scratch, seq, NH);
}
