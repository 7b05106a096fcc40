#!/usr/bin/env bash
# run_gpt2_124M.sh: GPT-2 124M (d12, T=1024) in FP16, llm.c's recipe: 524,288 tokens per step, micro-
# batch 64 (or the largest the planner fits on the card, halving), lr 6e-4 with 700 warmup steps and a
# cosine to 0, weight decay 0.1; one GPU, or NP of them under mpirun with ZeRO-1. With FineWeb 10B
# (data/fineweb.sh, all 103 train shards) one epoch is about 19,600 steps, as in llm.c's GPT-2 124M.
#
#   scripts/run_gpt2_124M.sh [--dry] [more trainer flags, which override these]
#   NP=8 scripts/run_gpt2_124M.sh          8 GPUs, one process each (MPIRUN, default "mpirun")
#   environment: TRAIN, VAL   shard globs; without TRAIN, the built-in corpus (a smoke run of STEPS)
#                NP (1), BUDGET (device memory per rank: what nvidia-smi reports, else 80GiB),
#                OUT (out/gpt2_124M), STEPS (one epoch of TRAIN; 20 on the built-in corpus)
#   --dry                     print the plan and the command, run nothing (what make test checks)
set -u
source "$(dirname "$0")/recipe_common.sh"
recipe_args "$@"

MODEL=d12 T=1024 TOTAL=524288
NP=${NP:-1}
mib=$(device_mib)
BUDGET=${BUDGET:-$([ -n "$mib" ] && echo "${mib}MiB" || echo 80GiB)}
OUT=${OUT:-out/gpt2_124M}
data_flags
STEPS=${STEPS:-$([ $BUILTIN = 1 ] && echo 20 || echo -1)}
zero=0
[ "$NP" -gt 1 ] && zero=1
b=$((TOTAL / (T * NP)))
[ $b -gt 64 ] && b=64

pick_fit $MODEL $T $TOTAL "$NP" $zero $b "$BUDGET"
offload=()
[ "$FIT_OFFLOAD" != none ] && offload=(--offload "$FIT_OFFLOAD")
launch_ranks "$NP"

echo "GPT-2 124M ($MODEL, T=$T) on $NP GPU(s) within $BUDGET each, FP16:"
echo "plan: -b $FIT_B -r $FIT_R -z $FIT_Z${offload[*]:+ ${offload[*]}}, $FIT_MICRO_STEPS micro-steps of $((FIT_B * T)) tokens on each of $NP rank(s) = $TOTAL tokens per step;" \
     "$(gib "$FIT_TOTAL_BYTES") GiB per rank with the estimates ($FIT_TOTAL_BYTES bytes)"
[ $BUILTIN = 1 ] && echo "data: none given (TRAIN=...): the built-in corpus, $STEPS steps"
show_and_run "${LAUNCH[@]}" ./train_gpt2 --engine gpu --precision fp16 -e $MODEL -t $T -b "$FIT_B" -r "$FIT_R" \
    -z "$FIT_Z" "${offload[@]}" -d $TOTAL "${DATA[@]}" -x "$STEPS" \
    -l 6e-4 -u 700 -q 0.0 -c 0.1 -G 1.0 -m 20 -s 20000 -n 5000 -o "$OUT" "${EXTRA[@]}"
