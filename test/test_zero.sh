#!/usr/bin/env bash
# test_zero.sh: the GPU engine over 2 and 3 ranks (build/test/test_zero_*, under mpirun, NCCL over
# MPI through the CPU runtime): ZeRO stages 0, 1, 2 equal one process; one rank's overflow skips
# the step on every rank; then the trainer itself under mpirun: the same losses as one process,
# rank 0 alone printing, checkpoints per rank that resume on 2 ranks bit for bit and on 1 and 3
# ranks to the same weights, the C engine refused, and a missing file on one rank ending all.
set -u
. "$(dirname "$0")/lib.sh"
need_mpi zero
# One worker thread a rank: the ranks share two cores.
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
# FP32 at 2 and 3 ranks (the model's parameter count is odd: shards are padded); FP16 at 2 ranks
# for loss scaling across ranks.
for run in fp32:2 fp32:3 fp16:2; do
    p=${run%:*}
    np=${run#*:}
    timeout 300 mpirun --oversubscribe -np "$np" "build/test/test_zero_$p" || {
        echo "FAIL zero_${p}_np$np: mpirun exited with status $?"; failed=1; }
done

# --- the trainer under mpirun (build/emu/train_gpt2_emu_fp32) -------------------------------------
emu=build/emu/train_gpt2_emu_fp32
$gen model "$dir/model.bin" 2 64 2 301 64 1 && $gen shard "$dir/train.bin" 40000 301 2 && $gen shard "$dir/val.bin" 4000 301 3 \
    || { echo "FAIL zero: gen_data"; exit 1; }
# -f 0: plain fp32 products (the FP32 build defaults to TF32, as llm.c), so ranks and one process differ
# only in the order of the sums: the 1e-5 and 3e-7 bounds below are fp32 rounding.
common=(-e "$dir/model.bin" -i "$dir/train.bin" -j "$dir/val.bin" -t 32 -v 3 -m 2 -s 0 -l 3e-3 -u 2 -sf 1 -x 6 -f 0)
losses() { grep -o '"train_loss": [^,]*\|"val_loss": [^}]*' "$1" | awk '{print $2}'; }
close() {  # two files of numbers, equal within 1e-5 relative, line by line (and as many)
    paste "$1" "$2" | awk '{ n++; d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > w) w = d }
        END { printf "%d values, worst relative difference %.2g", n, w; exit !(n > 6 && w <= 1e-5) }'
}
$emu "${common[@]}" -b 6 -o "$dir/one" > "$dir/one.out" 2>&1 || fail "zero e2e: one process" "$(tail -n 2 "$dir/one.out")"
losses "$dir/one/log.jsonl" > "$dir/one.losses"
for z in 0 1 2; do
    mpirun --oversubscribe -np 2 $emu "${common[@]}" -b 3 -z $z -o "$dir/z$z" > "$dir/z$z.out" 2>&1 \
        || { fail "zero e2e: mpirun -np 2 -z $z" "$(tail -n 2 "$dir/z$z.out")"; continue; }
    losses "$dir/z$z/log.jsonl" > "$dir/z$z.losses"
    r=$(close "$dir/z$z.losses" "$dir/one.losses") && pass "mpirun -np 2 -z $z (B=3) equals one process with B=6: $r" \
        || fail "mpirun -np 2 -z $z vs one process" "$r"
done
[ "$(grep -cE '^step +[0-9]' "$dir/z1.out")" -eq 6 ] && [ "$(grep -c '"train_loss"' "$dir/z1/log.jsonl")" -eq 6 ] \
    && pass "mpirun -np 2: rank 0 alone prints and logs" || fail "rank 0 alone prints" "$(grep -cE '^step +[0-9]' "$dir/z1.out") step lines"

# Checkpoints: each rank its state shard, rank 0 the model; resume on 2 ranks bit for bit, on 1 and
# on 3 ranks (B*ranks kept) to the same weights within fp32 rounding.
mpirun --oversubscribe -np 2 $emu "${common[@]}" -b 3 -z 1 -n 3 -o "$dir/ck" > "$dir/ck.out" 2>&1 || fail "zero e2e: checkpointed run" "$(tail -n 2 "$dir/ck.out")"
[ -f "$dir/ck/state_00000003.bin" ] && [ -f "$dir/ck/state_00000003.rank001.bin" ] && [ -f "$dir/ck/model_00000003.bin" ] \
    && pass "ZeRO-1 on 2 ranks: one state file per rank, one model file" || fail "zero e2e: checkpoint files" "$(ls "$dir/ck" | tr '\n' ' ')"
for np in 2 1 3; do
    b=$((6 / np))
    rm -rf "$dir/r$np"
    cp -r "$dir/ck" "$dir/r$np"
    rm -f "$dir/r$np"/*_00000006* "$dir/r$np/run_complete"
    mpirun --oversubscribe -np $np $emu "${common[@]}" -b $b -z 1 -n 3 -o "$dir/r$np" -y 1 > "$dir/r$np.out" 2>&1 \
        || { fail "zero e2e: resume on $np ranks" "$(tail -n 2 "$dir/r$np.out")"; continue; }
    if [ $np -eq 2 ]; then
        cmp -s "$dir/ck/model_00000006.bin" "$dir/r2/model_00000006.bin" && cmp -s "$dir/ck/state_00000006.bin" "$dir/r2/state_00000006.bin" &&
            cmp -s "$dir/ck/state_00000006.rank001.bin" "$dir/r2/state_00000006.rank001.bin" \
            && pass "ZeRO-1 on 2 ranks resumed on 2 ranks: final weights and both state shards bit-identical" \
            || fail "zero e2e: resume on 2 ranks" "files differ"
    else
        d=$($gen diff "$dir/r$np/model_00000006.bin" "$dir/ck/model_00000006.bin")
        awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' \
            && pass "ZeRO-1 on 2 ranks resumed on $np rank(s) (B=$b): final weights within $d of continuing on 2" \
            || fail "zero e2e: resume on $np ranks" "weights differ by $d"
    fi
done

# The C engine is one process: under mpirun with 2 ranks it says so and every rank stops.
mpirun --oversubscribe -np 2 ./train_gpt2 "${common[@]}" -b 3 --engine cpu -o "" > /dev/null 2> "$dir/cpu.err"
rc=$?
[ $rc -ne 0 ] && grep -q "rank [01]: the C reference engine cannot run this configuration: the C reference engine is one process" "$dir/cpu.err" \
    && grep -q "./train_gpt2_emu (make emu) runs the GPU engine on this CPU" "$dir/cpu.err" \
    && pass "mpirun -np 2 --engine cpu: refused with a line naming the rank and ./train_gpt2_emu" || fail "C engine under mpirun" "exit $rc: $(head -c 300 "$dir/cpu.err")"
# One rank given a file that does not exist: every rank ends, non-zero, the line names the rank and the file.
start=$(date +%s)
timeout 60 mpirun --oversubscribe -np 1 $emu "${common[@]}" -b 3 -o "" : -np 1 $emu "${common[@]}" -b 3 -o "" \
    -i "$dir/missing_*.bin" > /dev/null 2> "$dir/missing.err"
rc=$?
secs=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $secs -le 10 ] && grep -q "error: rank 1: .*missing_" "$dir/missing.err" \
    && pass "a file missing on rank 1 only: every rank ends in ${secs} s, exit $rc, naming the rank and the file" \
    || fail "missing file on one rank" "exit $rc after ${secs} s: $(head -c 300 "$dir/missing.err")"
exit $failed
