// mt19937.h: the Mersenne Twister as PyTorch's CPU generator runs it (torch.manual_seed(s), then its
// 32-bit outputs) and PyTorch's float normal_ on a contiguous tensor of at least 16 entries: every
// entry drawn uniform in [0, 1) from 24 bits of one output, then Box-Muller over blocks of 16 (the
// first 8 entries give the radius, the next 8 the angle), the last 16 drawn afresh when 16 does not
// divide the length. llm.c initialises its descriptor models this way (so that they match
// PyTorch's); gpt2_init_params_llmc uses it for the same reason. Written from the published
// algorithms (Matsumoto & Nishimura 1998; PyTorch's normal_fill).
#ifndef COMMON_MT19937_H
#define COMMON_MT19937_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t s[MT_N];
    int next;  // index of the next word to hand out; MT_N = the block is used up
} MT19937;

static inline void mt_seed(MT19937* g, uint32_t seed) {
    g->s[0] = seed;
    for (int i = 1; i < MT_N; i++) g->s[i] = 1812433253u * (g->s[i - 1] ^ (g->s[i - 1] >> 30)) + (uint32_t)i;
    g->next = MT_N;
}

static inline uint32_t mt_next(MT19937* g) {
    if (g->next >= MT_N) {  // the next block of 624 words
        for (int i = 0; i < MT_N; i++) {
            uint32_t y = (g->s[i] & 0x80000000u) | (g->s[(i + 1) % MT_N] & 0x7fffffffu);
            g->s[i] = g->s[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        g->next = 0;
    }
    uint32_t y = g->s[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

// PyTorch's uniform float in [0, 1): the low 24 bits of one output over 2^24.
static inline float mt_uniform(MT19937* g) { return (float)(mt_next(g) & 0xffffffu) * (1.0f / 16777216.0f); }

static inline void mt_box_muller16(float* d, float mean, float std) {
    for (int j = 0; j < 8; j++) {
        float u1 = 1.0f - d[j], u2 = d[j + 8];
        float radius = sqrtf(-2.0f * logf(u1));
        float theta = (float)(2.0 * M_PI * u2);
        d[j] = radius * cosf(theta) * std + mean;
        d[j + 8] = radius * sinf(theta) * std + mean;
    }
}

// n >= 16 draws of N(mean, std) into d, as PyTorch's tensor.normal_(mean, std) fills them.
static inline void mt_normal(MT19937* g, float* d, size_t n, float mean, float std) {
    for (size_t i = 0; i < n; i++) d[i] = mt_uniform(g);
    for (size_t i = 0; i + 16 <= n; i += 16) mt_box_muller16(d + i, mean, std);
    if (n % 16) {
        float* last = d + n - 16;
        for (int i = 0; i < 16; i++) last[i] = mt_uniform(g);
        mt_box_muller16(last, mean, std);
    }
}

#endif
