// test_qk_tile.cu: dev/cuda/qk_tile.cuh (S = Q K^T through cp.async, ldmatrix and mma.sync) against a
// scalar product in double, in f16 and bf16, at head sizes 64 and 32, with a key count that leaves the
// last tile partly empty. Run through the CPU runtime (checked) by make test; compiles with nvcc too.
#include <math.h>
#include <stdint.h>

#include <vector>

#include "bound_check.cuh"
#include "qk_tile.cuh"


template <class T, int HS>
static void run(const char* name, int n_query, int n_keys) {
    uint32_t s = 2024u + HS;
    auto rnd = [&]() { s = s * 1664525u + 1013904223u; return (float)(s >> 8) / 8388608.0f - 1.0f; };
    std::vector<T> Q((size_t)n_query * HS), K((size_t)n_keys * HS);
    for (auto& v : Q) v = from_f<T>(rnd());
    for (auto& v : K) v = from_f<T>(rnd());
    T *dQ, *dK;
    float* dS;
    CK(cudaMalloc(&dQ, Q.size() * sizeof(T)));
    CK(cudaMalloc(&dK, K.size() * sizeof(T)));
    CK(cudaMalloc(&dS, (size_t)n_query * n_keys * sizeof(float)));
    CK(cudaMemcpy(dQ, Q.data(), Q.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dK, K.data(), K.size() * sizeof(T), cudaMemcpyHostToDevice));
    qk_tile_forward<T, HS>(dS, dQ, dK, n_query, n_keys, 0);
    CK(cudaGetLastError());
    std::vector<float> S((size_t)n_query * n_keys);
    CK(cudaMemcpy(S.data(), dS, S.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int q = 0; q < n_query; q++)
        for (int k = 0; k < n_keys; k++) {
            double e = 0.0, mag = 0.0;
            for (int d = 0; d < HS; d++) {
                double p = (double)to_f(Q[(size_t)q * HS + d]) * to_f(K[(size_t)k * HS + d]);
                e += p;
                mag += fabs(p);
            }
            // products exact in fp32, summed in fp32: one rounding per step at most
            double err = fabs(S[(size_t)q * n_keys + k] - e) / ((HS + 1) * ldexp(mag, -24) + 1e-30);
            keep_worst(worst, err);
        }
    check_worst(name, "", worst, "worst error", "the fp32 bound");
    CK(cudaFree(dQ));
    CK(cudaFree(dK));
    CK(cudaFree(dS));
}

int main() {
    run<__half, 64>("qk_tile_f16_hs64", 128, 200);
    run<__nv_bfloat16, 64>("qk_tile_bf16_hs64", 128, 200);
    run<__half, 32>("qk_tile_f16_hs32", 64, 256);
    run<__nv_bfloat16, 32>("qk_tile_bf16_hs32", 64, 37);
    return test_finish();
}
