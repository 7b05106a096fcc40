#!/usr/bin/env bash
# test_check_dry.sh: the GPU check script's dry run (test/gpu/check.sh --dry): every step of it
# through the CPU runtime at toy sizes, so the script that runs when a GPU is lent cannot rot.
cd "$(dirname "$0")/../.." && bash test/gpu/check.sh --dry
