// test_flash_bwd.cu: kernels/flash_bwd.cuh (FlashAttention-2-style causal backward, the trainer's in
// FP16/BF16 at head sizes 32 and 64) and its wgmma twin (kernels/flash_wgmma.cuh, where the device runs
// it), each against a double-precision reference computed from the same
// rounded inputs, and against kernels/attention.cuh's tiled backward (attention_backward_tiled, the
// trainer's elsewhere), in the build's precision (floatX: test_flash_bwd_fp16 or _bf16), head sizes 64 and 32, for
// sequence lengths that leave the last 64-row tile partly empty (37, 100, 130, 200) or fill it (64),
// and several batch x head counts; then a repeat of the same call must give bit-identical dqkv
// (determinism: no float atomics). Run through the CPU runtime (checked); compiles with nvcc too.
//
// Inputs: qkv and dout rounded to T; out and lse from kernels/flash_fwd.cuh's forward on them. The
// reference takes out and lse as given: P = exp(scale q.k - lse), D = sum_d dO_d out_d, dP = dO . v,
// dS = P (dP - D), dV = sum_q P dO, dK = scale sum_q dS q, dQ = scale sum_k dS k, all in double, so
// only the kernel's own rounding separates the two. Tolerances, per element, from where the kernel
// rounds (u = unit roundoff of T: 2^-11 f16, 2^-8 bf16; e = 2^-24, fp32's):
//   P: the fp32 score carries ds = (HS + 1) e sum_d |q_d k_d| sl2 (base-2 units, sl2 = scale log2 e),
//      the fp32 products and subtraction x = s sl2 - lse log2 e about 4 e (|s sl2| + |lse log2 e|),
//      ex2.approx 2 ulp: relative dp = ln2 (ds + 4 e (|s sl2| + |L|)) + 4 e.
//   Rounding x to T errs by at most u |x| + eta, eta = half the subnormal spacing (2^-25 f16, 2^-134
//   bf16): P and dS of distant keys are tiny, and f16's subnormals begin at 2^-14.
//   dV = sum_q round(P) dO in fp32 over at most T terms, rounded to T:
//      |err| <= (dp + u + (T + 2) e) sum_q P |dO| + eta sum_q |dO| + u |dV| + eta.
//   dS: dP and D are fp32 sums of HS products of T inputs: (HS + 1) e (sum |dO v| + sum |dO out|);
//      with P's error and the product's, then rounded to T for the products:
//      E_dS = P (|dP - D| (dp + u + 2 e) + (1 + dp)(HS + 1) e (sum |dO v| + sum |dO out|)) + eta.
//   dK = scale sum_q round(dS) q (fp32, at most T terms; dQ = scale sum_k round(dS) k likewise, one
//      fp32 accumulation over at most T keys), rounded to T:
//      |err| <= scale (sum_q E_dS |q| + (T + 2) e sum_q |dS| |q|) + u |dK| + eta; dQ likewise with k.
// A wrong fragment index, mask, lse or D gives errors of the order of the sums themselves, hundreds
// of times these bounds. kernels/attention.cuh's tiled backward rounds at the same points (P and dS to T,
// exp2f instead of ex2.approx), so it must meet the same bounds, and the two may differ by at most
// the sum of their bounds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "attention.cuh"
#include "cuda_test.h"
#include "flash_bwd.cuh"
#include "flash_fwd.cuh"
#include "flash_wgmma.cuh"
#include "test.h"

#if defined(ENABLE_FP32)
#error "test_flash_bwd needs the FP16 or BF16 build (mma.sync has no fp32 inputs)"
#endif

typedef floatX T;
static float to_f(T h) { return (float)h; }
static T from_f(float v) { return (T)v; }
// U: unit roundoff; ETA: the absolute error of rounding into T's subnormal range (half its spacing):
// P and dS of far-off keys are tiny, and f16's subnormals start at 2^-14.
#if defined(ENABLE_BF16)
static const double U = 1.0 / 256.0, ETA = 0x1p-134;
#else
static const double U = 1.0 / 2048.0, ETA = 0x1p-25;
#endif

// wg: kernels/flash_wgmma.cuh's kernels (the forward and backward on wgmma) in place of the mma.sync ones.
template <int HS>
static void run(const char* name, int B, int seq, int NH, bool wg) {
    const int C = NH * HS;
    uint32_t s = 11u + 131u * seq + 17u * NH + HS + 1000u * B;
    auto rnd = [&]() { s = s * 1664525u + 1013904223u; return (float)(s >> 8) / 8388608.0f - 1.0f; };
    // q and k in [-3, 3] (a peaked softmax), v and dout in [-1, 1]
    std::vector<T> qkv((size_t)B * seq * 3 * C), dout((size_t)B * seq * C);
    for (size_t i = 0; i < qkv.size(); i++) qkv[i] = from_f((i % (3 * C) < (size_t)2 * C ? 3.0f : 1.0f) * rnd());
    for (size_t i = 0; i < dout.size(); i++) dout[i] = from_f(rnd());
    const size_t n_qkv = qkv.size(), n_out = dout.size(), n_lse = (size_t)B * NH * seq;
    const size_t n_part = flash_backward_scratch_floats(B, seq, NH, HS);
    T *d_qkv, *d_out, *d_dout, *d_dqkv, *d_dqkv2;
    float *d_lse, *d_part, *d_scratch;
    CK(cudaMalloc(&d_qkv, n_qkv * sizeof(T)));
    CK(cudaMalloc(&d_dqkv, n_qkv * sizeof(T)));
    CK(cudaMalloc(&d_dqkv2, n_qkv * sizeof(T)));
    CK(cudaMalloc(&d_out, n_out * sizeof(T)));
    CK(cudaMalloc(&d_dout, n_out * sizeof(T)));
    CK(cudaMalloc(&d_lse, n_lse * sizeof(float)));
    CK(cudaMalloc(&d_part, n_part * sizeof(float)));
    CK(cudaMalloc(&d_scratch, attention_backward_tiled_scratch_floats(B, seq, NH) * sizeof(float)));
    CK(cudaMemcpy(d_qkv, qkv.data(), n_qkv * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_dout, dout.data(), n_out * sizeof(T), cudaMemcpyHostToDevice));
    if (wg) flash_forward_wgmma<T, HS>(d_out, d_lse, d_qkv, B, seq, NH, 0);
    else flash_forward<T, HS>(d_out, d_lse, d_qkv, B, seq, NH, 0);
    CK(cudaGetLastError());
    // NaN in both types: an element left unwritten fails
    CK(cudaMemset(d_dqkv, 0xff, n_qkv * sizeof(T)));
    CK(cudaMemset(d_part, 0xff, n_part * sizeof(float)));
    if (wg) flash_backward_wgmma<T, HS>(d_dqkv, d_part, d_dout, d_qkv, d_out, d_lse, B, seq, NH, 0);
    else flash_backward<T, HS>(d_dqkv, d_part, d_dout, d_qkv, d_out, d_lse, B, seq, NH, 0);
    CK(cudaGetLastError());
    CK(cudaMemset(d_dqkv2, 0xff, n_qkv * sizeof(T)));
    attention_backward_tiled(d_dqkv2, d_scratch, d_dout, d_qkv, d_out, d_lse, B, seq, NH, HS, 0);
    CK(cudaDeviceSynchronize());
    std::vector<T> out(n_out), dg(n_qkv), da(n_qkv), dg2(n_qkv);
    std::vector<float> lse(n_lse);
    CK(cudaMemcpy(out.data(), d_out, n_out * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse.data(), d_lse, n_lse * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(dg.data(), d_dqkv, n_qkv * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(da.data(), d_dqkv2, n_qkv * sizeof(T), cudaMemcpyDeviceToHost));
    // the repeat, into a dqkv and scratch refilled with NaN
    CK(cudaMemset(d_dqkv, 0xff, n_qkv * sizeof(T)));
    CK(cudaMemset(d_part, 0xff, n_part * sizeof(float)));
    if (wg) flash_backward_wgmma<T, HS>(d_dqkv, d_part, d_dout, d_qkv, d_out, d_lse, B, seq, NH, 0);
    else flash_backward<T, HS>(d_dqkv, d_part, d_dout, d_qkv, d_out, d_lse, B, seq, NH, 0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(dg2.data(), d_dqkv, n_qkv * sizeof(T), cudaMemcpyDeviceToHost));

    const double e = ldexp(1.0, -24), scale = 1.0 / sqrt((double)HS), sl2 = scale / log(2.0);
    const double LOG2E = 1.0 / log(2.0);
    auto qv = [&](int b, int t, int col) { return (double)to_f(qkv[((size_t)b * seq + t) * 3 * C + col]); };
    auto dov = [&](int b, int t, int col) { return (double)to_f(dout[((size_t)b * seq + t) * C + col]); };
    auto ov = [&](int b, int t, int col) { return (double)to_f(out[((size_t)b * seq + t) * C + col]); };
    // per (b, h): P, its relative error bound, dS, E_dS as seq x seq (query, key)
    std::vector<double> P((size_t)seq * seq), PR((size_t)seq * seq), dS((size_t)seq * seq), EdS((size_t)seq * seq);
    double worst[3] = {0, 0, 0}, worst_att[3] = {0, 0, 0}, worst_pair[3] = {0, 0, 0};
    auto keep = [](double& w, double x) { if (!(x <= w)) w = isnan(x) ? INFINITY : x; };
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int qc = h * HS, kc = C + h * HS, vc = 2 * C + h * HS;
            for (int q = 0; q < seq; q++) {
                const double L = lse[((size_t)b * NH + h) * seq + q];
                double D = 0.0, Da = 0.0;
                for (int d = 0; d < HS; d++) {
                    D += dov(b, q, qc + d) * ov(b, q, qc + d);
                    Da += fabs(dov(b, q, qc + d) * ov(b, q, qc + d));
                }
                for (int k = 0; k < seq; k++) {
                    const size_t i = (size_t)q * seq + k;
                    P[i] = PR[i] = dS[i] = EdS[i] = 0.0;
                    if (k > q) continue;
                    double sc = 0.0, sa = 0.0, dp = 0.0, dpa = 0.0;
                    for (int d = 0; d < HS; d++) {
                        sc += qv(b, q, qc + d) * qv(b, k, kc + d);
                        sa += fabs(qv(b, q, qc + d) * qv(b, k, kc + d));
                        dp += dov(b, q, qc + d) * qv(b, k, vc + d);
                        dpa += fabs(dov(b, q, qc + d) * qv(b, k, vc + d));
                    }
                    const double p = exp(sc * scale - L);
                    const double ds = (HS + 1) * e * sa * sl2;
                    const double dp_rel = log(2.0) * (ds + 4 * e * (fabs(sc * sl2) + fabs(L * LOG2E))) + 4 * e;
                    P[i] = p;
                    PR[i] = dp_rel;
                    dS[i] = p * (dp - D);
                    EdS[i] = p * (fabs(dp - D) * (dp_rel + U + 2 * e) + (1 + dp_rel) * (HS + 1) * e * (dpa + Da)) + ETA;
                }
            }
            // dV[k][d], dK[k][d]
            for (int k = 0; k < seq; k++)
                for (int d = 0; d < HS; d++) {
                    double rv = 0, av = 0, rk = 0, ak = 0, ek = 0, pmax_rel = 0, oa = 0;
                    for (int q = k; q < seq; q++) {
                        const size_t i = (size_t)q * seq + k;
                        rv += P[i] * dov(b, q, qc + d);
                        av += P[i] * fabs(dov(b, q, qc + d));
                        oa += fabs(dov(b, q, qc + d));
                        rk += dS[i] * qv(b, q, qc + d);
                        ak += fabs(dS[i] * qv(b, q, qc + d));
                        ek += EdS[i] * fabs(qv(b, q, qc + d));
                        pmax_rel = fmax(pmax_rel, PR[i]);  // P's relative error, its worst over the column
                    }
                    rk *= scale;
                    const double tol_v = (pmax_rel + U + (seq + 2) * e) * av + ETA * oa + U * fabs(rv) + ETA;
                    const double tol_k = scale * (ek + (seq + 2) * e * ak) + U * fabs(rk) + ETA;
                    const size_t row = ((size_t)b * seq + k) * 3 * C;
                    const double gk = to_f(dg[row + kc + d]), gv = to_f(dg[row + vc + d]);
                    const double xk = to_f(da[row + kc + d]), xv = to_f(da[row + vc + d]);
                    keep(worst[1], fabs(gk - rk) / tol_k);
                    keep(worst[2], fabs(gv - rv) / tol_v);
                    keep(worst_att[1], fabs(xk - rk) / tol_k);
                    keep(worst_att[2], fabs(xv - rv) / tol_v);
                    keep(worst_pair[1], fabs(xk - gk) / (2 * tol_k));
                    keep(worst_pair[2], fabs(xv - gv) / (2 * tol_v));
                }
            // dQ[q][d]
            for (int q = 0; q < seq; q++)
                for (int d = 0; d < HS; d++) {
                    double r = 0, a = 0, ee = 0;
                    for (int k = 0; k <= q; k++) {
                        const size_t i = (size_t)q * seq + k;
                        r += dS[i] * qv(b, k, kc + d);
                        a += fabs(dS[i] * qv(b, k, kc + d));
                        ee += EdS[i] * fabs(qv(b, k, kc + d));
                    }
                    r *= scale;
                    const double tol = scale * (ee + (seq + 2) * e * a) + U * fabs(r) + ETA;
                    const size_t row = ((size_t)b * seq + q) * 3 * C;
                    const double g = to_f(dg[row + qc + d]), x = to_f(da[row + qc + d]);
                    keep(worst[0], fabs(g - r) / tol);
                    keep(worst_att[0], fabs(x - r) / tol);
                    keep(worst_pair[0], fabs(x - g) / (2 * tol));
                }
        }
    const char* part[3] = {"dq", "dk", "dv"};
    char n[128], why[160];
    for (int p = 0; p < 3; p++) {
        snprintf(n, sizeof(n), "%s_%s", name, part[p]);
        snprintf(why, sizeof(why), "worst error %.3g times the bound", worst[p]);
        test_report(worst[p] <= 1.0, n, why);
        snprintf(n, sizeof(n), "%s_%s_attention_cuh", name, part[p]);
        snprintf(why, sizeof(why), "kernels/attention.cuh's tiled backward: worst error %.3g times the bound", worst_att[p]);
        test_report(worst_att[p] <= 1.0, n, why);
        snprintf(n, sizeof(n), "%s_%s_vs_attention_cuh", name, part[p]);
        snprintf(why, sizeof(why), "flash vs attention.cuh's tiled backward: worst difference %.3g times their bounds' sum", worst_pair[p]);
        test_report(worst_pair[p] <= 1.0, n, why);
        printf("  %s %s: flash %.3f, attention.cuh %.3f of the bound; difference %.3f of the bounds' sum\n", name,
               part[p], worst[p], worst_att[p], worst_pair[p]);
    }
    snprintf(n, sizeof(n), "%s_repeat_bit_identical", name);
    test_report(memcmp(dg.data(), dg2.data(), n_qkv * sizeof(T)) == 0, n, "a second run gave different bits");
    CK(cudaFree(d_qkv));
    CK(cudaFree(d_dqkv));
    CK(cudaFree(d_dqkv2));
    CK(cudaFree(d_out));
    CK(cudaFree(d_dout));
    CK(cudaFree(d_lse));
    CK(cudaFree(d_part));
    CK(cudaFree(d_scratch));
}

int main() {
    // the mma.sync kernels everywhere; the wgmma ones where the device runs them (an H100, or the CPU
    // runtime's default sm_90)
    const bool wg = flash_wgmma_available();
    if (!wg) printf("SKIP flash_bwd_*_wgmma: this device does not run kernels/flash_wgmma.cuh (sm_90a)\n");
    for (int k = 0; k < (wg ? 2 : 1); k++) {
        const char* sfx = k ? "_wgmma" : "";
        char n[96];
        snprintf(n, sizeof(n), "flash_bwd_hs64_T100_B2_NH3%s", sfx); run<64>(n, 2, 100, 3, k);
        snprintf(n, sizeof(n), "flash_bwd_hs64_T37_B1_NH2%s", sfx); run<64>(n, 1, 37, 2, k);
        snprintf(n, sizeof(n), "flash_bwd_hs64_T200_B1_NH1%s", sfx); run<64>(n, 1, 200, 1, k);
        snprintf(n, sizeof(n), "flash_bwd_hs64_T64_B2_NH1%s", sfx); run<64>(n, 2, 64, 1, k);
        snprintf(n, sizeof(n), "flash_bwd_hs32_T130_B1_NH2%s", sfx); run<32>(n, 1, 130, 2, k);
    }
    return test_finish();
}
