# test/lib.sh: the set-up the shell tests share. A test sources it first thing after `set -u`:
#     . "$(dirname "$0")/lib.sh"          (from test/reliability/: "$(dirname "$0")/../lib.sh")
# and is then at the repository root with:
#   PY                 the python3 that has PyTorch and numpy: $PYTHON, else Debian's /usr/bin/python3
#                      (the pyenv python3 first on PATH has neither); the script's own `python3` calls
#                      run it too (a shell function)
#   dir                a fresh temporary dir, removed when the script exits (a script with more to
#                      clean up sets its own EXIT trap, which must remove "$dir" too)
#   failed             0; fail sets it to 1, and the script ends with `exit $failed`
#   pass NAME, fail NAME WHY
#                      the lines test/run_tests.sh counts: "PASS NAME", "FAIL NAME: WHY" (it totals
#                      them into "N passed, N failed"; a script that exits non-zero with no FAIL
#                      line counts as one failure)
#   require FILE...    each must be an executable (a built program): else one "FAIL setup" line
#                      naming it and its make target, exit 1
#   tiny_data LAYERS [VAL_TOKENS]
#                      gen_data's tiny model (LAYERS layers, 32 positions, 2 heads, vocabulary 256,
#                      64 channels, seed 1) in $dir/m.bin, 20000 train tokens in $dir/train.bin and
#                      VAL_TOKENS (2000) val tokens in $dir/val.bin; exit 1 with "FAIL setup" if not
#   expect_error NAME PATTERN ARGS...
#                      ./train_gpt2 ARGS must exit 1 with one stderr line matching PATTERN (grep -E);
#                      the check is named "$expect_prefix NAME" ($expect_prefix empty unless set)
#   have_mpi           true when mpirun and mpicc are present (the CPU runtime's NCCL is built where
#                      mpicc is); it then exports what OpenMPI needs to run as root and to start more
#                      ranks than cores
#   need_mpi NAME      have_mpi, or else the line "SKIP NAME: needs mpirun and mpicc" and exit 0 (a test
#                      that is all ranks)
#   gen                build/test/gen_data ($BUILD/test/gen_data where BUILD names another build dir)
# Skipping: a check that needs something absent prints "SKIP what: why" (run_tests.sh lists it) and
# the script goes on; a test that can do nothing without it prints that line and exits 0.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PY=${PYTHON:-/usr/bin/python3}
# The test's own python3 calls (the helpers that read JSON and compute what to expect) run $PY: a
# pyenv shim first on PATH costs 0.3-1 s a call, and test_sass_mix.sh alone spent 50 s of CPU on
# them (8 s with Debian's python3). Programs and scripts the tests run still find their own Python.
python3() { "$PY" "$@"; }
dir=$(mktemp -d) || { echo "FAIL setup: mktemp -d"; exit 1; }
trap 'rm -rf "$dir"' EXIT
failed=0
expect_prefix=""
gen=${BUILD:-build}/test/gen_data

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; failed=1; }

require() {
    local f
    for f in "$@"; do
        [ -x "$f" ] || { echo "FAIL setup: $f missing (make $f)"; exit 1; }
    done
}

tiny_data() {
    require "$gen"
    "$gen" model "$dir/m.bin" "$1" 32 2 256 64 1 && "$gen" shard "$dir/train.bin" 20000 256 2 &&
        "$gen" shard "$dir/val.bin" "${2:-2000}" 256 3 || { echo "FAIL setup: gen_data"; exit 1; }
}

expect_error() {
    local name=$expect_prefix$1 pattern=$2
    shift 2
    ./train_gpt2 "$@" > "$dir/err.out" 2> "$dir/err.txt"
    local rc=$? nlines
    nlines=$(wc -l < "$dir/err.txt")
    if [ $rc -eq 1 ] && [ "$nlines" -eq 1 ] && grep -qE -- "$pattern" "$dir/err.txt"; then
        pass "$name"
    else
        fail "$name" "exit $rc, stderr: $(head -c 300 "$dir/err.txt")"
    fi
}

have_mpi() {
    command -v mpirun > /dev/null 2>&1 && command -v mpicc > /dev/null 2>&1 || return 1
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
}

need_mpi() {
    have_mpi && return 0
    echo "SKIP $1: needs mpirun and mpicc (apt-get install openmpi-bin libopenmpi-dev)"
    exit 0
}
