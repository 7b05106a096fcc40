#!/usr/bin/env bash
# test_kernel_report.sh: the kernel report's counting (the CPU runtime's CUDA_CPU_COUNT through the
# instrumented trainer, build/dev/train_gpt2_count_fp16) and its exactness claim: every total of a step
# is bilinear in (layers, micro-batch), so four counted runs (1 and 2 layers, B = 1 and 2) give any
# other; here a counted run at 3 layers and B = 3 must equal the extrapolation for every group of ops
# and every count (exactly, but a grid's rounding, a block a launch, and the embedding kernels, whose
# bytes depend on the tokens, within 2%). And the counts themselves: GELU forward reads and writes its
# n elements once each, in bytes asked for and in 32-byte sectors touched; the flash forward, which
# reads through cp.async and ldmatrix (the warp primitives' traffic, test/cuda_cpu/test_count.cu checks
# it exactly), reads qkv exactly once at T = 64 (one query tile) and has shared-memory traffic.
set -u
cd "$(dirname "$0")/.."
bin=build/dev/train_gpt2_count_fp16
gen=build/test/gen_data
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
$gen shard "$dir/train.bin" 20000 512 2 > /dev/null || { echo "FAIL kernel_report: gen_data"; exit 1; }
count() {  # L B [suffix flags...]: one counted step of a 96-channel, 3-head model (head size 32: the flash
           # forward; T = 64; no model dimension equals B*T) into $dir/tiny$3_L$1_B$2.count, with the
           # report's flags (dev/kernel_report.sh: -r 0 -ge 0) and any given
    local L=$1 B=$2 sfx=${3:-}
    shift 2; [ $# -gt 0 ] && shift
    $gen model "$dir/m$L.bin" "$L" 96 3 512 64 1 > /dev/null &&
    CUDA_CPU_CHECK=0 CUDA_CPU_SCHEDULES=forward CUDA_CPU_STREAM_ORDERS=forward CUDA_CPU_BLAS=skip \
        CUDA_CPU_COUNT="$dir/tiny${sfx}_L${L}_B${B}.count" $bin -e "$dir/m$L.bin" -i "$dir/train.bin" -b "$B" -t 64 -x 1 -v 0 -s 0 \
        -o "" -r 0 -ge 0 "$@" > "$dir/run.out" 2>&1 || { echo "FAIL kernel_report: counting run L=$L B=$B $*: $(tail -n 2 "$dir/run.out")"; exit 1; }
}
for L in 1 2 3; do for B in 1 2 3; do
    case "$L$B" in 11|12|21|22|33) count $L $B ;; esac
    # 2 micro-steps (-d: tokens a step): what the report adds for each micro-step past the first
    case "$L$B" in 11|12|21|22) count $L $B _A2 -d $((2 * B * 64)) ;; esac
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
# GELU forward at B=3: n = 3 * 64 * 4 * 96 fp16 elements read and written once.
line=$(grep -m1 '^kernel name=gelu_forward_kernel' "$dir/tiny_L3_B3.count")
n=$((3 * 64 * 384 * 2))
v() { echo "$line" | grep -o " $1=[0-9]*" | cut -d= -f2; }
if [ "$(v read)" = $n ] && [ "$(v write)" = $n ] && [ $(( $(v read_sectors) * 32 )) = $n ] && [ $(( $(v write_sectors) * 32 )) = $n ]; then
    echo "PASS kernel_report: GELU forward reads and writes its $n bytes once (asked for and in sectors)"
else
    echo "FAIL kernel_report: GELU forward's counts: $line"
    status=1
fi
# The flash forward at B=3, T=64: q, k and v (3 * B * T * C fp16) read once, asked for and in sectors.
line=$(grep -m1 '^kernel name=attention_forward_flash_kernel' "$dir/tiny_L3_B3.count")
n=$((3 * 3 * 64 * 96 * 2))
if [ "$(v read)" = $n ] && [ $(( $(v read_sectors) * 32 )) = $n ] && [ "${line/ smem_read=0 /}" = "$line" ] \
        && [ "${line/ smem_write=0 /}" = "$line" ]; then
    echo "PASS kernel_report: the flash forward reads its $n bytes of qkv once (cp.async counted) and moves shared memory (ldmatrix counted)"
else
    echo "FAIL kernel_report: the flash forward's counts (cp.async and ldmatrix traffic counted?): $line"
    status=1
fi
# Attention at head size 32 in FP16: the flash forward and the flash backward (mma.sync through
# kernels/mma.cuh), each with its tensor-core FLOPs and its mangled symbol (how the report finds ptxas's
# lines), the backward's two kernels (dQ, then dK/dV) both; the tiled (WMMA) kernels must not run.
pass_flops=1
for k in 'attention_forward_flash_kernel<T,HS>' 'flash_backward_dq_kernel<T,HS>' 'flash_backward_kv_kernel<T,HS>'; do
    grep -qF "kernel name=$k symbol=_Z" "$dir/tiny_L3_B3.count" &&
        grep -F "kernel name=$k symbol=_Z" "$dir/tiny_L3_B3.count" | grep -q ' mma_flops=[1-9]' || pass_flops=0
done
grep -qE '^kernel name=attention_(forward|backward_dkdv|backward_dq|backward_rowdot)_kernel' "$dir/tiny_L3_B3.count" && pass_flops=0
[ $pass_flops = 1 ] && echo "PASS kernel_report: attention's tensor-core FLOPs counted (the flash forward, the flash backward), symbols named for ptxas's registers" \
    || { echo "FAIL kernel_report: no flash forward and backward lines with symbols and FLOPs (or a tiled kernel ran): $(grep -oE 'name=(attention|flash)[^ ]*' "$dir/tiny_L3_B3.count" | sort -u | tr '\n' ' ')"; status=1; }
# The report names the flash backward's two families (its attention table and step sum read them).
fams=$(python3 -c 'import sys; sys.path.insert(0, "dev"); import kernel_report as k; print(k.family("flash_backward_kv_kernel<T,HS>"), k.family("flash_backward_dq_kernel<T,HS>"), " ".join(k.ATTENTION_BACKWARD))')
case "$fams" in
    "flash_backward_kv flash_backward_dq flash_backward_kv flash_backward_dq "*) echo "PASS kernel_report: the flash backward's kernels are their own families (flash_backward_kv, flash_backward_dq) in attention's backward" ;;
    *) echo "FAIL kernel_report: the flash backward's families: $fams"; status=1 ;;
esac
exit $status
