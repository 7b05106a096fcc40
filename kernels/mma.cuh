// mma.cuh: warp-level tensor-core primitives at the PTX level, for kernels that keep their tiles in
// registers (the FlashAttention-2-style attention, kernels/flash_*.cuh): mma.sync m16n8k16 (f16 or bf16 in,
// f32 accumulate), ldmatrix x1/x2/x4 with and without .trans, 16-byte cp.async with commit and wait
// groups, ex2.approx.
//
// Under nvcc each is one inline PTX instruction (sm_80 and newer; sm_75 gets equivalent plain CUDA
// where the instruction is missing). Under the CPU runtime (test/cuda_cpu) each calls the runtime,
// which implements the PTX ISA's exact lane-to-element mapping, so a wrong fragment index gives the
// wrong answer there as on a GPU (test/cuda_cpu/README.md, "Warp matrix primitives").
//
// Fragment layouts (the PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type";
// g = lane >> 2, t = lane % 4; register i holds elements 2i (low 16 bits) and 2i+1 (high)):
//   A, 16x16 row-major, uint32_t a[4]:  a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]
//                                        a[2] = A[g][2t+8..+9]    a[3] = A[g+8][2t+8..+9]
//   B, 16x8 (k x n) "col", uint32_t b[2]: b[0] = B[2t..2t+1][g]  b[1] = B[2t+8..+9][g]
//   C and D, 16x8 fp32, float c[4]:      c[0..1] = C[g][2t..2t+1]  c[2..3] = C[g+8][2t..2t+1]
// ldmatrix .xN: lane l supplies the address of row l%8 of matrix l/8 (lanes 0..8N-1; each row 8
// 16-bit elements, 16-byte aligned, in shared memory); register j of every lane receives matrix j's
// (row lane/4, cols 2(lane%4), +1), or with .trans its (rows 2(lane%4), +1, col lane/4). So ldmatrix
// x4 of a row-major 16x16 tile (lane l pointing at row l%16, column 8*(l/16)) is an A fragment, and
// ldmatrix x2 .trans of a row-major 16x8 k-by-n tile is a B fragment; x2 (no .trans) of an n-by-k
// row-major tile (K for Q·K^T) is a B fragment too.
// Two accumulators D0 (columns 0..7) and D1 (8..15) of a row packed by mma_pack_a are the A
// fragment of that 16x16 tile: {pack(D0[0],D0[1]), pack(D0[2],D0[3]), pack(D1[0],D1[1]), pack(D1[2],D1[3])}.
//
// cp.async: a 16-byte copy from global to shared memory that completes only at a
// mma_cp_async_wait<N>() covering its group (copies are grouped by mma_cp_async_commit(); wait<N>
// leaves the N most recent groups in flight), or at mma_cp_async_wait_all(); other threads see the
// bytes after that thread's wait and a __syncthreads. Its source must not change until then.
#pragma once

#include <stdint.h>
#include <string.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750
#error "kernels/mma.cuh needs sm_75 or newer (ldmatrix)"
#endif

// Under nvcc, a generic pointer to shared memory as the 32-bit .shared address PTX wants.
#if !defined(CUDA_CPU)
__device__ __forceinline__ uint32_t mma_smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

// Two floats rounded to T (__half or __nv_bfloat16) in one register: lo in the low 16 bits.
template <class T> __device__ __forceinline__ uint32_t mma_pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t mma_pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}
template <> __device__ __forceinline__ uint32_t mma_pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

// The A fragment of a 16x16 tile from its two accumulators d0 (columns 0..7) and d1 (8..15), each
// value rounded to T: what a product's result (P, dS) needs to become the next product's operand.
template <class T>
__device__ __forceinline__ void mma_pack_a(uint32_t (&a)[4], const float (&d0)[4], const float (&d1)[4]) {
    a[0] = mma_pack2<T>(d0[0], d0[1]);
    a[1] = mma_pack2<T>(d0[2], d0[3]);
    a[2] = mma_pack2<T>(d1[0], d1[1]);
    a[3] = mma_pack2<T>(d1[2], d1[3]);
}

#if defined(CUDA_CPU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
// sm_75 has no m16n8k16 for bf16 nor cp.async: D = A B + C from the fragments by shuffles, in fp32,
// k in order (slow, and only for sm_75 builds; the project's targets are sm_80 and newer). Compiled
// on the CPU runtime too, where test_mma checks it against the runtime's mma.
__device__ __forceinline__ float mma_sm75_elem(uint32_t r, int hi, const __half*) {
    return __half2float(__ushort_as_half(hi ? (unsigned short)(r >> 16) : (unsigned short)(r & 0xffffu)));
}
__device__ __forceinline__ float mma_sm75_elem(uint32_t r, int hi, const __nv_bfloat16*) {
    return __bfloat162float(__ushort_as_bfloat16(hi ? (unsigned short)(r >> 16) : (unsigned short)(r & 0xffffu)));
}
template <class T>
__device__ __forceinline__ void mma_sm75_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[4] = {c[0], c[1], c[2], c[3]};
#pragma unroll
    for (int k = 0; k < 16; k++) {
        const int hi = k & 1, src_a = g * 4 + (k & 7) / 2;
        // A[g][k] and A[g+8][k] live in lane src_a, registers (k >= 8 ? 2 : 0) and +1.
        uint32_t ra0 = __shfl_sync(0xffffffffu, a[k >= 8 ? 2 : 0], src_a);
        uint32_t ra1 = __shfl_sync(0xffffffffu, a[k >= 8 ? 3 : 1], src_a);
        // B[k][2t] and B[k][2t+1] live in lanes (2t)*4 + (k&7)/2 and (2t+1)*4 + (k&7)/2, register k >= 8.
        uint32_t rb0 = __shfl_sync(0xffffffffu, b[k >= 8 ? 1 : 0], (2 * t) * 4 + (k & 7) / 2);
        uint32_t rb1 = __shfl_sync(0xffffffffu, b[k >= 8 ? 1 : 0], (2 * t + 1) * 4 + (k & 7) / 2);
        const T* tag = nullptr;
        float x0 = mma_sm75_elem(ra0, hi, tag), x1 = mma_sm75_elem(ra1, hi, tag);
        float y0 = mma_sm75_elem(rb0, hi, tag), y1 = mma_sm75_elem(rb1, hi, tag);
        acc[0] += x0 * y0;
        acc[1] += x0 * y1;
        acc[2] += x1 * y0;
        acc[3] += x1 * y1;
    }
    for (int i = 0; i < 4; i++) d[i] = acc[i];
}
#endif

// d = A B + c (mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32), T = __half or __nv_bfloat16; d may be c.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4]);
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                     const float (&c)[4]) {
#if defined(CUDA_CPU)
    CUDA_CPU_CLOBBER();
    cuda_cpu_mma_m16n8k16(d, a, b, c, CUDA_CPU_F16);
    CUDA_CPU_CLOBBER();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    mma_sm75_m16n8k16<__half>(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
#endif
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                            const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(CUDA_CPU)
    CUDA_CPU_CLOBBER();
    cuda_cpu_mma_m16n8k16(d, a, b, c, CUDA_CPU_BF16);
    CUDA_CPU_CLOBBER();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    mma_sm75_m16n8k16<__nv_bfloat16>(d, a, b, c);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
#endif
}

// ---- ldmatrix.sync.aligned.{x1,x2,x4}{,.trans}.shared.b16: p is this lane's row address ----
#if defined(CUDA_CPU)
#define MMA_LDMATRIX(fname, N, TRANS, PTX)                                                   \
    __device__ __forceinline__ void fname(uint32_t (&r)[N], const void* p) {                 \
        CUDA_CPU_CLOBBER();                                                                   \
        cuda_cpu_ldmatrix(r, N, TRANS, p);                                                    \
        CUDA_CPU_CLOBBER();                                                                   \
    }
#else
#define MMA_LDMATRIX_ASM1(PTX) \
    asm volatile(PTX " {%0}, [%1];\n" : "=r"(r[0]) : "r"(mma_smem_addr(p)) : "memory")
#define MMA_LDMATRIX_ASM2(PTX) \
    asm volatile(PTX " {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(mma_smem_addr(p)) : "memory")
#define MMA_LDMATRIX_ASM4(PTX)                                                                           \
    asm volatile(PTX " {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])            \
                 : "r"(mma_smem_addr(p)) : "memory")
#define MMA_LDMATRIX(fname, N, TRANS, PTX) \
    __device__ __forceinline__ void fname(uint32_t (&r)[N], const void* p) { MMA_LDMATRIX_ASM##N(PTX); }
#endif
MMA_LDMATRIX(mma_ldmatrix_x1, 1, 0, "ldmatrix.sync.aligned.m8n8.x1.shared.b16")
MMA_LDMATRIX(mma_ldmatrix_x2, 2, 0, "ldmatrix.sync.aligned.m8n8.x2.shared.b16")
MMA_LDMATRIX(mma_ldmatrix_x4, 4, 0, "ldmatrix.sync.aligned.m8n8.x4.shared.b16")
MMA_LDMATRIX(mma_ldmatrix_x1_trans, 1, 1, "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16")
MMA_LDMATRIX(mma_ldmatrix_x2_trans, 2, 1, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16")
MMA_LDMATRIX(mma_ldmatrix_x4_trans, 4, 1, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16")
#undef MMA_LDMATRIX

// ---- cp.async ----
// 16 bytes from global src to shared dst, both 16-byte aligned; .ca caches in L1, .cg in L2 only.
// src_bytes (0..16) of them are read, the rest of dst is zero-filled (a row past the end: 0, with any
// valid src).
__device__ __forceinline__ void mma_cp_async_ca16(void* dst, const void* src) {
#if defined(CUDA_CPU)
    cuda_cpu_cp_async(dst, src, 16, 0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    *reinterpret_cast<int4*>(dst) = *reinterpret_cast<const int4*>(src);
#else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(mma_smem_addr(dst)), "l"(src) : "memory");
#endif
}
__device__ __forceinline__ void mma_cp_async_cg16(void* dst, const void* src, int src_bytes = 16) {
#if defined(CUDA_CPU)
    cuda_cpu_cp_async(dst, src, src_bytes, 1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    int4 v = make_int4(0, 0, 0, 0);
    if (src_bytes == 16) v = *reinterpret_cast<const int4*>(src);
    else for (int i = 0; i < src_bytes; i++) reinterpret_cast<char*>(&v)[i] = reinterpret_cast<const char*>(src)[i];
    *reinterpret_cast<int4*>(dst) = v;
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(mma_smem_addr(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
#endif
}
// The cp.async issued since the last commit become one group.
__device__ __forceinline__ void mma_cp_async_commit() {
#if defined(CUDA_CPU)
    cuda_cpu_cp_async_commit();
#elif !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's most recent groups are in flight (copies not yet committed
// are not waited for).
template <int N>
__device__ __forceinline__ void mma_cp_async_wait() {
#if defined(CUDA_CPU)
    CUDA_CPU_CLOBBER();
    cuda_cpu_cp_async_wait(N);
    CUDA_CPU_CLOBBER();
#elif !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// Commits and waits for every copy of this thread.
__device__ __forceinline__ void mma_cp_async_wait_all() {
#if defined(CUDA_CPU)
    CUDA_CPU_CLOBBER();
    cuda_cpu_cp_async_wait(-1);
    CUDA_CPU_CLOBBER();
#elif !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// 2^x (ex2.approx.ftz.f32, what __exp2f is). On the CPU runtime it carries __exp2f's documented
// error (2 ulp). .ftz: without it nvcc wraps each MUFU.EX2 in a compare and two multiplies to reach the
// subnormal results (sm_90 SASS: 207 of the flash forward loop's 1,507 instructions at head size 64,
// 390 of the dQ kernel's 1,699); a softmax weight below 2^-126 is nothing beside its row's largest, 1.
__device__ __forceinline__ float mma_ex2(float x) {
#if defined(CUDA_CPU)
    return __exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#endif
}
