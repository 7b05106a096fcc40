#!/usr/bin/env bash
# bench.sh: how long the CPU runtime's kernel test suite takes, program by program, and the launch
# times of bench_reduce (64 blocks x 256 threads).
set -u
out=${CUDA_CPU_OUT:-build/cuda_cpu}
total=0
for t in test_runtime test_cublaslt test_wmma; do
    start=$(date +%s%N)
    "$out/$t" >/dev/null 2>&1 || { echo "$t failed; run it for details"; exit 1; }
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    total=$((total + ms))
    printf "%-16s %6d ms\n" "$t" "$ms"
done
printf "%-16s %6d ms\n" "suite total" "$total"
"$out/bench_reduce"
