/* safetensors reader: parses and validates a whole file image (untrusted input)
 * before handing out any tensor; lookups by name and in file order, metadata. The
 * writer is in safetensors_write.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "brisk/safetensors.h"
#include "data/bytes.h"
#include "data/safetensors_internal.h"

struct brisk_safetensors {
    char *name;
    unsigned char *owned;          /* the file image when read from a path */
    const unsigned char *data;     /* the data buffer (after the header) */
    size_t data_len;
    cJSON *header;                 /* names and metadata point into it */
    brisk_st_tensor *tensors;      /* by data offset */
    size_t n;
    size_t *by_name;               /* indices into tensors, sorted by name */
    const char **meta_key, **meta_val;
    size_t n_meta;
};

/* ---------------------------------------------------------------- helpers */

const char *brisk_st_printable(const char *s, char *buf, size_t cap) {
    size_t k = 0;
    for (; s[k] && k + 4 < cap && k < 80; k++) {
        unsigned char c = (unsigned char)s[k];
        buf[k] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (s[k] && k + 4 < cap) { memcpy(buf + k, "...", 3); k += 3; }
    buf[k] = 0;
    return buf;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A JSON number that is an exact non-negative integer (offsets, dimensions). JSON
 * numbers arrive as doubles: 2^53 bounds what they hold exactly. */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double x = v->valuedouble;
    if (!(x >= 0 && x <= 9007199254740992.0) || x != (double)(uint64_t)x) return 0;
    *out = (uint64_t)x;
    return 1;
}

static int cmp_offset(const void *a, const void *b) {
    const brisk_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* qsort has no context argument in C11; the index array carries its table. */
typedef struct { size_t idx; const char *name; } name_ref;
static int cmp_name_ref(const void *a, const void *b) {
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

/* ---------------------------------------------------------------- one tensor entry */

static brisk_status parse_entry(brisk_safetensors *st, const cJSON *e, brisk_st_tensor *t, brisk_error *err) {
    char nm[96], sh[160];
    brisk_st_printable(t->name, nm, sizeof nm);
    if (!cJSON_IsObject(e))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': expected an object with dtype, shape "
                            "and data_offsets", st->name, nm);
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *c = e->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0 ? &dtype
                           : strcmp(c->string, "shape") == 0 ? &shape
                           : strcmp(c->string, "data_offsets") == 0 ? &offs : NULL;
        char key[96];
        if (!slot)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': unexpected key '%s'", st->name, nm,
                                brisk_st_printable(c->string, key, sizeof key));
        if (*slot)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': duplicate key '%s'", st->name, nm, c->string);
        *slot = c;
    }
    if (!dtype || !shape || !offs)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': missing %s", st->name, nm,
                            !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    char dn[96];
    if (!cJSON_IsString(dtype))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': dtype must be a string", st->name, nm);
    if (brisk_dtype_from_st_name(dtype->valuestring, &t->dtype) != 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED,
                            "%s: tensor '%s': unsupported dtype '%s' (brisk reads F32, I32, F16, BF16, U8)",
                            st->name, nm, brisk_st_printable(dtype->valuestring, dn, sizeof dn));

    if (!cJSON_IsArray(shape))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': shape must be an array of non-negative "
                            "integers", st->name, nm);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > BRISK_MAX_DIMS)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions; brisk supports at most %d",
                            st->name, nm, ndim, BRISK_MAX_DIMS);
    memset(&t->shape, 0, sizeof t->shape);
    t->shape.ndim = ndim;
    uint64_t numel = 1;
    int overflow = 0, i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': shape must be an array of non-negative "
                                "integers", st->name, nm);
        t->shape.d[i] = (int64_t)v;
        overflow |= __builtin_mul_overflow(numel, v, &numel);
    }
    uint64_t nbytes;
    overflow |= __builtin_mul_overflow(numel, (uint64_t)brisk_dtype_size(t->dtype), &nbytes);
    brisk_shape_str(&t->shape, sh, sizeof sh);
    if (overflow)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': shape %s %s is too large", st->name, nm, sh,
                            brisk_dtype_st_name(t->dtype));

    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &t->begin) ||
        !json_uint(offs->child->next, &t->end) || t->begin > t->end)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': data_offsets must be [begin, end] with "
                            "0 <= begin <= end", st->name, nm);
    if (t->end - t->begin != nbytes)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, "
                            "shape %s %s needs %llu", st->name, nm, (unsigned long long)t->begin,
                            (unsigned long long)t->end, (unsigned long long)(t->end - t->begin), sh,
                            brisk_dtype_st_name(t->dtype), (unsigned long long)nbytes);
    if (t->end > st->data_len)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end "
                            "of the data buffer (%zu bytes)", st->name, nm, (unsigned long long)t->begin,
                            (unsigned long long)t->end, st->data_len);
    t->data = st->data + t->begin;
    t->nbytes = (size_t)nbytes;
    return BRISK_OK;
}

static brisk_status parse_metadata(brisk_safetensors *st, const cJSON *m, brisk_error *err) {
    if (cJSON_IsNull(m)) return BRISK_OK;
    if (!cJSON_IsObject(m))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: __metadata__ must be an object of strings", st->name);
    size_t n = 0;
    for (const cJSON *c = m->child; c; c = c->next) n++;
    st->meta_key = malloc((n ? n : 1) * sizeof *st->meta_key);
    st->meta_val = malloc((n ? n : 1) * sizeof *st->meta_val);
    if (!st->meta_key || !st->meta_val) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", st->name);
    for (const cJSON *c = m->child; c; c = c->next) {
        char key[96];
        if (!cJSON_IsString(c))
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: __metadata__ '%s': value must be a string", st->name,
                                brisk_st_printable(c->string, key, sizeof key));
        for (size_t k = 0; k < st->n_meta; k++)
            if (strcmp(st->meta_key[k], c->string) == 0)
                return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: __metadata__: duplicate key '%s'", st->name,
                                    brisk_st_printable(c->string, key, sizeof key));
        st->meta_key[st->n_meta] = c->string;
        st->meta_val[st->n_meta++] = c->valuestring;
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- the header */

static brisk_status parse_header(brisk_safetensors *st, const unsigned char *buf, size_t len, brisk_error *err) {
    if (len < 8)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file", st->name, len);
    uint64_t hn = le64(buf);
    if (hn > BRISK_ST_MAX_HEADER)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header length %llu exceeds the %u-byte limit (not a "
                            "safetensors file?)", st->name, (unsigned long long)hn, BRISK_ST_MAX_HEADER);
    if (hn > len - 8)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu "
                            "bytes)", st->name, (unsigned long long)hn, len);
    const unsigned char *h = buf + 8;
    st->data = h + hn;
    st->data_len = len - 8 - (size_t)hn;
    size_t bad = brisk_utf8_bad(h, (size_t)hn);
    if (bad != (size_t)-1)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header is not valid UTF-8 (byte %zu)", st->name, bad + 8);
    if (memchr(h, 0, (size_t)hn))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header contains a NUL byte", st->name);
    char *text = malloc((size_t)hn + 1);
    if (!text) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory for the header", st->name);
    memcpy(text, h, (size_t)hn);
    text[hn] = 0;
    const char *end = NULL;
    st->header = cJSON_ParseWithOpts(text, &end, 1);
    size_t at = end ? (size_t)(end - text) : 0;
    free(text);
    if (!st->header)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header is not valid JSON (error at byte %zu)", st->name,
                            at + 8);
    if (!cJSON_IsObject(st->header))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: header must be a JSON object", st->name);

    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *c = st->header->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") != 0) n++;
        else if (meta) return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: two __metadata__ entries", st->name);
        else meta = c;
    }
    if (meta) {
        brisk_status s = parse_metadata(st, meta, err);
        if (s) return s;
    }
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    st->by_name = malloc((n ? n : 1) * sizeof *st->by_name);
    name_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!st->tensors || !st->by_name || !refs) {
        free(refs);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory for %zu tensors", st->name, n);
    }
    brisk_status s = BRISK_OK;
    for (const cJSON *c = st->header->child; c && !s; c = c->next) {
        if (c == meta) continue;
        brisk_st_tensor *t = &st->tensors[st->n++];
        t->name = c->string;
        s = parse_entry(st, c, t, err);
    }
    if (!s) {
        qsort(st->tensors, st->n, sizeof *st->tensors, cmp_offset);
        /* Sorted by begin, an overlap is a non-empty tensor starting before the
         * furthest end seen so far; empty tensors occupy no bytes. */
        uint64_t max_end = 0;
        const brisk_st_tensor *owner = NULL;
        for (size_t i = 0; i < st->n && !s; i++) {
            const brisk_st_tensor *t = &st->tensors[i];
            if (t->begin == t->end) continue;
            if (owner && t->begin < max_end) {
                char a[96], b[96];
                s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                                 st->name, brisk_st_printable(owner->name, a, sizeof a),
                                 (unsigned long long)owner->begin, (unsigned long long)owner->end,
                                 brisk_st_printable(t->name, b, sizeof b), (unsigned long long)t->begin,
                                 (unsigned long long)t->end);
            }
            if (t->end > max_end) { max_end = t->end; owner = t; }
        }
    }
    if (!s) {
        for (size_t i = 0; i < st->n; i++) refs[i] = (name_ref){i, st->tensors[i].name};
        qsort(refs, st->n, sizeof *refs, cmp_name_ref);
        for (size_t i = 0; i < st->n; i++) {
            st->by_name[i] = refs[i].idx;
            if (i && strcmp(refs[i - 1].name, refs[i].name) == 0) {
                char a[96];
                s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: duplicate tensor name '%s'", st->name,
                                 brisk_st_printable(refs[i].name, a, sizeof a));
                break;
            }
        }
    }
    free(refs);
    return s;
}

/* ---------------------------------------------------------------- public */

brisk_status brisk_safetensors_parse(const void *buf, size_t len, const char *name, brisk_safetensors **out,
                                     brisk_error *err) {
    *out = NULL;
    brisk_safetensors *st = calloc(1, sizeof *st);
    if (st) st->name = strdup(name ? name : "<memory>");
    if (!st || !st->name) {
        free(st);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name ? name : "<memory>");
    }
    brisk_status s = parse_header(st, buf, len, err);
    if (s) { brisk_safetensors_free(st); return s; }
    *out = st;
    return BRISK_OK;
}

brisk_status brisk_safetensors_open(const char *path, brisk_safetensors **out, brisk_error *err) {
    *out = NULL;
    brisk_file f;
    brisk_status s = brisk_file_load(path, &f, err);
    if (s) return s;
    if ((s = brisk_safetensors_parse(f.data, f.len, path, out, err))) { brisk_file_release(&f); return s; }
    (*out)->owned = f.mem; /* the tensors point into it */
    return BRISK_OK;
}

void brisk_safetensors_free(brisk_safetensors *st) {
    if (!st) return;
    cJSON_Delete(st->header);
    free(st->tensors);
    free(st->by_name);
    free(st->meta_key);
    free(st->meta_val);
    free(st->owned);
    free(st->name);
    free(st);
}

const char *brisk_safetensors_name(const brisk_safetensors *st) { return st->name; }
size_t brisk_safetensors_count(const brisk_safetensors *st) { return st->n; }
const brisk_st_tensor *brisk_safetensors_at(const brisk_safetensors *st, size_t i) {
    return i < st->n ? &st->tensors[i] : NULL;
}

const brisk_st_tensor *brisk_safetensors_find(const brisk_safetensors *st, const char *name) {
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const brisk_st_tensor *t = &st->tensors[st->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid; else lo = mid + 1;
    }
    return NULL;
}

size_t brisk_safetensors_meta_count(const brisk_safetensors *st) { return st->n_meta; }
const char *brisk_safetensors_meta(const brisk_safetensors *st, const char *key) {
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_key[i], key) == 0) return st->meta_val[i];
    return NULL;
}
void brisk_safetensors_meta_at(const brisk_safetensors *st, size_t i, const char **key, const char **value) {
    *key = i < st->n_meta ? st->meta_key[i] : NULL;
    *value = i < st->n_meta ? st->meta_val[i] : NULL;
}

static brisk_status find_or_fail(const brisk_safetensors *st, const char *name, const brisk_st_tensor **t,
                                 brisk_error *err) {
    *t = brisk_safetensors_find(st, name);
    if (*t) return BRISK_OK;
    char a[96];
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no tensor '%s'", st->name, brisk_st_printable(name, a, sizeof a));
}

brisk_status brisk_safetensors_read(const brisk_safetensors *st, const char *name, brisk_dtype dtype,
                                    brisk_shape shape, void *dst, brisk_error *err) {
    const brisk_st_tensor *t;
    brisk_status s = find_or_fail(st, name, &t, err);
    if (s) return s;
    if (t->dtype != dtype || !brisk_shape_equal(&t->shape, &shape)) {
        char a[96], fs[160], ws[160];
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: tensor '%s': file has %s %s, expected %s %s", st->name,
                            brisk_st_printable(name, a, sizeof a), brisk_shape_str(&t->shape, fs, sizeof fs),
                            brisk_dtype_st_name(t->dtype), brisk_shape_str(&shape, ws, sizeof ws),
                            brisk_dtype_st_name(dtype));
    }
    if (t->nbytes) memcpy(dst, t->data, t->nbytes);
    return BRISK_OK;
}

brisk_status brisk_safetensors_load(const brisk_safetensors *st, const char *name, brisk_tensor *out,
                                    brisk_error *err) {
    const brisk_st_tensor *t;
    out->data = NULL;
    brisk_status s = find_or_fail(st, name, &t, err);
    if (s) return s;
    if ((s = brisk_tensor_alloc(out, t->dtype, t->shape, err))) return brisk_error_prefix(err, "%s", st->name);
    if (t->nbytes) memcpy(out->data, t->data, t->nbytes);
    return BRISK_OK;
}
