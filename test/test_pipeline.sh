#!/usr/bin/env bash
# test_pipeline.sh: pipeline parallelism (-pp). Bad input first (./train_gpt2, no ranks needed: each
# ends with one line naming the flag, exit 1, nothing written); then build/emu/train_gpt2_emu_fp32
# under mpirun (NCCL send/recv over MPI through the CPU runtime) against one process taking the same
# global batch in the same micro-steps: -pp 2 on 2 ranks, and -pp 2 x 2 data-parallel ranks at -z 1,
# every step's loss and gradient norm within 1e-5 relative (FP32: the stages add the same gradients in
# the same order, but for the tied embedding's two parts, summed once at the end of the step, and the
# norm's partial sums), the validation losses too, and the same sample; checkpoints written whole (one
# model and one state file, the state's record naming the stages), resumed on one process and the
# other way round to the same weights within 1e-5, and on as many stages bit for bit. And in FP16 an
# overflow on stage 0 only skips the step on both stages, as one process skips it.
# test_pipeline_long.sh (make test-long) runs this with PP_LONG=1: the longer cases instead, -pp 2 x 2
# at -z 0, -pp 4 on 4 ranks (one layer a stage), --pp-split 3,1 at -r 3 (each stage its own
# segments to recompute), and FP16 (build/emu/train_gpt2_emu_fp16) -pp 2 and
# -pp 2 x 2 at -z 1, whose losses are held to (m + 1) u: the one process adds the tied embedding's
# gradient into FP16 once more per micro-step (m = 4) than the stages (test_zero.cu's bound), and its
# first step's norm too (the later norms move with AdamW's first update, which is not bounded by
# rounding near a zero gradient: test_zero.cu says why). (The stream synchronization of the schedule:
# test_stream_sync.sh; the planner's stages: test_memory_plan.sh.)
set -u
. "$(dirname "$0")/lib.sh"
require ./train_gpt2 "$gen"
tiny_data 4
long=${PP_LONG:-0}

# --- bad input: one line naming the flag, exit 1, before anything is written ----------------------
if [ "$long" = 0 ]; then
args=(-e "$dir/m.bin" -i "$dir/train.bin" -t 32 -b 2 -x 1 -v 0 -s 0)
expect_prefix="pp bad input: "
expect_error "-pp 2 on 1 rank" "flag -pp \(pipeline stages\) is 2, which does not divide the 1 rank" "${args[@]}" -pp 2 -d 256 -o "$dir/out1"
[ ! -e "$dir/out1" ] && pass "pp bad input: nothing written" || fail "pp bad input: nothing written" "$(ls "$dir/out1")"
expect_error "more stages than layers" "flag -pp \(pipeline stages\) is 8, more stages than the model's 4 layers" \
    "${args[@]}" --plan --ranks 8 -pp 8 -d 1024
expect_error "--pp-split sum" "flag --pp-split '1,2' sums to 3 layers; the model has 4" "${args[@]}" --plan --ranks 2 -pp 2 --pp-split 1,2 -d 256
expect_error "--pp-split empty stage" "flag --pp-split '4,0': stage 1 has 0 layers; every stage needs at least one" \
    "${args[@]}" --plan --ranks 2 -pp 2 --pp-split 4,0 -d 256
expect_error "--pp-split stages" "flag --pp-split '2,1,1' names 3 stages, but -pp is 2" "${args[@]}" --plan --ranks 2 -pp 2 --pp-split 2,1,1 -d 256
expect_error "--pp-split text" "flag --pp-split expects layers per stage separated by commas" "${args[@]}" --plan --ranks 2 -pp 2 --pp-split 2x2 -d 256
expect_error "--pp-split without -pp" "flag --pp-split '2,2' goes with -pp" "${args[@]}" --pp-split 2,2
expect_error "fewer micro-steps than stages" "flag -pp 2 with 1 micro-step a step: 1F1B needs at least as many micro-steps as stages" \
    "${args[@]}" --plan --ranks 2 -pp 2 -d 64
expect_error "-pp 0" "flag -pp \(pipeline stages\) must be 1 to 64, got 0" "${args[@]}" -pp 0
expect_error "C engine" "flag -pp 2: the C reference engine \(--engine cpu\) is one process" "${args[@]}" -pp 2 --engine cpu
expect_error "-z 2" "flag -z 2 with -pp 2: a pipeline stage combines its data-parallel ranks' gradients with -z 0 or -z 1" \
    "${args[@]}" -pp 2 -z 2
expect_error "--offload" "flag --offload optimizer with -pp 2" "${args[@]}" -pp 2 --offload optimizer
expect_error "HellaSwag" "flag -h 1 with -pp 2" "${args[@]}" -pp 2 -h 1
expect_prefix=""
fi

# --- the emulated trainer under mpirun ------------------------------------------------------------
if ! have_mpi; then
    echo "SKIP pipeline under mpirun: needs mpirun and mpicc (apt-get install openmpi-bin libopenmpi-dev)"
    exit $failed
fi
require build/emu/train_gpt2_emu_fp32
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
# 4 micro-steps a step (-d 256 = 4 x 2 sequences of 32), 4 steps; validation and a sample after 2.
# -f 0: plain fp32 products (the FP32 build defaults to TF32, as llm.c), so the bound is fp32 rounding.
common=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -t 32 -d 256 -x 4 -v 2 -m 2 -s 2 -g 8 -l 3e-3 -u 2 -sf 1 -f 0)
steps() { grep -o '"train_loss": [^,]*, "grad_norm": [^,]*' "$1" | awk '{ print $2, $4 }' | tr -d ','; }
vals() { grep -o '"val_loss": [^}]*' "$1" | awk '{ print $2 }'; }
# close A B N TOL: every line's numbers equal within TOL relative, N lines
close() {
    paste -d ' ' "$1" "$2" | awk -v want="$3" -v tol="$4" '{ n++; h = NF / 2; for (i = 1; i <= h; i++) {
        d = ($i - $(i + h)) / $(i + h); if (d < 0) d = -d; if (d > w) w = d } }
        END { printf "%d lines, worst relative difference %.2g", n, w; exit !(n == want && w <= tol) }'
}
sample() { sed -n '/^generating:/,/^---$/p' "$1" | sed -n 3p; }
emu=build/emu/train_gpt2_emu_fp32
# reference EMU NAME: one process, -b 2
reference() {
    $1 "${common[@]}" -b 2 -n 2 -o "$dir/$2" > "$dir/$2.out" 2>&1 || fail "pp: one process ($1)" "$(tail -n 2 "$dir/$2.out")"
    steps "$dir/$2/log.jsonl" > "$dir/$2.steps"
    vals "$dir/$2/log.jsonl" > "$dir/$2.vals"
}
# run NAME RANKS B flags...: FP32 against the one process, every step's loss and norm, the val
# losses and the sample; FP16 (FP16=1) its losses and first norm against the FP16 one process
run() {
    local name=$1 np=$2 b=$3 bin=$emu ref=one
    shift 3
    [ "${FP16:-0}" = 1 ] && bin=build/emu/train_gpt2_emu_fp16 ref=one16
    timeout 600 mpirun -np "$np" $bin "${common[@]}" -b "$b" -o "$dir/$name" "$@" > "$dir/$name.out" 2>&1 \
        || { fail "pp: mpirun -np $np $*" "$(grep -m1 'error\|cuda_cpu' "$dir/$name.out" | cut -c1-300)"; return 1; }
    steps "$dir/$name/log.jsonl" > "$dir/$name.steps"
    vals "$dir/$name/log.jsonl" > "$dir/$name.vals"
    local r v
    if [ "${FP16:-0}" = 1 ]; then
        # (m + 1) u = 5 x 2^-11 relative: the losses of every step, the norm of the first
        awk '{ print $1 }' "$dir/$name.steps" > "$dir/$name.l"; awk '{ print $1 }' "$dir/$ref.steps" > "$dir/$ref.l"
        head -n 1 "$dir/$name.steps" | awk '{ print $2 }' > "$dir/$name.n1"; head -n 1 "$dir/$ref.steps" | awk '{ print $2 }' > "$dir/$ref.n1"
        r=$(close "$dir/$name.l" "$dir/$ref.l" 4 0.0024414) && v=$(close "$dir/$name.n1" "$dir/$ref.n1" 1 0.0024414) \
            && pass "FP16 mpirun -np $np $* -b $b equals one process with -b 2 within (m + 1) u: losses $r; first norm: $v" \
            || fail "FP16 mpirun -np $np $* -b $b vs one process" "losses: $r; first norm: ${v:-}"
        return
    fi
    r=$(close "$dir/$name.steps" "$dir/$ref.steps" 4 1e-5) && v=$(close "$dir/$name.vals" "$dir/$ref.vals" 3 1e-5) \
        && [ "$(sample "$dir/$name.out")" = "$(sample "$dir/$ref.out")" ] \
        && pass "mpirun -np $np $* -b $b equals one process with -b 2, every step's loss and norm: $r; val losses: $v; the same sample" \
        || fail "mpirun -np $np $* -b $b vs one process" "steps: $r; vals: ${v:-}; sample '$(sample "$dir/$name.out")' vs '$(sample "$dir/$ref.out")'"
}
reference $emu one
if [ "$long" = 1 ]; then
    run pp2z0 4 1 -pp 2 -z 0
    run pp4 4 2 -pp 4
    run pp2r3 2 2 -pp 2 --pp-split 3,1 -r 3
    require build/emu/train_gpt2_emu_fp16
    reference build/emu/train_gpt2_emu_fp16 one16
    FP16=1 run pp2h 2 2 -pp 2
    FP16=1 run pp2z1h 4 1 -pp 2 -z 1
    exit $failed
fi
run pp2 2 2 -pp 2 -n 2
grep -q 'pipeline stage 0 of 2 (layers 0-1, embeddings, 2 micro-batches in flight)' "$dir/pp2.out" \
    && pass "pp: the start-up report names rank 0's stage, its layers and micro-batches in flight" \
    || fail "pp: start-up report" "$(grep -m1 '^engine:' "$dir/pp2.out")"
run pp2z1 4 1 -pp 2 -z 1
# Rank 0's stage as planned: every component planned = allocated = counted by the device, and its
# device bytes those --plan --json gives stage 0 (by_stage).
for name in pp2:2:2 pp2z1:4:1; do
    run_name=${name%%:*} rest=${name#*:}
    np=${rest%%:*} b=${rest#*:}
    flags=(-e "$dir/m.bin" -t 32 -d 256 -b "$b" -pp 2 --precision fp32)
    [ "$run_name" = pp2z1 ] && flags+=(-z 1)
    want=$(./train_gpt2 --plan --json "${flags[@]}" --ranks "$np" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["by_stage"][0]["device_bytes"])')
    got=$(awk '/^memory by component/ { on = 1; next } on && /^  / && $0 ~ / device / {
            n = split($0, f, "|"); split(f[1], a, " "); planned = a[length(a)]; allocated = f[2] + 0; measured = f[3] + 0
            if (planned != allocated || allocated != measured) bad = bad " " $0; total += allocated }
            on && !/^  / { on = 0 } END { print (bad == "" ? total : "mismatch:" bad) }' "$dir/$run_name.out")
    [ -n "$want" ] && [ "$got" = "$want" ] \
        && pass "pp: $run_name's rank 0 allocates its stage's plan to the byte ($got device bytes, planned = allocated = counted)" \
        || fail "pp: $run_name's rank 0 against --plan's stage 0" "--plan $want, start-up $got"
done

# --plan --json's by_stage gives each stage's components; the plan's own stage's are its components,
# and every stage's device components sum to its device bytes.
out=$(./train_gpt2 --plan --json -e d48 -t 1024 -b 4 -r 0 -pp 4 --ranks 4 -d 524288 | "$PY" -c '
import json, sys
p = json.load(sys.stdin)
own = {c["name"]: c["bytes"] for c in p["components"]}
dev = {c["name"] for c in p["components"] if c["where"] == "device" and not c["estimate"]}
bad = []
if p["by_stage"][p["pipeline"]["stage"]]["components"] != own:
    bad.append("the plan'"'"'s stage differs from its components")
for s in p["by_stage"]:
    if sum(b for n, b in s["components"].items() if n in dev) != s["device_bytes"]:
        bad.append("stage %d: components do not sum to device_bytes" % s["stage"])
print("; ".join(bad) or "ok")')
[ "$out" = ok ] && pass "pp: --plan --json's by_stage components: the plan's own stage's equal its components, each stage's sum to its device bytes" \
    || fail "pp: by_stage components" "$out"

# One stage's overflow skips the step on every stage. Layer 0 (stage 0's) rescaled by 1024, a power
# of two, so that its forward is bit for bit the original's: its LayerNorm's weight and bias and its
# value rows' bias times 1024, its query and key rows' weights and attproj's weight over 1024. Only
# attproj's weight gradient grows (1024 times: its input, the attention's output, is 1024 times
# larger), and in FP16 at the default loss scale of 65536 it overflows where no other does (the
# model unchanged trains at 4 times that scale): stage 0 alone finds a non-finite gradient, until the
# scale has halved four times. One process skips those steps; -pp 2 must skip the same ones on both
# stages (stage 1, deciding alone, would update and its losses part from the one process's).
"$PY" - "$dir/m.bin" "$dir/m_rescaled.bin" << 'PY' || fail "pp overflow: rescaling the model" "python failed"
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
h = struct.unpack("256i", d[:1024])
maxT, L, C, Vp = h[2], h[4], h[6], h[7]
offsets, at = {}, 0
for name, n in [("wte", Vp * C), ("wpe", maxT * C), ("ln1w", L * C), ("ln1b", L * C), ("qkvw", L * 3 * C * C),
                ("qkvb", L * 3 * C), ("attprojw", L * C * C)]:
    offsets[name], at = at, at + n
def scale(first, n, by):
    for i in range(first, first + n):
        v, = struct.unpack_from("f", d, 1024 + 4 * i)
        struct.pack_into("f", d, 1024 + 4 * i, v * by)
k = 1024.0
scale(offsets["ln1w"], C, k)
scale(offsets["ln1b"], C, k)
scale(offsets["qkvw"], 2 * C * C, 1 / k)       # layer 0's query and key rows (its value rows as they are)
scale(offsets["qkvb"] + 2 * C, C, k)           # its value rows' bias
scale(offsets["attprojw"], C * C, 1 / k)
struct.pack_into("3i", d, 48, 0, 0, 0)         # the checksum's tag and words: the file as llm.c writes it
open(sys.argv[2], "wb").write(d)
PY
ov=(-e "$dir/m_rescaled.bin" -i "$dir/train.bin" -t 32 -d 256 -x 6 -v 0 -s 0 -l 3e-3 -g 8)
scales() { grep -o '"train_loss": [^,]*\|"loss_scale": [^,]*\|"skipped": [0-9]*' "$1" | awk '{ print $2 }' | paste -d ' ' - - -; }
h16=build/emu/train_gpt2_emu_fp16
require $h16
$h16 "${ov[@]}" -b 2 -o "$dir/ov1" > "$dir/ov1.out" 2>&1 || fail "pp overflow: one process" "$(tail -n 2 "$dir/ov1.out")"
timeout 600 mpirun -np 2 $h16 "${ov[@]}" -b 2 -pp 2 -o "$dir/ovpp" > "$dir/ovpp.out" 2>&1 \
    || fail "pp overflow: -pp 2" "$(grep -m1 'error\|cuda_cpu' "$dir/ovpp.out" | cut -c1-300)"
scales "$dir/ov1/log.jsonl" > "$dir/ov1.s"
scales "$dir/ovpp/log.jsonl" > "$dir/ovpp.s"
want="65536 1 32768 1 16384 1 8192 1 4096 0 4096 0"
got1=$(awk '{ print $2, $3 }' "$dir/ov1.s" | paste -sd ' ')
gotpp=$(awk '{ print $2, $3 }' "$dir/ovpp.s" | paste -sd ' ')
awk '{ print $1 }' "$dir/ov1.s" > "$dir/ov1.l"
awk '{ print $1 }' "$dir/ovpp.s" > "$dir/ovpp.l"
if [ "$got1" = "$want" ] && [ "$gotpp" = "$want" ] && r=$(close "$dir/ovpp.l" "$dir/ov1.l" 6 0.0024414); then
    pass "pp overflow on stage 0 only: -pp 2 skips steps 1-4 on both stages as one process does (loss scales and skips '$gotpp'), losses within (m + 1) u: $r"
else
    fail "pp overflow on stage 0 only" "one process '$got1', -pp 2 '$gotpp' (expected '$want'); losses ${r:-differ}"
fi

# The stages' traffic as the runtime's NCCL counts it (NCCL_CPU_TRAFFIC, a line per communicator at
# its end) equals the planner's: each rank sends a micro-batch's activation or its gradient, B x T x C
# fp32, on each of the 2 steps' 4 micro-steps, and nothing else point to point.
timeout 600 mpirun -np 2 -x NCCL_CPU_TRAFFIC="$dir/traffic" $emu -e "$dir/m.bin" -i "$dir/train.bin" -t 32 -b 2 -d 256 -x 2 \
    -v 0 -s 0 -f 0 -pp 2 -o "" > "$dir/traffic.out" 2>&1 || fail "pp: the traffic run" "$(tail -n 2 "$dir/traffic.out")"
per=$(./train_gpt2 --plan --json -e "$dir/m.bin" -t 32 -b 2 -d 256 -pp 2 --ranks 2 --precision fp32 |
      "$PY" -c 'import json, sys; c = json.load(sys.stdin)["communication"]; print(next(i["sent"] for i in c["items"] if i["kind"] == "send") * c["micro_steps"])')
got=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } s[v["rank"]] += v["send_bytes"]; c[v["rank"]] += v["send_calls"] }
           END { printf "%s %s %s %s", s[0], s[1], c[0], c[1] }' "$dir/traffic" 2> /dev/null)
[ -n "$per" ] && [ "$got" = "$((2 * per)) $((2 * per)) 8 8" ] && [ "$per" = $((4 * 2 * 32 * 32 * 4)) ] \
    && pass "pp: the runtime counts each stage's sends as the planner plans them (2 steps x $per bytes, 8 calls a rank)" \
    || fail "pp: counted traffic against the planner" "counted (bytes, bytes, calls, calls) '$got', planned $per a step"

# --- checkpoints: whole files, resumed across -pp ----------------------------------------------------
ls "$dir/pp2" | grep -E '^(model|state)_' | tr '\n' ' ' > "$dir/files"
[ "$(cat "$dir/files")" = "model_00000002.bin model_00000004.bin state_00000002.bin state_00000004.bin " ] \
    && grep -aq 'pipeline-stages 2' "$dir/pp2/state_00000002.bin" \
    && pass "pp: one model and one state file a checkpoint, the state's record naming -pp 2" \
    || fail "pp: checkpoint files" "$(cat "$dir/files")"
# name from ranks flags...: resume from's step-2 checkpoint to step 4
resume() {
    local name=$1 from=$2 np=$3
    shift 3
    rm -rf "$dir/$name"
    cp -r "$dir/$from" "$dir/$name"
    rm -f "$dir/$name"/*_00000004* "$dir/$name/run_complete"
    timeout 600 mpirun -np "$np" $emu "${common[@]}" -b 2 -n 2 -o "$dir/$name" -y 1 "$@" > "$dir/$name.out" 2>&1 \
        || { fail "pp: resume $name" "$(grep -m1 'error\|cuda_cpu' "$dir/$name.out" | cut -c1-300)"; return 1; }
}
resume pp_on_one pp2 1 \
    && d=$($gen diff "$dir/pp_on_one/model_00000004.bin" "$dir/pp2/model_00000004.bin") \
    && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' \
    && pass "pp: -pp 2's checkpoint resumed on one process: final weights within $d of continuing on -pp 2" \
    || fail "pp: -pp 2 resumed on one process" "weights differ by ${d:-?}"
resume one_on_pp one 2 -pp 2 \
    && d=$($gen diff "$dir/one_on_pp/model_00000004.bin" "$dir/one/model_00000004.bin") \
    && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' \
    && pass "pp: one process's checkpoint resumed on -pp 2: final weights within $d of continuing on one" \
    || fail "pp: one process resumed on -pp 2" "weights differ by ${d:-?}"
resume pp_on_pp pp2 2 -pp 2 \
    && cmp -s "$dir/pp_on_pp/model_00000004.bin" "$dir/pp2/model_00000004.bin" \
    && cmp -s "$dir/pp_on_pp/state_00000004.bin" "$dir/pp2/state_00000004.bin" \
    && pass "pp: -pp 2 resumed on -pp 2: final model and state bit-identical" \
    || fail "pp: -pp 2 resumed on -pp 2" "files differ"
exit $failed
