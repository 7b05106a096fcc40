// cuda_cpu.cpp: runs kernels on the CPU and implements the CUDA runtime API subset the trainer uses.
// Each CUDA thread is a fiber with its own stack, switched with _setjmp/_longjmp (no signal-mask
// system call, unlike swapcontext) and reused from block to block. Worker OS threads take blocks
// from an atomic counter; inside a block a round-robin scheduler runs the fibers until each one
// waits at a barrier or exits, then releases the barrier - or, if it cannot ever be released,
// aborts with the kernel's name instead of hanging.
//
// What a GPU would punish and a CPU would forgive is made visible here: the order warps, lanes and
// blocks run in is a schedule, and a launch can run under several (results must agree); shared
// memory is NaN at every block start and ends at a guard page; device memory lives in its own
// region, each allocation followed by a guard page; limits a GPU enforces at launch are enforced.
// check_cpu.cpp adds what needs instrumentation (races, exact bounds, initialisation).
#include "cuda_cpu_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <pthread.h>
#include <ucontext.h>
#include <unistd.h>

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if defined(_FORTIFY_SOURCE) && _FORTIFY_SOURCE > 0
#error "build cuda_cpu with -U_FORTIFY_SOURCE: fortified longjmp refuses to jump between fiber stacks"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_CPU_ASAN 1
#include <sanitizer/common_interface_defs.h>
#else
#define CUDA_CPU_ASAN 0
#endif

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;
__thread unsigned cuda_cpu_linear_tid;
__thread int t_runtime;

static void print_alarms();

void cuda_cpu_fail(const char* fmt, ...) {
    t_runtime++;
    print_alarms();  // CUDA_CPU_ALARMS=report: what was seen before this
    fflush(stdout);
    // One write for the whole line: ranks under mpirun share the output, and a line written in pieces
    // came out with another rank's in between ("cuda_cpu: cuda_cpu: the result ...").
    static __thread char line[8192];  // not on a fiber's small stack
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(line, sizeof(line), "cuda_cpu: ");
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    if (write(2, line, (size_t)n) < 0) {}
    abort();
}

static size_t env_size(const char* name, size_t dflt, bool zero_ok = false) {
    const char* s = getenv(name);
    if (!s || !*s) return dflt;
    char* end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || *s == '-' || (v == 0 && !zero_ok))
        cuda_cpu_fail("%s=%s: expected a %s integer", name, s, zero_ok ? "non-negative" : "positive");
    return (size_t)v;
}

static int env_choice(const char* name, const char* const* choices, int n, int dflt) {
    const char* s = getenv(name);
    if (!s || !*s) return dflt;
    std::string all;
    for (int i = 0; i < n; i++) {
        if (!strcmp(s, choices[i])) return i;
        all += (i ? ", " : "") + std::string(choices[i]);
    }
    cuda_cpu_fail("%s=%s: expected one of %s", name, s, all.c_str());
}

// ============================================================================================
// Modes, from the environment (README: "Checks and schedules")
// ============================================================================================

bool g_instrumented;  // set by __tsan_init (check_cpu.cpp) before main
FILE* g_count_file;
bool g_count_run;
bool g_blas_skip;
bool g_wgmma_fault;
bool g_check;
bool g_check_run;
bool g_protect;
int g_strict_exit;
int g_alarms_report;
unsigned g_store_delay_us;
std::vector<Schedule> g_schedules;
static double g_watchdog_s;
static uint64_t g_atomic_seed;  // CUDA_CPU_ATOMIC_SEED: the order float atomics are summed in

// CUDA_CPU_SCHEDULES: forward, reverse, shuffle or shuffle:SEED, comma-separated.
static void parse_schedules(const char* s) {
    std::string list(s);
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        Schedule sc{SCHED_FORWARD, 0, item};
        if (item == "forward") sc.kind = SCHED_FORWARD;
        else if (item == "reverse") sc.kind = SCHED_REVERSE;
        else if (item == "shuffle") { sc.kind = SCHED_SHUFFLE; sc.seed = 1; }
        else if (item.compare(0, 8, "shuffle:") == 0 && item.size() > 8 &&
                 item.find_first_not_of("0123456789", 8) == std::string::npos) {
            sc.kind = SCHED_SHUFFLE;
            sc.seed = strtoull(item.c_str() + 8, nullptr, 10);
        } else {
            cuda_cpu_fail("CUDA_CPU_SCHEDULES=%s: '%s' is not a schedule; expected a comma-separated list of "
                          "forward, reverse, shuffle, shuffle:SEED", s, item.c_str());
        }
        g_schedules.push_back(sc);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (g_schedules.size() > 16) cuda_cpu_fail("CUDA_CPU_SCHEDULES=%s: at most 16 schedules", s);
}

static void modes_init() {
    static const char* const onoff[] = {"0", "1"};
    int check = env_choice("CUDA_CPU_CHECK", onoff, 2, g_instrumented ? 1 : 0);
    if (check && !g_instrumented)
        cuda_cpu_fail("CUDA_CPU_CHECK=1: this program was not built with the check instrumentation "
                      "(CUDA_CPU_CHECK_FLAGS in test/cuda_cpu/module.mk)");
    g_check = check;
    g_protect = env_choice("CUDA_CPU_PROTECT", onoff, 2, g_instrumented ? 1 : 0);
    g_eager = env_choice("CUDA_CPU_ASYNC", onoff, 2, 1) == 0;
    const char* count = getenv("CUDA_CPU_COUNT");
    if (count && *count) {
        if (!g_instrumented)
            cuda_cpu_fail("CUDA_CPU_COUNT=%s: counting needs a program built with the check instrumentation "
                          "(CUDA_CPU_CHECK_FLAGS)", count);
        g_count_file = fopen(count, "w");
        if (!g_count_file) cuda_cpu_fail("CUDA_CPU_COUNT=%s: cannot write it: %s", count, strerror(errno));
    }
    static const char* const blas[] = {"run", "skip"};
    g_blas_skip = env_choice("CUDA_CPU_BLAS", blas, 2, 0) == 1;
    static const char* const faults[] = {"none", "wgmma"};
    g_wgmma_fault = env_choice("CUDA_CPU_FAULT", faults, 2, 0) == 1;
    static const char* const strict[] = {"off", "warn", "abort"};
    g_strict_exit = env_choice("CUDA_CPU_STRICT_EXIT", strict, 3, 0);
    g_watchdog_s = (double)env_size("CUDA_CPU_WATCHDOG_S", 60, true);
    static const char* const alarms[] = {"abort", "report"};
    g_alarms_report = env_choice("CUDA_CPU_ALARMS", alarms, 2, 0);
    g_store_delay_us = (unsigned)env_size("CUDA_CPU_STORE_DELAY_US", 0, true);
    const char* s = getenv("CUDA_CPU_SCHEDULES");
    parse_schedules(s && *s ? s : g_instrumented ? "forward,reverse" : "forward");
    const char* seed = getenv("CUDA_CPU_ATOMIC_SEED");
    if (seed && *seed) {
        char* end;
        g_atomic_seed = strtoull(seed, &end, 10);
        if (*end) cuda_cpu_fail("CUDA_CPU_ATOMIC_SEED=%s: expected a non-negative integer", seed);
    } else {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        g_atomic_seed = ((uint64_t)getpid() << 32) ^ (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 20);
    }
}

// ============================================================================================
// Reports: source lines of code addresses, thread and block names
// ============================================================================================

static uintptr_t g_exe_bias;  // load address of the executable (PIE)
static uintptr_t g_exe_tls_size;

static int phdr_first(struct dl_phdr_info* info, size_t, void*) {
    g_exe_bias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_TLS) {
            size_t align = ph.p_align ? ph.p_align : 1;
            g_exe_tls_size = (ph.p_memsz + align - 1) / align * align;
        }
    }
    return 1;  // the first object is the executable
}

uintptr_t exe_bias() { return g_exe_bias; }

// Is "file:line" in the runtime's own code (where a report should not point)?
bool runtime_source(const std::string& s) {
    static const char* const files[] = {"cuda_cpu.h:", "cuda_cpu.cpp:", "check_cpu.cpp:", "intrinsics_cpu.cpp:",
                                        "cublaslt_cpu.cpp:", "nccl_cpu.cpp:", "streams_cpu.cpp:", "cooperative_groups"};
    for (const char* f : files)
        if (s.find(f) != std::string::npos) return true;
    return false;
}

// addr2line -i's lines for a code address (fork + exec, so it also works from a signal handler that is
// about to abort), innermost inlined call first, the project's files relative to the current
// directory; none when it cannot be told.
static std::vector<std::string> addr2line_lines_uncached(uintptr_t pc);

// Each code address is looked up once (addr2line is a process start; CUDA_CPU_ALARMS=report names the
// same lines many times).
static std::vector<std::string> addr2line_lines(uintptr_t pc) {
    static std::mutex mu;
    static std::unordered_map<uintptr_t, std::vector<std::string>>& cache =
        *new std::unordered_map<uintptr_t, std::vector<std::string>>();
    {
        std::lock_guard<std::mutex> lk(mu);
        auto it = cache.find(pc);
        if (it != cache.end()) return it->second;
    }
    std::vector<std::string> out = addr2line_lines_uncached(pc);
    std::lock_guard<std::mutex> lk(mu);
    cache.emplace(pc, out);
    return out;
}

static std::vector<std::string> addr2line_lines_uncached(uintptr_t pc) {
    std::vector<std::string> out;
    if (!pc) return out;
    char addr[32], exe[4096];
    snprintf(addr, sizeof(addr), "0x%lx", (unsigned long)(pc - g_exe_bias - 1));  // the call, not the return
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el <= 0) return out;
    exe[el] = 0;
    int fd[2];
    if (pipe(fd) != 0) return out;
    pid_t pid = fork();
    if (pid < 0) { close(fd[0]); close(fd[1]); return out; }
    if (pid == 0) {
        dup2(fd[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        close(fd[0]);
        execlp("addr2line", "addr2line", "-i", "-e", exe, addr, (char*)nullptr);
        _exit(127);
    }
    close(fd[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t k;
    while (len < sizeof(buf) - 1 && (k = read(fd[0], buf + len, sizeof(buf) - 1 - len)) > 0) len += (size_t)k;
    close(fd[0]);
    waitpid(pid, nullptr, 0);
    buf[len] = 0;
    char* save = nullptr;
    for (char* line = strtok_r(buf, "\n", &save); line; line = strtok_r(nullptr, "\n", &save)) {
        char* disc = strstr(line, " (discriminator");
        if (disc) *disc = 0;
        if (line[0] == '?') continue;
        char cwd[4096];
        if (getcwd(cwd, sizeof(cwd))) {
            size_t n = strlen(cwd);
            if (!strncmp(line, cwd, n) && line[n] == '/') line += n + 1;  // the project's files, relative
        }
        out.push_back(line);
    }
    return out;
}

// "file:line" of a code address; "" when it cannot be told. Of the inlined calls at that address, the
// innermost one in the program's own code (not the runtime's headers, not the system's).
std::string source_of(uintptr_t pc) {
    std::vector<std::string> lines = addr2line_lines(pc);
    for (const std::string& l : lines)
        if (l.find("cuda_cpu.h:") == std::string::npos && l.find("cooperative_groups") == std::string::npos &&
            l.compare(0, 5, "/usr/") != 0)
            return l;
    return lines.empty() ? "" : lines[0];
}

std::vector<std::string> source_chain(uintptr_t pc) {
    std::vector<std::string> out;
    for (const std::string& l : addr2line_lines(pc))
        if (!runtime_source(l) && l.compare(0, 5, "/usr/") != 0 && l.find("/include/") == std::string::npos &&
            l.find(":0") == std::string::npos)
            out.push_back(l);
    return out;
}

// ---- the executable's symbol table (its kernels' names for their registers, __device__ variables
// and host globals in messages) ----
struct ElfSym {
    uintptr_t lo, hi;
    std::string name;
    bool func;
};
static std::vector<ElfSym>* g_elf_syms;
static std::once_flag g_elf_once;

static void load_symbols() {
    g_elf_syms = new std::vector<ElfSym>();
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0) return;
    struct stat st;
    void* map = fstat(fd, &st) == 0 ? mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return;
    const char* base = (const char*)map;
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return;
    const Elf64_Shdr* sh = (const Elf64_Shdr*)(base + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB) continue;
        const Elf64_Sym* sym = (const Elf64_Sym*)(base + sh[i].sh_offset);
        const char* names = base + sh[sh[i].sh_link].sh_offset;
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < n; k++) {
            int type = ELF64_ST_TYPE(sym[k].st_info);
            if ((type != STT_FUNC && type != STT_OBJECT && type != STT_TLS) || sym[k].st_shndx == SHN_UNDEF || !sym[k].st_size)
                continue;
            if (type == STT_TLS) continue;
            uintptr_t lo = g_exe_bias + sym[k].st_value;
            g_elf_syms->push_back({lo, lo + sym[k].st_size, names + sym[k].st_name, type == STT_FUNC});
        }
    }
    std::sort(g_elf_syms->begin(), g_elf_syms->end(), [](const ElfSym& a, const ElfSym& b) { return a.lo < b.lo; });
    munmap(map, (size_t)st.st_size);
}

static const ElfSym* elf_symbol(uintptr_t a, bool functions) {
    std::call_once(g_elf_once, load_symbols);
    auto it = std::upper_bound(g_elf_syms->begin(), g_elf_syms->end(), a, [](uintptr_t x, const ElfSym& s) { return x < s.lo; });
    while (it != g_elf_syms->begin()) {
        --it;
        if (a >= it->lo && a < it->hi && it->func == functions) return &*it;
        if (a - it->lo > (1u << 24)) break;
    }
    return nullptr;
}

std::string symbol_at(uintptr_t a, bool functions) {
    const ElfSym* s = elf_symbol(a, functions);
    if (!s) return "";
    std::string name = s->name;
    int status = 0;
    char* dem = abi::__cxa_demangle(s->name.c_str(), nullptr, nullptr, &status);
    if (dem && status == 0) name = dem;
    free(dem);
    if (a == s->lo) return name;
    char off[32];
    snprintf(off, sizeof(off), "+%zu", (size_t)(a - s->lo));
    return name + off;
}

std::string thread_name(const Launch* L, unsigned linear) {
    char b[64];
    snprintf(b, sizeof(b), "(%u,%u,%u)", linear % L->block.x, (linear / L->block.x) % L->block.y,
             linear / (L->block.x * L->block.y));
    return b;
}

std::string block_name(const Launch* L, uint64_t linear) {
    char b[80];
    snprintf(b, sizeof(b), "(%llu,%llu,%llu)", (unsigned long long)(linear % L->grid.x),
             (unsigned long long)((linear / L->grid.x) % L->grid.y),
             (unsigned long long)(linear / ((uint64_t)L->grid.x * L->grid.y)));
    return b;
}

// One line naming the kernel, the block and the running thread, then the reason; aborts.
// CUDA_CPU_ALARMS=report: each distinct alarm (class, kernel, source line) -> its count and first message.
struct Alarm {
    uint64_t count;
    std::string message;
};
static std::mutex g_alarm_mu;
static std::map<std::string, Alarm>& g_alarms = *new std::map<std::string, Alarm>();
static __thread uintptr_t t_alarm_a, t_alarm_pc;  // the last access reported on this OS thread

static void record_alarm(const char* cls, const char* kernel, const std::string& source, const std::string& message);

static void print_alarms() {
    std::lock_guard<std::mutex> lk(g_alarm_mu);
    if (g_alarms.empty()) return;
    uint64_t n = 0;
    for (const auto& a : g_alarms) n += a.second.count;
    fflush(stdout);
    fprintf(stderr, "cuda_cpu: %llu alarms, %zu distinct (CUDA_CPU_ALARMS=report: each once, with its count):\n",
            (unsigned long long)n, g_alarms.size());
    for (const auto& a : g_alarms)
        fprintf(stderr, "cuda_cpu: %llu x %s\n", (unsigned long long)a.second.count, a.second.message.c_str());
}

// "kernel 'k' block (x,y,z) thread (x,y,z): " for the thread running on this OS thread, or "".
static std::string running_thread(Worker* w) {
    if (!w || !w->cur || !w->launch) return "";
    return std::string("kernel '") + w->launch->name + "' block " + block_name(w->launch, w->block_linear) + " thread " +
           thread_name(w->launch, w->cur->linear) + ": ";
}

void kernel_alarm(const char* cls, uintptr_t a, uintptr_t pc, const char* fmt, ...) {
    RuntimeScope scope;
    char why[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    Worker* w = tw;
    const char* kernel = w && w->cur && w->launch ? w->launch->name : nullptr;
    if (!g_alarms_report) {
        if (kernel) die_in_kernel("%s", why);
        cuda_cpu_fail("%s", why);
    }
    if (a == t_alarm_a && pc == t_alarm_pc) return;  // another byte of the access just reported
    t_alarm_a = a;
    t_alarm_pc = pc;
    record_alarm(cls, kernel, pc ? source_of(pc) : "", running_thread(w) + why);
}

// CUDA_CPU_ALARMS=report: one more of the alarm (class, kernel, source line); its first message kept.
static void record_alarm(const char* cls, const char* kernel, const std::string& source, const std::string& message) {
    std::string key = std::string(cls) + "|" + (kernel ? kernel : "") + "|" + source;
    std::lock_guard<std::mutex> lk(g_alarm_mu);
    Alarm& e = g_alarms[key];
    if (!e.count) e.message = std::string(cls) + ": " + message;
    e.count++;
}

void die_in_kernel(const char* fmt, ...) {
    t_runtime++;
    char why[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    cuda_cpu_fail("%s%s", running_thread(tw).c_str(), why);
}

// ============================================================================================
// Fibers and the block scheduler
// ============================================================================================

__thread Worker* tw;
size_t g_stack_size;  // bytes per fiber

static const size_t kSmemOptin = 232448;      // H100: 227 KiB of dynamic shared memory per block
static const size_t kSmemDefault = 48 * 1024;
static const size_t kStaticArea = 64 * 1024;  // arena bytes for static __shared__ (48 KiB + redzones)
static const size_t kRedzone = 32;            // unaddressable bytes after each static __shared__ variable
static const size_t kPage = 4096;

static std::mutex g_workers_mu;
// Never destroyed: the watchdog thread reads it until the process ends.
static std::vector<Worker*>& g_workers = *new std::vector<Worker*>();
static std::atomic<uint32_t> g_blk_counter{0};

// ---- context switches ----
static inline void asan_start_switch(void** fake, const void* bottom, size_t size) {
#if CUDA_CPU_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake; (void)bottom; (void)size;
#endif
}
static inline void asan_finish_switch(void* fake, const void** bottom_old, size_t* size_old) {
#if CUDA_CPU_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
    (void)fake; (void)bottom_old; (void)size_old;
#endif
}

static __attribute__((noinline)) void switch_to(Worker* w, Fiber* f) {
    threadIdx = f->tid;
    cuda_cpu_linear_tid = f->linear;
    w->cur = f;
    w->progress.store(w->progress.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (!_setjmp(w->sched)) {
        asan_start_switch(&w->asan_fake, f->stack, f->stack_size);
        _longjmp(f->ctx, 1);
    }
    asan_finish_switch(w->asan_fake, nullptr, nullptr);
    w->cur = nullptr;
}

static __attribute__((noinline)) void fiber_yield(Worker* w, Fiber* f) {
    if (!_setjmp(f->ctx)) {
        asan_start_switch(&f->asan_fake, w->sched_stack_bottom, w->sched_stack_size);
        _longjmp(w->sched, 1);
    }
    asan_finish_switch(f->asan_fake, nullptr, nullptr);
}

static __thread Fiber* t_creating;

static void fiber_entry() {
    Worker* w = tw;
    Fiber* f = t_creating;
    asan_finish_switch(nullptr, &w->sched_stack_bottom, &w->sched_stack_size);
    fiber_yield(w, f);  // back to the creator; the first real resume continues below
    for (;;) {
        w = tw;
        w->launch->fn(w->launch->arg);
        if (w->pread.on) check_pending_read(w);
        if (w->pending.on) check_pending_write(w);
        wgmma_thread_exit(w);
        f->state = F_DONE;
        w->ndone++;
        fiber_yield(w, f);
    }
}

// Below each fiber's stack, 1 MiB that faults: a frame too big for the stack lands there (and is
// named), not in another fiber's stack. Only touched pages of either take memory.
static const size_t kStackGuard = 1 << 20;

static Fiber* fiber_create(Worker* w) {
    Fiber* f = new Fiber();
    f->stack_size = g_stack_size;
    f->map_size = f->stack_size + kStackGuard;
    f->map = (char*)mmap(nullptr, f->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (f->map == MAP_FAILED) cuda_cpu_fail("mmap of a %zu-byte fiber stack failed: %s", f->map_size, strerror(errno));
    if (mprotect(f->map, kStackGuard, PROT_NONE) != 0) cuda_cpu_fail("mprotect of a stack guard failed");
    f->stack = f->map + kStackGuard;
    ucontext_t uc, back;
    getcontext(&uc);
    uc.uc_stack.ss_sp = f->stack;
    uc.uc_stack.ss_size = f->stack_size;
    uc.uc_link = nullptr;
    makecontext(&uc, fiber_entry, 0);
    t_creating = f;
    w->cur = f;
    if (!_setjmp(w->sched)) {
        asan_start_switch(&w->asan_fake, f->stack, f->stack_size);
        swapcontext(&back, &uc);
    }
    asan_finish_switch(w->asan_fake, nullptr, nullptr);
    w->cur = nullptr;
    return f;
}

// ---- faults: say what was touched, naming the kernel, instead of a bare segfault ----
static void write_line(const std::string& s) {
    std::string line = s + "\n";
    if (write(2, line.data(), line.size()) < 0) {}
}

static uintptr_t context_pc(void* ctx) {
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t*)ctx)->uc_mcontext.gregs[REG_RIP] + 1;  // source_of subtracts 1
#else
    (void)ctx;
    return 0;
#endif
}
static uintptr_t context_sp(void* ctx) {
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t*)ctx)->uc_mcontext.gregs[REG_RSP];
#else
    (void)ctx;
    return ~(uintptr_t)0;
#endif
}
static const char* context_access(void* ctx) {
#if defined(__x86_64__)
    return (((ucontext_t*)ctx)->uc_mcontext.gregs[REG_ERR] & 2) ? "writes" : "reads";
#else
    (void)ctx;
    return "accesses";
#endif
}

static int kernel_stack_frame(uintptr_t pc);  // ptxas's, or -1 (below)

static void segv_handler(int sig, siginfo_t* si, void* ctx) {
    t_runtime++;
    Worker* w = tw;
    uintptr_t a = (uintptr_t)si->si_addr;
    bool in_kernel = w && w->cur && w->launch;
    std::string where;
    uintptr_t pc = context_pc(ctx);
    if (w) {
        // A fault in a fiber's guard, or with the stack pointer below the running fiber's stack: its
        // locals did not fit.
        bool overflow = in_kernel && context_sp(ctx) < (uintptr_t)w->cur->stack && context_sp(ctx) + (64u << 20) > (uintptr_t)w->cur->stack;
        for (Fiber* f : w->fibers)
            if (a >= (uintptr_t)f->map && a < (uintptr_t)f->stack) overflow = true;
        if (overflow) {
            char msg[512], frame[96] = "";
            int stack = in_kernel ? kernel_stack_frame(pc) : -1;
            if (stack >= 0) snprintf(frame, sizeof(frame), " (ptxas gives its kernel %d bytes of stack frame at sm_90)", stack);
            snprintf(msg, sizeof(msg), "cuda_cpu: kernel '%s' block %s thread %s: the thread's local variables overflowed "
                     "its %zu KiB stack%s; a GPU allows up to 512 KiB of local memory a thread: raise CUDA_CPU_STACK_KB if "
                     "the kernel needs more here", w->launch ? w->launch->name : "?",
                     w->launch ? block_name(w->launch, w->block_linear).c_str() : "?",
                     in_kernel ? thread_name(w->launch, w->cur->linear).c_str() : "?", g_stack_size / 1024, frame);
            write_line(msg);
            abort();
        }
    }
    std::string src = source_of(pc);
    std::string at = src.empty() ? "" : " (" + src + ")";
    char what[1024] = "";
    static char guard_desc[512];
    if (w && w->arena && a >= (uintptr_t)w->arena + w->arena_size && a < (uintptr_t)w->arena + w->arena_size + kPage) {
        size_t smem = w->launch ? w->launch->smem : 0;
        snprintf(what, sizeof(what), "%s shared memory %zu bytes past the end of the %zu bytes of dynamic shared memory "
                 "the launch asked for%s", context_access(ctx), a - ((uintptr_t)w->dyn + smem), smem, at.c_str());
    } else if (const char* g = in_kernel ? nullptr : pinned_guard_at(a, guard_desc, sizeof(guard_desc))) {
        snprintf(what, sizeof(what), "host code %s %s%s", context_access(ctx), g, at.c_str());
    } else if (a - g_dev_lo < g_dev_span) {
        char desc[256];
        describe_device_address(a, desc, sizeof(desc));
        if (in_kernel) snprintf(what, sizeof(what), "%s %s%s", context_access(ctx), desc, at.c_str());
        else snprintf(what, sizeof(what), "host code %s %s%s: a device pointer dereferenced on the host "
                      "(device memory is for kernels and cudaMemcpy)", context_access(ctx), desc, at.c_str());
    }
    if (what[0]) {
        // One line even when several threads fault at once (an OpenMP loop over a protected page):
        // the first reports and aborts, the others wait for the abort.
        static std::atomic<int> reporting{0};
        if (reporting.exchange(1)) for (;;) pause();
        std::string line;
        if (in_kernel)
            line = std::string("cuda_cpu: kernel '") + w->launch->name + "' block " + block_name(w->launch, w->block_linear) +
                   " thread " + thread_name(w->launch, w->cur->linear) + ": " + what;
        else
            line = std::string("cuda_cpu: ") + what;
        write_line(line);
        abort();
    }
    t_runtime--;
    signal(sig, SIG_DFL);  // not ours: let the fault happen again with the default action
}

// The watchdog's signal: the worker it names is stuck in one fiber; say where, then abort.
static std::atomic<Worker*> g_watchdog_victim{nullptr};
static void watchdog_signal(int, siginfo_t*, void* ctx) {
    Worker* w = tw;
    if (!w || w != g_watchdog_victim.load()) return;
    t_runtime++;
    const Launch* L = w->active.load();
    // The spinning thread may be inside the runtime (a check callback): name the first frame of the
    // program's own code.
    std::string src = source_of(context_pc(ctx));
    if (src.empty() || runtime_source(src)) {
        void* pcs[32];
        int n = backtrace(pcs, 32);
        for (int i = 0; i < n; i++) {
            std::string s = source_of((uintptr_t)pcs[i]);
            if (!s.empty() && !runtime_source(s)) {
                src = s;
                break;
            }
        }
    }
    char line[1024];
    snprintf(line, sizeof(line), "cuda_cpu: kernel '%s' block %s thread %s: no barrier, warp operation or exit for "
             "%.0f s%s%s%s: a loop that does not end (on a GPU too), or a thread spinning on a value another "
             "thread sets (a flag another warp or block writes), which never sees it here, where a thread runs "
             "until it waits; on a GPU that relies on scheduling CUDA does not promise (CUDA_CPU_WATCHDOG_S sets "
             "the limit, 0 turns it off)",
             L ? L->name : "?", L ? block_name(L, w->block_linear).c_str() : "?",
             (L && w->cur) ? thread_name(L, w->cur->linear).c_str() : "?", g_watchdog_s,
             src.empty() ? "" : " (at ", src.c_str(), src.empty() ? "" : ")");
    write_line(line);
    abort();
}

static uintptr_t thread_pointer() {
    uintptr_t tp = 0;
#if defined(__x86_64__)
    __asm__("mov %%fs:0, %0" : "=r"(tp));
#endif
    return tp;
}

static Worker* worker_get() {
    if (tw) return tw;
    Worker* w = new Worker();
    // Shared memory arena: static area, dynamic area up to the opt-in maximum, guard page.
    w->arena_size = (kStaticArea + kSmemOptin + kPage - 1) / kPage * kPage;
    w->arena = (char*)mmap(nullptr, w->arena_size + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w->arena == MAP_FAILED) cuda_cpu_fail("out of memory for shared memory");
    if (mprotect(w->arena + w->arena_size, kPage, PROT_NONE) != 0) cuda_cpu_fail("mprotect of the shared memory guard page failed");
    w->dyn = w->arena + w->arena_size;
#if !CUDA_CPU_ASAN
    w->altstack.ss_size = 64 * 1024;
    w->altstack.ss_sp = malloc(w->altstack.ss_size);
    w->altstack.ss_flags = 0;
    sigaltstack(&w->altstack, nullptr);
#endif
    w->thread = pthread_self();
    uintptr_t tp = thread_pointer();
    w->tls_lo = tp - g_exe_tls_size;
    w->tls_hi = tp + 64;  // the thread control block's first words (the TLS self pointer)
    tw = w;
    std::lock_guard<std::mutex> lk(g_workers_mu);
    g_workers.push_back(w);
    return w;
}

// ---- diagnosis of barriers that can never be released ----
static std::string describe_fiber(const Fiber* f) {
    char buf[160];
    switch (f->state) {
    case F_DONE: return "exited";
    case F_BLOCK: return std::string("wait at ") + f->name;
    case F_WARP: snprintf(buf, sizeof(buf), "wait at %s (mask 0x%08x)", f->name, f->mask); return buf;
    default: return "running";
    }
}

static std::string describe_block(Worker* w) {
    std::string msg;
    unsigned i = 0, ranges = 0;
    while (i < w->n && ranges < 12) {
        std::string d = describe_fiber(w->fibers[i]);
        unsigned j = i;
        while (j + 1 < w->n && describe_fiber(w->fibers[j + 1]) == d) j++;
        char buf[64];
        const char* sep = ranges ? "; " : "";
        if (i == j) snprintf(buf, sizeof(buf), "%sthread %u ", sep, i);
        else snprintf(buf, sizeof(buf), "%sthreads %u-%u ", sep, i, j);
        msg += buf + d;
        i = j + 1;
        ranges++;
    }
    if (i < w->n) msg += "; ...";
    return msg;
}

[[noreturn]] static void die_divergent(Worker* w, const char* what) {
    const Launch* L = w->launch;
    cuda_cpu_fail("kernel '%s' block %s: %s%s", L->name, block_name(L, w->block_linear).c_str(), what, describe_block(w).c_str());
}

// A lane's shuffle names a source lane of its mask that has exited: the PTX ISA leaves the value
// undefined (shfl.sync reads the mask's non-exited lanes), so the read is the bug, not a hang.
[[noreturn]] static void die_exited_source(Worker* w, unsigned base, unsigned lane, unsigned src, const Fiber* f) {
    char what[400];
    snprintf(what, sizeof(what), "lane %u of warp %u reads lane %u in %s at %s, and lane %u has exited: the value is "
             "undefined (a shuffle reads only the non-exited lanes of its mask): ",
             lane, base / 32, src, f->name, source_of(f->site).c_str(), src);
    die_divergent(w, what);
}

// Releases every group of lanes in warp [base, end) that all wait at the same warp operation. The
// sync intrinsics (__shfl*_sync, votes, __reduce*_sync, __match*_sync, __syncwarp) wait for the
// non-exited lanes of their mask (the PTX ISA; the CUDA programming guide: "all non-exited threads
// named in mask must execute the same intrinsic"), so lanes that returned early are not waited for.
// The matrix primitives (mma, ldmatrix, wgmma, WMMA: .aligned) need every lane of the warp.
static bool release_warp(Worker* w, unsigned base, unsigned end) {
    unsigned width = end - base;
    unsigned exist = width == 32 ? 0xffffffffu : ((1u << width) - 1u);
    bool released = false;
    Fiber** F = w->fibers.data() + base;
    unsigned exited = 0;
    for (unsigned l = 0; l < width; l++) exited |= (unsigned)(F[l]->state == F_DONE) << l;
    for (unsigned lane = 0; lane < width; lane++) {
        Fiber* f = F[lane];
        if (f->state != F_WARP) continue;
        unsigned given = f->mask & exist;
        bool aligned = f->op == CUDA_CPU_WARP_CONVERGE || f->op == CUDA_CPU_WARP_MATRIX;
        unsigned m = aligned ? given : given & ~exited;
        if (!(m & (1u << lane))) {
            char what[200];
            snprintf(what, sizeof(what), "lane %u of warp %u calls %s with mask 0x%08x, which leaves it out: ",
                     lane, base / 32, f->name, f->mask);
            die_divergent(w, what);
        }
        bool ready = true;
        for (unsigned l = 0; l < width && ready; l++) {
            if (!(m & (1u << l))) continue;
            Fiber* g = F[l];
            if (g->state != F_WARP || (g->mask & exist) != given) ready = false;
            else if (g->op != f->op) {
                char what[200];
                snprintf(what, sizeof(what), "lanes of warp %u meet at different warp operations (%s, %s): ",
                         base / 32, f->name, g->name);
                die_divergent(w, what);
            }
        }
        if (!ready) continue;
        uint64_t acc = 0;
        switch (f->op) {
        case CUDA_CPU_WARP_VOTE:
            for (unsigned l = 0; l < width; l++) if ((m >> l) & 1u) acc |= (uint64_t)(F[l]->in != 0) << l;
            break;
        case CUDA_CPU_WARP_ADD: case CUDA_CPU_WARP_AND: case CUDA_CPU_WARP_OR: case CUDA_CPU_WARP_XOR:
        case CUDA_CPU_WARP_MIN: case CUDA_CPU_WARP_MAX: case CUDA_CPU_WARP_UMIN: case CUDA_CPU_WARP_UMAX: {
            bool first = true;
            uint32_t r = 0;
            for (unsigned l = 0; l < width; l++) {
                if (!((m >> l) & 1u)) continue;
                uint32_t v = (uint32_t)F[l]->in;
                if (first) { r = v; first = false; continue; }
                switch (f->op) {
                case CUDA_CPU_WARP_ADD: r += v; break;
                case CUDA_CPU_WARP_AND: r &= v; break;
                case CUDA_CPU_WARP_OR: r |= v; break;
                case CUDA_CPU_WARP_XOR: r ^= v; break;
                case CUDA_CPU_WARP_MIN: r = (int32_t)v < (int32_t)r ? v : r; break;
                case CUDA_CPU_WARP_MAX: r = (int32_t)v > (int32_t)r ? v : r; break;
                case CUDA_CPU_WARP_UMIN: r = v < r ? v : r; break;
                case CUDA_CPU_WARP_UMAX: r = v > r ? v : r; break;
                }
            }
            acc = r;
            break;
        }
        default: break;
        }
        for (unsigned l = 0; l < width; l++) {
            if (!((m >> l) & 1u)) continue;
            Fiber* g = F[l];
            switch (f->op) {
            case CUDA_CPU_WARP_SHFL: {
                // A source lane outside the group holds nothing defined: hand back NaN bits.
                unsigned s = (unsigned)g->src;
                if (s < width && ((m >> s) & 1u)) g->out = F[s]->in;
                else if (s < width && ((given >> s) & 1u)) die_exited_source(w, base, l, s, g);
                else g->out = ~0ull;
                break;
            }
            case CUDA_CPU_WARP_MATCH: {
                unsigned mm = 0;
                for (unsigned k = 0; k < width; k++) if (((m >> k) & 1u) && F[k]->in == g->in) mm |= 1u << k;
                g->out = mm;
                break;
            }
            default: g->out = acc; break;
            }
        }
        for (unsigned l = 0; l < width; l++) {
            if (!((m >> l) & 1u)) continue;
            F[l]->group = m;
            F[l]->state = F_RUN;
        }
        // A warp operation orders the memory accesses of the lanes that meet at it (WMMA's
        // convergence points and mma/ldmatrix do not: CUDA promises no memory ordering for them).
        if (g_check_run && f->op != CUDA_CPU_WARP_CONVERGE && f->op != CUDA_CPU_WARP_MATRIX) check_warp_released(w, base, m);
        released = true;
    }
    return released;
}

static std::mutex g_warned_mu;
static std::set<std::string> g_warned;

// Threads of a block waiting at two different __syncthreads (by address): the same source line in
// two copies the compiler made is one barrier; two lines are not. CUDA requires every thread of the
// block to reach the same __syncthreads (a barrier in code that only some threads run, or in a loop
// whose trip count differs between threads, is undefined, even when the hardware happens to release
// it).
static void check_same_barrier(Worker* w, uintptr_t a, uintptr_t b) {
    static std::mutex mu;
    static std::set<std::pair<uintptr_t, uintptr_t>> same;
    {
        std::lock_guard<std::mutex> lk(mu);
        if (same.count({a, b})) return;
    }
    std::string la = source_of(a), lb = source_of(b);
    if (la == lb) {
        std::lock_guard<std::mutex> lk(mu);
        same.insert({a, b});
        return;
    }
    char what[512];
    snprintf(what, sizeof(what), "threads wait at two different __syncthreads (%s and %s): every thread of a block must "
             "reach the same one (a barrier in code only some threads run, or in a loop whose trip count differs "
             "between threads, is undefined): ", la.c_str(), lb.c_str());
    die_divergent(w, what);
}

static void release_block(Worker* w) {
    unsigned nblock = 0, nwarp = 0;
    for (unsigned i = 0; i < w->n; i++) {
        int s = w->fibers[i]->state;
        nblock += s == F_BLOCK;
        nwarp += s == F_WARP;
    }
    if (nwarp > 0) die_divergent(w, "a warp operation waits for lanes that will never reach it: ");
    // Threads that exited count as arrived (the PTX ISA, since Volta: an exiting thread releases a
    // barrier it was holding up), so a block whose early-exiting threads skip a __syncthreads goes on.
    if (nblock > 0 && nblock + w->ndone == w->n) {
        int op = -1, count = 0, all = 1, any = 0;
        uintptr_t site = 0;
        for (unsigned i = 0; i < w->n; i++) {
            Fiber* f = w->fibers[i];
            if (f->state != F_BLOCK) continue;
            if (op >= 0 && f->op != op) die_divergent(w, "threads meet at different block barriers: ");
            if (site && f->site != site) check_same_barrier(w, site, f->site);
            op = f->op;
            site = f->site;
            count += f->pred; all &= f->pred; any |= f->pred;
        }
        if (w->ndone > 0 && g_strict_exit) {
            const char* what = "threads that exited count as arrived at a block barrier others wait at (Volta and "
                               "later release it; the CUDA programming guide calls a __syncthreads not reached by "
                               "every thread undefined): ";
            if (g_strict_exit == 2) die_divergent(w, what);
            std::lock_guard<std::mutex> lk(g_warned_mu);
            if (g_warned.insert(w->launch->name).second)
                fprintf(stderr, "cuda_cpu: warning: kernel '%s' block %s: %s%s\n", w->launch->name,
                        block_name(w->launch, w->block_linear).c_str(), what, describe_block(w).c_str());
        }
        int r = op == CUDA_CPU_BLOCK_COUNT ? count : op == CUDA_CPU_BLOCK_AND ? all : op == CUDA_CPU_BLOCK_OR ? any : 0;
        for (unsigned i = 0; i < w->n; i++) {
            Fiber* f = w->fibers[i];
            if (f->state != F_BLOCK) continue;
            f->bout = r;
            f->state = F_RUN;
        }
        w->epoch++;
        return;
    }
    die_divergent(w, "a block barrier cannot be released: ");
}

// splitmix64, for the shuffled schedules
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The order of this block's warps and of the lanes in a warp under the launch's schedule.
static void block_order(Worker* w, const Launch* L, uint64_t b) {
    unsigned nw = w->nwarps;
    for (unsigned i = 0; i < 32; i++) { w->warp_order[i] = i; w->lane_order[i] = i; }
    if (L->sched->kind == SCHED_REVERSE) {
        for (unsigned i = 0; i < nw; i++) w->warp_order[i] = nw - 1 - i;
        for (unsigned i = 0; i < 32; i++) w->lane_order[i] = 31 - i;
    } else if (L->sched->kind == SCHED_SHUFFLE) {
        uint64_t s = mix64(L->sched->seed ^ mix64(b));
        for (unsigned i = nw; i > 1; i--) { s = mix64(s); std::swap(w->warp_order[i - 1], w->warp_order[s % i]); }
        for (unsigned i = 32; i > 1; i--) { s = mix64(s); std::swap(w->lane_order[i - 1], w->lane_order[s % i]); }
    }
}

// CUDA_CPU_COUNT: a block's warp instructions of each class, per warp the most any of its lanes ran
// (a warp instruction issues once for all its active lanes; lanes that took different paths make this
// a lower bound), added to the launch's totals.
static void count_block_instructions(Worker* w) {
    for (unsigned base = 0; base < w->n; base += 32) {
        unsigned end = base + 32 < w->n ? base + 32 : w->n;
        for (int c = 0; c < CUDA_CPU_INS_N; c++) {
            uint64_t most = 0;
            for (unsigned i = base; i < end; i++) most = std::max(most, w->fibers[i]->c_ins[c]);
            w->c_ins[c] += most;
        }
    }
}

void cuda_cpu_count_sfu(int n) { count_ins(CUDA_CPU_INS_SFU, (unsigned)n); }

static void run_block(Worker* w, const Launch* L, uint64_t b) {
    w->block_linear = b;
    blockIdx.x = (unsigned)(b % L->grid.x);
    blockIdx.y = (unsigned)((b / L->grid.x) % L->grid.y);
    blockIdx.z = (unsigned)(b / ((uint64_t)L->grid.x * L->grid.y));
    unsigned n = L->nthreads;
    while (w->fibers.size() < n) w->fibers.push_back(fiber_create(w));
    for (unsigned i = 0; i < n; i++) {
        Fiber* f = w->fibers[i];
        f->state = F_RUN;
        f->linear = i;
        f->tid.x = i % L->block.x;
        f->tid.y = (i / L->block.x) % L->block.y;
        f->tid.z = i / (L->block.x * L->block.y);
        f->wsync = 0;
        f->fence_epoch = 0;
        f->natomics = 0;
        f->clock_reads = 0;
        if (g_count_run) memset(f->c_ins, 0, sizeof(f->c_ins));
    }
    // Shared memory is not initialised on a GPU either: NaNs, so that reading it early shows. The
    // dynamic part ends at the guard page; static variables are placed (and poisoned) as the first
    // thread reaches their declaration.
    w->dyn = w->arena + w->arena_size - (L->smem + 127) / 128 * 128;
    if (L->smem) memset(w->dyn, 0xff, (size_t)(w->arena + w->arena_size - w->dyn));
    w->statics.clear();
    w->static_used = 0;
    w->static_gpu = 0;
    w->n = n;
    w->ndone = 0;
    w->nwarps = (n + 31) / 32;
    w->blk = g_blk_counter.fetch_add(1, std::memory_order_relaxed) + 1;
    w->running_blk.store(w->blk, std::memory_order_release);
    w->epoch = 1;
    if (g_check_run) check_block_start(w);
    block_order(w, L, b);
    for (;;) {
        for (unsigned wi = 0; wi < w->nwarps; wi++) {
            unsigned base = w->warp_order[wi] * 32;
            unsigned end = base + 32 < n ? base + 32 : n;
            do {
                for (unsigned li = 0; li < 32; li++) {
                    unsigned i = base + w->lane_order[li];
                    if (i < end && w->fibers[i]->state == F_RUN) switch_to(w, w->fibers[i]);
                }
            } while (release_warp(w, base, end));
        }
        if (w->ndone == n) break;
        release_block(w);
    }
    w->running_blk.store(0, std::memory_order_release);
    if (g_count_run) count_block_instructions(w);
}

// Another block's write the race detector found unordered with this thread's: its check ran, its
// store may not have yet (the two run on different OS threads). The same-value test must compare
// with what that store leaves, so wait for it: the other thread's next checked access, or its block's
// end. Between a check and its store a thread takes no lock, so the wait ends within a time slice;
// two threads each waiting here for the other (two locations, opposite orders) give up after 50 ms
// and compare with what they see.
void wait_for_store(Worker* self, uint32_t blk) {
    Worker* other = nullptr;
    {
        std::lock_guard<std::mutex> lk(g_workers_mu);
        for (Worker* w : g_workers)
            if (w != self && w->running_blk.load(std::memory_order_acquire) == blk) other = w;
    }
    if (!other) return;  // ended, or ran on this OS thread: its stores have landed
    uint64_t seen = other->accesses.load(std::memory_order_acquire);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (other->running_blk.load(std::memory_order_acquire) == blk && other->accesses.load(std::memory_order_acquire) == seen) {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000ll + (t.tv_nsec - t0.tv_nsec) > 50000000ll) return;
    }
}

static Worker* current_thread_worker(const char* what) {
    Worker* w = tw;
    if (!w || !w->cur) cuda_cpu_fail("%s called outside a kernel", what);
    return w;
}

uint64_t cuda_cpu_warp(int op, const char* name, unsigned mask, uint64_t value, int src_lane, unsigned* group) {
    Worker* w = current_thread_worker(name);
    // counted: shuffles, votes, reductions, matches, __syncwarp (WARPSYNC); the matrix primitives'
    // meetings are counted as the primitive itself
    if (op != CUDA_CPU_WARP_CONVERGE && op != CUDA_CPU_WARP_MATRIX) count_ins(CUDA_CPU_INS_SHFL);
    if (w->pread.on) check_pending_read(w);
    if (w->pending.on) check_pending_write(w);
    Fiber* f = w->cur;
    f->site = (uintptr_t)__builtin_return_address(0);
    f->state = F_WARP;
    f->op = op;
    f->name = name;
    f->mask = mask;
    f->in = value;
    f->src = src_lane;
    fiber_yield(w, f);
    if (group) *group = f->group;
    return f->out;
}

int cuda_cpu_block(int op, const char* name, int pred) {
    Worker* w = current_thread_worker(name);
    count_ins(CUDA_CPU_INS_BAR);
    if (w->pread.on) check_pending_read(w);
    if (w->pending.on) check_pending_write(w);
    Fiber* f = w->cur;
    f->site = (uintptr_t)__builtin_return_address(0);
    f->state = F_BLOCK;
    f->op = op;
    f->name = name;
    f->pred = pred;
    fiber_yield(w, f);
    return f->bout;
}

void* cuda_cpu_dynamic_smem(void) {
    Worker* w = current_thread_worker("extern __shared__ (dynamic shared memory)");
    return w->dyn;
}

// A static __shared__ variable of the running block: the first thread to reach the declaration
// places it (NaN-filled, followed by a redzone) and checks the block's shared memory against what a
// GPU allows; every thread gets the same address.
void* cuda_cpu_shared_alloc(const void* site, const char* name, size_t size, size_t align) {
    Worker* w = current_thread_worker("__shared__");
    RuntimeScope scope;
    for (const SharedVar& v : w->statics)
        if (v.site == site) return w->arena + v.off;
    const Launch* L = w->launch;
    if (align < 1) align = 1;
    w->static_gpu = (w->static_gpu + align - 1) / align * align + size;
    size_t a = align > 16 ? align : 16;
    size_t off = (w->static_used + a - 1) / a * a;
    if (w->static_gpu > kSmemDefault)
        die_in_kernel("its static __shared__ variables take %zu bytes (with '%s'), more than the 48 KiB a GPU allows "
                      "(nvcc refuses it: \"uses too much shared data\")", w->static_gpu, name);
    size_t total = w->static_gpu + L->smem;
    if (L->smem_attr < 0 && total > kSmemDefault)
        die_in_kernel("%zu bytes of static __shared__ memory (with '%s') plus %zu bytes of dynamic shared memory "
                      "exceed the 48 KiB a block gets without cudaFuncSetAttribute(%s, "
                      "cudaFuncAttributeMaxDynamicSharedMemorySize, ...): a GPU refuses this launch",
                      w->static_gpu, name, L->smem, L->name);
    if (total > kSmemOptin)
        die_in_kernel("%zu bytes of static __shared__ memory (with '%s') plus %zu bytes of dynamic shared memory "
                      "exceed the %zu bytes a block can have: a GPU refuses this launch", w->static_gpu, name, L->smem,
                      kSmemOptin);
    if (off + size + kRedzone > kStaticArea) die_in_kernel("too many static __shared__ variables for the emulation");
    memset(w->arena + off, 0xff, size);
    w->static_used = off + size + kRedzone;
    w->statics.push_back(SharedVar{site, name, off, size});
    if (g_check_run) check_shared_var(w, off, size);
    return w->arena + off;
}

void cuda_cpu_threadfence(void) {
    Worker* w = current_thread_worker("__threadfence");
    if (g_check_run) check_fence(w);
}

void cuda_cpu_bad_shuffle_width(const char* name, int width) {
    current_thread_worker(name);
    die_in_kernel("%s with width %d: the width must be a power of 2 from 1 to 32 (CUDA leaves any other width "
                  "undefined)", name, width);
}

// ---- registers: ptxas's count for each kernel (sm_90), recorded at build time ----
// CUDA_CPU_REGISTERS names the file (lines "mangled_name registers stack_frame_bytes", as make writes
// it from nvcc's -Xptxas -v output), "off" turns the check off; by default the build's file.
#ifndef CUDA_CPU_REGISTERS_DB
#define CUDA_CPU_REGISTERS_DB ""
#endif
struct KernelRegs {
    int regs_min, regs_max, stack, smem;
};
static std::unordered_map<std::string, KernelRegs>* g_regs;
static std::string g_regs_path;
static std::once_flag g_regs_once;

static void load_registers() {
    g_regs = new std::unordered_map<std::string, KernelRegs>();
    const char* e = getenv("CUDA_CPU_REGISTERS");
    std::string path = e && *e ? e : CUDA_CPU_REGISTERS_DB;
    if (path.empty() || path == "off") return;
    FILE* f = fopen(path.c_str(), "r");
    if (!f) {
        if (e && *e) cuda_cpu_fail("CUDA_CPU_REGISTERS=%s: cannot read it: %s", e, strerror(errno));
        return;
    }
    g_regs_path = path;
    char line[8192];
    while (fgets(line, sizeof(line), f)) {
        char name[8000];
        int regs, stack, smem = 0;
        if (line[0] == '#' || sscanf(line, "%7999s %d %d %d", name, &regs, &stack, &smem) < 3) continue;
        auto it = g_regs->find(name);
        if (it == g_regs->end()) (*g_regs)[name] = {regs, regs, stack, smem};
        else {
            // One kernel built in several precisions with one signature: trust only what all agree on.
            it->second.regs_min = std::min(it->second.regs_min, regs);
            it->second.regs_max = std::max(it->second.regs_max, regs);
            it->second.stack = std::max(it->second.stack, stack);
            it->second.smem = std::max(it->second.smem, smem);
        }
    }
    fclose(f);
}

// ptxas's record of the kernel whose code holds pc, or null.
static const KernelRegs* kernel_regs(uintptr_t pc, std::string* name) {
    std::call_once(g_regs_once, load_registers);
    if (g_regs->empty()) return nullptr;
    const ElfSym* s = elf_symbol(pc, true);
    if (!s) return nullptr;
    std::string n = s->name;
    size_t dot = n.find('.');  // GCC's clones: .constprop.0, .isra.0, .part.0
    if (dot != std::string::npos) n.resize(dot);
    auto it = g_regs->find(n);
    if (it == g_regs->end()) return nullptr;
    if (name) *name = n;
    return &it->second;
}

static int kernel_stack_frame(uintptr_t pc) {
    const KernelRegs* r = kernel_regs(pc, nullptr);
    return r ? r->stack : -1;
}

void cuda_cpu_kernel_entry(void) {
    Worker* w = tw;
    if (!w || !w->cur || !w->launch) return;
    Launch* L = const_cast<Launch*>(w->launch);
    if (L->resources_checked.load(std::memory_order_relaxed)) return;
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    RuntimeScope scope;
    L->resources_checked.store(true);
    std::string sym;
    const KernelRegs* r = kernel_regs(pc, &sym);
    if (g_count_file) {  // the kernel report wants ptxas's view of the kernel beside the counts
        const ElfSym* e = elf_symbol(pc, true);
        L->count_symbol = e ? e->name : "?";
        L->count_regs = r ? r->regs_min : -1;
        L->count_ptxas_smem = r ? r->smem : -1;
    }
    if (!r) return;
    // Registers are given out per warp, 256 at a time (8 a thread); a block gets at most 65536.
    unsigned warps = (L->nthreads + 31) / 32;
    unsigned per_warp = ((unsigned)r->regs_min * 32 + 255) / 256 * 256;
    if ((uint64_t)warps * per_warp > 65536)
        die_in_kernel("launched with %u threads per block, but ptxas gives the kernel %d registers a thread (sm_90): "
                      "its %u warps need %u registers (%u each, given out in 256s), more than the 65536 a block can have, "
                      "so a GPU refuses this launch (cudaErrorLaunchOutOfResources: too many resources requested for "
                      "launch); launch fewer threads per block, or declare __launch_bounds__(%u) so that ptxas fits the "
                      "kernel to it", L->nthreads, r->regs_min, warps, warps * per_warp, per_warp, L->nthreads);
}

void cuda_cpu_launch_bounds_check(int max_threads) {
    Worker* w = current_thread_worker("__launch_bounds__");
    const Launch* L = w->launch;
    if (max_threads > 0 && L->nthreads > (unsigned)max_threads)
        die_in_kernel("launched with %u threads per block, but the kernel is declared __launch_bounds__(%d): a GPU "
                      "refuses this launch (too many resources requested for launch)", L->nthreads, max_threads);
}

void cuda_cpu_trap(const char* what) {
    current_thread_worker(what);
    die_in_kernel("%s: the kernel stopped itself (on a GPU the launch fails with an unspecified launch failure)", what);
}

// ---- CUDA_CPU_COUNT: what each op moves and computes (the kernel report) ----
// Global memory: the bytes each access asks for, and the 32-byte sectors (a GPU's unit of DRAM
// traffic) the launch touches for the first time: each sector of the device region carries the
// stamp of the last launch that read (wrote) it.
static uint16_t* g_sector_read;
static uint16_t* g_sector_write;
static uint16_t g_count_stamp;

void count_global(Worker* w, uintptr_t a, size_t size, bool write) {
    (write ? w->c_gwrite : w->c_gread) += size;
    uint16_t* stamps = write ? g_sector_write : g_sector_read;
    for (uintptr_t s = (a - g_dev_lo) / 32; s <= (a + size - 1 - g_dev_lo) / 32; s++) {
        uint16_t old = __atomic_exchange_n(&stamps[s], g_count_stamp, __ATOMIC_RELAXED);
        if (old != g_count_stamp) (write ? w->c_gwrite_sectors : w->c_gread_sectors)++;
    }
}

void count_line(const char* fmt, ...) {
    static std::mutex mu;
    std::lock_guard<std::mutex> lk(mu);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g_count_file, fmt, ap);
    va_end(ap);
    fputc('\n', g_count_file);
    fflush(g_count_file);
}

void cuda_cpu_count_mark(const char* name) {
    runtime_init_once();
    if (!g_count_file) return;
    cudaDeviceSynchronize();
    count_line("mark name=%s", name);
}

static void count_start() {
    if (!g_sector_read) {
        size_t n = g_dev_span / 32 * sizeof(uint16_t);
        g_sector_read = (uint16_t*)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        g_sector_write = (uint16_t*)mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (g_sector_read == MAP_FAILED || g_sector_write == MAP_FAILED) cuda_cpu_fail("out of memory for CUDA_CPU_COUNT's sectors");
    }
    if (++g_count_stamp == 0) {  // the stamps wrapped: start them afresh
        size_t n = g_dev_span / 32 * sizeof(uint16_t);
        madvise(g_sector_read, n, MADV_DONTNEED);
        madvise(g_sector_write, n, MADV_DONTNEED);
        g_count_stamp = 1;
    }
    std::lock_guard<std::mutex> lk(g_workers_mu);
    for (Worker* w : g_workers) {
        w->c_gread = w->c_gwrite = w->c_gread_sectors = w->c_gwrite_sectors = w->c_sread = w->c_swrite = w->c_mma_flops = 0;
        w->c_wgmma_flops = w->c_static = 0;
        memset(w->c_ins, 0, sizeof(w->c_ins));
    }
}

static void count_finish(const Launch* L) {
    uint64_t c[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ins[CUDA_CPU_INS_N] = {};
    size_t static_smem = 0;
    {
        std::lock_guard<std::mutex> lk(g_workers_mu);
        for (Worker* w : g_workers) {
            uint64_t v[8] = {w->c_gread, w->c_gwrite, w->c_gread_sectors, w->c_gwrite_sectors, w->c_sread, w->c_swrite,
                             w->c_mma_flops, w->c_wgmma_flops};
            for (int i = 0; i < 8; i++) c[i] += v[i];
            for (int i = 0; i < CUDA_CPU_INS_N; i++) ins[i] += w->c_ins[i];
            static_smem = std::max(static_smem, w->c_static);
        }
    }
    count_line("kernel name=%s symbol=%s regs=%d ptxas_smem=%d grid=%u,%u,%u block=%u,%u,%u smem=%zu static_smem=%zu "
               "read=%llu write=%llu read_sectors=%llu write_sectors=%llu smem_read=%llu smem_write=%llu mma_flops=%llu "
               "sfu=%llu shfl=%llu bar=%llu atom=%llu mma=%llu ldsm=%llu cp_async=%llu wmma=%llu ldst_global=%llu ldst_shared=%llu "
               "wgmma_flops=%llu wgmma=%llu",
               L->name, L->count_symbol.c_str(), L->count_regs, L->count_ptxas_smem, L->grid.x, L->grid.y, L->grid.z,
               L->block.x, L->block.y, L->block.z, L->smem, static_smem,
               (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2], (unsigned long long)c[3],
               (unsigned long long)c[4], (unsigned long long)c[5], (unsigned long long)c[6],
               (unsigned long long)ins[CUDA_CPU_INS_SFU], (unsigned long long)ins[CUDA_CPU_INS_SHFL],
               (unsigned long long)ins[CUDA_CPU_INS_BAR], (unsigned long long)ins[CUDA_CPU_INS_ATOM],
               (unsigned long long)ins[CUDA_CPU_INS_MMA], (unsigned long long)ins[CUDA_CPU_INS_LDSM],
               (unsigned long long)ins[CUDA_CPU_INS_CP_ASYNC], (unsigned long long)ins[CUDA_CPU_INS_WMMA],
               (unsigned long long)ins[CUDA_CPU_INS_GMEM], (unsigned long long)ins[CUDA_CPU_INS_SMEM],
               (unsigned long long)c[7], (unsigned long long)ins[CUDA_CPU_INS_WGMMA]);
}

// ---- float atomics ----
// Applied one at a time (under a lock, so the first one's old value is the target's value before the
// launch), logged, and once the launch has run each target gets its additions summed again in an
// order drawn from CUDA_CPU_ATOMIC_SEED, the launch and the schedule: a GPU promises no order, so a
// result whose bits depend on it differs between schedules, runs and ranks here too.
static std::mutex g_fatomic_mu;
static uint64_t g_fatomic_seq;

static size_t fa_size(int type) {
    switch (type) {
    case CUDA_CPU_FA_F64: return 8;
    case CUDA_CPU_FA_F16: case CUDA_CPU_FA_BF16: return 2;
    default: return 4;
    }
}

static uint64_t fa_add(int type, uint64_t a, uint64_t b) {
    switch (type) {
    case CUDA_CPU_FA_F32: {
        float x, y;
        uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
        memcpy(&x, &ua, 4);
        memcpy(&y, &ub, 4);
        x += y;
        memcpy(&ua, &x, 4);
        return ua;
    }
    case CUDA_CPU_FA_F64: {
        double x, y;
        memcpy(&x, &a, 8);
        memcpy(&y, &b, 8);
        x += y;
        memcpy(&a, &x, 8);
        return a;
    }
    case CUDA_CPU_FA_F16: return float_to_half(half_to_float((uint16_t)a) + half_to_float((uint16_t)b));
    case CUDA_CPU_FA_BF16: return float_to_bf16(bf16_to_float((uint16_t)a) + bf16_to_float((uint16_t)b));
    case CUDA_CPU_FA_F16X2:
        return (uint64_t)float_to_half(half_to_float((uint16_t)a) + half_to_float((uint16_t)b)) |
               ((uint64_t)float_to_half(half_to_float((uint16_t)(a >> 16)) + half_to_float((uint16_t)(b >> 16))) << 16);
    default:
        return (uint64_t)float_to_bf16(bf16_to_float((uint16_t)a) + bf16_to_float((uint16_t)b)) |
               ((uint64_t)float_to_bf16(bf16_to_float((uint16_t)(a >> 16)) + bf16_to_float((uint16_t)(b >> 16))) << 16);
    }
}

uint64_t cuda_cpu_float_atomic_add(void* p, int type, uint64_t operand) {
    Worker* w = current_thread_worker("atomicAdd");
    size_t n = fa_size(type);
    std::unique_lock<std::mutex> op_lk(g_atomic_op_mu);  // the check and the add in one order (see its comment)
    check_atomic_access(p, n, (uintptr_t)__builtin_return_address(0));
    count_range(p, n, true);  // as an integer atomic counts: its bytes written
    count_ins(CUDA_CPU_INS_ATOM);
    RuntimeScope scope;
    uint64_t old = 0, seq;
    {
        std::lock_guard<std::mutex> lk(g_fatomic_mu);
        memcpy(&old, p, n);
        uint64_t now = fa_add(type, old, operand);
        memcpy(p, &now, n);
        seq = g_fatomic_seq++;
    }
    Fiber* f = w->cur;
    FloatAtomic e;
    e.addr = (uintptr_t)p;
    e.type = type;
    e.operand = operand;
    e.old = old;
    e.seq = seq;
    e.key = mix64(mix64(w->block_linear) ^ ((uint64_t)f->linear << 32) ^ f->natomics++);
    w->flog.push_back(e);
    cuda_cpu_atomic_any_order(p, (unsigned)n);  // its bytes may differ between schedules
    return old;
}

// A kernel's clock: the calling thread's own count of its readings, so a kernel that times itself
// (writes clock() or clock64() readings out) gives the same result under every schedule; a GPU's SM
// counter differs from run to run, so no correct program depends on its values. Outside a kernel,
// clock() is the C library's (the process's CPU time), which the program's host code may call.
// kernel_clock: in a kernel, the calling thread's next reading into *v; false outside one.
static bool kernel_clock(long long* v) {
    Worker* w = tw;
    if (!w || !w->cur) return false;
    *v = (long long)++w->cur->clock_reads;
    return true;
}

long long cuda_cpu_clock64(void) {
    long long v;
    if (kernel_clock(&v)) return v;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

extern "C" clock_t clock(void) throw() {
    long long v;
    if (kernel_clock(&v)) return (clock_t)v;
    struct timespec t;  // glibc's own definition of clock()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (clock_t)(t.tv_sec * CLOCKS_PER_SEC + t.tv_nsec / (1000000000 / CLOCKS_PER_SEC));
}

void cuda_cpu_atomic_any_order(const void* a, unsigned size) {
    Worker* w = tw;
    if (!w || !w->cur) return;  // not in a kernel: the bad-context checks say so elsewhere
    unsigned lg = size >= 8 ? 3 : size >= 4 ? 2 : size >= 2 ? 1 : 0;
    w->fatomics.push_back(((uintptr_t)a << 2) | lg);  // the schedules' comparison lets these bytes differ
}

// After a schedule of L ran: each float atomic target summed again in this schedule's order. In the
// first schedule of a checked program, a target that a thread also read or wrote plainly after its
// atomics is left as it is (and in L's other schedules): that thread saw the order that happened.
static void reorder_float_atomics(Launch* L, unsigned sched_index, bool checked) {
    std::vector<FloatAtomic> all;
    {
        std::lock_guard<std::mutex> lk(g_workers_mu);
        for (Worker* w : g_workers) {
            all.insert(all.end(), w->flog.begin(), w->flog.end());
            w->flog.clear();
        }
    }
    if (all.empty()) return;
    std::sort(all.begin(), all.end(), [](const FloatAtomic& a, const FloatAtomic& b) {
        return a.addr != b.addr ? a.addr < b.addr : a.seq < b.seq;
    });
    uint64_t salt = mix64(g_atomic_seed ^ mix64(L->op * 0x9E3779B97F4A7C15ull + sched_index));
    for (size_t i = 0; i < all.size();) {
        size_t j = i;
        bool one_type = true;
        while (j < all.size() && all[j].addr == all[i].addr) one_type &= all[j].type == all[i].type, j++;
        uintptr_t a = all[i].addr;
        size_t n = fa_size(all[i].type);
        if (checked && check_plain_access_after_atomics((const void*)a, n)) L->fa_keep.insert(a);
        if (one_type && !L->fa_keep.count(a)) {
            std::vector<FloatAtomic> g(all.begin() + (long)i, all.begin() + (long)j);
            std::sort(g.begin(), g.end(), [salt](const FloatAtomic& x, const FloatAtomic& y) {
                return mix64(salt ^ x.key) < mix64(salt ^ y.key);
            });
            uint64_t v = all[i].old;
            for (const FloatAtomic& e : g) v = fa_add(e.type, v, e.operand);
            memcpy((void*)a, &v, n);
        }
        i = j;
    }
}

unsigned cuda_cpu_live_lanes(void) {
    Worker* w = current_thread_worker("__activemask");
    unsigned base = w->cur->linear & ~31u, m = 0;
    for (unsigned l = 0; l < 32 && base + l < w->n; l++)
        if (w->fibers[base + l]->state != F_DONE) m |= 1u << l;
    return m;
}

// glibc's assert calls this: inside a kernel, name the kernel, the block and the thread.
extern "C" void __assert_fail(const char* expr, const char* file, unsigned int line, const char* func) noexcept {
    Worker* w = tw;
    if (w && w->cur && w->launch) die_in_kernel("assertion '%s' failed at %s:%u (%s)", expr, file, line, func);
    fflush(stdout);
    fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, func, expr);
    abort();
}

// ============================================================================================
// Worker pool, watchdog and kernel launch
// ============================================================================================

struct Pool {
    std::mutex mu;
    std::condition_variable cv_start, cv_done;
    unsigned nhelpers = 0;
    Launch* launch = nullptr;
    uint64_t generation = 0;
    unsigned busy = 0;
};
static Pool* g_pool;
static std::once_flag g_init_once;
static bool g_watchdog_started;
static uint32_t* g_run_blocks;  // check mode: block instance - run_base -> block linear index
static uint64_t g_run_blocks_n;

static void run_blocks(const Launch* L) {
    Worker* w = worker_get();
    w->launch = L;
    w->active.store(L);
    Launch* ml = const_cast<Launch*>(L);
    for (;;) {
        uint64_t i = ml->next.fetch_add(1, std::memory_order_relaxed);
        if (i >= L->nblocks) break;
        uint64_t b = (uint64_t)(((unsigned __int128)i * L->block_stride + L->block_offset) % L->nblocks);
        run_block(w, L, b);
        if (g_count_run && w->static_gpu > w->c_static) w->c_static = w->static_gpu;
        uint64_t slot = w->blk - L->run_base;
        if (g_run_blocks && slot < g_run_blocks_n) g_run_blocks[slot] = (uint32_t)b;
    }
    w->active.store(nullptr);
    w->launch = nullptr;
}

// Block linear index of a block instance of the current run (check mode), or ~0 when unknown.
uint64_t run_block_of(const Launch* L, uint32_t blk) {
    uint64_t slot = blk - L->run_base;
    if (g_run_blocks && slot < g_run_blocks_n) return g_run_blocks[slot];
    return ~0ull;
}

static void helper_main() {
    worker_get();
    uint64_t seen = 0;
    for (;;) {
        Launch* L;
        {
            std::unique_lock<std::mutex> lk(g_pool->mu);
            g_pool->cv_start.wait(lk, [&] { return g_pool->generation != seen; });
            seen = g_pool->generation;
            L = g_pool->launch;
        }
        blockDim = L->block;
        gridDim = L->grid;
        run_blocks(L);
        std::lock_guard<std::mutex> lk(g_pool->mu);
        if (--g_pool->busy == 0) g_pool->cv_done.notify_all();
    }
}

// A thread that spins forever inside one fiber cannot be preempted: the watchdog notices that a
// worker made no fiber switch for CUDA_CPU_WATCHDOG_S seconds and makes it report where it is.
static void watchdog_main() {
    std::map<Worker*, std::pair<uint64_t, double>> seen;
    for (;;) {
        usleep(200 * 1000);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double now = t.tv_sec + t.tv_nsec * 1e-9;
        std::vector<Worker*> ws;
        {
            std::lock_guard<std::mutex> lk(g_workers_mu);
            ws = g_workers;
        }
        for (Worker* w : ws) {
            uint64_t p = w->progress.load(std::memory_order_relaxed);
            auto& s = seen[w];
            if (!w->active.load() || p != s.first || s.second == 0) { s = {p, now}; continue; }
            if (now - s.second < g_watchdog_s) continue;
            g_watchdog_victim.store(w);
            pthread_kill(w->thread, SIGUSR2);
            sleep(5);  // the victim reports and aborts; if it cannot, say it from here
            const Launch* L = w->active.load();
            cuda_cpu_fail("kernel '%s': no barrier, warp operation or exit for %.0f s (a loop that does not end, or a "
                          "thread spinning on a value another thread sets?); CUDA_CPU_WATCHDOG_S sets the limit", L ? L->name : "?", g_watchdog_s);
        }
    }
}

static void start_watchdog() {
    if (g_watchdog_s <= 0) return;
    std::thread(watchdog_main).detach();
    g_watchdog_started = true;
}

// A forked child has only the forking thread: give it fresh helpers (and unlocked mutexes).
static void pool_after_fork_child() {
    unsigned n = g_pool->nhelpers;
    g_pool = new Pool();
    g_pool->nhelpers = n;
    new (&g_workers_mu) std::mutex();
    {
        // The parent's helpers are gone: keep only this thread's worker.
        std::vector<Worker*> keep;
        for (Worker* w : g_workers) if (w == tw) keep.push_back(w);
        g_workers = keep;
    }
    for (unsigned i = 0; i < n; i++) std::thread(helper_main).detach();
    if (g_watchdog_started) std::thread(watchdog_main).detach();
}

static void region_init();

static void runtime_init() {
    dl_iterate_phdr(phdr_first, nullptr);
    modes_init();
    // A GPU thread may have up to 512 KiB of local memory; the runtime's own frames need a little more.
    g_stack_size = env_size("CUDA_CPU_STACK_KB", CUDA_CPU_ASAN ? 1024 : 576) * 1024;
    size_t nthreads = env_size("CUDA_CPU_THREADS", std::thread::hardware_concurrency() ? std::thread::hardware_concurrency() : 1);
    region_init();
    g_pool = new Pool();
    g_pool->nhelpers = (unsigned)nthreads - 1;
    for (unsigned i = 0; i < g_pool->nhelpers; i++) std::thread(helper_main).detach();
    pthread_atfork(nullptr, nullptr, pool_after_fork_child);
#if !CUDA_CPU_ASAN
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
#endif
    struct sigaction wd;
    memset(&wd, 0, sizeof(wd));
    wd.sa_sigaction = watchdog_signal;
    wd.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGUSR2, &wd, nullptr);
    start_watchdog();
    if (g_alarms_report) atexit(print_alarms);
}

void runtime_init_once() { std::call_once(g_init_once, runtime_init); }

// ---- per-host-thread last error ----
static __thread cudaError_t t_last_error = cudaSuccess;
static cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) t_last_error = e;
    return e;
}

// Dynamic shared memory limits per kernel, as cudaFuncSetAttribute sets them.
static std::mutex g_func_mu;
static std::map<const void*, int> g_func_max_smem;
static int g_any_max_smem = -1;  // for launches whose kernel address cu2cpu.pl could not name


static void compare_runs(const Launch* L, const std::vector<Saved>& first, const Schedule& s0, const Schedule& s1,
                         std::vector<uintptr_t>& fatomics);

static void run_schedule(Launch* L) {
    L->next.store(0);
    uint64_t nb = L->nblocks;
    L->block_offset = 0;
    L->block_stride = 1;
    if (L->sched->kind == SCHED_REVERSE) {
        L->block_offset = nb - 1;
        L->block_stride = nb - 1;  // i -> nb - 1 - i (mod nb)
    } else if (L->sched->kind == SCHED_SHUFFLE && nb > 1) {
        uint64_t s = mix64(L->sched->seed ^ 0x5eed);
        L->block_offset = s % nb;
        for (;;) {  // a stride coprime with nb makes i -> offset + i*stride a permutation
            s = mix64(s);
            uint64_t st = 1 + s % (nb - 1), a = st, c = nb;
            while (c) { uint64_t t = a % c; a = c; c = t; }
            if (a == 1) { L->block_stride = st; break; }
        }
    }
    L->run_base = g_blk_counter.load() + 1;
    if (g_check_run) {
        g_run_blocks_n = nb < (1u << 24) ? nb : (1u << 24);
        static std::vector<uint32_t> table;
        table.assign(g_run_blocks_n, 0);
        g_run_blocks = table.data();
        check_run_start(L);
    }
    {
        std::lock_guard<std::mutex> lk(g_workers_mu);
        for (Worker* w : g_workers) w->fatomics.clear();
    }
    unsigned helpers = g_pool->nhelpers;
    if ((uint64_t)helpers > L->nblocks - 1) helpers = (unsigned)(L->nblocks - 1);
    if (helpers > 0) {
        std::lock_guard<std::mutex> lk(g_pool->mu);
        g_pool->launch = L;
        g_pool->busy = g_pool->nhelpers;
        g_pool->generation++;
        g_pool->cv_start.notify_all();
    }
    run_blocks(L);
    if (helpers > 0) {
        std::unique_lock<std::mutex> lk(g_pool->mu);
        g_pool->cv_done.wait(lk, [] { return g_pool->busy == 0; });
    }
}

static __thread bool t_order_dependent;
void cuda_cpu_order_dependent_launch(void) { t_order_dependent = true; }

// Runs a queued launch: in its batch's first run every schedule (each from the same memory, every
// result compared) with the checks on the first; in the batch's other runs one schedule, unchecked.
void launch_run(Launch* L, Op* op, const OpRun& run) {
    blockDim = L->block;
    gridDim = L->grid;
    size_t nsched = (L->order_dependent || !run.first) ? 1 : g_schedules.size();
    std::vector<Saved> before, first;
    std::vector<DevAlloc*> touched;
    if (nsched > 1) {
        touched = reach_of(&op, 1);
        before = save_live(touched);
    }
    std::vector<uintptr_t> fatomics;
    // The checks run under the first schedule (their verdict does not depend on the order); the
    // others only have to reproduce its result. The shadow's record of what is initialised stays as
    // the checked run left it.
    for (size_t s = 0; s < nsched; s++) {
        if (s > 0) restore_live(before);
        L->sched = &g_schedules[s];
        L->sched_index = (unsigned)s;
        g_check_run = g_check && run.first && s == 0;
        g_count_run = g_count_file && run.first && s == 0;
        if (g_count_run) count_start();
        run_schedule(L);
        reorder_float_atomics(L, (unsigned)s, g_check_run);
        if (g_count_run) count_finish(L);
        g_check_run = g_count_run = false;
        if (nsched > 1) {
            {
                std::lock_guard<std::mutex> lk(g_workers_mu);
                for (Worker* w : g_workers) fatomics.insert(fatomics.end(), w->fatomics.begin(), w->fatomics.end());
            }
            if (s == 0) first = save_live(touched);
            else compare_runs(L, first, g_schedules[0], g_schedules[s], fatomics);
        }
    }
    // The first schedule's result stands (its float atomics' order is the one a run with this launch
    // in another stream order gets too).
    if (nsched > 1) restore_live(first);
    g_run_blocks = nullptr;
}

void cuda_cpu_launch_erased(const char* name, const void* key, dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, cuda_cpu_body_fn fn, void* arg, void (*free_arg)(void*),
                            const void* params, size_t params_size) {
    runtime_init_once();
    if (tw && tw->cur) cuda_cpu_fail("kernel '%s' launched from inside a kernel (dynamic parallelism is not supported)", name);
    const bool order_dependent = t_order_dependent;
    t_order_dependent = false;
    uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
    const char* bad = nullptr;
    cudaError_t err = cudaErrorInvalidConfiguration;
    char why[256];
    int attr;
    {
        std::lock_guard<std::mutex> lk(g_func_mu);
        auto it = key ? g_func_max_smem.find(key) : g_func_max_smem.end();
        attr = key ? (it == g_func_max_smem.end() ? -1 : it->second) : g_any_max_smem;
    }
    if (nthreads == 0 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
        snprintf(why, sizeof(why), "block (%u,%u,%u) is not 1..1024 threads within (1024,1024,64)", block.x, block.y, block.z);
        bad = why;
    } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        snprintf(why, sizeof(why), "grid (%u,%u,%u) is outside (1..2^31-1, 1..65535, 1..65535)", grid.x, grid.y, grid.z);
        bad = why;
    } else if (!stream_is_valid(stream)) {
        snprintf(why, sizeof(why), "the stream is not a live cudaStream_t");
        bad = why;
        err = cudaErrorInvalidResourceHandle;
    } else if (smem > kSmemDefault && (smem > kSmemOptin || attr < 0 || (size_t)attr < smem)) {
        snprintf(why, sizeof(why), "%zu bytes of dynamic shared memory need cudaFuncSetAttribute(%s, "
                 "cudaFuncAttributeMaxDynamicSharedMemorySize, >= %zu) (the limit is %zu)", smem, name, smem, kSmemOptin);
        bad = why;
        err = cudaErrorInvalidValue;
    }
    if (bad) {
        // As on a GPU the launch does not run and the error waits for cudaGetLastError; say it too.
        fprintf(stderr, "cuda_cpu: launch of kernel '%s' refused: %s\n", name, bad);
        set_error(err);
        free_arg(arg);
        return;
    }
    Launch* L = new Launch();
    L->name = name;
    L->key = key;
    L->grid = grid;
    L->block = block;
    L->smem = smem;
    L->smem_attr = attr;
    L->nthreads = (unsigned)nthreads;
    L->nblocks = (uint64_t)grid.x * grid.y * grid.z;
    L->fn = fn;
    L->arg = arg;
    L->free_arg = free_arg;
    L->params_lo = (uintptr_t)params;
    L->params_size = params_size;
    L->order_dependent = order_dependent;
    // What it may touch: the allocations its arguments point into (pointers, or structs holding them,
    // at any 4-byte offset of the argument tuple), and what those point to (OpReach::chase).
    OpReach reach;
    reach.all = false;
    reach.chase = true;
    for (size_t o = 0; o + sizeof(uintptr_t) <= params_size; o += 4) {
        uintptr_t v;
        memcpy(&v, (const char*)params + o, sizeof(v));
        if (alloc_of_pointer(v)) reach.ptrs.push_back(v);
    }
    // Queued on its stream: it runs when the host synchronizes with it (streams_cpu.cpp).
    op_issue(stream, std::string("kernel '") + name + "'",
             [L](Op* op, const OpRun& run) { L->op = op->id; launch_run(L, op, run); }, {}, nullptr,
             [L] { L->free_arg(L->arg); delete L; }, std::move(reach));
}

// ============================================================================================
// Runtime API: memory. Every allocation (device, managed, pinned host) lives in one reserved
// region of address space: page-aligned, its last byte within 256 bytes of a guard page that stays
// inaccessible, its start 256-byte aligned as cudaMalloc's is. Freed ranges become inaccessible and
// are not reused until the region is used up, so a use after cudaFree faults. A page table maps
// each page (guard pages included) to its allocation, for the checker and for fault messages.
// ============================================================================================

uintptr_t g_dev_lo;
size_t g_dev_span;
DevAlloc* g_symbols;
uintptr_t g_symbols_const_lo, g_symbols_const_hi;
// The sections' bounds, from the linker (weak: a program without such variables has none).
extern "C" char __start_cuda_cpu_dev[] __attribute__((weak));
extern "C" char __stop_cuda_cpu_dev[] __attribute__((weak));
extern "C" char __start_cuda_cpu_devc[] __attribute__((weak));
extern "C" char __stop_cuda_cpu_devc[] __attribute__((weak));
static uint32_t* g_page_owner;        // allocation id + 1 per page of the region
// Allocation records by id, in chunks that never move (the checks read them without a lock).
static const uint32_t kAllocChunk = 1024;
static DevAlloc** g_alloc_chunks[(1u << 22) / kAllocChunk];
static uint32_t g_alloc_count;
static const uint32_t kMaxAllocs = 1u << 22;
static uintptr_t g_bump;
static std::multimap<size_t, uintptr_t> g_free_spans;  // used only once the region is used up
static std::map<uintptr_t, DevAlloc*> g_live;           // live allocations by start
static size_t g_device_bytes;
// The emulated device's memory: 80 GiB, or CUDA_CPU_DEVICE_MEMORY: bytes, or a size with a unit
// (48GiB, 48G and 49152MiB are binary; 48GB and 48000MB decimal, as card makers write them), so a
// plan for a 48 GB card can be run as such, and a test can run out of memory.
static size_t device_memory_size() {
    static size_t size = 0;
    if (size == 0) {
        const char* e = getenv("CUDA_CPU_DEVICE_MEMORY");
        size = 80ull << 30;
        if (e && *e) {
            char* end;
            double v = strtod(e, &end);
            struct Unit { const char* name; double bytes; };
            static const Unit units[] = {{"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3},
                                         {"M", 1048576.0}, {"MiB", 1048576.0}, {"MB", 1e6}, {"G", 1073741824.0},
                                         {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0},
                                         {"TiB", 1099511627776.0}, {"TB", 1e12}};
            double scale = 0;
            for (const Unit& u : units)
                if (end != e && strcasecmp(end, u.name) == 0) scale = u.bytes;  // 48gb too
            if (scale == 0 || !(v * scale >= 1) || v * scale > 1e15) {  // a user's input: one line, exit 1
                fprintf(stderr, "error: CUDA_CPU_DEVICE_MEMORY=%s: expected a size in bytes, or with a unit (48GiB, "
                        "48GB, 512MiB)\n", e);
                exit(1);
            }
            size = (size_t)(v * scale);
        }
    }
    return size;
}
#define kDeviceMemory device_memory_size()
// The emulated device's compute capability: sm_90, or CUDA_CPU_SM (75, 80, 86, 89, 90, 100, 120 ...),
// so a test can see what a program chooses by the GPU's generation (the trainer's -ge default).
static int device_sm() {
    static int sm = 0;
    if (sm == 0) {
        const char* e = getenv("CUDA_CPU_SM");
        sm = 90;
        if (e && *e) {
            char* end;
            long v = strtol(e, &end, 10);
            if (*end || v < 70 || v > 129) {  // a user's input: one line, exit 1
                fprintf(stderr, "error: CUDA_CPU_SM=%s: expected a compute capability as nvcc's sm_XX writes it (80, 90, 120)\n", e);
                exit(1);
            }
            sm = (int)v;
        }
    }
    return sm;
}
static std::recursive_mutex g_access_mu;
static int g_access_depth;

static void region_init() {
    for (size_t gib = 64; gib >= 1; gib /= 2) {
        size_t span = gib << 30;
        void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) continue;
        g_dev_lo = (uintptr_t)p;
        g_dev_span = span;
        break;
    }
    if (!g_dev_span) cuda_cpu_fail("cannot reserve address space for device memory: %s", strerror(errno));
    g_bump = g_dev_lo;
    size_t pages = g_dev_span / kPage;
    g_page_owner = (uint32_t*)mmap(nullptr, pages * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_page_owner == MAP_FAILED) cuda_cpu_fail("out of memory for the device page table");
    // The __device__ and __constant__ variables (cu2cpu.pl puts them in these sections): device
    // memory, saved and restored with the rest, checked like an allocation; the const ones only read.
    uintptr_t dev_lo = (uintptr_t)__start_cuda_cpu_dev, dev_hi = (uintptr_t)__stop_cuda_cpu_dev;
    uintptr_t devc_lo = (uintptr_t)__start_cuda_cpu_devc, devc_hi = (uintptr_t)__stop_cuda_cpu_devc;
    if (dev_lo && dev_hi > dev_lo) {
        DevAlloc* A = new DevAlloc();
        A->start = dev_lo;
        A->size = (size_t)(dev_hi - dev_lo);
        A->kind = A_SYMBOLS;
        g_symbols = A;
        g_live[A->start] = A;
        if (g_check) check_alloc(A);
    }
    if (devc_lo && devc_hi > devc_lo) {
        g_symbols_const_lo = devc_lo;
        g_symbols_const_hi = devc_hi;
    }
}

DevAlloc* dev_lookup(uintptr_t a) {
    if (a - g_dev_lo >= g_dev_span) return nullptr;
    uint32_t id = g_page_owner[(a - g_dev_lo) / kPage];
    return id ? g_alloc_chunks[(id - 1) / kAllocChunk][(id - 1) % kAllocChunk] : nullptr;
}

static const char* kind_name(AllocKind k) {
    return k == A_DEVICE ? "cudaMalloc" : k == A_MANAGED ? "cudaMallocManaged" : "cudaMallocHost";
}

void describe_device_address(uintptr_t a, char* buf, size_t n) {
    if ((g_symbols && a - g_symbols->start < g_symbols->size) || (a >= g_symbols_const_lo && a < g_symbols_const_hi)) {
        std::string v = symbol_at(a, false);
        snprintf(buf, n, "__device__ variable %s%s%s (at %p)", v.empty() ? "" : "'", v.empty() ? "?" : v.c_str(),
                 v.empty() ? "" : "'", (void*)a);
        return;
    }
    DevAlloc* A = dev_lookup(a);
    if (!A) { snprintf(buf, n, "device address %p, which no allocation ever held", (void*)a); return; }
    const char* k = kind_name(A->kind);
    if (A->freed)
        snprintf(buf, n, "device address %p, in a %zu-byte %s block at %p that was freed (use after cudaFree)",
                 (void*)a, A->size, k, (void*)A->start);
    else if (a < A->start)
        snprintf(buf, n, "device address %p, %zu bytes before the start of a %zu-byte %s block at %p", (void*)a,
                 (size_t)(A->start - a), A->size, k, (void*)A->start);
    else if (a >= A->start + A->size)
        snprintf(buf, n, "device address %p, %zu bytes past the end of a %zu-byte %s block at %p", (void*)a,
                 (size_t)(a - A->start - A->size), A->size, k, (void*)A->start);
    else
        snprintf(buf, n, "device address %p (byte %zu of a %zu-byte %s block at %p)", (void*)a, (size_t)(a - A->start),
                 A->size, k, (void*)A->start);
}

static void set_protection(bool open) {
    for (auto& kv : g_live)
        if (kv.second->kind == A_DEVICE)
            mprotect(kv.second->map_lo, kv.second->map_len, open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

DeviceAccess::DeviceAccess() {
    runtime_init_once();
    g_access_mu.lock();
    if (g_access_depth++ == 0) {
        if (g_protect) set_protection(true);
        pinned_guards_open(true);
    }
}
DeviceAccess::~DeviceAccess() {
    if (--g_access_depth == 0) {
        if (g_protect) set_protection(false);
        pinned_guards_open(false);
    }
    g_access_mu.unlock();
}

static uintptr_t take_span(size_t span) {
    if (g_bump + span <= g_dev_lo + g_dev_span && g_bump + span > g_bump) {
        uintptr_t r = g_bump;
        g_bump += span;
        return r;
    }
    auto it = g_free_spans.lower_bound(span);
    if (it == g_free_spans.end()) return 0;
    uintptr_t r = it->second;
    size_t have = it->first;
    g_free_spans.erase(it);
    if (have > span) g_free_spans.emplace(have - span, r + span);
    return r;
}

// Memory nothing wrote reads as NaN in fp32, fp16 and bf16 (all bytes 0xFF), as a reminder that
// cudaMalloc does not zero. The pages map a small file of 0xFF bytes privately (copy on write), so a
// page costs nothing until it is written: a small model's cuBLASLt workspace and staging buffers are
// most of its memory and never touched, and filling them was a fifth of a short emulated run. Where
// the file cannot be made, the bytes are written.
static const size_t kUnwrittenChunk = (size_t)2 << 20;
static void map_unwritten(uintptr_t lo, size_t len) {
    static int fd = [] {
        int f = memfd_create("cuda_cpu_unwritten", MFD_CLOEXEC);
        if (f < 0) return -1;
        std::vector<char> ff(kUnwrittenChunk, (char)0xff);
        if (ftruncate(f, (off_t)kUnwrittenChunk) != 0 || pwrite(f, ff.data(), ff.size(), 0) != (ssize_t)ff.size()) {
            close(f);
            return -1;
        }
        return f;
    }();
    for (size_t off = 0; off < len; off += kUnwrittenChunk) {
        size_t n = std::min(kUnwrittenChunk, len - off);
        if (fd < 0 || mmap((void*)(lo + off), n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED)
            memset((void*)(lo + off), 0xff, n);
    }
}

static cudaError_t do_alloc(void** p, size_t size, AllocKind kind, const char* api) {
    if (!p) return set_error(cudaErrorInvalidValue);
    *p = nullptr;
    if (size == 0) return cudaSuccess;
    DeviceAccess access;
    if (kind != A_HOST && g_device_bytes + size > kDeviceMemory) return set_error(cudaErrorMemoryAllocation);
    if (g_alloc_count >= kMaxAllocs) cuda_cpu_fail("%s: more than %u allocations", api, kMaxAllocs);
    size_t need = (size + 255) / 256 * 256;
    size_t map_len = (need + kPage - 1) / kPage * kPage;
    if (need < size || map_len < need) return set_error(cudaErrorMemoryAllocation);
    uintptr_t lo = take_span(map_len + kPage);
    if (!lo) return set_error(cudaErrorMemoryAllocation);
    if (mprotect((void*)lo, map_len, PROT_READ | PROT_WRITE) != 0) {
        g_free_spans.emplace(map_len + kPage, lo);
        return set_error(cudaErrorMemoryAllocation);
    }
    map_unwritten(lo, map_len);
    DevAlloc* A = new DevAlloc();
    A->start = lo + map_len - need;
    A->size = size;
    A->kind = kind;
    A->map_lo = (char*)lo;
    A->map_len = map_len;
    uint32_t id = g_alloc_count++;
    if (!g_alloc_chunks[id / kAllocChunk]) g_alloc_chunks[id / kAllocChunk] = new DevAlloc*[kAllocChunk]();
    g_alloc_chunks[id / kAllocChunk][id % kAllocChunk] = A;
    for (size_t pg = 0; pg <= map_len / kPage; pg++) g_page_owner[(lo - g_dev_lo) / kPage + pg] = id + 1;
    g_live[A->start] = A;
    if (kind != A_HOST) g_device_bytes += size;
    if (g_check) check_alloc(A);
    *p = (void*)A->start;
    return cudaSuccess;
}

static cudaError_t do_free(void* p, bool host, const char* api) {
    if (!p) return cudaSuccess;
    DeviceAccess access;
    auto it = g_live.find((uintptr_t)p);
    if (it == g_live.end() || (it->second->kind == A_HOST) != host || it->second->kind == A_SYMBOLS) {
        fprintf(stderr, "cuda_cpu: %s(%p): not a live allocation from %s\n", api, p, host ? "cudaMallocHost" : "cudaMalloc");
        return set_error(cudaErrorInvalidValue);
    }
    DevAlloc* A = it->second;
    if (A->kind != A_HOST) g_device_bytes -= A->size;
    g_live.erase(it);
    mprotect(A->map_lo, A->map_len, PROT_NONE);
    madvise(A->map_lo, A->map_len, MADV_DONTNEED);
    A->freed = true;
    if (g_check) check_free(A);
    // The range stays out of use (a use after free faults) unless the region runs out.
    if (g_bump + (64ull << 20) > g_dev_lo + g_dev_span) g_free_spans.emplace(A->map_len + kPage, (uintptr_t)A->map_lo);
    return cudaSuccess;
}

// The live allocation holding all of [p, p+n) (of any kind when any_kind, else device or managed).
DevAlloc* live_holding(const void* p, size_t n, bool any_kind) {
    DevAlloc* A = dev_lookup((uintptr_t)p);
    if (!A || A->freed || (!any_kind && A->kind == A_HOST)) return nullptr;
    uintptr_t a = (uintptr_t)p;
    return a >= A->start && a + n >= a && a + n <= A->start + A->size ? A : nullptr;
}


void device_written(const void* p, size_t n) {
    if (!g_check || !n) return;
    DevAlloc* A = live_holding(p, n, true);
    if (A && A->state) memset(A->state + ((uintptr_t)p - A->start), 2, n);
}

void device_copied_state(void* dst, const void* src, size_t n) {
    if (!g_check || !n) return;
    DevAlloc* D = live_holding(dst, n, true);
    DevAlloc* S = live_holding(src, n, true);
    if (!D || !D->state) return;
    if (S && S->state) memmove(D->state + ((uintptr_t)dst - D->start), S->state + ((uintptr_t)src - S->start), n);
    else memset(D->state + ((uintptr_t)dst - D->start), 2, n);
}

void device_range_or_die(const char* api, const char* what, const void* p, size_t n) {
    if (n == 0 || live_holding(p, n, true)) return;
    char desc[256];
    describe_device_address((uintptr_t)p, desc, sizeof(desc));
    cuda_cpu_fail("%s: %s [%p, +%zu bytes) is not inside one live device allocation (it starts at %s)", api, what, p, n, desc);
}

bool in_device_region(const void* p) { return (uintptr_t)p - g_dev_lo < g_dev_span; }

cudaError_t set_cuda_error(cudaError_t e) { return set_error(e); }

// A copy inside the runtime (its checks were made when it was issued): the bytes, then the state the
// checker keeps of device bytes (a device source's travels, host bytes count as written).
void runtime_copy(void* dst, const void* src, size_t n) {
    if (!n) return;
    memmove(dst, src, n);
    if (in_device_region(dst)) {
        if (in_device_region(src)) device_copied_state(dst, src, n);
        else device_written(dst, n);
    }
}

// Snapshot storage no snapshot holds, for the next ones; at most 1 GiB of it is kept.
static std::mutex g_saved_pool_mu;
static std::vector<std::vector<char>> g_saved_pool;
static size_t g_saved_pool_bytes;

SavedBytes::SavedBytes(const char* p, size_t n) {
    {
        std::lock_guard<std::mutex> lk(g_saved_pool_mu);
        size_t best = g_saved_pool.size();
        for (size_t i = 0; i < g_saved_pool.size(); i++)
            if (g_saved_pool[i].capacity() >= n && (best == g_saved_pool.size() || g_saved_pool[i].capacity() < g_saved_pool[best].capacity()))
                best = i;
        if (best < g_saved_pool.size()) {
            v_ = std::move(g_saved_pool[best]);
            g_saved_pool[best] = std::move(g_saved_pool.back());
            g_saved_pool.pop_back();
            g_saved_pool_bytes -= v_.capacity();
        }
    }
    v_.assign(p, p + n);
}

SavedBytes::~SavedBytes() {
    if (!v_.capacity()) return;
    std::lock_guard<std::mutex> lk(g_saved_pool_mu);
    if (g_saved_pool_bytes + v_.capacity() > ((size_t)1 << 30)) return;
    g_saved_pool_bytes += v_.capacity();
    g_saved_pool.push_back(std::move(v_));
}

SavedBytes& SavedBytes::operator=(SavedBytes&& o) noexcept {
    if (this != &o) {
        SavedBytes dropped(std::move(*this));  // to the pool
        v_ = std::move(o.v_);
    }
    return *this;
}

// The live allocation (or the __device__ variables) holding address v, or ending at v; null if none.
DevAlloc* alloc_of_pointer(uintptr_t v) {
    DevAlloc* A = find_alloc(v);
    return A && !A->freed && v >= A->start && v <= A->start + A->size ? A : nullptr;
}

// A snapshot holds only what the window's ops can change: the cuBLASLt workspace and the staging
// buffers of a small model are most of its memory, and copying them for every window and launch
// schedule was most of an emulated trainer step.
std::vector<DevAlloc*> reach_of(Op* const* ops, size_t n) {
    std::vector<DevAlloc*> out;
    bool chase = false;
    for (size_t i = 0; i < n; i++) {
        if (ops[i]->reach.all) {
            for (auto& kv : g_live) out.push_back(kv.second);
            return out;
        }
        chase |= ops[i]->reach.chase;
    }
    std::set<DevAlloc*> in;
    std::vector<DevAlloc*> todo;
    auto add = [&](DevAlloc* A) {
        if (A && in.insert(A).second) todo.push_back(A);
    };
    for (size_t i = 0; i < n; i++)
        for (uintptr_t p : ops[i]->reach.ptrs) add(alloc_of_pointer(p));
    if (chase) {
        // A kernel may name a __device__ variable, or load a pointer from memory it reaches and
        // follow it: every aligned word of reached memory that points into an allocation adds it.
        add(g_symbols);
        while (!todo.empty()) {
            DevAlloc* A = todo.back();
            todo.pop_back();
            uintptr_t lo = (A->start + 7) & ~(uintptr_t)7, hi = A->start + A->size;
            for (uintptr_t a = lo; a + 8 <= hi; a += 8) {
                uintptr_t v;
                memcpy(&v, (const void*)a, 8);
                if (v - g_dev_lo < g_dev_span || (g_symbols && v - g_symbols->start <= g_symbols->size)) add(alloc_of_pointer(v));
            }
        }
    }
    out.assign(in.begin(), in.end());
    std::sort(out.begin(), out.end(), [](DevAlloc* a, DevAlloc* b) { return a->start < b->start; });
    return out;
}

std::vector<Saved> save_live(const std::vector<DevAlloc*>& allocs) {
    std::vector<Saved> out;
    out.reserve(allocs.size());
    for (DevAlloc* A : allocs) out.push_back(Saved{A, SavedBytes((const char*)A->start, A->size)});
    return out;
}

void restore_live(const std::vector<Saved>& saved) {
    for (const Saved& s : saved) memcpy((void*)s.a->start, s.bytes.data(), s.bytes.size());
}

uintptr_t first_difference(const std::vector<Saved>& first, const std::vector<uintptr_t>* fatomics) {
    (void)fatomics;
    for (const Saved& s : first) {
        const char* now = (const char*)s.a->start;
        if (memcmp(now, s.bytes.data(), s.bytes.size()) == 0) continue;
        for (size_t i = 0; i < s.bytes.size(); i++)
            if (now[i] != s.bytes[i]) return s.a->start + i;
    }
    return 0;
}

// After a second schedule: every byte must equal what the first schedule left, except the targets of
// float atomics, whose rounding depends on the order of the additions (as on a GPU).
static void compare_runs(const Launch* L, const std::vector<Saved>& first, const Schedule& s0, const Schedule& s1,
                         std::vector<uintptr_t>& fatomics) {
    std::sort(fatomics.begin(), fatomics.end());
    fatomics.erase(std::unique(fatomics.begin(), fatomics.end()), fatomics.end());
    auto tolerated = [&](uintptr_t a) {
        // an entry (t << 2 | log2 size) covers [t, t + size)
        auto it = std::upper_bound(fatomics.begin(), fatomics.end(), (a << 2) | 3);
        for (int k = 0; k < 4 && it != fatomics.begin(); k++) {
            --it;
            uintptr_t t = *it >> 2, size = (uintptr_t)1 << (*it & 3);
            if (a >= t && a < t + size) return true;
        }
        return false;
    };
    for (const Saved& s : first) {
        const char* now = (const char*)s.a->start;
        if (memcmp(now, s.bytes.data(), s.bytes.size()) == 0) continue;
        for (size_t i = 0; i < s.bytes.size(); i++) {
            if (now[i] == s.bytes[i] || tolerated(s.a->start + i)) continue;
            size_t w = i & ~(size_t)3;
            float f0 = 0, f1 = 0;
            if (w + 4 <= s.bytes.size()) {
                memcpy(&f0, s.bytes.data() + w, 4);
                memcpy(&f1, now + w, 4);
            }
            char desc[256], why[1024];
            describe_device_address(s.a->start + i, desc, sizeof(desc));
            snprintf(why, sizeof(why), "kernel '%s': the result depends on the order threads run in: after the '%s' and "
                     "the '%s' schedules, %s differs (the 4 bytes there as a float: %.9g and %.9g); a missing "
                     "__syncthreads or __syncwarp, or a race (CUDA_CPU_SCHEDULES picks the schedules)",
                     L->name, s0.name.c_str(), s1.name.c_str(), desc, f0, f1);
            if (!g_alarms_report) cuda_cpu_fail("%s", why);
            // reported once per launch (its first differing byte); the program goes on with the
            // second schedule's result, one of the results a GPU could give
            record_alarm("schedule-dependent result", L->name, "", why);
            return;
        }
    }
}

extern "C" {

cudaError_t cudaMalloc(void** p, size_t size) { return do_alloc(p, size, A_DEVICE, "cudaMalloc"); }
cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int) { return do_alloc(p, size, A_MANAGED, "cudaMallocManaged"); }
cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t) { return do_alloc(p, size, A_DEVICE, "cudaMallocAsync"); }
cudaError_t cudaMallocHost(void** p, size_t size) { return do_alloc(p, size, A_HOST, "cudaMallocHost"); }
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) { return do_alloc(p, size, A_HOST, "cudaHostAlloc"); }
// cudaFree and cudaFreeHost wait for the device's work first (as CUDA's do), so queued work that uses
// the memory runs before it goes. cudaFreeAsync is stream-ordered: here it waits too.
cudaError_t cudaFree(void* p) {
    if (p) device_synchronize_host();
    return do_free(p, false, "cudaFree");
}
cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
    if (p) device_synchronize_host();
    return do_free(p, false, "cudaFreeAsync");
}
cudaError_t cudaFreeHost(void* p) {
    if (p) device_synchronize_host();
    return do_free(p, true, "cudaFreeHost");
}

// A copy to or from a __device__ or __constant__ variable: on the legacy default stream, and (from or
// to pageable memory) synchronous with the host.
cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind) {
    device_synchronize_host();
    DeviceAccess access;
    memcpy((char*)symbol + offset, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind) {
    device_synchronize_host();
    DeviceAccess access;
    memcpy(dst, (const char*)symbol + offset, count);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    DeviceAccess access;
    if (free_bytes) *free_bytes = kDeviceMemory - g_device_bytes;
    if (total) *total = kDeviceMemory;
    return cudaSuccess;
}
cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, cudaMemLocation) { return cudaSuccess; }
// The profiler's capture range (llm.c's train_gpt2.cu brackets its loop with it): nothing to capture.
cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

// ============================================================================================
// Runtime API: streams, events, device, errors
// ============================================================================================

}  // extern "C"

static int g_device = 0;
static const int kDeviceCount = 8;  // like one 8-GPU node, so each local MPI rank gets its own device

extern "C" {

cudaError_t cudaDeviceReset(void) { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int* n) {
    if (!n) return set_error(cudaErrorInvalidValue);
    *n = kDeviceCount;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= kDeviceCount) return set_error(cudaErrorInvalidDevice);
    g_device = d;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
    if (!d) return set_error(cudaErrorInvalidValue);
    *d = g_device;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) { *v = CUDART_VERSION; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* v) { *v = CUDART_VERSION; return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (!p) return set_error(cudaErrorInvalidValue);
    if (device < 0 || device >= kDeviceCount) return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof(*p));
    // Says it is emulated, and with how much memory (an H100 SXM's SMs, shared memory and peak,
    // whatever size CUDA_CPU_DEVICE_MEMORY gives it): a 48 GiB plan shows as such.
    double gib = (double)kDeviceMemory / (1u << 30);
    // CUDA_CPU_SM changes only the compute capability, and the name says so.
    char as_sm[32] = "";
    if (device_sm() != 90) snprintf(as_sm, sizeof(as_sm), " as sm_%d", device_sm());
    snprintf(p->name, sizeof(p->name), "cuda_cpu emulation of an NVIDIA H100 SXM%s with %.*f GiB", as_sm,
             gib == (double)(long long)gib ? 0 : 2, gib);
    p->totalGlobalMem = kDeviceMemory;
    p->sharedMemPerBlock = kSmemDefault;
    p->sharedMemPerBlockOptin = kSmemOptin;
    p->sharedMemPerMultiprocessor = 233472;
    p->reservedSharedMemPerBlock = 1024;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = device_sm() / 10;
    p->minor = device_sm() % 10;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = 132;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->persistingL2CacheMaxSize = 32 * 1024 * 1024;
    p->memoryBusWidth = 5120;
    p->concurrentKernels = 1;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->managedMemory = 1;
    p->canMapHostMemory = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->cooperativeLaunch = 1;
    p->streamPrioritiesSupported = 1;
    p->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int device) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrL2CacheSize: *v = p.l2CacheSize; break;
    case cudaDevAttrMaxBlockDimX: *v = 1024; break;
    case cudaDevAttrMaxBlockDimY: *v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *v = 64; break;
    case cudaDevAttrMaxGridDimX: *v = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *v = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *v = p.maxGridSize[2]; break;
    case cudaDevAttrMaxRegistersPerBlock: *v = p.regsPerBlock; break;
    // what CUDA samples' helper_cuda.h asks to pick a device (dev/corpus_samples.sh): an H100 SXM's
    // boost clock in kHz (CUDA 13 dropped clockRate from cudaDeviceProp), shared, a discrete GPU
    case cudaDevAttrClockRate: *v = 1980000; break;
    case cudaDevAttrComputeMode: *v = cudaComputeModeDefault; break;
    case cudaDevAttrIntegrated: *v = 0; break;
    default: cuda_cpu_fail("cudaDeviceGetAttribute: attribute %d is not emulated (add it to cuda_cpu.cpp)", (int)attr);
    }
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    if (!func) return set_error(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > kSmemOptin) return set_error(cudaErrorInvalidValue);
        std::lock_guard<std::mutex> lk(g_func_mu);
        g_func_max_smem[func] = value;
        if (value > g_any_max_smem) g_any_max_smem = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    cuda_cpu_fail("cudaFuncSetAttribute: attribute %d is not emulated", (int)attr);
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
    if (!a || !func) return set_error(cudaErrorInvalidValue);
    memset(a, 0, sizeof(*a));
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = 90;
    a->binaryVersion = 90;
    std::lock_guard<std::mutex> lk(g_func_mu);
    auto it = g_func_max_smem.find(func);
    a->maxDynamicSharedSizeBytes = it == g_func_max_smem.end() ? (int)kSmemDefault : it->second;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void*, int block, size_t smem, unsigned int) {
    if (!n || block <= 0 || block > 1024) return set_error(cudaErrorInvalidValue);
    int by_threads = 2048 / block;
    int by_smem = smem ? (int)(233472 / (smem + 1024)) : 32;
    *n = by_threads < by_smem ? by_threads : by_smem;
    if (*n > 32) *n = 32;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void* f, int block, size_t smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, block, smem, 0);
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

static const char* error_name(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    default: return "cudaErrorUnknown";
    }
}
const char* cudaGetErrorName(cudaError_t e) { return error_name(e); }
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    default: return "unknown error";
    }
}

}  // extern "C"
