// bound_check.cuh: what the kernel tests that hold a kernel to a derived error bound share
// (dev/cuda/test_qk_tile.cu, dev/cuda/test_flash_fwd.cu): a CUDA call check that ends the test with a
// FAIL line, f16/bf16 conversions and unit roundoffs, the worst ratio of error to bound over a check's
// elements, and the PASS/FAIL lines (test.h's test_report) for a bound and for bit-identical results.
//
// The rule these tests follow: every element gets its own bound, derived in the test's header from
// where the kernel rounds; the check keeps the worst error / bound and passes when it is at most 1,
// and the FAIL line says how many times the bound the worst element was. A NaN anywhere counts as
// infinitely far off, so an unwritten (NaN-filled) output cannot pass.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"  // CK: a failed CUDA call ends the test with a FAIL line naming the call
#include "test.h"

static inline float to_f(__half h) { return __half2float(h); }
static inline float to_f(__nv_bfloat16 h) { return __bfloat162float(h); }
template <class T> static inline T from_f(float v);
template <> inline __half from_f<__half>(float v) { return __float2half(v); }
template <> inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

// u, the unit roundoff of T (half an ulp at 1): 2^-11 for f16 (10 mantissa bits), 2^-8 for bf16 (7).
template <class T> static inline double unit_roundoff();
template <> inline double unit_roundoff<__half>() { return ldexp(1.0, -11); }
template <> inline double unit_roundoff<__nv_bfloat16>() { return ldexp(1.0, -8); }

// worst = max(worst, ratio), a NaN ratio making it infinite (NaN compares false, so `!(r <= w)`).
static inline void keep_worst(double& worst, double ratio) {
    if (!(ratio <= worst)) worst = isnan(ratio) ? INFINITY : ratio;
}

// PASS "<name><suffix>" when worst <= 1; else FAIL saying "<what> <worst> times <bound>".
static inline void check_worst(const char* name, const char* suffix, double worst, const char* what,
                               const char* bound) {
    char n[160], why[192];
    snprintf(n, sizeof(n), "%s%s", name, suffix);
    snprintf(why, sizeof(why), "%s %.3g times %s", what, worst, bound);
    test_report(worst <= 1.0, n, why);
}

// PASS "<name><suffix>" when the two results hold the same bytes (a repeat run, another order).
static inline void check_bit_identical(const char* name, const char* suffix, const void* a, const void* b,
                                       size_t bytes) {
    char n[160];
    snprintf(n, sizeof(n), "%s%s", name, suffix);
    test_report(memcmp(a, b, bytes) == 0, n, "a second run gave different bits");
}
