# test/cuda_cpu/module.mk: the CPU runtime for the project's CUDA code (see test/cuda_cpu/README.md),
# the make function other modules use to build a .cu into a CPU program, and the runtime's own tests.
#
#   $(eval $(call cuda_cpu_program,OUTPUT,SOURCE.cu,INCLUDE_DIRS,EXTRA_LINK_INPUTS[,EXTRA_CFLAGS]))
# builds the executable OUTPUT from SOURCE.cu: cu2cpu.pl rewrites the launches and shared memory of
# SOURCE.cu and of every project header it includes into OUTPUT.gen/, g++ compiles that with
# cuda_cpu.h force-included, and the link adds EXTRA_LINK_INPUTS (objects such as
# $(BUILD)/reference/ops_cpu.o, which also become prerequisites), the runtime and MPI.
# EXTRA_CFLAGS $(CUDA_CPU_CHECK_FLAGS) builds a checked program: every kernel launch then runs under
# two schedules with races, bounds, initialisation and host pointers checked (README.md).

CUDA_HOME ?= /usr/local/cuda
CUDA_CPU_CXX ?= g++
# -g1: line tables and inlined calls, all the runtime's reports need (addr2line -i names a race's or a
# fault's source line); full -g cost a quarter more compile time and was never read.
CUDA_CPU_OPT ?= -O2 -g1
# CUDA_CPU_SAN="-fsanitize=address" builds the runtime and programs under ASan (use another BUILD).
CUDA_CPU_SAN ?=
CUDA_CPU_OUT := $(BUILD)/cuda_cpu
export CUDA_CPU_OUT
CUDA_CPU_LIB := $(CUDA_CPU_OUT)/libcuda_cpu.a
CUDA_CPU_HAVE_CUDA := $(wildcard $(CUDA_HOME)/include/cuda_runtime.h)
CUDA_CPU_HAVE_MPI := $(shell command -v mpicxx 2>/dev/null)
CUDA_CPU_MPI_CFLAGS := $(if $(CUDA_CPU_HAVE_MPI),$(shell mpicxx -showme:compile 2>/dev/null))
CUDA_CPU_MPI_LIBS := $(if $(CUDA_CPU_HAVE_MPI),$(shell mpicxx -showme:link 2>/dev/null))
# _FORTIFY_SOURCE must stay off: its longjmp check refuses to jump between fiber stacks.
# test/cuda_cpu/include holds the cooperative groups subset; it comes before CUDA's own headers.
# -gdwarf-4: Debian 12's addr2line (binutils 2.40) read GCC 12's DWARF 5 line table of a rewritten
# program (its main file starts with a #line) one file entry off, naming the main file for a kernel
# in a header; it reads DWARF 4's right.
CUDA_CPU_FLAGS = -std=gnu++17 $(CUDA_CPU_OPT) -gdwarf-4 $(CUDA_CPU_SAN) -U_FORTIFY_SOURCE -pthread -fopenmp \
	-Wall -Wno-unused-parameter -Wno-unknown-pragmas -Itest/cuda_cpu/include -isystem $(CUDA_HOME)/include -Itest
# The checks' instrumentation: GCC's ThreadSanitizer and alignment-UBSan callbacks, which the runtime
# implements itself (check_cpu.cpp), so the link takes neither libtsan nor libubsan. GCC refuses it
# beside AddressSanitizer: an ASan build (CUDA_CPU_SAN) is an unchecked one.
CUDA_CPU_CHECK_FLAGS := $(if $(findstring address,$(CUDA_CPU_SAN)),,\
	-fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -fsanitize=alignment)
CUDA_CPU_LIB_SRC := test/cuda_cpu/cuda_cpu.cpp test/cuda_cpu/streams_cpu.cpp test/cuda_cpu/check_cpu.cpp test/cuda_cpu/intrinsics_cpu.cpp \
	test/cuda_cpu/cublaslt_cpu.cpp $(if $(CUDA_CPU_HAVE_MPI),test/cuda_cpu/nccl_cpu.cpp)
CUDA_CPU_LIB_OBJ := $(patsubst test/cuda_cpu/%.cpp,$(CUDA_CPU_OUT)/obj/%.o,$(CUDA_CPU_LIB_SRC))
CUDA_CPU_HEADERS := test/cuda_cpu/cuda_cpu.h $(wildcard test/cuda_cpu/include/*.h test/cuda_cpu/include/*/*.h)
CUDA_CPU_DEPS := $(CUDA_CPU_HEADERS) test/cuda_cpu/cu2cpu.pl test/cuda_cpu/module.mk $(CUDA_CPU_LIB)

# The kernels' registers (ptxas, sm_90a: an H100's code, the wgmma kernels' real registers), which the
# runtime checks each launch against: written at build time by the nvcc compile check
# (test_nvcc_compile.sh --build, which compiles each file's sm_90a device code once into a cache that
# its test in make test-long reuses), read by the runtime from this path (CUDA_CPU_REGISTERS overrides
# it).
CUDA_CPU_REGISTERS_DB := $(CUDA_CPU_OUT)/nvcc/registers.db
CUDA_CPU_NVCC_INPUTS := $(wildcard train_gpt2.cu cuda_libs.cuh train_gpt2_zero.cuh train_gpt2_pipe.cuh kernels/*.cu kernels/*.cuh kernels/*.h common/*.h reference/*.h test/*.h \
	test/*.cuh test/*.cu test/cuda_cpu/*.cu test/cuda_cpu/*.h dev/cuda/*.cu dev/cuda/*.cuh)
# The trainer's build (make train) compiles train_gpt2.cu for sm_90a in $(PRECISION) anyway where
# GPU_ARCH is 90 (the default without a GPU): its ptxas log (TRAIN_NVCC_LOG) stands for that compile
# (--reuse; its other flags, -DUSE_NCCL and the host's, change host code only), unless NVCC_FLAGS was
# set by hand. The table then waits for the trainer's compile.
CUDA_CPU_TRAINER_REUSE := $(if $(and $(HAVE_NVCC),$(filter 90a,$(GPU_SM)),$(filter file,$(origin NVCC_FLAGS))),\
	--reuse train_gpt2_$(PRECISION)=$(TRAIN_NVCC_LOG))
CUDA_CPU_NVCC_BUILD = @NVCC=$(NVCC) CUDA_CPU_OUT=$(CUDA_CPU_OUT) bash test/cuda_cpu/test_nvcc_compile.sh --build $(1) $(CUDA_CPU_TRAINER_REUSE)
# make test's programs run their kernels in FP16 (the other precisions' kernel tests are make
# test-long's), so make test compiles FP16 alone (nvcc was half of its build time); make test-long adds
# FP32 and BF16 to the same table (the FP16 compiles are cached) before its tests run.
$(CUDA_CPU_REGISTERS_DB): $(CUDA_CPU_NVCC_INPUTS) test/cuda_cpu/test_nvcc_compile.sh $(if $(CUDA_CPU_TRAINER_REUSE),$(BUILD)/train_gpt2.o)
	@mkdir -p $(dir $@)
	@echo "nvcc: compiling the sm_90a device code of the .cu files the CPU runtime runs, in FP16 (cached per file), for the kernels' registers"
	$(call CUDA_CPU_NVCC_BUILD,FP16)
CUDA_CPU_REGISTERS_ALL := $(CUDA_CPU_OUT)/nvcc/registers-all.stamp
$(CUDA_CPU_REGISTERS_ALL): $(CUDA_CPU_REGISTERS_DB)
	@echo "nvcc: compiling the sm_90a device code of the .cu files the CPU runtime runs, in FP32, FP16 and BF16, for the kernels' registers"
	$(call CUDA_CPU_NVCC_BUILD,FP32 FP16 BF16)
	@touch $@
TEST_DEPS += $(CUDA_CPU_REGISTERS_DB)
TEST_LONG_DEPS += $(CUDA_CPU_REGISTERS_ALL)

$(CUDA_CPU_OUT)/obj/%.o: test/cuda_cpu/%.cpp test/cuda_cpu/cuda_cpu.h test/cuda_cpu/cuda_cpu_internal.h test/cuda_cpu/module.mk
	@mkdir -p $(dir $@)
	$(CUDA_CPU_CXX) $(CUDA_CPU_FLAGS) $(CUDA_CPU_MPI_CFLAGS) -DCUDA_CPU_REGISTERS_DB='"$(abspath $(CUDA_CPU_REGISTERS_DB))"' -c $< -o $@

$(CUDA_CPU_LIB): $(CUDA_CPU_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

define cuda_cpu_program
$(1): $(2) $$(CUDA_CPU_DEPS) $(filter-out -%,$(4))
	@mkdir -p $$(dir $$@)
	perl test/cuda_cpu/cu2cpu.pl -o $(1).gen --prune -d $(1).d -t $(1) $(addprefix -I,$(3)) $(2)
	$$(CUDA_CPU_CXX) $$(CUDA_CPU_FLAGS) $$(CUDA_CPU_MPI_CFLAGS) $(5) -x c++ -include test/cuda_cpu/cuda_cpu.h \
		$(foreach d,$(3),-I$(1).gen/$(d) -I$(d)) -c $(1).gen/$(2) -o $(1).o
	$$(CUDA_CPU_CXX) $$(CUDA_CPU_FLAGS) $(1).o $(4) $$(CUDA_CPU_LIB) $$(CUDA_CPU_MPI_LIBS) -lm -o $$@
-include $(1).d
endef

# The compile and link lines of a checked program, for building another project's .cu by hand
# (test/cuda_cpu/README.md, "Someone else's program"; dev/corpus_samples.sh and test_compile_dir.sh):
#   make -s cuda-cpu-flags  ->  line 1: the compile command, to put before the rewritten source
#                               line 2: the link command, to put before the program's objects
#                               line 3: the link inputs, to put after them
# Paths absolute, so the lines work from any directory.
CUDA_CPU_FLAGS_ABS = $(foreach f,$(CUDA_CPU_FLAGS),$(if $(filter -Itest%,$(f)),-I$(CURDIR)/$(patsubst -I%,%,$(f)),$(f)))
.PHONY: cuda-cpu-flags
cuda-cpu-flags:
	@echo "$(CUDA_CPU_CXX) $(CUDA_CPU_FLAGS_ABS) $(CUDA_CPU_MPI_CFLAGS) $(CUDA_CPU_CHECK_FLAGS) -x c++ -include $(CURDIR)/test/cuda_cpu/cuda_cpu.h"
	@echo "$(CUDA_CPU_CXX) $(CUDA_CPU_FLAGS_ABS)"
	@echo "$(abspath $(CUDA_CPU_LIB)) $(CUDA_CPU_MPI_LIBS) -lm"

ifneq ($(CUDA_CPU_HAVE_CUDA),)
# ---- the runtime's own tests and benchmark ----
# test_bugs: one buggy kernel per class of GPU bug, each caught (in a child process) with a message
# naming the kernel; test_patterns: correct kernels in the styles real CUDA code uses, which must
# pass under every schedule without a false alarm.
CUDA_CPU_TESTS := $(CUDA_CPU_OUT)/test_runtime $(CUDA_CPU_OUT)/test_cublaslt $(CUDA_CPU_OUT)/test_wmma $(CUDA_CPU_OUT)/test_mma \
	$(CUDA_CPU_OUT)/test_wgmma $(CUDA_CPU_OUT)/test_count \
	$(CUDA_CPU_OUT)/test_example_gelu $(CUDA_CPU_OUT)/test_bugs $(CUDA_CPU_OUT)/test_patterns
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_runtime,test/cuda_cpu/test_runtime.cu,test,,$(CUDA_CPU_CHECK_FLAGS)))
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_cublaslt,test/cuda_cpu/test_cublaslt.cu,test,,$(CUDA_CPU_CHECK_FLAGS)))
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_wmma,test/cuda_cpu/test_wmma.cu,test,,$(CUDA_CPU_CHECK_FLAGS)))
# test_mma: the PTX-level primitives of kernels/mma.cuh against the PTX ISA's layouts
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_mma,test/cuda_cpu/test_mma.cu,test kernels,,$(CUDA_CPU_CHECK_FLAGS)))
# test_wgmma: the warpgroup primitives of kernels/wgmma.cuh (sm_90a) against the PTX ISA's layouts
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_wgmma,test/cuda_cpu/test_wgmma.cu,test kernels,,$(CUDA_CPU_CHECK_FLAGS)))
# test_count: CUDA_CPU_COUNT's figures for the warp primitives and their plain-access equivalents
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_count,test/cuda_cpu/test_count.cu,test kernels,,$(CUDA_CPU_CHECK_FLAGS)))
# With MPI the runtime has NCCL: the stream cases then include collectives on a comm stream.
CUDA_CPU_NCCL_DEF := $(if $(CUDA_CPU_HAVE_MPI),-DCUDA_CPU_NCCL)
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_bugs,test/cuda_cpu/test_bugs.cu,test,,$(CUDA_CPU_CHECK_FLAGS) $(CUDA_CPU_NCCL_DEF) \
	-DCUDA_CPU_REGISTERS_FILE='"$(abspath $(CUDA_CPU_REGISTERS_DB))"'))
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_patterns,test/cuda_cpu/test_patterns.cu,test,,$(CUDA_CPU_CHECK_FLAGS) $(CUDA_CPU_NCCL_DEF)))
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_nccl,test/cuda_cpu/test_nccl.cu,test))
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/bench_reduce,test/cuda_cpu/bench_reduce.cu,test))
$(eval $(call cuda_cpu_program,$(CUDA_CPU_OUT)/test_example_gelu,test/cuda_cpu/test_example_gelu.cu,test reference common,\
	$(BUILD)/reference/ops_cpu.o $(BUILD)/reference/gemm_cpu.o $(BUILD)/common/util.o,$(CUDA_CPU_CHECK_FLAGS)))

TESTS += $(CUDA_CPU_TESTS) test/cuda_cpu/test_nccl.sh
# A program rewritten in one directory and compiled in another names its own files (about 1 s). Not in
# the sanitizer pass: it builds with the runtime of make test's build, and holds no host code of ours.
TESTS += test/cuda_cpu/test_compile_dir.sh
TESTS_SAN_SKIP += test/cuda_cpu/test_compile_dir.sh
TEST_DEPS += $(CUDA_CPU_LIB)
TESTS_LONG += test/cuda_cpu/test_nvcc_compile.sh
BENCHES += test/cuda_cpu/bench.sh
# make builds only the TESTS and BENCHES that are not scripts; these scripts run programs built here
test: $(if $(CUDA_CPU_HAVE_MPI),$(CUDA_CPU_OUT)/test_nccl)
bench: $(CUDA_CPU_TESTS) $(CUDA_CPU_OUT)/bench_reduce
else
TESTS += test/cuda_cpu/skip_no_cuda.sh
endif
