// gemm_cpu.c: placeholder triple loop (to be replaced by a blocked, vectorized version).
#include "gemm_cpu.h"

void gemm_cpu(int M, int N, int K, const float* A, int lda, int transA, const float* B, int ldb, int transB,
              float* C, int ldc, int accumulate) {
#pragma omp parallel for collapse(2)
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = accumulate ? C[(long)i * ldc + j] : 0.0f;
            for (int k = 0; k < K; k++) {
                float a = transA ? A[(long)k * lda + i] : A[(long)i * lda + k];
                float b = transB ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                acc += a * b;
            }
            C[(long)i * ldc + j] = acc;
        }
    }
}
