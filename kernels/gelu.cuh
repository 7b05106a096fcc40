// kernels/gelu.cuh: GELU (GPT-2's tanh approximation), forward and backward, element-wise.
// Used where the matmul does not fuse GELU into its epilogue, and by activation recompute,
// which rebuilds the GELU output from the saved pre-activation in backward.
//   gelu_forward:  out[i] = gelu(inp[i])                          (out may alias inp)
//   gelu_backward: dinp[i] = gelu'(inp[i]) * dout[i]   OVERWRITES  (dinp may alias dout)
// Reference: gelu_forward_cpu / gelu_backward_cpu (which accumulates; this overwrites).
// fp32 math, one rounding to floatX per output.
//
// Memory: each thread moves one 128-bit pack (X128 elements: 8 fp16/bf16 or 4 fp32) of every
// tensor, so a warp's access is 512 contiguous bytes and a thread has one wide load per input in
// flight instead of X128 scalar ones. Any n is accepted: the n % X128 elements past the last whole
// pack are taken one a thread by the threads after the pack threads (same launch), and when a
// base pointer is not 16-byte aligned the whole launch falls back to one element a thread.
#pragma once

#include "common.cuh"

#define GELU_SCALE 0.7978845608028654f  // sqrt(2 / pi)
#define GELU_BLOCK 256

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

// Thread i < packs: elements [i*W, i*W + W) as one W-wide pack. Thread packs + j: the single
// element packs*W + j of the tail (j < n - packs*W). W == 1: packs == n, no tail.
template <int W>
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, size_t packs, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < packs) {
        floatx_pack<W> x = pack_load<W>(inp + i * W), y;
#pragma unroll
        for (int k = 0; k < W; k++) y.v[k] = (floatX)gelu_of((float)x.v[k]);
        pack_store<W>(out + i * W, y);
    } else {
        size_t e = packs * W + (i - packs);
        if (e < n) out[e] = (floatX)gelu_of((float)inp[e]);
    }
}

template <int W>
__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, size_t packs, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < packs) {
        floatx_pack<W> x = pack_load<W>(inp + i * W), d = pack_load<W>(dout + i * W), g;
#pragma unroll
        for (int k = 0; k < W; k++) g.v[k] = (floatX)(gelu_grad_of((float)x.v[k]) * (float)d.v[k]);
        pack_store<W>(dinp + i * W, g);
    } else {
        size_t e = packs * W + (i - packs);
        if (e < n) dinp[e] = (floatX)(gelu_grad_of((float)inp[e]) * (float)dout[e]);
    }
}

// Threads for n elements at width W: one per whole pack, one per tail element.
static inline size_t gelu_threads(size_t n, int W) { return n / W + n % W; }

// Launch: ceil(threads / 256) blocks of 256, threads = n / X128 + n % X128 when every pointer is
// 16-byte aligned, else n (one element each).
static inline void gelu_forward(floatX* out, const floatX* inp, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    if (aligned16(out) && aligned16(inp)) {
        size_t threads = gelu_threads(n, X128);
        gelu_forward_kernel<X128><<<(unsigned)ceil_div_size(threads, GELU_BLOCK), GELU_BLOCK, 0, stream>>>(
            out, inp, n / X128, n);
    } else {
        gelu_forward_kernel<1><<<(unsigned)ceil_div_size(n, GELU_BLOCK), GELU_BLOCK, 0, stream>>>(out, inp, n, n);
    }
    cudaCheckLaunch("gelu_forward_kernel");
}

static inline void gelu_backward(floatX* dinp, const floatX* inp, const floatX* dout, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    if (aligned16(dinp) && aligned16(inp) && aligned16(dout)) {
        size_t threads = gelu_threads(n, X128);
        gelu_backward_kernel<X128><<<(unsigned)ceil_div_size(threads, GELU_BLOCK), GELU_BLOCK, 0, stream>>>(
            dinp, inp, dout, n / X128, n);
    } else {
        gelu_backward_kernel<1><<<(unsigned)ceil_div_size(n, GELU_BLOCK), GELU_BLOCK, 0, stream>>>(dinp, inp, dout, n,
                                                                                                   n);
    }
    cudaCheckLaunch("gelu_backward_kernel");
}
