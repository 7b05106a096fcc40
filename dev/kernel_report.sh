#!/usr/bin/env bash
# kernel_report.sh (make kernel-report): what every kernel of a training step moves, computes and
# issues, and how long a written model says it takes on a GPU, held to published GPU measurements.
# No GPU is used: the trainer runs through the CPU runtime built with its instrumentation
# (build/dev/train_gpt2_count_fp16) under CUDA_CPU_COUNT, which counts per launch the global bytes
# asked for, the 32-byte sectors touched (each byte once: the kernel's own minimum of DRAM traffic),
# shared-memory bytes, tensor-core FLOPs and warp instructions by class (special functions, shuffles,
# barriers, atomics, the matrix primitives, loads and stores), and per cuBLASLt call its shape
# (CUDA_CPU_BLAS=skip: the products are counted, not computed). A step is counted for 1 and 2 layers at
# micro-batch 1 and 2 (T = 1024), every count is bilinear in (layers, batch), and dev/kernel_report.py
# extrapolates to d12 and d48 and applies the model written at its top, with ptxas's registers and
# shared memory and, for the flash kernels' inner loops, their SASS (make sass-mix; without a
# disassembler the committed docs/sass_mix_fp16.json).
#
# The counted runs: `-r 0 -ge 0` (every activation kept, every kernel, GELU's too: the default before
# sm_90), `-ge 2` (GELU in the matmul epilogues: the default on sm_90 and newer), and 2 micro-steps of
# each (what each micro-step past the first adds, for steps with accumulation); the trainer's attention
# alone at FlashAttention-2's benchmark configuration (build/dev/count_attention_fp16: head size 64,
# causal, T = 1024 and 2048, for 1 and 2 heads, linear in heads); and llm.c's train_gpt2.cu (BF16, no
# cuDNN) built through the same runtime (make builds build/dev/llmc/train_gpt2cu_count when a checkout
# is at LLMC_DIR, ./llm.c by default), counted the same way, for the calibration and the side-by-side.
# The runtime's device is an sm_90, where the trainer runs the flash kernels' wgmma path: those runs are
# the H100's and H200's. The A100, RTX A6000 and L40S run the mma.sync path, so the trainer is counted
# again on an emulated sm_80 (CUDA_CPU_SM=80; files named _sm80): `-ge 0` (their default) with 1 and
# 2 micro-steps, `-ge 2` (the predictions' -ge 2 table), and the attention alone at T = 1024 (the
# A100's FlashAttention-2 comparison). llm.c is counted once (its kernels are the same on both). For
# the planner's time (common/time_model.c, whose table --table writes: build/dev/kernel_report/
# time_table_PREC.c, committed as common/time_table.c), d48 is also counted at -r 1, 2 and 3 on each
# path at its -ge default (-r 3 in segments of one layer, and of two at 2 layers: _r3k2).
# A count file newer than the binary that made it is kept (the model alone changes in seconds);
# `rm -r build/dev/kernel_report` counts everything again: about 45 minutes on 2 quiet cores (an
# Intel Xeon, December 2026) for the trainer's runs on both paths, llm.c's, the attention's and
# ptxas's compile, and 20 more for d48's recompute runs; several times that on a loaded machine.
# Output: the tables on stdout, build/dev/kernel_report/report_PREC.md and predicted_PREC.json, which
# for FP16 are committed as docs/kernel_report_fp16.md and .json (with time_table_fp16.c as
# common/time_table.c: test/test_time_model.sh holds the planner to the JSON's figures) (test/test_kernel_report.sh checks
# their calibration table; README's side-by-side is its table's H100 to L40S rows).
#   bash dev/kernel_report.sh [fp16|bf16]
set -u
cd "$(dirname "$0")/.."
p=${1:-fp16}
bin=build/dev/train_gpt2_count_$p
att=build/dev/count_attention_fp16
gen=build/test/gen_data
out=build/dev/kernel_report
db=build/cuda_cpu/nvcc/registers.db
for f in $bin $att $gen $db; do
    [ -e "$f" ] || { echo "kernel_report: $f is missing (make kernel-report builds it)"; exit 1; }
done
# llm.c at the commit its counts were made at: another commit may launch other kernels.
LLMC_COMMIT=f1e2ace651495b74ae22d45d1723443fd00ecd3a
llmc_dir=${LLMC_DIR:-llm.c}
llmc=build/dev/llmc/train_gpt2cu_count
if [ -e "$llmc_dir/train_gpt2.cu" ]; then
    have=$(git -C "$llmc_dir" rev-parse HEAD 2> /dev/null || echo unknown)
    if [ "$have" != "$LLMC_COMMIT" ]; then
        echo "kernel_report: LLMC_DIR ($llmc_dir) is at commit $have, expected llm.c's $LLMC_COMMIT (git -C $llmc_dir checkout $LLMC_COMMIT)"
        exit 1
    fi
    [ -x "$llmc" ] || { echo "kernel_report: $llmc is missing (make kernel-report builds it from LLMC_DIR)"; exit 1; }
else
    llmc=
    echo "kernel_report: no llm.c at LLMC_DIR ($llmc_dir): the report leaves out its calibration rows and the side-by-side." >&2
    echo "  To count it: git clone https://github.com/karpathy/llm.c $llmc_dir && git -C $llmc_dir checkout $LLMC_COMMIT" >&2
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fresh() {  # count file, binary: the file exists and is newer than the binary that made it
    [ -s "$1" ] && [ "$1" -nt "$2" ]
}
run_counted() {  # file binary description command...: one counted run into file, unless fresh
    local f=$1 b=$2 what=$3 start
    shift 3
    fresh "$f" "$b" && return 0
    start=$(date +%s)
    if ! CUDA_CPU_CHECK=0 CUDA_CPU_SCHEDULES=forward CUDA_CPU_STREAM_ORDERS=forward CUDA_CPU_BLAS=skip \
         CUDA_CPU_COUNT="$f.tmp" "$@" > "$work/run.out" 2>&1; then
        echo "kernel_report: the counting run of $what failed:"
        tail -n 5 "$work/run.out"
        rm -f "$f.tmp"
        exit 1
    fi
    mv "$f.tmp" "$f"
    echo "counted $what: $(( $(date +%s) - start )) s" >&2
}
count() {  # model L B suffix flags...: one counted step into $out/<model>_<precision>[suffix]_L<L>_B<B>.count,
           # the suffix naming the variant its flags make (_ge2: -ge 2; _A2: 2 micro-steps) after the
           # device when it is not the runtime's sm_90 (_sm80: CUDA_CPU_SM=80)
    local name=$1 L=$2 B=$3 sfx=$4 dev=()
    shift 4
    case $sfx in _sm80*) dev=(env CUDA_CPU_SM=80) ;; esac
    run_counted "$out/${name}_${p}${sfx}_L${L}_B${B}.count" $bin "$name with $L layer(s) at B=$B, T=1024, $*${dev[*]:+ on sm_80}" \
        ${dev[@]+"${dev[@]}"} $bin -e "$work/$name.L$L.bin" -i "$work/train.bin" -b $B -t 1024 -x 1 -v 0 -s 0 -o "" "$@"
}
count_llmc() {  # model L B suffix flags...: llm.c's step, into $out/llmc_<model>[suffix]_L<L>_B<B>.count. Its
                # BF16 build reads version 5 model files (bf16 weights); -v and -m 0: no validation batch
                # (its -v 0 divides by zero); -s 0: no sampling
    local name=$1 L=$2 B=$3 sfx=$4
    shift 4
    run_counted "$out/llmc_${name}${sfx}_L${L}_B${B}.count" $llmc "llm.c's $name with $L layer(s) at B=$B, T=1024, $*" \
        $llmc -e "$work/$name.L$L.bf16.bin" -i "$work/train.bin" -j "$work/train.bin" -b $B -t 1024 -x 1 -v 1000 -m 0 \
        -s 0 "$@"
}
$gen shard "$work/train.bin" 40000 50257 2 > /dev/null || exit 1
for model in d12:768:12 d48:1600:25; do
    name=${model%%:*}
    rest=${model#*:}
    C=${rest%%:*}
    NH=${rest#*:}
    for L in 1 2; do
        $gen model "$work/$name.L$L.bin" $L "$C" "$NH" 50257 1024 1 > /dev/null || exit 1
        if [ -n "$llmc" ]; then
            # The same model as llm.c's BF16 file (version 5): each fp32 weight's upper 16 bits, a
            # bf16 rounded toward zero (the counts do not depend on the values).
            python3 - "$work/$name.L$L.bin" "$work/$name.L$L.bf16.bin" << 'EOF' || exit 1
import sys
data = open(sys.argv[1], "rb").read()
header = bytearray(data[:1024])
header[4:8] = (5).to_bytes(4, "little")
w = data[1024:]
bf16 = bytearray(len(w) // 2)
bf16[0::2], bf16[1::2] = w[2::4], w[3::4]
open(sys.argv[2], "wb").write(bytes(header) + bytes(bf16))
EOF
        fi
        for B in 1 2; do
            count "$name" $L $B "" -r 0 -ge 0
            count "$name" $L $B _ge2 -r 0 -ge 2
            # 2 micro-steps (-d: tokens a step): with the 1-micro-step runs, what an extra micro-step
            # adds (the first writes the gradients, the others add to them), for 4 micro-steps.
            count "$name" $L $B _A2 -r 0 -ge 0 -d $((2 * B * 1024))
            count "$name" $L $B _ge2_A2 -r 0 -ge 2 -d $((2 * B * 1024))
            # on an sm_80 (the mma.sync flash kernels): what the A100, RTX A6000 and L40S run
            count "$name" $L $B _sm80 -r 0 -ge 0
            count "$name" $L $B _sm80_A2 -r 0 -ge 0 -d $((2 * B * 1024))
            count "$name" $L $B _sm80_ge2 -r 0 -ge 2
            # d48 at -r 1 to 3 at each path's -ge default (2 on sm_90, 0 on sm_80): what each level runs
            # again, for the planner's time (common/time_model.c; the memory ladder's model); -r 3 in
            # segments of one layer, and at 2 layers in one segment too (_r3k2), for what a longer
            # segment saves
            for r in 1 2 3; do
                [ $name = d48 ] || continue
                every=(); [ $r = 3 ] && every=(--recompute-every 1)
                count "$name" $L $B _ge2_r$r -r $r -ge 2 "${every[@]}"
                count "$name" $L $B _sm80_r$r -r $r -ge 0 "${every[@]}"
            done
            if [ $L = 2 ] && [ $name = d48 ]; then
                count "$name" $L $B _ge2_r3k2 -r 3 -ge 2 --recompute-every 2
                count "$name" $L $B _sm80_r3k2 -r 3 -ge 0 --recompute-every 2
            fi
            if [ -n "$llmc" ]; then
                # llm.c at -r 0 and its -ge default (0 at this commit), one GPU (-z 0); at d12, 1 layer,
                # B=1 also 2 micro-steps, against which the report checks what it takes a micro-step past
                # the first to add (its published 1558M step has 8)
                count_llmc "$name" $L $B "" -r 0 -z 0
                [ $name$L$B = d1211 ] && count_llmc "$name" $L $B _A2 -r 0 -z 0 -d 2048
                # its published 1558M run's -ge 1 (GELU's forward in the matmul epilogue)
                [ $name = d48 ] && count_llmc "$name" $L $B _ge1 -r 0 -z 0 -ge 1
            fi
        done
        rm -f "$work/$name.L$L.bin" "$work/$name.L$L.bf16.bin"
    done
done
# FlashAttention-2's benchmark configuration (head size 64, causal, T = 1024 and 2048): every count is
# linear in the number of (batch, head) pairs, so 1 and 2 heads give its 16 x 32.
for T in 1024 2048; do
    for NH in 1 2; do
        run_counted "$out/attention_T${T}_NH${NH}.count" $att "the attention at B=1, T=$T, $NH head(s) of 64" $att 1 $T $NH 64
        # on an sm_80 (the mma.sync kernels), at T = 1024: the A100's comparison
        [ $T = 1024 ] && run_counted "$out/attention_sm80_T${T}_NH${NH}.count" $att \
            "the attention at B=1, T=$T, $NH head(s) of 64 on sm_80" env CUDA_CPU_SM=80 $att 1 $T $NH 64
    done
done
# ptxas's resources of the trainer's kernels in this precision for sm_80 and sm_90a (one nvcc compile,
# a few minutes): the report shows both, and the model takes sm_90a's registers from it (as its sm_90
# entries: the code an H100 runs; compiled for plain sm_90 the wgmma kernels hold a trap and report a
# few registers), so they are this commit's even when the runtime's table (registers.db) is older.
ptx="$out/ptxas_$p.log"
nvcc=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
if [ -x "$nvcc" ]; then
    if ! fresh "$ptx" train_gpt2.cu || [ -n "$(find kernels -newer "$ptx" -name '*.cuh' | head -n 1)" ] ||
            ! grep -q "for 'sm_90a'" "$ptx"; then  # a log of before sm_90a holds the wgmma kernels' traps
        P=$(echo "$p" | tr a-z A-Z)
        if ! "$nvcc" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -std=c++17 \
                -DENABLE_$P -I. -Icommon -Ireference -Ikernels -c train_gpt2.cu -o "$work/train_gpt2.o" > "$ptx.tmp" 2>&1; then
            echo "kernel_report: nvcc could not compile train_gpt2.cu for sm_80 and sm_90a (see $ptx.tmp)"
            exit 1
        fi
        mv "$ptx.tmp" "$ptx"
    fi
    echo "ptxas: train_gpt2.cu for sm_80 and sm_90a: $(grep -c 'Used [0-9]* registers' "$ptx") kernel builds, $(grep -c '[1-9][0-9]* bytes spill' "$ptx") with spills" >&2
else
    echo "kernel_report: no nvcc: registers from the runtime's table (sm_90a) only" >&2
    : > "$ptx"
fi
# llm.c's registers the same way (sm_90; its Makefile's -O3 --use_fast_math), for its kernels' occupancy.
ptx_llmc=
if [ -n "$llmc" ] && [ -x "$nvcc" ]; then
    ptx_llmc="$out/ptxas_llmc.log"
    if ! fresh "$ptx_llmc" "$llmc"; then
        "$nvcc" -arch=sm_90 -Xptxas -v -std=c++17 -O3 --use_fast_math -include dev/llmc_cuda13.h -I"$llmc_dir" \
            -c "$llmc_dir/train_gpt2.cu" -o "$work/llmc.o" > "$ptx_llmc.tmp" 2>&1 ||
            { echo "kernel_report: nvcc could not compile llm.c's train_gpt2.cu for sm_90 (see $ptx_llmc.tmp)"; exit 1; }
        mv "$ptx_llmc.tmp" "$ptx_llmc"
    fi
fi
# The flash kernels' inner loops from their SASS: this tree's (make sass-mix) when made, else the
# committed mix (its header says which commit's kernels it is).
sass=build/dev/sass/train_gpt2_$p.json
[ -e "$sass" ] || sass=docs/sass_mix_$p.json
python3 dev/kernel_report.py --precision "$p" --counts "$out" --registers "$db" --ptxas "$ptx" $ptx_llmc --sass "$sass" --out "$out" \
    --table "$out/time_table_$p.c"
