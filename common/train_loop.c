// train_loop.c: the training driver (see train_loop.h). Reads top to bottom as a run:
// options, model and data (train_setup), then weights, resume and the step loop with
// validation, samples and checkpoints (train_run).
#define _POSIX_C_SOURCE 200809L
#include "train_loop.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "logger.h"
#include "rng.h"
#include "sampler.h"
#include "schedule.h"
#include "tokenizer.h"
#include "util.h"

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
    if (strcmp(o->engine, "auto") != 0 && strcmp(o->engine, "gpu") != 0 && strcmp(o->engine, "cpu") != 0)
        fatal("flag --engine expects auto, gpu or cpu, got '%s'", o->engine);
    if (o->recompute < 0 || o->recompute > 3) fatal("flag -r (recompute) must be 0, 1, 2 or 3, got %d", o->recompute);
    if (o->recompute_every < 0) fatal("flag --recompute-every must be non-negative, got %d", o->recompute_every);
    if (o->gelu_fusion < 0 || o->gelu_fusion > 2) fatal("flag -ge (gelu fusion) must be 0, 1 or 2, got %d", o->gelu_fusion);
    if (!(o->loss_scale > 0)) fatal("flag --loss-scale must be positive, got %g", o->loss_scale);
    if (o->loss_scale_interval <= 0)
        fatal("flag --loss-scale-interval must be positive, got %d", o->loss_scale_interval);
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

void train_setup(TrainSetup* s, int argc, char** argv) {
    memset(s, 0, sizeof(*s));
    TrainOptions* o = &s->opts;
    cli_parse(o, argc, argv);
    options_validate(o);
    s->rank = 0;  // multi-process runs arrive with the MPI issue
    s->num_ranks = 1;

    model_config_from_flag(o->model, &s->config, &s->model_from_file);
    if (o->T > s->config.max_seq_len)
        fatal("flag -t (sequence length) is %d, the model's maximum is %d", o->T, s->config.max_seq_len);
    long tokens_per_micro = (long)o->B * o->T * s->num_ranks;
    s->total_batch = o->total_batch == -1 ? tokens_per_micro : o->total_batch;
    if (s->total_batch <= 0 || s->total_batch % tokens_per_micro != 0)
        fatal("flag -d (total batch) is %ld tokens, expected a positive multiple of B*T*ranks = %ld", s->total_batch,
              tokens_per_micro);
    s->accum = (int)(s->total_batch / tokens_per_micro);

    // Data: given shards, or the built-in corpus made on first use.
    s->train_pattern = o->train_data;
    s->val_pattern = o->val_data;
    if (s->train_pattern[0] == '\0') {
        corpus_prepare(&s->corpus, o->tokenizer);
        s->train_pattern = s->corpus.train_pattern;
        if (s->val_pattern[0] == '\0') s->val_pattern = s->corpus.val_pattern;
    }
    dataloader_init(&s->train, s->train_pattern, o->B, o->T, s->rank, s->num_ranks, o->shuffle, (uint64_t)o->seed,
                    s->config.vocab_size);
    s->have_val = s->val_pattern[0] != '\0' && o->val_every > 0;
    if (s->have_val)
        dataloader_init(&s->val, s->val_pattern, o->B, o->T, s->rank, s->num_ranks, 0, 0, s->config.vocab_size);
    s->max_steps = o->max_steps;
    if (s->max_steps == -1) {
        s->max_steps = (int)(s->train.total_windows / s->accum);
        if (s->max_steps == 0)
            fatal("train data %s holds less than one step of %ld tokens; set -x", s->train_pattern, s->total_batch);
    }

    EngineOptions* eo = &s->engine_options;
    eo->B = o->B;
    eo->T = o->T;
    eo->rank = s->rank;
    eo->num_ranks = s->num_ranks;
    eo->loss_scale_init = o->loss_scale;
    eo->loss_scale_interval = o->loss_scale_interval;
    eo->gelu_fusion = o->gelu_fusion;
    eo->recompute = o->recompute;
    eo->recompute_every = o->recompute_every;
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

// Generates from <|endoftext|> (token 0 when the model's vocabulary is too small to hold it); the
// context is the last T tokens when the sample grows longer.
static void sample_and_print(Engine* e, const TrainOptions* o, const Tokenizer* tok, uint64_t* rng, int* gen,
                             float* logits, int* scratch) {
    int V = e->config.vocab_size, T = o->T;
    gen[0] = GPT2_EOT < V ? GPT2_EOT : 0;
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

static void memory_report_print(Engine* e) {
    MemoryReport r = {0};
    e->memory_report(e, &r);
    size_t total = 0;
    printf("memory:");
    for (int i = 0; i < r.count; i++) {
        if (r.items[i].bytes == 0) continue;
        printf(" %s %.1f MiB |", r.items[i].name, r.items[i].bytes / 1048576.0);
        total += r.items[i].bytes;
    }
    printf(" total %.1f MiB\n", total / 1048576.0);
}

// ---------------------------------------------------------------------------------------------
// The run

int train_run(TrainSetup* s, Engine* e) {
    const TrainOptions* o = &s->opts;
    const GPT2Config* cfg = &s->config;
    size_t n = gpt2_param_layout(cfg).num_parameters;

    // Weights: a model file, or a fresh seeded init. Host fp32 only until the engine has them.
    float* host_params = (float*)malloc_check(n * sizeof(float), "parameters");
    if (s->model_from_file) model_file_read_params(o->model, cfg, host_params);
    else gpt2_init_params(cfg, host_params, (unsigned long long)o->seed);
    e->set_params(e, host_params);
    free(host_params);

    TrainState st = {0};
    st.rng_state = rng_seed((uint64_t)o->seed ^ 0x5A4D504C45ull);  // the sampler's own stream
    st.B = o->B; st.T = o->T; st.num_processes = s->num_ranks;
    if (o->output_dir[0]) make_dirs(o->output_dir);
    if (o->resume) {
        long step = checkpoint_latest(o->output_dir);
        if (step < 0) fatal("flag -y 1: no checkpoint (model_*.bin with state_*.bin) in %s", o->output_dir);
        char mp[4200], sp[4200];
        checkpoint_paths(o->output_dir, step, mp, sp, sizeof(mp));
        e->checkpoint_load(e, mp, sp, &st);
        if (st.B != o->B || st.T != o->T || st.num_processes != s->num_ranks)
            fatal("state file %s was written with B=%d T=%d ranks=%d; this run has B=%d T=%d ranks=%d", sp, st.B, st.T,
                  st.num_processes, o->B, o->T, s->num_ranks);
        dataloader_set_pos(&s->train, st.train_pos);
        printf("resume: step %lld from %s\n", (long long)st.step, mp);
    }

    Tokenizer* tok = file_exists(o->tokenizer) ? tokenizer_load(o->tokenizer) : tokenizer_bytes_only();
    Logger log;
    logger_open(&log, o->output_dir, o->resume);

    printf("model: %s | L=%d C=%d NH=%d maxT=%d V=%d (padded %d) | %.2fM parameters\n", o->model, cfg->num_layers,
           cfg->channels, cfg->num_heads, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size, n / 1e6);
    printf("engine: %s\n", e->name);
    memory_report_print(e);
    printf("train: %s (%d shards, %lld batches of B=%d T=%d per epoch) | val: %s\n", s->train_pattern, s->train.nfiles,
           (long long)s->train.total_windows, o->B, o->T, s->have_val ? s->val_pattern : "none");
    printf("steps: %d | total batch %ld tokens = %d micro-steps | lr %g warmup %d floor %g | wd %g | clip %g\n",
           s->max_steps, s->total_batch, s->accum, o->lr, o->warmup, o->final_lr_frac, o->weight_decay, o->grad_clip);
    printf("samples: %s\n", tokenizer_can_merge(tok) ? o->tokenizer : "byte-level decoding (no tokenizer file)");

    AdamWConfig opt = {o->beta1, o->beta2, o->eps, o->weight_decay};
    int V = cfg->vocab_size;
    float* logits = (float*)malloc_check((size_t)V * sizeof(float), "sample logits");
    int* scratch = (int*)malloc_check((size_t)V * sizeof(int), "sample scratch");
    int* gen = (int*)malloc_check((size_t)(o->gen_tokens + 1) * sizeof(int), "sample tokens");
    double flops_per_step = gpt2_flops_per_token(cfg, o->T) * (double)s->total_batch;
    double total_ms = 0.0;
    int timed_steps = 0;

    int start_step = (int)st.step;
    if (start_step > s->max_steps)
        fatal("flag -x (steps) is %d but the checkpoint is at step %d", s->max_steps, start_step);
    for (int step = start_step; step <= s->max_steps; step++) {
        int last = step == s->max_steps;
        // A resumed run's first step was evaluated and sampled before its checkpoint was written.
        int resumed_here = o->resume && step == start_step;
        if (s->have_val && (step % o->val_every == 0 || last) && !resumed_here) {
            float vl = evaluate(e, &s->val, o->val_steps);
            printf("val loss %.6f\n", vl);
            logger_val(&log, step, vl);
        }
        if (o->sample_every > 0 && o->gen_tokens > 0 && (step % o->sample_every == 0 || last) && step > 0 &&
            !resumed_here)
            sample_and_print(e, o, tok, &st.rng_state, gen, logits, scratch);
        if (o->checkpoint_every > 0 && step > start_step && (step % o->checkpoint_every == 0 || last)) {
            char mp[4200], sp[4200];
            checkpoint_paths(o->output_dir, step, mp, sp, sizeof(mp));
            st.step = step;
            st.train_pos = dataloader_get_pos(&s->train);
            e->checkpoint_save(e, mp, sp, &st);
            printf("checkpoint: wrote %s and %s\n", mp, sp);
        }
        if (last) break;

        double t0 = wall_time_ms();
        for (int micro = 0; micro < s->accum; micro++) {
            if (!o->overfit || (step == 0 && micro == 0)) dataloader_next_batch(&s->train);
            e->micro_step(e, s->train.inputs, s->train.targets, o->B, o->T, 1.0f / s->accum, micro == s->accum - 1);
        }
        float lr = lr_at_step(step, s->max_steps, o->lr, o->warmup, o->final_lr_frac);
        StepResult r = e->optimizer_step(e, &opt, lr, o->grad_clip);
        double ms = wall_time_ms() - t0;
        double tok_s = s->total_batch / (ms / 1e3);
        if (step > start_step) { total_ms += ms; timed_steps++; }  // the first step pays for warm-up
        if ((step + 1) % o->log_every == 0 || step + 1 == s->max_steps || !r.applied) {
            printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", step + 1, s->max_steps,
                   r.loss, r.grad_norm, lr, ms, tok_s);
            if (e->peak_flops > 0) printf(" | MFU %.1f%%", 100.0 * flops_per_step / (ms / 1e3) / e->peak_flops);
            if (r.loss_scale != 1.0f) printf(" | scale %g", r.loss_scale);
            if (!r.applied) printf(" | skipped: non-finite gradients");
            printf("\n");
        }
        logger_step(&log, step + 1, r.loss, r.grad_norm, lr, ms, tok_s, r.loss_scale, !r.applied);
        if (!isfinite(r.loss)) fatal("loss is %f at step %d: training diverged", r.loss, step + 1);
        if (!r.applied && !e->loss_scaling)
            fatal("gradient norm is %f at step %d: training diverged (the update was not applied)", r.grad_norm, step + 1);
    }
    if (timed_steps > 0)
        printf("done: %d steps, mean %.1f ms/step, %.0f tok/s (after the first step)\n", s->max_steps - start_step,
               total_ms / timed_steps, s->total_batch / (total_ms / timed_steps / 1e3));

    logger_close(&log);
    tokenizer_free(tok);
    free(logits); free(scratch); free(gen);
    dataloader_free(&s->train);
    if (s->have_val) dataloader_free(&s->val);
    e->destroy(e);
    return 0;
}
