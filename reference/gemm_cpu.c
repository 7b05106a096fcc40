// gemm_cpu.c: the C engine's matrix product: Goto/BLIS-style packing into panels plus a
// register-blocked micro-kernel (AVX-512, AVX2+FMA, or portable C), OpenMP over column chunks.
//
// Summation order: every C element is one fused multiply-add chain over k = 0..K-1 in order,
// starting from C (accumulate) or 0. The K blocking reloads the partial sum from C and carries
// on the same chain, so neither the blocking nor which thread computes a tile changes a bit;
// that is what lets the threads take work dynamically (a busy core just takes fewer chunks).
#include "gemm_cpu.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "util.h"

#if defined(__AVX512F__) && !defined(GEMM_CPU_NO_AVX512)
#define GEMM_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && !defined(GEMM_CPU_NO_AVX2)
#define GEMM_AVX2 1
#include <immintrin.h>
#endif

// Micro-tile MR x NR: NR runs along C's rows (vector loads), MR along its columns (broadcasts).
// AVX-512 8x48: 24 accumulators + 3 B vectors + 1 broadcast of 32 zmm registers, and 8 | BT,
// 48 | every GPT-2 d12 width (768, 2304, 3072, 50304), so the common shapes have no edge tiles.
#if GEMM_AVX512
#define MR 8
#define NR 48
#define KERNEL_NAME "avx512"
#elif GEMM_AVX2
#define MR 6
#define NR 16
#define KERNEL_NAME "avx2"
#else
#define MR 4
#define NR 16
#define KERNEL_NAME "generic"
#endif

// Blocking. A call runs in rounds; each round the threads pack a block of A together (a range
// of rows times a few K slabs, at most A_SUPER floats), then take column chunks of C one by
// one: per K slab a chunk packs its KC x chunk piece of B (L2) and runs its tiles, each MR x KC
// micro-panel of A sitting in L1 while the chunk's B panels pass it. Rounds are large because
// each ends in a barrier, and a barrier is what hurts when another process shares the cores
// (a descheduled thread stalls the rest for a time slice). K and M are cut into near-equal
// pieces rather than full blocks plus a thin remainder. The sizes may be set with -D for
// tuning; a test build uses tiny ones so that small shapes reach every loop.
#ifndef GEMM_KC
#define GEMM_KC 384
#endif
#ifndef GEMM_NC
#define GEMM_NC 384
#endif
#ifndef GEMM_A_SUPER
#define GEMM_A_SUPER (4L << 20)
#endif
#define KC GEMM_KC
#define NC (((GEMM_NC) + NR - 1) / NR * NR)
#define A_SUPER ((long)(GEMM_A_SUPER))

// Below this many flops a product runs on the calling thread: the fork costs more than it saves.
#define PARALLEL_MIN_FLOPS (2.0 * 1024 * 1024)

#ifndef GEMM_NAME_SUFFIX
#define GEMM_NAME_SUFFIX ""
#endif
const char* gemm_cpu_kernel_name(void) { return KERNEL_NAME GEMM_NAME_SUFFIX; }

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------------------------
// Packing. A rows -> micro-panels of MR rows: ap[(p*kc + k)*MR + i] = op(A)(p*MR + i, k).
// B columns -> micro-panels of NR columns: bp[(p*kc + k)*NR + j] = op(B)(k, p*NR + j).
// Rows/columns past the edge are zero so the kernel always runs a full tile.

#if GEMM_AVX512
// Loads the 16x16 tile s[j*lds + k] and returns its transpose: r[k] holds column k.
static inline void transpose16(const float* s, long lds, __m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * lds);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
    }
}
#endif

// Packs rows [0, mr) of one A micro-panel (mr <= MR); A points at op(A)(0, 0) of the panel.
static void pack_a_panel(int mr, int kc, const float* A, long lda, int transA, float* dst) {
    if (transA) {
        // op(A)(i,k) = A[k*lda + i]: each k gives mr contiguous floats.
        for (int k = 0; k < kc; k++) {
            const float* s = A + (long)k * lda;
            float* d = dst + (long)k * MR;
            for (int i = 0; i < mr; i++) d[i] = s[i];
            for (int i = mr; i < MR; i++) d[i] = 0.0f;
        }
        return;
    }
    for (int i = 0; i < mr; i++) {
        const float* s = A + (long)i * lda;
        for (int k = 0; k < kc; k++) dst[(long)k * MR + i] = s[k];
    }
    for (int i = mr; i < MR; i++)
        for (int k = 0; k < kc; k++) dst[(long)k * MR + i] = 0.0f;
}

// Packs panel group g (two micro-panels, 2*MR rows) of the mc x kc A block.
static void pack_a_group(int g, int mc, int kc, const float* A, long lda, int transA, float* ap) {
    int r0 = g * 2 * MR;
    const float* a = transA ? A + r0 : A + (long)r0 * lda;
    float* dst = ap + (long)r0 * kc;
#if GEMM_AVX512 && MR == 8
    if (!transA && r0 + 16 <= mc) {
        // 16 rows x 16 k transposed in registers: column k's low half belongs to the first
        // panel, its high half to the second.
        int k = 0;
        for (; k + 16 <= kc; k += 16) {
            __m512 r[16];
            transpose16(a + k, lda, r);
            for (int j = 0; j < 16; j++) {
                _mm256_store_ps(dst + (long)(k + j) * MR, _mm512_castps512_ps256(r[j]));
                _mm256_store_ps(dst + (long)(kc + k + j) * MR, _mm512_extractf32x8_ps(r[j], 1));
            }
        }
        for (int i = 0; i < 16; i++) {
            const float* s = a + (long)i * lda;
            float* d = dst + (i < 8 ? 0 : (long)kc * MR) + (i & 7);
            for (int kk = k; kk < kc; kk++) d[(long)kk * MR] = s[kk];
        }
        return;
    }
#endif
    for (int p = 0; p < 2; p++) {
        int rp = r0 + p * MR;
        if (rp >= mc) break;
        const float* s = transA ? a + p * MR : a + (long)p * MR * lda;
        pack_a_panel(imin(MR, mc - rp), kc, s, lda, transA, dst + (long)p * MR * kc);
    }
}

// Packs the kc x nc piece of B (B points at op(B)(0, 0) of the piece) into NR-column panels.
static void pack_b(int kc, int nc, const float* B, long ldb, int transB, float* bp) {
    if (!transB) {
        // op(B)(k,j) = B[k*ldb + j]: read each row of the piece in one run, deal it to the panels.
        for (int k = 0; k < kc; k++) {
            const float* s = B + (long)k * ldb;
            for (int p = 0; p < nc; p += NR) {
                float* d = bp + (long)p * kc + (long)k * NR;
                int nr = imin(NR, nc - p);
                if (nr == NR) memcpy(d, s + p, NR * sizeof(float));
                else {
                    for (int j = 0; j < nr; j++) d[j] = s[p + j];
                    for (int j = nr; j < NR; j++) d[j] = 0.0f;
                }
            }
        }
        return;
    }
    // op(B)(k,j) = B[j*ldb + k]: a transpose.
    for (int p = 0; p < nc; p += NR) {
        int nr = imin(NR, nc - p);
        float* dst = bp + (long)p * kc;
        const float* src = B + (long)p * ldb;
        int j = 0;
#if GEMM_AVX512
        // 16 source rows at a time, walking along k, so few memory streams run at once; the
        // prefetch two lines ahead keeps them from stalling on DRAM.
        for (; j + 16 <= nr; j += 16) {
            int k = 0;
            for (; k + 16 <= kc; k += 16) {
                for (int i = 0; i < 16; i++)
                    _mm_prefetch((const char*)(src + (long)(j + i) * ldb + k + 32), _MM_HINT_T0);
                __m512 r[16];
                transpose16(src + (long)j * ldb + k, ldb, r);
                for (int i = 0; i < 16; i++) _mm512_store_ps(dst + (long)(k + i) * NR + j, r[i]);
            }
            for (int i = j; i < j + 16; i++) {
                const float* s = src + (long)i * ldb;
                for (int kk = k; kk < kc; kk++) dst[(long)kk * NR + i] = s[kk];
            }
        }
#endif
        for (; j < nr; j++) {
            const float* s = src + (long)j * ldb;
            for (int k = 0; k < kc; k++) dst[(long)k * NR + j] = s[k];
        }
        for (; j < NR; j++)
            for (int k = 0; k < kc; k++) dst[(long)k * NR + j] = 0.0f;
    }
}

// ---------------------------------------------------------------------------------------------
// Micro-kernel: c[MR x NR] (row stride ldc) = (load ? c : 0) + a-panel * b-panel over kc steps,
// one fma per step per element, k ascending.

#if GEMM_AVX512
#define NV (NR / 16)
static inline void kernel(int kc, const float* restrict a, const float* restrict b, float* restrict c, long ldc,
                          int load) {
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = load ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps(b + 16 * v);
        _mm_prefetch((const char*)(b + 8 * NR), _MM_HINT_T0);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
        }
        a += MR;
        b += NR;
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}
#elif GEMM_AVX2
#define NV (NR / 8)
static inline void kernel(int kc, const float* restrict a, const float* restrict b, float* restrict c, long ldc,
                          int load) {
    __m256 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = load ? _mm256_loadu_ps(c + i * ldc + 8 * v) : _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm256_load_ps(b + 8 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
        }
        a += MR;
        b += NR;
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
}
#else
// fmaf keeps the same single-rounding chain as the vector kernels (one instruction wherever
// the target has FMA; elsewhere libm computes it exactly, only slower).
static inline void kernel(int kc, const float* restrict a, const float* restrict b, float* restrict c, long ldc,
                          int load) {
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = load ? c[i * ldc + j] : 0.0f;
    for (int k = 0; k < kc; k++) {
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        a += MR;
        b += NR;
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];
}
#endif

// A partial tile goes through a full-size scratch tile, so edges use the very same kernel.
static void kernel_edge(int mr, int nr, int kc, const float* a, const float* b, float* c, long ldc, int load) {
    _Alignas(64) float t[MR * NR];
    if (load)
        for (int i = 0; i < mr; i++) memcpy(t + i * NR, c + i * ldc, nr * sizeof(float));
    kernel(kc, a, b, t, NR, load);
    for (int i = 0; i < mr; i++) memcpy(c + i * ldc, t + i * NR, nr * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// Packing scratch per thread: allocated on first use, grown when needed, then reused, so the
// steady state allocates nothing. Thread-local, so concurrent callers never share it.

typedef struct {
    float* buf;
    size_t cap;  // floats
} Scratch;

static _Thread_local Scratch scratch_a_, scratch_b_;

static float* scratch_get(Scratch* s, size_t n) {
    if (s->cap < n) {
        free(s->buf);
        size_t bytes = (n * sizeof(float) + 63) / 64 * 64;  // aligned panels for aligned loads
        s->buf = (float*)aligned_alloc(64, bytes);
        if (!s->buf) fatal("out of host memory allocating %zu bytes for gemm packing", bytes);
        s->cap = n;
    }
    return s->buf;
}

// One call's problem and blocking, shared by every thread of the call.
typedef struct {
    int M, N, K;
    const float *A, *B;
    long lda, ldb, ldc;
    int transA, transB, accumulate;
    float* C;
    int mstep, kstep;     // row block and K slab sizes
    int nslab;            // K slabs packed together per round (one A "superblock")
    int nchunk, chunk_w;  // column chunks and their width (a multiple of NR)
    int nrow_parts;       // row parts per chunk when there are too few chunks to share out
    float* ap;            // the packed superblock, slab after slab (the calling thread's scratch)
} Plan;

// Packs row group g of every slab in the superblock starting at K offset pc0.
static void plan_pack_a(const Plan* P, int g, int ic, int mc, int pc0) {
    for (int s = 0; s < P->nslab; s++) {
        int pc = pc0 + s * P->kstep, kc = imin(P->kstep, P->K - pc);
        if (kc <= 0) break;
        const float* a = P->transA ? P->A + (long)pc * P->lda + ic : P->A + (long)ic * P->lda + pc;
        pack_a_group(g, mc, kc, a, P->lda, P->transA, P->ap + (long)s * P->mstep * P->kstep);
    }
}

// Work item: column chunk (item % nchunk) x row part (item / nchunk) of the current row block,
// through every slab of the superblock in K order (that order is each element's fma chain).
static void plan_run_item(const Plan* P, int item, int ic, int mc, int pc0, float* bp) {
    int c = item % P->nchunk, part = item / P->nchunk;
    int jc = c * P->chunk_w, nc = imin(P->chunk_w, P->N - jc);
    int tiles = ceil_div(mc, MR);
    int ir0 = tiles * part / P->nrow_parts * MR, ir1 = imin(mc, tiles * (part + 1) / P->nrow_parts * MR);
    if (nc <= 0 || ir0 >= ir1) return;
    for (int s = 0; s < P->nslab; s++) {
        int pc = pc0 + s * P->kstep, kc = imin(P->kstep, P->K - pc);
        if (kc <= 0) break;
        const float* b = P->transB ? P->B + (long)jc * P->ldb + pc : P->B + (long)pc * P->ldb + jc;
        pack_b(kc, nc, b, P->ldb, P->transB, bp);
        const float* ap = P->ap + (long)s * P->mstep * P->kstep;
        int load = P->accumulate || pc > 0;
        for (int ir = ir0; ir < ir1; ir += MR) {
            int mr = imin(MR, mc - ir);
            const float* apan = ap + (long)ir * kc;
            float* crow = P->C + (long)(ic + ir) * P->ldc + jc;
            for (int jr = 0; jr < nc; jr += NR) {
                int nr = imin(NR, nc - jr);
                if (mr == MR && nr == NR) kernel(kc, apan, bp + (long)jr * kc, crow + jr, P->ldc, load);
                else kernel_edge(mr, nr, kc, apan, bp + (long)jr * kc, crow + jr, P->ldc, load);
            }
        }
    }
}

void gemm_cpu(int M, int N, int K, const float* A, int lda, int transA, const float* B, int ldb, int transB,
              float* C, int ldc, int accumulate) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!accumulate)
            for (int i = 0; i < M; i++) memset(C + (long)i * ldc, 0, (size_t)N * sizeof(float));
        return;
    }
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && 2.0 * M * N * K >= PARALLEL_MIN_FLOPS) nt = omp_get_max_threads();
#endif
    Plan P = {M, N, K, A, B, lda, ldb, ldc, transA, transB, accumulate, C, 0, 0, 1, 0, 0, 1, NULL};
    int nkb = ceil_div(K, KC);
    P.kstep = ceil_div(K, nkb);
    long max_rows = A_SUPER / P.kstep / (2 * MR) * (2 * MR);
    int nmb = max_rows < M ? ceil_div(M, (int)(max_rows > 2 * MR ? max_rows : 2 * MR)) : 1;
    P.mstep = ceil_div(ceil_div(M, nmb), 2 * MR) * 2 * MR;
    long fit = A_SUPER / ((long)P.mstep * P.kstep);
    int nslab = (int)(fit < 1 ? 1 : fit < nkb ? fit : nkb);
    P.nslab = ceil_div(nkb, ceil_div(nkb, nslab));
    // Several chunks per thread so a slower core simply takes fewer; narrow chunks cost little
    // since B is packed once per slab either way.
    int panels = ceil_div(N, NR);
    int want = nt > 1 ? 4 * nt : 1;
    P.chunk_w = imin(NC, ceil_div(panels, want) * NR);
    P.nchunk = ceil_div(N, P.chunk_w);
    if (nt > 1 && P.nchunk < 2 * nt) P.nrow_parts = imin(ceil_div(2 * nt, P.nchunk), ceil_div(imin(M, P.mstep), MR));
    P.ap = scratch_get(&scratch_a_, (size_t)P.nslab * P.mstep * P.kstep);
    int nitems = P.nchunk * P.nrow_parts, ksuper = P.nslab * P.kstep;

    if (nt == 1) {
        float* bp = scratch_get(&scratch_b_, (size_t)P.chunk_w * P.kstep);
        for (int ic = 0; ic < M; ic += P.mstep) {
            int mc = imin(P.mstep, M - ic);
            for (int pc0 = 0; pc0 < K; pc0 += ksuper) {
                for (int g = 0; g < ceil_div(mc, 2 * MR); g++) plan_pack_a(&P, g, ic, mc, pc0);
                for (int it = 0; it < nitems; it++) plan_run_item(&P, it, ic, mc, pc0, bp);
            }
        }
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        float* bp = scratch_get(&scratch_b_, (size_t)P.chunk_w * P.kstep);
        for (int ic = 0; ic < M; ic += P.mstep) {
            int mc = imin(P.mstep, M - ic);
            for (int pc0 = 0; pc0 < K; pc0 += ksuper) {
                // The barrier ending each loop keeps the packed A whole while it is in use.
#pragma omp for schedule(dynamic, 2)
                for (int g = 0; g < ceil_div(mc, 2 * MR); g++) plan_pack_a(&P, g, ic, mc, pc0);
#pragma omp for schedule(dynamic, 1)
                for (int it = 0; it < nitems; it++) plan_run_item(&P, it, ic, mc, pc0, bp);
            }
        }
    }
#endif
}
