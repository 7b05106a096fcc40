// logger.c: JSON-lines training log (see logger.h).
#include "logger.h"

#include "util.h"

void logger_open(Logger* log, const char* output_dir, int append) {
    log->f = NULL;
    if (!output_dir || !output_dir[0]) return;
    char path[4200];
    snprintf(path, sizeof(path), "%s/log.jsonl", output_dir);
    log->f = fopen_check(path, append ? "a" : "w");
}

// %.9g keeps every float's exact value, so a log can be compared bit for bit.
void logger_step(Logger* log, int step, float loss, float grad_norm, float lr, double ms, double tok_per_s,
                 float loss_scale, int skipped) {
    if (!log->f) return;
    fprintf(log->f,
            "{\"step\": %d, \"train_loss\": %.9g, \"grad_norm\": %.9g, \"lr\": %.9g, \"ms\": %.3f, \"tok_per_s\": %.1f, "
            "\"loss_scale\": %.9g, \"skipped\": %d}\n",
            step, loss, grad_norm, lr, ms, tok_per_s, loss_scale, skipped);
    fflush(log->f);
}

void logger_val(Logger* log, int step, float val_loss) {
    if (!log->f) return;
    fprintf(log->f, "{\"step\": %d, \"val_loss\": %.9g}\n", step, val_loss);
    fflush(log->f);
}

void logger_close(Logger* log) {
    if (log->f) fclose(log->f);
    log->f = NULL;
}
