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

TEST_MAIN(T(test_crc32c_known_answers), T(test_varints_and_fields), T(test_nested_and_packed),
          T(test_tfrecord_framing))
