// bench_adamw_host.cu: the offloaded optimizer's AdamW on CPU threads (adamw_update_host in
// kernels/adamw.cuh), in elements and GB/s per second, beside the same loop through CUDA's own host
// conversions (float)x and (floatX)f, which branch per value and keep the loop scalar. Both must
// give the same bits; the bench says whether they did. Built with nvcc and the trainer's host flags
// (make bench; no GPU needed: nothing here touches a device).
//   build/dev/bench_adamw_host_{fp16,bf16,fp32} [N]   (default N = 2^25 elements)
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "adamw.cuh"

static double now_s() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// The loop adamw_update_host replaced: the same element arithmetic, CUDA's conversions.
static void adamw_update_host_cuda_conversions(floatX* gp, float* master, float* m, float* v, size_t n, float lr,
                                               float beta1, float beta2, float bc1, float bc2, float eps, float wd,
                                               float grad_scale) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float p = adamw_element(master[i], (float)gp[i], &m[i], &v[i], lr, beta1, beta2, bc1, bc2, eps, wd, grad_scale);
        master[i] = p;
        gp[i] = (floatX)p;
    }
}

typedef void (*UpdateFn)(floatX*, float*, float*, float*, size_t, float, float, float, float, float, float, float,
                         float);

struct State {
    std::vector<floatX> gp;
    std::vector<float> master, m, v;
};

static State make_state(size_t n) {
    State s{std::vector<floatX>(n), std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {  // weights ~ [-0.5, 0.5), gradients ~ 1e-3 scale, moments positive
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float r = (float)(x >> 40) / (float)(1 << 24) - 0.5f;
        s.master[i] = r;
        s.gp[i] = (floatX)(r * 2e-3f);
        s.m[i] = r * 1e-4f;
        s.v[i] = r * r * 1e-6f;
    }
    return s;
}

// Median seconds of `reps` updates, each on a fresh copy of the gradients (the update overwrites them).
static double time_update(UpdateFn fn, State& s, const std::vector<floatX>& grads, int reps) {
    std::vector<double> t;
    size_t n = grads.size();
    for (int r = 0; r < reps; r++) {
        memcpy(s.gp.data(), grads.data(), n * sizeof(floatX));
        double t0 = now_s();
        fn(s.gp.data(), s.master.data(), s.m.data(), s.v.data(), n, 1e-4f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-8f, 0.1f,
           1.0f / 65536.0f);
        t.push_back(now_s() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char** argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 25;
    if (n == 0) {
        fprintf(stderr, "error: N: expected a positive element count, got '%s'\n", argv[1]);
        return 1;
    }
    const int reps = 5;
    // Bytes per element: gradient in and weight out (floatX each), master, m, v read and written.
    double bytes = 2.0 * sizeof(floatX) + 6.0 * sizeof(float);
    printf("host AdamW (%s), %zu elements, %d threads, median of %d; %.0f bytes moved per element\n",
           PRECISION_NAME, n, omp_get_max_threads(), reps, bytes);
    State a = make_state(n), b = make_state(n);
    std::vector<floatX> grads = a.gp;
    double t_cuda = time_update(adamw_update_host_cuda_conversions, a, grads, reps);
    double t_host = time_update(adamw_update_host, b, grads, reps);
    int same = memcmp(a.gp.data(), b.gp.data(), n * sizeof(floatX)) == 0 &&
               memcmp(a.master.data(), b.master.data(), n * sizeof(float)) == 0 &&
               memcmp(a.m.data(), b.m.data(), n * sizeof(float)) == 0 &&
               memcmp(a.v.data(), b.v.data(), n * sizeof(float)) == 0;
    printf("%-34s %8.1f ms  %8.1f M elements/s  %6.1f GB/s\n", "CUDA's host conversions (scalar)", t_cuda * 1e3,
           n / t_cuda * 1e-6, n * bytes / t_cuda * 1e-9);
    printf("%-34s %8.1f ms  %8.1f M elements/s  %6.1f GB/s  (x%.2f)\n", "adamw_update_host (branch-free, simd)",
           t_host * 1e3, n / t_host * 1e-6, n * bytes / t_host * 1e-9, t_cuda / t_host);
    printf("same bits after %d updates: %s\n", reps, same ? "yes" : "NO");
    // GPT-2 1.5B's whole optimizer step at this rate, for the ladder's offload rows.
    printf("GPT-2 1.5B (1,557,686,400 parameters) at this rate: %.2f s per optimizer step on this host\n",
           1557686400.0 / (n / t_host));
    return same ? 0 : 1;
}
