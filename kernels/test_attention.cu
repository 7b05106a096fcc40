// test_attention.cu: kernels/attention.cuh (flash-style causal attention) against
// attention_forward_cpu / attention_backward_cpu, and a logsumexp computed here in double: out,
// lse, dq, dk, dv at head sizes 16..128, T at, below and past the 64-row tile (T = 1, 7, 17, 33,
// 64, 100, 130, 200), B and NH > 1; two runs bit-identical; dev/cuda/attention_naive.cuh at one
// shape. Every output buffer starts as NaN (fresh cudaMalloc), so a missed element fails.
// Which kernels: in FP16 and BF16 at head sizes 32 and 64, attention_forward is kernels/flash_fwd.cuh's
// (mma.sync, softmax in registers) and attention_backward kernels/flash_bwd.cuh's (dK, dV key-major, dQ
// query-major), elsewhere the tiled WMMA kernels; the backward reads that forward's out and lse, so out,
// lse, dq, dk, dv check the pair the trainer runs. At HS 64 the tiled forward and backward
// (attention_forward_tiled, attention_backward_tiled) are checked too, in every precision, against
// the same bounds.
//
// Tolerances (test/kernel_check.cuh: inputs rounded to floatX, the reference on the same values,
// k roundings of floatX; FP32 is held to 1e-5). Scores, softmax statistics, lse and D are fp32
// in the kernels, so only these roundings count:
//   out: P rounded to floatX before P V (1) + the output (1)                             k = 2
//   lse: fp32 only (no floatX rounding on its path)                                      1e-5
//        (the flash forward's ex2.approx, 2 ulp, and its fp32 sums stay far inside 1e-5)
//   dv:  P rounded before P^T dO (1) + the output (1)                                    k = 2
//   dk, dq: dS rounded before dS^T Q / dS K (1) + the output (1) + D = rowsum(dout*out)
//        taken from the forward's floatX out, whose ~2 roundings reach dS damped by P (1) k = 3
//   naive out: P rounded to floatX (1) + the per-head output (1); the scores stay fp32   k = 2
// Measured errors sit at 0.2-0.4 of these bounds in FP16 and BF16, below 0.05 of 1e-5 in FP32.
// At T = 1, dq and dk are exactly zero: see check_vanishing.
#include "attention.cuh"
#include "kernel_check.cuh"
#include "ops_cpu.h"
#include "../dev/cuda/attention_naive.cuh"

// q and k at 1.5, v at 1: scaled scores have a spread of ~2.25, so the softmax is neither uniform
// nor one-hot.
static HostTensor random_qkv(int B, int T, int C, TestRng& rng) {
    HostTensor t;
    const size_t n = (size_t)B * T * 3 * C;
    t.x.resize(n);
    t.f.resize(n);
    for (size_t i = 0; i < n; i++) {
        const float s = (int)(i % (3 * (size_t)C)) < 2 * C ? 1.5f : 1.0f;
        t.x[i] = (floatX)(s * rng.normal());
        t.f[i] = (float)t.x[i];
    }
    return t;
}

// lse[b,h,t] = log sum_{j<=t} exp(scale q_t . k_j), in double.
static std::vector<float> reference_lse(const std::vector<float>& qkv, int B, int T, int NH, int HS) {
    const int C = NH * HS;
    const double scale = 1.0 / sqrt((double)HS);
    std::vector<float> lse((size_t)B * NH * T);
    std::vector<double> s(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float* q = &qkv[((size_t)b * T + t) * 3 * C + h * HS];
                double mx = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const float* k = &qkv[((size_t)b * T + j) * 3 * C + C + h * HS];
                    double dot = 0;
                    for (int i = 0; i < HS; i++) dot += (double)q[i] * k[i];
                    s[j] = dot * scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0;
                for (int j = 0; j <= t; j++) sum += exp(s[j] - mx);
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
            }
    return lse;
}

// Columns [part*C, part*C + C) of every (B*T, 3C) row: dq, dk or dv.
static std::vector<float> third(const std::vector<float>& x, int rows, int C, int part) {
    std::vector<float> y((size_t)rows * C);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) y[(size_t)r * C + c] = x[(size_t)r * 3 * C + part * C + c];
    return y;
}

// With one key, dq and dk are exactly zero (dS = 1 * (dP - D), D = dP), so a relative check has
// nothing to scale by. What a kernel can get is the fp32 rounding of dP - D: each element must stay
// within scale * |k_i| (dq) or |q_i| (dk) times 1e-5 (the fp32 bound) of sum_i |dout_i v_i|.
static void check_vanishing(const char* name, const std::vector<float>& dqkv, const std::vector<float>& qkv,
                            const std::vector<float>& dout, int B, int NH, int HS, int part) {
    const int C = NH * HS;
    const double scale = 1.0 / sqrt((double)HS);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float* row = &qkv[(size_t)b * 3 * C];
            double dot_abs = 0;
            for (int i = 0; i < HS; i++) dot_abs += fabs((double)dout[(size_t)b * C + h * HS + i] * row[2 * C + h * HS + i]);
            for (int i = 0; i < HS; i++) {
                const double other = row[(part == 0 ? C : 0) + h * HS + i];  // dq pairs with k, dk with q
                const double bound = scale * fabs(other) * 1e-5 * dot_abs + 1e-30;
                const double r = fabs((double)dqkv[(size_t)b * 3 * C + part * C + h * HS + i]) / bound;
                worst = r > worst || !(r == r) ? r : worst;
            }
        }
    char why[128];
    snprintf(why, sizeof(why), "an element is %.3g times its fp32 rounding bound", worst);
    test_report(worst <= 1.0, name, why);
}

template <class T>
static bool same_bits(const T* d_a, const T* d_b, size_t n) {
    std::vector<T> a(n), b(n);
    cudaCheck(cudaMemcpy(a.data(), d_a, n * sizeof(T), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(b.data(), d_b, n * sizeof(T), cudaMemcpyDeviceToHost));
    return memcmp(a.data(), b.data(), n * sizeof(T)) == 0;
}

static void test_shape(int B, int T, int NH, int HS, bool determinism, TestRng& rng) {
    const int C = NH * HS;
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    HostTensor qkv = random_qkv(B, T, C, rng);
    HostTensor dout = random_tensor(n_out, rng);

    std::vector<float> ref_out(n_out), att((size_t)B * NH * T * T), ref_dqkv(n_qkv, 0.0f);
    attention_forward_cpu(ref_out.data(), att.data(), qkv.f.data(), B, T, C, NH);
    attention_backward_cpu(ref_dqkv.data(), dout.f.data(), qkv.f.data(), att.data(), B, T, C, NH);  // accumulates into zeros
    std::vector<float> ref_lse = reference_lse(qkv.f, B, T, NH, HS);

    // Fresh device memory is NaN: an element a kernel fails to write fails its check.
    floatX* d_qkv = device_upload(qkv.x);
    floatX* d_dout = device_upload(dout.x);
    floatX* d_out = device_alloc<floatX>(n_out);
    float* d_lse = device_alloc<float>(n_lse);
    floatX* d_dqkv = device_alloc<floatX>(n_qkv);
    float* d_scratch = device_alloc<float>(attention_backward_scratch_floats(B, T, NH, HS));
    attention_forward(d_out, d_lse, d_qkv, B, T, NH, HS, 0);
    attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_lse, B, T, NH, HS, 0);
    cudaCheck(cudaDeviceSynchronize());

    char shape[64], name[160];
    snprintf(shape, sizeof(shape), "B=%d T=%d NH=%d HS=%d", B, T, NH, HS);
    snprintf(name, sizeof(name), "attention_forward out %s", shape);
    check_tensor(name, device_download_float(d_out, n_out), ref_out, floatx_tol(2));
    snprintf(name, sizeof(name), "attention_forward lse %s", shape);
    check_tensor(name, device_download_float(d_lse, n_lse), ref_lse, 1e-5);
    std::vector<float> dqkv = device_download_float(d_dqkv, n_qkv);
    const char* parts[3] = {"dq", "dk", "dv"};
    const double ks[3] = {3, 3, 2};
    for (int part = 0; part < 3; part++) {
        snprintf(name, sizeof(name), "attention_backward %s %s", parts[part], shape);
        if (T == 1 && part < 2) check_vanishing(name, dqkv, qkv.f, dout.f, B, NH, HS, part);
        else check_tensor(name, third(dqkv, B * T, C, part), third(ref_dqkv, B * T, C, part), floatx_tol(ks[part]));
    }

    if (HS == 64) {  // the other kernels at the GPT-2 head size (the trainer's in FP32, a fallback elsewhere)
        floatX* d_out_t = device_alloc<floatX>(n_out);
        float* d_lse_t = device_alloc<float>(n_lse);
        floatX* d_dqkv_t = device_alloc<floatX>(n_qkv);
        float* d_scratch_t = device_alloc<float>(attention_backward_tiled_scratch_floats(B, T, NH));
        attention_forward_tiled(d_out_t, d_lse_t, d_qkv, B, T, NH, HS, 0);
        attention_backward_tiled(d_dqkv_t, d_scratch_t, d_dout, d_qkv, d_out_t, d_lse_t, B, T, NH, HS, 0);
        cudaCheck(cudaDeviceSynchronize());
        snprintf(name, sizeof(name), "attention_forward_tiled out %s", shape);
        check_tensor(name, device_download_float(d_out_t, n_out), ref_out, floatx_tol(2));
        snprintf(name, sizeof(name), "attention_forward_tiled lse %s", shape);
        check_tensor(name, device_download_float(d_lse_t, n_lse), ref_lse, 1e-5);
        std::vector<float> dqkv_t = device_download_float(d_dqkv_t, n_qkv);
        for (int part = 0; part < 3; part++) {
            snprintf(name, sizeof(name), "attention_backward_tiled %s %s", parts[part], shape);
            if (T == 1 && part < 2) check_vanishing(name, dqkv_t, qkv.f, dout.f, B, NH, HS, part);
            else check_tensor(name, third(dqkv_t, B * T, C, part), third(ref_dqkv, B * T, C, part), floatx_tol(ks[part]));
        }
        cudaCheck(cudaFree(d_out_t));
        cudaCheck(cudaFree(d_lse_t));
        cudaCheck(cudaFree(d_dqkv_t));
        cudaCheck(cudaFree(d_scratch_t));
    }

    if (determinism) {
        floatX* d_out2 = device_alloc<floatX>(n_out);
        float* d_lse2 = device_alloc<float>(n_lse);
        floatX* d_dqkv2 = device_alloc<floatX>(n_qkv);
        attention_forward(d_out2, d_lse2, d_qkv, B, T, NH, HS, 0);
        attention_backward(d_dqkv2, d_scratch, d_dout, d_qkv, d_out2, d_lse2, B, T, NH, HS, 0);
        cudaCheck(cudaDeviceSynchronize());
        bool same = same_bits(d_out, d_out2, n_out) && same_bits(d_lse, d_lse2, n_lse) && same_bits(d_dqkv, d_dqkv2, n_qkv);
        snprintf(name, sizeof(name), "attention forward+backward %s: two runs bit-identical", shape);
        test_report(same, name, "out, lse or dqkv differ between two runs");
        cudaCheck(cudaFree(d_out2));
        cudaCheck(cudaFree(d_lse2));
        cudaCheck(cudaFree(d_dqkv2));
    }
    cudaCheck(cudaFree(d_qkv));
    cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_lse));
    cudaCheck(cudaFree(d_dqkv));
    cudaCheck(cudaFree(d_scratch));
}

static void test_naive(int B, int T, int NH, int HS, TestRng& rng) {
    const int C = NH * HS;
    const size_t n_out = (size_t)B * T * C;
    HostTensor qkv = random_qkv(B, T, C, rng);
    std::vector<float> ref_out(n_out), att((size_t)B * NH * T * T);
    attention_forward_cpu(ref_out.data(), att.data(), qkv.f.data(), B, T, C, NH);

    cublasLtHandle_t handle;
    matmul_check(cublasLtCreate(&handle));
    floatX* d_qkv = device_upload(qkv.x);
    floatX* d_out = device_alloc<floatX>(n_out);
    void* d_scratch = device_alloc<char>(attention_naive_scratch_bytes(B, T, NH, HS));
    attention_naive_forward(d_out, d_scratch, d_qkv, B, T, NH, HS, handle, 0);
    cudaCheck(cudaDeviceSynchronize());
    char name[128];
    snprintf(name, sizeof(name), "attention_naive_forward out B=%d T=%d NH=%d HS=%d", B, T, NH, HS);
    check_tensor(name, device_download_float(d_out, n_out), ref_out, floatx_tol(2));
    cudaCheck(cudaFree(d_qkv));
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_scratch));
    matmul_check(cublasLtDestroy(handle));
}

int main() {
    TestRng rng(7);
    printf("precision %s\n", PRECISION_NAME);
    // HS = 64, the GPT-2 head: T of one row, inside one tile, one full tile, past one, two and three tiles.
    test_shape(1, 1, 1, 64, false, rng);
    test_shape(2, 17, 2, 64, false, rng);
    test_shape(1, 64, 2, 64, false, rng);
    test_shape(1, 100, 1, 64, true, rng);
    test_shape(1, 130, 1, 64, false, rng);
    test_shape(1, 200, 2, 64, false, rng);
    // other head sizes
    test_shape(1, 33, 3, 16, false, rng);
    test_shape(2, 7, 1, 32, false, rng);
    test_shape(2, 130, 2, 32, true, rng);  // HS 32 over three tiles (the flash forward in FP16/BF16)
    test_shape(1, 40, 1, 48, false, rng);
    test_shape(1, 50, 1, 80, false, rng);
    test_shape(1, 24, 2, 96, false, rng);
    test_shape(1, 70, 1, 128, false, rng);
    test_naive(2, 40, 2, 32, rng);
    return test_finish();
}
