#!/usr/bin/env bash
# hellaswag.sh: HellaSwag's validation set (10,042 examples) as the eval file -h 1 reads, in
# llm.c's format (the layout its dev/data/hellaswag.py writes; docs/formats.md): each example's
# context and its four endings, each ending encoded with a leading space, as llm.c encodes them.
# Needs the network once (the JSON lines are kept in data/cache/hellaswag) and the GPT-2 tokenizer
# file (make vocab).
#
#   data/hellaswag.sh [tokenize options]      (e.g. --tokenizer PATH, or --bytes for byte tokens)
#
# Output: data/cache/hellaswag/hellaswag_val.bin (--hellaswag-file's default). HELLASWAG_URL
# overrides the source, HELLASWAG_JSONL names a local copy of hellaswag_val.jsonl, HELLASWAG_OUT
# the output file.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "error: $*" >&2; exit 1; }
URL=${HELLASWAG_URL:-https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl}
dir=data/cache/hellaswag
jsonl=${HELLASWAG_JSONL:-$dir/hellaswag_val.jsonl}
out=${HELLASWAG_OUT:-$dir/hellaswag_val.bin}
TOOL=${TOKENIZE:-build/tokenize}
PY=$(command -v python3) || die "python3 is needed to read the JSON lines"
[ -x "$TOOL" ] || make -s "$TOOL" >&2 || die "cannot build $TOOL"
if [ ! -s "$jsonl" ]; then
    mkdir -p "$(dirname "$jsonl")"
    tmp=$jsonl.tmp.$$
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 2 --max-time 300 -o "$tmp" "$URL" 2>/dev/null || { rm -f "$tmp"; die "cannot download $URL (offline?); or put the file at $jsonl"; }
    elif command -v wget >/dev/null 2>&1; then
        wget -q -T 60 -O "$tmp" "$URL" || { rm -f "$tmp"; die "cannot download $URL (offline?); or put the file at $jsonl"; }
    else
        die "neither curl nor wget is installed to download $URL; or put the file at $jsonl"
    fi
    mv "$tmp" "$jsonl"
fi
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# 1. The texts, NUL-separated: per example its context, then " " + each ending.
"$PY" - "$jsonl" "$work/texts" "$work/meta" <<'PYEOF'
import json, sys
src, texts, meta = sys.argv[1:4]
with open(src, encoding="utf-8") as f, open(texts, "wb") as t, open(meta, "w") as m:
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            ex = json.loads(line)
            ctx, endings, label = ex["ctx"], ex["endings"], int(ex["label"])
        except (ValueError, KeyError, TypeError) as e:
            sys.exit("error: %s line %d is not a HellaSwag example (%s)" % (src, n, e))
        if len(endings) != 4 or not 0 <= label < 4:
            sys.exit("error: %s line %d has %d endings and label %d, expected 4 and 0-3" % (src, n, len(endings), label))
        for text in [ctx] + [" " + e for e in endings]:
            if "\0" in text:
                sys.exit("error: %s line %d holds a NUL character" % (src, n))
            t.write(text.encode("utf-8") + b"\0")
        m.write("%d\n" % label)
PYEOF
# 2. Their token ids, one line per text.
"$TOOL" --nul "$@" "$work/texts" > "$work/ids"
# 3. The eval file, under a temporary name until whole.
"$PY" - "$work/meta" "$work/ids" "$out" <<'PYEOF'
import os, struct, sys
meta, ids, out = sys.argv[1:4]
labels = [int(l) for l in open(meta)]
rows = [[int(x) for x in l.split()] for l in open(ids)]
if len(rows) != 5 * len(labels):
    sys.exit("error: the tokenizer gave %d lines for %d texts" % (len(rows), 5 * len(labels)))
examples, longest = [], 0
for i, label in enumerate(labels):
    ctx, endings = rows[5 * i], rows[5 * i + 1:5 * i + 5]
    if not ctx or not all(endings):
        sys.exit("error: example %d has an empty context or ending" % i)
    if i >= 65536:
        sys.exit("error: more than 65536 examples: the format's index is 16 bits")
    words = [label, 4, len(ctx)] + ctx
    for e in endings:
        words += [len(e)] + e
    if max(words) > 65535 or 2 * (3 + len(words)) > 65535:
        sys.exit("error: example %d does not fit the format's 16-bit words" % i)
    ex = struct.pack("<%dH" % (3 + len(words)), 65535, 2 * (3 + len(words)), i, *words)
    longest = max(longest, len(ex))
    examples.append(ex)
tmp = "%s.tmp.%d" % (out, os.getpid())
with open(tmp, "wb") as f:
    f.write(struct.pack("<256i", 20240522, 1, len(examples), longest, *([0] * 252)))
    for ex in examples:
        f.write(ex)
os.replace(tmp, out)
print("hellaswag: %d examples (longest %d bytes) in %s" % (len(examples), longest, out))
PYEOF
