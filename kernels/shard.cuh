// kernels/shard.cuh: the two element-wise steps of ZeRO-2's gradient shard, where each rank keeps
// its slice of the gradients in fp32 across micro-steps instead of a full-size floatX buffer:
//   shard_accumulate: acc[i] += (float)grads[i]   ACCUMULATES into fp32 (a micro-step's reduced slice)
//   shard_round:      out[i] = (floatX)acc[i]     OVERWRITES: the step's gradient, rounded once
// Reference: plain loops (one fp32 addition, one rounding); no reduction, so no order to fix.
#pragma once

#include "common.cuh"

__global__ void shard_accumulate_kernel(float* acc, const floatX* grads, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] += (float)grads[i];
}

__global__ void shard_round_kernel(floatX* out, const float* acc, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (floatX)acc[i];
}

static inline void shard_accumulate(float* acc, const floatX* grads, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    shard_accumulate_kernel<<<(unsigned)ceil_div_size(n, 256), 256, 0, stream>>>(acc, grads, n);
    cudaCheckLaunch("shard_accumulate_kernel");
}

static inline void shard_round(floatX* out, const float* acc, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    shard_round_kernel<<<(unsigned)ceil_div_size(n, 256), 256, 0, stream>>>(out, acc, n);
    cudaCheckLaunch("shard_round_kernel");
}
