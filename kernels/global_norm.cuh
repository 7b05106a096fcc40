// kernels/global_norm.cuh: the squared L2 norm of a gradient buffer and the count of its non-finite
// entries, deterministically, in one launch and without a host sync.
//   global_norm_squared(out, partials, grads, n, stream)
//     reads grads[n] (floatX)
//     OVERWRITES partials[2 * GLOBAL_NORM_BLOCKS] (fp32): [b] = block b's sum of squares,
//       [GLOBAL_NORM_BLOCKS + b] = block b's count of inf/NaN entries
//     partials[2 * GLOBAL_NORM_BLOCKS], read as an unsigned, counts the blocks done: it must be 0
//       before the first call (zeroed memory), and each call leaves it 0 (GLOBAL_NORM_SCRATCH_FLOATS
//       entries in all)
//     OVERWRITES out[0] = sum of grads[i]^2 in fp32 (not finite when an entry is not),
//       out[1] = number of entries that are +-inf or NaN, as a float (exact up to 2^24)
// The engine reads out[] once per optimizer step: the norm for clipping, the count for FP16 loss
// scaling's overflow test.
//
// Determinism: GLOBAL_NORM_BLOCKS is a constant, not the device's SM count, so each element goes to
// the same thread on any GPU: thread t of the grid (T = GLOBAL_NORM_BLOCKS * 256 threads) owns the
// 16-byte packs t, t+T, t+2T, ... and sums them in that order; a block adds its threads in a fixed
// order (global_norm_block_sum); then the last block to finish adds the GLOBAL_NORM_BLOCKS partials
// the same way. The one atomic, the count of blocks done, decides which block that is, never the
// order of a sum: the bits are those of a separate final launch, without its launch gap and its
// one-block wave.
// Vector path: grads 16-byte aligned, 128-bit loads of 8 fp16/bf16 (4 fp32) values, the n % 8 (% 4)
// tail elements to threads 0.. of the grid. Otherwise a scalar path: thread t owns elements
// t, t+T, ... (the same kind of fixed order, so also repeatable, though a different rounding).
// The grid is one partial wave (1,024 blocks in an H100's 1,056 slots at 32 registers): more threads
// would fill it but would change which thread owns which pack, and so the bits.
#pragma once

#include <stdint.h>
#include <string.h>

#include "common.cuh"
#include "sizes.h"

// 1024 blocks of 256 threads: one to two waves on an H100 (132 SMs of 2048 threads, depending on
// registers), each thread with up to 4 independent 128-bit loads in flight (several MiB over the
// GPU: what HBM needs to stream at full rate); more blocks would only lengthen the final sum.
// GLOBAL_NORM_BLOCKS (1024): kernels/sizes.h
#define GLOBAL_NORM_THREADS 256
#define GLOBAL_NORM_VEC (16 / (int)sizeof(floatX))  // floatX elements in 16 bytes
#define GLOBAL_NORM_UNROLL 4                        // packs loaded before they are summed

// Adds x^2 to the sum and counts x when it is inf or NaN. The square is exact for fp16/bf16 inputs.
__device__ inline void global_norm_add(float x, float* sum, float* bad) {
    *sum += x * x;
    *bad += isfinite(x) ? 0.0f : 1.0f;
}

// One 16-byte pack: its squares summed first, then added to the thread's sum, so a thread's long
// running sum takes 1/8 (1/4) as many roundings.
__device__ inline void global_norm_add_pack(const int4& q, float* sum, float* bad) {
    floatX x[GLOBAL_NORM_VEC];
    memcpy((void*)x, &q, sizeof(x));  // (void*): floatX is a class type to g++
    float pack_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < GLOBAL_NORM_VEC; j++) global_norm_add((float)x[j], &pack_sum, bad);
    *sum += pack_sum;
}

// The block's totals of (sum, bad) in thread 0, in a fixed order: every thread stores its pair,
// one barrier, then lane l of warp 0 adds entries l, l+32, ... in order and a shuffle tree adds the
// lanes. One barrier and one warp's shuffles (not two full block reductions) also keeps the CPU
// runtime, where each barrier and shuffle is a fiber switch, fast. blockDim.x must be
// GLOBAL_NORM_THREADS, and every thread of the block must call it.
__device__ inline void global_norm_block_sum(float* sum, float* bad, float* shared_sum, float* shared_bad) {
    const int per_lane = GLOBAL_NORM_THREADS / 32;
    shared_sum[threadIdx.x] = *sum;
    shared_bad[threadIdx.x] = *bad;
    __syncthreads();
    if (threadIdx.x < 32) {
        float s = 0.0f, b = 0.0f;
        for (int j = 0; j < per_lane; j++) {
            s += shared_sum[j * 32 + threadIdx.x];  // stride 32: no bank conflicts
            b += shared_bad[j * 32 + threadIdx.x];
        }
        *sum = warp_reduce_sum(s);
        *bad = warp_reduce_sum(b);
    }
}

// Each block writes its two partials; every thread reaches the block reduction's barriers. The
// block that finds every other done (its atomic increment of *done sees GLOBAL_NORM_BLOCKS - 1, and
// wraps the count to 0 for the next call) then adds the partials: thread i adds partials i,
// i+256, ... in order, then the block tree; out[0], out[1]. Each block publishes its partials with a
// fence before its increment; the last block fences after it before reading them, and reads them
// from L2 (__ldcg), where the other blocks' writes are. 8 blocks an SM (at most 32 registers): the
// grid in one wave on an H100.
__global__ void __launch_bounds__(GLOBAL_NORM_THREADS, 8)
    global_norm_kernel(float* out, float* partials, unsigned* done, const floatX* grads, size_t n, int vectorized) {
    __shared__ float shared_sum[GLOBAL_NORM_THREADS], shared_bad[GLOBAL_NORM_THREADS];
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t T = (size_t)gridDim.x * blockDim.x;
    float sum = 0.0f, bad = 0.0f;
    if (vectorized) {
        const size_t packs = n / GLOBAL_NORM_VEC;
        // Up to GLOBAL_NORM_UNROLL independent 128-bit loads in flight, then summed in pack order.
        for (size_t base = t; base < packs; base += (size_t)GLOBAL_NORM_UNROLL * T) {
            int4 q[GLOBAL_NORM_UNROLL];
#pragma unroll
            for (int u = 0; u < GLOBAL_NORM_UNROLL; u++) {
                size_t p = base + (size_t)u * T;
                if (p < packs) q[u] = *reinterpret_cast<const int4*>(grads + p * GLOBAL_NORM_VEC);
            }
#pragma unroll
            for (int u = 0; u < GLOBAL_NORM_UNROLL; u++) {
                if (base + (size_t)u * T < packs) global_norm_add_pack(q[u], &sum, &bad);
            }
        }
        size_t tail = packs * GLOBAL_NORM_VEC + t;
        if (tail < n) global_norm_add((float)grads[tail], &sum, &bad);
    } else {
        for (size_t i = t; i < n; i += T) global_norm_add((float)grads[i], &sum, &bad);
    }
    __shared__ bool last;
    global_norm_block_sum(&sum, &bad, shared_sum, shared_bad);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = sum;
        partials[GLOBAL_NORM_BLOCKS + blockIdx.x] = bad;
        __threadfence();
        last = atomicInc(done, GLOBAL_NORM_BLOCKS - 1) == GLOBAL_NORM_BLOCKS - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    sum = 0.0f;
    bad = 0.0f;
    for (int b = threadIdx.x; b < GLOBAL_NORM_BLOCKS; b += blockDim.x) {
        sum += __ldcg(partials + b);
        bad += __ldcg(partials + GLOBAL_NORM_BLOCKS + b);
    }
    global_norm_block_sum(&sum, &bad, shared_sum, shared_bad);
    if (threadIdx.x == 0) {
        out[0] = sum;
        out[1] = bad;
    }
}

static inline void global_norm_squared(float* out, float* partials, const floatX* grads, size_t n, cudaStream_t stream) {
    // n == 0 still runs: every thread finds no work, and out becomes {0, 0}.
    int vectorized = aligned16(grads);
    unsigned* done = reinterpret_cast<unsigned*>(partials + 2 * GLOBAL_NORM_BLOCKS);
    global_norm_kernel<<<GLOBAL_NORM_BLOCKS, GLOBAL_NORM_THREADS, 0, stream>>>(out, partials, done, grads, n, vectorized);
    cudaCheckLaunch("global_norm_kernel");
}
