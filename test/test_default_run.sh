#!/usr/bin/env bash
# test_default_run.sh (make test-long, a few minutes on 2 cores): the main job as a newcomer runs it,
# `./train_gpt2` with no argument at all (its own preset), on the built-in corpus (made on first use,
# offline), in a scratch working dir (its own data/cache, no tokenizer file, so the byte-level corpus,
# and its out/), the whole epoch:
#   - the data and engine lines; it logs into out/; the step line shows elapsed time and an estimate
#     of what is left; the end says how long it took;
#   - it learns smoothly: after the warm-up no step's loss is above the first step's and no gradient
#     norm above 20 (the run before the default learning rate and warm-up changed: loss 20.0 at step
#     25, norms 50-87); the last val loss is under 1.0 (the grammar is learnable: 0.43 with the old
#     defaults);
#   - every sample is text (decoded, no token ids; the last mostly letters);
#   - byte-level samples are drawn from byte tokens only: an untrained model, which spreads its
#     probability over GPT-2's whole vocabulary, prints no <id> in 200 sampled tokens.
# make test's built-in runs are test_builtin_flags.sh's (the start-up lines, the step line) and
# test_vocab_resume.sh's; SIGINT's stop is test_defects.sh's.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
TRAIN=$ROOT/train_gpt2
[ -x "$PY" ] || PY=python3
NOTOK=$dir/no_tokenizer.bin  # a -K that does not exist: the byte-level corpus, whatever data/vocab holds
mkdir -p "$dir/cwd"
cd "$dir/cwd"

# --- the no-argument run, its whole epoch ---------------------------------------------------------
out=$dir/default.out
"$TRAIN" > "$out" 2>&1
rc=$?
[ $rc = 0 ] && pass "the default run finishes its epoch" || fail "default run" "exit $rc: $(tail -n 3 "$out")"
grep -q '^data: the built-in corpus (generated stories, [0-9]* documents; byte-level' "$out" \
    && pass "the no-argument run says which data it uses: the byte-level built-in corpus here (no tokenizer file)" \
    || fail "data line" "$(grep -m1 '^data:' "$out" || echo "no 'data:' line")"
grep -qE '^engine: (no usable GPU|GPU engine|C reference)' "$out" && pass "default run says which engine it uses" \
    || fail "engine line" "no engine line"
[ -f "$dir/cwd/out/log.jsonl" ] && pass "the no-argument run logs into out/ (its preset's -o out)" \
    || fail "the no-argument run's output dir" "no out/log.jsonl: $(ls "$dir/cwd")"
line=$(grep -m1 -E '^step +150/' "$out")
printf '%s' "$line" | grep -qE '[0-9]+ tok/s \| [0-9]+:[0-9]{2} elapsed, eta [0-9]+:[0-9]{2}' \
    && pass "the step line shows elapsed time and an estimate of what is left (step 150: ${line##*tok/s | })" \
    || fail "elapsed and eta" "${line:-no step 150 line}"
r=$("$PY" - "$dir/cwd/out/log.jsonl" "$out" <<'PYEOF'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "train_loss" in r]
vals = [r["val_loss"] for r in rows if "val_loss" in r]
text = open(sys.argv[2]).read()
warmup = int(re.search(r"warmup (\d+)", text).group(1))
total = int(re.search(r"^steps: (\d+)", text, re.M).group(1))
bad = []
if len(steps) != total: bad.append(f"{len(steps)} steps logged of {total}")
first = steps[0]["train_loss"]
worst = max((s for s in steps if s["step"] > warmup), key=lambda s: s["train_loss"])
norm = max(steps, key=lambda s: s["grad_norm"])
if worst["train_loss"] >= first: bad.append(f"loss {worst['train_loss']:.3f} at step {worst['step']}, start {first:.3f}")
if norm["grad_norm"] > 20: bad.append(f"gradient norm {norm['grad_norm']:.1f} at step {norm['step']}")
if not vals or vals[-1] >= 1.0: bad.append(f"last val loss {vals[-1] if vals else None}")
if bad: print("; ".join(bad)); sys.exit(1)
print(f"{total} steps: loss {first:.2f} -> {steps[-1]['train_loss']:.2f}, at most {worst['train_loss']:.2f} after the warm-up "
      f"of {warmup} (step {worst['step']}); gradient norm at most {norm['grad_norm']:.2f} (step {norm['step']}); val loss "
      f"{vals[0]:.3f} -> {vals[-1]:.3f}")
PYEOF
) && pass "the whole default run learns smoothly: $r" || fail "the whole default run" "$r"
samples=$(awk '/^generating:/{getline; s=""; on=1; next} on && /^---$/{print s; on=0; next} on{s=s $0}' "$out")
n=$(printf '%s\n' "$samples" | grep -c .)
ids=$(printf '%s' "$samples" | grep -oE '<[0-9]+>' | wc -l)
last=$(printf '%s\n' "$samples" | tail -n 1)
[ "$n" -ge 10 ] && [ "$ids" = 0 ] && [ "$(printf '%s' "$last" | tr -cd 'a-zA-Z ' | wc -c)" -ge 40 ] \
    && pass "$n samples, no token ids among them, the last one text: ${last:0:70}" \
    || fail "samples" "$n samples, $ids token ids; last: ${last:0:100}"
grep -qE '^done: [0-9]+ steps in [0-9:]+, ' "$out" && pass "the end says how long it took: $(grep '^done:' "$out")" \
    || fail "done line" "$(tail -n 2 "$out")"

# --- byte-level samples draw byte tokens only -----------------------------------------------------
"$TRAIN" -K "$NOTOK" -t 64 -x 1 -s 1 -g 200 -v 0 -o "" > "$dir/untrained.out" 2>&1
sample=$(awk '/^generating:/{getline; s=""; on=1; next} on && /^---$/{print s; on=0; next} on{s=s $0}' "$dir/untrained.out" | tr -d '\000')
ids=$(printf '%s' "$sample" | grep -oE '<[0-9]+>' | wc -l)
grep -q '^samples: .*drawn from the 256 byte tokens and end-of-text' "$dir/untrained.out" && [ "$ids" = 0 ] && [ -n "$sample" ] \
    && pass "byte-level run: an untrained model's 200 sampled tokens are all bytes or end-of-text (no <id>)" \
    || fail "byte-level sampling" "$ids token ids in: ${sample:0:120}"
exit $failed
