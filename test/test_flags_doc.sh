#!/usr/bin/env bash
# test_flags_doc.sh: docs/flags.md shows every flag exactly as ./train_gpt2 --help prints it (the
# block between the first pair of ``` lines is --help's flag lines), so the documentation cannot
# drift from the parser's table.
set -u
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
./train_gpt2 --help > "$dir/help.txt" 2>&1 || { echo "FAIL --help: exit $?"; exit 1; }
sed -n '/^flags:$/,$p' "$dir/help.txt" | tail -n +2 > "$dir/help_flags.txt"
awk '/^```/ { n++; next } n == 1' docs/flags.md > "$dir/doc_flags.txt"
if [ -s "$dir/help_flags.txt" ] && cmp -s "$dir/help_flags.txt" "$dir/doc_flags.txt"; then
    echo "PASS docs/flags.md lists the $(wc -l < "$dir/help_flags.txt") flags of --help, word for word"
else
    echo "FAIL docs/flags.md differs from --help: $(diff "$dir/doc_flags.txt" "$dir/help_flags.txt" | head -6 | tr '\n' ' ')"
    exit 1
fi
