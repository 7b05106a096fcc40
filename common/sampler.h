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
// Byte-level text (the built-in corpus without a tokenizer file): only the 256 byte tokens and
// end-of-text (eot; -1 = none) may be sampled, so every other logit becomes -inf. A model trained
// on bytes still gives the rest of GPT-2's vocabulary some probability, and such a token would print
// as an id, not text.
void sampler_keep_bytes(float* logits, int V, int eot);

#ifdef __cplusplus
}
#endif
#endif
