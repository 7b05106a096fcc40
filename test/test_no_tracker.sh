#!/usr/bin/env bash
# test_no_tracker.sh: code, tests and docs speak to a reader of the repository, who has no issue
# tracker: no file names a tracker issue ("issue 17", "issues 9 and 18", "issue #3", "the issue's
# bound"). What the code does and why belongs in the file; how it came to be belongs in git log.
# Every file git tracks or would track (not ignored) is read, text files only.
set -u
. "$(dirname "$0")/lib.sh"

# An issue by number or possessive, or "the/this/that issue" as a noun. CUDA's sense of the word
# ("instruction issue", "in issue order", "at issue") is not matched.
pattern="\\bissues? #?[0-9]|\\bissue's|\\b(the|this|that) issues?\\b"

if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard > "$dir/files"
else
    find . -path ./build -prune -o -path ./.git -prune -o -type f -print0 > "$dir/files"
fi
self=test/test_no_tracker.sh
xargs -0 -r grep -nIiE -- "$pattern" < "$dir/files" 2> /dev/null | sed 's|^\./||' > "$dir/hits" || true
: > "$dir/bad"
while IFS= read -r line; do
    f=${line%%:*}
    [ "$f" = "$self" ] && continue
    echo "$line" >> "$dir/bad"
done < "$dir/hits"

n=$(tr -cd '\0' < "$dir/files" | wc -c)
if [ "$n" -gt 100 ] && [ ! -s "$dir/bad" ]; then
    pass "no tracker issue named in the $n files read"
else
    fail "tracker issues named" "$(wc -l < "$dir/bad") places in $n files: $(head -n 5 "$dir/bad" | cut -c 1-160 | tr '\n' '|')"
fi
exit $failed
