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
float __expf(float x) noexcept { return move_ulps((float)exp(x), 2.0 + floor(fabs(1.173 * x)), direction(x)); }
float __exp10f(float x) noexcept { return move_ulps((float)pow(10.0, x), 2.0 + floor(fabs(2.97 * x)), direction(x)); }
float __exp2f(float x) noexcept { return move_ulps((float)exp2(x), 2.0, direction(x)); }
float __logf(float x) noexcept {
    float r = (float)log(x);
    return x >= 0.5f && x <= 2.0f ? move_abs(r, ldexp(1.0, -21) / pow(2.0, 0.41), direction(x)) : move_ulps(r, 3.0, direction(x));
}
float __log2f(float x) noexcept {
    float r = (float)log2(x);
    return x >= 0.5f && x <= 2.0f ? move_abs(r, ldexp(1.0, -22), direction(x)) : move_ulps(r, 2.0, direction(x));
}
float __log10f(float x) noexcept {
    float r = (float)log10(x);
    return x >= 0.5f && x <= 2.0f ? move_abs(r, ldexp(1.0, -24), direction(x)) : move_ulps(r, 3.0, direction(x));
}
// Outside [-pi, pi] the guide only says "larger": the bound grows with the argument here.
float __sinf(float x) noexcept {
    double e = ldexp(1.0, -21) / pow(2.0, 0.41) * (fabsf(x) > (float)M_PI ? fabs(x) / M_PI : 1.0);
    return move_abs((float)sin(x), e, direction(x));
}
float __cosf(float x) noexcept {
    double e = ldexp(1.0, -21) / pow(2.0, 0.19) * (fabsf(x) > (float)M_PI ? fabs(x) / M_PI : 1.0);
    return move_abs((float)cos(x), e, direction(x));
}
void __sincosf(float x, float* s, float* c) noexcept { *s = __sinf(x); *c = __cosf(x); }
float __tanf(float x) noexcept { return __sinf(x) * (1.0f / __cosf(x)); }
float __powf(float x, float y) noexcept { return __exp2f(y * __log2f(x)); }
// tanh.approx.f32 (PTX ISA): relative error about 2^-11
float __tanhf(float x) noexcept {
    float r = (float)tanh(x);
    return move_abs(r, fabs(r) * ldexp(1.0, -11), direction(x));
}
}

float cuda_cpu_fdividef(float a, float b) {
    if (fabsf(b) > 0x1p126f && fabsf(b) < INFINITY) return fabsf(a) < INFINITY ? 0.0f * a : NAN;
    return move_ulps(a / b, 2.0, direction(a, b));
}
float cuda_cpu_rsqrtf(float x) { return move_ulps((float)(1.0 / sqrt((double)x)), 2.0, direction(x)); }

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
// stores are shared out: lane l stores the elements l, l+32, ... of the tile.
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
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    check_pointer("wmma::load_matrix_sync", p, ldm, type);
    size_t es = elem_size(type);
    const char* src = (const char*)p;
    char* dst = (char*)frag;
    // memory rows: rows of the tile (row-major) or its columns (column-major)
    int mrows = row_major_mem ? rows : cols, mcols = row_major_mem ? cols : rows;
    for (int r = 0; r < mrows; r++) check_lane_range(src + (size_t)r * ldm * es, (size_t)mcols * es, false, pc);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t at = row_major_mem ? (size_t)r * ldm + c : (size_t)c * ldm + r;
            memcpy(dst + ((size_t)r * cols + c) * es, src + at * es, es);
        }
}

void cuda_cpu_wmma_store(void* p, const void* frag, int type, int rows, int cols, unsigned ldm, int row_major_mem) {
    uintptr_t pc = (uintptr_t)__builtin_return_address(0);
    check_pointer("wmma::store_matrix_sync", p, ldm, type);
    size_t es = elem_size(type);
    unsigned lane = cuda_cpu_linear_tid & 31u;
    char* dst = (char*)p;
    const char* src = (const char*)frag;
    for (int e = (int)lane; e < rows * cols; e += 32) {
        int r = e / cols, c = e % cols;
        size_t at = row_major_mem ? (size_t)r * ldm + c : (size_t)c * ldm + r;
        check_lane_range(dst + at * es, es, true, pc);
        memcpy(dst + at * es, src + (size_t)e * es, es);
    }
}

void cuda_cpu_wmma_mma(void* d, const void* a, const void* b, const void* c, int M, int N, int K, int ab, int cd) {
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
