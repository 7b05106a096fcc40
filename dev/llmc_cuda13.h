// llmc_cuda13.h: force-included when the kernel report builds llm.c's train_gpt2.cu through the CPU
// runtime (dev/module.mk, LLMC_DIR). The pinned llm.c was written for CUDA 12, whose cudaMemAdvise
// took a device number; CUDA 13's takes a cudaMemLocation. This overload gives the CUDA 12 form, so
// the same source builds against CUDA 13's headers (llm.c calls it only for its managed-memory
// fallback, which the counted runs never take).
#ifndef DEV_LLMC_CUDA13_H
#define DEV_LLMC_CUDA13_H
#include <cuda_runtime.h>
#if CUDART_VERSION >= 13000
inline cudaError_t cudaMemAdvise(const void* p, size_t n, cudaMemoryAdvise advice, int device) {
    cudaMemLocation where;
    where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device == cudaCpuDeviceId ? 0 : device;
    return cudaMemAdvise(p, n, advice, where);
}
#endif
#endif
