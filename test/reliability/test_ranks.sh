#!/usr/bin/env bash
# test_ranks.sh: faults across ranks, under mpirun. Ranks started with different flags,
# model files, data or output dirs once hung (rank 0 done, rank 1 waiting in a collective; -z 0
# beside -z 1 at start-up; -n 1 beside -n 2 at the first checkpoint) or ran to exit 0 with a
# silently wrong result; now every rank ends within seconds, the first rank that differs saying what
# differs and both values. Then a checkpoint shard of another run (the run id in every file): set
# aside like a damaged one, the resume falling back to the newest intact checkpoint, bit for bit.
# Every program runs under a timeout: a hang fails instead of stopping the suite. About 40 s.
set -u
. "$(dirname "$0")/../lib.sh"
need_mpi ranks
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
ROOT=$PWD
TO=60  # seconds: a hang, not a slow machine (each case ends at start-up, in about a second)
gen=build/test/gen_data
$gen model "$dir/model.bin" 2 64 2 301 64 1 && $gen model "$dir/model_b.bin" 2 64 2 301 64 2 &&
    $gen shard "$dir/train.bin" 40000 301 2 && $gen shard "$dir/train_b.bin" 40000 301 9 &&
    mkdir -p "$dir/w0" "$dir/w1" && cp "$dir/model.bin" "$dir/train.bin" "$dir/w0/" &&
    cp "$dir/model.bin" "$dir/train.bin" "$dir/w1/" || { echo "FAIL ranks: gen_data"; exit 1; }
base=(-e "$dir/model.bin" -i "$dir/train.bin" -b 3 -t 32 -v 0 -s 0 -l 3e-3 -u 2 -z 1 -x 2 -n 1)

# The GPU engine through the CPU runtime (the C engine refuses several ranks, after the checks here).
trainer=$ROOT/build/emu/train_gpt2_emu_fp32
[ -x "$trainer" ] || trainer=$ROOT/train_gpt2
# disagree NAME PATTERN WDIR0 WDIR1 -- RANK0 FLAGS -- RANK1 FLAGS: the trainer as two app contexts of
# one mpirun (each in its working dir); it must end within the timeout, non-zero, stderr holding
# one "error: rank 1: ..." line that matches PATTERN.
disagree() {
    local name=$1 pattern=$2 w0=$3 w1=$4
    shift 5
    local a=() b=()
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    timeout $TO mpirun -np 1 -wdir "$w0" "$trainer" "${a[@]}" : -np 1 -wdir "$w1" "$trainer" "${b[@]}" \
        > "$dir/d.out" 2> "$dir/d.err" < /dev/null
    local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c '^error: ' "$dir/d.err")" -eq 1 ] && grep -qE -- "^error: rank 1: $pattern" "$dir/d.err"; then
        pass "$name"
    else
        fail "$name" "exit $rc: $(grep -v '^\[' "$dir/d.err" | head -c 400)"
    fi
}
same="the same flags, model and data"
# Ranks given different flags: the hangs first.
disagree "-x 2 beside -x 4 (rank 0 once finished while rank 1 waited): every rank ends, naming -x and both values" \
    "ranks disagree: flag -x \(--steps\) is '4' on rank 1 but '2' on rank 0; every rank of a run must be given $same" \
    "$dir" "$dir" -- "${base[@]}" -o "$dir/o1" -- "${base[@]}" -o "$dir/o1" -x 4
disagree "-z 0 beside -z 1 (once a hang at start-up)" "ranks disagree: flag -z \(--zero\) is '0' on rank 1 but '1' on rank 0" \
    "$dir" "$dir" -- "${base[@]}" -o "$dir/o2" -- "${base[@]}" -o "$dir/o2" -z 0
disagree "-n 2 beside -n 1 (once a hang at the first checkpoint)" "ranks disagree: flag -n \(--checkpoint-every\) is '2' on rank 1 but '1' on rank 0" \
    "$dir" "$dir" -- "${base[@]}" -o "$dir/o3" -- "${base[@]}" -o "$dir/o3" -n 2
# Once runs to exit 0, silently wrong.
for case in "-i|$dir/train_b.bin|flag -i \(--train\) is '$dir/train_b.bin' on rank 1 but '$dir/train.bin' on rank 0" \
            "-e|$dir/model_b.bin|flag -e \(--model\) is '$dir/model_b.bin' on rank 1" \
            "-b|2|flag -b \(--batch\) is '2' on rank 1 but '3' on rank 0" \
            "--loss-scale|1024|flag --loss-scale is '1024' on rank 1 but '65536' on rank 0" \
            "-l|1e-3|flag -l \(--lr\) is '0.001' on rank 1 but '0.003' on rank 0" \
            "-o|$dir/o4b|flag -o \(--output\) is '$dir/o4b' on rank 1 but '$dir/o4' on rank 0"; do
    IFS='|' read -r flag value pattern <<< "$case"
    disagree "$flag $value on rank 1 alone (once exit 0): every rank ends, naming $flag and both values" "ranks disagree: $pattern" \
        "$dir" "$dir" -- "${base[@]}" -o "$dir/o4" -- "${base[@]}" -o "$dir/o4" "$flag" "$value"
done
# The same flags over different files: relative paths in two working dirs.
rel=(-e model.bin -i train.bin -b 3 -t 32 -v 0 -s 0 -z 1 -x 2 -n 1)
$gen shard "$dir/w1/train.bin" 40000 301 9
disagree "the same -i naming other data on rank 1: the train data's fingerprints differ, both given" \
    "ranks disagree: the train data \(flag -i\) is '1 shard, 40000 tokens, checksum [0-9a-f]+' on rank 1 but '1 shard, 40000 tokens, checksum [0-9a-f]+' on rank 0" \
    "$dir/w0" "$dir/w1" -- "${rel[@]}" -o "$dir/o5" -- "${rel[@]}" -o "$dir/o5"
cp "$dir/train.bin" "$dir/w1/train.bin"
cp "$dir/model_b.bin" "$dir/w1/model.bin"
disagree "the same -e naming another model on rank 1: the model files' checksums differ, both given" \
    "ranks disagree: the model file's contents \(flag -e\), as a checksum, is '[0-9a-f]{16}' on rank 1 but '[0-9a-f]{16}' on rank 0" \
    "$dir/w0" "$dir/w1" -- "${rel[@]}" -o "$dir/o6" -- "${rel[@]}" -o "$dir/o6"
cp "$dir/model.bin" "$dir/w1/model.bin"
disagree "the same -o naming another directory on rank 1 (not shared): refused, naming -o" \
    "flag -o \(--output\) out is not the directory rank 0 writes into: its train.lock says '\(none\)' here and '[0-9]+; host" \
    "$dir/w0" "$dir/w1" -- "${rel[@]}" -o out -- "${rel[@]}" -o out
[ ! -e "$dir/w1/out/model_00000001.bin" ] && [ ! -e "$dir/w0/out/model_00000001.bin" ] &&
    pass "no rank wrote a checkpoint into either output dir" || fail "not-shared output dir" "checkpoint files written"

# --- a shard of another run at the same step ---------------------------------------------------------
emu=build/emu/train_gpt2_emu_fp32
if [ -x $emu ]; then
    ck=(-e "$dir/model.bin" -i "$dir/train.bin" -b 3 -t 32 -v 0 -s 0 -l 3e-3 -u 2 -sf 1 -z 1 -x 4 -n 2)
    timeout 300 mpirun -np 2 $emu "${ck[@]}" -o "$dir/a" > "$dir/a.out" 2>&1 &&
        timeout 300 mpirun -np 2 $emu "${ck[@]}" -l 1e-3 -o "$dir/b" > "$dir/b.out" 2>&1 ||
        fail "shard of another run" "a run failed: $(tail -n 2 "$dir/a.out" "$dir/b.out")"
    cp -r "$dir/a" "$dir/a_orig"
    cp "$dir/b/state_00000004.rank001.bin" "$dir/a/"
    rm -f "$dir/a/run_complete"  # as a run stopped after its step-4 checkpoint leaves its dir
    timeout 300 mpirun -np 2 $emu "${ck[@]}" -o "$dir/a" -y 1 > "$dir/a2.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "state file .*a/state_00000004.rank001.bin is from another run than .*state_00000004.bin (run id" "$dir/a2.out" &&
        grep -q "falling back to step 2" "$dir/a2.out" && [ -f "$dir/a/state_00000004.rank001.bin.damaged" ] &&
        [ -f "$dir/a/model_00000004.bin.damaged" ] && cmp -s "$dir/a_orig/model_00000004.bin" "$dir/a/model_00000004.bin" &&
        cmp -s "$dir/a_orig/state_00000004.bin" "$dir/a/state_00000004.bin" &&
        cmp -s "$dir/a_orig/state_00000004.rank001.bin" "$dir/a/state_00000004.rank001.bin"; then
        pass "another run's state_00000004.rank001.bin: step 4 is set aside (every file of it), step 2 resumes, ending bit-identical"
    else
        fail "shard of another run" "exit $rc: $(grep -E 'resume|error' "$dir/a2.out" | head -n 3)"
    fi
else
    echo "SKIP shard of another run: $emu is not built"
fi
exit $failed
