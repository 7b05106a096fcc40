// count_attention.cu: the trainer's attention, forward then backward once, at a shape given on the
// command line, for the kernel report's counting (dev/kernel_report.sh runs it under the CPU runtime's
// CUDA_CPU_COUNT at FlashAttention-2's benchmark configuration: head size 64, causal, T = 1024 and
// 2048). Through kernels/attention.cuh's dispatch, so it launches what the trainer launches (the flash
// kernels in FP16 and BF16 at head sizes 32 and 64). Inputs are random and in range; nothing is
// checked here (kernels/test_attention.cu and dev/cuda/test_flash_*.cu do that).
//   usage: count_attention B T NH HS
#include <stdio.h>
#include <stdlib.h>

#include "common.cuh"
#include "attention.cuh"
#include "bench_inputs.cuh"

#include "util.h"

int main(int argc, char** argv) {
    if (argc != 5) fatal("usage: count_attention B T NH HS");
    int B = atoi(argv[1]), T = atoi(argv[2]), NH = atoi(argv[3]), HS = atoi(argv[4]);
    if (B < 1 || T < 1 || NH < 1 || HS < 1) fatal("count_attention: B, T, NH and HS must be positive, got %s %s %s %s",
                                                  argv[1], argv[2], argv[3], argv[4]);
    // Which kernels run, decided first: on an sm_90 that checks the wgmma kernels against mma.sync on a
    // small problem, work the counts below must not include (they start at the mark).
    const char* kernels = attention_kernels_name(HS);
#if defined(CUDA_CPU)
    cuda_cpu_count_mark("attention");
#endif
    size_t C = (size_t)NH * HS, BT = (size_t)B * T;
    floatX* qkv = dalloc<floatX>(BT * 3 * C);
    floatX* out = dalloc<floatX>(BT * C);
    floatX* dout = dalloc<floatX>(BT * C);
    floatX* dqkv = dalloc<floatX>(BT * 3 * C);
    float* lse = dalloc<float>((size_t)B * NH * T);
    float* scratch = dalloc<float>(attention_backward_scratch_floats(B, T, NH, HS));
    fill(qkv, BT * 3 * C, 1.0f, 1);
    fill(dout, BT * C, 1.0f, 2);
    attention_forward(out, lse, qkv, B, T, NH, HS, 0);
    attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, NH, HS, 0);
    cudaCheck(cudaDeviceSynchronize());
    printf("count_attention: B=%d T=%d NH=%d HS=%d %s: forward and backward ran (%s)\n", B, T, NH, HS, PRECISION_NAME,
           kernels);
    return 0;
}
