// kernels/wgmma.cuh: Hopper's warpgroup matrix product (sm_90a) at the PTX level, for the flash
// kernels' Hopper path (kernels/flash_wgmma.cuh): wgmma.mma_async m64nNk16 (N = 32 or 64; f16 or bf16
// in, f32 accumulate; A from registers, B from shared memory), its fence, commit and wait, the shared-memory matrix descriptors, and the tile layout they read.
//
// Why: mma.sync runs at about 65% of Hopper's dense tensor peak, wgmma at about 96% (Luo et al.,
// arXiv 2402.13499 and 2501.12084: 494 and 728 of an H800's 757 TFLOP/s); FlashAttention-3 is built on
// it. One wgmma is issued by each warp of a warpgroup (4 consecutive warps, 128 threads) and computes
// a 64 x N x 16 product: warp w % 4 owns rows 16 (w % 4) .. +15 of A and D, and B is read from shared
// memory once for all four.
//
// Under nvcc each function is one inline PTX instruction, compiled only for sm_90a (arch-specific
// features: -arch=sm_90a, __CUDA_ARCH_FEAT_SM90_ALL); elsewhere a kernel built from them traps, and
// the host launches them only where flash_wgmma_available() (kernels/flash_wgmma.cuh) says so. Under
// the CPU runtime (test/cuda_cpu) each calls the runtime, which implements the PTX ISA's layouts and
// the asynchrony (operands read at issue, D written at the wait that covers it, aborting if the
// kernel touched them in between; test/cuda_cpu/README.md, "Warpgroup matrix primitives").
//
// Register layouts (the PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma;
// g = lane >> 2, t = lane % 4, rows counted from the warp's first of the 64):
//   A from registers, uint32_t a[4]: mma.m16n8k16's A fragment of the warp's 16 x 16:
//     a[0] = A[g][2t..+1]  a[1] = A[g+8][2t..+1]  a[2] = A[g][2t+8..+9]  a[3] = A[g+8][2t+8..+9]
//     (so mma_pack_a of two accumulator slices is one, as for mma.sync)
//   D, float d[N/8][4]: for each 8-column slice j, d[j][0..1] = D[g][8j+2t..+1], d[j][2..3] = D[g+8][..]
//     (mma.m16n8k16's C layout, slice after slice)
// Shared memory, no swizzle: an operand is made of core matrices, 8 rows of 16 bytes (8 elements), 128
// contiguous bytes; the descriptor gives the byte distance between core matrices adjacent along K
// (LBO) and along M or N (SBO). A K-major operand's core-matrix row is one M/N index and 8 K indices;
// an MN-major one's (imm-trans = 1) one K index and 8 M/N indices.
//
// The tile layout (WgTile): a tile of R rows x HS columns (keys or queries x head dimension) stored as
// core matrices, the 16 bytes of row r, columns 8c..8c+7 at element offset
//   ((r / 8) * (HS / 8) + c) * 64 + (r % 8) * 8.
// Every group of 8 rows is HS / 8 core matrices side by side, so the tile serves both uses:
//   rows along N (or M), HS along K (K-major: S = Q K^T's K, B): k-step kc starts at column 16 kc,
//     LBO = 128 bytes, SBO = HS / 8 * 128 bytes;
//   rows along K, HS along N (MN-major: O += P V's V, B, imm-trans-b 1): k-step kc starts at row 16 kc,
//     LBO = HS / 8 * 128 bytes, SBO = 128 bytes.
// A block's threads copying a tile give thread-chunk q (16 bytes) shared offset 16 q: chunk q is row
// (q / (8 * HS / 8)) * 8 + q % 8, columns 8 ((q / 8) % (HS / 8)) .. (wg_tile_rows_load): 8 consecutive
// threads write 128 consecutive bytes (no bank conflicts) and read 8 rows' same 16 bytes.
#pragma once

#include <stdint.h>
#include <type_traits>

#include "mma.cuh"

#if defined(CUDA_CPU) || (defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL))
#define WGMMA_AVAILABLE 1  // this compilation has the instructions (the CPU runtime, or nvcc for sm_90a)
#endif

// Element offset of row r, column c (a multiple of 8) in a tile of HS columns (the layout above).
template <int HS>
__device__ __forceinline__ int wg_tile_offset(int r, int c) {
    return ((r >> 3) * (HS / 8) + (c >> 3)) * 64 + (r & 7) * 8;
}

// A shared-memory matrix descriptor, no swizzle, as its two 32-bit words: lo holds the start address
// >> 4 (bits 0-13) and LBO >> 4 (bits 16-29), hi SBO >> 4 (bits 0-13). Moving the start by a
// multiple of 16 bytes adds to lo alone: shared memory ends below 2^18 bytes, so the address field
// never carries into LBO's. A kernel computes a tile's descriptor once and steps it per product.
struct WgDesc {
    uint32_t lo, hi;
};
__device__ __forceinline__ WgDesc wg_desc(const void* p, uint32_t lbo_bytes, uint32_t sbo_bytes) {
#if defined(CUDA_CPU)
    const uint32_t a = cuda_cpu_smem_offset(p);
#else
    const uint32_t a = mma_smem_addr(p);
#endif
    return WgDesc{((a >> 4) & 0x3fffu) | ((lbo_bytes >> 4) & 0x3fffu) << 16, (sbo_bytes >> 4) & 0x3fffu};
}
// The 64-bit descriptor of d's operand moved by `bytes` (a multiple of 16).
__device__ __forceinline__ uint64_t wg_desc_at(WgDesc d, uint32_t bytes) {
    return (uint64_t)d.hi << 32 | (d.lo + (bytes >> 4));
}

// A WgTile<HS> tile's descriptors: rows along N or M (K-major), or rows along K (MN-major, imm-trans
// 1); and the bytes from k-step 0 to k-step kc (16 along K) in each.
template <int HS, class T>
__device__ __forceinline__ WgDesc wg_tile_kmajor(const T* tile) { return wg_desc(tile, 128, HS / 8 * 128); }
template <int HS, class T>
__device__ __forceinline__ WgDesc wg_tile_mnmajor(const T* tile) { return wg_desc(tile, HS / 8 * 128, 128); }
template <int HS, class T>
__host__ __device__ constexpr uint32_t wg_kstep_kmajor(int kc) { return kc * 2 * 64 * (uint32_t)sizeof(T); }
template <int HS, class T>
__host__ __device__ constexpr uint32_t wg_kstep_mnmajor(int kc) { return kc * 2 * (HS / 8) * 64 * (uint32_t)sizeof(T); }
// k-step kc's 64-bit descriptors at once (tests; kernels step a WgDesc).
template <int HS, class T>
__device__ __forceinline__ uint64_t wg_desc_kmajor(const T* tile, int kc) {
    return wg_desc_at(wg_tile_kmajor<HS>(tile), wg_kstep_kmajor<HS, T>(kc));
}
template <int HS, class T>
__device__ __forceinline__ uint64_t wg_desc_mnmajor(const T* tile, int kc) {
    return wg_desc_at(wg_tile_mnmajor<HS>(tile), wg_kstep_mnmajor<HS, T>(kc));
}

// wgmma.fence.sync.aligned: orders this warp's register accesses before the next mma_async's.
__device__ __forceinline__ void wgmma_fence() {
#if defined(CUDA_CPU)
    CUDA_CPU_CLOBBER();
    cuda_cpu_wgmma_fence();
#elif defined(WGMMA_AVAILABLE)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
// wgmma.commit_group.sync.aligned: the mma_async issued since the last commit become one group.
__device__ __forceinline__ void wgmma_commit() {
#if defined(CUDA_CPU)
    cuda_cpu_wgmma_commit();
#elif defined(WGMMA_AVAILABLE)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
// wgmma.wait_group.sync.aligned N: waits until at most N groups are in flight. The accumulators the
// completed groups wrote are then passed through wgmma_hold, so the compiler reads them after it.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(CUDA_CPU)
    CUDA_CPU_CLOBBER();
    cuda_cpu_wgmma_wait(N);
    CUDA_CPU_CLOBBER();
#elif defined(WGMMA_AVAILABLE)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
}
// Ties accumulators to this point of the program (an empty asm that reads and writes each): used after
// wgmma_wait, so no read of them moves above the wait, and before an mma_async that accumulates into
// them, so every write to them comes first.
template <int S>
__device__ __forceinline__ void wgmma_hold(float (&d)[S][4]) {
#if !defined(CUDA_CPU)
#pragma unroll
    for (int j = 0; j < S; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) asm volatile("" : "+f"(d[j][i])::"memory");
#endif
}

#if defined(WGMMA_AVAILABLE) && !defined(CUDA_CPU)
// The asm operand lists: 16 or 32 accumulators, then the operands after them.
#define WG_D16(d)                                                                                                  \
    "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),        \
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),     \
        "+f"(d[3][2]), "+f"(d[3][3])
#define WG_D32(d)                                                                                                  \
    WG_D16(d), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]),            \
        "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]),     \
        "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define WG_R16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define WG_R32                                                                                                     \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,"   \
    "%29,%30,%31}"
// A from registers (4 operands), B's descriptor, scale-d (a predicate from a register), imm-trans-b.
#define WG_RS(SHAPE, TYPE, DREGS, AREGS, DESC, SC, TB)                                                             \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %" SC ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " "  \
    DREGS ", {" AREGS "}, %" DESC ", p, 1, 1, %" TB ";\n}\n"
#endif

// d (+)= A B for the 64 x N x 16 product of the warpgroup: A this warp's 16 rows from registers a, B
// through b_desc (TRANS_B: MN-major); scale_d 0 ignores d's old values. Asynchronous: d is written at
// the wgmma_wait covering the next wgmma_commit, and neither d nor a may be touched until then.
template <class T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b_desc, int scale_d);

#if defined(CUDA_CPU)
template <class T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
    static_assert(N == 32 || N == 64, "wgmma_rs: N = 32 or 64");
    CUDA_CPU_CLOBBER();
    cuda_cpu_wgmma(&d[0][0], N, a, b_desc, scale_d, TRANS_B,
                   std::is_same<T, __half>::value ? CUDA_CPU_F16 : CUDA_CPU_BF16);
    CUDA_CPU_CLOBBER();
}
#else
template <class T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
    static_assert(N == 32 || N == 64, "wgmma_rs: N = 32 or 64");
#if defined(WGMMA_AVAILABLE)
    constexpr bool f16 = std::is_same<T, __half>::value;
    if constexpr (N == 64 && f16)
        asm volatile(WG_RS("m64n64k16", "f16", WG_R32, "%32,%33,%34,%35", "36", "37", "38")
                     : WG_D32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(TRANS_B));
    else if constexpr (N == 64)
        asm volatile(WG_RS("m64n64k16", "bf16", WG_R32, "%32,%33,%34,%35", "36", "37", "38")
                     : WG_D32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(TRANS_B));
    else if constexpr (f16)
        asm volatile(WG_RS("m64n32k16", "f16", WG_R16, "%16,%17,%18,%19", "20", "21", "22")
                     : WG_D16(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(TRANS_B));
    else
        asm volatile(WG_RS("m64n32k16", "bf16", WG_R16, "%16,%17,%18,%19", "20", "21", "22")
                     : WG_D16(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(TRANS_B));
#else
    __trap();
#endif
}
#endif
