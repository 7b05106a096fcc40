// train_loop.c: the training driver (see train_loop.h). Reads top to bottom as a run:
// options, model, data, resume, then the step loop with validation, samples and checkpoints.
#define _POSIX_C_SOURCE 200809L
#include "train_loop.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "corpus.h"
#include "dataloader.h"
#include "gpt2_cpu.h"
#include "logger.h"
#include "rng.h"
#include "sampler.h"
#include "schedule.h"
#include "tokenizer.h"
#include "util.h"

float engine_optimizer_step(Engine* e, const AdamWConfig* opt, float lr, float clip, int t) {
    float norm = e->grad_norm(e);
    float scale = 1.0f;
    if (clip > 0.0f && norm > clip) scale = clip / (norm + 1e-6f);
    e->update(e, opt, lr, scale, t);
    return norm;
}

// ---------------------------------------------------------------------------------------------
// Options and model

static void options_validate(const TrainOptions* o) {
    if (o->B <= 0) fatal("flag -b (micro-batch) must be positive, got %d", o->B);
    if (o->T <= 0) fatal("flag -t (sequence length) must be positive, got %d", o->T);
    if (o->lr < 0) fatal("flag -l (learning rate) must be non-negative, got %g", o->lr);
    if (o->warmup < 0) fatal("flag -u (warmup) must be non-negative, got %d", o->warmup);
    if (o->final_lr_frac < 0 || o->final_lr_frac > 1) fatal("flag -q (final lr fraction) must be in [0, 1], got %g", o->final_lr_frac);
    if (o->weight_decay < 0) fatal("flag -c (weight decay) must be non-negative, got %g", o->weight_decay);
    if (o->grad_clip < 0) fatal("flag -G (grad clip) must be non-negative, got %g", o->grad_clip);
    if (o->beta1 < 0 || o->beta1 >= 1) fatal("flag -B1 (beta1) must be in [0, 1), got %g", o->beta1);
    if (o->beta2 < 0 || o->beta2 >= 1) fatal("flag -B2 (beta2) must be in [0, 1), got %g", o->beta2);
    if (o->eps <= 0) fatal("flag -E (adam eps) must be positive, got %g", o->eps);
    if (o->max_steps < -1) fatal("flag -x (steps) must be -1 or non-negative, got %d", o->max_steps);
    if (o->val_every < 0) fatal("flag -v (val every) must be non-negative, got %d", o->val_every);
    if (o->val_steps == 0 || o->val_steps < -1) fatal("flag -m (val steps) must be positive or -1, got %d", o->val_steps);
    if (o->sample_every < 0) fatal("flag -s (sample every) must be non-negative, got %d", o->sample_every);
    if (o->gen_tokens < 0) fatal("flag -g (gen tokens) must be non-negative, got %d", o->gen_tokens);
    if (o->temperature < 0) fatal("flag -T (temperature) must be non-negative, got %g", o->temperature);
    if (o->top_k < 0) fatal("flag -k (top-k) must be non-negative, got %d", o->top_k);
    if (o->checkpoint_every < 0) fatal("flag -n (checkpoint every) must be non-negative, got %d", o->checkpoint_every);
    if (o->resume != 0 && o->resume != 1) fatal("flag -y (resume) must be 0 or 1, got %d", o->resume);
    if (o->shuffle != 0 && o->shuffle != 1) fatal("flag -z (shuffle) must be 0 or 1, got %d", o->shuffle);
    if (o->overfit != 0 && o->overfit != 1) fatal("flag -a (overfit) must be 0 or 1, got %d", o->overfit);
    if (o->log_every <= 0) fatal("flag -p (print every) must be positive, got %d", o->log_every);
    if ((o->resume || o->checkpoint_every) && o->output_dir[0] == '\0')
        fatal("flags -y and -n need an output dir (-o)");
}

// A descriptor builds a fresh model (max sequence 1024, like GPT-2); anything else is a file.
static void model_config_from_flag(const char* model, GPT2Config* cfg, int* from_file) {
    *from_file = !gpt2_config_from_descriptor(model, 1024, cfg);
    if (*from_file) {
        if (!file_exists(model))
            fatal("flag -e: '%s' is neither a model descriptor (d1..d6, d12, d24, d36, d48) nor a model file", model);
        model_file_read_config(model, cfg);
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints: OUT/model_STEP.bin (llm.c format, fp32) and OUT/state_STEP.bin

static void checkpoint_paths(const char* dir, long step, char* model_path, char* state_path, size_t cap) {
    snprintf(model_path, cap, "%s/model_%08ld.bin", dir, step);
    snprintf(state_path, cap, "%s/state_%08ld.bin", dir, step);
}

// The newest step with both files present, or -1.
static long checkpoint_latest(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return -1;
    long best = -1;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        long step;
        char tail[8];
        if (sscanf(ent->d_name, "state_%ld.%4s", &step, tail) == 2 && strcmp(tail, "bin") == 0 && step > best) {
            char mp[4200], sp[4200];
            checkpoint_paths(dir, step, mp, sp, sizeof(mp));
            if (file_exists(mp) && strlen(ent->d_name) == strlen("state_00000000.bin")) best = step;
        }
    }
    closedir(d);
    return best;
}

static void checkpoint_save(Engine* e, const char* dir, const TrainState* st, float* host_params, float* m, float* v) {
    char mp[4200], sp[4200];
    checkpoint_paths(dir, (long)st->step, mp, sp, sizeof(mp));
    size_t n = gpt2_param_layout(&e->config).num_parameters;
    e->get_params(e, host_params);
    e->get_opt_state(e, m, v);
    // The model file goes last: a state file is only trusted next to its model file.
    state_file_write(sp, &e->config, st, m, v, n);
    model_file_write(mp, &e->config, host_params);
    printf("checkpoint: wrote %s and %s\n", mp, sp);
}

// ---------------------------------------------------------------------------------------------
// Validation and sampling

static float evaluate(Engine* e, DataLoader* val, int steps) {
    dataloader_reset(val);
    int n = steps < 0 || steps > val->total_windows ? (int)val->total_windows : steps;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        sum += e->forward(e, val->inputs, val->targets, val->B, val->T);
    }
    return (float)(sum / n);
}

// Generates from <|endoftext|>; the context is the last T tokens when the sample grows longer.
static void sample_and_print(Engine* e, const TrainOptions* o, const Tokenizer* tok, uint64_t* rng, int* gen,
                             float* logits, int* scratch) {
    int V = e->config.vocab_size, T = o->T;
    gen[0] = GPT2_EOT;
    int len = 1;
    Utf8Printer printer = {0};
    printf("generating:\n---\n");
    for (int i = 0; i < o->gen_tokens; i++) {
        int start = len > T ? len - T : 0;
        int ctx = len - start;
        e->forward(e, gen + start, NULL, 1, ctx);
        e->logits_at(e, 0, ctx - 1, logits);
        int next = sample_token(logits, V, o->temperature, o->top_k, rng, scratch);
        gen[len++] = next;
        size_t nbytes;
        const unsigned char* bytes = tokenizer_decode(tok, next, &nbytes);
        if (bytes) utf8_printer_put(&printer, stdout, bytes, nbytes);
        else printf("<%d>", next);
    }
    utf8_printer_flush(&printer, stdout);
    printf("\n---\n");
    fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// main

int train_main(int argc, char** argv, EngineCreateFn gpu_create) {
    TrainOptions o;
    cli_parse(&o, argc, argv);
    options_validate(&o);
    int rank = 0, nproc = 1;  // multi-process runs arrive with the MPI issue

    GPT2Config cfg;
    int from_file;
    model_config_from_flag(o.model, &cfg, &from_file);
    if (o.T > cfg.max_seq_len) fatal("flag -t (sequence length) is %d, the model's maximum is %d", o.T, cfg.max_seq_len);
    long tokens_per_micro = (long)o.B * o.T * nproc;
    long total_batch = o.total_batch == -1 ? tokens_per_micro : o.total_batch;
    if (total_batch <= 0 || total_batch % tokens_per_micro != 0)
        fatal("flag -d (total batch) is %ld tokens, expected a positive multiple of B*T*ranks = %ld", total_batch,
              tokens_per_micro);
    int accum = (int)(total_batch / tokens_per_micro);

    // Data: given shards, or the built-in corpus made on first use.
    const char* train_pattern = o.train_data;
    const char* val_pattern = o.val_data;
    CorpusPaths corpus;
    if (train_pattern[0] == '\0') {
        corpus_prepare(&corpus, o.tokenizer);
        train_pattern = corpus.train_pattern;
        if (val_pattern[0] == '\0') val_pattern = corpus.val_pattern;
    }
    DataLoader train, val;
    dataloader_init(&train, train_pattern, o.B, o.T, rank, nproc, o.shuffle, (uint64_t)o.seed, cfg.vocab_size);
    int have_val = val_pattern[0] != '\0' && o.val_every > 0;
    if (have_val) dataloader_init(&val, val_pattern, o.B, o.T, rank, nproc, 0, 0, cfg.vocab_size);
    int max_steps = o.max_steps;
    if (max_steps == -1) {
        max_steps = (int)(train.total_windows / accum);
        if (max_steps == 0) fatal("train data %s holds less than one step of %ld tokens; set -x", train_pattern, total_batch);
    }

    // Engine: the GPU when one can be used, else the C reference engine.
    Engine* e = NULL;
    char why[512] = "this build has no CUDA";
    if (gpu_create) e = gpu_create(&cfg, o.B, o.T, why, sizeof(why));
    if (!e) {
        printf("engine: no usable GPU (%s); using the C reference engine\n", why);
        e = gpt2_cpu_engine_create(&cfg, o.B, o.T);
    }
    size_t n = gpt2_param_layout(&cfg).num_parameters;
    float* host_params = (float*)malloc_check(n * sizeof(float), "parameters");
    // Host copies of the optimizer state only cross to checkpoints: 8 bytes a parameter, so
    // they exist only in runs that save or resume.
    int checkpoints = o.resume || o.checkpoint_every > 0;
    float* host_m = checkpoints ? (float*)malloc_check(n * sizeof(float), "AdamW m") : NULL;
    float* host_v = checkpoints ? (float*)malloc_check(n * sizeof(float), "AdamW v") : NULL;
    if (from_file) model_file_read_params(o.model, &cfg, host_params);
    else gpt2_init_params(&cfg, host_params, (unsigned long long)o.seed);
    e->set_params(e, host_params);

    TrainState st = {0};
    st.rng_state = rng_seed((uint64_t)o.seed ^ 0x5A4D504C45ull);  // the sampler's own stream
    st.B = o.B; st.T = o.T; st.num_processes = nproc;
    if (o.output_dir[0]) make_dirs(o.output_dir);
    if (o.resume) {
        long step = checkpoint_latest(o.output_dir);
        if (step < 0) fatal("flag -y 1: no checkpoint (model_*.bin with state_*.bin) in %s", o.output_dir);
        char mp[4200], sp[4200];
        checkpoint_paths(o.output_dir, step, mp, sp, sizeof(mp));
        model_file_read_params(mp, &cfg, host_params);
        state_file_read(sp, &cfg, &st, host_m, host_v, n);
        if (st.B != o.B || st.T != o.T || st.num_processes != nproc)
            fatal("state file %s was written with B=%d T=%d ranks=%d; this run has B=%d T=%d ranks=%d", sp, st.B, st.T,
                  st.num_processes, o.B, o.T, nproc);
        e->set_params(e, host_params);
        e->set_opt_state(e, host_m, host_v);
        dataloader_set_pos(&train, st.train_pos);
        printf("resume: step %lld from %s\n", (long long)st.step, mp);
    }

    Tokenizer* tok = file_exists(o.tokenizer) ? tokenizer_load(o.tokenizer) : tokenizer_bytes_only();
    Logger log;
    logger_open(&log, o.output_dir, o.resume);

    printf("model: %s | L=%d C=%d NH=%d maxT=%d V=%d (padded %d) | %.2fM parameters\n", o.model,
           cfg.num_layers, cfg.channels, cfg.num_heads, cfg.max_seq_len, cfg.vocab_size, cfg.padded_vocab_size, n / 1e6);
    printf("engine: %s\n", e->name);
    printf("train: %s (%d shards, %lld batches of B=%d T=%d per epoch) | val: %s\n", train_pattern, train.nfiles,
           (long long)train.total_windows, o.B, o.T, have_val ? val_pattern : "none");
    printf("steps: %d | total batch %ld tokens = %d micro-steps | lr %g warmup %d floor %g | wd %g | clip %g\n",
           max_steps, total_batch, accum, o.lr, o.warmup, o.final_lr_frac, o.weight_decay, o.grad_clip);
    printf("samples: %s\n", tokenizer_can_merge(tok) ? o.tokenizer : "byte-level decoding (no tokenizer file)");

    AdamWConfig opt = {o.beta1, o.beta2, o.eps, o.weight_decay};
    int V = cfg.vocab_size;
    float* logits = (float*)malloc_check((size_t)V * sizeof(float), "sample logits");
    int* scratch = (int*)malloc_check((size_t)V * sizeof(int), "sample scratch");
    int* gen = (int*)malloc_check((size_t)(o.gen_tokens + 1) * sizeof(int), "sample tokens");
    double total_ms = 0.0;
    int timed_steps = 0;

    int start_step = (int)st.step;
    if (start_step > max_steps) fatal("flag -x (steps) is %d but the checkpoint is at step %d", max_steps, start_step);
    for (int step = start_step; step <= max_steps; step++) {
        int last = step == max_steps;
        if (have_val && (step % o.val_every == 0 || last)) {
            float vl = evaluate(e, &val, o.val_steps);
            printf("val loss %.6f\n", vl);
            logger_val(&log, step, vl);
        }
        if (o.sample_every > 0 && o.gen_tokens > 0 && (step % o.sample_every == 0 || last) && step > 0)
            sample_and_print(e, &o, tok, &st.rng_state, gen, logits, scratch);
        if (o.checkpoint_every > 0 && step > start_step && (step % o.checkpoint_every == 0 || last)) {
            st.step = step;
            st.train_pos = dataloader_get_pos(&train);
            checkpoint_save(e, o.output_dir, &st, host_params, host_m, host_v);
        }
        if (last) break;

        double t0 = wall_time_ms();
        e->zero_grad(e);
        double loss = 0.0;
        for (int micro = 0; micro < accum; micro++) {
            if (!o.overfit || (step == 0 && micro == 0)) dataloader_next_batch(&train);
            loss += e->forward(e, train.inputs, train.targets, o.B, o.T);
            e->backward(e, 1.0f / accum);
        }
        loss /= accum;
        float lr = lr_at_step(step, max_steps, o.lr, o.warmup, o.final_lr_frac);
        float norm = engine_optimizer_step(e, &opt, lr, o.grad_clip, step + 1);
        double ms = wall_time_ms() - t0;
        double tok_s = total_batch / (ms / 1e3);
        if (step > 0) { total_ms += ms; timed_steps++; }  // the first step pays for warm-up
        if ((step + 1) % o.log_every == 0 || step + 1 == max_steps)
            printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s\n", step + 1, max_steps,
                   loss, norm, lr, ms, tok_s);
        logger_step(&log, step + 1, (float)loss, norm, lr, ms, tok_s);
        if (!isfinite(loss)) fatal("loss is %f at step %d: training diverged", loss, step + 1);
    }
    if (timed_steps > 0)
        printf("done: %d steps, mean %.1f ms/step, %.0f tok/s (after the first step)\n", max_steps - start_step,
               total_ms / timed_steps, total_batch / (total_ms / timed_steps / 1e3));

    logger_close(&log);
    tokenizer_free(tok);
    free(logits); free(scratch); free(gen);
    free(host_params); free(host_m); free(host_v);
    dataloader_free(&train);
    if (have_val) dataloader_free(&val);
    e->destroy(e);
    return 0;
}
