// cuda_cpu.cpp: runs kernels on the CPU and implements the CUDA runtime API subset the trainer uses.
// Each CUDA thread is a fiber with its own stack, switched with _setjmp/_longjmp (no signal-mask
// system call, unlike swapcontext) and reused from block to block. Worker OS threads take blocks
// from an atomic counter; inside a block a round-robin scheduler runs the fibers until each one
// waits at a barrier or exits, then releases the barrier - or, if it cannot ever be released,
// aborts with the kernel's name instead of hanging.
#include "cuda_cpu.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <pthread.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
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

void cuda_cpu_fail(const char* fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda_cpu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static size_t env_size(const char* name, size_t dflt) {
    const char* s = getenv(name);
    if (!s || !*s) return dflt;
    char* end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == 0) cuda_cpu_fail("%s=%s: expected a positive integer", name, s);
    return (size_t)v;
}

// ============================================================================================
// Fibers and the block scheduler
// ============================================================================================

enum { F_RUN, F_BLOCK, F_WARP, F_DONE };

struct Fiber {
    jmp_buf ctx;
    char* map;          // mapping: guard page, then the stack
    size_t map_size;
    char* stack;        // usable stack (above the guard page)
    size_t stack_size;
    uint3 tid;
    unsigned linear;
    int state;
    const char* name;   // the barrier or intrinsic it waits at
    int op;             // warp op or block op
    unsigned mask;
    uint64_t in, out;
    int src;
    unsigned group;
    int pred, bout;
    void* asan_fake;
};

struct Launch {
    const char* name;
    dim3 grid, block;
    size_t smem;
    unsigned nthreads;
    uint64_t nblocks;
    cuda_cpu_body_fn fn;
    void* arg;
    std::atomic<uint64_t> next;
};

struct Worker {
    jmp_buf sched;
    std::vector<Fiber*> fibers;
    Fiber* cur;
    char* smem;
    size_t smem_cap;
    const Launch* launch;
    unsigned n, ndone;
    const void* sched_stack_bottom;  // for ASan's fiber annotations
    size_t sched_stack_size;
    void* asan_fake;
    stack_t altstack;
};

static __thread Worker* tw;
static size_t g_stack_size;  // bytes per fiber

static const size_t kSmemOptin = 232448;      // H100: 227 KiB of dynamic shared memory per block
static const size_t kSmemDefault = 48 * 1024;

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
        f->state = F_DONE;
        w->ndone++;
        fiber_yield(w, f);
    }
}

static Fiber* fiber_create(Worker* w) {
    Fiber* f = new Fiber();
    long page = sysconf(_SC_PAGESIZE);
    f->stack_size = g_stack_size;
    f->map_size = f->stack_size + (size_t)page;
    f->map = (char*)mmap(nullptr, f->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (f->map == MAP_FAILED) cuda_cpu_fail("mmap of a %zu-byte fiber stack failed: %s", f->map_size, strerror(errno));
    if (mprotect(f->map, (size_t)page, PROT_NONE) != 0) cuda_cpu_fail("mprotect of a stack guard page failed");
    f->stack = f->map + page;
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

// A fiber overflowing its stack hits the guard page: say so instead of a bare segfault.
static void segv_handler(int sig, siginfo_t* si, void*) {
    Worker* w = tw;
    if (w) {
        for (Fiber* f : w->fibers) {
            char* a = (char*)si->si_addr;
            if (a >= f->map && a < f->stack) {
                char msg[256];
                int len = snprintf(msg, sizeof(msg),
                    "cuda_cpu: kernel '%s': a thread overflowed its %zu KiB stack; raise CUDA_CPU_STACK_KB\n",
                    w->launch ? w->launch->name : "?", g_stack_size / 1024);
                if (write(2, msg, (size_t)len) < 0) {}
                abort();
            }
        }
    }
    signal(sig, SIG_DFL);  // not ours: let the fault happen again with the default action
}

static Worker* worker_get() {
    if (tw) return tw;
    Worker* w = new Worker();
    w->smem_cap = kSmemOptin;
    if (posix_memalign((void**)&w->smem, 1024, w->smem_cap) != 0) cuda_cpu_fail("out of memory for shared memory");
#if !CUDA_CPU_ASAN
    w->altstack.ss_size = 64 * 1024;
    w->altstack.ss_sp = malloc(w->altstack.ss_size);
    w->altstack.ss_flags = 0;
    sigaltstack(&w->altstack, nullptr);
#endif
    tw = w;
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

[[noreturn]] static void die_divergent(Worker* w, const char* what) {
    const Launch* L = w->launch;
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
    cuda_cpu_fail("kernel '%s' block (%u,%u,%u): %s%s", L->name, blockIdx.x, blockIdx.y, blockIdx.z, what, msg.c_str());
}

// Releases every group of lanes in warp [base, end) that all wait at the same warp operation.
static bool release_warp(Worker* w, unsigned base, unsigned end) {
    unsigned width = end - base;
    unsigned exist = width == 32 ? 0xffffffffu : ((1u << width) - 1u);
    bool released = false;
    Fiber** F = w->fibers.data() + base;
    for (unsigned lane = 0; lane < width; lane++) {
        Fiber* f = F[lane];
        if (f->state != F_WARP) continue;
        unsigned m = f->mask & exist;
        if (!(m & (1u << lane))) {
            char what[200];
            snprintf(what, sizeof(what), "lane %u of warp %u calls %s with mask 0x%08x, which leaves it out",
                     lane, base / 32, f->name, f->mask);
            die_divergent(w, what);
        }
        bool ready = true;
        for (unsigned l = 0; l < width && ready; l++) {
            if (!(m & (1u << l))) continue;
            Fiber* g = F[l];
            if (g->state != F_WARP || (g->mask & exist) != m) ready = false;
            else if (g->op != f->op) {
                char what[200];
                snprintf(what, sizeof(what), "lanes of warp %u meet at different warp operations (%s, %s)",
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
                g->out = (s < 32 && ((m >> s) & 1u)) ? F[s]->in : ~0ull;
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
        released = true;
    }
    return released;
}

static void release_block(Worker* w) {
    unsigned nblock = 0, nwarp = 0;
    for (unsigned i = 0; i < w->n; i++) {
        int s = w->fibers[i]->state;
        nblock += s == F_BLOCK;
        nwarp += s == F_WARP;
    }
    if (nblock == w->n) {
        int op = w->fibers[0]->op, count = 0, all = 1, any = 0;
        for (unsigned i = 0; i < w->n; i++) {
            Fiber* f = w->fibers[i];
            if (f->op != op) die_divergent(w, "threads meet at different block barriers: ");
            count += f->pred; all &= f->pred; any |= f->pred;
        }
        int r = op == CUDA_CPU_BLOCK_COUNT ? count : op == CUDA_CPU_BLOCK_AND ? all : op == CUDA_CPU_BLOCK_OR ? any : 0;
        for (unsigned i = 0; i < w->n; i++) { w->fibers[i]->bout = r; w->fibers[i]->state = F_RUN; }
        return;
    }
    if (nwarp > 0) die_divergent(w, "a warp operation waits for lanes that will never reach it: ");
    die_divergent(w, "a block barrier is reached by only part of the block (the others exited): ");
}

static void run_block(Worker* w, const Launch* L, uint64_t b) {
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
    }
    // Shared memory is not initialised on a GPU either: fill it with NaNs so reading it early shows.
    if (L->smem) memset(w->smem, 0xff, L->smem);
    w->n = n;
    w->ndone = 0;
    for (;;) {
        for (unsigned base = 0; base < n; base += 32) {
            unsigned end = base + 32 < n ? base + 32 : n;
            do {
                for (unsigned i = base; i < end; i++)
                    if (w->fibers[i]->state == F_RUN) switch_to(w, w->fibers[i]);
            } while (release_warp(w, base, end));
        }
        if (w->ndone == n) break;
        release_block(w);
    }
}

static Worker* current_thread_worker(const char* what) {
    Worker* w = tw;
    if (!w || !w->cur) cuda_cpu_fail("%s called outside a kernel", what);
    return w;
}

uint64_t cuda_cpu_warp(int op, const char* name, unsigned mask, uint64_t value, int src_lane, unsigned* group) {
    Worker* w = current_thread_worker(name);
    Fiber* f = w->cur;
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
    Fiber* f = w->cur;
    f->state = F_BLOCK;
    f->op = op;
    f->name = name;
    f->pred = pred;
    fiber_yield(w, f);
    return f->bout;
}

void* cuda_cpu_dynamic_smem(void) {
    Worker* w = current_thread_worker("extern __shared__ (dynamic shared memory)");
    return w->smem;
}

unsigned cuda_cpu_live_lanes(void) {
    Worker* w = current_thread_worker("__activemask");
    unsigned base = w->cur->linear & ~31u, m = 0;
    for (unsigned l = 0; l < 32 && base + l < w->n; l++)
        if (w->fibers[base + l]->state != F_DONE) m |= 1u << l;
    return m;
}

// ============================================================================================
// Worker pool and kernel launch
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

static void run_blocks(const Launch* L) {
    Worker* w = worker_get();
    w->launch = L;
    Launch* ml = const_cast<Launch*>(L);
    for (;;) {
        uint64_t b = ml->next.fetch_add(1, std::memory_order_relaxed);
        if (b >= L->nblocks) break;
        run_block(w, L, b);
    }
    w->launch = nullptr;
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

// A forked child has only the forking thread: give it fresh helpers (and unlocked mutexes).
static void pool_after_fork_child() {
    unsigned n = g_pool->nhelpers;
    g_pool = new Pool();
    g_pool->nhelpers = n;
    for (unsigned i = 0; i < n; i++) std::thread(helper_main).detach();
}

static void runtime_init() {
    g_stack_size = env_size("CUDA_CPU_STACK_KB", CUDA_CPU_ASAN ? 512 : 128) * 1024;
    size_t nthreads = env_size("CUDA_CPU_THREADS", std::thread::hardware_concurrency() ? std::thread::hardware_concurrency() : 1);
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
#endif
}

// ---- per-host-thread last error ----
static __thread cudaError_t t_last_error = cudaSuccess;
static cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) t_last_error = e;
    return e;
}

// Dynamic shared memory limits per kernel, as cudaFuncSetAttribute sets them.
static std::mutex g_func_mu;
static std::map<const void*, int> g_func_max_smem;
static int g_any_max_smem = 0;  // for launches whose kernel address cu2cpu.pl could not name

static bool valid_stream(cudaStream_t s);

void cuda_cpu_launch_erased(const char* name, const void* key, dim3 grid, dim3 block, size_t smem,
                            cudaStream_t stream, cuda_cpu_body_fn fn, void* arg) {
    std::call_once(g_init_once, runtime_init);
    if (tw && tw->cur) cuda_cpu_fail("kernel '%s' launched from inside a kernel (dynamic parallelism is not supported)", name);
    uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
    const char* bad = nullptr;
    cudaError_t err = cudaErrorInvalidConfiguration;
    char why[256];
    if (nthreads == 0 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
        snprintf(why, sizeof(why), "block (%u,%u,%u) is not 1..1024 threads within (1024,1024,64)", block.x, block.y, block.z);
        bad = why;
    } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        snprintf(why, sizeof(why), "grid (%u,%u,%u) is outside (1..2^31-1, 1..65535, 1..65535)", grid.x, grid.y, grid.z);
        bad = why;
    } else if (!valid_stream(stream)) {
        snprintf(why, sizeof(why), "the stream is not a live cudaStream_t");
        bad = why;
        err = cudaErrorInvalidResourceHandle;
    } else if (smem > kSmemDefault) {
        int allowed;
        {
            std::lock_guard<std::mutex> lk(g_func_mu);
            auto it = key ? g_func_max_smem.find(key) : g_func_max_smem.end();
            allowed = key ? (it == g_func_max_smem.end() ? (int)kSmemDefault : it->second) : g_any_max_smem;
        }
        if (smem > kSmemOptin || (size_t)allowed < smem) {
            snprintf(why, sizeof(why), "%zu bytes of dynamic shared memory need cudaFuncSetAttribute(%s, "
                     "cudaFuncAttributeMaxDynamicSharedMemorySize, >= %zu) (the limit is %zu)", smem, name, smem, kSmemOptin);
            bad = why;
            err = cudaErrorInvalidValue;
        }
    }
    if (bad) {
        // As on a GPU the launch does not run and the error waits for cudaGetLastError; say it too.
        fprintf(stderr, "cuda_cpu: launch of kernel '%s' refused: %s\n", name, bad);
        set_error(err);
        return;
    }
    Launch L;
    L.name = name;
    L.grid = grid;
    L.block = block;
    L.smem = smem;
    L.nthreads = (unsigned)nthreads;
    L.nblocks = (uint64_t)grid.x * grid.y * grid.z;
    L.fn = fn;
    L.arg = arg;
    L.next.store(0);
    // One launch at a time: host threads that launch concurrently take turns, as on one stream.
    static std::mutex launch_mu;
    std::lock_guard<std::mutex> launch_lock(launch_mu);
    blockDim = block;
    gridDim = grid;
    unsigned helpers = g_pool->nhelpers;
    if ((uint64_t)helpers > L.nblocks - 1) helpers = (unsigned)(L.nblocks - 1);
    if (helpers > 0) {
        std::lock_guard<std::mutex> lk(g_pool->mu);
        g_pool->launch = &L;
        g_pool->busy = g_pool->nhelpers;
        g_pool->generation++;
        g_pool->cv_start.notify_all();
    }
    run_blocks(&L);
    if (helpers > 0) {
        std::unique_lock<std::mutex> lk(g_pool->mu);
        g_pool->cv_done.wait(lk, [] { return g_pool->busy == 0; });
    }
}

// ============================================================================================
// CUDA's fast-math intrinsics: glibc's math.h declares these names but libm does not export them.
// ============================================================================================
extern "C" {
float __expf(float x) noexcept { return expf(x); }
float __exp2f(float x) noexcept { return exp2f(x); }
float __exp10f(float x) noexcept { return exp10f(x); }
float __logf(float x) noexcept { return logf(x); }
float __log2f(float x) noexcept { return log2f(x); }
float __log10f(float x) noexcept { return log10f(x); }
float __sinf(float x) noexcept { return sinf(x); }
float __cosf(float x) noexcept { return cosf(x); }
float __tanf(float x) noexcept { return tanf(x); }
float __tanhf(float x) noexcept { return tanhf(x); }
float __powf(float x, float y) noexcept { return powf(x, y); }
void __sincosf(float x, float* s, float* c) noexcept { sincosf(x, s, c); }
}

// ============================================================================================
// Runtime API: memory
// ============================================================================================

enum AllocKind { A_DEVICE, A_HOST, A_MANAGED };
struct Alloc { size_t size; AllocKind kind; };
static std::mutex g_mem_mu;
static std::map<uintptr_t, Alloc> g_allocs;
static size_t g_device_bytes;
static const size_t kDeviceMemory = 80ull << 30;

static cudaError_t do_alloc(void** p, size_t size, AllocKind kind, const char* api) {
    if (!p) return set_error(cudaErrorInvalidValue);
    *p = nullptr;
    if (size == 0) return cudaSuccess;
    std::lock_guard<std::mutex> lk(g_mem_mu);
    if (kind != A_HOST && g_device_bytes + size > kDeviceMemory) return set_error(cudaErrorMemoryAllocation);
    void* q = nullptr;
    if (posix_memalign(&q, 256, size) != 0) return set_error(cudaErrorMemoryAllocation);
    // Memory nothing wrote reads as NaN in fp32, fp16 and bf16 (all bytes 0xFF), as a reminder
    // that cudaMalloc does not zero.
    if (kind != A_HOST) memset(q, 0xff, size);
    g_allocs[(uintptr_t)q] = Alloc{size, kind};
    if (kind != A_HOST) g_device_bytes += size;
    *p = q;
    (void)api;
    return cudaSuccess;
}

static cudaError_t do_free(void* p, bool host, const char* api) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> lk(g_mem_mu);
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end() || (it->second.kind == A_HOST) != host) {
        fprintf(stderr, "cuda_cpu: %s(%p): not a live allocation from %s\n", api, p, host ? "cudaMallocHost" : "cudaMalloc");
        return set_error(cudaErrorInvalidValue);
    }
    if (it->second.kind != A_HOST) g_device_bytes -= it->second.size;
    g_allocs.erase(it);
    free(p);
    return cudaSuccess;
}

// Is [p, p+n) inside one live allocation (of any kind when kind_any, else device/managed)?
static bool in_allocation(const void* p, size_t n, bool device_only) {
    std::lock_guard<std::mutex> lk(g_mem_mu);
    auto it = g_allocs.upper_bound((uintptr_t)p);
    if (it == g_allocs.begin()) return false;
    --it;
    if (device_only && it->second.kind == A_HOST) return false;
    uintptr_t a = (uintptr_t)p;
    return a >= it->first && a + n <= it->first + it->second.size;
}

static cudaError_t check_range(const char* api, const char* which, const void* p, size_t n) {
    if (n == 0 || in_allocation(p, n, true)) return cudaSuccess;
    fprintf(stderr, "cuda_cpu: %s: %s [%p, +%zu bytes) is not inside a live device allocation\n", api, which, p, n);
    return set_error(cudaErrorInvalidValue);
}

static cudaError_t do_memcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, const char* api) {
    cudaError_t e = cudaSuccess;
    switch (kind) {
    case cudaMemcpyHostToDevice: e = check_range(api, "destination", dst, n); break;
    case cudaMemcpyDeviceToHost: e = check_range(api, "source", src, n); break;
    case cudaMemcpyDeviceToDevice:
        e = check_range(api, "destination", dst, n);
        if (e == cudaSuccess) e = check_range(api, "source", src, n);
        break;
    case cudaMemcpyHostToHost: case cudaMemcpyDefault: break;
    default: return set_error(cudaErrorInvalidMemcpyDirection);
    }
    if (e != cudaSuccess) return e;
    if (n) memmove(dst, src, n);
    return cudaSuccess;
}

extern "C" {

cudaError_t cudaMalloc(void** p, size_t size) { return do_alloc(p, size, A_DEVICE, "cudaMalloc"); }
cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int) { return do_alloc(p, size, A_MANAGED, "cudaMallocManaged"); }
cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t) { return do_alloc(p, size, A_DEVICE, "cudaMallocAsync"); }
cudaError_t cudaMallocHost(void** p, size_t size) { return do_alloc(p, size, A_HOST, "cudaMallocHost"); }
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) { return do_alloc(p, size, A_HOST, "cudaHostAlloc"); }
cudaError_t cudaFree(void* p) { return do_free(p, false, "cudaFree"); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return do_free(p, false, "cudaFreeAsync"); }
cudaError_t cudaFreeHost(void* p) { return do_free(p, true, "cudaFreeHost"); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    return do_memcpy(dst, src, n, kind, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    if (!valid_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
    return do_memcpy(dst, src, n, kind, "cudaMemcpyAsync");
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, cudaMemcpyKind kind) {
    for (size_t r = 0; r < height; r++) {
        cudaError_t e = do_memcpy((char*)dst + r * dpitch, (const char*)src + r * spitch, width, kind, "cudaMemcpy2D");
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t n) {
    cudaError_t e = check_range("cudaMemset", "destination", p, n);
    if (e == cudaSuccess && n) memset(p, value, n);
    return e;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
    if (!valid_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
    return cudaMemset(p, value, n);
}
cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind) {
    memcpy((char*)symbol + offset, src, count);
    return cudaSuccess;
}
cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind) {
    memcpy(dst, (const char*)symbol + offset, count);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    std::lock_guard<std::mutex> lk(g_mem_mu);
    if (free_bytes) *free_bytes = kDeviceMemory - g_device_bytes;
    if (total) *total = kDeviceMemory;
    return cudaSuccess;
}
cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMemAdvise(const void*, size_t, cudaMemoryAdvise, cudaMemLocation) { return cudaSuccess; }

// ============================================================================================
// Runtime API: streams, events, device, errors
// ============================================================================================

}  // extern "C"

static const uint32_t kStreamMagic = 0x57524541u, kEventMagic = 0x45564e54u;
struct CUstream_st { uint32_t magic; };
struct CUevent_st { uint32_t magic; unsigned flags; bool recorded; double ms; };

static bool valid_stream(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || s->magic == kStreamMagic;
}
static bool valid_event(cudaEvent_t e) { return e && e->magic == kEventMagic; }
static double now_ms() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int g_device = 0;
static const int kDeviceCount = 8;  // like one 8-GPU node, so each local MPI rank gets its own device

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t* s) {
    if (!s) return set_error(cudaErrorInvalidValue);
    *s = new CUstream_st{kStreamMagic};
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int, int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || s->magic != kStreamMagic) return set_error(cudaErrorInvalidResourceHandle);
    s->magic = 0;
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    return valid_stream(s) ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
    return valid_stream(s) && valid_event(e) ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
    if (!e) return set_error(cudaErrorInvalidValue);
    *e = new CUevent_st{kEventMagic, 0, false, 0.0};
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    cudaError_t r = cudaEventCreate(e);
    if (r == cudaSuccess) (*e)->flags = flags;
    return r;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!valid_event(e)) return set_error(cudaErrorInvalidResourceHandle);
    e->magic = 0;
    delete e;
    return cudaSuccess;
}
// Work is done by the time a call returns, so an event completes the moment it is recorded.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!valid_event(e) || !valid_stream(s)) return set_error(cudaErrorInvalidResourceHandle);
    e->recorded = true;
    e->ms = now_ms();
    return cudaSuccess;
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int) { return cudaEventRecord(e, s); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    return valid_event(e) ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return set_error(cudaErrorInvalidValue);
    if (!valid_event(start) || !valid_event(end)) return set_error(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return set_error(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
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
    snprintf(p->name, sizeof(p->name), "NVIDIA H100 80GB HBM3 (cuda_cpu emulation)");
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
    p->major = 9;
    p->minor = 0;
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
