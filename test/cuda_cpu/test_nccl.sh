#!/usr/bin/env bash
# test_nccl.sh: runs the NCCL-over-MPI test with 2 and 3 ranks on this one machine.
set -u
bin=${BUILD:-build}/cuda_cpu/test_nccl
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$bin" ]; then
    echo "SKIP nccl_mpi: needs mpirun and $bin (apt-get install openmpi-bin libopenmpi-dev, then make)"
    exit 0
fi
# Root is refused by default; --oversubscribe allows more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
status=0
for np in 2 3; do
    timeout 120 mpirun --oversubscribe -np "$np" "$bin" || { echo "FAIL nccl_mpi_np$np: mpirun exited with status $?"; status=1; }
done
exit $status
