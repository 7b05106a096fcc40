#!/usr/bin/env bash
# test_attention_paths.sh: which flash kernels kernels/attention.cuh launches, by the GPU's generation,
# and that both families pass the attention test against the C engine. On an sm_90 device (the CPU
# runtime's default) the forward and backward run kernels/flash_wgmma.cuh's wgmma kernels; on an sm_80
# (CUDA_CPU_SM=80) flash_fwd.cuh's and flash_bwd.cuh's mma.sync kernels; on an sm_90 whose wgmma gives
# wrong products (CUDA_CPU_FAULT=wgmma) the check of the wgmma kernels against mma.sync fails, one
# warning line says so, and the mma.sync kernels run. Each run's counted launches (CUDA_CPU_COUNT) name
# the kernels; each run's test lines must all pass.
set -u
. "$(dirname "$0")/lib.sh"
t=build/kernels/test_attention_fp16
require "$t"
for sm in 90 80 90fault; do
    if [ $sm = 90 ]; then want="attention_forward_flash_wgmma_kernel flash_backward_dq_wgmma_kernel flash_backward_kv_wgmma_kernel"
    else want="attention_forward_flash_kernel flash_backward_dq_kernel flash_backward_kv_kernel"; fi
    fault=none
    [ $sm = 90fault ] && fault=wgmma
    CUDA_CPU_SM=${sm%fault} CUDA_CPU_FAULT=$fault CUDA_CPU_CHECK=0 CUDA_CPU_COUNT="$dir/count_$sm" "$t" > "$dir/out_$sm" 2>&1
    rc=$?
    np=$(grep -c '^PASS' "$dir/out_$sm")
    nf=$(grep -c '^FAIL' "$dir/out_$sm")
    if [ $rc -eq 0 ] && [ "$nf" -eq 0 ] && [ "$np" -gt 0 ]; then pass "attention_sm${sm}_tests ($np checks)"
    else fail "attention_sm${sm}_tests" "exit $rc, $np passed, $nf failed: $(grep -m2 '^FAIL' "$dir/out_$sm")"; fi
    # the kernels after the check's (on sm_90 its first 12 flash launches: both families' forward and
    # backward, 3 launches each, at two head sizes)
    skip=$([ $sm = 80 ] && echo 0 || echo 12)
    got=$(grep -oE 'name=(attention_forward_flash|flash_backward)[a-z_]*' "$dir/count_$sm" | tail -n +$((skip + 1)) |
          sed 's/name=//' | sort -u | tr '\n' ' ')
    if [ "$got" = "$(echo $want | tr ' ' '\n' | sort | tr '\n' ' ')" ]; then pass "attention_sm${sm}_kernels ($got)"
    else fail "attention_sm${sm}_kernels" "launched '$got', expected '$want'"; fi
    # the wgmma kernels checked against mma.sync: silent when they agree, one warning when not
    nw=$(grep -c '^warning: flash attention: the wgmma kernels differ from the mma.sync ones' "$dir/out_$sm")
    if [ "$nw" = "$([ $sm = 90fault ] && echo 1 || echo 0)" ]; then pass "attention_sm${sm}_check ($nw warning lines)"
    else fail "attention_sm${sm}_check" "$nw warning lines: $(grep -m1 '^warning' "$dir/out_$sm")"; fi
done
exit $failed
