// test_bugs.cu: one deliberately buggy kernel (or host mistake) per class of bug a GPU punishes and
// a CPU would forgive. Each runs in a child process (child.h) and must end it with SIGABRT and the
// runtime's one-line message naming the kernel and the kind of bug. Plain CUDA: it compiles with
// nvcc too (test_nvcc_compile.sh), though on a GPU most of these are silent or undefined.
#include <assert.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "cuda_cpu/child.h"
#include "test.h"

#define CK(call)                                                                                      \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
            exit(3);                                                                                  \
        }                                                                                             \
    } while (0)

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

struct Case {
    const char* name;
    std::vector<std::string> env;
    const char* kernel;  // must appear in the message ("" for host-side cases)
    const char* what;    // and so must this
};

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) return run_case(argv[2]);
    const std::vector<Case> cases = {
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
    };
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
    return test_finish();
}
