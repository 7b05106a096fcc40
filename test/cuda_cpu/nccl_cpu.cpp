// nccl_cpu.cpp: the NCCL collectives the trainer calls, mapped onto MPI so that `mpirun -np N` runs
// the GPU trainer's sharded code path on the CPU. One communicator spans MPI_COMM_WORLD (one rank
// per process, as the trainer runs). A collective is queued on its stream like any device work
// (streams_cpu.cpp) and talks to the other ranks when it runs; one communicator's collectives run in
// the order they were called, as NCCL requires of every rank. fp16/bf16 reduce in fp32; an all-reduce
// is a reduce to rank 0 plus a broadcast, so every rank gets the same bits, as with NCCL's rings. The
// host's own MPI calls run the queued device work first (the MPI_* wrappers at the end). ncclSend and
// ncclRecv keep NCCL's semantics (a group's complete together; one whose peer never makes the matching
// call is named instead of hanging: "point to point" below); ncclCommSplit makes communicators over
// some of the ranks (MPI_Comm_split).
//
// Traffic counter: with NCCL_CPU_TRAFFIC=PATH in the environment, each communicator counts, per
// collective kind, its calls, the bytes of the data each call moves in its element type (all-reduce,
// reduce, broadcast: count; reduce-scatter: recvcount x ranks; all-gather: sendcount x ranks; send,
// recv: count) and the bytes this rank would send under NCCL's ring algorithm (all-reduce 2(R-1)/R n,
// this rank's exact share when R does not divide n; reduce-scatter and all-gather (R-1)/R n; reduce: n
// from every rank but the root; broadcast: n from every rank but the ring's last; send: n; recv: 0),
// and ncclCommDestroy appends one line to PATH (one write with O_APPEND: ranks may share the file):
//   nccl_traffic rank=0 ranks=2 allreduce_calls=.. allreduce_bytes=.. allreduce_sent=.. reducescatter_...
//   allgather_... reduce_... broadcast_... send_... recv_...
// What the emulation itself sends over MPI is not what is counted: the ring is what a GPU would move.
//
// Without MPI: when the program's ranks talk over common/ranks.c's host transport (-pi tcp|fs: no
// mpirun, MPI never initialised), the communicator runs over that instead (ranks_raw_gather and
// ranks_raw_broadcast): every collective is a gather to rank 0, which reduces in rank order in the
// wide type, and a broadcast back, so every rank gets the same bits, run after run (at 2 ranks the
// same bits as over MPI: a sum of two does not depend on its order). The host's ranks_* collectives
// run the queued device work first (ranks_set_before_collective), as the MPI wrappers below do.
// The ranks_* symbols are weak: the runtime's own test programs, built without common/ranks.c, have
// no host transport and use MPI.
#include "cuda_cpu_internal.h"
#include "../../common/ranks.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#pragma weak ranks_self
#pragma weak ranks_raw_gather
#pragma weak ranks_raw_broadcast
#pragma weak ranks_set_before_collective

enum TrafficKind { kAllReduce, kReduceScatter, kAllGather, kReduce, kBroadcast, kSend, kRecv, kTrafficKinds };

struct Traffic {
    uint64_t calls, bytes, sent;
};

struct ncclComm {
    uint32_t magic;
    MPI_Comm comm;   // over MPI
    bool host;       // over the ranks' host transport instead (no MPI)
    int rank, nranks;
    Traffic traffic[kTrafficKinds];
};

namespace {

const uint32_t kCommMagic = 0x4e43434cu;
const char kIdTag[] = "cuda_cpu nccl id";

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

const char* op_name(ncclRedOp_t op) {
    switch (op) {
    case ncclSum: return "ncclSum";
    case ncclProd: return "ncclProd";
    case ncclMax: return "ncclMax";
    case ncclMin: return "ncclMin";
    case ncclAvg: return "ncclAvg";
    default: return "a custom ncclRedOp_t";
    }
}

ncclComm* comm_of(ncclComm_t c, const char* api) {
    if (!c || c->magic != kCommMagic) cuda_cpu_fail("%s: not a live ncclComm_t", api);
    return c;
}

int mpi_count(size_t n, const char* api) {
    if (n > (size_t)INT_MAX) cuda_cpu_fail("%s: %zu elements exceed what one MPI call moves here (%d)", api, n, INT_MAX);
    return (int)n;
}

// One ncclSend or ncclRecv, kept until its group ends (p2p_issue).
struct P2pCall {
    bool send;
    void* buf;
    size_t count;
    ncclDataType_t type;
    int peer;
    ncclComm* comm;
    cudaStream_t stream;
};
// The host's groups (ncclGroupStart nesting) and the sends and receives called inside them.
thread_local int g_group_depth;
thread_local std::vector<P2pCall> g_group_p2p;
void p2p_issue(const std::vector<P2pCall>& calls, const char* api);

const char* const kTrafficNames[kTrafficKinds] = {"allreduce", "reducescatter", "allgather", "reduce", "broadcast",
                                                  "send", "recv"};

void count_traffic(ncclComm* c, TrafficKind kind, uint64_t bytes, uint64_t sent) {
    Traffic* t = &c->traffic[kind];
    t->calls++;
    t->bytes += bytes;
    t->sent += sent;
}

// The ring all-reduce splits n elements into R chunks (the first n % R one longer); a rank sends every
// chunk but its own twice, once reducing and once gathering.
uint64_t allreduce_ring_sent(const ncclComm* c, uint64_t n) {
    uint64_t R = (uint64_t)c->nranks, own = n / R + ((uint64_t)c->rank < n % R ? 1 : 0);
    return 2 * (n - own);
}

void write_traffic(const ncclComm* c) {
    const char* path = getenv("NCCL_CPU_TRAFFIC");
    if (!path || !*path) return;
    char line[2048];  // at most ~600 characters: 5 kinds x 3 counters of 20 digits
    int len = snprintf(line, sizeof(line), "nccl_traffic rank=%d ranks=%d", c->rank, c->nranks);
    for (int k = 0; k < kTrafficKinds; k++)
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %s_calls=%" PRIu64 " %s_bytes=%" PRIu64 " %s_sent=%" PRIu64,
                        kTrafficNames[k], c->traffic[k].calls, kTrafficNames[k], c->traffic[k].bytes, kTrafficNames[k],
                        c->traffic[k].sent);
    len += snprintf(line + len, sizeof(line) - (size_t)len, "\n");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || write(fd, line, (size_t)len) != (ssize_t)len)
        fprintf(stderr, "nccl_cpu: NCCL_CPU_TRAFFIC=%s: cannot append the traffic line: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
}

void check_mpi(int rc, const char* what) {
    if (rc != MPI_SUCCESS) cuda_cpu_fail("%s failed (MPI error %d)", what, rc);
}

// Reductions run on a temporary of the "wide" type: float for every floating type (fp16/bf16 are
// summed in fp32 and rounded once, at the end), the native type for integers.
struct Wide {
    MPI_Datatype mpi;
    size_t size;
    bool is_float;
};

Wide wide_of(ncclDataType_t t, const char* api) {
    switch (t) {
    case ncclFloat16: case ncclBfloat16: case ncclFloat32: return {MPI_FLOAT, 4, true};
    case ncclFloat64: return {MPI_DOUBLE, 8, true};
    case ncclInt8: return {MPI_INT8_T, 1, false};
    case ncclUint8: return {MPI_UINT8_T, 1, false};
    case ncclInt32: return {MPI_INT32_T, 4, false};
    case ncclUint32: return {MPI_UINT32_T, 4, false};
    case ncclInt64: return {MPI_INT64_T, 8, false};
    case ncclUint64: return {MPI_UINT64_T, 8, false};
    default: cuda_cpu_fail("%s: data type %d is not emulated (fp8 is not)", api, (int)t);
    }
}

MPI_Op mpi_op(ncclRedOp_t op, const char* api) {
    switch (op) {
    case ncclSum: case ncclAvg: return MPI_SUM;
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: cuda_cpu_fail("%s: reduction %s is not emulated", api, op_name(op));
    }
}

std::vector<unsigned char> widen(const void* src, size_t n, ncclDataType_t t) {
    Wide w = wide_of(t, "nccl");
    std::vector<unsigned char> out(n * w.size);
    if (t == ncclFloat16 || t == ncclBfloat16) {
        float* o = reinterpret_cast<float*>(out.data());
        for (size_t i = 0; i < n; i++)
            o[i] = t == ncclFloat16 ? __half2float(static_cast<const __half*>(src)[i])
                                    : __bfloat162float(static_cast<const __nv_bfloat16*>(src)[i]);
    } else if (n) {
        memcpy(out.data(), src, n * w.size);
    }
    return out;
}

void narrow(void* dst, const unsigned char* wide, size_t n, ncclDataType_t t, ncclRedOp_t op, int nranks) {
    Wide w = wide_of(t, "nccl");
    if (op == ncclAvg) {
        // NCCL divides the sum by the rank count; so do we, in the wide type.
        for (size_t i = 0; i < n; i++) {
            switch (w.mpi == MPI_FLOAT ? 0 : w.mpi == MPI_DOUBLE ? 1 : 2) {
            case 0: ((float*)wide)[i] /= (float)nranks; break;
            case 1: ((double*)wide)[i] /= (double)nranks; break;
            default:
                if (w.size == 1) ((int8_t*)wide)[i] /= nranks;
                else if (w.size == 4) ((int32_t*)wide)[i] /= nranks;
                else ((int64_t*)wide)[i] /= nranks;
            }
        }
    }
    if (t == ncclFloat16 || t == ncclBfloat16) {
        const float* f = reinterpret_cast<const float*>(wide);
        for (size_t i = 0; i < n; i++) {
            if (t == ncclFloat16) static_cast<__half*>(dst)[i] = __float2half(f[i]);
            else static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16(f[i]);
        }
    } else if (n) {
        memmove(dst, wide, n * w.size);
    }
}

void ensure_mpi() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return;
    int provided;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    atexit([] {
        int fin = 0;
        MPI_Finalized(&fin);
        if (fin) return;
        drain_all_pending();  // queued collectives first
        PMPI_Finalize();
    });
}

// The ranks' host transport is how this process's ranks talk (no MPI initialised).
bool host_transport() {
    if (!ranks_self) return false;
    const Ranks* r = ranks_self();
    return r->host_transport && r->num_ranks > 1 && !r->mpi;
}

template <typename T>
void reduce_into(T* acc, const T* x, size_t n, ncclRedOp_t op) {
    switch (op) {
    case ncclSum: case ncclAvg: for (size_t i = 0; i < n; i++) acc[i] += x[i]; break;
    case ncclProd: for (size_t i = 0; i < n; i++) acc[i] *= x[i]; break;
    case ncclMax: for (size_t i = 0; i < n; i++) acc[i] = x[i] > acc[i] ? x[i] : acc[i]; break;
    case ncclMin: for (size_t i = 0; i < n; i++) acc[i] = x[i] < acc[i] ? x[i] : acc[i]; break;
    default: cuda_cpu_fail("nccl: reduction %s is not emulated", op_name(op));
    }
}

// acc op= x, n elements of t's wide type (what widen made).
void reduce_wide(unsigned char* acc, const unsigned char* x, size_t n, ncclDataType_t t, ncclRedOp_t op) {
    switch (t) {
    case ncclFloat16: case ncclBfloat16: case ncclFloat32: reduce_into((float*)acc, (const float*)x, n, op); break;
    case ncclFloat64: reduce_into((double*)acc, (const double*)x, n, op); break;
    case ncclInt8: reduce_into((int8_t*)acc, (const int8_t*)x, n, op); break;
    case ncclUint8: reduce_into((uint8_t*)acc, (const uint8_t*)x, n, op); break;
    case ncclInt32: reduce_into((int32_t*)acc, (const int32_t*)x, n, op); break;
    case ncclUint32: reduce_into((uint32_t*)acc, (const uint32_t*)x, n, op); break;
    case ncclInt64: reduce_into((int64_t*)acc, (const int64_t*)x, n, op); break;
    case ncclUint64: reduce_into((uint64_t*)acc, (const uint64_t*)x, n, op); break;
    default: cuda_cpu_fail("nccl: data type %d is not emulated (fp8 is not)", (int)t);
    }
}

// Over the host transport: every rank's wide buffer reduced into every rank's, in rank order on
// rank 0 (deterministic), in chunks that bound rank 0's gather buffer.
void host_allreduce(const ncclComm* c, unsigned char* wide, size_t n, ncclDataType_t t, ncclRedOp_t op) {
    size_t ws = wide_of(t, "nccl").size, chunk = (size_t)1 << 24;
    std::vector<unsigned char> all(c->rank == 0 ? (n < chunk ? n : chunk) * ws * (size_t)c->nranks : 0);
    for (size_t at = 0; at < n || at == 0; at += chunk) {
        size_t k = n - at < chunk ? n - at : chunk, bytes = k * ws;
        unsigned char* p = wide + at * ws;
        ranks_raw_gather(p, all.data(), bytes);
        if (c->rank == 0) {
            for (int r = 1; r < c->nranks; r++) reduce_wide(all.data(), all.data() + (size_t)r * bytes, k, t, op);
            if (bytes) memcpy(p, all.data(), bytes);
        }
        ranks_raw_broadcast(p, bytes, 0);
        if (n == 0) break;
    }
}

}  // namespace

extern "C" {

const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "unknown result";
    }
}
const char* ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclGetVersion(int* v) {
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, kIdTag, sizeof(kIdTag));
    uint64_t salt = ((uint64_t)getpid() << 32) ^ (uint64_t)clock64();
    memcpy(id->internal + sizeof(kIdTag), &salt, sizeof(salt));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
    const char* api = "ncclCommInitRank";
    if (!out) return ncclInvalidArgument;
    if (memcmp(id.internal, kIdTag, sizeof(kIdTag)) != 0)
        cuda_cpu_fail("%s: the ncclUniqueId did not come from ncclGetUniqueId (broadcast rank 0's id to every rank)", api);
    uint64_t salt;
    memcpy(&salt, id.internal + sizeof(kIdTag), sizeof(salt));
    if (host_transport()) {
        const Ranks* rs = ranks_self();
        if (nranks != rs->num_ranks || rank != rs->rank)
            cuda_cpu_fail("%s(nranks=%d, rank=%d): the emulation needs one communicator over all %d ranks, with the NCCL "
                          "rank equal to the process's rank (%d)", api, nranks, rank, rs->num_ranks, rs->rank);
        // Every rank must have been handed the same id, as with NCCL.
        std::vector<uint64_t> all(rank == 0 ? (size_t)nranks : 0);
        ranks_raw_gather(&salt, all.data(), sizeof(salt));
        uint8_t same = 1;
        for (size_t r = 1; r < all.size(); r++) same &= all[r] == all[0];
        ranks_raw_broadcast(&same, 1, 0);
        if (!same) cuda_cpu_fail("%s: the ranks were given different ncclUniqueIds", api);
        ranks_set_before_collective([] { drain_all_pending(); });
        ncclComm* c = new ncclComm();
        c->magic = kCommMagic;
        c->host = true;
        c->rank = rank;
        c->nranks = nranks;
        *out = c;
        return ncclSuccess;
    }
    ensure_mpi();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (nranks != wsize || rank != wrank)
        cuda_cpu_fail("%s(nranks=%d, rank=%d): the emulation needs one communicator over all %d MPI ranks, "
                      "with the NCCL rank equal to the MPI rank (%d)", api, nranks, rank, wsize, wrank);
    // Every rank must have been handed the same id, as with NCCL.
    uint64_t lo, hi;
    check_mpi(PMPI_Allreduce(&salt, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    check_mpi(PMPI_Allreduce(&salt, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (lo != hi) cuda_cpu_fail("%s: the ranks were given different ncclUniqueIds", api);
    ncclComm* c = new ncclComm();
    c->magic = kCommMagic;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c->comm), "MPI_Comm_dup");
    c->rank = rank;
    c->nranks = nranks;
    *out = c;
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t*) {
    return ncclCommInitRank(out, nranks, id, rank);
}
ncclResult_t ncclCommFinalize(ncclComm_t c) {
    comm_of(c, "ncclCommFinalize");
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) {
    comm_of(c, "ncclCommDestroy");
    drain_all_pending();  // its queued collectives run first
    write_traffic(c);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !c->host) MPI_Comm_free(&c->comm);
    c->magic = 0;
    delete c;
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }
ncclResult_t ncclCommCount(const ncclComm_t c, int* n) {
    *n = comm_of(c, "ncclCommCount")->nranks;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t c, int* r) {
    *r = comm_of(c, "ncclCommUserRank")->rank;
    return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(const ncclComm_t c, int* d) {
    comm_of(c, "ncclCommCuDevice");
    return cudaGetDevice(d) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r) {
    comm_of(c, "ncclCommGetAsyncError");
    *r = ncclSuccess;
    return ncclSuccess;
}

// A group's collectives are queued on their streams as they are called; its sends and receives wait
// for the group's end, where they become one op that completes them together (p2p below).
ncclResult_t ncclGroupStart() {
    g_group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
    if (g_group_depth == 0) return ncclInvalidUsage;
    if (--g_group_depth == 0 && !g_group_p2p.empty()) {
        std::vector<P2pCall> calls;
        calls.swap(g_group_p2p);
        p2p_issue(calls, "ncclGroupEnd");
    }
    return ncclSuccess;
}

// The ranks of `color` (NCCL_SPLIT_NOCOLOR: none; *out is then NULL), ordered by key: MPI_Comm_split.
// Collective over comm's ranks, run by the host at once, as ncclCommInitRank is.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t*) {
    const char* api = "ncclCommSplit";
    ncclComm* c = comm_of(comm, api);
    if (!out) return ncclInvalidArgument;
    if (c->host)
        cuda_cpu_fail("%s: over the ranks' host transport (-pi tcp|fs) the emulation has one communicator over all "
                      "ranks; run under mpirun for communicators over some of them", api);
    drain_all_pending();  // as before any of the host's MPI calls: no rank waits for work another holds queued
    MPI_Comm sub;
    check_mpi(MPI_Comm_split(c->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split");
    *out = nullptr;
    if (sub == MPI_COMM_NULL) return ncclSuccess;
    ncclComm* n = new ncclComm();
    n->magic = kCommMagic;
    n->comm = sub;
    MPI_Comm_rank(sub, &n->rank);
    MPI_Comm_size(sub, &n->nranks);
    *out = n;
    return ncclSuccess;
}

}  // extern "C"

namespace {

// What NCCL checks when a collective is called: a live communicator and stream, buffers inside live
// device allocations, and send and receive buffers that are either the documented in-place form or
// apart (a partial overlap is undefined in NCCL; the emulation would otherwise make it a memmove).
void collective_checks(const char* api, ncclComm* c, const void* send, size_t send_bytes, const void* recv,
                       size_t recv_bytes, const void* in_place_send, cudaStream_t stream) {
    if (!stream_is_valid(stream)) cuda_cpu_fail("%s: the stream is not a live cudaStream_t", api);
    device_range_or_die(api, "the send buffer", send, send_bytes);
    device_range_or_die(api, "the receive buffer", recv, recv_bytes);
    uintptr_t s0 = (uintptr_t)send, s1 = s0 + send_bytes, r0 = (uintptr_t)recv, r1 = r0 + recv_bytes;
    if (send_bytes && recv_bytes && s0 < r1 && r0 < s1 && send != in_place_send)
        cuda_cpu_fail("%s (rank %d): the send buffer [%p, +%zu) and the receive buffer [%p, +%zu) overlap without being "
                      "NCCL's in-place form (send == %p here): NCCL leaves that undefined", api, c->rank, send, send_bytes,
                      recv, recv_bytes, in_place_send);
}

// A buffer an op reads or writes.
struct Span {
    const void* p;
    size_t n;
};

// Queues NCCL work on its stream: it reads the spans `ins` and writes the spans `outs`. run_real talks
// to the other ranks (and count_fn counts the traffic); in a batch that runs more than once the first
// run keeps the inputs and the outputs, and the other runs check the inputs and replay the outputs.
void queue_comm_op(std::string what, ncclComm* c, cudaStream_t stream, std::vector<Span> ins, std::vector<Span> outs,
                   std::function<void()> run_real, std::function<void()> count_fn) {
    std::vector<OpAccess> acc;
    for (const Span& s : ins)
        if (s.n) acc.push_back({(uintptr_t)s.p, (uintptr_t)s.p + s.n, false});
    for (const Span& s : outs)
        if (s.n) acc.push_back({(uintptr_t)s.p, (uintptr_t)s.p + s.n, true});
    op_issue(stream, what, [=](Op* op, const OpRun& r) {
        if (r.first && g_check) {
            for (const Span& s : ins)
                if (s.n) hb_access((uintptr_t)s.p, s.n, false, 0);
            for (const Span& s : outs)
                if (s.n) hb_access((uintptr_t)s.p, s.n, true, 0);
        }
        if (r.nccl == NCCL_REPLAY) {
            if (!op->nccl_recorded) cuda_cpu_fail("internal error: %s replayed without a record", what.c_str());
            size_t at = 0;
            for (const Span& s : ins) {
                if (s.n && memcmp(s.p, op->nccl_in.data() + at, s.n) != 0) {
                    op->diverged = true;
                    return;
                }
                at += s.n;
            }
            at = 0;
            for (const Span& s : outs) {
                if (s.n) memcpy((void*)s.p, op->nccl_out.data() + at, s.n);
                device_written(s.p, s.n);
                at += s.n;
            }
            return;
        }
        if (r.nccl == NCCL_RECORD) {
            op->nccl_in.clear();
            for (const Span& s : ins)
                op->nccl_in.insert(op->nccl_in.end(), (const unsigned char*)s.p, (const unsigned char*)s.p + s.n);
        }
        count_fn();
        run_real();
        for (const Span& s : outs)
            if (s.n) device_written(s.p, s.n);
        if (r.nccl == NCCL_RECORD) {
            op->nccl_out.clear();
            for (const Span& s : outs)
                op->nccl_out.insert(op->nccl_out.end(), (const unsigned char*)s.p, (const unsigned char*)s.p + s.n);
            op->nccl_recorded = true;
        }
    }, std::move(acc), c);
}

// A collective: reads in_bytes at `in`, writes out_bytes at `out` (0 when this rank receives nothing).
void queue_collective(const char* api, ncclComm* c, cudaStream_t stream, const void* in, size_t in_bytes, void* out,
                      size_t out_bytes, std::function<void()> run_real, TrafficKind kind, uint64_t bytes, uint64_t sent) {
    char what[160];
    snprintf(what, sizeof(what), "%s (%zu bytes)", api, in_bytes > out_bytes ? in_bytes : out_bytes);
    queue_comm_op(what, c, stream, {{in, in_bytes}}, {{out, out_bytes}}, std::move(run_real),
                  [=] { count_traffic(c, kind, bytes, sent); });
}

}  // namespace

extern "C" {

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    const char* api = "ncclReduce";
    ncclComm* c = comm_of(comm, api);
    if (root < 0 || root >= c->nranks || !type_size(type)) return ncclInvalidArgument;
    Wide w = wide_of(type, api);
    MPI_Op mop = mpi_op(op, api);
    size_t bytes = count * type_size(type);
    bool is_root = c->rank == root;
    collective_checks(api, c, send, bytes, is_root ? recv : send, is_root ? bytes : 0, recv, stream);
    int n = mpi_count(count, api);
    queue_collective(api, c, stream, send, bytes, is_root ? recv : nullptr, is_root ? bytes : 0, [=] {
        std::vector<unsigned char> tmp = widen(send, count, type);
        if (c->host) host_allreduce(c, tmp.data(), count, type, op);  // every rank gets it; the root keeps it
        else check_mpi(PMPI_Reduce(is_root ? MPI_IN_PLACE : tmp.data(), tmp.data(), n, w.mpi, mop, root, c->comm), "MPI_Reduce");
        if (is_root) narrow(recv, tmp.data(), count, type, op, c->nranks);
    }, kReduce, bytes, is_root ? 0 : bytes);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    const char* api = "ncclAllReduce";
    ncclComm* c = comm_of(comm, api);
    if (!type_size(type)) return ncclInvalidArgument;
    Wide w = wide_of(type, api);
    MPI_Op mop = mpi_op(op, api);
    size_t bytes = count * type_size(type);
    collective_checks(api, c, send, bytes, recv, bytes, recv, stream);
    queue_collective(api, c, stream, send, bytes, recv, bytes, [=] {
        std::vector<unsigned char> tmp = widen(send, count, type);
        const size_t chunk = (size_t)1 << 28;
        if (c->host) host_allreduce(c, tmp.data(), count, type, op);
        else for (size_t at = 0; at < count; at += chunk) {
            int n = (int)(count - at < chunk ? count - at : chunk);
            void* p = tmp.data() + at * w.size;
            check_mpi(PMPI_Reduce(c->rank == 0 ? MPI_IN_PLACE : p, p, n, w.mpi, mop, 0, c->comm), "MPI_Reduce");
            check_mpi(PMPI_Bcast(p, n, w.mpi, 0, c->comm), "MPI_Bcast");
        }
        narrow(recv, tmp.data(), count, type, op, c->nranks);
    }, kAllReduce, bytes, allreduce_ring_sent(c, count) * type_size(type));
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
    const char* api = "ncclReduceScatter";
    ncclComm* c = comm_of(comm, api);
    if (!type_size(type)) return ncclInvalidArgument;
    Wide w = wide_of(type, api);
    MPI_Op mop = mpi_op(op, api);
    size_t rbytes = recvcount * type_size(type), sbytes = rbytes * (size_t)c->nranks;
    collective_checks(api, c, send, sbytes, recv, rbytes, (const char*)recv - (size_t)c->rank * rbytes, stream);
    int n = mpi_count(recvcount, api);
    queue_collective(api, c, stream, send, sbytes, recv, rbytes, [=] {
        std::vector<unsigned char> in = widen(send, recvcount * c->nranks, type);
        if (c->host) {  // the whole reduced, this rank's slice kept
            host_allreduce(c, in.data(), recvcount * c->nranks, type, op);
            narrow(recv, in.data() + (size_t)c->rank * recvcount * w.size, recvcount, type, op, c->nranks);
            return;
        }
        std::vector<unsigned char> out(recvcount * w.size);
        check_mpi(PMPI_Reduce_scatter_block(in.data(), out.data(), n, w.mpi, mop, c->comm), "MPI_Reduce_scatter_block");
        narrow(recv, out.data(), recvcount, type, op, c->nranks);
    }, kReduceScatter, sbytes, (uint64_t)rbytes * (c->nranks - 1));
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
    const char* api = "ncclAllGather";
    ncclComm* c = comm_of(comm, api);
    size_t bytes = sendcount * type_size(type);
    if (!type_size(type)) return ncclInvalidArgument;
    collective_checks(api, c, send, bytes, recv, bytes * (size_t)c->nranks, (const char*)recv + (size_t)c->rank * bytes,
                      stream);
    int n = mpi_count(bytes, api);
    queue_collective(api, c, stream, send, bytes, recv, bytes * (size_t)c->nranks, [=] {
        // A copy first: send may be recv's own slice (the in-place form).
        std::vector<unsigned char> tmp(bytes);
        if (bytes) memcpy(tmp.data(), send, bytes);
        if (c->host) {  // to rank 0 (straight into its receive buffer), then from it to every rank
            ranks_raw_gather(tmp.data(), c->rank == 0 ? recv : nullptr, bytes);
            ranks_raw_broadcast(recv, bytes * (size_t)c->nranks, 0);
            return;
        }
        check_mpi(PMPI_Allgather(tmp.data(), n, MPI_BYTE, recv, n, MPI_BYTE, c->comm), "MPI_Allgather");
    }, kAllGather, (uint64_t)bytes * c->nranks, (uint64_t)bytes * (c->nranks - 1));
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    const char* api = "ncclBroadcast";
    ncclComm* c = comm_of(comm, api);
    if (root < 0 || root >= c->nranks || !type_size(type)) return ncclInvalidArgument;
    size_t bytes = count * type_size(type);
    bool is_root = c->rank == root;
    collective_checks(api, c, is_root ? send : recv, is_root ? bytes : 0, recv, bytes, recv, stream);
    int n = mpi_count(bytes, api);
    // The ring from the root: every rank passes the data on but the one before the root.
    queue_collective(api, c, stream, is_root ? send : nullptr, is_root ? bytes : 0, recv, bytes, [=] {
        if (is_root && send != recv && bytes) memcpy(recv, send, bytes);
        if (c->host) ranks_raw_broadcast(recv, bytes, root);
        else check_mpi(PMPI_Bcast(recv, n, MPI_BYTE, root, c->comm), "MPI_Bcast");
    }, kBroadcast, bytes, c->rank == (root + c->nranks - 1) % c->nranks ? 0 : bytes);
    return ncclSuccess;
}
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buff, buff, count, type, root, comm, s);
}

}  // extern "C"

namespace {

// ---- point to point: ncclSend, ncclRecv ----
// NCCL's rules: a send to peer p is matched by p's next receive from this rank (in the order each rank
// called them), of the same count and type; outside a group a send or receive blocks its stream until
// the peer's matching call runs; the calls of one ncclGroupStart/End progress together, so two ranks
// may each send to the other. Here a group's calls (or a lone one) are one op on their stream; when it
// runs it posts every send (MPI_Issend: complete only once the peer's receive matched it, as on a GPU)
// and each receive as its message comes, and returns when all are done. A call whose peer never makes
// the matching one would hang a GPU: the op stops the program after NCCL_CPU_P2P_TIMEOUT seconds (600
// by default) with one line naming the call, its peer and where it was issued. Each message carries
// its element type and count, so a receive whose send differs in either is named too.
const int kP2pTag = 0x4e43;
const uint32_t kP2pMagic = 0x50325031u;

struct P2pHeader {
    uint32_t magic;
    int32_t type;
    uint64_t count;
};

double p2p_timeout_s() {
    static double t = -1;
    if (t < 0) {
        const char* e = getenv("NCCL_CPU_P2P_TIMEOUT");
        t = 600;
        if (e && *e) {
            char* end;
            double x = strtod(e, &end);
            if (*end || !(x > 0)) cuda_cpu_fail("NCCL_CPU_P2P_TIMEOUT=%s: expected seconds, a positive number", e);
            t = x;
        }
    }
    return t;
}

const char* type_name(int t) {
    switch (t) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    default: return "an fp8 type";
    }
}

std::string p2p_name(const P2pCall& k, int rank) {
    char b[200];
    snprintf(b, sizeof(b), "%s of %zu %s (%zu bytes) %s rank %d %s rank %d", k.send ? "ncclSend" : "ncclRecv", k.count,
             type_name(k.type), k.count * type_size(k.type), k.send ? "from" : "on", rank, k.send ? "to" : "from", k.peer);
    return b;
}

double now_s() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Runs a group's calls (inside its op): every send posted, each receive posted once its message has
// come (a matched probe: its size is then known, whatever the send's count), then all waited for.
void p2p_run(const std::vector<P2pCall>& calls) {
    ncclComm* c = calls[0].comm;
    size_t n = calls.size();
    std::vector<std::vector<unsigned char>> msg(n);
    std::vector<MPI_Request> req(n, MPI_REQUEST_NULL);
    std::vector<bool> posted(n, false), done(n, false);
    for (size_t i = 0; i < n; i++) {
        const P2pCall& k = calls[i];
        if (!k.send) continue;
        size_t bytes = k.count * type_size(k.type);
        msg[i].resize(sizeof(P2pHeader) + bytes);
        P2pHeader h = {kP2pMagic, (int32_t)k.type, (uint64_t)k.count};
        memcpy(msg[i].data(), &h, sizeof(h));
        if (bytes) memcpy(msg[i].data() + sizeof(h), k.buf, bytes);
        check_mpi(MPI_Issend(msg[i].data(), mpi_count(msg[i].size(), "ncclSend"), MPI_BYTE, k.peer, kP2pTag, c->comm,
                             &req[i]), "MPI_Issend");
        posted[i] = true;
    }
    size_t left = n;
    double start = now_s();
    while (left) {
        for (size_t i = 0; i < n; i++) {
            if (done[i]) continue;
            if (!posted[i]) {
                // Receives from one peer take its messages in the order they were called.
                bool first = true;
                for (size_t j = 0; j < i && first; j++) first = calls[j].send || calls[j].peer != calls[i].peer || posted[j];
                if (!first) continue;
                int flag = 0;
                MPI_Message m;
                MPI_Status st;
                check_mpi(MPI_Improbe(calls[i].peer, kP2pTag, c->comm, &flag, &m, &st), "MPI_Improbe");
                if (!flag) continue;
                int got = 0;
                MPI_Get_count(&st, MPI_BYTE, &got);
                msg[i].resize((size_t)got);
                check_mpi(MPI_Imrecv(msg[i].data(), got, MPI_BYTE, &m, &req[i]), "MPI_Imrecv");
                posted[i] = true;
            }
            int flag = 0;
            check_mpi(MPI_Test(&req[i], &flag, MPI_STATUS_IGNORE), "MPI_Test");
            if (flag) {
                done[i] = true;
                left--;
            }
        }
        if (!left) break;
        if (now_s() - start > p2p_timeout_s()) {
            size_t i = 0;
            while (done[i]) i++;
            const P2pCall& k = calls[i];
            cuda_cpu_fail("%s found no matching %s on rank %d within %g s (NCCL_CPU_P2P_TIMEOUT): on a GPU it would hang. "
                          "Each ncclSend needs an ncclRecv of the same count and type on its peer, called in the same "
                          "order, and calls that must progress together belong in one ncclGroupStart/End (the op: %s)",
                          p2p_name(k, c->rank).c_str(), k.send ? "ncclRecv" : "ncclSend", k.peer, p2p_timeout_s(),
                          op_description(g_cur_op->id).c_str());
        }
        struct timespec pause = {0, 200000};
        nanosleep(&pause, nullptr);
    }
    for (size_t i = 0; i < n; i++) {
        const P2pCall& k = calls[i];
        if (k.send) continue;
        P2pHeader h = {0, 0, 0};
        if (msg[i].size() >= sizeof(h)) memcpy(&h, msg[i].data(), sizeof(h));
        if (msg[i].size() < sizeof(h) || h.magic != kP2pMagic)
            cuda_cpu_fail("%s: what arrived from rank %d is not an ncclSend's message", p2p_name(k, c->rank).c_str(), k.peer);
        if (h.type != (int32_t)k.type || h.count != k.count)
            cuda_cpu_fail("%s: the matching ncclSend on rank %d sends %llu %s; NCCL requires the same count and type "
                          "on both sides (the op: %s)", p2p_name(k, c->rank).c_str(), k.peer, (unsigned long long)h.count,
                          type_name(h.type), op_description(g_cur_op->id).c_str());
        size_t bytes = k.count * type_size(k.type);
        if (bytes) memcpy(k.buf, msg[i].data() + sizeof(h), bytes);
    }
}

// A group's sends and receives (or one outside a group) as one op on their stream.
void p2p_issue(const std::vector<P2pCall>& calls, const char* api) {
    ncclComm* c = calls[0].comm;
    cudaStream_t stream = calls[0].stream;
    std::vector<Span> ins, outs;
    size_t sends = 0, bytes = 0;
    for (const P2pCall& k : calls) {
        if (k.comm != c || k.stream != stream)
            cuda_cpu_fail("%s: a group whose sends and receives use several communicators or streams is not emulated",
                          api);
        size_t b = k.count * type_size(k.type);
        // A receive buffer shared with any other call of the group: NCCL leaves the result undefined.
        for (const P2pCall& o : calls) {
            if (&o == &k || (k.send && o.send)) continue;
            uintptr_t a0 = (uintptr_t)k.buf, a1 = a0 + b, b0 = (uintptr_t)o.buf, b1 = b0 + o.count * type_size(o.type);
            if (b && a0 < b1 && b0 < a1)
                cuda_cpu_fail("%s (rank %d): %s and %s use overlapping buffers; NCCL leaves that undefined", api, c->rank,
                              p2p_name(k, c->rank).c_str(), p2p_name(o, c->rank).c_str());
        }
        (k.send ? ins : outs).push_back({k.buf, b});
        sends += k.send;
        bytes += b;
    }
    if (calls.size() == 1 && calls[0].peer == c->rank)
        cuda_cpu_fail("%s outside a group waits for its own rank's matching call, which cannot come (a GPU hangs); "
                      "put both in one ncclGroupStart/End", p2p_name(calls[0], c->rank).c_str());
    char what[200];
    if (calls.size() == 1)
        snprintf(what, sizeof(what), "%s (%zu bytes %s rank %d)", calls[0].send ? "ncclSend" : "ncclRecv", bytes,
                 calls[0].send ? "to" : "from", calls[0].peer);
    else
        snprintf(what, sizeof(what), "a group of %zu ncclSend and %zu ncclRecv (%zu bytes)", sends, calls.size() - sends,
                 bytes);
    queue_comm_op(what, c, stream, ins, outs, [calls] { p2p_run(calls); }, [c, calls] {
        for (const P2pCall& k : calls) {
            uint64_t b = (uint64_t)k.count * type_size(k.type);
            count_traffic(c, k.send ? kSend : kRecv, b, k.send ? b : 0);
        }
    });
}

// What NCCL checks when the call is made; host transport runs have no point-to-point channel.
ncclResult_t p2p_call(const char* api, bool send, void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    ncclComm* c = comm_of(comm, api);
    if (peer < 0 || peer >= c->nranks || !type_size(type)) return ncclInvalidArgument;
    if (c->host)
        cuda_cpu_fail("%s: over the ranks' host transport (-pi tcp|fs) the emulation has no point-to-point channel; "
                      "run under mpirun", api);
    if (!stream_is_valid(stream)) cuda_cpu_fail("%s: the stream is not a live cudaStream_t", api);
    device_range_or_die(api, send ? "the send buffer" : "the receive buffer", buf, count * type_size(type));
    P2pCall k = {send, buf, count, type, peer, c, stream};
    if (g_group_depth > 0) g_group_p2p.push_back(k);
    else p2p_issue({k}, api);
    return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
    return p2p_call("ncclSend", true, const_cast<void*>(send), count, type, peer, comm, stream);
}
ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
    return p2p_call("ncclRecv", false, recv, count, type, peer, comm, stream);
}

// ---- the host's MPI calls: the device's queued work runs first ----
// A rank's queued collectives talk to the other ranks when they run; a host that entered an MPI call
// with collectives still queued could wait for a rank that waits for those collectives. So before
// any of these (the MPI profiling interface: the program's calls come here, then go to PMPI), every
// queued op runs (the host is not ordered after it by that).
int MPI_Barrier(MPI_Comm comm) { drain_all_pending(); return PMPI_Barrier(comm); }
int MPI_Bcast(void* buf, int n, MPI_Datatype t, int root, MPI_Comm comm) {
    drain_all_pending();
    return PMPI_Bcast(buf, n, t, root, comm);
}
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    drain_all_pending();
    return PMPI_Allreduce(s, r, n, t, op, comm);
}
int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
    drain_all_pending();
    return PMPI_Reduce(s, r, n, t, op, root, comm);
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm comm) {
    drain_all_pending();
    return PMPI_Allgather(s, sn, st, r, rn, rt, comm);
}
int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm comm) {
    drain_all_pending();
    return PMPI_Gather(s, sn, st, r, rn, rt, root, comm);
}
int MPI_Send(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
    drain_all_pending();
    return PMPI_Send(b, n, t, dest, tag, comm);
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status* st) {
    drain_all_pending();
    return PMPI_Recv(b, n, t, src, tag, comm, st);
}
int MPI_Finalize(void) {
    drain_all_pending();
    return PMPI_Finalize();
}

}  // extern "C"
