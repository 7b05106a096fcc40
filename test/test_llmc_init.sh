#!/usr/bin/env bash
# test_llmc_init.sh: a descriptor model starts where llm.c's starts. llm.c initialises with
# PyTorch's generator (torch.manual_seed(42)) and PyTorch's normal_ in PyTorch's module order, so
# the reference here is PyTorch itself, drawing as llm.c's rules say: wte (its 50257 real rows) and
# wpe N(0, 0.02), then per layer the QKV, attention projection, MLP and MLP projection weights, the
# two projections N(0, 0.02 / sqrt(2 L)); biases 0, LayerNorm weights 1, wte's padding rows 0. The
# weights a run of llm.c's d6 starts from (written after one step at learning rate 0) must be those draws (PyTorch
# vectorises its log/sin/cos, so within a few float ulps); --init-seed changes the seed. Also
# llm.c's descriptor names: gpt2:dN = dN, gpt3:cN, d60/d72/d84, and refusals.
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
require "$gen"
$gen shard "$dir/train.bin" 4000 50257 2 || { echo "FAIL setup: gen_data"; exit 1; }
# -l 0: one update that moves nothing (AdamW's step is lr times a finite number), so the model file
# of step 1 holds the initial weights.
start=(-i "$dir/train.bin" -b 1 -t 16 -x 1 -l 0 -u 0 -v 0 -s 0 -n 1)
./train_gpt2 -e d6 "${start[@]}" -o "$dir/d6" > "$dir/d6.out" 2>&1 || fail "d6" "$(tail -2 "$dir/d6.out")"
./train_gpt2 -e gpt2:d6 "${start[@]}" -o "$dir/g6" > "$dir/g6.out" 2>&1 || fail "gpt2:d6" "$(tail -2 "$dir/g6.out")"
./train_gpt2 -e gpt2:d6 "${start[@]}" --init-seed 7 -o "$dir/d6s7" > "$dir/d6s7.out" 2>&1 || fail "gpt2:d6 --init-seed 7" "$(tail -2 "$dir/d6s7.out")"
# d1..d5 are this project's (llm.c has none): they keep its own initialisation, seeded by -S.
./train_gpt2 -e d2 "${start[@]}" -S 5 -o "$dir/d2" > "$dir/d2.out" 2>&1 || fail "d2" "$(tail -2 "$dir/d2.out")"
$gen model "$dir/own_d2.bin" 2 128 2 50257 1024 5
"$PY" - "$dir" <<'PYEOF'
import math, sys
import numpy as np
import torch
d = sys.argv[1]

def llmc_init(L, C, V, Vp, maxT, seed):
    """llm.c's rules, drawn with PyTorch: {tensor name: array} in the model file's layout."""
    torch.manual_seed(seed)
    draw = lambda n, std: torch.empty(n).normal_(0.0, std).numpy()
    t = {"wte": np.zeros((Vp, C), np.float32), "wpe": None}
    t["wte"][:V] = draw(V * C, 0.02).reshape(V, C)
    t["wpe"] = draw(maxT * C, 0.02).reshape(maxT, C)
    shapes = {"qkvw": (3 * C, C), "attprojw": (C, C), "fcw": (4 * C, C), "fcprojw": (C, 4 * C)}
    for k, s in shapes.items():
        t[k] = np.zeros((L,) + s, np.float32)
    rstd = 0.02 * (1.0 / math.sqrt(2.0 * L))
    for l in range(L):
        for k in ("qkvw", "attprojw", "fcw", "fcprojw"):
            std = rstd if k in ("attprojw", "fcprojw") else 0.02
            t[k][l] = draw(int(np.prod(shapes[k])), std).reshape(shapes[k])
    return t

def read(path):
    h = np.fromfile(path, dtype=np.int32, count=256)
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    data = np.fromfile(path, dtype=np.float32, offset=1024)
    order = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)),
             ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
             ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
             ("lnfw", (C,)), ("lnfb", (C,))]
    out, off = {}, 0
    for name, shape in order:
        n = int(np.prod(shape))
        out[name] = data[off:off + n].reshape(shape)
        off += n
    return (L, C, V, Vp, maxT), out

def check(name, path, seed):
    (L, C, V, Vp, maxT), got = read(path)
    want = llmc_init(L, C, V, Vp, maxT, seed)
    worst, where = 0.0, ""
    for k, w in want.items():
        diff = float(np.max(np.abs(got[k].astype(np.float64) - w.astype(np.float64))))
        # a few float ulps of values of size ~0.1 (PyTorch's vectorised log/sin/cos)
        if diff > worst:
            worst, where = diff, k
    const_ok = all(np.all(got[k] == v) for k, v in (("ln1w", 1), ("ln2w", 1), ("lnfw", 1), ("ln1b", 0), ("qkvb", 0),
                                                     ("attprojb", 0), ("ln2b", 0), ("fcb", 0), ("fcprojb", 0), ("lnfb", 0)))
    ok = worst <= 1e-7 and const_ok
    print("%s %s: L=%d C=%d, every weight as PyTorch draws it by llm.c's rules (seed %d; largest difference %.2g in %s)%s"
          % ("PASS" if ok else "FAIL", name, L, C, seed, worst, where, "" if const_ok else "; biases/LayerNorm not 0/1"))
    return ok

ok = check("llm.c's init of d6 (llm.c's smallest GPT-2)", d + "/d6/model_00000001.bin", 42)
ok &= check("llm.c's init of gpt2:d6 with --init-seed 7", d + "/d6s7/model_00000001.bin", 7)
a = np.fromfile(d + "/d6/model_00000001.bin", dtype=np.float32, offset=1024)
b = np.fromfile(d + "/g6/model_00000001.bin", dtype=np.float32, offset=1024)
same = a.shape == b.shape and np.array_equal(a, b)
print("%s gpt2:d6 is d6 (the same weights)" % ("PASS" if same else "FAIL"))
a = np.fromfile(d + "/d2/model_00000001.bin", dtype=np.float32, offset=1024)
b = np.fromfile(d + "/own_d2.bin", dtype=np.float32, offset=1024)
own = a.shape == b.shape and np.array_equal(a, b)
print("%s d2 (this project's, not llm.c's) keeps the project's initialisation seeded by -S (gen_data's model, seed 5)"
      % ("PASS" if own else "FAIL"))
sys.exit(0 if ok and same and own else 1)
PYEOF
[ $? -eq 0 ] || failed=1

# llm.c's descriptors by shape (the memory plan names L, C, NH; no weights needed).
shape() { ./train_gpt2 -e "$1" --plan -b 1 -t "${2:-64}" 2>&1 | sed -n 's/^memory plan: \(L=[0-9]* C=[0-9]* NH=[0-9]*\).*/\1/p'; }
got="$(shape d12) | $(shape gpt2:d48) | $(shape d60) | $(shape d72) | $(shape gpt2:d84) | $(shape gpt3:c768 2048) | $(shape gpt3:c1536) | $(shape gpt3:c2560) | $(shape gpt3:c12288)"
want="L=12 C=768 NH=12 | L=48 C=1600 NH=25 | L=60 C=1920 NH=30 | L=72 C=2880 NH=30 | L=84 C=3456 NH=36 | L=12 C=768 NH=12 | L=24 C=1536 NH=16 | L=32 C=2560 NH=32 | L=96 C=12288 NH=96"
[ "$got" = "$want" ] && pass "llm.c's descriptors: d12, gpt2:d48, d60, d72, gpt2:d84, gpt3:c768 (T 2048), c1536, c2560, c12288" ||
    fail "descriptors" "got '$got'"
./train_gpt2 -e gpt2:d12 --plan -b 1 -t 1025 > /dev/null 2> "$dir/t.err"
[ $? -eq 1 ] && grep -q "flag -t (sequence length) is 1025, the model's maximum is 1024" "$dir/t.err" &&
    pass "gpt2:d12 holds 1024 positions (-t 1025 refused)" || fail "gpt2:d12 -t 1025" "$(cat "$dir/t.err")"
for bad in gpt2:d13 gpt2:d2 gpt3:c999 gpt4:d12 gpt2:d gpt2:dx d0; do
    ./train_gpt2 -e "$bad" -x 1 -o "" > /dev/null 2> "$dir/bad.err"
    rc=$?
    if [ $rc -ne 1 ] || [ "$(wc -l < "$dir/bad.err")" -ne 1 ] || ! grep -q "flag -e: '$bad' is neither a model descriptor" "$dir/bad.err"; then
        fail "-e $bad" "exit $rc: $(cat "$dir/bad.err")"
        bad=
    fi
done
[ -n "$bad" ] && pass "-e gpt2:d13, gpt2:d2 (not llm.c's), gpt3:c999, gpt4:d12, gpt2:d, gpt2:dx, d0: one line each naming -e"
./train_gpt2 -e d6 --init-seed -1 -x 1 -o "" > /dev/null 2> "$dir/seed.err"
[ $? -eq 1 ] && grep -q "flag --init-seed must be 0 to 4294967295" "$dir/seed.err" && pass "--init-seed -1 refused" ||
    fail "--init-seed -1" "$(cat "$dir/seed.err")"
exit $failed
