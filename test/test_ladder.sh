#!/usr/bin/env bash
# test_ladder.sh: the memory ladder and the run recipes (scripts/), planned only (no GPU, no emu):
#   - scripts/memory_ladder.sh d48 --planned: every row of the table, each "planned", each row's
#     columns adding up to its total and the total equal to the planner's for the row's flags; the
#     totals falling where they must (FP16 < FP32, each recompute level <= the one before, ZeRO-1 at
#     more ranks < fewer, ZeRO-2 < ZeRO-1, half the micro-batch < the full one, offload lowest of
#     all); the model states of the closed forms (16Ψ, 12Ψ/N of optimizer state under ZeRO-1); FP16
#     fitting 48 GiB at micro-batch 8 and FP32 not; the ZeRO rows' communication (2(N-1)/N·2Ψ bytes
#     a step per rank, its time at the default link's 450 GB/s); the pipeline rows (4 stages below one
#     rank's row, x 2 data-parallel ranks at ZeRO-1 below 4 stages; their sends the planner's: a
#     micro-step's activation and gradient across each of the largest stage's boundaries, B·T·C·2
#     bytes, 4 micro-steps, and the statistics); ladder.json; the PNG (magic bytes) where matplotlib
#     is installed; the time table: every row's predicted step on the A6000 and the H100 (the
#     planner's), the FP16 rows by the kernel report's counts, the costs in the order they must be;
#   - each recipe with --dry: it prints a command whose flags the trainer accepts (the same command
#     with --plan) and that the planner says fits its budget; the 48 GB recipe within 48 GiB at
#     -b >= 8 (the planner allows it) with --max-memory 48GiB and 524,288 tokens per step; the
#     built-in corpus when no data is given.
# Needs only ./train_gpt2 (make train) and python3; about 10 s.
set -u
. "$(dirname "$0")/lib.sh"
[ -x ./train_gpt2 ] || { echo "FAIL ladder: ./train_gpt2 not built"; exit 1; }

# ---- the ladder -----------------------------------------------------------------------------------
if scripts/memory_ladder.sh d48 --planned --out "$dir/ladder" > "$dir/ladder.out" 2>&1; then
    pass "memory_ladder.sh d48 --planned runs"
else
    fail "memory_ladder.sh d48 --planned" "$(tail -n 3 "$dir/ladder.out")"
    exit 1
fi
r=$(python3 - "$dir/ladder" <<'EOF'
import json, os, re, subprocess, sys
out = sys.argv[1]
GIB = 2 ** 30
PSI = 1557686400
lines = open(os.path.join(out, "ladder.md")).read().splitlines()
head = next(l for l in lines if l.startswith("| # |"))
cols = [c.strip() for c in head.strip("|").split("|")]
rows = []
first = lines[lines.index(head):]  # the memory table: its rows up to the first blank line (the time table follows)
for l in first[:first.index("")] if "" in first else first:
    if re.match(r"^\| \d+ \|", l):
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        rows.append(dict(zip(cols, cells)))
bad = []
want = ["FP32 baseline", "FP16 mixed precision", "recompute 1", "recompute 2", "recompute 3", "ZeRO-1, 2 ranks",
        "ZeRO-1, 4 ranks", "ZeRO-1, 8 ranks", "ZeRO-2, 8 ranks", "ZeRO-3, 8 ranks", "micro-batch 4 x 2", "offload optimizer", "offload gradients",
        "pipeline, 4 stages", "2 data-parallel ranks a stage, ZeRO-1"]
if len(rows) != len(want):
    print(f"{len(rows)} rows in ladder.md, expected {len(want)}"); sys.exit(1)
for i, (r, w) in enumerate(zip(rows, want)):
    if w not in r["step"]: bad.append(f"row {i + 1} is '{r['step']}', expected '{w}'")
    if r["measured peak"] != "planned" or r["tok/s per GPU"] != "planned": bad.append(f"row {i + 1} not marked planned")
parts = ["parameters", "gradients", "master", "m", "v", "activations", "other", "estimates"]
total = [float(r["total per rank"].strip("*")) for r in rows]
for i, r in enumerate(rows):
    s = sum(float(r[c]) for c in parts)
    if abs(s - total[i]) > 0.05: bad.append(f"row {i + 1}: the columns add up to {s:.2f}, the total is {total[i]:.2f}")
    # The total is the planner's for the row's flags, planned again here.
    flags = r["flags"].strip("`").split()
    p = json.loads(subprocess.run(["./train_gpt2", "--plan", "--json", "-e", "d48", "-t", "1024", *flags, "--ranks", r["ranks"]],
                                  capture_output=True, text=True, check=True).stdout)
    if f"{p['device_total'] / GIB:.2f}" != f"{total[i]:.2f}":
        bad.append(f"row {i + 1}: table {total[i]:.2f} GiB, planner {p['device_total'] / GIB:.2f}")
def less(a, b, strict=True):   # rows numbered from 1
    ok = total[a - 1] < total[b - 1] if strict else total[a - 1] <= total[b - 1]
    if not ok: bad.append(f"row {a} ({rows[a - 1]['step']}, {total[a - 1]}) not {'<' if strict else '<='} row {b} ({rows[b - 1]['step']}, {total[b - 1]})")
less(2, 1); less(3, 2, False); less(4, 3, False); less(5, 4, False); less(5, 2)
less(6, 5); less(7, 6); less(8, 7); less(8, 6); less(9, 8); less(10, 9)
less(11, 5); less(12, 11); less(13, 12)
less(14, 5); less(15, 14)
# Offloading the optimizer beats every row but ZeRO-3 at 8 ranks; offloading the gradients too, all.
for b in range(1, 12):
    if b != 10: less(12, b)
    less(13, b)
# Model states: 16Ψ in FP16 (2 + 2 + 4 + 4 + 4 bytes), ZeRO-1's optimizer state 12Ψ/N.
def states(r, names): return sum(float(r[c]) for c in names)
fp16 = states(rows[1], ["parameters", "gradients", "master", "m", "v"])
if abs(fp16 - 16 * PSI / GIB) > 0.03: bad.append(f"FP16 model states {fp16:.2f} GiB, 16Ψ = {16 * PSI / GIB:.2f}")
for i, n in ((5, 2), (6, 4), (7, 8)):
    opt = states(rows[i], ["master", "m", "v"])
    if abs(opt - 12 * PSI / n / GIB) > 0.03: bad.append(f"ZeRO-1 at {n}: optimizer state {opt:.2f} GiB, 12Ψ/N = {12 * PSI / n / GIB:.2f}")
if rows[0]["fits 48GiB"] != "no" or rows[1]["fits 48GiB"] != "yes":
    bad.append(f"fits 48GiB: FP32 {rows[0]['fits 48GiB']}, FP16 {rows[1]['fits 48GiB']} (expected no, yes)")
# Each row's own micro-batch and tokens per step (-d, else B*T*ranks): the ZeRO rows take more tokens.
for i, r in enumerate(rows):
    flags = r["flags"].strip("`").split()
    B = int(flags[flags.index("-b") + 1])
    d = int(flags[flags.index("-d") + 1]) if "-d" in flags else B * 1024 * int(r["ranks"])
    tok = int(r["tokens per step"].split()[0].replace(",", ""))
    if int(r["micro-batch"]) != B or tok != d: bad.append(f"row {i + 1}: micro-batch {r['micro-batch']}, tokens {tok}; flags say {B}, {d}")
    dp = int(r["ranks"]) // (int(flags[flags.index("-pp") + 1]) if "-pp" in flags else int(r["ranks"]))
    if "-pp" in flags and f"({d // (B * 1024 * dp)} micro-steps)" not in r["tokens per step"]: bad.append(f"row {i + 1}: micro-steps not shown")
    if "-d" in flags and f"({d // (B * 1024)} micro-steps)" not in r["tokens per step"]: bad.append(f"row {i + 1}: micro-steps not shown")
if [int(r["tokens per step"].split()[0].replace(",", "")) for r in rows[5:10]] != [16384, 32768, 65536, 65536, 65536]:
    bad.append("the ZeRO rows' tokens per step are not B*T*ranks")
j = json.load(open(os.path.join(out, "ladder.json")))
if len(j["rows"]) != len(rows) or j["parameters"] != PSI: bad.append("ladder.json: rows or parameters differ from the table")
# The chart's layout: one panel per path, each branch starting from the row it changes, drawn again.
panels = [(p["parent"], p["rows"]) for p in j["panels"]]
if panels != [(None, [1, 2, 3, 4, 5]), (5, [5, 6, 7, 8, 9, 10]), (5, [5, 11, 12, 13]), (5, [5, 14, 15])]:
    bad.append(f"chart panels {panels}, expected the trunk 1-5 and the branches 5-10, 5, 11-13 and 5, 14-15")
# Colours: every component its own, far apart in CIELAB (delta E 1976 >= 30; the three greens the
# chart had for master, m and v were 18-20 apart).
def lab(h):
    lin = [(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4) for c in (int(h[i:i + 2], 16) / 255 for i in (1, 3, 5))]
    r, g, b = lin
    X, Y, Z = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    t = lambda x: x ** (1 / 3) if x > 0.008856 else 7.787 * x + 16 / 116
    return 116 * t(Y) - 16, 500 * (t(X) - t(Y)), 200 * (t(Y) - t(Z))
colors = j["colors"]
close = [(a, b) for a in colors for b in colors
         if a < b and sum((x - y) ** 2 for x, y in zip(lab(colors[a]), lab(colors[b]))) ** 0.5 < 30]
if sorted(colors) != sorted(parts) or close: bad.append(f"component colours too close: {close}")
# Host memory: the offload rows hold 20-26 GiB of it, in the table and ladder.json.
for i in (11, 12):
    if float(rows[i]["host"]) < 15 or j["rows"][i]["host_bytes"] < 15 * GIB: bad.append(f"row {i + 1}: host memory {rows[i]['host']} GiB")
# Communication, the ZeRO rows only: a rank sends 2(N-1)/N·Ψ·2 bytes a step (fp16 ring collectives;
# ZeRO-1 and -2 alike, the 16-byte statistics and the shards' padding within 0.1%); ZeRO-3 sends
# stage 2's reduce-scatter, (N-1)/N·2Ψ, plus its parameter gathers: each layer gathered for forward,
# again for level 3's recompute and backward, between (N-1)/N·2Ψ·1 and ·3 more. The time is those
# bytes over the default link's 450 GB/s.
mscol = next(c for c in cols if c.startswith("comm ms at nvlink"))
for i, r in enumerate(rows):
    n, c = int(r["ranks"]), r["comm GB a step per rank"]
    if n == 1:
        if c != "–" or r[mscol] != "–": bad.append(f"row {i + 1}: one rank, yet communication {c}, {r[mscol]}")
        continue
    want = 2 * (n - 1) / n * PSI * 2 / 1e9
    if "-pp" in r["flags"]:
        # The largest stage's rank (a middle one at 4 stages) sends a micro-step's activation forward
        # and its gradient back, B·T·C·2 bytes each, on each of 4 micro-steps, plus 24 bytes of statistics
        # and, with 2 ranks a stage at ZeRO-1, its stage's gradients and parameters (the planner's).
        p = json.loads(subprocess.run(["./train_gpt2", "--plan", "--json", "-e", "d48", "-t", "1024", *r["flags"].strip("`").split(),
                                       "--ranks", r["ranks"]], capture_output=True, text=True, check=True).stdout)
        items = {it["kind"]: it for it in p["communication"]["items"]}
        act = 8 * 1024 * 1600 * 2
        if items["send"]["sent"] not in (act, 2 * act) or abs(float(c) - p["communication"]["sent_per_step"] / 1e9) > 1e-3:
            bad.append(f"row {i + 1}: pipeline sends {c} GB a step, its stage's activations {items['send']['sent']} a micro-step")
    elif "-z 3" in r["flags"]:
        rs = (n - 1) / n * PSI * 2 / 1e9
        if not 2 * rs < float(c) < 4 * rs: bad.append(f"row {i + 1}: ZeRO-3 sends {c} GB a step per rank, outside (2, 4) x (N-1)/N·2Ψ = {rs:.3f} GB")
    elif abs(float(c) - want) > 1e-3 * want: bad.append(f"row {i + 1}: {c} GB a step per rank, the ring's 2(N-1)/N·2Ψ is {want:.3f}")
    ms = float(r[mscol].split()[0])
    if abs(ms - float(c) * 1e9 / 450e9 * 1e3) > 0.01: bad.append(f"row {i + 1}: {ms} ms for {c} GB at 450 GB/s")
if bad: print("; ".join(bad)); sys.exit(1)
print(f"{len(rows)} rows, {total[0]:.2f} GiB (FP32) -> {total[1]:.2f} (FP16) -> {total[4]:.2f} (-r 3) -> "
      f"{total[8]:.2f} (ZeRO-2 at 8) -> {total[9]:.2f} (ZeRO-3 at 8) | {total[12]:.2f} (offload)")
EOF
) && pass "ladder table: $r" || fail "ladder table" "$r"

# The time table (ladder.json's "time", the table's second block): each row's predicted step on the
# RTX A6000 and the H100 SXM is the planner's `--plan --gpu` for its flags; the FP16 rows by the kernel
# report's counts (d48 at T = 1024 is counted at every level, accumulation, ZeRO's share, a stage's
# layers and offload), the FP32 row by the marked estimate; tokens/s per GPU the row's tokens a step
# over its ranks and the step; and the costs fall where they must: each recompute level slower than
# the one before, offload slower than the optimizer on the device, ZeRO-1's rank faster to update than
# one rank holding it all, the pipeline's bubble making 4 stages slower than one card's step.
r=$(python3 - "$dir/ladder" <<'EOF'
import json, os, subprocess, sys
out = sys.argv[1]
j = json.load(open(os.path.join(out, "ladder.json")))
rows, bad = j["rows"], []
md = open(os.path.join(out, "ladder.md")).read()
for g, name in (("a6000", "RTX A6000"), ("h100", "H100 SXM")):
    t = [r["time"][g] for r in rows]
    for i, (r, x) in enumerate(zip(rows, t)):
        if x["gpu"] != name or not x["step_seconds"] > 0: bad.append(f"row {i + 1} on {g}: {x['gpu']}, {x['step_seconds']} s")
        if x["counted"] != (i > 0): bad.append(f"row {i + 1} on {g}: counted {x['counted']} ({x['time_model']})")
        per = r["tokens_per_step"] / r["ranks"] / x["step_seconds"]
        if abs(per / x["tokens_per_s_per_gpu"] - 1) > 1e-9: bad.append(f"row {i + 1} on {g}: tokens/s per GPU")
        p = json.loads(subprocess.run(["./train_gpt2", "--plan", "--json", "-e", "d48", "-t", "1024", *r["flags"].split(),
                                       "--ranks", str(r["ranks"]), "--gpu", g], capture_output=True, text=True, check=True).stdout)
        if p["communication"]["step_seconds"] != x["step_seconds"]: bad.append(f"row {i + 1} on {g}: not the planner's step")
        if f"| {x['step_seconds'] * 1e3:,.1f}" not in md: bad.append(f"row {i + 1} on {g}: its ms not in the time table")
    s = [x["step_seconds"] for x in t]
    c = [x["compute_seconds"] for x in t]
    for a, b in ((2, 3), (3, 4), (4, 5)):
        if not s[a - 1] < s[b - 1]: bad.append(f"{g}: row {b}'s step {s[b - 1]:.4f} s is not above row {a}'s {s[a - 1]:.4f}")
    for a, b in ((11, 12), (11, 13)):
        if not s[a - 1] < s[b - 1]: bad.append(f"{g}: offload row {b} ({s[b - 1]:.4f} s) not slower than row {a} ({s[a - 1]:.4f})")
    if not c[5] < c[4]: bad.append(f"{g}: ZeRO-1's compute {c[5]:.4f} s not below one rank's {c[4]:.4f}")
    if not s[13] > s[4]: bad.append(f"{g}: 4 pipeline stages ({s[13]:.4f} s, 4 micro-steps) not slower than one card's step ({s[4]:.4f})")
if bad: print("; ".join(bad[:6])); sys.exit(1)
a = [r["time"]["a6000"]["step_seconds"] * 1e3 for r in rows]
print(f"RTX A6000 ms a step: FP16 {a[1]:.0f}, -r 1 {a[2]:.0f}, -r 2 {a[3]:.0f}, -r 3 {a[4]:.0f}, offload {a[11]:.0f}")
EOF
) && pass "ladder time table: $r" || fail "ladder time table" "$r"

# Progress: a line per row as the ladder goes (a measured row takes minutes on a GPU).
rows_said=$(grep -cE '^memory_ladder: row [0-9]+/15: ' "$dir/ladder.out")
[ "$rows_said" = 15 ] && pass "the ladder says each row as it goes (row k/15)" || fail "ladder progress" "$rows_said row lines"

# The chart: where this machine's matplotlib is, the PNG must be there and be a PNG.
if /usr/bin/python3 -c 'import matplotlib' 2> /dev/null || python3 -c 'import matplotlib' 2> /dev/null; then
    magic=$(head -c 8 "$dir/ladder/ladder.png" 2> /dev/null | od -An -tx1 | tr -d ' \n')
    [ "$magic" = 89504e470d0a1a0a ] && pass "ladder chart: ladder.png is a PNG ($(wc -c < "$dir/ladder/ladder.png") bytes)" \
        || fail "ladder chart" "ladder.png missing or not a PNG (magic '$magic')"
else
    grep -q 'no matplotlib' "$dir/ladder.out" && [ ! -e "$dir/ladder/ladder.png" ] \
        && echo "SKIP ladder chart: no matplotlib here (python3-matplotlib); the ladder says so and writes the table" \
        || fail "ladder chart" "no matplotlib, and the ladder did not say so"
fi

# ---- the planner's advice: exact flags ------------------------------------------------------------
# d48 -b 32 -r 0 does not fit 48 GiB: the advice is flags to pass as they are (-b with the -d that keeps the
# step's tokens), and the same flags with them added fit.
adv=$(./train_gpt2 --plan -e d48 -t 1024 -b 32 -r 0 --precision fp16 --memory-budget 48GiB | tail -n 1)
flags=$(echo "$adv" | sed -n 's/.*the cheapest change that fits: \(-[^(]*[^ (]\) .*/\1/p')
if [ "$flags" = "-b 8 -d 32768" ] && echo "$adv" | grep -q '(4x the micro-steps: the same 32768 tokens per step)'; then
    refit=$(./train_gpt2 --plan --json -e d48 -t 1024 -b 32 -r 0 --precision fp16 $flags --memory-budget 48GiB |
            python3 -c 'import json,sys; j = json.load(sys.stdin); print(j["budget"]["fits"], j["options"]["B"])')
    [ "$refit" = "True 8" ] && pass "planner advice gives exact flags (-b 8 -d 32768), and with them the plan fits"         || fail "planner advice flags" "with '$flags' added: fits, B = $refit"
else
    fail "planner advice flags" "advice '$flags' in: $adv"
fi
# One unit per table: the plan's table in GiB, like the budget line under it.
plan=$(./train_gpt2 --plan -e d48 -t 1024 -b 32 -r 0 --precision fp16 --memory-budget 48GiB)
echo "$plan" | grep -q '^| component .*| *bytes | *GiB |$' && ! echo "$plan" | grep -q 'MiB' \
    && pass "the plan's table and its budget line are both in GiB (no MiB)" \
    || fail "one unit" "$(echo "$plan" | grep -m2 'MiB\|^| component')"

# ---- the recipes, --dry ---------------------------------------------------------------------------
# check_recipe NAME BUDGET_BYTES [env...]: the command it prints is accepted by the trainer (run with
# --plan) and fits BUDGET per rank by the planner; prints "B R Z NP" for further checks.
check_recipe() {
    local name=$1 budget=$2
    shift 2
    env "$@" "scripts/$name" --dry > "$dir/$name.out" 2>&1 || { echo "exit status $? ($(tail -n 1 "$dir/$name.out"))"; return 1; }
    python3 - "$dir/$name.out" "$budget" <<'EOF'
import json, shlex, subprocess, sys
out = open(sys.argv[1]).read()
budget = int(sys.argv[2])
line = next((l for l in out.splitlines() if l.startswith("command: ")), None)
if line is None: print("no 'command:' line"); sys.exit(1)
if "(--dry: not run)" not in out: print("--dry did not say it ran nothing"); sys.exit(1)
argv = shlex.split(line[len("command: "):])
np = 1
if argv[0] == "scripts/preemptible.sh":  # several ranks: mpirun set up for preemption (docs/reliability.md, "Preemption")
    argv = argv[1:]
    if argv[0] != "mpirun": print(f"scripts/preemptible.sh runs {argv[0]}, not mpirun"); sys.exit(1)
    for setting in (["--mca", "odls_base_sigkill_timeout", "20"],):
        if not any(argv[i:i + 3] == setting for i in range(len(argv))): print(f"mpirun without {' '.join(setting)}"); sys.exit(1)
elif argv[0] == "mpirun": print("mpirun without scripts/preemptible.sh"); sys.exit(1)
if argv[0] == "mpirun":
    np = int(argv[argv.index("-np") + 1]); argv = argv[argv.index("-np") + 2:]
if argv[0] != "./train_gpt2": print(f"the command runs {argv[0]}"); sys.exit(1)
def flag(f, default=None):
    return argv[len(argv) - 1 - argv[::-1].index(f) + 1] if f in argv else default   # the last one wins
p = subprocess.run(argv + ["--plan", "--json", "--ranks", str(np)], capture_output=True, text=True)
if p.returncode != 0: print(f"the trainer refuses the command: {p.stderr.strip()}"); sys.exit(1)
plan = json.loads(p.stdout)
if plan["device_total"] > budget: print(f"plans {plan['device_total']} bytes per rank, over {budget}"); sys.exit(1)
B, T, d = int(flag("-b")), int(flag("-t")), int(flag("-d"))
if d % (B * T * np): print(f"-d {d} is not a multiple of B*T*ranks = {B * T * np}"); sys.exit(1)
if flag("-i") != "": print("no data given, but -i is not the built-in corpus"); sys.exit(1)
if flag("--precision") != "fp16" or flag("--engine") != "gpu": print("not --precision fp16 --engine gpu"); sys.exit(1)
print(flag("-e"), B, flag("-r"), flag("-z", "0"), np, d, flag("--max-memory", "-"), plan["device_total"])
EOF
}
G48=$((48 << 30)) G80=$((80 << 30))

if out=$(check_recipe run_gpt2_1558M_48GB.sh $G48); then
    read -r model B R Z NP D MAXMEM TOTAL <<< "$out"
    # Does the planner allow -b 8 within 48 GiB at some recompute level? Then the recipe must take >= 8.
    allows8=$(./train_gpt2 --plan --json -e d48 -t 1024 -b 8 -r 3 --precision fp16 --memory-budget 48GiB |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["budget"]["fits"])')
    why=""
    [ "$model" = d48 ] && [ "$NP" = 1 ] && [ "$D" = 524288 ] || why="model $model, $NP ranks, -d $D"
    [ "$MAXMEM" = 48GiB ] || why="$why; --max-memory $MAXMEM"
    [ "$allows8" = True ] && [ "$B" -lt 8 ] && why="$why; -b $B although the planner fits -b 8"
    [ -z "$why" ] && pass "run_gpt2_1558M_48GB.sh --dry: d48 -b $B -r $R, $TOTAL bytes <= 48 GiB, --max-memory 48GiB, -d 524288" \
        || fail "run_gpt2_1558M_48GB.sh --dry" "$why"
else
    fail "run_gpt2_1558M_48GB.sh --dry" "$out"
fi

if out=$(check_recipe run_gpt2_124M.sh $G80); then
    read -r model B R Z NP D MAXMEM TOTAL <<< "$out"
    [ "$model" = d12 ] && [ "$NP" = 1 ] && [ "$D" = 524288 ] && [ "$B" -le 64 ] \
        && pass "run_gpt2_124M.sh --dry: d12 -b $B -r $R on 1 GPU, $TOTAL bytes <= 80 GiB" \
        || fail "run_gpt2_124M.sh --dry" "model $model, -b $B, $NP ranks, -d $D"
else
    fail "run_gpt2_124M.sh --dry" "$out"
fi
if out=$(check_recipe run_gpt2_124M.sh $G80 NP=4); then
    read -r model B R Z NP D MAXMEM TOTAL <<< "$out"
    [ "$NP" = 4 ] && [ "$Z" = 1 ] && pass "run_gpt2_124M.sh --dry, NP=4: mpirun -np 4, -z 1, -b $B, $TOTAL bytes per rank" \
        || fail "run_gpt2_124M.sh --dry, NP=4" "$NP ranks, -z $Z"
else
    fail "run_gpt2_124M.sh --dry, NP=4" "$out"
fi

if out=$(check_recipe run_gpt2_1558M.sh $G80); then
    read -r model B R Z NP D MAXMEM TOTAL <<< "$out"
    [ "$model" = d48 ] && [ "$NP" = 8 ] && [ "$Z" = 1 ] \
        && pass "run_gpt2_1558M.sh --dry: d48 on 8 ranks, ZeRO-1, -b $B -r $R, $TOTAL bytes per rank <= 80 GiB" \
        || fail "run_gpt2_1558M.sh --dry" "model $model, $NP ranks, -z $Z"
else
    fail "run_gpt2_1558M.sh --dry" "$out"
fi
if out=$(check_recipe run_gpt2_1558M.sh $((24 << 30)) NP=2 BUDGET=24GiB); then
    read -r model B R Z NP D MAXMEM TOTAL <<< "$out"
    pass "run_gpt2_1558M.sh --dry, NP=2 BUDGET=24GiB: -b $B -r $R -z $Z, $TOTAL bytes per rank <= 24 GiB"
else
    fail "run_gpt2_1558M.sh --dry, NP=2 BUDGET=24GiB" "$out"
fi
# Nothing fits: one line naming the budget, non-zero exit.
if BUDGET=2GiB scripts/run_gpt2_1558M_48GB.sh --dry > "$dir/none.out" 2>&1; then
    fail "a budget nothing fits" "exit status 0"
else
    grep -q 'finds nothing that fits 2GiB' "$dir/none.out" && pass "a budget nothing fits (2 GiB): refused with one line" \
        || fail "a budget nothing fits" "$(tail -n 1 "$dir/none.out")"
fi
exit $failed
