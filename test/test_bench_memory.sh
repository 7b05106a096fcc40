#!/usr/bin/env bash
# test_bench_memory.sh: dev/bench_memory.sh's judgement of its own time figures. It runs each
# configuration -n times in turns and reports the median, the spread ((max - min) / median) and the
# difference against the baseline, marked "*" when no larger than the two spreads together. Here its
# trainer is a stand-in that prints the lines bench_memory.sh reads (the engine, the model, the memory
# table, the "done:" line) with a step time chosen per run: recompute's -r 1 and -r 2 differ from
# -r 0 by less than the runs' spread (marked), -r 3 by far more (not marked); with one run a
# difference carries "?" (no spread measured). Seconds; no trainer built.
set -u
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
cat > "$dir/trainer" << 'SH'
#!/usr/bin/env bash
# ms/step by -r level, varying from run to run by the call count: -r 0: 1000, 1100, 1050 (spread
# 9.5%); -r 1, -r 2: 1030, 980, 1060; -r 3: 1500, 1520, 1490
r=0
while [ $# -gt 0 ]; do [ "$1" = -r ] && r=$2; shift; done
n=$(cat "$(dirname "$0")/calls.$r" 2> /dev/null || echo 0)
echo $((n + 1)) > "$(dirname "$0")/calls.$r"
case $r in
    0) ms=(1000 1100 1050 1000) ;;
    1|2) ms=(1030 980 1060 1030) ;;
    3) ms=(1500 1520 1490 1500) ;;
esac
echo "model: d1 | L=1 C=64 NH=1 maxT=1024 V=50257 (padded 50304) | 3.34M parameters"
echo "engine: GPU engine (fp16, a stand-in) on no device"
echo "memory by component (bytes): planned | allocated | measured by the device"
echo "  parameters                         device         6670208 |         6670208 |         6670208"
echo "  activations                        device        $((13177856 - 100000 * r)) |        $((13177856 - 100000 * r)) |        13177856"
echo "recompute: level $r"
echo "done: 2 steps in 0:04, mean ${ms[$n]}.0 ms/step, 73 tok/s (after the first step)"
SH
chmod +x "$dir/trainer"
# The first run (the model's facts) is a -r 0 call too: the timed -r 0 runs are its calls 2-4.
out=$(bash dev/bench_memory.sh --trainer "$dir/trainer" -x 2 -n 3 --no-accum --no-zero 2>&1)
rows=$(echo "$out" | grep -E '^  -r [0-3] ')
row() { echo "$rows" | grep -E "^  -r $1 "; }
# -r 0's timed runs: 1100, 1050, 1000 -> median 1050.0, spread 9.5%
if row 0 | grep -q ' 1050\.0 *9\.5% ' && row 1 | grep -qE ' 1030\.0 .*-1\.9%\*$' && row 2 | grep -qE -- '-1\.9%\*$' &&
   row 3 | grep -qE ' 1500\.0 .*\+42\.9%$'; then
    echo "PASS bench_memory_marks_a_difference_within_the_spread"
else
    echo "FAIL bench_memory_marks_a_difference_within_the_spread: $out"
    status=1
fi
rm -f "$dir"/calls.*
out=$(bash dev/bench_memory.sh --trainer "$dir/trainer" -x 2 -n 1 --no-accum --no-zero 2>&1)
if echo "$out" | grep -E '^  -r 3 ' | grep -qE '%\?$'; then
    echo "PASS bench_memory_one_run_says_no_spread_was_measured"
else
    echo "FAIL bench_memory_one_run_says_no_spread_was_measured: $out"
    status=1
fi
exit $status
