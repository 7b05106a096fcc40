#!/usr/bin/env bash
# test_llmc_resume.sh: -y 1 resumes llm.c's checkpoints (model_STEP.bin, state_STEP_00000.bin,
# DONE_STEP). The llm.c state files are written here by a Python writer that follows llm.c's
# save_state layout (train_gpt2.cu), from the m and v of a run of ours at step 4 (read from our own
# state file by Python too), so the resumed run must continue exactly as ours does: same weights,
# m, v, step and data position, hence the same losses, bit for bit (the C engine is deterministic
# and nothing llm.c's file lacks, its RNG or the outlier statistics, enters a run without -sl/-sg
# or sampling). Also: llm.c's fp32 master weights win over its model file, a shuffled llm.c state
# says its order is not ours, our own newer checkpoint wins, the GPU engine (emulated, FP32 and
# FP16) resumes bit for bit too, states of several llm.c processes (ZeRO-1 shares or whole copies)
# resume on one process and on 2 ranks under mpirun, bit for bit, and bad files (truncated, wrong
# magic or version, wrong size, a rank's file missing or extra, headers that disagree) stop the run
# in one line with nothing written.
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
tiny_data 1
# -sf 0: this loader in order, as llm.c's unshuffled one reads (shuffling is on by default, as in llm.c).
run=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 2 -t 16 -v 0 -s 0 -p 1000 -x 8 -n 4 -sf 0)

# Our unbroken run: checkpoints at 4 and 8; its losses after step 4 are what every resume must give.
./train_gpt2 "${run[@]}" -o "$dir/ours" > "$dir/ours.out" 2>&1 || { echo "FAIL setup: run: $(tail -2 "$dir/ours.out")"; exit 1; }

# make_llmc OUT [key=value...]: OUT holds llm.c's checkpoint of step 4 (and nothing of ours): our
# model file (llm.c reads header words 0-7 only, so it is llm.c's too), DONE_00000004 and llm.c
# state files with our step-4 m and v. Keys: procs (llm.c processes: one state file each, 1 by
# default), z (1: llm.c's ZeRO-1, each file its rank's part of every tensor's layer, as gpt2_update
# shards them; 0: every file all of m and v), naive (1: ZeRO-1 files cut as one flat array instead,
# the control), magic, version, nproc (header word 2, procs by default), shuffle, master (fp32
# master weights = our weights; the model file then holds them halved, so only the master weights
# give our losses), cut (bytes cut off the end of rank 0's file), extra (bytes appended to it), head
# (only that many bytes of it kept), zero (m and v written as zeros), step (of the checkpoint, 4 by
# default), sample (llm.c's sample index, the step by default), drop (a rank whose file is not
# written), more (1: a file of rank `procs` too), whole (a rank whose ZeRO-1 file holds all of m
# and v), rR_W=X (header word W of rank R's file set to X).
# SRC: the run of ours to take them from ($dir/ours by default).
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
m, v = st[off:off + 4 * n], st[off + 4 * n:off + 8 * n]
assert len(v) == 4 * n and w[0] == step
model = open(os.path.join(src, "model_%08d.bin" % step), "rb").read()
params = model[1024:]
assert len(params) == 4 * n
# llm.c's parameter tensors (fill_in_parameter_sizes), from the model header {.., maxT, V, L, NH, C, Vp}
maxT, V, L, NH, C, Vp = struct.unpack_from("<6i", model, 8)
sizes = [Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
         L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C]
assert sum(sizes) == n
if opt.get("master") == "1":  # llm.c's model file rounded, its master weights exact: here halved
    vals = struct.unpack("<%df" % n, params)
    model = model[:1024] + struct.pack("<%df" % n, *[x * 0.5 for x in vals])
# llm.c's model header has words 0-7 only (no checksum, run id or step of ours).
model = model[:32] + bytes(1024 - 32) + model[1024:]
open(os.path.join(out, "model_%08d.bin" % step), "wb").write(model)
open(os.path.join(out, "DONE_%08d" % step), "wb").close()
if opt.get("zero") == "1": m = v = bytes(len(m))  # the control: m and v lost
procs = int(opt.get("procs", 1))
def part(buf, r):
    """Rank r's share of a whole fp32 buffer as llm.c keeps it."""
    if opt.get("z") != "1" or opt.get("whole") == str(r): return buf
    if opt.get("naive") == "1": return buf[4 * n * r // procs:4 * n * (r + 1) // procs]
    # ZeRO-1: each tensor cut per layer (the 12 layer tensors) or whole; each piece in procs equal
    # shares; rank r's buffer: its share of every piece, tensor after tensor, layer after layer.
    got, at = [], 0
    for i, e in enumerate(sizes):
        slices = L if 2 <= i <= 13 else 1
        piece = e // slices
        assert piece % procs == 0
        share = piece // procs
        for l in range(slices):
            a = at + l * piece + r * share
            got.append(buf[4 * a:4 * (a + share)])
        at += e
    return b"".join(got)
for r in range(procs + (opt.get("more") == "1")):
    if str(r) == opt.get("drop"): continue
    # llm.c's save_state: 256 int32 {magic 20240527, version 1, processes, rank, master weights,
    # shuffle, ..., [10] step, [20:24] two uint64 RNG states (each rank its own), [30:34] size_t shard
    # and sample index}.
    hd = [0] * 256
    hd[0] = int(opt.get("magic", 20240527)); hd[1] = int(opt.get("version", 1)); hd[2] = int(opt.get("nproc", procs))
    hd[3] = r; hd[4] = int(opt.get("master", 0)); hd[5] = int(opt.get("shuffle", 0)); hd[10] = step
    b = bytearray(struct.pack("<256i", *hd))
    struct.pack_into("<QQ", b, 80, 0x1234 + r, 0x5678 + r)
    # shard 0; sample index = batches read (B*T tokens each; at a shard's end llm.c's stays there)
    struct.pack_into("<QQ", b, 120, 0, int(opt.get("sample", step)))
    for k, val in opt.items():
        if k.startswith("r%d_" % r): struct.pack_into("<i", b, 4 * int(k.split("_")[1]), int(val))
    hd[4], hd[5] = struct.unpack_from("<2i", b, 16)
    b += part(m, r % procs) + part(v, r % procs)
    if hd[4]: b += part(params, r % procs)
    if hd[5]:  # the permuted loader: shard count and order, sample count and order, its mt19937_state
        nshards, nsamples = 1, 624
        b += struct.pack("<Q", nshards) + struct.pack("<%di" % nshards, *range(nshards))
        b += struct.pack("<Q", nsamples) + struct.pack("<%di" % nsamples, *reversed(range(nsamples)))
        b += struct.pack("<Qii", 1337, 624, 0) + struct.pack("<624I", *range(624)) + struct.pack("<2I", 0, 0x9908b0df)
    if r == 0:
        if "cut" in opt: b = b[:len(b) - int(opt["cut"])]
        if "extra" in opt: b += bytes(int(opt["extra"]))
        if "head" in opt: b = b[:int(opt["head"])]
    open(os.path.join(out, "state_%08d_%05d.bin" % (step, r)), "wb").write(b)
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
        grep -q "^resume: data: 8 samples from the start in this loader's sequential order (next: shard 0, tokens 128 on); llm.c's loader stood at shard 0 sample 4 (the same position)" "$dir/l1.out" &&
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
cp -r "$dir/l1" "$dir/l4" && rm -f "$dir/l4/run_complete" && make_llmc "$dir/l4"  # stopped after its step-8 checkpoint
./train_gpt2 "${run[@]}" -o "$dir/l4" -y 1 > "$dir/l4.out" 2>&1 && grep -q "^resume: step 8 from" "$dir/l4.out" &&
    ! grep -q "llm.c's checkpoint" "$dir/l4.out" && pass "our newer checkpoint (step 8) wins over llm.c's step 4" ||
    fail "newer own checkpoint" "$(grep -m2 '^resume' "$dir/l4.out")"

# 4b. Several llm.c processes, one state file each, on this one process: with llm.c's ZeRO-1 the
# files' shares are joined into the whole m and v (2 and 4 processes, the latter with master
# weights); without it (3 processes: 23008 parameters do not split 3 ways, so llm.c keeps ZeRO off)
# each file holds all of them. Each resumes to our unbroken run's losses and weights, bit for bit.
for c in "2 z=1" "4 z=1 master=1" "3 z=0"; do
    set -- $c
    out="$dir/p$1$2"
    make_llmc "$out" procs="$@"
    ls "$out"/state_00000004_0000[0-9].bin > /dev/null 2>&1 && [ "$(ls "$out" | grep -c '^state_')" -eq "$1" ] ||
        fail "setup: $1 llm.c state files" "$(ls "$out" | tr '\n' ' ')"
    how="whole copies" && [ "$2" = z=1 ] && how="ZeRO-1 shares, joined"
    others="ranks 1-$(($1 - 1))'s" && [ "$1" = 2 ] && others="rank 1's"
    if ./train_gpt2 "${run[@]}" -o "$out" -y 1 > "$out.out" 2>&1 &&
        grep -q "^resume: step 4 from llm.c's checkpoint .*state_00000004_00000.bin (and $others: $how): weights" "$out.out" &&
        [ "$(losses "$out/log.jsonl")" = "$want" ] && [ "$(weights "$out/model_00000008.bin")" = "$(weights "$dir/ours/model_00000008.bin")" ] &&
        [ -z "$(ls "$out" | grep tmp)" ]; then
        pass "llm.c's state of $1 processes ($c) resumes on one process: losses of steps 5-8 and step-8 weights equal ours, bit for bit"
    else
        fail "llm.c state of $1 processes ($c)" "losses '$(losses "$out/log.jsonl" | tr '\n' ' ')'; $(grep -m2 -E '^resume|error' "$out.out")"
    fi
done
# The control: ZeRO-1 files cut as one flat array (not llm.c's per-tensor, per-layer shares) resume
# to other losses, so the joining is what the comparison above checks.
make_llmc "$dir/pn" procs=2 z=1 naive=1
./train_gpt2 "${run[@]}" -o "$dir/pn" -y 1 > "$dir/pn.out" 2>&1 && got=$(losses "$dir/pn/log.jsonl") &&
    [ "$(echo "$got" | wc -l)" -eq 4 ] && [ "$got" != "$want" ] &&
    pass "control: 2 ZeRO-1 files cut as one flat array resume to other losses" || fail "flat-cut control" "'$got'"

# At the end of the data's only shard (624 windows of B*T = 32 tokens, 31 tokens left): llm.c still
# names it (sample 624) and goes on at its start, dropping the tail; this loader reads the tail's
# whole sample of T+1 tokens first (sample 1248 of 1249). A different position, said so, and the
# losses after it equal ours.
./train_gpt2 "${run[@]}" -x 626 -n 624 -o "$dir/b" > "$dir/b.out" 2>&1 || fail "run to 626" "$(tail -2 "$dir/b.out")"
SRC="$dir/b" make_llmc "$dir/lb" step=624
./train_gpt2 "${run[@]}" -x 626 -n 624 -o "$dir/lb" -y 1 > "$dir/lb.out" 2>&1 &&
    grep -q "^resume: data: 1248 samples from the start in this loader's sequential order (next: shard 0, tokens 19968 on); llm.c's loader stood at shard 0 sample 624 (a different position: llm.c goes on at the next shard, dropping the tail this loader reads; " "$dir/lb.out" &&
    [ "$(losses "$dir/lb/log.jsonl" 624 | wc -l)" -eq 2 ] && [ "$(losses "$dir/lb/log.jsonl" 624)" = "$(losses "$dir/b/log.jsonl" 624)" ] &&
    pass "at a shard's end (step 624) llm.c drops the shard's tail, which this loader reads, and says so; losses of 625-626 equal ours" ||
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
        [ "$(cd "$dir/bad" && md5sum *)" = "$before" ] && [ "$(ls -A "$dir/bad" | wc -l)" -eq "$(echo "$before" | wc -l)" ]; then
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
# Several processes' files: missing, more, counts, ranks and headers that disagree, sizes.
s1=state_00000004_00001.bin
bad "a state whose header says 2 processes, with rank 1's file missing, is refused" "llm.c's checkpoint of step 4 has no state file .*$s1 \(No such file or directory\): rank 0's file .*$sf says 2 processes wrote it" nproc=2
bad "2 ZeRO-1 files without rank 1's are refused" "has no state file .*$s1 .*says 2 processes wrote it" procs=2 z=1 drop=1
bad "a third file beside 2 processes' is refused" "llm.c state file .*state_00000004_00002.bin is there, but rank 0's file .*$sf says 2 processes wrote the checkpoint" procs=2 z=1 more=1
bad "process counts that disagree are refused" "llm.c state file .*$s1 says 3 processes wrote it; rank 0's file .*$sf says 2" procs=2 z=1 r1_2=3
bad "a file naming another rank than its name is refused" "llm.c state file .*$s1 is rank 0's, expected rank 1's \(its name\)" procs=2 z=1 r1_3=0
bad "a step that disagrees with rank 0's is refused" "llm.c state file .*$s1 disagrees with rank 0's .*$sf on the step" procs=2 z=1 r1_10=3
bad "a data position that disagrees with rank 0's is refused" "llm.c state file .*$s1 disagrees with rank 0's .*$sf on the sample index" procs=2 z=1 r1_32=5
bad "a master-weights word that disagrees with rank 0's is refused" "llm.c state file .*$s1 disagrees with rank 0's .*$sf on the master weights" procs=2 z=1 r1_4=1
bad "a whole-state file beside a ZeRO-1 one is refused" "llm.c state file .*$s1 is [0-9]+ bytes; like rank 0's .*$sf it should hold 11504 entries a buffer, [0-9]+ bytes" procs=2 z=1 whole=1
bad "a truncated ZeRO-1 file is refused, naming both sizes it could have" "llm.c state file .*$sf is [0-9]+ bytes; a model of 23008 parameters needs [0-9]+ or [0-9]+ \(1/2 of them each, llm.c's ZeRO-1\) \(header, m, v\): the file is truncated" procs=2 z=1 cut=4

# Our 2 ranks (the GPU engine, FP32, under mpirun, B=1 each) resume llm.c's states of 2 processes
# (ZeRO-1 shares) and of 1: rank 0 joins them into the whole, every rank takes its part as from a
# checkpoint of ours. Each gives the losses and weights of our unbroken 2-rank run, bit for bit;
# with our own ZeRO-1 (-z 1), those of our own step-4 checkpoint resumed with -z 1.
emu=build/emu/train_gpt2_emu_fp32
if [ -x "$emu" ] && have_mpi; then
    mpi() { timeout 300 mpirun -np 2 "$emu" "${run[@]}" -b 1 -f 0 "$@"; }
    if mpi -o "$dir/ours2" > "$dir/ours2.out" 2>&1; then
        want2=$(losses "$dir/ours2/log.jsonl")
        for c in "2 z=1 -z 0" "1 z=0 -z 0" "2 z=1 -z 1"; do
            set -- $c
            out="$dir/r$1$2$3$4"
            SRC="$dir/ours2" make_llmc "$out" procs=$1 $2
            w2=$want2 wm=$(weights "$dir/ours2/model_00000008.bin")
            if [ "$4" = 1 ]; then
                mkdir -p "$dir/o2z1" && cp "$dir/ours2/"*_00000004* "$dir/o2z1/"
                mpi -o "$dir/o2z1" -y 1 -z 1 > "$dir/o2z1.out" 2>&1 || fail "our own resume, 2 ranks -z 1" "$(grep -m2 -iE 'error' "$dir/o2z1.out")"
                w2=$(losses "$dir/o2z1/log.jsonl") wm=$(weights "$dir/o2z1/model_00000008.bin")
            fi
            mpi -o "$out" -y 1 -z "$4" > "$out.out" 2>&1
            rc=$?
            [ $rc -eq 0 ] && grep -q "^resume: step 4 from llm.c's checkpoint" "$out.out" && [ "$(echo "$w2" | wc -l)" -eq 4 ] &&
                [ "$(losses "$out/log.jsonl")" = "$w2" ] && [ "$(weights "$out/model_00000008.bin")" = "$wm" ] &&
                [ -z "$(ls "$out" | grep tmp)" ] &&
                pass "2 ranks (-z $4) resume llm.c's state of $1 process(es) ($2): losses and weights equal ours, bit for bit" ||
                fail "2 ranks (-z $4), llm.c state of $1" "exit $rc: '$(losses "$out/log.jsonl" | tr '\n' ' ')' vs '$(echo "$w2" | tr '\n' ' ')'; $(grep -m2 -iE '^resume|error' "$out.out")"
        done
    else
        fail "2-rank run" "$(grep -m2 -iE 'error' "$dir/ours2.out")"
    fi
else
    echo "SKIP 2 processes: needs $emu and OpenMPI (mpirun, mpicc)"
fi

exit $failed
