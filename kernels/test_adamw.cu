// test_adamw.cu: kernels/adamw.cuh against adamw_update_cpu over three consecutive steps (bias
// corrections of t = 1, 2, 3), with and without an fp32 master copy, weight decay on and off,
// grad_scale != 1, sizes from 1 to 65537 (odd ones leave a tail for the vector kernel's extra
// thread), and pointers one element off 16-byte alignment (the scalar fallback).
#include <math.h>
#include <string.h>

#include "adamw.cuh"
#include "kernel_check.cuh"
#include "ops_cpu.h"

static const float LR = 1e-2f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f;

struct Case {
    size_t n;
    bool master;
    float weight_decay, grad_scale;
    bool misaligned;  // every pointer one element past a 16-byte boundary: the scalar kernel
};

// Totals over all cases of fp32 results that differ in any bit from the reference (m, v, master,
// and params in the fp32 build) and of floatX params that differ from the rounded reference.
static size_t g_fp32_values = 0, g_fp32_diff = 0, g_x_values = 0, g_x_diff = 0;

static size_t count_bit_diffs(const std::vector<float>& a, const std::vector<float>& b) {
    size_t d = 0;
    for (size_t i = 0; i < a.size(); i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

// Worst relative error of one tensor over the steps, reported once per case.
struct Worst {
    double err = 0;
    void add(const std::vector<float>& got, const std::vector<float>& ref) {
        double e = rel_error(got.data(), ref.data(), ref.size());
        if (!(e <= err)) err = e;  // NaN sticks
    }
    void report(const char* label, const char* tensor, double tol) {
        char name[200], why[96];
        snprintf(name, sizeof(name), "%s: %s", label, tensor);
        snprintf(why, sizeof(why), "relative error %.3g > %.3g", err, tol);
        test_report(err <= tol, name, why);
    }
};

static void run_case(const Case& c, TestRng& rng) {
    const size_t n = c.n, off = c.misaligned ? 1 : 0;
    // Initial state: a master copy in fp32 with params its rounding, or params alone (already
    // floatX, so the reference starts from the same values). m and v start at zero, as at t = 1.
    std::vector<float> master0(n);
    std::vector<floatX> params0(n);
    for (size_t i = 0; i < n; i++) {
        master0[i] = rng.normal();
        params0[i] = (floatX)master0[i];
        if (!c.master) master0[i] = (float)params0[i];
    }
    std::vector<float> ref_p = master0, ref_m(n, 0.0f), ref_v(n, 0.0f);

    floatX *params_base = device_alloc<floatX>(n + off), *grads_base = device_alloc<floatX>(n + off);
    float *m_base = device_alloc<float>(n + off), *v_base = device_alloc<float>(n + off);
    float* master_base = c.master ? device_alloc<float>(n + off) : nullptr;
    floatX *params = params_base + off, *grads = grads_base + off;
    float *m = m_base + off, *v = v_base + off, *master = c.master ? master_base + off : nullptr;
    cudaCheck(cudaMemcpy(params, params0.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(m, 0, n * sizeof(float)));
    cudaCheck(cudaMemset(v, 0, n * sizeof(float)));
    if (master) cudaCheck(cudaMemcpy(master, master0.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    Worst wm, wv, wmaster, wparams;
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(BETA1, (float)t), bc2 = 1.0f - powf(BETA2, (float)t);
        HostTensor g = random_tensor(n, rng, 0.5f);
        cudaCheck(cudaMemcpy(grads, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        // Without a master copy the kernel's state is the floatX params: the reference continues
        // from the same rounded values (in fp32 the rounding is the identity).
        if (!master) ref_p = device_download_float(params, n);
        adamw_update(params, master, grads, m, v, n, LR, BETA1, BETA2, bc1, bc2, EPS, c.weight_decay, c.grad_scale, 0);
        adamw_update_cpu(ref_p.data(), g.f.data(), ref_m.data(), ref_v.data(), n, LR, BETA1, BETA2, bc1, bc2, EPS,
                         c.weight_decay, c.grad_scale);

        std::vector<float> got_m = device_download_float(m, n), got_v = device_download_float(v, n);
        std::vector<float> got_p = device_download_float(params, n);
        wm.add(got_m, ref_m);
        wv.add(got_v, ref_v);
        wparams.add(got_p, ref_p);
        g_fp32_values += 2 * n;
        g_fp32_diff += count_bit_diffs(got_m, ref_m) + count_bit_diffs(got_v, ref_v);
        std::vector<float> ref_px(n);
        for (size_t i = 0; i < n; i++) ref_px[i] = (float)(floatX)ref_p[i];
        g_x_values += n;
        g_x_diff += count_bit_diffs(got_p, ref_px);
        if (master) {
            std::vector<float> got_master = device_download_float(master, n);
            wmaster.add(got_master, ref_p);
            g_fp32_values += n;
            g_fp32_diff += count_bit_diffs(got_master, ref_p);
        }
    }
    char label[160];
    snprintf(label, sizeof(label), "adamw n=%zu %s wd=%g grad_scale=%g %s, steps t=1..3", n,
             c.master ? "master" : "no-master", c.weight_decay, c.grad_scale, c.misaligned ? "scalar path" : "vector path");
    // m, v and master are fp32 results of fp32 math on the same inputs (k = 0: fp32 bound).
    wm.report(label, "m", floatx_tol(0));
    wv.report(label, "v", floatx_tol(0));
    if (master) wmaster.report(label, "master", floatx_tol(0));
    // params: one rounding of the fp32 result to floatX (k = 1).
    wparams.report(label, "params", floatx_tol(1));

    cudaCheck(cudaFree(params_base));
    cudaCheck(cudaFree(grads_base));
    cudaCheck(cudaFree(m_base));
    cudaCheck(cudaFree(v_base));
    if (master_base) cudaCheck(cudaFree(master_base));
}

// The same update on the vector and the scalar path, and a repeat, must give the same bits.
static void test_paths_agree(TestRng& rng) {
    const size_t n = 4099;
    HostTensor p = random_tensor(n, rng), g = random_tensor(n, rng);
    std::vector<float> mv(n, 0.01f);
    std::vector<float> results[3];
    for (int run = 0; run < 3; run++) {
        size_t off = run == 2 ? 1 : 0;  // runs 0, 1: vector path; run 2: scalar path
        floatX *pb = device_alloc<floatX>(n + off), *gb = device_alloc<floatX>(n + off);
        float *mb = device_alloc<float>(n + off), *vb = device_alloc<float>(n + off);
        cudaCheck(cudaMemcpy(pb + off, p.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(gb + off, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(mb + off, mv.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(vb + off, mv.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        adamw_update(pb + off, nullptr, gb + off, mb + off, vb + off, n, LR, BETA1, BETA2, 0.5f, 0.3f, EPS, 0.1f, 0.7f, 0);
        results[run] = device_download_float(pb + off, n);
        std::vector<float> m2 = device_download_float(mb + off, n), v2 = device_download_float(vb + off, n);
        results[run].insert(results[run].end(), m2.begin(), m2.end());
        results[run].insert(results[run].end(), v2.begin(), v2.end());
        cudaCheck(cudaFree(pb));
        cudaCheck(cudaFree(gb));
        cudaCheck(cudaFree(mb));
        cudaCheck(cudaFree(vb));
    }
    test_report(count_bit_diffs(results[0], results[1]) == 0, "adamw repeat run bit-identical", "bits differ");
    test_report(count_bit_diffs(results[0], results[2]) == 0, "adamw vector and scalar paths bit-identical", "bits differ");
}

// The host conversions of common.cuh against CUDA's own: every 16-bit pattern to fp32; fp32 to
// floatX on a stride through all 2^32 patterns, and at and beside every rounding midpoint between
// neighbouring floatX values (where round-to-nearest-even decides), infinities and NaN included.
static void test_host_conversions() {
#if !defined(ENABLE_FP32)
    size_t tried = 0, wrong = 0;
    auto check = [&](uint32_t bits) {
        float f = host_bits_float(bits);
        floatX want = (floatX)f, got = host_float_to_floatx(f);
        tried++;
        wrong += memcmp(&want, &got, 2) != 0;
    };
    size_t up_tried = 0, up_wrong = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        floatX x;
        uint16_t b = (uint16_t)h;
        memcpy((void*)&x, &b, 2);
        float want = (float)x, got = host_floatx_to_float(x);
        up_tried++;
        up_wrong += memcmp(&want, &got, 4) != 0;
        // The midpoint between x and the next pattern away from zero (both finite): exact in fp32.
        uint16_t nb = (uint16_t)(h + 1);
        if ((h & 0x7fffu) == 0x7fffu) continue;
        floatX nx;
        memcpy((void*)&nx, &nb, 2);
        double a = (double)(float)x, c = (double)(float)nx;
        if (!isfinite(a) || !isfinite(c) || (h & 0x8000u) != (nb & 0x8000u)) continue;
        uint32_t mid = host_float_bits((float)((a + c) / 2));
        for (int d = -1; d <= 1; d++) check(mid + d);
        check(host_float_bits((float)a));
    }
    for (uint64_t u = 0; u < (1ull << 32); u += 251) check((uint32_t)u);
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f7fffffu, 0x477fefffu,
                                0x477ff000u, 0x33000000u, 0x33000001u, 0x387fffffu, 0x38800000u, 0x80000000u};
    for (uint32_t b : special) check(b);
    char why[96];
    snprintf(why, sizeof(why), "%zu of %zu patterns differ", up_wrong, up_tried);
    test_report(up_wrong == 0, "host_floatx_to_float equals CUDA's conversion for every 16-bit pattern", why);
    snprintf(why, sizeof(why), "%zu of %zu values differ", wrong, tried);
    test_report(wrong == 0, "host_float_to_floatx equals CUDA's round-to-nearest-even (stride 251, every midpoint)", why);
#endif
}

// The offloaded optimizer's CPU update (adamw_update_host) takes the device kernel's steps bit for bit:
// master, m, v and the floatX weights, over three steps, weight decay on, with the loss scale's grad_scale.
static void test_host_update(TestRng& rng) {
    const size_t n = 65537;
    HostTensor p = random_tensor(n, rng);
    std::vector<float> master_h(p.f), m_h(n, 0.0f), v_h(n, 0.0f);
    std::vector<floatX> gp_h(n);
    floatX *params = device_alloc<floatX>(n), *grads = device_alloc<floatX>(n);
    float *master = device_alloc<float>(n), *m = device_alloc<float>(n), *v = device_alloc<float>(n);
    cudaCheck(cudaMemcpy(params, p.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(master, p.f.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(m, 0, n * sizeof(float)));
    cudaCheck(cudaMemset(v, 0, n * sizeof(float)));
    size_t diff = 0;
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(BETA1, (float)t), bc2 = 1.0f - powf(BETA2, (float)t);
        HostTensor g = random_tensor(n, rng, 3000.0f);  // gradients as a loss scale leaves them
        cudaCheck(cudaMemcpy(grads, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        adamw_update(params, master, grads, m, v, n, LR, BETA1, BETA2, bc1, bc2, EPS, 0.1f, 1.0f / 4096, 0);
        gp_h = g.x;
        adamw_update_host(gp_h.data(), master_h.data(), m_h.data(), v_h.data(), n, LR, BETA1, BETA2, bc1, bc2, EPS,
                          0.1f, 1.0f / 4096);
        std::vector<float> gp_f(n);
        for (size_t i = 0; i < n; i++) gp_f[i] = (float)gp_h[i];
        diff += count_bit_diffs(device_download_float(params, n), gp_f);
        diff += count_bit_diffs(device_download_float(master, n), master_h);
        diff += count_bit_diffs(device_download_float(m, n), m_h);
        diff += count_bit_diffs(device_download_float(v, n), v_h);
    }
    char why[64];
    snprintf(why, sizeof(why), "%zu values differ", diff);
    test_report(diff == 0, "adamw_update_host equals the device kernel bit for bit (3 steps, n=65537)", why);
    cudaCheck(cudaFree(params));
    cudaCheck(cudaFree(grads));
    cudaCheck(cudaFree(master));
    cudaCheck(cudaFree(m));
    cudaCheck(cudaFree(v));
}

int main() {
    TestRng rng(7);
    printf("precision %s\n", PRECISION_NAME);
    const Case cases[] = {
        {1, false, 0.0f, 1.0f, false},      {1, true, 0.1f, 0.5f, false},      {7, false, 0.1f, 0.25f, false},
        {8, true, 0.0f, 1.0f, false},       {1000, false, 0.0f, 1.0f, false},  {4099, true, 0.1f, 0.37f, false},
        {4099, false, 0.1f, 2.0f, true},    {4099, true, 0.0f, 1.0f, true},    {65537, true, 0.1f, 0.8f, false},
        {65537, false, 0.1f, 1.0f, false},  {3, true, 0.1f, 3.0f, true},
    };
    for (const Case& c : cases) run_case(c, rng);
    test_paths_agree(rng);
    test_host_conversions();
    test_host_update(rng);
    // Not a pass/fail criterion (the reference's FMA contraction depends on how ops_cpu.c was built):
    // how many results match adamw_update_cpu bit for bit.
    printf("info: bit-identical to adamw_update_cpu: fp32 values (m, v, master) %zu of %zu, %s params %zu of %zu\n",
           g_fp32_values - g_fp32_diff, g_fp32_values, PRECISION_NAME, g_x_values - g_x_diff, g_x_values);
    return test_finish();
}
