// samples_shim.h: force-included after cuda_cpu.h when dev/corpus_samples.sh builds NVIDIA's CUDA
// samples through the CPU runtime. It holds device functions of CUDA's math API that nvcc declares
// for every .cu (crt/math_functions.h, under __CUDACC__ only) and the runtime does not provide, so
// the samples build unchanged: mergeSort's kernels call umin.
#ifndef DEV_CORPUS_SAMPLES_SHIM_H
#define DEV_CORPUS_SAMPLES_SHIM_H
__device__ inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
__device__ inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
#endif
