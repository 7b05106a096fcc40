// time_model.h: a training step's time on a named GPU by the kernel report's model
// (dev/kernel_report.py, "THE MODEL"), for the planner (--plan, --memory-budget) and the ladder.
// One model, two readers: the report applies it in Python to the counts it made; this applies the
// same terms in C to the same counts, compiled in as bilinear coefficients in (layers, micro-batch)
// (common/time_table.c, written by `make kernel-report`). test/test_time_model.sh holds the two
// within 1% of each other on the report's side-by-side configurations.
//
// What is counted, and so what can be predicted: GPT-2's widths the report counts (d12: 768
// channels, 12 heads; d48: 1600, 25) at any number of layers and micro-batch, T = 1024, the 50257-token
// vocabulary, 16-bit training (FP16's counts; BF16 runs the same kernels), -r 0 to 3 and -ge 0 or 2
// where those runs were counted, any number of micro-steps. Anything else: no time, and why.
#ifndef COMMON_TIME_MODEL_H
#define COMMON_TIME_MODEL_H

#include <stddef.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

// A GPU of the model: the datasheet's dense fp16/bf16 peak with fp32 accumulation (TFLOP/s), DRAM
// bandwidth (GB/s), SMs, shared memory an SM (KiB), threads and blocks an SM, the architecture
// (major*10+minor), the clock every rate uses (GHz: the peak over the SMs' tensor FLOPs a clock), and
// the fractions of the peak mma.sync and wgmma reach.
typedef struct {
    const char* name;
    double peak_tflops, bw_gbs;
    int sms, smem_kib, threads, blocks, arch;
    double clock_ghz, mma_rate, wgmma_rate;
} TimeGpu;

// The model's constants (dev/kernel_report.py's): special-function lanes, warp instructions issued and
// shared-memory bytes a clock an SM, the share of DRAM bandwidth a kernel reaches, a launch's and a
// memset's fixed seconds, the cuBLASLt term's efficiency and fixed seconds, the SM count of the counting
// device, and the counted T and vocabulary.
typedef struct {
    int sfu_lanes, issue_rate, smem_bytes;
    double dram_share, launch_s, memset_s, gemm_e, gemm_t0;
    int count_sms, T, V;
} TimeConstants;

enum { TIME_KERNEL, TIME_BLAS, TIME_MEMSET, TIME_COPY };
enum { TM_LAUNCHES, TM_BLOCKS, TM_SECTORS, TM_SMEM, TM_MMA_FLOPS, TM_WGMMA_FLOPS, TM_WGMMA, TM_SFU, TM_INSTRS, TM_TILES,
       TM_GEMM_BYTES, TM_BYTES, TIME_NUM_METRICS };

// A group of a step's ops (one kernel at one launch shape, one product shape, memsets, copies).
typedef struct {
    int kind;
    const char* name;
    int threads, regs, smem;          // a kernel's block: threads, registers a thread, shared bytes a block
    int loop_instrs, loop_tensor;     // its SASS hot loop: instructions, tensor instructions (0: not known)
    int out_instrs, out_tensor;       // the code outside the loop, once a warp
    int grid_by_sms;                  // its grid is the device's SM count
    int k;                            // a product's K (-1: B T)
    const char* family;               // the report's common family (attention, optimizer, ...)
} TimeGroup;
typedef struct { int metric; double a, b, c, d; } TimeCoef;  // a + b L + c B + d L B
typedef struct { int group; const TimeCoef* coefs; int n; } TimeRow;
// One counted configuration: the model's width, the counting device's path (90: sm_90's wgmma
// kernels, 80: sm_80's mma.sync ones), -ge, micro-steps, -r and --recompute-every (-1: at -r 3,
// what a layer that does not end a segment saves against segments of 1 layer); its rows.
typedef struct {
    const char* model;
    int C, NH, path, gelu_fusion, micro_steps, recompute, recompute_every;
    const int* rows;
    int n;
} TimeSet;

extern const TimeGpu TIME_GPUS[];
extern const int TIME_NUM_GPUS;
extern const TimeConstants TIME_CONSTANTS;
extern const char* const TIME_METRIC_NAMES[TIME_NUM_METRICS];
extern const TimeGroup TIME_GROUPS[];
extern const TimeRow TIME_ROWS[];
extern const TimeSet TIME_SETS[];
extern const int TIME_NUM_SETS, TIME_NUM_GROUPS;

// The GPU `name` names: every word of it (letters and digits, any case) a word of the GPU's name
// ("a6000", "RTX A6000", "h100", "A100"), the first such; NULL when none (time_gpu_list says which).
const TimeGpu* time_gpu_find(const char* name);
// The model's GPUs' names, comma-separated, into buf.
void time_gpu_list(char* buf, size_t cap);
// The model's GPU for a device's name as CUDA reports it ("NVIDIA H100 80GB HBM3"), or NULL.
const TimeGpu* time_gpu_for_device(const char* device_name);

// A step to predict: one rank's (a pipeline stage's layers, its share of the update).
typedef struct {
    int L;                  // the layers the rank runs (a pipeline stage's; the model's without -pp)
    int L_model;            // the model's layers (0: L)
    int embedding, head;    // the rank runs the embedding; the final LayerNorm, classifier and loss
    double optimizer_share; // the rank's share of the update: its parameters over the model's
    int C, NH, V, T, B;
    Precision precision;
    int gelu_fusion;      // -1: the GPU's default (2 on sm_90 and newer, 0 before), as the trainer's
    int recompute, recompute_every;
    int micro_steps;      // micro-steps an optimizer step (>= 1)
} TimeQuery;

// The step's seconds by family (the report's common families), and in all.
#define TIME_MAX_FAMILIES 12
typedef struct {
    double seconds;
    int n_families;
    const char* family[TIME_MAX_FAMILIES];
    double family_seconds[TIME_MAX_FAMILIES];
    double optimizer_seconds;   // the update's share (the optimizer family): what ZeRO divides
    int launches;
    int gelu_fusion;            // the -ge the prediction is for
    char counts[96];            // which counted runs gave it, in words
} TimeStep;

// Predicts q's optimizer step on gpu into out: 1, or 0 with why (what is not counted) in why.
int time_model_step(const TimeGpu* gpu, const TimeQuery* q, TimeStep* out, char* why, size_t why_cap);

// A product on gpu by the model's cuBLASLt term (m x n by k, batch), seconds: for the docs and tests.
double time_model_gemm(const TimeGpu* gpu, long m, long n, long k, long batch, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif  // COMMON_TIME_MODEL_H
