// cooperative_groups/scan.h for the CPU runtime: inclusive_scan and exclusive_scan over a
// thread_block_tile (Hillis-Steele steps of shfl_up). exclusive_scan gives thread 0 a
// value-initialised T, as CUDA's does for its operators.
#ifndef CUDA_CPU_COOPERATIVE_GROUPS_SCAN_H
#define CUDA_CPU_COOPERATIVE_GROUPS_SCAN_H

#include <cooperative_groups.h>

#include <type_traits>

namespace cooperative_groups {

template <unsigned N, class P, class T, class Op>
inline typename std::decay<T>::type inclusive_scan(const thread_block_tile<N, P>& g, T&& value, Op&& op) {
    typename std::decay<T>::type v = value;
    for (unsigned d = 1; d < N; d *= 2) {
        typename std::decay<T>::type u = g.shfl_up(v, d);
        if (g.thread_rank() >= d) v = op(u, v);
    }
    return v;
}
template <unsigned N, class P, class T>
inline typename std::decay<T>::type inclusive_scan(const thread_block_tile<N, P>& g, T&& value) {
    return inclusive_scan(g, value, plus<typename std::decay<T>::type>());
}

template <unsigned N, class P, class T, class Op>
inline typename std::decay<T>::type exclusive_scan(const thread_block_tile<N, P>& g, T&& value, Op&& op) {
    typename std::decay<T>::type v = inclusive_scan(g, value, op);
    typename std::decay<T>::type prev = g.shfl_up(v, 1);
    return g.thread_rank() == 0 ? typename std::decay<T>::type() : prev;
}
template <unsigned N, class P, class T>
inline typename std::decay<T>::type exclusive_scan(const thread_block_tile<N, P>& g, T&& value) {
    return exclusive_scan(g, value, plus<typename std::decay<T>::type>());
}

}  // namespace cooperative_groups

#endif
