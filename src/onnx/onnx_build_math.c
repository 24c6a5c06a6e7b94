/* ONNX's elementwise ops of tensors: Add, Sub, Mul, Div (a scalar constant side becomes SCALE,
 * which the fusion rules know), the activations, Softmax and LogSoftmax, Dropout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

int ox_scalar(const konst *k, double *v) {
    if (!k || k->numel != 1) return 0;
    return *v = k->v[0], 1;
}

int ox_build_binary(ctx *c) {
    const char *op = c->n->op_type;
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

static int last_axis(ctx *c, int x) {
    if (x < 0) return -1;
    int64_t dflt = brisk_onnx_opset_version(c->m, "") >= 13 ? -1 : 1;
    int r = ox_shape(c, x)->ndim, a = ox_axis(c, ox_attr_i(c, "axis", dflt), r);
    if (a >= 0 && a != r - 1) return ox_fail(c, "axis %d of a rank-%d input (the last taken)", a, r);
    return a;
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
UNARY(ox_build_softmax, last_axis(c, x) < 0 ? -1 : brisk_softmax(c->g, x))
UNARY(ox_build_log_softmax, last_axis(c, x) < 0 ? -1 : brisk_log_softmax(c->g, x))

int ox_build_dropout(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    konst *own, *r = ox_const_in(c, 1, &own);
    double p = r && r->numel == 1 ? r->v[0] : ox_attr_f(c, "ratio", 0.5f);
    ox_konst_free(own);
    return p == 0.0 ? x : brisk_dropout(c->g, x, (float)p);
}
