#!/usr/bin/env bash
# memory_ladder.sh: the memory-technique ladder for one model. Step by step from the FP32
# baseline: FP16 mixed precision, activation recompute 1/2/3, ZeRO-1 at 2/4/8 ranks, ZeRO-2, ZeRO-3, a smaller
# micro-batch with accumulation (same tokens per step), optimizer offload, gradient offload, and
# pipeline stages (-pp 4, then 4 stages x 2 data-parallel ranks at ZeRO-1: the largest stage's
# plan, the rank's figure; --pp-stages N, "" for none, or fewer than the model's layers); for each
# row the device memory a rank needs, per component (from the planner, `./train_gpt2 --plan --json`),
# for the ZeRO rows the bytes a rank sends per step and their time at the planner's default link,
# and where a GPU is present the measured peak and tokens/s (the trainer itself, a few steps a row);
# for every row the predicted time of a step on each GPU of --time-gpus (the planner's, by the kernel
# report's model: `--plan --gpu NAME`), tokens/s per GPU, MFU and the change against the row it comes from.
# Writes OUT/ladder.md (a Markdown table), OUT/ladder.png (stacked bars per component; matplotlib,
# Debian's python3-matplotlib), OUT/ladder.json, and OUT/plans/NN.json, OUT/logs/NN.log per row.
#
#   scripts/memory_ladder.sh                      d48, T=1024, B=8; planned-only without a GPU
#   scripts/memory_ladder.sh d12 -b 16            another model or micro-batch
#   scripts/memory_ladder.sh d48 --planned        never run the trainer (what make test runs)
#   scripts/memory_ladder.sh d2 -t 64 -b 4 --measured --gpus 2 --trainer build/emu/train_gpt2_emu_fp16 \
#       --trainer-fp32 build/emu/train_gpt2_emu_fp32     the measuring path on the CPU runtime (slow)
#   options: -t T (1024)  -b B (8: every row's micro-batch; the accumulation row takes B/2)
#            --out DIR (build/ladder/MODEL)  --planned  --measured (run even where nvidia-smi finds
#            no GPU)  --no-chart (the table and JSON, no ladder.png)  --trainer PATH (./train_gpt2)
#            --trainer-fp32 PATH (an FP32 build, for the baseline row on a GPU: make train
#            PRECISION=FP32, then copy ./train_gpt2 aside)
#            -x STEPS (3)  --gpus N (what nvidia-smi counts)  --budget SIZE (48GiB: the "fits" column)
#            --zero-ranks "2 4 8"  --pp-stages 4 (the pipeline rows' stages; "" for none)
#            --time-gpus "a6000 h100" (the GPUs whose predicted time the table gives, first the chart's)
#            --link nvlink (the ranks' link for the ZeRO and pipeline rows' time)
#            -- ARGS... (passed to every run, e.g. -- -i 'train_*.bin' -j '')
#   environment: MPIRUN (default "mpirun") starts the ZeRO rows; with fewer GPUs than a row's ranks
#            the row is planned only.
#
# Rows without a measurement say "planned": their bytes are the planner's, which the GPU engine
# allocates to the byte (test/test_memory_plan.sh); the CUDA context and NCCL columns are estimates.
set -u
cd "$(dirname "$0")/.."

model=d48 T=1024 B=8 out="" mode=auto trainer=./train_gpt2 trainer_fp32="" steps=3 gpus="" budget=48GiB
zero_ranks="2 4 8" pp_stages=4 chart="" time_gpus="a6000 h100" link=nvlink
extra=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then model=$1; shift; fi
while [ $# -gt 0 ]; do
    case $1 in
        -e) model=$2; shift 2 ;;
        -t) T=$2; shift 2 ;;
        -b) B=$2; shift 2 ;;
        -x) steps=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --planned) mode=planned; shift ;;
        --no-chart) chart=--no-chart; shift ;;
        --measured) mode=measured; shift ;;
        --trainer) trainer=$2; shift 2 ;;
        --trainer-fp32) trainer_fp32=$2; shift 2 ;;
        --gpus) gpus=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        --zero-ranks) zero_ranks=$2; shift 2 ;;
        --pp-stages) pp_stages=$2; shift 2 ;;
        --time-gpus) time_gpus=$2; shift 2 ;;
        --link) link=$2; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "memory_ladder: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "memory_ladder: $*" >&2; exit 1; }
[[ $B =~ ^[0-9]+$ ]] && [ "$B" -ge 2 ] && [ $((B % 2)) = 0 ] || die "-b must be an even number >= 2 (the accumulation row halves it), got $B"
[[ $T =~ ^[0-9]+$ ]] || die "-t expects a number, got $T"
[ -n "$out" ] || out=build/ladder/$(basename "$model" .bin)
planner=./train_gpt2
[ -x "$planner" ] || die "$planner is not built: run make train (it plans on any machine)"
budget_bytes=$("$planner" --plan --json -e d1 --memory-budget "$budget" 2>&1 |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["budget"]["bytes"])' 2> /dev/null) \
    || die "--budget $budget: expected a size such as 48GiB"

# ---- where we are: planned only, or measuring on GPUs ------------------------------------------
if [ -z "$gpus" ]; then
    gpus=0
    command -v nvidia-smi > /dev/null 2>&1 && gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
fi
if [ $mode = auto ]; then
    if [ "$gpus" -gt 0 ]; then mode=measured; else mode=planned; fi
    [ $mode = planned ] && echo "memory_ladder: no GPU (nvidia-smi finds none): planned only"
fi
device_mib=""
if [ $mode = measured ]; then
    [ "$gpus" -ge 1 ] || gpus=1
    [ -x "$trainer" ] || die "$trainer is not built"
    # The trainer's own precision: --plan without --precision plans the build's.
    trainer_precision=$("$trainer" --plan --json -e d1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["options"]["precision"])') \
        || die "$trainer --plan failed"
    if command -v nvidia-smi > /dev/null 2>&1; then
        device_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2> /dev/null | head -n 1 | tr -d ' ')
    fi
    echo "memory_ladder: measuring with $trainer ($trainer_precision) on $gpus GPU(s)${device_mib:+ of $device_mib MiB}, $steps steps a row"
fi
mkdir -p "$out/plans" "$out/logs"
rm -f "$out"/plans/*.json "$out"/logs/*.log "$out/rows.tsv" "$out/ladder.png"

# ---- the rows -----------------------------------------------------------------------------------
# Each row: a label, the row it changes ("from"), its ranks and its flags (model and T are added).
labels=() froms=() ranks=() flags=()
row() { labels+=("$1"); froms+=("$2"); ranks+=("$3"); shift 3; flags+=("$*"); }
half=$((B / 2))
row "FP32 baseline"                     -  1 --precision fp32 -b $B -r 0
row "FP16 mixed precision"              1  1 --precision fp16 -b $B -r 0
row "+ recompute 1 (GELU)"              2  1 --precision fp16 -b $B -r 1
row "+ recompute 2 (and LayerNorms)"    3  1 --precision fp16 -b $B -r 2
row "+ recompute 3 (whole blocks)"      4  1 --precision fp16 -b $B -r 3
prev=5 last_n=1
for n in $zero_ranks; do
    row "+ ZeRO-1, $n ranks"            $prev $n --precision fp16 -b $B -r 3 -z 1
    prev=${#labels[@]} last_n=$n
done
if [ "$last_n" -gt 1 ]; then
    row "+ ZeRO-2, $last_n ranks"       $prev $last_n --precision fp16 -b $B -r 3 -z 2
    row "+ ZeRO-3, $last_n ranks"       ${#labels[@]} $last_n --precision fp16 -b $B -r 3 -z 3
fi
# Back to one card: half the micro-batch in twice the micro-steps, then offload.
row "1 rank, micro-batch $half x 2 micro-steps"  5  1 --precision fp16 -b $half -r 3 -d $((B * T))
acc=${#labels[@]}
row "+ offload optimizer (host AdamW)" $acc 1 --precision fp16 -b $half -r 3 -d $((B * T)) --offload optimizer
row "+ offload gradients too"          $((acc + 1)) 1 --precision fp16 -b $half -r 3 -d $((B * T)) --offload grads
# Pipeline stages from the same point as ZeRO: each of P ranks a range of layers (the default split:
# the largest stage's planned memory the least), P micro-steps a step (-d's default, B*T*ranks),
# then 2 data-parallel ranks a stage at ZeRO-1.
if [ -n "$pp_stages" ]; then
    row "pipeline, $pp_stages stages"            5 "$pp_stages" --precision fp16 -b $B -r 3 -pp "$pp_stages"
    row "+ 2 data-parallel ranks a stage, ZeRO-1" ${#labels[@]} $((2 * pp_stages)) --precision fp16 -b $B -r 3 -pp "$pp_stages" -z 1
fi

# ---- plan (and run) each row --------------------------------------------------------------------
sampler_pid=""
start_sampler() {   # the most nvidia-smi reports in use on any GPU while the run lasts, in MiB
    local file=$1
    echo 0 > "$file"
    command -v nvidia-smi > /dev/null 2>&1 || return
    ( max=0
      while true; do
          for m in $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2> /dev/null); do
              [ "$m" -gt "$max" ] 2> /dev/null && { max=$m; echo "$max" > "$file"; }
          done
          sleep 0.5
      done ) &
    sampler_pid=$!
}
stop_sampler() { [ -n "$sampler_pid" ] && kill "$sampler_pid" 2> /dev/null; wait "$sampler_pid" 2> /dev/null; sampler_pid=""; }
trap 'stop_sampler' EXIT

plan_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

for i in "${!labels[@]}"; do
    nn=$(printf '%02d' $((i + 1)))
    read -r -a f <<< "${flags[$i]}"
    n=${ranks[$i]}
    echo "memory_ladder: row $((i + 1))/${#labels[@]}: ${labels[$i]}"   # a measured row takes minutes
    json=$out/plans/$nn.json
    "$planner" --plan --json -e "$model" -t "$T" "${f[@]}" --ranks "$n" --link "$link" > "$json" 2> "$out/logs/$nn.plan.err" \
        || die "row $((i + 1)) (${labels[$i]}): --plan failed: $(cat "$out/logs/$nn.plan.err")"
    rm -f "$out/logs/$nn.plan.err"
    for g in $time_gpus; do  # the predicted time on each GPU named
        "$planner" --plan --json -e "$model" -t "$T" "${f[@]}" --ranks "$n" --gpu "$g" --link "$link" > "$out/plans/$nn.$g.json" \
            2> "$out/logs/$nn.plan.err" || die "row $((i + 1)) (${labels[$i]}): --plan --gpu $g failed: $(cat "$out/logs/$nn.plan.err")"
    done
    rm -f "$out/logs/$nn.plan.err"
    status=planned peak="" toks=""
    if [ $mode = measured ]; then
        precision=${f[1]}
        exe=$trainer
        if [ "$precision" != "$trainer_precision" ]; then
            if [ "$precision" = fp32 ] && [ -n "$trainer_fp32" ]; then exe=$trainer_fp32
            else exe=""; status="planned (no $precision build: --trainer-$precision)"; fi
        fi
        if [ -n "$exe" ] && [ "$n" -gt "$gpus" ]; then
            exe=""; status="planned (needs $n GPUs)"
        fi
        if [ -n "$exe" ] && [ -n "$device_mib" ]; then
            total=$(plan_field "$json" device_total)
            if [ "$total" -gt $((device_mib * 1048576)) ]; then exe=""; status="planned (over the device's $device_mib MiB)"; fi
        fi
        if [ -n "$exe" ]; then
            # A run has its ranks from mpirun (--ranks is the planner's alone).
            cmd=("$exe" -e "$model" -t "$T" "${f[@]}" -x "$steps" -o "" -v 0 -s 0 --engine gpu "${extra[@]}")
            [ "$n" -gt 1 ] && cmd=(${MPIRUN:-mpirun} -np "$n" "${cmd[@]}")
            echo "memory_ladder:   ${cmd[*]}"
            start_sampler "$out/logs/$nn.smi"
            "${cmd[@]}" > "$out/logs/$nn.log" 2>&1
            rc=$?
            stop_sampler
            if [ $rc != 0 ]; then
                status="failed (exit $rc, $out/logs/$nn.log)"
                tail -n 3 "$out/logs/$nn.log" | sed 's/^/    /'
            else
                status=measured
                peak=$(sed -n 's/^device memory: at most \([0-9.]*\) MiB in use.*/\1/p' "$out/logs/$nn.log" | tail -n 1)
                smi=$(cat "$out/logs/$nn.smi" 2> /dev/null || echo 0)
                [ -z "$peak" ] && [ "${smi:-0}" -gt 0 ] && peak=$smi
                toks=$(sed -n 's/^done: .* ms\/step, \([0-9.]*\) tok\/s.*/\1/p' "$out/logs/$nn.log" | tail -n 1)
            fi
            rm -f "$out/logs/$nn.smi"
        fi
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$((i + 1))" "${labels[$i]}" "${froms[$i]}" "$n" "${flags[$i]}" \
        "$status" "$peak" "$toks" >> "$out/rows.tsv"
done

# ---- the table and the chart --------------------------------------------------------------------
# Debian's python3 has python3-matplotlib; another python3 first on PATH (pyenv, a venv) may not.
py=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' 2> /dev/null; then py=/usr/bin/python3; fi
"$py" scripts/ladder_report.py "$out" "$model" "$T" "$B" "$budget" "$budget_bytes" $chart --time-gpus "$time_gpus" \
    || die "the report failed"
echo "memory_ladder: wrote $out/ladder.md${out:+, $out/ladder.json}$( [ -f "$out/ladder.png" ] && echo ", $out/ladder.png")"
