#!/usr/bin/env bash
# bench_tokenizer.sh: GPT-2 encoding speed on the King James Bible, one core: the C tokenizer
# against the npm package gpt-tokenizer on node (fetched with `npm pack`, pinned). Prints
# figures (MB/s, tokens/s) and whether both gave the same ids; never a pass/fail verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/tokenizer_setup.sh
CORE="taskset -c 0"
command -v taskset >/dev/null 2>&1 || CORE=""
text=$TT_DIR/kjv.txt
if ! command -v bible >/dev/null 2>&1; then echo "bench_tokenizer: the bible command is missing (Debian package bible-kjv)"; exit 0; fi
bible gen1:1-rev22:21 >"$text"
if [ -z "$TOK_FILE" ]; then echo "bench_tokenizer: no tokenizer file ($TOK_WHY)"; exit 0; fi
$CORE build/tokenize --bench 5 --tokenizer "$TOK_FILE" "$text"
$CORE build/tokenize --tokenizer "$TOK_FILE" "$text" >"$TT_DIR/kjv.c.ids"
if ! command -v node >/dev/null 2>&1; then echo "gpt-tokenizer: node is not installed"; exit 0; fi
if ! tgz=$(npm_tarball gpt-tokenizer 4.0.0); then echo "gpt-tokenizer: cannot fetch the package"; exit 0; fi
mkdir -p "$TT_DIR/gpt-tokenizer"
[ -f "$TT_DIR/gpt-tokenizer/package.json" ] || tar -xzf "$tgz" -C "$TT_DIR/gpt-tokenizer" --strip-components=1
$CORE node data/bench_tokenizer.js "$TT_DIR/gpt-tokenizer" "$text" 3 "$TT_DIR/kjv.js.ids"
if cmp -s "$TT_DIR/kjv.c.ids" "$TT_DIR/kjv.js.ids"; then echo "same ids from both: yes"; else echo "same ids from both: NO"; fi
