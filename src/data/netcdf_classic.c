/* A structural check of a classic NetCDF header (CDF-1, CDF-2, CDF-5) held in memory,
 * before libnetcdf parses it: every count and length must fit in the bytes that are
 * there, and every variable's data must lie inside the buffer. libnetcdf 4.9 allocates
 * what a header's counts say before comparing them with the size (a 4 GiB calloc from a
 * 700-byte file, found by fuzz_netcdf), so a corrupt buffer gets this clear error instead.
 * Format: https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html */
#include "data/netcdf_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct cursor {
    const unsigned char *p;
    size_t len, at;
    int v5;         /* CDF-5: 8-byte counts */
    const char *name;
    brisk_error *err;
    brisk_status st;
} cursor;

static brisk_status bad(cursor *c, const char *what) {
    if (!c->st)
        c->st = brisk_errorf(c->err, BRISK_ERR_FORMAT, "%s: not a valid NetCDF file: %s at byte %zu of %zu", c->name, what,
                             c->at, c->len);
    return c->st;
}

static uint64_t be(cursor *c, int bytes) {
    if (c->st || c->len - c->at < (size_t)bytes) return bad(c, "the header ends early"), 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | c->p[c->at + i];
    c->at += (size_t)bytes;
    return v;
}

static uint64_t count(cursor *c) { return be(c, c->v5 ? 8 : 4); }

static void skip(cursor *c, uint64_t n, const char *what) {
    uint64_t padded = (n + 3) & ~(uint64_t)3;
    if (c->st || n > c->len || padded > c->len - c->at) bad(c, what);
    else c->at += (size_t)padded;
}

static size_t type_size(uint64_t t) {
    static const size_t sizes[12] = {0, 1, 1, 2, 4, 4, 8, 1, 2, 4, 8, 8};
    return t < 12 ? sizes[t] : 0;
}

/* An attribute list: ABSENT (0, 0) or NC_ATTRIBUTE (12) n [name type n values]. */
static void atts(cursor *c) {
    uint64_t tag = be(c, 4), n = count(c);
    if (tag == 0 && n == 0) return;
    if (tag != 12 || n > c->len) { bad(c, "an attribute list"); return; }
    for (uint64_t i = 0; i < n && !c->st; i++) {
        skip(c, count(c), "an attribute name");
        uint64_t t = be(c, 4), k = count(c);
        size_t s = type_size(t);
        if (!s || (!c->v5 && t > 6)) { bad(c, "an attribute type"); return; }
        if (k > c->len / s) { bad(c, "an attribute length"); return; }
        skip(c, k * s, "attribute values");
    }
}

brisk_status netcdf_classic_check(const void *buf, size_t len, const char *name, brisk_error *err) {
    cursor c = {buf, len, 0, 0, name, err, BRISK_OK};
    if (len < 4 || memcmp(buf, "CDF", 3) != 0) return BRISK_OK; /* not classic: libnetcdf decides */
    int ver = c.p[3];
    if (ver != 1 && ver != 2 && ver != 5) return bad(&c, "an unknown classic version");
    c.v5 = ver == 5;
    c.at = 4;
    uint64_t numrecs = count(&c);
    /* dimensions: ABSENT or NC_DIMENSION (10) n [name length]; length 0 is the record one */
    uint64_t tag = be(&c, 4), ndims = count(&c), dimlen[1024];
    if (!(tag == 0 && ndims == 0) && (tag != 10 || ndims > 1024)) return bad(&c, "the dimension list");
    for (uint64_t i = 0; i < ndims && !c.st; i++) {
        skip(&c, count(&c), "a dimension name");
        dimlen[i] = count(&c);
    }
    atts(&c);
    tag = be(&c, 4);
    uint64_t nvars = count(&c), recsize = 0;
    if (!(tag == 0 && nvars == 0) && (tag != 11 || nvars > len)) return bad(&c, "the variable list");
    for (uint64_t i = 0; i < nvars && !c.st; i++) {
        skip(&c, count(&c), "a variable name");
        uint64_t nd = count(&c), elems = 1;
        int record = 0;
        if (nd > 1024) return bad(&c, "a variable's dimension count");
        for (uint64_t d = 0; d < nd && !c.st; d++) {
            uint64_t id = count(&c);
            if (id >= ndims) return bad(&c, "a variable's dimension id");
            if (dimlen[id] == 0 && d == 0) record = 1;
            else if (dimlen[id] && elems > len / dimlen[id]) return bad(&c, "a variable's size");
            else elems *= dimlen[id] ? dimlen[id] : 1;
        }
        atts(&c);
        uint64_t t = be(&c, 4);
        size_t s = type_size(t);
        if (c.st || !s || (!c.v5 && t > 6) || elems > len / s) return bad(&c, "a variable's type or size");
        count(&c); /* vsize: recomputed above (it may be clamped in the file) */
        uint64_t begin = be(&c, ver == 1 ? 4 : 8), bytes = elems * s;
        if (c.st) break;
        if (begin > len || bytes > len - begin) return bad(&c, "a variable's data outside the file");
        if (record) recsize += (bytes + 3) & ~(uint64_t)3;
    }
    if (!c.st && recsize && numrecs != 0xFFFFFFFFu && numrecs > len / recsize) return bad(&c, "the record count");
    return c.st;
}
