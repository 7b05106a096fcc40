// train_setup.h: what train_setup makes of the command line, the model, the data and the output dir:
// the TrainSetup the driver (train_loop.c) runs from and the output dir's code (run_dir.c) reads and
// fills (the resume's choice, the run record). A header of its own so that both include it and
// neither includes the other.
#ifndef COMMON_TRAIN_SETUP_H
#define COMMON_TRAIN_SETUP_H

#include <stdint.h>

#include "checkpoint.h"
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

// The samples of T+1 tokens one step reads over all ranks (B*ranks a micro-step, times the
// micro-steps): every split of it reads the same ones (dataloader.h). With -pp the ranks are the
// data-parallel ones: every stage of a replica reads the same samples.
static inline int64_t train_step_samples(const TrainSetup* s) { return (int64_t)s->accum * s->opts.B * s->dp_ranks; }

#ifdef __cplusplus
}
#endif

#endif  // COMMON_TRAIN_SETUP_H
