// engine.c: choosing an engine (see engine.h) and the memory report's helper.
#include "engine.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

const char* precision_name(Precision p) {
    return p == PRECISION_FP16 ? "fp16" : p == PRECISION_BF16 ? "bf16" : "fp32";
}

void memory_report_add(MemoryReport* r, const char* name, size_t bytes) {
    if (r->count >= MEMORY_REPORT_MAX) fatal("memory report: more than %d components", MEMORY_REPORT_MAX);
    r->items[r->count].name = name;
    r->items[r->count].bytes = bytes;
    r->items[r->count].planned = bytes;
    r->items[r->count].measured = -1;
    r->items[r->count].host = 0;
    r->count++;
}

Engine* engine_select(const char* which, EngineCreateFn gpu_create, EngineCreateFn cpu_create, const GPT2Config* cfg,
                      const EngineOptions* opts) {
    char why[512] = "";
    if (strcmp(which, "cpu") != 0 && strcmp(which, "gpu") != 0 && strcmp(which, "auto") != 0)
        fatal("flag --engine expects auto, gpu or cpu, got '%s'", which);
    if (strcmp(which, "cpu") != 0) {
        Engine* e = NULL;
        if (gpu_create) e = gpu_create(cfg, opts, why, sizeof(why));
        else snprintf(why, sizeof(why), "this trainer was built without CUDA (no nvcc at make time)");
        if (e) {
            e->kind = "gpu";
            return e;
        }
        if (strcmp(which, "gpu") == 0) fatal("flag --engine gpu: no usable GPU: %s", why);
        printf("engine: no usable GPU (%s); using the C reference engine\n", why);
    }
    Engine* e = cpu_create(cfg, opts, why, sizeof(why));
    // Without a GPU, the GPU engine still runs on the CPU through the CUDA runtime's emulation
    // (./train_gpt2_emu, slow): ranks and ZeRO there, which the C engine cannot do.
    if (!e && opts->num_ranks > 1)
        fatal("the C reference engine cannot run this configuration: %s; ./train_gpt2_emu (make emu) runs the GPU "
              "engine on this CPU, ranks and ZeRO included (slowly)", why);
    if (!e) fatal("the C reference engine cannot run this configuration: %s", why);
    e->kind = "cpu";
    return e;
}
