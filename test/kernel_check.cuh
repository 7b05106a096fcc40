// kernel_check.cuh: what the kernel tests (kernels/test_*.cu) share: seeded random inputs in
// floatX, device buffers, and comparisons with the C reference engine whose tolerances come
// from the precision.
//
// The tolerance rule: a kernel is fed inputs already rounded to floatX, and the reference
// function gets the same rounded values widened to fp32. What is left is the kernel's own
// rounding: each floatX store rounds by at most one unit roundoff u (2^-24 fp32, 2^-11 fp16,
// 2^-8 bf16), and fp32 sums in another order differ by a few fp32 ulps. A test states how many
// roundings its result passes through (k) and checks the relative error norm
// ||got - ref|| / ||ref|| against k * u (with a floor of 1e-5 in fp32: the bound fp32 kernels
// are held to, which covers reordered fp32 sums).
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "common.cuh"
#include "test.h"

#if defined(ENABLE_FP32)
static const double FLOATX_U = 1.0 / (1 << 24);
#elif defined(ENABLE_FP16)
static const double FLOATX_U = 1.0 / (1 << 11);
#else
static const double FLOATX_U = 1.0 / (1 << 8);
#endif

// k roundings of floatX, never below the fp32 bound of 1e-5.
static inline double floatx_tol(double k) {
    double t = k * FLOATX_U;
    return t > 1e-5 ? t : 1e-5;
}

// splitmix64: a seeded stream of uniform numbers, the same on every machine.
struct TestRng {
    uint64_t s;
    explicit TestRng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return (float)((next() >> 40) * (1.0 / (1ull << 24))); }  // [0, 1)
    float normal() {
        float u1 = uniform() + 1e-7f, u2 = uniform();
        return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
    }
    int below(int n) { return (int)(next() % (uint64_t)n); }
};

// Random values (normal, times scale) already rounded to floatX, and their fp32 widening.
struct HostTensor {
    std::vector<floatX> x;  // what the kernel gets
    std::vector<float> f;   // the same values in fp32, for the reference
};
static inline HostTensor random_tensor(size_t n, TestRng& rng, float scale = 1.0f, float offset = 0.0f) {
    HostTensor t;
    t.x.resize(n);
    t.f.resize(n);
    for (size_t i = 0; i < n; i++) {
        t.x[i] = (floatX)(offset + scale * rng.normal());
        t.f[i] = (float)t.x[i];
    }
    return t;
}

// ---- device buffers ----
template <class T>
static inline T* device_upload(const std::vector<T>& h) {
    T* d = nullptr;
    cudaCheck(cudaMalloc(&d, h.empty() ? 1 : h.size() * sizeof(T)));
    if (!h.empty()) cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <class T>
static inline T* device_alloc(size_t n) {
    T* d = nullptr;
    cudaCheck(cudaMalloc(&d, n ? n * sizeof(T) : 1));
    return d;
}
template <class T>
static inline std::vector<float> device_download_float(const T* d, size_t n) {
    std::vector<T> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = (float)h[i];
    return f;
}

// ---- comparisons ----
static inline double rel_error(const float* got, const float* ref, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - ref[i];
        d += e * e;
        s += (double)ref[i] * ref[i];
    }
    if (!(d == d)) return INFINITY;  // NaN anywhere fails
    return sqrt(d) / (s > 0 ? sqrt(s) : 1.0);
}

// PASS when the relative error norm is within tol; the message names the worst element.
static inline void check_tensor(const char* name, const std::vector<float>& got, const std::vector<float>& ref,
                                double tol) {
    size_t n = ref.size() < got.size() ? ref.size() : got.size();
    double err = rel_error(got.data(), ref.data(), n);
    size_t worst = 0;
    double wd = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d == d)) d = INFINITY;
        if (d > wd) { wd = d; worst = i; }
    }
    char why[256];
    snprintf(why, sizeof(why), "relative error %.3g > %.3g (worst at %zu: got %.7g, expected %.7g)", err, tol, worst,
             n ? got[worst] : 0.0f, n ? ref[worst] : 0.0f);
    test_report(got.size() == ref.size() && err <= tol, name, why);
}
