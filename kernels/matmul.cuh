// kernels/matmul.cuh: the linear layers' matrix products through cuBLASLt, forward and backward,
// with the bias and GELU fused into cuBLASLt epilogues, and a deterministic bias gradient.
// All tensors are row-major, N = B*T rows. Products use CUBLAS_COMPUTE_32F with fp32 alpha/beta:
// fp16/bf16 operands accumulate in fp32; the fp32 build is plain fp32 (no TF32).
//
//   matmul_context_init / _destroy: one cuBLASLt handle; the workspace is the caller's device
//     memory (MATMUL_WORKSPACE_BYTES, 32 MiB, is what the engine gives it), never freed here.
//   matmul_forward(ctx, out, pre_gelu, inp, weight, bias, N, C, OC, stream)
//     reads inp[N,C], weight[OC,C], bias[OC] (may be NULL)
//     OVERWRITES out[N,OC] = inp . weight^T + bias                       (pre_gelu == NULL)
//     OVERWRITES pre_gelu[N,OC] = that value, out = gelu(pre_gelu)       (pre_gelu != NULL;
//       epilogue GELU_AUX(_BIAS); the GELU is taken of the fp32 value, both stored as floatX)
//   matmul_backward(ctx, dinp, dweight, dbias, scratch, dout, inp, weight, pre_gelu, N, C, OC, stream)
//     reads dout[N,OC], inp[N,C], weight[OC,C], pre_gelu[N,C] (may be NULL)
//     OVERWRITES dinp[N,C] = dout . weight, times gelu'(pre_gelu) when pre_gelu != NULL (epilogue
//       DGELU); dinp == NULL skips it (and pre_gelu is then unused)
//     ACCUMULATES dweight[OC,C] += dout^T . inp (beta = 1: old value + product in fp32, one
//       rounding to floatX in cuBLASLt's epilogue)
//     ACCUMULATES dbias[OC] += column sums of dout (dbias may be NULL, then scratch may be too):
//       fp32 partial sums over chunks of 256 rows into scratch (matmul_dbias_scratch_floats(N, OC)
//       = ceil(N/256) * OC floats, OVERWRITTEN), then per column a fixed-order fp32 sum of the
//       partials added to the old value and rounded once. No atomics: bit-identical on every run
//       and every GPU. Launches: grid (ceil(N/256), ceil(OC/32)) then ceil(OC/32) blocks, each of
//       32 x 8 threads (OC <= 2,097,120).
// Precision: every stored value is floatX (out, pre_gelu, dinp, dweight, dbias); scratch is fp32.
// The products' kernels and launch shapes are cuBLASLt's (the first cublasLtMatmulAlgoGetHeuristic
// answer within the context's workspace), enqueued on `stream`; nothing here syncs the host.
//
// Requirements, checked here with a one-line error and exit 1:
//   N >= 0 and OC >= 0 (N == 0 or OC == 0: nothing to multiply; dinp, if given, is zeroed), C >= 1;
//   with pre_gelu, cuBLASLt's GELU aux leading dimension must be a multiple of 8, which the GPU's
//   cuBLASLt enforces and the CPU interpreter does not: OC % 8 == 0 in forward (aux = pre_gelu[N,OC]),
//   C % 8 == 0 in backward (aux = pre_gelu[N,C]).
// Any other shape and any element alignment is correct. For cuBLASLt's tensor-core fast paths on a
// GPU, keep C and OC multiples of 8 and every pointer (bias and pre_gelu included) 16-byte aligned:
// the algorithm search is told each matrix's real alignment (MIN_ALIGNMENT_*, which otherwise
// defaults to 256 bytes) and sees the bias and aux addresses, so a misaligned pointer gets a slower
// kernel, not a failing one.
#pragma once

#include <cublasLt.h>
#include <stdint.h>

#include "common.cuh"
#include "sizes.h"

// ---- checked cuBLASLt calls: one line naming the call and where, then exit status 1 ----
static inline void matmul_check_status(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) fail_at("cuBLASLt", call, file, line, cublasLtGetStatusName(status));
}
#define matmul_check(call) matmul_check_status((call), #call, __FILE__, __LINE__)

// A shape or argument the wrapper refuses: one line, exit 1 (as cudaCheck does).
static inline void matmul_require(bool ok, const char* what, const char* file, int line) {
    if (!ok) fail_at("matmul", what, file, line, NULL);
}
#define MATMUL_REQUIRE(cond, what) matmul_require((cond), what, __FILE__, __LINE__)

typedef struct {
    cublasLtHandle_t handle;
    void* workspace;
    size_t workspace_bytes;
} MatmulContext;
// MATMUL_WORKSPACE_BYTES: kernels/sizes.h

static inline void matmul_context_init(MatmulContext* ctx, void* workspace, size_t workspace_bytes) {
    MATMUL_REQUIRE(workspace != NULL || workspace_bytes == 0, "a workspace of nonzero size needs a pointer");
    matmul_check(cublasLtCreate(&ctx->handle));
    ctx->workspace = workspace;
    ctx->workspace_bytes = workspace ? workspace_bytes : 0;
}

// Releases the handle only: the workspace belongs to the caller.
static inline void matmul_context_destroy(MatmulContext* ctx) {
    if (ctx->handle) matmul_check(cublasLtDestroy(ctx->handle));
    ctx->handle = NULL;
    ctx->workspace = NULL;
    ctx->workspace_bytes = 0;
}

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address:
// the heuristic must not pick a kernel that needs more alignment than a pointer has.
static inline uint32_t matmul_alignment(const void* p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 256;
    while (align > 1 && (a % align) != 0) align >>= 1;
    return align;
}

// One cuBLASLt product in column-major terms (the row-major callers pass transposed views):
//   D[m,n] (ldd) = epilogue(op(A)[m,k] . op(B)[k,n] + beta * D), op(X) = X^T when trans_X.
// D doubles as C, so beta = 1 accumulates in place; beta = 0 never reads D (cuBLASLt's rule).
// bias (length m) and aux (m x n, ld aux_ld) are set before the algorithm search, which reads
// their addresses to know their alignment.
static inline void matmul_cublaslt(const MatmulContext* ctx, void* d, const void* a, const void* b, int m, int n, int k,
                                   bool trans_a, bool trans_b, int lda, int ldb, int ldd, float beta,
                                   cublasLtEpilogue_t epilogue, const void* bias, const void* aux, int64_t aux_ld,
                                   cudaStream_t stream) {
    cublasLtMatmulDesc_t desc;
    matmul_check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    uint32_t epi = (uint32_t)epilogue;
    matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (bias) {
        int32_t bias_type = CUDA_R_FLOATX;
        matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
        matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (aux) {
        matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }

    // Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k), D is m x n.
    cublasLtMatrixLayout_t la, lb, ld;
    matmul_check(cublasLtMatrixLayoutCreate(&la, CUDA_R_FLOATX, trans_a ? k : m, trans_a ? m : k, lda));
    matmul_check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_FLOATX, trans_b ? n : k, trans_b ? k : n, ldb));
    matmul_check(cublasLtMatrixLayoutCreate(&ld, CUDA_R_FLOATX, m, n, ldd));

    cublasLtMatmulPreference_t pref;
    matmul_check(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = ctx->workspace_bytes;
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    uint32_t align_a = matmul_alignment(a), align_b = matmul_alignment(b), align_d = matmul_alignment(d);
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));

    // cuBLASLt answers "nothing fits" with CUBLAS_STATUS_NOT_SUPPORTED or with zero results: either
    // way, say which product it was.
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx->handle, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found < 1)) {
        fflush(stdout);
        fprintf(stderr,
                "error: cuBLASLt: cublasLtMatmulAlgoGetHeuristic at %s:%d: no algorithm for m=%d n=%d k=%d transa=%d "
                "transb=%d epilogue=%u, alignments A %u B %u D %u, workspace %zu bytes (%s)\n",
                __FILE__, __LINE__, m, n, k, (int)trans_a, (int)trans_b, epi, align_a, align_b, align_d,
                ctx->workspace_bytes, cublasLtGetStatusName(status));
        exit(1);
    }
    matmul_check_status(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    const float alpha = 1.0f;
    matmul_check(cublasLtMatmul(ctx->handle, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heuristic.algo,
                                ctx->workspace, ctx->workspace_bytes, stream));
    // The descriptors are host objects read at enqueue time: freeing them now is safe.
    matmul_check(cublasLtMatmulPreferenceDestroy(pref));
    matmul_check(cublasLtMatrixLayoutDestroy(la));
    matmul_check(cublasLtMatrixLayoutDestroy(lb));
    matmul_check(cublasLtMatrixLayoutDestroy(ld));
    matmul_check(cublasLtMatmulDescDestroy(desc));
}

static inline void matmul_forward(const MatmulContext* ctx, floatX* out, floatX* pre_gelu, const floatX* inp,
                                  const floatX* weight, const floatX* bias, int N, int C, int OC, cudaStream_t stream) {
    MATMUL_REQUIRE(N >= 0 && OC >= 0 && C >= 1, "matmul_forward needs N >= 0, OC >= 0, C >= 1");
    MATMUL_REQUIRE(pre_gelu == NULL || OC % 8 == 0,
                   "matmul_forward with pre_gelu needs OC % 8 == 0 (cuBLASLt's GELU aux leading dimension)");
    if (N == 0 || OC == 0) return;
    // Row-major out[N,OC] is column-major out^T [OC,N]: out^T = weight . inp^T, where the row-major
    // weight[OC,C] is a column-major C x OC matrix (transposed by op A) and inp[N,C] a C x N one.
    cublasLtEpilogue_t epilogue = pre_gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                                           : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    matmul_cublaslt(ctx, out, weight, inp, OC, N, C, true, false, C, C, OC, 0.0f, epilogue, bias, pre_gelu, OC, stream);
}

// ---- the bias gradient: deterministic column sums of dout ----
// Rows of dout per partial sum (MATMUL_DBIAS_CHUNK_ROWS, kernels/sizes.h): the scratch holds one
// fp32 row of OC partials per chunk (matmul_dbias_scratch_floats, there too).
// A block covers 32 consecutive columns (a warp reads 32 neighbours of a row: whole 32-byte
// sectors) and 8 row lanes that split the chunk's rows; enough independent loads per SM to
// stream dout at memory speed.
#define MATMUL_DBIAS_COLS 32
#define MATMUL_DBIAS_LANES 8

// Sum over rows [row_begin, row_end) of column `col` of a row-major [*, OC] matrix, in a fixed
// order: lane y (threadIdx.y) adds rows row_begin + y, + 8, ... in order, then thread (x, 0) adds
// the 8 lane sums in order; the result is valid in threadIdx.y == 0. Every thread of the block must
// call it (it holds a barrier); threads past OC contribute nothing.
template <class T>
__device__ inline float matmul_column_tile_sum(const T* src, int row_begin, int row_end, int OC, int col,
                                               float (*lane_sums)[MATMUL_DBIAS_COLS]) {
    float sum = 0.0f;
    if (col < OC) {
#pragma unroll 4
        for (int r = row_begin + threadIdx.y; r < row_end; r += MATMUL_DBIAS_LANES) sum += (float)src[(size_t)r * OC + col];
    }
    lane_sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    float total = 0.0f;
    if (threadIdx.y == 0)
        for (int y = 0; y < MATMUL_DBIAS_LANES; y++) total += lane_sums[y][threadIdx.x];
    return total;
}

// grid (chunks, ceil(OC / 32)), block (32, 8): scratch[chunk, col] = the sum of dout[r, col] over
// the chunk's MATMUL_DBIAS_CHUNK_ROWS rows.
__global__ void matmul_dbias_partial_kernel(float* scratch, const floatX* dout, int N, int OC) {
    __shared__ float lane_sums[MATMUL_DBIAS_LANES][MATMUL_DBIAS_COLS];
    const int chunk = blockIdx.x, col = blockIdx.y * MATMUL_DBIAS_COLS + threadIdx.x;
    const int row_begin = chunk * MATMUL_DBIAS_CHUNK_ROWS, row_end = min(N, row_begin + MATMUL_DBIAS_CHUNK_ROWS);
    float total = matmul_column_tile_sum(dout, row_begin, row_end, OC, col, lane_sums);
    if (threadIdx.y == 0 && col < OC) scratch[(size_t)chunk * OC + col] = total;
}

// grid ceil(OC / 32), block (32, 8): the same fixed-order sum over the chunks' partials (8 lanes
// keep the dependent load chains short), added to the old dbias in fp32 and rounded once.
__global__ void matmul_dbias_finish_kernel(floatX* dbias, const float* scratch, int chunks, int OC) {
    __shared__ float lane_sums[MATMUL_DBIAS_LANES][MATMUL_DBIAS_COLS];
    const int col = blockIdx.x * MATMUL_DBIAS_COLS + threadIdx.x;
    float total = matmul_column_tile_sum(scratch, 0, chunks, OC, col, lane_sums);
    if (threadIdx.y == 0 && col < OC) dbias[col] = (floatX)((float)dbias[col] + total);
}

static inline void matmul_dbias(floatX* dbias, float* scratch, const floatX* dout, int N, int OC, cudaStream_t stream) {
    int chunks = ceil_div(N, MATMUL_DBIAS_CHUNK_ROWS);
    MATMUL_REQUIRE(ceil_div(OC, MATMUL_DBIAS_COLS) <= 65535, "matmul_backward: OC too large for the dbias grid");
    dim3 grid(chunks, ceil_div(OC, MATMUL_DBIAS_COLS)), block(MATMUL_DBIAS_COLS, MATMUL_DBIAS_LANES);
    matmul_dbias_partial_kernel<<<grid, block, 0, stream>>>(scratch, dout, N, OC);
    cudaCheckLaunch("matmul_dbias_partial_kernel");
    matmul_dbias_finish_kernel<<<ceil_div(OC, MATMUL_DBIAS_COLS), block, 0, stream>>>(dbias, scratch, chunks, OC);
    cudaCheckLaunch("matmul_dbias_finish_kernel");
}

static inline void matmul_backward(const MatmulContext* ctx, floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                                   const floatX* dout, const floatX* inp, const floatX* weight, const floatX* pre_gelu,
                                   int N, int C, int OC, cudaStream_t stream) {
    MATMUL_REQUIRE(N >= 0 && OC >= 0 && C >= 1, "matmul_backward needs N >= 0, OC >= 0, C >= 1");
    MATMUL_REQUIRE(dinp == NULL || pre_gelu == NULL || C % 8 == 0,
                   "matmul_backward with pre_gelu needs C % 8 == 0 (cuBLASLt's GELU aux leading dimension)");
    MATMUL_REQUIRE(dbias == NULL || scratch != NULL, "matmul_backward with dbias needs scratch");
    if (N == 0 || OC == 0) {
        // dout is empty: dinp = 0 (nothing to read), dweight and dbias gain nothing.
        if (dinp && N > 0) cudaCheck(cudaMemsetAsync(dinp, 0, (size_t)N * C * sizeof(floatX), stream));
        return;
    }
    if (dinp) {
        // Column-major dinp^T [C,N] = weight^T [C,OC] . dout^T [OC,N]; row-major weight[OC,C] is
        // already the column-major C x OC matrix, dout[N,OC] the OC x N one.
        matmul_cublaslt(ctx, dinp, weight, dout, C, N, OC, false, false, C, OC, C, 0.0f,
                        pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, NULL, pre_gelu, C, stream);
    }
    if (dweight) {
        // Column-major dweight^T [C,OC] += inp^T [C,N] . dout [N,OC] (dout^T transposed by op B).
        matmul_cublaslt(ctx, dweight, inp, dout, C, OC, N, false, true, C, OC, C, 1.0f, CUBLASLT_EPILOGUE_DEFAULT, NULL,
                        NULL, 0, stream);
    }
    if (dbias) matmul_dbias(dbias, scratch, dout, N, OC, stream);
}
