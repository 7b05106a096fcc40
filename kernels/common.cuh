// kernels/common.cuh: what every kernel header shares: the precision switch (floatX), checked
// CUDA calls and launches, and the warp and block reductions.
//
// Precision is chosen at build time by exactly one of ENABLE_FP32, ENABLE_FP16, ENABLE_BF16
// (make PRECISION=FP32|FP16|BF16). floatX is the type of parameters, gradients and activations;
// every kernel computes in fp32 and rounds only when it stores a floatX. Statistics (LayerNorm
// mean and rstd, attention logsumexp, losses, norms) and the optimizer state stay fp32.
//
// Reductions here are deterministic: a fixed tree over a fixed assignment of elements to
// threads, so a result does not depend on timing, only on the launch shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(ENABLE_FP32) + defined(ENABLE_FP16) + defined(ENABLE_BF16) != 1
#error "define exactly one of ENABLE_FP32, ENABLE_FP16, ENABLE_BF16 (make PRECISION=FP32|FP16|BF16)"
#endif

#if defined(ENABLE_FP32)
typedef float floatX;
#define PRECISION_NAME "fp32"
#define CUDA_R_FLOATX CUDA_R_32F
#elif defined(ENABLE_FP16)
typedef __half floatX;
#define PRECISION_NAME "fp16"
#define CUDA_R_FLOATX CUDA_R_16F
#else
typedef __nv_bfloat16 floatX;
#define PRECISION_NAME "bf16"
#define CUDA_R_FLOATX CUDA_R_16BF
#endif

// ---- checked calls: one line naming the call and where, then exit status 1 ----
// "error: LIBRARY: CALL at FILE:LINE: WHY": how every failed call or refused argument ends.
static inline void fail_at(const char* library, const char* call, const char* file, int line, const char* why) {
    fflush(stdout);
    fprintf(stderr, "error: %s: %s at %s:%d%s%s\n", library, call, file, line, why ? ": " : "", why ? why : "");
    exit(1);
}
static inline void cuda_check(cudaError_t err, const char* call, const char* file, int line) {
    if (err != cudaSuccess) fail_at("CUDA", call, file, line, cudaGetErrorString(err));
}
#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)
// After every launch: a bad configuration is reported here, at the launch, not at a later sync.
#define cudaCheckLaunch(name) cuda_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)

static inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
static inline size_t ceil_div_size(size_t a, size_t b) { return (a + b - 1) / b; }

// ---- warp and block reductions (fp32) ----
__device__ inline float warp_reduce_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
__device__ inline float warp_reduce_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum of v over the whole block, returned to every thread. blockDim.x must be a multiple of 32
// (at most 1024) and every thread of the block must call it. `shared` is 32 floats of shared
// memory the caller owns; a block calling this twice in a row needs two arrays or a
// __syncthreads between the calls.
__device__ inline float block_reduce_sum(float v, float* shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_reduce_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float total = lane < nwarps ? shared[lane] : 0.0f;
    return warp_reduce_sum(total);
}

// ---- the fenced last-block pattern ----
// After the block's writes: a barrier (they are done), then thread 0 fences, which releases them
// at GPU scope, and counts the block in *counter. Returns true, in every thread, in the one block
// that counts to `expected`: it has acquired every counted block's writes (read them with __ldcg:
// other SMs wrote them). That block zeroes the counter at once (no other block touches it again
// in this launch), so counters kept in scratch stay zero between calls. `flag` is a __shared__ int
// of the caller's. Every thread of the block must call it.
__device__ inline bool block_last_to_arrive(unsigned* counter, unsigned expected, int* flag) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        __threadfence();
        unsigned ticket = atomicAdd(counter, 1u);
        *flag = ticket == expected - 1;
        if (ticket == expected - 1) {
            __threadfence();
            atomicExch(counter, 0u);
        }
    }
    __syncthreads();
    return *flag;
}

// ---- 128-bit packs of floatX ----
// How many floatX fit in 16 bytes: the width of one 128-bit load or store.
static constexpr int X128 = (int)(16 / sizeof(floatX));
// W consecutive floatX, aligned to their size, so a pack of X128 moves as one 128-bit access
// (nvcc emits ld/st.global.v4 for it) and a pack of 1 is a plain scalar access. Kernels take a
// pack width W: X128 when rows start 16-byte aligned, else 1 (the scalar fallback).
template <int W>
struct alignas(sizeof(floatX) * W) floatx_pack {
    floatX v[W];
};
template <int W>
__device__ inline floatx_pack<W> pack_load(const floatX* p) {
    return *reinterpret_cast<const floatx_pack<W>*>(p);
}
template <int W>
__device__ inline void pack_store(floatX* p, const floatx_pack<W>& x) {
    *reinterpret_cast<floatx_pack<W>*>(p) = x;
}
static inline bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// ---- host conversions between fp32 and floatX that the compiler can vectorize ----
// CUDA's host conversions branch per value (a loop over the bits of a subnormal), so a host loop
// through them runs one element at a time. These are branch-free integer and fp32 arithmetic, bit
// for bit equal to CUDA's __float2half_rn / __half2float / __float2bfloat16_rn / __bfloat162float
// for every input, NaN included (test_adamw checks every 16-bit pattern one way, and the other a
// stride-251 sweep of all 2^32 fp32 patterns plus every rounding midpoint and its neighbours). The
// host AdamW of --offload uses them.
static inline uint32_t host_float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float host_bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float host_half_bits_to_float(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
    // A half's exponent and mantissa bits, moved up to a float's, read as a float are its value
    // times 2^-112, normal or subnormal alike (the product below is exact; the CPU must not flush
    // subnormal inputs, which only -ffast-math asks for).
    uint32_t r = host_float_bits(host_bits_float(em << 13) * 0x1p112f) | sign;
    r = em >= 0x7c00u ? (em << 13) | 0x7f800000u | sign : r;  // infinities
    return host_bits_float(em > 0x7c00u ? 0x7fffffffu : r);   // NaN: CUDA's, without the sign
}
static inline uint32_t host_float_to_half_bits(float f) {
    uint32_t x = host_float_bits(f), sign = (x >> 16) & 0x8000u, u = x & 0x7fffffffu;
    // From 2^-14 up: the exponent rebiased by 112, the 13 dropped bits rounded to nearest even
    // (a carry moves into the exponent, and from 65520 up into the infinity's pattern).
    uint32_t normal = (u - 0x38000000u + 0xfffu + ((u >> 13) & 1u)) >> 13;
    // Below: adding 0.5 in fp32 rounds |f| to a multiple of 2^-24, the subnormal half's unit, to
    // nearest even, and leaves that multiple in the low mantissa bits of the sum.
    uint32_t sub = host_float_bits(host_bits_float(u) + 0.5f) - 0x3f000000u;
    uint32_t r = u < 0x38800000u ? sub : normal;
    r = u >= 0x477ff000u ? 0x7c00u : r;  // 65520 and up, infinity too
    return u > 0x7f800000u ? 0x7fffu : (r | sign);
}
static inline float host_bf16_bits_to_float(uint32_t b) { return host_bits_float(b << 16); }
static inline uint32_t host_float_to_bf16_bits(float f) {
    uint32_t u = host_float_bits(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest even; the carry reaches infinity
    return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : r;
}
// floatX <-> fp32 on the host through the functions above.
static inline float host_floatx_to_float(floatX x) {
#if defined(ENABLE_FP32)
    return x;
#else
#if defined(ENABLE_FP16)
    return host_half_bits_to_float(static_cast<__half_raw>(x).x);
#else
    return host_bf16_bits_to_float(static_cast<__nv_bfloat16_raw>(x).x);
#endif
#endif
}
static inline floatX host_float_to_floatx(float f) {
#if defined(ENABLE_FP32)
    return f;
#else
#if defined(ENABLE_FP16)
    __half_raw r;
    r.x = (unsigned short)host_float_to_half_bits(f);
#else
    __nv_bfloat16_raw r;
    r.x = (unsigned short)host_float_to_bf16_bits(f);
#endif
    return floatX(r);
#endif
}
