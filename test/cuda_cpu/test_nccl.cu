// test_nccl.cu: the NCCL collectives the trainer calls, run under `mpirun -np N` (N = 2, 3 in
// test_nccl.sh). Every rank checks its own results; rank 0 prints one line per check, failing it if
// any rank failed. Host code only: with nvcc, -lnccl and MPI it runs on real GPUs too.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CK_MPI_ABORT  // the ranks end together
#include "cuda_test.h"

#define NK(call)                                                                                           \
    do {                                                                                                   \
        ncclResult_t r_ = (call);                                                                          \
        if (r_ != ncclSuccess) { printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } \
    } while (0)

static int g_rank, g_size, g_failures;

// One check across all ranks: passes only if it passed on every rank.
static void check_all(bool ok, const char* name) {
    int bad = ok ? 0 : 1, bad_ranks = 0;
    MPI_Allreduce(&bad, &bad_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (bad_ranks == 0) printf("PASS %s_np%d\n", name, g_size);
        else printf("FAIL %s_np%d: wrong on %d of %d ranks\n", name, g_size, bad_ranks, g_size);
        fflush(stdout);
    }
    if (bad_ranks) g_failures++;
}

template <class T> static T from_float(float v);
template <> float from_float<float>(float v) { return v; }
template <> __half from_float<__half>(float v) { return __float2half(v); }
template <> __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
static float to_float(float v) { return v; }
static float to_float(__half v) { return __half2float(v); }
static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Values exact in bf16 and fp16 whose sums over a few ranks stay exact: rank r, element i.
static float value(int r, size_t i) { return (float)((int)(i % 13) - 6) * 0.5f + (float)(r + 1); }

template <class T>
static void test_allreduce(ncclComm_t comm, ncclDataType_t type, ncclRedOp_t op, bool in_place, const char* name) {
    const size_t n = 1000;
    std::vector<T> h(n);
    for (size_t i = 0; i < n; i++) h[i] = from_float<T>(value(g_rank, i));
    T* send = to_device(h);
    T* recv = in_place ? send : to_device(std::vector<T>(n, from_float<T>(0.0f)));
    NK(ncclAllReduce(send, recv, n, type, op, comm, 0));
    std::vector<T> out = to_host(recv, n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        float e = op == ncclMax ? -INFINITY : 0.0f;
        for (int r = 0; r < g_size; r++) {
            float v = to_float(from_float<T>(value(r, i)));
            e = op == ncclMax ? fmaxf(e, v) : e + v;
        }
        if (op == ncclAvg) e /= (float)g_size;
        ok &= to_float(out[i]) == to_float(from_float<T>(e));
    }
    check_all(ok, name);
    CK(cudaFree(send));
    if (!in_place) CK(cudaFree(recv));
}

template <class T>
static void test_reduce_scatter(ncclComm_t comm, ncclDataType_t type, bool in_place, const char* name) {
    const size_t per = 257, n = per * g_size;
    std::vector<T> h(n);
    for (size_t i = 0; i < n; i++) h[i] = from_float<T>(value(g_rank, i));
    T* send = to_device(h);
    T* recv = in_place ? send + g_rank * per : to_device(std::vector<T>(per, from_float<T>(0.0f)));
    NK(ncclReduceScatter(send, recv, per, type, ncclSum, comm, 0));
    std::vector<T> out = to_host(recv, per);
    bool ok = true;
    for (size_t i = 0; i < per; i++) {
        float e = 0.0f;
        for (int r = 0; r < g_size; r++) e += value(r, g_rank * per + i);
        ok &= to_float(out[i]) == e;
    }
    check_all(ok, name);
    CK(cudaFree(send));
    if (!in_place) CK(cudaFree(recv));
}

template <class T>
static void test_all_gather(ncclComm_t comm, ncclDataType_t type, bool in_place, const char* name) {
    const size_t per = 129, n = per * g_size;
    std::vector<T> mine(per);
    for (size_t i = 0; i < per; i++) mine[i] = from_float<T>(value(g_rank, i));
    T* recv = to_device(std::vector<T>(n, from_float<T>(-100.0f)));
    T* send;
    if (in_place) {
        send = recv + g_rank * per;
        CK(cudaMemcpy(send, mine.data(), per * sizeof(T), cudaMemcpyHostToDevice));
    } else {
        send = to_device(mine);
    }
    NK(ncclAllGather(send, recv, per, type, comm, 0));
    std::vector<T> out = to_host(recv, n);
    bool ok = true;
    for (int r = 0; r < g_size; r++)
        for (size_t i = 0; i < per; i++) ok &= to_float(out[r * per + i]) == value(r, i);
    check_all(ok, name);
    CK(cudaFree(recv));
    if (!in_place) CK(cudaFree(send));
}

static void test_broadcast(ncclComm_t comm) {
    const size_t n = 500;
    const int root = g_size - 1;
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = value(g_rank, i);
    float* send = to_device(h);
    float* recv = to_device(std::vector<float>(n, 0.0f));
    NK(ncclBroadcast(send, recv, n, ncclFloat, root, comm, 0));
    std::vector<float> out = to_host(recv, n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= out[i] == value(root, i);
    check_all(ok, "nccl_broadcast_f32_from_last_rank");
    NK(ncclBcast(send, n, ncclFloat, 0, comm, 0));
    out = to_host(send, n);
    ok = true;
    for (size_t i = 0; i < n; i++) ok &= out[i] == value(0, i);
    check_all(ok, "nccl_bcast_in_place_from_rank0");
    CK(cudaFree(send));
    CK(cudaFree(recv));
}

// Sums that round differently in different orders still give every rank the same bits.
static void test_identical_results(ncclComm_t comm) {
    const size_t n = 4096;
    std::vector<float> h(n);
    uint32_t s = 77u + 1000u * (uint32_t)g_rank;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * powf(10.0f, (float)(i % 7) - 3.0f);
    }
    float* d = to_device(h);
    NK(ncclGroupStart());
    NK(ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, 0));
    NK(ncclGroupEnd());
    std::vector<float> out = to_host(d, n);
    std::vector<float> zero(n, 0.0f);
    std::vector<float> all((size_t)g_size * n);
    MPI_Allgather(out.data(), (int)n, MPI_FLOAT, all.data(), (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    bool same = true;
    for (int r = 1; r < g_size; r++) same &= memcmp(&all[0], &all[r * n], n * sizeof(float)) == 0;
    check_all(same, "nccl_allreduce_same_bits_on_every_rank");
    CK(cudaFree(d));
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int devices = 0;
    CK(cudaGetDeviceCount(&devices));
    CK(cudaSetDevice(g_rank % devices));
    ncclUniqueId id;
    if (g_rank == 0) NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, g_size, id, g_rank));
    int count = 0, rank = -1;
    NK(ncclCommCount(comm, &count));
    NK(ncclCommUserRank(comm, &rank));
    check_all(count == g_size && rank == g_rank, "nccl_comm_count_and_rank");

    test_allreduce<float>(comm, ncclFloat, ncclSum, false, "nccl_allreduce_sum_f32");
    test_allreduce<float>(comm, ncclFloat, ncclMax, true, "nccl_allreduce_max_f32_in_place");
    test_allreduce<__nv_bfloat16>(comm, ncclBfloat16, ncclSum, true, "nccl_allreduce_sum_bf16_in_place");
    test_allreduce<__half>(comm, ncclHalf, ncclSum, false, "nccl_allreduce_sum_f16");
    test_allreduce<__half>(comm, ncclHalf, ncclMax, false, "nccl_allreduce_max_f16");
    test_allreduce<float>(comm, ncclFloat, ncclAvg, false, "nccl_allreduce_avg_f32");
    test_reduce_scatter<float>(comm, ncclFloat, false, "nccl_reduce_scatter_f32");
    test_reduce_scatter<__nv_bfloat16>(comm, ncclBfloat16, true, "nccl_reduce_scatter_bf16_in_place");
    test_all_gather<float>(comm, ncclFloat, false, "nccl_all_gather_f32");
    test_all_gather<__nv_bfloat16>(comm, ncclBfloat16, true, "nccl_all_gather_bf16_in_place");
    test_broadcast(comm);
    test_identical_results(comm);

    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return g_failures ? 1 : 0;
}
