#!/usr/bin/env bash
# kernel_report.sh (make kernel-report): what every kernel of a training step moves and computes, and
# how long a written model says it takes on a GPU. No GPU is used: the trainer runs through the CPU
# runtime built with its instrumentation (build/dev/train_gpt2_count_fp16) under CUDA_CPU_COUNT, which
# counts per launch the global bytes asked for, the 32-byte sectors touched (each byte once: the
# kernel's own minimum of DRAM traffic), shared-memory bytes and tensor-core FLOPs, and per cuBLASLt
# call its shape (CUDA_CPU_BLAS=skip: the products are counted, not computed). A step is counted for
# 1 and 2 layers at micro-batch 1 and 2 (T = 1024), every count is bilinear in (layers, batch), and
# dev/kernel_report.py extrapolates to d12 and d48 at B = 8 and applies the model (written at its top)
# with ptxas's registers and shared memory (build/cuda_cpu/nvcc/registers.db). The counted runs use the
# configuration the report names, `-r 0` (every activation kept; the trainer's default is llm.c's -r 1,
# whose backward re-runs GELU) and `-ge 0` (every kernel, GELU's too: the default before sm_90); a second
# set counts `-ge 2` (GELU in the matmul epilogues: the default on sm_90 and newer), and a third and
# fourth, of 2 micro-steps at each, what each extra micro-step adds, for the step with 4 micro-steps of
# accumulation. About 30 minutes on 2 quiet cores. Output: a table per model
# on stdout, and build/dev/kernel_report/*.md.
#   bash dev/kernel_report.sh [fp16|bf16]
set -u
cd "$(dirname "$0")/.."
p=${1:-fp16}
bin=build/dev/train_gpt2_count_$p
gen=build/test/gen_data
out=build/dev/kernel_report
db=build/cuda_cpu/nvcc/registers.db
for f in $bin $gen $db; do
    [ -e "$f" ] || { echo "kernel_report: $f is missing (make kernel-report builds it)"; exit 1; }
done
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {  # model L B suffix flags...: one counted step into $out/<model>_<precision>[suffix]_L<L>_B<B>.count,
           # the suffix naming the variant its flags make (_ge2: -ge 2; _A2: 2 micro-steps)
    local name=$1 L=$2 B=$3 sfx=$4 start f="$out/$1_${p}$4_L$2_B$3.count"
    shift 4
    start=$(date +%s)
    if ! CUDA_CPU_CHECK=0 CUDA_CPU_SCHEDULES=forward CUDA_CPU_STREAM_ORDERS=forward CUDA_CPU_BLAS=skip \
         CUDA_CPU_COUNT="$f" $bin -e "$work/$name.L$L.bin" -i "$work/train.bin" -b $B -t 1024 -x 1 -v 0 -s 0 \
         -o "" "$@" > "$work/run.out" 2>&1; then
        echo "kernel_report: the counting run of $name L=$L B=$B ($*) failed:"
        tail -n 5 "$work/run.out"
        exit 1
    fi
    echo "counted $name with $L layer(s) at B=$B, T=1024, $*: $(( $(date +%s) - start )) s" >&2
}
$gen shard "$work/train.bin" 40000 50257 2 > /dev/null || exit 1
for model in d12:768:12 d48:1600:25; do
    name=${model%%:*}
    rest=${model#*:}
    C=${rest%%:*}
    NH=${rest#*:}
    for L in 1 2; do
        $gen model "$work/$name.L$L.bin" $L "$C" "$NH" 50257 1024 1 > /dev/null || exit 1
        for B in 1 2; do
            count "$name" $L $B "" -r 0 -ge 0
            count "$name" $L $B _ge2 -r 0 -ge 2
            # 2 micro-steps (-d: tokens a step): with the 1-micro-step runs, what an extra micro-step
            # adds (the first writes the gradients, the others add to them), for 4 micro-steps.
            count "$name" $L $B _A2 -r 0 -ge 0 -d $((2 * B * 1024))
            count "$name" $L $B _ge2_A2 -r 0 -ge 2 -d $((2 * B * 1024))
        done
    done
done
# ptxas's resources of the trainer's kernels in this precision for sm_80 and sm_90 (one nvcc compile,
# a few minutes): the report shows both, and the model takes sm_90's registers from it, so they are this
# commit's even when the runtime's table (registers.db) is older.
ptx="$out/ptxas_$p.log"
nvcc=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
if [ -x "$nvcc" ]; then
    P=$(echo "$p" | tr a-z A-Z)
    if ! "$nvcc" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -Xptxas -v -std=c++17 \
            -DENABLE_$P -I. -Icommon -Ireference -Ikernels -c train_gpt2.cu -o "$work/train_gpt2.o" > "$ptx" 2>&1; then
        echo "kernel_report: nvcc could not compile train_gpt2.cu for sm_80 and sm_90 (see $ptx)"
        exit 1
    fi
    echo "ptxas: train_gpt2.cu ($P) for sm_80 and sm_90: $(grep -c 'Used [0-9]* registers' "$ptx") kernel builds, $(grep -c '[1-9][0-9]* bytes spill' "$ptx") with spills" >&2
else
    echo "kernel_report: no nvcc: registers from the runtime's table (sm_90) only" >&2
    : > "$ptx"
fi
python3 dev/kernel_report.py --precision "$p" --counts "$out" --registers "$db" --ptxas "$ptx" --out "$out"
