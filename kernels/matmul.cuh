// kernels/matmul.cuh: the linear layers' matrix products through cuBLASLt, forward and backward,
// with the bias and GELU fused into cuBLASLt epilogues, and a deterministic bias gradient.
// All tensors are row-major, N = B*T rows. Products use CUBLAS_COMPUTE_32F with fp32 alpha/beta:
// fp16/bf16 operands accumulate in fp32; the fp32 build is plain fp32 unless TF32 is asked for.
//
//   matmul_context_init / _destroy: one cuBLASLt handle and the cache of each product's setup;
//     the workspace is the caller's device memory (MATMUL_WORKSPACE_BYTES, 32 MiB, is what the
//     engine gives it), never freed here.
//   matmul_context_set_tf32(ctx, on): fp32 operands rounded to TF32 (10 mantissa bits) on the
//     tensor cores, fp32 accumulation (CUBLAS_COMPUTE_32F_FAST_TF32; llm.c's -f); before the
//     first product, fp32 builds only.
//   matmul_forward(ctx, out, pre_gelu, inp, weight, bias, N, C, OC, stream)
//     reads inp[N,C], weight[OC,C], bias[OC] (may be NULL)
//     OVERWRITES out[N,OC] = inp . weight^T + bias                       (pre_gelu == NULL)
//     OVERWRITES pre_gelu[N,OC] = that value, out = gelu(pre_gelu)       (pre_gelu != NULL;
//       epilogue GELU_AUX(_BIAS); the GELU is taken of the fp32 value, both stored as floatX)
//   matmul_backward(ctx, dinp, dweight, dbias, scratch, dout, inp, weight, pre_gelu, N, C, OC, accumulate,
//                   stream)
//     reads dout[N,OC], inp[N,C], weight[OC,C], pre_gelu[N,C] (may be NULL)
//     OVERWRITES dinp[N,C] = dout . weight, times gelu'(pre_gelu) when pre_gelu != NULL (epilogue
//       DGELU); dinp == NULL skips it (and pre_gelu is then unused)
//     ACCUMULATES dweight[OC,C] += dout^T . inp (beta = 1: old value + product in fp32, one
//       rounding to floatX in cuBLASLt's epilogue); with accumulate 0 it OVERWRITES dweight (beta =
//       0: the first micro-step of a step writes its gradients, with no memset before it)
//     ACCUMULATES dbias[OC] += column sums of dout (dbias may be NULL, then scratch may be too),
//       or OVERWRITES it with accumulate 0.
//       With dweight (and not TF32): cuBLASLt's BGRADB epilogue on the dweight product sums the
//       columns of dout it already streams. Overwriting, it writes them to dbias in floatX (one
//       rounding of the fp32 sum); accumulating, it writes fp32 sums to scratch past the counters,
//       and matmul_dbias_add adds them to the old value and rounds once (a launch of OC elements,
//       not a second pass over dout): cuBLASLt overwrites a bias gradient, so the add is what makes
//       it +=. The epilogue's sum order is fixed by the algorithm, which is chosen once per shape, so
//       the result is the same bits on every run of one GPU and library. Where cuBLASLt offers no
//       algorithm for that epilogue (its heuristic says so once; the product is then cached as
//       refused), without dweight, or with TF32 (whose operands are rounded), the bias gradient
//       is this file's kernel:
//       fp32 partial sums over chunks of 64 rows into scratch, then, in the same
//       launch, the last block of each column group adds the chunks' partials in a fixed order to
//       the old value (or to 0 when overwriting) and rounds once. Bit-identical on every run and every GPU (no float
//       atomics). scratch: matmul_dbias_scratch_floats(N, OC) floats (kernels/sizes.h); its first
//       MATMUL_DBIAS_COUNTERS words are counters that must be zero before the first call (a
//       cudaMemset of the scratch once, when it is allocated) and every call leaves them zero;
//       the rest is OVERWRITTEN. Calls on one stream may share a scratch whatever their N and OC.
//       Launch: grid (ceil(N/64), ceil(OC/(16 W))) of 16 x 16 threads, W = X128 when OC % X128
//       == 0 and dout is 16-byte aligned, else 1 (OC <= 4096 * 16 * W).
// Precision: every stored value is floatX (out, pre_gelu, dinp, dweight, dbias); scratch is fp32.
// The products' kernels and launch shapes are cuBLASLt's (the first cublasLtMatmulAlgoGetHeuristic
// answer within the context's workspace), enqueued on `stream`; nothing here syncs the host. The
// descriptors and that answer are made once per distinct product (shape, epilogue, alignments) and
// kept in the context (matmul_heuristic_queries counts the queries), so a step's ~600 products
// cost the host a lookup each, not a setup and a heuristic search.
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

// One product's cuBLASLt setup, kept per shape: the descriptors and the heuristic's algorithm. The
// key is everything the heuristic was told (shape, transposes, leading dimensions, epilogue, beta
// and which of bias/aux are set, each pointer's alignment, the aux leading dimension); a call
// whose key matches reuses them and only sets its own bias and aux addresses on the descriptor
// (read when a product is enqueued, so changing them afterwards is safe).
typedef struct {
    int m, n, k, lda, ldb, ldd, trans_a, trans_b;
    uint32_t epilogue, align_a, align_b, align_d, align_bias, align_aux;
    int has_bias, has_aux, bias_type;
    int64_t aux_ld;
    float beta;
} MatmulKey;
typedef struct {
    MatmulKey key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    int refused;  // cuBLASLt offered no algorithm (a product that may fall back: matmul_cublaslt's may_fail)
} MatmulPlan;
// A training step has about a dozen distinct products; past this many, a product is set up and
// queried on every call (correct, as before the cache, just slower on the host).
#define MATMUL_CACHE_SIZE 64
typedef struct {
    MatmulPlan plans[MATMUL_CACHE_SIZE];
    int count;
    long heuristic_queries;  // cublasLtMatmulAlgoGetHeuristic calls made: one per distinct key
} MatmulCache;

typedef struct {
    cublasLtHandle_t handle;
    void* workspace;
    size_t workspace_bytes;
    MatmulCache* cache;  // host memory; the products' setup per shape (the context stays const to callers)
    cublasComputeType_t compute;  // CUBLAS_COMPUTE_32F, or _FAST_TF32 (matmul_context_set_tf32)
} MatmulContext;
// MATMUL_WORKSPACE_BYTES: kernels/sizes.h

static inline void matmul_context_init(MatmulContext* ctx, void* workspace, size_t workspace_bytes) {
    MATMUL_REQUIRE(workspace != NULL || workspace_bytes == 0, "a workspace of nonzero size needs a pointer");
    matmul_check(cublasLtCreate(&ctx->handle));
    ctx->workspace = workspace;
    ctx->workspace_bytes = workspace ? workspace_bytes : 0;
    ctx->cache = (MatmulCache*)calloc(1, sizeof(MatmulCache));
    MATMUL_REQUIRE(ctx->cache != NULL, "out of host memory for the matmul cache");
    ctx->compute = CUBLAS_COMPUTE_32F;
}

// TF32 is a property of every product the context sets up, so it is chosen once, before the first.
static inline void matmul_context_set_tf32(MatmulContext* ctx, int on) {
    MATMUL_REQUIRE(!on || sizeof(floatX) == 4, "TF32 applies to fp32 operands only");
    MATMUL_REQUIRE(ctx->cache && ctx->cache->count == 0, "TF32 must be chosen before the first product");
    ctx->compute = on ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

static inline void matmul_plan_destroy(MatmulPlan* p) {
    matmul_check(cublasLtMatrixLayoutDestroy(p->la));
    matmul_check(cublasLtMatrixLayoutDestroy(p->lb));
    matmul_check(cublasLtMatrixLayoutDestroy(p->ld));
    matmul_check(cublasLtMatmulDescDestroy(p->desc));
}

// Releases the handle and the cached setups: the workspace belongs to the caller.
static inline void matmul_context_destroy(MatmulContext* ctx) {
    if (ctx->cache) {
        for (int i = 0; i < ctx->cache->count; i++) matmul_plan_destroy(&ctx->cache->plans[i]);
        free(ctx->cache);
    }
    ctx->cache = NULL;
    if (ctx->handle) matmul_check(cublasLtDestroy(ctx->handle));
    ctx->handle = NULL;
    ctx->workspace = NULL;
    ctx->workspace_bytes = 0;
}

// How many heuristic queries the context has made (one per distinct product setup).
static inline long matmul_heuristic_queries(const MatmulContext* ctx) {
    return ctx->cache ? ctx->cache->heuristic_queries : 0;
}

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address:
// the heuristic must not pick a kernel that needs more alignment than a pointer has.
static inline uint32_t matmul_alignment(const void* p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 256;
    while (align > 1 && (a % align) != 0) align >>= 1;
    return align;
}

static inline bool matmul_key_equal(const MatmulKey* a, const MatmulKey* b) {
    return a->m == b->m && a->n == b->n && a->k == b->k && a->lda == b->lda && a->ldb == b->ldb && a->ldd == b->ldd &&
           a->trans_a == b->trans_a && a->trans_b == b->trans_b && a->epilogue == b->epilogue &&
           a->align_a == b->align_a && a->align_b == b->align_b && a->align_d == b->align_d &&
           a->align_bias == b->align_bias && a->align_aux == b->align_aux && a->has_bias == b->has_bias &&
           a->has_aux == b->has_aux && a->bias_type == b->bias_type && a->aux_ld == b->aux_ld && a->beta == b->beta;
}

// The descriptors and the algorithm for a key (bias and aux: this call's, set before the search,
// which reads their addresses to know their alignment). When nothing fits: exits with one line, or,
// with may_fail, marks the plan refused (its caller has another way to the same result).
static inline void matmul_plan_create(const MatmulContext* ctx, MatmulPlan* p, const MatmulKey* key, const void* bias,
                                      const void* aux, bool may_fail) {
    p->key = *key;
    p->refused = 0;
    matmul_check(cublasLtMatmulDescCreate(&p->desc, ctx->compute, CUDA_R_32F));
    int32_t op_a = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    uint32_t epi = key->epilogue;
    matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (bias) {
        // floatX, or fp32 for a bias gradient that matmul_backward adds to floatX dbias itself.
        int32_t bias_type = key->bias_type;
        matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                    sizeof(bias_type)));
        matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (aux) {
        int64_t aux_ld = key->aux_ld;
        matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        matmul_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }

    // Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k), D is m x n.
    const int m = key->m, n = key->n, k = key->k;
    matmul_check(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_FLOATX, key->trans_a ? k : m, key->trans_a ? m : k, key->lda));
    matmul_check(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_FLOATX, key->trans_b ? n : k, key->trans_b ? k : n, key->ldb));
    matmul_check(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_FLOATX, m, n, key->ldd));

    cublasLtMatmulPreference_t pref;
    matmul_check(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = ctx->workspace_bytes;
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    uint32_t align_a = key->align_a, align_b = key->align_b, align_d = key->align_d;
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
    matmul_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));

    // cuBLASLt answers "nothing fits" with CUBLAS_STATUS_NOT_SUPPORTED or with zero results: either
    // way, say which product it was.
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx->handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1,
                                                           &heuristic, &found);
    if (ctx->cache) ctx->cache->heuristic_queries++;
    const bool none = status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found < 1);
    if (none && may_fail) {
        p->refused = 1;
        matmul_check(cublasLtMatmulPreferenceDestroy(pref));
        return;
    }
    if (none) {
        fflush(stdout);
        fprintf(stderr,
                "error: cuBLASLt: cublasLtMatmulAlgoGetHeuristic at %s:%d: no algorithm for m=%d n=%d k=%d transa=%d "
                "transb=%d epilogue=%u, alignments A %u B %u D %u, workspace %zu bytes (%s)\n",
                __FILE__, __LINE__, m, n, k, key->trans_a, key->trans_b, epi, align_a, align_b, align_d,
                ctx->workspace_bytes, cublasLtGetStatusName(status));
        exit(1);
    }
    matmul_check_status(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    p->algo = heuristic.algo;
    matmul_check(cublasLtMatmulPreferenceDestroy(pref));
}

// One cuBLASLt product in column-major terms (the row-major callers pass transposed views):
//   D[m,n] (ldd) = epilogue(op(A)[m,k] . op(B)[k,n] + beta * D), op(X) = X^T when trans_X.
// D doubles as C, so beta = 1 accumulates in place; beta = 0 never reads D (cuBLASLt's rule).
// bias (length m, of bias_type) and aux (m x n, ld aux_ld) may be NULL. The setup comes from the context's cache
// (made, with one heuristic query, the first time its key is seen). Returns whether the product was
// enqueued: false only with may_fail, when cuBLASLt has no algorithm for it (asked once per key).
static inline bool matmul_cublaslt(const MatmulContext* ctx, void* d, const void* a, const void* b, int m, int n, int k,
                                   bool trans_a, bool trans_b, int lda, int ldb, int ldd, float beta,
                                   cublasLtEpilogue_t epilogue, const void* bias, cudaDataType_t bias_type,
                                   const void* aux, int64_t aux_ld, cudaStream_t stream, bool may_fail = false) {
    MatmulKey key;
    memset(&key, 0, sizeof(key));
    key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldd = ldd;
    key.trans_a = trans_a, key.trans_b = trans_b, key.epilogue = (uint32_t)epilogue, key.beta = beta;
    key.align_a = matmul_alignment(a), key.align_b = matmul_alignment(b), key.align_d = matmul_alignment(d);
    key.has_bias = bias != NULL, key.has_aux = aux != NULL, key.bias_type = bias ? (int)bias_type : 0;
    key.align_bias = bias ? matmul_alignment(bias) : 0, key.align_aux = aux ? matmul_alignment(aux) : 0;
    key.aux_ld = aux ? aux_ld : 0;

    MatmulCache* cache = ctx->cache;
    MatmulPlan* plan = NULL;
    MatmulPlan once;  // the uncached setup when the cache is full
    if (cache)
        for (int i = 0; i < cache->count && !plan; i++)
            if (matmul_key_equal(&cache->plans[i].key, &key)) plan = &cache->plans[i];
    if (plan && plan->refused) return false;
    if (plan) {  // this call's bias and aux addresses on the cached descriptor
        if (bias)
            matmul_check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
        if (aux)
            matmul_check(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                                        sizeof(aux)));
    } else {
        plan = cache && cache->count < MATMUL_CACHE_SIZE ? &cache->plans[cache->count++] : &once;
        matmul_plan_create(ctx, plan, &key, bias, aux, may_fail);
        if (plan->refused) {
            if (plan == &once) matmul_plan_destroy(&once);
            return false;
        }
    }
    const float alpha = 1.0f;
    matmul_check(cublasLtMatmul(ctx->handle, plan->desc, &alpha, a, plan->la, b, plan->lb, &beta, d, plan->ld, d, plan->ld,
                                &plan->algo, ctx->workspace, ctx->workspace_bytes, stream));
    if (plan == &once) matmul_plan_destroy(&once);  // host objects read at enqueue time: freeing now is safe
    return true;
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
    matmul_cublaslt(ctx, out, weight, inp, OC, N, C, true, false, C, C, OC, 0.0f, epilogue, bias, CUDA_R_FLOATX, pre_gelu,
                    OC, stream);
}

// ---- the bias gradient: deterministic column sums of dout, one kernel ----
// A block sums a tile of MATMUL_DBIAS_CHUNK_ROWS rows by MATMUL_DBIAS_PACKS * W columns (W = X128
// when OC % X128 == 0 and dout is 16-byte aligned, else 1): thread (x, y) reads the W-wide pack x
// of rows y, y + 16, ... with one 128-bit load per row (a warp reads two rows' 256 contiguous
// bytes), the block adds its 16 row lanes in lane order, and writes the tile's fp32 column sums
// to its chunk's row of partials in scratch. Then the fenced last-block pattern (common.cuh),
// counting in the column group's counter: the block that counts last (it sees every other block's
// partials) adds the group's chunk partials in chunk order, adds the old dbias (0 when not
// accumulating) and rounds once.
// Which block is last changes from run to run; the order of every sum does not, so dbias is
// bit-identical on every run. The counters start zeroed (sizes.h) and are left zeroed.
// Sizes (MATMUL_DBIAS_CHUNK_ROWS, MATMUL_DBIAS_COUNTERS, matmul_dbias_scratch_floats): sizes.h.
#define MATMUL_DBIAS_PACKS 16  // packs of W columns per block (x)
#define MATMUL_DBIAS_LANES 16  // row lanes per block (y)

template <int W>
__global__ void __launch_bounds__(MATMUL_DBIAS_PACKS * MATMUL_DBIAS_LANES)
    matmul_dbias_kernel(floatX* dbias, float* scratch, const floatX* dout, int N, int OC, int accumulate) {
    constexpr int COLS = MATMUL_DBIAS_PACKS * W, THREADS = MATMUL_DBIAS_PACKS * MATMUL_DBIAS_LANES;
    __shared__ float lane_sums[MATMUL_DBIAS_LANES][COLS];
    __shared__ int is_last;
    unsigned* counter = (unsigned*)scratch + blockIdx.y;
    float* partials = scratch + MATMUL_DBIAS_COUNTERS;  // [chunks][OC]
    const int tid = threadIdx.y * MATMUL_DBIAS_PACKS + threadIdx.x;
    const int col0 = blockIdx.y * COLS, col = col0 + threadIdx.x * W;  // this thread's pack
    const int row_begin = blockIdx.x * MATMUL_DBIAS_CHUNK_ROWS, row_end = min(N, row_begin + MATMUL_DBIAS_CHUNK_ROWS);

    float acc[W];
#pragma unroll
    for (int k = 0; k < W; k++) acc[k] = 0.0f;
    if (col < OC) {  // OC % W == 0 when W > 1, so a pack is whole or absent
        for (int r = row_begin + threadIdx.y; r < row_end; r += MATMUL_DBIAS_LANES) {
            floatx_pack<W> d = pack_load<W>(dout + (size_t)r * OC + col);
#pragma unroll
            for (int k = 0; k < W; k++) acc[k] += (float)d.v[k];
        }
    }
#pragma unroll
    for (int k = 0; k < W; k++) lane_sums[threadIdx.y][threadIdx.x * W + k] = acc[k];
    __syncthreads();
    for (int c = tid; c < COLS; c += THREADS) {
        float total = 0.0f;
        for (int y = 0; y < MATMUL_DBIAS_LANES; y++) total += lane_sums[y][c];
        if (col0 + c < OC) partials[(size_t)blockIdx.x * OC + col0 + c] = total;
    }

    if (!block_last_to_arrive(counter, gridDim.x, &is_last)) return;  // the whole block leaves together

    // THREADS / COLS chunk lanes per column (2 for fp16/bf16 packs, 4 for fp32, 16 scalar): lane j
    // adds chunks j, j + LANES, ... in order (read from L2: other SMs wrote them), then the lanes
    // are added in lane order.
    static_assert(THREADS % COLS == 0, "a whole number of chunk lanes per column");
    constexpr int LANES = THREADS / COLS;
    __shared__ float chunk_sums[LANES][COLS];
    {
        const int c = tid % COLS, j = tid / COLS;
        float total = 0.0f;
        if (col0 + c < OC)
            for (int g = j; g < (int)gridDim.x; g += LANES) total += __ldcg(partials + (size_t)g * OC + col0 + c);
        chunk_sums[j][c] = total;
    }
    __syncthreads();
    for (int c = tid; c < COLS; c += THREADS) {
        if (col0 + c >= OC) continue;
        float total = 0.0f;
        for (int j = 0; j < LANES; j++) total += chunk_sums[j][c];
        const float old = accumulate ? (float)dbias[col0 + c] : 0.0f;
        dbias[col0 + c] = (floatX)(old + total);
    }
}

static inline void matmul_dbias(floatX* dbias, float* scratch, const floatX* dout, int N, int OC, int accumulate,
                                cudaStream_t stream) {
    const bool vec = OC % X128 == 0 && aligned16(dout);
    const int cols = MATMUL_DBIAS_PACKS * (vec ? X128 : 1), groups = ceil_div(OC, cols);
    MATMUL_REQUIRE(groups <= MATMUL_DBIAS_COUNTERS && groups <= 65535,
                   "matmul_backward: OC too large for the dbias counters (at most 4096 groups of 16 packs)");
    dim3 grid(ceil_div(N, MATMUL_DBIAS_CHUNK_ROWS), groups), block(MATMUL_DBIAS_PACKS, MATMUL_DBIAS_LANES);
    if (vec)
        matmul_dbias_kernel<X128><<<grid, block, 0, stream>>>(dbias, scratch, dout, N, OC, accumulate);
    else
        matmul_dbias_kernel<1><<<grid, block, 0, stream>>>(dbias, scratch, dout, N, OC, accumulate);
    cudaCheckLaunch("matmul_dbias_kernel");
}

// dbias[i] = (floatX)(dbias[i] + sums[i]): the BGRADB epilogue's fp32 column sums added to the old
// bias gradient, one rounding (as the kernel above does with its own sums).
__global__ void matmul_dbias_add_kernel(floatX* dbias, const float* sums, int OC) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < OC) dbias[i] = (floatX)((float)dbias[i] + sums[i]);
}

static inline void matmul_backward(const MatmulContext* ctx, floatX* dinp, floatX* dweight, floatX* dbias, float* scratch,
                                   const floatX* dout, const floatX* inp, const floatX* weight, const floatX* pre_gelu,
                                   int N, int C, int OC, int accumulate, cudaStream_t stream) {
    MATMUL_REQUIRE(N >= 0 && OC >= 0 && C >= 1, "matmul_backward needs N >= 0, OC >= 0, C >= 1");
    MATMUL_REQUIRE(dinp == NULL || pre_gelu == NULL || C % 8 == 0,
                   "matmul_backward with pre_gelu needs C % 8 == 0 (cuBLASLt's GELU aux leading dimension)");
    MATMUL_REQUIRE(dbias == NULL || scratch != NULL, "matmul_backward with dbias needs scratch");
    if (N == 0 || OC == 0) {
        // dout is empty: dinp = 0 (nothing to read), dweight and dbias gain nothing (overwriting:
        // they are the empty sums, 0).
        if (dinp && N > 0) cudaCheck(cudaMemsetAsync(dinp, 0, (size_t)N * C * sizeof(floatX), stream));
        if (!accumulate && dweight && OC > 0) cudaCheck(cudaMemsetAsync(dweight, 0, (size_t)OC * C * sizeof(floatX), stream));
        if (!accumulate && dbias && OC > 0) cudaCheck(cudaMemsetAsync(dbias, 0, (size_t)OC * sizeof(floatX), stream));
        return;
    }
    if (dinp) {
        // Column-major dinp^T [C,N] = weight^T [C,OC] . dout^T [OC,N]; row-major weight[OC,C] is
        // already the column-major C x OC matrix, dout[N,OC] the OC x N one.
        matmul_cublaslt(ctx, dinp, weight, dout, C, N, OC, false, false, C, OC, C, 0.0f,
                        pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, NULL, CUDA_R_FLOATX, pre_gelu, C,
                        stream);
    }
    if (dweight) {
        // Column-major dweight^T [C,OC] (+)= inp^T [C,N] . dout [N,OC] (dout^T transposed by op B).
        // The bias gradient rides along where it can: BGRADB sums op(B) = dout^T over k = N, one
        // fp32 sum per column of D, written to dbias in floatX when overwriting, else into the
        // scratch past its counters (left zero for the kernel) for the add.
        const float beta = accumulate ? 1.0f : 0.0f;
        if (dbias && ctx->compute == CUBLAS_COMPUTE_32F) {
            float* sums = scratch + MATMUL_DBIAS_COUNTERS;
            void* bias_out = accumulate ? (void*)sums : (void*)dbias;
            if (matmul_cublaslt(ctx, dweight, inp, dout, C, OC, N, false, true, C, OC, C, beta, CUBLASLT_EPILOGUE_BGRADB,
                                bias_out, accumulate ? CUDA_R_32F : CUDA_R_FLOATX, NULL, 0, stream, true)) {
                if (accumulate) {
                    matmul_dbias_add_kernel<<<ceil_div(OC, 256), 256, 0, stream>>>(dbias, sums, OC);
                    cudaCheckLaunch("matmul_dbias_add_kernel");
                }
                return;
            }
        }
        matmul_cublaslt(ctx, dweight, inp, dout, C, OC, N, false, true, C, OC, C, beta, CUBLASLT_EPILOGUE_DEFAULT, NULL,
                        CUDA_R_FLOATX, NULL, 0, stream);
    }
    if (dbias) matmul_dbias(dbias, scratch, dout, N, OC, accumulate, stream);
}
