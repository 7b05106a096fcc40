#!/usr/bin/env bash
# test_comm_volume.sh: the communication volume of ZeRO stages 0-3, counted by the CPU runtime's
# NCCL (NCCL_CPU_TRAFFIC, test/cuda_cpu/nccl_cpu.cpp) while the trainer (build/emu/train_gpt2_emu_fp16)
# runs under mpirun, equals the closed form to the byte for the model's parameter count Ψ (padded
# vocabulary; shards padded to P = R·⌈Ψ/R⌉): with --overlap 0, -z 0 one all-reduce of Ψ gradients a
# step and -z 1 a reduce-scatter of P gradients and an all-gather of P parameters; by default (the
# gradients reduced layer by layer beside the last backward) -z 0 all-reduces of Ψ in all, -z 1
# reduces of Ψ to the owners and, instead of the all-gather, broadcasts of the Ψ parameters from
# their owners piece by piece (beside the next forward), once a step; -z 2 reduces of Ψ to the owners on
# every micro-step and the all-gather; -z 3 those reduces and, instead of the all-gather, broadcasts
# of the parameters from their owners before each layer is used; beside them one 16-byte all-reduce a step (loss, squared norm,
# non-finite count), and a checkpoint's broadcast of the fp32 master weights. The three stages send
# the same ring bytes a rank when R divides Ψ (the ZeRO paper's 2Ψ).
# And the planner's communication (`--plan --json`, common/comm_plan.c) equals the count: for stages
# 0, 1, 2, 3 at 2 and 3 ranks, with and without accumulation, --offload grads, and -z 3 with
# --offload optimizer and grads (the same collectives as -z 3 on the device), every rank's bytes
# sent per kind, the calls and the data bytes, and what a rank receives (what the rank before it in
# the ring sends), and without checkpoints the bytes each rank copies down and up its host link
# (CUDA_CPU_HOST_TRAFFIC: none without offload); --link parsing and refusals; the time column is bytes over the link's bandwidth.
# Behaviour only: no timing.
set -u
. "$(dirname "$0")/lib.sh"
build=${BUILD:-build}
need_mpi comm_volume
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
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
    NCCL_CPU_TRAFFIC="$dir/$name.traffic" CUDA_CPU_HOST_TRAFFIC="$dir/$name.host" timeout 120 mpirun --oversubscribe -np "$np" $emu "${common[@]}" "$@" \
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
if run z0 $R -b 2 -z 0 --overlap 0; then
    expect z0 "one all-reduce of Ψ=$psi fp16 gradients + 16 B of step statistics a step, per rank" \
        "allreduce_calls=$((N * 2)) allreduce_bytes=$((N * (psi * X + 16)))" 0
    expect z0 "ring bytes over both ranks: 2(R-1)·(Ψ·X + 16) a step" "allreduce_sent=$((N * 2 * (R - 1) * (psi * X + 16)))"
fi
if run z1 $R -b 2 -z 1 --overlap 0; then
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
# The default: stages 0 and 1 reduce each layer's gradients (12 tensors a layer, then the embeddings
# and the final LayerNorm) beside the step's last backward: the same data bytes and ring bytes.
if run z0ov $R -b 2 -z 0; then
    expect z0ov "all-reduces of Ψ=$psi fp16 gradients in $((12 * L + 2)) pieces + 16 B of statistics a step, per rank" \
        "allreduce_calls=$((N * (12 * L + 3))) allreduce_bytes=$((N * (psi * X + 16)))" 0
fi
if run z1ov $R -b 2 -z 1; then
    expect z1ov "reduces to the owners totalling Ψ gradients, broadcasts of Ψ parameters from their owners (no all-gather), 16 B of statistics a step, per rank" \
        "reduce_bytes=$((N * psi * X)) broadcast_bytes=$((N * psi * X)) allreduce_calls=$N allreduce_bytes=$((N * 16))" 0
fi
if [ -s "$dir/z0ov.traffic" ] && [ -s "$dir/z1ov.traffic" ]; then
    g0=$(grad_ring z0ov $R) g1=$(grad_ring z1ov $R)
    want=$(( 2 * (R - 1) * psi * X ))
    [ "$g0" = "$want" ] && [ "$g1" = "$want" ] \
        && pass "comm_volume: -z 0 and 1 reducing by layer send the same ring bytes a step as after backward, 2(R-1)/R·Ψ·X a rank" \
        || fail "comm_volume: overlapped stages' volume" "ring bytes a step over the ranks: -z 0 $g0, -z 1 $g1, want $want each"
fi
# -z 2 with accumulation: the reduces run on every micro-step, the all-gather once a step.
if run z2acc $R -b 1 -d $((1 * T * R * 2)) -z 2; then
    grep -q '= 2 micro-steps' "$dir/z2acc.out" || fail "comm_volume z2acc" "not 2 micro-steps: $(grep -m1 '^steps:' "$dir/z2acc.out")"
    expect z2acc "2 micro-steps: reduces of 2·Ψ gradients, one all-gather of P a step" \
        "reduce_bytes=$((N * 2 * psi * X)) allgather_calls=$N allgather_bytes=$((N * P * X)) allreduce_calls=$N allreduce_bytes=$((N * 16))" 1
fi

# -z 3: the parameters gathered from their owners (broadcasts) before use. At L=2 forward gathers the
# embeddings, the final LayerNorm and both layers once, and backward finds both layers still in
# their buffers: Ψ parameters a micro-step; the gradients reduced as at stage 2; no all-gather.
if run z3 $R -b 2 -z 3; then
    expect z3 "broadcasts of Ψ parameters from their owners, reduces of Ψ gradients, 16 B of statistics a step, per rank" \
        "broadcast_bytes=$((N * psi * X)) reduce_bytes=$((N * psi * X)) allreduce_calls=$N allreduce_bytes=$((N * 16))" 0
    expect z3 "ring bytes over both ranks: each gathered parameter sent once (by its owner), each gradient by the non-owner" \
        "broadcast_sent=$((N * psi * X)) reduce_sent=$((N * (R - 1) * psi * X)) allreduce_sent=$((N * 2 * (R - 1) * 16))"
fi

# plan_matches NAME RANKS ARGS...: the planner's communication for the run's flags (--plan --json
# --ranks RANKS) equals what the counter counted over the run's N steps (and its checkpoints).
plan_matches() {
    local name=$1 np=$2
    shift 2
    local ckpts=0
    [ -f "$dir/$name.ckpts" ] && ckpts=$(cat "$dir/$name.ckpts")
    $emu --plan --json "${common[@]}" "$@" --ranks "$np" > "$dir/$name.plan.json" 2> "$dir/$name.plan.err" \
        || { fail "comm_volume $name plan" "--plan --json failed: $(cat "$dir/$name.plan.err")"; return; }
    local r
    r=$("$PY" - "$dir/$name.plan.json" "$dir/$name.traffic" "$N" "$ckpts" "$dir/$name.host" <<'PYEOF'
import json, sys
plan = json.load(open(sys.argv[1]))["communication"]
steps, ckpts = int(sys.argv[3]), int(sys.argv[4])
counted = {}
for line in open(sys.argv[2]):
    kv = dict(f.split("=") for f in line.split()[1:])
    counted[int(kv["rank"])] = {k: int(v) for k, v in kv.items()}
R = plan["ranks"]
bad = []
if sorted(counted) != list(range(R)): bad.append(f"ranks counted {sorted(counted)}, planned {R}")
kinds = ["allreduce", "reducescatter", "allgather", "reduce", "broadcast"]
def per_run(item, key):
    times = {"step": steps, "micro_step": steps * plan["micro_steps"], "checkpoint": ckpts}[item["each"]]
    return item[key] * times
sent_total = {}
for br in plan["by_rank"]:
    r = br["rank"]
    for k in kinds:
        want = steps * br["sent_per_step_by_kind"].get(k, 0) + (ckpts * br["checkpoint_sent"] if k == "broadcast" else 0)
        got = counted[r][k + "_sent"]
        if got != want: bad.append(f"rank {r} {k} sent {got}, planned {want}")
        # calls and data bytes are the same on every rank: the plan's items (rank 0's)
        for key in ("calls", "bytes"):
            want = sum(per_run(i, key) for i in plan["items"] if i["kind"] == k)
            got = counted[r][f"{k}_{key}"]
            if got != want: bad.append(f"rank {r} {k} {key} {got}, planned {want}")
    sent_total[r] = steps * br["sent_per_step"] + ckpts * br["checkpoint_sent"]
    if sent_total[r] != sum(counted[r][k + "_sent"] for k in kinds): bad.append(f"rank {r}: sent per step x steps differs from the count")
for br in plan["by_rank"]:
    r = br["rank"]
    got = sum(counted[(r - 1) % R][k + "_sent"] for k in kinds)
    want = steps * br["received_per_step"] + ckpts * br["checkpoint_received"]
    if got != want: bad.append(f"rank {r} receives {want} planned, rank {(r - 1) % R} sent {got}")
# The host link (offload's copies between device and pinned host memory, counted by the runtime
# per process: compared as a multiset over the ranks); a checkpoint's staging copies are not planned.
if ckpts == 0:
    try:
        lines = [dict(f.split("=") for f in l.split()[1:]) for l in open(sys.argv[5]) if l.startswith("host_traffic ")]
    except OSError:
        lines = []
    got = sorted((int(l["to_host_bytes"]), int(l["to_device_bytes"])) for l in lines)
    want = sorted((steps * br["host_down_per_step"], steps * br["host_up_per_step"]) for br in plan["by_rank"])
    if got != want: bad.append(f"host copies (down, up) by rank counted {got}, planned {want}")
# the time column: a rank's bytes a step over the link's bandwidth
if abs(plan["comm_seconds"] - plan["sent_per_step"] / plan["link"]["bytes_per_s"]) > 1e-12: bad.append("comm_seconds is not bytes / bandwidth")
host = f", {plan['host_down_per_step']} B down and {plan['host_up_per_step']} B up the host link" if plan["host_down_per_step"] else ""
print("; ".join(bad) if bad else f"{plan['sent_per_step']} B sent a step by rank 0{host}, {plan['micro_steps']} micro-step(s), " +
      ", ".join(f"{k} {sum(i['calls'] for i in plan['items'] if i['kind'] == k)}" for k in kinds
                if any(i['kind'] == k and i['each'] != 'checkpoint' for i in plan['items'])) + " calls a (micro-)step")
sys.exit(1 if bad else 0)
PYEOF
) && pass "comm_volume $name: the planner's bytes equal the count, every rank and kind: $r" || fail "comm_volume $name planner" "$r"
    # The start-up report prints the same plan: rank 0's bytes a step, in its table's total row.
    local want got
    want=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["communication"]["sent_per_step"])' "$dir/$name.plan.json")
    got=$(grep '^| between ranks, per optimizer step' "$dir/$name.out" | awk -F'|' '{ print $8 + 0 }')
    [ "$got" = "$want" ] || fail "comm_volume $name start-up report" "its communication table says $got bytes a step, the plan $want"
}
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
plan_matches z0 2 -b 2 -z 0 --overlap 0
plan_matches z1 2 -b 2 -z 1 --overlap 0
plan_matches z0ov 2 -b 2 -z 0
plan_matches z1ov 2 -b 2 -z 1
plan_matches z2 2 -b 2 -z 2
plan_matches z2acc 2 -b 1 -d $((1 * T * 2 * 2)) -z 2
for z in 0 1; do
    run z${z}acc 2 -b 1 -d $((T * 2 * 2)) -z $z && plan_matches z${z}acc 2 -b 1 -d $((T * 2 * 2)) -z $z
    run z${z}acc0 2 -b 1 -d $((T * 2 * 2)) -z $z --overlap 0 && plan_matches z${z}acc0 2 -b 1 -d $((T * 2 * 2)) -z $z --overlap 0
done
# -z 3 with accumulation; and on 4 layers at recompute level 3 (segments of 2): backward gathers the
# first segment's layers again for its recompute.
plan_matches z3 2 -b 2 -z 3
run z3acc 2 -b 1 -d $((T * 2 * 2)) -z 3 && plan_matches z3acc 2 -b 1 -d $((T * 2 * 2)) -z 3
$gen model "$dir/model4.bin" 4 $C $NH $V $MAXT 1 || fail "comm_volume" "gen_data model4"
run z3l4 2 -b 1 -z 3 -r 3 --recompute-every 2 -e "$dir/model4.bin" \
    && plan_matches z3l4 2 -b 1 -z 3 -r 3 --recompute-every 2 -e "$dir/model4.bin"
# --offload grads at stage 0: the gradients all-reduced bucket by bucket on every micro-step.
run z0offacc 2 -b 1 -d $((T * 2 * 2)) -z 0 --offload grads && plan_matches z0offacc 2 -b 1 -d $((T * 2 * 2)) -z 0 --offload grads
# -z 3 with the optimizer on the host: the same collectives as on the device, call for call (the
# updated shard goes back into the device's parameter shard by a host copy, not an all-gather; with
# offload grads each bucket piece is reduced in place, then copied down).
for off in optimizer grads; do
    if run z3${off}acc 2 -b 1 -d $((T * 2 * 2)) -z 3 --offload $off; then
        plan_matches z3${off}acc 2 -b 1 -d $((T * 2 * 2)) -z 3 --offload $off
        [ -s "$dir/z3acc.traffic" ] && { cmp -s <(sort "$dir/z3acc.traffic") <(sort "$dir/z3${off}acc.traffic") \
            && pass "comm_volume z3${off}acc: -z 3 --offload $off counts the same collectives, call for call, as -z 3 on the device" \
            || fail "comm_volume z3${off}acc" "its traffic differs from -z 3's: $(sort "$dir/z3${off}acc.traffic" | tr '\n' ' ')"; }
    fi
done

# --- three ranks: 3 does not divide Ψ, the shards are padded; a checkpoint broadcasts the master ---------
R=3
S=$(( (psi + R - 1) / R )); P=$(( S * R ))
[ $P -ne $psi ] || fail "comm_volume" "the model was meant to have Ψ=$psi not divisible by 3"
if run z1r3 $R -b 1 -z 1 --overlap 0 -n $N -o "$dir/ck"; then
    [ -f "$dir/ck/model_0000000$N.bin" ] || fail "comm_volume z1r3" "no checkpoint at step $N: $(ls "$dir/ck" | tr '\n' ' ')"
    expect z1r3 "R=3: reduce-scatter and all-gather of the padded P=$P (Ψ=$psi), the final checkpoint's broadcast of Ψ fp32 master weights, per rank" \
        "reducescatter_calls=$N reducescatter_bytes=$((N * P * X)) allgather_calls=$N allgather_bytes=$((N * P * X)) allreduce_calls=$N allreduce_bytes=$((N * 16)) broadcast_bytes=$((psi * 4))" 2
    expect z1r3 "R=3 ring bytes over the ranks: 2(R-1)·P·X a step, the statistics 2(R-1)·16, the broadcast (R-1)·Ψ·4" \
        "reducescatter_sent=$((N * R * (R - 1) * S * X)) allgather_sent=$((N * R * (R - 1) * S * X)) allreduce_sent=$((N * 2 * (R - 1) * 16)) broadcast_sent=$(((R - 1) * psi * 4))"
    echo 1 > "$dir/z1r3.ckpts"
    plan_matches z1r3 3 -b 1 -z 1 --overlap 0 -n $N -o "$dir/ck"
fi
run z1r3ov 3 -b 1 -z 1 && plan_matches z1r3ov 3 -b 1 -z 1
for z in 0 2; do
    run z${z}r3 3 -b 1 -z $z && plan_matches z${z}r3 3 -b 1 -z $z
done
run z3r3ck 3 -b 1 -z 3 -n $N -o "$dir/ck3" && echo 1 > "$dir/z3r3ck.ckpts" && plan_matches z3r3ck 3 -b 1 -z 3 -n $N -o "$dir/ck3"
for z in 0 1 2 3; do
    run z${z}r3acc 3 -b 1 -d $((T * 3 * 2)) -z $z && plan_matches z${z}r3acc 3 -b 1 -d $((T * 3 * 2)) -z $z
done
# -z 3 with offload at 3 ranks: offload grads with accumulation; offload optimizer with a checkpoint
# (its fp32 master weights broadcast from each rank's host copy through the device staging buffer).
run z3r3ogacc 3 -b 1 -d $((T * 3 * 2)) -z 3 --offload grads && plan_matches z3r3ogacc 3 -b 1 -d $((T * 3 * 2)) -z 3 --offload grads
run z3r3offck 3 -b 1 -z 3 --offload optimizer -n $N -o "$dir/ck3o" && echo 1 > "$dir/z3r3offck.ckpts" \
    && plan_matches z3r3offck 3 -b 1 -z 3 --offload optimizer -n $N -o "$dir/ck3o"

# --- --link: the names, a number of GB/s, refusals (one line naming --link, exit 1) ------------------
plan_link() { $emu --plan --json "${common[@]}" -b 2 -z 1 --ranks 2 "$@" 2>&1; }
for l in "nvlink 450000000000" "pcie 25000000000" "ib 50000000000" "100 100000000000" "12.5 12500000000"; do
    set -- $l
    got=$(plan_link --link "$1" | "$PY" -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["communication"]["link"]["bytes_per_s"])' 2>&1)
    [ "$got" = "$2" ] && pass "--link $1: $2 bytes/s" || fail "--link $1" "got '$got', expected $2"
done
got=$(plan_link | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["communication"]["link"]["name"])' 2>&1)
[ "$got" = nvlink ] && pass "--link defaults to nvlink" || fail "--link default" "got '$got'"
for l in "" fast 0 -5 1e400 nan 100GB 200000; do
    out=$(plan_link --link "$l")
    rc=$?
    [ $rc = 1 ] && [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] && [[ $out == *--link* ]] \
        && pass "--link '$l' refused: $out" || fail "--link '$l'" "exit $rc, expected 1 and one line naming --link: $out"
done
# The time column by arithmetic: -z 1 at 2 ranks sends (R-1)·S·X twice and 16 B of statistics a
# step, here P=$psi even: S = Ψ/2; at 100 GB/s that is (Ψ·2 + 16) / 1e11 seconds.
want=$(( psi * X + 16 ))
plan_link --link 100 > "$dir/link100.json"
got=$("$PY" -c 'import json,sys; c = json.load(open(sys.argv[1]))["communication"]; print(c["sent_per_step"], "%.6f" % (c["comm_seconds"] * 1e6))' "$dir/link100.json")
wantus=$(awk -v b=$want 'BEGIN { printf "%.6f", b / 1e11 * 1e6 }')
[ "$got" = "$want $wantus" ] && pass "time column: $want B at 100 GB/s = $wantus us" || fail "time column" "got '$got', want '$want $wantus'"
$emu --plan "${common[@]}" -b 2 -z 1 --ranks 2 --link 100 > "$dir/link100.txt" 2>&1
row=$(grep '^| between ranks, per optimizer step' "$dir/link100.txt" | awk -F'|' '{ gsub(/ /, "", $9); gsub(/ /, "", $10); print $8 + 0, $10 }')
wantms=$(awk -v b=$want 'BEGIN { printf "%.3f", b / 1e11 * 1e3 }')
[ "$row" = "$want $wantms" ] && pass "--plan's table: $want B sent a step, $wantms ms at 100 GB/s" || fail "--plan's table" "row '$row', want '$want $wantms'"
exit $failed
