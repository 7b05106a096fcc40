#!/usr/bin/env bash
# test_tokenizer_exact.sh: token ids of the C tokenizer against the reference gpt-3-encoder on
# node (test_tokenizer_exact.js). Gets the pinned package with `npm pack` into data/cache/npm;
# skips, saying why, only when node or the package cannot be had.
set -u
cd "$(dirname "$0")/.."
. test/tokenizer_setup.sh
if [ -z "$TOK_FILE" ]; then echo "SKIP tokenizer_exact: $TOK_WHY"; exit 0; fi
if [ -z "$REF_DIR" ]; then echo "SKIP tokenizer_exact: $REF_WHY"; exit 0; fi
node test/test_tokenizer_exact.js "$REF_DIR" "$TOK_FILE" build/tokenize "$TT_DIR/exact"
