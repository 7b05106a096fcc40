// schedule.h: the learning rate at each step, by llm.c's four schedules (its -k): a linear warmup
// over `warmup` steps, then cosine, linear or warmup-stable-decay (wsd) to lr * final_frac at the
// last step, or constant. The formulas, their float arithmetic and their corner cases are llm.c's,
// so a run here and there see the same learning rate at every step (test/test_schedule.sh checks
// each against an independent Python transcription of llm.c's definitions).
#ifndef COMMON_SCHEDULE_H
#define COMMON_SCHEDULE_H

#include <math.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

typedef enum { LR_COSINE, LR_LINEAR, LR_CONSTANT, LR_WSD } LRSchedule;

// The schedule named by -k, or -1 for a name that is not one of the four.
static inline int lr_schedule_parse(const char* name) {
    if (strcmp(name, "cosine") == 0) return LR_COSINE;
    if (strcmp(name, "linear") == 0) return LR_LINEAR;
    if (strcmp(name, "constant") == 0) return LR_CONSTANT;
    if (strcmp(name, "wsd") == 0) return LR_WSD;
    return -1;
}

// step counts from 0 (the update that makes step + 1). Warmup reaches the peak at step warmup-1;
// cosine and linear reach lr * final_frac at step max_steps (after the last update), wsd holds the
// peak until 80% of the steps and then falls as 1 - sqrt to lr * final_frac. constant is the peak
// from the first step: llm.c's constant schedule has no warmup, whatever -u says. Where llm.c
// would stop on an assertion (max_steps <= warmup, a step past max_steps) the peak or the floor
// holds instead.
static inline float lr_schedule_at(LRSchedule kind, int step, int max_steps, float lr, int warmup, float final_frac) {
    if (kind == LR_CONSTANT) return lr;
    if (kind == LR_WSD) {
        int decay_point = (int)(0.8f * max_steps);
        if (step < warmup) return lr * ((float)(step + 1) / warmup);
        if (step < decay_point) return lr;
        float ratio = (float)(step - decay_point) / (max_steps - decay_point);
        if (ratio > 1.0f) ratio = 1.0f;
        float min_lr = lr * final_frac;
        return min_lr + (1.0f - sqrtf(ratio)) * (lr - min_lr);
    }
    if (step < warmup) return lr * (float)(step + 1) / warmup;
    if (max_steps <= warmup) return lr;
    float ratio = (float)(step - warmup) / (max_steps - warmup);
    if (ratio > 1.0f) ratio = 1.0f;
    float min_lr = lr * final_frac;
    if (kind == LR_LINEAR) return lr - ratio * (lr - min_lr);
    // M_PI * ratio in double, then cosf of that rounded to float: llm.c's expression.
    float coeff = 0.5f * (1.0f + cosf(M_PI * ratio));
    return min_lr + coeff * (lr - min_lr);
}

// The cosine schedule (the default).
static inline float lr_at_step(int step, int max_steps, float lr, int warmup, float final_frac) {
    return lr_schedule_at(LR_COSINE, step, max_steps, lr, warmup, final_frac);
}

#endif
