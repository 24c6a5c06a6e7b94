/* Elementwise kernels with broadcasting, f32, C-contiguous (the unary ones are unary.c's):
 *   ADD/SUB/MUL/DIV, MINIMUM/MAXIMUM, POW_XY
 *                    out = x op y with NumPy broadcasting (out = broadcast shape)
 *   BINARY_GRAD      (dy, x, y): the gradient of MINIMUM, MAXIMUM or POW_XY (attr.kind)
 *                    with respect to input attr.i0, in the broadcast shape, as PyTorch's
 *                    backward formulas (ties of min/max split dy in halves)
 *   BIAS_ADD         out[r, j] = x[r, j] + b[j]          (x [rows, N], b [N])
 *   GRAD_ACCUM       out = g on the first micro-batch, out += g after
 * and the strided broadcast copy behind EXPAND.
 *
 * Broadcasting: operand shapes are right-aligned to the output, each dim gets a
 * stride (0 where the operand has size 1), size-1 output dims are dropped and
 * neighbouring dims merged while every operand stays contiguous across them. What
 * is left is a set of rows over the innermost dim with per-operand inner stride 0
 * or 1 - three loop shapes that vectorise ([R, C] + [C], [R, C] + [R, 1], equal). */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- broadcasting */

typedef struct bcast {
    int nd;                          /* collapsed dims */
    int64_t d[BRISK_MAX_DIMS];
    int64_t s[3][BRISK_MAX_DIMS];    /* per operand, in elements */
} bcast;

/* Strides of operand shape `xs` right-aligned to `os` (0 on broadcast dims). */
static void bcast_strides(const brisk_shape *xs, const brisk_shape *os, int64_t *st) {
    int off = os->ndim - xs->ndim;
    int64_t s = 1;
    for (int i = os->ndim - 1; i >= 0; i--) {
        int j = i - off;
        if (j < 0 || xs->d[j] == 1) st[i] = 0;
        else { st[i] = s; s *= xs->d[j]; }
    }
}

static void bcast_build(bcast *b, const brisk_shape *os, const brisk_shape *const *xs, int nops) {
    int64_t st[3][BRISK_MAX_DIMS];
    for (int k = 0; k < nops; k++) bcast_strides(xs[k], os, st[k]);
    b->nd = 0;
    for (int i = 0; i < os->ndim; i++) {
        if (os->d[i] == 1) continue;
        int merge = b->nd > 0;
        for (int k = 0; k < nops && merge; k++)
            if (b->s[k][b->nd - 1] != st[k][i] * os->d[i]) merge = 0;
        if (merge) {
            b->d[b->nd - 1] *= os->d[i];
            for (int k = 0; k < nops; k++) b->s[k][b->nd - 1] = st[k][i];
        } else {
            b->d[b->nd] = os->d[i];
            for (int k = 0; k < nops; k++) b->s[k][b->nd] = st[k][i];
            b->nd++;
        }
    }
    if (b->nd == 0) { /* a scalar output */
        b->nd = 1;
        b->d[0] = 1;
        for (int k = 0; k < nops; k++) b->s[k][0] = 0;
    }
}

/* Element offsets of row r (all dims but the last) for each operand. */
static void bcast_row(const bcast *b, int nops, int64_t r, int64_t *off) {
    for (int k = 0; k < nops; k++) off[k] = 0;
    for (int i = b->nd - 2; i >= 0; i--) {
        int64_t q = r % b->d[i];
        r /= b->d[i];
        for (int k = 0; k < nops; k++) off[k] += q * b->s[k][i];
    }
}

typedef struct binary_ctx {
    bcast b;
    brisk_op op;
    const float *x, *y;
    float *out;
} binary_ctx;

#define BIN_LOOP(EXPR) \
    do { \
        if (sx && sy) { _Pragma("omp simd") for (int64_t j = 0; j < n; j++) { float a = x[j], c = y[j]; o[j] = EXPR; } } \
        else if (sx) { float c = y[0]; _Pragma("omp simd") for (int64_t j = 0; j < n; j++) { float a = x[j]; o[j] = EXPR; } } \
        else if (sy) { float a = x[0]; _Pragma("omp simd") for (int64_t j = 0; j < n; j++) { float c = y[j]; o[j] = EXPR; } } \
        else { float a = x[0], c = y[0]; for (int64_t j = 0; j < n; j++) o[j] = EXPR; } \
    } while (0)

/* max and min keep a NaN of either side (torch.maximum): a NaN a fails a > c and a < c, so
 * it is taken explicitly; a NaN c is what the compare picks */
static inline float max_nan(float a, float c) { return a != a ? a : a > c ? a : c; }
static inline float min_nan(float a, float c) { return a != a ? a : a < c ? a : c; }

static void binary_row(brisk_op op, const float *restrict x, int64_t sx, const float *restrict y,
                       int64_t sy, float *restrict o, int64_t n) {
    switch (op) {
    case BRISK_OP_ADD: BIN_LOOP(a + c); break;
    case BRISK_OP_SUB: BIN_LOOP(a - c); break;
    case BRISK_OP_MUL: BIN_LOOP(a * c); break;
    case BRISK_OP_MAXIMUM: BIN_LOOP(max_nan(a, c)); break;
    case BRISK_OP_MINIMUM: BIN_LOOP(min_nan(a, c)); break;
    case BRISK_OP_POW_XY: BIN_LOOP(powf(a, c)); break;
    default: BIN_LOOP(a / c); break;
    }
}

/* fn over the view's items: its rows, or the elements of its one row (a range is then a
 * slice of it); `per` elements a thread at least */
static void bcast_parallel(const cpu_backend *cb, const bcast *b, int64_t total, int64_t per, cpu_range_fn fn,
                           const void *ctx) {
    int64_t inner = b->d[b->nd - 1];
    int64_t items = b->nd == 1 ? inner : inner ? total / inner : 0;
    cpu_parallel(cb, items, b->nd == 1 ? per : (per + inner - 1) / inner, fn, ctx);
}

/* items = rows when the inner dim is long, else flat elements split into rows */
static void binary_range(const void *vctx, int64_t r0, int64_t r1) {
    const binary_ctx *c = vctx;
    const bcast *b = &c->b;
    int64_t inner = b->d[b->nd - 1], sx = b->s[0][b->nd - 1], sy = b->s[1][b->nd - 1];
    if (b->nd == 1) { /* one row: the range is a slice of it */
        binary_row(c->op, c->x + (sx ? r0 : 0), sx, c->y + (sy ? r0 : 0), sy, c->out + r0, r1 - r0);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[2];
        bcast_row(b, 2, r, off);
        binary_row(c->op, c->x + off[0], sx, c->y + off[1], sy, c->out + r * inner, inner);
    }
}

/* d out / d input `which` times dy, PyTorch's formulas (derivatives.yaml): max and min
 * send dy to the larger (smaller) input and half of it to each on a tie; x^y's
 * d/dx = y x^(y-1) dy, 0 where y = 0; d/dy = x^y ln(x) dy, 0 where x = 0 and y >= 0. */
static inline float binary_grad(int kind, int which, float d, float a, float c) {
    switch (kind) {
    case BRISK_OP_MAXIMUM:
        return (which ? a > c : a < c) ? 0.0f : a == c ? d * 0.5f : d;
    case BRISK_OP_MINIMUM:
        return (which ? a < c : a > c) ? 0.0f : a == c ? d * 0.5f : d;
    default: /* POW_XY */
        if (which == 0) return c == 0.0f ? 0.0f : d * (c * powf(a, c - 1.0f));
        return a == 0.0f && c >= 0.0f ? 0.0f : d * (powf(a, c) * logf(a));
    }
}

typedef struct bgrad_ctx {
    bcast b;
    int kind, which;
    const float *dy, *x, *y;
    float *out;
} bgrad_ctx;

/* rows of the output's innermost dim; dy and out are contiguous in the output's shape */
static void bgrad_range(const void *vctx, int64_t r0, int64_t r1) {
    const bgrad_ctx *c = vctx;
    const bcast *b = &c->b;
    int64_t inner = b->d[b->nd - 1], sx = b->s[0][b->nd - 1], sy = b->s[1][b->nd - 1];
    int64_t j0 = 0, j1 = inner;
    if (b->nd == 1) j0 = r0, j1 = r1, r0 = 0, r1 = 1; /* one row: the range is a slice of it */
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[2];
        bcast_row(b, 2, r, off);
        const float *x = c->x + off[0], *y = c->y + off[1], *dy = c->dy + r * inner;
        float *o = c->out + r * inner;
        for (int64_t j = j0; j < j1; j++) o[j] = binary_grad(c->kind, c->which, dy[j], x[j * sx], y[j * sy]);
    }
}

/* Checks that both inputs' shapes broadcast to n's (the kernels index them by that rule). */
static brisk_status check_bcast_inputs(const brisk_graph *g, int id, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    for (int k = 0; k < 2; k++) {
        const brisk_shape *xs = &IN_NODE(g, id, k)->shape;
        if (xs->ndim > n->shape.ndim)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d has more dims than the output",
                                brisk_op_name(n->op), k);
        int off = n->shape.ndim - xs->ndim;
        for (int i = 0; i < xs->ndim; i++)
            if (xs->d[i] != 1 && xs->d[i] != n->shape.d[off + i])
                return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d dim %d is %lld, output %lld",
                                    brisk_op_name(n->op), k, i, (long long)xs->d[i], (long long)n->shape.d[off + i]);
    }
    return BRISK_OK;
}

brisk_status cpu_binary_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             brisk_error *err) {
    (void)err;
    const brisk_node *n = NODE(g, id);
    int kind = n->attr.kind; /* inputs, kind and shapes: brisk_node_check_inputs */
    const brisk_shape *xs[2] = {&IN_NODE(g, id, 1)->shape, &IN_NODE(g, id, 2)->shape};
    bgrad_ctx c = {.kind = kind, .which = (int)n->attr.i0, .dy = in[0], .x = in[1], .y = in[2], .out = out};
    bcast_build(&c.b, &n->shape, xs, 2);
    bcast_parallel(cb, &c.b, cpu_numel(&n->shape), CPU_PAR_MIN_HEAVY, bgrad_range, &c);
    return BRISK_OK;
}

brisk_status cpu_binary(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    const brisk_shape *xs[2] = {&IN_NODE(g, id, 0)->shape, &IN_NODE(g, id, 1)->shape};
    brisk_status st = check_bcast_inputs(g, id, err);
    if (st) return st;
    binary_ctx c = {.op = n->op, .x = in[0], .y = in[1], .out = out};
    bcast_build(&c.b, &n->shape, xs, 2);
    bcast_parallel(cb, &c.b, cpu_numel(&n->shape), n->op == BRISK_OP_POW_XY ? CPU_PAR_MIN_HEAVY : CPU_PAR_MIN,
                   binary_range, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- broadcast copy (EXPAND) */

void cpu_broadcast_copy(const void *x, const brisk_shape *xs, void *out, const brisk_shape *os,
                        size_t esize) {
    bcast b;
    const brisk_shape *ops[1] = {xs};
    bcast_build(&b, os, ops, 1);
    int64_t inner = b.d[b.nd - 1], sx = b.s[0][b.nd - 1], rows = cpu_numel(os) / (inner ? inner : 1);
    const unsigned char *src = x;
    unsigned char *dst = out;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off;
        bcast_row(&b, 1, r, &off);
        unsigned char *o = dst + (size_t)(r * inner) * esize;
        const unsigned char *s = src + (size_t)off * esize;
        if (sx) {
            memcpy(o, s, (size_t)inner * esize);
        } else if (esize == 4) {
            float v;
            memcpy(&v, s, 4);
            float *of = (float *)(void *)o;
            for (int64_t j = 0; j < inner; j++) of[j] = v;
        } else {
            for (int64_t j = 0; j < inner; j++) memcpy(o + (size_t)j * esize, s, esize);
        }
    }
}

/* ---------------------------------------------------------------- bias add */

typedef struct rows_ctx {
    const float *x, *b;
    float *out;
    int64_t n;
} rows_ctx;

static void bias_range(const void *vctx, int64_t r0, int64_t r1) {
    const rows_ctx *c = vctx;
    int64_t n = c->n;
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict x = c->x + r * n, *restrict b = c->b;
        float *restrict o = c->out + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) o[j] = x[j] + b[j];
    }
}

brisk_status cpu_bias_add(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id), *nb = IN_NODE(g, id, 1);
    int64_t N = n->shape.ndim ? n->shape.d[n->shape.ndim - 1] : 1;
    if (cpu_numel(&nb->shape) != N)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "bias_add: bias has %lld elements, last dim is %lld",
                            (long long)cpu_numel(&nb->shape), (long long)N);
    if (N == 0) return BRISK_OK;
    rows_ctx c = {in[0], in[1], out, N};
    int64_t rows = cpu_numel(&n->shape) / N;
    cpu_parallel(cb, rows, (CPU_PAR_MIN + N - 1) / N, bias_range, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- gradient accumulation */

typedef struct accum_ctx {
    const float *g;
    float *out;
    int first;
} accum_ctx;

static void accum_range(const void *vctx, int64_t i0, int64_t i1) {
    const accum_ctx *c = vctx;
    const float *restrict gi = c->g;
    float *restrict o = c->out;
    if (c->first) {
        memcpy(o + i0, gi + i0, (size_t)(i1 - i0) * sizeof(float)); /* o == gi returned before */
    } else {
#pragma omp simd
        for (int64_t i = i0; i < i1; i++) o[i] += gi[i];
    }
}

brisk_status cpu_grad_accum(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                            void *out, const brisk_step_state *st, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t len = cpu_numel(&n->shape);
    if (cpu_numel(&IN_NODE(g, id, 0)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "grad_accum: gradient and parameter sizes differ");
    accum_ctx c = {in[0], out, st->first_micro != 0};
    if (!c.first && c.g == c.out)
        return brisk_errorf(err, BRISK_ERR_INVALID,
                            "grad_accum: input aliases the gradient buffer on a later micro-batch");
    if (c.g == c.out) return BRISK_OK; /* planned in place (grads_in_place): already there */
    cpu_parallel(cb, len, CPU_PAR_MIN, accum_range, &c);
    return BRISK_OK;
}
