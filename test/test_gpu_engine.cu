// test_gpu_engine.cu: the GPU engine (train_gpt2.cu, through the CPU runtime) driven only through
// the Engine contract, against the C reference engine: one step's loss, gradient norm and
// logits; bit-identical repeat runs; FP16 loss scaling (a planted overflow is skipped and halves
// the scale, the scale grows after its interval); planted NaN gradients never reach the weights;
// checkpoints that cross between the engines in both directions; accumulation (1 x B=8 = 2 x B=4 =
// 4 x B=2); the memory report against the plan and the device's count.
// Built once per precision (build/test/test_gpu_engine_fp32, _fp16, _bf16).
#define TRAIN_GPT2_NO_MAIN
#include "train_gpt2.cu"

#include <unistd.h>

#include <vector>

#include "kernel_check.cuh"  // floatx_tol: tolerances from the precision
#include "rng.h"
#include "test.h"

// A model small enough for the CPU runtime: 2 layers, 64 channels, head size 32, 300 tokens.
static const GPT2Config CFG = {32, 300, 384, 2, 2, 64};
static const int B = 2, T = 16;

// Tolerances in units u of the precision's rounding (floatx_tol; fp32 floors at 1e-5, where the
// engines differ only in summation order). The GPU engine computes from weights rounded to floatX
// and rounds every stored activation, while the C engine is fp32 throughout. A loss or a gradient
// norm averages thousands of such roundings, which mostly cancel: measured within 0.2 u (fp16 and
// bf16), bounded by 2 u. A single logit carries its own roundings (the weights', the LayerNorm
// output's, its own store): measured within 3 u, bounded by 8 u.
static const double STEP_TOL = floatx_tol(2);
static const double LOGIT_TOL = floatx_tol(8);

static EngineOptions options(float loss_scale, int interval) {
    EngineOptions o;
    memset(&o, 0, sizeof(o));
    o.precision = BUILD_PRECISION;
    o.B = B;
    o.T = T;
    o.num_ranks = 1;
    o.loss_scale_init = loss_scale;
    o.loss_scale_interval = interval;
    return o;
}

static Engine* make_gpu(const EngineOptions& o, const std::vector<float>& params, const GPT2Config* cfg = &CFG) {
    char why[256] = "";
    Engine* e = gpu_engine_create(cfg, &o, why, sizeof(why));
    if (!e) {
        printf("FAIL gpu engine: cannot create it: %s\n", why);
        exit(1);
    }
    e->set_params(e, params.data());
    return e;
}

static Engine* make_cpu(const std::vector<float>& params) {
    char why[256] = "";
    EngineOptions o = options(1.0f, 2000);
    Engine* e = gpt2_cpu_engine_create(&CFG, &o, why, sizeof(why));
    e->set_params(e, params.data());
    return e;
}

// Tokens with something to learn: a cycle over 20 ids with 10% noise.
static void batch(int step, std::vector<int>& in, std::vector<int>& tg) {
    uint64_t r = rng_seed(100 + step);
    std::vector<int> toks(B * T + 1);
    for (int i = 0; i < B * T + 1; i++)
        toks[i] = rng_below(&r, 10) == 0 ? (int)rng_below(&r, CFG.vocab_size) : (int)((i * 7 + step) % 20) * 13;
    in.assign(toks.begin(), toks.end() - 1);
    tg.assign(toks.begin() + 1, toks.end());
}

static std::vector<float> init_params(uint64_t seed) {
    std::vector<float> p(gpt2_param_layout(&CFG).num_parameters);
    gpt2_init_params(&CFG, p.data(), seed);
    return p;
}

static std::vector<char> read_all(const char* path) {
    FILE* f = fopen(path, "rb");
    std::vector<char> data;
    if (!f) return data;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) data.insert(data.end(), buf, buf + n);
    fclose(f);
    return data;
}

static char g_dir[64];
static void paths(const char* tag, char* mp, char* sp) {
    snprintf(mp, 200, "%s/model_%s.bin", g_dir, tag);
    snprintf(sp, 200, "%s/state_%s.bin", g_dir, tag);
}
static TrainState fixed_state() {
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.B = B; st.T = T; st.num_processes = 1; st.step = 7;
    return st;
}

static const AdamWConfig OPT = {0.9f, 0.95f, 1e-8f, 0.1f};

// One step of each engine from the same weights and batch: loss, norm, then a second step's
// loss (after an AdamW update with clipping), and logits of a forward without targets.
static void test_step_parity() {
    std::vector<float> p = init_params(5);
    Engine* gpu = make_gpu(options(65536.0f, 2000), p);
    Engine* cpu = make_cpu(p);
    std::vector<int> in, tg;
    for (int step = 0; step < 3; step++) {
        batch(step, in, tg);
        gpu->micro_step(gpu, in.data(), tg.data(), B, T, 0.5f, 0);
        cpu->micro_step(cpu, in.data(), tg.data(), B, T, 0.5f, 0);
        batch(step + 10, in, tg);
        gpu->micro_step(gpu, in.data(), tg.data(), B, T, 0.5f, 1);
        cpu->micro_step(cpu, in.data(), tg.data(), B, T, 0.5f, 1);
        StepResult rg = gpu->optimizer_step(gpu, &OPT, 1e-3f, 1.0f);
        StepResult rc = cpu->optimizer_step(cpu, &OPT, 1e-3f, 1.0f);
        char name[128];
        snprintf(name, sizeof(name), "step %d (2 micro-steps): GPU loss vs the C engine's", step + 1);
        check_close(name, rg.loss, rc.loss, STEP_TOL);
        snprintf(name, sizeof(name), "step %d: GPU gradient norm vs the C engine's", step + 1);
        check_close(name, rg.grad_norm, rc.grad_norm, STEP_TOL);
        snprintf(name, sizeof(name), "step %d: update applied", step + 1);
        CHECK(rg.applied == 1, name);
    }
    batch(99, in, tg);
    float lg = gpu->forward(gpu, in.data(), tg.data(), B, T);
    float lc = cpu->forward(cpu, in.data(), tg.data(), B, T);
    check_close("forward with targets: GPU loss vs the C engine's", lg, lc, STEP_TOL);
    gpu->forward(gpu, in.data(), NULL, B, T);
    cpu->forward(cpu, in.data(), NULL, B, T);
    std::vector<float> a(CFG.vocab_size), b(CFG.vocab_size);
    double worst = 0;
    for (int t = 0; t < T; t += 5) {
        gpu->logits_at(gpu, 1, t, a.data());
        cpu->logits_at(cpu, 1, t, b.data());
        double d = 0, s = 0;
        for (int v = 0; v < CFG.vocab_size; v++) { d += (a[v] - b[v]) * (a[v] - b[v]); s += b[v] * b[v]; }
        worst = fmax(worst, sqrt(d / s));
    }
    char why[128];
    snprintf(why, sizeof(why), "logits relative error %.3g > %.3g", worst, LOGIT_TOL);
    test_report(worst <= LOGIT_TOL, "logits_at: GPU logits vs the C engine's", why);
    gpu->destroy(gpu);
    cpu->destroy(cpu);
}

// Two engines, same weights and batches: bit-identical losses, norms and weights.
static void test_determinism() {
    std::vector<float> p = init_params(6);
    Engine* e[2];
    StepResult r[2][3];
    for (int k = 0; k < 2; k++) {
        e[k] = make_gpu(options(65536.0f, 2000), p);
        std::vector<int> in, tg;
        for (int step = 0; step < 3; step++) {
            batch(step, in, tg);
            e[k]->micro_step(e[k], in.data(), tg.data(), B, T, 1.0f, 1);
            r[k][step] = e[k]->optimizer_step(e[k], &OPT, 1e-3f, 1.0f);
        }
    }
    int same = 1;
    for (int step = 0; step < 3; step++)
        same &= memcmp(&r[0][step], &r[1][step], sizeof(StepResult)) == 0;
    CHECK(same, "two runs give bit-identical losses, norms and loss scales");
    char mp[2][200], sp[2][200];
    paths("det0", mp[0], sp[0]);
    paths("det1", mp[1], sp[1]);
    TrainState st = fixed_state();
    for (int k = 0; k < 2; k++) e[k]->checkpoint_save(e[k], mp[k], sp[k], &st);
    CHECK(read_all(mp[0]) == read_all(mp[1]) && read_all(sp[0]) == read_all(sp[1]),
          "two runs give bit-identical weights and optimizer state");
    for (int k = 0; k < 2; k++) e[k]->destroy(e[k]);
}

// A skipped step leaves the checkpoint (weights, m, v, AdamW's count) bit for bit as it was; only
// the loss scale may change (FP16 halves it).
static void expect_skip_unchanged(Engine* e, const char* what, const std::vector<int>& in, const std::vector<int>& tg,
                                  StepResult* out) {
    char m0[200], s0[200], m1[200], s1[200];
    paths("before", m0, s0);
    paths("after", m1, s1);
    TrainState st = fixed_state(), back;
    e->checkpoint_save(e, m0, s0, &st);
    e->micro_step(e, in.data(), tg.data(), B, T, 1.0f, 1);
    *out = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
    e->checkpoint_save(e, m1, s1, &st);
    size_t n = gpt2_param_layout(&CFG).num_parameters;
    std::vector<float> ma(n), va(n), mb(n), vb(n);
    OptimizerCounters ca, cb;
    state_file_read(s0, &CFG, &back, &ca, ma.data(), va.data(), n);
    state_file_read(s1, &CFG, &back, &cb, mb.data(), vb.data(), n);
    char name[160];
    snprintf(name, sizeof(name), "%s: the update is skipped", what);
    CHECK(out->applied == 0, name);
    snprintf(name, sizeof(name), "%s: weights, m, v and AdamW's step count bit-unchanged", what);
    CHECK(read_all(m0) == read_all(m1) && !read_all(m0).empty() && ma == mb && va == vb &&
              ca.adam_steps == cb.adam_steps, name);
    snprintf(name, sizeof(name), "%s: the saved loss scale %s", what, e->loss_scaling ? "halves" : "stays unused");
    CHECK(e->loss_scaling ? cb.loss_scale == ca.loss_scale / 2 && cb.scale_good_steps == 0
                           : ca.loss_scale == 0 && cb.loss_scale == 0, name);
}

static void test_loss_scaling() {
    std::vector<int> in, tg;
    batch(0, in, tg);
    std::vector<float> p = init_params(7);
    if (USE_LOSS_SCALING) {
        // A scale so large that the first gradient (the logits': 2^28 / (B*T) > 65504) overflows fp16.
        Engine* e = make_gpu(options(268435456.0f /* 2^28 */, 2), p);
        StepResult r;
        expect_skip_unchanged(e, "fp16 overflow (loss scale 2^28)", in, tg, &r);
        CHECK(r.loss_scale == 268435456.0f, "fp16 overflow: the step reports the scale it used");
        CHECK(isfinite(r.loss) && !isfinite(r.grad_norm), "fp16 overflow: finite loss, non-finite gradient norm");
        int skipped = 1;
        for (int i = 0; i < 40 && !r.applied; i++) {
            e->micro_step(e, in.data(), tg.data(), B, T, 1.0f, 1);
            float expect = r.loss_scale * 0.5f;
            r = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
            if (r.loss_scale != expect) { skipped = -1; break; }
            skipped += !r.applied;
        }
        char name[160];
        snprintf(name, sizeof(name), "fp16 overflow: the scale halves on each of %d skipped steps until the update applies",
                 skipped);
        CHECK(skipped > 1 && r.applied, name);
        // Growth: interval 2, so after two finite steps in a row the scale doubles.
        float s0 = r.loss_scale;  // this finite step counted once already
        e->micro_step(e, in.data(), tg.data(), B, T, 1.0f, 1);
        StepResult r2 = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
        e->micro_step(e, in.data(), tg.data(), B, T, 1.0f, 1);
        StepResult r3 = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
        snprintf(name, sizeof(name), "fp16: the scale doubles after 2 finite steps (%g, %g, %g)", s0, r2.loss_scale,
                 r3.loss_scale);
        CHECK(r2.applied && r2.loss_scale == s0 && r3.loss_scale == 2 * s0, name);
        e->destroy(e);
    }
    // NaN in the padding rows of wte: the loss never sees them (padded logits are ignored) but
    // the gradient of the last LayerNorm's output does (0 x NaN): finite loss, NaN gradients.
    size_t pad0 = (size_t)CFG.vocab_size * CFG.channels;
    for (size_t i = pad0; i < pad0 + CFG.channels; i++) p[i] = NAN;
    Engine* e = make_gpu(options(1024.0f, 2000), p);
    StepResult r;
    expect_skip_unchanged(e, "planted NaN gradients (GPU)", in, tg, &r);
    CHECK(isfinite(r.loss), "planted NaN gradients: the loss is finite");
    char name[128];
    snprintf(name, sizeof(name), "planted NaN gradients: scale %s", USE_LOSS_SCALING ? "halved" : "stays 1");
    e->micro_step(e, in.data(), tg.data(), B, T, 1.0f, 1);
    StepResult r2 = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
    CHECK(USE_LOSS_SCALING ? r2.loss_scale == 512.0f : r2.loss_scale == 1.0f, name);
    CHECK(e->loss_scaling == USE_LOSS_SCALING, "the engine says whether a skipped step is loss scaling at work");
    e->destroy(e);
    Engine* c = make_cpu(p);
    expect_skip_unchanged(c, "planted NaN gradients (C engine)", in, tg, &r);
    c->destroy(c);
}

// GPU checkpoint -> C engine, and C checkpoint -> GPU engine: the same loss within precision.
static void test_checkpoint_crossing() {
    std::vector<float> p = init_params(8);
    std::vector<int> in, tg;
    Engine* gpu = make_gpu(options(65536.0f, 2000), p);
    for (int step = 0; step < 2; step++) {
        batch(step, in, tg);
        gpu->micro_step(gpu, in.data(), tg.data(), B, T, 1.0f, 1);
        gpu->optimizer_step(gpu, &OPT, 1e-3f, 1.0f);
    }
    char mp[200], sp[200];
    paths("gpu", mp, sp);
    TrainState st = fixed_state(), back;
    gpu->checkpoint_save(gpu, mp, sp, &st);
    Engine* cpu = make_cpu(init_params(9));
    cpu->checkpoint_load(cpu, mp, sp, &back);
    CHECK(back.step == st.step && back.B == B && back.T == T, "GPU checkpoint: the C engine reads its train state");
    batch(50, in, tg);
    float lg = gpu->forward(gpu, in.data(), tg.data(), B, T);
    float lc = cpu->forward(cpu, in.data(), tg.data(), B, T);
    check_close("GPU checkpoint loaded in the C engine: same loss", lc, lg, STEP_TOL);
    // And the next step of each from there (same m, v and AdamW count) agrees too.
    batch(51, in, tg);
    gpu->micro_step(gpu, in.data(), tg.data(), B, T, 1.0f, 1);
    cpu->micro_step(cpu, in.data(), tg.data(), B, T, 1.0f, 1);
    gpu->optimizer_step(gpu, &OPT, 1e-3f, 1.0f);
    cpu->optimizer_step(cpu, &OPT, 1e-3f, 1.0f);
    lg = gpu->forward(gpu, in.data(), tg.data(), B, T);
    lc = cpu->forward(cpu, in.data(), tg.data(), B, T);
    check_close("GPU checkpoint resumed in the C engine: the next step agrees", lc, lg, STEP_TOL);

    paths("cpu", mp, sp);
    cpu->checkpoint_save(cpu, mp, sp, &st);
    Engine* gpu2 = make_gpu(options(65536.0f, 2000), init_params(10));
    gpu2->checkpoint_load(gpu2, mp, sp, &back);
    lc = cpu->forward(cpu, in.data(), tg.data(), B, T);
    float lg2 = gpu2->forward(gpu2, in.data(), tg.data(), B, T);
    check_close("C engine checkpoint loaded in the GPU engine: same loss", lg2, lc, STEP_TOL);
    // A GPU checkpoint reloaded in a GPU engine gives the same bits as the engine that wrote it.
    paths("gpu2", mp, sp);
    gpu->checkpoint_save(gpu, mp, sp, &st);
    Engine* gpu3 = make_gpu(options(65536.0f, 2000), init_params(11));
    gpu3->checkpoint_load(gpu3, mp, sp, &back);
    CHECK(gpu3->forward(gpu3, in.data(), tg.data(), B, T) == gpu->forward(gpu, in.data(), tg.data(), B, T),
          "GPU checkpoint reloaded in a GPU engine: bit-identical loss");
    gpu->destroy(gpu);
    gpu2->destroy(gpu2);
    gpu3->destroy(gpu3);
    cpu->destroy(cpu);
}

// Activation recompute changes what is kept, never the arithmetic: every level (and every
// segment length of level 3) gives bit-identical losses, norms, weights and optimizer state.
// (With -ge 1 or 2 level 0 puts GELU in the matmul's epilogue, which rounds differently from the
// GELU kernel that recomputation needs, so the comparison uses the default -ge 0.)
static void test_recompute() {
    static const GPT2Config cfg3 = {32, 300, 384, 3, 2, 64};  // 3 layers: level 3 segments of 2 + 1
    std::vector<float> p(gpt2_param_layout(&cfg3).num_parameters);
    gpt2_init_params(&cfg3, p.data(), 12);
    const int levels[][2] = {{0, 0}, {1, 0}, {2, 0}, {3, 1}, {3, 2}, {3, 3}};
    std::vector<char> ref_model, ref_state;
    StepResult ref[3];
    size_t prev_bytes = 0;
    for (int i = 0; i < 6; i++) {
        EngineOptions o = options(65536.0f, 2000);
        o.recompute = levels[i][0];
        o.recompute_every = levels[i][1];
        Engine* e = make_gpu(o, p, &cfg3);
        StepResult r[3];
        std::vector<int> in, tg;
        for (int step = 0; step < 3; step++) {
            for (int micro = 0; micro < 2; micro++) {
                batch(step * 2 + micro, in, tg);
                e->micro_step(e, in.data(), tg.data(), B, T, 0.5f, micro == 1);
            }
            r[step] = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
        }
        char mp[200], sp[200];
        paths("recompute", mp, sp);
        TrainState st = fixed_state();
        e->checkpoint_save(e, mp, sp, &st);
        MemoryReport mr;
        memset(&mr, 0, sizeof(mr));
        e->memory_report(e, &mr);
        size_t bytes = 0;
        for (int k = 0; k < mr.count; k++)
            if (strcmp(mr.items[k].name, "activations") == 0) bytes = mr.items[k].bytes;
        char name[160];
        if (i == 0) {
            ref_model = read_all(mp);
            ref_state = read_all(sp);
            memcpy(ref, r, sizeof(r));
        } else {
            snprintf(name, sizeof(name), "recompute %d (segments of %d): losses, norms, weights and state bit-identical "
                     "to level 0", levels[i][0], levels[i][1]);
            CHECK(memcmp(r, ref, sizeof(r)) == 0 && read_all(mp) == ref_model && read_all(sp) == ref_state, name);
            snprintf(name, sizeof(name), "recompute %d (segments of %d): keeps fewer activation bytes (%zu, level before %zu)",
                     levels[i][0], levels[i][1], bytes, prev_bytes);
            if (i <= 3) CHECK(bytes < prev_bytes, name);
        }
        prev_bytes = bytes;
        e->destroy(e);
    }
}

// GELU in the matmul epilogues (-ge 1: forward, -ge 2: also backward) at every recompute level:
// the same step as the C engine's within the precision's tolerance. (The forward epilogue is used at
// -r 0 only, the backward's at every level; level 3 re-runs whole blocks, its rebuilt GELU from the
// kernel, its gradient from the epilogue.)
static void test_gelu_fusion() {
    std::vector<float> p = init_params(13);
    const int cases[][2] = {{1, 0}, {2, 0}, {1, 1}, {2, 1}, {2, 2}, {1, 3}, {2, 3}};  // {gelu fusion, recompute}
    for (int i = 0; i < (int)(sizeof(cases) / sizeof(cases[0])); i++) {
        EngineOptions o = options(65536.0f, 2000);
        o.gelu_fusion = cases[i][0];
        o.recompute = cases[i][1];
        Engine* gpu = make_gpu(o, p);
        Engine* cpu = make_cpu(p);
        std::vector<int> in, tg;
        StepResult rg, rc;
        for (int step = 0; step < 2; step++) {
            batch(step, in, tg);
            gpu->micro_step(gpu, in.data(), tg.data(), B, T, 1.0f, 1);
            cpu->micro_step(cpu, in.data(), tg.data(), B, T, 1.0f, 1);
            rg = gpu->optimizer_step(gpu, &OPT, 1e-3f, 1.0f);
            rc = cpu->optimizer_step(cpu, &OPT, 1e-3f, 1.0f);
        }
        char name[128];
        snprintf(name, sizeof(name), "gelu fusion %d, recompute %d: step 2 loss vs the C engine's", cases[i][0], cases[i][1]);
        check_close(name, rg.loss, rc.loss, STEP_TOL);
        snprintf(name, sizeof(name), "gelu fusion %d, recompute %d: step 2 gradient norm vs the C engine's", cases[i][0],
                 cases[i][1]);
        check_close(name, rg.grad_norm, rc.grad_norm, STEP_TOL);
        gpu->destroy(gpu);
        cpu->destroy(cpu);
    }
}

// Gradient accumulation: the same 8 sequences as one micro-step of B=8, two of B=4 and four of
// B=2 (dloss_scale 1/micro-steps) give the same step: loss, gradient norm, and the next steps'
// losses after the updates. FP32 within fp32 rounding (summation order); FP16/BF16 within STEP_TOL,
// since their gradients are rounded to floatX once per micro-step as they accumulate.
static void test_accumulation() {
    const int BIG = 8;
    std::vector<float> p = init_params(9);
    EngineOptions o = options(65536.0f, 2000);
    o.B = BIG;
    const int splits[3] = {1, 2, 4};
    StepResult res[3][3];
    for (int s = 0; s < 3; s++) {
        Engine* e = make_gpu(o, p);
        int mb = BIG / splits[s];
        for (int step = 0; step < 3; step++) {
            uint64_t r = rng_seed(500 + step);
            std::vector<int> toks(BIG * T + 1);
            for (auto& t : toks) t = (int)rng_below(&r, CFG.vocab_size);
            for (int k = 0; k < splits[s]; k++) {
                const int* in = toks.data() + k * mb * T;
                std::vector<int> tg(in + 1, in + 1 + mb * T);
                e->micro_step(e, in, tg.data(), mb, T, 1.0f / splits[s], k == splits[s] - 1);
            }
            res[s][step] = e->optimizer_step(e, &OPT, 1e-3f, 1.0f);
        }
        e->destroy(e);
    }
    double tol = sizeof(floatX) == 4 ? 1e-5 : STEP_TOL;
    for (int s = 1; s < 3; s++)
        for (int step = 0; step < 3; step++) {
            char name[128];
            snprintf(name, sizeof(name), "accumulation: %d x B=%d equals 1 x B=%d, step %d loss", splits[s],
                     BIG / splits[s], BIG, step + 1);
            check_close(name, res[s][step].loss, res[0][step].loss, tol);
            snprintf(name, sizeof(name), "accumulation: %d x B=%d equals 1 x B=%d, step %d gradient norm", splits[s],
                     BIG / splits[s], BIG, step + 1);
            check_close(name, res[s][step].grad_norm, res[0][step].grad_norm, tol);
        }
}

static void test_memory_report() {
    Engine* e = make_gpu(options(65536.0f, 2000), init_params(1));
    MemoryReport r;
    memset(&r, 0, sizeof(r));
    e->memory_report(e, &r);
    size_t n = gpt2_param_layout(&CFG).num_parameters;
    auto bytes_of = [&](const char* name) -> long long {
        for (int i = 0; i < r.count; i++)
            if (strcmp(r.items[i].name, name) == 0) return (long long)r.items[i].bytes;
        return -1;
    };
    int ok = bytes_of("parameters") == (long long)(n * sizeof(floatX)) && bytes_of("gradients") > 0 &&
             bytes_of("master weights (fp32)") == (long long)(sizeof(floatX) == 4 ? 0 : n * sizeof(float)) &&
             bytes_of("AdamW m (fp32)") == (long long)(n * sizeof(float)) &&
             bytes_of("AdamW v (fp32)") == (long long)(n * sizeof(float)) && bytes_of("activations") > 0 &&
             bytes_of("scratch") > 0 && bytes_of("cuBLASLt workspace") > 0;
    CHECK(ok, "memory report names parameters, gradients, master weights, m, v, activations, scratch, workspace");
    // Every device component as planned, and as the device counted it (the runtime counts bytes).
    int exact = r.count > 0;
    for (int i = 0; i < r.count; i++)
        if (r.items[i].bytes != r.items[i].planned || (!r.items[i].host && r.items[i].measured != (long long)r.items[i].bytes))
            exact = 0;
    CHECK(exact, "each component: allocated = planned = the device's count");
    CHECK(e->precision == BUILD_PRECISION, "the engine reports the precision it was built for");
    e->destroy(e);
    // An engine asked for another precision than its build's says so and is not made.
    EngineOptions o = options(65536.0f, 2000);
    o.precision = BUILD_PRECISION == PRECISION_FP32 ? PRECISION_BF16 : PRECISION_FP32;
    char why[256] = "";
    Engine* other = gpu_engine_create(&CFG, &o, why, sizeof(why));
    CHECK(other == NULL && strstr(why, "was built for") != NULL, "a GPU engine refuses a precision it was not built for");
}

int main() {
    printf("precision %s\n", PRECISION_NAME);
    snprintf(g_dir, sizeof(g_dir), "/tmp/test_gpu_engine_XXXXXX");
    if (!mkdtemp(g_dir)) fatal("cannot make a temporary directory");
    test_step_parity();
    test_determinism();
    test_loss_scaling();
    test_checkpoint_crossing();
    test_recompute();
    test_gelu_fusion();
    test_accumulation();
    test_memory_report();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    if (system(cmd) != 0) printf("(could not remove %s)\n", g_dir);
    return test_finish();
}
