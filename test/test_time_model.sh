#!/usr/bin/env bash
# test_time_model.sh: the planner's step time is the kernel report's (one time model, two readers).
# `./train_gpt2 --plan --gpu NAME --json` predicts compute with common/time_model.c from the counts
# compiled in (common/time_table.c); dev/kernel_report.py predicts the same configurations in Python
# from the count files themselves, and its committed output (docs/kernel_report_fp16.json) holds
# them: the side-by-side's step (d12 and d48, B = 8, T = 1024, -r 0, each GPU's -ge default) and the
# "planner" configurations (-r 1 to 3, -r 3 in segments of 4 layers, 4 micro-steps, -r 2 with 2). Each
# within 1% (the two sum the same terms from the same counts, one through the table's coefficients,
# the other through the count files; the line says the largest difference). And what the counts do not cover gets the stated MFU estimate and says
# why; a GPU the model does not have ends with one line naming --gpu.
set -u
. "$(dirname "$0")/lib.sh"
planner=./train_gpt2
require "$planner"
report=docs/kernel_report_fp16.json
plan() {  # flags...: --plan --json's communication member, as JSON on one line
    "$planner" --plan --json "$@" 2> "$dir/err" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["communication"]))'
}
declare -A gpu_flag=(["H100 SXM"]=h100 ["RTX A6000"]=a6000)
for model in d12 d48; do
    for gpu in "H100 SXM" "RTX A6000"; do
        want=$(python3 -c "import json; print(json.load(open('$report'))['side_by_side']['$gpu']['$model']['ours_ms'])")
        got=$(plan -e $model -t 1024 -b 8 -r 0 --gpu "${gpu_flag[$gpu]}" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print("%.6f %s %s" % (c["compute_seconds"] * 1e3, c["counted"], c["card"]))')
        set -- $got
        ok=$(python3 -c "print(int(abs($1 / $want - 1) <= 0.01))")
        if [ "$ok" = 1 ] && [ "$2" = True ]; then
            pass "time model: $model on the $gpu, B=8, -r 0: planner $1 ms, kernel report $want ms"
        else
            fail "time model: $model on the $gpu, B=8, -r 0" "planner $1 ms (counted: $2, card $3), kernel report $want ms"
        fi
    done
done
# The report's "planner" configurations: each as the planner plans it.
python3 -c "
import json
for c in json.load(open('$report'))['planner']:
    print(c['model'], c['gpu'].replace(' ', '_'), c['B'], c['recompute'], c['recompute_every'], c['micro_steps'], c['step_ms'])
" > "$dir/checks"
[ -s "$dir/checks" ] || fail "time model: the report's planner configurations" "none in $report"
n=0 bad=0 worst=0
while read -r model gpu B r k m want; do
    gpu=${gpu//_/ }
    flags=(-e "$model" -t 1024 -b "$B" -r "$r" -d $((B * 1024 * m)) --gpu "${gpu_flag[$gpu]}")
    [ "$r" = 3 ] && flags+=(--recompute-every "$k")
    got=$(plan "${flags[@]}" | python3 -c 'import json,sys; c = json.load(sys.stdin); print("%.6f" % (c["compute_seconds"] * 1e3) if c["counted"] else "none")')
    n=$((n + 1))
    [ "$got" != none ] && worst=$(python3 -c "print(max($worst, abs($got / $want - 1)))")
    if [ "$got" = none ] || [ "$(python3 -c "print(int(abs($got / $want - 1) > 0.01))")" = 1 ]; then
        bad=$((bad + 1))
        echo "  $model $gpu -r $r K=$k ${m} micro-steps: planner $got ms, kernel report $want ms"
    fi
done < "$dir/checks"
[ $bad = 0 ] && pass "time model: the report's $n planner configurations (-r 1-3, segments, micro-steps) within 1% (at most $(python3 -c "print('%.1e' % $worst)"))" \
    || fail "time model: the report's planner configurations" "$bad of $n differ by more than 1% (listed above)"
# Where the counts do not reach, the stated estimate and why.
c=$(plan -e d48 -t 512 -b 8 -r 0 --gpu a6000)
echo "$c" | grep -q '"counted": false' && echo "$c" | grep -q 'not the kernel report.s model: the kernel report counts T = 1024' \
    && pass "time model: T=512 is not counted: the MFU estimate, saying why" \
    || fail "time model: T=512" "$c"
c=$(plan -e d48 -t 1024 -b 8 --precision fp32 --gpu h100)
echo "$c" | grep -q '"counted": false' && echo "$c" | grep -q "FP32's kernels are not counted" \
    && pass "time model: FP32 is not counted: the MFU estimate, saying why" || fail "time model: FP32" "$c"
# A rank's share: ZeRO-1 over 8 ranks updates an eighth on each, so its compute is less than ZeRO-0's
# at 8 ranks, which equals one rank's; a pipeline stage's is less than the whole model's.
one=$(plan -e d48 -t 1024 -b 8 -r 0 --gpu h100 | python3 -c 'import json,sys; print(json.load(sys.stdin)["compute_seconds"])')
z0=$(plan -e d48 -t 1024 -b 8 -r 0 --gpu h100 -z 0 --ranks 8 | python3 -c 'import json,sys; print(json.load(sys.stdin)["compute_seconds"])')
z1=$(plan -e d48 -t 1024 -b 8 -r 0 --gpu h100 -z 1 --ranks 8 | python3 -c 'import json,sys; print(json.load(sys.stdin)["compute_seconds"])')
pp=$(plan -e d48 -t 1024 -b 8 -r 0 --gpu h100 -pp 4 --ranks 4 -d $((8 * 1024 * 4)) | python3 -c 'import json,sys; print(json.load(sys.stdin)["compute_seconds"])')
four=$(plan -e d48 -t 1024 -b 8 -r 0 --gpu h100 -d $((8 * 1024 * 4)) | python3 -c 'import json,sys; print(json.load(sys.stdin)["compute_seconds"])')
python3 -c "import sys; sys.exit(0 if $z0 == $one and $z1 < $z0 and $pp < 0.5 * $four else 1)" \
    && pass "time model: a rank's share: ZeRO-1 at 8 ranks $z1 s < ZeRO-0 $z0 s = one rank's; a stage of 4 $pp s < the model's $four s" \
    || fail "time model: a rank's share" "one rank $one, ZeRO-0 at 8 $z0, ZeRO-1 at 8 $z1, a stage of 4 $pp, the model $four (4 micro-steps)"
# Offload: the host's AdamW at --host-adamw's rate (G parameters a second; default the 1.83 measured on
# this project's machine), every parameter once a step, and the step longer than without offload and than the host's AdamW alone.
h=$(plan -e d48 -t 1024 -b 4 -r 3 -d 8192 --gpu a6000 --offload optimizer --host-adamw 0.5 | python3 -c '
import json, sys
c = json.load(sys.stdin)
print(c["host_update_seconds"], c["step_seconds"])')
d=$(plan -e d48 -t 1024 -b 4 -r 3 -d 8192 --gpu a6000 --offload optimizer | python3 -c 'import json,sys; print(json.load(sys.stdin)["host_update_seconds"])')
n=$(plan -e d48 -t 1024 -b 4 -r 3 -d 8192 --gpu a6000 | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_seconds"])')
set -- $h
python3 -c "import sys; P = 1557686400; sys.exit(0 if abs($1 - P / 0.5e9) < 1e-6 and abs($d - P / 1.83e9) < 1e-6 and $2 > $n and $2 > $1 else 1)" \
    && pass "time model: offload's host AdamW at --host-adamw 0.5: $1 s (default 1.83 G/s: $d s), the step $2 s against $n s on the device" \
    || fail "time model: offload's host AdamW" "at 0.5 G/s $1 s, default $d s, step $2 s against $n s"
expect_error "time model: --host-adamw must be a rate" "flag --host-adamw expects G parameters a second" --plan -e d12 --host-adamw -1
expect_error "time model: --gpu names a GPU the model has" "^.*flag --gpu: the time model has no GPU called 'v100' \(it has H100 SXM, .*\)$" \
    --plan -e d12 --gpu v100
exit $failed
