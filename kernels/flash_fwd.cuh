// kernels/flash_fwd.cuh: the FlashAttention-2-style causal attention forward (FP16 and BF16, head sizes
// 32 and 64) through kernels/mma.cuh: the scores, the softmax and P V all stay in registers (no
// shared-memory round trip for S or P as attention.cuh's tiled forward makes). Same arguments, layout
// and lse convention as attention.cuh's forward: attention.cuh includes this file and its
// attention_forward launches attention_forward_flash_kernel wherever it applies;
// kernels/test_attention.cu checks it against the C engine's forward (and the backward on its out and
// lse), dev/cuda/test_flash_fwd.cu against a double-precision reference with bounds derived from
// where it rounds, and against the tiled forward.
//
// A block of 2 warps owns a 64-row query tile of one (batch, head), each warp 32 of its rows (two
// 16-row MMA tiles), the Q fragments loaded once into registers. Each K and V fragment a warp reads
// from shared memory (ldmatrix) serves both of its 16-row tiles: half the shared-memory reads per
// FLOP of a warp with 16 rows, which is what bounds this kernel (the kernel report: shared-memory
// bound); FlashAttention-2's forward gives its warps 32 query rows at head size 64 too. Key/value
// tiles of 64 stream through two shared buffers: every thread's cp.async of tile j+1 (K and V) is in
// flight while the warps compute on tile j. Per tile and 16-row tile:
//   S = Q K^T (mma m16n8k16, fp32, raw scores);
//   the causal mask only on the diagonal tile, the last, peeled out of the loop (earlier tiles are
//   wholly visible and their loop holds no mask code; later ones are skipped);
//   running row max m of the raw scores and the rescale alpha = 2^((m_old - m_new) sl2), the max
//   reduced over the 4 lanes that share a row (__shfl_xor_sync 1, 2); P = 2^(S sl2 - m sl2), one fma
//   and ex2.approx a score, sl2 = log2(e)/sqrt(HS) so the softmax runs in base 2;
//   l = l alpha + rowsum(P) per lane (the 4 partial sums are added once, at the end);
//   O = O alpha + P V: P's accumulators packed (mma_pack_a) into A fragments, rounded to T, and V's
//   B fragments by ldmatrix .trans.
// At the end out = O / l (rounded to T) and lse = (m sl2 + log2 l) ln 2, the natural-log log-sum-exp of
// scale * q.k over the visible keys, which kernels/attention.cuh's backward reads.
// Keys and query rows past T are zero-filled by the copies; a real query row never sees a key past
// T (causal), and rows past T are not written. Every row of the diagonal tile sees at least its own
// key, so m is finite from the first tile on and no -inf - -inf arises.
#pragma once

#include <math.h>

#include "mma.cuh"

constexpr int FLASH_ROWS = 64;      // query rows a block owns
constexpr int FLASH_COLS = 64;      // keys per streamed tile
constexpr int FLASH_MI = 2;         // 16-row MMA tiles a warp owns (the forward, and the backward's query or key rows)
constexpr int FLASH_WARP_ROWS = 16 * FLASH_MI;                       // rows a warp owns
constexpr int FLASH_FWD_THREADS = 32 * FLASH_ROWS / FLASH_WARP_ROWS;  // the forward: 2 warps
constexpr int FLASH_DQ_THREADS = FLASH_FWD_THREADS;  // the backward's dq kernel: the same 2 warps of 32 rows
constexpr int FLASH_KV_THREADS = FLASH_FWD_THREADS;  // the backward's kv kernel: 2 warps of 32 keys
constexpr int FLASH_KV_QUERIES = 16;  // queries the kv kernel takes a pass (S^T, dP^T of 32 keys in registers)
constexpr float FLASH_LOG2E = 1.4426950408889634f;
constexpr float FLASH_LN2 = 0.6931471805599453f;

// Shared row stride HS + 8 elements (one 16-byte vector more): the 8 rows one ldmatrix reads fall in
// different banks, and rows stay 16-byte aligned for ldmatrix and cp.async.
template <int HS> struct FlashGeom {
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= 64,
                  "head size: a multiple of 16, at most 64 (Q, K, V x 2 in 48 KiB of static shared memory)");
    static constexpr int LD = HS + 8;
    static constexpr int VECS = HS / 8;  // 16-byte vectors a row
};

// The block (THREADS threads, threadIdx.x < THREADS) copies ROWS rows of HS elements (global row
// stride `stride` elements) into shared rows of stride LD, one 16-byte cp.async each, in the calling
// thread's current group; rows at or past `valid` become zeros (source size 0, reading nothing, from
// the first row's address). Each thread keeps one column and steps its row by THREADS / VECS, so the
// copies unroll with their addresses advanced by a constant, no index arithmetic per copy.
template <class T, int HS, int THREADS, int ROWS>
__device__ __forceinline__ void flash_load_rows(T* dst, const T* src, size_t stride, int valid) {
    typedef FlashGeom<HS> G;
    constexpr int STEP = THREADS / G::VECS;  // rows one pass of the block covers
    static_assert(THREADS % G::VECS == 0 && ROWS % STEP == 0, "rows: whole passes of the block");
    const int r0 = threadIdx.x / G::VECS, c = (threadIdx.x % G::VECS) * 8;
    const T* from = src + r0 * stride + c;
    T* to = dst + r0 * G::LD + c;
#pragma unroll
    for (int k = 0; k < ROWS / STEP; k++, from += STEP * stride) {
        const bool in = r0 + k * STEP < valid;
        mma_cp_async_cg16(to + k * STEP * G::LD, in ? from : src, in ? 16 : 0);
    }
}

template <class T> __device__ __forceinline__ void flash_store2(T* p, float a, float b);
template <> __device__ __forceinline__ void flash_store2<__half>(__half* p, float a, float b) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
template <> __device__ __forceinline__ void flash_store2<__nv_bfloat16>(__nv_bfloat16* p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// Zeroes a warp's accumulators (MI 16-row tiles x N 8-column slices x 4 per lane).
template <int MI, int N> __device__ __forceinline__ void flash_zero(float (&acc)[MI][N][4]) {
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int n = 0; n < N; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mi][n][i] = 0.0f;
}

// acc += A B for the 16 keys key0..key0+15 of a shared tile (rows of stride LD): A, 16 rows x those
// 16 keys of each of the warp's MI row tiles, is p's accumulators 2 pc and 2 pc + 1, packed
// (mma_pack_a, rounded to T) into an A fragment; B is the tile's 16 rows x HS, whose fragments for two
// 8-column slices at a time come from one ldmatrix x4 .trans, read once for all MI row tiles. The
// forward's O += P V and the backward's dQ += dS K.
template <class T, int HS, int LD, int MI, int N>
__device__ __forceinline__ void flash_mma_tile_trans(float (&acc)[MI][HS / 8][4], const float (&p)[MI][N][4], int pc,
                                                     const T* tile, int key0, int lane) {
    uint32_t pa[MI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
        mma_pack_a<T>(pa[mi], p[mi][2 * pc], p[mi][2 * pc + 1]);
    }
#pragma unroll
    for (int dc = 0; dc < HS / 16; dc++) {
        uint32_t bt[4];
        mma_ldmatrix_x4_trans(bt, &tile[(key0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dc * 16 + (lane >> 4) * 8]);
        const uint32_t b0[2] = {bt[0], bt[1]}, b1[2] = {bt[2], bt[3]};
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            mma_m16n8k16<T>(acc[mi][2 * dc], pa[mi], b0, acc[mi][2 * dc]);
            mma_m16n8k16<T>(acc[mi][2 * dc + 1], pa[mi], b1, acc[mi][2 * dc + 1]);
        }
    }
}

// One key tile of the forward for a warp's MI 16-row tiles: S = Q K^T, the online softmax and
// O += P V. DIAG (the diagonal tile, the block's last) masks keys past each row; every other tile is
// wholly visible and runs without a mask, so the main loop holds no mask code. m is the running row max in raw score units; the scale
// goes into the one fma that forms each exponent, 2^(s sl2 - m sl2).
template <class T, int HS, bool DIAG>
__device__ __forceinline__ void flash_fwd_tile(float (&o)[FLASH_MI][HS / 8][4], float (&m)[FLASH_MI][2],
                                               float (&l)[FLASH_MI][2], const uint32_t (&qf)[FLASH_MI][HS / 16][4],
                                               const T* kt, const T* vt, float sl2, int warp, int lane) {
    typedef FlashGeom<HS> G;
    const int g = lane >> 2, t = lane & 3;
    // On the diagonal, warp 0's rows see no key of the tile's last 32: those chunks are wholly masked
    // (P = 0) and computed all the same. Skipping them is a branch on the warp, after which the
    // compiler guards every later shuffle with a fallback for a diverged warp (sm_90 SASS: 340
    // instructions more, outside the loop); warp 1 computes every chunk anyway, and the block ends
    // with it.
    float s[FLASH_MI][FLASH_COLS / 8][4];
    flash_zero(s);
#pragma unroll
    for (int np = 0; np < FLASH_COLS / 16; np++) {
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            // x4: keys np*16 + 0..7 (head columns kc*16 + 0-7, 8-15), then keys np*16 + 8..15; read
            // once, used by both 16-row tiles
            uint32_t bk[4];
            mma_ldmatrix_x4(bk, &kt[(np * 16 + (lane & 7) + (lane >> 4) * 8) * G::LD + kc * 16 + ((lane >> 3) & 1) * 8]);
            const uint32_t b0[2] = {bk[0], bk[1]}, b1[2] = {bk[2], bk[3]};
#pragma unroll
            for (int mi = 0; mi < FLASH_MI; mi++) {
                mma_m16n8k16<T>(s[mi][2 * np], qf[mi][kc], b0, s[mi][2 * np]);
                mma_m16n8k16<T>(s[mi][2 * np + 1], qf[mi][kc], b1, s[mi][2 * np + 1]);
            }
        }
    }
#pragma unroll
    for (int mi = 0; mi < FLASH_MI; mi++) {
        // mask (diagonal only), row max over this lane's columns
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < FLASH_COLS / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (DIAG) {  // row and key within the tile
                    const int row = warp * FLASH_WARP_ROWS + mi * 16 + g + (i >> 1) * 8, key = n * 8 + 2 * t + (i & 1);
                    if (key > row) s[mi][n][i] = -INFINITY;
                }
                mx[i >> 1] = fmaxf(mx[i >> 1], s[mi][n][i]);
            }
        float alpha[2], msc[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m[mi][r], mx[r]);  // finite: the row sees at least one key by now
            msc[r] = m_new * sl2;
            alpha[r] = mma_ex2(m[mi][r] * sl2 - msc[r]);  // 2^-inf = 0 on the first tile
            m[mi][r] = m_new;
            l[mi][r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < FLASH_COLS / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float p = mma_ex2(fmaf(s[mi][n][i], sl2, -msc[i >> 1]));  // masked: 2^-inf = 0
                s[mi][n][i] = p;
                l[mi][i >> 1] += p;  // l sums the unrounded p, so lse is exact to fp32
            }
#pragma unroll
        for (int d = 0; d < HS / 8; d++) {
            o[mi][d][0] *= alpha[0];
            o[mi][d][1] *= alpha[0];
            o[mi][d][2] *= alpha[1];
            o[mi][d][3] *= alpha[1];
        }
    }
    // O += P V, 16 keys at a time: P's two accumulators of those keys are an A fragment, and
    // ldmatrix x4 .trans of V's rows (keys) gives the B fragments of two 8-column slices of HS, read
    // once for both 16-row tiles.
#pragma unroll
    for (int kc = 0; kc < FLASH_COLS / 16; kc++) {
        flash_mma_tile_trans<T, HS, G::LD>(o, s, kc, vt, kc * 16, lane);
    }
}

// out (B,T,C) and lse (B,NH,T fp32) from qkv (B,T,3C), C = NH*HS; grid (ceil(T/64), NH, B).
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_FWD_THREADS)
    attention_forward_flash_kernel(T* out, float* lse, const T* qkv, int seq, int NH) {
    typedef FlashGeom<HS> G;
    __shared__ __align__(16) T sQ[FLASH_ROWS * G::LD];
    __shared__ __align__(16) T sK[2][FLASH_COLS * G::LD];
    __shared__ __align__(16) T sV[2][FLASH_COLS * G::LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3;
    const int q_tile = gridDim.x - 1 - blockIdx.x;  // the tiles with the most keys start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int q0 = q_tile * FLASH_ROWS;
    const T* qkv_bh = qkv + (size_t)b * seq * C3 + (size_t)h * HS;
    const float sl2 = FLASH_LOG2E / sqrtf((float)HS);  // scale * log2(e)

    flash_load_rows<T, HS, FLASH_FWD_THREADS, FLASH_ROWS>(sQ, qkv_bh + (size_t)q0 * C3, C3, seq - q0);
    mma_cp_async_commit();  // group: Q
    flash_load_rows<T, HS, FLASH_FWD_THREADS, FLASH_COLS>(sK[0], qkv_bh + C, C3, seq);
    flash_load_rows<T, HS, FLASH_FWD_THREADS, FLASH_COLS>(sV[0], qkv_bh + 2 * C, C3, seq);
    mma_cp_async_commit();  // group: key tile 0
    mma_cp_async_wait<1>();  // Q done, tile 0 still in flight
    __syncthreads();

    // Per 16-row tile mi of this warp (rows warp*32 + mi*16 ..+15):
    uint32_t qf[FLASH_MI][HS / 16][4];  // its query rows as A fragments, one per 16 columns of HS
    float o[FLASH_MI][HS / 8][4];       // O: 16 rows x HS, one accumulator per 8 columns
    float m[FLASH_MI][2];               // running max of rows g and g+8 (raw scores)
    float l[FLASH_MI][2];               // this lane's part of their running sums
#pragma unroll
    for (int mi = 0; mi < FLASH_MI; mi++) {
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
            mma_ldmatrix_x4(qf[mi][kc],
                            &sQ[(warp * FLASH_WARP_ROWS + mi * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8]);
#pragma unroll
        for (int d = 0; d < HS / 8; d++)
#pragma unroll
            for (int i = 0; i < 4; i++) o[mi][d][i] = 0.0f;
        m[mi][0] = m[mi][1] = -INFINITY;
        l[mi][0] = l[mi][1] = 0.0f;
    }

    // Key tiles 0..q_tile-1, wholly visible, then the diagonal q_tile: every thread's cp.async of tile
    // j+1 is in flight while the warps compute on tile j.
    for (int j = 0; j < q_tile; j++) {
        const int k1 = (j + 1) * FLASH_COLS;  // prefetch into the buffers the barrier ending j-1 freed
        const T* kv1 = qkv_bh + (size_t)k1 * C3;
        flash_load_rows<T, HS, FLASH_FWD_THREADS, FLASH_COLS>(sK[(j + 1) & 1], kv1 + C, C3, seq - k1);
        flash_load_rows<T, HS, FLASH_FWD_THREADS, FLASH_COLS>(sV[(j + 1) & 1], kv1 + 2 * C, C3, seq - k1);
        mma_cp_async_commit();
        mma_cp_async_wait<1>();  // tile j's group done, j+1's still in flight
        __syncthreads();         // every thread's copies of tile j have landed
        flash_fwd_tile<T, HS, false>(o, m, l, qf, sK[j & 1], sV[j & 1], sl2, warp, lane);
        __syncthreads();  // all warps are done with tile j's buffers before tile j+2 is copied in
    }
    mma_cp_async_wait<0>();
    __syncthreads();
    flash_fwd_tile<T, HS, true>(o, m, l, qf, sK[q_tile & 1], sV[q_tile & 1], sl2, warp, lane);

    // out = O / l, lse = (m sl2 + log2 l) ln 2, l summed over the 4 lanes of the row first (every
    // shuffle before the first branch on a row, so the compiler knows the warp converged there)
#pragma unroll
    for (int mi = 0; mi < FLASH_MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[mi][r] += __shfl_xor_sync(0xffffffffu, l[mi][r], 1);
            l[mi][r] += __shfl_xor_sync(0xffffffffu, l[mi][r], 2);
        }
#pragma unroll
    for (int mi = 0; mi < FLASH_MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float lr = l[mi][r];
            const float inv_l = 1.0f / lr;  // l >= 1: the row's max contributes 2^0
            const int row = q0 + warp * FLASH_WARP_ROWS + mi * 16 + g + r * 8;
            if (row >= seq) continue;
            T* orow = out + ((size_t)b * seq + row) * C + (size_t)h * HS;
#pragma unroll
            for (int d = 0; d < HS / 8; d++)
                flash_store2<T>(orow + d * 8 + 2 * t, o[mi][d][2 * r] * inv_l, o[mi][d][2 * r + 1] * inv_l);
            if (t == 0) lse[((size_t)b * NH + h) * seq + row] = (m[mi][r] * sl2 + log2f(lr)) * FLASH_LN2;
        }
}

// out (B,T,C) and lse (B,NH,T) from qkv (B,T,3C), C = NH*HS, exactly as kernels/attention.cuh's
// attention_forward; C must be a multiple of 8 (16-byte rows for cp.async). Launch: grid
// (ceil(T/64), NH, B), 64 threads, static shared memory 5 x 64 x (HS+8) elements (45 KiB at HS 64).
template <class T, int HS>
void flash_forward(T* out, float* lse, const T* qkv, int B, int seq, int NH, cudaStream_t stream) {
    if (B <= 0 || seq <= 0 || NH <= 0) return;
    dim3 grid((seq + FLASH_ROWS - 1) / FLASH_ROWS, NH, B);
    attention_forward_flash_kernel<T, HS><<<grid, FLASH_FWD_THREADS, 0, stream>>>(out, lse, qkv, seq, NH);
}
