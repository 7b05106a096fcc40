// train_gpt2_pipe.cuh: section 4b of train_gpt2.cu, pipeline parallelism (-pp P): the model split
// by layers into P stages, each rank holding only its stage's weights and its micro-batches'
// activations; 1F1B over the step's micro-steps; the activations and their gradients point to point
// between neighbouring stages. A piece of the trainer, not a library: train_gpt2.cu includes it once,
// after backward (section 4; ZeRO's collectives, section 3, combine a stage's data-parallel ranks),
// and it reads GPUEngine.
//
// What the engine gives it (gpu_engine_create, from the memory plan and common/pipeline.h):
//   stage     pipe (stages P, stage s, dp_ranks D, dp_rank, first_layer, num_layers, embed, head,
//             in_flight); cfg, layout, n and every buffer are the stage's (gpt2_stage_param_layout:
//             stage 0 holds wte and wpe, the last stage wte (the classifier: tied) and the final
//             LayerNorm); model: the whole model's shape; pp: P > 1
//   ranks     world_rank, world_ranks, world_comm (every rank); rank, num_ranks, comm: the stage's D
//             ranks (ZeRO's ranks); pipe_comm (the replica's P stages, its rank = the stage),
//             tied_comm (the replica's first and last stage)
//   buffers   acts_all: in_flight copies of one micro-batch's activations (acts_bytes each;
//             acts_base points at the copy in use); h_tokens, h_dloss: the step's micro-batches as the
//             driver gives them; queued: how many so far; dev_stage, h_stage: checkpoint pieces
//   streams   stream (compute), comm_stream; events pipe_ready, pipe_received, pipe_done
//
// What it does:
//   pipe_micro_step   keeps each micro-step's tokens; the step's last one runs pipe_schedule: 1F1B
//             (PipeDream-Flush) with the m micro-steps as micro-batches: stage s runs w = P - s - 1
//             forwards, then m - w pairs of a forward and a backward, then w backwards. Micro-batch
//             k's activations are copy k % in_flight. A stage's input is its copy's ACT_ENCODED (stage
//             0: the embedding), its output its last layer's residual3 (residual_forward: the next
//             stage's first LayerNorm is that stage's); backward's gradient of the output arrives in
//             SCR_DRESIDUAL and leaves from it as the gradient of the input. Between neighbours,
//             B x T x C floatX each way, NCCL send/recv on comm_stream in Megatron's pairs: after a
//             steady forward {send the output, receive the output's gradient}, after a steady
//             backward {send the input's gradient, receive the next input}, each pair one NCCL group
//             (the neighbour's matching pair is the mirror), the warm-up and cool-down alone.
//   pipe_forward_only evaluation and sampling: one forward through the replica's stages; the loss
//             broadcast from the last stage to the replica (pipe_comm), the logits row to every rank
//             (ranks_broadcast: every replica's are the same)
//   pipe_step_gradients  before the update: the tied embedding's gradient all-reduced between the
//             first and the last stage (tied_comm), in place on both, so both apply one update
//   pipe_norm_skip    the last stage's copy of wte is left out of the global norm (counted once)
//   pipe_checkpoint_save / pipe_state_sink  the files are the usual whole ones: rank 0 writes them,
//             each piece (in the model's order) broadcast to it over world_comm from the rank holding
//             it; a resume reads the whole files and keeps its stage's part (any -pp, -z, rank count)
//   pipe_comm_init / pipe_comm_destroy  the communicators above (ncclCommSplit of world_comm)
// The step's statistics (reduce_step_stats) are summed over world_comm: every stage's part of the
// gradient norm and non-finite count, the last stages' losses; one decision for all stages.
//
// When it synchronizes: every NCCL group on comm_stream first waits (pipe_ready, recorded on the
// compute stream as the group is issued) for what the compute stream issued before it: the output it
// sends, the gradient it sends, and every read of the buffer it receives into (a copy's ACT_ENCODED
// was last read by that copy's previous micro-batch's backward; SCR_DRESIDUAL by the last backward).
// A group that receives records pipe_received, and the compute stream waits for it at once (what it
// issues next reads what arrived). A send needs no wait of its own: in 1F1B the compute stream writes
// a sent buffer again only after waiting for a receive queued behind the send on comm_stream (copy
// c's output is rewritten by micro-batch k + in_flight's forward, after micro-batch k's backward
// waited for the output's gradient, received after the output was sent; SCR_DRESIDUAL by the next
// backward, after the group that sent it received too, or after the next receive into it). The
// schedule ends with the compute stream waiting for everything on comm_stream (pipe_done): the
// step's collectives on other communicators (tied_comm, comm, world_comm) come after the last send.
// test/test_pipeline.sh removes each of these calls in turn and expects the CPU runtime to name the
// race (or the send that then never meets its receive).
//
// What it guarantees: each stage runs the same micro-batches in the same order and adds their
// gradients in the same order as one process, so a pipelined run equals one process taking the same
// global batch and micro-steps within the rounding of the tied embedding's sum (the two stages'
// parts added once at the end instead of micro-step by micro-step) and of the norm's partial sums
// (test/test_pipeline.sh: FP32 within 1e-5, every step); run to run it is bit-identical.

#if defined(USE_NCCL)

enum { PIPE_SEND_FWD = 1, PIPE_RECV_BWD = 2, PIPE_SEND_BWD = 4, PIPE_RECV_FWD = 8 };

// Micro-batch k's copy of the activations becomes the one act_ptr reads.
static void pipe_use_copy(GPUEngine* g, int k) {
    g->acts_base = (char*)g->acts_all + (size_t)(k % g->pipe.in_flight) * g->acts_bytes;
}

// One NCCL group on comm_stream: `what` of the four transfers, the forward ones of micro-batch k's
// copy; n = B x T x C elements each.
static void pipe_group(GPUEngine* g, int what, int k, size_t n) {
    int s = g->pipe.stage;
    cudaCheck(cudaEventRecord(g->pipe_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->pipe_ready, 0));
    floatX* dresidual = scratch_ptr<floatX>(g, SCR_DRESIDUAL);
    if (what & (PIPE_SEND_FWD | PIPE_RECV_FWD)) pipe_use_copy(g, k);
    ncclCheck(ncclGroupStart());
    if (what & PIPE_SEND_FWD)
        ncclCheck(ncclSend(residual_out(g, g->cfg.num_layers - 1), n, nccl_floatx(), s + 1, g->pipe_comm, g->comm_stream));
    if (what & PIPE_RECV_BWD) ncclCheck(ncclRecv(dresidual, n, nccl_floatx(), s + 1, g->pipe_comm, g->comm_stream));
    if (what & PIPE_SEND_BWD) ncclCheck(ncclSend(dresidual, n, nccl_floatx(), s - 1, g->pipe_comm, g->comm_stream));
    if (what & PIPE_RECV_FWD)
        ncclCheck(ncclRecv(act_ptr<floatX>(g, ACT_ENCODED), n, nccl_floatx(), s - 1, g->pipe_comm, g->comm_stream));
    ncclCheck(ncclGroupEnd());
    if (what & (PIPE_RECV_BWD | PIPE_RECV_FWD)) {
        cudaCheck(cudaEventRecord(g->pipe_received, g->comm_stream));
        cudaCheck(cudaStreamWaitEvent(g->stream, g->pipe_received, 0));
    }
}

// Micro-batch k's forward on copy k % in_flight (its input already there: the embedding's tokens
// uploaded here, or the previous stage's output received).
static void pipe_forward(GPUEngine* g, int k, int B, int T) {
    int BT = B * T;
    pipe_use_copy(g, k);
    const int* tokens = g->h_tokens + (size_t)k * 2 * BT;
    if (g->pipe.embed) upload_tokens(g, ACT_INPUTS, tokens, BT);
    if (g->pipe.head) upload_tokens(g, ACT_TARGETS, tokens + BT, BT);  // the classifier's, in backward
    gpu_forward_pass(g, B, T);
}

// Micro-batch j's backward (the gradient of its output received already, or the last stage's loss).
static void pipe_backward(GPUEngine* g, int j, int B, int T) {
    int BT = B * T;
    pipe_use_copy(g, j);
    int plan_blocks = 0;
    if (g->pipe.embed) {  // the embedding's backward groups micro-batch j's positions by token
        plan_blocks = encoder_backward_plan(g->h_plan, g->h_keys, g->h_tokens + (size_t)j * 2 * BT, BT);
        cudaCheck(cudaMemcpyAsync(scratch_ptr<int>(g, SCR_PLAN), g->h_plan,
                                  encoder_plan_used_ints(BT, plan_blocks) * sizeof(int), cudaMemcpyHostToDevice, g->stream));
    }
    gpu_backward_pass(g, B, T, g->h_dloss[j], plan_blocks, 0);
}

// The compute stream waits for everything on comm_stream.
static void pipe_flush(GPUEngine* g) {
    cudaCheck(cudaEventRecord(g->pipe_done, g->comm_stream));
    cudaCheck(cudaStreamWaitEvent(g->stream, g->pipe_done, 0));
}

// 1F1B over the step's m micro-batches (m >= P: the driver refuses fewer).
static void pipe_schedule(GPUEngine* g, int B, int T) {
    int P = g->pipe.stages, s = g->pipe.stage, m = g->queued;
    int first = s == 0, last = s == P - 1, w = P - s - 1, steady = m - w;
    size_t n = (size_t)B * T * g->cfg.channels;
    for (int i = 0; i < w; i++) {  // warm-up: forwards only (never the last stage)
        if (!first) pipe_group(g, PIPE_RECV_FWD, i, n);
        pipe_forward(g, i, B, T);
        pipe_group(g, PIPE_SEND_FWD, i, n);
    }
    for (int j = 0; j < steady; j++) {  // one forward, one backward
        int k = w + j;
        if (j == 0 && !first) pipe_group(g, PIPE_RECV_FWD, k, n);
        pipe_forward(g, k, B, T);
        if (!last) pipe_group(g, PIPE_SEND_FWD | PIPE_RECV_BWD, k, n);
        pipe_backward(g, j, B, T);
        if (!first) pipe_group(g, j + 1 < steady ? PIPE_SEND_BWD | PIPE_RECV_FWD : PIPE_SEND_BWD, k + 1, n);
    }
    for (int j = steady; j < m; j++) {  // cool-down: backwards only (never the last stage)
        pipe_group(g, PIPE_RECV_BWD, j, n);
        pipe_backward(g, j, B, T);
        if (!first) pipe_group(g, PIPE_SEND_BWD, j, n);
    }
    pipe_flush(g);
}

// The engine's micro_step with -pp: the micro-batch kept (its tokens, its share of the objective);
// the step's last runs the schedule.
static void pipe_micro_step(GPUEngine* g, const int* inputs, const int* targets, int B, int T, float dloss_scale,
                            int is_last) {
    int m = g->opts.micro_steps > 0 ? g->opts.micro_steps : 1, BT = B * T;
    if (g->queued == 0) {
        g->cur_B = B;
        g->cur_T = T;
    }
    if (g->queued >= m || B != g->cur_B || T != g->cur_T)
        fatal("GPU engine: -pp takes the step's %d micro-steps of one shape (micro-step %d: B=%d T=%d after B=%d T=%d)", m,
              g->queued + 1, B, T, g->cur_B, g->cur_T);
    int* tokens = g->h_tokens + (size_t)g->queued * 2 * BT;
    memcpy(tokens, inputs, (size_t)BT * sizeof(int));
    memcpy(tokens + BT, targets, (size_t)BT * sizeof(int));
    g->h_dloss[g->queued++] = dloss_scale;
    if (!is_last) return;
    if (g->queued != m) fatal("GPU engine: -pp: the step ended after %d of its %d micro-steps", g->queued, m);
    pipe_schedule(g, B, T);
    g->queued = 0;
    g->logits_valid = 0;
}

// Evaluation and sampling: micro-batch 0's copy through the replica's stages. Returns the mean loss
// on every stage of the replica (with targets), the logits staying on its last stage.
static float pipe_forward_only(GPUEngine* g, const int* inputs, const int* targets, int B, int T) {
    int BT = B * T;
    size_t n = (size_t)BT * g->cfg.channels;
    if (!g->pipe.embed) pipe_group(g, PIPE_RECV_FWD, 0, n);
    memcpy(g->h_tokens, inputs, (size_t)BT * sizeof(int));
    if (targets) memcpy(g->h_tokens + BT, targets, (size_t)BT * sizeof(int));
    else memset(g->h_tokens + BT, 0, (size_t)BT * sizeof(int));
    pipe_forward(g, 0, B, T);
    if (!g->pipe.head) pipe_group(g, PIPE_SEND_FWD, 0, n);
    if (!targets) {
        pipe_flush(g);
        return 0.0f;
    }
    float* stats = scratch_ptr<float>(g, SCR_STATS);
    cudaCheck(cudaMemsetAsync(stats + 1, 0, sizeof(float), g->stream));
    if (g->pipe.head) {
        fused_classifier(act_ptr<floatX>(g, ACT_LOGITS), act_ptr<float>(g, ACT_LOSSES), act_ptr<int>(g, ACT_TARGETS),
                         0.0f, BT, g->cfg.vocab_size, g->cfg.padded_vocab_size, 0, stats + 1, 1.0f,
                         (unsigned*)(stats + 4), g->stream);
    }
    // The loss from the last stage to the replica's others, on comm_stream (pipe_comm's stream).
    cudaCheck(cudaEventRecord(g->pipe_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->pipe_ready, 0));
    ncclCheck(ncclBroadcast(stats + 1, stats + 1, 1, ncclFloat32, g->pipe.stages - 1, g->pipe_comm, g->comm_stream));
    pipe_flush(g);
    float loss;
    cudaCheck(cudaMemcpyAsync(&loss, stats + 1, sizeof(float), cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
    return loss;
}

// Sampling's logits row on every rank: from the last stage of replica 0 (every replica's are the
// same: the same weights, the same context).
static void pipe_logits_row(GPUEngine* g, const floatX* row, int V) {
    if (g->pipe.head && g->pipe.dp_rank == 0) {
        cudaCheck(cudaMemcpyAsync(g->h_stage_x, row, (size_t)V * sizeof(floatX), cudaMemcpyDeviceToHost, g->stream));
        cudaCheck(cudaStreamSynchronize(g->stream));
    }
    ranks_broadcast(g->h_stage_x, (size_t)V * sizeof(floatX), (g->pipe.stages - 1) * g->pipe.dp_ranks);
}

// Before the update: the first stage's gradient of wte (the embedding's) and the last stage's (the
// classifier's) summed, in place on both (one rounding: the same bits on both).
static void pipe_step_gradients(GPUEngine* g) {
    if (!g->pp || !(g->pipe.embed || g->pipe.head)) return;
    const ParamTensor* wte = &g->layout.tensors[PT_WTE];
    floatX* d = g->grads + wte->offset;
    ncclCheck(ncclAllReduce(d, d, wte->numel, nccl_floatx(), ncclSum, g->tied_comm, g->stream));
}

// Entries at the start of this rank's gradient shard that the global norm leaves out: on the last
// stage, its copy of wte (the first stage counts it).
static size_t pipe_norm_skip(GPUEngine* g) {
    if (!g->pp || g->pipe.embed) return 0;
    size_t wte_end = g->layout.tensors[PT_WTE].offset + g->layout.tensors[PT_WTE].numel;
    if (wte_end <= g->shard_begin) return 0;
    return wte_end - g->shard_begin < g->shard_n ? wte_end - g->shard_begin : g->shard_n;
}

// ---- checkpoints: the usual whole files, rank 0 writing ----

// The layout of stage s of this run.
static ParamLayout pipe_stage_layout(GPUEngine* g, int s) {
    PipeStage ps = pipe_stage(&g->opts, g->model.num_layers, s * g->pipe.dp_ranks);
    return gpt2_stage_param_layout(&g->model, ps.num_layers, ps.embed, ps.head);
}

// fn(owner world rank, the owner's index into its array, count) for the model's parameters in file
// order, in pieces each one rank holds: a tensor's slice of each stage in turn (wte: the first
// stage's copy), within a stage split at its data-parallel shards when `sharded` (the array holds
// the rank's shard, from its first entry) and held by its first rank otherwise (the array the whole
// stage's: index = the entry).
template <class Fn>
static void pipe_walk_owners(GPUEngine* g, int sharded, Fn fn) {
    int P = g->pipe.stages, D = g->pipe.dp_ranks;
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++)
        for (int s = 0; s < P; s++) {
            if (k == PT_WTE && s > 0) continue;  // the last stage's copy is the first's
            ParamLayout lay = pipe_stage_layout(g, s);
            const ParamTensor* t = &lay.tensors[k];
            size_t shard = (lay.num_parameters + D - 1) / D;
            for (size_t i = 0; i < t->numel;) {
                size_t local = t->offset + i, owner = sharded ? local / shard : 0;
                size_t count = sharded ? (owner + 1) * shard - local : t->numel - i;
                if (count > t->numel - i) count = t->numel - i;
                fn(s * D + (int)owner, local - owner * (sharded ? shard : 0), count);
                i += count;
            }
        }
}

// The fp32 array `src` (device or host: on_host) of every rank, walked as above, into w on rank 0:
// each piece of STAGE_FLOATS at most broadcast from its owner over world_comm (rank 0's own
// downloaded), rank 0 putting it in order.
static void pipe_write_pieces(GPUEngine* g, CheckpointWriter* w, const float* src, int on_host, int sharded) {
    pipe_walk_owners(g, sharded, [&](int owner, size_t index, size_t count) {
        for (size_t i = 0; i < count; i += STAGE_FLOATS) {
            size_t k = count - i < STAGE_FLOATS ? count - i : STAGE_FLOATS;
            if (owner == 0) {
                if (g->world_rank == 0) download_to_file(g, w, src + index + i, k, on_host);
                continue;
            }
            if (g->world_rank == owner)
                cudaCheck(cudaMemcpyAsync(g->dev_stage, src + index + i, k * sizeof(float),
                                          on_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice, g->stream));
            ncclCheck(ncclBroadcast(g->dev_stage, g->dev_stage, k, ncclFloat32, owner, g->world_comm, g->stream));
            if (g->world_rank == 0) {
                cudaCheck(cudaMemcpyAsync(g->h_stage, g->dev_stage, k * sizeof(float), cudaMemcpyDeviceToHost, g->stream));
                cudaCheck(cudaStreamSynchronize(g->stream));
                checkpoint_put(w, g->h_stage, k);
            }
        }
    });
}

// Collective: the state file (m, v: one whole file), then, once it is on disk, the model file (the
// fp32 master weights), both by rank 0, as one process writes them.
static void pipe_checkpoint_save(GPUEngine* g, const char* model_path, const char* state_path, const TrainState* st,
                                 const OptimizerCounters* oc) {
    size_t n = gpt2_param_layout(&g->model).num_parameters;
    int opt_sharded = g->stage > 0 && g->num_ranks > 1;
    CheckpointWriter w;
    if (g->world_rank == 0) {
        StateShard whole = {0, n, 0, 1};
        state_file_begin_shard(&w, state_path, &g->model, st, oc, n, &whole);
    }
    pipe_write_pieces(g, &w, g->m, g->offload, opt_sharded);
    pipe_write_pieces(g, &w, g->v, g->offload, opt_sharded);
    if (g->world_rank == 0) checkpoint_commit(&w);
    ranks_barrier();
    int on_host = 0;
    const float* weights = master_weights(g, &on_host);
    // The master copy is the optimizer's range (sharded with it); in FP32 the parameters, whole.
    int weights_sharded = g->master && opt_sharded;
    if (g->world_rank == 0) model_file_begin_checkpoint(&w, model_path, &g->model, st);
    pipe_write_pieces(g, &w, weights, on_host, weights_sharded);
    if (g->world_rank == 0) checkpoint_commit(&w);
    ranks_barrier();
}

// The communicators: the stage's data-parallel ranks (ZeRO's, when D > 1), the replica's stages
// (its rank the stage), the replica's first and last stage; every rank makes the same splits.
static void pipe_comm_init(GPUEngine* g) {
    const PipeStage* p = &g->pipe;
    if (p->dp_ranks > 1) ncclCheck(ncclCommSplit(g->world_comm, p->stage, p->dp_rank, &g->comm, NULL));
    ncclCheck(ncclCommSplit(g->world_comm, p->dp_rank, p->stage, &g->pipe_comm, NULL));
    int tied = p->embed || p->head;
    ncclCheck(ncclCommSplit(g->world_comm, tied ? p->dp_rank : NCCL_SPLIT_NOCOLOR, p->stage, &g->tied_comm, NULL));
}

static void pipe_comm_destroy(GPUEngine* g) {
    if (g->tied_comm) ncclCheck(ncclCommDestroy(g->tied_comm));
    if (g->pipe_comm) ncclCheck(ncclCommDestroy(g->pipe_comm));
}

#else  // one process: there is no pipeline (gpu_engine_create refuses -pp without NCCL)

static void pipe_micro_step(GPUEngine* g, const int*, const int*, int, int, float, int) { collectives_missing(g); }
static float pipe_forward_only(GPUEngine* g, const int*, const int*, int, int) {
    collectives_missing(g);
    return 0.0f;
}
static void pipe_logits_row(GPUEngine* g, const floatX*, int) { collectives_missing(g); }
static void pipe_step_gradients(GPUEngine*) {}
static size_t pipe_norm_skip(GPUEngine*) { return 0; }
static void pipe_checkpoint_save(GPUEngine* g, const char*, const char*, const TrainState*, const OptimizerCounters*) {
    collectives_missing(g);
}
static void pipe_comm_init(GPUEngine* g) { collectives_missing(g); }
static void pipe_comm_destroy(GPUEngine*) {}

#endif
