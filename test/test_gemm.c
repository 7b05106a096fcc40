// test_gemm.c: checks gemm_cpu against a double-precision triple loop (fp32 tolerance) and,
// bit for bit, against the documented order (a sequential fmaf chain per element), over all
// transpose/accumulate combinations, edge shapes and padded strides; then checks that results
// do not depend on the thread count, on repeating the call, or on calling from a parallel region.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "gemm_cpu.h"
#include "test.h"
#include "util.h"

// Deterministic fill in [-1, 1): xorshift, so failures reproduce.
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / (1 << 23))) - 1.0f;
}
static void fill(float* x, long n) {
    for (long i = 0; i < n; i++) x[i] = frand();
}

static float opA(const float* A, int lda, int tA, int i, int k) { return tA ? A[(long)k * lda + i] : A[(long)i * lda + k]; }
static float opB(const float* B, int ldb, int tB, int k, int j) { return tB ? B[(long)j * ldb + k] : B[(long)k * ldb + j]; }

// Runs one product and checks it; returns nothing, reports one PASS/FAIL line.
static void check_case(int M, int N, int K, int tA, int tB, int acc, int pad) {
    char name[128];
    snprintf(name, sizeof(name), "gemm_%s_%c%c_acc%d_%dx%dx%d%s", gemm_cpu_kernel_name(), tA ? 't' : 'n',
             tB ? 't' : 'n', acc, M, N, K, pad ? "_ld+" : "");
    // Stored shapes: A is [M,K] or [K,M]; B is [K,N] or [N,K]; padded strides when pad.
    int arows = tA ? K : M, acols = tA ? M : K;
    int brows = tB ? N : K, bcols = tB ? K : N;
    int lda = acols + (pad ? 3 : 0), ldb = bcols + (pad ? 5 : 0), ldc = N + (pad ? 7 : 0);
    float* A = (float*)malloc_check(sizeof(float) * ((long)arows * lda + 1), "A");
    float* B = (float*)malloc_check(sizeof(float) * ((long)brows * ldb + 1), "B");
    float* C = (float*)malloc_check(sizeof(float) * ((long)M * ldc + 1), "C");
    float* C0 = (float*)malloc_check(sizeof(float) * ((long)M * ldc + 1), "C0");
    fill(A, (long)arows * lda);
    fill(B, (long)brows * ldb);
    fill(C, (long)M * ldc);
    memcpy(C0, C, sizeof(float) * (long)M * ldc);
    gemm_cpu(M, N, K, A, lda, tA, B, ldb, tB, C, ldc, acc);

    char why[256] = "";
    int ok = 1;
    double worst = 0.0;
    for (int i = 0; i < M && ok; i++) {
        for (int j = 0; j < ldc && ok; j++) {
            long at = (long)i * ldc + j;
            if (j >= N) {  // padding between rows must be left alone
                if (memcmp(&C[at], &C0[at], sizeof(float)) != 0) {
                    snprintf(why, sizeof(why), "wrote padding C[%d][%d]", i, j);
                    ok = 0;
                }
                continue;
            }
            float c0 = acc ? C0[at] : 0.0f;
            double exact = c0, scale = fabs(c0);
            float chain = c0;
            for (int k = 0; k < K; k++) {
                float a = opA(A, lda, tA, i, k), b = opB(B, ldb, tB, k, j);
                exact += (double)a * b;
                scale += fabs((double)a * b);
                chain = fmaf(a, b, chain);
            }
            double err = fabs(C[at] - exact), tol = 1e-5 * sqrt((double)K + 1) * (scale > 1e-30 ? scale : 1.0);
            if (err / tol > worst) worst = err / tol;
            if (err > tol) {
                snprintf(why, sizeof(why), "C[%d][%d] = %.9g, exact %.9g, err %.3g > tol %.3g", i, j, C[at], exact,
                         err, tol);
                ok = 0;
            } else if (memcmp(&C[at], &chain, sizeof(float)) != 0) {
                snprintf(why, sizeof(why), "C[%d][%d] = %.9g is not the in-order fmaf chain %.9g", i, j, C[at],
                         chain);
                ok = 0;
            }
        }
    }
    test_report(ok, name, why);
    free(A);
    free(B);
    free(C);
    free(C0);
}

// The same product with nthreads threads; returns a fresh C.
static float* run_threads(int nthreads, int M, int N, int K, const float* A, const float* B, const float* Cinit, int tA,
                          int tB, int acc) {
    float* C = (float*)malloc_check(sizeof(float) * (long)M * N, "C");
    memcpy(C, Cinit, sizeof(float) * (long)M * N);
    omp_set_num_threads(nthreads);
    gemm_cpu(M, N, K, A, tA ? M : K, tA, B, tB ? K : N, tB, C, N, acc);
    return C;
}

static void check_threads(int M, int N, int K, int tA, int tB) {
    float* A = (float*)malloc_check(sizeof(float) * (long)M * K, "A");
    float* B = (float*)malloc_check(sizeof(float) * (long)K * N, "B");
    float* C = (float*)malloc_check(sizeof(float) * (long)M * N, "C");
    fill(A, (long)M * K);
    fill(B, (long)K * N);
    fill(C, (long)M * N);
    int saved = omp_get_max_threads();
    float* c1 = run_threads(1, M, N, K, A, B, C, tA, tB, 1);
    float* c2 = run_threads(2, M, N, K, A, B, C, tA, tB, 1);
    float* c2b = run_threads(2, M, N, K, A, B, C, tA, tB, 1);
    float* c3 = run_threads(3, M, N, K, A, B, C, tA, tB, 1);
    omp_set_num_threads(saved);
    size_t bytes = sizeof(float) * (long)M * N;
    char name[128];
    snprintf(name, sizeof(name), "gemm_%s_%c%c_%dx%dx%d", gemm_cpu_kernel_name(), tA ? 't' : 'n', tB ? 't' : 'n',
             M, N, K);
    char n1[160], n2[160], n3[160];
    snprintf(n1, sizeof(n1), "%s_threads1_vs_2_bitwise", name);
    snprintf(n2, sizeof(n2), "%s_repeat_call_bitwise", name);
    snprintf(n3, sizeof(n3), "%s_threads1_vs_3_bitwise", name);
    CHECK(memcmp(c1, c2, bytes) == 0, n1);
    CHECK(memcmp(c2, c2b, bytes) == 0, n2);
    CHECK(memcmp(c1, c3, bytes) == 0, n3);
    free(c1);
    free(c2);
    free(c2b);
    free(c3);
    free(A);
    free(B);
    free(C);
}

// Products issued from inside a parallel region (each thread its own) must match serial calls:
// exercises the per-thread packing scratch.
static void check_inside_parallel(void) {
    enum { P = 4, M = 70, N = 90, K = 410 };
    float* A = (float*)malloc_check(sizeof(float) * P * M * K, "A");
    float* B = (float*)malloc_check(sizeof(float) * P * K * N, "B");
    float* Cs = (float*)calloc_check((size_t)P * M * N, sizeof(float), "Cs");
    float* Cp = (float*)calloc_check((size_t)P * M * N, sizeof(float), "Cp");
    fill(A, (long)P * M * K);
    fill(B, (long)P * K * N);
    for (int p = 0; p < P; p++) gemm_cpu(M, N, K, A + p * M * K, K, 0, B + p * K * N, N, 0, Cs + p * M * N, N, 0);
#pragma omp parallel for num_threads(2)
    for (int p = 0; p < P; p++) gemm_cpu(M, N, K, A + p * M * K, K, 0, B + p * K * N, N, 0, Cp + p * M * N, N, 0);
    char name[128];
    snprintf(name, sizeof(name), "gemm_%s_called_in_parallel_region_bitwise", gemm_cpu_kernel_name());
    CHECK(memcmp(Cs, Cp, sizeof(float) * P * M * N) == 0, name);
    free(A);
    free(B);
    free(Cs);
    free(Cp);
}

static void check_k0(void) {
    float A[1] = {1}, B[1] = {1}, C[6] = {1, 2, 3, 4, 5, 6};
    gemm_cpu(2, 2, 0, A, 1, 0, B, 1, 0, C, 3, 1);
    char name[128];
    snprintf(name, sizeof(name), "gemm_%s_k0_accumulate_keeps_C", gemm_cpu_kernel_name());
    CHECK(C[0] == 1 && C[1] == 2 && C[2] == 3 && C[3] == 4 && C[4] == 5 && C[5] == 6, name);
    gemm_cpu(2, 2, 0, A, 1, 0, B, 1, 0, C, 3, 0);
    snprintf(name, sizeof(name), "gemm_%s_k0_overwrite_zeroes_C", gemm_cpu_kernel_name());
    CHECK(C[0] == 0 && C[1] == 0 && C[2] == 3 && C[3] == 0 && C[4] == 0 && C[5] == 6, name);
}

int main(void) {
    // Shapes around the micro-tile sizes (4..12 rows, 16..32 columns), primes, ones, and past
    // the cache blocks (K > 384 slab, N > 320 block, M > 2040 block).
    static const int shapes[][3] = {
        {1, 1, 1}, {1, 33, 7}, {29, 1, 5}, {2, 3, 1}, {13, 17, 19}, {12, 32, 64}, {37, 71, 29},
        {25, 48, 389}, {97, 331, 13}, {2053, 3, 2}, {7, 5, 800},
    };
    int nshapes = (int)(sizeof(shapes) / sizeof(shapes[0]));
    for (int s = 0; s < nshapes; s++)
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                for (int acc = 0; acc < 2; acc++)
                    check_case(shapes[s][0], shapes[s][1], shapes[s][2], tA, tB, acc, (s + tA + tB + acc) % 2);
    check_k0();
    check_threads(251, 333, 517, 0, 1);
    check_threads(203, 97, 450, 1, 0);
    check_inside_parallel();
    return test_finish();
}
