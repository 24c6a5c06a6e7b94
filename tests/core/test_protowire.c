#include "core/protowire.h"
#include "test.h"

#include <string.h>

static int same(const brisk_pb *b, const uint8_t *want, size_t n) { return b->n == n && !memcmp(b->p, want, n); }

static void test_crc32c_known_answers(void) {
    /* The check value of CRC-32C (RFC 3720 appendix B.4 lists the same polynomial). */
    CHECK(brisk_crc32c(0, "123456789", 9) == 0xE3069283u);
    uint8_t zeros[32] = {0};
    CHECK(brisk_crc32c(0, zeros, 32) == 0x8A9136AAu);
    /* Incremental equals one-shot. */
    CHECK(brisk_crc32c(brisk_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u);
}

static void test_varints_and_fields(void) {
    brisk_pb b = {0};
    brisk_pb_uint(&b, 1, 150); /* protobuf's documentation example: 08 96 01 */
    CHECK(same(&b, (const uint8_t[]){0x08, 0x96, 0x01}, 3));
    brisk_pb_reset(&b);
    brisk_pb_string(&b, 2, "testing"); /* 12 07 74 65 73 74 69 6e 67 */
    CHECK(same(&b, (const uint8_t[]){0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}, 9));
    brisk_pb_reset(&b);
    brisk_pb_int(&b, 1, -1); /* int32 -1: ten bytes of varint */
    CHECK(b.n == 11 && b.p[0] == 0x08 && b.p[10] == 0x01 && b.p[9] == 0xff);
    brisk_pb_reset(&b);
    brisk_pb_sint(&b, 1, -1); /* zigzag: 1 */
    CHECK(same(&b, (const uint8_t[]){0x08, 0x01}, 2));
    brisk_pb_reset(&b);
    brisk_pb_float(&b, 2, 1.0f); /* 15 00 00 80 3f */
    CHECK(same(&b, (const uint8_t[]){0x15, 0x00, 0x00, 0x80, 0x3f}, 5));
    brisk_pb_reset(&b);
    brisk_pb_double(&b, 1, 2.0); /* 09 then 8 bytes, 0x4000000000000000 little-endian */
    CHECK(same(&b, (const uint8_t[]){0x09, 0, 0, 0, 0, 0, 0, 0, 0x40}, 9));
    brisk_pb_free(&b);
}

static void test_nested_and_packed(void) {
    brisk_pb m = {0}, sub = {0};
    brisk_pb_uint(&sub, 1, 150);
    brisk_pb_message(&m, 3, &sub); /* 1a 03 08 96 01 */
    CHECK(same(&m, (const uint8_t[]){0x1a, 0x03, 0x08, 0x96, 0x01}, 5));
    brisk_pb_reset(&m);
    int64_t v[] = {3, 270, 86942}; /* the packed example: 22 06 03 8e 02 9e a7 05 */
    brisk_pb_packed_int(&m, 4, v, 3);
    CHECK(same(&m, (const uint8_t[]){0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}, 8));
    brisk_pb_reset(&m);
    float f[] = {1.0f, -2.0f};
    brisk_pb_packed_float(&m, 1, f, 2);
    CHECK(same(&m, (const uint8_t[]){0x0a, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, 10));
    /* A failed sub-message poisons the parent instead of writing a truncated field. */
    sub.oom = 1;
    brisk_pb_message(&m, 5, &sub);
    CHECK(m.oom);
    brisk_pb_free(&m);
    brisk_pb_free(&sub);
}

/* A record as TensorBoard's own RecordWriter frames b"brain.Event:2" (bytes taken from it):
 * length 13, its masked CRC, the data, the data's masked CRC. */
static void test_tfrecord_framing(void) {
    static const uint8_t want[] = {0x0d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3c, 0x37, 0xb8, 0x34,
                                   'b',  'r',  'a',  'i',  'n',  '.',  'E',  'v',  'e',  'n',  't',  ':',
                                   '2',  0xee, 0x01, 0x06, 0x7c};
    brisk_pb b = {0};
    brisk_tfrecord_append(&b, "brain.Event:2", 13);
    CHECK(same(&b, want, sizeof want));
    /* An Event{wall_time 1.5, file_version} as protobuf encodes it: 09 <1.5> 1a 0d ... */
    brisk_pb e = {0};
    brisk_pb_double(&e, 1, 1.5);
    brisk_pb_string(&e, 3, "brain.Event:2");
    static const uint8_t ev[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x1a, 0x0d,
                                 'b',  'r', 'a', 'i', 'n', '.', 'E', 'v', 'e', 'n', 't', ':', '2'};
    CHECK(same(&e, ev, sizeof ev));
    /* Records follow each other: a second one starts right after the first's data CRC. */
    brisk_tfrecord_append(&b, e.p, e.n);
    CHECK(b.n == sizeof want + 16 + e.n && b.p[sizeof want] == e.n && !memcmp(b.p + sizeof want + 12, e.p, e.n));
    brisk_pb_free(&e);
    brisk_pb_free(&b);
}

/* What the writer writes, the reader reads back: every wire type, values at their extremes. */
static void test_reader_round_trip(void) {
    brisk_pb b = {0}, sub = {0};
    brisk_pb_uint(&b, 1, UINT64_MAX);
    brisk_pb_int(&b, 2, -5);
    brisk_pb_fixed32(&b, 3, 0xdeadbeefu);
    brisk_pb_double(&b, 4, -2.5);
    brisk_pb_uint(&sub, 1, 150);
    brisk_pb_message(&b, 536870911, &sub); /* the largest field number */
    int64_t v[] = {3, 270, 86942, -1};
    brisk_pb_packed_int(&b, 6, v, 4);
    REQUIRE(!b.oom);
    brisk_pbr r = brisk_pbr_make(b.p, b.n);
    brisk_pb_field f;
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 1 && f.wire == BRISK_PB_VARINT && f.v == UINT64_MAX && f.at == 0);
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 2 && (int64_t)f.v == -5);
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 3 && f.wire == BRISK_PB_I32 && f.v == 0xdeadbeefu);
    double d;
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 4 && f.wire == BRISK_PB_I64);
    memcpy(&d, &f.v, 8);
    CHECK(d == -2.5);
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 536870911 && f.wire == BRISK_PB_LEN && f.len == 3 && f.p[0] == 0x08);
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 6 && f.wire == BRISK_PB_LEN);
    brisk_pbr pk = brisk_pbr_make(f.p, f.len);
    uint64_t x;
    for (int i = 0; i < 4; i++) CHECK(brisk_pbr_varint(&pk, &x) == 1 && (int64_t)x == v[i]);
    CHECK(brisk_pbr_varint(&pk, &x) == 0);
    CHECK(brisk_pbr_next(&r, &f) == 0);
    brisk_pb_free(&b);
    brisk_pb_free(&sub);
}

static int first_rc(const uint8_t *p, size_t n, brisk_pb_field *f) {
    brisk_pbr r = brisk_pbr_make(p, n);
    int rc;
    while ((rc = brisk_pbr_next(&r, f)) > 0) {}
    return rc;
}

static void test_reader_refuses_malformed(void) {
    brisk_pb_field f;
    /* a varint cut short, in a tag and in a value */
    CHECK(first_rc((const uint8_t[]){0x80}, 1, &f) == BRISK_PBR_TRUNCATED);
    CHECK(first_rc((const uint8_t[]){0x08, 0x96}, 2, &f) == BRISK_PBR_TRUNCATED);
    /* 11 bytes of varint; and 10 whose last carries bits past 64 */
    static const uint8_t over[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK(first_rc(over, sizeof over, &f) == BRISK_PBR_OVERLONG);
    static const uint8_t wide[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    CHECK(first_rc(wide, sizeof wide, &f) == BRISK_PBR_OVERLONG);
    /* field number 0; wire types 6 and 7; an end group with no start */
    CHECK(first_rc((const uint8_t[]){0x00, 0x00}, 2, &f) == BRISK_PBR_BAD_TAG);
    CHECK(first_rc((const uint8_t[]){0x0e}, 1, &f) == BRISK_PBR_BAD_WIRE);
    CHECK(first_rc((const uint8_t[]){0x0f}, 1, &f) == BRISK_PBR_BAD_WIRE);
    CHECK(first_rc((const uint8_t[]){0x0c}, 1, &f) == BRISK_PBR_BAD_WIRE);
    /* a length past the end (after a good field: the error names the bad one's offset) */
    CHECK(first_rc((const uint8_t[]){0x08, 0x01, 0x12, 0x05, 'a', 'b'}, 6, &f) == BRISK_PBR_PAST_END && f.at == 2);
    /* a length of 2^64-1 must not wrap the bounds check */
    static const uint8_t huge[] = {0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK(first_rc(huge, sizeof huge, &f) == BRISK_PBR_PAST_END);
    /* fixed32 / fixed64 cut short */
    CHECK(first_rc((const uint8_t[]){0x0d, 1, 2, 3}, 4, &f) == BRISK_PBR_TRUNCATED);
    CHECK(first_rc((const uint8_t[]){0x09, 1, 2, 3, 4, 5, 6, 7}, 8, &f) == BRISK_PBR_TRUNCATED);
    /* a group without its end, and one closed by another field's end tag */
    CHECK(first_rc((const uint8_t[]){0x0b, 0x08, 0x01}, 3, &f) == BRISK_PBR_PAST_END);
    CHECK(first_rc((const uint8_t[]){0x0b, 0x14}, 2, &f) == BRISK_PBR_BAD_WIRE);
    /* groups nested past the skipper's depth */
    uint8_t deep[70];
    memset(deep, 0x0b, sizeof deep);
    CHECK(first_rc(deep, sizeof deep, &f) == BRISK_PBR_DEEP);
    CHECK(strstr(brisk_pbr_why(BRISK_PBR_PAST_END), "past the end") != NULL);
}

/* Unknown groups are stepped over whole, nested ones included, and reading goes on after. */
static void test_reader_skips_groups(void) {
    static const uint8_t m[] = {0x0b, 0x10, 0x07, 0x1b, 0x20, 0x01, 0x1c, 0x0c, 0x28, 0x09};
    brisk_pbr r = brisk_pbr_make(m, sizeof m);
    brisk_pb_field f;
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 1 && f.wire == BRISK_PB_GROUP && f.len == 6 && f.p == m + 1);
    CHECK(brisk_pbr_next(&r, &f) == 1 && f.num == 5 && f.v == 9);
    CHECK(brisk_pbr_next(&r, &f) == 0);
}

TEST_MAIN(T(test_crc32c_known_answers), T(test_varints_and_fields), T(test_nested_and_packed),
          T(test_tfrecord_framing), T(test_reader_round_trip), T(test_reader_refuses_malformed),
          T(test_reader_skips_groups))
