// limit_kernels.cuh: kernels near a GPU's limits, which the runtime's tests launch on both sides of
// them: test_patterns.cu within (they must run), test_bugs.cu beyond (the runtime must stop the run
// naming the kernel).
//   many_registers_kernel: ptxas gives it 134 registers a thread (sm_90): 256 threads fit in a
//     block's 65536 registers, 1024 do not (test/cuda_cpu/README.md, "Launch resources");
//   big_locals_kernel: 160 KiB of locals a thread, legal on a GPU (512 KiB): the runtime's default
//     fiber stack holds them, CUDA_CPU_STACK_KB=128 does not.
// Included as "limit_kernels.cuh" from beside it: the build then finds cu2cpu.pl's rewrite of it
// (with the kernel entry hook that checks registers) before the original, which -Itest would find
// first as "cuda_cpu/limit_kernels.cuh".
#pragma once

__global__ void many_registers_kernel(float* out, const float* in, int n) {
    float acc[64];
#pragma unroll
    for (int k = 0; k < 64; k++) acc[k] = in[k * 16 + threadIdx.x % 16];
    for (int it = 0; it < n; it++) {
#pragma unroll
        for (int k = 0; k < 64; k++) acc[k] = acc[k] * acc[(k + 1) % 64] + in[k];
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 64; k++) s += acc[k] * (float)(k + 1);
    out[threadIdx.x] = s;
}

__global__ void big_locals_kernel(float* out, int n) {
    float local[40 * 1024];
    for (int i = 0; i < 40 * 1024; i++) local[i] = (float)(i % n);
    float s = 0.0f;
    for (int i = threadIdx.x; i < 40 * 1024; i += 97) s += local[i];
    out[threadIdx.x] = s;
}
