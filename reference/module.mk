# reference/module.mk: the matrix product's test and benchmark. The test also runs against the
# AVX2 and portable-C kernels (same source, wider paths switched off) so the fallbacks stay
# correct, and against tiny cache blocks so small shapes reach every blocking loop.

GEMM_DEPS = reference/gemm_cpu.c reference/gemm_cpu.h common/util.h $(HOST_STAMP)

$(BUILD)/reference/gemm_cpu_avx2.o: $(GEMM_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DGEMM_CPU_NO_AVX512 -c $< -o $@

$(BUILD)/reference/gemm_cpu_generic.o: $(GEMM_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DGEMM_CPU_NO_AVX512 -DGEMM_CPU_NO_AVX2 -c $< -o $@

$(BUILD)/reference/gemm_cpu_tinyblocks.o: $(GEMM_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DGEMM_KC=40 -DGEMM_NC=100 -DGEMM_A_SUPER=4000 -DGEMM_NAME_SUFFIX='"_tinyblocks"' -c $< -o $@

$(BUILD)/test/test_gemm: $(BUILD)/test/test_gemm.o $(BUILD)/reference/gemm_cpu.o $(BUILD)/common/util.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test/test_gemm_avx2: $(BUILD)/test/test_gemm.o $(BUILD)/reference/gemm_cpu_avx2.o $(BUILD)/common/util.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test/test_gemm_generic: $(BUILD)/test/test_gemm.o $(BUILD)/reference/gemm_cpu_generic.o $(BUILD)/common/util.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test/test_gemm_tinyblocks: $(BUILD)/test/test_gemm.o $(BUILD)/reference/gemm_cpu_tinyblocks.o $(BUILD)/common/util.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/dev/bench_gemm: $(BUILD)/dev/bench_gemm.o $(BUILD)/reference/gemm_cpu.o $(BUILD)/common/util.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

TESTS += $(BUILD)/test/test_gemm $(BUILD)/test/test_gemm_avx2 $(BUILD)/test/test_gemm_generic \
         $(BUILD)/test/test_gemm_tinyblocks
BENCHES += $(BUILD)/dev/bench_gemm
