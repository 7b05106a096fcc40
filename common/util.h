// util.h: small helpers every host file uses: fatal errors with one clear line,
// checked allocation and file I/O. Both engines include it; it is C that C++ also accepts.
#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

// Prints "error: <message>" on stderr and exits with status 1. Every bad input ends here,
// so the user sees exactly one line naming what was wrong.
void fatal(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

void* malloc_check(size_t size, const char* what);
void* calloc_check(size_t count, size_t size, const char* what);
FILE* fopen_check(const char* path, const char* mode);
void fread_check(void* ptr, size_t size, size_t count, FILE* f, const char* path);
void fwrite_check(const void* ptr, size_t size, size_t count, FILE* f, const char* path);
void fclose_check(FILE* f, const char* path);
// Size in bytes of an open file, leaving its position at the start.
long file_size(FILE* f, const char* path);
// Creates a directory and its parents if missing (like mkdir -p).
void make_dirs(const char* path);
int file_exists(const char* path);
// Atomic file writes: open PATH.tmp.PID, write, then atomic_close renames it onto PATH,
// so a reader never sees a half-written file.
FILE* atomic_open(const char* path, char* tmp_path, size_t tmp_cap);
void atomic_close(FILE* f, const char* tmp_path, const char* path);
double wall_time_ms(void);

#ifdef __cplusplus
}
#endif
#endif
