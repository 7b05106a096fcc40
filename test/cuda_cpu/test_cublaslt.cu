// test_cublaslt.cu: cuBLASLt matmuls - layouts, transposes, leading dimensions, batches, fp32/fp16/bf16,
// bias and GELU epilogues, bias gradients - each checked against a plain triple loop in double.
// Host code only, so the same file runs against the real cuBLASLt when built with nvcc -lcublasLt.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "cuda_test.h"
#include "test.h"

#define CKB(call)                                                                               \
    do {                                                                                        \
        cublasStatus_t s_ = (call);                                                             \
        if (s_ != CUBLAS_STATUS_SUCCESS) { printf("FAIL %s:%d: %s: status %d\n", __FILE__, __LINE__, #call, (int)s_); exit(1); } \
    } while (0)

static uint32_t rng_state = 2024u;
static float frand() {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

// A host buffer of one cudaDataType, read and written as float.
struct Buf {
    cudaDataType_t type;
    std::vector<unsigned char> bytes;
    Buf(cudaDataType_t t, size_t n) : type(t), bytes(n * (t == CUDA_R_32F ? 4 : 2)) {}
    size_t size() const { return bytes.size() / (type == CUDA_R_32F ? 4 : 2); }
    float get(size_t i) const {
        if (type == CUDA_R_32F) { float f; memcpy(&f, &bytes[4 * i], 4); return f; }
        if (type == CUDA_R_16F) { __half h; memcpy((void*)&h, &bytes[2 * i], 2); return __half2float(h); }
        __nv_bfloat16 b; memcpy((void*)&b, &bytes[2 * i], 2); return __bfloat162float(b);
    }
    void set(size_t i, float v) {
        if (type == CUDA_R_32F) memcpy(&bytes[4 * i], &v, 4);
        else if (type == CUDA_R_16F) { __half h = __float2half(v); memcpy(&bytes[2 * i], (void*)&h, 2); }
        else { __nv_bfloat16 b = __float2bfloat16(v); memcpy(&bytes[2 * i], (void*)&b, 2); }
    }
    void* to_device() const {
        void* d;
        CK(cudaMalloc(&d, bytes.size()));
        CK(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
        return d;
    }
    void from_device(const void* d) { CK(cudaMemcpy(bytes.data(), d, bytes.size(), cudaMemcpyDeviceToHost)); }
};

struct Case {
    const char* name;
    int m, n, k;
    cublasOperation_t ta, tb;
    cudaDataType_t ab, cd;
    cublasLtEpilogue_t epilogue;
    float alpha, beta;
    int pad;        // added to every leading dimension
    int batch;
    bool c_is_d;    // accumulate in place
    bool row_order;
};

static double gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double dgelu(double x) {
    double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}
static double tol_of(cudaDataType_t t) { return t == CUDA_R_32F ? 1e-6 : t == CUDA_R_16F ? 1.0 / 1024 : 1.0 / 128; }

static void run_case(cublasLtHandle_t lt, const Case& c) {
    const int m = c.m, n = c.n, k = c.k, nb = c.batch;
    const bool row = c.row_order;
    // Stored shapes: op(A) is m x k, op(B) is k x n, C and D are m x n.
    const int ar = c.ta == CUBLAS_OP_N ? m : k, ac = c.ta == CUBLAS_OP_N ? k : m;
    const int br = c.tb == CUBLAS_OP_N ? k : n, bc = c.tb == CUBLAS_OP_N ? n : k;
    const int lda = (row ? ac : ar) + c.pad, ldb = (row ? bc : br) + c.pad, ldc = (row ? n : m) + c.pad;
    const long sa = (long)lda * (row ? ar : ac), sb = (long)ldb * (row ? br : bc), sc = (long)ldc * (row ? m : n);
    auto off = [row](int r, int col, int ld) { return row ? (size_t)r * ld + col : (size_t)col * ld + r; };
    Buf A(c.ab, sa * nb), B(c.ab, sb * nb), C(c.cd, sc * nb), D(c.cd, sc * nb);
    for (size_t i = 0; i < A.size(); i++) A.set(i, frand());
    for (size_t i = 0; i < B.size(); i++) B.set(i, frand());
    for (size_t i = 0; i < C.size(); i++) C.set(i, c.beta != 0.0f ? frand() : NAN);  // beta == 0 must not read C
    for (size_t i = 0; i < D.size(); i++) D.set(i, NAN);
    const uint32_t e = c.epilogue;
    const bool has_bias = (e & CUBLASLT_EPILOGUE_BIAS) && e != CUBLASLT_EPILOGUE_BGRADA && e != CUBLASLT_EPILOGUE_BGRADB;
    const bool has_aux = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
    const int aux_ld = m + 8;
    Buf bias(c.cd, e == CUBLASLT_EPILOGUE_BGRADB ? n : m), aux(c.cd, (size_t)aux_ld * n);
    for (size_t i = 0; i < bias.size(); i++) bias.set(i, has_bias ? frand() : NAN);
    for (size_t i = 0; i < aux.size(); i++) aux.set(i, e == CUBLASLT_EPILOGUE_DGELU ? 2.0f * frand() : NAN);

    void *dA = A.to_device(), *dB = B.to_device(), *dC = C.to_device(), *dD = c.c_is_d ? dC : D.to_device();
    void *dbias = bias.to_device(), *daux = aux.to_device();
    cublasLtMatmulDesc_t desc;
    CKB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t ta = c.ta, tb = c.tb;
    CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    uint32_t epi = e;
    CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (has_bias || e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) {
        CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof(dbias)));
        int32_t bt = c.cd;
        CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    }
    if (has_aux) {
        int64_t ld64 = aux_ld;
        CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &daux, sizeof(daux)));
        CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld64, sizeof(ld64)));
    }
    cublasLtMatrixLayout_t la, lb, lc;
    CKB(cublasLtMatrixLayoutCreate(&la, c.ab, ar, ac, lda));
    CKB(cublasLtMatrixLayoutCreate(&lb, c.ab, br, bc, ldb));
    CKB(cublasLtMatrixLayoutCreate(&lc, c.cd, m, n, ldc));
    cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
    int64_t strides[3] = {sa, sb, sc};
    for (int i = 0; i < 3; i++) {
        if (row) {
            int32_t order = CUBLASLT_ORDER_ROW;
            CKB(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
        }
        if (nb > 1) {
            int32_t count = nb;
            CKB(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
            CKB(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], sizeof(int64_t)));
        }
    }
    cublasLtMatmulPreference_t pref;
    CKB(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws_size = 1 << 20;
    void* ws;
    CK(cudaMalloc(&ws, ws_size));
    CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof(ws_size)));
    cublasLtMatmulHeuristicResult_t heur;
    int returned = 0;
    CKB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &returned));
    if (returned < 1) { printf("FAIL %s: no algorithm\n", c.name); exit(1); }
    CKB(cublasLtMatmul(lt, desc, &c.alpha, dA, la, dB, lb, &c.beta, dC, lc, dD, lc, &heur.algo, ws, ws_size, 0));
    CK(cudaDeviceSynchronize());
    D.from_device(dD);
    if (has_aux) aux.from_device(daux);
    if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) bias.from_device(dbias);

    double worst = 0.0;  // error as a multiple of the allowed error
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double x = 0.0, mag = 0.0;
                for (int kk = 0; kk < k; kk++) {
                    double a = A.get(b * sa + (c.ta == CUBLAS_OP_N ? off(i, kk, lda) : off(kk, i, lda)));
                    double bv = B.get(b * sb + (c.tb == CUBLAS_OP_N ? off(kk, j, ldb) : off(j, kk, ldb)));
                    x += a * bv;
                    mag += fabs(a * bv);
                }
                x *= c.alpha;
                mag *= fabs(c.alpha);
                if (c.beta != 0.0f) {
                    double cv = C.get(b * sc + off(i, j, ldc));
                    x += c.beta * cv;
                    mag += fabs(c.beta * cv);
                }
                if (has_bias) { x += bias.get(i); mag += fabs(bias.get(i)); }
                double pre = x;
                if (e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || (has_aux && e != CUBLASLT_EPILOGUE_DGELU)) x = gelu(x);
                if (e == CUBLASLT_EPILOGUE_DGELU) x *= dgelu(aux.get(i + (size_t)j * aux_ld));
                double got = D.get(b * sc + off(i, j, ldc));
                double allowed = tol_of(c.cd) * fabs(x) + 1e-5 * mag + 1e-30;
                double r = fabs(got - x) / allowed;
                if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
                if (has_aux && e != CUBLASLT_EPILOGUE_DGELU) {
                    double ra = fabs(aux.get(i + (size_t)j * aux_ld) - pre) / (tol_of(c.cd) * fabs(pre) + 1e-5 * mag + 1e-30);
                    if (!(ra <= worst)) worst = isnan(ra) ? INFINITY : ra;
                }
            }
    if (e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB) {
        int len = e == CUBLASLT_EPILOGUE_BGRADA ? m : n;
        for (int t = 0; t < len; t++) {
            double s = 0.0, mag = 0.0;
            for (int kk = 0; kk < k; kk++) {
                double v = e == CUBLASLT_EPILOGUE_BGRADA ? A.get(c.ta == CUBLAS_OP_N ? off(t, kk, lda) : off(kk, t, lda))
                                                         : B.get(c.tb == CUBLAS_OP_N ? off(kk, t, ldb) : off(t, kk, ldb));
                s += v;
                mag += fabs(v);
            }
            double r = fabs(bias.get(t) - s) / (tol_of(c.cd) * fabs(s) + 1e-5 * mag + 1e-30);
            if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
        }
    }
    char why[128];
    snprintf(why, sizeof(why), "worst error is %.3g times the allowed error", worst);
    test_report(worst <= 1.0, c.name, why);

    CK(cudaFree(dA)); CK(cudaFree(dB)); CK(cudaFree(dC));
    if (!c.c_is_d) CK(cudaFree(dD));
    CK(cudaFree(dbias)); CK(cudaFree(daux)); CK(cudaFree(ws));
    CKB(cublasLtMatmulPreferenceDestroy(pref));
    CKB(cublasLtMatrixLayoutDestroy(la)); CKB(cublasLtMatrixLayoutDestroy(lb)); CKB(cublasLtMatrixLayoutDestroy(lc));
    CKB(cublasLtMatmulDescDestroy(desc));
}

// A shape mismatch is refused, as cuBLASLt refuses it.
static void test_mismatch(cublasLtHandle_t lt) {
    cublasLtMatmulDesc_t desc;
    CKB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la, lb, lc;
    CKB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 8, 5, 8));
    CKB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 6, 4, 6));  // k = 6 but A says k = 5
    CKB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, 8, 4, 8));
    float *a, *b, *d, one = 1.0f, zero = 0.0f;
    CK(cudaMalloc(&a, 64 * sizeof(float)));
    CK(cudaMalloc(&b, 64 * sizeof(float)));
    CK(cudaMalloc(&d, 64 * sizeof(float)));
    cublasStatus_t s = cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, lc, d, lc, nullptr, nullptr, 0, 0);
    CHECK(s != CUBLAS_STATUS_SUCCESS, "cublaslt_shape_mismatch_refused");
    CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(d));
    CKB(cublasLtMatrixLayoutDestroy(la)); CKB(cublasLtMatrixLayoutDestroy(lb)); CKB(cublasLtMatrixLayoutDestroy(lc));
    CKB(cublasLtMatmulDescDestroy(desc));
}

#ifdef CUDA_CPU
#include <string>
#include <sys/wait.h>
#include <unistd.h>
// An epilogue the interpreter does not know aborts, naming it, instead of computing something else.
static void test_unsupported_aborts() {
    int fd[2];
    if (pipe(fd) != 0) { printf("FAIL cublaslt_unsupported_epilogue_aborts: pipe\n"); return; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        cublasLtMatmulDesc_t desc;
        cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        uint32_t epi = CUBLASLT_EPILOGUE_DGELU_BGRAD;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
        _exit(0);
    }
    close(fd[1]);
    std::string err;
    char buf[512];
    ssize_t r;
    while ((r = read(fd[0], buf, sizeof(buf))) > 0) err.append(buf, (size_t)r);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    bool ok = WIFSIGNALED(st) && err.find("DGELU_BGRAD") != std::string::npos && err.find("not emulated") != std::string::npos;
    test_report(ok, "cublaslt_unsupported_epilogue_aborts", err.c_str());
}
#endif

int main() {
    cublasLtHandle_t lt;
    CKB(cublasLtCreate(&lt));
    const cudaDataType_t F = CUDA_R_32F, H = CUDA_R_16F, BF = CUDA_R_16BF;
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    const Case cases[] = {
        {"cublaslt_f32_NN", 37, 19, 23, N, N, F, F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_f32_TN_alpha_beta_padded_ld", 33, 17, 40, T, N, F, F, CUBLASLT_EPILOGUE_DEFAULT, 0.5f, 0.75f, 5, 1, false, false},
        {"cublaslt_f32_NT_accumulate_in_place", 16, 24, 31, N, T, F, F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f, 1.0f, 0, 1, true, false},
        {"cublaslt_f32_TT_row_order", 12, 9, 20, T, T, F, F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f, 0.5f, 3, 1, false, true},
        {"cublaslt_f32_batched_strided", 10, 14, 18, T, N, F, F, CUBLASLT_EPILOGUE_DEFAULT, 1.0f, 0.25f, 2, 3, false, false},
        {"cublaslt_bf16_TN_bias", 48, 32, 64, T, N, BF, BF, CUBLASLT_EPILOGUE_BIAS, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_f16_TN_gelu_bias", 40, 24, 56, T, N, H, H, CUBLASLT_EPILOGUE_GELU_BIAS, 1.0f, 0.0f, 8, 1, false, false},
        {"cublaslt_bf16_in_f32_out_gelu", 24, 16, 32, T, N, BF, F, CUBLASLT_EPILOGUE_GELU, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_f32_gelu_aux_bias", 32, 20, 28, T, N, F, F, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_bf16_gelu_aux", 32, 16, 24, T, N, BF, BF, CUBLASLT_EPILOGUE_GELU_AUX, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_f32_dgelu", 24, 18, 36, N, N, F, F, CUBLASLT_EPILOGUE_DGELU, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_bf16_dgelu", 32, 16, 32, N, N, BF, BF, CUBLASLT_EPILOGUE_DGELU, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_f32_NT_bgradb", 20, 12, 30, N, T, F, F, CUBLASLT_EPILOGUE_BGRADB, 1.0f, 0.0f, 0, 1, false, false},
        {"cublaslt_bf16_NT_bgradb_accumulate", 32, 16, 48, N, T, BF, BF, CUBLASLT_EPILOGUE_BGRADB, 1.0f, 1.0f, 0, 1, false, false},
        {"cublaslt_f32_TN_bgrada", 14, 22, 26, T, N, F, F, CUBLASLT_EPILOGUE_BGRADA, 1.0f, 0.0f, 0, 1, false, false},
    };
    for (const Case& c : cases) run_case(lt, c);
    test_mismatch(lt);
#ifdef CUDA_CPU
    test_unsupported_aborts();
#endif
    CKB(cublasLtDestroy(lt));
    return test_finish();
}
