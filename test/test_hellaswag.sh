#!/usr/bin/env bash
# test_hellaswag.sh: -h 1 (llm.c's HellaSwag eval) on an eval file in llm.c's format that the test
# writes: examples cut from the train data (the right completion continues the context, the others
# come from elsewhere in it), so a trained model answers nearly all and an untrained one about a quarter.
# The count of right answers is checked against an independent PyTorch computation on the same
# model file (test/torch_gpt2.py's reader and model): each completion's mean token loss after the
# context, the lowest wins. Also: when it runs (llm.c's timing), both logs, where it looks without
# --hellaswag-file (ours, then llm.c's place; neither: a warning, and training), bad files and flags.
set -u
# A tiny model: one OpenMP thread (spinning threads on a shared machine cost 1000 times the step).
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
tiny_data 2

# write_eval OUT N [how]: N examples in llm.c's format; how = good, or a defect.
write_eval() {
    "$PY" - "$dir/train.bin" "$@" <<'PYEOF'
import random, struct, sys
import numpy as np
train, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
how = sys.argv[4] if len(sys.argv) > 4 else "good"
toks = np.fromfile(train, dtype=np.uint16, offset=1024)
r = random.Random(5)
examples, longest = [], 0
for i in range(n):
    ctx_len = r.randint(3, 10)
    o = r.randrange(len(toks) - 40)
    ctx = [int(t) for t in toks[o:o + ctx_len]]
    label = r.randrange(4)
    comps = []
    for c in range(4):
        m = r.randint(2, 6)
        # the right one continues the context; the others are the train data from elsewhere (the
        # same tokens, so only the context tells them apart)
        start = o + ctx_len if c == label else r.randrange(len(toks) - 10)
        comps.append([int(t) for t in toks[start:start + m]])
    if how == "token" and i == n - 1:
        comps[1][0] = 300
    if how == "long" and i == 2:
        comps[0] = [1] * 60
    words = [label, 4, len(ctx)] + ctx
    for c in comps:
        words += [len(c)] + c
    nbytes = 2 * (3 + len(words))
    if how == "size" and i == 1:
        nbytes += 2
    ex = struct.pack("<%dH" % (3 + len(words)), 65535, nbytes, i, *words)
    longest = max(longest, len(ex))
    examples.append(ex)
magic = 12345 if how == "magic" else 20240522
count = n + 1 if how == "count" else n
with open(out, "wb") as f:
    f.write(struct.pack("<256i", magic, 1, count, longest, *([0] * 252)))
    for ex in examples:
        f.write(ex)
PYEOF
}
# reference MODEL EVAL B: "correct ambiguous" from PyTorch (ambiguous: the best two completions'
# mean losses within 1e-4, which float rounding may order either way).
reference() {
    "$PY" - "$@" <<'PYEOF'
import struct, sys
import numpy as np
import torch
import torch.nn.functional as F
sys.path.insert(0, "test")
from torch_gpt2 import GPT2, load_model
cfg, _, tensors = load_model(sys.argv[1])
model = GPT2(cfg, tensors)
data = open(sys.argv[2], "rb").read()
n = struct.unpack_from("<256i", data)[2]
w = np.frombuffer(data, dtype=np.uint16, offset=1024)
at, correct, ambiguous = 0, 0, 0
with torch.no_grad():
    for i in range(n):
        nbytes, label, ctx_len = int(w[at + 1]), int(w[at + 3]), int(w[at + 5])
        ctx = [int(t) for t in w[at + 6:at + 6 + ctx_len]]
        k, means = at + 6 + ctx_len, []
        for c in range(4):
            m = int(w[k]); comp = [int(t) for t in w[k + 1:k + 1 + m]]; k += 1 + m
            seq = torch.tensor([ctx + comp])
            logits = model(seq)[0].double()
            logp = F.log_softmax(logits, dim=-1)
            # the positions that predict the completion's tokens: ctx_len - 1 ... ctx_len + m - 2
            means.append(-sum(logp[ctx_len - 1 + j, comp[j]].item() for j in range(m)) / m)
        best = min(range(4), key=lambda c: (means[c], c))
        correct += best == label
        s = sorted(means)
        ambiguous += s[1] - s[0] < 1e-4
        at += nbytes // 2
print(correct, ambiguous)
PYEOF
}
# check NAME MODEL OUTFILE [K]: the run's K-th "HellaSwag: k/n" line (default the last) against the reference.
check() {
    local name=$1 model=$2 out=$3 k=${4:-} line got ref want amb
    if [ -n "$k" ]; then line=$(grep "^HellaSwag: [0-9]*/[0-9]* = " "$out" | sed -n "${k}p"); else line=$(grep "^HellaSwag: [0-9]*/[0-9]* = " "$out" | tail -1); fi
    got=$(echo "$line" | sed 's|^HellaSwag: \([0-9]*\)/.*|\1|')
    ref=$(reference "$model" "$dir/hs.bin" 8) || { fail "$name" "reference failed: $ref"; return; }
    want=${ref% *}
    amb=${ref#* }
    if [ -n "$got" ] && [ $((got > want ? got - want : want - got)) -le "$amb" ]; then
        pass "$name: $line, PyTorch's independent count $want of 37 ($amb within 1e-4)"
    else
        fail "$name" "trainer '$line', PyTorch $want ($amb ambiguous)"
    fi
}
write_eval "$dir/hs.bin" 37
base=(-i "$dir/train.bin" -j "$dir/val.bin" -b 8 -t 32 -s 0 -p 1000 --hellaswag-file "$dir/hs.bin")

# The untrained model file (-x 0: the evaluation of step 0, llm.c's last step).
./train_gpt2 -e "$dir/m.bin" "${base[@]}" -x 0 -h 1 -o "" > "$dir/u.out" 2>&1 || fail "untrained" "$(tail -2 "$dir/u.out")"
check "HellaSwag of an untrained model (4 examples per batch of -b 8, 37 examples: a partial last batch)" "$dir/m.bin" "$dir/u.out"

# Trained: evaluated with each val loss after the first step and at the end (llm.c's timing).
./train_gpt2 -e "$dir/m.bin" "${base[@]}" -x 120 -v 40 -l 3e-3 -u 10 -n 20 -h 1 -o "$dir/t" > "$dir/t.out" 2>&1 ||
    fail "trained" "$(tail -2 "$dir/t.out")"
# The GPU engine's path (its per-token losses), through the CPU runtime: the same count (-f 0: fp32 products,
# as the C engine and PyTorch compute them; TF32, the default, moves the completions' losses by more than the 1e-4 the reference allows for ties).
emu=build/emu/train_gpt2_emu_fp32
if [ -x "$emu" ]; then
    $emu -e "$dir/m.bin" "${base[@]}" -x 0 -h 1 -f 0 -o "" > "$dir/emu.out" 2>&1
    [ "$(grep '^HellaSwag: [0-9]*/[0-9]* = ' "$dir/emu.out")" = "$(grep '^HellaSwag: [0-9]*/[0-9]* = ' "$dir/u.out")" ] &&
        pass "HellaSwag on the GPU engine (FP32, emulated): $(grep '^HellaSwag: [0-9]*/[0-9]* = ' "$dir/emu.out"), as the C engine" ||
        fail "HellaSwag on the GPU engine" "$(grep -E '^HellaSwag|error' "$dir/emu.out" | tail -1) vs $(grep '^HellaSwag: [0-9]*/[0-9]* = ' "$dir/u.out")"
else
    echo "SKIP HellaSwag on the GPU engine: $emu is not built (make emu PRECISION=FP32)"
fi
# Part-trained (6 steps): between chance and all right.
./train_gpt2 -e "$dir/m.bin" "${base[@]}" -x 6 -v 6 -l 3e-3 -u 2 -n 6 -h 1 -o "$dir/p" > "$dir/p.out" 2>&1 ||
    fail "part-trained" "$(tail -2 "$dir/p.out")"
check "HellaSwag of a part-trained model (step 6)" "$dir/p/model_00000006.bin" "$dir/p.out"
check "HellaSwag of the trained model (step 120)" "$dir/t/model_00000120.bin" "$dir/t.out"
# Over ranks (llm.c's split: ceil(37/3) = 13, 13 and 11 examples, each rank's last batch partial; the
# counts summed over ranks): the emulated GPU engine under mpirun, the trained model, against the same
# independent count.
if [ -x "$emu" ] && have_mpi; then
    for np in 2 3; do
        timeout 300 mpirun --oversubscribe -np $np $emu -e "$dir/t/model_00000120.bin" "${base[@]}" -x 0 -h 1 -f 0 -o "" \
            > "$dir/mr$np.out" 2>&1 || fail "HellaSwag over $np ranks" "$(tail -2 "$dir/mr$np.out")"
        check "HellaSwag over $np ranks (GPU engine, FP32, emulated, mpirun)" "$dir/t/model_00000120.bin" "$dir/mr$np.out"
    done
else
    echo "SKIP HellaSwag over ranks: needs $emu and OpenMPI (mpirun, mpicc)"
fi
acc=$(grep "^HellaSwag: [0-9]*/[0-9]* = " "$dir/t.out" | tail -1 | sed 's/.* = //')
"$PY" -c "import sys; sys.exit(0 if $acc >= 0.6 else 1)" && pass "HellaSwag: the trained model picks the continuation far above chance ($acc; chance 0.25)" ||
    fail "trained accuracy" "$acc"
[ "$(grep -c '"hellaswag"' "$dir/t/log.jsonl")" -eq 3 ] && [ "$(grep -c '^s:[0-9]* eval:' "$dir/t/main.log")" -eq 3 ] &&
    grep -q '^s:40 eval:' "$dir/t/main.log" && grep -q '^s:120 eval:' "$dir/t/main.log" &&
    grep -q '{"step": 80, "hellaswag": ' "$dir/t/log.jsonl" &&
    pass "HellaSwag: steps 40, 80, 120 (not 0) in log.jsonl and main.log (s:N eval:ACC)" ||
    fail "HellaSwag logs" "$(grep -h 'hellaswag\|eval' "$dir/t/log.jsonl" "$dir/t/main.log" | tr '\n' ' ')"
# A resumed run's first step was evaluated before its checkpoint: not again.
./train_gpt2 -e "$dir/m.bin" "${base[@]}" -x 160 -v 40 -l 3e-3 -u 10 -n 40 -h 1 -o "$dir/r" > /dev/null 2>&1
rm -f "$dir/r/"*_00000160* "$dir/r/"*_00000120* "$dir/r/run_complete"
./train_gpt2 -e "$dir/m.bin" "${base[@]}" -x 160 -v 40 -l 3e-3 -u 10 -n 40 -h 1 -o "$dir/r" -y 1 > "$dir/r.out" 2>&1
[ "$(grep -c '^HellaSwag: [0-9]*/[0-9]* = ' "$dir/r.out")" -eq 2 ] && [ "$(grep -c '^s:[0-9]* eval:' "$dir/r/main.log")" -eq 4 ] &&
    pass "HellaSwag on resume: steps 120 and 160 only, each logged once" ||
    fail "HellaSwag on resume" "$(grep '^HellaSwag' "$dir/r.out" | tr '\n' ' ') / $(grep eval "$dir/r/main.log" | tr '\n' ' ')"

# data/hellaswag.sh on a local copy of HellaSwag's JSON lines (5 examples, non-ASCII text too), with
# byte tokens (--bytes: no tokenizer file): the file holds each context and " " + each ending as
# GPT-2's tokens of their UTF-8 bytes, in llm.c's layout, and -h 1 reads it.
"$PY" - "$dir/hs.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(5):
        f.write(json.dumps({"ind": i, "ctx": "A man sits on a roof %d. He" % i, "label": i % 4,
                            "endings": ["wraps his skis.", "pulls up roofing.",
                                        "caf\u00e9 na\u00efve %d" % i, "x"]}) + "\n")
PYEOF
if HELLASWAG_JSONL="$dir/hs.jsonl" HELLASWAG_OUT="$dir/made.bin" bash data/hellaswag.sh --bytes > "$dir/made.out" 2>&1; then
    "$PY" - "$dir/hs.jsonl" "$dir/made.bin" <<'PYEOF'
import json, struct, sys
import numpy as np
exs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
# GPT-2's byte tokens: the bytes it prints as themselves first, in order, then the rest (ids 188-255).
printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
rest = [b for b in range(256) if b not in printable]
byte_id = {b: i for i, b in enumerate(printable + rest)}
data = open(sys.argv[2], "rb").read()
h = struct.unpack_from("<4i", data)
w = np.frombuffer(data, dtype=np.uint16, offset=1024)
ok, at, longest = h[0] == 20240522 and h[1] == 1 and h[2] == len(exs), 0, 0
for i, ex in enumerate(exs):
    nbytes = int(w[at + 1])
    longest = max(longest, nbytes)
    ok = ok and w[at] == 65535 and w[at + 2] == i and w[at + 3] == ex["label"] and w[at + 4] == 4
    k = at + 5
    for text in [ex["ctx"]] + [" " + e for e in ex["endings"]]:
        b = [byte_id[x] for x in text.encode("utf-8")]
        ok = ok and int(w[k]) == len(b) and [int(x) for x in w[k + 1:k + 1 + len(b)]] == b
        k += 1 + len(b)
    ok = ok and k == at + nbytes // 2
    at += nbytes // 2
ok = ok and at == len(w) and h[3] == longest
print("%s data/hellaswag.sh: llm.c's layout, each context and ' ' + ending encoded (5 examples, UTF-8)" % ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PYEOF
    [ $? -eq 0 ] || failed=1
    ./train_gpt2 -e "$dir/m.bin" "${base[@]}" -t 64 -x 0 -h 1 --hellaswag-file "$dir/made.bin" -o "" > "$dir/made_run.out" 2>&1 &&
        grep -q "^HellaSwag: [0-9]/5 = " "$dir/made_run.out" && pass "-h 1 reads the file data/hellaswag.sh made" ||
        fail "-h 1 on data/hellaswag.sh's file" "$(tail -2 "$dir/made_run.out")"
else
    fail "data/hellaswag.sh" "$(tail -2 "$dir/made.out")"
fi
printf '{"ctx": "a", "endings": ["b"], "label": 0}\n' > "$dir/bad.jsonl"
HELLASWAG_JSONL="$dir/bad.jsonl" HELLASWAG_OUT="$dir/bad_made.bin" bash data/hellaswag.sh --bytes > "$dir/bad_made.out" 2>&1
[ $? -ne 0 ] && [ ! -e "$dir/bad_made.bin" ] && grep -q "^error: .*bad.jsonl line 1 has 1 endings and label 0, expected 4" "$dir/bad_made.out" &&
    pass "data/hellaswag.sh: an example without 4 endings is one error line, no file written" ||
    fail "data/hellaswag.sh bad input" "$(cat "$dir/bad_made.out")"

# Where -h 1 looks without --hellaswag-file, from the working dir: this project's
# data/cache/hellaswag/hellaswag_val.bin, then llm.c's dev/data/hellaswag/hellaswag_val.bin; with
# neither, a warning naming both and the run trains without HellaSwag (as llm.c), so llm.c's restart
# loop ends.
look=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 8 -t 32 -s 0 -p 1000 -h 1)
mkdir -p "$dir/llmc/dev/data/hellaswag" "$dir/both/dev/data/hellaswag" "$dir/both/data/cache/hellaswag" "$dir/none"
cp "$dir/hs.bin" "$dir/llmc/dev/data/hellaswag/hellaswag_val.bin"
cp "$dir/hs.bin" "$dir/both/dev/data/hellaswag/hellaswag_val.bin"
write_eval "$dir/both/data/cache/hellaswag/hellaswag_val.bin" 5
trainer=$PWD/train_gpt2
(cd "$dir/llmc" && "$trainer" "${look[@]}" -x 0 -o "" > run.out 2>&1) &&
    grep -q "^HellaSwag: 37 examples from dev/data/hellaswag/hellaswag_val.bin," "$dir/llmc/run.out" &&
    [ "$(grep '^HellaSwag: [0-9]*/' "$dir/llmc/run.out")" = "$(grep '^HellaSwag: [0-9]*/' "$dir/u.out")" ] &&
    (cd "$dir/both" && "$trainer" "${look[@]}" -x 0 -o "" > run.out 2>&1) &&
    grep -q "^HellaSwag: 5 examples from data/cache/hellaswag/hellaswag_val.bin," "$dir/both/run.out" &&
    pass "-h 1 finds llm.c's dev/data/hellaswag/hellaswag_val.bin ($(grep '^HellaSwag: [0-9]*/' "$dir/llmc/run.out"), as with --hellaswag-file), this project's place first when both hold one" ||
    fail "-h 1's places" "$(grep -h -E '^(HellaSwag|error)' "$dir/llmc/run.out" "$dir/both/run.out" | tr '\n' ' ')"
tries=0
while [ ! -f "$dir/none/out/DONE_00000004" ] && [ $tries -lt 3 ]; do
    (cd "$dir/none" && "$trainer" "${look[@]}" -x 4 -v 2 -n 2 -y 1 -o out > "run$tries.out" 2>&1)
    tries=$((tries + 1))
done
none=$dir/none/run0.out
[ $tries -eq 1 ] && grep -q "^HellaSwag: no eval file at data/cache/hellaswag/hellaswag_val.bin or dev/data/hellaswag/hellaswag_val.bin (llm.c's place); training without HellaSwag, as llm.c does (make it with data/hellaswag.sh, or name one with --hellaswag-file)$" "$none" &&
    grep -qE "^step +4/4 " "$none" && ! grep -q "^HellaSwag: [0-9]" "$none" && ! grep -q '"hellaswag"' "$dir/none/out/log.jsonl" &&
    pass "-h 1 without any eval file: one warning naming both places, 4 steps trained, llm.c's restart loop ends after 1 attempt" ||
    fail "-h 1 without a file" "$tries attempts: $(grep -h -E '^(HellaSwag|error|step)' "$dir/none/"run*.out | head -n 4 | tr '\n' ' ')"

# Bad files and flags: one line naming the file or flag, exit 1.
# expect_error (test/lib.sh): its checks are named "bad input: NAME".
expect_prefix="bad input: "
bad=(-e "$dir/m.bin" -i "$dir/train.bin" -t 32 -s 0 -x 0 -o "" -h 1)
expect_error "-h 1 with -b 2" "flag -h 1: .*-b is 2 \(flag -b\)" "${bad[@]}" -b 2 --hellaswag-file "$dir/hs.bin"
expect_error "--hellaswag-file naming no file (given, it must exist)" "^error: flag --hellaswag-file: no HellaSwag file .*nope.bin \(make it with data/hellaswag.sh" "${bad[@]}" -b 4 --hellaswag-file "$dir/nope.bin"
for how in magic count size token long; do
    write_eval "$dir/bad_$how.bin" 5 $how
done
expect_error "wrong magic" "HellaSwag file .*bad_magic.bin has magic 12345, expected 20240522" "${bad[@]}" -b 4 --hellaswag-file "$dir/bad_magic.bin"
expect_error "header's count above the examples" "bad_count.bin: example 5 is cut off at the end of the file" "${bad[@]}" -b 4 --hellaswag-file "$dir/bad_count.bin"
expect_error "an example's size wrong" "bad_size.bin: example 1 says it is [0-9]+ bytes but its tokens take" "${bad[@]}" -b 4 --hellaswag-file "$dir/bad_size.bin"
expect_error "token out of range" "bad_token.bin: example 4 holds token 300, out of range for the model's vocabulary of 256" "${bad[@]}" -b 4 --hellaswag-file "$dir/bad_token.bin"
expect_error "an example longer than -t" "bad_long.bin: example 2, context and completion 0 are [0-9]+ tokens, more than -t 32 \(flag -t\)" "${bad[@]}" -b 4 --hellaswag-file "$dir/bad_long.bin"
expect_error "a directory as the file" "HellaSwag file .* is a directory" "${bad[@]}" -b 4 --hellaswag-file "$dir"
exit $failed
