// test_global_norm.cu: kernels/global_norm.cuh against a double-precision sum of squares on the
// host: n = 0, 1, odd sizes, 3M (every one of the GLOBAL_NORM_BLOCKS blocks has work), the vector
// path and the scalar fallback (a pointer one element off 16-byte alignment), planted +inf, -inf
// and NaN entries (counted whatever the rest), and bit-identical repeat runs. The last block's sum
// of the partials against the same fixed order on the host, bit for bit, and the count of blocks
// done left at 0 by every call (the next call on the same scratch needs it so).
#include <math.h>
#include <string.h>

#include "global_norm.cuh"
#include "kernel_check.cuh"

struct NormResult {
    float out[2];
    std::vector<float> partials;
};

// The last block's sum of one half of the partials (sums or counts), in the kernel's order: thread i
// adds partials i, i+256, ... (global_norm_kernel), lane l of warp 0 adds threads l, l+32, ...
// (global_norm_block_sum), then the shuffle tree (warp_reduce_sum: offsets 16, 8, 4, 2, 1).
static float host_final_sum(const float* p) {
    float thread[GLOBAL_NORM_THREADS], lane[32];
    for (int i = 0; i < GLOBAL_NORM_THREADS; i++) {
        thread[i] = 0.0f;
        for (int b = i; b < GLOBAL_NORM_BLOCKS; b += GLOBAL_NORM_THREADS) thread[i] += p[b];
    }
    for (int l = 0; l < 32; l++) {
        lane[l] = 0.0f;
        for (int j = 0; j < GLOBAL_NORM_THREADS / 32; j++) lane[l] += thread[j * 32 + l];
    }
    for (int off = 16; off > 0; off >>= 1) {
        float next[32];
        for (int l = 0; l < 32; l++) next[l] = lane[l] + lane[l ^ off];
        memcpy(lane, next, sizeof(lane));
    }
    return lane[0];
}

static size_t g_final_checked = 0, g_final_wrong = 0, g_counter_wrong = 0;

// Uploads x at an element offset (0: 16-byte aligned, the vector path; 1: the scalar path), runs
// the kernel on NaN-poisoned out and partials (so both must be overwritten; the count of blocks
// done zeroed, as the engine's zeroed scratch has it) and reads them back. Every run: out against
// the host's sum of the partials in the kernel's order, bit for bit, and the count back at 0.
static NormResult run_norm(const std::vector<floatX>& x, size_t off) {
    size_t n = x.size();
    floatX* base = device_alloc<floatX>(n + off);
    if (n) cudaCheck(cudaMemcpy(base + off, x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    float* out = device_alloc<float>(2);
    float* partials = device_alloc<float>(GLOBAL_NORM_SCRATCH_FLOATS);
    cudaCheck(cudaMemset(partials + 2 * GLOBAL_NORM_BLOCKS, 0, sizeof(float)));
    global_norm_squared(out, partials, base + off, n, 0);
    NormResult r;
    cudaCheck(cudaMemcpy(r.out, out, sizeof(r.out), cudaMemcpyDeviceToHost));
    r.partials = device_download_float(partials, 2 * GLOBAL_NORM_BLOCKS);
    unsigned done = 1;
    cudaCheck(cudaMemcpy(&done, partials + 2 * GLOBAL_NORM_BLOCKS, sizeof(done), cudaMemcpyDeviceToHost));
    float want[2] = {host_final_sum(r.partials.data()), host_final_sum(r.partials.data() + GLOBAL_NORM_BLOCKS)};
    g_final_checked++;
    g_final_wrong += memcmp(want, r.out, sizeof(want)) != 0;
    g_counter_wrong += done != 0;
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

// Block 0's partial near 2^24 and every other block's near 1, about half the big one's spacing of
// fp32 values: how each partial meets the big one decides the low bits, so the bit-for-bit check of
// the last block's sum (run_norm) tells the one fixed order from another about half the time a run;
// six runs of fresh values, one element a thread (the scalar path: the same last block).
static void test_order(TestRng& rng) {
    const size_t n = (size_t)GLOBAL_NORM_BLOCKS * GLOBAL_NORM_THREADS;
    for (int run = 0; run < 6; run++) {
        HostTensor t = random_tensor(n, rng, 1.0f / 16);  // 256 squares of 1/16: a partial of about 1
        for (size_t i = 0; i < GLOBAL_NORM_THREADS; i++) {
            t.x[i] = (floatX)(t.f[i] * 4096.0f);
            t.f[i] = (float)t.x[i];
        }
        NormResult r = run_norm(t.x, 1);
        char name[96];
        snprintf(name, sizeof(name), "global_norm: one partial near 2^24, the others near 1 (run %d): sum of squares", run);
        check_close(name, r.out[0], host_sum_squares(t), floatx_tol(0));
    }
}

// Two calls on one scratch, as the engine makes a call a step: the second starts from the count the
// first left, and both give the same bits.
static void test_reuse(TestRng& rng) {
    const size_t n = 100003;
    HostTensor t = random_tensor(n, rng);
    floatX* x = device_upload(t.x);
    float* out = device_alloc<float>(2);
    float* partials = device_alloc<float>(GLOBAL_NORM_SCRATCH_FLOATS);
    cudaCheck(cudaMemset(partials + 2 * GLOBAL_NORM_BLOCKS, 0, sizeof(float)));
    float got[2][2];
    for (int k = 0; k < 2; k++) {
        global_norm_squared(out, partials, x, n, 0);
        cudaCheck(cudaMemcpy(got[k], out, sizeof(got[k]), cudaMemcpyDeviceToHost));
    }
    test_report(memcmp(got[0], got[1], sizeof(got[0])) == 0, "global_norm: two calls on one scratch bit-identical", "bits differ");
    check_close("global_norm: second call on one scratch: sum of squares", got[1][0], host_sum_squares(t), floatx_tol(0));
    cudaCheck(cudaFree(x));
    cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(partials));
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
    test_order(rng);
    test_reuse(rng);
    char why[96];
    snprintf(why, sizeof(why), "%zu of %zu runs differ", g_final_wrong, g_final_checked);
    test_report(g_final_wrong == 0, "global_norm: the last block's sum of the partials in the fixed order, bit for bit", why);
    snprintf(why, sizeof(why), "%zu of %zu runs left it nonzero", g_counter_wrong, g_final_checked);
    test_report(g_counter_wrong == 0, "global_norm: every call leaves the count of blocks done at 0", why);
    return test_finish();
}
