// gpt2_cpu.c: the C reference engine: GPT-2 forward, backward and AdamW in fp32 (see gpt2_cpu.h).
#include "gpt2_cpu.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "ops_cpu.h"
#include "util.h"

#define NORM_CHUNK (1 << 16)  // fixed chunks: the grad norm's order does not depend on the thread count

// Element counts of each activation tensor, in ActTensors order. for_grads leaves out the
// tensors backward never needs a gradient for (softmax statistics, att, probs, losses).
static void act_sizes(const GPT2Config* cfg, int B, int T, int for_grads, size_t* s) {
    size_t L = cfg->num_layers, C = cfg->channels, NH = cfg->num_heads, Vp = cfg->padded_vocab_size;
    size_t BT = (size_t)B * T;
    size_t g = for_grads ? 0 : 1;
    size_t i = 0;
    s[i++] = BT * C;             // encoded
    s[i++] = L * BT * C;         // ln1
    s[i++] = g * L * BT;         // ln1_mean
    s[i++] = g * L * BT;         // ln1_rstd
    s[i++] = L * BT * 3 * C;     // qkv
    s[i++] = L * BT * C;         // atty
    s[i++] = g * L * B * NH * (size_t)T * T;  // att
    s[i++] = L * BT * C;         // attproj
    s[i++] = L * BT * C;         // residual2
    s[i++] = L * BT * C;         // ln2
    s[i++] = g * L * BT;         // ln2_mean
    s[i++] = g * L * BT;         // ln2_rstd
    s[i++] = L * BT * 4 * C;     // fch
    s[i++] = L * BT * 4 * C;     // fch_gelu
    s[i++] = L * BT * C;         // fcproj
    s[i++] = L * BT * C;         // residual3
    s[i++] = BT * C;             // lnf
    s[i++] = g * BT;             // lnf_mean
    s[i++] = g * BT;             // lnf_rstd
    s[i++] = BT * Vp;            // logits
    s[i++] = g * BT * Vp;        // probs
    s[i++] = g * BT;             // losses
    s[i++] = BT * C;             // scratch
}

static size_t sum_sizes(const size_t* s) {
    size_t n = 0;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) n += s[i];
    return n;
}

// Points the views at consecutive regions sized for the capacity, so views for a smaller B x T
// stay inside their regions.
static void act_point(ActTensors* a, float* base, const size_t* cap) {
    float** ptrs = (float**)a;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) {
        ptrs[i] = cap[i] ? base : NULL;
        base += cap[i];
    }
}

size_t gpt2_cpu_bytes(const GPT2Config* cfg, int B, int T) {
    size_t a[NUM_ACT_TENSORS], g[NUM_ACT_TENSORS];
    act_sizes(cfg, B, T, 0, a);
    act_sizes(cfg, B, T, 1, g);
    return (4 * gpt2_param_layout(cfg).num_parameters + sum_sizes(a) + sum_sizes(g)) * sizeof(float);
}

void gpt2_cpu_init(GPT2CPU* model, const GPT2Config* cfg, int B, int T) {
    memset(model, 0, sizeof(*model));
    gpt2_config_validate(cfg, "model");
    model->config = *cfg;
    model->layout = gpt2_param_layout(cfg);
    model->B = B;
    model->T = T;
    size_t n = model->layout.num_parameters;
    model->params = (float*)malloc_check(n * sizeof(float), "parameters");
    model->grads = (float*)calloc_check(n, sizeof(float), "gradients");
    model->m = (float*)calloc_check(n, sizeof(float), "AdamW m");
    model->v = (float*)calloc_check(n, sizeof(float), "AdamW v");
    model->norm_partials = (double*)malloc_check((n + NORM_CHUNK - 1) / NORM_CHUNK * sizeof(double), "norm partials");
    size_t a[NUM_ACT_TENSORS], g[NUM_ACT_TENSORS];
    act_sizes(cfg, B, T, 0, a);
    act_sizes(cfg, B, T, 1, g);
    model->num_acts = sum_sizes(a);
    model->acts_memory = (float*)calloc_check(sum_sizes(a), sizeof(float), "activations");
    model->grad_acts_memory = (float*)calloc_check(sum_sizes(g), sizeof(float), "activation gradients");
    act_point(&model->acts, model->acts_memory, a);
    act_point(&model->grad_acts, model->grad_acts_memory, g);
}

void gpt2_cpu_free(GPT2CPU* model) {
    free(model->params); free(model->grads); free(model->m); free(model->v); free(model->norm_partials);
    free(model->acts_memory); free(model->grad_acts_memory);
    memset(model, 0, sizeof(*model));
}

#define PARAM(model, idx) ((model)->params + (model)->layout.tensors[idx].offset)
#define GRAD(model, idx) ((model)->grads + (model)->layout.tensors[idx].offset)

float gpt2_cpu_forward(GPT2CPU* model, const int* inputs, const int* targets, int B, int T) {
    const GPT2Config* cfg = &model->config;
    if (B < 1 || T < 1 || B > model->B || T > model->T)
        fatal("forward with B=%d T=%d exceeds the engine's B=%d T=%d", B, T, model->B, model->T);
    int L = cfg->num_layers, C = cfg->channels, NH = cfg->num_heads, V = cfg->vocab_size, Vp = cfg->padded_vocab_size;
    int BT = B * T;
    model->cur_B = B;
    model->cur_T = T;
    model->inputs = inputs;
    model->targets = targets;
    ActTensors* a = &model->acts;

    encoder_forward_cpu(a->encoded, inputs, PARAM(model, PT_WTE), PARAM(model, PT_WPE), B, T, C);
    for (int l = 0; l < L; l++) {
        const float* residual = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BT * C;
        size_t lc = (size_t)l * C, lbtc = (size_t)l * BT * C, lbt = (size_t)l * BT;
        float* ln1 = a->ln1 + lbtc;
        float* qkv = a->qkv + lbtc * 3;
        float* atty = a->atty + lbtc;
        float* att = a->att + (size_t)l * B * NH * T * T;
        float* attproj = a->attproj + lbtc;
        float* residual2 = a->residual2 + lbtc;
        float* ln2 = a->ln2 + lbtc;
        float* fch = a->fch + lbtc * 4;
        float* fch_gelu = a->fch_gelu + lbtc * 4;
        float* fcproj = a->fcproj + lbtc;
        float* residual3 = a->residual3 + lbtc;
        layernorm_forward_cpu(ln1, a->ln1_mean + lbt, a->ln1_rstd + lbt, residual, PARAM(model, PT_LN1W) + lc,
                              PARAM(model, PT_LN1B) + lc, BT, C);
        matmul_forward_cpu(qkv, ln1, PARAM(model, PT_QKVW) + lc * 3 * C, PARAM(model, PT_QKVB) + lc * 3, BT, C, 3 * C);
        attention_forward_cpu(atty, att, qkv, B, T, C, NH);
        matmul_forward_cpu(attproj, atty, PARAM(model, PT_ATTPROJW) + lc * C, PARAM(model, PT_ATTPROJB) + lc, BT, C, C);
        residual_forward_cpu(residual2, residual, attproj, BT * C);
        layernorm_forward_cpu(ln2, a->ln2_mean + lbt, a->ln2_rstd + lbt, residual2, PARAM(model, PT_LN2W) + lc,
                              PARAM(model, PT_LN2B) + lc, BT, C);
        matmul_forward_cpu(fch, ln2, PARAM(model, PT_FCW) + lc * 4 * C, PARAM(model, PT_FCB) + lc * 4, BT, C, 4 * C);
        gelu_forward_cpu(fch_gelu, fch, BT * 4 * C);
        matmul_forward_cpu(fcproj, fch_gelu, PARAM(model, PT_FCPROJW) + lc * 4 * C, PARAM(model, PT_FCPROJB) + lc,
                           BT, 4 * C, C);
        residual_forward_cpu(residual3, residual2, fcproj, BT * C);
    }
    const float* last = a->residual3 + (size_t)(L - 1) * BT * C;
    layernorm_forward_cpu(a->lnf, a->lnf_mean, a->lnf_rstd, last, PARAM(model, PT_LNFW), PARAM(model, PT_LNFB), BT, C);
    matmul_forward_cpu(a->logits, a->lnf, PARAM(model, PT_WTE), NULL, BT, C, Vp);
    softmax_forward_cpu(a->probs, a->logits, BT, V, Vp);
    model->mean_loss = 0.0f;
    if (targets) {
        crossentropy_forward_cpu(a->losses, a->probs, targets, BT, Vp);
        double sum = 0.0;
        for (int i = 0; i < BT; i++) sum += a->losses[i];
        model->mean_loss = (float)(sum / BT);
    }
    return model->mean_loss;
}

void gpt2_cpu_zero_grad(GPT2CPU* model) {
    memset(model->grads, 0, model->layout.num_parameters * sizeof(float));
}

void gpt2_cpu_backward(GPT2CPU* model, float dloss_scale) {
    if (!model->targets) fatal("backward needs a forward with targets first");
    const GPT2Config* cfg = &model->config;
    int B = model->cur_B, T = model->cur_T;
    int L = cfg->num_layers, C = cfg->channels, NH = cfg->num_heads, V = cfg->vocab_size, Vp = cfg->padded_vocab_size;
    int BT = B * T;
    ActTensors* a = &model->acts;
    ActTensors* g = &model->grad_acts;
    size_t gcap[NUM_ACT_TENSORS];
    act_sizes(cfg, model->B, model->T, 1, gcap);
    memset(model->grad_acts_memory, 0, sum_sizes(gcap) * sizeof(float));

    // The objective is mean loss over B*T tokens, times dloss_scale (1/accumulation steps).
    crossentropy_softmax_backward_cpu(g->logits, a->probs, model->targets, dloss_scale / BT, BT, V, Vp);
    matmul_backward_cpu(g->lnf, GRAD(model, PT_WTE), NULL, g->logits, a->lnf, PARAM(model, PT_WTE), BT, C, Vp);
    const float* last = a->residual3 + (size_t)(L - 1) * BT * C;
    float* dlast = g->residual3 + (size_t)(L - 1) * BT * C;
    layernorm_backward_cpu(dlast, GRAD(model, PT_LNFW), GRAD(model, PT_LNFB), g->lnf, last, PARAM(model, PT_LNFW),
                           a->lnf_mean, a->lnf_rstd, BT, C);
    for (int l = L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * C, lbtc = (size_t)l * BT * C, lbt = (size_t)l * BT;
        const float* residual = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BT * C;
        float* dresidual = l == 0 ? g->encoded : g->residual3 + (size_t)(l - 1) * BT * C;
        residual_backward_cpu(g->residual2 + lbtc, g->fcproj + lbtc, g->residual3 + lbtc, BT * C);
        matmul_backward_cpu(g->fch_gelu + lbtc * 4, GRAD(model, PT_FCPROJW) + lc * 4 * C, GRAD(model, PT_FCPROJB) + lc,
                            g->fcproj + lbtc, a->fch_gelu + lbtc * 4, PARAM(model, PT_FCPROJW) + lc * 4 * C, BT, 4 * C, C);
        gelu_backward_cpu(g->fch + lbtc * 4, a->fch + lbtc * 4, g->fch_gelu + lbtc * 4, BT * 4 * C);
        matmul_backward_cpu(g->ln2 + lbtc, GRAD(model, PT_FCW) + lc * 4 * C, GRAD(model, PT_FCB) + lc * 4,
                            g->fch + lbtc * 4, a->ln2 + lbtc, PARAM(model, PT_FCW) + lc * 4 * C, BT, C, 4 * C);
        layernorm_backward_cpu(g->residual2 + lbtc, GRAD(model, PT_LN2W) + lc, GRAD(model, PT_LN2B) + lc,
                               g->ln2 + lbtc, a->residual2 + lbtc, PARAM(model, PT_LN2W) + lc, a->ln2_mean + lbt,
                               a->ln2_rstd + lbt, BT, C);
        residual_backward_cpu(dresidual, g->attproj + lbtc, g->residual2 + lbtc, BT * C);
        matmul_backward_cpu(g->atty + lbtc, GRAD(model, PT_ATTPROJW) + lc * C, GRAD(model, PT_ATTPROJB) + lc,
                            g->attproj + lbtc, a->atty + lbtc, PARAM(model, PT_ATTPROJW) + lc * C, BT, C, C);
        attention_backward_cpu(g->qkv + lbtc * 3, g->atty + lbtc, a->qkv + lbtc * 3,
                               a->att + (size_t)l * B * NH * T * T, B, T, C, NH);
        matmul_backward_cpu(g->ln1 + lbtc, GRAD(model, PT_QKVW) + lc * 3 * C, GRAD(model, PT_QKVB) + lc * 3,
                            g->qkv + lbtc * 3, a->ln1 + lbtc, PARAM(model, PT_QKVW) + lc * 3 * C, BT, C, 3 * C);
        layernorm_backward_cpu(dresidual, GRAD(model, PT_LN1W) + lc, GRAD(model, PT_LN1B) + lc, g->ln1 + lbtc,
                               residual, PARAM(model, PT_LN1W) + lc, a->ln1_mean + lbt, a->ln1_rstd + lbt, BT, C);
    }
    encoder_backward_cpu(GRAD(model, PT_WTE), GRAD(model, PT_WPE), g->encoded, model->inputs, B, T, C);
}

float gpt2_cpu_grad_norm(GPT2CPU* model) {
    size_t n = model->layout.num_parameters;
    size_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double* partial = model->norm_partials;
    const float* g = model->grads;
#pragma omp parallel for
    for (size_t c = 0; c < nchunks; c++) {
        size_t i1 = (c + 1) * NORM_CHUNK < n ? (c + 1) * NORM_CHUNK : n;
        double s = 0.0;
        for (size_t i = c * NORM_CHUNK; i < i1; i++) s += (double)g[i] * g[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (size_t c = 0; c < nchunks; c++) total += partial[c];
    return (float)sqrt(total);
}

void gpt2_cpu_update(GPT2CPU* model, const AdamWConfig* opt, float lr, float grad_scale, int t) {
    float bc1 = 1.0f - powf(opt->beta1, (float)t);
    float bc2 = 1.0f - powf(opt->beta2, (float)t);
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++) {
        const ParamTensor* pt = &model->layout.tensors[k];
        float wd = pt->weight_decay ? opt->weight_decay : 0.0f;
        size_t o = pt->offset;
        adamw_update_cpu(model->params + o, model->grads + o, model->m + o, model->v + o, pt->numel, lr, opt->beta1,
                         opt->beta2, bc1, bc2, opt->eps, wd, grad_scale);
    }
}

// ---------------------------------------------------------------------------------------------
// The Engine contract

static GPT2CPU* self_of(Engine* e) { return (GPT2CPU*)e->self; }

static void cpu_set_params(Engine* e, const float* p) {
    memcpy(self_of(e)->params, p, self_of(e)->layout.num_parameters * sizeof(float));
}
static void cpu_micro_step(Engine* e, const int* inputs, const int* targets, int B, int T, float dloss_scale,
                           int is_last) {
    GPT2CPU* m = self_of(e);
    m->step_loss += (double)dloss_scale * gpt2_cpu_forward(m, inputs, targets, B, T);
    gpt2_cpu_backward(m, dloss_scale);
}
static StepResult cpu_optimizer_step(Engine* e, const AdamWConfig* opt, float lr, float clip) {
    GPT2CPU* m = self_of(e);
    StepResult r;
    r.loss = (float)m->step_loss;
    r.grad_norm = gpt2_cpu_grad_norm(m);
    int outlier = (opt->skip_loss_above > 0 && r.loss > opt->skip_loss_above) ||
                  (opt->skip_norm_above > 0 && r.grad_norm > opt->skip_norm_above);
    r.applied = isfinite(r.grad_norm) && !outlier;  // never let an inf or NaN reach the weights
    r.loss_scale = 1.0f;
    float scale = 1.0f;
    if (clip > 0.0f && r.grad_norm > clip) scale = clip / (r.grad_norm + 1e-6f);
    if (r.applied) {
        m->adam_steps++;
        gpt2_cpu_update(m, opt, lr, scale, (int)m->adam_steps);
    }
    gpt2_cpu_zero_grad(m);
    m->step_loss = 0.0;
    return r;
}
static float cpu_forward(Engine* e, const int* inputs, const int* targets, int B, int T) {
    return gpt2_cpu_forward(self_of(e), inputs, targets, B, T);
}
static void cpu_logits_at(Engine* e, int b, int t, float* out) {
    GPT2CPU* m = self_of(e);
    const float* row = m->acts.logits + ((size_t)b * m->cur_T + t) * m->config.padded_vocab_size;
    memcpy(out, row, m->config.vocab_size * sizeof(float));
}
static void cpu_token_losses(Engine* e, float* out) {
    GPT2CPU* m = self_of(e);
    memcpy(out, m->acts.losses, (size_t)m->cur_B * m->cur_T * sizeof(float));
}
static void cpu_checkpoint_save(Engine* e, const char* model_path, const char* state_path, const TrainState* st) {
    GPT2CPU* m = self_of(e);
    OptimizerCounters oc = {m->adam_steps, 0.0, 0};
    // The model file goes last: a state file is only trusted next to its model file.
    state_file_write(state_path, &m->config, st, &oc, m->m, m->v, m->layout.num_parameters);
    model_file_write_checkpoint(model_path, &m->config, m->params, st);
}
static void copy_state_piece(void* ctx, int which, size_t offset, const float* data, size_t count) {
    GPT2CPU* m = (GPT2CPU*)ctx;
    memcpy((which == 0 ? m->m : m->v) + offset, data, count * sizeof(float));
}

// Whole or sharded (a GPU run's ZeRO checkpoint over ranks): m and v assembled from every file.
static void cpu_checkpoint_load(Engine* e, const char* model_path, const char* state_path, TrainState* st) {
    GPT2CPU* m = self_of(e);
    OptimizerCounters oc;
    size_t n = m->layout.num_parameters;
    model_file_read_params(model_path, &m->config, m->params);
    size_t chunk = (size_t)1 << 20;
    float* buf = (float*)malloc_check(chunk * sizeof(float), "checkpoint read buffer");
    state_read_range(state_path, &m->config, st, &oc, n, 0, n, copy_state_piece, m, buf, chunk);
    free(buf);
    m->adam_steps = oc.adam_steps;
}
static void cpu_memory_report(Engine* e, MemoryReport* r) {
    GPT2CPU* m = self_of(e);
    size_t n = m->layout.num_parameters * sizeof(float);
    memory_report_add(r, "parameters", n);
    memory_report_add(r, "gradients", n);
    memory_report_add(r, "AdamW m", n);
    memory_report_add(r, "AdamW v", n);
    memory_report_add(r, "activations", gpt2_cpu_bytes(&m->config, m->B, m->T) - 4 * n);
}
static void cpu_destroy(Engine* e) {
    gpt2_cpu_free(self_of(e));
    free(e->self);
    free(e);
}

Engine* gpt2_cpu_engine_create(const GPT2Config* cfg, const EngineOptions* opts, char* why, size_t why_cap) {
    // ZeRO on one rank shards nothing (llm.c accepts -z 1 on one GPU): only more ranks are refused.
    if (opts->num_ranks > 1) {
        snprintf(why, why_cap, "the C reference engine is one process (ranks %d, ZeRO stage %d)", opts->num_ranks,
                 opts->zero_stage);
        return NULL;
    }
    // The layers take element counts as int: the largest is B*T*max(4C, Vp), then attention's B*NH*T*T.
    long long BT = (long long)opts->B * opts->T, wide = 4LL * cfg->channels > cfg->padded_vocab_size ? 4LL * cfg->channels
                                                                                                   : cfg->padded_vocab_size;
    if (BT * wide > INT_MAX || BT * cfg->num_heads * opts->T > INT_MAX) {
        snprintf(why, why_cap, "B*T = %lld tokens is too many for its 32-bit layer sizes (at most %lld with this model)",
                 BT, (long long)INT_MAX / (wide > (long long)cfg->num_heads * opts->T ? wide : (long long)cfg->num_heads * opts->T));
        return NULL;
    }
    Engine* e = (Engine*)calloc_check(1, sizeof(Engine), "engine");
    GPT2CPU* m = (GPT2CPU*)malloc_check(sizeof(GPT2CPU), "engine");
    gpt2_cpu_init(m, cfg, opts->B, opts->T);
    e->self = m;
    e->config = *cfg;
    e->options = *opts;
    e->precision = PRECISION_FP32;
    e->peak_flops = 0.0;
    snprintf(e->name, sizeof(e->name), "C reference engine (fp32, %d OpenMP threads), %.1f MiB", omp_get_max_threads(),
             gpt2_cpu_bytes(cfg, opts->B, opts->T) / 1048576.0);
    e->set_params = cpu_set_params;
    e->micro_step = cpu_micro_step;
    e->optimizer_step = cpu_optimizer_step;
    e->forward = cpu_forward;
    e->logits_at = cpu_logits_at;
    e->token_losses = cpu_token_losses;
    e->checkpoint_save = cpu_checkpoint_save;
    e->checkpoint_load = cpu_checkpoint_load;
    e->memory_report = cpu_memory_report;
    e->destroy = cpu_destroy;
    return e;
}
