#!/usr/bin/env bash
# test_stream_sync.sh: the trainer's own stream synchronization, proven on the CPU runtime. Every
# event record, stream wait and host synchronization in the trainer's ZeRO, offload and pipeline code
# (train_gpt2_zero.cuh, the offload update in train_gpt2.cu, train_gpt2_pipe.cuh) is removed in turn
# (CUDA_CPU_DROP=FILE:LINE: a runtime test hook that makes the call at that line do nothing; the
# source is not edited) and the emulated run must stop with the runtime's line
# naming the missing order: two ops the streams leave unordered whose order changes the result,
# pinned memory the host touches before synchronizing with its copy, or (the pipeline's) a send that
# then never meets its receive, a GPU's hang. With every call in place the same runs pass
# (test_zero.sh, test_pipeline.sh and test_memory_plan.sh check what they compute). The pipeline's
# part runs as test_stream_sync_pipe.sh (below: STREAM_SYNC_PART).
set -u
. "$(dirname "$0")/lib.sh"
emu=build/emu/train_gpt2_emu_fp32
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1

# Four layers, so that backward reuses each of the two layer buckets (and -z 3 each of its two
# parameter gather buffers); two micro-steps a step, so that the edge buckets, the step's sums and
# -z 3's embedding gather buffer are reused too. -z 3 runs on one rank: its gathers are copies on
# the comm stream, ordered by the same events as over ranks.
# The pipeline's sampling brings a row of logits down into pinned memory: with 2049 tokens the row
# spans whole pages, which the runtime guards until the host synchronizes with the copy.
$gen model "$dir/model.bin" 4 32 2 257 32 1 > /dev/null && $gen shard "$dir/train.bin" 20000 257 2 > /dev/null \
    && $gen shard "$dir/val.bin" 5000 257 3 > /dev/null && $gen model "$dir/model_v2049.bin" 4 32 2 2049 32 1 > /dev/null \
    || { echo "FAIL stream_sync: gen_data"; exit 1; }
common=(-e "$dir/model.bin" -i "$dir/train.bin" -t 16 -b 2 -d 64 -v 0 -s 0 -l 3e-3 -u 1 -x 2 -o "")
declare -A config=(
    [z2]="-z 2"
    [z3]="-z 3"
    [grads]="-z 2 --offload grads"
    [optimizer]="--offload optimizer"
    [z3opt]="-z 3 --offload optimizer"
    [z3grads]="-z 3 --offload grads"
    [z0ov]="-z 0 -b 1"
    [z1ov]="-z 1 -b 1"
    [z1gather]="-z 1 -b 1 -j $dir/val.bin -v 1 -m 1"
    [pp2]="-pp 2"
    [pp2val]="-pp 2 -j $dir/val.bin -v 1 -m 1"
    [pp2sample]="-pp 2 -s 1 -g 2 -e $dir/model_v2049.bin"
    [pp2ckpt]="-pp 2 -n 1 -o $dir/ck --overwrite"
)
# Stages 0 and 1 reduce beside backward only over ranks: these run under mpirun, 2 ranks of one
# sequence each, so that a step is 2 micro-steps and only the last one reduces. Stage 1 (z1gather)
# also gathers the parameters piece by piece on the comm stream after each update, and the next
# forward waits for each piece before reading it: validation at every step, so that a forward
# comes right after the update (the training forward comes after the driver's stop check, an MPI
# call, which runs every queued op first).
# The pipeline (-pp 2: two stages, one rank each, 2 micro-steps a step) runs under mpirun too; its
# stages' ranks name a send or receive whose match never comes after NCCL_CPU_P2P_TIMEOUT seconds.
export NCCL_CPU_P2P_TIMEOUT=10
launch() {  # launch CONFIG: the command before the trainer's (CUDA_CPU_DROP passed on to the ranks)
    case $1 in
        *ov | z1gather | pp*) echo "mpirun -np 2 -x CUDA_CPU_DROP -x NCCL_CPU_P2P_TIMEOUT" ;;
        *) echo "" ;;
    esac
}

# The calls to remove: every cudaEventRecord, cudaStreamWaitEvent, cudaEventSynchronize and
# cudaStreamSynchronize inside the functions of the ZeRO and offload paths, with the configuration
# that runs each function.
declare -A fn_config=(
    [offload_settle_layer]=grads [bucket_reduce_layer]=z2 [bucket_begin_layer]=z2 [bucket_begin_edges]=z2
    [bucket_reduce_edges]=z2 [reduce_step_gradients]=z2 [offload_adamw]=optimizer
    [offload_step_gradients]=grads [gpu_optimizer_step]=z2
    [overlap_reduce_layer]="z0ov z1ov" [overlap_reduce_edges]="z0ov z1ov" [overlap_step_gradients]="z0ov z1ov"
    [zero1_gather_piece]=z1gather [zero1_gather_pieces]=z1gather [zero1_wait_embeddings]=z1gather
    [zero1_wait_layer]=z1gather [zero1_wait_lnf]=z1gather
    [zero3_gather_layer]=z3 [zero3_layer]=z3 [zero3_begin_pass]=z3
    [pipe_group]=pp2 [pipe_flush]=pp2 [pipe_forward_only]=pp2val [pipe_logits_row]=pp2sample
    [pipe_write_pieces]=pp2ckpt
)
# Waits the runtime's order check cannot see: a synchronization runs only the work it needs, and
# nothing after the final LayerNorm's wait needs the comm stream before the host's next MPI call runs
# it, so without the wait the forward reads the final LayerNorm's parameters before their gather in
# every order. The test expects that stale read instead: the same run to its end with other val losses.
declare -A stale_fn=([zero1_wait_lnf]=1)
# Calls that order nothing CUDA leaves unordered (the test checks that the run is unchanged without
# them): the step's statistics, and an evaluation's loss, come down into pageable memory, which
# CUDA's copy returns complete.
redundant_pattern='cudaStreamSynchronize(g->stream));$'
redundant_after='cudaMemcpyAsync(g->h_stats, stats\|cudaMemcpyAsync(&loss, stats'
# Two tests share this file: the ZeRO and offload calls (this file, in make test), and the
# pipeline's (test_stream_sync_pipe.sh sets STREAM_SYNC_PART=pipe; in make test-long), whose
# dropped receives each wait out NCCL_CPU_P2P_TIMEOUT.
part=${STREAM_SYNC_PART:-zero}
case $part in
    zero) sources=(train_gpt2_zero.cuh train_gpt2.cu) local_configs="z2 z3 grads optimizer z3opt z3grads"
          mpi_configs="z0ov z1ov z1gather" min_sites=10 ;;
    pipe) need_mpi "stream_sync pipeline"
          sources=(train_gpt2_pipe.cuh) local_configs="" mpi_configs="pp2 pp2val pp2sample pp2ckpt" min_sites=5 ;;
    *) echo "FAIL stream_sync: STREAM_SYNC_PART must be zero or pipe, got '$part'"; exit 1 ;;
esac
mapfile -t sites < <(awk '
    FNR == 1 { fn = "" }
    /^(static |StepResult |void )[^(]*\(/ { fn = $0; sub(/\(.*/, "", fn); sub(/.* \**/, "", fn) }
    /cudaEventRecord|cudaStreamWaitEvent|cudaEventSynchronize|cudaStreamSynchronize/ { print FILENAME ":" fn ":" FNR }' "${sources[@]}")

command -v mpirun > /dev/null 2>&1 || mpi_configs=""
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Everything in place: each configuration runs to the end. -z 3 with offload adds no call of its
# own: its host copies are the offload calls' below (dropped where they are the only order: the
# optimizer's under --offload optimizer at stage 0, the buckets' under -z 2 --offload grads); at
# stage 3 the next pass's gathers, queued on the comm stream behind the weights' upload into the
# parameter shard, order the compute stream after it as offload_up does.
for c in $local_configs $mpi_configs; do
    # shellcheck disable=SC2086
    if CUDA_CPU_DROP="" $(launch $c) $emu "${common[@]}" ${config[$c]} > "$dir/ok_$c.out" 2>&1; then
        pass "all synchronization in place: ${config[$c]} runs without a finding"
    else
        fail "all synchronization in place: ${config[$c]}" "$(grep -m1 'cuda_cpu:' "$dir/ok_$c.out" | cut -c1-400)"
    fi
done

n=0
for site in "${sites[@]}"; do
    src=${site%%:*}
    fn=${site#*:}
    fn=${fn%:*}
    line=${site##*:}
    cs=${fn_config[$fn]:-}
    [ -n "$cs" ] || continue
    # The copies to the host that --offload grads adds in the bucket code.
    sed -n "${line}p" "$src" | grep -q 'landed' && cs=grads
    for c in $cs; do
    [ -n "$(launch $c)" ] && [ -z "$mpi_configs" ] && continue
    n=$((n + 1))
    call=$(sed -n "${line}p" "$src" | grep -o 'cuda\(EventRecord\|StreamWaitEvent\|EventSynchronize\|StreamSynchronize\)' | head -n 1)
    out="$dir/drop_${line}_$c.out"
    # shellcheck disable=SC2086
    { (export CUDA_CPU_DROP="$src:$line"; exec timeout 600 $(launch $c) $emu "${common[@]}" ${config[$c]} > "$out" 2>&1); } 2> /dev/null
    rc=$?
    # Anywhere in a line: under mpirun the other rank's output may end mid-line just before it.
    finding=$(grep -m1 -E 'cuda_cpu: (the result depends on the order|.*not yet synchronized|.*nothing orders the two|.*has not synchronized|.*found no matching ncclSend|.*found no matching ncclRecv)' "$out" |
        sed 's/^.*\(cuda_cpu: \(the result depends\|[^:]*not yet synchronized\|.*nothing orders the two\|.*has not synchronized\|.*found no matching\)\)/\1/')
    redundant=0
    sed -n "$((line - 1))p" "$src" | grep -q "$redundant_after" && sed -n "${line}p" "$src" | grep -q "$redundant_pattern" && redundant=1
    if ! grep -q "CUDA_CPU_DROP: skipping $call at $src:$line" "$out"; then
        fail "without $call at $src:$line ($fn)" "the run never reached that call with ${config[$c]}"
    elif [ -n "${stale_fn[$fn]:-}" ]; then
        vals=$(grep '^val loss' "$out" | tr '\n' ' ') okvals=$(grep '^val loss' "$dir/ok_$c.out" | tr '\n' ' ')
        [ $rc -eq 0 ] && grep -q '^done:' "$out" && [ "$(echo "$vals" | grep -o 'val loss' | wc -l)" -ge 2 ] \
            && [ "$vals" != "$okvals" ] \
            && pass "without $call at $src:$line ($fn, ${config[$c]}): the forward read stale parameters: val losses $vals instead of $okvals" \
            || fail "without $call at $src:$line ($fn)" "exit $rc, val losses $vals, with it $okvals (expected a complete run with other val losses)"
    elif [ $redundant = 1 ]; then
        [ $rc -eq 0 ] && [ -z "$finding" ] && grep -q '^done:' "$out" \
            && [ "$(grep -o 'loss [0-9.]*' "$out")" = "$(grep -o 'loss [0-9.]*' "$dir/ok_$c.out")" ] \
            && pass "without $call at $src:$line ($fn): the same losses, as expected (a copy into pageable memory returns complete)" \
            || fail "without the redundant $call at $src:$line" "exit $rc: $(grep -m1 'cuda_cpu:' "$out" | cut -c1-300)"
    elif [ $rc -ne 0 ] && [ -n "$finding" ]; then
        pass "without $call at $src:$line ($fn, ${config[$c]}): stopped: $(echo "$finding" | cut -c11-330)..."
    else
        fail "without $call at $src:$line ($fn, ${config[$c]})" "exit $rc, no finding: $(grep -v 'CUDA_CPU_DROP\|^engine' "$out" | grep -m2 'cuda_cpu' | tr '\n' ' ' | cut -c1-400) $(tail -n 2 "$out" | tr '\n' ' ' | cut -c1-300)"
    fi
    done
done
[ $n -ge $min_sites ] && pass "$n calls removed one at a time" || fail "the calls to remove" "found only $n in ${sources[*]}"

# NCCL on the comm stream: the bucket's wait removed under mpirun, two ranks.
if [ "$part" = zero ] && command -v mpirun > /dev/null 2>&1; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    line=$(grep -n 'cudaStreamWaitEvent(g->comm_stream, g->bucket_ready\[b\]' train_gpt2_zero.cuh | cut -d: -f1)
    mpirun -np 2 -x CUDA_CPU_DROP="train_gpt2_zero.cuh:$line" $emu "${common[@]}" -b 1 -z 2 > "$dir/np2.out" 2>&1
    rc=$?
    finding=$(grep -m1 'cuda_cpu: the result depends on the order' "$dir/np2.out")
    [ $rc -ne 0 ] && echo "$finding" | grep -q 'ncclReduce' \
        && pass "2 ranks without the comm stream's wait for bucket_ready (train_gpt2_zero.cuh:$line): stopped naming ncclReduce" \
        || fail "2 ranks without the bucket_ready wait" "exit $rc: $(grep -m1 'cuda_cpu:' "$dir/np2.out" | cut -c1-300)"
    mpirun -np 2 $emu "${common[@]}" -b 1 -z 2 > "$dir/np2ok.out" 2>&1 \
        && pass "2 ranks, -z 2, everything in place: no finding" || fail "2 ranks, -z 2" "$(grep -m1 'cuda_cpu:\|error' "$dir/np2ok.out")"
fi
exit $failed
