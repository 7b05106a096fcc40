// qk_tile.cuh: S = Q K^T for 64-row query tiles through kernels/mma.cuh: cp.async loads with double
// buffering of the K tiles, ldmatrix fragments, mma.sync m16n8k16 with fp32 accumulation, the Q
// fragments held in registers across the whole key loop: the first piece of the FlashAttention-2-style
// attention, on its own (kernels/flash_fwd.cuh and flash_bwd.cuh add the softmax, P V and the
// backward); dev/cuda/test_qk_tile.cu checks it against a scalar product through the CPU runtime.
//
// A block of 4 warps owns 64 query rows (16 a warp) and streams the keys in tiles of 64: while the
// warps multiply tile j out of one shared buffer, every thread's cp.async of tile j+1 fills the other
// (all of a thread's 16-byte copies of a tile in flight together). Keys past n_keys are zero-filled by
// the copies (src-size 0) and their scores not stored.
#pragma once

#include "mma.cuh"

constexpr int QK_ROWS = 64;       // query rows a block owns
constexpr int QK_COLS = 64;       // keys per streamed tile
constexpr int QK_THREADS = 128;   // 4 warps, 16 query rows each

// Row stride in shared memory: HS plus one 16-byte vector, so the 8 rows an ldmatrix reads fall in
// different banks; rows stay 16-byte aligned as ldmatrix and cp.async require.
template <int HS> struct QkGeom {
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= 64, "head size: a multiple of 16, at most 64 (48 KiB of shared memory)");
    static constexpr int LD = HS + 8;
    static constexpr int VECS = HS / 8;  // 16-byte vectors a row
};

// The block copies `rows` rows of HS elements (global row stride HS) into shared rows of stride LD, one
// 16-byte cp.async each, in the calling thread's current group; rows at or past `valid` become zeros.
template <class T, int HS>
__device__ __forceinline__ void qk_load_tile(T* dst, const T* src, int rows, int valid) {
    typedef QkGeom<HS> G;
    for (int i = threadIdx.x; i < rows * G::VECS; i += QK_THREADS) {
        const int r = i / G::VECS, c = (i % G::VECS) * 8;
        const bool in = r < valid;
        mma_cp_async_cg16(dst + r * G::LD + c, src + (size_t)(in ? r : 0) * HS + c, in ? 16 : 0);
    }
}

// S (n_query x n_keys, row-major fp32) = Q (n_query x HS) K^T (K: n_keys x HS); n_query a multiple of 64.
template <class T, int HS>
__global__ void __launch_bounds__(QK_THREADS) qk_tile_kernel(float* S, const T* Q, const T* K, int n_keys) {
    typedef QkGeom<HS> G;
    __shared__ __align__(16) T sQ[QK_ROWS * G::LD];
    __shared__ __align__(16) T sK[2][QK_COLS * G::LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const int g = lane >> 2, t = lane & 3;
    const int q0 = blockIdx.x * QK_ROWS;
    const int tiles = (n_keys + QK_COLS - 1) / QK_COLS;

    qk_load_tile<T, HS>(sQ, Q + (size_t)q0 * HS, QK_ROWS, QK_ROWS);
    qk_load_tile<T, HS>(sK[0], K, QK_COLS, n_keys);
    mma_cp_async_commit();  // group: Q and key tile 0

    uint32_t qf[HS / 16][4];  // this warp's 16 query rows as A fragments, one per 16-wide chunk of HS
    for (int j = 0; j < tiles; j++) {
        if (j + 1 < tiles) {  // prefetch tile j+1 into the other buffer (freed by the barrier ending j-1)
            qk_load_tile<T, HS>(sK[(j + 1) & 1], K + (size_t)(j + 1) * QK_COLS * HS, QK_COLS, n_keys - (j + 1) * QK_COLS);
            mma_cp_async_commit();
            mma_cp_async_wait<1>();  // tile j's group is done; j+1's stays in flight
        } else {
            mma_cp_async_wait<0>();
        }
        __syncthreads();  // every thread's copies of tile j (and Q) have landed
        if (j == 0)
            for (int kc = 0; kc < HS / 16; kc++)
                mma_ldmatrix_x4(qf[kc], &sQ[(warp * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8]);
        const T* kt = sK[j & 1];
        float acc[QK_COLS / 8][4];
        for (int n = 0; n < QK_COLS / 8; n++)
            for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
        for (int kc = 0; kc < HS / 16; kc++)
            for (int np = 0; np < QK_COLS / 16; np++) {
                // x4: keys np*16 + 0..7 (k 0-7, 8-15), then keys np*16 + 8..15: two B fragments
                uint32_t b[4];
                mma_ldmatrix_x4(b, &kt[(np * 16 + (lane & 7) + (lane >> 4) * 8) * G::LD + kc * 16 + ((lane >> 3) & 1) * 8]);
                const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                mma_m16n8k16<T>(acc[2 * np], qf[kc], b0, acc[2 * np]);
                mma_m16n8k16<T>(acc[2 * np + 1], qf[kc], b1, acc[2 * np + 1]);
            }
        const int row = q0 + warp * 16 + g;
        for (int n = 0; n < QK_COLS / 8; n++) {
            const int key = j * QK_COLS + n * 8 + 2 * t;
            for (int i = 0; i < 4; i++) {
                const int r = row + (i >> 1) * 8, k = key + (i & 1);
                if (k < n_keys) S[(size_t)r * n_keys + k] = acc[n][i];
            }
        }
        __syncthreads();  // tile j's buffer is read by all warps before tile j+2 is copied into it
    }
}

template <class T, int HS>
void qk_tile_forward(float* S, const T* Q, const T* K, int n_query, int n_keys, cudaStream_t stream) {
    qk_tile_kernel<T, HS><<<n_query / QK_ROWS, QK_THREADS, 0, stream>>>(S, Q, K, n_keys);
}
