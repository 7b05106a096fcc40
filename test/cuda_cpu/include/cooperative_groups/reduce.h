// cooperative_groups/reduce.h for the CPU runtime: cg::reduce over a thread_block_tile. A butterfly
// of shfl_xor steps, so every thread of the tile gets the result (as CUDA's does); with a commutative
// operator every thread holds the same bits. On a GPU the order of the combinations is unspecified:
// a float sum may round differently there, so compare it with a tolerance.
#ifndef CUDA_CPU_COOPERATIVE_GROUPS_REDUCE_H
#define CUDA_CPU_COOPERATIVE_GROUPS_REDUCE_H

#include <cooperative_groups.h>

#include <type_traits>
#include <utility>

namespace cooperative_groups {

template <unsigned N, class P, class T, class Op>
inline typename std::decay<T>::type reduce(const thread_block_tile<N, P>& g, T&& value, Op&& op) {
    typename std::decay<T>::type v = value;
    for (unsigned offset = N / 2; offset > 0; offset /= 2) v = op(v, g.shfl_xor(v, (int)offset));
    return v;
}

}  // namespace cooperative_groups

#endif
