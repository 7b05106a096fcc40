# dev/module.mk: microbenchmarks (make bench), and dev/cuda: kernel variants and the kernel
# benchmark (dev/cuda/bench_kernels.cu; on a GPU test/gpu/check.sh builds it with nvcc).

$(BUILD)/dev/bench_engine: $(BUILD)/dev/bench_engine.o $(REF_OBJ) $(BUILD)/common/gpt2_config.o $(BUILD)/common/util.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
BENCHES += $(BUILD)/dev/bench_engine
# bench_memory.sh's judgement of its time figures (median, spread, a difference within the spread
# marked), with a stand-in trainer: seconds. Not in the sanitizer pass: no program of ours runs.
TESTS += test/test_bench_memory.sh
TESTS_SAN_SKIP += test/test_bench_memory.sh

# Through the CPU runtime it only shows the benchmark runs (the check script's dry mode); its
# figures mean nothing there.
ifneq ($(CUDA_CPU_HAVE_CUDA),)
$(eval $(call cuda_cpu_program,$(BUILD)/dev/bench_kernels_emu,dev/cuda/bench_kernels.cu,kernels dev/cuda common,\
	$(HOST_LIB),-DENABLE_FP16))
BENCHES += dev/bench_emu.sh
# what recompute, accumulation and ZeRO save and cost per step (ZeRO under mpirun when it is there)
BENCHES += dev/bench_memory.sh
bench: $(BUILD)/emu/train_gpt2_emu_fp16 $(BUILD)/test/gen_data
endif

# The seed of the FlashAttention-2-style attention (S = Q K^T through kernels/mma.cuh), checked.
ifneq ($(CUDA_CPU_HAVE_CUDA),)
$(eval $(call cuda_cpu_program,$(BUILD)/dev/test_qk_tile,dev/cuda/test_qk_tile.cu,kernels dev/cuda test,,$(CUDA_CPU_CHECK_FLAGS)))
TESTS += $(BUILD)/dev/test_qk_tile
# kernels/flash_fwd.cuh, the FlashAttention-2-style causal forward (scores, softmax and P V in registers;
# the trainer's forward in FP16/BF16 at head sizes 32 and 64), checked against a double-precision
# reference with derived bounds. Built per precision: the cases of floatX's type compare with
# kernels/attention.cuh's tiled forward too.
$(foreach p,fp16 bf16,$(eval $(call cuda_cpu_program,$(BUILD)/dev/test_flash_fwd_$(p),dev/cuda/test_flash_fwd.cu,\
	kernels dev/cuda test common,$(HOST_LIB),$(call precision_define,$(p)) $(CUDA_CPU_CHECK_FLAGS))))
# The bf16 one (the same code paths) in make test-long, as the backward's.
TESTS += $(BUILD)/dev/test_flash_fwd_fp16
TESTS_LONG += $(BUILD)/dev/test_flash_fwd_bf16
# kernels/flash_bwd.cuh, the FlashAttention-2-style causal backward (a query-major dQ kernel that also
# writes D, then a key-major dK/dV kernel; the trainer's backward in FP16/BF16 at head sizes 32 and 64), checked against a double-precision reference with derived bounds, against
# kernels/attention.cuh's tiled backward, and for bit-identical repeats. Built per precision; the bf16
# one (the same code paths) only in the long tests. Here beside test_flash_fwd.cu rather than in
# kernels/: kernels/module.mk builds every kernels/test_*.cu in FP32 too, which mma.sync cannot serve
# (kernels/test_attention.cu checks both flash kernels in the trainer's dispatch, every precision).
$(foreach p,fp16 bf16,$(eval $(call cuda_cpu_program,$(BUILD)/dev/test_flash_bwd_$(p),dev/cuda/test_flash_bwd.cu,\
	kernels dev/cuda test common,$(HOST_LIB),$(call precision_define,$(p)) $(CUDA_CPU_CHECK_FLAGS))))
TESTS += $(BUILD)/dev/test_flash_bwd_fp16
TESTS_LONG += $(BUILD)/dev/test_flash_bwd_bf16
endif

# The offloaded optimizer's host AdamW per precision, with the trainer's host flags (no GPU needed).
ifneq ($(HAVE_NVCC),)
BENCH_ADAMW_HOST := $(foreach p,fp16 bf16 fp32,$(BUILD)/dev/bench_adamw_host_$(p))
$(BUILD)/dev/bench_adamw_host_%: dev/bench_adamw_host.cu kernels/adamw.cuh kernels/common.cuh $(NVCC_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(filter-out -DENABLE_%,$(NVCC_FLAGS)) $(call precision_define,$*) $< -o $@
BENCHES += $(BENCH_ADAMW_HOST)
# The GPU check script runs the fp16 one (step 8), and its dry run in make test-long, so it cannot rot.
TEST_LONG_DEPS += $(BUILD)/dev/bench_adamw_host_fp16
gpu-checks: $(BUILD)/dev/bench_adamw_host_fp16
endif

# The kernel report (dev/kernel_report.sh): the trainer built with the runtime's instrumentation, so
# CUDA_CPU_COUNT can count what every launch moves and computes.
ifneq ($(CUDA_CPU_HAVE_CUDA),)
KERNEL_COUNT_BINS := $(foreach p,fp16 bf16,$(BUILD)/dev/train_gpt2_count_$(p))
$(foreach p,fp16 bf16,$(eval $(call cuda_cpu_program,$(BUILD)/dev/train_gpt2_count_$(p),train_gpt2.cu,\
	kernels common reference,$(HOST_LIB),$(call precision_define,$(p)) $(CUDA_CPU_CHECK_FLAGS))))
# The trainer's attention alone at a given shape (FlashAttention-2's benchmark configuration in the
# report's calibration table).
$(eval $(call cuda_cpu_program,$(BUILD)/dev/count_attention_fp16,dev/cuda/count_attention.cu,kernels dev/cuda common,\
	$(HOST_LIB),-DENABLE_FP16 $(CUDA_CPU_CHECK_FLAGS)))
KERNEL_COUNT_BINS += $(BUILD)/dev/count_attention_fp16
# llm.c's train_gpt2.cu (BF16, no cuDNN, one GPU) through the same runtime and counting, when a
# checkout is at LLMC_DIR (git-ignored ./llm.c by default; dev/kernel_report.sh says how to get the
# pinned commit). Rewritten from inside LLMC_DIR, so that cu2cpu.pl takes its llmc/ headers as the
# program's own; dev/llmc_cuda13.h gives it CUDA 12's cudaMemAdvise.
LLMC_DIR ?= llm.c
export LLMC_DIR
# llmc_program(OUTPUT, CHECKOUT, SOURCES, DEFINES): llm.c's trainer from CHECKOUT through the runtime,
# checked, rewritten from inside the checkout (its llmc/ headers are the program's own) with the
# runtime's source lines naming the files from here; rebuilt when SOURCES change; DEFINES its precision
# (none: BF16, llm.c's default).
define llmc_program
$(1): $(3) dev/llmc_cuda13.h $(CUDA_CPU_DEPS)
	@mkdir -p $$(dir $$@)
	cd $(2) && perl $(abspath test/cuda_cpu/cu2cpu.pl) -o $$(abspath $$@).gen --prune --compile-dir $(CURDIR) -I llmc train_gpt2.cu
	$(CUDA_CPU_CXX) $(CUDA_CPU_FLAGS) $(CUDA_CPU_MPI_CFLAGS) $(CUDA_CPU_CHECK_FLAGS) -w -x c++ -include test/cuda_cpu/cuda_cpu.h \
		-include dev/llmc_cuda13.h -I$(2) $(4) -c $$@.gen/train_gpt2.cu -o $$@.o
	$(CUDA_CPU_CXX) $(CUDA_CPU_FLAGS) $$@.o $(CUDA_CPU_LIB) $(CUDA_CPU_MPI_LIBS) -lm -o $$@
endef
LLMC_SOURCES := $(LLMC_DIR)/train_gpt2.cu $(wildcard $(LLMC_DIR)/llmc/*.h $(LLMC_DIR)/llmc/*.cuh)
ifneq ($(wildcard $(LLMC_DIR)/train_gpt2.cu),)
LLMC_COUNT_BIN := $(BUILD)/dev/llmc/train_gpt2cu_count
$(eval $(call llmc_program,$(LLMC_COUNT_BIN),$(LLMC_DIR),$(LLMC_SOURCES),))
KERNEL_COUNT_BINS += $(LLMC_COUNT_BIN)
endif
.PHONY: kernel-report
kernel-report: $(KERNEL_COUNT_BINS) $(BUILD)/test/gen_data $(CUDA_CPU_REGISTERS_DB)
	@bash dev/kernel_report.sh
endif

# The runtime's corpus (dev/runtime_corpus.sh): others' CUDA code, known to work on GPUs, through the
# CPU runtime. llm.c's train_gpt2.cu in FP32 (its products computed) as it is and with the fixes of
# dev/corpus/llmc_fixes.pl made in a copy, and llm.c's train_gpt2.c stepped the same way
# (dev/corpus/llmc_c_steps.c) to compare their losses; NVIDIA's CUDA samples (dev/corpus_samples.sh)
# when a checkout is at CUDA_SAMPLES_DIR. Each checkout is git-ignored and pinned by commit.
ifneq ($(CUDA_CPU_HAVE_CUDA),)
CORPUS := $(BUILD)/dev/corpus
CORPUS_BINS :=
ifneq ($(wildcard $(LLMC_DIR)/train_gpt2.cu),)
$(CORPUS)/llmc_fixed/train_gpt2.cu: $(LLMC_SOURCES) dev/corpus/llmc_fixes.pl
	@rm -rf $(dir $@) && mkdir -p $(dir $@)
	cp -r $(LLMC_DIR)/train_gpt2.cu $(LLMC_DIR)/llmc $(dir $@)
	perl dev/corpus/llmc_fixes.pl $(dir $@)
# llm.c's trainer in FP32 as it is and fixed (llmc_program above).
$(eval $(call llmc_program,$(CORPUS)/llmc_fp32,$(LLMC_DIR),$(LLMC_SOURCES),-DENABLE_FP32))
$(eval $(call llmc_program,$(CORPUS)/llmc_fixed_fp32,$(CORPUS)/llmc_fixed,$(CORPUS)/llmc_fixed/train_gpt2.cu,-DENABLE_FP32))
$(CORPUS)/llmc_c_steps: dev/corpus/llmc_c_steps.c $(LLMC_DIR)/train_gpt2.c $(wildcard $(LLMC_DIR)/llmc/*.h)
	@mkdir -p $(dir $@)
	$(CC) -O2 -fopenmp -w -I$(LLMC_DIR) $< -lm -o $@
CORPUS_BINS += $(CORPUS)/llmc_fp32 $(CORPUS)/llmc_fixed_fp32 $(CORPUS)/llmc_c_steps
endif
CUDA_SAMPLES_DIR ?= cuda-samples
export CUDA_SAMPLES_DIR
.PHONY: runtime-corpus
runtime-corpus: $(CORPUS_BINS) $(BUILD)/test/gen_data $(CUDA_CPU_LIB)
	@bash dev/runtime_corpus.sh
# In make test-long when a checkout is there (a developer's machine; CI's fresh clone has none).
ifneq ($(CORPUS_BINS)$(wildcard $(CUDA_SAMPLES_DIR)/Common),)
TESTS_LONG += dev/runtime_corpus.sh
TEST_LONG_DEPS += $(CORPUS_BINS) $(CUDA_CPU_LIB)
endif
endif
# The SASS instruction mix of every kernel (needs an nvdisasm: CUDA 13 has none, see dev/sass_mix.sh).
.PHONY: sass-mix
sass-mix:
	@bash dev/sass_mix.sh $(or $(SASS_PRECISION),fp16)
# Its counting, on a sample of real nvdisasm output (no disassembler needed).
# make test-long: a developer's tool (Python over a sample of disassembly, no program built here, so
# not in the sanitizer pass).
TESTS_LONG += test/test_sass_mix.sh
# The kernel report's test: make test-long, which alone builds its counting trainer (about 40 s of
# CPU to compile beside the test's own 11 s).
ifneq ($(CUDA_CPU_HAVE_CUDA),)
TESTS_LONG += test/test_kernel_report.sh
TEST_LONG_DEPS += $(BUILD)/dev/train_gpt2_count_fp16 $(BUILD)/dev/count_attention_fp16
endif

# A model file as a directory Hugging Face's GPT-2 loads (config.json, model.safetensors).
$(BUILD)/export_hf: $(BUILD)/dev/export_hf.o $(HOST_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
TEST_DEPS += $(BUILD)/export_hf
