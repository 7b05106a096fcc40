#!/usr/bin/env bash
# make_seeds.sh: (re)writes the fuzzing seed corpus, test/reliability/seeds/<reader>/: one small
# valid file per reader (a model of 2,000 parameters, its state file, a shard, a tokenizer with
# three merges) and a few texts for the encoder. Run after a file format changes; the files are
# committed so fuzzing starts from them on any machine. Needs ./train_gpt2 and build/test/gen_data.
set -eu
cd "$(dirname "$0")/../.."
S=test/reliability/seeds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p $S/model $S/state $S/shard $S/tokenizer $S/encode
build/test/gen_data model $S/model/tiny.bin 1 8 1 16 8 1
build/test/gen_data shard $S/shard/tiny.bin 200 16 1
./train_gpt2 -e $S/model/tiny.bin -i $S/shard/tiny.bin -b 1 -t 4 -x 1 -n 1 -v 0 -s 0 -o "$tmp/run" > /dev/null
cp "$tmp/run/state_00000001.bin" $S/state/tiny.bin
python3 - $S/tokenizer/tiny.bin <<'PYEOF'
import struct, sys
# GPT-2's byte order: printable bytes first, then the rest (see common/tokenizer.h).
order = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
order += [b for b in range(256) if b not in order]
tokens = [bytes([b]) for b in order]
merges = []
def merge(a, b):
    tokens.append(tokens[a] + tokens[b]); merges.append((a, b, len(tokens) - 1))
h, e, l = order.index(ord("h")), order.index(ord("e")), order.index(ord("l"))
merge(h, e); merge(l, l); merge(256, 257)            # "he", "ll", "hell"
body = bytes(len(t) for t in tokens) + b"".join(tokens)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<8i", 20240601, 1, len(tokens), len(merges), -1, sum(map(len, tokens)), 0, 0))
    f.write(body)
    for m in merges: f.write(struct.pack("<3i", *m))
PYEOF
printf "Hello world, it's a test. Don't stop!\n" > $S/encode/plain.txt
printf 'Caf\xc3\xa9 \xe2\x80\x94 na\xc3\xafve \xf0\x9f\x98\x80 \xff\xfe broken\xc3 end' > $S/encode/utf8.txt
printf '   \t\n\n  x  1234 5678 ?!? <|endoftext|> they'"'"'re we'"'"'ll I'"'"'d\r\n' > $S/encode/spaces.txt
echo "seeds written under $S"
