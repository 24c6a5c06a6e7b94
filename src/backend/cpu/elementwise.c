/* Elementwise kernels, f32, C-contiguous:
 *   ADD/SUB/MUL/DIV  out = x op y with NumPy broadcasting (out = broadcast shape)
 *   BIAS_ADD         out[r, j] = x[r, j] + b[j]          (x [rows, N], b [N])
 *   SCALE            out = f0 x + f1
 *   RELU, GELU (erf or tanh form, as PyTorch defines them), SILU, TANH, SIGMOID
 *   ACT_GRAD         out = dy * f'(x) for the forward op in attr.kind (y = f(x) given too)
 *   GRAD_ACCUM       out = g on the first micro-batch, out += g after
 * and the strided broadcast copy behind EXPAND.
 *
 * Broadcasting: operand shapes are right-aligned to the output, each dim gets a
 * stride (0 where the operand has size 1), size-1 output dims are dropped and
 * neighbouring dims merged while every operand stays contiguous across them. What
 * is left is a set of rows over the innermost dim with per-operand inner stride 0
 * or 1 - three loop shapes that vectorise ([R, C] + [C], [R, C] + [R, 1], equal). */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <string.h>

/* ---------------------------------------------------------------- broadcasting */

typedef struct bcast {
    int nd;                          /* collapsed dims */
    int64_t d[BRISK_MAX_DIMS];
    int64_t s[2][BRISK_MAX_DIMS];    /* per operand, in elements */
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
    int64_t st[2][BRISK_MAX_DIMS];
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

static void binary_row(brisk_op op, const float *restrict x, int64_t sx, const float *restrict y,
                       int64_t sy, float *restrict o, int64_t n) {
    switch (op) {
    case BRISK_OP_ADD: BIN_LOOP(a + c); break;
    case BRISK_OP_SUB: BIN_LOOP(a - c); break;
    case BRISK_OP_MUL: BIN_LOOP(a * c); break;
    default: BIN_LOOP(a / c); break;
    }
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

brisk_status cpu_binary(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    const brisk_shape *xs[2] = {&IN_NODE(g, id, 0)->shape, &IN_NODE(g, id, 1)->shape};
    for (int k = 0; k < 2; k++) {
        if (xs[k]->ndim > n->shape.ndim)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d has more dims than the output",
                                brisk_op_name(n->op), k);
        int off = n->shape.ndim - xs[k]->ndim;
        for (int i = 0; i < xs[k]->ndim; i++)
            if (xs[k]->d[i] != 1 && xs[k]->d[i] != n->shape.d[off + i])
                return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d dim %d is %lld, output %lld",
                                    brisk_op_name(n->op), k, i, (long long)xs[k]->d[i],
                                    (long long)n->shape.d[off + i]);
    }
    binary_ctx c = {.op = n->op, .x = in[0], .y = in[1], .out = out};
    bcast_build(&c.b, &n->shape, xs, 2);
    int64_t inner = c.b.d[c.b.nd - 1], total = cpu_numel(&n->shape);
    int64_t items = c.b.nd == 1 ? inner : total / inner;
    int64_t grain = c.b.nd == 1 ? CPU_PAR_MIN : (CPU_PAR_MIN + inner - 1) / inner;
    cpu_parallel(cb, items, grain, binary_range, &c);
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

/* ---------------------------------------------------------------- activations */

typedef struct unary_ctx {
    brisk_op op;
    int kind;
    float a, b;
    const float *x, *dy, *y;
    float *out;
} unary_ctx;


static void unary_range(const void *vctx, int64_t i0, int64_t i1) {
    const unary_ctx *c = vctx;
    const float *restrict x = c->x + i0;
    float *restrict o = c->out + i0;
    int64_t n = i1 - i0;
    switch (c->op) {
    case BRISK_OP_SCALE: {
        float a = c->a, b = c->b;
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = a * x[i] + b;
        break;
    }
    case BRISK_OP_RELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_relu(x[i]);
        break;
    case BRISK_OP_GELU:
        if (c->kind == BRISK_GELU_TANH) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_tanh(x[i]);
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_erf(x[i]);
        }
        break;
    case BRISK_OP_SILU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_silu(x[i]);
        break;
    case BRISK_OP_TANH:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_tanhf(x[i]);
        break;
    default: /* SIGMOID */
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_sigmoidf(x[i]);
        break;
    }
}

brisk_status cpu_unary(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                       void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t len = cpu_numel(&n->shape);
    if (cpu_numel(&IN_NODE(g, id, 0)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input and output sizes differ", brisk_op_name(n->op));
    unary_ctx c = {.op = n->op, .kind = n->attr.kind, .a = n->attr.f0, .b = n->attr.f1,
                   .x = in[0], .out = out};
    int heavy = n->op != BRISK_OP_SCALE && n->op != BRISK_OP_RELU;
    cpu_parallel(cb, len, heavy ? CPU_PAR_MIN_HEAVY : CPU_PAR_MIN, unary_range, &c);
    return BRISK_OK;
}

/* out = dy * f'(x). Derivatives as PyTorch's backward kernels compute them. */
int cpu_act_grad_kind_ok(int kind) {
    return kind == BRISK_OP_RELU || kind == BRISK_OP_GELU || kind == BRISK_OP_SILU || kind == BRISK_OP_TANH ||
           kind == BRISK_OP_SIGMOID;
}

/* No restrict: the fused GEMM epilogue (fuse.c) runs it in place, o == dy; each element is
 * read before it is written, which `omp simd` keeps. */
void cpu_act_grad_span(int kind, int tanh_form, const float *dy, const float *x, const float *y, float *o, int64_t n) {
    switch (kind) {
    case BRISK_OP_RELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case BRISK_OP_GELU:
        if (tanh_form) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_tanh_grad(dy[i], x[i]);
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_erf_grad(dy[i], x[i]);
        }
        break;
    case BRISK_OP_SILU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_silu_grad(dy[i], x[i]);
        break;
    case BRISK_OP_TANH:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    default: /* SIGMOID */
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    }
}

static void act_grad_range(const void *vctx, int64_t i0, int64_t i1) {
    const unary_ctx *c = vctx;
    /* a carries attr.i1 == BRISK_GELU_TANH */
    cpu_act_grad_span(c->kind, c->a != 0.0f, c->dy + i0, c->x + i0, c->y + i0, c->out + i0, i1 - i0);
}

brisk_status cpu_act_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int kind = n->attr.kind;
    if (!cpu_act_grad_kind_ok(kind))
        return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad: attr.kind %d is not an activation op", kind);
    if (n->n_in < 3)
        return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad: needs (dy, x, y), got %d inputs", n->n_in);
    int64_t len = cpu_numel(&n->shape);
    for (int k = 0; k < 3; k++)
        if (cpu_numel(&IN_NODE(g, id, k)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "act_grad: input %d size differs from the output", k);
    unary_ctx c = {.op = n->op, .kind = kind, .a = n->attr.i1 == BRISK_GELU_TANH ? 1.0f : 0.0f,
                   .dy = in[0], .x = in[1], .y = in[2], .out = out};
    cpu_parallel(cb, len, kind == BRISK_OP_RELU ? CPU_PAR_MIN : CPU_PAR_MIN_HEAVY, act_grad_range, &c);
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
