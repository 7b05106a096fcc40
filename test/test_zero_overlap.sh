#!/usr/bin/env bash
# test_zero_overlap.sh: ZeRO stages 0 and 1 reduce each layer's gradients on the comm stream as the
# step's last backward finishes them (train_gpt2_zero.cuh); --overlap 0 reduces them all after
# backward, as before. Both must give the same bits: the emulated trainer under mpirun, 2 ranks,
# -z 0 and -z 1, one micro-step a step and two (where only the last one reduces), FP16 and FP32: the
# same losses and norms on every step, and the checkpoint after the last step (the model file and
# the optimizer state: one file at stage 0, one a rank at stage 1) the same byte for byte. The runtime's NCCL counter shows that each run
# took the path it names (a call per layer tensor when overlapped, one call a step when not).
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
if ! command -v mpirun > /dev/null 2>&1; then
    echo "SKIP zero_overlap: needs mpirun (apt-get install openmpi-bin libopenmpi-dev)"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export CUDA_CPU_THREADS=1 OMP_NUM_THREADS=1
status=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; status=1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gen=$build/test/gen_data
L=2 T=32 N=3
$gen model "$dir/model.bin" $L 64 2 301 64 1 > /dev/null && $gen shard "$dir/train.bin" 20000 301 2 > /dev/null \
    || { echo "FAIL zero_overlap: gen_data"; exit 1; }

# calls NAME KIND: the collective calls of KIND rank 0 made
calls() { awk -v k="$2_calls" '/rank=0 / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' \
    "$dir/$1.traffic"; }

for p in fp16 fp32; do
    emu=$build/emu/train_gpt2_emu_$p
    for z in 0 1; do
        for b in 2 1; do  # -b 2: one micro-step a step; -b 1: two
            name="$p -z $z, $((2 / b)) micro-step(s)"
            ok=1
            for ov in 1 0; do
                run=${p}_z${z}_b${b}_ov$ov
                NCCL_CPU_TRAFFIC="$dir/$run.traffic" timeout 300 mpirun -np 2 "$emu" -e "$dir/model.bin" -i "$dir/train.bin" \
                    -t $T -b $b -d $((2 * T * 2)) -v 0 -s 0 -l 1e-3 -x $N -z $z --overlap $ov -n $N -o "$dir/$run" \
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
            la=$(grep '^step' "$dir/$a.out" | grep -o 'loss [0-9.]* | norm [0-9.a-z]*')
            ls=$(grep '^step' "$dir/$s.out" | grep -o 'loss [0-9.]* | norm [0-9.a-z]*')
            [ "$(echo "$la" | grep -c loss)" = $N ] && [ "$la" = "$ls" ] \
                || { fail "$name: losses" "overlapped: $(echo $la), after backward: $(echo $ls)"; continue; }
            files=$(cd "$dir/$a" && ls -- *.bin | sort)
            [ "$files" = "$(cd "$dir/$s" && ls -- *.bin | sort)" ] && [ "$(echo "$files" | grep -c state_)" = $((z + 1)) ] \
                || { fail "$name: checkpoints" "files $(echo $files) vs $(cd "$dir/$s" && ls -- *.bin | tr '\n' ' ')"; continue; }
            same=1
            for f in $files; do cmp -s "$dir/$a/$f" "$dir/$s/$f" || { same=0; fail "$name" "$f differs"; }; done
            [ $same = 1 ] && pass "$name, 2 ranks: reduced beside backward ($got_a gradient calls) = after it ($got_s): $N steps' losses and norms, $(echo $files | wc -w) checkpoint files byte for byte"
        done
    done
done
exit $status
