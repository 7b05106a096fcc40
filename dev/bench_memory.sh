#!/usr/bin/env bash
# bench_memory.sh: what each memory technique saves and costs per step, for one model and batch
# (the project's reference figures): activation recompute -r 0..3 (activation bytes from the start-up report,
# bytes saved and ms/step overhead against -r 0), gradient accumulation (the same global batch in two
# micro-steps of half the batch: activation bytes saved, time cost), and ZeRO -z 0/1/2 over ranks
# under mpirun (model-state bytes per rank from the start-up memory report, and the communication
# volume per step: counted by the CPU runtime's NCCL (NCCL_CPU_TRAFFIC, test/cuda_cpu/nccl_cpu.cpp)
# beside the closed form of the ZeRO paper). Times from the CPU runtime (the default trainer) are CPU
# figures: what the emulation costs, nothing about GPU speed. Tests check behaviour only
# (test/test_comm_volume.sh checks the counted volumes); this prints figures.
# Each timed configuration runs -n times, the runs of a table interleaved (so a machine growing busier
# slows each alike); ms/step is the median of their means, the spread (max - min) / median, and a
# difference no larger than the two configurations' spreads together is marked "*": not measured,
# noise (two steps on a busy machine once showed recompute 61% "faster" than none).
#
#   bash dev/bench_memory.sh                          d2, B=4, T=64, 6 steps, 3 runs each, on the CPU runtime (fp16)
#   bash dev/bench_memory.sh --trainer ./train_gpt2 -e d12 -b 8 -t 1024 --no-zero    on a GPU
#   options: -e MODEL  -b B (per rank)  -t T  -x STEPS  -n RUNS  --trainer PATH  --ranks "2 3"  --no-zero
#            --no-recompute  --no-accum  -- ARGS...  (passed to every run, e.g. -- -i train.bin)
set -u
cd "$(dirname "$0")/.." || exit 1
model=d2 B=4 T=64 steps=6 runs=3 trainer=build/emu/train_gpt2_emu_fp16 ranks_list="2"
do_recompute=1 do_accum=1 do_zero=1
extra=()
while [ $# -gt 0 ]; do
    case $1 in
        -e) model=$2; shift 2 ;;
        -b) B=$2; shift 2 ;;
        -t) T=$2; shift 2 ;;
        -x) steps=$2; shift 2 ;;
        -n) runs=$2; shift 2 ;;
        --trainer) trainer=$2; shift 2 ;;
        --ranks) ranks_list=$2; shift 2 ;;
        --no-zero) do_zero=0; shift ;;
        --no-recompute) do_recompute=0; shift ;;
        --no-accum) do_accum=0; shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "bench_memory: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ "$steps" -ge 2 ] || { echo "bench_memory: -x must be at least 2 (ms/step is the mean after the first step)" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench_memory: -n must be a positive number of runs, got '$runs'" >&2; exit 2; }
[ -x "$trainer" ] || { echo "bench_memory: $trainer is not built (make emu, or make train on a GPU machine)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
emu=0
case $trainer in *emu*) emu=1 ;; esac

# ---- parsing the trainer's start-up report and its last line ----------------------------------
ms_of() { grep '^done:' "$1" | sed 's/.*mean \([0-9.]*\) ms\/step.*/\1/'; }
# mem FILE WHAT: bytes of the engine's device memory from the start-up report, WHAT one of
#   activations | states (parameters, gradients and their shards, buckets and accumulators, master
#   weights, AdamW m and v: the model states) | total | names (the model states' item names)
# from the exact table "memory by component (bytes)" when the trainer prints one (its allocated
# column), else from the "memory:" line (0.1 MiB resolution).
mem() {
    awk -v want="$2" '
        function add(name, bytes,   base) {
            base = name; sub(/ \(.*\)$/, "", base)
            total += bytes
            if (base == "activations") acts += bytes
            if (base ~ /^(parameters|gradient|master weights|AdamW)/) { states += bytes; names = names (names ? ", " : "") name }
        }
        /^memory by component \(bytes\)/ { table = 1; exact = 1; total = acts = states = 0; names = ""; next }
        table && /^  / { i = index($0, " device "); if (i == 0) next
                         name = substr($0, 3, i - 3); sub(/ +$/, "", name)
                         split(substr($0, i + 8), col, "|"); add(name, col[2] + 0); next }
        table { table = 0 }
        /^memory: / && !exact { line = substr($0, 9); n = split(line, item, / [|] /)
            for (k = 1; k <= n; k++) if (match(item[k], / [0-9.]+ MiB/) && item[k] !~ /^total /)
                add(substr(item[k], 1, RSTART - 1), substr(item[k], RSTART + 1, RLENGTH - 5) * 1048576) }
        END { if (want == "names") print names
              else printf "%.0f\n", want == "activations" ? acts : want == "states" ? states : total }' "$1"
}
exact_bytes() { grep -q '^memory by component (bytes)' "$1"; }
run() {  # output file, arguments...: one trainer run; stops the bench when it fails
    local out=$1
    shift
    "$@" > "$out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] || ! grep -q '^done:' "$out"; then
        echo "bench_memory: failed (exit $rc): $*" >&2
        tail -n 5 "$out" >&2
        exit 1
    fi
    grep -q '^engine: GPU engine' "$out" || { echo "bench_memory: $(grep -m1 '^engine' "$out"): not the GPU engine" >&2; exit 1; }
}
# The runs of one configuration: FILE.1 .. FILE.n, run in turns with the other configurations of its
# table; the median and the spread of their ms/step.
runs_ms() { local f=$1 k; for k in $(seq 1 "$runs"); do ms_of "$f.$k"; done; }
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.1f\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
ms_med() { runs_ms "$1" | median; }
spread() { runs_ms "$1" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)
    printf "%.1f%%", (m > 0 ? 100 * (v[NR] - v[1]) / m : 0) }'; }
# versus A B: B's median against A's, "*" when the difference is within their spreads together
versus() {
    local a b
    a=$(ms_med "$1") b=$(ms_med "$2")
    awk -v a="$a" -v b="$b" -v sa="$(spread "$1")" -v sb="$(spread "$2")" -v n="$runs" 'BEGIN {
        if (a <= 0) { print "-"; exit }
        d = 100 * (b - a) / a; s = sa + sb
        printf "%+.1f%%%s", d, (n > 1 && (d < 0 ? -d : d) <= s) ? "*" : (n == 1 ? "?" : "") }'
}
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
saved() { awk -v a="$1" -v b="$2" 'BEGIN { d = b - a; printf "%.0f B (%.1f%%)", d, (b > 0 ? 100 * d / b : 0) }'; }

common=(-e "$model" -t "$T" -x "$steps" -v 0 -s 0 -o "" "${extra[@]}")
run "$work/r0.out" "$trainer" "${common[@]}" -b "$B" -r 0  # the model's facts (and a warm-up: not timed)
precision=$(grep -m1 '^engine:' "$work/r0.out" | sed 's/^engine: GPU engine (\([a-z0-9]*\).*/\1/')
X=$([ "$precision" = fp32 ] && echo 4 || echo 2)
# Ψ, the parameter count with the padded vocabulary, from the model line (L, C, maxT, V, padded V).
read -r L C maxT Vp < <(grep -m1 '^model:' "$work/r0.out" | awk '{
    for (i = 1; i <= NF; i++) { if ($i ~ /^L=/) L = substr($i, 3); if ($i ~ /^C=/) C = substr($i, 3)
        if ($i ~ /^maxT=/) mt = substr($i, 6); if ($i ~ /^V=/) V = substr($i, 3); if ($i == "(padded") { Vp = $(i + 1); sub(/\)/, "", Vp) } }
    if (Vp == "") Vp = V; print L, C, mt, Vp }')
psi=$(( Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C ))
tokens=$(( B * T ))

echo "bench_memory: $model (L=$L C=$C, Ψ = $psi parameters with the padded vocabulary), B=$B T=$T per rank, $precision (X = $X bytes), $steps steps"
echo "trainer: $trainer; ms/step = the median over $runs runs (in turns) of the trainer's mean after the first step, spread"
echo "= (max - min) / median; a difference marked * is no larger than the two spreads together (noise, not a measured"
echo "cost; ? with one run: no spread measured); bytes from its start-up report$(exact_bytes "$work/r0.out" \
    && echo ' (exact)' || echo ' (its memory line: 0.1 MiB resolution)')"
if [ $emu = 1 ]; then
    echo "CPU RUNTIME: every time below is a CPU figure (the emulation on $(nproc) cores), not GPU speed; bytes are the GPU engine's."
fi

# ---- activation recompute -------------------------------------------------------------------------
if [ $do_recompute = 1 ]; then
    echo
    echo "Activation recompute (-r), one rank, $runs runs each"
    for k in $(seq 1 "$runs"); do
        for r in 0 1 2 3; do run "$work/r$r.out.$k" "$trainer" "${common[@]}" -b "$B" -r $r; done
    done
    printf "  %-6s %14s %22s %14s %10s %8s %10s\n" "level" "activations" "saved vs -r 0" "engine total" "ms/step" "spread" "vs -r 0"
    a0=$(mem "$work/r0.out.1" activations)
    for r in 0 1 2 3; do
        a=$(mem "$work/r$r.out.1" activations)
        printf "  %-6s %14s %22s %14s %10s %8s %10s\n" "-r $r" "$(mib "$a")" "$([ $r -eq 0 ] && echo - || saved "$a" "$a0")" \
            "$(mib "$(mem "$work/r$r.out.1" total)")" "$(ms_med "$work/r$r.out")" "$(spread "$work/r$r.out")" \
            "$([ $r -eq 0 ] && echo - || versus "$work/r0.out" "$work/r$r.out")"
    done
    echo "  $(grep -m1 '^recompute:' "$work/r0.out" | sed 's/.*(level 3/level 3/; s/)$//')"
fi

# ---- gradient accumulation --------------------------------------------------------------------------
if [ $do_accum = 1 ]; then
    echo
    echo "Gradient accumulation (-d $tokens: the same $tokens tokens per optimizer step), one rank, -r 0"
    if [ $((B % 2)) -ne 0 ]; then
        echo "  skipped: B=$B does not halve"
    else
        for k in $(seq 1 "$runs"); do
            run "$work/one.out.$k" "$trainer" "${common[@]}" -b "$B" -r 0
            run "$work/acc.out.$k" "$trainer" "${common[@]}" -b $((B / 2)) -r 0 -d $tokens
        done
        grep -q "= 2 micro-steps" "$work/acc.out.1" || { echo "bench_memory: -b $((B / 2)) -d $tokens did not run 2 micro-steps" >&2; exit 1; }
        printf "  %-22s %14s %22s %14s %10s %8s %10s\n" "run" "activations" "saved" "engine total" "ms/step" "spread" "time cost"
        a0=$(mem "$work/one.out.1" activations)
        printf "  %-22s %14s %22s %14s %10s %8s %10s\n" "B=$B x 1 micro-step" "$(mib "$a0")" "-" "$(mib "$(mem "$work/one.out.1" total)")" \
            "$(ms_med "$work/one.out")" "$(spread "$work/one.out")" "-"
        a=$(mem "$work/acc.out.1" activations)
        printf "  %-22s %14s %22s %14s %10s %8s %10s\n" "B=$((B / 2)) x 2 micro-steps" "$(mib "$a")" "$(saved "$a" "$a0")" \
            "$(mib "$(mem "$work/acc.out.1" total)")" "$(ms_med "$work/acc.out")" "$(spread "$work/acc.out")" "$(versus "$work/one.out" "$work/acc.out")"
    fi
fi

# ---- ZeRO over ranks --------------------------------------------------------------------------------
if [ $do_zero = 1 ]; then
    echo
    if ! command -v mpirun > /dev/null 2>&1; then
        echo "ZeRO: skipped (no mpirun)"
        exit 0
    fi
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    # On the CPU runtime one worker thread a rank, and the one-rank reference likewise, so the time
    # difference is the ranks' collectives and contention rather than a change of thread count.
    [ $emu = 1 ] && export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
    # the runs in turns: one rank, then every (R, stage); the counted traffic from the first turn
    for k in $(seq 1 "$runs"); do
        run "$work/z_one.out.$k" "$trainer" "${common[@]}" -b "$B" -r 0
        for R in $ranks_list; do
            for z in 0 1 2; do
                tf="$work/traffic_${R}_$z.txt"
                [ "$k" = 1 ] && rm -f "$tf" || tf=/dev/null
                NCCL_CPU_TRAFFIC="$tf" run "$work/z${R}_$z.out.$k" mpirun --oversubscribe -np "$R" "$trainer" "${common[@]}" -b "$B" -r 0 -z $z
            done
        done
    done
    ms1=$(ms_med "$work/z_one.out")
    K=$([ $X -eq 4 ] && echo 8 || echo 12)  # optimizer bytes a parameter: m, v (and an fp32 master copy in fp16/bf16)
    echo "ZeRO (-z) under mpirun, B=$B per rank, -r 0. Model states per rank from the start-up report; the ZeRO paper's"
    echo "form: ${X}Ψ parameters + ${X}Ψ gradients (/R at -z 2) + ${K}Ψ optimizer state (/R at -z 1, 2)."
    echo "Traffic per optimizer step: the bytes a rank sends under NCCL's ring algorithm (mean over ranks), counted by"
    echo "the CPU runtime's NCCL, beside the closed form: -z 0 all-reduce of Ψ, 2(R-1)/R·Ψ·X; -z 1 reduce-scatter +"
    echo "all-gather of P = Ψ padded to a multiple of R, 2(R-1)/R·P·X; -z 2 reduces of Ψ to the owners + all-gather"
    echo "of P, (R-1)/R·(Ψ+P)·X: the same volume (the paper's 2Ψ) when R divides Ψ."
    echo "1 rank (no collectives): $ms1 ms/step, spread $(spread "$work/z_one.out") over $runs runs$([ $emu = 1 ] && echo ' (CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1, as each rank below)')"
    for R in $ranks_list; do
        S=$(( (psi + R - 1) / R ))
        P=$(( S * R ))
        printf "  %-6s %13s %20s %12s %9s %7s %9s %14s %14s %7s\n" "R=$R" "model states" "saved vs -z 0" "paper form" "ms/step" \
            "spread" "vs 1 rank" "ring B/step" "closed form" "extra"
        zs0=""
        for z in 0 1 2; do
            tf="$work/traffic_${R}_$z.txt"
            zs=$(mem "$work/z${R}_$z.out.1" states)
            [ $z -eq 0 ] && zs0=$zs
            paper=$(awk -v p="$psi" -v X="$X" -v K="$K" -v R="$R" -v z=$z 'BEGIN {
                printf "%.0f", X * p + (z == 2 ? X * p / R : X * p) + (z >= 1 ? K * p / R : K * p) }')
            # a mean over ranks, rounded like the count
            closed=$(awk -v p="$psi" -v P="$P" -v R="$R" -v X="$X" -v z=$z 'BEGIN {
                printf "%.0f", (z == 0 ? 2 * p : z == 1 ? 2 * P : p + P) * (R - 1) * X / R }')
            if [ -s "$tf" ]; then
                read -r counted extra_b < <(awk -v steps="$steps" -v R="$R" '{
                    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
                    END { s = v["allreduce_sent"] + v["reducescatter_sent"] + v["allgather_sent"] + v["reduce_sent"] + v["broadcast_sent"]
                          stats = 2 * (R - 1) * 16 * steps  # the step statistics all-reduce: 4 fp32
                          printf "%.0f %.0f\n", (s - stats) / R / steps, stats / R / steps }' "$tf")
                lines=$(grep -c '^nccl_traffic ' "$tf")
                [ "$lines" -eq "$R" ] || echo "  (note: $lines traffic lines for $R ranks)"
                extra_b="+$extra_b B"
            else
                counted="n/a" extra_b="-"  # the real NCCL counts nothing: the closed form alone
            fi
            printf "  %-6s %13s %20s %12s %9s %7s %9s %14s %14s %7s\n" "-z $z" "$(mib "$zs")" "$([ $z -eq 0 ] && echo - || saved "$zs" "$zs0")" \
                "$(mib "$paper")" "$(ms_med "$work/z${R}_$z.out")" "$(spread "$work/z${R}_$z.out")" \
                "$(versus "$work/z_one.out" "$work/z${R}_$z.out")" "$counted" "$closed" "$extra_b"
        done
        echo "  model states counted at R=$R:"
        for z in 0 1 2; do echo "    -z $z: $(mem "$work/z${R}_$z.out.1" names)"; done
        if [ -s "$work/traffic_${R}_1.txt" ]; then
            echo "  collectives per step at R=$R (calls, data bytes in the element type; from the counter, rank 0):"
            for z in 0 1 2; do
                awk -v steps="$steps" -v z=$z 'NR == 1 { out = ""
                    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                    split("allreduce reducescatter allgather reduce broadcast", k, " ")
                    for (j = 1; j <= 5; j++) if (v[k[j] "_calls"] > 0)
                        out = out sprintf("  %s %g x, %.0f B", k[j], v[k[j] "_calls"] / steps, v[k[j] "_bytes"] / steps)
                    printf "    -z %d:%s\n", z, out }' "$work/traffic_${R}_$z.txt"
            done
        fi
    done
    echo "  extra: the step's 16-byte all-reduce of loss, squared gradient norm and non-finite count (fp32), beside the"
    echo "  gradients; -z 2 reduces each layer's gradients to their owners on every micro-step (ncclReduce, in buckets),"
    echo "  so with accumulation its reduce volume is micro-steps × (R-1)/R·Ψ·X. Val and step losses go over MPI, not"
    echo "  NCCL; a checkpoint at -z 1/2 in fp16/bf16 adds a broadcast of the fp32 master weights (Ψ·4 bytes)."
fi
