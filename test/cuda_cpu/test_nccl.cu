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


// Point to point. A ring in one group: each rank sends to the next and receives from the one before
// (only a group lets every rank send before receiving). Then rank 0 and rank 1 alone, outside groups,
// on a stream of their own, the copies before and after ordered by the stream: two sends in a row
// arrive in order.
static void test_send_recv(ncclComm_t comm) {
    const size_t n = 777;
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = value(g_rank, i);
    float* send = to_device(h);
    float* recv = to_device(std::vector<float>(n, 0.0f));
    NK(ncclGroupStart());
    NK(ncclSend(send, n, ncclFloat, next, comm, 0));
    NK(ncclRecv(recv, n, ncclFloat, prev, comm, 0));
    NK(ncclGroupEnd());
    std::vector<float> out = to_host(recv, n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= out[i] == value(prev, i);
    check_all(ok, "nccl_send_recv_ring_in_a_group");

    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    std::vector<__half> a(n), b(n), got_a(n), got_b(n);
    for (size_t i = 0; i < n; i++) a[i] = from_float<__half>(value(0, i)), b[i] = from_float<__half>(value(1, i));
    __half* buf[2];
    CK(cudaMalloc(&buf[0], n * sizeof(__half)));
    CK(cudaMalloc(&buf[1], n * sizeof(__half)));
    if (g_rank == 0) {
        CK(cudaMemcpyAsync(buf[0], a.data(), n * sizeof(__half), cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyAsync(buf[1], b.data(), n * sizeof(__half), cudaMemcpyHostToDevice, s));
        NK(ncclSend(buf[0], n, ncclHalf, 1, comm, s));
        NK(ncclSend(buf[1], n, ncclHalf, 1, comm, s));
    } else if (g_rank == 1) {
        NK(ncclRecv(buf[0], n, ncclHalf, 0, comm, s));
        NK(ncclRecv(buf[1], n, ncclHalf, 0, comm, s));
        CK(cudaMemcpyAsync(got_a.data(), buf[0], n * sizeof(__half), cudaMemcpyDeviceToHost, s));
        CK(cudaMemcpyAsync(got_b.data(), buf[1], n * sizeof(__half), cudaMemcpyDeviceToHost, s));
    }
    CK(cudaStreamSynchronize(s));
    ok = true;
    for (size_t i = 0; g_rank == 1 && i < n; i++)
        ok &= to_float(got_a[i]) == to_float(a[i]) && to_float(got_b[i]) == to_float(b[i]);
    check_all(ok, "nccl_send_recv_f16_on_a_stream_in_order");
    CK(cudaFree(buf[0]));
    CK(cudaFree(buf[1]));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(send));
    CK(cudaFree(recv));
}

// ncclCommSplit: the even ranks and the odd ones, each its own communicator (ranks by key), whose
// all-reduce sums over its ranks alone and whose ranks exchange by their ranks in it.
static void test_split(ncclComm_t comm) {
    ncclComm_t sub;
    NK(ncclCommSplit(comm, g_rank % 2, g_rank, &sub, NULL));
    int count = 0, rank = -1;
    NK(ncclCommCount(sub, &count));
    NK(ncclCommUserRank(sub, &rank));
    int expect_count = (g_size - g_rank % 2 + 1) / 2;
    check_all(count == expect_count && rank == g_rank / 2, "nccl_split_count_and_rank");
    const size_t n = 100;
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = value(g_rank, i);
    float* d = to_device(h);
    NK(ncclAllReduce(d, d, n, ncclFloat, ncclSum, sub, 0));
    std::vector<float> out = to_host(d, n);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        float e = 0.0f;
        for (int r = g_rank % 2; r < g_size; r += 2) e += value(r, i);
        ok &= out[i] == e;
    }
    check_all(ok, "nccl_split_allreduce_over_its_ranks");
    NK(ncclCommDestroy(sub));
    CK(cudaFree(d));
}

// The mistakes NCCL leaves to hang or to undefined results, each run alone (test_nccl.sh expects the
// runtime's line): "unmatched": rank 0 sends and rank 1 never receives; "count": rank 1 receives
// fewer elements than rank 0 sends.
static int run_mistake(ncclComm_t comm, const char* which) {
    const size_t n = 64;
    float* d = to_device(std::vector<float>(n, 1.0f));
    if (strcmp(which, "unmatched") == 0) {
        if (g_rank == 0) NK(ncclSend(d, n, ncclFloat, 1, comm, 0));
        else MPI_Barrier(MPI_COMM_WORLD);  // waits for rank 0, which waits in its send
    } else if (strcmp(which, "count") == 0) {
        if (g_rank == 0) NK(ncclSend(d, n, ncclFloat, 1, comm, 0));
        if (g_rank == 1) NK(ncclRecv(d, n / 2, ncclFloat, 0, comm, 0));
        CK(cudaDeviceSynchronize());
        MPI_Barrier(MPI_COMM_WORLD);  // rank 1 never comes: its receive stops it
    } else {
        printf("FAIL test_nccl: unknown mistake '%s'\n", which);
        return 1;
    }
    CK(cudaDeviceSynchronize());
    printf("FAIL test_nccl %s: rank %d was not stopped\n", which, g_rank);
    return 1;
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
    if (argc > 1) return run_mistake(comm, argv[1]);

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
    test_send_recv(comm);
    test_split(comm);

    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return g_failures ? 1 : 0;
}
