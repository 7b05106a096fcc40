// test.h: the check macros C tests use. Each check prints "PASS name" or "FAIL name: why";
// test_finish() returns the exit status (non-zero when any check failed).
#ifndef TEST_TEST_H
#define TEST_TEST_H

#include <math.h>
#include <stdio.h>

static int test_failures_ = 0;

static inline void test_report(int ok, const char* name, const char* why) {
    if (ok) printf("PASS %s\n", name);
    else { printf("FAIL %s: %s\n", name, why); test_failures_++; }
    fflush(stdout);
}

#define CHECK(cond, name) test_report((cond) ? 1 : 0, (name), #cond)

// Checks |a - b| <= tol * max(1, |b|)-style closeness and prints the values on failure.
static inline void check_close(const char* name, double a, double b, double rel_tol) {
    double err = fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1.0);
    char why[256];
    snprintf(why, sizeof(why), "got %.9g, expected %.9g (rel err %.3g > %.3g)", a, b, err, rel_tol);
    test_report(err <= rel_tol, name, why);
}

static inline int test_finish(void) { return test_failures_ ? 1 : 0; }

#endif
