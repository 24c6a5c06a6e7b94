/* Folding: ONNX ops whose inputs are all host constants (and Shape, whose output is known once
 * its input is built) are evaluated on the host while importing: the shape chains that
 * dynamic axes leave behind, Constant nodes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

/* one element of ONNX's elementwise op on v[] (the op's inputs); integer division truncates */
static double elem(const char *op, const double *v, int is_float) {
    double x = v[0], y = v[1];
    switch (op[0]) {
    case 'A': return op[1] == 'd' ? x + y : fabs(x); /* Add, Abs */
    case 'S': return op[1] == 'u' ? x - y : sqrt(x); /* Sub, Sqrt */
    case 'M': return x * y;
    case 'D': return is_float ? x / y : trunc(x / y); /* y != 0: ox_fold_elementwise */
    case 'P': return pow(x, y);
    case 'E': return op[1] == 'q' ? x == y : op[1] == 'x' ? exp(x) : erf(x); /* Equal, Exp, Erf */
    case 'L': return op[1] == 'e' ? x < y : log(x); /* Less, Log */
    case 'G': return x > y;
    case 'W': return x != 0.0 ? y : v[2];
    case 'N': return op[1] == 'e' ? -x : x == 0.0; /* Neg, Not */
    default: return 1.0 / x; /* Reciprocal */
    }
}

konst *ox_fold_elementwise(ctx *c, const char *op, konst *const *in, int n) {
    int64_t d[BRISK_MAX_DIMS] = {0};
    int r = 0, cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") || !strcmp(op, "Not"),
        is_float = 0;
    for (int k = 0; k < n; k++) {
        if ((r = ox_broadcast(c, d, r, in[k]->d, in[k]->rank, d)) < 0) return NULL;
        /* Where's condition does not make the output a float */
        if (!(op[0] == 'W' && k == 0)) is_float |= in[k]->is_float;
    }
    konst *o = ox_konst_new(r, d, cmp ? 0 : is_float);
    if (!o) return NULL;
    for (int64_t i = 0; i < o->numel; i++) {
        double v[3];
        for (int k = 0; k < n; k++) { /* broadcast by index arithmetic over the trailing dims */
            const konst *a = in[k];
            int64_t at = 0, rem = i, stride = 1;
            for (int j = r - 1, ja = a->rank - 1; ja >= 0; j--, ja--) {
                int64_t x = rem % d[j];
                rem /= d[j];
                at += (a->d[ja] == 1 ? 0 : x) * stride, stride *= a->d[ja];
            }
            v[k] = a->v[at];
        }
        if (op[0] == 'D' && !is_float && v[1] == 0.0) {
            ox_konst_free(o);
            return ox_fail(c, "an integer division by zero among constants"), NULL;
        }
        double y = elem(op, v, is_float);
        o->v[i] = o->is_float ? (double)(float)y : y;
    }
    return o;
}

static konst *fold_gather(ctx *c, const konst *data, const konst *idx) {
    int axis = ox_axis(c, ox_attr_i(c, "axis", 0), data->rank);
    if (axis < 0) return NULL;
    int64_t d[BRISK_MAX_DIMS * 2];
    int r = 0;
    for (int k = 0; k < axis; k++) d[r++] = data->d[k];
    for (int k = 0; k < idx->rank; k++) d[r++] = idx->d[k];
    for (int k = axis + 1; k < data->rank; k++) d[r++] = data->d[k];
    if (r > BRISK_MAX_DIMS) return NULL;
    konst *o = ox_konst_new(r, d, data->is_float);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= data->d[k];
    for (int k = axis + 1; k < data->rank; k++) inner *= data->d[k];
    for (int64_t a = 0; o && a < outer; a++)
        for (int64_t j = 0; j < idx->numel; j++) {
            int64_t ix = ox_i64(idx->v[j]);
            if (ix < 0) ix += data->d[axis];
            if (ix < 0 || ix >= data->d[axis]) return ox_konst_free(o), (void)ox_fail(c, "Gather index out of range"), NULL;
            memcpy(o->v + (a * idx->numel + j) * inner, data->v + (a * data->d[axis] + ix) * inner,
                   (size_t)inner * sizeof *o->v);
        }
    return o;
}

static konst *fold_slice(ctx *c, const konst *x) {
    int64_t lo[BRISK_MAX_DIMS], n[BRISK_MAX_DIMS], step[BRISK_MAX_DIMS];
    if (ox_slice_spec(c, x->rank, lo, n, step, x->d)) return NULL;
    konst *o = ox_konst_new(x->rank, n, x->is_float);
    for (int64_t i = 0; o && i < o->numel; i++) {
        int64_t src = 0, rem = i, stride = 1;
        for (int a = x->rank - 1; a >= 0; a--) {
            int64_t j = rem % n[a];
            rem /= n[a];
            src += (lo[a] + j * step[a]) * stride;
            stride *= x->d[a];
        }
        o->v[i] = x->v[src];
    }
    return o;
}

static konst *fold_transpose(ctx *c, const konst *x) {
    int r = x->rank, perm[BRISK_MAX_DIMS];
    const int64_t *p;
    size_t n = ox_attr_ints(c, "perm", &p);
    if (n && n != (size_t)r) return ox_fail(c, "perm of %zu axes for a rank-%d constant", n, r), NULL;
    char seen[BRISK_MAX_DIMS] = {0};
    int64_t d[BRISK_MAX_DIMS];
    for (int k = 0; k < r; k++) {
        perm[k] = n ? (int)p[k] : r - 1 - k;
        if (perm[k] < 0 || perm[k] >= r || seen[perm[k]]++) return ox_fail(c, "perm is not a permutation"), NULL;
        d[k] = x->d[perm[k]];
    }
    konst *o = ox_konst_new(r, d, x->is_float);
    for (int64_t i = 0; o && i < o->numel; i++) { /* o's index i, digit by digit, is x's permuted */
        int64_t rem = i, src = 0, stride[BRISK_MAX_DIMS], st = 1;
        for (int k = r - 1; k >= 0; k--) stride[k] = st, st *= x->d[k];
        for (int k = r - 1; k >= 0; k--) {
            src += (rem % d[k]) * stride[perm[k]];
            rem /= d[k];
        }
        o->v[i] = x->v[src];
    }
    return o;
}

/* ConstantOfShape: a tensor of the shape given by input 0, filled with the value attribute
 * (a float 0 by default) */
static konst *fold_constant_of_shape(ctx *c, const konst *shape) {
    if (shape->numel > BRISK_MAX_DIMS) return ox_fail(c, "a shape of %lld dims", (long long)shape->numel), NULL;
    int64_t d[BRISK_MAX_DIMS];
    for (int64_t k = 0; k < shape->numel; k++)
        if ((d[k] = ox_i64(shape->v[k])) < 0) return ox_fail(c, "a negative dim %lld", (long long)d[k]), NULL;
    const brisk_onnx_attr *a = brisk_onnx_attr_find(c->n, "value");
    int is_float = !a || a->type != BRISK_ONNX_ATTR_TENSOR || a->t->dtype == BRISK_ONNX_FLOAT || a->t->dtype == BRISK_ONNX_DOUBLE;
    double v = a && a->type == BRISK_ONNX_ATTR_TENSOR && a->t->numel == 1 ? ox_elem(a->t, 0) : 0.0;
    konst *o = ox_konst_new((int)shape->numel, d, is_float);
    for (int64_t i = 0; o && i < o->numel; i++) o->v[i] = v;
    return o;
}

static int elementwise(const char *op, int n) {
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "Where", "Sqrt",
                                      "Exp", "Log", "Abs", "Neg", "Reciprocal", "Erf", "Not"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (!strcmp(op, ops[k])) return n == (k == 8 ? 3 : k < 8 ? 2 : 1);
    return 0;
}

/* Expand of a constant: ONNX's bidirectional broadcast, as a Where of a true condition of
 * the shape asked */
static konst *fold_expand(ctx *c, konst *x, const konst *shape) {
    int64_t d[BRISK_MAX_DIMS];
    if (shape->numel > BRISK_MAX_DIMS) return ox_fail(c, "a shape of %lld dims", (long long)shape->numel), NULL;
    for (int64_t k = 0; k < shape->numel; k++)
        if ((d[k] = ox_i64(shape->v[k])) < 0) return ox_fail(c, "a negative dim %lld", (long long)d[k]), NULL;
    konst *ones = ox_konst_new((int)shape->numel, d, 0), *o = NULL;
    if (ones) {
        for (int64_t i = 0; i < ones->numel; i++) ones->v[i] = 1.0;
        konst *in[3] = {ones, x, x};
        o = ox_fold_elementwise(c, "Where", in, 3);
    }
    ox_konst_free(ones);
    return o;
}

konst *ox_fold(ctx *c, int *handled) {
    const char *op = c->n->op_type;
    *handled = 1;
    if (!strcmp(op, "Constant")) {
        const brisk_onnx_attr *a = c->n->n_attrs ? &c->n->attrs[0] : NULL;
        if (!a) return ox_fail(c, "Constant without a value"), NULL;
        if (a->type == BRISK_ONNX_ATTR_TENSOR) return ox_from_tensor(a->t);
        if (a->type != BRISK_ONNX_ATTR_INT && a->type != BRISK_ONNX_ATTR_INTS && a->type != BRISK_ONNX_ATTR_FLOAT &&
            a->type != BRISK_ONNX_ATTR_FLOATS)
            return ox_fail(c, "a Constant of %s (tensors, ints and floats taken)", brisk_onnx_attr_type_name(a->type)), NULL;
        int64_t n = a->type == BRISK_ONNX_ATTR_INTS || a->type == BRISK_ONNX_ATTR_FLOATS ? (int64_t)a->n : 1;
        konst *k = ox_konst_new(a->type == BRISK_ONNX_ATTR_INTS || a->type == BRISK_ONNX_ATTR_FLOATS, &n,
                             a->type == BRISK_ONNX_ATTR_FLOAT || a->type == BRISK_ONNX_ATTR_FLOATS);
        for (int64_t i = 0; k && i < n; i++)
            k->v[i] = a->type == BRISK_ONNX_ATTR_INT ? (double)a->i : a->type == BRISK_ONNX_ATTR_FLOAT ? a->f
                      : a->type == BRISK_ONNX_ATTR_INTS ? (double)a->ints[i] : a->floats[i];
        return k;
    }
    if (!strcmp(op, "Shape")) { /* of a tensor: its shape is known once built */
        konst *own, *k = ox_const_in(c, 0, &own);
        int64_t d[BRISK_MAX_DIMS];
        int r;
        if (k) {
            r = k->rank;
            memcpy(d, k->d, sizeof d);
        } else {
            int x = ox_in(c, 0, 0);
            if (x < 0) return NULL;
            r = ox_shape(c, x)->ndim;
            memcpy(d, ox_shape(c, x)->d, sizeof d);
        }
        ox_konst_free(own);
        int64_t lo = ox_attr_i(c, "start", 0), hi = ox_attr_i(c, "end", r);
        if (lo < 0) lo += r;
        if (hi < 0) hi += r;
        if (hi > r) hi = r;
        int64_t n = hi > lo ? hi - lo : 0;
        konst *o = ox_konst_new(1, &n, 0);
        for (int64_t i = 0; o && i < n; i++) o->v[i] = (double)d[lo + i];
        return o;
    }
    /* every input a constant? */
    konst *in[8] = {0}, *own[8] = {0};
    size_t n = c->n->n_inputs;
    int all = n > 0 && n <= 8;
    for (size_t k = 0; all && k < n; k++)
        if (c->n->inputs[k][0] && !(in[k] = ox_const_in(c, k, &own[k]))) all = 0;
    konst *o = NULL;
    if (!all) *handled = 0;
    else if (elementwise(op, (int)n)) o = ox_fold_elementwise(c, op, in, (int)n);
    else if (!strcmp(op, "Expand")) o = fold_expand(c, in[0], in[1]);
    else if (!strcmp(op, "Gather")) o = fold_gather(c, in[0], in[1]);
    else if (!strcmp(op, "Slice")) o = fold_slice(c, in[0]);
    else if (!strcmp(op, "Transpose")) o = fold_transpose(c, in[0]);
    else if (!strcmp(op, "ConstantOfShape")) o = fold_constant_of_shape(c, in[0]);
    else if (!strcmp(op, "Identity") || !strcmp(op, "Cast") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") ||
             !strcmp(op, "Reshape")) {
        int64_t d[BRISK_MAX_DIMS * 2];
        int r = in[0]->rank;
        memcpy(d, in[0]->d, sizeof in[0]->d);
        if (op[0] == 'U' || op[0] == 'S') r = ox_squeeze_shape(c, op[0] == 'U', in[0]->d, in[0]->rank, d);
        if (op[0] == 'R') r = ox_reshape_dims(c, in[0]->d, in[0]->rank, in[0]->numel, n > 1 ? in[1] : NULL, d);
        int to = (int)ox_attr_i(c, "to", 0);
        o = r < 0 ? NULL : ox_konst_new(r, d, op[0] == 'C' ? to == BRISK_ONNX_FLOAT || to == BRISK_ONNX_DOUBLE : in[0]->is_float);
        for (int64_t i = 0; o && i < o->numel && i < in[0]->numel; i++) o->v[i] = o->is_float ? in[0]->v[i] : trunc(in[0]->v[i]);
    } else if (!strcmp(op, "Concat")) {
        int64_t total = 0;
        for (size_t k = 0; k < n; k++) total += in[k]->numel;
        if (in[0]->rank != 1) ox_fail(c, "Concat of constants of rank %d (1 folded)", in[0]->rank);
        else if ((o = ox_konst_new(1, &total, in[0]->is_float)))
            for (size_t k = 0, at = 0; k < n; at += (size_t)in[k]->numel, k++)
                memcpy(o->v + at, in[k]->v, (size_t)in[k]->numel * sizeof *o->v);
    } else {
        *handled = 0;
    }
    for (size_t k = 0; k < 8; k++) ox_konst_free(own[k]);
    if (*handled && !o && !c->g->err.code)
        ox_fail(c, "a constant of more than %lld values or a negative dim (folded on the host), or out of memory",
                (long long)OX_KONST_MAX);
    return o;
}

