#!/usr/bin/env bash
# test_llmc_flags.sh: the flags llm.c users bring, with llm.c's meaning: -h (HellaSwag; help is
# --help), -k (the learning-rate schedule; top-k is --top-k), -y 1 on an empty output dir (starts
# the run), DONE_STEP files (written after each checkpoint, honoured on resume, ending llm.c's
# restart loop), -nk / -nm (checkpoint retention), llm.c's defaults (--help, the start-up report, no
# output dir, -t over the model's maximum, -r, shuffling on and -sf recorded). Each schedule's learning rate at every step is
# compared with llm.c's formulas transcribed independently in Python (float32 arithmetic), and the
# checkpoints -nk / -nm leave with a simulation of llm.c's deletion rule. C engine, a tiny model.
set -u
# A tiny model: one OpenMP thread (spinning threads on a shared machine cost 1000 times the step).
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
tiny_data 1
base=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 2 -t 16 -v 0 -s 0 -p 1000)


# --- -h and --help, -k and --top-k -------------------------------------------------------------
./train_gpt2 --help > "$dir/help.out" 2>&1 && grep -q -- "-h, --hellaswag" "$dir/help.out" &&
    grep -q -- "-k, --lr-scheduler" "$dir/help.out" && grep -qE "^ +--top-k" "$dir/help.out" &&
    pass "--help prints the flags and exits 0 (-h is --hellaswag, -k --lr-scheduler, top-k --top-k)" ||
    fail "--help" "$(head -c 300 "$dir/help.out")"
expect_error "-h alone (help before) says help is --help" "flag -h \(--hellaswag\) is llm.c's HellaSwag eval.*--help" -h
expect_error "-h followed by a flag says help is --help" "flag -h \(--hellaswag\).*--help" "${base[@]}" -h -x 2
expect_error "-h 2 is refused" "flag -h \(--hellaswag\) must be 0 or 1, got 2" "${base[@]}" -h 2
expect_error "-k 40 (top-k before) is refused, pointing to --top-k" \
    "flag -k \(--lr-scheduler\) expects cosine, linear, constant or wsd, got '40' \(top-k sampling, which was -k, is now --top-k\)" \
    "${base[@]}" -k 40
expect_error "-k with an unknown schedule" "flag -k \(--lr-scheduler\) expects cosine, linear, constant or wsd, got 'step'" \
    "${base[@]}" -k step
expect_error "--top-k -1" "flag --top-k must be non-negative" "${base[@]}" --top-k -1
expect_error "-nk -1" "flag -nk .*non-negative" "${base[@]}" -nk -1
expect_error "-nm -1" "flag -nm .*non-negative" "${base[@]}" -nm -1
./train_gpt2 "${base[@]}" -x 2 -s 2 -g 6 --top-k 3 -o "" > "$dir/topk.out" 2>&1 && grep -q "^generating" "$dir/topk.out" &&
    pass "--top-k 3 samples" || fail "--top-k 3" "$(tail -2 "$dir/topk.out")"

# --- the schedules, value for value against llm.c's formulas ---------------------------------
# Each run logs the learning rate of every step exactly ("lr" in log.jsonl, %.9g of the float).
sched_runs=("cosine -x 30 -u 5 -q 0.1" "cosine -x 30 -u 0 -q 0.0" "linear -x 30 -u 5 -q 0.1" "linear -x 27 -u 4 -q 0.0"
            "constant -x 12 -u 5 -q 0.1" "wsd -x 30 -u 5 -q 0.0" "wsd -x 23 -u 3 -q 0.2" "cosine -x 8 -u 10 -q 0.1")
i=0
for r in "${sched_runs[@]}"; do
    set -- $r
    kind=$1
    shift
    if ./train_gpt2 "${base[@]}" -l 1e-3 -k $kind "$@" -o "$dir/s$i" > "$dir/s$i.out" 2>&1; then
        echo "$kind $*" > "$dir/s$i/args"
    else
        fail "schedule $r" "exit $?: $(tail -2 "$dir/s$i.out")"
    fi
    i=$((i + 1))
done
./train_gpt2 "${base[@]}" -l 1e-3 -x 30 -u 5 -q 0.1 -o "$dir/sdefault" > /dev/null 2>&1
"$PY" - "$dir" $i <<'PYEOF'
import json, math, os, sys
import numpy as np
f32 = np.float32
d, n = sys.argv[1], int(sys.argv[2])

def llmc_lr(kind, step, N, lr, warmup, frac):
    # llm.c's llmc/schedulers.h, in its float arithmetic: lr * (step+1) / warmup while warming up;
    # cosine and linear decay from the peak at `warmup` to lr*frac at N; wsd holds the peak until
    # int(0.8 N) and falls as 1 - sqrt; constant is lr at every step (no warmup).
    lr, frac = f32(lr), f32(frac)
    if kind == "constant":
        return lr
    if kind == "wsd":
        dp = int(f32(0.8) * f32(N))
        if step < warmup:
            return lr * (f32(step + 1) / f32(warmup))
        if step < dp:
            return lr
        ratio = f32(step - dp) / f32(N - dp)
        lo = lr * frac
        return lo + (f32(1) - np.sqrt(ratio)) * (lr - lo)
    if step < warmup:
        return lr * f32(step + 1) / f32(warmup)
    if N <= warmup:  # llm.c asserts here; the trainer holds the peak
        return lr
    ratio = f32(step - warmup) / f32(N - warmup)
    lo = lr * frac
    if kind == "linear":
        return lr - ratio * (lr - lo)
    coeff = f32(0.5) * (f32(1) + f32(math.cos(math.pi * float(ratio))))
    return lo + coeff * (lr - lo)

def logged(path):
    return [json.loads(l) for l in open(path) if '"train_loss"' in l]

def parse(args):
    a = args.split()
    kind, flags = a[0], dict(zip(a[1::2], a[2::2]))
    return kind, int(flags["-x"]), int(flags["-u"]), float(flags["-q"])

for i in range(n):
    args_path = os.path.join(d, "s%d" % i, "args")
    if not os.path.exists(args_path):
        continue
    args = open(args_path).read().strip()
    kind, N, warmup, frac = parse(args)
    lines = logged(os.path.join(d, "s%d" % i, "log.jsonl"))
    worst, where = 0.0, None
    for line in lines:
        step = line["step"] - 1  # the log counts updates from 1; the schedule from 0
        want = float(llmc_lr(kind, step, N, 1e-3, warmup, frac))
        got = line["lr"]
        rel = abs(got - want) / max(abs(want), 1e-30)
        if rel > worst:
            worst, where = rel, (step, got, want)
    # Within 4 float32 ulps (cosf and Python's cos may differ in the last bit).
    ok = len(lines) == N and worst <= 4 * 2.0 ** -23
    print("%s schedule -k %s: %d steps match llm.c's formula (worst relative difference %.2g%s)" %
          ("PASS" if ok else "FAIL", args, len(lines), worst, "" if ok else ", step %d: %r vs %r" % where if where else ""))
a = [l["lr"] for l in logged(os.path.join(d, "sdefault", "log.jsonl"))]
b = [l["lr"] for l in logged(os.path.join(d, "s0", "log.jsonl"))]
print("%s schedule: without -k the schedule is cosine (%d steps identical)" % ("PASS" if a and a == b else "FAIL", len(a)))
PYEOF
[ $? -eq 0 ] || failed=1
grep -q "^schedule: constant is the peak at every step, as llm.c's: -u 5 and -q 0.1 have no effect" "$dir/s4.out" &&
    pass "schedule: -k constant says that -u and -q have no effect" || fail "constant's note" "$(grep -m1 '^steps' "$dir/s4.out")"

# --- -y 1 starts a run; DONE files; -nk / -nm -------------------------------------------------
ck=("${base[@]}" -x 12 -n 2 -nk 2 -nm 4)
if ./train_gpt2 "${ck[@]}" -o "$dir/keep" -y 1 > "$dir/keep.out" 2>&1; then
    grep -q "^resume: no checkpoint in .*keep; starting the run from step 0" "$dir/keep.out" &&
        [ "$(grep -c '"train_loss"' "$dir/keep/log.jsonl")" -eq 12 ] &&
        pass "-y 1 on an empty output dir starts the run (12 steps)" || fail "-y 1 starts the run" "$(grep -m2 resume "$dir/keep.out")"
else
    fail "-y 1 on an empty output dir" "exit $?: $(tail -2 "$dir/keep.out")"
fi
# What llm.c leaves: after each checkpoint of step s it deletes step s - nk*n unless that is a
# multiple of nm (its train_gpt2.cu loop), simulated here step by step.
want=$("$PY" -c '
N, n, nk, nm = 12, 2, 2, 4
kept = set()
for step in range(N + 1):
    if (step > 0 and step % n == 0) or step == N:
        kept.add(step)
        d = step - nk * n
        if nk > 0 and d > 0 and (nm == 0 or d % nm != 0):
            kept.discard(d)
print(" ".join("%08d" % s for s in sorted(kept)))')
got_models=$(ls "$dir/keep" | sed -n 's/^model_\([0-9]*\)\.bin$/\1/p' | tr '\n' ' ' | sed 's/ $//')
got_states=$(ls "$dir/keep" | sed -n 's/^state_\([0-9]*\)\.bin$/\1/p' | tr '\n' ' ' | sed 's/ $//')
got_done=$(ls "$dir/keep" | sed -n 's/^DONE_\([0-9]*\)$/\1/p' | tr '\n' ' ' | sed 's/ $//')
[ -n "$want" ] && [ "$got_models" = "$want" ] && [ "$got_states" = "$want" ] && [ "$got_done" = "$want" ] &&
    pass "-n 2 -nk 2 -nm 4: the checkpoints and DONE files left are llm.c's ($want)" ||
    fail "-nk / -nm" "llm.c's rule leaves '$want'; models '$got_models', states '$got_states', DONE '$got_done'"
[ ! -s "$dir/keep/DONE_00000012" ] && [ -f "$dir/keep/DONE_00000012" ] && pass "DONE_00000012: an empty file after the last checkpoint" ||
    fail "DONE file" "$(ls -l "$dir/keep")"

# DONE honoured: a checkpoint without its DONE file is one cut short; -y 1 takes the one before,
# and the run ends bit-identical to the unbroken one.
cp -r "$dir/keep" "$dir/cut"
rm "$dir/cut/DONE_00000012" "$dir/cut/run_complete"  # a crash before the last DONE file leaves no run_complete
./train_gpt2 "${ck[@]}" -o "$dir/cut" -y 1 > "$dir/cut.out" 2>&1
grep -q "^resume: step 12 has no DONE_00000012 file (a checkpoint cut short); trying an older one" "$dir/cut.out" &&
    grep -q "^resume: step 10 from" "$dir/cut.out" && cmp -s "$dir/keep/model_00000012.bin" "$dir/cut/model_00000012.bin" &&
    cmp -s "$dir/keep/state_00000012.bin" "$dir/cut/state_00000012.bin" && [ -f "$dir/cut/DONE_00000012" ] &&
    pass "-y 1 skips a checkpoint without its DONE file, resumes step 10 and ends bit-identical" ||
    fail "DONE honoured on resume" "$(grep resume "$dir/cut.out" | head -3)"

# llm.c's restart loop (its run scripts): run with -y 1 until DONE_<last step> exists. The first
# attempt is cut short after its step-4 checkpoint (later files removed, as a crash leaves them).
./train_gpt2 "${base[@]}" -x 12 -n 4 -o "$dir/loop" > /dev/null 2>&1
rm -f "$dir/loop/"*_0000000[8-9]* "$dir/loop/"*_000000[1-9]* "$dir/loop/run_complete"
tries=0
while [ ! -f "$dir/loop/DONE_00000012" ] && [ $tries -lt 3 ]; do
    ./train_gpt2 "${base[@]}" -x 12 -n 4 -o "$dir/loop" -y 1 > "$dir/loop$tries.out" 2>&1
    tries=$((tries + 1))
done
./train_gpt2 "${base[@]}" -x 12 -n 4 -o "$dir/loopref" > /dev/null 2>&1
[ $tries -eq 1 ] && grep -q "^resume: step 4 from" "$dir/loop0.out" &&
    cmp -s "$dir/loop/model_00000012.bin" "$dir/loopref/model_00000012.bin" &&
    pass "llm.c's restart loop: one -y 1 resumes step 4, writes DONE_00000012 and the loop ends" ||
    fail "restart loop" "$tries tries; $(grep -m2 resume "$dir/loop0.out" 2>/dev/null)"
# Running the finished run again changes nothing and exits 0.
before=$(md5sum "$dir/loop/"model_* | md5sum)
./train_gpt2 "${base[@]}" -x 12 -n 4 -o "$dir/loop" -y 1 > "$dir/loopagain.out" 2>&1 && [ "$(md5sum "$dir/loop/"model_* | md5sum)" = "$before" ] &&
    pass "-y 1 on a finished run exits 0 and changes no checkpoint" || fail "finished run again" "$(tail -2 "$dir/loopagain.out")"

# -k is recorded: a resume with another schedule is refused, naming -k.
expect_error "-y 1 with another -k than the checkpoint's" "flag -k \(--lr-scheduler\) is linear in this run but was cosine" \
    "${ck[@]}" -o "$dir/keep" -y 1 -k linear
# --overwrite deletes DONE files with the checkpoints.
./train_gpt2 "${base[@]}" -x 2 -o "$dir/keep" --overwrite > /dev/null 2>&1
[ -z "$(ls "$dir/keep" | grep -E '^(DONE|model|state)_')" ] && pass "--overwrite deletes the DONE files with the checkpoints" ||
    fail "--overwrite" "left: $(ls "$dir/keep" | tr '\n' ' ')"
# --- -sl / -sg, -w, -lg, -z on one process ---------------------------------------------------
# 60 steps of a learnable cycle, then one batch of uniform noise (step 61): its loss is 1.7 running
# standard deviations above the mean, its gradient norm 15.
"$PY" - "$dir/spike.bin" <<'PYEOF'
import random, struct, sys
r = random.Random(5)
cycle = [r.randrange(512) for _ in range(50)]
toks = [cycle[i % 50] for i in range(60 * 128)] + [r.randrange(512) for _ in range(128)] + [cycle[i % 50] for i in range(40 * 128 + 1)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PYEOF
$gen model "$dir/m512.bin" 2 64 2 512 64 1
spike=(-e "$dir/m512.bin" -i "$dir/spike.bin" -b 4 -t 32 -v 0 -s 0 -l 3e-3 -u 2 -x 70 -sf 0 -o "")  # -sf 0: the noise is step 61
skips() { ./train_gpt2 "${spike[@]}" "$@" 2>&1 | grep 'skipped:' | sed 's/^step *\([0-9]*\)\/.*skipped: \(.*\) (z.*/\1 \2/' | tr '\n' ';'; }
got_sl=$(skips -sl 1.5)
got_sg=$(skips -sg 6)
got_sl6=$(skips -sl 6)
[ "$got_sl" = "61 loss outlier;" ] && [ "$got_sg" = "61 grad norm outlier;" ] && [ -z "$got_sl6" ] &&
    pass "-sl 1.5 skips step 61 for its loss, -sg 6 for its grad norm, -sl 6 alone skips nothing (llm.c's separate z-scores)" ||
    fail "-sl / -sg" "-sl 1.5: '$got_sl', -sg 6: '$got_sg', -sl 6: '$got_sl6'"
expect_error "-w 0 (no master weights) is refused" "flag -w \(--master-weights\) is 0, but this trainer always keeps fp32 master weights" "${base[@]}" -w 0
expect_error "-sl -1" "flag -sl \(--skip-loss-z\) must be 0 \(off\) or a positive z-score" "${base[@]}" -sl -1
expect_error "-lg -2" "flag -lg \(--log-memory-every\) must be -1 or 0 \(never\) or positive" "${base[@]}" -lg -2
./train_gpt2 "${base[@]}" -x 2 -lg -1 -o "" > "$dir/lgm1.out" 2>&1 && ! grep -q '^memory at step' "$dir/lgm1.out" &&
    pass "-lg -1 (llm.c's default): no memory lines" || fail "-lg -1" "$(tail -1 "$dir/lgm1.out")"
./train_gpt2 "${base[@]}" -x 6 -lg 2 -w 1 -o "$dir/lg" > "$dir/lg.out" 2>&1
[ "$(grep -c '^memory at step [246]: ' "$dir/lg.out")" -eq 3 ] && [ "$(grep -c '"memory_mib"' "$dir/lg/log.jsonl")" -eq 3 ] &&
    grep -q '{"step": 4, "memory_mib": ' "$dir/lg/log.jsonl" &&
    pass "-lg 2: memory printed and logged at steps 2, 4, 6 (-w 1 accepted)" || fail "-lg" "$(grep -m2 'memory\|error' "$dir/lg.out")"
./train_gpt2 "${base[@]}" -x 4 -n 4 -o "$dir/z0" > /dev/null 2>&1
# (the files' run ids differ: -z is part of what a run id hashes; the weights are compared)
./train_gpt2 "${base[@]}" -x 4 -n 4 -z 1 -o "$dir/z1" > "$dir/z1.out" 2>&1 &&
    [ "$($gen diff "$dir/z0/model_00000004.bin" "$dir/z1/model_00000004.bin")" = "0" ] &&
    pass "-z 1 on one process (the C engine): runs, bit-identical to -z 0 (nothing to shard)" || fail "-z 1 on one process" "$(tail -1 "$dir/z1.out")"
# --- llm.c's multi-node flags: -pi mpi (its default) takes the ranks from the launcher --------
./train_gpt2 "${base[@]}" -x 1 -pi mpi -pn 8 -pr 0 -pg 8 -o "" > "$dir/pn.out" 2>&1 &&
    grep -q "^ranks: -pi mpi takes the ranks from the launcher (1 rank here); -pn -pr -pg -pf -ps are ignored, as in llm.c" "$dir/pn.out" &&
    ./train_gpt2 "${base[@]}" -x 1 -pm mpi -o "" > /dev/null 2>&1 &&
    pass "-pi mpi -pn 8 -pr 0 -pg 8 runs (ranks from the launcher, the rest ignored as in llm.c); -pm is -pi" ||
    fail "-pi mpi" "$(tail -2 "$dir/pn.out")"
# -pi tcp|fs (several processes without mpirun): test/test_launch.sh; here the one-process case and
# the flags' own checks.
./train_gpt2 "${base[@]}" -x 1 -pi tcp -ps 127.0.0.1 -o "" > "$dir/tcp1.out" 2>&1 && ! grep -q "^ranks:" "$dir/tcp1.out" \
    && pass "-pi tcp -pn 1 (the default): one process, nothing to meet" || fail "-pi tcp -pn 1" "$(tail -2 "$dir/tcp1.out")"
expect_error "-pi tcp without -ps" "flag -pi tcp needs -ps \(--nccl-server\)" "${base[@]}" -pi tcp -pn 2
expect_error "-pm fs without -pf" "flag -pi fs needs -pf \(--nccl-fs-path\)" "${base[@]}" -pm fs -pn 2
expect_error "-pi nonsense" "flag -pi \(--nccl-init\) expects mpi, tcp or fs" "${base[@]}" -pi udp
expect_error "-pn 0" "flags -pn, -pr, -pg must be positive" "${base[@]}" -pn 0

# --- -f (TF32): on by default, as llm.c's -f: TF32 matmuls on the FP32 GPU build, nothing elsewhere ---
grep -qE "^  -f, --tf32 .*\(default: 1\)$" "$dir/help.out" && pass "--help: -f defaults to 1 (llm.c's default)" ||
    fail "-f's default in --help" "$(grep -- '--tf32' "$dir/help.out")"
./train_gpt2 "${base[@]}" -x 1 -f 1 -o "" > /dev/null 2>&1 && pass "-f 1 on the C engine: accepted, no effect (as llm.c's -f outside FP32 GPU matmuls)" ||
    fail "-f 1 on the C engine" "refused"
expect_error "-f 2" "flag -f \(--tf32\) must be 0 or 1" "${base[@]}" -f 2
# The emulated device reports sm_90 and its cuBLASLt rounds fp32 operands to TF32 (10 explicit
# mantissa bits, to nearest even) under CUBLAS_COMPUTE_32F_FAST_TF32, as the tensor cores do; so the
# FP32 emulated trainer uses TF32 unless given -f 0.
# The bound, at step 1 (the weights still equal in both engines, only the forward's products differ):
# an operand rounded to 10 mantissa bits is off by at most 2^-11 relative, so a product of two is
# off by at most 2^-10 (2^-11 + 2^-11 + 2^-22, below 2^-10 + 2^-21: taken as 2^-10 with the fp32
# accumulation's few 2^-24 inside that slack); a matmul's output element by at most 2^-10 of the sum
# of its products' magnitudes. The forward crosses M = 4L + 1 of them (QKV, attention projection, MLP
# up and down per layer, the LM head; attention itself is not a cuBLASLt product), whose errors add
# to first order: the logits move by at most M 2^-10 |z| for products that do not cancel. The loss,
# log-sum-exp(z) - z_y, moves by at most 2 max |dz| (its gradient p - onehot has L1 norm <= 2), and
# at this untrained model's start 2 max |z| is below the loss itself: a logit is the final LayerNorm's
# output (norm sqrt(C)) times a row of wte (std 0.02: norm about 0.02 sqrt(C)), so |z| <~ 0.02 C =
# 0.64 for C = 32, against a loss of about ln 256 = 5.5. Hence |loss(TF32) - loss(C engine)| <=
# M 2^-10 loss: L = 1, M = 5, about 0.027. The run
# must also differ from -f 0 (TF32 is really used), and -f 0 stays fp32's: within 1e-5 of the C engine (relative).
if [ -x build/emu/train_gpt2_emu_fp32 ] && [ -x build/emu/train_gpt2_emu_fp16 ] && [ -x build/emu/train_gpt2_emu_bf16 ]; then
    tf32_losses() { grep '"train_loss"' "$1" | sed 's/.*"train_loss": \([^,]*\),.*/\1/' | tr '\n' ' '; }
    ./train_gpt2 "${base[@]}" -x 3 -o "$dir/tf32_c" > "$dir/tf32_c.out" 2>&1 || fail "-f: the C engine's run" "$(tail -2 "$dir/tf32_c.out")"
    for f in def 0 1; do
        fa=(-f $f)
        [ $f = def ] && fa=()
        build/emu/train_gpt2_emu_fp32 "${base[@]}" -x 3 "${fa[@]}" -o "$dir/tf32_$f" > "$dir/tf32_$f.out" 2>&1 ||
            fail "-f $f on the FP32 GPU engine" "$(tail -2 "$dir/tf32_$f.out")"
    done
    grep -q "^engine: GPU engine (fp32 with TF32 matmuls," "$dir/tf32_def.out" && grep -q "^engine: GPU engine (fp32 with TF32 matmuls," "$dir/tf32_1.out" &&
        grep -q "^engine: GPU engine (fp32, " "$dir/tf32_0.out" &&
        pass "the FP32 GPU engine (emulated, sm_90): the start-up report says \"with TF32 matmuls\" by default and with -f 1, not with -f 0" ||
        fail "-f: the engine line" "default: $(grep '^engine' "$dir/tf32_def.out"); -f 0: $(grep '^engine' "$dir/tf32_0.out")"
    # -ge: unset (-1), llm.c's rule by the GPU (its usage text; its main() keeps it as a comment): 2 on
    # sm_90 and newer, 0 before. The emulated device is an sm_90 H100, so the default run says "gelu
    # fusion 2"; the same run on the device made an sm_80 (CUDA_CPU_SM) says "gelu fusion 0".
    grep -qE "^engine: GPU engine \(fp32 with TF32 matmuls, gelu fusion 2\) on .*\(sm_90\)" "$dir/tf32_def.out" &&
        pass "-ge's default on the emulated sm_90 H100 is 2 (GELU in the matmul epilogues)" ||
        fail "-ge's default on sm_90" "$(grep '^engine' "$dir/tf32_def.out")"
    CUDA_CPU_SM=80 build/emu/train_gpt2_emu_fp32 "${base[@]}" -x 1 > "$dir/ge_sm80.out" 2>&1 &&
        grep -qE "^engine: GPU engine \(fp32 with TF32 matmuls, gelu fusion 0\) on .* as sm_80 .*\(sm_80\)" "$dir/ge_sm80.out" &&
        pass "-ge's default on an emulated sm_80 is 0 (GELU in its own kernels)" ||
        fail "-ge's default on sm_80" "$(grep '^engine' "$dir/ge_sm80.out"; tail -1 "$dir/ge_sm80.out")"
    lc=$(tf32_losses "$dir/tf32_c/log.jsonl"); ld=$(tf32_losses "$dir/tf32_def/log.jsonl")
    l0=$(tf32_losses "$dir/tf32_0/log.jsonl"); l1=$(tf32_losses "$dir/tf32_1/log.jsonl")
    [ -n "$ld" ] && [ "$ld" = "$l1" ] && pass "the FP32 GPU engine's default is -f 1: the same losses, bit for bit ($ld)" ||
        fail "-f default vs -f 1" "default: $ld; -f 1: $l1"
    awk -v c="$lc" -v t="$ld" -v z="$l0" -v L=1 'BEGIN { n = split(c, C, " "); split(t, T, " "); split(z, Z, " ")
        M = 4 * L + 1; bound = M * 2 ^ -10 * C[1]; d = T[1] - C[1]; if (d < 0) d = -d; d0 = Z[1] - C[1]; if (d0 < 0) d0 = -d0
        printf "step 1: TF32 %.9g, -f 0 %.9g, C engine %.9g: |TF32 - C| = %.3g <= M 2^-10 loss = %.3g, |-f 0 - C| = %.3g\n", T[1], Z[1], C[1], d, bound, d0
        exit !(n == 3 && T[1] != Z[1] && d <= bound && d0 <= 1e-5 * C[1]) }' > "$dir/tf32.txt" &&
        pass "TF32 by default: $(cat "$dir/tf32.txt")" || fail "TF32 against the C engine" "$(cat "$dir/tf32.txt")"
    for p in fp16 bf16; do
        build/emu/train_gpt2_emu_$p "${base[@]}" -x 2 -o "$dir/tf32_${p}_def" > "$dir/tf32_${p}_def.out" 2>&1 &&
            build/emu/train_gpt2_emu_$p "${base[@]}" -x 2 -f 0 -o "$dir/tf32_${p}_0" > "$dir/tf32_${p}_0.out" 2>&1 &&
            ! grep -q "TF32" "$dir/tf32_${p}_def.out" && [ -n "$(tf32_losses "$dir/tf32_${p}_def/log.jsonl")" ] &&
            [ "$(tf32_losses "$dir/tf32_${p}_def/log.jsonl")" = "$(tf32_losses "$dir/tf32_${p}_0/log.jsonl")" ] &&
            pass "the ${p^^} GPU engine: -f's default changes nothing (16-bit operands; the losses of -f 0, bit for bit)" ||
            fail "-f on ${p^^}" "$(grep '^engine' "$dir/tf32_${p}_def.out"); $(tf32_losses "$dir/tf32_${p}_def/log.jsonl") vs $(tf32_losses "$dir/tf32_${p}_0/log.jsonl")"
    done
else
    echo "SKIP -f on the GPU engine: build/emu/train_gpt2_emu_fp32/_fp16/_bf16 are not built (no CUDA headers for the CPU runtime)"
fi

# --- llm.c's defaults: every flag llm.c has, with llm.c's default (its train_gpt2.cu) --------------
# --help's "(default: X)" for each; -e, -i, -j (no llm.c files here) differ.
"$PY" - "$dir/help.out" <<'PYEOF' && pass "--help: llm.c's defaults (-l 3e-4 -u 0 -q 1.0 -t 1024 -b 4 -v 20 -m 20 -s 20 -g 64 -r 1 -o none -sf 1 -lg -1 -ge -1 ...)" || fail "llm.c's defaults in --help" "see above"
import re, sys
want = {"-l": "3e-4", "-u": "0", "-q": "1.0", "-t": "1024", "-b": "4", "-v": "20", "-m": "20", "-s": "20", "-g": "64",
        "-r": "1", "-o": '""', "-sf": "1", "-lg": "-1", "-k": "cosine", "-c": "0.0", "-x": "-1", "-d": "-1", "-n": "0",
        "-nk": "0", "-nm": "0", "-y": "0", "-z": "0", "-a": "0", "-h": "0", "-w": "1", "-pi": "mpi", "-pn": "1",
        "-pr": "0", "-pg": "8", "-sl": "0", "-sg": "0", "-pf": '""', "-ps": '""', "-f": "1", "-ge": "-1"}
got = {}
for line in open(sys.argv[1]):
    m = re.match(r"^  (-[a-z]+), --\S+ .*\(default: (.*)\)$", line)
    if m: got[m.group(1)] = m.group(2)
bad = [f"{f}: {got.get(f)} (llm.c: {v})" for f, v in want.items() if got.get(f) != v]
if bad: print("; ".join(bad)); sys.exit(1)
PYEOF
grep -q "^minutes on a laptop CPU), with the built-in run's preset: -o out -t 64 -l 2e-3 -u 50 -q 0.1 -v 100 -s 100 -sf 0 -r 0\.$" "$dir/help.out" &&
    grep -q "^Any run on the built-in corpus with a fresh model (no -i, -j or model file for -e; not --plan) takes the$" "$dir/help.out" &&
    pass "--help names the built-in run's preset and the runs it fills" || fail "the preset in --help" "$(grep -m2 preset "$dir/help.out")"
# The start-up report of a run with arguments: llm.c's schedule, no output dir, shuffled (a scratch
# working dir: nothing may appear in it).
mkdir -p "$dir/cwd_def"
root=$PWD
(cd "$dir/cwd_def" && "$root/train_gpt2" -e "$dir/m.bin" -i "$dir/train.bin" -b 2 -t 16 -x 2 > "$dir/def.out" 2>&1) &&
    grep -q "^steps: 2 | .* | lr 0.0003 cosine warmup 0 final 1 |" "$dir/def.out" &&
    grep -q "^output: none (no -o, llm.c's default): no checkpoints, log.jsonl or main.log are written$" "$dir/def.out" &&
    grep -q "^train: .*per epoch, shuffled, -sf 1)" "$dir/def.out" && grep -q "^generating:" "$dir/def.out" &&
    [ -z "$(ls -A "$dir/cwd_def")" ] &&
    pass "a run with arguments: lr 3e-4, no warmup, no decay, shuffled, a sample at the end, no output dir (one line says so, nothing written)" ||
    fail "llm.c's defaults at start-up" "$(grep -E '^(steps|output|train|error)' "$dir/def.out" | tr '\n' ' '); in the dir: $(ls -A "$dir/cwd_def")"
expect_error "-t's default (1024) over the model's 64 positions: one line naming -t" \
    "^error: flag -t \(sequence length\) is 1024 \(its default, llm.c's\), the model's maximum is 64; pass -t 64 or less$" \
    -e "$dir/m.bin" -i "$dir/train.bin" -x 1
expect_error "-y 1 without -o (there is none by default): one line naming -y and -o" "flag -y 1 \(--resume\) needs an output dir \(-o\)" \
    "${base[@]}" -x 1 -y 1
expect_error "-n without -o: one line naming -n and -o" "flag -n \(--checkpoint-every\) needs an output dir \(-o\)" "${base[@]}" -x 1 -n 1
# -r: 1 is llm.c's default. The C engine keeps every activation: the default is no error there; a
# given -r 1 is refused (test_defects.sh); the planner and the GPU engine recompute GELU.
./train_gpt2 "${base[@]}" -x 1 --engine cpu -o "" > "$dir/r.out" 2>&1 && pass "-r's default on the C engine: no error" ||
    fail "-r's default on the C engine" "$(tail -1 "$dir/r.out")"
./train_gpt2 --plan -e d2 -t 64 | grep -q "^memory plan: .* recompute 1 (GELU)" && ./train_gpt2 --plan -e d2 -t 64 -r 0 | grep -q "^memory plan: .* recompute 0 " &&
    pass "--plan: -r 1 by default (recompute 1, GELU), -r 0 when given" || fail "--plan's -r" "$(./train_gpt2 --plan -e d2 -t 64 | head -1)"
if [ -x build/emu/train_gpt2_emu_fp32 ]; then
    build/emu/train_gpt2_emu_fp32 "${base[@]}" -x 1 -o "" > "$dir/r_gpu.out" 2>&1 && grep -q "^recompute: level 1 " "$dir/r_gpu.out" &&
        pass "the GPU engine (emulated) recomputes GELU by default: its report says level 1" ||
        fail "the GPU engine's -r default" "$(grep -m1 '^recompute\|^error' "$dir/r_gpu.out")"
else
    echo "SKIP -r's default on the GPU engine: build/emu/train_gpt2_emu_fp32 is not built (no CUDA headers for the CPU runtime)"
fi
# Shuffling, on by default: seeded by -S (the same run twice: the same batches), another order than -sf 0.
sf_losses() { grep '"train_loss"' "$1/log.jsonl" 2> /dev/null | sed 's/.*"train_loss": \([^,]*\),.*/\1/' | tr '\n' ' '; }
for r in "def:" "def2:" "sf1:-sf 1" "sf0:-sf 0" "seed:-S 7"; do
    ./train_gpt2 "${base[@]}" -x 4 ${r#*:} -o "$dir/sf_${r%%:*}" > "$dir/sf_${r%%:*}.out" 2>&1 || fail "shuffle run ${r%%:*}" "$(tail -1 "$dir/sf_${r%%:*}.out")"
done
[ -n "$(sf_losses "$dir/sf_def")" ] && [ "$(sf_losses "$dir/sf_def")" = "$(sf_losses "$dir/sf_def2")" ] &&
    [ "$(sf_losses "$dir/sf_def")" = "$(sf_losses "$dir/sf_sf1")" ] && [ "$(sf_losses "$dir/sf_def")" != "$(sf_losses "$dir/sf_sf0")" ] &&
    [ "$(sf_losses "$dir/sf_def")" != "$(sf_losses "$dir/sf_seed")" ] &&
    pass "shuffling is on by default: the same losses as -sf 1 and as a second run, others than -sf 0's and -S 7's" ||
    fail "default shuffle" "default: $(sf_losses "$dir/sf_def"); again: $(sf_losses "$dir/sf_def2"); -sf 1: $(sf_losses "$dir/sf_sf1"); -sf 0: $(sf_losses "$dir/sf_sf0"); -S 7: $(sf_losses "$dir/sf_seed")"
# -sf is recorded: a checkpoint of a -sf 0 run resumes without -sf (its value adopted, bit for bit
# as the straight run), and a given -sf 1 against it is refused in one line.
./train_gpt2 "${base[@]}" -x 6 -n 3 -sf 0 -o "$dir/sfr" > /dev/null 2>&1
mkdir -p "$dir/sfr_straight" && cp "$dir/sfr/log.jsonl" "$dir/sfr_straight/"
rm -f "$dir/sfr/model_00000006.bin" "$dir/sfr/state_00000006.bin" "$dir/sfr/DONE_00000006" "$dir/sfr/run_complete"
./train_gpt2 "${base[@]}" -x 6 -n 3 -o "$dir/sfr" -y 1 > "$dir/sfr.out" 2>&1 &&
    grep -q "^resume: -sf 0, as the checkpoint's run had it (the default is 1; give the flag to check it)$" "$dir/sfr.out" &&
    grep -q "^train: .*in order, -sf 0)" "$dir/sfr.out" && [ -n "$(sf_losses "$dir/sfr")" ] && [ "$(sf_losses "$dir/sfr")" = "$(sf_losses "$dir/sfr_straight")" ] &&
    pass "a -sf 0 checkpoint resumes without -sf: -sf 0 adopted (one line says so), its losses as the straight run's" ||
    fail "resume of a -sf 0 checkpoint without -sf" "$(grep -E '^(resume|train|error)' "$dir/sfr.out" | tr '\n' ' ')"
rm -f "$dir/sfr/model_00000006.bin" "$dir/sfr/state_00000006.bin" "$dir/sfr/DONE_00000006" "$dir/sfr/run_complete"
expect_error "a given -sf 1 against a -sf 0 checkpoint: one line naming -sf and the recorded 0" \
    "flag -sf \(--shuffle\) is 1 in this run but was 0 in the run that wrote the checkpoint" "${base[@]}" -x 6 -n 3 -sf 1 -o "$dir/sfr" -y 1
./train_gpt2 "${base[@]}" -x 6 -n 3 -sf 0 -o "$dir/sfr" -y 1 > /dev/null 2>&1 && pass "a given -sf 0 equal to the record resumes" ||
    fail "-sf 0 given on resume" "refused"

# --- llm.c's tokenizer file (gpt2_tokenizer.bin, magic 20240328): decodes samples, cannot encode ---
"$PY" - "$dir" <<'PYEOF'
import struct, sys
d = sys.argv[1]
# GPT-2's byte tokens: the bytes it prints as themselves first, then the rest (ids 188-255).
printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
order = printable + [b for b in range(256) if b not in printable]
toks = [bytes([b]) for b in order] + [b"w%03d" % i for i in range(256, 511)] + [b"<|endoftext|>"]
def write(path, toks, version=2, eot=511, cut=0):
    data = struct.pack("<256I", 20240328, version, len(toks), eot, *([0] * 252))
    data += b"".join(bytes([len(t)]) + t for t in toks)
    open(path, "wb").write(data[:len(data) - cut])
write(d + "/llmc_tok.bin", toks)
write(d + "/llmc_tok_v1.bin", toks, version=1)
write(d + "/llmc_tok_cut.bin", toks, cut=5)
open(d + "/ids.txt", "w").write("0 256 300 511 72 220 510\n")
want = b"".join(toks[i] for i in (0, 256, 300, 511, 72, 220, 510))
open(d + "/want.bin", "wb").write(want)
PYEOF
build/tokenize --decode --tokenizer "$dir/llmc_tok.bin" "$dir/ids.txt" > "$dir/got.bin" 2> "$dir/tok.err" &&
    cmp -s "$dir/got.bin" "$dir/want.bin" && pass "llm.c's tokenizer file decodes ids (build/tokenize --decode)" ||
    fail "llm.c's tokenizer decode" "$(cat "$dir/tok.err") / $(od -c "$dir/got.bin" | head -2)"
printf 'hello' > "$dir/hello.txt"
build/tokenize --tokenizer "$dir/llmc_tok.bin" "$dir/hello.txt" > /dev/null 2> "$dir/enc.err"
[ $? -eq 1 ] && [ "$(wc -l < "$dir/enc.err")" -eq 1 ] && grep -q "llmc_tok.bin is llm.c's (magic 20240328): it holds no merges, so it decodes samples (-K) but cannot encode" "$dir/enc.err" &&
    pass "llm.c's tokenizer file cannot encode: one line saying so" || fail "llm.c's tokenizer encode" "$(cat "$dir/enc.err")"
./train_gpt2 "${spike[@]}" -x 4 -s 4 -g 24 -K "$dir/llmc_tok.bin" > "$dir/ktok.out" 2>&1 &&
    grep -q "^samples: .*llmc_tok.bin (llm.c's tokenizer file: decoding only)" "$dir/ktok.out" &&
    [ "$(grep -A1 '^generating' "$dir/ktok.out" | tail -1 | grep -c '<[0-9]*>')" -eq 0 ] &&
    pass "-K llm.c's gpt2_tokenizer.bin decodes the samples" || fail "-K llm.c's tokenizer" "$(grep -m2 -E 'samples|error' "$dir/ktok.out")"
# Ours has a name of its own (data/vocab/gpt2_bpe.bin); a checkout whose `make vocab` wrote the old
# name (llm.c's gpt2_tokenizer.bin) is still found there. In a scratch working dir, without -K:
mkdir -p "$dir/cwd/data/vocab"
cp test/reliability/seeds/tokenizer/tiny.bin "$dir/cwd/data/vocab/gpt2_tokenizer.bin"
trainer=$PWD/train_gpt2
(cd "$dir/cwd" && "$trainer" "${spike[@]}" -x 1 -s 1 -g 2 > old.out 2>&1)
cp test/reliability/seeds/tokenizer/tiny.bin "$dir/cwd/data/vocab/gpt2_bpe.bin"
(cd "$dir/cwd" && "$trainer" "${spike[@]}" -x 1 -s 1 -g 2 > new.out 2>&1)
grep -q "^samples: data/vocab/gpt2_tokenizer.bin$" "$dir/cwd/old.out" && grep -q "^samples: data/vocab/gpt2_bpe.bin$" "$dir/cwd/new.out" &&
    pass "our tokenizer file is data/vocab/gpt2_bpe.bin; the old name is still found when it is the only one" ||
    fail "tokenizer file name" "$(grep -h '^samples\|error' "$dir/cwd/old.out" "$dir/cwd/new.out" | tr '\n' ' ')"
expect_error "llm.c's tokenizer, version 1 with 512 tokens" "llmc_tok_v1.bin \(llm.c's version 1\): vocabulary size 512, expected GPT-2's 50257" \
    "${spike[@]}" -x 1 -K "$dir/llmc_tok_v1.bin"
expect_error "llm.c's tokenizer, truncated" "llmc_tok_cut.bin \(llm.c's\) ends inside token 511" "${spike[@]}" -x 1 -K "$dir/llmc_tok_cut.bin"
exit $failed
