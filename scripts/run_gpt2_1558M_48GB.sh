#!/usr/bin/env bash
# run_gpt2_1558M_48GB.sh: GPT-2 1.5B (d48, T=1024) trained in FP16 on one 48 GB card. The planner
# (./train_gpt2 --plan --json --memory-budget 48GiB) picks the fastest configuration that fits,
# starting from all 512 sequences of a step in one micro-batch with no recompute and taking its
# cheapest change: the largest micro-batch that divides the step (d48: -b 8, no recompute, 43.5 GiB)
# with accumulation to 524,288 tokens per step. --max-memory 48GiB holds the run to 48 GiB on a
# bigger card too (a plan over it is refused; the device's real use is checked every step).
# Hyperparameters are llm.c's for its GPT-2 1.5B run (lr 6e-4, warmup 700, cosine to 10%, weight
# decay 0.1, clip 1), at half its tokens per step.
#
#   scripts/run_gpt2_1558M_48GB.sh [--dry] [more trainer flags, which override these]
#   environment: TRAIN, VAL   shard globs (e.g. 'data/cache/shards/fineweb_train_*.bin'); without
#                             TRAIN, the built-in corpus (a smoke run of STEPS steps)
#                BUDGET       device memory per rank (48GiB; a card with ECC on may show less:
#                             use what nvidia-smi reports), OUT (out/gpt2_1558M_48GB),
#                STEPS        (64000 with data: 33.5B tokens, llm.c's 1.5B run; 5 on the built-in corpus)
#   --dry                     print the plan and the command, run nothing (what make test checks)
set -u
source "$(dirname "$0")/recipe_common.sh"
recipe_args "$@"

MODEL=d48 T=1024 TOTAL=524288
BUDGET=${BUDGET:-48GiB}
OUT=${OUT:-out/gpt2_1558M_48GB}
data_flags
STEPS=${STEPS:-$([ $BUILTIN = 1 ] && echo 5 || echo 64000)}

pick_fit $MODEL $T $TOTAL 1 0 $((TOTAL / T)) "$BUDGET"
offload=()
[ "$FIT_OFFLOAD" != none ] && offload=(--offload "$FIT_OFFLOAD")

echo "GPT-2 1.5B ($MODEL, T=$T) on one card within $BUDGET, FP16:"
echo "plan: -b $FIT_B -r $FIT_R${offload[*]:+ ${offload[*]}}, $FIT_MICRO_STEPS micro-steps of $((FIT_B * T)) tokens = $TOTAL tokens per step;" \
     "$(gib "$FIT_TOTAL_BYTES") GiB per rank with the estimates ($FIT_TOTAL_BYTES bytes), $(gib "$FIT_HOST_BYTES") GiB of host memory"
[ $BUILTIN = 1 ] && echo "data: none given (TRAIN=...): the built-in corpus, $STEPS steps"
show_and_run ./train_gpt2 --engine gpu --precision fp16 -e $MODEL -t $T -b "$FIT_B" -r "$FIT_R" "${offload[@]}" \
    -d $TOTAL --max-memory "$BUDGET" "${DATA[@]}" -x "$STEPS" \
    -l 6e-4 -u 700 -q 0.1 -c 0.1 -G 1.0 -m 20 -s 20000 -n 2000 -o "$OUT" "${EXTRA[@]}"
