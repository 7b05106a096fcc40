// cooperative_groups.h for the CPU runtime: the subset of CUDA's cooperative groups that block- and
// warp-level kernels use, built on the runtime's barriers and warp intrinsics (cuda_cpu.h). CUDA's
// own header needs nvcc (it includes cuda/std); under g++ this one is found first
// (-Itest/cuda_cpu/include). What is here: this_thread_block() (sync, thread_rank, size,
// num_threads, group_index, thread_index, dim_threads, group_dim), tiled_partition<N>() for N = 1,
// 2, 4, 8, 16, 32 (sync, thread_rank, size, num_threads, meta_group_rank, meta_group_size, shfl,
// shfl_up, shfl_down, shfl_xor of any trivially copyable type, any, all, ballot, match_any), cg::sync(g); reduce, inclusive_scan
// and exclusive_scan with plus, less, greater, bit_and, bit_or, bit_xor or any callable
// (cooperative_groups/reduce.h, scan.h). Anything else (grid groups, coalesced groups, memcpy_async)
// is a compile error, not a wrong result.
#ifndef CUDA_CPU_COOPERATIVE_GROUPS_H
#define CUDA_CPU_COOPERATIVE_GROUPS_H

#ifndef CUDA_CPU_H
#error "this cooperative_groups.h is the CPU runtime's (test/cuda_cpu); nvcc uses CUDA's own"
#endif

namespace cooperative_groups {

class thread_block {
  public:
    void sync() const { __syncthreads(); }
    static void barrier_wait() { __syncthreads(); }
    unsigned long long thread_rank() const { return cuda_cpu_linear_tid; }
    unsigned long long num_threads() const { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
    unsigned long long size() const { return num_threads(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 dim_threads() const { return blockDim; }
    dim3 group_dim() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }

// N consecutive threads of the block (by thread_rank), N a power of two up to 32: they lie in one
// warp, and their warp operations use the mask of the tile.
template <unsigned N, class Parent = void>
class thread_block_tile {
    static_assert(N == 1 || N == 2 || N == 4 || N == 8 || N == 16 || N == 32,
                  "cuda_cpu cooperative groups: tiles of 1, 2, 4, 8, 16 or 32 threads");

  public:
    static constexpr unsigned num_threads() { return N; }
    static constexpr unsigned size() { return N; }
    unsigned thread_rank() const { return cuda_cpu_linear_tid % N; }
    unsigned meta_group_rank() const { return cuda_cpu_linear_tid / N; }
    unsigned meta_group_size() const {
        unsigned long long n = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
        return (unsigned)((n + N - 1) / N);
    }
    unsigned mask() const {
        return N == 32 ? 0xffffffffu : ((1u << N) - 1u) << ((cuda_cpu_linear_tid & 31u) / N * N);
    }
    void sync() const { __syncwarp(mask()); }
    // A tile's shuffles take any trivially copyable type, as CUDA's do: one wider than 8 bytes (a
    // uint4, a struct) moves as 4-byte pieces, a warp shuffle each.
    template <class T> T shfl(T v, int src) const {
        return pieces(v, [&](auto x) { return __shfl_sync(mask(), x, src, N); });
    }
    template <class T> T shfl_up(T v, unsigned d) const {
        return pieces(v, [&](auto x) { return __shfl_up_sync(mask(), x, d, N); });
    }
    template <class T> T shfl_down(T v, unsigned d) const {
        return pieces(v, [&](auto x) { return __shfl_down_sync(mask(), x, d, N); });
    }
    template <class T> T shfl_xor(T v, int m) const {
        return pieces(v, [&](auto x) { return __shfl_xor_sync(mask(), x, m, N); });
    }
    template <class T, class F> static T pieces(T v, F one) {
        if constexpr (sizeof(T) <= 8) {
            return one(v);
        } else {
            unsigned w[(sizeof(T) + 3) / 4] = {};
            memcpy((void*)w, (const void*)&v, sizeof(T));
            for (unsigned& x : w) x = one(x);
            T out;
            memcpy((void*)&out, (const void*)w, sizeof(T));
            return out;
        }
    }
    int any(int p) const { return __any_sync(mask(), p); }
    int all(int p) const { return __all_sync(mask(), p); }
    unsigned ballot(int p) const {
        unsigned b = __ballot_sync(mask(), p);
        return N == 32 ? b : (b >> ((cuda_cpu_linear_tid & 31u) / N * N)) & ((1u << N) - 1u);
    }
    template <class T> unsigned match_any(T v) const {
        unsigned b = __match_any_sync(mask(), v);
        return N == 32 ? b : (b >> ((cuda_cpu_linear_tid & 31u) / N * N)) & ((1u << N) - 1u);
    }
};

template <unsigned N, class P>
inline thread_block_tile<N> tiled_partition(const P&) { return thread_block_tile<N>(); }

template <class G> inline void sync(const G& g) { g.sync(); }

// Reduction operators (functors that combine two values).
template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

}  // namespace cooperative_groups

#endif  // CUDA_CPU_COOPERATIVE_GROUPS_H
