// train_loop.c: the training driver (see train_loop.h). Reads top to bottom as a run:
// options, model, data and the output dir (train_setup), then weights, resume and the step loop
// with validation, samples, checkpoints and signals (train_run).
#define _GNU_SOURCE
#include "train_loop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "logger.h"
#include "memory_plan.h"
#include "ranks.h"
#include "rng.h"
#include "sampler.h"
#include "schedule.h"
#include "tokenizer.h"
#include "util.h"

// Bounds on sizes that come from flags, so every product below is exact in 64 bits and every
// count fits the int it is stored in. Far above any real run.
#define MAX_TOKENS_PER_MICRO_STEP (1L << 24)  // B*T*ranks
#define MAX_MICRO_STEPS (1L << 20)            // gradient accumulation steps per optimizer step
#define MAX_GEN_TOKENS (1 << 20)
#define MAX_PLAN_RANKS (1 << 20)              // --ranks: far above any cluster
#define MAX_THREADS 1024                      // libgomp itself overflows its stack near 70000
// The outlier guard (--skip-outliers): an exponential moving mean and variance with this weight
// (about the last 50 steps), active once this many finite steps were seen.
#define OUTLIER_ALPHA 0.02
#define OUTLIER_WARMUP 20

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
    if (o->max_steps < -1 || o->max_steps > CHECKPOINT_MAX_STEP)
        fatal("flag -x (steps) must be -1 or 0 to %lld, got %d", CHECKPOINT_MAX_STEP, o->max_steps);
    if (o->total_batch < -1 || o->total_batch == 0) fatal("flag -d (total batch) must be -1 or positive, got %ld", o->total_batch);
    if (o->val_every < 0) fatal("flag -v (val every) must be non-negative, got %d", o->val_every);
    if (o->val_steps == 0 || o->val_steps < -1) fatal("flag -m (val steps) must be positive or -1, got %d", o->val_steps);
    if (o->sample_every < 0) fatal("flag -s (sample every) must be non-negative, got %d", o->sample_every);
    if (o->gen_tokens < 0 || o->gen_tokens > MAX_GEN_TOKENS)
        fatal("flag -g (gen tokens) must be 0 to %d, got %d", MAX_GEN_TOKENS, o->gen_tokens);
    if (o->temperature < 0) fatal("flag -T (temperature) must be non-negative, got %g", o->temperature);
    if (o->top_k < 0) fatal("flag -k (top-k) must be non-negative, got %d", o->top_k);
    if (o->checkpoint_every < 0) fatal("flag -n (checkpoint every) must be non-negative, got %d", o->checkpoint_every);
    if (o->resume != 0 && o->resume != 1) fatal("flag -y (resume) must be 0 or 1, got %d", o->resume);
    if (o->shuffle != 0 && o->shuffle != 1) fatal("flag -sf (shuffle) must be 0 or 1, got %d", o->shuffle);
    if (o->zero_stage < 0 || o->zero_stage > 2) fatal("flag -z (ZeRO stage) must be 0, 1 or 2, got %d", o->zero_stage);
    if (o->overfit != 0 && o->overfit != 1) fatal("flag -a (overfit) must be 0 or 1, got %d", o->overfit);
    if (o->log_every <= 0) fatal("flag -p (print every) must be positive, got %d", o->log_every);
    if ((o->resume || o->checkpoint_every) && o->output_dir[0] == '\0')
        fatal("flags -y and -n need an output dir (-o)");
    if (o->resume && o->overwrite) fatal("flags -y 1 and --overwrite exclude each other (one continues a run, the other replaces it)");
    if (strcmp(o->engine, "auto") != 0 && strcmp(o->engine, "gpu") != 0 && strcmp(o->engine, "cpu") != 0)
        fatal("flag --engine expects auto, gpu or cpu, got '%s'", o->engine);
    if (o->recompute < 0 || o->recompute > 3) fatal("flag -r (recompute) must be 0, 1, 2 or 3, got %d", o->recompute);
    if (o->recompute_every < 0) fatal("flag --recompute-every must be non-negative, got %d", o->recompute_every);
    if (o->gelu_fusion < 0 || o->gelu_fusion > 2) fatal("flag -ge (gelu fusion) must be 0, 1 or 2, got %d", o->gelu_fusion);
    if (!(o->loss_scale > 0)) fatal("flag --loss-scale must be positive, got %g", o->loss_scale);
    if (o->loss_scale_interval <= 0)
        fatal("flag --loss-scale-interval must be positive, got %d", o->loss_scale_interval);
    if (o->skip_outliers < 0) fatal("flag --skip-outliers must be 0 (off) or a positive z-score, got %g", o->skip_outliers);
    if (strcmp(o->offload, "none") != 0 && strcmp(o->offload, "optimizer") != 0 && strcmp(o->offload, "grads") != 0)
        fatal("flag --offload expects optimizer, grads or none, got '%s'", o->offload);
    if (o->precision[0] && strcmp(o->precision, "fp16") != 0 && strcmp(o->precision, "bf16") != 0 &&
        strcmp(o->precision, "fp32") != 0)
        fatal("flag --precision expects fp16, bf16 or fp32, got '%s'", o->precision);
    if (o->plan_ranks < 0 || o->plan_ranks > MAX_PLAN_RANKS)
        fatal("flag --ranks must be 0 to %d, got %d", MAX_PLAN_RANKS, o->plan_ranks);
    if (!o->plan && (o->json || o->memory_budget[0] || o->plan_ranks))
        fatal("flags --json, --memory-budget and --ranks go with --plan");
    if (o->max_memory[0]) memory_size_parse(o->max_memory, "--max-memory");
    if (o->memory_budget[0]) memory_size_parse(o->memory_budget, "--memory-budget");
    // libgomp sizes per-thread arrays on its own stack: a huge count crashes inside it.
    if (omp_get_max_threads() > MAX_THREADS)
        fatal("OMP_NUM_THREADS asks for %d threads, more than the limit of %d (this machine has %ld CPUs)",
              omp_get_max_threads(), MAX_THREADS, sysconf(_SC_NPROCESSORS_ONLN));
}

// A descriptor builds a fresh model (max sequence 1024, like GPT-2); anything else is a file.
static void model_config_from_flag(const char* model, GPT2Config* cfg, int* from_file) {
    *from_file = !gpt2_config_from_descriptor(model, 1024, cfg);
    if (*from_file) {
        if (!file_exists(model))
            fatal("flag -e: '%s' is neither a model descriptor (d1..d6, d12, d24, d36, d48) nor a model file", model);
        // Read through now when it carries a checksum: a damaged header must be named as such, not
        // show up later as data that does not fit it.
        model_file_check(model, cfg);
    }
}

// ---------------------------------------------------------------------------------------------
// The output dir: one run owns it (a lock held until exit), and its checkpoints are that run's.

static void checkpoint_paths(const char* dir, long step, char* model_path, char* state_path, size_t cap) {
    snprintf(model_path, cap, "%s/model_%08ld.bin", dir, step);
    snprintf(state_path, cap, "%s/state_%08ld.bin", dir, step);
}

// The step of "PREFIXDIGITS.bin", or -1.
static long checkpoint_name_step(const char* name, const char* prefix) {
    size_t p = strlen(prefix), n = strlen(name);
    if (n <= p + 4 || strncmp(name, prefix, p) != 0 || strcmp(name + n - 4, ".bin") != 0) return -1;
    long step = 0;
    for (size_t i = p; i < n - 4; i++) {
        if (name[i] < '0' || name[i] > '9' || step > CHECKPOINT_MAX_STEP) return -1;
        step = step * 10 + (name[i] - '0');
    }
    return step;
}

static int long_desc(const void* a, const void* b) {
    long x = *(const long*)a, y = *(const long*)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

// Steps of the state files in dir, newest first; the count in *count (caller frees). With
// any_file, model files count too (to see whether the dir holds any checkpoint at all).
static long* checkpoint_list(const char* dir, int any_file, int* count) {
    *count = 0;
    DIR* d = opendir(dir);
    if (!d) return NULL;
    long* steps = NULL;
    int cap = 0;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        long step = checkpoint_name_step(ent->d_name, "state_");
        if (step < 0 && any_file) step = checkpoint_name_step(ent->d_name, "model_");
        if (step < 0) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 64;
            steps = (long*)realloc(steps, (size_t)cap * sizeof(long));
            if (!steps) fatal("out of host memory listing checkpoints in %s", dir);
        }
        steps[(*count)++] = step;
    }
    closedir(d);
    if (*count) qsort(steps, (size_t)*count, sizeof(long), long_desc);
    return steps;
}

// Held until the process ends (the descriptor is never closed): a second run on the same dir is
// refused at once, whatever its flags. flock ends with the process, however it ends.
static void output_dir_lock(const char* dir) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/train.lock", dir);
    const char* kind = path_not_regular(path);
    if (kind) fatal("lock file %s is %s, expected a regular file", path, kind);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) fatal("cannot open lock file %s (%s)", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        fatal("output dir %s is in use by another run: %s is locked%s%s%s; wait for it to end or choose another -o", dir,
              path, pid[0] ? " (by process " : "", pid, pid[0] ? ")" : "");
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        fatal("cannot write lock file %s (%s)", path, strerror(errno));
}

// Takes the dir: lock, temporary files of interrupted runs, and no mixing with another run.
static void output_dir_claim(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    make_dirs(o->output_dir);
    output_dir_lock(o->output_dir);
    long long bytes;
    int removed = remove_temp_files(o->output_dir, "", 0, &bytes);  // the lock says no live run writes here
    if (removed)
        printf("output: removed %d temporary file%s of an interrupted run (%.1f MB) from %s\n", removed,
               removed == 1 ? "" : "s", bytes / 1e6, o->output_dir);
    if (o->resume) return;
    // Only whole pairs are checkpoints; a half (a run killed between its two files) is debris.
    int count, pairs = 0;
    long* steps = checkpoint_list(o->output_dir, 1, &count);
    long newest = -1;
    for (int i = 0; i < count; i++) {
        char mp[4200], sp[4200];
        checkpoint_paths(o->output_dir, steps[i], mp, sp, sizeof(mp));
        if (file_exists(mp) && file_exists(sp) && (i == 0 || steps[i] != steps[i - 1])) {
            if (!pairs++) newest = steps[i];
        }
    }
    free(steps);
    if (pairs && !o->overwrite)
        fatal("output dir %s holds checkpoints of another run (newest: step %ld); resume it with -y 1, choose another "
              "-o, or pass --overwrite to delete them", o->output_dir, newest);
    s->overwrite_pending = count > 0;
}

// A fresh run: the old run's checkpoints (--overwrite) or halves of them go before it writes anything.
static void output_dir_clear(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return;
    struct dirent* ent;
    int removed = 0;
    while ((ent = readdir(d)) != NULL) {
        const char* name = ent->d_name;
        size_t n = strlen(name);
        int damaged = n > 8 && strcmp(name + n - 8, ".damaged") == 0;
        if (checkpoint_name_step(name, "model_") < 0 && checkpoint_name_step(name, "state_") < 0 && !damaged) continue;
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (unlink(path) != 0) fatal("--overwrite: cannot delete %s (%s)", path, strerror(errno));
        removed++;
    }
    closedir(d);
    sync_parent_dir(dir);
    printf("output: deleted %d checkpoint file%s of an earlier run in %s\n", removed, removed == 1 ? "" : "s", dir);
}

// ---------------------------------------------------------------------------------------------
// Resume: the newest intact checkpoint of this same run

// A damaged pair is renamed NAME.damaged: out of every later resume's way, kept for a post-mortem.
static void checkpoint_set_aside(const char* mp, const char* sp) {
    const char* paths[2] = {sp, mp};
    for (int i = 0; i < 2; i++) {
        char to[4300];
        snprintf(to, sizeof(to), "%s.damaged", paths[i]);
        if (file_exists(paths[i]) && rename(paths[i], to) != 0)
            fatal("cannot rename damaged checkpoint %s to %s (%s)", paths[i], to, strerror(errno));
    }
    sync_parent_dir(sp);
}

// The run record: the flags that shape the trajectory, then what the train data was.
static void run_record_make(TrainSetup* s) {
    size_t n = cli_record(&s->opts, s->record, sizeof(s->record));
    // B is not recorded itself: a run may resume on other ranks with B*ranks unchanged.
    int k0 = snprintf(s->record + n, sizeof(s->record) - n, "sequences-per-micro-step %ld\n",
                      (long)s->opts.B * s->num_ranks);
    if (k0 < 0 || (size_t)k0 >= sizeof(s->record) - n) fatal("run record: more than %zu bytes", sizeof(s->record));
    n += (size_t)k0;
    char fp[256];
    dataloader_fingerprint(&s->train, fp, sizeof(fp));
    int k = snprintf(s->record + n, sizeof(s->record) - n, "train-data %s\n", fp);
    if (k < 0 || (size_t)k >= sizeof(s->record) - n) fatal("run record: more than %zu bytes", sizeof(s->record));
    n += (size_t)k;
    // The built-in corpus by name, so a resume finds the same one whatever tokenizer file exists then.
    if (s->opts.train_data[0] == '\0') {
        k = snprintf(s->record + n, sizeof(s->record) - n, "train-corpus %s\n", s->corpus.kind);
        if (k < 0 || (size_t)k >= sizeof(s->record) - n) fatal("run record: more than %zu bytes", sizeof(s->record));
    }
}

// Fatal (naming the flag, both values) when the checkpoint was written by a run this one is not.
static void resume_check_record(const TrainSetup* s, const char* sp, const TrainState* st) {
    char why[512];
    if (st->record[0] == '\0') {
        printf("resume: %s predates run records (an older version): its flags and data cannot be checked\n", sp);
        return;
    }
    if (!cli_record_check(&s->opts, st->record, why, sizeof(why)))
        fatal("flag -y 1: %s (%s); resume with the same flags, or start a new run in another -o", why, sp);
    char then[256], now[256];
    dataloader_fingerprint(&s->train, now, sizeof(now));
    if (!cli_record_value(st->record, "train-data", then, sizeof(then))) snprintf(then, sizeof(then), "(not recorded)");
    if (strcmp(then, now) == 0) return;
    if (s->opts.train_data[0] == '\0') {
        char corpus[64] = "";
        cli_record_value(st->record, "train-corpus", corpus, sizeof(corpus));
        fatal("flag -y 1: the checkpoint %s was trained on the built-in corpus%s%s (%s), but the built-in corpus here is "
              "%s (%s: %s): it was changed or damaged, and the run cannot continue on other data; start a new run in "
              "another -o (or --overwrite)", sp, corpus[0] ? " " : "", corpus, then, s->corpus.kind, s->train_pattern, now);
    }
    fatal("flag -i (--train): the train data (%s: %s) is not the data the checkpoint %s was trained on (%s)",
          s->train_pattern, now, sp, then);
}

// A resumed run trains on the built-in corpus it started on, whatever tokenizer file exists by
// now (`make vocab` made one, or it changed): the newest intact checkpoint's record names it. A
// record from before corpora were named says it by the train data's fingerprint: the corpus the
// tokenizer file gives now, or the byte-level one. kind keeps the default when no checkpoint is
// intact (resume_choose then says why).
static void resume_corpus_kind(TrainSetup* s, char* kind, size_t cap) {
    const TrainOptions* o = &s->opts;
    corpus_default_kind(o->tokenizer, kind, cap);
    int count, found = 0;
    long* steps = checkpoint_list(o->output_dir, 0, &count);
    static TrainState st;  // 8 KiB of run record
    OptimizerCounters oc;
    char mp[4200], sp[4200], why[4800];
    for (int i = 0; i < count && !found; i++) {
        checkpoint_paths(o->output_dir, steps[i], mp, sp, sizeof(mp));
        found = file_exists(mp) && checkpoint_verify(mp, sp, &s->config, &st, &oc, why, sizeof(why)) == CHECKPOINT_OK;
    }
    free(steps);
    if (!found) return;
    char recorded[64], then[256];
    if (cli_record_value(st.record, "train-corpus", recorded, sizeof(recorded))) {
        if (strcmp(recorded, kind) != 0)
            printf("resume: this run trained on the built-in corpus %s and continues on it (a fresh run here would use "
                   "%s)\n", recorded, kind);
        snprintf(kind, cap, "%s", recorded);
        return;
    }
    if (!cli_record_value(st.record, "train-data", then, sizeof(then))) return;
    char bytes[64];
    snprintf(bytes, sizeof(bytes), "v%d_bytes", atoi(kind + 1));
    const char* candidates[2] = {kind, bytes};
    for (int c = 0; c < 2; c++) {
        CorpusPaths probe;
        DataLoader dl;
        char now[256];
        corpus_prepare_kind(&probe, candidates[c], o->tokenizer);
        dataloader_init(&dl, probe.train_pattern, o->B, o->T, s->rank, s->num_ranks, o->shuffle, (uint64_t)o->seed,
                        s->config.vocab_size);
        dataloader_fingerprint(&dl, now, sizeof(now));
        dataloader_free(&dl);
        if (strcmp(now, then) == 0) {
            snprintf(kind, cap, "%s", candidates[c]);
            return;
        }
    }
}

// Picks the newest checkpoint that is whole and consistent; damaged ones are set aside, saying so.
static void resume_choose(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    int count, damaged = 0;
    long* steps = checkpoint_list(o->output_dir, 0, &count);
    char mp[4200], sp[4200], why[4800], first_damage[4800] = "";
    static TrainState st;  // 8 KiB of run record
    OptimizerCounters oc;
    for (int i = 0; i < count; i++) {
        checkpoint_paths(o->output_dir, steps[i], mp, sp, sizeof(mp));
        if (!file_exists(mp)) {  // the state file goes first: a crash between the two leaves this
            printf("resume: step %ld has no model file (a checkpoint cut short); trying an older one\n", steps[i]);
            continue;
        }
        CheckpointStatus status = checkpoint_verify(mp, sp, &s->config, &st, &oc, why, sizeof(why));
        if (status == CHECKPOINT_MISMATCH) fatal("flag -y 1: %s", why);
        if (status == CHECKPOINT_OK && st.step != steps[i]) {
            snprintf(why, sizeof(why), "state file %s holds step %lld, its name says %ld", sp, (long long)st.step, steps[i]);
            status = CHECKPOINT_DAMAGED;
        }
        if (status == CHECKPOINT_OK) {
            resume_check_record(s, sp, &st);
            // Another number of ranks resumes the run as long as every step still reads the same
            // tokens: T, and B*ranks (the sequences a micro-step takes over all ranks), unchanged.
            if (st.T != o->T || (long)st.B * st.num_processes != (long)o->B * s->num_ranks)
                fatal("state file %s was written with B=%d T=%d ranks=%d; this run has B=%d T=%d ranks=%d (T and "
                      "B*ranks must stay)", sp, st.B, st.T, st.num_processes, o->B, o->T, s->num_ranks);
            if (st.step > s->max_steps)
                fatal("flag -x (steps) is %d but the checkpoint %s is at step %lld", s->max_steps, sp, (long long)st.step);
            // Where the data loader stood must be where this step's batches lead (one batch, overfitting).
            char pos_why[256];
            int64_t batches = dataloader_batches_before(&s->train, st.train_pos, pos_why, sizeof(pos_why));
            int64_t expect = o->overfit ? 1 : st.step * s->accum;
            if (batches < 0 || (st.record[0] && batches != expect)) {
                if (batches >= 0)
                    snprintf(pos_why, sizeof(pos_why), "data position is %lld batches in, step %lld needs %lld",
                             (long long)batches, (long long)st.step, (long long)expect);
                snprintf(why, sizeof(why), "state file %s: its %s", sp, pos_why);
                status = CHECKPOINT_DAMAGED;
            }
        }
        if (status == CHECKPOINT_OK) {
            s->resume_step = steps[i];
            free(steps);
            if (damaged) printf("resume: falling back to step %ld, the newest intact checkpoint\n", s->resume_step);
            return;
        }
        printf("resume: %s; setting it aside (*.damaged) and trying an older checkpoint\n", why);
        if (!damaged) snprintf(first_damage, sizeof(first_damage), "%s", why);
        checkpoint_set_aside(mp, sp);
        damaged++;
    }
    free(steps);
    if (damaged)
        fatal("flag -y 1: no intact checkpoint in %s (%d damaged, set aside as *.damaged; the newest: %s)", o->output_dir,
              damaged, first_damage);
    fatal("flag -y 1: no checkpoint (model_*.bin with state_*.bin) in %s", o->output_dir);
}

// ---------------------------------------------------------------------------------------------
// Setup

static Precision precision_from_flag(const char* name, Precision build) {
    if (!name[0]) return build;
    return strcmp(name, "fp32") == 0 ? PRECISION_FP32 : strcmp(name, "bf16") == 0 ? PRECISION_BF16 : PRECISION_FP16;
}

static int offload_from_flag(const char* name) {
    return strcmp(name, "optimizer") == 0 ? OFFLOAD_OPTIMIZER : strcmp(name, "grads") == 0 ? OFFLOAD_GRADS : OFFLOAD_NONE;
}

// --plan: the GPU engine's memory for these flags, rank 0 of --ranks (or the ranks running), and
// with --memory-budget whether it fits, the largest -b that does and the cheapest change that
// makes it fit. No data, no output dir, no device.
static void plan_and_exit(TrainSetup* s, Precision gpu_precision) {
    const TrainOptions* o = &s->opts;
    EngineOptions eo;
    memset(&eo, 0, sizeof(eo));
    eo.precision = precision_from_flag(o->precision, gpu_precision);
    eo.B = o->B;
    eo.T = o->T;
    eo.recompute = o->recompute;
    eo.recompute_every = o->recompute_every;
    eo.zero_stage = o->zero_stage;
    eo.num_ranks = o->plan_ranks > 0 ? o->plan_ranks : s->num_ranks;
    eo.offload = offload_from_flag(o->offload);
    long tokens = (long)o->B * o->T * eo.num_ranks;  // B, T < 2^31, ranks <= 2^20: exact in 64 bits
    if (o->total_batch > 0 && o->total_batch % tokens != 0)
        fatal("flag -d (total batch) is %ld tokens, expected a positive multiple of B*T*ranks = %ld", o->total_batch,
              tokens);
    long accum = o->total_batch > 0 ? o->total_batch / tokens : 1;
    if (accum > MAX_MICRO_STEPS)
        fatal("flag -d (total batch) is %ld tokens = %ld micro-steps of B*T*ranks = %ld; at most %ld are allowed",
              o->total_batch, accum, tokens, MAX_MICRO_STEPS);
    size_t budget = o->memory_budget[0] ? memory_size_parse(o->memory_budget, "--memory-budget") : 0;
    MemoryPlan p;
    memory_plan_make(&p, &s->config, &eo);
    if (s->rank == 0) {
        if (o->json) {
            memory_plan_print_json(&p, budget, (int)accum, stdout);
        } else {
            memory_plan_print(&p, stdout);
            if (budget) {
                MemoryFit fit = memory_plan_fit(&s->config, &eo, (int)accum, budget);
                memory_fit_print(&fit, &eo, budget, stdout);
            }
        }
    }
    fflush(stdout);
    ranks_finalize();
    exit(0);
}

void train_setup(TrainSetup* s, int argc, char** argv, Precision gpu_precision) {
    // A line at a time even into a file or a pipe: a log being followed, or a run stopped by a
    // signal or an error, shows every step it made.
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(s, 0, sizeof(*s));
    // The ranks first: under mpirun an error on any rank then names it and ends every rank. Rank 0
    // alone prints; the others' stdout goes nowhere (their errors still reach stderr).
    Ranks ranks;
    ranks_init(&ranks);
    s->rank = ranks.rank;
    s->num_ranks = ranks.num_ranks;
    s->local_rank = ranks.local_rank;
    if (s->rank != 0 && !freopen("/dev/null", "w", stdout)) fatal("cannot silence the output of rank %d", s->rank);
    TrainOptions* o = &s->opts;
    cli_parse(o, argc, argv);
    options_validate(o);
    s->resume_step = -1;

    model_config_from_flag(o->model, &s->config, &s->model_from_file);
    if (o->T > s->config.max_seq_len)
        fatal("flag -t (sequence length) is %d, the model's maximum is %d", o->T, s->config.max_seq_len);
    if (o->plan) plan_and_exit(s, gpu_precision);
    long tokens_per_micro = (long)o->B * o->T * s->num_ranks;  // B, T < 2^31 and few ranks: exact in 64 bits
    if (tokens_per_micro > MAX_TOKENS_PER_MICRO_STEP)
        fatal("flags -b and -t: B*T*ranks = %ld tokens per micro-step, more than the limit of %ld", tokens_per_micro,
              MAX_TOKENS_PER_MICRO_STEP);
    s->total_batch = o->total_batch == -1 ? tokens_per_micro : o->total_batch;
    if (s->total_batch % tokens_per_micro != 0)
        fatal("flag -d (total batch) is %ld tokens, expected a positive multiple of B*T*ranks = %ld", s->total_batch,
              tokens_per_micro);
    if (s->total_batch / tokens_per_micro > MAX_MICRO_STEPS)
        fatal("flag -d (total batch) is %ld tokens = %ld micro-steps of B*T*ranks = %ld; at most %ld are allowed",
              s->total_batch, s->total_batch / tokens_per_micro, tokens_per_micro, MAX_MICRO_STEPS);
    s->accum = (int)(s->total_batch / tokens_per_micro);

    // The output dir before the data: a second run on it stops at once, not after a long data check.
    // Rank 0 owns the dir (its lock, its clean-up); the others write their state shards into it.
    if (o->output_dir[0] && s->rank == 0) output_dir_claim(s);
    if (o->output_dir[0]) make_dirs(o->output_dir);
    ranks_barrier();

    // Data: given shards, or the built-in corpus made on first use. Every token is checked here.
    s->train_pattern = o->train_data;
    s->val_pattern = o->val_data;
    if (s->train_pattern[0] == '\0') {
        // Rank 0 chooses the corpus (a resumed run's own) and writes it on first use; the others
        // then find it made.
        char kind[64];
        if (s->rank == 0) {
            if (o->resume) resume_corpus_kind(s, kind, sizeof(kind));
            else corpus_default_kind(o->tokenizer, kind, sizeof(kind));
            corpus_prepare_kind(&s->corpus, kind, o->tokenizer);
        }
        ranks_broadcast(kind, sizeof(kind), 0);
        ranks_barrier();
        if (s->rank != 0) corpus_prepare_kind(&s->corpus, kind, o->tokenizer);
        s->train_pattern = s->corpus.train_pattern;
        if (s->val_pattern[0] == '\0') s->val_pattern = s->corpus.val_pattern;
    }
    dataloader_init(&s->train, s->train_pattern, o->B, o->T, s->rank, s->num_ranks, o->shuffle, (uint64_t)o->seed,
                    s->config.vocab_size);
    s->have_val = s->val_pattern[0] != '\0' && o->val_every > 0;
    if (s->have_val)
        dataloader_init(&s->val, s->val_pattern, o->B, o->T, s->rank, s->num_ranks, 0, 0, s->config.vocab_size);
    printf("data: every token checked in %.2f s: %lld train", (s->train.check_ms + (s->have_val ? s->val.check_ms : 0)) / 1e3,
           s->train.total_tokens);
    if (s->have_val) printf(", %lld val", s->val.total_tokens);
    printf("\n");
    s->max_steps = o->max_steps;
    if (s->max_steps == -1) {
        int64_t epoch_steps = s->train.total_windows / s->accum;
        if (epoch_steps == 0)
            fatal("train data %s holds less than one step of %ld tokens; set -x", s->train_pattern, s->total_batch);
        if (epoch_steps > CHECKPOINT_MAX_STEP)
            fatal("train data %s holds %lld steps, more than the limit of %lld; set -x", s->train_pattern,
                  (long long)epoch_steps, CHECKPOINT_MAX_STEP);
        s->max_steps = (int)epoch_steps;
    }
    run_record_make(s);
    // Rank 0 checks the checkpoints and chooses (setting damaged ones aside); every rank loads it.
    if (o->resume && s->rank == 0) resume_choose(s);
    ranks_broadcast(&s->resume_step, sizeof(s->resume_step), 0);

    EngineOptions* eo = &s->engine_options;
    eo->B = o->B;
    eo->T = o->T;
    eo->rank = s->rank;
    eo->num_ranks = s->num_ranks;
    eo->local_rank = s->local_rank;
    eo->zero_stage = o->zero_stage;
    eo->loss_scale_init = o->loss_scale;
    eo->loss_scale_interval = o->loss_scale_interval;
    eo->gelu_fusion = o->gelu_fusion;
    eo->recompute = o->recompute;
    eo->recompute_every = o->recompute_every;
    eo->precision = precision_from_flag(o->precision, gpu_precision);
    eo->offload = offload_from_flag(o->offload);
    eo->memory_budget = o->max_memory[0] ? memory_size_parse(o->max_memory, "--max-memory") : 0;
    eo->total_batch = s->total_batch;
}

// ---------------------------------------------------------------------------------------------
// Validation and sampling

// The mean val loss over every rank's slice of the val data; a long evaluation says how far it is.
static float evaluate(Engine* e, DataLoader* val, int steps, int num_ranks) {
    dataloader_reset(val);
    int n = steps < 0 || steps > val->total_windows ? (int)val->total_windows : steps;
    double sum = 0.0;
    Progress progress;
    progress_begin(&progress, "val", "batches", n);
    for (int i = 0; i < n; i++) {
        dataloader_next_batch(val);
        sum += e->forward(e, val->inputs, val->targets, val->B, val->T);
        progress_update(&progress, i + 1);
    }
    ranks_sum(&sum, 1);
    return (float)(sum / n / num_ranks);
}

// Generates from <|endoftext|> (token 0 when the model's vocabulary is too small to hold it); the
// context is the last T tokens when the sample grows longer.
// byte_level: the run trains on byte-level text, so only byte tokens and end-of-text are drawn.
static void sample_and_print(Engine* e, const TrainOptions* o, const Tokenizer* tok, int byte_level, uint64_t* rng,
                             int* gen, float* logits, int* scratch) {
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
        if (byte_level) sampler_keep_bytes(logits, V, GPT2_EOT < V ? GPT2_EOT : -1);
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

// One summary line (device components), then, for an engine that measures (the GPU engine), each
// component planned, allocated and as the device counted it, and the device's use before and after.
static void memory_report_print(Engine* e) {
    MemoryReport r;
    memset(&r, 0, sizeof(r));
    e->memory_report(e, &r);
    size_t total = 0, host = 0;
    int measured = 0;
    printf("memory:");
    for (int i = 0; i < r.count; i++) {
        if (r.items[i].measured >= 0) measured = 1;
        if (r.items[i].bytes == 0) continue;
        if (r.items[i].host) {
            host += r.items[i].bytes;
            continue;
        }
        printf(" %s %.1f MiB |", r.items[i].name, r.items[i].bytes / 1048576.0);
        total += r.items[i].bytes;
    }
    printf(" total %.1f MiB", total / 1048576.0);
    if (host) printf(" (and %.1f MiB of host memory)", host / 1048576.0);
    printf("\n");
    if (!measured) return;
    printf("memory by component (bytes): planned | allocated | measured by the device\n");
    for (int i = 0; i < r.count; i++) {
        if (r.items[i].bytes == 0 && r.items[i].planned == 0) continue;
        char m[32] = "-";
        if (r.items[i].measured >= 0) snprintf(m, sizeof(m), "%lld", r.items[i].measured);
        printf("  %-34s %-6s %15zu | %15zu | %15s\n", r.items[i].name, r.items[i].host ? "host" : "device", r.items[i].planned,
               r.items[i].bytes, m);
    }
    if (r.device_bytes)
        printf("device memory in use (every process): %.1f MiB before the engine allocated, %.1f MiB after, of %.1f MiB\n",
               r.used_before / 1048576.0, r.used_after / 1048576.0, r.device_bytes / 1048576.0);
}

// ---------------------------------------------------------------------------------------------
// The outlier guard (--skip-outliers Z): a step whose loss or gradient norm lies more than Z
// standard deviations above its moving mean is not applied. Every finite step feeds the statistics,
// skipped ones included, so a real shift in level is learned rather than skipped forever.

static void stats_add(double* mean, double* var, double x, int64_t seen) {
    if (seen == 0) {
        *mean = x;
        *var = 0.0;
        return;
    }
    double d = x - *mean;
    *mean += OUTLIER_ALPHA * d;
    *var = (1.0 - OUTLIER_ALPHA) * (*var + OUTLIER_ALPHA * d * d);
}

// The standard deviation, floored at 0.1% of the mean so a flat history does not flag noise.
static double stats_std(double mean, double var) {
    double s = sqrt(var), floor = 1e-3 * fabs(mean) + 1e-12;
    return s > floor ? s : floor;
}

// ---------------------------------------------------------------------------------------------
// Signals: SIGINT and SIGTERM end the run after the current step, with a checkpoint.

static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig) {
    static const char msg[] = "\nsignal received: finishing the current step, then a checkpoint (again to stop at once)\n";
    g_stop_signal = sig;
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
}

static void stop_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    // Reads and writes in progress finish rather than fail; a second signal ends the process at once
    // (the handler is reset), which leaves the files safe all the same.
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
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

    static TrainState st;  // 8 KiB of run record
    memset(&st, 0, sizeof(st));
    st.rng_state = rng_seed((uint64_t)o->seed ^ 0x5A4D504C45ull);  // the sampler's own stream
    st.B = o->B; st.T = o->T; st.num_processes = s->num_ranks;
    if (s->overwrite_pending && s->rank == 0) output_dir_clear(o->output_dir);
    ranks_barrier();
    if (o->resume) {
        char mp[4200], sp[4200];
        checkpoint_paths(o->output_dir, s->resume_step, mp, sp, sizeof(mp));
        e->checkpoint_load(e, mp, sp, &st);
        dataloader_set_pos(&s->train, st.train_pos);
        printf("resume: step %lld from %s\n", (long long)st.step, mp);
    }
    memcpy(st.record, s->record, sizeof(st.record));
    // Overfitting trains on the first batch only: load it whether the run starts or resumes.
    if (o->overfit) {
        dataloader_reset(&s->train);
        dataloader_next_batch(&s->train);
    }

    Tokenizer* tok = file_exists(o->tokenizer) ? tokenizer_load(o->tokenizer) : tokenizer_bytes_only();
    Logger log;
    logger_open(&log, s->rank == 0 ? o->output_dir : "", o->resume ? (long)st.step : -1);  // rank 0 logs

    printf("model: %s | L=%d C=%d NH=%d maxT=%d V=%d (padded %d) | %.2fM parameters\n", o->model, cfg->num_layers,
           cfg->channels, cfg->num_heads, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size, n / 1e6);
    printf("engine: %s\n", e->name);
    if (e->peak_note[0]) printf("mfu: %s\n", e->peak_note);
    memory_report_print(e);
    printf("train: %s (%d shards, %lld batches of B=%d T=%d per epoch) | val: %s\n", s->train_pattern, s->train.nfiles,
           (long long)s->train.total_windows, o->B, o->T, s->have_val ? s->val_pattern : "none");
    printf("steps: %d | total batch %ld tokens = %d micro-steps | lr %g warmup %d floor %g | wd %g | clip %g\n",
           s->max_steps, s->total_batch, s->accum, o->lr, o->warmup, o->final_lr_frac, o->weight_decay, o->grad_clip);
    if (o->skip_outliers > 0)
        printf("outlier guard: skip an update whose loss or grad norm is over %g standard deviations above its mean\n",
               o->skip_outliers);
    // A run on the byte-level built-in corpus samples bytes only, whatever tokenizer decodes them.
    int byte_level = o->train_data[0] == '\0' && s->corpus.byte_level;
    printf("samples: %s%s\n", tokenizer_can_merge(tok) ? o->tokenizer : "byte-level decoding (no tokenizer file)",
           byte_level ? ", drawn from the 256 byte tokens and end-of-text (the corpus is byte-level)" : "");

    AdamWConfig opt = {o->beta1, o->beta2, o->eps, o->weight_decay, 0.0f, 0.0f};
    int V = cfg->vocab_size;
    float* logits = (float*)malloc_check((size_t)V * sizeof(float), "sample logits");
    int* scratch = (int*)malloc_check((size_t)V * sizeof(int), "sample scratch");
    int* gen = (int*)malloc_check((size_t)(o->gen_tokens + 1) * sizeof(int), "sample tokens");
    double flops_per_step = gpt2_flops_per_token(cfg, o->T) * (double)s->total_batch;
    double total_ms = 0.0;
    int timed_steps = 0, status = 0;

    int start_step = (int)st.step;
    stop_signals_install();
    // Elapsed time and the estimate of what is left count everything the loop does (validation and
    // samples too), from this process's first step.
    double loop_start_ms = wall_time_ms();
    for (int step = start_step; step <= s->max_steps; step++) {
        int last = step == s->max_steps;
        // A resumed run's first step was evaluated and sampled before its checkpoint was written.
        int resumed_here = o->resume && step == start_step;
        if (s->have_val && (step % o->val_every == 0 || last) && !resumed_here) {
            float vl = evaluate(e, &s->val, o->val_steps, s->num_ranks);
            printf("val loss %.6f\n", vl);
            logger_val(&log, step, vl);
        }
        if (o->sample_every > 0 && o->gen_tokens > 0 && (step % o->sample_every == 0 || last) && step > 0 &&
            !resumed_here && s->rank == 0)
            sample_and_print(e, o, tok, byte_level, &st.rng_state, gen, logits, scratch);
        // A stop request writes the checkpoint here, where an unbroken run would stand at this step.
        int signal_seen = g_stop_signal;  // every rank stops at the same step, or a collective would hang
        ranks_max(&signal_seen, 1);
        int stopping = signal_seen && !last;
        int due = o->checkpoint_every > 0 && (step % o->checkpoint_every == 0 || last);
        char mp[4200], sp[4200];
        checkpoint_paths(o->output_dir, step, mp, sp, sizeof(mp));
        if ((due || (stopping && o->output_dir[0])) && step > start_step) {
            st.step = step;
            st.train_pos = dataloader_get_pos(&s->train);
            e->checkpoint_save(e, mp, sp, &st);
            printf("checkpoint: wrote %s and %s\n", mp, sp);
        }
        if (stopping) {
            const char* name = signal_seen == SIGINT ? "SIGINT" : "SIGTERM";
            if (!o->output_dir[0]) printf("stopped by %s after step %d: no output dir (-o), nothing saved\n", name, step);
            else if (step == 0) printf("stopped by %s before the first step: nothing to save\n", name);
            else printf("stopped by %s after step %d: checkpoint %s; resume with the same flags and -y 1\n", name, step, mp);
            status = 128 + signal_seen;
            break;
        }
        if (last) break;

        double t0 = wall_time_ms();
        for (int micro = 0; micro < s->accum; micro++) {
            if (!o->overfit) dataloader_next_batch(&s->train);
            e->micro_step(e, s->train.inputs, s->train.targets, o->B, o->T, 1.0f / s->accum, micro == s->accum - 1);
        }
        float lr = lr_at_step(step, s->max_steps, o->lr, o->warmup, o->final_lr_frac);
        int guard = o->skip_outliers > 0 && st.stats_count >= OUTLIER_WARMUP;
        double loss_sd = stats_std(st.loss_mean, st.loss_var), norm_sd = stats_std(st.norm_mean, st.norm_var);
        opt.skip_loss_above = guard ? (float)(st.loss_mean + o->skip_outliers * loss_sd) : 0.0f;
        opt.skip_norm_above = guard ? (float)(st.norm_mean + o->skip_outliers * norm_sd) : 0.0f;
        StepResult r = e->optimizer_step(e, &opt, lr, o->grad_clip);
        double ms = wall_time_ms() - t0;
        double tok_s = s->total_batch / (ms / 1e3);
        if (step > start_step) { total_ms += ms; timed_steps++; }  // the first step pays for warm-up
        int finite = isfinite(r.loss) && isfinite(r.grad_norm);
        int outlier = !r.applied && finite && guard && (r.loss > opt.skip_loss_above || r.grad_norm > opt.skip_norm_above);
        char reason[96] = "non-finite gradients";
        if (outlier && r.loss > opt.skip_loss_above)
            snprintf(reason, sizeof(reason), "loss outlier (z %.1f > %g)", (r.loss - st.loss_mean) / loss_sd, o->skip_outliers);
        else if (outlier)
            snprintf(reason, sizeof(reason), "grad norm outlier (z %.1f > %g)", (r.grad_norm - st.norm_mean) / norm_sd,
                     o->skip_outliers);
        if ((step + 1) % o->log_every == 0 || step + 1 == s->max_steps || !r.applied) {
            printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", step + 1, s->max_steps,
                   r.loss, r.grad_norm, lr, ms, tok_s);
            if (e->peak_flops > 0) printf(" | MFU %.1f%%", 100.0 * flops_per_step / (ms / 1e3) / e->peak_flops);
            double elapsed = (wall_time_ms() - loop_start_ms) / 1e3;
            char el[32], eta[32];
            format_clock(elapsed, el, sizeof(el));
            format_clock(elapsed / (step + 1 - start_step) * (s->max_steps - step - 1), eta, sizeof(eta));
            printf(" | %s elapsed, eta %s", el, eta);
            if (r.loss_scale != 1.0f) printf(" | scale %g", r.loss_scale);
            if (!r.applied) printf(" | skipped: %s", reason);
            printf("\n");
        }
        logger_step(&log, step + 1, r.loss, r.grad_norm, lr, ms, tok_s, r.loss_scale, r.applied ? NULL : reason);
        if (!isfinite(r.loss)) fatal("loss is %f at step %d: training diverged", r.loss, step + 1);
        if (!r.applied && !outlier && !e->loss_scaling)
            fatal("gradient norm is %f at step %d: training diverged (the update was not applied)", r.grad_norm, step + 1);
        if (finite) {
            stats_add(&st.loss_mean, &st.loss_var, r.loss, st.stats_count);
            stats_add(&st.norm_mean, &st.norm_var, r.grad_norm, st.stats_count);
            st.stats_count++;
        }
    }
    if (timed_steps > 0 && status == 0) {
        char el[32];
        format_clock((wall_time_ms() - loop_start_ms) / 1e3, el, sizeof(el));
        printf("done: %d steps in %s, mean %.1f ms/step, %.0f tok/s (after the first step)\n", s->max_steps - start_step,
               el, total_ms / timed_steps, s->total_batch / (total_ms / timed_steps / 1e3));
    }
    {
        MemoryReport mr;
        memset(&mr, 0, sizeof(mr));
        e->memory_report(e, &mr);
        if (mr.device_bytes)
            printf("device memory: at most %.1f MiB in use (every process; sampled after allocation and after each "
                   "optimizer step)\n", mr.used_peak / 1048576.0);
    }

    logger_close(&log);
    tokenizer_free(tok);
    free(logits); free(scratch); free(gen);
    dataloader_free(&s->train);
    if (s->have_val) dataloader_free(&s->val);
    e->destroy(e);
    fflush(stdout);
    ranks_finalize();
    return status;
}
