// test_runtime.cu: the CPU runtime's own tests - kernels with shuffles, shared memory, barriers,
// atomics, half/bf16, 3-D indices, streams/events and memcpy kinds. The same file compiles with nvcc
// and should pass on a GPU too; checks that only make sense on the emulation (NaN poisoning, the
// divergence abort, the H100-like properties) are under #ifdef CUDA_CPU.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "cuda_test.h"
#include "test.h"

static uint32_t rng_state = 12345u;
static float frand() {  // uniform in [-1, 1)
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

// ---------------------------------------------------------------------------------------------
// Reductions: warp shuffles plus a static __shared__ array
// ---------------------------------------------------------------------------------------------
__device__ float warp_sum_xor(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float warp_sum_down(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

template <bool use_xor>
__global__ void block_sum_kernel(const float* x, float* out, int n) {
    __shared__ float partial[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    for (int j = i; j < n; j += gridDim.x * blockDim.x) v += x[j];
    v = use_xor ? warp_sum_xor(v) : warp_sum_down(v);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
        v = use_xor ? warp_sum_xor(v) : warp_sum_down(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

static void test_reduce() {
    const int blocks = 64, threads = 256, n = blocks * threads * 4 + 77;
    std::vector<float> x(n);
    double ref = 0.0;
    for (int i = 0; i < n; i++) { x[i] = frand(); ref += x[i]; }
    float *dx, *dout;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dout, blocks * sizeof(float)));
    CK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    for (int variant = 0; variant < 2; variant++) {
        if (variant == 0) block_sum_kernel<true><<<blocks, threads>>>(dx, dout, n);
        else block_sum_kernel<false><<<blocks, threads>>>(dx, dout, n);
        CK(cudaGetLastError());
        std::vector<float> out(blocks);
        CK(cudaMemcpy(out.data(), dout, blocks * sizeof(float), cudaMemcpyDeviceToHost));
        double got = 0.0;
        for (float v : out) got += v;
        check_close(variant == 0 ? "reduce_shfl_xor_smem_64x256" : "reduce_shfl_down_smem_64x256", got, ref, 1e-5);
    }
    CK(cudaFree(dx));
    CK(cudaFree(dout));
}

// ---------------------------------------------------------------------------------------------
// Barriers in loops, dynamic shared memory, a partial last block: an inclusive block scan
// ---------------------------------------------------------------------------------------------
__global__ void block_scan_kernel(const int* x, int* out, int n) {
    extern __shared__ int buf[];  // 2 * blockDim.x ints
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    int* a = buf;
    int* b = buf + blockDim.x;
    a[t] = i < n ? x[i] : 0;
    __syncthreads();
    for (unsigned off = 1; off < blockDim.x; off *= 2) {
        b[t] = t >= (int)off ? a[t] + a[t - off] : a[t];
        __syncthreads();
        int* tmp = a;
        a = b;
        b = tmp;
    }
    if (i < n) out[i] = a[t];
}

static void test_scan() {
    const int threads = 128, n = 1000;  // 8 blocks, the last one 104 threads short
    const int blocks = (n + threads - 1) / threads;
    std::vector<int> x(n);
    for (int i = 0; i < n; i++) x[i] = (i * 37) % 11 - 5;
    int *dx, *dout;
    CK(cudaMalloc(&dx, n * sizeof(int)));
    CK(cudaMalloc(&dout, (n + 16) * sizeof(int)));
    CK(cudaMemset(dout, 0x7f, (n + 16) * sizeof(int)));
    CK(cudaMemcpy(dx, x.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    block_scan_kernel<<<blocks, threads, 2 * threads * sizeof(int)>>>(dx, dout, n);
    CK(cudaGetLastError());
    std::vector<int> out(n + 16);
    CK(cudaMemcpy(out.data(), dout, (n + 16) * sizeof(int), cudaMemcpyDeviceToHost));
    int bad = -1, acc = 0;
    for (int i = 0; i < n && bad < 0; i++) {
        if (i % threads == 0) acc = 0;
        acc += x[i];
        if (out[i] != acc) bad = i;
    }
    char why[128];
    snprintf(why, sizeof(why), "first wrong element %d", bad);
    test_report(bad < 0, "scan_barriers_in_loop_dynamic_smem", why);
    int untouched = 1;
    for (int i = n; i < n + 16; i++) untouched &= out[i] == 0x7f7f7f7f;
    CHECK(untouched, "partial_last_block_writes_nothing_past_n");
    CK(cudaFree(dx));
    CK(cudaFree(dout));
}

// Each thread stores to a static __shared__ word and reads it again after barriers during which other
// threads overwrote it: an optimiser that kept the first value in a register would be caught here.
template <int N>
__global__ void shared_visibility_kernel(int* out) {
    __shared__ int word;
    __shared__ int arr[N];
    if (threadIdx.x == 0) word = 1;
    arr[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    int first = word;
    __syncthreads();
    if (threadIdx.x == N - 1) word = 2;
    arr[threadIdx.x] = arr[N - 1 - threadIdx.x] * 0 + 3 * (int)threadIdx.x;  // same slot, new value
    __syncthreads();
    out[blockIdx.x * N + threadIdx.x] = first * 1000 + word * 100000 + arr[N - 1 - threadIdx.x];
}

static void test_shared_visibility() {
    const int n = 64, blocks = 3;
    int* d;
    CK(cudaMalloc(&d, blocks * n * sizeof(int)));
    shared_visibility_kernel<n><<<blocks, n>>>(d);
    CK(cudaGetLastError());
    std::vector<int> o(blocks * n);
    CK(cudaMemcpy(o.data(), d, blocks * n * sizeof(int), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int t = 0; t < blocks * n; t++) bad += o[t] != 1000 + 200000 + 3 * (n - 1 - t % n);
    CHECK(bad == 0, "static_shared_writes_visible_after_barrier");
    CK(cudaFree(d));
}

// ---------------------------------------------------------------------------------------------
// Atomics under contention: every thread of 64 blocks hits the same few words
// ---------------------------------------------------------------------------------------------
struct AtomicCounters {
    int icount;
    float fsum;
    unsigned long long ucount;
    int imax;
    int cas_count;
    unsigned umin;
    double dsum;
};

__global__ void atomics_kernel(AtomicCounters* c) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&c->icount, 1);
    atomicAdd(&c->fsum, 0.5f);
    atomicAdd(&c->ucount, 3ull);
    atomicMax(&c->imax, (g * 7919) % 100003);
    atomicMin(&c->umin, (unsigned)((g * 104729u) % 1000003u) + 5u);
    atomicAdd(&c->dsum, 0.25);
    // An increment built from atomicCAS, as lock-free code does.
    int old = atomicAdd(&c->cas_count, 0), assumed;
    do {
        assumed = old;
        old = atomicCAS(&c->cas_count, assumed, assumed + 1);
    } while (assumed != old);
}

static void test_atomics() {
    const int blocks = 64, threads = 256, n = blocks * threads;
    AtomicCounters h;
    memset(&h, 0, sizeof(h));
    h.imax = -1;
    h.umin = 0xffffffffu;
    AtomicCounters* d;
    CK(cudaMalloc(&d, sizeof(AtomicCounters)));
    CK(cudaMemcpy(d, &h, sizeof(h), cudaMemcpyHostToDevice));
    atomics_kernel<<<blocks, threads>>>(d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
    int imax = -1;
    unsigned umin = 0xffffffffu;
    for (int g = 0; g < n; g++) {
        int v = (g * 7919) % 100003;
        if (v > imax) imax = v;
        unsigned u = (unsigned)((g * 104729u) % 1000003u) + 5u;
        if (u < umin) umin = u;
    }
    CHECK(h.icount == n, "atomicAdd_int_contended");
    CHECK(h.fsum == 0.5f * n, "atomicAdd_float_contended");
    CHECK(h.ucount == 3ull * n, "atomicAdd_ull_contended");
    CHECK(h.imax == imax, "atomicMax_int_contended");
    CHECK(h.umin == umin, "atomicMin_unsigned_contended");
    CHECK(h.cas_count == n, "atomicCAS_loop_contended");
    CHECK(h.dsum == 0.25 * n, "atomicAdd_double_contended");
    CK(cudaFree(d));
}

// ---------------------------------------------------------------------------------------------
// 3-D grid and block indices
// ---------------------------------------------------------------------------------------------
__global__ void index_kernel(uint4* out) {
    unsigned bl = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned tl = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned g = bl * (blockDim.x * blockDim.y * blockDim.z) + tl;
    out[g] = make_uint4(threadIdx.x | threadIdx.y << 10 | threadIdx.z << 20,
                        blockIdx.x | blockIdx.y << 10 | blockIdx.z << 20,
                        blockDim.x | blockDim.y << 10 | blockDim.z << 20,
                        gridDim.x | gridDim.y << 10 | gridDim.z << 20);
}

static void test_indices() {
    dim3 grid(3, 2, 2), block(8, 4, 2);
    const int n = 3 * 2 * 2 * 8 * 4 * 2;
    uint4* d;
    CK(cudaMalloc(&d, n * sizeof(uint4)));
    index_kernel<<<grid, block>>>(d);
    CK(cudaGetLastError());
    std::vector<uint4> out(n);
    CK(cudaMemcpy(out.data(), d, n * sizeof(uint4), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned bz = 0; bz < 2; bz++) for (unsigned by = 0; by < 2; by++) for (unsigned bx = 0; bx < 3; bx++)
    for (unsigned tz = 0; tz < 2; tz++) for (unsigned ty = 0; ty < 4; ty++) for (unsigned tx = 0; tx < 8; tx++) {
        unsigned g = (bx + 3 * (by + 2 * bz)) * 64 + tx + 8 * (ty + 4 * tz);
        uint4 e = make_uint4(tx | ty << 10 | tz << 20, bx | by << 10 | bz << 20, 8 | 4 << 10 | 2 << 20, 3 | 2 << 10 | 2 << 20);
        uint4 o = out[g];
        bad += o.x != e.x || o.y != e.y || o.z != e.z || o.w != e.w;
    }
    CHECK(bad == 0, "indices_3d_grid_and_block");
    CK(cudaFree(d));
}

// ---------------------------------------------------------------------------------------------
// Warp intrinsics
// ---------------------------------------------------------------------------------------------
#define WARP_OUTS 12
__global__ void warp_ops_kernel(int* out) {
    int t = threadIdx.x, lane = t % 32;
    int* o = out + t * WARP_OUTS;
    o[0] = __shfl_sync(0xffffffffu, t * 10, 3);
    o[1] = __shfl_up_sync(0xffffffffu, t, 1);
    o[2] = __shfl_down_sync(0xffffffffu, t, 2);
    o[3] = __shfl_xor_sync(0xffffffffu, t, 5, 16);
    o[4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    o[5] = __any_sync(0xffffffffu, t == 40);
    o[6] = __all_sync(0xffffffffu, lane < 31);
    o[7] = (int)__reduce_add_sync(0xffffffffu, (unsigned)t);
    o[8] = (int)__match_any_sync(0xffffffffu, lane / 8);
    int v = 1;
    for (int d = 1; d < 32; d *= 2) {
        int up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    o[9] = v;
    if (lane < 16) o[10] = __shfl_xor_sync(0x0000ffffu, t, 1);
    else o[10] = __shfl_xor_sync(0xffff0000u, t, 2);
    __syncwarp();
    o[11] = __syncthreads_count(t % 4 == 0) + 1000 * __syncthreads_or(t == 63) + 100000 * __syncthreads_and(t < 63);
}

static void test_warp_ops() {
    const int threads = 64;
    int* d;
    CK(cudaMalloc(&d, threads * WARP_OUTS * sizeof(int)));
    warp_ops_kernel<<<1, threads>>>(d);
    CK(cudaGetLastError());
    std::vector<int> o(threads * WARP_OUTS);
    CK(cudaMemcpy(o.data(), d, o.size() * sizeof(int), cudaMemcpyDeviceToHost));
    const char* names[WARP_OUTS] = {"shfl_sync_broadcast", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync_width16",
                                    "ballot_sync", "any_sync", "all_sync", "reduce_add_sync", "match_any_sync",
                                    "shfl_up_prefix_sum", "shfl_partial_masks", "syncthreads_count_or_and"};
    int bad[WARP_OUTS] = {0};
    for (int t = 0; t < threads; t++) {
        int lane = t % 32, base = t - lane;
        unsigned ballot = 0;
        for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
        int e[WARP_OUTS] = {
            (base + 3) * 10, lane >= 1 ? t - 1 : t, lane < 30 ? t + 2 : t, base + ((lane ^ 5)),
            (int)ballot, base == 32, 0, 32 * base + 496, (int)(0xffu << (8 * (lane / 8))),
            lane + 1, lane < 16 ? t ^ 1 : t ^ 2, 16 + 1000 + 0};
        for (int k = 0; k < WARP_OUTS; k++) bad[k] += o[t * WARP_OUTS + k] != e[k];
    }
    for (int k = 0; k < WARP_OUTS; k++) {
        char name[64], why[64];
        snprintf(name, sizeof(name), "warp_%s", names[k]);
        snprintf(why, sizeof(why), "%d of %d threads wrong", bad[k], threads);
        test_report(bad[k] == 0, name, why);
    }
    CK(cudaFree(d));
}

// ---------------------------------------------------------------------------------------------
// half / bfloat16 loads, stores and arithmetic; vector types
// ---------------------------------------------------------------------------------------------
__global__ void half_kernel(const float* x, __half* h, __nv_bfloat16* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    h[i] = __float2half(x[i]);
    b[i] = __float2bfloat16(x[i]);
    out[4 * i + 0] = __half2float(__hmul(h[i], __float2half(3.0f)));
    out[4 * i + 1] = __bfloat162float(__hadd(b[i], __float2bfloat16(0.5f)));
    if (i % 2 == 0 && i + 1 < n) {
        const float2 f2 = reinterpret_cast<const float2*>(x)[i / 2];
        __half2 h2 = __floats2half2_rn(f2.x, f2.y);
        __nv_bfloat162 b2 = __floats2bfloat162_rn(f2.x, f2.y);
        h2 = __hadd2(h2, h2);
        b2 = __hmul2(b2, b2);
        out[4 * i + 2] = __low2float(h2) + __high2float(h2);
        out[4 * i + 3] = __low2float(b2) + __high2float(b2);
    }
}

static void test_half() {
    const int n = 300;
    std::vector<float> x(n);
    for (int i = 0; i < n; i++) x[i] = frand() * 8.0f;
    float *dx, *dout;
    __half* dh;
    __nv_bfloat16* db;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dout, 4 * n * sizeof(float)));
    CK(cudaMalloc(&dh, n * sizeof(__half)));
    CK(cudaMalloc(&db, n * sizeof(__nv_bfloat16)));
    CK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    half_kernel<<<(n + 127) / 128, 128>>>(dx, dh, db, dout, n);
    CK(cudaGetLastError());
    std::vector<__half> h(n);
    std::vector<__nv_bfloat16> b(n);
    std::vector<float> out(4 * n);
    CK(cudaMemcpy(h.data(), dh, n * sizeof(__half), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), db, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out.data(), dout, 4 * n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad_store = 0, bad_math = 0, bad_vec = 0;
    for (int i = 0; i < n; i++) {
        __half eh = __float2half(x[i]);
        __nv_bfloat16 eb = __float2bfloat16(x[i]);
        bad_store += memcmp(&h[i], &eh, 2) != 0 || memcmp(&b[i], &eb, 2) != 0;
        float m0 = __half2float(__float2half(__half2float(eh) * 3.0f));
        float m1 = __bfloat162float(__float2bfloat16(__bfloat162float(eb) + 0.5f));
        bad_math += out[4 * i] != m0 || out[4 * i + 1] != m1;
        if (i % 2 == 0 && i + 1 < n) {
            float a = __half2float(__float2half(x[i])), c = __half2float(__float2half(x[i + 1]));
            float e2 = __half2float(__float2half(a + a)) + __half2float(__float2half(c + c));
            float p = __bfloat162float(__float2bfloat16(x[i])), q = __bfloat162float(__float2bfloat16(x[i + 1]));
            float e3 = __bfloat162float(__float2bfloat16(p * p)) + __bfloat162float(__float2bfloat16(q * q));
            bad_vec += out[4 * i + 2] != e2 || out[4 * i + 3] != e3;
        }
    }
    CHECK(bad_store == 0, "half_bf16_stores_round_like_host");
    CHECK(bad_math == 0, "half_bf16_arithmetic");
    CHECK(bad_vec == 0, "half2_bf162_float2_vectors");
    CK(cudaFree(dx));
    CK(cudaFree(dout));
    CK(cudaFree(dh));
    CK(cudaFree(db));
}

// ---------------------------------------------------------------------------------------------
// Fast-math and cache-hint intrinsics
// ---------------------------------------------------------------------------------------------
__global__ void intrinsics_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = __ldg(&x[i]), w = __ldcs(&x[i]);
    __stcs(&out[6 * i + 0], __expf(v));
    out[6 * i + 1] = rsqrtf(fabsf(w) + 1.0f);
    out[6 * i + 2] = __fdividef(v, 3.0f);
    out[6 * i + 3] = __saturatef(v);
    out[6 * i + 4] = tanhf(v);
    out[6 * i + 5] = __int_as_float(__float_as_int(v)) + (float)__popc(i);
}

static void test_intrinsics() {
    const int n = 200;
    std::vector<float> x(n);
    for (int i = 0; i < n; i++) x[i] = frand() * 4.0f;
    float *dx, *dout;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dout, 6 * n * sizeof(float)));
    CK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    intrinsics_kernel<<<(n + 63) / 64, 64>>>(dx, dout, n);
    CK(cudaGetLastError());
    std::vector<float> o(6 * n);
    CK(cudaMemcpy(o.data(), dout, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double v = x[i];
        double e[6] = {exp(v), 1.0 / sqrt(fabs(v) + 1.0), v / 3.0, v < 0 ? 0.0 : (v > 1 ? 1.0 : v), tanh(v),
                       v + __builtin_popcount(i)};
        for (int k = 0; k < 6; k++) {
            double err = fabs(o[6 * i + k] - e[k]) / fmax(1.0, fabs(e[k]));
            if (err > worst) worst = err;
        }
    }
    char why[64];
    snprintf(why, sizeof(why), "worst relative error %.3g", worst);
    test_report(worst < 1e-5, "fast_math_and_ldg_ldcs_stcs", why);
    CK(cudaFree(dx));
    CK(cudaFree(dout));
}

// ---------------------------------------------------------------------------------------------
// Streams, events, memcpy kinds, launch-configuration errors
// ---------------------------------------------------------------------------------------------
__global__ void scale_kernel(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

// cudaMemcpyAsync with pinned memory completes when the host synchronizes (README: "pinned copies
// complete late"): every correct way to wait sees the data, in pieces on two streams as a pipeline
// would, through an event the other stream waited for, and after other device work.
static void test_pinned_async_copies() {
    const int n = 3 * 4096 + 17;  // whole pages and a partial one
    float *d, *d2, *h;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMalloc(&d2, n * sizeof(float)));
    CK(cudaMallocHost(&h, n * sizeof(float)));
    cudaStream_t a, b;
    CK(cudaStreamCreate(&a));
    CK(cudaStreamCreate(&b));
    cudaEvent_t piece[4], up;
    for (cudaEvent_t& e : piece) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&up, cudaEventDisableTiming));
    std::vector<float> x(n);
    for (int i = 0; i < n; i++) x[i] = (float)i;
    CK(cudaMemcpy(d, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    // Four pieces down on a, each waited for by its event; each updated on the host and sent up on b.
    const int p = (n + 3) / 4;
    for (int k = 0; k < 4; k++) {
        int lo = k * p, hi = std::min(n, lo + p);
        CK(cudaMemcpyAsync(h + lo, d + lo, (hi - lo) * sizeof(float), cudaMemcpyDeviceToHost, a));
        CK(cudaEventRecord(piece[k], a));
    }
    int bad = 0;
    for (int k = 0; k < 4; k++) {
        int lo = k * p, hi = std::min(n, lo + p);
        CK(cudaEventSynchronize(piece[k]));
        for (int i = lo; i < hi; i++) {
            bad += h[i] != (float)i;
            h[i] = 3.0f * h[i];
        }
        CK(cudaMemcpyAsync(d2 + lo, h + lo, (hi - lo) * sizeof(float), cudaMemcpyHostToDevice, b));
    }
    CK(cudaEventRecord(up, b));
    CK(cudaStreamWaitEvent(a, up, 0));
    scale_kernel<<<(n + 255) / 256, 256, 0, a>>>(d2, 2.0f, n);  // device work after the uploads
    CK(cudaGetLastError());
    CK(cudaEventRecord(piece[0], a));  // b's download of d2 comes after a's kernel
    CK(cudaStreamWaitEvent(b, piece[0], 0));
    CK(cudaMemcpyAsync(h, d2, n * sizeof(float), cudaMemcpyDeviceToHost, b));
    CK(cudaEventRecord(up, b));
    CK(cudaStreamWaitEvent(a, up, 0));
    CK(cudaStreamSynchronize(a));  // a waited for b's download: synchronizing a completes it
    for (int i = 0; i < n; i++) bad += h[i] != 6.0f * i;
    CHECK(bad == 0, "pinned_async_copies_pipeline_events_and_waits");
    // Pageable memory copies at once; the default stream's synchronization completes everything.
    std::vector<float> y(n, -1.0f);
    CK(cudaMemcpyAsync(y.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, a));
    bad = 0;
    for (int i = 0; i < n; i++) bad += y[i] != (float)i;
    CK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, a));
    CK(cudaStreamSynchronize(0));
    for (int i = 0; i < n; i++) bad += h[i] != (float)i;
    CK(cudaMemcpyAsync(h, d2, 16, cudaMemcpyDeviceToHost, a));
    CK(cudaDeviceSynchronize());
    bad += h[1] != 6.0f;
    CHECK(bad == 0, "pageable_async_copy_at_once_default_stream_and_device_sync_complete_pinned");
    for (cudaEvent_t& e : piece) CK(cudaEventDestroy(e));
    CK(cudaEventDestroy(up));
    CK(cudaStreamDestroy(a));
    CK(cudaStreamDestroy(b));
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
    CK(cudaFree(d2));
}

static void test_streams_events_memcpy() {
    const int n = 1000;
    std::vector<float> x(n), y(n, 0.0f);
    for (int i = 0; i < n; i++) x[i] = (float)i;
    cudaStream_t s;
    cudaEvent_t e0, e1, nt;
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
    float *d, *d2, *pinned;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMalloc(&d2, n * sizeof(float)));
    CK(cudaMallocHost(&pinned, n * sizeof(float)));
    CK(cudaEventRecord(e0, s));
    CK(cudaMemcpyAsync(d, x.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    scale_kernel<<<(n + 255) / 256, 256, 0, s>>>(d, 2.0f, n);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(d2, d, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    CK(cudaMemsetAsync(d, 0, n * sizeof(float), s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventRecord(nt, s));
    CK(cudaStreamWaitEvent(s, e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaStreamSynchronize(s));
    float ms = -1.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CHECK(ms >= 0.0f, "event_elapsed_time_nonnegative");
    CHECK(cudaEventElapsedTime(&ms, e0, nt) != cudaSuccess, "event_elapsed_time_refused_without_timing");
    cudaGetLastError();
    CK(cudaMemcpy(pinned, d2, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), pinned, n * sizeof(float), cudaMemcpyHostToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += y[i] != 2.0f * i;
    CHECK(bad == 0, "stream_memcpy_h2d_d2d_d2h_h2h_kernel");
    CK(cudaMemcpy(y.data(), d, n * sizeof(float), cudaMemcpyDefault));
    bad = 0;
    for (int i = 0; i < n; i++) bad += y[i] != 0.0f;
    CHECK(bad == 0, "memsetAsync_then_memcpy_default");
    CK(cudaMemcpy(d, x.data() + 1, 10 * sizeof(float), cudaMemcpyDefault));
    CK(cudaMemcpy(y.data(), d, 10 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(y[0] == 1.0f && y[9] == 10.0f, "memcpy_default_host_to_device");
    CK(cudaFreeHost(pinned));
    CK(cudaFree(d));
    CK(cudaFree(d2));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaEventDestroy(nt));
    CK(cudaStreamDestroy(s));
}

__global__ void big_smem_kernel(float* out) {
    extern __shared__ __align__(16) float big[];
    const int n = 16384;  // 64 KiB
    for (int i = threadIdx.x; i < n; i += blockDim.x) big[i] = (float)(i & 15);
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += big[n - 1 - i];
    atomicAdd(out, s);
}

static void test_launch_errors() {
    float* d;
    CK(cudaMalloc(&d, sizeof(float)));
    CK(cudaMemset(d, 0, sizeof(float)));
    scale_kernel<<<1, 2048>>>(d, 1.0f, 1);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "launch_with_2048_threads_refused");
    CHECK(cudaGetLastError() == cudaSuccess, "getlasterror_clears");
    big_smem_kernel<<<1, 256, 65536>>>(d);
    CHECK(cudaGetLastError() != cudaSuccess, "launch_over_48k_smem_without_attribute_refused");
    CK(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
    big_smem_kernel<<<1, 256, 65536>>>(d);
    CK(cudaGetLastError());
    float s = 0.0f;
    CK(cudaMemcpy(&s, d, sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(s == 1024.0f * 120.0f, "launch_with_64k_smem_after_attribute");
    CK(cudaFree(d));
}

// ---------------------------------------------------------------------------------------------
// Launch forms cu2cpu.pl must rewrite: qualified and template kernels (explicit or deduced
// arguments), __launch_bounds__, multi-line launches, launches inside templates; and text it must
// leave alone: a launch in a comment or in a string.
// ---------------------------------------------------------------------------------------------
namespace kernels_ns {
template <typename T>
__global__ void __launch_bounds__(128) fill_kernel(T* x, T v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + (T)i;
}
}  // namespace kernels_ns

__global__ void add_kernel(float* x, float v, int n) {  // add_kernel<<<1, 1>>>(x) in a comment
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}

template <typename T>
static int launch_fill(T* x, T v, int n, cudaStream_t s) {
    int l0 = __LINE__;
    kernels_ns::fill_kernel<<<dim3((n + 127) / 128, 1),
                              dim3(128),
                              0, s>>>(x,
                                      v, n);
    return __LINE__ - l0;
}

static void test_launch_forms() {
    const int n = 300;
    float* d;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaMalloc(&d, n * sizeof(float)));
    int lines = launch_fill(d, 5.0f, n, s);
    CK(cudaGetLastError());
    add_kernel<<<(n + 31) / 32, 32>>>(d, 1.0f, n);
    kernels_ns::fill_kernel<<<(n + 127) / 128, 128>>>(d + 100, 2.0f, 100);  // deduced template arguments
    kernels_ns::fill_kernel<float><<<1, 128, 0, s>>>(d + 200, 3.0f, 50);
    CK(cudaGetLastError());
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float e = 5.0f + i + 1.0f;
        if (i >= 100 && i < 200) e = 2.0f + (i - 100);
        if (i >= 200 && i < 250) e = 3.0f + (i - 200);
        bad += h[i] != e;
    }
    CHECK(bad == 0, "launch_forms_qualified_template_multiline");
    CHECK(lines == 5, "launch_rewrite_keeps_line_numbers");
    const char* text = "add_kernel<<<1, 1>>>(x)";
    CHECK(strlen(text) == 23, "launch_inside_string_untouched");
    CK(cudaFree(d));
    CK(cudaStreamDestroy(s));
}

// ---------------------------------------------------------------------------------------------
// Emulation-only checks: NaN poisoning, barriers and exited threads, the divergence abort,
// reported properties. Cases that abort, or need another mode, run in a child (child.h).
// ---------------------------------------------------------------------------------------------
#ifdef CUDA_CPU
#include <string>
#include "cuda_cpu/child.h"

__global__ void read_smem_before_write_kernel(float* out) {
    extern __shared__ float s[];
    out[threadIdx.x] = s[threadIdx.x];
}

// With the checks off (they would stop the read), unwritten shared memory reads as NaN.
static int child_poison_smem() {
    float* d;
    CK(cudaMalloc(&d, 64 * sizeof(float)));
    read_smem_before_write_kernel<<<1, 64, 64 * sizeof(float)>>>(d);
    std::vector<float> f(64);
    CK(cudaMemcpy(f.data(), d, 64 * sizeof(float), cudaMemcpyDeviceToHost));
    int nan_f = 0;
    for (int i = 0; i < 64; i++) nan_f += isnan(f[i]);
    printf("%d\n", nan_f);
    return 0;
}

static void test_poison() {
    const int n = 1024;
    float* d;
    CK(cudaMalloc(&d, n * sizeof(float)));
    std::vector<float> f(n);
    CK(cudaMemcpy(f.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    int nan_f = 0, nan_h = 0, nan_b = 0;
    for (int i = 0; i < n; i++) nan_f += isnan(f[i]);
    const __half* h = (const __half*)f.data();
    const __nv_bfloat16* b = (const __nv_bfloat16*)f.data();
    for (int i = 0; i < 2 * n; i++) { nan_h += __hisnan(h[i]); nan_b += __hisnan(b[i]); }
    CHECK(nan_f == n && nan_h == 2 * n && nan_b == 2 * n, "cudaMalloc_poisoned_with_nan_fp32_fp16_bf16");
    ChildResult r = run_child_case("poison_smem", {"CUDA_CPU_CHECK=0"});
    test_report(r.exited_ok() && r.out == "64\n", "dynamic_smem_poisoned_with_nan", (r.out + r.why()).c_str());
    CHECK(cudaMemcpy(f.data(), d + n - 4, 8 * sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
          "memcpy_past_allocation_refused");
    cudaGetLastError();
    CHECK(cudaFree(d) == cudaSuccess && cudaFree(d) == cudaErrorInvalidValue, "double_free_refused");
    cudaGetLastError();
}

__global__ void exit_before_barrier_kernel(float* x) {
    if (threadIdx.x >= 16) return;
    __syncthreads();
    x[threadIdx.x] = 1.0f;
}
__global__ void divergent_shuffle_kernel(float* x) {
    // Half the warp at a full-mask shuffle, the other half at a __syncwarp: each waits for the other
    // at another warp operation, which neither will reach (a hang, or undefined, on a GPU).
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    if (threadIdx.x % 32 < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    else __syncwarp();
    x[i] = v;
}
// Legal: the warp's last 8 lanes return first; a full-mask shuffle, ballot and __syncwarp wait for
// the mask's non-exited lanes only (the PTX ISA), and the shuffle reads partners that are there.
__global__ void early_exit_warp_ops_kernel(float* x, unsigned* ballot) {
    if (threadIdx.x % 32 >= 24) return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    unsigned b = __ballot_sync(0xffffffffu, 1);
    __syncwarp();
    x[i] = v;
    if (threadIdx.x % 32 == 0) ballot[i / 32] = b;
}
// Its buggy twin: lanes 8-15 read lanes 24-31 (xor 16), which have exited: an undefined value.
__global__ void exited_source_shuffle_kernel(float* x) {
    if (threadIdx.x % 32 >= 24) return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    x[i] = v;
}
__global__ void uneven_barrier_loop_kernel(float* x) {
    // A barrier inside a loop whose trip count differs between warps: the warps that leave the
    // loop early exit, and count as arrived at the others' later barriers.
    for (unsigned i = 0; i <= threadIdx.x / 32; i++) __syncthreads();
    x[blockIdx.x * blockDim.x + threadIdx.x] = 2.0f;
}

static int child_exit_before_barrier() {
    float* d;
    CK(cudaMalloc(&d, 64 * sizeof(float)));
    exit_before_barrier_kernel<<<1, 64>>>(d);
    return 0;
}
// Legal: every block stores the same value to one place (a flag all of them set): unordered writes
// of one value are benign. Run on 2 OS threads with each checked store held back 300 us after its
// check (CUDA_CPU_STORE_DELAY_US), where the check once compared with the bytes before the other
// block's store had landed, and called the same value "a different value" in most launches.
__global__ void same_value_from_blocks_kernel(float* flag) { *flag = 1.0f; }
// Its buggy twin: each block stores its own index.
__global__ void own_value_from_blocks_kernel(float* flag) { *flag = (float)blockIdx.x; }

static int child_same_value(bool twin) {
    float* d;
    CK(cudaMalloc(&d, sizeof(float)));
    for (int r = 0; r < (twin ? 1 : 20); r++) {
        CK(cudaMemset(d, 0, sizeof(float)));
        if (twin) own_value_from_blocks_kernel<<<64, 1>>>(d);
        else same_value_from_blocks_kernel<<<64, 1>>>(d);
        CK(cudaDeviceSynchronize());
    }
    float h = 0;
    CK(cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost));
    printf("%g\n", h);
    return 0;
}

// Legal: a double addition built from a compare-and-swap loop, as the CUDA programming guide builds
// atomicAdd for double where the hardware has none: the old value is first read plainly (it races
// with the other threads' swaps), then atomicCAS keeps the sum only if the value is still the one read,
// else the loop retries with what the CAS returned.
__device__ double add_by_cas(double* p, double v) {
    unsigned long long* u = (unsigned long long*)p;
    unsigned long long seen = *u, guess;
    do {
        guess = seen;
        seen = atomicCAS(u, guess, __double_as_longlong(v + __longlong_as_double(guess)));
    } while (guess != seen);
    return __longlong_as_double(seen);
}
__global__ void cas_loop_add_kernel(double* sum) { add_by_cas(sum, 1.0); }
// Its buggy twin: the value read plainly is used without a CAS to check it (a lost update).
__global__ void read_then_exchange_kernel(double* sum) {
    double seen = *sum;
    atomicExch((unsigned long long*)sum, (unsigned long long)__double_as_longlong(seen + 1.0));
}

static int child_cas_loop(bool twin) {
    double* d;
    CK(cudaMalloc(&d, sizeof(double)));
    double total = 0;
    for (int r = 0; r < (twin ? 1 : 20); r++) {
        CK(cudaMemset(d, 0, sizeof(double)));
        if (twin) read_then_exchange_kernel<<<16, 64>>>(d);
        else cas_loop_add_kernel<<<16, 64>>>(d);
        CK(cudaDeviceSynchronize());
        double h = 0;
        CK(cudaMemcpy(&h, d, sizeof(double), cudaMemcpyDeviceToHost));
        total += h;
    }
    printf("%g\n", total);
    return 0;
}

// A reduction across blocks: every block adds its part into one buffer with atomics, then thread 0
// counts the block in; the block that counts last reads the buffer. Legal with a __threadfence before
// the count (the programming guide's threadFenceReduction); its twin without one is a race on a GPU,
// which the detector used to catch only when another block's addition happened to land last.
template <bool fence>
__global__ void last_block_reads_kernel(unsigned* acc, unsigned* count, unsigned* out) {
    __shared__ bool last;
    atomicAdd(&acc[threadIdx.x], blockIdx.x + 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        if (fence) __threadfence();
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last) out[threadIdx.x] = acc[threadIdx.x];
}

static int child_last_block(bool fence) {
    unsigned *acc, *count, *out;
    CK(cudaMalloc(&acc, 32 * sizeof(unsigned)));
    CK(cudaMalloc(&count, sizeof(unsigned)));
    CK(cudaMalloc(&out, 32 * sizeof(unsigned)));
    unsigned bad = 0;
    for (int r = 0; r < 20; r++) {
        CK(cudaMemset(acc, 0, 32 * sizeof(unsigned)));
        CK(cudaMemset(count, 0, sizeof(unsigned)));
        if (fence) last_block_reads_kernel<true><<<16, 32>>>(acc, count, out);
        else last_block_reads_kernel<false><<<16, 32>>>(acc, count, out);
        std::vector<unsigned> h(32);
        CK(cudaMemcpy(h.data(), out, 32 * sizeof(unsigned), cudaMemcpyDeviceToHost));
        for (unsigned v : h) bad += v != 16 * 17 / 2;
    }
    printf("%u\n", bad);
    return 0;
}

// Alarms a program can run on after: shared-memory races at two lines (thread t writes s[t] after
// thread t - 1 read it, and thread 63 reads s[0] after thread 0 wrote it, no barrier between) and a
// read of device memory nothing wrote (each thread's first, under the default schedule).
__global__ void two_alarms_kernel(const float* never_written, float* out) {
    __shared__ float s[64];
    if (threadIdx.x == 0)
        for (int i = 0; i < 64; i++) s[i] = 0.0f;
    __syncthreads();
    float v = s[(threadIdx.x + 1) % 64];
    s[threadIdx.x] = (float)threadIdx.x;
    if (v < -1.0f) out[threadIdx.x] = v;  // never: the racing value stays out of the result
    out[threadIdx.x] = never_written[threadIdx.x];
}

static int child_two_alarms() {
    float *in, *out;
    CK(cudaMalloc(&in, 64 * sizeof(float)));
    CK(cudaMalloc(&out, 64 * sizeof(float)));
    for (int r = 0; r < 2; r++) two_alarms_kernel<<<1, 64>>>(in, out);
    CK(cudaDeviceSynchronize());
    printf("after the launches\n");
    return 0;
}

// Two threads store different values to one shared variable with nothing between them: a race, and a
// result that depends on which runs last (the forward schedule keeps thread 1's, the reverse thread 0's).
__global__ void order_dependent_kernel(float* out) {
    __shared__ float s;
    if (threadIdx.x < 2) s = (float)(threadIdx.x + 1);
    __syncthreads();
    out[threadIdx.x] = s;
}

static int child_order_dependent() {
    float* out;
    CK(cudaMalloc(&out, 32 * sizeof(float)));
    order_dependent_kernel<<<1, 32>>>(out);
    CK(cudaDeviceSynchronize());
    printf("after the launch\n");
    return 0;
}

static int child_exited_source() {
    float* d;
    CK(cudaMalloc(&d, 128 * sizeof(float)));
    CK(cudaMemset(d, 0, 128 * sizeof(float)));
    exited_source_shuffle_kernel<<<2, 64>>>(d);
    return 0;
}
static int child_shuffle() {
    float* d;
    CK(cudaMalloc(&d, 128 * sizeof(float)));
    CK(cudaMemset(d, 0, 128 * sizeof(float)));
    divergent_shuffle_kernel<<<2, 64>>>(d);
    return 0;
}

static void check_aborts(const char* name, const char* child, std::vector<std::string> env, const char* kernel,
                         const char* what) {
    ChildResult r = run_child_case(child, env);
    bool named = r.err.find(kernel) != std::string::npos && r.err.find(what) != std::string::npos;
    std::string why = std::string(r.aborted() ? "" : "child did not abort; ") + (named ? "" : "message lacks kernel/what: ") + r.why();
    test_report(r.aborted() && named, name, why.c_str());
}

// A buggy twin run RUNS times, each in a fresh process (another interleaving): reported as NAME,
// passing when every run aborted with a message holding each of MUST; ENV_OF gives a run's
// environment.
static void check_caught_every_run(const char* name, const char* child, std::vector<const char*> must,
                                   std::vector<std::string> (*env_of)(int run), int runs = 20) {
    int caught = 0;
    std::string why;
    for (int r = 0; r < runs; r++) {
        ChildResult c = run_child_case(child, env_of(r));
        bool named = true;
        for (const char* m : must) named &= c.err.find(m) != std::string::npos;
        if (c.aborted() && named) caught++;
        else why = c.why();
    }
    char msg[600];
    snprintf(msg, sizeof(msg), "caught in %d of %d runs; %s", caught, runs, why.c_str());
    test_report(caught == runs, name, msg);
}

// The reduction's last block: with the fence, 20 launches on 1 and on 2 OS threads, no alarm and the
// sums right; without it, caught in 20 runs of 20 (each run a fresh process: another interleaving).
static void test_last_block_reads() {
    for (const char* threads : {"CUDA_CPU_THREADS=1", "CUDA_CPU_THREADS=2"}) {
        ChildResult ok = run_child_case("last_block_fenced", {threads});
        std::string name = std::string("reduction_last_block_reads_after_fence_no_alarm_20_runs_") + (threads + strlen(threads) - 1) + "_threads";
        test_report(ok.exited_ok() && ok.out == "0\n", name.c_str(), (ok.out + ok.why()).c_str());
    }
    check_caught_every_run("reduction_without_fence_caught_in_20_of_20_runs_1_and_2_threads", "last_block_unfenced",
                           {"last_block_reads_kernel", "data race on global memory: this thread reads 4 bytes"},
                           [](int r) { return std::vector<std::string>{r % 2 ? "CUDA_CPU_THREADS=2" : "CUDA_CPU_THREADS=1"}; });
}

// CUDA_CPU_ALARMS=report: the program runs on and, at exit, prints each distinct alarm once with its
// count, class, kernel and source line; by default the first alarm ends it.
static void test_alarms_report() {
    ChildResult r = run_child_case("two_alarms", {"CUDA_CPU_ALARMS=report", "CUDA_CPU_THREADS=1"});
    bool listed = r.err.find("alarms, 3 distinct (CUDA_CPU_ALARMS=report") != std::string::npos &&
                  r.err.find("x data race: kernel 'two_alarms_kernel'") != std::string::npos &&
                  r.err.find("x uninitialised read: kernel 'two_alarms_kernel'") != std::string::npos &&
                  r.err.find("test_runtime.cu:") != std::string::npos;
    test_report(r.exited_ok() && r.out == "after the launches\n" && listed, "alarms_report_mode_runs_on_and_lists_each_distinct_alarm",
                (r.out + r.err.substr(0, 600) + r.why()).c_str());
    // 2 launches: 64 uninitialised reads each, 63 writes after another thread's read, 1 read after
    // another thread's write
    test_report(r.err.find("cuda_cpu: 256 alarms") != std::string::npos && r.err.find("cuda_cpu: 128 x uninitialised read") != std::string::npos &&
                r.err.find("cuda_cpu: 126 x data race") != std::string::npos && r.err.find("cuda_cpu: 2 x data race") != std::string::npos,
                "alarms_report_mode_counts_each_access", r.err.substr(0, 600).c_str());
    check_aborts("alarms_default_mode_aborts_at_the_first", "two_alarms", {"CUDA_CPU_THREADS=1"}, "two_alarms_kernel",
                 "uninitialised device memory");
    // a result that differs between the two schedules is listed too, once for the launch, and the
    // program runs on with one of them
    ChildResult o = run_child_case("order_dependent", {"CUDA_CPU_ALARMS=report", "CUDA_CPU_THREADS=1"});
    test_report(o.exited_ok() && o.out == "after the launch\n" &&
                    o.err.find("cuda_cpu: 1 x schedule-dependent result: kernel 'order_dependent_kernel': the result depends on the order") != std::string::npos &&
                    o.err.find("x data race: kernel 'order_dependent_kernel'") != std::string::npos,
                "alarms_report_mode_lists_a_schedule_dependent_result_and_runs_on", (o.out + o.err.substr(0, 800) + o.why()).c_str());
}

// The CAS loop: 20 launches of 1,024 additions, on 1 and on 2 OS threads: no alarm, every addition
// kept (20,480); the twin that uses its plain read without a CAS: caught in 20 runs of 20.
static void test_cas_loop() {
    for (const char* threads : {"CUDA_CPU_THREADS=1", "CUDA_CPU_THREADS=2"}) {
        ChildResult ok = run_child_case("cas_loop", {threads});
        std::string name = std::string("cas_loop_seeded_by_a_plain_read_no_alarm_20_runs_") + (threads + strlen(threads) - 1) + "_threads";
        test_report(ok.exited_ok() && ok.out == "20480\n", name.c_str(), (ok.out + ok.why()).c_str());
    }
    check_caught_every_run("plain_read_used_without_a_cas_caught_in_20_of_20_runs", "read_then_exchange",
                           {"read_then_exchange_kernel", "data race on global memory: this thread reads 8 bytes"},
                           [](int) { return std::vector<std::string>{}; });
}

// 64 blocks storing one value to one place, on 2 OS threads, stores held back: no alarm in 20 runs;
// storing each its own value: caught in 20 runs of 20.
static void test_same_value_from_blocks() {
    ChildResult ok = run_child_case("same_value", {"CUDA_CPU_THREADS=2", "CUDA_CPU_STORE_DELAY_US=300"});
    test_report(ok.exited_ok() && ok.out == "1\n", "blocks_storing_one_value_to_one_place_no_alarm_20_runs_2_threads", ok.why().c_str());
    check_caught_every_run("blocks_storing_different_values_to_one_place_caught_in_20_of_20_runs", "own_value",
                           {"own_value_from_blocks_kernel", "data race on global memory", "a different value"},
                           [](int) { return std::vector<std::string>{"CUDA_CPU_THREADS=2", "CUDA_CPU_STORE_DELAY_US=300"}; });
}

// A full-mask warp operation after some lanes of the mask returned: legal, 20 runs (each launch a new
// schedule of lanes and blocks), the sums and the ballot right; the twin that reads an exited lane
// aborts naming the lanes, the shuffle and that the value is undefined, 20 runs of 20.
static void test_early_exit_warp_ops() {
    const int n = 4 * 64, runs = 20;
    float* d;
    unsigned* b;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMalloc(&b, (n / 32) * sizeof(unsigned)));
    std::vector<float> h(n), in(n);
    std::vector<unsigned> hb(n / 32);
    for (int i = 0; i < n; i++) in[i] = (float)(i * 3 + 1);
    int bad = 0;
    for (int r = 0; r < runs; r++) {
        CK(cudaMemcpy(d, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        early_exit_warp_ops_kernel<<<4, 64>>>(d, b);
        CK(cudaGetLastError());
        CK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hb.data(), b, (n / 32) * sizeof(unsigned), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) bad += h[i] != (i % 32 >= 24 ? in[i] : in[i] + in[i ^ 1]);
        for (int k = 0; k < n / 32; k++) bad += hb[k] != 0x00ffffffu;
    }
    CHECK(bad == 0, "full_mask_warp_ops_after_lanes_returned_wait_for_the_non_exited_20_runs");
    CK(cudaFree(d));
    CK(cudaFree(b));
    check_caught_every_run("shuffle_reading_an_exited_lane_caught_in_20_of_20_runs", "exited_source",
                           {"exited_source_shuffle_kernel", "__shfl_xor_sync", "has exited: the value is undefined"},
                           [](int) { return std::vector<std::string>{}; }, runs);
}

// Since Volta an exiting thread counts as arrived at a barrier (the PTX ISA): a block whose early
// returns skip a __syncthreads goes on. CUDA_CPU_STRICT_EXIT=abort refuses it as before.
static void test_divergence() {
    float* d;
    CK(cudaMalloc(&d, 3 * 128 * sizeof(float)));
    exit_before_barrier_kernel<<<1, 64>>>(d);
    CK(cudaGetLastError());
    std::vector<float> h(3 * 128);
    CK(cudaMemcpy(h.data(), d, 16 * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += h[i] != 1.0f;
    CHECK(bad == 0, "exited_threads_count_as_arrived_at_syncthreads");
    uneven_barrier_loop_kernel<<<3, 128>>>(d);
    CK(cudaMemcpy(h.data(), d, 3 * 128 * sizeof(float), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < 3 * 128; i++) bad += h[i] != 2.0f;
    CHECK(bad == 0, "warps_leaving_a_barrier_loop_early_count_as_arrived");
    CK(cudaFree(d));
    check_aborts("strict_exit_abort_syncthreads_after_early_return", "exit_before_barrier", {"CUDA_CPU_STRICT_EXIT=abort"},
                 "exit_before_barrier_kernel", "__syncthreads");
    ChildResult w = run_child_case("exit_before_barrier", {"CUDA_CPU_STRICT_EXIT=warn"});
    test_report(w.exited_ok() && w.err.find("warning: kernel 'exit_before_barrier_kernel'") != std::string::npos,
                "strict_exit_warn_names_the_kernel", w.why().c_str());
    check_aborts("divergence_abort_half_warp_shuffle", "shuffle", {}, "divergent_shuffle_kernel", "__shfl_xor_sync");
    test_early_exit_warp_ops();
    test_same_value_from_blocks();
    test_cas_loop();
    test_last_block_reads();
    test_alarms_report();
}

static void test_properties() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    CHECK(p.multiProcessorCount == 132 && p.major == 9 && p.minor == 0 && p.sharedMemPerMultiprocessor == 228 * 1024 &&
          p.totalGlobalMem == (80ull << 30) && p.warpSize == 32 && p.maxThreadsPerBlock == 1024,
          "device_properties_h100_like");
    int count = 0;
    CK(cudaGetDeviceCount(&count));
    CHECK(count >= 1, "device_count");
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(total_b == (80ull << 30) && free_b <= total_b, "mem_get_info");
}
#endif

int main(int argc, char** argv) {
#ifdef CUDA_CPU
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        std::string c = argv[2];
        if (c == "poison_smem") return child_poison_smem();
        if (c == "exit_before_barrier") return child_exit_before_barrier();
        if (c == "shuffle") return child_shuffle();
        if (c == "exited_source") return child_exited_source();
        if (c == "same_value") return child_same_value(false);
        if (c == "cas_loop") return child_cas_loop(false);
        if (c == "two_alarms") return child_two_alarms();
        if (c == "order_dependent") return child_order_dependent();
        if (c == "last_block_fenced") return child_last_block(true);
        if (c == "last_block_unfenced") return child_last_block(false);
        if (c == "read_then_exchange") return child_cas_loop(true);
        if (c == "own_value") return child_same_value(true);
        fprintf(stderr, "test_runtime: unknown child case %s\n", argv[2]);
        return 2;
    }
#endif
    (void)argc;
    (void)argv;
    test_reduce();
    test_scan();
    test_shared_visibility();
    test_atomics();
    test_indices();
    test_warp_ops();
    test_half();
    test_intrinsics();
    test_streams_events_memcpy();
    test_pinned_async_copies();
    test_launch_errors();
    test_launch_forms();
#ifdef CUDA_CPU
    test_poison();
    test_divergence();
    test_properties();
#endif
    return test_finish();
}
