// gpt2_vocab.h: GPT-2's vocabulary as numbers: how many tokens it has and the id of <|endoftext|>.
// The tokenizer (tokenizer.h) encodes and decodes with them; the parameter layout (gpt2_config.h)
// sizes the token embedding by them, and the data tools and the sampler mark documents with the
// end-of-text id. A header of its own, so that the model's shape does not depend on the tokenizer.
#ifndef COMMON_GPT2_VOCAB_H
#define COMMON_GPT2_VOCAB_H

#define GPT2_VOCAB_SIZE 50257
#define GPT2_EOT 50256  // <|endoftext|>, the last id

#endif
