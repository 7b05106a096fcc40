// dev/cuda/attention_naive.cuh: the classic causal attention that materialises the T x T matrices
// ("three-kernel attention"), the baseline kernels/attention.cuh (flash style) is measured against
// and checked beside. Forward only.
//   attention_naive_forward: reads qkv (B,T,3C floatX, the layout of kernels/attention.cuh);
//   OVERWRITES out (B,T,C floatX) and the scratch, attention_naive_scratch_bytes(B,T,NH,HS) bytes:
//   q, k, v and the per-head output (each (B,NH,T,HS) floatX), the scores S (B,NH,T,T fp32) and
//   the probabilities P (B,NH,T,T floatX).
// Steps: permute qkv into contiguous per-head q, k, v; S = scale * Q K^T for all B*NH heads in one
// strided-batched cuBLASLt matmul (fp32 out, so the softmax sees unrounded scores); P = causal
// softmax of each row (fp32 math, zeros above the diagonal, rounded to floatX); O = P V (a second
// strided-batched matmul, floatX out); unpermute O into out. Memory traffic grows as B*NH*T^2
// and both matmuls also compute the masked upper triangle: that is what the flash kernels avoid.
// Reference: attention_forward_cpu (reference/ops_cpu.h). Needs -lcublasLt on a GPU.
#pragma once

#include <cublasLt.h>

#include "common.cuh"
#include "matmul.cuh"  // matmul_check

// q, k, v (B,NH,T,HS) from qkv (B,T,3,NH,HS): one thread per (b, h, t, d), d fastest.
__global__ void attention_naive_permute_kernel(floatX* q, floatX* k, floatX* v, const floatX* qkv, int B, int T,
                                               int NH, int HS) {
    const size_t n = (size_t)B * NH * T * HS;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int d = i % HS, t = (i / HS) % T, h = (i / HS / T) % NH, b = i / HS / T / NH;
    const size_t C = (size_t)NH * HS;
    const floatX* src = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * HS + d;
    q[i] = src[0];
    k[i] = src[C];
    v[i] = src[2 * C];
}

// out (B,T,NH,HS) from o (B,NH,T,HS): one thread per (b, h, t, d).
__global__ void attention_naive_unpermute_kernel(floatX* out, const floatX* o, int B, int T, int NH, int HS) {
    const size_t n = (size_t)B * NH * T * HS;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int d = i % HS, t = (i / HS) % T, h = (i / HS / T) % NH, b = i / HS / T / NH;
    out[((size_t)b * T + t) * NH * HS + (size_t)h * HS + d] = o[i];
}

// P[row] = softmax(S[row][0..t]) with zeros for j > t, row = (b*NH + h)*T + t: one warp per row,
// fp32 throughout, a fixed reduction tree (deterministic).
__global__ void attention_naive_softmax_kernel(floatX* P, const float* S, int rows, int T) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;  // whole warps leave together, and no barrier follows
    const int t = row % T;
    const float* s = S + (size_t)row * T;
    floatX* p = P + (size_t)row * T;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += 32) mx = fmaxf(mx, s[j]);
    mx = warp_reduce_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) sum += expf(s[j] - mx);
    const float inv = 1.0f / warp_reduce_sum(sum);
    for (int j = lane; j < T; j += 32) p[j] = (floatX)(j <= t ? expf(s[j] - mx) * inv : 0.0f);
}

// D = alpha * op(A) B for `batch` column-major matrices: op(A) m x k (A stored k x m when transa),
// B k x n, D m x n; consecutive batches `stride_*` elements apart. fp32 accumulate.
static inline void attention_naive_matmul(cublasLtHandle_t handle, void* D, cudaDataType_t d_type, const void* A,
                                          const void* Bm, bool transa, int m, int n, int k, long long stride_a,
                                          long long stride_b, long long stride_d, int batch, float alpha,
                                          cudaStream_t stream) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    matmul_check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = transa ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = CUBLAS_OP_N;
    matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    matmul_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    matmul_check(transa ? cublasLtMatrixLayoutCreate(&la, CUDA_R_FLOATX, k, m, k)
                                  : cublasLtMatrixLayoutCreate(&la, CUDA_R_FLOATX, m, k, m));
    matmul_check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_FLOATX, k, n, k));
    matmul_check(cublasLtMatrixLayoutCreate(&ld, d_type, m, n, m));
    const cublasLtMatrixLayout_t layouts[3] = {la, lb, ld};
    const long long strides[3] = {stride_a, stride_b, stride_d};
    for (int i = 0; i < 3; i++) {
        const int32_t count = batch;
        const int64_t stride = strides[i];
        matmul_check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        matmul_check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    const float beta = 0.0f;  // C is D's layout and never read
    matmul_check(cublasLtMatmul(handle, desc, &alpha, A, la, Bm, lb, &beta, D, ld, D, ld, nullptr, nullptr, 0, stream));
    matmul_check(cublasLtMatrixLayoutDestroy(la));
    matmul_check(cublasLtMatrixLayoutDestroy(lb));
    matmul_check(cublasLtMatrixLayoutDestroy(ld));
    matmul_check(cublasLtMatmulDescDestroy(desc));
}

// Byte offsets of the scratch regions (each 256-byte aligned): q, k, v, o, S, P, end.
static inline void attention_naive_layout(size_t off[7], int B, int T, int NH, int HS) {
    const size_t head = (size_t)B * NH * T * HS * sizeof(floatX), tt = (size_t)B * NH * T * T;
    const size_t sizes[6] = {head, head, head, head, tt * sizeof(float), tt * sizeof(floatX)};
    off[0] = 0;
    for (int i = 0; i < 6; i++) off[i + 1] = off[i] + (sizes[i] + 255) / 256 * 256;
}

static inline size_t attention_naive_scratch_bytes(int B, int T, int NH, int HS) {
    size_t off[7];
    attention_naive_layout(off, B, T, NH, HS);
    return off[6];
}

// out (B,T,C) floatX OVERWRITTEN with causal attention of qkv (B,T,3C) floatX, C = NH*HS;
// scratch: attention_naive_scratch_bytes(B, T, NH, HS) bytes of device memory, 256-byte aligned.
static inline void attention_naive_forward(floatX* out, void* scratch, const floatX* qkv, int B, int T, int NH,
                                           int HS, cublasLtHandle_t handle, cudaStream_t stream) {
    if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0) return;
    size_t off[7];
    attention_naive_layout(off, B, T, NH, HS);
    char* base = (char*)scratch;
    floatX *q = (floatX*)(base + off[0]), *k = (floatX*)(base + off[1]), *v = (floatX*)(base + off[2]);
    floatX* o = (floatX*)(base + off[3]);
    float* S = (float*)(base + off[4]);
    floatX* P = (floatX*)(base + off[5]);
    const size_t n = (size_t)B * NH * T * HS;
    const int block = 256, heads = B * NH, rows = heads * T;

    attention_naive_permute_kernel<<<(unsigned)ceil_div_size(n, block), block, 0, stream>>>(q, k, v, qkv, B, T, NH, HS);
    cudaCheckLaunch("attention_naive_permute_kernel");
    // Row-major S (T x T) = scale Q K^T is the column-major S^T = K Q^T: op(A) = K (stored as the
    // column-major HS x T matrix, transposed), B = Q (column-major HS x T).
    attention_naive_matmul(handle, S, CUDA_R_32F, k, q, true, T, T, HS, (long long)T * HS, (long long)T * HS,
                           (long long)T * T, heads, 1.0f / sqrtf((float)HS), stream);
    attention_naive_softmax_kernel<<<ceil_div(rows, block / 32), block, 0, stream>>>(P, S, rows, T);
    cudaCheckLaunch("attention_naive_softmax_kernel");
    // Row-major O (T x HS) = P V is the column-major O^T = V^T P^T: A = V (column-major HS x T),
    // B = P read as the column-major T x T matrix P^T.
    attention_naive_matmul(handle, o, CUDA_R_FLOATX, v, P, false, HS, T, T, (long long)T * HS, (long long)T * T,
                           (long long)T * HS, heads, 1.0f, stream);
    attention_naive_unpermute_kernel<<<(unsigned)ceil_div_size(n, block), block, 0, stream>>>(out, o, B, T, NH, HS);
    cudaCheckLaunch("attention_naive_unpermute_kernel");
}
