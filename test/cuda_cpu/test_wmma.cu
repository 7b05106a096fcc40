// test_wmma.cu: tensor-core fragments (nvcuda::wmma m16n16k16, half or bf16 in, float accumulate)
// against a triple loop in double: row- and column-major operands, an accumulator loaded from memory,
// an element-wise op on a fragment, several warps per block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <type_traits>
#include <vector>
#include "cuda_test.h"
#include "test.h"

using namespace nvcuda;

// D (M x N, row-major) = scale * A (M x K) B (K x N) + C (M x N, row-major). Each warp owns one 16x16
// tile of D; A is row-major (lda = K) or column-major (lda = M), B row-major (ldb = N) or column-major
// (ldb = K).
template <class T, class LayoutA, class LayoutB>
__global__ void wmma_gemm_kernel(const T* A, const T* B, const float* C, float* D, int M, int N, int K, float scale) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int tiles_n = N / 16;
    int tm = warp / tiles_n, tn = warp % tiles_n;
    if (tm * 16 >= M) return;  // whole warps leave together
    const bool a_row = std::is_same<LayoutA, wmma::row_major>::value;
    const bool b_row = std::is_same<LayoutB, wmma::row_major>::value;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        const T* pa = a_row ? A + (size_t)tm * 16 * K + k : A + (size_t)k * M + tm * 16;
        const T* pb = b_row ? B + (size_t)k * N + tn * 16 : B + (size_t)tn * 16 * K + k;
        wmma::load_matrix_sync(a, pa, a_row ? K : M);
        wmma::load_matrix_sync(b, pb, b_row ? N : K);
        wmma::mma_sync(acc, a, b, acc);
    }
    for (int i = 0; i < acc.num_elements; i++) acc.x[i] *= scale;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::load_matrix_sync(c, C + (size_t)tm * 16 * N + tn * 16, N, wmma::mem_row_major);
    for (int i = 0; i < c.num_elements; i++) c.x[i] += acc.x[i];
    wmma::store_matrix_sync(D + (size_t)tm * 16 * N + tn * 16, c, N, wmma::mem_row_major);
}

static uint32_t rng_state = 99u;
static float frand() {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}
static float to_f(__half h) { return __half2float(h); }
static float to_f(__nv_bfloat16 h) { return __bfloat162float(h); }
template <class T> static T from_f(float v);
template <> __half from_f<__half>(float v) { return __float2half(v); }
template <> __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

template <class T, class LayoutA, class LayoutB>
static void run(const char* name) {
    const int M = 32, N = 48, K = 64;
    const float scale = 0.5f;
    const bool a_row = std::is_same<LayoutA, wmma::row_major>::value;
    const bool b_row = std::is_same<LayoutB, wmma::row_major>::value;
    std::vector<T> A(M * K), B(K * N);
    std::vector<float> C(M * N), D(M * N);
    for (auto& v : A) v = from_f<T>(frand());
    for (auto& v : B) v = from_f<T>(frand());
    for (auto& v : C) v = frand();
    T *dA, *dB;
    float *dC, *dD;
    CK(cudaMalloc(&dA, A.size() * sizeof(T)));
    CK(cudaMalloc(&dB, B.size() * sizeof(T)));
    CK(cudaMalloc(&dC, C.size() * sizeof(float)));
    CK(cudaMalloc(&dD, D.size() * sizeof(float)));
    CK(cudaMemcpy(dA, A.data(), A.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, B.data(), B.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dC, C.data(), C.size() * sizeof(float), cudaMemcpyHostToDevice));
    const int warps = (M / 16) * (N / 16);  // 6 warps: 2 blocks of 4 warps, the last 2 warps idle
    wmma_gemm_kernel<T, LayoutA, LayoutB><<<(warps + 3) / 4, 128>>>(dA, dB, dC, dD, M, N, K, scale);
    CK(cudaGetLastError());
    CK(cudaMemcpy(D.data(), dD, D.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double a = to_f(a_row ? A[i * K + k] : A[k * M + i]);
                double b = to_f(b_row ? B[k * N + j] : B[j * K + k]);
                s += a * b;
                mag += fabs(a * b);
            }
            double e = scale * s + C[i * N + j];
            double err = fabs(D[i * N + j] - e) / (4e-6 * (scale * mag + fabs(C[i * N + j])) + 1e-30);
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
        }
    char why[96];
    snprintf(why, sizeof(why), "worst error %.3g times the allowed", worst);
    test_report(worst <= 1.0, name, why);
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
    CK(cudaFree(dD));
}

int main() {
    run<__half, wmma::row_major, wmma::col_major>("wmma_half_a_row_b_col");
    run<__half, wmma::col_major, wmma::row_major>("wmma_half_a_col_b_row");
    run<__half, wmma::row_major, wmma::row_major>("wmma_half_a_row_b_row");
    run<__nv_bfloat16, wmma::row_major, wmma::col_major>("wmma_bf16_a_row_b_col");
    return test_finish();
}
