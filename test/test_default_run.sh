#!/usr/bin/env bash
# test_default_run.sh: the main job with no data flags (the built-in corpus, made on first
# use, offline) runs, its loss falls, and it prints decoded samples. Fewer steps than the
# default epoch, to stay quick.
set -u
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1: $3"; failed=1; fi; }
./train_gpt2 -x 40 -s 20 -v 20 -o "$out/run" > "$out/stdout" 2>&1
rc=$?
check "default run exits 0" "[ $rc -eq 0 ]" "exit $rc: $(tail -3 "$out/stdout")"
check "default run says which data it uses" "grep -q '^data: the built-in corpus' '$out/stdout'" "no 'data:' line"
check "default run uses the C engine with a clear line" "grep -q '^engine: no usable GPU' '$out/stdout'" "no engine line"
first=$(grep -m1 -E '^step +[0-9]' "$out/stdout" | sed 's/.*| loss \([0-9.]*\) .*/\1/')
last=$(grep -E '^step +[0-9]' "$out/stdout" | tail -1 | sed 's/.*| loss \([0-9.]*\) .*/\1/')
check "default run: loss falls by over 3 nats in 40 steps ($first -> $last)" \
    "awk -v a='$first' -v b='$last' 'BEGIN { exit !(b < a - 3) }'" "loss $first -> $last"
check "default run prints per-step tokens/s" "grep -qE '^step +40/40 .*[0-9]+ tok/s' '$out/stdout'" "no step 40 line"
samples=$(grep -c '^generating:' "$out/stdout")
check "default run prints decoded samples" "[ $samples -ge 2 ]" "$samples samples"
# Decoded text: after training, a sample is mostly printable text, not token ids.
last_sample=$(awk '/^generating:/{s=""; getline; next} /^---$/{if (s!="") keep=s; s=""; next} {s=s $0}  END{print keep}' "$out/stdout")
check "default run's last sample is decoded text" "[ \$(printf '%s' \"\$last_sample\" | tr -cd 'a-zA-Z ' | wc -c) -ge 20 ]" \
    "sample: $last_sample"
exit $failed
