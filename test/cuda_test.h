// cuda_test.h: what the CUDA test programs share (the CPU runtime's tests in test/cuda_cpu/, and
// through bound_check.cuh the kernel tests held to derived bounds): CK, which ends the program when a
// CUDA call fails, and a host vector's copy to the device and back.
#pragma once

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

// A failed CUDA call ends the program with one line naming the call, where it is and CUDA's error.
// By default the line is a FAIL line on stdout, which test/run_tests.sh counts, and the exit status
// 1. A program that runs its cases as children (cuda_cpu/child.h) defines CK_CHILD_STATUS before
// including this file: the line goes to stderr, which the parent reads into its FAIL line, and the
// child exits with that status. One whose processes are MPI ranks defines CK_MPI_ABORT (after
// <mpi.h>): every rank is ended, none left waiting in a collective for the one that failed.
static inline void ck_failed(const char* call, cudaError_t e, const char* file, int line) {
#if defined(CK_CHILD_STATUS)
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cudaGetErrorString(e));
    exit(CK_CHILD_STATUS);
#else
    printf("FAIL %s:%d: %s: %s\n", file, line, call, cudaGetErrorString(e));
#if defined(CK_MPI_ABORT)
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    exit(1);
#endif
}
#define CK(call)                                                          \
    do {                                                                  \
        cudaError_t e_ = (call);                                          \
        if (e_ != cudaSuccess) ck_failed(#call, e_, __FILE__, __LINE__); \
    } while (0)

// A device copy of h (cudaMalloc'd; the caller frees it), and n elements of d back on the host.
template <class T>
static T* to_device(const std::vector<T>& h) {
    T* d;
    CK(cudaMalloc(&d, h.size() * sizeof(T)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <class T>
static std::vector<T> to_host(const T* d, size_t n) {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}
