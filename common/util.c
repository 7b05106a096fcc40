// util.c: fatal errors, checked allocation and file I/O, atomic writes, the clock, checksums.
#define _GNU_SOURCE
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// Temporary files of atomic writes not yet renamed: fatal() removes them.
static char** g_temps;
static int g_ntemps, g_temps_cap;

static void temp_register(const char* tmp) {
    if (g_ntemps == g_temps_cap) {
        int cap = g_temps_cap ? 2 * g_temps_cap : 16;
        char** p = (char**)realloc(g_temps, (size_t)cap * sizeof(char*));
        if (!p) return;  // only cleanup is lost
        g_temps = p;
        g_temps_cap = cap;
    }
    g_temps[g_ntemps] = strdup(tmp);
    if (g_temps[g_ntemps]) g_ntemps++;
}

static void temp_unregister(const char* tmp) {
    for (int i = g_ntemps - 1; i >= 0; i--) {
        if (strcmp(g_temps[i], tmp) == 0) {
            free(g_temps[i]);
            g_temps[i] = g_temps[--g_ntemps];
            return;
        }
    }
}

static int g_fatal_rank = -1;  // in a run of several ranks, errors name the rank
void fatal_set_prefix_rank(int rank) { g_fatal_rank = rank; }
static void (*g_fatal_before_exit)(void);
void fatal_set_before_exit(void (*fn)(void)) { g_fatal_before_exit = fn; }

void fatal(const char* fmt, ...) {
    va_list ap;
    for (int i = 0; i < g_ntemps; i++) unlink(g_temps[i]);
    g_ntemps = 0;
    fflush(stdout);
    // One write of the whole line: under mpirun a line in pieces can be forwarded around mpirun's
    // own abort banner.
    char line[8192];
    int n = g_fatal_rank >= 0 ? snprintf(line, sizeof(line), "error: rank %d: ", g_fatal_rank)
                              : snprintf(line, sizeof(line), "error: ");
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
    fflush(stderr);
    if (g_fatal_before_exit) g_fatal_before_exit();
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

static const char* mode_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

const char* path_not_regular(const char* path) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return NULL;
    return mode_name(st.st_mode);
}

// O_NONBLOCK makes opening a FIFO return at once (instead of waiting for a writer); the type
// is then checked on the open descriptor, so nothing can be swapped in between.
FILE* fopen_read_try(const char* path, char* why, size_t why_cap) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_cap, "cannot open file %s (%s) for reading", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    int have_stat = fstat(fd, &st) == 0;
    if (!have_stat || !S_ISREG(st.st_mode)) {
        snprintf(why, why_cap, "file %s is %s, expected a regular file", path,
                 have_stat ? mode_name(st.st_mode) : "unreadable");
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE* f = fdopen(fd, "rb");
    if (!f) {
        snprintf(why, why_cap, "cannot open file %s (%s) for reading", path, strerror(errno));
        close(fd);
    }
    return f;
}

FILE* fopen_check(const char* path, const char* mode) {
    char why[4400];
    if (mode[0] == 'r' && strchr(mode, '+') == NULL) {
        FILE* f = fopen_read_try(path, why, sizeof(why));
        if (!f) fatal("%s", why);
        return f;
    }
    FILE* f = fopen(path, mode);
    if (!f) fatal("cannot open file %s (%s) for writing", path, strerror(errno));
    return f;
}

void fread_check(void* ptr, size_t size, size_t count, FILE* f, const char* path) {
    size_t got = fread(ptr, size, count, f);
    if (got != count) fatal("file %s is truncated: expected %zu more bytes", path, (count - got) * size);
}

void fwrite_check(const void* ptr, size_t size, size_t count, FILE* f, const char* path) {
    errno = 0;
    if (fwrite(ptr, size, count, f) != count)
        fatal("cannot write file %s (%s)", path, errno ? strerror(errno) : "short write");
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
    FILE* f = fopen_check(tmp_path, "wb");
    temp_register(tmp_path);
    return f;
}

void atomic_finish(FILE* f, const char* tmp_path) {
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        int err = errno;
        fclose(f);
        fatal("cannot write file %s (%s)", tmp_path, strerror(err));
    }
    fclose_check(f, tmp_path);
}

void atomic_commit(const char* tmp_path, const char* path) {
    if (rename(tmp_path, path) != 0) fatal("cannot rename %s to %s (%s)", tmp_path, path, strerror(errno));
    temp_unregister(tmp_path);
    sync_parent_dir(path);
}

void atomic_close(FILE* f, const char* tmp_path, const char* path) {
    atomic_finish(f, tmp_path);
    atomic_commit(tmp_path, path);
}

void sync_parent_dir(const char* path) {
    char dir[4200];
    const char* slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof(dir), ".");
    else if (slash == path) snprintf(dir, sizeof(dir), "/");
    else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;  // the rename happened; only its durability is not forced
    fsync(fd);
    close(fd);
}

// "NAME.tmp.PID" -> PID, or 0 when name is not a temporary file of ours.
static long temp_file_pid(const char* name) {
    const char* t = strstr(name, ".tmp.");
    if (!t) return 0;
    while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
    const char* d = t + 5;
    if (*d == '\0') return 0;
    long pid = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || pid > 100000000) return 0;
        pid = pid * 10 + (*d - '0');
    }
    return pid;
}

int remove_temp_files(const char* dir, const char* name_prefix, int only_dead, long long* bytes) {
    DIR* d = opendir(dir);
    int removed = 0;
    if (bytes) *bytes = 0;
    if (!d) return 0;
    size_t plen = strlen(name_prefix);
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        long pid = temp_file_pid(ent->d_name);
        if (pid <= 0 || strncmp(ent->d_name, name_prefix, plen) != 0) continue;
        if (only_dead && (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue;
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (unlink(path) == 0) {
            removed++;
            if (bytes) *bytes += st.st_size;
        }
    }
    closedir(d);
    return removed;
}

double wall_time_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

void format_clock(double seconds, char* buf, size_t cap) {
    if (!(seconds >= 0) || seconds > 1e9) {
        snprintf(buf, cap, "--:--");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, "%ld:%02ld", s / 60, s % 60);
}

double eta_seconds(double first_step_s, double after_first_s, int steps_done, int steps_left) {
    double pace = steps_done > 0 ? after_first_s / steps_done : first_step_s;
    return pace * steps_left;
}

#define PROGRESS_FIRST_MS 5000.0
#define PROGRESS_EVERY_MS 10000.0

void progress_begin(Progress* p, const char* what, const char* unit, long long total) {
    p->what = what;
    p->unit = unit;
    p->total = total;
    p->first_ms = PROGRESS_FIRST_MS;
    p->every_ms = PROGRESS_EVERY_MS;
    p->out = stdout;
    p->start_ms = wall_time_ms();
    p->next_ms = -1.0;  // from first_ms, at the first update (so a caller may change it)
    p->printed = 0;
}

void progress_update(Progress* p, long long done) {
    double now = wall_time_ms();
    if (p->next_ms < 0) p->next_ms = p->start_ms + p->first_ms;
    if (now < p->next_ms || done <= 0 || done >= p->total) return;
    double spent = (now - p->start_ms) / 1e3;
    char el[32], left[32];
    format_clock(spent, el, sizeof(el));
    format_clock(spent / (double)done * (double)(p->total - done), left, sizeof(left));
    fprintf(p->out, "%s: %lld/%lld %s, %s, about %s left\n", p->what, done, p->total, p->unit, el, left);
    fflush(p->out);
    p->printed++;
    p->next_ms = now + p->every_ms;
}

// ---------------------------------------------------------------------------------------------
// Checksum (see util.h). Constants: the golden ratio and splitmix64's multipliers (odd, so each
// multiplication is a bijection).

#define CK_GOLD 0x9E3779B97F4A7C15ull
#define CK_M1 0xBF58476D1CE4E5B9ull
#define CK_M2 0x94D049BB133111EBull

static inline uint64_t ck_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t ck_round(uint64_t acc, uint64_t w) { return ck_rotl(acc ^ (w * CK_M1), 29) * CK_M2; }

static inline uint64_t ck_load(const unsigned char* p) {
    uint64_t w;
    memcpy(&w, p, 8);  // little-endian hosts only, like every file format here
    return w;
}

void checksum_init(Checksum* c) {
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < 4; i++) c->lane[i] = CK_GOLD * (uint64_t)(i + 1);
}

static void ck_stripe(Checksum* c, const unsigned char* p) {
    c->lane[0] = ck_round(c->lane[0], ck_load(p));
    c->lane[1] = ck_round(c->lane[1], ck_load(p + 8));
    c->lane[2] = ck_round(c->lane[2], ck_load(p + 16));
    c->lane[3] = ck_round(c->lane[3], ck_load(p + 24));
}

void checksum_update(Checksum* c, const void* data, size_t n) {
    const unsigned char* p = (const unsigned char*)data;
    c->total += n;
    if (c->have) {
        size_t take = 32 - c->have < n ? 32 - c->have : n;
        memcpy(c->stripe + c->have, p, take);
        c->have += take;
        p += take;
        n -= take;
        if (c->have < 32) return;
        ck_stripe(c, c->stripe);
        c->have = 0;
    }
    for (; n >= 32; p += 32, n -= 32) ck_stripe(c, p);
    memcpy(c->stripe, p, n);
    c->have = n;
}

uint64_t checksum_final(const Checksum* c) {
    uint64_t h = c->total * CK_GOLD;
    for (int i = 0; i < 4; i++) h = ck_round(h, c->lane[i]);
    size_t i = 0;
    for (; i + 8 <= c->have; i += 8) h = ck_round(h, ck_load(c->stripe + i));
    for (; i < c->have; i++) h = ck_round(h, c->stripe[i] | 0x100u);
    h ^= h >> 31;  // final avalanche (splitmix64's)
    h *= CK_M1;
    h ^= h >> 27;
    h *= CK_M2;
    return h ^ (h >> 31);
}

uint64_t checksum_bytes(const void* data, size_t n) {
    Checksum c;
    checksum_init(&c);
    checksum_update(&c, data, n);
    return checksum_final(&c);
}
