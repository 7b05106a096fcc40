// hellaswag.h: llm.c's multiple-choice eval file (HellaSwag's hellaswag_val.bin, made by its
// dev/data/hellaswag.py or our data/hellaswag.sh) and its accuracy, as llm.c computes it.
//
// The file: 256 int32 header {20240522, 1, examples, longest example in bytes, 0...}, then each
// example as uint16 words: 65535 (a delimiter), the example's size in bytes (these words
// included), its index, the label (the right completion, 0-3), the number of completions (4), the
// context's length and tokens, then for each completion its length and tokens.
//
// Each completion is scored by the mean loss of its own tokens after the shared context (the
// completion-only loss, normalised by its length: llm.c's "acc_norm"); an example is right when its
// label has the lowest (the first of equals wins, as in llm.c). Four rows of a B x T batch hold one
// example, B/4 examples a forward; with several ranks each takes a contiguous share of the
// examples (llm.c's split) and the counts are summed.
#ifndef COMMON_HELLASWAG_H
#define COMMON_HELLASWAG_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HELLASWAG_MAGIC 20240522
#define HELLASWAG_COMPLETIONS 4
// Where llm.c keeps the file (its train_gpt2.cu's hellaswag_path), relative to the working dir.
#define HELLASWAG_LLMC_PATH "dev/data/hellaswag/hellaswag_val.bin"

typedef struct {
    char path[4200];
    int num_examples;   // in the file, over all ranks
    int first, end;     // this rank's examples [first, end)
    uint16_t* words;    // the file after its header
    size_t* starts;     // each example's first word in words
    int B, T;
    int* inputs;        // B x T
    int* targets;       // B x T
    unsigned char* mask;// B x T: 1 where a completion token is predicted
    int* labels;        // B / 4
    float* losses;      // B x T, from the engine
} HellaSwag;

// Reads and checks the whole file (fatal, naming it, the example and what is wrong: a wrong magic
// or version, a size that does not match, an example that does not fit in T tokens, a token id at
// or above vocab_size, a label or a completion count that is not llm.c's). B must be at least 4.
void hellaswag_open(HellaSwag* h, const char* path, int B, int T, int vocab_size, int rank, int num_ranks);
// Every example through the engine (forward with targets, then its per-token losses); returns the
// examples answered right over all ranks (a collective when there are several ranks).
int hellaswag_correct(HellaSwag* h, Engine* e);
void hellaswag_free(HellaSwag* h);

#ifdef __cplusplus
}
#endif
#endif
