#!/usr/bin/env bash
# test_zero3.sh: ZeRO-3 (-z 3: each rank keeps its shard of the parameters and gathers each layer's
# before using it) over 2 and 3 ranks, under mpirun, NCCL over MPI through the CPU runtime:
#   - build/test/test_zero_{fp32,fp16} 3: the engine through its contract equals one process taking
#     the same global batch (every step's loss and gradient norm; FP32 within 1e-5, FP16 within its
#     rounding), at 1 and 2 micro-steps and at recompute levels 1, 2, 3 (segments of 1 and 2 layers);
#     a NaN on one rank skips the step on every rank (FP16 too, and with --offload optimizer and
#     grads); checkpoints resume bit for bit on as many ranks and in one process within rounding; a
#     rank's floatX parameters are its shard;
#   - the trainer: -z 3 on 2 ranks (-r 3, segments of 2 layers) and on 3 ranks, with accumulation,
#     equals one process step by step within 1e-5 (FP32: the sums differ only in their order); FP16
#     trains on 2 ranks; checkpoints of -z 3 on 2 ranks resume on 2 ranks bit for bit, on 3 ranks
#     (-z 3) and on 1 (-z 0) to the same weights within 1e-5;
#   - -z 3 with --offload optimizer and --offload grads (AdamW of the rank's shard on its CPU, the
#     updated floatX shard copied back into the device's parameter shard) on 2 and 3 ranks, with
#     accumulation, equals one process step by step within 1e-5; a checkpoint of -z 3 --offload
#     optimizer on 2 ranks resumes on 2 ranks bit for bit and on 3 ranks (-z 3 --offload grads)
#     within 1e-5 of continuing on 2.
# (The plan = allocation checks of -z 3 are in test_memory_plan.sh, its communication against the
# counted traffic in test_comm_volume.sh, its stream synchronization in test_stream_sync.sh.)
set -u
. "$(dirname "$0")/lib.sh"
need_mpi zero3
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1

# --- the engine through its contract (test/test_zero.cu, stage 3) ---------------------------------
for run in fp32:2:3 fp32:3:3 "fp16:2:3 basic"; do
    p=${run%%:*}
    rest=${run#*:}
    np=${rest%%:*}
    args=${rest#*:}
    # shellcheck disable=SC2086
    timeout 900 mpirun --oversubscribe -np "$np" "build/test/test_zero_$p" $args || {
        echo "FAIL zero3_${p}_np$np: mpirun exited with status $?"; failed=1; }
done

# --- the trainer under mpirun --------------------------------------------------------------------
emu=build/emu/train_gpt2_emu_fp32
# 4 layers: level 3 with segments of 2 layers has a segment boundary inside the model.
$gen model "$dir/model.bin" 4 32 2 301 32 1 > /dev/null && $gen shard "$dir/train.bin" 40000 301 2 > /dev/null \
    || { echo "FAIL zero3: gen_data"; exit 1; }
T=32
steps=4
# Two micro-steps a step whatever the rank count: 12 sequences a step.
# -f 0: plain fp32 products (the FP32 build defaults to TF32, as llm.c), so the 1e-5 bound is fp32 rounding.
common=(-e "$dir/model.bin" -i "$dir/train.bin" -t $T -v 0 -s 0 -l 3e-3 -u 2 -sf 1 -d $((12 * T)) -f 0)
losses() { grep -o '"train_loss": [^,}]*' "$1" | awk '{print $2}'; }
# close A B N: two files of N numbers each, equal within 1e-5 relative, line by line
close() {
    paste "$1" "$2" | awk -v want="$3" '{ n++; d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > w) w = d }
        END { printf "%d steps, worst relative difference %.2g", n, w; exit !(n == want && w <= 1e-5) }'
}
$emu "${common[@]}" -b 6 -x $steps -o "$dir/one" > "$dir/one.out" 2>&1 || fail "zero3 e2e: one process" "$(tail -n 2 "$dir/one.out")"
losses "$dir/one/log.jsonl" > "$dir/one.losses"
# name ranks B flags...
e2e() {
    local name=$1 np=$2 b=$3
    shift 3
    timeout 600 mpirun --oversubscribe -np "$np" $emu "${common[@]}" -b "$b" -x $steps -z 3 -o "$dir/$name" "$@" \
        > "$dir/$name.out" 2>&1 || { fail "zero3 e2e: mpirun -np $np -z 3 $*" "$(tail -n 2 "$dir/$name.out")"; return; }
    grep -q '= 2 micro-steps' "$dir/$name.out" || { fail "zero3 e2e $name" "not 2 micro-steps a step"; return; }
    losses "$dir/$name/log.jsonl" > "$dir/$name.losses"
    local r
    r=$(close "$dir/$name.losses" "$dir/one.losses" $steps) \
        && pass "mpirun -np $np -z 3 -b $b $* (2 micro-steps) equals one process with -b 6: $r" \
        || fail "mpirun -np $np -z 3 -b $b $* vs one process" "$r"
}
e2e np2r3 2 3 -r 3 --recompute-every 2
e2e np3 3 2 -r 0
# With the optimizer on the host: each rank's AdamW on its CPU threads, its floatX shard copied back
# into the device's shard (the next forward gathers it); with offload grads the buckets' reduced
# pieces summed on the host (level 3 re-gathering a segment's layers meanwhile).
e2e np2off 2 3 --offload optimizer
e2e np3off 3 2 --offload optimizer -r 2
e2e np2og 2 3 --offload grads -r 3 --recompute-every 2
e2e np3og 3 2 --offload grads -r 0

# FP16 on 2 ranks: trains (the loss falls), its loss scale in the log.
timeout 600 mpirun --oversubscribe -np 2 build/emu/train_gpt2_emu_fp16 "${common[@]}" -b 3 -x $steps -z 3 -o "$dir/fp16" \
    > "$dir/fp16.out" 2>&1 || fail "zero3 e2e: FP16 -z 3 on 2 ranks" "$(tail -n 2 "$dir/fp16.out")"
losses "$dir/fp16/log.jsonl" > "$dir/fp16.losses"
r=$(awk 'NR == 1 { a = $1 } { b = $1; n++ } END { printf "%d steps, loss %s -> %s", n, a, b; exit !(n == 4 && b < a && b == b) }' "$dir/fp16.losses") \
    && pass "FP16 -z 3 on 2 ranks trains: $r" || fail "FP16 -z 3 on 2 ranks" "$r"

# Checkpoints: each rank its state shard (m, v), the model file the master weights gathered from
# every rank's shard; resumed on 2 ranks bit for bit, on 3 ranks and on one process (B*ranks kept)
# to the same weights within fp32 rounding.
timeout 600 mpirun --oversubscribe -np 2 $emu "${common[@]}" -b 3 -x $steps -z 3 -n 2 -o "$dir/ck" > "$dir/ck.out" 2>&1 \
    || fail "zero3 e2e: checkpointed run" "$(tail -n 2 "$dir/ck.out")"
[ -f "$dir/ck/state_00000002.bin" ] && [ -f "$dir/ck/state_00000002.rank001.bin" ] && [ -f "$dir/ck/model_00000002.bin" ] \
    && pass "ZeRO-3 on 2 ranks: one state file per rank, one model file" || fail "zero3 e2e: checkpoint files" "$(ls "$dir/ck" | tr '\n' ' ')"
# resume_from SRC OUT NP WHAT TAG FLAGS...: the checkpoint dir SRC copied to OUT without its last
# step's files, resumed there on NP ranks with FLAGS; on 2 ranks the final model file and both state
# shards must equal SRC's byte for byte, on any other count the final weights within 1e-5 (fp32
# sums in another order). WHAT names the run in the messages, TAG the resume's flags.
resume_from() {
    local src=$1 out=$2 np=$3 what=$4 tag=$5
    shift 5
    rm -rf "$dir/$out"
    cp -r "$dir/$src" "$dir/$out"
    rm -f "$dir/$out"/*_0000000$steps* "$dir/$out/run_complete"
    timeout 600 mpirun --oversubscribe -np $np $emu "${common[@]}" "$@" -x $steps -n 2 -o "$dir/$out" -y 1 \
        > "$dir/$out.out" 2>&1 || { fail "zero3 e2e: $what resumed on $np ranks" "$(tail -n 2 "$dir/$out.out")"; return; }
    if [ $np -eq 2 ]; then
        cmp -s "$dir/$src/model_0000000$steps.bin" "$dir/$out/model_0000000$steps.bin" &&
            cmp -s "$dir/$src/state_0000000$steps.bin" "$dir/$out/state_0000000$steps.bin" &&
            cmp -s "$dir/$src/state_0000000$steps.rank001.bin" "$dir/$out/state_0000000$steps.rank001.bin" \
            && pass "$what resumed on 2 ranks: final weights and both state shards bit-identical" \
            || fail "zero3 e2e: $what resumed on 2 ranks" "files differ"
    else
        local d
        d=$($gen diff "$dir/$out/model_0000000$steps.bin" "$dir/$src/model_0000000$steps.bin")
        awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' \
            && pass "$what resumed on $np rank(s) with $tag: final weights within $d of continuing on 2" \
            || fail "zero3 e2e: $what resumed on $np ranks" "weights differ by $d"
    fi
}
for np in 2 3 1; do
    b=$((6 / np))
    z=3
    [ $np = 1 ] && z=0
    resume_from ck r$np $np "ZeRO-3 on 2 ranks" "-z $z (B=$b)" -b $b -z $z
done

# With the optimizer on the host: the checkpoint's state shards come from host memory, the model
# file's master weights from the device's parameter shard (FP32: the shard is the master); resumed
# on 2 ranks bit for bit, on 3 ranks with --offload grads within fp32 rounding of continuing on 2.
timeout 600 mpirun --oversubscribe -np 2 $emu "${common[@]}" -b 3 -x $steps -z 3 --offload optimizer -n 2 -o "$dir/cko" \
    > "$dir/cko.out" 2>&1 || fail "zero3 e2e: checkpointed run with --offload optimizer" "$(tail -n 2 "$dir/cko.out")"
d=$($gen diff "$dir/cko/model_0000000$steps.bin" "$dir/ck/model_0000000$steps.bin")
awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' \
    && pass "ZeRO-3 --offload optimizer on 2 ranks: final weights within $d of the optimizer on the device" \
    || fail "zero3 e2e: --offload optimizer vs on the device" "weights differ by $d"
for case in "2 optimizer" "3 grads"; do
    set -- $case
    np=$1 off=$2 b=$((6 / $1))
    resume_from cko ro$np $np "ZeRO-3 --offload optimizer on 2 ranks" "--offload $off (B=$b)" -b $b -z 3 --offload $off
done
exit $failed
