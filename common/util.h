// util.h: small helpers every host file uses: fatal errors with one clear line,
// checked allocation and file I/O. Both engines include it; it is C that C++ also accepts.
#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

// Prints "error: <message>" on stderr and exits with status 1. Every bad input ends here,
// so the user sees exactly one line naming what was wrong. Temporary files of unfinished atomic
// writes (atomic_open) are removed first: an error never leaves half a file behind.
void fatal(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
// In a run of several ranks every error line starts "error: rank R: ..." (common/ranks.c sets it).
void fatal_set_prefix_rank(int rank);
// A function fatal() calls after its line, before exit(): the ranks' host transport closes its
// connections there, so the other ranks end at once instead of waiting on exit handlers.
void fatal_set_before_exit(void (*fn)(void));

void* malloc_check(size_t size, const char* what);
void* calloc_check(size_t count, size_t size, const char* what);
// Opening for reading ("r..." modes) accepts regular files only: a FIFO would block forever and
// a directory reads as garbage, so either ends in one line saying what the path is instead.
FILE* fopen_check(const char* path, const char* mode);
// The same for reading, returning NULL with the reason in why instead of exiting.
FILE* fopen_read_try(const char* path, char* why, size_t why_cap);
// "a directory", "a FIFO (named pipe)", ... for a path that exists and is not a regular file;
// NULL for a regular file or a path that does not exist.
const char* path_not_regular(const char* path);
void fread_check(void* ptr, size_t size, size_t count, FILE* f, const char* path);
void fwrite_check(const void* ptr, size_t size, size_t count, FILE* f, const char* path);
void fclose_check(FILE* f, const char* path);
// Size in bytes of an open file, leaving its position at the start.
long file_size(FILE* f, const char* path);
// Creates a directory and its parents if missing (like mkdir -p).
void make_dirs(const char* path);
int file_exists(const char* path);
// Atomic file writes: open PATH.tmp.PID, write, then atomic_close renames it onto PATH and
// syncs the directory, so a reader never sees a half-written file and a finished one survives a
// power cut. Until then the temporary file is registered: fatal() removes it.
FILE* atomic_open(const char* path, char* tmp_path, size_t tmp_cap);
void atomic_close(FILE* f, const char* tmp_path, const char* path);
// atomic_close in two halves, for a set of files that must appear together (text_to_shards):
// atomic_finish makes the data durable under the temporary name; atomic_commit renames it.
void atomic_finish(FILE* f, const char* tmp_path);
void atomic_commit(const char* tmp_path, const char* path);
// Removes PATH.tmp.PID files in dir whose name starts with name_prefix: all of them, or with
// only_dead those whose process no longer runs. Returns how many; *bytes gets their total size.
int remove_temp_files(const char* dir, const char* name_prefix, int only_dead, long long* bytes);
// fsync of the directory holding path, so a rename in it is durable.
void sync_parent_dir(const char* path);
double wall_time_ms(void);
// A duration as m:ss, or h:mm:ss from an hour on ("--:--" when not finite or negative).
void format_clock(double seconds, char* buf, size_t cap);
// Seconds left for steps_left steps at the pace of the steps_done steps after a process's first step,
// which took after_first_s (with the validation and samples among them); before any such step, at the
// first step's own pace. The first step is left out: it pays for first touches, caches and kernel
// loading, and comes after the step-0 validation (on the default run, 20 batches), which made the
// first estimates 6 times the whole run's.
double eta_seconds(double first_step_s, double after_first_s, int steps_done, int steps_left);

// Progress of a long phase (validation, checking data): a line "WHAT: DONE/TOTAL UNIT, m:ss,
// about m:ss left" once the phase has run 5 s, then every 10 s, so a short phase prints nothing and
// a long one is never silent for long. Lines, not carriage returns: logs stay readable.
typedef struct {
    const char* what;
    const char* unit;
    long long total;
    double start_ms, next_ms;
    double first_ms, every_ms;  // progress_begin sets 5000 and 10000
    FILE* out;                  // progress_begin sets stdout
    int printed;                // lines printed so far
} Progress;
void progress_begin(Progress* p, const char* what, const char* unit, long long total);
void progress_update(Progress* p, long long done);

// 64-bit checksum of a byte stream, fed in pieces of any size (the result depends only on the
// bytes): four independent lanes over 32-byte stripes, so it runs at memory speed. Each round is
// a bijection of its lane's state, so any single changed 8-byte word always changes the result.
// Detects damage, not tampering.
typedef struct {
    uint64_t lane[4];
    uint64_t total;             // bytes fed
    unsigned char stripe[32];   // a partial stripe waiting for more bytes
    size_t have;
} Checksum;
void checksum_init(Checksum* c);
void checksum_update(Checksum* c, const void* data, size_t n);
uint64_t checksum_final(const Checksum* c);
uint64_t checksum_bytes(const void* data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
