// util.c: fatal errors, checked allocation and file I/O, atomic writes, the clock.
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void fatal(const char* fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

void* malloc_check(size_t size, const char* what) {
    void* p = malloc(size ? size : 1);
    if (!p) fatal("out of host memory allocating %zu bytes for %s", size, what);
    return p;
}

void* calloc_check(size_t count, size_t size, const char* what) {
    void* p = calloc(count ? count : 1, size ? size : 1);
    if (!p) fatal("out of host memory allocating %zu bytes for %s", count * size, what);
    return p;
}

FILE* fopen_check(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    if (!f) fatal("cannot open file %s (%s) for %s", path, strerror(errno),
                  mode[0] == 'r' ? "reading" : "writing");
    return f;
}

void fread_check(void* ptr, size_t size, size_t count, FILE* f, const char* path) {
    size_t got = fread(ptr, size, count, f);
    if (got != count) fatal("file %s is truncated: expected %zu more bytes", path, (count - got) * size);
}

void fwrite_check(const void* ptr, size_t size, size_t count, FILE* f, const char* path) {
    if (fwrite(ptr, size, count, f) != count) fatal("cannot write file %s (%s)", path, strerror(errno));
}

void fclose_check(FILE* f, const char* path) {
    if (fclose(f) != 0) fatal("cannot finish writing file %s (%s)", path, strerror(errno));
}

long file_size(FILE* f, const char* path) {
    if (fseek(f, 0, SEEK_END) != 0) fatal("cannot seek in file %s", path);
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) fatal("cannot seek in file %s", path);
    return n;
}

void make_dirs(const char* path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0) return;
    if (n >= sizeof(buf)) fatal("directory path too long: %s", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                fatal("cannot create directory %s (%s)", buf, strerror(errno));
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) fatal("output path %s is not a directory", path);
}

int file_exists(const char* path) {
    struct stat st;
    return stat(path, &st) == 0;
}

FILE* atomic_open(const char* path, char* tmp_path, size_t tmp_cap) {
    int n = snprintf(tmp_path, tmp_cap, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= tmp_cap) fatal("file path too long: %s", path);
    return fopen_check(tmp_path, "wb");
}

void atomic_close(FILE* f, const char* tmp_path, const char* path) {
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        remove(tmp_path);
        fatal("cannot write file %s (%s)", path, strerror(errno));
    }
    fclose_check(f, tmp_path);
    if (rename(tmp_path, path) != 0) {
        remove(tmp_path);
        fatal("cannot rename %s to %s (%s)", tmp_path, path, strerror(errno));
    }
}

double wall_time_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
