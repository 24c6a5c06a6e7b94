/* dtypes: sizes, names, and the 16-bit float conversions. */
#include "brisk/core.h"

#include <string.h>

static const struct { const char *name, *st; size_t size; } dtypes[BRISK_DTYPE_COUNT] = {
    [BRISK_F32] = {"f32", "F32", 4},
    [BRISK_I32] = {"i32", "I32", 4},
    [BRISK_F16] = {"f16", "F16", 2},
    [BRISK_BF16] = {"bf16", "BF16", 2},
    [BRISK_U8] = {"u8", "U8", 1},
};

size_t brisk_dtype_size(brisk_dtype t) { return (unsigned)t < BRISK_DTYPE_COUNT ? dtypes[t].size : 0; }
const char *brisk_dtype_name(brisk_dtype t) { return (unsigned)t < BRISK_DTYPE_COUNT ? dtypes[t].name : "?"; }
const char *brisk_dtype_st_name(brisk_dtype t) { return (unsigned)t < BRISK_DTYPE_COUNT ? dtypes[t].st : "?"; }

int brisk_dtype_from_st_name(const char *s, brisk_dtype *out) {
    for (int i = 0; i < BRISK_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].st) == 0) { *out = (brisk_dtype)i; return 0; }
    return -1;
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float brisk_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t brisk_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float brisk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        float v = (float)man * (1.0f / 16777216.0f); /* subnormal: man * 2^-24 */
        return sign ? -v : v;
    }
    if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t brisk_f32_to_f16(float f) {
    uint32_t u = f2u(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (a < 0x38800000u) {                                   /* subnormal or zero */
        float v = u2f(a) * 16777216.0f;                      /* in units of 2^-24 */
        uint32_t m = (uint32_t)v;
        float rem = v - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}
