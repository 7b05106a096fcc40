#!/usr/bin/env bash
# test_preempt.sh: preemption under mpirun, with steps far longer than mpirun's kill
# delay. Before, a SIGTERM to mpirun reached the ranks a delay late and SIGKILL one delay later,
# while the ranks finished their step: no checkpoint, no "stopped by" line. Now a stop request
# abandons the step under way at the next micro-step and writes the checkpoint of the last completed
# step; the resumed run must end bit-identical to an unbroken one (final model and every rank's
# state file, every step's loss). Two launches:
#   1. SIGTERM to mpirun itself, with a kill delay of 3 s (the recipes' 20 s would only make this
#      test longer): the ranks get SIGTERM 3 s late and must be done 3 s after that, mid-way
#      through a step of 32 micro-steps. Which step the signal lands in depends on the machine's
#      speed (a step takes 2-6 s on two cores), so the run has 4 steps and the stop may come after
#      step 1, 2 or 3, each checked alike (the test once assumed step 2, and a faster machine let
#      step 2 finish, as the last one, before the delay ran out). The resume is `-y 1` whatever
#      the step (CI's stop once came after step 2, and `-y 2` was refused). The signal may also
#      reach the ranks between two steps (step 2 ends with the checkpoint -n 2 asks for): then no
#      step is under way to drop, the stop line ends at "-y 1", and the checks are the same.
#   2. SIGTERM to scripts/preemptible.sh (the recipes' launch): mpirun gets SIGUSR1 and forwards it
#      at once; FP16 with ZeRO-2, whose per-layer reductions are in flight when the step is dropped;
#      the ranks exit 0 and the script 143.
# Slow (about 3 minutes on two busy cores): .ci/run runs it after make test.
set -u
. "$(dirname "$0")/../lib.sh"
need_mpi preempt
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
$gen model "$dir/model.bin" 2 64 2 301 64 1 && $gen shard "$dir/train.bin" 40000 301 2 ||
    { echo "FAIL preempt: gen_data"; exit 1; }
losses() { grep '"train_loss"' "$1" | sed 's/, "ms".*//'; }
# Steps of 32 micro-steps on each of 2 ranks; the only checkpoint an unbroken run writes is the last.
flags=(-e "$dir/model.bin" -i "$dir/train.bin" -b 3 -t 32 -d 6144 -v 0 -s 0 -l 3e-3 -u 2 -sf 1 -n 2)

# same_run LAST REF OUT: OUT's final files (model, every shard, of step LAST) and losses equal REF's.
same_run() {
    local f
    for f in "$2"/model_0000000$1.bin "$2"/state_0000000$1*.bin; do
        cmp -s "$f" "$3/$(basename "$f")" || return 1
    done
    [ "$(losses "$2/log.jsonl")" = "$(losses "$3/log.jsonl")" ]
}
# Starts CMD... in the background (its output in $dir/NAME.out) and returns PAUSE seconds after
# step 1 is logged.
start_after_step1() {
    local name=$1 pause=$2
    shift 2
    "$@" > "$dir/$name.out" 2>&1 &
    bg=$!
    for _ in $(seq 1 3000); do grep -qE '^step +1/' "$dir/$name.out" 2> /dev/null && break; kill -0 $bg 2> /dev/null || break; sleep 0.1; done
    sleep "$pause"
}

# 1. SIGTERM to mpirun itself.
emu=build/emu/train_gpt2_emu_fp32
timeout 900 mpirun -np 2 $emu "${flags[@]}" -x 4 -z 1 -o "$dir/ref1" > "$dir/ref1.out" 2>&1 || fail "preempt: unbroken run" "$(tail -n 2 "$dir/ref1.out")"
start_after_step1 run1 0 timeout --foreground 900 mpirun --mca odls_base_sigkill_timeout 3 -np 2 $emu "${flags[@]}" -x 4 -z 1 -o "$dir/run1"
kill -TERM $bg
wait $bg
rc=$?
ls "$dir/run1" > "$dir/run1.ls"
k=$(sed -n 's/^stopped by SIGTERM after step \([123]\): .*/\1/p' "$dir/run1.out" | head -n 1)
rc2=none
if [ -n "$k" ]; then
    timeout 900 mpirun -np 2 $emu "${flags[@]}" -x 4 -z 1 -o "$dir/run1" -y 1 > "$dir/run1b.out" 2>&1
    rc2=$?
fi
if [ -n "$k" ] && grep -qE "^stopped by SIGTERM after step $k: checkpoint .*run1/model_0000000$k.bin; resume with the same flags and -y 1( \(step $((k + 1)), under way, was dropped|$)" "$dir/run1.out" &&
    grep -q "state_0000000$k.rank001.bin" "$dir/run1.ls" && [ "$rc2" = 0 ] && same_run 4 "$dir/ref1" "$dir/run1"; then
    pass "SIGTERM to mpirun during a run (kill delay 3 s, steps of 32 micro-steps): checkpoint of step $k written, resumed bit-identical"
else
    fail "SIGTERM to mpirun" "mpirun exit $rc, resume exit $rc2; files after the stop: $(tr '\n' ' ' < "$dir/run1.ls"); $(grep -E 'stopped|error' "$dir/run1.out" "$dir/run1b.out" 2> /dev/null | head -n 3)"
fi

# 2. SIGTERM to scripts/preemptible.sh, as the recipes launch: FP16, ZeRO-2.
emu=build/emu/train_gpt2_emu_fp16
timeout 600 mpirun -np 2 $emu "${flags[@]}" -x 2 -z 2 -o "$dir/ref2" > "$dir/ref2.out" 2>&1 || fail "preempt: unbroken FP16 run" "$(tail -n 2 "$dir/ref2.out")"
start_after_step1 run2 1 timeout --foreground 600 scripts/preemptible.sh mpirun --mca odls_base_sigkill_timeout 20 -np 2 $emu "${flags[@]}" -x 2 -z 2 -o "$dir/run2"
kill -TERM $bg
wait $bg
rc=$?
timeout 600 mpirun -np 2 $emu "${flags[@]}" -x 2 -z 2 -o "$dir/run2" -y 1 > "$dir/run2b.out" 2>&1
rc2=$?
if [ $rc -eq 143 ] && grep -q "^stopped by SIGUSR1 after step 1: checkpoint .*run2/model_00000001.bin; resume with the same flags and -y 1 (step 2, under way, was dropped" "$dir/run2.out" &&
    [ $rc2 -eq 0 ] && same_run 2 "$dir/ref2" "$dir/run2"; then
    pass "SIGTERM to scripts/preemptible.sh (FP16, ZeRO-2): SIGUSR1 forwarded at once, the step dropped, exit 143, resumed bit-identical"
else
    fail "SIGTERM to preemptible.sh" "exit $rc, resume exit $rc2: $(grep -E 'stopped|error' "$dir/run2.out" "$dir/run2b.out" | head -n 3)"
fi
exit $failed
