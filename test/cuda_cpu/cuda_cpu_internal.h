// cuda_cpu_internal.h: what the runtime's own files share (cuda_cpu.cpp: fibers, scheduler, memory;
// check_cpu.cpp: the checks of instrumented programs; intrinsics_cpu.cpp; cublaslt_cpu.cpp and
// nccl_cpu.cpp for device-memory access). Not for programs: they see only cuda_cpu.h.
#ifndef CUDA_CPU_INTERNAL_H
#define CUDA_CPU_INTERNAL_H

#define CUDA_CPU_RUNTIME_SOURCE 1  // cuda_cpu.h: not the counting math macros (the runtime's own math is not a kernel's)
#include "cuda_cpu.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
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
    uint64_t natomics;  // float atomics this thread made, this block (their identity for reordering)
    uint64_t clock_reads;  // clock() and clock64() calls this thread made, this block (its clock)
    uintptr_t site;     // the block barrier or warp operation it waits at (its call's return address)
    uint32_t fence_epoch;  // the block's barrier interval of its last __threadfence (0: none)
    uint64_t c_ins[CUDA_CPU_INS_N];  // CUDA_CPU_COUNT: this thread's instructions of each class, this block
};

// A float atomic addition a launch made (cuda_cpu.cpp: reordered once the launch has run).
struct FloatAtomic {
    uintptr_t addr;
    int type;
    uint64_t operand, old;  // bits
    uint64_t seq;           // the order it happened in
    uint64_t key;           // which thread's which addition (the same in every run of the launch)
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
    uint64_t op;            // its op in the device's work queue (streams_cpu.cpp)
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
    bool order_dependent;   // cuda_cpu_order_dependent_launch() before it: one schedule only
    std::atomic<bool> resources_checked;  // its registers were checked against the block size
    void (*free_arg)(void*);  // frees arg (the launch's copy of its arguments) once it is retired
    unsigned sched_index;   // which of g_schedules runs now (the float atomics' order depends on it)
    std::set<uintptr_t> fa_keep;  // float atomic targets also accessed plainly: left as they happened
    std::string count_symbol;     // CUDA_CPU_COUNT: the kernel's symbol, ptxas's registers and smem
    int count_regs = -1, count_ptxas_smem = -1;
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

// A plain load of global or shared memory whose race check waits for the thread's next access
// (check_cpu.cpp: a compare-and-swap of the same bytes next makes it the CAS loop's first guess).
struct PendingRead {
    bool on;
    bool device;
    uintptr_t a, pc;
    size_t size;
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
    // The race detector's view from other OS threads (wait_for_store): the block instance running
    // here (0 between blocks) and a count of its checked global accesses. An access's check runs
    // just before its store, so a count past the one seen means that store has landed.
    std::atomic<uint32_t> running_blk;
    std::atomic<uint64_t> accesses;
    std::atomic<const Launch*> active;
    std::vector<uintptr_t> fatomics;  // float atomic targets of this run (schedule comparison)
    std::vector<FloatAtomic> flog;    // float atomic additions of this run
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
    PendingRead pread;
    // CUDA_CPU_COUNT: this launch's global bytes read and written, the 32-byte sectors first touched
    // by it, shared memory bytes, tensor-core FLOPs of mma.sync and WMMA, and of wgmma
    uint64_t c_gread, c_gwrite, c_gread_sectors, c_gwrite_sectors, c_sread, c_swrite, c_mma_flops, c_wgmma_flops;
    uint64_t c_ins[CUDA_CPU_INS_N];  // warp instructions of each class: per warp the most any lane ran
    size_t c_static;  // static shared memory of its blocks
    // race detector: what this block acquired of other blocks' writes through fenced atomics
    // (check_cpu.cpp: other block -> (their barrier interval and thread released, ours acquired in))
    std::unordered_map<uint32_t, std::vector<std::array<uint32_t, 4>>> acquired;
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
enum AllocKind { A_DEVICE, A_HOST, A_MANAGED, A_SYMBOLS };  // A_SYMBOLS: the __device__ variables
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
    uint32_t* hbw;       // check mode: per byte, the op that last wrote it (happens-before; top bit: atomic)
    uint32_t* hbr;       // check mode: per byte, two ops that read it since (unordered with each other)
    size_t shadow_len;   // bytes mapped for each record array
};
extern uintptr_t g_dev_lo;
extern size_t g_dev_span;
DevAlloc* dev_lookup(uintptr_t a);        // the allocation owning a's page (live or freed), or null
// The program's __device__ and __constant__ variables as one pseudo allocation (null without any), and
// the read-only (const) ones' range.
extern DevAlloc* g_symbols;
extern uintptr_t g_symbols_const_lo, g_symbols_const_hi;
// dev_lookup, or the __device__ variables when a lies among them.
inline DevAlloc* find_alloc(uintptr_t a) {
    DevAlloc* S = g_symbols;
    if (S && a - S->start < S->size) return S;
    return dev_lookup(a);
}
// The executable's symbol at address a ("name" or "name+off"; "" when none), by its ELF symbol table.
std::string symbol_at(uintptr_t a, bool functions);
void describe_device_address(uintptr_t a, char* buf, size_t n);

// Device memory is touched by runtime code (memcpy, cuBLASLt, NCCL) and by kernels only inside one
// of these; under CUDA_CPU_PROTECT the device allocations are inaccessible to the host otherwise, so
// a host dereference of a device pointer faults. Pinned memory guarded for queued copies is open
// inside one too. Takes the device lock (one at a time).
struct DeviceAccess {
    DeviceAccess();
    ~DeviceAccess();
};
// Runtime code that wrote n device bytes at p (memcpy, memset, cuBLASLt, NCCL): they count as
// initialised for the checks. copy_state: the state of n bytes at src travels to dst (device to device).
void device_written(const void* p, size_t n);
void device_copied_state(void* dst, const void* src, size_t n);
// Runtime code (cuBLASLt, NCCL) about to access [p, p+n): aborts with `api` and `what` named unless the
// range lies inside one live device allocation.
void device_range_or_die(const char* api, const char* what, const void* p, size_t n);

// ---- the device's work queue: streams, events and the order work runs in (streams_cpu.cpp) ----
// Every piece of device work (a launch, an async copy or memset, a cuBLASLt product, an NCCL
// collective, an event record) is an Op queued on its stream when the host issues it; it runs later,
// when the host synchronizes with it (or with work that waits for it), in an order the streams and
// events allow (README: "Streams and events").
//
// Clocks: an op's clock says, per stream index, how many of that stream's ops it is ordered after
// (index 0 is the host: how many host epochs; the host's own clock, per stream, how many ops it has
// synchronized with). Op a (stream s, position q) happens before op or host b iff b.clock[s] >= q.
enum { kHostStream = 0, kLegacyStream = 1, kPerThreadStream = 2 };
typedef std::vector<uint64_t> Clock;
inline uint64_t clock_at(const Clock& c, size_t i) { return i < c.size() ? c[i] : 0; }
void clock_join(Clock& into, const Clock& from);

// How an op runs this time: a batch of work that the streams leave unordered runs once per legal
// order of CUDA_CPU_STREAM_ORDERS; only the first run is checked (race detector, a launch's second
// schedule, the happens-before checks); NCCL talks to the other ranks only in the first and replays
// what it received in the others.
enum { NCCL_REAL, NCCL_RECORD, NCCL_REPLAY };
struct OpRun {
    bool first;
    int nccl;
};
struct Op;
typedef std::function<void(Op*, const OpRun&)> OpFn;
// An access a library op (copy, memset, cuBLASLt, NCCL) makes: the happens-before checker's input.
struct OpAccess {
    uintptr_t lo, hi;
    bool write;
};
// What an op may touch, which bounds the device memory its window snapshots (save_live): the
// allocations holding `ptrs` (each an address inside an allocation or one past its end) and, where
// `chase` (a kernel, which may load a pointer from memory and follow it, or name a __device__
// variable), the program's __device__ variables and every allocation an aligned 8-byte word of the
// reached memory points into, transitively. An op that says nothing (`all`) reaches every live
// allocation. Copies, memsets and NCCL reach what their access lists name.
struct OpReach {
    bool all = true;
    bool chase = false;
    std::vector<uintptr_t> ptrs;
};
struct Op {
    uint64_t id;             // issue order over the process, from 1
    int stream;              // stream index
    uint64_t seq;            // position in its stream, from 1
    Clock clock;             // what it is ordered after
    std::string what;        // "kernel 'k'", "cudaMemcpyAsync device to host (4096 bytes)", ...
    void* site[6];           // the issuing call's stack (innermost first), for messages
    int nsite;
    OpFn run;
    std::function<void()> release;   // frees what run holds, once the op is retired
    const void* comm;        // NCCL: its communicator (collectives of one run in issue order)
    std::vector<OpAccess> access;    // library ops: what they read and write
    OpReach reach;           // what it may touch (the snapshots of its window)
    // NCCL in a batch that runs more than once: the input it sent and the output it received
    std::vector<unsigned char> nccl_in, nccl_out;
    bool nccl_recorded;
    bool diverged;           // NCCL replay: its input differs from the first run's
};
// The op running now (kernels' and library code's accesses belong to it), or null on the host.
extern Op* g_cur_op;
// What is known of an op once issued (the op itself may already have run and be gone).
struct Issued {
    uint64_t id;
    int stream;
    uint64_t seq;
    Clock clock;
};
// Queues fn on stream s (already validated). `what` describes it in messages. `reach`: what it may
// touch; left as it is, the access list's ranges where there are any, else everything.
Issued op_issue(cudaStream_t s, std::string what, OpFn fn, std::vector<OpAccess> access = {},
                const void* comm = nullptr, std::function<void()> release = nullptr, OpReach reach = OpReach());
// The host waits for the op (and all it is ordered after), then is ordered after it.
void host_wait_op(const Issued& op);
// Runs every queued op (before an MPI call of the host, before NCCL's communicator goes away) without
// ordering the host after them.
void drain_all_pending();
// Happens-before: is the access of op (or host epoch) `a` ordered before the running op, or before the
// host when none runs?
bool hb_ordered(uint64_t a);
// The host waits for all the device's work (cudaDeviceSynchronize; cudaFree implies it).
void device_synchronize_host();
// Description of an op for messages: "kernel 'k' on stream 2 (issued at file:line <- file:line)".
std::string op_description(uint64_t id);
// The stream index of a cudaStream_t, or -1 when it is not a live stream.
int stream_index(cudaStream_t s);
bool stream_is_valid(cudaStream_t s);
// Work runs as soon as it is issued, in issue order (CUDA_CPU_ASYNC=0).
extern bool g_eager;

// ---- happens-before records (check_cpu.cpp; checked programs) ----
// An op (or the host, g_cur_op null) accesses [p, p+n): checked against the last writer and readers
// of each byte and recorded. `verb` and `pc` say what and where for the message.
void hb_access(uintptr_t p, size_t n, bool write, uintptr_t pc);
// What the op id of the host's accesses now is (a host epoch, as a pseudo op).
uint64_t hb_host_op();

// ---- launches (cuda_cpu.cpp) ----
// Runs a launch: every schedule and the checks when run.first, else one schedule.
void launch_run(Launch* L, Op* op, const OpRun& run);
// Device memory snapshots: a launch runs once per schedule from the same memory, and a batch once
// per order.
// A snapshot's bytes, their storage kept for the next snapshot when dropped: a fresh multi-megabyte
// buffer is fresh pages from the kernel, and faulting them in cost more than the copies (a -z 3
// trainer step under mpirun spent most of its time in page faults: 8.7 s a step, 1.0 s reusing them).
class SavedBytes {
public:
    SavedBytes() = default;
    SavedBytes(const char* p, size_t n);
    ~SavedBytes();
    SavedBytes(SavedBytes&& o) noexcept : v_(std::move(o.v_)) {}
    SavedBytes& operator=(SavedBytes&& o) noexcept;
    SavedBytes(const SavedBytes&) = delete;
    SavedBytes& operator=(const SavedBytes&) = delete;
    const char* data() const { return v_.data(); }
    size_t size() const { return v_.size(); }
    char operator[](size_t i) const { return v_[i]; }

private:
    std::vector<char> v_;
};
struct Saved {
    DevAlloc* a;
    SavedBytes bytes;
};
// The live allocations ops[0..n) may touch (their OpReach), in address order.
std::vector<DevAlloc*> reach_of(Op* const* ops, size_t n);
// A snapshot of the given allocations.
std::vector<Saved> save_live(const std::vector<DevAlloc*>& allocs);
void restore_live(const std::vector<Saved>& s);
// The first byte where the live memory differs from `first` outside the float atomics' targets, or 0.
uintptr_t first_difference(const std::vector<Saved>& first, const std::vector<uintptr_t>* fatomics);
// Plain copies inside the runtime (the range checks were done when the copy was issued).
void runtime_copy(void* dst, const void* src, size_t n);
// The live allocation holding all of [p, p+n) (any kind when any_kind, else device or managed).
DevAlloc* live_holding(const void* p, size_t n, bool any_kind);
// The live allocation (or the __device__ variables) holding address v or ending at it; null if none.
DevAlloc* alloc_of_pointer(uintptr_t v);
bool in_device_region(const void* p);
cudaError_t set_cuda_error(cudaError_t e);
// Pinned host memory a queued copy is to read or write, guarded until the host synchronizes with it.
const char* pinned_guard_at(uintptr_t a, char* buf, size_t len);  // the description, or null
void pinned_guards_open(bool open);
// The project's own source lines of a code address, innermost inlined call first (addr2line -i;
// not the runtime's files, not the system's).
std::vector<std::string> source_chain(uintptr_t pc);
// Is "file:line" in the runtime's own code?
bool runtime_source(const std::string& s);
uintptr_t exe_bias();

// ---- modes (runtime_init) ----
extern bool g_instrumented;  // an instrumented TU called __tsan_init: the checks can run
extern bool g_check;         // races, bounds, initialisation, host pointers (instrumented programs)
extern bool g_check_run;     // ... in the schedule running now: the first of a launch's schedules only
// CUDA_CPU_COUNT=PATH (an instrumented program): every op's work counted in its first run and written
// to PATH, a line an op (the kernel report, dev/kernel_report.sh).
extern FILE* g_count_file;
extern bool g_count_run;     // counting the launch running now
extern bool g_blas_skip;     // CUDA_CPU_BLAS=skip: cuBLASLt counts and writes zeros (the kernel report)
extern bool g_wgmma_fault;   // CUDA_CPU_FAULT=wgmma: wgmma reads B the wrong way (tests of code that must notice)
void count_global(Worker* w, uintptr_t a, size_t size, bool write);
void count_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
extern bool g_protect;       // device allocations inaccessible to the host outside the runtime
extern unsigned g_store_delay_us;  // CUDA_CPU_STORE_DELAY_US: a checked global store waits this long
                                   // after its check (a test hook: another OS thread then sees it
                                   // checked and not landed)
extern int g_strict_exit;    // 0: exited threads count as arrived at __syncthreads; 1 warn; 2 abort
extern std::vector<Schedule> g_schedules;
void runtime_init_once();

// ---- reports ----
[[noreturn]] void die_in_kernel(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// An alarm the program can run on after (a data race, a read of uninitialised memory, a misaligned
// access, work the streams leave unordered): by default it ends the program as die_in_kernel does;
// with CUDA_CPU_ALARMS=report it is counted, the program goes on, and at exit each distinct alarm (its
// class, kernel and source line) is printed once with its count. A (the address) and PC (the access)
// make the bytes of one access one alarm, not one per byte.
void kernel_alarm(const char* cls, uintptr_t a, uintptr_t pc, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
extern int g_alarms_report;  // CUDA_CPU_ALARMS=report
std::string source_of(uintptr_t pc);       // "file:line" of a code address, or ""
std::string thread_name(const Launch* L, unsigned linear);  // "(x,y,z)"
std::string block_name(const Launch* L, uint64_t linear);   // "(x,y,z)"
uint64_t run_block_of(const Launch* L, uint32_t blk);       // block linear index of a block instance

// A CUDA thread is about to exit (intrinsics_cpu.cpp): its warp must have no wgmma in flight.
void wgmma_thread_exit(Worker* w);

// ---- the checker (check_cpu.cpp) ----
void check_block_start(Worker* w);
void check_shared_var(Worker* w, size_t off, size_t size);
void check_warp_released(Worker* w, unsigned base, unsigned mask);
void check_pending_write(Worker* w);  // the running thread is about to wait or exit
void check_pending_read(Worker* w);   // the same, for a plain load not yet checked for races
// Waits until block instance BLK, if another OS thread runs it now, has made its next checked access
// or ended: its last store has then landed (cuda_cpu.cpp).
void wait_for_store(Worker* self, uint32_t blk);
void check_alloc(DevAlloc* a);
void check_fence(Worker* w);  // __threadfence in a checked run
void check_free(DevAlloc* a);
void check_run_start(const Launch* L);
// explicit checks for runtime code running on behalf of a CUDA thread (WMMA loads and stores, float
// atomics)
// (these check only: they never count, whatever CUDA_CPU_COUNT says)
void check_lane_range(const void* p, size_t n, bool write, uintptr_t pc);
void check_atomic_access(const void* p, size_t n, uintptr_t pc);
// CUDA_CPU_COUNT for runtime code moving [p, p+n) on behalf of the running CUDA thread (the warp
// primitives, float atomics), classified as plain accesses are: global (bytes and sectors) or shared.
// Called once per byte moved: a warp-collective primitive counts its tile once a warp, not per lane.
void count_range(const void* p, size_t n, bool write);
// CUDA_CPU_COUNT's instruction classes: n more of class cls for the running CUDA thread. A block's
// count of a class is, per warp, the most any of its lanes ran (a warp instruction issues once for its
// active lanes), summed over its warps.
inline void count_ins(int cls, unsigned n = 1) {
    Worker* w = tw;
    if (g_count_run && w && w->cur) w->cur->c_ins[cls] += n;
}
// Held across an atomic's check (the acquire/release bookkeeping of fenced atomics) and the atomic
// operation itself: otherwise two blocks on two workers could check in one order and operate in the
// other, and the block that sees the last count (a fenced last-block reduction) would not have
// acquired what the other released, a false race.
extern std::mutex g_atomic_op_mu;
// After a checked run: did a thread read or write [p, p+n) plainly after the launch's last atomic on it?
bool check_plain_access_after_atomics(const void* p, size_t n);

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
