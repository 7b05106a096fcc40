// test_host.c: small host pieces both engines share: the sampler and the LR schedule.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sampler.h"
#include "schedule.h"
#include "test.h"

#define V 50

static void fill_logits(float* l, uint64_t seed) {
    uint64_t r = rng_seed(seed);
    for (int i = 0; i < V; i++) l[i] = 3.0f * rng_normal(&r);
}

static void test_sampler(void) {
    float logits[V], work[V];
    int scratch[V];
    fill_logits(logits, 1);
    int argmax = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[argmax]) argmax = i;
    uint64_t rng = rng_seed(2);
    memcpy(work, logits, sizeof(work));
    CHECK(sample_token(work, V, 0.0f, 0, &rng, scratch) == argmax, "sampler: temperature 0 is greedy");
    memcpy(work, logits, sizeof(work));
    CHECK(sample_token(work, V, 1.0f, 1, &rng, scratch) == argmax, "sampler: top-k 1 is greedy");

    // top-k 5 never leaves the 5 most likely; frequencies follow softmax(logits / temperature).
    int rank[V];
    for (int i = 0; i < V; i++) rank[i] = 0;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) rank[i] += logits[j] > logits[i];
    int outside = 0, counts[V] = {0};
    const int draws = 200000;
    const float temp = 2.0f;
    for (int d = 0; d < draws; d++) {
        memcpy(work, logits, sizeof(work));
        int k = sample_token(work, V, 1.0f, 5, &rng, scratch);
        outside += rank[k] >= 5;
        memcpy(work, logits, sizeof(work));
        counts[sample_token(work, V, temp, 0, &rng, scratch)]++;
    }
    CHECK(outside == 0, "sampler: top-k 5 samples only the 5 most likely tokens");
    double maxv = -INFINITY, z = 0, worst = 0;
    for (int i = 0; i < V; i++) maxv = fmax(maxv, logits[i]);
    for (int i = 0; i < V; i++) z += exp((logits[i] - maxv) / temp);
    for (int i = 0; i < V; i++) {
        double p = exp((logits[i] - maxv) / temp) / z;
        double sd = sqrt(p * (1 - p) / draws);
        double dev = fabs(counts[i] / (double)draws - p) / (sd > 0 ? sd : 1);
        if (dev > worst) worst = dev;
    }
    char why[96];
    snprintf(why, sizeof(why), "worst deviation %.1f standard deviations", worst);
    test_report(worst < 5.0, "sampler: temperature 2 frequencies match softmax(logits / 2)", why);
    // The same RNG state gives the same token.
    uint64_t a = rng_seed(9), b = rng_seed(9);
    int same = 1;
    for (int d = 0; d < 100; d++) {
        memcpy(work, logits, sizeof(work));
        int x = sample_token(work, V, 1.0f, 10, &a, scratch);
        memcpy(work, logits, sizeof(work));
        same &= x == sample_token(work, V, 1.0f, 10, &b, scratch);
    }
    CHECK(same, "sampler: deterministic for an RNG state");
}

static void test_schedule(void) {
    check_close("schedule: warmup step 0 is lr/warmup", lr_at_step(0, 100, 1.0f, 10, 0.1f), 0.1, 1e-6);
    check_close("schedule: end of warmup reaches the peak", lr_at_step(9, 100, 1.0f, 10, 0.1f), 1.0, 1e-6);
    check_close("schedule: halfway through decay is the midpoint", lr_at_step(55, 100, 1.0f, 10, 0.1f), 0.55, 1e-5);
    check_close("schedule: the last step reaches the floor", lr_at_step(100, 100, 1.0f, 10, 0.1f), 0.1, 1e-6);
    check_close("schedule: final fraction 1 is constant", lr_at_step(70, 100, 3e-4f, 0, 1.0f), 3e-4, 1e-6);
    int monotone = 1;
    for (int s = 10; s < 100; s++) monotone &= lr_at_step(s + 1, 100, 1.0f, 10, 0.0f) <= lr_at_step(s, 100, 1.0f, 10, 0.0f);
    CHECK(monotone, "schedule: cosine decay never rises");
}

int main(void) {
    test_sampler();
    test_schedule();
    return test_finish();
}
