// sampler.c: temperature and top-k sampling (see sampler.h).
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

#include "rng.h"

static const float* g_sort_logits;  // qsort has no context argument in C11

// Descending by logit; ties by lower id first, so the order is total and runs repeat exactly.
static int by_logit_desc(const void* a, const void* b) {
    int i = *(const int*)a, j = *(const int*)b;
    float x = g_sort_logits[i], y = g_sort_logits[j];
    if (x != y) return x > y ? -1 : 1;
    return i - j;
}

int sample_token(float* logits, int V, float temperature, int top_k, uint64_t* rng, int* scratch) {
    if (temperature <= 0.0f) {
        int best = 0;
        for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
        return best;
    }
    int n = V;
    for (int i = 0; i < V; i++) scratch[i] = i;
    if (top_k > 0 && top_k < V) {
        g_sort_logits = logits;
        qsort(scratch, V, sizeof(int), by_logit_desc);
        n = top_k;
    }
    float maxv = -INFINITY;
    for (int i = 0; i < n; i++) maxv = fmaxf(maxv, logits[scratch[i]]);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float p = expf((logits[scratch[i]] - maxv) / temperature);
        logits[scratch[i]] = p;
        sum += p;
    }
    double r = rng_f32(rng) * sum, cdf = 0.0;
    for (int i = 0; i < n; i++) {
        cdf += logits[scratch[i]];
        if (r < cdf) return scratch[i];
    }
    return scratch[n - 1];
}

void sampler_keep_bytes(float* logits, int V, int eot) {
    for (int i = 256; i < V; i++)
        if (i != eot) logits[i] = -INFINITY;
}
