#!/usr/bin/env bash
# test_nvcc_compile.sh: the CPU runtime's own .cu files must stay plain CUDA: each one also compiles
# with nvcc for sm_90 (compile only; nothing runs without a GPU). A file whose text, test/test.h and
# nvcc are unchanged since its last good compile is not compiled again (nvcc takes ~10 s a file).
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
version=$("$nvcc" --version | tail -n 1)
pids=()
names=()
for src in test/cuda_cpu/*.cu; do
    name=$(basename "$src" .cu)
    if [ "$name" = test_nccl ] && [ -z "$mpi_flags" ]; then
        echo "SKIP nvcc_compiles_$name: needs mpi.h (apt-get install libopenmpi-dev)"
        continue
    fi
    key=$( (cat "$src" test/test.h; echo "$version") | sha1sum | cut -c1-16)
    rm -f "$out/$name.log"
    if [ ! -f "$out/$name.$key.ok" ]; then
        ( "$nvcc" -arch=sm_90 -std=c++17 -Itest -Ireference -Icommon $mpi_flags -c "$src" -o "$out/$name.o" >"$out/$name.log" 2>&1 &&
          rm -f "$out/$name".*.ok && touch "$out/$name.$key.ok" ) &
        pids+=($!)
        # two at a time: CI has two cores
        if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
    names+=("$name:$key")
done
wait
status=0
for nk in "${names[@]}"; do
    name=${nk%%:*}
    key=${nk#*:}
    if [ -f "$out/$name.$key.ok" ]; then
        echo "PASS nvcc_compiles_$name"
    else
        echo "FAIL nvcc_compiles_$name: nvcc -arch=sm_90 -c test/cuda_cpu/$name.cu failed:"
        grep -m 8 -E "error|Error" "$out/$name.log" | sed 's/^/  /'
        status=1
    fi
done
exit $status
