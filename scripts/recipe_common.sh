# recipe_common.sh: what the run recipes (scripts/run_gpt2_*.sh) share; sourced, not run.
#   recipe_args "$@"     --dry (print only) and any other arguments, kept in EXTRA for the trainer
#   gpu_count, device_mib   what nvidia-smi finds (0 and "" without a GPU)
#   pick_fit MODEL T TOTAL RANKS ZERO B_START BUDGET   the fastest configuration the planner finds
#                        within BUDGET per rank, starting from micro-batch B_START with no recompute
#                        and keeping TOTAL tokens per step; sets FIT_B FIT_R FIT_Z FIT_OFFLOAD
#                        FIT_ACCUM FIT_TOTAL_BYTES
#   data_flags           -i/-j from TRAIN and VAL; the built-in corpus when TRAIN is empty
#   launch_ranks NP      LAUNCH: how NP ranks start (mpirun for preemption; nothing for one)
#   show_and_run CMD...  prints the command, then runs it (unless --dry)
# The planner is ./train_gpt2 --plan --json (any machine, no GPU); its cost model (docs/memory.md, "The
# memory planner") ranks recompute levels, micro-batch halvings, ZeRO stages and offload.
cd "$(dirname "$0")/.." || exit 1
DRY=0
EXTRA=()
recipe_die() { echo "$(basename "$0"): $*" >&2; exit 1; }

recipe_args() {
    while [ $# -gt 0 ]; do
        case $1 in
            --dry) DRY=1 ;;
            -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
            *) EXTRA+=("$1") ;;
        esac
        shift
    done
    [ -x ./train_gpt2 ] || recipe_die "./train_gpt2 is not built: make train"
}

gpu_count() {
    if command -v nvidia-smi > /dev/null 2>&1; then nvidia-smi -L 2> /dev/null | grep -c '^GPU '; else echo 0; fi
}
device_mib() {
    command -v nvidia-smi > /dev/null 2>&1 &&
        nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2> /dev/null | head -n 1 | tr -d ' '
}

# One field of a plan, by a path such as budget.fits or budget.advice.B.
plan_get() {
    python3 -c '
import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("null" if v is None else str(v).lower() if isinstance(v, bool) else v)' "$1" "$2"
}

pick_fit() {
    local model=$1 T=$2 total=$3 ranks=$4 zero=$5 b=$6 budget=$7 json
    [ $((total % (T * ranks * b))) = 0 ] ||
        recipe_die "$total tokens per step is not a multiple of T*ranks*B = $T*$ranks*$b"
    json=$(./train_gpt2 --plan --json -e "$model" -t "$T" -b "$b" -r 0 -z "$zero" --ranks "$ranks" \
        --precision fp16 -d "$total" --memory-budget "$budget") || recipe_die "--plan failed"
    if [ "$(plan_get "$json" budget.fits)" = true ]; then
        FIT_B=$b FIT_R=0 FIT_Z=$zero FIT_OFFLOAD=none FIT_ACCUM=1
    else
        [ "$(plan_get "$json" budget.advice)" != null ] ||
            recipe_die "the planner finds nothing that fits $budget per rank for $model at T=$T on $ranks rank(s)"
        FIT_B=$(plan_get "$json" budget.advice.B)
        FIT_R=$(plan_get "$json" budget.advice.recompute)
        FIT_Z=$(plan_get "$json" budget.advice.zero_stage)
        FIT_OFFLOAD=$(plan_get "$json" budget.advice.offload)
        FIT_ACCUM=$(plan_get "$json" budget.advice.accumulation_factor)
    fi
    json=$(./train_gpt2 --plan --json -e "$model" -t "$T" -b "$FIT_B" -r "$FIT_R" -z "$FIT_Z" --ranks "$ranks" \
        --precision fp16 --offload "$FIT_OFFLOAD" -d "$total" --memory-budget "$budget") || recipe_die "--plan failed"
    FIT_TOTAL_BYTES=$(plan_get "$json" device_total)
    FIT_HOST_BYTES=$(plan_get "$json" host_bytes)
    FIT_MICRO_STEPS=$((total / (T * ranks * FIT_B)))
}

# -i/-j from TRAIN and VAL (shard globs), val every 250 steps. Without TRAIN: the built-in corpus at byte level (-K "":
# 269,773 tokens, enough for one micro-step of up to 263 sequences of 1024 over all ranks; its BPE
# form holds about a quarter of that) and no val (its val split is smaller than one batch).
data_flags() {
    if [ -n "${TRAIN:-}" ]; then
        DATA=(-i "$TRAIN" -j "${VAL:-}" -v 250)   # val loss every 250 steps, as llm.c
        BUILTIN=0
    else
        DATA=(-i "" -j "" -K "" -v 0)
        BUILTIN=1
    fi
}

gib() { python3 -c 'import sys; print(f"{int(sys.argv[1]) / 2**30:.2f}")' "$1"; }

# launch_ranks NP: sets LAUNCH, what starts NP ranks (nothing for one: the trainer takes a SIGTERM
# itself). Several ranks start under mpirun set up for preemption (docs/reliability.md, "Preemption"):
# scripts/preemptible.sh turns a scheduler's SIGTERM into SIGUSR1, which mpirun forwards to the ranks
# at once (they abandon the step under way and write a checkpoint), and a kill delay of 20 s, within
# which a rank signalled directly (Slurm signals every process) finishes one micro-step and its
# checkpoint before mpirun kills it.
launch_ranks() {
    LAUNCH=()
    [ "$1" -gt 1 ] && LAUNCH=(scripts/preemptible.sh ${MPIRUN:-mpirun} --mca odls_base_sigkill_timeout 20 -np "$1")
}

show_and_run() {
    printf 'command:'
    printf ' %q' "$@"
    printf '\n'
    [ $DRY = 1 ] && { echo "(--dry: not run)"; exit 0; }
    exec "$@"
}
