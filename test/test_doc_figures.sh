#!/usr/bin/env bash
# test_doc_figures.sh: every figure README.md and docs/*.md quote from the project's tools is
# marked and is what the tool prints now (scripts/doc_figures.py: one PASS or FAIL line each); and
# the check can fail: a copy of the docs with a stale figure (README's ladder bottom as it stood,
# 5.6 GiB where the ladder prints 4.86) and a mark removed ends with exit 1, naming both.
set -u
. "$(dirname "$0")/lib.sh"
"$PY" scripts/doc_figures.py
rc=$?
[ $rc = 0 ] || fail "doc figures" "scripts/doc_figures.py exit $rc (its FAIL lines above; make docs writes the tools' figures)"
mkdir -p "$dir/root/docs"
cp docs/*.md "$dir/root/docs/"
sed -e 's|<!-- fig ladder.bottom -->[^<]*<!-- /fig -->|<!-- fig ladder.bottom -->5.6<!-- /fig -->|' \
    -e 's|<!-- fig ladder.top -->\([^<]*\)<!-- /fig -->|\1|' README.md > "$dir/root/README.md"
"$PY" scripts/doc_figures.py --root "$dir/root" > "$dir/stale.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "^FAIL doc figure ladder.bottom in README.md: the tool prints '[0-9.]*' where the doc says '5.6'" "$dir/stale.out" \
    && grep -q "^FAIL doc figure ladder.top: not marked in README.md" "$dir/stale.out" \
    && pass "a stale figure and a missing mark fail the check, each named" \
    || fail "the check on stale docs" "exit $rc: $(grep -v '^PASS' "$dir/stale.out" | head -n 3)"
exit $failed
