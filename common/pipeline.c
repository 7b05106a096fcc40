// pipeline.c: pipeline parallelism's geometry (see pipeline.h).
#include "pipeline.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pipe_stages(const EngineOptions* o) { return o->pp_stages > 1 ? o->pp_stages : 1; }

PipeStage pipe_stage(const EngineOptions* o, int num_layers, int rank) {
    PipeStage s;
    memset(&s, 0, sizeof(s));
    int ranks = o->num_ranks > 0 ? o->num_ranks : 1;
    s.stages = pipe_stages(o);
    s.dp_ranks = ranks / s.stages > 0 ? ranks / s.stages : 1;
    s.stage = rank / s.dp_ranks < s.stages ? rank / s.dp_ranks : s.stages - 1;
    s.dp_rank = rank % s.dp_ranks;
    if (s.stages == 1) {
        s.num_layers = num_layers;
    } else {
        for (int i = 0; i < s.stage; i++) s.first_layer += o->pp_layers[i];
        s.num_layers = o->pp_layers[s.stage];
    }
    s.embed = s.stage == 0;
    s.head = s.stage == s.stages - 1;
    int m = o->micro_steps > 0 ? o->micro_steps : 1;
    s.in_flight = s.stages - s.stage < m ? s.stages - s.stage : m;
    return s;
}

int pipe_check(int stages, int ranks, int num_layers, long micro_steps, char* why, size_t cap) {
    if (stages < 1 || stages > PP_MAX_STAGES) {
        snprintf(why, cap, "flag -pp (pipeline stages) is %d, expected 1 to %d", stages, PP_MAX_STAGES);
        return 0;
    }
    if (stages == 1) return 1;
    if (ranks % stages != 0) {
        snprintf(why, cap, "flag -pp (pipeline stages) is %d, which does not divide the %d rank%s: the ranks are the "
                 "stages times the data-parallel ranks", stages, ranks, ranks == 1 ? "" : "s");
        return 0;
    }
    if (stages > num_layers) {
        snprintf(why, cap, "flag -pp (pipeline stages) is %d, more stages than the model's %d layers: each stage needs at "
                 "least one", stages, num_layers);
        return 0;
    }
    if (micro_steps < stages) {
        snprintf(why, cap, "flag -pp %d with %ld micro-step%s a step: 1F1B needs at least as many micro-steps as stages "
                 "(else the pipeline idles most of the step); give -d at least %d x B x T x %d data-parallel rank%s",
                 stages, micro_steps, micro_steps == 1 ? "" : "s", stages, ranks / stages, ranks / stages == 1 ? "" : "s");
        return 0;
    }
    return 1;
}

int pipe_split_parse(const char* text, int stages, int num_layers, int* layers, char* why, size_t cap) {
    int count = 0;
    long sum = 0;
    const char* c = text;
    while (*c) {
        char* end;
        errno = 0;
        long x = strtol(c, &end, 10);
        if (end == c || errno || x > INT_MAX || (*end && *end != ',')) {
            snprintf(why, cap, "flag --pp-split expects layers per stage separated by commas (e.g. 12,12,12,12), got '%s'",
                     text);
            return 0;
        }
        if (x < 1) {
            snprintf(why, cap, "flag --pp-split '%s': stage %d has %ld layers; every stage needs at least one", text, count,
                     x);
            return 0;
        }
        if (count < PP_MAX_STAGES) layers[count] = (int)x;
        count++;
        sum += x;
        c = *end ? end + 1 : end;
        if (*end == ',' && !*c) {
            snprintf(why, cap, "flag --pp-split '%s' ends with a comma; expected layers per stage, e.g. 12,12,12,12", text);
            return 0;
        }
    }
    if (count != stages) {
        snprintf(why, cap, "flag --pp-split '%s' names %d stage%s, but -pp is %d", text, count, count == 1 ? "" : "s",
                 stages);
        return 0;
    }
    if (sum != num_layers) {
        snprintf(why, cap, "flag --pp-split '%s' sums to %ld layers; the model has %d", text, sum, num_layers);
        return 0;
    }
    return 1;
}

double pipe_bubble(int stages, int micro_steps) {
    if (stages <= 1) return 0.0;
    return (double)(stages - 1) / (double)(micro_steps + stages - 1);
}
