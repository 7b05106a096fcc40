# test/reliability/module.mk: the reliability tests (docs/reliability.md): defects that once crashed, hung
# or lost data, faults across ranks, a generated corpus of bad files for every reader, kill -9 and
# resume, fuzzing, and (in .ci/run) preemption under mpirun.
#
# Fuzzing needs AFL++ (Debian's afl++, which .ci/run installs); without it test_fuzz.sh says SKIP.
# Its targets are built with afl-clang-fast under AddressSanitizer and UBSan (UB traps).
#   make fuzz FUZZ_SECONDS=60    every reader for that long (test_fuzz.sh; 4 s each by default)

REL_DIR = test/reliability
AFL_CC := $(shell command -v afl-clang-fast 2>/dev/null)
FUZZ_DIR = $(BUILD)/fuzz
FUZZ_CFLAGS = -std=gnu11 -O1 -g -fno-omit-frame-pointer -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -Icommon \
	-Wall -Wno-unknown-pragmas -Wno-unused-parameter
FUZZ_READ_SRC = $(REL_DIR)/fuzz_read.c common/util.c common/checkpoint.c common/gpt2_config.c common/dataloader.c \
	common/tokenizer.c
FUZZ_TTS_SRC = data/text_to_shards.c common/util.c common/dataloader.c common/tokenizer.c
FUZZ_STAMP := $(call config_stamp,fuzz,fuzz: $(or $(AFL_CC),none) | $(FUZZ_CFLAGS))

$(FUZZ_DIR)/fuzz_read: $(FUZZ_READ_SRC) $(wildcard common/*.h) $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	AFL_USE_ASAN=1 AFL_USE_UBSAN=1 AFL_QUIET=1 $(AFL_CC) $(FUZZ_CFLAGS) $(FUZZ_READ_SRC) -o $@ -lm

$(FUZZ_DIR)/text_to_shards: $(FUZZ_TTS_SRC) $(wildcard common/*.h) $(FUZZ_STAMP)
	@mkdir -p $(dir $@)
	AFL_USE_ASAN=1 AFL_USE_UBSAN=1 AFL_QUIET=1 $(AFL_CC) $(FUZZ_CFLAGS) $(FUZZ_TTS_SRC) -o $@ -lm

FUZZ_BINS := $(if $(AFL_CC),$(FUZZ_DIR)/fuzz_read $(FUZZ_DIR)/text_to_shards)
.PHONY: fuzz
fuzz: $(FUZZ_BINS) train_gpt2
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60) bash $(REL_DIR)/test_fuzz.sh

TESTS += $(REL_DIR)/test_defects.sh $(REL_DIR)/test_ranks.sh
# 4 kill -9 trials (about 12 s of CPU): the sanitizer pass; CI's reliability stage runs the same
# script for 20 trials. In make test, test_defects.sh's signal checks resume bit for bit.
TESTS_SAN_LONG += $(REL_DIR)/test_kill_resume.sh
# Fuzzing: `make fuzz`, 60 s per reader, CI's reliability stage (FUZZ_SECONDS=4 for a short run; the
# targets are built under ASan and UBSan with flags of their own, so the sanitizer pass does not run
# them again).
# The corpus of 1,400 bad inputs (about 17 s of CPU): the sanitizer pass, where every reader and flag
# parser meets bad input.
TESTS_SAN_LONG += $(REL_DIR)/test_bad_inputs.sh
# test_preempt.sh (SIGTERM to mpirun mid-step with steps longer than its kill delay, about 3 minutes)
# is in neither: .ci/run runs it after the fuzzing and kill trials.
TEST_DEPS += $(BUILD)/test/gen_data $(BUILD)/text_to_shards $(BUILD)/tokenize
