/* ONNX export of a checkpoint's inference graph (`brisk export CKPT --onnx FILE`), written
 * with core/protowire: ModelProto, opset 17 (IR version 8), fp32 compute.
 *
 * The model is not re-described here: its PREDICT graph is built from the config inside the
 * checkpoint and walked node by node, each brisk op becoming its ONNX equivalent (fused ops
 * as short ONNX subgraphs: ATTENTION as MatMul/Softmax, LSTM as ONNX's LSTM with the gates
 * reordered). The graph is built twice, for batches 2 and 3: the dimensions that differ are
 * the batch's, so the ONNX model takes any batch (dim "N") and its Reshapes say -1 there.
 * What `brisk predict` does around the graph is in the model too: the input normalisation of
 * windowed data, softmax for a classifier, the target's units for a regression. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/protowire.h"
#include "data/bytes.h"
#include "train/trainer_internal.h"

#define ONNX_OPSET 17
#define ONNX_IR_VERSION 8
enum { T_FLOAT = 1, T_INT32 = 6, T_INT64 = 7, T_FLOAT16 = 10 }; /* TensorProto.DataType */
enum { A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_INTS = 7 };       /* AttributeProto.AttributeType */

typedef struct ox {
    const brisk_graph *g, *g3; /* batch 2, batch 3 */
    const float *params;       /* host parameters in g's layout */
    int fp16;
    brisk_pb graph;
    int tmp;
    char (*name)[BRISK_NAME_MAX + 8]; /* the ONNX value of each node */
    brisk_error *err;
} ox;

typedef struct attrs {
    brisk_pb pb[6];
    int n;
} attrs;

static brisk_pb *attr(attrs *a, const char *name, int type) {
    brisk_pb *p = &a->pb[a->n++];
    brisk_pb_string(p, 1, name);
    brisk_pb_uint(p, 20, (uint64_t)type);
    return p;
}
static void attr_int(attrs *a, const char *name, int64_t v) { brisk_pb_int(attr(a, name, A_INT), 3, v); }
static void attr_float(attrs *a, const char *name, float v) { brisk_pb_float(attr(a, name, A_FLOAT), 2, v); }
static void attr_str(attrs *a, const char *name, const char *v) { brisk_pb_string(attr(a, name, A_STRING), 4, v); }
static void attr_ints(attrs *a, const char *name, const int64_t *v, int n) {
    brisk_pb_packed_int(attr(a, name, A_INTS), 8, v, (size_t)n);
}

/* A fresh value name in out (size BRISK_NAME_MAX + 8). */
static const char *fresh(ox *o, char *out) {
    snprintf(out, BRISK_NAME_MAX + 8, "t%d", o->tmp++);
    return out;
}

/* Appends node op(in...) -> out, with attributes a (may be NULL; freed). */
static void node(ox *o, const char *op, const char *const *in, int n_in, const char *out, attrs *a) {
    brisk_pb n = {0};
    for (int i = 0; i < n_in; i++) brisk_pb_string(&n, 1, in[i]);
    brisk_pb_string(&n, 2, out);
    brisk_pb_string(&n, 4, op);
    for (int i = 0; a && i < a->n; i++) {
        brisk_pb_message(&n, 5, &a->pb[i]);
        brisk_pb_free(&a->pb[i]);
    }
    if (a) a->n = 0; /* reusable for the next node */
    brisk_pb_message(&o->graph, 1, &n);
    o->graph.oom |= n.oom;
    brisk_pb_free(&n);
}
#define NODE(o, op, out, a, ...) node(o, op, (const char *const[]){__VA_ARGS__}, \
                                      (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *)), out, a)

static void initializer(ox *o, const char *name, int type, const int64_t *dims, int nd, const void *data, size_t bytes) {
    brisk_pb t = {0};
    brisk_pb_packed_int(&t, 1, dims, (size_t)nd);
    brisk_pb_int(&t, 2, type);
    brisk_pb_string(&t, 8, name);
    brisk_pb_bytes(&t, 9, data, bytes);
    brisk_pb_message(&o->graph, 5, &t);
    o->graph.oom |= t.oom;
    brisk_pb_free(&t);
}

/* An int64 constant (shapes, axes), named fresh into out. */
static const char *const_i64(ox *o, char *out, const int64_t *v, int n) {
    int64_t d = n;
    initializer(o, fresh(o, out), T_INT64, &d, 1, v, sizeof(int64_t) * (size_t)n);
    return out;
}

static const char *const_f32(ox *o, char *out, const float *v, int64_t n) {
    initializer(o, fresh(o, out), T_FLOAT, &n, 1, v, sizeof(float) * (size_t)n);
    return out;
}

static const char *scalar(ox *o, char *out, float v) {
    initializer(o, fresh(o, out), T_FLOAT, NULL, 0, &v, sizeof v);
    return out;
}

static uint16_t to_half(float f) { /* round to nearest even, as numpy's float16 */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xff, m = x & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31) return (uint16_t)(sign | 0x7c00u);
    if (he <= 0) {
        if (he < -10) return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - he), hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hm = m >> 13, rem = m & 0x1fffu;
    uint32_t h = sign | ((uint32_t)he << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1))) h++;
    return (uint16_t)h;
}

static int64_t dims_of(const brisk_shape *s, int64_t *d) {
    for (int i = 0; i < s->ndim; i++) d[i] = s->d[i];
    return s->ndim;
}

/* A parameter: fp32, or fp16 (half the file) cast back to fp32 where it is read. */
static brisk_status param(ox *o, int id) {
    const brisk_node *n = &o->g->nodes[id];
    const brisk_param_info *p = NULL;
    for (int i = 0; i < o->g->n_params; i++)
        if (o->g->params[i].node == id) p = &o->g->params[i];
    if (!p) return brisk_errorf(o->err, BRISK_ERR_INTERNAL, "export: parameter node %d has no entry", id);
    int64_t d[BRISK_MAX_DIMS];
    int nd = (int)dims_of(&n->shape, d);
    const float *v = o->params + p->offset;
    snprintf(o->name[id], sizeof o->name[id], "%s", p->name);
    if (!o->fp16) {
        initializer(o, p->name, T_FLOAT, d, nd, v, sizeof(float) * (size_t)p->numel);
        return BRISK_OK;
    }
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(p->numel + 1));
    if (!h) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
    for (int64_t i = 0; i < p->numel; i++) h[i] = to_half(v[i]);
    char half[BRISK_NAME_MAX + 8];
    snprintf(half, sizeof half, "%s.fp16", p->name);
    initializer(o, half, T_FLOAT16, d, nd, h, sizeof(uint16_t) * (size_t)p->numel);
    free(h);
    attrs a = {0};
    attr_int(&a, "to", T_FLOAT);
    snprintf(o->name[id], sizeof o->name[id], "%s.fp32", p->name);
    NODE(o, "Cast", o->name[id], &a, half);
    return BRISK_OK;
}

/* The shape of node id for a Reshape or Expand: the batch's dimension (the one differing
 * between the two builds) is -1; more than one such is refused. */
static brisk_status target_shape(ox *o, int id, const brisk_shape *s2, const brisk_shape *s3, int64_t unknown,
                                 char *out) {
    int64_t d[BRISK_MAX_DIMS];
    int nb = 0;
    for (int i = 0; i < s2->ndim; i++) {
        d[i] = s2->d[i];
        if (s2->d[i] != s3->d[i]) d[i] = unknown, nb++;
    }
    if (nb > 1) return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: node %d (%s) reshapes with the batch in "
                                    "%d dimensions; ONNX's Reshape takes one unknown", id, brisk_op_name(o->g->nodes[id].op), nb);
    const_i64(o, out, d, s2->ndim);
    return BRISK_OK;
}

static void transpose_last2(ox *o, const char *in, int ndim, char *out) {
    int64_t perm[BRISK_MAX_DIMS];
    for (int i = 0; i < ndim; i++) perm[i] = i;
    perm[ndim - 2] = ndim - 1, perm[ndim - 1] = ndim - 2;
    attrs a = {0};
    attr_ints(&a, "perm", perm, ndim);
    NODE(o, "Transpose", fresh(o, out), &a, in);
}

/* What brisk predict does around the graph. */
typedef struct post {
    int output;
    int softmax;          /* a classifier: probabilities */
    float tmean, tstd;    /* a regression's target units */
    const float *mean, *std; /* windowed inputs' normalisation (n features), or n = 0 */
    int n;
} post;

static void value_info(ox *o, int field, const char *name, int type, const brisk_shape *s2, const brisk_shape *s3) {
    brisk_pb vi = {0}, tp = {0}, tt = {0}, sh = {0};
    for (int i = 0; i < s2->ndim; i++) {
        brisk_pb d = {0};
        if (s2->d[i] != s3->d[i]) brisk_pb_string(&d, 2, "N");
        else brisk_pb_int(&d, 1, s2->d[i]);
        brisk_pb_message(&sh, 1, &d);
        brisk_pb_free(&d);
    }
    brisk_pb_int(&tt, 1, type);
    brisk_pb_message(&tt, 2, &sh);
    brisk_pb_message(&tp, 1, &tt);
    brisk_pb_string(&vi, 1, name);
    brisk_pb_message(&vi, 2, &tp);
    brisk_pb_message(&o->graph, (uint32_t)field, &vi);
    o->graph.oom |= vi.oom | tp.oom | tt.oom | sh.oom;
    brisk_pb_free(&vi), brisk_pb_free(&tp), brisk_pb_free(&tt), brisk_pb_free(&sh);
}

/* ATTENTION over qkv [B, T, 3D] as ONNX ops: split, heads, softmax(q k^T / sqrt(dh)) v. */
static brisk_status attention(ox *o, int id, const char *out) {
    const brisk_node *n = &o->g->nodes[id];
    const char *qkv = o->name[n->in[0]];
    if (n->n_in > 1 && n->in[1] >= 0)
        return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: attention with a padding mask has no ONNX export yet");
    int64_t T = n->shape.d[1], D = n->shape.d[2], h = n->attr.i0, dh = D / h;
    char parts[3][BRISK_NAME_MAX + 8], c[4][BRISK_NAME_MAX + 8], t[8][BRISK_NAME_MAX + 8];
    int64_t axis2 = 2, four[4] = {0, 0, h, dh}, three[3] = {0, 0, D};
    const_i64(o, c[0], &axis2, 1);
    const_i64(o, c[1], four, 4);
    for (int k = 0; k < 3; k++) {
        int64_t lo = k * D, hi = (k + 1) * D;
        char a[BRISK_NAME_MAX + 8], b[BRISK_NAME_MAX + 8], r[BRISK_NAME_MAX + 8];
        const_i64(o, a, &lo, 1), const_i64(o, b, &hi, 1);
        NODE(o, "Slice", fresh(o, r), NULL, qkv, a, b, c[0]);
        NODE(o, "Reshape", fresh(o, parts[k]), NULL, r, c[1]); /* [B, T, h, dh] */
    }
    static const int64_t pq[4] = {0, 2, 1, 3}, pk[4] = {0, 2, 3, 1};
    attrs a = {0};
    attr_ints(&a, "perm", pq, 4);
    NODE(o, "Transpose", fresh(o, t[0]), &a, parts[0]);
    attr_ints(&a, "perm", pk, 4);
    NODE(o, "Transpose", fresh(o, t[1]), &a, parts[1]);
    attr_ints(&a, "perm", pq, 4);
    NODE(o, "Transpose", fresh(o, t[2]), &a, parts[2]);
    NODE(o, "MatMul", fresh(o, t[3]), NULL, t[0], t[1]);
    NODE(o, "Mul", fresh(o, t[4]), NULL, t[3], scalar(o, c[2], 1.0f / sqrtf((float)dh)));
    const char *scores = t[4];
    if (n->attr.kind == 1) { /* causal: key j > query i is -inf */
        float *mask = malloc(sizeof(float) * (size_t)(T * T));
        if (!mask) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++) mask[i * T + j] = j > i ? -INFINITY : 0.0f;
        int64_t d[2] = {T, T};
        initializer(o, fresh(o, c[3]), T_FLOAT, d, 2, mask, sizeof(float) * (size_t)(T * T));
        free(mask);
        NODE(o, "Add", fresh(o, t[5]), NULL, t[4], c[3]);
        scores = t[5];
    }
    attr_int(&a, "axis", -1);
    NODE(o, "Softmax", fresh(o, t[6]), &a, scores);
    NODE(o, "MatMul", fresh(o, t[7]), NULL, t[6], t[2]);
    attr_ints(&a, "perm", pq, 4);
    NODE(o, "Transpose", fresh(o, t[0]), &a, t[7]);
    NODE(o, "Reshape", out, NULL, t[0], const_i64(o, c[0], three, 3));
    return BRISK_OK;
}

/* LSTM (xp [B, T, 4H] = x w_ih^T, w_hh, bias) as ONNX's LSTM, time-major: its
 * input weight is the identity with the gates reordered from PyTorch's i, f, g, o to ONNX's
 * i, o, f, c, so X = xp passes through exactly; R and B are w_hh and bias reordered. */
static brisk_status lstm(ox *o, int id, const char *out) {
    const brisk_node *n = &o->g->nodes[id];
    int64_t H = n->shape.d[2], G = 4 * H;
    static const int order[4] = {0, 3, 1, 2}; /* ONNX gate k = PyTorch gate order[k] */
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)G);
    float *w = calloc((size_t)(G * G), sizeof(float)), *zeros = calloc((size_t)G, sizeof(float));
    if (!perm || !w || !zeros) {
        free(perm), free(w), free(zeros);
        return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
    }
    for (int k = 0; k < 4; k++)
        for (int64_t j = 0; j < H; j++) perm[k * H + j] = order[k] * H + j;
    for (int64_t r = 0; r < G; r++) w[r * G + perm[r]] = 1.0f;
    char W[BRISK_NAME_MAX + 8], idx[BRISK_NAME_MAX + 8], z[BRISK_NAME_MAX + 8], c[3][BRISK_NAME_MAX + 8],
        t[5][BRISK_NAME_MAX + 8];
    int64_t dw[3] = {1, G, G}, rs[3] = {1, G, H}, bs[2] = {1, 2 * G}, ys[3] = {0, 0, H};
    initializer(o, fresh(o, W), T_FLOAT, dw, 3, w, sizeof(float) * (size_t)(G * G));
    const_i64(o, idx, perm, (int)G);
    const_f32(o, z, zeros, G);
    free(perm), free(w), free(zeros);
    attrs a = {0};
    attr_int(&a, "axis", 0);
    NODE(o, "Gather", fresh(o, t[0]), &a, o->name[n->in[1]], idx);
    NODE(o, "Reshape", fresh(o, t[1]), NULL, t[0], const_i64(o, c[0], rs, 3));
    attr_int(&a, "axis", 0);
    NODE(o, "Gather", fresh(o, t[2]), &a, o->name[n->in[2]], idx);
    attr_int(&a, "axis", 0);
    NODE(o, "Concat", fresh(o, t[3]), &a, t[2], z);
    NODE(o, "Reshape", fresh(o, t[4]), NULL, t[3], const_i64(o, c[1], bs, 2));
    /* time-major: ONNX Runtime's CPU LSTM refuses layout 1 (batch-first) */
    static const int64_t to_tbh[3] = {1, 0, 2}, to_bt1h[4] = {2, 0, 1, 3};
    char xt[BRISK_NAME_MAX + 8], y[BRISK_NAME_MAX + 8], yb[BRISK_NAME_MAX + 8];
    attr_ints(&a, "perm", to_tbh, 3);
    NODE(o, "Transpose", fresh(o, xt), &a, o->name[n->in[0]]);
    attr_int(&a, "hidden_size", H);
    attr_str(&a, "direction", n->attr.kind == 1 ? "reverse" : "forward");
    NODE(o, "LSTM", fresh(o, y), &a, xt, W, t[1], t[4]); /* Y [T, 1, B, H] */
    attr_ints(&a, "perm", to_bt1h, 4);
    NODE(o, "Transpose", fresh(o, yb), &a, y);
    NODE(o, "Reshape", out, NULL, yb, const_i64(o, c[2], ys, 3)); /* [B, T, 1, H] -> [B, T, H] */
    return BRISK_OK;
}

static void unary(ox *o, const char *op, const char *in, const char *out) { node(o, op, &in, 1, out, NULL); }

/* One forward node as ONNX nodes writing o->name[id]. */
static brisk_status emit(ox *o, int id) {
    const brisk_node *n = &o->g->nodes[id], *n3 = &o->g3->nodes[id];
    char *out = o->name[id], c[3][BRISK_NAME_MAX + 8], t[4][BRISK_NAME_MAX + 8];
    const char *x = n->n_in > 0 ? o->name[n->in[0]] : "", *y = n->n_in > 1 ? o->name[n->in[1]] : "";
    attrs a = {0};
    snprintf(out, sizeof o->name[id], "n%d", id);
    switch (n->op) {
    case BRISK_OP_PARAM: return param(o, id);
    case BRISK_OP_CONST: {
        if (!brisk_shape_equal(&n->shape, &n3->shape))
            return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: constant %d depends on the batch size", id);
        int64_t d[BRISK_MAX_DIMS];
        int nd = (int)dims_of(&n->shape, d);
        initializer(o, out, n->dtype == BRISK_I32 ? T_INT32 : T_FLOAT, d, nd, o->g->const_data + n->attr.i0,
                    (size_t)brisk_shape_numel(&n->shape) * brisk_dtype_size(n->dtype));
        return n->dtype == BRISK_I32 || n->dtype == BRISK_F32
                   ? BRISK_OK : brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: constant %d of another dtype", id);
    }
    case BRISK_OP_MATMUL: {
        if (n->attr.trans_a) transpose_last2(o, x, o->g->nodes[n->in[0]].shape.ndim, t[0]), x = t[0];
        if (n->attr.trans_b) transpose_last2(o, y, o->g->nodes[n->in[1]].shape.ndim, t[1]), y = t[1];
        NODE(o, "MatMul", out, NULL, x, y);
        return BRISK_OK;
    }
    case BRISK_OP_BIAS_ADD: case BRISK_OP_ADD: NODE(o, "Add", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_SUB: NODE(o, "Sub", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_MUL: NODE(o, "Mul", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_DIV: NODE(o, "Div", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_SCALE:
        NODE(o, "Mul", fresh(o, t[0]), NULL, x, scalar(o, c[0], n->attr.f0));
        NODE(o, "Add", out, NULL, t[0], scalar(o, c[1], n->attr.f1));
        return BRISK_OK;
    case BRISK_OP_RELU: unary(o, "Relu", x, out); return BRISK_OK;
    case BRISK_OP_TANH: unary(o, "Tanh", x, out); return BRISK_OK;
    case BRISK_OP_SIGMOID: unary(o, "Sigmoid", x, out); return BRISK_OK;
    case BRISK_OP_DROPOUT: unary(o, "Identity", x, out); return BRISK_OK;
    case BRISK_OP_SILU:
        unary(o, "Sigmoid", x, fresh(o, t[0]));
        NODE(o, "Mul", out, NULL, x, t[0]);
        return BRISK_OK;
    case BRISK_OP_GELU:
        if (n->attr.kind == BRISK_GELU_ERF) { /* x/2 (1 + erf(x / sqrt 2)) */
            NODE(o, "Mul", fresh(o, t[0]), NULL, x, scalar(o, c[0], 0.70710678118654752f));
            unary(o, "Erf", t[0], fresh(o, t[1]));
        } else { /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
            NODE(o, "Mul", fresh(o, t[0]), NULL, x, x);
            NODE(o, "Mul", fresh(o, t[2]), NULL, t[0], scalar(o, c[0], 0.044715f));
            NODE(o, "Add", fresh(o, t[3]), NULL, t[2], scalar(o, c[2], 1.0f));
            NODE(o, "Mul", fresh(o, t[0]), NULL, t[3], x);
            NODE(o, "Mul", fresh(o, t[2]), NULL, t[0], scalar(o, c[0], 0.79788456080286536f));
            unary(o, "Tanh", t[2], fresh(o, t[1]));
        }
        NODE(o, "Add", fresh(o, t[2]), NULL, t[1], scalar(o, c[1], 1.0f));
        NODE(o, "Mul", fresh(o, t[3]), NULL, t[2], x);
        NODE(o, "Mul", out, NULL, t[3], scalar(o, c[2], 0.5f));
        return BRISK_OK;
    case BRISK_OP_SUM: case BRISK_OP_MEAN: {
        int64_t axes[BRISK_MAX_DIMS];
        int na = 0, nd = o->g->nodes[n->in[0]].shape.ndim;
        for (int i = 0; i < nd; i++)
            if (n->attr.axes >> i & 1) axes[na++] = i;
        attr_int(&a, "keepdims", n->attr.keepdim);
        if (n->op == BRISK_OP_MEAN) {
            attr_ints(&a, "axes", axes, na);
            NODE(o, "ReduceMean", out, &a, x);
        } else {
            NODE(o, "ReduceSum", out, &a, x, const_i64(o, c[0], axes, na));
        }
        return BRISK_OK;
    }
    case BRISK_OP_EXPAND: {
        /* Expand broadcasts both ways and takes no -1: 1 in the batch's dimension keeps x's */
        brisk_status st = target_shape(o, id, &n->attr.shape2, &n3->attr.shape2, 1, c[0]);
        if (!st) NODE(o, "Expand", out, NULL, x, c[0]);
        return st;
    }
    case BRISK_OP_SOFTMAX: attr_int(&a, "axis", -1); NODE(o, "Softmax", out, &a, x); return BRISK_OK;
    case BRISK_OP_LOG_SOFTMAX: attr_int(&a, "axis", -1); NODE(o, "LogSoftmax", out, &a, x); return BRISK_OK;
    case BRISK_OP_LAYERNORM:
        attr_int(&a, "axis", -1);
        attr_float(&a, "epsilon", n->attr.f0);
        NODE(o, "LayerNormalization", out, &a, x, y, o->name[n->in[2]]);
        return BRISK_OK;
    case BRISK_OP_CONCAT: {
        const char *in[BRISK_MAX_INPUTS];
        for (int i = 0; i < n->n_in; i++) in[i] = o->name[n->in[i]];
        attr_int(&a, "axis", n->attr.axis);
        node(o, "Concat", in, n->n_in, out, &a);
        return BRISK_OK;
    }
    case BRISK_OP_SLICE: {
        int64_t s = n->attr.i0, e = n->attr.i0 + n->attr.i1, ax = n->attr.axis;
        const_i64(o, c[0], &s, 1), const_i64(o, c[1], &e, 1), const_i64(o, c[2], &ax, 1);
        NODE(o, "Slice", out, NULL, x, c[0], c[1], c[2]);
        return BRISK_OK;
    }
    case BRISK_OP_RESHAPE: {
        brisk_status st = target_shape(o, id, &n->shape, &n3->shape, -1, c[0]);
        if (!st) NODE(o, "Reshape", out, NULL, x, c[0]);
        return st;
    }
    case BRISK_OP_TRANSPOSE: {
        int64_t perm[BRISK_MAX_DIMS];
        for (int i = 0; i < n->shape.ndim; i++) perm[i] = n->attr.perm[i];
        attr_ints(&a, "perm", perm, n->shape.ndim);
        NODE(o, "Transpose", out, &a, x);
        return BRISK_OK;
    }
    case BRISK_OP_GATHER: attr_int(&a, "axis", 0); NODE(o, "Gather", out, &a, x, y); return BRISK_OK;
    case BRISK_OP_CAST:
        attr_int(&a, "to", n->dtype == BRISK_I32 ? T_INT32 : T_FLOAT);
        NODE(o, "Cast", out, &a, x);
        return BRISK_OK;
    case BRISK_OP_SINUSOIDAL: { /* [sin(t f) | cos(t f)], f_k = exp(-ln(10000) k / half), as the kernel */
        int64_t half = n->attr.i0 / 2, col[2] = {-1, 1};
        float *f = malloc(sizeof(float) * (size_t)(half + 1));
        if (!f) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
        for (int64_t k = 0; k < half; k++) f[k] = expf(-9.210340371976184f * (float)k / (float)half);
        const_f32(o, c[0], f, half);
        free(f);
        attr_int(&a, "to", T_FLOAT);
        NODE(o, "Cast", fresh(o, t[0]), &a, x);
        NODE(o, "Reshape", fresh(o, t[1]), NULL, t[0], const_i64(o, c[1], col, 2));
        NODE(o, "Mul", fresh(o, t[2]), NULL, t[1], c[0]);
        unary(o, "Sin", t[2], fresh(o, t[0]));
        unary(o, "Cos", t[2], fresh(o, t[3]));
        attr_int(&a, "axis", 1);
        NODE(o, "Concat", out, &a, t[0], t[3]);
        return BRISK_OK;
    }
    case BRISK_OP_LSTM: return lstm(o, id, out);
    case BRISK_OP_ATTENTION: return attention(o, id, out);
    default:
        return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: op %s (node %d) has no ONNX export yet",
                            brisk_op_name(n->op), id);
    }
}

/* Marks what the output needs, then emits it in graph order (topological). */
static brisk_status walk(ox *o, const brisk_model_io *io, const post *p) {
    const brisk_graph *g = o->g;
    uint8_t *need = calloc((size_t)g->n_nodes, 1);
    if (!need) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
    need[p->output] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--)
        for (int k = 0; need[i] && k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) need[g->nodes[i].in[k]] = 1;
    brisk_status st = BRISK_OK;
    for (int f = 0; f < io->n_fields && !st; f++) { /* inputs: the model's, in brisk's order */
        const brisk_input_info *in = &g->inputs[io->input_node[f]];
        int id = in->node, type = in->dtype == BRISK_I32 ? T_INT32 : T_FLOAT;
        value_info(o, 11, in->name, type, &g->nodes[id].shape, &o->g3->nodes[id].shape);
        snprintf(o->name[id], sizeof o->name[id], "%s", in->name);
        if (f == 0 && p->n) { /* windowed data: brisk predict normalises the raw features */
            char mn[BRISK_NAME_MAX + 8], sd[BRISK_NAME_MAX + 8], tmp[BRISK_NAME_MAX + 8];
            NODE(o, "Sub", fresh(o, tmp), NULL, in->name, const_f32(o, mn, p->mean, p->n));
            NODE(o, "Div", fresh(o, o->name[id]), NULL, tmp, const_f32(o, sd, p->std, p->n));
        }
    }
    for (int i = 0; i < g->n_nodes && !st; i++)
        if (need[i] && g->nodes[i].op != BRISK_OP_INPUT) st = emit(o, i);
    free(need);
    if (st) return st;
    char c[2][BRISK_NAME_MAX + 8], t[BRISK_NAME_MAX + 8];
    const char *y = o->name[p->output];
    if (p->softmax) {
        attrs a = {0};
        attr_int(&a, "axis", -1);
        NODE(o, "Softmax", "output", &a, y);
    } else if (p->tstd != 1.0f || p->tmean != 0.0f) {
        NODE(o, "Mul", fresh(o, t), NULL, y, scalar(o, c[0], p->tstd));
        NODE(o, "Add", "output", NULL, t, scalar(o, c[1], p->tmean));
    } else {
        unary(o, "Identity", y, "output");
    }
    value_info(o, 12, "output", T_FLOAT, &g->nodes[p->output].shape, &o->g3->nodes[p->output].shape);
    return BRISK_OK;
}

brisk_status brisk_export_onnx(const char *checkpoint, const char *onnx_path, int fp16, const brisk_logger *log,
                               brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_checkpoint_config(checkpoint, &cfg, err);
    if (st) return st;
    const brisk_model_spec *m = &cfg.model;
    brisk_graph *g = brisk_graph_new(), *g3 = brisk_graph_new();
    brisk_backend *be = brisk_backend_cpu_new(1);
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_model_io io, io3;
    float *params = NULL, *mean = NULL, *std = NULL;
    ox o = {g, g3, NULL, fp16, {0}, 0, NULL, err};
    brisk_pb model = {0}, sub = {0};
    if (!g || !g3 || !be) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
    if (m->type == BRISK_MODEL_MESHGNN) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: a meshgnn has no ONNX export yet (its segment sums over the "
                          "mesh need ONNX ScatterND with reduction); export an mlp, diffusion, lstm or transformer", checkpoint);
        goto out;
    }
    if ((st = brisk_model_build(m, 2, BRISK_BUILD_PREDICT, g, &io, err)) ||
        (st = brisk_model_build(m, 3, BRISK_BUILD_PREDICT, g3, &io3, err)) || (st = brisk_plan_build(g, &plan, err)) ||
        (st = brisk_exec_create(g, &plan, be, &ex, err)) || (st = brisk_checkpoint_load_params(checkpoint, ex, err)))
        goto out;
    if (g->n_nodes != g3->n_nodes) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: the model's graph depends on the batch size; no ONNX export",
                          checkpoint);
        goto out;
    }
    params = malloc(sizeof(float) * (size_t)(g->n_param_floats + 1));
    o.name = calloc((size_t)g->n_nodes, sizeof *o.name);
    if (!params || !o.name) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = be->download(be, params, ex->params, sizeof(float) * (size_t)g->n_param_floats, err))) goto out;
    o.params = params;
    int nn = 0;
    if (io.n_fields == 1 && (st = brisk_checkpoint_normalization(checkpoint, &mean, &std, &nn, err))) goto out;
    float tmean = 0, tstd = 1;
    if (m->task == BRISK_TASK_REGRESS && m->type != BRISK_MODEL_DIFFUSION &&
        (st = brisk_checkpoint_target_normalization(checkpoint, &tmean, &tstd, err)))
        goto out;
    post p = {io.output, m->type != BRISK_MODEL_DIFFUSION && m->task == BRISK_TASK_CLASSIFY, tmean, tstd, mean, std, nn};
    if ((st = walk(&o, &io, &p))) goto out;

    brisk_pb_int(&model, 1, ONNX_IR_VERSION);
    brisk_pb_string(&model, 2, "brisk");
    brisk_pb_string(&model, 3, BRISK_VERSION);
    brisk_pb_string(&model, 6, fp16 ? "brisk inference graph; fp16 weights, fp32 compute" : "brisk inference graph, fp32");
    brisk_pb_string(&o.graph, 2, m->type == BRISK_MODEL_MLP ? "mlp" : m->type == BRISK_MODEL_DIFFUSION ? "diffusion_denoiser"
                                 : m->type == BRISK_MODEL_LSTM ? "lstm" : "transformer");
    brisk_pb_message(&model, 7, &o.graph);
    brisk_pb_string(&sub, 1, "");
    brisk_pb_int(&sub, 2, ONNX_OPSET);
    brisk_pb_message(&model, 8, &sub);
    if (model.oom || o.graph.oom) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "export: out of memory"); goto out; }
    brisk_out w; /* atomically, as every output: temporary file, fsync, rename */
    if ((st = brisk_out_open(&w, onnx_path, err))) goto out;
    brisk_out_write(&w, model.p, model.n);
    if ((st = brisk_out_commit(&w, err))) goto out;
    brisk_log(log, BRISK_LOG_INFO, "export    %s -> %s (ONNX opset %d, %s, %zu bytes)", checkpoint, onnx_path, ONNX_OPSET,
              fp16 ? "fp16 weights" : "fp32", model.n);
out:
    brisk_pb_free(&model);
    brisk_pb_free(&sub);
    brisk_pb_free(&o.graph);
    free(o.name);
    free(params);
    free(mean);
    free(std);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    brisk_graph_free(g3);
    if (be) be->destroy(be);
    brisk_config_free(&cfg);
    return st;
}
