/* Data movement, any dtype (elements of 1, 2, 4 or 8 bytes), C-contiguous:
 *   CONCAT      (x0..xn-1): along attr.axis, other dims equal
 *   SLICE       (x): attr.axis, start i0, length i1
 *   SLICE_GRAD  (dy): zeros of attr.shape2, dy copied into [i0, i0 + len) on axis
 *   TRANSPOSE   (x): out dim i = x dim perm[i]
 *   EXPAND      (x): NumPy broadcast of x to attr.shape2 (= the node's shape)
 *   CAST        (x): f32, i32, f16, bf16, u8 in any direction; float to int
 *               truncates toward zero and saturates (NaN gives 0), as a C cast
 *               would if it were defined there.
 * (SUM_TO, the reverse of EXPAND, is a reduction and lives in reduce.c.)
 *
 * Concat and slice view a tensor as [outer, axis, inner] and move whole
 * axis*inner runs with memcpy. Transpose drops size-1 dims and merges out dims
 * that stay adjacent in x; if the innermost out dim is contiguous in x it copies
 * rows, if the last two dims are swapped it moves 32 x 32 tiles (both sides stay
 * in cache), and otherwise it gathers with a stride. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/vec8.h"

#include <math.h>
#include <string.h>

static void outer_inner(const brisk_shape *s, int axis, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->d[i];
    for (int i = axis + 1; i < s->ndim; i++) *inner *= s->d[i];
}

static brisk_status concat(const brisk_graph *g, int id, const void *const *in, void *out,
                           brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int axis = n->attr.axis;
    if (axis < 0 || axis >= n->shape.ndim)
        return brisk_errorf(err, BRISK_ERR_INVALID, "concat: axis %d outside [0, %d)", axis, n->shape.ndim);
    size_t es = brisk_dtype_size(n->dtype);
    int64_t outer, inner, total = 0;
    outer_inner(&n->shape, axis, &outer, &inner);
    for (int k = 0; k < n->n_in; k++) {
        const brisk_node *x = IN_NODE(g, id, k);
        if (x->shape.ndim != n->shape.ndim || x->dtype != n->dtype)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "concat: input %d rank or dtype differs", k);
        total += x->shape.d[axis];
    }
    if (total != n->shape.d[axis])
        return brisk_errorf(err, BRISK_ERR_SHAPE, "concat: inputs sum to %lld on axis %d, output %lld",
                            (long long)total, axis, (long long)n->shape.d[axis]);
    size_t row = (size_t)(n->shape.d[axis] * inner) * es;
    int64_t at = 0;
    for (int k = 0; k < n->n_in; k++) {
        size_t run = (size_t)(IN_NODE(g, id, k)->shape.d[axis] * inner) * es;
        const unsigned char *src = in[k];
        unsigned char *dst = (unsigned char *)out + (size_t)at;
        for (int64_t o = 0; o < outer; o++) memcpy(dst + (size_t)o * row, src + (size_t)o * run, run);
        at += (int64_t)run;
    }
    return BRISK_OK;
}

static brisk_status slice(const brisk_graph *g, int id, const void *const *in, void *out,
                          brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_SLICE_GRAD;
    /* full = the larger side (x for SLICE, the output for SLICE_GRAD) */
    const brisk_shape *full = grad ? &n->attr.shape2 : &IN_NODE(g, id, 0)->shape;
    const brisk_shape *part = grad ? &IN_NODE(g, id, 0)->shape : &n->shape;
    int axis = n->attr.axis;
    if (axis < 0 || axis >= full->ndim || full->ndim != part->ndim)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: axis %d outside [0, %d) or rank mismatch",
                            brisk_op_name(n->op), axis, full->ndim);
    int64_t start = n->attr.i0, len = part->d[axis];
    if (start < 0 || start + len > full->d[axis])
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: [%lld, %lld) is outside [0, %lld) on axis %d",
                            brisk_op_name(n->op), (long long)start, (long long)(start + len),
                            (long long)full->d[axis], axis);
    size_t es = brisk_dtype_size(n->dtype);
    int64_t outer, inner;
    outer_inner(full, axis, &outer, &inner);
    size_t frow = (size_t)(full->d[axis] * inner) * es, prow = (size_t)(len * inner) * es;
    size_t off = (size_t)(start * inner) * es;
    if (grad) {
        unsigned char *o = out;
        const unsigned char *s = in[0];
        memset(o, 0, (size_t)outer * frow);
        for (int64_t r = 0; r < outer; r++) memcpy(o + (size_t)r * frow + off, s + (size_t)r * prow, prow);
    } else {
        unsigned char *o = out;
        const unsigned char *s = in[0];
        for (int64_t r = 0; r < outer; r++) memcpy(o + (size_t)r * prow, s + (size_t)r * frow + off, prow);
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- transpose */

typedef struct tr_plan {
    int nd;
    int64_t d[BRISK_MAX_DIMS], s[BRISK_MAX_DIMS]; /* out dims and their strides in x */
} tr_plan;

#define TILE 32

/* Where outer matrix r of the output starts in x (the dims before the last two). */
static int64_t outer_base(const tr_plan *p, int64_t r) {
    int64_t base = 0, q = r;
    for (int i = p->nd - 3; i >= 0; i--) {
        base += (q % p->d[i]) * p->s[i];
        q /= p->d[i];
    }
    return base;
}

/* outer matrices [r0, r1) of the output, each A x B */
#define TRANSPOSE_T(T)                                                                           \
    static void transpose_##T(const tr_plan *p, const T *restrict x, T *restrict o, int64_t r0, int64_t r1) { \
        int nd = p->nd;                                                                          \
        int64_t A = nd >= 2 ? p->d[nd - 2] : 1, B = p->d[nd - 1];                               \
        int64_t sa = nd >= 2 ? p->s[nd - 2] : 0, sb = p->s[nd - 1];                              \
        for (int64_t r = r0; r < r1; r++) {                                                      \
            const T *xb = x + outer_base(p, r);                                                  \
            T *ob = o + r * A * B;                                                               \
            if (sb == 1) {                                                                       \
                for (int64_t a = 0; a < A; a++) memcpy(ob + a * B, xb + a * sa, (size_t)B * sizeof(T)); \
            } else if (sa == 1) {                                                                \
                for (int64_t a0 = 0; a0 < A; a0 += TILE)                                         \
                    for (int64_t b0 = 0; b0 < B; b0 += TILE) {                                   \
                        int64_t a1 = a0 + TILE < A ? a0 + TILE : A, b1 = b0 + TILE < B ? b0 + TILE : B; \
                        for (int64_t a = a0; a < a1; a++)                                        \
                            for (int64_t b = b0; b < b1; b++) ob[a * B + b] = xb[a + b * sb];    \
                    }                                                                            \
            } else {                                                                             \
                for (int64_t a = 0; a < A; a++)                                                  \
                    for (int64_t b = 0; b < B; b++) ob[a * B + b] = xb[a * sa + b * sb];         \
            }                                                                                    \
        }                                                                                        \
    }
TRANSPOSE_T(uint8_t)
TRANSPOSE_T(uint16_t)
TRANSPOSE_T(uint32_t)
TRANSPOSE_T(uint64_t)

/* 4-byte elements with out[a][b] = x[a + b sb] (x's last dim moved before others: a window
 * [N, T, C] turned channels-first): 8 x 8 blocks through registers, the rest as above. */
static void transpose_f32_cols(const tr_plan *p, const float *restrict x, float *restrict o, int64_t r0, int64_t r1) {
    int nd = p->nd;
    int64_t A = p->d[nd - 2], B = p->d[nd - 1], sb = p->s[nd - 1];
    for (int64_t r = r0; r < r1; r++) {
        const float *xb = x + outer_base(p, r);
        float *ob = o + r * A * B;
        int64_t a8 = A / 8 * 8, b8 = B / 8 * 8;
        for (int64_t a0 = 0; a0 < a8; a0 += 8)
            for (int64_t b0 = 0; b0 < b8; b0 += 8) {
                v8 v[8];
                for (int k = 0; k < 8; k++) v[k] = *(const v8u *)(xb + a0 + (b0 + k) * sb);
                transpose8(v);
                for (int k = 0; k < 8; k++) *(v8u *)(ob + (a0 + k) * B + b0) = v[k];
            }
        for (int64_t a = 0; a < A; a++)
            for (int64_t b = a < a8 ? b8 : 0; b < B; b++) ob[a * B + b] = xb[a + b * sb];
    }
}

typedef struct tr_ctx {
    tr_plan p;
    const void *x;
    void *o;
    size_t es;
} tr_ctx;

static void transpose_range(const void *vctx, int64_t r0, int64_t r1) {
    const tr_ctx *c = vctx;
    switch (c->es) {
    case 1: transpose_uint8_t(&c->p, c->x, c->o, r0, r1); break;
    case 2: transpose_uint16_t(&c->p, c->x, c->o, r0, r1); break;
    case 4:
        if (c->p.nd >= 2 && c->p.s[c->p.nd - 2] == 1 && c->p.s[c->p.nd - 1] != 1)
            transpose_f32_cols(&c->p, c->x, c->o, r0, r1);
        else transpose_uint32_t(&c->p, c->x, c->o, r0, r1);
        break;
    default: transpose_uint64_t(&c->p, c->x, c->o, r0, r1); break;
    }
}

/* The outer matrices are independent: split over the threads (a 1-D CNN's [256, 60, 32]
 * windows turned channels-first took 0.4 ms on one). */
static brisk_status transpose(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    const brisk_shape *xs = &IN_NODE(g, id, 0)->shape;
    int nd = n->shape.ndim;
    if (xs->ndim != nd)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "transpose: input rank %d, output rank %d", xs->ndim, nd);
    int64_t xstride[BRISK_MAX_DIMS];
    int seen = 0;
    int64_t st = 1;
    for (int i = nd - 1; i >= 0; i--) { xstride[i] = st; st *= xs->d[i]; }
    for (int i = 0; i < nd; i++) {
        int p = n->attr.perm[i];
        if (p < 0 || p >= nd || (seen >> p) & 1 || xs->d[p] != n->shape.d[i])
            return brisk_errorf(err, BRISK_ERR_INVALID, "transpose: perm[%d] = %d is not a valid permutation "
                                "of %d dims for these shapes", i, p, nd);
        seen |= 1 << p;
    }
    tr_plan p = {0};
    for (int i = 0; i < nd; i++) {
        int64_t d = n->shape.d[i], s = xstride[n->attr.perm[i]];
        if (d == 1) continue;
        if (p.nd && p.s[p.nd - 1] == s * d) {
            p.d[p.nd - 1] *= d;
            p.s[p.nd - 1] = s;
        } else {
            p.d[p.nd] = d;
            p.s[p.nd] = s;
            p.nd++;
        }
    }
    if (p.nd == 0) { p.nd = 1; p.d[0] = 1; p.s[0] = 1; }
    size_t es = brisk_dtype_size(n->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "transpose: element size %zu", es);
    int64_t outer = 1, per = p.nd >= 2 ? p.d[p.nd - 2] * p.d[p.nd - 1] : p.d[0];
    for (int i = 0; i < p.nd - 2; i++) outer *= p.d[i];
    tr_ctx c = {.p = p, .x = in[0], .o = out, .es = es};
    cpu_parallel(cb, outer, CPU_PAR_MIN / (per > 0 ? per : 1) + 1, transpose_range, &c);
    return BRISK_OK;
}

brisk_status cpu_shape_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    for (int k = 0; k < n->n_in; k++)
        if (IN_NODE(g, id, k)->dtype != n->dtype)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: input %d is %s, output %s", brisk_op_name(n->op),
                                k, brisk_dtype_name(IN_NODE(g, id, k)->dtype), brisk_dtype_name(n->dtype));
    switch (n->op) {
    case BRISK_OP_CONCAT: return concat(g, id, in, out, err);
    case BRISK_OP_SLICE: case BRISK_OP_SLICE_GRAD: return slice(g, id, in, out, err);
    case BRISK_OP_TRANSPOSE: return transpose(cb, g, id, in, out, err);
    default: { /* EXPAND */
        const brisk_shape *xs = &IN_NODE(g, id, 0)->shape, *os = &n->shape;
        int off = os->ndim - xs->ndim;
        if (off < 0)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "expand: input has more dims than the target");
        for (int i = 0; i < xs->ndim; i++)
            if (xs->d[i] != 1 && xs->d[i] != os->d[off + i])
                return brisk_errorf(err, BRISK_ERR_SHAPE, "expand: input dim %d is %lld, target %lld", i,
                                    (long long)xs->d[i], (long long)os->d[off + i]);
        cpu_broadcast_copy(in[0], xs, out, os, brisk_dtype_size(n->dtype));
        return BRISK_OK;
    }
    }
}

/* ---------------------------------------------------------------- cast */

static double load_as_double(const void *p, brisk_dtype t, int64_t i) {
    switch (t) {
    case BRISK_F32: return ((const float *)p)[i];
    case BRISK_I32: return ((const int32_t *)p)[i];
    case BRISK_F16: return brisk_f16_to_f32(((const uint16_t *)p)[i]);
    case BRISK_BF16: return brisk_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const uint8_t *)p)[i];
    }
}

static double sat(double v, double lo, double hi) {
    if (v != v) return 0.0;
    v = trunc(v);
    return v < lo ? lo : v > hi ? hi : v;
}

static void store_from_double(void *p, brisk_dtype t, int64_t i, double v) {
    switch (t) {
    case BRISK_F32: ((float *)p)[i] = (float)v; break;
    case BRISK_I32: ((int32_t *)p)[i] = (int32_t)sat(v, -2147483648.0, 2147483647.0); break;
    case BRISK_F16: ((uint16_t *)p)[i] = brisk_f32_to_f16((float)v); break;
    case BRISK_BF16: ((uint16_t *)p)[i] = brisk_f32_to_bf16((float)v); break;
    default: ((uint8_t *)p)[i] = (uint8_t)sat(v, 0.0, 255.0); break;
    }
}

brisk_status cpu_cast(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                      void *out, brisk_error *err) {
    (void)cb;
    const brisk_node *n = NODE(g, id), *x = IN_NODE(g, id, 0);
    int64_t len = cpu_numel(&n->shape);
    if (cpu_numel(&x->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "cast: input and output sizes differ");
    if ((unsigned)x->dtype >= BRISK_DTYPE_COUNT)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cast: input dtype %d", (int)x->dtype);
    if (x->dtype == n->dtype) {
        if (out != in[0]) memmove(out, in[0], (size_t)len * brisk_dtype_size(n->dtype));
        return BRISK_OK;
    }
    if (x->dtype == BRISK_I32 && n->dtype == BRISK_F32) { /* labels and timesteps: the common one */
        const int32_t *s = in[0];
        float *o = out;
#pragma omp simd
        for (int64_t i = 0; i < len; i++) o[i] = (float)s[i];
        return BRISK_OK;
    }
    if (x->dtype == BRISK_F32 && n->dtype == BRISK_BF16) {
        const float *s = in[0];
        uint16_t *o = out;
        for (int64_t i = 0; i < len; i++) o[i] = brisk_f32_to_bf16(s[i]);
        return BRISK_OK;
    }
    for (int64_t i = 0; i < len; i++) store_from_double(out, n->dtype, i, load_as_double(in[0], x->dtype, i));
    return BRISK_OK;
}
