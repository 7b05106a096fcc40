// cublaslt_cpu.cpp: an interpreter of the cuBLASLt descriptors the project's matmul wrapper sets,
// computing D = epilogue(alpha * op(A) op(B) + beta * C) on the CPU with fp32 accumulation, as
// CUBLAS_COMPUTE_32F does. Anything it does not interpret (an attribute, a type, an epilogue)
// aborts with its name rather than computing something else.
#include "cuda_cpu_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

namespace {

const uint32_t kDescMagic = 0x4c54444du, kLayoutMagic = 0x4c544c59u, kPrefMagic = 0x4c545052u;

struct Desc {
    uint32_t magic;
    int32_t compute;
    int32_t scale;
    int32_t transa, transb;
    uint32_t epilogue;
    int32_t pointer_mode;
    int32_t bias_type;     // -1: the type of D
    int32_t aux_type;      // -1: the type of D
    const void* bias;
    void* aux;
    int64_t aux_ld;
    int64_t bias_batch_stride;
    int64_t aux_batch_stride;
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t), "Desc must fit cuBLASLt's opaque descriptor");

struct Layout {
    uint32_t magic;
    int32_t type;
    int32_t order;
    int32_t batch;
    uint64_t rows, cols;
    int64_t ld;
    int64_t stride;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "Layout must fit cuBLASLt's opaque layout");

struct Pref {
    uint32_t magic;
    uint64_t max_workspace;
};
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "Pref must fit cuBLASLt's opaque preference");

Desc* desc_of(cublasLtMatmulDesc_t d, const char* api) {
    Desc* p = reinterpret_cast<Desc*>(d);
    if (!p || p->magic != kDescMagic) cuda_cpu_fail("%s: not a live cublasLtMatmulDesc_t", api);
    return p;
}
Layout* layout_of(cublasLtMatrixLayout_t l, const char* api) {
    Layout* p = reinterpret_cast<Layout*>(l);
    if (!p || p->magic != kLayoutMagic) cuda_cpu_fail("%s: not a live cublasLtMatrixLayout_t", api);
    return p;
}

const char* type_name(int t) {
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
    case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
    default: return "an unnamed cudaDataType";
    }
}
bool type_supported(int t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// The runtime's own conversions (intrinsics_cpu.cpp): the same bits as CUDA's, without the
// branches of its host-side code.
inline float load(const void* p, int type, size_t i) {
    switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    default: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    }
}
inline void store(void* p, int type, size_t i, float v) {
    switch (type) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<uint16_t*>(p)[i] = float_to_half(v); break;
    default: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); break;
    }
}
size_t type_size(int type) { return type == CUDA_R_32F ? 4 : 2; }

// Offset of element (r, c) of one matrix of a layout.
inline size_t at(const Layout* l, uint64_t r, uint64_t c) {
    return l->order == CUBLASLT_ORDER_ROW ? r * (size_t)l->ld + c : c * (size_t)l->ld + r;
}

// TF32 keeps 10 mantissa bits; round to nearest even as the tensor cores' input conversion does.
inline float to_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

const float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
inline float gelu_tanh(float x) {
    float t = tanhf(kGeluScale * (x + 0.044715f * x * x * x));
    return 0.5f * x * (1.0f + t);
}
inline float dgelu_tanh(float x) {
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

const char* epilogue_name(uint32_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_RELU_AUX: return "RELU_AUX";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: return "RELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU: return "DRELU";
    case CUBLASLT_EPILOGUE_DRELU_BGRAD: return "DRELU_BGRAD";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "an unnamed epilogue";
    }
}

// The epilogues interpreted here; the *_BGRAD variants that fuse a bias gradient with an
// activation gradient are left out until the project needs them (and a GPU to check them on).
bool epilogue_supported(uint32_t e) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_BIAS: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_BGRADA: case CUBLASLT_EPILOGUE_BGRADB:
        return true;
    default:
        return false;
    }
}

// Bytes from a matrix's first element to just past its last, over every batch.
size_t layout_bytes(const Layout* l) {
    if (!l->rows || !l->cols || l->batch < 1) return 0;
    uint64_t outer = l->order == CUBLASLT_ORDER_ROW ? l->rows : l->cols, inner = l->order == CUBLASLT_ORDER_ROW ? l->cols : l->rows;
    return (size_t)((outer - 1) * (uint64_t)l->ld + inner + (uint64_t)l->stride * (uint64_t)(l->batch - 1)) * type_size(l->type);
}

struct Problem {
    uint64_t m, n, k;
    int batch;
};

// Checks what cuBLASLt would refuse (returns a message) and aborts on what the interpreter lacks.
const char* check_problem(const Desc* d, const Layout* A, const Layout* B, const Layout* C, const Layout* D, Problem* p) {
    if (d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_PEDANTIC && d->compute != CUBLAS_COMPUTE_32F_FAST_TF32)
        cuda_cpu_fail("cublasLt: compute type %d is not emulated (expected CUBLAS_COMPUTE_32F or _FAST_TF32)", d->compute);
    if (d->scale != CUDA_R_32F) cuda_cpu_fail("cublasLt: scale type %s is not emulated (expected CUDA_R_32F)", type_name(d->scale));
    if (!epilogue_supported(d->epilogue)) cuda_cpu_fail("cublasLt: epilogue %s (%u) is not emulated", epilogue_name(d->epilogue), d->epilogue);
    if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST && d->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        cuda_cpu_fail("cublasLt: pointer mode %d is not emulated (expected HOST or DEVICE)", d->pointer_mode);
    const Layout* ls[4] = {A, B, C, D};
    const char* names[4] = {"A", "B", "C", "D"};
    for (int i = 0; i < 4; i++) {
        if (!type_supported(ls[i]->type))
            cuda_cpu_fail("cublasLt: matrix %s has type %s; the emulation takes CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF", names[i], type_name(ls[i]->type));
        if (ls[i]->order != CUBLASLT_ORDER_COL && ls[i]->order != CUBLASLT_ORDER_ROW)
            cuda_cpu_fail("cublasLt: matrix %s has order %d; the emulation takes CUBLASLT_ORDER_COL or _ROW", names[i], ls[i]->order);
        uint64_t inner = ls[i]->order == CUBLASLT_ORDER_ROW ? ls[i]->cols : ls[i]->rows;
        if (ls[i]->ld < (int64_t)inner) return "a leading dimension is smaller than the matrix";
    }
    if (A->type != B->type) return "A and B have different types";
    if (C->type != D->type) return "C and D have different types";
    p->m = D->rows;
    p->n = D->cols;
    uint64_t am = d->transa == CUBLAS_OP_N ? A->rows : A->cols, ak = d->transa == CUBLAS_OP_N ? A->cols : A->rows;
    uint64_t bk = d->transb == CUBLAS_OP_N ? B->rows : B->cols, bn = d->transb == CUBLAS_OP_N ? B->cols : B->rows;
    if (am != p->m || bn != p->n || ak != bk) return "op(A) is not m x k, op(B) is not k x n, or D is not m x n";
    if (C->rows != D->rows || C->cols != D->cols) return "C and D have different shapes";
    p->k = ak;
    p->batch = D->batch;
    for (int i = 0; i < 3; i++)
        if (ls[i]->batch != p->batch) return "A, B, C and D have different batch counts";
    uint32_t e = d->epilogue;
    bool bias_in = (e & CUBLASLT_EPILOGUE_BIAS) != 0;
    bool bgrad = e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
    if ((bias_in || bgrad) && !d->bias) return "the epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER";
    int bt = d->bias_type < 0 ? D->type : d->bias_type;
    if ((bias_in || bgrad) && !type_supported(bt)) cuda_cpu_fail("cublasLt: bias type %s is not emulated", type_name(bt));
    bool aux = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
    if (aux && !d->aux) return "the epilogue needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER";
    if (aux && d->aux_ld < (int64_t)p->m) return "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD is unset or smaller than the rows of D";
    int at_ = d->aux_type < 0 ? D->type : d->aux_type;
    if (aux && !type_supported(at_)) cuda_cpu_fail("cublasLt: aux type %s is not emulated", type_name(at_));
    return nullptr;
}

// Dot product with eight fp32 partial sums, which the compiler turns into vector code.
inline float dot(const float* a, const float* b, size_t k) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= k; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < k; i++) r += a[i] * b[i];
    return r;
}

void matmul_one(const Desc* d, const Problem& p, int b, float alpha, float beta, const void* Ap, const Layout* A,
                const void* Bp, const Layout* B, const void* Cp, const Layout* C, void* Dp, const Layout* D) {
    const size_t m = p.m, n = p.n, k = p.k;
    const bool tf32 = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && A->type == CUDA_R_32F;
    // op(A) as m x k rows and op(B) transposed as n x k rows, so every output is one contiguous dot.
    // Kept between calls: a fresh 25 MB buffer per LM-head product would be zeroed and faulted in again.
    static thread_local std::vector<float> a_buf, bt_buf;
    if (a_buf.size() < m * k) a_buf.resize(m * k);
    if (bt_buf.size() < n * k) bt_buf.resize(n * k);
    float* a = a_buf.data();
    float* bt = bt_buf.data();
    const size_t aoff = (size_t)b * A->stride, boff = (size_t)b * B->stride;
    for (size_t i = 0; i < m; i++)
        for (size_t kk = 0; kk < k; kk++) {
            float v = load(Ap, A->type, aoff + (d->transa == CUBLAS_OP_N ? at(A, i, kk) : at(A, kk, i)));
            a[i * k + kk] = tf32 ? to_tf32(v) : v;
        }
    for (size_t j = 0; j < n; j++)
        for (size_t kk = 0; kk < k; kk++) {
            float v = load(Bp, B->type, boff + (d->transb == CUBLAS_OP_N ? at(B, kk, j) : at(B, j, kk)));
            bt[j * k + kk] = tf32 ? to_tf32(v) : v;
        }
    const uint32_t e = d->epilogue;
    const int bias_type = d->bias_type < 0 ? D->type : d->bias_type;
    const int aux_type = d->aux_type < 0 ? D->type : d->aux_type;
    const size_t coff = (size_t)b * C->stride, doff = (size_t)b * D->stride;
    const size_t bias_off = (size_t)b * d->bias_batch_stride, aux_off = (size_t)b * d->aux_batch_stride;
    const bool add_bias = (e & CUBLASLT_EPILOGUE_BIAS) && e != CUBLASLT_EPILOGUE_BGRADA && e != CUBLASLT_EPILOGUE_BGRADB;
    // Every output is written once, by one dot in a fixed order, so the result does not depend on
    // the loop order: 64 x 64 output tiles keep their rows of op(A) and columns of op(B) in cache (the
    // LM head's op(A) is 25 MB; read per column it would stream from memory n times). C may alias D,
    // and each element reads C before writing D.
    const size_t TILE = 64, ti = (m + TILE - 1) / TILE, tj = (n + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if (m * n * k > (1u << 16))
    for (size_t t = 0; t < ti * tj; t++) {
        const size_t i0 = (t % ti) * TILE, j0 = (t / ti) * TILE;
        const size_t i1 = i0 + TILE < m ? i0 + TILE : m, j1 = j0 + TILE < n ? j0 + TILE : n;
        for (size_t j = j0; j < j1; j++) {
            for (size_t i = i0; i < i1; i++) {
                float x = alpha * dot(&a[i * k], &bt[j * k], k);
                // beta == 0 never reads C, as in cuBLAS: C may hold garbage (or NaNs) then.
                if (beta != 0.0f) x += beta * load(Cp, C->type, coff + at(C, i, j));
                if (add_bias) x += load(d->bias, bias_type, bias_off + i);
                switch (e) {
                case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_RELU_BIAS: x = x > 0.0f ? x : 0.0f; break;
                case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_BIAS: x = gelu_tanh(x); break;
                case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
                    store(d->aux, aux_type, aux_off + i + j * (size_t)d->aux_ld, x);
                    x = gelu_tanh(x);
                    break;
                case CUBLASLT_EPILOGUE_DGELU:
                    x *= dgelu_tanh(load(d->aux, aux_type, aux_off + i + j * (size_t)d->aux_ld));
                    break;
                default: break;
                }
                store(Dp, D->type, doff + at(D, i, j), x);
            }
        }
    }
    // Bias gradients: sums over the GEMM's k dimension of op(A) (one per row of D) or of op(B)
    // (one per column of D), written (not accumulated) in the bias type.
    void* bias_out = const_cast<void*>(d->bias);
    if (e == CUBLASLT_EPILOGUE_BGRADA)
        for (size_t i = 0; i < m; i++) {
            float s = 0.0f;
            for (size_t kk = 0; kk < k; kk++) s += a[i * k + kk];
            store(bias_out, bias_type, bias_off + i, s);
        }
    if (e == CUBLASLT_EPILOGUE_BGRADB)
        for (size_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (size_t kk = 0; kk < k; kk++) s += bt[j * k + kk];
            store(bias_out, bias_type, bias_off + j, s);
        }
}

template <class T>
T read_attr(const void* buf, size_t size, const char* api, const char* name) {
    if (!buf || size != sizeof(T))
        cuda_cpu_fail("%s(%s): expected a %zu-byte value, got %zu bytes", api, name, sizeof(T), size);
    T v;
    memcpy(&v, buf, sizeof(T));
    return v;
}

// The happens-before checker's view of a matrix: each column (row, for row-major) of each batch.
void matrix_access(const void* p, const Layout* l, bool write) {
    if (!l->rows || !l->cols || l->batch < 1) return;
    uint64_t outer = l->order == CUBLASLT_ORDER_ROW ? l->rows : l->cols, inner = l->order == CUBLASLT_ORDER_ROW ? l->cols : l->rows;
    size_t es = type_size(l->type);
    if ((uint64_t)l->ld == inner && (l->batch == 1 || (uint64_t)l->stride == inner * outer)) {
        hb_access((uintptr_t)p, (size_t)(inner * outer * (uint64_t)l->batch) * es, write, 0);
        return;
    }
    for (int b = 0; b < l->batch; b++)
        for (uint64_t o = 0; o < outer; o++)
            hb_access((uintptr_t)p + (size_t)((uint64_t)b * (uint64_t)l->stride + o * (uint64_t)l->ld) * es, (size_t)inner * es, write, 0);
}

}  // namespace

struct cublasLtContext { uint32_t magic; };
static const uint32_t kHandleMagic = 0x4c54484eu;

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasLtContext{kHandleMagic};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h || h->magic != kHandleMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
const char* cublasLtGetStatusName(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}
const char* cublasLtGetStatusString(cublasStatus_t s) { return cublasLtGetStatusName(s); }

static void desc_init(Desc* d, cublasComputeType_t compute, cudaDataType_t scale) {
    memset(d, 0, sizeof(*d));
    d->magic = kDescMagic;
    d->compute = compute;
    d->scale = scale;
    d->transa = CUBLAS_OP_N;
    d->transb = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->bias_type = -1;
    d->aux_type = -1;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulDescOpaque_t* o = new cublasLtMatmulDescOpaque_t();
    desc_init(reinterpret_cast<Desc*>(o), compute, scale);
    *desc = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc, size_t size, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!desc || size < sizeof(Desc)) return CUBLAS_STATUS_INVALID_VALUE;
    desc_init(reinterpret_cast<Desc*>(desc), compute, scale);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    desc_of(desc, "cublasLtMatmulDescDestroy")->magic = 0;
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size) {
    const char* api = "cublasLtMatmulDescSetAttribute";
    Desc* d = desc_of(desc, api);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
        int32_t op = read_attr<int32_t>(buf, size, api, "TRANSA/TRANSB");
        if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) cuda_cpu_fail("%s: transpose %d is not emulated (expected CUBLAS_OP_N or CUBLAS_OP_T)", api, op);
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb) = op;
        break;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
        uint32_t e = read_attr<uint32_t>(buf, size, api, "EPILOGUE");
        if (!epilogue_supported(e)) cuda_cpu_fail("%s: epilogue %s (%u) is not emulated", api, epilogue_name(e), e);
        d->epilogue = e;
        break;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: d->bias = read_attr<const void*>(buf, size, api, "BIAS_POINTER"); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: d->bias_type = read_attr<int32_t>(buf, size, api, "BIAS_DATA_TYPE"); break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: d->bias_batch_stride = read_attr<int64_t>(buf, size, api, "BIAS_BATCH_STRIDE"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: d->aux = read_attr<void*>(buf, size, api, "EPILOGUE_AUX_POINTER"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: d->aux_ld = read_attr<int64_t>(buf, size, api, "EPILOGUE_AUX_LD"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: d->aux_batch_stride = read_attr<int64_t>(buf, size, api, "EPILOGUE_AUX_BATCH_STRIDE"); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: d->aux_type = read_attr<int32_t>(buf, size, api, "EPILOGUE_AUX_DATA_TYPE"); break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: d->pointer_mode = read_attr<int32_t>(buf, size, api, "POINTER_MODE"); break;
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: d->compute = read_attr<int32_t>(buf, size, api, "COMPUTE_TYPE"); break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: d->scale = read_attr<int32_t>(buf, size, api, "SCALE_TYPE"); break;
    default: cuda_cpu_fail("%s: attribute %d is not emulated (see cublaslt_cpu.cpp)", api, (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

static void layout_init(Layout* l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    memset(l, 0, sizeof(*l));
    l->magic = kLayoutMagic;
    l->type = type;
    l->order = CUBLASLT_ORDER_COL;
    l->batch = 1;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatrixLayoutOpaque_t* o = new cublasLtMatrixLayoutOpaque_t();
    layout_init(reinterpret_cast<Layout*>(o), type, rows, cols, ld);
    *layout = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout, size_t size, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (!layout || size < sizeof(Layout)) return CUBLAS_STATUS_INVALID_VALUE;
    layout_init(reinterpret_cast<Layout*>(layout), type, rows, cols, ld);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    layout_of(layout, "cublasLtMatrixLayoutDestroy")->magic = 0;
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void* buf, size_t size) {
    const char* api = "cublasLtMatrixLayoutSetAttribute";
    Layout* l = layout_of(layout, api);
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: l->type = (int32_t)read_attr<uint32_t>(buf, size, api, "TYPE"); break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: l->order = read_attr<int32_t>(buf, size, api, "ORDER"); break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: l->rows = read_attr<uint64_t>(buf, size, api, "ROWS"); break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: l->cols = read_attr<uint64_t>(buf, size, api, "COLS"); break;
    case CUBLASLT_MATRIX_LAYOUT_LD: l->ld = read_attr<int64_t>(buf, size, api, "LD"); break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: l->batch = read_attr<int32_t>(buf, size, api, "BATCH_COUNT"); break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: l->stride = read_attr<int64_t>(buf, size, api, "STRIDED_BATCH_OFFSET"); break;
    default: cuda_cpu_fail("%s: attribute %d is not emulated (see cublaslt_cpu.cpp)", api, (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulPreferenceOpaque_t* o = new cublasLtMatmulPreferenceOpaque_t();
    Pref* p = reinterpret_cast<Pref*>(o);
    p->magic = kPrefMagic;
    *pref = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
    if (!pref || size < sizeof(Pref)) return CUBLAS_STATUS_INVALID_VALUE;
    Pref* p = reinterpret_cast<Pref*>(pref);
    memset(p, 0, sizeof(*p));
    p->magic = kPrefMagic;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    Pref* p = reinterpret_cast<Pref*>(pref);
    if (!p || p->magic != kPrefMagic) cuda_cpu_fail("cublasLtMatmulPreferenceDestroy: not a live preference");
    p->magic = 0;
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t size) {
    const char* api = "cublasLtMatmulPreferenceSetAttribute";
    Pref* p = reinterpret_cast<Pref*>(pref);
    if (!p || p->magic != kPrefMagic) cuda_cpu_fail("%s: not a live preference", api);
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: p->max_workspace = read_attr<uint64_t>(buf, size, api, "MAX_WORKSPACE_BYTES"); break;
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        break;  // they only steer which GPU kernel is picked
    default: cuda_cpu_fail("%s: attribute %d is not emulated (see cublaslt_cpu.cpp)", api, (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                                              int* returned) {
    const char* api = "cublasLtMatmulAlgoGetHeuristic";
    if (!handle || handle->magic != kHandleMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!results || !returned || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    Problem p;
    const char* bad = check_problem(desc_of(desc, api), layout_of(Adesc, api), layout_of(Bdesc, api), layout_of(Cdesc, api), layout_of(Ddesc, api), &p);
    *returned = 0;
    if (bad) {
        fprintf(stderr, "cuda_cpu: %s: %s\n", api, bad);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    // CUDA_CPU_BLAS_REFUSE=<epilogue name>: answer "no algorithm" for products with that epilogue, as a
    // GPU's cuBLASLt may (a caller's fallback is then tested on the CPU).
    const char* refuse = getenv("CUDA_CPU_BLAS_REFUSE");
    if (refuse && *refuse && strcmp(refuse, epilogue_name(desc_of(desc, api)->epilogue)) == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(&results[0], 0, sizeof(results[0]));
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_size, cudaStream_t stream) {
    const char* api = "cublasLtMatmul";
    if (!handle || handle->magic != kHandleMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    const Desc* d = desc_of(desc, api);
    const Layout *la = layout_of(Adesc, api), *lb = layout_of(Bdesc, api), *lc = layout_of(Cdesc, api), *ld = layout_of(Ddesc, api);
    Problem p;
    const char* bad = check_problem(d, la, lb, lc, ld, &p);
    if (!bad && (!alpha || !beta || !A || !B || !D)) bad = "alpha, beta, A, B and D must not be NULL";
    if (bad) {
        fprintf(stderr, "cuda_cpu: %s: %s\n", api, bad);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const bool device_scalars = d->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    float a = 0.0f, b = 0.0f;
    if (device_scalars) {
        device_range_or_die(api, "alpha", alpha, sizeof(float));
        device_range_or_die(api, "beta", beta, sizeof(float));
    } else {
        a = *static_cast<const float*>(alpha);
        b = *static_cast<const float*>(beta);
        if (b != 0.0f && !C) {
            fprintf(stderr, "cuda_cpu: %s: beta != 0 needs C\n", api);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    if (!stream_is_valid(stream)) return CUBLAS_STATUS_INVALID_VALUE;
    // Every matrix the product touches must lie inside one device allocation (the runtime's own
    // accesses are not checked one by one, as a kernel's are); D, the aux output and a bias gradient
    // count as written afterwards.
    const uint32_t e = d->epilogue;
    const bool bgrad = e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
    const bool aux_out = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const bool aux_in = e == CUBLASLT_EPILOGUE_DGELU;
    const int bias_type = d->bias_type < 0 ? ld->type : d->bias_type, aux_type = d->aux_type < 0 ? ld->type : d->aux_type;
    const size_t bias_n = e == CUBLASLT_EPILOGUE_BGRADB ? p.n : p.m;
    const size_t aux_bytes = (size_t)(d->aux_ld * (int64_t)(p.n ? p.n - 1 : 0) + (int64_t)p.m +
                                      d->aux_batch_stride * (p.batch - 1)) * type_size(aux_type);
    const size_t bias_bytes = (bias_n + (size_t)d->bias_batch_stride * (p.batch - 1)) * type_size(bias_type);
    device_range_or_die(api, "A", A, layout_bytes(la));
    device_range_or_die(api, "B", B, layout_bytes(lb));
    if ((device_scalars && C) || b != 0.0f) device_range_or_die(api, "C", C, layout_bytes(lc));
    device_range_or_die(api, "D", D, layout_bytes(ld));
    if ((e & CUBLASLT_EPILOGUE_BIAS) || bgrad) device_range_or_die(api, "the bias", d->bias, bias_bytes);
    if (aux_in || aux_out) device_range_or_die(api, "the aux matrix", d->aux, aux_bytes);
    // Queued on the stream: the descriptors are copied (a program may destroy them at once), the
    // scalars read now from the host (or, in device pointer mode, when it runs).
    Desc dc = *d;
    Layout lac = *la, lbc = *lb, lcc = *lc, ldc = *ld;
    char what[160];
    snprintf(what, sizeof(what), "cublasLtMatmul (m=%llu n=%llu k=%llu, batch %d)", (unsigned long long)p.m,
             (unsigned long long)p.n, (unsigned long long)p.k, p.batch);
    // It touches its matrices, the bias and aux vectors and device scalars, never the workspace.
    OpReach reach;
    reach.all = false;
    for (const void* q : {alpha, beta, A, B, C, (const void*)D, (const void*)d->bias, (const void*)d->aux})
        if (q) reach.ptrs.push_back((uintptr_t)q);
    op_issue(stream, what, [=](Op*, const OpRun& run) {
        float av = a, bv = b;
        if (device_scalars) {
            if (run.first && g_check) {
                hb_access((uintptr_t)alpha, sizeof(float), false, 0);
                hb_access((uintptr_t)beta, sizeof(float), false, 0);
            }
            av = *static_cast<const float*>(alpha);
            bv = *static_cast<const float*>(beta);
        }
        if (run.first && g_check) {
            matrix_access(A, &lac, false);
            matrix_access(B, &lbc, false);
            if (bv != 0.0f) matrix_access(C, &lcc, false);
            if (e & CUBLASLT_EPILOGUE_BIAS && !bgrad) hb_access((uintptr_t)dc.bias, bias_bytes, false, 0);
            if (aux_in) hb_access((uintptr_t)dc.aux, aux_bytes, false, 0);
            matrix_access(D, &ldc, true);
            if (bgrad) hb_access((uintptr_t)dc.bias, bias_bytes, true, 0);
            if (aux_out) hb_access((uintptr_t)dc.aux, aux_bytes, true, 0);
        }
        if (run.first && g_count_file)
            count_line("blas m=%llu n=%llu k=%llu batch=%d epilogue=%u flops=%llu a=%zu b=%zu c=%zu d=%zu bias=%zu aux=%zu",
                       (unsigned long long)p.m, (unsigned long long)p.n, (unsigned long long)p.k, p.batch, e,
                       (unsigned long long)(2ull * p.m * p.n * p.k * (uint64_t)p.batch),
                       layout_bytes(&lac), layout_bytes(&lbc), bv != 0.0f ? layout_bytes(&lcc) : (size_t)0,
                       layout_bytes(&ldc), ((e & CUBLASLT_EPILOGUE_BIAS) || bgrad) ? bias_bytes : (size_t)0,
                       (aux_in || aux_out) ? aux_bytes : (size_t)0);
        if (g_blas_skip) {
            // The kernel report counts, it does not compute: the outputs become zeros (finite, so the
            // step goes on as a real one would).
            memset(D, 0, layout_bytes(&ldc));
            if (bgrad) memset(const_cast<void*>(dc.bias), 0, bias_bytes);
            if (aux_out) memset(dc.aux, 0, aux_bytes);
        } else {
            for (int i = 0; i < p.batch; i++) matmul_one(&dc, p, i, av, bv, A, &lac, B, &lbc, C, &lcc, D, &ldc);
        }
        device_written(D, layout_bytes(&ldc));
        if (bgrad) device_written(dc.bias, bias_bytes);
        if (aux_out) device_written(dc.aux, aux_bytes);
    }, {}, nullptr, nullptr, reach);
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
