/* The kernels' division by launch-time divisors (src/backend/cuda/fastdiv.h), on the host:
 * every divisor shape (1, powers of two and their neighbours, primes, 2^31) against / and %
 * over edge and random dividends up to 2^31 - 1. Needs no GPU; the same code runs on it. */
#include "backend/cuda/fastdiv.h"
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next31(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 33);
}

static int check(uint32_t d, uint32_t n) {
    cuk_div f = cuk_div_make(d);
    uint32_t q, r = cuk_div_qr(f, n, &q);
    if (q == n / d && r == n % d) return 1;
    fprintf(stderr, "%u / %u: got %u r %u, want %u r %u\n", n, d, q, r, n / d, n % d);
    return 0;
}

static void test_divisors(void) {
    uint32_t ds[200];
    int nd = 0;
    for (uint32_t d = 1; d <= 40; d++) ds[nd++] = d;
    for (int s = 5; s <= 31; s++) {
        ds[nd++] = (uint32_t)1 << s;
        ds[nd++] = ((uint32_t)1 << s) - 1;
        if (s < 31) ds[nd++] = ((uint32_t)1 << s) + 1;
    }
    uint32_t odd[] = {641, 6700417, 1000003, 3 * 7 * 11 * 13, 2147483647u, 65537, 48, 96, 768, 3072};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) ds[nd++] = odd[i];
    long bad = 0;
    for (int i = 0; i < nd; i++) {
        uint32_t d = ds[i];
        uint32_t edge[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0x7fffffffu, 0x7ffffffeu, 0x40000000u};
        for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++)
            if (edge[k] <= 0x7fffffffu) bad += !check(d, edge[k]);
        for (int k = 0; k < 20000; k++) bad += !check(d, next31());
        for (uint32_t m = 1; m < 64 && (uint64_t)m * d <= 0x7fffffffu; m++) {
            bad += !check(d, m * d - 1);
            bad += !check(d, m * d);
        }
    }
    CHECKF(bad == 0, "%ld wrong quotients", bad);
}

TEST_MAIN(T(test_divisors))
