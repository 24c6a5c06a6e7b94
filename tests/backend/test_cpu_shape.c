/* Data movement on the CPU backend, checked element by element: CONCAT on every
 * axis, SLICE and SLICE_GRAD (and out-of-range slices as errors), TRANSPOSE over
 * every permutation of a 4-D tensor with 1-, 2- and 4-byte elements (u8, bf16,
 * f32, i32), a large 2-D transpose (the tiled path), and CAST
 * between all dtypes against the core conversion functions. */
#include "cpu_test_util.h"

static brisk_backend *be;

static void fill_bytes(void *p, size_t n) {
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)tg_rand_u32();
}

static void test_concat(void) {
    for (int axis = 0; axis < 3; axis++) {
        tgraph t;
        tg_init(&t);
        int64_t d0[3] = {3, 4, 5}, d1[3] = {3, 4, 5}, d2[3] = {3, 4, 5}, od[3] = {3, 4, 5};
        d0[axis] = 2; d1[axis] = 1; d2[axis] = 4; od[axis] = 7;
        int x[3] = {tg_input(&t, BRISK_F32, brisk_shape_make(3, d0)), tg_input(&t, BRISK_F32, brisk_shape_make(3, d1)),
                    tg_input(&t, BRISK_F32, brisk_shape_make(3, d2))};
        brisk_attr at = tg_attr0();
        at.axis = axis;
        brisk_shape os = brisk_shape_make(3, od);
        int o = tg_node(&t, BRISK_OP_CONCAT, BRISK_F32, os, &at, 3, x);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be, &t, o, err), err);
        int64_t idx[3], bad = 0;
        for (int64_t f = 0; f < brisk_shape_numel(&os); f++) {
            tg_unflatten(&os, f, idx);
            int k = idx[axis] < 2 ? 0 : idx[axis] < 3 ? 1 : 2;
            idx[axis] -= k == 0 ? 0 : k == 1 ? 2 : 3;
            const brisk_shape *xs = &t.nodes[x[k]].shape;
            int64_t s = (idx[0] * xs->d[1] + idx[1]) * xs->d[2] + idx[2];
            if (tg_f(&t, o)[f] != tg_f(&t, x[k])[s]) bad++;
        }
        CHECKF(bad == 0, "concat axis %d: %lld wrong", axis, (long long)bad);
        tg_free(&t);
    }
}

static void test_slice(void) {
    for (int axis = 0; axis < 3; axis++)
        for (int grad = 0; grad < 2; grad++) {
            tgraph t;
            tg_init(&t);
            brisk_shape full = brisk_shape3(4, 6, 5), part = full;
            part.d[axis] = 2;
            int64_t start = axis == 2 ? 3 : 1;
            brisk_attr at = tg_attr0();
            at.axis = axis;
            at.i0 = start;
            at.i1 = 2;
            at.shape2 = full;
            int x = tg_input(&t, BRISK_F32, grad ? part : full);
            int o = tg_node(&t, grad ? BRISK_OP_SLICE_GRAD : BRISK_OP_SLICE, BRISK_F32, grad ? full : part, &at, 1, &x);
            brisk_error err_s = {0}, *err = &err_s;
            REQUIRE_OK(tg_run(be, &t, o, err), err);
            int64_t idx[3], bad = 0;
            for (int64_t f = 0; f < brisk_shape_numel(&full); f++) {
                tg_unflatten(&full, f, idx);
                int inside = idx[axis] >= start && idx[axis] < start + 2;
                idx[axis] -= start;
                int64_t p = inside ? (idx[0] * part.d[1] + idx[1]) * part.d[2] + idx[2] : -1;
                if (grad) {
                    float want = inside ? tg_f(&t, x)[p] : 0.0f;
                    if (tg_f(&t, o)[f] != want) bad++;
                } else if (inside && tg_f(&t, o)[p] != tg_f(&t, x)[f]) {
                    bad++;
                }
            }
            CHECKF(bad == 0, "slice%s axis %d: %lld wrong", grad ? "_grad" : "", axis, (long long)bad);
            tg_free(&t);
        }
    /* out of range */
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(4, 6));
    brisk_attr at = tg_attr0();
    at.axis = 1;
    at.i0 = 5;
    at.i1 = 2;
    int o = tg_node(&t, BRISK_OP_SLICE, BRISK_F32, brisk_shape2(4, 2), &at, 1, &x);
    brisk_error err = {0};
    CHECK(tg_run(be, &t, o, &err) == BRISK_ERR_INVALID);
    CHECK(strstr(err.msg, "slice") != NULL);
    tg_free(&t);
}

static void run_transpose(brisk_dtype dt, brisk_shape xs, const int *perm) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, dt, xs);
    size_t es = brisk_dtype_size(dt);
    fill_bytes(t.buf[x], t.nodes[x].bytes);
    brisk_shape os = xs;
    brisk_attr at = tg_attr0();
    for (int i = 0; i < xs.ndim; i++) {
        at.perm[i] = perm[i];
        os.d[i] = xs.d[perm[i]];
    }
    int o = tg_node(&t, BRISK_OP_TRANSPOSE, dt, os, &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, &t, o, err), err);
    int64_t oi[6], xi[6], bad = 0;
    for (int64_t f = 0; f < brisk_shape_numel(&os); f++) {
        tg_unflatten(&os, f, oi);
        for (int i = 0; i < xs.ndim; i++) xi[perm[i]] = oi[i];
        int64_t s = 0;
        for (int i = 0; i < xs.ndim; i++) s = s * xs.d[i] + xi[i];
        if (memcmp((char *)t.buf[o] + f * (int64_t)es, (char *)t.buf[x] + s * (int64_t)es, es)) bad++;
    }
    CHECKF(bad == 0, "transpose %s perm %d%d%d%d: %lld wrong", brisk_dtype_name(dt), perm[0], perm[1],
           xs.ndim > 2 ? perm[2] : 0, xs.ndim > 3 ? perm[3] : 0, (long long)bad);
    tg_free(&t);
}

static void test_transpose(void) {
    const brisk_dtype dts[] = {BRISK_F32, BRISK_U8, BRISK_BF16, BRISK_I32};
    brisk_shape xs = brisk_shape4(2, 3, 1, 5);
    int perm[4];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++) {
                int d = 6 - a - b - c;
                if (a == b || a == c || b == c || d < 0 || d > 3 || d == a || d == b || d == c) continue;
                perm[0] = a; perm[1] = b; perm[2] = c; perm[3] = d;
                for (int k = 0; k < 4; k++) run_transpose(dts[k], xs, perm);
            }
    const int p2[2] = {1, 0}, p3[3] = {0, 2, 1};
    run_transpose(BRISK_F32, brisk_shape2(300, 257), p2);
    run_transpose(BRISK_F32, brisk_shape3(4, 60, 33), p3);
    /* an invalid permutation is an error */
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(3, 3));
    brisk_attr at = tg_attr0();
    at.perm[0] = 0;
    at.perm[1] = 0;
    int o = tg_node(&t, BRISK_OP_TRANSPOSE, BRISK_F32, brisk_shape2(3, 3), &at, 1, &x);
    brisk_error err = {0};
    CHECK(tg_run(be, &t, o, &err) == BRISK_ERR_INVALID);
    tg_free(&t);
}

static double as_double(const void *p, brisk_dtype t, int64_t i) {
    switch (t) {
    case BRISK_F32: return ((const float *)p)[i];
    case BRISK_I32: return ((const int32_t *)p)[i];
    case BRISK_F16: return brisk_f16_to_f32(((const uint16_t *)p)[i]);
    case BRISK_BF16: return brisk_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const uint8_t *)p)[i];
    }
}

static void test_cast(void) {
    for (int from = 0; from < BRISK_DTYPE_COUNT; from++)
        for (int to = 0; to < BRISK_DTYPE_COUNT; to++) {
            tgraph t;
            tg_init(&t);
            int64_t n = 1000;
            int x = tg_input(&t, (brisk_dtype)from, brisk_shape1(n));
            for (int64_t i = 0; i < n; i++) {
                double v = (i % 3 == 0) ? (double)(int)(tg_rand_u32() % 200) : tg_randf(-300.0f, 300.0f);
                switch (from) {
                case BRISK_F32: ((float *)t.buf[x])[i] = (float)v; break;
                case BRISK_I32: ((int32_t *)t.buf[x])[i] = (int32_t)v; break;
                case BRISK_F16: ((uint16_t *)t.buf[x])[i] = brisk_f32_to_f16((float)v); break;
                case BRISK_BF16: ((uint16_t *)t.buf[x])[i] = brisk_f32_to_bf16((float)v); break;
                default: ((uint8_t *)t.buf[x])[i] = (uint8_t)(int)fabs(v); break;
                }
            }
            int o = tg_node(&t, BRISK_OP_CAST, (brisk_dtype)to, brisk_shape1(n), NULL, 1, &x);
            brisk_error err_s = {0}, *err = &err_s;
            REQUIRE_OK(tg_run(be, &t, o, err), err);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++) {
                double v = as_double(t.buf[x], (brisk_dtype)from, i), got = as_double(t.buf[o], (brisk_dtype)to, i), want;
                switch (to) {
                case BRISK_F32: want = (float)v; break;
                case BRISK_I32: want = trunc(v); break;
                case BRISK_F16: want = brisk_f16_to_f32(brisk_f32_to_f16((float)v)); break;
                case BRISK_BF16: want = brisk_bf16_to_f32(brisk_f32_to_bf16((float)v)); break;
                default: want = v < 0 ? 0 : v > 255 ? 255 : trunc(v); break;
                }
                if (got != want) bad++;
            }
            CHECKF(bad == 0, "cast %s -> %s: %lld wrong", brisk_dtype_name((brisk_dtype)from),
                   brisk_dtype_name((brisk_dtype)to), (long long)bad);
            tg_free(&t);
        }
}

int main(void) {
    be = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_concat), T(test_slice), T(test_transpose), T(test_cast)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be->destroy(be);
    return r;
}
