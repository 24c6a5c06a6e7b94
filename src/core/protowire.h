/* core-internal: a protobuf wire-format writer (varints, tags, fixed32/64, length-delimited
 * fields, nested messages) into a growable buffer, a bounds-checked reader of the same wire
 * format, and CRC-32C. TensorBoard event files and ONNX models are protobuf messages; brisk
 * writes and reads the few fields it needs itself rather than depend on protoc-generated code.
 * Not public API, but shared by train/, onnx/ and export code.
 *
 *     brisk_pb m = {0}, sub = {0};
 *     brisk_pb_double(&m, 1, wall_time);        // field 1, wire type 1
 *     brisk_pb_string(&sub, 1, "loss/train");   // field 1, wire type 2
 *     brisk_pb_float(&sub, 2, loss);            // field 2, wire type 5
 *     brisk_pb_message(&m, 5, &sub);            // nested: length + bytes of sub
 *     if (m.oom) ...                            // sticky: any failed growth
 *     brisk_pb_free(&sub); brisk_pb_free(&m);
 *
 * Errors are sticky: after a failed allocation every call is a no-op and `oom` stays set, so
 * a writer builds a whole message and checks once. */
#ifndef BRISK_CORE_PROTOWIRE_H
#define BRISK_CORE_PROTOWIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct brisk_pb {
    uint8_t *p;
    size_t n, cap;
    int oom;
} brisk_pb;

enum { BRISK_PB_VARINT = 0, BRISK_PB_I64 = 1, BRISK_PB_LEN = 2, BRISK_PB_GROUP = 3, BRISK_PB_I32 = 5 };

void brisk_pb_free(brisk_pb *b);
/* Empties the buffer, keeping its memory (and clearing oom). */
void brisk_pb_reset(brisk_pb *b);
void brisk_pb_raw(brisk_pb *b, const void *p, size_t n);
void brisk_pb_varint_raw(brisk_pb *b, uint64_t v);
void brisk_pb_tag(brisk_pb *b, uint32_t field, int wire_type);

void brisk_pb_uint(brisk_pb *b, uint32_t field, uint64_t v);   /* uint32/uint64/bool/enum */
void brisk_pb_int(brisk_pb *b, uint32_t field, int64_t v);     /* int32/int64 (not zigzag) */
void brisk_pb_sint(brisk_pb *b, uint32_t field, int64_t v);    /* sint32/sint64 (zigzag) */
void brisk_pb_float(brisk_pb *b, uint32_t field, float v);
void brisk_pb_double(brisk_pb *b, uint32_t field, double v);
void brisk_pb_fixed32(brisk_pb *b, uint32_t field, uint32_t v);
void brisk_pb_fixed64(brisk_pb *b, uint32_t field, uint64_t v);
void brisk_pb_bytes(brisk_pb *b, uint32_t field, const void *p, size_t n);
void brisk_pb_string(brisk_pb *b, uint32_t field, const char *s);
void brisk_pb_message(brisk_pb *b, uint32_t field, const brisk_pb *sub);
/* Packed repeated fields: one length-delimited field holding the values back to back. */
void brisk_pb_packed_float(brisk_pb *b, uint32_t field, const float *v, size_t n);
void brisk_pb_packed_double(brisk_pb *b, uint32_t field, const double *v, size_t n);
void brisk_pb_packed_int(brisk_pb *b, uint32_t field, const int64_t *v, size_t n);

/* ---------------------------------------------------------------- reading
 * A cursor over one message's bytes (untrusted). Every read is checked against the end; a
 * length-delimited field's bytes are handed out as a pointer into the buffer, never copied.
 *
 *     brisk_pbr r = brisk_pbr_make(buf, len);
 *     brisk_pb_field f;
 *     int rc;
 *     while ((rc = brisk_pbr_next(&r, &f)) > 0)
 *         if (f.num == 7 && f.wire == BRISK_PB_LEN) parse_graph(f.p, f.len);
 *         // any other field: ignored; its bytes were stepped over
 *     if (rc < 0) report(brisk_pbr_why(rc), f.at);
 */
typedef struct brisk_pbr {
    const uint8_t *p;
    size_t n, pos;
} brisk_pbr;

static inline brisk_pbr brisk_pbr_make(const void *p, size_t n) {
    brisk_pbr r = {(const uint8_t *)p, n, 0};
    return r;
}

/* One field as brisk_pbr_next read it. */
typedef struct brisk_pb_field {
    uint32_t num;      /* field number, 1 .. 2^29-1 */
    int wire;          /* BRISK_PB_VARINT, _I64, _I32: in v; _LEN, _GROUP: p and len */
    uint64_t v;        /* fixed32/64 as their bits, little-endian decoded */
    const uint8_t *p;  /* LEN: the field's bytes; GROUP: those between its start and end tags */
    size_t len;
    size_t at;         /* offset of the field's tag in the reader's buffer (also on error) */
} brisk_pb_field;

/* Why a read failed (negative, so that `rc < 0` tests for all of them). */
enum {
    BRISK_PBR_TRUNCATED = -1, /* a tag, varint or fixed value cut by the end of the buffer */
    BRISK_PBR_OVERLONG = -2,  /* a varint of more than 10 bytes, or one past 64 bits */
    BRISK_PBR_BAD_TAG = -3,   /* field number 0 or above 2^29-1 */
    BRISK_PBR_BAD_WIRE = -4,  /* wire type 6 or 7, or an end-group tag without its start */
    BRISK_PBR_PAST_END = -5,  /* a length (or a group) running past the end of the buffer */
    BRISK_PBR_DEEP = -6       /* groups nested deeper than brisk skips (64) */
};

/* Reads the next field: 1, or 0 at the end of the buffer, or a BRISK_PBR_* error (the cursor
 * then stays at the failing tag, f->at). Groups (wire types 3/4, deprecated; ONNX has none)
 * come back whole as BRISK_PB_GROUP so a caller can step over one like any unknown field. */
int brisk_pbr_next(brisk_pbr *r, brisk_pb_field *f);
/* One bare varint at the cursor (packed repeated fields): 1, 0 at the end, or an error. */
int brisk_pbr_varint(brisk_pbr *r, uint64_t *v);
/* The error's text: "truncated", "malformed varint (over 10 bytes)", ... */
const char *brisk_pbr_why(int rc);

/* CRC-32C (Castagnoli), as TFRecord framing uses, and its "masked" form. */
uint32_t brisk_crc32c(uint32_t crc, const void *p, size_t n);
static inline uint32_t brisk_crc32c_masked(const void *p, size_t n) {
    uint32_t c = brisk_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* Appends one TFRecord (the framing of TensorBoard event files) holding data: uint64 length,
 * masked CRC-32C of those 8 bytes, the data, masked CRC-32C of the data, all little-endian. */
void brisk_tfrecord_append(brisk_pb *out, const void *data, size_t n);

#endif
