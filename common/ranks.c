// ranks.c: the processes of a run (see ranks.h). Built with -DUSE_MPI where OpenMPI's mpicc is
// found; without it every call is the one-rank case.
#include "ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#ifdef USE_MPI
#include <mpi.h>
#endif

static Ranks g_ranks = {0, 1, 0, 1, 0};
static int g_finalized = 0;

static int env_int(const char* name, int dflt) {
    const char* s = getenv(name);
    if (!s || !*s) return dflt;
    char* end;
    long v = strtol(s, &end, 10);
    return *end == '\0' && v >= 0 && v < 1 << 24 ? (int)v : dflt;
}

#ifdef USE_MPI
// exit() after a fatal error on one rank: end every rank now rather than leave them waiting in a
// collective for a rank that is gone. A rank that finished normally has finalized MPI first.
static void abort_others_on_exit(void) {
    if (g_ranks.mpi && !g_finalized) MPI_Abort(MPI_COMM_WORLD, 1);
}
#endif

void ranks_init(Ranks* r) {
    int size = env_int("OMPI_COMM_WORLD_SIZE", 1);
#ifdef USE_MPI
    if (size > 1 || getenv("OMPI_COMM_WORLD_SIZE")) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &g_ranks.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_ranks.num_ranks);
        g_ranks.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", g_ranks.rank);
        g_ranks.local_ranks = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", g_ranks.num_ranks);
        g_ranks.mpi = 1;
        if (g_ranks.num_ranks > 1) fatal_set_prefix_rank(g_ranks.rank);
        atexit(abort_others_on_exit);
    }
#else
    if (size > 1) fatal("started by mpirun with %d ranks, but this trainer was built without MPI (install OpenMPI's "
                        "mpicc and rebuild)", size);
#endif
    *r = g_ranks;
}

const Ranks* ranks_self(void) { return &g_ranks; }

void ranks_barrier(void) {
#ifdef USE_MPI
    if (g_ranks.mpi) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void ranks_sum(double* values, int n) {
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#endif
    (void)values; (void)n;
}

void ranks_max(int* values, int n) {
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
    (void)values; (void)n;
}

void ranks_broadcast(void* data, size_t bytes, int root) {
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) {
        if (bytes > (size_t)1 << 30) fatal("ranks_broadcast: %zu bytes is more than one call moves", bytes);
        MPI_Bcast(data, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    }
#endif
    (void)data; (void)bytes; (void)root;
}

void ranks_finalize(void) {
#ifdef USE_MPI
    if (g_ranks.mpi && !g_finalized) {
        g_finalized = 1;
        MPI_Finalize();
    }
#endif
    g_finalized = 1;
}
