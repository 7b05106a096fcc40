#!/usr/bin/env bash
# test_zero_overlap.sh: ZeRO stages 0 and 1 reduce each layer's gradients on the comm stream as the
# step's last backward finishes them (train_gpt2_zero.cuh); --overlap 0 reduces them all after
# backward, as before. Both must give the same bits: the emulated trainer under mpirun, 2 ranks,
# -z 0 and -z 1, one micro-step a step and two (where only the last one reduces), FP16 and FP32: the
# same losses and norms on every step, and the checkpoint after the last step (the model file and
# the optimizer state: one file at stage 0, one a rank at stage 1) the same byte for byte. The runtime's NCCL counter shows that each run
# took the path it names (a call per layer tensor when overlapped, one call a step when not).
# Stage 1 also gathers the updated parameters piece by piece on the comm stream (the embeddings, each
# layer, the final LayerNorm: broadcasts from their owners, no all-gather), waited for by the next
# forward piece by piece; whatever reads the parameters first after an update must see them whole:
# so every run validates every other step, writes checkpoints mid-run (one run at every step,
# where the checkpoint comes first after the update) and the other samples at step 1 (before any
# other forward), and the val losses, the samples and every checkpoint must be the same too. FP32
# runs with -f 0 (plain fp32 products).
set -u
. "$(dirname "$0")/lib.sh"
build=${BUILD:-build}
need_mpi zero_overlap
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
L=2 T=32 N=3
$gen model "$dir/model.bin" $L 64 2 301 64 1 > /dev/null && $gen shard "$dir/train.bin" 20000 301 2 > /dev/null \
    && $gen shard "$dir/val.bin" 5000 301 3 > /dev/null || { echo "FAIL zero_overlap: gen_data"; exit 1; }

# calls NAME KIND: the collective calls of KIND rank 0 made
calls() { awk -v k="$2_calls" '/rank=0 / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' \
    "$dir/$1.traffic"; }

for p in fp16 fp32; do
    emu=$build/emu/train_gpt2_emu_$p
    for z in 0 1; do
        for b in 2 1; do  # -b 2: one micro-step a step; -b 1: two
            name="$p -z $z, $((2 / b)) micro-step(s)"
            ok=1
            # the first reader after an update (steps 1, 3): the checkpoint (-n 1) or a sample (-s 1)
            if [ $b = 2 ]; then readers=(-n 1 -s 0) ckpts=$N; else readers=(-n 2 -s 1 -g 4) ckpts=2; fi
            for ov in 1 0; do
                run=${p}_z${z}_b${b}_ov$ov
                NCCL_CPU_TRAFFIC="$dir/$run.traffic" timeout 300 mpirun -np 2 "$emu" -e "$dir/model.bin" -i "$dir/train.bin" \
                    -j "$dir/val.bin" -v 2 -m 1 "${readers[@]}" -f 0 \
                    -t $T -b $b -d $((2 * T * 2)) -l 1e-3 -x $N -z $z --overlap $ov -o "$dir/$run" \
                    > "$dir/$run.out" 2>&1 || { fail "$name, --overlap $ov" "mpirun exited with status $?: $(grep -m1 'error\|cuda_cpu:\|FATAL' "$dir/$run.out")"; ok=0; }
            done
            [ $ok = 1 ] || continue
            a=${p}_z${z}_b${b}_ov1 s=${p}_z${z}_b${b}_ov0
            # The paths: per layer 12 tensor slices, then the embeddings and the final LayerNorm.
            if [ $z = 0 ]; then
                # (each step's statistics are one all-reduce more)
                want_a="$((N * (12 * L + 2)))" got_a=$(($(calls $a allreduce) - N)) want_s=$N got_s=$(($(calls $s allreduce) - N))
            else
                want_a=">= $((N * (12 * L + 2)))" got_a=$(calls $a reduce) want_s=$N got_s=$(calls $s reducescatter)
                [ "$got_a" -ge $((N * (12 * L + 2))) ] 2> /dev/null && want_a=$got_a
                [ "$(calls $s reduce)" = 0 ] || got_s="$got_s (and $(calls $s reduce) reduces)"
            fi
            [ "$got_a" = "$want_a" ] && [ "$got_s" = "$want_s" ] \
                || { fail "$name: the paths" "overlapped: $got_a calls, want $want_a; after backward: $got_s, want $want_s"; continue; }
            gathers=""
            if [ $z = 1 ]; then
                # The gather after each of the N updates: --overlap 0 one all-gather; overlapped none,
                # and per update a broadcast per piece (the embeddings, each layer's 12 tensor
                # slices in one group a layer, the final LayerNorm), one more where a piece
                # straddles the two shards' boundary.
                # (FP16 checkpoints broadcast the master weights in both runs alike.)
                per=$(( ($(calls $a broadcast) - $(calls $s broadcast)) ))
                [ "$(calls $a allgather)" = 0 ] && [ "$(calls $s allgather)" = $N ] && [ $((per % N)) = 0 ] \
                    && [ $((per / N)) -ge $((12 * L + 2)) ] && [ $((per / N)) -le $((12 * L + 3)) ] \
                    || { fail "$name: the gathers" "overlapped: $(calls $a allgather) all-gathers and $per more broadcasts than --overlap 0 (want 0 and $N x $((12 * L + 2))..$((12 * L + 3))); --overlap 0: $(calls $s allgather) all-gathers (want $N)"; continue; }
                gathers=", parameters gathered in $((per / N)) broadcasts an update (--overlap 0: one all-gather)"
            fi
            # the training losses and norms, the val losses and the samples
            results() { grep -o '^step.*loss [0-9.]* | norm [0-9.a-z]*\|^val loss .*' "$dir/$1.out" | sed 's/|.*loss/| loss/'
                        awk '/^generating:/ { g = 1; n = 0 } g { print } g && /^---$/ && ++n == 2 { g = 0 }' "$dir/$1.out"; }
            la=$(results $a) ls=$(results $s)
            [ "$(echo "$la" | grep -c '| loss')" = $N ] && [ "$(echo "$la" | grep -c '^val loss')" -ge 2 ] && [ "$la" = "$ls" ] \
                || { fail "$name: losses" "overlapped: $(echo $la), after backward: $(echo $ls)"; continue; }
            [ $b = 2 ] || [ "$(echo "$la" | grep -c '^generating:')" -ge 2 ] || { fail "$name: samples" "no sample in $(echo $la)"; continue; }
            files=$(cd "$dir/$a" && ls -- *.bin | sort)
            [ "$files" = "$(cd "$dir/$s" && ls -- *.bin | sort)" ] && [ "$(echo "$files" | grep -c state_)" = $(((z + 1) * ckpts)) ] \
                || { fail "$name: checkpoints" "files $(echo $files) vs $(cd "$dir/$s" && ls -- *.bin | tr '\n' ' ')"; continue; }
            same=1
            for f in $files; do cmp -s "$dir/$a/$f" "$dir/$s/$f" || { same=0; fail "$name" "$f differs"; }; done
            [ $same = 1 ] && pass "$name, 2 ranks: reduced beside backward ($got_a gradient calls) = after it ($got_s)$gathers: $N steps' losses and norms, $(echo "$la" | grep -c '^val loss') val losses, $(echo "$la" | grep -c '^generating:') samples, $(echo $files | wc -w) checkpoint files ($ckpts checkpoints) byte for byte"
        done
    done
done
exit $failed
