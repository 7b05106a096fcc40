// bench_kernels.cu: times every kernel family of kernels/ at a GPT-2 size, and the flash attention
// against the three-kernel attention that stores the T x T matrix (dev/cuda/attention_naive.cuh).
// Each kernel: warm-up launches, then the median of the timed ones (CUDA events). Memory-bound
// kernels print GB/s (bytes each must move at least) against the device's measured copy
// bandwidth; matrix products and attention print TFLOP/s against the dense fp16/bf16 peak.
//   usage: bench_kernels [MODEL B T [ITERS]]     default d12 4 1024 20; MODEL: d1..d6, d12, d24, d36, d48
// Inputs are random and in range; no result is checked here (the kernel tests do that).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "common.cuh"
#include "adamw.cuh"
#include "attention.cuh"
#include "attention_naive.cuh"
#include "bench_inputs.cuh"
#include "classifier.cuh"
#include "encoder.cuh"
#include "gelu.cuh"
#include "global_norm.cuh"
#include "layernorm.cuh"
#include "matmul.cuh"

#include "gpt2_config.h"
#include "util.h"

static int g_iters = 20;
static double g_copy_gbs = 0, g_peak_tflops = 0;

// Median milliseconds of g_iters runs of fn, after 2 warm-up runs.
template <class F>
static double time_ms(F fn) {
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int i = 0; i < 2; i++) fn();
    std::vector<float> ms(g_iters);
    for (int i = 0; i < g_iters; i++) {
        cudaCheck(cudaEventRecord(a, 0));
        fn();
        cudaCheck(cudaEventRecord(b, 0));
        cudaCheck(cudaEventSynchronize(b));
        cudaCheck(cudaEventElapsedTime(&ms[i], a, b));
    }
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[g_iters / 2];
}

static void row_bytes(const char* name, double ms, double bytes) {
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("| %-34s | %9.4f | %9.1f GB/s | %5.1f%% of copy |\n", name, ms, gbs, g_copy_gbs > 0 ? 100 * gbs / g_copy_gbs : 0.0);
}
static void row_flops(const char* name, double ms, double flops) {
    double tf = flops / (ms * 1e-3) / 1e12;
    if (g_peak_tflops > 0) printf("| %-34s | %9.4f | %9.1f TFLOP/s | %5.1f%% of peak |\n", name, ms, tf, 100 * tf / g_peak_tflops);
    else printf("| %-34s | %9.4f | %9.3f TFLOP/s | peak unknown |\n", name, ms, tf);
}

// Dense fp16/bf16 tensor-core peak (fp32: CUDA cores) of the cards we know; 0 = unknown.
static double peak_tflops(const cudaDeviceProp* p) {
    int cc = p->major * 10 + p->minor, lowp = sizeof(floatX) == 2;
    int pcie = strstr(p->name, "PCIe") != NULL;
    if (cc == 90) return lowp ? (pcie ? 756 : 989.4) : (pcie ? 51.2 : 66.9);
    if (cc == 80) return lowp ? 312 : 19.5;
    return 0;
}

int main(int argc, char** argv) {
    const char* model = argc > 1 ? argv[1] : "d12";
    int B = argc > 2 ? atoi(argv[2]) : 4, T = argc > 3 ? atoi(argv[3]) : 1024;
    if (argc > 4) g_iters = atoi(argv[4]);
    GPT2Config cfg;
    if (!gpt2_config_from_descriptor(model, T > 1024 ? T : 1024, &cfg)) fatal("bench_kernels: unknown model '%s'", model);
    if (B < 1 || T < 1 || g_iters < 1) fatal("bench_kernels: B, T and ITERS must be positive");
    int C = cfg.channels, NH = cfg.num_heads, HS = C / NH, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    int BT = B * T;
    size_t X = sizeof(floatX);

    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    g_peak_tflops = peak_tflops(&prop);
    printf("device: %s (sm_%d%d) | %s | %s B=%d T=%d C=%d NH=%d | median of %d runs\n", prop.name, prop.major,
           prop.minor, PRECISION_NAME, model, B, T, C, NH, g_iters);

    // The device's copy bandwidth: what a memory-bound kernel can hope for (read + write counted).
    size_t copy_bytes = (size_t)BT * 4 * C * X;
    char* c0 = dalloc<char>(copy_bytes);
    char* c1 = dalloc<char>(copy_bytes);
    double copy_ms = time_ms([&] { cudaCheck(cudaMemcpyAsync(c1, c0, copy_bytes, cudaMemcpyDeviceToDevice, 0)); });
    g_copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
    printf("copy bandwidth (cudaMemcpy device to device, %.0f MiB): %.1f GB/s | dense peak: %.1f TFLOP/s\n\n",
           copy_bytes / 1048576.0, g_copy_gbs, g_peak_tflops);
    printf("| %-34s | %9s | %-14s | %-14s |\n|---|---:|---:|---:|\n", "kernel", "ms", "throughput", "share");

    // One layer's worth of buffers.
    floatX* wte = dalloc<floatX>((size_t)Vp * C);
    floatX* wpe = dalloc<floatX>((size_t)cfg.max_seq_len * C);
    floatX* w = dalloc<floatX>((size_t)4 * C * C);
    floatX* dw = dalloc<floatX>((size_t)4 * C * C);
    floatX* bias = dalloc<floatX>(4 * C);
    floatX* a = dalloc<floatX>((size_t)BT * C);
    floatX* b = dalloc<floatX>((size_t)BT * C);
    floatX* res = dalloc<floatX>((size_t)BT * C);
    floatX* big = dalloc<floatX>((size_t)BT * 4 * C);
    floatX* big2 = dalloc<floatX>((size_t)BT * 4 * C);
    floatX* qkv = dalloc<floatX>((size_t)BT * 3 * C);
    floatX* dqkv = dalloc<floatX>((size_t)BT * 3 * C);
    floatX* logits = dalloc<floatX>((size_t)BT * Vp);
    float* mean = dalloc<float>(BT);
    float* rstd = dalloc<float>(BT);
    float* lse = dalloc<float>((size_t)B * NH * T);
    float* losses = dalloc<float>(BT);
    float* acc = dalloc<float>(4);
    int* inp = dalloc<int>(BT);
    fill(wte, (size_t)Vp * C, 0.02f, 1);
    fill(wpe, (size_t)cfg.max_seq_len * C, 0.02f, 2);
    fill(w, (size_t)4 * C * C, 0.02f, 3);
    cudaCheck(cudaMemset(dw, 0, (size_t)4 * C * C * X));
    fill(bias, 4 * C, 0.02f, 4);
    fill(a, (size_t)BT * C, 1.0f, 5);
    fill(b, (size_t)BT * C, 1.0f, 6);
    fill(big, (size_t)BT * 4 * C, 1.0f, 7);
    fill(qkv, (size_t)BT * 3 * C, 1.0f, 8);
    fill(logits, (size_t)BT * Vp, 1.0f, 9);
    std::vector<int> h_inp(BT);
    for (int i = 0; i < BT; i++) h_inp[i] = (int)((i * 7919u) % (unsigned)V);
    cudaCheck(cudaMemcpy(inp, h_inp.data(), BT * sizeof(int), cudaMemcpyHostToDevice));

    // ---- memory-bound kernels ----
    row_bytes("encoder_forward", time_ms([&] { encoder_forward(a, inp, wte, wpe, B, T, C, 0); }), 3.0 * BT * C * X);
    std::vector<int> plan(encoder_plan_ints(BT));
    std::vector<int64_t> keys(BT);
    int plan_blocks = encoder_backward_plan(plan.data(), keys.data(), h_inp.data(), BT);
    int* d_plan = dalloc<int>(plan.size());
    cudaCheck(cudaMemcpy(d_plan, plan.data(), plan.size() * sizeof(int), cudaMemcpyHostToDevice));
    row_bytes("encoder_backward", time_ms([&] { encoder_backward(wte, wpe, a, d_plan, plan_blocks, B, T, C, 1, 0); }),
              3.0 * BT * C * X);
    row_bytes("layernorm_forward", time_ms([&] { layernorm_forward(b, mean, rstd, a, w, bias, BT, C, 0); }),
              2.0 * BT * C * X);
    row_bytes("fused_residual_layernorm_forward",
              time_ms([&] { fused_residual_layernorm_forward(res, b, mean, rstd, a, big, w, bias, BT, C, 0); }),
              4.0 * BT * C * X);
    float* ln_scratch = dalloc<float>(layernorm_backward_scratch_floats(BT, C));
    cudaCheck(cudaMemset(ln_scratch, 0, layernorm_backward_scratch_floats(BT, C) * sizeof(float)));  // its counters
    row_bytes("layernorm_backward",
              time_ms([&] { layernorm_backward(res, w, bias, ln_scratch, b, a, w, mean, rstd, BT, C, 1, 0); }),
              4.0 * BT * C * X);
    row_bytes("gelu_forward", time_ms([&] { gelu_forward(big2, big, (size_t)BT * 4 * C, 0); }), 2.0 * BT * 4 * C * X);
    row_bytes("gelu_backward", time_ms([&] { gelu_backward(big2, big, big2, (size_t)BT * 4 * C, 0); }),
              3.0 * BT * 4 * C * X);
    // The classifier overwrites its logits with their gradient: refill them between runs is not
    // needed for timing (the values stay finite and in range).
    int* targets = inp;
    unsigned* counter = dalloc<unsigned>(1);
    cudaCheck(cudaMemset(counter, 0, sizeof(unsigned)));
    row_bytes("fused_classifier (with dlogits and the mean loss)",
              time_ms([&] { fused_classifier(logits, losses, targets, 1.0f / BT, BT, V, Vp, 1, acc, 1.0f, counter, 0); }),
              2.0 * BT * (double)V * X);

    // AdamW and the norm over one d12-sized block of parameters (or the model, if smaller).
    size_t n = gpt2_param_layout(&cfg).num_parameters;
    if (n > ((size_t)1 << 27)) n = (size_t)1 << 27;
    floatX* p = dalloc<floatX>(n);
    floatX* g = dalloc<floatX>(n);
    float* master = dalloc<float>(3 * n);
    cudaCheck(cudaMemset(master, 0, 3 * n * sizeof(float)));
    fill(p, n, 0.02f, 10);
    fill(g, n, 0.01f, 11);
    float* mst = sizeof(floatX) == 4 ? NULL : master;
    double adam_bytes = (double)n * (2 * X + X + (mst ? 8 : 0) + 16);
    row_bytes("adamw_update", time_ms([&] {
                  adamw_update(p, mst, g, master + n, master + 2 * n, n, 1e-4f, 0.9f, 0.95f, 0.1f, 0.05f, 1e-8f, 0.1f, 1.0f, 0);
              }), adam_bytes);
    float* partials = dalloc<float>(GLOBAL_NORM_SCRATCH_FLOATS);
    cudaCheck(cudaMemset(partials, 0, GLOBAL_NORM_SCRATCH_FLOATS * sizeof(float)));  // the count of blocks done: 0
    row_bytes("global_norm_squared", time_ms([&] { global_norm_squared(acc, partials, g, n, 0); }), (double)n * X);

    // ---- matrix products (cuBLASLt) ----
    void* workspace = dalloc<char>(MATMUL_WORKSPACE_BYTES);
    MatmulContext mm;
    matmul_context_init(&mm, workspace, MATMUL_WORKSPACE_BYTES);
    float* dbias_scratch = dalloc<float>(matmul_dbias_scratch_floats(BT, 4 * C));
    cudaCheck(cudaMemset(dbias_scratch, 0, matmul_dbias_scratch_floats(BT, 4 * C) * sizeof(float)));  // its counters
    row_flops("matmul_forward fc (C -> 4C, bias)",
              time_ms([&] { matmul_forward(&mm, big, NULL, a, w, bias, BT, C, 4 * C, 0); }), 2.0 * BT * C * 4.0 * C);
    if (C % 8 == 0)
        row_flops("matmul_forward fc + GELU epilogue",
                  time_ms([&] { matmul_forward(&mm, big2, big, a, w, bias, BT, C, 4 * C, 0); }), 2.0 * BT * C * 4.0 * C);
    row_flops("matmul_backward fc (dinp, dW, db)",
              time_ms([&] { matmul_backward(&mm, a, dw, bias, dbias_scratch, big, b, w, NULL, BT, C, 4 * C, 1, 0); }),
              4.0 * BT * C * 4.0 * C);
    row_flops("matmul_forward lm head (C -> Vp)",
              time_ms([&] { matmul_forward(&mm, logits, NULL, a, wte, NULL, BT, C, Vp, 0); }), 2.0 * BT * C * (double)Vp);

    // ---- attention: flash vs the three-kernel version ----
    double att_flops = 4.0 * B * NH * (double)T * T * HS / 2;  // QK^T and PV, causal half
    double f_ms = time_ms([&] { attention_forward(b, lse, qkv, B, T, NH, HS, 0); });
    row_flops("attention_forward (flash)", f_ms, att_flops);
    // the WMMA forward attention_forward replaced in FP16/BF16 at head sizes 32 and 64 (still FP32's)
    row_flops("attention_forward_tiled (WMMA)", time_ms([&] { attention_forward_tiled(b, lse, qkv, B, T, NH, HS, 0); }),
              att_flops);
    float* att_scratch = dalloc<float>(attention_backward_scratch_floats(B, T, NH, HS));
    double b_ms = time_ms([&] { attention_backward(dqkv, att_scratch, a, qkv, b, lse, B, T, NH, HS, 0); });
    row_flops("attention_backward (flash)", b_ms, 2.5 * att_flops);
    // the WMMA backward attention_backward replaced in FP16/BF16 at head sizes 32 and 64 (still FP32's)
    float* att_scratch_t = dalloc<float>(attention_backward_tiled_scratch_floats(B, T, NH));
    row_flops("attention_backward_tiled (WMMA)",
              time_ms([&] { attention_backward_tiled(dqkv, att_scratch_t, a, qkv, b, lse, B, T, NH, HS, 0); }),
              2.5 * att_flops);
    row_flops("attention forward+backward (flash)", f_ms + b_ms, 3.5 * att_flops);
#if !defined(ENABLE_FP32)
    // On an sm_90 GPU attention runs kernels/flash_wgmma.cuh's wgmma kernels; the mma.sync ones they
    // replaced there, on the same data, measure what wgmma bought.
    if (flash_wgmma_available() && (HS == 64 || HS == 32)) {
        double fm = time_ms([&] {
            if (HS == 64) flash_forward<floatX, 64>(b, lse, qkv, B, T, NH, 0);
            else flash_forward<floatX, 32>(b, lse, qkv, B, T, NH, 0);
        });
        double bm = time_ms([&] {
            if (HS == 64) flash_backward<floatX, 64>(dqkv, att_scratch, a, qkv, b, lse, B, T, NH, 0);
            else flash_backward<floatX, 32>(dqkv, att_scratch, a, qkv, b, lse, B, T, NH, 0);
        });
        row_flops("attention_forward (flash, mma.sync)", fm, att_flops);
        row_flops("attention_backward (flash, mma.sync)", bm, 2.5 * att_flops);
        printf("\nattention runs the wgmma kernels here: forward %.2fx, backward %.2fx the mma.sync kernels' speed\n",
               fm / f_ms, bm / b_ms);
    }
#endif
    void* naive_scratch = dalloc<char>(attention_naive_scratch_bytes(B, T, NH, HS));
    double n_ms = time_ms([&] { attention_naive_forward(b, naive_scratch, qkv, B, T, NH, HS, mm.handle, 0); });
    row_flops("attention_forward (three-kernel)", n_ms, att_flops);
    printf("\nflash attention forward is %.2fx the three-kernel version's speed; the three-kernel version stores "
           "%.1f MiB of scores and probabilities, flash %.1f MiB of logsumexp\n",
           n_ms / f_ms, (double)B * NH * T * T * (4 + X) / 1048576.0, (double)B * NH * T * 4 / 1048576.0);
    matmul_context_destroy(&mm);
    return 0;
}
