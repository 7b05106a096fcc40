// kernels/gelu.cuh: GELU (GPT-2's tanh approximation), forward and backward, element-wise.
// Used where the matmul does not fuse GELU into its epilogue, and by activation recompute,
// which rebuilds the GELU output from the saved pre-activation in backward.
//   gelu_forward:  out[i] = gelu(inp[i])                          (out may alias inp)
//   gelu_backward: dinp[i] = gelu'(inp[i]) * dout[i]   OVERWRITES  (dinp may alias dout)
// Reference: gelu_forward_cpu / gelu_backward_cpu (which accumulates; this overwrites).
// fp32 math, one rounding to floatX per output.
#pragma once

#include "common.cuh"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2 / pi)

__device__ inline float gelu_of(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
}

__device__ inline float gelu_grad_of(float x) {
    float cube = 0.044715f * x * x * x;
    float t = tanhf(GELU_SCALE * (x + cube));
    float sech2 = 1.0f - t * t;
    return 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (floatX)gelu_of((float)inp[i]);
}

__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dinp[i] = (floatX)(gelu_grad_of((float)inp[i]) * (float)dout[i]);
}

static inline void gelu_forward(floatX* out, const floatX* inp, size_t n, cudaStream_t stream) {
    const int block = 256;
    if (n == 0) return;
    gelu_forward_kernel<<<(unsigned)ceil_div_size(n, block), block, 0, stream>>>(out, inp, n);
    cudaCheckLaunch("gelu_forward_kernel");
}

static inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n, cudaStream_t stream) {
    const int block = 256;
    if (n == 0) return;
    gelu_backward_kernel<<<(unsigned)ceil_div_size(n, block), block, 0, stream>>>(dinp, inp, dout, n);
    cudaCheckLaunch("gelu_backward_kernel");
}
