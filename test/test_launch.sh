#!/usr/bin/env bash
# test_launch.sh: ranks without mpirun (llm.c's -pi tcp|fs with -pn/-pr, and Slurm's variables).
# Two processes started here, each alone, train the emulated GPU engine (build/emu/train_gpt2_emu_fp32,
# NCCL over the ranks' host transport) and equal mpirun's run of the same flags bit for bit (losses
# and the model file): through -pi tcp at -z 1, through -pi fs at -z 2 (the rendezvous file removed
# afterwards), and with SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID set as srun sets them (-pi tcp, no
# -pn/-pr). Then bad input (each: exit 1, one line naming the flag or variable), a rank killed in
# the middle of a run (the others exit 1 naming it), ranks given different flags, and the C engine
# (one process) refused on both ranks.
set -u
. "$(dirname "$0")/lib.sh"
# One worker thread a process: the ranks share two cores.
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
emu=build/emu/train_gpt2_emu_fp32
[ -x "$emu" ] || { echo "SKIP launch: $emu not built (needs the CPU runtime's NCCL, built where MPI's mpicxx is)"; exit 0; }
$gen model "$dir/model.bin" 2 64 2 301 64 1 && $gen shard "$dir/train.bin" 40000 301 2 && $gen shard "$dir/val.bin" 4000 301 3 \
    || { echo "FAIL launch: gen_data"; exit 1; }
common=(-e "$dir/model.bin" -i "$dir/train.bin" -j "$dir/val.bin" -t 32 -v 3 -m 2 -s 0 -l 3e-3 -u 2 -sf 1 -b 3 -x 4)
# A port nothing listens on now (the kernel's pick), for each run that listens.
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
losses() { grep -o '"train_loss": [^,]*\|"val_loss": [^}]*' "$1/log.jsonl"; }
# A hang is a failure, not a stuck test: every process has a bound far above its work.
export RANKS_TIMEOUT=60

# ranks NAME N [VAR=VALUE ...] -- ARGS...: N processes of $emu (rank r given -pr r unless the
# variables contain RANK_FROM_ENV=1, then SLURM_PROCID/SLURM_LOCALID=r), waits for all; their exit
# statuses in $dir/NAME.rc, outputs in $dir/NAME.rank<r>.out.
ranks() {
    local name=$1 n=$2 env=() r rcs=() p
    shift 2
    while [ "$1" != "--" ]; do env+=("$1"); shift; done
    shift
    local procs=()
    for ((r = 0; r < n; r++)); do
        if [[ " ${env[*]} " == *" RANK_FROM_ENV=1 "* ]]; then
            env "${env[@]}" SLURM_PROCID=$r SLURM_LOCALID=$r timeout 120 $emu "$@" > "$dir/$name.rank$r.out" 2>&1 &
        else
            env "${env[@]}" timeout 120 $emu "$@" -pr $r > "$dir/$name.rank$r.out" 2>&1 &
        fi
        procs+=($!)
        pids+=($!)
    done
    for p in "${procs[@]}"; do wait "$p"; rcs+=($?); done
    echo "${rcs[*]}" > "$dir/$name.rc"
}

# --- the reference: mpirun, the same flags ------------------------------------------------------
have_mpirun=0
command -v mpirun > /dev/null 2>&1 && have_mpirun=1
for z in 1 2; do
    if [ $have_mpirun = 1 ]; then
        timeout 120 mpirun --oversubscribe -np 2 $emu "${common[@]}" -n 4 -z $z -o "$dir/mpi$z" > "$dir/mpi$z.out" 2>&1 \
            || fail "mpirun -np 2 -z $z (the reference)" "$(tail -n 2 "$dir/mpi$z.out")"
    fi
done

# equal NAME WHAT Z: run NAME's losses and model file equal mpirun's at -z Z bit for bit (or, with
# no mpirun here, rank 0 logged every step).
equal() {
    local name=$1 what=$2 z=$3 run=$dir/$1
    if [ "$(cat "$dir/$name.rc")" != "0 0" ]; then
        fail "$what" "exit statuses $(cat "$dir/$name.rc"): $(tail -n 2 "$dir/$name.rank0.out" "$dir/$name.rank1.out" | tr '\n' ' ')"
        return
    fi
    [ "$(losses "$run" | grep -c train_loss)" = 4 ] || { fail "$what" "$(losses "$run" | grep -c train_loss) train losses logged, expected 4"; return; }
    if [ $have_mpirun = 0 ]; then
        pass "$what: 2 ranks trained 4 steps (no mpirun here to compare with)"
        return
    fi
    if [ "$(losses "$run")" = "$(losses "$dir/mpi$z")" ] && cmp -s "$run/model_00000004.bin" "$dir/mpi$z/model_00000004.bin"; then
        pass "$what: losses and the model file after 4 steps equal mpirun -np 2 -z $z bit for bit"
    else
        fail "$what" "differs from mpirun -np 2 -z $z: $(losses "$run" | tr '\n' ' ') vs $(losses "$dir/mpi$z" | tr '\n' ' ')"
    fi
}

port=$(free_port)
ranks tcp 2 -- "${common[@]}" -n 4 -z 1 -o "$dir/tcp" -pi tcp -pn 2 -ps "127.0.0.1:$port"
equal tcp "-pi tcp -pn 2 -z 1 (two processes, no mpirun)" 1
[ "$(grep -cE '^step +[0-9]' "$dir/tcp.rank0.out")" = 4 ] && [ "$(grep -cE '^step +[0-9]' "$dir/tcp.rank1.out")" = 0 ] \
    && pass "-pi tcp: rank 0 alone prints" || fail "-pi tcp: rank 0 alone prints" "$(grep -cE '^step' "$dir/tcp.rank1.out") step lines on rank 1"

mkdir "$dir/shared"
ranks fs 2 -- "${common[@]}" -n 4 -z 2 -o "$dir/fs" -pm fs -pn 2 -pf "$dir/shared"
equal fs "-pm fs -pn 2 -z 2 (two processes, rank 0's address through a directory)" 2
[ -z "$(ls -A "$dir/shared")" ] && pass "-pi fs: the rendezvous file is removed" || fail "-pi fs: rendezvous left" "$(ls -A "$dir/shared")"

port=$(free_port)
ranks slurm 2 RANK_FROM_ENV=1 SLURM_NTASKS=2 -- "${common[@]}" -n 4 -z 1 -o "$dir/slurm" -pi tcp -ps "localhost:$port"
equal slurm "Slurm's variables (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) with -pi tcp, no -pn/-pr" 1

# --- bad input: exit 1, one line naming the flag or variable ---------------------------------------
# expect_error NAME PATTERN [VAR=VALUE ...] -- ARGS...: one process.
expect_error() {
    local name=$1 pattern=$2 env=()
    shift 2
    while [ "$1" != "--" ]; do env+=("$1"); shift; done
    shift
    env "${env[@]}" timeout 60 $emu "${common[@]}" -o "" "$@" > "$dir/err.out" 2> "$dir/err.txt"
    local rc=$? nlines
    nlines=$(wc -l < "$dir/err.txt")
    if [ $rc -eq 1 ] && [ "$nlines" -eq 1 ] && grep -qE "$pattern" "$dir/err.txt"; then
        pass "$name"
    else
        fail "$name" "exit $rc, $nlines lines: $(head -c 300 "$dir/err.txt")"
    fi
}
port=$(free_port)
expect_error "-pr 2 with -pn 2" "flag -pr \(--process-rank\) is 2, expected 0 to 1" -- -pi tcp -pn 2 -pr 2 -ps "127.0.0.1:$port"
expect_error "-pi tcp without -ps" "flag -pi tcp needs -ps \(--nccl-server\)" -- -pi tcp -pn 2 -pr 1
expect_error "-pi fs without -pf" "flag -pi fs needs -pf \(--nccl-fs-path\)" -- -pi fs -pn 2 -pr 1
expect_error "-pf not a directory" "flag -pf \(--nccl-fs-path\) $dir/none: not a directory" -- -pi fs -pn 2 -pf "$dir/none"
expect_error "-ps with a bad port" "flag -ps \(--nccl-server\) '127.0.0.1:70000': the port must be 1 to 65535" -- -pi tcp -pn 2 -ps 127.0.0.1:70000
expect_error "-pi udp" "flag -pi \(--nccl-init\) expects mpi, tcp or fs, got 'udp'" -- -pi udp
expect_error "Slurm's count against -pn" "flag -pn \(--num-processes\) is 3, but SLURM_NTASKS says 2 ranks" \
    SLURM_NTASKS=2 SLURM_PROCID=0 -- -pi tcp -pn 3 -ps "127.0.0.1:$port"
expect_error "Slurm's rank against -pr" "flag -pr \(--process-rank\) is 0, but SLURM_PROCID says this process is rank 1" \
    SLURM_NTASKS=2 SLURM_PROCID=1 -- -pi tcp -pr 0 -ps "127.0.0.1:$port"
expect_error "SLURM_PROCID out of range" "environment variable SLURM_PROCID is 2, expected below SLURM_NTASKS \(2\)" \
    SLURM_NTASKS=2 SLURM_PROCID=2 -- -pi tcp -ps "127.0.0.1:$port"
expect_error "SLURM_NTASKS not a number" "environment variable SLURM_NTASKS is 'two'" SLURM_NTASKS=two SLURM_PROCID=0 -- -pi tcp -ps "127.0.0.1:$port"
expect_error "srun's tasks without MPI under -pi mpi" "environment variable SLURM_NTASKS is 2 \(srun started several tasks\).*-pi tcp" \
    SLURM_NTASKS=2 SLURM_PROCID=0 SLURM_STEP_ID=0 -- -pi mpi
expect_error "rank 1 with no rank 0" "rank 1: no connection to rank 0 within 2 s \(flag -ps \(--nccl-server\) 127.0.0.1:$port\)" \
    RANKS_TIMEOUT=2 -- -pi tcp -pn 2 -pr 1 -ps "127.0.0.1:$port"
expect_error "rank 0 with no rank 1" "rank 0: rank 1 \(and 2 connections in all\) did not connect within 2 s \(-pn 2" \
    RANKS_TIMEOUT=2 -- -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port"
expect_error "rank 1 with no rank 0's address in -pf" "rank 1: no connection to rank 0 within 2 s \(flag -pf .*address file has not appeared" \
    RANKS_TIMEOUT=2 -- -pi fs -pn 2 -pr 1 -pf "$dir/shared"

# Two processes that both say rank 1 (-pn 3: rank 0 waits for rank 2, so it sees both): rank 0
# names the rank, and every process exits 1.
port=$(free_port)
procs=()
for r in 0 1 1; do
    timeout 60 $emu "${common[@]}" -o "" -pi tcp -pn 3 -pr $r -ps "127.0.0.1:$port" > /dev/null 2> "$dir/dup$r.${#procs[@]}.err" &
    procs+=($!); pids+=($!)
done
rcs=""
for p in "${procs[@]}"; do wait "$p"; rcs="$rcs $?"; done
if [ "$rcs" = " 1 1 1" ] && [ "$(wc -l < "$dir/dup0.0.err")" = 1 ] && grep -q "rank 0: two processes say they are rank 1 (flag -pr" "$dir/dup0.0.err"; then
    pass "two processes given -pr 1: rank 0 names it in one line, every process exits 1"
else
    fail "-pr given twice" "exits$rcs: $(head -c 300 "$dir/dup0.0.err")"
fi

# Ranks given different flags: one line (the rank that differs names the flag), every rank exits 1.
port=$(free_port)
timeout 60 $emu "${common[@]}" -o "" -pi tcp -pn 2 -pr 0 -ps "127.0.0.1:$port" > /dev/null 2> "$dir/diff0.err" &
p0=$!; pids+=($p0)
timeout 60 $emu "${common[@]}" -o "" -l 1e-3 -pi tcp -pn 2 -pr 1 -ps "127.0.0.1:$port" > /dev/null 2> "$dir/diff1.err" &
p1=$!; pids+=($p1)
wait $p0; rc0=$?; wait $p1; rc1=$?
if [ $rc0 = 1 ] && [ $rc1 = 1 ] && [ "$(cat "$dir/diff0.err" "$dir/diff1.err" | wc -l)" = 1 ] && grep -q "error: rank 1: .*lr" "$dir/diff1.err"; then
    pass "ranks given different -l: rank 1 names the flag in one line, both exit 1"
else
    fail "ranks given different flags" "exits $rc0 $rc1: $(cat "$dir/diff0.err" "$dir/diff1.err" | head -c 400)"
fi

# --- a rank killed in the middle of a run: the other exits 1 naming it --------------------------------
# killed VICTIM: 2 ranks of a long run (started without `timeout`: the process killed is the rank
# itself), the victim killed (SIGKILL: no exit handler) after step 2; the other must end by itself
# (waited for up to 60 s, far above the few hundred ms it takes, then counted as a hang).
killed() {
    local victim=$1 other=$((1 - $1)) port r procs=() rc=hang
    port=$(free_port)
    rm -rf "$dir/kill"
    for r in 0 1; do
        $emu "${common[@]}" -x 1000 -o "$dir/kill" -pi tcp -pn 2 -pr $r -ps "127.0.0.1:$port" \
            > "$dir/kill$r.out" 2> "$dir/kill$r.err" &
        procs+=($!); pids+=($!)
    done
    for i in $(seq 600); do grep -qE '^step +2/' "$dir/kill0.out" && break; sleep 0.1; done
    kill -9 "${procs[$victim]}"
    wait "${procs[$victim]}" 2> /dev/null
    for i in $(seq 600); do kill -0 "${procs[$other]}" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "${procs[$other]}" 2> /dev/null; then
        kill -9 "${procs[$other]}"
        wait "${procs[$other]}" 2> /dev/null
    else
        wait "${procs[$other]}"
        rc=$?
    fi
    if [ "$rc" = 1 ] && [ "$(wc -l < "$dir/kill$other.err")" = 1 ] &&
        grep -q "^error: rank $other: rank $victim ended before the run did" "$dir/kill$other.err"; then
        pass "rank $victim killed after step 2: rank $other exits 1 by itself naming rank $victim"
    else
        fail "rank $victim killed" "rank $other exit $rc: $(head -c 300 "$dir/kill$other.err")"
    fi
}
killed 1
killed 0

# --- the C engine is one process: refused on every rank ------------------------------------------
port=$(free_port)
for r in 0 1; do
    timeout 60 ./train_gpt2 "${common[@]}" -o "" --engine cpu -pi tcp -pn 2 -pr $r -ps "127.0.0.1:$port" > /dev/null 2> "$dir/cpu$r.err" &
    eval "c$r=\$!"; pids+=($!)
done
wait $c0; rc0=$?; wait $c1; rc1=$?
[ $rc0 = 1 ] && [ $rc1 = 1 ] && grep -qh "the C reference engine is one process" "$dir/cpu0.err" "$dir/cpu1.err" \
    && pass "-pi tcp -pn 2 --engine cpu: refused (the C engine is one process), both exit 1" \
    || fail "C engine over -pi tcp" "exits $rc0 $rc1: $(cat "$dir/cpu0.err" "$dir/cpu1.err" | head -c 300)"
exit $failed
