// gpu_peak.h: the dense peak FLOP/s of known GPUs, for the step line's MFU (model FLOPs
// utilization: the model's FLOPs per second over the card's peak). Plain C, no CUDA: the GPU
// engine passes the device's name and compute capability, and tests ask with any name.
//
// The table (gpu_peak.c) holds, per card, NVIDIA's published dense (not 2:4-sparse) tensor-core
// peak for fp16/bf16 inputs with fp32 accumulation (what the trainer's matrix products use) and the
// CUDA cores' fp32 peak (the FP32 build), each with the document it comes from. A card that is not
// in the table, or a precision it has no figure for, gets no MFU, and the reason in words.
#ifndef COMMON_GPU_PEAK_H
#define COMMON_GPU_PEAK_H

#include <stddef.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

// The peak FLOP/s of the device called `name` (as cudaGetDeviceProperties gives it, e.g. "NVIDIA
// A100-SXM4-80GB") with compute capability major.minor, for matrix products in `precision`; 0 when
// unknown. note (may be NULL) receives the rest of the start-up report's "mfu: " line: the peak and
// its source, or why there is no MFU ("not shown: ...").
double gpu_peak_flops(const char* name, int major, int minor, Precision precision, char* note, size_t note_cap);

// 1 when every word of `words` (space-separated) is a word of `name` (runs of letters and digits,
// compared without case): the rows' matching rule, which time_model.c's GPU names use too.
int gpu_name_has_words(const char* name, const char* words);

// The table's rows, for tests and docs: the card, the fp16/bf16 and fp32 peaks in TFLOP/s (0 =
// none published or not applicable), and the source.
typedef struct {
    const char* card;      // e.g. "A100" (with variant, e.g. "H100 PCIe")
    int sm;                // compute capability, major*10 + minor
    double tensor_tflops;  // dense fp16/bf16 tensor core, fp32 accumulation
    double fp32_tflops;    // fp32, CUDA cores
    const char* source;
} GpuPeak;
int gpu_peak_count(void);
const GpuPeak* gpu_peak_row(int i);

#ifdef __cplusplus
}
#endif
#endif
