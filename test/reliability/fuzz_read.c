// fuzz_read.c: one reader on one file, called as the trainer and the tools call it: the target that
// AFL++ mutates (test/reliability/test_fuzz.sh). Exit 0: the file was read; exit 1: it was refused
// with one "error:" line. Anything else (a signal, a sanitizer report, a failed round trip) is a bug.
//
//   fuzz_read model FILE STATE     the model reader (header, sizes, checksum), then a resume check of
//                                  FILE beside a good state file of the same model
//   fuzz_read state FILE MODEL     the state reader, as a resume checks it and as an engine loads it
//   fuzz_read shard FILE           the data loader: every token checked, a few shuffled batches
//   fuzz_read tokenizer FILE       the tokenizer reader, then an encode and a decode of every id
//   fuzz_read encode FILE [TOK]    FILE as text through GPT-2's encoder (TOK, else byte level), which
//                                  must decode back to FILE's bytes
//
// Built with -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, the checkpoint reader ignores checksum
// mismatches, so mutations reach the checks behind the checksum instead of stopping at it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "dataloader.h"
#include "gpt2_config.h"
#include "tokenizer.h"
#include "util.h"

static unsigned char* read_all(const char* path, size_t* n) {
    FILE* f = fopen_check(path, "rb");
    size_t cap = 1 << 16;
    unsigned char* buf = (unsigned char*)malloc_check(cap, "input");
    *n = 0;
    for (size_t got; (got = fread(buf + *n, 1, cap - *n, f)) > 0;) {
        *n += got;
        if (*n == cap) {
            cap *= 2;
            buf = (unsigned char*)realloc(buf, cap);
            if (!buf) fatal("out of host memory");
        }
    }
    fclose(f);
    return buf;
}

static void read_model(const char* path, const char* state_path) {
    GPT2Config cfg;
    model_file_read_config(path, &cfg);
    // The header passed: its size matches the file, so this allocation is the file's own size.
    size_t n = gpt2_param_layout(&cfg).num_parameters;
    float* p = (float*)malloc_check(n * sizeof(float), "parameters");
    model_file_read_params(path, &cfg, p);
    free(p);
    static TrainState st;
    OptimizerCounters oc;
    char why[4800];
    checkpoint_verify(path, state_path, &cfg, &st, &oc, why, sizeof(why));
}

static void read_state(const char* path, const char* model_path) {
    GPT2Config cfg;
    model_file_read_config(model_path, &cfg);
    static TrainState st;
    OptimizerCounters oc;
    char why[4800];
    if (checkpoint_verify(model_path, path, &cfg, &st, &oc, why, sizeof(why)) != CHECKPOINT_OK) fatal("%s", why);
    size_t n = gpt2_param_layout(&cfg).num_parameters;
    float* m = (float*)malloc_check(n * sizeof(float), "m");
    float* v = (float*)malloc_check(n * sizeof(float), "v");
    state_file_read(path, &cfg, &st, &oc, m, v, n);
    free(m);
    free(v);
}

static void read_shard(const char* path) {
    DataLoader dl;
    dataloader_init(&dl, path, 2, 3, 0, 1, 1, 7, 50257);
    for (int i = 0; i < 8; i++) dataloader_next_batch(&dl);
    dataloader_set_pos(&dl, dataloader_get_pos(&dl) + 5);  // somewhere else in the sequence
    dataloader_next_batch(&dl);
    dataloader_free(&dl);
}

static void read_tokenizer(const char* path) {
    Tokenizer* t = tokenizer_load(path);
    const char* text = "Hello world, it's 2024!\n\tCaf\xc3\xa9 <|endoftext|> \xff\xfe ok";
    int* ids = NULL;
    size_t cap = 0;
    for (int special = 0; special < 2; special++) tokenizer_encode(t, text, strlen(text), special, &ids, &cap);
    for (int id = -1; id <= tokenizer_vocab_size(t); id++) {
        size_t len;
        tokenizer_decode(t, id, &len);
    }
    free(ids);
    tokenizer_free(t);
}

static void read_text(const char* path, const char* tok_path) {
    Tokenizer* t = tok_path && file_exists(tok_path) ? tokenizer_load(tok_path) : tokenizer_bytes_only();
#ifdef __AFL_HAVE_MANUAL_CONTROL
    __AFL_INIT();  // AFL++ forks from here: the tokenizer file is loaded once, not per input
#endif
    size_t n;
    unsigned char* text = read_all(path, &n);
    int* ids = NULL;
    size_t cap = 0, count = tokenizer_encode(t, (const char*)text, n, 0, &ids, &cap);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        size_t len;
        const unsigned char* bytes = tokenizer_decode(t, ids[i], &len);
        if (!bytes || at + len > n || memcmp(text + at, bytes, len) != 0) {
            fprintf(stderr, "fuzz_read: decode(encode(x)) != x at byte %zu (token %zu, id %d)\n", at, i, ids[i]);
            abort();
        }
        at += len;
    }
    if (at != n) {
        fprintf(stderr, "fuzz_read: decode(encode(x)) is %zu bytes, x is %zu\n", at, n);
        abort();
    }
    free(ids);
    free(text);
    tokenizer_free(t);
}

int main(int argc, char** argv) {
    if (argc >= 3) {
        const char* kind = argv[1];
#ifdef __AFL_HAVE_MANUAL_CONTROL
        if (strcmp(kind, "encode") != 0) __AFL_INIT();  // every path must reach it once (encode: after its setup)
#endif
        if (!strcmp(kind, "model") && argc == 4) read_model(argv[2], argv[3]);
        else if (!strcmp(kind, "state") && argc == 4) read_state(argv[2], argv[3]);
        else if (!strcmp(kind, "shard") && argc == 3) read_shard(argv[2]);
        else if (!strcmp(kind, "tokenizer") && argc == 3) read_tokenizer(argv[2]);
        else if (!strcmp(kind, "encode") && argc <= 4) read_text(argv[2], argc == 4 ? argv[3] : NULL);
        else goto usage;
        return 0;
    }
usage:
    fprintf(stderr, "usage: fuzz_read model FILE STATE | state FILE MODEL | shard FILE | tokenizer FILE | encode FILE [TOK]\n");
    return 2;
}
