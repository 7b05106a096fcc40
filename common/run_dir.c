// run_dir.c: the run's directory (-o): the lock, its checkpoints' names and wholeness, the run
// record, which checkpoint a resume takes, a finished run's mark, and -nk's deletions (see run_dir.h).
#define _GNU_SOURCE
#include "run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ranks.h"
#include "util.h"

// ---------------------------------------------------------------------------------------------
// The output dir: one run owns it (a lock held until exit), and its checkpoints are that run's.

void run_dir_checkpoint_paths(const char* dir, long step, char* model_path, char* state_path, size_t cap) {
    snprintf(model_path, cap, "%s/model_%08ld.bin", dir, step);
    snprintf(state_path, cap, "%s/state_%08ld.bin", dir, step);
}

// DONE_STEP (llm.c's name, an empty file): written once every file of the checkpoint of STEP is on
// disk, the last thing a checkpoint does; llm.c's restart loops test for the last step's.
void run_dir_done_path(const char* dir, long step, char* path, size_t cap) {
    snprintf(path, cap, "%s/DONE_%08ld", dir, step);
}

// What a file of a checkpoint is called: model_STEP.bin, state_STEP.bin, a shard of a sharded
// checkpoint state_STEP.rankNNN.bin, DONE_STEP, and any of them set aside as damaged (NAME.damaged).
typedef enum { CKPT_NONE, CKPT_MODEL, CKPT_STATE, CKPT_SHARD, CKPT_DONE } CheckpointFileKind;

// The step of "PREFIX<digits>" at the start of name, with *rest pointing after the digits; -1 if none.
static long name_step(const char* name, const char* prefix, const char** rest) {
    size_t p = strlen(prefix);
    if (strncmp(name, prefix, p) != 0 || name[p] < '0' || name[p] > '9') return -1;
    long step = 0;
    const char* c = name + p;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (step > CHECKPOINT_MAX_STEP) return -1;
        step = step * 10 + (*c - '0');
    }
    *rest = c;
    return step;
}

static CheckpointFileKind checkpoint_file_kind(const char* name, long* step, int* damaged) {
    const char* rest;
    CheckpointFileKind kind = CKPT_NONE;
    if ((*step = name_step(name, "model_", &rest)) >= 0) kind = CKPT_MODEL;
    else if ((*step = name_step(name, "state_", &rest)) >= 0) kind = CKPT_STATE;
    else if ((*step = name_step(name, "DONE_", &rest)) >= 0) {
        *damaged = strcmp(rest, ".damaged") == 0;
        return *rest == '\0' || *damaged ? CKPT_DONE : CKPT_NONE;
    } else return CKPT_NONE;
    if (kind == CKPT_STATE && strncmp(rest, ".rank", 5) == 0 && rest[5] >= '0' && rest[5] <= '9') {
        rest += 5;
        while (*rest >= '0' && *rest <= '9') rest++;
        kind = CKPT_SHARD;
    }
    if (strncmp(rest, ".bin", 4) != 0) return CKPT_NONE;
    rest += 4;
    *damaged = strcmp(rest, ".damaged") == 0;
    return *rest == '\0' || *damaged ? kind : CKPT_NONE;
}

// Whether dir holds a DONE file (set aside or not): then only a checkpoint with its DONE file is
// whole. Checkpoints written before DONE files existed are judged by their own files alone.
static int done_files_used(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    struct dirent* ent;
    int found = 0;
    while (!found && (ent = readdir(d)) != NULL) {
        long step;
        int damaged;
        found = checkpoint_file_kind(ent->d_name, &step, &damaged) == CKPT_DONE;
    }
    closedir(d);
    return found;
}

static int long_desc(const void* a, const void* b) {
    long x = *(const long*)a, y = *(const long*)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

// llm.c's checkpoints: model_STEP.bin (the same name as ours), one state_STEP_RANK.bin per process
// (STEP 8 digits, RANK 5) and DONE_STEP, which llm.c's -y 1 requires. The newest step with a DONE
// file and a state file, -1 if none.
static long llmc_checkpoint_newest(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return -1;
    long newest = -1;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        const char* rest;
        long step = name_step(ent->d_name, "state_", &rest);
        if (step < 0 || rest - ent->d_name != 14 || rest[0] != '_') continue;
        int digits = 0;
        while (rest[1 + digits] >= '0' && rest[1 + digits] <= '9') digits++;
        if (digits != 5 || strcmp(rest + 6, ".bin") != 0 || step <= newest) continue;
        char dp[4200];
        run_dir_done_path(dir, step, dp, sizeof(dp));
        if (file_exists(dp)) newest = step;
    }
    closedir(d);
    return newest;
}

// Steps of the state files in dir, newest first; the count in *count (caller frees). With
// any_file, every checkpoint file counts (models, shards, damaged ones: does the dir hold any?).
static long* checkpoint_list(const char* dir, int any_file, int* count) {
    *count = 0;
    DIR* d = opendir(dir);
    if (!d) return NULL;
    long* steps = NULL;
    int cap = 0;
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        long step;
        int damaged;
        CheckpointFileKind kind = checkpoint_file_kind(ent->d_name, &step, &damaged);
        if (kind == CKPT_NONE || (!any_file && (kind != CKPT_STATE || damaged))) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 64;
            steps = (long*)realloc(steps, (size_t)cap * sizeof(long));
            if (!steps) fatal("out of host memory listing checkpoints in %s", dir);
        }
        steps[(*count)++] = step;
    }
    closedir(d);
    if (*count) qsort(steps, (size_t)*count, sizeof(long), long_desc);
    return steps;
}

// The lock: flock() on the output directory itself, through a descriptor of it that stays open
// until the process ends (however it ends, the kernel drops the lock with it). Nothing inside the
// dir can be deleted to break it. train.lock beside the checkpoints only says who holds it (pid,
// host, start time), for a second run's message and for the other ranks of this run to see that
// they write into the same directory. On NFS, flock() becomes a POSIX byte-range lock, which needs
// a descriptor open for writing: a directory's cannot be, so there the lock falls back to
// train.lock itself (held by NFS's lock manager across machines; deleting the file would free it
// for a second run, so run_dir_check stops this run as soon as train.lock is not its own file).
// Where the file system has no locks at all (Lustre mounted without -o flock: ENOSYS), the run
// says so and goes on without one.
static struct {
    char dir[4200], lock_path[4300];
    int dir_fd, file_fd;    // descriptors held for the run (file_fd: the lock itself, on NFS)
    struct stat dir_st, file_st;
} g_out = {"", "", -1, -1, {0}, {0}};

// The holder's lines in train.lock, into text (empty when it cannot be read).
void run_dir_lock_read(const char* path, char* text, size_t cap) {
    text[0] = '\0';
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = pread(fd, text, cap - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
}

static void output_dir_busy(const char* dir, const char* lock_path) {
    char text[256], holder[160] = "";
    run_dir_lock_read(lock_path, text, sizeof(text));
    const char* host = strstr(text, "\nhost ");
    if (text[0] != '\n' && text[0])
        snprintf(holder, sizeof(holder), " by process %.*s%s%.*s", (int)strcspn(text, "\n"), text, host ? " on host " : "",
                 host ? (int)strcspn(host + 6, "\n") : 0, host ? host + 6 : "");
    fatal("output dir %s is in use by another run: it is locked%s (%s); wait for it to end or choose another -o", dir, holder,
          lock_path);
}

static void output_dir_lock(const char* dir, char* lock_text, size_t lock_cap) {
    snprintf(g_out.dir, sizeof(g_out.dir), "%s", dir);
    snprintf(g_out.lock_path, sizeof(g_out.lock_path), "%s/train.lock", dir);
    const char* path = g_out.lock_path;
    g_out.dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g_out.dir_fd < 0 || fstat(g_out.dir_fd, &g_out.dir_st) != 0)
        fatal("cannot open output dir %s (%s)", dir, strerror(errno));
    // The directory first: a run refused here creates and changes nothing in it.
    int dir_locked = flock(g_out.dir_fd, LOCK_EX | LOCK_NB) == 0;
    if (!dir_locked && errno == EWOULDBLOCK) output_dir_busy(dir, path);
    int dir_errno = errno;
    const char* kind = path_not_regular(path);
    if (kind) fatal("lock file %s is %s, expected a regular file", path, kind);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) fatal("cannot open lock file %s (%s)", path, strerror(errno));
    if (!dir_locked) {
        // No lock on a directory here (NFS): train.lock itself, checked at every step.
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            g_out.file_fd = fd;
            if (fstat(fd, &g_out.file_st) != 0) fatal("cannot stat lock file %s (%s)", path, strerror(errno));
            printf("output: %s cannot be locked as a directory on this file system (%s); locked %s instead (deleting "
                   "it stops this run)\n", dir, strerror(dir_errno), path);
        } else if (errno == EWOULDBLOCK) {
            output_dir_busy(dir, path);
        } else {
            printf("output: this file system cannot lock %s or %s (%s): nothing keeps a second run out of it\n", dir,
                   path, strerror(errno));
        }
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(lock_text, lock_cap, "%ld\nhost %s\nstarted %lld.%09ld\n", (long)getpid(), host, (long long)ts.tv_sec,
                     ts.tv_nsec);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, lock_text, (size_t)n, 0) != n || fsync(fd) != 0)
        fatal("cannot write lock file %s (%s)", path, strerror(errno));
    if (fd != g_out.file_fd) close(fd);  // the directory's descriptor holds the lock
}

// Rank 0, at every step: the dir (and on NFS the lock file) must still be the one locked. A dir
// deleted or moved away, or train.lock replaced, would leave this run writing where nobody looks,
// or a second run in its dir.
void run_dir_check(void) {
    if (g_out.dir_fd < 0) return;
    struct stat st;
    int gone = stat(g_out.dir, &st) != 0;
    if (gone || st.st_dev != g_out.dir_st.st_dev || st.st_ino != g_out.dir_st.st_ino)
        fatal("output dir %s was deleted, moved or replaced while this run used it (%s): its checkpoints and log would "
              "go where nobody finds them; stopping", g_out.dir, gone ? strerror(errno) : "another directory is there now");
    if (g_out.file_fd >= 0 && (stat(g_out.lock_path, &st) != 0 || st.st_dev != g_out.file_st.st_dev ||
                               st.st_ino != g_out.file_st.st_ino))
        fatal("lock file %s was deleted or replaced while this run held it: a second run may now use %s; stopping",
              g_out.lock_path, g_out.dir);
}

// Takes the dir: lock, temporary files of interrupted runs, and no mixing with another run.
void run_dir_claim(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    make_dirs(o->output_dir);
    output_dir_lock(o->output_dir, s->lock_text, sizeof(s->lock_text));
    long long bytes;
    int removed = remove_temp_files(o->output_dir, "", 0, &bytes);  // the lock says no live run writes here
    if (removed)
        printf("output: removed %d temporary file%s of an interrupted run (%.1f MB) from %s\n", removed,
               removed == 1 ? "" : "s", bytes / 1e6, o->output_dir);
    if (o->resume) return;
    // Only whole pairs are checkpoints; a half (a run killed between its two files), a shard without
    // its checkpoint or a damaged file set aside is debris of an earlier run.
    int count, pairs = 0;
    long* steps = checkpoint_list(o->output_dir, 1, &count);
    long newest = -1;
    for (int i = 0; i < count; i++) {
        char mp[4200], sp[4200];
        run_dir_checkpoint_paths(o->output_dir, steps[i], mp, sp, sizeof(mp));
        if (file_exists(mp) && file_exists(sp) && (i == 0 || steps[i] != steps[i - 1])) {
            if (!pairs++) newest = steps[i];
        }
    }
    free(steps);
    if (pairs && !o->overwrite)
        fatal("output dir %s holds checkpoints of another run (newest: step %ld); resume it with -y 1, choose another "
              "-o, or pass --overwrite to delete them", o->output_dir, newest);
    s->overwrite_pending = count > 0;
}

// A fresh run: every checkpoint file of the old run (--overwrite), or its debris, goes before this
// run writes anything: models, state files, every rank's shards, damaged ones set aside. Nothing
// else in the dir is touched (log.jsonl is replaced when this run opens its own).
void run_dir_clear(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) return;
    struct dirent* ent;
    int removed = 0;
    while ((ent = readdir(d)) != NULL) {
        long step;
        int damaged;
        if (checkpoint_file_kind(ent->d_name, &step, &damaged) == CKPT_NONE) continue;
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
        if (unlink(path) != 0) fatal("--overwrite: cannot delete %s (%s)", path, strerror(errno));
        removed++;
    }
    closedir(d);
    sync_parent_dir(dir);
    printf("output: deleted %d checkpoint file%s of an earlier run in %s\n", removed, removed == 1 ? "" : "s", dir);
}

// ---------------------------------------------------------------------------------------------
// The built-in run's output dir: out, or out-2, out-3, ... beside it
//
// README's commands all take the built-in run's preset, and with it -o out: run one after another
// in a clone (the default run stopped by Ctrl-C, then ./train_gpt2 -x 3, ./train_gpt2_emu -x 3, a
// ZeRO run under mpirun), each would find the one before's checkpoints in out and stop. So where -o
// came from the preset (not given, no --overwrite), a fresh run takes the first of out, out-2,
// out-3, ... that holds no run (no checkpoint file, no run_complete, not locked by a live run), as
// PyTorch Lightning numbers its version_N dirs; -y 1 takes the first of them whose run has this
// run's flags (its run_complete's or newest checkpoint's record; failing that, with a larger -x
// given, the first finished run with these flags but -x), so the default run's -y 1 finds the
// default run wherever the others went. A -o given keeps its dir, and every protection, as it is.

#define PRESET_DIRS_MAX 1000  // out-2 .. out-1000; a gap of missing ones is allowed

static void preset_dir_name(const char* base, int n, char* out, size_t cap) {
    if (n <= 1) snprintf(out, cap, "%s", base);
    else snprintf(out, cap, "%s-%d", base, n);
}

// Whether another live process holds dir's lock (flock on the dir, as run_dir_claim takes it).
static int dir_locked_by_other(const char* dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    int busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);  // closing drops a lock this probe took
    return busy;
}

// What a dir holds, for the choice: -1 nothing (free), else the step of its run (run_complete's, or
// its newest checkpoint's), with that run's record into record when want_record ("" when it cannot
// be read: the newest checkpoint is read through for it).
static long preset_dir_run(TrainSetup* s, const char* dir, int want_record, char* record, size_t cap, int* complete) {
    record[0] = '\0';
    *complete = 0;
    long done = -1;
    char path[4300];
    snprintf(path, sizeof(path), "%s/run_complete", dir);
    FILE* f = fopen(path, "rb");
    if (f) {
        size_t n = 0;
        if (fscanf(f, "step %ld\n", &done) == 1) n = fread(record, 1, cap - 1, f);
        record[n] = '\0';
        fclose(f);
        *complete = 1;
        return done >= 0 ? done : 0;
    }
    int count;
    long* steps = checkpoint_list(dir, 1, &count);
    if (count == 0) {
        free(steps);
        return -1;
    }
    long newest = steps[0];
    free(steps);
    if (!want_record) return newest;
    static TrainState st;  // 8 KiB of run record
    OptimizerCounters oc;
    char mp[4200], sp[4200], why[4800];
    run_dir_checkpoint_paths(dir, newest, mp, sp, sizeof(mp));
    if (file_exists(mp) && checkpoint_verify(mp, sp, &s->config, &st, &oc, why, sizeof(why)) == CHECKPOINT_OK)
        snprintf(record, cap, "%s", st.record);
    return newest;
}

void run_dir_preset_choose(TrainSetup* s) {
    TrainOptions* o = &s->opts;
    static char chosen[4096];
    if (s->rank == 0) {
        char base[4000], dir[4096], record[RUN_RECORD_MAX], why[512], first_what[160] = "";
        snprintf(base, sizeof(base), "%s", o->output_dir);
        snprintf(chosen, sizeof(chosen), "%s", base);
        int found = 0, missing = 0;
        for (int n = 1; n <= PRESET_DIRS_MAX && missing < 16; n++) {
            preset_dir_name(base, n, dir, sizeof(dir));
            struct stat st;
            if (stat(dir, &st) != 0) {
                missing++;
                if (!o->resume && !found) {  // a name no dir has: free
                    snprintf(chosen, sizeof(chosen), "%s", dir);
                    found = 1;
                }
                continue;
            }
            missing = 0;
            int complete;
            long step = preset_dir_run(s, dir, o->resume, record, sizeof(record), &complete);
            int busy = dir_locked_by_other(dir);
            if (n == 1) {
                if (busy) snprintf(first_what, sizeof(first_what), "is in use by another run");
                else if (complete) snprintf(first_what, sizeof(first_what), "holds a run complete at step %ld", step);
                else if (step >= 0) snprintf(first_what, sizeof(first_what), "holds another run's checkpoints (newest: step %ld)", step);
            }
            if (o->resume) {
                // The first dir whose run has this run's flags; failing that, the first finished one
                // whose flags are these but -x, which a larger -x given goes on with.
                if (found != 2 && step >= 0 && record[0] && cli_record_check(o, record, NULL, why, sizeof(why))) {
                    snprintf(chosen, sizeof(chosen), "%s", dir);
                    found = 2;
                } else if (!found && step >= 0 && record[0] && complete && cli_given(o, "--steps") &&
                           cli_record_check(o, record, "--steps", why, sizeof(why))) {
                    snprintf(chosen, sizeof(chosen), "%s", dir);
                    found = 1;
                }
            } else if (!found && step < 0 && !busy) {
                snprintf(chosen, sizeof(chosen), "%s", dir);
                found = 1;
            }
        }
        if (!found && !o->resume)
            fatal("the built-in run's output dirs %s to %s-%d all hold runs; give -o DIR, or delete some", base, base,
                  PRESET_DIRS_MAX);
        if (strcmp(chosen, base) != 0) {
            if (o->resume)
                printf("output: the built-in run's %s is another run's; -y 1 resumes the run with these flags in %s\n",
                       base, chosen);
            else
                printf("output: the built-in run's %s %s; this run writes to %s (-y 1 with the same flags finds it; "
                       "-o %s --overwrite starts afresh there instead)\n", base, first_what, chosen, base);
        }
    }
    ranks_broadcast(chosen, sizeof(chosen), 0);
    o->output_dir = chosen;
}

// ---------------------------------------------------------------------------------------------
// Resume: the newest intact checkpoint of this same run

// A damaged checkpoint is renamed NAME.damaged, every file of it (the model, the state file and
// any shards of that step): out of every later resume's way, kept for a post-mortem.
static void checkpoint_set_aside(const char* dir, long step) {
    DIR* d = opendir(dir);
    if (!d) fatal("cannot list output dir %s (%s)", dir, strerror(errno));
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        long s;
        int damaged;
        if (checkpoint_file_kind(ent->d_name, &s, &damaged) == CKPT_NONE || damaged || s != step) continue;
        char from[4400], to[4420];
        snprintf(from, sizeof(from), "%s/%s", dir, ent->d_name);
        snprintf(to, sizeof(to), "%s.damaged", from);
        if (rename(from, to) != 0) fatal("cannot rename damaged checkpoint %s to %s (%s)", from, to, strerror(errno));
    }
    closedir(d);
    char any[4300];
    snprintf(any, sizeof(any), "%s/x", dir);
    sync_parent_dir(any);
}

// The run record: the flags that shape the trajectory, then what the train data was.
void run_dir_record_make(TrainSetup* s) {
    size_t n = cli_record(&s->opts, s->record, sizeof(s->record));
    // B is not recorded itself: a run may resume with another B and number of ranks as long as a
    // step reads the same tokens (T, recorded, and the tokens a step, resolved: -d -1 means B*T*ranks).
    // The pipeline stages are said, not checked: a run resumes on any number of them.
    int k0 = snprintf(s->record + n, sizeof(s->record) - n, "tokens-per-step %ld\npipeline-stages %d\n", s->total_batch,
                      s->pp_stages);
    if (k0 < 0 || (size_t)k0 >= sizeof(s->record) - n) fatal("run record: more than %zu bytes", sizeof(s->record));
    n += (size_t)k0;
    char fp[256];
    dataloader_fingerprint(&s->train, fp, sizeof(fp));
    int k = snprintf(s->record + n, sizeof(s->record) - n, "train-data %s\n", fp);
    if (k < 0 || (size_t)k >= sizeof(s->record) - n) fatal("run record: more than %zu bytes", sizeof(s->record));
    n += (size_t)k;
    // The built-in corpus by name, so a resume finds the same one whatever tokenizer file exists then.
    if (s->opts.train_data[0] == '\0') {
        k = snprintf(s->record + n, sizeof(s->record) - n, "train-corpus %s\n", s->corpus.kind);
        if (k < 0 || (size_t)k >= sizeof(s->record) - n) fatal("run record: more than %zu bytes", sizeof(s->record));
    }
}

// Fatal (naming the flag, both values) when the checkpoint was written by a run this one is not.
static void resume_check_record(const TrainSetup* s, const char* sp, const TrainState* st) {
    char why[512];
    if (st->record[0] == '\0') {
        printf("resume: %s predates run records (an older version): its flags and data cannot be checked\n", sp);
        return;
    }
    // -y 1 -x M on a complete run goes on to step M: its -x is meant to differ (run_dir_complete_consider).
    if (!cli_record_check(&s->opts, st->record, s->continue_from >= 0 ? "--steps" : NULL, why, sizeof(why)))
        fatal("flag -y 1: %s (%s); resume with the same flags, or start a new run in another -o", why, sp);
    char then[256], now[256];
    dataloader_fingerprint(&s->train, now, sizeof(now));
    if (!cli_record_value(st->record, "train-data", then, sizeof(then))) snprintf(then, sizeof(then), "(not recorded)");
    if (strcmp(then, now) == 0) return;
    if (s->opts.train_data[0] == '\0') {
        char corpus[64] = "";
        cli_record_value(st->record, "train-corpus", corpus, sizeof(corpus));
        fatal("flag -y 1: the checkpoint %s was trained on the built-in corpus%s%s (%s), but the built-in corpus here is "
              "%s (%s: %s): it was changed or damaged, and the run cannot continue on other data; start a new run in "
              "another -o (or --overwrite)", sp, corpus[0] ? " " : "", corpus, then, s->corpus.kind, s->train_pattern, now);
    }
    fatal("flag -i (--train): the train data (%s: %s) is not the data the checkpoint %s was trained on (%s)",
          s->train_pattern, now, sp, then);
}


// Fatal unless this run's steps read what the checkpoint's did: T and the tokens a step. B, the
// number of ranks and the micro-steps may change (the data order depends on none of them). The
// tokens a step of the run that wrote st: its record says; a record from before it did has -d
// (which cli_record_check holds to this run's) or -d -1, B*T*ranks. A file from before run
// records does not say: there B*ranks must stay as well.
static void resume_check_batch(const TrainSetup* s, const char* sp, const TrainState* st) {
    const TrainOptions* o = &s->opts;
    char v[64];
    long then = -1;
    long micro = (long)st->B * st->T * st->num_processes;  // a micro-step of the writer's, over its ranks
    if (cli_record_value(st->record, "tokens-per-step", v, sizeof(v))) then = atol(v);
    else if (st->record[0]) then = o->total_batch > 0 ? o->total_batch : micro;
    // A writer's step is whole micro-steps of its header's geometry, one of them with -d -1 (the
    // record's -d is this run's: cli_record_check).
    if (then >= 0 && (then <= 0 || then % micro != 0 || (o->total_batch <= 0 && then != micro)))
        fatal("state file %s: its header's B=%d T=%d ranks=%d (%ld tokens a micro-step) do not fit its record's %ld "
              "tokens a step (-d %ld): no writer makes such a file", sp, st->B, st->T, st->num_processes, micro, then,
              o->total_batch);
    if (then >= 0 && (st->T != o->T || then != s->total_batch))
        fatal("state file %s was written with T=%d and %ld tokens a step (B=%d, ranks=%d); this run has T=%d and %ld "
              "(B=%d, ranks=%d): T and the tokens a step (-d) must stay, B and the number of ranks may change", sp,
              st->T, then, st->B, st->num_processes, o->T, s->total_batch, o->B, s->dp_ranks);
    if (then < 0 && (st->T != o->T || (long)st->B * st->num_processes != (long)o->B * s->dp_ranks))
        fatal("state file %s was written with B=%d T=%d ranks=%d; this run has B=%d T=%d ranks=%d (a file from before "
              "run records does not say its tokens a step: T and B*ranks must stay)", sp, st->B, st->T,
              st->num_processes, o->B, o->T, s->dp_ranks);
}

// The newest intact checkpoint, read through once by run_dir_resume_peek before the data loader is made
// (its record decides -sf and the built-in corpus) and not again by run_dir_resume_choose: a checkpoint of
// a big model takes minutes to read.
static TrainState g_peeked;  // 8 KiB of run record
static OptimizerCounters g_peeked_counters;
static long g_peeked_step = -1;

TrainState* run_dir_peeked(void) { return &g_peeked; }

// The newest intact checkpoint's state (its run record) into g_peeked: 1, or 0 when there is none
// (run_dir_resume_choose then says why).
int run_dir_resume_peek(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    int count;
    long* steps = checkpoint_list(o->output_dir, 0, &count);
    char mp[4200], sp[4200], why[4800];
    int use_done = done_files_used(o->output_dir);
    for (int i = 0; i < count && g_peeked_step < 0; i++) {
        run_dir_checkpoint_paths(o->output_dir, steps[i], mp, sp, sizeof(mp));
        char dp[4200];
        run_dir_done_path(o->output_dir, steps[i], dp, sizeof(dp));
        if (file_exists(mp) && (!use_done || file_exists(dp)) &&
            checkpoint_verify(mp, sp, &s->config, &g_peeked, &g_peeked_counters, why, sizeof(why)) == CHECKPOINT_OK)
            g_peeked_step = steps[i];
    }
    free(steps);
    return g_peeked_step >= 0;
}

// A resumed run trains on the built-in corpus it started on, whatever tokenizer file exists by
// now (`make vocab` made one, or it changed): the newest intact checkpoint's record (newest, from
// run_dir_resume_peek) names it. A record from before corpora were named says it by the train data's
// fingerprint: the corpus the tokenizer file gives now, or the byte-level one. kind keeps the
// default when no checkpoint is intact (newest NULL; run_dir_resume_choose then says why).
void run_dir_resume_corpus_kind(TrainSetup* s, const TrainState* newest, char* kind, size_t cap) {
    const TrainOptions* o = &s->opts;
    corpus_default_kind(o->tokenizer, kind, cap);
    if (!newest) return;
    const TrainState* st = newest;
    char recorded[64], then[256];
    if (cli_record_value(st->record, "train-corpus", recorded, sizeof(recorded))) {
        if (strcmp(recorded, kind) != 0)
            printf("resume: this run trained on the built-in corpus %s and continues on it (a fresh run here would use "
                   "%s)\n", recorded, kind);
        snprintf(kind, cap, "%s", recorded);
        return;
    }
    if (!cli_record_value(st->record, "train-data", then, sizeof(then))) return;
    char bytes[64];
    snprintf(bytes, sizeof(bytes), "v%d_bytes", atoi(kind + 1));
    const char* candidates[2] = {kind, bytes};
    for (int c = 0; c < 2; c++) {
        CorpusPaths probe;
        DataLoader dl;
        char now[256];
        corpus_prepare_kind(&probe, candidates[c], o->tokenizer);
        dataloader_init(&dl, probe.train_pattern, o->B, o->T, s->dp_rank, s->dp_ranks, o->shuffle, (uint64_t)o->seed,
                        s->config.vocab_size);
        dataloader_fingerprint(&dl, now, sizeof(now));
        dataloader_free(&dl);
        if (strcmp(now, then) == 0) {
            snprintf(kind, cap, "%s", candidates[c]);
            return;
        }
    }
}

// -y 1 found llm.c's checkpoint of `step`, newer than any of ours: checked whole here (model file
// of this run's model, every llm.c rank's state file of this model, however many processes wrote
// them and however many this run has), so a bad one stops the run before anything is written. Read in llmc_resume_load.
static void resume_choose_llmc(TrainSetup* s, long step) {
    const TrainOptions* o = &s->opts;
    char mp[4200], sp[4200], lp[4200], diff[512];
    run_dir_checkpoint_paths(o->output_dir, step, mp, sp, sizeof(mp));
    llmc_state_path(o->output_dir, step, 0, lp, sizeof(lp));
    if (!file_exists(mp))
        fatal("flag -y 1: llm.c's checkpoint of step %ld has a DONE file but no model file %s", step, mp);
    if (!file_exists(lp))
        fatal("flag -y 1: llm.c's checkpoint of step %ld has no state file %s (rank 0's)", step, lp);
    GPT2Config cfg;
    model_file_check(mp, &cfg);
    gpt2_config_diff(&s->config, &cfg, diff, sizeof(diff));
    if (diff[0]) fatal("flag -y 1: llm.c's model file %s holds another model than this run's: %s", mp, diff);
    LlmcState ls;
    llmc_states_read(o->output_dir, step, &s->config, &ls, NULL, NULL, NULL);
    if (ls.step != step) fatal("llm.c state file %s holds step %lld, its name says %ld", lp, (long long)ls.step, step);
    if (ls.step > s->max_steps)
        fatal("flag -x (steps) is %d but llm.c's checkpoint %s is at step %lld", s->max_steps, lp, (long long)ls.step);
    s->resume_step = step;
    s->resume_llmc = 1;
}

// Picks the newest checkpoint that is whole and consistent; damaged ones are set aside, saying so.
// With none at all, resume_step stays -1: the run starts afresh.
void run_dir_resume_choose(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    int count, damaged = 0;
    long* steps = checkpoint_list(o->output_dir, 0, &count);
    char mp[4200], sp[4200], why[4800], first_damage[4800] = "";
    static TrainState st;  // 8 KiB of run record
    OptimizerCounters oc;
    int use_done = done_files_used(o->output_dir);
    long llmc_step = llmc_checkpoint_newest(o->output_dir);
    if (llmc_step >= 0 && (count == 0 || llmc_step > steps[0])) {
        free(steps);
        resume_choose_llmc(s, llmc_step);
        return;
    }
    for (int i = 0; i < count; i++) {
        run_dir_checkpoint_paths(o->output_dir, steps[i], mp, sp, sizeof(mp));
        if (!file_exists(mp)) {  // the state file goes first: a crash between the two leaves this
            printf("resume: step %ld has no model file (a checkpoint cut short); trying an older one\n", steps[i]);
            continue;
        }
        char dp[4200];
        run_dir_done_path(o->output_dir, steps[i], dp, sizeof(dp));
        if (use_done && !file_exists(dp)) {  // the DONE file goes last: a crash before it leaves this
            printf("resume: step %ld has no DONE_%08ld file (a checkpoint cut short); trying an older one\n", steps[i],
                   steps[i]);
            continue;
        }
        CheckpointStatus status = CHECKPOINT_OK;
        if (steps[i] == g_peeked_step) {  // read through already (run_dir_resume_peek)
            st = g_peeked;
            oc = g_peeked_counters;
        } else {
            status = checkpoint_verify(mp, sp, &s->config, &st, &oc, why, sizeof(why));
        }
        if (status == CHECKPOINT_MISMATCH) fatal("flag -y 1: %s", why);
        if (status == CHECKPOINT_OK && st.step != steps[i]) {
            snprintf(why, sizeof(why), "state file %s holds step %lld, its name says %ld", sp, (long long)st.step, steps[i]);
            status = CHECKPOINT_DAMAGED;
        }
        if (status == CHECKPOINT_OK) {
            resume_check_record(s, sp, &st);
            resume_check_batch(s, sp, &st);
            if (st.step > s->max_steps)
                fatal("flag -x (steps) is %d but the checkpoint %s is at step %lld", s->max_steps, sp, (long long)st.step);
            // Where the data loader stood must be where this step's batches lead (one batch, overfitting).
            int64_t expect = o->overfit ? (int64_t)st.B * st.num_processes : st.step * train_step_samples(s);
            if (st.train_samples >= 0 && st.train_samples != expect) {
                snprintf(why, sizeof(why), "state file %s: its data position is %lld samples in, step %lld needs %lld", sp,
                         (long long)st.train_samples, (long long)st.step, (long long)expect);
                status = CHECKPOINT_DAMAGED;
            }
        }
        if (status == CHECKPOINT_OK) {
            s->resume_step = steps[i];
            free(steps);
            if (damaged) printf("resume: falling back to step %ld, the newest intact checkpoint\n", s->resume_step);
            return;
        }
        printf("resume: %s; setting it aside (*.damaged) and trying an older checkpoint\n", why);
        if (!damaged) snprintf(first_damage, sizeof(first_damage), "%s", why);
        checkpoint_set_aside(o->output_dir, steps[i]);
        damaged++;
    }
    free(steps);
    if (damaged)
        fatal("flag -y 1: no intact checkpoint in %s (%d damaged, set aside as *.damaged; the newest: %s)", o->output_dir,
              damaged, first_damage);
    // No checkpoint at all (at most pieces of one cut short): -y 1 starts the run, as in llm.c,
    // so one command line both starts a run and resumes it. The pieces go, as a fresh run's would.
    int pieces;
    free(checkpoint_list(o->output_dir, 1, &pieces));
    s->overwrite_pending = pieces > 0;
    printf("resume: no checkpoint in %s; starting the run from step 0 (-y 1 resumes when there is one)\n",
           o->output_dir);
}

// ---------------------------------------------------------------------------------------------
// A finished run: OUT/run_complete
//
// A run with an output dir that reaches its last step leaves OUT/run_complete: "step N", then its
// run record (the flags that shape it and its data). With it, -y 1 and the same flags says the run
// is complete and exits 0, training nothing and leaving its log whole; -y 1 with a larger -x given
// goes on from the run's last checkpoint, which must be of step N (any -n above 0 writes one at the
// last step), with the schedule of the new -x from there. A run that starts or goes on in the dir
// removes the file before it trains (a crash then leaves none), and a -y 1 whose flags or data are
// not the finished run's leaves the decision to the checkpoints, as before.

static void run_complete_path(const char* dir, char* path, size_t cap) { snprintf(path, cap, "%s/run_complete", dir); }

void run_dir_complete_write(const TrainSetup* s, int step) {
    char path[4300], tmp[4400];
    run_complete_path(s->opts.output_dir, path, sizeof(path));
    FILE* f = atomic_open(path, tmp, sizeof(tmp));
    if (fprintf(f, "step %d\n%s", step, s->record) < 0) fatal("cannot write %s (%s)", tmp, strerror(errno));
    atomic_close(f, tmp, path);
}

// The step a finished run reached and its record; -1 when the dir holds no run_complete.
static long run_complete_read(const char* dir, char* record, size_t cap) {
    char path[4300];
    run_complete_path(dir, path, sizeof(path));
    record[0] = '\0';
    FILE* f = fopen(path, "rb");
    if (!f) return -1;
    long step = -1;
    size_t n = 0;
    if (fscanf(f, "step %ld\n", &step) == 1) n = fread(record, 1, cap - 1, f);
    else step = -1;
    record[n] = '\0';
    fclose(f);
    return step;
}

void run_dir_complete_remove(const char* dir) {
    char path[4300];
    run_complete_path(dir, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT) fatal("cannot remove %s (%s)", path, strerror(errno));
}

// Rank 0, -y 1: the step at which the run in the dir is complete (this run trains nothing), or -1.
// Sets s->continue_from when a larger -x given goes on from the finished run's last step.
long run_dir_complete_consider(TrainSetup* s) {
    const TrainOptions* o = &s->opts;
    static char record[RUN_RECORD_MAX];
    long done = run_complete_read(o->output_dir, record, sizeof(record));
    if (done < 0) return -1;
    char why[512], then[256] = "", now[256] = "";
    cli_record_value(record, "train-data", then, sizeof(then));
    cli_record_value(s->record, "train-data", now, sizeof(now));
    // Another run's (other flags, other data): the checkpoints decide, as without the file.
    if (!cli_record_check(o, record, "--steps", why, sizeof(why)) || strcmp(then, now) != 0) return -1;
    int steps_given = cli_given(o, "--steps");
    if (steps_given && s->max_steps > done) {
        int count;
        long* steps = checkpoint_list(o->output_dir, 0, &count);
        long newest = count > 0 ? steps[0] : -1;
        free(steps);
        if (newest != done)
            fatal("flag -x %d: the run in %s is complete at step %ld but kept no checkpoint of that step (%s), so it "
                  "cannot go on; start a new run in another -o (-n N keeps the last step of a run)", s->max_steps,
                  o->output_dir, done, newest < 0 ? "it kept none: -n 0" : "its newest is an earlier step");
        printf("resume: the run in %s is complete at step %ld; -x %d goes on from there to step %d, with the "
               "learning-rate schedule of %d steps\n", o->output_dir, done, s->max_steps, s->max_steps, s->max_steps);
        s->continue_from = done;
        return -1;
    }
    // -x left out where the finished run had one: run_dir_resume_choose names the flag and both values.
    if (!steps_given && !cli_record_check(o, record, NULL, why, sizeof(why))) return -1;
    printf("run complete at step %ld (%s/run_complete): nothing to train, the log stays as it is; -y 1 -x N with N "
           "above %ld goes on from its last checkpoint\n", done, o->output_dir, done);
    return done;
}

// ---------------------------------------------------------------------------------------------
// Retention (-nk)

// Deletes every file of the checkpoint of `step` (not those set aside as damaged): its DONE file
// first, so a deletion cut short never leaves a DONE file beside half a checkpoint.
static void checkpoint_delete(const char* dir, long step) {
    char dp[4200];
    run_dir_done_path(dir, step, dp, sizeof(dp));
    if (unlink(dp) != 0 && errno != ENOENT) fatal("-nk: cannot delete %s (%s)", dp, strerror(errno));
    sync_parent_dir(dp);
    DIR* d = opendir(dir);
    if (!d) fatal("cannot list output dir %s (%s)", dir, strerror(errno));
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
        long st;
        int damaged;
        if (checkpoint_file_kind(ent->d_name, &st, &damaged) == CKPT_NONE || damaged || st != step) continue;
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
        if (unlink(path) != 0 && errno != ENOENT) fatal("-nk: cannot delete %s (%s)", path, strerror(errno));
    }
    closedir(d);
    sync_parent_dir(dp);
}

// -nk: the newest `keep` checkpoints stay, and of the older ones those at a multiple of -nm (major
// ones); the rest are deleted. llm.c deletes the one checkpoint -nk * -n steps back after each
// write; on a regular schedule that is the same, and here a checkpoint written off the schedule
// (at a stop request, or at a last step that is not a multiple of -n) is counted too.
void run_dir_retain(const char* dir, int keep, int major_every) {
    int count;
    long* steps = checkpoint_list(dir, 0, &count);
    for (int i = keep; i < count; i++) {
        if (major_every > 0 && steps[i] % major_every == 0) continue;
        checkpoint_delete(dir, steps[i]);
        printf("checkpoint: deleted step %ld (-nk %d keeps the newest %d%s)\n", steps[i], keep, keep,
               major_every > 0 ? " and every multiple of -nm" : "");
    }
    free(steps);
}
