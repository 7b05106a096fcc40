// logger.c: JSON-lines training log (see logger.h).
#define _GNU_SOURCE
#include "logger.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

// "step": N at the start of a log.jsonl line we wrote; -1 for anything else.
static long json_line_step(const char* line) {
    const char* key = "{\"step\": ";
    if (strncmp(line, key, strlen(key)) != 0) return -1;
    char* end;
    long step = strtol(line + strlen(key), &end, 10);
    return end != line + strlen(key) && (*end == ',' || *end == '}') ? step : -1;
}

// The step a main.log line belongs to, counted as log.jsonl counts (updates done): "s:N trl:" is
// the update with index N, which makes step N + 1; "s:N tel:" and "s:N eval:" were measured after
// N updates. -1 for anything else.
static long main_line_step(const char* line) {
    if (strncmp(line, "s:", 2) != 0) return -1;
    char* end;
    long step = strtol(line + 2, &end, 10);
    if (end == line + 2 || step < 0 || *end != ' ') return -1;
    if (strncmp(end, " trl:", 5) == 0) return step + 1;
    return strncmp(end, " tel:", 5) == 0 || strncmp(end, " eval:", 6) == 0 ? step : -1;
}

// Every write is flushed and checked, and the path must still name the file being written: a log
// deleted, renamed, or replaced (by a directory, another file) would take every later line with
// it, silently.
static void log_check(FILE* f, const char* path, int rc) {
    if (rc < 0 || fflush(f) != 0) fatal("cannot write log file %s (%s)", path, strerror(errno));
    struct stat open_st, path_st;
    if (fstat(fileno(f), &open_st) != 0) fatal("cannot stat log file %s (%s)", path, strerror(errno));
    int gone = stat(path, &path_st) != 0;
    if (gone || open_st.st_nlink == 0 || open_st.st_dev != path_st.st_dev || open_st.st_ino != path_st.st_ino)
        fatal("log file %s was %s while the run wrote it: its lines would go nowhere; stopping", path,
              gone ? "deleted" : S_ISDIR(path_st.st_mode) ? "replaced by a directory" : "deleted or replaced");
}

// What opening a log dropped of the file that stood there: its lines not kept, and the last step
// among them.
typedef struct {
    long lines, last_step;
} LogDropped;

// Opens OUT/name afresh (keep_upto_step < 0) or with the lines of the steps up to keep_upto_step.
static FILE* log_file_open(const char* output_dir, const char* name, long keep_upto_step, long (*line_step)(const char*),
                           char* path, size_t path_cap, LogDropped* dropped) {
    snprintf(path, path_cap, "%s/%s", output_dir, name);
    char tmp[4300];
    dropped->lines = 0;
    dropped->last_step = -1;
    FILE* out = atomic_open(path, tmp, sizeof(tmp));
    if (file_exists(path)) {
        FILE* in = fopen_check(path, "rb");
        char* line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, in)) > 0) {
            long step = line_step(line);
            // A line cut off by a crash has no newline: drop it with the steps after the checkpoint.
            if (step >= 0 && step <= keep_upto_step && line[len - 1] == '\n') {
                fwrite_check(line, 1, (size_t)len, out, tmp);
            } else {
                dropped->lines++;
                if (step > dropped->last_step) dropped->last_step = step;
            }
        }
        if (ferror(in)) fatal("cannot read log file %s", path);
        free(line);
        fclose(in);
    }
    // The kept lines are durable under the real name before anything new is appended to them;
    // the stream stays open across the rename (same file), so nothing can come in between.
    if (fflush(out) != 0 || fsync(fileno(out)) != 0) fatal("cannot write log file %s (%s)", tmp, strerror(errno));
    atomic_commit(tmp, path);
    return out;
}

void logger_open(Logger* log, const char* output_dir, long keep_upto_step) {
    log->f = log->main_f = NULL;
    if (!output_dir || !output_dir[0]) return;
    LogDropped d, main_d;
    log->f = log_file_open(output_dir, "log.jsonl", keep_upto_step, json_line_step, log->path, sizeof(log->path), &d);
    log->main_f = log_file_open(output_dir, "main.log", keep_upto_step, main_line_step, log->main_path,
                                sizeof(log->main_path), &main_d);
    // Nothing leaves a log unsaid: a resume names the steps it trains again, a fresh run the log it replaces.
    if (d.lines + main_d.lines == 0) return;
    if (keep_upto_step >= 0)
        printf("log: %s keeps its lines up to step %ld; %ld line%s after it (to step %ld, an earlier attempt's, "
               "trained again now) dropped, and %ld of main.log\n", log->path, keep_upto_step, d.lines,
               d.lines == 1 ? "" : "s", d.last_step, main_d.lines);
    else
        printf("log: %s held %ld line%s of an earlier run in this dir (to step %ld), and main.log %ld: this run "
               "starts both anew\n", log->path, d.lines, d.lines == 1 ? "" : "s", d.last_step, main_d.lines);
}

// %.9g keeps every float's exact value, so a log can be compared bit for bit; JSON has no NaN.
static const char* num(char* buf, size_t cap, double x) {
    if (!isfinite(x)) return "null";
    snprintf(buf, cap, "%.9g", x);
    return buf;
}

void logger_step(Logger* log, int step, float loss, float grad_norm, float lr, double ms, double tok_per_s,
                 float loss_scale, const char* skip_reason) {
    if (!log->f) return;
    char a[32], b[32], c[32], d[32], e[32], f[32];
    snprintf(d, sizeof(d), "%.3f", ms);
    snprintf(e, sizeof(e), "%.1f", tok_per_s);
    int rc = fprintf(log->f,
                     "{\"step\": %d, \"train_loss\": %s, \"grad_norm\": %s, \"lr\": %s, \"ms\": %s, \"tok_per_s\": %s, "
                     "\"loss_scale\": %s, \"skipped\": %d",
                     step, num(a, sizeof(a), loss), num(b, sizeof(b), grad_norm), num(c, sizeof(c), lr),
                     isfinite(ms) ? d : "null", isfinite(tok_per_s) ? e : "null", num(f, sizeof(f), loss_scale),
                     skip_reason != NULL);
    if (rc >= 0 && skip_reason) rc = fprintf(log->f, ", \"skip_reason\": \"%s\"", skip_reason);
    if (rc >= 0) rc = fprintf(log->f, "}\n");
    log_check(log->f, log->path, rc);
    // llm.c's line counts the update from 0: the update that makes step 1 is "s:0".
    log_check(log->main_f, log->main_path,
              fprintf(log->main_f, "s:%d trl:%.4f lr:%.6f norm:%.2f\n", step - 1, loss, lr, grad_norm));
}

void logger_val(Logger* log, int step, float val_loss) {
    if (!log->f) return;
    char a[32];
    log_check(log->f, log->path, fprintf(log->f, "{\"step\": %d, \"val_loss\": %s}\n", step, num(a, sizeof(a), val_loss)));
    log_check(log->main_f, log->main_path, fprintf(log->main_f, "s:%d tel:%.4f\n", step, val_loss));
}

void logger_eval(Logger* log, int step, float accuracy) {
    if (!log->f) return;
    char a[32];
    log_check(log->f, log->path, fprintf(log->f, "{\"step\": %d, \"hellaswag\": %s}\n", step, num(a, sizeof(a), accuracy)));
    log_check(log->main_f, log->main_path, fprintf(log->main_f, "s:%d eval:%.4f\n", step, accuracy));
}

void logger_memory(Logger* log, int step, double mib) {
    if (!log->f) return;
    char a[32];
    log_check(log->f, log->path, fprintf(log->f, "{\"step\": %d, \"memory_mib\": %s}\n", step, num(a, sizeof(a), mib)));
}

void logger_close(Logger* log) {
    if (log->f && fclose(log->f) != 0) fatal("cannot finish writing log file %s (%s)", log->path, strerror(errno));
    if (log->main_f && fclose(log->main_f) != 0)
        fatal("cannot finish writing log file %s (%s)", log->main_path, strerror(errno));
    log->f = log->main_f = NULL;
}
