// train_loop.c: the training driver (see train_loop.h). Reads top to bottom as a run:
// options, model, data and the output dir (train_setup), then weights, resume and the step loop
// with validation, samples, checkpoints and signals (train_run). The output dir's own rules (its
// lock, which checkpoint a resume takes, a finished run's mark) are run_dir.c's.
#define _GNU_SOURCE
#include "train_loop.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "hellaswag.h"
#include "logger.h"
#include "memory_plan.h"
#include "comm_plan.h"
#include "gpu_peak.h"
#include "pipeline.h"
#include "ranks.h"
#include "run_dir.h"
#include "rng.h"
#include "sampler.h"
#include "schedule.h"
#include "time_model.h"
#include "tokenizer.h"
#include "util.h"

// Bounds on sizes that come from flags, so every product below is exact in 64 bits and every
// count fits the int it is stored in. Far above any real run.
#define MAX_GEN_TOKENS (1 << 20)
#define MAX_PLAN_RANKS (1 << 20)              // --ranks: far above any cluster
#define MAX_THREADS 1024                      // libgomp itself overflows its stack near 70000
// The outlier guard (--skip-outliers): an exponential moving mean and variance with this weight
// (about the last 50 steps), active once this many finite steps were seen.
#define OUTLIER_ALPHA 0.02
#define OUTLIER_WARMUP 20
// FP16: a run stops when this many steps in a row were skipped for non-finite gradients at the
// minimum loss scale (LOSS_SCALE_MIN). Halving has nothing left to try there, so a transient
// overflow (one bad batch) has cleared by then; ten batches in a row whose gradients overflow fp16
// at scale 1 (|g| > 65504) or are NaN mean the weights or the model are broken. From the default
// scale of 65536 that is 16 halvings first: 26 skipped steps in all.
#define SKIPS_AT_MIN_SCALE 10

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
    if (o->top_k < 0) fatal("flag --top-k must be non-negative, got %d", o->top_k);
    if (lr_schedule_parse(o->lr_scheduler) < 0) {
        // -k was top-k sampling here before it took llm.c's meaning: a number is told where that went.
        char* end;
        strtol(o->lr_scheduler, &end, 10);
        int number = o->lr_scheduler[0] && *end == '\0';
        fatal("flag -k (--lr-scheduler) expects cosine, linear, constant or wsd, got '%s'%s", o->lr_scheduler,
              number ? " (top-k sampling, which was -k, is now --top-k)" : "");
    }
    if (o->hellaswag != 0 && o->hellaswag != 1) fatal("flag -h (--hellaswag) must be 0 or 1, got %d (help is --help)", o->hellaswag);
    // A file named on purpose and missing is bad input (without the flag, a missing file is skipped: hellaswag_choose_file).
    if (o->hellaswag && cli_given(o, "--hellaswag-file") && !file_exists(o->hellaswag_file))
        fatal("flag --hellaswag-file: no HellaSwag file %s (make it with data/hellaswag.sh; without the flag -h 1 looks in "
              "data/cache/hellaswag/ and llm.c's dev/data/hellaswag/)", o->hellaswag_file);
    if (o->checkpoint_every < 0) fatal("flag -n (checkpoint every) must be non-negative, got %d", o->checkpoint_every);
    if (o->checkpoints_keep < 0) fatal("flag -nk (checkpoints to keep) must be non-negative, got %d", o->checkpoints_keep);
    if (o->major_checkpoint_every < 0)
        fatal("flag -nm (major checkpoint every) must be non-negative, got %d", o->major_checkpoint_every);
    if (o->resume != 0 && o->resume != 1) fatal("flag -y (resume) must be 0 or 1, got %d", o->resume);
    if (o->shuffle != 0 && o->shuffle != 1) fatal("flag -sf (shuffle) must be 0 or 1, got %d", o->shuffle);
    if (o->zero_stage < 0 || o->zero_stage > 3) fatal("flag -z (ZeRO stage) must be 0, 1, 2 or 3, got %d", o->zero_stage);
    if (o->overfit != 0 && o->overfit != 1) fatal("flag -a (overfit) must be 0 or 1, got %d", o->overfit);
    if (o->log_every <= 0) fatal("flag -p (print every) must be positive, got %d", o->log_every);
    // No -o is no output dir (llm.c's default): nothing to resume from, nowhere to write checkpoints.
    if (o->resume && o->output_dir[0] == '\0')
        fatal("flag -y 1 (--resume) needs an output dir (-o) to resume from; there is none unless -o names one (as in llm.c)");
    if (o->checkpoint_every && o->output_dir[0] == '\0')
        fatal("flag -n (--checkpoint-every) needs an output dir (-o) to write checkpoints into; there is none unless -o "
              "names one (as in llm.c)");
    if (o->resume && o->overwrite) fatal("flags -y 1 and --overwrite exclude each other (one continues a run, the other replaces it)");
    if (strcmp(o->engine, "auto") != 0 && strcmp(o->engine, "gpu") != 0 && strcmp(o->engine, "cpu") != 0)
        fatal("flag --engine expects auto, gpu or cpu, got '%s'", o->engine);
    if (o->recompute < 0 || o->recompute > 3) fatal("flag -r (recompute) must be 0, 1, 2 or 3, got %d", o->recompute);
    if (o->recompute_every < 0) fatal("flag --recompute-every must be non-negative, got %d", o->recompute_every);
    if (o->gelu_fusion < -1 || o->gelu_fusion > 2)
        fatal("flag -ge (gelu fusion) must be 0, 1, 2 or -1 (by the GPU), got %d", o->gelu_fusion);
    // Below 1 the scale shrinks FP16 gradients instead of guarding them (at 1e-30 every one flushes
    // to zero and nothing is learned), and the scale never falls below LOSS_SCALE_MIN anyway.
    if (!(o->loss_scale >= LOSS_SCALE_MIN))
        fatal("flag --loss-scale must be at least %g (the minimum loss scale), got %g: a scale below 1 shrinks the FP16 "
              "gradients, flushing small ones to zero", LOSS_SCALE_MIN, o->loss_scale);
    if (o->loss_scale_interval <= 0)
        fatal("flag --loss-scale-interval must be positive, got %d", o->loss_scale_interval);
    if (o->skip_outliers < 0) fatal("flag --skip-outliers must be 0 (off) or a positive z-score, got %g", o->skip_outliers);
    if (o->skip_loss_z < 0) fatal("flag -sl (--skip-loss-z) must be 0 (off) or a positive z-score, got %g", o->skip_loss_z);
    if (o->skip_grad_z < 0) fatal("flag -sg (--skip-grad-z) must be 0 (off) or a positive z-score, got %g", o->skip_grad_z);
    if (strcmp(o->nccl_init, "mpi") != 0 && strcmp(o->nccl_init, "tcp") != 0 && strcmp(o->nccl_init, "fs") != 0)
        fatal("flag -pi (--nccl-init) expects mpi, tcp or fs, got '%s'", o->nccl_init);
    if (o->num_processes < 1 || o->process_rank < 0 || o->gpus_per_node < 1)
        fatal("flags -pn, -pr, -pg must be positive (-pr non-negative), got %d, %d, %d", o->num_processes,
              o->process_rank, o->gpus_per_node);
    if (o->init_seed < 0 || o->init_seed > 0xffffffffL)
        fatal("flag --init-seed must be 0 to 4294967295 (PyTorch's generator takes 32 bits), got %ld", o->init_seed);
    if (o->log_memory_every < -1)
        fatal("flag -lg (--log-memory-every) must be -1 or 0 (never) or positive, got %d", o->log_memory_every);
    if (o->tf32 != 0 && o->tf32 != 1) fatal("flag -f (--tf32) must be 0 or 1, got %d", o->tf32);
    if (o->master_weights != 1)
        fatal("flag -w (--master-weights) is %d, but this trainer always keeps fp32 master weights for AdamW (llm.c's "
              "default, -w 1); leave -w out", o->master_weights);
    if (strcmp(o->offload, "none") != 0 && strcmp(o->offload, "optimizer") != 0 && strcmp(o->offload, "grads") != 0)
        fatal("flag --offload expects optimizer, grads or none, got '%s'", o->offload);
    if (o->overlap != 0 && o->overlap != 1) fatal("flag --overlap must be 0 or 1, got %d", o->overlap);
    if (o->pp_stages < 1 || o->pp_stages > PP_MAX_STAGES)
        fatal("flag -pp (pipeline stages) must be 1 to %d, got %d", PP_MAX_STAGES, o->pp_stages);
    if (o->pp_split[0] && o->pp_stages == 1)
        fatal("flag --pp-split '%s' goes with -pp (the number of pipeline stages, more than 1)", o->pp_split);
    if (o->pp_stages > 1) {
        // What the pipeline does not combine with (yet): each refused in one line, before anything is made.
        if (strcmp(o->engine, "cpu") == 0)
            fatal("flag -pp %d: the C reference engine (--engine cpu) is one process and holds the whole model; "
                  "pipeline stages need the GPU engine", o->pp_stages);
        if (o->zero_stage >= 2)
            fatal("flag -z %d with -pp %d: a pipeline stage combines its data-parallel ranks' gradients with -z 0 or -z 1; "
                  "-z 2 and 3 (gradients reduced, parameters gathered layer by layer) are not combined with stages",
                  o->zero_stage, o->pp_stages);
        if (strcmp(o->offload, "none") != 0)
            fatal("flag --offload %s with -pp %d: the pipeline keeps each stage's optimizer on its device; leave "
                  "--offload out", o->offload, o->pp_stages);
        if (o->hellaswag)
            fatal("flag -h 1 with -pp %d: HellaSwag's evaluation scores on a whole model a rank; leave -h out",
                  o->pp_stages);
    }
    if (o->precision[0] && strcmp(o->precision, "fp16") != 0 && strcmp(o->precision, "bf16") != 0 &&
        strcmp(o->precision, "fp32") != 0)
        fatal("flag --precision expects fp16, bf16 or fp32, got '%s'", o->precision);
    if (o->plan_ranks < 0 || o->plan_ranks > MAX_PLAN_RANKS)
        fatal("flag --ranks must be 0 to %d, got %d", MAX_PLAN_RANKS, o->plan_ranks);
    if (!o->plan && (o->json || o->memory_budget[0] || o->plan_ranks || o->gpu[0] || o->host_adamw != 0))
        fatal("flags --json, --memory-budget, --ranks, --gpu and --host-adamw go with --plan");
    if (!(o->host_adamw >= 0) || !isfinite(o->host_adamw))
        fatal("flag --host-adamw expects G parameters a second (0 for the default), got %g", o->host_adamw);
    if (o->gpu[0] && !time_gpu_find(o->gpu)) {
        char names[256];
        time_gpu_list(names, sizeof(names));
        fatal("flag --gpu: the time model has no GPU called '%s' (it has %s)", o->gpu, names);
    }
    if (o->max_memory[0]) memory_size_parse(o->max_memory, "--max-memory");
    CommLink link;
    char link_why[256];
    if (!comm_link_parse(o->link, &link, link_why, sizeof(link_why))) fatal("%s", link_why);
    if (o->memory_budget[0]) memory_size_parse(o->memory_budget, "--memory-budget");
    // libgomp sizes per-thread arrays on its own stack: a huge count crashes inside it.
    if (omp_get_max_threads() > MAX_THREADS)
        fatal("OMP_NUM_THREADS asks for %d threads, more than the limit of %d (this machine has %ld CPUs)",
              omp_get_max_threads(), MAX_THREADS, sysconf(_SC_NPROCESSORS_ONLN));
}

// A descriptor builds a fresh model (max sequence 1024, like GPT-2); anything else is a file.
// Returns a checksum of the model file's contents (0 for a descriptor).
static uint64_t model_config_from_flag(const char* model, GPT2Config* cfg, int* from_file) {
    *from_file = !gpt2_config_from_descriptor(model, 1024, cfg);
    if (!*from_file) return 0;
    if (!file_exists(model))
        fatal("flag -e: '%s' is neither a model descriptor (d1..d6, d12, d24, d36, d48, d60, d72, d84, gpt2:dN, gpt3:cN "
              "for c384, c768, c1024, c1536, c2048, c2560, c4096, c5140, c12288) nor a model file", model);
    // Read through now: a damaged file, or a NaN or Inf in any weight (padding rows too), must be
    // named as such at start-up, not show up later as a diverged loss.
    return model_file_check(model, cfg);
}

// ---------------------------------------------------------------------------------------------
// Ranks agree: every rank of a run must be given the same flags, read the same model and data and
// write into the same output dir. Each comparison is one collective (ranks_find_difference); a
// difference ends every rank within seconds, the first rank that differs naming what differs and
// both values (the others wait for its exit to abort them). Done twice at start-up: the flags and
// the model file before any other collective, the data and the output dir once they are read.

static void ranks_agree(const TrainSetup* s, const char* record) {
    if (s->num_ranks == 1) return;
    char* rank0 = NULL;
    int r = ranks_find_difference(record, &rank0);
    if (r < 0) return;
    if (s->rank != r) ranks_await_abort();
    char what[160], mine[1024], theirs[1024];
    if (!cli_record_diff(record, rank0, what, sizeof(what), mine, theirs, sizeof(mine)))
        snprintf(what, sizeof(what), "the run record");
    if (strcmp(what, "output-dir-lock") == 0)
        fatal("flag -o (--output) %s is not the directory rank 0 writes into: its train.lock says '%s' here and '%s' on "
              "rank 0; every rank must write into one shared directory (a shared file system)", s->opts.output_dir, mine,
              theirs);
    const char* label = strcmp(what, "model-contents") == 0  ? "the model file's contents (flag -e), as a checksum,"
                        : strcmp(what, "build-precision") == 0 ? "this program's precision (make PRECISION=)"
                        : strcmp(what, "train-data") == 0      ? "the train data (flag -i)"
                        : strcmp(what, "val-data") == 0        ? "the val data (flag -j)"
                                                               : what;
    fatal("ranks disagree: %s is '%s' on rank %d but '%s' on rank 0; every rank of a run must be given the same flags, "
          "model and data", label, mine, r, theirs);
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

// -pp's checks for a run on `ranks` ranks (the pipeline's shape, --pp-split), then the step's
// micro-steps over the data-parallel ranks into *accum; fatal in one line naming the flag.
static void pipeline_shape(const TrainOptions* o, const GPT2Config* cfg, int ranks, long* accum) {
    char why[512];
    int P = o->pp_stages, layers[PP_MAX_STAGES];
    if (P > 1 && ranks % P == 0 && P <= cfg->num_layers && o->pp_split[0] &&
        !pipe_split_parse(o->pp_split, P, cfg->num_layers, layers, why, sizeof(why)))
        fatal("%s", why);
    int D = ranks % P == 0 ? ranks / P : ranks;
    // -d -1 is B*T*ranks, as without stages: with -pp, P micro-steps of B*T*D (the fewest 1F1B takes).
    long total = o->total_batch == -1 && P > 1 ? (long)o->B * o->T * ranks : o->total_batch;
    if (!run_shape_check(o->B, o->T, D, total, accum, why, sizeof(why))) fatal("%s", why);
    if (!pipe_check(P, ranks, cfg->num_layers, *accum, why, sizeof(why))) fatal("%s", why);
}

// -pp: the stages and their layers into eo (the rest of eo filled): --pp-split's, or the planner's
// split that minimises the largest stage's memory.
static void pipeline_options(const TrainOptions* o, const GPT2Config* cfg, EngineOptions* eo) {
    eo->pp_stages = o->pp_stages;
    if (o->pp_stages <= 1) return;
    char why[512];
    if (o->pp_split[0]) pipe_split_parse(o->pp_split, o->pp_stages, cfg->num_layers, eo->pp_layers, why, sizeof(why));
    else memory_plan_pp_split(cfg, eo);
}

const char* (*train_device_name)(void) = NULL;

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
    eo.no_overlap = !o->overlap;
    eo.gelu_fusion = o->gelu_fusion;
    eo.host_adamw_per_s = o->host_adamw * 1e9;
    snprintf(eo.plan_link, sizeof(eo.plan_link), "%s", o->link);
    // The card whose time to predict: --gpu, else this machine's GPU when the time model has it, else
    // the planner's stated card (PLAN_CARD).
    const TimeGpu* gpu = o->gpu[0] ? time_gpu_find(o->gpu) : NULL;
    if (!gpu && train_device_name) {
        const char* here = train_device_name();
        if (here) gpu = time_gpu_for_device(here);
    }
    if (gpu) snprintf(eo.plan_card, sizeof(eo.plan_card), "%s", gpu->name);
    // The trainer's own check of the step's shape: what it would refuse is not planned.
    long accum;
    pipeline_shape(o, &s->config, eo.num_ranks, &accum);
    eo.micro_steps = (int)accum;
    pipeline_options(o, &s->config, &eo);
    int keep_step = o->total_batch != -1;
    size_t budget = o->memory_budget[0] ? memory_size_parse(o->memory_budget, "--memory-budget") : 0;
    // With -pp the rank's figure is the largest stage's: its plan is the one printed last (and in JSON).
    eo.rank = memory_plan_largest_stage(&s->config, &eo);
    MemoryPlan p;
    memory_plan_make(&p, &s->config, &eo);
    CommLink link;
    char why_link[256];
    if (!comm_link_parse(o->link, &link, why_link, sizeof(why_link))) fatal("%s", why_link);
    char peak_why[256];
    double peak = gpu ? gpu_peak_flops(gpu->name, gpu->arch / 10, gpu->arch % 10, eo.precision, peak_why, sizeof(peak_why)) : 0.0;
    CommPlan comm;
    comm_plan_make(&comm, &p, (int)accum, &link, peak, gpu ? gpu->name : NULL);
    if (s->rank == 0) {
        if (o->json) {
            // One object: the memory plan's members, then the communication's.
            printf("{");
            memory_plan_print_json_members(&p, budget, (int)accum, keep_step, comm_plan_step_seconds, stdout);
            printf(",\n \"communication\": ");
            comm_plan_print_json(&comm, &p, stdout);
            printf("}\n");
        } else {
            for (int st = 0; st < pipe_stages(&eo); st++) {  // -pp: every other stage's table first
                EngineOptions so = eo;
                so.rank = memory_plan_stage_rank(&eo, st);
                if (so.rank == eo.rank) continue;
                MemoryPlan ps;
                memory_plan_make(&ps, &s->config, &so);
                memory_plan_print(&ps, stdout);
            }
            memory_plan_print(&p, stdout);
            comm_plan_print(&comm, stdout);
            memory_plan_print_stages(&s->config, &eo, stdout);
            if (budget) {
                MemoryFit fit = memory_plan_fit_step(&s->config, &eo, (int)accum, keep_step, budget, comm_plan_step_seconds);
                memory_fit_print(&fit, &eo, budget, stdout);
            }
        }
    }
    fflush(stdout);
    ranks_finalize();
    exit(0);
}

// The built-in run, which the preset is for: the built-in corpus (no -i, no -j) and a fresh model (a
// descriptor, d4 as d2: a model file brings llm.c's habits), training (--plan plans llm.c's shapes).
static int built_in_run(const TrainOptions* o) {
    GPT2Config cfg;
    return !o->plan && !o->train_data[0] && !o->val_data[0] && gpt2_config_from_descriptor(o->model, 1024, &cfg);
}

// -h 1's file. Given (--hellaswag-file), it must exist (options_validate). Else this project's
// place, then llm.c's (its train_gpt2.cu reads dev/data/hellaswag/hellaswag_val.bin), both relative
// to the working dir; with neither, llm.c's way: a line says so and the run trains without
// HellaSwag (so llm.c's restart loop ends). Rank 0 looks; every rank takes its choice.
static void hellaswag_choose_file(TrainSetup* s) {
    TrainOptions* o = &s->opts;
    if (!o->hellaswag || cli_given(o, "--hellaswag-file")) return;
    const char* places[2] = {o->hellaswag_file, HELLASWAG_LLMC_PATH};
    int found = -1;
    for (int i = 0; i < 2 && s->rank == 0 && found < 0; i++)
        if (file_exists(places[i])) found = i;
    ranks_broadcast(&found, sizeof(found), 0);
    if (found >= 0) {
        o->hellaswag_file = places[found];
        return;
    }
    printf("HellaSwag: no eval file at %s or %s (llm.c's place); training without HellaSwag, as llm.c does (make it "
           "with data/hellaswag.sh, or name one with --hellaswag-file)\n", places[0], places[1]);
    o->hellaswag = 0;
}

// T against the model's positions (a -t not given is llm.c's default, or the built-in run's preset).
static void seq_len_check(const TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    if (o->T > s->config.max_seq_len)
        fatal("flag -t (sequence length) is %d%s, the model's maximum is %d; pass -t %d or less", o->T,
              cli_given(o, "--seq") ? "" : " (its default, llm.c's)", s->config.max_seq_len, s->config.max_seq_len);
}

// The step's shape from B, T, -d, the ranks and -pp: the stages, the data-parallel ranks (a rank's
// place among them), micro-steps and tokens a step.
static void run_shape_set(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    seq_len_check(s);
    long accum;
    pipeline_shape(o, &s->config, s->num_ranks, &accum);
    s->pp_stages = o->pp_stages;
    s->dp_ranks = s->num_ranks / s->pp_stages;
    s->dp_rank = s->rank % s->dp_ranks;
    s->accum = (int)accum;
    s->total_batch = accum * o->B * o->T * s->dp_ranks;
}

void train_setup(TrainSetup* s, int argc, char** argv, Precision gpu_precision) {
    // A line at a time even into a file or a pipe: a log being followed, or a run stopped by a
    // signal or an error, shows every step it made.
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(s, 0, sizeof(*s));
    // The flags first (every rank is given the same ones, so an error in them is the same line on
    // each), then the ranks (-pi): from then on an error on any rank names it and ends every rank.
    // Rank 0 alone prints; the others' stdout goes nowhere (their errors still reach stderr).
    TrainOptions* o = &s->opts;
    ranks_name_errors_early();
    cli_parse(o, argc, argv);
    // The built-in run: its preset fills what was not given (common/cli.c says why).
    char preset[256] = "";
    if (built_in_run(o)) cli_preset_apply(o, preset, sizeof(preset));
    // -K's default, or the tokenizer file's name before it had its own (tokenizer_default_path).
    if (!cli_given(o, "--tokenizer")) o->tokenizer = tokenizer_default_path();
    options_validate(o);
    Ranks ranks;
    RanksLaunch how = {o->nccl_init, o->num_processes, o->process_rank, o->gpus_per_node,
                       cli_given(o, "--num-processes"), cli_given(o, "--process-rank"), cli_given(o, "--gpus-per-node"),
                       o->nccl_server, o->nccl_fs_path};
    ranks_init_launch(&ranks, &how);
    s->rank = ranks.rank;
    s->num_ranks = ranks.num_ranks;
    s->local_rank = ranks.local_rank;
    if (s->rank != 0 && !freopen("/dev/null", "w", stdout)) fatal("cannot silence the output of rank %d", s->rank);
    s->resume_step = -1;
    s->continue_from = -1;
    if (preset[0])
        printf("flags: the built-in run's preset for the flags not given: %s (-i, -j or a model file for -e give llm.c's "
               "defaults instead)\n", preset);
    hellaswag_choose_file(s);

    if (strcmp(o->nccl_init, "mpi") == 0 &&
        (cli_given(o, "--num-processes") || cli_given(o, "--process-rank") || cli_given(o, "--gpus-per-node") ||
         cli_given(o, "--nccl-fs-path") || cli_given(o, "--nccl-server")))
        printf("ranks: -pi mpi takes the ranks from the launcher (%d rank%s here); -pn -pr -pg -pf -ps are ignored, as "
               "in llm.c\n", s->num_ranks, s->num_ranks == 1 ? "" : "s");
    s->model_sum = model_config_from_flag(o->model, &s->config, &s->model_from_file);
    // Every rank must run the same configuration: checked before any other collective, since a
    // difference in flags can make the ranks' collectives differ (and hang).
    {
        char* flags = cli_record_all(o, 0);
        size_t n = strlen(flags);
        char* record = (char*)malloc_check(n + 128, "flag record");
        snprintf(record, n + 128, "%smodel-contents %016llx\nbuild-precision %s\n", flags,
                 (unsigned long long)s->model_sum, precision_name(gpu_precision));
        ranks_agree(s, record);
        free(record);
        free(flags);
    }
    if (o->plan) {
        seq_len_check(s);
        plan_and_exit(s, gpu_precision);
    }
    run_shape_set(s);

    // The output dir before the data: a second run on it stops at once, not after a long data check.
    // Rank 0 owns the dir (its lock, its clean-up); the others write their state shards into it, and
    // read back what rank 0 wrote into its train.lock (compared below: one directory for all).
    if (o->output_dir[0] && cli_preset_filled(o, "--output") && !o->overwrite) run_dir_preset_choose(s);
    if (o->output_dir[0] && s->rank == 0) run_dir_claim(s);
    if (o->output_dir[0]) make_dirs(o->output_dir);
    ranks_barrier();
    if (o->output_dir[0] && s->rank != 0) {
        char path[4300];
        snprintf(path, sizeof(path), "%s/train.lock", o->output_dir);
        run_dir_lock_read(path, s->lock_text, sizeof(s->lock_text));
    }
    if (!o->output_dir[0]) printf("output: none (no -o, llm.c's default): no checkpoints, log.jsonl or main.log are written\n");
    // A resume reads the newest intact checkpoint's record first: flags whose default gives way to it
    // (-sf, and the recorded ones the built-in run's preset filled) take its values before the data
    // loader is made, and the built-in corpus is its own. Every rank adopts from rank 0's record;
    // an adopted -t reshapes the step.
    int have_peeked = 0;
    if (o->resume && s->rank == 0) have_peeked = run_dir_resume_peek(s);
    ranks_broadcast(&have_peeked, sizeof(have_peeked), 0);
    if (have_peeked) {
        TrainState* peeked = run_dir_peeked();
        ranks_broadcast(peeked->record, sizeof(peeked->record), 0);
        cli_record_adopt(o, peeked->record);
        run_shape_set(s);
    }

    // Data: given shards, or the built-in corpus made on first use. Every token is checked here.
    s->train_pattern = o->train_data;
    s->val_pattern = o->val_data;
    if (s->train_pattern[0] == '\0') {
        // Rank 0 chooses the corpus (a resumed run's own) and writes it on first use; the others
        // then find it made.
        char kind[64];
        if (s->rank == 0) {
            if (o->resume) run_dir_resume_corpus_kind(s, have_peeked ? run_dir_peeked() : NULL, kind, sizeof(kind));
            else corpus_default_kind(o->tokenizer, kind, sizeof(kind));
            corpus_prepare_kind(&s->corpus, kind, o->tokenizer);
        }
        ranks_broadcast(kind, sizeof(kind), 0);
        ranks_barrier();
        if (s->rank != 0) corpus_prepare_kind(&s->corpus, kind, o->tokenizer);
        s->train_pattern = s->corpus.train_pattern;
        if (s->val_pattern[0] == '\0') s->val_pattern = s->corpus.val_pattern;
    }
    // Each data-parallel replica its share (with -pp every stage of a replica the same micro-batches).
    dataloader_init(&s->train, s->train_pattern, o->B, o->T, s->dp_rank, s->dp_ranks, o->shuffle, (uint64_t)o->seed,
                    s->config.vocab_size);
    s->have_val = s->val_pattern[0] != '\0' && o->val_every > 0;
    if (s->have_val)
        dataloader_init(&s->val, s->val_pattern, o->B, o->T, s->dp_rank, s->dp_ranks, 0, 0, s->config.vocab_size);
    // The HellaSwag file is read through now: a bad one stops the run before any engine is made.
    if (o->hellaswag) hellaswag_open(&s->hellaswag, o->hellaswag_file, o->B, o->T, s->config.vocab_size, s->rank, s->num_ranks);
    printf("data: every token checked in %.2f s: %lld train", (s->train.check_ms + (s->have_val ? s->val.check_ms : 0)) / 1e3,
           s->train.total_tokens);
    if (s->have_val) printf(", %lld val", s->val.total_tokens);
    printf("\n");
    s->max_steps = o->max_steps;
    if (s->max_steps == -1) {
        int64_t epoch_steps = s->train.total_samples / train_step_samples(s);
        if (epoch_steps == 0)
            fatal("train data %s holds less than one step of %ld tokens; set -x", s->train_pattern, s->total_batch);
        if (epoch_steps > CHECKPOINT_MAX_STEP)
            fatal("train data %s holds %lld steps, more than the limit of %lld; set -x", s->train_pattern,
                  (long long)epoch_steps, CHECKPOINT_MAX_STEP);
        s->max_steps = (int)epoch_steps;
    }
    // The data every rank read, and the output dir each one writes into, are the same.
    {
        char record[1024], train_fp[256], val_fp[256] = "none", lock[512] = "";
        dataloader_fingerprint(&s->train, train_fp, sizeof(train_fp));
        if (s->have_val) dataloader_fingerprint(&s->val, val_fp, sizeof(val_fp));
        // train.lock's lines on one line: "12345; host node1; started 1700000000.123456789".
        size_t used = 0;
        for (const char* c = s->lock_text; *c && used + 3 < sizeof(lock); c++) {
            if (*c != '\n') lock[used++] = *c;
            else if (c[1]) used += (size_t)snprintf(lock + used, sizeof(lock) - used, "; ");
        }
        lock[used] = '\0';
        if (!lock[0] && s->opts.output_dir[0]) snprintf(lock, sizeof(lock), "(none)");
        snprintf(record, sizeof(record), "train-data %s\nval-data %s\noutput-dir-lock %s\n", train_fp, val_fp, lock);
        ranks_agree(s, record);
    }
    run_dir_record_make(s);
    // -y 1 on a run that reached its last step: complete (every rank ends here, exit 0), or, with a
    // larger -x given, going on from its last checkpoint.
    long complete = -1;
    if (o->resume && s->rank == 0) complete = run_dir_complete_consider(s);
    ranks_broadcast(&complete, sizeof(complete), 0);
    ranks_broadcast(&s->continue_from, sizeof(s->continue_from), 0);
    if (complete >= 0) {
        fflush(stdout);
        ranks_finalize();
        exit(0);
    }
    // Rank 0 checks the checkpoints and chooses (setting damaged ones aside); every rank loads it.
    if (o->resume && s->rank == 0) {
        run_dir_resume_choose(s);
        if (s->continue_from >= 0 && s->resume_step != s->continue_from)
            fatal("flag -x %d: the run in %s is complete at step %ld, but its checkpoint of that step is damaged "
                  "(set aside); it cannot go on from there", s->max_steps, o->output_dir, s->continue_from);
    }
    ranks_broadcast(&s->resume_step, sizeof(s->resume_step), 0);
    ranks_broadcast(&s->resume_llmc, sizeof(s->resume_llmc), 0);
    // -y 1 with no checkpoint to resume: from here on a fresh run, on every rank.
    if (s->resume_step < 0) o->resume = 0;

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
    eo->tf32 = o->tf32;
    eo->recompute = o->recompute;
    eo->recompute_every = o->recompute_every;
    eo->precision = precision_from_flag(o->precision, gpu_precision);
    eo->offload = offload_from_flag(o->offload);
    eo->no_overlap = !o->overlap;
    eo->memory_budget = o->max_memory[0] ? memory_size_parse(o->max_memory, "--max-memory") : 0;
    eo->total_batch = s->total_batch;
    eo->micro_steps = s->accum;
    pipeline_options(o, &s->config, eo);
}

// ---------------------------------------------------------------------------------------------
// Validation and sampling

// The mean val loss over every rank's slice of the val data; a long evaluation says how far it is.
static float evaluate(Engine* e, DataLoader* val, int steps, int num_ranks) {
    dataloader_reset(val);
    int n = steps < 0 || steps > val->epoch_batches ? (int)val->epoch_batches : steps;
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
// Returns 1 when the engine measures (the GPU engine).
static int memory_report_print(Engine* e) {
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
    if (!measured) return 0;
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
    return 1;
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
// Signals: a stop request (SIGTERM, SIGINT, SIGUSR1, SIGUSR2) ends the run with a checkpoint of
// the last completed step, without waiting for the step under way: that step is abandoned between
// two micro-steps (its gradients dropped, the data rewound to its start; a resumed run does it
// again, bit for bit), so the checkpoint starts within one micro-step of the signal. Every rank
// stops at the same micro-step (stop_requested is collective). mpirun forwards SIGUSR1 and SIGUSR2
// at once and SIGTERM only after its kill delay (docs/reliability.md, "Preemption"). Launchers and schedulers
// deliver a stop more than once (mpirun forwards its SIGTERM after the scheduler's own; Slurm
// signals every process): repeats are ignored, except a second SIGINT (Ctrl-C twice), which ends
// the process at once (the files stay safe: every write is to a temporary name first).

static volatile sig_atomic_t g_stop_signal;
static int g_signal_quiet;  // ranks other than 0 say nothing

static void on_stop_signal(int sig) {
    if (g_stop_signal) {
        if (sig == SIGINT) {
            signal(SIGINT, SIG_DFL);
            raise(SIGINT);
        }
        return;
    }
    static const char msg[] = "\nsignal received: stopping at the next micro-step with a checkpoint of the last "
                              "completed step (SIGINT again to stop at once)\n";
    g_stop_signal = sig;
    if (!g_signal_quiet) {
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)ignored;
    }
}

static void stop_signals_install(int quiet) {
    g_signal_quiet = quiet;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;  // reads and writes in progress finish rather than fail
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    for (int i = 0; i < 4; i++) sigaction(sigs[i], &sa, NULL);
}

static const char* signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : sig == SIGUSR2 ? "SIGUSR2"
                                                                                                  : "a signal";
}

// The stop request as every rank sees it: the same answer on all (collective with several ranks).
static int stop_requested(void) {
    int sig = g_stop_signal;
    ranks_max(&sig, 1);
    return sig;
}

// ---------------------------------------------------------------------------------------------
// The run

// Flags the chosen engine cannot honour are refused, naming the engine (also when --engine auto fell
// back to the C engine for want of a GPU): a flag ignored in silence leaves a run that is not the
// one asked for (--max-memory 1MiB on the C engine would use what it needs, --precision bf16 would
// train in fp32, ...).
static void engine_flags_check(const TrainSetup* s, const Engine* e) {
    const TrainOptions* o = &s->opts;
    int cpu = e->kind && strcmp(e->kind, "cpu") == 0;
    char flag[96] = "";
    const char* what = NULL;
    // -r's default (llm.c's 1) means nothing to the C engine, which keeps every activation; a given -r 1..3 is refused.
    if (cpu && o->recompute != 0 && cli_given(o, "--recompute")) {
        snprintf(flag, sizeof(flag), "-r (--recompute) %d", o->recompute);
        what = "activation recompute";
    } else if (cpu && o->recompute_every != 0) {
        snprintf(flag, sizeof(flag), "--recompute-every %d", o->recompute_every);
        what = "activation recompute";
    } else if (cpu && o->gelu_fusion > 0) {  // -1 (the default): by the GPU, so nothing here
        snprintf(flag, sizeof(flag), "-ge (--gelu-fusion) %d", o->gelu_fusion);
        what = "GELU fusion (a cuBLASLt epilogue)";
    } else if (cpu && strcmp(o->offload, "none") != 0) {
        snprintf(flag, sizeof(flag), "--offload %.32s", o->offload);
        what = "optimizer offload (its optimizer state is in host memory already)";
    } else if (cpu && o->pp_stages > 1) {
        snprintf(flag, sizeof(flag), "-pp %d", o->pp_stages);
        what = "pipeline stages (it is one process holding the whole model)";
    } else if (cpu && o->max_memory[0]) {
        snprintf(flag, sizeof(flag), "--max-memory %.32s", o->max_memory);
        what = "a limit on device memory (it uses host memory)";
    } else if (cpu && o->precision[0] && strcmp(o->precision, "fp32") != 0) {
        snprintf(flag, sizeof(flag), "--precision %.16s", o->precision);
        what = "a 16-bit precision (it computes in fp32)";
    } else if (!e->loss_scaling && (cli_given(o, "--loss-scale") || cli_given(o, "--loss-scale-interval"))) {
        snprintf(flag, sizeof(flag), "%s", cli_given(o, "--loss-scale") ? "--loss-scale" : "--loss-scale-interval");
        what = "loss scaling (FP16's alone)";
    }
    if (!what) return;
    fatal("flag %s asks for %s, which %s (%s) cannot honour%s; leave the flag out%s", flag, what,
          cpu ? "the C reference engine" : "the GPU engine", precision_name(e->precision),
          cpu && strcmp(o->engine, "auto") == 0 ? " (--engine auto chose it: no usable GPU)" : "",
          cpu ? " or run on a GPU" : " or build the trainer for FP16 (make PRECISION=FP16)");
}

// The run id every file of this run's checkpoints carries (checkpoint.h). A resumed run keeps its
// checkpoint's; a fresh run's is a hash of everything that decides its checkpoints' bytes: the
// flags that can change them, the model file's contents, the train data, the engine and its
// precision, and the number of ranks. A random id would make two identical runs' files differ
// (the engines are deterministic, and runs are compared file for file); two runs with one id write
// the same bytes, so files whose ids match are interchangeable.
static uint64_t run_id_make(const TrainSetup* s, const Engine* e) {
    char* flags = cli_record_all(&s->opts, 1);
    char fp[256], more[512];
    dataloader_fingerprint(&s->train, fp, sizeof(fp));
    snprintf(more, sizeof(more), "model %s %016llx\ntrain-data %s\nengine %s %s\nranks %d\n",
             s->model_from_file ? "file" : s->opts.model, (unsigned long long)s->model_sum, fp, e->kind ? e->kind : "",
             precision_name(e->precision), s->num_ranks);
    Checksum c;
    checksum_init(&c);
    checksum_update(&c, flags, strlen(flags));
    checksum_update(&c, more, strlen(more));
    free(flags);
    uint64_t id = checksum_final(&c);
    return id ? id : 1;  // 0 means "none"
}

// A checkpoint of `step`: the engine writes its files (every rank its part); once all are on disk,
// rank 0 writes DONE_STEP, then applies -nk.
static void checkpoint_write(TrainSetup* s, Engine* e, TrainState* st, int step) {
    char mp[4200], sp[4200], dp[4200];
    const char* dir = s->opts.output_dir;
    run_dir_checkpoint_paths(dir, step, mp, sp, sizeof(mp));
    st->step = step;
    st->train_samples = dataloader_get_pos(&s->train);
    e->checkpoint_save(e, mp, sp, st);
    ranks_barrier();  // every rank's part written
    if (s->rank == 0) {
        run_dir_done_path(dir, step, dp, sizeof(dp));
        FILE* f = fopen(dp, "w");
        if (!f) fatal("cannot create %s (%s)", dp, strerror(errno));
        fclose_check(f, dp);
        sync_parent_dir(dp);
        printf("checkpoint: wrote %s, %s and %s\n", mp, sp, dp);
        if (s->opts.checkpoints_keep > 0) run_dir_retain(dir, s->opts.checkpoints_keep, s->opts.major_checkpoint_every);
    }
    ranks_barrier();  // no rank reads the dir while rank 0 deletes
}

// The exit status of a stopped run: 128 + the signal, as a shell reports one; with several ranks 0,
// because mpirun takes a rank's non-zero status for a failure and "aborts" the finished job through
// its kill delays (and would hang on a crashed rank with that check off). Under mpirun its own exit
// status, or scripts/preemptible.sh's 128 + the signal, says that the run was stopped.
static int stop_status(const TrainSetup* s, int sig) { return s->num_ranks > 1 ? 0 : 128 + sig; }

// The line a stopped run ends with: where its work is and how to go on. abandoned: step + 1 was
// under way and is dropped (a resume does it again).
static void stop_report(const TrainSetup* s, int sig, int step, int abandoned) {
    const char* name = signal_name(sig);
    char mp[4200], sp[4200], dropped[96] = "";
    run_dir_checkpoint_paths(s->opts.output_dir, step, mp, sp, sizeof(mp));
    if (abandoned) snprintf(dropped, sizeof(dropped), " (step %d, under way, was dropped: a resume does it again)", step + 1);
    if (!s->opts.output_dir[0]) printf("stopped by %s after step %d: no output dir (-o), nothing saved%s\n", name, step, dropped);
    else if (step == 0) printf("stopped by %s before the first step: nothing to save\n", name);
    else printf("stopped by %s after step %d: checkpoint %s; resume with the same flags and -y 1%s\n", name, step, mp, dropped);
}

// Loads llm.c's checkpoint chosen by resume_choose_llmc. Restored: the weights (llm.c's fp32
// master weights when its state holds them, else its model file), AdamW m and v (from every llm.c
// rank's file, mapped from its ZeRO-1 shards into the whole), and the step (also AdamW's
// bias-correction count: llm.c updates at every step). The data position is this loader's after
// step steps from the start (where a run of ours would stand): llm.c's recorded shard and
// sample are printed beside it, and its shuffled order (-sf 1) is its own MT19937 permutation, which
// this loader does not reproduce. Not restored: llm.c's stochastic-rounding RNG, the -sl/-sg
// outlier statistics (they start afresh), the loss-scale (llm.c has none). Rank 0 hands the whole
// state to the engine as an unsharded checkpoint of ours through two temporary files in -o, which
// every rank loads (taking its own part, as from any checkpoint of ours) and rank 0 then deletes, so
// every engine reads it through its own checked path, on any number of ranks.
static void llmc_resume_load(TrainSetup* s, Engine* e, const char* mp, TrainState* st) {
    const TrainOptions* o = &s->opts;
    const GPT2Config* cfg = &s->config;
    size_t n = gpt2_param_layout(cfg).num_parameters;
    char lp[4200], tm[4300], ts[4300];
    llmc_state_path(o->output_dir, s->resume_step, 0, lp, sizeof(lp));
    LlmcState ls;
    llmc_states_read(o->output_dir, s->resume_step, cfg, &ls, NULL, NULL, NULL);
    st->step = ls.step;
    st->run_id = 0;
    memcpy(st->record, s->record, sizeof(st->record));
    int64_t samples = ls.step * train_step_samples(s);
    st->train_samples = o->overfit ? 0 : samples;  // overfitting rereads the first batch whatever the position
    snprintf(tm, sizeof(tm), "%s/llmc_import_model.tmp", o->output_dir);
    snprintf(ts, sizeof(ts), "%s/llmc_import_state.tmp", o->output_dir);
    if (s->rank == 0) {
        float* params = (float*)malloc_check(n * sizeof(float), "parameters");
        float* m = (float*)malloc_check(n * sizeof(float), "AdamW m");
        float* v = (float*)malloc_check(n * sizeof(float), "AdamW v");
        llmc_states_read(o->output_dir, s->resume_step, cfg, &ls, m, v, params);
        if (!ls.master_weights) model_file_read_params(mp, cfg, params);
        OptimizerCounters oc = {ls.step, 0.0, 0};
        model_file_write_checkpoint(tm, cfg, params, st);
        state_file_write(ts, cfg, st, &oc, m, v, n);
        free(params);
        free(m);
        free(v);
    }
    ranks_barrier();
    e->checkpoint_load(e, tm, ts, st);
    ranks_barrier();
    if (s->rank == 0) {
        remove(tm);
        remove(ts);
    }
    char more[64] = "";
    const char* how = ls.zero ? "ZeRO-1 shares, joined" : "whole copies";
    if (ls.num_processes == 2) snprintf(more, sizeof(more), " (and rank 1's: %s)", how);
    else if (ls.num_processes > 2) snprintf(more, sizeof(more), " (and ranks 1-%d's: %s)", ls.num_processes - 1, how);
    printf("resume: step %lld from llm.c's checkpoint %s + %s%s: weights (%s), AdamW m and v, step; not restored: "
           "llm.c's stochastic-rounding RNG, the -sl/-sg statistics (start afresh)\n", (long long)ls.step, mp, lp, more,
           ls.master_weights ? "its fp32 master weights" : "its model file");
    // Where each loader reads next. Unshuffled, both go through the shards in name order; llm.c's
    // "sample" i of shard k is its window of B*T*ranks tokens at i*B*T*ranks (taken here as this
    // run's B*T*ranks: llm.c's state does not hold B); after a shard's last whole window llm.c still
    // names that shard (sample = its window count) and goes on at the next shard's start, dropping
    // the shorter tail, which this loader reads as samples of T+1 tokens before it goes on.
    int64_t epoch, shard, sample;
    dataloader_locate(&s->train, samples, &epoch, &shard, &sample);
    uint64_t files = (uint64_t)s->train.nfiles, k = ls.shard_idx % files;
    uint64_t window = (uint64_t)o->B * o->T * s->dp_ranks;
    uint64_t windows = s->train.ntok[k] < 1 ? 0 : (s->train.ntok[k] - 1) / window;
    int shard_end = ls.sample_idx >= windows;  // llm.c goes on at the next shard's start
    uint64_t llmc_shard = shard_end ? (k + 1) % files : k, llmc_token = shard_end ? 0 : ls.sample_idx * window;
    int same = !ls.shuffle && !o->shuffle && (uint64_t)shard == llmc_shard && (uint64_t)(sample * o->T) == llmc_token;
    printf("resume: data: %lld samples from the start in this loader's %s order (next: shard %lld, tokens %lld on); "
           "llm.c's loader stood at shard %llu sample %llu%s\n", (long long)samples, o->shuffle ? "shuffled" : "sequential",
           (long long)shard, (long long)(sample * o->T), (unsigned long long)ls.shard_idx,
           (unsigned long long)ls.sample_idx,
           same ? " (the same position)"
           : ls.shuffle || o->shuffle ? ", shuffled: llm.c's permutation is not this loader's, so the batches from "
                                        "here are this loader's, continuing from the same step count"
           : shard_end ? " (a different position: llm.c goes on at the next shard, dropping the tail this loader "
                         "reads; the batches from here are this loader's)"
                       : " (a different position: the batches from here are this loader's)");
}

int train_run(TrainSetup* s, Engine* e) {
    const TrainOptions* o = &s->opts;
    const GPT2Config* cfg = &s->config;
    size_t n = gpt2_param_layout(cfg).num_parameters;
    engine_flags_check(s, e);

    // Weights: a model file, or a fresh seeded init. Host fp32 only until the engine has them.
    float* host_params = (float*)malloc_check(n * sizeof(float), "parameters");
    if (s->model_from_file) model_file_read_params(o->model, cfg, host_params);
    // llm.c's descriptors start from llm.c's weights; this project's d1..d5 (the default run's d2
    // among them, whose learning rate was tuned on it) from its own initialisation, seeded by -S.
    else if (gpt2_descriptor_is_llmc(o->model)) gpt2_init_params_llmc(cfg, host_params, (unsigned int)o->init_seed);
    else gpt2_init_params(cfg, host_params, (unsigned long long)o->seed);
    e->set_params(e, host_params);
    free(host_params);

    static TrainState st;  // 8 KiB of run record
    memset(&st, 0, sizeof(st));
    st.rng_state = rng_seed((uint64_t)o->seed ^ 0x5A4D504C45ull);  // the sampler's own stream
    st.B = o->B; st.T = o->T; st.num_processes = s->dp_ranks;
    if (s->overwrite_pending && s->rank == 0) run_dir_clear(o->output_dir);
    // This run trains in the dir now: it is not complete until it reaches its own last step.
    if (o->output_dir[0] && s->rank == 0) run_dir_complete_remove(o->output_dir);
    ranks_barrier();
    if (o->resume) {
        char mp[4200], sp[4200];
        run_dir_checkpoint_paths(o->output_dir, s->resume_step, mp, sp, sizeof(mp));
        if (s->resume_llmc) llmc_resume_load(s, e, mp, &st);
        else e->checkpoint_load(e, mp, sp, &st);
        if (!s->resume_llmc) printf("resume: step %lld from %s\n", (long long)st.step, mp);
        if (st.train_samples < 0) {
            // A file of version 1 to 3: its position was an older loader's (windows of B*T*ranks tokens,
            // shuffled as whole windows), which this loader cannot place. The run goes on at the
            // sample count its steps read, in this loader's order (dataloader.h): unshuffled, the
            // tokens the older loader read next unless it had passed a shard's end (it dropped each
            // shard's tail shorter than a window); shuffled, the epoch under way goes on from the
            // same count in this order, so some of its samples come twice and others not at all
            // until the next epoch, which reads every sample once.
            st.train_samples = o->overfit ? 0 : st.step * train_step_samples(s);
            printf("resume: %s holds an older loader's data position; the data goes on at sample %lld (%lld steps of "
                   "%lld) of this loader's %s order\n", sp, (long long)st.train_samples, (long long)st.step,
                   (long long)train_step_samples(s), o->shuffle ? "shuffled" : "sequential");
        }
        dataloader_set_pos(&s->train, st.train_samples);
        st.B = o->B; st.T = o->T; st.num_processes = s->dp_ranks;  // the next checkpoint's: this run's
    }
    // A resumed run keeps its checkpoint's run id (a checkpoint from before run ids gets one now).
    if (!o->resume || st.run_id == 0) st.run_id = run_id_make(s, e);
    ranks_broadcast(&st.run_id, sizeof(st.run_id), 0);
    memcpy(st.record, s->record, sizeof(st.record));
    // Overfitting trains on the first batch only: load it whether the run starts or resumes.
    if (o->overfit) {
        dataloader_reset(&s->train);
        dataloader_next_batch(&s->train);
    }

    // Samples decode with this project's file or llm.c's (gpt2_tokenizer.bin, magic 20240328).
    Tokenizer* tok = file_exists(o->tokenizer) ? tokenizer_load_decoder(o->tokenizer) : tokenizer_bytes_only();
    Logger log;
    logger_open(&log, s->rank == 0 ? o->output_dir : "", o->resume ? (long)st.step : -1);  // rank 0 logs

    printf("model: %s | L=%d C=%d NH=%d maxT=%d V=%d (padded %d) | %.2fM parameters\n", o->model, cfg->num_layers,
           cfg->channels, cfg->num_heads, cfg->max_seq_len, cfg->vocab_size, cfg->padded_vocab_size, n / 1e6);
    printf("engine: %s\n", e->name);
    if (e->peak_note[0]) printf("mfu: %s\n", e->peak_note);
    if (memory_report_print(e) && (s->num_ranks > 1 || s->engine_options.offload != OFFLOAD_NONE)) {
        // What the ranks will send each other (and offload's copies), planned as --plan plans it, at
        // --link and this card's peak when the table knows it.
        MemoryPlan mp;
        memory_plan_make(&mp, cfg, &s->engine_options);
        CommLink link;
        char why_link[256];
        if (!comm_link_parse(o->link, &link, why_link, sizeof(why_link))) fatal("%s", why_link);
        CommPlan comm;
        comm_plan_make(&comm, &mp, s->accum, &link, e->peak_flops, e->name);
        comm_plan_print(&comm, stdout);
    }
    memory_plan_print_stages(cfg, &s->engine_options, stdout);  // -pp: every stage's layers and memory
    printf("train: %s (%d shards, %lld samples of %d tokens per epoch, %s) | val: %s\n", s->train_pattern, s->train.nfiles,
           (long long)s->train.total_samples, o->T + 1, o->shuffle ? "shuffled, -sf 1" : "in order, -sf 0",
           s->have_val ? s->val_pattern : "none");
    LRSchedule schedule = (LRSchedule)lr_schedule_parse(o->lr_scheduler);
    printf("steps: %d | total batch %ld tokens = %d micro-steps | lr %g %s warmup %d final %g | wd %g | clip %g\n",
           s->max_steps, s->total_batch, s->accum, o->lr, o->lr_scheduler, schedule == LR_CONSTANT ? 0 : o->warmup,
           schedule == LR_CONSTANT ? 1.0f : o->final_lr_frac, o->weight_decay, o->grad_clip);
    if (schedule == LR_CONSTANT && (o->warmup > 0 || o->final_lr_frac != 1.0f))
        printf("schedule: constant is the peak at every step, as llm.c's: -u %d and -q %g have no effect\n", o->warmup,
               o->final_lr_frac);
    // The outlier guard's z-scores: -sl and -sg each for its own, --skip-outliers for both.
    float z_loss = o->skip_loss_z > 0 ? o->skip_loss_z : o->skip_outliers;
    float z_norm = o->skip_grad_z > 0 ? o->skip_grad_z : o->skip_outliers;
    if (z_loss > 0 && z_loss == z_norm)
        printf("outlier guard: skip an update whose loss or grad norm is over %g standard deviations above its mean\n",
               z_loss);
    else if (z_loss > 0 || z_norm > 0)
        printf("outlier guard: skip an update whose loss is over %g or whose grad norm is over %g standard deviations "
               "above its mean (0 = not checked)\n", z_loss, z_norm);
    // A run on the byte-level built-in corpus samples bytes only, whatever tokenizer decodes them.
    int byte_level = o->train_data[0] == '\0' && s->corpus.byte_level;
    printf("samples: %s%s%s\n", tokenizer_can_merge(tok) || tokenizer_is_llmc(tok) ? o->tokenizer : "byte-level decoding (no tokenizer file)",
           tokenizer_is_llmc(tok) ? " (llm.c's tokenizer file: decoding only)" : "",
           byte_level ? ", drawn from the 256 byte tokens and end-of-text (the corpus is byte-level)" : "");

    AdamWConfig opt = {o->beta1, o->beta2, o->eps, o->weight_decay, 0.0f, 0.0f};
    int V = cfg->vocab_size;
    float* logits = (float*)malloc_check((size_t)V * sizeof(float), "sample logits");
    int* scratch = (int*)malloc_check((size_t)V * sizeof(int), "sample scratch");
    int* gen = (int*)malloc_check((size_t)(o->gen_tokens + 1) * sizeof(int), "sample tokens");
    HellaSwag* hs = &s->hellaswag;
    if (o->hellaswag)
        printf("HellaSwag: %d examples from %s, with each val loss (-v %d) and at the end\n", hs->num_examples,
               o->hellaswag_file, o->val_every);
    double flops_per_step = gpt2_flops_per_token(cfg, o->T) * (double)s->total_batch;
    double total_ms = 0.0;
    int timed_steps = 0, status = 0;

    int start_step = (int)st.step;
    int skipped_in_a_row = 0, skipped_at_min_scale = 0;  // FP16: steps skipped for non-finite gradients
    stop_signals_install(s->rank != 0);
    // Elapsed time counts everything the loop does (validation and samples too), from this process's
    // first step; the estimate of what is left, the pace after that step (eta_seconds).
    double loop_start_ms = wall_time_ms(), first_step_end_ms = 0.0;
    int reached_last = 0;
    for (int step = start_step; step <= s->max_steps; step++) {
        int last = step == s->max_steps;
        if (s->rank == 0) run_dir_check();
        // A resumed run's first step was evaluated and sampled before its checkpoint was written.
        int resumed_here = o->resume && step == start_step;
        if (s->have_val && (step % o->val_every == 0 || last) && !resumed_here) {
            float vl = evaluate(e, &s->val, o->val_steps, s->num_ranks);
            printf("val loss %.6f\n", vl);
            logger_val(&log, step, vl);
        }
        // HellaSwag as llm.c times it: with the val loss after the first step, and at the end.
        if (o->hellaswag && ((o->val_every > 0 && step > 0 && step % o->val_every == 0) || last) && !resumed_here) {
            int correct = hellaswag_correct(hs, e);
            float acc = (float)correct / hs->num_examples;
            printf("HellaSwag: %d/%d = %f\n", correct, hs->num_examples, acc);
            logger_eval(&log, step, acc);
        }
        // Rank 0 samples; with -pp every rank (each forward runs through the whole pipeline, and every
        // rank draws the same tokens from the same logits), rank 0 printing.
        if (o->sample_every > 0 && o->gen_tokens > 0 && (step % o->sample_every == 0 || last) && step > 0 &&
            !resumed_here && (s->rank == 0 || s->pp_stages > 1))
            sample_and_print(e, o, tok, byte_level, &st.rng_state, gen, logits, scratch);
        // A stop request writes the checkpoint here, where an unbroken run would stand at this step.
        int signal_seen = stop_requested();  // every rank stops at the same step, or a collective would hang
        int stopping = signal_seen && !last;
        int due = o->checkpoint_every > 0 && (step % o->checkpoint_every == 0 || last);
        int saved_here = (due || (stopping && o->output_dir[0])) && step > start_step;
        if (saved_here) checkpoint_write(s, e, &st, step);
        if (stopping) {
            stop_report(s, signal_seen, step, 0);
            status = stop_status(s, signal_seen);
            break;
        }
        if (last) {
            reached_last = 1;
            break;
        }

        double t0 = wall_time_ms();
        int64_t step_start = dataloader_get_pos(&s->train);
        int abandon = 0;
        for (int micro = 0; micro < s->accum; micro++) {
            // A stop request between micro-steps abandons the step (not after its last: the update
            // is all that is left of it).
            if (micro > 0 && (abandon = stop_requested()) != 0) break;
            if (!o->overfit) dataloader_next_batch(&s->train);
            e->micro_step(e, s->train.inputs, s->train.targets, o->B, o->T, 1.0f / s->accum, micro == s->accum - 1);
        }
        if (abandon) {
            // The weights and optimizer state are still those of `step`; only the data moved on.
            dataloader_set_pos(&s->train, step_start);
            if (o->output_dir[0] && step > start_step && !saved_here) checkpoint_write(s, e, &st, step);
            stop_report(s, abandon, step, 1);
            status = stop_status(s, abandon);
            break;
        }
        float lr = lr_schedule_at(schedule, step, s->max_steps, o->lr, o->warmup, o->final_lr_frac);
        int guard = (z_loss > 0 || z_norm > 0) && st.stats_count >= OUTLIER_WARMUP;
        double loss_sd = stats_std(st.loss_mean, st.loss_var), norm_sd = stats_std(st.norm_mean, st.norm_var);
        opt.skip_loss_above = guard && z_loss > 0 ? (float)(st.loss_mean + z_loss * loss_sd) : 0.0f;
        opt.skip_norm_above = guard && z_norm > 0 ? (float)(st.norm_mean + z_norm * norm_sd) : 0.0f;
        StepResult r = e->optimizer_step(e, &opt, lr, o->grad_clip);
        double ms = wall_time_ms() - t0;
        if (step == start_step) first_step_end_ms = t0 + ms;
        double tok_s = s->total_batch / (ms / 1e3);
        if (step > start_step) { total_ms += ms; timed_steps++; }  // the first step pays for warm-up
        int finite = isfinite(r.loss) && isfinite(r.grad_norm);
        int loss_out = opt.skip_loss_above > 0 && r.loss > opt.skip_loss_above;
        int norm_out = opt.skip_norm_above > 0 && r.grad_norm > opt.skip_norm_above;
        int outlier = !r.applied && finite && guard && (loss_out || norm_out);
        char reason[96] = "non-finite gradients";
        if (outlier && loss_out)
            snprintf(reason, sizeof(reason), "loss outlier (z %.1f > %g)", (r.loss - st.loss_mean) / loss_sd, z_loss);
        else if (outlier)
            snprintf(reason, sizeof(reason), "grad norm outlier (z %.1f > %g)", (r.grad_norm - st.norm_mean) / norm_sd,
                     z_norm);
        if ((step + 1) % o->log_every == 0 || step + 1 == s->max_steps || !r.applied) {
            printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s", step + 1, s->max_steps,
                   r.loss, r.grad_norm, lr, ms, tok_s);
            if (e->peak_flops > 0) printf(" | MFU %.1f%%", 100.0 * flops_per_step / (ms / 1e3) / e->peak_flops);
            double elapsed = (wall_time_ms() - loop_start_ms) / 1e3;
            char el[32], eta[32];
            format_clock(elapsed, el, sizeof(el));
            format_clock(eta_seconds(ms / 1e3, (wall_time_ms() - first_step_end_ms) / 1e3, step - start_step,
                                     s->max_steps - step - 1), eta, sizeof(eta));
            printf(" | %s elapsed, eta %s", el, eta);
            if (r.loss_scale != 1.0f) printf(" | scale %g", r.loss_scale);
            if (!r.applied) printf(" | skipped: %s", reason);
            printf("\n");
        }
        if (o->log_memory_every > 0 && (step + 1) % o->log_memory_every == 0) {
            MemoryReport mr;
            memset(&mr, 0, sizeof(mr));
            e->memory_report(e, &mr);
            double mib;
            if (mr.device_bytes) {
                mib = mr.used_peak / 1048576.0;
                printf("memory at step %d: %.1f MiB of the device's %.1f MiB in use at most so far (every process)\n",
                       step + 1, mib, mr.device_bytes / 1048576.0);
            } else {
                size_t total = 0;
                for (int k = 0; k < mr.count; k++) total += mr.items[k].bytes;
                mib = total / 1048576.0;
                printf("memory at step %d: no device (the C engine); it holds %.1f MiB of host memory\n", step + 1, mib);
            }
            logger_memory(&log, step + 1, mib);
        }
        if (s->rank == 0) run_dir_check();  // before the log is written there
        logger_step(&log, step + 1, r.loss, r.grad_norm, lr, ms, tok_s, r.loss_scale, r.applied ? NULL : reason);
        if (!isfinite(r.loss)) fatal("loss is %s at step %d: training diverged", isnan(r.loss) ? "nan" : "inf", step + 1);
        if (!r.applied && !outlier && !e->loss_scaling)
            fatal("gradient norm is %f at step %d: training diverged (the update was not applied)", r.grad_norm, step + 1);
        if (!r.applied && !outlier) {
            skipped_in_a_row++;
            skipped_at_min_scale = r.loss_scale <= LOSS_SCALE_MIN ? skipped_at_min_scale + 1 : 0;
            if (skipped_at_min_scale >= SKIPS_AT_MIN_SCALE)
                fatal("FP16 loss scaling: %d steps in a row were skipped for non-finite gradients (steps %d-%d), the last %d "
                      "at the minimum loss scale %g: no scale makes these gradients finite, so nothing can be learned. "
                      "Likely cause: a NaN or Inf in the weights (a damaged model or checkpoint), or a diverged model (a "
                      "lower -l, or -G to clip)", skipped_in_a_row, step + 2 - skipped_in_a_row, step + 1,
                      skipped_at_min_scale, LOSS_SCALE_MIN);
        } else if (r.applied) {
            skipped_in_a_row = skipped_at_min_scale = 0;
        }
        if (finite) {
            stats_add(&st.loss_mean, &st.loss_var, r.loss, st.stats_count);
            stats_add(&st.norm_mean, &st.norm_var, r.grad_norm, st.stats_count);
            st.stats_count++;
        }
    }
    // Its last checkpoint (with -n) and log are written: a later -y 1 finds the run complete.
    if (reached_last && status == 0 && o->output_dir[0] && s->rank == 0) run_dir_complete_write(s, s->max_steps);
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
    if (o->hellaswag) hellaswag_free(hs);
    dataloader_free(&s->train);
    if (s->have_val) dataloader_free(&s->val);
    e->destroy(e);
    fflush(stdout);
    ranks_finalize();
    return status;
}
