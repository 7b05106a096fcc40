#!/usr/bin/env bash
# test_build_config.sh: the build notices a change of its configuration and rebuilds what depends on
# it (Makefile, "the build's configuration"), in a scratch BUILD dir so the tree's build is untouched:
#   - MPI lost (a PATH without mpicc/mpicxx) and found again: common/ranks.o is rebuilt each time,
#     without and then with MPI's symbols; the CPU runtime's objects are out of date each time;
#   - CUDA_HOME moved (the same toolkit through a symlink), nvcc lost (CUDA_HOME without bin/nvcc):
#     the CPU runtime's objects, or the nvcc-built programs, are out of date;
#   - OPT changed: host objects are out of date; changed back after a rebuild: out of date again;
#   - the same configuration twice: nothing is out of date (no rebuild without a change).
# "Out of date" is make -q's answer (exit 1); objects are made current with touch where compiling
# them would only cost time.
set -u
. "$(dirname "$0")/lib.sh"
B=$dir/build
mk() { make --no-print-directory -j1 BUILD="$B" "$@"; }
uptodate() { mk -q "$@" > /dev/null 2>&1; }

# A PATH without MPI's compiler wrappers: every other tool is still found.
nompi=$dir/nompi
mkdir -p "$nompi"
IFS=: read -r -a path_dirs <<< "$PATH"
for d in "${path_dirs[@]}"; do
    for f in "$d"/*; do
        name=${f##*/}
        case $name in mpicc|mpicxx|mpiCC|mpic++|mpirun|mpiexec) continue ;; esac
        [ -e "$nompi/$name" ] || ln -s "$f" "$nompi/$name" 2> /dev/null
    done
done

ranks=$B/common/ranks.o
has_mpi() { nm "$ranks" 2> /dev/null | grep -q ' U MPI_Init'; }
if ! command -v mpicc > /dev/null; then
    echo "SKIP build config: MPI (needs OpenMPI's mpicc)"
else
    mk "$ranks" > "$dir/m1.log" 2>&1 || fail "build ranks.o" "$(tail -n 3 "$dir/m1.log")"
    has_mpi && pass "with mpicc on PATH, common/ranks.o is built with MPI" || fail "ranks.o with MPI" "no MPI_Init in $ranks"
    uptodate "$ranks" && pass "the same configuration again: common/ranks.o is up to date" \
        || fail "no change, no rebuild" "make -q says $ranks is out of date"
    PATH=$nompi mk -q "$ranks" > /dev/null 2>&1
    [ $? = 1 ] && pass "MPI lost: common/ranks.o is out of date" || fail "MPI lost" "make -q says $ranks is up to date"
    PATH=$nompi mk "$ranks" > "$dir/m2.log" 2>&1 || fail "build ranks.o without MPI" "$(tail -n 3 "$dir/m2.log")"
    ! has_mpi && pass "MPI lost: common/ranks.o rebuilt without MPI" || fail "MPI lost: rebuilt" "$ranks still calls MPI_Init"
    PATH=$nompi uptodate "$ranks" && pass "MPI still absent: up to date" || fail "MPI still absent" "out of date again"
    mk "$ranks" > "$dir/m3.log" 2>&1
    has_mpi && pass "MPI found again: common/ranks.o rebuilt with MPI" || fail "MPI found again" "no MPI_Init in $ranks"
fi

# The CPU runtime's objects (every program built through the runtime depends on their library):
# made current by touch, then asked about under other configurations.
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/cuda_runtime.h" ]; then
    echo "SKIP build config: CUDA (needs the CUDA toolkit's headers at $cuda)"
else
    objs=$(mk -s --eval 'print-runtime-objects: ; @echo $(CUDA_CPU_LIB_OBJ)' print-runtime-objects 2> /dev/null)
    [ -n "$objs" ] || fail "CUDA_CPU_LIB_OBJ" "not found in make -p"
    obj=${objs%% *}
    mkdir -p "$(dirname "$obj")"
    touch $objs
    uptodate "$obj" && pass "the CPU runtime's objects, touched, are up to date" \
        || fail "runtime objects up to date" "make -q says $obj is out of date"
    ln -s "$cuda" "$dir/cuda"
    mk -q CUDA_HOME="$dir/cuda" "$obj" > /dev/null 2>&1
    [ $? = 1 ] && pass "CUDA_HOME changed: the CPU runtime's objects are out of date" \
        || fail "CUDA_HOME changed" "make -q says $obj is up to date"
    touch $objs
    uptodate CUDA_HOME="$dir/cuda" "$obj" && pass "CUDA_HOME unchanged since: up to date" || fail "CUDA_HOME kept" "out of date"
    if command -v mpicxx > /dev/null; then
        PATH=$nompi mk -q CUDA_HOME="$dir/cuda" "$obj" > /dev/null 2>&1
        [ $? = 1 ] && pass "MPI lost: the CPU runtime's objects are out of date" || fail "MPI lost (runtime)" "up to date"
    fi
fi

# nvcc lost: a CUDA_HOME with the headers but no bin/nvcc. The nvcc-built programs (here the host
# AdamW benchmark, made current by touch) are out of date.
if [ -x "$cuda/bin/nvcc" ]; then
    bench=$B/dev/bench_adamw_host_fp16
    mkdir -p "$B/dev" "$dir/cuda_nonvcc"
    ln -s "$cuda/include" "$dir/cuda_nonvcc/include"
    mk -q "$bench" > /dev/null 2>&1
    touch "$bench"
    uptodate "$bench" && pass "an nvcc program, touched, is up to date" || fail "nvcc program up to date" "out of date"
    mk -q GPU_ARCH=80 "$bench" > /dev/null 2>&1
    [ $? = 1 ] && pass "GPU_ARCH changed: the nvcc programs are out of date" || fail "GPU_ARCH changed" "up to date"
    touch "$bench"
    mk -q GPU_ARCH=80 CUDA_HOME="$dir/cuda_nonvcc" train > /dev/null 2>&1
    grep -q 'nvcc: .*| none |' "$B/config/nvcc.stamp" && pass "nvcc lost: the stamp says so (none)" \
        || fail "nvcc lost" "$(cat "$B/config/nvcc.stamp")"
else
    echo "SKIP build config: nvcc (not at $cuda/bin/nvcc)"
fi

# OPT: host objects.
util=$B/common/util.o
mk "$util" > "$dir/u1.log" 2>&1 || fail "build util.o" "$(tail -n 3 "$dir/u1.log")"
uptodate "$util" && pass "host object up to date after its build" || fail "host object up to date" "out of date"
mk -q OPT=-O1 "$util" > /dev/null 2>&1
[ $? = 1 ] && pass "OPT changed: host objects are out of date" || fail "OPT changed" "make -q says $util is up to date"
mk OPT=-O1 "$util" > /dev/null 2>&1
mk -q "$util" > /dev/null 2>&1
[ $? = 1 ] && pass "OPT changed back: out of date again" || fail "OPT changed back" "up to date"
exit $failed
