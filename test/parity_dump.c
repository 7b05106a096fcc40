// parity_dump.c: runs the C reference engine on a small GPT-2 and writes everything the
// PyTorch parity script (torch_gpt2.py) compares: the model file it starts from, the token
// batches, logits, loss and every gradient of the first batch, then the losses and final
// weights of 10 AdamW steps (warmup, cosine decay, weight decay, clipping) through the same
// step function the trainer uses.
// usage: parity_dump OUT_DIR
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "gpt2_cpu.h"
#include "rng.h"
#include "schedule.h"
#include "engine.h"
#include "util.h"

#define BATCH 4
#define SEQ 32
#define STEPS 10

int main(int argc, char** argv) {
    if (argc != 2) fatal("usage: parity_dump OUT_DIR");
    const char* dir = argv[1];
    make_dirs(dir);
    GPT2Config cfg = {SEQ, GPT2_VOCAB_SIZE, gpt2_padded_vocab(GPT2_VOCAB_SIZE), 2, 4, 64};
    ParamLayout layout = gpt2_param_layout(&cfg);
    size_t n = layout.num_parameters;
    float* params = (float*)malloc_check(n * sizeof(float), "params");
    gpt2_init_params(&cfg, params, 42);
    char path[4200];
    snprintf(path, sizeof(path), "%s/model.bin", dir);
    model_file_write(path, &cfg, params);

    // Batches with structure to learn (a periodic walk over 40 ids spread across the whole
    // vocabulary, the last one the EOT) plus 10% noise, so losses fall and clipping engages.
    uint64_t rng = rng_seed(7);
    int ids[40];
    for (int i = 0; i < 39; i++) ids[i] = (int)rng_below(&rng, GPT2_VOCAB_SIZE);
    ids[39] = GPT2_EOT;
    int per = BATCH * SEQ + 1;
    int* tokens = (int*)malloc_check((size_t)STEPS * per * sizeof(int), "tokens");
    for (int i = 0; i < STEPS * per; i++)
        tokens[i] = rng_below(&rng, 10) == 0 ? (int)rng_below(&rng, GPT2_VOCAB_SIZE) : ids[(i * 7) % 40];
    snprintf(path, sizeof(path), "%s/tokens.bin", dir);
    FILE* f = fopen_check(path, "wb");
    fwrite_check(tokens, sizeof(int), (size_t)STEPS * per, f, path);
    fclose_check(f, path);

    EngineOptions eo = {0};
    eo.B = BATCH;
    eo.T = SEQ;
    eo.num_ranks = 1;
    char why[256];
    Engine* e = gpt2_cpu_engine_create(&cfg, &eo, why, sizeof(why));
    e->set_params(e, params);
    AdamWConfig opt = {0.9f, 0.95f, 1e-8f, 0.1f, 0.0f, 0.0f};
    float lr = 1e-3f, clip = 1.0f, final_frac = 0.1f;
    int warmup = 2;
    int inputs[BATCH * SEQ], targets[BATCH * SEQ];
    float losses[STEPS], lrs[STEPS], norms[STEPS];
    float* logits = (float*)malloc_check((size_t)BATCH * SEQ * cfg.vocab_size * sizeof(float), "logits");
    snprintf(path, sizeof(path), "%s/c_out.bin", dir);
    FILE* out = fopen_check(path, "wb");
    for (int step = 0; step < STEPS; step++) {
        // Each batch is BATCH rows of SEQ+1 consecutive tokens, like the data loader's.
        const int* batch = tokens + (size_t)step * per;
        for (int i = 0; i < BATCH * SEQ; i++) {
            inputs[i] = batch[i];
            targets[i] = batch[i + 1];
        }
        if (step == 0) {  // the logits come from a forward without targets, as sampling reads them
            e->forward(e, inputs, NULL, BATCH, SEQ);
            for (int b = 0; b < BATCH; b++)
                for (int t = 0; t < SEQ; t++) e->logits_at(e, b, t, logits + ((size_t)b * SEQ + t) * cfg.vocab_size);
        }
        e->micro_step(e, inputs, targets, BATCH, SEQ, 1.0f, 1);
        if (step == 0) {  // this is the C engine's own test: it may read the engine's gradients
            GPT2CPU* m = (GPT2CPU*)e->self;
            float loss0 = gpt2_cpu_forward(m, inputs, targets, BATCH, SEQ);
            fwrite_check(&loss0, sizeof(float), 1, out, path);
            fwrite_check(logits, sizeof(float), (size_t)BATCH * SEQ * cfg.vocab_size, out, path);
            fwrite_check(m->grads, sizeof(float), n, out, path);
        }
        lrs[step] = lr_at_step(step, STEPS, lr, warmup, final_frac);
        StepResult r = e->optimizer_step(e, &opt, lrs[step], clip);
        losses[step] = r.loss;
        norms[step] = r.grad_norm;
    }
    memcpy(params, ((GPT2CPU*)e->self)->params, n * sizeof(float));
    fwrite_check(losses, sizeof(float), STEPS, out, path);
    fwrite_check(norms, sizeof(float), STEPS, out, path);
    fwrite_check(lrs, sizeof(float), STEPS, out, path);
    fwrite_check(params, sizeof(float), n, out, path);
    fclose_check(out, path);

    snprintf(path, sizeof(path), "%s/config.txt", dir);
    f = fopen_check(path, "w");
    fprintf(f, "B %d\nT %d\nsteps %d\nlr %.9g\nwarmup %d\nfinal_frac %.9g\nweight_decay %.9g\nclip %.9g\n"
               "beta1 %.9g\nbeta2 %.9g\neps %.9g\n", BATCH, SEQ, STEPS, lr, warmup, final_frac, opt.weight_decay, clip,
            opt.beta1, opt.beta2, opt.eps);
    fclose_check(f, path);
    e->destroy(e);
    free(params); free(tokens); free(logits);
    printf("parity_dump: wrote %s\n", dir);
    return 0;
}
