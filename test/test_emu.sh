#!/usr/bin/env bash
# test_emu.sh: the GPU trainer end to end through the CPU runtime (build/emu/train_gpt2_emu_*,
# train_gpt2.cu and its kernels on the CPU), against the C reference engine (--engine cpu):
# 10 steps with the same flags give the same losses (FP32 within 1e-4, FP16 and BF16 within
# 2e-2, and falling); a GPU-engine run resumes bit for bit in each precision; a planted FP16 overflow is skipped
# with the scale halved, in the step line and the log; a non-finite loss stops every precision
# with one clear line; --engine picks or refuses engines as it says.
set -u
. "$(dirname "$0")/lib.sh"
emu() { "build/emu/train_gpt2_emu_$1" "${@:2}"; }

# A 2-layer, 64-channel model with a 512-token vocabulary (head size 32), and learnable data.
$gen model "$dir/model.bin" 2 64 2 512 64 1 || { echo "FAIL emu: gen_data model"; exit 1; }
$gen shard "$dir/train.bin" 40000 512 2 && $gen shard "$dir/val.bin" 4000 512 3 || { echo "FAIL emu: gen_data shard"; exit 1; }
common=(-e "$dir/model.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 4 -t 32 -v 5 -m 2 -s 0 -x 10 -l 3e-3 -u 2 -c 0.1)

losses() { grep '"train_loss"' "$1" | sed 's/.*"train_loss": \([^,]*\),.*/\1/'; }

# --- the same 10 steps on both engines -----------------------------------------------------------
# -f 0: plain fp32 products in the FP32 build (TF32 is the default on the emulated sm_90, as llm.c's
# -f 1), so its losses can be held to 1e-4; no effect on FP16 and BF16.
./train_gpt2 --engine cpu "${common[@]}" -o "$dir/cpu" > "$dir/cpu.out" 2>&1 || fail "C engine run" "$(tail -2 "$dir/cpu.out")"
for p in fp32 fp16 bf16; do
    start=$(date +%s%N)
    if ! emu $p "${common[@]}" -f 0 -o "$dir/$p" > "$dir/$p.out" 2>&1; then
        fail "emu $p: 10 steps" "$(tail -3 "$dir/$p.out")"
        continue
    fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    grep -q "^engine: GPU engine ($p" "$dir/$p.out" && pass "emu $p: runs the GPU engine ($ms ms for 10 steps)" \
        || fail "emu $p: engine line" "$(grep '^engine' "$dir/$p.out")"
    tol=2e-2
    [ $p = fp32 ] && tol=1e-4
    report=$(paste <(losses "$dir/cpu/log.jsonl") <(losses "$dir/$p/log.jsonl") | awk -v tol=$tol '
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > worst) worst = d; if (n == 1) first = $2; last = $2 }
        END { printf "%d %.3g %s %s\n", n, worst, first, last; exit !(n == 10 && worst <= tol && last < first - 1) }')
    if [ $? -eq 0 ]; then
        pass "emu $p: 10 losses within $tol of the C engine's and falling (steps, worst, first, last: $report)"
    else
        fail "emu $p: losses vs the C engine (tolerance $tol)" "steps, worst, first, last: $report"
    fi
done
grep -qE '^step +10/10 .* \| scale 65536$' "$dir/fp16.out" && pass "emu fp16: the step line shows the loss scale" \
    || fail "emu fp16: loss scale in the step line" "$(grep -m1 '^step' "$dir/fp16.out")"
grep -q '"loss_scale": 65536, "skipped": 0' "$dir/fp16/log.jsonl" && pass "emu fp16: the log has the loss scale" \
    || fail "emu fp16: log fields" "$(head -c 300 "$dir/fp16/log.jsonl")"
grep -q '| scale' "$dir/bf16.out" && fail "emu bf16: no loss scale" "bf16 printed a scale" || pass "emu bf16: no loss scaling"
# No MFU on the emulated device, and the start-up report says why (a GPU's peak: common/gpu_peak.c).
grep -q '^mfu: not shown: an emulated device .*tokens/s' "$dir/fp16.out" && ! grep -q '| MFU' "$dir/fp16.out" \
    && pass "emu: the mfu line says why there is no MFU ($(grep '^mfu:' "$dir/fp16.out" | cut -c1-60)...)" \
    || fail "emu: mfu line" "$(grep -m1 '^mfu' "$dir/fp16.out")"

# --- resume of the GPU engine, bit for bit, in each precision ------------------------------------
rs=("${common[@]}" -x 6 -n 3 -sf 1 -s 3 -g 6 -v 0)
tail3() { tail -n 3 "$1" | sed 's/, "ms".*//'; }
last_sample() { grep -A2 '^generating' "$1" | tail -n 1; }
for p in fp32 fp16 bf16; do
    r="$dir/resume_$p"
    emu $p "${rs[@]}" -o "$r/straight" > "$r.straight.out" 2>&1 || fail "emu $p resume: straight run" "$(tail -2 "$r.straight.out")"
    emu $p "${rs[@]}" -o "$r/resumed" > /dev/null 2>&1 || fail "emu $p resume: first run" "exit $?"
    rm -f "$r/resumed/model_00000006.bin" "$r/resumed/state_00000006.bin" "$r/resumed/run_complete"
    emu $p "${rs[@]}" -o "$r/resumed" -y 1 > "$r.second.out" 2>&1 || fail "emu $p resume: second half" "$(tail -2 "$r.second.out")"
    if cmp -s "$r/straight/model_00000006.bin" "$r/resumed/model_00000006.bin" &&
       cmp -s "$r/straight/state_00000006.bin" "$r/resumed/state_00000006.bin"; then
        pass "emu $p resume: final weights, optimizer state and loss scale bit-identical"
    else
        fail "emu $p resume" "model or state files differ"
    fi
    [ "$(tail3 "$r/straight/log.jsonl" | grep -c '"step": [456],')" -eq 3 ] && [ "$(tail3 "$r/straight/log.jsonl")" = "$(tail3 "$r/resumed/log.jsonl")" ] \
        && pass "emu $p resume: losses of steps 4-6 bit-identical" || fail "emu $p resume: losses" "logs differ"
    [ -n "$(last_sample "$r.straight.out")" ] && [ "$(last_sample "$r.straight.out")" = "$(last_sample "$r.second.out")" ] \
        && pass "emu $p resume: the last sample is identical" || fail "emu $p resume: sample" "samples differ"
done

# --- activation recompute: the same run at every level, bit for bit ---------------------------------
# At -ge 0: at -r 0 with -ge 1 or 2 the forward GELU comes from cuBLASLt's epilogue, which rounds
# differently from the kernel a recompute re-runs (docs/memory.md). At -ge's default (2 on this
# emulated sm_90) levels 1-3 still agree with each other: each runs the GELU kernel forward and
# the epilogue's GELU backward.
for r in 0 1 2 3; do
    emu fp16 "${common[@]}" -x 4 -v 0 -r $r -ge 0 --recompute-every 1 -o "$dir/r$r" > "$dir/r$r.out" 2>&1 || fail "emu -r $r" "$(tail -2 "$dir/r$r.out")"
done
for r in 1 3; do
    emu fp16 "${common[@]}" -x 4 -v 0 -r $r --recompute-every 1 -o "$dir/g$r" > "$dir/g$r.out" 2>&1 || fail "emu -r $r (-ge default)" "$(tail -2 "$dir/g$r.out")"
done
strip() { sed 's/, "ms".*//' "$1"; }
same=1
for r in 1 2 3; do [ -s "$dir/r0/log.jsonl" ] && [ "$(strip "$dir/r0/log.jsonl")" = "$(strip "$dir/r$r/log.jsonl")" ] || same=0; done
[ $same -eq 1 ] && pass "emu fp16 -ge 0: recompute levels 1, 2, 3 give level 0's losses and norms bit for bit" \
    || fail "emu fp16 recompute" "logs differ from level 0's"
grep -q "gelu fusion 2" "$dir/g1.out" && [ -s "$dir/g1/log.jsonl" ] && [ "$(strip "$dir/g1/log.jsonl")" = "$(strip "$dir/g3/log.jsonl")" ] &&
    [ "$(strip "$dir/g1/log.jsonl")" != "$(strip "$dir/r1/log.jsonl")" ] &&
    pass "emu fp16 at -ge's default (2 here): recompute levels 1 and 3 agree bit for bit (and differ from -ge 0's)" ||
    fail "emu fp16 recompute at -ge's default" "$(grep -m1 '^engine' "$dir/g1.out"); levels 1 and 3: $(strip "$dir/g1/log.jsonl" | tail -1) / $(strip "$dir/g3/log.jsonl" | tail -1)"
grep -qE '^recompute: level 3 \| activations by level: 0: .* MiB, 1: .* MiB, 2: .* MiB, 3: .* MiB' "$dir/r3.out" \
    && pass "emu: the start-up report prints each recompute level's activation bytes" \
    || fail "emu: recompute line" "$(grep -m1 '^recompute' "$dir/r3.out")"

# --- a planted overflow: a loss scale of 2^40 overflows fp16 at once --------------------------------
emu fp16 "${common[@]}" -x 3 -v 0 --loss-scale 1099511627776 -o "$dir/overflow" > "$dir/overflow.out" 2>&1 \
    || fail "emu fp16 overflow run" "$(tail -2 "$dir/overflow.out")"
grep -qE '^step +1/3 .*\| scale 1.09951e\+12 \| skipped: non-finite gradients' "$dir/overflow.out" \
    && pass "emu fp16 overflow: step 1 is skipped and says so" || fail "emu fp16 overflow: step line" "$(grep -m1 '^step' "$dir/overflow.out")"
grep -q '"step": 2, .*"loss_scale": 5.49755814e+11, "skipped": 1' "$dir/overflow/log.jsonl" \
    && pass "emu fp16 overflow: the scale halves and the log records the skip" \
    || fail "emu fp16 overflow: log" "$(sed -n 2p "$dir/overflow/log.jsonl")"

# --- a non-finite loss stops every precision (a learning rate of 1e30: NaN at step 2; a model file
# holding NaN is refused at start-up, test/reliability/test_defects.sh) ---------------------------
for p in fp32 fp16 bf16; do
    emu $p "${common[@]}" -l 1e30 -u 0 -G 0 -v 0 -o "" > /dev/null 2> "$dir/nan.err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l < "$dir/nan.err")" -eq 1 ] && grep -q "loss is nan at step 2: training diverged" "$dir/nan.err"; then
        pass "emu $p: a NaN loss stops with one line and exit 1"
    else
        fail "emu $p: NaN loss" "exit $rc: $(head -c 200 "$dir/nan.err")"
    fi
done

# --- choosing the engine -------------------------------------------------------------------------
emu fp16 "${common[@]}" -x 1 -v 0 --engine cpu -o "" > "$dir/pick.out" 2>&1
grep -q "^engine: C reference engine" "$dir/pick.out" && pass "emu --engine cpu runs the C engine" \
    || fail "emu --engine cpu" "$(grep '^engine' "$dir/pick.out")"
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi > /dev/null 2>&1; then
    ./train_gpt2 "${common[@]}" -x 1 --engine gpu -o "" > /dev/null 2> "$dir/gpu.err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l < "$dir/gpu.err")" -eq 1 ] && grep -q "flag --engine gpu: no usable GPU" "$dir/gpu.err"; then
        pass "./train_gpt2 --engine gpu without a GPU: one clear line, exit 1"
    else
        fail "./train_gpt2 --engine gpu without a GPU" "exit $rc: $(head -c 200 "$dir/gpu.err")"
    fi
fi
./train_gpt2 "${common[@]}" -x 1 -r 4 -o "" > /dev/null 2> "$dir/bad.err"
grep -q "flag -r (recompute) must be 0, 1, 2 or 3, got 4" "$dir/bad.err" && pass "-r 4 is refused naming the flag" \
    || fail "-r bad value" "$(cat "$dir/bad.err")"
./train_gpt2 "${common[@]}" -x 1 --engine tpu -o "" > /dev/null 2> "$dir/bad.err"
grep -q "flag --engine expects auto, gpu or cpu, got 'tpu'" "$dir/bad.err" && pass "--engine with a bad value names the flag" \
    || fail "--engine bad value" "$(cat "$dir/bad.err")"
# --- the emulated device says what it is, with the memory it was given ----------------------------
CUDA_CPU_DEVICE_MEMORY=48GiB emu fp16 "${common[@]}" -x 1 -v 0 -o "" > "$dir/48.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^engine: GPU engine .* on cuda_cpu emulation of an NVIDIA H100 SXM with 48 GiB (sm_90)" "$dir/48.out" &&
    pass "CUDA_CPU_DEVICE_MEMORY=48GiB: the device names itself emulated, with 48 GiB" ||
    fail "emulated device name" "exit $rc: $(grep '^engine' "$dir/48.out")"
CUDA_CPU_DEVICE_MEMORY=48GB emu fp16 "${common[@]}" -x 1 -v 0 -o "" > "$dir/48.out" 2>&1
grep -q "emulation of an NVIDIA H100 SXM with 44.70 GiB" "$dir/48.out" &&
    pass "CUDA_CPU_DEVICE_MEMORY=48GB is decimal (44.70 GiB), as card makers count" ||
    fail "decimal size" "$(grep '^engine' "$dir/48.out")"
CUDA_CPU_DEVICE_MEMORY=48 emu fp16 "${common[@]}" -x 1 -v 0 -o "" > /dev/null 2> "$dir/bad.err"
rc=$?
[ $rc -eq 1 ] && grep -q "GPU memory\|out of memory\|does not fit" "$dir/bad.err" &&
    pass "CUDA_CPU_DEVICE_MEMORY=48 (bytes): the run does not fit and says so, exit 1" ||
    fail "48 bytes of device memory" "exit $rc: $(head -c 300 "$dir/bad.err")"
# A bad value of the runtime's settings: one line naming it, exit 1.
env_refused() {  # VAR=VALUE, what the line says is expected, the check's name
    env "$1" "build/emu/train_gpt2_emu_fp16" "${common[@]}" -x 1 -v 0 -o "" > /dev/null 2> "$dir/bad.err"
    local rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l < "$dir/bad.err")" -eq 1 ] && grep -q "^error: $1: expected $2" "$dir/bad.err" &&
        pass "$3: one line naming it, exit 1" || fail "$3" "exit $rc: $(cat "$dir/bad.err")"
}
env_refused CUDA_CPU_DEVICE_MEMORY=48XB "a size" "CUDA_CPU_DEVICE_MEMORY with a bad unit"
# CUDA_CPU_SM: the compute capability (test_llmc_flags.sh runs an sm_80).
env_refused CUDA_CPU_SM=9.0 "a compute capability" "CUDA_CPU_SM not a compute capability"
exit $failed
