// test_global_norm.cu: kernels/global_norm.cuh against a double-precision sum of squares on the
// host: n = 0, 1, odd sizes, 3M (every one of the GLOBAL_NORM_BLOCKS blocks has work), the vector
// path and the scalar fallback (a pointer one element off 16-byte alignment), planted +inf, -inf
// and NaN entries (counted whatever the rest), and bit-identical repeat runs.
#include <math.h>
#include <string.h>

#include "global_norm.cuh"
#include "kernel_check.cuh"

struct NormResult {
    float out[2];
    std::vector<float> partials;
};

// Uploads x at an element offset (0: 16-byte aligned, the vector path; 1: the scalar path), runs
// the kernel on NaN-poisoned out and partials (so both must be overwritten) and reads them back.
static NormResult run_norm(const std::vector<floatX>& x, size_t off) {
    size_t n = x.size();
    floatX* base = device_alloc<floatX>(n + off);
    if (n) cudaCheck(cudaMemcpy(base + off, x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    float* out = device_alloc<float>(2);
    float* partials = device_alloc<float>(2 * GLOBAL_NORM_BLOCKS);
    global_norm_squared(out, partials, base + off, n, 0);
    NormResult r;
    cudaCheck(cudaMemcpy(r.out, out, sizeof(r.out), cudaMemcpyDeviceToHost));
    r.partials = device_download_float(partials, 2 * GLOBAL_NORM_BLOCKS);
    cudaCheck(cudaFree(base));
    cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(partials));
    return r;
}

static double host_sum_squares(const HostTensor& t) {
    double s = 0;
    for (float f : t.f) s += (double)f * f;
    return s;
}

// Finite gradients: out[0] within the fp32 bound of the double sum (k = 0: the squares of floatX
// values are exact in fp32, only fp32 additions in another order differ), out[1] exactly 0.
static void test_finite(size_t n, size_t off, TestRng& rng, float scale) {
    HostTensor t = random_tensor(n, rng, scale);
    NormResult r = run_norm(t.x, off);
    char name[128];
    snprintf(name, sizeof(name), "global_norm n=%zu scale=%g %s: sum of squares", n, scale, off ? "scalar path" : "vector path");
    double ref = host_sum_squares(t);
    if (n == 0) test_report(r.out[0] == 0.0f, name, "expected exactly 0");
    else check_close(name, r.out[0], ref, floatx_tol(0));
    snprintf(name, sizeof(name), "global_norm n=%zu %s: no non-finite entries", n, off ? "scalar path" : "vector path");
    char why[64];
    snprintf(why, sizeof(why), "count %g, expected 0", r.out[1]);
    test_report(r.out[1] == 0.0f, name, why);
}

// Planted +inf, -inf and NaN among finite values: counted exactly, and the sum is not finite.
static void test_planted(size_t n, size_t off, TestRng& rng) {
    HostTensor t = random_tensor(n, rng);
    const size_t at[] = {0, n / 3, n / 2, n - 1};
    const float val[] = {INFINITY, -INFINITY, NAN, INFINITY};
    size_t planted = 0;
    for (int k = 0; k < 4; k++) {
        if (k > 0 && at[k] == at[k - 1]) continue;
        t.x[at[k]] = (floatX)val[k];
        planted++;
    }
    NormResult r = run_norm(t.x, off);
    char name[128], why[96];
    snprintf(name, sizeof(name), "global_norm n=%zu %s: %zu planted inf/NaN counted", n, off ? "scalar path" : "vector path", planted);
    snprintf(why, sizeof(why), "count %g, expected %zu", r.out[1], planted);
    test_report(r.out[1] == (float)planted, name, why);
    snprintf(name, sizeof(name), "global_norm n=%zu %s: sum of squares not finite", n, off ? "scalar path" : "vector path");
    snprintf(why, sizeof(why), "got %g", r.out[0]);
    test_report(!isfinite(r.out[0]), name, why);
}

// Only inf/NaN: the count is every entry (and a count past the vector tail).
static void test_all_bad(size_t n) {
    std::vector<floatX> x(n);
    for (size_t i = 0; i < n; i++) x[i] = (floatX)(i % 2 ? NAN : -INFINITY);
    NormResult r = run_norm(x, 0);
    char name[96], why[64];
    snprintf(name, sizeof(name), "global_norm n=%zu all inf/NaN: counted", n);
    snprintf(why, sizeof(why), "count %g, expected %zu", r.out[1], n);
    test_report(r.out[1] == (float)n, name, why);
}

// 3M values: every block gets work (each partial is positive), the result matches the double sum,
// and two runs give the same bits in out and in every partial.
static void test_large(TestRng& rng) {
    const size_t n = 3000003;
    HostTensor t = random_tensor(n, rng, 0.01f);
    NormResult a = run_norm(t.x, 0), b = run_norm(t.x, 0);
    check_close("global_norm n=3000003 vector path: sum of squares", a.out[0], host_sum_squares(t), floatx_tol(0));
    test_report(a.out[1] == 0.0f, "global_norm n=3000003: no non-finite entries", "nonzero count");
    int idle = 0;
    for (int i = 0; i < GLOBAL_NORM_BLOCKS; i++) idle += !(a.partials[i] > 0.0f);
    char why[64];
    snprintf(why, sizeof(why), "%d of %d blocks summed nothing", idle, GLOBAL_NORM_BLOCKS);
    test_report(idle == 0, "global_norm n=3000003: every block has work", why);
    bool same = memcmp(a.out, b.out, sizeof(a.out)) == 0 &&
                memcmp(a.partials.data(), b.partials.data(), a.partials.size() * sizeof(float)) == 0;
    test_report(same, "global_norm n=3000003: repeat run bit-identical (out and partials)", "bits differ");
    NormResult s1 = run_norm(t.x, 1), s2 = run_norm(t.x, 1);
    check_close("global_norm n=3000003 scalar path: sum of squares", s1.out[0], host_sum_squares(t), floatx_tol(0));
    test_report(memcmp(s1.out, s2.out, sizeof(s1.out)) == 0, "global_norm n=3000003 scalar path: repeat run bit-identical",
                "bits differ");
}

int main() {
    TestRng rng(11);
    printf("precision %s\n", PRECISION_NAME);
    test_finite(0, 0, rng, 1.0f);
    test_finite(1, 0, rng, 1.0f);
    test_finite(1, 1, rng, 1.0f);
    test_finite(7, 0, rng, 1.0f);
    test_finite(1001, 0, rng, 1.0f);
    test_finite(1001, 1, rng, 1.0f);
    test_finite(65537, 0, rng, 100.0f);  // large squares (fp16 near its range after loss scaling)
    test_planted(1, 0, rng);
    test_planted(1001, 0, rng);
    test_planted(1001, 1, rng);
    test_planted(65539, 0, rng);
    test_all_bad(13);
    test_large(rng);
    return test_finish();
}
