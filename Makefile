# Makefile: builds the trainer, tools, tests and benchmarks.
#   make train   ./train_gpt2: the GPU trainer (train_gpt2.cu, nvcc; cuBLASLt and NCCL are loaded when
#                its GPU engine starts, not linked) when nvcc is found, else the C-only trainer;
#                either runs the C engine where no GPU can be used
#   make emu     ./train_gpt2_emu: the same train_gpt2.cu and kernels through the CPU runtime
#                (test/cuda_cpu): the GPU code path on any machine, slowly
#   make test    builds and runs the tests that need no GPU, several at once, within 6 minutes on 2
#                cores from a clean clone; prints [k/n] per test and ends with "N passed, N failed"
#   make test-long  the slower tests (CI runs both: .ci/run)
#   make test-sanitize  the tests of host code once more under AddressSanitizer and UBSan, in a copy of
#                the tree (build/sanitize) built without CUDA
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
# the GPU engine's precision: switching PRECISION rebuilds what depends on it (a stamp written while
# make reads this file, not by a rule: a rule's job, however short, let make start other work before
# the trainer's compile, the build's longest)
PRECISION_STAMP := $(call config_stamp,precision,precision: $(PRECISION))
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
# Modules append test programs to TESTS (make test: 6 minutes on 2 cores from a clean clone, build
# included; a test goes there only if it checks something no faster test does) or, when slower, to
# TESTS_LONG (make test-long, 20 minutes; what only those need to TEST_LONG_DEPS). docs/testing.md,
# "The time budget".
TESTS :=
TESTS_LONG :=
TEST_LONG_DEPS :=
# The sanitizer pass (make test-sanitize) runs make test's tests less TESTS_SAN_SKIP, plus TESTS_SAN_LONG:
# host-code tests too long for make test, which run there, under ASan and UBSan, and not again in make
# test-long (the same code and checks, every report fatal; running them twice took 70 s of
# test-long's 20 minutes). A module that skips a test there says beside it why the sanitizers add
# nothing to it; a new test runs there unless its module says so.
TESTS_SAN_SKIP :=
TESTS_SAN_LONG :=
BENCHES :=

.PHONY: all train emu test test-long test-sanitize test-sanitize-run bench clean
all: train

# make train: the trainer and its companion tool (build/export_hf, a model file to a Hugging Face directory).
train: train_gpt2 $(BUILD)/export_hf

$(BUILD)/%.o: %.c $(wildcard common/*.h reference/*.h test/*.h) kernels/sizes.h $(HOST_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/common/ranks.o: common/ranks.c $(wildcard common/*.h) $(HOST_STAMP) $(MPI_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(HOST_LIB): $(COMMON_OBJ) $(REF_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The GPU trainer: train_gpt2.cu compiled to $(BUILD)/train_gpt2.o, then linked. ptxas's resource use
# (-Xptxas -v) goes to TRAIN_NVCC_LOG, nvcc's other output (warnings, errors) to the terminal: the CPU
# runtime's register table takes train_gpt2's sm_90a registers from that log instead of compiling the
# file again (test/cuda_cpu/module.mk).
TRAIN_NVCC_LOG := $(BUILD)/train_gpt2.nvcc.log
ifneq ($(HAVE_NVCC),)
# The object has a rule of its own, which needs no host code built: make starts it first (the build's
# longest compile), and the register table, which reads its ptxas output, right after it.
$(BUILD)/train_gpt2.o: train_gpt2.cu cuda_libs.cuh train_gpt2_zero.cuh train_gpt2_pipe.cuh $(KERNEL_HEADERS) \
		$(wildcard common/*.h reference/*.h) $(PRECISION_STAMP) $(NVCC_STAMP) $(MPI_STAMP)
	@mkdir -p $(dir $@)
	@echo "train: building the GPU trainer ($(PRECISION), sm_$(GPU_SM)$(if $(MPICC),, no MPI)$(if $(HAVE_NCCL),, no NCCL)) with $(NVCC); without a usable GPU it runs the C engine"
	$(NVCC) $(NVCC_FLAGS) $(NVCC_NCCL) -Xptxas -v -c train_gpt2.cu -o $@ > $(TRAIN_NVCC_LOG) 2>&1; \
		s=$$?; grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' $(TRAIN_NVCC_LOG); exit $$s
train_gpt2: $(BUILD)/train_gpt2.o $(HOST_LIB) $(NVCC_STAMP) $(MPI_STAMP)
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

# nvcc's compiles first: the trainer's object, then the register table, which waits for its ptxas
# output. Listed first, make starts them before the CPU runtime's programs; listed last, the table ran
# alone on one core for the build's last 35 s.
NVCC_FIRST := $(if $(HAVE_NVCC),$(BUILD)/train_gpt2.o)
test: $(NVCC_FIRST) $(CUDA_CPU_REGISTERS_DB) $(filter-out %.sh %.py %.js,$(TESTS)) $(TEST_DEPS) train_gpt2
	@bash test/run_tests.sh $(TESTS)

test-long: $(NVCC_FIRST) $(CUDA_CPU_REGISTERS_ALL) $(filter-out %.sh %.py %.js,$(TESTS_LONG)) $(TEST_DEPS) $(TEST_LONG_DEPS) train_gpt2
	@bash test/run_tests.sh $(TESTS_LONG)

# The sanitizer pass: the tree copied to build/sanitize (the scripts' build/ paths then hold the
# sanitized programs) and built there at -O2 with ASan and UBSan, every report fatal. Without CUDA:
# nvcc's link does not take sanitized host code, so the trainer is the C-only one, and the CUDA
# programs are left to the CPU runtime's own checker (test/cuda_cpu), whose ThreadSanitizer hooks
# cannot be combined with ASan. At -O2, not -O1: the C engine's loops vectorize and its runs take half
# the time (12 steps of the default run under the sanitizers: 101 s at -O1, 59 s at -O2, AMD EPYC, 2
# cores); the optimizer may drop a redundant access the sanitizers would check at -O1, as the build
# users run drops it too. ASan's shadow memory on transparent huge pages (no_huge_pages_for_shadow=0;
# ASan's default keeps them off): the matrix product's packing reads a weight matrix down its
# columns, one shadow page per row without them, and a built-in run's step took 4.2 s instead of
# 0.64 s (d2, V=50257, T=64; 94% of the time in one shadow load; AMD EPYC, 2 cores).
SAN_DIR := $(BUILD)/sanitize
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
TESTS_SAN = $(filter-out $(TESTS_SAN_SKIP),$(TESTS)) $(TESTS_SAN_LONG)
test-sanitize:
	@rm -rf $(SAN_DIR) && mkdir -p $(SAN_DIR)
	@tar --exclude=./$(BUILD) --exclude='./build-*' --exclude=./train_gpt2 --exclude=./train_gpt2_emu -cf - . | tar -xf - -C $(SAN_DIR)
	+cd $(SAN_DIR) && ASAN_OPTIONS=abort_on_error=1:detect_leaks=0:no_huge_pages_for_shadow=0 \
		UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
		$(MAKE) test-sanitize-run CUDA_HOME=/nonexistent OPT="-O2 -g -march=native $(SAN_FLAGS)"
test-sanitize-run: $(filter-out %.sh %.py %.js,$(TESTS_SAN)) $(TEST_DEPS) train_gpt2
	@bash test/run_tests.sh $(TESTS_SAN)

bench: train_gpt2 $(filter-out %.sh %.py,$(BENCHES))
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

clean:
	rm -rf $(BUILD) train_gpt2 train_gpt2_emu $(CLEAN_EXTRA)
