#!/usr/bin/env bash
# corpus_samples.sh: NVIDIA's CUDA samples (reductions, scans, threadFenceReduction, transposes,
# matrix products, warp-aggregated atomics, sorts...) built through the CPU runtime (test/cuda_cpu) as
# checked programs and run with CUDA_CPU_ALARMS=report. They are CUDA code written by others, with
# their own checks, so they test the runtime from the outside: a sample that passes on a GPU must
# build and pass here, and every alarm it raises is a bug in the sample, a result that depends on the
# thread order by design (NOTE below), or a false alarm of the runtime's checks. One table row per
# sample: built, its own check, the alarms, a verdict; also written as markdown to
# build/dev/corpus/samples.md (dev/runtime_corpus.sh judges it).
#
# usage: dev/corpus_samples.sh [NAME...]   (default: every sample below; with names, the table and
# samples.md hold only those)
# CUDA_SAMPLES_DIR: a checkout of https://github.com/NVIDIA/cuda-samples at SAMPLES_COMMIT
# (default ./cuda-samples; git-ignored, never committed: the samples are NVIDIA's, not ours).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
SAMPLES_COMMIT=c94ff366aed18c797b8a85dfaac7817b0228b420
DIR=${CUDA_SAMPLES_DIR:-./cuda-samples}
if [ ! -d "$DIR/Samples" ]; then
    echo "corpus_samples: no CUDA samples at $DIR; get them with: git clone https://github.com/NVIDIA/cuda-samples $DIR && git -C $DIR checkout $SAMPLES_COMMIT"
    exit 0
fi
DIR=$(cd "$DIR" && pwd)
# The sizes, flags and verdicts below are for one commit; another would need them checked again.
have=$(git -C "$DIR" rev-parse --verify -q HEAD 2>/dev/null)
if [ "$have" != "$SAMPLES_COMMIT" ]; then
    echo "corpus_samples: $DIR is at commit ${have:-?}, not $SAMPLES_COMMIT: git -C $DIR checkout $SAMPLES_COMMIT"
    exit 1
fi
OUT=build/dev/corpus
mkdir -p "$OUT"
# The runtime's compile line, link line and link inputs, as make gives them to others' code (make
# cuda-cpu-flags: a checked program, every load, store and atomic through the race detector); the
# first link input is the runtime's library, which make builds.
{ read -r COMPILE; read -r LINK; read -r LINK_INPUTS; } < <(make -s --no-print-directory cuda-cpu-flags)
if [ -z "${COMPILE:-}" ] || [ -z "${LINK_INPUTS:-}" ]; then echo "corpus_samples: make did not give the runtime's flags (no CUDA headers?)"; exit 1; fi
LIB=${LINK_INPUTS%% *}
nice make -s "${LIB#"$ROOT"/}" || exit 1

# name | directory under Samples | sources (as its CMakeLists.txt builds it) | arguments | edits of
# the rewritten copy | what the runtime lacks for it. Every run is a checked program under two
# schedules, thousands of times slower than a GPU, so each should take seconds: arguments make the
# sizes small where the sample takes them; where its sizes are constants, a sed script edits them in
# the rewritten copy (build/ only; the checkout is never touched; each edit keeps the line count, so
# #line still points at the original). A sample the runtime cannot run yet is still built: if the
# build fails the last field is its verdict, and if the runtime has grown the feature, it runs.
SAMPLES="
vectorAdd|0_Introduction/vectorAdd|vectorAdd.cu|||
matrixMul|0_Introduction/matrixMul|matrixMul.cu|-wA=64 -hA=64 -wB=64 -hB=64|s/int nIter = 300;/int nIter = 3;/|
simpleAtomicIntrinsics|0_Introduction/simpleAtomicIntrinsics|simpleAtomicIntrinsics.cu simpleAtomicIntrinsics_cpu.cpp|||
simpleVoteIntrinsics|0_Introduction/simpleVoteIntrinsics|simpleVoteIntrinsics.cu|||
mergeSort|0_Introduction/mergeSort|mergeSort.cu main.cpp mergeSort_host.cpp mergeSort_validate.cpp||s/N         = 4 \* 1048576;/N         = 16384;/|
reduction|2_Concepts_and_Techniques/reduction|reduction.cpp reduction_kernel.cu|-n=65536||cooperative groups: cg::block_tile_memory and tiles wider than a warp (multi_warp_cg_reduce)
threadFenceReduction|2_Concepts_and_Techniques/threadFenceReduction|threadFenceReduction.cu|-n=65536||
scan|2_Concepts_and_Techniques/scan|main.cpp scan_gold.cpp scan.cu||s/N      = 13 \* 1048576 \/ 2;/N      = 262144;/; s/iCycles = 100;/iCycles = 1;/|
shfl_scan|2_Concepts_and_Techniques/shfl_scan|shfl_scan.cu|||
histogram|2_Concepts_and_Techniques/histogram|histogram256.cu histogram64.cu histogram_gold.cpp main.cpp||s/byteCount    = 64 \* 1048576;/byteCount    = 1048576;/|
sortingNetworks|2_Concepts_and_Techniques/sortingNetworks|main.cpp bitonicSort.cu sortingNetworks_validate.cpp||s/N             = 1048576;/N             = 4096;/|
reductionMultiBlockCG|2_Concepts_and_Techniques/reductionMultiBlockCG|reductionMultiBlockCG.cu|-n=65536||cudaLaunchCooperativeKernel and cg::grid_group (grid.sync)
scalarProd|2_Concepts_and_Techniques/scalarProd|scalarProd_cpu.cpp scalarProd.cu|||
warpAggregatedAtomicsCG|3_CUDA_Features/warpAggregatedAtomicsCG|warpAggregatedAtomicsCG.cu|||cooperative groups: cg::coalesced_threads and cg::grid_group
fastWalshTransform|5_Domain_Specific/fastWalshTransform|fastWalshTransform.cu fastWalshTransform_gold.cpp||s/log2Data   = 23;/log2Data   = 16;/|
BlackScholes|5_Domain_Specific/BlackScholes|BlackScholes.cu BlackScholes_gold.cpp||s/OPT_N          = 4000000;/OPT_N          = 4096;/; s/NUM_ITERATIONS = 512;/NUM_ITERATIONS = 2;/|
binomialOptions|5_Domain_Specific/binomialOptions|binomialOptions.cpp binomialOptions_gold.cpp binomialOptions_kernel.cu||s/#define MAX_OPTIONS 1024/#define MAX_OPTIONS 16/|
transpose|6_Performance/transpose|transpose.cu|-dimX=256 -dimY=256|s/#define NUM_REPS 100/#define NUM_REPS 2/|
simpleTemplates|0_Introduction/simpleTemplates|simpleTemplates.cu|||
clock|0_Introduction/clock|clock.cu|||
asyncAPI|0_Introduction/asyncAPI|asyncAPI.cu||s/int n      = 16 \* 1024 \* 1024;/int n      = 1024 * 1024;/|
simpleStreams|0_Introduction/simpleStreams|simpleStreams.cu|||cudaHostRegister and cudaHostUnregister (pinning malloc'd memory), cudaSetDeviceFlags
convolutionSeparable|2_Concepts_and_Techniques/convolutionSeparable|convolutionSeparable.cu convolutionSeparable_gold.cpp main.cpp||s/imageW     = 3072;/imageW     = 256;/; s/imageH     = 3072;/imageH     = 256;/; s/iterations = 16;/iterations = 1;/|
alignedTypes|6_Performance/alignedTypes|alignedTypes.cu||s/MEM_SIZE       = 50000000;/MEM_SIZE       = 1000000;/; s/NUM_ITERATIONS = 32;/NUM_ITERATIONS = 1;/|
"

# What the alarms a sample raises were found to be, after reading its code (kept with the verdict,
# so the table says whether an alarm is news).
# (clock's readings and simpleAtomicIntrinsics' atomicExch target, once reported as
# schedule-dependent, were false alarms the runtime no longer raises.)
declare -A NOTE=(
    [shfl_scan]="a real defect, harmless here: in shfl_intimage_rows warp 0 reads all 32 slots of sums[] (line 132) where only one a warp of the block was written; the unwritten values reach only lanes whose sums are never used"
)

# One sample: rewrite each source from inside the checkout (so cu2cpu.pl rewrites the sample's
# headers and Common/'s too), apply its edits, compile it checked, link.
build() {
    local name=$1 sdir=$2 srcs=$3 edits=$4 gen gens=() objs=() src f e
    local log=$OUT/$name.build.log
    : > "$log"
    for src in $srcs; do
        gen=$ROOT/$OUT/gen/$name/${src%.*}.gen
        gens+=("$gen")
        mkdir -p "$gen"
        (cd "$DIR" && perl "$ROOT/test/cuda_cpu/cu2cpu.pl" -o "$gen" --prune --compile-dir "$ROOT" \
            -I Common -I "Samples/$sdir" "Samples/$sdir/$src") >> "$log" 2>&1 || return 1
    done
    # Each edit (separated by "; ") must change something: one that no longer matches would
    # silently run the sample at its full size.
    if [ -n "$edits" ]; then
        while read -r e; do
            if [ -z "$(find "${gens[@]/%//Samples}" -type f -exec sed -n "${e}p" {} +)" ]; then
                echo "corpus_samples: the edit '$e' matches nothing" >> "$log"
                return 1
            fi
        done <<< "${edits//; /$'\n'}"
        find "${gens[@]/%//Samples}" -type f -exec sed -i "$edits" {} +
    fi
    for src in $srcs; do
        gen=$ROOT/$OUT/gen/$name/${src%.*}.gen
        # -w: the samples' own warnings are not this check's business. The shim only for .cu files:
        # the host .cpp files are compiled by a host compiler in the samples' own build.
        nice $COMPILE -w $([[ $src == *.cu ]] && echo -include dev/corpus/samples_shim.h) \
            -I"$gen/Common" -I"$gen/Samples/$sdir" -I"$DIR/Common" -I"$DIR/Samples/$sdir" \
            -c "$gen/Samples/$sdir/$src" -o "$gen.o" >> "$log" 2>&1 || return 1
        objs+=("$gen.o")
    done
    nice $LINK "${objs[@]}" $LINK_INPUTS -o "$OUT/$name" >> "$log" 2>&1
}

# Markdown-safe: no pipes, one line.
cell() { tr '\n\t|' '  /' | sed 's/  */ /g; s/^ //; s/ $//'; }

only=" $* "
for n in "$@"; do
    grep -q "^$n|" <<< "$SAMPLES" || { echo "corpus_samples: no sample '$n' in the list"; exit 1; }
done
MD=$OUT/samples.md
{
    echo "# CUDA samples through the CPU runtime"
    echo
    echo "cuda-samples $SAMPLES_COMMIT, built checked by dev/corpus_samples.sh, run with CUDA_CPU_ALARMS=report."
    echo
    echo "| sample | built | its own check | alarms | verdict |"
    echo "| --- | --- | --- | --- | --- |"
} > "$MD"
printf '%-24s | %-5s | %-40s | %-50s | %s\n' sample built "its own check" alarms verdict
while IFS='|' read -r name sdir srcs args edits lacks; do
    [ -z "$name" ] && continue
    [ -n "${*:-}" ] && [[ $only != *" $name "* ]] && continue
    built=no check=- alarms=- verdict=
    if ! build "$name" "$sdir" "$srcs" "$edits"; then
        if [ -n "$lacks" ]; then verdict="runtime lacks $lacks"
        else verdict="build failed: $(grep -m1 -E 'error|cannot|^corpus_samples' "$OUT/$name.build.log" | cell)"
        fi
    else
        built=yes
        log=$OUT/$name.run.log
        start=$(date +%s)
        # The sample's own directory: some read data files relative to it.
        # (braces: bash's own "Aborted" line for a program the runtime stopped stays out of the table)
        { (cd "$DIR/Samples/$sdir" && CUDA_CPU_ALARMS=report nice timeout 300 "$ROOT/$OUT/$name" $args) > "$log" 2>&1; } 2>/dev/null
        rc=$?
        secs=$(( $(date +%s) - start ))
        own=$(grep -aiE '(^|[^a-z])(pass(ed)?|fail(ed|ure|s)?|ok|match(es)?)([^a-z]|$)' "$log" | grep -av '^cuda_cpu' | tail -1 | cell)
        check="exit $rc, ${own:-no PASS/FAIL line}"
        total=$(grep -aoE '^cuda_cpu: [0-9]+ alarms' "$log" | grep -oE '[0-9]+' | head -1)
        # One entry per distinct alarm (the runtime's summary has one line each): its class, kernel
        # and the source line it names first, with its count.
        kinds=$(perl -ne 'next unless /^cuda_cpu: (\d+) x ([^:]+): (.*)/; my ($n, $c, $m) = ($1, $2, $3);
            my $k = $m =~ /kernel \x27([^\x27]+)\x27/ ? " in $1" : "";
            my $at = $m =~ /\(([^\s()]+:\d+)\)/ ? " at " . (split m{/}, $1)[-1] : "";
            print "$c$k$at (x$n)\n"' "$log" | paste -sd ';' | cell)
        alarms="${total:-0}${kinds:+: $kinds}"
        fatal=$(grep -aE '^cuda_cpu' "$log" | grep -avE '^cuda_cpu: [0-9]+ (alarms|x )' | head -1 | cell)
        if [ $rc -eq 124 ]; then verdict="timed out (300 s)"
        elif [ -n "$fatal" ] && [ $rc -ne 0 ]; then verdict="runtime stopped it: $fatal"
        elif [ $rc -ne 0 ]; then verdict="its check failed"
        elif [ -n "$total" ]; then verdict="passes, with alarms${NOTE[$name]:+: ${NOTE[$name]}}"
        else verdict="passes, no alarms"
        fi
        verdict="$verdict (${secs} s${edits:+; copy edited: $(printf '%s' "$edits" | cell)})"
    fi
    printf '%-24s | %-5s | %-40s | %-50s | %s\n' "$name" "$built" "$check" "$alarms" "$verdict"
    echo "| $name | $built | $check | $alarms | $verdict |" >> "$MD"
done <<< "$SAMPLES"
echo "corpus_samples: table in $MD"
