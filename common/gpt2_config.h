// gpt2_config.h: the model's shape and the one table of its parameter tensors.
//
// Both engines, the checkpoint code and (later) the memory planner read the parameter
// layout from gpt2_param_layout(): names, shapes, offsets and whether AdamW decays them.
// The order is llm.c's, so llm.c model files load as they are.
#ifndef COMMON_GPT2_CONFIG_H
#define COMMON_GPT2_CONFIG_H

#include <stddef.h>

#include "gpt2_vocab.h"  // GPT2_VOCAB_SIZE, GPT2_EOT

#ifdef __cplusplus
extern "C" {
#endif

#define GPT2_NUM_PARAM_TENSORS 16

typedef struct {
    int max_seq_len;        // maxT: rows of the position embedding
    int vocab_size;         // V: real tokens (50257 for GPT-2)
    int padded_vocab_size;  // Vp: V rounded up to a multiple of 128; padding rows never produce loss
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
} GPT2Config;

typedef struct {
    const char* name;
    int ndim;
    size_t shape[3];   // with ndim entries; layer tensors have shape[0] = L
    size_t numel;
    size_t offset;     // in elements, from the start of the parameter buffer
    int weight_decay;  // 1 for 2-D weight matrices (embeddings, linear weights); 0 for biases and LayerNorm
} ParamTensor;

typedef struct {
    ParamTensor tensors[GPT2_NUM_PARAM_TENSORS];
    size_t num_parameters;
} ParamLayout;

// Tensor indices, in file order.
enum {
    PT_WTE, PT_WPE, PT_LN1W, PT_LN1B, PT_QKVW, PT_QKVB, PT_ATTPROJW, PT_ATTPROJB,
    PT_LN2W, PT_LN2B, PT_FCW, PT_FCB, PT_FCPROJW, PT_FCPROJB, PT_LNFW, PT_LNFB
};

// llm.c's descriptors: "d12" or "gpt2:d12" -> GPT-2 124M (d24 350M, d36 774M, d48 1558M, and llm.c's
// d60, d72, d84); "gpt3:c768" -> llm.c's GPT-3 family by channels (c384 ... c12288, 2048 positions:
// at least that, whatever max_seq_len asks). d1..d5 are this project's small models with 64*depth
// channels and head size 64 (d6, llm.c's smallest, has them too). Returns 0 if desc is not a
// descriptor.
int gpt2_config_from_descriptor(const char* desc, int max_seq_len, GPT2Config* cfg);
// 1 for one of llm.c's descriptors (d6 and up, gpt2:dN, gpt3:cN): what starts from llm.c's init.
int gpt2_descriptor_is_llmc(const char* desc);
// Upper bounds on a model's shape. Far above GPT-2 1.5B (and GPT-3 175B: L=96, C=12288), they
// keep every size derived from a header (parameter counts, bytes, C*C products in int) exact in
// 64 bits, so a header with absurd fields is refused instead of wrapping to a small size.
#define GPT2_MAX_LAYERS 1024
#define GPT2_MAX_CHANNELS 16384
#define GPT2_MAX_SEQ_LEN (1 << 20)
#define GPT2_MAX_VOCAB 65536         // token ids are uint16 in the data format
#define GPT2_MAX_PADDED_VOCAB (1 << 17)

// Fatal (naming `what`) if the config is unusable: non-positive sizes, C not divisible by NH, ...
void gpt2_config_validate(const GPT2Config* cfg, const char* what);
// The same check returning 0 with the reason in why (prefixed with what) instead of exiting.
int gpt2_config_check(const GPT2Config* cfg, const char* what, char* why, size_t why_cap);
ParamLayout gpt2_param_layout(const GPT2Config* cfg);
// The same table for one pipeline stage (common/pipeline.h): the same tensors in the same order, the
// per-layer ones stacked over its num_layers layers, wte held (Vp rows) by the first stage (embed)
// and the last (head, the classifier), wpe by the first, the final LayerNorm by the last; a tensor
// the stage does not hold has no entries. (num_layers = L, embed = head = 1: gpt2_param_layout.)
ParamLayout gpt2_stage_param_layout(const GPT2Config* cfg, int num_layers, int embed, int head);
int gpt2_padded_vocab(int vocab_size);

// Training FLOPs per token at sequence length T, llm.c's estimate (its MFU is comparable):
// 6 per parameter (forward 2, backward 4) plus attention's 6*L*C*T (QK^T and PV forward and
// backward, with causal masking halving the 12*L*C*T of a full matrix).
double gpt2_flops_per_token(const GPT2Config* cfg, int T);

// GPT-2 initialization, deterministic for a seed whatever the thread count: weights N(0, 0.02),
// residual projections (attprojw, fcprojw) N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1,
// padding rows of wte 0.
void gpt2_init_params(const GPT2Config* cfg, float* params, unsigned long long seed);
// llm.c's initialisation of a descriptor model, so that a run here starts where llm.c's starts:
// PyTorch's Mersenne Twister seeded with `seed` (llm.c: 42), normal draws as PyTorch's normal_ in
// PyTorch's module order (wte's V real rows, wpe, then per layer QKV, attention projection, MLP,
// MLP projection), std 0.02 and 0.02 / sqrt(2 L) for the two projections into the residual stream;
// biases 0, LayerNorm weights 1. Sequential (one generator), as llm.c's is.
void gpt2_init_params_llmc(const GPT2Config* cfg, float* params, unsigned int seed);
#ifdef __cplusplus
}
#endif
#endif
