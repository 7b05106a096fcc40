// ranks.c: the processes of a run (see ranks.h). Built with -DUSE_MPI where OpenMPI's mpicc is
// found; without it every call is the one-rank case.
#include "ranks.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int ranks_find_difference(const char* text, char** rank0_text) {
    *rank0_text = NULL;
#ifdef USE_MPI
    if (g_ranks.mpi && g_ranks.num_ranks > 1) {
        // One collective when they agree: every rank's digest to every rank.
        uint64_t mine = checksum_bytes(text, strlen(text));
        uint64_t* all = (uint64_t*)malloc_check((size_t)g_ranks.num_ranks * sizeof(uint64_t), "rank digests");
        MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
        int first = -1;
        for (int r = 1; r < g_ranks.num_ranks && first < 0; r++)
            if (all[r] != all[0]) first = r;
        free(all);
        if (first < 0) return -1;
        // They differ: rank 0's text to every rank, so the first rank that differs can say how.
        long long len = (long long)strlen(text);
        MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        if (len < 0 || len > (1LL << 30)) fatal("rank 0's run record is %lld bytes", len);
        char* t = (char*)malloc_check((size_t)len + 1, "rank 0's run record");
        if (g_ranks.rank == 0) memcpy(t, text, (size_t)len);
        MPI_Bcast(t, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
        t[len] = '\0';
        *rank0_text = t;
        return first;
    }
#endif
    (void)text;
    return -1;
}

void ranks_await_abort(void) {
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
#ifdef USE_MPI
    if (g_ranks.mpi && !g_finalized) {
        g_finalized = 1;
        MPI_Finalize();
    }
#endif
    g_finalized = 1;
}
