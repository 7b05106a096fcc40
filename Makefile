# Makefile: builds the trainer, tools, tests and benchmarks.
#   make train   ./train_gpt2 (for now the C reference engine alone; train_gpt2.cu joins it later)
#   make test    builds and runs every test that needs no GPU; ends with "N passed, N failed"
#   make bench   prints speed figures
#   make clean
# Each folder may add its own rules in a module.mk (included below); they append test
# programs to TESTS (scripts add what they run to TEST_DEPS) and benchmark commands to BENCHES.

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

COMMON_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard common/*.c))
REF_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard reference/*.c))
TESTS :=
BENCHES :=

.PHONY: all train test bench clean
all: train

train: train_gpt2

$(BUILD)/%.o: %.c $(wildcard common/*.h reference/*.h test/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

train_gpt2: $(BUILD)/train_gpt2_cpu.o $(REF_OBJ) $(COMMON_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

-include $(sort $(wildcard */module.mk */*/module.mk))

test: $(filter-out %.sh %.py %.js,$(TESTS)) $(TEST_DEPS) train_gpt2
	@bash test/run_tests.sh $(TESTS)

bench: train_gpt2 $(filter-out %.sh %.py,$(BENCHES))
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done

clean:
	rm -rf $(BUILD) train_gpt2 $(CLEAN_EXTRA)
