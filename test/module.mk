# test/module.mk: the C engine's tests (parity with PyTorch, gradients, accumulation, resume,
# bad input) and their helper programs.

TEST_BIN = $(BUILD)/test

$(TEST_BIN)/parity_dump: $(BUILD)/test/parity_dump.o $(REF_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(TEST_BIN)/test_engine: $(BUILD)/test/test_engine.o $(REF_OBJ) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

TESTS += test/test_parity.sh $(TEST_BIN)/test_engine test/test_trainer.sh
TEST_DEPS += $(TEST_BIN)/parity_dump

$(TEST_BIN)/test_dataloader: $(BUILD)/test/test_dataloader.o $(BUILD)/common/dataloader.o $(BUILD)/common/util.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
TESTS += $(TEST_BIN)/test_dataloader

$(TEST_BIN)/test_host: $(BUILD)/test/test_host.o $(BUILD)/common/sampler.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
TESTS += $(TEST_BIN)/test_host
TESTS += test/test_default_run.sh
