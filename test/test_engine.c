// test_engine.c: the C reference engine's own checks: finite-difference gradients, gradient
// accumulation, thread-count independence, padding rows, and model-file round trips
// (including llm.c's bf16 version 5).
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "gpt2_cpu.h"
#include "rng.h"
#include "test.h"
#include "util.h"

static GPT2Config small_config(int V) {
    GPT2Config c = {16, V, gpt2_padded_vocab(V), 2, 2, 32};
    return c;
}

static void random_tokens(int* inputs, int* targets, int n, int V, uint64_t seed) {
    uint64_t r = rng_seed(seed);
    for (int i = 0; i < n; i++) {
        inputs[i] = (int)rng_below(&r, V);
        targets[i] = (int)rng_below(&r, V);
    }
}

static double rel_norm_diff(const float* a, const float* b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d) / (sqrt(s) > 0 ? sqrt(s) : 1);
}

// Central differences in fp32 at the entries with the largest gradient and a few random ones.
static void test_finite_differences(void) {
    GPT2Config cfg = small_config(211);
    int B = 2, T = 8;
    GPT2CPU m;
    gpt2_cpu_init(&m, &cfg, B, T);
    gpt2_init_params(&cfg, m.params, 5);
    // Larger than GPT-2's init so every tensor's gradient is well above fp32 noise.
    for (size_t i = 0; i < m.layout.num_parameters; i++) m.params[i] *= 3.0f;
    int inputs[16], targets[16];
    random_tokens(inputs, targets, B * T, cfg.vocab_size, 9);
    gpt2_cpu_zero_grad(&m);
    gpt2_cpu_forward(&m, inputs, targets, B, T);
    gpt2_cpu_backward(&m, 1.0f);
    uint64_t r = rng_seed(11);
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++) {
        const ParamTensor* pt = &m.layout.tensors[k];
        size_t limit = k == PT_WTE ? (size_t)cfg.vocab_size * cfg.channels : pt->numel;
        size_t picks[5];
        size_t best = 0;
        for (size_t i = 0; i < limit; i++)
            if (fabsf(m.grads[pt->offset + i]) > fabsf(m.grads[pt->offset + best])) best = i;
        picks[0] = best;
        for (int j = 1; j < 5; j++) picks[j] = rng_below(&r, limit);
        int ok = 1;
        char why[256] = "";
        for (int j = 0; j < 5; j++) {
            float* p = m.params + pt->offset + picks[j];
            float g = m.grads[pt->offset + picks[j]];
            float saved = *p, h = 1e-2f;
            *p = saved + h;
            double lp = gpt2_cpu_forward(&m, inputs, targets, B, T);
            *p = saved - h;
            double lm = gpt2_cpu_forward(&m, inputs, targets, B, T);
            *p = saved;
            double fd = (lp - lm) / (2 * h);
            double err = fabs(fd - g);
            if (err > 2e-2 * fabs(g) + 3e-4) {
                ok = 0;
                snprintf(why, sizeof(why), "entry %zu: analytic %.6g, finite difference %.6g", picks[j], g, fd);
            }
        }
        char name[96];
        snprintf(name, sizeof(name), "finite differences %s", pt->name);
        test_report(ok, name, why);
    }
    gpt2_cpu_free(&m);
}

// One step of B=8 equals two micro-steps of B=4 with dloss_scale 1/2.
static void test_accumulation(void) {
    GPT2Config cfg = small_config(300);
    int T = 16;
    GPT2CPU big, small;
    gpt2_cpu_init(&big, &cfg, 8, T);
    gpt2_cpu_init(&small, &cfg, 4, T);
    gpt2_init_params(&cfg, big.params, 3);
    memcpy(small.params, big.params, big.layout.num_parameters * sizeof(float));
    int inputs[8 * 16], targets[8 * 16];
    random_tokens(inputs, targets, 8 * T, cfg.vocab_size, 4);
    gpt2_cpu_zero_grad(&big);
    float lbig = gpt2_cpu_forward(&big, inputs, targets, 8, T);
    gpt2_cpu_backward(&big, 1.0f);
    gpt2_cpu_zero_grad(&small);
    float l0 = gpt2_cpu_forward(&small, inputs, targets, 4, T);
    gpt2_cpu_backward(&small, 0.5f);
    float l1 = gpt2_cpu_forward(&small, inputs + 4 * T, targets + 4 * T, 4, T);
    gpt2_cpu_backward(&small, 0.5f);
    size_t n = big.layout.num_parameters;
    check_close("accumulation: mean loss of 2 x B=4 equals B=8", 0.5 * (l0 + l1), lbig, 1e-6);
    double e = rel_norm_diff(small.grads, big.grads, n);
    char why[128];
    snprintf(why, sizeof(why), "gradient relative difference %.3g > 1e-6", e);
    test_report(e <= 1e-6, "accumulation: gradients of 2 x B=4 equal B=8", why);
    AdamWConfig opt = {0.9f, 0.95f, 1e-8f, 0.1f, 0.0f, 0.0f};
    gpt2_cpu_update(&big, &opt, 1e-3f, 1.0f, 1);
    gpt2_cpu_update(&small, &opt, 1e-3f, 1.0f, 1);
    // Adam divides by sqrt(v): entries with gradients near zero amplify rounding, so compare the update.
    double d = 0, s = 0;
    float* init = (float*)malloc_check(n * sizeof(float), "init");
    gpt2_init_params(&cfg, init, 3);
    for (size_t i = 0; i < n; i++) {
        double a = small.params[i] - init[i], b = big.params[i] - init[i];
        d += (a - b) * (a - b);
        s += b * b;
    }
    snprintf(why, sizeof(why), "update relative difference %.3g > 1e-4", sqrt(d / s));
    test_report(sqrt(d / s) <= 1e-4, "accumulation: AdamW updates agree", why);
    free(init);
    gpt2_cpu_free(&big);
    gpt2_cpu_free(&small);
}

// Results must not depend on the number of threads: the reduction order is fixed.
static void test_thread_independence(void) {
    GPT2Config cfg = small_config(500);
    int B = 3, T = 16;
    int inputs[48], targets[48];
    random_tokens(inputs, targets, B * T, cfg.vocab_size, 6);
    float* grads[2];
    float loss[2];
    size_t n = 0;
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run == 0 ? 1 : 3);
        GPT2CPU m;
        gpt2_cpu_init(&m, &cfg, B, T);
        gpt2_init_params(&cfg, m.params, 8);
        gpt2_cpu_zero_grad(&m);
        loss[run] = gpt2_cpu_forward(&m, inputs, targets, B, T);
        gpt2_cpu_backward(&m, 1.0f);
        n = m.layout.num_parameters;
        grads[run] = (float*)malloc_check(n * sizeof(float), "grads");
        memcpy(grads[run], m.grads, n * sizeof(float));
        gpt2_cpu_free(&m);
    }
    omp_set_num_threads(saved);
    CHECK(loss[0] == loss[1] && memcmp(grads[0], grads[1], n * sizeof(float)) == 0,
          "1 thread and 3 threads give bit-identical loss and gradients");
    free(grads[0]);
    free(grads[1]);
}

// Padding rows of the embedding never produce loss: filling them changes nothing.
static void test_padding_rows(void) {
    GPT2Config cfg = small_config(250);  // padded to 256
    int B = 2, T = 8;
    int inputs[16], targets[16];
    random_tokens(inputs, targets, B * T, cfg.vocab_size, 12);
    GPT2CPU m;
    gpt2_cpu_init(&m, &cfg, B, T);
    gpt2_init_params(&cfg, m.params, 2);
    gpt2_cpu_zero_grad(&m);
    float l0 = gpt2_cpu_forward(&m, inputs, targets, B, T);
    gpt2_cpu_backward(&m, 1.0f);
    float pad_grad = 0.0f;
    for (int v = cfg.vocab_size; v < cfg.padded_vocab_size; v++)
        for (int c = 0; c < cfg.channels; c++) pad_grad += fabsf(m.grads[(size_t)v * cfg.channels + c]);
    for (int v = cfg.vocab_size; v < cfg.padded_vocab_size; v++)
        for (int c = 0; c < cfg.channels; c++) m.params[(size_t)v * cfg.channels + c] = 100.0f;
    float l1 = gpt2_cpu_forward(&m, inputs, targets, B, T);
    CHECK(l0 == l1, "padding rows: large padding weights leave the loss unchanged");
    CHECK(pad_grad == 0.0f, "padding rows: their gradient is zero");
    CHECK(m.acts.probs[cfg.vocab_size] == 0.0f, "padding rows: probability zero");
    gpt2_cpu_free(&m);
}

static void test_model_files(void) {
    GPT2Config cfg = small_config(300);
    ParamLayout layout = gpt2_param_layout(&cfg);
    size_t n = layout.num_parameters;
    float* p = (float*)malloc_check(n * sizeof(float), "p");
    float* q = (float*)malloc_check(n * sizeof(float), "q");
    gpt2_init_params(&cfg, p, 77);
    char path[] = "/tmp/test_engine_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "model file: temp file");
    model_file_write(path, &cfg, p);
    GPT2Config back;
    model_file_read_config(path, &back);
    CHECK(memcmp(&back, &cfg, sizeof(cfg)) == 0, "model file: config round trip");
    model_file_read_params(path, &cfg, q);
    CHECK(memcmp(p, q, n * sizeof(float)) == 0, "model file: fp32 parameters round trip bit for bit");
    // llm.c's bf16 file (version 5): the top 16 bits of each fp32, widened on load.
    FILE* f = fopen_check(path, "wb");
    int32_t h[256] = {20240326, 5, cfg.max_seq_len, cfg.vocab_size, cfg.num_layers, cfg.num_heads, cfg.channels,
                      cfg.padded_vocab_size};
    fwrite(h, sizeof(int32_t), 256, f);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &p[i], 4);
        uint16_t top = (uint16_t)(bits >> 16);
        fwrite(&top, 2, 1, f);
    }
    fclose(f);
    model_file_read_params(path, &cfg, q);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        uint32_t bits;
        memcpy(&bits, &p[i], 4);
        bits &= 0xFFFF0000u;
        float expect;
        memcpy(&expect, &bits, 4);
        ok = q[i] == expect;
    }
    CHECK(ok, "model file: llm.c bf16 (version 5) loads as the truncated values");
    unlink(path);
    free(p);
    free(q);
}

int main(void) {
    test_finite_differences();
    test_accumulation();
    test_thread_independence();
    test_padding_rows();
    test_model_files();
    return test_finish();
}
