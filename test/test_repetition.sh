#!/usr/bin/env bash
# test_repetition.sh: the places that once repeated themselves stay written once. The attention
# kernels (kernels/flash_fwd.cuh, flash_bwd.cuh, flash_wgmma.cuh, attention.cuh: their shared tile
# products and loads) and the CPU runtime's test programs (their CUDA-call checks and copy helpers, now
# test/cuda_test.h; their register-heavy kernels, now test/cuda_cpu/limit_kernels.cuh) hold no run
# of six lines or more that another place among them repeats word for word (test/repetition.py;
# test/repetition_allowed.txt names the few kept, and why). And the shell tests take their set-up
# from test/lib.sh: none but lib.sh defines pass and fail (test/gpu/check.sh excepted: it runs on a
# GPU machine on its own, its lines prefixed gpu_check).
set -u
. "$(dirname "$0")/lib.sh"

kernels=kernels/flash_fwd.cuh,kernels/flash_bwd.cuh,kernels/flash_wgmma.cuh,kernels/attention.cuh
runtime_tests=$(ls test/cuda_cpu/test_*.cu | tr '\n' ',' | sed 's/,$//')
if out=$("$PY" test/repetition.py --allow test/repetition_allowed.txt "$kernels" "$runtime_tests" 2>&1); then
    pass "no run of six lines repeated among the attention kernels and the CPU runtime's $(echo "$runtime_tests" | tr ',' '\n' | wc -l) test programs"
else
    fail "repeated runs" "$(echo "$out" | head -n 4 | tr '\n' '|')"
fi

own=$(grep -lE '^(pass|fail) *\(\)' $(git ls-files 'test/*.sh' 'test/**/*.sh' 2>/dev/null || find test -name '*.sh') |
    grep -v -x -e test/lib.sh -e test/gpu/check.sh)
[ -z "$own" ] && pass "only test/lib.sh defines pass and fail among the shell tests" \
    || fail "shell tests with their own pass/fail" "$(echo "$own" | tr '\n' ' ')"
exit $failed
