#!/usr/bin/env python3
"""repetition.py: runs of six or more lines that two places of the code repeat word for word.

    repetition.py [--allow FILE] GROUP [GROUP ...]

A GROUP is a comma-separated list of files: every file of a group is compared with itself and with
each other file of the group. Lines are compared after their whitespace is collapsed, with comment
lines, // comments, preprocessor lines and blank lines left out; a run counts the lines in it of 12
characters or more (a closing brace or a bare `__syncthreads();` alone makes no repetition). Each
run of at least six such lines prints one line, FILE:FIRST-LAST ~ FILE:FIRST-LAST (N lines) and its
first line, unless the allow file lists that first line (after the same collapsing; '#' lines there
are the reasons). The exit status is 1 when a run was printed.
"""
import itertools
import re
import sys

MIN_RUN = 6
MIN_CHARS = 12


def code_lines(path):
    out = []
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("//") or text.startswith("#") or text.startswith("/*") or text.startswith("*"):
                continue
            text = re.sub(r"\s*//.*$", "", text)
            out.append((number, " ".join(text.split())))
    return out


def runs(a, b, same):
    """Maximal runs of equal lines between a and b (for one file, b's run starts after a's ends)."""
    where = {}
    for j, (_, text) in enumerate(b):
        where.setdefault(text, []).append(j)
    found = []
    for i, (_, text) in enumerate(a):
        for j in where.get(text, []):
            if same and j <= i:
                continue
            if i > 0 and j > 0 and a[i - 1][1] == b[j - 1][1] and (not same or j - 1 > i - 1):
                continue  # not the start of a maximal run
            k = 0
            while i + k < len(a) and j + k < len(b) and a[i + k][1] == b[j + k][1] and (not same or i + k < j):
                k += 1
            counted = sum(1 for t in range(k) if len(a[i + t][1]) >= MIN_CHARS)
            if counted >= MIN_RUN:
                found.append((i, j, k, counted))
    return found


def main(argv):
    allow = set()
    if len(argv) >= 2 and argv[0] == "--allow":
        with open(argv[1]) as f:
            allow = {" ".join(l.split()) for l in f if l.strip() and not l.lstrip().startswith("#")}
        argv = argv[2:]
    if not argv:
        print(__doc__.strip())
        return 2
    bad = 0
    for group in argv:
        files = group.split(",")
        text = {p: code_lines(p) for p in files}
        for pa, pb in itertools.combinations_with_replacement(files, 2):
            for i, j, k, counted in runs(text[pa], text[pb], pa == pb):
                first = text[pa][i][1]
                if first in allow:
                    continue
                bad += 1
                print("%s:%d-%d ~ %s:%d-%d (%d lines): %s" % (pa, text[pa][i][0], text[pa][i + k - 1][0], pb,
                                                              text[pb][j][0], text[pb][j + k - 1][0], counted, first[:100]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
