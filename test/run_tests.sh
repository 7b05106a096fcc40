#!/usr/bin/env bash
# run_tests.sh: runs the test programs given as arguments, several at once, and totals the results.
#
# A test program prints one line per check, "PASS <name>" or "FAIL <name>: <why>" (or "SKIP ..."),
# and exits non-zero when anything failed. A program that exits non-zero without a FAIL line (a
# crash, a missing tool) counts as one failure under its own name.
#
# Tests are independent (each works in its own temporary dir), so up to TEST_JOBS of them run at
# once (default: every core). The longest known ones start first: durations come from the last run
# (build/test-logs/durations.txt) or, on a fresh clone, from test/durations.txt (measured on a
# 2-core machine; only the order depends on them). As each test ends one line says so:
#   [12/58] test/test_trainer.sh ... passed (26 checks, 45.1 s, cpu 16.3 s)
# (its wall time, and the CPU time of its processes) with its FAIL and SKIP lines under it; every
# test's whole output is kept in build/test-logs/. At the end: the slowest tests, the wall and CPU
# time of all, the failures, and the last line "N passed, N failed".
#   TEST_JOBS=1          one test at a time
#   TEST_VERBOSE=1       print every line of every test's output (after the test ends)
set -u
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
jobs=${TEST_JOBS:-$cores}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "run_tests.sh: TEST_JOBS must be a positive integer, got '$jobs'"; exit 2; }
# Tests share the cores: OpenMP threads that wait by sleeping, not spinning, leave them to the others
# (spinning doubled a C engine run's CPU time on a busy 2-core machine).
[ "$jobs" -gt 1 ] && export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# And each test as many OpenMP threads as it has cores to itself (one, with a test per core): beside
# another test a second thread mostly waits for its share of the cores (60 steps of the default run,
# the same losses: 9.9 s of CPU on one thread, 13.5 s on two). A test that wants threads sets them.
if [ "$jobs" -gt 1 ] && [ -z "${OMP_NUM_THREADS:-}" ]; then
    per_test=$(( cores / jobs ))
    export OMP_NUM_THREADS=$(( per_test > 0 ? per_test : 1 ))
fi
logs=${TEST_LOG_DIR:-build/test-logs}
mkdir -p "$logs"
n=$#
[ "$n" -gt 0 ] || { echo "run_tests.sh: no tests given"; echo "0 passed, 0 failed"; exit 0; }

# The order: longest first by the last measured durations, unknown tests first of all (they may be
# long), the given order among equals.
durations_file="$logs/durations.txt"
[ -s "$durations_file" ] || durations_file=test/durations.txt
declare -A known
if [ -f "$durations_file" ]; then
    while read -r name secs; do
        [ -n "${name:-}" ] && [ "${name#\#}" = "$name" ] && known[$name]=$secs
    done < "$durations_file"
fi
order=()
i=0
while IFS=$'\t' read -r _ _ t; do order+=("$t"); done < <(
    for t in "$@"; do
        printf '%s\t%06d\t%s\n' "${known[$t]:-999999}" "$i" "$t"
        i=$((i + 1))
    done | sort -t $'\t' -k1,1nr -k2,2n)

log_name() { local s=${1#./}; echo "$logs/${s//\//_}.log"; }
now() { date +%s.%N; }

passed=0
failed=0
cpu_total=0
failures=()
declare -A pid_of start_of
finished=0
results=()   # "seconds name" per test, for the slowest list and durations.txt

# Prints the result of test $1 (done), updates the totals.
report() {
    local t=$1 log rc secs cpu p f s
    log=$(log_name "$t")
    rc=$(cat "$log.rc" 2>/dev/null || echo 255)
    secs=$(awk -v a="${start_of[$t]}" -v b="$(cat "$log.end")" 'BEGIN { printf "%.1f", b - a }')
    # "0m1.250s 0m0.100s": user and system CPU time of the test's processes
    cpu=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } printf "%.1f", t }' "$log.cpu")
    rm -f "$log.rc" "$log.end" "$log.cpu"
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    s=$(grep -c '^SKIP' "$log")
    local crashed=0
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then crashed=1; f=1; fi
    finished=$((finished + 1))
    local what="passed ($p check$([ "$p" = 1 ] || echo s)"
    [ "$s" -gt 0 ] && what="$what, $s skipped"
    [ "$f" -gt 0 ] && what="FAILED ($p passed, $f failed"
    echo "[$finished/$n] $t ... $what, $secs s, cpu $cpu s)"
    cpu_total=$(awk -v a="$cpu_total" -v b="$cpu" 'BEGIN { print a + b }')
    if [ "${TEST_VERBOSE:-0}" = 1 ]; then
        sed 's/^/    /' "$log"
    else
        grep -E '^(FAIL|SKIP)' "$log" | sed 's/^/    /'
    fi
    if [ "$crashed" = 1 ]; then
        tail -n 20 "$log" | sed 's/^/    | /'
        echo "    FAIL $t: exited with status $rc (whole output: $log)"
        failures+=("FAIL $t: exited with status $rc (whole output: $log)")
    elif [ "$f" -gt 0 ]; then
        while IFS= read -r line; do failures+=("$line"); done < <(grep '^FAIL ' "$log")
        echo "    (whole output: $log)"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    results+=("$secs $t")
}

start_all=$(now)
echo "running $n tests, up to $jobs at once (TEST_JOBS=1 for one at a time); outputs in $logs/"
next=0
running=0
while [ "$finished" -lt "$n" ]; do
    while [ "$running" -lt "$jobs" ] && [ "$next" -lt "$n" ]; do
        t=${order[$next]}
        next=$((next + 1))
        log=$(log_name "$t")
        rm -f "$log.rc" "$log.end"
        start_of[$t]=$(now)
        # The exit status and the end time go to files: the loop below notices them without blocking.
        # times: the test's CPU seconds (user, system), which several tests at once share the cores for.
        ( "$t" > "$log" 2>&1 < /dev/null; rc=$?; now > "$log.end"; times > "$log.cpu"
          echo "$rc" > "$log.rc" ) &
        pid_of[$t]=$!
        running=$((running + 1))
    done
    sleep 0.2
    for t in "${!pid_of[@]}"; do
        if [ -f "$(log_name "$t").rc" ]; then
            wait "${pid_of[$t]}" 2>/dev/null
            unset "pid_of[$t]"
            running=$((running - 1))
            report "$t"
        fi
    done
done
total=$(awk -v a="$start_all" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')

# This run's durations replace the old ones of the same tests; the others' are kept.
for r in "${results[@]}"; do known[${r#* }]=${r%% *}; done
for name in "${!known[@]}"; do echo "$name ${known[$name]}"; done | sort -k2,2nr > "$logs/durations.txt.tmp" \
    && mv "$logs/durations.txt.tmp" "$logs/durations.txt"
echo "slowest tests:"
printf '%s\n' "${results[@]}" | sort -k1,1nr | head -n 8 | awk '{ printf "  %7.1f s  %s\n", $1, $2 }'
echo "tests took ${total} s of wall time and $(printf '%.0f' "$cpu_total") s of CPU time, up to $jobs at once"
if [ "$failed" -gt 0 ]; then
    echo "Failures:"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
