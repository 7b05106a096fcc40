// tensor_layout.c: tensor tables (see tensor_layout.h).
#include "tensor_layout.h"

#include <math.h>
#include <string.h>

#include "util.h"
#include "../kernels/sizes.h"

size_t dtype_bytes(DType dtype, size_t floatx_bytes) { return dtype == DT_FLOATX ? floatx_bytes : 4; }

void tensor_group_init(TensorGroup* g, const char* name, size_t floatx_bytes) {
    memset(g, 0, sizeof(*g));
    g->name = name;
    g->floatx_bytes = floatx_bytes;
}

int tensor_group_add(TensorGroup* g, const char* name, DType dtype, size_t layers, size_t per_layer) {
    if (g->count >= TENSOR_GROUP_MAX) fatal("tensor group %s: more than %d tensors", g->name, TENSOR_GROUP_MAX);
    TensorSlot* s = &g->slots[g->count];
    s->name = name;
    s->dtype = dtype;
    s->layers = layers;
    s->per_layer = per_layer;
    s->offset = g->bytes;
    s->bytes = layers * per_layer * dtype_bytes(dtype, g->floatx_bytes);
    g->bytes += (s->bytes + TENSOR_ALIGN - 1) / TENSOR_ALIGN * TENSOR_ALIGN;
    return g->count++;
}

// The layout at a given K (level 3) or at levels 0-2 (K is then L: every layer kept); embed and head:
// the stage holds the embeddings (its input tokens) and the head (final LayerNorm, logits, targets).
static void activation_layout_k(TensorGroup* g, const GPT2Config* cfg, int embed, int head, int B, int T,
                                size_t floatx_bytes, int recompute, size_t K);

// Level 3 keeps K layers' working sets and ceil(L/K) - 1 segment inputs. A working set is many times
// a segment input (32sbh against 2sbh at d48), so the textbook K = sqrt(L), right when the two are
// the same size, is not the smallest: the table itself is summed for every K and the least taken
// (the smallest K on a tie). Time does not depend on K: every segment re-runs its forward once.
int gpt2_recompute_every(const GPT2Config* cfg, int B, int T, size_t floatx_bytes, int requested) {
    int L = cfg->num_layers;
    if (requested > 0) return requested < L ? requested : L;
    int best = 1;
    size_t best_bytes = 0;
    for (int k = 1; k <= L; k++) {
        TensorGroup t;
        activation_layout_k(&t, cfg, 1, 1, B, T, floatx_bytes, 3, (size_t)k);
        if (k == 1 || t.bytes < best_bytes) best = k, best_bytes = t.bytes;
    }
    return best;
}

void gpt2_activation_layout(TensorGroup* g, const GPT2Config* cfg, int B, int T, size_t floatx_bytes, int recompute,
                            int recompute_every) {
    gpt2_stage_activation_layout(g, cfg, 1, 1, B, T, floatx_bytes, recompute, recompute_every);
}

void gpt2_stage_activation_layout(TensorGroup* g, const GPT2Config* cfg, int embed, int head, int B, int T,
                                  size_t floatx_bytes, int recompute, int recompute_every) {
    size_t K = recompute == 3 ? (size_t)gpt2_recompute_every(cfg, B, T, floatx_bytes, recompute_every)
                              : (size_t)cfg->num_layers;
    activation_layout_k(g, cfg, embed, head, B, T, floatx_bytes, recompute, K);
}

static void activation_layout_k(TensorGroup* g, const GPT2Config* cfg, int embed, int head, int B, int T,
                                size_t floatx_bytes, int recompute, size_t K) {
    size_t L = cfg->num_layers, C = cfg->channels, NH = cfg->num_heads, Vp = cfg->padded_vocab_size;
    size_t BT = (size_t)B * T;
    // Layers each stacked tensor holds at this level (see the header).
    size_t gelu_layers = recompute == 1 || recompute == 2 ? 1 : K;
    size_t ln_layers = recompute == 2 ? 1 : K;
    size_t segments = (L + K - 1) / K;
    tensor_group_init(g, "activations", floatx_bytes);
    // The order is the enum's; each line names its slot so a mismatch is visible in review.
    tensor_group_add(g, "encoded", DT_FLOATX, 1, BT * C);                 // ACT_ENCODED
    tensor_group_add(g, "ln1", DT_FLOATX, ln_layers, BT * C);             // ACT_LN1
    tensor_group_add(g, "ln1_mean", DT_FP32, K, BT);                      // ACT_LN1_MEAN
    tensor_group_add(g, "ln1_rstd", DT_FP32, K, BT);                      // ACT_LN1_RSTD
    tensor_group_add(g, "qkv", DT_FLOATX, K, BT * 3 * C);                 // ACT_QKV
    tensor_group_add(g, "atty", DT_FLOATX, K, BT * C);                    // ACT_ATTY
    tensor_group_add(g, "att_lse", DT_FP32, K, (size_t)B * NH * T);       // ACT_ATT_LSE
    tensor_group_add(g, "residual2", DT_FLOATX, K, BT * C);               // ACT_RESIDUAL2
    tensor_group_add(g, "ln2", DT_FLOATX, ln_layers, BT * C);             // ACT_LN2
    tensor_group_add(g, "ln2_mean", DT_FP32, K, BT);                      // ACT_LN2_MEAN
    tensor_group_add(g, "ln2_rstd", DT_FP32, K, BT);                      // ACT_LN2_RSTD
    tensor_group_add(g, "fch", DT_FLOATX, K, BT * 4 * C);                 // ACT_FCH
    tensor_group_add(g, "fch_gelu", DT_FLOATX, gelu_layers, BT * 4 * C);  // ACT_FCH_GELU
    tensor_group_add(g, "residual3", DT_FLOATX, K, BT * C);               // ACT_RESIDUAL3
    size_t h = head ? 1 : 0;  // a pipeline stage before the last has no head, the ones after the first no tokens
    tensor_group_add(g, "lnf", DT_FLOATX, h, BT * C);                     // ACT_LNF
    tensor_group_add(g, "lnf_mean", DT_FP32, h, BT);                      // ACT_LNF_MEAN
    tensor_group_add(g, "lnf_rstd", DT_FP32, h, BT);                      // ACT_LNF_RSTD
    tensor_group_add(g, "logits", DT_FLOATX, h, BT * Vp);                 // ACT_LOGITS
    tensor_group_add(g, "losses", DT_FP32, h, BT);                        // ACT_LOSSES
    tensor_group_add(g, "inputs", DT_INT32, embed ? 1 : 0, BT);           // ACT_INPUTS
    tensor_group_add(g, "targets", DT_INT32, h, BT);                      // ACT_TARGETS
    tensor_group_add(g, "block_inputs", DT_FLOATX, recompute == 3 ? segments - 1 : 0, BT * C);  // ACT_BLOCK_INPUTS
    if (g->count != ACT_COUNT) fatal("activation layout: %d slots, the enum has %d", g->count, ACT_COUNT);
}

void gpt2_scratch_layout(TensorGroup* g, const GPT2Config* cfg, int B, int T, size_t floatx_bytes) {
    size_t C = cfg->channels, BT = (size_t)B * T;
    size_t dbias = 0, widths[3] = {C, 3 * C, 4 * C};  // the bias gradients' widths
    for (int i = 0; i < 3; i++) {
        size_t f = matmul_dbias_scratch_floats((int)BT, (int)widths[i]);
        if (f > dbias) dbias = f;
    }
    tensor_group_init(g, "scratch", floatx_bytes);
    tensor_group_add(g, "proj", DT_FLOATX, 1, BT * C);                                                        // SCR_PROJ
    tensor_group_add(g, "dresidual", DT_FLOATX, 1, BT * C);                                                   // SCR_DRESIDUAL
    tensor_group_add(g, "dbig", DT_FLOATX, 1, BT * 4 * C);                                                    // SCR_DBIG
    tensor_group_add(g, "layernorm_partials", DT_FP32, 1, layernorm_backward_scratch_floats_for((int)BT, (int)C, floatx_bytes));  // SCR_LN
    tensor_group_add(g, "bias_partials", DT_FP32, 1, dbias);                                                  // SCR_DBIAS
    tensor_group_add(g, "attention_rows", DT_FP32, 1,
                     attention_backward_scratch_floats_for(B, T, cfg->num_heads, (int)(C / cfg->num_heads), floatx_bytes));  // SCR_ATT
    tensor_group_add(g, "norm_partials", DT_FP32, 1, GLOBAL_NORM_SCRATCH_FLOATS);                             // SCR_NORM
    tensor_group_add(g, "stats", DT_FP32, 1, 5);                                                              // SCR_STATS
    tensor_group_add(g, "encoder_plan", DT_INT32, 1, encoder_plan_ints((int)BT));                             // SCR_PLAN
    if (g->count != SCR_COUNT) fatal("scratch layout: %d slots, the enum has %d", g->count, SCR_COUNT);
}
