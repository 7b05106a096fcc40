#!/usr/bin/env bash
# fortunes.sh: the Debian fortunes (package fortunes) as token shards, one document per fortune
# (the files separate fortunes with lines holding only "%").
#
#   data/fortunes.sh [text_to_shards options]
#
# Default output: data/cache/shards/fortunes_val_000000.bin and fortunes_train_000001.bin
# (32768 val tokens). FORTUNE_DIR overrides /usr/share/games/fortunes.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "error: $*" >&2; exit 1; }
dir=${FORTUNE_DIR:-/usr/share/games/fortunes}
[ -d "$dir" ] || die "$dir is missing: install the Debian package fortunes"
TOOL=${TEXT_TO_SHARDS:-build/text_to_shards}
[ -x "$TOOL" ] || make -s "$TOOL" >&2 || die "cannot build $TOOL"
# The fortune files themselves: not the .dat indexes, not the .u8 links to the same files.
files=()
while IFS= read -r f; do files+=("$f"); done < <(find "$dir" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort)
[ "${#files[@]}" -gt 0 ] || die "no fortune files in $dir"
"$TOOL" --split delim --delim % -o data/cache/shards/fortunes "$@" "${files[@]}"
