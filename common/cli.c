// cli.c: the flag table, its parser and the usage text (see cli.h).
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef enum { FLAG_INT, FLAG_LONG, FLAG_FLOAT, FLAG_STRING, FLAG_SWITCH } FlagType;
// Or'ed into a row's type: the flag changes the run's trajectory, so checkpoints record its value
// and a resume must give the same (cli_record, cli_record_check).
#define RECORDED 0x100
// Or'ed into a row's type: the flag changes no byte of a checkpoint (where and when files are
// written, evaluation, printing, choices that are bit-identical by design, paths whose contents
// the driver fingerprints itself), so the run id leaves it out (cli_record_all).
#define NO_BYTES 0x200
// PER_RANK: a flag each rank is given its own value of (-pr): left out of every record the ranks compare.
#define PER_RANK 0x400
// ADOPTED, with RECORDED: a resume that does not give the flag takes the checkpoint's value (its
// default changed to llm.c's: a run started under the old one must still resume without the flag);
// given, it must equal the record's, as for any recorded flag (cli_record_adopt). A recorded flag
// the built-in run's preset filled is adopted alike: a run on the built-in corpus with arguments
// had llm.c's defaults before the preset filled them, and still resumes with the same command.
#define ADOPTED 0x800
#define FLAG_TYPE(f) ((FlagType)((f)->type & 0xff))

typedef struct {
    const char* short_name;
    const char* long_name;
    int type;  // a FlagType, maybe | RECORDED
    size_t offset;
    const char* def;
    const char* help;
} Flag;

#define OPT(field) offsetof(TrainOptions, field)

static const Flag FLAGS[] = {
    {"-i", "--train", FLAG_STRING | NO_BYTES, OPT(train_data), "", "train data: glob of token shards (\"\" = the built-in corpus)"},
    {"-j", "--val", FLAG_STRING | NO_BYTES, OPT(val_data), "", "val data: glob of token shards (\"\" = none, or the built-in corpus's)"},
    {"-e", "--model", FLAG_STRING | NO_BYTES, OPT(model), "d2", "model: a descriptor (d1..d6, d12, d24, d36, d48, d60, d72, d84, gpt2:dN, gpt3:cN as llm.c's) or a model file"},
    // No output dir unless -o names one, as in llm.c (the built-in run's preset keeps out/).
    {"-o", "--output", FLAG_STRING | NO_BYTES, OPT(output_dir), "", "output dir for log.jsonl, main.log and checkpoints (\"\" = none, llm.c's default: nothing is written)"},
    {"-b", "--batch", FLAG_INT, OPT(B), "4", "micro-batch size B (sequences per forward, per rank)"},
    {"-t", "--seq", FLAG_INT | RECORDED, OPT(T), "1024", "sequence length T (at most the model's max: 1024 for GPT-2 descriptors, 2048 for gpt3:cN)"},
    {"-d", "--total-batch", FLAG_LONG | RECORDED, OPT(total_batch), "-1", "tokens per optimizer step, a multiple of B*T*ranks (-1 = B*T*ranks: one micro-step, with -pp P micro-steps)"},
    {"-x", "--steps", FLAG_INT | RECORDED, OPT(max_steps), "-1", "optimizer steps (-1 = one epoch of the train data)"},
    // llm.c's defaults: 3e-4, no warmup, no decay (the built-in run's preset: 2e-3 over 50 steps to 0.1).
    {"-l", "--lr", FLAG_FLOAT | RECORDED, OPT(lr), "3e-4", "peak learning rate"},
    {"-u", "--warmup", FLAG_INT | RECORDED, OPT(warmup), "0", "learning-rate warmup steps"},
    {"-q", "--final-lr-frac", FLAG_FLOAT | RECORDED, OPT(final_lr_frac), "1.0", "the learning rate at the last step, as a fraction of the peak (1 = no decay)"},
    // llm.c's -k and its four schedules (schedule.h); recorded: old checkpoints have none, and ran cosine.
    {"-k", "--lr-scheduler", FLAG_STRING | RECORDED, OPT(lr_scheduler), "cosine", "learning-rate schedule after the warmup: cosine, linear, constant or wsd (llm.c's -k)"},
    {"-c", "--weight-decay", FLAG_FLOAT | RECORDED, OPT(weight_decay), "0.0", "AdamW weight decay (2-D weights only)"},
    {"-G", "--grad-clip", FLAG_FLOAT | RECORDED, OPT(grad_clip), "1.0", "clip the global gradient norm to this (0 = off)"},
    {"-B1", "--beta1", FLAG_FLOAT | RECORDED, OPT(beta1), "0.9", "AdamW beta1"},
    {"-B2", "--beta2", FLAG_FLOAT | RECORDED, OPT(beta2), "0.95", "AdamW beta2"},
    {"-E", "--adam-eps", FLAG_FLOAT | RECORDED, OPT(eps), "1e-8", "AdamW epsilon"},
    {"-v", "--val-every", FLAG_INT | NO_BYTES, OPT(val_every), "20", "evaluate val loss every N steps (0 = never)"},
    {"-m", "--val-steps", FLAG_INT | NO_BYTES, OPT(val_steps), "20", "batches per val evaluation (-1 = the whole val set)"},
    {"-s", "--sample-every", FLAG_INT, OPT(sample_every), "20", "print a sample every N steps (0 = never)"},
    {"-g", "--gen-tokens", FLAG_INT, OPT(gen_tokens), "64", "tokens per sample"},
    {"-T", "--temperature", FLAG_FLOAT, OPT(temperature), "1.0", "sampling temperature (0 = greedy)"},
    {NULL, "--top-k", FLAG_INT, OPT(top_k), "0", "sample from the k most likely tokens (0 = all; llm.c's -k is the schedule)"},
    {"-h", "--hellaswag", FLAG_INT | NO_BYTES, OPT(hellaswag), "0", "1 = evaluate HellaSwag accuracy with each val loss (llm.c's -h; help is --help)"},
    {NULL, "--hellaswag-file", FLAG_STRING | NO_BYTES, OPT(hellaswag_file), "data/cache/hellaswag/hellaswag_val.bin", "with -h 1: the eval file in llm.c's format (data/hellaswag.sh makes it); not given: this one, else llm.c's dev/data/hellaswag/hellaswag_val.bin, else a warning and no HellaSwag, as llm.c"},
    {"-n", "--checkpoint-every", FLAG_INT | NO_BYTES, OPT(checkpoint_every), "0", "write a checkpoint (and its DONE_STEP file) every N steps and at the end (0 = never)"},
    {"-nk", "--checkpoints-keep", FLAG_INT | NO_BYTES, OPT(checkpoints_keep), "0", "keep the newest N checkpoints, deleting older ones (0 = keep all)"},
    {"-nm", "--checkpoints-major", FLAG_INT | NO_BYTES, OPT(major_checkpoint_every), "0", "with -nk: checkpoints at multiples of N steps are never deleted (0 = none)"},
    {"-y", "--resume", FLAG_INT | NO_BYTES, OPT(resume), "0", "1 = resume from the newest checkpoint in the output dir, or start afresh when it has none"},
    {"-S", "--seed", FLAG_LONG | RECORDED, OPT(seed), "1337", "seed for shuffling, sampling and the initialization of d1..d5"},
    // llm.c initialises its descriptor models with PyTorch's generator seeded 42 (gpt2_init_params_llmc).
    {NULL, "--init-seed", FLAG_LONG | RECORDED, OPT(init_seed), "42", "seed of an llm.c descriptor's initialization (d6 and up, gpt2:dN, gpt3:cN; llm.c's: 42)"},
    // On by default, as llm.c's loader shuffles; a resume without -sf keeps the checkpoint's value.
    {"-sf", "--shuffle", FLAG_INT | RECORDED | ADOPTED, OPT(shuffle), "1", "1 = shuffle the shards and each shard's samples of T+1 tokens, per epoch (seeded by -S; the same order on any number of ranks; llm.c's loader always shuffles), 0 = in order; a resume without -sf keeps the checkpoint's"},
    {"-z", "--zero", FLAG_INT, OPT(zero_stage), "0", "ZeRO stage over MPI ranks: 0 data parallel, 1 shard the optimizer state, 2 also the gradients, 3 also the parameters (gathered layer by layer)"},
    {"-a", "--overfit", FLAG_INT | RECORDED, OPT(overfit), "0", "1 = train on the first batch only (debugging)"},
    {"-lg", "--log-memory-every", FLAG_INT | NO_BYTES, OPT(log_memory_every), "-1", "print and log the device memory in use every N steps (0 or -1 = never; llm.c's -lg)"},
    // llm.c's -f and its default: TF32 on sm_80+ in the FP32 GPU build. The tests that hold that build to
    // the C engine at fp32's precision give -f 0.
    {"-f", "--tf32", FLAG_INT | NO_BYTES, OPT(tf32), "1", "1 = TF32 matmuls in the FP32 GPU build on sm_80+ (llm.c's -f; 0 = plain fp32 products, the exact reference; no effect elsewhere)"},
    {"-w", "--master-weights", FLAG_INT | NO_BYTES, OPT(master_weights), "1", "1 = AdamW updates fp32 master weights (llm.c's -w; always so here: 0 is refused)"},
    // llm.c's multi-node flags. -pi mpi (llm.c's default) takes the ranks from MPI (mpirun, or srun
    // --mpi=pmix) and ignores the others, as llm.c does; -pi tcp|fs takes them from the launcher's
    // variables (mpirun's, Slurm's) or -pn/-pr/-pg, and the ranks meet at rank 0 (common/ranks.c).
    {"-pi", "--nccl-init", FLAG_STRING | NO_BYTES, OPT(nccl_init), "mpi", "how the ranks meet: mpi (ranks from mpirun or srun --mpi=pmix), tcp (at -ps) or fs (through -pf) (llm.c's -pi, -pm)"},
    {"-pn", "--num-processes", FLAG_INT | NO_BYTES, OPT(num_processes), "1", "with -pi tcp|fs: the number of processes, when no launcher (mpirun, Slurm) says (llm.c's -pn)"},
    {"-pr", "--process-rank", FLAG_INT | NO_BYTES | PER_RANK, OPT(process_rank), "0", "with -pi tcp|fs: this process's rank, 0 to -pn - 1, when no launcher says (llm.c's -pr)"},
    {"-pg", "--gpus-per-node", FLAG_INT | NO_BYTES, OPT(gpus_per_node), "8", "with -pi tcp|fs: GPUs per node; a rank binds GPU rank % -pg when no launcher says its local rank (llm.c's -pg)"},
    {"-pf", "--nccl-fs-path", FLAG_STRING | NO_BYTES, OPT(nccl_fs_path), "", "with -pi fs: a directory every rank sees; rank 0 writes its address there (llm.c's -pf)"},
    {"-ps", "--nccl-server", FLAG_STRING | NO_BYTES, OPT(nccl_server), "", "with -pi tcp: rank 0's address, host or host:port (port 12345 by default; llm.c's -ps)"},
    {"-p", "--print-every", FLAG_INT | NO_BYTES, OPT(log_every), "1", "print a step line every N steps"},
    {"-K", "--tokenizer", FLAG_STRING | NO_BYTES, OPT(tokenizer), "data/vocab/gpt2_bpe.bin", "tokenizer file for decoding samples, ours or llm.c's gpt2_tokenizer.bin (byte-level if absent)"},
    {NULL, "--engine", FLAG_STRING | NO_BYTES, OPT(engine), "auto", "auto (the GPU if one can be used, else the C engine), gpu or cpu"},
    // llm.c's default, 1. The C engine keeps every activation: there the default means nothing, a given -r 1..3 is refused.
    {"-r", "--recompute", FLAG_INT | NO_BYTES, OPT(recompute), "1", "GPU engine's activation recompute: 0 keep all, 1 GELU (llm.c's default), 2 also LayerNorms, 3 whole blocks (the C engine keeps all)"},
    {NULL, "--recompute-every", FLAG_INT | NO_BYTES, OPT(recompute_every), "0", "with -r 3: keep the input of every K-th block (0 = the K that keeps the fewest bytes)"},
    // llm.c's -1 and its usage text's rule (2 on sm_90 and newer, 0 before): the kernel report predicts
    // the fusion faster (docs/kernel_report_fp16.md); llm.c's main() has kept the rule as a comment.
    {"-ge", "--gelu-fusion", FLAG_INT, OPT(gelu_fusion), "-1", "GPU: GELU in the matmul epilogue: 0 none, 1 forward, 2 forward and backward, -1 by the GPU (2 on sm_90 and newer, 0 before)"},
    {NULL, "--loss-scale", FLAG_FLOAT | RECORDED, OPT(loss_scale), "65536", "FP16: initial dynamic loss scale (at least 1, its floor)"},
    {NULL, "--loss-scale-interval", FLAG_INT | RECORDED, OPT(loss_scale_interval), "2000", "FP16: finite steps before the loss scale doubles"},
    {NULL, "--skip-outliers", FLAG_FLOAT | RECORDED, OPT(skip_outliers), "0", "skip an update whose loss or grad norm is more than Z standard deviations above its running mean (0 = off)"},
    {"-sl", "--skip-loss-z", FLAG_FLOAT | RECORDED, OPT(skip_loss_z), "0", "skip an update whose loss is more than Z standard deviations above its running mean (0 = --skip-outliers' Z; llm.c's -sl)"},
    {"-sg", "--skip-grad-z", FLAG_FLOAT | RECORDED, OPT(skip_grad_z), "0", "skip an update whose grad norm is more than Z standard deviations above its running mean (0 = --skip-outliers' Z; llm.c's -sg)"},
    {NULL, "--overwrite", FLAG_SWITCH | NO_BYTES, OPT(overwrite), "0", "start afresh in an output dir that holds another run's checkpoints (they are deleted)"},
    {NULL, "--precision", FLAG_STRING, OPT(precision), "", "the GPU engine's precision: fp16, bf16 or fp32 (\"\" = this build's; --plan plans any)"},
    {NULL, "--offload", FLAG_STRING, OPT(offload), "none", "optimizer (alone: --offload): fp32 master weights, m and v in pinned host memory, AdamW on CPU threads; grads: the gradients too; none"},
    {NULL, "--overlap", FLAG_INT | NO_BYTES, OPT(overlap), "1", "ZeRO stages 0, 1 over ranks: 1 reduce each layer's gradients as the step's last backward finishes it (stage 1: and gather the updated parameters piece by piece beside the next forward), 0 all of them after backward and one all-gather after the update (the same bits)"},
    {NULL, "--max-memory", FLAG_STRING | NO_BYTES, OPT(max_memory), "", "keep the GPU engine within SIZE of device memory per rank (e.g. 48GiB): refuse a plan over it, stop if the device's use passes it"},
    {NULL, "--plan", FLAG_SWITCH | NO_BYTES, OPT(plan), "0", "print the GPU engine's memory and communication plan for these flags (any machine, no GPU needed) and exit"},
    {NULL, "--json", FLAG_SWITCH | NO_BYTES, OPT(json), "0", "with --plan: as one JSON object"},
    {NULL, "--memory-budget", FLAG_STRING | NO_BYTES, OPT(memory_budget), "", "with --plan: SIZE per rank (e.g. 48GiB): does it fit, the largest -b that does, the cheapest change that makes it fit"},
    {NULL, "--ranks", FLAG_INT | NO_BYTES, OPT(plan_ranks), "0", "with --plan: the number of ranks to plan for (0 = the ranks running)"},
    // Pipeline parallelism: the model split by layers into stages on consecutive groups of ranks.
    {"-pp", "--pipeline-stages", FLAG_INT, OPT(pp_stages), "1", "pipeline stages P: each of P groups of ranks holds a contiguous range of layers (the first also the embeddings, the last the final LayerNorm and classifier), 1F1B over the step's micro-steps; ranks = P x data-parallel ranks"},
    {NULL, "--pp-split", FLAG_STRING, OPT(pp_split), "", "with -pp: layers per stage, e.g. 12,12,12,12 (\"\" = the split that minimises the largest stage's planned memory)"},
    {NULL, "--host-adamw", FLAG_FLOAT | NO_BYTES, OPT(host_adamw), "0", "with --plan --offload: the host's AdamW rate in G parameters/s, as build/dev/bench_adamw_host_fp16 prints it (0 = 1.83, measured on this project's 2-core machine)"},
    {NULL, "--gpu", FLAG_STRING | NO_BYTES, OPT(gpu), "", "with --plan: the GPU whose step time to predict by the kernel report's model: H100, H200, A100, A6000, L40S, 4090 or 3090 (\"\" = this machine's GPU when the model has it, else the H100 SXM)"},
    {NULL, "--link", FLAG_STRING | NO_BYTES, OPT(link), "nvlink", "the ranks' link for the planned communication time: nvlink (450 GB/s), pcie (25), ib (50) or GB/s per direction, e.g. 100 (assumed figures)"},
};
#define NUM_FLAGS ((int)(sizeof(FLAGS) / sizeof(FLAGS[0])))
// TrainOptions.given has a bit per row.
_Static_assert(sizeof(FLAGS) / sizeof(FLAGS[0]) <= 8 * sizeof(((TrainOptions*)0)->given),
               "more flags than TrainOptions.given has bits");
static int given_bit(const TrainOptions* opts, int i) { return (int)(opts->given[i / 64] >> (i % 64) & 1); }
static int preset_bit(const TrainOptions* opts, int i) { return (int)(opts->preset[i / 64] >> (i % 64) & 1); }

typedef struct {
    const char* long_name;
    const char* value;
} FlagValue;

// The built-in run (the built-in corpus and a fresh model: no -i, -j or model file; the trainer
// decides, cli_preset_apply fills): its own documented preset, a small model learning the built-in
// corpus in minutes on a CPU, with its logs in out/, for every flag of it not given. `./train_gpt2`
// alone is this run, and `./train_gpt2 -x 3` the same run cut short. llm.c's defaults in the table
// above are for llm.c's data and models: their B*T+1 = 4097 tokens a batch are more than the built-in
// corpus's val split holds once BPE-encoded (3693), and 3e-4 without warm-up or decay is GPT-2
// 124M's schedule, not d2's.
static const FlagValue BUILT_IN_RUN_PRESET[] = {
    {"--output", "out"}, {"--seq", "64"}, {"--lr", "2e-3"}, {"--warmup", "50"}, {"--final-lr-frac", "0.1"},
    {"--val-every", "100"}, {"--sample-every", "100"}, {"--shuffle", "0"}, {"--recompute", "0"},
};

// What a checkpoint whose record has no line for a recorded flag ran with: the default of its
// time, not today's (these defaults became llm.c's after such checkpoints were written).
static const FlagValue RECORD_ABSENT[] = {
    {"--seq", "64"}, {"--lr", "2e-3"}, {"--warmup", "50"}, {"--final-lr-frac", "0.1"}, {"--shuffle", "0"},
};

// "-l (--lr)", or "--engine" for a flag with a long name only: how errors name a flag.
static const char* flag_names(const Flag* f) {
    static char buf[64];
    if (f->short_name) snprintf(buf, sizeof(buf), "%s (%s)", f->short_name, f->long_name);
    else snprintf(buf, sizeof(buf), "%s", f->long_name);
    return buf;
}

static void flag_set(TrainOptions* opts, const Flag* f, const char* value) {
    char* base = (char*)opts + f->offset;
    char* end = NULL;
    errno = 0;
    switch (FLAG_TYPE(f)) {
        case FLAG_INT: {
            long x = strtol(value, &end, 10);
            if (*value == '\0' || *end != '\0' || errno || x < INT_MIN || x > INT_MAX)
                fatal("flag %s expects an integer, got '%s'", flag_names(f), value);
            *(int*)base = (int)x;
            break;
        }
        case FLAG_LONG: {
            long x = strtol(value, &end, 10);
            if (*value == '\0' || *end != '\0' || errno)
                fatal("flag %s expects an integer, got '%s'", flag_names(f), value);
            *(long*)base = x;
            break;
        }
        case FLAG_FLOAT: {
            float x = strtof(value, &end);
            if (*value == '\0' || *end != '\0' || errno || !isfinite(x))
                fatal("flag %s expects a number, got '%s'", flag_names(f), value);
            *(float*)base = x;
            break;
        }
        case FLAG_STRING:
            *(const char**)base = value;
            break;
        case FLAG_SWITCH:
            *(int*)base = strcmp(value, "1") == 0;
            break;
    }
}

// The value as a run record and its checks write it: floats with as many digits as it takes to
// read back exactly, so two different values never print alike.
static void flag_format(const Flag* f, const TrainOptions* opts, char* out, size_t cap) {
    const char* base = (const char*)opts + f->offset;
    switch (FLAG_TYPE(f)) {
        case FLAG_INT: case FLAG_SWITCH: snprintf(out, cap, "%d", *(const int*)base); break;
        case FLAG_LONG: snprintf(out, cap, "%ld", *(const long*)base); break;
        case FLAG_FLOAT: {
            // The shortest form that reads back as the same float: "0.001", not "0.00100000005".
            float x = *(const float*)base;
            for (int digits = 6; digits <= 9; digits++) {
                snprintf(out, cap, "%.*g", digits, x);
                if (strtof(out, NULL) == x) break;
            }
            break;
        }
        case FLAG_STRING: snprintf(out, cap, "%s", *(const char* const*)base); break;
    }
}

size_t cli_record(const TrainOptions* opts, char* out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < NUM_FLAGS; i++) {
        if (!(FLAGS[i].type & RECORDED)) continue;
        char v[64];
        flag_format(&FLAGS[i], opts, v, sizeof(v));
        int n = snprintf(out + used, cap - used, "%s %s\n", FLAGS[i].long_name + 2, v);
        if (n < 0 || (size_t)n >= cap - used) fatal("run record: more than %zu bytes", cap);
        used += (size_t)n;
    }
    return used;
}

// The value of "name value" in a record, into out; 0 if the record has no such line.
int cli_record_value(const char* record, const char* name, char* out, size_t cap) {
    size_t len = strlen(name);
    for (const char* line = record; *line;) {
        const char* end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n > len && strncmp(line, name, len) == 0 && line[len] == ' ') {
            snprintf(out, cap, "%.*s", (int)(n - len - 1), line + len + 1);
            return 1;
        }
        line += n + (end ? 1 : 0);
    }
    return 0;
}

// Whether the recorded text is this flag's value in opts: numbers compared as numbers (a float
// bit for bit), so how a value was printed does not matter.
static int flag_value_is(const Flag* f, const TrainOptions* opts, const char* text) {
    const char* base = (const char*)opts + f->offset;
    char* end;
    errno = 0;
    switch (FLAG_TYPE(f)) {
        case FLAG_INT: case FLAG_SWITCH: {
            long x = strtol(text, &end, 10);
            return *text && !*end && !errno && x == *(const int*)base;
        }
        case FLAG_LONG: {
            long x = strtol(text, &end, 10);
            return *text && !*end && !errno && x == *(const long*)base;
        }
        case FLAG_FLOAT: {
            float x = strtof(text, &end);
            return *text && !*end && x == *(const float*)base;
        }
        case FLAG_STRING: return strcmp(text, *(const char* const*)base) == 0;
    }
    return 0;
}

static const Flag* flag_by_long_name(const char* name) {
    for (int i = 0; i < NUM_FLAGS; i++)
        if (strcmp(FLAGS[i].long_name, name) == 0) return &FLAGS[i];
    return NULL;
}

int cli_given(const TrainOptions* opts, const char* long_name) {
    const Flag* f = flag_by_long_name(long_name);
    if (!f) fatal("cli_given: no flag %s", long_name);
    return given_bit(opts, (int)(f - FLAGS));
}

int cli_preset_filled(const TrainOptions* opts, const char* long_name) {
    const Flag* f = flag_by_long_name(long_name);
    if (!f) fatal("cli_preset_filled: no flag %s", long_name);
    int bit = (int)(f - FLAGS);
    return (int)((opts->preset[bit / 64] >> (bit % 64)) & 1);
}

char* cli_record_all(const TrainOptions* opts, int for_run_id) {
    size_t cap = 1024, used = 0;
    char* out = (char*)malloc_check(cap, "flag record");
    out[0] = '\0';
    for (int i = 0; i < NUM_FLAGS; i++) {
        const Flag* f = &FLAGS[i];
        if ((for_run_id && (f->type & NO_BYTES)) || (f->type & PER_RANK)) continue;
        char v[64];
        const char* text = v;
        if (FLAG_TYPE(f) == FLAG_STRING) text = *(const char* const*)((const char*)opts + f->offset);
        else flag_format(f, opts, v, sizeof(v));
        // "name value\n", the value's control characters and backslashes escaped (\xHH): a line a value.
        size_t need = strlen(f->long_name) + 4 * strlen(text) + 4;
        if (used + need >= cap) {
            cap = 2 * (used + need);
            out = (char*)realloc(out, cap);
            if (!out) fatal("out of host memory for the flag record");
        }
        used += (size_t)sprintf(out + used, "%s ", f->long_name + 2);
        for (const unsigned char* c = (const unsigned char*)text; *c; c++)
            used += (size_t)(*c < 0x20 || *c == '\\' || *c == 0x7f ? sprintf(out + used, "\\x%02x", *c)
                                                                    : sprintf(out + used, "%c", *c));
        out[used++] = '\n';
        out[used] = '\0';
    }
    return out;
}

int cli_record_diff(const char* mine, const char* theirs, char* what, size_t what_cap, char* mine_value,
                    char* theirs_value, size_t value_cap) {
    for (const char* line = mine; *line;) {
        const char* end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char* space = memchr(line, ' ', n);
        size_t key = space ? (size_t)(space - line) : n;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)key, line);
        // The other record's value for this name ("(none)" when it has no such line).
        size_t other_cap = strlen(theirs) + 8;
        char* other = (char*)malloc_check(other_cap, "flag record");
        if (!cli_record_value(theirs, name, other, other_cap)) snprintf(other, other_cap, "(none)");
        const char* value = space ? space + 1 : line + n;
        size_t vlen = (size_t)(line + n - value);
        int differs = strlen(other) != vlen || strncmp(other, value, vlen) != 0;
        if (differs) {
            char dashed[132];
            snprintf(dashed, sizeof(dashed), "--%s", name);
            const Flag* f = flag_by_long_name(dashed);
            if (f) snprintf(what, what_cap, "flag %s", flag_names(f));
            else snprintf(what, what_cap, "%s", name);
            snprintf(mine_value, value_cap, "%.*s", (int)vlen, value);
            snprintf(theirs_value, value_cap, "%s", other);
        }
        free(other);
        if (differs) return 1;
        line += n + (end ? 1 : 0);
    }
    // Every line of mine matches: theirs may still have lines mine lacks.
    if (strlen(mine) != strlen(theirs)) {
        snprintf(what, what_cap, "the run record");
        snprintf(mine_value, value_cap, "%zu bytes", strlen(mine));
        snprintf(theirs_value, value_cap, "%zu bytes", strlen(theirs));
        return 1;
    }
    return 0;
}

// The record's value for f, or, with no line for it (a flag newer than the checkpoint), what that
// run did: the default of its time.
static void record_value_or_absent(const Flag* f, const char* record, char* out, size_t cap) {
    if (cli_record_value(record, f->long_name + 2, out, cap)) return;
    const char* def = f->def;
    for (size_t i = 0; i < sizeof(RECORD_ABSENT) / sizeof(RECORD_ABSENT[0]); i++)
        if (strcmp(RECORD_ABSENT[i].long_name, f->long_name) == 0) def = RECORD_ABSENT[i].value;
    TrainOptions d;
    memset(&d, 0, sizeof(d));
    flag_set(&d, f, def);
    flag_format(f, &d, out, cap);
}

void cli_record_adopt(TrainOptions* opts, const char* record) {
    for (int i = 0; i < NUM_FLAGS; i++) {
        const Flag* f = &FLAGS[i];
        int preset = preset_bit(opts, i);
        if (!(f->type & RECORDED) || !((f->type & ADOPTED) || preset) || given_bit(opts, i)) continue;
        char theirs[256];
        record_value_or_absent(f, record, theirs, sizeof(theirs));
        if (flag_value_is(f, opts, theirs)) continue;
        // A string flag would keep a pointer into theirs: none is ADOPTED or in the preset and recorded.
        if (FLAG_TYPE(f) == FLAG_STRING) fatal("cli_record_adopt: string flag %s", f->long_name);
        char mine[64];
        flag_format(f, opts, mine, sizeof(mine));
        flag_set(opts, f, theirs);
        printf("resume: %s %s, as the checkpoint's run had it (%s is %s; give the flag to check it)\n",
               f->short_name ? f->short_name : f->long_name, theirs, preset ? "the built-in run's preset" : "the default", mine);
    }
}

// " (one epoch of the train data)" for -x's -1: what a special value means, from the flag's help text
// ("(-1 = one epoch of the train data)"), so a message that prints the value says it too; "" otherwise.
static void flag_value_meaning(const Flag* f, const char* value, char* out, size_t cap) {
    char key[272];
    snprintf(key, sizeof(key), "(%s = ", value);
    const char* at = strstr(f->help, key);
    const char* end = at ? strchr(at, ')') : NULL;
    if (!at || !end) {
        out[0] = '\0';
        return;
    }
    at += strlen(key);
    snprintf(out, cap, " (%.*s)", (int)(end - at), at);
}

int cli_record_check(const TrainOptions* opts, const char* record, const char* except_long_name, char* why, size_t cap) {
    for (int i = 0; i < NUM_FLAGS; i++) {
        const Flag* f = &FLAGS[i];
        if (!(f->type & RECORDED)) continue;
        if (except_long_name && strcmp(f->long_name, except_long_name) == 0) continue;
        char mine[64], theirs[256];
        flag_format(f, opts, mine, sizeof(mine));
        record_value_or_absent(f, record, theirs, sizeof(theirs));
        if (!flag_value_is(f, opts, theirs)) {
            char mine_means[128], theirs_means[128];
            flag_value_meaning(f, mine, mine_means, sizeof(mine_means));
            flag_value_meaning(f, theirs, theirs_means, sizeof(theirs_means));
            snprintf(why, cap, "flag %s is %s%s in this run but was %s%s in the run that wrote the checkpoint",
                     flag_names(f), mine, mine_means, theirs, theirs_means);
            return 0;
        }
    }
    return 1;
}

void cli_usage(const char* prog) {
    printf("usage: %s [flags]\n\nTrains GPT-2. With no flags at all: a small model (d2) for one epoch of the built-in corpus (a few\n"
           "minutes on a laptop CPU), with the built-in run's preset:", prog);
    for (size_t i = 0; i < sizeof(BUILT_IN_RUN_PRESET) / sizeof(BUILT_IN_RUN_PRESET[0]); i++) {
        const Flag* f = flag_by_long_name(BUILT_IN_RUN_PRESET[i].long_name);
        printf(" %s %s", f->short_name ? f->short_name : f->long_name, BUILT_IN_RUN_PRESET[i].value);
    }
    printf(".\nAny run on the built-in corpus with a fresh model (no -i, -j or model file for -e; not --plan) takes the\n"
           "preset for the flags it does not give (./train_gpt2 -x 3: that run, 3 steps). Otherwise the defaults are\n"
           "llm.c's (its train_gpt2.cu's) where llm.c has the flag, except -e, -i and -j (no llm.c files here by\n"
           "default).\n\nflags:\n");
    for (int i = 0; i < NUM_FLAGS; i++) {
        const Flag* f = &FLAGS[i];
        char names[48];
        if (f->short_name) snprintf(names, sizeof(names), "%s, %s", f->short_name, f->long_name);
        else snprintf(names, sizeof(names), "    %s", f->long_name);
        if (FLAG_TYPE(f) == FLAG_SWITCH) printf("  %-26s %s (a switch, no value)\n", names, f->help);
        else printf("  %-26s %s (default: %s)\n", names, f->help, f->def[0] ? f->def : "\"\"");
    }
    printf("  %-26s print this help\n", "    --help");
}

void cli_parse(TrainOptions* opts, int argc, char** argv) {
    memset(opts, 0, sizeof(*opts));
    for (int i = 0; i < NUM_FLAGS; i++) flag_set(opts, &FLAGS[i], FLAGS[i].def);
    for (int a = 1; a < argc; a++) {
        const char* arg = argv[a];
        if (strcmp(arg, "--help") == 0) {
            cli_usage(argv[0]);
            exit(0);
        }
        // -h is llm.c's HellaSwag flag (-h 1); it printed help here before, so a bare -h, or one
        // followed by another flag, is told where help went rather than read as a missing value.
        if (strcmp(arg, "-h") == 0 && (a + 1 >= argc || argv[a + 1][0] == '-'))
            fatal("flag -h (--hellaswag) is llm.c's HellaSwag eval and takes 0 or 1 (-h 1); for help use --help");
        // llm.c's usage text calls the NCCL init method -pm (its parser reads -pi): both work.
        if (strcmp(arg, "-pm") == 0) arg = "-pi";
        // A long flag may carry its value after '=' (--steps=3), as getopt_long and argparse take it.
        char name[64];
        const char* value = NULL;
        const char* eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        if (eq && (size_t)(eq - arg) < sizeof(name)) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
            arg = name;
        }
        const Flag* f = NULL;
        for (int i = 0; i < NUM_FLAGS && !f; i++)
            if ((FLAGS[i].short_name && strcmp(arg, FLAGS[i].short_name) == 0) || strcmp(arg, FLAGS[i].long_name) == 0)
                f = &FLAGS[i];
        if (!f) fatal("unknown flag '%s' (see %s --help)", arg, argv[0]);
        opts->given[(f - FLAGS) / 64] |= 1ull << ((f - FLAGS) % 64);
        if (value) {
            if (FLAG_TYPE(f) == FLAG_SWITCH) fatal("flag %s is a switch and takes no value, got '%s'", flag_names(f), argv[a]);
            flag_set(opts, f, value);
            continue;
        }
        if (FLAG_TYPE(f) == FLAG_SWITCH) {
            flag_set(opts, f, "1");
            continue;
        }
        // --offload alone (as DeepSpeed users type it) means the optimizer.
        if (strcmp(f->long_name, "--offload") == 0 && (a + 1 >= argc || argv[a + 1][0] == '-')) {
            flag_set(opts, f, "optimizer");
            continue;
        }
        if (a + 1 >= argc) fatal("flag %s needs a value", flag_names(f));
        flag_set(opts, f, argv[++a]);
    }
}

int cli_preset_apply(TrainOptions* opts, char* out, size_t cap) {
    int filled = 0;
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(BUILT_IN_RUN_PRESET) / sizeof(BUILT_IN_RUN_PRESET[0]); i++) {
        const Flag* f = flag_by_long_name(BUILT_IN_RUN_PRESET[i].long_name);
        int bit = (int)(f - FLAGS);
        if (given_bit(opts, bit)) continue;
        flag_set(opts, f, BUILT_IN_RUN_PRESET[i].value);
        opts->preset[bit / 64] |= 1ull << (bit % 64);
        int n = snprintf(out + used, cap - used, "%s%s %s", filled ? " " : "", f->short_name ? f->short_name : f->long_name,
                         BUILT_IN_RUN_PRESET[i].value);
        if (n > 0 && (size_t)n < cap - used) used += (size_t)n;
        filled++;
    }
    return filled;
}

void cli_print(const TrainOptions* opts) {
    for (int i = 0; i < NUM_FLAGS; i++) {
        const Flag* f = &FLAGS[i];
        const char* base = (const char*)opts + f->offset;
        printf("| %-18s | ", f->long_name + 2);
        switch (FLAG_TYPE(f)) {
            case FLAG_INT: case FLAG_SWITCH: printf("%d", *(const int*)base); break;
            case FLAG_LONG: printf("%ld", *(const long*)base); break;
            case FLAG_FLOAT: printf("%g", *(const float*)base); break;
            case FLAG_STRING: printf("%s", *(const char* const*)base); break;
        }
        printf("\n");
    }
}
