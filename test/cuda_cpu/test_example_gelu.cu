// test_example_gelu.cu: the worked example of README.md - a kernel from a header, run through the CPU
// runtime and compared with the C reference engine's gelu_forward_cpu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "ops_cpu.h"
#include "test.h"
#include "example/gelu.cuh"

#define CK(call)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) { printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } \
    } while (0)

int main() {
    const int N = 1000;  // not a multiple of the block: the last block is partial
    std::vector<float> inp(N), ref(N), out(N);
    std::vector<__nv_bfloat16> out_bf16(N);
    for (int i = 0; i < N; i++) inp[i] = (float)(i - N / 2) / 100.0f;
    gelu_forward_cpu(ref.data(), inp.data(), N);

    float *d_inp, *d_out;
    __nv_bfloat16* d_bf16;
    CK(cudaMalloc(&d_inp, N * sizeof(float)));
    CK(cudaMalloc(&d_out, N * sizeof(float)));
    CK(cudaMalloc(&d_bf16, N * sizeof(__nv_bfloat16)));
    CK(cudaMemcpy(d_inp, inp.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    example_gelu_forward(d_out, d_bf16, d_inp, N, 0);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out.data(), d_out, N * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out_bf16.data(), d_bf16, N * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));

    double worst = 0.0, worst_bf16 = 0.0;
    for (int i = 0; i < N; i++) {
        worst = fmax(worst, fabs(out[i] - ref[i]) / fmax(1.0, fabs(ref[i])));
        worst_bf16 = fmax(worst_bf16, fabs(__bfloat162float(out_bf16[i]) - ref[i]) / fmax(1e-3, fabs(ref[i])));
    }
    check_close("example_gelu_forward_fp32_vs_gelu_forward_cpu", worst, 0.0, 1e-6);
    CHECK(worst_bf16 <= 1.0 / 256, "example_gelu_forward_bf16_within_half_ulp");
    CK(cudaFree(d_inp));
    CK(cudaFree(d_out));
    CK(cudaFree(d_bf16));
    return test_finish();
}
