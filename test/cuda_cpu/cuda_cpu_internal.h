// cuda_cpu_internal.h: what the runtime's own files share (cuda_cpu.cpp: fibers, scheduler, memory;
// check_cpu.cpp: the checks of instrumented programs; intrinsics_cpu.cpp; cublaslt_cpu.cpp and
// nccl_cpu.cpp for device-memory access). Not for programs: they see only cuda_cpu.h.
#ifndef CUDA_CPU_INTERNAL_H
#define CUDA_CPU_INTERNAL_H

#include "cuda_cpu.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

// ---- fibers, launches, workers ----
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
    uint32_t wsync;     // warp operations this thread took part in, this block (race detector)
};

// One schedule: the order in which a block's warps, a warp's lanes and a launch's blocks run.
enum { SCHED_FORWARD, SCHED_REVERSE, SCHED_SHUFFLE };
struct Schedule {
    int kind;
    uint64_t seed;
    std::string name;
};

struct Launch {
    const char* name;
    const void* key;
    dim3 grid, block;
    size_t smem;
    int smem_attr;          // cudaFuncSetAttribute's MaxDynamicSharedMemorySize, -1 if never set
    unsigned nthreads;
    uint64_t nblocks;
    cuda_cpu_body_fn fn;
    void* arg;
    uintptr_t params_lo;    // the launch's arguments (a tuple on the launching thread's stack)
    size_t params_size;
    const Schedule* sched;
    uint64_t block_stride, block_offset;  // the order blocks are taken in: (offset + i * stride) % nblocks
    uint32_t run_base;      // first block instance of this run (race detector)
    std::atomic<uint64_t> next;
};

// A static __shared__ variable of the running block (cu2cpu.pl rewrites function-scope __shared__
// declarations into cuda_cpu_shared calls; the first thread to reach one places it in the arena).
struct SharedVar {
    const void* site;
    const char* name;
    size_t off, size;
};

// A write that met an unordered earlier write of another thread: whether it is a race depends on
// whether it changed the bytes (many threads storing one value is benign), which is known once the
// store is done: at the thread's next access or wait.
struct PendingWrite {
    bool on;
    bool device;
    uintptr_t a, pc;
    size_t size;
    unsigned char before[16];  // the earlier write's bytes
    unsigned char prior[16];   // its record (check_cpu.cpp's Rec)
};

struct Worker {
    jmp_buf sched;
    std::vector<Fiber*> fibers;
    Fiber* cur;
    // Shared memory: [static variables | ... | dynamic shared memory][guard page]. The dynamic part
    // ends at the guard page, so reading past what the launch asked for faults.
    char* arena;
    size_t arena_size;       // without the guard page
    char* dyn;               // this block's dynamic shared memory
    size_t static_used;      // arena bytes the static variables take (with redzones)
    size_t static_gpu;       // what a GPU would count for them (alignment, no redzones)
    std::vector<SharedVar> statics;
    const Launch* launch;
    unsigned n, ndone;
    unsigned nwarps;
    unsigned warp_order[32], lane_order[32];
    uint64_t block_linear;
    uint32_t blk;            // block instance: unique over the process (race detector)
    uint32_t epoch;          // barrier intervals so far in this block
    const void* sched_stack_bottom;  // for ASan's fiber annotations
    size_t sched_stack_size;
    void* asan_fake;
    stack_t altstack;
    pthread_t thread;
    uintptr_t tls_lo, tls_hi;        // this OS thread's static TLS (the built-in variables)
    std::atomic<uint64_t> progress;  // fiber switches, for the watchdog
    std::atomic<const Launch*> active;
    std::vector<uintptr_t> fatomics;  // float atomic targets of this run (schedule comparison)
    // race detector, per block: [warp][lane][other lane] = other lane's wsync at their last joint
    // warp operation (a vector clock restricted to one warp)
    std::vector<uint32_t> wvec;
    // shadow of the arena (check mode): state per byte and the last write/read records
    uint8_t* sm_state;
    void* sm_wrec;
    void* sm_rrec;
    // the arena ranges marked addressable for the running block (reset at the next block)
    std::vector<std::pair<size_t, size_t>> sm_marked;
    PendingWrite pending;
};

extern __thread Worker* tw;

// Non-zero while the runtime's own code runs on this OS thread. Inline library functions (std::string,
// std::vector) exist once in a program, so runtime code may run an instrumented copy that a checked
// .cu instantiated: the checks ignore accesses made under this. Set it only around code that does not
// switch fibers.
extern __thread int t_runtime;
struct RuntimeScope {
    RuntimeScope() { t_runtime++; }
    ~RuntimeScope() { t_runtime--; }
};
extern size_t g_stack_size;

// ---- device memory: one reserved region, every allocation page-aligned and followed by a guard
// page; a page table maps a page to its allocation ----
enum AllocKind { A_DEVICE, A_HOST, A_MANAGED };
struct DevAlloc {
    uintptr_t start;
    size_t size;
    AllocKind kind;
    bool freed;
    char* map_lo;        // read-write pages; the guard page follows
    size_t map_len;
    uint8_t* state;      // check mode: per byte 1 = not written yet, 2 = written
    void* wrec;          // check mode: race detector records
    void* rrec;
    size_t shadow_len;   // bytes mapped for each record array
};
extern uintptr_t g_dev_lo;
extern size_t g_dev_span;
DevAlloc* dev_lookup(uintptr_t a);        // the allocation owning a's page (live or freed), or null
void describe_device_address(uintptr_t a, char* buf, size_t n);

// Device memory is touched by runtime code (memcpy, cuBLASLt, NCCL) and by kernels only inside one
// of these; under CUDA_CPU_PROTECT the device allocations are inaccessible to the host otherwise, so
// a host dereference of a device pointer faults. Takes the launch lock (one at a time). The
// outermost one first completes every pending cudaMemcpyAsync of pinned memory (so device work runs
// in the order it was issued); DeviceAccess(false) leaves them pending.
struct DeviceAccess {
    DeviceAccess();
    explicit DeviceAccess(bool complete_pending_copies);
    ~DeviceAccess();
};
// Runtime code that wrote n device bytes at p (memcpy, memset, cuBLASLt, NCCL): they count as
// initialised for the checks. copy_state: the state of n bytes at src travels to dst (device to device).
void device_written(const void* p, size_t n);
void device_copied_state(void* dst, const void* src, size_t n);
// Runtime code (cuBLASLt, NCCL) about to access [p, p+n): aborts with `api` and `what` named unless the
// range lies inside one live device allocation.
void device_range_or_die(const char* api, const char* what, const void* p, size_t n);

// ---- modes (runtime_init) ----
extern bool g_instrumented;  // an instrumented TU called __tsan_init: the checks can run
extern bool g_check;         // races, bounds, initialisation, host pointers (instrumented programs)
extern bool g_check_run;     // ... in the schedule running now: the first of a launch's schedules only
extern bool g_protect;       // device allocations inaccessible to the host outside the runtime
extern int g_strict_exit;    // 0: exited threads count as arrived at __syncthreads; 1 warn; 2 abort
extern std::vector<Schedule> g_schedules;
void runtime_init_once();

// ---- reports ----
[[noreturn]] void die_in_kernel(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string source_of(uintptr_t pc);       // "file:line" of a code address, or ""
std::string thread_name(const Launch* L, unsigned linear);  // "(x,y,z)"
std::string block_name(const Launch* L, uint64_t linear);   // "(x,y,z)"
uint64_t run_block_of(const Launch* L, uint32_t blk);       // block linear index of a block instance

// ---- the checker (check_cpu.cpp) ----
void check_block_start(Worker* w);
void check_shared_var(Worker* w, size_t off, size_t size);
void check_warp_released(Worker* w, unsigned base, unsigned mask);
void check_pending_write(Worker* w);  // the running thread is about to wait or exit
void check_alloc(DevAlloc* a);
void check_free(DevAlloc* a);
void check_run_start(const Launch* L);
// explicit checks for runtime code running on behalf of a CUDA thread (WMMA loads and stores)
void check_lane_range(const void* p, size_t n, bool write, uintptr_t pc);

// ---- fast conversions (intrinsics_cpu.cpp): the bits CUDA's conversions give, NaN -> 0x7fff ----
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif  // CUDA_CPU_INTERNAL_H
