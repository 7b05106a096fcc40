// intrinsics_cpu.cpp: CUDA's fast-math intrinsics with the GPU's documented error, the half and
// bfloat16 conversions the runtime itself needs, and WMMA's loads, stores and products.
//
// Fast math: a GPU computes __expf, __logf, __sinf, __fdividef, rsqrtf ... with approximation
// instructions whose error the CUDA C++ Programming Guide bounds (appendix "Mathematical Functions",
// intrinsic functions). Here each result is libm's, moved by that whole bound, up or down as a hash
// of the argument decides (the same argument always moves the same way), so a tolerance that holds
// here holds on a GPU. Results that are 0, infinite or NaN are left alone.
#include "cuda_cpu_internal.h"

#include <math.h>
#include <string.h>

namespace {

inline uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// +1 or -1, fixed per argument
inline int direction(float x, float y = 0.0f) {
    uint64_t z = ((uint64_t)bits_of(x) << 32 | bits_of(y)) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) & 1) ? 1 : -1;
}

// r moved by k ulps in direction dir (on the number line), staying finite and on its side of zero.
float move_ulps(float r, double k, int dir) {
    if (!(fabsf(r) < INFINITY) || r == 0.0f || k < 1.0) return r;
    uint32_t u = bits_of(r);
    int64_t mag = u & 0x7fffffffu;
    int64_t step = (int64_t)k * (r > 0 ? dir : -dir);
    mag += step;
    if (mag < 1) mag = 1;
    if (mag > 0x7f7fffff) mag = 0x7f7fffff;
    return float_of((u & 0x80000000u) | (uint32_t)mag);
}

float move_abs(float r, double err, int dir) {
    if (!(fabsf(r) < INFINITY)) return r;
    return (float)((double)r + dir * err);
}

}  // namespace

// ---- the fast-math intrinsics (glibc's math.h declares these names; libm does not export them).
// The starting point is the double-precision result rounded to float (within half an ulp), so the
// total error is the GPU's bound from the correctly rounded result. ----
extern "C" {
float __expf(float x) noexcept { count_ins(CUDA_CPU_INS_SFU); return move_ulps((float)exp(x), 2.0 + floor(fabs(1.173 * x)), direction(x)); }
float __exp10f(float x) noexcept { count_ins(CUDA_CPU_INS_SFU); return move_ulps((float)pow(10.0, x), 2.0 + floor(fabs(2.97 * x)), direction(x)); }
float __exp2f(float x) noexcept { count_ins(CUDA_CPU_INS_SFU); return move_ulps((float)exp2(x), 2.0, direction(x)); }
float __logf(float x) noexcept {
    count_ins(CUDA_CPU_INS_SFU);
    float r = (float)log(x);
    return x >= 0.5f && x <= 2.0f ? move_abs(r, ldexp(1.0, -21) / pow(2.0, 0.41), direction(x)) : move_ulps(r, 3.0, direction(x));
}
float __log2f(float x) noexcept {
    count_ins(CUDA_CPU_INS_SFU);
    float r = (float)log2(x);
    return x >= 0.5f && x <= 2.0f ? move_abs(r, ldexp(1.0, -22), direction(x)) : move_ulps(r, 2.0, direction(x));
}
float __log10f(float x) noexcept {
    count_ins(CUDA_CPU_INS_SFU);
    float r = (float)log10(x);
    return x >= 0.5f && x <= 2.0f ? move_abs(r, ldexp(1.0, -24), direction(x)) : move_ulps(r, 3.0, direction(x));
}
// Outside [-pi, pi] the guide only says "larger": the bound grows with the argument here.
float __sinf(float x) noexcept {
    count_ins(CUDA_CPU_INS_SFU);
    double e = ldexp(1.0, -21) / pow(2.0, 0.41) * (fabsf(x) > (float)M_PI ? fabs(x) / M_PI : 1.0);
    return move_abs((float)sin(x), e, direction(x));
}
float __cosf(float x) noexcept {
    count_ins(CUDA_CPU_INS_SFU);
    double e = ldexp(1.0, -21) / pow(2.0, 0.19) * (fabsf(x) > (float)M_PI ? fabs(x) / M_PI : 1.0);
    return move_abs((float)cos(x), e, direction(x));
}
void __sincosf(float x, float* s, float* c) noexcept { *s = __sinf(x); *c = __cosf(x); }
float __tanf(float x) noexcept { count_ins(CUDA_CPU_INS_SFU); return __sinf(x) * (1.0f / __cosf(x)); }
float __powf(float x, float y) noexcept { return __exp2f(y * __log2f(x)); }
// tanh.approx.f32 (PTX ISA): relative error about 2^-11
float __tanhf(float x) noexcept {
    count_ins(CUDA_CPU_INS_SFU);
    float r = (float)tanh(x);
    return move_abs(r, fabs(r) * ldexp(1.0, -11), direction(x));
}
}

float cuda_cpu_fdividef(float a, float b) {
    count_ins(CUDA_CPU_INS_SFU);
    if (fabsf(b) > 0x1p126f && fabsf(b) < INFINITY) return fabsf(a) < INFINITY ? 0.0f * a : NAN;
    return move_ulps(a / b, 2.0, direction(a, b));
}
float cuda_cpu_rsqrtf(float x) { count_ins(CUDA_CPU_INS_SFU); return move_ulps((float)(1.0 / sqrt((double)x)), 2.0, direction(x)); }

// ---- half and bfloat16 conversions (round to nearest even; NaN becomes the canonical 0x7fff, as
// cvt.rn.f16.f32 and CUDA's host conversion give) ----
float half_to_float(uint16_t h) {
    static float* table = [] {
        float* t = new float[65536];
        for (uint32_t v = 0; v < 65536; v++) {
            uint32_t sign = (v & 0x8000u) << 16, exp = (v >> 10) & 0x1f, man = v & 0x3ff, u;
            if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
            else if (exp) u = sign | ((exp + 112) << 23) | (man << 13);
            else if (man) {  // subnormal: normalise
                int e = 113;
                while (!(man & 0x400)) { man <<= 1; e--; }
                u = sign | ((uint32_t)e << 23) | ((man & 0x3ff) << 13);
            } else u = sign;
            t[v] = float_of(u);
        }
        return t;
    }();
    return table[h];
}

uint16_t float_to_half(float f) {
    uint32_t x = bits_of(f), sign = (x >> 16) & 0x8000u, u = x & 0x7fffffffu;
    if (u > 0x7f800000u) return 0x7fff;
    if (u >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to infinity
    if (u >= 0x38800000u) {                                    // normal half
        uint32_t r = ((u - 0x38000000u) >> 13), rem = u & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    if (u < 0x33000001u) return (uint16_t)sign;                // rounds to zero
    uint32_t e = u >> 23, man = (u & 0x7fffffu) | 0x800000u, shift = 126 - e;  // subnormal half
    uint32_t r = man >> shift, rem = man << (32 - shift);
    if (rem > 0x80000000u || (rem == 0x80000000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}


// ============================================================================================
// WMMA. A fragment is the whole tile in every lane (cuda_cpu.h); a product is computed once per warp
// (lanes after the first find the same inputs and copy the result), loads fill every lane's tile,
// stores are shared out: lane l stores the elements l, l+32, ... of the tile. CUDA_CPU_COUNT counts
// what the warp moves, as a GPU does it: the tile's bytes once (lane 0 counts them, row by row in
// memory, global or shared by the pointer) and the product's FLOPs once.
// ============================================================================================
namespace {

inline size_t elem_size(int type) { return type == CUDA_CPU_F32 ? 4 : 2; }

inline float load_elem(const void* p, size_t i, int type) {
    switch (type) {
    case CUDA_CPU_F32: return ((const float*)p)[i];
    case CUDA_CPU_F16: return half_to_float(((const uint16_t*)p)[i]);
    default: return bf16_to_float(((const uint16_t*)p)[i]);
    }
}
inline void store_elem(void* p, size_t i, int type, float v) {
    switch (type) {
    case CUDA_CPU_F32: ((float*)p)[i] = v; break;
    case CUDA_CPU_F16: ((uint16_t*)p)[i] = float_to_half(v); break;
    default: ((uint16_t*)p)[i] = float_to_bf16(v); break;
    }
}

void check_pointer(const char* api, const void* p, unsigned ldm, int type) {
    if ((uintptr_t)p % 32 != 0)
        die_in_kernel("%s: pointer %p is not 32-byte (256-bit) aligned, which WMMA requires", api, p);
    if ((ldm * elem_size(type)) % 16 != 0)
        die_in_kernel("%s: ldm %u is not a multiple of 16 bytes (%u elements), which WMMA requires", api, ldm,
                      (unsigned)(16 / elem_size(type)));
}

struct Memo {
    int M = 0, N = 0, K = 0, ab = -1, cd = -1;
    std::vector<char> in, out;
};
__thread Memo* t_memo;

}  // namespace

void cuda_cpu_wmma_load(void* frag, int type, int rows, int cols, const void* p, unsigned ldm, int row_major_mem) {
    count_ins(CUDA_CPU_INS_WMMA);
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    check_pointer("wmma::load_matrix_sync", p, ldm, type);
    size_t es = elem_size(type);
    const char* src = (const char*)p;
    char* dst = (char*)frag;
    // memory rows: rows of the tile (row-major) or its columns (column-major)
    int mrows = row_major_mem ? rows : cols, mcols = row_major_mem ? cols : rows;
    for (int r = 0; r < mrows; r++) check_lane_range(src + (size_t)r * ldm * es, (size_t)mcols * es, false, pc);
    if (g_count_run && cuda_cpu_lane() == 0)
        for (int r = 0; r < mrows; r++) count_range(src + (size_t)r * ldm * es, (size_t)mcols * es, false);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t at = row_major_mem ? (size_t)r * ldm + c : (size_t)c * ldm + r;
            memcpy(dst + ((size_t)r * cols + c) * es, src + at * es, es);
        }
}

void cuda_cpu_wmma_store(void* p, const void* frag, int type, int rows, int cols, unsigned ldm, int row_major_mem) {
    count_ins(CUDA_CPU_INS_WMMA);
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    check_pointer("wmma::store_matrix_sync", p, ldm, type);
    size_t es = elem_size(type);
    unsigned lane = cuda_cpu_linear_tid & 31u;
    char* dst = (char*)p;
    const char* src = (const char*)frag;
    if (g_count_run && lane == 0) {
        int mrows = row_major_mem ? rows : cols, mcols = row_major_mem ? cols : rows;
        for (int r = 0; r < mrows; r++) count_range(dst + (size_t)r * ldm * es, (size_t)mcols * es, true);
    }
    for (int e = (int)lane; e < rows * cols; e += 32) {
        int r = e / cols, c = e % cols;
        size_t at = row_major_mem ? (size_t)r * ldm + c : (size_t)c * ldm + r;
        check_lane_range(dst + at * es, es, true, pc);
        memcpy(dst + at * es, src + (size_t)e * es, es);
    }
}

void cuda_cpu_wmma_mma(void* d, const void* a, const void* b, const void* c, int M, int N, int K, int ab, int cd) {
    count_ins(CUDA_CPU_INS_WMMA);
    if (g_count_run && tw && cuda_cpu_lane() == 0) tw->c_mma_flops += 2ull * M * N * K;  // once a warp
    size_t ea = elem_size(ab), ec = elem_size(cd);
    size_t na = (size_t)M * K * ea, nb = (size_t)K * N * ea, nc = (size_t)M * N * ec;
    RuntimeScope scope;
    if (!t_memo) t_memo = new Memo();
    Memo& m = *t_memo;
    if (m.M == M && m.N == N && m.K == K && m.ab == ab && m.cd == cd && m.in.size() == na + nb + nc &&
        !memcmp(m.in.data(), a, na) && !memcmp(m.in.data() + na, b, nb) && !memcmp(m.in.data() + na + nb, c, nc)) {
        memcpy(d, m.out.data(), nc);
        return;
    }
    m.M = M, m.N = N, m.K = K, m.ab = ab, m.cd = cd;
    m.in.resize(na + nb + nc);
    memcpy(m.in.data(), a, na);
    memcpy(m.in.data() + na, b, nb);
    memcpy(m.in.data() + na + nb, c, nc);
    float A[32 * 16], B[16 * 32];
    for (int i = 0; i < M * K; i++) A[i] = load_elem(a, i, ab);
    for (int i = 0; i < K * N; i++) B[i] = load_elem(b, i, ab);
    m.out.resize(nc);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = load_elem(c, (size_t)i * N + j, cd);
            for (int k = 0; k < K; k++) acc += A[i * K + k] * B[k * N + j];
            store_elem(m.out.data(), (size_t)i * N + j, cd, acc);
        }
    memcpy(d, m.out.data(), nc);  // d may alias c
}


// ============================================================================================
// PTX-level warp matrix primitives (kernels/mma.cuh): mma.sync m16n8k16, ldmatrix, cp.async.
//
// mma and ldmatrix are warp-collective. Each lane fills a record on its own stack (for ldmatrix it
// reads the row it supplies first, so the checks see that lane read it), publishes it in a table of
// the worker's OS thread, and meets the others at a warp operation (CUDA_CPU_WARP_MATRIX: all 32
// lanes, no memory ordering). At the meeting every lane is suspended inside this code, so the first
// lane to resume reads all 32 records, computes every lane's result with the PTX ISA's fragment
// layout and marks them done; the others find theirs done. A lane that never arrives (exited, or at
// another barrier) is the runtime's "a warp operation waits for lanes that will never reach it".
// ============================================================================================
namespace {

enum { MX_MMA, MX_LDMATRIX, MX_WGMMA, MX_WG_FENCE, MX_WG_COMMIT, MX_WG_WAIT };

struct WgmmaLane;  // wgmma.mma_async's record of a lane (below)
struct MatrixRec {
    int kind;            // MX_*
    int type;            // mma, wgmma: CUDA_CPU_F16 / CUDA_CPU_BF16; ldmatrix: num * 2 + trans; wait: N
    uint32_t in[10];     // mma: a0..a3 b0 b1 c0..c3 (c as float bits); ldmatrix: this lane's row (4 words)
    uint32_t out[4];     // mma: d0..d3 (float bits); ldmatrix: r0..r(num-1)
    const WgmmaLane* wg; // wgmma.mma_async: the lane's operands
    bool done;
};
__thread MatrixRec* t_matrix[1024];  // by linear thread index: the records of the running block's lanes

const char* matrix_name(int kind, int type) {
    if (kind == MX_WGMMA)
        return type == CUDA_CPU_F16 ? "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16"
                                    : "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16";
    if (kind == MX_WG_FENCE) return "wgmma.fence.sync.aligned";
    if (kind == MX_WG_COMMIT) return "wgmma.commit_group.sync.aligned";
    if (kind == MX_WG_WAIT) return "wgmma.wait_group.sync.aligned";
    if (kind == MX_MMA)
        return type == CUDA_CPU_F16 ? "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                                    : "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    static const char* ld[8] = {"", "", "ldmatrix.sync.aligned.x1.shared.b16", "ldmatrix.sync.aligned.x1.trans.shared.b16",
                                "ldmatrix.sync.aligned.x2.shared.b16", "ldmatrix.sync.aligned.x2.trans.shared.b16",
                                "", ""};
    if (type == 8) return "ldmatrix.sync.aligned.x4.shared.b16";
    if (type == 9) return "ldmatrix.sync.aligned.x4.trans.shared.b16";
    return ld[type & 7];
}

inline uint16_t lo16(uint32_t v) { return (uint16_t)(v & 0xffffu); }
inline uint16_t hi16(uint32_t v) { return (uint16_t)(v >> 16); }
inline uint32_t pack16(uint16_t lo, uint16_t hi) { return (uint32_t)lo | (uint32_t)hi << 16; }

// The PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": groupID = lane >> 2,
// threadID_in_group = lane % 4.
//   A (16x16, row): a0,a1: (g, 2t+0/1)   a2,a3: (g+8, 2t+0/1)   a4,a5: (g, 2t+8+0/1)   a6,a7: (g+8, 2t+8+0/1)
//   B (16x8, col):  b0,b1: (k = 2t+0/1, n = g)   b2,b3: (k = 2t+8+0/1, n = g)
//   C, D (16x8):    c0,c1: (g, 2t+0/1)   c2,c3: (g+8, 2t+0/1)
// Register i holds elements 2i (low 16 bits) and 2i+1 (high).
void mma_compute(MatrixRec** lanes, int type) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const uint32_t* in = lanes[l]->in;
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 8; i++) {
            uint16_t h = (i & 1) ? hi16(in[i >> 1]) : lo16(in[i >> 1]);
            float v = type == CUDA_CPU_F16 ? half_to_float(h) : bf16_to_float(h);
            int row = g + ((i >> 1) & 1) * 8, col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = v;
        }
        for (int i = 0; i < 4; i++) {
            uint16_t h = (i & 1) ? hi16(in[4 + (i >> 1)]) : lo16(in[4 + (i >> 1)]);
            float v = type == CUDA_CPU_F16 ? half_to_float(h) : bf16_to_float(h);
            B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = v;
        }
        for (int i = 0; i < 4; i++) C[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = float_of(in[6 + i]);
    }
    // fp32 accumulation from c, k in order; each product of two f16 or bf16 values is exact in fp32.
    float D[16][8];
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            float acc = C[m][n];
            for (int k = 0; k < 16; k++) acc += A[m][k] * B[k][n];
            D[m][n] = acc;
        }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) lanes[l]->out[i] = bits_of(D[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)]);
    }
}

// ldmatrix: matrix j's row r is the 16 bytes at the address lane 8j + r supplied. Each lane receives,
// for each matrix j, register j = (M_j[lane/4][2(lane%4)], M_j[lane/4][2(lane%4)+1]); with .trans the
// matrix is transposed first: (M_j[2(lane%4)][lane/4], M_j[2(lane%4)+1][lane/4]).
void ldmatrix_compute(MatrixRec** lanes, int num, int trans) {
    for (int l = 0; l < 32; l++) {
        int r = l >> 2, c = 2 * (l & 3);
        for (int j = 0; j < num; j++) {
            uint16_t e0, e1;
            if (!trans) {
                const uint32_t* row = lanes[8 * j + r]->in;  // 8 halves as 4 words
                e0 = lo16(row[c >> 1]);
                e1 = hi16(row[c >> 1]);
            } else {
                const uint32_t* r0 = lanes[8 * j + c]->in;
                const uint32_t* r1 = lanes[8 * j + c + 1]->in;
                e0 = (r & 1) ? hi16(r0[r >> 1]) : lo16(r0[r >> 1]);
                e1 = (r & 1) ? hi16(r1[r >> 1]) : lo16(r1[r >> 1]);
            }
            lanes[l]->out[j] = pack16(e0, e1);
        }
    }
}

void wgmma_warp_op(Worker* w, MatrixRec** lanes, int kind, int type);

// This lane's part of a warp-collective matrix operation: publish the record, meet, and (first lane
// to resume) compute for all.
void matrix_meet(MatrixRec* rec) {
    Worker* w = tw;
    const char* name = matrix_name(rec->kind, rec->type);
    if (!w || !w->cur) cuda_cpu_fail("%s called outside a kernel", name);
    unsigned tid = cuda_cpu_linear_tid;
    if (tid >= 1024) die_in_kernel("%s: thread index %u out of range", name, tid);
    rec->done = false;
    t_matrix[tid] = rec;
    unsigned group = 0;
    cuda_cpu_warp(CUDA_CPU_WARP_MATRIX, name, 0xffffffffu, 0, 0, &group);
    if (group != 0xffffffffu)
        die_in_kernel("%s needs all 32 lanes of the warp, but warp %u of this block has only %d threads (lanes 0x%08x)",
                      name, tid / 32, __builtin_popcount(group), group);
    if (rec->done) return;
    RuntimeScope scope;
    MatrixRec* lanes[32];
    unsigned base = tid & ~31u;
    for (int l = 0; l < 32; l++) {
        lanes[l] = t_matrix[base + l];
        if (lanes[l]->kind != rec->kind || lanes[l]->type != rec->type)
            die_in_kernel("lanes of warp %u meet at different matrix operations: lane %u at %s, lane %d at %s", tid / 32,
                          tid & 31u, name, l, matrix_name(lanes[l]->kind, lanes[l]->type));
    }
    if (rec->kind == MX_MMA) {
        mma_compute(lanes, rec->type);
        if (g_count_run) w->c_mma_flops += 2ull * 16 * 8 * 16;  // once a warp
    } else if (rec->kind == MX_LDMATRIX) {
        ldmatrix_compute(lanes, rec->type >> 1, rec->type & 1);
    } else {
        wgmma_warp_op(w, lanes, rec->kind, rec->type);
    }
    for (int l = 0; l < 32; l++) lanes[l]->done = true;
}

inline bool in_shared(Worker* w, const void* p, size_t n) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)w->arena;
    return a >= lo && a + n <= lo + w->arena_size;
}

}  // namespace

void cuda_cpu_mma_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, const float* c, int type) {
    MatrixRec rec;
    rec.kind = MX_MMA;
    rec.type = type;
    for (int i = 0; i < 4; i++) rec.in[i] = a[i];
    rec.in[4] = b[0];
    rec.in[5] = b[1];
    for (int i = 0; i < 4; i++) rec.in[6 + i] = bits_of(c[i]);
    count_ins(CUDA_CPU_INS_MMA);
    matrix_meet(&rec);
    for (int i = 0; i < 4; i++) d[i] = float_of(rec.out[i]);  // d may alias c
}

void cuda_cpu_ldmatrix(uint32_t* r, int num, int trans, const void* row) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    MatrixRec rec;
    rec.kind = MX_LDMATRIX;
    rec.type = num * 2 + (trans ? 1 : 0);
    memset(rec.in, 0, sizeof(rec.in));
    count_ins(CUDA_CPU_INS_LDSM);
    unsigned lane = cuda_cpu_linear_tid & 31u;
    Worker* w = tw;
    // Only lanes 0..8*num-1 supply row addresses; the hardware ignores the others'.
    if (w && w->cur && lane < 8u * (unsigned)num) {
        const char* name = matrix_name(MX_LDMATRIX, rec.type);
        if ((uintptr_t)row % 16 != 0)
            die_in_kernel("%s: lane %u supplies row address %p, not 16-byte aligned (each row is 8 16-bit elements, "
                          "which the PTX ISA requires to be 16-byte aligned)", name, lane, row);
        if (!in_shared(w, row, 16))
            die_in_kernel("%s: lane %u supplies row address %p, which is not shared memory (ldmatrix reads only "
                          "the .shared state space)", name, lane, row);
        check_lane_range(row, 16, false, pc);
        count_range(row, 16, false);  // each supplying lane its row: 128 bytes a matrix, once a warp
        memcpy(rec.in, row, 16);
    }
    matrix_meet(&rec);
    for (int j = 0; j < num; j++) r[j] = rec.out[j];
}

// ---- cp.async: per CUDA thread, the copies not yet committed and the committed groups not yet
// waited for. A copy takes its source bytes at issue (checked then as this thread's read): the PTX ISA
// leaves the moment the source is read anywhere between issue and completion, so its source must not
// change in between; the runtime reads it again at completion and aborts if it did. Its 16 bytes land
// in shared memory only when a cp.async.wait_group (or wait_all) covering its group runs, checked then
// as this thread's write: code that reads the destination before its wait reads what was there. ----
namespace {

struct AsyncCopy {
    char* dst;
    const char* src;
    int src_bytes;
    unsigned char data[16];
    uintptr_t pc;  // the cp.async's call site, for messages
};
struct AsyncThread {
    uint32_t blk = 0;  // the block instance these belong to (stale ones are dropped)
    std::vector<AsyncCopy> open;
    std::vector<std::vector<AsyncCopy>> groups;  // oldest first
};
__thread std::vector<AsyncThread>* t_async;

AsyncThread& async_thread(const char* name) {
    Worker* w = tw;
    if (!w || !w->cur) cuda_cpu_fail("%s called outside a kernel", name);
    RuntimeScope scope;  // the containers' code may be a checked program's instrumented copy
    if (!t_async) t_async = new std::vector<AsyncThread>(1024);
    AsyncThread& a = (*t_async)[cuda_cpu_linear_tid & 1023u];
    if (a.blk != w->blk) {
        a.blk = w->blk;
        a.open.clear();
        a.groups.clear();
    }
    return a;
}

void async_complete(AsyncCopy& c) {
    if (c.src_bytes > 0) {
        unsigned char now[16];
        memcpy(now, c.src, (size_t)c.src_bytes);
        if (memcmp(now, c.data, (size_t)c.src_bytes) != 0) {
            t_runtime++;
            std::string at;
            for (const std::string& s : source_chain(c.pc)) at += (at.empty() ? "" : " <- ") + s;
            die_in_kernel("the global source %p of the cp.async issued at %s changed before the cp.async.wait_group "
                          "that completes it: the copy may read it at any time until then", (const void*)c.src,
                          at.empty() ? "?" : at.c_str());
        }
    }
    check_lane_range(c.dst, 16, true, c.pc);
    memcpy(c.dst, c.data, 16);
}

}  // namespace

void cuda_cpu_cp_async(void* dst, const void* src, int src_bytes, int cg) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    const char* name = cg ? "cp.async.cg.shared.global" : "cp.async.ca.shared.global";
    AsyncThread& a = async_thread(name);
    Worker* w = tw;
    if (src_bytes < 0 || src_bytes > 16) die_in_kernel("%s: src-size %d outside 0..16", name, src_bytes);
    if ((uintptr_t)dst % 16 != 0 || !in_shared(w, dst, 16))
        die_in_kernel("%s: destination %p is %s (a 16-byte cp.async writes 16 aligned bytes of shared memory)", name, dst,
                      (uintptr_t)dst % 16 ? "not 16-byte aligned" : "not shared memory");
    AsyncCopy c;
    c.dst = (char*)dst;
    c.src = (const char*)src;
    c.src_bytes = src_bytes;
    c.pc = pc;
    memset(c.data, 0, 16);
    if (src_bytes > 0) {
        if ((uintptr_t)src % 16 != 0)
            die_in_kernel("%s: source %p is not 16-byte aligned (the PTX ISA requires the cp-size's alignment)", name, src);
        bool symbol = g_symbols && (uintptr_t)src - g_symbols->start < g_symbols->size;  // __device__ variables
        if (in_shared(w, src, 1) || !(in_device_region(src) || symbol))
            die_in_kernel("%s: source %p is not global (device) memory", name, src);
        check_lane_range(src, (size_t)src_bytes, false, pc);
        memcpy(c.data, src, (size_t)src_bytes);
    }
    // Counted at issue, each thread its own copy: src_bytes of global memory read (none for a
    // zero-filled row), 16 bytes of shared memory written.
    count_range(src, (size_t)src_bytes, false);
    count_range(dst, 16, true);
    count_ins(CUDA_CPU_INS_CP_ASYNC);
    RuntimeScope scope;
    a.open.push_back(c);
}

void cuda_cpu_cp_async_commit(void) {
    AsyncThread& a = async_thread("cp.async.commit_group");
    RuntimeScope scope;
    a.groups.push_back(std::move(a.open));  // an empty group is allowed
    a.open.clear();
}

void cuda_cpu_cp_async_wait(int n) {
    const char* name = n < 0 ? "cp.async.wait_all" : "cp.async.wait_group";
    AsyncThread& a = async_thread(name);
    // Complete every group but the n most recent, oldest first (a later copy to the same bytes wins).
    std::vector<AsyncCopy> finished;
    {
        RuntimeScope scope;
        if (n < 0) {  // wait_all: commit_group then wait_group 0
            a.groups.push_back(std::move(a.open));
            a.open.clear();
            n = 0;
        }
        size_t done = a.groups.size() > (size_t)n ? a.groups.size() - (size_t)n : 0;
        for (size_t i = 0; i < done; i++) finished.insert(finished.end(), a.groups[i].begin(), a.groups[i].end());
        a.groups.erase(a.groups.begin(), a.groups.begin() + done);
    }
    // Outside the scope: the checks must see these writes (async_complete touches no container).
    for (size_t i = 0; i < finished.size(); i++) async_complete(finished[i]);
    RuntimeScope scope;
    finished.clear();
    finished.shrink_to_fit();
}

// ============================================================================================
// wgmma (sm_90a; kernels/wgmma.cuh): wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16} with A from
// registers and B in shared memory through a no-swizzle matrix descriptor, its fence, commit_group
// and wait_group.
//
// A warpgroup is 4 consecutive warps (threads 128 i .. 128 i + 127). Warp w % 4 of it owns rows
// 16 (w % 4) .. +15 of the 64-row A and D, and every warp reads all of B, so each warp's share is
// computed from its own A registers and the common B: every instruction here is warp-collective (all 32
// lanes meet, as at mma.sync), and what ties the 4 warps together on a GPU (B read once for them) is
// only counted. The PTX ISA's layouts:
//   descriptor (64 bits): start address >> 4 in bits 0-13, leading dimension byte offset (LBO) >> 4 in
//     16-29, stride dimension byte offset (SBO) >> 4 in 32-45, base offset in 49-51, swizzle mode in
//     62-63. Emulated: swizzle 0 (no swizzle) and base offset 0; anything else aborts.
//   no-swizzle operands are core matrices of 8 rows of 16 bytes (8 16-bit elements), 128 contiguous
//     bytes; core matrix (g, kg) (g along M or N, kg along K) starts at start + g SBO + kg LBO. K-major
//     (the default): a core matrix's row r is M/N index 8 g + r, its 8 elements K indices 8 kg ..+7.
//     MN-major (imm-trans 1): row r is K index 8 kg + r, its elements M/N indices 8 g ..+7.
//   A from registers (16-bit types): 4 registers a lane, mma.m16n8k16's A fragment of the warp's 16
//     rows: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..), g = lane / 4, t = lane % 4.
//   D (f32): N/2 floats a lane, for each 8-column slice j: d[4j], d[4j+1] = (g, 8j+2t, +1),
//     d[4j+2], d[4j+3] = (g+8, 8j+2t, +1), rows counted from the warp's first.
// Asynchrony: an mma_async reads B and the A registers at issue (each lane reads
// and checks its share of the 16-byte rows, as ldmatrix's lanes do), joins the warp's open ops,
// commit_group closes them into a group, and wait_group N completes every group but the N newest, in
// issue order: it reads C from the lanes' accumulators then, and writes D. A GPU may read the operands
// at any time until then, so completion aborts if B's shared-memory bytes changed since issue, or if
// an accumulator the kernel was not allowed to touch changed (one no earlier op in flight writes). The
// PTX ISA requires a wgmma.fence before an mma_async whose registers the warp accessed since the last
// one; the runtime asks for one after every wait_group (and before the first mma_async), which code
// that fences at the head of each batch meets. A thread exiting with its warp's ops in flight aborts.
// ============================================================================================
namespace {

struct WgmmaLane {
    float* d;
    int n, scale_d, trans_b;
    uint64_t b_desc;
    uint32_t a[4];
};

struct WgmmaOp {
    int type, n, scale_d;
    float* d[32];
    float A[16][16];
    std::vector<float> B;                        // 16 x n, k-major rows
    std::vector<const unsigned char*> rows;      // the 16-byte shared-memory rows read at issue
    std::vector<unsigned char> bytes;            // and their bytes then
    std::vector<float> acc;                      // the accumulators at issue (unless chained)
    bool chained;                                // an earlier op in flight writes the same accumulators
};
struct WgmmaWarp {
    uint32_t blk = 0;     // the block instance this state belongs to
    bool fenced = false;  // a wgmma.fence since the start or the last wait_group
    std::vector<WgmmaOp> open;
    std::vector<std::vector<WgmmaOp>> groups;  // oldest first
};
__thread std::vector<WgmmaWarp>* t_wgmma;

WgmmaWarp& wgmma_warp(Worker* w, unsigned tid) {
    RuntimeScope scope;
    if (!t_wgmma) t_wgmma = new std::vector<WgmmaWarp>(32);
    WgmmaWarp& s = (*t_wgmma)[(tid >> 5) & 31u];
    if (s.blk != w->blk) {
        s.blk = w->blk;
        s.fenced = false;
        s.open.clear();
        s.groups.clear();
    }
    return s;
}

struct WgmmaDesc {
    uintptr_t start;
    size_t lbo, sbo;
};

WgmmaDesc wgmma_desc_decode(Worker* w, uint64_t desc, const char* what) {
    unsigned swizzle = (unsigned)(desc >> 62), base = (unsigned)((desc >> 49) & 7u);
    if (swizzle != 0 || base != 0)
        die_in_kernel("wgmma.mma_async: the %s descriptor 0x%016llx has swizzle mode %u and base offset %u: the runtime "
                      "emulates only the no-swizzle layout (mode 0, base offset 0)", what, (unsigned long long)desc,
                      swizzle, base);
    WgmmaDesc d;
    d.start = (uintptr_t)w->arena + (size_t)(desc & 0x3fffu) * 16;
    d.lbo = (size_t)((desc >> 16) & 0x3fffu) * 16;
    d.sbo = (size_t)((desc >> 32) & 0x3fffu) * 16;
    return d;
}

// The 16-byte rows of an operand, in the order (g, kg, r): g in [g0, g0 + groups), kg in {0, 1}, r in 0..7.
void wgmma_rows(const WgmmaDesc& d, int g0, int groups, std::vector<const unsigned char*>& out) {
    for (int g = g0; g < g0 + groups; g++)
        for (int kg = 0; kg < 2; kg++)
            for (int r = 0; r < 8; r++) out.push_back((const unsigned char*)(d.start + g * d.sbo + kg * d.lbo + r * 16));
}

inline float wgmma_elem(const unsigned char* row, int e, int type) {
    uint16_t h;
    memcpy(&h, row + 2 * e, 2);
    return type == CUDA_CPU_F16 ? half_to_float(h) : bf16_to_float(h);
}

// A core-matrix operand's element (i along M or N, k) from its rows (wgmma_rows' order, from g0 = 0).
inline float wgmma_operand(const unsigned char* const* rows, int i, int k, int trans, int type) {
    int g = i >> 3, kg = k >> 3;
    const unsigned char* const* cm = rows + (g * 2 + kg) * 8;
    return trans ? wgmma_elem(cm[k & 7], i & 7, type) : wgmma_elem(cm[i & 7], k & 7, type);
}

void wgmma_issue(Worker* w, MatrixRec** lanes, int type) {
    unsigned base = cuda_cpu_linear_tid & ~31u;
    const WgmmaLane& x = *lanes[0]->wg;
    for (int l = 1; l < 32; l++) {
        const WgmmaLane& y = *lanes[l]->wg;
        if (y.n != x.n || y.scale_d != x.scale_d || y.trans_b != x.trans_b || y.b_desc != x.b_desc)
            die_in_kernel("wgmma.mma_async: lanes 0 and %d of warp %u give different descriptors, shapes or "
                          "immediates (they must be the same across the warpgroup)", l, base / 32);
    }
    WgmmaWarp& s = wgmma_warp(w, base);
    if (!s.fenced)
        die_in_kernel("wgmma.mma_async in warp %u with no wgmma.fence since the kernel's start or the warp's last "
                      "wgmma.wait_group: the PTX ISA requires one before an mma_async whose registers the warp "
                      "accessed", base / 32);
    RuntimeScope scope;
    WgmmaOp op;
    op.type = type;
    op.n = x.n;
    op.scale_d = x.scale_d;
    for (int l = 0; l < 32; l++) op.d[l] = lanes[l]->wg->d;
    std::vector<const unsigned char*> brows;
    wgmma_rows(wgmma_desc_decode(w, x.b_desc, "B"), 0, x.n / 8, brows);
    op.B.resize(16 * (size_t)x.n);
    // CUDA_CPU_FAULT=wgmma: B read with the other major-ness (a wrong layout, on purpose)
    const int trans_b = g_wgmma_fault ? !x.trans_b : x.trans_b;
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < x.n; j++) op.B[(size_t)k * x.n + j] = wgmma_operand(brows.data(), j, k, trans_b, type);
    op.rows = brows;
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 8; i++) {
            uint32_t r = lanes[l]->wg->a[i >> 1];
            uint16_t h = (i & 1) ? hi16(r) : lo16(r);
            float v = type == CUDA_CPU_F16 ? half_to_float(h) : bf16_to_float(h);
            op.A[g + ((i >> 1) & 1) * 8][2 * t + (i & 1) + (i >= 4 ? 8 : 0)] = v;
        }
    }
    op.bytes.resize(op.rows.size() * 16);
    for (size_t i = 0; i < op.rows.size(); i++) memcpy(&op.bytes[i * 16], op.rows[i], 16);
    // chained: an op in flight (open or committed, not completed) already writes these accumulators
    op.chained = false;
    for (const WgmmaOp& o : s.open) op.chained |= o.d[0] == op.d[0];
    for (const auto& gr : s.groups)
        for (const WgmmaOp& o : gr) op.chained |= o.d[0] == op.d[0];
    if (!op.chained) {
        op.acc.resize(32 * (size_t)(x.n / 2));
        for (int l = 0; l < 32; l++) memcpy(&op.acc[(size_t)l * (x.n / 2)], op.d[l], sizeof(float) * (x.n / 2));
    }
    if (g_count_run) w->c_wgmma_flops += 2ull * 16 * x.n * 16;  // the warp's 16 rows
    s.open.push_back(std::move(op));
}

void wgmma_complete(WgmmaOp& op, unsigned warp) {
    for (size_t i = 0; i < op.rows.size(); i++)
        if (memcmp(op.rows[i], &op.bytes[i * 16], 16) != 0)
            die_in_kernel("warp %u: shared memory at %p, an operand of a wgmma.mma_async in flight, was written before "
                          "the wgmma.wait_group that completes it (a GPU may read it until then)", warp,
                          (const void*)op.rows[i]);
    const int h = op.n / 2;
    if (!op.chained)
        for (int l = 0; l < 32; l++)
            if (memcmp(&op.acc[(size_t)l * h], op.d[l], sizeof(float) * h) != 0)
                die_in_kernel("warp %u lane %d: the accumulators of a wgmma.mma_async in flight were written before the "
                              "wgmma.wait_group that completes it", warp, l);
    // fp32 accumulation from C (or 0: scale-d false), k in order; products of f16 or bf16 values are exact
    std::vector<float> D(16 * (size_t)op.n);
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int j = 0; j < op.n / 8; j++)
            for (int i = 0; i < 4; i++) {
                int m = g + (i >> 1) * 8, c = 8 * j + 2 * t + (i & 1);
                D[(size_t)m * op.n + c] = op.scale_d ? op.d[l][4 * j + i] : 0.0f;
            }
    }
    for (int m = 0; m < 16; m++)
        for (int c = 0; c < op.n; c++) {
            float acc = D[(size_t)m * op.n + c];
            for (int k = 0; k < 16; k++) acc += op.A[m][k] * op.B[(size_t)k * op.n + c];
            D[(size_t)m * op.n + c] = acc;
        }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int j = 0; j < op.n / 8; j++)
            for (int i = 0; i < 4; i++) op.d[l][4 * j + i] = D[(size_t)(g + (i >> 1) * 8) * op.n + 8 * j + 2 * t + (i & 1)];
    }
}

void wgmma_warp_op(Worker* w, MatrixRec** lanes, int kind, int type) {
    unsigned base = cuda_cpu_linear_tid & ~31u;
    if (kind == MX_WGMMA) {
        wgmma_issue(w, lanes, type);
        return;
    }
    WgmmaWarp& s = wgmma_warp(w, base);
    if (kind == MX_WG_FENCE) {
        s.fenced = true;
    } else if (kind == MX_WG_COMMIT) {
        RuntimeScope scope;
        s.groups.push_back(std::move(s.open));
        s.open.clear();
    } else {  // wait_group type: complete all groups but the `type` newest, oldest first
        std::vector<WgmmaOp> done;
        {
            RuntimeScope scope;
            size_t n = s.groups.size() > (size_t)type ? s.groups.size() - (size_t)type : 0;
            for (size_t i = 0; i < n; i++)
                for (WgmmaOp& o : s.groups[i]) done.push_back(std::move(o));
            s.groups.erase(s.groups.begin(), s.groups.begin() + n);
        }
        for (WgmmaOp& o : done) wgmma_complete(o, base / 32);
        RuntimeScope scope;
        done.clear();
        s.fenced = false;
    }
}

// One lane's part of a warpgroup instruction other than mma_async.
void wgmma_meet_simple(int kind, int arg) {
    MatrixRec rec;
    rec.kind = kind;
    rec.type = arg;
    rec.wg = nullptr;
    matrix_meet(&rec);
}

void wgmma_check_block(const char* what) {
    Worker* w = tw;
    if (!w || !w->cur) cuda_cpu_fail("%s called outside a kernel", what);
    if (w->launch->nthreads % 128 != 0)
        die_in_kernel("%s: the block has %u threads; warpgroup instructions need whole warpgroups (a multiple of 128)",
                      what, w->launch->nthreads);
}

}  // namespace

void cuda_cpu_wgmma(float* d, int n, const uint32_t* a, uint64_t b_desc, int scale_d, int trans_b, int type) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    const char* name = type == CUDA_CPU_F16 ? "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16"
                                            : "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16";
    wgmma_check_block(name);
    if (n < 8 || n > 256 || n % 8 != 0) die_in_kernel("%s: N = %d (8 to 256, a multiple of 8)", name, n);
    Worker* w = tw;
    unsigned lane = cuda_cpu_linear_tid & 31u;
    const int wig = (int)((cuda_cpu_linear_tid >> 5) & 3u);
    WgmmaLane x;
    x.d = d;
    x.n = n;
    x.scale_d = scale_d != 0;
    x.trans_b = trans_b != 0;
    x.b_desc = b_desc;
    for (int i = 0; i < 4; i++) x.a[i] = a[i];
    // This lane's share of B's shared-memory rows (every 32nd), read and checked as its access, and
    // counted as a GPU moves them: once a warpgroup (by its first warp).
    std::vector<const unsigned char*> rows;
    {
        RuntimeScope scope;
        wgmma_rows(wgmma_desc_decode(w, b_desc, "B"), 0, n / 8, rows);
    }
    for (size_t i = lane; i < rows.size(); i += 32) {
        if (!in_shared(w, rows[i], 16))
            die_in_kernel("%s: lane %u: the B row at %p (from its descriptor) is not in the block's shared memory", name,
                          lane, (const void*)rows[i]);
        check_lane_range(rows[i], 16, false, pc);
        if (wig == 0) count_range(rows[i], 16, false);
    }
    {
        RuntimeScope scope;
        rows.clear();
        rows.shrink_to_fit();
    }
    count_ins(CUDA_CPU_INS_WGMMA);
    MatrixRec rec;
    rec.kind = MX_WGMMA;
    rec.type = type;
    rec.wg = &x;
    matrix_meet(&rec);
}

void cuda_cpu_wgmma_fence(void) {
    wgmma_check_block("wgmma.fence.sync.aligned");
    wgmma_meet_simple(MX_WG_FENCE, 0);
}

void cuda_cpu_wgmma_commit(void) {
    wgmma_check_block("wgmma.commit_group.sync.aligned");
    wgmma_meet_simple(MX_WG_COMMIT, 0);
}

void cuda_cpu_wgmma_wait(int n) {
    wgmma_check_block("wgmma.wait_group.sync.aligned");
    if (n < 0 || n > 7) die_in_kernel("wgmma.wait_group.sync.aligned %d: N must be 0 to 7", n);
    wgmma_meet_simple(MX_WG_WAIT, n);
}

uint32_t cuda_cpu_smem_offset(const void* p) {
    Worker* w = tw;
    if (!w || !w->cur) cuda_cpu_fail("a shared-memory address taken outside a kernel");
    if (!in_shared(w, p, 1)) die_in_kernel("%p is not in the block's shared memory (a shared-state-space address)", p);
    size_t off = (uintptr_t)p - (uintptr_t)w->arena;
    if (off >= (1u << 18))
        die_in_kernel("shared memory at offset %zu: past the 256 KiB a wgmma descriptor's 14-bit address reaches", off);
    return (uint32_t)off;
}

void wgmma_thread_exit(Worker* w) {
    if (!t_wgmma) return;
    WgmmaWarp& s = (*t_wgmma)[(cuda_cpu_linear_tid >> 5) & 31u];
    if (s.blk == w->blk && (!s.open.empty() || !s.groups.empty()))
        die_in_kernel("a thread of warp %u exits with wgmma.mma_async in flight (no wgmma.wait_group completed them)",
                      cuda_cpu_linear_tid >> 5);
}
