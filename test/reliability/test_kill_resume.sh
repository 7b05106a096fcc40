#!/usr/bin/env bash
# test_kill_resume.sh: kill -9 at random moments, then start again, until the run is done; the
# result must equal an uninterrupted run's bit for bit: the final model and state files, and every
# step's loss, gradient norm and learning rate in log.jsonl (each step logged once). A checkpoint
# is written every step; every other kill waits for one to begin (its temporary file to appear) and
# lands in the middle of it. The next start must remove such files, and none may remain at the end.
#   KILL_TRIALS (default 4): trials, each with its own seed; KILLS (default 3): kills per trial.
set -u
. "$(dirname "$0")/../lib.sh"
trials=${KILL_TRIALS:-4}
kills=${KILLS:-3}
# A model of 0.67M parameters: its checkpoints (8 MB a step) take about as long as its steps.
$gen model "$dir/model.bin" 2 128 2 2048 64 1 && $gen shard "$dir/train.bin" 60000 2048 2 &&
    $gen shard "$dir/val.bin" 4000 2048 3 || { echo "FAIL kill: gen_data"; exit 1; }
flags=(-e "$dir/model.bin" -i "$dir/train.bin" -j "$dir/val.bin" -b 4 -t 32 -x 30 -n 1 -sf 1 -v 10 -m 2 -s 10 -g 4)
losses() { grep '"train_loss"' "$1" | sed 's/, "ms".*//'; }
start=$(date +%s%N)
timeout 300 ./train_gpt2 "${flags[@]}" -o "$dir/ref" > "$dir/ref.out" 2>&1 || { echo "FAIL kill: reference run: $(tail -n 2 "$dir/ref.out")"; exit 1; }
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
# Start again: resume when a whole checkpoint pair is there, else from scratch.
start_run() {
    local out=$1
    # exec: in a background job the process killed is then the trainer itself
    if ls "$out"/model_*.bin > /dev/null 2>&1; then exec ./train_gpt2 "${flags[@]}" -o "$out" -y 1; else exec ./train_gpt2 "${flags[@]}" -o "$out"; fi
}
mid=0
total_kills=0
for seed in $(seq 1 "$trials"); do
    RANDOM=$seed
    out="$dir/trial$seed"
    ok=1
    why=""
    for k in $(seq 1 "$kills"); do
        start_run "$out" > "$out.$k.log" 2>&1 &
        pid=$!
        if [ $((k % 2)) = 0 ]; then
            # Mid-checkpoint: as soon as this process has a temporary file open (or has ended).
            for _ in $(seq 1 200000); do
                compgen -G "$out/*_*.bin.tmp.$pid" > /dev/null && break
                kill -0 $pid 2> /dev/null || break
            done
        else
            ms=$(( RANDOM % (run_ms * 2 / 3 + 50) ))  # mostly before the end, so the next kill finds work
            sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
        fi
        kill -9 $pid 2> /dev/null
        wait $pid 2> /dev/null
        total_kills=$((total_kills + 1))
        if ls "$out" 2> /dev/null | grep -q '\.tmp\.'; then
            mid=$((mid + 1))
            echo "$k" >> "$out.mid"
        fi
    done
    (start_run "$out") > "$out.final.log" 2>&1 || { ok=0; why="the last start failed: $(tail -n 2 "$out.final.log")"; }
    # The start after a kill mid-checkpoint said it removed the temporary files.
    for k in $(cat "$out.mid" 2> /dev/null); do
        next=$((k + 1))
        [ $next -gt "$kills" ] && next=final
        grep -q "removed [0-9]* temporary file" "$out.$next.log" 2> /dev/null || [ "$(ls "$out" | grep -c '\.tmp\.')" = 0 ] ||
            { ok=0; why="temporary files of kill $k were not removed by the next start"; }
    done
    [ "$(ls "$out" | grep -c '\.tmp\.')" = 0 ] || { ok=0; why="temporary files left: $(ls "$out" | grep '\.tmp\.' | tr '\n' ' ')"; }
    cmp -s "$dir/ref/model_00000030.bin" "$out/model_00000030.bin" && cmp -s "$dir/ref/state_00000030.bin" "$out/state_00000030.bin" ||
        { ok=0; why="final model or state file differs from the uninterrupted run's"; }
    [ "$(losses "$dir/ref/log.jsonl")" = "$(losses "$out/log.jsonl")" ] || { ok=0; why="losses in log.jsonl differ (or repeat)"; }
    [ "$(grep -c val_loss "$dir/ref/log.jsonl")" = "$(grep -c val_loss "$out/log.jsonl")" ] || { ok=0; why="val lines differ"; }
    if [ $ok = 1 ]; then
        pass "kill -9 trial $seed: $kills kills ($(cat "$out.mid" 2> /dev/null | wc -l) mid-checkpoint), resumed to files and losses bit-identical to an unbroken run"
    else
        fail "kill -9 trial $seed" "$why"
    fi
done
echo "   kill -9: $trials trials, $total_kills kills, $mid of them mid-checkpoint (run of ${run_ms} ms)"
exit $failed
