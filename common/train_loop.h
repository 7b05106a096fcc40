// train_loop.h: the training driver every engine shares: flags, data, the step loop, validation,
// sampling, logging and checkpoints. An engine (engine.h) only does the arithmetic; main()
// chooses it between train_setup and train_run:
//
//   TrainSetup s;
//   train_setup(&s, argc, argv, PRECISION_FP16);  // the GPU engine's precision, for --plan
//   Engine* e = engine_select(s.opts.engine, gpu_create, cpu_create, &s.config, &s.engine_options);
//   return train_run(&s, e);
#ifndef COMMON_TRAIN_LOOP_H
#define COMMON_TRAIN_LOOP_H

#include "cli.h"
#include "corpus.h"
#include "dataloader.h"
#include "engine.h"
#include "hellaswag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    TrainOptions opts;
    GPT2Config config;
    int model_from_file;          // -e named a model file (else a descriptor: fresh weights)
    EngineOptions engine_options;
    int rank, num_ranks;
    int local_rank;               // the rank's place on its machine: the GPU it binds
    // -pp: the ranks are pp_stages pipeline stages x dp_ranks data-parallel ranks (common/pipeline.h);
    // the data is split over the dp_ranks replicas (this rank is in replica dp_rank), every stage of a
    // replica taking the same micro-batches. Without -pp: 1 stage, dp_ranks = num_ranks.
    int pp_stages, dp_ranks, dp_rank;
    long total_batch;             // tokens per optimizer step
    int accum;                    // micro-steps per optimizer step
    int max_steps;
    const char* train_pattern;
    const char* val_pattern;
    CorpusPaths corpus;           // the built-in corpus's paths, when no data was given
    DataLoader train, val;
    int have_val;
    HellaSwag hellaswag;          // -h 1: the eval file, read and checked at start-up
    long resume_step;             // -y 1: the checkpoint chosen (the newest intact one); -1 without -y
    long continue_from;           // -y 1 -x M on a run complete at step N < M: N (its last checkpoint's); else -1
    int resume_llmc;              // the chosen checkpoint is llm.c's (model_STEP.bin + state_STEP_00000.bin)
    int overwrite_pending;        // a fresh run found checkpoint files (--overwrite, or halves): deleted before it writes
    char record[RUN_RECORD_MAX];  // this run's record (flags and data) for its checkpoints
    uint64_t model_sum;           // -e FILE: a checksum of its contents (0 for a descriptor)
    char lock_text[256];          // what rank 0 wrote into OUT/train.lock (every rank reads it back)
} TrainSetup;

// Flags, the model's shape, the output dir (locked for this run), the data (every token checked),
// the checkpoint to resume from and the engine options; fatal (one line naming the flag or file)
// on anything wrong, before an engine is made. gpu_precision: the GPU build's (FP16 where there is
// none), what --plan plans and the engine options ask for unless --precision says otherwise. With
// --plan, prints the memory plan and exits.
void train_setup(TrainSetup* s, int argc, char** argv, Precision gpu_precision);
// The run: weights (fresh, from -e, or resumed), then the step loop. Destroys e; returns the
// exit status: 0, or 128 + the signal when a stop request (SIGINT, SIGTERM, SIGUSR1, SIGUSR2)
// ended it with a checkpoint (0 with several ranks: see stop_status in train_loop.c).
int train_run(TrainSetup* s, Engine* e);

#ifdef __cplusplus
}
#endif
#endif
