#!/usr/bin/env bash
# test_kernel_report.sh: the kernel report's counting (the CPU runtime's CUDA_CPU_COUNT through the
# instrumented trainer, build/dev/train_gpt2_count_fp16) and its exactness claim: every total of a step
# is bilinear in (layers, micro-batch), so four counted runs (1 and 2 layers, B = 1 and 2) give any
# other; here a counted run at 3 layers and B = 3 must equal the extrapolation for every group of ops
# and every count (exactly, but a grid's rounding, a block a launch, a product's tiles, a row of them a
# launch, warp instructions within 1%; the batches hold no repeated token, which the embedding
# kernels' counts would follow). And the counts themselves: GELU forward reads and writes its
# n elements once each, in bytes asked for and in 32-byte sectors touched; the flash forward, which
# reads through cp.async and ldmatrix or wgmma (the warp primitives' traffic, test/cuda_cpu/test_count.cu
# checks it exactly), reads qkv exactly once at T = 64 (one query tile) and has shared-memory traffic;
# GELU's special functions. The flash kernels on the runtime's default sm_90 (the wgmma path: wgmma
# FLOPs) and on an emulated sm_80 (CUDA_CPU_SM=80: the mma.sync path), each GPU taking its runs, wgmma
# FLOPs charged at wgmma's rate and HGMMA in the instruction-issue term. The attention counted alone, linear in
# heads. And the committed report's calibration table and side-by-side: present, and their arithmetic
# (the docs' figures from them: test_doc_figures.sh).
set -u
cd "$(dirname "$0")/.."
bin=build/dev/train_gpt2_count_fp16
gen=build/test/gen_data
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
# Tokens 0..511 over and over, read in order (-sf 0): a batch of up to 512 tokens holds each once, so
# the embedding kernels, whose work follows the tokens a batch repeats, are bilinear like the rest.
$gen ramp "$dir/train.bin" 20000 512 > /dev/null || { echo "FAIL kernel_report: gen_data"; exit 1; }
count() {  # L B [suffix flags...]: one counted step of a 96-channel, 3-head model (head size 32: the flash
           # forward; T = 64; no model dimension equals B*T) into $dir/tiny$3_L$1_B$2.count, with the
           # report's flags (dev/kernel_report.sh: -r 0 -ge 0) and any given; a suffix starting _sm80
           # counts on an emulated sm_80 (CUDA_CPU_SM=80), as dev/kernel_report.sh's
    local L=$1 B=$2 sfx=${3:-} sm=90
    shift 2; [ $# -gt 0 ] && shift
    case $sfx in _sm80*) sm=80 ;; esac
    $gen model "$dir/m$L.bin" "$L" 96 3 512 64 1 > /dev/null &&
    CUDA_CPU_SM=$sm CUDA_CPU_CHECK=0 CUDA_CPU_SCHEDULES=forward CUDA_CPU_STREAM_ORDERS=forward CUDA_CPU_BLAS=skip \
        CUDA_CPU_COUNT="$dir/tiny${sfx}_L${L}_B${B}.count" $bin -e "$dir/m$L.bin" -i "$dir/train.bin" -b "$B" -t 64 -x 1 -v 0 -s 0 \
        -o "" -r 0 -ge 0 -sf 0 "$@" > "$dir/run.out" 2>&1 || { echo "FAIL kernel_report: counting run L=$L B=$B $sfx $*: $(tail -n 2 "$dir/run.out")"; exit 1; }
}
for L in 1 2 3; do for B in 1 2 3; do
    case "$L$B" in 11|12|21|22|33) count $L $B ;; esac
    # 2 micro-steps (-d: tokens a step): what the report adds for each micro-step past the first
    case "$L$B" in 11|12|21|22) count $L $B _A2 -d $((2 * B * 64)) ;; esac
    # on an sm_80: the runs the A100, RTX A6000 and L40S take
    case "$L$B" in 11|12|21|22) count $L $B _sm80 ;; esac
done; done
out=$(python3 dev/kernel_report.py --counts "$dir" --check tiny 3 3 64 "$dir/tiny_L3_B3.count" 2>&1)
if [ $? -eq 0 ]; then
    echo "PASS kernel_report: 3 layers at B=3 counted = extrapolated from 1-2 layers at B=1-2 ($(echo "$out" | tail -n 1))"
else
    echo "FAIL kernel_report: the extrapolation is not exact: $(echo "$out" | head -n 4 | tr '\n' ' ')"
    status=1
fi
# -r 0, as the report says: GELU forward once a layer (llm.c's default -r 1 re-runs it in backward).
n=$(grep -c '^kernel name=gelu_forward_kernel' "$dir/tiny_L3_B3.count")
[ "$n" = 3 ] && echo "PASS kernel_report: the counted step is -r 0 (3 GELU forwards at 3 layers)" \
    || { echo "FAIL kernel_report: $n GELU forwards at 3 layers (expected 3: -r 0)"; status=1; }
# Accumulation: a micro-step past the first adds no update (adamw), gradient norm or loss total, and
# every forward and backward kernel and product once more; the bias gradients' add kernel runs only
# from the second micro-step on (the first writes the gradients, cuBLASLt's epilogue straight into
# them; the others add). Read at 2 layers, B = 2 through the report's own micro_steps.
out=$(python3 - "$dir" <<'PY'
import sys
sys.path.insert(0, "dev")
import kernel_report as k
k.T = 64
keys, attrs, tot = k.micro_steps(sys.argv[1], "tiny", 2, 2)
one, two = tot(1), tot(2)
bad, seen = [], set()
for key in keys:
    name = key[1] if len(key) > 1 else key[0]
    fam = k.family(name) if key[0] == "kernel" else key[0]
    o, d = one[key]["launches"], two[key]["launches"] - one[key]["launches"]
    if fam in ("adamw", "global_norm"):
        ok = o > 0 and abs(d) < 1e-9
    elif fam == "matmul_dbias_add_kernel":
        ok = abs(o) < 1e-9 and d > 0.5
    elif key[0] == "blas" or fam.startswith(("gelu", "layernorm", "flash", "attention", "fused_classifier")):
        ok = o > 0 and abs(d - o) < 1e-9
    else:
        continue
    seen.add(fam)
    if not ok:
        bad.append(f"{name} {o:g}+{d:g}")
if "matmul_dbias_add_kernel" not in seen or "adamw" not in seen:
    bad.append("groups missing: " + " ".join(sorted(seen)))
print(len(keys), " ".join(bad))
PY
)
[ -n "$out" ] && [ "${out#* }" = "" ] && echo "PASS kernel_report: an extra micro-step ($(echo $out) groups): no update, forward and backward again, the bias gradients' add only from the second" \
    || { echo "FAIL kernel_report: the micro-step split: $out"; status=1; }
# GELU forward at B=3: n = 3 * 64 * 4 * 96 fp16 elements read and written once, and one tanhf each:
# two special-function instructions (ex2 and rcp on a GPU) for each 32 elements a warp instruction holds.
line=$(grep -m1 '^kernel name=gelu_forward_kernel' "$dir/tiny_L3_B3.count")
n=$((3 * 64 * 384 * 2))
v() { echo "$line" | grep -o " $1=[0-9]*" | cut -d= -f2; }
if [ "$(v read)" = $n ] && [ "$(v write)" = $n ] && [ $(( $(v read_sectors) * 32 )) = $n ] && [ $(( $(v write_sectors) * 32 )) = $n ]; then
    echo "PASS kernel_report: GELU forward reads and writes its $n bytes once (asked for and in sectors)"
else
    echo "FAIL kernel_report: GELU forward's counts: $line"
    status=1
fi
[ "$(v sfu)" = $((n / 2 * 2 / 32)) ] && echo "PASS kernel_report: GELU forward's special functions: $(v sfu) warp instructions (2 a tanhf, 32 lanes)" \
    || { echo "FAIL kernel_report: GELU forward's sfu=$(v sfu), expected $((n / 2 * 2 / 32)): $line"; status=1; }
# A count file's training step, from its first kernel on (the encoder's forward): before it, start-up
# (on an sm_90, attention's check of its wgmma kernels against mma.sync runs both on a small problem).
step() { sed -n '/^kernel name=encoder_forward/,$p' "$1"; }
# The flash forward at B=3, T=64 (B=2 on sm_80): q, k and v (3 * B * T * C fp16) read once, asked for
# and in sectors, on either path (wgmma's B operand and ldmatrix are its shared-memory reads).
for run in tiny_L3_B3:3:attention_forward_flash_wgmma_kernel tiny_sm80_L2_B2:2:attention_forward_flash_kernel; do
    IFS=: read -r f b k <<< "$run"
    line=$(step "$dir/$f.count" | grep -m1 "^kernel name=$k<")
    n=$((3 * b * 64 * 96 * 2))
    if [ -n "$line" ] && [ "$(v read)" = $n ] && [ $(( $(v read_sectors) * 32 )) = $n ] && [ "${line/ smem_read=0 /}" = "$line" ] \
            && [ "${line/ smem_write=0 /}" = "$line" ]; then
        echo "PASS kernel_report: $k reads its $n bytes of qkv once (cp.async counted) and moves shared memory"
    else
        echo "FAIL kernel_report: $k's counts in $f (cp.async, ldmatrix and wgmma traffic counted?): $line"
        status=1
    fi
done
# Attention at head size 32 in FP16: the flash forward and the flash backward, each with its tensor-core
# FLOPs and its mangled symbol (how the report finds ptxas's lines), the backward's two kernels (dQ,
# then dK/dV) both; on the runtime's default sm_90 the wgmma kernels (kernels/flash_wgmma.cuh: wgmma
# FLOPs, no mma.sync), on an emulated sm_80 the mma.sync ones (kernels/mma.cuh: mma FLOPs, no wgmma);
# the tiled (WMMA) kernels must not run, nor the other path's.
flash_ok() {  # count file, kernel suffix, FLOPs field counted, FLOPs field zero, the other path's suffix
    local f=$1 sfx=$2 yes=$3 no=$4 other=$5 k ok=1
    for k in attention_forward_flash flash_backward_dq flash_backward_kv; do
        grep -qF "kernel name=${k}${sfx}<T,HS> symbol=_Z" "$f" &&
            ! grep -F "kernel name=${k}${sfx}<T,HS> symbol=_Z" "$f" | grep -vq " $yes=[1-9]" &&
            ! grep -F "kernel name=${k}${sfx}<T,HS> symbol=_Z" "$f" | grep -vq " $no=0\( \|$\)" || ok=0
        grep -qF "kernel name=${k}${other}<T,HS>" "$f" && ok=0
    done
    grep -qE '^kernel name=attention_(forward|backward_dkdv|backward_dq|backward_rowdot)_kernel' "$f" && ok=0
    [ $ok = 1 ]
}
step "$dir/tiny_L3_B3.count" > "$dir/step_L3_B3"
step "$dir/tiny_sm80_L2_B2.count" > "$dir/step_sm80_L2_B2"
flash_ok "$dir/step_L3_B3" _wgmma_kernel wgmma_flops mma_flops _kernel &&
    flash_ok "$dir/step_sm80_L2_B2" _kernel mma_flops wgmma_flops _wgmma_kernel &&
    echo "PASS kernel_report: attention's tensor-core FLOPs counted, symbols named for ptxas's registers: the wgmma flash kernels' wgmma_flops on sm_90, the mma.sync ones' mma_flops on sm_80" \
    || { echo "FAIL kernel_report: the flash kernels' lines (symbols, FLOPs by instruction, path by device): sm_90 $(grep -oE 'name=(attention|flash)[^ ]*' "$dir/step_L3_B3" | sort -u | tr '\n' ' ')| sm_80 $(grep -oE 'name=(attention|flash)[^ ]*' "$dir/step_sm80_L2_B2" | sort -u | tr '\n' ' ')"; status=1; }
# The model: wgmma FLOPs at wgmma's rate (0.96 of the H100's 989.4 TFLOP/s dense peak), mma.sync's at
# 494/757 of it, on the step's own flash launches; the A100 takes the sm_80 runs (mma.sync, 0.95 of its
# 312) and refuses wgmma FLOPs; the instruction-issue term's tensor instructions are HMMA + HGMMA, the loop's
# instructions per tensor instruction charged for the runtime's wgmma count.
out=$(python3 - "$dir" <<'PY'
import sys
sys.path.insert(0, "dev")
import kernel_report as k
k.T = 64
d, bad = sys.argv[1], []
h100, a100 = k.GPUS["H100 SXM"], k.GPUS["A100 SXM 80GB"]
if (k.counted_as(d, h100), k.counted_as(d, a100)) != ("", "_sm80"):
    bad.append(f"runs taken: H100 {k.counted_as(d, h100)!r}, A100 {k.counted_as(d, a100)!r}")
seen = 0
for gpu, prefix, fl, rate, none in ((h100, "tiny", "wgmma_flops", 0.96 * 989.4e12, "mma_flops"),
                                    (a100, "tiny_sm80", "mma_flops", 0.95 * 312.0e12, "wgmma_flops")):
    keys, attrs, at = k.extrapolate(d, prefix, 2, 2, 64)
    for key in keys:
        if key[0] != "kernel" or not k.family(key[1]).startswith(("attention_forward_flash", "flash_backward")):
            continue
        per = {mt: at[key][mt] / at[key]["launches"] for mt in k.METRICS}
        tensor = k.kernel_time(gpu, attrs[key], per)[4]["tensor"]
        if per[fl] <= 0 or per[none] != 0 or abs(tensor - per[fl] / rate) > 1e-9 * tensor:
            bad.append(f"{key[1]} {prefix}: {fl}={per[fl]:.0f} {none}={per[none]:.0f}, tensor {tensor:.4g} s, "
                       f"want {per[fl] / rate:.4g}")
        seen += 1
if seen != 6:
    bad.append(f"{seen} flash kernels seen (want 3 a path)")
launch = dict({mt: 0.0 for mt in k.METRICS}, blocks=2, read_sectors=1, wgmma_flops=2 * 64 * 64 * 16 * 80, wgmma=4 * 80)
a = dict(threads=128, regs=128, smem=40960, symbol="wgmma_test")
t = k.kernel_time(h100, a, launch)[4]["tensor"]
if abs(t - launch["wgmma_flops"] / (0.96 * 989.4e12)) > 1e-9 * t:
    bad.append(f"a launch of wgmma FLOPs alone: tensor {t:.4g} s")
mixed = dict(launch, mma_flops=4096 * 100)
t2 = k.kernel_time(h100, a, mixed)[4]["tensor"]
if abs(t2 - t - 4096 * 100 / (494 / 757 * 989.4e12)) > 1e-9 * t2:
    bad.append(f"mma.sync's FLOPs beside wgmma's: {t2 - t:.4g} s")
try:
    k.kernel_time(a100, a, launch)
    bad.append("an A100 charged wgmma FLOPs")
except SystemExit:
    pass
# HGMMA in the instruction-issue term: 8 warps run 320 HGMMA each (the runtime's count, a warp per instruction);
# the kernel has 500 instructions and 12 HGMMA, its loop 100 and 4: 8 x (400 outside + (320 - 8) / 4 x 100)
k.SASS["wgmma_test"] = dict(instrs=100, HMMA=0, HGMMA=4, MUFU=10, kernel_instrs=500, kernel_HMMA=0, kernel_HGMMA=12)
got, how = k.issue_instructions(a, dict(launch, wgmma=8 * 320))
if how != "sass" or abs(got - 8 * (400 + (320 - 8) / 4 * 100)) > 1e-6:
    bad.append(f"issue with HGMMA: {got} ({how}), want {8 * (400 + (320 - 8) / 4 * 100)}")
print(seen, " | ".join(bad))
PY
)
[ -n "$out" ] && [ "${out#* }" = "" ] && echo "PASS kernel_report: wgmma FLOPs at wgmma's rate (0.96 of the peak) on the H100, mma.sync's at 494/757, the A100 from the sm_80 runs; HGMMA in the instruction-issue term ($(echo $out) flash kernels)" \
    || { echo "FAIL kernel_report: the model's rates by instruction: $out"; status=1; }
# The attention alone (build/dev/count_attention_fp16, the calibration's FlashAttention-2 configuration
# made small): every count is linear in the (batch, head) pairs, so 1 and 2 heads give 3 exactly, as
# the report's flash_at takes them to FlashAttention-2's 16 x 32.
for NH in 1 2 3; do
    CUDA_CPU_CHECK=0 CUDA_CPU_SCHEDULES=forward CUDA_CPU_STREAM_ORDERS=forward CUDA_CPU_COUNT="$dir/att_NH$NH.count" \
        build/dev/count_attention_fp16 1 128 $NH 64 > "$dir/att.out" 2>&1 || { echo "FAIL kernel_report: count_attention NH=$NH: $(tail -n 1 "$dir/att.out")"; exit 1; }
done
out=$(python3 - "$dir" <<'PY'
import sys
sys.path.insert(0, "dev")
import kernel_report as k
(s1, _), (s2, _), (s3, _) = (k.totals(k.parse(f"{sys.argv[1]}/att_NH{h}.count", start=None), 128) for h in (1, 2, 3))
bad = [f"{key[1]} {mt}" for key in s3 for mt in k.METRICS
       if abs(s1[key][mt] + 2 * (s2[key][mt] - s1[key][mt]) - s3[key][mt]) > 1e-9 * max(1, s3[key][mt])]
print(len(s3), sum(1 for key in s3 if key[0] == "kernel" and s3[key]["sfu"] > 0), " ".join(bad))
PY
)
set -- $out
[ "${1:-0}" -ge 3 ] && [ "${2:-0}" -ge 3 ] && [ $# = 2 ] && echo "PASS kernel_report: the attention's counts at 3 heads = extrapolated from 1 and 2 ($1 groups, $2 with special functions)" \
    || { echo "FAIL kernel_report: the attention's extrapolation in heads: $out"; status=1; }
# The committed report's calibration (docs/kernel_report_fp16.json and .md): the anchors are there,
# each error is predicted / measured - 1, the cuBLAS squares follow the product term as the model's
# header writes it (with the JSON's fitted e and t0, which must be dev/kernel_report.py's own), each
# llm.c MFU follows from its step time by llm.c's formula, the markdown shows the same rows, and its
# verdict says "Calibrated" exactly when every step and product is within the tolerance.
out=$(python3 - <<'PY'
import json, math, re, sys
sys.path.insert(0, "dev")
import kernel_report as k
doc = json.load(open("docs/kernel_report_fp16.json"))
md = open("docs/kernel_report_fp16.md").read()
cal, bad = doc.get("calibration", []), []
need = ["cuBLAS FP16 GEMM 2048^3", "cuBLAS FP16 GEMM 4096^3", "cuBLAS FP16 GEMM 8192^3",
        "llm.c GPT-2 1558M, 8x H100 SXM: step", "llm.c GPT-2 1558M, 8x H100 SXM: MFU",
        "llm.c GPT-2 124M, 8x A100 80GB SXM: step", "llm.c GPT-2 124M, 8x A100 80GB SXM: MFU",
        "ours beside FlashAttention-2 forward", "ours beside FlashAttention-2 forward+backward", "ours beside cuDNN forward",
        "ours beside FlashAttention-3 forward"]
anchors = [r.get("anchor") for r in cal]
bad += [f"missing {a}" for a in need if a not in anchors]
for r in cal:
    if set(r) != {"kind", "anchor", "config", "measured", "predicted", "unit", "error", "source"}:
        bad.append(f"{r.get('anchor')}: fields {sorted(r)}")
        continue
    if abs(r["predicted"] / r["measured"] - 1 - r["error"]) > 2e-4:
        bad.append(f"{r['anchor']}: error {r['error']} is not {r['predicted']} / {r['measured']} - 1")
    row = re.search(r"^\| " + re.escape(r["kind"]) + r" \| " + re.escape(r["anchor"]) + r" \| " + re.escape(r["config"])
                    + r" \| ([^|]*) \| ([^|]*) \| ([^|]*) \|", md, re.M)
    if not row or row.group(1).strip() != k.fmt(r["measured"], r["unit"]) or row.group(2).strip() != k.fmt(r["predicted"], r["unit"]) \
            or row.group(3).strip() != f"{100 * r['error']:+.1f}%":
        bad.append(f"{r['anchor']} ({r['config'][:20]}...): not in the markdown as in the JSON")
e, t0 = doc["gemm_fit"]["e"], doc["gemm_fit"]["t0_us"] * 1e-6
if abs(e - k.GEMM_E) > 1e-5 or abs(t0 - k.GEMM_T0) > 1e-9:
    bad.append(f"gemm_fit {e} {t0} is not the model's {k.GEMM_E} {k.GEMM_T0}: regenerate the report")
for r in cal:
    m = re.match(r"cuBLAS FP16 GEMM (\d+)\^3$", r["anchor"])
    if m:  # H100 SXM: 132 SMs, 989.4 TFLOP/s; tiles of 128 x 128 in waves over the SMs
        n = int(m.group(1))
        t = math.ceil((n // 128) ** 2 / 132) * 2 * 128 * 128 * n / (e * 989.4e12 / 132) + t0
        if abs(2 * n ** 3 / t / 1e12 - r["predicted"]) > 0.01:
            bad.append(f"{r['anchor']}: {r['predicted']} is not the product term's {2 * n ** 3 / t / 1e12:.3f}")
steps = {r["anchor"][:-len(": step")]: r for r in cal if r["anchor"].endswith(": step")}
for r in cal:
    if not r["anchor"].endswith(": MFU"):
        continue
    what = r["anchor"][:-len(": MFU")]
    L, C, B, micro, peak = (48, 1600, 16, 8, 989.4e12) if "1558M" in what else (12, 768, 64, 1, 312e12)
    P = 50304 * C + 1024 * C + L * (12 * C * C + 13 * C) + 2 * C
    want = (6 * P + 6 * L * C * 1024) * micro * B * 1024 / steps[what]["predicted"] / peak
    if abs(want - r["predicted"]) > 2e-4:
        bad.append(f"{r['anchor']}: {r['predicted']} is not llm.c's formula's {want:.4f}")
held = [r for r in cal if r["kind"] == "calibration" and r["unit"] != "MFU"]
calibrated = all(abs(r["error"]) <= doc["tolerance"] for r in held)
if ("**Calibrated**" in md) != calibrated or ("**Not calibrated**" in md) == calibrated:
    bad.append(f"the markdown's verdict does not say calibrated={calibrated}")
print(len(cal), " | ".join(bad))
PY
)
[ -n "$out" ] && [ "${out#* }" = "" ] && echo "PASS kernel_report: the committed calibration table ($(echo $out) rows): anchors, errors, the product term, llm.c's MFU, the markdown, the verdict" \
    || { echo "FAIL kernel_report: the calibration table: $out"; status=1; }
# The side-by-side, keyed by GPU then model, each with ours_ms and llm.c's (docs/speed.md's table and
# README's d48 figures are written from these by scripts/doc_figures.py, and checked by test_doc_figures).
out=$(python3 - <<'PY'
import json
doc = json.load(open("docs/kernel_report_fp16.json"))
sbs, bad = doc.get("side_by_side", {}), []
for g in ("H100 SXM", "H200", "A100 SXM 80GB", "RTX A6000", "L40S"):
    for m in ("d12", "d48"):
        r = sbs.get(g, {}).get(m)
        if not r or not all(isinstance(r.get(x), (int, float)) and r[x] > 0 for x in ("ours_ms", "llmc_ms", "ours_mfu", "llmc_mfu")):
            bad.append(f"{g} {m}")
print(" | ".join(bad))
PY
)
[ -z "$out" ] && echo "PASS kernel_report: the side-by-side has ours_ms, llmc_ms and both MFUs for every GPU and model" \
    || { echo "FAIL kernel_report: the side-by-side lacks: $out"; status=1; }
# The report names the flash backward's two families (its attention table and step sum read them), and
# each wgmma kernel is its mma.sync twin's family.
fams=$(python3 -c 'import sys; sys.path.insert(0, "dev"); import kernel_report as k
print(*(k.family(n + "<T,HS>") for n in ("flash_backward_kv_kernel", "flash_backward_dq_kernel", "attention_forward_flash_kernel",
      "flash_backward_kv_wgmma_kernel", "flash_backward_dq_wgmma_kernel", "attention_forward_flash_wgmma_kernel")), *k.ATTENTION_BACKWARD)')
case "$fams" in
    "flash_backward_kv flash_backward_dq attention_forward_flash flash_backward_kv flash_backward_dq attention_forward_flash flash_backward_kv flash_backward_dq "*)
        echo "PASS kernel_report: the flash backward's kernels are their own families (flash_backward_kv, flash_backward_dq) in attention's backward; the wgmma kernels their mma.sync twins' families" ;;
    *) echo "FAIL kernel_report: the flash kernels' families: $fams"; status=1 ;;
esac
exit $status
