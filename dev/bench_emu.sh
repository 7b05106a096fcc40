#!/usr/bin/env bash
# bench_emu.sh: how long the GPU code path takes per step on the CPU runtime (./train_gpt2_emu),
# for d2 (B=4, T=64) in each precision, beside the C engine on the same run. These are CPU figures:
# they say what the emulation costs CI, nothing about GPU speed.
set -u
cd "$(dirname "$0")/.."
args=(-e d2 -b 4 -t 64 -x 4 -v 0 -s 0 -o "")
per_step() { grep '^done:' | sed 's/.*mean \([0-9.]*\) ms\/step.*/\1/'; }
printf "%-28s %s\n" "d2 B=4 T=64, per step" "ms (mean of steps 2-4)"
printf "%-28s %s\n" "C engine" "$(./train_gpt2 --engine cpu "${args[@]}" 2>/dev/null | per_step)"
for p in fp32 fp16 bf16; do
    [ -x "build/emu/train_gpt2_emu_$p" ] || continue
    printf "%-28s %s\n" "train_gpt2_emu ($p)" "$("build/emu/train_gpt2_emu_$p" "${args[@]}" 2>/dev/null | per_step)"
done
