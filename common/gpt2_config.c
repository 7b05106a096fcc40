// gpt2_config.c: model descriptors (d2 ... d48) and the parameter tensor table.
#include "gpt2_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int gpt2_padded_vocab(int vocab_size) { return (vocab_size + 127) / 128 * 128; }

// GPT-2's published family keyed by depth; the small ones keep head size 64 too.
int gpt2_config_from_descriptor(const char* desc, int max_seq_len, GPT2Config* cfg) {
    if (desc[0] != 'd' || desc[1] == '\0') return 0;
    char* end;
    long depth = strtol(desc + 1, &end, 10);
    if (*end != '\0') return 0;
    int channels;
    switch (depth) {
        case 12: channels = 768; break;
        case 24: channels = 1024; break;
        case 36: channels = 1280; break;
        case 48: channels = 1600; break;
        case 1: case 2: case 3: case 4: case 5: case 6: channels = 64 * (int)depth; break;
        default: return 0;
    }
    cfg->max_seq_len = max_seq_len;
    cfg->vocab_size = GPT2_VOCAB_SIZE;
    cfg->padded_vocab_size = gpt2_padded_vocab(GPT2_VOCAB_SIZE);
    cfg->num_layers = (int)depth;
    cfg->channels = channels;
    cfg->num_heads = channels / 64;
    return 1;
}

int gpt2_config_check(const GPT2Config* c, const char* what, char* why, size_t cap) {
    if (c->max_seq_len <= 0 || c->vocab_size <= 0 || c->num_layers <= 0 || c->num_heads <= 0 || c->channels <= 0 ||
        c->padded_vocab_size <= 0) {
        snprintf(why, cap, "%s: model sizes must be positive (maxT=%d V=%d Vp=%d L=%d NH=%d C=%d)", what,
                 c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads, c->channels);
        return 0;
    }
    struct { const char* name; int value, limit; } bounds[] = {
        {"layers L", c->num_layers, GPT2_MAX_LAYERS},       {"channels C", c->channels, GPT2_MAX_CHANNELS},
        {"maximum sequence length maxT", c->max_seq_len, GPT2_MAX_SEQ_LEN},
        {"vocabulary V", c->vocab_size, GPT2_MAX_VOCAB},   {"padded vocabulary Vp", c->padded_vocab_size, GPT2_MAX_PADDED_VOCAB},
    };
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        if (bounds[i].value > bounds[i].limit) {
            snprintf(why, cap, "%s: %s is %d, above the limit of %d", what, bounds[i].name, bounds[i].value,
                     bounds[i].limit);
            return 0;
        }
    }
    if (c->padded_vocab_size < c->vocab_size) {
        snprintf(why, cap, "%s: padded vocabulary %d is smaller than the vocabulary %d", what, c->padded_vocab_size,
                 c->vocab_size);
        return 0;
    }
    if (c->channels % c->num_heads != 0) {
        snprintf(why, cap, "%s: channels %d are not divisible by heads %d", what, c->channels, c->num_heads);
        return 0;
    }
    return 1;
}

void gpt2_config_validate(const GPT2Config* c, const char* what) {
    char why[512];
    if (!gpt2_config_check(c, what, why, sizeof(why))) fatal("%s", why);
}

ParamLayout gpt2_param_layout(const GPT2Config* cfg) {
    size_t Vp = cfg->padded_vocab_size, C = cfg->channels, L = cfg->num_layers, maxT = cfg->max_seq_len;
    // name, ndim, shape, decay: in llm.c's file order
    struct { const char* name; int ndim; size_t s0, s1, s2; int decay; } spec[GPT2_NUM_PARAM_TENSORS] = {
        {"wte", 2, Vp, C, 0, 1},          {"wpe", 2, maxT, C, 0, 1},
        {"ln1w", 2, L, C, 0, 0},          {"ln1b", 2, L, C, 0, 0},
        {"qkvw", 3, L, 3 * C, C, 1},      {"qkvb", 2, L, 3 * C, 0, 0},
        {"attprojw", 3, L, C, C, 1},      {"attprojb", 2, L, C, 0, 0},
        {"ln2w", 2, L, C, 0, 0},          {"ln2b", 2, L, C, 0, 0},
        {"fcw", 3, L, 4 * C, C, 1},       {"fcb", 2, L, 4 * C, 0, 0},
        {"fcprojw", 3, L, C, 4 * C, 1},   {"fcprojb", 2, L, C, 0, 0},
        {"lnfw", 1, C, 0, 0, 0},          {"lnfb", 1, C, 0, 0, 0},
    };
    ParamLayout layout;
    memset(&layout, 0, sizeof(layout));
    size_t offset = 0;
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) {
        ParamTensor* t = &layout.tensors[i];
        t->name = spec[i].name;
        t->ndim = spec[i].ndim;
        t->shape[0] = spec[i].s0; t->shape[1] = spec[i].s1; t->shape[2] = spec[i].s2;
        t->numel = 1;
        for (int d = 0; d < t->ndim; d++) t->numel *= t->shape[d];
        t->offset = offset;
        // Per-layer matrices are 2-D weights stacked over layers; wte/wpe are 2-D themselves.
        t->weight_decay = spec[i].decay;
        offset += t->numel;
    }
    layout.num_parameters = offset;
    return layout;
}

double gpt2_flops_per_token(const GPT2Config* cfg, int T) {
    double N = (double)gpt2_param_layout(cfg).num_parameters;
    return 6.0 * N + 6.0 * cfg->num_layers * (double)cfg->channels * T;
}

#include "rng.h"

#define INIT_CHUNK (1 << 16)  // each chunk draws from its own seeded stream, so chunks run in parallel

void gpt2_init_params(const GPT2Config* cfg, float* params, unsigned long long seed) {
    ParamLayout layout = gpt2_param_layout(cfg);
    float residual_std = 0.02f / sqrtf(2.0f * cfg->num_layers);
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) {
        const ParamTensor* t = &layout.tensors[i];
        float* p = params + t->offset;
        if (!t->weight_decay) {  // biases and LayerNorm
            int is_ln_weight = i == PT_LN1W || i == PT_LN2W || i == PT_LNFW;
            for (size_t j = 0; j < t->numel; j++) p[j] = is_ln_weight ? 1.0f : 0.0f;
            continue;
        }
        float std = (i == PT_ATTPROJW || i == PT_FCPROJW) ? residual_std : 0.02f;
        size_t n = t->numel;
        if (i == PT_WTE) n = (size_t)cfg->vocab_size * cfg->channels;  // padding rows stay 0
        size_t nchunks = (t->numel + INIT_CHUNK - 1) / INIT_CHUNK;
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < nchunks; c++) {
            uint64_t s = rng_seed(seed * 1000003ull + (uint64_t)i * 0x9E3779B97F4A7C15ull + c);
            size_t j1 = (c + 1) * INIT_CHUNK < t->numel ? (c + 1) * INIT_CHUNK : t->numel;
            for (size_t j = c * INIT_CHUNK; j < j1; j++) p[j] = j < n ? std * rng_normal(&s) : 0.0f;
        }
    }
}
