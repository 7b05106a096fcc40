#!/usr/bin/env bash
# preemptible.sh: runs a training command so that a scheduler's SIGTERM (or SIGINT, SIGHUP) ends it
# with a checkpoint, however long its steps are:
#
#   scripts/preemptible.sh mpirun --mca odls_base_sigkill_timeout 20 -np 8 ./train_gpt2 ... -o out/run
#   (or srun --mpi=pmix ..., or ./train_gpt2 ... alone)
#
# Why: mpirun (OpenMPI 4) answers its own SIGTERM by sending the ranks SIGCONT, waiting its kill
# delay (odls_base_sigkill_timeout, 1 s by default), sending SIGTERM, waiting the delay again and
# sending SIGKILL: with the default the ranks have one second, which no checkpoint of a large model
# fits in. SIGUSR1 and SIGUSR2, however, mpirun forwards to every rank at once and does not follow
# with a kill. So this script runs the command in the background and turns a stop signal into
# SIGUSR1 for it: the trainer (SIGUSR1 is a stop request like SIGTERM) abandons the step under way
# at the next micro-step, writes a checkpoint of the last completed step and exits; mpirun then ends
# with the ranks. The script exits with the command's status.
#
# Give mpirun a kill delay longer than a micro-step and a checkpoint take (the recipes give
# `--mca odls_base_sigkill_timeout 20`): a scheduler that signals every process of the job (Slurm's
# scancel and time limit do) reaches the ranks directly (they stop at once) and mpirun too, which
# would kill them 2 s later by default (40 s with 20). A SIGTERM sent to mpirun alone reaches the
# ranks only after that delay, and they then have as long again. The cost: an error on one rank
# takes two delays to end the others (mpirun's abort goes through the same sequence).
# Several ranks that stopped exit 0 (mpirun would take a non-zero status for a failure and abort the
# finished job through both delays): this script then exits with 128 + the signal it received.
#
# srun (Slurm) is the same: a SIGTERM to srun itself makes it kill the tasks at once ("forcing job
# termination"), but it forwards SIGUSR1: scripts/preemptible.sh srun --mpi=pmix ./train_gpt2 ...
# A job Slurm cancels or times out has every task signalled directly, with KillWait (30 s by
# default) before SIGKILL.
set -u
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
# Job control on: the command runs in a process group of its own, so a signal to this script's group
# (Ctrl-C at a terminal, GNU timeout) reaches this script alone and mpirun gets only the SIGUSR1 (a
# SIGTERM of its own would start its kill sequence, after which it forwards nothing). Its stdin is
# /dev/null: a background group reading a terminal would be stopped.
set -m
"$@" < /dev/null &
child=$!
stopped_by=0
stop() { stopped_by=$1; kill -USR1 "$child" 2> /dev/null; }
trap 'stop 15' TERM
trap 'stop 2' INT
trap 'stop 1' HUP
# wait returns early when a trapped signal arrives: wait again until the command has ended.
status=0
while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2> /dev/null || break
done
# The ranks of a stopped run exit 0 (see above): a stopped run still ends with 128 + the signal, as
# the trainer alone does, so a requeue loop can tell.
[ $status = 0 ] && [ $stopped_by != 0 ] && status=$((128 + stopped_by))
exit $status
