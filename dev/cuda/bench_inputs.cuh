// bench_inputs.cuh: device buffers and random inputs for the dev programs that run the kernels at a
// shape of their own (bench_kernels.cu times them on a GPU; count_attention.cu runs them under the CPU
// runtime's counting). Inputs are random and in range; nothing is checked with them.
#pragma once
#include <stddef.h>

#include <vector>

#include "common.cuh"

template <class T>
static T* dalloc(size_t n) {
    T* p;
    cudaCheck(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
    return p;
}

// Random floatX in [-scale, scale), filled on the host once.
static void fill(floatX* d, size_t n, float scale, unsigned seed) {
    std::vector<floatX> h(n);
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = (floatX)(scale * ((s >> 8) * (2.0f / 16777216.0f) - 1.0f));
    }
    cudaCheck(cudaMemcpy(d, h.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
}
