/* NPY: NumPy's array file. Parses versions 1.0-3.0 (magic, little-endian header length,
 * a Python dict literal with 'descr', 'fortran_order', 'shape', then raw C-order data),
 * converts to brisk tensors, and writes f32/i32 arrays as version 1.0. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/npy_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---------------------------------------------------------------- header dict */

typedef struct hdr {
    const char *s;
    size_t n, i;
    const char *name;
    brisk_error *err;
} hdr;

static void hdr_ws(hdr *h) {
    while (h->i < h->n && (h->s[h->i] == ' ' || h->s[h->i] == '\t' || h->s[h->i] == '\n' || h->s[h->i] == '\r'))
        h->i++;
}

/* A short printable rendering of what the parser found at the cursor, for messages. */
static const char *hdr_here(const hdr *h, char *buf, size_t cap) {
    if (h->i >= h->n) return "the end of the header";
    size_t k = 0;
    buf[k++] = '\'';
    for (size_t j = h->i; j < h->n && k + 2 < cap && j < h->i + 16; j++) {
        unsigned char c = (unsigned char)h->s[j];
        buf[k++] = (c >= 32 && c < 127 && c != '\'') ? (char)c : '?';
    }
    buf[k++] = '\'';
    buf[k] = 0;
    return buf;
}

static brisk_status hdr_fail(hdr *h, const char *expected) {
    char here[32];
    return brisk_errorf(h->err, BRISK_ERR_FORMAT, "%s: header: expected %s at offset %zu, got %s", h->name,
                        expected, h->i, hdr_here(h, here, sizeof here));
}

static int hdr_eat(hdr *h, char c) {
    hdr_ws(h);
    if (h->i < h->n && h->s[h->i] == c) { h->i++; return 1; }
    return 0;
}

/* A quoted Python string without escapes (NumPy never writes any in a header). */
static brisk_status hdr_string(hdr *h, char *out, size_t cap, const char *what) {
    hdr_ws(h);
    if (h->i >= h->n || (h->s[h->i] != '\'' && h->s[h->i] != '"')) return hdr_fail(h, what);
    char q = h->s[h->i++];
    size_t k = 0;
    while (h->i < h->n && h->s[h->i] != q) {
        if (h->s[h->i] == '\\' || k + 1 >= cap) return hdr_fail(h, what);
        out[k++] = h->s[h->i++];
    }
    if (h->i >= h->n) return hdr_fail(h, "a closing quote");
    h->i++;
    out[k] = 0;
    return BRISK_OK;
}

static brisk_status hdr_shape(hdr *h, brisk_shape *shape) {
    memset(shape, 0, sizeof *shape);
    if (!hdr_eat(h, '(')) return hdr_fail(h, "'(' to open the shape tuple");
    for (;;) {
        if (hdr_eat(h, ')')) return BRISK_OK;
        hdr_ws(h);
        if (h->i >= h->n || h->s[h->i] < '0' || h->s[h->i] > '9') return hdr_fail(h, "a dimension (a non-negative integer)");
        int64_t v = 0;
        while (h->i < h->n && h->s[h->i] >= '0' && h->s[h->i] <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return brisk_errorf(h->err, BRISK_ERR_FORMAT, "%s: header: shape dimension too large", h->name);
            v = v * 10 + (h->s[h->i++] - '0');
        }
        if (h->i < h->n && h->s[h->i] == 'L') h->i++; /* Python 2 longs */
        if (shape->ndim == BRISK_MAX_DIMS)
            return brisk_errorf(h->err, BRISK_ERR_UNSUPPORTED, "%s: header: shape has more than %d dimensions",
                                h->name, BRISK_MAX_DIMS);
        shape->d[shape->ndim++] = v;
        if (hdr_eat(h, ')')) return BRISK_OK;
        if (!hdr_eat(h, ',')) return hdr_fail(h, "',' or ')' in the shape tuple");
    }
}

/* Reads a descr like "<f4"; returns 0 on success and sets *swap when the file's byte
 * order differs from the host's. */
static int parse_descr(const char *d, brisk_npy_dtype *dt, int *swap) {
    memset(dt, 0, sizeof *dt);
    const char *p = d;
    int host_big = !brisk_host_is_le(), big = host_big;
    if (*p == '<') { big = 0; p++; }
    else if (*p == '>') { big = 1; p++; }
    else if (*p == '|' || *p == '=') p++;
    char kind = *p ? *p++ : 0;
    int size = (*p >= '1' && *p <= '8' && p[1] == 0) ? *p - '0' : 0;
    int ok = (kind == 'b' && size == 1) ||
             ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
             (kind == 'f' && (size == 2 || size == 4 || size == 8));
    if (!ok) return -1;
    dt->kind = kind;
    dt->size = size;
    snprintf(dt->descr, sizeof dt->descr, "%s", d);
    *swap = size > 1 && big != host_big;
    return 0;
}

const char *brisk_npy_type_name(const brisk_npy_dtype *dt) {
    switch (dt->kind) {
    case 'b': return "bool";
    case 'i': return dt->size == 1 ? "int8" : dt->size == 2 ? "int16" : dt->size == 4 ? "int32" : "int64";
    case 'u': return dt->size == 1 ? "uint8" : dt->size == 2 ? "uint16" : dt->size == 4 ? "uint32" : "uint64";
    case 'f': return dt->size == 2 ? "float16" : dt->size == 4 ? "float32" : "float64";
    }
    return "?";
}

/* ---------------------------------------------------------------- parse */

/* Magic, version and header length: what every .npy starts with. */
static brisk_status parse_prefix(brisk_rd *r, const char *name, uint64_t *hl, brisk_error *err) {
    const uint8_t *magic = brisk_rd_bytes(r, 6);
    if (!magic || memcmp(magic, npy_magic, 6) != 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a .npy file: expected the magic \"\\x93NUMPY\"", name);
    int major = (int)brisk_rd_le(r, 1), minor = (int)brisk_rd_le(r, 1);
    if (r->bad) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: no format version after the magic", name);
    if (major < 1 || major > 3 || minor != 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: format version %d.%d, expected 1.0, 2.0 or 3.0", name,
                            major, minor);
    *hl = major == 1 ? brisk_rd_u16(r) : brisk_rd_u32(r);
    if (r->bad) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: no header length after the magic", name);
    return BRISK_OK;
}

brisk_status brisk_npy_header_len(const void *buf, size_t len, const char *name, uint64_t *total, brisk_error *err) {
    brisk_rd r = brisk_rd_make(buf, len);
    uint64_t hl = 0;
    brisk_status st = parse_prefix(&r, name, &hl, err);
    if (st) return st;
    *total = r.pos + hl;
    return BRISK_OK;
}

brisk_status brisk_npy_parse_header(const void *buf, size_t len, const char *name, brisk_npy_array *out, int *swap_out,
                                    size_t *data_off, brisk_error *err) {
    memset(out, 0, sizeof *out);
    brisk_rd r = brisk_rd_make(buf, len);
    uint64_t hl = 0;
    brisk_status st = parse_prefix(&r, name, &hl, err);
    if (st) return st;
    const char *text = (const char *)brisk_rd_bytes(&r, hl);
    if (!text)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: header length says %llu bytes, file has %zu after it",
                            name, (unsigned long long)hl, len > r.pos ? len - r.pos : 0);

    hdr h = {text, (size_t)hl, 0, name, err};
    char descr[32] = "", key[32];
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
    brisk_shape shape;
    if (!hdr_eat(&h, '{')) return hdr_fail(&h, "'{' opening the header dict");
    while (!hdr_eat(&h, '}')) {
        if ((st = hdr_string(&h, key, sizeof key, "a quoted key or '}'"))) return st;
        if (!hdr_eat(&h, ':')) return hdr_fail(&h, "':' after a key");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            hdr_ws(&h);
            if (h.i < h.n && h.s[h.i] == '[')
                return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: header: structured dtypes are not supported; "
                                    "expected a numeric 'descr' such as '<f4'", name);
            if ((st = hdr_string(&h, descr, sizeof descr, "a quoted dtype string for 'descr'"))) return st;
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
            hdr_ws(&h);
            if (h.n - h.i >= 4 && memcmp(h.s + h.i, "True", 4) == 0) { fortran = 1; h.i += 4; }
            else if (h.n - h.i >= 5 && memcmp(h.s + h.i, "False", 5) == 0) { fortran = 0; h.i += 5; }
            else return hdr_fail(&h, "True or False for 'fortran_order'");
            have_fortran = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if ((st = hdr_shape(&h, &shape))) return st;
            have_shape = 1;
        } else {
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header: unexpected or repeated key '%s' (expected "
                                "'descr', 'fortran_order' and 'shape' once each)", name, key);
        }
        if (!hdr_eat(&h, ',')) {
            if (hdr_eat(&h, '}')) break;
            return hdr_fail(&h, "',' or '}' after a value");
        }
    }
    hdr_ws(&h);
    while (h.i < h.n && h.s[h.i] == 0) h.i++; /* some writers pad with NULs */
    if (h.i != h.n) return hdr_fail(&h, "only padding after the header dict");
    if (!have_descr) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header: expected 'descr' key", name);
    if (!have_fortran) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header: expected 'fortran_order' key", name);
    if (!have_shape) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header: expected 'shape' key", name);
    int swap = 0;
    if (parse_descr(descr, &out->dtype, &swap) != 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: header: unsupported dtype '%s' (expected bool, "
                            "int8..int64, uint8..uint64 or float16/32/64, e.g. '<f4')", name, descr);
    if (fortran)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: array is in Fortran order; expected C order "
                            "(save np.ascontiguousarray(a))", name);

    /* Sizes come from the file: multiply with overflow checks before trusting them. */
    uint64_t numel = 1;
    for (int i = 0; i < shape.ndim; i++) {
        uint64_t d = (uint64_t)shape.d[i];
        if (d != 0 && numel > UINT64_MAX / d) numel = UINT64_MAX;
        else numel *= d;
    }
    uint64_t want = numel > UINT64_MAX / (uint64_t)out->dtype.size ? UINT64_MAX : numel * (uint64_t)out->dtype.size;
    out->shape = shape;
    out->nbytes = want > SIZE_MAX ? SIZE_MAX : (size_t)want;
    *swap_out = swap;
    *data_off = r.pos;
    return BRISK_OK;
}

brisk_status brisk_npy_check_size(const brisk_npy_array *a, const char *name, uint64_t have, brisk_error *err) {
    uint64_t numel = 1;
    for (int i = 0; i < a->shape.ndim; i++) {
        uint64_t d = (uint64_t)a->shape.d[i];
        numel = d != 0 && numel > UINT64_MAX / d ? UINT64_MAX : numel * d;
    }
    uint64_t want = numel > UINT64_MAX / (uint64_t)a->dtype.size ? UINT64_MAX : numel * (uint64_t)a->dtype.size;
    if (want == have && want == a->nbytes) return BRISK_OK;
    char sb[160];
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s: header says shape %s = %llu %s values (%llu bytes), file "
                        "has %llu bytes of data", name, want > have ? "truncated" : "size mismatch",
                        brisk_shape_str(&a->shape, sb, sizeof sb), (unsigned long long)numel,
                        brisk_npy_type_name(&a->dtype), (unsigned long long)want, (unsigned long long)have);
}

void brisk_npy_fix_in_place(brisk_npy_array *a, int swap) {
    uint8_t *d = (uint8_t *)a->data;
    if (a->dtype.kind == 'b') {
        for (size_t i = 0; i < a->nbytes; i++) d[i] = d[i] != 0;
    } else if (swap) {
        int s = a->dtype.size;
        for (size_t i = 0; i < a->nbytes; i += (size_t)s)
            for (int c = 0; c < s / 2; c++) {
                uint8_t t = d[i + (size_t)c];
                d[i + (size_t)c] = d[i + (size_t)(s - 1 - c)];
                d[i + (size_t)(s - 1 - c)] = t;
            }
    }
}

size_t brisk_npy_row_bytes(const brisk_npy_array *a) {
    int64_t n0 = a->shape.ndim ? a->shape.d[0] : 1;
    return n0 > 0 ? a->nbytes / (size_t)n0 : 0;
}

void brisk_npy_shard_rows(brisk_npy_array *a, int64_t *r) {
    int64_t n0 = a->shape.ndim ? a->shape.d[0] : 1;
    size_t rb = brisk_npy_row_bytes(a);
    if (r[0] < 0) r[0] = 0;
    if (r[1] > n0) r[1] = n0;
    if (r[0] > r[1]) r[0] = r[1];
    if (a->shape.ndim) a->shape.d[0] = r[1] - r[0];
    a->nbytes = rb * (size_t)(r[1] - r[0]);
}

/* The header is read whole and parsed; the data goes straight into the array's memory. */
brisk_status brisk_npy_read_src(const brisk_src *s, uint64_t off, uint64_t len, const char *name, int header_only,
                                const int64_t *rows, uint32_t *crc, brisk_npy_array *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    uint8_t head[12], *hbuf = NULL;
    size_t first = len < sizeof head ? (size_t)len : sizeof head, data_off = 0;
    uint64_t hlen = 0;
    int swap = 0;
    brisk_status st = brisk_src_read(s, off, head, first, err);
    if (!st) st = brisk_npy_header_len(head, first, name, &hlen, err);
    uint64_t have = hlen < len ? hlen : len; /* a header longer than the file: parse_header says so */
    if (!st && have > BRISK_NPY_MAX_HEADER)
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: a .npy header of %llu bytes (expected at most %u)", name,
                          (unsigned long long)hlen, BRISK_NPY_MAX_HEADER);
    if (!st && !(hbuf = malloc((size_t)have + 1))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    if (!st) st = brisk_src_read(s, off, hbuf, (size_t)have, err);
    if (!st) st = brisk_npy_parse_header(hbuf, (size_t)have, name, out, &swap, &data_off, err);
    if (!st) st = brisk_npy_check_size(out, name, len - data_off, err);
    if (!st && crc) *crc = brisk_crc32(*crc, hbuf, (size_t)have);
    free(hbuf);
    if (st || header_only) {
        if (st) memset(out, 0, sizeof *out);
        return st;
    }
    uint64_t at = off + data_off;
    if (rows) { /* a shard: only its bytes are read */
        size_t rb = brisk_npy_row_bytes(out);
        int64_t r[2] = {rows[0], rows[1]};
        brisk_npy_shard_rows(out, r);
        at += (uint64_t)r[0] * rb;
    }
    if (!(out->data = malloc(out->nbytes ? out->nbytes : 1)))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes for its array", name, out->nbytes);
    if (!st) st = brisk_src_read(s, at, out->data, out->nbytes, err);
    if (st) {
        brisk_npy_free(out);
        return st;
    }
    if (crc) *crc = brisk_crc32(*crc, out->data, out->nbytes);
    brisk_npy_fix_in_place(out, swap);
    return BRISK_OK;
}

brisk_status brisk_npy_parse(const void *buf, size_t len, const char *name, brisk_npy_array *out,
                             brisk_error *err) {
    brisk_src s = brisk_src_mem(buf, len, name);
    return brisk_npy_read_src(&s, 0, len, name, 0, NULL, NULL, out, err);
}

brisk_status brisk_npy_read(const char *path, brisk_npy_array *out, brisk_error *err) {
    brisk_rfile f;
    memset(out, 0, sizeof *out);
    brisk_status st = brisk_rfile_open(&f, path, err);
    if (st) return st;
    brisk_src s = brisk_src_file(&f);
    st = brisk_rfile_close(&f, brisk_npy_read_src(&s, 0, f.len, path, 0, NULL, NULL, out, err), err);
    if (st) brisk_npy_free(out);
    return st;
}

void brisk_npy_free(brisk_npy_array *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------- conversion */

static int64_t elem_i64(const brisk_npy_array *a, size_t i, int *too_big) {
    const uint8_t *p = (const uint8_t *)a->data + i * (size_t)a->dtype.size;
    switch (a->dtype.size * (a->dtype.kind == 'u' ? -1 : 1)) {
    case 1: return a->dtype.kind == 'b' ? *p : (int8_t)*p;
    case -1: return *p;
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case -2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    case -4: { uint32_t v; memcpy(&v, p, 4); return v; }
    case 8: { int64_t v; memcpy(&v, p, 8); return v; }
    case -8: { uint64_t v; memcpy(&v, p, 8); if (v > (uint64_t)INT64_MAX) { *too_big = 1; return INT64_MAX; } return (int64_t)v; }
    }
    return 0;
}

static float elem_f32(const brisk_npy_array *a, size_t i) {
    const uint8_t *p = (const uint8_t *)a->data + i * (size_t)a->dtype.size;
    if (a->dtype.kind == 'f') {
        if (a->dtype.size == 2) { uint16_t h; memcpy(&h, p, 2); return brisk_f16_to_f32(h); }
        if (a->dtype.size == 4) { float f; memcpy(&f, p, 4); return f; }
        double d; memcpy(&d, p, 8); return (float)d;
    }
    if (a->dtype.kind == 'u' && a->dtype.size == 8) { uint64_t v; memcpy(&v, p, 8); return (float)v; }
    int big = 0;
    return (float)elem_i64(a, i, &big);
}

brisk_status brisk_npy_to_tensor(const brisk_npy_array *a, brisk_dtype want, const char *name,
                                 brisk_tensor *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (want != BRISK_F32 && want != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: can convert to f32 or i32, not %s", name, brisk_dtype_name(want));
    if (want == BRISK_I32 && a->dtype.kind == 'f')
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: expected an integer array for i32, got %s ('%s')", name,
                            brisk_npy_type_name(&a->dtype), a->dtype.descr);
    brisk_status st = brisk_tensor_alloc(out, want, a->shape, err);
    if (st) return brisk_error_prefix(err, "%s", name);
    size_t n = (size_t)brisk_shape_numel(&a->shape);
    if (want == BRISK_F32) {
        float *o = (float *)out->data;
        if (a->dtype.kind == 'f' && a->dtype.size == 4) memcpy(o, a->data, n * 4);
        else for (size_t i = 0; i < n; i++) o[i] = elem_f32(a, i);
        return BRISK_OK;
    }
    int32_t *o = (int32_t *)out->data;
    for (size_t i = 0; i < n; i++) {
        int too_big = 0;
        int64_t v = elem_i64(a, i, &too_big);
        if (too_big || v < INT32_MIN || v > INT32_MAX) {
            const uint8_t *p = (const uint8_t *)a->data + i * (size_t)a->dtype.size;
            uint64_t u = 0;
            if (too_big) memcpy(&u, p, 8);
            char vb[32];
            if (too_big) snprintf(vb, sizeof vb, "%llu", (unsigned long long)u);
            else snprintf(vb, sizeof vb, "%lld", (long long)v);
            brisk_tensor_free(out);
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: element %zu (value %s) of the %s array does not fit i32",
                                name, i, vb, brisk_npy_type_name(&a->dtype));
        }
        o[i] = (int32_t)v;
    }
    return BRISK_OK;
}

brisk_status brisk_npy_load(const char *path, brisk_dtype want, brisk_tensor *out, brisk_error *err) {
    brisk_npy_array a;
    memset(out, 0, sizeof *out);
    brisk_status st = brisk_npy_read(path, &a, err);
    if (st) return st;
    st = brisk_npy_to_tensor(&a, want, path, out, err);
    brisk_npy_free(&a);
    return st;
}

/* ---------------------------------------------------------------- write */

size_t brisk_npy_header(const brisk_tensor *t, char *buf, size_t cap) {
    char dims[256];
    size_t k = 0;
    for (int i = 0; i < t->shape.ndim; i++)
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%lld,%s", (long long)t->shape.d[i],
                              i + 1 < t->shape.ndim ? " " : "");
    if (t->shape.ndim > 1) dims[--k] = 0; /* NumPy writes "(2, 3)" but "(5,)" */
    dims[k] = 0;
    char dict[400];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                      t->dtype == BRISK_F32 ? "<f4" : "<i4", dims);
    /* Pad with spaces so the data start is 64-byte aligned, as NumPy does. */
    size_t total = 10 + (size_t)dl + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap) return 0;
    size_t hl = total - 10;
    memcpy(buf, npy_magic, 6);
    buf[6] = 1;
    buf[7] = 0;
    brisk_put_le((uint8_t *)buf + 8, hl, 2);
    memcpy(buf + 10, dict, (size_t)dl);
    memset(buf + 10 + dl, ' ', hl - (size_t)dl - 1);
    buf[total - 1] = '\n';
    return total;
}

static brisk_status check_writable(const brisk_tensor *t, const char *name, brisk_error *err) {
    if (t->dtype != BRISK_F32 && t->dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: can write f32 or i32 arrays, not %s", name,
                            brisk_dtype_name(t->dtype));
    if (t->shape.ndim < 0 || t->shape.ndim > BRISK_MAX_DIMS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: bad rank %d", name, t->shape.ndim);
    for (int i = 0; i < t->shape.ndim; i++)
        if (t->shape.d[i] < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: negative dimension", name);
    return BRISK_OK;
}

brisk_status brisk_npy_encode(const brisk_tensor *t, void **buf, size_t *len, brisk_error *err) {
    *buf = NULL;
    *len = 0;
    brisk_status st = check_writable(t, "npy", err);
    if (st) return st;
    char head[512];
    size_t hl = brisk_npy_header(t, head, sizeof head);
    size_t nb = brisk_tensor_bytes(t);
    uint8_t *b = malloc(hl + nb);
    if (!b) return brisk_errorf(err, BRISK_ERR_NOMEM, "npy: cannot allocate %zu bytes", hl + nb);
    memcpy(b, head, hl);
    const uint8_t *src = (const uint8_t *)t->data;
    if (brisk_host_is_le()) memcpy(b + hl, src, nb);
    else for (size_t i = 0; i < nb; i++) b[hl + i] = src[(i & ~(size_t)3) + 3 - (i & 3)];
    *buf = b;
    *len = hl + nb;
    return BRISK_OK;
}

brisk_status brisk_npy_write(const char *path, const brisk_tensor *t, brisk_error *err) {
    brisk_status st = check_writable(t, path, err);
    if (st) return st;
    char head[512];
    size_t hl = brisk_npy_header(t, head, sizeof head);
    brisk_out o;
    if ((st = brisk_out_open(&o, path, err))) return st;
    brisk_out_write(&o, head, hl);
    brisk_out_write_le(&o, t->data, (size_t)brisk_shape_numel(&t->shape), 4);
    return brisk_out_commit(&o, err);
}
