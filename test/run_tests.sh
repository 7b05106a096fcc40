#!/usr/bin/env bash
# run_tests.sh: runs each test program given as an argument and totals the results.
# A test program prints one line per check, "PASS <name>" or "FAIL <name>: <why>", and exits
# non-zero when anything failed. A program that exits non-zero without a FAIL line (a crash,
# a missing tool) counts as one failure under its own name. The last line is "N passed, N failed".
set -u
passed=0
failed=0
failures=()
for t in "$@"; do
    echo "== $t"
    start=$(date +%s)
    out=$("$t" 2>&1)
    rc=$?
    echo "$out" | grep -E '^(PASS|FAIL|SKIP|  )' || true
    p=$(echo "$out" | grep -c '^PASS ')
    f=$(echo "$out" | grep -c '^FAIL ')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$out" | tail -n 20
        echo "FAIL $t: exited with status $rc"
        f=1
    fi
    if [ "$f" -gt 0 ]; then
        while IFS= read -r line; do failures+=("$line"); done < <(echo "$out" | grep '^FAIL ')
        [ "$rc" -ne 0 ] && [ "$(echo "$out" | grep -c '^FAIL ')" -eq 0 ] && failures+=("FAIL $t: exited with status $rc")
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    echo "   ($p passed, $f failed, $(( $(date +%s) - start ))s)"
done
if [ "$failed" -gt 0 ]; then
    echo "Failures:"
    printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
