// gemm_cpu.h: the C engine's one matrix product, used by every linear layer forward and backward.
#ifndef REFERENCE_GEMM_CPU_H
#define REFERENCE_GEMM_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

// C[M,N] = (accumulate ? C : 0) + op(A)[M,K] * op(B)[K,N], all fp32, row-major.
// op(A)(i,k) = transA ? A[k*lda + i] : A[i*lda + k];  op(B)(k,j) = transB ? B[j*ldb + k] : B[k*ldb + j].
// Deterministic: each C element is exactly the chain c = fmaf(op(A)(i,k), op(B)(k,j), c) for
// k = 0..K-1 in order, starting from C (accumulate) or 0, whatever the thread count or blocking,
// so a run and its resumed twin agree bit for bit. K = 0 leaves C (accumulate) or zeroes it.
// Runs on the OpenMP threads when called from serial code, on the caller's thread inside a
// parallel region; packing scratch is per thread and kept between calls.
void gemm_cpu(int M, int N, int K, const float* A, int lda, int transA, const float* B, int ldb, int transB,
              float* C, int ldc, int accumulate);

// Which micro-kernel this build uses: "avx512", "avx2" or "generic".
const char* gemm_cpu_kernel_name(void);

#ifdef __cplusplus
}
#endif
#endif
