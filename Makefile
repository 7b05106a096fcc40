# Makefile: builds the trainer, tools, tests and benchmarks.
#   make train   ./train_gpt2: the GPU trainer (train_gpt2.cu, nvcc; cuBLASLt and NCCL are loaded when
#                its GPU engine starts, not linked) when nvcc is found, else the C-only trainer;
#                either runs the C engine where no GPU can be used
#   make emu     ./train_gpt2_emu: the same train_gpt2.cu and kernels through the CPU runtime
#                (test/cuda_cpu): the GPU code path on any machine, slowly
#   make test    builds and runs the tests that need no GPU, several at once, in under 10 minutes on
#                2 cores; prints [k/n] per test and ends with "N passed, N failed"
#   make test-long  the slower tests (CI runs both: .ci/run)
#   make bench   prints speed figures
#   make clean
# make builds with every core by default (make -j1 for one job; TEST_JOBS=1 runs one test at a time).
# PRECISION=FP16 (default) | BF16 | FP32 picks the GPU engine's precision at build time.
# GPU_ARCH=90 picks the GPU architecture (default: the local GPU's, else 90); 90 builds sm_90a, Hopper's
# arch-specific code (its wgmma flash attention, kernels/flash_wgmma.cuh), which runs on compute 9.0 only.
# Each folder may add its own rules in a module.mk (included below); they append test
# programs to TESTS (scripts add what they run to TEST_DEPS) and benchmark commands to BENCHES.

# Every core unless a -j was given.
NPROC := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(NPROC)
endif

CC ?= gcc
OPT ?= -O3 -march=native
# -fno-math-errno lets sqrtf vectorize (AdamW); results are unchanged (errno is never read).
CFLAGS_BASE = $(OPT) -fno-math-errno -fopenmp -Wall -Wextra -Wno-unused-parameter -Icommon -Ireference -Itest
CFLAGS = -std=gnu11 $(CFLAGS_BASE)
LDLIBS = -lm
BUILD = build
# Debian's PyTorch lives under the system python, not a pyenv one that may come first on PATH.
PYTHON ?= /usr/bin/python3
export PYTHON

# ---- precision of the GPU engine: one switch, checked here and again in kernels/common.cuh ----
PRECISION ?= FP16
ifeq ($(filter $(PRECISION),FP32 FP16 BF16),)
$(error PRECISION=$(PRECISION): expected FP32, FP16 or BF16)
endif
# A stamp per precision: switching PRECISION rebuilds what depends on it.
PRECISION_STAMP := $(BUILD)/precision-$(PRECISION).stamp

# ---- CUDA ----
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(wildcard $(NVCC))
GPU_ARCH ?= $(or $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.'),90)
GPU_SM = $(if $(filter 90,$(GPU_ARCH)),90a,$(GPU_ARCH))
# The host side built as the C engine is: -march=native and -fno-math-errno let the offloaded
# optimizer's AdamW loop vectorize (dev/bench_adamw_host prints what that buys).
NVCC_HOST_FLAGS ?= -march=native,-fno-math-errno
NVCC_FLAGS = -O3 -std=c++17 -arch=sm_$(GPU_SM) -Xcompiler -fopenmp,-Wall,-Wno-unused-parameter,$(NVCC_HOST_FLAGS) \
	-Icommon -Ireference -Ikernels -DENABLE_$(PRECISION)

# ---- MPI (ranks; common/ranks.c) and NCCL (the GPU engine's collectives), each when found ----
MPICC := $(shell command -v mpicc 2>/dev/null)
MPI_CFLAGS := $(if $(MPICC),-DUSE_MPI $(shell mpicc -showme:compile 2>/dev/null))
MPI_LIBS := $(if $(MPICC),$(shell mpicc -showme:link 2>/dev/null))
HAVE_NCCL := $(wildcard $(CUDA_HOME)/include/nccl.h)
# nccl.h gives the GPU engine NCCL's types. Neither NCCL nor cuBLASLt is linked: the GPU engine
# loads cuBLASLt when it starts, and NCCL too when the run has more than one rank (cuda_libs.cuh).
NVCC_NCCL := $(if $(HAVE_NCCL),-DUSE_NCCL)

# ---- the build's configuration: a stamp per group of settings ----
# $(call config_stamp,NAME,SETTINGS) is $(BUILD)/config/NAME.stamp, rewritten (so newer than what was
# built before) only when SETTINGS differ from those it holds. What a group's settings shape depends
# on its stamp, so installing OpenMPI, pointing CUDA_HOME elsewhere or changing OPT rebuilds exactly
# what they change, as PRECISION does; no `make clean` needed. A stamp made for the first time is
# dated 1970: it says nothing against what is already built.
CONFIG_DIR := $(BUILD)/config
$(shell mkdir -p $(CONFIG_DIR))
str_differ = $(subst $(1),,$(2))$(subst $(2),,$(1))
config_stamp = $(strip $(if $(wildcard $(CONFIG_DIR)/$(1).stamp),\
	$(if $(call str_differ,$(strip $(2)),$(strip $(file <$(CONFIG_DIR)/$(1).stamp))),\
		$(file >$(CONFIG_DIR)/$(1).stamp,$(strip $(2)))),\
	$(file >$(CONFIG_DIR)/$(1).stamp,$(strip $(2)))$(shell touch -d @1 $(CONFIG_DIR)/$(1).stamp))\
	$(CONFIG_DIR)/$(1).stamp)
# host C code: the compiler and its flags
HOST_STAMP := $(call config_stamp,host,host: $(CC) | $(CFLAGS) | $(LDLIBS))
# MPI found or lost (common/ranks.c; the trainer's link; the CPU runtime's NCCL over MPI)
MPI_STAMP := $(call config_stamp,mpi,mpi: $(or $(MPICC),none) | $(MPI_CFLAGS) | $(MPI_LIBS) | \
	$(or $(shell command -v mpicxx 2>/dev/null),none))
# nvcc found or lost, where CUDA lives, NCCL, the architecture and nvcc's flags (PRECISION has its own stamp)
NVCC_STAMP := $(call config_stamp,nvcc,nvcc: $(CUDA_HOME) | $(or $(HAVE_NVCC),none) | $(or $(HAVE_NCCL),no-nccl) | \
	$(filter-out -DENABLE_%,$(NVCC_FLAGS)))

COMMON_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard common/*.c))
REF_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard reference/*.c))
# All host code in one archive: programs link only the objects they use.
HOST_LIB = $(BUILD)/libgpt2host.a
KERNEL_HEADERS = $(wildcard kernels/*.cuh) kernels/sizes.h
# Modules append test programs to TESTS (make test, within 10 minutes on 2 cores) or, when slower,
# to TESTS_LONG (make test-long; what only those need to TEST_LONG_DEPS).
TESTS :=
TESTS_LONG :=
TEST_LONG_DEPS :=
BENCHES :=

.PHONY: all train emu test test-long bench clean
all: train

train: train_gpt2

$(BUILD)/%.o: %.c $(wildcard common/*.h reference/*.h test/*.h) kernels/sizes.h $(HOST_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/common/ranks.o: common/ranks.c $(wildcard common/*.h) $(HOST_STAMP) $(MPI_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(HOST_LIB): $(COMMON_OBJ) $(REF_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(PRECISION_STAMP):
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/precision-*.stamp
	@touch $@

# The GPU trainer: train_gpt2.cu compiled to $(BUILD)/train_gpt2.o, then linked. ptxas's resource use
# (-Xptxas -v) goes to TRAIN_NVCC_LOG, nvcc's other output (warnings, errors) to the terminal: the CPU
# runtime's register table takes train_gpt2's sm_90a registers from that log instead of compiling the
# file again (test/cuda_cpu/module.mk).
TRAIN_NVCC_LOG := $(BUILD)/train_gpt2.nvcc.log
ifneq ($(HAVE_NVCC),)
train_gpt2: train_gpt2.cu cuda_libs.cuh train_gpt2_zero.cuh train_gpt2_pipe.cuh $(KERNEL_HEADERS) $(HOST_LIB) $(PRECISION_STAMP) $(NVCC_STAMP) $(MPI_STAMP)
	@echo "train: building the GPU trainer ($(PRECISION), sm_$(GPU_SM)$(if $(MPICC),, no MPI)$(if $(HAVE_NCCL),, no NCCL)) with $(NVCC); without a usable GPU it runs the C engine"
	$(NVCC) $(NVCC_FLAGS) $(NVCC_NCCL) -Xptxas -v -c train_gpt2.cu -o $(BUILD)/train_gpt2.o > $(TRAIN_NVCC_LOG) 2>&1; \
		s=$$?; grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' $(TRAIN_NVCC_LOG); exit $$s
	$(NVCC) $(NVCC_FLAGS) $(BUILD)/train_gpt2.o $(HOST_LIB) -ldl $(NVCC_NCCL) $(MPI_LIBS) -o $@
else
train_gpt2: $(BUILD)/train_gpt2_cpu.o $(HOST_LIB) $(NVCC_STAMP) $(MPI_STAMP)
	@echo "train: no nvcc at $(NVCC) (set CUDA_HOME): building the C-only trainer"
	$(CC) $(CFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS) $(MPI_LIBS)
endif

# The CPU runtime first: other modules use its make function (cuda_cpu_program).
include test/cuda_cpu/module.mk
# Its compiler, flags and CUDA headers: every program built through it depends on its library,
# so the library's objects depending on the stamps rebuilds them all.
CUDA_CPU_STAMP := $(call config_stamp,cuda_cpu,cuda_cpu: $(CUDA_HOME) | $(or $(CUDA_CPU_HAVE_CUDA),none) | \
	$(CUDA_CPU_CXX) | $(CUDA_CPU_FLAGS) | $(CUDA_CPU_CHECK_FLAGS))
$(CUDA_CPU_LIB_OBJ): $(CUDA_CPU_STAMP) $(MPI_STAMP)

# ./train_gpt2_emu: train_gpt2.cu and the kernels through the CPU runtime, in $(PRECISION). The tests
# use $(BUILD)/emu/train_gpt2_emu_{fp32,fp16,bf16}, one per precision.
precision_define = -DENABLE_$(subst fp,FP,$(subst bf,BF,$(1)))
EMU_PRECISIONS := fp32 fp16 bf16
EMU_BINS := $(foreach p,$(EMU_PRECISIONS),$(BUILD)/emu/train_gpt2_emu_$(p))
ifneq ($(CUDA_CPU_HAVE_CUDA),)
# The runtime maps NCCL onto MPI, so the emulated trainer has ranks wherever MPI is installed.
EMU_NCCL := $(if $(CUDA_CPU_HAVE_MPI),-DUSE_NCCL)
$(foreach p,$(EMU_PRECISIONS),$(eval $(call cuda_cpu_program,$(BUILD)/emu/train_gpt2_emu_$(p),train_gpt2.cu,\
	kernels common reference,$(HOST_LIB),$(call precision_define,$(p)) $(EMU_NCCL))))
train_gpt2_emu: $(BUILD)/emu/train_gpt2_emu_$(subst FP,fp,$(subst BF,bf,$(PRECISION))) $(PRECISION_STAMP)
	cp $< $@
	@echo "emu: ./train_gpt2_emu is train_gpt2.cu ($(PRECISION)) on the CPU runtime: the GPU code path, slowly"
else
train_gpt2_emu:
	@echo "emu: needs the CUDA toolkit's headers at $(CUDA_HOME)/include (set CUDA_HOME)"; exit 1
endif
emu: train_gpt2_emu

-include $(filter-out test/cuda_cpu/module.mk,$(sort $(wildcard */module.mk */*/module.mk)))

test: $(filter-out %.sh %.py %.js,$(TESTS)) $(TEST_DEPS) train_gpt2
	@bash test/run_tests.sh $(TESTS)

test-long: $(filter-out %.sh %.py %.js,$(TESTS_LONG)) $(TEST_DEPS) $(TEST_LONG_DEPS) train_gpt2
	@bash test/run_tests.sh $(TESTS_LONG)

bench: train_gpt2 $(filter-out %.sh %.py,$(BENCHES))
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

clean:
	rm -rf $(BUILD) train_gpt2 train_gpt2_emu $(CLEAN_EXTRA)
