// cuda_cpu.h: the device side of CUDA for g++, force-included (-include) ahead of a .cu file that
// test/cuda_cpu/cu2cpu.pl rewrote, so the project's kernels run on the CPU (see README.md).
// CUDA's own headers supply the types and the host paths of half/bfloat16; this file adds what only
// nvcc knows: the built-in index variables, __syncthreads, warp intrinsics, atomics, fast-math and
// load/store intrinsics, dynamic shared memory, WMMA fragments and the kernel launch.
#ifndef CUDA_CPU_H
#define CUDA_CPU_H

#ifndef __cplusplus
#error "cuda_cpu.h is C++: compile the rewritten .cu with g++ -x c++"
#endif
#ifdef __CUDACC__
#error "cuda_cpu.h is for g++ builds; nvcc compiles the same .cu without it"
#endif

// CUDA's headers first: they define __global__ & co. their own way, and some of their structs have
// fields named like the built-ins (blockDim, gridDim, warpSize).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <cublasLt.h>
#include <nccl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tuple>
#include <type_traits>
#include <utility>

#define CUDA_CPU 1

// cu2cpu.pl rewrites each function-scope __shared__ declaration into a cuda_cpu_shared() call (below);
// one it leaves alone (at namespace scope) is one per block as thread_local storage, since a worker
// OS thread runs one block at a time, all of its CUDA threads as fibers on that OS thread.
#undef __shared__
#define __shared__ static thread_local
// cu2cpu.pl turns __launch_bounds__(...) into a cuda_cpu_launch_bounds(...) check at the top of the
// kernel's body, where template arguments are known.
#undef __launch_bounds__
#define __launch_bounds__(...)
// A kernel is a function of its own (never inlined into the launch): the runtime tells which kernel
// runs by its code address (its registers, from ptxas, are looked up by its symbol).
#undef __global__
#define __global__ __attribute__((noinline))
// cu2cpu.pl puts namespace-scope __device__ and __constant__ variables in these sections, which the
// runtime treats as device memory.
#define CUDA_CPU_DEVICE_VAR __attribute__((section("cuda_cpu_dev"), used))
#define CUDA_CPU_DEVICE_CONST __attribute__((section("cuda_cpu_devc"), used))
#ifndef __grid_constant__
#define __grid_constant__
#endif

// ---- built-in variables: per-OS-thread copies that the scheduler sets on every fiber switch ----
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
static constexpr int warpSize = 32;

// The current CUDA thread's linear index in its block (x fastest), kept beside threadIdx.
extern __thread unsigned cuda_cpu_linear_tid;

// ---- runtime entry points (cuda_cpu.cpp) ----
// CONVERGE: lanes meet (WMMA's warp-wide calls) without ordering their memory accesses. MATRIX: the
// same for the PTX-level matrix primitives (mma.sync, ldmatrix), a kind of its own so that a lane at
// one of them and another at WMMA are told apart.
enum cuda_cpu_warp_op {
    CUDA_CPU_WARP_SYNC, CUDA_CPU_WARP_SHFL, CUDA_CPU_WARP_VOTE, CUDA_CPU_WARP_ADD, CUDA_CPU_WARP_MIN,
    CUDA_CPU_WARP_MAX, CUDA_CPU_WARP_UMIN, CUDA_CPU_WARP_UMAX, CUDA_CPU_WARP_AND, CUDA_CPU_WARP_OR,
    CUDA_CPU_WARP_XOR, CUDA_CPU_WARP_MATCH, CUDA_CPU_WARP_CONVERGE, CUDA_CPU_WARP_MATRIX
};
enum cuda_cpu_block_op { CUDA_CPU_BLOCK_SYNC, CUDA_CPU_BLOCK_COUNT, CUDA_CPU_BLOCK_AND, CUDA_CPU_BLOCK_OR };
// CUDA_CPU_COUNT's instruction classes, counted in warp instructions (README.md, "Counting"): special
// functions (MUFU: ex2, lg2, rsq, rcp, tanh, sin, cos), shuffles and votes, block barriers, atomics,
// mma.sync, ldmatrix, cp.async, WMMA calls, the kernel's plain global and shared loads and stores, and
// wgmma.mma_async.
enum cuda_cpu_ins {
    CUDA_CPU_INS_SFU, CUDA_CPU_INS_SHFL, CUDA_CPU_INS_BAR, CUDA_CPU_INS_ATOM, CUDA_CPU_INS_MMA, CUDA_CPU_INS_LDSM,
    CUDA_CPU_INS_CP_ASYNC, CUDA_CPU_INS_WMMA, CUDA_CPU_INS_GMEM, CUDA_CPU_INS_SMEM, CUDA_CPU_INS_WGMMA, CUDA_CPU_INS_N
};
// n special-function instructions for the running CUDA thread (nothing outside a counted launch).
void cuda_cpu_count_sfu(int n);
// CUDA_CPU_COUNT: after the device has finished everything issued so far (the function synchronizes),
// a line "mark name=NAME" in the count file, so that a counting program can say where the work it
// measures begins (dev/cuda/count_attention.cu: after attention's start-up check). Nothing else.
void cuda_cpu_count_mark(const char* name);
// Waits until every lane in mask reaches the same warp operation, then returns this lane's result:
// for SHFL the value src_lane deposited, for VOTE the ballot, for the reductions the reduced value,
// for MATCH the mask of lanes holding an equal value. *group receives the lanes that took part.
uint64_t cuda_cpu_warp(int op, const char* name, unsigned mask, uint64_t value, int src_lane, unsigned* group);
// Waits until every thread of the block reaches a block barrier; returns the count/and/or of pred.
// (Its caller's address tells which __syncthreads: every thread must wait at the same one.)
int cuda_cpu_block(int op, const char* name, int pred);
// __threadfence(): with an atomic after it, it publishes the thread's (and, through barriers, its
// block's) earlier writes to a block whose atomic on the same address comes later.
void cuda_cpu_threadfence(void);
[[noreturn]] void cuda_cpu_bad_shuffle_width(const char* name, int width);
// The current block's dynamic shared memory (aborts outside a kernel).
void* cuda_cpu_dynamic_smem(void);
// The current block's copy of the static __shared__ variable declared at `site` (one per declaration
// and template instantiation): NaN-filled when the block's first thread reaches it.
void* cuda_cpu_shared_alloc(const void* site, const char* name, size_t size, size_t align);
template <class T>
inline T* cuda_cpu_shared(const void* site, const char* name, size_t align = 0) {
    return static_cast<T*>(cuda_cpu_shared_alloc(site, name, sizeof(T), align > alignof(T) ? align : alignof(T)));
}
// At the top of every kernel (cu2cpu.pl): the launch checked against the kernel's registers, once.
void cuda_cpu_kernel_entry(void);
// __launch_bounds__(max_threads, min_blocks, max_cluster): aborts when the block is larger.
void cuda_cpu_launch_bounds_check(int max_threads);
inline void cuda_cpu_launch_bounds(int max_threads, int = 0, int = 0) { cuda_cpu_launch_bounds_check(max_threads); }
// Lanes of the current warp that have not exited (what __activemask can honestly report).
unsigned cuda_cpu_live_lanes(void);
[[noreturn]] void cuda_cpu_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void cuda_cpu_trap(const char* what);

// The next launch from this host thread may give a different result in another order of its threads
// by design (atomics that hand out slots, as in a stream compaction): it runs under the first schedule
// only. Its test must then check the result in an order-insensitive way.
void cuda_cpu_order_dependent_launch(void);

typedef void (*cuda_cpu_body_fn)(void*);
// arg: the launch's copy of its arguments, freed by free_arg once the launch has run (launches are
// queued on their stream and run when the host synchronizes); params/params_size: those arguments,
// which kernels may read although they are host memory.
void cuda_cpu_launch_erased(const char* name, const void* key, dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, cuda_cpu_body_fn fn, void* arg, void (*free_arg)(void*),
                            const void* params, size_t params_size);

// A launch `k<<<g, b, smem, stream>>>(args)` is rewritten by cu2cpu.pl into
// `cuda_cpu_launch("k", key, g, b, smem, stream, [=](auto&... a) { k(a...); }, args)`. The arguments
// are evaluated once, on the host, as nvcc's launch does, and kept (decayed) beside the lambda; every
// CUDA thread calls the lambda with them, so template kernels deduce their arguments as with nvcc.
template <class F, class... A>
inline void cuda_cpu_launch(const char* name, const void* key, dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, F body, A&&... args) {
    struct Frame {
        F body;
        std::tuple<typename std::decay<A>::type...> params;
    };
    Frame* frame = new Frame{body, std::tuple<typename std::decay<A>::type...>(std::forward<A>(args)...)};
    cuda_cpu_launch_erased(
        name, key, grid, block, smem, stream,
        [](void* p) {
            Frame* f = static_cast<Frame*>(p);
            std::apply(f->body, f->params);
        },
        (void*)frame, [](void* p) { delete static_cast<Frame*>(p); }, (const void*)frame, sizeof(*frame));
}

// The C++ overloads cuda_runtime.h declares only for nvcc.
template <class T>
inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute((const void*)entry, attr, value);
}
template <class T>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, T* entry) {
    return ::cudaFuncGetAttributes(attr, (const void*)entry);
}
template <class T>
inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count, size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    return ::cudaMemcpyToSymbol((const void*)&symbol, src, count, offset, kind);
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count, size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    return ::cudaMemcpyFromSymbol(dst, (const void*)&symbol, count, offset, kind);
}

// A compiler barrier around every synchronisation: other fibers write shared memory while this one
// is switched out, so no value may be carried in a register across the call.
#define CUDA_CPU_CLOBBER() __asm__ __volatile__("" ::: "memory")

// ---- barriers ----
inline void __syncthreads() { CUDA_CPU_CLOBBER(); cuda_cpu_block(CUDA_CPU_BLOCK_SYNC, "__syncthreads", 0); CUDA_CPU_CLOBBER(); }
inline int __syncthreads_count(int p) { CUDA_CPU_CLOBBER(); int r = cuda_cpu_block(CUDA_CPU_BLOCK_COUNT, "__syncthreads_count", p != 0); CUDA_CPU_CLOBBER(); return r; }
inline int __syncthreads_and(int p) { CUDA_CPU_CLOBBER(); int r = cuda_cpu_block(CUDA_CPU_BLOCK_AND, "__syncthreads_and", p != 0); CUDA_CPU_CLOBBER(); return r; }
inline int __syncthreads_or(int p) { CUDA_CPU_CLOBBER(); int r = cuda_cpu_block(CUDA_CPU_BLOCK_OR, "__syncthreads_or", p != 0); CUDA_CPU_CLOBBER(); return r; }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    CUDA_CPU_CLOBBER(); cuda_cpu_warp(CUDA_CPU_WARP_SYNC, "__syncwarp", mask, 0, 0, nullptr); CUDA_CPU_CLOBBER();
}
inline void __threadfence() { CUDA_CPU_CLOBBER(); cuda_cpu_threadfence(); CUDA_CPU_CLOBBER(); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { CUDA_CPU_CLOBBER(); cuda_cpu_threadfence(); CUDA_CPU_CLOBBER(); }
// __trap() ends the launch on a GPU (an unspecified launch failure); here it aborts naming the thread.
[[noreturn]] inline void __trap() { cuda_cpu_trap("__trap()"); }
[[noreturn]] inline void __brkpt() { cuda_cpu_trap("__brkpt()"); }

// ---- warp shuffles and votes ----
inline unsigned cuda_cpu_lane() { return cuda_cpu_linear_tid & 31u; }

template <class T>
inline T cuda_cpu_shfl(const char* name, unsigned mask, T var, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, (const void*)&var, sizeof(T));
    CUDA_CPU_CLOBBER();
    bits = cuda_cpu_warp(CUDA_CPU_WARP_SHFL, name, mask, bits, src, nullptr);
    CUDA_CPU_CLOBBER();
    T out;
    memcpy((void*)&out, &bits, sizeof(T));
    return out;
}
// Source lanes follow the CUDA programming guide: a source outside the caller's width-segment
// returns the caller's own value.
// A width that is not a power of 2 from 1 to 32 is undefined in CUDA: refused.
inline void cuda_cpu_check_width(const char* name, int width) {
    if (width < 1 || width > 32 || (width & (width - 1))) cuda_cpu_bad_shuffle_width(name, width);
}
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
    cuda_cpu_check_width("__shfl_sync", width);
    int lane = (int)cuda_cpu_lane();
    int base = lane & ~(width - 1);
    return cuda_cpu_shfl("__shfl_sync", mask, var, base + (srcLane & (width - 1)));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    cuda_cpu_check_width("__shfl_up_sync", width);
    int lane = (int)cuda_cpu_lane();
    int src = lane - (int)delta;
    if (src < (lane & ~(width - 1))) src = lane;
    return cuda_cpu_shfl("__shfl_up_sync", mask, var, src);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    cuda_cpu_check_width("__shfl_down_sync", width);
    int lane = (int)cuda_cpu_lane();
    int src = lane + (int)delta;
    if (src >= (lane & ~(width - 1)) + width) src = lane;
    return cuda_cpu_shfl("__shfl_down_sync", mask, var, src);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
    cuda_cpu_check_width("__shfl_xor_sync", width);
    int lane = (int)cuda_cpu_lane();
    int src = lane ^ laneMask;
    if (src >= (lane & ~(width - 1)) + width) src = lane;
    return cuda_cpu_shfl("__shfl_xor_sync", mask, var, src);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    CUDA_CPU_CLOBBER();
    unsigned r = (unsigned)cuda_cpu_warp(CUDA_CPU_WARP_VOTE, "__ballot_sync", mask, pred != 0, 0, nullptr);
    CUDA_CPU_CLOBBER();
    return r;
}
inline int __any_sync(unsigned mask, int pred) {
    CUDA_CPU_CLOBBER();
    unsigned r = (unsigned)cuda_cpu_warp(CUDA_CPU_WARP_VOTE, "__any_sync", mask, pred != 0, 0, nullptr);
    CUDA_CPU_CLOBBER();
    return r != 0;
}
inline int __all_sync(unsigned mask, int pred) {
    unsigned group = 0;
    CUDA_CPU_CLOBBER();
    unsigned r = (unsigned)cuda_cpu_warp(CUDA_CPU_WARP_VOTE, "__all_sync", mask, pred != 0, 0, &group);
    CUDA_CPU_CLOBBER();
    return r == group;
}
inline unsigned __activemask() { return cuda_cpu_live_lanes(); }
inline unsigned __lanemask_lt() { return (1u << cuda_cpu_lane()) - 1u; }
inline unsigned __lanemask_le() { return (unsigned)((2ull << cuda_cpu_lane()) - 1ull); }
inline unsigned __lanemask_gt() { return ~__lanemask_le(); }
inline unsigned __lanemask_ge() { return ~__lanemask_lt(); }
#define CUDA_CPU_WARP_REDUCE(fname, op, T)                                                   \
    inline T fname(unsigned mask, T v) {                                                      \
        CUDA_CPU_CLOBBER();                                                                   \
        T r = (T)cuda_cpu_warp(op, #fname, mask, (uint64_t)(uint32_t)v, 0, nullptr);          \
        CUDA_CPU_CLOBBER();                                                                   \
        return r;                                                                             \
    }
CUDA_CPU_WARP_REDUCE(__reduce_add_sync, CUDA_CPU_WARP_ADD, unsigned)
CUDA_CPU_WARP_REDUCE(__reduce_min_sync, CUDA_CPU_WARP_UMIN, unsigned)
CUDA_CPU_WARP_REDUCE(__reduce_max_sync, CUDA_CPU_WARP_UMAX, unsigned)
CUDA_CPU_WARP_REDUCE(__reduce_and_sync, CUDA_CPU_WARP_AND, unsigned)
CUDA_CPU_WARP_REDUCE(__reduce_or_sync, CUDA_CPU_WARP_OR, unsigned)
CUDA_CPU_WARP_REDUCE(__reduce_xor_sync, CUDA_CPU_WARP_XOR, unsigned)
CUDA_CPU_WARP_REDUCE(__reduce_add_sync, CUDA_CPU_WARP_ADD, int)
CUDA_CPU_WARP_REDUCE(__reduce_min_sync, CUDA_CPU_WARP_MIN, int)
CUDA_CPU_WARP_REDUCE(__reduce_max_sync, CUDA_CPU_WARP_MAX, int)
#undef CUDA_CPU_WARP_REDUCE
template <class T>
inline unsigned __match_any_sync(unsigned mask, T v) {
    static_assert(sizeof(T) <= 8, "__match_any_sync of a type wider than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, (const void*)&v, sizeof(T));
    CUDA_CPU_CLOBBER();
    unsigned r = (unsigned)cuda_cpu_warp(CUDA_CPU_WARP_MATCH, "__match_any_sync", mask, bits, 0, nullptr);
    CUDA_CPU_CLOBBER();
    return r;
}

// ---- atomics: real atomics, since blocks run on several OS threads at once ----
template <class T, class F>
inline T cuda_cpu_atomic_update(T* addr, F f) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomic on an odd-sized type");
    typedef typename std::conditional<sizeof(T) == 2, uint16_t,
            typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type U;
    U* p = reinterpret_cast<U*>(addr);
    U old_bits = __atomic_load_n(p, __ATOMIC_RELAXED);
    for (;;) {
        T old_val, new_val;
        memcpy((void*)&old_val, &old_bits, sizeof(T));
        new_val = f(old_val);
        U new_bits;
        memcpy(&new_bits, (const void*)&new_val, sizeof(T));
        if (__atomic_compare_exchange_n(p, &old_bits, new_bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            return old_val;
    }
}
// An exchange or a compare-and-swap leaves whichever value landed last (a lock's owner, the last
// thread's id, a CAS loop's float sum rounded in its order): the runtime lets its target differ
// between the two schedules of a launch, as it may between two runs on a GPU (what a thread computes
// from the value it got back is still compared).
void cuda_cpu_atomic_any_order(const void* a, unsigned size);
#define CUDA_CPU_ATOMIC_INT(T)                                                                                   \
    inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }                       \
    inline T atomicSub(T* a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }                       \
    inline T atomicExch(T* a, T v) { cuda_cpu_atomic_any_order(a, sizeof(T)); return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
    inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }                       \
    inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }                         \
    inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }                       \
    inline T atomicMax(T* a, T v) { return cuda_cpu_atomic_update(a, [v](T o) { return o > v ? o : v; }); }   \
    inline T atomicMin(T* a, T v) { return cuda_cpu_atomic_update(a, [v](T o) { return o < v ? o : v; }); }   \
    inline T atomicCAS(T* a, T cmp, T v) {                                                                      \
        cuda_cpu_atomic_any_order(a, sizeof(T));                                                                \
        __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
        return cmp;                                                                                             \
    }
CUDA_CPU_ATOMIC_INT(int)
CUDA_CPU_ATOMIC_INT(unsigned int)
CUDA_CPU_ATOMIC_INT(unsigned long long int)
CUDA_CPU_ATOMIC_INT(long long int)
#undef CUDA_CPU_ATOMIC_INT
inline unsigned short atomicCAS(unsigned short* a, unsigned short cmp, unsigned short v) {
    cuda_cpu_atomic_any_order(a, sizeof(unsigned short));
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
inline unsigned atomicInc(unsigned* a, unsigned lim) {
    return cuda_cpu_atomic_update(a, [lim](unsigned o) { return o >= lim ? 0u : o + 1u; });
}
inline unsigned atomicDec(unsigned* a, unsigned lim) {
    return cuda_cpu_atomic_update(a, [lim](unsigned o) { return (o == 0 || o > lim) ? lim : o - 1u; });
}
// Float additions: their rounding depends on the order they happen in. The runtime applies them (one
// at a time), logs them, and once the launch has run gives each target the sum of its additions in
// an order of its own choosing, different under each schedule and in each process (README: "Float
// atomics"), so code that assumes their bits repeat is caught here as on a GPU.
enum { CUDA_CPU_FA_F32, CUDA_CPU_FA_F64, CUDA_CPU_FA_F16, CUDA_CPU_FA_BF16, CUDA_CPU_FA_F16X2, CUDA_CPU_FA_BF16X2 };
uint64_t cuda_cpu_float_atomic_add(void* a, int type, uint64_t operand_bits);
template <class T>
inline T cuda_cpu_fadd(T* a, T v, int type) {
    uint64_t bits = 0;
    memcpy(&bits, (const void*)&v, sizeof(T));
    CUDA_CPU_CLOBBER();
    bits = cuda_cpu_float_atomic_add((void*)a, type, bits);
    CUDA_CPU_CLOBBER();
    T old;
    memcpy((void*)&old, &bits, sizeof(T));
    return old;
}
inline float atomicAdd(float* a, float v) { return cuda_cpu_fadd(a, v, CUDA_CPU_FA_F32); }
inline double atomicAdd(double* a, double v) { return cuda_cpu_fadd(a, v, CUDA_CPU_FA_F64); }
inline float atomicExch(float* a, float v) {
    cuda_cpu_atomic_any_order(a, sizeof(float));
    return cuda_cpu_atomic_update(a, [v](float) { return v; });
}
inline __half atomicAdd(__half* a, __half v) { return cuda_cpu_fadd(a, v, CUDA_CPU_FA_F16); }
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* a, __nv_bfloat16 v) { return cuda_cpu_fadd(a, v, CUDA_CPU_FA_BF16); }
inline __half2 atomicAdd(__half2* a, __half2 v) { return cuda_cpu_fadd(a, v, CUDA_CPU_FA_F16X2); }
inline __nv_bfloat162 atomicAdd(__nv_bfloat162* a, __nv_bfloat162 v) { return cuda_cpu_fadd(a, v, CUDA_CPU_FA_BF16X2); }

// ---- cache-hinted loads and stores: plain accesses on a CPU ----
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// ---- float intrinsics (glibc already declares __expf, __logf, __sinf, __cosf, __powf, __tanhf...;
// intrinsics_cpu.cpp defines them). The approximate ones carry the error a GPU's may have. ----
float cuda_cpu_rsqrtf(float x);
float cuda_cpu_fdividef(float a, float b);
inline float rsqrtf(float x) { return cuda_cpu_rsqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fdividef(float a, float b) { return cuda_cpu_fdividef(a, b); }
inline float fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { cuda_cpu_count_sfu(1); return 1.0f / x; }     // MUFU.RCP and a fix-up
inline float __fsqrt_rn(float x) { cuda_cpu_count_sfu(1); return sqrtf(x); }     // MUFU.RSQ and a fix-up
inline float __frsqrt_rn(float x) { cuda_cpu_count_sfu(1); return 1.0f / sqrtf(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float f) { int x; memcpy(&x, &f, 4); return x; }
inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint2float_rn(unsigned x) { return (float)x; }
inline float __double2float_rn(double x) { return (float)x; }
inline float __ll2float_rn(long long x) { return (float)x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
inline int __mul24(int a, int b) { return a * b; }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
// clock64() and, in a kernel, clock(): the thread's count of its readings (cuda_cpu.cpp says why).
long long cuda_cpu_clock64(void);
inline long long clock64() { return cuda_cpu_clock64(); }
inline void __nanosleep(unsigned) {}

// CUDA's global min/max overloads (non-templates, so they win over std::min after `using namespace std`).
#define CUDA_CPU_MINMAX(T)                              \
    inline T min(T a, T b) { return a < b ? a : b; }    \
    inline T max(T a, T b) { return a > b ? a : b; }
CUDA_CPU_MINMAX(int)
CUDA_CPU_MINMAX(unsigned int)
CUDA_CPU_MINMAX(long)
CUDA_CPU_MINMAX(unsigned long)
CUDA_CPU_MINMAX(long long)
CUDA_CPU_MINMAX(unsigned long long)
#undef CUDA_CPU_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
inline float min(float a, double b) { return fminf(a, (float)b); }
inline float max(float a, double b) { return fmaxf(a, (float)b); }

// ---- half / bfloat16 functions that CUDA's headers declare for the device only ----
#define CUDA_CPU_HALF_FNS(H, TOF, FROMF)                                                        \
    inline H __hfma(H a, H b, H c) { return FROMF(fmaf(TOF(a), TOF(b), TOF(c))); }               \
    inline H __hfma_relu(H a, H b, H c) { float r = fmaf(TOF(a), TOF(b), TOF(c)); return FROMF(r > 0.f ? r : 0.f); } \
    inline H hsqrt(H a) { return FROMF(sqrtf(TOF(a))); }                                         \
    inline H hrsqrt(H a) { return FROMF(1.0f / sqrtf(TOF(a))); }                                 \
    inline H hrcp(H a) { return FROMF(1.0f / TOF(a)); }                                          \
    inline H hexp(H a) { return FROMF(expf(TOF(a))); }                                           \
    inline H hexp2(H a) { return FROMF(exp2f(TOF(a))); }                                         \
    inline H hlog(H a) { return FROMF(logf(TOF(a))); }                                           \
    inline H hlog2(H a) { return FROMF(log2f(TOF(a))); }                                         \
    inline H hsin(H a) { return FROMF(sinf(TOF(a))); }                                           \
    inline H hcos(H a) { return FROMF(cosf(TOF(a))); }                                           \
    inline H htanh(H a) { return FROMF(tanhf(TOF(a))); }                                         \
    inline H hfloor(H a) { return FROMF(floorf(TOF(a))); }                                       \
    inline H hceil(H a) { return FROMF(ceilf(TOF(a))); }
CUDA_CPU_HALF_FNS(__half, __half2float, __float2half)
CUDA_CPU_HALF_FNS(__nv_bfloat16, __bfloat162float, __float2bfloat16)
#undef CUDA_CPU_HALF_FNS
#define CUDA_CPU_HALF2_FNS(H2, LOW, HIGH, MAKE)                                                          \
    inline H2 __hfma2(H2 a, H2 b, H2 c) { return MAKE(fmaf(LOW(a), LOW(b), LOW(c)), fmaf(HIGH(a), HIGH(b), HIGH(c))); } \
    inline H2 h2exp(H2 a) { return MAKE(expf(LOW(a)), expf(HIGH(a))); }                                 \
    inline H2 h2sqrt(H2 a) { return MAKE(sqrtf(LOW(a)), sqrtf(HIGH(a))); }                               \
    inline H2 h2rsqrt(H2 a) { return MAKE(1.0f / sqrtf(LOW(a)), 1.0f / sqrtf(HIGH(a))); }               \
    inline H2 h2log(H2 a) { return MAKE(logf(LOW(a)), logf(HIGH(a))); }
CUDA_CPU_HALF2_FNS(__half2, __low2float, __high2float, __floats2half2_rn)
CUDA_CPU_HALF2_FNS(__nv_bfloat162, __low2float, __high2float, __floats2bfloat162_rn)
#undef CUDA_CPU_HALF2_FNS
inline int __half2int_rn(__half h) { return (int)nearbyintf(__half2float(h)); }
inline int __bfloat162int_rn(__nv_bfloat16 h) { return (int)nearbyintf(__bfloat162float(h)); }

// ---- WMMA: each lane holds the whole tile, so mma_sync gives every lane the full product (computed
// once per warp by the runtime). The fragment element <-> (row, col) mapping is unspecified in CUDA;
// kernels that need positions must go through store_matrix_sync, as they must on the GPU. ----
enum { CUDA_CPU_F32, CUDA_CPU_F16, CUDA_CPU_BF16 };
void cuda_cpu_wmma_load(void* frag, int type, int rows, int cols, const void* p, unsigned ldm, int row_major_mem);
void cuda_cpu_wmma_store(void* p, const void* frag, int type, int rows, int cols, unsigned ldm, int row_major_mem);
void cuda_cpu_wmma_mma(void* d, const void* a, const void* b, const void* c, int M, int N, int K, int ab, int cd);
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K> struct cuda_cpu_shape;
template <int M, int N, int K> struct cuda_cpu_shape<matrix_a, M, N, K> { enum { rows = M, cols = K }; };
template <int M, int N, int K> struct cuda_cpu_shape<matrix_b, M, N, K> { enum { rows = K, cols = N }; };
template <int M, int N, int K> struct cuda_cpu_shape<accumulator, M, N, K> { enum { rows = M, cols = N }; };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) || (M == 8 && N == 32 && K == 16),
                  "cuda_cpu WMMA supports m16n16k16, m32n8k16 and m8n32k16");
    enum { rows = cuda_cpu_shape<Use, M, N, K>::rows, cols = cuda_cpu_shape<Use, M, N, K>::cols };
    enum { num_elements = rows * cols };
    T x[num_elements];  // row-major tile
};

template <class T> struct cuda_cpu_type;
template <> struct cuda_cpu_type<float> { enum { code = CUDA_CPU_F32 }; };
template <> struct cuda_cpu_type<__half> { enum { code = CUDA_CPU_F16 }; };
template <> struct cuda_cpu_type<__nv_bfloat16> { enum { code = CUDA_CPU_BF16 }; };

// All WMMA calls are warp-collective: the warp barrier makes a call reached by part of a warp abort.
// It orders no memory accesses (CUDA promises none), so a tile written by other lanes needs a
// __syncwarp before it is loaded, as on a GPU.
inline void cuda_cpu_wmma_sync(const char* name) {
    CUDA_CPU_CLOBBER(); cuda_cpu_warp(CUDA_CPU_WARP_CONVERGE, name, 0xffffffffu, 0, 0, nullptr); CUDA_CPU_CLOBBER();
}

template <class Use, int M, int N, int K, class T, class Layout, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const V& v) {
    for (int i = 0; i < f.num_elements; i++) f.x[i] = (T)v;
}
template <class Use, int M, int N, int K, class T, class Layout>
inline void cuda_cpu_load(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm, bool row_major_mem) {
    cuda_cpu_wmma_sync("wmma::load_matrix_sync");
    cuda_cpu_wmma_load(f.x, cuda_cpu_type<T>::code, f.rows, f.cols, p, ldm, row_major_mem);
    CUDA_CPU_CLOBBER();
}
template <class Use, int M, int N, int K, class T>
inline void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const T* p, unsigned ldm) { cuda_cpu_load(f, p, ldm, true); }
template <class Use, int M, int N, int K, class T>
inline void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const T* p, unsigned ldm) { cuda_cpu_load(f, p, ldm, false); }
template <int M, int N, int K, class T>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm, layout_t layout) {
    cuda_cpu_load(f, p, ldm, layout == mem_row_major);
}
template <int M, int N, int K, class T>
inline void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
    cuda_cpu_wmma_sync("wmma::store_matrix_sync");
    CUDA_CPU_CLOBBER();
    cuda_cpu_wmma_store(p, f.x, cuda_cpu_type<T>::code, f.rows, f.cols, ldm, layout == mem_row_major);
    CUDA_CPU_CLOBBER();
}
template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c,
                     bool satf = false) {
    static_assert(std::is_same<TA, TB>::value, "wmma::mma_sync: A and B must have one element type");
    cuda_cpu_wmma_sync("wmma::mma_sync");
    CUDA_CPU_CLOBBER();
    cuda_cpu_wmma_mma(d.x, a.x, b.x, c.x, M, N, K, cuda_cpu_type<TA>::code, cuda_cpu_type<TC>::code);
    CUDA_CPU_CLOBBER();
}
}  // namespace wmma
}  // namespace nvcuda

// ---- PTX-level warp matrix primitives (kernels/mma.cuh calls these where nvcc has inline PTX;
// intrinsics_cpu.cpp). mma and ldmatrix are warp-collective: all 32 lanes must arrive, and each lane
// gets exactly the registers the PTX ISA's fragment layouts give it. cp.async copies are recorded at
// issue and land in shared memory only at the cp.async.wait_group that covers them. ----
// d = a * b + c for mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32, T = CUDA_CPU_F16 or CUDA_CPU_BF16.
void cuda_cpu_mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, const float* c, int type);
// ldmatrix.sync.aligned.xNUM[.trans].shared.b16: this lane's row address (used by lanes < 8 * num).
void cuda_cpu_ldmatrix(uint32_t* r, int num, int trans, const void* row);
// cp.async.{ca,cg}.shared.global [dst], [src], 16, src_bytes (src_bytes < 16: the rest zero-filled).
void cuda_cpu_cp_async(void* dst, const void* src, int src_bytes, int cg);
void cuda_cpu_cp_async_commit(void);
// cp.async.wait_group n (n >= 0); n = -1: cp.async.wait_all.
void cuda_cpu_cp_async_wait(int n);
// ---- the warpgroup matrix primitives of sm_90a (kernels/wgmma.cuh; intrinsics_cpu.cpp) ----
// wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T with A from registers: this lane's accumulators d (N/2
// floats, the PTX ISA's layout of D) and 4 registers of A, B through b_desc (no-swizzle descriptors
// only; trans_b: MN-major); scale_d 0: D = A B, else D = A B + D. Asynchronous: it reads its operands at
// issue and writes d at the wgmma.wait_group that covers it, aborting if the kernel wrote them between.
void cuda_cpu_wgmma(float* d, int n, const uint32_t* a, uint64_t b_desc, int scale_d, int trans_b, int type);
void cuda_cpu_wgmma_fence(void);                // wgmma.fence.sync.aligned
void cuda_cpu_wgmma_commit(void);               // wgmma.commit_group.sync.aligned
void cuda_cpu_wgmma_wait(int n);                // wgmma.wait_group.sync.aligned n
// The address of shared memory p in the shared state space (what __cvta_generic_to_shared gives on a
// GPU): its offset in the block's shared memory.
uint32_t cuda_cpu_smem_offset(const void* p);

// ---- CUDA_CPU_COUNT's special functions in libm's names: a kernel's expf, exp2f, tanhf and sqrtf
// compile on a GPU to MUFU instructions (nvcc 13's PTX for sm_90: expf and exp2f one ex2.approx,
// tanhf an ex2.approx and an rcp.approx, sqrtf one sqrt.rn, which is MUFU.RSQ and a fix-up; logf is a
// polynomial, no MUFU), counted here before the same libm function runs. An IEEE float division
// (a / b: div.rn, an MUFU.RCP) is the one the runtime cannot see. Not in the runtime's own files,
// whose math is not a kernel's. ----
#ifndef CUDA_CPU_RUNTIME_SOURCE
inline float cuda_cpu_sfu_value(float v, int n) { cuda_cpu_count_sfu(n); return v; }
#define expf(x) cuda_cpu_sfu_value(expf(x), 1)
#define exp2f(x) cuda_cpu_sfu_value(exp2f(x), 1)
#define tanhf(x) cuda_cpu_sfu_value(tanhf(x), 2)
#define sqrtf(x) cuda_cpu_sfu_value(sqrtf(x), 1)
#endif

#endif  // CUDA_CPU_H
