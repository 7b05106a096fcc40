// kernels/adamw.cuh: one AdamW step over the n parameters of one tensor, element-wise, exactly the
// C engine's adamw_update_cpu (reference/ops_cpu.c) in the same operation order.
//   adamw_update(params, master, grads, m, v, n, lr, beta1, beta2, bc1, bc2, eps, weight_decay,
//                grad_scale, stream)
//     reads grads[n] (floatX); g = (float)grads[i] * grad_scale (grad_scale = clip factor / loss scale)
//     UPDATES IN PLACE m[n], v[n] (fp32): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//     p = master ? master[i] : (float)params[i]
//     p -= lr * ((m / bc1) / (sqrtf(v / bc2) + eps) + weight_decay * p)
//     OVERWRITES master[i] = p (fp32, when master != NULL) and params[i] = (floatX)p (one rounding)
//   master: the fp32 master copy in fp16/bf16 builds; NULL in the fp32 build (params are the master).
// Launch: 256 threads a block, one thread per 16 bytes of params (8 fp16/bf16 or 4 fp32 elements)
// loaded with 128-bit accesses when params, grads, m, v (and master) are all 16-byte aligned; the
// last n % 8 (or % 4) elements go to one extra thread. Otherwise a scalar kernel, one element a
// thread. Both run the same per-element code, so results do not depend on the path or launch.
// n == 0 does nothing; the arrays must not overlap. Memory-bound: 30 bytes of traffic an element
// with fp16/bf16 params and a master copy, 20 in fp32, every access coalesced.
//
// Rounding: the reference is built with -O3 -march=native, where GCC contracts a*b+c into FMAs.
// The per-element code spells out those same fmaf calls, so the fp32 build reproduces the C engine
// bit for bit on an FMA machine; nvcc then has nothing left to contract, and '/' and sqrtf are IEEE
// (correctly rounded) on both sides as long as -use_fast_math is off.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common.cuh"

#define ADAMW_BLOCK 256
#define ADAMW_VEC (16 / (int)sizeof(floatX))  // floatX elements in 16 bytes

// One element. GCC's contraction of the reference, which this follows:
//   m = fma(b1, m, (1-b1) g); v = fma(b2, v, ((1-b2) g) g); p = fma(-lr, fma(wd, p, update), p)
// The kernels below and the offloaded optimizer on the host (adamw_update_host) run this same code:
// fmaf, division and sqrtf are correctly rounded on both sides, so an offloaded run takes the same
// steps as one on the device.
__host__ __device__ inline float adamw_element(float p, float grad, float* m, float* v, float lr, float beta1, float beta2,
                                      float bc1, float bc2, float eps, float weight_decay, float grad_scale) {
    float g = grad * grad_scale;
    float mi = fmaf(beta1, *m, (1.0f - beta1) * g);
    float vi = fmaf(beta2, *v, ((1.0f - beta2) * g) * g);
    *m = mi;
    *v = vi;
    float update = (mi / bc1) / (sqrtf(vi / bc2) + eps);
    return fmaf(-lr, fmaf(weight_decay, p, update), p);
}

// One element at index i, scalar loads: the fallback and the vector kernel's tail.
__device__ inline void adamw_scalar_at(size_t i, floatX* params, float* master, const floatX* grads, float* m, float* v,
                                       float lr, float beta1, float beta2, float bc1, float bc2, float eps,
                                       float weight_decay, float grad_scale) {
    float mi = m[i], vi = v[i];
    float p = master ? master[i] : (float)params[i];
    p = adamw_element(p, (float)grads[i], &mi, &vi, lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale);
    m[i] = mi;
    v[i] = vi;
    if (master) master[i] = p;
    params[i] = (floatX)p;
}

// 16-byte loads and stores: fp32 as float4s; floatX as one int4 whose bytes memcpy reinterprets
// (defined behaviour in C++, and nvcc turns it into register moves).
__device__ inline void adamw_load_floats(float* dst, const float* src) {
#pragma unroll
    for (int j = 0; j < ADAMW_VEC; j += 4) {
        float4 q = *reinterpret_cast<const float4*>(src + j);
        dst[j] = q.x; dst[j + 1] = q.y; dst[j + 2] = q.z; dst[j + 3] = q.w;
    }
}
__device__ inline void adamw_store_floats(float* dst, const float* src) {
#pragma unroll
    for (int j = 0; j < ADAMW_VEC; j += 4)
        *reinterpret_cast<float4*>(dst + j) = make_float4(src[j], src[j + 1], src[j + 2], src[j + 3]);
}
__device__ inline void adamw_load_x(floatX* dst, const floatX* src) {
    int4 q = *reinterpret_cast<const int4*>(src);
    memcpy((void*)dst, &q, sizeof(q));  // (void*): floatX is a class type to g++
}
__device__ inline void adamw_store_x(floatX* dst, const floatX* src) {
    int4 q;
    memcpy(&q, src, sizeof(q));
    *reinterpret_cast<int4*>(dst) = q;
}

// Thread u < packs updates elements [u*VEC, u*VEC + VEC) with 128-bit accesses; thread u == packs
// (launched only when n % VEC != 0) does the remaining elements one by one.
__global__ void adamw_update_vec_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                                        float lr, float beta1, float beta2, float bc1, float bc2, float eps,
                                        float weight_decay, float grad_scale) {
    size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t packs = n / ADAMW_VEC;
    if (u < packs) {
        size_t i = u * ADAMW_VEC;
        floatX px[ADAMW_VEC], gx[ADAMW_VEC];
        float mf[ADAMW_VEC], vf[ADAMW_VEC], pf[ADAMW_VEC];
        adamw_load_x(gx, grads + i);
        adamw_load_floats(mf, m + i);
        adamw_load_floats(vf, v + i);
        if (master) {
            adamw_load_floats(pf, master + i);
        } else {
            adamw_load_x(px, params + i);
#pragma unroll
            for (int j = 0; j < ADAMW_VEC; j++) pf[j] = (float)px[j];
        }
#pragma unroll
        for (int j = 0; j < ADAMW_VEC; j++) {
            pf[j] = adamw_element(pf[j], (float)gx[j], &mf[j], &vf[j], lr, beta1, beta2, bc1, bc2, eps, weight_decay,
                                  grad_scale);
            px[j] = (floatX)pf[j];
        }
        adamw_store_floats(m + i, mf);
        adamw_store_floats(v + i, vf);
        if (master) adamw_store_floats(master + i, pf);
        adamw_store_x(params + i, px);
    } else if (u == packs) {
        for (size_t i = packs * ADAMW_VEC; i < n; i++)
            adamw_scalar_at(i, params, master, grads, m, v, lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale);
    }
}

__global__ void adamw_update_scalar_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v,
                                           size_t n, float lr, float beta1, float beta2, float bc1, float bc2, float eps,
                                           float weight_decay, float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) adamw_scalar_at(i, params, master, grads, m, v, lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale);
}


static inline void adamw_update(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                                float lr, float beta1, float beta2, float bc1, float bc2, float eps, float weight_decay,
                                float grad_scale, cudaStream_t stream) {
    if (n == 0) return;
    bool vec = aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(v) &&
               (master == NULL || aligned16(master));
    if (vec) {
        size_t threads = n / ADAMW_VEC + (n % ADAMW_VEC != 0);
        adamw_update_vec_kernel<<<(unsigned)ceil_div_size(threads, ADAMW_BLOCK), ADAMW_BLOCK, 0, stream>>>(
            params, master, grads, m, v, n, lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale);
        cudaCheckLaunch("adamw_update_vec_kernel");
    } else {
        adamw_update_scalar_kernel<<<(unsigned)ceil_div_size(n, ADAMW_BLOCK), ADAMW_BLOCK, 0, stream>>>(
            params, master, grads, m, v, n, lr, beta1, beta2, bc1, bc2, eps, weight_decay, grad_scale);
        cudaCheckLaunch("adamw_update_scalar_kernel");
    }
}

// ---- the same update on CPU threads: the optimizer offloaded to pinned host memory ----
// adamw_element for every entry. grads_and_params holds the floatX gradients on entry and the
// updated floatX weights on return (one pinned buffer for both directions of the copy); master, m,
// v are fp32 host arrays of n entries.
static inline void adamw_update_host(floatX* grads_and_params, float* master, float* m, float* v, size_t n, float lr,
                                     float beta1, float beta2, float bc1, float bc2, float eps, float weight_decay,
                                     float grad_scale) {
    // Threads over contiguous ranges, each range in SIMD lanes: the conversions are the branch-free
    // host_* ones (common.cuh), and the build's -fno-math-errno lets sqrtf vectorize (the Makefile's
    // NVCC_HOST_FLAGS; dev/bench_adamw_host prints the elements per second either way).
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float p = adamw_element(master[i], host_floatx_to_float(grads_and_params[i]), &m[i], &v[i], lr, beta1, beta2,
                                bc1, bc2, eps, weight_decay, grad_scale);
        master[i] = p;
        grads_and_params[i] = host_float_to_floatx(p);
    }
}
