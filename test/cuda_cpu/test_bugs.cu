// test_bugs.cu: one deliberately buggy kernel (or host mistake) per class of bug a GPU punishes and
// a CPU would forgive. Each runs in a child process (child.h) and must end it with SIGABRT and the
// runtime's one-line message naming the kernel and the kind of bug. Plain CUDA: it compiles with
// nvcc too (test_nvcc_compile.sh), though on a GPU most of these are silent or undefined.
#include <assert.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#if defined(CUDA_CPU_NCCL)
#include <nccl.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "cuda_cpu/child.h"
#include "limit_kernels.cuh"
#define CK_CHILD_STATUS 3  // a case runs as a child: its parent reads stderr
#include "cuda_test.h"
#include "test.h"

static float* zeros(int n) {
    float* d;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMemset(d, 0, n * sizeof(float)));
    return d;
}

// ---- shared-memory races ----

// Thread 0 writes, the last thread reads: no barrier between. In thread order the writer runs first
// and the result looks right; reversed, the reader sees NaN.
__global__ void bug_missing_barrier_kernel(float* out) {
    __shared__ float s[64];
    if (threadIdx.x == 0) s[0] = 42.0f;
    if (threadIdx.x == blockDim.x - 1) out[0] = s[0];
}

// Lane 0 broadcasts through shared memory, the other lanes read without a __syncwarp.
__global__ void bug_lane0_broadcast_kernel(float* out, const float* in) {
    __shared__ float value;
    if (threadIdx.x % 32 == 0) value = in[0];
    out[threadIdx.x] = value * 2.0f;
}

// A counter in shared memory incremented without an atomic: between two barriers, every thread
// reads and writes the same word.
__global__ void bug_shared_counter_kernel(int* out) {
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    count = count + 1;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = count;
}

// The same on global memory, from several blocks.
__global__ void bug_global_counter_kernel(int* counter) { counter[0] = counter[0] + 1; }

// Every warp stores its own id into one shared word: which one is left depends on the order.
__global__ void bug_write_write_kernel(int* out) {
    __shared__ int owner;
    if (threadIdx.x % 32 == 0) owner = threadIdx.x / 32;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = owner;
}

// ---- bounds ----

__global__ void bug_read_past_end_kernel(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i + 1];  // reads in[n]
}

__global__ void bug_write_past_end_kernel(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = 1.0f;  // writes out[n]
}

// One past the end of the dynamic shared memory the launch asked for (64 floats).
__global__ void bug_dynamic_smem_overrun_kernel(float* out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = dyn[threadIdx.x];
}

// A static shared array indexed by a block larger than it.
__global__ void bug_static_smem_oob_kernel(float* out) {
    __shared__ float buf[32];
    buf[threadIdx.x] = (float)threadIdx.x;  // 64 threads
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x % 32];
}

// ---- initialisation ----

// fmaxf(x, NaN) is x: the NaN poison of never-written memory does not show in the result.
__global__ void bug_uninit_fmaxf_kernel(float* out, const float* in, int n) {
    float m = -1e30f;
    for (int i = 0; i < n; i++) m = fmaxf(m, in[i]);
    out[0] = m;
}

// Read as int, the poison is just -1.
__global__ void bug_uninit_int_kernel(int* out, const int* idx) { out[threadIdx.x] = idx[threadIdx.x] * 2; }

// An accumulator in static shared memory that nobody zeroes (one block: nothing else sets it).
__global__ void bug_uninit_static_smem_kernel(float* out, const float* in) {
    __shared__ float acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 0; i < 4; i++) acc += in[i];
        out[0] = acc;
    }
}

// ---- limits ----

__global__ void __launch_bounds__(128) bug_launch_bounds_kernel(float* out) { out[threadIdx.x] = 1.0f; }

// 40 KiB of static shared memory plus 16 KiB of dynamic: 56 KiB without the attribute.
__global__ void bug_smem_over_48k_kernel(float* out) {
    __shared__ float big[10240];
    extern __shared__ float dyn[];
    big[threadIdx.x] = 1.0f;
    dyn[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = big[threadIdx.x] + dyn[threadIdx.x];
}

// ---- alignment ----

__global__ void bug_misaligned_float4_kernel(float* out, const float* in) {
    float4 v = *reinterpret_cast<const float4*>(in + 1);  // 4 bytes past a 16-byte boundary
    out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

__global__ void bug_misaligned_half2_kernel(float* out, const __half* in) {
    __half2 v = *reinterpret_cast<const __half2*>(in + 1);  // 2 bytes past a 4-byte boundary
    out[threadIdx.x] = __low2float(v) + __high2float(v);
}

// ---- host and device memory mixed up ----

__global__ void bug_host_pointer_kernel(float* out, const float* in) { out[threadIdx.x] = in[threadIdx.x]; }

__global__ void bug_use_after_free_kernel(float* out, const float* freed) { out[threadIdx.x] = 2.0f * freed[threadIdx.x]; }

// ---- hangs and traps ----

// Warp 0 waits for a flag warp 1 sets: a thread here runs until it waits at a barrier, so warp 0
// never lets warp 1 run.
__global__ void bug_spin_wait_kernel(float* out) {
    __shared__ volatile int flag;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    if (threadIdx.x < 32) {
        while (flag == 0) {
        }
    } else if (threadIdx.x == 32) {
        flag = 1;
    }
    out[threadIdx.x] = 1.0f;
}

__global__ void bug_trap_kernel(float* out, int n) {
    if (threadIdx.x == 5) __trap();
    out[threadIdx.x] = (float)n;
}

__global__ void bug_assert_kernel(float* out) {
    assert(threadIdx.x < 8);
    out[threadIdx.x] = 1.0f;
}

// ---- float atomics, registers, __device__ variables, fences, barriers, shuffles, globals ----

// Sums x with float atomics into *sum (the order a GPU applies them in is not promised).
__global__ void atomic_sum_kernel(float* sum, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(sum, x[i]);
}

// The last block to finish reads the atomically built sum and writes what it derives from it: its
// bits depend on the order the additions happened in.
__global__ void bug_atomic_sum_read_kernel(float* out, float* sum, unsigned* done, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(sum, x[i]);
    __threadfence();
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (last && threadIdx.x == 0) out[0] = 1000.0f * atomicAdd(sum, 0.0f);
}

// Too many registers for the block: many_registers_kernel (limit_kernels.cuh) at 1024 threads.

__device__ int bug_counter;
// Every block adds one to a __device__ counter without an atomic.
__global__ void bug_device_var_race_kernel() {
    if (threadIdx.x == 0) bug_counter = bug_counter + 1;
}

// The last block sums the blocks' partials, but nothing publishes them: no __threadfence before the
// atomic that counts finished blocks.
__global__ void bug_unfenced_last_block_kernel(float* out, float* partial, unsigned* done) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = (float)blockIdx.x;
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        float s = 0.0f;
        for (unsigned b = 0; b < gridDim.x; b++) s += partial[b];
        out[0] = s;
    }
}

// Half the block waits at one __syncthreads, the other half at another.
__global__ void bug_barrier_sites_kernel(float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x;
    if (threadIdx.x < 32) {
        __syncthreads();
        out[threadIdx.x] = s[63 - threadIdx.x];
    } else {
        __syncthreads();
        out[threadIdx.x] = s[63 - threadIdx.x] + 1.0f;
    }
}

// A barrier in a loop whose trip count differs between warps, then another barrier.
__global__ void bug_barrier_trip_count_kernel(float* out, int n) {
    __shared__ float s[64];
    s[threadIdx.x] = 0.0f;
    for (int i = 0; i < n + (int)(threadIdx.x / 32); i++) {
        s[threadIdx.x] += 1.0f;
        __syncthreads();
    }
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}

__global__ void bug_shuffle_width_kernel(float* out) {
    float v = (float)threadIdx.x;
    out[threadIdx.x] = __shfl_sync(0xffffffffu, v, 0, 12);  // 12 is not a power of 2
}

// A host global array passed to a kernel (nvcc refuses a kernel that names it; a pointer to it passes).
float bug_host_table[4] = {1.0f, 2.0f, 3.0f, 4.0f};
__global__ void bug_host_global_kernel(float* out, const float* table) { out[threadIdx.x] = table[threadIdx.x % 4]; }

// Locals past the fiber stack: big_locals_kernel (limit_kernels.cuh) under CUDA_CPU_STACK_KB=128.

// ---- streams: work on two streams that nothing orders ----

__global__ void stream_writer_kernel(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + (float)i;
}
__global__ void stream_reader_kernel(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}

// The same two kernels reaching their memory other ways than a pointer argument: through a table of
// pointers in device memory, through a __device__ array, through a struct passed by value. Each
// window's snapshot must hold that memory too, or the second stream order would start from what the
// first left and the two orders would agree.
__global__ void stream_table_writer_kernel(float* const* table, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) table[0][i] = v + (float)i;
}
__global__ void stream_table_reader_kernel(float* const* table, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) table[1][i] = 2.0f * table[0][i];
}
__device__ float stream_dev_x[1024];
__global__ void stream_devvar_writer_kernel(float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) stream_dev_x[i] = v + (float)i;
}
__global__ void stream_devvar_reader_kernel(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * stream_dev_x[i];
}
struct StreamSpan {
    int n;
    float* p;
};
__global__ void stream_struct_writer_kernel(StreamSpan x, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < x.n) x.p[i] = v + (float)i;
}
__global__ void stream_struct_reader_kernel(float* out, StreamSpan x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < x.n) out[i] = 2.0f * x.p[i];
}

// The stream mistakes, each on two streams a and b (b created second) with n floats.
static void stream_case(const std::string& c) {
    const int n = 1024;
    float *x = zeros(n), *y = zeros(n), *h;
    CK(cudaMallocHost(&h, n * sizeof(float)));
    for (int i = 0; i < n; i++) h[i] = (float)i;
    cudaStream_t a, b;
    CK(cudaStreamCreate(&a));
    CK(cudaStreamCreate(&b));
    cudaEvent_t e;
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (c == "stream_no_event") {
        // a writes x, b reads it: no event between them.
        stream_writer_kernel<<<n / 256, 256, 0, a>>>(x, 1.0f, n);
        stream_reader_kernel<<<n / 256, 256, 0, b>>>(y, x, n);
    } else if (c == "stream_pinned_copy_other_stream") {
        // The upload runs on a, the kernel that reads what it uploads on b.
        CK(cudaMemcpyAsync(x, h, n * sizeof(float), cudaMemcpyHostToDevice, a));
        stream_reader_kernel<<<n / 256, 256, 0, b>>>(y, x, n);
    } else if (c == "stream_download_wrong_stream") {
        // The kernel writes y on a; the download of y is issued on b (meant for a).
        stream_reader_kernel<<<n / 256, 256, 0, a>>>(y, x, n);
        CK(cudaMemcpyAsync(h, y, n * sizeof(float), cudaMemcpyDeviceToHost, b));
        CK(cudaStreamSynchronize(b));
        printf("%f\n", h[3]);
    } else if (c == "stream_event_before_kernel") {
        // The event is recorded before the kernel it should follow: b's wait orders nothing.
        CK(cudaEventRecord(e, a));
        stream_writer_kernel<<<n / 256, 256, 0, a>>>(x, 1.0f, n);
        CK(cudaStreamWaitEvent(b, e, 0));
        stream_reader_kernel<<<n / 256, 256, 0, b>>>(y, x, n);
    } else if (c == "stream_memset_wrong_stream") {
        // x is cleared for its next use on b while a's kernels may still write and read it.
        stream_writer_kernel<<<n / 256, 256, 0, a>>>(x, 1.0f, n);
        stream_reader_kernel<<<n / 256, 256, 0, a>>>(y, x, n);
        CK(cudaMemsetAsync(x, 0, n * sizeof(float), b));
    } else if (c == "stream_nonblocking_vs_legacy") {
        // A non-blocking stream is not ordered with the legacy default stream.
        cudaStream_t nb;
        CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
        stream_writer_kernel<<<n / 256, 256>>>(x, 1.0f, n);
        stream_reader_kernel<<<n / 256, 256, 0, nb>>>(y, x, n);
    } else if (c == "stream_pointer_table") {
        // a writes x and b reads it, both through a table of pointers {x, y} in device memory.
        float** table;
        CK(cudaMalloc(&table, 2 * sizeof(float*)));
        float* ptrs[2] = {x, y};
        CK(cudaMemcpy(table, ptrs, sizeof(ptrs), cudaMemcpyHostToDevice));
        stream_table_writer_kernel<<<n / 256, 256, 0, a>>>(table, 1.0f, n);
        stream_table_reader_kernel<<<n / 256, 256, 0, b>>>(table, n);
    } else if (c == "stream_device_variable") {
        // a writes a __device__ array and b reads it, neither given its address.
        CK(cudaMemcpyToSymbol(stream_dev_x, h, n * sizeof(float)));
        stream_devvar_writer_kernel<<<n / 256, 256, 0, a>>>(1.0f, n);
        stream_devvar_reader_kernel<<<n / 256, 256, 0, b>>>(y, n);
    } else if (c == "stream_struct_argument") {
        // a writes x and b reads it, both given x inside a struct passed by value.
        stream_struct_writer_kernel<<<n / 256, 256, 0, a>>>(StreamSpan{n, x}, 1.0f);
        stream_struct_reader_kernel<<<n / 256, 256, 0, b>>>(y, StreamSpan{n, x});
    } else if (c == "stream_managed_host_write") {
        // The host writes managed memory while a kernel that reads it may still run.
        float* m;
        CK(cudaMallocManaged(&m, n * sizeof(float)));
        for (int i = 0; i < n; i++) m[i] = 1.0f;
        stream_reader_kernel<<<n / 256, 256, 0, a>>>(y, m, n);
        m[5] = 2.0f;
        CK(cudaStreamSynchronize(a));
    }
#if defined(CUDA_CPU_NCCL)
    else if (c == "stream_nccl_no_wait") {
        // The all-reduce runs on b (the comm stream); a reads its result without waiting for b.
        ncclComm_t comm;
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        ncclCommInitRank(&comm, 1, id, 0);
        float* z = zeros(n);
        stream_writer_kernel<<<n / 256, 256, 0, a>>>(x, 1.0f, n);
        CK(cudaEventRecord(e, a));
        CK(cudaStreamWaitEvent(b, e, 0));
        ncclAllReduce(x, z, n, ncclFloat32, ncclSum, comm, b);
        stream_reader_kernel<<<n / 256, 256, 0, a>>>(y, z, n);
        CK(cudaDeviceSynchronize());
        ncclCommDestroy(comm);
    }
#endif
    CK(cudaDeviceSynchronize());
}

// ---- the cases ----
static int run_case(const std::string& c) {
    const int n = 64;
    if (c == "missing_barrier") {
        bug_missing_barrier_kernel<<<1, 64>>>(zeros(1));
    } else if (c == "lane0_broadcast") {
        bug_lane0_broadcast_kernel<<<1, 64>>>(zeros(64), zeros(1));
    } else if (c == "shared_counter") {
        int* d;
        CK(cudaMalloc(&d, sizeof(int)));
        bug_shared_counter_kernel<<<1, 64>>>(d);
    } else if (c == "global_counter") {
        int* d;
        CK(cudaMalloc(&d, sizeof(int)));
        CK(cudaMemset(d, 0, sizeof(int)));
        bug_global_counter_kernel<<<4, 32>>>(d);
    } else if (c == "write_write") {
        int* d;
        CK(cudaMalloc(&d, sizeof(int)));
        bug_write_write_kernel<<<1, 128>>>(d);
    } else if (c == "read_past_end") {
        bug_read_past_end_kernel<<<1, n>>>(zeros(n), zeros(n), n);
    } else if (c == "write_past_end") {
        bug_write_past_end_kernel<<<1, n + 1>>>(zeros(n), n);
    } else if (c == "dynamic_smem_overrun") {
        bug_dynamic_smem_overrun_kernel<<<1, 64, 64 * sizeof(float)>>>(zeros(64));
    } else if (c == "static_smem_oob") {
        bug_static_smem_oob_kernel<<<1, 64>>>(zeros(64));
    } else if (c == "uninit_fmaxf") {
        float* in;
        CK(cudaMalloc(&in, n * sizeof(float)));  // never written
        bug_uninit_fmaxf_kernel<<<1, 1>>>(zeros(1), in, n);
    } else if (c == "uninit_int") {
        int *out, *idx;
        CK(cudaMalloc(&out, 32 * sizeof(int)));
        CK(cudaMalloc(&idx, 32 * sizeof(int)));  // never written
        bug_uninit_int_kernel<<<1, 32>>>(out, idx);
    } else if (c == "uninit_static_smem") {
        bug_uninit_static_smem_kernel<<<1, 32>>>(zeros(1), zeros(4));
    } else if (c == "launch_bounds") {
        bug_launch_bounds_kernel<<<1, 256>>>(zeros(256));
    } else if (c == "smem_over_48k") {
        bug_smem_over_48k_kernel<<<1, 64, 16 * 1024>>>(zeros(64));
    } else if (c == "misaligned_float4") {
        bug_misaligned_float4_kernel<<<1, 32>>>(zeros(32), zeros(64));
    } else if (c == "misaligned_half2") {
        __half* h;
        CK(cudaMalloc(&h, 64 * sizeof(__half)));
        CK(cudaMemset(h, 0, 64 * sizeof(__half)));
        bug_misaligned_half2_kernel<<<1, 32>>>(zeros(32), h);
    } else if (c == "host_pointer") {
        std::vector<float> host(64, 1.0f);
        bug_host_pointer_kernel<<<1, 64>>>(zeros(64), host.data());
    } else if (c == "host_deref") {
        float* d = zeros(64);
        printf("%f\n", d[3]);  // compiled code of this file: the checks see the load
    } else if (c == "host_deref_library") {
        float* d = zeros(1024);
        std::vector<float> h(1024);
        volatile size_t bytes = 1024 * sizeof(float);
        memcpy(h.data(), d, bytes);  // libc's memcpy, not instrumented: the page protection faults
    } else if (c == "async_read_early" || c == "async_write_source" || c == "async_write_edge") {
        // Host mistakes with pinned memory and cudaMemcpyAsync: reading a download's destination
        // before synchronizing; overwriting an upload's source while the copy may still run; the
        // same on a partly covered page, found when the copy completes.
        const int n = 4 * 1024;  // floats: four pages
        float *d = zeros(n), *h;
        CK(cudaMallocHost(&h, n * sizeof(float)));
        cudaStream_t s;
        CK(cudaStreamCreate(&s));
        if (c == "async_read_early") {
            CK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
            printf("%f\n", h[2000]);
        } else if (c == "async_write_source") {
            CK(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
            h[2000] = 1.0f;
        } else {
            CK(cudaMemcpyAsync(h + 1, d, 8 * sizeof(float), cudaMemcpyDeviceToHost, s));
            h[3] = 1.0f;
            CK(cudaStreamSynchronize(s));
        }
    } else if (c.compare(0, 7, "stream_") == 0) {
        stream_case(c);
    } else if (c == "atomic_sum" || c == "atomic_sum_read") {
        std::vector<float> h(4096);
        for (int i = 0; i < 4096; i++) h[i] = (float)((i * 7919) % 1000) * (i % 3 ? 1e-3f : 1.0f);
        float *x, *sum, *out;
        unsigned* done;
        CK(cudaMalloc(&x, 4096 * sizeof(float)));
        CK(cudaMemcpy(x, h.data(), 4096 * sizeof(float), cudaMemcpyHostToDevice));
        sum = zeros(1);
        out = zeros(1);
        CK(cudaMalloc(&done, sizeof(unsigned)));
        CK(cudaMemset(done, 0, sizeof(unsigned)));
        float r = 0.0f;
        if (c == "atomic_sum") {
            atomic_sum_kernel<<<16, 256>>>(sum, x, 4096);
            CK(cudaMemcpy(&r, sum, sizeof(float), cudaMemcpyDeviceToHost));
            uint32_t bits;
            memcpy(&bits, &r, 4);
            printf("bits %08x\n", bits);
        } else {
            bug_atomic_sum_read_kernel<<<16, 256>>>(out, sum, done, x, 4096);
        }
    } else if (c == "registers") {
        many_registers_kernel<<<1, 1024>>>(zeros(1024), zeros(1024), 2);
    } else if (c == "device_var_race") {
        bug_device_var_race_kernel<<<4, 32>>>();
    } else if (c == "device_var_host_read") {
        int zero = 0;
        CK(cudaMemcpyToSymbol(bug_counter, &zero, sizeof(int)));
        printf("%d\n", bug_counter);  // the host reads the device variable itself
    } else if (c == "unfenced_last_block") {
        unsigned* done;
        CK(cudaMalloc(&done, sizeof(unsigned)));
        CK(cudaMemset(done, 0, sizeof(unsigned)));
        bug_unfenced_last_block_kernel<<<8, 32>>>(zeros(1), zeros(8), done);
    } else if (c == "barrier_sites") {
        bug_barrier_sites_kernel<<<1, 64>>>(zeros(64));
    } else if (c == "barrier_trip_count") {
        bug_barrier_trip_count_kernel<<<1, 64>>>(zeros(64), 2);
    } else if (c == "shuffle_width") {
        bug_shuffle_width_kernel<<<1, 32>>>(zeros(32));
    } else if (c == "host_global") {
        bug_host_global_kernel<<<1, 32>>>(zeros(32), bug_host_table);
    } else if (c == "big_locals") {
        big_locals_kernel<<<1, 32>>>(zeros(32), 7);
    } else if (c == "memcpy_overlap") {
        float* d = zeros(256);
        cudaError_t e = cudaMemcpy(d + 16, d, 128 * sizeof(float), cudaMemcpyDeviceToDevice);
        if (e != cudaSuccess) abort();  // a program's cudaCheck would stop here
#if defined(CUDA_CPU_NCCL)
    } else if (c == "nccl_overlap") {
        ncclComm_t comm;
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        ncclCommInitRank(&comm, 1, id, 0);
        float* d = zeros(256);
        ncclAllReduce(d, d + 8, 128, ncclFloat32, ncclSum, comm, 0);  // half overlapping
#endif
    } else if (c == "use_after_free") {
        float* d = zeros(64);
        CK(cudaFree(d));
        bug_use_after_free_kernel<<<1, 64>>>(zeros(64), d);
    } else if (c == "spin_wait") {
        bug_spin_wait_kernel<<<1, 64>>>(zeros(64));
    } else if (c == "trap") {
        bug_trap_kernel<<<1, 32>>>(zeros(32), 3);
    } else if (c == "assert") {
        bug_assert_kernel<<<1, 32>>>(zeros(32));
    } else {
        fprintf(stderr, "test_bugs: unknown case %s\n", c.c_str());
        return 2;
    }
    CK(cudaDeviceSynchronize());
    return 0;
}

// Did make record ptxas's registers for the runtime to check (it needs nvcc)?
static bool registers_known() {
#if defined(CUDA_CPU)
    const char* e = getenv("CUDA_CPU_REGISTERS");
    std::string path = e && *e ? e : CUDA_CPU_REGISTERS_FILE;
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return false;
    char line[512];
    bool any = false;
    while (fgets(line, sizeof(line), f)) any |= strstr(line, "many_registers_kernel") != nullptr;
    fclose(f);
    return any;
#else
    return false;
#endif
}

struct Case {
    const char* name;
    std::vector<std::string> env;
    const char* kernel;  // must appear in the message ("" for host-side cases)
    const char* what;    // and so must this
};

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        setenv("OMPI_MCA_opal_signal", "", 0);  // no backtrace banner from OpenMPI after the runtime's line
        return run_case(argv[2]);
    }
    std::vector<Case> cases = {
        {"missing_barrier", {}, "bug_missing_barrier_kernel", "data race on shared memory"},
        {"lane0_broadcast", {}, "bug_lane0_broadcast_kernel", "data race on shared memory"},
        {"shared_counter", {}, "bug_shared_counter_kernel", "data race on shared memory"},
        {"global_counter", {}, "bug_global_counter_kernel", "data race on global memory"},
        {"write_write", {}, "bug_write_write_kernel", "wrote in the same barrier interval, a different value"},
        {"read_past_end", {}, "bug_read_past_end_kernel", "0 bytes past the end of a 256-byte cudaMalloc block"},
        {"write_past_end", {}, "bug_write_past_end_kernel", "writes 4 bytes at device address"},
        {"dynamic_smem_overrun", {}, "bug_dynamic_smem_overrun_kernel", "past the end of the 256 bytes of dynamic shared memory"},
        {"static_smem_oob", {}, "bug_static_smem_oob_kernel", "past the end of static __shared__ 'buf'"},
        {"uninit_fmaxf", {}, "bug_uninit_fmaxf_kernel", "uninitialised device memory"},
        {"uninit_int", {}, "bug_uninit_int_kernel", "uninitialised device memory"},
        {"uninit_static_smem", {}, "bug_uninit_static_smem_kernel", "uninitialised shared memory at shared 'acc'"},
        {"launch_bounds", {}, "bug_launch_bounds_kernel", "__launch_bounds__(128)"},
        {"smem_over_48k", {}, "bug_smem_over_48k_kernel", "exceed the 48 KiB"},
        {"misaligned_float4", {}, "bug_misaligned_float4_kernel", "which needs 16-byte alignment"},
        {"misaligned_half2", {}, "bug_misaligned_half2_kernel", "which needs 4-byte alignment"},
        {"host_pointer", {}, "bug_host_pointer_kernel", "which is host memory"},
        {"host_deref", {}, "", "host code reads 4 bytes of device address"},
        {"host_deref_library", {}, "", "host code reads device address"},
        {"use_after_free", {}, "bug_use_after_free_kernel", "freed (use after cudaFree)"},
        {"async_read_early", {}, "", "host code reads pinned memory"},
        {"async_write_source", {}, "", "host code writes pinned memory"},
        {"async_write_edge", {}, "", "host code wrote pinned memory"},
        {"async_read_early", {"CUDA_CPU_CHECK=0"}, "", "of the destination of a 16384-byte cudaMemcpyAsync device to host not yet synchronized"},
        {"spin_wait", {"CUDA_CPU_WATCHDOG_S=1", "CUDA_CPU_CHECK=0"}, "bug_spin_wait_kernel", "no barrier, warp operation or exit"},
        {"trap", {}, "bug_trap_kernel", "__trap()"},
        {"assert", {}, "bug_assert_kernel", "assertion 'threadIdx.x < 8' failed"},
        // Without the race detector, the schedules alone catch a missing barrier.
        {"missing_barrier", {"CUDA_CPU_CHECK=0"}, "bug_missing_barrier_kernel", "depends on the order threads run in"},
        {"lane0_broadcast", {"CUDA_CPU_CHECK=0"}, "bug_lane0_broadcast_kernel", "depends on the order threads run in"},
        // Without the checks, the guard page after an allocation still stops a write past its end
        // (here the allocation, 256 bytes, ends right at the guard page).
        {"write_past_end", {"CUDA_CPU_CHECK=0"}, "bug_write_past_end_kernel", "0 bytes past the end of a 256-byte"},
        // Six schedules, not the default two: two orders of the 4,096 additions round to the same
        // sum about one time in twenty (the sums spread over a few ulps), six all alike next to never.
        {"atomic_sum_read", {"CUDA_CPU_SCHEDULES=forward,reverse,shuffle:1,shuffle:2,shuffle:3,shuffle:4"},
         "bug_atomic_sum_read_kernel", "the result depends on the order threads run in"},
        {"device_var_race", {}, "bug_device_var_race_kernel", "data race on global memory: this thread reads 4 bytes at __device__ variable 'bug_counter'"},
        {"device_var_host_read", {}, "", "host code reads 4 bytes of the __device__ variable 'bug_counter'"},
        {"unfenced_last_block", {}, "bug_unfenced_last_block_kernel", "blocks of one launch are not ordered"},
        {"barrier_sites", {}, "bug_barrier_sites_kernel", "threads wait at two different __syncthreads"},
        {"barrier_trip_count", {}, "bug_barrier_trip_count_kernel", "threads wait at two different __syncthreads"},
        {"shuffle_width", {}, "bug_shuffle_width_kernel", "__shfl_sync with width 12"},
        {"host_global", {}, "bug_host_global_kernel", "the host global variable 'bug_host_table'"},
        {"big_locals", {"CUDA_CPU_STACK_KB=128"}, "big_locals_kernel", "overflowed its 128 KiB stack"},
        {"memcpy_overlap", {}, "", "overlap; a CUDA copy is a memcpy"},
#if defined(CUDA_CPU_NCCL)
        {"nccl_overlap", {}, "", "ncclAllReduce (rank 0): the send buffer"},
#endif
        // Streams: the happens-before checker names the access and both ops...
        {"stream_no_event", {}, "stream_reader_kernel", "which kernel 'stream_writer_kernel' on stream 1"},
        {"stream_pinned_copy_other_stream", {}, "stream_reader_kernel", "which cudaMemcpyAsync host to device (4096 bytes) on stream 1"},
        {"stream_download_wrong_stream", {}, "", "cudaMemcpyAsync device to host (4096 bytes) on stream 2"},
        {"stream_event_before_kernel", {}, "stream_reader_kernel", "which kernel 'stream_writer_kernel' on stream 1"},
        {"stream_memset_wrong_stream", {}, "kernel 'stream_", "cudaMemsetAsync (4096 bytes) on stream 2"},
        {"stream_nonblocking_vs_legacy", {}, "stream_reader_kernel", "on the legacy default stream"},
        {"stream_managed_host_write", {}, "stream_reader_kernel", "which host code"},
#if defined(CUDA_CPU_NCCL)
        {"stream_nccl_no_wait", {}, "kernel 'stream_reader_kernel' on stream 1", "ncclAllReduce (4096 bytes) on stream 2"},
#endif
        // ... and without it, the two stream orders give different results, and the runtime names the
        // two ops whose order makes the difference.
        {"stream_no_event", {"CUDA_CPU_CHECK=0"}, "", "the result depends on the order of work that nothing orders"},
        {"stream_pinned_copy_other_stream", {"CUDA_CPU_CHECK=0"}, "", "cudaMemcpyAsync host to device (4096 bytes) on stream 1"},
        {"stream_event_before_kernel", {"CUDA_CPU_CHECK=0"}, "", "kernel 'stream_writer_kernel' on stream 1"},
        {"stream_memset_wrong_stream", {"CUDA_CPU_CHECK=0"}, "", "cudaMemsetAsync (4096 bytes) on stream 2"},
        {"stream_nonblocking_vs_legacy", {"CUDA_CPU_CHECK=0"}, "", "kernel 'stream_writer_kernel' on the legacy default stream"},
        {"stream_pointer_table", {"CUDA_CPU_CHECK=0"}, "kernel 'stream_table_writer_kernel' on stream 1", "the result depends on the order"},
        {"stream_device_variable", {"CUDA_CPU_CHECK=0"}, "kernel 'stream_devvar_writer_kernel' on stream 1", "the result depends on the order"},
        {"stream_struct_argument", {"CUDA_CPU_CHECK=0"}, "kernel 'stream_struct_writer_kernel' on stream 1", "the result depends on the order"},
#if defined(CUDA_CPU_NCCL)
        {"stream_nccl_no_wait", {"CUDA_CPU_CHECK=0"}, "", "ncclAllReduce (4096 bytes) on stream 2"},
#endif
    };
    if (registers_known()) cases.push_back({"registers", {}, "many_registers_kernel", "ptxas gives the kernel 134 registers"});
    else printf("SKIP bug_caught_registers: no kernel registers recorded (make writes them with nvcc)\n");
    for (const Case& k : cases) {
        ChildResult r = run_child_case(k.name, k.env);
        std::string label = std::string("bug_caught_") + k.name;
        for (const std::string& e : k.env) label += " " + e;
        bool named = r.err.find(k.kernel) != std::string::npos && r.err.find(k.what) != std::string::npos;
        bool one_line = r.err.find("cuda_cpu: ") != std::string::npos;
        std::string why = std::string(r.aborted() ? "" : "the child did not abort; ") +
                          (named ? "" : std::string("the message lacks '") + k.kernel + "' or '" + k.what + "': ") + r.why();
        test_report(r.aborted() && named && one_line, label.c_str(), why.c_str());
        if (r.aborted() && named) fprintf(stdout, "  %s\n", r.why().c_str());
    }
    // Float atomics: two launches that sum the same numbers give different bits (as they may on a
    // GPU), in one process and in two with different seeds; one seed repeats its bits.
    auto bits_of = [](const std::vector<std::string>& env) {
        ChildResult r = run_child_case("atomic_sum", env);
        size_t at = r.out.find("bits ");
        return at == std::string::npos ? std::string("none: ") + r.why() : r.out.substr(at + 5, 8);
    };
    std::string a = bits_of({"CUDA_CPU_ATOMIC_SEED=1"}), b = bits_of({"CUDA_CPU_ATOMIC_SEED=2"}),
                c = bits_of({"CUDA_CPU_ATOMIC_SEED=1"});
    test_report(a != b && a.size() == 8 && b.size() == 8, "float_atomics_differ_between_runs_with_other_seeds",
                ("bits " + a + " and " + b).c_str());
    test_report(a == c && a.size() == 8, "float_atomics_repeat_with_one_seed", ("bits " + a + " and " + c).c_str());
    printf("  sums of the same 4096 floats: %s (seed 1), %s (seed 2)\n", a.c_str(), b.c_str());
    return test_finish();
}
