// example/gelu.cuh: a kernel header written the way kernels/*.cuh are (plain CUDA, a launcher with
// <<<>>>), used by test_example_gelu.cu to show and check the whole CPU path: the header is rewritten
// through the include path, and the kernel is compared with the C reference engine's function.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define EXAMPLE_GELU_SCALE 0.7978845608028654f

// One element per thread; the bf16 output shows a reduced-precision store.
__global__ void example_gelu_forward_kernel(float* out, __nv_bfloat16* out_bf16, const float* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float x = __ldcs(&inp[i]);
    float y = 0.5f * x * (1.0f + tanhf(EXAMPLE_GELU_SCALE * (x + 0.044715f * x * x * x)));
    out[i] = y;
    out_bf16[i] = __float2bfloat16(y);
}

static inline void example_gelu_forward(float* out, __nv_bfloat16* out_bf16, const float* inp, int N, cudaStream_t stream) {
    const int block = 256;
    example_gelu_forward_kernel<<<(N + block - 1) / block, block, 0, stream>>>(out, out_bf16, inp, N);
}
