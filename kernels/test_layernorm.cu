// test_layernorm.cu: kernels/layernorm.cuh against layernorm_forward_cpu, residual_forward_cpu and
// layernorm_backward_cpu: N = 1, C not a multiple of 32 (and odd, for the scalar path), C = 768,
// enough rows for several backward reduction groups, a C whose backward uses fewer warps per
// block, a C too large for shared memory (the global-memory paths), nonzero initial gradients,
// and two backward runs compared bit for bit; the residual add alone equal to the fused kernel's
// residual bit for bit (in place too).
#include "kernel_check.cuh"
#include "layernorm.cuh"
#include "ops_cpu.h"

static HostTensor round_to_floatx(const std::vector<float>& f) {
    HostTensor t;
    t.x.resize(f.size());
    t.f.resize(f.size());
    for (size_t i = 0; i < f.size(); i++) {
        t.x[i] = (floatX)f[i];
        t.f[i] = (float)t.x[i];
    }
    return t;
}

static void test_case(int N, int C, TestRng& rng) {
    const size_t NC = (size_t)N * C;
    HostTensor a = random_tensor(NC, rng, 1.0f, 0.3f);  // an offset, so the mean matters
    HostTensor b = random_tensor(NC, rng, 0.5f);
    HostTensor weight = random_tensor(C, rng, 0.1f, 1.0f);
    HostTensor bias = random_tensor(C, rng, 0.1f);
    HostTensor dout = random_tensor(NC, rng);
    HostTensor dinp0 = random_tensor(NC, rng, 0.5f);  // nonzero: the kernel must add
    HostTensor dweight0 = random_tensor(C, rng, 0.5f);
    HostTensor dbias0 = random_tensor(C, rng, 0.5f);
    const char* path = C % X128 == 0 ? "128-bit" : "scalar";
    char name[160];

    floatX* d_a = device_upload(a.x);
    floatX* d_b = device_upload(b.x);
    floatX* d_w = device_upload(weight.x);
    floatX* d_bias = device_upload(bias.x);
    floatX* d_out = device_alloc<floatX>(NC);
    floatX* d_res = device_alloc<floatX>(NC);
    float* d_mean = device_alloc<float>(N);
    float* d_rstd = device_alloc<float>(N);

    // ---- forward on a ----
    std::vector<float> ref_out(NC), ref_mean(N), ref_rstd(N);
    layernorm_forward_cpu(ref_out.data(), ref_mean.data(), ref_rstd.data(), a.f.data(), weight.f.data(),
                          bias.f.data(), N, C);
    layernorm_forward(d_out, d_mean, d_rstd, d_a, d_w, d_bias, N, C, 0);
    // out: one rounding (the fp32 result stored as floatX); mean, rstd: fp32 only (k = 0: the 1e-5
    // floor covers sums taken in another order).
    snprintf(name, sizeof(name), "layernorm_forward N=%d C=%d (%s) out vs layernorm_forward_cpu", N, C, path);
    check_tensor(name, device_download_float(d_out, NC), ref_out, floatx_tol(1));
    snprintf(name, sizeof(name), "layernorm_forward N=%d C=%d mean", N, C);
    check_tensor(name, device_download_float(d_mean, N), ref_mean, floatx_tol(0));
    snprintf(name, sizeof(name), "layernorm_forward N=%d C=%d rstd", N, C);
    check_tensor(name, device_download_float(d_rstd, N), ref_rstd, floatx_tol(0));

    // ---- fused residual + forward ----
    std::vector<float> ref_res(NC);
    residual_forward_cpu(ref_res.data(), a.f.data(), b.f.data(), (int)NC);
    // The LayerNorm's reference input is the residual as the kernel stores it: the same fp32 sum,
    // rounded to floatX.
    HostTensor res = round_to_floatx(ref_res);
    std::vector<float> ref_fout(NC), ref_fmean(N), ref_frstd(N);
    layernorm_forward_cpu(ref_fout.data(), ref_fmean.data(), ref_frstd.data(), res.f.data(), weight.f.data(),
                          bias.f.data(), N, C);
    fused_residual_layernorm_forward(d_res, d_out, d_mean, d_rstd, d_a, d_b, d_w, d_bias, N, C, 0);
    // residual: one rounding of the fp32 sum; out: one rounding, from the rounded residual.
    snprintf(name, sizeof(name), "fused_residual_layernorm_forward N=%d C=%d residual vs residual_forward_cpu", N, C);
    check_tensor(name, device_download_float(d_res, NC), ref_res, floatx_tol(1));
    snprintf(name, sizeof(name), "fused_residual_layernorm_forward N=%d C=%d out vs layernorm_forward_cpu", N, C);
    check_tensor(name, device_download_float(d_out, NC), ref_fout, floatx_tol(1));
    snprintf(name, sizeof(name), "fused_residual_layernorm_forward N=%d C=%d mean, rstd", N, C);
    std::vector<float> got_stats = device_download_float(d_mean, N), ref_stats = ref_fmean;
    std::vector<float> got_rstd = device_download_float(d_rstd, N);
    got_stats.insert(got_stats.end(), got_rstd.begin(), got_rstd.end());
    ref_stats.insert(ref_stats.end(), ref_frstd.begin(), ref_frstd.end());
    check_tensor(name, got_stats, ref_stats, floatx_tol(0));
    // "From the rounded residual", exactly: the fused output equals, bit for bit, the plain
    // forward run on the stored residual (same code path and summation order). A fused kernel that
    // normalised the unrounded a + b would differ here, though within the tolerance above.
    {
        std::vector<float> fused_out = device_download_float(d_out, NC);
        std::vector<float> fused_mean = device_download_float(d_mean, N), fused_rstd = device_download_float(d_rstd, N);
        floatX* d_out2 = device_alloc<floatX>(NC);
        layernorm_forward(d_out2, d_mean, d_rstd, d_res, d_w, d_bias, N, C, 0);
        bool same = device_download_float(d_out2, NC) == fused_out && device_download_float(d_mean, N) == fused_mean &&
                    device_download_float(d_rstd, N) == fused_rstd;
        snprintf(name, sizeof(name), "fused_residual_layernorm_forward N=%d C=%d == layernorm_forward(residual) bitwise",
                 N, C);
        CHECK(same, name);
        cudaCheck(cudaFree(d_out2));
    }
    // The residual add alone: the fused kernel's residual, bit for bit, also in place over b.
    {
        std::vector<float> fused_res = device_download_float(d_res, NC);
        floatX* d_sum = device_alloc<floatX>(NC);
        residual_forward(d_sum, d_a, d_b, NC, 0);
        snprintf(name, sizeof(name), "residual_forward n=%zu == fused_residual_layernorm_forward's residual bitwise",
                 (size_t)NC);
        CHECK(device_download_float(d_sum, NC) == fused_res, name);
        floatX* d_b2 = device_alloc<floatX>(NC);
        cudaCheck(cudaMemcpy(d_b2, d_b, NC * sizeof(floatX), cudaMemcpyDeviceToDevice));
        residual_forward(d_b2, d_a, d_b2, NC, 0);
        snprintf(name, sizeof(name), "residual_forward n=%zu in place over b", (size_t)NC);
        CHECK(device_download_float(d_b2, NC) == fused_res, name);
        cudaCheck(cudaFree(d_sum));
        cudaCheck(cudaFree(d_b2));
    }
    // In place over a (the engine may write the residual over its input).
    fused_residual_layernorm_forward(d_a, d_out, d_mean, d_rstd, d_a, d_b, d_w, d_bias, N, C, 0);
    snprintf(name, sizeof(name), "fused_residual_layernorm_forward N=%d C=%d in place over a", N, C);
    std::vector<float> both = device_download_float(d_a, NC), ref_both = ref_res;
    std::vector<float> got_out2 = device_download_float(d_out, NC);
    both.insert(both.end(), got_out2.begin(), got_out2.end());
    ref_both.insert(ref_both.end(), ref_fout.begin(), ref_fout.end());
    check_tensor(name, both, ref_both, floatx_tol(1));
    cudaCheck(cudaMemcpy(d_a, a.x.data(), NC * sizeof(floatX), cudaMemcpyHostToDevice));

    // ---- backward (inp = a, with the reference's saved statistics) ----
    std::vector<float> ref_dinp = dinp0.f, ref_dw = dweight0.f, ref_db = dbias0.f;
    layernorm_backward_cpu(ref_dinp.data(), ref_dw.data(), ref_db.data(), dout.f.data(), a.f.data(), weight.f.data(),
                           ref_mean.data(), ref_rstd.data(), N, C);
    cudaCheck(cudaMemcpy(d_mean, ref_mean.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_rstd, ref_rstd.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    floatX* d_dout = device_upload(dout.x);
    floatX* d_dinp = device_upload(dinp0.x);
    floatX* d_dw = device_upload(dweight0.x);
    floatX* d_db = device_upload(dbias0.x);
    // The counters zeroed once, as the engine does when it allocates scratch; the rest poisoned.
    const size_t scratch_n = layernorm_backward_scratch_floats(N, C);
    const size_t counters = layernorm_backward_counters(N, C, sizeof(floatX));
    float* d_scratch = device_alloc<float>(scratch_n);
    cudaCheck(cudaMemset(d_scratch, 0xFF, scratch_n * sizeof(float)));
    cudaCheck(cudaMemset(d_scratch, 0, counters * sizeof(float)));
    layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_a, d_w, d_mean, d_rstd, N, C, 1, 0);
    // Each gradient: old value + an fp32 result, stored once as floatX: one rounding.
    std::vector<float> got_dinp = device_download_float(d_dinp, NC);
    std::vector<float> got_dw = device_download_float(d_dw, C), got_db = device_download_float(d_db, C);
    snprintf(name, sizeof(name), "layernorm_backward N=%d C=%d (%s) dinp vs layernorm_backward_cpu", N, C, path);
    check_tensor(name, got_dinp, ref_dinp, floatx_tol(1));
    snprintf(name, sizeof(name), "layernorm_backward N=%d C=%d dweight", N, C);
    check_tensor(name, got_dw, ref_dw, floatx_tol(1));
    snprintf(name, sizeof(name), "layernorm_backward N=%d C=%d dbias", N, C);
    check_tensor(name, got_db, ref_db, floatx_tol(1));

    // Deterministic: from the same starting gradients, the same bits (the partials are poisoned
    // again first, to show their old contents do not matter; the counters must be back at zero).
    cudaCheck(cudaMemcpy(d_dinp, dinp0.x.data(), NC * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_dw, dweight0.x.data(), C * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_db, dbias0.x.data(), C * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(d_scratch + counters, 0xFF, (scratch_n - counters) * sizeof(float)));
    layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_a, d_w, d_mean, d_rstd, N, C, 1, 0);
    bool same = device_download_float(d_dinp, NC) == got_dinp && device_download_float(d_dw, C) == got_dw &&
                device_download_float(d_db, C) == got_db;
    snprintf(name, sizeof(name), "layernorm_backward N=%d C=%d twice: bit-identical", N, C);
    CHECK(same, name);

    // accumulate 0 (a step's first micro-step): dweight and dbias are written whatever they held
    // (NaN here), bit for bit what adding to zeros gives; dinp still accumulates.
    {
        std::vector<float> zero_dinp = dinp0.f, fresh_dw(C, 0.0f), fresh_db(C, 0.0f);
        layernorm_backward_cpu(zero_dinp.data(), fresh_dw.data(), fresh_db.data(), dout.f.data(), a.f.data(),
                               weight.f.data(), ref_mean.data(), ref_rstd.data(), N, C);
        cudaCheck(cudaMemcpy(d_dinp, dinp0.x.data(), NC * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemset(d_dw, 0xff, C * sizeof(floatX)));
        cudaCheck(cudaMemset(d_db, 0xff, C * sizeof(floatX)));
        layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_a, d_w, d_mean, d_rstd, N, C, 0, 0);
        std::vector<float> fw = device_download_float(d_dw, C), fb = device_download_float(d_db, C);
        snprintf(name, sizeof(name), "layernorm_backward accumulate=0 N=%d C=%d: dinp still accumulated", N, C);
        CHECK(device_download_float(d_dinp, NC) == got_dinp, name);
        fw.insert(fw.end(), fb.begin(), fb.end());
        fresh_dw.insert(fresh_dw.end(), fresh_db.begin(), fresh_db.end());
        snprintf(name, sizeof(name), "layernorm_backward accumulate=0 N=%d C=%d: dweight, dbias overwritten (were NaN)", N, C);
        check_tensor(name, fw, fresh_dw, floatx_tol(1));
        cudaCheck(cudaMemcpy(d_dinp, dinp0.x.data(), NC * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemset(d_dw, 0, C * sizeof(floatX)));
        cudaCheck(cudaMemset(d_db, 0, C * sizeof(floatX)));
        layernorm_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_a, d_w, d_mean, d_rstd, N, C, 1, 0);
        std::vector<float> zw = device_download_float(d_dw, C), zb = device_download_float(d_db, C);
        zw.insert(zw.end(), zb.begin(), zb.end());
        snprintf(name, sizeof(name), "layernorm_backward accumulate=0 N=%d C=%d: the bits of += onto zeros", N, C);
        CHECK(zw == fw, name);
    }

    floatX* bufs[] = {d_a, d_b, d_w, d_bias, d_out, d_res, d_dout, d_dinp, d_dw, d_db};
    for (floatX* p : bufs) cudaCheck(cudaFree(p));
    cudaCheck(cudaFree(d_mean));
    cudaCheck(cudaFree(d_rstd));
    cudaCheck(cudaFree(d_scratch));
}

int main() {
    TestRng rng(3);
    printf("precision %s\n", PRECISION_NAME);
    // The backward's grid (kernels/sizes.h): one block an SM (the runtime's device has 132), fewer
    // for small N (4 rows a block at least); each block as many warps as its 227 KiB hold and it
    // has rows for.
    test_case(1, 40, rng);      // N = 1, C a multiple of 8 but not 32
    test_case(5, 100, rng);     // 128-bit in fp32, scalar in fp16/bf16
    test_case(3, 37, rng);      // odd C: scalar everywhere
    test_case(6, 768, rng);     // GPT-2 small
    test_case(4, 1600, rng);    // GPT-2 XL: one backward block of 4 warps
    test_case(70, 1600, rng);   // ... 18 blocks of 3 or 4 rows (block g from row 70*g/18), 4 warps each
    test_case(2100, 24, rng);   // 132 blocks of 15 or 16 rows (32 warps): 9 reduction groups, the last partial
    test_case(5000, 64, rng);   // 132 blocks of 37 or 38 rows, more than their 32 warps: 2 rows to some
    test_case(2, 30000, rng);   // rows too big for shared memory: the global-memory paths
    return test_finish();
}
