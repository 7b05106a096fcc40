#!/usr/bin/env bash
# test_default_run.sh: the main job as a newcomer runs it, `./train_gpt2` with no data flags (the
# built-in corpus, made on first use, offline), with no argument at all (its own preset), in a scratch
# working dir (its own data/cache, no tokenizer file, its out/):
#   - the real default schedule, stopped by SIGINT after step 150 (the whole epoch is
#     test_default_run_full.sh): the data and engine lines; after the warm-up no
#     step's loss above the first step's, and no gradient norm above 20 (the run before the default
#     learning rate and warm-up changed: loss 20.0 at step 25, norms 50-87); elapsed time and an
#     estimate of what is left on the step line; the step-100 sample is text;
#   - byte-level samples are drawn from byte tokens only: an untrained model, which spreads its
#     probability over GPT-2's whole vocabulary, prints no <id> in 200 sampled tokens.
# In make test-long (about a minute of CPU): make test's built-in runs are test_builtin_flags.sh's (the
# start-up lines, the step line) and test_vocab_resume.sh's.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$dir"' EXIT
mkdir -p "$dir/cwd"
cd "$dir/cwd"
TRAIN=$ROOT/train_gpt2
[ -x "$PY" ] || PY=python3
NOTOK=$dir/no_tokenizer.bin  # a -K that does not exist: the byte-level corpus, whatever data/vocab holds

# --- the default schedule, the first 150 steps ------------------------------------------------------
# `./train_gpt2` with no argument at all (its own preset, not llm.c's defaults): the scratch working
# dir has no tokenizer file (the byte-level corpus) and takes its out/.
STOP_AT=150
"$TRAIN" > "$dir/default.out" 2>&1 &
pid=$!
# Stop it once step 150 is printed (a hang guard of 20 minutes, not a speed check).
for _ in $(seq 1 6000); do
    grep -qE "^step +$STOP_AT/" "$dir/default.out" 2> /dev/null && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.2
done
kill -INT "$pid" 2> /dev/null
wait "$pid"
rc=$?
pid=""
out=$dir/default.out
[ $rc = 130 ] && pass "default run stopped by SIGINT after step $STOP_AT (exit 130)" \
    || fail "default run" "exit $rc (expected 130 after SIGINT): $(tail -n 3 "$out")"
grep -q '^data: the built-in corpus' "$out" && pass "default run says which data it uses" || fail "data line" "no 'data:' line"
grep -qE '^engine: (no usable GPU|GPU engine|C reference)' "$out" && pass "default run says which engine it uses" \
    || fail "engine line" "no engine line"
[ -f "$dir/cwd/out/log.jsonl" ] && pass "the no-argument run logs into out/ (its preset's -o out)" \
    || fail "the no-argument run's output dir" "no out/log.jsonl: $(ls "$dir/cwd")"
grep -q '^data: the built-in corpus (generated stories, [0-9]* documents; byte-level' "$out" && pass "the no-argument run takes the byte-level corpus here (no tokenizer file)" \
    || fail "no-argument run's corpus" "$(grep -m1 '^data:' "$out")"
r=$("$PY" - "$dir/cwd/out/log.jsonl" "$out" <<'EOF'
import json, re, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"train_loss"' in l]
text = open(sys.argv[2]).read()
warmup = int(re.search(r"warmup (\d+)", text).group(1))
if len(steps) < 150: print(f"only {len(steps)} steps logged"); sys.exit(1)
first = steps[0]["train_loss"]
after = [s for s in steps if s["step"] > warmup]
worst = max(after, key=lambda s: s["train_loss"])
norm = max(steps, key=lambda s: s["grad_norm"])
bad = []
if worst["train_loss"] >= first: bad.append(f"loss {worst['train_loss']:.3f} at step {worst['step']} after the warm-up of {warmup}, start {first:.3f}")
if norm["grad_norm"] > 20: bad.append(f"gradient norm {norm['grad_norm']:.1f} at step {norm['step']}")
if steps[-1]["train_loss"] > first - 6: bad.append(f"loss {first:.2f} -> {steps[-1]['train_loss']:.2f} only")
if bad: print("; ".join(bad)); sys.exit(1)
print(f"loss {first:.2f} -> {steps[-1]['train_loss']:.2f} in {len(steps)} steps, at most {worst['train_loss']:.2f} after the "
      f"warm-up of {warmup} (step {worst['step']}), gradient norm at most {norm['grad_norm']:.2f} (step {norm['step']})")
EOF
) && pass "default run learns smoothly: $r" || fail "default run learns smoothly" "$r"
grep -qE "^step +$STOP_AT/[0-9]+ .*[0-9]+ tok/s \| [0-9]+:[0-9]{2} elapsed, eta [0-9]+:[0-9]{2}" "$out" \
    && pass "the step line shows elapsed time and an estimate of what is left ($(grep -m1 -E "^step +$STOP_AT/" "$out" | sed 's/.*tok\/s | //'))" \
    || fail "elapsed and eta" "$(grep -m1 -E "^step +$STOP_AT/" "$out")"
grep -q '^stopped by SIGINT after step' "$out" && pass "default run: SIGINT says where it stopped" || fail "SIGINT line" "$(tail -n 2 "$out")"
# The step-100 sample: decoded text, mostly letters and spaces, no token ids.
sample=$(awk '/^generating:/{getline; s=""; on=1; next} on && /^---$/{print s; on=0; next} on{s=s $0}' "$out" | head -n 1)
letters=$(printf '%s' "$sample" | tr -cd 'a-zA-Z ' | wc -c)
[ "$letters" -ge 40 ] && ! printf '%s' "$sample" | grep -qE '<[0-9]+>' \
    && pass "default run's step-100 sample is text: ${sample:0:60}" || fail "step-100 sample" "'$sample'"

# --- byte-level samples draw byte tokens only -----------------------------------------------------
"$TRAIN" -K "$NOTOK" -t 64 -x 1 -s 1 -g 200 -v 0 -o "" > "$dir/untrained.out" 2>&1
sample=$(awk '/^generating:/{getline; s=""; on=1; next} on && /^---$/{print s; on=0; next} on{s=s $0}' "$dir/untrained.out" | tr -d '\000')
ids=$(printf '%s' "$sample" | grep -oE '<[0-9]+>' | wc -l)
grep -q '^samples: .*drawn from the 256 byte tokens and end-of-text' "$dir/untrained.out" && [ "$ids" = 0 ] && [ -n "$sample" ] \
    && pass "byte-level run: an untrained model's 200 sampled tokens are all bytes or end-of-text (no <id>)" \
    || fail "byte-level sampling" "$ids token ids in: ${sample:0:120}"
exit $failed
