// logger.h: the machine-readable log: OUT/log.jsonl, one JSON object per line, e.g.
//   {"step": 12, "train_loss": 5.1234, "grad_norm": 0.98, "lr": 0.0003, "ms": 812.5, "tok_per_s": 315.1,
//    "loss_scale": 65536, "skipped": 0}
//   {"step": 20, "val_loss": 5.0012}
// A resumed run appends; a fresh run starts the file anew. Plots read it with any JSON reader.
#ifndef COMMON_LOGGER_H
#define COMMON_LOGGER_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE* f;  // NULL when there is no output dir
} Logger;

void logger_open(Logger* log, const char* output_dir, int append);
// loss_scale: the FP16 loss scale the step used (1 without loss scaling); skipped: 1 when the
// update was skipped because a gradient was inf or NaN.
void logger_step(Logger* log, int step, float loss, float grad_norm, float lr, double ms, double tok_per_s,
                 float loss_scale, int skipped);
void logger_val(Logger* log, int step, float val_loss);
void logger_close(Logger* log);

#ifdef __cplusplus
}
#endif
#endif
