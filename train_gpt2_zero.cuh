// train_gpt2_zero.cuh: section 3 of train_gpt2.cu, ranks and ZeRO: the collectives that turn each
// rank's gradients into the step's summed gradient of its shard, and the shards' updated
// parameters back into every rank's whole model (stage 3: into each layer's gather buffer, just
// before forward or backward reads it). It is a piece of the trainer, not a library:
// train_gpt2.cu includes it once, after the engine's state (section 1), and it reads GPUEngine.
//
// What the engine gives it (made in gpu_engine_create from the memory plan, common/memory_plan.c):
//   ranks     rank, num_ranks, stage (0-3), comm (one NCCL communicator; NULL with one rank); with
//             -pp a pipeline stage's data-parallel ranks (section 4b), world_comm every rank's
//   shards    shard (entries a shard, padded), shard_begin, shard_n; opt_begin, opt_n: the range
//             this rank's optimizer keeps (stage 0 all n, else its shard)
//   buffers   params (stages 0-2: padded, gpt2_param_layout() order; stage 3: this rank's shard, its
//             first entry parameter params_first), grads (stages 0, 1: padded, same order); stage 3:
//             layer_params[2], embed_params, lnf_params (laid out as the buckets below), gathered[2]
//             (the layer buffer b holds), edges_gathered; stages 2, 3 and offload grads: grads is carved into layer_bucket[2] (one layer's 12 tensors at
//             bucket_offset[]), embed_bucket (wte, wpe), lnf_bucket; shard_grads, grad_acc (fp32);
//             offload grads: h_landing, h_grad_acc on the host, landing_layer[2]
//   streams   stream (compute), comm_stream; events bucket_ready/bucket_free[2], edge_ready,
//             edge_free, comm_done, landed[2], edge_landed, overlap_ready, gather_free[2],
//             gather_done[2], edge_gather_free, edge_gather_done, params_ready[L + 2] (stage 1
//             with overlap only) (the engine makes them); params_pending
//   switches  overlap (stages 0, 1 over ranks, unless --overlap 0); backward's `reduce` argument:
//             the step's last micro-step
//   tables    layout.tensors (offsets, sizes), cfg.num_layers; kernels shard_accumulate/shard_round
//
// What it does, per stage (gradients carry 1/num_ranks, so sums over ranks are the global mean):
//   stage 0  on the step's last micro-step backward calls overlap_reduce_layer(l) as each layer's
//            gradients are final, then overlap_reduce_edges: ncclAllReduce of each tensor's slice
//            in place on comm_stream (one NCCL group a layer) while backward goes on; every rank
//            updates everything (gather: nothing). --overlap 0: reduce_step_gradients all-reduces
//            all of grads on the compute stream after backward
//   stage 1  the same calls, each slice ncclReduce'd to its owners in place, into the owner's own
//            slice of grads; --overlap 0: one ncclReduceScatter in place (rank r's sum lands in
//            its own slice), compute stream. After the update gather_parameters calls
//            zero1_gather_pieces: the parameters go back piece by piece in place in params on
//            comm_stream, in the next forward's order: the embeddings, each layer (its 12 tensors'
//            slices, one NCCL group), the final LayerNorm, each piece gather_from_owners (stage 3's
//            broadcasts from the owners) and params_ready[i] recorded after it; the next forward
//            waits for each just before reading it (zero3_begin_pass, zero3_layer, and the final
//            LayerNorm's zero1_wait_lnf). --overlap 0: one ncclAllGather in place on the compute
//            stream after the update
//   stage 3  parameters: each forward pass starts with zero3_begin_pass (the embeddings' and final
//            LayerNorm's gathered and waited for, layer 0's started); before the compute stream reads
//            layer l, zero3_layer(l) gathers it into layer_params[l % 2] unless that holds it, and
//            waits; forward prefetches l + 1 as layer l starts (its output's LayerNorm needs it),
//            backward l - 1 (zero3_backward_layer; not across a level-3 segment's first layer).
//            A gather is gather_from_owners: one ncclBroadcast from each owner of each tensor's
//            slice (one NCCL group a layer) on comm_stream. Gradients as stage 2; nothing after the
//            update (gather_parameters: nothing). With --offload the host updates the rank's shard
//            (train_gpt2.cu's offload_adamw) and copies the floatX result up on comm_stream into
//            params, the shard the next pass's gathers read: no collective, no all-gather
//   stage 2  backward calls bucket_begin_edges, then per layer bucket_begin_layer(l) and
//            bucket_reduce_layer(l), then bucket_reduce_edges: each bucket is ncclReduce'd piece by
//            piece to the rank owning it (one NCCL group a bucket) on comm_stream while backward
//            goes on, and shard_accumulate adds the micro-step's shard into grad_acc (fp32);
//            reduce_step_gradients rounds grad_acc into shard_grads; gather as stage 1
//   offload grads  the same buckets, reduced (all-reduce at stage 0, to the owners in place at
//            stages 1-3) then copied to h_landing and summed on the host's CPU threads into h_grad_acc
//   every stage  reduce_step_stats: ncclAllReduce of the 4 step statistics on the compute stream (over
//            every rank: with -pp, every stage's; comm is then a pipeline stage's data-parallel ranks)
//
// When it synchronizes: a bucket's reduction waits (comm_stream on bucket_ready / edge_ready) for
// backward to have filled it; backward waits (stream on bucket_free / edge_free) before zeroing a
// bucket for reuse, two layers later; the optimizer waits (stream on comm_done) for the step's last
// accumulation. Stages 0, 1: each layer's (and the edges') reduction waits (comm_stream on
// overlap_ready) for backward to have finished it; nothing waits before backward goes on (the
// next writes to those gradients come after the update); the optimizer waits (stream on
// comm_done, overlap_step_gradients) before reading them. Stage 1's gather after the update waits
// (comm_stream on edge_gather_free, recorded on the compute stream after the update) for the
// update to have written the shards, and everything earlier on that stream to have read the
// parameters; the compute stream waits for params_ready[i] (the embeddings before the encoder, layer
// l before its first LayerNorm, the final LayerNorm before it) in the first forward after the
// update, whatever calls it (training, validation, sampling, HellaSwag); the last wait clears
// params_pending. Nothing else reads the parameters in between: a checkpoint and the engine's end
// synchronize the host with both streams first (gpu_checkpoint_save, gpu_destroy), and weights
// loaded in (cudaMemcpy on the legacy stream) come after every blocking stream's work. The next
// update is ordered after the gathers too: its forward waited for them. With --overlap 0 they add no
// synchronization: their collectives run in order on the compute stream. The host waits only with
// offload grads: on landed[b] before reusing landing bucket b, and on edge_landed at the end of each
// micro-step. Stage 3: a gather into buffer b waits (comm_stream on gather_free[b], edge_gather_free:
// recorded on the compute stream as the gather is issued) for every read of what b held; the compute
// stream waits (gather_done[b], edge_gather_done) before reading what it gathered; a prefetch never
// targets the buffer of the layer being run. Stage 3 with --offload adds no synchronization: the
// weights' upload into params is queued on comm_stream ahead of the next pass's gathers, which read
// it in stream order (and the compute stream waits for those gathers). test/test_stream_sync.sh
// removes each of these calls in turn and expects the CPU runtime to name the race.
//
// What it guarantees: no float atomics and a fixed order of every sum, so a run is bit-identical
// run to run and on resume at the same rank count; stages 0 and 1 give the same bits reduced beside
// backward or after it (test/test_zero_overlap.sh: 2 ranks, where a sum of two is one rounding
// whatever the order; at 3 or more ranks real NCCL's ring may add a piece's ranks in another order
// than the whole buffer's, within rounding); each stage equals one process taking the same
// global batch by accumulation within rounding (test/test_zero.sh, test_zero3.sh, test_zero.cu); the bytes
// each stage sends equal the planner's closed form (test/test_comm_volume.sh). With one rank the
// collectives are copies or nothing, so every stage runs without NCCL too.


#if !defined(USE_NCCL)
static void collectives_missing(GPUEngine* g) {
    fatal("%d ranks need NCCL, and this trainer was built without it (nccl.h not found at make time)", g->num_ranks);
}
#endif

#if defined(USE_NCCL)
static void nccl_check(ncclResult_t r, const char* call, const char* file, int line) {
    if (r != ncclSuccess) fail_at("NCCL", call, file, line, ncclGetErrorString(r));
}
#define ncclCheck(call) nccl_check((call), #call, __FILE__, __LINE__)
static ncclDataType_t nccl_floatx(void) {
    return sizeof(floatX) == 4 ? ncclFloat32 : CUDA_R_FLOATX == CUDA_R_16F ? ncclFloat16 : ncclBfloat16;
}
#endif

// Sums the entries [begin, begin + count) of bucket (whose first entry is parameter `base`) over
// all ranks, each piece of it into the shard_grads of the rank that owns it.
static void reduce_to_owners(GPUEngine* g, const floatX* bucket, size_t base, size_t begin, size_t count,
                             cudaStream_t st) {
    for (int owner = 0; owner < g->num_ranks; owner++) {
        size_t lo = owner * g->shard, hi = lo + g->shard;
        size_t a = begin > lo ? begin : lo, b = begin + count < hi ? begin + count : hi;
        if (a >= b) continue;
        const floatX* src = bucket + (a - base);
        floatX* dst = g->shard_grads + (a - lo);
        if (g->num_ranks == 1) {
            cudaCheck(cudaMemcpyAsync(dst, src, (b - a) * sizeof(floatX), cudaMemcpyDeviceToDevice, st));
            continue;
        }
#if defined(USE_NCCL)
        ncclCheck(ncclReduce(src, dst, b - a, nccl_floatx(), ncclSum, owner, g->comm, st));
#else
        collectives_missing(g);
#endif
    }
}

// --offload grads: the gradients of count parameters from `global` on, held in the bucket at src,
// summed over ranks in place (every rank's copy at stage 0, each owner's piece at stages 1-3),
// then the part in this rank's optimizer range copied down to the same place in the landing area.
static void offload_reduce_piece(GPUEngine* g, floatX* src, size_t global, size_t count, cudaStream_t st) {
    if (g->num_ranks > 1) {
#if defined(USE_NCCL)
        if (g->stage == 0) {
            ncclCheck(ncclAllReduce(src, src, count, nccl_floatx(), ncclSum, g->comm, st));
        } else {
            for (int owner = 0; owner < g->num_ranks; owner++) {
                size_t lo = owner * g->shard, hi = lo + g->shard;
                size_t a = global > lo ? global : lo, b = global + count < hi ? global + count : hi;
                if (a < b) ncclCheck(ncclReduce(src + (a - global), src + (a - global), b - a, nccl_floatx(), ncclSum,
                                                owner, g->comm, st));
            }
        }
#else
        collectives_missing(g);
#endif
    }
    size_t lo = g->opt_begin, hi = g->opt_begin + g->opt_n;
    size_t a = global > lo ? global : lo, b = global + count < hi ? global + count : hi;
    if (a < b)
        cudaCheck(cudaMemcpyAsync(g->h_landing + (src - g->grads) + (a - global), src + (a - global),
                                  (b - a) * sizeof(floatX), cudaMemcpyDeviceToHost, st));
}

// The landed part of that piece added to the host's fp32 sums (on CPU threads).
static void offload_accumulate_piece(GPUEngine* g, const floatX* src, size_t global, size_t count) {
    size_t lo = g->opt_begin, hi = g->opt_begin + g->opt_n;
    size_t a = global > lo ? global : lo, b = global + count < hi ? global + count : hi;
    if (a >= b) return;
    const floatX* land = g->h_landing + (src - g->grads) + (a - global);
    float* acc = g->h_grad_acc + (a - lo);
    size_t n = b - a;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += (float)land[i];
}

// The pieces of layer l's bucket b, one per layer tensor: fn(g, bucket slice, first parameter, count).
template <class Fn>
static void for_each_layer_piece(GPUEngine* g, int l, Fn fn) {
    for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {
        const ParamTensor* t = &g->layout.tensors[k];
        size_t per_layer = t->numel / g->cfg.num_layers;
        fn(g->layer_bucket[l % 2] + g->bucket_offset[k], t->offset + (size_t)l * per_layer, per_layer);
    }
}

// offload_grads: the host waits for the copy into landing bucket b (a layer two steps later in
// backward, long since enqueued) and adds it to its sums, before that landing space is reused.
static void offload_settle_layer(GPUEngine* g, int b) {
    int l = g->landing_layer[b];
    if (l < 0) return;
    cudaCheck(cudaEventSynchronize(g->landed[b]));
    for_each_layer_piece(g, l, [&](floatX* src, size_t global, size_t count) { offload_accumulate_piece(g, src, global, count); });
    g->landing_layer[b] = -1;
}

// Stage 2: after backward filled a bucket on the compute stream, its reduction runs on the comm
// stream; the compute stream waits for it only before it writes that bucket again. With offload
// grads the reduction ends in a copy to the host instead of the device's shard.
static void bucket_reduce_layer(GPUEngine* g, int l) {
    int b = l % 2;
    if (g->offload_grads) offload_settle_layer(g, b);
    cudaCheck(cudaEventRecord(g->bucket_ready[b], g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->bucket_ready[b], 0));
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupStart());
#endif
    for_each_layer_piece(g, l, [&](floatX* src, size_t global, size_t count) {
        if (g->offload_grads) offload_reduce_piece(g, src, global, count, g->comm_stream);
        else reduce_to_owners(g, src, global, global, count, g->comm_stream);
    });
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupEnd());
#endif
    cudaCheck(cudaEventRecord(g->bucket_free[b], g->comm_stream));
    if (g->offload_grads) {
        cudaCheck(cudaEventRecord(g->landed[b], g->comm_stream));
        g->landing_layer[b] = l;
    }
}

static void bucket_begin_layer(GPUEngine* g, int l) {
    int b = l % 2;
    cudaCheck(cudaStreamWaitEvent(g->stream, g->bucket_free[b], 0));
    cudaCheck(cudaMemsetAsync(g->layer_bucket[b], 0, g->layer_bucket_n * sizeof(floatX), g->stream));
}

// The embeddings' and the final LayerNorm's buckets: zeroed as backward starts, reduced as it ends
// (wte gets gradients at both ends: the logits' and the token embedding's).
static void bucket_begin_edges(GPUEngine* g) {
    const ParamTensor* lnf = &g->layout.tensors[PT_LNFW];
    cudaCheck(cudaStreamWaitEvent(g->stream, g->edge_free, 0));
    cudaCheck(cudaMemsetAsync(g->embed_bucket, 0, g->layout.tensors[PT_WPE].offset * sizeof(floatX) +
                              g->layout.tensors[PT_WPE].numel * sizeof(floatX), g->stream));
    cudaCheck(cudaMemsetAsync(g->lnf_bucket, 0, 2 * lnf->numel * sizeof(floatX), g->stream));
}

static void bucket_reduce_edges(GPUEngine* g) {
    const ParamTensor* wpe = &g->layout.tensors[PT_WPE];
    const ParamTensor* lnf = &g->layout.tensors[PT_LNFW];
    cudaCheck(cudaEventRecord(g->edge_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->edge_ready, 0));
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupStart());
#endif
    if (g->offload_grads) {
        offload_reduce_piece(g, g->embed_bucket, 0, wpe->offset + wpe->numel, g->comm_stream);
        offload_reduce_piece(g, g->lnf_bucket, lnf->offset, 2 * lnf->numel, g->comm_stream);
    } else {
        reduce_to_owners(g, g->embed_bucket, 0, 0, wpe->offset + wpe->numel, g->comm_stream);
        reduce_to_owners(g, g->lnf_bucket, lnf->offset, lnf->offset, 2 * lnf->numel, g->comm_stream);
    }
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupEnd());
#endif
    cudaCheck(cudaEventRecord(g->edge_free, g->comm_stream));
    if (g->offload_grads) {  // the micro-step's last copies: every landed gradient into the host's sums
        cudaCheck(cudaEventRecord(g->edge_landed, g->comm_stream));
        offload_settle_layer(g, 0);
        offload_settle_layer(g, 1);
        cudaCheck(cudaEventSynchronize(g->edge_landed));
        offload_accumulate_piece(g, g->embed_bucket, 0, wpe->offset + wpe->numel);
        offload_accumulate_piece(g, g->lnf_bucket, lnf->offset, 2 * lnf->numel);
        return;
    }
    // Every entry of the shard was received once this micro-step: add them to the step's sum.
    shard_accumulate(g->grad_acc, g->shard_grads, g->shard_n, g->comm_stream);
    cudaCheck(cudaEventRecord(g->comm_done, g->comm_stream));
}

// Stages 0, 1 over ranks (g->overlap), on the step's last micro-step: once backward has finished a
// layer's gradients (or, at its end, the embeddings' and the final LayerNorm's), they are final for
// the step, and their reduction runs on the comm stream while backward goes on. Each tensor's
// slice is one call, in place in grads: stage 0 all-reduces it; stage 1 reduces each piece to the
// rank owning it, into that rank's own slice of grads (where stage 1's reduce-scatter puts it).
// Every entry is summed over the same ranks as by the one call after backward: bit-identical.
static void overlap_reduce_piece(GPUEngine* g, size_t global, size_t count) {
#if defined(USE_NCCL)
    floatX* p = g->grads + global;
    if (g->stage == 0) ncclCheck(ncclAllReduce(p, p, count, nccl_floatx(), ncclSum, g->comm, g->comm_stream));
    else reduce_to_owners(g, g->grads, 0, global, count, g->comm_stream);
#else
    (void)global;
    (void)count;
    collectives_missing(g);
#endif
}

static void overlap_reduce_layer(GPUEngine* g, int l) {
    cudaCheck(cudaEventRecord(g->overlap_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->overlap_ready, 0));
#if defined(USE_NCCL)
    ncclCheck(ncclGroupStart());
#endif
    for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {
        const ParamTensor* t = &g->layout.tensors[k];
        size_t per_layer = t->numel / g->cfg.num_layers;
        overlap_reduce_piece(g, t->offset + (size_t)l * per_layer, per_layer);
    }
#if defined(USE_NCCL)
    ncclCheck(ncclGroupEnd());
#endif
}

// The embeddings (wte, wpe: contiguous from entry 0; wte has gradients from both ends of backward)
// and the final LayerNorm, after the encoder's backward; comm_done then marks every reduction queued.
static void overlap_reduce_edges(GPUEngine* g) {
    const ParamTensor* wpe = &g->layout.tensors[PT_WPE];
    const ParamTensor* lnf = &g->layout.tensors[PT_LNFW];
    cudaCheck(cudaEventRecord(g->overlap_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->overlap_ready, 0));
#if defined(USE_NCCL)
    ncclCheck(ncclGroupStart());
#endif
    overlap_reduce_piece(g, 0, wpe->offset + wpe->numel);
    overlap_reduce_piece(g, lnf->offset, 2 * lnf->numel);
#if defined(USE_NCCL)
    ncclCheck(ncclGroupEnd());
#endif
    cudaCheck(cudaEventRecord(g->comm_done, g->comm_stream));
    g->grads_reduced = 1;
}

// The optimizer's wait for them: the compute stream reads the summed gradients only after the comm
// stream has written them.
static void overlap_step_gradients(GPUEngine* g) {
    cudaCheck(cudaStreamWaitEvent(g->stream, g->comm_done, 0));
    g->grads_reduced = 0;
}

// Stages 0, 1, before the update: the step's gradient of this rank's shard. Returns where it is.
static const floatX* reduce_step_gradients(GPUEngine* g) {
    if (g->stage >= 2) {
        cudaCheck(cudaStreamWaitEvent(g->stream, g->comm_done, 0));
        shard_round(g->shard_grads, g->grad_acc, g->shard_n, g->stream);
        return g->shard_grads;
    }
    if (g->grads_reduced) {  // overlapped with the last micro-step's backward
        overlap_step_gradients(g);
    } else if (g->num_ranks > 1) {
#if defined(USE_NCCL)
        // Stage 1 in place: rank r's sum lands in its own slice of the gradients (NCCL's in-place
        // form, recvbuff = sendbuff + r * recvcount), so the shard needs no buffer of its own.
        if (g->stage == 0)
            ncclCheck(ncclAllReduce(g->grads, g->grads, g->n, nccl_floatx(), ncclSum, g->comm, g->stream));
        else
            ncclCheck(ncclReduceScatter(g->grads, g->shard_grads, g->shard, nccl_floatx(), ncclSum, g->comm, g->stream));
#else
        collectives_missing(g);
#endif
    }
    return g->grads + g->shard_begin;
}

// The loss, squared norm and non-finite count summed over every rank (each measured its shard; with
// -pp each stage its part of the model, the last stages the loss): one decision for all.
static void reduce_step_stats(GPUEngine* g, float* stats) {
    if (g->world_ranks == 1) return;
#if defined(USE_NCCL)
    ncclCheck(ncclAllReduce(stats, stats, 4, ncclFloat32, ncclSum, g->world_comm, g->stream));
#else
    collectives_missing(g);
#endif
}

static void zero1_gather_pieces(GPUEngine* g);

// Stages 1, 2, after the update of each rank's shard: every rank gets the whole model back (stage 3
// gathers each layer's when it is next used instead; stage 1 with overlap piece by piece on the comm
// stream, waited for by the next forward: zero1_gather_pieces).
static void gather_parameters(GPUEngine* g) {
    if (g->stage == 0 || g->stage == 3 || g->num_ranks == 1) return;
    if (g->params_ready) {
        zero1_gather_pieces(g);
        return;
    }
#if defined(USE_NCCL)
    ncclCheck(ncclAllGather(g->params + g->shard_begin, g->params, g->shard, nccl_floatx(), g->comm, g->stream));
#else
    collectives_missing(g);
#endif
}

// Stage 3: the parameters [a, a + count) from the ranks owning them into dst (dst[0] is parameter
// a), one broadcast per owner the range touches (the mirror of reduce_to_owners); one rank copies.
static void gather_from_owners(GPUEngine* g, floatX* dst, size_t a, size_t count, cudaStream_t st) {
    for (int owner = 0; owner < g->num_ranks; owner++) {
        size_t lo = owner * g->shard, hi = lo + g->shard;
        size_t x = a > lo ? a : lo, y = a + count < hi ? a + count : hi;
        if (x >= y) continue;
        floatX* out = dst + (x - a);
        if (g->num_ranks == 1) {
            cudaCheck(cudaMemcpyAsync(out, g->params + (x - lo), (y - x) * sizeof(floatX), cudaMemcpyDeviceToDevice, st));
            continue;
        }
#if defined(USE_NCCL)
        // read on the owner only (stage 3: its shard; stage 1: the whole model, so src is out)
        const floatX* src = g->rank == owner ? g->params + (x - g->params_first) : out;
        ncclCheck(ncclBroadcast(src, out, y - x, nccl_floatx(), owner, g->comm, st));
#else
        collectives_missing(g);
#endif
    }
}

// Layer l's 12 tensors' slices from their owners on the comm stream, one NCCL group: in place into
// every rank's whole model (buffer NULL: stage 1 after an update), or into a layer buffer laid out as
// the buckets (stage 3).
static void gather_layer(GPUEngine* g, int l, floatX* buffer) {
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupStart());
#endif
    for (int k = PT_LN1W; k <= PT_FCPROJB; k++) {
        const ParamTensor* t = &g->layout.tensors[k];
        size_t per_layer = t->numel / g->cfg.num_layers, a = t->offset + (size_t)l * per_layer;
        gather_from_owners(g, buffer ? buffer + g->bucket_offset[k] : g->params + a, a, per_layer, g->comm_stream);
    }
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupEnd());
#endif
}

// Stage 1 with overlap, after the update (gather_parameters): the parameters [a, a + count) from
// their owners in place into every rank's whole model on the comm stream (one NCCL group), and
// event ev recorded when they are there.
static void zero1_gather_piece(GPUEngine* g, size_t a, size_t count, cudaEvent_t ev) {
#if defined(USE_NCCL)
    ncclCheck(ncclGroupStart());
#endif
    gather_from_owners(g, g->params + a, a, count, g->comm_stream);
#if defined(USE_NCCL)
    ncclCheck(ncclGroupEnd());
#endif
    cudaCheck(cudaEventRecord(ev, g->comm_stream));
}

// The pieces in the order the next forward reads them: the embeddings (wte, wpe), each layer (its 12
// tensors' slices, one group a layer), the final LayerNorm. They start once the update is done
// (edge_gather_free, recorded on the compute stream after it: the owners' shards are read, the
// others' entries overwritten); every earlier read of the parameters is before it on that stream.
static void zero1_gather_pieces(GPUEngine* g) {
    const ParamTensor* lnf = &g->layout.tensors[PT_LNFW];
    int L = g->cfg.num_layers;
    cudaCheck(cudaEventRecord(g->edge_gather_free, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->edge_gather_free, 0));
    zero1_gather_piece(g, 0, g->plan.embed_n, g->params_ready[0]);
    for (int l = 0; l < L; l++) {
        gather_layer(g, l, NULL);
        cudaCheck(cudaEventRecord(g->params_ready[1 + l], g->comm_stream));
    }
    zero1_gather_piece(g, lnf->offset, g->plan.lnf_n, g->params_ready[L + 1]);
    g->params_pending = 1;
}

// Stage 1 with overlap, in the first forward after an update: the compute stream waits for each
// piece just before it reads it (zero3_begin_pass: the embeddings, before the encoder; zero3_layer:
// layer l, before its first LayerNorm; layer_forward: the final LayerNorm). The last piece's wait
// waits for all (the comm stream ran them in order): nothing is pending after it.
static void zero1_wait_embeddings(GPUEngine* g) {
    if (g->params_pending) cudaCheck(cudaStreamWaitEvent(g->stream, g->params_ready[0], 0));
}

static void zero1_wait_layer(GPUEngine* g, int l) {
    if (g->params_pending) cudaCheck(cudaStreamWaitEvent(g->stream, g->params_ready[1 + l], 0));
}

static void zero1_wait_lnf(GPUEngine* g) {
    if (!g->params_pending) return;
    cudaCheck(cudaStreamWaitEvent(g->stream, g->params_ready[g->cfg.num_layers + 1], 0));
    g->params_pending = 0;
}

// Stage 3: layer l's parameters into buffer l % 2 on the comm stream, unless it holds them already.
// The buffer's previous layer may still be read by work queued on the compute stream: the gather
// waits for all of it (gather_free, recorded now).
static void zero3_gather_layer(GPUEngine* g, int l) {
    int b = l % 2;
    if (g->gathered[b] == l) return;
    cudaCheck(cudaEventRecord(g->gather_free[b], g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->gather_free[b], 0));
    gather_layer(g, l, g->layer_params[b]);
    cudaCheck(cudaEventRecord(g->gather_done[b], g->comm_stream));
    g->gathered[b] = l;
}

// Stage 3, before the compute stream reads layer l's parameters: gathered (now, or already by a
// prefetch) and waited for.
static void zero3_layer(GPUEngine* g, int l) {
    if (g->stage == 1) zero1_wait_layer(g, l);  // stage 1: its gather since the update, if any
    if (g->stage != 3) return;
    zero3_gather_layer(g, l);
    cudaCheck(cudaStreamWaitEvent(g->stream, g->gather_done[l % 2], 0));
}

// Stage 3: layer l's gather started on the comm stream while the compute stream works on the other
// buffer's layer (the callers never prefetch into the buffer of the layer they are running).
static void zero3_prefetch(GPUEngine* g, int l) {
    if (g->stage != 3 || l < 0 || l >= g->cfg.num_layers) return;
    zero3_gather_layer(g, l);
}

// Stage 3 in backward: layer l's parameters, and the layer below's gathered while l's backward
// runs. At recompute level 3 the layer below a segment's first belongs to the previous segment,
// whose recompute starts from its own first layer: nothing is prefetched there.
static void zero3_backward_layer(GPUEngine* g, int l) {
    if (g->stage != 3) return;
    zero3_layer(g, l);
    if (!(g->opts.recompute == 3 && l % g->recompute_every == 0)) zero3_prefetch(g, l - 1);
}

// Stage 3, at the start of every forward pass (the parameters may have changed since the last):
// the layer buffers are forgotten, the embeddings' and the final LayerNorm's parameters gathered
// (after every earlier read of their buffers: edge_gather_free) and waited for, layer 0's started.
// They stay until the pass's backward has used them (wte is the classifier at both ends).
static void zero3_begin_pass(GPUEngine* g) {
    if (g->stage == 1) zero1_wait_embeddings(g);  // stage 1: the embeddings' gather since the update
    if (g->stage != 3) return;
    g->gathered[0] = g->gathered[1] = -1;
    const ParamTensor* lnf = &g->layout.tensors[PT_LNFW];
    cudaCheck(cudaEventRecord(g->edge_gather_free, g->stream));
    cudaCheck(cudaStreamWaitEvent(g->comm_stream, g->edge_gather_free, 0));
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupStart());
#endif
    gather_from_owners(g, g->embed_params, 0, g->plan.embed_n, g->comm_stream);
    gather_from_owners(g, g->lnf_params, lnf->offset, g->plan.lnf_n, g->comm_stream);
#if defined(USE_NCCL)
    if (g->num_ranks > 1) ncclCheck(ncclGroupEnd());
#endif
    cudaCheck(cudaEventRecord(g->edge_gather_done, g->comm_stream));
    g->edges_gathered = 1;
    zero3_prefetch(g, 0);
    cudaCheck(cudaStreamWaitEvent(g->stream, g->edge_gather_done, 0));
}

// One communicator over every rank: rank 0 makes its id, the launcher's channel (MPI, TCP or a
// shared directory: common/ranks.c) carries it to the others. It is ZeRO's (comm) unless -pp splits
// the ranks into stages (section 4b makes a stage's communicator then).
static void zero_comm_init(GPUEngine* g) {
#if defined(USE_NCCL)
    if (g->world_ranks > 1) {
        ncclUniqueId id;
        if (g->world_rank == 0) ncclCheck(ncclGetUniqueId(&id));
        ranks_broadcast(&id, sizeof(id), 0);
        ncclCheck(ncclCommInitRank(&g->world_comm, g->world_ranks, id, g->world_rank));
        if (!g->pp) g->comm = g->world_comm;
    }
#else
    (void)g;
#endif
}

static void zero_comm_destroy(GPUEngine* g) {
#if defined(USE_NCCL)
    if (g->comm && g->comm != g->world_comm) ncclCheck(ncclCommDestroy(g->comm));
    if (g->world_comm) ncclCheck(ncclCommDestroy(g->world_comm));
#else
    (void)g;
#endif
}
