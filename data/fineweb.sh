#!/usr/bin/env bash
# fineweb.sh: FineWeb (the 10B-token sample) already in GPT-2 tokens and in this project's shard
# format, as llm.c's fineweb.py writes it: shard 0 is validation, then 100M-token train shards.
# Downloads the shards published for modded-nanogpt (Hugging Face dataset kjj0/fineweb10B-gpt2).
#
#   data/fineweb.sh [N]      the val shard and the first N train shards (default 8, 200 MB each)
#
# Output: data/cache/shards/fineweb_val_000000.bin, fineweb_train_000001.bin, ...
# Each file is checked (magic 20240520, version 1, size matching its header). FINEWEB_URL
# overrides the source folder, FINEWEB_OUT the output folder. To shard your own text instead, use build/text_to_shards.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "error: $*" >&2; exit 1; }
n=${1:-8}
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 103 ] || die "the number of train shards must be 1..103, got '$n'"
URL=${FINEWEB_URL:-https://huggingface.co/datasets/kjj0/fineweb10B-gpt2/resolve/main}
out=${FINEWEB_OUT:-data/cache/shards}
mkdir -p "$out"
# fetch NAME K: the K-th of the n + 1 files (a line per download: about 200 MB each, minutes apiece)
fetch() {
    local name=$1 dest=$out/$1 tmp=$out/$1.tmp.$$
    if [ -s "$dest" ]; then return 0; fi
    echo "downloading $name ($2 of $((n + 1)))" >&2
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 2 -o "$tmp" "$URL/$name" 2>/dev/null || { rm -f "$tmp"; die "cannot download $URL/$name (offline?)"; }
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$tmp" "$URL/$name" || { rm -f "$tmp"; die "cannot download $URL/$name (offline?)"; }
    else
        die "neither curl nor wget is installed to download $URL/$name"
    fi
    # Header: int32 magic, version, token count; then 2 bytes per token after 1024 header bytes.
    read -r magic version count < <(od -An -t d4 -N 12 "$tmp")
    local size
    size=$(stat -c %s "$tmp")
    if [ "$magic" != 20240520 ] || [ "$version" != 1 ] || [ "$size" != $((1024 + 2 * count)) ]; then
        rm -f "$tmp"; die "$URL/$name is not a token shard (magic $magic, version $version, $size bytes)"
    fi
    mv "$tmp" "$dest"
}
fetch fineweb_val_000000.bin 1
for i in $(seq 1 "$n"); do fetch "$(printf 'fineweb_train_%06d.bin' "$i")" $((i + 1)); done
echo "fineweb: $out/fineweb_val_000000.bin and $n train shards"
