/* The protobuf wire-format writer and reader and CRC-32C of protowire.h. */
#include "protowire.h"

#include <stdlib.h>
#include <string.h>

void brisk_pb_free(brisk_pb *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void brisk_pb_reset(brisk_pb *b) {
    b->n = 0;
    b->oom = 0;
}

static int grow(brisk_pb *b, size_t k) {
    if (b->oom) return 0;
    if (k <= b->cap - b->n) return 1;
    if (k > SIZE_MAX / 2 - b->n) { b->oom = 1; return 0; }
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n < k) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return 0; }
    b->p = p;
    b->cap = cap;
    return 1;
}

void brisk_pb_raw(brisk_pb *b, const void *p, size_t n) {
    if (!n || !grow(b, n)) return;
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void brisk_pb_varint_raw(brisk_pb *b, uint64_t v) {
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    brisk_pb_raw(b, t, k);
}

void brisk_pb_tag(brisk_pb *b, uint32_t field, int wire_type) {
    brisk_pb_varint_raw(b, ((uint64_t)field << 3) | (uint64_t)wire_type);
}

static void le(brisk_pb *b, uint64_t v, int k) {
    uint8_t t[8];
    for (int i = 0; i < k; i++) t[i] = (uint8_t)(v >> (8 * i));
    brisk_pb_raw(b, t, (size_t)k);
}

void brisk_pb_uint(brisk_pb *b, uint32_t field, uint64_t v) {
    brisk_pb_tag(b, field, BRISK_PB_VARINT);
    brisk_pb_varint_raw(b, v);
}

/* Negative int32/int64 are sign-extended to 64 bits and take ten bytes, as protobuf says. */
void brisk_pb_int(brisk_pb *b, uint32_t field, int64_t v) { brisk_pb_uint(b, field, (uint64_t)v); }

void brisk_pb_sint(brisk_pb *b, uint32_t field, int64_t v) {
    brisk_pb_uint(b, field, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void brisk_pb_fixed32(brisk_pb *b, uint32_t field, uint32_t v) {
    brisk_pb_tag(b, field, BRISK_PB_I32);
    le(b, v, 4);
}

void brisk_pb_fixed64(brisk_pb *b, uint32_t field, uint64_t v) {
    brisk_pb_tag(b, field, BRISK_PB_I64);
    le(b, v, 8);
}

void brisk_pb_float(brisk_pb *b, uint32_t field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    brisk_pb_fixed32(b, field, u);
}

void brisk_pb_double(brisk_pb *b, uint32_t field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    brisk_pb_fixed64(b, field, u);
}

void brisk_pb_bytes(brisk_pb *b, uint32_t field, const void *p, size_t n) {
    brisk_pb_tag(b, field, BRISK_PB_LEN);
    brisk_pb_varint_raw(b, n);
    brisk_pb_raw(b, p, n);
}

void brisk_pb_string(brisk_pb *b, uint32_t field, const char *s) { brisk_pb_bytes(b, field, s, strlen(s)); }

void brisk_pb_message(brisk_pb *b, uint32_t field, const brisk_pb *sub) {
    if (sub->oom) { b->oom = 1; return; }
    brisk_pb_bytes(b, field, sub->p, sub->n);
}

void brisk_pb_packed_float(brisk_pb *b, uint32_t field, const float *v, size_t n) {
    brisk_pb_tag(b, field, BRISK_PB_LEN);
    brisk_pb_varint_raw(b, 4 * (uint64_t)n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        le(b, u, 4);
    }
}

void brisk_pb_packed_double(brisk_pb *b, uint32_t field, const double *v, size_t n) {
    brisk_pb_tag(b, field, BRISK_PB_LEN);
    brisk_pb_varint_raw(b, 8 * (uint64_t)n);
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], 8);
        le(b, u, 8);
    }
}

/* The packed length is the sum of the varints' sizes, so the values go to a scratch first. */
void brisk_pb_packed_int(brisk_pb *b, uint32_t field, const int64_t *v, size_t n) {
    brisk_pb tmp = {0};
    for (size_t i = 0; i < n; i++) brisk_pb_varint_raw(&tmp, (uint64_t)v[i]);
    brisk_pb_message(b, field, &tmp);
    brisk_pb_free(&tmp);
}

int brisk_pbr_varint(brisk_pbr *r, uint64_t *v) {
    if (r->pos >= r->n) return 0;
    uint64_t x = 0;
    for (int k = 0; k < 10; k++) {
        if (r->pos >= r->n) return BRISK_PBR_TRUNCATED;
        uint8_t b = r->p[r->pos++];
        /* the tenth byte holds bit 63 only */
        if (k == 9 && b > 1) return BRISK_PBR_OVERLONG;
        x |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80)) { *v = x; return 1; }
    }
    return BRISK_PBR_OVERLONG;
}

/* The value or span of one field whose tag was read; the cursor moves past it. */
static int field_body(brisk_pbr *r, brisk_pb_field *f) {
    uint64_t v;
    int rc;
    switch (f->wire) {
    case BRISK_PB_VARINT:
        rc = brisk_pbr_varint(r, &f->v);
        return rc == 0 ? BRISK_PBR_TRUNCATED : rc;
    case BRISK_PB_I64:
    case BRISK_PB_I32: {
        size_t k = f->wire == BRISK_PB_I64 ? 8 : 4;
        if (r->n - r->pos < k) return BRISK_PBR_TRUNCATED;
        f->v = 0;
        for (size_t i = k; i-- > 0;) f->v = (f->v << 8) | r->p[r->pos + i];
        r->pos += k;
        return 1;
    }
    case BRISK_PB_LEN:
        rc = brisk_pbr_varint(r, &v);
        if (rc <= 0) return rc == 0 ? BRISK_PBR_TRUNCATED : rc;
        if (v > r->n - r->pos) return BRISK_PBR_PAST_END;
        f->p = r->p + r->pos;
        f->len = (size_t)v;
        r->pos += (size_t)v;
        return 1;
    default:
        return BRISK_PBR_BAD_WIRE;
    }
}

static int read_tag(brisk_pbr *r, brisk_pb_field *f) {
    uint64_t t;
    int rc = brisk_pbr_varint(r, &t);
    if (rc <= 0) return rc;
    if (t >> 3 == 0 || t >> 3 > 0x1fffffff) return BRISK_PBR_BAD_TAG; /* field numbers have 29 bits */
    f->num = (uint32_t)(t >> 3);
    f->wire = (int)(t & 7);
    return 1;
}

/* Steps over a group's fields up to its end tag, nested groups included, without recursion. */
static int skip_group(brisk_pbr *r, brisk_pb_field *f) {
    uint32_t open[64];
    int depth = 0;
    open[depth++] = f->num;
    size_t body = r->pos;
    while (depth) {
        brisk_pb_field g = {0};
        size_t at = r->pos;
        int rc = read_tag(r, &g);
        if (rc == 0) return BRISK_PBR_PAST_END;
        if (rc < 0) return rc;
        if (g.wire == 4) {
            if (g.num != open[depth - 1]) return BRISK_PBR_BAD_WIRE;
            if (--depth == 0) f->len = at - body;
        } else if (g.wire == BRISK_PB_GROUP) {
            if (depth == 64) return BRISK_PBR_DEEP;
            open[depth++] = g.num;
        } else if ((rc = field_body(r, &g)) < 0) {
            return rc == BRISK_PBR_TRUNCATED ? BRISK_PBR_PAST_END : rc;
        }
    }
    f->p = r->p + body;
    return 1;
}

int brisk_pbr_next(brisk_pbr *r, brisk_pb_field *f) {
    memset(f, 0, sizeof *f);
    f->at = r->pos;
    int rc = read_tag(r, f);
    if (rc > 0) {
        if (f->wire == 4) rc = BRISK_PBR_BAD_WIRE;
        else rc = f->wire == BRISK_PB_GROUP ? skip_group(r, f) : field_body(r, f);
    }
    if (rc < 0) r->pos = f->at;
    return rc;
}

const char *brisk_pbr_why(int rc) {
    switch (rc) {
    case BRISK_PBR_TRUNCATED: return "cut short by the end of its message";
    case BRISK_PBR_OVERLONG: return "malformed varint (over 10 bytes, or past 64 bits)";
    case BRISK_PBR_BAD_TAG: return "field number 0 or above 2^29-1";
    case BRISK_PBR_BAD_WIRE: return "unknown wire type (6 or 7) or an unmatched end-group tag";
    case BRISK_PBR_PAST_END: return "length runs past the end of its message";
    case BRISK_PBR_DEEP: return "groups nested more than 64 deep";
    default: return "no error";
    }
}

/* Bitwise CRC-32C, reflected polynomial 0x82F63B78: event files are small and written once
 * per logging step, so a table buys nothing worth its 1 KiB. */
uint32_t brisk_crc32c(uint32_t crc, const void *p, size_t n) {
    const uint8_t *s = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= s[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

void brisk_tfrecord_append(brisk_pb *out, const void *data, size_t n) {
    uint8_t len[8], crc[4];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    uint32_t c = brisk_crc32c_masked(len, 8);
    for (int i = 0; i < 4; i++) crc[i] = (uint8_t)(c >> (8 * i));
    brisk_pb_raw(out, len, 8);
    brisk_pb_raw(out, crc, 4);
    brisk_pb_raw(out, data, n);
    c = brisk_crc32c_masked(data, n);
    for (int i = 0; i < 4; i++) crc[i] = (uint8_t)(c >> (8 * i));
    brisk_pb_raw(out, crc, 4);
}
