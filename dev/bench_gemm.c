// bench_gemm.c: GFLOP/s of gemm_cpu on the GPT-2 d12 linear layers (forward and both backward
// products) at BT = 256 and 1024, next to a naive loop in the style of llm.c's CPU
// matmul_forward, and the machine's FMA peak measured with a register-only loop.
//   build/dev/bench_gemm [BT ...]      (default: 256 1024)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "gemm_cpu.h"
#include "util.h"

// llm.c-style baseline: out[BT,OC] = inp[BT,C] . W[OC,C]^T, 8 rows of inp at a time so each
// weight row is read once per 8 outputs; threads over the row groups.
static void matmul_naive(float* out, const float* inp, const float* W, int BT, int C, int OC) {
    enum { U = 8 };
#pragma omp parallel for
    for (int obt = 0; obt < BT; obt += U) {
        const float* row[U];  // a short last group repeats its first row and drops the results
        for (int u = 0; u < U; u++) row[u] = inp + (long)(obt + u < BT ? obt + u : obt) * C;
        for (int o = 0; o < OC; o++) {
            float r[U] = {0};
            const float* w = W + (long)o * C;
            for (int i = 0; i < C; i++) {
                float wi = w[i];
                for (int u = 0; u < U; u++) r[u] += row[u][i] * wi;
            }
            for (int u = 0; u < U && obt + u < BT; u++) out[(long)(obt + u) * OC + o] = r[u];
        }
    }
}

// Peak: independent FMA chains in registers on every thread, nothing from memory.
static double peak_gflops(int nthreads) {
    const long iters = 20 * 1000 * 1000;
    double t0 = wall_time_ms();
    float sink = 0.0f;
#pragma omp parallel num_threads(nthreads) reduction(+ : sink)
    {
#ifdef __AVX512F__
        enum { R = 12 };
        __m512 acc[R];
        __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
        for (int r = 0; r < R; r++) acc[r] = _mm512_set1_ps((float)r);
        for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
            for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(acc[r], x, y);
        for (int r = 0; r < R; r++) sink += _mm512_reduce_add_ps(acc[r]);
#else
        enum { R = 12, W = 8 };
        float acc[R][W];
        for (int r = 0; r < R; r++)
            for (int w = 0; w < W; w++) acc[r][w] = (float)r;
        for (long i = 0; i < iters; i++)
            for (int r = 0; r < R; r++)
                for (int w = 0; w < W; w++) acc[r][w] = acc[r][w] * 0.999999f + 1e-7f;
        for (int r = 0; r < R; r++)
            for (int w = 0; w < W; w++) sink += acc[r][w];
#endif
    }
    double ms = wall_time_ms() - t0;
    if (sink == 12345.0f) printf(" ");  // keeps the loop alive
#ifdef __AVX512F__
    double flops = 2.0 * 16 * 12 * iters * nthreads;
#else
    double flops = 2.0 * 8 * 12 * iters * nthreads;
#endif
    return flops / (ms * 1e6);
}

typedef struct {
    int M, N, K, transA, transB;
    const float *A, *B;
    float* C;
    int lda, ldb, ldc, accumulate, naive;  // naive: run matmul_naive(C, A, B, M, K, N) instead
} Op;

static void op_run(const Op* o) {
    if (o->naive) matmul_naive(o->C, o->A, o->B, o->M, o->K, o->N);
    else gemm_cpu(o->M, o->N, o->K, o->A, o->lda, o->transA, o->B, o->ldb, o->transB, o->C, o->ldc, o->accumulate);
}

// Best of a few runs (about half a second in all, at least two runs after a warm-up).
static double op_gflops(const Op* o) {
    double t0 = wall_time_ms();
    op_run(o);
    double first = wall_time_ms() - t0, best = 1e300;
    int reps = first > 500 ? 1 : (int)(500 / (first + 1e-3)) + 1;
    if (reps > 20) reps = 20;
    if (reps < 2 && first <= 500) reps = 2;
    if (first > 500) best = first;
    for (int r = 0; r < reps && first <= 500; r++) {
        t0 = wall_time_ms();
        op_run(o);
        double t = wall_time_ms() - t0;
        if (t < best) best = t;
    }
    return 2.0 * o->M * o->N * o->K / (best * 1e6);
}

static void fill(float* x, long n, unsigned seed) {
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1 << 24) - 0.5f;
    }
}

int main(int argc, char** argv) {
    int bts[8] = {256, 1024}, nbt = 2;
    if (argc > 1) {
        nbt = 0;
        for (int i = 1; i < argc && nbt < 8; i++) bts[nbt++] = atoi(argv[i]);
    }
    int nt = omp_get_max_threads();
    printf("gemm_cpu kernel %s, %d threads\n", gemm_cpu_kernel_name(), nt);
    double p1 = peak_gflops(1), pn = peak_gflops(nt);
    printf("FMA peak (register loop): %.1f GFLOP/s on 1 thread, %.1f on %d\n", p1, pn, nt);

    // d12: C = 768. Layers as (name, in, out); forward out[BT,OC] = inp[BT,C] . W[OC,C]^T.
    static const struct { const char* name; int C, OC; } layers[] = {
        {"qkv", 768, 2304}, {"attproj", 768, 768}, {"fc", 768, 3072}, {"fcproj", 3072, 768}, {"lmhead", 768, 50304},
    };
    int nl = (int)(sizeof(layers) / sizeof(layers[0]));
    long maxw = 768L * 50304;
    int maxbt = 0;
    for (int b = 0; b < nbt; b++)
        if (bts[b] > maxbt) maxbt = bts[b];
    if (maxbt <= 0) fatal("BT must be positive, got %d", maxbt);
    float* W = (float*)malloc_check(sizeof(float) * maxw, "W");
    float* dW = (float*)malloc_check(sizeof(float) * maxw, "dW");
    float* inp = (float*)malloc_check(sizeof(float) * (long)maxbt * 3072, "inp");
    float* dinp = (float*)malloc_check(sizeof(float) * (long)maxbt * 3072, "dinp");
    float* out = (float*)malloc_check(sizeof(float) * (long)maxbt * 50304, "out");
    fill(W, maxw, 1);
    fill(dW, maxw, 2);
    fill(inp, (long)maxbt * 3072, 3);
    fill(dinp, (long)maxbt * 3072, 4);
    fill(out, (long)maxbt * 50304, 5);

    printf("%-8s %5s %5s %5s | %8s %8s %8s | %8s %7s   (GFLOP/s)\n", "layer", "BT", "C", "OC", "fwd", "dinp", "dW",
           "naivefwd", "speedup");
    for (int b = 0; b < nbt; b++) {
        int BT = bts[b];
        for (int l = 0; l < nl; l++) {
            int C = layers[l].C, OC = layers[l].OC;
            Op fwd = {BT, OC, C, 0, 1, inp, W, out, C, C, OC, 0, 0};
            Op bin = {BT, C, OC, 0, 0, out, W, dinp, OC, C, C, 1, 0};  // dinp += dout . W
            Op bw = {OC, C, BT, 1, 0, out, inp, dW, OC, C, C, 1, 0};   // dW += dout^T . inp
            Op nv = {BT, OC, C, 0, 1, inp, W, out, C, C, OC, 0, 1};
            double gf = op_gflops(&fwd), gi = op_gflops(&bin), gw = op_gflops(&bw), gn = op_gflops(&nv);
            printf("%-8s %5d %5d %5d | %8.1f %8.1f %8.1f | %8.1f %6.1fx\n", layers[l].name, BT, C, OC, gf, gi, gw, gn,
                   gf / gn);
            fflush(stdout);
        }
    }
    free(W);
    free(dW);
    free(inp);
    free(dinp);
    free(out);
    return 0;
}
