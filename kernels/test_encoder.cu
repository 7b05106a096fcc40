// test_encoder.cu: kernels/encoder.cuh against encoder_forward_cpu and encoder_backward_cpu, with
// tokens drawn from a small range (most repeat), one token dominating (a run long enough to be
// split over a block's warps), token ids needing 1, 2 and 3 radix passes, a large B, T not a multiple
// of the 16 dwpe rows per block, B*T = 1, channel counts that take the 128-bit path and ones that
// take the scalar path, and nonzero initial gradients (+=).
#include "encoder.cuh"
#include "kernel_check.cuh"
#include "ops_cpu.h"

// tokens: V distinct ids; with `dominant` in (0,1), that fraction of positions holds token V-1.
static void test_case(int B, int T, int C, int V, float dominant, TestRng& rng) {
    const int BT = B * T;
    std::vector<int> inp(BT);
    for (int i = 0; i < BT; i++) inp[i] = rng.uniform() < dominant ? V - 1 : rng.below(V);
    HostTensor wte = random_tensor((size_t)V * C, rng);
    HostTensor wpe = random_tensor((size_t)T * C, rng);
    HostTensor dout = random_tensor((size_t)BT * C, rng);
    HostTensor dwte0 = random_tensor((size_t)V * C, rng, 0.5f);  // nonzero: the kernel must add
    HostTensor dwpe0 = random_tensor((size_t)T * C, rng, 0.5f);

    std::vector<float> ref_out((size_t)BT * C);
    encoder_forward_cpu(ref_out.data(), inp.data(), wte.f.data(), wpe.f.data(), B, T, C);
    std::vector<float> ref_dwte = dwte0.f, ref_dwpe = dwpe0.f;
    encoder_backward_cpu(ref_dwte.data(), ref_dwpe.data(), dout.f.data(), inp.data(), B, T, C);

    int* d_inp = device_upload(inp);
    floatX* d_wte = device_upload(wte.x);
    floatX* d_wpe = device_upload(wpe.x);
    floatX* d_out = device_alloc<floatX>((size_t)BT * C);
    floatX* d_dout = device_upload(dout.x);
    floatX* d_dwte = device_upload(dwte0.x);
    floatX* d_dwpe = device_upload(dwpe0.x);

    char name[160];
    const char* path = C % X128 == 0 ? "128-bit" : "scalar";
    encoder_forward(d_out, d_inp, d_wte, d_wpe, B, T, C, 0);
    // One rounding: the fp32 sum of two floatX values stored as floatX.
    snprintf(name, sizeof(name), "encoder_forward B=%d T=%d C=%d (%s) vs encoder_forward_cpu", B, T, C, path);
    check_tensor(name, device_download_float(d_out, (size_t)BT * C), ref_out, floatx_tol(1));

    // The plan, in the engine's caller-owned buffers.
    std::vector<int> plan(encoder_plan_ints(BT));
    std::vector<int64_t> keys(BT);
    int blocks = encoder_backward_plan(plan.data(), keys.data(), inp.data(), BT);
    size_t used = encoder_plan_used_ints(BT, blocks);
    CHECK(used <= plan.size(), "encoder_backward_plan stays within encoder_plan_ints");
    int* d_plan = device_alloc<int>(used);
    cudaCheck(cudaMemcpy(d_plan, plan.data(), used * sizeof(int), cudaMemcpyHostToDevice));

    encoder_backward(d_dwte, d_dwpe, d_dout, d_plan, blocks, B, T, C, 1, 0);
    // One rounding: old value + fp32 sum of the rows, stored once as floatX (the fp32 sum's own
    // order differs from the reference's only by fp32 ulps).
    std::vector<float> got_dwte = device_download_float(d_dwte, (size_t)V * C);
    std::vector<float> got_dwpe = device_download_float(d_dwpe, (size_t)T * C);
    snprintf(name, sizeof(name), "encoder_backward dwte B=%d T=%d C=%d V=%d (%s, %d blocks) vs encoder_backward_cpu",
             B, T, C, V, path, blocks);
    check_tensor(name, got_dwte, ref_dwte, floatx_tol(1));
    snprintf(name, sizeof(name), "encoder_backward dwpe B=%d T=%d C=%d (%s) vs encoder_backward_cpu", B, T, C, path);
    check_tensor(name, got_dwpe, ref_dwpe, floatx_tol(1));

    // Deterministic: the same inputs again give the same bits.
    cudaCheck(cudaMemcpy(d_dwte, dwte0.x.data(), dwte0.x.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_dwpe, dwpe0.x.data(), dwpe0.x.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    encoder_backward(d_dwte, d_dwpe, d_dout, d_plan, blocks, B, T, C, 1, 0);
    bool same = device_download_float(d_dwte, (size_t)V * C) == got_dwte &&
                device_download_float(d_dwpe, (size_t)T * C) == got_dwpe;
    snprintf(name, sizeof(name), "encoder_backward B=%d T=%d C=%d twice: bit-identical", B, T, C);
    CHECK(same, name);

    // accumulate_wpe 0 (a step's first micro-step): dwpe's rows are written, whatever they held
    // (NaN here), with the same bits as adding to zeros; dwte still accumulates.
    {
        std::vector<float> zero_dwte((size_t)V * C, 0.0f), fresh_dwpe((size_t)T * C, 0.0f);
        encoder_backward_cpu(zero_dwte.data(), fresh_dwpe.data(), dout.f.data(), inp.data(), B, T, C);
        cudaCheck(cudaMemcpy(d_dwte, dwte0.x.data(), dwte0.x.size() * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemset(d_dwpe, 0xff, (size_t)T * C * sizeof(floatX)));
        encoder_backward(d_dwte, d_dwpe, d_dout, d_plan, blocks, B, T, C, 0, 0);
        std::vector<float> fresh_got = device_download_float(d_dwpe, (size_t)T * C);
        snprintf(name, sizeof(name), "encoder_backward accumulate_wpe=0 B=%d T=%d C=%d: dwpe overwritten (was NaN)", B, T, C);
        check_tensor(name, fresh_got, fresh_dwpe, floatx_tol(1));
        snprintf(name, sizeof(name), "encoder_backward accumulate_wpe=0 B=%d T=%d C=%d: dwte still accumulated", B, T, C);
        CHECK(device_download_float(d_dwte, (size_t)V * C) == got_dwte, name);
        // Bit for bit what adding to zeros gives.
        cudaCheck(cudaMemset(d_dwpe, 0, (size_t)T * C * sizeof(floatX)));
        encoder_backward(d_dwte, d_dwpe, d_dout, d_plan, blocks, B, T, C, 1, 0);
        snprintf(name, sizeof(name), "encoder_backward accumulate_wpe=0 B=%d T=%d C=%d: the bits of += onto zeros", B, T, C);
        CHECK(device_download_float(d_dwpe, (size_t)T * C) == fresh_got, name);
    }

    cudaCheck(cudaFree(d_inp));
    cudaCheck(cudaFree(d_wte));
    cudaCheck(cudaFree(d_wpe));
    cudaCheck(cudaFree(d_out));
    cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_dwte));
    cudaCheck(cudaFree(d_dwpe));
    cudaCheck(cudaFree(d_plan));
}

int main() {
    TestRng rng(2);
    printf("precision %s\n", PRECISION_NAME);
    test_case(1, 1, 40, 3, 0.0f, rng);      // B*T = 1
    test_case(2, 5, 40, 7, 0.0f, rng);      // repeats; C a multiple of 8, not of 32
    test_case(4, 33, 72, 10, 0.0f, rng);    // T odd, C = 72
    test_case(3, 7, 37, 5, 0.0f, rng);      // C odd: scalar path in every precision
    test_case(2, 9, 100, 6, 0.0f, rng);     // C = 100: 128-bit in fp32, scalar in fp16/bf16
    test_case(4, 64, 40, 50, 0.6f, rng);    // a run of ~150 positions: split over 16 warps
    test_case(80, 3, 24, 4, 0.0f, rng);     // B = 80: long dwpe rows; runs of ~60 around the split size
    test_case(2, 64, 768, 300, 0.3f, rng);  // GPT-2 small width, several channel blocks; ids > 255
    test_case(4, 48, 24, 70000, 0.4f, rng); // ids > 65535: three radix passes in the plan
    return test_finish();
}
