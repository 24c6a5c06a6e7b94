/* An ONNX tensor's data, checked: its element type, dims, and bytes from exactly one of
 * raw_data (left in the file's buffer), the typed field its type uses (laid out as the type's
 * own elements), or an external file inside the model's folder (read into the model's memory). */
#include "onnx/onnx_internal.h"
#include "data/bytes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [BRISK_ONNX_UNDEFINED] = {"undefined", 0}, [BRISK_ONNX_FLOAT] = {"float", 4},
    [BRISK_ONNX_UINT8] = {"uint8", 1},         [BRISK_ONNX_INT8] = {"int8", 1},
    [BRISK_ONNX_UINT16] = {"uint16", 2},       [BRISK_ONNX_INT16] = {"int16", 2},
    [BRISK_ONNX_INT32] = {"int32", 4},         [BRISK_ONNX_INT64] = {"int64", 8},
    [BRISK_ONNX_STRING] = {"string", 0},       [BRISK_ONNX_BOOL] = {"bool", 1},
    [BRISK_ONNX_FLOAT16] = {"float16", 2},     [BRISK_ONNX_DOUBLE] = {"double", 8},
    [BRISK_ONNX_UINT32] = {"uint32", 4},       [BRISK_ONNX_UINT64] = {"uint64", 8},
    [BRISK_ONNX_COMPLEX64] = {"complex64", 0}, [BRISK_ONNX_COMPLEX128] = {"complex128", 0},
    [BRISK_ONNX_BFLOAT16] = {"bfloat16", 2},
};
#define N_DTYPES (int)(sizeof dtypes / sizeof dtypes[0])

const char *brisk_onnx_dtype_name(int dtype) {
    static _Thread_local char buf[24];
    if (dtype >= 0 && dtype < N_DTYPES) return dtypes[dtype].name;
    snprintf(buf, sizeof buf, "type %d", dtype);
    return buf;
}

size_t brisk_onnx_dtype_size(int dtype) { return dtype >= 0 && dtype < N_DTYPES ? dtypes[dtype].size : 0; }

const char *brisk_onnx_attr_type_name(int type) {
    static const char *const n[] = {"undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
                                    "strings", "tensors", "graphs", "sparse tensor", "sparse tensors",
                                    "type proto", "type protos"};
    return type >= 0 && type < (int)(sizeof n / sizeof n[0]) ? n[type] : "unknown";
}

/* "[64, 32]", cut with "..." past the buffer. */
static const char *dims_text(const int64_t *d, size_t rank, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < rank && k < cap; i++) {
        if (k + 28 > cap) { k += (size_t)snprintf(buf + k, cap - k, "..."); break; }
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    }
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* A byte count given as text (external_data's offset and length): decimal digits only. */
static int parse_count(const char *s, uint64_t *out) {
    uint64_t v = 0;
    if (!s[0]) return 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9' || v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + (uint64_t)(*c - '0');
    }
    *out = v;
    return 1;
}

/* The data of an EXTERNAL tensor: `need` bytes at offset in the file `location` names, which
 * must lie inside the model's folder. A model is untrusted input: a location of /etc/shadow, of
 * ../../secret or of a symlink pointing out of the folder must not read what it names. */
static brisk_status read_external(onnx_rd *rd, const onnx_tensor_fields *tf, const char *what, size_t need,
                                  const char *dims, const void **data) {
    const char *path = rd->m->path, *loc = tf->ext_location;
    if (!loc || !loc[0])
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: data_location is EXTERNAL but external_data gives no "
                            "'location'", path, what);
    if (!rd->dir)
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: %s: its data is in the external file '%s', and a "
                            "model read from memory has no folder to find it in: open the model by its path", path,
                            what, ONNX_PN(loc));
    if (loc[0] == '/')
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external data location '%s' is an absolute path; "
                            "brisk reads external data only from the model's folder, named relative to it", path,
                            what, ONNX_PN(loc));
    for (const char *c = loc; *c;) {
        size_t len = strcspn(c, "/");
        if (len == 2 && c[0] == '.' && c[1] == '.')
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external data location '%s' leads out of the "
                                "model's folder ('..'); brisk reads external data only from inside it", path, what,
                                ONNX_PN(loc));
        c += len + (c[len] == '/');
    }
    uint64_t off = 0, len = 0;
    int have_len = tf->ext_length != NULL;
    if (tf->ext_offset && !parse_count(tf->ext_offset, &off))
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external_data 'offset' is '%s', not a byte count",
                            path, what, ONNX_PN(tf->ext_offset));
    if (have_len && !parse_count(tf->ext_length, &len))
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external_data 'length' is '%s', not a byte count",
                            path, what, ONNX_PN(tf->ext_length));
    char full[PATH_MAX], real_dir[PATH_MAX], real[PATH_MAX];
    if ((size_t)snprintf(full, sizeof full, "%s/%s", rd->dir, loc) >= sizeof full)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external data location '%s' is too long", path, what,
                            ONNX_PN(loc));
    if (!realpath(rd->dir, real_dir))
        return brisk_errorf(rd->err, BRISK_ERR_IO, "%s: %s: cannot resolve the model's folder '%s': %s", path, what,
                            rd->dir, strerror(errno));
    if (!realpath(full, real))
        return brisk_errorf(rd->err, BRISK_ERR_IO, "%s: %s: cannot open external data file '%s': %s", path, what,
                            ONNX_PN(full), strerror(errno));
    size_t dl = strlen(real_dir);
    int inside = !strcmp(real_dir, "/") || (!strncmp(real, real_dir, dl) && real[dl] == '/');
    if (!inside)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external data location '%s' resolves to '%s', outside "
                            "the model's folder '%s' (a symbolic link leading out); brisk reads external data only "
                            "from inside it", path, what, ONNX_PN(loc), ONNX_PN(real), ONNX_PN(real_dir));
    brisk_rfile f;
    brisk_status st = brisk_rfile_open(&f, real, rd->err);
    if (st) return st;
    if (off > f.len || (have_len && len > f.len - off))
        return brisk_rfile_close(&f, brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external data at offset %llu, "
                                 "%s%llu bytes, runs past the end of '%s' (%llu bytes)", path, what,
                                 (unsigned long long)off, have_len ? "length " : "", (unsigned long long)len,
                                 ONNX_PN(loc), (unsigned long long)f.len), rd->err);
    if (!have_len) len = f.len - off;
    if (len != need)
        return brisk_rfile_close(&f, brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: dims %s of %s need %zu bytes, "
                                 "external data '%s' has %llu", path, what, dims, brisk_onnx_dtype_name((int)tf->dtype),
                                 need, ONNX_PN(loc), (unsigned long long)len), rd->err);
    void *buf = need ? onnx_alloc(rd->m, need) : NULL;
    if (need && !buf)
        return brisk_rfile_close(&f, brisk_errorf(rd->err, BRISK_ERR_NOMEM, "%s: %s: cannot allocate %zu bytes for its "
                                 "external data", path, what, need), rd->err);
    if (need) st = brisk_rfile_read(&f, off, buf, need, rd->err);
    /* the file's own errors name it; the prefix says which model and tensor wanted it */
    if ((st = brisk_rfile_close(&f, st, rd->err))) return brisk_error_prefix(rd->err, "%s: %s", path, what);
    *data = buf;
    return BRISK_OK;
}

/* int32_data holds every type narrower than 32 bits, one value per element; each must fit. */
static brisk_status narrow_int32(onnx_rd *rd, const onnx_tensor_fields *tf, const char *what, size_t size,
                                 void **out) {
    int64_t lo, hi;
    switch (tf->dtype) {
    case BRISK_ONNX_BOOL: lo = 0, hi = 1; break;
    case BRISK_ONNX_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case BRISK_ONNX_UINT8: lo = 0, hi = UINT8_MAX; break;
    case BRISK_ONNX_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case BRISK_ONNX_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    default: lo = 0, hi = UINT16_MAX; break; /* uint16, and float16 / bfloat16 as their bits */
    }
    unsigned char *o = onnx_array(rd->m, tf->n_i32, size);
    if (!o) return brisk_errorf(rd->err, BRISK_ERR_NOMEM, "%s: %s: out of memory", rd->m->path, what);
    for (size_t i = 0; i < tf->n_i32; i++) {
        int64_t v = tf->i32[i];
        if (v < lo || v > hi)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: int32_data[%zu] is %lld, outside %s's range "
                                "[%lld, %lld]", rd->m->path, what, i, (long long)v,
                                brisk_onnx_dtype_name((int)tf->dtype), (long long)lo, (long long)hi);
        memcpy(o + i * size, &v, size); /* the low bytes, little-endian */
    }
    *out = o;
    return BRISK_OK;
}

brisk_status onnx_tensor_finish(onnx_rd *rd, const onnx_tensor_fields *tf, const char *what, brisk_onnx_tensor *out) {
    const char *path = rd->m->path;
    int64_t dt = tf->dtype;
    size_t size = dt >= 0 && dt < N_DTYPES ? dtypes[dt].size : 0;
    if (!size) {
        if (dt == BRISK_ONNX_UNDEFINED)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s has no data_type", path, what);
        if (dt < 0 || dt >= N_DTYPES)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: data_type %lld is no ONNX type", path, what,
                                (long long)dt);
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: %s holds %s values; brisk reads tensors of float, "
                            "double, float16, bfloat16, (u)int8/16/32/64 and bool", path, what, dtypes[dt].name);
    }
    const char *dn = dtypes[dt].name;
    if (tf->rank > 64)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s has %zu dims; brisk reads tensors of up to 64", path,
                            what, tf->rank);
    char dims[160];
    dims_text(tf->dims, tf->rank, dims, sizeof dims);
    /* numel x size must fit both int64_t and size_t */
    const int64_t limit = (int64_t)(((uint64_t)INT64_MAX < SIZE_MAX ? (uint64_t)INT64_MAX : SIZE_MAX) / size);
    int64_t numel = 1;
    for (size_t i = 0; i < tf->rank; i++) {
        int64_t d = tf->dims[i];
        if (d < 0)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: dims %s: dimension %zu is negative", path, what,
                                dims, i);
        if (d && numel > limit / d)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: dims %s of %s overflow: more bytes than a size "
                                "holds", path, what, dims, dn);
        numel *= d;
    }
    size_t need = (size_t)numel * size;

    /* exactly one source of data */
    if (tf->location != 0 && tf->location != 1)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: data_location is %lld; ONNX defines 0 (DEFAULT) and 1 "
                            "(EXTERNAL)", path, what, (long long)tf->location);
    int external = tf->location == 1;
    if (tf->n_external && !external)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s has external_data but data_location is not EXTERNAL",
                            path, what);
    if (tf->n_strings)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: string_data given for a tensor of %s", path, what, dn);
    static const char *const field[] = {"raw_data", "float_data", "int32_data", "int64_data", "double_data",
                                        "uint64_data", "external data"};
    const size_t given[] = {tf->has_raw, tf->n_f32, tf->n_i32, tf->n_i64, tf->n_f64, tf->n_u64, (size_t)external};
    int src = -1;
    for (int i = 0; i < 7; i++) {
        if (!given[i]) continue;
        if (src >= 0)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s holds data in both %s and %s; ONNX allows one",
                                path, what, field[src], field[i]);
        src = i;
    }
    /* the typed field each element type is stored in */
    int typed = dt == BRISK_ONNX_FLOAT ? 1 : dt == BRISK_ONNX_INT64 ? 3 : dt == BRISK_ONNX_DOUBLE ? 4
              : dt == BRISK_ONNX_UINT32 || dt == BRISK_ONNX_UINT64 ? 5 : 2;
    if (src >= 1 && src <= 5 && src != typed)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: %s given for a tensor of %s, which ONNX stores in %s or "
                            "raw_data", path, what, field[src], dn, field[typed]);
    const void *data = NULL;
    if (src == 0 || src < 0) {
        size_t have = src == 0 ? tf->raw_len : 0;
        if (have != need)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: dims %s of %s need %zu bytes, %s%zu", path, what,
                                dims, dn, need, src == 0 ? "raw_data has " : "it holds no data: ", have);
        data = need ? tf->raw : NULL;
    } else if (src == 6) {
        brisk_status st = read_external(rd, tf, what, need, dims, &data);
        if (st) return st;
    } else {
        if (given[src] != (size_t)numel)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: dims %s of %s need %lld values, %s has %zu", path,
                                what, dims, dn, (long long)numel, field[src], given[src]);
        void *narrow = NULL;
        if (src == 2 || dt == BRISK_ONNX_UINT32) {
            if (dt == BRISK_ONNX_UINT32) {
                uint32_t *o = onnx_array(rd->m, tf->n_u64, 4);
                if (!o) return brisk_errorf(rd->err, BRISK_ERR_NOMEM, "%s: %s: out of memory", path, what);
                for (size_t i = 0; i < tf->n_u64; i++) {
                    if (tf->u64[i] > UINT32_MAX)
                        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: uint64_data[%zu] is %llu, outside "
                                            "uint32's range", path, what, i, (unsigned long long)tf->u64[i]);
                    o[i] = (uint32_t)tf->u64[i];
                }
                narrow = o;
            } else {
                brisk_status st = narrow_int32(rd, tf, what, size, &narrow);
                if (st) return st;
            }
        }
        const void *typed_data[] = {NULL, tf->f32, narrow, tf->i64, tf->f64, narrow ? narrow : tf->u64};
        data = numel ? typed_data[src] : NULL;
    }
    out->name = tf->name;
    out->dtype = (int)dt;
    out->rank = (int)tf->rank;
    out->dims = tf->dims;
    out->numel = numel;
    out->data = data;
    out->nbytes = need;
    out->external = external;
    return BRISK_OK;
}
