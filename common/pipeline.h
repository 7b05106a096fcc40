// pipeline.h: pipeline parallelism's geometry (-pp): which layers each rank's stage holds, how many
// micro-batches it keeps in flight, and the checks of a pipelined run's shape. The planner
// (memory_plan.c), the engine (train_gpt2_pipe.cuh) and the driver (train_loop.c) all read it here.
//
// ranks = P stages x D data-parallel ranks, stage-major: rank r is data-parallel rank r % D of stage
// r / D, so each stage's D ranks are consecutive and data-parallel replica d is the ranks d, D + d,
// ..., (P - 1) D + d. Stage s holds layers [first, first + n_s) (n_s from EngineOptions.pp_layers);
// stage 0 also the token and position embeddings, stage P - 1 the final LayerNorm and the classifier,
// which GPT-2 ties to the token embedding: the first and the last stage both hold wte. Under 1F1B
// (one forward, one backward; PipeDream-Flush) with m micro-batches stage s runs P - s - 1 forwards
// before its first backward, so it keeps min(P - s, m) micro-batches' activations at once, and the
// step's idle time (the bubble) is (P - 1) / (m + P - 1) of it.
#ifndef COMMON_PIPELINE_H
#define COMMON_PIPELINE_H

#include <stddef.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int stages, stage;            // P, this rank's stage s
    int dp_ranks, dp_rank;        // D, this rank among its stage's ranks (its data-parallel replica)
    int first_layer, num_layers;  // the layers it holds: [first_layer, first_layer + num_layers)
    int embed, head;              // it holds the embeddings (stage 0); the final LayerNorm and classifier (the last)
    int in_flight;                // micro-batches whose activations it keeps at once: min(P - s, m)
} PipeStage;

// Rank `rank`'s stage for o (its pp_stages, pp_layers, num_ranks, micro_steps) over a model of
// num_layers layers. pp_stages <= 1: the whole model (stage 0 of 1, D = the ranks).
PipeStage pipe_stage(const EngineOptions* o, int num_layers, int rank);
// The stages of o: at least 1.
int pipe_stages(const EngineOptions* o);

// A run's shape with P stages: P divides the ranks, P <= the layers, at least P micro-steps a step
// (fewer would leave the pipeline idle for most of the step). 1, or 0 with why naming the flag.
int pipe_check(int stages, int ranks, int num_layers, long micro_steps, char* why, size_t cap);
// --pp-split "12,12,12,12" into layers[0..stages): 1, or 0 with why naming the flag and what was
// expected (as many stages as -pp, each at least one layer, summing to the model's layers).
int pipe_split_parse(const char* text, int stages, int num_layers, int* layers, char* why, size_t cap);
// The share of a step's time the pipeline idles under 1F1B: (P - 1) / (m + P - 1).
double pipe_bubble(int stages, int micro_steps);

#ifdef __cplusplus
}
#endif
#endif
