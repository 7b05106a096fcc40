// sampler.h: picks the next token from logits with temperature and top-k.
#ifndef COMMON_SAMPLER_H
#define COMMON_SAMPLER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// logits: V values (modified in place). temperature 0 = greedy. top_k 0 = all tokens.
// scratch: room for V ints. Deterministic for a given rng state.
int sample_token(float* logits, int V, float temperature, int top_k, uint64_t* rng, int* scratch);

#ifdef __cplusplus
}
#endif
#endif
