# dev/module.mk: microbenchmarks (make bench).

$(BUILD)/dev/bench_engine: $(BUILD)/dev/bench_engine.o $(REF_OBJ) $(BUILD)/common/gpt2_config.o $(BUILD)/common/util.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
BENCHES += $(BUILD)/dev/bench_engine
