// bench_engine.c: the C reference engine's training speed: tokens/s of full steps (forward,
// backward, AdamW) on random tokens, for a model descriptor and B, T.
// usage: bench_engine [descriptor B T steps]...   (default: d12 4 64 3, d4 4 64 5)
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpt2_cpu.h"
#include "rng.h"
#include "util.h"

static void bench(const char* desc, int B, int T, int steps) {
    GPT2Config cfg;
    if (!gpt2_config_from_descriptor(desc, 1024, &cfg)) fatal("bench_engine: '%s' is not a model descriptor", desc);
    GPT2CPU m;
    gpt2_cpu_init(&m, &cfg, B, T);
    gpt2_init_params(&cfg, m.params, 1);
    int* inputs = (int*)malloc_check((size_t)B * T * sizeof(int), "inputs");
    int* targets = (int*)malloc_check((size_t)B * T * sizeof(int), "targets");
    uint64_t r = rng_seed(3);
    AdamWConfig opt = {0.9f, 0.95f, 1e-8f, 0.1f};
    double fwd_ms = 0, bwd_ms = 0, upd_ms = 0;
    for (int s = 0; s <= steps; s++) {  // step 0 warms caches and is not counted
        for (int i = 0; i < B * T; i++) {
            inputs[i] = (int)rng_below(&r, cfg.vocab_size);
            targets[i] = (int)rng_below(&r, cfg.vocab_size);
        }
        double t0 = wall_time_ms();
        gpt2_cpu_zero_grad(&m);
        gpt2_cpu_forward(&m, inputs, targets, B, T);
        double t1 = wall_time_ms();
        gpt2_cpu_backward(&m, 1.0f);
        double t2 = wall_time_ms();
        gpt2_cpu_update(&m, &opt, 1e-4f, 1.0f, s + 1);
        double t3 = wall_time_ms();
        if (s > 0) { fwd_ms += t1 - t0; bwd_ms += t2 - t1; upd_ms += t3 - t2; }
    }
    double step_ms = (fwd_ms + bwd_ms + upd_ms) / steps;
    size_t n = m.layout.num_parameters;
    double flops = 6.0 * n * B * T + 6.0 * cfg.num_layers * cfg.channels * (double)T * B * T;  // 6N + attention
    printf("%-4s B=%d T=%-4d %7.1fM params | %8.1f ms/step (fwd %.1f, bwd %.1f, adamw %.1f) | %7.0f tok/s | %5.1f GFLOP/s\n",
           desc, B, T, n / 1e6, step_ms, fwd_ms / steps, bwd_ms / steps, upd_ms / steps, B * T / (step_ms / 1e3),
           flops / (step_ms / 1e3) / 1e9);
    free(inputs);
    free(targets);
    gpt2_cpu_free(&m);
}

int main(int argc, char** argv) {
    printf("C reference engine, %d OpenMP threads\n", omp_get_max_threads());
    if (argc == 1) {
        bench("d12", 4, 64, 3);
        bench("d4", 4, 64, 5);
        return 0;
    }
    if ((argc - 1) % 4 != 0) fatal("usage: bench_engine [descriptor B T steps]...");
    for (int a = 1; a < argc; a += 4) bench(argv[a], atoi(argv[a + 1]), atoi(argv[a + 2]), atoi(argv[a + 3]));
    return 0;
}
