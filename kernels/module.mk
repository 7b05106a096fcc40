# kernels/module.mk: the kernel tests. Every kernels/test_NAME.cu is a test, built three times
# through the CPU runtime (build/kernels/test_NAME_fp32, _fp16, _bf16: one per precision): make test
# runs the FP16 ones (the default precision), make test-long the FP32 and BF16 ones (building all
# three was a third of make test's build time); adding a kernel test is adding its file. Each compares the kernels with the
# C reference engine's functions (reference/ops_cpu.h). They are checked builds
# ($(CUDA_CPU_CHECK_FLAGS)): every launch runs under two schedules, with races, bounds,
# initialisation, alignment and host pointers checked (test/cuda_cpu/README.md).

KERNEL_TEST_SRC := $(wildcard kernels/test_*.cu)
KERNEL_PRECISIONS := fp32 fp16 bf16

ifneq ($(CUDA_CPU_HAVE_CUDA),)
$(foreach src,$(KERNEL_TEST_SRC),$(foreach p,$(KERNEL_PRECISIONS),$(eval \
  $(call cuda_cpu_program,$(BUILD)/kernels/$(basename $(notdir $(src)))_$(p),$(src),kernels test reference common,$(HOST_LIB),$(call precision_define,$(p)) $(CUDA_CPU_CHECK_FLAGS)))))
KERNEL_TESTS := $(foreach src,$(KERNEL_TEST_SRC),$(foreach p,$(KERNEL_PRECISIONS),$(BUILD)/kernels/$(basename $(notdir $(src)))_$(p)))
TESTS += $(filter %_fp16,$(KERNEL_TESTS))
TESTS_LONG += $(filter-out %_fp16,$(KERNEL_TESTS))
.PHONY: kernel-tests
kernel-tests: $(KERNEL_TESTS)
# Which flash kernels attention launches by the GPU's generation (wgmma on sm_90, mma.sync on sm_80),
# each family through the attention test.
TESTS += test/test_attention_paths.sh
TEST_DEPS += $(BUILD)/kernels/test_attention_fp16
endif
