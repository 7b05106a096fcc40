#!/usr/bin/env bash
# test_compile_dir.sh: a program rewritten by cu2cpu.pl from inside its own directory and compiled
# from another (as dev/module.mk builds llm.c: its headers must be the program's own) names its files
# as the user has them: with cu2cpu.pl's --compile-dir its #line paths are absolute, so the runtime's
# alarm (addr2line's line, here for a kernel in a header) and the compiler's messages name the real
# file. And `make cuda-cpu-flags`, the lines that build someone else's program, work from any directory.
set -u
cd "$(dirname "$0")/../.."
repo=$(pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
flags=$(make -s --no-print-directory cuda-cpu-flags) || { echo "FAIL compile_dir: make cuda-cpu-flags"; exit 1; }
compile=$(echo "$flags" | sed -n 1p)
link=$(echo "$flags" | sed -n 2p)
libs=$(echo "$flags" | sed -n 3p)
mkdir -p "$dir/proj/inc" "$dir/build"
cat > "$dir/proj/inc/oob.cuh" << 'CU'
// a kernel that writes one element past its buffer (line 3)
__global__ void past_the_end_kernel(float* d, int n) {
    d[threadIdx.x + 1] = (float)n;
}
CU
cat > "$dir/proj/main.cu" << 'CU'
#include <cstdio>
#include "oob.cuh"
int main() {
    float* d;
    cudaMalloc(&d, 32 * sizeof(float));
    past_the_end_kernel<<<1, 32>>>(d, 32);
    cudaDeviceSynchronize();
    return 0;
}
CU
# rewritten inside proj/, compiled from build/ (another directory), run from the repository
(cd "$dir/proj" && perl "$repo/test/cuda_cpu/cu2cpu.pl" -o "$dir/build/main.gen" --prune --compile-dir "$dir/build" \
    -I inc main.cu) || { echo "FAIL compile_dir: cu2cpu.pl"; exit 1; }
(cd "$dir/build" && $compile -w -I main.gen/inc -I ../proj/inc -c main.gen/main.cu -o main.o && $link main.o $libs -o main) > "$dir/build.log" 2>&1 || { echo "FAIL compile_dir: build"; cat "$dir/build.log"; exit 1; }
"$dir/build/main" > "$dir/run.out" 2>&1
rc=$?
want="$dir/proj/inc/oob.cuh:3"
if [ $rc != 0 ] && grep -q "past_the_end_kernel" "$dir/run.out" && grep -qF "$want" "$dir/run.out"; then
    echo "PASS compile_dir_alarm_names_the_source_the_user_has"
else
    echo "FAIL compile_dir_alarm_names_the_source_the_user_has: exit $rc, wanted $want in: $(head -c 600 "$dir/run.out")"
    status=1
fi
# the compiler's messages too: an error in the header names it
sed -i 's/(float)n;/(float)n  /' "$dir/proj/inc/oob.cuh"
(cd "$dir/proj" && perl "$repo/test/cuda_cpu/cu2cpu.pl" -o "$dir/build/main.gen" --prune --compile-dir "$dir/build" -I inc main.cu) &&
    (cd "$dir/build" && $compile -w -I main.gen/inc -c main.gen/main.cu -o main.o) > "$dir/err.log" 2>&1
if grep -q "^$dir/proj/inc/oob.cuh:3:.*error" "$dir/err.log"; then
    echo "PASS compile_dir_compiler_error_names_the_source"
else
    echo "FAIL compile_dir_compiler_error_names_the_source: $(head -c 600 "$dir/err.log")"
    status=1
fi
exit $status
