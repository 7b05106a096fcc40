// ranks.h: the processes of a run. Started by mpirun (OpenMPI), a run has one rank per process and
// MPI underneath; started alone, or built without MPI, it is one rank and nothing here needs MPI,
// so ./train_gpt2 never needs mpirun.
//
// One process holds one Ranks: ranks_init() fills it once at start-up, and every call after that
// is collective when num_ranks > 1 (every rank must make it, in the same order).
#ifndef COMMON_RANKS_H
#define COMMON_RANKS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank, num_ranks;          // in the whole run
    int local_rank, local_ranks;  // on this machine: which GPU a rank binds
    int mpi;                      // 1 when MPI was initialised (launched by mpirun in a build with MPI)
} Ranks;

// Reads the launcher's environment (OMPI_COMM_WORLD_*): under mpirun, initialises MPI and makes a
// fatal error on any rank end every rank (MPI_Abort) with a line naming the rank. Fatal if the run
// was started by mpirun with several ranks but this build has no MPI.
void ranks_init(Ranks* r);
const Ranks* ranks_self(void);   // what ranks_init filled (one rank before it is called)
void ranks_barrier(void);
void ranks_sum(double* values, int n);          // every rank gets the sums, in place
void ranks_max(int* values, int n);             // every rank gets the maxima, in place
void ranks_broadcast(void* data, size_t bytes, int root);
// Compares a text across the ranks: -1 when every rank's is the same (one collective: each rank's
// 64-bit digest to every rank); else the lowest rank whose text differs from rank 0's, with rank
// 0's text in *rank0_text (malloc'd) on every rank, so that rank can name the difference.
int ranks_find_difference(const char* text, char** rank0_text);
// For the ranks that are not reporting an error another rank reports: wait to be ended by its exit
// (which aborts every rank), and end quietly if that has not come within 2 s.
void ranks_await_abort(void) __attribute__((noreturn));
void ranks_finalize(void);

#ifdef __cplusplus
}
#endif
#endif
