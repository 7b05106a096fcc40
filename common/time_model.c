// time_model.c: the kernel report's model applied to the counts compiled in (see time_model.h). Each
// function here is the function of dev/kernel_report.py it names, term for term; the constants and the
// GPUs come from the report too (common/time_table.c), so nothing here is a second figure.
#include "time_model.h"

#include "gpu_peak.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- the GPUs ----

// 1 when every word of `words` (letters and digits, split at anything else, any case) is a word of
// `name`: gpu_peak.c's rule, the words split at anything that is not a letter or digit first.
static int words_in(const char* words, const char* name) {
    char w[128];
    size_t n = 0;
    for (const char* p = words; *p && n + 1 < sizeof(w); p++) w[n++] = isalnum((unsigned char)*p) ? *p : ' ';
    w[n] = '\0';
    return gpu_name_has_words(name, w);
}

const TimeGpu* time_gpu_find(const char* name) {
    int any = 0;
    for (const char* p = name; *p; p++) any |= isalnum((unsigned char)*p) != 0;
    if (!any) return NULL;
    for (int i = 0; i < TIME_NUM_GPUS; i++)
        if (words_in(name, TIME_GPUS[i].name)) return &TIME_GPUS[i];
    return NULL;
}

void time_gpu_list(char* buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < TIME_NUM_GPUS && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", TIME_GPUS[i].name);
}

const TimeGpu* time_gpu_for_device(const char* device_name) {
    // The model's GPU whose first word (H100, H200, A100, A6000 and 4090 after RTX, L40S) the device's
    // name holds, and not another variant of it: a PCIe or NVL card is not the SXM one.
    for (int i = 0; i < TIME_NUM_GPUS; i++) {
        if ((words_in("PCIe", device_name) && !words_in("PCIe", TIME_GPUS[i].name)) ||
            (words_in("NVL", device_name) && !words_in("NVL", TIME_GPUS[i].name)))
            continue;
        char first[32];
        const char* n = TIME_GPUS[i].name;
        if (strncmp(n, "RTX ", 4) == 0) n += 4;
        size_t len = strcspn(n, " ");
        if (len >= sizeof(first)) continue;
        memcpy(first, n, len);
        first[len] = '\0';
        if (words_in(first, device_name)) return &TIME_GPUS[i];
    }
    return NULL;
}

// ---- the terms (dev/kernel_report.py's issue_instructions, kernel_time, gemm_time, op_time) ----

static double issue_instructions(const TimeGroup* g, const double* x) {
    double counted = x[TM_INSTRS], tensor = x[TM_MMA_FLOPS] / 4096 + x[TM_WGMMA];
    if (g->loop_tensor > 0 && tensor > 0) {
        double warps = x[TM_BLOCKS] * ((g->threads + 31) / 32);
        double in_loop = fmax(0.0, tensor - g->out_tensor * warps) / g->loop_tensor * g->loop_instrs;
        return fmax(counted, in_loop + g->out_instrs * warps);
    }
    return counted;
}

static double kernel_time(const TimeGpu* gpu, const TimeGroup* g, const double* x) {
    const TimeConstants* k = &TIME_CONSTANTS;
    int warps = (g->threads + 31) / 32;
    long bps = gpu->blocks, t = gpu->threads / g->threads;
    if (t < bps) bps = t;
    if (g->regs > 0) {
        long r = 65536 / ((long)warps * ((32L * g->regs + 255) / 256 * 256));
        if (r < bps) bps = r;
    }
    long s = (long)gpu->smem_kib * 1024 / (g->smem + 1024);
    if (s < bps) bps = s;
    if (bps < 1) bps = 1;
    double slots = (double)gpu->sms * bps, grid = fmax(1.0, x[TM_BLOCKS]);
    double waves = ceil(grid / slots), filled = grid / (waves * slots);
    double clk = gpu->clock_ghz * 1e9 * gpu->sms;
    double instrs = issue_instructions(g, x);
    double peak = gpu->peak_tflops * 1e12;
    double dram = 32 * x[TM_SECTORS] / (k->dram_share * gpu->bw_gbs * 1e9);
    double smem = x[TM_SMEM] / (k->smem_bytes * clk);
    double tensor = x[TM_MMA_FLOPS] / (gpu->mma_rate * peak) +
                    (x[TM_WGMMA_FLOPS] > 0 ? x[TM_WGMMA_FLOPS] / (gpu->wgmma_rate * peak) : 0.0);
    double sfu = 32 * x[TM_SFU] / (k->sfu_lanes * clk);
    double issue = instrs / (k->issue_rate * clk);
    double core;
    if (x[TM_MMA_FLOPS] > 0 || x[TM_WGMMA_FLOPS] > 0) {  // products, exponentials, the rest add
        double tensor_instrs = x[TM_MMA_FLOPS] / 4096 + x[TM_WGMMA];
        double other = fmax(0.0, instrs - tensor_instrs - x[TM_SFU]) / (k->issue_rate * clk);
        core = fmax(fmax(dram, smem), tensor + sfu + other);
    } else {
        core = fmax(fmax(fmax(dram, smem), fmax(tensor, sfu)), issue);
    }
    return core / filled + k->launch_s;
}

static double gemm_time(const TimeGpu* gpu, double tiles, double kdim, double bytes) {
    const TimeConstants* k = &TIME_CONSTANTS;
    double waves = ceil(tiles / gpu->sms);
    double tf = waves * 2 * 128 * 128 * kdim / (k->gemm_e * gpu->peak_tflops * 1e12 / gpu->sms);
    double tb = bytes / (k->dram_share * gpu->bw_gbs * 1e9);
    return fmax(tf, tb) + k->gemm_t0;
}

double time_model_gemm(const TimeGpu* gpu, long m, long n, long k, long batch, size_t bytes) {
    double tiles = ceil(m / 128.0) * ceil(n / 128.0) * (double)batch;
    return gemm_time(gpu, tiles, (double)k, (double)bytes);
}

// One launch of group g, its per-launch metrics x, at B T tokens.
static double op_time(const TimeGpu* gpu, const TimeGroup* g, double* x, double bt) {
    if (g->kind == TIME_KERNEL) {
        if (g->grid_by_sms && lround(x[TM_BLOCKS]) == TIME_CONSTANTS.count_sms) x[TM_BLOCKS] = gpu->sms;
        return kernel_time(gpu, g, x);
    }
    if (g->kind == TIME_BLAS) return gemm_time(gpu, x[TM_TILES], g->k < 0 ? bt : g->k, x[TM_GEMM_BYTES]);
    return x[TM_BYTES] / (TIME_CONSTANTS.dram_share * gpu->bw_gbs * 1e9) + TIME_CONSTANTS.memset_s;
}

// ---- a step ----

static const TimeSet* find_set(int C, int NH, int path, int ge, int micro, int r, int every) {
    for (int i = 0; i < TIME_NUM_SETS; i++) {
        const TimeSet* s = &TIME_SETS[i];
        if (s->C == C && s->NH == NH && s->path == path && s->gelu_fusion == ge && s->micro_steps == micro &&
            s->recompute == r && s->recompute_every == every)
            return s;
    }
    return NULL;
}

// acc[group][metric] += w * the set's totals for q: each term of a row as the rank runs it. The
// optimizer's groups: the whole model's (L_model layers) times the rank's share of the update, but
// their launches, which every rank makes; the others: their per-layer terms (b L + d L B) at the rank's
// layers, their other terms (a + c B) where the rank runs them (the embedding's on the rank with the
// embedding, the rest, the final LayerNorm, classifier and loss, on the one with the head). plain: the
// terms as written, at the rank's layers (-r 3's per-layer saving, whose rows have no L terms).
static void add_set(double (*acc)[TIME_NUM_METRICS], const TimeSet* s, double w, const TimeQuery* q, int plain) {
    double L = q->L, Lm = q->L_model > 0 ? q->L_model : q->L, B = q->B;
    for (int i = 0; i < s->n; i++) {
        const TimeRow* r = &TIME_ROWS[s->rows[i]];
        const char* fam = TIME_GROUPS[r->group].family;
        int optimizer = !plain && strcmp(fam, "optimizer") == 0;
        int fixed = plain || (strcmp(fam, "embedding") == 0 ? q->embedding : q->head);
        for (int j = 0; j < r->n; j++) {
            const TimeCoef* c = &r->coefs[j];
            double v;
            if (optimizer)
                v = (c->a + c->b * Lm + c->c * B + c->d * Lm * B) * (c->metric == TM_LAUNCHES ? 1.0 : q->optimizer_share);
            else
                v = (fixed ? c->a + c->c * B : 0.0) + (c->b + c->d * B) * L;
            acc[r->group][c->metric] += w * v;
        }
    }
}

#define TIME_MAX_GROUPS 1024

int time_model_step(const TimeGpu* gpu, const TimeQuery* q, TimeStep* out, char* why, size_t why_cap) {
    memset(out, 0, sizeof(*out));
    const TimeConstants* k = &TIME_CONSTANTS;
    if (TIME_NUM_GROUPS > TIME_MAX_GROUPS) {
        snprintf(why, why_cap, "common/time_table.c has %d groups of ops, more than time_model.c's %d", TIME_NUM_GROUPS,
                 TIME_MAX_GROUPS);
        return 0;
    }
    if (q->precision == PRECISION_FP32) {
        snprintf(why, why_cap, "FP32's kernels are not counted (the kernel report counts FP16's, which BF16 shares)");
        return 0;
    }
    if (q->T != k->T || q->V != k->V) {
        snprintf(why, why_cap, "the kernel report counts T = %d and the %d-token vocabulary, not T = %d, V = %d", k->T, k->V,
                 q->T, q->V);
        return 0;
    }
    int path = gpu->arch >= 90 ? 90 : 80;
    int ge = q->gelu_fusion >= 0 ? q->gelu_fusion : gpu->arch >= 90 ? 2 : 0;
    int r = q->recompute, every = r == 3 ? 1 : 0, micro = q->micro_steps > 1 ? q->micro_steps : 1;
    const TimeSet* one = find_set(q->C, q->NH, path, ge, 1, 0, 0);
    const char* dev = path == 90 ? "sm_90 (wgmma)" : "sm_80 (mma.sync)";
    if (!one) {
        snprintf(why, why_cap, "the kernel report has no counted step of %d channels and %d heads at -ge %d on %s", q->C,
                 q->NH, ge, dev);
        return 0;
    }
    const TimeSet* rs = r ? find_set(q->C, q->NH, path, ge, 1, r, every) : one;
    if (!rs) {
        snprintf(why, why_cap, "the kernel report has no counted step at -r %d (-ge %d, %s, %s)", r, ge, dev, one->model);
        return 0;
    }
    // -r 3 at K layers a segment: the run at K = 1 less, for each of the L - ceil(L / K) layers that
    // do not end a segment, what such a layer saves (its LayerNorm's forward again against the rest of
    // its forward: time_table.c's sets of recompute_every -1).
    int K = q->recompute_every > 0 ? (q->recompute_every < q->L ? q->recompute_every : q->L) : 1;
    const TimeSet* merged = r == 3 && K > 1 ? find_set(q->C, q->NH, path, ge, 1, 3, -1) : NULL;
    if (r == 3 && K > 1 && !merged) {
        snprintf(why, why_cap, "the kernel report has no counted -r 3 step with segments of 2 layers (-ge %d, %s, %s)", ge,
                 dev, one->model);
        return 0;
    }
    const TimeSet* two = micro > 1 ? find_set(q->C, q->NH, path, ge, 2, 0, 0) : NULL;
    if (micro > 1 && !two) {
        snprintf(why, why_cap, "the kernel report has no counted 2-micro-step step (-ge %d, %s, %s)", ge, dev, one->model);
        return 0;
    }
    static double acc[TIME_MAX_GROUPS][TIME_NUM_METRICS];
    memset(acc, 0, sizeof(acc));
    double n = micro;
    // n micro-steps at -r r: the first (the set of -r r) and n - 1 more, each what a micro-step past the
    // first adds at -r 0 (the 2-micro-step run less the 1-micro-step one) and what -r r re-runs (its
    // 1-micro-step run less -r 0's): n rs + (n - 1) two - 2 (n - 1) one, which is one + (n - 1) (two -
    // one) at -r 0, as the report's micro_steps.
    add_set(acc, rs, n == 1 ? 1.0 : (r ? n : 2.0 - n), q, 0);
    if (n > 1) {
        add_set(acc, two, n - 1, q, 0);
        if (r) add_set(acc, one, -2.0 * (n - 1), q, 0);
    }
    if (merged) add_set(acc, merged, -n * (q->L - (q->L + K - 1) / K), q, 1);
    double bt = (double)q->B * q->T;
    for (int g = 0; g < TIME_NUM_GROUPS; g++) {
        double* x = acc[g];
        long launches = lround(x[TM_LAUNCHES]);
        if (launches <= 0) continue;
        const TimeGroup* grp = &TIME_GROUPS[g];
        double per[TIME_NUM_METRICS];
        for (int m = 0; m < TIME_NUM_METRICS; m++) per[m] = x[m] / x[TM_LAUNCHES];
        double t = op_time(gpu, grp, per, bt) * launches;
        out->seconds += t;
        out->launches += (int)launches;
        int f = 0;
        while (f < out->n_families && strcmp(out->family[f], grp->family) != 0) f++;
        if (f == out->n_families && f < TIME_MAX_FAMILIES) out->family[out->n_families++] = grp->family;
        if (f < TIME_MAX_FAMILIES) out->family_seconds[f] += t;
        if (strcmp(grp->family, "optimizer") == 0) out->optimizer_seconds += t;
    }
    out->gelu_fusion = ge;
    snprintf(out->counts, sizeof(out->counts), "%s's counted steps on %s, -ge %d%s", one->model, dev, ge,
             q->precision == PRECISION_BF16 ? " (FP16's counts)" : "");
    return 1;
}
