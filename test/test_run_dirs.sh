#!/usr/bin/env bash
# test_run_dirs.sh: README's commands one after another in one working dir, as a newcomer types
# them: `./train_gpt2` stopped by Ctrl-C (SIGINT) after a few steps, then `./train_gpt2 -x 3`,
# `./train_gpt2_emu -x 3`, `mpirun -np 2 ./train_gpt2_emu -x 2 -z 1` (the emulated GPU's runs cut to
# one step, the property is not in the step count) and `./train_gpt2 -y 1`. All
# take the built-in run's preset, -o out among it: each fresh run writes to the first of out, out-2,
# out-3, ... that holds no run (saying so), and trains; -y 1 finds the first run in out and resumes
# it (stopped again after a step: its whole epoch is test_default_run.sh's). An -o given keeps
# today's protection (another run's checkpoints there are one error line).
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
require ./train_gpt2
root=$PWD
mkdir -p "$dir/cwd"
cd "$dir/cwd"
NOTOK=$dir/no_tokenizer.bin  # a -K that does not exist: the byte-level corpus, whatever data/vocab holds
emu=$root/build/emu/train_gpt2_emu_fp16

# run_until N OUT ARGS...: the trainer in the background, SIGINT once step N is printed (a hang guard
# of 5 minutes, not a speed check); its exit status.
run_until() {
    local n=$1 out=$2 pid rc
    shift 2
    "$@" > "$out" 2>&1 &
    pid=$!
    for _ in $(seq 1 3000); do
        grep -qE "^step +$n/" "$out" 2> /dev/null && break
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
    done
    kill -INT "$pid" 2> /dev/null
    wait "$pid"
}

# 1. The default run, stopped after step 3: its checkpoint in out.
run_until 3 "$dir/first.out" "$root/train_gpt2" -K "$NOTOK"
rc=$?
[ $rc = 130 ] && grep -q "^stopped by SIGINT after step [0-9]*: checkpoint out/model_" "$dir/first.out" \
    && pass "./train_gpt2, Ctrl-C after step 3: its checkpoint in out/" || fail "the first run" "exit $rc: $(tail -n 2 "$dir/first.out")"
first_step=$(sed -n 's/^stopped by SIGINT after step \([0-9]*\):.*/\1/p' "$dir/first.out")

# fresh NAME OUTDIR TRAINER ARGS...: exit 0, trained to its last step, logged in OUTDIR, and the line
# saying why not out.
fresh() {
    local name=$1 want=$2
    shift 2
    "$@" -K "$NOTOK" > "$dir/$want.out" 2>&1
    local rc=$?
    if [ $rc = 0 ] && grep -q "^output: the built-in run's out .*; this run writes to $want " "$dir/$want.out" &&
        grep -qE '^step +[0-9]+/[0-9]+ ' "$dir/$want.out" && [ -f "$want/run_complete" ]; then
        pass "$name: exit 0, trained, in $want/ ($(grep -m1 "^output: the built-in run's out" "$dir/$want.out" | sed 's/^output: the built-in run.s out //; s/;.*//'))"
    else
        fail "$name" "exit $rc: $(grep -aE '^(output|error)' "$dir/$want.out" | head -n 2 | tr '\n' ' ')"
    fi
}
fresh "./train_gpt2 -x 3" out-2 "$root/train_gpt2" -x 3 -m 2
if [ -x "$emu" ]; then
    # On the emulated GPU (a step takes a second or more there): one step, one val batch, no sample.
    fresh "./train_gpt2_emu -x 1" out-3 "$emu" -x 1 -m 1 -s 0
    grep -q "^recompute: level 0 " "$dir/out-3.out" && pass "the emulated GPU trainer takes the preset's -r 0 (keep every activation)" ||
        fail "emulated -r" "$(grep -m1 '^recompute' "$dir/out-3.out")"
    if have_mpi; then
        fresh "mpirun -np 2 ./train_gpt2_emu -x 1 -z 1" out-4 mpirun --oversubscribe -np 2 "$emu" -x 1 -z 1 -m 1 -s 0
    else
        echo "SKIP mpirun -np 2 ./train_gpt2_emu: needs mpirun and mpicc"
    fi
else
    echo "SKIP ./train_gpt2_emu: $emu is not built (make emu)"
fi

# 5. -y 1 with the first run's flags: it resumes out's run (stopped again once it has trained a step).
run_until $((first_step + 1)) "$dir/resume.out" "$root/train_gpt2" -K "$NOTOK" -y 1
rc=$?
[ $rc = 130 ] && grep -q "^resume: step $first_step from out/model_" "$dir/resume.out" \
    && grep -qE "^step +$((first_step + 1))/" "$dir/resume.out" \
    && pass "./train_gpt2 -y 1 finds the first run in out/ (not the later ones beside it) and trains on from step $first_step" \
    || fail "-y 1 after the others" "exit $rc: $(grep -aE '^(output|resume|error)' "$dir/resume.out" | head -n 3 | tr '\n' ' ')"
# And -y 1 -x 3 finds the -x 3 run, complete, in out-2.
"$root/train_gpt2" -K "$NOTOK" -x 3 -m 2 -y 1 > "$dir/y3.out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^output: the built-in run's out is another run's; -y 1 resumes the run with these flags in out-2" "$dir/y3.out" \
    && grep -q "^run complete at step 3 (out-2/run_complete)" "$dir/y3.out" \
    && pass "./train_gpt2 -x 3 -y 1 finds its own run in out-2: complete" \
    || fail "-x 3 -y 1" "exit $rc: $(grep -aE '^(output|run|resume|error)' "$dir/y3.out" | head -n 3 | tr '\n' ' ')"

# An -o given: another run's checkpoints there stop a fresh run, as before.
"$root/train_gpt2" -K "$NOTOK" -x 3 -m 2 -o out > /dev/null 2> "$dir/given.err"
rc=$?
[ $rc = 1 ] && grep -q "output dir out holds checkpoints of another run" "$dir/given.err" \
    && pass "-o out given: another run's checkpoints there are one error line, as before" \
    || fail "-o given" "exit $rc: $(cat "$dir/given.err")"
exit $failed
