/* Accuracy of the vectorisable math in src/backend/cpu/cpu_math.h against libm in
 * float64, over a dense sweep of [-100, 100] (and the bounds its header promises; the
 * log over every exponent and the subnormals). */
#include "backend/cpu/cpu_math.h"
#include "test.h"

#include <float.h>

/* error in units of the float spacing at the reference value */
static double ulps(float got, double ref) {
    if (ref == 0.0) return got == 0.0f ? 0.0 : INFINITY;
    int e;
    frexp(ref, &e);
    double ulp = ldexp(1.0, e - 24);
    if (fabs(ref) < FLT_MIN) ulp = ldexp(1.0, -149);
    return fabs((double)got - ref) / ulp;
}

static void test_expf(void) {
    double worst = 0;
    float wx = 0;
    for (double d = -87.0; d < 88.72; d += 1.37e-4) {
        float x = (float)d;
        double u = ulps(cpu_expf(x), exp((double)x));
        if (u > worst) { worst = u; wx = x; }
    }
    CHECKF(worst <= 2.0, "cpu_expf: %.2f ulp at %.9g", worst, wx);
    fprintf(stderr, "cpu_expf max error %.2f ulp\n", worst);
    CHECK(cpu_expf(0.0f) == 1.0f);
    CHECK(cpu_expf(89.0f) == INFINITY && cpu_expf(INFINITY) == INFINITY);
    CHECK(cpu_expf(-105.0f) == 0.0f && cpu_expf(-INFINITY) == 0.0f);
    CHECK(isnan(cpu_expf(NAN)));
}

static void test_tanhf(void) {
    double worst = 0;
    float wx = 0;
    for (double d = -20.0; d < 20.0; d += 3.1e-5) {
        float x = (float)d;
        double u = ulps(cpu_tanhf(x), tanh((double)x));
        if (u > worst) { worst = u; wx = x; }
    }
    CHECKF(worst <= 2.0, "cpu_tanhf: %.2f ulp at %.9g", worst, wx);
    fprintf(stderr, "cpu_tanhf max error %.2f ulp\n", worst);
    CHECK(cpu_tanhf(100.0f) == 1.0f && cpu_tanhf(-INFINITY) == -1.0f && isnan(cpu_tanhf(NAN)));
    CHECK(cpu_tanhf(1e-30f) == 1e-30f);
}

static void test_phif(void) {
    double worst5 = 0, worst10 = 0;
    float wx = 0;
    for (double d = -10.0; d < 10.0; d += 1.1e-5) {
        float x = (float)d;
        double ref = 0.5 * erfc(-(double)x / sqrt(2.0));
        double r = fabs(cpu_phif(x) - ref) / ref;
        if (x >= -5.0f && r > worst5) { worst5 = r; wx = x; }
        if (r > worst10) worst10 = r;
    }
    CHECKF(worst5 <= 3e-6, "cpu_phif: relative error %.3g at %.9g", worst5, wx);
    CHECKF(worst10 <= 1e-5, "cpu_phif: relative error %.3g on [-10, 10]", worst10);
    fprintf(stderr, "cpu_phif max relative error %.3g on [-5, 10], %.3g on [-10, 10]\n", worst5, worst10);
    CHECK(cpu_phif(INFINITY) == 1.0f && cpu_phif(-INFINITY) == 0.0f && isnan(cpu_phif(NAN)));
}

/* GELU's derivative Phi(x) + x pdf(x), Phi and pdf sharing one exp */
static void test_gelu_erf_grad(void) {
    double worst = 0;
    float wx = 0;
    for (double d = -12.0; d < 12.0; d += 1.3e-5) {
        float x = (float)d;
        double ref = 0.5 * erfc(-(double)x / sqrt(2.0)) + (double)x * exp(-0.5 * (double)x * x) / sqrt(2.0 * M_PI);
        double r = fabs(cpu_gelu_erf_grad(1.0f, x) - ref);
        if (r > worst) { worst = r; wx = x; }
    }
    /* the derivative lies in [-0.17, 1.13]: absolute error near float32 rounding of 1 */
    CHECKF(worst <= 5e-7, "cpu_gelu_erf_grad: absolute error %.3g at %.9g", worst, wx);
    fprintf(stderr, "cpu_gelu_erf_grad max absolute error %.3g on [-12, 12]\n", worst);
    CHECK(isnan(cpu_gelu_erf_grad(1.0f, NAN)) && cpu_gelu_erf_grad(1.0f, -30.0f) == 0.0f);
}

static void test_expf_underflow(void) {
    for (double d = -103.0; d < -87.0; d += 0.01) {
        float x = (float)d;
        double ref = exp((double)x);
        CHECKF(fabs(cpu_expf(x) - ref) <= ldexp(1.0, -149) + 4e-7 * ref, "cpu_expf(%g) = %g vs %g", x, cpu_expf(x), ref);
    }
}

/* every float exponent, a dense sweep of mantissas in each, and the subnormals */
static void test_logf(void) {
    double worst = 0;
    float wx = 0;
    for (int e = -149; e < 128; e++)
        for (int k = 0; k < 4096; k++) {
            float x = ldexpf(1.0f + (float)k / 4096.0f + 1.0f / 8388608.0f * (float)(k % 7), e);
            if (x == 0.0f || isinf(x)) continue;
            double u = ulps(cpu_logf(x), log((double)x));
            if (u > worst) { worst = u; wx = x; }
        }
    for (double d = 0.5; d < 2.0; d += 1.7e-6) { /* around 1, where ln x is small */
        float x = (float)d;
        double u = ulps(cpu_logf(x), log((double)x));
        if (u > worst) { worst = u; wx = x; }
    }
    CHECKF(worst <= 2.0, "cpu_logf: %.2f ulp at %.9g", worst, wx);
    fprintf(stderr, "cpu_logf max error %.2f ulp\n", worst);
    CHECK(cpu_logf(1.0f) == 0.0f && cpu_logf(0.0f) == -INFINITY && cpu_logf(-0.0f) == -INFINITY);
    CHECK(cpu_logf(INFINITY) == INFINITY && isnan(cpu_logf(-1.0f)) && isnan(cpu_logf(NAN)));
}

/* log(1 + e): relative error near f32 rounding from e = 1e-30 (where 1 + e is 1) to 1e30 */
static void test_log1p_pos(void) {
    double worst = 0;
    float we = 0;
    for (double l = -30; l < 30; l += 1e-4) {
        float e = (float)pow(10.0, l);
        double ref = log1p((double)e), r = fabs(cpu_log1p_pos(e) - ref) / ref;
        if (r > worst) { worst = r; we = e; }
    }
    CHECKF(worst <= 4e-7, "cpu_log1p_pos: relative error %.3g at %.9g", worst, we);
    fprintf(stderr, "cpu_log1p_pos max relative error %.3g\n", worst);
    CHECK(cpu_log1p_pos(0.0f) == 0.0f);
}

TEST_MAIN(T(test_expf), T(test_expf_underflow), T(test_tanhf), T(test_phif), T(test_gelu_erf_grad), T(test_logf),
          T(test_log1p_pos))
