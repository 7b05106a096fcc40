#!/usr/bin/env python3
"""kernel_report.py: the kernel report's tables from the counts dev/kernel_report.sh made.

The counts: one line per op of a training step (the CPU runtime's CUDA_CPU_COUNT), for 1 and 2 layers
at micro-batch 1 and 2, T = 1024. Every count of a step is bilinear in (layers L, batch B): the
embedding, classifier and optimizer work once, each layer's work L times, activations in proportion to
B. Four runs fix a + b L + c B + d L B for every kernel, which gives d12 (L = 12) and d48 (L = 48) at
B = 8 exactly (up to the rounding of a grid size).

THE MODEL (written before it was applied; only a GPU measurement may change it):
  For a kernel launch of G blocks of n threads, with r registers a thread and s bytes of shared memory a
  block (ptxas, sm_90; dynamic from the launch):
    blocks per SM  = min(the GPU's blocks per SM, floor(threads per SM / n),
                         floor(65536 / (warps * ceil(32 r / 256) * 256)),
                         floor(shared memory per SM / (s + 1024)))
    waves          = ceil(G / (SMs * blocks per SM)); filled = G / (waves * SMs * blocks per SM)
    t_dram         = 32 * (sectors read + sectors written) / (0.90 * DRAM bandwidth)
                     (each 32-byte sector the launch touches moves once: re-reads hit L2)
    t_smem         = shared-memory bytes / (128 bytes a clock * clock * SMs)   (no bank conflicts)
    t_tensor       = tensor-core FLOPs / dense fp16/bf16 peak
    t              = max(t_dram, t_smem, t_tensor) / filled + 3 us
  A cuBLASLt product (m, n, k): tiles = ceil(m/128) ceil(n/128), one a SM at a time,
    t = max(2 m n k / (0.80 * peak), (A + B + C + D bytes) / (0.90 * bandwidth)) / (tiles /
        (ceil(tiles / SMs) * SMs)) + 5 us
    (0.80: cuBLASLt's large-shape efficiency, ~790 of 989 TFLOP/s measured by others on an H200).
  A kernel whose grid is the GPU's SM count (LayerNorm backward: one block an SM) has that GPU's SM
    count of blocks, whatever the counting device (an H100's 132) gave it.
  A memset: bytes / (0.90 * bandwidth) + 2 us.
  A step is the sum over its launches (one stream, no overlap). MFU = (6 P + 6 L C T) * B T / t / peak
  (llm.c's formula; P the parameters).
  Not modelled: instruction issue (the SASS mix), latency at low occupancy beyond the filled fraction,
  bank conflicts, L2 misses of re-read data, clocks below boost.
"""
import argparse
import json
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

# The GPUs: dense fp16/bf16 tensor peak with fp32 accumulate (TFLOP/s), DRAM (GB/s), SMs, boost
# clock (GHz), shared memory per SM (KiB), threads and blocks per SM. Sources: NVIDIA's H100 (SXM5),
# H200 (SXM), A100 (SXM4 80GB), RTX A6000 and L40S datasheets and the CUDA programming guide's compute
# capability tables (8.0, 8.6, 8.9, 9.0).
GPUS = OrderedDict([
    ("H100 SXM", dict(peak=989.4, bw=3350, sms=132, clock=1.98, smem=228, threads=2048, blocks=32)),
    ("H200", dict(peak=989.4, bw=4800, sms=132, clock=1.98, smem=228, threads=2048, blocks=32)),
    ("A100 SXM 80GB", dict(peak=312.0, bw=2039, sms=108, clock=1.41, smem=164, threads=2048, blocks=32)),
    ("RTX A6000", dict(peak=154.8, bw=768, sms=84, clock=1.80, smem=100, threads=1536, blocks=16)),
    ("L40S", dict(peak=362.1, bw=864, sms=142, clock=2.52, smem=100, threads=1536, blocks=24)),
])
MODELS = {"d12": dict(L=12, C=768, NH=12), "d48": dict(L=48, C=1600, NH=25)}
V, VP, T, B_TARGET = 50257, 50304, 1024, 8
METRICS = ["launches", "blocks", "read", "write", "read_sectors", "write_sectors", "smem_read", "smem_write",
           "mma_flops", "flops", "gemm_bytes", "bytes"]


def parse(path):
    """The step's ops: from the first encoder forward on (what came before is start-up)."""
    ops, started = [], False
    with open(path) as f:
        for line in f:
            kind, _, rest = line.strip().partition(" ")
            kv = dict(x.split("=", 1) for x in rest.split())
            if kind == "kernel" and kv["name"].startswith("encoder_forward"):
                started = True
            if started:
                ops.append((kind, kv))
    if not ops:
        sys.exit(f"kernel_report: no step in {path}")
    return ops


def group_key(kind, kv, bt):
    if kind == "kernel":
        return ("kernel", kv["name"], kv["symbol"], kv["block"], kv["smem"])
    if kind == "blas":
        dims = tuple("BT" if int(kv[d]) == bt else int(kv[d]) for d in ("m", "n", "k"))
        return ("blas", dims, kv["batch"], kv["epilogue"])
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
            b = [int(x) for x in kv["block"].split(",")]
            regs, ptx_smem = int(kv["regs"]), int(kv["ptxas_smem"])
            if (kv["symbol"], "sm_90") in PTXAS:  # this commit's ptxas, when the runtime's table is older
                regs, _, _, ptx_smem = PTXAS[(kv["symbol"], "sm_90")]
            attrs[k] = dict(threads=b[0] * b[1] * b[2], regs=regs, symbol=kv["symbol"],
                            smem=int(kv["smem"]) + max(int(kv["static_smem"]), ptx_smem))
        elif kind == "blas":
            s["flops"] += int(kv["flops"])
            s["gemm_bytes"] += sum(int(kv[x]) for x in ("a", "b", "c", "d", "bias", "aux"))
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


def kernel_time(gpu, a, launch):
    """Seconds for one launch of a kernel group (the model above), and what bounds it."""
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
    t = {"dram": 32 * (launch["read_sectors"] + launch["write_sectors"]) / (0.90 * gpu["bw"] * 1e9),
         "smem": (launch["smem_read"] + launch["smem_write"]) / (128 * gpu["clock"] * 1e9 * gpu["sms"]),
         "tensor": launch["mma_flops"] / (gpu["peak"] * 1e12)}
    bound = max(t, key=t.get)
    return t[bound] / filled + 3e-6, bound, bps, waves


def gemm_time(gpu, dims, launch, bt):
    m, n, k = (bt if d == "BT" else d for d in dims)
    tiles = math.ceil(m / 128) * math.ceil(n / 128)
    filled = tiles / (math.ceil(tiles / gpu["sms"]) * gpu["sms"])
    tf = launch["flops"] / (0.80 * gpu["peak"] * 1e12)
    tb = launch["gemm_bytes"] / (0.90 * gpu["bw"] * 1e9)
    return max(tf, tb) / filled + 5e-6, ("tensor" if tf >= tb else "dram")


# The attention backward's families: the flash backward (kernels/flash_bwd.cuh: FP16/BF16 at head sizes
# 32 and 64) or the tiled one (kernels/attention.cuh), whichever the counted run launched.
ATTENTION_BACKWARD = ("flash_backward_kv", "flash_backward_dq", "attention_backward_dkdv", "attention_backward_dq",
                      "attention_backward_rowdot")


def family(name):
    n = name.split("<")[0]
    for f in ("attention_forward_flash", "attention_forward", "attention_backward_dkdv", "attention_backward_dq", "attention_backward_rowdot",
              "flash_backward_kv", "flash_backward_dq", "layernorm_forward", "layernorm_backward_reduce", "layernorm_backward", "gelu_forward", "gelu_backward",
              "matmul_dbias_partial", "matmul_dbias_finish", "fused_classifier", "encoder_forward", "encoder_backward",
              "adamw", "global_norm", "loss_accumulate"):
        if n.startswith(f):
            return f
    return n


def parse_ptxas(path):
    """ptxas -v output (nvcc -Xptxas -v): {(mangled name, "sm_XX"): (registers, spill stores, spill loads,
    static shared memory bytes)}; empty without the file."""
    res, fn, arch, spill = {}, None, None, (0, 0)
    if not path or not os.path.exists(path):
        return res
    with open(path) as f:
        for line in f:
            m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+)'", line)
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


PTXAS = {}  # set by main from --ptxas: the trainer's kernels compiled for sm_80 and sm_90


def extrapolate(counts_dir, prefix, L, B, T):
    """Every group's step totals at (L, B) from the four counted runs (bilinear in layers and batch)."""
    runs = {}
    for l in (1, 2):
        for b in (1, 2):
            runs[(l, b)] = totals(parse(os.path.join(counts_dir, f"{prefix}_L{l}_B{b}.count")), b * T)
    keys = list(OrderedDict.fromkeys(k for (s, _) in runs.values() for k in s))
    attrs = {}
    for (_, a) in runs.values():
        attrs.update(a)
    at = {k: {mt: bilinear(*(runs[lb][0][k][mt] for lb in ((1, 1), (1, 2), (2, 1), (2, 2))), L, B) for mt in METRICS}
          for k in keys}
    return keys, attrs, at


def micro_steps(counts_dir, prefix, L, B):
    """The step at (L, B) with n micro-steps of accumulation, from the 1-micro-step runs prefix_L*_B* and
    the 2-micro-step runs prefix_A2_L*_B* (both bilinear): (keys, attrs, totals(n)), totals(n) = one +
    (n - 1) (two - one) for every group either run has. The first micro-step differs from the others
    (it writes the gradients, which the others add to: no memset, and the bias gradients' add kernel
    only from the second on), so an extra micro-step is two - one, not a share of one. None when the
    2-micro-step runs are missing."""
    if not all(os.path.exists(os.path.join(counts_dir, f"{prefix}_A2_L{l}_B{b}.count")) for l in (1, 2) for b in (1, 2)):
        return None
    k1, a1, one = extrapolate(counts_dir, prefix, L, B, T)
    k2, a2, two = extrapolate(counts_dir, prefix + "_A2", L, B, T)
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
    two things that are not bilinear: a grid's size is rounded up (at most one block a launch), and
    the embedding kernels touch the rows of the tokens the batch holds (repeats share rows: within 2%)."""
    keys, _, at = extrapolate(counts_dir, prefix, L, B, T)
    real, _ = totals(parse(path), B * T)
    bad = []
    for k in set(keys) | set(real):
        data = len(k) > 1 and str(k[1]).startswith("encoder_")
        for mt in METRICS:
            want, got = real[k][mt] if k in real else 0.0, at[k][mt] if k in at else 0.0
            tol = 1e-9 * max(1.0, abs(want))
            if mt == "blocks":
                tol = max(tol, real[k]["launches"] if k in real else 0.0)
            elif data:
                tol = max(tol, 0.02 * abs(want))
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
        if k[1] in GRID_BY_SMS and round(per["blocks"]) == COUNT_SMS:
            per = dict(per, blocks=gpu["sms"])
        t, bound, bps, waves = kernel_time(gpu, attr, per)
        return t, bound, (attr["threads"], attr["regs"], attr["smem"], bps, waves, per["blocks"])
    if k[0] == "blas":
        t, bound = gemm_time(gpu, k[1], per, bt)
        return t, bound, None
    return per["bytes"] / (0.90 * gpu["bw"] * 1e9) + 2e-6, "dram", None


def step_times(precision, counts_dir, model_name, B, variant=""):
    """Predicted step time per GPU at micro-batch B (the model, without the tables); variant "_ge2":
    the counts of -ge 2."""
    m = MODELS[model_name]
    keys, attrs, at = extrapolate(counts_dir, f"{model_name}_{precision}{variant}", m["L"], B, T)
    bt = B * T
    out = {}
    for gname, gpu in GPUS.items():
        total = step_total(gpu, keys, attrs, at, bt)
        mfu = (6 * params(m) + 6 * m["L"] * m["C"] * T) * bt / total / (gpu["peak"] * 1e12)
        out[gname] = dict(step_ms=round(total * 1e3, 2), tokens_per_s=round(bt / total), mfu=round(mfu, 4))
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


def report(precision, counts_dir, model_name):
    m = MODELS[model_name]
    keys, attrs, at = extrapolate(counts_dir, f"{model_name}_{precision}", m["L"], B_TARGET, T)
    bt = B_TARGET * T
    lines = []
    P = params(m)
    model_flops = (6 * P + 6 * m["L"] * m["C"] * T) * bt
    attn_fwd_flops = 4 * B_TARGET * T * T * m["NH"] * (m["C"] // m["NH"]) / 2 * m["L"]
    summary = []
    for gname, gpu in GPUS.items():
        fam = defaultdict(lambda: dict(t=0.0, launches=0.0, read=0.0, sectors=0.0, smem=0.0, flops=0.0, bound=defaultdict(float),
                                       detail=None))
        total = 0.0
        for k, x, n, t, bound, detail in group_times(gpu, keys, attrs, at, bt):
            f = family(k[1]) if k[0] == "kernel" else "matmul (cuBLASLt)" if k[0] == "blas" else k[0]
            F = fam[f]
            F["t"] += t * n
            F["launches"] += n
            F["read"] += x["read"] + x["write"] + x["gemm_bytes"] + x["bytes"]
            F["sectors"] += 32 * (x["read_sectors"] + x["write_sectors"]) + x["gemm_bytes"] + x["bytes"]
            F["smem"] += x["smem_read"] + x["smem_write"]
            F["flops"] += x["mma_flops"] + x["flops"]
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
        lines.append("| kernel family | launches | requested MB | unique MB | smem MB | TFLOP | block, regs, smem KiB, blocks/SM, waves | bound | ms | % |")
        lines.append("|---|---:|---:|---:|---:|---:|---|---|---:|---:|")
        for f, F in sorted(fam.items(), key=lambda kv: -kv[1]["t"]):
            d = F["detail"][1] if F["detail"] else None
            shape = f"{d[0]}, {d[1]}, {d[2] / 1024:.1f}, {d[3]}, {d[4]}" if d else "-"
            bound = max(F["bound"], key=F["bound"].get)
            lines.append(f"| {f} | {F['launches']:.0f} | {F['read'] / 1e6:,.0f} | {F['sectors'] / 1e6:,.0f} | "
                         f"{F['smem'] / 1e6:,.0f} | {F['flops'] / 1e12:.2f} | {shape} | {bound} | "
                         f"{F['t'] * 1e3:.2f} | {100 * F['t'] / total:.1f} |")
        att = fam["attention_forward"]["t"] + fam["attention_forward_flash"]["t"]
        attb = sum(fam[f]["t"] for f in ATTENTION_BACKWARD)
        lines.append("")
        # The attention kernels with ptxas's resources for both architectures (sm_90 is what the model
        # uses), what they move and compute, and their TFLOP/s: counted tensor-core FLOPs (masked
        # products included) and, for the forward, the causal FLOPs (4 B T^2 NH HS / 2 a layer).
        lines.append("| attention kernel | ptxas sm_90: regs, spill B, smem KiB | sm_80 | requested MB | unique MB | "
                     "smem MB | tensor TFLOP | ms | tensor TFLOP/s | causal TFLOP/s |")
        lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for f in ("attention_forward_flash", "attention_forward") + ATTENTION_BACKWARD:
            F = fam.get(f)
            if not F or F["launches"] == 0:
                continue
            sym = next((attrs[k].get("symbol") for k in keys if k[0] == "kernel" and family(k[1]) == f and
                        round(at[k]["launches"]) > 0), None)
            res = []
            for arch in ("sm_90", "sm_80"):
                r = PTXAS.get((sym, arch))
                res.append(f"{r[0]}, {r[1] + r[2]}, {r[3] / 1024:.1f}" if r else "-")
            causal = f"{attn_fwd_flops / F['t'] / 1e12:.0f}" if f.startswith("attention_forward") else "-"
            lines.append(f"| {f} | {res[0]} | {res[1]} | {F['read'] / 1e6:,.0f} | {F['sectors'] / 1e6:,.0f} | "
                         f"{F['smem'] / 1e6:,.0f} | {F['flops'] / 1e12:.2f} | {F['t'] * 1e3:.2f} | "
                         f"{F['flops'] / F['t'] / 1e12:.0f} | {causal} |")
        lines.append("")
        lines.append("Bytes include the warp primitives' traffic, counted by the CPU runtime once a warp: "
                     "cp.async's global reads and shared writes, ldmatrix's shared reads, WMMA's tile loads and "
                     "stores (global or shared by the pointer); test/cuda_cpu/README.md, \"Counting\".")
        if not PTXAS:
            lines.append("")
            lines.append("(no ptxas output given (--ptxas): registers from the runtime's table, sm_90 only)")
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
                     f"{3.5 * attn_fwd_flops / (att + attb) / 1e12:.0f} forward+backward (causal FLOPs, backward 2.5x). "
                     "A roofline: the model has no term for instruction issue, so a kernel whose time goes to "
                     "non-memory instructions (attention's softmax in fp32 through shared memory) is predicted "
                     "faster than it can run.")
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--counts", required=True)
    ap.add_argument("--registers", default="")
    ap.add_argument("--ptxas", default="", help="nvcc -Xptxas -v output of the trainer (sm_80 and sm_90)")
    ap.add_argument("--out", default="")
    ap.add_argument("--check", nargs=5, metavar=("PREFIX", "L", "B", "T", "COUNT"),
                    help="test the extrapolation from PREFIX_L{1,2}_B{1,2}.count against a counted run")
    args = ap.parse_args()
    PTXAS.update(parse_ptxas(args.ptxas))
    if args.check:
        prefix, L, B, T_, path = args.check
        keys, bad = check_exact(args.counts, prefix, int(L), int(B), int(T_), path)
        for b in bad:
            print(f"  {b}")
        print(f"{len(keys)} groups of ops; {len(bad)} totals differ")
        sys.exit(1 if bad else 0)
    text = []
    for name in ("d12", "d48"):
        r = report(args.precision, args.counts, name)
        print(r)
        text.append(r)
    with open(os.path.join(args.out, f"report_{args.precision}.md"), "w") as f:
        f.write("\n".join(text))
    # The predictions test/gpu/check.sh prints beside what it measures (its batches too).
    batches = (1, 2, 4, 8, 12, 16, 24, 32)
    pred = {name: {str(B): step_times(args.precision, args.counts, name, B) for B in batches} for name in ("d12", "d48")}
    doc = {"model": "dev/kernel_report.py", "precision": args.precision, "T": T, "flags": "-r 0 -ge 0", "predicted": pred}
    # The same with -ge 2 (GELU in the matmul epilogues), for check.sh's measurement of both.
    if all(os.path.exists(os.path.join(args.counts, f"{name}_{args.precision}_ge2_L{l}_B{b}.count"))
           for name in ("d12", "d48") for l in (1, 2) for b in (1, 2)):
        doc["predicted_ge2"] = {name: {str(B): step_times(args.precision, args.counts, name, B, "_ge2") for B in batches}
                                for name in ("d12", "d48")}
    with open(os.path.join(args.out, f"predicted_{args.precision}.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
