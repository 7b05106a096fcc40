#!/usr/bin/env bash
# test_trainer.sh: ./train_gpt2 end to end with the C engine: it learns, it resumes bit for
# bit, and every bad input ends with one clear error line and exit status 1.
set -u
. "$(dirname "$0")/lib.sh"

# write_shard PATH MAGIC VERSION COUNT_IN_HEADER TOKENS...: a shard, possibly malformed on purpose.
write_shard() {
    "$PY" - "$@" <<'PYEOF'
import struct, sys
path, magic, version, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
toks = [int(x) for x in sys.argv[5:]]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", magic, version, count, *([0] * 253)))
    f.write(struct.pack("<%dH" % len(toks), *toks))
PYEOF
}
# A learnable stream: a fixed cycle over 50 ids from across the vocabulary, with 5% noise.
"$PY" - "$dir" <<'PYEOF'
import random, struct, sys
d = sys.argv[1]
rng = random.Random(1)
cycle = [rng.randrange(50257) for _ in range(50)]
def stream(n, seed):
    r = random.Random(seed)
    return [r.randrange(50257) if r.random() < 0.05 else cycle[i % 50] for i in range(n)]
for name, n, seed in (("train", 40000, 2), ("val", 4000, 3)):
    toks = stream(n, seed)
    with open("%s/%s.bin" % (d, name), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))
PYEOF

# --- it learns -------------------------------------------------------------------------------
common=(-e d1 -i "$dir/train.bin" -j "$dir/val.bin" -b 4 -t 32 -v 10 -m 4 -s 0)
if ./train_gpt2 "${common[@]}" -x 30 -l 3e-3 -u 20 -o "$dir/learn" > "$dir/learn.out" 2>&1; then
    first=$(grep -m1 '"train_loss"' "$dir/learn/log.jsonl" | sed 's/.*"train_loss": \([^,]*\),.*/\1/')
    last=$(grep '"train_loss"' "$dir/learn/log.jsonl" | tail -1 | sed 's/.*"train_loss": \([^,]*\),.*/\1/')
    lines=$(grep -c '"train_loss"' "$dir/learn/log.jsonl")
    if "$PY" -c "import sys; sys.exit(0 if $last < $first - 3.0 else 1)"; then
        pass "trainer learns: loss $first -> $last over 30 steps"
    else
        fail "trainer learns" "loss $first -> $last"
    fi
    [ "$lines" -eq 30 ] && pass "log.jsonl has one train line per step" || fail "log.jsonl lines" "$lines train lines, expected 30"
    grep -q '"val_loss"' "$dir/learn/log.jsonl" && pass "log.jsonl has val lines" || fail "log.jsonl val" "no val_loss line"
    grep -qE '^step +30/30 \| loss [0-9.]+ \| norm [0-9.]+ \| lr [0-9.e+-]+ \| [0-9.]+ ms \| [0-9]+ tok/s' "$dir/learn.out" \
        && pass "step line format" || fail "step line format" "$(grep -m1 '^step' "$dir/learn.out")"
else
    fail "trainer learns" "exit $?: $(tail -3 "$dir/learn.out")"
fi

# --- resume bit for bit ----------------------------------------------------------------------
# Straight: 10 steps. Interrupted: the same run killed after its step-5 checkpoint (its later
# files removed), then a new process resumes and finishes. Shuffling, sampling and a cosine
# schedule are on so that the data position, the RNG and the step count all matter.
rs=("${common[@]}" -x 10 -n 5 -sf 1 -s 3 -g 8 -u 2 -l 1e-3 -q 0.1 -d 256)
./train_gpt2 "${rs[@]}" -o "$dir/straight" > "$dir/straight.out" 2>&1 || fail "resume: straight run" "$(tail -2 "$dir/straight.out")"
./train_gpt2 "${rs[@]}" -o "$dir/resumed" > "$dir/first.out" 2>&1 || fail "resume: first half" "$(tail -2 "$dir/first.out")"
rm -f "$dir/resumed/model_00000010.bin" "$dir/resumed/state_00000010.bin" "$dir/resumed/run_complete"
./train_gpt2 "${rs[@]}" -o "$dir/resumed" -y 1 > "$dir/second.out" 2>&1 || fail "resume: second half" "$(tail -2 "$dir/second.out")"
grep -q "resume: step 5" "$dir/second.out" && pass "resume: restarts at step 5" || fail "resume: restarts at step 5" "$(grep resume "$dir/second.out")"
grep -q "^log: $dir/resumed/log.jsonl keeps its lines up to step 5; 6 lines after it (to step 10, an earlier attempt's, trained again now) dropped" "$dir/second.out" \
    && pass "resume: one line says which log lines it drops (steps 6-10 and the val loss at 10)" || fail "resume: log line" "$(grep '^log:' "$dir/second.out")"
if cmp -s "$dir/straight/model_00000010.bin" "$dir/resumed/model_00000010.bin" &&
   cmp -s "$dir/straight/state_00000010.bin" "$dir/resumed/state_00000010.bin"; then
    pass "resume: final weights and optimizer state bit-identical"
else
    fail "resume: final weights and optimizer state bit-identical" "model or state files differ"
fi
losses() { grep '"train_loss"' "$1" | sed 's/, "ms".*//' | awk -F'[:,]' '$2 > 5'; }
straight_l=$(losses "$dir/straight/log.jsonl")
resumed_l=$(tail -n 6 "$dir/resumed/log.jsonl" | grep '"train_loss"' | sed 's/, "ms".*//')
if [ -n "$straight_l" ] && [ "$straight_l" = "$resumed_l" ]; then
    pass "resume: losses and norms of steps 6-10 bit-identical"
else
    fail "resume: losses of steps 6-10" "straight: $straight_l / resumed: $resumed_l"
fi
[ "$(grep -A3 '^generating' "$dir/straight.out" | tail -n 4)" = "$(grep -A3 '^generating' "$dir/second.out" | tail -n 4)" ] \
    && pass "resume: the last sample is identical" || fail "resume: the last sample" "samples differ"

# --- a finished run stays finished ----------------------------------------------------------------
# A run that reached its last step: -y 1 with its flags says it is complete, exits 0 and leaves its log
# byte for byte; a larger -x given goes on from its last checkpoint (the steps after it trained, the
# earlier lines kept); with -n 0 there is no checkpoint of its last step, and that is refused.
fin=("${common[@]}" -v 0 -n 2)
./train_gpt2 "${fin[@]}" -x 4 -o "$dir/fin" > /dev/null 2>&1
cp "$dir/fin/log.jsonl" "$dir/fin.log"
./train_gpt2 "${fin[@]}" -x 4 -o "$dir/fin" -y 1 > "$dir/fin.out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^run complete at step 4 ($dir/fin/run_complete): nothing to train" "$dir/fin.out" \
    && ! grep -q '^step ' "$dir/fin.out" && cmp -s "$dir/fin.log" "$dir/fin/log.jsonl" \
    && pass "a finished run: -y 1 says run complete at step 4, exit 0, trains nothing, log.jsonl unchanged" \
    || fail "a finished run and -y 1" "exit $rc: $(grep -E '^(run|resume|step|error)' "$dir/fin.out" | head -n 3)"
./train_gpt2 "${fin[@]}" -x 6 -o "$dir/fin" -y 1 > "$dir/fin6.out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "^resume: the run in $dir/fin is complete at step 4; -x 6 goes on from there" "$dir/fin6.out" \
    && grep -q "^resume: step 4 from " "$dir/fin6.out" && [ "$(grep -c '"train_loss"' "$dir/fin/log.jsonl")" = 6 ] \
    && [ "$(head -n 4 "$dir/fin/log.jsonl")" = "$(cat "$dir/fin.log")" ] \
    && ./train_gpt2 "${fin[@]}" -x 6 -o "$dir/fin" -y 1 2>&1 | grep -q "^run complete at step 6 " \
    && pass "a finished run: -y 1 -x 6 goes on from step 4's checkpoint to step 6, then is complete there" \
    || fail "a finished run and a larger -x" "exit $rc: $(grep -E '^(run|resume|error)' "$dir/fin6.out" | head -n 3)"
./train_gpt2 "${fin[@]}" -x 4 -n 0 -o "$dir/fin0" > /dev/null 2>&1
cp "$dir/fin0/log.jsonl" "$dir/fin0.log"
./train_gpt2 "${fin[@]}" -x 4 -n 0 -o "$dir/fin0" -y 1 > "$dir/fin0.out" 2>&1 \
    && ./train_gpt2 "${fin[@]}" -x 6 -n 0 -o "$dir/fin0" -y 1 > "$dir/fin0x.out" 2> "$dir/fin0x.err"
rc=$?
[ $rc = 1 ] && grep -q "^run complete at step 4 " "$dir/fin0.out" && [ "$(wc -l < "$dir/fin0x.err")" = 1 ] \
    && grep -q "flag -x 6: the run in $dir/fin0 is complete at step 4 but kept no checkpoint of that step (it kept none: -n 0)" "$dir/fin0x.err" \
    && cmp -s "$dir/fin0.log" "$dir/fin0/log.jsonl" \
    && pass "a finished run without checkpoints (-n 0): complete with -y 1; -x 6 refused in one line, its log unchanged" \
    || fail "a finished run with -n 0" "exit $rc: $(cat "$dir/fin0x.err") $(grep -E '^(run|error)' "$dir/fin0.out")"
# -x forgotten on a resume: the message says what -1 means.
./train_gpt2 "${fin[@]}" -o "$dir/fin" -y 1 > /dev/null 2> "$dir/finx.err"
[ $? = 1 ] && grep -q "flag -x (--steps) is -1 (one epoch of the train data) in this run but was 6" "$dir/finx.err" \
    && pass "-y 1 with -x left out: the error says -1 is one epoch" || fail "-x forgotten" "$(cat "$dir/finx.err")"

# --- bad input -------------------------------------------------------------------------------
write_shard "$dir/badmagic.bin" 12345 1 100 $(seq 1 100)
write_shard "$dir/short.bin" 20240520 1 500 $(seq 1 100)
write_shard "$dir/range.bin" 20240520 1 300 $(for i in $(seq 1 299); do echo 7; done) 60000
printf 'not a model' > "$dir/junk_model.bin"
./train_gpt2 "${common[@]}" -x 1 -n 1 -o "$dir/learn" > /dev/null 2>&1  # a d1 checkpoint for the mismatch case
head -c 5000 "$dir/learn/model_00000001.bin" > "$dir/trunc_model.bin"
# expect_error (test/lib.sh): its checks are named "bad input: NAME".
expect_prefix="bad input: "
base=(-e d1 -i "$dir/train.bin" -t 32 -x 1 -v 0 -s 0 -o "")
expect_error "B <= 0" "flag -b" "${base[@]}" -b 0
expect_error "T above the model's max" "flag -t .*maximum is 1024" "${base[@]}" -t 2048
expect_error "total batch not a multiple of B*T" "flag -d .*multiple" "${base[@]}" -b 4 -t 32 -d 1000
expect_error "unknown flag" "unknown flag '-Z'" "${base[@]}" -Z 3
# A long flag's value after '=' is read as the next word would be (--seq=2048 is -t 2048); a switch takes none.
expect_error "--seq=2048 is -t 2048" "flag -t .*maximum is 1024" "${base[@]}" --seq=2048
expect_error "a switch given a value" "flag --overwrite is a switch and takes no value, got '--overwrite=1'" "${base[@]}" --overwrite=1
expect_error "flag without a value" "flag -l .*needs a value" "${base[@]}" -l
expect_error "non-numeric value" "flag -l \(--lr\) expects a number, got 'abc'" "${base[@]}" -l abc
expect_error "non-integer value" "flag -b \(--batch\) expects an integer, got '4x'" "${base[@]}" -b 4x
expect_error "missing train file" "no data file matches .*missing" "${base[@]}" -i "$dir/missing_*.bin"
expect_error "missing model file" "flag -e: '.*nope.bin'" "${base[@]}" -e "$dir/nope.bin"
expect_error "data file with the wrong magic" "badmagic.bin has magic 12345, expected 20240520" "${base[@]}" -i "$dir/badmagic.bin"
expect_error "data file shorter than its header says" "short.bin is .* bytes but its header says 500 tokens" "${base[@]}" -i "$dir/short.bin"
expect_error "token id out of range" "range.bin: token 60000 .*out of range" "${base[@]}" -i "$dir/range.bin" -b 1 -t 299
expect_error "model file with the wrong magic" "junk_model.bin is too small|junk_model.bin has magic" "${base[@]}" -e "$dir/junk_model.bin"
expect_error "truncated model file" "trunc_model.bin is 5000 bytes, expected" "${base[@]}" -e "$dir/trunc_model.bin"
# -y 1 without a checkpoint starts the run (llm.c's meaning; test_llmc_flags.sh checks the rest).
./train_gpt2 "${base[@]}" -o "$dir/empty" -y 1 > "$dir/empty.out" 2>&1 && grep -q "^resume: no checkpoint in .*empty; starting the run" "$dir/empty.out" \
    && pass "-y 1 without a checkpoint starts the run" || fail "-y 1 without a checkpoint" "$(tail -2 "$dir/empty.out")"
expect_error "checkpoint of another model" "another model|different model" -e d2 -i "$dir/train.bin" -x 3 -v 0 -s 0 -o "$dir/learn" -y 1
expect_error "data too small for one batch" "holds 3 samples of T\+1 = 1025 tokens, fewer than one batch of B\*ranks = 64" "${base[@]}" -i "$dir/val.bin" -b 64 -t 1024
expect_error "negative learning rate" "flag -l .*non-negative" "${base[@]}" -l -1
exit $failed
