#!/usr/bin/env bash
# runtime_corpus.sh (make runtime-corpus; make test-long runs it when a checkout is there): others' CUDA
# code, which runs on GPUs and checks its own results, through the CPU runtime with
# CUDA_CPU_ALARMS=report, so every alarm is listed with its count. The runtime's promise is that a
# program passing here is right on a GPU; this is where that is tried on code it was not written for.
#
# llm.c's train_gpt2.cu (checkout at LLMC_DIR, ./llm.c by default, at the commit below; git-ignored),
# FP32, its products computed, a random 2-layer model (C = 64, 4 heads) at V = 8195 (a vocabulary
# whose last 3 entries lie past a multiple of the kernels' vector width), B = 4, T = 64:
#   1. as it is, 10 steps: the alarms must be exactly the defects listed in KNOWN below, no other;
#   2. as it is, 1 step at V = 2051 (below a block of vectors): the watchdog names the loop that does
#      not end;
#   3. with the fixes of dev/corpus/llmc_fixes.pl in a copy (build/dev/corpus/llmc_fixed), the same
#      10 steps and the V = 2051 step: no alarm; and each of the 10 losses within 1e-6 (relative) of
#      llm.c's own train_gpt2.c stepped the same way (dev/corpus/llmc_c_steps.c). Two FP32 engines
#      summing in different orders differ by some ulps per operation (2^-24 = 6e-8 each); 1e-6 is
#      about 17 of them in the loss after 10 steps. (llm.c as it is lands as close here: its races
#      change what a GPU may compute, while the runtime runs the blocks one order at a time.)
# NVIDIA's CUDA samples (checkout at CUDA_SAMPLES_DIR): dev/corpus_samples.sh, when it is there.
# Prints PASS/FAIL lines (the test harness's form) and the tables; writes build/dev/corpus/llmc.md.
# About 8 minutes on 2 quiet cores.
set -u
cd "$(dirname "$0")/.."
out=build/dev/corpus
gen=build/test/gen_data
LLMC_COMMIT=f1e2ace651495b74ae22d45d1723443fd00ecd3a
llmc_dir=${LLMC_DIR:-llm.c}
status=0
fail() { echo "FAIL $1"; status=1; }

# The defects of llm.c's train_gpt2.cu at LLMC_COMMIT, by kernel and source lines (a regular
# expression without "|": the watchdog names whichever line of the loops the thread was on; lines
# 30-49 are prepare_softmax_blockwide3's): what each alarm of
# run 1 and run 2 must be. The fix of each is in dev/corpus/llmc_fixes.pl.
KNOWN=(
    "layernorm_backward_kernel10|llmc/cuda_utils\.cuh:55\)|the last block reads the other blocks' partial sums after an atomicInc with no __threadfence before it (the programming guide's threadFenceReduction needs one): it may read stale sums"
    "softmax_autoregressive_backward_inplace_kernel|llmc/cuda_utils\.cuh:17[0-9]\)|blockReduce called in a loop without its final_sync: the next row's partial sums overwrite shared slots another warp still reads"
    "fused_classifier_kernel5|llmc/fused_classifier\.cuh:12[0-9]\)|the tail loop (elements past the last multiple of the vector width) steps i++, not blockDim.x: threads overlap, and one reads a logit another already overwrote with its gradient"
    "fused_classifier_kernel5|llmc/fused_classifier\.cuh:[34][0-9]\)|prepare_softmax_blockwide3's first loop compares (i+1)*x128::size, a size_t, with V: for V below blockDim.x * x128::size a thread whose i starts below -1 loops until i overflows"
)
verdict_of() {  # an alarm line -> the KNOWN verdict it matches, or nothing
    local line=$1 k kernel src
    for k in "${KNOWN[@]}"; do
        kernel=${k%%|*}
        src=${k#*|}
        src=${src%%|*}
        # a schedule-dependent result names the kernel alone (no source line): its kernel's defect
        if [[ ($line == *"kernel '$kernel'"* && $line =~ $src) || $line == *"schedule-dependent result: kernel '$kernel'"* ]]; then
            echo "${k##*|}"
            return
        fi
    done
}

if [ ! -e "$llmc_dir/train_gpt2.cu" ]; then
    echo "SKIP runtime_corpus llm.c: no checkout at LLMC_DIR ($llmc_dir); to run it:"
    echo "  git clone https://github.com/karpathy/llm.c $llmc_dir && git -C $llmc_dir checkout $LLMC_COMMIT"
else
    have=$(git -C "$llmc_dir" rev-parse HEAD 2> /dev/null || echo unknown)
    if [ "$have" != "$LLMC_COMMIT" ]; then
        echo "FAIL runtime_corpus llm.c: LLMC_DIR ($llmc_dir) is at commit $have, expected $LLMC_COMMIT (its defects are listed for that one)"
        exit 1
    fi
    for b in $out/llmc_fp32 $out/llmc_fixed_fp32 $out/llmc_c_steps $gen; do
        [ -x "$b" ] || { echo "FAIL runtime_corpus: $b is missing (make runtime-corpus builds it)"; exit 1; }
    done
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    $gen model "$work/v8195.bin" 2 64 4 8195 64 1 > /dev/null &&
        $gen shard "$work/t8195.bin" 20000 8195 2 > /dev/null &&
        $gen model "$work/v2051.bin" 1 64 4 2051 64 1 > /dev/null &&
        $gen shard "$work/t2051.bin" 5000 2051 2 > /dev/null || { echo "FAIL runtime_corpus: gen_data"; exit 1; }
    # llm.c's flags: -e model -i/-j train/val tokens, -x steps, -v/-m one validation batch at the ends,
    # -s 0 no sampling, -l constant learning rate (no warmup, final fraction 1), -f 0 no TF32 (the C
    # engine has none), -z 0 one GPU.
    llmc_run() {  # binary V steps log [env...]: llm.c trained at that vocabulary, output into log
        local bin=$1 V=$2 steps=$3 log=$4
        shift 4
        env CUDA_CPU_ALARMS=report "$@" "$bin" -e "$work/v$V.bin" -i "$work/t$V.bin" -j "$work/t$V.bin" -b 4 -t 64 \
            -x "$steps" -v 100 -m 1 -s 0 -l 1e-4 -f 0 -z 0 > "$log" 2>&1
    }
    alarms_of() { grep -E "^cuda_cpu: [0-9]+ x |no barrier, warp operation or exit for" "$1" | sed 's/^.*cuda_cpu: //'; }
    losses_of() { sed -n 's/^step *\([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1"; }

    # 1 and 2: llm.c as it is
    llmc_run $out/llmc_fp32 8195 10 "$work/orig.log"
    orig_rc=$?
    { llmc_run $out/llmc_fp32 2051 1 "$work/orig_small.log" CUDA_CPU_WATCHDOG_S=30; } 2> /dev/null  # (its abort: expected)
    small_rc=$?
    cp "$work/orig.log" "$out/llmc_orig.log"
    cp "$work/orig_small.log" "$out/llmc_orig_small.log"
    [ "$orig_rc" = 0 ] && [ "$(losses_of "$work/orig.log" | wc -l)" = 10 ] &&
        echo "PASS runtime_corpus_llmc_trains_10_steps_in_report_mode" ||
        fail "runtime_corpus_llmc_trains_10_steps_in_report_mode: exit $orig_rc, see $out/llmc_orig.log"
    found=()
    unknown=0
    rows=""
    while IFS= read -r a; do
        v=$(verdict_of "$a")
        if [ -z "$v" ]; then
            unknown=1
            v="NOT A KNOWN DEFECT: a new finding or a false alarm; look at it"
        fi
        found+=("$v")
        # a row: count, class, kernel, source line, verdict
        count=$(echo "$a" | sed -n 's/^\([0-9]*\) x .*/\1/p')
        class=$(echo "$a" | sed -n 's/^[0-9]* x \([^:]*\): .*/\1/p')
        [ -n "$class" ] || class="stopped by the watchdog (ends the run)"
        [ "$class" = "data race" ] && class=$(echo "$a" | grep -o "data race on [a-z]* memory" | head -n 1)
        kernel=$(echo "$a" | sed -n "s/^[^']*kernel '\([^']*\)'.*/\1/p")
        where=$(echo "$a" | grep -o "[A-Za-z0-9_./-]*\.cuh\?:[0-9]*" | head -n 1)
        rows+="| ${count:-1} | $class | \`$kernel\` | ${where:--} | $v |"$'\n'
    done < <(alarms_of "$work/orig.log"; alarms_of "$work/orig_small.log")
    missing=0
    for k in "${KNOWN[@]}"; do
        hit=0
        for f in "${found[@]+"${found[@]}"}"; do [ "$f" = "${k##*|}" ] && hit=1; done
        [ $hit = 1 ] || { missing=1; echo "  not reported: ${k%%|*} at $(echo "$k" | cut -d'|' -f2)"; }
    done
    [ $unknown = 0 ] && [ $missing = 0 ] && [ "$small_rc" != 0 ] &&
        echo "PASS runtime_corpus_llmc_alarms_are_exactly_its_${#KNOWN[@]}_defects" ||
        fail "runtime_corpus_llmc_alarms_are_exactly_its_${#KNOWN[@]}_defects (an unknown alarm: $unknown, a defect not reported: $missing; the V = 2051 run's exit $small_rc)"

    # 3: the fixed copy, and train_gpt2.c
    llmc_run $out/llmc_fixed_fp32 8195 10 "$work/fixed.log"
    fixed_rc=$?
    llmc_run $out/llmc_fixed_fp32 2051 1 "$work/fixed_small.log" CUDA_CPU_WATCHDOG_S=30
    fixed_small_rc=$?
    cp "$work/fixed.log" "$out/llmc_fixed.log"
    n_fixed=$( (alarms_of "$work/fixed.log"; alarms_of "$work/fixed_small.log") | wc -l)
    [ "$fixed_rc" = 0 ] && [ "$fixed_small_rc" = 0 ] && [ "$n_fixed" = 0 ] &&
        echo "PASS runtime_corpus_llmc_fixed_no_alarm" ||
        fail "runtime_corpus_llmc_fixed_no_alarm: exits $fixed_rc and $fixed_small_rc, $n_fixed alarms (see $out/llmc_fixed.log)"
    $out/llmc_c_steps "$work/v8195.bin" "$work/t8195.bin" 4 64 10 1e-4 > "$work/c.log" 2>&1 ||
        fail "runtime_corpus_llmc_c_steps: $(tail -n 1 "$work/c.log")"
    sed -n 's/^step \([0-9]*\) loss \([0-9.]*\) .*/\1 \2/p' "$work/c.log" > "$work/c.losses"
    losses_of "$work/fixed.log" > "$work/fixed.losses"
    losses_of "$work/orig.log" > "$work/orig.losses"
    cmp=$(python3 - "$work/c.losses" "$work/fixed.losses" "$work/orig.losses" << 'EOF'
import sys
c, fixed, orig = ([float(l.split()[1]) for l in open(p)] for p in sys.argv[1:])
if len(c) != 10 or len(fixed) != 10 or len(orig) != 10:
    print("missing steps: %d, %d and %d losses" % (len(c), len(fixed), len(orig)))
    sys.exit(0)
rel = lambda a, b: abs(a - b) / abs(b)
print("%.2e %.2e" % (max(rel(f, x) for f, x in zip(fixed, c)), max(rel(o, x) for o, x in zip(orig, c))))
for i in range(10):
    print("| %d | %.6f | %.6f | %.6f | %.1e | %.1e |" % (i + 1, c[i], fixed[i], orig[i], rel(fixed[i], c[i]), rel(orig[i], c[i])))
EOF
)
    worst=$(echo "$cmp" | head -n 1)
    worst_fixed=${worst%% *}
    if python3 -c "import sys; sys.exit(0 if float('$worst_fixed') <= 1e-6 else 1)" 2> /dev/null; then
        echo "PASS runtime_corpus_llmc_fixed_losses_within_1e-6_of_train_gpt2_c (worst $worst_fixed; llm.c as it is: ${worst#* })"
    else
        fail "runtime_corpus_llmc_fixed_losses_within_1e-6_of_train_gpt2_c: $worst"
    fi
    {
        echo "# llm.c's train_gpt2.cu through the CPU runtime (dev/runtime_corpus.sh)"
        echo
        echo "llm.c $LLMC_COMMIT, FP32, a random 2-layer model (C = 64, 4 heads), V = 8195, B = 4, T = 64, 10 steps; and 1 step at V = 2051."
        echo
        echo "| count | alarm | kernel | where (its first) | verdict |"
        echo "| ---: | --- | --- | --- | --- |"
        printf '%s' "$rows"
        echo
        echo "With the fixes of dev/corpus/llmc_fixes.pl: $n_fixed alarms. The losses (train_gpt2.c stepped the same way by dev/corpus/llmc_c_steps.c):"
        echo
        echo "| step | train_gpt2.c | train_gpt2.cu fixed | train_gpt2.cu as it is | fixed, relative difference | as it is |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
        echo "$cmp" | tail -n +2
    } > "$out/llmc.md"
    cat "$out/llmc.md"
fi

# NVIDIA's samples: each one the runtime supports builds, passes its own check and raises no alarm
# but the ones its NOTE explains; each it does not support says what the runtime lacks.
samples_dir=${CUDA_SAMPLES_DIR:-cuda-samples}
n_samples=0 n_clean=0 n_noted=0 n_lacks=0
if [ ! -d "$samples_dir/Samples" ]; then
    echo "SKIP runtime_corpus samples: no checkout at CUDA_SAMPLES_DIR ($samples_dir) (dev/corpus_samples.sh says how to get it)"
else
    rm -f $out/samples.md
    bash dev/corpus_samples.sh || fail "runtime_corpus_samples: dev/corpus_samples.sh failed"
    if [ -s $out/samples.md ]; then
        read -r n_samples n_clean n_noted n_lacks n_bad < <(awk -F' [|] ' '/^[|] [A-Za-z]/ && !/^[|] sample /{
            n++; v = $5
            if ($2 == "yes" && v ~ /^passes, no alarms/) c++
            else if ($2 == "yes" && v ~ /^passes, with alarms: /) d++
            else if ($2 == "no" && v ~ /^runtime lacks /) l++
            else b++
        } END { printf "%d %d %d %d %d\n", n, c, d, l, b }' $out/samples.md)
        [ "$n_bad" = 0 ] && [ "$n_samples" -gt 0 ] &&
            echo "PASS runtime_corpus_samples ($n_samples samples: $n_clean pass with no alarm, $n_noted with alarms their notes explain, $n_lacks need what the runtime lacks)" ||
            fail "runtime_corpus_samples: $n_bad of $n_samples samples fail, raise an unexplained alarm or do not build (see $out/samples.md)"
    fi
fi

# --write: the tables as docs/runtime_corpus.md and the counts as docs/runtime_corpus.json, which
# docs/runtime.md quotes (scripts/doc_figures.py checks the quotes against the JSON).
if [ "${1:-}" = --write ]; then
    if [ $status != 0 ] || [ ! -s $out/llmc.md ] || [ ! -s $out/samples.md ]; then
        echo "runtime_corpus: --write needs both checkouts and every check passed"
        exit 1
    fi
    {
        echo "<!-- Written by dev/runtime_corpus.sh --write; do not edit. -->"
        echo "# Others' CUDA code through the CPU runtime"
        echo
        echo "What [dev/runtime_corpus.sh](../dev/runtime_corpus.sh) printed; [runtime.md](runtime.md) says what it is for."
        echo
        sed 's/^# /## /' $out/llmc.md
        echo
        echo "## NVIDIA's CUDA samples"
        sed 1,2d $out/samples.md
    } > docs/runtime_corpus.md.tmp && mv docs/runtime_corpus.md.tmp docs/runtime_corpus.md
    python3 - "$out/llmc.md" "$n_samples" "$n_clean" "$n_noted" "$n_lacks" "$LLMC_COMMIT" "$n_fixed" << 'EOF' > docs/runtime_corpus.json.tmp || { rm -f docs/runtime_corpus.json.tmp; exit 1; }
import json, sys
md = [l.split(" | ") for l in open(sys.argv[1]).read().splitlines() if l.startswith("| ")]
num = lambda c: c[0][2:].strip().isdigit()
alarms = [c for c in md if num(c) and len(c) == 5]
steps = [c for c in md if num(c) and len(c) == 6]
print(json.dumps({"llmc_commit": sys.argv[6], "llmc_distinct_alarms": len(alarms),
                  "llmc_defects": len(set(c[4] for c in alarms)), "llmc_fixed_alarms": int(sys.argv[7]),
                  "llmc_steps": len(steps), "llmc_worst_rel_loss": max(float(c[4]) for c in steps),
                  "samples": int(sys.argv[2]), "samples_clean": int(sys.argv[3]),
                  "samples_noted": int(sys.argv[4]), "samples_unsupported": int(sys.argv[5])}, indent=1))
EOF
    mv docs/runtime_corpus.json.tmp docs/runtime_corpus.json
    echo "runtime_corpus: wrote docs/runtime_corpus.md and docs/runtime_corpus.json"
fi
exit $status
