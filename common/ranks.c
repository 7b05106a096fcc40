// ranks.c: the processes of a run (see ranks.h). MPI is built in with -DUSE_MPI where OpenMPI's
// mpicc is found; the host transport (-pi tcp|fs) needs only POSIX sockets and is always built.
#define _GNU_SOURCE
#include "ranks.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#ifdef USE_MPI
#include <mpi.h>
#endif

static Ranks g_ranks = {0, 1, 0, 1, 0, 0};
static int g_finalized = 0;
static void (*g_before)(void);

// A launcher's variable: absent is -1; present but not a count is an error naming it.
static int env_count(const char* name) {
    const char* s = getenv(name);
    if (!s) return -1;
    char* end;
    long v = strtol(s, &end, 10);
    if (!*s || *end != '\0' || v < 0 || v >= 1 << 24)
        fatal("environment variable %s is '%s', expected a non-negative integer (set by the launcher)", name, s);
    return (int)v;
}

#ifdef USE_MPI
// exit() after a fatal error on one rank: end every rank now rather than leave them waiting in a
// collective for a rank that is gone. A rank that finished normally has finalized MPI first.
static void abort_others_on_exit(void) {
    if (g_ranks.mpi && !g_finalized) MPI_Abort(MPI_COMM_WORLD, 1);
}
#endif

// ---- The host transport (-pi tcp|fs) ----------------------------------------------------------------
// A star around rank 0: every other rank holds two TCP connections to it, one for data and one for
// control. Collectives go through rank 0 in a fixed order (gathered to rank 0 in rank order,
// reduced there in rank order, sent back), so every rank gets the same bits, run after run. Every
// message has a header (kind, size): ranks that are out of step stop with a line, not garbage.
// The control connections carry nothing but failure: a watcher thread on each rank reads them, so
// a rank that ends early (an error, a signal, a kill) is noticed at once, not at the next
// collective: rank 0 sees its connection close and tells the others which rank it was; every
// rank then exits 1 with one line naming it. -pi fs: rank 0 listens on any free port and writes
// "host port" into -pf's directory (one rename: a reader sees all of it or none); the others read
// it, and rank 0 removes it once every rank is connected.

enum { MSG_HELLO = 1, MSG_ACK, MSG_BARRIER, MSG_GATHER, MSG_BCAST, MSG_ABORT };
static const char* const kMsgNames[] = {"?", "hello", "ack", "barrier", "gather", "broadcast", "abort"};
#define RANKS_MAGIC 0x6b6e6172u
#define RANKS_DEFAULT_PORT 12345  // llm.c's, so its -ps IP works unchanged
#define RENDEZVOUS_NAME "ranks_rendezvous"

typedef struct {
    uint32_t magic, kind;
    uint64_t bytes;
} MsgHeader;

static int* g_data;     // rank 0: one socket per rank (index = rank); others: [0] to rank 0
static int* g_ctrl;
static atomic_int g_ending;      // a rank's end has begun: one line, once
static atomic_int g_finishing;   // every rank is in ranks_finalize: connections closing is normal
static atomic_int g_quiet;       // ranks_await_abort: another rank prints the line
static atomic_int g_failed_self; // this rank's own error: its line is printed
static char g_rendezvous[4400];  // -pi fs: rank 0's file, removed once every rank is in

static void rendezvous_remove(void) {
    if (g_rendezvous[0]) unlink(g_rendezvous);
    g_rendezvous[0] = '\0';
}

// The end of this rank because rank `failed` ended before the run did. Rank 0 first tells every
// other rank which one it was.
static void transport_end(int failed) __attribute__((noreturn));
static void transport_end(int failed) {
    if (atomic_exchange(&g_ending, 1)) {
        for (;;) pause();  // the other thread is ending the process
    }
    if (g_ranks.rank == 0) {
        for (int r = 1; r < g_ranks.num_ranks; r++) {
            if (r == failed || g_ctrl[r] < 0) continue;
            MsgHeader h = {RANKS_MAGIC, MSG_ABORT, (uint64_t)failed};
            (void)!send(g_ctrl[r], &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
    }
    rendezvous_remove();
    fflush(stdout);
    if (!atomic_load(&g_quiet) && !atomic_load(&g_failed_self)) {
        char line[256];
        int n = snprintf(line, sizeof(line), "error: rank %d: rank %d ended before the run did (its error is above, or it "
                         "was killed); ending this rank too\n", g_ranks.rank, failed);
        (void)!write(2, line, (size_t)n);
    }
    _exit(1);
}

// A data connection broke: on rank 0 the peer is the rank that ended; on the others it is rank 0,
// which may be ending because of another rank: its watcher gets rank 0's word first if it comes.
static void peer_lost(int peer) __attribute__((noreturn));
static void peer_lost(int peer) {
    if (g_ranks.rank != 0)
        for (int i = 0; i < 20 && !atomic_load(&g_ending); i++) usleep(50000);
    transport_end(peer);
}

static void send_all(int fd, const void* p, size_t n, int peer) {
    const char* c = (const char*)p;
    while (n > 0) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) peer_lost(peer);
        c += k;
        n -= (size_t)k;
    }
}

static void recv_all(int fd, void* p, size_t n, int peer) {
    char* c = (char*)p;
    while (n > 0) {
        ssize_t k = recv(fd, c, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) peer_lost(peer);
        c += k;
        n -= (size_t)k;
    }
}

static void msg_send(int peer, int kind, const void* data, size_t bytes) {
    int fd = g_data[g_ranks.rank == 0 ? peer : 0];
    MsgHeader h = {RANKS_MAGIC, (uint32_t)kind, (uint64_t)bytes};
    send_all(fd, &h, sizeof(h), peer);
    if (bytes) send_all(fd, data, bytes, peer);
}

static void msg_recv(int peer, int kind, void* data, size_t bytes) {
    int fd = g_data[g_ranks.rank == 0 ? peer : 0];
    MsgHeader h;
    recv_all(fd, &h, sizeof(h), peer);
    if (h.magic != RANKS_MAGIC || h.kind != (uint32_t)kind || h.bytes != bytes)
        fatal("the ranks are out of step: rank %d sent %s of %llu bytes where this rank expected %s of %zu (every rank "
              "must make the same collectives in the same order)", peer, h.kind < 7 ? kMsgNames[h.kind] : "?",
              (unsigned long long)h.bytes, kMsgNames[kind], bytes);
    if (bytes) recv_all(fd, data, bytes, peer);
}

static void raw_barrier(void) {
    if (g_ranks.rank == 0) {
        for (int r = 1; r < g_ranks.num_ranks; r++) msg_recv(r, MSG_BARRIER, NULL, 0);
        for (int r = 1; r < g_ranks.num_ranks; r++) msg_send(r, MSG_BARRIER, NULL, 0);
    } else {
        msg_send(0, MSG_BARRIER, NULL, 0);
        msg_recv(0, MSG_BARRIER, NULL, 0);
    }
}

void ranks_raw_gather(const void* mine, void* all, size_t bytes) {
    if (g_ranks.num_ranks == 1) {
        if (bytes && all != mine) memmove(all, mine, bytes);
        return;
    }
    if (!g_ranks.host_transport) fatal("ranks_raw_gather: the ranks have no host transport (-pi tcp|fs)");
    if (g_ranks.rank == 0) {
        if (bytes && all != mine) memmove(all, mine, bytes);
        for (int r = 1; r < g_ranks.num_ranks; r++) msg_recv(r, MSG_GATHER, (char*)all + (size_t)r * bytes, bytes);
    } else {
        msg_send(0, MSG_GATHER, mine, bytes);
    }
}

void ranks_raw_broadcast(void* data, size_t bytes, int root) {
    if (g_ranks.num_ranks == 1) return;
    if (!g_ranks.host_transport) fatal("ranks_raw_broadcast: the ranks have no host transport (-pi tcp|fs)");
    if (root != 0) {  // through rank 0, the hub
        if (g_ranks.rank == root) msg_send(0, MSG_BCAST, data, bytes);
        else if (g_ranks.rank == 0) msg_recv(root, MSG_BCAST, data, bytes);
    }
    if (g_ranks.rank == 0) {
        for (int r = 1; r < g_ranks.num_ranks; r++)
            if (r != root) msg_send(r, MSG_BCAST, data, bytes);
    } else if (g_ranks.rank != root) {
        msg_recv(0, MSG_BCAST, data, bytes);
    }
}

void ranks_set_before_collective(void (*fn)(void)) { g_before = fn; }

// The watcher: reads the control connections; anything on them, or their end, is a rank's end.
static void* watcher_main(void* arg) {
    (void)arg;
    int R = g_ranks.num_ranks;
    if (g_ranks.rank != 0) {
        MsgHeader h;
        size_t got = 0;
        while (got < sizeof(h)) {
            ssize_t k = recv(g_ctrl[0], (char*)&h + got, sizeof(h) - got, 0);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            got += (size_t)k;
        }
        if (atomic_load(&g_finishing)) return NULL;
        int failed = got == sizeof(h) && h.magic == RANKS_MAGIC && h.kind == MSG_ABORT && h.bytes < (uint64_t)R ? (int)h.bytes : 0;
        transport_end(failed);
    }
    struct pollfd* p = (struct pollfd*)calloc_check((size_t)R, sizeof(struct pollfd), "rank watcher");
    for (;;) {
        for (int r = 1; r < R; r++) p[r] = (struct pollfd){g_ctrl[r], POLLIN, 0};
        int n = poll(p + 1, (nfds_t)(R - 1), -1);
        if (n < 0 && errno == EINTR) continue;
        if (atomic_load(&g_finishing)) return NULL;
        for (int r = 1; r < R; r++)
            if (p[r].revents) transport_end(r);  // a control connection never carries data to rank 0
    }
}

// fatal() on this rank: its line is out; close the connections so the others end now.
static void transport_close_on_error(void) {
    atomic_store(&g_failed_self, 1);
    rendezvous_remove();
    for (int r = 0; r < g_ranks.num_ranks; r++) {
        if (g_data && g_data[r] >= 0) shutdown(g_data[r], SHUT_RDWR);
        if (g_ctrl && g_ctrl[r] >= 0) shutdown(g_ctrl[r], SHUT_RDWR);
    }
}

static void transport_at_exit(void) {
    if (!g_finalized) transport_close_on_error();
    rendezvous_remove();
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void socket_timeout(int fd, double seconds) {
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void socket_tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// -ps: "host" or "host:port" ("[v6]:port" for an IPv6 address).
static void parse_server(const char* s, char* host, size_t cap, int* port) {
    *port = RANKS_DEFAULT_PORT;
    const char* colon = NULL;
    if (s[0] == '[') {
        const char* close = strchr(s, ']');
        if (!close || (close[1] && close[1] != ':')) fatal("flag -ps (--nccl-server) '%s': expected [IPv6]:port", s);
        snprintf(host, cap, "%.*s", (int)(close - s - 1), s + 1);
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = strrchr(s, ':');
        if (colon && strchr(s, ':') != colon) colon = NULL;  // a bare IPv6 address
        snprintf(host, cap, "%.*s", colon ? (int)(colon - s) : (int)strlen(s), s);
    }
    if (colon) {
        char* end;
        long p = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || p < 1 || p > 65535) fatal("flag -ps (--nccl-server) '%s': the port must be 1 to 65535", s);
        *port = (int)p;
    }
    if (!host[0]) fatal("flag -ps (--nccl-server) '%s': expected rank 0's address, host or host:port", s);
}

// One connection attempt; -1 when nothing listens there yet.
static int connect_once(const char* host, int port, const char* what) {
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0) fatal("%s: cannot resolve rank 0's host '%s': %s", what, host, gai_strerror(rc));
    int fd = -1;
    for (struct addrinfo* a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static double connect_timeout_s(void) {
    const char* s = getenv("RANKS_TIMEOUT");
    if (!s || !*s) return 120;
    char* end;
    double v = strtod(s, &end);
    if (*end || !(v > 0)) fatal("environment variable RANKS_TIMEOUT is '%s', expected seconds (a positive number)", s);
    return v;
}

// The other ranks: rank 0's address (from -ps, or from the -pf file once rank 0 wrote it), then
// the data and control connections, each introduced by this rank's hello and answered by rank 0.
static void transport_join(const RanksLaunch* how, int fs, double timeout) {
    double deadline = now_s() + timeout;
    char host[1024] = "", where[4300];
    int port = 0;
    if (!fs) {
        parse_server(how->server, host, sizeof(host), &port);
        snprintf(where, sizeof(where), "flag -ps (--nccl-server) %s", how->server);
    } else {
        snprintf(where, sizeof(where), "flag -pf (--nccl-fs-path) %s", how->fs_path);
    }
    int fds[2] = {-1, -1};
    for (int ch = 0; ch < 2; ch++) {
        for (;;) {
            if (fs) {  // read it each time: a file left by an earlier run is replaced by rank 0's
                char path[4300];
                snprintf(path, sizeof(path), "%s/%s", how->fs_path, RENDEZVOUS_NAME);
                FILE* f = fopen(path, "r");
                host[0] = '\0';
                if (f) {
                    if (fscanf(f, "%1023s %d", host, &port) != 2) host[0] = '\0';
                    fclose(f);
                }
            }
            if (host[0]) fds[ch] = connect_once(host, port, where);
            if (fds[ch] >= 0) break;
            if (ch == 1) {  // rank 0 took this rank's first connection: has it ended since?
                struct pollfd p = {fds[0], POLLIN, 0};
                if (poll(&p, 1, 0) > 0) fatal("rank 0 (%s) closed the connection (its error line says why)", where);
            }
            if (now_s() > deadline)
                fatal("no connection to rank 0 within %.0f s (%s%s%s); is rank 0 running? (RANKS_TIMEOUT sets the wait)",
                      timeout, where, fs && !host[0] ? ": rank 0's address file has not appeared" : "",
                      fs && host[0] ? ": rank 0's address there does not answer" : "");
            usleep(100000);
        }
        socket_tune(fds[ch]);
        // The process's mark: rank 0 pairs a rank's two connections by it (two processes given one -pr).
        int64_t hello[4] = {g_ranks.rank, g_ranks.num_ranks, ch, (int64_t)getpid() << 20 ^ (int64_t)(deadline * 1e3)};
        MsgHeader h = {RANKS_MAGIC, MSG_HELLO, sizeof(hello)};
        double left = deadline - now_s();
        socket_timeout(fds[ch], left > 1 ? left : 1);
        if (send(fds[ch], &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h) ||
            send(fds[ch], hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello))
            fatal("rank 0 (%s) closed the connection at once", where);
        MsgHeader ack;
        size_t got = 0;
        while (got < sizeof(ack)) {
            ssize_t k = recv(fds[ch], (char*)&ack + got, sizeof(ack) - got, 0);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            got += (size_t)k;
        }
        if (got != sizeof(ack) || ack.magic != RANKS_MAGIC || ack.kind != MSG_ACK)
            fatal("rank 0 (%s) did not accept this rank%s", where,
                  got == 0 ? ": it closed the connection (its error line says why)" : ": it answered with something else");
        socket_timeout(fds[ch], 0);
    }
    g_data[0] = fds[0];
    g_ctrl[0] = fds[1];
}

// Rank 0: listen, say where (-pf), and accept every other rank's two connections.
static void transport_host(const RanksLaunch* how, int fs, double timeout) {
    int R = g_ranks.num_ranks, port = 0;
    char host[1024] = "";
    if (!fs) parse_server(how->server, host, sizeof(host), &port);
    int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int v6 = lfd >= 0;
    if (!v6) lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) fatal("rank 0 cannot open a socket: %s", strerror(errno));
    int one = 1, zero = 0;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (v6) setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // IPv4 too
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    memset(&a6, 0, sizeof(a6));
    memset(&a4, 0, sizeof(a4));
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons((uint16_t)port);
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons((uint16_t)port);
    int rc = v6 ? bind(lfd, (struct sockaddr*)&a6, sizeof(a6)) : bind(lfd, (struct sockaddr*)&a4, sizeof(a4));
    if (rc != 0 || listen(lfd, 2 * R) != 0) {
        if (fs) fatal("rank 0 cannot listen on a free port: %s", strerror(errno));
        fatal("flag -ps (--nccl-server) %s: rank 0 cannot listen on port %d: %s", how->server, port, strerror(errno));
    }
    if (fs) {
        struct sockaddr_storage got;
        socklen_t len = sizeof(got);
        getsockname(lfd, (struct sockaddr*)&got, &len);
        port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&got)->sin6_port : ((struct sockaddr_in*)&got)->sin_port);
        char name[256];
        if (gethostname(name, sizeof(name)) != 0) fatal("rank 0 cannot read its host name: %s", strerror(errno));
        name[sizeof(name) - 1] = '\0';
        const char* adv = getenv("RANKS_HOST");  // the name the other ranks reach rank 0 by, if not its host name
        char path[4300], tmp[4400];
        snprintf(path, sizeof(path), "%s/%s", how->fs_path, RENDEZVOUS_NAME);
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
        FILE* f = fopen(tmp, "w");
        if (!f || fprintf(f, "%s %d\n", adv && *adv ? adv : name, port) < 0 || fclose(f) != 0) {
            unlink(tmp);
            fatal("flag -pf (--nccl-fs-path) %s: rank 0 cannot write its address there: %s", how->fs_path, strerror(errno));
        }
        snprintf(g_rendezvous, sizeof(g_rendezvous), "%s", path);
        if (rename(tmp, path) != 0) {
            unlink(tmp);
            fatal("flag -pf (--nccl-fs-path) %s: rank 0 cannot write its address there: %s", how->fs_path, strerror(errno));
        }
    }
    double deadline = now_s() + timeout;
    int missing = 2 * (R - 1);
    int64_t* mark = (int64_t*)calloc_check((size_t)R, sizeof(int64_t), "rank marks");
    while (missing > 0) {
        double left = deadline - now_s();
        struct pollfd p = {lfd, POLLIN, 0};
        int n = left > 0 ? poll(&p, 1, (int)(left * 1000) + 1) : 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int first = -1;
            for (int r = 1; r < R && first < 0; r++)
                if (g_data[r] < 0 || g_ctrl[r] < 0) first = r;
            fatal("rank 0: rank %d (and %d connection%s in all) did not connect within %.0f s (-pn %d%s); are all "
                  "ranks started? (RANKS_TIMEOUT sets the wait)", first, missing, missing == 1 ? "" : "s", timeout, R,
                  fs ? ", rank 0's address in -pf's directory" : "");
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        socket_timeout(fd, 10);
        MsgHeader h;
        int64_t hello[4];
        if (recv(fd, &h, sizeof(h), MSG_WAITALL) != (ssize_t)sizeof(h) || h.magic != RANKS_MAGIC || h.kind != MSG_HELLO ||
            h.bytes != sizeof(hello) || recv(fd, hello, sizeof(hello), MSG_WAITALL) != (ssize_t)sizeof(hello)) {
            close(fd);  // not one of ours (a port scan, another program): ignored
            continue;
        }
        long long r = hello[0], ch = hello[2];
        if (hello[1] != R)
            fatal("rank %lld was started for %lld ranks, rank 0 for %d: every rank needs the same -pn (or launcher count)",
                  r, (long long)hello[1], R);
        if (r < 1 || r >= R || ch < 0 || ch > 1)
            fatal("a process says it is rank %lld of %d: expected 1 to %d (-pr)", r, R, R - 1);
        int* slot = ch == 0 ? &g_data[r] : &g_ctrl[r];
        if (*slot >= 0 || (mark[r] && mark[r] != hello[3]))
            fatal("two processes say they are rank %lld (flag -pr, or the launcher's rank): each rank once", r);
        mark[r] = hello[3];
        *slot = fd;
        socket_tune(fd);
        MsgHeader ack = {RANKS_MAGIC, MSG_ACK, 0};
        if (send(fd, &ack, sizeof(ack), MSG_NOSIGNAL) != (ssize_t)sizeof(ack)) transport_end(r);
        socket_timeout(fd, 0);
        missing--;
    }
    free(mark);
    close(lfd);
    rendezvous_remove();  // every rank is in: nothing is left in the shared directory
}

static void transport_start(const RanksLaunch* how, int fs) {
    int R = g_ranks.num_ranks;
    g_data = (int*)malloc_check((size_t)R * sizeof(int), "rank connections");
    g_ctrl = (int*)malloc_check((size_t)R * sizeof(int), "rank connections");
    for (int r = 0; r < R; r++) g_data[r] = g_ctrl[r] = -1;
    g_ranks.host_transport = 1;
    fatal_set_before_exit(transport_close_on_error);
    atexit(transport_at_exit);
    double timeout = connect_timeout_s();
    if (g_ranks.rank == 0) transport_host(how, fs, timeout);
    else transport_join(how, fs, timeout);
    pthread_t t;
    if (pthread_create(&t, NULL, watcher_main, NULL) != 0) fatal("cannot start the rank watcher thread");
    pthread_detach(t);
}

// ---- Finding the ranks ------------------------------------------------------------------------------

// -pi tcp|fs: rank, rank count and local rank from mpirun's variables, Slurm's, or the flags.
static void ranks_from_launcher(const RanksLaunch* how) {
    int rank, size, local = -1, local_n = -1;
    const char *size_var = NULL, *rank_var = NULL;
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        size_var = "OMPI_COMM_WORLD_SIZE", rank_var = "OMPI_COMM_WORLD_RANK";
        local = env_count("OMPI_COMM_WORLD_LOCAL_RANK");
        local_n = env_count("OMPI_COMM_WORLD_LOCAL_SIZE");
    } else if (getenv("PMI_SIZE") && getenv("PMI_RANK")) {  // MPICH's Hydra
        size_var = "PMI_SIZE", rank_var = "PMI_RANK";
        local = env_count("MPI_LOCALRANKID");
        local_n = env_count("MPI_LOCALNRANKS");
    } else if (getenv("SLURM_NTASKS") && getenv("SLURM_PROCID")) {
        size_var = "SLURM_NTASKS", rank_var = "SLURM_PROCID";
        local = env_count("SLURM_LOCALID");
    }
    if (size_var) {
        size = env_count(size_var);
        rank = env_count(rank_var);
        if (rank < 0) fatal("environment variable %s is set but %s is not (a launcher's rank count without its rank)",
                            size_var, rank_var);
        if (size < 1 || rank >= size) fatal("environment variable %s is %d, expected below %s (%d)", rank_var, rank, size_var, size);
        if (how->given_num_processes && how->num_processes != size)
            fatal("flag -pn (--num-processes) is %d, but %s says %d ranks (leave -pn out under a launcher)",
                  how->num_processes, size_var, size);
        if (how->given_process_rank && how->process_rank != rank)
            fatal("flag -pr (--process-rank) is %d, but %s says this process is rank %d (leave -pr out under a launcher)",
                  how->process_rank, rank_var, rank);
    } else {
        size = how->num_processes;
        rank = how->process_rank;
        if (rank >= size)
            fatal("flag -pr (--process-rank) is %d, expected 0 to %d (-pn %d processes)", rank, size - 1, size);
    }
    if (local < 0) local = rank % how->gpus_per_node;  // llm.c's: ranks fill their nodes in order
    if (local_n < 0) local_n = size < how->gpus_per_node ? size : how->gpus_per_node;
    g_ranks.rank = rank;
    g_ranks.num_ranks = size;
    g_ranks.local_rank = local;
    g_ranks.local_ranks = local_n > local ? local_n : local + 1;
}

void ranks_init(Ranks* r) { ranks_init_launch(r, NULL); }

void ranks_name_errors_early(void) {
    static const char* const vars[][2] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"},
                                          {"SLURM_NTASKS", "SLURM_PROCID"}};
    for (int i = 0; i < 3; i++) {
        const char *n = getenv(vars[i][0]), *r = getenv(vars[i][1]);
        if (!n || !r) continue;
        char *end1, *end2;
        long size = strtol(n, &end1, 10), rank = strtol(r, &end2, 10);
        if (!*end1 && !*end2 && size > 1 && rank >= 0 && rank < size) fatal_set_prefix_rank((int)rank);
        return;  // a malformed variable is ranks_init's to name
    }
}

void ranks_init_launch(Ranks* r, const RanksLaunch* how) {
    const char* method = how ? how->method : "mpi";
    int tcp = strcmp(method, "tcp") == 0, fs = strcmp(method, "fs") == 0;
    if (!tcp && !fs && strcmp(method, "mpi") != 0)
        fatal("flag -pi (--nccl-init) expects mpi, tcp or fs, got '%s'", method);
    if (tcp || fs) {
        if (tcp && !how->server[0])
            fatal("flag -pi tcp needs -ps (--nccl-server): rank 0's address, host or host:port (port %d by default)",
                  RANKS_DEFAULT_PORT);
        if (fs) {
            struct stat st;
            if (!how->fs_path[0]) fatal("flag -pi fs needs -pf (--nccl-fs-path): a directory every rank sees");
            if (stat(how->fs_path, &st) != 0 || !S_ISDIR(st.st_mode))
                fatal("flag -pf (--nccl-fs-path) %s: not a directory (rank 0 writes its address there for the others)",
                      how->fs_path);
        }
        ranks_from_launcher(how);
        if (g_ranks.num_ranks > 1) {
            fatal_set_prefix_rank(g_ranks.rank);
            transport_start(how, fs);
        }
        *r = g_ranks;
        return;
    }
    int size = env_count("OMPI_COMM_WORLD_SIZE");
    if (size < 0) size = env_count("PMI_SIZE");
    // srun (Slurm's launcher, --mpi=pmix or pmi2) sets no OMPI_* variable before MPI_Init; its
    // PMI variables say the process is one task of a parallel launch (tested with srun --mpi=pmix,
    // Slurm 22.05: before, each task ran as a run of its own).
    int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
#ifdef USE_MPI
    if (size > 1 || launched) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &g_ranks.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_ranks.num_ranks);
        // The rank's place on its machine (the GPU it binds): the ranks that share memory with it,
        // whichever launcher started them.
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_ranks.rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &g_ranks.local_rank);
        MPI_Comm_size(node, &g_ranks.local_ranks);
        MPI_Comm_free(&node);
        g_ranks.mpi = 1;
        if (g_ranks.num_ranks > 1) fatal_set_prefix_rank(g_ranks.rank);
        atexit(abort_others_on_exit);
    }
#else
    (void)launched;
    if (size > 1) fatal("started by mpirun with %d ranks, but this trainer was built without MPI (install OpenMPI's "
                        "mpicc and rebuild, or start the ranks with -pi tcp|fs)", size);
#endif
    // srun without an MPI plugin: several tasks, each of which would think it is the only one.
    if (!g_ranks.mpi && getenv("SLURM_STEP_ID") && env_count("SLURM_NTASKS") > 1)
        fatal("environment variable SLURM_NTASKS is %d (srun started several tasks) but -pi mpi found no MPI launch: use "
              "srun --mpi=pmix (a build with MPI), or -pi tcp -ps HOST[:PORT] (or -pi fs -pf DIR)", env_count("SLURM_NTASKS"));
    *r = g_ranks;
}

const Ranks* ranks_self(void) { return &g_ranks; }

static int transport_on(void) {
    if (!g_ranks.host_transport || g_ranks.num_ranks == 1) return 0;
    if (g_before) g_before();
    return 1;
}

void ranks_barrier(void) {
    if (transport_on()) {
        raw_barrier();
        return;
    }
#ifdef USE_MPI
    if (g_ranks.mpi) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void ranks_sum(double* values, int n) {
    if (transport_on()) {  // rank 0 adds in rank order: the same bits on every rank, every run
        int R = g_ranks.num_ranks;
        double* all = g_ranks.rank == 0 ? (double*)malloc_check((size_t)R * n * sizeof(double), "ranks_sum") : NULL;
        ranks_raw_gather(values, all, (size_t)n * sizeof(double));
        if (all) {
            for (int i = 0; i < n; i++) {
                double s = all[i];
                for (int r = 1; r < R; r++) s += all[(size_t)r * n + i];
                values[i] = s;
            }
            free(all);
        }
        ranks_raw_broadcast(values, (size_t)n * sizeof(double), 0);
        return;
    }
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
    (void)values; (void)n;
}

void ranks_max(int* values, int n) {
    if (transport_on()) {
        int R = g_ranks.num_ranks;
        int* all = g_ranks.rank == 0 ? (int*)malloc_check((size_t)R * n * sizeof(int), "ranks_max") : NULL;
        ranks_raw_gather(values, all, (size_t)n * sizeof(int));
        if (all) {
            for (int i = 0; i < n; i++)
                for (int r = 0; r < R; r++)
                    if (all[(size_t)r * n + i] > values[i]) values[i] = all[(size_t)r * n + i];
            free(all);
        }
        ranks_raw_broadcast(values, (size_t)n * sizeof(int), 0);
        return;
    }
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
    (void)values; (void)n;
}

void ranks_broadcast(void* data, size_t bytes, int root) {
    if (transport_on()) {
        ranks_raw_broadcast(data, bytes, root);
        return;
    }
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) {
        if (bytes > (size_t)1 << 30) fatal("ranks_broadcast: %zu bytes is more than one call moves", bytes);
        MPI_Bcast(data, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    }
#endif
    (void)data; (void)bytes; (void)root;
}

// Every rank's digest to every rank.
static void all_digests(uint64_t mine, uint64_t* all) {
#ifdef USE_MPI
    if (g_ranks.mpi) {
        MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
        return;
    }
#endif
    ranks_raw_gather(&mine, all, sizeof(mine));
    ranks_raw_broadcast(all, (size_t)g_ranks.num_ranks * sizeof(uint64_t), 0);
}

int ranks_find_difference(const char* text, char** rank0_text) {
    *rank0_text = NULL;
    if (g_ranks.num_ranks == 1 || !(g_ranks.mpi || transport_on())) return -1;
    // One collective when they agree: every rank's digest to every rank.
    uint64_t* all = (uint64_t*)malloc_check((size_t)g_ranks.num_ranks * sizeof(uint64_t), "rank digests");
    all_digests(checksum_bytes(text, strlen(text)), all);
    int first = -1;
    for (int r = 1; r < g_ranks.num_ranks && first < 0; r++)
        if (all[r] != all[0]) first = r;
    free(all);
    if (first < 0) return -1;
    // The rank that differs reports and ends; the others wait for that (ranks_await_abort): over the
    // host transport they are quiet about its end from now on (its line is the one to read), even
    // if it comes before they reach ranks_await_abort.
    if (g_ranks.rank != first) atomic_store(&g_quiet, 1);
    // They differ: rank 0's text to every rank, so the first rank that differs can say how.
    long long len = (long long)strlen(text);
    ranks_broadcast(&len, sizeof(len), 0);
    if (len < 0 || len > (1LL << 30)) fatal("rank 0's run record is %lld bytes", len);
    char* t = (char*)malloc_check((size_t)len + 1, "rank 0's run record");
    if (g_ranks.rank == 0) memcpy(t, text, (size_t)len);
    ranks_broadcast(t, (size_t)len, 0);
    t[len] = '\0';
    *rank0_text = t;
    return first;
}

void ranks_await_abort(void) {
    if (g_ranks.host_transport) {
        // The reporting rank's exit closes its connections; the watcher then ends this rank, quietly
        // (its line is the one to read). After 2 s this rank ends itself.
        atomic_store(&g_quiet, 1);
        for (int i = 0; i < 20; i++) usleep(100000);
        g_finalized = 1;
        _exit(1);
    }
#ifdef USE_MPI
    // The reporting rank's exit aborts the job (MPI_Abort from its exit handler), ending this one.
    // mpirun's abort may take its kill delay twice (odls_base_sigkill_timeout, 20 s as the recipes
    // set it), so after 2 s, by which the reporting rank has long printed its line, this rank ends
    // itself, without a second error line or an abort of its own.
    if (g_ranks.mpi) {
        for (int i = 0; i < 20; i++) usleep(100000);
        g_finalized = 1;  // no MPI_Abort of our own: the reporting rank's line is the one to read
        _exit(1);
    }
#endif
    exit(1);
}

void ranks_finalize(void) {
    if (g_ranks.host_transport && !g_finalized) {
        // Said before the last barrier: a rank that leaves it and exits closes its connections, and
        // by then every rank is here (a rank that ends inside the barrier is still named, by the
        // barrier's own receive).
        if (g_before) g_before();
        atomic_store(&g_finishing, 1);
        raw_barrier();
        g_finalized = 1;
        return;
    }
#ifdef USE_MPI
    if (g_ranks.mpi && !g_finalized) {
        g_finalized = 1;
        MPI_Finalize();
    }
#endif
    g_finalized = 1;
}
