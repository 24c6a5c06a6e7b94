/* NPZ: a zip archive of .npy members. The reader walks the zip's end record and central
 * directory itself (ZIP64 extents included, as NumPy's savez always writes them in the
 * local headers), takes sizes and offsets from the central directory, bounds every one
 * against the buffer, inflates deflated members with zlib when built with it, and
 * verifies CRC-32. The writer emits stored members. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/npy_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#ifdef BRISK_HAVE_ZLIB
#include <zlib.h>
#endif

enum {
    SIG_LOCAL = 0x04034b50u,
    SIG_CENTRAL = 0x02014b50u,
    SIG_EOCD = 0x06054b50u,
    SIG_EOCD64 = 0x06064b50u,
    SIG_LOC64 = 0x07064b50u,
    EOCD_LEN = 22,
    CENTRAL_LEN = 46,
    LOCAL_LEN = 30,
};

typedef struct zentry {
    const char *name;   /* into the archive buffer, not NUL-terminated */
    size_t name_len;    /* without a ".npy" suffix */
    uint16_t flags, method;
    uint32_t crc;
    uint64_t csize, usize, local_off;
} zentry;

/* ---------------------------------------------------------------- directory */

/* Finds the end of central directory record, and the ZIP64 one when the classic
 * fields are saturated; returns the central directory's offset, size and entry count. */
static brisk_status find_directory(const uint8_t *buf, size_t len, const char *fname, uint64_t *cd_off,
                                   uint64_t *cd_size, uint64_t *count, brisk_error *err) {
    if (len < EOCD_LEN)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a zip archive (.npz): %zu bytes is too short", fname, len);
    size_t lo = len - EOCD_LEN > 65535 ? len - EOCD_LEN - 65535 : 0, at = SIZE_MAX;
    for (size_t i = len - EOCD_LEN + 1; i-- > lo;) {
        brisk_rd r = brisk_rd_make(buf + i, len - i);
        if (brisk_rd_u32(&r) == SIG_EOCD) { at = i; break; }
    }
    if (at == SIZE_MAX)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a zip archive (.npz): no end of central directory "
                            "record (truncated or not a zip)", fname);
    brisk_rd r = brisk_rd_make(buf, len);
    brisk_rd_seek(&r, at + 4);
    uint16_t disk = brisk_rd_u16(&r), cd_disk = brisk_rd_u16(&r);
    brisk_rd_skip(&r, 2); /* entries on this disk: single-volume archives only */
    uint16_t n_all = brisk_rd_u16(&r);
    uint32_t size32 = brisk_rd_u32(&r), off32 = brisk_rd_u32(&r);
    *count = n_all;
    *cd_size = size32;
    *cd_off = off32;
    if (n_all == 0xFFFF || size32 == 0xFFFFFFFFu || off32 == 0xFFFFFFFFu) {
        if (at < 20) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: saturated end record but no ZIP64 locator", fname);
        brisk_rd_seek(&r, at - 20);
        if (brisk_rd_u32(&r) != SIG_LOC64)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: saturated end record but no ZIP64 locator", fname);
        brisk_rd_skip(&r, 4);
        uint64_t e64 = brisk_rd_u64(&r);
        brisk_rd_seek(&r, e64);
        if (brisk_rd_u32(&r) != SIG_EOCD64 || r.bad)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: ZIP64 end record missing at offset %llu", fname,
                                (unsigned long long)e64);
        brisk_rd_skip(&r, 8 + 2 + 2);
        disk = brisk_rd_u32(&r) ? 1 : 0;
        cd_disk = brisk_rd_u32(&r) ? 1 : 0;
        brisk_rd_skip(&r, 8);
        *count = brisk_rd_u64(&r);
        *cd_size = brisk_rd_u64(&r);
        *cd_off = brisk_rd_u64(&r);
        if (r.bad) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: truncated ZIP64 end record", fname);
    }
    if (disk != 0 || cd_disk != 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: zip: multi-volume archives are not supported", fname);
    if (*cd_off > len || *cd_size > len - *cd_off)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: central directory (offset %llu, %llu bytes) lies outside "
                            "the %zu-byte file (truncated?)", fname, (unsigned long long)*cd_off,
                            (unsigned long long)*cd_size, len);
    if (*count > *cd_size / CENTRAL_LEN)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: %llu entries cannot fit a %llu-byte central directory",
                            fname, (unsigned long long)*count, (unsigned long long)*cd_size);
    return BRISK_OK;
}

/* The ZIP64 extended-information extra field holds, in order, only those of usize,
 * csize and local_off whose 32-bit field is saturated. */
static int read_zip64_extra(const uint8_t *extra, size_t n, zentry *e, int need_u, int need_c, int need_o) {
    brisk_rd r = brisk_rd_make(extra, n);
    while (brisk_rd_has(&r, 4)) {
        uint16_t id = brisk_rd_u16(&r), sz = brisk_rd_u16(&r);
        const uint8_t *body = brisk_rd_bytes(&r, sz);
        if (!body) return -1;
        if (id != 0x0001) continue;
        brisk_rd b = brisk_rd_make(body, sz);
        if (need_u) e->usize = brisk_rd_u64(&b);
        if (need_c) e->csize = brisk_rd_u64(&b);
        if (need_o) e->local_off = brisk_rd_u64(&b);
        return b.bad ? -1 : 0;
    }
    return (need_u || need_c || need_o) ? -1 : 0;
}

static int cmp_entry_name(const void *a, const void *b) {
    const zentry *x = *(const zentry *const *)a, *y = *(const zentry *const *)b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Two members of one name ("x" and "x.npy" too): NumPy's load takes the last, a zip tool
 * the first; which one was meant cannot be known, so the file is refused. */
static brisk_status check_unique(const zentry *es, int n, const char *fname, brisk_error *err) {
    if (n < 2) return BRISK_OK;
    const zentry **by = malloc((size_t)n * sizeof *by);
    if (!by) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: zip: out of memory", fname);
    for (int i = 0; i < n; i++) by[i] = &es[i];
    qsort(by, (size_t)n, sizeof *by, cmp_entry_name);
    brisk_status st = BRISK_OK;
    for (int i = 1; i < n && !st; i++)
        if (cmp_entry_name(&by[i - 1], &by[i]) == 0)
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: member '%.*s' appears twice (NumPy would read the last, other "
                              "tools the first); expected unique names", fname, (int)by[i]->name_len, by[i]->name);
    free(by);
    return st;
}

static brisk_status read_directory(const uint8_t *buf, size_t len, const char *fname, zentry **out, int *nout,
                                   brisk_error *err) {
    *out = NULL;
    *nout = 0;
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    brisk_status st = find_directory(buf, len, fname, &cd_off, &cd_size, &count, err);
    if (st) return st;
    if (count > INT_MAX) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: too many entries", fname);
    zentry *es = calloc(count ? (size_t)count : 1, sizeof *es);
    if (!es) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: zip: cannot allocate the directory", fname);
    brisk_rd r = brisk_rd_make(buf + cd_off, (size_t)cd_size);
    for (uint64_t i = 0; i < count; i++) {
        zentry *e = &es[i];
        if (brisk_rd_u32(&r) != SIG_CENTRAL) {
            free(es);
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: central directory entry %llu: bad signature", fname,
                                (unsigned long long)i);
        }
        brisk_rd_skip(&r, 4);
        e->flags = brisk_rd_u16(&r);
        e->method = brisk_rd_u16(&r);
        brisk_rd_skip(&r, 4);
        e->crc = brisk_rd_u32(&r);
        uint32_t c32 = brisk_rd_u32(&r), u32 = brisk_rd_u32(&r);
        uint16_t nl = brisk_rd_u16(&r), xl = brisk_rd_u16(&r), cl = brisk_rd_u16(&r);
        brisk_rd_skip(&r, 8);
        uint32_t o32 = brisk_rd_u32(&r);
        e->name = (const char *)brisk_rd_bytes(&r, nl);
        const uint8_t *extra = brisk_rd_bytes(&r, xl);
        brisk_rd_skip(&r, cl);
        e->csize = c32;
        e->usize = u32;
        e->local_off = o32;
        if (r.bad || read_zip64_extra(extra, xl, e, u32 == 0xFFFFFFFFu, c32 == 0xFFFFFFFFu, o32 == 0xFFFFFFFFu)) {
            free(es);
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: central directory entry %llu is truncated or has a bad "
                                "ZIP64 field", fname, (unsigned long long)i);
        }
        e->name_len = nl;
        if (nl > 4 && memcmp(e->name + nl - 4, ".npy", 4) == 0) e->name_len -= 4;
        if (memchr(e->name, 0, nl)) {
            free(es);
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: entry %llu's name contains a NUL byte", fname,
                                (unsigned long long)i);
        }
    }
    if ((st = check_unique(es, (int)count, fname, err))) {
        free(es);
        return st;
    }
    *out = es;
    *nout = (int)count;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- members */

/* A shard of the leading dimension, rows [r[0], r[1]): clamped to the array by shard_rows,
 * which also sets its shape and nbytes to the shard's. */
static size_t row_bytes(const brisk_npy_array *a) {
    int64_t n0 = a->shape.ndim ? a->shape.d[0] : 1;
    return n0 > 0 ? a->nbytes / (size_t)n0 : 0;
}
static void shard_rows(brisk_npy_array *a, int64_t *r) {
    int64_t n0 = a->shape.ndim ? a->shape.d[0] : 1;
    size_t rb = row_bytes(a);
    if (r[0] < 0) r[0] = 0;
    if (r[1] > n0) r[1] = n0;
    if (r[0] > r[1]) r[0] = r[1];
    if (a->shape.ndim) a->shape.d[0] = r[1] - r[0];
    a->nbytes = rb * (size_t)(r[1] - r[0]);
}

#ifdef BRISK_HAVE_ZLIB
/* A deflated member inflated in pieces, straight to where each piece belongs: the .npy
 * header to a small buffer, the data to the array's own buffer. The peak is the array
 * itself, not twice its size; the CRC runs over the pieces as they come. */
typedef struct inflater {
    z_stream z;
    uint64_t in_left;
    uint32_t crc;
    int ended; /* Z_STREAM_END seen */
} inflater;

static brisk_status infl_open(inflater *f, const uint8_t *src, uint64_t csize, const char *what, brisk_error *err) {
    memset(f, 0, sizeof *f);
    if (inflateInit2(&f->z, -MAX_WBITS) != Z_OK) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot start zlib", what);
    f->z.next_in = (Bytef *)src;
    f->in_left = csize;
    return BRISK_OK;
}

/* Exactly n bytes into dst. */
static brisk_status infl_read(inflater *f, uint8_t *dst, uint64_t n, uint64_t usize, const char *what, brisk_error *err) {
    uint8_t *p = dst;
    uint64_t left = n;
    while (left) {
        if (f->ended)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: inflates to fewer than the %llu bytes the directory says",
                                what, (unsigned long long)usize);
        if (f->z.avail_in == 0 && f->in_left) { /* zlib counts in uInt: feed large members in pieces */
            f->z.avail_in = f->in_left > UINT_MAX ? UINT_MAX : (uInt)f->in_left;
            f->in_left -= f->z.avail_in;
        }
        f->z.next_out = p;
        f->z.avail_out = left > UINT_MAX ? UINT_MAX : (uInt)left;
        uInt before = f->z.avail_out;
        int rc = inflate(&f->z, Z_NO_FLUSH);
        uInt got = before - f->z.avail_out;
        f->crc = brisk_crc32(f->crc, p, got);
        p += got;
        left -= got;
        if (rc == Z_STREAM_END) f->ended = 1;
        else if (rc != Z_OK && !(rc == Z_BUF_ERROR && got))
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: corrupt or truncated deflate data (%s)", what,
                                f->z.msg ? f->z.msg : "ended early");
    }
    return BRISK_OK;
}

/* After usize bytes: the stream must end there. */
static brisk_status infl_close(inflater *f, uint64_t usize, const char *what, brisk_error *err) {
    brisk_status st = BRISK_OK;
    if (!f->ended) {
        uint8_t extra;
        if (f->z.avail_in == 0 && f->in_left) {
            f->z.avail_in = f->in_left > UINT_MAX ? UINT_MAX : (uInt)f->in_left;
            f->in_left -= f->z.avail_in;
        }
        f->z.next_out = &extra;
        f->z.avail_out = 1;
        int rc = inflate(&f->z, Z_NO_FLUSH);
        if (rc != Z_STREAM_END || f->z.avail_out == 0)
            st = f->z.avail_out == 0 ? brisk_errorf(err, BRISK_ERR_FORMAT, "%s: inflates to more than the %llu bytes the "
                                                    "directory says", what, (unsigned long long)usize)
                                     : brisk_errorf(err, BRISK_ERR_FORMAT, "%s: corrupt or truncated deflate data (%s)",
                                                    what, f->z.msg ? f->z.msg : "ended early");
    }
    inflateEnd(&f->z);
    return st;
}

/* The .npy header (at most this long: NumPy's own are under 1 KiB) and then the data. */
#define NPY_MAX_HEADER (1u << 20)

/* Discards n inflated bytes (the rows outside a shard), through a small buffer. */
static brisk_status infl_skip(inflater *f, uint64_t n, uint64_t usize, const char *what, brisk_error *err) {
    uint8_t buf[1 << 14];
    brisk_status st = BRISK_OK;
    while (n && !st) {
        uint64_t k = n < sizeof buf ? n : sizeof buf;
        st = infl_read(f, buf, k, usize, what, err);
        n -= k;
    }
    return st;
}

/* rows: NULL, or a shard [rows[0], rows[1]) of the leading dimension to keep (the rest is
 * inflated, for the CRC, and dropped) */
static brisk_status inflate_npy(const uint8_t *src, const zentry *e, const char *what, const char *npyname,
                                int header_only, const int64_t *rows, brisk_npy_array *out, brisk_error *err) {
    inflater f;
    brisk_status st = infl_open(&f, src, e->csize, what, err);
    if (st) return st;
    uint8_t head[12];
    uint64_t first = e->usize < sizeof head ? e->usize : sizeof head, hlen = 0;
    uint8_t *hbuf = NULL;
    int swap = 0;
    size_t off = 0;
    if (!(st = infl_read(&f, head, first, e->usize, what, err)) &&
        !(st = brisk_npy_header_len(head, (size_t)first, npyname, &hlen, err))) {
        if (hlen > NPY_MAX_HEADER || hlen > e->usize || hlen < first)
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: a .npy header of %llu bytes (expected %llu to %u, within the "
                              "member's %llu)", what, (unsigned long long)hlen, (unsigned long long)first, NPY_MAX_HEADER,
                              (unsigned long long)e->usize);
        else if (!(hbuf = malloc((size_t)hlen + 1)))
            st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what);
    }
    if (!st) {
        memcpy(hbuf, head, (size_t)first);
        st = infl_read(&f, hbuf + first, hlen - first, e->usize, what, err);
    }
    if (!st) st = brisk_npy_parse_header(hbuf, (size_t)hlen, npyname, out, &swap, &off, err);
    if (!st) st = brisk_npy_check_size(out, npyname, e->usize - hlen, err);
    if (!st && header_only) {
        inflateEnd(&f.z);
        free(hbuf);
        return BRISK_OK;
    }
    uint64_t before = 0, after = 0; /* a shard: the bytes inflated and dropped around it */
    if (!st && rows) {
        size_t all = out->nbytes, rb = row_bytes(out);
        int64_t r[2] = {rows[0], rows[1]};
        shard_rows(out, r);
        before = (uint64_t)r[0] * rb;
        after = all - before - out->nbytes;
    }
    if (!st && !(out->data = malloc(out->nbytes ? out->nbytes : 1)))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes for its array", what, out->nbytes);
    if (!st) st = infl_skip(&f, before, e->usize, what, err);
    if (!st) st = infl_read(&f, out->data, out->nbytes, e->usize, what, err);
    if (!st) st = infl_skip(&f, after, e->usize, what, err);
    brisk_status cst = infl_close(&f, e->usize, what, err);
    if (!st) st = cst;
    free(hbuf);
    if (!st && f.crc != e->crc)
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: CRC-32 mismatch (directory 0x%08x, data 0x%08x): corrupt file",
                          what, e->crc, f.crc);
    if (st) {
        brisk_npy_free(out);
        return st;
    }
    brisk_npy_fix_in_place(out, swap);
    return BRISK_OK;
}
#endif

/* rows: NULL, or the shard [rows[0], rows[1]) of the leading dimension to keep */
static brisk_status read_member(const uint8_t *buf, size_t len, const char *fname, const zentry *e, int header_only,
                                const int64_t *rows, brisk_npy_array *out, brisk_error *err) {
    char what[512];
    snprintf(what, sizeof what, "%s: member '%.*s'", fname, (int)e->name_len, e->name);
    if (e->flags & 1) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: encrypted members are not supported", what);
    if (e->method != 0 && e->method != 8)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: compression method %u; expected 0 (stored) or 8 "
                            "(deflate)", what, e->method);
    brisk_rd r = brisk_rd_make(buf, len);
    brisk_rd_seek(&r, e->local_off);
    if (brisk_rd_u32(&r) != SIG_LOCAL || r.bad)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no local header at offset %llu (truncated or corrupt zip)",
                            what, (unsigned long long)e->local_off);
    brisk_rd_skip(&r, 22);
    uint16_t nl = brisk_rd_u16(&r), xl = brisk_rd_u16(&r);
    brisk_rd_skip(&r, (uint64_t)nl + xl);
    const uint8_t *data = brisk_rd_bytes(&r, e->csize);
    if (!data)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: its %llu bytes of data run past the end of the "
                            "%zu-byte file", what, (unsigned long long)e->csize, len);
    char npyname[512];
    snprintf(npyname, sizeof npyname, "%s:%.*s", fname, (int)e->name_len, e->name);
    if (e->method == 0) {
        if (e->csize != e->usize)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: stored member with compressed size %llu != size %llu", what,
                                (unsigned long long)e->csize, (unsigned long long)e->usize);
        if (header_only) {
            int swap;
            size_t off;
            brisk_status st = brisk_npy_parse_header(data, (size_t)e->usize, npyname, out, &swap, &off, err);
            return st ? st : brisk_npy_check_size(out, npyname, e->usize - off, err);
        }
        if (rows) { /* a shard: only its bytes are copied (and, the file being mapped, read) */
            int swap;
            size_t off;
            brisk_status st = brisk_npy_parse_header(data, (size_t)e->usize, npyname, out, &swap, &off, err);
            if (!st) st = brisk_npy_check_size(out, npyname, e->usize - off, err);
            if (st) return st;
            size_t rb = row_bytes(out);
            int64_t sh[2] = {rows[0], rows[1]};
            shard_rows(out, sh);
            if (!(out->data = malloc(out->nbytes ? out->nbytes : 1)))
                return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes for its shard", what, out->nbytes);
            memcpy(out->data, data + off + (size_t)sh[0] * rb, out->nbytes);
            brisk_npy_fix_in_place(out, swap);
            return BRISK_OK;
        }
        uint32_t crc = brisk_crc32(0, data, (size_t)e->usize);
        if (crc != e->crc)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: CRC-32 mismatch (directory 0x%08x, data 0x%08x): corrupt file",
                                what, e->crc, crc);
        return brisk_npy_parse(data, (size_t)e->usize, npyname, out, err);
    }
#ifdef BRISK_HAVE_ZLIB
    /* Deflate expands at most ~1032:1; a larger claim is a lie (or a bomb). */
    if (e->usize / 1032 > e->csize + 64)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: claims %llu bytes from %llu compressed; impossible for "
                            "deflate", what, (unsigned long long)e->usize, (unsigned long long)e->csize);
    return inflate_npy(data, e, what, npyname, header_only, rows, out, err);
#else
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s is deflated (np.savez_compressed) but brisk was built "
                        "without zlib; install zlib and rebuild, or save with np.savez", what);
#endif
}

static void list_members(const zentry *es, int n, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k + 1 < cap; i++) {
        int w = snprintf(buf + k, cap - k, "%s%.*s", i ? ", " : "", (int)es[i].name_len, es[i].name);
        if (w < 0) break;
        k += (size_t)w;
    }
    if (n == 0) snprintf(buf, cap, "none");
}

/* ---------------------------------------------------------------- API */

void brisk_npz_free(brisk_npz *z) {
    if (!z) return;
    for (int i = 0; i < z->count; i++) {
        free(z->members[i].name);
        brisk_npy_free(&z->members[i].array);
    }
    free(z->members);
    memset(z, 0, sizeof *z);
}

brisk_status brisk_npz_parse(const void *buf, size_t len, const char *name, brisk_npz *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    zentry *es;
    int n;
    brisk_status st = read_directory(buf, len, name, &es, &n, err);
    if (st) return st;
    out->members = calloc(n ? (size_t)n : 1, sizeof *out->members);
    if (!out->members) { free(es); return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name); }
    for (int i = 0; i < n; i++) {
        brisk_npz_member *m = &out->members[i];
        m->name = malloc(es[i].name_len + 1);
        if (!m->name) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name); break; }
        memcpy(m->name, es[i].name, es[i].name_len);
        m->name[es[i].name_len] = 0;
        out->count = i + 1;
        if ((st = read_member(buf, len, name, &es[i], 0, NULL, &m->array, err))) break;
    }
    free(es);
    if (st) brisk_npz_free(out);
    return st;
}

brisk_status brisk_npz_read(const char *path, brisk_npz *out, brisk_error *err) {
    brisk_file f;
    memset(out, 0, sizeof *out);
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    st = brisk_npz_parse(f.data, f.len, path, out, err);
    brisk_file_release(&f);
    return st;
}

static brisk_status read_one(const char *path, const char *member, int header_only, const int64_t *rows,
                             brisk_npy_array *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    brisk_file f;
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    zentry *es;
    int n;
    if ((st = read_directory(f.data, f.len, path, &es, &n, err))) { brisk_file_release(&f); return st; }
    size_t ml = strlen(member);
    int found = -1;
    for (int i = 0; i < n && found < 0; i++)
        if (es[i].name_len == ml && memcmp(es[i].name, member, ml) == 0) found = i;
    if (found < 0) {
        char list[512];
        list_members(es, n, list, sizeof list);
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no member '%s' (members: %s)", path, member, list);
    } else {
        st = read_member(f.data, f.len, path, &es[found], header_only, rows, out, err);
    }
    free(es);
    brisk_file_release(&f);
    return st;
}

brisk_status brisk_npz_read_one(const char *path, const char *member, brisk_npy_array *out, brisk_error *err) {
    return read_one(path, member, 0, NULL, out, err);
}

brisk_status brisk_npz_read_rows(const char *path, const char *member, int64_t lo, int64_t hi, brisk_npy_array *out,
                                 brisk_error *err) {
    int64_t rows[2] = {lo, hi};
    return read_one(path, member, 0, rows, out, err);
}

brisk_status brisk_npz_peek(const char *path, const char *member, brisk_npy_array *out, brisk_error *err) {
    return read_one(path, member, 1, NULL, out, err);
}

const brisk_npy_array *brisk_npz_find(const brisk_npz *z, const char *member) {
    for (int i = 0; i < z->count; i++)
        if (strcmp(z->members[i].name, member) == 0) return &z->members[i].array;
    return NULL;
}

/* ---------------------------------------------------------------- write */

brisk_status brisk_npz_write(const char *path, int count, const char *const *names, const brisk_tensor *tensors,
                             brisk_error *err) {
    if (count < 0 || count > 0xFFFF) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d members", path, count);
    for (int i = 0; i < count; i++) {
        size_t nl = strlen(names[i]);
        if (nl == 0 || nl > 1000) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: member %d: bad name", path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: member '%s' given twice", path, names[i]);
    }
    uint8_t *central = malloc((size_t)count * (CENTRAL_LEN + 1004) + 1);
    if (!central) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    brisk_out o;
    brisk_status st = brisk_out_open(&o, path, err);
    if (st) { free(central); return st; }
    uint64_t off = 0;
    size_t cl = 0;
    for (int i = 0; i < count && !st; i++) {
        void *npy;
        size_t len;
        if ((st = brisk_npy_encode(&tensors[i], &npy, &len, err))) {
            brisk_error_prefix(err, "%s: member '%s'", path, names[i]);
            break;
        }
        if (len >= 0xFFFFFFFFu || off + len + 2048 >= 0xFFFFFFFFu) {
            free(npy);
            st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: member '%s': the archive would pass 4 GiB, which "
                              "needs ZIP64 (not written by brisk)", path, names[i]);
            break;
        }
        uint32_t crc = brisk_crc32(0, npy, len);
        char fn[1024];
        size_t nl = (size_t)snprintf(fn, sizeof fn, "%s.npy", names[i]);
        uint8_t h[LOCAL_LEN];
        /* Fixed DOS timestamp (1980-01-01) so the same arrays give the same bytes. */
        brisk_put_le(h, SIG_LOCAL, 4);
        brisk_put_le(h + 4, 20, 2);
        brisk_put_le(h + 6, 0, 2);
        brisk_put_le(h + 8, 0, 2);
        brisk_put_le(h + 10, 0, 2);
        brisk_put_le(h + 12, 0x21, 2);
        brisk_put_le(h + 14, crc, 4);
        brisk_put_le(h + 18, len, 4);
        brisk_put_le(h + 22, len, 4);
        brisk_put_le(h + 26, nl, 2);
        brisk_put_le(h + 28, 0, 2);
        brisk_out_write(&o, h, sizeof h);
        brisk_out_write(&o, fn, nl);
        brisk_out_write(&o, npy, len);
        free(npy);
        uint8_t *c = central + cl;
        memset(c, 0, CENTRAL_LEN);
        brisk_put_le(c, SIG_CENTRAL, 4);
        brisk_put_le(c + 4, 20, 2);
        brisk_put_le(c + 6, 20, 2);
        brisk_put_le(c + 14, 0x21, 2);
        brisk_put_le(c + 16, crc, 4);
        brisk_put_le(c + 20, len, 4);
        brisk_put_le(c + 24, len, 4);
        brisk_put_le(c + 28, nl, 2);
        brisk_put_le(c + 42, off, 4);
        memcpy(c + CENTRAL_LEN, fn, nl);
        cl += CENTRAL_LEN + nl;
        off += LOCAL_LEN + nl + len;
    }
    if (st) {
        brisk_out_abort(&o);
        free(central);
        return st;
    }
    brisk_out_write(&o, central, cl);
    uint8_t e[EOCD_LEN];
    memset(e, 0, sizeof e);
    brisk_put_le(e, SIG_EOCD, 4);
    brisk_put_le(e + 8, (uint64_t)count, 2);
    brisk_put_le(e + 10, (uint64_t)count, 2);
    brisk_put_le(e + 12, cl, 4);
    brisk_put_le(e + 16, off, 4);
    brisk_out_write(&o, e, sizeof e);
    free(central);
    return brisk_out_commit(&o, err);
}
