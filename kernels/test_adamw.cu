// test_adamw.cu: kernels/adamw.cuh against adamw_update_cpu over three consecutive steps (bias
// corrections of t = 1, 2, 3), with and without an fp32 master copy, weight decay on and off,
// grad_scale != 1, sizes from 1 to 65537 (odd ones leave a tail for the vector kernel's extra
// thread), and pointers one element off 16-byte alignment (a head before the vector path's first
// aligned index) or with no common aligned index (the scalar fallback). The one-launch update of a
// range of several parts (adamw_update_segments) against one adamw_update a part, bit for bit: parts
// with differing decays, boundaries inside a 16-byte vector, several in one, a real GPT-2 layout's
// tensors whole and as ZeRO shards that start mid-tensor, aligned and unaligned arrays.
#include <math.h>
#include <string.h>

#include "adamw.cuh"
#include "gpt2_config.h"
#include "kernel_check.cuh"
#include "ops_cpu.h"

static const float LR = 1e-2f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f;

struct Case {
    size_t n;
    bool master;
    float weight_decay, grad_scale;
    bool misaligned;  // every pointer one element past a 16-byte boundary: a head, then the vector path
};

// Totals over all cases of fp32 results that differ in any bit from the reference (m, v, master,
// and params in the fp32 build) and of floatX params that differ from the rounded reference.
static size_t g_fp32_values = 0, g_fp32_diff = 0, g_x_values = 0, g_x_diff = 0;

static size_t count_bit_diffs(const std::vector<float>& a, const std::vector<float>& b) {
    size_t d = 0;
    for (size_t i = 0; i < a.size(); i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

// Worst relative error of one tensor over the steps, reported once per case.
struct Worst {
    double err = 0;
    void add(const std::vector<float>& got, const std::vector<float>& ref) {
        double e = rel_error(got.data(), ref.data(), ref.size());
        if (!(e <= err)) err = e;  // NaN sticks
    }
    void report(const char* label, const char* tensor, double tol) {
        char name[200], why[96];
        snprintf(name, sizeof(name), "%s: %s", label, tensor);
        snprintf(why, sizeof(why), "relative error %.3g > %.3g", err, tol);
        test_report(err <= tol, name, why);
    }
};

static void run_case(const Case& c, TestRng& rng) {
    const size_t n = c.n, off = c.misaligned ? 1 : 0;
    // Initial state: a master copy in fp32 with params its rounding, or params alone (already
    // floatX, so the reference starts from the same values). m and v start at zero, as at t = 1.
    std::vector<float> master0(n);
    std::vector<floatX> params0(n);
    for (size_t i = 0; i < n; i++) {
        master0[i] = rng.normal();
        params0[i] = (floatX)master0[i];
        if (!c.master) master0[i] = (float)params0[i];
    }
    std::vector<float> ref_p = master0, ref_m(n, 0.0f), ref_v(n, 0.0f);

    floatX *params_base = device_alloc<floatX>(n + off), *grads_base = device_alloc<floatX>(n + off);
    float *m_base = device_alloc<float>(n + off), *v_base = device_alloc<float>(n + off);
    float* master_base = c.master ? device_alloc<float>(n + off) : nullptr;
    floatX *params = params_base + off, *grads = grads_base + off;
    float *m = m_base + off, *v = v_base + off, *master = c.master ? master_base + off : nullptr;
    cudaCheck(cudaMemcpy(params, params0.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(m, 0, n * sizeof(float)));
    cudaCheck(cudaMemset(v, 0, n * sizeof(float)));
    if (master) cudaCheck(cudaMemcpy(master, master0.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    Worst wm, wv, wmaster, wparams;
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(BETA1, (float)t), bc2 = 1.0f - powf(BETA2, (float)t);
        HostTensor g = random_tensor(n, rng, 0.5f);
        cudaCheck(cudaMemcpy(grads, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        // Without a master copy the kernel's state is the floatX params: the reference continues
        // from the same rounded values (in fp32 the rounding is the identity).
        if (!master) ref_p = device_download_float(params, n);
        adamw_update(params, master, grads, m, v, n, LR, BETA1, BETA2, bc1, bc2, EPS, c.weight_decay, c.grad_scale, 0);
        adamw_update_cpu(ref_p.data(), g.f.data(), ref_m.data(), ref_v.data(), n, LR, BETA1, BETA2, bc1, bc2, EPS,
                         c.weight_decay, c.grad_scale);

        std::vector<float> got_m = device_download_float(m, n), got_v = device_download_float(v, n);
        std::vector<float> got_p = device_download_float(params, n);
        wm.add(got_m, ref_m);
        wv.add(got_v, ref_v);
        wparams.add(got_p, ref_p);
        g_fp32_values += 2 * n;
        g_fp32_diff += count_bit_diffs(got_m, ref_m) + count_bit_diffs(got_v, ref_v);
        std::vector<float> ref_px(n);
        for (size_t i = 0; i < n; i++) ref_px[i] = (float)(floatX)ref_p[i];
        g_x_values += n;
        g_x_diff += count_bit_diffs(got_p, ref_px);
        if (master) {
            std::vector<float> got_master = device_download_float(master, n);
            wmaster.add(got_master, ref_p);
            g_fp32_values += n;
            g_fp32_diff += count_bit_diffs(got_master, ref_p);
        }
    }
    char label[160];
    snprintf(label, sizeof(label), "adamw n=%zu %s wd=%g grad_scale=%g %s, steps t=1..3", n,
             c.master ? "master" : "no-master", c.weight_decay, c.grad_scale, c.misaligned ? "vector path after a head" : "vector path");
    // m, v and master are fp32 results of fp32 math on the same inputs (k = 0: fp32 bound).
    wm.report(label, "m", floatx_tol(0));
    wv.report(label, "v", floatx_tol(0));
    if (master) wmaster.report(label, "master", floatx_tol(0));
    // params: one rounding of the fp32 result to floatX (k = 1).
    wparams.report(label, "params", floatx_tol(1));

    cudaCheck(cudaFree(params_base));
    cudaCheck(cudaFree(grads_base));
    cudaCheck(cudaFree(m_base));
    cudaCheck(cudaFree(v_base));
    if (master_base) cudaCheck(cudaFree(master_base));
}

// The same update on the vector path, a repeat, the vector path after a head (every pointer one
// element off) and the scalar path (m alone one element off: no common aligned index) must give
// the same bits.
static void test_paths_agree(TestRng& rng) {
    const size_t n = 4099;
    HostTensor p = random_tensor(n, rng), g = random_tensor(n, rng);
    std::vector<float> mv(n, 0.01f);
    std::vector<float> results[4];
    long heads[4];
    for (int run = 0; run < 4; run++) {
        size_t off = run == 2 ? 1 : 0, moff = run >= 2 ? 1 : 0;
        floatX *pb = device_alloc<floatX>(n + off), *gb = device_alloc<floatX>(n + off);
        float *mb = device_alloc<float>(n + moff), *vb = device_alloc<float>(n + off);
        cudaCheck(cudaMemcpy(pb + off, p.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(gb + off, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(mb + moff, mv.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(vb + off, mv.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        heads[run] = adamw_vector_head(pb + off, nullptr, gb + off, mb + moff, vb + off);
        adamw_update(pb + off, nullptr, gb + off, mb + moff, vb + off, n, LR, BETA1, BETA2, 0.5f, 0.3f, EPS, 0.1f, 0.7f, 0);
        results[run] = device_download_float(pb + off, n);
        std::vector<float> m2 = device_download_float(mb + moff, n), v2 = device_download_float(vb + off, n);
        results[run].insert(results[run].end(), m2.begin(), m2.end());
        results[run].insert(results[run].end(), v2.begin(), v2.end());
        cudaCheck(cudaFree(pb));
        cudaCheck(cudaFree(gb));
        cudaCheck(cudaFree(mb));
        cudaCheck(cudaFree(vb));
    }
    test_report(heads[0] == 0 && heads[2] > 0 && heads[3] < 0, "adamw paths: vector, vector after a head, scalar",
                "the pointers did not select the three paths");
    test_report(count_bit_diffs(results[0], results[1]) == 0, "adamw repeat run bit-identical", "bits differ");
    test_report(count_bit_diffs(results[0], results[2]) == 0, "adamw vector path and vector path after a head bit-identical",
                "bits differ");
    test_report(count_bit_diffs(results[0], results[3]) == 0, "adamw vector and scalar paths bit-identical", "bits differ");
}

// ---- one launch over a range of parts with their own decays ----

// A model's tensors as the optimizer sees them: tensor k is [end[k - 1], end[k]) with decay wd[k].
struct Model {
    std::vector<size_t> end;
    std::vector<float> wd;
};

// Where a case's arrays lie (the range [lo, lo + n) of a model of `total` parameters):
enum Placement {
    WHOLE,          // every array a slice at lo of a buffer of the whole model: one common phase
    SHARD_BUFFERS,  // params a slice at lo of the whole model's, the others buffers of the range alone
                    // (ZeRO stages 1 and 2): no common aligned index unless lo is a multiple of VEC
    ALL_OFF_ONE,    // WHOLE, every buffer one element past a 16-byte boundary
    M_OFF_ONE,      // WHOLE, m's buffer alone one element off: no common aligned index
};
static const char* placement_name(Placement p) {
    return p == WHOLE ? "whole-model buffers" : p == SHARD_BUFFERS ? "shard buffers" : p == ALL_OFF_ONE ? "all one off" : "m one off";
}

// One set of device arrays for a range; bases for cudaFree.
struct RangeArrays {
    floatX *params, *grads;
    float *m, *v, *master;
    std::vector<void*> bases;
};
template <class T>
static T* range_slice(RangeArrays& r, size_t len, size_t at, size_t off) {
    T* base = device_alloc<T>(len + off);
    r.bases.push_back(base);
    return base + off + at;
}
static RangeArrays range_arrays(size_t total, size_t lo, size_t n, bool with_master, Placement pl) {
    RangeArrays r;
    size_t off = pl == ALL_OFF_ONE ? 1 : 0;
    size_t len = pl == SHARD_BUFFERS ? n : total, at = pl == SHARD_BUFFERS ? 0 : lo;
    r.params = range_slice<floatX>(r, total, lo, off);
    r.grads = range_slice<floatX>(r, len, at, off);
    r.m = range_slice<float>(r, len, at, pl == M_OFF_ONE ? 1 : off);
    r.v = range_slice<float>(r, len, at, off);
    r.master = with_master ? range_slice<float>(r, len, at, off) : nullptr;
    return r;
}
static void upload_state(const RangeArrays& r, size_t n, const HostTensor& p, const std::vector<float>& master,
                         const std::vector<float>& m, const std::vector<float>& v) {
    cudaCheck(cudaMemcpy(r.params, p.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(r.m, m.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(r.v, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    if (r.master) cudaCheck(cudaMemcpy(r.master, master.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}
// params (as floats), m, v and master, one after the other.
static std::vector<float> download_state(const RangeArrays& r, size_t n) {
    std::vector<float> all = device_download_float(r.params, n);
    for (const float* a : {r.m, r.v, r.master}) {
        if (!a) continue;
        std::vector<float> x = device_download_float(a, n);
        all.insert(all.end(), x.begin(), x.end());
    }
    return all;
}

// How often each path ran over the cases: vector from index 0, vector after a head, scalar.
static int g_seg_paths[3] = {0, 0, 0};

// The range [lo, hi) of model md, three steps: adamw_update_segments with the range's parts (as the
// trainer builds them: each tensor's part, its decay, adamw_segments_add) against adamw_update once a
// part, on the same placement, every result bit for bit. wrong_part >= 0 gives that part of the
// one-launch table a wrong decay: the comparison must then fail (the test's own check).
static bool run_segments(const char* what, const Model& md, size_t lo, size_t hi, bool with_master, Placement pl,
                         TestRng& rng, int wrong_part = -1) {
    const size_t n = hi - lo, total = md.end.back();
    std::vector<size_t> part_end;  // the parts, relative to lo, and their decays
    std::vector<float> part_wd;
    AdamWSegments seg = {};
    for (size_t k = 0; k < md.end.size(); k++) {
        size_t a = k ? md.end[k - 1] : 0, b = md.end[k];
        a = a > lo ? a : lo;
        b = b < hi ? b : hi;
        if (a >= b) continue;
        part_end.push_back(b - lo);
        part_wd.push_back(md.wd[k]);
        float wd = (int)part_wd.size() - 1 == wrong_part ? md.wd[k] + 0.25f : md.wd[k];
        adamw_segments_add(&seg, b - lo, wd);
    }
    HostTensor p = random_tensor(n, rng);
    std::vector<float> master(n), m(n), v(n);
    for (size_t i = 0; i < n; i++) {
        master[i] = with_master ? p.f[i] + 1e-3f * rng.normal() : p.f[i];  // a master copy finer than params
        m[i] = 0.01f * rng.normal();
        v[i] = 1e-4f * rng.uniform();
    }
    RangeArrays one = range_arrays(total, lo, n, with_master, pl), each = range_arrays(total, lo, n, with_master, pl);
    upload_state(one, n, p, master, m, v);
    upload_state(each, n, p, master, m, v);
    long head = adamw_vector_head(one.params, one.master, one.grads, one.m, one.v);
    g_seg_paths[head < 0 ? 2 : head > 0 ? 1 : 0]++;
    size_t diff = 0, values = 0;
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(BETA1, (float)t), bc2 = 1.0f - powf(BETA2, (float)t), gs = 0.75f;
        HostTensor g = random_tensor(n, rng, 0.5f);
        cudaCheck(cudaMemcpy(one.grads, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(each.grads, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        adamw_update_segments(one.params, one.master, one.grads, one.m, one.v, n, &seg, LR, BETA1, BETA2, bc1, bc2, EPS,
                              gs, 0);
        for (size_t k = 0; k < part_end.size(); k++) {
            size_t a = k ? part_end[k - 1] : 0, b = part_end[k];
            adamw_update(each.params + a, each.master ? each.master + a : nullptr, each.grads + a, each.m + a,
                         each.v + a, b - a, LR, BETA1, BETA2, bc1, bc2, EPS, part_wd[k], gs, 0);
        }
        std::vector<float> got = download_state(one, n), want = download_state(each, n);
        diff += count_bit_diffs(got, want);
        values += want.size();
    }
    for (RangeArrays* r : {&one, &each})
        for (void* b : r->bases) cudaCheck(cudaFree(b));
    char name[256], why[96];
    snprintf(name, sizeof(name), "adamw one launch, %s: [%zu, %zu), %zu parts (%d in the table), %s, %s, %s, 3 steps, "
             "equals one launch a part", what, lo, hi, part_end.size(), seg.count, with_master ? "master" : "no-master",
             placement_name(pl), head < 0 ? "scalar path" : head > 0 ? "vector path after a head" : "vector path");
    snprintf(why, sizeof(why), "%zu of %zu values differ", diff, values);
    if (wrong_part < 0) test_report(diff == 0, name, why);
    return diff == 0;
}

// A tiny GPT-2's layout (gpt2_param_layout: the trainer's tensors and decay flags, C = 18, so most
// boundaries fall inside a 16-byte vector), decay 0.1 on the 2-D weights.
static Model gpt2_model() {
    GPT2Config cfg = {13, 50, gpt2_padded_vocab(50), 2, 2, 18};
    ParamLayout lay = gpt2_param_layout(&cfg);
    Model md;
    for (int k = 0; k < GPT2_NUM_PARAM_TENSORS; k++) {
        md.end.push_back(lay.tensors[k].offset + lay.tensors[k].numel);
        md.wd.push_back(lay.tensors[k].weight_decay ? 0.1f : 0.0f);
    }
    return md;
}

static void test_segments(TestRng& rng) {
    // Hand-made parts: sizes 5, 1, 2 put three boundaries in the first vector; adjacent decays differ.
    Model small;
    const size_t sizes[] = {5, 1, 2, 13, 1000, 7, 3, 4099, 1, 9, 16, 777};
    const float decays[] = {0.1f, 0.0f, 0.3f, 0.0f, 0.1f, 0.05f, 0.0f, 0.1f, 0.2f, 0.0f, 0.1f, 0.0f};
    for (size_t k = 0, e = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        small.end.push_back(e += sizes[k]);
        small.wd.push_back(decays[k]);
    }
    // ADAMW_MAX_SEGMENTS parts, every decay different: the table full.
    Model full;
    for (int k = 0; k < ADAMW_MAX_SEGMENTS; k++) {
        full.end.push_back((k ? full.end.back() : 0) + 3 + 37 * (size_t)k);
        full.wd.push_back(0.01f * (float)(k + 1));
    }
    const Model gpt2 = gpt2_model();
    const size_t small_n = small.end.back(), gpt2_n = gpt2.end.back();
    const Placement all[] = {WHOLE, SHARD_BUFFERS, ALL_OFF_ONE, M_OFF_ONE};
    for (Placement pl : all) {
        for (int with_master = 0; with_master < 2; with_master++) {
            run_segments("hand-made parts", small, 0, small_n, with_master, pl, rng);
            run_segments("hand-made parts, mid-part to mid-part", small, 4, small_n - 300, with_master, pl, rng);
        }
        run_segments("16 parts, 16 decays", full, 0, full.end.back(), true, pl, rng);
        run_segments("16 parts, from mid-part", full, 11, full.end.back(), false, pl, rng);
    }
    // The GPT-2 layout: the whole model (stage 0) and every rank's shard for 3 and 7 ranks (ZeRO's
    // split, common/memory_plan.c: ceil(n / R) a rank, starting mid-tensor).
    for (int with_master = 0; with_master < 2; with_master++) {
        run_segments("GPT-2 layout, whole model", gpt2, 0, gpt2_n, with_master, WHOLE, rng);
        for (size_t R : {3, 7}) {
            size_t shard = (gpt2_n + R - 1) / R;
            for (size_t r = 0; r < R; r++) {
                size_t lo = r * shard, hi = lo + shard < gpt2_n ? lo + shard : gpt2_n;
                char what[96];
                snprintf(what, sizeof(what), "GPT-2 layout, shard %zu of %zu", r, R);
                run_segments(what, gpt2, lo, hi, with_master, r % 2 ? SHARD_BUFFERS : WHOLE, rng);
            }
        }
    }
    char why[96];
    snprintf(why, sizeof(why), "vector %d, after a head %d, scalar %d", g_seg_paths[0], g_seg_paths[1], g_seg_paths[2]);
    test_report(g_seg_paths[0] > 0 && g_seg_paths[1] > 0 && g_seg_paths[2] > 0,
                "adamw one launch: the cases ran the vector path, the vector path after a head and the scalar path", why);
    // The comparison can fail: one part of the table with a wrong decay, on each path.
    bool caught = true;
    for (Placement pl : {WHOLE, ALL_OFF_ONE, M_OFF_ONE})
        caught = caught && !run_segments("wrong decay", small, 0, small_n, true, pl, rng, 2);
    test_report(caught, "adamw one launch: a part given a wrong decay is caught on every path", "the results still matched");
}

// The host conversions of common.cuh against CUDA's own: every 16-bit pattern to fp32; fp32 to
// floatX on a stride through all 2^32 patterns, and at and beside every rounding midpoint between
// neighbouring floatX values (where round-to-nearest-even decides), infinities and NaN included.
static void test_host_conversions() {
#if !defined(ENABLE_FP32)
    size_t tried = 0, wrong = 0;
    auto check = [&](uint32_t bits) {
        float f = host_bits_float(bits);
        floatX want = (floatX)f, got = host_float_to_floatx(f);
        tried++;
        wrong += memcmp(&want, &got, 2) != 0;
    };
    size_t up_tried = 0, up_wrong = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        floatX x;
        uint16_t b = (uint16_t)h;
        memcpy((void*)&x, &b, 2);
        float want = (float)x, got = host_floatx_to_float(x);
        up_tried++;
        up_wrong += memcmp(&want, &got, 4) != 0;
        // The midpoint between x and the next pattern away from zero (both finite): exact in fp32.
        uint16_t nb = (uint16_t)(h + 1);
        if ((h & 0x7fffu) == 0x7fffu) continue;
        floatX nx;
        memcpy((void*)&nx, &nb, 2);
        double a = (double)(float)x, c = (double)(float)nx;
        if (!isfinite(a) || !isfinite(c) || (h & 0x8000u) != (nb & 0x8000u)) continue;
        uint32_t mid = host_float_bits((float)((a + c) / 2));
        for (int d = -1; d <= 1; d++) check(mid + d);
        check(host_float_bits((float)a));
    }
    for (uint64_t u = 0; u < (1ull << 32); u += 251) check((uint32_t)u);
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f7fffffu, 0x477fefffu,
                                0x477ff000u, 0x33000000u, 0x33000001u, 0x387fffffu, 0x38800000u, 0x80000000u};
    for (uint32_t b : special) check(b);
    char why[96];
    snprintf(why, sizeof(why), "%zu of %zu patterns differ", up_wrong, up_tried);
    test_report(up_wrong == 0, "host_floatx_to_float equals CUDA's conversion for every 16-bit pattern", why);
    snprintf(why, sizeof(why), "%zu of %zu values differ", wrong, tried);
    test_report(wrong == 0, "host_float_to_floatx equals CUDA's round-to-nearest-even (stride 251, every midpoint)", why);
#endif
}

// The offloaded optimizer's CPU update (adamw_update_host) takes the device kernel's steps bit for bit:
// master, m, v and the floatX weights, over three steps, weight decay on, with the loss scale's grad_scale.
static void test_host_update(TestRng& rng) {
    const size_t n = 65537;
    HostTensor p = random_tensor(n, rng);
    std::vector<float> master_h(p.f), m_h(n, 0.0f), v_h(n, 0.0f);
    std::vector<floatX> gp_h(n);
    floatX *params = device_alloc<floatX>(n), *grads = device_alloc<floatX>(n);
    float *master = device_alloc<float>(n), *m = device_alloc<float>(n), *v = device_alloc<float>(n);
    cudaCheck(cudaMemcpy(params, p.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(master, p.f.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(m, 0, n * sizeof(float)));
    cudaCheck(cudaMemset(v, 0, n * sizeof(float)));
    size_t diff = 0;
    for (int t = 1; t <= 3; t++) {
        float bc1 = 1.0f - powf(BETA1, (float)t), bc2 = 1.0f - powf(BETA2, (float)t);
        HostTensor g = random_tensor(n, rng, 3000.0f);  // gradients as a loss scale leaves them
        cudaCheck(cudaMemcpy(grads, g.x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
        adamw_update(params, master, grads, m, v, n, LR, BETA1, BETA2, bc1, bc2, EPS, 0.1f, 1.0f / 4096, 0);
        gp_h = g.x;
        adamw_update_host(gp_h.data(), master_h.data(), m_h.data(), v_h.data(), n, LR, BETA1, BETA2, bc1, bc2, EPS,
                          0.1f, 1.0f / 4096);
        std::vector<float> gp_f(n);
        for (size_t i = 0; i < n; i++) gp_f[i] = (float)gp_h[i];
        diff += count_bit_diffs(device_download_float(params, n), gp_f);
        diff += count_bit_diffs(device_download_float(master, n), master_h);
        diff += count_bit_diffs(device_download_float(m, n), m_h);
        diff += count_bit_diffs(device_download_float(v, n), v_h);
    }
    char why[64];
    snprintf(why, sizeof(why), "%zu values differ", diff);
    test_report(diff == 0, "adamw_update_host equals the device kernel bit for bit (3 steps, n=65537)", why);
    cudaCheck(cudaFree(params));
    cudaCheck(cudaFree(grads));
    cudaCheck(cudaFree(master));
    cudaCheck(cudaFree(m));
    cudaCheck(cudaFree(v));
}

int main() {
    TestRng rng(7);
    printf("precision %s\n", PRECISION_NAME);
    const Case cases[] = {
        {1, false, 0.0f, 1.0f, false},      {1, true, 0.1f, 0.5f, false},      {7, false, 0.1f, 0.25f, false},
        {8, true, 0.0f, 1.0f, false},       {1000, false, 0.0f, 1.0f, false},  {4099, true, 0.1f, 0.37f, false},
        {4099, false, 0.1f, 2.0f, true},    {4099, true, 0.0f, 1.0f, true},    {65537, true, 0.1f, 0.8f, false},
        {65537, false, 0.1f, 1.0f, false},  {3, true, 0.1f, 3.0f, true},
    };
    for (const Case& c : cases) run_case(c, rng);
    test_paths_agree(rng);
    test_segments(rng);
    test_host_conversions();
    test_host_update(rng);
    // Not a pass/fail criterion (the reference's FMA contraction depends on how ops_cpu.c was built):
    // how many results match adamw_update_cpu bit for bit.
    printf("info: bit-identical to adamw_update_cpu: fp32 values (m, v, master) %zu of %zu, %s params %zu of %zu\n",
           g_fp32_values - g_fp32_diff, g_fp32_values, PRECISION_NAME, g_x_values - g_x_diff, g_x_values);
    return test_finish();
}
