#!/usr/bin/env bash
# skip_no_cuda.sh: stands in for the CPU-runtime tests where the CUDA toolkit headers are absent.
echo "SKIP cuda_cpu: no CUDA toolkit headers at ${CUDA_HOME:-/usr/local/cuda}/include (cuda_runtime.h); the CPU runtime builds on them"
