/* Episodic sampling for few-shot (category-agnostic) training: categories with at least
 * K + Q samples are indexed once; episode e draws one of them and K + Q distinct members
 * by rejection, all from Philox keyed by the seed with counter
 * {episode lo, episode hi, stream, draw}, so an episode is a pure function of (seed, e). */
#include "brisk/data.h"

#include <stdlib.h>
#include <string.h>

enum { STREAM_EPISODE = 0x45504953u /* "EPIS" */ };

void brisk_episodes_free(brisk_episodes *e) {
    if (!e) return;
    free(e->cat);
    free(e->start);
    free(e->members);
    memset(e, 0, sizeof *e);
}

typedef struct pair { int32_t cat; int64_t i; } pair;

static int cmp_pair(const void *a, const void *b) {
    const pair *x = (const pair *)a, *y = (const pair *)b;
    if (x->cat != y->cat) return (x->cat > y->cat) - (x->cat < y->cat);
    return (x->i > y->i) - (x->i < y->i);
}

brisk_status brisk_episodes_init(brisk_episodes *e, const int32_t *category, const int64_t *subset, int64_t n, int k,
                                 int q, brisk_error *err) {
    memset(e, 0, sizeof *e);
    if (k < 1 || q < 0 || k > 1 << 20 || q > 1 << 20 || n < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "episodes: %d support and %d query samples from %lld; expected "
                            "support >= 1, query >= 0 and some samples", k, q, (long long)n);
    pair *p = malloc((size_t)n * sizeof *p);
    e->members = malloc((size_t)n * sizeof *e->members);
    e->cat = malloc((size_t)n * sizeof *e->cat);
    e->start = malloc((size_t)(n + 1) * sizeof *e->start);
    if (!p || !e->members || !e->cat || !e->start) {
        free(p);
        brisk_episodes_free(e);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "episodes: out of memory for %lld samples", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t s = subset ? subset[i] : i;
        p[i] = (pair){category[s], s};
    }
    qsort(p, (size_t)n, sizeof *p, cmp_pair);
    int64_t m = 0, largest = 0;
    for (int64_t a = 0, b; a < n; a = b) {
        for (b = a; b < n && p[b].cat == p[a].cat; b++) {}
        if (b - a > largest) largest = b - a;
        if (b - a < (int64_t)k + q) continue;
        e->cat[e->ncat] = p[a].cat;
        e->start[e->ncat++] = m;
        for (int64_t j = a; j < b; j++) e->members[m++] = p[j].i;
    }
    e->start[e->ncat] = m;
    free(p);
    e->k = k;
    e->q = q;
    if (e->ncat == 0) {
        brisk_episodes_free(e);
        return brisk_errorf(err, BRISK_ERR_INVALID, "episodes: no category has %d samples (support %d + query %d); the "
                            "largest has %lld", k + q, k, q, (long long)largest);
    }
    return BRISK_OK;
}

/* Draw t of an episode: a 32-bit word; block t/4. */
static uint32_t draw(uint64_t seed, uint64_t episode, uint32_t t, uint32_t *words, uint32_t *have) {
    if (t / 4 != *have) {
        const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        const uint32_t ctr[4] = {(uint32_t)episode, (uint32_t)(episode >> 32), STREAM_EPISODE, t / 4};
        brisk_philox4x32(ctr, key, words);
        *have = t / 4;
    }
    return words[t % 4];
}

/* Uniform in [0, n) from a 32-bit draw (bias below n / 2^32). */
static int64_t below(uint32_t r, int64_t n) { return (int64_t)(((uint64_t)r * (uint64_t)n) >> 32); }

void brisk_episodes_draw(const brisk_episodes *e, uint64_t seed, uint64_t episode, int64_t *support, int64_t *query,
                         int32_t *category) {
    uint32_t words[4], have = UINT32_MAX, t = 0;
    int c = (int)below(draw(seed, episode, t++, words, &have), e->ncat);
    int64_t base = e->start[c], size = e->start[c + 1] - base;
    /* K + Q distinct members by rejection: a category holds at least K + Q, and episodes
     * are small, so the quadratic check costs nothing and nothing is allocated. */
    int need = e->k + e->q;
    for (int j = 0; j < need; j++) {
        int64_t idx;
        int dup;
        do {
            idx = e->members[base + below(draw(seed, episode, t++, words, &have), size)];
            dup = 0;
            for (int i = 0; i < j && !dup; i++) dup = (i < e->k ? support[i] : query[i - e->k]) == idx;
        } while (dup);
        if (j < e->k) support[j] = idx;
        else query[j - e->k] = idx;
    }
    if (category) *category = e->cat[c];
}
