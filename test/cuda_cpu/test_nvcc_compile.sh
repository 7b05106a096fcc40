#!/usr/bin/env bash
# test_nvcc_compile.sh: every .cu of the project stays plain CUDA that nvcc compiles for sm_90
# (compile only; nothing runs without a GPU): the runtime's own tests, every kernel test and the
# GPU engine's contract test (which includes train_gpt2.cu) in each precision, and the kernel
# benchmark. A compile is skipped when nothing it could read changed since its last success: the
# cache key covers the source, every project header (.h, .cuh), the defines and nvcc's version.
set -u
cd "$(dirname "$0")/../.."
nvcc=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
if [ ! -x "$nvcc" ]; then
    echo "SKIP nvcc_compile: no nvcc (CUDA toolkit) on this machine"
    exit 0
fi
out=${CUDA_CPU_OUT:-build/cuda_cpu}/nvcc
mkdir -p "$out"
mpi_flags=$(mpicxx -showme:compile 2>/dev/null || true)
# Everything a compile may include: one hash over all of it (a header edit recompiles all).
tree_key=$( (find kernels common reference test dev -name '*.h' -o -name '*.cuh' | sort | xargs cat; cat train_gpt2.cu;
             "$nvcc" --version | tail -n 1) | sha1sum | cut -c1-16)

jobs=()  # "name|source|defines"
for src in test/cuda_cpu/*.cu; do jobs+=("$(basename "$src" .cu)|$src|"); done
for src in kernels/test_*.cu test/test_gpu_engine.cu; do
    for p in FP32 FP16 BF16; do jobs+=("$(basename "$src" .cu)_$p|$src|-DENABLE_$p"); done
done
for p in FP16 BF16; do jobs+=("bench_kernels_$p|dev/cuda/bench_kernels.cu|-DENABLE_$p"); done

pids=()
names=()
for job in "${jobs[@]}"; do
    IFS='|' read -r name src defs <<< "$job"
    if [ "$name" = test_nccl ] && [ -z "$mpi_flags" ]; then
        echo "SKIP nvcc_compiles_$name: needs mpi.h (apt-get install libopenmpi-dev)"
        continue
    fi
    key=$( (echo "$tree_key $defs"; cat "$src") | sha1sum | cut -c1-16)
    if [ ! -f "$out/$name.$key.ok" ]; then
        rm -f "$out/$name".*.ok
        ( "$nvcc" -arch=sm_90 -std=c++17 $defs -I. -Itest -Ireference -Icommon -Ikernels -Idev/cuda $mpi_flags \
              -c "$src" -o "$out/$name.o" > "$out/$name.log" 2>&1 && touch "$out/$name.$key.ok" ) &
        pids+=($!)
        # two at a time: CI has two cores
        if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
    names+=("$name:$key:$src:$defs")
done
wait
status=0
for nk in "${names[@]}"; do
    IFS=':' read -r name key src defs <<< "$nk"
    if [ -f "$out/$name.$key.ok" ]; then
        echo "PASS nvcc_compiles_$name"
    else
        echo "FAIL nvcc_compiles_$name: nvcc -arch=sm_90 $defs -c $src failed:"
        grep -m 8 -E "error|Error" "$out/$name.log" | sed 's/^/  /'
        status=1
    fi
done
exit $status
