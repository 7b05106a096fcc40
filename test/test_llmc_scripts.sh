#!/usr/bin/env bash
# test_llmc_scripts.sh: llm.c's two GPT-2 run scripts (scripts/run_gpt2_124M.sh and
# run_gpt2_1558M.sh there) as llm.c users run them, here: their trainer command lines with only the
# model, the sizes (-b -t -d), the step counts (-x -v -u -n) and the data shrunk to fit a CPU, every
# other flag as written there (-h 1 -r 0 -z 1 -c -l -q -k cosine -ge 1 -y 1 -s -g), inside llm.c's
# restart loop (`while [ ! -f $out_dir/DONE_<last> ]; do ...; done`). The HellaSwag file sits where
# llm.c keeps it, dev/data/hellaswag/hellaswag_val.bin (a scratch working dir laid out as llm.c's,
# which -h 1 looks in after this project's place). A first attempt is cut short after a checkpoint
# (the files after it removed, as a crash leaves them); the loop resumes it (-y 1), the run trains,
# evaluates HellaSwag, writes DONE files and stops, ending bit-identical to an unbroken run.
# The 124M line runs on the C engine; the 1558M line has -ge 1 (a GPU matmul epilogue), so it runs
# on the GPU engine through the CPU runtime (build/emu/train_gpt2_emu_fp32; SKIP without it).
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
repo=$PWD
require "$gen"
gen=$repo/$gen
cd "$dir"
mkdir -p data/fineweb dev/data/hellaswag
$gen model model.bin 2 32 2 256 64 1 && $gen shard data/fineweb/fineweb_train_000001.bin 12800 256 2 &&
    $gen shard data/fineweb/fineweb_val_000000.bin 2048 256 3 || { echo "FAIL setup: gen_data"; exit 1; }
# A HellaSwag file in llm.c's format, in llm.c's place: 12 examples cut from the train data.
"$PY" - <<'PYEOF'
import random, struct
import numpy as np
toks = np.fromfile("data/fineweb/fineweb_train_000001.bin", dtype=np.uint16, offset=1024)
r, exs = random.Random(3), []
for i in range(12):
    o, n, label = r.randrange(len(toks) - 40), r.randint(3, 8), r.randrange(4)
    words = [label, 4, n] + [int(t) for t in toks[o:o + n]]
    for c in range(4):
        s = o + n if c == label else r.randrange(len(toks) - 10)
        words += [4] + [int(t) for t in toks[s:s + 4]]
    exs.append(struct.pack("<%dH" % (3 + len(words)), 65535, 2 * (3 + len(words)), i, *words))
open("dev/data/hellaswag/hellaswag_val.bin", "wb").write(
    struct.pack("<256i", 20240522, 1, len(exs), max(map(len, exs)), *([0] * 252)) + b"".join(exs))
PYEOF

# llmc_loop ID LAST OUT TRAINER ARGS...: llm.c's restart loop around one command line, at most 4
# attempts; the first is cut short after its first checkpoint. Prints the attempts made.
llmc_loop() {
    local name=$1 last=$2 out=$3
    shift 3
    local done_file="$out/DONE_$(printf %08d "$last")" tries=0
    while true; do
        if [ -f "$done_file" ]; then
            echo "File $done_file exists. Exiting the loop." >> "$name.loop"
            break
        fi
        [ $tries -ge 4 ] && break
        "$@" > "$name.try$tries.out" 2>&1
        if [ $tries -eq 0 ]; then  # the crash: only the first checkpoint survives
            first=$(ls "$out" | sed -n 's/^DONE_\([0-9]*\)$/\1/p' | head -1)
            for f in "$out"/DONE_* "$out"/model_* "$out"/state_*; do
                case "$f" in *"_$first"*) ;; *) rm -f "$f" ;; esac
            done
            rm -f "$out/run_complete"  # a crash leaves none
        fi
        tries=$((tries + 1))
        sleep 0.1
    done
    echo $tries
}

# check ID LABEL OUT LAST TRIES REF_OUT: what llm.c's loop left, against an unbroken run's.
check() {
    local id=$1 name=$2 out=$3 last=$4 tries=$5 ref=$6
    local L=$(printf %08d "$last")
    [ "$tries" -eq 2 ] && grep -aq "^resume: step [0-9]* from" "$id.try1.out" && [ -f "$out/DONE_$L" ] &&
        grep -q "Exiting the loop" "$id.loop" &&
        pass "$name: llm.c's restart loop: attempt 1 cut short, attempt 2 resumes (-y 1) and writes DONE_$L, the loop ends" ||
        fail "$name: restart loop" "$tries attempts; $(grep -a -h -m1 -E '^resume|error' "$id".try*.out | tr '\n' ' ')"
    "$PY" - "$out/log.jsonl" "$last" "$name" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
tr = [r["train_loss"] for r in recs if "train_loss" in r]
hs = [r for r in recs if "hellaswag" in r]
ok = len(tr) == int(sys.argv[2]) and tr[-1] < tr[0] - 0.1 and len(hs) >= 2 and all(0 <= r["hellaswag"] <= 1 for r in hs)
print("%s %s: trains (loss %.3f -> %.3f over %d steps, each logged once) and evaluates HellaSwag %d times" %
      ("PASS" if ok else "FAIL", sys.argv[3], tr[0], tr[-1], len(tr), len(hs)))
sys.exit(0 if ok else 1)
PYEOF
    [ $? -eq 0 ] || failed=1
    [ "$($gen diff "$out/model_$L.bin" "$ref/model_$L.bin")" = "0" ] && cmp -s "$out/main.log" "$ref/main.log" &&
        pass "$name: the final weights and main.log are the unbroken run's" ||
        fail "$name: bit for bit" "final model or main.log differ from the unbroken run's"
}

# --- llm.c's scripts/run_gpt2_124M.sh --------------------------------------------------------------
# There: -o $out_dir -v 250 -s 20000 -g 144 -h 1 -b 64 -t 1024 -d 524288 -r 0 -z 1 -c 0.1 -l 0.0006
# -q 0.0 -u 700 -n 5000 -y 1 -e "d12" (one epoch: no -x). Here -b 8 -t 32 -d 512, -v 8, -u 4, -n 8,
# a small model file, and a train set of 24 steps.
line124=("$repo/train_gpt2" -i "data/fineweb/fineweb_train_*.bin" -j "data/fineweb/fineweb_val_*.bin" -o log124
         -v 8 -s 20000 -g 144 -h 1 -b 8 -t 32 -d 512 -r 0 -z 1 -c 0.1 -l 0.0006 -q 0.0 -u 4 -n 8 -y 1 -e model.bin)
tries=$(llmc_loop run124 24 log124 "${line124[@]}")
ref124=("${line124[@]}")
ref124[6]=ref124
"${ref124[@]}" > ref124.out 2>&1 || fail "124M: unbroken run" "$(tail -2 ref124.out)"
check run124 "llm.c's 124M command line (C engine)" log124 24 "$tries" ref124

# --- llm.c's scripts/run_gpt2_1558M.sh --------------------------------------------------------------
# There: -v 250 -s 300000 -g 384 -h 1 -b 16 -t 1024 -d 1048576 -r 0 -z 1 -c 0.1 -k "cosine"
# -l 0.0006 -q 0.1 -u 700 -n 2000 -x 32000 -ge 1 -y 1 -e "d48". Here -b 4 -t 32 -d 256, -v 6,
# -u 3, -n 6, -x 12, a small model file.
emu=$repo/build/emu/train_gpt2_emu_fp32
if [ -x "$emu" ]; then
    line1558=("$emu" -i "data/fineweb/fineweb_train_*.bin" -j "data/fineweb/fineweb_val_*.bin" -o log1558
              -v 6 -s 300000 -g 384 -h 1 -b 4 -t 32 -d 256 -r 0 -z 1 -c 0.1 -k "cosine" -l 0.0006 -q 0.1 -u 3 -n 6
              -x 12 -ge 1 -y 1 -e model.bin)
    tries=$(llmc_loop run1558 12 log1558 "${line1558[@]}")
    ref1558=("${line1558[@]}")
    ref1558[6]=ref1558
    "${ref1558[@]}" > ref1558.out 2>&1 || fail "1558M: unbroken run" "$(tail -2 ref1558.out)"
    check run1558 "llm.c's 1558M command line (GPU engine, emulated)" log1558 12 "$tries" ref1558
else
    echo "SKIP llm.c's 1558M command line: $emu is not built (make emu PRECISION=FP32)"
fi
exit $failed
