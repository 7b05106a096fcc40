#!/usr/bin/env bash
# test_fuzz.sh: AFL++ mutates a seed corpus (test/reliability/seeds/) into every reader for
# FUZZ_SECONDS each (default 4; `make fuzz` runs 60, as CI does), under AddressSanitizer and
# UBSan: the model, state, shard and tokenizer readers, GPT-2's encoder on arbitrary bytes (it must
# decode back to them), and text_to_shards on arbitrary text. A reader may refuse an input with an
# error line; a crash, a sanitizer report or a hang (no answer in 10 s) fails the test, and the
# inputs that did it are kept under FUZZ_KEEP (default build/fuzz/findings). Prints each reader's
# executions, the figure README's reliability section quotes.
set -u
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-4}
keep=${FUZZ_KEEP:-build/fuzz/findings}
if ! command -v afl-fuzz > /dev/null || [ ! -x build/fuzz/fuzz_read ] || [ ! -x build/fuzz/text_to_shards ]; then
    echo "SKIP fuzz: needs AFL++ (Debian: apt-get install afl++) and its targets (make build/fuzz/fuzz_read build/fuzz/text_to_shards)"
    exit 0
fi
. test/tokenizer_setup.sh 2> /dev/null
S=test/reliability/seeds
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
total=0
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_QUIET=1
# fuzz NAME SEEDS -- TARGET ARGS (with @@ for the input file)
fuzz() {
    local name=$1 seeds=$2
    shift 3
    local out="$work/$name"
    # afl-fuzz sets the sanitizers' options itself (and refuses a caller's)
    timeout $((secs + 120)) env -u ASAN_OPTIONS -u UBSAN_OPTIONS afl-fuzz -i "$seeds" -o "$out" -V "$secs" -t 10000 -m none -- "$@" > "$work/$name.log" 2>&1
    local rc=$? stats="$out/default/fuzzer_stats"
    if [ ! -f "$stats" ]; then
        echo "FAIL fuzz $name: afl-fuzz did not run (exit $rc): $(grep -a 'PROGRAM ABORT\|ERROR' "$work/$name.log" | head -n 2 | tr -d '\033')"
        failed=1
        return
    fi
    local execs crashes hangs
    execs=$(awk -F': *' '$1 ~ /^execs_done/ {print $2}' "$stats")
    crashes=$(awk -F': *' '$1 ~ /^saved_crashes/ {print $2}' "$stats")
    hangs=$(awk -F': *' '$1 ~ /^saved_hangs/ {print $2}' "$stats")
    total=$((total + execs))
    if [ "$crashes" = 0 ] && [ "$hangs" = 0 ]; then
        echo "PASS fuzz $name: $execs executions in ${secs}s, no crash, no hang"
    else
        mkdir -p "$keep/$name"
        cp "$out"/default/crashes/id* "$out"/default/hangs/id* "$keep/$name/" 2> /dev/null
        local first
        first=$(ls "$keep/$name" | head -n 1)
        echo "FAIL fuzz $name: $crashes crashes, $hangs hangs in $execs executions; inputs in $keep/$name (first: $first)"
        failed=1
    fi
}
fuzz model "$S/model" -- build/fuzz/fuzz_read model @@ "$S/state/tiny.bin"
fuzz state "$S/state" -- build/fuzz/fuzz_read state @@ "$S/model/tiny.bin"
fuzz shard "$S/shard" -- build/fuzz/fuzz_read shard @@
fuzz tokenizer "$S/tokenizer" -- build/fuzz/fuzz_read tokenizer @@
if [ -n "${TOK_FILE:-}" ]; then
    fuzz encode "$S/encode" -- build/fuzz/fuzz_read encode @@ "$TOK_FILE"
else
    fuzz encode "$S/encode" -- build/fuzz/fuzz_read encode @@
fi
mkdir -p "$work/tts"
fuzz text "$S/encode" -- build/fuzz/text_to_shards -q --bytes --split delim --val-every 2 -n 64 -o "$work/tts/x" @@
echo "   fuzzing: $total executions in all"
exit $failed
