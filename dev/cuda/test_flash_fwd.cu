// test_flash_fwd.cu: kernels/flash_fwd.cuh (FlashAttention-2-style causal forward) and its wgmma twin
// (kernels/flash_wgmma.cuh, where the device runs it), each against a
// double-precision reference computed from the same rounded inputs, in f16 and bf16, head sizes 64
// and 32, for sequence lengths that fill the 64-row tiles exactly or leave the last one partly empty
// (37, 64, 100, 200) and several batch x head counts. Run through the CPU runtime (checked) by make
// test; compiles with nvcc too.
//
// Tolerances, per element, from where the kernel rounds (u = unit roundoff of T: 2^-11 f16, 2^-8
// bf16; A = sum_j P_j |v_j|, the reference's weighted magnitude of the row's values):
//   out: P is rounded to T before P V (relative u on each p_j, while l sums the unrounded p): u A;
//        out is rounded to T: u |out| <= u A; the fp32 scores carry at most
//        ds = (HS + 1) 2^-24 sum_d |q_d k_d| * log2(e)/sqrt(HS) (base-2 units), which moves each
//        p_j / l by a relative 2 ln2 ds at most; ex2.approx (2 ulp) and fp32 sums over at most T keys
//        and the max subtraction: (T + 16) 2^-23 relative. Bound: (2u + 2 ln2 ds + (T+16) 2^-23) A.
//   lse: no rounding to T (l sums the unrounded p): ln2 ds + (T + 16) 2^-23 + 2^-22 |lse|.
// ds is taken as the row's largest over its keys. A wrong fragment index, mask or rescale gives errors
// of the order of A itself, hundreds of times these bounds.
//
// Built once per precision (ENABLE_FP16, ENABLE_BF16: test_flash_fwd_fp16, _bf16), the cases of type
// floatX also run kernels/attention.cuh's tiled forward (attention_forward_tiled, the forward of the
// FP32 build and of the head sizes flash_forward lacks) on the same qkv: it must meet the same bounds
// (its P and out are rounded the same way), and the two kernels' out and lse must differ by at most the
// sum of their bounds, so the backward may read either forward's outputs.
#include <math.h>
#include <stdint.h>

#include <type_traits>
#include <vector>

#include "bound_check.cuh"
#include "flash_fwd.cuh"
#include "flash_wgmma.cuh"
#include "attention.cuh"

// wg: kernels/flash_wgmma.cuh's forward (wgmma) in place of flash_fwd.cuh's (mma.sync).
template <class T, int HS>
static void run(const char* name, int B, int seq, int NH, bool wg) {
    const int C = NH * HS;
    uint32_t s = 7u + 131u * seq + 17u * NH + HS;
    auto rnd = [&]() { s = s * 1664525u + 1013904223u; return (float)(s >> 8) / 8388608.0f - 1.0f; };
    // q and k in [-3, 3] so the softmax is far from uniform (scores of a few units), v in [-1, 1]
    std::vector<T> qkv((size_t)B * seq * 3 * C);
    for (size_t i = 0; i < qkv.size(); i++) qkv[i] = from_f<T>((i % (3 * C) < (size_t)2 * C ? 3.0f : 1.0f) * rnd());
    T *d_qkv, *d_out;
    float* d_lse;
    const size_t n_out = (size_t)B * seq * C, n_lse = (size_t)B * NH * seq;
    CK(cudaMalloc(&d_qkv, qkv.size() * sizeof(T)));
    CK(cudaMalloc(&d_out, n_out * sizeof(T)));
    CK(cudaMalloc(&d_lse, n_lse * sizeof(float)));
    CK(cudaMemcpy(d_qkv, qkv.data(), qkv.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemset(d_out, 0xff, n_out * sizeof(T)));  // NaN in both types: an unwritten element fails
    CK(cudaMemset(d_lse, 0xff, n_lse * sizeof(float)));
    if (wg) flash_forward_wgmma<T, HS>(d_out, d_lse, d_qkv, B, seq, NH, 0);
    else flash_forward<T, HS>(d_out, d_lse, d_qkv, B, seq, NH, 0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<T> out(n_out);
    std::vector<float> lse(n_lse);
    CK(cudaMemcpy(out.data(), d_out, n_out * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse.data(), d_lse, n_lse * sizeof(float), cudaMemcpyDeviceToHost));
    // kernels/attention.cuh's tiled forward on the same input, where it is built for T
    const bool with_att = std::is_same<T, floatX>::value;
    std::vector<T> out_att(with_att ? n_out : 0);
    std::vector<float> lse_att(with_att ? n_lse : 0);
    if constexpr (std::is_same<T, floatX>::value) {
        T* d_out2;
        float* d_lse2;
        CK(cudaMalloc(&d_out2, n_out * sizeof(T)));
        CK(cudaMalloc(&d_lse2, n_lse * sizeof(float)));
        CK(cudaMemset(d_out2, 0xff, n_out * sizeof(T)));
        CK(cudaMemset(d_lse2, 0xff, n_lse * sizeof(float)));
        attention_forward_tiled(d_out2, d_lse2, d_qkv, B, seq, NH, HS, 0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(out_att.data(), d_out2, n_out * sizeof(T), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(lse_att.data(), d_lse2, n_lse * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaFree(d_out2));
        CK(cudaFree(d_lse2));
    }

    const double u = unit_roundoff<T>(), scale = 1.0 / sqrt((double)HS), sl2 = scale / log(2.0);
    double worst_out = 0.0, worst_lse = 0.0, worst_att = 0.0, worst_pair = 0.0;
    std::vector<double> sc(seq), mag(seq);
    auto at = [&](int b, int t, int col) { return (double)to_f(qkv[((size_t)b * seq + t) * 3 * C + col]); };
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < seq; t++) {
                double mx = -INFINITY, ds = 0.0;
                for (int j = 0; j <= t; j++) {
                    double e = 0.0, a = 0.0;
                    for (int d = 0; d < HS; d++) {
                        const double p = at(b, t, h * HS + d) * at(b, j, C + h * HS + d);
                        e += p;
                        a += fabs(p);
                    }
                    sc[j] = e * scale;
                    mx = fmax(mx, sc[j]);
                    ds = fmax(ds, (HS + 1) * ldexp(a, -24) * sl2);
                }
                double sum = 0.0;
                for (int j = 0; j <= t; j++) sum += (mag[j] = exp(sc[j] - mx));
                const double ref_lse = mx + log(sum);
                const double fp32 = (seq + 16) * ldexp(1.0, -23);
                const double got_lse = lse[((size_t)b * NH + h) * seq + t];
                const double tol_lse = log(2.0) * ds + fp32 + ldexp(fabs(ref_lse), -22);
                keep_worst(worst_lse, fabs(got_lse - ref_lse) / tol_lse);
                if (with_att) {
                    const double att_lse = lse_att[((size_t)b * NH + h) * seq + t];
                    keep_worst(worst_att, fabs(att_lse - ref_lse) / tol_lse);
                    keep_worst(worst_pair, fabs(att_lse - got_lse) / (2 * tol_lse));
                }
                for (int d = 0; d < HS; d++) {
                    double ref = 0.0, A = 0.0;
                    for (int j = 0; j <= t; j++) {
                        const double v = at(b, j, 2 * C + h * HS + d), p = mag[j] / sum;
                        ref += p * v;
                        A += p * fabs(v);
                    }
                    const double got = to_f(out[((size_t)b * seq + t) * C + h * HS + d]);
                    const double tol = (2 * u + 2 * log(2.0) * ds + fp32) * A + 1e-30;
                    keep_worst(worst_out, fabs(got - ref) / tol);
                    if (with_att) {
                        const double att = to_f(out_att[((size_t)b * seq + t) * C + h * HS + d]);
                        keep_worst(worst_att, fabs(att - ref) / tol);
                        keep_worst(worst_pair, fabs(att - got) / (2 * tol));
                    }
                }
            }
    check_worst(name, "_out", worst_out, "worst error", "the bound");
    check_worst(name, "_lse", worst_lse, "worst error", "the bound");
    printf("  %s: worst out error %.3f, lse error %.3f of their bounds\n", name, worst_out, worst_lse);
    if (with_att) {
        check_worst(name, "_attention_cuh", worst_att, "kernels/attention.cuh's forward: worst error", "the bound");
        check_worst(name, "_vs_attention_cuh", worst_pair, "flash vs attention.cuh: worst difference",
                    "their bounds' sum");
        printf("  %s: attention.cuh %.3f of the bound, flash vs attention.cuh %.3f of the bounds' sum\n", name,
               worst_att, worst_pair);
    }
    CK(cudaFree(d_qkv));
    CK(cudaFree(d_out));
    CK(cudaFree(d_lse));
}

int main() {
    // the mma.sync forward everywhere; the wgmma one where the device runs it (an H100, or the CPU
    // runtime's default sm_90)
    const bool wg = flash_wgmma_available();
    if (!wg) printf("SKIP flash_fwd_*_wgmma: this device does not run kernels/flash_wgmma.cuh (sm_90a)\n");
    for (int k = 0; k < (wg ? 2 : 1); k++) {
        const char* sfx = k ? "_wgmma" : "";
        char n[96];
        snprintf(n, sizeof(n), "flash_fwd_f16_hs64_T100_B2_NH3%s", sfx); run<__half, 64>(n, 2, 100, 3, k);
        snprintf(n, sizeof(n), "flash_fwd_bf16_hs64_T100_B2_NH3%s", sfx); run<__nv_bfloat16, 64>(n, 2, 100, 3, k);
        snprintf(n, sizeof(n), "flash_fwd_f16_hs64_T37_B1_NH2%s", sfx); run<__half, 64>(n, 1, 37, 2, k);
        snprintf(n, sizeof(n), "flash_fwd_bf16_hs64_T37_B1_NH2%s", sfx); run<__nv_bfloat16, 64>(n, 1, 37, 2, k);
        snprintf(n, sizeof(n), "flash_fwd_f16_hs64_T200_B1_NH1%s", sfx); run<__half, 64>(n, 1, 200, 1, k);
        snprintf(n, sizeof(n), "flash_fwd_bf16_hs64_T64_B3_NH1%s", sfx); run<__nv_bfloat16, 64>(n, 3, 64, 1, k);
        snprintf(n, sizeof(n), "flash_fwd_f16_hs32_T130_B1_NH2%s", sfx); run<__half, 32>(n, 1, 130, 2, k);
        snprintf(n, sizeof(n), "flash_fwd_bf16_hs32_T200_B2_NH1%s", sfx); run<__nv_bfloat16, 32>(n, 2, 200, 1, k);
    }
    return test_finish();
}
