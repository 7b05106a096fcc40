// kernels/adamw.cuh: one AdamW step over a range of n parameters, element-wise, exactly the C
// engine's adamw_update_cpu (reference/ops_cpu.c) in the same operation order, in one launch; each
// element with the weight decay of the part (tensor) of the range it belongs to.
//   adamw_update_segments(params, master, grads, m, v, n, seg, lr, beta1, beta2, bc1, bc2, eps,
//                         grad_scale, stream)
//     seg: the range's parts, [0, end[0]), [end[0], end[1]), ... up to end[count - 1] == n, each
//       with its weight_decay (AdamWSegments, at most ADAMW_MAX_SEGMENTS parts, built with
//       adamw_segments_add); below, wd = the decay of element i's part
//     reads grads[n] (floatX); g = (float)grads[i] * grad_scale (grad_scale = clip factor / loss scale)
//     UPDATES IN PLACE m[n], v[n] (fp32): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//     p = master ? master[i] : (float)params[i]
//     p -= lr * ((m / bc1) / (sqrtf(v / bc2) + eps) + wd * p)
//     OVERWRITES master[i] = p (fp32, when master != NULL) and params[i] = (floatX)p (one rounding)
//   adamw_update(params, master, grads, m, v, n, lr, beta1, beta2, bc1, bc2, eps, weight_decay,
//                grad_scale, stream): the same with one part, one decay (one tensor)
//   master: the fp32 master copy in fp16/bf16 builds; NULL in the fp32 build (params are the master).
// Launch: 256 threads a block, one thread per 16 bytes of params (8 fp16/bf16 or 4 fp32 elements)
// loaded with 128-bit accesses from the first index where params, grads, m, v (and master) are all
// 16-byte aligned (index 0 for aligned buffers; a few elements in for slices of them at a common
// index, such as a ZeRO shard); the elements before it and the last (n - head) % 8 (or % 4) go to
// one extra thread. When the arrays have no common aligned index, a scalar kernel, one element a
// thread. Both run the same per-element code, so results do not depend on the path, the launch or
// how the range is split into launches. n == 0 does nothing; the arrays must not overlap.
// Memory-bound: 28 bytes of traffic an element (fp16/bf16 with a master copy, and fp32), every
// access coalesced.
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

// ---- the weight decay of each part of the range ----
// One launch updates a range that spans several tensors (a rank's whole optimizer range), and each
// tensor has its own decay (none for biases and LayerNorm parameters). The launch takes the range's
// parts as a small table by value, in its arguments: no device memory to allocate or fill (nothing
// is allocated in the training loop), and every thread reads it from the constant bank, where a
// warp's threads, nearly always in one part, read the same entry.
#define ADAMW_MAX_SEGMENTS 16  // GPT2_NUM_PARAM_TENSORS: one part per parameter tensor at most
typedef struct {
    int count;
    size_t end[ADAMW_MAX_SEGMENTS];           // part k is [end[k - 1], end[k]) of the range (end[-1] = 0)
    float weight_decay[ADAMW_MAX_SEGMENTS];
} AdamWSegments;

// Appends the part ending at element `end` of the range (ascending ends). An empty part is dropped
// and one with the previous part's decay extends it (fewer entries to search, the same result).
static inline void adamw_segments_add(AdamWSegments* s, size_t end, float weight_decay) {
    size_t begin = s->count ? s->end[s->count - 1] : 0;
    if (end < begin) fail_at("adamw", "adamw_segments_add", __FILE__, __LINE__, "part ends out of order");
    if (end == begin) return;
    if (s->count && s->weight_decay[s->count - 1] == weight_decay) {
        s->end[s->count - 1] = end;
        return;
    }
    if (s->count == ADAMW_MAX_SEGMENTS) fail_at("adamw", "adamw_segments_add", __FILE__, __LINE__, "too many parts");
    s->end[s->count] = end;
    s->weight_decay[s->count] = weight_decay;
    s->count++;
}

// The part holding element i of the range (i < its last end): the first k with i < end[k], by
// bisection (4 steps for 16 parts).
__device__ inline int adamw_segment_of(const AdamWSegments& s, size_t i) {
    int lo = 0, hi = s.count - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (i < s.end[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

// One element at index i, scalar loads, with its part's decay: the fallback and the vector kernel's
// head and tail.
__device__ inline void adamw_scalar_at(size_t i, floatX* params, float* master, const floatX* grads, float* m, float* v,
                                       const AdamWSegments& seg, float lr, float beta1, float beta2, float bc1,
                                       float bc2, float eps, float grad_scale) {
    float mi = m[i], vi = v[i];
    float p = master ? master[i] : (float)params[i];
    float wd = seg.weight_decay[adamw_segment_of(seg, i)];
    p = adamw_element(p, (float)grads[i], &mi, &vi, lr, beta1, beta2, bc1, bc2, eps, wd, grad_scale);
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

// The first `head` elements (head < VEC) come before the arrays' common 16-byte boundary. Thread
// u < packs updates elements [head + u*VEC, head + u*VEC + VEC) with 128-bit accesses; thread
// u == packs (launched only when there is a head or a tail) does the head and the last
// (n - head) % VEC elements one by one. A part boundary may fall inside a vector: each element takes
// its own part's decay (the next part's once i + j reaches the current part's end).
__global__ void adamw_update_vec_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                                        size_t head, AdamWSegments seg, float lr, float beta1, float beta2, float bc1,
                                        float bc2, float eps, float grad_scale) {
    size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t packs = (n - head) / ADAMW_VEC;
    if (u < packs) {
        size_t i = head + u * ADAMW_VEC;
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
        int k = adamw_segment_of(seg, i);
        size_t seg_end = seg.end[k];
        float wd = seg.weight_decay[k];
#pragma unroll
        for (int j = 0; j < ADAMW_VEC; j++) {
            while (i + j >= seg_end) {  // a part boundary inside the vector: only where one crosses it
                k++;
                seg_end = seg.end[k];
                wd = seg.weight_decay[k];
            }
            pf[j] = adamw_element(pf[j], (float)gx[j], &mf[j], &vf[j], lr, beta1, beta2, bc1, bc2, eps, wd, grad_scale);
            px[j] = (floatX)pf[j];
        }
        adamw_store_floats(m + i, mf);
        adamw_store_floats(v + i, vf);
        if (master) adamw_store_floats(master + i, pf);
        adamw_store_x(params + i, px);
    } else if (u == packs) {
        // r < head: the head's element r; then the tail's, which start at head + packs * VEC.
        for (size_t r = 0; r < n - packs * ADAMW_VEC; r++)
            adamw_scalar_at(r < head ? r : r + packs * ADAMW_VEC, params, master, grads, m, v, seg, lr, beta1, beta2,
                            bc1, bc2, eps, grad_scale);
    }
}

__global__ void adamw_update_scalar_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v,
                                           size_t n, AdamWSegments seg, float lr, float beta1, float beta2, float bc1,
                                           float bc2, float eps, float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) adamw_scalar_at(i, params, master, grads, m, v, seg, lr, beta1, beta2, bc1, bc2, eps, grad_scale);
}

// The elements before params, grads, m, v (and master) all reach a 16-byte boundary together, or
// -1 when they never do (their offsets from a boundary disagree, e.g. one array a single element
// off while the others are not): then the scalar kernel. Arrays that are slices of aligned buffers
// at one common index (a ZeRO shard starting anywhere) have such a head, at most VEC - 1 elements.
static inline long adamw_vector_head(const floatX* params, const float* master, const floatX* grads, const float* m,
                                     const float* v) {
    if ((uintptr_t)params % sizeof(floatX) != 0) return -1;
    size_t head = (16 - (uintptr_t)params % 16) % 16 / sizeof(floatX);
    bool ok = aligned16(params + head) && aligned16(grads + head) && aligned16(m + head) && aligned16(v + head) &&
              (master == NULL || aligned16(master + head));
    return ok ? (long)head : -1;
}

// The update of the n elements of a range whose parts seg describes (seg->end[seg->count - 1] == n),
// in one launch.
static inline void adamw_update_segments(floatX* params, float* master, const floatX* grads, float* m, float* v,
                                         size_t n, const AdamWSegments* seg, float lr, float beta1, float beta2,
                                         float bc1, float bc2, float eps, float grad_scale, cudaStream_t stream) {
    if (n == 0) return;
    if (seg->count < 1 || seg->end[seg->count - 1] != n)
        fail_at("adamw", "adamw_update_segments", __FILE__, __LINE__, "the parts do not end at n");
    long head = adamw_vector_head(params, master, grads, m, v);
    if (head >= 0 && (size_t)head < n) {
        size_t rest = n - (size_t)head;
        size_t threads = rest / ADAMW_VEC + (head > 0 || rest % ADAMW_VEC != 0);
        adamw_update_vec_kernel<<<(unsigned)ceil_div_size(threads, ADAMW_BLOCK), ADAMW_BLOCK, 0, stream>>>(
            params, master, grads, m, v, n, (size_t)head, *seg, lr, beta1, beta2, bc1, bc2, eps, grad_scale);
        cudaCheckLaunch("adamw_update_vec_kernel");
    } else {
        adamw_update_scalar_kernel<<<(unsigned)ceil_div_size(n, ADAMW_BLOCK), ADAMW_BLOCK, 0, stream>>>(
            params, master, grads, m, v, n, *seg, lr, beta1, beta2, bc1, bc2, eps, grad_scale);
        cudaCheckLaunch("adamw_update_scalar_kernel");
    }
}

// One tensor (one part, one decay).
static inline void adamw_update(floatX* params, float* master, const floatX* grads, float* m, float* v, size_t n,
                                float lr, float beta1, float beta2, float bc1, float bc2, float eps, float weight_decay,
                                float grad_scale, cudaStream_t stream) {
    AdamWSegments seg = {};  // no parts yet
    adamw_segments_add(&seg, n, weight_decay);
    adamw_update_segments(params, master, grads, m, v, n, &seg, lr, beta1, beta2, bc1, bc2, eps, grad_scale, stream);
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
