#!/usr/bin/env bash
# tinyshakespeare.sh: Karpathy's tiny Shakespeare (1 MB) as token shards, as llm.c prepares it:
# documents are the passages between blank lines, each after <|endoftext|>; the first 32768
# tokens are validation. Needs the network once; the text is kept in data/cache/tinyshakespeare.
#
#   data/tinyshakespeare.sh [text_to_shards options]      (e.g. --bytes)
#
# Default output: data/cache/shards/tinyshakespeare_val_000000.bin, ..._train_000001.bin.
# TINYSHAKESPEARE_URL overrides the source, TINYSHAKESPEARE_DIR the folder that keeps the text.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "error: $*" >&2; exit 1; }
URL=${TINYSHAKESPEARE_URL:-https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt}
dir=${TINYSHAKESPEARE_DIR:-data/cache/tinyshakespeare}
text=$dir/input.txt
TOOL=${TEXT_TO_SHARDS:-build/text_to_shards}
[ -x "$TOOL" ] || make -s "$TOOL" >&2 || die "cannot build $TOOL"
if [ ! -s "$text" ]; then
    mkdir -p "$dir"
    tmp=$text.tmp.$$
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 2 --max-time 120 -o "$tmp" "$URL" 2>/dev/null || { rm -f "$tmp"; die "cannot download $URL (offline?); or put the text at $text"; }
    elif command -v wget >/dev/null 2>&1; then
        wget -q -T 60 -O "$tmp" "$URL" || { rm -f "$tmp"; die "cannot download $URL (offline?); or put the text at $text"; }
    else
        die "neither curl nor wget is installed to download $URL; or put the text at $text"
    fi
    mv "$tmp" "$text"
fi
"$TOOL" --split blank --val-tokens 32768 -o data/cache/shards/tinyshakespeare "$@" "$text"
