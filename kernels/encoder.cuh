// kernels/encoder.cuh: the token + position embedding, forward and backward.
//   encoder_forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]          OVERWRITES out (B,T,C) floatX
//   encoder_backward: dwte[tok,:] += sum of dout over the positions holding tok,
//                     dwpe[t,:]   += sum over b of dout[b,t,:]          ACCUMULATE (floatX)
//                     (or dwpe[t,:] = , OVERWRITE, for t < T with accumulate_wpe 0: the first
//                     micro-step of a step; dwte always accumulates, as the classifier's product,
//                     wte being tied to it, writes that gradient first)
// Reference: encoder_forward_cpu / encoder_backward_cpu (which also accumulates).
// fp32 math; every stored floatX is rounded once (forward: the sum; backward: old value + fp32 sum).
//
// The backward pass is deterministic without float atomics: the host groups positions by token
// (encoder_backward_plan, from the inputs the engine already has on the host), and each output row
// is then summed by warps that own it, in a fixed order, and written by exactly one thread per
// element. Order of a row's sum (what makes it bit-reproducible): its positions in increasing
// order (for dwpe: b = 0..B-1), summed sequentially in fp32. One exception, for speed: a token
// with more than ENCODER_SPLIT_MIN positions (a frequent token) has them cut into
// ENCODER_BWD_WARPS contiguous pieces, summed in parallel by the warps of one block, and the piece
// sums are then added in piece order (still a fixed order): a sequential sum over thousands of
// rows would leave one warp running long after the rest of the kernel has finished.
#pragma once

#include <stdint.h>

#include <algorithm>

#include "common.cuh"
#include "sizes.h"

// ---- forward ----

// One thread per W output channels of one position. W = X128 when every row starts 16-byte
// aligned (C % X128 == 0 and aligned bases), else 1.
template <int W>
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int BT,
                                       int T, int C) {
    int packs = C / W;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * packs) return;
    int bt = (int)(i / packs), c = (int)(i % packs) * W;
    int t = bt % T;
    floatx_pack<W> te = pack_load<W>(wte + (size_t)inp[bt] * C + c);
    floatx_pack<W> pe = pack_load<W>(wpe + (size_t)t * C + c);
    floatx_pack<W> o;
#pragma unroll
    for (int k = 0; k < W; k++) o.v[k] = (floatX)((float)te.v[k] + (float)pe.v[k]);
    pack_store<W>(out + (size_t)bt * C + c, o);
}

// out (B,T,C) floatX, overwritten; inp: device int32 (B*T) token ids in [0, rows of wte);
// wte (V,C), wpe (>= T, C). Launch: 256 threads, one per 16 bytes of output (or per element
// when C % X128 != 0 or a base is not 16-byte aligned).
static inline void encoder_forward(floatX* out, const int* inp, const floatX* wte, const floatX* wpe, int B, int T,
                                   int C, cudaStream_t stream) {
    const int block = 256;
    int BT = B * T;
    if (BT == 0 || C == 0) return;
    if (C % X128 == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe)) {
        size_t n = (size_t)BT * (C / X128);
        encoder_forward_kernel<X128><<<(unsigned)ceil_div_size(n, block), block, 0, stream>>>(out, inp, wte, wpe, BT,
                                                                                             T, C);
    } else {
        size_t n = (size_t)BT * C;
        encoder_forward_kernel<1><<<(unsigned)ceil_div_size(n, block), block, 0, stream>>>(out, inp, wte, wpe, BT, T,
                                                                                          C);
    }
    cudaCheckLaunch("encoder_forward_kernel");
}

// ---- backward: the plan ----
//
// The plan is one int array the engine builds on the host each step and copies to the device in
// one memcpy:
//   plan[0 .. BT)                         positions 0..BT-1 sorted by (token, position)
//   plan[BT + 4*s .. BT + 4*s + 4)        slot s = (token, start, count, group), s < 16 * plan_blocks
// Slot s is the work of warp s % ENCODER_BWD_WARPS of block s / ENCODER_BWD_WARPS: a piece of the
// token's run, the positions plan[start .. start+count); group, at the slot that writes the row,
// is how many consecutive slots (this one first) hold its pieces, and 0 for the other pieces and
// for empty slots (count 0). Blocks of split runs come first, longest first: they take longest,
// so they should start first. Each token appears in one group only, so no two warps write a row.
// The dwpe rows need no plan: the launch adds ceil(T / 16) blocks, one warp per t.
// ENCODER_BWD_WARPS (warps, slots, per block) and encoder_plan_ints: kernels/sizes.h
#define ENCODER_SPLIT_MIN 64  // runs with more positions are split over all the block's warps

// Of those, the ints a plan of plan_blocks blocks uses: enough to copy to the device.
static inline size_t encoder_plan_used_ints(int BT, int plan_blocks) {
    return (size_t)BT + 4 * (size_t)ENCODER_BWD_WARPS * plan_blocks;
}

// One stable counting-sort pass of positions by byte `shift/8` of their token: src (nullptr means
// the positions 0..BT-1 in order) into dst. Stable, so positions stay in increasing order.
static inline void encoder_plan_radix_pass(int* dst, const int* src, const int* inp, int BT, int shift) {
    int count[257] = {0};
    for (int i = 0; i < BT; i++) count[((inp[src ? src[i] : i] >> shift) & 255) + 1]++;
    for (int d = 0; d < 256; d++) count[d + 1] += count[d];
    for (int i = 0; i < BT; i++) {
        int pos = src ? src[i] : i;
        dst[count[(inp[pos] >> shift) & 255]++] = pos;
    }
}

// Builds the plan for the host inputs inp (BT = B*T token ids >= 0) into plan
// (encoder_plan_ints(BT) ints), using keys (BT int64, caller-owned host scratch: nothing is
// allocated). Returns plan_blocks, the number of plan blocks, which encoder_backward takes as is.
// Cost: one radix pass over the positions per byte of the largest token id (2 for GPT-2), and a
// sort of the split runs only (at most BT/65): about 0.4 ms for BT = 65536 on one core.
static inline int encoder_backward_plan(int* plan, int64_t* keys, const int* inp, int BT) {
    // 1. positions sorted by (token, position): LSD radix sort by token, ping-ponging through the
    //    plan's slot area (free until step 3, and at least 4*BT ints long); the last pass lands in
    //    plan[0 .. BT).
    int max_token = 0;
    for (int i = 0; i < BT; i++) max_token = inp[i] > max_token ? inp[i] : max_token;
    int passes = 1;
    while (passes < 4 && (max_token >> (8 * passes)) != 0) passes++;
    const int* src = nullptr;
    for (int p = 0; p < passes; p++) {
        int* dst = p == passes - 1 ? plan : plan + BT * (1 + (p & 1));
        encoder_plan_radix_pass(dst, src, inp, BT, 8 * p);
        src = dst;
    }
    // 2. the split runs, longest first: keys get (BT - count, start), so ties go by start, that is
    //    by token, and the order is fixed.
    int split = 0;
    for (int i = 0; i < BT;) {
        int j = i + 1;
        while (j < BT && inp[plan[j]] == inp[plan[i]]) j++;
        if (j - i > ENCODER_SPLIT_MIN) keys[split++] = ((int64_t)(BT - (j - i)) << 32) | (int64_t)i;
        i = j;
    }
    std::sort(keys, keys + split);
    // 3. slots: a row of > ENCODER_SPLIT_MIN positions takes a whole block (one piece per warp);
    //    shorter rows take one slot each, packed ENCODER_BWD_WARPS to a block.
    int* slots = plan + BT;
    int used = 0;  // slots written so far
    auto emit = [&](int dest, int start, int count, int group) {
        int* s = slots + 4 * used++;
        s[0] = dest, s[1] = start, s[2] = count, s[3] = group;
    };
    auto pad_block = [&]() {
        while (used % ENCODER_BWD_WARPS) emit(0, 0, 0, 0);
    };
    auto add_run = [&](int token, int start, int count) {
        if (count > ENCODER_SPLIT_MIN) {
            pad_block();
            for (int q = 0; q < ENCODER_BWD_WARPS; q++) {
                int lo = (int)((int64_t)count * q / ENCODER_BWD_WARPS);
                int hi = (int)((int64_t)count * (q + 1) / ENCODER_BWD_WARPS);
                emit(token, start + lo, hi - lo, q == 0 ? ENCODER_BWD_WARPS : 0);
            }
        } else {
            emit(token, start, count, 1);
        }
    };
    // Split runs first (longest first), then the short runs in token order: split runs start at
    // block boundaries, so padding is needed only at the very end.
    for (int r = 0; r < split; r++) {
        int start = (int)(keys[r] & 0xffffffff);
        add_run(inp[plan[start]], start, BT - (int)(keys[r] >> 32));
    }
    for (int i = 0; i < BT;) {
        int j = i + 1;
        while (j < BT && inp[plan[j]] == inp[plan[i]]) j++;
        if (j - i <= ENCODER_SPLIT_MIN) add_run(inp[plan[i]], i, j - i);
        i = j;
    }
    pad_block();
    return used / ENCODER_BWD_WARPS;
}

// ---- backward: the kernel ----

// Blocks [0, plan_blocks): one plan block each; blocks after that: dwpe rows, warp w of block k
// taking t = k*ENCODER_BWD_WARPS + w (positions b*T + t, b = 0..B-1). blockIdx.y = which 32*W
// channels. Each warp sums its positions in order for its lane's W channels (fp32), then the
// group's leader adds the group's piece sums in slot order to the row, rounding once. At least 2 blocks per SM
// caps registers at 64: with nvcc 13.0 no width then spills, and an SM holds 32 warps.
template <int W>
__global__ void __launch_bounds__(32 * ENCODER_BWD_WARPS, 2)
    encoder_backward_kernel(floatX* dwte, floatX* dwpe, const floatX* dout, const int* plan, int plan_blocks, int B,
                            int T, int C, int accumulate_wpe) {
    // Piece sums, [warp][k][lane] so that the lanes of a warp touch consecutive banks.
    __shared__ float partial[ENCODER_BWD_WARPS][W][32];
    const int BT = B * T;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // dest >= 0: token dest's positions plan[start + i]; dest < 0: dwpe row t = -1 - dest, the
    // positions (start + i) * T + t.
    int dest, start, count, group;
    if ((int)blockIdx.x < plan_blocks) {
        const int* slot = plan + BT + 4 * ((size_t)blockIdx.x * ENCODER_BWD_WARPS + warp);
        dest = slot[0], start = slot[1], count = slot[2], group = slot[3];
    } else {
        int t = ((int)blockIdx.x - plan_blocks) * ENCODER_BWD_WARPS + warp;
        dest = -1 - t, start = 0, count = t < T ? B : 0, group = t < T ? 1 : 0;
    }
    const int c = (blockIdx.y * 32 + lane) * W;
    const bool active = c < C;  // C % W == 0, so a lane's pack is all in or all out
    const floatX* src = dout + c;

    float acc[W];
#pragma unroll
    for (int k = 0; k < W; k++) acc[k] = 0.0f;
    // 32 positions at a time: each lane fetches one row index (a coalesced read of the plan), then
    // the warp walks them in order, U loads in flight before the U ordered adds (U * 16 bytes per
    // lane at 128-bit width: enough to cover the memory latency without spilling registers).
    constexpr int U = W >= 4 ? 4 : 8;
    for (int base = 0; base < count; base += 32) {
        int m = min(32, count - base);
        int my_row = 0;
        if (lane < m) my_row = dest >= 0 ? plan[start + base + lane] : (start + base + lane) * T + (-1 - dest);
        for (int j = 0; j < m; j += U) {
            floatx_pack<W> v[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int row = __shfl_sync(0xffffffffu, my_row, (j + u) & 31);
                if (active && j + u < m) v[u] = pack_load<W>(src + (size_t)row * C);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (active && j + u < m) {
#pragma unroll
                    for (int k = 0; k < W; k++) acc[k] += (float)v[u].v[k];
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < W; k++) partial[warp][k][lane] = acc[k];
    __syncthreads();  // every thread reaches it: no early exit above
    if (group > 0 && active) {
        float sum[W];
#pragma unroll
        for (int k = 0; k < W; k++) sum[k] = partial[warp][k][lane];
        for (int s = 1; s < group; s++) {
#pragma unroll
            for (int k = 0; k < W; k++) sum[k] += partial[warp + s][k][lane];
        }
        floatX* dst = (dest >= 0 ? dwte + (size_t)dest * C : dwpe + (size_t)(-1 - dest) * C) + c;
        floatx_pack<W> old, o;
        if (dest >= 0 || accumulate_wpe) {
            old = pack_load<W>(dst);
        } else {
#pragma unroll
            for (int k = 0; k < W; k++) old.v[k] = (floatX)0.0f;  // + 0: the same bits as after a memset
        }
#pragma unroll
        for (int k = 0; k < W; k++) o.v[k] = (floatX)((float)old.v[k] + sum[k]);
        pack_store<W>(dst, o);
    }
}

// dwte (V,C) += and dwpe (>= T, C) += (floatX, accumulated; rows t < T of dwpe overwritten instead
// with accumulate_wpe 0), from dout (B,T,C) floatX and d_plan,
// the device copy of encoder_backward_plan's plan (at least its first
// encoder_plan_used_ints(B*T, plan_blocks) ints), plan_blocks = that call's return value.
// Launch: grid (plan_blocks + ceil(T/16), ceil(C / (32*W))) of 32*ENCODER_BWD_WARPS = 512
// threads, W = X128 when C % X128 == 0 and the bases are 16-byte aligned, else 1. No scratch, no
// atomics; the same inputs give bit-identical results.
static inline void encoder_backward(floatX* dwte, floatX* dwpe, const floatX* dout, const int* d_plan, int plan_blocks,
                                    int B, int T, int C, int accumulate_wpe, cudaStream_t stream) {
    if (B * T == 0 || C == 0) return;
    const int block = 32 * ENCODER_BWD_WARPS;
    const int blocks = plan_blocks + ceil_div(T, ENCODER_BWD_WARPS);
    if (C % X128 == 0 && aligned16(dwte) && aligned16(dwpe) && aligned16(dout)) {
        dim3 grid(blocks, ceil_div(C, 32 * X128));
        encoder_backward_kernel<X128><<<grid, block, 0, stream>>>(dwte, dwpe, dout, d_plan, plan_blocks, B, T, C, accumulate_wpe);
    } else {
        dim3 grid(blocks, ceil_div(C, 32));
        encoder_backward_kernel<1><<<grid, block, 0, stream>>>(dwte, dwpe, dout, d_plan, plan_blocks, B, T, C, accumulate_wpe);
    }
    cudaCheckLaunch("encoder_backward_kernel");
}
