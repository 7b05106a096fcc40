// kernels/flash_bwd.cuh: the FlashAttention-2-style causal attention backward (FP16 and BF16, head
// sizes 32 and 64) through kernels/mma.cuh, the companion of kernels/flash_fwd.cuh. Same
// arguments, layouts and lse convention as kernels/attention.cuh's backward: attention.cuh includes
// this file and its attention_backward launches flash_backward wherever attention_uses_flash()
// (kernels/sizes.h) says so, the tiled backward (attention_backward_tiled) elsewhere.
// kernels/test_attention.cu checks it against the C engine's backward; dev/cuda/test_flash_bwd.cu
// against a double-precision reference with derived bounds, against the tiled backward, and for
// bit-identical repeats.
//
// Two kernels, both grid (ceil(T/64), NH, B), deterministic and without atomics: every output
// element is written once by one thread, from sums in a fixed order.
//
// flash_backward_dq_kernel (query-major, first; structured like flash_fwd.cuh's forward): a block of 2
// warps owns a 64-row query tile, each warp 32 of its rows (two 16-row MMA tiles, as the forward), their
// Q and dO fragments loaded once into registers; every K and V fragment read from shared memory
// serves both of a warp's 16-row tiles, half the ldmatrix bytes a FLOP of 16 rows a warp.
//   prologue: D = rowsum(dO o O) of the warp's rows (fp32: dO from the shared tile, O from global, the
//             4 lanes of a row a quarter of HS each), kept in registers and written to scratch
//             (B NH T floats) for the kv kernel; lse log2(e) of the rows (+inf past T: P = 0 there);
//   key tiles 0..i of 64 stream through two shared buffers by cp.async (tile j+1 in flight while the
//   warps compute on tile j). Per tile, in two halves of 32 keys (S and dP of a warp's 32 rows x 32
//   keys fit in registers beside its Q, dO and dQ):
//     S = Q K^T and dP = dO V^T (mma m16n8k16, fp32, K's and V's B fragments by ldmatrix);
//     P = 2^(S scale log2(e) - lse log2(e)) (ex2.approx), the causal mask on the diagonal tile only
//     (its 16-key chunks past a warp's rows skipped); dS = P (dP - D);
//     dQ += dS K: dS's accumulators packed (rounded to T) into A fragments as the forward packs P,
//     K's B fragments by ldmatrix .trans as the forward loads V.
//   At the end dQ scaled by 1/sqrt(HS), rounded to T and written once. 3 tile products a pair.
//   Why D here and not in the kv kernel: a query tile is one block of this kernel but n - i blocks of
//   the kv kernel; computing D once and handing it over (B NH T floats, 0.8 MB at d48, B = 8) reads O
//   once, where recomputing it in every kv block read O's tile n (n + 1) / 2 times a (b, h).
// flash_backward_kv_kernel (key-major, second; reads D): a block of 2 warps owns a 64-key tile, each
// warp 32 of its keys (two 16-key MMA tiles), their K fragments loaded once into registers; V stays
// in shared memory (K, dK and dV of 32 keys take 160 registers) and its A fragments are read once a
// pass. Query tiles i >= j (Q and dO) stream through two shared buffers by cp.async, double-buffered
// (the first of them held K until its fragments were loaded). Per query tile, in passes of
// FLASH_KV_QUERIES = 16 queries (S^T and dP^T of 32 keys x 16 queries in registers beside the rest;
// 32 spill on sm_90); every Q and dO fragment read serves both of a warp's key tiles:
//   S^T = K Q^T and dP^T = V dO^T;
//   P^T = 2^(S^T scale log2(e) - lse log2(e)), the mask on the diagonal tile only (there the 16-query
//   chunks wholly before a warp's keys are skipped); dS^T = P^T (dP^T - D);
//   dV += P^T dO and dK += dS^T Q: P^T and dS^T packed (rounded to T) into A fragments, dO's and Q's
//   B fragments by ldmatrix .trans; dK and dV stay in registers until one write at the end (dK
//   scaled by 1/sqrt(HS)). 4 tile products a pair.
// So 7 tile products a (key tile, query tile) pair, as attention.cuh's tiled backward, against
// FA2's 5 with an atomic fp32 dQ (not deterministic) or 5 with per-pair dQ partials (this file's
// previous version: deterministic, but n (n + 1) / 2 partials of 64 x HS fp32 a (b, h), 445 MB of
// scratch at d48, B = 8, written once and read once: DRAM-bound by the model). The dQ pass re-reads K
// and V and recomputes S and dP; its scratch is D alone, the tiled backward's size.
//
// Rows past T: Q, dO, K and V rows past T are zero-filled by the copies; lse of a query row past T is
// +inf, so its P is 2^-inf = 0, and its D is 0; key rows past T give dS K = 0 and are not written;
// nothing past T is written to dqkv or D.
//
// Shared memory, static (under the 48 KiB default), 4 tiles of 64 x (HS + 8) T each: dq kernel K, V
// x 2 buffers (Q and dO arrive in the second before the loop): 36864 bytes at HS = 64, 20480 at 32;
// kv kernel Q, dO x 2 buffers, the V tile and lse, D of a tile: 46592 bytes at HS = 64, 26112 at 32.
// ptxas (nvcc 13.0, -Xptxas -v; f16 and bf16 the same), with each diagonal tile peeled out of its
// main loop:
//   flash_backward_dq_kernel<HS=64>: sm_90 255 registers, 28 bytes spilled; sm_80 254, none.
//   <HS=32>: sm_90 177, none; sm_80 168, 4 bytes.
//   flash_backward_kv_kernel<HS=64>: sm_90 255 registers, 24 bytes spilled; sm_80 255, 40 bytes.
//   <HS=32>: 174 on both, none.
//   The spills on sm_90 are loop-invariant values (addresses, counts) stored before the loop and
//   reloaded once a tile: 1 local load a key tile in the dq kernel's loop, 6 a query tile in the kv
//   kernel's (sm_90 SASS, make sass-mix), against 678 and 844 instructions a tile.
// At HS = 64 both kernels' registers allow 4 blocks (8 warps) an SM: the dq kernel's Q, dO fragments
// 64, dQ 64, S and dP of half a tile 64; the kv kernel's K fragments 32, dK and dV 128, S^T and dP^T
// of a pass 32, V's fragments of a pass 8. Shared memory allows 6 and 4 blocks on sm_90 (36 and 45.5
// KiB), 4 and 3 on sm_80.
// Predicted, not measured: the kernel report's model (dev/kernel_report.py; `make kernel-report`,
// docs/kernel_report_fp16.md) at d48, B = 8, T = 1024, FP16, on an A100 (an H100 runs the wgmma twins,
// kernels/flash_wgmma.cuh): the kv kernel 14.2 ms a step, the dq kernel 12.1 ms, each bound by the sum
// of its tensor, special-function and instruction-issue time. A GPU measurement decides.
#pragma once

#include <math.h>

#include "flash_fwd.cuh"
#include "sizes.h"

static_assert(FLASH_ROWS == ATTENTION_FLASH_TILE && FLASH_COLS == ATTENTION_FLASH_TILE,
              "kernels/sizes.h names the flash kernels' tile ATTENTION_FLASH_TILE");

__device__ __forceinline__ float flashb_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float flashb_f(__nv_bfloat16 x) { return __bfloat162float(x); }

// rowsum(dO o O) of one query row, in fp32: each of the 4 lanes of the row takes a quarter of HS,
// HS / 32 16-byte vectors of O (global, o4[0..]) and of dO (shared, starting at d, VSTEP elements
// apart: the dq kernels' tile layouts differ), and two shuffles add the quarters (every lane of the
// 4 gets the sum). Before any branch on the row, so the warp is converged at the shuffles.
template <class T, int HS, int VSTEP>
__device__ __forceinline__ float flash_row_dot(const uint4* o4, const T* d) {
    static_assert(HS % 32 == 0, "a lane's quarter of a row: whole 16-byte vectors");
    float acc = 0.0f;
#pragma unroll
    for (int c = 0; c < HS / 32; c++) {
        const uint4 ov = o4[c], dv = *reinterpret_cast<const uint4*>(d + c * VSTEP);
        T oe[8], de[8];  // the vectors' bytes as elements: memcpy is defined (T is a class type to g++)
        memcpy((void*)oe, &ov, sizeof(ov));
        memcpy((void*)de, &dv, sizeof(dv));
#pragma unroll
        for (int e = 0; e < 8; e++) acc += flashb_f(de[e]) * flashb_f(oe[e]);
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
    acc += __shfl_xor_sync(0xffffffffu, acc, 2);
    return acc;
}

// The kv kernels' per-tile statistics: thread i < 64 of the block puts query q0 + i's lse in base 2
// and its D (lse_bh, D_bh: the (b, h) row of each) into sL[i], sD[i]; +inf and 0 past T, so P = 0 there.
__device__ __forceinline__ void flash_tile_stats(float* sL, float* sD, const float* lse_bh, const float* D_bh, int q0,
                                                 int seq) {
    const int i = threadIdx.x, q = q0 + i;
    if (i >= FLASH_ROWS) return;
    sL[i] = q < seq ? lse_bh[q] * FLASH_LOG2E : INFINITY;
    sD[i] = q < seq ? D_bh[q] : 0.0f;
}

// One key tile of the dQ kernel for a warp's MI 16-row tiles (Q and dO fragments qf, of; base-2 lse
// L; D): S and dP, P and dS, dQ += dS K. DIAG (the diagonal tile, the block's last) masks keys past
// each row and skips the 16-key chunks past the warp's last row; every other tile runs without a mask
// or a skip, so the main loop holds no mask code.
template <class T, int HS, bool DIAG>
__device__ __forceinline__ void flash_dq_tile(float (&dq)[FLASH_MI][HS / 8][4], const uint32_t (&qf)[FLASH_MI][HS / 16][4],
                                              const uint32_t (&of)[FLASH_MI][HS / 16][4], const float (&L)[FLASH_MI][2],
                                              const float (&D)[FLASH_MI][2], const T* kt, const T* vt, float sl2,
                                              int warp, int lane) {
    typedef FlashGeom<HS> G;
    constexpr int MI = FLASH_MI, WR = FLASH_WARP_ROWS;  // 16-row tiles a warp, its rows
    constexpr int HALF = FLASH_COLS / 2;                 // keys a pass over a tile takes (S, dP in registers)
    const int g = lane >> 2, t = lane & 3;
    // On the diagonal, this warp's rows (warp*32 ..+31) see no key past warp*32+31: 16-key chunks
    // beyond it are skipped (the first 16-row tile's rows see one chunk less; the mask zeroes it).
    const int chunks = DIAG ? MI * (warp + 1) : FLASH_COLS / 16;

    // The tile in two halves of 32 keys, so that S and dP of both 16-row tiles fit in registers
#pragma unroll
    for (int hf = 0; hf < FLASH_COLS / HALF; hf++) {
        if (DIAG && hf * (HALF / 16) >= chunks) continue;
        float s[MI][HALF / 8][4], dp[MI][HALF / 8][4];  // S = Q K^T, dP = dO V^T: 16 rows x 32 keys a tile
        flash_zero(s);
        flash_zero(dp);
#pragma unroll
        for (int np = 0; np < HALF / 16; np++) {
            const int chunk = hf * (HALF / 16) + np;
            if (DIAG && chunk >= chunks) continue;
#pragma unroll
            for (int kc = 0; kc < HS / 16; kc++) {
                // x4: keys chunk*16 + 0..7 (head columns kc*16 + 0-7, 8-15), then keys + 8..15; each
                // read serves both 16-row tiles
                const int off = (chunk * 16 + (lane & 7) + (lane >> 4) * 8) * G::LD + kc * 16 + ((lane >> 3) & 1) * 8;
                uint32_t bk[4], bv[4];
                mma_ldmatrix_x4(bk, &kt[off]);
                mma_ldmatrix_x4(bv, &vt[off]);
                const uint32_t k0f[2] = {bk[0], bk[1]}, k1f[2] = {bk[2], bk[3]};
                const uint32_t v0f[2] = {bv[0], bv[1]}, v1f[2] = {bv[2], bv[3]};
#pragma unroll
                for (int mi = 0; mi < MI; mi++) {
                    mma_m16n8k16<T>(s[mi][2 * np], qf[mi][kc], k0f, s[mi][2 * np]);
                    mma_m16n8k16<T>(s[mi][2 * np + 1], qf[mi][kc], k1f, s[mi][2 * np + 1]);
                    mma_m16n8k16<T>(dp[mi][2 * np], of[mi][kc], v0f, dp[mi][2 * np]);
                    mma_m16n8k16<T>(dp[mi][2 * np + 1], of[mi][kc], v1f, dp[mi][2 * np + 1]);
                }
            }
        }
        // P = 2^(S sl2 - L), masked on the diagonal; dS = P (dP - D), kept in dp
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int n = 0; n < HALF / 8; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float x = fmaf(s[mi][n][i], sl2, -L[mi][i >> 1]);
                    if (DIAG) {  // row and key within the tiles
                        const int row = warp * WR + mi * 16 + g + (i >> 1) * 8, key = hf * HALF + n * 8 + 2 * t + (i & 1);
                        if (key > row) x = -INFINITY;
                    }
                    dp[mi][n][i] = mma_ex2(x) * (dp[mi][n][i] - D[mi][i >> 1]);
                }
        // dQ += dS K, 16 keys at a time: dS's two accumulators of those keys are an A fragment
        // (rounded to T), and ldmatrix x4 .trans of K's rows gives the B fragments of two 8-column
        // slices of HS, read once for both 16-row tiles
#pragma unroll
        for (int kc = 0; kc < HALF / 16; kc++) {
            const int chunk = hf * (HALF / 16) + kc;
            if (DIAG && chunk >= chunks) continue;
            flash_mma_tile_trans<T, HS, G::LD>(dq, dp, kc, kt, chunk * 16, lane);
        }
    }
}

// dQ of one 64-row query tile, and D = rowsum(dO o O) of its rows into Dsum (B,NH,T fp32) for
// flash_backward_kv_kernel. Grid (ceil(T/64), NH, B) of FLASH_DQ_THREADS (2 warps, 32 rows each).
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_DQ_THREADS)
    flash_backward_dq_kernel(T* dqkv, float* Dsum, const T* dout, const T* qkv, const T* out, const float* lse,
                             int seq, int NH) {
    typedef FlashGeom<HS> G;
    constexpr int MI = FLASH_MI, WR = FLASH_WARP_ROWS;  // 16-row tiles a warp, its rows
    // Q and dO arrive in the second K/V buffer, are loaded into registers, and give the buffer up
    // before tile 1 is copied into it: 4 tiles of shared memory, not 6.
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
    const float scale = 1.0f / sqrtf((float)HS);
    const float sl2 = scale * FLASH_LOG2E;

    flash_load_rows<T, HS, FLASH_DQ_THREADS, FLASH_ROWS>(sK[1], qkv_bh + (size_t)q0 * C3, C3, seq - q0);
    flash_load_rows<T, HS, FLASH_DQ_THREADS, FLASH_ROWS>(sV[1], dout + ((size_t)b * seq + q0) * C + (size_t)h * HS, C,
                                             seq - q0);
    flash_load_rows<T, HS, FLASH_DQ_THREADS, FLASH_COLS>(sK[0], qkv_bh + C, C3, seq);
    flash_load_rows<T, HS, FLASH_DQ_THREADS, FLASH_COLS>(sV[0], qkv_bh + 2 * C, C3, seq);
    mma_cp_async_commit();  // group: Q, dO and key tile 0
    // lse of this lane's rows (g and g+8 of each 16-row tile), in base 2; +inf past T makes P = 0 there
    float L[MI][2], D[MI][2];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int q = q0 + warp * WR + mi * 16 + g + r * 8;
            L[mi][r] = q < seq ? lse[((size_t)b * NH + h) * seq + q] * FLASH_LOG2E : INFINITY;
        }
    mma_cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[MI][HS / 16][4], of[MI][HS / 16][4];  // this warp's rows of Q and dO as A fragments
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            const int off = (warp * WR + mi * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8;
            mma_ldmatrix_x4(qf[mi][kc], &sK[1][off]);
            mma_ldmatrix_x4(of[mi][kc], &sV[1][off]);
        }
    // D of rows g and g+8 of each tile: the 4 lanes of a row take a quarter of HS each (dO from shared
    // memory, O from global, 16-byte vectors of 8), summed by two shuffles. Written once, for the kv
    // kernel. A row past T reads O's last row: its dO row is zeros (the copy's fill), so D is 0, with
    // no branch before the shuffles.
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = warp * WR + mi * 16 + g + r * 8, q = q0 + row;
            const uint4* o4 = reinterpret_cast<const uint4*>(out + ((size_t)b * seq + min(q, seq - 1)) * C +
                                                             (size_t)h * HS + t * (HS / 4));
            D[mi][r] = flash_row_dot<T, HS, 8>(o4, &sV[1][row * G::LD + t * (HS / 4)]);
        }
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int q = q0 + warp * WR + mi * 16 + g + r * 8;
            if (t == 0 && q < seq) Dsum[((size_t)b * NH + h) * seq + q] = D[mi][r];
        }
    __syncthreads();  // every warp has its Q and dO fragments and D: tile 1 may overwrite the buffers

    float dq[MI][HS / 8][4];  // dQ: 16 rows x HS a tile, one accumulator per 8 columns
    flash_zero(dq);

    // Key tiles 0..q_tile-1, wholly visible, then the diagonal q_tile: every thread's cp.async of tile
    // j+1 is in flight while the warps compute on tile j.
    const T* kv1 = qkv_bh + C;  // key tile j+1's first K row (its V row C further)
    for (int j = 0; j < q_tile; j++) {
        kv1 += FLASH_COLS * C3;  // prefetch into the buffers the barrier ending j-1 freed
        const int left = seq - (j + 1) * FLASH_COLS;
        flash_load_rows<T, HS, FLASH_DQ_THREADS, FLASH_COLS>(sK[(j + 1) & 1], kv1, C3, left);
        flash_load_rows<T, HS, FLASH_DQ_THREADS, FLASH_COLS>(sV[(j + 1) & 1], kv1 + C, C3, left);
        mma_cp_async_commit();
        mma_cp_async_wait<1>();  // tile j's group done, j+1's still in flight
        __syncthreads();         // every thread's copies of tile j have landed
        flash_dq_tile<T, HS, false>(dq, qf, of, L, D, sK[j & 1], sV[j & 1], sl2, warp, lane);
        __syncthreads();  // all warps are done with tile j's buffers before tile j+2 is copied in
    }
    mma_cp_async_wait<0>();
    __syncthreads();
    flash_dq_tile<T, HS, true>(dq, qf, of, L, D, sK[q_tile & 1], sV[q_tile & 1], sl2, warp, lane);

#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int q = q0 + warp * WR + mi * 16 + g + r * 8;
            if (q >= seq) continue;
            T* qrow = dqkv + ((size_t)b * seq + q) * C3 + (size_t)h * HS;
#pragma unroll
            for (int d = 0; d < HS / 8; d++)
                flash_store2<T>(qrow + d * 8 + 2 * t, dq[mi][d][0 + 2 * r] * scale, dq[mi][d][1 + 2 * r] * scale);
        }
}

// One query tile of the dK/dV kernel for a warp's MI 16-key tiles (K fragments kf, V's tile sV; the
// tile's Q and dO in sq, so, its base-2 lse and D in sL, sD): S^T and dP^T, P^T and dS^T, dV += P^T
// dO and dK += dS^T Q. DIAG (the diagonal tile, the block's first) masks queries before each key and
// skips the 16-query chunks wholly before the warp's first key; every other tile runs without a mask
// or a skip, so the main loop holds no mask code.
template <class T, int HS, bool DIAG>
__device__ __forceinline__ void flash_kv_tile(float (&dk)[FLASH_MI][HS / 8][4], float (&dv)[FLASH_MI][HS / 8][4],
                                              const uint32_t (&kf)[FLASH_MI][HS / 16][4], const T* sV, const T* sq,
                                              const T* so, const float* sL, const float* sD, float sl2, int warp,
                                              int lane) {
    typedef FlashGeom<HS> G;
    constexpr int MI = FLASH_MI, WK = FLASH_WARP_ROWS;  // 16-key tiles a warp, its keys
    constexpr int QC = FLASH_KV_QUERIES;                // queries a pass over a query tile takes
    const int g = lane >> 2, t = lane & 3;
    // on the diagonal, queries before this warp's first key (16-query chunks < 2 warp) are all masked
    const int first = DIAG ? MI * warp : 0;

#pragma unroll
    for (int pass = 0; pass < FLASH_ROWS / QC; pass++) {
        if (DIAG && (pass + 1) * (QC / 16) <= first) continue;
        float s[MI][QC / 8][4], dp[MI][QC / 8][4];  // S^T, dP^T: 16 keys x QC queries a key tile
        flash_zero(s);
        flash_zero(dp);
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++) {
            uint32_t vf[MI][4];  // V's A fragments of this warp's keys, head columns kc*16..+15
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
                mma_ldmatrix_x4(vf[mi], &sV[(warp * WK + mi * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8]);
#pragma unroll
            for (int np = 0; np < QC / 16; np++) {
                const int chunk = pass * (QC / 16) + np;
                if (DIAG && chunk < first) continue;
                // x4: queries chunk*16 + 0..7 (head columns kc*16 + 0-7, 8-15), then + 8..15; each
                // read serves both of the warp's key tiles
                const int off = (chunk * 16 + (lane & 7) + (lane >> 4) * 8) * G::LD + kc * 16 + ((lane >> 3) & 1) * 8;
                uint32_t bq[4], bo[4];
                mma_ldmatrix_x4(bq, &sq[off]);
                mma_ldmatrix_x4(bo, &so[off]);
                const uint32_t q0f[2] = {bq[0], bq[1]}, q1f[2] = {bq[2], bq[3]};
                const uint32_t o0f[2] = {bo[0], bo[1]}, o1f[2] = {bo[2], bo[3]};
#pragma unroll
                for (int mi = 0; mi < MI; mi++) {
                    mma_m16n8k16<T>(s[mi][2 * np], kf[mi][kc], q0f, s[mi][2 * np]);
                    mma_m16n8k16<T>(s[mi][2 * np + 1], kf[mi][kc], q1f, s[mi][2 * np + 1]);
                    mma_m16n8k16<T>(dp[mi][2 * np], vf[mi], o0f, dp[mi][2 * np]);
                    mma_m16n8k16<T>(dp[mi][2 * np + 1], vf[mi], o1f, dp[mi][2 * np + 1]);
                }
            }
        }
        // P^T = 2^(S^T sl2 - L), masked on the diagonal; dS^T = P^T (dP^T - D). P in s, dS in dp.
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int n = 0; n < QC / 8; n++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int q = pass * QC + n * 8 + 2 * t + (i & 1);  // the query within the tile
                    float x = fmaf(s[mi][n][i], sl2, -sL[q]);
                    if (DIAG) {  // the key within the tile
                        const int key = warp * WK + mi * 16 + g + (i >> 1) * 8;
                        if (key > q) x = -INFINITY;
                    }
                    const float p = mma_ex2(x);
                    s[mi][n][i] = p;
                    dp[mi][n][i] = p * (dp[mi][n][i] - sD[q]);
                }
        // dV += P^T dO, dK += dS^T Q, 16 queries at a time; each dO and Q fragment read serves both
        // key tiles
#pragma unroll
        for (int kc = 0; kc < QC / 16; kc++) {
            const int chunk = pass * (QC / 16) + kc;
            if (DIAG && chunk < first) continue;
            uint32_t pa[MI][4], da[MI][4];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                mma_pack_a<T>(pa[mi], s[mi][2 * kc], s[mi][2 * kc + 1]);
                mma_pack_a<T>(da[mi], dp[mi][2 * kc], dp[mi][2 * kc + 1]);
            }
#pragma unroll
            for (int dc = 0; dc < HS / 16; dc++) {
                const int off = (chunk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * G::LD + dc * 16 + (lane >> 4) * 8;
                uint32_t bo[4], bq[4];
                mma_ldmatrix_x4_trans(bo, &so[off]);
                mma_ldmatrix_x4_trans(bq, &sq[off]);
                const uint32_t o0f[2] = {bo[0], bo[1]}, o1f[2] = {bo[2], bo[3]};
                const uint32_t q0f[2] = {bq[0], bq[1]}, q1f[2] = {bq[2], bq[3]};
#pragma unroll
                for (int mi = 0; mi < MI; mi++) {
                    mma_m16n8k16<T>(dv[mi][2 * dc], pa[mi], o0f, dv[mi][2 * dc]);
                    mma_m16n8k16<T>(dv[mi][2 * dc + 1], pa[mi], o1f, dv[mi][2 * dc + 1]);
                    mma_m16n8k16<T>(dk[mi][2 * dc], da[mi], q0f, dk[mi][2 * dc]);
                    mma_m16n8k16<T>(dk[mi][2 * dc + 1], da[mi], q1f, dk[mi][2 * dc + 1]);
                }
            }
        }
    }
}

// dK, dV of the block's 64 keys into dqkv, from D (Dsum, written by flash_backward_dq_kernel).
// Grid (ceil(T/64), NH, B) of FLASH_KV_THREADS (2 warps, 32 keys each).
template <class T, int HS>
__global__ void __launch_bounds__(FLASH_KV_THREADS)
    flash_backward_kv_kernel(T* dqkv, const float* Dsum, const T* dout, const T* qkv, const float* lse, int seq,
                             int NH) {
    typedef FlashGeom<HS> G;
    constexpr int MI = FLASH_MI, WK = FLASH_WARP_ROWS;  // 16-key tiles a warp, its keys
    // Two Q/dO buffers, and the block's V tile, which stays: a warp's K, dK and dV for 32 keys fill
    // 160 registers, so V's A fragments are read from shared memory once a pass (FLASH_KV_QUERIES).
    __shared__ __align__(16) T sQ[2][FLASH_ROWS * G::LD];
    __shared__ __align__(16) T sdO[2][FLASH_ROWS * G::LD];
    __shared__ __align__(16) T sV[FLASH_COLS * G::LD];
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

    // K into buffer 1 (into registers, then the buffer is free), V into its own tile
    flash_load_rows<T, HS, FLASH_KV_THREADS, FLASH_COLS>(sQ[1], qkv_bh + (size_t)k0 * C3 + C, C3, seq - k0);
    flash_load_rows<T, HS, FLASH_KV_THREADS, FLASH_COLS>(sV, qkv_bh + (size_t)k0 * C3 + 2 * C, C3, seq - k0);
    mma_cp_async_commit();
    mma_cp_async_wait<0>();
    __syncthreads();
    uint32_t kf[MI][HS / 16][4];  // this warp's keys of K as A fragments
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
            mma_ldmatrix_x4(kf[mi][kc], &sQ[1][(warp * WK + mi * 16 + (lane & 15)) * G::LD + kc * 16 + (lane >> 4) * 8]);
    __syncthreads();  // every warp has its K fragments: buffer 1 is free
    float dk[MI][HS / 8][4], dv[MI][HS / 8][4];
    flash_zero(dk);
    flash_zero(dv);

    const T* dout_bh = dout + (size_t)b * seq * C + (size_t)h * HS;
    const float *lse_bh = lse + ((size_t)b * NH + h) * seq, *D_bh = Dsum + ((size_t)b * NH + h) * seq;
    {  // the first query tile (the diagonal one) into buffer 0
        const int q0 = k_tile * FLASH_ROWS;
        flash_load_rows<T, HS, FLASH_KV_THREADS, FLASH_ROWS>(sQ[0], qkv_bh + (size_t)q0 * C3, C3, seq - q0);
        flash_load_rows<T, HS, FLASH_KV_THREADS, FLASH_ROWS>(sdO[0], dout_bh + (size_t)q0 * C, C, seq - q0);
        mma_cp_async_commit();
    }
    // Query tile qt's Q and dO landed in buffer (qt - k_tile) & 1, its lse and D in sL, sD, with tile
    // qt+1's copies in flight into the other buffer (freed by the barrier ending qt-1).
    auto tile_ready = [&](int qt) {
        const int q0 = qt * FLASH_ROWS, buf = (qt - k_tile) & 1;
        if (qt + 1 < n_tiles) {  // prefetch query tile qt+1 into the buffer the barrier ending qt-1 freed
            const int q1 = q0 + FLASH_ROWS;
            flash_load_rows<T, HS, FLASH_KV_THREADS, FLASH_ROWS>(sQ[buf ^ 1], qkv_bh + (size_t)q1 * C3, C3, seq - q1);
            flash_load_rows<T, HS, FLASH_KV_THREADS, FLASH_ROWS>(sdO[buf ^ 1], dout_bh + (size_t)q1 * C, C, seq - q1);
            mma_cp_async_commit();
        }
        static_assert(FLASH_ROWS == FLASH_KV_THREADS, "a thread a query row");
        flash_tile_stats(sL, sD, lse_bh, D_bh, q0, seq);
        if (qt + 1 < n_tiles) mma_cp_async_wait<1>();  // tile qt's group done, qt+1's in flight
        else mma_cp_async_wait<0>();
        __syncthreads();
    };
    // The diagonal tile k_tile, then the wholly visible ones after it.
    tile_ready(k_tile);
    flash_kv_tile<T, HS, true>(dk, dv, kf, sV, sQ[0], sdO[0], sL, sD, sl2, warp, lane);
    __syncthreads();  // Q, dO, lse and D of this tile are about to be replaced
    for (int qt = k_tile + 1; qt < n_tiles; qt++) {
        tile_ready(qt);
        const int buf = (qt - k_tile) & 1;
        flash_kv_tile<T, HS, false>(dk, dv, kf, sV, sQ[buf], sdO[buf], sL, sD, sl2, warp, lane);
        __syncthreads();
    }

#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int key = k0 + warp * WK + mi * 16 + g + r * 8;
            if (key >= seq) continue;
            T* krow = dqkv + ((size_t)b * seq + key) * C3 + C + (size_t)h * HS;
#pragma unroll
            for (int d = 0; d < HS / 8; d++) {
                flash_store2<T>(krow + d * 8 + 2 * t, dk[mi][d][2 * r] * scale, dk[mi][d][2 * r + 1] * scale);
                flash_store2<T>(krow + C + d * 8 + 2 * t, dv[mi][d][2 * r], dv[mi][d][2 * r + 1]);
            }
        }
}

// dqkv (B,T,3C) OVERWRITTEN with dq, dk, dv, from dout (B,T,C), qkv (B,T,3C), the forward's out
// (B,T,C) and lse (B,NH,T fp32), C = NH*HS a multiple of 8; scratch: flash_backward_scratch_floats
// (kernels/sizes.h: B NH T) fp32, OVERWRITTEN with D. Launches flash_backward_dq_kernel (it writes
// D) then flash_backward_kv_kernel (it reads D), grid (ceil(T/64), NH, B), 64 threads each, static
// shared memory only (36 and 45.5 KiB at HS = 64: under the 48 KiB default, no cudaFuncSetAttribute).
template <class T, int HS>
void flash_backward(T* dqkv, float* scratch, const T* dout, const T* qkv, const T* out, const float* lse, int B,
                    int seq, int NH, cudaStream_t stream) {
    if (B <= 0 || seq <= 0 || NH <= 0) return;
    dim3 grid((seq + FLASH_ROWS - 1) / FLASH_ROWS, NH, B);
    flash_backward_dq_kernel<T, HS><<<grid, FLASH_DQ_THREADS, 0, stream>>>(dqkv, scratch, dout, qkv, out, lse, seq, NH);
    flash_backward_kv_kernel<T, HS><<<grid, FLASH_KV_THREADS, 0, stream>>>(dqkv, scratch, dout, qkv, lse, seq, NH);
}
