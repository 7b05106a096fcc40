// test_mma.cu: the PTX-level warp matrix primitives of kernels/mma.cuh (mma.sync m16n8k16, ldmatrix,
// cp.async) checked against the PTX ISA's documented layouts, lane by lane, with inputs whose every
// element is distinct; an m16n8k16 product through ldmatrix against a scalar reference in f16 and
// bf16; cp.async's commit/wait-group order (a read before the wait sees the old bytes); and the
// mistakes the runtime must refuse, each in a child process (child.h). Plain CUDA: it compiles with
// nvcc too (test_nvcc_compile.sh).
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
#include "mma.cuh"
#include "test.h"

// ---- the PTX ISA's fragment tables for mma.m16n8k16 (f16/bf16 in, f32 accumulate), written out:
// groupID g = lane >> 2, threadID_in_group t = lane % 4. Element i of a fragment is half (i & 1) of
// register i / 2. ----
static int frag_a_row(int lane, int i) { return (lane >> 2) + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0); }
static int frag_a_col(int lane, int i) { return (lane & 3) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
static int frag_b_row(int lane, int i) { return (lane & 3) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }  // k
static int frag_b_col(int lane, int i) { return lane >> 2; }                                     // n
static int frag_c_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
static int frag_c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

// The ISA's figures for three lanes, copied position by position: a guard on the formulas above.
static void test_tables_match_isa_figures() {
    struct { int lane; int a[8][2]; int b[4][2]; int c[4][2]; } fig[] = {
        {0, {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}}, {{0, 0}, {1, 0}, {8, 0}, {9, 0}},
         {{0, 0}, {0, 1}, {8, 0}, {8, 1}}},
        {5, {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}}, {{2, 1}, {3, 1}, {10, 1}, {11, 1}},
         {{1, 2}, {1, 3}, {9, 2}, {9, 3}}},
        {31, {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}}, {{6, 7}, {7, 7}, {14, 7}, {15, 7}},
         {{7, 6}, {7, 7}, {15, 6}, {15, 7}}},
    };
    bool ok = true;
    for (auto& f : fig) {
        for (int i = 0; i < 8; i++) ok &= frag_a_row(f.lane, i) == f.a[i][0] && frag_a_col(f.lane, i) == f.a[i][1];
        for (int i = 0; i < 4; i++) ok &= frag_b_row(f.lane, i) == f.b[i][0] && frag_b_col(f.lane, i) == f.b[i][1];
        for (int i = 0; i < 4; i++) ok &= frag_c_row(f.lane, i) == f.c[i][0] && frag_c_col(f.lane, i) == f.c[i][1];
    }
    test_report(ok, "mma_tables_match_isa_figures", "a fragment formula differs from the ISA's figure");
}

static uint16_t bits16(float v, bool bf16) {
    uint16_t u;
    if (bf16) { __nv_bfloat16 h = __float2bfloat16(v); memcpy(&u, (const void*)&h, 2); }
    else { __half h = __float2half(v); memcpy(&u, (const void*)&h, 2); }
    return u;
}
static float from16(uint16_t u, bool bf16) {
    if (bf16) { __nv_bfloat16 h; memcpy((void*)&h, &u, 2); return __bfloat162float(h); }
    __half h;
    memcpy((void*)&h, &u, 2);
    return __half2float(h);
}

// ---- 1. mma.sync from registers: each lane's registers filled from the tables on the host ----
template <class T>
__global__ void mma_regs_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d, float* d75) {
    const int lane = threadIdx.x & 31;
    uint32_t ra[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
    uint32_t rb[2] = {b[lane * 2], b[lane * 2 + 1]};
    float acc[4] = {c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3]};
#if defined(CUDA_CPU)
    float acc75[4];
    mma_sm75_m16n8k16<T>(acc75, ra, rb, acc);  // mma.cuh's sm_75 path (shuffles)
    for (int i = 0; i < 4; i++) d75[lane * 4 + i] = acc75[i];
#endif
    mma_m16n8k16<T>(acc, ra, rb, acc);  // d aliases c, as in a k loop
    for (int i = 0; i < 4; i++) d[lane * 4 + i] = acc[i];
}

// A, B, C of distinct small integers (exact in f16, bf16 and in every fp32 sum): a wrong position
// changes the result. D is checked lane by lane against the C/D table.
template <class T>
static void test_mma_layout(const char* name, bool bf16) {
    std::vector<float> A(16 * 16), B(16 * 8), C(16 * 8);
    for (int i = 0; i < 256; i++) A[i] = (float)((i * 73) % 256 - 128);  // a permutation of -128..127
    for (int i = 0; i < 128; i++) B[i] = (float)((i * 45) % 128 - 64);   // of -64..63
    for (int i = 0; i < 128; i++) C[i] = (float)(i * 1000 + 7);
    std::vector<uint32_t> a(32 * 4), b(32 * 2);
    std::vector<float> c(32 * 4);
    for (int l = 0; l < 32; l++) {
        for (int r = 0; r < 4; r++) {
            uint16_t lo = bits16(A[frag_a_row(l, 2 * r) * 16 + frag_a_col(l, 2 * r)], bf16);
            uint16_t hi = bits16(A[frag_a_row(l, 2 * r + 1) * 16 + frag_a_col(l, 2 * r + 1)], bf16);
            a[l * 4 + r] = lo | (uint32_t)hi << 16;
        }
        for (int r = 0; r < 2; r++) {
            uint16_t lo = bits16(B[frag_b_row(l, 2 * r) * 8 + frag_b_col(l, 2 * r)], bf16);
            uint16_t hi = bits16(B[frag_b_row(l, 2 * r + 1) * 8 + frag_b_col(l, 2 * r + 1)], bf16);
            b[l * 2 + r] = lo | (uint32_t)hi << 16;
        }
        for (int i = 0; i < 4; i++) c[l * 4 + i] = C[frag_c_row(l, i) * 8 + frag_c_col(l, i)];
    }
    uint32_t *da = to_device(a), *db = to_device(b);
    float* dc = to_device(c);
    float *dd, *dd75;
    CK(cudaMalloc(&dd, 32 * 4 * sizeof(float)));
    CK(cudaMalloc(&dd75, 32 * 4 * sizeof(float)));
    CK(cudaMemset(dd75, 0, 32 * 4 * sizeof(float)));
    mma_regs_kernel<T><<<1, 32>>>(da, db, dc, dd, dd75);
    CK(cudaGetLastError());
    std::vector<float> d = to_host(dd, 32 * 4);
#if defined(CUDA_CPU)
    std::vector<float> d75 = to_host(dd75, 32 * 4);
    test_report(d75 == d, (std::string(name) + "_sm75_path").c_str(), "mma.cuh's sm_75 shuffle path differs from mma.sync");
#endif
    CK(cudaFree(dd75));
    int bad = 0;
    char why[200] = "";
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            int m = frag_c_row(l, i), n = frag_c_col(l, i);
            double e = C[m * 8 + n];
            for (int k = 0; k < 16; k++) e += (double)A[m * 16 + k] * B[k * 8 + n];
            if (d[l * 4 + i] != (float)e && !bad++)
                snprintf(why, sizeof(why), "lane %d d%d (D[%d][%d]) = %.1f, expected %.1f", l, i, m, n, d[l * 4 + i], e);
        }
    test_report(bad == 0, name, why);
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    CK(cudaFree(dd));
}

// ---- 2. ldmatrix, element by element: 32 rows of 8 distinct 16-bit values in shared memory; lane l
// supplies the address of row (7 l) % 32, so matrix j's row r is row (7 (8j + r)) % 32 ----
template <int N, bool TRANS> __device__ void ldm(uint32_t (&r)[N], const void* p);
template <> __device__ void ldm<1, false>(uint32_t (&r)[1], const void* p) { mma_ldmatrix_x1(r, p); }
template <> __device__ void ldm<2, false>(uint32_t (&r)[2], const void* p) { mma_ldmatrix_x2(r, p); }
template <> __device__ void ldm<4, false>(uint32_t (&r)[4], const void* p) { mma_ldmatrix_x4(r, p); }
template <> __device__ void ldm<1, true>(uint32_t (&r)[1], const void* p) { mma_ldmatrix_x1_trans(r, p); }
template <> __device__ void ldm<2, true>(uint32_t (&r)[2], const void* p) { mma_ldmatrix_x2_trans(r, p); }
template <> __device__ void ldm<4, true>(uint32_t (&r)[4], const void* p) { mma_ldmatrix_x4_trans(r, p); }

template <int N, bool TRANS>
__global__ void ldmatrix_kernel(const uint16_t* rows, uint32_t* out) {
    __shared__ __align__(16) uint16_t s[32 * 16];  // row stride 16 elements (32 bytes); columns 8..15 unused
    const int lane = threadIdx.x & 31;
    for (int c = 0; c < 8; c++) s[lane * 16 + c] = rows[lane * 8 + c];
    __syncwarp();  // ldmatrix orders no memory accesses: the rows other lanes wrote need this
    uint32_t r[N];
    ldm<N, TRANS>(r, &s[((7 * lane) % 32) * 16]);
    for (int j = 0; j < N; j++) out[lane * 4 + j] = r[j];
}

template <int N, bool TRANS>
static void test_ldmatrix(const char* name) {
    std::vector<uint16_t> rows(32 * 8);
    for (int i = 0; i < 256; i++) rows[i] = (uint16_t)(0x1000 + i * 3);  // distinct
    uint16_t* drows = to_device(rows);
    uint32_t* dout;
    CK(cudaMalloc(&dout, 32 * 4 * sizeof(uint32_t)));
    CK(cudaMemset(dout, 0, 32 * 4 * sizeof(uint32_t)));
    ldmatrix_kernel<N, TRANS><<<1, 32>>>(drows, dout);
    CK(cudaGetLastError());
    std::vector<uint32_t> out = to_host(dout, 32 * 4);
    auto M = [&](int j, int r, int c) { return rows[((7 * (8 * j + r)) % 32) * 8 + c]; };
    int bad = 0;
    char why[200] = "";
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < N; j++) {
            // the ISA: each lane gets (row lane/4, cols 2(lane%4), +1) of each matrix; .trans transposes
            uint32_t e = TRANS ? (M(j, 2 * (l % 4), l / 4) | (uint32_t)M(j, 2 * (l % 4) + 1, l / 4) << 16)
                               : (M(j, l / 4, 2 * (l % 4)) | (uint32_t)M(j, l / 4, 2 * (l % 4) + 1) << 16);
            if (out[l * 4 + j] != e && !bad++)
                snprintf(why, sizeof(why), "lane %d register %d = 0x%08x, expected 0x%08x", l, j, out[l * 4 + j], e);
        }
    test_report(bad == 0, name, why);
    CK(cudaFree(drows));
    CK(cudaFree(dout));
}

// ---- 3. a product through ldmatrix: two warps, each D (16x8) = A_w (16x16) B + C, with B loaded two
// ways: from B^T (n-by-k row-major, as K is for Q K^T) by x2, and from B (k-by-n row-major, as V is
// for P V) by x2.trans. The two must agree bit for bit and with a scalar reference. ----
constexpr int LDA = 24;  // shared row strides in elements: 48 bytes, rows stay 16-byte aligned
template <class T>
__global__ void mma_product_kernel(const T* A, const T* Bt, const T* Bkn, const float* C, float* D1, float* D2) {
    __shared__ __align__(16) T sA[2][16 * LDA];
    __shared__ __align__(16) T sBt[8 * LDA];
    __shared__ __align__(16) T sB[16 * 8];
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    for (int i = lane; i < 256; i += 32) sA[w][(i / 16) * LDA + i % 16] = A[w * 256 + i];
    if (w == 0)
        for (int i = lane; i < 128; i += 32) {
            sBt[(i / 16) * LDA + i % 16] = Bt[i];
            sB[i] = Bkn[i];
        }
    __syncthreads();
    uint32_t a[4], b1[2], b2[2];
    mma_ldmatrix_x4(a, &sA[w][(lane % 16) * LDA + (lane / 16) * 8]);
    mma_ldmatrix_x2(b1, &sBt[(lane % 8) * LDA + ((lane / 8) % 2) * 8]);
    mma_ldmatrix_x2_trans(b2, &sB[(lane % 16) * 8]);
    const int g = lane >> 2, t = lane & 3;
    float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
    float d1[4], d2[4];
    mma_m16n8k16<T>(d1, a, b1, c);
    mma_m16n8k16<T>(d2, a, b2, c);
    float* o1 = D1 + w * 128;
    float* o2 = D2 + w * 128;
    o1[g * 8 + 2 * t] = d1[0], o1[g * 8 + 2 * t + 1] = d1[1], o1[(g + 8) * 8 + 2 * t] = d1[2], o1[(g + 8) * 8 + 2 * t + 1] = d1[3];
    o2[g * 8 + 2 * t] = d2[0], o2[g * 8 + 2 * t + 1] = d2[1], o2[(g + 8) * 8 + 2 * t] = d2[2], o2[(g + 8) * 8 + 2 * t + 1] = d2[3];
}

template <class T>
static void test_mma_product(const char* name, bool bf16) {
    uint32_t s = 12345u;
    auto rnd = [&]() { s = s * 1664525u + 1013904223u; return (float)(s >> 8) / 8388608.0f - 1.0f; };
    std::vector<uint16_t> A(2 * 256), Bkn(128), Bt(128);
    std::vector<float> C(128);
    for (auto& v : A) v = bits16(rnd(), bf16);
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) Bkn[k * 8 + n] = Bt[n * 16 + k] = bits16(rnd(), bf16);
    for (auto& v : C) v = rnd();
    std::vector<T> hA(A.size()), hB(128), hBt(128);
    memcpy((void*)hA.data(), A.data(), A.size() * 2);
    memcpy((void*)hB.data(), Bkn.data(), 256);
    memcpy((void*)hBt.data(), Bt.data(), 256);
    T *dA = to_device(hA), *dB = to_device(hB), *dBt = to_device(hBt);
    float* dC = to_device(C);
    float *d1, *d2;
    CK(cudaMalloc(&d1, 256 * sizeof(float)));
    CK(cudaMalloc(&d2, 256 * sizeof(float)));
    mma_product_kernel<T><<<1, 64>>>(dA, dBt, dB, dC, d1, d2);
    CK(cudaGetLastError());
    std::vector<float> D1 = to_host(d1, 256), D2 = to_host(d2, 256);
    double worst = 0.0;
    bool same = memcmp(D1.data(), D2.data(), 256 * sizeof(float)) == 0;
    for (int w = 0; w < 2; w++)
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 8; n++) {
                double e = C[m * 8 + n], mag = fabs(e);
                for (int k = 0; k < 16; k++) {
                    double p = (double)from16(A[w * 256 + m * 16 + k], bf16) * from16(Bkn[k * 8 + n], bf16);
                    e += p;
                    mag += fabs(p);
                }
                // fp32 accumulation of exact products: at most 17 roundings of partial sums <= mag
                double err = fabs(D1[w * 128 + m * 8 + n] - e) / (17 * ldexp(mag, -24) + 1e-30);
                if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
            }
    char why[160];
    snprintf(why, sizeof(why), "worst error %.3g times the fp32 bound; B^T-by-x2 and B-by-x2.trans %s", worst,
             same ? "agree" : "DIFFER");
    test_report(worst <= 1.0 && same, name, why);
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dBt));
    CK(cudaFree(dC));
    CK(cudaFree(d1));
    CK(cudaFree(d2));
}

// ---- 3b. an accumulator pair as an A fragment (mma.cuh's mma_pack2, the FA2 way of feeding P to
// P V): D0 = A B0 (columns 0..7) and D1 = A B1 (8..15) packed give the A fragment of P = [D0 D1],
// and P B2 must equal the host's P B2. Small integers: every value exact in f16 and bf16. ----
template <class T>
__global__ void mma_repack_kernel(const uint32_t* a, const uint32_t* b, float* out, float* ex2_out, const float* ex2_in) {
    const int lane = threadIdx.x & 31;
    uint32_t ra[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
    uint32_t b0[2] = {b[lane * 6], b[lane * 6 + 1]}, b1[2] = {b[lane * 6 + 2], b[lane * 6 + 3]};
    uint32_t b2[2] = {b[lane * 6 + 4], b[lane * 6 + 5]};
    float d0[4] = {0, 0, 0, 0}, d1[4] = {0, 0, 0, 0}, e[4] = {0, 0, 0, 0};
    mma_m16n8k16<T>(d0, ra, b0, d0);
    mma_m16n8k16<T>(d1, ra, b1, d1);
    uint32_t p[4] = {mma_pack2<T>(d0[0], d0[1]), mma_pack2<T>(d0[2], d0[3]), mma_pack2<T>(d1[0], d1[1]),
                     mma_pack2<T>(d1[2], d1[3])};
    mma_m16n8k16<T>(e, p, b2, e);
    for (int i = 0; i < 4; i++) out[lane * 4 + i] = e[i];
    ex2_out[lane] = mma_ex2(ex2_in[lane]);
}

template <class T>
static void test_mma_repack(const char* name, bool bf16) {
    std::vector<float> A(256), B(3 * 128);  // B: three 16x8 (k x n) matrices B0, B1, B2
    for (int i = 0; i < 256; i++) A[i] = (float)((i * 7) % 5 - 2);
    for (int i = 0; i < 3 * 128; i++) B[i] = (float)((i * 11) % 5 - 2);
    std::vector<uint32_t> a(32 * 4), b(32 * 6);
    for (int l = 0; l < 32; l++) {
        for (int r = 0; r < 4; r++)
            a[l * 4 + r] = bits16(A[frag_a_row(l, 2 * r) * 16 + frag_a_col(l, 2 * r)], bf16) |
                           (uint32_t)bits16(A[frag_a_row(l, 2 * r + 1) * 16 + frag_a_col(l, 2 * r + 1)], bf16) << 16;
        for (int m = 0; m < 3; m++)
            for (int r = 0; r < 2; r++)
                b[l * 6 + m * 2 + r] = bits16(B[m * 128 + frag_b_row(l, 2 * r) * 8 + frag_b_col(l, 2 * r)], bf16) |
                                       (uint32_t)bits16(B[m * 128 + frag_b_row(l, 2 * r + 1) * 8 + frag_b_col(l, 2 * r + 1)], bf16) << 16;
    }
    std::vector<float> ex2_in(32);
    for (int l = 0; l < 32; l++) ex2_in[l] = -20.0f + 1.37f * l;
    uint32_t *da = to_device(a), *db = to_device(b);
    float* dx = to_device(ex2_in);
    float *dout, *dex;
    CK(cudaMalloc(&dout, 128 * sizeof(float)));
    CK(cudaMalloc(&dex, 32 * sizeof(float)));
    mma_repack_kernel<T><<<1, 32>>>(da, db, dout, dex, dx);
    CK(cudaGetLastError());
    std::vector<float> out = to_host(dout, 128), ex = to_host(dex, 32);
    double P[16][16];
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            P[m][n] = 0;
            for (int k = 0; k < 16; k++) P[m][n] += A[m * 16 + k] * B[(n / 8) * 128 + k * 8 + n % 8];
        }
    int bad = 0;
    char why[200] = "";
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            int m = frag_c_row(l, i), n = frag_c_col(l, i);
            double e = 0;
            for (int k = 0; k < 16; k++) e += P[m][k] * B[256 + k * 8 + n];
            if (out[l * 4 + i] != (float)e && !bad++)
                snprintf(why, sizeof(why), "lane %d e%d (E[%d][%d]) = %.1f, expected %.1f", l, i, m, n, out[l * 4 + i], e);
        }
    test_report(bad == 0, name, why);
    // ex2.approx: within 2 ulp of 2^x (and not a library exp by another base)
    bool ex_ok = true;
    for (int l = 0; l < 32; l++) {
        double e = exp2((double)ex2_in[l]);
        ex_ok &= fabs(ex[l] - e) <= 2.5 * e * ldexp(1.0, -23);
    }
    if (!bf16) test_report(ex_ok, "mma_ex2_within_2_ulp", "mma_ex2 differs from 2^x by more than 2 ulp");
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dx));
    CK(cudaFree(dout));
    CK(cudaFree(dex));
}

// ---- 4. cp.async: groups complete at the wait that covers them, and not before ----
// Per thread t (64 threads): three 16-byte copies into s1[t], s2[t], s3[t], which first hold "old"
// values; the first two in groups of their own, the third (8 source bytes, the rest zero-filled) left
// uncommitted. out[t * 8 + k] records what s1..s3 hold at each step.
__global__ void cp_async_kernel(const float4* src1, const float4* src2, const float4* src3, float4* out) {
    __shared__ __align__(16) float4 s1[64], s2[64], s3[64];
    const int t = threadIdx.x;
    const float4 old = make_float4(-1.0f, -2.0f, -3.0f, (float)-t);
    s1[t] = old, s2[t] = old, s3[t] = old;
    mma_cp_async_cg16(&s1[t], &src1[t]);
    mma_cp_async_commit();
    mma_cp_async_ca16(&s2[t], &src2[t]);
    mma_cp_async_commit();
    mma_cp_async_cg16(&s3[t], &src3[t], 8);  // not committed
    out[t * 8 + 0] = s1[t];                 // before any wait: old
    mma_cp_async_wait<1>();
    out[t * 8 + 1] = s1[t];                 // group 1 done: new
    out[t * 8 + 2] = s2[t];                 // group 2 may still be in flight: old here
    mma_cp_async_wait<0>();
    out[t * 8 + 3] = s2[t];                 // new
    out[t * 8 + 4] = s3[t];                 // uncommitted: wait_group does not cover it: old
    mma_cp_async_wait_all();
    out[t * 8 + 5] = s3[t];                 // 8 source bytes, 8 zeros
    __syncthreads();                        // another thread's copy, after its wait and a barrier
    out[t * 8 + 6] = s1[(t + 1) % 64];
    out[t * 8 + 7] = s2[(t + 63) % 64];
}

static bool eq4(float4 a, float4 b) { return !memcmp(&a, &b, sizeof(a)); }
static void test_cp_async() {
    std::vector<float4> a(64), b(64), c(64);
    for (int t = 0; t < 64; t++) {
        a[t] = make_float4(t, t + 0.25f, t + 0.5f, t + 0.75f);
        b[t] = make_float4(100 + t, 200 + t, 300 + t, 400 + t);
        c[t] = make_float4(1000 + t, 2000 + t, 3000 + t, 4000 + t);
    }
    float4 *da = to_device(a), *db = to_device(b), *dc = to_device(c), *dout;
    CK(cudaMalloc(&dout, 64 * 8 * sizeof(float4)));
    cp_async_kernel<<<1, 64>>>(da, db, dc, dout);
    CK(cudaGetLastError());
    std::vector<float4> out = to_host(dout, 64 * 8);
    const char* what[8] = {"s1 before any wait (old)", "s1 after wait_group 1 (new)", "s2 after wait_group 1 (old)",
                           "s2 after wait_group 0 (new)", "s3, uncommitted, after wait_group 0 (old)",
                           "s3 after wait_all (8 bytes, zero-filled)", "a neighbour's s1 after a barrier",
                           "a neighbour's s2 after a barrier"};
    bool ok[8] = {true, true, true, true, true, true, true, true};
    for (int t = 0; t < 64; t++) {
        float4 old = make_float4(-1.0f, -2.0f, -3.0f, (float)-t);
        float4 exp[8] = {old, a[t], old, b[t], old, make_float4(c[t].x, c[t].y, 0.0f, 0.0f), a[(t + 1) % 64], b[(t + 63) % 64]};
        for (int k = 0; k < 8; k++) ok[k] &= eq4(out[t * 8 + k], exp[k]);
    }
    for (int k = 0; k < 8; k++) {
        char name[96];
        snprintf(name, sizeof(name), "cp_async_step%d", k);
        test_report(ok[k], name, what[k]);
    }
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    CK(cudaFree(dout));
}

// ---- 5. mistakes the runtime refuses (each run in a child process) ----
__global__ void bad_mma_missing_lane_kernel(float* out) {
    if ((threadIdx.x & 31) == 31) return;  // one lane leaves: mma.sync needs the whole warp
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    mma_m16n8k16<__half>(c, a, b, c);
    out[threadIdx.x] = c[0];
}
__global__ void bad_mma_partial_warp_kernel(float* out) {
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0};
    mma_m16n8k16<__nv_bfloat16>(c, a, b, c);
    out[threadIdx.x] = c[0];
}
__global__ void bad_ldmatrix_misaligned_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t s[32 * 16];
    const int lane = threadIdx.x & 31;
    for (int c = 0; c < 16; c++) s[lane * 16 + c] = (uint16_t)c;
    __syncwarp();
    uint32_t r[4];
    mma_ldmatrix_x4(r, &s[lane * 16 + (lane == 3 ? 4 : 0)]);  // lane 3: 8 bytes into its row
    out[lane] = r[0];
}
__global__ void bad_ldmatrix_global_kernel(const uint16_t* g, uint32_t* out) {
    const int lane = threadIdx.x & 31;
    uint32_t r[2];
    mma_ldmatrix_x2(r, g + lane * 8);  // global memory: ldmatrix reads shared memory only
    out[lane] = r[0];
}
__global__ void bad_ldmatrix_mixed_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t s[32 * 8];
    const int lane = threadIdx.x & 31;
    for (int c = 0; c < 8; c++) s[lane * 8 + c] = (uint16_t)c;
    __syncwarp();
    uint32_t r[4] = {0, 0, 0, 0};
    if (lane < 16) mma_ldmatrix_x2(*reinterpret_cast<uint32_t(*)[2]>(r), &s[lane * 8]);
    else mma_ldmatrix_x4(r, &s[lane * 8]);
    out[lane] = r[0];
}
__global__ void bad_ldmatrix_no_syncwarp_kernel(uint32_t* out) {
    __shared__ __align__(16) uint16_t s[32 * 8];
    const int lane = threadIdx.x & 31;
    for (int c = 0; c < 8; c++) s[lane * 8 + c] = 0;
    __syncthreads();
    for (int c = 0; c < 8; c++) s[lane * 8 + c] = (uint16_t)(lane + c);
    uint32_t r[4];
    mma_ldmatrix_x4(r, &s[((7 * lane) % 32) * 8]);  // rows other lanes just wrote, no __syncwarp
    out[lane] = r[0];
}
__global__ void bad_cp_async_source_changed_kernel(float4* src, float4* out) {
    __shared__ __align__(16) float4 s[32];
    const int t = threadIdx.x;
    mma_cp_async_cg16(&s[t], &src[t]);
    mma_cp_async_commit();
    src[t].x = 5.0f;  // the copy may read the source at any time until its wait
    mma_cp_async_wait<0>();
    out[t] = s[t];
}
__global__ void bad_cp_async_wait_after_barrier_kernel(const float4* src, float4* out) {
    __shared__ __align__(16) float4 s[64];
    const int t = threadIdx.x;
    s[t] = make_float4(0, 0, 0, 0);
    __syncthreads();
    mma_cp_async_cg16(&s[t], &src[t]);
    mma_cp_async_commit();
    __syncthreads();                 // the barrier comes before the wait: the copies have not landed
    out[t] = s[t ^ 1];               // reads a neighbour's destination ...
    mma_cp_async_wait<0>();          // ... which its wait then writes
}
__global__ void bad_cp_async_misaligned_kernel(const float4* src, float4* out) {
    __shared__ __align__(16) float s[64 * 4 + 4];
    const int t = threadIdx.x;
    mma_cp_async_cg16(&s[t * 4 + 2], &src[t]);  // 8 bytes off
    mma_cp_async_wait_all();
    out[t] = src[t];
}

static int run_case(const char* name) {
    std::string n = name;
    float* f;
    CK(cudaMalloc(&f, 64 * sizeof(float4)));
    CK(cudaMemset(f, 0, 64 * sizeof(float4)));
    float4* f4 = (float4*)f;
    float4* out4;
    CK(cudaMalloc(&out4, 64 * sizeof(float4)));
    if (n == "mma_missing_lane") bad_mma_missing_lane_kernel<<<1, 64>>>(f);
    else if (n == "mma_partial_warp") bad_mma_partial_warp_kernel<<<1, 48>>>(f);
    else if (n == "ldmatrix_misaligned") bad_ldmatrix_misaligned_kernel<<<1, 32>>>((uint32_t*)out4);
    else if (n == "ldmatrix_global") bad_ldmatrix_global_kernel<<<1, 32>>>((const uint16_t*)f, (uint32_t*)out4);
    else if (n == "ldmatrix_mixed") bad_ldmatrix_mixed_kernel<<<1, 32>>>((uint32_t*)out4);
    else if (n == "ldmatrix_no_syncwarp") bad_ldmatrix_no_syncwarp_kernel<<<1, 32>>>((uint32_t*)out4);
    else if (n == "cp_async_source_changed") bad_cp_async_source_changed_kernel<<<1, 32>>>(f4, out4);
    else if (n == "cp_async_wait_after_barrier") bad_cp_async_wait_after_barrier_kernel<<<1, 64>>>(f4, out4);
    else if (n == "cp_async_misaligned") bad_cp_async_misaligned_kernel<<<1, 32>>>(f4, out4);
    else { fprintf(stderr, "unknown case %s\n", name); return 2; }
    CK(cudaDeviceSynchronize());
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        setenv("OMPI_MCA_opal_signal", "", 0);
        return run_case(argv[2]);
    }
    test_tables_match_isa_figures();
    test_mma_layout<__half>("mma_layout_f16", false);
    test_mma_layout<__nv_bfloat16>("mma_layout_bf16", true);
    test_ldmatrix<1, false>("ldmatrix_x1");
    test_ldmatrix<2, false>("ldmatrix_x2");
    test_ldmatrix<4, false>("ldmatrix_x4");
    test_ldmatrix<1, true>("ldmatrix_x1_trans");
    test_ldmatrix<2, true>("ldmatrix_x2_trans");
    test_ldmatrix<4, true>("ldmatrix_x4_trans");
    test_mma_product<__half>("mma_product_f16", false);
    test_mma_product<__nv_bfloat16>("mma_product_bf16", true);
    test_mma_repack<__half>("mma_accumulators_as_a_fragment_f16", false);
    test_mma_repack<__nv_bfloat16>("mma_accumulators_as_a_fragment_bf16", true);
    test_cp_async();
    struct Case { const char* name; const char* kernel; const char* what; } cases[] = {
        {"mma_missing_lane", "bad_mma_missing_lane_kernel", "a warp operation waits for lanes that will never reach it"},
        {"mma_partial_warp", "bad_mma_partial_warp_kernel", "needs all 32 lanes of the warp"},
        {"ldmatrix_misaligned", "bad_ldmatrix_misaligned_kernel", "lane 3 supplies row address"},
        {"ldmatrix_global", "bad_ldmatrix_global_kernel", "which is not shared memory"},
        {"ldmatrix_mixed", "bad_ldmatrix_mixed_kernel", "meet at different matrix operations"},
        {"ldmatrix_no_syncwarp", "bad_ldmatrix_no_syncwarp_kernel", "data race on shared memory"},
        {"cp_async_source_changed", "bad_cp_async_source_changed_kernel", "changed before the cp.async.wait_group"},
        {"cp_async_wait_after_barrier", "bad_cp_async_wait_after_barrier_kernel", "data race on shared memory"},
        {"cp_async_misaligned", "bad_cp_async_misaligned_kernel", "not 16-byte aligned"},
    };
    for (const Case& k : cases) {
        Refusal r = expect_refusal(k.name, k.kernel, k.what);
        test_report(r.ok, (std::string("refused_") + k.name).c_str(), r.why.c_str());
        if (r.ok) printf("  %s\n", r.message.c_str());
    }
    return test_finish();
}
