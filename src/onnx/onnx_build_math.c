/* ONNX's elementwise ops of tensors: Add, Sub, Mul, Div (a scalar constant side becomes SCALE,
 * which the fusion rules know; torch's GELU chain becomes GELU), the math ops (Pow, Sqrt, Exp,
 * Log, Abs, Neg, Reciprocal, Erf, Clip), Where, the reductions ReduceMean and ReduceSum, the
 * activations, Softmax and LogSoftmax on any axis, Dropout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

int ox_scalar(const konst *k, double *v) {
    if (!k || k->numel != 1) return 0;
    return *v = k->v[0], 1;
}

/* the node of op type `op` with `arity` inputs making value `name`, or NULL */
static const brisk_onnx_node *made_by(ctx *c, const char *name, const char *op, size_t arity) {
    int64_t p = brisk_onnx_producer(c->m, name);
    const brisk_onnx_node *n = p < 0 ? NULL : &c->m->graph.nodes[p];
    return n && !strcmp(n->op_type, op) && n->n_inputs == arity ? n : NULL;
}

/* whether value `name` is a host constant scalar within tol of v */
static int const_is(ctx *c, const char *name, double v, double tol) {
    val tmp, *x = ox_lookup(c, name, &tmp);
    double s;
    return x && ox_scalar(x->c, &s) && fabs(s - v) <= tol;
}

/* nn.GELU() as torch exports it, Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5), met at the
 * last Mul: one GELU op (the erf form, which PyTorch's module runs) in place of five; the
 * chain's nodes built before it go unused and the planner prunes them. -2: not the pattern */
static int gelu_of(ctx *c) {
    const brisk_onnx_node *n = c->n;
    for (int h = 0; h < 2; h++) {
        const brisk_onnx_node *mul = made_by(c, n->inputs[h], "Mul", 2);
        if (!mul || !const_is(c, n->inputs[1 - h], 0.5, 0.0)) continue;
        for (int j = 0; j < 2; j++) {
            const brisk_onnx_node *add = made_by(c, mul->inputs[j], "Add", 2), *erf = NULL, *div = NULL;
            for (int i = 0; add && !div && i < 2; i++)
                if ((erf = made_by(c, add->inputs[i], "Erf", 1)) && const_is(c, add->inputs[1 - i], 1.0, 0.0))
                    div = made_by(c, erf->inputs[0], "Div", 2);
            const char *x = mul->inputs[1 - j];
            if (!div || strcmp(div->inputs[0], x) || !const_is(c, div->inputs[1], 1.4142135623730951, 1e-6)) continue;
            val tmp, *v = ox_lookup(c, x, &tmp);
            if (v && v->node >= 0 && c->g->nodes[v->node].dtype == BRISK_F32) return brisk_gelu(c->g, v->node, BRISK_GELU_ERF);
        }
    }
    return -2;
}

int ox_build_binary(ctx *c) {
    const char *op = c->n->op_type;
    int gelu = strcmp(op, "Mul") ? -2 : gelu_of(c);
    if (gelu != -2) return gelu;
    konst *o0, *o1, *k0 = ox_const_in(c, 0, &o0), *k1 = ox_const_in(c, 1, &o1);
    double s;
    int y = -2;
    /* a tensor and a scalar constant: SCALE, which the fusion rules know */
    if (!k0 && ox_scalar(k1, &s)) {
        int x = ox_in(c, 0, 0);
        y = x < 0 ? -1 : !strcmp(op, "Add") ? brisk_scale(c->g, x, 1.0f, (float)s) : !strcmp(op, "Sub") ? brisk_scale(c->g, x, 1.0f, (float)-s)
            : !strcmp(op, "Mul") ? brisk_scale(c->g, x, (float)s, 0.0f) : brisk_scale(c->g, x, (float)(1.0 / s), 0.0f);
    } else if (!k1 && ox_scalar(k0, &s) && strcmp(op, "Div")) {
        int x = ox_in(c, 1, 0);
        y = x < 0 ? -1 : !strcmp(op, "Add") ? brisk_scale(c->g, x, 1.0f, (float)s) : !strcmp(op, "Sub") ? brisk_scale(c->g, x, -1.0f, (float)s)
                                                                    : brisk_scale(c->g, x, (float)s, 0.0f);
    }
    ox_konst_free(o0), ox_konst_free(o1);
    if (y != -2) return y;
    int a = ox_in(c, 0, 0), b = ox_in(c, 1, 0);
    if (a < 0 || b < 0) return -1;
    return !strcmp(op, "Add") ? brisk_add(c->g, a, b) : !strcmp(op, "Sub") ? brisk_sub(c->g, a, b)
           : !strcmp(op, "Mul") ? brisk_mul(c->g, a, b) : brisk_div(c->g, a, b);
}

/* Softmax or LogSoftmax over `axis` (opset 13 on: that axis alone, a transpose around it
 * when it is not the last; before 13: the dims from it on, flattened) */
static int softmax_on(ctx *c, int x, int is_log) {
    if (x < 0) return -1;
    int op13 = brisk_onnx_opset_version(c->m, "") >= 13;
    brisk_shape s = *ox_shape(c, x);
    int r = s.ndim, a = ox_axis(c, ox_attr_i(c, "axis", op13 ? -1 : 1), r);
    if (a < 0) return -1;
    int (*f)(brisk_graph *, int) = is_log ? brisk_log_softmax : brisk_softmax;
    if (a == r - 1) return f(c->g, x);
    if (!op13) {
        int64_t inner = 1;
        for (int k = a; k < r; k++) inner *= s.d[k];
        return brisk_reshape(c->g, f(c->g, brisk_reshape(c->g, x, brisk_shape2(brisk_shape_numel(&s) / inner, inner))), s);
    }
    int perm[BRISK_MAX_DIMS];
    for (int k = 0; k < r; k++) perm[k] = k;
    perm[a] = r - 1, perm[r - 1] = a; /* a swap, its own inverse */
    return brisk_transpose(c->g, f(c->g, brisk_transpose(c->g, x, perm)), perm);
}

int ox_build_math(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    const char *op = c->n->op_type;
    brisk_graph *g = c->g;
    return !strcmp(op, "Sqrt") ? brisk_sqrt(g, x) : !strcmp(op, "Exp") ? brisk_exp(g, x) : !strcmp(op, "Log") ? brisk_ln(g, x)
           : !strcmp(op, "Abs") ? brisk_abs(g, x) : !strcmp(op, "Neg") ? brisk_scale(g, x, -1.0f, 0.0f)
           : !strcmp(op, "Reciprocal") ? brisk_pow(g, x, -1.0f) : brisk_erf(g, x);
}

/* x^p: a constant scalar exponent is POW (PyTorch's special exponents), a tensor POW_XY */
int ox_build_pow(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    konst *own, *e = ox_const_in(c, 1, &own);
    double p;
    int scalar = ox_scalar(e, &p), y = -1;
    ox_konst_free(own);
    if (scalar) return brisk_pow(c->g, x, (float)p);
    int b = ox_in(c, 1, 0);
    if (b >= 0 && c->g->nodes[b].dtype != BRISK_F32) b = brisk_cast(c->g, b, BRISK_F32);
    if (b >= 0) y = brisk_pow_xy(c->g, x, b);
    return y;
}

/* Clip: bounds from constant inputs (opset 11 on) or attributes (before), none: unbounded;
 * min > max gives max everywhere, as ONNX */
int ox_build_clip(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    double b[2] = {-INFINITY, INFINITY};
    if (brisk_onnx_opset_version(c->m, "") < 11) {
        b[0] = ox_attr_f(c, "min", -INFINITY), b[1] = ox_attr_f(c, "max", INFINITY);
    } else {
        for (size_t k = 1; k <= 2; k++) {
            if (!ox_has_in(c, k)) continue;
            konst *own, *v = ox_const_in(c, k, &own);
            int ok = ox_scalar(v, &b[k - 1]);
            ox_konst_free(own);
            if (!ok) return ox_fail(c, "%s computed from tensors or not a scalar (a constant scalar taken)", k == 1 ? "min" : "max");
        }
    }
    if (b[0] > b[1]) b[0] = b[1];
    return brisk_clamp(c->g, x, (float)b[0], (float)b[1]);
}

/* ReduceMean, ReduceSum: axes from the attribute (ReduceMean before opset 18) or a constant
 * input (ReduceSum from 13, both from 18); none: every axis, or the input itself with
 * noop_with_empty_axes */
int ox_build_reduce(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    int r = ox_shape(c, x)->ndim;
    if (ox_has_in(c, 1)) {
        konst *own, *k = ox_const_in(c, 1, &own);
        ox_konst_free(own);
        if (!k) return ox_fail(c, "axes computed from tensors (constants taken)");
    }
    int64_t axes[BRISK_MAX_DIMS];
    int n = ox_axes(c, axes);
    uint32_t mask = 0;
    for (int k = 0; k < n; k++) {
        int a = ox_axis(c, axes[k], r);
        if (a < 0) return -1;
        mask |= 1u << a;
    }
    if (!n && ox_attr_i(c, "noop_with_empty_axes", 0)) return x;
    if (!n) mask = (1u << r) - 1u;
    if (!mask) return x; /* a rank-0 input */
    int keep = ox_attr_i(c, "keepdims", 1) != 0;
    return c->n->op_type[6] == 'M' ? brisk_mean(c->g, x, mask, keep) : brisk_sum(c->g, x, mask, keep);
}

/* branch b of Where under a constant condition m: the tensor x_b whole (m taken everywhere
 * it counts), x_b times the constant mask, or a constant branch already masked (so a fill
 * such as -inf stays out where it is not taken); -2 where the branch is never taken */
static int where_part(ctx *c, konst *m, int b, int xb, konst *kb) {
    int64_t taken = 0;
    for (int64_t i = 0; i < m->numel; i++) taken += (m->v[i] != 0.0) != b;
    if (!taken) return -2;
    if (xb >= 0 && taken == m->numel) return xb;
    konst *zero = ox_konst_new(0, NULL, 1), *one = ox_konst_new(0, NULL, 1), *f = NULL;
    if (zero && one) {
        one->v[0] = 1.0;
        konst *in[3] = {m, kb ? kb : one, zero};
        if (b) in[1] = zero, in[2] = kb ? kb : one;
        f = ox_fold_elementwise(c, "Where", in, 3);
    }
    int part = f ? ox_const_node(c, f) : c->g->err.code ? -1 : ox_fail(c, "out of memory");
    ox_konst_free(zero), ox_konst_free(one), ox_konst_free(f);
    return part < 0 || xb < 0 ? part : brisk_mul(c->g, xb, part);
}

/* Where(cond, x, y) of float branches as x m + y (1 - m), exact for a 0/1 mask m. A constant
 * condition makes constant masks (where_part); a tensor one is cast to f32, and then a
 * constant branch must be finite (inf 0 is NaN). */
int ox_build_where(ctx *c) {
    konst *own[3], *k[3];
    int xs[3] = {-1, -1, -1}, part[2] = {-1, -1}, y = -1;
    for (size_t i = 0; i < 3; i++) k[i] = ox_const_in(c, i, &own[i]);
    for (int i = 0; i < 3; i++) {
        if (k[0] && (i == 0 || k[i])) continue; /* host masks (where_part) */
        for (int64_t j = 0; i && k[i] && j < k[i]->numel; j++)
            if (!isfinite(k[i]->v[j])) {
                ox_fail(c, "an infinite constant branch under a condition computed from tensors");
                goto done;
            }
        if ((xs[i] = ox_in(c, (size_t)i, 0)) < 0) goto done;
        if (i && c->g->nodes[xs[i]].dtype != BRISK_F32) {
            ox_fail(c, "a %s branch (float branches taken)", brisk_dtype_name(c->g->nodes[xs[i]].dtype));
            goto done;
        }
    }
    if (k[0]) {
        for (int b = 0; b < 2; b++)
            if ((part[b] = where_part(c, k[0], b, xs[b + 1], k[b + 1])) == -1) goto done;
    } else {
        int m = c->g->nodes[xs[0]].dtype == BRISK_F32 ? xs[0] : brisk_cast(c->g, xs[0], BRISK_F32);
        part[0] = brisk_mul(c->g, xs[1], m), part[1] = brisk_mul(c->g, xs[2], brisk_scale(c->g, m, -1.0f, 1.0f));
    }
    y = part[0] < 0 ? part[1] : part[1] < 0 ? part[0] : brisk_add(c->g, part[0], part[1]);
    if (y >= 0) { /* the output takes the broadcast shape of all three */
        brisk_shape s = *ox_shape(c, y);
        int r = s.ndim;
        for (int i = 0; r >= 0 && i < 3; i++)
            r = xs[i] >= 0 ? ox_broadcast(c, s.d, r, ox_shape(c, xs[i])->d, ox_shape(c, xs[i])->ndim, s.d)
                           : ox_broadcast(c, s.d, r, k[i]->d, k[i]->rank, s.d);
        s.ndim = r;
        y = r < 0 ? -1 : brisk_shape_equal(&s, ox_shape(c, y)) ? y : brisk_expand(c->g, y, s);
    }
done:
    for (int i = 0; i < 3; i++) ox_konst_free(own[i]);
    return y;
}

#define UNARY(fn, expr)                                                                                                \
    int fn(ctx *c) {                                                                                                   \
        int x = ox_in(c, 0, 0);                                                                                        \
        return x < 0 ? -1 : (expr);                                                                                    \
    }
UNARY(ox_build_relu, brisk_relu(c->g, x))
UNARY(ox_build_leaky_relu, brisk_leaky_relu(c->g, x, ox_attr_f(c, "alpha", 0.01f)))
UNARY(ox_build_sigmoid, brisk_sigmoid(c->g, x))
UNARY(ox_build_tanh, brisk_tanh(c->g, x))
UNARY(ox_build_softmax, softmax_on(c, x, 0))
UNARY(ox_build_log_softmax, softmax_on(c, x, 1))

int ox_build_dropout(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    konst *own, *r = ox_const_in(c, 1, &own);
    double p = r && r->numel == 1 ? r->v[0] : ox_attr_f(c, "ratio", 0.5f);
    ox_konst_free(own);
    return p == 0.0 ? x : brisk_dropout(c->g, x, (float)p);
}
