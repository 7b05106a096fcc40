#!/usr/bin/env bash
# test_includes.sh: the modules of the trainer's host code, engines and kernels (common/, reference/,
# kernels/: a module is foo.c or foo.cu with its foo.h or foo.cuh) depend on each other in one
# direction only: their quoted #includes form no cycle, so each can be read, built and tested
# knowing only what is below it. And the parameter layout (gpt2_config) needs the vocabulary's
# size, not the tokenizer: it reaches no tokenizer module, directly or through another.
set -u
. "$(dirname "$0")/lib.sh"

"$PY" - common reference kernels > "$dir/out.txt" 2>&1 <<'EOF'
import os, re, sys
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
edges = {}
for d in sys.argv[1:]:
    for dp, _, names in os.walk(d):
        for n in sorted(names):
            if not n.endswith((".c", ".h", ".cu", ".cuh", ".cpp")):
                continue
            f = os.path.join(dp, n)
            a = os.path.splitext(os.path.normpath(f))[0]
            edges.setdefault(a, set())
            for target in include.findall(open(f, errors="replace").read()):
                t = os.path.normpath(os.path.join(dp, target))
                if os.path.exists(t) and os.path.splitext(t)[0] != a:
                    edges[a].add(os.path.splitext(t)[0])
# A cycle: a path back to where it started, found by a depth-first walk.
cycles, state = [], {}
def walk(v, path):
    state[v] = 1
    path.append(v)
    for w in sorted(edges.get(v, ())):
        if state.get(w) == 1:
            cycles.append(path[path.index(w):] + [w])
        elif w not in state:
            walk(w, path)
    path.pop()
    state[v] = 2
for v in sorted(edges):
    if v not in state:
        walk(v, [])
print("modules %d" % len(edges))
for c in cycles:
    print("cycle " + " -> ".join(c))
def reach(v, seen):
    for w in edges.get(v, ()):
        if w not in seen:
            seen.add(w)
            reach(w, seen)
    return seen
print("gpt2_config reaches: " + " ".join(sorted(reach("common/gpt2_config", set()))))
EOF
[ $? -eq 0 ] || { fail "include graph" "$(tail -n 3 "$dir/out.txt")"; exit 1; }
n=$(sed -n 's/^modules //p' "$dir/out.txt")
cycles=$(grep '^cycle ' "$dir/out.txt")
if [ "${n:-0}" -gt 20 ] && [ -z "$cycles" ]; then
    pass "no include cycle among the $n modules of common/, reference/, kernels/"
else
    fail "include cycles" "${n:-0} modules; $(echo "$cycles" | tr '\n' ';')"
fi
reached=$(sed -n 's/^gpt2_config reaches: //p' "$dir/out.txt")
if echo " $reached " | grep -q ' common/util ' && ! echo " $reached " | grep -q 'tokenizer'; then
    pass "gpt2_config reaches no tokenizer (it includes: $reached)"
else
    fail "gpt2_config depends on the tokenizer" "it reaches: $reached"
fi
exit $failed
