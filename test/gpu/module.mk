# test/gpu/module.mk: the programs test/gpu/check.sh runs on a real GPU, built with nvcc into
# $(BUILD)/gpu/: every kernel test and the GPU engine's contract test in each precision, and the
# kernel benchmark in FP16 and BF16 (the same sources the CPU runtime runs in make test).
#   make gpu-checks        (needs nvcc; run by test/gpu/check.sh on a GPU machine)

GPU_OUT := $(BUILD)/gpu
NVCC_TEST_FLAGS = -O3 -std=c++17 -arch=sm_$(GPU_SM) -Xcompiler -fopenmp -I. -Ikernels -Itest -Ireference -Icommon -Idev/cuda
GPU_CHECK_DEPS = $(KERNEL_HEADERS) $(wildcard dev/cuda/*.cuh test/*.h test/*.cuh) train_gpt2.cu cuda_libs.cuh train_gpt2_zero.cuh train_gpt2_pipe.cuh $(HOST_LIB) $(NVCC_STAMP) $(MPI_STAMP)

# $(call nvcc_program,OUTPUT,SOURCE,DEFINES)
define nvcc_program
$(1): $(2) $$(GPU_CHECK_DEPS)
	@mkdir -p $$(dir $$@)
	$$(NVCC) $$(NVCC_TEST_FLAGS) $(3) $(2) $$(HOST_LIB) -lcublasLt $$(NVCC_NCCL) $$(MPI_LIBS) -o $$@
GPU_CHECK_BINS += $(1)
endef

GPU_CHECK_BINS :=
$(foreach src,$(KERNEL_TEST_SRC) test/test_gpu_engine.cu,$(foreach p,$(EMU_PRECISIONS),$(eval \
  $(call nvcc_program,$(GPU_OUT)/$(basename $(notdir $(src)))_$(p),$(src),$(call precision_define,$(p))))))
$(foreach p,fp16 bf16,$(eval $(call nvcc_program,$(GPU_OUT)/bench_kernels_$(p),dev/cuda/bench_kernels.cu,$(call precision_define,$(p)))))
# The flash kernels against their double-precision references, both families (mma.sync; wgmma where
# the GPU runs it), and the warpgroup primitives against the PTX ISA's layouts: on an H100 these
# check, on the hardware, the layouts the CPU runtime emulates.
$(foreach p,fp16 bf16,$(foreach t,test_flash_fwd test_flash_bwd,$(eval \
  $(call nvcc_program,$(GPU_OUT)/$(t)_$(p),dev/cuda/$(t).cu,$(call precision_define,$(p))))))
$(eval $(call nvcc_program,$(GPU_OUT)/test_wgmma,test/cuda_cpu/test_wgmma.cu,))

.PHONY: gpu-checks
gpu-checks: $(GPU_CHECK_BINS) $(BUILD)/test/gen_data

# make test-long runs the check script's dry run through the CPU runtime (every step of the script
# at toy sizes: about 45 s of CPU, 70-120 s of wall time beside another test).
ifneq ($(CUDA_CPU_HAVE_CUDA),)
TESTS_LONG += test/gpu/test_check_dry.sh
TEST_LONG_DEPS += $(BUILD)/dev/bench_kernels_emu $(BUILD)/test/gen_data $(BUILD)/emu/train_gpt2_emu_fp16 \
	$(BUILD)/test/test_gpu_engine_fp16 $(BUILD)/kernels/test_gelu_fp16 $(BUILD)/kernels/test_global_norm_fp16
endif
