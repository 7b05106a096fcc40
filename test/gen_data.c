// gen_data.c: test inputs made without Python, so scripts also run on a bare GPU machine.
//   gen_data model PATH L C NH V MAXT SEED   a freshly initialized model file of any shape
//   gen_data shard PATH N V SEED             N tokens below V: a cycle over 50 ids with 5% noise,
//                                            something a model can learn in a few steps
//   gen_data ramp PATH N V                   N tokens 0, 1, ..., V-1, 0, 1, ...: any V consecutive
//                                            tokens are distinct (a batch without repeated tokens)
//   gen_data diff A B                        prints the relative L2 difference of two model files'
//                                            parameters (they must hold the same model)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "dataloader.h"
#include "gpt2_config.h"
#include "rng.h"
#include "util.h"

static long arg_long(const char* s, const char* what) {
    char* end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0) fatal("gen_data: %s must be a non-negative integer, got '%s'", what, s);
    return v;
}

int main(int argc, char** argv) {
    if (argc == 9 && strcmp(argv[1], "model") == 0) {
        GPT2Config cfg;
        cfg.num_layers = (int)arg_long(argv[3], "L");
        cfg.channels = (int)arg_long(argv[4], "C");
        cfg.num_heads = (int)arg_long(argv[5], "NH");
        cfg.vocab_size = (int)arg_long(argv[6], "V");
        cfg.max_seq_len = (int)arg_long(argv[7], "MAXT");
        cfg.padded_vocab_size = gpt2_padded_vocab(cfg.vocab_size);
        gpt2_config_validate(&cfg, "gen_data model");
        size_t n = gpt2_param_layout(&cfg).num_parameters;
        float* p = (float*)malloc_check(n * sizeof(float), "parameters");
        gpt2_init_params(&cfg, p, (unsigned long long)arg_long(argv[8], "SEED"));
        model_file_write(argv[2], &cfg, p);
        free(p);
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "shard") == 0) {
        size_t n = (size_t)arg_long(argv[3], "N");
        long V = arg_long(argv[4], "V");
        if (V < 1 || V > 65536) fatal("gen_data: V must be in 1..65536, got %ld", V);
        uint64_t r = rng_seed((uint64_t)arg_long(argv[5], "SEED"));
        uint16_t cycle[50];
        for (int i = 0; i < 50; i++) cycle[i] = (uint16_t)rng_below(&r, (uint64_t)V);
        uint16_t* toks = (uint16_t*)malloc_check(n * sizeof(uint16_t), "tokens");
        for (size_t i = 0; i < n; i++)
            toks[i] = rng_below(&r, 20) == 0 ? (uint16_t)rng_below(&r, (uint64_t)V) : cycle[i % 50];
        shard_write(argv[2], toks, n);
        free(toks);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "ramp") == 0) {
        size_t n = (size_t)arg_long(argv[3], "N");
        long V = arg_long(argv[4], "V");
        if (V < 1 || V > 65536) fatal("gen_data: V must be in 1..65536, got %ld", V);
        uint16_t* toks = (uint16_t*)malloc_check(n * sizeof(uint16_t), "tokens");
        for (size_t i = 0; i < n; i++) toks[i] = (uint16_t)(i % (size_t)V);
        shard_write(argv[2], toks, n);
        free(toks);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "diff") == 0) {
        GPT2Config cfg;
        model_file_read_config(argv[2], &cfg);
        size_t n = gpt2_param_layout(&cfg).num_parameters;
        float* a = (float*)malloc_check(n * sizeof(float), "parameters");
        float* b = (float*)malloc_check(n * sizeof(float), "parameters");
        model_file_read_params(argv[2], &cfg, a);
        model_file_read_params(argv[3], &cfg, b);
        double d = 0, s2 = 0;
        for (size_t i = 0; i < n; i++) {
            d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
            s2 += (double)b[i] * b[i];
        }
        printf("%.3g\n", sqrt(d) / (s2 > 0 ? sqrt(s2) : 1.0));
        free(a);
        free(b);
        return 0;
    }
    fprintf(stderr, "usage: gen_data model PATH L C NH V MAXT SEED | gen_data shard PATH N V SEED | gen_data ramp PATH N V | gen_data diff A B\n");
    return 1;
}
