#!/usr/bin/env bash
# test_attention_paths.sh: which flash kernels kernels/attention.cuh launches, by the GPU's generation,
# and that both families pass the attention test against the C engine. On an sm_90 device (the CPU
# runtime's default) the forward and backward run kernels/flash_wgmma.cuh's wgmma kernels; on an sm_80
# (CUDA_CPU_SM=80) flash_fwd.cuh's and flash_bwd.cuh's mma.sync kernels. Each run's counted launches
# (CUDA_CPU_COUNT) name the kernels; each run's test lines must all pass.
set -u
. "$(dirname "$0")/lib.sh"
t=build/kernels/test_attention_fp16
require "$t"
for sm in 90 80; do
    if [ $sm = 90 ]; then want="attention_forward_flash_wgmma_kernel flash_backward_dq_wgmma_kernel flash_backward_kv_wgmma_kernel"
    else want="attention_forward_flash_kernel flash_backward_dq_kernel flash_backward_kv_kernel"; fi
    CUDA_CPU_SM=$sm CUDA_CPU_CHECK=0 CUDA_CPU_COUNT="$dir/count_$sm" "$t" > "$dir/out_$sm" 2>&1
    rc=$?
    np=$(grep -c '^PASS' "$dir/out_$sm")
    nf=$(grep -c '^FAIL' "$dir/out_$sm")
    if [ $rc -eq 0 ] && [ "$nf" -eq 0 ] && [ "$np" -gt 0 ]; then pass "attention_sm${sm}_tests ($np checks)"
    else fail "attention_sm${sm}_tests" "exit $rc, $np passed, $nf failed: $(grep -m2 '^FAIL' "$dir/out_$sm")"; fi
    got=$(grep -oE 'name=(attention_forward_flash|flash_backward)[a-z_]*' "$dir/count_$sm" | sed 's/name=//' | sort -u | tr '\n' ' ')
    if [ "$got" = "$(echo $want | tr ' ' '\n' | sort | tr '\n' ' ')" ]; then pass "attention_sm${sm}_kernels ($got)"
    else fail "attention_sm${sm}_kernels" "launched '$got', expected '$want'"; fi
done
exit $failed
