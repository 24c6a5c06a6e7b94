/* Split and sampler: permutations are permutations, uniform, deterministic in (seed,
 * epoch), different across epochs and seeds; the split is disjoint and complete. */
#include "brisk/data.h"
#include "test.h"

#include <stdint.h>

#pragma GCC diagnostic ignored "-Waddress" /* REQUIRE_OK(call, &err) */

static int is_perm(const int64_t *p, int64_t n) {
    char *seen = calloc((size_t)n + 1, 1);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]]) ok = 0;
        else seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_permutation(void) {
    brisk_error err;
    int64_t sizes[] = {0, 1, 2, 3, 10, 1000, 100003};
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        int64_t *a = malloc((size_t)(n + 1) * 8), *b = malloc((size_t)(n + 1) * 8), *c = malloc((size_t)(n + 1) * 8);
        REQUIRE_OK(brisk_sampler_order(NULL, n, 42, 3, 1, a, &err), &err);
        REQUIRE_OK(brisk_sampler_order(NULL, n, 42, 3, 1, b, &err), &err);
        CHECKF(is_perm(a, n), "n=%lld", (long long)n);
        CHECK(memcmp(a, b, (size_t)n * 8) == 0);
        if (n >= 10) {
            REQUIRE_OK(brisk_sampler_order(NULL, n, 42, 4, 1, c, &err), &err);
            CHECK(memcmp(a, c, (size_t)n * 8) != 0); /* another epoch */
            REQUIRE_OK(brisk_sampler_order(NULL, n, 43, 3, 1, c, &err), &err);
            CHECK(memcmp(a, c, (size_t)n * 8) != 0); /* another seed */
            int64_t fixed = 0;
            for (int64_t i = 0; i < n; i++) fixed += a[i] == i;
            CHECK(fixed < 10); /* ~1 expected for a random permutation */
        }
        REQUIRE_OK(brisk_sampler_order(NULL, n, 42, 3, 0, c, &err), &err);
        for (int64_t i = 0; i < n; i++) CHECK(c[i] == i);
        free(a);
        free(b);
        free(c);
    }
    /* Seeds differing only in the high word give different orders. */
    int64_t a[50], b[50];
    REQUIRE_OK(brisk_sampler_order(NULL, 50, 1, 0, 1, a, &err), &err);
    REQUIRE_OK(brisk_sampler_order(NULL, 50, 1 | (1ull << 32), 0, 1, b, &err), &err);
    CHECK(memcmp(a, b, sizeof a) != 0);
    CHECK(brisk_permutation(-1, 0, 0, 0, a, &err) == BRISK_ERR_INVALID);
}

/* All 24 orders of 4 elements appear about equally often over many epochs (Fisher-Yates
 * done right; a classic off-by-one gives a visibly skewed histogram). */
static void test_uniform(void) {
    brisk_error err;
    enum { E = 24000 };
    int counts[256] = {0};
    for (uint64_t e = 0; e < E; e++) {
        int64_t p[4];
        REQUIRE_OK(brisk_sampler_order(NULL, 4, 7, e, 1, p, &err), &err);
        counts[p[0] * 64 + p[1] * 16 + p[2] * 4 + p[3]]++;
    }
    int distinct = 0;
    double chi2 = 0;
    for (int k = 0; k < 256; k++)
        if (counts[k]) {
            distinct++;
            chi2 += (counts[k] - 1000.0) * (counts[k] - 1000.0) / 1000.0;
        }
    CHECK(distinct == 24);
    CHECKF(chi2 < 60, "chi2 %.1f over 23 degrees of freedom", chi2); /* p < 1e-4 */
}

static void test_subset(void) {
    brisk_error err;
    int64_t subset[6] = {100, 3, 57, 8, 42, 11}, out[6];
    REQUIRE_OK(brisk_sampler_order(subset, 6, 9, 0, 1, out, &err), &err);
    int64_t sum = 0;
    for (int i = 0; i < 6; i++) {
        int found = 0;
        for (int j = 0; j < 6; j++) found += out[i] == subset[j];
        CHECK(found == 1);
        sum += out[i];
    }
    CHECK(sum == 100 + 3 + 57 + 8 + 42 + 11);
    REQUIRE_OK(brisk_sampler_order(subset, 6, 9, 0, 0, out, &err), &err);
    CHECK(memcmp(out, subset, sizeof out) == 0);
}

static void test_split(void) {
    brisk_error err;
    brisk_split s, t;
    REQUIRE_OK(brisk_split_make(1000, 0.2, 5, &s, &err), &err);
    CHECK(s.ntrain == 800 && s.nval == 200);
    char seen[1000] = {0};
    for (int64_t i = 0; i < s.ntrain; i++) seen[s.train[i]]++;
    for (int64_t i = 0; i < s.nval; i++) seen[s.val[i]]++;
    int all_once = 1;
    for (int i = 0; i < 1000; i++) all_once &= seen[i] == 1;
    CHECK(all_once); /* disjoint and complete */
    REQUIRE_OK(brisk_split_make(1000, 0.2, 5, &t, &err), &err);
    CHECK(memcmp(s.train, t.train, 800 * 8) == 0 && memcmp(s.val, t.val, 200 * 8) == 0);
    brisk_split_free(&t);
    REQUIRE_OK(brisk_split_make(1000, 0.2, 6, &t, &err), &err);
    CHECK(memcmp(s.val, t.val, 200 * 8) != 0);
    brisk_split_free(&t);
    /* The split is not the epoch-0 sampler order (separate Philox streams). */
    int64_t *o = malloc(1000 * 8);
    REQUIRE_OK(brisk_sampler_order(NULL, 1000, 5, 0, 1, o, &err), &err);
    CHECK(memcmp(o, s.train, 800 * 8) != 0);
    free(o);
    brisk_split_free(&s);

    REQUIRE_OK(brisk_split_make(7, 0.0, 1, &s, &err), &err);
    CHECK(s.ntrain == 7 && s.nval == 0);
    brisk_split_free(&s);
    REQUIRE_OK(brisk_split_make(10, 0.25, 1, &s, &err), &err);
    CHECK(s.ntrain == 7 && s.nval == 3); /* round(2.5) = 3 */
    brisk_split_free(&s);
    REQUIRE_OK(brisk_split_make(2, 0.9, 1, &s, &err), &err);
    CHECK(s.ntrain == 1 && s.nval == 1); /* at least one training sample */
    brisk_split_free(&s);
    CHECK(brisk_split_make(10, 1.0, 1, &s, &err) == BRISK_ERR_INVALID && strstr(err.msg, "[0, 1)"));
    CHECK(brisk_split_make(10, NAN, 1, &s, &err) == BRISK_ERR_INVALID);
    CHECK(brisk_split_make(0, 0.1, 1, &s, &err) == BRISK_ERR_INVALID);
}

TEST_MAIN(T(test_permutation), T(test_uniform), T(test_subset), T(test_split))
