// run_dir.h: the run's directory (-o DIR): which run owns it, which checkpoints in it are whole and
// whose, which one -y 1 resumes, and whether the run in it is finished. The driver (train_loop.c)
// calls these in its order; rank 0 owns the dir, the other ranks read train.lock and write their
// state shards into it.
//
//   DIR/model_STEP.bin, state_STEP.bin    a checkpoint (state_STEP.rankNNN.bin: a rank's shard)
//   DIR/DONE_STEP                         written last: the checkpoint of STEP is whole (llm.c's name)
//   DIR/train.lock                        who holds the dir (the lock is flock() on the dir itself)
//   DIR/run_complete                      "step N" and the run record of a run that reached its last step
//   DIR/NAME.damaged                      a checkpoint's files a resume set aside
//
// Setup (train_setup):        run_dir_preset_choose (-o from the built-in run's preset), run_dir_claim (rank 0; the others run_dir_lock_read), then with -y 1
//                             run_dir_resume_peek / run_dir_peeked / run_dir_resume_corpus_kind
//                             before the data, run_dir_record_make after it, run_dir_complete_consider
//                             and run_dir_resume_choose (rank 0).
// The run (train_run):        run_dir_clear (a fresh run's leftovers), run_dir_complete_remove, every
//                             step run_dir_check, each checkpoint run_dir_checkpoint_paths,
//                             run_dir_done_path and run_dir_retain (-nk), the last step
//                             run_dir_complete_write.
// Every function ends the run (fatal, one line naming the file) rather than leave a dir it cannot
// account for.
#ifndef COMMON_RUN_DIR_H
#define COMMON_RUN_DIR_H

#include <stddef.h>

#include "train_setup.h"

#ifdef __cplusplus
extern "C" {
#endif

// DIR/model_STEP.bin and DIR/state_STEP.bin (8-digit steps); DIR/DONE_STEP.
void run_dir_checkpoint_paths(const char* dir, long step, char* model_path, char* state_path, size_t cap);
void run_dir_done_path(const char* dir, long step, char* path, size_t cap);

// -o left to the built-in run's preset (out): every rank's output dir becomes out, or the first of
// out-2, out-3, ... that holds no run (a fresh run), or the first whose run has these flags (-y 1),
// so README's commands, run one after another, do not stop at each other's checkpoints. Every rank
// calls it (rank 0 chooses and says so).
void run_dir_preset_choose(TrainSetup* s);
// Rank 0: locks the dir (another live run there is one error line), removes temporary files of
// interrupted runs, and refuses another run's checkpoints unless -y 1 or --overwrite (whose deletion
// waits for run_dir_clear). Sets s->lock_text and s->overwrite_pending.
void run_dir_claim(TrainSetup* s);
// The holder's lines in a train.lock (empty when it cannot be read): the other ranks compare them.
void run_dir_lock_read(const char* lock_path, char* text, size_t cap);
// Rank 0, every step: the dir (and on NFS train.lock) is still the one locked, else fatal.
void run_dir_check(void);
// A fresh run: every checkpoint file of an earlier run in dir goes, before this run writes any.
void run_dir_clear(const char* dir);

// s->record: the flags that shape the trajectory and the train data's fingerprint, which every
// checkpoint and run_complete carry.
void run_dir_record_make(TrainSetup* s);

// -y 1, rank 0, before the data: reads the newest intact checkpoint through (1, or 0 when there is
// none); run_dir_peeked() is its state (every rank's buffer, which rank 0 broadcasts), and
// run_dir_resume_corpus_kind the built-in corpus it trained on.
int run_dir_resume_peek(TrainSetup* s);
TrainState* run_dir_peeked(void);
void run_dir_resume_corpus_kind(TrainSetup* s, const TrainState* newest, char* kind, size_t cap);
// -y 1, rank 0: the step at which the run in the dir is complete (nothing to train), or -1; sets
// s->continue_from when a larger -x given goes on from the finished run's last checkpoint.
long run_dir_complete_consider(TrainSetup* s);
// -y 1, rank 0: s->resume_step (and s->resume_llmc) := the newest whole checkpoint of this run;
// damaged ones are set aside, saying so; -1 when there is none (the run starts).
void run_dir_resume_choose(TrainSetup* s);

// The finished run's mark: written once its last step's checkpoint and log are; removed when a run
// starts or goes on in the dir.
void run_dir_complete_write(const TrainSetup* s, int step);
void run_dir_complete_remove(const char* dir);
// -nk KEEP: the newest KEEP checkpoints stay, and older ones at multiples of -nm; the rest go.
void run_dir_retain(const char* dir, int keep, int major_every);

#ifdef __cplusplus
}
#endif

#endif  // COMMON_RUN_DIR_H
