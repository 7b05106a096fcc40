// test_patterns.cu: correct kernels written the way real CUDA code is (the project's own, in the
// styles of llm.c's dev/cuda kernels, none copied): cooperative-groups reductions, warp-per-row and
// block-per-row kernels, 128-bit vector loads, online softmax, float atomics, warps that exit before a
// barrier, warp-synchronous code with __syncwarp, a kernel named like its launcher, fast-math
// intrinsics. Each is checked against a CPU reference; under the runtime they run under four
// schedules (forward, reverse, two shuffles) with every check on, and must raise no alarm.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#if defined(CUDA_CPU_NCCL)
#include <nccl.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "limit_kernels.cuh"
#include "cuda_test.h"
#include "test.h"

namespace cg = cooperative_groups;

static uint32_t rng_state = 2024u;
static float frand() {  // uniform in [-1, 1)
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}
static std::vector<float> random_vec(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = scale * frand();
    return v;
}
static double max_rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
    double e = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = fabs(got[i] - ref[i]) / (fabs(ref[i]) > 1e-6 ? fabs(ref[i]) : 1e-6);
        if (!(d <= e)) e = d;  // NaN propagates
    }
    return e;
}
static void check_err(const char* name, double err, double tol) {
    char why[128];
    snprintf(why, sizeof(why), "max relative error %.3g > %.3g", err, tol);
    test_report(err <= tol, name, why);
}

// ---------------------------------------------------------------------------------------------
// 1. Cooperative groups: block sum, max and a custom operator, meta groups, tiles of 16
// ---------------------------------------------------------------------------------------------
struct AbsMax {
    __device__ float operator()(float a, float b) const { return fabsf(a) > fabsf(b) ? a : b; }
};

__global__ void cg_reduce_kernel(float* sums, float* maxes, float* absmax, int* xors, const float* x, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float warp_sums[32];
    __shared__ float warp_maxes[32];
    float s = 0.0f, m = -INFINITY, a = 0.0f;
    int xr = 0;
    for (int i = blockIdx.x * block.size() + block.thread_rank(); i < n; i += gridDim.x * block.size()) {
        s += x[i];
        m = fmaxf(m, x[i]);
        a = fabsf(x[i]) > fabsf(a) ? x[i] : a;
        xr ^= i;
    }
    s = cg::reduce(warp, s, cg::plus<float>());
    m = cg::reduce(warp, m, cg::greater<float>());
    a = cg::reduce(warp, a, AbsMax());
    xr = cg::reduce(warp, xr, cg::bit_xor<int>());
    if (warp.thread_rank() == 0) {
        warp_sums[warp.meta_group_rank()] = s;
        warp_maxes[warp.meta_group_rank()] = m;
    }
    block.sync();
    if (warp.meta_group_rank() == 0) {
        s = warp.thread_rank() < warp.meta_group_size() ? warp_sums[warp.thread_rank()] : 0.0f;
        m = warp.thread_rank() < warp.meta_group_size() ? warp_maxes[warp.thread_rank()] : -INFINITY;
        s = cg::reduce(warp, s, cg::plus<float>());
        m = cg::reduce(warp, m, cg::greater<float>());
        if (warp.thread_rank() == 0) {
            sums[blockIdx.x] = s;
            maxes[blockIdx.x] = m;
        }
    }
    // one value per warp, from lane 0: no two warps write the same slot
    if (warp.thread_rank() == 0) {
        absmax[blockIdx.x * warp.meta_group_size() + warp.meta_group_rank()] = a;
        xors[blockIdx.x * warp.meta_group_size() + warp.meta_group_rank()] = xr;
    }
}

// Tiles of 16: an inclusive scan per tile (cg::inclusive_scan) and a ballot within the tile.
__global__ void cg_tile16_kernel(int* scan, unsigned* ballots, const int* v) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int x = v[block.thread_rank()];
    scan[block.thread_rank()] = cg::inclusive_scan(tile, x);
    unsigned b = tile.ballot(x % 2);
    if (tile.thread_rank() == 0) ballots[tile.meta_group_rank()] = b;
}

// A tile's shuffle of a 16-byte type (CUDA's cooperative groups take any trivially copyable one):
// each lane takes its right neighbour's uint4 within tiles of 8.
__global__ void cg_wide_shfl_kernel(uint4* out) {
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(cg::this_thread_block());
    unsigned t = threadIdx.x;
    uint4 mine = make_uint4(t, t + 100, t + 200, t + 300);
    out[t] = tile.shfl_down(mine, 1);
}

static void test_cooperative_groups() {
    const int n = 10000, blocks = 8, threads = 256, warps = threads / 32;
    std::vector<float> x = random_vec(n);
    float *ds, *dm, *da;
    int* dx;
    CK(cudaMalloc(&ds, blocks * sizeof(float)));
    CK(cudaMalloc(&dm, blocks * sizeof(float)));
    CK(cudaMalloc(&da, blocks * warps * sizeof(float)));
    CK(cudaMalloc(&dx, blocks * warps * sizeof(int)));
    float* d = to_device(x);
    cg_reduce_kernel<<<blocks, threads>>>(ds, dm, da, dx, d, n);
    CK(cudaGetLastError());
    std::vector<float> s = to_host(ds, blocks), m = to_host(dm, blocks), a = to_host(da, blocks * warps);
    std::vector<int> xr = to_host(dx, blocks * warps);
    double sum = 0, ref = 0, mx = -INFINITY, rmx = -INFINITY;
    for (float v : s) sum += v;
    for (float v : m) mx = v > mx ? v : mx;
    for (float v : x) { ref += v; rmx = v > rmx ? v : rmx; }
    check_close("cg_reduce_plus_block_sum", sum, ref, 1e-5);
    CHECK(mx == rmx, "cg_reduce_greater_block_max");
    float amax = 0, ramax = 0;
    int x_all = 0, rx = 0;
    for (float v : a) amax = fabsf(v) > fabsf(amax) ? v : amax;
    for (float v : x) ramax = fabsf(v) > fabsf(ramax) ? v : ramax;
    for (int v : xr) x_all ^= v;
    for (int i = 0; i < n; i++) rx ^= i;
    CHECK(amax == ramax, "cg_reduce_custom_operator");
    CHECK(x_all == rx, "cg_reduce_bit_xor");

    std::vector<int> v(64);
    for (int i = 0; i < 64; i++) v[i] = (i * 7) % 5;
    int* dv = to_device(v);
    int* dscan;
    unsigned* dball;
    CK(cudaMalloc(&dscan, 64 * sizeof(int)));
    CK(cudaMalloc(&dball, 4 * sizeof(unsigned)));
    cg_tile16_kernel<<<1, 64>>>(dscan, dball, dv);
    std::vector<int> sc = to_host(dscan, 64);
    std::vector<unsigned> b = to_host(dball, 4);
    int bad = 0;
    for (int t = 0; t < 4; t++) {
        int run = 0;
        unsigned rb = 0;
        for (int i = 0; i < 16; i++) {
            run += v[t * 16 + i];
            bad += sc[t * 16 + i] != run;
            rb |= (unsigned)(v[t * 16 + i] % 2) << i;
        }
        bad += b[t] != rb;
    }
    CHECK(bad == 0, "cg_tile16_inclusive_scan_and_ballot");
    uint4* dw;
    CK(cudaMalloc(&dw, 32 * sizeof(uint4)));
    cg_wide_shfl_kernel<<<1, 32>>>(dw);
    std::vector<uint4> w = to_host(dw, 32);
    int wrong = 0;
    for (unsigned t = 0; t < 32; t++) {
        unsigned src = t % 8 == 7 ? t : t + 1;  // the tile's last lane keeps its own
        wrong += w[t].x != src || w[t].y != src + 100 || w[t].z != src + 200 || w[t].w != src + 300;
    }
    CHECK(wrong == 0, "cg_tile8_shfl_down_of_a_16_byte_type");
}

// ---------------------------------------------------------------------------------------------
// 2. Warp per row: a row's max and sum of exp by shuffles (softmax), rows past N exit as warps
// ---------------------------------------------------------------------------------------------
__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void softmax_warp_per_row_kernel(float* out, const float* in, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float* x = in + (size_t)row * C;
    float m = -INFINITY;
    for (int i = lane; i < C; i += 32) m = fmaxf(m, x[i]);
    m = warp_max(m);
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += expf(x[i] - m);
    s = warp_sum(s);
    for (int i = lane; i < C; i += 32) out[(size_t)row * C + i] = expf(x[i] - m) / s;
}

// ---------------------------------------------------------------------------------------------
// 3. Block per row with shared memory: a barrier tree for the max and the sum, dynamic smem
// ---------------------------------------------------------------------------------------------
__global__ void softmax_block_per_row_kernel(float* out, const float* in, int C) {
    extern __shared__ float red[];  // blockDim.x floats
    const float* x = in + (size_t)blockIdx.x * C;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < C; i += blockDim.x) m = fmaxf(m, x[i]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + stride]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();  // everyone has read red[0] before it is reused
    float s = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) s += expf(x[i] - m);
    red[threadIdx.x] = s;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
        __syncthreads();
    }
    s = red[0];
    for (int i = threadIdx.x; i < C; i += blockDim.x) out[(size_t)blockIdx.x * C + i] = expf(x[i] - m) / s;
}

// ---------------------------------------------------------------------------------------------
// 4. Online softmax: one pass keeping (max, sum) per thread, merged across the warp
// ---------------------------------------------------------------------------------------------
__global__ void online_softmax_kernel(float* lse, const float* in, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const float* x = in + (size_t)row * C;
    float m = -INFINITY, s = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float v = x[i];
        if (v > m) {
            s *= expf(m - v);
            m = v;
        }
        s += expf(v - m);
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mn = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mn));
        m = mn;
    }
    if (lane == 0) lse[row] = m + logf(s);
}

static void test_softmaxes() {
    const int N = 37, C = 300;
    std::vector<float> x = random_vec((size_t)N * C, 4.0f);
    std::vector<double> ref((size_t)N * C), ref_lse(N);
    for (int r = 0; r < N; r++) {
        double m = -INFINITY, s = 0;
        for (int i = 0; i < C; i++) m = fmax(m, x[(size_t)r * C + i]);
        for (int i = 0; i < C; i++) s += exp(x[(size_t)r * C + i] - m);
        for (int i = 0; i < C; i++) ref[(size_t)r * C + i] = exp(x[(size_t)r * C + i] - m) / s;
        ref_lse[r] = m + log(s);
    }
    float* d = to_device(x);
    float *dout, *dlse;
    CK(cudaMalloc(&dout, (size_t)N * C * sizeof(float)));
    CK(cudaMalloc(&dlse, N * sizeof(float)));
    softmax_warp_per_row_kernel<<<(N + 3) / 4, 128>>>(dout, d, N, C);
    check_err("softmax_warp_per_row_shuffles", max_rel_err(to_host(dout, (size_t)N * C), ref), 1e-5);
    softmax_block_per_row_kernel<<<N, 128, 128 * sizeof(float)>>>(dout, d, C);
    check_err("softmax_block_per_row_shared_tree", max_rel_err(to_host(dout, (size_t)N * C), ref), 1e-5);
    online_softmax_kernel<<<(N + 7) / 8, 256>>>(dlse, d, N, C);
    check_err("online_softmax_logsumexp", max_rel_err(to_host(dlse, N), ref_lse), 1e-5);
}

// ---------------------------------------------------------------------------------------------
// 5. 128-bit vector loads: float4, and int4 holding eight halves
// ---------------------------------------------------------------------------------------------
__global__ void axpy_float4_kernel(float* y, const float* x, float a, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 xv = reinterpret_cast<const float4*>(x)[i];
    float4 yv = reinterpret_cast<float4*>(y)[i];
    yv.x += a * xv.x; yv.y += a * xv.y; yv.z += a * xv.z; yv.w += a * xv.w;
    reinterpret_cast<float4*>(y)[i] = yv;
}

__global__ void half_pack_scale_kernel(__half* out, const __half* in, float s, int n8) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    int4 q = reinterpret_cast<const int4*>(in)[i];
    __half h[8];
    memcpy((void*)h, &q, sizeof(q));
    for (int k = 0; k < 8; k++) h[k] = __float2half(__half2float(h[k]) * s);
    memcpy(&q, (const void*)h, sizeof(q));
    reinterpret_cast<int4*>(out)[i] = q;
}

__global__ void half2_add_kernel(__half2* out, const __half2* a, const __half2* b, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) out[i] = __hadd2(a[i], b[i]);
}

static void test_vector_loads() {
    const int n = 4096;
    std::vector<float> x = random_vec(n), y = random_vec(n);
    float *dx = to_device(x), *dy = to_device(y);
    axpy_float4_kernel<<<(n / 4 + 127) / 128, 128>>>(dy, dx, 0.5f, n / 4);
    std::vector<float> got = to_host(dy, n);
    std::vector<double> ref(n);
    for (int i = 0; i < n; i++) ref[i] = y[i] + 0.5 * x[i];
    check_err("float4_loads_axpy", max_rel_err(got, ref), 1e-6);

    std::vector<__half> h(n);
    for (int i = 0; i < n; i++) h[i] = __float2half(x[i]);
    __half* dh = to_device(h);
    __half* dout;
    CK(cudaMalloc(&dout, n * sizeof(__half)));
    half_pack_scale_kernel<<<(n / 8 + 63) / 64, 64>>>(dout, dh, 2.0f, n / 8);
    std::vector<__half> ho = to_host(dout, n);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += __half2float(ho[i]) != 2.0f * __half2float(h[i]);
    CHECK(bad == 0, "int4_loads_of_eight_halves");
    half2_add_kernel<<<(n / 2 + 127) / 128, 128>>>((__half2*)dout, (const __half2*)dh, (const __half2*)dh, n / 2);
    ho = to_host(dout, n);
    bad = 0;
    for (int i = 0; i < n; i++) bad += __half2float(ho[i]) != __half2float(__hadd(h[i], h[i]));
    CHECK(bad == 0, "half2_loads_and_adds");
}

// ---------------------------------------------------------------------------------------------
// 6. Float atomics (order-dependent rounding: the schedule comparison tolerates their targets),
//    integer atomics, and byte-wide writes by neighbouring threads
// ---------------------------------------------------------------------------------------------
__global__ void float_atomic_histogram_kernel(float* bins, const float* x, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int b = (int)((x[i] + 1.0f) * 4.0f);
        atomicAdd(&bins[b < 0 ? 0 : b > 7 ? 7 : b], x[i]);
    }
}

__global__ void int_atomic_count_kernel(int* counts, unsigned char* flags, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    flags[i] = x[i] > 0.0f;  // one byte per thread, neighbours in the same word
    if (x[i] > 0.0f) atomicAdd(&counts[0], 1);
    else atomicAdd(&counts[1], 1);
}

// Every thread exchanges its id in, and the first to find the slot empty claims a second one with a
// CAS: which id is left, and which thread claimed, depend on the order (as on a GPU); legal.
__global__ void exchange_and_claim_kernel(int* last, int* owner) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    atomicExch(last, id);
    atomicCAS(owner, -1, id);
}

// Dynamic shared memory declared with the qualifier after the type (legal C++, and how some write it).
__global__ void reverse_in_dynamic_smem_kernel(float* out, const float* in) {
    extern float __shared__ buf[];
    buf[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

// A kernel that times itself: its clock readings are written out (as CUDA's clock sample does).
__global__ void timed_sum_kernel(long long* times, float* out, const float* in) {
    long long t0 = clock64();
    clock_t c0 = clock();
    float s = in[threadIdx.x] * 2.0f;
    out[threadIdx.x] = s;
    times[4 * threadIdx.x] = t0;
    times[4 * threadIdx.x + 1] = clock64();
    times[4 * threadIdx.x + 2] = (long long)c0;
    times[4 * threadIdx.x + 3] = (long long)clock();
}

static void test_atomics() {
    const int n = 20000;
    std::vector<float> x = random_vec(n);
    float* dx = to_device(x);
    float* bins;
    CK(cudaMalloc(&bins, 8 * sizeof(float)));
    CK(cudaMemset(bins, 0, 8 * sizeof(float)));
    float_atomic_histogram_kernel<<<16, 128>>>(bins, dx, n);
    std::vector<float> b = to_host(bins, 8);
    std::vector<double> ref(8, 0.0);
    for (float v : x) {
        int k = (int)((v + 1.0f) * 4.0f);
        ref[k < 0 ? 0 : k > 7 ? 7 : k] += v;
    }
    // float atomics add in whatever order the threads arrive: compare with a tolerance
    check_err("float_atomicAdd_histogram", max_rel_err(b, ref), 1e-4);
    int* counts;
    unsigned char* flags;
    CK(cudaMalloc(&counts, 2 * sizeof(int)));
    CK(cudaMemset(counts, 0, 2 * sizeof(int)));
    CK(cudaMalloc(&flags, n));
    int_atomic_count_kernel<<<(n + 255) / 256, 256>>>(counts, flags, dx, n);
    std::vector<int> c = to_host(counts, 2);
    std::vector<unsigned char> f = to_host(flags, n);
    int pos = 0, fl = 0;
    for (int i = 0; i < n; i++) { pos += x[i] > 0.0f; fl += f[i]; }
    CHECK(c[0] == pos && c[1] == n - pos && fl == pos, "int_atomics_and_neighbouring_byte_writes");
    int* slots;
    CK(cudaMalloc(&slots, 2 * sizeof(int)));
    CK(cudaMemset(slots, 0xff, 2 * sizeof(int)));  // -1: empty
    exchange_and_claim_kernel<<<4, 64>>>(slots, slots + 1);
    std::vector<int> sl = to_host(slots, 2);
    CHECK(sl[0] >= 0 && sl[0] < 256 && sl[1] >= 0 && sl[1] < 256, "atomicExch_and_atomicCAS_leave_an_order_dependent_value");
    float* rev;
    CK(cudaMalloc(&rev, 256 * sizeof(float)));
    reverse_in_dynamic_smem_kernel<<<2, 128, 128 * sizeof(float)>>>(rev, dx);
    std::vector<float> r = to_host(rev, 256);
    bool reversed = true;
    for (int i = 0; i < 256; i++) reversed = reversed && r[i] == x[(i / 128) * 128 + 127 - i % 128];
    CHECK(reversed, "extern_T___shared___dynamic_shared_memory");
    long long* times;
    CK(cudaMalloc(&times, 4 * 64 * sizeof(long long)));
    timed_sum_kernel<<<1, 64>>>(times, rev, dx);
    std::vector<long long> tm = to_host(times, 4 * 64);
    bool later = true;
    for (int i = 0; i < 64; i++) later = later && tm[4 * i + 1] > tm[4 * i] && tm[4 * i + 3] > tm[4 * i + 2];
    CHECK(later, "a_kernel_writing_its_clock_readings_out");
}

// ---------------------------------------------------------------------------------------------
// 7. Warps that exit before a barrier (Volta and later count them as arrived), warp-synchronous
//    broadcast with __syncwarp, static shared memory in a __device__ function, a template's
//    shared array, __syncthreads_count, a ballot compaction
// ---------------------------------------------------------------------------------------------
// Rows are processed by warps; warps without a row leave at once. The rest sum their rows into a
// shared array after a barrier that the departed warps no longer reach.
__global__ void early_exit_warps_kernel(float* out, const float* in, int rows, int C) {
    __shared__ float row_sums[32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= rows) return;  // whole warps exit
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += in[(size_t)row * C + i];
    s = warp_sum(s);
    if (lane == 0) row_sums[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        int live = min((int)(blockDim.x / 32), rows - (int)(blockIdx.x * (blockDim.x / 32)));
        for (int w = 0; w < live; w++) t += row_sums[w];
        out[blockIdx.x] = t;
    }
}

// Every lane of a warp stores the warp's sum to its slot (no lane-0 guard: the same value), and
// every thread of a block writes the same flag: benign, as on a GPU.
__global__ void same_value_stores_kernel(float* out, const float* in) {
    __shared__ float warp_sums[8];
    __shared__ int any_negative;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) any_negative = 0;
    __syncthreads();
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    if (v < 0.0f) any_negative = 1;
    float s = warp_sum(v);
    warp_sums[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < (int)(blockDim.x / 32); w++) t += warp_sums[w];
        out[2 * blockIdx.x] = t;
        out[2 * blockIdx.x + 1] = (float)any_negative;
    }
    (void)lane;
}

// Lane 0 of each warp fetches a value, __syncwarp publishes it to the warp.
__global__ void warp_broadcast_kernel(float* out, const float* in) {
    __shared__ float slot[8];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) slot[warp] = in[blockIdx.x * 8 + warp];
    __syncwarp();
    out[blockIdx.x * blockDim.x + threadIdx.x] = slot[warp] + (float)lane;
    __syncwarp();  // no lane rewrites the slot before every lane has read it
    if (lane == 0) slot[warp] = -1.0f;
}

__device__ float block_sum_device(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
    return warp_sum(v);
}

template <int TILE>
__global__ void tiled_transpose_kernel(float* out, const float* in, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < n && y < n) tile[threadIdx.y][threadIdx.x] = in[(size_t)y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < n && y < n) out[(size_t)y * n + x] = tile[threadIdx.x][threadIdx.y];
}

__global__ void sums_and_counts_kernel(float* sums, int* counts, int* compact, int* ncompact, const float* in) {
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    float s = block_sum_device(v);
    int positive = __syncthreads_count(v > 0.0f);
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = s;
        counts[blockIdx.x] = positive;
    }
    // warp-level compaction of the positive values' indices with a ballot
    unsigned ballot = __ballot_sync(0xffffffffu, v > 0.0f);
    int lane = threadIdx.x % 32;
    int base = 0;
    if (lane == 0) base = atomicAdd(ncompact, __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (v > 0.0f) compact[base + __popc(ballot & ((1u << lane) - 1u))] = blockIdx.x * blockDim.x + threadIdx.x;
}

static void test_barrier_patterns() {
    const int rows = 13, C = 70, per_block = 8;
    std::vector<float> x = random_vec((size_t)rows * C);
    float* dx = to_device(x);
    int blocks = (rows + per_block - 1) / per_block;
    float* dout;
    CK(cudaMalloc(&dout, blocks * sizeof(float)));
    early_exit_warps_kernel<<<blocks, 32 * per_block>>>(dout, dx, rows, C);
    std::vector<float> got = to_host(dout, blocks);
    std::vector<double> ref(blocks, 0.0);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < C; i++) ref[r / per_block] += x[(size_t)r * C + i];
    check_err("whole_warps_exit_before_syncthreads", max_rel_err(got, ref), 1e-5);

    {
        std::vector<float> v = random_vec(4 * 256);
        float* dv = to_device(v);
        float* dso;
        CK(cudaMalloc(&dso, 8 * sizeof(float)));
        same_value_stores_kernel<<<4, 256>>>(dso, dv);
        std::vector<float> so = to_host(dso, 8);
        int bad_so = 0;
        for (int b = 0; b < 4; b++) {
            double ref = 0;
            int neg = 0;
            for (int i = 0; i < 256; i++) { ref += v[b * 256 + i]; neg |= v[b * 256 + i] < 0.0f; }
            bad_so += fabs(so[2 * b] - ref) > 1e-4 * (1 + fabs(ref)) || so[2 * b + 1] != (float)neg;
        }
        CHECK(bad_so == 0, "same_value_stores_by_many_threads_are_benign");
    }

    std::vector<float> in = random_vec(16);
    float* din = to_device(in);
    float* dbc;
    CK(cudaMalloc(&dbc, 2 * 256 * sizeof(float)));
    warp_broadcast_kernel<<<2, 256>>>(dbc, din);
    std::vector<float> bc = to_host(dbc, 512);
    int bad = 0;
    for (int i = 0; i < 512; i++) bad += bc[i] != in[(i / 256) * 8 + (i % 256) / 32] + (float)(i % 32);
    CHECK(bad == 0, "warp_synchronous_broadcast_with_syncwarp");

    const int n = 45;
    std::vector<float> m = random_vec((size_t)n * n);
    float* dm = to_device(m);
    float* dt;
    CK(cudaMalloc(&dt, (size_t)n * n * sizeof(float)));
    tiled_transpose_kernel<16><<<dim3(3, 3), dim3(16, 16)>>>(dt, dm, n);
    std::vector<float> t = to_host(dt, (size_t)n * n);
    bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) bad += t[(size_t)j * n + i] != m[(size_t)i * n + j];
    CHECK(bad == 0, "template_shared_tile_transpose_2d_blocks");

    const int B = 4, T = 128;
    std::vector<float> v = random_vec(B * T);
    float* dv = to_device(v);
    float* dsum;
    int *dcnt, *dcomp, *dn;
    CK(cudaMalloc(&dsum, B * sizeof(float)));
    CK(cudaMalloc(&dcnt, B * sizeof(int)));
    CK(cudaMalloc(&dcomp, B * T * sizeof(int)));
    CK(cudaMalloc(&dn, sizeof(int)));
    CK(cudaMemset(dn, 0, sizeof(int)));
#ifdef CUDA_CPU
    // where each index lands depends on the order of the atomics: the test checks the set, and the
    // runtime is told not to compare schedules for this launch
    cuda_cpu_order_dependent_launch();
#endif
    sums_and_counts_kernel<<<B, T>>>(dsum, dcnt, dcomp, dn, dv);
    std::vector<float> s = to_host(dsum, B);
    std::vector<int> cnt = to_host(dcnt, B), nc = to_host(dn, 1);
    std::vector<int> comp = to_host(dcomp, nc[0]);
    bad = 0;
    int total = 0;
    for (int b = 0; b < B; b++) {
        double rs = 0;
        int rc = 0;
        for (int i = 0; i < T; i++) { rs += v[b * T + i]; rc += v[b * T + i] > 0.0f; }
        bad += fabs(s[b] - rs) > 1e-5 * (1 + fabs(rs)) || cnt[b] != rc;
        total += rc;
    }
    std::vector<char> seen(B * T, 0);
    for (int i : comp) bad += i < 0 || i >= B * T || v[i] <= 0.0f || seen[i]++;
    CHECK(bad == 0 && nc[0] == total, "device_function_shared_syncthreads_count_ballot_compaction");
}

// ---------------------------------------------------------------------------------------------
// 8. A kernel that shares its name with its host launcher (nvcc accepts it)
// ---------------------------------------------------------------------------------------------
__global__ void scale_rows(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}
static void scale_rows(float* x, float s, int n, cudaStream_t stream) {
    scale_rows<<<(n + 127) / 128, 128, 0, stream>>>(x, s, n);
}

static void test_same_name_launcher() {
    std::vector<float> x = random_vec(300);
    float* d = to_device(x);
    scale_rows(d, 3.0f, 300, (cudaStream_t)0);
    CK(cudaGetLastError());
    std::vector<float> got = to_host(d, 300);
    int bad = 0;
    for (int i = 0; i < 300; i++) bad += got[i] != x[i] * 3.0f;
    CHECK(bad == 0, "kernel_named_like_its_launcher");
}

// ---------------------------------------------------------------------------------------------
// 9. Fast-math intrinsics within the GPU's documented error bounds
// ---------------------------------------------------------------------------------------------
__global__ void fast_math_kernel(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    out[6 * i + 0] = __expf(v);
    out[6 * i + 1] = __logf(fabsf(v) + 0.75f);
    out[6 * i + 2] = __sinf(v);
    out[6 * i + 3] = __fdividef(v, 1.5f + v * v);
    out[6 * i + 4] = rsqrtf(fabsf(v) + 0.25f);
    out[6 * i + 5] = __powf(fabsf(v) + 0.5f, 1.5f);
}

static double ulp_of(double r) { return r == 0.0 ? ldexp(1.0, -149) : ldexp(1.0, ilogb((float)r) - 23); }

// ---- fenced last-block reductions, __device__ variables, big locals, many registers ----

// Each block writes its partial sum, fences, and counts itself done with an atomic; the last block
// (the one whose atomic sees every other) adds the partials in block order: exact and repeatable.
__device__ unsigned blocks_done;
__global__ void last_block_sum_kernel(float* out, float* partial, const float* x, int n) {
    __shared__ float s[128];
    __shared__ bool last;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        last = atomicAdd(&blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        float t = 0.0f;
        for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];
        out[0] = t;
        blocks_done = 0;  // ready for the next launch
    }
}

// An atomic counter in a __device__ variable, and a __device__ table the host fills by symbol.
__device__ int hits;
__constant__ float scale_table[4];
__global__ void count_and_scale_kernel(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * scale_table[i % 4];
        if (x[i] > 0.0f) atomicAdd(&hits, 1);
    }
}

// Locals that fit: big_locals_kernel (limit_kernels.cuh).

// Registers that fit: many_registers_kernel (limit_kernels.cuh) at 256 threads.

static void test_block_order_patterns() {
    const int n = 1000, blocks = (n + 127) / 128;
    std::vector<float> x = random_vec(n);
    float *d = to_device(x), *partial, *out;
    CK(cudaMalloc(&partial, blocks * sizeof(float)));
    CK(cudaMalloc(&out, sizeof(float)));
    unsigned zero = 0;
    CK(cudaMemcpyToSymbol(blocks_done, &zero, sizeof(zero)));
    bool same = true;
    float first = 0.0f;
    for (int rep = 0; rep < 2; rep++) {
        last_block_sum_kernel<<<blocks, 128>>>(out, partial, d, n);
        float got;
        CK(cudaMemcpy(&got, out, sizeof(float), cudaMemcpyDeviceToHost));
        if (rep == 0) first = got;
        else same = got == first;
    }
    double ref = 0.0;
    for (float v : x) ref += v;
    CHECK(same && fabs(first - ref) < 1e-3, "last_block_reduction_with_threadfence_exact_and_repeatable");

    // The same with 256 blocks, 16 times: blocks on different workers reach the counter close
    // together, where the runtime once checked two atomics in one order and did them in the other
    // (the last block then had not acquired the other's release: a false race about once in 6 runs
    // of a kernel like this). The check and the operation are one step now.
    {
        const int n2 = 256 * 128, blocks2 = 256;
        std::vector<float> x2 = random_vec(n2);
        float *d2 = to_device(x2), *partial2;
        CK(cudaMalloc(&partial2, blocks2 * sizeof(float)));
        double ref2 = 0.0;
        for (float v : x2) ref2 += v;
        bool ok = true;
        float first2 = 0.0f;
        for (int rep = 0; rep < 16; rep++) {
            last_block_sum_kernel<<<blocks2, 128>>>(out, partial2, d2, n2);
            float got;
            CK(cudaMemcpy(&got, out, sizeof(float), cudaMemcpyDeviceToHost));
            if (rep == 0) first2 = got;
            ok = ok && got == first2;
        }
        CHECK(ok && fabs(first2 - ref2) < 1e-2, "last_block_reduction_256_blocks_16_launches_never_flagged");
        CK(cudaFree(partial2));
        CK(cudaFree(d2));
    }

    float table[4] = {1.0f, -2.0f, 0.5f, 4.0f};
    CK(cudaMemcpyToSymbol(scale_table, table, sizeof(table)));
    int hz = 0;
    CK(cudaMemcpyToSymbol(hits, &hz, sizeof(hz)));
    float* y;
    CK(cudaMalloc(&y, n * sizeof(float)));
    count_and_scale_kernel<<<blocks, 128>>>(y, d, n);
    int hits_host = 0;
    CK(cudaMemcpyFromSymbol(&hits_host, hits, sizeof(int)));
    std::vector<float> yh = to_host(y, n);
    int positive = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        positive += x[i] > 0.0f;
        bad += yh[i] != x[i] * table[i % 4];
    }
    CHECK(hits_host == positive && bad == 0, "device_variable_atomic_counter_and_constant_table_by_symbol");

    float* o;
    CK(cudaMalloc(&o, 256 * sizeof(float)));
    big_locals_kernel<<<1, 64>>>(o, 7);
    std::vector<float> oh = to_host(o, 64);
    bad = 0;
    for (int t = 0; t < 64; t++) {
        float s2 = 0.0f;
        for (int i = t; i < 40 * 1024; i += 97) s2 += (float)(i % 7);
        bad += oh[t] != s2;
    }
    CHECK(bad == 0, "160_KiB_of_locals_a_thread");

    std::vector<float> in = random_vec(1024, 0.5f);
    float* din = to_device(in);
    many_registers_kernel<<<1, 256>>>(o, din, 0);
    CK(cudaGetLastError());
    std::vector<float> mh = to_host(o, 64);
    bad = 0;
    for (int t = 0; t < 64; t++) {
        float s2 = 0.0f;
        for (int k = 0; k < 64; k++) s2 += in[k * 16 + t % 16] * (float)(k + 1);
        bad += fabsf(mh[t] - s2) > 1e-3f * (1.0f + fabsf(s2));
    }
    CHECK(bad == 0, "134_registers_a_thread_at_256_threads");
    CK(cudaFree(d));
    CK(cudaFree(partial));
    CK(cudaFree(out));
    CK(cudaFree(y));
    CK(cudaFree(o));
    CK(cudaFree(din));
}

// ---- streams and events used correctly: nothing may be flagged, every result as in one stream ----
__global__ void axpb_kernel(float* y, const float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}

static void test_streams() {
    const int n = 4096, pieces = 4, p = n / pieces;
    std::vector<float> x = random_vec(n);
    float *d_in = to_device(x), *d_mid, *d_out, *h;
    CK(cudaMalloc(&d_mid, n * sizeof(float)));
    CK(cudaMalloc(&d_out, n * sizeof(float)));
    CK(cudaMallocHost(&h, n * sizeof(float)));
    cudaStream_t compute, comm;
    CK(cudaStreamCreate(&compute));
    CK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    cudaEvent_t ready[pieces], done[pieces], all;
    for (int k = 0; k < pieces; k++) {
        CK(cudaEventCreateWithFlags(&ready[k], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
    }
    CK(cudaEventCreate(&all));
    // A pipeline over two rounds: compute makes piece k, comm transforms it (waiting for it) and
    // copies it down; compute reuses its piece of d_mid only after comm is done with it.
    int bad = 0;
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < pieces; k++) {
            if (round > 0) CK(cudaStreamWaitEvent(compute, done[k], 0));
            axpb_kernel<<<p / 256, 256, 0, compute>>>(d_mid + k * p, d_in + k * p, 2.0f, (float)round, p);
            CK(cudaEventRecord(ready[k], compute));
            CK(cudaStreamWaitEvent(comm, ready[k], 0));
            axpb_kernel<<<p / 256, 256, 0, comm>>>(d_out + k * p, d_mid + k * p, 1.0f, 1.0f, p);
            CK(cudaMemcpyAsync(h + k * p, d_out + k * p, p * sizeof(float), cudaMemcpyDeviceToHost, comm));
            CK(cudaEventRecord(done[k], comm));
        }
        for (int k = 0; k < pieces; k++) {
            CK(cudaEventSynchronize(done[k]));
            for (int i = k * p; i < (k + 1) * p; i++) bad += h[i] != 2.0f * x[i] + (float)round + 1.0f;
        }
    }
    CHECK(bad == 0, "streams_two_stream_pipeline_with_events");
    // The legacy default stream orders blocking streams: a kernel on it, then one on a blocking
    // stream that reads its output, then a synchronous copy that waits for both.
    axpb_kernel<<<n / 256, 256>>>(d_mid, d_in, 3.0f, 0.0f, n);
    axpb_kernel<<<n / 256, 256, 0, compute>>>(d_out, d_mid, 1.0f, -1.0f, n);
    std::vector<float> got(n);
    CK(cudaMemcpy(got.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++) bad += got[i] != 3.0f * x[i] - 1.0f;
    CHECK(bad == 0, "streams_legacy_default_stream_orders_blocking_streams");
    // Host and device take turns on pinned and managed memory, each after synchronizing.
    float* m;
    CK(cudaMallocManaged(&m, n * sizeof(float)));
    for (int i = 0; i < n; i++) m[i] = x[i];
    axpb_kernel<<<n / 256, 256, 0, comm>>>(m, m, 2.0f, 0.0f, n);
    CK(cudaEventRecord(all, comm));
    CK(cudaEventSynchronize(all));
    bad = 0;
    for (int i = 0; i < n; i++) bad += m[i] != 2.0f * x[i];
    for (int i = 0; i < n; i++) h[i] = 1.0f;
    CK(cudaMemcpyAsync(d_mid, h, n * sizeof(float), cudaMemcpyHostToDevice, compute));
    CK(cudaStreamSynchronize(compute));
    for (int i = 0; i < n; i++) h[i] = 5.0f;  // the upload is done: the source is free again
    CK(cudaMemcpy(got.data(), d_mid, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) bad += got[i] != 1.0f;
    CHECK(bad == 0, "streams_host_takes_turns_with_device_on_pinned_and_managed_memory");
#if defined(CUDA_CPU_NCCL)
    // NCCL on a comm stream with the waits it needs on both sides (one rank).
    ncclComm_t nc;
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    bool ok = ncclCommInitRank(&nc, 1, id, 0) == ncclSuccess;
    axpb_kernel<<<n / 256, 256, 0, compute>>>(d_mid, d_in, 1.0f, 1.0f, n);
    CK(cudaEventRecord(ready[0], compute));
    CK(cudaStreamWaitEvent(comm, ready[0], 0));
    ok = ok && ncclAllReduce(d_mid, d_mid, n, ncclFloat32, ncclSum, nc, comm) == ncclSuccess;
    CK(cudaEventRecord(done[0], comm));
    CK(cudaStreamWaitEvent(compute, done[0], 0));
    axpb_kernel<<<n / 256, 256, 0, compute>>>(d_out, d_mid, 2.0f, 0.0f, n);
    CK(cudaMemcpyAsync(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, compute));
    CK(cudaStreamSynchronize(compute));
    bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != 2.0f * (x[i] + 1.0f);
    ok = ok && ncclCommDestroy(nc) == ncclSuccess;
    CHECK(ok && bad == 0, "streams_nccl_on_a_comm_stream_with_waits");
#endif
    for (int k = 0; k < pieces; k++) {
        CK(cudaEventDestroy(ready[k]));
        CK(cudaEventDestroy(done[k]));
    }
    CK(cudaEventDestroy(all));
    CK(cudaStreamDestroy(compute));
    CK(cudaStreamDestroy(comm));
    CK(cudaFree(m));
    CK(cudaFreeHost(h));
    CK(cudaFree(d_in));
    CK(cudaFree(d_mid));
    CK(cudaFree(d_out));
}

static void test_fast_math() {
    const int n = 512;
    std::vector<float> x = random_vec(n, 5.0f);
    float* dx = to_device(x);
    float* dout;
    CK(cudaMalloc(&dout, 6 * n * sizeof(float)));
    fast_math_kernel<<<(n + 127) / 128, 128>>>(dout, dx, n);
    std::vector<float> o = to_host(dout, 6 * n);
    int over = 0, moved = 0;
    for (int i = 0; i < n; i++) {
        double v = x[i];
        // the documented bound (+1 ulp for the rounding of the reference) must hold; the arguments
        // are the float values the kernel computed
        float la = fabsf(x[i]) + 0.75f, den = 1.5f + x[i] * x[i], ra = fabsf(x[i]) + 0.25f;
        double e = exp(v), l = log((double)la), s = sin(v), d = v / (double)den, r = 1.0 / sqrt((double)ra);
        over += fabs(o[6 * i] - e) > (3 + floor(fabs(1.173 * v))) * ulp_of(e);
        over += (la >= 0.5f && la <= 2.0f) ? fabs(o[6 * i + 1] - l) > ldexp(1.0, -21) + ulp_of(l)
                                           : fabs(o[6 * i + 1] - l) > 4 * ulp_of(l);
        over += fabs(v) <= M_PI ? fabs(o[6 * i + 2] - s) > ldexp(1.0, -21) + ulp_of(s) : 0;
        over += fabs(o[6 * i + 3] - d) > 3 * ulp_of(d);
        over += fabs(o[6 * i + 4] - r) > 3 * ulp_of(r);
        // and the results are not libm's: a tolerance fitted to libm would not hold on a GPU
        moved += o[6 * i] != expf(x[i]);
    }
    char why[96];
    snprintf(why, sizeof(why), "%d results outside the documented bounds", over);
    test_report(over == 0, "fast_math_intrinsics_within_documented_error", why);
    snprintf(why, sizeof(why), "only %d of %d __expf results differ from expf", moved, n);
    test_report(moved > n / 2, "fast_math_intrinsics_carry_their_error", why);
}

int main() {
#ifdef CUDA_CPU
    // every launch under four schedules, unless the caller chose
    setenv("CUDA_CPU_SCHEDULES", "forward,reverse,shuffle:1,shuffle:2", 0);
#endif
    test_cooperative_groups();
    test_softmaxes();
    test_vector_loads();
    test_atomics();
    test_barrier_patterns();
    test_same_name_launcher();
    test_block_order_patterns();
    test_streams();
    test_fast_math();
    return test_finish();
}
