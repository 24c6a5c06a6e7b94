/* Each brisk op of an inference graph as ONNX nodes (opset 17): elementwise ops one to one,
 * fused ops as short subgraphs (ATTENTION as MatMul/Softmax, LSTM and GRU as ONNX's LSTM and
 * GRU with the gates reordered), vision ops (NCHW) as Conv, BatchNormalization and the pools;
 * the graph networks' batched indices and segment sums in export_onnx_graphnet.c. */
#include <math.h>
#include <stdlib.h>

#include "export/export_onnx.h"

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

/* LSTM (xp [B, T, 4H] = x w_ih^T, w_hh, bias) as ONNX's LSTM and GRU (xp [B, T, 3H], w_hh,
 * b_ih, b_hh) as ONNX's GRU with linear_before_reset (torch's form: r multiplies
 * h_prev w_hn^T + b_hn), time-major. The input weight is the identity with the gates
 * reordered from PyTorch's (LSTM i, f, g, o; GRU r, z, n) to ONNX's (i, o, f, c; z, r, h), so
 * X = xp passes through exactly; R and B are w_hh and the biases reordered (the LSTM's summed
 * bias as ONNX's input bias, its recurrent bias zeros). */
static brisk_status recurrent(ox *o, int id, const char *out) {
    const brisk_node *n = &o->g->nodes[id];
    int gru = n->op == BRISK_OP_GRU, gates = gru ? 3 : 4;
    int64_t H = n->shape.d[2], G = gates * H;
    static const int lstm_order[4] = {0, 3, 1, 2}, gru_order[3] = {1, 0, 2}; /* ONNX gate k = PyTorch's order[k] */
    const int *order = gru ? gru_order : lstm_order;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)G);
    float *w = calloc((size_t)(G * G), sizeof(float)), *zeros = calloc((size_t)G, sizeof(float));
    if (!perm || !w || !zeros) {
        free(perm), free(w), free(zeros);
        return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
    }
    for (int k = 0; k < gates; k++)
        for (int64_t j = 0; j < H; j++) perm[k * H + j] = order[k] * H + j;
    for (int64_t r = 0; r < G; r++) w[r * G + perm[r]] = 1.0f;
    char W[BRISK_NAME_MAX + 8], idx[BRISK_NAME_MAX + 8], z[BRISK_NAME_MAX + 8], c[3][BRISK_NAME_MAX + 8],
        t[6][BRISK_NAME_MAX + 8];
    int64_t dw[3] = {1, G, G}, rs[3] = {1, G, H}, bs[2] = {1, 2 * G}, ys[3] = {0, 0, H};
    initializer(o, fresh(o, W), T_FLOAT, dw, 3, w, sizeof(float) * (size_t)(G * G));
    const_i64(o, idx, perm, (int)G);
    if (!gru) const_f32(o, z, zeros, G);
    free(perm), free(w), free(zeros);
    attrs a = {0};
    attr_int(&a, "axis", 0);
    NODE(o, "Gather", fresh(o, t[0]), &a, o->name[n->in[1]], idx);
    NODE(o, "Reshape", fresh(o, t[1]), NULL, t[0], const_i64(o, c[0], rs, 3));
    attr_int(&a, "axis", 0);
    NODE(o, "Gather", fresh(o, t[2]), &a, o->name[n->in[2]], idx);
    if (gru) {
        attr_int(&a, "axis", 0);
        NODE(o, "Gather", fresh(o, t[5]), &a, o->name[n->in[3]], idx);
    }
    attr_int(&a, "axis", 0);
    NODE(o, "Concat", fresh(o, t[3]), &a, t[2], gru ? t[5] : z);
    NODE(o, "Reshape", fresh(o, t[4]), NULL, t[3], const_i64(o, c[1], bs, 2));
    /* time-major: ONNX Runtime's CPU LSTM refuses layout 1 (batch-first) */
    static const int64_t to_tbh[3] = {1, 0, 2}, to_bt1h[4] = {2, 0, 1, 3};
    char xt[BRISK_NAME_MAX + 8], y[BRISK_NAME_MAX + 8], yb[BRISK_NAME_MAX + 8];
    attr_ints(&a, "perm", to_tbh, 3);
    NODE(o, "Transpose", fresh(o, xt), &a, o->name[n->in[0]]);
    attr_int(&a, "hidden_size", H);
    attr_str(&a, "direction", n->attr.kind == 1 ? "reverse" : "forward");
    if (gru) attr_int(&a, "linear_before_reset", 1);
    NODE(o, gru ? "GRU" : "LSTM", fresh(o, y), &a, xt, W, t[1], t[4]); /* Y [T, 1, B, H] */
    attr_ints(&a, "perm", to_bt1h, 4);
    NODE(o, "Transpose", fresh(o, yb), &a, y);
    NODE(o, "Reshape", out, NULL, yb, const_i64(o, c[2], ys, 3)); /* [B, T, 1, H] -> [B, T, H] */
    return BRISK_OK;
}

static void unary(ox *o, const char *op, const char *in, const char *out) { node(o, op, &in, 1, out, NULL); }

/* A 2-D window as ONNX's attributes (pads: begin then end of each spatial axis). */
static void window(attrs *a, const brisk_window *w, int kh, int kw, int dilations) {
    const int64_t k[2] = {kh, kw}, s[2] = {w->sh, w->sw}, p[4] = {w->ph, w->pw, w->ph, w->pw}, d[2] = {w->dh, w->dw};
    attr_ints(a, "kernel_shape", k, 2);
    attr_ints(a, "strides", s, 2);
    attr_ints(a, "pads", p, 4);
    if (dilations) attr_ints(a, "dilations", d, 2);
}

/* CONV2D, BATCHNORM (inference: the running statistics) and POOL2D, NCHW as brisk's. */
static brisk_status vision(ox *o, int id, const char *out) {
    const brisk_node *n = &o->g->nodes[id];
    const char *x = o->name[n->in[0]];
    attrs a = {0};
    if (n->op == BRISK_OP_CONV2D) {
        if (n->attr.win.layout != BRISK_LAYOUT_NCHW) /* ONNX's Conv is NCHW only */
            return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: node %d (conv2d) is NHWC; ONNX's Conv takes "
                                "NCHW (build the model with the NCHW layout to export it)", id);
        const brisk_shape *w = &o->g->nodes[n->in[1]].shape;
        window(&a, &n->attr.win, (int)w->d[2], (int)w->d[3], 1);
        attr_int(&a, "group", n->attr.win.groups > 0 ? n->attr.win.groups : 1);
        NODE(o, "Conv", out, &a, x, o->name[n->in[1]]);
        return BRISK_OK;
    }
    if (n->op == BRISK_OP_POOL2D) {
        if (n->attr.win.layout != BRISK_LAYOUT_NCHW)
            return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: node %d (pool2d) is NHWC; ONNX's pooling "
                                "takes NCHW (build the model with the NCHW layout to export it)", id);
        window(&a, &n->attr.win, n->attr.win.kh, n->attr.win.kw, n->attr.kind == BRISK_POOL_MAX);
        if (n->attr.kind == BRISK_POOL_AVG) attr_int(&a, "count_include_pad", 1);
        NODE(o, n->attr.kind == BRISK_POOL_MAX ? "MaxPool" : "AveragePool", out, &a, x);
        return BRISK_OK;
    }
    if (n->op == BRISK_OP_CONV2D_GRAD_X) { /* a transposed convolution's forward: ConvTranspose */
        if (n->attr.win.layout != BRISK_LAYOUT_NCHW)
            return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: node %d (conv_transpose2d) is NHWC; ONNX's "
                                "ConvTranspose takes NCHW", id);
        const brisk_shape *w = &o->g->nodes[n->in[1]].shape, *xs = &o->g->nodes[n->in[0]].shape;
        const brisk_window *v = &n->attr.win;
        /* output_padding: what the output has beyond (H - 1) s - 2 p + d (k - 1) + 1 */
        int64_t oph = n->shape.d[2] - ((xs->d[2] - 1) * v->sh - 2 * v->ph + v->dh * (w->d[2] - 1) + 1);
        int64_t opw = n->shape.d[3] - ((xs->d[3] - 1) * v->sw - 2 * v->pw + v->dw * (w->d[3] - 1) + 1);
        const int64_t op[2] = {oph, opw};
        window(&a, v, (int)w->d[2], (int)w->d[3], 1);
        attr_int(&a, "group", v->groups > 0 ? v->groups : 1);
        attr_ints(&a, "output_padding", op, 2);
        NODE(o, "ConvTranspose", out, &a, x, o->name[n->in[1]]);
        return BRISK_OK;
    }
    if (n->op == BRISK_OP_UPSAMPLE2D) { /* Resize by the integer scales, as torch.nn.Upsample */
        char c[2][BRISK_NAME_MAX + 8];
        const float sc[4] = {1.0f, 1.0f, (float)n->attr.i0, (float)n->attr.i1};
        const_f32(o, c[1], sc, 4);
        if (n->attr.kind == BRISK_UPSAMPLE_BILINEAR) {
            attr_str(&a, "mode", "linear");
            attr_str(&a, "coordinate_transformation_mode", "half_pixel");
        } else {
            attr_str(&a, "mode", "nearest");
            attr_str(&a, "coordinate_transformation_mode", "asymmetric");
            attr_str(&a, "nearest_mode", "floor");
        }
        NODE(o, "Resize", out, &a, x, "", c[1]);
        return BRISK_OK;
    }
    /* BATCHNORM: y = (x - mean) / sqrt(var + eps) gamma + beta [+ residual] [then ReLU] */
    char t[2][BRISK_NAME_MAX + 8];
    const char *y = n->n_in > 5 || n->attr.kind == 1 ? fresh(o, t[0]) : out;
    attr_float(&a, "epsilon", n->attr.f0);
    NODE(o, "BatchNormalization", y, &a, x, o->name[n->in[1]], o->name[n->in[2]], o->name[n->in[3]], o->name[n->in[4]]);
    if (n->n_in > 5) {
        const char *sum = n->attr.kind == 1 ? fresh(o, t[1]) : out;
        NODE(o, "Add", sum, NULL, y, o->name[n->in[5]]);
        y = sum;
    }
    if (n->attr.kind == 1) unary(o, "Relu", y, out);
    return BRISK_OK;
}

/* One forward node as ONNX nodes writing o->name[id]. */
brisk_status brisk_onnx_emit(ox *o, int id) {
    const brisk_node *n = &o->g->nodes[id], *n3 = &o->g3->nodes[id];
    char *out = o->name[id], c[3][BRISK_NAME_MAX + 8], t[4][BRISK_NAME_MAX + 8];
    const char *x = n->n_in > 0 ? o->name[n->in[0]] : "", *y = n->n_in > 1 ? o->name[n->in[1]] : "";
    attrs a = {0};
    snprintf(out, sizeof o->name[id], "n%d", id);
    switch (n->op) {
    case BRISK_OP_PARAM: return param(o, id);
    case BRISK_OP_CONST: {
        if (!brisk_shape_equal(&n->shape, &n3->shape)) return brisk_onnx_batched_indices(o, id, out);
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
        /* Expand broadcasts both ways and takes no -1: 1 in the batch's dimension keeps x's
         * when x has it; when x is 1 there (one copy for every sample), B comes at run time */
        const brisk_shape *xs = &o->g->nodes[n->in[0]].shape, *s2 = &n->attr.shape2, *s3 = &n3->attr.shape2;
        int from_one = 0;
        for (int i = 0; i < s2->ndim; i++) {
            int k = i - (s2->ndim - xs->ndim); /* x's dimension under i, broadcasting from the right */
            from_one |= s2->d[i] != s3->d[i] && (k < 0 || xs->d[k] == 1);
        }
        brisk_status st = from_one ? brisk_onnx_runtime_shape(o, s2, s3, c[0])
                                   : target_shape(o, id, s2, s3, 1, c[0]);
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
    case BRISK_OP_SEGMENT_SUM: case BRISK_OP_SCATTER_ADD: return brisk_onnx_segment_sum(o, id, out);
    case BRISK_OP_LSTM: case BRISK_OP_GRU: return recurrent(o, id, out);
    case BRISK_OP_CONV2D: case BRISK_OP_BATCHNORM: case BRISK_OP_POOL2D: return vision(o, id, out);
    case BRISK_OP_CONV2D_GRAD_X: case BRISK_OP_UPSAMPLE2D: return vision(o, id, out);
    case BRISK_OP_EXP: unary(o, "Exp", x, out); return BRISK_OK;
    case BRISK_OP_LOG: unary(o, "Log", x, out); return BRISK_OK;
    case BRISK_OP_SQRT: unary(o, "Sqrt", x, out); return BRISK_OK;
    case BRISK_OP_ABS: unary(o, "Abs", x, out); return BRISK_OK;
    case BRISK_OP_ERF: unary(o, "Erf", x, out); return BRISK_OK;
    case BRISK_OP_POW: NODE(o, "Pow", out, NULL, x, scalar(o, c[0], n->attr.f0)); return BRISK_OK;
    case BRISK_OP_POW_XY: NODE(o, "Pow", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_MINIMUM: NODE(o, "Min", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_MAXIMUM: NODE(o, "Max", out, NULL, x, y); return BRISK_OK;
    case BRISK_OP_CLAMP: NODE(o, "Clip", out, NULL, x, scalar(o, c[0], n->attr.f0), scalar(o, c[1], n->attr.f1)); return BRISK_OK;
    case BRISK_OP_LEAKY_RELU: attr_float(&a, "alpha", n->attr.f0); NODE(o, "LeakyRelu", out, &a, x); return BRISK_OK;
    case BRISK_OP_ELU: attr_float(&a, "alpha", n->attr.f0); NODE(o, "Elu", out, &a, x); return BRISK_OK;
    case BRISK_OP_SOFTPLUS: /* torch's: x where beta x > threshold, else log(1 + e^(beta x)) / beta */
        NODE(o, "Mul", fresh(o, t[0]), NULL, x, scalar(o, c[0], n->attr.f0));
        unary(o, "Softplus", t[0], fresh(o, t[1]));
        NODE(o, "Div", fresh(o, t[2]), NULL, t[1], c[0]);
        NODE(o, "Greater", fresh(o, t[3]), NULL, t[0], scalar(o, c[1], n->attr.f1));
        NODE(o, "Where", out, NULL, t[3], x, t[2]);
        return BRISK_OK;
    case BRISK_OP_LAYERNORM_XHAT: { /* LayerNormalization with weight 1 and bias 0 (group norm's rows) */
        int64_t d = n->shape.d[n->shape.ndim - 1];
        float *v = malloc(sizeof(float) * (size_t)d);
        if (!v) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
        for (int64_t i = 0; i < d; i++) v[i] = 1.0f;
        const_f32(o, c[0], v, d);
        memset(v, 0, sizeof(float) * (size_t)d);
        const_f32(o, c[1], v, d);
        free(v);
        attr_int(&a, "axis", -1);
        attr_float(&a, "epsilon", n->attr.f0);
        NODE(o, "LayerNormalization", out, &a, x, c[0], c[1]);
        return BRISK_OK;
    }
    case BRISK_OP_ATTENTION: return attention(o, id, out);
    default:
        return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: op %s (node %d) has no ONNX export yet",
                            brisk_op_name(n->op), id);
    }
}
