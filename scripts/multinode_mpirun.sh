#!/usr/bin/env bash
# multinode_mpirun.sh: one training run over several machines, one process per GPU, started by
# OpenMPI's mpirun from a hostfile. Every argument after the first two goes to ./train_gpt2:
#
#   scripts/multinode_mpirun.sh hosts 16 -e d48 -b 4 -t 1024 -d 524288 -z 1 -r 1 -o /shared/out/d48 -y 1
#
# hosts: one line per machine and its GPUs, as mpirun reads it:
#   node1 slots=8
#   node2 slots=8
# What every machine needs: the same build of ./train_gpt2 at the same path (the directory this is
# started from), the same data paths, and one output dir they all see (a shared file system: each
# rank writes its part of a checkpoint there; the ranks check at start-up that it is one dir);
# password-less ssh from this machine to the others (mpirun starts the ranks over it).
# The ranks bind their GPUs by their place on their machine (rank 3 of node2: its GPU 3).
# NCCL finds the network itself; to choose, export NCCL_SOCKET_IFNAME (e.g. eth0) or NCCL_IB_HCA
# before this script: every NCCL_* variable set here is passed on to every rank.
#
# Without MPI on the machines: the same run with llm.c's -pi tcp, one command per process. Rank 0's
# machine listens (port 12345 unless -ps says host:port); on each machine n (0, 1, ...) and GPU g:
#   ./train_gpt2 ... -pi tcp -ps node1 -pn 16 -pg 8 -pr $((8 * n + g))
# or, with a directory every machine sees instead of an address: -pi fs -pf /shared/rendezvous.
# A rank that fails or is killed ends the others (exit 1, naming it). Under Slurm:
# scripts/slurm_train.sbatch.
set -eu
if [ $# -lt 3 ]; then
    echo "usage: $0 HOSTFILE NUM_PROCESSES TRAIN_GPT2_FLAGS..." >&2
    exit 1
fi
hostfile=$1
np=$2
shift 2
[ -f "$hostfile" ] || { echo "error: hostfile $hostfile does not exist" >&2; exit 1; }
# Environment passed to every rank: the library path, and any NCCL_* setting.
pass_env=(-x LD_LIBRARY_PATH -x PATH)
for v in $(compgen -e | grep '^NCCL_' || true); do pass_env+=(-x "$v"); done
# scripts/preemptible.sh turns a scheduler's SIGTERM into a checkpoint (see its first lines); the
# kill delay gives a checkpoint the time it needs.
cd "$(dirname "$0")/.."
exec scripts/preemptible.sh mpirun --mca odls_base_sigkill_timeout 20 --hostfile "$hostfile" -np "$np" \
    --map-by slot --bind-to none "${pass_env[@]}" ./train_gpt2 "$@"
