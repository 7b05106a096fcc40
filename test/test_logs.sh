#!/usr/bin/env bash
# test_logs.sh: OUT/main.log in llm.c's format beside log.jsonl (every value and step checked against
# log.jsonl, kept and cut on resume so an interrupted run's main.log is the unbroken run's), and
# scripts/plot_log.py reading both formats: what it reads (--summary) against the logs, a PNG of
# one run and of two runs overlaid (ours and an llm.c-style main.log), and bad input.
set -u
# A tiny model: one OpenMP thread (spinning threads on a shared machine cost 1000 times the step).
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
tiny_data 1
run=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 2 -t 16 -v 4 -m 2 -s 0 -p 1000 -x 10 -n 5 -l 1e-3 -u 3)

# --- main.log ----------------------------------------------------------------------------------
./train_gpt2 "${run[@]}" -o "$dir/a" > "$dir/a.out" 2>&1 || fail "run" "$(tail -2 "$dir/a.out")"
"$PY" - "$dir/a" <<'PYEOF'
import json, sys
import numpy as np
d = sys.argv[1]
want = []
for line in open(d + "/log.jsonl"):
    r = json.loads(line)
    f = lambda k: float(np.float32(r[k]))  # the float the trainer printed, exactly
    if "train_loss" in r:  # llm.c counts the update from 0
        want.append("s:%d trl:%.4f lr:%.6f norm:%.2f" % (r["step"] - 1, f("train_loss"), f("lr"), f("grad_norm")))
    else:
        want.append("s:%d tel:%.4f" % (r["step"], f("val_loss")))
got = open(d + "/main.log").read().splitlines()
ok = got == want and len(got) == 10 + 4
print("%s main.log: llm.c's format, every line as log.jsonl's values give it (%d lines: 10 train, 4 val)%s" %
      ("PASS" if ok else "FAIL", len(got), "" if ok else ": first difference %r vs %r" %
       next(((g, w) for g, w in zip(got + [""] * 99, want + [""] * 99) if g != w), ("", ""))))
sys.exit(0 if ok else 1)
PYEOF
[ $? -eq 0 ] || failed=1
grep -q "^s:0 trl:" "$dir/a/main.log" && grep -q "^s:9 trl:" "$dir/a/main.log" && grep -q "^s:10 tel:" "$dir/a/main.log" &&
    pass "main.log: the first update is s:0, the last s:9, the last val loss s:10 (llm.c's numbering)" ||
    fail "main.log numbering" "$(head -2 "$dir/a/main.log" | tr '\n' ' ')"
# Interrupted after the step-5 checkpoint (the later files gone, main.log holding the steps after it,
# a line cut in half at the end), then resumed: main.log is the unbroken run's, byte for byte.
./train_gpt2 "${run[@]}" -o "$dir/b" > /dev/null 2>&1
rm -f "$dir/b/"*_00000010* "$dir/b/run_complete"
printf 's:9 trl:3.14' >> "$dir/b/main.log"
./train_gpt2 "${run[@]}" -o "$dir/b" -y 1 > "$dir/b.out" 2>&1
grep -q "^resume: step 5 from" "$dir/b.out" && cmp -s "$dir/a/main.log" "$dir/b/main.log" &&
    pass "main.log after a resume from step 5 is the unbroken run's, byte for byte (later lines and a cut line dropped)" ||
    fail "main.log on resume" "$(diff "$dir/a/main.log" "$dir/b/main.log" | head -4 | tr '\n' ' ')"
./train_gpt2 "${run[@]}" -x 3 -o "$dir/a" --overwrite > /dev/null 2>&1
[ "$(grep -c trl "$dir/a/main.log")" -eq 3 ] && pass "main.log: a fresh run starts it anew" ||
    fail "fresh main.log" "$(wc -l < "$dir/a/main.log") lines"
./train_gpt2 "${run[@]}" -n 0 -o "" > /dev/null 2>&1 && [ ! -e main.log ] && pass "main.log: none without an output dir" ||
    fail "no output dir" "main.log written or run failed"

# --- scripts/plot_log.py -----------------------------------------------------------------------
# An llm.c-style main.log, written here as llm.c's logger writes it (steps from 0, val every 5).
"$PY" - "$dir/llmc.log" <<'PYEOF'
import math, sys
with open(sys.argv[1], "w") as f:
    for s in range(20):
        if s % 5 == 0:
            f.write("s:%d tel:%.4f\n" % (s, 6.0 - 0.1 * s))
        if s % 10 == 0 and s:
            f.write("s:%d eval:%.4f\n" % (s, 0.25 + 0.001 * s))
        f.write("s:%d trl:%.4f lr:%.6f norm:%.2f\n" % (s, 6.0 - 0.1 * s, 6e-4 * min(1, (s + 1) / 5), 1.5))
    f.write("s:20 tel:4.0000\ns:20 eval:0.2700\n")
PYEOF
./train_gpt2 "${run[@]}" -o "$dir/c" > /dev/null 2>&1
"$PY" scripts/plot_log.py "$dir/c" "$dir/c/main.log" "$dir/llmc.log" --label ours --label ours-main --label llmc --summary \
    > "$dir/summary.txt" 2>&1
"$PY" - "$dir" <<'PYEOF'
import json, sys
d = sys.argv[1]
lines = open(d + "/summary.txt").read().splitlines()
recs = [json.loads(l) for l in open(d + "/c/log.jsonl")]
tr = [r for r in recs if "train_loss" in r]
va = [r for r in recs if "val_loss" in r]
ok = len(lines) == 3
ok = ok and lines[0].startswith("ours: %s/c/log.jsonl (jsonl): %d train points (last step %d, loss %.6g), %d val points (last %.6g)"
                                % (d, len(tr), tr[-1]["step"], tr[-1]["train_loss"], len(va), va[-1]["val_loss"]))
ok = ok and "ours-main: %s/c/main.log (main.log): %d train points (last step %d," % (d, len(tr), tr[-1]["step"]) in lines[1]
ok = ok and lines[2].startswith("llmc: %s/llmc.log (main.log): 20 train points (last step 20, loss 4.1), 5 val points (last 4)" % d)
ok = ok and lines[2].endswith("norm last 1.5, 2 hellaswag points")
print("%s plot_log --summary: both formats read as the logs hold them (steps counted alike)%s" %
      ("PASS" if ok else "FAIL", "" if ok else ": " + " | ".join(lines)[:600]))
sys.exit(0 if ok else 1)
PYEOF
[ $? -eq 0 ] || failed=1
png_ok() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }
"$PY" scripts/plot_log.py "$dir/c" -o "$dir/one.png" > "$dir/one.out" 2>&1 && png_ok "$dir/one.png" &&
    grep -q "wrote .*one.png (loss, learning rate, gradient norm, tokens/s; 1 run)" "$dir/one.out" &&
    pass "plot_log: one run of ours to a PNG (loss, lr, norm, tokens/s)" || fail "plot_log one run" "$(cat "$dir/one.out")"
# Run by a Python without matplotlib (here Debian's own with -S: no site packages, as a pyenv or venv
# python3 first on PATH may be), it draws with one that has it, saying so.
"$PY" -S scripts/plot_log.py "$dir/c" -o "$dir/nosite.png" > "$dir/nosite.out" 2>&1 && png_ok "$dir/nosite.png" &&
    grep -q "^(drawing with /.*python3, which has matplotlib; .* lacks it)" "$dir/nosite.out" &&
    pass "plot_log: run by a Python that lacks matplotlib, it draws with one that has it" ||
    fail "plot_log without matplotlib" "$(cat "$dir/nosite.out")"
"$PY" scripts/plot_log.py "$dir/c" "$dir/llmc.log" --smooth 3 -o "$dir/two.png" > "$dir/two.out" 2>&1 && png_ok "$dir/two.png" &&
    grep -q "HellaSwag acc_norm; 2 runs" "$dir/two.out" &&
    pass "plot_log: ours and an llm.c main.log overlaid in one PNG (HellaSwag panel from llm.c's eval lines)" ||
    fail "plot_log two runs" "$(cat "$dir/two.out")"
./train_gpt2 "${run[@]}" -lg 2 -o "$dir/mem" > /dev/null 2>&1
"$PY" scripts/plot_log.py "$dir/mem" -o "$dir/mem.png" > "$dir/mem.out" 2>&1 && png_ok "$dir/mem.png" &&
    grep -q "wrote .*mem.png (loss, learning rate, gradient norm, tokens/s, device memory (MiB); 1 run)" "$dir/mem.out" &&
    pass "plot_log: -lg's memory lines make a memory panel" || fail "plot_log memory" "$(cat "$dir/mem.out")"
"$PY" scripts/plot_log.py "$dir/nothing" -o "$dir/x.png" > "$dir/bad.out" 2>&1
[ $? -eq 1 ] && [ "$(wc -l < "$dir/bad.out")" -eq 1 ] && grep -q "^error: .*nothing: no such log file or output dir" "$dir/bad.out" &&
    pass "plot_log: a missing log is one error line, exit 1" || fail "plot_log missing log" "$(cat "$dir/bad.out")"
printf 'not a log\nat all\n' > "$dir/junk.log"
"$PY" scripts/plot_log.py "$dir/junk.log" -o "$dir/x.png" > "$dir/bad.out" 2>&1
[ $? -eq 1 ] && [ "$(wc -l < "$dir/bad.out")" -eq 1 ] && grep -q "junk.log line 1 is not llm.c's main.log format" "$dir/bad.out" &&
    pass "plot_log: a file in neither format is one error line naming it, exit 1" || fail "plot_log junk" "$(cat "$dir/bad.out")"
exit $failed
