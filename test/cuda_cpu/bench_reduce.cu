// bench_reduce.cu: launch times of three kernel shapes, 64 blocks x 256 threads each: a reduction
// (warp shuffles and shared memory), an element-wise kernel (no synchronisation) and a block scan
// (a __syncthreads per step). Prints the median of repeated launches in ms.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#define CK(call)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) { printf("%s: %s\n", #call, cudaGetErrorString(e_)); exit(1); } \
    } while (0)

__global__ void reduce_kernel(const float* x, float* out, int n) {
    __shared__ float partial[32];
    float v = 0.0f;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) v += x[j];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) out[blockIdx.x] = v;
    }
}

__global__ void axpy_kernel(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

__global__ void scan_kernel(const float* x, float* out) {
    __shared__ float buf[2][256];
    int t = threadIdx.x, cur = 0;
    buf[0][t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int off = 1; off < 256; off *= 2) {
        buf[1 - cur][t] = t >= off ? buf[cur][t] + buf[cur][t - off] : buf[cur][t];
        cur = 1 - cur;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + t] = buf[cur][t];
}

template <class F>
static double median_ms(F launch, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    launch();  // warm-up: creates the workers' fibers
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a, 0));
        launch();
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main() {
    const int blocks = 64, threads = 256, n = blocks * threads * 4;
    float *x, *y;
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMemset(x, 0, n * sizeof(float)));
    CK(cudaMemset(y, 0, n * sizeof(float)));
    double r = median_ms([&] { reduce_kernel<<<blocks, threads>>>(x, y, n); }, 20);
    double e = median_ms([&] { axpy_kernel<<<blocks, threads>>>(x, y, 2.0f, blocks * threads); }, 20);
    double s = median_ms([&] { scan_kernel<<<blocks, threads>>>(x, y); }, 20);
    CK(cudaGetLastError());
    printf("reduce (shuffles + smem) 64x256: %.2f ms\n", r);
    printf("elementwise axpy         64x256: %.2f ms\n", e);
    printf("block scan (9 barriers)  64x256: %.2f ms\n", s);
    CK(cudaFree(x));
    CK(cudaFree(y));
    return 0;
}
