// test_wgmma.cu: the warpgroup matrix primitives of kernels/wgmma.cuh (wgmma.mma_async m64nNk16 with A
// from registers and B through a no-swizzle descriptor, fence, commit, wait) checked against the PTX
// ISA's documented layouts with inputs whose every element is distinct and every sum exact: A and D
// lane by lane, B K-major and MN-major from kernels/wgmma.cuh's tile layout, N = 32 and 64, f16 and
// bf16, one and two warpgroups a block; the products the flash kernels chain (S = Q K^T over the head
// dimension, O += P V with P repacked from accumulators) against a scalar reference; the asynchrony
// (a group completes at the wait that covers it, not before); what CUDA_CPU_COUNT counts; and the
// mistakes the runtime must refuse, each in a child process (child.h). Plain CUDA: it compiles with
// nvcc too (test_nvcc_compile.sh), for sm_90a.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "cuda_cpu/child.h"
#define CK_CHILD_STATUS 3  // a case runs as a child: its parent reads stderr
#include "cuda_test.h"
#include "test.h"
#include "wgmma.cuh"

// ---- the PTX ISA's register fragments for wgmma .m64nNk16 (16-bit A, f32 D), written out: warp w of
// the warpgroup (w = warp % 4), g = lane >> 2, t = lane % 4. A: element i (0..7) of a lane is half
// (i & 1) of register i / 2. D: element i (0..N/2-1) of a lane. ----
__host__ __device__ static int frag_a_row(int w, int lane, int i) { return 16 * w + (lane >> 2) + ((i >> 1) & 1) * 8; }
__host__ __device__ static int frag_a_col(int lane, int i) { return (lane & 3) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
__host__ __device__ static int frag_d_row(int w, int lane, int i) { return 16 * w + (lane >> 2) + ((i >> 1) & 1) * 8; }
__host__ __device__ static int frag_d_col(int lane, int i) { return (i >> 2) * 8 + (lane & 3) * 2 + (i & 1); }

// The ISA's figures (the D fragment of m64nNk16, the A fragment of m64nNk16 for 16-bit types; CUTLASS's
// CLayout_64xN and ALayout_64x16 encode the same) for a few lanes, position by position: a guard on the
// formulas above.
static void test_tables_match_isa_figures() {
    struct { int w, lane, i, row, col; } d[] = {
        {0, 0, 0, 0, 0}, {0, 0, 1, 0, 1}, {0, 0, 2, 8, 0}, {0, 0, 3, 8, 1}, {0, 0, 4, 0, 8},
        {0, 5, 6, 9, 10}, {1, 5, 6, 25, 10}, {3, 31, 31, 63, 63}, {2, 12, 17, 35, 33},
    };
    struct { int w, lane, i, row, col; } a[] = {
        {0, 0, 0, 0, 0}, {0, 0, 3, 8, 1}, {0, 0, 4, 0, 8}, {1, 5, 6, 25, 10}, {3, 31, 7, 63, 15},
    };
    bool ok = true;
    for (auto& x : d) ok &= frag_d_row(x.w, x.lane, x.i) == x.row && frag_d_col(x.lane, x.i) == x.col;
    for (auto& x : a) ok &= frag_a_row(x.w, x.lane, x.i) == x.row && frag_a_col(x.lane, x.i) == x.col;
    test_report(ok, "wgmma_tables_match_isa_figures", "a fragment formula differs from the ISA's figure");
}

static uint16_t bits16(float v, bool bf16) {
    uint16_t u;
    if (bf16) { __nv_bfloat16 h = __float2bfloat16(v); memcpy(&u, (const void*)&h, 2); }
    else { __half h = __float2half(v); memcpy(&u, (const void*)&h, 2); }
    return u;
}

// The block's B tile of ones (16 x 32 f16), for the asynchrony, count and refusal cases below.
__device__ void fill_ones(__half* sB, int n) {
    for (int e = threadIdx.x; e < n; e += blockDim.x) sB[e] = __float2half(1.0f);
    __syncthreads();
}
// One m64n32k16 product of zeros by that tile into d, fenced and committed, not waited for.
__device__ void issue_one(float (&d)[4][4], const __half* sB, int scale_d) {
    uint32_t a[4] = {0, 0, 0, 0};
    wgmma_fence();
    wgmma_rs<__half, 32, 0>(d, a, wg_desc_kmajor<16>(sB, 0), scale_d);
    wgmma_commit();
}
// ---- 1. one product, lane by lane: D (64 x N a warpgroup) = A B + C. A (64 x 16) from registers the
// host filled from the A table; B (16 x N) copied into shared memory in kernels/wgmma.cuh's tile
// layout, as N rows of 16 (K-major: B^T's rows) or as 16 rows of N (MN-major); C from the D table. ----
template <class T, int N, int TRANS>
__global__ void wgmma_layout_kernel(const uint32_t* a, const T* b, const float* c, float* d, int scale_d) {
    // K-major: rows n, columns k (16); MN-major: rows k (16), columns n (N)
    __shared__ __align__(128) T sB[16 * N];
    const int tid = threadIdx.x, wg = tid / 128;
    for (int e = tid; e < 16 * N; e += blockDim.x) {
        const int k = e / N, n = e % N;  // b is B, k-major rows of N
        const int off = TRANS ? wg_tile_offset<N>(k, n & ~7) + (n & 7) : wg_tile_offset<16>(n, k & ~7) + (k & 7);
        sB[off] = b[e];
    }
    __syncthreads();
    uint32_t ra[4];
    float acc[N / 8][4];
    for (int r = 0; r < 4; r++) ra[r] = a[(wg * 128 + tid % 128) * 4 + r];
    for (int j = 0; j < N / 8; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = c[(wg * 128 + tid % 128) * (N / 2) + 4 * j + i];
    const uint64_t desc = TRANS ? wg_desc_mnmajor<N>(sB, 0) : wg_desc_kmajor<16>(sB, 0);
    wgmma_fence();
    wgmma_hold(acc);
    wgmma_rs<T, N, TRANS>(acc, ra, desc, scale_d);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(acc);
    for (int j = 0; j < N / 8; j++)
        for (int i = 0; i < 4; i++) d[(wg * 128 + tid % 128) * (N / 2) + 4 * j + i] = acc[j][i];
}

template <class T, int N, int TRANS>
static void test_wgmma_layout(const char* name, bool bf16, int groups, int scale_d) {
    // per warpgroup: A 64x16 and C 64xN distinct; B 16xN shared; all small integers (exact sums)
    std::vector<float> A(groups * 64 * 16), B(16 * N), C(groups * 64 * N);
    for (int i = 0; i < (int)A.size(); i++) A[i] = (float)((i * 73) % 256 - 128);
    for (int i = 0; i < 16 * N; i++) B[i] = (float)((i * 45 + 7) % (16 * N) % 128 - 64);
    for (int i = 0; i < (int)C.size(); i++) C[i] = (float)(i * 1000 + 3);
    std::vector<uint32_t> a(groups * 128 * 4);
    std::vector<float> c(groups * 128 * (N / 2));
    std::vector<T> b(16 * N);
    for (int i = 0; i < 16 * N; i++) { uint16_t u = bits16(B[i], bf16); memcpy((void*)&b[i], &u, 2); }
    for (int gq = 0; gq < groups; gq++)
        for (int th = 0; th < 128; th++) {
            int w = th / 32, l = th % 32;
            for (int r = 0; r < 4; r++) {
                uint16_t lo = bits16(A[gq * 1024 + frag_a_row(w, l, 2 * r) * 16 + frag_a_col(l, 2 * r)], bf16);
                uint16_t hi = bits16(A[gq * 1024 + frag_a_row(w, l, 2 * r + 1) * 16 + frag_a_col(l, 2 * r + 1)], bf16);
                a[(gq * 128 + th) * 4 + r] = lo | (uint32_t)hi << 16;
            }
            for (int i = 0; i < N / 2; i++)
                c[(gq * 128 + th) * (N / 2) + i] = C[gq * 64 * N + frag_d_row(w, l, i) * N + frag_d_col(l, i)];
        }
    uint32_t* da = to_device(a);
    T* db = to_device(b);
    float* dc = to_device(c);
    float* dd;
    CK(cudaMalloc(&dd, c.size() * sizeof(float)));
    wgmma_layout_kernel<T, N, TRANS><<<1, 128 * groups>>>(da, db, dc, dd, scale_d);
    CK(cudaGetLastError());
    std::vector<float> d = to_host(dd, c.size());
    int bad = 0;
    char why[200] = "";
    for (int gq = 0; gq < groups; gq++)
        for (int th = 0; th < 128; th++)
            for (int i = 0; i < N / 2; i++) {
                int w = th / 32, l = th % 32, m = frag_d_row(w, l, i), n = frag_d_col(l, i);
                double e = scale_d ? C[gq * 64 * N + m * N + n] : 0.0;
                for (int k = 0; k < 16; k++) e += (double)A[gq * 1024 + m * 16 + k] * B[k * N + n];
                float got = d[(gq * 128 + th) * (N / 2) + i];
                if (got != (float)e && !bad++)
                    snprintf(why, sizeof(why), "group %d thread %d d%d (D[%d][%d]) = %.1f, expected %.1f", gq, th, i, m, n,
                             got, e);
            }
    test_report(bad == 0, name, why);
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    CK(cudaFree(dd));
}

// ---- 2. the flash kernels' chains, a 64 x 64 head-dimension tile: S = Q K^T (4 k-steps, the first
// with scale-d 0, one commit) and O = P V with P = S's accumulators repacked (mma_pack_a) into A
// fragments and V MN-major; against a double-precision reference of the same rounded P. ----
template <class T, int HS>
__global__ void wgmma_chain_kernel(const T* q, const T* k, const T* v, float* s_out, float* o_out) {
    __shared__ __align__(128) T sQ[64 * HS], sK[64 * HS], sV[64 * HS];
    const int tid = threadIdx.x, w = tid / 32, lane = tid % 32;
    for (int e = tid; e < 64 * HS; e += 128) {
        const int r = e / HS, col = e % HS, off = wg_tile_offset<HS>(r, col & ~7) + (col & 7);
        sQ[off] = q[e];
        sK[off] = k[e];
        sV[off] = v[e];
    }
    __syncthreads();
    uint32_t qf[HS / 16][4];  // this warp's 16 query rows, by ldmatrix from the tile layout
    for (int kc = 0; kc < HS / 16; kc++) {
        const int r = 16 * w + (lane & 15), col = 16 * kc + (lane >> 4) * 8;
        mma_ldmatrix_x4(qf[kc], &sQ[wg_tile_offset<HS>(r, col)]);
    }
    float s[8][4], o[HS / 8][4];
    wgmma_fence();
    for (int kc = 0; kc < HS / 16; kc++) wgmma_rs<T, 64, 0>(s, qf[kc], wg_desc_kmajor<HS>(sK, kc), kc > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(s);
    uint32_t pf[4][4];
    for (int kc = 0; kc < 4; kc++) mma_pack_a<T>(pf[kc], s[2 * kc], s[2 * kc + 1]);
    wgmma_fence();
    for (int kc = 0; kc < 4; kc++) wgmma_rs<T, HS, 1>(o, pf[kc], wg_desc_mnmajor<HS>(sV, kc), kc > 0);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(o);
    for (int j = 0; j < 8; j++)
        for (int i = 0; i < 4; i++) s_out[frag_d_row(w, lane, 4 * j + i) * 64 + frag_d_col(lane, 4 * j + i)] = s[j][i];
    for (int j = 0; j < HS / 8; j++)
        for (int i = 0; i < 4; i++) o_out[frag_d_row(w, lane, 4 * j + i) * HS + frag_d_col(lane, 4 * j + i)] = o[j][i];
}

static float round16(float v, bool bf16) {
    if (bf16) return __bfloat162float(__float2bfloat16(v));
    return __half2float(__float2half(v));
}

template <class T, int HS>
static void test_wgmma_chain(const char* name, bool bf16) {
    // Q, K, V of small multiples of 1/8 (exact in f16 and bf16); S's sums are exact in fp32, P = S / 64
    // rounded to T as the kernel's pack rounds it
    std::vector<T> q(64 * HS), k(64 * HS), v(64 * HS);
    std::vector<float> Q(64 * HS), K(64 * HS), Vf(64 * HS);
    for (int i = 0; i < 64 * HS; i++) {
        Q[i] = (float)((i * 37) % 17 - 8) / 8.0f;
        K[i] = (float)((i * 53) % 13 - 6) / 8.0f;
        Vf[i] = (float)((i * 29) % 11 - 5) / 8.0f;
        uint16_t u = bits16(Q[i], bf16); memcpy((void*)&q[i], &u, 2);
        u = bits16(K[i], bf16); memcpy((void*)&k[i], &u, 2);
        u = bits16(Vf[i], bf16); memcpy((void*)&v[i], &u, 2);
    }
    T *dq = to_device(q), *dk = to_device(k), *dv = to_device(v);
    float *ds, *dO;
    CK(cudaMalloc(&ds, 64 * 64 * sizeof(float)));
    CK(cudaMalloc(&dO, 64 * HS * sizeof(float)));
    wgmma_chain_kernel<T, HS><<<1, 128>>>(dq, dk, dv, ds, dO);
    CK(cudaGetLastError());
    std::vector<float> S = to_host(ds, 64 * 64), O = to_host(dO, 64 * HS);
    int bad = 0;
    char why[200] = "";
    std::vector<float> P(64 * 64);
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < 64; n++) {
            double e = 0;
            for (int c = 0; c < HS; c++) e += (double)Q[m * HS + c] * K[n * HS + c];
            if (S[m * 64 + n] != (float)e && !bad++)
                snprintf(why, sizeof(why), "S[%d][%d] = %g, expected %g", m, n, S[m * 64 + n], e);
            P[m * 64 + n] = round16(S[m * 64 + n], bf16);
        }
    // O = P V: each product exact in fp32, 64 of them summed in fp32 (the runtime's order, k ascending
    // in steps of 16): within 64 roundings of the largest partial sum, a bound the data stays far inside
    for (int m = 0; m < 64 && !bad; m++)
        for (int c = 0; c < HS; c++) {
            double e = 0, mag = 0;
            for (int n = 0; n < 64; n++) {
                e += (double)P[m * 64 + n] * Vf[n * HS + c];
                mag += fabs((double)P[m * 64 + n] * Vf[n * HS + c]);
            }
            if (fabs(O[m * HS + c] - e) > 64 * mag * 6e-8 && !bad++)
                snprintf(why, sizeof(why), "O[%d][%d] = %g, expected %g", m, c, O[m * HS + c], e);
        }
    test_report(bad == 0, name, why);
    CK(cudaFree(dq));
    CK(cudaFree(dk));
    CK(cudaFree(dv));
    CK(cudaFree(ds));
    CK(cudaFree(dO));
}

#if defined(CUDA_CPU)
// ---- 3. asynchrony (the runtime's model of it; on a GPU reading accumulators before their wait is
// undefined): two groups into two accumulators; wait_group 1 completes the first only. ----
__global__ void wgmma_async_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    const uint32_t one = 0x3c003c00u;  // two f16 ones
    uint32_t a[4] = {one, one, one, one};
    float d1[4][4], d2[4][4];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) d1[j][i] = d2[j][i] = -1.0f;
    wgmma_fence();
    wgmma_rs<__half, 32, 0>(d1, a, wg_desc_kmajor<16>(sB, 0), 0);
    wgmma_commit();
    wgmma_rs<__half, 32, 0>(d2, a, wg_desc_kmajor<16>(sB, 0), 1);
    wgmma_commit();
    const float before = d1[0][0];  // both in flight: the old value
    wgmma_wait<1>();
    const float first = d1[0][0], second_pending = d2[0][0];
    wgmma_wait<0>();
    if (threadIdx.x == 0) {
        out[0] = before;
        out[1] = first;
        out[2] = second_pending;
        out[3] = d2[0][0];
    }
}

static void test_wgmma_async() {
    float* d;
    CK(cudaMalloc(&d, 4 * sizeof(float)));
    wgmma_async_kernel<<<1, 128>>>(d);
    CK(cudaGetLastError());
    std::vector<float> o = to_host(d, 4);
    char why[200];
    snprintf(why, sizeof(why), "d1 before the waits %g (want -1), after wait_group 1 %g (16); d2 then %g (-1), after "
             "wait_group 0 %g (15)", o[0], o[1], o[2], o[3]);
    test_report(o[0] == -1.0f && o[1] == 16.0f && o[2] == -1.0f && o[3] == 15.0f, "wgmma_groups_complete_at_their_wait", why);
    CK(cudaFree(d));
}

// ---- 4. CUDA_CPU_COUNT: a block of two warpgroups, 3 products of m64n32k16 each: FLOPs 2 x 64 x 32 x 16
// a product and warpgroup, one wgmma instruction a warp and product, B's 1 KiB of shared memory read once
// a warpgroup and product. Run in a child with CUDA_CPU_COUNT set. ----
__global__ void wgmma_count_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    for (int e = threadIdx.x; e < 16 * 32; e += blockDim.x) sB[e] = __float2half(0.5f);
    __syncthreads();
    uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
    float d[4][4];
    wgmma_fence();
    for (int r = 0; r < 3; r++) wgmma_rs<__half, 32, 0>(d, a, wg_desc_kmajor<16>(sB, 0), r > 0);
    wgmma_commit();
    wgmma_wait<0>();
    out[threadIdx.x] = d[0][0];
}
#endif

// ---- 5. mistakes the runtime refuses (each run in a child process) ----
__global__ void bad_wgmma_no_fence_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    uint32_t a[4] = {0, 0, 0, 0};
    float d[4][4];
    wgmma_rs<__half, 32, 0>(d, a, wg_desc_kmajor<16>(sB, 0), 0);  // no wgmma.fence first
    wgmma_commit();
    wgmma_wait<0>();
    out[threadIdx.x] = d[0][0];
}
__global__ void bad_wgmma_operand_written_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    float d[4][4];
    issue_one(d, sB, 0);
    __syncthreads();  // a barrier orders the threads, not the product in flight:
    if (threadIdx.x < 32) sB[threadIdx.x] = __float2half(2.0f);  // B may be read until the wait
    wgmma_wait<0>();
    out[threadIdx.x] = d[0][0];
}
__global__ void bad_wgmma_accumulator_written_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    float d[4][4];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 4; i++) d[j][i] = 0.0f;
    issue_one(d, sB, 1);
    d[1][2] = 3.0f;  // an accumulator in flight
    wgmma_wait<0>();
    out[threadIdx.x] = d[0][0];
}
__global__ void bad_wgmma_exit_in_flight_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    float d[4][4];
    issue_one(d, sB, 0);  // no wait: the product is still in flight at exit
    out[threadIdx.x] = 1.0f;
}
__global__ void bad_wgmma_partial_warpgroup_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    wgmma_fence();
    out[threadIdx.x] = 1.0f;
}
__global__ void bad_wgmma_swizzled_kernel(float* out) {
    __shared__ __align__(128) __half sB[16 * 32];
    fill_ones(sB, 16 * 32);
    uint32_t a[4] = {0, 0, 0, 0};
    float d[4][4];
    wgmma_fence();
    wgmma_rs<__half, 32, 0>(d, a, wg_desc_kmajor<16>(sB, 0) | 1ull << 62, 0);  // 128-byte swizzle
    wgmma_commit();
    wgmma_wait<0>();
    out[threadIdx.x] = d[0][0];
}
__global__ void bad_wgmma_divergent_desc_kernel(float* out) {
    __shared__ __align__(128) __half sB[2 * 16 * 32];
    fill_ones(sB, 2 * 16 * 32);
    uint32_t a[4] = {0, 0, 0, 0};
    float d[4][4];
    wgmma_fence();
    // lane 7 points at another tile: the descriptor must be the same across the warpgroup
    wgmma_rs<__half, 32, 0>(d, a, wg_desc_kmajor<16>(sB + ((threadIdx.x & 31) == 7 ? 16 * 32 : 0), 0), 0);
    wgmma_commit();
    wgmma_wait<0>();
    out[threadIdx.x] = d[0][0];
}

static int run_case(const char* name) {
    std::string n = name;
    float* f;
    CK(cudaMalloc(&f, 256 * sizeof(float)));
    if (n == "no_fence") bad_wgmma_no_fence_kernel<<<1, 128>>>(f);
    else if (n == "operand_written") bad_wgmma_operand_written_kernel<<<1, 128>>>(f);
    else if (n == "accumulator_written") bad_wgmma_accumulator_written_kernel<<<1, 128>>>(f);
    else if (n == "exit_in_flight") bad_wgmma_exit_in_flight_kernel<<<1, 128>>>(f);
    else if (n == "partial_warpgroup") bad_wgmma_partial_warpgroup_kernel<<<1, 96>>>(f);
    else if (n == "swizzled") bad_wgmma_swizzled_kernel<<<1, 128>>>(f);
    else if (n == "divergent_desc") bad_wgmma_divergent_desc_kernel<<<1, 128>>>(f);
#if defined(CUDA_CPU)
    else if (n == "count") wgmma_count_kernel<<<1, 256>>>(f);
#endif
    else { fprintf(stderr, "unknown case %s\n", name); return 2; }
    CK(cudaDeviceSynchronize());
    return 0;
}

#if defined(CUDA_CPU)
static void test_wgmma_count() {
    char path[] = "/tmp/test_wgmma_count.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { test_report(false, "wgmma_counted", "mkstemp failed"); return; }
    close(fd);
    ChildResult r = run_child_case("count", {std::string("CUDA_CPU_COUNT=") + path, "CUDA_CPU_CHECK=0"});
    std::string line;
    if (FILE* fp = fopen(path, "r")) {
        char buf[4096];
        while (fgets(buf, sizeof(buf), fp))
            if (strstr(buf, "wgmma_count_kernel")) line = buf;
        fclose(fp);
    }
    unlink(path);
    auto field = [&](const char* key) -> long long {
        std::string k = std::string(" ") + key + "=";
        size_t at = line.find(k);
        return at == std::string::npos ? -1 : atoll(line.c_str() + at + k.size());
    };
    // 2 warpgroups x 3 products: 6 x 2 x 64 x 32 x 16 FLOPs; 8 warps x 3 instructions; B (16 x 32 f16,
    // 1 KiB) 6 times from shared memory, beside the kernel's own stores of it (2 bytes x 512 x 2 groups)
    long long flops = field("wgmma_flops"), ins = field("wgmma"), mma = field("mma_flops"), smem = field("smem_read");
    char why[300];
    snprintf(why, sizeof(why), "child %s; wgmma_flops %lld (want %d), wgmma %lld (24), mma_flops %lld (0), smem_read %lld "
             "(6144): %s", r.exited_ok() ? "ok" : "failed", flops, 6 * 2 * 64 * 32 * 16, ins, mma, smem, line.c_str());
    test_report(r.exited_ok() && flops == 6LL * 2 * 64 * 32 * 16 && ins == 24 && mma == 0 && smem == 6144, "wgmma_counted",
                why);
}
#endif

#if defined(WGMMA_AVAILABLE)
__device__ int wgmma_built = 1;
#else
__device__ int wgmma_built = 0;
#endif

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        setenv("OMPI_MCA_opal_signal", "", 0);
        return run_case(argv[2]);
    }
    test_tables_match_isa_figures();
#if !defined(CUDA_CPU)
    int dev = 0, major = 0, minor = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    int built = 0;  // whether the code the device loaded has wgmma (sm_90a)
    if (major == 9 && minor == 0) CK(cudaMemcpyFromSymbol(&built, wgmma_built, sizeof(int)));
    if (!built) {
        printf("SKIP wgmma: the device (compute %d.%d) or this build (sm_90a needed) has no wgmma\n", major, minor);
        return test_finish();
    }
#endif
    test_wgmma_layout<__half, 64, 0>("wgmma_layout_f16_n64_kmajor", false, 1, 1);
    test_wgmma_layout<__half, 64, 1>("wgmma_layout_f16_n64_mnmajor", false, 1, 1);
    test_wgmma_layout<__nv_bfloat16, 32, 0>("wgmma_layout_bf16_n32_kmajor", true, 1, 1);
    test_wgmma_layout<__nv_bfloat16, 32, 1>("wgmma_layout_bf16_n32_mnmajor", true, 1, 1);
    test_wgmma_layout<__half, 32, 1>("wgmma_layout_f16_n32_mnmajor_scale_d_0", false, 1, 0);
    test_wgmma_layout<__half, 64, 0>("wgmma_layout_f16_n64_two_warpgroups", false, 2, 1);
    test_wgmma_layout<__nv_bfloat16, 64, 1>("wgmma_layout_bf16_n64_two_warpgroups", true, 2, 1);
    test_wgmma_chain<__half, 64>("wgmma_chain_f16_hs64", false);
    test_wgmma_chain<__nv_bfloat16, 64>("wgmma_chain_bf16_hs64", true);
    test_wgmma_chain<__half, 32>("wgmma_chain_f16_hs32", false);
#if defined(CUDA_CPU)
    test_wgmma_async();
    test_wgmma_count();
#endif
#if defined(CUDA_CPU)  // a GPU checks none of these: the runtime's refusals
    struct Case { const char* name; const char* kernel; const char* what; } cases[] = {
        {"no_fence", "bad_wgmma_no_fence_kernel", "with no wgmma.fence"},
        {"operand_written", "bad_wgmma_operand_written_kernel", "was written before the wgmma.wait_group"},
        {"accumulator_written", "bad_wgmma_accumulator_written_kernel", "accumulators of a wgmma.mma_async in flight"},
        {"exit_in_flight", "bad_wgmma_exit_in_flight_kernel", "exits with wgmma.mma_async in flight"},
        {"partial_warpgroup", "bad_wgmma_partial_warpgroup_kernel", "need whole warpgroups"},
        {"swizzled", "bad_wgmma_swizzled_kernel", "emulates only the no-swizzle layout"},
        {"divergent_desc", "bad_wgmma_divergent_desc_kernel", "give different descriptors"},
    };
    for (const Case& k : cases) {
        Refusal r = expect_refusal(k.name, k.kernel, k.what);
        test_report(r.ok, (std::string("refused_") + k.name).c_str(), r.why.c_str());
        if (r.ok) printf("  %s\n", r.message.c_str());
    }
#endif
    return test_finish();
}
