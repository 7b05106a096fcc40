// streams_cpu.cpp: the device's work queue. Streams, events, asynchronous copies and memsets, and the
// order device work runs in (README: "Streams and events").
//
// On a GPU the host only enqueues work; each stream runs its own in order, and work on different
// streams is unordered unless an event, a stream wait, the legacy default stream or a host
// synchronization orders it. Here every piece of device work (a launch, a copy, a memset, a cuBLASLt
// product, an NCCL collective, an event record) becomes an Op queued on its stream with a clock (what
// it is ordered after), and nothing runs until the host synchronizes with it: the host then runs the
// batch of work that synchronization needs, once per order in CUDA_CPU_STREAM_ORDERS (by default one
// where the first-created stream runs as far as it can before later ones, and one where the
// last-created does). A program whose results depend on an order it did not establish gets different
// memory from the two runs; the runtime then searches for the two ops whose swap makes the
// difference and names them. Checked programs also see each access of an op checked against the last
// writer and readers of the bytes (check_cpu.cpp), so the first unordered access stops the program
// naming both ops. Pinned host memory that a queued copy reads or writes is guarded (protected pages,
// checked bytes on partly covered pages) until the host synchronizes with the copy.
#include "cuda_cpu_internal.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <set>

// ---- streams, events, the host ----
static const uint32_t kStreamMagic = 0x57524541u, kEventMagic = 0x45564e54u;
struct CUstream_st {
    uint32_t magic;
    int index;
};
struct CUevent_st {
    uint32_t magic;
    unsigned flags;
    bool recorded;
    uint64_t generation;  // records so far: only the latest one's op sets the time
    bool timed;           // the latest record's op has run
    double ms;
    Clock clock;          // the work the latest record follows
};

struct StreamState {
    bool blocking;           // ordered with the legacy default stream (not cudaStreamNonBlocking)
    bool live;
    uint64_t issued, executed;
    Clock cur;               // what its next op is ordered after (its last op included)
    std::deque<Op*> pending; // issued and not run, in order
    std::string label;
};

// What is kept of an op after it ran: enough to name it in a message and to order it.
struct OpInfo {
    int stream;
    uint64_t seq;
    std::string what;
    void* site[6];
    int nsite;
};

static std::recursive_mutex g_queue_mu;
static std::vector<StreamState> g_streams;   // index 0: the host (unused); 1 legacy; 2 per-thread
static Clock g_host;                         // what the host is ordered after; [0]: its epoch
static std::deque<OpInfo> g_info;            // by op id - 1
static std::map<const void*, std::deque<Op*>> g_comm_pending;  // NCCL ops not run, per communicator
static uint64_t g_host_epoch_op;             // the pseudo op of the host's current epoch (0: none yet)
Op* g_cur_op;
bool g_eager;
static uint64_t g_windows, g_window_ops;  // windows run once per order, and their ops (CUDA_CPU_STATS)

enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_ISSUE };
static std::vector<int> g_orders;
static std::vector<std::string> g_order_names;
static std::set<std::string> g_drop;          // CUDA_CPU_DROP: "file:line" of calls to skip
static std::map<uintptr_t, bool> g_drop_cache;

static void drain_at_exit();
static void host_traffic_write();

void clock_join(Clock& into, const Clock& from) {
    if (into.size() < from.size()) into.resize(from.size(), 0);
    for (size_t i = 0; i < from.size(); i++)
        if (from[i] > into[i]) into[i] = from[i];
}

static void streams_init_locked() {
    if (!g_streams.empty()) return;
    g_streams.resize(3);
    g_streams[kHostStream].label = "the host";
    g_streams[kLegacyStream].label = "the legacy default stream";
    g_streams[kPerThreadStream].label = "the per-thread default stream";
    for (StreamState& s : g_streams) {
        s.blocking = true;
        s.live = true;
        s.issued = s.executed = 0;
    }
    g_host.assign(3, 0);
    g_host[kHostStream] = 1;
    atexit(drain_at_exit);
    if (getenv("CUDA_CPU_HOST_TRAFFIC") && *getenv("CUDA_CPU_HOST_TRAFFIC")) atexit(host_traffic_write);
    const char* e = getenv("CUDA_CPU_STREAM_ORDERS");
    std::string list = e && *e ? e : "forward,reverse";
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item == "forward") g_orders.push_back(ORDER_FORWARD);
        else if (item == "reverse") g_orders.push_back(ORDER_REVERSE);
        else if (item == "issue") g_orders.push_back(ORDER_ISSUE);
        else cuda_cpu_fail("CUDA_CPU_STREAM_ORDERS=%s: '%s' is not an order; expected a comma-separated list of "
                           "forward, reverse, issue", list.c_str(), item.c_str());
        g_order_names.push_back(item);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    if (g_orders.size() > 4) cuda_cpu_fail("CUDA_CPU_STREAM_ORDERS=%s: at most 4 orders", list.c_str());
    const char* d = getenv("CUDA_CPU_DROP");
    if (d && *d) {
        std::string s = d;
        size_t p = 0;
        while (p <= s.size()) {
            size_t c = s.find(',', p);
            std::string item = s.substr(p, c == std::string::npos ? std::string::npos : c - p);
            if (item.find(':') == std::string::npos)
                cuda_cpu_fail("CUDA_CPU_DROP=%s: '%s' is not FILE:LINE", d, item.c_str());
            g_drop.insert(item);
            if (c == std::string::npos) break;
            p = c + 1;
        }
    }
}

// At exit the device finishes what was queued (a context is torn down only after its work), so a
// program that launches and returns still runs its kernels and their checks.
static void drain_at_exit() {
    std::unique_lock<std::recursive_mutex> lk(g_queue_mu, std::try_to_lock);
    if (!lk.owns_lock() || g_streams.empty()) return;
    drain_all_pending();
    const char* st = getenv("CUDA_CPU_STATS");
    if (st && *st == '1')
        fprintf(stderr, "cuda_cpu: %zu ops; %llu windows of work the streams leave unordered ran once per order "
                "(%llu ops in them)\n", g_info.size(), (unsigned long long)g_windows, (unsigned long long)g_window_ops);
}

struct QueueLock {
    std::lock_guard<std::recursive_mutex> lk;
    QueueLock() : lk(g_queue_mu) {
        runtime_init_once();
        streams_init_locked();
    }
};

int stream_index(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy) return kLegacyStream;
    if (s == cudaStreamPerThread) return kPerThreadStream;
    if (s->magic != kStreamMagic) return -1;
    return s->index;
}
bool stream_is_valid(cudaStream_t s) { return stream_index(s) >= 0; }
static bool valid_event(cudaEvent_t e) { return e && e->magic == kEventMagic; }

// ---- CUDA_CPU_DROP: a test hook that skips the stream and event calls made from given lines ----
static bool dropped(const char* api, uintptr_t pc) {
    if (g_drop.empty()) return false;
    auto it = g_drop_cache.find(pc);
    if (it != g_drop_cache.end()) return it->second;
    std::string src = source_of(pc);
    size_t slash = src.rfind('/');
    std::string base = slash == std::string::npos ? src : src.substr(slash + 1);
    bool drop = g_drop.count(src) || g_drop.count(base);
    g_drop_cache[pc] = drop;
    if (drop) fprintf(stderr, "cuda_cpu: CUDA_CPU_DROP: skipping %s at %s\n", api, src.c_str());
    return drop;
}

// ---- op descriptions ----
static OpInfo& info_of(uint64_t id) { return g_info[id - 1]; }

// No lock: it runs on the host thread that holds the queue or on a worker while a batch runs (when
// nothing changes the queue).
std::string op_description(uint64_t id) {
    RuntimeScope scope;
    if (id == 0 || id > g_info.size()) return "(unknown work)";
    const OpInfo& I = info_of(id);
    std::string s = I.what;
    if (I.stream != kHostStream) s += " on " + g_streams[I.stream].label;
    std::vector<std::string> chain;
    for (int i = 0; i < I.nsite && chain.size() < 3; i++) {
        std::vector<std::string> lines = source_chain((uintptr_t)I.site[i]);
        for (const std::string& l : lines) {
            if (chain.size() >= 3) break;
            if (std::find(chain.begin(), chain.end(), l) == chain.end()) chain.push_back(l);
        }
    }
    if (!chain.empty()) {
        s += I.stream == kHostStream ? " (at " : " (issued at ";
        for (size_t i = 0; i < chain.size(); i++) s += (i ? " <- " : "") + chain[i];
        s += ")";
    }
    return s;
}

static uint64_t new_info(int stream, uint64_t seq, std::string what) {
    OpInfo I;
    I.stream = stream;
    I.seq = seq;
    I.what = std::move(what);
    I.nsite = backtrace(I.site, 6);
    g_info.push_back(std::move(I));
    return g_info.size();
}

uint64_t hb_host_op() {
    std::lock_guard<std::recursive_mutex> lk(g_queue_mu);
    streams_init_locked();
    if (!g_host_epoch_op) g_host_epoch_op = new_info(kHostStream, g_host[kHostStream], "host code");
    return g_host_epoch_op;
}

// Is op (or host epoch) `a` ordered before the running op, or before the host when none runs?
bool hb_ordered(uint64_t a) {
    const OpInfo& A = info_of(a);
    if (g_cur_op) {
        if (A.stream == g_cur_op->stream) return A.seq <= g_cur_op->seq;
        return clock_at(g_cur_op->clock, (size_t)A.stream) >= A.seq;
    }
    if (A.stream == kHostStream) return true;  // the host's own earlier accesses
    return clock_at(g_host, (size_t)A.stream) >= A.seq;
}

// ---- pinned host memory guarded while a queued copy may read or write it ----
struct PinnedGuard {
    uint64_t op;
    char* host;
    size_t n;
    bool download;
    uintptr_t plo, phi;                  // whole pages inside [host, host + n): protected
    std::vector<char> head, tail;        // the bytes on the partly covered pages, as the host left them
    bool ran;
};
static std::deque<PinnedGuard> g_guards;
static const size_t kPageSize = 4096;
static int g_guards_open;

// [lo, hi) back to read-write, then each guard's protection where it still covers it (no access wins
// over read-only where both cover a page).
static void protect_guards(uintptr_t lo, uintptr_t hi) {
    if (lo >= hi) return;
    mprotect((void*)lo, hi - lo, PROT_READ | PROT_WRITE);
    if (g_guards_open) return;
    for (int pass = 0; pass < 2; pass++)
        for (const PinnedGuard& g : g_guards) {
            uintptr_t a = std::max(lo, g.plo), b = std::min(hi, g.phi);
            if (a < b && g.download == (pass == 1)) mprotect((void*)a, b - a, g.download ? PROT_NONE : PROT_READ);
        }
}

void pinned_guards_open(bool open) {
    std::lock_guard<std::recursive_mutex> lk(g_queue_mu);
    if (open) {
        if (g_guards_open++ == 0)
            for (const PinnedGuard& g : g_guards)
                if (g.plo < g.phi) mprotect((void*)g.plo, g.phi - g.plo, PROT_READ | PROT_WRITE);
    } else if (--g_guards_open == 0) {
        for (const PinnedGuard& g : g_guards) protect_guards(g.plo, g.phi);
    }
}

const char* pinned_guard_at(uintptr_t a, char* buf, size_t len) {
    for (const PinnedGuard& g : g_guards) {
        if (a < (uintptr_t)g.host || a >= (uintptr_t)g.host + g.n) continue;
        DevAlloc* A = dev_lookup(a);
        snprintf(buf, len, "pinned memory %p (byte %zu of a %zu-byte cudaMallocHost block), byte %zu of the %s of a "
                 "%zu-byte cudaMemcpyAsync %s not yet synchronized with (cudaStreamSynchronize or cudaEventSynchronize "
                 "first; on a GPU the copy may still be running)", (void*)a, A ? (size_t)(a - A->start) : 0,
                 A ? A->size : 0, (size_t)(a - (uintptr_t)g.host), g.download ? "destination" : "source", g.n,
                 g.download ? "device to host" : "host to device");
        return buf;
    }
    return nullptr;
}

static void guard_add(uint64_t op, char* host, size_t n, bool download) {
    PinnedGuard g;
    g.op = op;
    g.host = host;
    g.n = n;
    g.download = download;
    g.ran = false;
    uintptr_t end = (uintptr_t)host + n;
    g.plo = ((uintptr_t)host + kPageSize - 1) / kPageSize * kPageSize;
    g.phi = end / kPageSize * kPageSize;
    // A page the copy covers only partly is protected too when the rest of it holds none of the
    // allocation's other bytes (a small buffer alone on its page: a step's statistics).
    DevAlloc* A = live_holding(host, n, true);
    uintptr_t head_page = (uintptr_t)host / kPageSize * kPageSize, tail_page = g.phi;
    if (A && g.plo > (uintptr_t)host && std::max(head_page, A->start) >= (uintptr_t)host &&
        std::min(head_page + kPageSize, A->start + A->size) <= end)
        g.plo = head_page;
    if (A && end > g.phi && std::max(tail_page, A->start) >= (uintptr_t)host &&
        std::min(tail_page + kPageSize, A->start + A->size) <= end)
        g.phi = tail_page + kPageSize;
    if (g.phi < g.plo) g.phi = g.plo;
    if (g.plo >= g.phi) {  // no whole page: every byte is on a partly covered one
        g.plo = g.phi = 0;
        g.head.assign(host, host + n);
    } else {
        g.head.assign(host, (char*)std::max((uintptr_t)host, std::min(end, g.plo)));
        g.tail.assign((char*)std::min(end, std::max((uintptr_t)host, g.phi)), (char*)end);
    }
    g_guards.push_back(std::move(g));
    if (g_guards.back().plo < g_guards.back().phi) protect_guards(g_guards.back().plo, g_guards.back().phi);
}

// The queued copy `op` runs (its first run): the host must not have written the bytes of its pinned
// side on partly covered pages since it was issued (the whole pages are protected).
static void guard_check(uint64_t op) {
    for (PinnedGuard& g : g_guards) {
        if (g.op != op || g.ran) continue;
        g.ran = true;
        for (size_t i = 0; i < g.head.size(); i++)
            if (g.host[i] != g.head[i]) {
                char d[512];
                cuda_cpu_fail("host code wrote %s", pinned_guard_at((uintptr_t)g.host + i, d, sizeof(d)));
            }
        char* t = g.host + g.n - g.tail.size();
        for (size_t i = 0; i < g.tail.size(); i++)
            if (t[i] != g.tail[i]) {
                char d[512];
                cuda_cpu_fail("host code wrote %s", pinned_guard_at((uintptr_t)t + i, d, sizeof(d)));
            }
    }
}

// Device work wrote pinned bytes [lo, hi): the other guards' record of those bytes follows.
static void guards_written(uint64_t op, uintptr_t lo, uintptr_t hi) {
    for (PinnedGuard& g : g_guards) {
        if (g.op == op || g.ran) continue;
        uintptr_t h0 = (uintptr_t)g.host, h1 = h0 + g.head.size();
        for (uintptr_t a = std::max(lo, h0); a < std::min(hi, h1); a++) g.head[a - h0] = *(char*)a;
        uintptr_t t0 = h0 + g.n - g.tail.size(), t1 = h0 + g.n;
        for (uintptr_t a = std::max(lo, t0); a < std::min(hi, t1); a++) g.tail[a - t0] = *(char*)a;
    }
}

// The host is now ordered after more work: lift the guards of the copies it synchronized with.
static void guards_release() {
    for (size_t i = 0; i < g_guards.size();) {
        const OpInfo& I = info_of(g_guards[i].op);
        if (g_guards[i].ran && clock_at(g_host, (size_t)I.stream) >= I.seq) {
            uintptr_t lo = g_guards[i].plo, hi = g_guards[i].phi;
            g_guards.erase(g_guards.begin() + (long)i);
            protect_guards(lo, hi);
        } else {
            i++;
        }
    }
}

// ---- issuing ----
Issued op_issue(cudaStream_t s, std::string what, OpFn fn, std::vector<OpAccess> access, const void* comm,
                std::function<void()> release, OpReach reach) {
    RuntimeScope scope;
    QueueLock lock;
    int si = stream_index(s);
    if (si < 0) cuda_cpu_fail("%s: not a live stream", what.c_str());
    StreamState& S = g_streams[si];
    Op* op = new Op();
    op->stream = si;
    op->seq = ++S.issued;
    op->clock = S.cur;
    if (g_eager) {
        // Work runs when issued: everything issued before is before it.
        for (const StreamState& T : g_streams) clock_join(op->clock, T.cur);
    } else if (si == kLegacyStream) {
        // The legacy default stream waits for the work of every blocking stream...
        for (size_t t = 0; t < g_streams.size(); t++)
            if (g_streams[t].blocking && t != kHostStream) clock_join(op->clock, g_streams[t].cur);
    } else if (S.blocking) {
        // ... and a blocking stream's work waits for the legacy stream's.
        clock_join(op->clock, g_streams[kLegacyStream].cur);
    }
    // Whatever the host has synchronized with finished before this was issued.
    clock_join(op->clock, g_host);
    op->clock[kHostStream] = g_host[kHostStream];
    op->what = what;
    op->nsite = backtrace(op->site, 6);
    op->run = std::move(fn);
    op->release = std::move(release);
    op->comm = comm;
    op->access = std::move(access);
    // An access list names everything a copy, memset or NCCL op touches.
    if (reach.all && !op->access.empty()) {
        reach.all = false;
        for (const OpAccess& a : op->access) reach.ptrs.push_back(a.lo);
    }
    op->reach = std::move(reach);
    op->nccl_recorded = false;
    op->diverged = false;
    OpInfo I;
    I.stream = si;
    I.seq = op->seq;
    I.what = std::move(what);
    I.nsite = op->nsite;
    memcpy(I.site, op->site, sizeof(I.site));
    g_info.push_back(std::move(I));
    op->id = g_info.size();
    S.cur = op->clock;
    if (S.cur.size() <= (size_t)si) S.cur.resize(si + 1, 0);
    S.cur[si] = op->seq;
    S.pending.push_back(op);
    if (comm) g_comm_pending[comm].push_back(op);
    // Host actions after this one are not ordered before it.
    g_host[kHostStream]++;
    g_host_epoch_op = 0;
    Issued out{op->id, op->stream, op->seq, op->clock};
    if (g_eager) host_wait_op(out);  // runs (and frees) op
    return out;
}

// ---- running batches ----
// need: per stream, how many of its ops must have run. Closed under what those ops are ordered
// after, and under NCCL's rule that one communicator's collectives run in issue order.
static void close_need(Clock& need) {
    need.resize(g_streams.size(), 0);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t t = 1; t < g_streams.size(); t++) {
            StreamState& S = g_streams[t];
            if (need[t] > S.issued) need[t] = S.issued;
            if (need[t] <= S.executed) continue;
            Clock before = need;
            clock_join(need, S.pending[need[t] - S.executed - 1]->clock);
            need[kHostStream] = 0;
            for (uint64_t k = 0; k < need[t] - S.executed; k++) {
                Op* o = S.pending[k];
                if (!o->comm) continue;
                for (Op* c : g_comm_pending[o->comm]) {
                    if (c == o) break;
                    if (need[c->stream] < c->seq) need[c->stream] = c->seq;
                }
            }
            if (need != before) changed = true;
        }
    }
}

// The ops of the batch in one order the clocks allow.
static std::vector<Op*> batch_sequence(const Clock& need, int order) {
    size_t ns = g_streams.size();
    std::vector<uint64_t> done(ns, 0);
    for (size_t t = 1; t < ns; t++) done[t] = g_streams[t].executed;
    std::map<const void*, size_t> comm_done;
    std::vector<Op*> seq;
    for (;;) {
        Op* pick = nullptr;
        for (size_t k = 1; k < ns; k++) {
            size_t t = order == ORDER_REVERSE ? ns - k : k;
            if (done[t] >= clock_at(need, t)) continue;
            Op* o = g_streams[t].pending[done[t] - g_streams[t].executed];
            bool ready = true;
            for (size_t u = 1; u < o->clock.size() && ready; u++)
                if (u != t && o->clock[u] > done[u]) ready = false;
            if (ready && o->comm && g_comm_pending[o->comm][comm_done[o->comm]] != o) ready = false;
            if (!ready) continue;
            if (order == ORDER_ISSUE) {
                if (!pick || o->id < pick->id) pick = o;
            } else {
                pick = o;
                break;
            }
        }
        if (!pick) break;
        seq.push_back(pick);
        done[pick->stream]++;
        if (pick->comm) comm_done[pick->comm]++;
    }
    for (size_t t = 1; t < ns; t++)
        if (done[t] < clock_at(need, t)) cuda_cpu_fail("internal error: the queued work of %s cannot run", g_streams[t].label.c_str());
    return seq;
}

// Runs seq[from, to); returns the NCCL op whose input differs from the first run's (replays), or null.
static Op* run_ops(const std::vector<Op*>& seq, size_t from, size_t to, const OpRun& r) {
    for (size_t i = from; i < to; i++) {
        Op* o = seq[i];
        o->diverged = false;
        g_cur_op = o;
        o->run(o, r);
        g_cur_op = nullptr;
        if (o->diverged) return o;
    }
    return nullptr;
}

static std::string describe_difference(uintptr_t a, const std::vector<Saved>& ref) {
    char d[256];
    describe_device_address(a, d, sizeof(d));
    std::string s = d;
    for (const Saved& v : ref) {
        if (a < v.a->start || a >= v.a->start + v.bytes.size()) continue;
        size_t w = (a - v.a->start) & ~(size_t)3;
        if (w + 4 <= v.bytes.size()) {
            float f0, f1;
            memcpy(&f0, v.bytes.data() + w, 4);
            memcpy(&f1, (const char*)v.a->start + w, 4);
            char b[128];
            snprintf(b, sizeof(b), " (the 4 bytes there as a float: %.9g in one order, %.9g in the other)", f0, f1);
            s += b;
        }
        break;
    }
    return s;
}

// Does running `seq` from `before` give what the first order gave? "" if so, else where it differs.
static std::string differs(const std::vector<Op*>& seq, const std::vector<Saved>& before, const std::vector<Saved>& first) {
    restore_live(before);
    Op* bad = run_ops(seq, 0, seq.size(), OpRun{false, NCCL_REPLAY});
    if (bad) return "the data " + bad->what + " sends (its input is not what it was in the first order)";
    uintptr_t a = first_difference(first, nullptr);
    return a ? describe_difference(a, first) : "";
}

// Two orders of one batch gave different results: find two unordered ops whose swap makes the
// difference (a search over orders between the two: each step moves ops of the second order to the
// front of the first), and stop naming them.
[[noreturn]] static void name_divergence(const std::vector<Op*>& s1, const std::vector<Op*>& s2, const std::vector<Saved>& before,
                                         const std::vector<Saved>& first, const std::string& name1, const std::string& name2) {
    size_t n = s1.size();
    // tau(k): s2's first k ops, then the rest in s1's order. tau(0) = s1 gives `first`; tau(n) = s2 does not.
    auto tau = [&](size_t k) {
        std::vector<Op*> t(s2.begin(), s2.begin() + (long)k);
        std::set<Op*> in(t.begin(), t.end());
        for (Op* o : s1)
            if (!in.count(o)) t.push_back(o);
        return t;
    };
    size_t lo = 0, hi = n;
    std::string where_hi = differs(s2, before, first);
    if (where_hi.empty()) where_hi = "(not reproduced)";
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        std::string w = differs(tau(mid), before, first);
        if (w.empty()) lo = mid;
        else { hi = mid; where_hi = w; }
    }
    // tau(lo) = P + y1..ym + x + rest and tau(hi) = P + x + y1..ym + rest: x moved ahead of the y's.
    std::vector<Op*> tl = tau(lo);
    Op* x = s2[lo];
    size_t px = std::find(tl.begin(), tl.end(), x) - tl.begin();
    std::vector<Op*> ys(tl.begin() + (long)lo, tl.begin() + (long)px);
    auto rho = [&](size_t j) {  // P + y1..yj + x + y(j+1)..ym + rest
        std::vector<Op*> t(tl.begin(), tl.begin() + (long)lo);
        t.insert(t.end(), ys.begin(), ys.begin() + (long)j);
        t.push_back(x);
        t.insert(t.end(), ys.begin() + (long)j, ys.end());
        t.insert(t.end(), tl.begin() + (long)px + 1, tl.end());
        return t;
    };
    size_t a = 0, b = ys.size();  // rho(0) differs, rho(m) = tau(lo) does not
    std::string where = where_hi;
    while (b - a > 1) {
        size_t mid = (a + b) / 2;
        std::string w = differs(rho(mid), before, first);
        if (w.empty()) b = mid;
        else { a = mid; where = w; }
    }
    Op* y = ys.empty() ? nullptr : ys[a];
    std::string dx = op_description(x->id), dy = y ? op_description(y->id) : std::string("the work before it");
    cuda_cpu_fail("the result depends on the order of work that nothing orders: %s and %s are ordered by no event, "
                  "stream wait or synchronization, and running the second before the first changes %s (seen in the "
                  "stream orders '%s' and '%s'); record an event after the one and make the other's stream wait for it "
                  "(cudaEventRecord, cudaStreamWaitEvent), or put both on one stream",
                  dy.c_str(), dx.c_str(), where.c_str(), name1.c_str(), name2.c_str());
}

static void retire(const std::vector<Op*>& seq) {
    for (Op* o : seq) {
        StreamState& S = g_streams[o->stream];
        if (S.pending.empty() || S.pending.front() != o) cuda_cpu_fail("internal error: ops retired out of order");
        S.pending.pop_front();
        S.executed++;
        if (o->comm) {
            std::deque<Op*>& q = g_comm_pending[o->comm];
            if (q.empty() || q.front() != o) cuda_cpu_fail("internal error: NCCL ops retired out of order");
            q.pop_front();
        }
    }
    for (Op* o : seq) {
        if (o->release) o->release();
        delete o;
    }
}

static bool g_running;

// Runs everything `need` asks for (closed first), once per order when the orders differ.
static void run_need(Clock need) {
    close_need(need);
    if (g_running) cuda_cpu_fail("internal error: device work issued a synchronization");
    std::vector<std::vector<Op*>> seqs;
    for (int order : g_orders) seqs.push_back(batch_sequence(need, order));
    if (seqs[0].empty()) return;
    g_running = true;
    DeviceAccess access;
    // Where every order runs the same op, it runs once. Where they part, the window lasts until they
    // have run the same set of ops again: it runs once per order that differs in it, each from the same
    // memory, and each must leave what the first left.
    const std::vector<Op*>& s1 = seqs[0];
    size_t n = s1.size(), i = 0;
    std::vector<std::unordered_map<Op*, int>> apart(seqs.size());
    while (i < n) {
        bool common = true;
        for (size_t k = 1; k < seqs.size(); k++) common &= seqs[k][i] == s1[i];
        if (common) {
            run_ops(s1, i, i + 1, OpRun{true, NCCL_REAL});
            i++;
            continue;
        }
        size_t j = i;
        bool open = true;
        while (open) {
            open = false;
            for (size_t k = 1; k < seqs.size(); k++) {
                for (Op* o : {s1[j], seqs[k][j]}) {
                    int d = o == s1[j] ? 1 : -1;
                    if (s1[j] == seqs[k][j]) continue;
                    auto it = apart[k].find(o);
                    if (it == apart[k].end()) apart[k][o] = d;
                    else if ((it->second += d) == 0) apart[k].erase(it);
                }
                open |= !apart[k].empty();
            }
            j++;
        }
        g_windows++;
        g_window_ops += j - i;
        // Every order runs the same ops: the memory they may touch is all a run can change.
        std::vector<DevAlloc*> touched = reach_of(s1.data() + i, j - i);
        std::vector<Saved> before = save_live(touched);
        run_ops(s1, i, j, OpRun{true, NCCL_RECORD});
        std::vector<Saved> first = save_live(touched);
        for (size_t k = 1; k < seqs.size(); k++) {
            if (std::equal(s1.begin() + (long)i, s1.begin() + (long)j, seqs[k].begin() + (long)i)) continue;
            restore_live(before);
            Op* bad = run_ops(seqs[k], i, j, OpRun{false, NCCL_REPLAY});
            if (bad || first_difference(first, nullptr))
                name_divergence(std::vector<Op*>(s1.begin() + (long)i, s1.begin() + (long)j),
                                std::vector<Op*>(seqs[k].begin() + (long)i, seqs[k].begin() + (long)j), before, first,
                                g_order_names[0], g_order_names[k]);
        }
        i = j;
    }
    g_running = false;
    retire(seqs[0]);
}

void host_wait_op(const Issued& op) {
    QueueLock lock;
    int si = op.stream;
    uint64_t seq = op.seq;
    Clock need(g_streams.size(), 0);
    need[si] = seq;
    Clock c = op.clock;
    run_need(need);
    clock_join(g_host, c);
    if (g_host.size() <= (size_t)si) g_host.resize(si + 1, 0);
    if (g_host[si] < seq) g_host[si] = seq;
    g_host_epoch_op = 0;
    guards_release();
}

// The host waits for clock c's work and is then ordered after it.
static void host_wait_clock(const Clock& c) {
    Clock need = c;
    need.resize(g_streams.size(), 0);
    need[kHostStream] = 0;
    run_need(need);
    uint64_t epoch = g_host[kHostStream];
    clock_join(g_host, c);
    g_host[kHostStream] = epoch;
    g_host_epoch_op = 0;
    guards_release();
}

static Clock all_streams_clock() {
    Clock c(g_streams.size(), 0);
    for (size_t t = 1; t < g_streams.size(); t++) c[t] = g_streams[t].issued;
    return c;
}

void drain_all_pending() {
    QueueLock lock;
    if (g_running) return;
    run_need(all_streams_clock());
}

// cudaFree, cudaFreeHost and cudaDeviceSynchronize: the host waits for all the device's work.
void device_synchronize_host() {
    QueueLock lock;
    host_wait_clock(all_streams_clock());
}

// ============================================================================================
// Copies and memsets
// ============================================================================================

enum Side { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE };
static Side side_of(const void* p, size_t n) {
    if (!in_device_region(p)) return SIDE_PAGEABLE;
    DevAlloc* A = live_holding(p, n ? n : 1, true);
    return A && A->kind == A_HOST ? SIDE_PINNED : SIDE_DEVICE;
}

static const char* kind_words(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToDevice: return "host to device";
    case cudaMemcpyDeviceToHost: return "device to host";
    case cudaMemcpyDeviceToDevice: return "device to device";
    case cudaMemcpyHostToHost: return "host to host";
    default: return "default";
    }
}

static cudaError_t range_error(const char* api, const char* which, const void* p, size_t n) {
    fprintf(stderr, "cuda_cpu: %s: %s [%p, +%zu bytes) is not inside a live device allocation\n", api, which, p, n);
    return set_cuda_error(cudaErrorInvalidValue);
}

// The checks CUDA makes when a copy is issued; direction from the kind (Default: by the region).
static cudaError_t copy_checks(const char* api, void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    bool dst_dev, src_dev;
    switch (kind) {
    case cudaMemcpyHostToDevice: dst_dev = true; src_dev = false; break;
    case cudaMemcpyDeviceToHost: dst_dev = false; src_dev = true; break;
    case cudaMemcpyDeviceToDevice: dst_dev = src_dev = true; break;
    case cudaMemcpyHostToHost: case cudaMemcpyDefault:
        dst_dev = in_device_region(dst);
        src_dev = in_device_region(src);
        if (n && dst_dev && !live_holding(dst, n, true)) return range_error(api, "destination", dst, n);
        if (n && src_dev && !live_holding(src, n, true)) return range_error(api, "source", src, n);
        dst_dev = src_dev = false;
        break;
    default: return set_cuda_error(cudaErrorInvalidMemcpyDirection);
    }
    if (n && dst_dev && !live_holding(dst, n, false)) return range_error(api, "destination", dst, n);
    if (n && src_dev && !live_holding(src, n, false)) return range_error(api, "source", src, n);
    // CUDA's copies are memcpy, not memmove: overlapping ranges are undefined.
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (n && d < s + n && s < d + n) {
        fprintf(stderr, "cuda_cpu: %s: the source [%p, +%zu) and the destination [%p, +%zu) overlap; a CUDA copy is a "
                "memcpy (overlap is undefined), not a memmove\n", api, src, n, dst, n);
        return set_cuda_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

static void copy_run(Op* op, const OpRun& r, void* dst, const void* src, size_t n, const std::vector<char>* staged) {
    if (r.first) {
        guard_check(op->id);
        if (g_check) {
            if (in_device_region(src) && !staged) hb_access((uintptr_t)src, n, false, 0);
            if (in_device_region(dst)) hb_access((uintptr_t)dst, n, true, 0);
        }
    }
    if (r.first && g_count_file)
        count_line("copy bytes=%zu from=%s to=%s", n, in_device_region(src) ? "device" : "host",
                   in_device_region(dst) ? "device" : "host");
    runtime_copy(dst, staged ? staged->data() : src, n);
    DevAlloc* D = r.first && in_device_region(dst) ? live_holding(dst, n, true) : nullptr;
    if (D && D->kind == A_HOST) guards_written(op->id, (uintptr_t)dst, (uintptr_t)dst + n);
}

// CUDA_CPU_HOST_TRAFFIC=PATH: the asynchronous copies between device memory and pinned host memory
// (what crosses a GPU's host link beside its work: an offloaded optimizer's gradients and weights),
// counted as they are issued; at exit one line appended to PATH (one write with O_APPEND: the ranks
// of an mpirun may share the file):
//   host_traffic pid=.. to_host_calls=.. to_host_bytes=.. to_device_calls=.. to_device_bytes=..
// Synchronous cudaMemcpy and copies of pageable memory are not counted.
static uint64_t g_host_traffic[2][2];  // [to the host, to the device][calls, bytes]

static void host_traffic_write() {
    const char* path = getenv("CUDA_CPU_HOST_TRAFFIC");
    char line[256];
    int len = snprintf(line, sizeof(line), "host_traffic pid=%d to_host_calls=%llu to_host_bytes=%llu "
                       "to_device_calls=%llu to_device_bytes=%llu\n", (int)getpid(),
                       (unsigned long long)g_host_traffic[0][0], (unsigned long long)g_host_traffic[0][1],
                       (unsigned long long)g_host_traffic[1][0], (unsigned long long)g_host_traffic[1][1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || write(fd, line, (size_t)len) != (ssize_t)len)
        fprintf(stderr, "cuda_cpu: CUDA_CPU_HOST_TRAFFIC=%s: cannot append the traffic line: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
}

static cudaError_t memcpy_issue(const char* api, void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                                cudaStream_t s, bool async, uintptr_t pc) {
    (void)pc;
    if (!stream_is_valid(s)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    cudaError_t e = copy_checks(api, dst, src, n, kind);
    if (e != cudaSuccess || n == 0) return e;
    QueueLock lock;
    Side sd = side_of(dst, n), ss = side_of(src, n);
    if (async && ((sd == SIDE_PINNED && ss == SIDE_DEVICE) || (sd == SIDE_DEVICE && ss == SIDE_PINNED))) {
        g_host_traffic[sd == SIDE_PINNED ? 0 : 1][0]++;
        g_host_traffic[sd == SIDE_PINNED ? 0 : 1][1] += n;
    }
    char what[160];
    snprintf(what, sizeof(what), "%s %s (%zu bytes)", api, kind_words(kind), n);
    std::vector<OpAccess> acc;
    if (ss != SIDE_PAGEABLE) acc.push_back({(uintptr_t)src, (uintptr_t)src + n, false});
    if (sd != SIDE_PAGEABLE) acc.push_back({(uintptr_t)dst, (uintptr_t)dst + n, true});
    if (!async) s = cudaStreamLegacy;
    // A pageable source is staged when the copy is issued (CUDA copies it to a staging buffer first).
    std::shared_ptr<std::vector<char>> staged;
    if (async && ss == SIDE_PAGEABLE && sd != SIDE_PAGEABLE)
        staged = std::make_shared<std::vector<char>>((const char*)src, (const char*)src + n);
    Issued op = op_issue(s, what, [dst, src, n, staged](Op* o, const OpRun& r) { copy_run(o, r, dst, src, n, staged.get()); },
                         std::move(acc));
    if (g_eager) return cudaSuccess;
    // Synchronous: cudaMemcpy, and an async copy to pageable memory (or between pageable buffers).
    if (!async || sd == SIDE_PAGEABLE) {
        host_wait_op(op);
        return cudaSuccess;
    }
    // Queued: its pinned side is guarded until the host synchronizes with it.
    if (sd == SIDE_PINNED) guard_add(op.id, (char*)dst, n, true);
    if (ss == SIDE_PINNED) guard_add(op.id, (char*)src, n, false);
    return cudaSuccess;
}

static cudaError_t memset_issue(const char* api, void* p, int value, size_t n, cudaStream_t s) {
    if (!stream_is_valid(s)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    if (n && !live_holding(p, n, false)) return range_error(api, "destination", p, n);
    if (n == 0) return cudaSuccess;
    char what[128];
    snprintf(what, sizeof(what), "%s (%zu bytes)", api, n);
    op_issue(s, what, [p, value, n](Op*, const OpRun& r) {
        if (r.first && g_check) hb_access((uintptr_t)p, n, true, 0);
        if (r.first && g_count_file) count_line("memset bytes=%zu", n);
        memset(p, value, n);
        device_written(p, n);
    }, {{(uintptr_t)p, (uintptr_t)p + n, true}});
    return cudaSuccess;
}

static double now_ms() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    return memcpy_issue("cudaMemcpy", dst, src, n, kind, cudaStreamLegacy, false, (uintptr_t)__builtin_return_address(0));
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    return memcpy_issue("cudaMemcpyAsync", dst, src, n, kind, s, true, (uintptr_t)__builtin_return_address(0));
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
    for (size_t r = 0; r < height; r++) {
        cudaError_t e = memcpy_issue("cudaMemcpy2D", (char*)dst + r * dpitch, (const char*)src + r * spitch, width, kind,
                                     cudaStreamLegacy, false, (uintptr_t)__builtin_return_address(0));
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}
// Asynchronous with respect to the host, on the legacy default stream (CUDA's "API synchronization
// behavior": memsets of device memory are).
cudaError_t cudaMemset(void* p, int value, size_t n) { return memset_issue("cudaMemset", p, value, n, cudaStreamLegacy); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) { return memset_issue("cudaMemsetAsync", p, value, n, s); }

// ============================================================================================
// Streams and events
// ============================================================================================

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
    if (!s) return set_cuda_error(cudaErrorInvalidValue);
    QueueLock lock;
    StreamState S;
    S.blocking = !(flags & cudaStreamNonBlocking);
    S.live = true;
    S.issued = S.executed = 0;
    char label[64];
    snprintf(label, sizeof(label), "stream %zu%s", g_streams.size() - 2, S.blocking ? "" : " (non-blocking)");
    S.label = label;
    g_streams.push_back(std::move(S));
    *s = new CUstream_st{kStreamMagic, (int)g_streams.size() - 1};
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int) { return cudaStreamCreateWithFlags(s, flags); }
// Work already queued on a destroyed stream still runs (as CUDA promises); the handle is dead.
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread || s->magic != kStreamMagic)
        return set_cuda_error(cudaErrorInvalidResourceHandle);
    QueueLock lock;
    g_streams[s->index].live = false;
    s->magic = 0;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    int si = stream_index(s);
    if (si < 0) return set_cuda_error(cudaErrorInvalidResourceHandle);
    QueueLock lock;
    if (dropped("cudaStreamSynchronize", pc)) return cudaSuccess;
    Clock c = g_streams[si].cur;
    c.resize(g_streams.size(), 0);
    c[si] = g_streams[si].issued;
    // The legacy default stream's work waits for every blocking stream's: synchronizing with it
    // waits for theirs too.
    if (si == kLegacyStream)
        for (size_t t = 1; t < g_streams.size(); t++)
            if (g_streams[t].blocking) clock_join(c, g_streams[t].cur);
    host_wait_clock(c);
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    int si = stream_index(s);
    if (si < 0 || !valid_event(e)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    QueueLock lock;
    if (dropped("cudaStreamWaitEvent", pc)) return cudaSuccess;
    // An event never recorded: nothing to wait for (as CUDA).
    if (e->recorded) {
        StreamState& S = g_streams[si];
        uint64_t own = clock_at(S.cur, (size_t)si);
        clock_join(S.cur, e->clock);
        S.cur[si] = own;
    }
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    if (!e) return set_cuda_error(cudaErrorInvalidValue);
    *e = new CUevent_st();
    (*e)->magic = kEventMagic;
    (*e)->flags = flags;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
// A record still queued keeps the event's memory (it is not freed): the record's op writes its time.
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!valid_event(e)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    e->magic = 0;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    if (!valid_event(e) || !stream_is_valid(s)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    QueueLock lock;
    if (dropped("cudaEventRecord", pc)) return cudaSuccess;
    uint64_t gen = ++e->generation;
    e->timed = false;
    OpReach nothing;  // it touches no device memory
    nothing.all = false;
    Issued op = op_issue(s, "cudaEventRecord", [e, gen](Op*, const OpRun&) {
        if (e->generation == gen) {
            e->ms = now_ms();
            e->timed = true;
        }
    }, {}, nullptr, nullptr, nothing);
    int si = stream_index(s);
    e->recorded = true;
    e->clock = op.clock;
    e->clock.resize(std::max(e->clock.size(), (size_t)si + 1), 0);
    e->clock[si] = op.seq;
    return cudaSuccess;
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int) { return cudaEventRecord(e, s); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    if (!valid_event(e)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    QueueLock lock;
    if (dropped("cudaEventSynchronize", pc)) return cudaSuccess;
    if (e->recorded) host_wait_clock(e->clock);
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms) return set_cuda_error(cudaErrorInvalidValue);
    if (!valid_event(start) || !valid_event(end)) return set_cuda_error(cudaErrorInvalidResourceHandle);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return set_cuda_error(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return set_cuda_error(cudaErrorInvalidResourceHandle);
    if (!start->timed || !end->timed) return set_cuda_error(cudaErrorNotReady);
    *ms = (float)(end->ms - start->ms);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    QueueLock lock;
    if (dropped("cudaDeviceSynchronize", pc)) return cudaSuccess;
    host_wait_clock(all_streams_clock());
    return cudaSuccess;
}

}  // extern "C"
