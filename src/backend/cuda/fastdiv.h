/* Division by a divisor fixed at launch (1 <= d <= 2^31) of an index n < 2^31 as one
 * multiply-high, an add and a shift (Granlund & Montgomery, "Division by invariant integers
 * using multiplication"): the kernels' index math (flat index -> coordinates of a strided
 * view, row and column of an element) without 64-bit division, which the GPU emulates in
 * dozens of instructions. The host builds the divisor; kernels take the fast path when the
 * element count fits 31 bits and keep 64-bit division otherwise. Plain C, so the host test
 * (tests/backend/test_cuda_fastdiv.c) checks it without a GPU. */
#ifndef BRISK_CUDA_FASTDIV_H
#define BRISK_CUDA_FASTDIV_H

#include <stdint.h>

#ifdef __CUDACC__
#define CUK_HD __host__ __device__
#else
#define CUK_HD
#endif

typedef struct cuk_div {
    uint32_t d, mul, shift;
} cuk_div;

/* the largest count the fast path takes */
#define CUK_FAST_MAX ((int64_t)0x7fffffff)

static inline cuk_div cuk_div_make(uint32_t d) {
    cuk_div f;
    f.d = d ? d : 1;
    f.shift = 0;
    while (f.shift < 32 && ((uint64_t)1 << f.shift) < f.d) f.shift++;
    f.mul = (uint32_t)(((((uint64_t)1 << f.shift) - f.d) << 32) / f.d + 1);
    return f;
}

/* n / d for n < 2^31 (t <= n, so t + n does not overflow) */
CUK_HD static inline uint32_t cuk_div_q(cuk_div f, uint32_t n) {
#ifdef __CUDA_ARCH__
    uint32_t t = __umulhi(n, f.mul);
#else
    uint32_t t = (uint32_t)(((uint64_t)n * f.mul) >> 32);
#endif
    return (t + n) >> f.shift;
}

/* n / d into *q, returns n % d */
CUK_HD static inline uint32_t cuk_div_qr(cuk_div f, uint32_t n, uint32_t *q) {
    *q = cuk_div_q(f, n);
    return n - *q * f.d;
}

#endif
