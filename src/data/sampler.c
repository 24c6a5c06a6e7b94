/* Seeded permutations: the train/validation split and the per-epoch sample order. Both
 * are Fisher-Yates shuffles whose draws come from Philox with key = seed and counter =
 * {block lo, block hi, stream, epoch}, so an order is a pure function of its inputs and
 * resuming at (epoch, position) needs no saved RNG state. */
#include "brisk/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Streams keep the split's permutation independent of every epoch's order. */
enum { STREAM_SPLIT = 0x53504c54u /* "SPLT" */, STREAM_SAMPLER = 0x53414d50u /* "SAMP" */ };

/* High 64 bits of a 64x64 product, portably. */
static uint64_t mulhi64(uint64_t a, uint64_t b) {
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

brisk_status brisk_permutation(int64_t n, uint64_t seed, uint32_t stream, uint64_t epoch, int64_t *out,
                               brisk_error *err) {
    if (n < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "permutation: negative length %lld", (long long)n);
    for (int64_t i = 0; i < n; i++) out[i] = i;
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t words[4];
    /* Draw t (for i = n-1 .. 1) takes 64 bits: words 2(t%2), 2(t%2)+1 of block t/2.
     * Scaling a 64-bit draw by (i+1) has a bias below n/2^64: none that matters. */
    for (int64_t i = n - 1, t = 0; i > 0; i--, t++) {
        if ((t & 1) == 0) {
            uint64_t block = (uint64_t)t >> 1;
            const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), stream, (uint32_t)epoch};
            brisk_philox4x32(ctr, key, words);
        }
        int w = (int)(t & 1) * 2;
        uint64_t r = ((uint64_t)words[w] << 32) | words[w + 1];
        int64_t j = (int64_t)mulhi64(r, (uint64_t)i + 1);
        int64_t tmp = out[i];
        out[i] = out[j];
        out[j] = tmp;
    }
    return BRISK_OK;
}

brisk_status brisk_split_make(int64_t n, double validation_fraction, uint64_t seed, brisk_split *out,
                              brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (n <= 0) return brisk_errorf(err, BRISK_ERR_INVALID, "split: %lld samples; expected at least 1", (long long)n);
    if (!(validation_fraction >= 0.0 && validation_fraction < 1.0))
        return brisk_errorf(err, BRISK_ERR_INVALID, "split: validation_fraction %g; expected a value in [0, 1)",
                            validation_fraction);
    int64_t nval = (int64_t)llround((double)n * validation_fraction);
    if (nval >= n) nval = n - 1;
    int64_t *perm = malloc((size_t)n * sizeof *perm), *val = malloc((size_t)(nval ? nval : 1) * sizeof *val);
    if (!perm || !val) {
        free(perm);
        free(val);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "split: cannot allocate %lld indices", (long long)n);
    }
    brisk_permutation(n, seed, STREAM_SPLIT, 0, perm, err);
    memcpy(val, perm + (n - nval), (size_t)nval * sizeof *val);
    out->train = perm; /* the first n - nval entries; the tail is simply unused */
    out->ntrain = n - nval;
    out->val = val;
    out->nval = nval;
    return BRISK_OK;
}

void brisk_split_free(brisk_split *s) {
    if (!s) return;
    free(s->train);
    free(s->val);
    memset(s, 0, sizeof *s);
}

brisk_status brisk_sampler_order(const int64_t *subset, int64_t n, uint64_t seed, uint64_t epoch, int shuffle,
                                 int64_t *out, brisk_error *err) {
    if (n < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "sampler: negative length %lld", (long long)n);
    if (!shuffle) {
        for (int64_t k = 0; k < n; k++) out[k] = subset ? subset[k] : k;
        return BRISK_OK;
    }
    brisk_status st = brisk_permutation(n, seed, STREAM_SAMPLER, epoch, out, err);
    if (!st && subset)
        for (int64_t k = 0; k < n; k++) out[k] = subset[out[k]];
    return st;
}
