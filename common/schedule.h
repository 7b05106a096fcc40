// schedule.h: the learning rate at each step: linear warmup, then cosine decay to a floor.
#ifndef COMMON_SCHEDULE_H
#define COMMON_SCHEDULE_H

#include <math.h>

// step counts from 0. Warmup reaches the peak at step warmup-1; the decay reaches
// lr * final_frac at step max_steps.
static inline float lr_at_step(int step, int max_steps, float lr, int warmup, float final_frac) {
    if (step < warmup) return lr * (float)(step + 1) / (float)warmup;
    if (max_steps <= warmup) return lr;
    float ratio = (float)(step - warmup) / (float)(max_steps - warmup);
    if (ratio > 1.0f) ratio = 1.0f;
    float coeff = 0.5f * (1.0f + cosf(3.14159265358979f * ratio));
    float floor_lr = lr * final_frac;
    return floor_lr + coeff * (lr - floor_lr);
}

#endif
