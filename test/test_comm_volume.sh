#!/usr/bin/env bash
# test_comm_volume.sh: the communication volume of ZeRO stages 0, 1, 2, counted by the CPU runtime's
# NCCL (NCCL_CPU_TRAFFIC, test/cuda_cpu/nccl_cpu.cpp) while the trainer (build/emu/train_gpt2_emu_fp16)
# runs under mpirun, equals the closed form to the byte for the model's parameter count Ψ (padded
# vocabulary; shards padded to P = R·⌈Ψ/R⌉): -z 0 one all-reduce of Ψ gradients a step; -z 1 a
# reduce-scatter of P gradients and an all-gather of P parameters; -z 2 reduces of Ψ to the owners on
# every micro-step and the all-gather; beside them one 16-byte all-reduce a step (loss, squared norm,
# non-finite count), and a checkpoint's broadcast of the fp32 master weights. The three stages send
# the same ring bytes a rank when R divides Ψ (the ZeRO paper's 2Ψ). Behaviour only: no timing.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
if ! command -v mpirun > /dev/null 2>&1; then
    echo "SKIP comm_volume: needs mpirun (apt-get install openmpi-bin libopenmpi-dev)"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
status=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; status=1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gen=$build/test/gen_data
emu=$build/emu/train_gpt2_emu_fp16
L=2 C=64 NH=2 V=301 MAXT=64
$gen model "$dir/model.bin" $L $C $NH $V $MAXT 1 && $gen shard "$dir/train.bin" 20000 $V 2 \
    || { echo "FAIL comm_volume: gen_data"; exit 1; }
Vp=$(( (V + 127) / 128 * 128 ))
psi=$(( Vp * C + MAXT * C + L * (12 * C * C + 13 * C) + 2 * C ))  # wte, wpe, 12 tensors a layer, lnf
X=2          # fp16 gradients and parameters
N=3          # optimizer steps a run
T=32
common=(-e "$dir/model.bin" -i "$dir/train.bin" -t "$T" -v 0 -s 0 -l 1e-3 -x "$N")

# run NAME RANKS ARGS...: the trainer under mpirun with the counter on; leaves $dir/NAME.traffic
run() {
    local name=$1 np=$2
    shift 2
    NCCL_CPU_TRAFFIC="$dir/$name.traffic" timeout 120 mpirun --oversubscribe -np "$np" $emu "${common[@]}" "$@" \
        > "$dir/$name.out" 2>&1 || { fail "comm_volume $name" "mpirun exited with status $?: $(tail -n 2 "$dir/$name.out")"; return 1; }
    grep -q '^model:.*padded '$Vp')' "$dir/$name.out" || { fail "comm_volume $name" "the model line is not V=$V padded $Vp"; return 1; }
    [ "$(grep -c '^nccl_traffic ' "$dir/$name.traffic" 2>/dev/null)" -eq "$np" ] \
        || { fail "comm_volume $name" "expected $np traffic lines, got: $(cat "$dir/$name.traffic" 2>/dev/null)"; return 1; }
}
# field NAME KEY: KEY summed over the ranks' lines; field NAME KEY RANK: one rank's
field() {
    awk -v key="$2" -v rank="${3:-}" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        if (rank == "" || v["rank"] == rank) s += v[key] } END { printf "%.0f", s }' "$dir/$1.traffic"
}
# expect NAME WHAT "KEY=VALUE ..." [RANK]: every listed counter equals its value (summed over ranks
# unless RANK); every kind with no counter listed made no call
expect() {
    local name=$1 what=$2 want=$3 rank=${4:-} bad="" kv k v got
    for kv in $want; do
        k=${kv%%=*} v=${kv#*=}
        got=$(field "$name" "$k" "$rank")
        [ "$got" = "$v" ] || bad="$bad $k=$got (want $v)"
    done
    for k in allreduce reducescatter allgather reduce broadcast; do
        [[ " $want " == *" ${k}_"* ]] && continue
        got=$(field "$name" "${k}_calls")
        [ "$got" = 0 ] || bad="$bad ${k}_calls=$got (want 0)"
    done
    [ -z "$bad" ] && pass "comm_volume $name: $what" || fail "comm_volume $name" "$what:$bad"
}
# grad NAME R: the gradient and parameter ring bytes a rank sends per step, as the sum over ranks
# (the step's 16-byte statistics all-reduce taken out); divide by R for the mean a rank
grad_ring() {
    echo $(( ( $(field "$1" allreduce_sent) + $(field "$1" reducescatter_sent) + $(field "$1" allgather_sent) \
        + $(field "$1" reduce_sent) + $(field "$1" broadcast_sent) - N * 2 * ($2 - 1) * 16 ) / N ))
}

# --- two ranks: Ψ is even, so P = Ψ and every stage sends 2(R-1)/R·Ψ·X a rank -----------------------
R=2
S=$(( (psi + R - 1) / R )); P=$(( S * R ))
if run z0 $R -b 2 -z 0; then
    expect z0 "one all-reduce of Ψ=$psi fp16 gradients + 16 B of step statistics a step, per rank" \
        "allreduce_calls=$((N * 2)) allreduce_bytes=$((N * (psi * X + 16)))" 0
    expect z0 "ring bytes over both ranks: 2(R-1)·(Ψ·X + 16) a step" "allreduce_sent=$((N * 2 * (R - 1) * (psi * X + 16)))"
fi
if run z1 $R -b 2 -z 1; then
    expect z1 "a reduce-scatter of P=$P gradients, an all-gather of P parameters, 16 B of statistics a step, per rank" \
        "reducescatter_calls=$N reducescatter_bytes=$((N * P * X)) allgather_calls=$N allgather_bytes=$((N * P * X)) allreduce_calls=$N allreduce_bytes=$((N * 16))" 1
    expect z1 "ring bytes of rank 0: (R-1)/R·P·X each way, and its half of the statistics' 2(R-1)/R·16" \
        "reducescatter_sent=$((N * (R - 1) * S * X)) allgather_sent=$((N * (R - 1) * S * X)) allreduce_sent=$((N * 16))" 0
fi
if run z2 $R -b 2 -z 2; then
    expect z2 "reduces to the owners totalling Ψ gradients, the all-gather of P, 16 B of statistics a step, per rank" \
        "reduce_bytes=$((N * psi * X)) allgather_calls=$N allgather_bytes=$((N * P * X)) allreduce_calls=$N allreduce_bytes=$((N * 16))" 0
    expect z2 "ring bytes over both ranks: each gradient sent by every rank but its owner, (R-1)·Ψ·X a step" \
        "reduce_sent=$((N * (R - 1) * psi * X)) allgather_sent=$((N * R * (R - 1) * S * X)) allreduce_sent=$((N * 2 * (R - 1) * 16))"
fi
if [ -s "$dir/z0.traffic" ] && [ -s "$dir/z1.traffic" ] && [ -s "$dir/z2.traffic" ]; then
    g0=$(grad_ring z0 $R) g1=$(grad_ring z1 $R) g2=$(grad_ring z2 $R)
    want=$(( 2 * (R - 1) * psi * X ))
    [ "$g0" = "$want" ] && [ "$g1" = "$want" ] && [ "$g2" = "$want" ] \
        && pass "comm_volume: -z 0, 1 and 2 send the same ring bytes a step, $((want / R)) a rank = 2(R-1)/R·Ψ·X (Ψ=$psi)" \
        || fail "comm_volume: ZeRO stages' volume" "ring bytes a step over the ranks: -z 0 $g0, -z 1 $g1, -z 2 $g2, want $want each"
fi
# -z 2 with accumulation: the reduces run on every micro-step, the all-gather once a step.
if run z2acc $R -b 1 -d $((1 * T * R * 2)) -z 2; then
    grep -q '= 2 micro-steps' "$dir/z2acc.out" || fail "comm_volume z2acc" "not 2 micro-steps: $(grep -m1 '^steps:' "$dir/z2acc.out")"
    expect z2acc "2 micro-steps: reduces of 2·Ψ gradients, one all-gather of P a step" \
        "reduce_bytes=$((N * 2 * psi * X)) allgather_calls=$N allgather_bytes=$((N * P * X)) allreduce_calls=$N allreduce_bytes=$((N * 16))" 1
fi

# --- three ranks: 3 does not divide Ψ, the shards are padded; a checkpoint broadcasts the master ---------
R=3
S=$(( (psi + R - 1) / R )); P=$(( S * R ))
[ $P -ne $psi ] || fail "comm_volume" "the model was meant to have Ψ=$psi not divisible by 3"
if run z1r3 $R -b 1 -z 1 -n $N -o "$dir/ck"; then
    [ -f "$dir/ck/model_0000000$N.bin" ] || fail "comm_volume z1r3" "no checkpoint at step $N: $(ls "$dir/ck" | tr '\n' ' ')"
    expect z1r3 "R=3: reduce-scatter and all-gather of the padded P=$P (Ψ=$psi), the final checkpoint's broadcast of Ψ fp32 master weights, per rank" \
        "reducescatter_calls=$N reducescatter_bytes=$((N * P * X)) allgather_calls=$N allgather_bytes=$((N * P * X)) allreduce_calls=$N allreduce_bytes=$((N * 16)) broadcast_bytes=$((psi * 4))" 2
    expect z1r3 "R=3 ring bytes over the ranks: 2(R-1)·P·X a step, the statistics 2(R-1)·16, the broadcast (R-1)·Ψ·4" \
        "reducescatter_sent=$((N * R * (R - 1) * S * X)) allgather_sent=$((N * R * (R - 1) * S * X)) allreduce_sent=$((N * 2 * (R - 1) * 16)) broadcast_sent=$(((R - 1) * psi * 4))"
fi
exit $status
