/* NPZ: a zip archive of .npy members. The reader walks the zip's end record and central
 * directory itself (ZIP64 extents included, as NumPy's savez always writes them in the
 * local headers), takes sizes and offsets from the central directory, bounds every one
 * against the file, reads each member's data straight into its array (inflating a deflated
 * one with zlib when built with it), and verifies CRC-32. The writer emits stored members. */
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
    const char *name;   /* into the directory's bytes (zdir.cd), not NUL-terminated */
    size_t name_len;    /* without a ".npy" suffix */
    uint16_t flags, method;
    uint32_t crc;
    uint64_t csize, usize, local_off;
} zentry;

/* ---------------------------------------------------------------- directory */

/* The central directory, read whole: the entries' names point into cd. */
typedef struct zdir {
    zentry *es;
    int n;
    uint8_t *cd;
} zdir;

static void zdir_free(zdir *d) {
    free(d->es);
    free(d->cd);
    memset(d, 0, sizeof *d);
}

/* The end of central directory record lies within the last 22 + 65535 bytes (its comment
 * is at most that long); the ZIP64 records, when the classic fields are saturated, are
 * found from it. Returns the central directory's offset, size and entry count. */
static brisk_status find_directory(const brisk_src *s, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count,
                                   brisk_error *err) {
    const char *fname = s->name;
    uint64_t len = s->len;
    if (len < EOCD_LEN)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a zip archive (.npz): %llu bytes is too short", fname,
                            (unsigned long long)len);
    size_t tl = len < EOCD_LEN + 65535 ? (size_t)len : EOCD_LEN + 65535, at = SIZE_MAX;
    uint64_t tail_off = len - tl;
    uint8_t *tail = malloc(tl);
    if (!tail) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", fname);
    brisk_status st = brisk_src_read(s, tail_off, tail, tl, err);
    for (size_t i = tl - EOCD_LEN + 1; !st && i-- > 0;) {
        brisk_rd r = brisk_rd_make(tail + i, tl - i);
        if (brisk_rd_u32(&r) == SIG_EOCD) { at = i; break; }
    }
    if (!st && at == SIZE_MAX)
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a zip archive (.npz): no end of central directory record "
                          "(truncated or not a zip)", fname);
    uint16_t disk = 0, cd_disk = 0, n_all = 0;
    uint32_t size32 = 0, off32 = 0;
    if (!st) {
        brisk_rd r = brisk_rd_make(tail, tl);
        brisk_rd_seek(&r, at + 4);
        disk = brisk_rd_u16(&r), cd_disk = brisk_rd_u16(&r);
        brisk_rd_skip(&r, 2); /* entries on this disk: single-volume archives only */
        n_all = brisk_rd_u16(&r);
        size32 = brisk_rd_u32(&r), off32 = brisk_rd_u32(&r);
    }
    free(tail);
    if (st) return st;
    uint64_t eocd = tail_off + at;
    *count = n_all;
    *cd_size = size32;
    *cd_off = off32;
    if (n_all == 0xFFFF || size32 == 0xFFFFFFFFu || off32 == 0xFFFFFFFFu) {
        uint8_t loc[20], e64[56];
        brisk_rd r = brisk_rd_make(loc, sizeof loc);
        if (eocd < 20 || brisk_src_read(s, eocd - 20, loc, sizeof loc, err) || brisk_rd_u32(&r) != SIG_LOC64)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: saturated end record but no ZIP64 locator", fname);
        brisk_rd_skip(&r, 4);
        uint64_t e64_off = brisk_rd_u64(&r);
        r = brisk_rd_make(e64, sizeof e64);
        if (e64_off > len || len - e64_off < 4 || brisk_src_read(s, e64_off, e64, 4, err) || brisk_rd_u32(&r) != SIG_EOCD64)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: ZIP64 end record missing at offset %llu", fname,
                                (unsigned long long)e64_off);
        if (len - e64_off < sizeof e64 || brisk_src_read(s, e64_off + 4, e64 + 4, sizeof e64 - 4, err))
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: truncated ZIP64 end record", fname);
        r = brisk_rd_make(e64, sizeof e64);
        brisk_rd_skip(&r, 4 + 8 + 2 + 2);
        disk = brisk_rd_u32(&r) ? 1 : 0;
        cd_disk = brisk_rd_u32(&r) ? 1 : 0;
        brisk_rd_skip(&r, 8);
        *count = brisk_rd_u64(&r);
        *cd_size = brisk_rd_u64(&r);
        *cd_off = brisk_rd_u64(&r);
    }
    if (disk != 0 || cd_disk != 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: zip: multi-volume archives are not supported", fname);
    if (*cd_off > len || *cd_size > len - *cd_off)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: central directory (offset %llu, %llu bytes) lies outside "
                            "the %llu-byte file (truncated?)", fname, (unsigned long long)*cd_off,
                            (unsigned long long)*cd_size, (unsigned long long)len);
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

static brisk_status read_directory(const brisk_src *s, zdir *d, brisk_error *err) {
    memset(d, 0, sizeof *d);
    const char *fname = s->name;
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    brisk_status st = find_directory(s, &cd_off, &cd_size, &count, err);
    if (st) return st;
    if (count > INT_MAX) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: too many entries", fname);
    d->es = calloc(count ? (size_t)count : 1, sizeof *d->es);
    d->cd = malloc(cd_size ? (size_t)cd_size : 1);
    if (!d->es || !d->cd) {
        zdir_free(d);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: zip: cannot allocate the directory", fname);
    }
    if ((st = brisk_src_read(s, cd_off, d->cd, (size_t)cd_size, err))) { zdir_free(d); return st; }
    brisk_rd r = brisk_rd_make(d->cd, (size_t)cd_size);
    for (uint64_t i = 0; i < count && !st; i++) {
        zentry *e = &d->es[i];
        if (brisk_rd_u32(&r) != SIG_CENTRAL) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: central directory entry %llu: bad signature", fname,
                              (unsigned long long)i);
            break;
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
        if (r.bad || read_zip64_extra(extra, xl, e, u32 == 0xFFFFFFFFu, c32 == 0xFFFFFFFFu, o32 == 0xFFFFFFFFu))
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: central directory entry %llu is truncated or has a bad "
                              "ZIP64 field", fname, (unsigned long long)i);
        else if (memchr(e->name, 0, nl))
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: zip: entry %llu's name contains a NUL byte", fname,
                              (unsigned long long)i);
        e->name_len = nl;
        if (!st && nl > 4 && memcmp(e->name + nl - 4, ".npy", 4) == 0) e->name_len -= 4;
    }
    if (!st) st = check_unique(d->es, (int)count, fname, err);
    if (st) {
        zdir_free(d);
        return st;
    }
    d->n = (int)count;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- members */

#ifdef BRISK_HAVE_ZLIB
/* A deflated member inflated in pieces, straight to where each piece belongs: the .npy
 * header to a small buffer, the data to the array's own buffer. The peak is the array
 * itself (and, from a file, one piece of its compressed bytes), not twice its size; the
 * CRC runs over the pieces as they come. */
typedef struct inflater {
    z_stream z;
    const brisk_src *s;
    uint64_t in_off, in_left;
    uint8_t *piece;     /* a file's compressed bytes come through this */
    uint32_t crc;
    int ended;          /* Z_STREAM_END seen */
} inflater;

enum { PIECE = 1 << 18 };

static brisk_status infl_open(inflater *f, const brisk_src *s, uint64_t off, uint64_t csize, const char *what,
                              brisk_error *err) {
    memset(f, 0, sizeof *f);
    f->s = s;
    f->in_off = off;
    f->in_left = csize;
    if (!s->mem && !(f->piece = malloc(PIECE))) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what);
    if (inflateInit2(&f->z, -MAX_WBITS) != Z_OK) {
        free(f->piece);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot start zlib", what);
    }
    return BRISK_OK;
}

/* More input once zlib has used what it had (zlib counts in uInt: a large member from
 * memory is fed in pieces too). */
static brisk_status infl_feed(inflater *f, brisk_error *err) {
    if (f->z.avail_in || !f->in_left) return BRISK_OK;
    uInt k = f->in_left > UINT_MAX ? UINT_MAX : (uInt)f->in_left;
    if (f->s->mem) {
        f->z.next_in = (Bytef *)(f->s->mem + f->in_off);
    } else {
        k = k < PIECE ? k : PIECE;
        brisk_status st = brisk_src_read(f->s, f->in_off, f->piece, k, err);
        if (st) return st;
        f->z.next_in = f->piece;
    }
    f->z.avail_in = k;
    f->in_off += k;
    f->in_left -= k;
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
        brisk_status st = infl_feed(f, err);
        if (st) return st;
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
    if (!f->ended && !(st = infl_feed(f, err))) {
        uint8_t extra;
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
    free(f->piece);
    return st;
}

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
static brisk_status inflate_npy(const brisk_src *s, uint64_t off, const zentry *e, const char *what, const char *npyname,
                                int header_only, const int64_t *rows, brisk_npy_array *out, brisk_error *err) {
    inflater f;
    brisk_status st = infl_open(&f, s, off, e->csize, what, err);
    if (st) return st;
    uint8_t head[12];
    uint64_t first = e->usize < sizeof head ? e->usize : sizeof head, hlen = 0;
    uint8_t *hbuf = NULL;
    int swap = 0;
    size_t data_off = 0;
    if (!(st = infl_read(&f, head, first, e->usize, what, err)) &&
        !(st = brisk_npy_header_len(head, (size_t)first, npyname, &hlen, err))) {
        if (hlen > BRISK_NPY_MAX_HEADER || hlen > e->usize || hlen < first)
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: a .npy header of %llu bytes (expected %llu to %u, within the "
                              "member's %llu)", what, (unsigned long long)hlen, (unsigned long long)first,
                              BRISK_NPY_MAX_HEADER, (unsigned long long)e->usize);
        else if (!(hbuf = malloc((size_t)hlen + 1)))
            st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what);
    }
    if (!st) {
        memcpy(hbuf, head, (size_t)first);
        st = infl_read(&f, hbuf + first, hlen - first, e->usize, what, err);
    }
    if (!st) st = brisk_npy_parse_header(hbuf, (size_t)hlen, npyname, out, &swap, &data_off, err);
    if (!st) st = brisk_npy_check_size(out, npyname, e->usize - hlen, err);
    if (!st && header_only) {
        inflateEnd(&f.z);
        free(f.piece);
        free(hbuf);
        return BRISK_OK;
    }
    uint64_t before = 0, after = 0; /* a shard: the bytes inflated and dropped around it */
    if (!st && rows) {
        size_t all = out->nbytes, rb = brisk_npy_row_bytes(out);
        int64_t r[2] = {rows[0], rows[1]};
        brisk_npy_shard_rows(out, r);
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
static brisk_status read_member(const brisk_src *s, const zentry *e, int header_only, const int64_t *rows,
                                brisk_npy_array *out, brisk_error *err) {
    const char *fname = s->name;
    char what[512];
    snprintf(what, sizeof what, "%s: member '%.*s'", fname, (int)e->name_len, e->name);
    if (e->flags & 1) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: encrypted members are not supported", what);
    if (e->method != 0 && e->method != 8)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: compression method %u; expected 0 (stored) or 8 "
                            "(deflate)", what, e->method);
    uint8_t h[LOCAL_LEN];
    brisk_rd r = brisk_rd_make(h, sizeof h);
    if (e->local_off > s->len || s->len - e->local_off < LOCAL_LEN ||
        brisk_src_read(s, e->local_off, h, sizeof h, err) || brisk_rd_u32(&r) != SIG_LOCAL)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no local header at offset %llu (truncated or corrupt zip)",
                            what, (unsigned long long)e->local_off);
    brisk_rd_skip(&r, 22);
    uint16_t nl = brisk_rd_u16(&r), xl = brisk_rd_u16(&r);
    uint64_t data = e->local_off + LOCAL_LEN + nl + xl;
    if (data > s->len || e->csize > s->len - data)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: its %llu bytes of data run past the end of the "
                            "%llu-byte file", what, (unsigned long long)e->csize, (unsigned long long)s->len);
    char npyname[512];
    snprintf(npyname, sizeof npyname, "%s:%.*s", fname, (int)e->name_len, e->name);
    if (e->method == 0) {
        if (e->csize != e->usize)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: stored member with compressed size %llu != size %llu", what,
                                (unsigned long long)e->csize, (unsigned long long)e->usize);
        /* The CRC covers the whole member: a header or a shard read alone is not checked. */
        uint32_t crc = 0;
        int whole = !header_only && !rows;
        brisk_status st = brisk_npy_read_src(s, data, e->usize, npyname, header_only, rows, whole ? &crc : NULL, out, err);
        if (!st && whole && crc != e->crc) {
            brisk_npy_free(out);
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: CRC-32 mismatch (directory 0x%08x, data 0x%08x): corrupt file",
                              what, e->crc, crc);
        }
        return st;
    }
#ifdef BRISK_HAVE_ZLIB
    /* Deflate expands at most ~1032:1; a larger claim is a lie (or a bomb). */
    if (e->usize / 1032 > e->csize + 64)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: claims %llu bytes from %llu compressed; impossible for "
                            "deflate", what, (unsigned long long)e->usize, (unsigned long long)e->csize);
    return inflate_npy(s, data, e, what, npyname, header_only, rows, out, err);
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

static brisk_status parse_all(const brisk_src *s, brisk_npz *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    zdir d;
    brisk_status st = read_directory(s, &d, err);
    if (st) return st;
    out->members = calloc(d.n ? (size_t)d.n : 1, sizeof *out->members);
    if (!out->members) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", s->name);
    for (int i = 0; i < d.n && !st; i++) {
        brisk_npz_member *m = &out->members[i];
        if (!(m->name = malloc(d.es[i].name_len + 1))) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", s->name); break; }
        memcpy(m->name, d.es[i].name, d.es[i].name_len);
        m->name[d.es[i].name_len] = 0;
        out->count = i + 1;
        st = read_member(s, &d.es[i], 0, NULL, &m->array, err);
    }
    zdir_free(&d);
    if (st) brisk_npz_free(out);
    return st;
}

brisk_status brisk_npz_parse(const void *buf, size_t len, const char *name, brisk_npz *out, brisk_error *err) {
    brisk_src s = brisk_src_mem(buf, len, name);
    return parse_all(&s, out, err);
}

brisk_status brisk_npz_read(const char *path, brisk_npz *out, brisk_error *err) {
    brisk_rfile f;
    memset(out, 0, sizeof *out);
    brisk_status st = brisk_rfile_open(&f, path, err);
    if (st) return st;
    brisk_src s = brisk_src_file(&f);
    st = brisk_rfile_close(&f, parse_all(&s, out, err), err);
    if (st) brisk_npz_free(out);
    return st;
}

static brisk_status find_and_read(const brisk_src *s, const char *member, int header_only, const int64_t *rows,
                                  brisk_npy_array *out, brisk_error *err) {
    zdir d;
    brisk_status st = read_directory(s, &d, err);
    if (st) return st;
    size_t ml = strlen(member);
    int found = -1;
    for (int i = 0; i < d.n && found < 0; i++)
        if (d.es[i].name_len == ml && memcmp(d.es[i].name, member, ml) == 0) found = i;
    if (found < 0) {
        char list[512];
        list_members(d.es, d.n, list, sizeof list);
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no member '%s' (members: %s)", s->name, member, list);
    } else {
        st = read_member(s, &d.es[found], header_only, rows, out, err);
    }
    zdir_free(&d);
    return st;
}

static brisk_status read_one(const char *path, const char *member, int header_only, const int64_t *rows,
                             brisk_npy_array *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    brisk_rfile f;
    brisk_status st = brisk_rfile_open(&f, path, err);
    if (st) return st;
    brisk_src s = brisk_src_file(&f);
    st = brisk_rfile_close(&f, find_and_read(&s, member, header_only, rows, out, err), err);
    if (st) brisk_npy_free(out);
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
