/* Vectorisable float math for the activation kernels: exp, tanh and the normal
 * CDF Phi (for GELU), written as straight-line arithmetic plus selects so that GCC
 * turns a loop of them into AVX-512 code. glibc's expf/tanhf/erff are scalar
 * calls unless -ffast-math is on (its SIMD declarations sit behind __FAST_MATH__):
 * SiLU over 4096 floats takes 6.2 us with expf and 1.2 us with cpu_expf, 262144
 * floats 400 vs 80 us (bench/cpu_kernels.c, one thread). Accuracy, checked against
 * float64 in tests/backend/test_cpu_math.c over [-100, 100]:
 *   cpu_expf  <= 2 ulp over normal results (overflow gives +inf, underflow is
 *             gradual down to 0)
 *   cpu_tanhf <= 2 ulp (Cephes' tanhf split: odd polynomial below 0.625)
 *   cpu_phif  relative error <= 3e-6 for x >= -5 and <= 1e-5 for x >= -10, where
 *             the f32 rounding of the exp argument -x^2/2 dominates (a fit of
 *             erfc e^(z^2), relative error 1.8e-7 in float32, times that exp);
 *             below -10 Phi < 1e-23 and GELU's absolute error is < 1e-27
 *   cpu_logf  <= 2 ulp over positive normal and subnormal x (log 0 = -inf, a negative
 *             x NaN, log inf = inf)
 * NaN in gives NaN out for all of them. */
#ifndef BRISK_CPU_MATH_H
#define BRISK_CPU_MATH_H

#include <math.h>
#include <stdint.h>

static inline float cpu_bits_to_f32(uint32_t u) {
    union { uint32_t u; float f; } c = { .u = u };
    return c.f;
}

static inline uint32_t cpu_f32_to_bits(float f) {
    union { float f; uint32_t u; } c = { .f = f };
    return c.u;
}

/* e^x by Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, and Cephes' degree-6
 * polynomial for e^r; 2^n is applied as 2^(n/2) 2^(n - n/2) so that both factors
 * stay normal floats over the whole range n in [-150, 128] (overflow to inf past
 * 88.72, gradual underflow to 0 below -87.3). */
static inline float cpu_expf(float x) {
    float xc = x > 88.72283935546875f ? 88.72283935546875f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    /* round to nearest by the 1.5 * 2^23 trick (no libm call, vectorises) */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t ni = (int32_t)n, h = ni / 2;
    float y = p * cpu_bits_to_f32((uint32_t)(h + 127) << 23) * cpu_bits_to_f32((uint32_t)(ni - h + 127) << 23);
    y = x > 88.72283935546875f ? INFINITY : y;
    y = x < -104.0f ? 0.0f : y;
    return x != x ? x : y;
}

/* ln x: x = 2^e m with m in [sqrt(1/2), sqrt(2)), ln x = e ln2 + ln(1 + f), f = m - 1, by
 * Cephes' logf polynomial, e ln2 added in two parts (Cody-Waite). Subnormals are scaled by
 * 2^23 first; the special values are selected at the end, so a loop of it vectorises. */
static inline float cpu_logf(float x) {
    int sub = x < 1.17549435e-38f;
    float xs = sub ? x * 8388608.0f : x;
    uint32_t u = cpu_f32_to_bits(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 126 - (sub ? 23 : 0);
    float m = cpu_bits_to_f32((u & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
    int low = m < 0.707106781186547524f;
    e = low ? e - 1 : e;
    float f = low ? m + m - 1.0f : m - 1.0f;
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    float ef = (float)e;
    float y = p * f * z;
    y = y + -2.12194440e-4f * ef;
    y = y - 0.5f * z;
    float r = f + y;
    r = r + 0.693359375f * ef;
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    r = x == INFINITY ? INFINITY : r;
    return x != x ? x : r;
}

/* ln(1 + e) for e >= 0 without losing e to the rounding of 1 + e: u = 1 + e, then
 * ln(u) e / (u - 1) (the quotient corrects for what the rounding of u added or took away;
 * Goldberg), and e itself when u rounds to 1. */
static inline float cpu_log1p_pos(float e) {
    float u = 1.0f + e;
    float r = cpu_logf(u) * (e / (u - 1.0f));
    return u == 1.0f ? e : r;
}

/* tanh: odd polynomial for |x| < 0.625 (where 1 - 2/(e^2x + 1) would cancel),
 * the exp form above it; both computed, one selected, so the loop vectorises. */
static inline float cpu_tanhf(float x) {
    float z = fabsf(x);
    float e = cpu_expf(2.0f * z);
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0.0f ? -big : big;
    float z2 = x * x;
    float p = -5.70498872745e-3f;
    p = p * z2 + 2.06390887954e-2f;
    p = p * z2 - 5.37397155531e-2f;
    p = p * z2 + 1.33314422036e-1f;
    p = p * z2 - 3.33332819422e-1f;
    float small = p * z2 * x + x;
    return z < 0.625f ? small : (x != x ? x : big);
}

/* Phi(x) = P(N(0,1) <= x) = erfc(z)/2, z = |x|/sqrt2 (for x < 0; 1 - that for x >= 0,
 * so the small tail keeps full relative accuracy: GELU(x) = x Phi(x)), written as
 * erfc(z) = t P(t) e, t = 1/(1 + z/2), e = e^(-z^2) = e^(-x^2/2): P is a degree-10 fit of
 * erfcx(z)/t over all of t in [0, 1] (z in [0, inf)), relative error 1.1e-8 in float64,
 * 1.8e-7 evaluated in float32. The factor e is the normal density's own exp (times
 * 1/sqrt(2 pi)), so GELU's derivative Phi + x pdf takes one exp, not two (Numerical
 * Recipes' erfc = t e^(q(t) - z^2) needed its own: the erf-GELU gradient took 1.64 ns an
 * element on one core, 1.09 without that exp). */
static inline float cpu_phi_e(float x, float e) {
    float z = fabsf(x) * 0.70710678118654752f;
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.042354002594947815f;
    p = p * t - 0.23086410760879517f;
    p = p * t + 0.4861913323402405f;
    p = p * t - 0.44699060916900635f;
    p = p * t + 0.12709775567054749f;
    p = p * t - 0.05723566189408302f;
    p = p * t + 0.09300131350755692f;
    p = p * t + 0.1753767430782318f;
    p = p * t + 0.24688059091567993f;
    p = p * t + 0.2820938527584076f;
    p = p * t + 0.282094806432724f;
    float half_erfc = 0.5f * t * p * e;
    return x < 0.0f ? half_erfc : 1.0f - half_erfc;
}

/* e^(-x^2/2), the exp that Phi and the normal density share */
static inline float cpu_gauss_e(float x) { return cpu_expf(-0.5f * x * x); }

static inline float cpu_phif(float x) { return cpu_phi_e(x, cpu_gauss_e(x)); }

static inline float cpu_sigmoidf(float x) { return 1.0f / (1.0f + cpu_expf(-x)); }

/* The activations and their derivatives, one definition for the elementwise kernels
 * (elementwise.c) and the fused passes (fuse.c), so both give the same bits. */
#define CPU_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define CPU_GELU_C 0.044715f
#define CPU_INV_SQRT_2PI 0.3989422804014327f

/* x < 0 ? 0 : x keeps NaN (as torch.relu does); fmaxf would turn it into 0 */
static inline float cpu_relu(float v) { return v < 0.0f ? 0.0f : v; }

/* 0.5 x (1 + tanh u) written as x sigmoid(2u): equal, without the cancellation of
 * 1 + tanh u for x << 0 */
static inline float cpu_gelu_tanh(float v) {
    return v * cpu_sigmoidf(2.0f * CPU_GELU_K * (v + CPU_GELU_C * v * v * v));
}

/* with s = sigmoid(2u) = (1 + tanh u) / 2 and 1 - tanh^2 u = 4 s (1 - s):
 * d/dx = s + 2 x s (1 - s) u'(x), u' = k (1 + 3 c x^2) */
static inline float cpu_gelu_tanh_grad(float dy, float v) {
    float v2 = v * v;
    float s = cpu_sigmoidf(2.0f * CPU_GELU_K * (v + CPU_GELU_C * v2 * v));
    return dy * (s + 2.0f * v * s * (1.0f - s) * CPU_GELU_K * (1.0f + 3.0f * CPU_GELU_C * v2));
}

static inline float cpu_gelu_erf(float v) { return v * cpu_phif(v); }

static inline float cpu_gelu_erf_grad(float dy, float v) {
    float e = cpu_gauss_e(v);
    return dy * (cpu_phi_e(v, e) + v * CPU_INV_SQRT_2PI * e);
}

static inline float cpu_silu(float x) { return x / (1.0f + cpu_expf(-x)); }

static inline float cpu_silu_grad(float dy, float x) {
    float s = cpu_sigmoidf(x);
    return dy * s * (1.0f + x * (1.0f - s));
}

/* The activations with a parameter, as torch.nn.functional computes them (and their
 * derivatives at the kinks as its backward kernels: leaky and ELU take the negative side's
 * at 0). */
static inline float cpu_leaky_relu(float x, float slope) { return x > 0.0f ? x : x * slope; }

/* (e^x - 1) alpha as PyTorch's kernel has it (not expm1: near 0 the result is within an ulp
 * of alpha of the true value, not of itself), so that a model matches PyTorch's bits closely */
static inline float cpu_elu(float x, float alpha) { return x > 0.0f ? x : (cpu_expf(x) - 1.0f) * alpha; }

static inline float cpu_elu_grad(float dy, float x, float alpha) {
    return x > 0.0f ? dy : dy * alpha * cpu_expf(x);
}

/* log(1 + e^z) / beta with z = beta x, x itself past the threshold. Above z = 30,
 * z + log(1 + e^-z) rounds to z in f32 (e^-30 < 2^-24 z), so z stands in for it and
 * e^z never overflows into the result. */
static inline float cpu_softplus(float x, float beta, float threshold) {
    float z = x * beta;
    float lp = z > 30.0f ? z : cpu_log1p_pos(cpu_expf(z));
    return z > threshold ? x : lp / beta;
}

/* d/dx = sigmoid(beta x) below the threshold (torch's e^z / (e^z + 1), written so that it
 * never divides inf by inf), 1 above it */
static inline float cpu_softplus_grad(float dy, float x, float beta, float threshold) {
    float z = x * beta;
    return z > threshold ? dy : dy * cpu_sigmoidf(z);
}

#endif
