#!/usr/bin/env bash
# test_zero.sh: the GPU engine over 2 and 3 ranks (build/test/test_zero_*, under mpirun, NCCL over
# MPI through the CPU runtime): ZeRO stages 0, 1, 2 equal one process; one rank's overflow skips
# the step on every rank.
set -u
cd "$(dirname "$0")/.."
if ! command -v mpirun > /dev/null 2>&1; then
    echo "SKIP zero: needs mpirun (apt-get install openmpi-bin libopenmpi-dev)"
    exit 0
fi
# Root is refused by default; --oversubscribe allows more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# One worker thread a rank: the ranks share two cores.
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
status=0
# FP32 at 2 and 3 ranks (the model's parameter count is odd: shards are padded); FP16 at 2 ranks
# for loss scaling across ranks.
for run in fp32:2 fp32:3 fp16:2; do
    p=${run%:*}
    np=${run#*:}
    timeout 300 mpirun --oversubscribe -np "$np" "build/test/test_zero_$p" || {
        echo "FAIL zero_${p}_np$np: mpirun exited with status $?"; status=1; }
done
exit $status
