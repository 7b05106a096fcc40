#!/usr/bin/env bash
# test_cuda_libs.sh: the nvcc-built ./train_gpt2 loads the CUDA driver, cuBLASLt and NCCL when its
# GPU engine starts (cuda_libs.cuh), not when the process does. ldd lists neither library; --help
# and a flag error load none of the three; a missing driver, a missing cuBLASLt and (on 2 ranks
# under mpirun) a missing NCCL each give the one "engine: no usable GPU" line naming it, and the C
# engine takes the run. A missing library is made by a copy of the binary whose soname string is
# turned into one of the same length that exists nowhere (libcublasLt.so.13 -> libcublasLt.so.xx);
# a driver that loads but has no GPU is the toolkit's stub libcuda.so, put first on LD_LIBRARY_PATH.
# The C-only build (no nvcc at make time) has nothing to load: SKIP.
set -u
. "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1

require ./train_gpt2
if ! grep -qa 'libcublasLt\.so\.' ./train_gpt2; then
    echo "SKIP cuda_libs: ./train_gpt2 is the C-only build (no nvcc at make time): it loads no CUDA library"
    exit 0
fi

# --- nothing at process start ----------------------------------------------------------------
libs=$(ldd ./train_gpt2 2>&1 | grep -E 'libcublasLt|libnccl|libcuda\.')
[ -z "$libs" ] && pass "ldd ./train_gpt2 lists no libcublasLt, libnccl or libcuda" \
    || fail "ldd ./train_gpt2" "links $(echo "$libs" | tr '\n' ' ')"
expect_error "a flag error: one line, exit 1" "unknown flag '--nosuchflag'" --nosuchflag
# LD_DEBUG=files: every library the loader opens, at start or by dlopen, one line each.
loaded() {  # the CUDA libraries the run whose LD_DEBUG_OUTPUT prefix is $1 opened, one line
    cat "$1".* 2> /dev/null | grep -oE 'file=(libcublasLt|libnccl|libcuda)[^ ]*' | sort -u | tr '\n' ' '
}
LD_DEBUG=files LD_DEBUG_OUTPUT="$dir/ld_help" ./train_gpt2 --help > /dev/null 2>&1
rc=$?
LD_DEBUG=files LD_DEBUG_OUTPUT="$dir/ld_flag" ./train_gpt2 --nosuchflag > /dev/null 2>&1
[ $rc = 0 ] && [ -z "$(loaded "$dir/ld_help")$(loaded "$dir/ld_flag")" ] \
    && pass "--help and a flag error open no CUDA library" \
    || fail "--help and a flag error" "--help exit $rc; opened: $(loaded "$dir/ld_help") $(loaded "$dir/ld_flag")"

# --- one rank: each missing piece named, then the C engine trains ----------------------------
tiny_data 1
run=(-e "$dir/m.bin" -i "$dir/train.bin" -j "$dir/val.bin" -t 32 -b 2 -x 1 -v 0 -s 0 -o "")
# soname_patched SONAME OUT: a copy of ./train_gpt2 whose string SONAME (NUL-ended) has its version
# digits turned into x's: the same length, a library no machine has.
soname_patched() {
    local so=$1 out=$2 fake
    fake=$(echo "$1" | sed 's/[0-9]/x/g')
    SO=$so FAKE=$fake perl -0777 -pe 's/\Q$ENV{SO}\E\0/$ENV{FAKE}\0/g' ./train_gpt2 > "$out" && chmod +x "$out" \
        && grep -qa "$fake" "$out" && ! grep -qaF "$so" "$out"
}
# engine_line NAME PATTERN ENV... -- BINARY: one step of the tiny model, env given ENV (NAME=VALUE,
# -u NAME); its engine line must match PATTERN and the C engine must then train the step (exit 0).
engine_line() {
    local name=$1 pattern=$2 envs=()
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env ${envs[@]+"${envs[@]}"} timeout 120 "$1" "${run[@]}" > "$dir/$name.out" 2>&1
    local rc=$? line
    line=$(grep '^engine: no usable GPU' "$dir/$name.out")
    if [ $rc = 0 ] && echo "$line" | grep -qE -- "$pattern" && grep -q '^step *1/1 ' "$dir/$name.out"; then
        pass "$name: $line; the C engine trains"
    else
        fail "$name" "exit $rc, engine line '$line': $(tail -n 2 "$dir/$name.out")"
    fi
}

cublaslt=$(grep -aoE 'libcublasLt\.so\.[0-9]+' ./train_gpt2 | head -n 1)
nccl=$(grep -aoE 'libnccl\.so\.[0-9]+' ./train_gpt2 | head -n 1)
if /sbin/ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 '; then
    echo "SKIP no driver: this machine has one (libcuda.so.1 in ldconfig's cache)"
else
    engine_line "no CUDA driver" "^engine: no usable GPU \(cannot load the CUDA driver \(libcuda\.so\.1\): " \
        -u LD_LIBRARY_PATH -- ./train_gpt2
fi

stub=${CUDA_HOME:-/usr/local/cuda}/lib64/stubs/libcuda.so
if [ ! -f "$stub" ]; then
    echo "SKIP missing cuBLASLt, NCCL: no stub driver at $stub (set CUDA_HOME)"
    exit $failed
fi
mkdir -p "$dir/stub" && ln -s "$stub" "$dir/stub/libcuda.so.1"
stub_path=$dir/stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # where CUDA's libraries are found, if there
# The stub loads and reports no GPU: cuBLASLt (and only it: one rank) loaded, then the device
# query gives the stub's error.
engine_line "stub driver" "^engine: no usable GPU \(cudaGetDeviceCount: " LD_LIBRARY_PATH="$stub_path" \
    LD_DEBUG=files LD_DEBUG_OUTPUT="$dir/ld_stub" -- ./train_gpt2
opened=$(loaded "$dir/ld_stub")
echo "$opened" | grep -q "file=$cublaslt" && ! echo "$opened" | grep -q 'file=libnccl' \
    && pass "stub driver, one rank: $cublaslt opened, NCCL not ($opened)" \
    || fail "stub driver, one rank: what was opened" "$opened"
if [ -n "$cublaslt" ] && soname_patched "$cublaslt" "$dir/no_cublaslt"; then
    engine_line "no cuBLASLt" "^engine: no usable GPU \(cannot load cuBLASLt \(libcublasLt\.so\.x+\): " \
        LD_LIBRARY_PATH="$stub_path" -- "$dir/no_cublaslt"
else
    fail "no cuBLASLt" "no copy of ./train_gpt2 without its cuBLASLt soname ('$cublaslt')"
fi

# --- two ranks under mpirun: NCCL ------------------------------------------------------------
# The C engine is one process: after the GPU engine's refusal every rank stops, exit 1. The first
# rank to stop ends the others (MPI_Abort), which may not have printed their lines yet: each check
# reads the lines of the ranks that printed (one at least), and each of those must say the same.
if ! have_mpi; then
    echo "SKIP missing NCCL: needs mpirun and mpicc (apt-get install openmpi-bin libopenmpi-dev)"
elif [ -z "$nccl" ]; then
    echo "SKIP missing NCCL: this trainer was built without NCCL (no nccl.h at make time)"
elif ! soname_patched "$nccl" "$dir/no_nccl"; then
    fail "no NCCL" "no copy of ./train_gpt2 without its NCCL soname ('$nccl')"
else
    # ranks OUT NAME PATTERN BINARY ARGS...: 2 ranks under mpirun (output in $dir/OUT.out), the stub
    # driver first on their library path: exit 1, and each error line printed (rank 0's, rank 1's)
    # must match PATTERN.
    ranks() {
        local out=$dir/$1.out name=$2 pattern=$3 rc lines
        shift 3
        LD_LIBRARY_PATH="$stub_path" timeout 120 mpirun --allow-run-as-root -np 2 -x LD_LIBRARY_PATH "$@" "${run[@]}" \
            > "$out" 2>&1
        rc=$?
        lines=$(grep -E '^error: rank [0-9]+: ' "$out")
        if [ $rc = 1 ] && [ -n "$lines" ] && ! echo "$lines" | grep -vqE -- "$pattern"; then
            pass "$name: exit 1; $(echo "$lines" | wc -l) rank(s) printed, each: $(echo "$lines" | head -n 1 | cut -d: -f3-)"
        else
            fail "$name" "exit $rc: $(grep -E '^(engine|error)' "$out" | head -c 400)"
        fi
    }
    ranks nccl_gpu "no NCCL, 2 ranks, --engine gpu" \
        "^error: rank [01]: flag --engine gpu: no usable GPU: cannot load NCCL \(libnccl\.so\.x+\): " \
        "$dir/no_nccl" --engine gpu
    # The default engine (auto): the C engine takes the run and refuses the 2 ranks. The engine line
    # is rank 0's alone (the others' output is silenced), and is cut off when rank 1 stops first.
    ranks nccl_auto "no NCCL, 2 ranks: the C engine refuses them" \
        "^error: rank [01]: the C reference engine cannot run this configuration: the C reference engine is one process .*; ./train_gpt2_emu \(make emu\) runs the GPU engine on this CPU" \
        "$dir/no_nccl"
    line=$(grep '^engine: ' "$dir/nccl_auto.out")
    if [ -n "$line" ]; then
        echo "$line" | grep -qE '^engine: no usable GPU \(cannot load NCCL \(libnccl\.so\.x+\): ' \
            && pass "no NCCL, 2 ranks: rank 0's engine line names NCCL" || fail "no NCCL, 2 ranks: rank 0's engine line" "$line"
    fi
    # With NCCL there (and cuBLASLt), the device query is what fails.
    ranks stub_gpu "stub driver, 2 ranks, --engine gpu" "^error: rank [01]: flag --engine gpu: no usable GPU: cudaGetDeviceCount: " \
        ./train_gpt2 --engine gpu
fi
exit $failed
