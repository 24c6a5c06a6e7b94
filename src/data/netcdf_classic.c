/* A structural check of a classic NetCDF header (CDF-1, CDF-2, CDF-5), before libnetcdf
 * parses it: every count and length must fit in the file, and the file must hold all the
 * data its header describes. libnetcdf 4.9 allocates what a header's counts say before
 * comparing them with the size (a 4 GiB calloc from a 700-byte file, found by
 * fuzz_netcdf), and it reads zeros past the end of a short classic file (a copy cut off
 * trains on add_offset and zero orography, silently), so such files get a clear error.
 * Format: https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html */
#include "data/bytes.h"
#include "data/netcdf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const unsigned char *p;
    size_t len, at;     /* the header bytes held: all of the file, or its start */
    uint64_t file_len;  /* counts and data extents are bounded by the whole file */
    int v5;             /* CDF-5: 8-byte counts */
    int want_more;      /* the header runs past the bytes held, and the file goes on */
    const char *name;
    brisk_error *err;
    brisk_status st;
} cursor;

static brisk_status bad(cursor *c, const char *what) {
    if (!c->st)
        c->st = brisk_errorf(c->err, BRISK_ERR_FORMAT, "%s: not a valid NetCDF file: %s at byte %zu of %llu", c->name, what,
                             c->at, (unsigned long long)c->file_len);
    return c->st;
}

/* The header ends early: in the bytes held only (read more), or in the file. */
static void ran_out(cursor *c, uint64_t need, const char *what) {
    if (need <= c->file_len - c->at) c->want_more = 1;
    bad(c, c->want_more ? what : "the header ends early (a truncated file)");
}

static uint64_t be(cursor *c, int bytes) {
    if (c->st) return 0;
    if (c->len - c->at < (size_t)bytes) return ran_out(c, (uint64_t)bytes, "the header"), 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | c->p[c->at + i];
    c->at += (size_t)bytes;
    return v;
}

static uint64_t count(cursor *c) { return be(c, c->v5 ? 8 : 4); }

static void skip(cursor *c, uint64_t n, const char *what) {
    if (c->st) return;
    if (n > c->file_len) { bad(c, what); return; }
    uint64_t padded = (n + 3) & ~(uint64_t)3;
    if (padded > c->len - c->at) ran_out(c, padded, what);
    else c->at += (size_t)padded;
}

static size_t type_size(uint64_t t) {
    static const size_t sizes[12] = {0, 1, 1, 2, 4, 4, 8, 1, 2, 4, 8, 8};
    return t < 12 ? sizes[t] : 0;
}

/* An attribute list: ABSENT (0, 0) or NC_ATTRIBUTE (12) n [name type n values]. */
static void atts(cursor *c) {
    uint64_t tag = be(c, 4), n = count(c);
    if (c->st || (tag == 0 && n == 0)) return;
    if (tag != 12 || n > c->file_len) { bad(c, "an attribute list"); return; }
    for (uint64_t i = 0; i < n && !c->st; i++) {
        skip(c, count(c), "an attribute name");
        uint64_t t = be(c, 4), k = count(c);
        if (c->st) return;
        size_t s = type_size(t);
        if (!s || (!c->v5 && t > 6)) { bad(c, "an attribute type"); return; }
        if (k > c->file_len / s) { bad(c, "an attribute length"); return; }
        skip(c, k * s, "attribute values");
    }
}

/* a * b + c, or UINT64_MAX when it overflows */
static uint64_t mul_add(uint64_t a, uint64_t b, uint64_t c) {
    if (b && a > (UINT64_MAX - c) / b) return UINT64_MAX;
    return a * b + c;
}

/* Parses the header and sets *end to the byte where the data it describes ends: past the
 * last non-record variable, and past the last record's last record variable. Records are
 * numrecs * recsize apart, recsize the sum of the record variables' sizes each padded to 4
 * bytes, except that a lone record variable is not padded (the spec's "Note on padding";
 * libnetcdf packs any lone type so, and it only matters for 1- and 2-byte ones). The end
 * counts data, not the padding after the last value, which writers need not store. */
static brisk_status parse(cursor *c, uint64_t *end) {
    *end = 0;
    int ver = c->p[3];
    if (ver != 1 && ver != 2 && ver != 5) return bad(c, "an unknown classic version");
    c->v5 = ver == 5;
    c->at = 4;
    uint64_t numrecs = count(c);
    /* numrecs all ones: a file still being written ("streaming"); libnetcdf counts its
     * records from its size, so no record can be missing */
    int streaming = numrecs == (c->v5 ? UINT64_MAX : 0xFFFFFFFFu);
    /* dimensions: ABSENT or NC_DIMENSION (10) n [name length]; length 0 is the record one */
    uint64_t tag = be(c, 4), ndims = count(c), dimlen[1024];
    if (c->st) return c->st;
    if (!(tag == 0 && ndims == 0) && (tag != 10 || ndims > 1024)) return bad(c, "the dimension list");
    for (uint64_t i = 0; i < ndims && !c->st; i++) {
        skip(c, count(c), "a dimension name");
        dimlen[i] = count(c);
    }
    atts(c);
    tag = be(c, 4);
    uint64_t nvars = count(c), recsize = 0, rec_end = 0, fixed_end = 0, lone = 0;
    int nrec = 0;
    if (c->st) return c->st;
    if (!(tag == 0 && nvars == 0) && (tag != 11 || nvars > c->file_len)) return bad(c, "the variable list");
    for (uint64_t i = 0; i < nvars && !c->st; i++) {
        skip(c, count(c), "a variable name");
        uint64_t nd = count(c), elems = 1;
        int record = 0;
        if (c->st) break;
        if (nd > 1024) return bad(c, "a variable's dimension count");
        for (uint64_t d = 0; d < nd && !c->st; d++) {
            uint64_t id = count(c);
            if (c->st) break;
            if (id >= ndims) return bad(c, "a variable's dimension id");
            if (dimlen[id] == 0 && d == 0) record = 1;
            else if (dimlen[id] && elems > UINT64_MAX / dimlen[id]) return bad(c, "a variable's size");
            else elems *= dimlen[id] ? dimlen[id] : 1;
        }
        atts(c);
        uint64_t t = be(c, 4);
        if (c->st) break;
        size_t s = type_size(t);
        if (!s || (!c->v5 && t > 6)) return bad(c, "a variable's type");
        count(c); /* vsize: recomputed here (it may be clamped in the file) */
        uint64_t begin = be(c, ver == 1 ? 4 : 8), bytes = mul_add(elems, s, 0), stop = mul_add(1, bytes, begin);
        if (c->st) break;
        if (stop == UINT64_MAX) return bad(c, "a variable's size");
        if (!record) {
            fixed_end = stop > fixed_end ? stop : fixed_end;
            continue;
        }
        nrec++;
        lone = bytes;
        recsize = mul_add(1, (bytes + 3) & ~(uint64_t)3, recsize);
        rec_end = stop > rec_end ? stop : rec_end;
    }
    if (c->st) return c->st;
    if (nrec == 1) recsize = lone;
    uint64_t records_end = nrec && numrecs && !streaming ? mul_add(numrecs - 1, recsize, rec_end) : 0;
    if (records_end == UINT64_MAX) return bad(c, "the record count");
    *end = records_end > fixed_end ? records_end : fixed_end;
    return BRISK_OK;
}

static brisk_status truncated(const char *name, uint64_t have, uint64_t end, brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: %llu of %llu bytes (the header's variables end at byte "
                        "%llu)", name, (unsigned long long)have, (unsigned long long)end, (unsigned long long)end);
}

brisk_status netcdf_classic_check(const void *buf, size_t len, const char *name, brisk_error *err) {
    if (len < 4 || memcmp(buf, "CDF", 3) != 0) return BRISK_OK; /* not classic: libnetcdf decides */
    cursor c = {buf, len, 0, len, 0, 0, name, err, BRISK_OK};
    uint64_t end;
    brisk_status st = parse(&c, &end);
    return st ? st : end > len ? truncated(name, len, end, err) : BRISK_OK;
}

/* Headers past this are left to libnetcdf (a real one is kilobytes; attributes can make
 * it megabytes). */
#define MAX_HEADER (256u << 20)

brisk_status netcdf_classic_check_file(const char *path, brisk_error *err) {
    brisk_rfile f;
    brisk_status st = brisk_rfile_open(&f, path, err);
    if (st) return st;
    size_t cap = f.len < 65536 ? (size_t)f.len : 65536;
    unsigned char *buf = NULL;
    uint64_t end = 0;
    for (;;) {
        unsigned char *b = realloc(buf, cap ? cap : 1);
        if (!b) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes for its header", path, cap); break; }
        buf = b;
        if ((st = brisk_rfile_read(&f, 0, buf, cap, err))) break;
        if (cap < 4 || memcmp(buf, "CDF", 3) != 0) break; /* not classic: libnetcdf decides */
        cursor c = {buf, cap, 0, f.len, 0, 0, path, err, BRISK_OK};
        st = parse(&c, &end);
        if (!st) { if (end > f.len) st = truncated(path, f.len, end, err); break; }
        if (!c.want_more) break;
        if (cap >= MAX_HEADER) { st = BRISK_OK; break; }
        uint64_t next = (uint64_t)cap * 4;
        next = next < f.len ? next : f.len;
        cap = (size_t)(next < MAX_HEADER ? next : MAX_HEADER);
    }
    free(buf);
    return brisk_rfile_close(&f, st, err);
}
