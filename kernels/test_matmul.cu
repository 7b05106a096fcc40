// test_matmul.cu: kernels/matmul.cuh against matmul_forward_cpu / matmul_backward_cpu (and
// gelu_forward_cpu / gelu_backward_cpu for the fused GELU epilogues).
// Shapes: odd N, C, OC (not multiples of 8) for the plain and bias paths, pointers one element off
// 16-byte alignment, N past one dbias chunk and OC past one dbias column group; the GELU
// epilogues at shapes that meet the GPU's requirement (the aux leading dimension, OC in forward
// and C in backward, a multiple of 8); and, on the CPU runtime, the refusal of a GELU shape that
// does not.
//
// Tolerances (kernel_check.cuh's rule, k floatX roundings on the result's path):
//   out, pre_gelu, dinp (OVERWRITTEN by cuBLASLt): k = 2. One rounding of the fp32 result when it
//     is stored; one more for the accumulation order: on a GPU, cuBLASLt may split k and reduce
//     the pieces in the output type (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE), and its GELU epilogue
//     evaluates tanh its own way. fp32 accumulation-order differences alone are ~1e-7.
//   dweight (+=, beta = 1): k = 3: the same two, plus the split-K case rounding the product before
//     adding the old value.
//   dbias (+=: cuBLASLt's BGRADB fp32 sums or this file's kernel's fp32 partials, then one rounding
//     of old + sum): k = 1. Both paths are checked: the epilogue where dweight is asked for, and the
//     kernel when cuBLASLt refuses the epilogue (the CPU runtime's CUDA_CPU_BLAS_REFUSE=BGRADB).
//   In the fp32 build every bound is the fp32 floor of 1e-5 (CUBLAS_COMPUTE_32F, no TF32).
#include <math.h>
#include <string.h>
#if defined(CUDA_CPU)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "kernel_check.cuh"
#include "matmul.cuh"
#include "ops_cpu.h"

static MatmulContext g_ctx;

// A device copy of h starting `off` elements into its allocation (off = 1: not 16-byte aligned).
struct DevBuf {
    floatX* base = nullptr;
    floatX* p = nullptr;
    size_t n = 0;
    DevBuf(size_t count, size_t off) : n(count) {
        base = device_alloc<floatX>(count + off);
        p = base + off;
    }
    DevBuf(const std::vector<floatX>& h, size_t off) : DevBuf(h.size(), off) { upload(h); }
    void upload(const std::vector<floatX>& h) {
        cudaCheck(cudaMemcpy(p, h.data(), h.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    }
    std::vector<float> download() const { return device_download_float(p, n); }
    ~DevBuf() { cudaCheck(cudaFree(base)); }
};

static void test_forward(int N, int C, int OC, bool use_bias, bool gelu, size_t off, TestRng& rng) {
    HostTensor inp = random_tensor((size_t)N * C, rng);
    HostTensor weight = random_tensor((size_t)OC * C, rng, 1.0f / sqrtf((float)C));
    HostTensor bias = random_tensor(OC, rng, 0.5f);
    std::vector<float> ref((size_t)N * OC), ref_gelu((size_t)N * OC);
    matmul_forward_cpu(ref.data(), inp.f.data(), weight.f.data(), use_bias ? bias.f.data() : nullptr, N, C, OC);
    if (gelu) gelu_forward_cpu(ref_gelu.data(), ref.data(), N * OC);

    DevBuf d_inp(inp.x, off), d_weight(weight.x, off), d_bias(bias.x, off);
    DevBuf d_out((size_t)N * OC, off), d_pre((size_t)N * OC, off);  // NaN-poisoned: must be overwritten
    matmul_forward(&g_ctx, d_out.p, gelu ? d_pre.p : nullptr, d_inp.p, d_weight.p, use_bias ? d_bias.p : nullptr, N, C,
                   OC, 0);
    char name[160];
    const char* what = gelu ? (use_bias ? "GELU_AUX_BIAS" : "GELU_AUX") : (use_bias ? "BIAS" : "DEFAULT");
    const char* align = off ? ", pointers not 16-byte aligned" : "";
    if (gelu) {
        snprintf(name, sizeof(name), "matmul_forward %s N=%d C=%d OC=%d%s: pre_gelu", what, N, C, OC, align);
        check_tensor(name, d_pre.download(), ref, floatx_tol(2));
        snprintf(name, sizeof(name), "matmul_forward %s N=%d C=%d OC=%d%s: out = gelu(pre_gelu)", what, N, C, OC, align);
        check_tensor(name, d_out.download(), ref_gelu, floatx_tol(2));
    } else {
        snprintf(name, sizeof(name), "matmul_forward %s N=%d C=%d OC=%d%s: out", what, N, C, OC, align);
        check_tensor(name, d_out.download(), ref, floatx_tol(2));
    }
}

static void test_backward(int N, int C, int OC, bool want_dinp, bool want_dbias, bool gelu, size_t off, TestRng& rng) {
    HostTensor dout = random_tensor((size_t)N * OC, rng);
    HostTensor inp = random_tensor((size_t)N * C, rng);
    HostTensor weight = random_tensor((size_t)OC * C, rng, 1.0f / sqrtf((float)OC));
    HostTensor pre = random_tensor((size_t)N * C, rng, 2.0f);
    // The old gradients, of the size a few micro-steps leave: the result must add to them.
    HostTensor dweight0 = random_tensor((size_t)OC * C, rng, 0.1f * sqrtf((float)N));
    HostTensor dbias0 = random_tensor(OC, rng, 0.1f * sqrtf((float)N));

    // matmul_backward_cpu accumulates into all three: dinp starts at zero to compare with the overwrite.
    std::vector<float> ref_dinp((size_t)N * C, 0.0f), ref_dw = dweight0.f, ref_db = dbias0.f;
    matmul_backward_cpu(ref_dinp.data(), ref_dw.data(), want_dbias ? ref_db.data() : nullptr, dout.f.data(),
                        inp.f.data(), weight.f.data(), N, C, OC);
    if (gelu) {
        std::vector<float> ref_dpre((size_t)N * C, 0.0f);
        gelu_backward_cpu(ref_dpre.data(), pre.f.data(), ref_dinp.data(), N * C);
        ref_dinp = ref_dpre;
    }

    DevBuf d_dout(dout.x, off), d_inp(inp.x, off), d_weight(weight.x, off), d_pre(pre.x, off);
    DevBuf d_dinp((size_t)N * C, off), d_dw(dweight0.x, off), d_db(dbias0.x, off);
    // The counters zeroed once, as the engine does at allocation; the partials NaN-poisoned (cudaMalloc's).
    float* scratch = device_alloc<float>(matmul_dbias_scratch_floats(N, OC));
    cudaCheck(cudaMemset(scratch, 0, MATMUL_DBIAS_COUNTERS * sizeof(float)));
    auto run = [&](int accumulate) {
        matmul_backward(&g_ctx, want_dinp ? d_dinp.p : nullptr, d_dw.p, want_dbias ? d_db.p : nullptr,
                        want_dbias ? scratch : nullptr, d_dout.p, d_inp.p, d_weight.p, gelu ? d_pre.p : nullptr, N, C,
                        OC, accumulate, 0);
    };
    run(1);
    char name[200];
    // From the given starting gradients, run again: the same bits as got_dw, got_db (cuBLASLt with the
    // same algorithm, a fixed-order dbias; the last call must have left the dbias counters at zero).
    auto rerun_same_bits = [&](const std::vector<floatX>& dw0, const std::vector<floatX>& db0, int accumulate,
                               const std::vector<float>& got_dw, const std::vector<float>& got_db, const char* label) {
        d_dw.upload(dw0);
        d_db.upload(db0);
        run(accumulate);
        std::vector<float> again_dw = d_dw.download(), again_db = d_db.download();
        test_report(memcmp(got_db.data(), again_db.data(), got_db.size() * sizeof(float)) == 0 &&
                        memcmp(got_dw.data(), again_dw.data(), got_dw.size() * sizeof(float)) == 0,
                    label, "bits differ");
    };
    char what[96];
    snprintf(what, sizeof(what), "matmul_backward%s N=%d C=%d OC=%d%s%s%s", gelu ? " DGELU" : "", N, C, OC,
             want_dinp ? "" : " (dinp NULL)", want_dbias ? "" : " (dbias NULL)", off ? ", pointers not 16-byte aligned" : "");
    if (want_dinp) {
        snprintf(name, sizeof(name), "%s: dinp%s", what, gelu ? " = (dout . W) * gelu'(pre_gelu)" : "");
        check_tensor(name, d_dinp.download(), ref_dinp, floatx_tol(2));
    } else {
        // Never written: still the NaN poison of cudaMalloc.
        std::vector<float> untouched = d_dinp.download();
        bool all_nan = true;
        for (float x : untouched) all_nan = all_nan && isnan(x);
        snprintf(name, sizeof(name), "%s: dinp left alone", what);
        test_report(all_nan, name, "dinp was written");
    }
    snprintf(name, sizeof(name), "%s: dweight +=", what);
    std::vector<float> got_dw = d_dw.download();
    check_tensor(name, got_dw, ref_dw, floatx_tol(3));
    if (want_dbias) {
        std::vector<float> got_db = d_db.download();
        snprintf(name, sizeof(name), "%s: dbias +=", what);
        check_tensor(name, got_db, ref_db, floatx_tol(1));
        snprintf(name, sizeof(name), "%s: repeat run bit-identical", what);
        rerun_same_bits(dweight0.x, dbias0.x, 1, got_dw, got_db, name);
    }
    // accumulate 0 (a step's first micro-step): dweight and dbias are written (beta = 0, the bias
    // gradient straight from the epilogue or the kernel), whatever they held (NaN here); twice, the
    // same bits. (Not compared bitwise with += onto zeros: beta is part of the algorithm search,
    // so a GPU may pick another algorithm.)
    {
        std::vector<float> fresh_dinp((size_t)N * C, 0.0f), fresh_dw((size_t)OC * C, 0.0f), fresh_db(OC, 0.0f);
        matmul_backward_cpu(fresh_dinp.data(), fresh_dw.data(), want_dbias ? fresh_db.data() : nullptr, dout.f.data(),
                            inp.f.data(), weight.f.data(), N, C, OC);
        std::vector<floatX> nan_dw((size_t)OC * C, (floatX)NAN), nan_db(OC, (floatX)NAN);
        d_dw.upload(nan_dw);
        d_db.upload(nan_db);
        run(0);
        std::vector<float> got_dw0 = d_dw.download(), got_db0 = d_db.download();
        snprintf(name, sizeof(name), "%s: dweight = (overwrite, was NaN)", what);
        check_tensor(name, got_dw0, fresh_dw, floatx_tol(2));
        if (want_dbias) {
            snprintf(name, sizeof(name), "%s: dbias = (overwrite, was NaN)", what);
            check_tensor(name, got_db0, fresh_db, floatx_tol(1));
        }
        snprintf(name, sizeof(name), "%s: overwrite twice bit-identical", what);
        rerun_same_bits(nan_dw, nan_db, 0, got_dw0, got_db0, name);
    }
    cudaCheck(cudaFree(scratch));
}

#if defined(CUDA_CPU)
// A GELU shape the GPU's cuBLASLt refuses must stop with one clear line, not compute. Runs in a
// child (the call exits), only on the CPU runtime (a forked child cannot use a real GPU context).
static void test_refusal(bool forward) {
    int fds[2];
    if (pipe(fds) != 0) { test_report(0, "matmul refusal: pipe", "pipe failed"); return; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        floatX* buf = device_alloc<floatX>(12 * 12 * 4);
        if (forward) matmul_forward(&g_ctx, buf, buf + 144, buf + 288, buf + 432, nullptr, 4, 12, 12, 0);
        else matmul_backward(&g_ctx, buf, buf + 144, nullptr, nullptr, buf + 288, buf, buf, buf + 432, 4, 12, 12, 1, 0);
        _exit(0);  // not reached when refused
    }
    close(fds[1]);
    char msg[512] = {0};
    size_t len = 0;
    ssize_t got;
    while (len < sizeof(msg) - 1 && (got = read(fds[0], msg + len, sizeof(msg) - 1 - len)) > 0) len += (size_t)got;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const char* need = forward ? "OC % 8 == 0" : "C % 8 == 0";
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, "error: matmul:") && strstr(msg, need);
    char name[128], why[600];
    snprintf(name, sizeof(name), "matmul_%s with pre_gelu and a 12-wide aux refused with one line",
             forward ? "forward" : "backward");
    snprintf(why, sizeof(why), "exit status %d, stderr: %s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
    test_report(ok, name, why);
}
#endif

int main() {
    TestRng rng(5);
    printf("precision %s\n", PRECISION_NAME);
    void* workspace = device_alloc<char>(MATMUL_WORKSPACE_BYTES);
    matmul_context_init(&g_ctx, workspace, MATMUL_WORKSPACE_BYTES);

    // Plain and bias paths at odd shapes, aligned and not.
    test_forward(1, 1, 1, true, false, 0, rng);
    test_forward(37, 29, 43, false, false, 0, rng);
    test_forward(37, 29, 43, true, false, 0, rng);
    test_forward(37, 29, 43, true, false, 1, rng);
    test_forward(64, 96, 80, true, false, 0, rng);
    // GELU epilogues: OC a multiple of 8 (N is free: it is not the aux leading dimension).
    test_forward(37, 64, 96, true, true, 0, rng);
    test_forward(64, 32, 128, false, true, 0, rng);

    test_backward(1, 1, 1, true, true, false, 0, rng);
    test_backward(37, 29, 43, true, true, false, 0, rng);
    test_backward(37, 29, 43, true, true, false, 1, rng);
    test_backward(37, 29, 43, false, false, false, 0, rng);
    test_backward(2600, 24, 40, true, true, false, 0, rng);  // 41 dbias chunks of 64 rows, the last partial
    // Several dbias column groups (16 packs each: 128 columns in fp16/bf16, 64 in fp32, 16 scalar),
    // the last one partial, with the 128-bit path (OC % 8 == 0) and the scalar one (odd OC).
    test_backward(700, 16, 264, true, true, false, 0, rng);
    test_backward(150, 16, 131, true, true, false, 0, rng);
    // DGELU: C a multiple of 8.
    test_backward(37, 64, 96, true, true, true, 0, rng);
    test_backward(300, 128, 32, true, false, true, 0, rng);
#if defined(CUDA_CPU)
    // cuBLASLt without an algorithm for BGRADB (shapes not seen above, so their setup is new): the bias
    // gradient falls back to the kernel, same bounds, and the refusal is remembered (no second query).
    setenv("CUDA_CPU_BLAS_REFUSE", "BGRADB", 1);
    test_backward(2601, 24, 40, true, true, false, 0, rng);
    test_backward(701, 16, 264, true, true, false, 0, rng);
    test_backward(151, 16, 131, true, true, false, 1, rng);
    {
        long q0 = matmul_heuristic_queries(&g_ctx);
        test_backward(151, 16, 131, true, true, false, 1, rng);
        long q1 = matmul_heuristic_queries(&g_ctx);
        char why[96];
        snprintf(why, sizeof(why), "queries before %ld, after %ld", q0, q1);
        test_report(q1 == q0, "matmul_backward: a refused BGRADB is asked once per product", why);
    }
    unsetenv("CUDA_CPU_BLAS_REFUSE");
#endif

    // The setup is cached per product: a forward seen before (new buffers, same alignments) makes no
    // heuristic query and is still right with its own bias; a new N makes exactly one.
    {
        long q0 = matmul_heuristic_queries(&g_ctx);
        test_forward(37, 29, 43, true, false, 0, rng);
        long q1 = matmul_heuristic_queries(&g_ctx);
        test_forward(41, 29, 43, true, false, 0, rng);
        test_forward(41, 29, 43, true, false, 0, rng);
        long q2 = matmul_heuristic_queries(&g_ctx);
        char why[128];
        snprintf(why, sizeof(why), "queries before %ld, after a repeat %ld, after a new shape twice %ld", q0, q1, q2);
        test_report(q0 > 0 && q1 == q0 && q2 == q0 + 1, "matmul: one heuristic query per distinct product", why);
    }

#if defined(CUDA_CPU)
    test_refusal(true);
    test_refusal(false);
#endif
    matmul_context_destroy(&g_ctx);
    cudaCheck(cudaFree(workspace));
    return test_finish();
}
