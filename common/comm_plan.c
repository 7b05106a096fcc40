// comm_plan.c: the planner's communication (see comm_plan.h).
#include "comm_plan.h"
#include "gpu_peak.h"
#include "time_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char* comm_kind_name(CommKind k) {
    static const char* const names[COMM_KINDS] = {"allreduce", "reducescatter", "allgather", "reduce",
                                                  "broadcast", "send", "recv", "to_host", "to_device"};
    return k >= 0 && k < COMM_KINDS ? names[k] : "?";
}

// The links --link names. Assumptions, not measurements (no GPU has run this code yet): what a
// ring collective commonly reaches, per GPU and direction, as NCCL's tests report bus bandwidth.
//   nvlink: H100 SXM's NVLink 4 is 900 GB/s bidirectional, 450 per direction; nccl-tests'
//           all-reduce bus bandwidth on 8 H100 SXM reaches about 450 GB/s with NVLS (NVIDIA's
//           NCCL 2.18+ release figures), about 370 without: 450 taken as the achievable peak.
//   pcie:   PCIe 4.0 x16 is 32 GB/s per direction raw, about 25 achievable (a device-to-host copy of
//           pinned memory measures 24-26 GB/s on such slots); also the host link of offload's copies.
//   ib:     InfiniBand NDR 400 Gb/s per GPU (one ConnectX-7 each) is 50 GB/s per direction; across
//           nodes a ring is bounded by it.
static const CommLink LINKS[] = {
    {"nvlink", 450e9, "H100 NVLink 4: 450 GB/s per direction, the bus bandwidth nccl-tests reach on 8 H100 SXM (assumed)"},
    {"pcie", 25e9, "PCIe 4.0 x16: 32 GB/s raw per direction, about 25 achievable (assumed)"},
    {"ib", 50e9, "InfiniBand NDR 400 Gb/s per GPU: 50 GB/s per direction (assumed)"},
};
const CommLink COMM_HOST_LINK = {"pcie", PLAN_HOST_LINK_BYTES_PER_S, "PCIe 4.0 x16: 32 GB/s raw per direction, about 25 achievable (assumed)"};

int comm_link_parse(const char* text, CommLink* link, char* why, size_t cap) {
    for (size_t i = 0; i < sizeof(LINKS) / sizeof(LINKS[0]); i++)
        if (strcmp(text, LINKS[i].name) == 0) {
            *link = LINKS[i];
            return 1;
        }
    char* end = NULL;
    double gbps = strtod(text, &end);
    // A number of GB/s: positive, finite, and at most 100 TB/s (nothing near it exists; a larger
    // figure is a unit mistake).
    if (end == text || *end != '\0' || !(gbps > 0) || !isfinite(gbps) || gbps > 1e5) {
        snprintf(why, cap, "flag --link expects nvlink, pcie, ib or a bandwidth in GB/s (a number above 0, at most "
                 "100000), got '%s'", text);
        return 0;
    }
    memset(link, 0, sizeof(*link));
    snprintf(link->name, sizeof(link->name), "%g GB/s", gbps);
    link->bytes_per_s = gbps * 1e9;
    link->source = "given with --link";
    return 1;
}

// ---- the collectives, as the engine issues them ----

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

// The tensors the plan's rank holds (its pipeline stage's: the whole model without -pp).
static ParamLayout plan_layout(const MemoryPlan* p) {
    return gpt2_stage_param_layout(&p->cfg, p->stage_cfg.num_layers, p->pipe.embed, p->pipe.head);
}
static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

// A ring all-reduce of n elements: the rank's chunk is n / R, the first n % R ranks one more; it
// sends every other chunk twice (reducing, then gathering).
static size_t allreduce_sent(size_t n, size_t R, size_t rank) {
    size_t own = n / R + (rank < n % R ? 1 : 0);
    return 2 * (n - own);
}

static CommItem* add(CommPlan* c, const char* what, CommKind kind, CommWhen when, int overlapped, size_t elem) {
    CommItem* it = &c->items[c->count++];
    memset(it, 0, sizeof(*it));
    it->what = what;
    it->kind = kind;
    it->when = when;
    it->overlapped = overlapped;
    it->elem_bytes = elem;
    return it;
}

// Entries [a, a + count) between the ranks owning them (shards of p->shard) and the others: one call
// per owner the range touches. to_owner: reduced to the owner (train_gpt2_zero.cuh's reduce_to_owners
// and offload_reduce_piece), a chain that starts after the owner and ends at it; else broadcast from
// the owner (gather_from_owners), a ring whose last rank passes nothing on. In both, every rank but
// the chain's first receives and every rank but its last sends.
static void owner_pieces(CommItem* it, const MemoryPlan* p, size_t a, size_t count, size_t R, size_t rank,
                         int to_owner) {
    for (size_t owner = a / p->shard; owner < R && owner * p->shard < a + count; owner++) {
        size_t lo = max_sz(a, owner * p->shard), hi = min_sz(a + count, (owner + 1) * p->shard);
        if (lo >= hi) continue;
        size_t b = (hi - lo) * it->elem_bytes;
        size_t first = to_owner ? (owner + 1) % R : owner, last = to_owner ? owner : (owner + R - 1) % R;
        it->calls++;
        it->bytes += b;
        if (rank != last) it->sent += b;
        if (rank != first) it->received += b;
    }
}

static void reduce_piece(CommItem* it, const MemoryPlan* p, size_t a, size_t count, size_t R, size_t rank) {
    owner_pieces(it, p, a, count, R, rank, 1);
}

static void allreduce_piece(CommItem* it, size_t count, size_t R, size_t rank) {
    it->calls++;
    it->bytes += count * it->elem_bytes;
    it->sent += allreduce_sent(count, R, rank) * it->elem_bytes;
    it->received += allreduce_sent(count, R, (rank + R - 1) % R) * it->elem_bytes;
}

// fn(first entry, count) for each gradient bucket piece of one micro-step, in the engine's order:
// every layer's 12 tensors from the last layer down, then the embeddings (wte + wpe) and the final
// LayerNorm.
typedef void (*PieceFn)(CommItem* it, const MemoryPlan* p, size_t a, size_t count, size_t R, size_t rank);
static void for_each_bucket_piece(CommItem* it, const MemoryPlan* p, size_t R, size_t rank, PieceFn fn) {
    ParamLayout lay = plan_layout(p);
    size_t L = (size_t)p->stage_cfg.num_layers;
    for (size_t l = L; l-- > 0;)
        for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {
            size_t per_layer = lay.tensors[k].numel / L;
            fn(it, p, lay.tensors[k].offset + l * per_layer, per_layer, R, rank);
        }
    fn(it, p, 0, p->embed_n, R, rank);
    fn(it, p, lay.tensors[PT_LNFW].offset, p->lnf_n, R, rank);
}

static void broadcast_piece(CommItem* it, const MemoryPlan* p, size_t a, size_t count, size_t R, size_t rank) {
    owner_pieces(it, p, a, count, R, rank, 0);
}

// Stage 3's parameter gathers of one micro-step, in the engine's order (train_gpt2.cu's forward
// and backward calling train_gpt2_zero.cuh's zero3_*): the embeddings and the final LayerNorm at
// the start of the forward pass, then each layer whenever the buffer it goes to (layer l into l % 2)
// does not hold it: forward gathers every layer once (the next one while a layer computes: its
// output's LayerNorm needs it), backward finds the last two there and gathers the rest, and at
// recompute level 3 each segment's recompute gathers its layers again from its first.
static void zero3_gathers(CommItem* it, const MemoryPlan* p, size_t R, size_t rank) {
    ParamLayout lay = plan_layout(p);
    int L = p->stage_cfg.num_layers, K = p->recompute_every, level = p->opts.recompute;
    int slot[2] = {-1, -1};
    broadcast_piece(it, p, 0, p->embed_n, R, rank);
    broadcast_piece(it, p, lay.tensors[PT_LNFW].offset, p->lnf_n, R, rank);
#define GATHER(layer)                                                                                      \
    do {                                                                                                   \
        int l_ = (layer);                                                                                  \
        if (l_ < 0 || l_ >= L || slot[l_ % 2] == l_) break;                                                \
        slot[l_ % 2] = l_;                                                                                 \
        for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {                                                      \
            size_t per_layer = lay.tensors[k].numel / (size_t)L;                                           \
            broadcast_piece(it, p, lay.tensors[k].offset + (size_t)l_ * per_layer, per_layer, R, rank);    \
        }                                                                                                  \
    } while (0)
    // forward: layer l, then l + 1 (prefetched, and its LayerNorm closes layer l)
    for (int l = 0; l < L; l++) {
        GATHER(l);
        GATHER(l + 1);
    }
    // backward, from the last layer down
    for (int l = L - 1; l >= 0; l--) {
        if (level == 3 && (l == L - 1 || (l + 1) % K == 0))
            for (int r = l / K * K; r <= l; r++) {  // the segment's forward again, up to l's GELU
                GATHER(r);
                if (r < l) GATHER(r + 1);
            }
        GATHER(l);
        if (!(level == 3 && l % K == 0)) GATHER(l - 1);
    }
#undef GATHER
}

// Stage 1's parameter gather after the update, with overlap (train_gpt2_zero.cuh's
// zero1_gather_pieces): in the next forward's order, the embeddings, each layer's 12 tensor slices,
// the final LayerNorm, each from the ranks owning it.
static void zero1_gathers(CommItem* it, const MemoryPlan* p, size_t R, size_t rank) {
    ParamLayout lay = plan_layout(p);
    size_t L = (size_t)p->stage_cfg.num_layers;
    broadcast_piece(it, p, 0, p->embed_n, R, rank);
    for (size_t l = 0; l < L; l++)
        for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {
            size_t per_layer = lay.tensors[k].numel / L;
            broadcast_piece(it, p, lay.tensors[k].offset + l * per_layer, per_layer, R, rank);
        }
    broadcast_piece(it, p, lay.tensors[PT_LNFW].offset, p->lnf_n, R, rank);
}

static void allreduce_bucket(CommItem* it, const MemoryPlan* p, size_t a, size_t count, size_t R, size_t rank) {
    (void)p;
    (void)a;
    allreduce_piece(it, count, R, rank);
}

// -pp, a checkpoint: every piece of m, v and the fp32 weights in the model's order, from the rank
// holding it to rank 0 (train_gpt2_pipe.cuh's pipe_walk_owners): a broadcast over every rank (W of
// them, this one wrank) for each piece of at most MEM_STAGE_FLOATS that rank 0 does not hold.
static void pipe_checkpoint_pieces(CommItem* it, const MemoryPlan* p, size_t W, size_t wrank) {
    const EngineOptions* o = &p->opts;
    int P = p->pipe.stages, D = p->pipe.dp_ranks;
    int opt_sharded = o->zero_stage > 0 && D > 1, master = o->precision != PRECISION_FP32;
    for (int array = 0; array < 3; array++) {  // m, v, the weights (sharded with the optimizer when a master copy)
        int sharded = array < 2 ? opt_sharded : master && opt_sharded;
        for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++)
            for (int s = 0; s < P; s++) {
                if (k == PT_WTE && s > 0) continue;  // the first stage's copy
                PipeStage ps = pipe_stage(o, p->cfg.num_layers, s * D);
                ParamLayout lay = gpt2_stage_param_layout(&p->cfg, ps.num_layers, ps.embed, ps.head);
                const ParamTensor* t = &lay.tensors[k];
                size_t shard = (lay.num_parameters + D - 1) / D;
                for (size_t i = 0; i < t->numel;) {
                    size_t local = t->offset + i, owner = sharded ? local / shard : 0;
                    size_t count = min_sz(sharded ? (owner + 1) * shard - local : t->numel - i, t->numel - i);
                    size_t root = (size_t)s * D + owner;
                    for (size_t j = 0; root != 0 && j < count; j += MEM_STAGE_FLOATS) {
                        size_t b = min_sz(count - j, MEM_STAGE_FLOATS) * 4;
                        it->calls++;
                        it->bytes += b;
                        if (wrank != (root + W - 1) % W) it->sent += b;
                        if (wrank != root) it->received += b;
                    }
                    i += count;
                }
            }
    }
}

static double card_peak_or_plan(double peak, Precision precision) { return peak > 0 ? peak : plan_card_peak(precision); }

void comm_plan_make(CommPlan* c, const MemoryPlan* p, int accum, const CommLink* link, double peak_flops,
                    const char* card) {
    memset(c, 0, sizeof(*c));
    const EngineOptions* o = &p->opts;
    // Every rank (W, this one wrank) and the ranks ZeRO combines: the stage's data-parallel ones.
    size_t W = o->num_ranks > 0 ? (size_t)o->num_ranks : 1, wrank = o->rank > 0 ? (size_t)o->rank : 0;
    size_t R = (size_t)p->pipe.dp_ranks, rank = (size_t)p->pipe.dp_rank;
    size_t X = p->floatx_bytes;
    int pp = p->pipe.stages > 1;
    c->rank = (int)wrank;
    c->ranks = (int)W;
    c->stage = o->zero_stage;
    c->offload = o->offload;
    c->precision = (Precision)o->precision;
    c->accum = accum > 0 ? accum : 1;
    c->link = *link;
    int grads_down = o->offload == OFFLOAD_GRADS;
    // Stages 0 and 1 reduce each layer's gradients beside the step's last backward (train_gpt2_zero.cuh),
    // unless --overlap 0.
    int overlap = !grads_down && c->stage < 2 && !o->no_overlap && !pp;  // -pp: reduced after the schedule

    if (R > 1) {
        // Gradients: with --offload grads every stage reduces bucket by bucket as backward makes
        // them (stage 0 all-reduces each), as does stage 2 (every micro-step); stages 0 and 1 otherwise
        // layer by layer beside the step's last backward, or with --overlap 0 once after it.
        if (overlap && c->stage == 0) {
            CommItem* it = add(c, "gradients, all-reduced by layer beside the last backward", COMM_ALLREDUCE,
                               COMM_PER_STEP, 1, X);
            for_each_bucket_piece(it, p, R, rank, allreduce_bucket);
        } else if (overlap) {
            CommItem* it = add(c, "gradients, reduced to their owners by layer beside the last backward", COMM_REDUCE,
                               COMM_PER_STEP, 1, X);
            for_each_bucket_piece(it, p, R, rank, reduce_piece);
        } else if (grads_down && c->stage == 0) {
            CommItem* it = add(c, "gradients, all-reduced by bucket", COMM_ALLREDUCE, COMM_PER_MICRO_STEP, 1, X);
            for_each_bucket_piece(it, p, R, rank, allreduce_bucket);
        } else if (grads_down || c->stage >= 2) {
            CommItem* it = add(c, "gradients, reduced to their owners by bucket", COMM_REDUCE, COMM_PER_MICRO_STEP,
                               1, X);
            for_each_bucket_piece(it, p, R, rank, reduce_piece);
        } else if (c->stage == 0) {
            CommItem* it = add(c, "gradients, all-reduced", COMM_ALLREDUCE, COMM_PER_STEP, 0, X);
            allreduce_piece(it, p->n, R, rank);
        } else {
            CommItem* it = add(c, "gradients, reduce-scattered", COMM_REDUCESCATTER, COMM_PER_STEP, 0, X);
            it->calls = 1;
            it->bytes = p->padded * X;
            it->sent = it->received = (R - 1) * p->shard * X;
        }
    }
    // The loss, squared norm and non-finite count (4 fp32), summed over every rank.
    if (W > 1) {
        CommItem* st = add(c, "step statistics, all-reduced", COMM_ALLREDUCE, COMM_PER_STEP, 0, 4);
        allreduce_piece(st, 4, W, wrank);
    }
    if (R > 1) {
        if (c->stage == 3) {
            CommItem* it = add(c, "parameters, gathered by layer before use", COMM_BROADCAST,
                               COMM_PER_MICRO_STEP, 1, X);
            zero3_gathers(it, p, R, rank);
        }
        if (c->stage == 1 && overlap) {
            CommItem* it = add(c, "parameters, gathered by layer beside the next forward", COMM_BROADCAST, COMM_PER_STEP,
                               2, X);
            zero1_gathers(it, p, R, rank);
        } else if (c->stage == 1 || c->stage == 2) {
            CommItem* it = add(c, "parameters, all-gathered after the update", COMM_ALLGATHER, COMM_PER_STEP, 0, X);
            it->calls = 1;
            it->bytes = p->padded * X;
            it->sent = it->received = (R - 1) * p->shard * X;
        }
        // A checkpoint of sharded fp32 master weights: each shard broadcast from its owner in pieces
        // of the device staging buffer (write_model_file).
        if (!pp && ((c->stage >= 1 && X != 4) || c->stage == 3)) {
            CommItem* it = add(c, "master weights to rank 0 for a checkpoint", COMM_BROADCAST, COMM_PER_CHECKPOINT, 0, 4);
            for (size_t owner = 0; owner < R; owner++) {
                size_t first = owner * p->shard, count = first >= p->n ? 0 : min_sz(p->n - first, p->shard);
                for (size_t i = 0; i < count; i += MEM_STAGE_FLOATS) {
                    size_t b = min_sz(count - i, MEM_STAGE_FLOATS) * 4;
                    it->calls++;
                    it->bytes += b;
                    if (rank != (owner + R - 1) % R) it->sent += b;  // the ring's last rank passes nothing on
                    if (rank != owner) it->received += b;
                }
            }
        }
    }
    // Pipeline stages: each micro-batch's activation to the next stage and its gradient back, B x T x C
    // floatX each (train_gpt2_pipe.cuh's send/recv, not beside compute in this model); the tied
    // embedding's gradient summed between the first and the last stage once a step; a checkpoint's
    // pieces to rank 0.
    if (pp) {
        c->p2p_bytes = (size_t)o->B * o->T * p->cfg.channels * X;
        size_t out = (size_t)!p->pipe.head + (size_t)!p->pipe.embed;  // forward to s + 1, backward to s - 1
        CommItem* snd = add(c, "activations, gradients to neighbouring stages", COMM_SEND, COMM_PER_MICRO_STEP, 0, X);
        snd->calls = out;
        snd->bytes = snd->sent = out * c->p2p_bytes;
        CommItem* rcv = add(c, "activations, gradients from neighbouring stages", COMM_RECV, COMM_PER_MICRO_STEP, 0, X);
        rcv->calls = out;
        rcv->bytes = rcv->received = out * c->p2p_bytes;
        if (p->pipe.embed || p->pipe.head) {
            CommItem* t = add(c, "tied embedding's gradient, first + last stage", COMM_ALLREDUCE, COMM_PER_STEP, 0, X);
            allreduce_piece(t, plan_layout(p).tensors[PT_WTE].numel, 2, p->pipe.head ? 1 : 0);
        }
        CommItem* ck = add(c, "m, v, weights to rank 0 for a checkpoint", COMM_BROADCAST, COMM_PER_CHECKPOINT, 0, 4);
        pipe_checkpoint_pieces(ck, p, W, wrank);
    }
    // Offload: this rank's optimizer range down (gradients) and up (updated weights) over the host
    // link. With --offload grads the gradients go down bucket by bucket on every micro-step.
    if (o->offload != OFFLOAD_NONE) {
        CommItem* down = add(c, grads_down ? "gradients to the host by bucket" : "gradients to the host",
                             COMM_TO_HOST, grads_down ? COMM_PER_MICRO_STEP : COMM_PER_STEP, grads_down, X);
        down->bytes = down->sent = p->opt_n * X;
        CommItem* up = add(c, "updated weights to the device", COMM_TO_DEVICE, COMM_PER_STEP, 0, X);
        up->bytes = up->received = p->opt_n * X;
    }

    // Totals and times per optimizer step.
    double over_link = 0, over_host = 0;  // seconds per micro-step of what overlaps backward
    double over_last = 0;                 // seconds a step of what overlaps the last backward only
    double over_next = 0;                 // seconds a step of what overlaps the next step's first forward
    for (int i = 0; i < c->count; i++) {
        const CommItem* it = &c->items[i];
        if (it->when == COMM_PER_CHECKPOINT) {
            c->checkpoint_sent += it->sent;
            c->checkpoint_received += it->received;
            continue;
        }
        size_t times = it->when == COMM_PER_MICRO_STEP ? (size_t)c->accum : 1;
        if (it->kind == COMM_TO_HOST) c->host_down_step += it->sent * times;
        else if (it->kind == COMM_TO_DEVICE) c->host_up_step += it->received * times;
        else {
            c->sent_step += it->sent * times;
            c->received_step += it->received * times;
        }
        int host = it->kind == COMM_TO_HOST || it->kind == COMM_TO_DEVICE;
        if (it->overlapped == 2) over_next += it->sent / link->bytes_per_s;
        else if (it->overlapped && it->when == COMM_PER_STEP) over_last += it->sent / link->bytes_per_s;
        else if (it->overlapped) {
            if (host) over_host += it->sent / COMM_HOST_LINK.bytes_per_s;
            else over_link += it->sent / link->bytes_per_s;
        }
    }
    c->comm_seconds = c->sent_step / link->bytes_per_s;
    // Down and up at different times (down after or beside backward, up after the update).
    c->host_seconds = (c->host_down_step + c->host_up_step) / COMM_HOST_LINK.bytes_per_s;
    c->overlapped_seconds = (over_link + over_host) * c->accum + over_last + over_next;

    // Compute (predicted): the kernel report's model on the card (time_model.h) where its counts cover
    // the configuration; else 6 FLOPs a parameter a token plus attention's, and recompute's extra, at
    // PLAN_MFU of the card's peak, saying why.
    double frac = plan_recompute_fraction(o->recompute);
    c->peak_flops = card_peak_or_plan(peak_flops, o->precision);
    snprintf(c->card, sizeof(c->card), "%s", peak_flops > 0 && card && *card ? card : PLAN_CARD);
    double tokens = (double)o->B * o->T * c->accum;
    c->tokens_step = (size_t)tokens;
    // A pipeline stage's FLOPs are its layers' and its tensors' (wte's only where it is the classifier:
    // the embedding is a lookup); the whole model's without -pp.
    double stage_n = (double)p->n - (p->pipe.embed && !p->pipe.head ? (double)plan_layout(p).tensors[PT_WTE].numel : 0.0);
    double per_token = pp ? 6.0 * stage_n + 6.0 * p->stage_cfg.num_layers * (double)p->cfg.channels * o->T
                          : gpt2_flops_per_token(&p->cfg, o->T);
    c->flops_step = per_token * tokens * (1.0 + frac);
    c->compute_seconds = c->peak_flops > 0 ? c->flops_step / (c->peak_flops * PLAN_MFU) : 0.0;
    const TimeGpu* tg = time_gpu_find(c->card);
    if (!tg) tg = time_gpu_for_device(c->card);
    char why[200] = "";
    if (tg) {
        TimeQuery q;
        memset(&q, 0, sizeof(q));
        q.L = pp ? p->stage_cfg.num_layers : p->cfg.num_layers;
        q.L_model = p->cfg.num_layers;
        q.embedding = !pp || p->pipe.embed;
        q.head = !pp || p->pipe.head;
        // The update: the rank's optimizer range of the model's parameters, none on the device with offload.
        q.optimizer_share = o->offload != OFFLOAD_NONE ? 0.0 : (double)p->opt_n / (double)gpt2_param_layout(&p->cfg).num_parameters;
        q.C = p->cfg.channels;
        q.NH = p->cfg.num_heads;
        q.V = p->cfg.vocab_size;
        q.T = o->T;
        q.B = o->B;
        q.precision = (Precision)o->precision;
        q.gelu_fusion = o->gelu_fusion;
        q.recompute = o->recompute;
        q.recompute_every = p->recompute_every;
        q.micro_steps = c->accum;
        TimeStep ts;
        if (time_model_step(tg, &q, &ts, why, sizeof(why))) {
            c->compute_seconds = ts.seconds;
            c->counted = 1;
            snprintf(c->time_model, sizeof(c->time_model), "the kernel report's model on the %s (%s)", tg->name, ts.counts);
        }
    } else {
        snprintf(why, sizeof(why), "the kernel report's model has no GPU called %s", c->card);
    }
    if (!c->counted)
        snprintf(c->time_model, sizeof(c->time_model), "%.0f%% MFU of the %s's peak (not the kernel report's model: %s)",
                 PLAN_MFU * 100, c->card, why);
    // Backward is two thirds of the plain step (4 of its 6 FLOPs a parameter), and runs recompute's
    // extra forward too.
    c->backward_seconds = c->compute_seconds * (2.0 / 3.0 + frac) / (1.0 + frac);
    // As this engine runs it: what overlaps backward hides up to backward's time on each micro-step
    // (stages 0 and 1's reductions under the last one only); stage 1's gather after the update hides
    // up to the next step's first forward (a third of a micro-step's plain compute: 2 of its 6 FLOPs
    // a parameter; its layers wait for their pieces in turn, so the model takes the gather as hidden
    // as long as it takes no longer than that forward); the rest (stage 2's all-gather after the
    // update, the statistics, offload's step copies, stages 0 and 1 with --overlap 0) adds to the step.
    double per_micro_backward = c->backward_seconds / c->accum;
    double per_micro_forward = c->compute_seconds / (3.0 * (1.0 + frac)) / c->accum;
    c->forward_seconds = per_micro_forward;
    // Offload's host work at the host's AdamW rate (its 28 bytes a parameter a second over the memory
    // traffic of each job): with --offload grads, the host adds every micro-step's gradients into its
    // fp32 sum (reads the floatX piece and the sum, writes the sum) as they come down beside backward,
    // so the longer of the copies and the adds is what backward has to hide.
    if (o->offload != OFFLOAD_NONE) c->host_adamw_per_s = o->host_adamw_per_s > 0 ? o->host_adamw_per_s : PLAN_HOST_ADAMW_PER_S;
    double host_sum = o->offload == OFFLOAD_GRADS ? (double)p->opt_n * (X + 8) / (28.0 * c->host_adamw_per_s) : 0.0;
    c->host_sum_seconds = host_sum * c->accum;
    double over_micro = over_link + fmax(over_host, host_sum);
    // Offload's copies that do not overlap backward, and the host's AdamW: the update runs in the
    // engine's 8 pieces (the CPU updates each as it lands while the next comes down and the one before
    // goes up), so the longer of the two plus an eighth of the shorter.
    double host = (c->host_down_step + c->host_up_step) / COMM_HOST_LINK.bytes_per_s - over_host * c->accum;
    if (o->offload != OFFLOAD_NONE) {
        c->host_update_seconds = (double)p->opt_n / c->host_adamw_per_s;
        host = fmax(host, c->host_update_seconds) + fmin(host, c->host_update_seconds) / 8;
    }
    double exposed = (c->comm_seconds - over_link * c->accum - over_last - over_next) + host;
    if (over_micro > per_micro_backward) exposed += (over_micro - per_micro_backward) * (c->accum - 1);
    if (over_micro + over_last > per_micro_backward) exposed += over_micro + over_last - per_micro_backward;
    if (over_next > per_micro_forward) exposed += over_next - per_micro_forward;
    c->exposed_seconds = exposed > 0 ? exposed : 0.0;
    c->pp_stages = p->pipe.stages;
    c->bubble = pipe_bubble(p->pipe.stages, c->accum);
    c->bubble_seconds = pp ? c->compute_seconds * (p->pipe.stages - 1) / c->accum : 0.0;
    c->step_seconds = c->compute_seconds + c->bubble_seconds + c->exposed_seconds;
    c->hides_if_overlapped = c->comm_seconds + c->host_seconds <= c->compute_seconds;
}

static const char* when_name(CommWhen w) {
    return w == COMM_PER_MICRO_STEP ? "micro-step" : w == COMM_PER_CHECKPOINT ? "checkpoint" : "step";
}

static const char* elem_name(size_t elem, Precision precision) {
    return elem == 4 ? "fp32" : precision == PRECISION_BF16 ? "bf16" : "fp16";
}

static double ms(double s) { return s * 1e3; }

static int over_next_forward(const CommPlan* c) {
    for (int i = 0; i < c->count; i++)
        if (c->items[i].overlapped == 2) return 1;
    return 0;
}

double comm_plan_step_seconds(const MemoryPlan* p, int accum, char* model, size_t cap) {
    const char* card = p->opts.plan_card[0] ? p->opts.plan_card : PLAN_CARD;
    CommLink link;
    char why[256];
    if (!comm_link_parse(p->opts.plan_link[0] ? p->opts.plan_link : "nvlink", &link, why, sizeof(why)))
        comm_link_parse("nvlink", &link, why, sizeof(why));  // --link was checked before any plan
    const TimeGpu* g = time_gpu_find(card);
    double peak = g ? gpu_peak_flops(g->name, g->arch / 10, g->arch % 10, (Precision)p->opts.precision, NULL, 0) : 0.0;
    CommPlan c;
    comm_plan_make(&c, p, accum, &link, peak, card);
    if (model) snprintf(model, cap, "%s", c.time_model);
    return c.step_seconds;
}

// The compute line: which model, the step's compute and backward's share of it.
static void print_compute(const CommPlan* c, FILE* f) {
    if (c->counted)
        fprintf(f, "compute (predicted by %s): %.3f ms a step per rank, backward %.3f ms of it (its share of the FLOPs)\n",
                c->time_model, ms(c->compute_seconds), ms(c->backward_seconds));
    else
        fprintf(f, "compute (predicted): %.4g TFLOP a step per rank (6 per parameter per token + attention, recompute's "
                   "extra forward) at %s, %.1f TFLOP/s = %.3f ms, backward %.3f ms of it\n",
                c->flops_step / 1e12, c->time_model, c->peak_flops / 1e12, ms(c->compute_seconds), ms(c->backward_seconds));
}

void comm_plan_print(const CommPlan* c, FILE* f) {
    if (c->count == 0) {
        fprintf(f, "communication: none (one rank, no offload)\n");
        print_compute(c, f);
        fprintf(f, "step %.3f ms (predicted), %.0f tokens/s\n", ms(c->step_seconds),
                (double)c->tokens_step / c->step_seconds);
        return;
    }
    // The precision each item travels in is in its row; the plan is one rank's.
    fprintf(f, "communication of rank %d of %d (ZeRO stage %d%s%s), %d micro-step%s a step; ring algorithm: all-reduce "
               "sends 2(N-1)/N·S a rank, reduce-scatter and all-gather (N-1)/N·S, a reduce to an owner S from each rank "
               "but the owner; a rank receives what the one before it sends:\n",
            c->rank, c->ranks, c->stage, c->offload ? ", offload " : "", c->offload ? offload_name(c->offload) : "",
            c->accum, c->accum == 1 ? "" : "s");
    fprintf(f, "| %-48s | %-10s | %-4s | %-8s | %6s | %15s | %15s | %15s | %10s |\n", "collective", "each", "as",
            "overlaps", "calls", "bytes moved", "sent", "received", "ms at link");
    fprintf(f, "|--------------------------------------------------|------------|------|----------|--------|-----------------|"
               "-----------------|-----------------|------------|\n");
    for (int i = 0; i < c->count; i++) {
        const CommItem* it = &c->items[i];
        int host = it->kind == COMM_TO_HOST || it->kind == COMM_TO_DEVICE;
        double bw = host ? COMM_HOST_LINK.bytes_per_s : c->link.bytes_per_s;
        size_t moved = host ? it->bytes : it->sent;
        char calls[24];
        if (host) snprintf(calls, sizeof(calls), "-");
        else snprintf(calls, sizeof(calls), "%zu", it->calls);
        fprintf(f, "| %-48s | %-10s | %-4s | %-8s | %6s | %15zu | %15zu | %15zu | %10.3f |\n", it->what, when_name(it->when),
                elem_name(it->elem_bytes, c->precision),
                it->overlapped == 2 ? "forward" : it->overlapped ? "backward" : "-", calls, it->bytes, it->sent,
                it->received, ms(moved / bw));
    }
    fprintf(f, "| %-48s | %-10s | %-4s | %-8s | %6s | %15s | %15zu | %15zu | %10.3f |\n",
            "between ranks, per optimizer step", "step", "", "", "", "", c->sent_step, c->received_step,
            ms(c->comm_seconds));
    if (c->host_down_step || c->host_up_step)
        fprintf(f, "| %-48s | %-10s | %-4s | %-8s | %6s | %15s | %15zu | %15zu | %10.3f |\n",
                "host link (down, up), per optimizer step", "step", "", "", "", "", c->host_down_step, c->host_up_step,
                ms(c->host_seconds));
    fprintf(f, "link between ranks: %s, %.0f GB/s per direction (%s)", c->link.name, c->link.bytes_per_s / 1e9,
            c->link.source);
    if (c->host_down_step || c->host_up_step)
        fprintf(f, "; host link: %.0f GB/s (%s)", COMM_HOST_LINK.bytes_per_s / 1e9, COMM_HOST_LINK.source);
    fprintf(f, "\n");
    print_compute(c, f);
    if (c->pp_stages > 1)
        fprintf(f, "pipeline (predicted): %d stages, %d micro-batches a step: the bubble (P - 1) / (m + P - 1) = %.1f%% of "
                   "the step, %.3f ms idle at this stage's compute; a stage boundary carries %zu bytes a micro-batch each "
                   "way (B x T x C), %.3f ms at the link\n",
                c->pp_stages, c->accum, 100.0 * c->bubble, ms(c->bubble_seconds), c->p2p_bytes,
                ms(c->p2p_bytes / c->link.bytes_per_s));
    if (c->host_sum_seconds > 0)
        fprintf(f, "offload: the host adds the gradients into its fp32 sum, %.3f ms a step, beside backward\n",
                ms(c->host_sum_seconds));
    if (c->host_update_seconds > 0)
        fprintf(f, "offload: the host's AdamW %.3f ms a step (%zu parameters at %.3g G a second: %s), pipelined with the "
                   "copies in 8 pieces\n", ms(c->host_update_seconds), (size_t)(c->host_update_seconds * c->host_adamw_per_s + 0.5),
                c->host_adamw_per_s / 1e9, c->host_adamw_per_s == PLAN_HOST_ADAMW_PER_S ?
                "build/dev/bench_adamw_host_fp16 on this project's 2-core machine; --host-adamw for another" : "--host-adamw");
    fprintf(f, "communication: %.3f ms a step between ranks", ms(c->comm_seconds));
    if (c->host_down_step || c->host_up_step) fprintf(f, " + %.3f ms on the host link", ms(c->host_seconds));
    fprintf(f, "; exposed as this engine runs it %.3f ms (%s), step %.3f ms (predicted); under compute it %s\n",
            ms(c->exposed_seconds),
            over_next_forward(c) ? "reductions beside backward, the parameter gather beside the next forward, the rest after them"
            : c->overlapped_seconds > 0 ? "bucket reductions beside backward, the rest after it"
                                        : "every collective runs after backward or the update",
            ms(c->step_seconds),
            c->hides_if_overlapped ? "could hide if every collective overlapped it"
                                   : "cannot hide: it takes longer than the compute");
}

void comm_plan_print_json(const CommPlan* c, const MemoryPlan* p, FILE* f) {
    fprintf(f, "{\"algorithm\": \"ring\", \"rank\": %d, \"ranks\": %d, \"micro_steps\": %d, "
               "\"link\": {\"name\": \"%s\", \"bytes_per_s\": %.0f}, \"host_link_bytes_per_s\": %.0f,\n  \"items\": [",
            c->rank, c->ranks, c->accum, c->link.name, c->link.bytes_per_s, COMM_HOST_LINK.bytes_per_s);
    for (int i = 0; i < c->count; i++) {
        const CommItem* it = &c->items[i];
        fprintf(f, "%s\n   {\"what\": \"%s\", \"kind\": \"%s\", \"each\": \"%s\", \"overlapped\": %s, \"element_bytes\": %zu, "
                   "\"calls\": %zu, \"bytes\": %zu, \"sent\": %zu, \"received\": %zu}",
                i ? "," : "", it->what, comm_kind_name(it->kind),
                it->when == COMM_PER_MICRO_STEP ? "micro_step" : it->when == COMM_PER_CHECKPOINT ? "checkpoint" : "step",
                it->overlapped ? "true" : "false", it->elem_bytes, it->calls, it->bytes, it->sent, it->received);
    }
    fprintf(f, "],\n  \"sent_per_step\": %zu, \"received_per_step\": %zu, \"host_down_per_step\": %zu, "
               "\"host_up_per_step\": %zu, \"checkpoint_sent\": %zu, \"checkpoint_received\": %zu,\n"
               "  \"comm_seconds\": %.9g, \"host_seconds\": %.9g, \"overlapped_seconds\": %.9g, \"card\": \"%s\", "
               "\"peak_flops\": %.6g, \"mfu\": %.2f, \"flops_per_step\": %.9g, \"time_model\": \"%s\", \"counted\": %s, "
               "\"compute_seconds\": %.9g, "
               "\"backward_seconds\": %.9g, \"forward_seconds\": %.9g, \"host_sum_seconds\": %.9g, \"host_update_seconds\": %.9g, \"exposed_seconds\": %.9g, \"step_seconds\": %.9g, "
               "\"tokens_per_step\": %zu, \"hides_if_overlapped\": %s",
            c->sent_step, c->received_step, c->host_down_step, c->host_up_step, c->checkpoint_sent, c->checkpoint_received,
            c->comm_seconds, c->host_seconds, c->overlapped_seconds, c->card, c->peak_flops, PLAN_MFU, c->flops_step,
            c->time_model, c->counted ? "true" : "false", c->compute_seconds, c->backward_seconds,
            c->forward_seconds, c->host_sum_seconds, c->host_update_seconds, c->exposed_seconds, c->step_seconds, c->tokens_step, c->hides_if_overlapped ? "true" : "false");
    if (c->pp_stages > 1)
        fprintf(f, ",\n  \"pipeline\": {\"stages\": %d, \"bubble\": %.6f, \"bubble_seconds\": %.9g, \"p2p_bytes_per_micro_step\": %zu, "
                   "\"p2p_seconds_per_micro_step\": %.9g}",
                c->pp_stages, c->bubble, c->bubble_seconds, c->p2p_bytes, c->p2p_bytes / c->link.bytes_per_s);
    // Every rank's totals: ranks differ when R does not divide the counts.
    if (c->ranks > 1 && c->ranks <= 16) {
        fprintf(f, ",\n  \"by_rank\": [");
        for (int r = 0; r < c->ranks; r++) {
            EngineOptions o = p->opts;
            o.rank = r;
            MemoryPlan pr;
            memory_plan_make(&pr, &p->cfg, &o);
            CommPlan cr;
            comm_plan_make(&cr, &pr, c->accum, &c->link, c->peak_flops, c->card);
            fprintf(f, "%s\n   {\"rank\": %d, \"sent_per_step\": %zu, \"received_per_step\": %zu, \"checkpoint_sent\": %zu, "
                       "\"checkpoint_received\": %zu, \"host_down_per_step\": %zu, \"host_up_per_step\": %zu, "
                       "\"sent_per_step_by_kind\": {", r ? "," : "", r, cr.sent_step, cr.received_step, cr.checkpoint_sent,
                    cr.checkpoint_received, cr.host_down_step, cr.host_up_step);
            // Micro-step items times the micro-steps: what a counter sees over one optimizer step.
            for (int k = 0; k <= COMM_RECV; k++) {  // the broadcasts: stage 3's gathers
                size_t sent = 0;
                for (int i = 0; i < cr.count; i++)
                    if (cr.items[i].kind == (CommKind)k && cr.items[i].when != COMM_PER_CHECKPOINT)
                        sent += cr.items[i].sent * (cr.items[i].when == COMM_PER_MICRO_STEP ? (size_t)cr.accum : 1);
                fprintf(f, "%s\"%s\": %zu", k ? ", " : "", comm_kind_name((CommKind)k), sent);
            }
            fprintf(f, "}}");
        }
        fprintf(f, "]");
    }
    fprintf(f, "}");
}
