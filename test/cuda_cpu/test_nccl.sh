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
# A send whose receive never comes would hang a GPU: the runtime names it after NCCL_CPU_P2P_TIMEOUT;
# a receive of another count than its send is named when it arrives.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for mistake in "unmatched:ncclSend of 64 ncclFloat32 .* from rank 0 to rank 1 found no matching ncclRecv on rank 1 within 2 s" \
               "count:ncclRecv of 32 ncclFloat32 .* on rank 1 from rank 0: the matching ncclSend on rank 0 sends 64 ncclFloat32"; do
    name=${mistake%%:*}
    pattern=${mistake#*:}
    timeout 120 mpirun --oversubscribe -np 2 -x NCCL_CPU_P2P_TIMEOUT=2 "$bin" "$name" > "$dir/$name.out" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qE "$pattern" "$dir/$name.out"; then
        echo "PASS nccl_p2p_mistake_$name: $(grep -m1 -oE "$pattern" "$dir/$name.out" | cut -c1-120)..."
    else
        echo "FAIL nccl_p2p_mistake_$name: exit $rc: $(grep -m1 'cuda_cpu\|FAIL' "$dir/$name.out" | cut -c1-300)"
        status=1
    fi
done
exit $status
