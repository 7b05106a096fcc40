// cli.h: the trainer's flags. One table (cli.c) gives each flag its short and long name,
// type, default and help line; the parser, the defaults and `--help` all read that table, so the
// usage text cannot drift from what is parsed.
#ifndef COMMON_CLI_H
#define COMMON_CLI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char* train_data;    // glob of train shards; "" = the built-in corpus
    const char* val_data;      // glob of val shards; "" = none (or the built-in corpus's)
    const char* model;         // descriptor (d12...) or model file
    const char* output_dir;    // logs and checkpoints; "" = write nothing
    const char* tokenizer;     // tokenizer file for decoding samples
    int B;                     // micro-batch size
    int T;                     // sequence length
    long total_batch;          // tokens per optimizer step over all ranks; -1 = B*T*ranks
    int max_steps;             // -1 = one epoch of the train data
    float lr;
    int warmup;
    float final_lr_frac;
    float weight_decay;
    float grad_clip;           // 0 = no clipping
    float beta1, beta2, eps;
    int val_every, val_steps;
    int sample_every, gen_tokens;
    float temperature;
    int top_k;
    const char* lr_scheduler;  // cosine | linear | constant | wsd (llm.c's -k)
    int hellaswag;             // 1 = HellaSwag accuracy with each val loss (llm.c's -h)
    const char* hellaswag_file;// llm.c's eval file format (hellaswag_val.bin)
    int checkpoint_every;
    int checkpoints_keep;      // keep the newest N checkpoints (0 = all; llm.c's -nk)
    int major_checkpoint_every;// checkpoints at multiples of N are never deleted (llm.c's -nm)
    int resume;
    long seed;                 // shuffling, sampling, and d1..d5's initialization
    long init_seed;            // an llm.c descriptor's initialization (llm.c's: 42)
    int shuffle;
    int zero_stage;            // ZeRO: 0 data parallel, 1 optimizer state sharded, 2 gradients too
    int overfit;               // train on the first batch over and over
    int log_every;             // print a step line every N steps (the log file gets every step)
    const char* engine;        // auto | gpu | cpu
    int gelu_fusion;           // GPU: 0 none, 1 forward, 2 forward and backward, -1 by the GPU (llm.c's -ge)
    int recompute;             // activation recompute level 0..3 (llm.c's -r, extended)
    int recompute_every;       // level 3: keep every K-th block's input (0 = the K that keeps the fewest bytes)
    float loss_scale;          // FP16: initial dynamic loss scale
    int loss_scale_interval;   // FP16: finite steps before the loss scale doubles
    float skip_outliers;       // Z: skip an update whose loss or grad norm is a z-score outlier; 0 = off
    float skip_loss_z;         // llm.c's -sl: the loss's Z alone (0 = skip_outliers')
    float skip_grad_z;         // llm.c's -sg: the grad norm's Z alone (0 = skip_outliers')
    int log_memory_every;      // llm.c's -lg: device memory in use every N steps (0 = never)
    int master_weights;        // llm.c's -w: 1 (fp32 master weights) is the only choice here
    int tf32;                  // llm.c's -f: TF32 matmuls in the FP32 GPU build on sm_80+ (default 1, as llm.c)
    const char* nccl_init;     // llm.c's -pi: mpi, tcp or fs (common/ranks.h)
    int num_processes, process_rank, gpus_per_node;  // llm.c's -pn -pr -pg (for tcp/fs; ignored under mpi)
    const char* nccl_fs_path;  // llm.c's -pf
    const char* nccl_server;   // llm.c's -ps
    int overwrite;             // a fresh run may replace another run's checkpoints in the output dir
    int plan;                  // print the GPU engine's memory plan for these flags and exit
    int json;                  // --plan as JSON
    const char* memory_budget; // --plan: device bytes per rank to fit ("" = none), e.g. 48GiB
    int plan_ranks;            // --plan: ranks to plan for (0 = the ranks running)
    const char* link;          // the ranks' link for the planned communication time (comm_plan.h)
    float host_adamw;          // --plan: the host's AdamW rate, G parameters/s (0 = PLAN_HOST_ADAMW_PER_S)
    const char* gpu;           // --plan: the GPU whose time to predict (time_model.h; "" = this one's, else PLAN_CARD)
    const char* precision;     // fp16 | bf16 | fp32; "" = the GPU build's
    const char* max_memory;    // the GPU engine's device bytes per rank at most ("" = no limit)
    const char* offload;       // none | optimizer | grads
    int overlap;               // ZeRO stages 0, 1: gradients reduced beside backward (1) or after it (0)
    int pp_stages;             // pipeline stages (-pp): ranks = stages x data-parallel ranks
    const char* pp_split;      // layers per stage, "12,12,12,12" ("" = the planner's split)
    unsigned long long given[2];   // a bit per flag given on the command line (cli_given)
    unsigned long long preset[2];  // a bit per flag the built-in run's preset filled (cli_preset_apply)
} TrainOptions;

// Fills opts from the table's defaults (llm.c's), then argv. Prints usage and exits 0 on --help;
// fatal, naming the flag, on an unknown flag, a missing value or a value of the wrong type.
void cli_parse(TrainOptions* opts, int argc, char** argv);
// The built-in run (the built-in corpus and a fresh model; the caller decides): every flag of its
// preset that the command line did not give takes the preset's value. Returns how many did, and
// writes them into out as flags ("-o out -t 64 ...") for the start-up line that says so.
int cli_preset_apply(TrainOptions* opts, char* out, size_t cap);
void cli_usage(const char* prog);
// Prints every option's value, one line each, for the start-up report.
void cli_print(const TrainOptions* opts);

// The run record of a checkpoint: "name value" lines for every flag the table marks as changing
// the run's trajectory (long name without dashes; floats with every digit). Returns its length.
size_t cli_record(const TrainOptions* opts, char* out, size_t cap);
// 0 with why naming the first recorded flag whose value differs from the record's (a flag the
// record lacks, newer than the checkpoint, must have its default), else 1. except_long_name: a flag
// left out of the comparison ("--steps"), or NULL.
int cli_record_check(const TrainOptions* opts, const char* record, const char* except_long_name, char* why,
                     size_t why_cap);
// A resume: each recorded flag whose default gives way to the record (-sf) or that the built-in
// run's preset filled, not given on the command line, takes the checkpoint's value (a record
// without its line: the default of that time), saying so.
void cli_record_adopt(TrainOptions* opts, const char* record);
// The value on the record's line for name, into out; 0 if there is none.
int cli_record_value(const char* record, const char* name, char* out, size_t cap);

// Whether the flag (by its long name, "--loss-scale") was given on the command line.
int cli_given(const TrainOptions* opts, const char* long_name);
// Whether the built-in run's preset filled the flag (cli_preset_apply).
int cli_preset_filled(const TrainOptions* opts, const char* long_name);
// Every flag's value, "name value" per line (control characters escaped), in a malloc'd string:
// what the ranks of a run compare before anything else. for_run_id: only the flags that can change
// a byte of a checkpoint (what the run id hashes).
char* cli_record_all(const TrainOptions* opts, int for_run_id);
// 1 when the records differ: *what names the first line of mine that theirs does not have alike
// ("flag -x (--steps)" for a flag, the line's name otherwise), with both values; 0 when equal.
int cli_record_diff(const char* mine, const char* theirs, char* what, size_t what_cap, char* mine_value,
                    char* theirs_value, size_t value_cap);

#ifdef __cplusplus
}
#endif
#endif
