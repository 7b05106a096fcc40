// gpu_peak.c: the peak table behind MFU (see gpu_peak.h).
#include "gpu_peak.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

// A row matches a device whose name holds every word of `words` and none of `not_words`, as whole
// words (the name split at anything but letters and digits, compared without case: "NVIDIA
// A100-SXM4-80GB" holds A100, SXM4 and 80GB, so the A10's row, which asks for A10, does not take it),
// and whose compute capability is the row's. The first row that matches wins: variants come before
// the card's general row. Figures: NVIDIA's datasheets and architecture whitepapers, dense (the
// sparse figures they also print are twice these), fp16 and bf16 inputs with fp32 accumulation;
// GeForce cards accumulate fp32 at half their fp16-accumulate rate, and these are the fp32 ones.
typedef struct {
    GpuPeak peak;
    const char* words;      // space-separated, all required
    const char* not_words;  // space-separated, none allowed (NULL: none)
} PeakRow;

static const PeakRow ROWS[] = {
    {{"V100S PCIe", 70, 130.0, 16.4, "NVIDIA V100S datasheet"}, "V100S", NULL},
    {{"V100 PCIe", 70, 112.0, 14.0, "NVIDIA V100 datasheet, PCIe"}, "V100 PCIE", NULL},
    {{"V100 SXM2", 70, 125.0, 15.7, "NVIDIA V100 datasheet, SXM2"}, "V100", NULL},
    {{"T4", 75, 65.0, 8.1, "NVIDIA T4 datasheet"}, "T4", NULL},
    {{"A100", 80, 312.0, 19.5, "NVIDIA A100 datasheet, 40 and 80 GB, SXM4 and PCIe"}, "A100", NULL},
    {{"A30", 80, 165.0, 10.3, "NVIDIA A30 datasheet"}, "A30", NULL},
    {{"A10", 86, 125.0, 31.2, "NVIDIA A10 datasheet"}, "A10", NULL},
    {{"A40", 86, 149.7, 37.4, "NVIDIA A40 datasheet"}, "A40", NULL},
    {{"RTX A6000", 86, 154.8, 38.7, "NVIDIA Ampere GA102 whitepaper, RTX A6000"}, "A6000", NULL},
    {{"GeForce RTX 3090", 86, 71.0, 35.6, "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090"}, "RTX 3090", "TI"},
    {{"GeForce RTX 4090", 89, 165.2, 82.6, "NVIDIA Ada Lovelace whitepaper, GeForce RTX 4090"}, "RTX 4090", "D"},
    {{"L4", 89, 121.0, 30.3, "NVIDIA L4 datasheet"}, "L4", NULL},
    {{"L40S", 89, 362.05, 91.6, "NVIDIA L40S datasheet"}, "L40S", NULL},
    {{"L40", 89, 181.05, 90.5, "NVIDIA L40 datasheet"}, "L40", NULL},
    {{"H100 PCIe", 90, 756.0, 51.2, "NVIDIA H100 whitepaper, PCIe"}, "H100 PCIE", NULL},
    {{"H100 NVL", 90, 835.5, 60.0, "NVIDIA H100 NVL datasheet"}, "H100 NVL", NULL},
    {{"H100 SXM", 90, 989.4, 66.9, "NVIDIA H100 whitepaper, SXM5"}, "H100", NULL},
    {{"H200 NVL", 90, 835.5, 60.0, "NVIDIA H200 datasheet, NVL"}, "H200 NVL", NULL},
    {{"H200 SXM", 90, 989.4, 67.0, "NVIDIA H200 datasheet, SXM"}, "H200", NULL},
    {{"B200", 100, 2250.0, 0.0, "NVIDIA HGX B200 datasheet, per GPU"}, "B200", NULL},
};
#define NUM_ROWS ((int)(sizeof(ROWS) / sizeof(ROWS[0])))

int gpu_peak_count(void) { return NUM_ROWS; }
const GpuPeak* gpu_peak_row(int i) { return i >= 0 && i < NUM_ROWS ? &ROWS[i].peak : NULL; }

// 1 when `word` is one of name's words (case-insensitive).
static int name_has_word(const char* name, const char* word, size_t wlen) {
    const char* p = name;
    while (*p) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        const char* start = p;
        while (*p && isalnum((unsigned char)*p)) p++;
        size_t len = (size_t)(p - start);
        if (len == wlen && len > 0) {
            size_t i = 0;
            while (i < len && toupper((unsigned char)start[i]) == toupper((unsigned char)word[i])) i++;
            if (i == len) return 1;
        }
    }
    return 0;
}

// all = 1: every word of `words` is in name; all = 0: any is.
static int name_has_words(const char* name, const char* words, int all) {
    const char* w = words;
    while (*w) {
        while (*w == ' ') w++;
        const char* start = w;
        while (*w && *w != ' ') w++;
        if (w == start) break;
        int has = name_has_word(name, start, (size_t)(w - start));
        if (all && !has) return 0;
        if (!all && has) return 1;
    }
    return all;
}

int gpu_name_has_words(const char* name, const char* words) { return name_has_words(name, words, 1); }

double gpu_peak_flops(const char* name, int major, int minor, Precision precision, char* note, size_t note_cap) {
    char dummy[8];
    if (!note) {
        note = dummy;
        note_cap = sizeof(dummy);
    }
    int sm = major * 10 + minor;
    for (int i = 0; i < NUM_ROWS; i++) {
        const PeakRow* r = &ROWS[i];
        if (!name_has_words(name, r->words, 1) || (r->not_words && name_has_words(name, r->not_words, 0))) continue;
        if (r->peak.sm != sm) {
            snprintf(note, note_cap, "not shown: %s reports sm_%d, but the peak table's %s is sm_%d (common/gpu_peak.c); "
                     "the step line shows tokens/s", name, sm, r->peak.card, r->peak.sm);
            return 0.0;
        }
        double tflops = precision == PRECISION_FP32 ? r->peak.fp32_tflops : r->peak.tensor_tflops;
        const char* kind = precision == PRECISION_FP32 ? "fp32 (CUDA cores)" :
                           precision == PRECISION_BF16 ? "dense bf16 tensor-core" : "dense fp16 tensor-core";
        if (precision == PRECISION_BF16 && sm < 80) tflops = 0.0;  // Volta and Turing have no bf16 tensor cores
        if (tflops <= 0.0) {
            snprintf(note, note_cap, "not shown: the peak table has no %s figure for the %s (common/gpu_peak.c); the step "
                     "line shows tokens/s", kind, r->peak.card);
            return 0.0;
        }
        snprintf(note, note_cap, "model FLOPs over the %s's %s peak, %g TFLOP/s (%s)", r->peak.card, kind, tflops,
                 r->peak.source);
        return tflops * 1e12;
    }
    snprintf(note, note_cap, "not shown: %s (sm_%d) is not in the peak table (common/gpu_peak.c); the step line shows "
             "tokens/s", name, sm);
    return 0.0;
}
