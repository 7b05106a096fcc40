// memory_plan.c: the memory planner (see memory_plan.h).
#include "memory_plan.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/sizes.h"
#include "gpu_peak.h"
#include "util.h"

const char* offload_name(int offload) {
    return offload == OFFLOAD_OPTIMIZER ? "optimizer" : offload == OFFLOAD_GRADS ? "grads" : "none";
}

static void item(MemoryPlan* p, int k, const char* name, size_t bytes, MemWhere where, int estimate) {
    p->items[k].name = name;
    p->items[k].bytes = bytes;
    p->items[k].where = where;
    p->items[k].estimate = estimate;
}

void memory_plan_make(MemoryPlan* p, const GPT2Config* model, const EngineOptions* opts) {
    memset(p, 0, sizeof(*p));
    p->cfg = *model;
    p->opts = *opts;
    size_t X = opts->precision == PRECISION_FP32 ? 4 : 2;
    p->floatx_bytes = X;
    // The rank's pipeline stage: its layers, and the embeddings and head where it holds them.
    p->pipe = pipe_stage(opts, model->num_layers, opts->rank > 0 ? opts->rank : 0);
    p->stage_cfg = *model;
    p->stage_cfg.num_layers = p->pipe.num_layers;
    const GPT2Config* cfg = &p->stage_cfg;
    int pp = p->pipe.stages > 1;
    ParamLayout lay = gpt2_stage_param_layout(model, cfg->num_layers, p->pipe.embed, p->pipe.head);
    size_t L = (size_t)cfg->num_layers;

    // Shards: any parameter count over any rank count (a stage's data-parallel ranks), the last
    // shards padded.
    size_t n = lay.num_parameters, R = (size_t)p->pipe.dp_ranks;
    size_t rank = (size_t)p->pipe.dp_rank;
    int stage = opts->zero_stage;
    p->n = n;
    p->shard = (n + R - 1) / R;
    p->padded = p->shard * R;
    p->shard_begin = rank * p->shard;
    p->shard_n = p->shard_begin >= n ? 0 : (n - p->shard_begin < p->shard ? n - p->shard_begin : p->shard);
    p->opt_begin = stage == 0 ? 0 : p->shard_begin;
    p->opt_n = stage == 0 ? n : p->shard_n;

    // Gradient buckets (stage 2, or gradients offloaded as backward makes them): two layers' worth,
    // taken in turn, plus the embeddings' and the final LayerNorm's.
    int bucketed = stage >= 2 || opts->offload == OFFLOAD_GRADS;
    for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {
        p->bucket_offset[k] = p->layer_bucket_n;
        p->layer_bucket_n += lay.tensors[k].numel / L;
    }
    p->embed_n = lay.tensors[PT_WPE].offset + lay.tensors[PT_WPE].numel;
    p->lnf_n = 2 * lay.tensors[PT_LNFW].numel;
    size_t buckets = (2 * p->layer_bucket_n + p->embed_n + p->lnf_n) * X;

    p->recompute_every = gpt2_recompute_every(cfg, opts->B, opts->T, X, opts->recompute_every);
    gpt2_stage_activation_layout(&p->acts, cfg, p->pipe.embed, p->pipe.head, opts->B, opts->T, X, opts->recompute,
                                 opts->recompute_every);
    gpt2_scratch_layout(&p->scratch, cfg, opts->B, opts->T, X);

    int off = opts->offload != OFFLOAD_NONE;
    MemWhere opt_where = off ? MEM_ON_HOST : MEM_ON_DEVICE;
    size_t BT = (size_t)opts->B * opts->T;
    // Stage 3 keeps only its shard of the parameters and gathers each layer's (and the embeddings',
    // the final LayerNorm's) into buffers laid out as the gradient buckets.
    item(p, MEM_PARAMS, stage == 3 ? "parameter shard" : "parameters", stage == 3 ? p->shard * X : p->padded * X,
         MEM_ON_DEVICE, 0);
    item(p, MEM_PARAM_GATHER, "parameter gather buffers", stage == 3 ? buckets : 0, MEM_ON_DEVICE, 0);
    item(p, MEM_GRADS, bucketed ? "gradient buckets" : "gradients", bucketed ? buckets : p->padded * X, MEM_ON_DEVICE, 0);
    // Stage 1 reduce-scatters in place: its shard is a view of the gradients. Stage 2 receives
    // each bucket's reduced slices into the shard, then adds them to the fp32 accumulator.
    item(p, MEM_GRAD_SHARD, "gradient shard", stage >= 2 && opts->offload != OFFLOAD_GRADS ? p->shard * X : 0,
         MEM_ON_DEVICE, 0);
    if (opts->offload == OFFLOAD_GRADS)
        item(p, MEM_GRAD_ACC, "gradient accumulator (fp32)", p->opt_n * 4, MEM_ON_HOST, 0);
    else
        item(p, MEM_GRAD_ACC, "gradient accumulator (fp32)", stage >= 2 ? p->shard * 4 : 0, MEM_ON_DEVICE, 0);
    // FP32 on the device keeps no separate master copy: the parameters are the master.
    item(p, MEM_MASTER, "master weights (fp32)", off || X != 4 ? p->opt_n * 4 : 0, opt_where, 0);
    item(p, MEM_ADAM_M, "AdamW m (fp32)", p->opt_n * 4, opt_where, 0);
    item(p, MEM_ADAM_V, "AdamW v (fp32)", p->opt_n * 4, opt_where, 0);
    // 1F1B keeps in_flight micro-batches' activations at once (1 without -pp).
    item(p, MEM_ACTIVATIONS, "activations", p->acts.bytes * (size_t)p->pipe.in_flight, MEM_ON_DEVICE, 0);
    item(p, MEM_SCRATCH, "scratch", p->scratch.bytes, MEM_ON_DEVICE, 0);
    item(p, MEM_WORKSPACE, "cuBLASLt workspace", MATMUL_WORKSPACE_BYTES, MEM_ON_DEVICE, 0);
    // Sharded fp32 master weights reach the model file through a device buffer, one shard at a time
    // (stage 3 in FP32 too: there the parameter shard is the master).
    // With -pp every stage sends its pieces to rank 0, which writes the files whole.
    int gather = (R > 1 && ((stage >= 1 && X != 4) || stage == 3)) || pp;
    item(p, MEM_DEVICE_STAGE, "checkpoint staging", gather ? MEM_STAGE_FLOATS * 4 : 0, MEM_ON_DEVICE, 0);
    size_t offload_buf = 0;
    if (off) offload_buf = p->opt_n * X;  // gradients down, then the updated weights up, in place
    if (opts->offload == OFFLOAD_GRADS) offload_buf += buckets;  // pinned landing for the buckets
    item(p, MEM_OFFLOAD_BUFFER, "offload buffers (pinned)", offload_buf, MEM_ON_HOST, 0);
    item(p, MEM_HOST_STAGE, "host staging (pinned)", MEM_STAGE_FLOATS * (4 + X), MEM_ON_HOST, 0);
    item(p, MEM_HOST_PLAN, "encoder plan (host)", encoder_plan_ints((int)BT) * 4 + BT * 8, MEM_ON_HOST, 0);
    // The schedule starts once the step's last micro-step is given: every micro-batch's inputs and
    // targets are kept until then.
    int m = opts->micro_steps > 0 ? opts->micro_steps : 1;
    item(p, MEM_PIPE_TOKENS, "pipeline micro-batches' tokens (host)", pp ? (size_t)m * BT * 2 * 4 : 0, MEM_ON_HOST, 0);
    item(p, MEM_CUDA_CONTEXT, "CUDA context, kernels, cuBLASLt", MEM_CUDA_CONTEXT_ESTIMATE, MEM_ON_DEVICE, 1);
    // One communicator's buffers for each this rank uses: every rank's, and with -pp its replica's
    // (stage to stage), its stage's (data-parallel) and the tied embedding's (first and last stage).
    int comms = opts->num_ranks > 1;
    if (pp) comms += 1 + (R > 1) + (p->pipe.embed || p->pipe.head);
    item(p, MEM_NCCL, "NCCL buffers", (size_t)comms * MEM_NCCL_ESTIMATE, MEM_ON_DEVICE, 1);

    for (int k = 0; k < MEM_COUNT; k++) {
        const MemItem* it = &p->items[k];
        if (it->where == MEM_ON_HOST) p->host_bytes += it->bytes;
        else if (it->estimate) p->device_total += it->bytes;
        else p->device_bytes += it->bytes;
    }
    p->device_total += p->device_bytes;
}

static double gib(size_t b) { return b / 1073741824.0; }

int memory_plan_stage_rank(const EngineOptions* opts, int s) {
    int P = pipe_stages(opts), ranks = opts->num_ranks > 0 ? opts->num_ranks : 1;
    return s * (ranks / P > 0 ? ranks / P : 1);
}

int memory_plan_largest_stage(const GPT2Config* cfg, const EngineOptions* opts) {
    EngineOptions o = *opts;
    MemoryPlan p;
    int best = 0;
    size_t most = 0;
    for (int s = 0; s < pipe_stages(opts); s++) {
        o.rank = memory_plan_stage_rank(opts, s);
        memory_plan_make(&p, cfg, &o);
        if (s == 0 || p.device_total > most) best = s, most = p.device_total;
    }
    return memory_plan_stage_rank(opts, best);
}

// The plan a budget is checked against: the rank's, with -pp its largest stage's.
static void plan_for_budget(MemoryPlan* p, const GPT2Config* cfg, const EngineOptions* opts) {
    EngineOptions o = *opts;
    if (pipe_stages(opts) > 1) o.rank = memory_plan_largest_stage(cfg, opts);
    memory_plan_make(p, cfg, &o);
}

void memory_plan_print_stages(const GPT2Config* cfg, const EngineOptions* opts, FILE* f) {
    int P = pipe_stages(opts);
    if (P <= 1) return;
    EngineOptions o = *opts;
    MemoryPlan p;
    o.rank = 0;
    memory_plan_make(&p, cfg, &o);
    int m = opts->micro_steps > 0 ? opts->micro_steps : 1;
    fprintf(f, "pipeline: %d stages x %d data-parallel rank%s, 1F1B over %d micro-batches a step: the bubble (P - 1) / "
               "(m + P - 1) is %.1f%% of the step (predicted, equal stages)\n",
            P, p.pipe.dp_ranks, p.pipe.dp_ranks == 1 ? "" : "s", m, 100.0 * pipe_bubble(P, m));
    fprintf(f, "| %5s | %-12s | %-38s | %9s | %17s | %9s |\n", "stage", "layers", "also", "in flight", "device bytes",
            "GiB");
    fprintf(f, "|-------|--------------|----------------------------------------|-----------|-------------------|-----------|\n");
    int largest = memory_plan_largest_stage(cfg, opts);
    for (int s = 0; s < P; s++) {
        o.rank = memory_plan_stage_rank(opts, s);
        memory_plan_make(&p, cfg, &o);
        char layers[32];
        snprintf(layers, sizeof(layers), "%d-%d (%d)", p.pipe.first_layer, p.pipe.first_layer + p.pipe.num_layers - 1,
                 p.pipe.num_layers);
        const char* also = p.pipe.embed && p.pipe.head ? "embeddings, final LayerNorm, classifier"
                           : p.pipe.embed            ? "embeddings (wte, wpe)"
                           : p.pipe.head             ? "final LayerNorm, classifier (wte)"
                                                     : "";
        fprintf(f, "| %5d | %-12s | %-38s | %9d | %17zu | %9.3f |%s\n", s, layers, also, p.pipe.in_flight, p.device_total,
                gib(p.device_total), o.rank == largest ? " largest: the rank's figure" : "");
    }
}

// The split for the budget M: each stage as many layers as fit under M (cap[s], from need[s][n - 1],
// the plan of stage s with n layers), then the layers over L taken back one at a time from the stage
// that needs the most. 1 if every stage fits at least one layer and they hold L together.
static int split_under(const size_t* need, int P, int L, size_t M, int* layers) {
    long total = 0;
    for (int s = 0; s < P; s++) {
        int n = 0;
        while (n < L && need[(size_t)s * L + n] <= M) n++;
        if (n == 0) return 0;
        layers[s] = n;
        total += n;
    }
    if (total < L) return 0;
    for (; total > L; total--) {
        int worst = -1;
        for (int s = 0; s < P; s++)
            if (layers[s] > 1 && (worst < 0 || need[(size_t)s * L + layers[s] - 1] > need[(size_t)worst * L + layers[worst] - 1]))
                worst = s;
        layers[worst]--;
    }
    return 1;
}

static int size_compare(const void* a, const void* b) {
    size_t x = *(const size_t*)a, y = *(const size_t*)b;
    return x < y ? -1 : x > y;
}

void memory_plan_pp_split(const GPT2Config* cfg, EngineOptions* opts) {
    int P = pipe_stages(opts), L = cfg->num_layers;
    if (P <= 1) return;
    // need[s][n - 1]: stage s's plan with n layers (the other stages' counts do not change it).
    size_t* need = (size_t*)malloc_check((size_t)P * L * sizeof(size_t), "pipeline split");
    EngineOptions o = *opts;
    MemoryPlan p;
    for (int s = 0; s < P; s++) {
        o.rank = memory_plan_stage_rank(opts, s);
        for (int n = 1; n <= L; n++) {
            for (int t = 0; t < P; t++) o.pp_layers[t] = 1;
            o.pp_layers[s] = n;
            memory_plan_make(&p, cfg, &o);
            need[(size_t)s * L + n - 1] = p.device_total;
        }
    }
    // The least M some split fits under is one of the needs: search them in order.
    size_t count = (size_t)P * L;
    size_t* sorted = (size_t*)malloc_check(count * sizeof(size_t), "pipeline split");
    memcpy(sorted, need, count * sizeof(size_t));
    qsort(sorted, count, sizeof(size_t), size_compare);
    size_t lo = 0, hi = count - 1;  // split_under holds at sorted[count - 1] (every stage fits L layers)
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (split_under(need, P, L, sorted[mid], opts->pp_layers)) hi = mid;
        else lo = mid + 1;
    }
    split_under(need, P, L, sorted[lo], opts->pp_layers);
    free(sorted);
    free(need);
}


static const char* recompute_words(int level) {
    return level == 0 ? "keep all" : level == 1 ? "GELU" : level == 2 ? "GELU + LayerNorms" : "whole blocks";
}

static void plan_heading(const MemoryPlan* p, FILE* f) {
    const EngineOptions* o = &p->opts;
    fprintf(f, "memory plan: L=%d C=%d NH=%d V=%d, %zu parameters, %s, B=%d T=%d, recompute %d (%s", p->cfg.num_layers,
            p->cfg.channels, p->cfg.num_heads, p->cfg.vocab_size, gpt2_param_layout(&p->cfg).num_parameters,
            precision_name(o->precision), o->B, o->T, o->recompute, recompute_words(o->recompute));
    if (o->recompute == 3) fprintf(f, ", segments of %d layers", p->recompute_every);
    int R = p->pipe.dp_ranks;
    fprintf(f, "), ZeRO stage %d over %d rank%s, offload %s; rank %d", o->zero_stage, R, R > 1 ? "s" : "",
            offload_name(o->offload), o->rank);
    if (p->pipe.stages > 1)
        fprintf(f, ", pipeline stage %d of %d: layers %d-%d%s%s (%zu parameters), %d micro-batch%s activations in flight",
                p->pipe.stage, p->pipe.stages, p->pipe.first_layer, p->pipe.first_layer + p->pipe.num_layers - 1,
                p->pipe.embed ? " and the embeddings" : "", p->pipe.head ? " and the final LayerNorm and classifier" : "",
                p->n, p->pipe.in_flight, p->pipe.in_flight == 1 ? "'s" : "es'");
    fprintf(f, "\n");
}

void memory_plan_print(const MemoryPlan* p, FILE* f) {
    plan_heading(p, f);
    // GiB, the unit of the budget lines too (memory_fit_print); the bytes are exact.
    fprintf(f, "| %-44s | %-6s | %17s | %9s |\n", "component", "where", "bytes", "GiB");
    fprintf(f, "|----------------------------------------------|--------|-------------------|-----------|\n");
    for (int k = 0; k < MEM_COUNT; k++) {
        const MemItem* it = &p->items[k];
        if (it->bytes == 0) continue;
        char name[64];
        snprintf(name, sizeof(name), "%s%s", it->name, it->estimate ? " (estimate)" : "");
        fprintf(f, "| %-44s | %-6s | %17zu | %9.3f |\n", name, it->where == MEM_ON_HOST ? "host" : "device", it->bytes,
                gib(it->bytes));
    }
    fprintf(f, "| %-44s | %-6s | %17zu | %9.3f |\n", "allocated by the engine", "device", p->device_bytes,
            gib(p->device_bytes));
    fprintf(f, "| %-44s | %-6s | %17zu | %9.3f |\n", "total with the estimates", "device", p->device_total,
            gib(p->device_total));
    fprintf(f, "| %-44s | %-6s | %17zu | %9.3f |\n", "total", "host", p->host_bytes, gib(p->host_bytes));
    // Model states in units of parameters: the ZeRO paper's 16 psi, 4 + 12/N, 2 + 14/N.
    size_t states = p->items[MEM_PARAMS].bytes + p->items[MEM_GRADS].bytes + p->items[MEM_GRAD_SHARD].bytes +
                    p->items[MEM_MASTER].bytes + p->items[MEM_ADAM_M].bytes + p->items[MEM_ADAM_V].bytes;
    fprintf(f, "model states (parameters, gradients, master, m, v, wherever they live): %zu bytes = %.3f bytes per parameter;"
               " activations %.3f GiB = %.3f GiB per sequence",
            states, (double)states / p->n, gib(p->acts.bytes), p->opts.B > 0 ? gib(p->acts.bytes) / p->opts.B : 0.0);
    if (p->pipe.in_flight > 1) fprintf(f, "; a micro-batch's, %d in flight", p->pipe.in_flight);
    fprintf(f, "\n");
    fprintf(f, "activations by tensor (\"layers\": how many layers' copies the level keeps):\n");
    fprintf(f, "| %-14s | %6s | %15s | %15s |\n", "tensor", "layers", "bytes per layer", "bytes");
    for (int s = 0; s < p->acts.count; s++) {
        const TensorSlot* t = &p->acts.slots[s];
        if (t->bytes == 0) continue;
        fprintf(f, "| %-14s | %6zu | %15zu | %15zu |\n", t->name, t->layers, t->bytes / (t->layers ? t->layers : 1),
                t->bytes);
    }
}

static void json_string(FILE* f, const char* s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int run_shape_check(long B, long T, long ranks, long total_batch, long* accum, char* why, size_t cap) {
    if (B <= 0 || T <= 0 || ranks <= 0) {
        snprintf(why, cap, "flags -b and -t: B=%ld T=%ld on %ld ranks, expected positive values", B, T, ranks);
        return 0;
    }
    long tokens = B * T * ranks;
    if (tokens > RUN_MAX_TOKENS_PER_MICRO_STEP) {
        snprintf(why, cap, "flags -b and -t: B*T*ranks = %ld tokens per micro-step, more than the limit of %ld", tokens,
                 RUN_MAX_TOKENS_PER_MICRO_STEP);
        return 0;
    }
    long total = total_batch == -1 ? tokens : total_batch;
    if (total <= 0 || total % tokens != 0) {
        snprintf(why, cap, "flag -d (total batch) is %ld tokens, expected a positive multiple of B*T*ranks = %ld", total,
                 tokens);
        return 0;
    }
    if (total / tokens > RUN_MAX_MICRO_STEPS) {
        snprintf(why, cap, "flag -d (total batch) is %ld tokens = %ld micro-steps of B*T*ranks = %ld; at most %ld are "
                 "allowed", total, total / tokens, tokens, RUN_MAX_MICRO_STEPS);
        return 0;
    }
    *accum = total / tokens;
    return 1;
}

void memory_plan_print_json_members(const MemoryPlan* p, size_t budget, int accum, int keep_step, PlanStepSeconds step,
                                    FILE* f) {
    const EngineOptions* o = &p->opts;
    fprintf(f, "\"model\": {\"layers\": %d, \"channels\": %d, \"heads\": %d, \"vocab\": %d, \"padded_vocab\": %d, "
               "\"max_seq_len\": %d, \"parameters\": %zu},\n",
            p->cfg.num_layers, p->cfg.channels, p->cfg.num_heads, p->cfg.vocab_size, p->cfg.padded_vocab_size,
            p->cfg.max_seq_len, gpt2_param_layout(&p->cfg).num_parameters);
    fprintf(f, " \"options\": {\"precision\": \"%s\", \"B\": %d, \"T\": %d, \"recompute\": %d, \"recompute_every\": %d, "
               "\"zero_stage\": %d, \"ranks\": %d, \"rank\": %d, \"offload\": \"%s\"},\n",
            precision_name(o->precision), o->B, o->T, o->recompute, p->recompute_every, o->zero_stage,
            o->num_ranks > 0 ? o->num_ranks : 1, o->rank, offload_name(o->offload));
    fprintf(f, " \"components\": [");
    for (int k = 0; k < MEM_COUNT; k++) {
        const MemItem* it = &p->items[k];
        fprintf(f, "%s\n  {\"name\": ", k ? "," : "");
        json_string(f, it->name);
        fprintf(f, ", \"where\": \"%s\", \"bytes\": %zu, \"estimate\": %s}", it->where == MEM_ON_HOST ? "host" : "device",
                it->bytes, it->estimate ? "true" : "false");
    }
    fprintf(f, "],\n \"activations\": [");
    for (int s = 0; s < p->acts.count; s++) {
        const TensorSlot* t = &p->acts.slots[s];
        fprintf(f, "%s\n  {\"name\": \"%s\", \"layers\": %zu, \"bytes\": %zu}", s ? "," : "", t->name, t->layers, t->bytes);
    }
    fprintf(f, "],\n \"device_bytes\": %zu, \"device_total\": %zu, \"host_bytes\": %zu", p->device_bytes, p->device_total,
            p->host_bytes);
    if (p->pipe.stages > 1) {  // every stage's figure (the plan above is the stage of rank o->rank)
        int m = o->micro_steps > 0 ? o->micro_steps : 1;
        fprintf(f, ",\n \"pipeline\": {\"stages\": %d, \"dp_ranks\": %d, \"micro_steps\": %d, \"bubble\": %.6f, \"stage\": %d}",
                p->pipe.stages, p->pipe.dp_ranks, m, pipe_bubble(p->pipe.stages, m), p->pipe.stage);
        fprintf(f, ",\n \"by_stage\": [");
        EngineOptions so = *o;
        for (int s = 0; s < p->pipe.stages; s++) {
            MemoryPlan q;
            so.rank = memory_plan_stage_rank(o, s);
            memory_plan_make(&q, &p->cfg, &so);
            fprintf(f, "%s\n  {\"stage\": %d, \"first_layer\": %d, \"layers\": %d, \"in_flight\": %d, \"device_bytes\": %zu, "
                       "\"device_total\": %zu, \"components\": {", s ? "," : "", s, q.pipe.first_layer, q.pipe.num_layers,
                    q.pipe.in_flight, q.device_bytes, q.device_total);
            for (int k = 0; k < MEM_COUNT; k++) {  // name -> bytes (where and estimate: as in "components")
                fprintf(f, "%s", k ? ", " : "");
                json_string(f, q.items[k].name);
                fprintf(f, ": %zu", q.items[k].bytes);
            }
            fprintf(f, "}}");
        }
        fprintf(f, "]");
    }
    if (budget > 0) {
        MemoryFit fit = memory_plan_fit_step(&p->cfg, o, accum, keep_step, budget, step);
        fprintf(f, ",\n \"budget\": {\"bytes\": %zu, \"fits\": %s, \"max_B\": %d", budget, fit.fits ? "true" : "false",
                fit.max_B);
        if (!fit.fits && fit.found) {
            fprintf(f, ", \"advice\": {\"what\": ");
            json_string(f, fit.what);
            fprintf(f, ", \"B\": %d, \"recompute\": %d, \"zero_stage\": %d, \"offload\": \"%s\", \"accumulation_factor\": %d, "
                       "\"total_batch\": %ld, \"device_total\": %zu, \"seconds_lost_per_step\": %.4f, \"step_seconds\": %.4f}",
                    fit.change.B, fit.change.recompute, fit.change.zero_stage, offload_name(fit.change.offload),
                    fit.accum_factor, fit.total_batch, fit.change_bytes, fit.seconds_lost, fit.step_seconds);
        } else if (!fit.fits) {
            fprintf(f, ", \"advice\": null");
        }
        fprintf(f, "}");
    }
}

// ---- the planner's time model ----

double plan_card_peak(Precision precision) {
    for (int i = 0; i < gpu_peak_count(); i++) {
        const GpuPeak* r = gpu_peak_row(i);
        if (strcmp(r->card, PLAN_CARD) == 0)
            return (precision == PRECISION_FP32 ? r->fp32_tflops : r->tensor_tflops) * 1e12;
    }
    return 0.0;  // not reached: the table holds PLAN_CARD (test/test_memory_plan.sh prints it)
}

double plan_recompute_fraction(int level) {
    // 1: GELU again (llm.c measured +0.7%); 2: the LayerNorms too, memory-bound and cheap (this
    // project's goal: under 5%); 3: every block's forward again, a third of a step.
    static const double cost[4] = {0.0, 0.01, 0.04, 0.33};
    return cost[level < 0 ? 0 : level > 3 ? 3 : level];
}

// ---- fitting a budget ----
//
// The cost of a change is its predicted step against the asked one's, in seconds per optimizer step
// at the same tokens a step (the trainer passes comm_plan_step_seconds: the kernel report's model on
// the card --gpu names, where its counts cover the configuration, else the stated MFU estimate; the
// pipeline's bubble; the communication at --link and offload's copies and host AdamW that the step
// does not hide). So the cheapest change is the fastest configuration that fits.

MemoryFit memory_plan_fit(const GPT2Config* cfg, const EngineOptions* opts, int accum, size_t budget,
                          PlanStepSeconds step) {
    return memory_plan_fit_step(cfg, opts, accum, 0, budget, step);
}

MemoryFit memory_plan_fit_step(const GPT2Config* cfg, const EngineOptions* opts, int accum, int keep_step,
                               size_t budget, PlanStepSeconds step) {
    MemoryFit fit;
    memset(&fit, 0, sizeof(fit));
    MemoryPlan p;
    plan_for_budget(&p, cfg, opts);
    fit.fits = p.device_total <= budget;
    // The data-parallel ranks (with -pp every stage of a replica takes the same sequences).
    long nr = (opts->num_ranks > 0 ? opts->num_ranks : 1) / pipe_stages(opts), steps_accum, ignored;
    if (nr < 1) nr = 1;
    if (accum < 1) accum = 1;
    char why[256];
    long step_seqs = (long)opts->B * accum;  // sequences per rank per optimizer step
    // The largest B: the plan grows with B, so a binary search, up to 2^16 sequences and the
    // trainer's limit on tokens per micro-step; with a fixed step, then down to a B that divides it.
    EngineOptions o = *opts;
    long per = (long)(opts->T > 0 ? opts->T : 1) * nr;
    int lo = 0, hi = (int)(RUN_MAX_TOKENS_PER_MICRO_STEP / per < (1 << 16) ? RUN_MAX_TOKENS_PER_MICRO_STEP / per : (1 << 16));
    while (lo < hi) {
        o.B = lo + (hi - lo + 1) / 2;
        plan_for_budget(&p, cfg, &o);
        if (p.device_total <= budget) lo = o.B;
        else hi = o.B - 1;
    }
    while (lo > 0 && !(keep_step ? step_seqs % lo == 0 && run_shape_check(lo, opts->T, nr, step_seqs * opts->T * nr,
                                                                            &ignored, why, sizeof(why))
                                  : run_shape_check(lo, opts->T, nr, -1, &ignored, why, sizeof(why))))
        lo--;
    fit.max_B = lo;
    if (fit.fits) return fit;

    // The cheapest change that fits: recompute levels, B halved (accumulation doubled, the step's
    // tokens kept), ZeRO-2 over several ranks, offload; never less than what was asked.
    MemoryPlan asked;
    plan_for_budget(&asked, cfg, opts);
    double base = step(&asked, accum, fit.time_model, sizeof(fit.time_model));
    double best = 0;
    // A pipeline's stages combine their ranks with ZeRO 0 or 1 and keep the optimizer on the device.
    int pp = pipe_stages(opts) > 1;
    int ranks = opts->num_ranks > 1, top_zero = ranks && opts->zero_stage < 2 ? (pp ? 1 : 2) : opts->zero_stage;
    for (int r = opts->recompute; r <= 3; r++)
        for (int div = 1; div <= opts->B; div++) {
            // B divided by any of its divisors, the micro-steps multiplied by it: the step's tokens
            // kept, and a shape the trainer runs.
            if (opts->B % div != 0 ||
                !run_shape_check(opts->B / div, opts->T, nr, step_seqs * opts->T * nr, &steps_accum, why, sizeof(why)))
                continue;
            for (int z = opts->zero_stage; z <= top_zero; z++)
                for (int off = opts->offload; off <= (pp ? OFFLOAD_NONE : OFFLOAD_GRADS); off++) {
                    EngineOptions c = *opts;
                    c.recompute = r;
                    c.B = opts->B / div;
                    c.zero_stage = z;
                    c.offload = off;
                    plan_for_budget(&p, cfg, &c);
                    if (p.device_total > budget) continue;
                    double s = step(&p, accum * div, NULL, 0) - base;
                    if (fit.found && s >= best) continue;
                    fit.found = 1;
                    best = s;
                    fit.change = c;
                    fit.accum_factor = div;
                    fit.change_bytes = p.device_total;
                }
        }
    if (!fit.found) return fit;
    long ranks_n = nr;
    // The run's -d when the engine was told it (an out-of-memory or --max-memory answer), else the
    // step as planned here.
    fit.total_batch = opts->total_batch > 0 ? opts->total_batch : (long)opts->B * opts->T * ranks_n * (accum > 0 ? accum : 1);
    fit.seconds_lost = best;
    fit.step_seconds = base;
    const EngineOptions* c = &fit.change;
    char* w = fit.what;
    size_t cap = sizeof(fit.what), used = 0;
#define ADD(...) used += (size_t)snprintf(w + used, used < cap ? cap - used : 0, __VA_ARGS__)
    // Flags to pass as they are: a smaller -b comes with the -d that keeps the step's tokens.
    if (c->recompute != opts->recompute) ADD("%s-r %d", used ? " " : "", c->recompute);
    if (c->B != opts->B) ADD("%s-b %d -d %ld", used ? " " : "", c->B, fit.total_batch);
    if (c->zero_stage != opts->zero_stage) ADD("%s-z %d", used ? " " : "", c->zero_stage);
    if (c->offload != opts->offload) ADD("%s--offload %s", used ? " " : "", offload_name(c->offload));
#undef ADD
    return fit;
}

void memory_fit_print(const MemoryFit* fit, const EngineOptions* opts, size_t budget, FILE* f) {
    fprintf(f, "budget %.2f GiB per rank: ", gib(budget));
    if (fit->fits) {
        fprintf(f, "fits; the largest micro-batch that fits is -b %d\n", fit->max_B);
        return;
    }
    fprintf(f, "does not fit");
    if (fit->max_B > 0) fprintf(f, " (it would at -b %d)", fit->max_B);
    if (!fit->found) {
        fprintf(f, "; no change of -r, -b, -z or --offload makes it fit\n");
        return;
    }
    fprintf(f, "; the cheapest change that fits: %s", fit->what);
    if (fit->accum_factor > 1)
        fprintf(f, " (%dx the micro-steps: the same %ld tokens per step)", fit->accum_factor, fit->total_batch);
    fprintf(f, " -> %.2f GiB, %.3f s more per optimizer step (%+.1f%% on a predicted %.3f s; compute by %s)\n",
            gib(fit->change_bytes), fit->seconds_lost,
            fit->step_seconds > 0 ? 100.0 * fit->seconds_lost / fit->step_seconds : 0.0, fit->step_seconds, fit->time_model);
}

size_t memory_size_parse(const char* text, const char* flag) {
    char* end = NULL;
    double x = strtod(text, &end);
    const char* first = text + strspn(text, " \t");
    if (end == text || !(x >= 0) || !isfinite(x) || *first == '-')  // "-0" too
        fatal("flag %s expects a size such as 48GiB or 512MiB, got '%s'", flag, text);
    static const struct { const char* unit; double bytes; } units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) != 0) continue;
        double b = x * units[i].bytes;
        if (b >= 1.8e19) fatal("flag %s: %s is more bytes than this program can count", flag, text);
        // 0 is no size: a budget of nothing (and one under a byte) is refused, not read as "no limit".
        if (b < 1) fatal("flag %s: %s is %s, expected at least one byte (leave the flag out for no limit)", flag, text,
                         b == 0 ? "zero" : "less than a byte");
        return (size_t)b;
    }
    fatal("flag %s expects a size such as 48GiB or 512MiB, got '%s' (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", flag, text);
    return 0;
}
