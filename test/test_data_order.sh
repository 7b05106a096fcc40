#!/usr/bin/env bash
# test_data_order.sh: the shuffled data order (the default, -sf 1) does not depend on how a step's
# global batch is split into ranks x micro-steps x B: every split reads the same samples in the
# same step, so the step losses agree to fp32 rounding (the sums run in another order). The C
# engine on one process at B=4 x 4 micro-steps, B=8 x 2 and B=16 x 1; the emulated GPU trainer
# (FP32) on 1 process x 4 micro-steps, 2 ranks x 2 and 4 ranks x 1 under mpirun, against each
# other and against the C engine; a run checkpointed on 1 process resumes on another split (the C
# engine at B=8, the GPU trainer on 2 ranks) to the unbroken run's later losses; a checkpoint of
# the format before (state version 3, its record without tokens-per-step) resumes, saying where
# its data goes on, to the unbroken run's losses bit for bit.
set -u
export OMP_NUM_THREADS=1
. "$(dirname "$0")/lib.sh"
tiny_data 1
emu=build/emu/train_gpt2_emu_fp32
# A step of 16 samples of 33 tokens (-t 32 -d 512); 4 steps, a checkpoint at step 2.
run=(-e "$dir/m.bin" -i "$dir/train.bin" -t 32 -d 512 -x 4 -n 2 -v 0 -s 0 -l 3e-3)
losses() { grep -o '"train_loss": [^,]*' "$1" | awk '{print $2}'; }
# close A B N: two files of N numbers, equal within 1e-5 relative, line by line: the bound
# test_zero.sh holds ranks to against one process (fp32 sums in another order; -f 0 keeps the GPU
# trainer's products in plain fp32), held across the engines too (test_emu.sh's 1e-4 is over 10
# steps of learning; here 4 steps differ by under 1e-6).
close() {
    paste "$1" "$2" | awk -v tol=1e-5 -v want="$3" '{ n++; d = ($1 - $2) / $2; if (d < 0) d = -d; if (d > w) w = d }
        END { printf "%d losses, worst relative difference %.2g", n, w; exit !(n == want && w <= tol) }'
}
# resume_from SRC DST: a copy of SRC's output dir without the files of step 4 (what -y 1 resumes)
# and without its logs, so the losses logged in DST are the resumed run's alone.
resume_from() { rm -rf "$2" && cp -r "$1" "$2" && rm -f "$2"/*_00000004* "$2/log.jsonl" "$2/main.log" "$2/run_complete"; }

# --- the C engine: one process, three values of B ---------------------------------------------------
for b in 4 8 16; do
    ./train_gpt2 --engine cpu "${run[@]}" -b $b -o "$dir/c$b" > "$dir/c$b.out" 2>&1 || fail "C engine B=$b" "$(tail -2 "$dir/c$b.out")"
    losses "$dir/c$b/log.jsonl" > "$dir/c$b.losses"
done
for b in 8 16; do
    r=$(close "$dir/c$b.losses" "$dir/c4.losses" 4) && pass "C engine: B=$b x $((16 / b)) micro-steps reads B=4 x 4's samples: $r" \
        || fail "C engine: B=$b vs B=4" "$r"
done
# Checkpointed at B=4 x 4, resumed at B=8 x 2: the unbroken run's losses of steps 3-4.
resume_from "$dir/c4" "$dir/cr"
./train_gpt2 --engine cpu "${run[@]}" -b 8 -o "$dir/cr" -y 1 > "$dir/cr.out" 2>&1 || fail "C engine resume at B=8" "$(tail -2 "$dir/cr.out")"
losses "$dir/cr/log.jsonl" | tail -n 2 > "$dir/cr.losses"
tail -n 2 "$dir/c4.losses" > "$dir/c4.later"
r=$(close "$dir/cr.losses" "$dir/c4.later" 2) && pass "C engine: checkpointed at B=4 x 4, resumed at B=8 x 2: steps 3-4 as unbroken: $r" \
    || fail "C engine resume at B=8" "$r; $(grep -m2 -E '^resume|error' "$dir/cr.out")"

# --- a checkpoint of the format before: state version 3, words 2-4 the older loader's (epoch,
# shard, window), its record's sequences-per-micro-step line where tokens-per-step is now ---------
resume_from "$dir/c4" "$dir/old"
"$PY" - "$dir/old/state_00000002.bin" <<'PYEOF' || fail "setup" "could not rewrite the state file"
import struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
h = list(struct.unpack_from("<256i", b, 0))
w = list(struct.unpack_from("<32q", b, 1024))
pad = lambda n: (n + 3) // 4 * 4
rec = b[1280:1280 + h[11]].decode()
assert "tokens-per-step 512\n" in rec and h[1] == 4 and w[2] == 32
rec = rec.replace("tokens-per-step 512\n", "sequences-per-micro-step 4\n").encode()
h[1], w[2], w[3], w[4] = 3, 0, 0, 8  # step 2 of 4 micro-steps: window 8 of shard 0, epoch 0
body = b[1280 + pad(h[11]):]
h[11] = len(rec)
open(p, "wb").write(struct.pack("<256i", *h) + struct.pack("<32q", *w) + rec + bytes(pad(len(rec)) - len(rec)) + body)
PYEOF
"$PY" test/reliability/ckfile.py reseal "$dir/old/state_00000002.bin" > /dev/null || fail "setup" "ckfile.py reseal"
./train_gpt2 --engine cpu "${run[@]}" -b 4 -o "$dir/old" -y 1 > "$dir/old.out" 2>&1 || fail "version 3 resume" "$(tail -2 "$dir/old.out")"
[ "$(losses "$dir/old/log.jsonl" | tail -n 2)" = "$(cat "$dir/c4.later")" ] &&
    grep -q "^resume: .*state_00000002.bin holds an older loader's data position; the data goes on at sample 32 (2 steps of 16) of this loader's shuffled order" "$dir/old.out" &&
    pass "a state file of version 3 resumes at sample 32 (2 steps of 16), saying so: steps 3-4 as unbroken, bit for bit" ||
    fail "version 3 resume" "$(grep -m2 -E '^resume|error' "$dir/old.out"); $(losses "$dir/old/log.jsonl" | tr '\n' ' ')"

# --- the GPU trainer (FP32, emulated): 1 process, 2 ranks and 4 ranks ------------------------------
if [ ! -x "$emu" ]; then
    echo "SKIP GPU trainer splits: $emu not built (no CUDA headers)"
elif ! have_mpi; then
    echo "SKIP GPU trainer splits: needs mpirun and mpicc (apt-get install openmpi-bin libopenmpi-dev)"
else
    export CUDA_CPU_THREADS=1  # one worker thread a rank: the ranks share the cores
    g=("${run[@]}" -b 4 -f 0)
    $emu "${g[@]}" -o "$dir/e1" > "$dir/e1.out" 2>&1 || fail "GPU trainer, 1 process" "$(tail -2 "$dir/e1.out")"
    losses "$dir/e1/log.jsonl" > "$dir/e1.losses"
    r=$(close "$dir/e1.losses" "$dir/c4.losses" 4) && pass "GPU trainer 1 x 4 micro-steps reads the C engine's samples: $r" \
        || fail "GPU trainer vs C engine" "$r"
    for np in 2 4; do
        timeout 300 mpirun -np $np $emu "${g[@]}" -o "$dir/e$np" > "$dir/e$np.out" 2>&1 \
            || { fail "GPU trainer, $np ranks" "$(tail -2 "$dir/e$np.out")"; continue; }
        losses "$dir/e$np/log.jsonl" > "$dir/e$np.losses"
        r=$(close "$dir/e$np.losses" "$dir/e1.losses" 4) &&
            pass "GPU trainer $np ranks x $((4 / np)) micro-steps reads 1 process x 4's samples: $r" || fail "GPU trainer, $np ranks vs 1" "$r"
    done
    # Checkpointed on 1 process, resumed on 2 ranks.
    resume_from "$dir/e1" "$dir/er"
    timeout 300 mpirun -np 2 $emu "${g[@]}" -o "$dir/er" -y 1 > "$dir/er.out" 2>&1 || fail "GPU trainer resume on 2 ranks" "$(tail -2 "$dir/er.out")"
    losses "$dir/er/log.jsonl" | tail -n 2 > "$dir/er.losses"
    tail -n 2 "$dir/e1.losses" > "$dir/e1.later"
    r=$(close "$dir/er.losses" "$dir/e1.later" 2) &&
        pass "GPU trainer checkpointed on 1 process x 4, resumed on 2 ranks x 2: steps 3-4 as unbroken: $r" ||
        fail "GPU trainer resume on 2 ranks" "$r; $(grep -m2 -E '^resume|error' "$dir/er.out")"
fi
exit $failed
