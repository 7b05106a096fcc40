// ranks.h: the processes of a run. A run has one rank per process. They are found, in this order:
// under mpirun (OpenMPI's OMPI_COMM_WORLD_*, MPICH/Hydra's PMI_RANK/PMI_SIZE, srun --mpi=pmix), with
// MPI underneath (-pi mpi, the default); or, with -pi tcp|fs (llm.c's flags), from the launcher's
// variables (mpirun's, then Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) or else from -pn/-pr/-pg,
// with a small host transport of our own underneath (no MPI: see "The host transport" in ranks.c).
// Started alone, or built without MPI, it is one rank and nothing here needs MPI, so ./train_gpt2
// never needs mpirun.
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
    int host_transport;           // 1 when the ranks talk over the -pi tcp|fs transport (no MPI)
} Ranks;

// How the ranks meet: llm.c's -pi (-pm) and its -pn -pr -pg -ps -pf.
typedef struct {
    const char* method;            // "mpi", "tcp" or "fs"
    int num_processes, process_rank, gpus_per_node;
    int given_num_processes, given_process_rank, given_gpus_per_node;  // given on the command line
    const char* server;            // tcp: rank 0's address, host or host:port (port 12345 as llm.c's)
    const char* fs_path;           // fs: a directory every rank sees, for rank 0's address
} RanksLaunch;

// Finds the ranks as the header says. Under MPI a fatal error on any rank ends every rank
// (MPI_Abort); over the host transport likewise (the others exit 1 naming the rank that ended).
// Conflicting input (-pr >= -pn, tcp without -ps, fs without -pf, Slurm's count against -pn, mpirun
// with several ranks in a build without MPI) ends with one line naming the flag or variable.
// how == NULL: -pi mpi with no flags (programs that are not the trainer).
void ranks_init_launch(Ranks* r, const RanksLaunch* how);
void ranks_init(Ranks* r);       // ranks_init_launch(r, NULL)
// Before ranks_init (while the flags are read): when a launcher's variables say this process is one
// of several ranks, error lines name its rank from now on.
void ranks_name_errors_early(void);
const Ranks* ranks_self(void);   // what ranks_init filled (one rank before it is called)
void ranks_barrier(void);
void ranks_sum(double* values, int n);          // every rank gets the sums, in place (rank order: deterministic)
void ranks_max(int* values, int n);             // every rank gets the maxima, in place
void ranks_broadcast(void* data, size_t bytes, int root);
// Compares a text across the ranks: -1 when every rank's is the same (one collective: each rank's
// 64-bit digest to every rank); else the lowest rank whose text differs from rank 0's, with rank
// 0's text in *rank0_text (malloc'd) on every rank, so that rank can name the difference (and end);
// the others are then to call ranks_await_abort.
int ranks_find_difference(const char* text, char** rank0_text);
// For the ranks that are not reporting an error another rank reports: wait to be ended by its exit
// (which aborts every rank), and end quietly if that has not come within 2 s.
void ranks_await_abort(void) __attribute__((noreturn));
void ranks_finalize(void);

// ---- for a device runtime that emulates NCCL on the host (test/cuda_cpu/nccl_cpu.cpp) ----
// Over the host transport (Ranks.host_transport), the runtime's collectives are made of these two,
// which run nothing before them (they are called from inside the runtime's queued work). Every rank
// calls them in the same order, as NCCL's collectives.
// ranks_raw_gather: every rank's `bytes` to rank 0, rank-major into all (num_ranks * bytes; rank 0 only).
void ranks_raw_gather(const void* mine, void* all, size_t bytes);
void ranks_raw_broadcast(void* data, size_t bytes, int root);
// A function every host collective above calls first: the runtime runs its queued device work there,
// so no rank waits in a host collective for a rank whose queued collectives wait for it.
void ranks_set_before_collective(void (*fn)(void));

#ifdef __cplusplus
}
#endif
#endif
