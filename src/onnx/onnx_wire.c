/* The ONNX reader's protobuf machinery: a message's bytes checked against its table of fields
 * (onnx_scan), its known fields handed out one by one (onnx_next), repeated numbers packed or
 * not, strings copied out, errors that say where in the file; and the model's memory, blocks
 * freed together. onnx_read.c holds the tables and what each message means. */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int onnx_slot(const pmsg *d, uint32_t num) {
    for (int i = 0; i < d->n; i++)
        if (d->f[i].num == num) return i;
    return -1;
}

int onnx_wire_ok(int kind, int wire) {
    switch (kind) {
    case K_VARINT: return wire == BRISK_PB_VARINT;
    case K_FIXED32: return wire == BRISK_PB_I32;
    case K_REP_VARINT: return wire == BRISK_PB_VARINT || wire == BRISK_PB_LEN;
    case K_REP_FIXED32: return wire == BRISK_PB_I32 || wire == BRISK_PB_LEN;
    case K_REP_FIXED64: return wire == BRISK_PB_I64 || wire == BRISK_PB_LEN;
    default: return wire == BRISK_PB_LEN;
    }
}

static const char *wire_name(int wire) {
    static const char *const n[] = {"varint", "fixed64", "length-delimited", "group", "end-group", "fixed32"};
    return wire >= 0 && wire <= 5 ? n[wire] : "unknown";
}

/* ---------------------------------------------------------------- errors */

brisk_status onnx_oom(onnx_rd *rd) {
    return brisk_errorf(rd->err, BRISK_ERR_NOMEM, "%s: out of memory while reading the model", rd->m->path);
}

/* "graph.node[3]: " or "" at the top. */
#define AT(where) (where)[0] ? (where) : "", (where)[0] ? ": " : ""

static brisk_status wire_error(onnx_rd *rd, const pmsg *d, const char *where, const uint8_t *p, size_t n,
                               size_t at, int rc) {
    int top = !where[0]; /* ModelProto, the file itself */
    /* The field's number (and, for a length past the end, the length it declares) again. */
    brisk_pbr r = brisk_pbr_make(p, n);
    r.pos = at;
    uint64_t tag = 0, len = 0;
    int have_tag = brisk_pbr_varint(&r, &tag) == 1 && tag >> 3;
    int have_len = have_tag && (tag & 7) == BRISK_PB_LEN && brisk_pbr_varint(&r, &len) == 1;
    int s = have_tag ? onnx_slot(d, (uint32_t)(tag >> 3)) : -1;
    char field[96];
    if (s >= 0) snprintf(field, sizeof field, "%s (%s field %u)", d->f[s].name, d->name, (unsigned)(tag >> 3));
    else if (have_tag) snprintf(field, sizeof field, "%s field %llu", d->name, (unsigned long long)(tag >> 3));
    else snprintf(field, sizeof field, "a %s field", d->name);
    size_t abs_at = (size_t)(p - rd->base) + at;
    if (rc == BRISK_PBR_PAST_END && have_len)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s%s%s%s at byte %zu needs %llu bytes, %s has %zu after it%s",
                            rd->m->path, top ? "truncated: " : "damaged: ", AT(where), field, abs_at,
                            (unsigned long long)len, top ? "the file" : "its message", n - r.pos,
                            top ? " (the file was cut short)" : "");
    if (top && (rc == BRISK_PBR_TRUNCATED || rc == BRISK_PBR_PAST_END))
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: truncated: %s at byte %zu is cut short by the end of the file",
                            rd->m->path, field, abs_at);
    return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: damaged: %s%s%s at byte %zu: %s", rd->m->path, AT(where),
                        field, abs_at, brisk_pbr_why(rc));
}

/* ---------------------------------------------------------------- the two passes */

/* Checks every field of a message and counts the known ones: messages and strings per
 * occurrence, repeated scalars per value (a packed run counts each). */
brisk_status onnx_scan(onnx_rd *rd, const pmsg *d, const uint8_t *p, size_t n, const char *where, size_t *cnt) {
    static const char *const expected[] = {
        [K_VARINT] = "varint", [K_FIXED32] = "fixed32", [K_REP_VARINT] = "varint or packed",
        [K_REP_FIXED32] = "fixed32 or packed", [K_REP_FIXED64] = "fixed64 or packed", [K_STRING] = "length-delimited",
        [K_MSG] = "length-delimited", [K_REP_STRING] = "length-delimited", [K_REP_MSG] = "length-delimited"};
    if (d->n > MAX_FIELDS)
        return brisk_errorf(rd->err, BRISK_ERR_INTERNAL, "%s: the reader's table of %s has %d fields, over %d",
                            rd->m->path, d->name, d->n, MAX_FIELDS);
    memset(cnt, 0, sizeof(size_t) * MAX_FIELDS);
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    int rc;
    while ((rc = brisk_pbr_next(&r, &f)) > 0) {
        int s = onnx_slot(d, f.num);
        if (s < 0) continue;
        int kind = d->f[s].kind;
        if (!onnx_wire_ok(kind, f.wire))
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: damaged: %s%s%s (%s field %u) at byte %zu is %s, "
                                "expected %s", rd->m->path, AT(where), d->f[s].name, d->name, (unsigned)f.num,
                                (size_t)(p - rd->base) + f.at, wire_name(f.wire),
                                expected[kind]);
        size_t k = 1;
        if (f.wire == BRISK_PB_LEN && (kind == K_REP_FIXED32 || kind == K_REP_FIXED64)) {
            size_t es = kind == K_REP_FIXED32 ? 4 : 8;
            if (f.len % es)
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: damaged: %s%spacked %s (%s field %u) at byte %zu "
                                    "holds %zu bytes, not a multiple of %zu", rd->m->path, AT(where), d->f[s].name,
                                    d->name, (unsigned)f.num, (size_t)(p - rd->base) + f.at, f.len, es);
            k = f.len / es;
        } else if (f.wire == BRISK_PB_LEN && kind == K_REP_VARINT) {
            brisk_pbr v = brisk_pbr_make(f.p, f.len);
            uint64_t x;
            for (k = 0; (rc = brisk_pbr_varint(&v, &x)) > 0;) k++;
            if (rc < 0)
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: damaged: %s%spacked %s (%s field %u) at byte %zu: "
                                    "value %zu: %s", rd->m->path, AT(where), d->f[s].name, d->name, (unsigned)f.num,
                                    (size_t)(p - rd->base) + f.at, k, brisk_pbr_why(rc));
        }
        cnt[s] += k;
        if (kind == K_MSG && cnt[s] > 1)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s%s%s (%s field %u) is given more than once; brisk "
                                "reads models that give it once", rd->m->path, AT(where), d->f[s].name, d->name,
                                (unsigned)f.num);
    }
    return rc < 0 ? wire_error(rd, d, where, p, n, f.at, rc) : BRISK_OK;
}

/* The next known field of a message onnx_scan() accepted: its slot, or -1 at the end. */
int onnx_next(brisk_pbr *r, const pmsg *d, brisk_pb_field *f) {
    while (brisk_pbr_next(r, f) > 0) {
        int s = onnx_slot(d, f->num);
        if (s >= 0 && onnx_wire_ok(d->f[s].kind, f->wire)) return s;
    }
    return -1;
}

/* Appends a repeated varint field's values (one, or a packed run) at dst[*k]. */
void onnx_rep_varint(const brisk_pb_field *f, uint64_t *dst, size_t *k) {
    if (f->wire != BRISK_PB_LEN) { dst[(*k)++] = f->v; return; }
    brisk_pbr v = brisk_pbr_make(f->p, f->len);
    uint64_t x;
    while (brisk_pbr_varint(&v, &x) > 0) dst[(*k)++] = x;
}

/* Appends a repeated fixed-size field's values; the wire's little-endian bytes are the host's. */
void onnx_rep_fixed(const brisk_pb_field *f, void *dst, size_t size, size_t *k) {
    if (f->wire == BRISK_PB_LEN && !f->len) return; /* an empty packed run: nothing, not even dst */
    unsigned char *o = (unsigned char *)dst + *k * size;
    if (f->wire != BRISK_PB_LEN) { memcpy(o, &f->v, size); (*k)++; return; }
    memcpy(o, f->p, f->len);
    *k += f->len / size;
}

/* A NUL-terminated copy in the model's memory. */
char *onnx_dup(onnx_rd *rd, const uint8_t *p, size_t n) {
    if (n == SIZE_MAX) return NULL;
    char *s = onnx_alloc(rd->m, n + 1);
    if (s && n) memcpy(s, p, n);
    return s;
}

/* A string field that must be text: a NUL byte inside would cut it short as a C string (and
 * make two different names compare equal). */
brisk_status onnx_text(onnx_rd *rd, const brisk_pb_field *f, const pmsg *d, const char *where, const char **out) {
    if (memchr(f->p, 0, f->len))
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s%s%s (%s field %u) holds a NUL byte", rd->m->path,
                            AT(where), d->f[onnx_slot(d, f->num)].name, d->name, (unsigned)f->num);
    char *s = onnx_dup(rd, f->p, f->len);
    if (!s) return onnx_oom(rd);
    *out = s;
    return BRISK_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A name given twice among n (sorted, so that a file of many cannot make this quadratic): it, or
 * NULL. `names` is reordered. */
const char *onnx_duplicate(const char **names, size_t n) {
    if (n < 2) return NULL;
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) return names[i];
    return NULL;
}

/* ---------------------------------------------------------------- memory */

void *onnx_alloc(brisk_onnx_model *m, size_t n) {
    struct brisk_onnx_priv *pv = m->priv;
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    onnx_block *b = pv->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 60000 ? n : 60000;
        if (cap > SIZE_MAX - sizeof *b) return NULL;
        onnx_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        /* a large block goes behind the current one, which keeps its free room */
        if (b && cap == n) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            pv->blocks = nb;
        }
        b = nb;
    }
    void *q = b->mem + b->used;
    b->used += n;
    memset(q, 0, n);
    return q;
}

void *onnx_array(brisk_onnx_model *m, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size / 2) return NULL;
    return onnx_alloc(m, count * size);
}
