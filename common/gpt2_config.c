// gpt2_config.c: model descriptors (d1 ... d84, gpt2:dN, gpt3:cN), the parameter tensor table and
// the two initialisations (this project's, parallel; llm.c's, PyTorch's RNG).
#include "gpt2_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mt19937.h"
#include "util.h"

int gpt2_padded_vocab(int vocab_size) { return (vocab_size + 127) / 128 * 128; }

// GPT-2's published family keyed by depth, and llm.c's larger ones (d60, d72, d84); d1..d5 are
// this project's small ones with head size 64. "gpt2:dN" is the same as "dN" (llm.c's spelling);
// "gpt3:cN" is llm.c's GPT-3 family keyed by channels (its own head sizes, 2048 positions).
int gpt2_config_from_descriptor(const char* desc, int max_seq_len, GPT2Config* cfg) {
    int gpt3 = strncmp(desc, "gpt3:c", 6) == 0;
    const char* num = gpt3 ? desc + 6 : strncmp(desc, "gpt2:d", 6) == 0 ? desc + 6 : desc[0] == 'd' ? desc + 1 : NULL;
    if (!num || *num < '0' || *num > '9') return 0;
    char* end;
    long x = strtol(num, &end, 10);
    if (*end != '\0') return 0;
    int depth, channels, heads;
    if (gpt3) {
        int head;
        switch (x) {
            case 384: depth = 6; head = 64; break;
            case 768: depth = 12; head = 64; break;
            case 1024: depth = 24; head = 64; break;
            case 1536: depth = 24; head = 96; break;
            case 2048: depth = 24; head = 128; break;
            case 2560: depth = 32; head = 80; break;
            case 4096: depth = 32; head = 128; break;
            case 5140: depth = 40; head = 128; break;  // llm.c's figure (GPT-3 13B has 5120)
            case 12288: depth = 96; head = 128; break;
            default: return 0;
        }
        channels = (int)x;
        if (channels % head) return 0;
        heads = channels / head;
        if (max_seq_len < 2048) max_seq_len = 2048;
    } else {
        switch (x) {
            case 12: channels = 768; heads = 12; break;
            case 24: channels = 1024; heads = 16; break;
            case 36: channels = 1280; heads = 20; break;
            case 48: channels = 1600; heads = 25; break;
            case 60: channels = 1920; heads = 30; break;
            case 72: channels = 2880; heads = 30; break;
            case 84: channels = 3456; heads = 36; break;
            case 6: channels = 384; heads = 6; break;
            case 1: case 2: case 3: case 4: case 5:  // this project's; not llm.c's (no gpt2: spelling)
                if (desc[0] != 'd') return 0;
                channels = 64 * (int)x;
                heads = (int)x;
                break;
            default: return 0;
        }
        depth = (int)x;
    }
    cfg->max_seq_len = max_seq_len;
    cfg->vocab_size = GPT2_VOCAB_SIZE;
    cfg->padded_vocab_size = gpt2_padded_vocab(GPT2_VOCAB_SIZE);
    cfg->num_layers = depth;
    cfg->channels = channels;
    cfg->num_heads = heads;
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

ParamLayout gpt2_param_layout(const GPT2Config* cfg) { return gpt2_stage_param_layout(cfg, cfg->num_layers, 1, 1); }

ParamLayout gpt2_stage_param_layout(const GPT2Config* cfg, int num_layers, int embed, int head) {
    size_t Vp = embed || head ? cfg->padded_vocab_size : 0, C = cfg->channels, L = num_layers;
    size_t maxT = embed ? cfg->max_seq_len : 0, lnf = head ? C : 0;
    // name, ndim, shape, decay: in llm.c's file order
    struct { const char* name; int ndim; size_t s0, s1, s2; int decay; } spec[GPT2_NUM_PARAM_TENSORS] = {
        {"wte", 2, Vp, C, 0, 1},          {"wpe", 2, maxT, C, 0, 1},
        {"ln1w", 2, L, C, 0, 0},          {"ln1b", 2, L, C, 0, 0},
        {"qkvw", 3, L, 3 * C, C, 1},      {"qkvb", 2, L, 3 * C, 0, 0},
        {"attprojw", 3, L, C, C, 1},      {"attprojb", 2, L, C, 0, 0},
        {"ln2w", 2, L, C, 0, 0},          {"ln2b", 2, L, C, 0, 0},
        {"fcw", 3, L, 4 * C, C, 1},       {"fcb", 2, L, 4 * C, 0, 0},
        {"fcprojw", 3, L, C, 4 * C, 1},   {"fcprojb", 2, L, C, 0, 0},
        {"lnfw", 1, lnf, 0, 0, 0},        {"lnfb", 1, lnf, 0, 0, 0},
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

int gpt2_descriptor_is_llmc(const char* desc) {
    GPT2Config cfg;
    return gpt2_config_from_descriptor(desc, 1024, &cfg) && (desc[0] != 'd' || cfg.num_layers >= 6);
}

void gpt2_init_params_llmc(const GPT2Config* cfg, float* params, unsigned int seed) {
    ParamLayout layout = gpt2_param_layout(cfg);
    size_t L = (size_t)cfg->num_layers;
    for (int i = 0; i < GPT2_NUM_PARAM_TENSORS; i++) {
        const ParamTensor* t = &layout.tensors[i];
        int is_ln_weight = i == PT_LN1W || i == PT_LN2W || i == PT_LNFW;
        for (size_t j = 0; j < t->numel; j++) params[t->offset + j] = is_ln_weight ? 1.0f : 0.0f;
    }
    // The draws in PyTorch's module order: wte (its V real rows), wpe, then per layer the QKV,
    // attention projection, MLP and MLP projection weights; the two projections into the
    // residual stream with std 0.02 / sqrt(2 L).
    MT19937* g = (MT19937*)malloc_check(sizeof(MT19937), "init RNG");
    mt_seed(g, seed);
    float residual_std = 0.02f * (1.0f / sqrtf(2.0f * cfg->num_layers));
    const ParamTensor* T = layout.tensors;
    mt_normal(g, params + T[PT_WTE].offset, (size_t)cfg->vocab_size * cfg->channels, 0.0f, 0.02f);
    mt_normal(g, params + T[PT_WPE].offset, T[PT_WPE].numel, 0.0f, 0.02f);
    static const int per_layer[4] = {PT_QKVW, PT_ATTPROJW, PT_FCW, PT_FCPROJW};
    for (size_t l = 0; l < L; l++)
        for (int k = 0; k < 4; k++) {
            const ParamTensor* t = &T[per_layer[k]];
            size_t n = t->numel / L;
            float std = per_layer[k] == PT_ATTPROJW || per_layer[k] == PT_FCPROJW ? residual_std : 0.02f;
            mt_normal(g, params + t->offset + l * n, n, 0.0f, std);
        }
    free(g);
}
