// test_count.cu: CUDA_CPU_COUNT's figures (what the kernel report is built from) for the warp-level
// primitives, against figures computed by hand. One kernel moves its bytes through the primitives
// (cp.async, ldmatrix, WMMA loads and stores to global and shared memory, WMMA and mma.sync
// products); a second moves exactly the same bytes with plain loads and stores. Both are counted in a
// child process (child.h: the runtime reads CUDA_CPU_COUNT once), unchecked as the kernel report runs
// them and checked, so a primitive counted once per lane instead of once per warp, counted twice
// (by its own count and by the checker's), or not counted at all, fails. Plain CUDA: it compiles with
// nvcc too (test_nvcc_compile.sh), where there is nothing to count and main only says so.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

#include "cuda_cpu/child.h"
#define CK_CHILD_STATUS 3  // a case runs as a child: its parent reads stderr
#include "cuda_test.h"
#include "mma.cuh"
#include "test.h"

using namespace nvcuda;

// The shapes: one block of W warps; each thread copies K 16-byte chunks global -> shared, each warp
// then reads K ldmatrix.x4 (512 bytes each), one x2.trans (256) and one x1 (128) from them, loads a
// 16x16 half A tile from global and a B tile from shared (512 bytes each), multiplies (WMMA m16n16k16:
// 8192 FLOPs; mma.sync m16n8k16: 4096), stores its 16x16 float accumulator to global with a row
// stride of 32 floats (16 rows of 64 bytes: 2 sectors a row) and to shared (1024 bytes), and each
// thread writes 4 bytes of result.
constexpr int W = 2, NT = 32 * W, K = 3, OUT_LD = 32;
constexpr int COPY_BYTES = NT * K * 16;           // the cp.async'd chunks, and the ldmatrix rows' home
constexpr int SMEM_BYTES = COPY_BYTES + W * 1024;  // + each warp's float tile

__device__ __forceinline__ uint32_t fold(const uint32_t* r, int n, uint32_t acc) {
    for (int i = 0; i < n; i++) acc = acc * 31u + r[i];
    return acc;
}

__global__ void count_primitives_kernel(const __half* src, const __half* A, float* out, uint32_t* res) {
    __shared__ __align__(128) unsigned char sbuf[SMEM_BYTES];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    for (int i = 0; i < K; i++)
        mma_cp_async_cg16(sbuf + (i * NT + tid) * 16, reinterpret_cast<const unsigned char*>(src) + (i * NT + tid) * 16);
    mma_cp_async_wait_all();
    __syncthreads();
    uint32_t acc = 0, r[4];
    for (int i = 0; i < K; i++) {
        mma_ldmatrix_x4(r, sbuf + (i * NT + warp * 32 + lane) * 16);
        acc = fold(r, 4, acc);
    }
    mma_ldmatrix_x2_trans(*reinterpret_cast<uint32_t(*)[2]>(r), sbuf + (warp * 32 + lane % 16) * 16);
    acc = fold(r, 2, acc);
    mma_ldmatrix_x1(*reinterpret_cast<uint32_t(*)[1]>(r), sbuf + (warp * 32 + lane % 8) * 16);
    acc = fold(r, 1, acc);
    // mma.sync on the x4 registers (as an A fragment) and two of them as B
    float d[4] = {0, 0, 0, 0};
    uint32_t a4[4] = {r[0], r[0], r[0], r[0]}, b2[2] = {r[0], r[0]};
    mma_m16n8k16<__half>(d, a4, b2, d);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, A + warp * 256, 16);
    wmma::load_matrix_sync(fb, reinterpret_cast<const __half*>(sbuf) + warp * 256, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(out + warp * 16 * OUT_LD, fc, OUT_LD, wmma::mem_row_major);
    wmma::store_matrix_sync(reinterpret_cast<float*>(sbuf + COPY_BYTES) + warp * 256, fc, 16, wmma::mem_row_major);
    res[tid] = acc ^ __float_as_uint(d[0]);
}

// The same bytes with plain accesses: 16-byte loads and stores where a primitive moved a tile.
__global__ void count_plain_kernel(const __half* src, const __half* A, float* out, uint32_t* res) {
    __shared__ __align__(128) unsigned char sbuf[SMEM_BYTES];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    for (int i = 0; i < K; i++)  // cp.async: 16 bytes a thread, global read and shared write
        reinterpret_cast<int4*>(sbuf)[i * NT + tid] = reinterpret_cast<const int4*>(src)[i * NT + tid];
    __syncthreads();
    uint32_t acc = 0;
    for (int i = 0; i < K; i++) {  // ldmatrix.x4: each of the 32 lanes reads one 16-byte row
        int4 v = reinterpret_cast<const int4*>(sbuf)[i * NT + warp * 32 + lane];
        uint32_t r[4] = {(uint32_t)v.x, (uint32_t)v.y, (uint32_t)v.z, (uint32_t)v.w};
        acc = fold(r, 4, acc);
    }
    // x2 (16 rows) and x1 (8 rows); then the WMMA loads: the warp's 512-byte tiles, 16 bytes a lane
    // (every word used, so the compiler keeps each load 16 bytes wide)
    const int4* rows[4] = {lane < 16 ? reinterpret_cast<const int4*>(sbuf) + warp * 32 + lane : nullptr,
                           lane < 8 ? reinterpret_cast<const int4*>(sbuf) + warp * 32 + lane : nullptr,
                           reinterpret_cast<const int4*>(A + warp * 256) + lane,
                           reinterpret_cast<const int4*>(sbuf) + warp * 32 + lane};
    for (int j = 0; j < 4; j++) {
        if (!rows[j]) continue;
        int4 v = *rows[j];
        uint32_t r[4] = {(uint32_t)v.x, (uint32_t)v.y, (uint32_t)v.z, (uint32_t)v.w};
        acc = fold(r, 4, acc);
    }
    // the WMMA stores: 16 rows of 16 floats, 32 bytes a lane (row lane/2, half lane%2)
    float4 v = make_float4((float)acc, 1.0f, 2.0f, 3.0f);
    float* g = out + warp * 16 * OUT_LD + (lane / 2) * OUT_LD + (lane % 2) * 8;
    reinterpret_cast<float4*>(g)[0] = v;
    reinterpret_cast<float4*>(g)[1] = v;
    float* s = reinterpret_cast<float*>(sbuf + COPY_BYTES) + warp * 256 + (lane / 2) * 16 + (lane % 2) * 8;
    reinterpret_cast<float4*>(s)[0] = v;
    reinterpret_cast<float4*>(s)[1] = v;
    res[tid] = acc;
}

// The instruction classes, in warp instructions (per warp the most any lane ran), for one block of W
// warps: each thread one global load and one store, one shared store and load, expf (one MUFU), tanhf
// (two), rsqrtf (one), and the first half of each warp's lanes one __expf more (divergent: the warp
// issues it once, so 5 in all); a 5-step xor shuffle reduction, one __syncthreads, one integer atomic
// a thread and one float atomic by lane 0 (so 2 a warp).
__global__ void count_instructions_kernel(const float* in, float* out, int* counter, float* total) {
    __shared__ float s[NT];
    const int tid = threadIdx.x, lane = tid % 32;
    float v = in[tid];
    v = expf(v * 0.01f) + tanhf(v) + rsqrtf(v * v + 1.0f);
    if (lane < 16) v += __expf(-v);
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    s[tid] = v;
    __syncthreads();
    v += s[tid ^ 1];
    atomicAdd(counter, 1);
    if (lane == 0) atomicAdd(total, v);
    out[tid] = v;
}

// The child: the kernels once, each counted at its first run into $CUDA_CPU_COUNT.
static int child_run() {
    std::vector<__half> hs(COPY_BYTES / 2), ha(W * 256);
    for (size_t i = 0; i < hs.size(); i++) hs[i] = __float2half((float)(i % 7) - 3.0f);
    for (size_t i = 0; i < ha.size(); i++) ha[i] = __float2half((float)(i % 5) * 0.25f);
    __half *src, *A;
    float* out;
    uint32_t* res;
    CK(cudaMalloc(&src, COPY_BYTES));
    CK(cudaMalloc(&A, W * 512));
    CK(cudaMalloc(&out, W * 16 * OUT_LD * sizeof(float)));
    CK(cudaMalloc(&res, NT * sizeof(uint32_t)));
    CK(cudaMemcpy(src, hs.data(), COPY_BYTES, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(A, ha.data(), W * 512, cudaMemcpyHostToDevice));
    CK(cudaMemset(out, 0, W * 16 * OUT_LD * sizeof(float)));
    count_primitives_kernel<<<1, NT>>>(src, A, out, res);
    CK(cudaGetLastError());
    count_plain_kernel<<<1, NT>>>(src, A, out, res);
    CK(cudaGetLastError());
    int* counter;
    float *in, *total;
    CK(cudaMalloc(&counter, sizeof(int)));
    CK(cudaMalloc(&total, sizeof(float)));
    CK(cudaMalloc(&in, NT * sizeof(float)));
    CK(cudaMemset(counter, 0, sizeof(int)));
    CK(cudaMemset(total, 0, sizeof(float)));
    std::vector<float> hin(NT, 0.5f);
    CK(cudaMemcpy(in, hin.data(), NT * sizeof(float), cudaMemcpyHostToDevice));
    count_instructions_kernel<<<1, NT>>>(in, out, counter, total);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return 0;
}

#ifdef CUDA_CPU
// The kernel's line of a count file as name -> value.
static std::map<std::string, unsigned long long> count_line_of(const std::string& path, const char* kernel) {
    std::map<std::string, unsigned long long> kv;
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return kv;
    char line[4096];
    std::string want = std::string("kernel name=") + kernel + " ";
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, want.c_str(), want.size()) != 0) continue;
        char* save = nullptr;
        for (char* tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(nullptr, " \n", &save)) {
            char* eq = strchr(tok, '=');
            if (eq && eq[1] >= '0' && eq[1] <= '9') kv[std::string(tok, eq)] = strtoull(eq + 1, nullptr, 10);
        }
        break;
    }
    fclose(f);
    return kv;
}

static void check_counts(const char* mode, const std::string& path, const char* kernel,
                         const std::map<std::string, unsigned long long>& want) {
    std::map<std::string, unsigned long long> got = count_line_of(path, kernel);
    std::string why;
    for (const auto& w : want) {
        auto it = got.find(w.first);
        if (it == got.end()) why += w.first + " missing; ";
        else if (it->second != w.second)
            why += w.first + "=" + std::to_string(it->second) + " (expected " + std::to_string(w.second) + "); ";
    }
    std::string name = std::string("count_") + kernel + "_" + mode;
    test_report(why.empty(), name.c_str(), why.c_str());
}
#endif

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        setenv("OMPI_MCA_opal_signal", "", 0);
        return child_run();
    }
#ifndef CUDA_CPU
    printf("SKIP test_count: CUDA_CPU_COUNT is the CPU runtime's\n");
    return 0;
#else
    // By hand, for the block of W warps (all accesses 16-byte aligned, so sectors = bytes / 32):
    const unsigned long long copy = COPY_BYTES;                          // cp.async: global read, shared write
    const unsigned long long ldsm = (unsigned long long)W * (K * 512 + 256 + 128);  // ldmatrix rows read
    const unsigned long long tile_in = W * 512;                          // each WMMA load (global A, shared B)
    const unsigned long long tile_out = W * 1024;                        // each WMMA store (global, shared)
    const unsigned long long res = NT * 4;                               // the plain result writes
    std::map<std::string, unsigned long long> plain = {
        {"read", copy + tile_in},
        {"read_sectors", (copy + tile_in) / 32},
        {"write", tile_out + res},
        {"write_sectors", tile_out / 32 + res / 32},  // the stores' rows: 64 bytes of each 128, 2 sectors
        {"smem_read", ldsm + tile_in},
        {"smem_write", copy + tile_out},
        {"mma_flops", 0},
    };
    std::map<std::string, unsigned long long> prim = plain;
    prim["mma_flops"] = (unsigned long long)W * (2 * 16 * 16 * 16 + 2 * 16 * 8 * 16);  // WMMA + mma.sync, once a warp
    // The primitives a warp issues: K + 2 ldmatrix, K cp.async (one a thread), one mma.sync, five
    // WMMA calls (two loads, the product, two stores), one barrier, the result's store; no others.
    for (auto kv : std::map<std::string, unsigned long long>{{"ldsm", K + 2}, {"cp_async", K}, {"mma", 1}, {"wmma", 5},
                                                             {"bar", 1}, {"ldst_global", 1}, {"sfu", 0}, {"shfl", 0},
                                                             {"atom", 0}})
        prim[kv.first] = W * kv.second;
    const std::map<std::string, unsigned long long> ins = {
        {"sfu", W * 5}, {"shfl", W * 5}, {"bar", W * 1}, {"atom", W * 2}, {"mma", 0}, {"ldsm", 0}, {"cp_async", 0},
        {"wmma", 0}, {"ldst_global", W * 2}, {"ldst_shared", W * 2}};
    for (const char* check : {"0", "1"}) {
        char path[] = "/tmp/test_count_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) { test_report(0, "count_file", "mkstemp failed"); return test_finish(); }
        close(fd);
        ChildResult r = run_child_case("run", {std::string("CUDA_CPU_COUNT=") + path, std::string("CUDA_CPU_CHECK=") + check});
        const char* mode = check[0] == '1' ? "checked" : "unchecked";
        std::string name = std::string("count_child_runs_") + mode;
        test_report(r.exited_ok(), name.c_str(), r.why().c_str());
        check_counts(mode, path, "count_primitives_kernel", prim);
        check_counts(mode, path, "count_plain_kernel", plain);
        check_counts(mode, path, "count_instructions_kernel", ins);
        unlink(path);
    }
    return test_finish();
#endif
}
