#!/usr/bin/env bash
# bench_emu.sh: how long the GPU code path takes per step on the CPU runtime (./train_gpt2_emu),
# for d2 (B=4, T=64) in each precision, beside the C engine on the same run; then what the runtime's
# stream model costs where there are two streams (ZeRO-2's gradient buckets, the offloaded
# optimizer): work the streams leave unordered runs once per stream order (two by default), which
# CUDA_CPU_STREAM_ORDERS=forward turns into one. These are CPU figures: they say what the emulation
# costs CI, nothing about GPU speed.
set -u
cd "$(dirname "$0")/.."
args=(-e d2 -b 4 -t 64 -r 0 -x 4 -v 0 -s 0 -o "")  # -r 0: the figures keep every activation, as before -r 1 became the default
per_step() { grep '^done:' | sed 's/.*mean \([0-9.]*\) ms\/step.*/\1/'; }
printf "%-44s %s\n" "d2 B=4 T=64, per step" "ms (mean of steps 2-4)"
printf "%-44s %s\n" "C engine" "$(./train_gpt2 --engine cpu "${args[@]}" 2>/dev/null | per_step)"
for p in fp32 fp16 bf16; do
    [ -x "build/emu/train_gpt2_emu_$p" ] || continue
    printf "%-44s %s\n" "train_gpt2_emu ($p)" "$("build/emu/train_gpt2_emu_$p" "${args[@]}" 2>/dev/null | per_step)"
done
e=build/emu/train_gpt2_emu_fp32
[ -x $e ] || exit 0
for flags in "-z 2" "--offload optimizer"; do
    # shellcheck disable=SC2086
    printf "%-44s %s\n" "train_gpt2_emu (fp32) $flags" "$($e "${args[@]}" $flags 2>/dev/null | per_step)"
    # shellcheck disable=SC2086
    printf "%-44s %s\n" "  ... one stream order" "$(CUDA_CPU_STREAM_ORDERS=forward $e "${args[@]}" $flags 2>/dev/null | per_step)"
done
