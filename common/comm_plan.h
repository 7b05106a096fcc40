// comm_plan.h: what the GPU engine's ranks send each other (and, with --offload, what crosses to
// the host) per optimizer step, computed from a memory plan (memory_plan.h) before anything runs,
// and what that costs at a stated link bandwidth beside a predicted compute time: the planner's
// communication columns (--plan, the start-up report, the memory ladder).
//
// One source of truth: the collectives are enumerated from the plan's shards and buckets and the
// parameter layout the engine carves them from, piece by piece as train_gpt2.cu issues them, so a
// change of shard or bucket moves the planned bytes with the allocation. The bytes per rank are
// those of NCCL's ring algorithms, the same model the CPU runtime's counter uses
// (test/cuda_cpu/nccl_cpu.cpp, NCCL_CPU_TRAFFIC), which test/test_comm_volume.sh compares to
// these figures:
//   all-reduce of S bytes:            a rank sends 2(N-1)/N·S (its exact ring share when N does not
//                                     divide the count)
//   reduce-scatter, all-gather of S:  (N-1)/N·S
//   reduce to one owner of S:         S from every rank but the owner (a chain ending at it)
//   broadcast of S:                   S from every rank but the ring's last one
// and in a ring a rank receives exactly what the rank before it sends. Elements travel in the
// precision the engine communicates: floatX (2 bytes in FP16/BF16, 4 in FP32) for gradients and
// parameters, fp32 for the step's statistics and the checkpoint's master weights.
#ifndef COMMON_COMM_PLAN_H
#define COMMON_COMM_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "memory_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

// The kinds, named as the CPU runtime's counter names them (send, recv: a pipeline's point-to-point
// transfers); the last two are offload's host copies.
typedef enum {
    COMM_ALLREDUCE, COMM_REDUCESCATTER, COMM_ALLGATHER, COMM_REDUCE, COMM_BROADCAST, COMM_SEND, COMM_RECV,
    COMM_TO_HOST, COMM_TO_DEVICE, COMM_KINDS
} CommKind;
const char* comm_kind_name(CommKind k);  // "allreduce", ..., "send", "recv", "to_host", "to_device"

typedef enum { COMM_PER_STEP, COMM_PER_MICRO_STEP, COMM_PER_CHECKPOINT } CommWhen;

typedef struct {
    const char* what;  // e.g. "gradients, reduced to their owners"
    CommKind kind;
    CommWhen when;
    int overlapped;    // 1: the engine runs it on its comm stream while backward computes; 2: while
                       // the next step's first forward does (stage 1's gather after the update)
    size_t elem_bytes; // as communicated
    size_t calls;      // per `when` (host copies: 0, not counted)
    size_t bytes;      // the data the calls move, in their element type (the counter's _bytes)
    size_t sent;       // this rank's bytes out, per `when` (host copies: down for COMM_TO_HOST)
    size_t received;   // this rank's bytes in, per `when` (host copies: up for COMM_TO_DEVICE)
} CommItem;

// A link's bandwidth: bytes a rank can send per second in one direction while receiving as much
// (NCCL's "bus bandwidth", so that a ring collective takes a rank's sent bytes over it).
typedef struct {
    char name[32];       // "nvlink", "pcie", "ib" or "100 GB/s"
    double bytes_per_s;
    const char* source;  // where the figure comes from (an assumption, said so)
} CommLink;

// "nvlink", "pcie", "ib", or a positive number of GB/s (10^9 bytes per second): 1, else 0 with
// why (naming --link) filled in.
int comm_link_parse(const char* text, CommLink* link, char* why, size_t cap);
#define COMM_LINK_DEFAULT "nvlink"
// The host link offload's copies cross (PCIe 4.0 x16, whatever --link says of the ranks' link).
extern const CommLink COMM_HOST_LINK;

#define COMM_MAX_ITEMS 10
typedef struct CommPlan {
    int rank, ranks, stage, offload;  // rank of ranks: in the whole run; stage: ZeRO's
    Precision precision;
    int accum;                 // micro-steps per optimizer step
    int count;
    CommItem items[COMM_MAX_ITEMS];
    // This rank, per optimizer step (micro-step items times accum); checkpoints apart.
    size_t sent_step, received_step;        // between ranks
    size_t host_down_step, host_up_step;    // offload's copies
    size_t checkpoint_sent, checkpoint_received;
    // Time (seconds per optimizer step), at the link.
    CommLink link;
    double comm_seconds;       // sent_step over the link
    double overlapped_seconds; // the part the engine runs beside backward
    double host_seconds;       // offload's copies over COMM_HOST_LINK
    double host_adamw_per_s, host_update_seconds;  // offload: the host's AdamW rate and time a step
    double host_sum_seconds;   // --offload grads: the host's adds of the micro-steps' gradients, a step
    // Predicted compute: the kernel report's model on the card (time_model.h) where its counts cover
    // the configuration (counted = 1); else gpt2_flops_per_token x the rank's tokens a step, with
    // recompute's extra forward, at PLAN_MFU of the card's dense peak (gpu_peak.c's table).
    double flops_step;         // per rank, recompute included
    size_t tokens_step;        // the rank's tokens a step (B T micro-steps)
    double peak_flops;
    char card[48];
    int counted;
    char time_model[256];      // which model gave compute_seconds, in words (and why not the counts')
    double compute_seconds, backward_seconds;
    double forward_seconds;    // a micro-step's plain forward (a third of its FLOPs): what stage 1's gather hides under
    double exposed_seconds;    // communication the compute does not hide, as this engine runs it
    // -pp: the stages, and the step's idle time while the pipeline fills and drains: (P - 1) of the
    // stage's m micro-batches' compute (1F1B, equal stages); its flops_step is its stage's alone.
    int pp_stages;
    double bubble, bubble_seconds;
    size_t p2p_bytes;          // one activation (or its gradient) across a stage boundary: B x T x C floatX
    double step_seconds;       // compute + bubble + exposed (predicted)
    int hides_if_overlapped;   // every collective's time fits under backward's
} CommPlan;

// The plan of rank p->opts.rank for `accum` micro-steps per step at `link`. peak_flops > 0: the
// card's peak (the device running, named card); 0: the planner's stated card (PLAN_CARD).
void comm_plan_make(CommPlan* c, const MemoryPlan* p, int accum, const CommLink* link, double peak_flops,
                    const char* card);
// The predicted step of p (its rank) with accum micro-steps on the card and link p->opts names
// (plan_card, plan_link: --gpu and --link; "" = PLAN_CARD and nvlink): comm_plan_make's step_seconds,
// and in model (if not NULL, cap bytes) which model gave its compute. What --memory-budget ranks by.
double comm_plan_step_seconds(const MemoryPlan* p, int accum, char* model, size_t cap);
// The table and the time lines (--plan, the start-up report).
void comm_plan_print(const CommPlan* c, FILE* f);
// As the value of a "communication" key of --plan --json (no trailing newline), the member the
// caller adds after memory_plan_print_json_members'; with ranks <= 16, every rank's per-step and
// checkpoint totals too.
void comm_plan_print_json(const CommPlan* c, const MemoryPlan* p, FILE* f);

#ifdef __cplusplus
}
#endif
#endif
