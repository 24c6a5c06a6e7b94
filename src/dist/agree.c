/* The ranks' agreement (dist.h, brisk_dist_agreement) and the size check of the sized
 * collectives.
 *
 * Each rank digests its entries into a fixed record (a sum of per-entry hashes, so the order
 * of the entries does not matter: a key one rank's config wrote out and another's took as a
 * default comes at another place of the list), and every rank gathers every record. Equal
 * records end it: one small collective. Otherwise every rank gathers every rank's entries too
 * and, holding the same bytes, forms the same message; the error is every rank's, so none
 * waits for another (failed_together) and the job ends without an abort.
 *
 * The size check exists because an MPI collective whose ranks pass different counts is
 * erroneous, and Open MPI then writes past the smaller rank's buffer (seen: a model of
 * another shape on one rank, 17,740 bytes into a 17,600-byte gradient arena, from
 * MPI_Testall). Sizes are agreed once per layout, not per call: a step's all-reduce then
 * costs one hash of its bucket table. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

void brisk_dist_agreement_add(brisk_dist_agreement *a, const char *key, const char *note, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (a->oom || n < 0) {
        a->oom = 1;
        return;
    }
    if (!note) note = "";
    size_t klen = strlen(key), vlen = (size_t)n, nlen = strlen(note);
    size_t need = a->len + klen + vlen + nlen + 4; /* two tabs, a newline, the NUL */
    if (need > a->cap) {
        size_t cap = a->cap ? a->cap : 4096;
        while (cap < need) cap *= 2;
        char *p = realloc(a->text, cap);
        if (!p) {
            a->oom = 1;
            return;
        }
        a->text = p, a->cap = cap;
    }
    char *e = a->text + a->len;
    memcpy(e, key, klen);
    va_start(ap, fmt);
    vsnprintf(e + klen + 1, vlen + 1, fmt, ap);
    va_end(ap);
    memcpy(e + klen + vlen + 2, note, nlen);
    e[klen] = e[klen + vlen + 1] = '\t';
    e[klen + vlen + nlen + 2] = '\n';
    /* a tab or newline inside a part would end it: a space instead */
    size_t from[3] = {0, klen + 1, klen + vlen + 2}, len[3] = {klen, vlen, nlen};
    for (int k = 0; k < 3; k++)
        for (size_t i = from[k]; i < from[k] + len[k]; i++)
            if (e[i] == '\t' || e[i] == '\n') e[i] = ' ';
    a->len += klen + vlen + nlen + 3;
    a->text[a->len] = 0;
}

void brisk_dist_agreement_free(brisk_dist_agreement *a) {
    free(a->text);
    *a = (brisk_dist_agreement){0};
}

static uint64_t mix64(uint64_t x) { /* splitmix64's finaliser */
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27, x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}
#define FNV_BASIS 0xcbf29ce484222325u

typedef struct entry {
    const char *key, *value, *note;
    int klen, vlen, nlen;
} entry;

/* The entry at text[*pos] (key, value and note as the format writes them), *pos advanced;
 * 0 at the end. */
static int next_entry(const char *text, size_t len, size_t *pos, entry *e) {
    const char *p = text + *pos, *end = text + len, *part[3];
    int plen[3];
    if (p >= end || !*p) return 0;
    for (int i = 0; i < 3; i++) {
        const char *q = p;
        while (q < end && *q && *q != (i < 2 ? '\t' : '\n')) q++;
        part[i] = p, plen[i] = (int)(q - p);
        p = q < end && *q ? q + 1 : q;
    }
    *e = (entry){part[0], part[1], part[2], plen[0], plen[1], plen[2]};
    *pos = (size_t)(p - text);
    return 1;
}

static int find_entry(const char *text, size_t len, const entry *like, entry *out) {
    size_t pos = 0;
    while (next_entry(text, len, &pos, out))
        if (out->klen == like->klen && memcmp(out->key, like->key, (size_t)like->klen) == 0) return 1;
    return 0;
}

typedef struct digest {
    uint64_t sum, count, len; /* count UINT64_MAX: this rank ran out of memory listing its entries */
} digest;

static digest digest_of(const brisk_dist_agreement *a) {
    digest g = {0, 0, a->len};
    if (a->oom) return (digest){0, UINT64_MAX, 0};
    if (!a->text) return g;
    size_t pos = 0;
    entry e;
    while (next_entry(a->text, a->len, &pos, &e)) {
        uint64_t h = fnv1a(FNV_BASIS, e.key, (size_t)e.klen);
        h = fnv1a(h, "\t", 1);
        g.sum += mix64(fnv1a(h, e.value, (size_t)e.vlen));
        g.count++;
    }
    return g;
}

static int same_digest(const digest *a, const digest *b) {
    return a->sum == b->sum && a->count == b->count && a->len == b->len;
}

/* " has VALUE (NOTE)", at most ~200 bytes of the value */
static void value_text(const entry *e, char *out, size_t cap) {
    if (!e) {
        snprintf(out, cap, " has no such entry");
        return;
    }
    int v = e->vlen > 200 ? 197 : e->vlen, n = e->nlen > 160 ? 157 : e->nlen;
    snprintf(out, cap, " has %.*s%s%s%.*s%s%s", v, e->value, v < e->vlen ? "..." : "", n ? " (" : "", n, e->note,
             n < e->nlen ? "..." : "", n ? ")" : "");
}

/* The first entry rank 0 and rank r hold differently (rank 0's order, then what r alone has). */
static void first_difference(const char *t0, size_t l0, const char *tr, size_t lr, int r, char *out, size_t cap) {
    entry a, b;
    size_t pos = 0;
    int found = 0, ha = 0, hb = 0;
    while (!found && next_entry(t0, l0, &pos, &a)) {
        hb = find_entry(tr, lr, &a, &b);
        found = !hb || b.vlen != a.vlen || memcmp(a.value, b.value, (size_t)a.vlen) != 0;
        ha = 1;
    }
    for (pos = 0; !found && next_entry(tr, lr, &pos, &b);) {
        entry tmp;
        found = !find_entry(t0, l0, &b, &tmp);
        ha = 0, hb = 1;
    }
    if (!found) {
        snprintf(out, cap, "ranks disagree: rank 0 and rank %d list the same entries, yet their digests differ", r);
        return;
    }
    const entry *k = ha ? &a : &b;
    char v0[512], vr[512];
    value_text(ha ? &a : NULL, v0, sizeof v0);
    value_text(hb ? &b : NULL, vr, sizeof vr);
    int kl = k->klen > 160 ? 160 : k->klen;
    snprintf(out, cap, "ranks disagree on %.*s: rank 0%s, rank %d%s", kl, k->key, v0, r, vr);
}

/* "; ranks 2, 5 also differ from rank 0" for the ranks other than r that differ */
static void also_differ(const digest *all, int world, int r, char *out, size_t cap) {
    size_t len = 0;
    int n = 0;
    out[0] = 0;
    for (int i = r + 1; i < world; i++) {
        if (same_digest(&all[i], &all[0])) continue;
        if (n < 8) len += (size_t)snprintf(out + len, cap - len, "%s%d", n ? ", " : "", i);
        else if (n == 8) len += (size_t)snprintf(out + len, cap - len, ", ...");
        n++;
        if (len >= cap) return;
    }
    if (n) {
        char ranks[160];
        snprintf(ranks, sizeof ranks, "%s", out);
        snprintf(out, cap, "; rank%s %s also differ%s from rank 0", n == 1 ? "" : "s", ranks, n == 1 ? "s" : "");
    }
}

/* Every rank's entries (each padded to the longest), then the message every rank forms alike. */
static brisk_status compare_entries(brisk_dist *d, const brisk_dist_agreement *a, const digest *all, int r,
                                    const char *what, brisk_error *err) {
    int world = d->world;
    uint64_t longest = 0;
    for (int i = 0; i < world; i++) {
        if (all[i].count == UINT64_MAX)
            return brisk_errorf(err, BRISK_ERR_NOMEM, "rank %d ran out of memory listing what the ranks must agree on", i);
        if (all[i].len > longest) longest = all[i].len;
    }
    size_t each = (size_t)longest + 1;
    if (each > (size_t)1 << 30 || each * (size_t)world > ((size_t)1 << 31) - 1)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "ranks disagree on %s, and their entries (%llu bytes) are too long "
                            "to compare", what, (unsigned long long)longest);
    char *mine = calloc(each, 1), *texts = malloc(each * (size_t)world);
    brisk_status st = mine && texts ? BRISK_OK : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory comparing the ranks");
    if (!st) {
        if (a->len) memcpy(mine, a->text, a->len);
        st = brisk_dist_mpi_allgather_bytes(d, mine, texts, each, what, err);
    }
    if (!st) {
        char first[800], more[200];
        first_difference(texts, (size_t)all[0].len, texts + each * (size_t)r, (size_t)all[r].len, r, first, sizeof first);
        also_differ(all, world, r, more, sizeof more);
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s%s", first, more);
    }
    free(mine), free(texts);
    return st;
}

brisk_status brisk_dist_agreement_check(brisk_dist *d, const brisk_dist_agreement *a, const char *what,
                                        brisk_error *err) {
    if (!d || d->world == 1) return BRISK_OK;
    digest mine = digest_of(a), *all = malloc(sizeof *all * (size_t)d->world);
    if (!all) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory agreeing with the other ranks");
    brisk_status st = brisk_dist_mpi_allgather_bytes(d, &mine, all, sizeof mine, what, err);
    int r = 1;
    while (!st && r < d->world && same_digest(&all[r], &all[0])) r++;
    if (!st && r < d->world) {
        st = compare_entries(d, a, all, r, what, err);
        /* every rank gathered the same records: the same error, unless gathering failed */
        if (st && !d->broken) d->failed_together = 1;
    }
    free(all);
    return st;
}

brisk_status brisk_dist_check_sizes(brisk_dist *d, const char *what, int64_t n, const brisk_dist_bucket *b, int64_t nb,
                                    int64_t per, brisk_error *err) {
    if (!d || d->world == 1) return BRISK_OK;
    /* order matters: the ranks' k-th collectives are matched */
    const int shards = !b && per <= 0;
    uint64_t h = fnv1a(FNV_BASIS, &shards, sizeof shards);
    h = fnv1a(h, &n, sizeof n);
    int64_t count = 0, outside = -1;
    for (int64_t i = 0, off = 0; !shards && (b ? i < nb : off < n); i++) {
        int64_t o = b ? b[i].offset : off, c = b ? b[i].count : (n - off < per ? n - off : per);
        if (outside < 0 && (o < 0 || c < 0 || o > n - c)) outside = i;
        h = fnv1a(fnv1a(h, &o, sizeof o), &c, sizeof c);
        off += per, count++;
    }
    int known = 0;
    for (int i = 0; i < d->n_agreed_sizes; i++) known |= d->agreed_sizes[i] == h;
    if (!known) {
        brisk_dist_agreement a = {0};
        char key[160], why[200];
        snprintf(key, sizeof key, "the sizes of the %s", what);
        snprintf(why, sizeof why, "agreement on the sizes of the %s", what);
        if (shards) brisk_dist_agreement_add(&a, key, NULL, "%lld floats in shards", (long long)n);
        else
            brisk_dist_agreement_add(&a, key, NULL, "%lld floats in %lld bucket%s (layout %016" PRIx64 ")%s",
                                     (long long)n, (long long)count, count == 1 ? "" : "s", h,
                                     outside >= 0 ? ", one outside them" : "");
        brisk_status st = brisk_dist_agreement_check(d, &a, why, err);
        brisk_dist_agreement_free(&a);
        if (st) return st;
        if (d->n_agreed_sizes == 4) /* the oldest goes */
            memmove(d->agreed_sizes, d->agreed_sizes + 1, 3 * sizeof *d->agreed_sizes), d->n_agreed_sizes = 3;
        d->agreed_sizes[d->n_agreed_sizes++] = h;
    }
    if (outside < 0) return BRISK_OK;
    d->failed_together = 1; /* the ranks agreed on these sizes, the bucket outside them included */
    return brisk_errorf(err, BRISK_ERR_INVALID, "the %s: bucket %lld lies outside its %lld floats", what,
                        (long long)outside, (long long)n);
}
