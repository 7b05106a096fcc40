// test_host.c: small host pieces both engines share: the sampler, the LR schedule, the GPU peak
// table behind MFU, and the run-time library loader the GPU trainer loads cuBLASLt and NCCL with.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynlib.h"
#include "gpu_peak.h"
#include "rng.h"
#include "sampler.h"
#include "schedule.h"
#include "test.h"
#include "util.h"

#define V 50

static void fill_logits(float* l, uint64_t seed) {
    uint64_t r = rng_seed(seed);
    for (int i = 0; i < V; i++) l[i] = 3.0f * rng_normal(&r);
}

static void test_sampler(void) {
    float logits[V], work[V];
    int scratch[V];
    fill_logits(logits, 1);
    int argmax = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[argmax]) argmax = i;
    uint64_t rng = rng_seed(2);
    memcpy(work, logits, sizeof(work));
    CHECK(sample_token(work, V, 0.0f, 0, &rng, scratch) == argmax, "sampler: temperature 0 is greedy");
    memcpy(work, logits, sizeof(work));
    CHECK(sample_token(work, V, 1.0f, 1, &rng, scratch) == argmax, "sampler: top-k 1 is greedy");

    // top-k 5 never leaves the 5 most likely; frequencies follow softmax(logits / temperature).
    int rank[V];
    for (int i = 0; i < V; i++) rank[i] = 0;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) rank[i] += logits[j] > logits[i];
    int outside = 0, counts[V] = {0};
    const int draws = 200000;
    const float temp = 2.0f;
    for (int d = 0; d < draws; d++) {
        memcpy(work, logits, sizeof(work));
        int k = sample_token(work, V, 1.0f, 5, &rng, scratch);
        outside += rank[k] >= 5;
        memcpy(work, logits, sizeof(work));
        counts[sample_token(work, V, temp, 0, &rng, scratch)]++;
    }
    CHECK(outside == 0, "sampler: top-k 5 samples only the 5 most likely tokens");
    double maxv = -INFINITY, z = 0, worst = 0;
    for (int i = 0; i < V; i++) maxv = fmax(maxv, logits[i]);
    for (int i = 0; i < V; i++) z += exp((logits[i] - maxv) / temp);
    for (int i = 0; i < V; i++) {
        double p = exp((logits[i] - maxv) / temp) / z;
        double sd = sqrt(p * (1 - p) / draws);
        double dev = fabs(counts[i] / (double)draws - p) / (sd > 0 ? sd : 1);
        if (dev > worst) worst = dev;
    }
    char why[96];
    snprintf(why, sizeof(why), "worst deviation %.1f standard deviations", worst);
    test_report(worst < 5.0, "sampler: temperature 2 frequencies match softmax(logits / 2)", why);
    // The same RNG state gives the same token.
    uint64_t a = rng_seed(9), b = rng_seed(9);
    int same = 1;
    for (int d = 0; d < 100; d++) {
        memcpy(work, logits, sizeof(work));
        int x = sample_token(work, V, 1.0f, 10, &a, scratch);
        memcpy(work, logits, sizeof(work));
        same &= x == sample_token(work, V, 1.0f, 10, &b, scratch);
    }
    CHECK(same, "sampler: deterministic for an RNG state");
}

// Byte-level sampling: a model that puts nearly all its probability on a token above 255 still
// samples only bytes and end-of-text.
static void test_sampler_bytes(void) {
    enum { VB = 50304, EOT = 50256 };
    static float logits[VB], work[VB];
    static int scratch[VB];
    uint64_t r = rng_seed(5);
    for (int i = 0; i < VB; i++) logits[i] = rng_normal(&r);
    logits[16497] = 30.0f;  // what an untrained model might favour
    logits[EOT] = 2.0f;
    int outside = 0, eots = 0, bytes_seen = 0, greedy;
    uint64_t rng = rng_seed(6);
    for (int d = 0; d < 2000; d++) {
        memcpy(work, logits, sizeof(work));
        sampler_keep_bytes(work, VB, EOT);
        int k = sample_token(work, VB, 1.0f, d % 2 ? 0 : 40, &rng, scratch);
        outside += k >= 256 && k != EOT;
        eots += k == EOT;
        bytes_seen += k < 256;
    }
    memcpy(work, logits, sizeof(work));
    sampler_keep_bytes(work, VB, EOT);
    greedy = sample_token(work, VB, 0.0f, 0, &rng, scratch);
    CHECK(outside == 0, "sampler: byte-level sampling never draws a token above 255 but end-of-text");
    CHECK(eots > 0 && bytes_seen > 0, "sampler: byte-level sampling still draws bytes and end-of-text");
    int best = EOT;
    for (int i = 0; i < 256; i++) if (logits[i] > logits[best]) best = i;
    CHECK(greedy == best, "sampler: byte-level greedy picks the most likely allowed token");
    memcpy(work, logits, sizeof(work));
    CHECK(sample_token(work, VB, 0.0f, 0, &rng, scratch) == 16497, "sampler: without the byte mask the whole vocabulary");
}

static void check_peak(const char* name, int sm, Precision p, double tflops) {
    char note[256], label[320];
    double got = gpu_peak_flops(name, sm / 10, sm % 10, p, note, sizeof(note)) / 1e12;
    snprintf(label, sizeof(label), "gpu peak: %s (sm_%d) %s: %g TFLOP/s [%s]", name, sm, precision_name(p), tflops, note);
    char why[320];
    snprintf(why, sizeof(why), "got %g TFLOP/s", got);
    test_report(fabs(got - tflops) < 1e-9 * (tflops > 1 ? tflops : 1), label, why);
    if (tflops > 0)
        test_report(strstr(note, "TFLOP/s (NVIDIA") != NULL, "gpu peak: the note names the peak's source", note);
    else
        test_report(strncmp(note, "not shown: ", 11) == 0 && strstr(note, "tokens/s") != NULL,
                    "gpu peak: an unknown peak says why MFU is not shown", note);
}

static void test_gpu_peak(void) {
    // Names as cudaGetDeviceProperties reports them, V100 to B200 in architecture order; then names
    // the table must not take for one of its cards.
    check_peak("Tesla V100-SXM2-16GB", 70, PRECISION_FP16, 125);
    check_peak("Tesla V100-SXM2-32GB", 70, PRECISION_FP32, 15.7);
    check_peak("Tesla V100-PCIE-16GB", 70, PRECISION_FP16, 112);
    check_peak("Tesla V100S-PCIE-32GB", 70, PRECISION_FP16, 130);
    check_peak("Tesla V100-SXM2-16GB", 70, PRECISION_BF16, 0);  // no bf16 tensor cores
    check_peak("Tesla T4", 75, PRECISION_FP16, 65);
    check_peak("NVIDIA A10", 86, PRECISION_BF16, 125);
    check_peak("NVIDIA A10G", 86, PRECISION_FP16, 0);  // not the A10: another clock, no figure here
    check_peak("NVIDIA A100-SXM4-40GB", 80, PRECISION_BF16, 312);
    check_peak("NVIDIA A100-SXM4-80GB", 80, PRECISION_FP16, 312);
    check_peak("NVIDIA A100-PCIE-40GB", 80, PRECISION_FP16, 312);
    check_peak("NVIDIA A100 80GB PCIe", 80, PRECISION_BF16, 312);
    check_peak("NVIDIA A100-SXM4-80GB", 80, PRECISION_FP32, 19.5);
    check_peak("NVIDIA RTX A6000", 86, PRECISION_BF16, 154.8);
    check_peak("NVIDIA L40S", 89, PRECISION_BF16, 362.05);
    check_peak("NVIDIA L40", 89, PRECISION_FP16, 181.05);
    check_peak("NVIDIA L4", 89, PRECISION_FP16, 121);
    check_peak("NVIDIA GeForce RTX 3090", 86, PRECISION_FP16, 71);
    check_peak("NVIDIA GeForce RTX 3090 Ti", 86, PRECISION_FP16, 0);
    check_peak("NVIDIA GeForce RTX 4090", 89, PRECISION_BF16, 165.2);
    check_peak("NVIDIA H100 80GB HBM3", 90, PRECISION_BF16, 989.4);
    check_peak("NVIDIA H100 80GB HBM3", 90, PRECISION_FP32, 66.9);
    check_peak("NVIDIA H100 PCIe", 90, PRECISION_FP16, 756);
    check_peak("NVIDIA H100 NVL", 90, PRECISION_FP16, 835.5);
    check_peak("NVIDIA H200", 90, PRECISION_BF16, 989.4);
    check_peak("NVIDIA B200", 100, PRECISION_BF16, 2250);
    check_peak("NVIDIA B200", 100, PRECISION_FP32, 0);  // no fp32 figure in the table
    check_peak("NVIDIA GeForce GTX 1080", 61, PRECISION_FP16, 0);
    check_peak("NVIDIA A100-SXM4-80GB", 90, PRECISION_FP16, 0);  // a name that does not fit its sm
    int rows_ok = 1;
    for (int i = 0; i < gpu_peak_count(); i++) {
        const GpuPeak* r = gpu_peak_row(i);
        rows_ok &= r->tensor_tflops > 0 && r->fp32_tflops >= 0 && r->source && strncmp(r->source, "NVIDIA ", 7) == 0;
    }
    CHECK(rows_ok && gpu_peak_row(gpu_peak_count()) == NULL, "gpu peak: every row has a tensor peak and a source");
}

// Elapsed time and progress lines: the format, and a line per update once due (here at once).
static void test_progress(void) {
    char b[32];
    format_clock(0.4, b, sizeof(b));
    int ok = strcmp(b, "0:00") == 0;
    format_clock(75, b, sizeof(b));
    ok &= strcmp(b, "1:15") == 0;
    format_clock(3 * 3600 + 62, b, sizeof(b));
    ok &= strcmp(b, "3:01:02") == 0;
    format_clock(-1, b, sizeof(b));
    ok &= strcmp(b, "--:--") == 0;
    CHECK(ok, "progress: durations print as m:ss and h:mm:ss");
    // A first step of 10 s (after a step-0 validation), then 9 steps in 9 s: 90 steps left take 90 s,
    // not the 171 s of the whole average; at the first step, its own pace.
    CHECK(eta_seconds(10.0, 9.0, 9, 90) == 90.0 && eta_seconds(10.0, 0.0, 0, 90) == 900.0,
          "eta: the pace after the first step (which pays for warm-up) predicts the steps left");
    Progress p;
    progress_begin(&p, "val", "batches", 10);
    FILE* f = tmpfile();
    p.out = f;
    progress_update(&p, 3);  // not due yet: the first line waits 5 s
    p.first_ms = 0;
    p.next_ms = -1;
    p.every_ms = 0;
    progress_update(&p, 4);
    progress_update(&p, 10);  // the phase is over: no line
    char line[128] = "";
    rewind(f);
    if (!fgets(line, sizeof(line), f)) line[0] = '\0';
    fclose(f);
    CHECK(p.printed == 1 && strncmp(line, "val: 4/10 batches, 0:00, about 0:00 left", 40) == 0,
          "progress: a due update prints 'what: done/total unit, elapsed, about ... left'");
}

static void test_schedule(void) {
    check_close("schedule: warmup step 0 is lr/warmup", lr_at_step(0, 100, 1.0f, 10, 0.1f), 0.1, 1e-6);
    check_close("schedule: end of warmup reaches the peak", lr_at_step(9, 100, 1.0f, 10, 0.1f), 1.0, 1e-6);
    check_close("schedule: halfway through decay is the midpoint", lr_at_step(55, 100, 1.0f, 10, 0.1f), 0.55, 1e-5);
    check_close("schedule: the last step reaches the floor", lr_at_step(100, 100, 1.0f, 10, 0.1f), 0.1, 1e-6);
    check_close("schedule: final fraction 1 is constant", lr_at_step(70, 100, 3e-4f, 0, 1.0f), 3e-4, 1e-6);
    int monotone = 1;
    for (int s = 10; s < 100; s++) monotone &= lr_at_step(s + 1, 100, 1.0f, 10, 0.0f) <= lr_at_step(s, 100, 1.0f, 10, 0.0f);
    CHECK(monotone, "schedule: cosine decay never rises");
}

// dynlib_load on a library every glibc system has (libm.so.6), one that exists nowhere, and a
// function libm lacks: the handle and the functions, or NULL, no function, and a line naming what
// is missing.
static void test_dynlib(void) {
    char why[512] = "";
    const char* names[] = {"cos", "sqrt"};
    void* fns[2] = {NULL, NULL};
    void* lib = dynlib_load("the math library", "libm.so.6", names, fns, 2, why, sizeof(why));
    double (*cos_fn)(double) = NULL, (*sqrt_fn)(double) = NULL;
    if (lib) {
        *(void**)&cos_fn = fns[0];
        *(void**)&sqrt_fn = fns[1];
    }
    CHECK(lib && cos_fn && sqrt_fn && cos_fn(0.0) == 1.0 && sqrt_fn(16.0) == 4.0,
          "dynlib: libm.so.6's cos and sqrt loaded and called");

    void* none[1] = {(void*)&why};
    const char* no_lib = "cannot load the test's library (libgpt2_no_such_library.so.7): ";
    lib = dynlib_load("the test's library", "libgpt2_no_such_library.so.7", names, none, 1, why, sizeof(why));
    test_report(!lib && none[0] == NULL && strncmp(why, no_lib, strlen(no_lib)) == 0 &&
                    strstr(why + strlen(no_lib), "libgpt2_no_such_library.so.7") != NULL && !strchr(why, '\n'),
                "dynlib: a missing library is one line naming it and the loader's reason", why);

    const char* missing[] = {"cos", "gpt2_no_such_function"};
    void* two[2] = {(void*)&why, (void*)&why};
    const char* no_fn = "the math library (libm.so.6) has no gpt2_no_such_function: ";
    lib = dynlib_load("the math library", "libm.so.6", missing, two, 2, why, sizeof(why));
    test_report(!lib && two[0] == NULL && two[1] == NULL && strncmp(why, no_fn, strlen(no_fn)) == 0 &&
                    strstr(why + strlen(no_fn), "gpt2_no_such_function") != NULL && !strchr(why, '\n'),
                "dynlib: a missing function is one line naming it and the loader's reason", why);
}

int main(void) {
    test_sampler();
    test_sampler_bytes();
    test_schedule();
    test_progress();
    test_gpu_peak();
    test_dynlib();
    return test_finish();
}
