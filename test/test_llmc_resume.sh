#!/usr/bin/env bash
# test_llmc_resume.sh: -y 1 resumes llm.c's checkpoints (model_STEP.bin, state_STEP_00000.bin,
# DONE_STEP). The llm.c state files are written here by a Python writer that follows llm.c's
# save_state layout (train_gpt2.cu), from the m and v of a run of ours at step 4 (read from our own
# state file by Python too), so the resumed run must continue exactly as ours does: same weights,
# m, v, step and data position, hence the same losses, bit for bit (the C engine is deterministic
# and nothing llm.c's file lacks, its RNG or the outlier statistics, enters a run without -sl/-sg
# or sampling). Also: llm.c's fp32 master weights win over its model file, a shuffled llm.c state
# says its order is not ours, our own newer checkpoint wins, the GPU engine (emulated, FP32 and
# FP16) resumes bit for bit too, and bad files (truncated, wrong magic or version, wrong size,
# another process count either way, 2 processes under mpirun) stop the run in one line with
# nothing written.
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
tiny_data 1
# -sf 0: this loader in order, as llm.c's unshuffled one reads (shuffling is on by default, as in llm.c).
run=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 2 -t 16 -v 0 -s 0 -p 1000 -x 8 -n 4 -sf 0)

# Our unbroken run: checkpoints at 4 and 8; its losses after step 4 are what every resume must give.
./train_gpt2 "${run[@]}" -o "$dir/ours" > "$dir/ours.out" 2>&1 || { echo "FAIL setup: run: $(tail -2 "$dir/ours.out")"; exit 1; }

# make_llmc OUT [key=value...]: OUT holds llm.c's checkpoint of step 4 (and nothing of ours): our
# model file (llm.c reads header words 0-7 only, so it is llm.c's too), DONE_00000004 and an llm.c
# state file with our step-4 m and v. Keys: magic, version, nproc, shuffle, master (fp32 master
# weights = our weights; the model file then holds them halved, so only the master weights give our
# losses), cut (bytes cut off the end), extra (bytes appended), head (only that many bytes kept),
# zero (m and v written as zeros), step (of the checkpoint, 4 by default), sample (llm.c's sample
# index, the step by default). SRC: the run of ours to take them from ($dir/ours by default).
make_llmc() {
    local out=$1
    shift
    mkdir -p "$out"
    "$PY" - "${SRC:-$dir/ours}" "$out" "$@" <<'PYEOF'
import struct, sys, os
src, out = sys.argv[1], sys.argv[2]
opt = dict(a.split("=") for a in sys.argv[3:])
step = int(opt.get("step", 4))
# Our state file (checkpoint.h): 256 int32 header (word 11: record bytes), 32 int64 words (5: the
# parameter count), the record padded to 4 bytes, then m and v as fp32.
st = open(os.path.join(src, "state_%08d.bin" % step), "rb").read()
h = struct.unpack_from("<256i", st, 0)
w = struct.unpack_from("<32q", st, 1024)
n, rec = w[5], (h[11] + 3) // 4 * 4
off = 1024 + 256 + rec
mv = st[off:off + 8 * n]
assert len(mv) == 8 * n and w[0] == step
model = open(os.path.join(src, "model_%08d.bin" % step), "rb").read()
params = model[1024:]
assert len(params) == 4 * n
if opt.get("master") == "1":  # llm.c's model file rounded, its master weights exact: here halved
    vals = struct.unpack("<%df" % n, params)
    model = model[:1024] + struct.pack("<%df" % n, *[x * 0.5 for x in vals])
# llm.c's model header has words 0-7 only (no checksum, run id or step of ours).
model = model[:32] + bytes(1024 - 32) + model[1024:]
open(os.path.join(out, "model_%08d.bin" % step), "wb").write(model)
open(os.path.join(out, "DONE_%08d" % step), "wb").close()
# llm.c's save_state: 256 int32 {magic 20240527, version 1, processes, rank, master weights,
# shuffle, ..., [10] step, [20:24] two uint64 RNG states, [30:34] size_t shard and sample index}.
hd = [0] * 256
hd[0] = int(opt.get("magic", 20240527)); hd[1] = int(opt.get("version", 1)); hd[2] = int(opt.get("nproc", 1))
hd[3] = 0; hd[4] = int(opt.get("master", 0)); hd[5] = int(opt.get("shuffle", 0)); hd[10] = step
b = bytearray(struct.pack("<256i", *hd))
struct.pack_into("<QQ", b, 80, 0x1234, 0x5678)
# shard 0; sample index = batches read (B*T tokens each; at a shard's end llm.c's stays there)
struct.pack_into("<QQ", b, 120, 0, int(opt.get("sample", step)))
if opt.get("zero") == "1": mv = bytes(len(mv))  # the control: m and v lost
b += mv
if hd[4]: b += params
if hd[5]:  # the permuted loader: shard count and order, sample count and order, its mt19937_state
    nshards, nsamples = 1, 624
    b += struct.pack("<Q", nshards) + struct.pack("<%di" % nshards, *range(nshards))
    b += struct.pack("<Q", nsamples) + struct.pack("<%di" % nsamples, *reversed(range(nsamples)))
    b += struct.pack("<Qii", 1337, 624, 0) + struct.pack("<624I", *range(624)) + struct.pack("<2I", 0, 0x9908b0df)
if "cut" in opt: b = b[:len(b) - int(opt["cut"])]
if "extra" in opt: b += bytes(int(opt["extra"]))
if "head" in opt: b = b[:int(opt["head"])]
open(os.path.join(out, "state_%08d_%05d.bin" % (step, 0)), "wb").write(b)
PYEOF
}
# losses LOG [FROM]: "step loss" of the steps after FROM (4) in log.jsonl.
losses() { "$PY" -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "train_loss" in r and r["step"] > int(sys.argv[2]): print(r["step"], repr(r["train_loss"]))' "$1" "${2:-4}"; }
# weights MODEL: md5 of the parameters (the header carries a run id, which differs).
weights() { tail -c +1025 "$1" | md5sum | cut -d' ' -f1; }
want=$(losses "$dir/ours/log.jsonl")
[ "$(echo "$want" | wc -l)" -eq 4 ] || { echo "FAIL setup: our run logged '$want'"; exit 1; }

# 1. The must-have: one process, no ZeRO, no master weights.
make_llmc "$dir/l1"
if ./train_gpt2 "${run[@]}" -o "$dir/l1" -y 1 > "$dir/l1.out" 2>&1; then
    got=$(losses "$dir/l1/log.jsonl")
    grep -q "^resume: step 4 from llm.c's checkpoint .*model_00000004.bin + .*state_00000004_00000.bin: weights (its model file), AdamW m and v, step" "$dir/l1.out" &&
        grep -q "^resume: data: 4 batches from the start in this loader's sequential order (shard 0, window 4); llm.c's loader stood at shard 0 sample 4 (the same position)" "$dir/l1.out" &&
        [ "$got" = "$want" ] && [ "$(weights "$dir/l1/model_00000008.bin")" = "$(weights "$dir/ours/model_00000008.bin")" ] &&
        [ -z "$(ls "$dir/l1" | grep tmp)" ] &&
        pass "llm.c's state of step 4 resumes: losses of steps 5-8 and the step-8 weights equal our unbroken run's, bit for bit" ||
        fail "llm.c resume" "losses '$got' vs '$want'; $(grep '^resume' "$dir/l1.out")"
else
    fail "llm.c resume" "exit $?: $(tail -2 "$dir/l1.out")"
fi
# Our own resume from our step-4 checkpoint gives the same (the comparison above is with it, too).
mkdir -p "$dir/o4" && cp "$dir/ours/"*_00000004* "$dir/o4/"
./train_gpt2 "${run[@]}" -o "$dir/o4" -y 1 > "$dir/o4.out" 2>&1 && [ "$(losses "$dir/o4/log.jsonl")" = "$want" ] &&
    pass "our own resume from step 4 gives the same losses" || fail "own resume" "$(tail -2 "$dir/o4.out")"

# The control: the same file with m and v zeroed gives other losses (m and v are what is compared).
make_llmc "$dir/l0" zero=1
./train_gpt2 "${run[@]}" -o "$dir/l0" -y 1 > "$dir/l0.out" 2>&1 && got=$(losses "$dir/l0/log.jsonl") &&
    [ "$(echo "$got" | wc -l)" -eq 4 ] && [ "$got" != "$want" ] &&
    pass "control: the llm.c state with m and v zeroed resumes to other losses" || fail "control" "'$got'"

# 2. Master weights in the state: they are the weights (the model file's halved ones are not used).
make_llmc "$dir/l2" master=1
./train_gpt2 "${run[@]}" -o "$dir/l2" -y 1 > "$dir/l2.out" 2>&1 && [ "$(losses "$dir/l2/log.jsonl")" = "$want" ] &&
    grep -q "weights (its fp32 master weights)" "$dir/l2.out" &&
    pass "llm.c's fp32 master weights are resumed (losses equal ours)" || fail "master weights" "$(grep -m2 -E '^resume|error' "$dir/l2.out")"

# 3. A shuffled llm.c state: its order is not ours; the run continues from the same step count.
make_llmc "$dir/l3" shuffle=1
./train_gpt2 "${run[@]}" -o "$dir/l3" -y 1 > "$dir/l3.out" 2>&1 && [ "$(losses "$dir/l3/log.jsonl")" = "$want" ] &&
    grep -q "^resume: data: .*shuffled: llm.c's permutation is not this loader's, so the batches from here are this loader's, continuing from the same step count" "$dir/l3.out" &&
    pass "a shuffled llm.c state resumes, saying its order is not this loader's" || fail "shuffled state" "$(grep -m2 '^resume' "$dir/l3.out")"

# 4. Our own newer checkpoint wins over llm.c's older one.
cp -r "$dir/l1" "$dir/l4" && make_llmc "$dir/l4"
./train_gpt2 "${run[@]}" -o "$dir/l4" -y 1 > "$dir/l4.out" 2>&1 && grep -q "^resume: step 8 from" "$dir/l4.out" &&
    ! grep -q "llm.c's checkpoint" "$dir/l4.out" && pass "our newer checkpoint (step 8) wins over llm.c's step 4" ||
    fail "newer own checkpoint" "$(grep -m2 '^resume' "$dir/l4.out")"

# At the end of the data's only shard (624 windows of B*T): llm.c still names it (sample 624), this
# loader the next epoch's window 0; the same position, and the losses after it equal ours.
./train_gpt2 "${run[@]}" -x 626 -n 624 -o "$dir/b" > "$dir/b.out" 2>&1 || fail "run to 626" "$(tail -2 "$dir/b.out")"
SRC="$dir/b" make_llmc "$dir/lb" step=624
./train_gpt2 "${run[@]}" -x 626 -n 624 -o "$dir/lb" -y 1 > "$dir/lb.out" 2>&1 &&
    grep -q "^resume: data: 624 batches from the start in this loader's sequential order (shard 0, window 0); llm.c's loader stood at shard 0 sample 624 (the same position)" "$dir/lb.out" &&
    [ "$(losses "$dir/lb/log.jsonl" 624 | wc -l)" -eq 2 ] && [ "$(losses "$dir/lb/log.jsonl" 624)" = "$(losses "$dir/b/log.jsonl" 624)" ] &&
    pass "at a shard's end (step 624) llm.c's position is this loader's next window; losses of 625-626 equal ours" ||
    fail "shard end" "$(grep -m3 -E '^resume: data|error' "$dir/lb.out")"

# 5. The GPU engine (train_gpt2.cu on the CPU runtime), FP32 and FP16 (the build's default): the
# same comparison, with its own unbroken run. FP16's loss scale is not in llm.c's state (llm.c has
# none): the resume starts it afresh, which changes no value while no gradient overflows (a power
# of two, undone exactly), so the losses must still be equal, bit for bit.
for p in fp32 fp16; do
    emu=build/emu/train_gpt2_emu_$p
    if [ ! -x "$emu" ]; then echo "SKIP GPU engine ($p): $emu not built (no CUDA headers)"; continue; fi
    "$emu" "${run[@]}" -o "$dir/ours$p" > "$dir/emu$p.out" 2>&1 || { fail "GPU engine ($p) run" "$(tail -2 "$dir/emu$p.out")"; continue; }
    want_p=$(losses "$dir/ours$p/log.jsonl")
    SRC="$dir/ours$p" make_llmc "$dir/e$p"
    "$emu" "${run[@]}" -o "$dir/e$p" -y 1 > "$dir/e$p.out" 2>&1 && grep -q "^resume: step 4 from llm.c's checkpoint" "$dir/e$p.out" &&
        [ "$(echo "$want_p" | wc -l)" -eq 4 ] && [ "$(losses "$dir/e$p/log.jsonl")" = "$want_p" ] &&
        [ "$(weights "$dir/e$p/model_00000008.bin")" = "$(weights "$dir/ours$p/model_00000008.bin")" ] &&
        pass "GPU engine ($p): llm.c's state of step 4 resumes to the unbroken run's losses and weights, bit for bit" ||
        fail "GPU engine ($p) llm.c resume" "'$(losses "$dir/e$p/log.jsonl" | tr '\n' ' ')' vs '$(echo "$want_p" | tr '\n' ' ')'; $(grep -m1 -E '^resume|error' "$dir/e$p.out")"
done

# 6. Bad files: one line naming the file and what was expected, exit 1, nothing written.
bad() {
    local name=$1 pattern=$2
    shift 2
    rm -rf "$dir/bad"
    make_llmc "$dir/bad" "$@"
    local before
    before=$(cd "$dir/bad" && md5sum *)
    ./train_gpt2 "${run[@]}" -o "$dir/bad" -y 1 > "$dir/bad.out" 2> "$dir/bad.err"
    local rc=$?
    # train.lock (the run's lock note) is written before the data is read, as for every run.
    rm -f "$dir/bad/train.lock"
    if [ $rc -eq 1 ] && [ "$(wc -l < "$dir/bad.err")" -eq 1 ] && grep -qE "$pattern" "$dir/bad.err" &&
        [ "$(cd "$dir/bad" && md5sum *)" = "$before" ] && [ "$(ls -A "$dir/bad" | wc -l)" -eq 3 ]; then
        pass "$name"
    else
        fail "$name" "exit $rc, stderr: $(head -c 300 "$dir/bad.err"); files: $(ls "$dir/bad" | tr '\n' ' ')"
    fi
}
sf="state_00000004_00000.bin"
bad "a truncated llm.c state is refused" "llm.c state file .*$sf is [0-9]+ bytes; a model of 23008 parameters needs [0-9]+ \(header, m, v\): the file is truncated" cut=100
bad "an llm.c state cut inside its header is refused" "llm.c state file .*$sf is truncated: it ends inside its 1024-byte header" head=500
bad "a wrong magic is refused" "llm.c state file .*$sf has magic 20240526, expected 20240527" magic=20240526
bad "a wrong version is refused" "llm.c state file .*$sf has version 2, expected 1" version=2
bad "an llm.c state of another model size is refused" "llm.c state file .*$sf is [0-9]+ bytes; a model of 23008 parameters needs [0-9]+ .*longer \(another model\?\)" extra=8
bad "an llm.c state of 2 processes on 1 is refused, naming both counts" "llm.c state file .*$sf was written by 2 processes; this run has 1" nproc=2

# A run of 2 processes (the GPU engine under mpirun) refuses a state of 1, naming both counts.
emu=build/emu/train_gpt2_emu_fp32
if [ -x "$emu" ] && have_mpi; then
    rm -rf "$dir/bad" && make_llmc "$dir/bad"
    before=$(cd "$dir/bad" && md5sum *)
    timeout 300 mpirun -np 2 "$emu" "${run[@]}" -b 1 -o "$dir/bad" -y 1 > "$dir/mpi.out" 2>&1
    rc=$?
    rm -f "$dir/bad/train.lock"
    [ $rc -ne 0 ] && grep -q "llm.c state file .*$sf was written by 1 process; this run has 2 (the optimizer state maps only onto the same number of processes)" "$dir/mpi.out" &&
        [ "$(cd "$dir/bad" && md5sum *)" = "$before" ] && [ "$(ls -A "$dir/bad" | wc -l)" -eq 3 ] &&
        pass "a run of 2 processes refuses an llm.c state of 1, naming both counts, nothing written" ||
        fail "2 processes, state of 1" "exit $rc: $(grep -m2 -iE 'error|llm.c' "$dir/mpi.out")"
else
    echo "SKIP 2 processes: needs $emu and OpenMPI (mpirun, mpicc)"
fi

exit $failed
