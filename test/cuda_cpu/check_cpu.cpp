// check_cpu.cpp: the checks of an instrumented program (README: "Checks and schedules").
//
// A .cu built with CUDA_CPU_CHECK_FLAGS (-fsanitize=thread -fsanitize=alignment, linked without
// their runtimes) calls back here on every load and store, atomic operation and misaligned typed
// access; these callbacks are GCC's ThreadSanitizer and UBSan entry points, implemented by this
// runtime instead of libtsan/libubsan, so that the checks know CUDA's rules and can name the kernel,
// the block and the thread. Inside a kernel an access must fall in a live device allocation, in a
// shared variable or the launch's dynamic shared memory, or in the thread's own stack; it must not
// read bytes no one wrote, and it must not race: two accesses to a byte, one a write, not both
// atomic, by threads with no barrier (blocks: none at all within a launch) or, within a warp, no
// warp operation between them; of two such writes, only one that changes the bytes (threads storing
// one value is benign). Host code must not touch device memory.
//
// Shadow memory: per byte of each device allocation and of each worker's shared-memory arena, a
// state (0 not addressable, 1 not written, 2 written) and the last write and read records below.
#include "cuda_cpu_internal.h"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <unordered_map>

namespace {

// The last write, or the reads since it, of one byte. blk: the block instance (0: none); epoch: the
// barrier interval of the block; sync: the thread's count of warp operations (see Worker::wvec).
struct Rec {
    uint32_t blk;
    uint32_t pc;          // code offset of the access; for R_MLANE: the mask of the reading lanes
    uint32_t epoch_tid;   // epoch << 10 | thread (linear index in the block)
    uint32_t sync_flags;  // sync << 8 | flags
};
static_assert(sizeof(Rec) == 16, "Rec is 16 bytes");

// R_FIRST (a write record): atomic writes of several blocks, none ordered after another, reached the
// byte since its last plain write; the record is the newest, g_first holds the first (see race_byte).
enum { R_ATOMIC = 1, R_MLANE = 2, R_MWARP = 4, R_MBLOCK = 8, R_FIRST = 16 };
// ACC_NOCOUNT: a check made for runtime code (WMMA, ldmatrix, cp.async, float atomics), which counts
// its bytes itself once a warp (count_range), so CUDA_CPU_COUNT gives the same figures checked or not.
// ACC_CAS: the access is a compare-and-swap (it settles a pending plain read of the same bytes).
enum { ACC_WRITE = 1, ACC_ATOMIC = 2, ACC_NOCOUNT = 4, ACC_CAS = 8 };
enum { S_NONE = 0, S_UNINIT = 1, S_INIT = 2 };
const size_t kPage = 4096;

inline uint32_t rec_epoch(const Rec& r) { return r.epoch_tid >> 10; }
inline unsigned rec_tid(const Rec& r) { return r.epoch_tid & 1023u; }
inline uint32_t rec_sync(const Rec& r) { return r.sync_flags >> 8; }
inline unsigned rec_flags(const Rec& r) { return r.sync_flags & 255u; }

uintptr_t g_static_lo, g_static_hi;  // the executable's segments (globals, __device__/__constant__)
uintptr_t g_data_lo[4], g_data_hi[4];  // its writable ones (.data, .bss): host globals
int g_ndata;
uint32_t g_last_run_base;            // the first block instance of the last checked run
uintptr_t g_bias;

int find_exe(struct dl_phdr_info* info, size_t, void*) {
    g_bias = info->dlpi_addr;
    uintptr_t lo = ~(uintptr_t)0, hi = 0;
    g_ndata = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        lo = std::min<uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
        hi = std::max<uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        if ((ph.p_flags & PF_W) && g_ndata < 4) {
            g_data_lo[g_ndata] = info->dlpi_addr + ph.p_vaddr;
            g_data_hi[g_ndata++] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
        }
    }
    g_static_lo = lo;
    g_static_hi = hi;
    return 1;
}

// The first of several blocks' unordered atomic writes to a byte (by address), beside its write record,
// which keeps the newest: a plain read must be ordered after both. One record cannot hold them all, and
// the newest alone hid the race from the block that wrote last, as the last block of a reduction often
// does (the reads of a reduction whose blocks add into one buffer, then count themselves in with no
// __threadfence between, were caught only when another block's addition happened to land last).
std::mutex g_first_mu;
std::unordered_map<uintptr_t, Rec> g_first;

// Fenced atomics: each global address an atomic touched keeps what the threads that reached it after
// a __threadfence released: (their block instance, barrier interval, thread).
std::mutex g_release_mu;
std::unordered_map<uintptr_t, std::vector<std::array<uint32_t, 3>>> g_releases;

// What the access being checked is: who makes it, where the records of the memory are.
struct Ctx {
    Worker* w;
    const Launch* L;
    unsigned tid, warp, lane;
    uint32_t blk, epoch, sync;
    bool device;
    uintptr_t pc;
};

void* map_zero(size_t n) {
    void* p = mmap(nullptr, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) cuda_cpu_fail("out of memory for the checker's shadow (%zu bytes)", n);
    return p;
}

inline bool rec_valid(const Ctx& c, const Rec& r) {
    return c.device ? (r.blk != 0 && r.blk >= c.L->run_base) : r.blk == c.blk;
}

inline const uint32_t* vec_of(const Ctx& c) { return c.w->wvec.data() + (size_t)c.warp * 1024 + (size_t)c.lane * 32; }

// Another block's access (blk, tid, epoch): ordered before the current one only through what this
// block acquired with an atomic from that block's fenced atomic: the other block's accesses before the
// barrier interval of its fence (and the fencing thread's own in it), for accesses of this block after
// the interval of the acquire (and the acquiring thread's own).
inline bool acquired_before(const Ctx& c, uint32_t blk, unsigned tid, uint32_t epoch) {
    if (c.w->acquired.empty()) return false;
    auto it = c.w->acquired.find(blk);
    if (it == c.w->acquired.end()) return false;
    for (const std::array<uint32_t, 4>& q : it->second)
        if ((epoch < q[0] || (epoch == q[0] && tid == q[1])) && (c.epoch > q[2] || c.tid == q[3])) return true;
    return false;
}

// Did the single access (blk, tid, epoch, sync) happen before the current one?
inline bool ordered(const Ctx& c, uint32_t blk, unsigned tid, uint32_t epoch, uint32_t sync) {
    if (blk != c.blk) return acquired_before(c, blk, tid, epoch);  // another block of this launch
    if (epoch != c.epoch) return true;   // an earlier barrier interval of this block
    if (tid == c.tid) return true;
    if ((tid >> 5) != c.warp) return false;
    return vec_of(c)[tid & 31] > sync;   // a warp operation joined both threads since
}

inline bool write_ordered(const Ctx& c, const Rec& r) { return ordered(c, r.blk, rec_tid(r), rec_epoch(r), rec_sync(r)); }

inline bool reads_ordered(const Ctx& c, const Rec& r) {
    unsigned f = rec_flags(r);
    if (f & R_MBLOCK) return false;
    if (r.blk != c.blk) return false;
    if (rec_epoch(r) != c.epoch) return true;
    if (f & R_MWARP) return false;
    if (f & R_MLANE) {
        if ((rec_tid(r) >> 5) != c.warp) return false;
        const uint32_t* v = vec_of(c);
        uint32_t mask = r.pc & ~(1u << c.lane), s = rec_sync(r);
        for (unsigned l = 0; mask; l++, mask >>= 1)
            if ((mask & 1u) && v[l] <= s) return false;
        return true;
    }
    return ordered(c, r.blk, rec_tid(r), rec_epoch(r), rec_sync(r));
}

inline Rec me(const Ctx& c, unsigned flags) {
    return Rec{c.blk, (uint32_t)(c.pc - g_bias), (c.epoch << 10) | c.tid, ((c.sync & 0xffffffu) << 8) | flags};
}

std::string at_source(uintptr_t pc_offset_or_pc, bool is_offset) {
    if (!pc_offset_or_pc) return "";
    std::string s = source_of(is_offset ? pc_offset_or_pc + g_bias : pc_offset_or_pc);
    return s.empty() ? "" : " (" + s + ")";
}

// Who made a recorded access, in words.
std::string who(const Ctx& c, const Rec& r, bool read) {
    unsigned f = rec_flags(r);
    const Launch* L = c.L;
    std::string s;
    if (f & R_MBLOCK) return "threads of several blocks";
    if (f & R_MWARP) return "threads of several warps";
    if (f & R_MLANE) {
        char b[96];
        snprintf(b, sizeof(b), "lanes 0x%08x of warp %u", r.pc, rec_tid(r) >> 5);
        return b;
    }
    s = "thread " + thread_name(L, rec_tid(r));
    if (r.blk != c.blk) {
        uint64_t b = run_block_of(L, r.blk);
        s += " of block " + (b == ~0ull ? std::string("?") : block_name(L, b));
    }
    (void)read;
    return s + at_source(r.pc, true);
}

std::string where_shared(Worker* w, size_t off);

std::string where(const Ctx& c, uintptr_t a) {
    if (c.device) {
        char d[256];
        describe_device_address(a, d, sizeof(d));
        return d;
    }
    return where_shared(c.w, a - (uintptr_t)c.w->arena);
}

// A data race (kernel_alarm: the end of the program, or with CUDA_CPU_ALARMS=report one more count).
void race(const Ctx& c, uintptr_t a, size_t size, bool write, const Rec& prior, bool prior_write,
          bool other_value = false) {
    RuntimeScope scope;
    const char* space = c.device ? "global" : "shared";
    const char* between = c.device ? (prior.blk != c.blk && !(rec_flags(prior) & (R_MWARP | R_MLANE))
                                          ? "blocks of one launch are not ordered (unless the writer's __threadfence "
                                            "and an atomic after it, met by an atomic of the reader's block, order them)"
                                          : "no __syncthreads (or __syncwarp within a warp) between them")
                                   : "no __syncthreads (or __syncwarp within a warp) between them";
    kernel_alarm("data race", a, c.pc, "data race on %s memory: this thread %s %zu bytes at %s%s, which %s %s in the same barrier "
                  "interval%s; %s", space, write ? (other_value ? "wrote" : "writes") : "reads", size, where(c, a).c_str(),
                  at_source(c.pc, false).c_str(), who(c, prior, !prior_write).c_str(),
                  prior_write ? "wrote" : "read", other_value ? ", a different value" : "", between);
}

// A write over an unordered write of another thread: kept until the store is done (see PendingWrite).
// The bytes before it are what the other write left: another block's, running on another OS thread,
// may have been checked and not yet stored (wait_for_store).
void defer_write(const Ctx& c, const Rec& W, uintptr_t a, size_t size) {
    PendingWrite& p = c.w->pending;
    if (p.on && p.a == a) return;  // another byte of the same access
    if (size > sizeof(p.before)) return race(c, a, size, true, W, true);
    if (c.device && W.blk != c.blk) wait_for_store(c.w, W.blk);
    p.on = true;
    p.device = c.device;
    p.a = a;
    p.pc = c.pc;
    p.size = size;
    memcpy(p.before, (const void*)a, size);
    memcpy(p.prior, &W, sizeof(W));
}

// The race detector's work for one byte (B: its address; A, SIZE: the access's).
inline void race_byte(const Ctx& c, Rec& W, Rec& R, bool write, bool atomic, uintptr_t a, size_t size, uintptr_t b) {
    if (rec_valid(c, W) && !(atomic && (rec_flags(W) & R_ATOMIC)) && !write_ordered(c, W)) {
        if (!write) race(c, a, size, false, W, true);
        else if (!atomic) defer_write(c, W, a, size);
        else race(c, a, size, true, W, true);
    }
    if (!write && !atomic && c.device && (rec_flags(W) & R_FIRST) && rec_valid(c, W)) {
        Rec first;
        {
            std::lock_guard<std::mutex> lk(g_first_mu);
            first = g_first[b];
        }
        if (rec_valid(c, first) && !write_ordered(c, first)) race(c, a, size, false, first, true);
    }
    if (write) {
        if (rec_valid(c, R) && !(atomic && (rec_flags(R) & R_ATOMIC)) && !reads_ordered(c, R))
            race(c, a, size, true, R, false);
        unsigned keep = 0;
        if (atomic && c.device && rec_valid(c, W) && (rec_flags(W) & R_ATOMIC)) {
            if (rec_flags(W) & R_FIRST) keep = R_FIRST;
            else if (W.blk != c.blk && !write_ordered(c, W)) {
                std::lock_guard<std::mutex> lk(g_first_mu);
                g_first[b] = W;
                keep = R_FIRST;
            }
        }
        W = me(c, atomic ? R_ATOMIC | keep : 0);
        R.blk = 0;
        return;
    }
    if (!rec_valid(c, R) || reads_ordered(c, R)) {
        R = me(c, atomic ? R_ATOMIC : 0);
        return;
    }
    // Concurrent readers: keep what a later write must be ordered after.
    unsigned f = rec_flags(R);
    unsigned keep_atomic = (f & R_ATOMIC) && atomic ? R_ATOMIC : 0;
    uint32_t s = std::max(rec_sync(R), c.sync & 0xffffffu);
    if (R.blk != c.blk || (f & R_MBLOCK)) {
        R.blk = std::max(R.blk, c.blk);
        R.sync_flags = (s << 8) | R_MBLOCK | keep_atomic;
    } else if ((f & R_MWARP) || (rec_tid(R) >> 5) != c.warp) {
        if (f & R_MLANE) R.pc = 0;
        R.sync_flags = (s << 8) | R_MWARP | keep_atomic;
    } else {
        uint32_t mask = (f & R_MLANE) ? R.pc : (1u << (rec_tid(R) & 31));
        R.pc = mask | (1u << c.lane);
        R.epoch_tid = (c.epoch << 10) | (c.warp << 5);
        R.sync_flags = (s << 8) | R_MLANE | keep_atomic;
    }
}

Ctx make_ctx(Worker* w, bool device, uintptr_t pc) {
    Ctx c;
    c.w = w;
    c.L = w->launch;
    c.tid = w->cur->linear;
    c.warp = c.tid >> 5;
    c.lane = c.tid & 31;
    c.blk = w->blk;
    c.epoch = w->epoch;
    c.sync = w->cur->wsync;
    c.device = device;
    c.pc = pc;
    return c;
}

const char* verb(int acc) { return (acc & ACC_WRITE) ? "writes" : "reads"; }

// ---- happens-before between ops (streams_cpu.cpp's clocks) and the host ----
// Each byte of an allocation keeps the op that last wrote it and up to two ops that read it since
// (a read ordered after an earlier reader replaces it: a later write ordered after the new one is
// ordered after both). An access of the running op (or of the host) must be ordered after the last
// write, and a write after the reads too; atomics of different ops do not conflict with each other.
const uint32_t kHbAtomic = 0x80000000u;

void hb_race(uintptr_t a, size_t size, bool write, uint32_t other, bool other_write, uintptr_t pc) {
    RuntimeScope scope;
    std::string me = g_cur_op ? op_description(g_cur_op->id) : std::string("host code");
    std::string them = op_description(other & ~kHbAtomic);
    char d[256];
    describe_device_address(a, d, sizeof(d));
    std::string at = pc ? at_source(pc, false) : "";
    const char* how = g_cur_op ? "nothing orders the two (no event recorded after the one that the other's stream "
                                 "waited for, no common stream, no synchronization in between)"
                               : "the host has not synchronized with it (cudaStreamSynchronize, cudaEventSynchronize or "
                                 "cudaDeviceSynchronize first; on a GPU it may still be running)";
    Worker* w = tw;
    if (w && w->cur && w->launch)
        kernel_alarm("unordered device work", a, pc, "%s %zu bytes at %s%s, which %s %s; %s (this launch: %s)",
                     write ? "writes" : "reads", size, d, at.c_str(), them.c_str(), other_write ? "writes" : "reads", how,
                     me.c_str());
    else
        kernel_alarm("unordered device work", a, pc, "%s %s %zu bytes at %s%s, which %s %s; %s", me.c_str(),
                     write ? "writes" : "reads", size, d, at.c_str(), them.c_str(), other_write ? "writes" : "reads", how);
}

inline void hb_byte(DevAlloc* A, size_t off, uint32_t me, bool write, bool atomic, uintptr_t a, size_t size, uintptr_t pc) {
    uint32_t& w = A->hbw[off];
    uint32_t* r = A->hbr + 2 * off;
    uint32_t mine = me | (atomic ? kHbAtomic : 0);
    if (w && (w & ~kHbAtomic) != me && !(atomic && (w & kHbAtomic)) && !hb_ordered(w & ~kHbAtomic))
        hb_race(a, size, write, w, true, pc);
    if (write) {
        for (int k = 0; k < 2; k++)
            if (r[k] && (r[k] & ~kHbAtomic) != me && !(atomic && (r[k] & kHbAtomic)) && !hb_ordered(r[k] & ~kHbAtomic))
                hb_race(a, size, true, r[k], false, pc);
        w = mine;
        r[0] = r[1] = 0;
        return;
    }
    if ((r[0] & ~kHbAtomic) == me || (r[1] & ~kHbAtomic) == me) return;
    if (!r[0] || hb_ordered(r[0] & ~kHbAtomic)) r[0] = mine;
    else if (!r[1] || hb_ordered(r[1] & ~kHbAtomic)) r[1] = mine;
    else r[1] = mine;  // a third unordered reader: the newest two are kept
}

// An atomic on global memory: first it acquires what fenced atomics on the same address released, then
// (if this thread fenced in this barrier interval) it releases this block's earlier writes.
void atomic_release_acquire(const Ctx& c, uintptr_t a) {
    std::lock_guard<std::mutex> lk(g_release_mu);
    std::vector<std::array<uint32_t, 3>>& rel = g_releases[a];
    for (const std::array<uint32_t, 3>& r : rel)
        if (r[0] != c.blk) c.w->acquired[r[0]].push_back({r[1], r[2], c.epoch, c.tid});
    Fiber* f = c.w->cur;
    if (f->fence_epoch && f->fence_epoch == c.epoch) rel.push_back({c.blk, c.epoch, c.tid});
}

// A plain load (global or shared): its race check waits for the thread's next access
// (resolve_pending_read), so that a CAS loop's first guess is seen as one.
inline bool deferred_load(bool write, bool atomic, size_t size) { return !write && !atomic && size <= 16; }

void device_access(Worker* w, uintptr_t a, size_t size, int acc, uintptr_t pc) {
    // this thread's previous access has landed (wait_for_store); only this OS thread writes the count
    w->accesses.store(w->accesses.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    DevAlloc* A = find_alloc(a);
    if (!A || A->freed || a < A->start || a + size > A->start + A->size) {
        t_runtime++;
        char d[256];
        describe_device_address(a < (A ? A->start : a) || !A || A->freed ? a : std::max(a, A->start + A->size), d, sizeof(d));
        die_in_kernel("%s %zu bytes at %s%s", verb(acc), size, d, at_source(pc, false).c_str());
    }
    if (!A->state) return;
    size_t off = a - A->start;
    Ctx c = make_ctx(w, true, pc);
    if (acc & ACC_ATOMIC) atomic_release_acquire(c, a);
    Rec* W = (Rec*)A->wrec + off;
    Rec* R = (Rec*)A->rrec + off;
    bool write = acc & ACC_WRITE, atomic = acc & ACC_ATOMIC;
    bool defer = deferred_load(write, atomic, size);
    for (size_t i = 0; i < size; i++) {
        uint8_t& st = A->state[off + i];
        if (!write && st != S_INIT) {
            RuntimeScope scope;
            char d[256];
            describe_device_address(a, d, sizeof(d));
            kernel_alarm("uninitialised read", a, pc, "reads %zu bytes of uninitialised device memory at %s (byte %zu of "
                         "them was never written by a kernel or a copy since cudaMalloc)%s", size, d, i,
                         at_source(pc, false).c_str());
        }
        if (write) st = S_INIT;
        if (!defer) race_byte(c, W[i], R[i], write, atomic, a, size, a + i);
        if (g_cur_op) hb_byte(A, off + i, (uint32_t)g_cur_op->id, write, atomic, a, size, pc);
    }
    if (defer) w->pread = PendingRead{true, true, a, pc, size};
    if (g_store_delay_us && write && !atomic) usleep(g_store_delay_us);
}

void shadow_arena(Worker* w) {
    if (w->sm_state) return;
    size_t n = w->arena_size + kPage;
    w->sm_state = (uint8_t*)map_zero(n);
    w->sm_wrec = map_zero(n * sizeof(Rec));
    w->sm_rrec = map_zero(n * sizeof(Rec));
    w->wvec.assign(32 * 1024, 0);
}

std::string where_shared(Worker* w, size_t off) {
    char b[256];
    for (const SharedVar& v : w->statics) {
        if (off >= v.off && off < v.off + v.size) {
            snprintf(b, sizeof(b), "shared '%s'+%zu (a %zu-byte static __shared__ variable)", v.name, off - v.off, v.size);
            return b;
        }
    }
    for (const SharedVar& v : w->statics) {
        if (off >= v.off + v.size && off < v.off + v.size + 32) {
            snprintf(b, sizeof(b), "%zu bytes past the end of static __shared__ '%s' (%zu bytes)", off - v.off - v.size,
                     v.name, v.size);
            return b;
        }
    }
    size_t dyn = (size_t)(w->dyn - w->arena), smem = w->launch ? w->launch->smem : 0;
    if (off >= dyn + smem)
        snprintf(b, sizeof(b), "%zu bytes past the end of the %zu bytes of dynamic shared memory the launch asked for",
                 off - dyn - smem, smem);
    else if (off >= dyn)
        snprintf(b, sizeof(b), "dynamic shared memory +%zu (of %zu bytes)", off - dyn, smem);
    else
        snprintf(b, sizeof(b), "shared memory %zu bytes before the dynamic shared memory, outside every __shared__ "
                 "variable", dyn - off);
    return b;
}

void shared_access(Worker* w, uintptr_t a, size_t size, int acc, uintptr_t pc) {
    size_t off = a - (uintptr_t)w->arena;
    bool write = acc & ACC_WRITE, atomic = acc & ACC_ATOMIC;
    bool defer = deferred_load(write, atomic, size);
    Ctx c = make_ctx(w, false, pc);
    Rec* W = (Rec*)w->sm_wrec + off;
    Rec* R = (Rec*)w->sm_rrec + off;
    for (size_t i = 0; i < size; i++) {
        if (off + i >= w->arena_size || w->sm_state[off + i] == S_NONE)
            t_runtime++, die_in_kernel("%s %zu bytes at %s%s", verb(acc), size, where_shared(w, off + i).c_str(), at_source(pc, false).c_str());
        uint8_t& st = w->sm_state[off + i];
        if (!write && st != S_INIT) {
            RuntimeScope scope;
            kernel_alarm("uninitialised read", a, pc, "reads %zu bytes of uninitialised shared memory at %s (no thread of "
                         "this block wrote byte %zu of them yet)%s", size, where_shared(w, off).c_str(), i,
                         at_source(pc, false).c_str());
        }
        if (write) st = S_INIT;
        if (!defer) race_byte(c, W[i], R[i], write, atomic, a, size, a + i);
    }
    if (defer) w->pread = PendingRead{true, false, a, pc, size};
}

// A plain load's race check, made at the thread's next access to memory other than its own (its
// stack, the arguments), or before it waits or exits, as if made at the load (the thread's barrier
// interval and warp operations have not changed since). Not made when that next access is a
// compare-and-swap of the same bytes: the load was the first guess of a CAS loop (the CUDA
// programming guide's atomicAdd for double reads the old value plainly, then atomicCAS checks it and
// retries), whose value the CAS validates, so its racing with other threads' atomics is harmless. A
// load whose value is used otherwise, or whose next access is anything else, is checked as ever.
void resolve_pending_read(Worker* w, uintptr_t a, size_t size, int acc) {
    PendingRead p = w->pread;
    w->pread.on = false;
    if ((acc & ACC_CAS) && a == p.a && size == p.size) return;
    Ctx c = make_ctx(w, p.device, p.pc);
    Rec *W, *R;
    if (p.device) {
        DevAlloc* A = find_alloc(p.a);
        if (!A || !A->wrec) return;
        W = (Rec*)A->wrec + (p.a - A->start);
        R = (Rec*)A->rrec + (p.a - A->start);
    } else {
        W = (Rec*)w->sm_wrec + (p.a - (uintptr_t)w->arena);
        R = (Rec*)w->sm_rrec + (p.a - (uintptr_t)w->arena);
    }
    for (size_t i = 0; i < p.size; i++) race_byte(c, W[i], R[i], false, false, p.a, p.size, p.a + i);
}

[[noreturn]] void host_memory(Worker* w, uintptr_t a, size_t size, int acc, uintptr_t pc) {
    t_runtime++;
    for (Fiber* g : w->fibers)
        if (a - (uintptr_t)g->stack < g->stack_size)
            die_in_kernel("%s %zu bytes at %p, a local variable of thread %s: threads cannot see each other's local "
                          "memory%s", verb(acc), size, (void*)a, thread_name(w->launch, g->linear).c_str(),
                          at_source(pc, false).c_str());
    die_in_kernel("%s %zu bytes at %p, which is host memory (not a device allocation, shared memory or this thread's "
                  "locals): a host pointer passed to the kernel?%s", verb(acc), size, (void*)a, at_source(pc, false).c_str());
}

// A kernel touched a host global (a variable that is not __device__ or __constant__): on a GPU it
// would be a host address the kernel cannot see.
[[noreturn]] void host_global(uintptr_t a, size_t size, int acc, uintptr_t pc) {
    t_runtime++;
    std::string v = symbol_at(a, false);
    die_in_kernel("%s %zu bytes of the host global variable %s%s%s (at %p)%s: a kernel sees only __device__, "
                  "__constant__ and __shared__ variables (and its arguments); make it __device__ or pass it in",
                  verb(acc), size, v.empty() ? "" : "'", v.empty() ? "?" : v.c_str(), v.empty() ? "" : "'", (void*)a,
                  at_source(pc, false).c_str());
}

inline bool host_data(uintptr_t a) {
    for (int i = 0; i < g_ndata; i++)
        if (a - g_data_lo[i] < g_data_hi[i] - g_data_lo[i]) return true;
    return false;
}

void host_access(uintptr_t a, size_t size, int acc, uintptr_t pc) {
    if (a - g_dev_lo >= g_dev_span || !g_check) return;
    DevAlloc* A = dev_lookup(a);
    if (A && !A->freed && A->kind != A_DEVICE) {
        // Managed and pinned memory are the host's too, once it is ordered after the device work that
        // touched them.
        if (A->hbw && a >= A->start && a + size <= A->start + A->size) {
            uint32_t me = (uint32_t)hb_host_op();
            for (size_t i = 0; i < size; i++) hb_byte(A, a - A->start + i, me, acc & ACC_WRITE, false, a, size, pc);
        }
        return;
    }
    t_runtime++;
    char d[256];
    describe_device_address(a, d, sizeof(d));
    cuda_cpu_fail("host code %s %zu bytes of %s%s: a device pointer dereferenced on the host (device memory is for "
                  "kernels and cudaMemcpy)", verb(acc), size, d, at_source(pc, false).c_str());
}

// CUDA_CPU_COUNT's classes of memory: the device region is global memory (bytes and 32-byte sectors),
// the block's arena is shared memory; a thread's stack, the arguments and __device__ variables are
// neither (registers, the constant bank and a few bytes the report need not see).
inline void count_access(Worker* w, uintptr_t a, size_t size, bool write) {
    if (a - g_dev_lo < g_dev_span) count_global(w, a, size, write);
    else if (a - (uintptr_t)w->arena < w->arena_size + kPage) (write ? w->c_swrite : w->c_sread) += size;
}

// ... and the instruction: an atomic, or a plain global or shared load or store (one an access g++
// made; nothing for the thread's locals, which are registers on a GPU).
inline void count_instruction(Worker* w, uintptr_t a, int acc) {
    if (acc & ACC_ATOMIC) w->cur->c_ins[CUDA_CPU_INS_ATOM]++;
    else if (a - g_dev_lo < g_dev_span) w->cur->c_ins[CUDA_CPU_INS_GMEM]++;
    else if (a - (uintptr_t)w->arena < w->arena_size + kPage) w->cur->c_ins[CUDA_CPU_INS_SMEM]++;
}

inline void cc_access(const volatile void* p, size_t size, int acc, uintptr_t pc) {
    if (t_runtime) return;
    Worker* w = tw;
    uintptr_t a = (uintptr_t)p;
    if (__builtin_expect(!w || !w->cur, 0)) {
        if (a - g_dev_lo < g_dev_span) host_access(a, size, acc, pc);
        else if (g_symbols && a - g_symbols->start < g_symbols->size && g_check) {
            t_runtime++;
            std::string v = symbol_at(a, false);
            cuda_cpu_fail("host code %s %zu bytes of the __device__ variable '%s'%s: on a GPU the host sees only a "
                          "shadow of it (cudaMemcpyToSymbol and cudaMemcpyFromSymbol move its value)", verb(acc), size,
                          v.c_str(), at_source(pc, false).c_str());
        }
        return;
    }
    if (g_count_run && !(acc & ACC_NOCOUNT)) {
        count_access(w, a, size, acc & ACC_WRITE);
        count_instruction(w, a, acc);
    }
    acc &= ~ACC_NOCOUNT;
    if (!g_check_run) return;
    if (w->pending.on) check_pending_write(w);
    if (w->pread.on) {
        const Fiber* f = w->cur;
        bool own = a - (uintptr_t)f->stack < f->stack_size || a - w->launch->params_lo < w->launch->params_size ||
                   a - w->tls_lo < w->tls_hi - w->tls_lo;
        if (!own) resolve_pending_read(w, a, size, acc);
    }
    if (a - g_dev_lo < g_dev_span) return device_access(w, a, size, acc, pc);
    if (a - (uintptr_t)w->arena < w->arena_size + kPage) return shared_access(w, a, size, acc, pc);
    Fiber* f = w->cur;
    if (a - (uintptr_t)f->stack < f->stack_size) return;  // the thread's own locals
    const Launch* L = w->launch;
    if (a - L->params_lo < L->params_size) return;         // the kernel's arguments
    if (a - w->tls_lo < w->tls_hi - w->tls_lo) return;     // threadIdx & co.
    if (a - g_static_lo < g_static_hi - g_static_lo) {
        DevAlloc* S = g_symbols;
        if (S && a - S->start < S->size) return device_access(w, a, size, acc, pc);  // __device__ variables
        if (a >= g_symbols_const_lo && a < g_symbols_const_hi) return;
        if (host_data(a)) host_global(a, size, acc, pc);
        return;  // read-only data: constants, string literals
    }
    host_memory(w, a, size, acc, pc);
}

}  // namespace

// ---- the scheduler's side ----
void check_fence(Worker* w) { w->cur->fence_epoch = w->epoch; }

void check_block_start(Worker* w) {
    shadow_arena(w);
    w->acquired.clear();
    for (unsigned i = 0; i < w->launch->nthreads && i < w->fibers.size(); i++) w->fibers[i]->fence_epoch = 0;
    for (auto& r : w->sm_marked) memset(w->sm_state + r.first, S_NONE, r.second);
    w->sm_marked.clear();
    const Launch* L = w->launch;
    if (L->smem) {
        size_t off = (size_t)(w->dyn - w->arena);
        memset(w->sm_state + off, S_UNINIT, L->smem);
        w->sm_marked.emplace_back(off, L->smem);
    }
    memset(w->wvec.data(), 0, (size_t)w->nwarps * 1024 * sizeof(uint32_t));
}

void check_shared_var(Worker* w, size_t off, size_t size) {
    memset(w->sm_state + off, S_UNINIT, size);
    w->sm_marked.emplace_back(off, size);
}

void check_warp_released(Worker* w, unsigned base, unsigned m) {
    Fiber** F = w->fibers.data() + base;
    uint32_t* V = w->wvec.data() + (size_t)(base / 32) * 1024;
    for (unsigned l = 0; l < 32; l++)
        if ((m >> l) & 1u) F[l]->wsync = (F[l]->wsync + 1) & 0xffffffu;
    for (unsigned u = 0; u < 32; u++) {
        if (!((m >> u) & 1u)) continue;
        for (unsigned r = 0; r < 32; r++)
            if ((m >> r) & 1u) V[u * 32 + r] = F[r]->wsync;
    }
}

void check_alloc(DevAlloc* A) {
    static bool once = (dl_iterate_phdr(find_exe, nullptr), true);
    (void)once;
    A->shadow_len = A->size * sizeof(Rec);
    A->state = (uint8_t*)map_zero(A->size);
    memset(A->state, A->kind == A_DEVICE ? S_UNINIT : S_INIT, A->size);
    A->wrec = map_zero(A->shadow_len);
    A->rrec = map_zero(A->shadow_len);
    A->hbw = (uint32_t*)map_zero(A->size * sizeof(uint32_t));
    A->hbr = (uint32_t*)map_zero(A->size * 2 * sizeof(uint32_t));
}

void check_free(DevAlloc* A) {
    if (!A->state) return;
    munmap(A->state, A->size);
    munmap(A->wrec, A->shadow_len);
    munmap(A->rrec, A->shadow_len);
    munmap(A->hbw, A->size * sizeof(uint32_t));
    munmap(A->hbr, A->size * 2 * sizeof(uint32_t));
    A->state = nullptr;
    A->wrec = A->rrec = nullptr;
    A->hbw = A->hbr = nullptr;
}

void check_run_start(const Launch* L) {
    static bool once = (dl_iterate_phdr(find_exe, nullptr), true);
    (void)once;
    g_last_run_base = L->run_base;
    std::lock_guard<std::mutex> lk(g_release_mu);
    g_releases.clear();
}

// The deferred write is done: if it changed the bytes the earlier write left, the two raced.
void check_pending_read(Worker* w) { resolve_pending_read(w, 0, 0, 0); }

void check_pending_write(Worker* w) {
    PendingWrite& p = w->pending;
    p.on = false;
    if (!memcmp((const void*)p.a, p.before, p.size)) return;  // the same value: benign
    Rec prior;
    memcpy(&prior, p.prior, sizeof(prior));
    race(make_ctx(w, p.device, p.pc), p.a, p.size, true, prior, true, true);
}

void check_lane_range(const void* p, size_t n, bool write, uintptr_t pc) {
    if (g_check_run) cc_access(p, n, (write ? ACC_WRITE : 0) | ACC_NOCOUNT, pc);
}

void check_atomic_access(const void* p, size_t n, uintptr_t pc) {
    if (g_check_run) cc_access(p, n, ACC_WRITE | ACC_ATOMIC | ACC_NOCOUNT, pc);
}

void count_range(const void* p, size_t n, bool write) {
    Worker* w = tw;
    if (g_count_run && w && w->cur && n) count_access(w, (uintptr_t)p, n, write);
}

bool check_plain_access_after_atomics(const void* p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    DevAlloc* A = find_alloc(a);
    if (!A || !A->wrec || a < A->start || a + n > A->start + A->size) return false;
    const Rec* W = (const Rec*)A->wrec + (a - A->start);
    const Rec* R = (const Rec*)A->rrec + (a - A->start);
    uint32_t base = g_last_run_base;
    for (size_t i = 0; i < n; i++) {
        if (W[i].blk && W[i].blk >= base && !(rec_flags(W[i]) & R_ATOMIC)) return true;
        if (R[i].blk && R[i].blk >= base && !(rec_flags(R[i]) & R_ATOMIC)) return true;
    }
    return false;
}

// ============================================================================================
// GCC's ThreadSanitizer entry points (-fsanitize=thread), without libtsan
// ============================================================================================
#define CC_PC ((uintptr_t)__builtin_return_address(0))
#define CC_RW(n)                                                                                             \
    extern "C" void __tsan_read##n(void* p) { cc_access(p, n, 0, CC_PC); }                                     \
    extern "C" void __tsan_write##n(void* p) { cc_access(p, n, ACC_WRITE, CC_PC); }                            \
    extern "C" void __tsan_volatile_read##n(void* p) { cc_access(p, n, 0, CC_PC); }                            \
    extern "C" void __tsan_volatile_write##n(void* p) { cc_access(p, n, ACC_WRITE, CC_PC); }
#define CC_RW_UNALIGNED(n)                                                                                   \
    extern "C" void __tsan_unaligned_read##n(void* p) { cc_access(p, n, 0, CC_PC); }                           \
    extern "C" void __tsan_unaligned_write##n(void* p) { cc_access(p, n, ACC_WRITE, CC_PC); }                  \
    extern "C" void __tsan_unaligned_volatile_read##n(void* p) { cc_access(p, n, 0, CC_PC); }                  \
    extern "C" void __tsan_unaligned_volatile_write##n(void* p) { cc_access(p, n, ACC_WRITE, CC_PC); }
CC_RW(1) CC_RW(2) CC_RW(4) CC_RW(8) CC_RW(16)
CC_RW_UNALIGNED(2) CC_RW_UNALIGNED(4) CC_RW_UNALIGNED(8) CC_RW_UNALIGNED(16)
#undef CC_RW
#undef CC_RW_UNALIGNED

// The signatures are GCC's own declarations of these builtins (sanitizer.def), which it makes
// whenever a sanitizer is on, as in an ASan build of the runtime.
extern "C" {
void __tsan_init() { g_instrumented = true; }
void __tsan_read_range(void* p, long n) { cc_access(p, (size_t)n, 0, CC_PC); }
void __tsan_write_range(void* p, long n) { cc_access(p, (size_t)n, ACC_WRITE, CC_PC); }
void __tsan_vptr_update(void* p, void*) { cc_access(p, sizeof(void*), ACC_WRITE, CC_PC); }
void __tsan_vptr_read(void* p) { cc_access(p, sizeof(void*), 0, CC_PC); }
void __tsan_func_entry(void*) {}
void __tsan_func_exit(void*) {}
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}

// Atomics: checked as atomic accesses, then done (sequentially consistent, whatever was asked), the
// two under g_atomic_op_mu so that the order of the checks is the order of the operations.
std::mutex g_atomic_op_mu;
#define CC_ATOMIC_LOCK std::lock_guard<std::mutex> atomic_lk(g_atomic_op_mu)
// A compare-and-swap, checked as what it will do (under the lock, so it will do it): a write when the
// target holds the expected value, else an atomic read that CUDA_CPU_COUNT does not count. The
// runtime builds atomicInc, atomicMax and the like from a CAS loop, which retries when another worker
// thread got in between; a GPU's atomic has no retries, so only the one that lands is counted, and the
// counts do not depend on how the workers interleaved.
template <class T>
static int cc_cas_access(const volatile T* a, T expected) {
    return __atomic_load_n(a, __ATOMIC_SEQ_CST) == expected ? (ACC_WRITE | ACC_ATOMIC) : (ACC_ATOMIC | ACC_NOCOUNT);
}
#define CC_ATOMIC(n, T)                                                                                          \
    extern "C" T __tsan_atomic##n##_load(const volatile void* p, int) {                                         \
        const volatile T* a = (const volatile T*)p;                                                              \
        CC_ATOMIC_LOCK; cc_access(a, sizeof(T), ACC_ATOMIC, CC_PC); return __atomic_load_n(a, __ATOMIC_SEQ_CST); }             \
    extern "C" void __tsan_atomic##n##_store(volatile void* p, T v, int) {                                      \
        volatile T* a = (volatile T*)p;                                                                          \
        CC_ATOMIC_LOCK; cc_access(a, sizeof(T), ACC_WRITE | ACC_ATOMIC, CC_PC); __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }    \
    CC_ATOMIC_RMW(n, T, exchange, __atomic_exchange_n)                                                           \
    CC_ATOMIC_RMW(n, T, fetch_add, __atomic_fetch_add)                                                           \
    CC_ATOMIC_RMW(n, T, fetch_sub, __atomic_fetch_sub)                                                           \
    CC_ATOMIC_RMW(n, T, fetch_and, __atomic_fetch_and)                                                           \
    CC_ATOMIC_RMW(n, T, fetch_or, __atomic_fetch_or)                                                             \
    CC_ATOMIC_RMW(n, T, fetch_xor, __atomic_fetch_xor)                                                           \
    CC_ATOMIC_RMW(n, T, fetch_nand, __atomic_fetch_nand)                                                         \
    extern "C" bool __tsan_atomic##n##_compare_exchange_strong(volatile void* p, void* c, T v, int, int) {      \
        volatile T* a = (volatile T*)p;                                                                          \
        CC_ATOMIC_LOCK; cc_access(a, sizeof(T), cc_cas_access(a, *(T*)c) | ACC_CAS, CC_PC);                      \
        return __atomic_compare_exchange_n(a, (T*)c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }           \
    extern "C" bool __tsan_atomic##n##_compare_exchange_weak(volatile void* p, void* c, T v, int, int) {        \
        volatile T* a = (volatile T*)p;                                                                          \
        CC_ATOMIC_LOCK; cc_access(a, sizeof(T), cc_cas_access(a, *(T*)c) | ACC_CAS, CC_PC);                      \
        return __atomic_compare_exchange_n(a, (T*)c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }           \
    extern "C" T __tsan_atomic##n##_compare_exchange_val(volatile void* p, T c, T v, int, int) {                \
        volatile T* a = (volatile T*)p;                                                                          \
        CC_ATOMIC_LOCK; cc_access(a, sizeof(T), cc_cas_access(a, c) | ACC_CAS, CC_PC);                           \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
#define CC_ATOMIC_RMW(n, T, op, builtin)                                                                         \
    extern "C" T __tsan_atomic##n##_##op(volatile void* p, T v, int) {                                          \
        volatile T* a = (volatile T*)p;                                                                          \
        CC_ATOMIC_LOCK; cc_access(a, sizeof(T), ACC_WRITE | ACC_ATOMIC, CC_PC); return builtin(a, v, __ATOMIC_SEQ_CST); }
CC_ATOMIC(8, unsigned char)
CC_ATOMIC(16, unsigned short)
CC_ATOMIC(32, unsigned int)
CC_ATOMIC(64, unsigned long)
#undef CC_ATOMIC_RMW
#undef CC_ATOMIC
#undef CC_ATOMIC_LOCK

// ============================================================================================
// GCC's UBSan entry points for -fsanitize=alignment: a GPU needs every access aligned to its type
// (a misaligned float4, int4, float2 or __half2 load is a misaligned-address fault there).
// ============================================================================================
namespace {
struct SourceLocation { const char* file; uint32_t line, column; };
struct TypeDescriptor { uint16_t kind, info; char name[1]; };
struct TypeMismatchData {
    SourceLocation loc;
    const TypeDescriptor* type;
    unsigned char log_alignment;
    unsigned char check_kind;
};
const char* const kCheckKinds[] = {"load of", "store to", "reference binding to", "member access within",
                                   "member call on", "constructor call on", "downcast of", "downcast of",
                                   "upcast of", "cast to virtual base of", "_Nonnull binding to", "dynamic operation on"};

void type_mismatch(TypeMismatchData* d, uintptr_t ptr, uintptr_t pc) {
    if (t_runtime) return;
    Worker* w = tw;
    bool in_kernel = w && w->cur && w->launch;
    const char* kind = d->check_kind < sizeof(kCheckKinds) / sizeof(kCheckKinds[0]) ? kCheckKinds[d->check_kind] : "access to";
    uintptr_t align = (uintptr_t)1 << d->log_alignment;
    if (!ptr) {
        if (in_kernel) die_in_kernel("%s a null pointer of type %s (%s:%u:%u)", kind, d->type->name, d->loc.file, d->loc.line, d->loc.column);
        return;
    }
    if (!(ptr & (align - 1)) || !in_kernel) return;  // host code's alignment is not ours to judge
    kernel_alarm("misaligned access", ptr, pc, "misaligned %s %p of type %s, which needs %zu-byte alignment: on "
                 "a GPU a misaligned address faults (%s:%u:%u)", kind, (void*)ptr, d->type->name, (size_t)align,
                 d->loc.file, d->loc.line, d->loc.column);
}
}  // namespace

extern "C" {
void __ubsan_handle_type_mismatch_v1(void* d, void* ptr) {
    type_mismatch((TypeMismatchData*)d, (uintptr_t)ptr, (uintptr_t)__builtin_return_address(0));
}
void __ubsan_handle_type_mismatch_v1_abort(void* d, void* ptr) {
    type_mismatch((TypeMismatchData*)d, (uintptr_t)ptr, (uintptr_t)__builtin_return_address(0));
}
}

// ============================================================================================
// Happens-before between device work and the host (streams_cpu.cpp's clocks)
// ============================================================================================
void hb_access(uintptr_t p, size_t n, bool write, uintptr_t pc) {
    if (!g_check || !n) return;
    RuntimeScope scope;
    uint32_t me = (uint32_t)(g_cur_op ? g_cur_op->id : hb_host_op());
    uintptr_t end = p + n;
    while (p < end) {
        DevAlloc* A = find_alloc(p);
        if (!A || A->freed || !A->hbw || p < A->start || p >= A->start + A->size) return;
        uintptr_t stop = std::min(end, A->start + A->size);
        for (uintptr_t a = p; a < stop; a++) hb_byte(A, a - A->start, me, write, false, a, stop - p, pc);
        p = stop;
    }
}
