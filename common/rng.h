// rng.h: the project's random numbers: one 64-bit state, xorshift* steps, seeded through
// splitmix64. Small enough to save in a training-state file, so a resumed run draws the
// same numbers as an unbroken one. Header-only; C and C++.
#ifndef COMMON_RNG_H
#define COMMON_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A state of zero would stay zero under xorshift, so seeding always goes through splitmix64.
static inline uint64_t rng_seed(uint64_t seed) {
    uint64_t s = splitmix64(seed);
    return s ? s : 0x2545F4914F6CDD1Dull;
}

static inline uint32_t rng_u32(uint64_t* state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

// Uniform in [0, 1) with 24 bits, exactly representable in a float.
static inline float rng_f32(uint64_t* state) {
    return (rng_u32(state) >> 8) / 16777216.0f;
}

// Uniform integer in [0, n) for n > 0 (modulo bias is below 2^-32 * n; fine for shuffles).
static inline uint64_t rng_below(uint64_t* state, uint64_t n) {
    uint64_t r = ((uint64_t)rng_u32(state) << 32) | rng_u32(state);
    return r % n;
}

// Standard normal by Box-Muller, in double for accuracy, one value per call.
static inline float rng_normal(uint64_t* state) {
    double u1 = ((rng_u32(state) >> 8) + 1.0) / 16777217.0;  // (0, 1): log(u1) is finite
    double u2 = (rng_u32(state) >> 8) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
