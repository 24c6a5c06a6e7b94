/* The brisk half of the Python safetensors interop test (safetensors_python.sh):
 *   write DIR  writes DIR/brisk.safetensors (F32, I32, F16, U8, metadata) and
 *              DIR/brisk_bf16.safetensors (BF16, F32) for Python to check;
 *   read DIR   reads DIR/py.safetensors and DIR/py_bf16.safetensors that Python
 *              wrote and checks every value.
 * Values follow formulas shared with safetensors_python.py, all exact in their
 * dtype, so both sides compare bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/safetensors.h"

enum { NF = 12, NI = 5, NH = 6, NU = 8, NB = 4 };

static void values(float *f, int32_t *i32, uint16_t *h, uint8_t *u, uint16_t *bf) {
    for (int i = 0; i < NF; i++) f[i] = (float)i * 0.25f - 1.5f;
    for (int i = 0; i < NI; i++) i32[i] = i * 100003 - 200000;
    for (int i = 0; i < NH; i++) h[i] = brisk_f32_to_f16((float)i * 0.5f - 1.0f);
    for (int i = 0; i < NU; i++) u[i] = (uint8_t)((i * 37) % 256);
    for (int i = 0; i < NB; i++) bf[i] = brisk_f32_to_bf16((float)i * 0.5f - 1.0f);
}

static int fail(const brisk_error *e) {
    fprintf(stderr, "%s\n", e->msg);
    return 1;
}

static int do_write(const char *dir) {
    float f[NF], scalar = 3.25f;
    int32_t i32[NI];
    uint16_t h[NH], bf[NB];
    uint8_t u[NU];
    values(f, i32, h, u, bf);
    int64_t e2[] = {0, 4};
    brisk_st_entry e[] = {
        {"w.f32", BRISK_F32, brisk_shape2(3, 4), f},       {"b.i32", BRISK_I32, brisk_shape1(NI), i32},
        {"h.f16", BRISK_F16, brisk_shape2(2, 3), h},       {"m.u8", BRISK_U8, brisk_shape3(2, 2, 2), u},
        {"s.f32", BRISK_F32, brisk_shape_make(0, NULL), &scalar}, {"e.f32", BRISK_F32, brisk_shape_make(2, e2), NULL},
    };
    brisk_st_meta meta[] = {{"format", "pt"}, {"brisk.config", "{\"lr\": 0.001, \"name\": \"caf\xC3\xA9\"}"}};
    char path[4096];
    brisk_error err;
    snprintf(path, sizeof path, "%s/brisk.safetensors", dir);
    if (brisk_safetensors_write(path, e, 6, meta, 2, &err)) return fail(&err);
    brisk_st_entry b[] = {{"bf.bf16", BRISK_BF16, brisk_shape1(NB), bf}, {"w.f32", BRISK_F32, brisk_shape2(3, 4), f}};
    snprintf(path, sizeof path, "%s/brisk_bf16.safetensors", dir);
    if (brisk_safetensors_write(path, b, 2, NULL, 0, &err)) return fail(&err);
    return 0;
}

static int check(const brisk_safetensors *st, const char *name, brisk_dtype dt, brisk_shape shape,
                 const void *want, size_t bytes) {
    unsigned char buf[256];
    brisk_error err;
    if (brisk_safetensors_read(st, name, dt, shape, buf, &err)) return fail(&err);
    if (bytes && memcmp(buf, want, bytes) != 0) {
        fprintf(stderr, "%s: tensor '%s': values differ\n", brisk_safetensors_name(st), name);
        return 1;
    }
    return 0;
}

static int do_read(const char *dir) {
    float f[NF], scalar = 3.25f;
    int32_t i32[NI];
    uint16_t h[NH], bf[NB];
    uint8_t u[NU];
    values(f, i32, h, u, bf);
    char path[4096];
    brisk_error err;
    brisk_safetensors *st;
    int bad = 0;
    snprintf(path, sizeof path, "%s/py.safetensors", dir);
    if (brisk_safetensors_open(path, &st, &err)) return fail(&err);
    int64_t e2[] = {0, 4};
    bad |= check(st, "w.f32", BRISK_F32, brisk_shape2(3, 4), f, sizeof f);
    bad |= check(st, "b.i32", BRISK_I32, brisk_shape1(NI), i32, sizeof i32);
    bad |= check(st, "h.f16", BRISK_F16, brisk_shape2(2, 3), h, sizeof h);
    bad |= check(st, "m.u8", BRISK_U8, brisk_shape3(2, 2, 2), u, sizeof u);
    bad |= check(st, "s.f32", BRISK_F32, brisk_shape_make(0, NULL), &scalar, sizeof scalar);
    bad |= check(st, "e.f32", BRISK_F32, brisk_shape_make(2, e2), NULL, 0);
    const char *fmt = brisk_safetensors_meta(st, "format"), *cfg = brisk_safetensors_meta(st, "brisk.config");
    if (brisk_safetensors_count(st) != 6 || !fmt || strcmp(fmt, "pt") || !cfg ||
        strcmp(cfg, "{\"lr\": 0.001, \"name\": \"caf\xC3\xA9\"}")) {
        fprintf(stderr, "%s: tensor count or metadata differ\n", path);
        bad = 1;
    }
    brisk_safetensors_free(st);
    snprintf(path, sizeof path, "%s/py_bf16.safetensors", dir);
    if (brisk_safetensors_open(path, &st, &err)) return fail(&err);
    bad |= check(st, "bf.bf16", BRISK_BF16, brisk_shape1(NB), bf, sizeof bf);
    bad |= check(st, "w.f32", BRISK_F32, brisk_shape2(3, 4), f, sizeof f);
    brisk_safetensors_free(st);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "write") == 0) return do_write(argv[2]);
    if (argc == 3 && strcmp(argv[1], "read") == 0) return do_read(argv[2]);
    fprintf(stderr, "usage: %s write|read DIR\n", argv[0]);
    return 2;
}
