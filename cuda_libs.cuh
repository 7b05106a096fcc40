// cuda_libs.cuh: the CUDA driver, cuBLASLt and NCCL loaded when the GPU engine starts (dlopen),
// not when the process does. Linked at load time, libcublasLt (over 500 MB) and libnccl cost every
// start of ./train_gpt2 a third of a second and 200 MB resident, --help and flag errors included,
// and a machine without them (a login node, a container without CUDA's libraries) could not start
// the program at all; now those runs cost what the C-only trainer's do, and a missing library is
// one "engine: no usable GPU (...)" line before the C engine takes over. cudart stays linked
// statically (nvcc's default), so it needs no loading.
//
// train_gpt2.cu includes it after <cublasLt.h> and <nccl.h> and before the kernel headers that call
// them (matmul.cuh, train_gpt2_zero.cuh, train_gpt2_pipe.cuh). Each function the trainer uses
// becomes a pointer of the function's own type (cuda_libs_cublasLtMatmul for cublasLtMatmul, typed
// decltype(&::cublasLtMatmul)) and a macro renames every call to it, so call sites read as plain
// cuBLASLt and NCCL. A function used and not listed here fails the link (no -lcublasLt, -lnccl).
// gpu_engine_create calls, in this order:
//   cuda_libs_driver(why, cap)             libcuda.so.1, the driver (cudart loads it again itself:
//                                          this is the cheap first test of a machine without one)
//   cuda_libs_load(need_nccl, why, cap)    cuBLASLt always, NCCL when need_nccl (more than one
//                                          rank; one rank never calls NCCL)
// Each returns false with `why` set to one line naming the library (or its missing function) and
// the loader's words, and loads once per process: a second call answers as the first did.
// The sonames are those of the headers compiled against (libcublasLt.so.<CUBLAS_VER_MAJOR>,
// libnccl.so.<NCCL_MAJOR>), found by the loader's search (LD_LIBRARY_PATH, ld.so's cache).
//
// Under the CPU runtime (test/cuda_cpu: ./train_gpt2_emu and the tests built on it), which
// provides cuBLASLt and NCCL itself, nothing changes: direct calls, and both functions succeed.
#ifndef CUDA_LIBS_CUH
#define CUDA_LIBS_CUH

#include <stddef.h>
#include <stdio.h>

#if defined(CUDA_CPU)

static inline bool cuda_libs_driver(char* why, size_t why_cap) {
    (void)why, (void)why_cap;
    return true;
}
static inline bool cuda_libs_load(bool need_nccl, char* why, size_t why_cap) {
    (void)need_nccl, (void)why, (void)why_cap;
    return true;
}

#else

#include <cublasLt.h>
#if defined(USE_NCCL)
#include <nccl.h>
#endif

#include "dynlib.h"

// The functions the trainer calls (train_gpt2.cu, train_gpt2_zero.cuh, train_gpt2_pipe.cuh,
// kernels/matmul.cuh), each listed again in the renaming macros at the end of this file.
#define CUDA_LIBS_CUBLASLT(X)                                                                                   \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusName) X(cublasLtMatmul)                           \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                 \
    X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)     \
    X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)
#if defined(USE_NCCL)
#define CUDA_LIBS_NCCL(X)                                                                                       \
    X(ncclAllGather) X(ncclAllReduce) X(ncclBroadcast) X(ncclCommDestroy) X(ncclCommInitRank) X(ncclCommSplit) \
    X(ncclGetErrorString) X(ncclGetUniqueId) X(ncclGroupEnd) X(ncclGroupStart) X(ncclRecv) X(ncclReduce)       \
    X(ncclReduceScatter) X(ncclSend)
#endif

#define CUDA_LIBS_STR_(x) #x
#define CUDA_LIBS_STR(x) CUDA_LIBS_STR_(x)
#define CUDA_LIBS_POINTER(name) static decltype(&::name) cuda_libs_##name = NULL;
#define CUDA_LIBS_NAME(name) #name,
#define CUDA_LIBS_TAKE(name) cuda_libs_##name = (decltype(cuda_libs_##name))fns[i++];

CUDA_LIBS_CUBLASLT(CUDA_LIBS_POINTER)
#if defined(USE_NCCL)
CUDA_LIBS_NCCL(CUDA_LIBS_POINTER)
#endif

// One library's load, done once: its handle (NULL until loaded, and after a failure) and the line
// the failure gave.
typedef struct {
    int tried;
    void* lib;
    char why[448];
} CudaLib;

// The first try: the library and names[0..n) into fns; true when all are there.
static bool cuda_libs_open(CudaLib* l, const char* what, const char* soname, const char* const* names, void** fns,
                           int n) {
    l->tried = 1;
    l->lib = dynlib_load(what, soname, names, fns, n, l->why, sizeof(l->why));
    return l->lib != NULL;
}

// Every try's answer: the first one's.
static bool cuda_libs_answer(const CudaLib* l, char* why, size_t why_cap) {
    if (!l->lib) snprintf(why, why_cap, "%s", l->why);
    return l->lib != NULL;
}

static bool cuda_libs_driver(char* why, size_t why_cap) {
    static CudaLib driver;
    if (!driver.tried) cuda_libs_open(&driver, "the CUDA driver", "libcuda.so.1", NULL, NULL, 0);
    return cuda_libs_answer(&driver, why, why_cap);
}

static bool cuda_libs_load(bool need_nccl, char* why, size_t why_cap) {
    static CudaLib cublaslt;
    if (!cublaslt.tried) {
        static const char* const names[] = {CUDA_LIBS_CUBLASLT(CUDA_LIBS_NAME)};
        void* fns[sizeof(names) / sizeof(names[0])];
        if (cuda_libs_open(&cublaslt, "cuBLASLt", "libcublasLt.so." CUDA_LIBS_STR(CUBLAS_VER_MAJOR), names, fns,
                           (int)(sizeof(names) / sizeof(names[0])))) {
            int i = 0;
            CUDA_LIBS_CUBLASLT(CUDA_LIBS_TAKE)
        }
    }
    if (!cuda_libs_answer(&cublaslt, why, why_cap)) return false;
    if (!need_nccl) return true;
#if defined(USE_NCCL)
    static CudaLib nccl;
    if (!nccl.tried) {
        static const char* const names[] = {CUDA_LIBS_NCCL(CUDA_LIBS_NAME)};
        void* fns[sizeof(names) / sizeof(names[0])];
        if (cuda_libs_open(&nccl, "NCCL", "libnccl.so." CUDA_LIBS_STR(NCCL_MAJOR), names, fns,
                           (int)(sizeof(names) / sizeof(names[0])))) {
            int i = 0;
            CUDA_LIBS_NCCL(CUDA_LIBS_TAKE)
        }
    }
    return cuda_libs_answer(&nccl, why, why_cap);
#else
    return true;  // gpu_engine_create refuses more than one rank without NCCL before it loads
#endif
}

// Every call below this line goes through the pointers above.
#define cublasLtCreate cuda_libs_cublasLtCreate
#define cublasLtDestroy cuda_libs_cublasLtDestroy
#define cublasLtGetStatusName cuda_libs_cublasLtGetStatusName
#define cublasLtMatmul cuda_libs_cublasLtMatmul
#define cublasLtMatmulAlgoGetHeuristic cuda_libs_cublasLtMatmulAlgoGetHeuristic
#define cublasLtMatmulDescCreate cuda_libs_cublasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy cuda_libs_cublasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute cuda_libs_cublasLtMatmulDescSetAttribute
#define cublasLtMatmulPreferenceCreate cuda_libs_cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy cuda_libs_cublasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute cuda_libs_cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatrixLayoutCreate cuda_libs_cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy cuda_libs_cublasLtMatrixLayoutDestroy
#if defined(USE_NCCL)
#define ncclAllGather cuda_libs_ncclAllGather
#define ncclAllReduce cuda_libs_ncclAllReduce
#define ncclBroadcast cuda_libs_ncclBroadcast
#define ncclCommDestroy cuda_libs_ncclCommDestroy
#define ncclCommInitRank cuda_libs_ncclCommInitRank
#define ncclCommSplit cuda_libs_ncclCommSplit
#define ncclGetErrorString cuda_libs_ncclGetErrorString
#define ncclGetUniqueId cuda_libs_ncclGetUniqueId
#define ncclGroupEnd cuda_libs_ncclGroupEnd
#define ncclGroupStart cuda_libs_ncclGroupStart
#define ncclRecv cuda_libs_ncclRecv
#define ncclReduce cuda_libs_ncclReduce
#define ncclReduceScatter cuda_libs_ncclReduceScatter
#define ncclSend cuda_libs_ncclSend
#endif

#endif  // CUDA_CPU
#endif  // CUDA_LIBS_CUH
