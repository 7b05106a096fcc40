#!/usr/bin/env bash
# bible.sh: the King James Bible (Debian package bible-kjv) as token shards, one document per
# chapter (1189) or per book (66).
#
#   data/bible.sh [--by chapter|book] [text_to_shards options]
#
# Default output: data/cache/shards/kjv_val_000000.bin and kjv_train_000001.bin (32768 val
# tokens); options after --by go to build/text_to_shards (e.g. --bytes, -o PREFIX, --val-every 20).
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "error: $*" >&2; exit 1; }
by=chapter
if [ "${1:-}" = "--by" ]; then by=${2:-}; shift 2 || true; fi
[ "$by" = chapter ] || [ "$by" = book ] || die "--by expects chapter or book, got '$by'"
command -v bible >/dev/null 2>&1 || die "the bible command is missing: install the Debian package bible-kjv"
TOOL=${TEXT_TO_SHARDS:-build/text_to_shards}
[ -x "$TOOL" ] || make -s "$TOOL" >&2 || die "cannot build $TOOL"

# The text: a blank line, "Genesis 1", a blank line, the verses; so a heading is a line of
# "<book> <number>" after a blank line. A "%%" line goes before each new document; the blank
# lines just before a heading are dropped.
bible gen1:1-rev22:21 | awk -v by="$by" '
    /^$/ { blanks++; next }
    blanks > 0 && /^[1-3]? ?[A-Z][A-Za-z ]* [0-9]+$/ {
        book = $0; sub(/ [0-9]+$/, "", book)
        if (started && (by == "chapter" || book != last_book)) print "%%"
        started = 1; last_book = book; blanks = 0; print; next
    }
    { for (; blanks > 0; blanks--) print ""; print }
' | "$TOOL" --split delim --delim %% -o data/cache/shards/kjv "$@" -
