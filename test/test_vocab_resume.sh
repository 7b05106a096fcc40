#!/usr/bin/env bash
# test_vocab_resume.sh: `make vocab` never breaks a resume. Runs on the built-in corpus (no data
# flags, in a scratch working dir with its own data/cache) of 6 steps at 64 positions:
#   - a run made on the byte-level corpus resumes after a tokenizer file appears, on its own corpus,
#     bit for bit (steps 4-6 against the run that did not stop);
#   - a fresh run with the tokenizer file trains on its BPE corpus;
#   - a run on a BPE corpus resumes after its tokenizer file changed (its cached shards still there),
#     and when the shards are gone too, stops with one line naming the corpus and the way out.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
mkdir -p "$dir/cwd"
cd "$dir/cwd"
TRAIN=$ROOT/train_gpt2
require "$TRAIN"

losses() { "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if "train_loss" in j and j["step"] > 3: print(j["step"], repr(j["train_loss"]), repr(j["grad_norm"]))' "$1"; }
TOK=$dir/vocab/gpt2_bpe.bin
mkdir -p "$dir/vocab"
run=(-t 64 -x 6 -n 3 -v 0 -s 0 -K "$TOK")
"$TRAIN" "${run[@]}" -o "$dir/bytes" > "$dir/bytes1.out" 2>&1 || fail "byte-level run for resume" "$(tail -n 2 "$dir/bytes1.out")"
losses "$dir/bytes/log.jsonl" > "$dir/bytes.straight"
rm -f "$dir/bytes/model_00000006.bin" "$dir/bytes/state_00000006.bin" "$dir/bytes/run_complete"   # as if it had stopped at step 3
cp "$ROOT/test/reliability/seeds/tokenizer/tiny.bin" "$TOK"               # `make vocab`
"$TRAIN" "${run[@]}" -o "$dir/bytes" -y 1 > "$dir/bytes2.out" 2>&1
rc=$?
losses "$dir/bytes/log.jsonl" > "$dir/bytes.resumed"
[ $rc = 0 ] && grep -q '^resume: this run trained on the built-in corpus v[0-9]*_bytes and continues on it' "$dir/bytes2.out" \
    && [ -s "$dir/bytes.straight" ] && cmp -s "$dir/bytes.straight" "$dir/bytes.resumed" \
    && pass "a tokenizer file made after a byte-level run: -y 1 resumes on the run's corpus, steps 4-6 bit for bit" \
    || fail "resume after make vocab" "exit $rc: $(grep -E '^(error|resume)' "$dir/bytes2.out" | head -n 2)"
# A fresh run now takes the BPE corpus of that tokenizer file.
"$TRAIN" "${run[@]}" -x 4 -n 2 -o "$dir/bpe" > "$dir/bpe1.out" 2>&1
corpus=$(sed -n 's/^train: data\/cache\/builtin\/\(v[0-9]*_gpt2-[0-9a-f]*\)_train.*/\1/p' "$dir/bpe1.out")
[ -n "$corpus" ] && pass "a fresh run with the tokenizer file trains on its BPE corpus ($corpus)" \
    || fail "fresh BPE run" "$(grep -E '^(train|error)' "$dir/bpe1.out")"
# The tokenizer file changes (another vocabulary): the run's cached shards still resume it.
"$PY" - "$TOK" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
magic, ver, vocab, merges, eot, nbytes, _, _ = struct.unpack_from("<8i", d, 0)
lens = d[32:32 + vocab]
# drop the last merge: another file, another checksum
open(sys.argv[1], "wb").write(struct.pack("<8i", magic, ver, vocab - 1, merges - 1, eot if eot < vocab - 1 else -1,
    nbytes - lens[-1], 0, 0) + lens[:-1] + d[32 + vocab:32 + vocab + nbytes - lens[-1]] + d[32 + vocab + nbytes:-12])
EOF
rm -f "$dir/bpe/model_00000004.bin" "$dir/bpe/state_00000004.bin" "$dir/bpe/run_complete"
"$TRAIN" "${run[@]}" -x 4 -n 2 -o "$dir/bpe" -y 1 > "$dir/bpe2.out" 2>&1 \
    && grep -q "^resume: this run trained on the built-in corpus $corpus and continues on it" "$dir/bpe2.out" \
    && pass "a changed tokenizer file: the BPE run resumes on its cached corpus" \
    || fail "resume after the tokenizer changed" "$(grep -E '^(error|resume)' "$dir/bpe2.out" | head -n 2)"
# ... and with the cache gone too, one line naming the corpus and the way out.
rm -f "$dir/bpe/model_00000004.bin" "$dir/bpe/state_00000004.bin" "$dir/bpe/run_complete" data/cache/builtin/${corpus}_*
"$TRAIN" "${run[@]}" -x 4 -n 2 -o "$dir/bpe" -y 1 > "$dir/bpe3.out" 2> "$dir/bpe3.err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l < "$dir/bpe3.err")" = 1 ] && grep -q "^error: the built-in corpus $corpus was encoded with a tokenizer file of checksum .*-K.*another -o" "$dir/bpe3.err" \
    && pass "its corpus gone and the tokenizer changed: one line naming the corpus and the way out ($(cut -c1-90 "$dir/bpe3.err")...)" \
    || fail "corpus gone" "exit $rc: $(cat "$dir/bpe3.err")"
exit $failed
