// kernels/classifier.cuh: the fused softmax + cross-entropy at the end of the model, and the
// mean loss, in one launch.
//   fused_classifier: per row i of N rows of Vp logits (the first V are real tokens):
//     losses[i] = logsumexp_{v<V}(logits[i,v]) - logits[i,targets[i]]      OVERWRITES losses (N) fp32
//     write_dlogits: logits[i,v] = (softmax_v - [v == targets[i]]) * dloss for v < V, 0 for v >= V
//                    OVERWRITES the logits in place (floatX) with their gradient
//     loss_acc:      *loss_acc += loss_weight * (sum_i losses[i]) / N     ACCUMULATES one fp32
//                    (when loss_acc is not NULL: the last block to finish its loss sums them all)
// Reference: softmax_forward_cpu, crossentropy_forward_cpu, crossentropy_softmax_backward_cpu.
// fp32 statistics (max, sum of exponentials, loss); each gradient is rounded once to floatX. The
// padding columns V..Vp-1 are never read (they may hold anything) and get gradient 0.
//
// One block per row: pass 1 reads the row once, each thread keeping an online (max, sum of
// exp(x - max)) over its elements, which the block then merges in a fixed tree; pass 2 re-reads
// the row (from L2) and writes the gradient; the padding columns are written, never read. The
// mean loss needs every row's: the block that writes the last one (the fenced last-block pattern,
// a counter in the caller's scratch) sums them, while the others still write their gradients; a
// launch of its own would cost a launch and a gap in the stream every step. Deterministic: fixed
// element-to-thread assignment, merge and summation order, and the counter's atomics only elect
// the block that sums.
//
// Each exponential is one FFMA and one ex2.approx (mma_ex2): e^(x - m) = 2^(x log2e - m log2e), with
// m log2e computed once, as flash_fwd.cuh folds its scale in (expf is about eight instructions
// without fast math). Its error, relative, with u = 2^-24: ex2.approx's 2 ulp (<= 4u), plus the
// argument's roundings times ln 2: (|m| + 1.5 |x - m|) u (the product m log2e rounded once, the
// FFMA once, log2e's float once). For the loss, log(sum) takes the softmax-weighted mean of these,
// and that mean of |x - m| is at most the entropy, ln V: the loss is off by at most
// (4 + |m| + 1.5 ln V) u more than with expf, 3e-6 at |m| = 30 and V = 50257; a probability by
// (4 + |m| + 1.5 |x - m|) u relative, before its one floatX rounding. kernels/test_classifier.cu
// states these bounds as its tolerances.
#pragma once

#include <math.h>
#include <stdint.h>

#include "common.cuh"
#include "mma.cuh"

#define CLASSIFIER_LOG2E 1.4426950408889634f

// e^(x - m) given ml = m * CLASSIFIER_LOG2E (e^-inf = 0: x = -inf or m = -inf with x finite).
__device__ __forceinline__ float classifier_exp(float x, float ml) {
    return mma_ex2(fmaf(x, CLASSIFIER_LOG2E, -ml));
}

#define CLASSIFIER_BLOCK 512  // threads per row: ~12 packs each at V = 50257 in fp16/bf16

// Merges two (max, sum of exp(x - max)) summaries. Symmetric in its arguments bit for bit (the
// two products are added, and fp32 addition commutes), so both lanes of a butterfly agree. An
// empty summary is (-inf, 0).
__device__ inline void classifier_merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == -INFINITY) return;  // both empty
    const float mnl = mn * CLASSIFIER_LOG2E;
    s = s * classifier_exp(m, mnl) + s2 * classifier_exp(m2, mnl);
    m = mn;
}

template <int W>
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
    fused_classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int V, int Vp,
                            int write_dlogits, float* loss_acc, float loss_weight, unsigned* loss_counter) {
    __shared__ float warp_m[CLASSIFIER_BLOCK / 32], warp_s[32];  // warp_s: 32 for block_reduce_sum
    __shared__ int last_flag;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    floatX* x = logits + (size_t)blockIdx.x * Vp;
    const int target = targets[blockIdx.x];
    // Read before the barrier below, so before any thread overwrites the row.
    const float x_target = (float)x[target];

    // Pass 1: this thread's packs p = tid, tid + blockDim, ... over the real columns; the last
    // pack may straddle V (its columns >= V are skipped, whatever they hold).
    float m = -INFINITY, s = 0.0f;
    const int packs_v = (V + W - 1) / W;  // (ceil_div is host-only)
    for (int p = threadIdx.x; p < packs_v; p += blockDim.x) {
        floatx_pack<W> v = pack_load<W>(x + (size_t)p * W);
        float f[W], pm = -INFINITY;
#pragma unroll
        for (int k = 0; k < W; k++) {
            f[k] = p * W + k < V ? (float)v.v[k] : -INFINITY;
            pm = fmaxf(pm, f[k]);
        }
        if (pm > m) {  // rescale once per pack, not per element
            s *= classifier_exp(m, pm * CLASSIFIER_LOG2E);
            m = pm;
        }
        const float ml = m * CLASSIFIER_LOG2E;
#pragma unroll
        for (int k = 0; k < W; k++) s += classifier_exp(f[k], ml);  // e^-inf = 0 for skipped columns
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
        classifier_merge(m, s, m2, s2);
    }
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    // Every thread merges the warps in the same order, so all hold the same bits.
    m = warp_m[0];
    s = warp_s[0];
    for (int w = 1; w < nwarps; w++) classifier_merge(m, s, warp_m[w], warp_s[w]);
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(s) + m - x_target;

    // The mean loss, by the block that writes the last one (every block reaches this point).
    if (loss_acc != NULL && block_last_to_arrive(loss_counter, gridDim.x, &last_flag)) {
        float v = 0.0f;
        for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x) v += __ldcg(losses + i);
        const float total = block_reduce_sum(v, warp_s);  // warp_s is free: every thread has read it
        if (threadIdx.x == 0) *loss_acc += loss_weight * total / gridDim.x;
    }

    // Pass 2: the gradient over the whole padded row (Vp % W == 0 in the 128-bit path); a pack
    // wholly past V is not read: its gradient is 0 whatever the logits hold.
    if (write_dlogits) {
        const float inv_s = 1.0f / s, ml = m * CLASSIFIER_LOG2E;
        const int packs_vp = Vp / W;
        for (int p = threadIdx.x; p < packs_vp; p += blockDim.x) {
            floatx_pack<W> g;
            if (p * W >= V) {
#pragma unroll
                for (int k = 0; k < W; k++) g.v[k] = (floatX)0.0f;
            } else {
                floatx_pack<W> v = pack_load<W>(x + (size_t)p * W);
#pragma unroll
                for (int k = 0; k < W; k++) {
                    int col = p * W + k;
                    float prob = col < V ? classifier_exp((float)v.v[k], ml) * inv_s : 0.0f;
                    float y = col == target ? 1.0f : 0.0f;
                    g.v[k] = (floatX)(col < V ? (prob - y) * dloss : 0.0f);
                }
            }
            pack_store<W>(x + (size_t)p * W, g);
        }
    }
}

// logits (N, Vp) floatX: read; with write_dlogits, overwritten by their gradient (see above).
// losses (N) fp32 overwritten. targets (N) device int32, each in [0, V). dloss = d objective /
// d losses[i], the same for every row (the engine passes loss_scale / (B*T*grad_accum_steps)).
// loss_acc: NULL, or one fp32 on the device that gets += loss_weight * mean(losses); then
// loss_counter is one unsigned on the device, 0 before the call (zeroed memory) and left 0.
// Launch: N blocks of 512 threads, one per row; 128-bit accesses when Vp % X128 == 0 and logits is
// 16-byte aligned, scalar otherwise. No host synchronisation; bit-identical from run to run.
static inline void fused_classifier(floatX* logits, float* losses, const int* targets, float dloss, int N, int V,
                                    int Vp, int write_dlogits, float* loss_acc, float loss_weight,
                                    unsigned* loss_counter, cudaStream_t stream) {
    if (N == 0) return;
    if (Vp % X128 == 0 && aligned16(logits))
        fused_classifier_kernel<X128><<<N, CLASSIFIER_BLOCK, 0, stream>>>(logits, losses, targets, dloss, V, Vp,
                                                                         write_dlogits, loss_acc, loss_weight,
                                                                         loss_counter);
    else
        fused_classifier_kernel<1><<<N, CLASSIFIER_BLOCK, 0, stream>>>(logits, losses, targets, dloss, V, Vp,
                                                                      write_dlogits, loss_acc, loss_weight,
                                                                      loss_counter);
    cudaCheckLaunch("fused_classifier_kernel");
}
