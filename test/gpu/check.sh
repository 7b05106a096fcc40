#!/usr/bin/env bash
# test/gpu/check.sh: the GPU check. One command on a machine with an NVIDIA GPU (written for an
# H100/H200 with 16 cores, nvcc and cuBLASLt; MPI and NCCL not needed), from a clean tree, in about
# 8 minutes:
#   1. builds ./train_gpt2 (FP16) and, with nvcc, every kernel test, the engine's contract test
#      and the kernel benchmark (make gpu-checks);
#   2. runs every kernel test and the contract test on the GPU, against the C engine;
#   3. runs a short training under compute-sanitizer memcheck and a kernel test under racecheck,
#      when compute-sanitizer is there;
#   4. checks end-to-end loss parity with the C engine (10 steps, FP16 within 2e-2);
#   5. measures tokens/s and MFU for d12 (B=16, T=1024) and d48 (T=1024, the largest B that fits),
#      each beside the kernel report's prediction (docs/kernel_report_fp16.json), peak device memory,
#      and per-kernel times (flash attention against the three-kernel attention), and llm.c's
#      train_gpt2cu on the same model and batch when ./llm.c is there;
#   6. runs dev/bench_memory.sh for d12 (B=8, T=1024, one rank): activation bytes and step time of
#      recompute levels 0-3 and of gradient accumulation (ZeRO needs several GPUs: not here);
#   7. runs the 48 GB recipe (scripts/run_gpt2_1558M_48GB.sh: d48, the planner's -b and -r,
#      --max-memory 48GiB) for 2 steps: planned and measured memory, tokens/s, MFU;
#   8. measures optimizer offload: the host AdamW's rate on this machine's cores
#      (build/dev/bench_adamw_host_fp16) and d12 (B=8, T=1024) with and without --offload;
# then prints one table and writes it to test/gpu/results/DATE_GPU.md for the README.
#
#   bash test/gpu/check.sh          on a GPU machine
#   bash test/gpu/check.sh --dry    anywhere, after make test: the same steps through the CPU
#                                   runtime at toy sizes (make test runs this, so it cannot rot)
set -u
cd "$(dirname "$0")/../.."
DRY=0
[ "${1:-}" = "--dry" ] && DRY=1
t0=$(date +%s)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
failed=0
rows=()
row() { rows+=("| $1 | $2 |"); printf '  %-46s %s\n' "$1" "$2"; }
pass() { echo "PASS gpu_check: $1"; }
fail() { echo "FAIL gpu_check: $1: $2"; failed=1; }
elapsed() { echo $(( $(date +%s) - t0 )); }

# ---- 1. the machine and the build ------------------------------------------------------------
if [ $DRY = 1 ]; then
    trainer=build/emu/train_gpt2_emu_fp16
    kdir=build/kernels
    edir=build/test
    bench=build/dev/bench_kernels_emu
    for f in $trainer $bench $edir/test_gpu_engine_fp16 build/test/gen_data ./train_gpt2; do
        [ -x "$f" ] || { fail "dry run" "$f is missing: run make test (or make emu kernel-tests) first"; exit 1; }
    done
    gpu="CPU runtime (dry run)"
    results="$work/results.md"
else
    if ! nvidia-smi -L > /dev/null 2>&1; then fail "machine" "nvidia-smi finds no GPU"; exit 1; fi
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '.')
    jobs=$(nproc)
    echo "== building for $gpu (sm_$arch) with $jobs jobs"
    if ! make -j"$jobs" train gpu-checks PRECISION=FP16 GPU_ARCH="$arch" > "$work/build.log" 2>&1; then
        tail -n 30 "$work/build.log"
        fail "build" "make train gpu-checks failed (log above)"
        exit 1
    fi
    trainer=./train_gpt2
    kdir=build/gpu
    edir=build/gpu
    bench=build/gpu/bench_kernels_fp16
    mkdir -p test/gpu/results
    results="test/gpu/results/$(date +%Y-%m-%d)_$(echo "$gpu" | tr -c 'A-Za-z0-9\n' '_').md"
fi
row "GPU" "$gpu"
row "nvcc" "$(nvcc --version 2>/dev/null | tail -n 1 || echo none)"
row "MPI / NCCL" "$(command -v mpicc > /dev/null && echo mpicc || echo 'no mpicc') / $([ -f "${CUDA_HOME:-/usr/local/cuda}/include/nccl.h" ] && echo nccl.h || echo 'no nccl.h')"
row "build" "$(elapsed) s"

# ---- 2. kernel tests and the engine's contract test on the device --------------------------------
run_tests() {  # label, programs...: counts PASS and FAIL lines; a crash counts as a failure
    local label=$1 p=0 f=0 bad=""
    shift
    for t in "$@"; do
        out=$("$t" 2>&1)
        rc=$?
        np=$(grep -c '^PASS' <<< "$out")
        nf=$(grep -c '^FAIL' <<< "$out")
        [ $rc -ne 0 ] && [ "$nf" -eq 0 ] && nf=1
        p=$((p + np))
        f=$((f + nf))
        [ "$nf" -gt 0 ] && bad="$bad $(basename "$t")" && grep '^FAIL' <<< "$out" | head -n 3
    done
    row "$label" "$p passed, $f failed${bad:+ (in$bad)}"
    [ $f -eq 0 ] && pass "$label" || fail "$label" "$f failed in$bad"
}
if [ $DRY = 1 ]; then  # make test has just run the FP16 ones; the two quickest show the parsing works
    run_tests "kernel tests" $kdir/test_gelu_fp16 $kdir/test_shard_fp16
    run_tests "engine contract tests" $edir/test_gpu_engine_fp16
else
    run_tests "kernel tests ($(ls $kdir/test_*_fp?? $kdir/test_*_bf16 | grep -v engine | grep -vc flash) programs)" \
        $(ls $kdir/test_*_{fp32,fp16,bf16} | grep -v gpu_engine | grep -v test_flash)
    run_tests "engine contract tests (fp32, fp16, bf16)" $edir/test_gpu_engine_{fp32,fp16,bf16}
    run_tests "flash kernels (mma.sync, and wgmma on sm_90) and the wgmma primitives" \
        $kdir/test_flash_fwd_{fp16,bf16} $kdir/test_flash_bwd_{fp16,bf16} $kdir/test_wgmma
fi
row "tests done" "$(elapsed) s"

# ---- data and models for the runs ----------------------------------------------------------------
build/test/gen_data model "$work/small.bin" 2 64 2 512 64 1
build/test/gen_data shard "$work/small_train.bin" 40000 512 2
build/test/gen_data shard "$work/bench.bin" $([ $DRY = 1 ] && echo 20000 || echo 1200000) 50257 3
small=(-e "$work/small.bin" -i "$work/small_train.bin" -b 4 -t 32 -v 0 -s 0 -x 10 -l 3e-3 -u 2 -o "")

# ---- 3. compute-sanitizer -----------------------------------------------------------------------
sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ $DRY = 1 ] || [ ! -x "$sanitizer" ]; then
    row "compute-sanitizer" "not run ($([ $DRY = 1 ] && echo 'CPU runtime' || echo 'not installed'))"
else
    for tool in memcheck racecheck; do
        if [ $tool = memcheck ]; then cmd=($trainer "${small[@]}" -x 2); else cmd=($kdir/test_attention_fp16); fi
        timeout 150 "$sanitizer" --tool $tool --error-exitcode 9 "${cmd[@]}" > "$work/san_$tool.log" 2>&1
        rc=$?
        summary=$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$work/san_$tool.log" | sed 's/^========= //')
        case $rc in
            0) row "compute-sanitizer $tool" "clean: ${summary:-no errors} (${cmd[0]##*/})"; pass "sanitizer $tool" ;;
            124) row "compute-sanitizer $tool" "timed out after 150 s (${cmd[0]##*/})" ;;
            *) row "compute-sanitizer $tool" "exit $rc: $summary"; fail "sanitizer $tool" "exit $rc: $summary"
               grep -m 10 -E '^=========' "$work/san_$tool.log" ;;
        esac
    done
fi

# ---- 4. end-to-end parity with the C engine --------------------------------------------------------
losses() { grep -E '^step +[0-9]' | sed 's/.*| loss \([0-9.]*\) .*/\1/'; }
./train_gpt2 --engine cpu "${small[@]}" > "$work/cpu.out" 2>&1
$trainer "${small[@]}" > "$work/gpu.out" 2>&1
if grep -q '^engine: GPU engine' "$work/gpu.out"; then
    report=$(paste <(losses < "$work/cpu.out") <(losses < "$work/gpu.out") | awk '
        { n++; d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d; if (n == 1) f = $2; l = $2 }
        END { printf "%d steps, worst difference %.2g, loss %s -> %s", n, w, f, l; exit !(n == 10 && w <= 2e-2 && l < f - 1) }')
    if [ $? -eq 0 ]; then pass "parity"; else fail "parity" "$report"; fi
    row "loss parity with the C engine (fp16, 10 steps, within 2e-2)" "$report"
    # Which attention kernels the trainer chose: on compute 9.0 the wgmma ones, unless its start-up check
    # found them differing from mma.sync (then a warning line names by how much)
    att=$(grep -m1 '^engine: GPU engine' "$work/gpu.out" | sed -n 's/.*, attention \(.*\)$/\1/p')
    row "attention kernels (the trainer's choice)" "${att:-?} $(grep -m1 '^warning: flash attention' "$work/gpu.out")"
    if [ "$(grep -m1 '^engine: GPU engine' "$work/gpu.out" | grep -o '(sm_[0-9]*)')" = "(sm_90)" ] && [ "$att" != "flash, wgmma" ]; then
        fail "wgmma" "an sm_90 GPU runs attention on '$att': $(grep -m1 '^warning: flash attention' "$work/gpu.out")"
    fi
else
    fail "parity" "the trainer did not run the GPU engine: $(grep -m1 '^engine' "$work/gpu.out")"
fi

# ---- 5. speed and memory ----------------------------------------------------------------------------
# Device memory in use, sampled every 0.2 s while a command runs; prints the peak in MiB.
peak_mem_during() {
    if [ $DRY = 1 ]; then echo "n/a" > "$work/peak"; "$@"; return; fi
    ( peak=0; while sleep 0.2; do
          m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -n 1)
          [ "$m" -gt "$peak" ] 2>/dev/null && peak=$m && echo "$peak" > "$work/peak"
      done ) &
    local sampler=$!
    echo 0 > "$work/peak"
    "$@"
    local rc=$?
    kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
    return $rc
}
# tokens/s (mean after the first step) and MFU (mean of the step lines after the first) of a run's output
speed_of() {
    local tok mfu
    tok=$(grep '^done:' "$1" | sed 's/.* \([0-9]*\) tok\/s.*/\1/')
    mfu=$(grep -E '^step +[0-9]' "$1" | tail -n +2 | grep -o 'MFU [0-9.]*' | awk '{s += $2; n++} END { if (n) printf "%.1f%%", s / n; else print "n/a" }')
    echo "${tok:-?} tok/s, MFU $mfu"
}
bench_run() {  # label, model, B, T, steps[, more flags]
    local out="$work/run_$2_$3${6:+_x}.out"
    peak_mem_during $trainer -e "$2" -b "$3" -t "$4" -r 0 -x "$5" -i "$work/bench.bin" -v 0 -s 0 -l 1e-4 -o "" ${6:-} > "$out" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then echo "exit $rc: $(tail -n 1 "$out")"; return $rc; fi
    echo "$(speed_of "$out"), engine memory $(grep '^memory:' "$out" | sed 's/.*total //'), device peak $(cat "$work/peak")$(grep -q '^[0-9]' "$work/peak" && echo ' MiB')"
}
# The kernel report's prediction for a model and micro-batch (docs/kernel_report_fp16.json, T=1024, -r 0)
# on this GPU's row of its model (H100 SXM when the GPU is not one of its rows); a third argument
# "predicted_ge2" takes the -ge 2 table, "predicted_llmc" llm.c's (counted through the same runtime and
# model: docs/kernel_report_fp16.md, its calibration against published measurements first).
predicted() {
    python3 - "$1" "$2" "$gpu" "${3:-predicted}" <<'PY' 2>/dev/null || echo "n/a (docs/kernel_report_fp16.json unreadable)"
import json, sys
model, batch, gpu, table = sys.argv[1:5]
pred = json.load(open("docs/kernel_report_fp16.json"))[table]
rows = {"H200": "H200", "H100": "H100 SXM", "A100": "A100 SXM 80GB", "A6000": "RTX A6000", "L40S": "L40S"}
key = next((v for k, v in rows.items() if k in gpu), "H100 SXM")
p = pred.get(model, {}).get(batch, {}).get(key)
print(f"{p['step_ms']} ms/step, {p['tokens_per_s']} tok/s, MFU {100 * p['mfu']:.1f}% (the {key} row)" if p else "n/a")
PY
}
if [ $DRY = 1 ]; then
    r=$(bench_run dry d1 1 64 3) && row "d1 B=1 T=64 (dry run)" "$r" || fail "bench d1" "$r"
    r=$(predicted d12 16) && [ "${r#n/a}" = "$r" ] && row "predicted d12 B=16 T=1024 (kernel report)" "$r" \
        || fail "kernel report prediction" "$r"
    r=$(predicted d12 16 predicted_ge2) && [ "${r#n/a}" = "$r" ] && row "predicted d12 B=16 T=1024 -ge 2 (kernel report)" "$r" \
        || fail "kernel report prediction (-ge 2)" "$r"
    r=$(predicted d12 16 predicted_llmc) && [ "${r#n/a}" = "$r" ] && row "predicted llm.c d12 B=16 T=1024 (kernel report)" "$r" \
        || fail "kernel report prediction (llm.c)" "$r"
    $bench d1 1 64 1 > "$work/kernels.txt" 2>&1 || fail "bench_kernels" "$(tail -n 2 "$work/kernels.txt")"
else
    # -ge both ways: the report predicts GELU in the matmul epilogues (-ge 2) faster, and -ge's default
    # (-1) takes it on sm_90 and newer; this measures what that choice rests on.
    r=$(bench_run d12 d12 16 1024 12 "-ge 0") && row "d12 B=16 T=1024 (fp16, -ge 0)" "$r" || fail "bench d12 -ge 0" "$r"
    row "  predicted by the kernel report" "$(predicted d12 16)"
    r=$(bench_run d12 d12 16 1024 12 "-ge 2") && row "d12 B=16 T=1024 (fp16, -ge 2)" "$r" || fail "bench d12 -ge 2" "$r"
    row "  predicted by the kernel report" "$(predicted d12 16 predicted_ge2)"
    d48=""
    for B in 32 24 16 12 8 4 2 1; do
        if r=$(bench_run d48 d48 $B 1024 6); then
            d48=$B
            # -ge's default: the engine line says which the GPU got, and so which table predicts it.
            ge=$(grep -o 'gelu fusion [0-2]' "$work/run_d48_$B.out" | grep -o '[0-2]$')
            row "d48 B=$B T=1024 (fp16, largest B that fits, -ge ${ge:-?} by default)" "$r"
            row "  predicted by the kernel report" "$(predicted d48 $B $([ "$ge" = 2 ] && echo predicted_ge2))"
            break
        fi
        grep -q "out of GPU memory" "$work/run_d48_$B.out" || { fail "bench d48 B=$B" "$r"; break; }
    done
    $bench d12 16 1024 20 > "$work/kernels.txt" 2>&1 || fail "bench_kernels d12" "$(tail -n 2 "$work/kernels.txt")"
    [ -n "$d48" ] && { $bench d48 "$d48" 1024 10 > "$work/kernels48.txt" 2>&1 || fail "bench_kernels d48" "$(tail -n 2 "$work/kernels48.txt")"; }
    # The peer, side by side on the same card, model and batch, when its source is at ./llm.c.
    if [ -f llm.c/train_gpt2.cu ] && [ "$(elapsed)" -lt 330 ]; then
        # dev/llmc_cuda13.h: llm.c's CUDA 12 cudaMemAdvise under CUDA 13's headers (harmless before).
        # -v 1000 -m 0: no validation (its -v 0 divides by zero); -r 0 as ours.
        if timeout 180 make -C llm.c train_gpt2cu USE_CUDNN=0 NVCC_INCLUDES="-include $PWD/dev/llmc_cuda13.h" \
                > "$work/llmc_build.log" 2>&1; then
            (cd llm.c && timeout 120 ./train_gpt2cu -e d12 -b 16 -t 1024 -x 12 -r 0 -i "$work/bench.bin" -j "$work/bench.bin" \
                -v 1000 -m 0 -s 0 > "$work/llmc.out" 2>&1)
            tok=$(grep -E '^step +[0-9]' "$work/llmc.out" | tail -n +2 | grep -o '[0-9]* tok/s' | awk '{s += $1; n++} END { if (n) printf "%.0f", s / n }')
            mfu=$(grep -E '^step +[0-9]' "$work/llmc.out" | tail -n +2 | grep -oE '[0-9.]+% bf16 MFU' | awk '{s += $1; n++} END { if (n) printf "%.1f%%", s / n }')
            row "llm.c train_gpt2cu d12 B=16 T=1024 (bf16, no cuDNN, -r 0)" "${tok:-?} tok/s, MFU ${mfu:-?}"
            row "  predicted by the kernel report (llm.c, the same model)" "$(predicted d12 16 predicted_llmc)"
        else
            row "llm.c train_gpt2cu" "build failed: $(tail -n 1 "$work/llmc_build.log")"
        fi
    fi
fi
# ---- 6. memory techniques: recompute levels and accumulation, bytes saved and time cost ------------
# 3 runs of each configuration in turns (bench_memory's default): a difference within their spread is
# marked "*", noise; the dry run's one run (-n 1) only takes the script's plumbing through.
if [ $DRY = 1 ]; then mem_case=(-e d1 -b 2 -t 64 -x 2 -n 1); else mem_case=(-e d12 -b 8 -t 1024 -x 8 -n 3); fi
if timeout 300 bash dev/bench_memory.sh --trainer $trainer "${mem_case[@]}" --no-zero -- -i "$work/bench.bin" -l 1e-4 \
        > "$work/bench_memory.txt" 2>&1; then
    # "-r 1  26.50 MiB  262144 B (0.9%)  165.25 MiB  1762.4  1.3%  -0.2%*": the bytes saved and the time
    # cost (the median's, with "*" when within the runs' spread)
    r=$(awk '$1 == "-r" && $2 ~ /^[123]$/ { printf "%s-r %s: %s B %s saved, %s", sep, $2, $5, $7, $NF; sep = "; " }' "$work/bench_memory.txt")
    row "recompute vs -r 0 (${mem_case[*]:0:6}, one rank, ${mem_case[*]: -2}; * within the spread)" "$r"
    r=$(awk '$2 == "x" && $4 == "micro-steps" { printf "%s x 2: %s B %s of activations saved, %s", $1, $7, $9, $NF }' "$work/bench_memory.txt")
    row "accumulation, the same batch in 2 micro-steps" "$r"
    pass "bench_memory"
else
    row "memory techniques bench" "failed: $(tail -n 1 "$work/bench_memory.txt")"
    fail "bench_memory" "$(tail -n 3 "$work/bench_memory.txt")"
fi
# ---- 7. the 48 GB recipe: d48 held to 48 GiB by --max-memory on this bigger card ------------------
# The planner's configuration (scripts/run_gpt2_1558M_48GB.sh) for 2 steps of 524,288 tokens:
# planned vs measured device memory, tokens/s and MFU. On the dry run, its plan only.
if [ $DRY = 1 ]; then
    if bash scripts/run_gpt2_1558M_48GB.sh --dry > "$work/recipe48.out" 2>&1 && grep -q '^plan: ' "$work/recipe48.out"; then
        row "48 GB recipe (dry: the plan)" "$(grep '^plan: ' "$work/recipe48.out" | cut -c7-120)"
        pass "48 GB recipe --dry"
    else
        fail "48 GB recipe --dry" "$(tail -n 2 "$work/recipe48.out")"
    fi
elif [ "$(elapsed)" -lt 420 ]; then
    TRAIN="$work/bench.bin" STEPS=2 peak_mem_during timeout 240 bash scripts/run_gpt2_1558M_48GB.sh -v 0 -s 0 -n 0 -o "" \
        > "$work/recipe48.out" 2>&1
    rc=$?
    planned=$(grep '^plan: ' "$work/recipe48.out" | grep -o '[0-9.]* GiB per rank' | head -n 1)
    if [ $rc = 0 ]; then
        row "d48 48 GB recipe ($(grep '^plan: ' "$work/recipe48.out" | cut -d, -f1 | cut -c7-), 2 steps)" \
            "$(speed_of "$work/recipe48.out"), planned $planned, engine $(grep '^memory:' "$work/recipe48.out" | sed 's/.*total //'), $(grep '^device memory: at most' "$work/recipe48.out" | sed 's/device memory: //'), nvidia-smi peak $(cat "$work/peak") MiB"
        pass "48 GB recipe"
    else
        row "d48 48 GB recipe" "exit $rc: $(grep -m1 '^error' "$work/recipe48.out" || tail -n 1 "$work/recipe48.out")"
        fail "48 GB recipe" "$(tail -n 2 "$work/recipe48.out")"
    fi
else
    row "d48 48 GB recipe" "skipped: $(elapsed) s already spent"
fi
# ---- 8. optimizer offload: the host AdamW's rate, and a step with and without --offload ----------
adamw_bench=build/dev/bench_adamw_host_fp16
if [ -x $adamw_bench ]; then
    if [ $DRY = 1 ]; then n_adamw=65536; else n_adamw=$((1 << 26)); fi
    if $adamw_bench $n_adamw > "$work/adamw_host.txt" 2>&1; then
        row "host AdamW, fp16, $(nproc) threads" "$(grep '^adamw_update_host' "$work/adamw_host.txt" | sed 's/  */ /g'); d48: $(grep -o '[0-9.]* s per optimizer step' "$work/adamw_host.txt")"
        pass "host AdamW bench"
    else
        fail "host AdamW bench" "$(tail -n 2 "$work/adamw_host.txt")"
    fi
else
    row "host AdamW" "n/a: $adamw_bench not built (needs nvcc)"
fi
if [ $DRY = 1 ]; then off_case=(d1 1 64 3); else off_case=(d12 8 1024 8); fi
if [ $DRY = 1 ] || [ "$(elapsed)" -lt 480 ]; then
    r=""
    for off in none optimizer; do
        out="$work/offload_$off.out"
        if timeout 120 $trainer -e ${off_case[0]} -b ${off_case[1]} -t ${off_case[2]} -r 0 -x ${off_case[3]} -i "$work/bench.bin"                 -v 0 -s 0 -l 1e-4 -o "" --offload $off > "$out" 2>&1; then
            r="$r${r:+; }--offload $off: $(speed_of "$out")"
        else
            r="$r${r:+; }--offload $off: exit $?: $(tail -n 1 "$out")"
            fail "offload run ($off)" "$(tail -n 2 "$out")"
        fi
    done
    row "${off_case[0]} B=${off_case[1]} T=${off_case[2]}, optimizer offload" "$r"
else
    row "optimizer offload" "skipped: $(elapsed) s already spent"
fi
row "total time" "$(elapsed) s"

# ---- the table ----------------------------------------------------------------------------------
{
    echo "# GPU check: $gpu, $(date -u +%Y-%m-%d)"
    echo
    echo "\`bash test/gpu/check.sh\` at commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$([ $DRY = 1 ] && echo ' (dry run through the CPU runtime: figures are not GPU figures)')."
    echo
    echo "| what | result |"
    echo "|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "## Kernels (dev/cuda/bench_kernels.cu)"
    echo
    cat "$work/kernels.txt" 2>/dev/null
    if [ -f "$work/kernels48.txt" ]; then echo; cat "$work/kernels48.txt"; fi
    echo
    echo "## Memory techniques (dev/bench_memory.sh)"
    echo
    echo '```'
    cat "$work/bench_memory.txt" 2>/dev/null
    echo '```'
} > "$results.tmp" && mv "$results.tmp" "$results"
echo
cat "$results"
[ $DRY = 1 ] || echo "(written to $results)"
if [ $DRY = 1 ]; then
    grep -q '^| kernel tests | ' "$results" && grep -q 'attention_forward (flash)' "$results" \
        && grep -q 'B=1 x 2 micro-steps' "$results" \
        && pass "dry run writes the table with every section" || fail "dry run" "the table lacks a section"
fi
exit $failed
