#!/usr/bin/env bash
# run_gpt2_1558M.sh: GPT-2 1.5B (d48, T=1024) in FP16 on several GPUs, one process each under mpirun,
# ZeRO-1 (fp32 master weights, m and v sharded over the ranks: 4Ψ + 12Ψ/N bytes of model states per
# rank). The planner picks the micro-batch (from TOTAL/(T*NP), capped at 64, halving) and, only if it
# must, recompute, ZeRO-2 or offload, within BUDGET per rank: on 8 GPUs of 80 GB, -b 16 with no
# recompute, llm.c's configuration for its 1.5B run. Hyperparameters are llm.c's (lr 6e-4, warmup
# 700, cosine to 10%, weight decay 0.1); tokens per step 524,288 like the 48 GB recipe (TOTAL=1048576
# for llm.c's), 33.5B tokens in all (llm.c's run).
#
#   scripts/run_gpt2_1558M.sh [--dry] [more trainer flags, which override these]
#   environment: NP (the GPUs nvidia-smi finds, 8 if fewer than 2), MPIRUN ("mpirun"; several
#                machines: "mpirun --hostfile hosts -x LD_LIBRARY_PATH"), BUDGET (device memory per
#                rank: what nvidia-smi reports, else 80GiB), TOTAL (524288), TRAIN, VAL (shard globs;
#                without TRAIN the built-in corpus, a smoke run), OUT (out/gpt2_1558M), STEPS
#   --dry                     print the plan and the command, run nothing (what make test checks)
set -u
source "$(dirname "$0")/recipe_common.sh"
recipe_args "$@"

MODEL=d48 T=1024
TOTAL=${TOTAL:-524288}
n=$(gpu_count)
NP=${NP:-$([ "$n" -ge 2 ] && echo "$n" || echo 8)}
[ "$NP" -ge 2 ] || recipe_die "NP=$NP: this recipe is for several GPUs (one card: scripts/run_gpt2_1558M_48GB.sh)"
mib=$(device_mib)
BUDGET=${BUDGET:-$([ -n "$mib" ] && echo "${mib}MiB" || echo 80GiB)}
OUT=${OUT:-out/gpt2_1558M}
data_flags
STEPS=${STEPS:-$([ $BUILTIN = 1 ] && echo 5 || echo $((33554432000 / TOTAL)))}
b=$((TOTAL / (T * NP)))
[ $b -gt 64 ] && b=64

pick_fit $MODEL $T "$TOTAL" "$NP" 1 $b "$BUDGET"
offload=()
[ "$FIT_OFFLOAD" != none ] && offload=(--offload "$FIT_OFFLOAD")

echo "GPT-2 1.5B ($MODEL, T=$T) on $NP GPUs within $BUDGET each, FP16, ZeRO-$FIT_Z:"
echo "plan: -b $FIT_B -r $FIT_R -z $FIT_Z${offload[*]:+ ${offload[*]}}, $FIT_MICRO_STEPS micro-steps of $((FIT_B * T)) tokens on each of $NP ranks = $TOTAL tokens per step;" \
     "$(gib "$FIT_TOTAL_BYTES") GiB per rank with the estimates ($FIT_TOTAL_BYTES bytes)"
[ $BUILTIN = 1 ] && echo "data: none given (TRAIN=...): the built-in corpus, $STEPS steps"
launch_ranks "$NP"
show_and_run "${LAUNCH[@]}" ./train_gpt2 --engine gpu --precision fp16 -e $MODEL -t $T -b "$FIT_B" \
    -r "$FIT_R" -z "$FIT_Z" "${offload[@]}" -d "$TOTAL" "${DATA[@]}" -x "$STEPS" \
    -l 6e-4 -u 700 -q 0.1 -c 0.1 -G 1.0 -m 20 -s 20000 -n 2000 -o "$OUT" "${EXTRA[@]}"
