#!/usr/bin/env bash
# test_default_run_full.sh (make test-long): the whole default run, `./train_gpt2` with no flags
# at all (its preset), on the byte-level built-in corpus (in a scratch working dir, so its own
# cache, no tokenizer file, and its out/): it finishes its epoch; after the warm-up no step's loss is above the first step's and no
# gradient norm above 20 (before the defaults changed: loss 20.0 at step 25, norms 50-87); the last
# val loss is under 1.0 (the grammar is learnable: 0.43 with the old defaults); every sample is text;
# the end says how long it took. test_default_run.sh checks the first 150 steps in make test.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
[ -x "$PY" ] || PY=python3
mkdir -p "$dir/cwd"
cd "$dir/cwd"
"$ROOT/train_gpt2" > "$dir/out" 2>&1  # no argument at all: its preset (out/ in the scratch dir, no tokenizer file there)
rc=$?
[ $rc = 0 ] && pass "the default run finishes its epoch" || fail "default run" "exit $rc: $(tail -n 3 "$dir/out")"
r=$("$PY" - "$dir/cwd/out/log.jsonl" "$dir/out" <<'EOF'
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
EOF
) && pass "the whole default run learns smoothly: $r" || fail "the whole default run" "$r"
samples=$(awk '/^generating:/{getline; s=""; on=1; next} on && /^---$/{print s; on=0; next} on{s=s $0}' "$dir/out")
n=$(printf '%s\n' "$samples" | grep -c .)
ids=$(printf '%s' "$samples" | grep -oE '<[0-9]+>' | wc -l)
last=$(printf '%s\n' "$samples" | tail -n 1)
[ "$n" -ge 10 ] && [ "$ids" = 0 ] && [ "$(printf '%s' "$last" | tr -cd 'a-zA-Z ' | wc -c)" -ge 40 ] \
    && pass "$n samples, no token ids among them, the last one text: ${last:0:70}" \
    || fail "samples" "$n samples, $ids token ids; last: ${last:0:100}"
grep -qE '^done: [0-9]+ steps in [0-9:]+, ' "$dir/out" && pass "the end says how long it took: $(grep '^done:' "$dir/out")" \
    || fail "done line" "$(tail -n 2 "$dir/out")"
exit $failed
