#!/usr/bin/env bash
# test_doc_figures.sh: every figure README.md and docs/*.md quote from the project's tools is
# marked and is what the tool prints now (scripts/doc_figures.py: one PASS or FAIL line each); and
# the check can fail: a copy of the docs with a stale figure (README's ladder bottom as it stood,
# 5.6 GiB where the ladder prints 4.86), a mark removed, a link to a heading that is not there and a
# README grown past 200 lines ends with exit 1, naming each. The same script checks that README is
# at most 200 lines and every relative link in README.md, docs/ and the two other READMEs resolves.
set -u
. "$(dirname "$0")/lib.sh"
"$PY" scripts/doc_figures.py
rc=$?
[ $rc = 0 ] || fail "doc figures" "scripts/doc_figures.py exit $rc (its FAIL lines above; make docs writes the tools' figures)"
mkdir -p "$dir/root/docs"
cp docs/*.md "$dir/root/docs/"
sed -e 's|<!-- fig ladder.bottom -->[^<]*<!-- /fig -->|<!-- fig ladder.bottom -->5.6<!-- /fig -->|' \
    -e 's|<!-- fig ladder.top -->\([^<]*\)<!-- /fig -->|\1|' README.md > "$dir/root/README.md"
echo "See [the guide](docs/guide.md#no-such-heading)." >> "$dir/root/README.md"
for i in $(seq 1 60); do echo >> "$dir/root/README.md"; done
"$PY" scripts/doc_figures.py --root "$dir/root" > "$dir/stale.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "^FAIL doc figure ladder.bottom in README.md: the tool prints '[0-9.]*' where the doc says '5.6'" "$dir/stale.out" \
    && grep -q "^FAIL doc figure ladder.top: not marked in README.md" "$dir/stale.out" \
    && grep -q "^FAIL doc link docs/guide.md#no-such-heading in README.md: no such heading in docs/guide.md" "$dir/stale.out" \
    && grep -q "^FAIL README.md: [0-9]* lines, more than 200" "$dir/stale.out" \
    && pass "a stale figure, a missing mark, a broken link and a long README fail the check, each named" \
    || fail "the check on stale docs" "exit $rc: $(grep -v '^PASS' "$dir/stale.out" | head -n 3)"
exit $failed
