// kernels/attention.cuh: causal self-attention, flash style: forward (out and the row logsumexp)
// and backward (dq, dk, dv). The T x T score matrix is never written to memory: the forward keeps
// only out and lse, the backward recomputes the probabilities tile by tile from lse.
//   attention_forward:  reads qkv (B,T,3C floatX); OVERWRITES out (B,T,C floatX) and
//                       lse (B,NH,T fp32, natural log).
//   attention_backward: reads dout (B,T,C floatX), qkv, out and lse of the forward; OVERWRITES
//                       dqkv (B,T,3C floatX) and scratch (attention_backward_scratch_floats fp32).
// Which kernels run (attention_uses_flash(), kernels/sizes.h): in the FP16 and BF16 builds at head
// sizes 32 and 64 (every GPT-2 size has 64), the FlashAttention-2-style kernels of
// kernels/flash_fwd.cuh (forward) and kernels/flash_bwd.cuh (backward: a query-major dQ kernel that
// also writes D, then a key-major dK/dV kernel, 7 tile products per tile pair, no atomics), on an H100
// or H200 (compute 9.0 running sm_90a code: flash_wgmma_available()) their twins on wgmma,
// kernels/flash_wgmma.cuh; everywhere else (the FP32 build, other head sizes) the tiled WMMA kernels
// of this file. Why, below under "Which forward runs" and "Which backward runs".
// Reference: attention_forward_cpu / attention_backward_cpu (reference/ops_cpu.h), which keep the
// (B,NH,T,T) probabilities; the reference backward accumulates into dinp, this one overwrites.
//
// Layout: qkv is GPT-2's fused qkv matmul output: row (b,t) holds q in columns [0,C), k in [C,2C),
// v in [2C,3C), C = NH*HS, head h at columns h*HS..h*HS+HS-1 of each third; dqkv likewise, out and
// dout are (B,T,C) with head h at columns h*HS. scale = 1/sqrt(HS); causal: query t sees keys <= t.
// HS: any multiple of 16 up to ATT_MAX_HS (128); 64 (every GPT-2 size) is the tuned case. T >= 1,
// any B, NH. Rows move as 16-byte vectors: every pointer 16-byte aligned (cudaMalloc's are).
//
// Design (FlashAttention-2 style, deterministic):
// - Every kernel runs ATT_WARPS = 4 warps; each warp owns 16 rows of the block's 64-row tile and
//   streams 64-wide tiles of the other side through shared memory. Products are 16x16x16 tiles:
//   WMMA (tensor cores, floatX in, fp32 accumulate) in the FP16/BF16 builds; in the FP32 build the
//   same helpers (att_load_*, att_mma, att_store) are plain fp32 FMAs on shared memory (WMMA has
//   no fp32 inputs). Everything else is shared by the two builds.
// - Position-dependent work (causal mask, row max and sum, exp, dS) needs the (row, col) of each
//   element, which WMMA fragments do not give: S and dP tiles go to per-warp fp32 shared memory
//   (store_matrix_sync), four lanes per row do the softmax, and P or dS go back as floatX tiles
//   that load as the A operand of the next product. The forward's running rescale of the output
//   (O *= exp(m_old - m_new) per row) stays in registers: a 16x16 tile whose row r is all
//   alpha_r loads into an accumulator fragment, and same-type fragments share their element
//   mapping, so an element-wise product of the two scales the rows.
// - Which forward runs: attention_forward launches kernels/flash_fwd.cuh's FlashAttention-2-style
//   forward (mma.sync with the PTX fragment layouts: S, P and the softmax in registers, K/V tiles
//   double-buffered by cp.async, the mask on diagonal tiles only) in the FP16 and BF16 builds at head
//   sizes 32 and 64 (every GPT-2 size has 64), and the tiled WMMA forward below (attention_forward_tiled)
//   everywhere else: the FP32 build, since mma.sync has no fp32 inputs (the FP32 build is held to 1e-5
//   of the C engine, which TF32 products would not meet); other head sizes, since flash_fwd.cuh's Q and
//   double-buffered K/V tiles fit the 48 KiB of static shared memory only up to HS = 64, and 32 and 64
//   are the sizes its tests cover. Both forwards write the same out and lse up to rounding (the same
//   rounding points, the same natural-log lse), which either backward reads. On compute 9.0 with
//   sm_90a code the flash forward and backward run on wgmma (kernels/flash_wgmma.cuh: the same
//   algorithm and rounding points, one warpgroup a block), which Hopper runs at about 96% of its
//   tensor peak where mma.sync reaches about 65%; wgmma exists on no other architecture.
// - Which backward runs: attention_backward launches kernels/flash_bwd.cuh's flash_backward where the
//   flash forward runs (the same predicate, for the same reasons: mma.sync has no fp32 inputs, and its
//   K, V, Q and dO tiles fit 48 KiB of static shared memory up to HS = 64), and the tiled backward
//   below (attention_backward_tiled) elsewhere. Both do 7 tile products per tile pair and keep the
//   same scratch, D = rowsum(dout * out), B NH T floats (the flash one computes D in its dQ kernel:
//   no rowdot kernel); the flash one keeps S, dP, P and dS in registers (no fp32 round trip through
//   shared memory) and streams its tiles by cp.async, double-buffered. Both are deterministic (every
//   output written once from sums in a fixed order, no float atomics), so two runs give identical
//   weights. Predicted, not measured (docs/kernel_report_fp16.md, the kernel report's model), at d48,
//   B = 8: the flash backward 12.5 ms a step on an H100 (its wgmma twins: kv 6.9 + dq 5.6), 26.3 ms
//   on an A100 (kv 14.2 + dq 12.1); a GPU measurement decides.
// - Tiled forward (attention_forward_kernel): block = 64 query rows of one (b, h), grid (T/64, NH, B),
//   last query tiles first (they have the most keys). Q stays in fragments; per key tile
//   S = Q K^T, online softmax in fp32 (base 2: exp2 of s*scale*log2 e), O = O*alpha + P V with P
//   rounded to floatX; at the end out = O / l and lse = (m + log2 l) ln 2.
// - Tiled backward: (1) attention_backward_rowdot_kernel: D = rowsum(dout * out) (fp32, scratch).
//   (2) attention_backward_dkdv_kernel: block = 64 keys, loops over the query tiles at or after
//   them: S^T = K Q^T, dP^T = V dO^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D),
//   dV += P^T dO, dK += dS^T Q, all in registers until one write. (3) attention_backward_dq_kernel:
//   block = 64 queries, loops over key tiles: S, dP, dS again, dQ += dS K. No atomics: dQ is summed
//   by the block that owns its rows in a fixed order, so results are bit-identical run to run. The
//   price is recomputing S and dP in the dQ kernel (7 tile products per tile pair instead of FA2's
//   5 with atomicAdd into dQ).
// - Causal skipping: key tiles past a query tile's last row are never loaded; inside the diagonal
//   tile each warp skips the 16-wide subtiles that are entirely masked for its 16 rows (and rows
//   past T). Rows past T load as zeros and are never stored.
// - Shared memory (HS = 64, fp16): forward 53 KiB (Q, K, V tiles + per-warp S fp32 and P floatX),
//   dk/dv 88.5 KiB, dq 79.5 KiB; each launch first raises its kernel's dynamic shared memory
//   limit (cudaFuncSetAttribute, a host-side call of about a microsecond), since these exceed the
//   default 48 KiB.
//
// Performance (H100, T=1024, HS=64, fp16; not measurable on the CPU runtime, so estimates): the
// products run on tensor cores through WMMA (mma.sync class, not Hopper's wgmma), but every S/dP
// tile makes a round trip through shared memory and tile loads are synchronous (4 blocks = 16
// warps per SM hide latency in the forward, 2 blocks = 8 warps in the backward). Expect roughly
// 40-60% of FlashAttention-2 (about 100-140 TFLOP/s forward; less in backward, which also pays the
// dQ recompute). Registers (ptxas, fp16, HS = 64): forward 98, dk/dv 142, dq 108, no spills.
// What would make it faster, in order: cp.async (or TMA) double-buffering of the K/V (Q/dO) tiles
// so loads overlap the math; raw mma.sync PTX with its documented fragment layout so S, P and the
// softmax stay in registers (no shared-memory round trip, no alpha tile); 128-row query tiles with
// 8 warps to halve K/V traffic (ATT_WARPS = 8 passes the tests as is in BF16; FP32 would need
// ATT_MAX_HS = 112 to fit); wgmma with warp specialisation on Hopper; at HS = 128, re-reading the
// K/V operands of dk/dv from shared memory rather than holding them in registers (254 there).
//
// Precision: products in fp32 from floatX inputs; softmax statistics, lse, D in fp32; P and dS are
// rounded to floatX once before the products that use them; each output rounds once to floatX.
#pragma once

#include "common.cuh"
#include "flash_bwd.cuh"
#include "flash_fwd.cuh"
#include "flash_wgmma.cuh"
#include "sizes.h"
#if !defined(ENABLE_FP32)
#include <mma.h>
#endif

constexpr int ATT_WARPS = 4;
constexpr int ATT_THREADS = 32 * ATT_WARPS;
constexpr int ATT_ROWS = 16 * ATT_WARPS;  // rows a block owns: queries (forward, dq) or keys (dk/dv)
constexpr int ATT_COLS = 64;              // width of the tiles it streams: keys (forward, dq) or queries (dk/dv)
constexpr int ATT_MAX_HS = 128;           // largest head size instantiated (the fp32 dk/dv kernel's shared memory bounds it)
#define ATT_LOG2E 1.4426950408889634f
#define ATT_LN2 0.6931471805599453f

// Shared-memory geometry for head size HS. Row strides carry one 16-byte vector of padding so that
// consecutive rows start in different banks; every region and every 16-row / 16-column sub-tile
// stays 32-byte aligned, as WMMA loads and stores require.
template <int HS>
struct AttGeom {
    static_assert(HS % 16 == 0 && HS >= 16 && HS <= ATT_MAX_HS, "head size: a multiple of 16, at most ATT_MAX_HS");
    static constexpr int KD = HS / 16;                    // 16-wide chunks of a head
    static constexpr int VEC = 16 / (int)sizeof(floatX);  // floatX per 16-byte vector
    static constexpr int LDX = HS + VEC;                  // row stride of a Q/K/V/dO tile (floatX)
    static constexpr int LDS = ATT_COLS + 4;              // row stride of a per-warp fp32 tile (S, dP, staging)
    static constexpr int LDP = ATT_COLS + VEC;            // row stride of a per-warp floatX tile (P, dS)
    static constexpr size_t ROW_TILE = (size_t)ATT_ROWS * LDX * sizeof(floatX);
    static constexpr size_t COL_TILE = (size_t)ATT_COLS * LDX * sizeof(floatX);
    static constexpr size_t S_WARP = (size_t)16 * LDS * sizeof(float);
    static constexpr size_t P_WARP = (size_t)16 * LDP * sizeof(floatX);
    // forward: Q | K V | S per warp | P per warp
    static constexpr size_t fwd_smem = ROW_TILE + 2 * COL_TILE + ATT_WARPS * (S_WARP + P_WARP);
    // dk/dv: K V | Q dO | lse D (per query) | S dP per warp | P dS per warp (ATT_BWD_SMEM carves both)
    static constexpr size_t dkdv_smem =
        2 * ROW_TILE + 2 * COL_TILE + 2 * ATT_COLS * sizeof(float) + ATT_WARPS * (2 * S_WARP + 2 * P_WARP);
    // dq: Q dO | K V | lse D (per query) | S dP per warp | dS per warp
    static constexpr size_t dq_smem =
        2 * ROW_TILE + 2 * COL_TILE + 2 * ATT_ROWS * sizeof(float) + ATT_WARPS * (2 * S_WARP + P_WARP);
    static_assert(fwd_smem <= 227 * 1024 && dkdv_smem <= 227 * 1024 && dq_smem <= 227 * 1024,
                  "a kernel needs more than the 227 KiB of shared memory a block can have (H100)");
};

// ---- 16x16x16 tile products: the only code that differs between the builds ----
// att_frag_a: A operand (16x16, row-major in shared memory). att_frag_b_row / _col: B operand
// stored row-major (B[k][n] = p[k*ld + n]) or column-major (B[k][n] = p[n*ld + k], i.e. the
// transpose of a row-major tile: K^T from K). att_frag_acc: 16x16 fp32 accumulator; its element
// positions are private to the build, so code outside these helpers only stores it, loads it, or
// combines it element-wise with another accumulator loaded from the same layout.
#if !defined(ENABLE_FP32)
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, floatX, nvcuda::wmma::row_major> att_frag_a;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, floatX, nvcuda::wmma::row_major> att_frag_b_row;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, floatX, nvcuda::wmma::col_major> att_frag_b_col;
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> att_frag_acc;

__device__ __forceinline__ void att_load_a(att_frag_a& f, const floatX* p, int ld) { nvcuda::wmma::load_matrix_sync(f, p, ld); }
__device__ __forceinline__ void att_load_b_row(att_frag_b_row& f, const floatX* p, int ld) { nvcuda::wmma::load_matrix_sync(f, p, ld); }
__device__ __forceinline__ void att_load_b_col(att_frag_b_col& f, const floatX* p, int ld) { nvcuda::wmma::load_matrix_sync(f, p, ld); }
__device__ __forceinline__ void att_zero(att_frag_acc& f) { nvcuda::wmma::fill_fragment(f, 0.0f); }
__device__ __forceinline__ void att_store(float* p, int ld, const att_frag_acc& f) {
    nvcuda::wmma::store_matrix_sync(p, f, ld, nvcuda::wmma::mem_row_major);
}
__device__ __forceinline__ void att_load_acc(att_frag_acc& f, const float* p, int ld) {
    nvcuda::wmma::load_matrix_sync(f, p, ld, nvcuda::wmma::mem_row_major);
}
__device__ __forceinline__ void att_mma(att_frag_acc& d, const att_frag_a& a, const att_frag_b_row& b) { nvcuda::wmma::mma_sync(d, a, b, d); }
__device__ __forceinline__ void att_mma(att_frag_acc& d, const att_frag_a& a, const att_frag_b_col& b) { nvcuda::wmma::mma_sync(d, a, b, d); }
#else
// FP32: an operand is a view of its tile in shared memory (the tiles stay there for as long as the
// operand is used); lane l owns accumulator row l/2, columns (l%2)*8 .. +7, and sums k in order.
// The k loops unroll by 4, not fully: fully unrolled inside the kernels' unrolled tile loops they
// take nvcc's front end minutes (150 s against 16 s for the whole test).
struct att_frag_a { const float* p; int ld; };
struct att_frag_b_row { const float* p; int ld; };
struct att_frag_b_col { const float* p; int ld; };
struct att_frag_acc {
    enum { num_elements = 8 };
    float x[8];
};
__device__ __forceinline__ int att_acc_row() { return (threadIdx.x & 31) >> 1; }
__device__ __forceinline__ int att_acc_col() { return (threadIdx.x & 1) * 8; }

__device__ __forceinline__ void att_load_a(att_frag_a& f, const float* p, int ld) { f.p = p; f.ld = ld; }
__device__ __forceinline__ void att_load_b_row(att_frag_b_row& f, const float* p, int ld) { f.p = p; f.ld = ld; }
__device__ __forceinline__ void att_load_b_col(att_frag_b_col& f, const float* p, int ld) { f.p = p; f.ld = ld; }
__device__ __forceinline__ void att_zero(att_frag_acc& f) {
    for (int e = 0; e < 8; e++) f.x[e] = 0.0f;
}
__device__ __forceinline__ void att_store(float* p, int ld, const att_frag_acc& f) {
    float* row = p + att_acc_row() * ld + att_acc_col();
    for (int e = 0; e < 8; e++) row[e] = f.x[e];
}
__device__ __forceinline__ void att_load_acc(att_frag_acc& f, const float* p, int ld) {
    const float* row = p + att_acc_row() * ld + att_acc_col();
    for (int e = 0; e < 8; e++) f.x[e] = row[e];
}
__device__ __forceinline__ void att_mma(att_frag_acc& d, const att_frag_a& a, const att_frag_b_row& b) {
    const float* arow = a.p + att_acc_row() * a.ld;
    const int c0 = att_acc_col();
#pragma unroll 4
    for (int k = 0; k < 16; k++) {
        const float av = arow[k];
        const float* brow = b.p + k * b.ld + c0;
        for (int e = 0; e < 8; e++) d.x[e] = fmaf(av, brow[e], d.x[e]);
    }
}
__device__ __forceinline__ void att_mma(att_frag_acc& d, const att_frag_a& a, const att_frag_b_col& b) {
    const float* arow = a.p + att_acc_row() * a.ld;
    const float* bcol = b.p + att_acc_col() * b.ld;
#pragma unroll 4
    for (int k = 0; k < 16; k++) {
        const float av = arow[k];
        for (int e = 0; e < 8; e++) d.x[e] = fmaf(av, bcol[e * b.ld + k], d.x[e]);
    }
}
#endif

// d *= s element-wise; s was loaded from a tile laid out like d's, so equal indices are equal positions.
__device__ __forceinline__ void att_mul(att_frag_acc& d, const att_frag_acc& s) {
    for (int e = 0; e < d.num_elements; e++) d.x[e] *= s.x[e];
}

// Number of 16-wide subtiles holding the first n columns of a tile (0 when n <= 0).
__device__ __forceinline__ int att_subtiles(int n) { return n <= 0 ? 0 : min((n + 15) / 16, ATT_COLS / 16); }

// The whole block copies `rows` rows of HS floatX (row stride `stride` in global memory) into a
// shared tile with row stride LDX, 16 bytes per load. Rows at or past `valid` become zeros: they
// only ever meet masked positions, and zeros (not the NaN of fresh memory) keep 0 * x finite.
template <int HS>
__device__ __forceinline__ void att_load_rows(floatX* dst, const floatX* src, size_t stride, int rows, int valid) {
    typedef AttGeom<HS> G;
    constexpr int PER_ROW = HS / G::VEC;
    for (int i = threadIdx.x; i < rows * PER_ROW; i += blockDim.x) {
        const int r = i / PER_ROW, c = (i % PER_ROW) * G::VEC;
        int4 v = make_int4(0, 0, 0, 0);
        if (r < valid) v = *reinterpret_cast<const int4*>(src + (size_t)r * stride + c);
        *reinterpret_cast<int4*>(dst + r * G::LDX + c) = v;
    }
}

// The K and V rows k0 .. k0 + rows of one (b, h) (qkv_bh: its Q; K and V C and 2C further on), each
// into its shared tile, rows at or past T as zeros: every kernel below streams its key tiles so.
template <int HS>
__device__ __forceinline__ void att_load_kv(floatX* sK, floatX* sV, const floatX* qkv_bh, int C, size_t C3, int k0,
                                            int rows, int T) {
    att_load_rows<HS>(sK, qkv_bh + C + k0 * C3, C3, rows, T - k0);
    att_load_rows<HS>(sV, qkv_bh + 2 * C + k0 * C3, C3, rows, T - k0);
}

// Writes a warp's 16 x HS fp32 result (fragments acc[0..KD)) as floatX rows dst, dst + stride, ...,
// row r times mul[r / 8], only rows < rows_valid. Goes through the warp's fp32 tile sW (16 x LDS),
// 64 columns at a time, so that lanes know which (row, col) they convert: four lanes per row, two
// passes of 8 rows, 16-byte stores.
template <int HS>
__device__ __forceinline__ void att_warp_store(floatX* dst, size_t stride, int rows_valid, float* sW,
                                               const att_frag_acc* acc, const float mul[2]) {
    typedef AttGeom<HS> G;
    constexpr int GROUP = ATT_COLS / 16;
    const int lane = threadIdx.x & 31, quarter = lane & 3;
#pragma unroll
    for (int g = 0; g < (G::KD + GROUP - 1) / GROUP; g++) {
        __syncwarp();  // lanes may still read sW from the previous step
#pragma unroll
        for (int i = 0; i < GROUP; i++)
            if (g * GROUP + i < G::KD) att_store(sW + 16 * i, G::LDS, acc[g * GROUP + i]);
        __syncwarp();
        const int width = min(ATT_COLS, HS - g * ATT_COLS);
#pragma unroll
        for (int pass = 0; pass < 2; pass++) {
            const int r = pass * 8 + (lane >> 2);
            if (r >= rows_valid) continue;
            const float* srow = sW + r * G::LDS;
            floatX* drow = dst + (size_t)r * stride + g * ATT_COLS;
            for (int c = quarter * G::VEC; c < width; c += 4 * G::VEC) {
                floatX packed[G::VEC];
#pragma unroll
                for (int e = 0; e < G::VEC; e++) packed[e] = (floatX)(srow[c + e] * mul[pass]);
                int4 v;
                memcpy(&v, packed, sizeof(v));  // not a cast: keeps the compiler's aliasing rules intact
                *reinterpret_cast<int4*>(drow + c) = v;
            }
        }
    }
}

// The backward's two products per tile pair, for the 16-wide column subtiles [c_begin, c_end):
// S = A1 B1^T and dP = A2 B2^T, A from this warp's fragments (KD chunks of a head), B from the
// rows of shared tiles (row stride LDX); both go to the warp's fp32 tiles sS and sdP (stride LDS).
template <int HS>
__device__ __forceinline__ void att_two_products(float* sS, float* sdP, const att_frag_a* a1, const floatX* b1,
                                                 const att_frag_a* a2, const floatX* b2, int c_begin, int c_end) {
    typedef AttGeom<HS> G;
#pragma unroll
    for (int c = 0; c < ATT_COLS / 16; c++) {
        if (c < c_begin || c >= c_end) continue;
        att_frag_acc s, dp;
        att_zero(s);
        att_zero(dp);
#pragma unroll
        for (int kk = 0; kk < G::KD; kk++) {
            att_frag_b_col f1, f2;
            att_load_b_col(f1, b1 + 16 * c * G::LDX + 16 * kk, G::LDX);
            att_mma(s, a1[kk], f1);
            att_load_b_col(f2, b2 + 16 * c * G::LDX + 16 * kk, G::LDX);
            att_mma(dp, a2[kk], f2);
        }
        att_store(sS + 16 * c, G::LDS, s);
        att_store(sdP + 16 * c, G::LDS, dp);
    }
}

// ---- forward ----
template <int HS>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH) {
    typedef AttGeom<HS> G;
    extern __shared__ __align__(128) unsigned char att_smem[];
    floatX* sQ = (floatX*)att_smem;
    floatX* sK = sQ + ATT_ROWS * G::LDX;
    floatX* sV = sK + ATT_COLS * G::LDX;
    float* sS = (float*)(sV + ATT_COLS * G::LDX);
    floatX* sP = (floatX*)(sS + ATT_WARPS * 16 * G::LDS);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quarter = lane & 3;
    const int q_tile = gridDim.x - 1 - blockIdx.x;  // latest query tiles (most keys) start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int q0 = q_tile * ATT_ROWS;
    const floatX* qkv_bh = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const float sl2 = ATT_LOG2E / sqrtf((float)HS);  // scale * log2(e): the softmax runs in base 2

    att_load_rows<HS>(sQ, qkv_bh + q0 * C3, C3, ATT_ROWS, T - q0);
    __syncthreads();

    const int qw = q0 + 16 * warp;         // this warp's first query row
    const int last = min(qw + 15, T - 1);  // its last real row (< qw: the warp lies past T)
    float* sSw = sS + warp * 16 * G::LDS;
    floatX* sPw = sP + warp * 16 * G::LDP;

    att_frag_a qf[G::KD];
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++) att_load_a(qf[kk], sQ + 16 * warp * G::LDX + 16 * kk, G::LDX);
    att_frag_acc o[G::KD];
#pragma unroll
    for (int d = 0; d < G::KD; d++) att_zero(o[d]);
    // Running max m (base-2 units) and sum l of the rows pass*8 + lane/4 (the four lanes of a row agree).
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    const int last_key = min(q0 + ATT_ROWS, T) - 1;        // the last key any row of the block sees ...
    for (int kt = 0; kt <= last_key / ATT_COLS; kt++) {  // ... so later key tiles are never touched
        const int k0 = kt * ATT_COLS;
        att_load_kv<HS>(sK, sV, qkv_bh, C, C3, k0, ATT_COLS, T);
        __syncthreads();
        const int n_sub = att_subtiles(last - k0 + 1);  // subtiles with a key this warp may see
        if (n_sub > 0) {
            // S = Q K^T, one 16x16 subtile at a time, into the warp's fp32 tile
#pragma unroll
            for (int c = 0; c < ATT_COLS / 16; c++) {
                if (c >= n_sub) continue;
                att_frag_acc s;
                att_zero(s);
#pragma unroll
                for (int kk = 0; kk < G::KD; kk++) {
                    att_frag_b_col kb;
                    att_load_b_col(kb, sK + 16 * c * G::LDX + 16 * kk, G::LDX);
                    att_mma(s, qf[kk], kb);
                }
                att_store(sSw + 16 * c, G::LDS, s);
            }
            __syncwarp();
            // online softmax: four lanes per row (columns quarter, quarter+4, ...: conflict-free banks)
            float alpha[2];
#pragma unroll
            for (int pass = 0; pass < 2; pass++) {
                const int r = pass * 8 + (lane >> 2), t = qw + r;
                const float* srow = sSw + r * G::LDS;
                floatX* prow = sPw + r * G::LDP;
                const int ncols = 16 * n_sub;
                float mx = -INFINITY;
                for (int c = quarter; c < ncols; c += 4)
                    if (k0 + c <= t) mx = fmaxf(mx, srow[c] * sl2);
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(m[pass], mx);
                const float base = m_new == -INFINITY ? 0.0f : m_new;  // no key seen yet: keep exp2 finite
                float sum = 0.0f;
                for (int c = quarter; c < ncols; c += 4) {
                    const float p = k0 + c <= t ? exp2f(srow[c] * sl2 - base) : 0.0f;
                    prow[c] = (floatX)p;
                    sum += p;  // l sums the unrounded p, so lse is exact to fp32
                }
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                alpha[pass] = exp2f(m[pass] - base);  // 0 on the first tile (m = -inf)
                l[pass] = l[pass] * alpha[pass] + sum;
                m[pass] = m_new;
            }
            __syncwarp();  // every lane is done reading S: its first 16 columns take the alpha tile
#pragma unroll
            for (int pass = 0; pass < 2; pass++) {
                float* srow = sSw + (pass * 8 + (lane >> 2)) * G::LDS + 4 * quarter;
                for (int e = 0; e < 4; e++) srow[e] = alpha[pass];
            }
            __syncwarp();
            att_frag_acc rescale;
            att_load_acc(rescale, sSw, G::LDS);
#pragma unroll
            for (int d = 0; d < G::KD; d++) att_mul(o[d], rescale);
            // O += P V
            att_frag_a pf[ATT_COLS / 16];
#pragma unroll
            for (int c = 0; c < ATT_COLS / 16; c++)
                if (c < n_sub) att_load_a(pf[c], sPw + 16 * c, G::LDP);
#pragma unroll
            for (int d = 0; d < G::KD; d++) {
#pragma unroll
                for (int c = 0; c < ATT_COLS / 16; c++) {
                    if (c >= n_sub) continue;
                    att_frag_b_row vb;
                    att_load_b_row(vb, sV + 16 * c * G::LDX + 16 * d, G::LDX);
                    att_mma(o[d], pf[c], vb);
                }
            }
        }
        __syncthreads();  // K and V are about to be replaced
    }

    // out = O / l; lse = ln(2^m * l)
    const int rows_valid = max(0, min(16, T - qw));
    float inv_l[2];
    for (int pass = 0; pass < 2; pass++) inv_l[pass] = l[pass] > 0.0f ? 1.0f / l[pass] : 0.0f;
    att_warp_store<HS>(out + ((size_t)b * T + qw) * C + (size_t)h * HS, C, rows_valid, sSw, o, inv_l);
    for (int pass = 0; pass < 2; pass++) {
        const int t = qw + pass * 8 + (lane >> 2);
        if (t < T && quarter == 0) lse[((size_t)b * NH + h) * T + t] = (m[pass] + log2f(l[pass])) * ATT_LN2;
    }
}

// ---- backward ----
// The backward kernels' shared memory, carved in one order (AttGeom's dkdv_smem and dq_smem are its
// size): the block's own two tiles own0, own1 (ATT_ROWS rows: K and V for dk/dv, Q and dO for dq),
// the two it streams str0, str1 (ATT_COLS rows: Q and dO, or K and V), lse * log2(e) and D of NQ
// queries (dk/dv: the streamed tile's, dq: the block's own), each warp's fp32 tiles S and dP, and from
// X on its floatX tiles (dk/dv: P, then dS; dq: dS). Declares the ten pointers in the kernel (G is its
// AttGeom<HS>). A macro, not a function: nvcc then sees the same statements as when the kernel declares
// them itself; returning them from a function gave it other address arithmetic and longer code.
#define ATT_BWD_SMEM(own0, own1, str0, str1, L, D, NQ, S, dP, X) \
    floatX* own0 = (floatX*)att_smem;                            \
    floatX* own1 = own0 + ATT_ROWS * G::LDX;                     \
    floatX* str0 = own1 + ATT_ROWS * G::LDX;                     \
    floatX* str1 = str0 + ATT_COLS * G::LDX;                     \
    float* L = (float*)(str1 + ATT_COLS * G::LDX);               \
    float* D = L + (NQ);                                         \
    float* S = D + (NQ);                                         \
    float* dP = S + ATT_WARPS * 16 * G::LDS;                     \
    floatX* X = (floatX*)(dP + ATT_WARPS * 16 * G::LDS)

// D[b,h,t] = sum_i dout[b,t,h*HS+i] * out[b,t,h*HS+i] (fp32): one warp per (b, t, h), in memory order.
__global__ void attention_backward_rowdot_kernel(float* Dsum, const floatX* dout, const floatX* out, int rows, int T,
                                                 int NH, int HS) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;  // whole warps leave together, and no barrier follows
    const floatX* d = dout + (size_t)row * HS;
    const floatX* o = out + (size_t)row * HS;
    float acc = 0.0f;
    for (int i = lane; i < HS; i += 32) acc += (float)d[i] * (float)o[i];
    acc = warp_reduce_sum(acc);
    if (lane == 0) {
        const int h = row % NH, t = (row / NH) % T, b = row / NH / T;
        Dsum[((size_t)b * NH + h) * T + t] = acc;
    }
}

// dK and dV of 64 keys of one (b, h): loops over the query tiles that can see them.
template <int HS>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dkdv_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                   const float* Dsum, int T, int NH) {
    typedef AttGeom<HS> G;
    extern __shared__ __align__(128) unsigned char att_smem[];
    ATT_BWD_SMEM(sK, sV, sQ, sdO, sL, sD, ATT_COLS, sS, sdP, sP);  // sL, sD: the streamed queries'
    floatX* sdS = sP + ATT_WARPS * 16 * G::LDP;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quarter = lane & 3;
    const int k_tile = blockIdx.x;  // earliest keys (most queries) start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int k0 = k_tile * ATT_ROWS;
    const floatX* qkv_bh = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const floatX* dout_bh = dout + (size_t)b * T * C + (size_t)h * HS;
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = Dsum + ((size_t)b * NH + h) * T;
    const float scale = 1.0f / sqrtf((float)HS);
    const float sl2 = scale * ATT_LOG2E;

    att_load_kv<HS>(sK, sV, qkv_bh, C, C3, k0, ATT_ROWS, T);
    __syncthreads();

    const int kw = k0 + 16 * warp;  // this warp's first key row
    float* sSw = sS + warp * 16 * G::LDS;
    float* sdPw = sdP + warp * 16 * G::LDS;
    floatX* sPw = sP + warp * 16 * G::LDP;
    floatX* sdSw = sdS + warp * 16 * G::LDP;
    att_frag_a kf[G::KD], vf[G::KD];
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++) {
        att_load_a(kf[kk], sK + 16 * warp * G::LDX + 16 * kk, G::LDX);
        att_load_a(vf[kk], sV + 16 * warp * G::LDX + 16 * kk, G::LDX);
    }
    att_frag_acc dk[G::KD], dv[G::KD];
#pragma unroll
    for (int d = 0; d < G::KD; d++) {
        att_zero(dk[d]);
        att_zero(dv[d]);
    }

    for (int q0 = k0 / ATT_COLS * ATT_COLS; q0 < T; q0 += ATT_COLS) {  // query tiles from the diagonal on
        att_load_rows<HS>(sQ, qkv_bh + q0 * C3, C3, ATT_COLS, T - q0);
        att_load_rows<HS>(sdO, dout_bh + (size_t)q0 * C, C, ATT_COLS, T - q0);
        for (int i = threadIdx.x; i < ATT_COLS; i += blockDim.x) {
            const bool real = q0 + i < T;
            sL[i] = real ? lse_bh[q0 + i] * ATT_LOG2E : 0.0f;
            sD[i] = real ? D_bh[q0 + i] : 0.0f;
        }
        __syncthreads();
        // this warp's query subtiles: none wholly before its first key (causal), none wholly past T
        const int c_first = kw > q0 ? (kw - q0) / 16 : 0;
        const int c_end = att_subtiles(T - q0);
        if (c_first < c_end) {
            // S^T = K Q^T and dP^T = V dO^T (keys as rows)
            att_two_products<HS>(sSw, sdPw, kf, sQ, vf, sdO, c_first, c_end);
            __syncwarp();
            // P^T = exp(scale S^T - lse) (causal: query >= key, query < T), dS^T = P^T (dP^T - D)
#pragma unroll
            for (int pass = 0; pass < 2; pass++) {
                const int r = pass * 8 + (lane >> 2), j = kw + r;
                const float* srow = sSw + r * G::LDS;
                const float* dprow = sdPw + r * G::LDS;
                floatX* prow = sPw + r * G::LDP;
                floatX* dsrow = sdSw + r * G::LDP;
                for (int c = 16 * c_first + quarter; c < 16 * c_end; c += 4) {
                    const int q = q0 + c;
                    float p = 0.0f, ds = 0.0f;
                    if (q >= j && q < T) {
                        p = exp2f(srow[c] * sl2 - sL[c]);
                        ds = p * (dprow[c] - sD[c]);
                    }
                    prow[c] = (floatX)p;
                    dsrow[c] = (floatX)ds;
                }
            }
            __syncwarp();
            // dV += P^T dO, dK += dS^T Q (the query index is the reduction)
#pragma unroll
            for (int c = 0; c < ATT_COLS / 16; c++) {
                if (c < c_first || c >= c_end) continue;
                att_frag_a pf, dsf;
                att_load_a(pf, sPw + 16 * c, G::LDP);
                att_load_a(dsf, sdSw + 16 * c, G::LDP);
#pragma unroll
                for (int d = 0; d < G::KD; d++) {
                    att_frag_b_row ob, qb;
                    att_load_b_row(ob, sdO + 16 * c * G::LDX + 16 * d, G::LDX);
                    att_mma(dv[d], pf, ob);
                    att_load_b_row(qb, sQ + 16 * c * G::LDX + 16 * d, G::LDX);
                    att_mma(dk[d], dsf, qb);
                }
            }
        }
        __syncthreads();  // Q and dO are about to be replaced
    }

    const int rows_valid = max(0, min(16, T - kw));
    floatX* dk_row = dqkv + ((size_t)b * T + kw) * C3 + C + (size_t)h * HS;
    const float mul_dk[2] = {scale, scale}, mul_dv[2] = {1.0f, 1.0f};
    att_warp_store<HS>(dk_row, C3, rows_valid, sSw, dk, mul_dk);
    att_warp_store<HS>(dk_row + C, C3, rows_valid, sSw, dv, mul_dv);
}

// dQ of 64 queries of one (b, h): loops over the key tiles they see, recomputing S, P, dP, dS.
template <int HS>
__global__ void __launch_bounds__(ATT_THREADS)
    attention_backward_dq_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                 const float* Dsum, int T, int NH) {
    typedef AttGeom<HS> G;
    extern __shared__ __align__(128) unsigned char att_smem[];
    ATT_BWD_SMEM(sQ, sdO, sK, sV, sL, sD, ATT_ROWS, sS, sdP, sdS);  // sL, sD: the block's queries'

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quarter = lane & 3;
    const int q_tile = gridDim.x - 1 - blockIdx.x;  // latest query tiles (most keys) start first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int q0 = q_tile * ATT_ROWS;
    const floatX* qkv_bh = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = Dsum + ((size_t)b * NH + h) * T;
    const float scale = 1.0f / sqrtf((float)HS);
    const float sl2 = scale * ATT_LOG2E;

    att_load_rows<HS>(sQ, qkv_bh + q0 * C3, C3, ATT_ROWS, T - q0);
    att_load_rows<HS>(sdO, dout + ((size_t)b * T + q0) * C + (size_t)h * HS, C, ATT_ROWS, T - q0);
    for (int i = threadIdx.x; i < ATT_ROWS; i += blockDim.x) {
        const bool real = q0 + i < T;
        sL[i] = real ? lse_bh[q0 + i] * ATT_LOG2E : 0.0f;
        sD[i] = real ? D_bh[q0 + i] : 0.0f;
    }
    __syncthreads();

    const int qw = q0 + 16 * warp;
    const int last = min(qw + 15, T - 1);
    float* sSw = sS + warp * 16 * G::LDS;
    float* sdPw = sdP + warp * 16 * G::LDS;
    floatX* sdSw = sdS + warp * 16 * G::LDP;
    att_frag_a qf[G::KD], of[G::KD];
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++) {
        att_load_a(qf[kk], sQ + 16 * warp * G::LDX + 16 * kk, G::LDX);
        att_load_a(of[kk], sdO + 16 * warp * G::LDX + 16 * kk, G::LDX);
    }
    att_frag_acc dq[G::KD];
#pragma unroll
    for (int d = 0; d < G::KD; d++) att_zero(dq[d]);

    const int last_key = min(q0 + ATT_ROWS, T) - 1;
    for (int kt = 0; kt <= last_key / ATT_COLS; kt++) {
        const int k0 = kt * ATT_COLS;
        att_load_kv<HS>(sK, sV, qkv_bh, C, C3, k0, ATT_COLS, T);
        __syncthreads();
        const int n_sub = att_subtiles(last - k0 + 1);
        if (n_sub > 0) {
            // S = Q K^T, dP = dO V^T
            att_two_products<HS>(sSw, sdPw, qf, sK, of, sV, 0, n_sub);
            __syncwarp();
            // dS = P (dP - D), P = exp(scale S - lse), causal
#pragma unroll
            for (int pass = 0; pass < 2; pass++) {
                const int r = pass * 8 + (lane >> 2), t = qw + r;
                const float L = sL[16 * warp + r], Dr = sD[16 * warp + r];
                const float* srow = sSw + r * G::LDS;
                const float* dprow = sdPw + r * G::LDS;
                floatX* dsrow = sdSw + r * G::LDP;
                for (int c = quarter; c < 16 * n_sub; c += 4) {
                    float ds = 0.0f;
                    if (k0 + c <= t) ds = exp2f(srow[c] * sl2 - L) * (dprow[c] - Dr);
                    dsrow[c] = (floatX)ds;
                }
            }
            __syncwarp();
            // dQ += dS K
#pragma unroll
            for (int c = 0; c < ATT_COLS / 16; c++) {
                if (c >= n_sub) continue;
                att_frag_a dsf;
                att_load_a(dsf, sdSw + 16 * c, G::LDP);
#pragma unroll
                for (int d = 0; d < G::KD; d++) {
                    att_frag_b_row kb;
                    att_load_b_row(kb, sK + 16 * c * G::LDX + 16 * d, G::LDX);
                    att_mma(dq[d], dsf, kb);
                }
            }
        }
        __syncthreads();  // K and V are about to be replaced
    }

    const int rows_valid = max(0, min(16, T - qw));
    const float mul[2] = {scale, scale};
    att_warp_store<HS>(dqkv + ((size_t)b * T + qw) * C3 + (size_t)h * HS, C3, rows_valid, sSw, dq, mul);
}

// ---- launchers ----
// Every head size the kernels are instantiated for; a launcher refuses any other.
#define ATT_FOR_EACH_HS(X) X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128)

static inline void attention_check_shape(const char* who, int HS) {
    if (HS < 16 || HS > ATT_MAX_HS || HS % 16 != 0) {
        fflush(stdout);
        fprintf(stderr, "error: %s: head size %d: expected a multiple of 16 in [16, %d]\n", who, HS, ATT_MAX_HS);
        exit(1);
    }
}

template <int HS>
static inline void attention_forward_hs(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH,
                                        cudaStream_t stream) {
    const size_t smem = AttGeom<HS>::fwd_smem;
    cudaCheck(cudaFuncSetAttribute((const void*)attention_forward_kernel<HS>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    attention_forward_kernel<HS><<<grid, ATT_THREADS, smem, stream>>>(out, lse, qkv, T, NH);
    cudaCheckLaunch("attention_forward_kernel");
}

template <int HS>
static inline void attention_backward_hs(floatX* dqkv, float* Dsum, const floatX* dout, const floatX* qkv,
                                         const float* lse, int B, int T, int NH, cudaStream_t stream) {
    const size_t smem_kv = AttGeom<HS>::dkdv_smem, smem_q = AttGeom<HS>::dq_smem;
    cudaCheck(cudaFuncSetAttribute((const void*)attention_backward_dkdv_kernel<HS>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv));
    cudaCheck(cudaFuncSetAttribute((const void*)attention_backward_dq_kernel<HS>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q));
    dim3 grid(ceil_div(T, ATT_ROWS), NH, B);
    attention_backward_dkdv_kernel<HS><<<grid, ATT_THREADS, smem_kv, stream>>>(dqkv, dout, qkv, lse, Dsum, T, NH);
    cudaCheckLaunch("attention_backward_dkdv_kernel");
    attention_backward_dq_kernel<HS><<<grid, ATT_THREADS, smem_q, stream>>>(dqkv, dout, qkv, lse, Dsum, T, NH);
    cudaCheckLaunch("attention_backward_dq_kernel");
}

// qkv: (B, T, 3C) floatX, C = NH*HS: q at columns [0, C), k at [C, 2C), v at [2C, 3C); head h uses
//      columns h*HS .. h*HS+HS-1 within each third (the layout of GPT-2's fused qkv matmul output).
// out: (B, T, C) floatX, head h at columns h*HS.. ; lse: (B, NH, T) fp32 = logsumexp over j <= t of
//      scale * q_t . k_j (natural log), scale = 1/sqrt(HS). Causal. Both OVERWRITTEN.
// attention_forward_tiled: the WMMA forward, every head size and precision. Launch:
// attention_forward_kernel<HS>, grid (ceil(T/64), NH, B), 128 threads, AttGeom<HS>::fwd_smem bytes of
// dynamic shared memory (53 KiB at HS = 64, fp16).
static inline void attention_forward_tiled(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH, int HS,
                                           cudaStream_t stream) {
    attention_check_shape("attention_forward", HS);
    if (B <= 0 || T <= 0 || NH <= 0) return;
    switch (HS) {
#define ATT_CASE(hs) \
    case hs: attention_forward_hs<hs>(out, lse, qkv, B, T, NH, stream); break;
        ATT_FOR_EACH_HS(ATT_CASE)
#undef ATT_CASE
    }
}

// Which kernels attention_forward and attention_backward launch for head size HS in this build on the
// current device, as the start-up report names them. The first call decides (flash_wgmma_available).
static inline const char* attention_kernels_name(int HS) {
#if !defined(ENABLE_FP32)
    if (attention_uses_flash(HS, sizeof(floatX))) return flash_wgmma_available() ? "flash, wgmma" : "flash, mma.sync";
#endif
    return "tiled, WMMA";
}

// attention_forward: the forward the trainer calls. FP16/BF16 at HS = 32 or 64: on compute 9.0 with
// sm_90a code flash_forward_wgmma (kernels/flash_wgmma.cuh: attention_forward_flash_wgmma_kernel,
// 128 threads, 40 KiB of static shared memory at HS = 64), else flash_forward (kernels/flash_fwd.cuh):
// attention_forward_flash_kernel, grid (ceil(T/64), NH, B), 64 threads, 5 x 64 x (HS + 8) elements of
// static shared memory (45 KiB at HS = 64: under the 48 KiB default, no cudaFuncSetAttribute);
// otherwise attention_forward_tiled (why: the header's "Which forward runs").
static inline void attention_forward(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH, int HS,
                                     cudaStream_t stream) {
    attention_check_shape("attention_forward", HS);
#if !defined(ENABLE_FP32)
    if (attention_uses_flash(HS, sizeof(floatX))) {
        if (flash_wgmma_available()) {
            if (HS == 64) flash_forward_wgmma<floatX, 64>(out, lse, qkv, B, T, NH, stream);
            else flash_forward_wgmma<floatX, 32>(out, lse, qkv, B, T, NH, stream);
            cudaCheckLaunch("attention_forward_flash_wgmma_kernel");
            return;
        }
        if (HS == 64) flash_forward<floatX, 64>(out, lse, qkv, B, T, NH, stream);
        else flash_forward<floatX, 32>(out, lse, qkv, B, T, NH, stream);
        cudaCheckLaunch("attention_forward_flash_kernel");
        return;
    }
#endif
    attention_forward_tiled(out, lse, qkv, B, T, NH, HS, stream);
}

// fp32 floats of scratch attention_backward needs in this build (kernels/sizes.h, the planner's
// formula): D, B NH T floats, whichever backward runs.
static inline size_t attention_backward_scratch_floats(int B, int T, int NH, int HS) {
    return attention_backward_scratch_floats_for(B, T, NH, HS, sizeof(floatX));
}
// What attention_backward_tiled needs, whichever backward attention_backward runs.
static inline size_t attention_backward_tiled_scratch_floats(int B, int T, int NH) { return (size_t)B * NH * T; }

// attention_backward_tiled: the WMMA backward, every head size and precision. dqkv (B, T, 3C) floatX is
// OVERWRITTEN (dq, dk, dv in the qkv layout). dout (B,T,C), out and lse are those of the forward.
// scratch: fp32, attention_backward_tiled_scratch_floats(B, T, NH) floats, OVERWRITTEN with
// D = rowsum(dout * out) (B, NH, T).
// Launches: attention_backward_rowdot_kernel (grid ceil(B*T*NH/8), 256 threads, no shared memory),
// then attention_backward_dkdv_kernel<HS> and attention_backward_dq_kernel<HS> (grid (ceil(T/64), NH, B),
// 128 threads, AttGeom<HS>::dkdv_smem / dq_smem bytes: 88.5 / 79.5 KiB at HS = 64, fp16).
static inline void attention_backward_tiled(floatX* dqkv, float* scratch, const floatX* dout, const floatX* qkv,
                                            const floatX* out, const float* lse, int B, int T, int NH, int HS,
                                            cudaStream_t stream) {
    attention_check_shape("attention_backward", HS);
    if (B <= 0 || T <= 0 || NH <= 0) return;
    const int rows = B * T * NH, warps_per_block = 8;
    attention_backward_rowdot_kernel<<<ceil_div(rows, warps_per_block), 32 * warps_per_block, 0, stream>>>(
        scratch, dout, out, rows, T, NH, HS);
    cudaCheckLaunch("attention_backward_rowdot_kernel");
    switch (HS) {
#define ATT_CASE(hs) \
    case hs: attention_backward_hs<hs>(dqkv, scratch, dout, qkv, lse, B, T, NH, stream); break;
        ATT_FOR_EACH_HS(ATT_CASE)
#undef ATT_CASE
    }
}

// attention_backward: the backward the trainer calls; arguments as attention_backward_tiled's, but
// scratch is attention_backward_scratch_floats(B, T, NH, HS) fp32 (OVERWRITTEN). FP16/BF16 at HS = 32
// or 64: on compute 9.0 with sm_90a code flash_backward_wgmma (kernels/flash_wgmma.cuh: the dq then the
// kv kernel on wgmma, 128 threads, 32 KiB of static shared memory each at HS = 64), else flash_backward
// (kernels/flash_bwd.cuh): flash_backward_dq_kernel then flash_backward_kv_kernel, grid (ceil(T/64), NH,
// B), 64 threads, static shared memory (45.5 KiB at HS = 64); otherwise attention_backward_tiled (why:
// the header's "Which backward runs").
static inline void attention_backward(floatX* dqkv, float* scratch, const floatX* dout, const floatX* qkv,
                                      const floatX* out, const float* lse, int B, int T, int NH, int HS,
                                      cudaStream_t stream) {
    attention_check_shape("attention_backward", HS);
#if !defined(ENABLE_FP32)
    if (attention_uses_flash(HS, sizeof(floatX))) {
        if (B <= 0 || T <= 0 || NH <= 0) return;
        if (flash_wgmma_available()) {
            if (HS == 64) flash_backward_wgmma<floatX, 64>(dqkv, scratch, dout, qkv, out, lse, B, T, NH, stream);
            else flash_backward_wgmma<floatX, 32>(dqkv, scratch, dout, qkv, out, lse, B, T, NH, stream);
            cudaCheckLaunch("flash_backward_dq_wgmma_kernel / flash_backward_kv_wgmma_kernel");
            return;
        }
        if (HS == 64) flash_backward<floatX, 64>(dqkv, scratch, dout, qkv, out, lse, B, T, NH, stream);
        else flash_backward<floatX, 32>(dqkv, scratch, dout, qkv, out, lse, B, T, NH, stream);
        cudaCheckLaunch("flash_backward_dq_kernel / flash_backward_kv_kernel");
        return;
    }
#endif
    attention_backward_tiled(dqkv, scratch, dout, qkv, out, lse, B, T, NH, HS, stream);
}
