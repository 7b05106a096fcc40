// test_zero.cu: the GPU engine over several ranks (run under mpirun; NCCL over MPI through the CPU
// runtime), driven through the Engine contract: ZeRO stages 0, 1, 2 and 3 (stage 3 also at
// recompute levels 1-3, level 3 with segments of 1 and 2 layers) with R ranks each equal one
// process that takes the same global batch by accumulation (every step's loss and gradient norm,
// and the model's loss on a held-out batch afterwards); shards need no divisibility (the model's
// parameter count is odd); a planted overflow on one rank only makes every rank skip the same
// step (at stage 3 also with --offload optimizer and --offload grads); the optimizer state each
// rank keeps shrinks with the stage; checkpoints of a sharded run resume bit for bit on as many
// ranks, and in one process (the shards assembled) within rounding.
// Every rank prints its checks; test/test_zero.sh runs stages 0-2 with 2 and 3 ranks,
// test/test_zero3.sh stage 3.
#define TRAIN_GPT2_NO_MAIN
#include "train_gpt2.cu"

#include <vector>

#include "kernel_check.cuh"
#include "rng.h"
#include "test.h"

// 2 layers, 64 channels, head size 32, 301 tokens (padded to 384): an odd parameter count.
static const GPT2Config CFG = {32, 301, 384, 2, 2, 64};
static const int B = 2, T = 16;
static const AdamWConfig OPT = {0.9f, 0.95f, 1e-8f, 0.1f};
static Ranks g_ranks;
// FP32: the sharded runs sum the same gradients in another order (across ranks, then within):
// within fp32 rounding, 1e-5 relative. FP16/BF16: the one-process reference adds its R * accum
// micro-steps' gradients into floatX one at a time, a rounding each, where the ranks sum in fp32
// (NCCL over MPI) or accumulate fewer: (R * accum + 1) u.
static double tolerance(int accum) { return floatx_tol(g_ranks.num_ranks * accum + 1); }


static EngineOptions options(int ranks, int stage, int recompute = 0, int recompute_every = 0,
                             int offload = OFFLOAD_NONE) {
    EngineOptions o;
    memset(&o, 0, sizeof(o));
    o.precision = BUILD_PRECISION;
    o.B = B;
    o.T = T;
    o.rank = ranks > 1 ? g_ranks.rank : 0;
    o.num_ranks = ranks;
    o.local_rank = o.rank;
    o.zero_stage = stage;
    o.recompute = recompute;
    o.recompute_every = recompute_every;
    o.offload = offload;
    o.loss_scale_init = 65536.0f;
    o.loss_scale_interval = 2000;
    return o;
}

static Engine* make(const EngineOptions& o, const std::vector<float>& p) {
    char why[256] = "";
    Engine* e = gpu_engine_create(&CFG, &o, why, sizeof(why));
    if (!e) fatal("cannot create the GPU engine: %s", why);
    e->set_params(e, p.data());
    return e;
}

// The batch of global micro-batch index k: every rank can make any of them.
static void batch(int k, std::vector<int>& in, std::vector<int>& tg) {
    uint64_t r = rng_seed(500 + k);
    std::vector<int> toks(B * T + 1);
    for (int i = 0; i < B * T + 1; i++)
        toks[i] = rng_below(&r, 8) == 0 ? (int)rng_below(&r, CFG.vocab_size) : (int)((i * 5 + k) % 30) * 10;
    in.assign(toks.begin(), toks.end() - 1);
    tg.assign(toks.begin() + 1, toks.end());
}

static void report(int ok, const char* name, const char* why) {
    char full[256];
    snprintf(full, sizeof(full), "rank %d/%d: %s", g_ranks.rank, g_ranks.num_ranks, name);
    test_report(ok, full, why);
}

// R ranks x `accum` micro-steps of B against one process with R*accum micro-steps of B.
static void test_stage(int stage, int accum, int recompute = 0, int recompute_every = 0) {
    int R = g_ranks.num_ranks;
    std::vector<float> p(gpt2_param_layout(&CFG).num_parameters);
    gpt2_init_params(&CFG, p.data(), 21);
    Engine* dist = make(options(R, stage, recompute, recompute_every), p);
    Engine* ref = make(options(1, 0), p);
    std::vector<int> in, tg;
    double worst_loss = 0, worst_norm = 0;
    for (int step = 0; step < 3; step++) {
        for (int a = 0; a < accum; a++) {
            batch((step * accum + a) * R + g_ranks.rank, in, tg);
            dist->micro_step(dist, in.data(), tg.data(), B, T, 1.0f / accum, a == accum - 1);
        }
        for (int k = 0; k < accum * R; k++) {
            batch((step * accum + k / R) * R + k % R, in, tg);
            ref->micro_step(ref, in.data(), tg.data(), B, T, 1.0f / (accum * R), k == accum * R - 1);
        }
        StepResult rd = dist->optimizer_step(dist, &OPT, 2e-3f, 1.0f);
        StepResult rr = ref->optimizer_step(ref, &OPT, 2e-3f, 1.0f);
        worst_loss = fmax(worst_loss, fabs(rd.loss - rr.loss) / fabs(rr.loss));
        // The gradient norm is compared on the first step only, before any update, where the two
        // runs differ only in the order of the sums. After an update it is not bounded by rounding:
        // AdamW's first step moves each weight by lr m/(sqrt(v) + eps) = lr g/(|g| + eps), whose
        // slope at g = 0 is lr/eps (2e5 here), so a gradient element at rounding level moves its
        // weight by up to +-lr in one run and not the other. The next steps' norms then differ
        // by ~1e-5 (measured: 5.6e-6 and 9.6e-6 at 3 ranks x 2 micro-steps, every stage), while
        // the losses, which average over all the weights, stay within 2e-7 and are checked.
        if (step == 0) worst_norm = fabs(rd.grad_norm - rr.grad_norm) / fabs(rr.grad_norm);
    }
    char name[160], why[160];
    snprintf(name, sizeof(name), "ZeRO %d, %d ranks x %d micro-steps, -r %d%s: 3 steps' losses and the first norm "
             "equal one process's", stage, R, accum, recompute, recompute_every == 2 ? " (segments of 2 layers)" : "");
    double tol = tolerance(accum);
    snprintf(why, sizeof(why), "worst relative difference: loss %.3g, first norm %.3g (tolerance %.3g)", worst_loss,
             worst_norm, tol);
    report(worst_loss <= tol && worst_norm <= tol, name, why);
    // The weights after the steps: the loss on a batch no step saw (stages 0-2: every rank holds the
    // whole model; stage 3 gathers it for the forward).
    batch(999, in, tg);
    double ld = dist->forward(dist, in.data(), tg.data(), B, T), lr = ref->forward(ref, in.data(), tg.data(), B, T);
    snprintf(name, sizeof(name), "ZeRO %d, %d ranks: the updated weights give one process's loss", stage, R);
    snprintf(why, sizeof(why), "loss %.9g, one process %.9g", ld, lr);
    report(fabs(ld - lr) <= tol * fabs(lr), name, why);
    // What each rank keeps: stage 0 all the optimizer state, stages 1-3 a shard of it.
    MemoryReport m;
    memset(&m, 0, sizeof(m));
    dist->memory_report(dist, &m);
    size_t n = gpt2_param_layout(&CFG).num_parameters, shard = (n + R - 1) / R, mbytes = 0;
    for (int i = 0; i < m.count; i++)
        if (strcmp(m.items[i].name, "AdamW m (fp32)") == 0) mbytes = m.items[i].bytes;
    size_t mine = stage == 0 ? n : (g_ranks.rank * shard >= n ? 0 : (n - g_ranks.rank * shard < shard ? n - g_ranks.rank * shard : shard));
    snprintf(name, sizeof(name), "ZeRO %d, %d ranks: AdamW m is %zu bytes (%s)", stage, R, mbytes,
             stage == 0 ? "all of it" : "this rank's shard");
    report(mbytes == mine * sizeof(float), name, "wrong size");
    // Stage 3: the floatX parameters a rank keeps are its shard (padded), no longer the whole model.
    size_t pbytes = 0;
    for (int i = 0; i < m.count; i++)
        if (strcmp(m.items[i].name, stage == 3 ? "parameter shard" : "parameters") == 0) pbytes = m.items[i].bytes;
    snprintf(name, sizeof(name), "ZeRO %d, %d ranks: the floatX parameters are %zu bytes (%s)", stage, R, pbytes,
             stage == 3 ? "this rank's shard" : "the whole model, padded");
    report(pbytes == (stage == 3 ? shard : shard * R) * sizeof(floatX), name, "wrong size");
    dist->destroy(dist);
    ref->destroy(ref);
}

static std::vector<char> read_all(const char* path) {
    std::vector<char> data;
    FILE* f = fopen(path, "rb");
    if (!f) return data;
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof(buf), f)) > 0) data.insert(data.end(), buf, buf + k);
    fclose(f);
    return data;
}

// Steps [first, first + count) of the sharded run (each rank its micro-batch) or, with one rank,
// of the same global batches by accumulation.
static void run_steps(Engine* e, int ranks, int first, int count, StepResult* out) {
    std::vector<int> in, tg;
    int R = g_ranks.num_ranks;
    for (int step = first; step < first + count; step++) {
        if (ranks > 1) {
            batch(step * R + g_ranks.rank, in, tg);
            e->micro_step(e, in.data(), tg.data(), B, T, 1.0f, 1);
        } else {
            for (int k = 0; k < R; k++) {
                batch(step * R + k, in, tg);
                e->micro_step(e, in.data(), tg.data(), B, T, 1.0f / R, k == R - 1);
            }
        }
        out[step - first] = e->optimizer_step(e, &OPT, 2e-3f, 1.0f);
    }
}

// Checkpoints of a sharded run: each rank writes its part, rank 0 the model file; resuming on as
// many ranks continues bit for bit, and one process resumes it (assembling the shards) to the
// same steps within rounding.
static void test_checkpoint(int stage, const char* dir) {
    int R = g_ranks.num_ranks;
    std::vector<float> p(gpt2_param_layout(&CFG).num_parameters);
    gpt2_init_params(&CFG, p.data(), 23);
    Engine* e = make(options(R, stage), p);
    StepResult first[2], cont[2], again[2], single[2];
    run_steps(e, R, 0, 2, first);
    char mp[256], sp[256];
    snprintf(mp, sizeof(mp), "%s/model_z%d.bin", dir, stage);
    snprintf(sp, sizeof(sp), "%s/state_z%d.bin", dir, stage);
    TrainState st, back;
    memset(&st, 0, sizeof(st));
    st.B = B; st.T = T; st.num_processes = R; st.step = 2;
    e->checkpoint_save(e, mp, sp, &st);
    run_steps(e, R, 2, 2, cont);
    char mp2[256], sp2[256];
    snprintf(mp2, sizeof(mp2), "%s/model_z%d_end.bin", dir, stage);
    snprintf(sp2, sizeof(sp2), "%s/state_z%d_end.bin", dir, stage);
    e->checkpoint_save(e, mp2, sp2, &st);
    e->destroy(e);

    std::vector<float> other(p.size());
    gpt2_init_params(&CFG, other.data(), 99);  // the checkpoint must replace these
    Engine* resumed = make(options(R, stage), other);
    resumed->checkpoint_load(resumed, mp, sp, &back);
    run_steps(resumed, R, 2, 2, again);
    char name[160];
    snprintf(name, sizeof(name), "ZeRO %d, %d ranks: resumed on %d ranks, the next steps are bit-identical", stage, R, R);
    report(memcmp(again, cont, sizeof(cont)) == 0 && back.step == 2, name, "losses or norms differ");
    char mp3[256], sp3[256];
    snprintf(mp3, sizeof(mp3), "%s/model_z%d_again.bin", dir, stage);
    snprintf(sp3, sizeof(sp3), "%s/state_z%d_again.bin", dir, stage);
    resumed->checkpoint_save(resumed, mp3, sp3, &st);
    if (g_ranks.rank == 0) {
        snprintf(name, sizeof(name), "ZeRO %d, %d ranks: and writes the same model file", stage, R);
        report(read_all(mp3) == read_all(mp2) && !read_all(mp2).empty(), name, "model files differ");
    }
    resumed->destroy(resumed);

    Engine* one = make(options(1, 0), other);
    one->checkpoint_load(one, mp, sp, &back);
    run_steps(one, 1, 2, 2, single);
    double worst = 0;
    for (int i = 0; i < 2; i++) worst = fmax(worst, fabs(single[i].loss - cont[i].loss) / cont[i].loss);
    char why[128];
    snprintf(why, sizeof(why), "worst relative loss difference %.3g > %.3g", worst, tolerance(1));
    snprintf(name, sizeof(name), "ZeRO %d, %d ranks: one process resumes the sharded checkpoint to the same steps", stage, R);
    report(worst <= tolerance(1), name, why);
    one->destroy(one);
    ranks_barrier();
}

// NaN in the padding rows of wte on one rank only: its gradients are NaN, the sums over ranks are
// too, and every rank skips the update (and with FP16 loss scaling halves the scale). Stage 3 keeps
// one copy of the parameters (each rank its shard), so there the last rank's micro-step is the
// NaN: its loss gradient is scaled by NaN.
static void test_overflow_on_one_rank(int stage, int offload = OFFLOAD_NONE) {
    std::vector<float> p(gpt2_param_layout(&CFG).num_parameters);
    gpt2_init_params(&CFG, p.data(), 22);
    int last = g_ranks.rank == g_ranks.num_ranks - 1;
    if (last && stage < 3)
        for (int c = 0; c < CFG.channels; c++) p[(size_t)CFG.vocab_size * CFG.channels + c] = NAN;
    Engine* e = make(options(g_ranks.num_ranks, stage, 0, 0, offload), p);
    std::vector<int> in, tg;
    batch(g_ranks.rank, in, tg);
    e->micro_step(e, in.data(), tg.data(), B, T, last && stage == 3 ? NAN : 1.0f, 1);
    StepResult r = e->optimizer_step(e, &OPT, 2e-3f, 1.0f);
    int applied[1] = {r.applied}, skipped_everywhere = !r.applied;
    ranks_max(applied, 1);  // 0 only if no rank applied the step
    char name[160];
    snprintf(name, sizeof(name), "ZeRO %d%s%s: NaN gradients on rank %d only: every rank skips the step", stage,
             offload != OFFLOAD_NONE ? " --offload " : "", offload != OFFLOAD_NONE ? offload_name(offload) : "",
             g_ranks.num_ranks - 1);
    report(skipped_everywhere && applied[0] == 0, name, "a rank applied the update");
    e->destroy(e);
}

// No arguments: stages 0, 1 and 2 (test_zero.sh). "3": stage 3 and its recompute levels, "3 basic":
// stage 3 without the recompute levels (test_zero3.sh).
int main(int argc, char** argv) {
    int zero3 = argc > 1 && strcmp(argv[1], "3") == 0, basic = argc > 2 && strcmp(argv[2], "basic") == 0;
    ranks_init(&g_ranks);
    if (g_ranks.rank == 0) printf("precision %s, %d ranks\n", PRECISION_NAME, g_ranks.num_ranks);
    char dir[64] = "/tmp/test_zero_XXXXXX";
    if (g_ranks.rank == 0 && !mkdtemp(dir)) fatal("cannot make a temporary directory");
    ranks_broadcast(dir, sizeof(dir), 0);
    for (int stage = zero3 ? 3 : 0; stage <= (zero3 ? 3 : 2); stage++) {
        test_stage(stage, 1);
        test_stage(stage, 2);
        test_overflow_on_one_rank(stage);
        test_checkpoint(stage, dir);
    }
    // Stage 3 with the optimizer on the host: the non-finite count (of the device's shard, or of the
    // host's sums with offloaded gradients) is summed over the ranks as on the device.
    if (zero3) {
        test_overflow_on_one_rank(3, OFFLOAD_OPTIMIZER);
        test_overflow_on_one_rank(3, OFFLOAD_GRADS);
    }
    // Stage 3 gathers each layer again for what recompute rebuilds (level 3: a segment's layers).
    if (zero3 && !basic) {
        test_stage(3, 1, 1);
        test_stage(3, 1, 2);
        test_stage(3, 1, 3);
        test_stage(3, 2, 3, 2);
    }
    if (g_ranks.rank == 0) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0) printf("(could not remove %s)\n", dir);
    }
    int failures[1] = {test_failures_};
    ranks_max(failures, 1);
    ranks_finalize();
    return failures[0] ? 1 : 0;
}
