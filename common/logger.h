// logger.h: the machine-readable logs: OUT/log.jsonl, one JSON object per line, e.g.
//   {"step": 12, "train_loss": 5.1234, "grad_norm": 0.98, "lr": 0.0003, "ms": 812.5, "tok_per_s": 315.1,
//    "loss_scale": 65536, "skipped": 0}
//   {"step": 20, "val_loss": 5.0012}
// A skipped update adds "skip_reason" ("non-finite gradients", "loss outlier (z 8.2)", ...). A
// value that is not finite is written as null, so every line is valid JSON. A fresh run starts
// the file anew; a resumed run keeps the lines up to its checkpoint's step and drops the rest
// (steps the interrupted run did after it), so each step appears once. Plots read it with any
// JSON reader. Beside it OUT/main.log, llm.c's log format (its dev/vislog.ipynb reads it):
//   s:0 trl:10.8055 lr:0.000040 norm:2.84      the update with index 0 (log.jsonl's step 1)
//   s:20 tel:5.0012                            val loss after 20 updates
//   s:20 eval:0.2950                           HellaSwag accuracy after 20 updates
// kept and cut on resume the same way. A failed write (a full disk), or a log deleted or replaced
// under the run (checked at every write), is fatal, naming the file.
#ifndef COMMON_LOGGER_H
#define COMMON_LOGGER_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE* f;       // log.jsonl; NULL when there is no output dir
    char path[4200];
    FILE* main_f;  // main.log, llm.c's format
    char main_path[4200];
} Logger;

// keep_upto_step < 0: a fresh log. Else the existing log's lines with "step" <= keep_upto_step are
// kept (a line that does not parse, such as one cut off by a crash, is dropped). Either way the
// file is written under a temporary name and renamed into place, so whatever stood at the path
// (a FIFO, a symlink) is replaced, never written through.
void logger_open(Logger* log, const char* output_dir, long keep_upto_step);
// loss_scale: the FP16 loss scale the step used (1 without loss scaling); skip_reason: NULL when
// the update was applied, else why it was skipped.
void logger_step(Logger* log, int step, float loss, float grad_norm, float lr, double ms, double tok_per_s,
                 float loss_scale, const char* skip_reason);
void logger_val(Logger* log, int step, float val_loss);
// HellaSwag accuracy after `step` updates: {"step", "hellaswag"}, and main.log's "s:N eval:ACC".
void logger_eval(Logger* log, int step, float accuracy);
// -lg: the device memory in use (MiB) after `step`: {"step", "memory_mib"} (log.jsonl only).
void logger_memory(Logger* log, int step, double mib);
void logger_close(Logger* log);

#ifdef __cplusplus
}
#endif
#endif
