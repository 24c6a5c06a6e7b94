#include "brisk/core.h"
#include "test.h"

static void test_philox_known_answer(void) {
    /* Random123's published known-answer vector for philox4x32-10 with all-zero input. */
    uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {0, 0}, out[4];
    brisk_philox4x32(ctr, key, out);
    CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
    uint32_t ctr2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, key2[2] = {0xa4093822u, 0x299f31d0u};
    brisk_philox4x32(ctr2, key2, out);
    CHECK(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u);
}

static void test_normal_moments(void) {
    uint32_t key[2] = {7, 0};
    double s = 0, s2 = 0;
    int n = 0;
    for (uint32_t b = 0; b < 50000; b++) {
        uint32_t ctr[4] = {b, 0, 1, 0};
        float v[4];
        brisk_philox_normal4(ctr, key, v);
        for (int i = 0; i < 4; i++) { s += v[i]; s2 += (double)v[i] * v[i]; n++; }
    }
    double mean = s / n, var = s2 / n - mean * mean;
    CHECK_NEAR(mean, 0.0, 0.01);
    CHECK_NEAR(var, 1.0, 0.02);
}

static void test_half_conversions(void) {
    float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 3.14159f};
    for (unsigned i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        float h = brisk_f16_to_f32(brisk_f32_to_f16(vals[i]));
        CHECK_NEAR(h, vals[i], fabs(vals[i]) * 1e-3);
        float b = brisk_bf16_to_f32(brisk_f32_to_bf16(vals[i]));
        CHECK_NEAR(b, vals[i], fabs(vals[i]) * 8e-3);
    }
    CHECK(brisk_f32_to_f16(1e6f) == 0x7c00);
}

static void test_shape_and_errors(void) {
    brisk_shape s = brisk_shape3(2, 3, 4);
    CHECK(brisk_shape_numel(&s) == 24);
    char buf[64];
    CHECK(strcmp(brisk_shape_str(&s, buf, sizeof buf), "[2, 3, 4]") == 0);
    brisk_error e;
    CHECK(brisk_errorf(&e, BRISK_ERR_SHAPE, "x %d", 3) == BRISK_ERR_SHAPE);
    brisk_error_prefix(&e, "file.npy");
    CHECK(strcmp(e.msg, "file.npy: x 3") == 0);
    brisk_dtype dt;
    CHECK(brisk_dtype_from_st_name("BF16", &dt) == 0 && dt == BRISK_BF16);
    CHECK(brisk_dtype_from_st_name("F128", &dt) != 0);
}

TEST_MAIN(T(test_philox_known_answer), T(test_normal_moments), T(test_half_conversions),
          T(test_shape_and_errors))
