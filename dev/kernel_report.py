#!/usr/bin/env python3
"""kernel_report.py: the kernel report's tables from the counts dev/kernel_report.sh made, and the
model's calibration against published GPU measurements.

The counts: one line per op of a training step (the CPU runtime's CUDA_CPU_COUNT), for 1 and 2 layers
at micro-batch 1 and 2, T = 1024. Every count of a step is bilinear in (layers L, batch B): the
embedding, classifier and optimizer work once, each layer's work L times, activations in proportion to
B. Four runs fix a + b L + c B + d L B for every kernel, which gives d12 (L = 12) and d48 (L = 48) at
any B exactly (up to the rounding of a grid size). llm.c's train_gpt2.cu is counted the same way.

THE MODEL, second version. Written here before it was applied; the first version (a roofline: tensor
time at the dense peak, every cuBLASLt product at 80% of it, no special functions, no instruction
issue) was a lower bound on time, and published measurements of the same instructions said so.
Its wgmma terms (wgmma's rate, HGMMA in the instruction-issue term, the add rule's check against
FlashAttention-3's ablation, the counts each GPU takes) came with the flash kernels' wgmma path,
written here before they were applied. Each term, with the published figure it comes from:
  GPU (datasheets, NVIDIA's H100 SXM5, H200, A100 SXM4 80GB, RTX A6000, L40S; the CUDA programming
    guide's compute capability tables): SMs, DRAM bandwidth, shared memory, threads and blocks per SM,
    and the dense fp16/bf16 peak with fp32 accumulate, whose clock is the one every rate below uses:
    peak / (SMs x tensor FLOPs a clock an SM: 4096 on sm_90, 2048 on sm_80, 1024 on sm_86/89), 1.83 GHz
    on an H100 SXM (FlashAttention-3 paper, arXiv 2407.08608, section 3.1 and Table 1: 3.9 TFLOP/s of
    special functions = 16 x 132 x 1.83 GHz; 31 TB/s of shared memory = 128 B x 132 x 1.83 GHz).
  Per kernel launch of G blocks of n threads, r registers a thread (ptxas, sm_90a: the code an H100
    runs, a superset of sm_90's), s bytes of shared memory a block:
    blocks per SM  = min(the GPU's blocks per SM, floor(threads per SM / n),
                         floor(65536 / (warps * ceil(32 r / 256) * 256)),
                         floor(shared memory per SM / (s + 1024)))
    waves          = ceil(G / (SMs * blocks per SM)); filled = G / (waves * SMs * blocks per SM)
    t_dram   = 32 * (sectors read + sectors written) / (0.90 * DRAM bandwidth)
               (each 32-byte sector the launch touches moves once: re-reads hit L2; 0.90: streaming
               copies reach 85-96% of HBM, RRZE-HPC gpu-benches on A100 and H100)
    t_smem   = shared-memory bytes / (128 bytes a clock * clock * SMs)   (no bank conflicts)
    t_tensor = mma_flops / (r_mma * peak) + wgmma_flops / (r_wgmma * peak): each tensor instruction's
               FLOPs (the runtime counts the two apart) at the rate of that instruction, of the dense
               peak. mma.sync m16n8k16 (and WMMA, which compiles to it): r_mma = 494/757 = 0.653 on
               sm_90 (Luo et al., arXiv 2402.13499 and 2501.12084: 494 of 757 TFLOP/s on an H800), 0.95
               on sm_80 (the same papers: above 95% on an A100); sm_86/89: no published figure, the
               A100's taken. wgmma (sm_90a's warpgroup instruction, the flash kernels' Hopper path):
               r_wgmma = 0.96 on sm_90 (the same papers: dense FP16/BF16 wgmma with FP32 accumulate
               reaches about 96% of that 757 TFLOP/s peak, where mma.sync reaches 494); the other GPUs
               here have no wgmma, and run the mma.sync kernels (the counts each GPU takes, below)
    t_sfu    = 32 * special-function warp instructions / (16 a clock * clock * SMs): counted by the
               runtime (ex2, exp, tanh, rsqrt, reciprocal ...: test/cuda_cpu/README.md, "Counting"); 16
               lanes a clock an SM on sm_80 and sm_90 (the CUDA programming guide's throughput table)
    t_issue  = warp instructions / (4 a clock * clock * SMs): 4 schedulers an SM, one instruction a
               clock each (sm_80, sm_90). The instructions: for a kernel whose hot loop is in the SASS
               (make sass-mix: the flash kernels), the code outside the loop once a warp (prologue,
               a peeled diagonal tile, epilogue: its static count, each branch counted as run) plus
               the loop's instructions per tensor instruction times the tensor instructions the
               runtime counted less the outside code's (the loop's trips; where a branch skips outside
               tensor instructions, as the diagonal's masked chunks, the trips come out short by what
               the outside code's full count over-counts). Tensor instructions, a warp each: HMMA
               (mma.sync m16n8k16, mma_flops / 4096 counted, WMMA's two a 16x16x16 product among
               them) and HGMMA (wgmma, the runtime's wgmma count, one a warp per instruction as
               nvdisasm lists it, whatever its N);
               for every other kernel, what the runtime counted:
               special functions, shuffles and votes, barriers, atomics, mma.sync, ldmatrix, cp.async,
               WMMA calls, wgmma, global and shared loads and stores (as g++ makes them) - without their
               FP32 and integer arithmetic, which it cannot see, so a lower bound
    Which overlap and which add, by kind:
      a kernel using tensor cores (mma_flops > 0 or wgmma_flops > 0: the flash kernels on either
      instruction, the tiled WMMA ones)
        t = max(t_dram, t_smem, t_tensor + t_sfu + t_other) / filled + 3 us,
        t_other = (instructions - HMMA - HGMMA - special functions) / (4 * clock * SMs):
        the products, the exponentials and the softmax arithmetic ADD: in one warp each waits for the
        one before (S before exp, P before P V), and FlashAttention-2's measured 229 TFLOP/s forward at
        head size 64 is far below what its slowest pipe alone allows (its products at mma.sync's 0.653
        of 989 would run above 550) and near what their sum does; overlapping them is what
        FlashAttention-3 added (its section 3.1). Memory
        traffic overlaps (cp.async double-buffering).
        The same rule for the wgmma kernels, and why, held to a published measurement: ours wait for
        each product before the softmax that needs it (kernels/flash_wgmma.cuh's header: neither
        FlashAttention-3's intra-warpgroup pipelining nor its warp specialisation). FlashAttention-3's
        ablation table (arXiv 2407.08608: forward, head dim 128, seqlen 8k, BF16, H100 SXM)
        measures 661 TFLOP/s with both overlaps, 582 with the intra-warpgroup pipelining removed and
        570 with the warp specialisation removed: one overlap kept. The add rule there, a score at a
        time: 4 x 128 FLOPs at 0.96 x 989.4 TFLOP/s, 0.539 ps; one exponential at 16 a clock an SM
        (132 SMs at 1.83 GHz), 0.259 ps; 4.5 other instructions a score (the row maximum, the
        exponent's fma, the row sum, half a two-score 16-bit pack, the output's rescale of 128
        columns over a 128-key tile: 1) at 4 warp instructions of 32 lanes a clock an SM, 0.146 ps;
        0.943 ps a score, 543 TFLOP/s: below both ablations (no overlap at all is slower than one
        overlap kept), as the rule needs. It stays below 570 for any count above 3.1 other
        instructions a score, and no count reaches 661 (products and exponentials alone: 642):
        FlashAttention-3's full kernel overlaps its exponentials with its products, which ours do
        not.
      every other kernel: t = max(t_dram, t_smem, t_sfu, t_issue) / filled + 3 us: many independent
        warps keep each pipe busy while others wait, so the slowest pipe bounds.
      3 us a launch: the gap between dependent kernels on one stream (stated, not fitted).
  A cuBLASLt product (m, n, k, batch): its tiles of 128 x 128 go out in waves over the SMs,
    t = max(ceil(tiles / SMs) * 2 * 128 * 128 * k / (e * peak / SMs), bytes / (0.90 * bandwidth)) + t0,
    e and t0 fitted (least squares in relative error) to cuBLAS's published FP16 squares on an H100
    SXM (2048^3: 541-555 TFLOP/s, 4096^3: 726-733, 8192^3: 750-762; the results/bench_sm90a.csv-style
    tables of public sm_90 GEMM benchmarks, one idle H100 SXM5, nvjet kernels): K enters through each
    tile's length against the fixed t0, so a short K falls further (d48's K = 1600, d12's 768 lie
    below the table: extrapolated). No published table for the other GPUs here: the H100's e and t0.
  A kernel whose grid is the GPU's SM count (LayerNorm backward: one block an SM) has that GPU's SM
    count of blocks, whatever the counting device (an H100's 132) gave it.
  A memset: bytes / (0.90 * bandwidth) + 2 us.
  A step is the sum over its launches (one stream). MFU = (6 P + 6 L C T) * B T / t / peak (llm.c's
  formula; P the parameters).
  The counts each GPU takes: the runtime's default device is an sm_90, on which the trainer launches
    the flash kernels' wgmma path (kernels/flash_wgmma.cuh): the H100 and H200 take those runs. The
    A100, RTX A6000 and L40S run the mma.sync kernels, which the trainer launches on an emulated
    sm_80 (CUDA_CPU_SM=80): dev/kernel_report.sh counts those runs as well (files named _sm80), and
    these GPUs take them. A counts folder without them (made before the wgmma kernels, which then
    must hold no wgmma) gives every GPU its one set.
  Not modelled: latency at low occupancy beyond the filled fraction, bank conflicts, L2 misses of
  re-read data, clocks below the peak's, wgmma's rate by shape (ours are m64n64k16, m64n32k16 and
  m64nHSk16, B from shared memory; 0.96 is the papers' one figure for the instruction, and a narrow N
  may run below it).
  llm.c on 8 GPUs (its published steps) from its one-GPU counts: ZeRO-1's update (adamw_kernel3 and
  the gradient norm's kernels) on an eighth of the parameters; its first update's initialisation
  (the m and v memsets, copy_and_cast_kernel to the master weights) left out, as a step past the
  first has none; the gradients' reduce-scatter and the parameters' all-gather, (N - 1) / N * 2 P
  bytes each a step at 450 GB/s (common/comm_plan.c's NVLink), added; its attention at cuDNN's
  published rates (FlashAttention-3 paper Fig. 5(b): 288 TFLOP/s forward, head size 64, causal,
  T = 1k, H100; Fig. 6: 348 backward at head size 64, T = 1k, without the causal mask: see
  calibration step 1) on H100 and H200 (the same SMs and clock), FlashAttention-2's published A100
  forward+backward (119 TFLOP/s, causal, head size 64, T = 1k) on an A100 (no cuDNN figure published
  there), its own kernels as counted elsewhere; its published 1558M run's flags (-ge 1).

CALIBRATION STEPS (a term changed from a published measurement, for every kernel alike; never a
per-kernel factor), each with its effect on the calibration table:
  1. llm.c's attention backward on an H100: cuDNN's published backward (348 TFLOP/s) is measured
     without the causal mask, llm.c's is causal. FlashAttention-2's own measurements at the same
     configuration give its causal backward (2.5 / (3.5 / 192 - 1 / 229) = 180 TFLOP/s, Fig. 5(b))
     against its backward without the mask (238, Fig. 6): 0.76; the same ratio makes cuDNN's causal
     backward 263. Effect: llm.c's 1558M step 2.253 -> 2.300 s predicted (-18.1% -> -16.4% of the
     measured 2.75 s); the 124M step (A100, FlashAttention-2's causal figure) unchanged.
  Not changed, and why: the product term (74% of that step) is within 0.3% of cuBLAS's squares, and
  OpenXLA's published H100 table (xla/service/gpu/model/matmul_interpolator_data.h, "sm_90", bf16)
  measures the same sizes faster still (4096^3: 783 TFLOP/s), so no published product figure says
  it is slow; the suspects are the clock (every pipe here runs at the 1.83 GHz of the datasheet's
  peak, which an 8-GPU run at its power limit need not hold, and which a product measured alone does
  not show) and llm.c's own bandwidth-bound kernels (LayerNorm, GELU, the bias gradients: 300 ms of
  that step at 90% of bandwidth). No published figure isolates either, so the model carries the
  error, and says so.
COUNTING CORRECTIONS (how the counts are read, not a rate; applied to every kernel alike), each with
its effect on the kernels of the day it was made:
  1. The code outside a flash kernel's hot loop, once a warp (the instruction term above). The first
     application charged the loop's instructions per HMMA to every counted HMMA and nothing else, so
     the prologue and epilogue went uncounted, and a diagonal tile peeled out of the loop would have
     been charged at the unmasked loop's rate. Effect, on the kernels whose loop still held the
     diagonal's mask: attention at FlashAttention-2's configuration 193.0 -> 183.1 TFLOP/s forward,
     187.9 -> 179.6 forward+backward; the d48 step (H100 SXM, B = 8) 163.7 -> 164.9 ms.
  2. A kernel whose grid is the GPU's SM count (LayerNorm backward, GRID_BY_SMS) was matched by its
     full name ("layernorm_backward_kernel<X128,true>") against the family's ("layernorm_backward"), so
     the rule never applied: on a GPU with fewer SMs than the counting device's 132 its 132 blocks went
     out in two partial waves. Matched by family since. Effect (B = 8, our step; the H100's and
     H200's unchanged, llm.c's too, whose grid is not the SM count): A100 d12 41.82 -> 41.37 ms,
     d48 439.15 -> 435.50; RTX A6000 d12 82.06 -> 81.54, d48 869.45 -> 865.30; L40S d12 47.80 ->
     47.67, d48 458.60 -> 457.57.
The calibration table (the report's, and the JSON's "calibration") says how far each prediction is
from what was measured.

THE PLANNER'S TABLE (--table): the same counts as bilinear coefficients for common/time_model.c, which
applies this model in C for ./train_gpt2 --plan --gpu (one time model, two readers); the JSON's
"planner" holds what planned_step predicts here from the count files for a few configurations, which
test/test_time_model.sh holds the planner to.
"""
import argparse
import json
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

# The GPUs: dense fp16/bf16 tensor peak with fp32 accumulate (TFLOP/s), DRAM (GB/s), SMs, shared memory
# per SM (KiB), threads and blocks per SM, architecture. Sources: NVIDIA's H100 (SXM5), H200 (SXM), A100
# (SXM4 80GB), RTX A6000 and L40S datasheets, the Ampere GA102 (GeForce RTX 3090) and Ada Lovelace
# (GeForce RTX 4090) whitepapers and the CUDA programming guide's compute capability tables (8.0, 8.6,
# 8.9, 9.0). The clock every rate uses is the peak's (the model above); the GeForce cards accumulate in
# fp32 at half their fp16-accumulate rate (the whitepapers' figures), so half the tensor FLOPs a clock
# ("tpc"): 71 TFLOP/s over 82 SMs x 512 is the 3090's 1.69 GHz boost, 165.2 over 128 x 512 the 4090's
# 2.52 GHz.
GPUS = OrderedDict([
    ("H100 SXM", dict(peak=989.4, bw=3350, sms=132, smem=228, threads=2048, blocks=32, arch=90)),
    ("H200", dict(peak=989.4, bw=4800, sms=132, smem=228, threads=2048, blocks=32, arch=90)),
    ("A100 SXM 80GB", dict(peak=312.0, bw=2039, sms=108, smem=164, threads=2048, blocks=32, arch=80)),
    ("RTX A6000", dict(peak=154.8, bw=768, sms=84, smem=100, threads=1536, blocks=16, arch=86)),
    ("L40S", dict(peak=362.05, bw=864, sms=142, smem=100, threads=1536, blocks=24, arch=89)),
    ("RTX 4090", dict(peak=165.2, bw=1008, sms=128, smem=100, threads=1536, blocks=24, arch=89, tpc=512)),
    ("RTX 3090", dict(peak=71.0, bw=936, sms=82, smem=100, threads=1536, blocks=16, arch=86, tpc=512)),
])
TENSOR_FLOPS_PER_CLOCK = {90: 4096, 80: 2048, 86: 1024, 89: 1024}  # dense fp16, an SM
MMA_SYNC_RATE = {90: 494.0 / 757.0, 80: 0.95, 86: 0.95, 89: 0.95}  # of the dense peak (the model above)
WGMMA_RATE = {90: 0.96}  # of the dense peak; wgmma is sm_90a's alone (the model above)
SFU_LANES, ISSUE_RATE, SMEM_BYTES, DRAM_SHARE = 16, 4, 128, 0.90     # a clock an SM; of the datasheet
LAUNCH_S, MEMSET_S = 3e-6, 2e-6
for _g in GPUS.values():
    _g["clock"] = _g["peak"] * 1e12 / (_g["sms"] * _g.get("tpc", TENSOR_FLOPS_PER_CLOCK[_g["arch"]])) / 1e9  # GHz
    _g["mma"] = MMA_SYNC_RATE[_g["arch"]]
    _g["wgmma"] = WGMMA_RATE.get(_g["arch"])
MODELS = {"d12": dict(L=12, C=768, NH=12), "d48": dict(L=48, C=1600, NH=25)}
V, VP, T, B_TARGET = 50257, 50304, 1024, 8
# The runtime's instruction classes (warp instructions), then what the report derives from them.
INSTRUCTIONS = ["sfu", "shfl", "bar", "atom", "mma", "ldsm", "cp_async", "wmma", "ldst_global", "ldst_shared", "wgmma"]
METRICS = ["launches", "blocks", "read", "write", "read_sectors", "write_sectors", "smem_read", "smem_write",
           "mma_flops", "wgmma_flops", "flops", "gemm_bytes", "bytes", "tiles"] + INSTRUCTIONS

# cuBLAS's published FP16 squares on an H100 SXM (TFLOP/s, the middle of each range; the model above).
CUBLAS_SQUARES = [(2048, 548.0, "541-555"), (4096, 729.5, "726-733"), (8192, 756.0, "750-762")]
CUBLAS_SOURCE = ("public sm_90 GEMM benchmark tables (cuBLAS FP16 in, FP32 accumulate, nvjet kernels, one idle "
                 "H100 SXM5; e.g. results/bench_sm90a.csv and its README's H100 table)")


def gemm_fit():
    """(e, t0): the cuBLASLt term fitted to CUBLAS_SQUARES, t = waves * 2 * 128^2 * k / (e * peak / SMs) + t0,
    least squares in relative error (the model above)."""
    g = GPUS["H100 SXM"]
    rows = []
    for n, tflops, _ in CUBLAS_SQUARES:
        waves = math.ceil((n // 128) ** 2 / g["sms"])
        rows.append((waves * 2 * 128 * 128 * n / (g["peak"] * 1e12 / g["sms"]), 2.0 * n ** 3 / (tflops * 1e12)))
    # minimise sum ((x / e + t0 - t) / t)^2 over u = 1 / e and t0: the normal equations of a 2x2 system
    a11 = sum((x / t) ** 2 for x, t in rows)
    a12 = sum(x / t ** 2 for x, t in rows)
    a22 = sum(1 / t ** 2 for x, t in rows)
    b1 = sum(x / t for x, t in rows)
    b2 = sum(1 / t for x, t in rows)
    det = a11 * a22 - a12 * a12
    u = (b1 * a22 - b2 * a12) / det
    t0 = (a11 * b2 - a12 * b1) / det
    return 1 / u, t0


GEMM_E, GEMM_T0 = gemm_fit()


def parse(path, skip=(), start="encoder_forward"):
    """The step's ops: from the first kernel named start* on (the encoder forward: what came before is
    start-up; None: all) and after the file's last mark line (cuda_cpu_count_mark), less those a
    function of skip says to leave out. A skip entry that is a
    list's method (cut) instead takes the ops and returns those to keep."""
    ops, started = [], start is None
    with open(path) as f:
        for line in f:
            kind, _, rest = line.strip().partition(" ")
            kv = dict(x.split("=", 1) for x in rest.split())
            if kind == "mark":  # the counting program's mark: the work it measures begins here
                ops.clear()
                continue
            if kind == "kernel" and start and kv["name"].startswith(start):
                started = True
            if started and not any(f(kind, kv) for f in skip if not getattr(f, "cut", False)):
                ops.append((kind, kv))
    for f in skip:
        if getattr(f, "cut", False):
            ops = f(ops)
    if not ops:
        sys.exit(f"kernel_report: no step in {path}")
    return ops


def group_key(kind, kv, bt):
    if kind == "kernel":
        return ("kernel", kv["name"], kv["symbol"], kv["block"], kv["smem"])
    if kind == "blas":
        dims = tuple("BT" if int(kv[d]) == bt else int(kv[d]) for d in ("m", "n", "k"))
        return ("blas", dims, kv["batch"], kv["epilogue"])
    if kind == "copy":
        return (kind, kv.get("from"), kv.get("to"))
    return (kind,)


def totals(ops, bt):
    """Per group: the sums of its metrics over the step, and its constant attributes."""
    sums, attrs = defaultdict(lambda: defaultdict(float)), {}
    for kind, kv in ops:
        k = group_key(kind, kv, bt)
        s = sums[k]
        s["launches"] += 1
        if kind == "kernel":
            g = [int(x) for x in kv["grid"].split(",")]
            s["blocks"] += g[0] * g[1] * g[2]
            for m in ("read", "write", "read_sectors", "write_sectors", "smem_read", "smem_write", "mma_flops"):
                s[m] += int(kv[m])
            for m in INSTRUCTIONS + ["wgmma_flops"]:  # counts made before the runtime counted these have none
                s[m] += int(kv.get(m, 0))
            b = [int(x) for x in kv["block"].split(",")]
            regs, ptx_smem = int(kv["regs"]), int(kv["ptxas_smem"])
            if (kv["symbol"], "sm_90") in PTXAS:  # this commit's ptxas, when the runtime's table is older
                regs, _, _, ptx_smem = PTXAS[(kv["symbol"], "sm_90")]
            attrs[k] = dict(threads=b[0] * b[1] * b[2], regs=regs, symbol=kv["symbol"],
                            smem=int(kv["smem"]) + max(int(kv["static_smem"]), ptx_smem))
        elif kind == "blas":
            s["flops"] += int(kv["flops"])
            s["gemm_bytes"] += sum(int(kv[x]) for x in ("a", "b", "c", "d", "bias", "aux"))
            s["tiles"] += math.ceil(int(kv["m"]) / 128) * math.ceil(int(kv["n"]) / 128) * int(kv["batch"])
            attrs[k] = {}
        else:
            s["bytes"] += int(kv["bytes"])
            attrs[k] = {}
    return sums, attrs


def bilinear(f11, f12, f21, f22, L, B):
    d = f22 - f21 - f12 + f11
    c = f12 - f11 - d
    b = f21 - f11 - d
    a = f11 - b - c - d
    return a + b * L + c * B + d * L * B


def params(m):
    L, C = m["L"], m["C"]
    return VP * C + T * C + L * (12 * C * C + 13 * C) + 2 * C


def tensor_instructions(launch):
    """A launch's tensor-core warp instructions as the runtime counted them: HMMA (mma.sync m16n8k16,
    4096 FLOPs a warp; WMMA's products compile to them) and HGMMA (its wgmma count, one a warp per
    instruction, as nvdisasm lists them)."""
    return launch["mma_flops"] / 4096 + launch.get("wgmma", 0)


def issue_instructions(a, launch):
    """A launch's warp instructions (the model above): where the SASS hot loop is known, the code
    outside the loop once a warp (its static count) and the loop's instructions per tensor instruction
    (HMMA + HGMMA) times the counted tensor instructions less the outside code's; else the runtime's
    counted classes (a lower bound); and which it was."""
    counted = sum(launch.get(m, 0) for m in INSTRUCTIONS)
    tensor = tensor_instructions(launch)
    loop = SASS.get(a.get("symbol"))
    if loop and tensor > 0 and loop["HMMA"] + loop["HGMMA"] > 0:
        warps = launch["blocks"] * ((a["threads"] + 31) // 32)
        out_instrs = loop["kernel_instrs"] - loop["instrs"]
        out_tensor = loop["kernel_HMMA"] + loop["kernel_HGMMA"] - loop["HMMA"] - loop["HGMMA"]
        in_loop = max(0.0, tensor - out_tensor * warps) / (loop["HMMA"] + loop["HGMMA"]) * loop["instrs"]
        return max(counted, in_loop + out_instrs * warps), "sass"
    return counted, "counted"


def kernel_time(gpu, a, launch):
    """Seconds for one launch of a kernel group (the model above), what bounds it, blocks per SM, waves,
    and the pipes' times."""
    threads, regs, smem = a["threads"], a["regs"], a["smem"]
    warps = (threads + 31) // 32
    per_sm = [gpu["blocks"], gpu["threads"] // threads]
    if regs > 0:
        per_sm.append(65536 // (warps * ((32 * regs + 255) // 256 * 256)))
    per_sm.append(int(gpu["smem"] * 1024 // (smem + 1024)))
    bps = max(1, min(per_sm))
    slots = gpu["sms"] * bps
    grid = max(1.0, launch["blocks"])
    waves = math.ceil(grid / slots)
    filled = grid / (waves * slots)
    clk = gpu["clock"] * 1e9 * gpu["sms"]  # SM clocks a second, all SMs
    instrs, _ = issue_instructions(a, launch)
    wgmma_flops = launch.get("wgmma_flops", 0)
    if wgmma_flops > 0 and not gpu["wgmma"]:
        sys.exit(f"kernel_report: {a.get('symbol')} counted wgmma FLOPs, which a GPU of sm_{gpu['arch']} has no "
                 "instruction for: count its runs with CUDA_CPU_SM=80 (dev/kernel_report.sh's _sm80 files)")
    t = {"dram": 32 * (launch["read_sectors"] + launch["write_sectors"]) / (DRAM_SHARE * gpu["bw"] * 1e9),
         "smem": (launch["smem_read"] + launch["smem_write"]) / (SMEM_BYTES * clk),
         "tensor": launch["mma_flops"] / (gpu["mma"] * gpu["peak"] * 1e12)
                   + (wgmma_flops / (gpu["wgmma"] * gpu["peak"] * 1e12) if wgmma_flops > 0 else 0.0),
         "sfu": 32 * launch.get("sfu", 0) / (SFU_LANES * clk),
         "issue": instrs / (ISSUE_RATE * clk)}
    if launch["mma_flops"] > 0 or wgmma_flops > 0:  # products, exponentials, the rest add (the model above)
        other = max(0.0, instrs - tensor_instructions(launch) - launch.get("sfu", 0)) / (ISSUE_RATE * clk)
        core = {"tensor+sfu+issue": t["tensor"] + t["sfu"] + other, "dram": t["dram"], "smem": t["smem"]}
    else:
        core = t
    bound = max(core, key=core.get)
    return core[bound] / filled + LAUNCH_S, bound, bps, waves, t


def gemm_time(gpu, dims, launch, bt):
    """One cuBLASLt product (the model above): seconds, what bounds it."""
    waves = math.ceil(launch["tiles"] / gpu["sms"])
    k = bt if dims[2] == "BT" else dims[2]
    tf = waves * 2 * 128 * 128 * k / (GEMM_E * gpu["peak"] * 1e12 / gpu["sms"])
    tb = launch["gemm_bytes"] / (DRAM_SHARE * gpu["bw"] * 1e9)
    return max(tf, tb) + GEMM_T0, ("tensor" if tf >= tb else "dram")


# The attention backward's families: the flash backward (kernels/flash_bwd.cuh: FP16/BF16 at head sizes
# 32 and 64) or the tiled one (kernels/attention.cuh), whichever the counted run launched.
ATTENTION_BACKWARD = ("flash_backward_kv", "flash_backward_dq", "attention_backward_dkdv", "attention_backward_dq",
                      "attention_backward_rowdot")


def family(name):
    n = name.split("<")[0]
    for f in ("attention_forward_flash", "attention_forward", "attention_backward_dkdv", "attention_backward_dq", "attention_backward_rowdot",
              "flash_backward_kv", "flash_backward_dq", "layernorm_forward", "layernorm_backward_reduce", "layernorm_backward", "gelu_forward", "gelu_backward",
              "matmul_dbias_partial", "matmul_dbias_finish", "fused_classifier", "encoder_forward", "encoder_backward",
              "adamw", "global_norm"):
        if n.startswith(f):
            return f
    return n


def parse_ptxas(path):
    """ptxas -v output (nvcc -Xptxas -v): {(mangled name, "sm_XX"): (registers, spill stores, spill loads,
    static shared memory bytes)}; empty without the file. sm_90a's lines are the "sm_90" entries: the
    code an H100 runs (the wgmma kernels' real registers; compiled for plain sm_90 they hold a trap)."""
    res, fn, arch, spill = {}, None, None, (0, 0)
    if not path or not os.path.exists(path):
        return res
    with open(path) as f:
        for line in f:
            m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)a?'", line)
            if m:
                fn, arch, spill = m.group(1), m.group(2), (0, 0)
                continue
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and fn:
                spill = (int(m.group(1)), int(m.group(2)))
                continue
            m = re.search(r"Used (\d+) registers", line)
            if m and fn:
                sm = re.search(r"(\d+) bytes smem", line)
                res[(fn, arch)] = (int(m.group(1)), spill[0], spill[1], int(sm.group(1)) if sm else 0)
                fn = None
    return res


PTXAS = {}  # set by main from --ptxas: the trainer's kernels compiled for sm_80 and sm_90a (keyed "sm_90")
SASS = {}   # set by main from --sass: mangled kernel name -> its hot loop (dev/sass_mix.py)
COUNTS_DIR = []  # set by main: the counts' folder


# The counted runs on an emulated sm_80 (CUDA_CPU_SM=80, dev/kernel_report.sh): their files carry this
# after the precision (d12_fp16_sm80_L1_B1.count, attention_sm80_T1024_NH1.count).
SM80 = "_sm80"


def counted_as(counts_dir, gpu):
    """Which counted runs gpu takes (the model above): "" (the runtime's default sm_90 device, on which
    the trainer runs the flash kernels' wgmma path) for an sm_90 GPU, SM80 (the mma.sync kernels) for
    the others; "" for every GPU where the folder holds no sm_80 run (counts made before there were
    two paths)."""
    if gpu["arch"] == 90:
        return ""
    return SM80 if any(SM80 + "_" in f for f in os.listdir(counts_dir)) else ""


def counts_note(counts_dir):
    """{GPU: which counted runs it takes, in words} (the report and its JSON say it)."""
    out = OrderedDict()
    for gname, gpu in GPUS.items():
        if gpu["arch"] == 90:
            out[gname] = "the runs on the runtime's default device, an sm_90 (where the trainer takes the wgmma path)"
        elif counted_as(counts_dir, gpu):
            out[gname] = "the runs on an emulated sm_80 (CUDA_CPU_SM=80: the mma.sync path)"
        else:
            out[gname] = "the sm_90 runs (the counts folder has no sm_80 runs: counted before there were two paths)"
    return out


def have_runs(counts_dir, prefix):
    """Whether the four counted runs prefix_L{1,2}_B{1,2} are there."""
    return all(os.path.exists(os.path.join(counts_dir, f"{prefix}_L{l}_B{b}.count")) for l in (1, 2) for b in (1, 2))


_EXTRAPOLATED = {}


def extrapolate(counts_dir, prefix, L, B, T, skip=None):
    """Every group's step totals at (L, B) from the four counted runs (bilinear in layers and batch);
    skip(l, b): the ops to leave out of the counted run of l layers at batch b. Without skip, kept
    for the next call with the same arguments (each GPU asks for its runs)."""
    memo = (counts_dir, prefix, L, B, T) if skip is None else None
    if memo in _EXTRAPOLATED:
        return _EXTRAPOLATED[memo]
    runs = {}
    for l in (1, 2):
        for b in (1, 2):
            ops = parse(os.path.join(counts_dir, f"{prefix}_L{l}_B{b}.count"), skip(l, b) if skip else ())
            runs[(l, b)] = totals(ops, b * T)
    keys = list(OrderedDict.fromkeys(k for (s, _) in runs.values() for k in s))
    attrs = {}
    for (_, a) in runs.values():
        attrs.update(a)
    at = {k: {mt: bilinear(*(runs[lb][0][k][mt] for lb in ((1, 1), (1, 2), (2, 1), (2, 2))), L, B) for mt in METRICS}
          for k in keys}
    if memo:
        _EXTRAPOLATED[memo] = (keys, attrs, at)
    return keys, attrs, at


def micro_steps(counts_dir, prefix, L, B, skip=None):
    """The step at (L, B) with n micro-steps of accumulation, from the 1-micro-step runs prefix_L*_B* and
    the 2-micro-step runs prefix_A2_L*_B* (both bilinear): (keys, attrs, totals(n)), totals(n) = one +
    (n - 1) (two - one) for every group either run has. The first micro-step differs from the others
    (it writes the gradients, which the others add to: no memset, and the bias gradients' add kernel
    only from the second on), so an extra micro-step is two - one, not a share of one. None when the
    2-micro-step runs are missing."""
    if not all(os.path.exists(os.path.join(counts_dir, f"{prefix}_A2_L{l}_B{b}.count")) for l in (1, 2) for b in (1, 2)):
        return None
    k1, a1, one = extrapolate(counts_dir, prefix, L, B, T, skip)
    k2, a2, two = extrapolate(counts_dir, prefix + "_A2", L, B, T, skip)
    keys = list(OrderedDict.fromkeys(k1 + k2))
    attrs = {**a2, **a1}
    zero = {mt: 0.0 for mt in METRICS}

    def totals_n(n):
        return {k: {mt: one.get(k, zero)[mt] + (n - 1) * (two.get(k, zero)[mt] - one.get(k, zero)[mt]) for mt in METRICS}
                for k in keys}
    return keys, attrs, totals_n


def group_times(gpu, keys, attrs, at, bt):
    """Each group of ops that launches: (key, its totals, launches, seconds a launch, bound, detail)."""
    for k in keys:
        x = at[k]
        n = round(x["launches"])
        if n <= 0:
            continue
        per = {mt: x[mt] / x["launches"] for mt in METRICS}
        yield (k, x, n) + op_time(gpu, k, attrs.get(k), per, bt)


def step_total(gpu, keys, attrs, at, bt):
    """Seconds for the step's launches on gpu (the model: one stream, the launches' sum)."""
    return sum(t * n for (_, _, n, t, _, _) in group_times(gpu, keys, attrs, at, bt))


def check_exact(counts_dir, prefix, L, B, T, path):
    """The extrapolation against a counted run at (L, B): every group's every total, exactly, but for
    two things that are not bilinear: a grid's size is rounded up (at most one block a launch; a
    product's tiles, at most one row of them a launch; warp instructions, which follow the warps and
    each thread's share of a grid-stride loop, within 1%). The embedding kernels' work follows the
    tokens a batch repeats (they share rows): exact only for batches without repeats, as the test's."""
    keys, _, at = extrapolate(counts_dir, prefix, L, B, T)
    real, _ = totals(parse(path), B * T)
    bad = []
    for k in set(keys) | set(real):
        for mt in METRICS:
            want, got = real[k][mt] if k in real else 0.0, at[k][mt] if k in at else 0.0
            tol = 1e-9 * max(1.0, abs(want))
            if mt == "blocks":
                tol = max(tol, real[k]["launches"] if k in real else 0.0)
            elif mt == "tiles" and k[0] == "blas":  # B T / 128 rounded up: one row of tiles a launch
                other = max([d for d in k[1][:2] if d != "BT"] or [128])
                tol = max(tol, (real[k]["launches"] if k in real else 0.0) * math.ceil(other / 128) * int(k[2]))
            elif mt in INSTRUCTIONS:  # warps and each thread's share of a grid-stride loop round too
                tol = max(tol, 0.01 * abs(want))
            if abs(want - got) > tol:
                bad.append(f"{k[1] if len(k) > 1 else k[0]} {mt}: counted {want:.0f}, extrapolated {got:.0f}")
    return keys, bad


# Kernels whose grid is the device's SM count (one block an SM, kernels/sizes.h), counted on the CPU
# runtime's device, which has an H100's 132 SMs: on another GPU the launch has that GPU's SM count
# of blocks, each as many warps as its shared memory holds (so still one an SM). Their bytes stay as
# counted (the partials of 132 blocks; an A100's 108 would write fewer).
GRID_BY_SMS, COUNT_SMS = {"layernorm_backward"}, 132


def op_time(gpu, k, attr, per, bt):
    """One launch of op k on gpu: (seconds, what bounds it, the kernel's launch detail or None)."""
    if k[0] == "kernel":
        if family(k[1]) in GRID_BY_SMS and round(per["blocks"]) == COUNT_SMS:
            per = dict(per, blocks=gpu["sms"])
        t, bound, bps, waves, _ = kernel_time(gpu, attr, per)
        return t, bound, (attr["threads"], attr["regs"], attr["smem"], bps, waves, per["blocks"])
    if k[0] == "blas":
        t, bound = gemm_time(gpu, k[1], per, bt)
        return t, bound, None
    return per["bytes"] / (DRAM_SHARE * gpu["bw"] * 1e9) + MEMSET_S, "dram", None


def step_times(precision, counts_dir, model_name, B, variant=""):
    """Predicted step time per GPU at micro-batch B (the model, without the tables), each GPU from the
    runs it takes (counted_as); variant "_ge2": the counts of -ge 2. A GPU whose runs of the variant
    were not counted is left out."""
    m = MODELS[model_name]
    bt = B * T
    out = {}
    for gname, gpu in GPUS.items():
        prefix = f"{model_name}_{precision}{counted_as(counts_dir, gpu)}{variant}"
        if not have_runs(counts_dir, prefix):
            continue
        keys, attrs, at = extrapolate(counts_dir, prefix, m["L"], B, T)
        total = step_total(gpu, keys, attrs, at, bt)
        mfu = (6 * params(m) + 6 * m["L"] * m["C"] * T) * bt / total / (gpu["peak"] * 1e12)
        out[gname] = dict(step_ms=round(total * 1e3, 2), tokens_per_s=round(bt / total), mfu=round(mfu, 4))
    return out


# ---- ours and llm.c's by the same families, llm.c's published steps, the calibration table ----

def common_family(k):
    """A group of ops' family in both trainers' terms (ours and llm.c's kernels doing the same work)."""
    if k[0] == "blas":
        return "attention" if int(k[2]) > 1 else "matmul (cuBLASLt)"  # llm.c's attention: batched products
    if k[0] != "kernel":
        return "memset, copy"
    for fam, prefixes in (("attention", ("attention_", "flash_backward", "permute_kernel", "unpermute_kernel",
                                         "softmax_forward", "softmax_autoregressive")),
                          ("LayerNorm", ("layernorm_", "fused_residual_forward", "residual_forward")),
                          ("GELU", ("gelu_",)),
                          ("bias gradient", ("matmul_dbias", "matmul_backward_bias", "reduce_add_sum")),
                          ("classifier", ("fused_classifier",)),
                          ("embedding", ("encoder_", "wte_backward", "wpe_backward")),
                          ("optimizer", ("adamw", "global_norm", "global_sum", "copy_and_cast"))):
        if k[1].startswith(prefixes):
            return fam
    return "other"


def family_times(gpu, keys, attrs, at, bt):
    """Seconds a step per common family."""
    fam = defaultdict(float)
    for k, x, n, t, _, _ in group_times(gpu, keys, attrs, at, bt):
        fam[common_family(k)] += t * n
    return fam


LLMC_COMMIT = "f1e2ace651495b74ae22d45d1723443fd00ecd3a"
NVLINK_BPS = 450e9  # common/comm_plan.c's "nvlink": H100 NVLink 4's 450 GB/s a direction


def llmc_skip(C, micro_step=False):
    """skip(l, b) for llm.c's counted runs: its first update initialises the optimizer state (cudaMemset
    of m and v, 4 bytes a parameter each; copy_and_cast_kernel to the master weights), which a step past
    the first has not. micro_step: also what only a step's first or last micro-step runs, leaving what
    each micro-step past the first adds: nothing after its last kernel before the update (the gradient
    norm and the update), not the zeroing of the gradients (2 bytes a parameter) and of the losses (4 B T
    bytes), not the loss's copy to the host."""
    def skip(l, b):
        P = params(dict(L=l, C=C))
        out = [lambda kind, kv: kind == "kernel" and kv["name"].startswith("copy_and_cast_kernel"),
               lambda kind, kv: kind == "memset" and int(kv["bytes"]) == 4 * P]
        if micro_step:
            def backward_only(ops):  # up to the last kernel before the update: its norm, memset included, goes
                last = max(i for i, (kind, kv) in enumerate(ops)
                           if kind == "kernel" and common_family(("kernel", kv["name"])) != "optimizer")
                return ops[:last + 1]
            backward_only.cut = True
            out += [backward_only,
                    lambda kind, kv: kind == "memset" and int(kv["bytes"]) in (2 * P, 4 * b * T),
                    lambda kind, kv: kind == "copy" and kv.get("to") == "host"]
        return out
    return skip


# Published attention rates (TFLOP/s, head size 64, T = 1k; the model above): cuDNN on an H100
# (forward causal; backward without the mask, made causal by FlashAttention-2's own ratio, the model's
# calibration step 1), FlashAttention-2 on an A100 80GB (forward+backward, causal).
FA2_H100_CAUSAL = (229.0, 192.0)   # forward, forward+backward (FlashAttention-3 paper Fig. 5(b))
FA2_H100_BWD_NONCAUSAL = 238.0     # backward without the mask (FlashAttention-3 paper Fig. 6)
CUDNN_H100_BWD_NONCAUSAL = 348.0   # the same figure's cuDNN
FA2_H100_BWD_CAUSAL = 2.5 / (3.5 / FA2_H100_CAUSAL[1] - 1 / FA2_H100_CAUSAL[0])  # 180 TFLOP/s
CUDNN_H100 = (288.0, CUDNN_H100_BWD_NONCAUSAL * FA2_H100_BWD_CAUSAL / FA2_H100_BWD_NONCAUSAL)
FA2_A100_FWD_BWD = 119.0


def llmc_attention_rate(gname):
    """(forward, backward) TFLOP/s for llm.c's attention on gname, or None (its own kernels as counted)."""
    if gname in ("H100 SXM", "H200"):
        return CUDNN_H100
    if gname == "A100 SXM 80GB":
        return (FA2_A100_FWD_BWD, FA2_A100_FWD_BWD)
    return None


def llmc_micro_check(counts_dir):
    """What the report takes a micro-step past the first to add to llm.c's step (llmc_skip's micro_step
    ops of a 1-micro-step step: llm.c's backward accumulates into the gradients in every micro-step
    alike, unlike ours, whose first writes them) against the counted difference of a 2- and a
    1-micro-step step at d12, 1 layer, B=1: (groups, [those that differ by more than 0.5%, 2% for the
    embedding's kernels, whose bytes follow the batch's tokens]), or None without the counts. The
    batch's copies to the device (a few KiB, made before the step's first kernel the first time) are
    left out of the comparison."""
    one_p, two_p = (os.path.join(counts_dir, f"llmc_d12{x}_L1_B1.count") for x in ("", "_A2"))
    if not (os.path.exists(one_p) and os.path.exists(two_p)):
        return None
    C = MODELS["d12"]["C"]
    one, _ = totals(parse(one_p, llmc_skip(C)(1, 1)), T)
    two, _ = totals(parse(two_p, llmc_skip(C)(1, 1)), T)
    derived, _ = totals(parse(one_p, llmc_skip(C, micro_step=True)(1, 1)), T)
    bad = []
    for k in (set(one) | set(two)) - {("copy", "host", "device")}:
        for mt in METRICS:
            want = (two[k][mt] if k in two else 0.0) - (one[k][mt] if k in one else 0.0)
            got = derived[k][mt] if k in derived else 0.0
            data = k[0] == "kernel" and k[1].startswith(("encoder", "wte", "wpe"))  # bytes by the tokens' rows
            if abs(want - got) > (0.02 if data else 0.005) * max(1.0, abs(want)):
                bad.append(f"{k[1] if k[0] == 'kernel' else k[0]} {mt}: counted {want:.0f}, derived {got:.0f}")
    return len(set(one) | set(two)), bad


def llmc_step(counts_dir, gname, model_name, B, micro=1, ranks=1, cudnn=True, variant=""):
    """llm.c's step on gname (the model above): seconds, seconds per common family, and how its attention
    was charged (cudnn False: its own kernels as counted, as its build without cuDNN runs); variant
    "_ge1": its counts at -ge 1. None without llm.c's counts."""
    m = MODELS[model_name]
    prefix = f"llmc_{model_name}{variant}"
    if not all(os.path.exists(os.path.join(counts_dir, f"{prefix}_L{l}_B{b}.count")) for l in (1, 2) for b in (1, 2)):
        return None
    skip = llmc_skip(m["C"])
    keys, attrs, at = extrapolate(counts_dir, prefix, m["L"], B, T, skip)
    if micro > 1:
        acc = micro_steps(counts_dir, prefix, m["L"], B, skip)
        if acc is not None:  # counted 2-micro-step steps
            keys, attrs, at = acc[0], acc[1], acc[2](micro)
        else:  # each micro-step past the first: what llmc_skip's micro_step leaves (llmc_micro_check)
            _, _, extra = extrapolate(counts_dir, prefix, m["L"], B, T, llmc_skip(m["C"], micro_step=True))
            at = {k: {mt: x[mt] + (micro - 1) * extra.get(k, {}).get(mt, 0.0) for mt in METRICS} for k, x in at.items()}
    if ranks > 1:  # ZeRO-1: each rank updates its eighth (its share) of the parameters
        at = {k: ({mt: (v if mt == "launches" else v / ranks) for mt, v in x.items()}
                  if common_family(k) == "optimizer" else x) for k, x in at.items()}
    gpu = GPUS[gname]
    fam = family_times(gpu, keys, attrs, at, B * T)
    rate = llmc_attention_rate(gname) if cudnn else None
    how = "its own kernels (no cuDNN), counted"
    if rate:
        fwd = 4.0 * B * T * T * m["C"] / 2 * m["L"]  # causal FLOPs a micro-step, as FlashAttention counts them
        fam["attention"] = micro * (fwd / (rate[0] * 1e12) + 2.5 * fwd / (rate[1] * 1e12))
        how = "cuDNN's published rate" if rate == CUDNN_H100 else "FlashAttention-2's published A100 rate (no cuDNN figure)"
    if ranks > 1:
        fam["collectives"] = 2 * (ranks - 1) / ranks * 2 * params(m) / NVLINK_BPS
    return sum(fam.values()), dict(fam), how


def ours_step(counts_dir, precision, gname, model_name, B):
    """Our step on gname at -ge's default for it (2 on sm_90 and newer, 0 before), from the runs it
    takes (counted_as): seconds, per family; None where those runs were not counted."""
    m = MODELS[model_name]
    variant = "_ge2" if GPUS[gname]["arch"] >= 90 else ""
    prefix = f"{model_name}_{precision}{counted_as(counts_dir, GPUS[gname])}{variant}"
    if not have_runs(counts_dir, prefix):
        return None
    keys, attrs, at = extrapolate(counts_dir, prefix, m["L"], B, T)
    fam = family_times(GPUS[gname], keys, attrs, at, B * T)
    return sum(fam.values()), dict(fam)


def model_flops(model_name, tokens):
    m = MODELS[model_name]
    return (6 * params(m) + 6 * m["L"] * m["C"] * T) * tokens


def flash_at(counts_dir, gname, Tq, B=16, NH=32, HS=64):
    """Our attention at FlashAttention-2's benchmark configuration on gname: (forward, forward+backward)
    TFLOP/s with its FLOPs (4 B T^2 NH HS, halved for causal; the backward 2.5x), from the counts of 1
    and 2 heads (every count linear in the (batch, head) pairs), those the GPU takes (counted_as); and
    the tensor instruction they ran ("wgmma" or "mma.sync"). None without the counts."""
    paths = [os.path.join(counts_dir, f"attention{counted_as(counts_dir, GPUS[gname])}_T{Tq}_NH{h}.count")
             for h in (1, 2)]
    if not all(os.path.exists(x) for x in paths):
        return None
    (s1, a1), (s2, a2) = (totals(parse(x, start=None), Tq) for x in paths)
    n = B * NH
    keys = list(OrderedDict.fromkeys(list(s1) + list(s2)))
    at = {k: {mt: s1[k][mt] + (n - 1) * (s2[k][mt] - s1[k][mt]) for mt in METRICS} for k in keys}
    fwd_t = bwd_t = 0.0
    for k, x, cnt, t, _, _ in group_times(GPUS[gname], keys, {**a1, **a2}, at, Tq):
        if k[0] == "kernel" and family(k[1]).startswith("attention_forward"):
            fwd_t += t * cnt
        elif k[0] == "kernel":
            bwd_t += t * cnt
    flops = 4.0 * B * Tq * Tq * NH * HS / 2
    path = "wgmma" if any(x["wgmma_flops"] > 0 for x in at.values()) else "mma.sync"
    return flops / fwd_t / 1e12, 3.5 * flops / (fwd_t + bwd_t) / 1e12, path


FA2_SOURCE = "flash-attention repo, assets/flash2_h100_fwd_bwd_benchmark.png; FlashAttention-3 paper Fig. 5(b)"
FA3_SOURCE = "FlashAttention-3 paper (arXiv 2407.08608) Fig. 5(b)"
TOLERANCE = 0.15  # calibrated: each llm.c step and each cuBLAS product within this of its measurement


def calibration(counts_dir, precision):
    """The calibration table: the model's prediction beside each published measurement. kind
    "calibration": the model predicts the measured thing itself; "comparison": our kernels beside
    another implementation's measurement at its benchmark's configuration."""
    rows = []

    def row(kind, anchor, config, measured, predicted, unit, source):
        rows.append(dict(kind=kind, anchor=anchor, config=config, measured=measured, predicted=round(predicted, 4),
                         unit=unit, error=round(predicted / measured - 1, 4), source=source))
    g = GPUS["H100 SXM"]
    for n, tflops, spread in CUBLAS_SQUARES:
        launch = dict(tiles=(n // 128) ** 2, gemm_bytes=3.0 * n * n * 2)
        t, _ = gemm_time(g, (n, n, n), launch, 0)
        row("calibration", f"cuBLAS FP16 GEMM {n}^3", f"H100 SXM, FP32 accumulate (measured {spread}; the fit's own anchor)",
            tflops, 2.0 * n ** 3 / t / 1e12, "TFLOP/s", CUBLAS_SOURCE)
    steps = (("d48", "_ge1", "H100 SXM", 16, 8, 2.75, 0.473, "llm.c GPT-2 1558M, 8x H100 SXM",
              "llm.c discussion #677, scripts/run_gpt2_1558M.sh"),
             ("d12", "", "A100 SXM 80GB", 64, 1, 0.300, 0.60, "llm.c GPT-2 124M, 8x A100 80GB SXM",
              "llm.c scripts/run_gpt2_124M.sh, discussion #481"))
    for model_name, variant, gname, B, micro, secs, mfu, what, source in steps:
        r = llmc_step(counts_dir, gname, model_name, B, micro, ranks=8, variant=variant)
        if r is None:
            continue
        t, fam, how = r
        ge = "-ge 1" if variant == "_ge1" else "-ge 0"
        config = f"BF16, B={B}, T=1024, -r 0, -z 1, {ge}, {micro} micro-step{'s' if micro > 1 else ''}; attention at {how}"
        row("calibration", f"{what}: step", config, secs, t, "s", source)
        row("calibration", f"{what}: MFU", config, mfu,
            model_flops(model_name, micro * B * T) / t / (GPUS[gname]["peak"] * 1e12), "MFU", source)
    for gname, Tq, rows_here in (("H100 SXM", 1024, ((0, "FlashAttention-2 forward", 229, FA2_SOURCE), (0, "cuDNN forward", 288, FA3_SOURCE),
                                                     (0, "FlashAttention-3 forward", 265, FA3_SOURCE),
                                                     (1, "FlashAttention-2 forward+backward", 192, FA2_SOURCE))),
                                 ("H100 SXM", 2048, ((0, "FlashAttention-2 forward", 262, FA2_SOURCE), (0, "FlashAttention-3 forward", 371, FA3_SOURCE),
                                                     (1, "FlashAttention-2 forward+backward", 232, FA2_SOURCE))),
                                 ("A100 SXM 80GB", 1024, ((1, "FlashAttention-2 forward+backward", 119,
                                                          "flash-attention repo, assets/flash2_a100_fwd_bwd_benchmark.png"),))):
        ours = flash_at(counts_dir, gname, Tq)
        if ours is None:
            continue
        for which, anchor, measured, source in rows_here:
            row("comparison", f"ours beside {anchor}", f"{gname}, B=16, 32 heads, head dim 64, causal, T={Tq} "
                f"(ours on {ours[2]})", measured, ours[which], "TFLOP/s", source)
    return rows


def side_by_side(counts_dir, precision):
    """{GPU: {model: ours and llm.c's step (B=8, T=1024, 16-bit, -r 0, one GPU), tokens/s, MFU, families}}."""
    out = OrderedDict()
    for gname in GPUS:
        out[gname] = OrderedDict()
        for model_name in ("d12", "d48"):
            ours = ours_step(counts_dir, precision, gname, model_name, B_TARGET)
            r = llmc_step(counts_dir, gname, model_name, B_TARGET)
            if r is None or ours is None:
                continue
            ours_t, ours_f = ours
            llmc_t, llmc_f, how = r
            plain = llmc_step(counts_dir, gname, model_name, B_TARGET, cudnn=False)[0]
            flops = model_flops(model_name, B_TARGET * T)
            peak = GPUS[gname]["peak"] * 1e12
            out[gname][model_name] = dict(
                ours_ms=round(ours_t * 1e3, 2), llmc_ms=round(llmc_t * 1e3, 2),
                ours_tokens_per_s=round(B_TARGET * T / ours_t), llmc_tokens_per_s=round(B_TARGET * T / llmc_t),
                ours_mfu=round(flops / ours_t / peak, 4), llmc_mfu=round(flops / llmc_t / peak, 4),
                llmc_attention=how, llmc_no_cudnn_ms=round(plain * 1e3, 2),
                families={f: dict(ours_ms=round(ours_f.get(f, 0.0) * 1e3, 3), llmc_ms=round(llmc_f.get(f, 0.0) * 1e3, 3))
                          for f in sorted(set(ours_f) | set(llmc_f), key=lambda f: -max(ours_f.get(f, 0), llmc_f.get(f, 0)))})
    return out


# The per-layer bandwidth-bound kernels and the least each launch must move (bytes), N = B T rows of C
# channels, s bytes an element: what it must read once and write once, nothing re-read.
#   GELU forward: x in, y out (N x 4C each). GELU backward: dout and x in, dx out (N x 4C each).
#   LayerNorm forward: x in, out, mean and rstd out, weight and bias in; the fused residual form also
#   reads the two addends and writes their sum (the residual): 4 N C s.
#   LayerNorm backward: dout, x in, dx read and written (it accumulates), mean and rstd in, weight in,
#   dweight and dbias read and written.
#   Bias gradient: dout in (N x OC), dbias read and written; a layer's four products have OC = 3C, C,
#   4C and C, so a layer's launches move 9 C (N + 2) s together. With cuBLASLt's BGRADB epilogue
#   (the sums come with the weight gradient's product) what is left is the add: the fp32 sums in,
#   dbias read and written, 9 C (2 s + 4) a layer.
BANDWIDTH_FAMILIES = ("gelu_forward", "gelu_backward", "layernorm_forward", "layernorm_backward", "matmul_dbias_kernel",
                      "matmul_dbias_add_kernel")


def ideal_bytes(fam, name, launches, m, B, s):
    N, C = B * T, m["C"]
    if fam == "gelu_forward":
        return launches * 2 * N * 4 * C * s
    if fam == "gelu_backward":
        return launches * 3 * N * 4 * C * s
    if fam == "layernorm_forward":
        fused = name.split("<")[-1].rstrip(">").split(",")[1].strip() == "true"  # <width, FUSED, CACHE>
        return launches * ((4 if fused else 2) * N * C * s + 8 * N + 2 * C * s)
    if fam == "layernorm_backward":
        return launches * (4 * N * C * s + 8 * N + 5 * C * s)
    if fam == "matmul_dbias_kernel" and launches == 4 * m["L"]:
        return m["L"] * 9 * C * (N + 2) * s
    if fam == "matmul_dbias_add_kernel" and launches == 4 * m["L"]:
        return m["L"] * 9 * C * (2 * s + 4)
    return None


def family_symbol(keys, attrs, at, f):
    """The mangled name of the kernel of family f that launches in a step (keys, attrs, at), or None."""
    return next((attrs[k].get("symbol") for k in keys if k[0] == "kernel" and family(k[1]) == f and
                 round(at[k]["launches"]) > 0), None)


def report(precision, counts_dir, model_name):
    """The model's tables for d12 or d48 at B_TARGET: every GPU's step from the runs it takes
    (counted_as), the H100's kernel families, attention kernels and bandwidth-bound kernels."""
    m = MODELS[model_name]
    base = f"{model_name}_{precision}"
    # the kernels an sm_80 GPU runs, for the attention table's sm_80 column
    sm80 = base + counted_as(counts_dir, GPUS["A100 SXM 80GB"])
    runs80 = extrapolate(counts_dir, sm80, m["L"], B_TARGET, T) if have_runs(counts_dir, sm80) else None
    bt = B_TARGET * T
    lines = []
    P = params(m)
    model_flops = (6 * P + 6 * m["L"] * m["C"] * T) * bt
    attn_fwd_flops = 4 * B_TARGET * T * T * m["NH"] * (m["C"] // m["NH"]) / 2 * m["L"]
    summary = []
    for gname, gpu in GPUS.items():
        prefix = base + counted_as(counts_dir, gpu)
        if not have_runs(counts_dir, prefix):
            continue
        keys, attrs, at = extrapolate(counts_dir, prefix, m["L"], B_TARGET, T)
        fam = defaultdict(lambda: dict(t=0.0, launches=0.0, read=0.0, sectors=0.0, smem=0.0, flops=0.0, instrs=0.0,
                                       bound=defaultdict(float), detail=None, pipes=defaultdict(float)))
        total = 0.0
        for k, x, n, t, bound, detail in group_times(gpu, keys, attrs, at, bt):
            f = family(k[1]) if k[0] == "kernel" else "matmul (cuBLASLt)" if k[0] == "blas" else k[0]
            F = fam[f]
            F["t"] += t * n
            F["launches"] += n
            F["read"] += x["read"] + x["write"] + x["gemm_bytes"] + x["bytes"]
            F["sectors"] += 32 * (x["read_sectors"] + x["write_sectors"]) + x["gemm_bytes"] + x["bytes"]
            F["smem"] += x["smem_read"] + x["smem_write"]
            F["flops"] += x["mma_flops"] + x["wgmma_flops"] + x["flops"]
            if k[0] == "kernel":
                per = {mt: x[mt] / x["launches"] for mt in METRICS}
                F["instrs"] += issue_instructions(attrs[k], per)[0] * n
                for pipe, tp in kernel_time(gpu, attrs[k], per)[4].items():
                    F["pipes"][pipe] += tp * n
            F["bound"][bound] += t * n
            if detail and (F["detail"] is None or t > F["detail"][0]):
                F["detail"] = (t, detail)
            total += t * n
        mfu = model_flops / total / (gpu["peak"] * 1e12)
        summary.append((gname, total, bt / total, mfu))
        if gname != "H100 SXM":
            continue
        lines.append(f"### {model_name}, {precision.upper()}, B={B_TARGET}, T={T}, `-r 0`, {gname}: predicted")
        lines.append("")
        lines.append("| kernel family | launches | requested MB | unique MB | smem MB | TFLOP | warp instructions M | "
                     "block, regs, smem KiB, blocks/SM, waves | bound | ms | % |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|")
        for f, F in sorted(fam.items(), key=lambda kv: -kv[1]["t"]):
            d = F["detail"][1] if F["detail"] else None
            shape = f"{d[0]}, {d[1]}, {d[2] / 1024:.1f}, {d[3]}, {d[4]}" if d else "-"
            bound = max(F["bound"], key=F["bound"].get)
            lines.append(f"| {f} | {F['launches']:.0f} | {F['read'] / 1e6:,.0f} | {F['sectors'] / 1e6:,.0f} | "
                         f"{F['smem'] / 1e6:,.0f} | {F['flops'] / 1e12:.2f} | {F['instrs'] / 1e6:,.1f} | {shape} | {bound} | "
                         f"{F['t'] * 1e3:.2f} | {100 * F['t'] / total:.1f} |")
        att = fam["attention_forward"]["t"] + fam["attention_forward_flash"]["t"]
        attb = sum(fam[f]["t"] for f in ATTENTION_BACKWARD)
        lines.append("")
        # The attention kernels: the H100's (each family's kernel in these runs: the wgmma path where
        # the counts have it) with ptxas's sm_90a resources (what the model uses) and, beside them, those
        # of the kernel of the same family an sm_80 GPU runs (from the runs it takes); what they move and
        # compute, and their TFLOP/s: counted tensor-core FLOPs (masked products included) and, for the
        # forward, the causal FLOPs (4 B T^2 NH HS / 2 a layer).
        lines.append("| attention kernel (the H100's) | ptxas sm_90a: regs, spill B, smem KiB | sm_80: its family's kernel there, "
                     "regs, spill B, smem KiB | requested MB | unique MB | smem MB | tensor TFLOP | pipes ms: tensor, sfu, "
                     "issue, smem, dram | ms | tensor TFLOP/s | causal TFLOP/s |")
        lines.append("|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
        for f in ("attention_forward_flash", "attention_forward") + ATTENTION_BACKWARD:
            F = fam.get(f)
            if not F or F["launches"] == 0:
                continue
            sym = family_symbol(keys, attrs, at, f)
            name = next((k[1].split("<")[0] for k in keys if k[0] == "kernel" and attrs[k].get("symbol") == sym), f)
            sym80 = family_symbol(*runs80, f) if runs80 else None
            name80 = next((k[1].split("<")[0] for k in runs80[0] if k[0] == "kernel" and runs80[1][k].get("symbol") == sym80),
                          None) if sym80 else None

            def res(symbol, arch):
                r = PTXAS.get((symbol, arch))
                return f"{r[0]}, {r[1] + r[2]}, {r[3] / 1024:.1f}" if r else "-"
            at80 = f"`{name80}`: {res(sym80, 'sm_80')}" if name80 else "-"
            causal = f"{attn_fwd_flops / F['t'] / 1e12:.0f}" if f.startswith("attention_forward") else "-"
            pipes = ", ".join(f"{F['pipes'][x] * 1e3:.2f}" for x in ("tensor", "sfu", "issue", "smem", "dram"))
            lines.append(f"| {f}: `{name}` | {res(sym, 'sm_90')} | {at80} | {F['read'] / 1e6:,.0f} | {F['sectors'] / 1e6:,.0f} | "
                         f"{F['smem'] / 1e6:,.0f} | {F['flops'] / 1e12:.2f} | {pipes} | {F['t'] * 1e3:.2f} | "
                         f"{F['flops'] / F['t'] / 1e12:.0f} | {causal} |")
        lines.append("")
        lines.append("Bytes include the warp primitives' traffic, counted by the CPU runtime once a warp: "
                     "cp.async's global reads and shared writes, ldmatrix's shared reads, WMMA's tile loads and "
                     "stores (global or shared by the pointer), wgmma's shared-memory operand (once a warpgroup); "
                     "test/cuda_cpu/README.md, \"Counting\". The pipes are each term alone (a tensor-core kernel is "
                     "charged max(dram, smem, tensor + sfu + the rest of its issue)); \"issue\" there is every warp "
                     "instruction, the HMMA, HGMMA and MUFU included.")
        if not PTXAS:
            lines.append("")
            lines.append("(no ptxas output given (--ptxas): registers from the runtime's table, sm_90a only)")
        lines.append("")
        # The per-layer bandwidth-bound kernels against the least their jobs move: the DRAM bytes the
        # model charges (unique sectors) over that minimum, and the minimum over the predicted time as
        # a share of the GPU's bandwidth (the bars: at most 1.1x, at least 80%).
        lines.append("| bandwidth-bound kernel (every layer) | launches | least bytes MB | unique MB | x least | ms | "
                     "least bytes / time, % of bandwidth |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for f in BANDWIDTH_FAMILIES:
            ideal, got, tf, nl = 0.0, 0.0, 0.0, 0
            for k, x, n, t, _, _ in group_times(gpu, keys, attrs, at, bt):
                if k[0] != "kernel" or family(k[1]) != f:
                    continue
                i = ideal_bytes(f, k[1], n, m, B_TARGET, 4 if precision == "fp32" else 2)
                if i is None:
                    ideal = None
                    break
                ideal += i
                got += 32 * (x["read_sectors"] + x["write_sectors"])
                tf += t * n
                nl += n
            if not nl:
                continue
            if ideal is None:
                lines.append(f"| {f} | {nl} | - | - | - | - | - |")
                continue
            lines.append(f"| {f} | {nl} | {ideal / 1e6:,.0f} | {got / 1e6:,.0f} | {got / ideal:.3f} | {tf * 1e3:.2f} | "
                         f"{100 * ideal / tf / (gpu['bw'] * 1e9):.0f}% |")
        lines.append("")
        lines.append(f"Step {total * 1e3:.1f} ms, {bt / total:,.0f} tokens/s, MFU {100 * mfu:.1f}%. Attention "
                     f"{attn_fwd_flops / att / 1e12:.0f} TFLOP/s forward, "
                     f"{3.5 * attn_fwd_flops / (att + attb) / 1e12:.0f} forward+backward (causal FLOPs, backward 2.5x).")
        lines.append("")
    lines.append(f"| {model_name}, {precision.upper()}, B={B_TARGET}: predicted | step ms | tokens/s | MFU |")
    lines.append("|---|---:|---:|---:|")
    for gname, total, tps, mfu in summary:
        lines.append(f"| {gname} | {total * 1e3:.1f} | {tps:,.0f} | {100 * mfu:.1f}% |")
    lines.append("")
    # The same model with 4 micro-steps of accumulation (the update once for 4 B T tokens) and with the
    # GELU in the matmul epilogues (-ge 2), when their counted runs exist.
    rows = []
    for ge in ("0", "2"):
        prefix = f"{model_name}_{precision}" + ("" if ge == "0" else "_ge2")
        if not all(os.path.exists(os.path.join(counts_dir, f"{prefix}_L{l}_B{b}.count")) for l in (1, 2) for b in (1, 2)):
            continue
        gk, ga, gat = extrapolate(counts_dir, prefix, m["L"], B_TARGET, T)
        runs = [(1, gk, ga, gat)]
        acc = micro_steps(counts_dir, prefix, m["L"], B_TARGET)
        if acc is not None:
            runs.append((4, acc[0], acc[1], acc[2](4)))
        for n, keys_n, attrs_n, at_n in runs:
            t = step_total(GPUS["H100 SXM"], keys_n, attrs_n, at_n, bt)
            rows.append((ge, n, t, n * bt / t, n * model_flops / t / (GPUS["H100 SXM"]["peak"] * 1e12)))
    if len(rows) > 1:
        lines.append(f"| {model_name}, {precision.upper()}, B={B_TARGET}, `-r 0`, H100 SXM: predicted | micro-steps | "
                     "step ms | tokens/s | MFU |")
        lines.append("|---|---:|---:|---:|---:|")
        for ge, n, t, tps, mfu in rows:
            what = ("GELU in its own kernels (`-ge 0`; the default before sm_90)" if ge == "0" else
                    "GELU in the matmul epilogues (`-ge 2`; the default on sm_90 and newer)")
            lines.append(f"| {what} | {n} | {t * 1e3:.1f} | {tps:,.0f} | {100 * mfu:.1f}% |")
        lines.append("")
    return "\n".join(lines)


def targets(counts_dir, precision, cal, sbs):
    """The speed targets on an H100 SXM, predicted by this model: (target, ours, bar, met) rows. The d48
    step at most 0.9x llm.c's (each at its -ge default); the attention at least FlashAttention-2's
    measured figures at its benchmark configuration; LayerNorm, GELU, the optimizer (AdamW and the
    gradient norm) and the classifier each at most llm.c's time for the same work (both at -ge 0: GELU
    in its own kernels, as llm.c's default)."""
    rows = []
    r = sbs.get("H100 SXM", {}).get("d48")
    if r:
        rows.append(("d48 step, B=8 (ms), at most 0.9x llm.c's", r["ours_ms"], 0.9 * r["llmc_ms"], r["ours_ms"] <= 0.9 * r["llmc_ms"]))
    for x in cal:
        if x["anchor"] in ("ours beside FlashAttention-2 forward", "ours beside FlashAttention-2 forward+backward") \
                and x["config"].startswith("H100 SXM") and "T=1024" in x["config"]:
            what = x["anchor"][len("ours beside "):]
            rows.append((f"attention {what[len('FlashAttention-2 '):]} (TFLOP/s), at least {what}'s, T=1024",
                         x["predicted"], x["measured"], x["predicted"] >= x["measured"]))
    m = MODELS["d48"]
    if os.path.exists(os.path.join(counts_dir, f"d48_{precision}_L1_B1.count")) and r:
        keys, attrs, at = extrapolate(counts_dir, f"d48_{precision}", m["L"], B_TARGET, T)
        ours = family_times(GPUS["H100 SXM"], keys, attrs, at, B_TARGET * T)
        llmc = llmc_step(counts_dir, "H100 SXM", "d48", B_TARGET)[1]
        for f in ("LayerNorm", "GELU", "optimizer", "classifier"):
            rows.append((f"{f} (ms a d48 step, -ge 0), at most llm.c's", ours.get(f, 0.0) * 1e3, llmc.get(f, 0.0) * 1e3,
                         ours.get(f, 0.0) <= llmc.get(f, 0.0)))
    return rows


def fmt(v, unit):
    if unit == "MFU":
        return f"{100 * v:.1f}%"
    if unit == "s":
        return f"{v:.3f} s"
    return f"{v:.0f}"


def verdict(cal):
    """The calibration's outcome in words: which rows are outside the tolerance, by how much, and the
    term the model suspects (the step's largest family, or the cuBLAS term)."""
    held = [r for r in cal if r["kind"] == "calibration" and r["unit"] != "MFU"]
    out = [r for r in held if abs(r["error"]) > TOLERANCE]
    if not held:
        return "No calibration row could be made (no llm.c counts: see dev/kernel_report.sh)."
    if not out:
        return (f"**Calibrated**: each of the {len(held)} steps and products is predicted within "
                f"±{100 * TOLERANCE:.0f}% of its measurement (largest error "
                f"{100 * max(abs(r['error']) for r in held):.1f}%).")
    parts = []
    for r in out:
        fast = r["error"] < 0 if r["unit"] == "s" else r["error"] > 0
        parts.append(f"{r['anchor']}: predicted {100 * abs(r['error']):.0f}% {'fast' if fast else 'slow'}")
    cublas = max((abs(r["error"]) for r in held if r["anchor"].startswith("cuBLAS")), default=0.0)
    slow = max((1 / (1 + r["error"]) - 1 for r in out if r["unit"] == "s"), default=0.0)
    why = ("Suspected: the clock (the model runs every pipe at the datasheet peak's 1.83 GHz, which an 8-GPU "
           "run at its power limit need not hold) and llm.c's bandwidth-bound kernels; not the product term, "
           f"within {100 * cublas:.1f}% of cuBLAS's published squares (dev/kernel_report.py's header, calibration steps)."
           if all("1558M" in r["anchor"] for r in out) else "See dev/kernel_report.py's header, calibration steps.")
    return ("**Not calibrated**: " + "; ".join(parts) + f" (the tolerance is ±{100 * TOLERANCE:.0f}%). "
            f"Every prediction here carries that error: a step may take up to {100 * slow:.0f}% longer than "
            "predicted. " + why)


def front(precision, cal, sbs):
    """The report's first sections: what it is, the calibration table, the side-by-side."""
    L = [f"# Kernel report ({precision.upper()}): predicted, not measured", "",
         "Made by `make kernel-report` (dev/kernel_report.sh; no GPU) on the trainer of this commit: every op of a "
         "training step counted by the CPU runtime (`CUDA_CPU_COUNT`: global bytes asked for and 32-byte sectors "
         "touched once, shared-memory bytes, tensor-core FLOPs, warp instructions by class; cuBLASLt shapes), at "
         "1 and 2 layers and micro-batch 1 and 2 (T = 1024), extrapolated bilinearly to d12 and d48 (checked by "
         "test/test_kernel_report.sh), with ptxas's registers (sm_90a) and the flash kernels' SASS inner loops, "
         "through the model written at the top of dev/kernel_report.py (its second version: tensor time at the "
         "rate of the instruction used, cuBLASLt fitted to published products, special functions, instruction "
         "issue). llm.c's train_gpt2.cu (commit " + LLMC_COMMIT[:7] + ", BF16, no cuDNN) is counted the same way "
         "through the same runtime. Every figure is the model's; test/gpu/check.sh prints them beside what it "
         "measures when a GPU is lent.", ""]
    if COUNTS_DIR:
        L += ["Which counted runs each GPU takes (the model's header, \"The counts each GPU takes\"): " +
              "; ".join(f"{g}, {w}" for g, w in counts_note(COUNTS_DIR[0]).items()) + ".", ""]
    L += ["## Calibration: the model against published measurements", "",
          "| kind | anchor | configuration | measured | predicted | error | source |", "|---|---|---|---:|---:|---:|---|"]
    for r in cal:
        L.append(f"| {r['kind']} | {r['anchor']} | {r['config']} | {fmt(r['measured'], r['unit'])} | "
                 f"{fmt(r['predicted'], r['unit'])} | {100 * r['error']:+.1f}% | {r['source']} |")
    chk = llmc_micro_check(COUNTS_DIR[0]) if COUNTS_DIR else None
    if chk:
        L += ["", f"llm.c's 8 micro-steps: one counted step and 7 of what a micro-step past the first adds (every op but "
              f"the update, the zeroing of the gradients and the losses, the loss's copy to the host); against a counted "
              f"2-micro-step step (d12, 1 layer, B=1): {chk[0]} groups of ops, " +
              ("all within 0.5% (the embedding's, whose bytes follow the tokens, 2%)." if not chk[1] else f"{len(chk[1])} totals differ: " +
                                                   "; ".join(chk[1][:4]) + ".")]
    L += ["", verdict(cal), "",
          "\"calibration\": the model predicting the measured thing itself (the cuBLAS squares are the fit of its "
          f"product term, e = {GEMM_E:.3f} of the peak and t0 = {GEMM_T0 * 1e6:.1f} µs a product; llm.c's steps are "
          "its own counted kernels, at 8 ranks as the model's header says). \"comparison\": our flash kernels "
          "at FlashAttention-2's benchmark configuration beside other implementations' measurements (TFLOP/s "
          "with their FLOPs: 4 B T² NH HS halved for causal, the backward 2.5x).", ""]
    tg = targets(COUNTS_DIR[0], precision, cal, sbs) if COUNTS_DIR else []
    if tg:
        L += ["## The targets, by this model (H100 SXM)", "", "| target | ours, predicted | bar | met |", "|---|---:|---:|---|"]
        for what, ours, bar, met in tg:
            far = "yes" if met else f"no: {100 * abs(ours / bar - 1):.2g}% {'over' if 'at most' in what else 'under'}"
            v = (lambda x: f"{x:.3f}") if max(ours, bar) < 10 else (lambda x: f"{x:.1f}")  # ms under 10 to the µs
            L.append(f"| {what} | {v(ours)} | {v(bar)} | {far} |")
        L.append("")
    if sbs and any(sbs[g] for g in sbs):
        L += ["## Side by side with llm.c (predicted, the same model)", "",
              "B = 8, T = 1024, 16-bit (ours FP16, llm.c BF16), `-r 0`, one GPU, each at its `-ge` default (ours 2 on "
              "sm_90 and newer, 0 before; llm.c 0); llm.c's attention at cuDNN's published rate where there is one "
              "(H100, H200), FlashAttention-2's on an A100, else its own kernels as counted.", "",
              "| GPU | model | ours ms | llm.c ms | ours / llm.c | ours tokens/s | llm.c tokens/s | ours MFU | llm.c MFU |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for g, models in sbs.items():
            for mname, r in models.items():
                L.append(f"| {g} | {mname} | {r['ours_ms']:.1f} | {r['llmc_ms']:.1f} | {r['ours_ms'] / r['llmc_ms']:.3f} | "
                         f"{r['ours_tokens_per_s']:,} | {r['llmc_tokens_per_s']:,} | {100 * r['ours_mfu']:.1f}% | "
                         f"{100 * r['llmc_mfu']:.1f}% |")
        for mname in ("d48", "d12"):
            r = sbs.get("H100 SXM", {}).get(mname)
            if not r:
                continue
            L += ["", f"| H100 SXM, {mname}: family | ours ms | llm.c ms | ours / llm.c |", "|---|---:|---:|---:|"]
            for f, v in r["families"].items():
                ratio = f"{v['ours_ms'] / v['llmc_ms']:.2f}" if v["llmc_ms"] > 0 else "-"
                L.append(f"| {f} | {v['ours_ms']:.2f} | {v['llmc_ms']:.2f} | {ratio} |")
        L.append("")
    return "\n".join(L)


# ---- the time table: the model's inputs for the C planner (common/time_model.c) ----
#
# The planner predicts a configuration's step time with this model (one time model, two readers):
# it reads, compiled in, every counted step's groups of ops as bilinear coefficients in (L, B), the
# GPUs and the model's constants, and applies kernel_time, gemm_time and the memset term as they are
# written above. Written by --table (dev/kernel_report.sh: build/dev/kernel_report/time_table_PREC.c,
# committed as common/time_table.c); test/test_time_model.sh holds the planner's step to this report's
# side-by-side within 1%.
TABLE_METRICS = ("launches", "blocks", "sectors", "smem", "mma_flops", "wgmma_flops", "wgmma", "sfu", "instrs",
                 "tiles", "gemm_bytes", "bytes")


def table_metric(x, name):
    """One of TABLE_METRICS from a group's totals (read and written sectors and shared bytes together;
    instrs: the runtime's counted warp instructions, every class)."""
    if name == "sectors":
        return x["read_sectors"] + x["write_sectors"]
    if name == "smem":
        return x["smem_read"] + x["smem_write"]
    if name == "instrs":
        return sum(x[m] for m in INSTRUCTIONS)
    return x[name]


def table_sets(counts_dir, precision):
    """The counted steps the table carries: (prefix, model, path, -ge, micro-steps, recompute, every),
    those whose four runs exist; and -r 3's segments: every = -1 for what a layer that does not end a
    segment saves against --recompute-every 1 (the _r3k2 runs: 2 layers in one segment, at B = 1 and 2,
    less the _r3 runs' 2 layers in two), which a step at K takes L - ceil(L / K) times."""
    out = []
    for name in MODELS:
        for path, dev in ((90, ""), (80, SM80)):
            for sfx, ge, micro, r, every in (("", 0, 1, 0, 0), ("_ge2", 2, 1, 0, 0), ("_A2", 0, 2, 0, 0),
                                             ("_ge2_A2", 2, 2, 0, 0),
                                             ("_r1", 0, 1, 1, 0), ("_r2", 0, 1, 2, 0), ("_r3", 0, 1, 3, 1),
                                             ("_ge2_r1", 2, 1, 1, 0), ("_ge2_r2", 2, 1, 2, 0), ("_ge2_r3", 2, 1, 3, 1)):
                prefix = f"{name}_{precision}{dev}{sfx}"
                if have_runs(counts_dir, prefix):
                    out.append((prefix, name, path, ge, micro, r, every))
                    k2 = f"{prefix}k2"
                    if r == 3 and all(os.path.exists(os.path.join(counts_dir, f"{k2}_L2_B{b}.count")) for b in (1, 2)):
                        out.append((k2, name, path, ge, micro, r, -1))
    return out


def bilinear_coefs(f11, f12, f21, f22):
    """(a, b, c, d) of a + b L + c B + d L B through the four runs (the same algebra as bilinear)."""
    d = f22 - f21 - f12 + f11
    c = f12 - f11 - d
    b = f21 - f11 - d
    return (f11 - b - c - d, b, c, d)


def time_table(counts_dir, precision):
    """The C source of the time table (see above)."""
    def num(v):
        r = round(v)
        return str(r) if abs(v - r) < 1e-6 * max(1.0, abs(v)) else repr(float(v))
    groups, group_index, rows, row_index, sets = [], {}, [], {}, []
    for prefix, name, path, ge, micro, r, every in table_sets(counts_dir, precision):
        runs = {}
        for l in (1, 2):
            for b in (1, 2):
                runs[(l, b)] = totals(parse(os.path.join(counts_dir, f"{prefix}_L{l}_B{b}.count")), b * T) \
                    if every >= 0 else None
        if every < 0:  # the segment's saving, D(B) = r3(2 layers, B) - r3k2(2 layers, B), as D(1) at L = 1 and
                       # D(2) at L = 2 of a set whose L terms are nil: rows a + c B
            base = prefix[:-2]
            for b in (1, 2):
                k1, a1 = totals(parse(os.path.join(counts_dir, f"{base}_L2_B{b}.count")), b * T)
                k2, a2 = totals(parse(os.path.join(counts_dir, f"{prefix}_L2_B{b}.count")), b * T)
                d = defaultdict(lambda: defaultdict(float))
                for k in set(k1) | set(k2):
                    for mt in METRICS:
                        d[k][mt] = (k1[k][mt] if k in k1 else 0.0) - (k2[k][mt] if k in k2 else 0.0)
                runs[(1, b)] = runs[(2, b)] = (d, {**a2, **a1})
        keys = list(OrderedDict.fromkeys(k for (s, _) in runs.values() for k in s))
        attrs = {}
        for (_, a) in runs.values():
            attrs.update(a)
        members = []
        for k in keys:
            a = attrs.get(k, {})
            if k[0] == "kernel":
                loop = SASS.get(a.get("symbol"))
                lp = (0, 0, 0, 0)
                if loop and loop["HMMA"] + loop["HGMMA"] > 0:
                    lp = (loop["instrs"], loop["HMMA"] + loop["HGMMA"], loop["kernel_instrs"] - loop["instrs"],
                          loop["kernel_HMMA"] + loop["kernel_HGMMA"] - loop["HMMA"] - loop["HGMMA"])
                g = ("TIME_KERNEL", k[1], a["threads"], a["regs"], a["smem"]) + lp + \
                    (1 if family(k[1]) in GRID_BY_SMS else 0, 0)
            elif k[0] == "blas":
                g = ("TIME_BLAS", f"gemm {k[1][0]}x{k[1][1]}x{k[1][2]} batch {k[2]} {k[3]}", 0, 0, 0, 0, 0, 0, 0, 0,
                     -1 if k[1][2] == "BT" else int(k[1][2]))
            else:
                g = ("TIME_MEMSET" if k[0] == "memset" else "TIME_COPY", " ".join(str(x) for x in k if x), 0, 0, 0,
                     0, 0, 0, 0, 0, 0)
            g = g + (common_family(k),)
            if g not in group_index:
                group_index[g] = len(groups)
                groups.append(g)
            coefs = []
            for mi, mt in enumerate(TABLE_METRICS):
                vals = [table_metric(runs[lb][0][k], mt) if k in runs[lb][0] else 0.0
                        for lb in ((1, 1), (1, 2), (2, 1), (2, 2))]
                c = bilinear_coefs(*vals)
                if any(abs(v) > 0 for v in c):
                    coefs.append((mi,) + c)
            if not coefs:
                continue
            row = (group_index[g], tuple(coefs))
            if row not in row_index:
                row_index[row] = len(rows)
                rows.append(row)
            members.append(row_index[row])
        m = MODELS[name]
        sets.append((name, m["C"], m["NH"], path, ge, micro, r, every, members))
    L = [f"// time_table.c: the kernel report's counts for the planner's time model (common/time_model.h), written",
         f"// by dev/kernel_report.py --table from make kernel-report's counted steps ({precision.upper()}, T = {T},",
         f"// vocabulary {V}); do not edit: count again and copy build/dev/kernel_report/time_table_{precision}.c here.",
         "// A group of ops: its kind, name, threads, registers, shared memory a block, the SASS hot loop's",
         "// instructions and tensor instructions and the code outside it (0: none known), whether its grid is",
         "// the GPU's SM count, a product's K (-1: B T) and its family. A row: a group's metrics in a counted",
         "// step, each a + b L + c B + d L B (L layers, micro-batch B). A set: one counted configuration.",
         '#include "time_model.h"', "",
         "const TimeGpu TIME_GPUS[] = {"]
    for gname, g in GPUS.items():
        L.append(f'    {{"{gname}", {g["peak"]!r}, {g["bw"]}, {g["sms"]}, {g["smem"]}, {g["threads"]}, {g["blocks"]}, '
                 f'{g["arch"]}, {g["clock"]!r}, {g["mma"]!r}, {g["wgmma"] or 0.0!r}}},')
    L += ["};", "const int TIME_NUM_GPUS = (int)(sizeof(TIME_GPUS) / sizeof(TIME_GPUS[0]));", "",
          f"const TimeConstants TIME_CONSTANTS = {{{SFU_LANES}, {ISSUE_RATE}, {SMEM_BYTES}, {DRAM_SHARE!r}, {LAUNCH_S!r}, "
          f"{MEMSET_S!r}, {GEMM_E!r}, {GEMM_T0!r}, {COUNT_SMS}, {T}, {V}}};", "",
          "const char* const TIME_METRIC_NAMES[TIME_NUM_METRICS] = {" + ", ".join(f'"{x}"' for x in TABLE_METRICS) + "};",
          "", "const TimeGroup TIME_GROUPS[] = {"]
    for g in groups:
        L.append(f'    {{{g[0]}, "{g[1]}", {", ".join(str(x) for x in g[2:11])}, "{g[11]}"}},')
    L += ["};", "", "static const TimeCoef COEFS[] = {"]
    starts, n = [], 0
    for _, coefs in rows:
        starts.append(n)
        for c in coefs:
            L.append("    {" + ", ".join([str(c[0])] + [num(v) for v in c[1:]]) + "},")
            n += 1
    L += ["};", "", "const TimeRow TIME_ROWS[] = {"]
    for i, (gi, coefs) in enumerate(rows):
        L.append(f"    {{{gi}, COEFS + {starts[i]}, {len(coefs)}}},")
    L += ["};", "", "static const int MEMBERS[] = {"]
    mstarts, n = [], 0
    for s in sets:
        mstarts.append(n)
        L.append("    " + ", ".join(str(x) for x in s[8]) + ",")
        n += len(s[8])
    L += ["};", "", "const TimeSet TIME_SETS[] = {"]
    for i, s in enumerate(sets):
        L.append(f'    {{"{s[0]}", {s[1]}, {s[2]}, {s[3]}, {s[4]}, {s[5]}, {s[6]}, {s[7]}, MEMBERS + {mstarts[i]}, {len(s[8])}}},')
    L += ["};", "const int TIME_NUM_SETS = (int)(sizeof(TIME_SETS) / sizeof(TIME_SETS[0]));",
          "const int TIME_NUM_GROUPS = (int)(sizeof(TIME_GROUPS) / sizeof(TIME_GROUPS[0]));", ""]
    return "\n".join(L)


def planned_step(counts_dir, precision, gname, model_name, B, recompute=0, every=1, micro=1):
    """A step on gname as the planner predicts it (common/time_model.c), from the count files rather than
    the table: n micro-steps at -r r are the -r r run, n - 1 times what a micro-step past the first adds
    at -r 0 (the 2-micro-step run less the 1-micro-step one) and n - 1 times what -r r runs again (its
    run less -r 0's); -r 3 at K layers a segment less, L - ceil(L / K) times, what a layer that does not
    end a segment saves (the _r3 runs at 2 layers less the _r3k2 ones, linear in B). Seconds, or None
    where the runs were not counted."""
    gpu = GPUS[gname]
    m = MODELS[model_name]
    L = m["L"]
    base = f"{model_name}_{precision}{counted_as(counts_dir, gpu)}{'_ge2' if gpu['arch'] >= 90 else ''}"
    rs = base + (f"_r{recompute}" if recompute else "")
    need = [base, rs] + ([base + "_A2"] if micro > 1 else [])
    if not all(have_runs(counts_dir, x) for x in need):
        return None
    sets = [(rs, float(micro) if recompute else (2.0 - micro if micro > 1 else 1.0))]
    if micro > 1:
        sets.append((base + "_A2", micro - 1.0))
        if recompute:
            sets.append((base, -2.0 * (micro - 1)))
    acc = defaultdict(lambda: defaultdict(float))
    attrs = {}
    for prefix, w in sets:
        keys, a, at = extrapolate(counts_dir, prefix, L, B, T)
        attrs.update(a)
        for k in keys:
            for mt in METRICS:
                acc[k][mt] += w * at[k][mt]
    K = min(every, L)
    if recompute == 3 and K > 1:
        merged = L - math.ceil(L / K)
        for b, wb in ((1, 2.0 - B), (2, B - 1.0)):  # D(B), linear in B through D(1) and D(2)
            k1, a1 = totals(parse(os.path.join(counts_dir, f"{rs}_L2_B{b}.count")), b * T)
            k2, a2 = totals(parse(os.path.join(counts_dir, f"{rs}k2_L2_B{b}.count")), b * T)
            attrs.update(a1)
            attrs.update(a2)
            for k in set(k1) | set(k2):
                for mt in METRICS:
                    d = (k1[k][mt] if k in k1 else 0.0) - (k2[k][mt] if k in k2 else 0.0)
                    acc[k][mt] -= micro * merged * wb * d
    keys = list(acc)
    return step_total(gpu, keys, attrs, acc, B * T)


# The configurations whose predictions the JSON carries for test/test_time_model.sh: (model, GPU, B,
# recompute, K, micro-steps); each GPU's -ge default.
PLANNER_CHECKS = [(mname, gname, 8, r, k, n) for mname in ("d12", "d48") for gname in ("H100 SXM", "RTX A6000")
                  for r, k, n in ((0, 1, 1), (0, 1, 4), (1, 1, 1), (2, 1, 1), (3, 1, 1), (3, 4, 1), (2, 1, 2))]


def planner_checks(counts_dir, precision):
    out = []
    for mname, gname, B, r, k, n in PLANNER_CHECKS:
        t = planned_step(counts_dir, precision, gname, mname, B, r, k, n)
        if t is not None:
            out.append(dict(model=mname, gpu=gname, B=B, recompute=r, recompute_every=k, micro_steps=n,
                            step_ms=round(t * 1e3, 4)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--counts", required=True)
    ap.add_argument("--registers", default="")
    ap.add_argument("--ptxas", nargs="*", default=[],
                    help="nvcc -Xptxas -v output of the trainer (sm_80 and sm_90a), and of llm.c (sm_90)")
    ap.add_argument("--sass", default="", help="dev/sass_mix.py's JSON (the flash kernels' hot loops)")
    ap.add_argument("--out", default="")
    ap.add_argument("--table", default="", help="write the planner's time table (common/time_table.c) here")
    ap.add_argument("--check", nargs=5, metavar=("PREFIX", "L", "B", "T", "COUNT"),
                    help="test the extrapolation from PREFIX_L{1,2}_B{1,2}.count against a counted run")
    args = ap.parse_args()
    for path in args.ptxas:
        PTXAS.update(parse_ptxas(path))
    if args.sass and os.path.exists(args.sass):
        with open(args.sass) as f:
            # a mix made before HGMMA had its column has none
            SASS.update({v["mangled"]: dict({"HGMMA": 0, **v["hot_loop"]}, kernel_instrs=v["instrs"], kernel_HMMA=v["HMMA"],
                                            kernel_HGMMA=v.get("HGMMA", 0))
                         for v in json.load(f).values() if v.get("hot_loop")})
    if args.check:
        prefix, L, B, T_, path = args.check
        keys, bad = check_exact(args.counts, prefix, int(L), int(B), int(T_), path)
        for b in bad:
            print(f"  {b}")
        print(f"{len(keys)} groups of ops; {len(bad)} totals differ")
        sys.exit(1 if bad else 0)
    COUNTS_DIR.append(args.counts)
    if args.table:
        with open(args.table, "w") as f:
            f.write(time_table(args.counts, args.precision))
    cal = calibration(args.counts, args.precision)
    sbs = side_by_side(args.counts, args.precision)
    text = [front(args.precision, cal, sbs)]
    if not SASS:
        text.append("(no SASS hot loops given (--sass): the flash kernels' issue is what the runtime counted, a lower bound)\n")
    for name in ("d12", "d48"):
        text.append(report(args.precision, args.counts, name))
    print("\n".join(text))
    with open(os.path.join(args.out, f"report_{args.precision}.md"), "w") as f:
        f.write("\n".join(text))
    # The predictions test/gpu/check.sh prints beside what it measures (its batches too).
    batches = (1, 2, 4, 8, 12, 16, 24, 32)
    pred = {name: {str(B): step_times(args.precision, args.counts, name, B) for B in batches} for name in ("d12", "d48")}
    doc = {"model": "dev/kernel_report.py, second version", "precision": args.precision, "T": T, "flags": "-r 0 -ge 0",
           "gemm_fit": {"e": round(GEMM_E, 6), "t0_us": round(GEMM_T0 * 1e6, 4)},
           "tolerance": TOLERANCE, "counts": counts_note(args.counts), "calibration": cal, "side_by_side": sbs,
           "targets": [dict(target=w, ours=round(o, 3), bar=round(b, 3), met=m) for w, o, b, m in targets(args.counts, args.precision, cal, sbs)],
           "predicted": pred, "planner": planner_checks(args.counts, args.precision)}
    # The same with -ge 2 (GELU in the matmul epilogues), for check.sh's measurement of both.
    if all(os.path.exists(os.path.join(args.counts, f"{name}_{args.precision}_ge2_L{l}_B{b}.count"))
           for name in ("d12", "d48") for l in (1, 2) for b in (1, 2)):
        doc["predicted_ge2"] = {name: {str(B): step_times(args.precision, args.counts, name, B, "_ge2") for B in batches}
                                for name in ("d12", "d48")}
    # llm.c's (one GPU, -r 0, built without cuDNN: its own attention kernels), for check.sh's run of it.
    if llmc_step(args.counts, "H100 SXM", "d12", 1):
        doc["predicted_llmc"] = {}
        for name in ("d12", "d48"):
            doc["predicted_llmc"][name] = {}
            for B in batches:
                row = {}
                for gname, gpu in GPUS.items():
                    r = llmc_step(args.counts, gname, name, B, cudnn=False)
                    if r is None:  # its runs of this model were not counted
                        continue
                    t = r[0]
                    row[gname] = dict(step_ms=round(t * 1e3, 2), tokens_per_s=round(B * T / t),
                                      mfu=round(model_flops(name, B * T) / t / (gpu["peak"] * 1e12), 4))
                doc["predicted_llmc"][name][str(B)] = row
    with open(os.path.join(args.out, f"predicted_{args.precision}.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
