#!/usr/bin/env bash
# test_memory_plan.sh: the memory planner (common/memory_plan.c) against what the GPU engine
# allocates, through ./train_gpt2_emu on the CPU runtime (whose device counts every byte):
#   - over a grid of models (d2-d6), B, T, the three precisions, -r 0-3, -z 0-3 at 1-3 ranks and
#     --offload: every component planned = allocated = taken from the device, to the byte, and the
#     start-up table equal to `./train_gpt2 --plan --json` for the same flags;
#   - d48's model states equal the closed forms (16, 4 + 12/N, 2 + 14/N, 16/N bytes per parameter;
#     -z 3 with --offload optimizer 4/N on the device and 12/N on the host, with --offload grads 2/N and 16/N);
#   - --memory-budget: fits / the largest -b / the cheapest change, checked by planning the answer;
#   - --max-memory refuses a plan over it (exit 1, the advice); a device too small ends with the
#     plan, the advice and one line naming the component;
#   - --offload gives the same losses and weights as the optimizer on the device.
set -u
. "$(dirname "$0")/lib.sh"
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
mpi=0
have_mpi && mpi=1
# ./train_gpt2 plans on any machine; its planner is the same code the engine allocates by.
planner=./train_gpt2
[ -x "$planner" ] || { echo "FAIL memory plan: ./train_gpt2 not built"; exit 1; }

# One grid case: precision model B T recompute zero ranks offload.
check_case() {
    local p=$1 model=$2 B=$3 T=$4 r=$5 z=$6 np=$7 off=$8
    local name="$p $model B=$B T=$T -r $r -z $z np=$np --offload $off"
    local emu=build/emu/train_gpt2_emu_$p
    local flags=(-e "$model" -b "$B" -t "$T" -r "$r" -z "$z" --offload "$off")
    local run=("$emu" "${flags[@]}" -x 0 -v 0 -s 0 -o "")
    if [ "$np" -gt 1 ]; then
        [ $mpi = 1 ] || { echo "SKIP $name: needs mpirun and mpicc"; return; }
        run=(mpirun --oversubscribe -np "$np" "${run[@]}")
    fi
    "${run[@]}" > "$dir/case.out" 2>&1 || { fail "plan = allocation, $name" "$(tail -n 2 "$dir/case.out")"; return; }
    "$planner" --plan --json "${flags[@]}" --precision "$p" --ranks "$np" > "$dir/case.json" 2> "$dir/case.err" \
        || { fail "plan = allocation, $name" "--plan: $(cat "$dir/case.err")"; return; }
    local r
    r=$(python3 - "$dir/case.out" "$dir/case.json" <<'EOF'
import json, re, sys
out = open(sys.argv[1]).read().splitlines()
plan = json.load(open(sys.argv[2]))
rows = {}
for line in out:
    m = re.match(r"^  (.+?)\s+(device|host)\s+(\d+) \|\s+(\d+) \|\s+(\S+)$", line)
    if m:
        rows[m.group(1)] = (m.group(2), int(m.group(3)), int(m.group(4)), m.group(5))
if not rows:
    print("no 'memory by component' table in the trainer's output"); sys.exit(1)
bad = []
device_allocated = 0
for name, (where, planned, allocated, measured) in rows.items():
    if planned != allocated: bad.append(f"{name}: planned {planned}, allocated {allocated}")
    if where == "device":
        device_allocated += allocated
        if measured != str(allocated): bad.append(f"{name}: allocated {allocated}, the device counted {measured}")
for c in plan["components"]:
    if c["estimate"] or c["bytes"] == 0: continue
    row = rows.get(c["name"])
    if row is None: bad.append(f"{c['name']}: planned by --plan, absent at start-up")
    elif row[1] != c["bytes"] or row[0] != c["where"]: bad.append(f"{c['name']}: --plan {c['bytes']} {c['where']}, start-up {row[1]} {row[0]}")
if device_allocated != plan["device_bytes"]: bad.append(f"device total: --plan {plan['device_bytes']}, allocated {device_allocated}")
if bad: print("; ".join(bad)); sys.exit(1)
print(f"{len(rows)} components, {device_allocated} device bytes")
EOF
) && pass "plan = allocation = device count, $name: $r" || fail "plan = allocation, $name" "$r"
}

check_case fp32 d2 4 64 0 0 1 none
check_case fp16 d3 2 128 1 0 1 none
check_case bf16 d4 3 32 2 0 1 none
check_case fp16 d6 1 256 3 0 1 none
check_case fp32 d5 2 64 3 0 1 optimizer
check_case fp16 d2 4 64 0 0 1 optimizer
check_case bf16 d2 2 64 1 1 1 none
check_case fp16 d2 4 64 0 1 2 none
check_case fp16 d3 2 64 1 2 2 none
check_case fp32 d2 2 64 0 2 3 none
check_case bf16 d2 2 64 2 1 3 none
check_case fp16 d2 2 64 0 1 2 optimizer
check_case fp32 d3 2 32 0 2 2 optimizer
check_case fp16 d3 2 64 2 0 1 grads
check_case fp32 d2 2 64 0 1 2 grads
check_case bf16 d2 2 64 3 2 3 grads
# ZeRO-3: the parameter shard and the gather buffers, at 1, 2 and 3 ranks, in each precision.
check_case fp32 d2 2 64 0 3 1 none
check_case fp16 d3 2 64 3 3 2 none
check_case fp32 d2 2 64 1 3 3 none
check_case bf16 d2 2 32 2 3 2 none
# ZeRO-3 with the optimizer on the host: the device keeps the parameter shard (and with offload
# optimizer the gradient shard and its fp32 sum), the host master, m, v (and with offload grads the
# fp32 sums and the buckets' landing area).
check_case fp32 d2 2 64 0 3 1 optimizer
check_case fp16 d3 2 64 1 3 2 optimizer
check_case fp32 d2 2 64 0 3 3 grads
check_case bf16 d2 2 32 3 3 2 grads

# --- d48's model states against the closed forms (psi = 1,557,686,400) --------------------------
r=$(python3 - "$planner" <<'EOF'
import json, subprocess, sys
planner = sys.argv[1]
psi = 1557686400
def plan(*flags):
    out = subprocess.run([planner, "--plan", "--json", "-e", "d48", "-t", "1024", "-b", "1", "--precision", "fp16", *flags],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)
def states(p, names):
    c = {x["name"]: x["bytes"] for x in p["components"]}
    return sum(c[n] for n in names)
bad, seen = [], []
opt = ["master weights (fp32)", "AdamW m (fp32)", "AdamW v (fp32)"]
p = plan()
if p["model"]["parameters"] != psi: bad.append(f"d48 has {p['model']['parameters']} parameters")
got = states(p, ["parameters", "gradients"] + opt)
if got != 16 * psi: bad.append(f"ZeRO-0: {got} != 16 psi"); seen.append("16psi")
for n in (2, 4, 8):
    got = states(plan("-z", "1", "--ranks", str(n)), ["parameters", "gradients"] + opt)
    if got != 4 * psi + 12 * psi // n: bad.append(f"ZeRO-1 N={n}: {got} != 4 psi + 12 psi/N = {4 * psi + 12 * psi // n}")
    p2 = plan("-z", "2", "--ranks", str(n))
    got = states(p2, ["parameters", "gradient shard"] + opt)
    if got != 2 * psi + 14 * psi // n: bad.append(f"ZeRO-2 N={n}: {got} != 2 psi + 14 psi/N = {2 * psi + 14 * psi // n}")
    acc = states(p2, ["gradient accumulator (fp32)"])
    if acc != 4 * psi // n: bad.append(f"ZeRO-2 N={n}: fp32 accumulator {acc} != 4 psi/N")
    p3 = plan("-z", "3", "--ranks", str(n))
    got = states(p3, ["parameter shard", "gradient shard"] + opt)
    if got != 16 * psi // n: bad.append(f"ZeRO-3 N={n}: {got} != 16 psi/N = {16 * psi // n}")
    acc = states(p3, ["gradient accumulator (fp32)"])
    if acc != 4 * psi // n: bad.append(f"ZeRO-3 N={n}: fp32 accumulator {acc} != 4 psi/N")
    if states(p3, ["parameter gather buffers"]) != states(p3, ["gradient buckets"]):
        bad.append(f"ZeRO-3 N={n}: the gather buffers are not the size of the gradient buckets")
    # ZeRO-3 with offload: the device keeps the fp16 parameter shard (2 psi/N), with offload optimizer
    # the fp16 gradient shard too (2 psi/N, and its 4 psi/N fp32 sum); the host master, m, v (12 psi/N)
    # and with offload grads the fp32 sums (4 psi/N).
    for off, dev, host in (("optimizer", 4, 12), ("grads", 2, 16)):
        q = plan("-z", "3", "--ranks", str(n), "--offload", off)
        where = {x["name"]: x["where"] for x in q["components"]}
        names = ["parameter shard", "gradient shard", "gradient accumulator (fp32)"] + opt
        on_dev = sum(x["bytes"] for x in q["components"] if x["name"] in names[:2] + opt and x["where"] == "device")
        on_host = sum(x["bytes"] for x in q["components"] if x["name"] in names and x["where"] == "host")
        if on_dev != dev * psi // n: bad.append(f"ZeRO-3 --offload {off} N={n}: device model states {on_dev} != {dev} psi/N")
        if on_host != host * psi // n: bad.append(f"ZeRO-3 --offload {off} N={n}: host {on_host} != {host} psi/N")
if bad: print("; ".join(bad)); sys.exit(1)
print("16 psi; 4 psi + 12 psi/N, 2 psi + 14 psi/N and 16 psi/N (+ 4 psi/N fp32 accumulator) at N = 2, 4, 8; "
      "-z 3 --offload optimizer 4 psi/N on the device, 12 psi/N on the host; --offload grads 2 psi/N, 16 psi/N")
EOF
) && pass "d48 model states equal the closed forms: $r" || fail "d48 closed forms" "$r"

# --- level 3's default segment length, and ZeRO-3's fit figures (docs/memory.md) ------------------
# The default K is the one whose activation table is the smallest: checked against the table at every
# K the planner takes with --recompute-every, for d12 and d48. Then -r 3 -z 3 at d48 (FP16, B=8,
# T=1024, with the CUDA context and NCCL estimates) within 12 GiB on 4 ranks and 8 GiB on 8.
r=$(python3 - "$planner" <<'EOF'
import json, subprocess, sys
planner = sys.argv[1]
GiB = 1 << 30
def plan(model, *flags):
    out = subprocess.run([planner, "--plan", "--json", "-e", model, "-t", "1024", "-b", "8", "--precision", "fp16", "-r", "3", *flags],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)
def acts(p):
    return next(c["bytes"] for c in p["components"] if c["name"] == "activations")
bad, said = [], []
for model, L in (("d12", 12), ("d48", 48)):
    d = plan(model)
    k = d["options"]["recompute_every"]
    sizes = {j: acts(plan(model, "--recompute-every", str(j))) for j in range(1, L + 1)}
    best = min(sizes.values())
    if acts(d) != sizes[k]: bad.append(f"{model}: the default K={k} plans {acts(d)} B, --recompute-every {k} plans {sizes[k]}")
    if sizes[k] != best or any(sizes[j] == best for j in range(1, k)):
        bad.append(f"{model}: default K={k} keeps {sizes[k]} B, the least is {best} at K={min(j for j in sizes if sizes[j] == best)}")
    sq = round(L ** 0.5)
    said.append(f"{model} K={k} ({acts(d) / GiB:.2f} GiB; sqrt(L)={sq}: {sizes[sq] / GiB:.2f})")
for n, cap in ((4, 12), (8, 8)):
    t = plan("d48", "-z", "3", "--ranks", str(n))["device_total"]
    if t > cap * GiB: bad.append(f"-z 3 --ranks {n} needs {t} B = {t / GiB:.2f} GiB > {cap} GiB")
    said.append(f"-z 3 --ranks {n}: {t / GiB:.2f} GiB <= {cap}")
if bad: print("; ".join(bad)); sys.exit(1)
print(", ".join(said))
EOF
) && pass "level 3's default segment is the least table; d48 -r 3 -z 3 fits: $r" || fail "level 3 default K / ZeRO-3 fit" "$r"

# --- --memory-budget: the answers, checked by planning them -------------------------------------
r=$(python3 - "$planner" <<'EOF'
import json, subprocess, sys
planner = sys.argv[1]
def plan(flags):
    # -r 0 given: the figures and advice below are those of keeping every activation (-r's default is 1).
    out = subprocess.run([planner, "--plan", "--json", "-e", "d48", "-t", "1024", "-r", "0", "--precision", "fp16", *flags],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)
GiB = 1 << 30
bad = []
a = plan(["-b", "8", "--memory-budget", "48GiB"])
if not a["budget"]["fits"] or a["device_total"] > 48 * GiB: bad.append("d48 -b 8 should fit 48 GiB")
mb = a["budget"]["max_B"]
if plan(["-b", str(mb)])["device_total"] > 48 * GiB or plan(["-b", str(mb + 1)])["device_total"] <= 48 * GiB:
    bad.append(f"max_B {mb} is not the largest -b within 48 GiB")
b = plan(["-b", "32", "--memory-budget", "48GiB"])
adv = b["budget"].get("advice")
if b["budget"]["fits"] or not adv: bad.append("d48 -b 32 should not fit 48 GiB, with advice")
else:
    c = plan(["-b", str(adv["B"]), "-r", str(adv["recompute"]), "-z", str(adv["zero_stage"]), "--offload", adv["offload"]])
    if c["device_total"] > 48 * GiB or c["device_total"] != adv["device_total"]: bad.append(f"the advice {adv['what']} does not fit")
    if adv["recompute"] == 0 and adv["B"] == 32: bad.append("the advice changes nothing")
d = plan(["-b", "1", "--memory-budget", "1GiB"])
if d["budget"]["fits"] or d["budget"].get("advice") is not None or d["budget"]["max_B"] != 0:
    bad.append("1 GiB: nothing fits d48, the answer should say so")
# Offload brings d48 within 24 GiB at some micro-batch.
e = plan(["-b", "1", "-r", "3", "--offload", "optimizer", "--memory-budget", "24GiB"])
if not e["budget"]["fits"]: bad.append(f"d48 -b 1 -r 3 --offload needs {e['device_total'] / GiB:.1f} GiB > 24")
# ZeRO-3 at -b 1 over 4 ranks (9.00 GiB): within 5 GiB only with the optimizer on the host; the
# advice keeps -z 3 and fits when planned.
f = plan(["-b", "1", "-r", "3", "-z", "3", "--ranks", "4", "--memory-budget", "5GiB"])
fa = f["budget"].get("advice")
if f["budget"]["fits"] or not fa or fa["zero_stage"] != 3 or fa["offload"] == "none":
    bad.append(f"d48 -z 3 over 4 ranks in 5 GiB: expected an offload with -z 3, got {fa}")
else:
    g = plan(["-b", str(fa["B"]), "-r", str(fa["recompute"]), "-z", "3", "--ranks", "4", "--offload", fa["offload"]])
    if g["device_total"] > 5 * GiB or g["device_total"] != fa["device_total"]: bad.append(f"the -z 3 advice {fa['what']} does not fit")
if bad: print("; ".join(bad)); sys.exit(1)
print(f"-b 8 fits 48 GiB (largest -b {mb}); -b 32 does not: {adv['what']} fits at {adv['device_total'] / GiB:.2f} GiB; "
      f"1 GiB: no answer; offload + -r 3 within 24 GiB ({e['device_total'] / GiB:.2f}); -z 3 over 4 ranks in 5 GiB: "
      f"{fa['what']} ({fa['device_total'] / GiB:.2f} GiB)")
EOF
) && pass "--memory-budget answers: $r" || fail "--memory-budget" "$r"
out=$("$planner" --plan -e d48 -t 1024 -b 32 -r 0 --precision fp16 --memory-budget 48GiB 2>&1)
echo "$out" | grep -q '^budget 48.00 GiB per rank: does not fit .*the cheapest change that fits: ' \
    && pass "--plan --memory-budget prints the advice in words" || fail "--plan advice line" "$(echo "$out" | tail -n 1)"

# --- --max-memory and out of memory --------------------------------------------------------------
emu=build/emu/train_gpt2_emu_fp16
$emu -e d4 -b 4 -t 128 -r 0 -x 1 -v 0 -s 0 -o "" --max-memory 100MiB > "$dir/max.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q '^error: flag --max-memory is 0.10 GiB per rank; the plan above needs' "$dir/max.out" \
    && grep -q '^budget 0.10 GiB per rank: does not fit' "$dir/max.out" \
    && pass "--max-memory 100MiB refuses d4's plan: exit 1, the plan and the advice" \
    || fail "--max-memory refusal" "exit $rc: $(tail -n 2 "$dir/max.out")"
# The refusal's advice keeps the run's own step (-d 4096: 4 micro-steps of B=8, T=128): a smaller -b
# comes with the same -d, not with the engine's B*T.
$emu -e d4 -b 8 -t 128 -r 0 -d 4096 -x 1 -v 0 -s 0 -o "" --max-memory 700MiB > "$dir/maxd.out" 2>&1
grep -qE '^budget .* the cheapest change that fits: .*-b [1-4] -d 4096( |$)' "$dir/maxd.out" \
    && pass "--max-memory's advice keeps the run's tokens per step ($(grep -o 'fits: [^(]*' "$dir/maxd.out" | head -n 1))" \
    || fail "--max-memory advice -d" "$(grep '^budget' "$dir/maxd.out")"
$emu -e d4 -b 4 -t 128 -r 0 -x 2 -v 0 -s 0 -o "" --max-memory 2GiB > "$dir/max2.out" 2>&1 \
    && grep -q '^device memory: at most .* MiB in use' "$dir/max2.out" \
    && pass "--max-memory 2GiB: d4 trains, the peak reported" || fail "--max-memory within budget" "$(tail -n 2 "$dir/max2.out")"
CUDA_CPU_DEVICE_MEMORY=$((120 << 20)) $emu -e d4 -b 8 -t 128 -r 0 -x 1 -v 0 -s 0 -o "" > "$dir/oom.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q '^error: out of GPU memory allocating the [a-zA-Z]' "$dir/oom.out" && grep -q '^memory plan: ' "$dir/oom.out" \
    && grep -q '^budget .* GiB per rank: does not fit' "$dir/oom.out" && ! grep -qi 'cudaError\|CUDA error' "$dir/oom.out" \
    && pass "a 120 MiB device: the plan, the advice and one line naming the component ($(grep '^error' "$dir/oom.out" | cut -c1-70)...)" \
    || fail "out of memory" "exit $rc: $(tail -n 2 "$dir/oom.out")"

# --- offload: the same steps as the optimizer on the device ---------------------------------------
gen=build/test/gen_data
$gen model "$dir/model.bin" 2 64 2 301 64 1 > /dev/null && $gen shard "$dir/train.bin" 20000 301 2 > /dev/null \
    || { echo "FAIL memory plan: gen_data"; exit 1; }
# -f 0: fp32 products in the FP32 build (TF32 is the default on the emulated sm_90), so the offloaded
# gradient sums can be held to the device's within fp32 rounding (1e-5) below.
common=(-e "$dir/model.bin" -i "$dir/train.bin" -t 32 -b 4 -v 0 -s 0 -l 3e-3 -u 2 -x 4 -n 4 -c 0.1 -f 0)
for p in fp32 fp16; do
    e=build/emu/train_gpt2_emu_$p
    $e "${common[@]}" -o "$dir/dev_$p" > "$dir/dev_$p.out" 2>&1 && $e "${common[@]}" --offload -o "$dir/off_$p" > "$dir/off_$p.out" 2>&1 \
        || { fail "offload $p" "$(tail -n 2 "$dir/off_$p.out")"; continue; }
    grep -o '"train_loss": [^,]*' "$dir/dev_$p/log.jsonl" > "$dir/a"
    grep -o '"train_loss": [^,]*' "$dir/off_$p/log.jsonl" > "$dir/b"
    d=$($gen diff "$dir/dev_$p/model_00000004.bin" "$dir/off_$p/model_00000004.bin" 2>&1)
    grep -q 'host.*master weights\|master weights (fp32) *host\|AdamW m (fp32) *host' "$dir/off_$p.out" || { fail "offload $p" "m is not in host memory"; continue; }
    cmp -s "$dir/a" "$dir/b" && [ "$(wc -l < "$dir/a")" = 4 ] && [ "$d" = "0" ] \
        && pass "--offload $p: 4 steps, the same losses and weights as on the device (AdamW on CPU threads)" \
        || fail "offload $p" "losses $(paste -d' ' "$dir/a" "$dir/b" | head -n 3 | tr '\n' ' ') weights diff $d"
done
# Resume with offload: a checkpoint of an offloaded run continues bit for bit.
e=build/emu/train_gpt2_emu_fp16
$e "${common[@]}" --offload -n 2 -o "$dir/offr" > /dev/null 2>&1 && rm "$dir/offr/model_00000004.bin" "$dir/offr/state_00000004.bin" "$dir/offr/run_complete" \
    && $e "${common[@]}" --offload -n 2 -y 1 -o "$dir/offr" > "$dir/offr.out" 2>&1 \
    && [ "$($gen diff "$dir/offr/model_00000004.bin" "$dir/off_fp16/model_00000004.bin" 2>&1)" = "0" ] \
    && pass "--offload: resumed at step 2, the same weights at step 4" || fail "offload resume" "$(tail -n 2 "$dir/offr.out")"
if [ $mpi = 1 ]; then
    mpirun --oversubscribe -np 2 $e "${common[@]}" -b 2 -z 1 --offload -o "$dir/offz" > "$dir/offz.out" 2>&1 \
        && mpirun --oversubscribe -np 2 $e "${common[@]}" -b 2 -z 1 -o "$dir/devz" > "$dir/devz.out" 2>&1 \
        && [ "$($gen diff "$dir/offz/model_00000004.bin" "$dir/devz/model_00000004.bin" 2>&1)" = "0" ] \
        && pass "--offload with ZeRO-1 on 2 ranks: each rank's shard updated on its CPU, the same weights" \
        || fail "offload ZeRO-1" "$(tail -n 2 "$dir/offz.out")"
fi

# --offload grads: the buckets' gradients summed in fp32 on the host, as stage 2 sums them on the
# device: without clipping (whose norm is summed in another order) the same weights bit for bit,
# with accumulation over 2 micro-steps; with clipping, within fp32 rounding of the norm.
noclip=("${common[@]}" -d 256 -G 0)
for p in fp32 fp16; do
    e=build/emu/train_gpt2_emu_$p
    $e "${noclip[@]}" -z 2 -o "$dir/z2_$p" > "$dir/z2_$p.out" 2>&1 && $e "${noclip[@]}" --offload grads -o "$dir/og_$p" > "$dir/og_$p.out" 2>&1 \
        && grep -q 'gradient accumulator (fp32) *host' "$dir/og_$p.out" && ! grep -q '^  gradients ' "$dir/og_$p.out" \
        && [ "$($gen diff "$dir/z2_$p/model_00000004.bin" "$dir/og_$p/model_00000004.bin" 2>&1)" = "0" ] \
        && pass "--offload grads $p: no full gradient buffer on the device, fp32 sums on the host; 4 steps of 2 micro-steps equal -z 2 bit for bit" \
        || fail "offload grads $p" "$(tail -n 2 "$dir/og_$p.out")"
done
e=build/emu/train_gpt2_emu_fp32
$e "${common[@]}" --offload grads -o "$dir/ogc" > "$dir/ogc.out" 2>&1 \
    && d=$($gen diff "$dir/ogc/model_00000004.bin" "$dir/dev_fp32/model_00000004.bin" 2>&1) \
    && awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' \
    && pass "--offload grads fp32 with clipping: weights within $d (relative) of the device's after 4 steps" \
    || fail "offload grads with clipping" "relative difference ${d:-?}: $(tail -n 1 "$dir/ogc.out")"
e=build/emu/train_gpt2_emu_fp16
$e "${noclip[@]}" -z 2 --offload -o "$dir/z2o" > "$dir/z2o.out" 2>&1 \
    && [ "$($gen diff "$dir/z2_fp16/model_00000004.bin" "$dir/z2o/model_00000004.bin" 2>&1)" = "0" ] \
    && pass "-z 2 with --offload optimizer: the same weights as -z 2 on the device" || fail "-z 2 --offload" "$(tail -n 2 "$dir/z2o.out")"
if [ $mpi = 1 ]; then
    mpirun --oversubscribe -np 2 $e "${noclip[@]}" -b 2 -z 2 -o "$dir/z2r" > "$dir/z2r.out" 2>&1 || fail "-z 2 on 2 ranks" "$(tail -n 2 "$dir/z2r.out")"
    for z in 0 1; do
        mpirun --oversubscribe -np 2 $e "${noclip[@]}" -b 2 -z $z --offload grads -o "$dir/ogz$z" > "$dir/ogz$z.out" 2>&1 \
            && [ "$($gen diff "$dir/ogz$z/model_00000004.bin" "$dir/z2r/model_00000004.bin" 2>&1)" = "0" ] \
            && pass "--offload grads -z $z on 2 ranks: the same weights as -z 2 on the device" \
            || fail "offload grads -z $z on 2 ranks" "$(tail -n 2 "$dir/ogz$z.out")"
    done
fi

# --- flags -------------------------------------------------------------------------------------------
for bad in "--offload disk" "--max-memory 12XB" "--json" "--precision fp8 --plan" "--plan --ranks -1"; do
    out=$("$planner" $bad -e d2 2>&1)
    rc=$?
    [ $rc = 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q -- "--[a-z]" \
        && pass "bad flag '$bad': exit 1, one line ($out)" || fail "bad flag '$bad'" "exit $rc: $out"
done
exit $failed
