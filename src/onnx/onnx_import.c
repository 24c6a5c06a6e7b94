/* ONNX graph -> brisk graph (onnx_import.h). Each value is a brisk node or a host constant
 * (doubles: int64 shapes and indices are exact below 2^53); an op of constants is folded on
 * the host, an op of tensors appends the same graph ops the layer graphs use. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import.h"

struct brisk_onnx_net {
    brisk_onnx_model *m;
    int *data_inputs; /* indices into graph.inputs of those not initializers */
    int n_data;
};

/* ops of tensors and constants; those marked fold-only take constants alone */
static const char *const ops[] = {
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
    "Conv", "BatchNormalization", "LayerNormalization", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten",
    "Reshape", "Transpose", "Concat", "Identity", "Dropout", "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze",
    "Cast", NULL};

const char *brisk_onnx_import_ops(void) {
    static char list[512];
    if (!list[0])
        for (int k = 0; ops[k]; k++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", ops[k]);
    return list;
}

static int known(const char *op) {
    for (int k = 0; ops[k]; k++)
        if (!strcmp(ops[k], op)) return 1;
    return 0;
}

void brisk_onnx_net_free(brisk_onnx_net *net) {
    if (!net) return;
    brisk_onnx_free(net->m);
    free(net->data_inputs);
    free(net);
}

brisk_status brisk_onnx_net_open(const char *path, brisk_onnx_net **out, brisk_error *err) {
    *out = NULL;
    brisk_onnx_net *net = calloc(1, sizeof *net);
    if (!net) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    brisk_status st = brisk_onnx_open(path, &net->m, err);
    if (st) return free(net), st;
    const brisk_onnx_graph *g = &net->m->graph;
    int64_t opset = brisk_onnx_opset_version(net->m, "");
    /* every node first: one error naming each node brisk cannot build */
    char bad[800] = "";
    int n_bad = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const brisk_onnx_node *n = &g->nodes[i];
        int std = !n->domain[0] || !strcmp(n->domain, "ai.onnx");
        if (std && known(n->op_type)) continue;
        if (n_bad++ < 12)
            snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "%s%s%s%s '%s' (opset %lld)", n_bad > 1 ? ", " : "",
                     std ? "" : n->domain, std ? "" : ".", n->op_type, n->name, (long long)opset);
    }
    if (n_bad) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: %d node%s of ops brisk does not import: %s%s (it imports %s)", path,
                          n_bad, n_bad > 1 ? "s" : "", bad, n_bad > 12 ? ", ..." : "", brisk_onnx_import_ops());
        brisk_onnx_net_free(net);
        return st;
    }
    net->data_inputs = calloc(g->n_inputs + 1, sizeof *net->data_inputs);
    if (!net->data_inputs) return brisk_onnx_net_free(net), brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < g->n_inputs; i++)
        if (!brisk_onnx_initializer(net->m, g->inputs[i].name)) net->data_inputs[net->n_data++] = (int)i;
    *out = net;
    return BRISK_OK;
}

const brisk_onnx_model *brisk_onnx_net_model(const brisk_onnx_net *net) { return net->m; }
int brisk_onnx_net_n_inputs(const brisk_onnx_net *net) { return net->n_data; }
const brisk_onnx_value_info *brisk_onnx_net_input(const brisk_onnx_net *net, int k) {
    return &net->m->graph.inputs[net->data_inputs[k]];
}

/* ---------------------------------------------------------------- building */

typedef struct konst {
    int rank;
    int64_t d[BRISK_MAX_DIMS];
    int64_t numel;
    int is_float;
    double *v;
} konst;

typedef struct val {
    int node;  /* brisk node, or -1 */
    konst *c;  /* or a host constant */
} val;

typedef struct ctx {
    const brisk_onnx_net *net;
    const brisk_onnx_model *m;
    brisk_graph *g;
    val **out;       /* per ONNX node, per output */
    int *init_node;  /* per initializer: its param node, or -1 */
    const char *const *in_names;
    const int *in_nodes;
    int n_in;
    const brisk_onnx_node *n; /* the node being built */
} ctx;

static int failf(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failf(ctx *c, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return brisk_graph_fail(c->g, BRISK_ERR_UNSUPPORTED, "%s", msg);
}

static konst *konst_new(int rank, const int64_t *d, int is_float) {
    konst *k = calloc(1, sizeof *k);
    if (!k || rank > BRISK_MAX_DIMS) return free(k), NULL;
    k->rank = rank, k->numel = 1, k->is_float = is_float;
    for (int i = 0; i < rank; i++) k->d[i] = d[i], k->numel *= d[i];
    k->v = calloc((size_t)k->numel + 1, sizeof *k->v);
    if (!k->v) return free(k), NULL;
    return k;
}

static void konst_free(konst *k) {
    if (k) free(k->v), free(k);
}

static double elem(const brisk_onnx_tensor *t, int64_t i) {
    const unsigned char *p = (const unsigned char *)t->data + (size_t)i * brisk_onnx_dtype_size(t->dtype);
    union { float f; double d; int64_t i64; int32_t i32; int16_t i16; int8_t i8; uint8_t u8; } u;
    memcpy(&u, p, brisk_onnx_dtype_size(t->dtype));
    switch (t->dtype) {
    case BRISK_ONNX_FLOAT: return u.f;
    case BRISK_ONNX_DOUBLE: return u.d;
    case BRISK_ONNX_INT64: return (double)u.i64;
    case BRISK_ONNX_INT32: return u.i32;
    case BRISK_ONNX_INT16: return u.i16;
    case BRISK_ONNX_INT8: return u.i8;
    case BRISK_ONNX_UINT8: case BRISK_ONNX_BOOL: return u.u8;
    default: return NAN;
    }
}

static konst *from_tensor(const brisk_onnx_tensor *t) {
    konst *k = konst_new(t->rank, t->dims, t->dtype == BRISK_ONNX_FLOAT || t->dtype == BRISK_ONNX_DOUBLE);
    for (int64_t i = 0; k && i < t->numel; i++) k->v[i] = elem(t, i);
    return k;
}

/* a float array of an initializer (any float type converted) */
static float *floats_of(const brisk_onnx_tensor *t) {
    float *f = malloc((size_t)t->numel * sizeof *f + 1);
    for (int64_t i = 0; f && i < t->numel; i++) f[i] = (float)elem(t, i);
    return f;
}

static brisk_shape shape_of(const int64_t *d, int rank) { return brisk_shape_make(rank, d); }

/* An initializer as a parameter (or a buffer) named as it is, from its values. */
static int init_param(ctx *c, const brisk_onnx_tensor *t, int buffer) {
    size_t idx = (size_t)(t - c->m->graph.initializers);
    if (c->init_node[idx] >= 0) return c->init_node[idx];
    if (t->dtype != BRISK_ONNX_FLOAT && t->dtype != BRISK_ONNX_DOUBLE && t->dtype != BRISK_ONNX_FLOAT16)
        return failf(c, "initializer '%s' is %s where a float tensor is needed", t->name, brisk_onnx_dtype_name(t->dtype));
    if (t->rank < 1 || t->rank > BRISK_MAX_DIMS) return failf(c, "initializer '%s': rank %d (1 to %d taken)", t->name, t->rank, BRISK_MAX_DIMS);
    brisk_shape s = shape_of(t->dims, t->rank);
    int p = buffer ? brisk_buffer(c->g, t->name, s, BRISK_INIT_ZEROS) : brisk_param(c->g, t->name, s, BRISK_INIT_ZEROS, 0.0f, t->rank > 1);
    float *v = floats_of(t);
    if (!v) return failf(c, "out of memory");
    if (p >= 0) p = brisk_param_given(c->g, p, v);
    free(v);
    return c->init_node[idx] = p;
}

/* value `name` (NULL: not found) */
static val *lookup(ctx *c, const char *name, val *tmp) {
    *tmp = (val){-1, NULL};
    for (int k = 0; k < c->n_in; k++)
        if (!strcmp(c->in_names[k], name)) return tmp->node = c->in_nodes[k], tmp;
    int64_t p = brisk_onnx_producer(c->m, name);
    if (p < 0) return NULL;
    const brisk_onnx_node *n = &c->m->graph.nodes[p];
    for (size_t j = 0; j < n->n_outputs; j++)
        if (!strcmp(n->outputs[j], name)) return &c->out[p][j];
    return NULL;
}

/* input k of the node as a host constant, or NULL (a tensor, or absent) */
static konst *const_in(ctx *c, size_t k, konst **owned) {
    *owned = NULL;
    if (k >= c->n->n_inputs || !c->n->inputs[k][0]) return NULL;
    const brisk_onnx_tensor *t = brisk_onnx_initializer(c->m, c->n->inputs[k]);
    if (t) return *owned = from_tensor(t);
    val tmp, *v = lookup(c, c->n->inputs[k], &tmp);
    return v ? v->c : NULL;
}

/* input k as a brisk node (initializers become parameters, constants consts) */
static int node_in(ctx *c, size_t k, int buffer) {
    if (k >= c->n->n_inputs || !c->n->inputs[k][0]) return failf(c, "input %zu is missing", k);
    const char *name = c->n->inputs[k];
    const brisk_onnx_tensor *t = brisk_onnx_initializer(c->m, name);
    if (t && (t->dtype == BRISK_ONNX_FLOAT || t->dtype == BRISK_ONNX_DOUBLE || t->dtype == BRISK_ONNX_FLOAT16))
        return init_param(c, t, buffer);
    konst *own = NULL, *kc = t ? (own = from_tensor(t)) : NULL;
    val tmp, *v = t ? NULL : lookup(c, name, &tmp);
    if (!t && !v) return failf(c, "input '%s' is not known", name);
    if (v && v->node >= 0) return v->node;
    if (v) kc = v->c;
    if (!kc) return failf(c, "input '%s' has no value", name);
    int rank = kc->rank ? kc->rank : 1;
    int64_t one = 1;
    int id;
    if (kc->is_float) {
        float *f = malloc((size_t)kc->numel * sizeof *f + 1);
        for (int64_t i = 0; f && i < kc->numel; i++) f[i] = (float)kc->v[i];
        id = f ? brisk_const(c->g, NULL, BRISK_F32, shape_of(kc->rank ? kc->d : &one, rank), f) : failf(c, "out of memory");
        free(f);
    } else {
        int32_t *f = malloc((size_t)kc->numel * sizeof *f + 1);
        for (int64_t i = 0; f && i < kc->numel; i++) f[i] = (int32_t)kc->v[i];
        id = f ? brisk_const(c->g, NULL, BRISK_I32, shape_of(kc->rank ? kc->d : &one, rank), f) : failf(c, "out of memory");
        free(f);
    }
    konst_free(own);
    return id;
}

static const brisk_shape *nshape(ctx *c, int id) { return &c->g->nodes[id].shape; }

static int64_t attr_i(ctx *c, const char *name, int64_t dflt) {
    int64_t v = dflt;
    brisk_error e;
    if (brisk_onnx_attr_int(c->m, c->n, name, dflt, &v, &e)) failf(c, "%s", e.msg);
    return v;
}

static float attr_f(ctx *c, const char *name, float dflt) {
    float v = dflt;
    brisk_error e;
    if (brisk_onnx_attr_float(c->m, c->n, name, dflt, &v, &e)) failf(c, "%s", e.msg);
    return v;
}

static size_t attr_ints(ctx *c, const char *name, const int64_t **v) {
    size_t n = 0;
    brisk_error e;
    *v = NULL;
    if (brisk_onnx_attr_ints(c->m, c->n, name, v, &n, &e)) failf(c, "%s", e.msg);
    return n;
}

static int axis_of(ctx *c, int64_t a, int rank) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank) return failf(c, "axis %lld of a rank-%d value", (long long)a, rank);
    return (int)d;
}

/* ---- folding: ops of constants */

static konst *fold_binary(const char *op, const konst *a, const konst *b) {
    const konst *big = a->rank >= b->rank ? a : b;
    konst *o = konst_new(big->rank, big->d, a->is_float || b->is_float);
    if (!o) return NULL;
    for (int64_t i = 0; i < o->numel; i++) {
        /* broadcast by index arithmetic over the trailing dims */
        int64_t ia = 0, ib = 0, rem = i, sa = 1, sb = 1;
        for (int d = o->rank - 1; d >= 0; d--) {
            int64_t x = rem % o->d[d];
            rem /= o->d[d];
            int da = d - (o->rank - a->rank), db = d - (o->rank - b->rank);
            if (da >= 0) ia += (a->d[da] == 1 ? 0 : x) * sa, sa *= a->d[da];
            if (db >= 0) ib += (b->d[db] == 1 ? 0 : x) * sb, sb *= b->d[db];
        }
        double x = a->v[ia], y = b->v[ib];
        o->v[i] = !strcmp(op, "Add") ? x + y : !strcmp(op, "Sub") ? x - y : !strcmp(op, "Mul") ? x * y
                  : o->is_float ? x / y : (double)(int64_t)(x / y);
    }
    return o;
}

static konst *fold_gather(ctx *c, const konst *data, const konst *idx) {
    int axis = axis_of(c, attr_i(c, "axis", 0), data->rank);
    if (axis < 0) return NULL;
    int64_t d[BRISK_MAX_DIMS * 2];
    int r = 0;
    for (int k = 0; k < axis; k++) d[r++] = data->d[k];
    for (int k = 0; k < idx->rank; k++) d[r++] = idx->d[k];
    for (int k = axis + 1; k < data->rank; k++) d[r++] = data->d[k];
    if (r > BRISK_MAX_DIMS) return NULL;
    konst *o = konst_new(r, d, data->is_float);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= data->d[k];
    for (int k = axis + 1; k < data->rank; k++) inner *= data->d[k];
    for (int64_t a = 0; o && a < outer; a++)
        for (int64_t j = 0; j < idx->numel; j++) {
            int64_t ix = (int64_t)idx->v[j];
            if (ix < 0) ix += data->d[axis];
            if (ix < 0 || ix >= data->d[axis]) return konst_free(o), (void)failf(c, "Gather index out of range"), NULL;
            memcpy(o->v + (a * idx->numel + j) * inner, data->v + (a * data->d[axis] + ix) * inner,
                   (size_t)inner * sizeof *o->v);
        }
    return o;
}

/* the axes of Unsqueeze or Squeeze: input 1 from opset 13, else the attribute */
static int axes_of(ctx *c, int64_t *axes) {
    const int64_t *a;
    size_t n = attr_ints(c, "axes", &a);
    for (size_t k = 0; k < n && k < BRISK_MAX_DIMS; k++) axes[k] = a[k];
    if (n) return (int)n;
    konst *own, *k1 = const_in(c, 1, &own);
    int cnt = 0;
    for (int64_t k = 0; k1 && k < k1->numel && k < BRISK_MAX_DIMS; k++) axes[cnt++] = (int64_t)k1->v[k];
    konst_free(own);
    return cnt;
}

/* the shape after Unsqueeze (1) or Squeeze (0) of a value of shape d[rank] */
static int squeeze_shape(ctx *c, int unsq, const int64_t *d, int rank, int64_t *o) {
    int64_t axes[BRISK_MAX_DIMS];
    int n = axes_of(c, axes), r = unsq ? rank + n : rank;
    if (r > BRISK_MAX_DIMS) return failf(c, "rank %d is more than brisk's %d", r, BRISK_MAX_DIMS);
    char mark[BRISK_MAX_DIMS * 2] = {0};
    for (int k = 0; k < n; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
        if (a < 0 || a >= r) return failf(c, "axis %lld out of range", (long long)axes[k]);
        mark[a] = 1;
    }
    int out = 0;
    if (unsq) {
        for (int k = 0, j = 0; k < r; k++) o[out++] = mark[k] ? 1 : d[j++];
    } else {
        for (int k = 0; k < rank; k++)
            if (!(n ? mark[k] : d[k] == 1)) o[out++] = d[k];
    }
    return out;
}

/* ---- ops of tensors */

static int reshape_to(ctx *c, int x, const konst *shape) {
    const brisk_shape *s = nshape(c, x);
    int64_t d[BRISK_MAX_DIMS], known = 1, numel = brisk_shape_numel(s);
    int neg = -1;
    if (shape->numel > BRISK_MAX_DIMS) return failf(c, "a shape of %lld dims", (long long)shape->numel);
    for (int64_t k = 0; k < shape->numel; k++) {
        d[k] = (int64_t)shape->v[k];
        if (d[k] == 0 && k < s->ndim) d[k] = s->d[k];
        if (d[k] == -1) neg = (int)k;
        else known *= d[k];
    }
    if (neg >= 0) d[neg] = known ? numel / known : 0;
    return brisk_reshape(c->g, x, shape_of(d, (int)shape->numel));
}

static int conv_window(ctx *c, int spatial, brisk_window *w) {
    const int64_t *ks, *st, *pd, *dl;
    size_t nk = attr_ints(c, "kernel_shape", &ks), ns = attr_ints(c, "strides", &st), np = attr_ints(c, "pads", &pd),
           nd = attr_ints(c, "dilations", &dl);
    const char *ap = "NOTSET";
    brisk_error e;
    brisk_onnx_attr_string(c->m, c->n, "auto_pad", "NOTSET", &ap, &e);
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return failf(c, "auto_pad %s (NOTSET or VALID taken)", ap);
    int k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, dd[2] = {1, 1};
    for (int i = 0; i < spatial; i++) {
        int j = 2 - spatial + i;
        if (nk > (size_t)i) k[j] = (int)ks[i];
        if (ns > (size_t)i) s[j] = (int)st[i];
        if (nd > (size_t)i) dd[j] = (int)dl[i];
        if (np == 2 * (size_t)spatial) {
            if (pd[i] != pd[i + spatial]) return failf(c, "pads %lld and %lld differ (brisk pads both sides alike)",
                                                   (long long)pd[i], (long long)pd[i + spatial]);
            p[j] = (int)pd[i];
        }
    }
    *w = brisk_window_2d(k[0], s[0], p[0]);
    w->kw = k[1], w->sw = s[1], w->pw = p[1], w->dh = dd[0], w->dw = dd[1];
    w->groups = (int)attr_i(c, "group", 1);
    return 0;
}

/* y + b per channel of [N, C, spatial...] */
static int channel_add(ctx *c, int y, int b, int spatial) {
    if (y < 0 || b < 0) return -1;
    int64_t d[BRISK_MAX_DIMS] = {nshape(c, b)->d[0], 1, 1, 1};
    return brisk_add(c->g, y, brisk_reshape(c->g, b, brisk_shape_make(1 + spatial, d)));
}

static int build_conv(ctx *c) {
    int x = node_in(c, 0, 0), w = node_in(c, 1, 0);
    if (x < 0 || w < 0) return -1;
    int rank = nshape(c, x)->ndim;
    brisk_window win;
    if (rank != 3 && rank != 4) return failf(c, "Conv of a rank-%d input (1-D and 2-D taken)", rank);
    if (conv_window(c, rank - 2, &win)) return -1;
    int y = rank == 4 ? brisk_conv2d(c->g, x, w, win) : brisk_conv1d(c->g, x, w, win.sw, win.pw, win.dw, win.groups);
    if (c->n->n_inputs > 2 && c->n->inputs[2][0]) y = channel_add(c, y, node_in(c, 2, 0), rank - 2);
    return y;
}

static int build_pool(ctx *c, int kind) {
    int x = node_in(c, 0, 0);
    if (x < 0) return -1;
    if (nshape(c, x)->ndim != 4) return failf(c, "pooling of a rank-%d input (2-D taken)", nshape(c, x)->ndim);
    if (attr_i(c, "ceil_mode", 0)) return failf(c, "ceil_mode 1 (0 taken)");
    brisk_window win;
    if (conv_window(c, 2, &win)) return -1;
    if (win.dh != 1 || win.dw != 1) return failf(c, "dilated pooling");
    if (kind == BRISK_POOL_AVG && (win.ph || win.pw) && !attr_i(c, "count_include_pad", 0))
        return failf(c, "padded AveragePool without count_include_pad");
    win.groups = 1;
    return brisk_pool2d(c->g, x, kind, win);
}

static int build_gemm(ctx *c) {
    int a = node_in(c, 0, 0), b = node_in(c, 1, 0);
    float alpha = attr_f(c, "alpha", 1.0f), beta = attr_f(c, "beta", 1.0f);
    int y = brisk_matmul(c->g, a, b, (int)attr_i(c, "transA", 0), (int)attr_i(c, "transB", 0));
    if (alpha != 1.0f) y = brisk_scale(c->g, y, alpha, 0.0f);
    if (c->n->n_inputs > 2 && c->n->inputs[2][0]) {
        int bias = node_in(c, 2, 0);
        if (bias >= 0 && beta != 1.0f) bias = brisk_scale(c->g, bias, beta, 0.0f);
        if (bias >= 0 && y >= 0 && nshape(c, bias)->ndim == 1) y = brisk_bias_add(c->g, y, bias);
        else y = brisk_add(c->g, y, bias);
    }
    return y;
}

static int build_matmul(ctx *c) {
    int a = node_in(c, 0, 0), b = node_in(c, 1, 0);
    if (a < 0 || b < 0) return -1;
    brisk_shape sa = *nshape(c, a), sb = *nshape(c, b);
    if (sb.ndim != 2 || sa.ndim < 2) return failf(c, "MatMul of ranks %d and %d (a rank-2 right side taken)", sa.ndim, sb.ndim);
    int64_t k = sa.d[sa.ndim - 1], rows = brisk_shape_numel(&sa) / k;
    int x = sa.ndim == 2 ? a : brisk_reshape(c->g, a, brisk_shape2(rows, k));
    int y = brisk_matmul(c->g, x, b, 0, 0);
    if (sa.ndim == 2 || y < 0) return y;
    sa.d[sa.ndim - 1] = sb.d[1];
    return brisk_reshape(c->g, y, sa);
}

static int scalar_of(const konst *k, double *v) {
    if (!k || k->numel != 1) return 0;
    return *v = k->v[0], 1;
}

static int build_binary(ctx *c, const char *op) {
    konst *o0, *o1, *k0 = const_in(c, 0, &o0), *k1 = const_in(c, 1, &o1);
    double s;
    int y = -2;
    /* a tensor and a scalar constant: SCALE, which the fusion rules know */
    if (!k0 && scalar_of(k1, &s)) {
        int x = node_in(c, 0, 0);
        y = !strcmp(op, "Add") ? brisk_scale(c->g, x, 1.0f, (float)s) : !strcmp(op, "Sub") ? brisk_scale(c->g, x, 1.0f, (float)-s)
            : !strcmp(op, "Mul") ? brisk_scale(c->g, x, (float)s, 0.0f) : brisk_scale(c->g, x, (float)(1.0 / s), 0.0f);
    } else if (!k1 && scalar_of(k0, &s) && strcmp(op, "Div")) {
        int x = node_in(c, 1, 0);
        y = !strcmp(op, "Add") ? brisk_scale(c->g, x, 1.0f, (float)s) : !strcmp(op, "Sub") ? brisk_scale(c->g, x, -1.0f, (float)s)
                                                                    : brisk_scale(c->g, x, (float)s, 0.0f);
    }
    konst_free(o0), konst_free(o1);
    if (y != -2) return y;
    int a = node_in(c, 0, 0), b = node_in(c, 1, 0);
    if (a < 0 || b < 0) return -1;
    return !strcmp(op, "Add") ? brisk_add(c->g, a, b) : !strcmp(op, "Sub") ? brisk_sub(c->g, a, b)
           : !strcmp(op, "Mul") ? brisk_mul(c->g, a, b) : brisk_div(c->g, a, b);
}

static int last_axis(ctx *c, int x, int64_t dflt) {
    if (x < 0) return -1;
    int r = nshape(c, x)->ndim, a = axis_of(c, attr_i(c, "axis", dflt), r);
    if (a >= 0 && a != r - 1) return failf(c, "axis %d of a rank-%d input (the last taken)", a, r);
    return a;
}

static int build_tensor_op(ctx *c) {
    const char *op = c->n->op_type;
    brisk_graph *g = c->g;
    int64_t opset = brisk_onnx_opset_version(c->m, "");
    if (!strcmp(op, "Gemm")) return build_gemm(c);
    if (!strcmp(op, "MatMul")) return build_matmul(c);
    if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div")) return build_binary(c, op);
    if (!strcmp(op, "Conv")) return build_conv(c);
    if (!strcmp(op, "MaxPool")) return build_pool(c, BRISK_POOL_MAX);
    if (!strcmp(op, "AveragePool")) return build_pool(c, BRISK_POOL_AVG);
    int x = node_in(c, 0, 0);
    if (x < 0) return -1;
    if (!strcmp(op, "Relu")) return brisk_relu(g, x);
    if (!strcmp(op, "LeakyRelu")) return brisk_leaky_relu(g, x, attr_f(c, "alpha", 0.01f));
    if (!strcmp(op, "Sigmoid")) return brisk_sigmoid(g, x);
    if (!strcmp(op, "Tanh")) return brisk_tanh(g, x);
    if (!strcmp(op, "Softmax")) return last_axis(c, x, opset >= 13 ? -1 : 1) < 0 ? -1 : brisk_softmax(g, x);
    if (!strcmp(op, "LogSoftmax")) return last_axis(c, x, opset >= 13 ? -1 : 1) < 0 ? -1 : brisk_log_softmax(g, x);
    if (!strcmp(op, "Identity")) return x;
    if (!strcmp(op, "Dropout")) {
        konst *own, *r = const_in(c, 1, &own);
        double p = r && r->numel == 1 ? r->v[0] : attr_f(c, "ratio", 0.5f);
        konst_free(own);
        return p == 0.0 ? x : brisk_dropout(g, x, (float)p);
    }
    if (!strcmp(op, "GlobalAveragePool")) {
        brisk_shape s = *nshape(c, x);
        if (s.ndim != 4) return failf(c, "GlobalAveragePool of a rank-%d input (2-D taken)", s.ndim);
        s.d[2] = s.d[3] = 1;
        return brisk_reshape(g, brisk_global_avg_pool2d(g, x, BRISK_LAYOUT_NCHW), s);
    }
    if (!strcmp(op, "Flatten")) {
        const brisk_shape *s = nshape(c, x);
        int a = (int)attr_i(c, "axis", 1);
        if (a < 0) a += s->ndim;
        int64_t outer = 1;
        for (int k = 0; k < a && k < s->ndim; k++) outer *= s->d[k];
        return brisk_reshape(g, x, brisk_shape2(outer, brisk_shape_numel(s) / (outer ? outer : 1)));
    }
    if (!strcmp(op, "Reshape")) {
        konst *own, *sh = const_in(c, 1, &own);
        if (!sh) return failf(c, "a shape computed from tensors (a constant shape taken)");
        int y = reshape_to(c, x, sh);
        konst_free(own);
        return y;
    }
    if (!strcmp(op, "Transpose")) {
        int r = nshape(c, x)->ndim, perm[BRISK_MAX_DIMS];
        const int64_t *p;
        size_t n = attr_ints(c, "perm", &p);
        for (int k = 0; k < r; k++) perm[k] = n ? (int)p[k] : r - 1 - k;
        return brisk_transpose(g, x, perm);
    }
    if (!strcmp(op, "Concat")) {
        int xs[64], n = (int)c->n->n_inputs;
        if (n > 64) return failf(c, "%d inputs (64 taken)", n);
        for (int k = 0; k < n; k++)
            if ((xs[k] = node_in(c, (size_t)k, 0)) < 0) return -1;
        int a = axis_of(c, attr_i(c, "axis", 0), nshape(c, x)->ndim);
        return a < 0 ? -1 : brisk_concat(g, xs, n, a);
    }
    if (!strcmp(op, "BatchNormalization")) {
        int gamma = node_in(c, 1, 0), beta = node_in(c, 2, 0), mean = node_in(c, 3, 1), var = node_in(c, 4, 1);
        if (gamma < 0 || beta < 0 || mean < 0 || var < 0) return -1;
        /* ONNX's momentum weighs the old statistics, torch's the new batch's */
        return brisk_batchnorm(g, x, gamma, beta, mean, var, -1, attr_f(c, "epsilon", 1e-5f),
                               1.0f - attr_f(c, "momentum", 0.9f), 0);
    }
    if (!strcmp(op, "LayerNormalization")) {
        if (last_axis(c, x, -1) < 0) return -1;
        int gamma = node_in(c, 1, 0), beta = c->n->n_inputs > 2 && c->n->inputs[2][0] ? node_in(c, 2, 0) : -1;
        if (beta < 0) return failf(c, "LayerNormalization without a bias");
        return brisk_layernorm(g, x, gamma, beta, attr_f(c, "epsilon", 1e-5f));
    }
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) {
        const brisk_shape *s = nshape(c, x);
        int64_t d[BRISK_MAX_DIMS * 2];
        int r = squeeze_shape(c, op[0] == 'U', s->d, s->ndim, d);
        return r < 0 ? -1 : brisk_reshape(g, x, shape_of(d, r));
    }
    if (!strcmp(op, "Cast")) {
        int64_t to = attr_i(c, "to", BRISK_ONNX_FLOAT);
        brisk_dtype dt = to == BRISK_ONNX_FLOAT ? BRISK_F32 : to == BRISK_ONNX_INT32 || to == BRISK_ONNX_INT64 ? BRISK_I32 : (brisk_dtype)-1;
        if ((int)dt < 0) return failf(c, "Cast to %s", brisk_onnx_dtype_name((int)to));
        return g->nodes[x].dtype == dt ? x : brisk_cast(g, x, dt);
    }
    return failf(c, "%s of a tensor (brisk folds it on constants only)", op);
}

/* The node's first output as a host constant when every input is one, else NULL. */
static konst *fold(ctx *c, int *handled) {
    const char *op = c->n->op_type;
    *handled = 1;
    if (!strcmp(op, "Constant")) {
        const brisk_onnx_attr *a = c->n->n_attrs ? &c->n->attrs[0] : NULL;
        if (!a) return failf(c, "Constant without a value"), NULL;
        if (a->type == BRISK_ONNX_ATTR_TENSOR) return from_tensor(a->t);
        int64_t n = a->type == BRISK_ONNX_ATTR_INTS || a->type == BRISK_ONNX_ATTR_FLOATS ? (int64_t)a->n : 1;
        konst *k = konst_new(a->type == BRISK_ONNX_ATTR_INTS || a->type == BRISK_ONNX_ATTR_FLOATS, &n,
                             a->type == BRISK_ONNX_ATTR_FLOAT || a->type == BRISK_ONNX_ATTR_FLOATS);
        for (int64_t i = 0; k && i < n; i++)
            k->v[i] = a->type == BRISK_ONNX_ATTR_INT ? (double)a->i : a->type == BRISK_ONNX_ATTR_FLOAT ? a->f
                      : a->type == BRISK_ONNX_ATTR_INTS ? (double)a->ints[i] : a->floats[i];
        return k;
    }
    if (!strcmp(op, "Shape")) { /* of a tensor: its shape is known once built */
        konst *own, *k = const_in(c, 0, &own);
        int64_t d[BRISK_MAX_DIMS];
        int r;
        if (k) {
            r = k->rank;
            memcpy(d, k->d, sizeof d);
        } else {
            int x = node_in(c, 0, 0);
            if (x < 0) return NULL;
            r = nshape(c, x)->ndim;
            memcpy(d, nshape(c, x)->d, sizeof d);
        }
        konst_free(own);
        int64_t lo = attr_i(c, "start", 0), hi = attr_i(c, "end", r);
        if (lo < 0) lo += r;
        if (hi < 0) hi += r;
        if (hi > r) hi = r;
        int64_t n = hi > lo ? hi - lo : 0;
        konst *o = konst_new(1, &n, 0);
        for (int64_t i = 0; o && i < n; i++) o->v[i] = (double)d[lo + i];
        return o;
    }
    /* every input a constant? */
    konst *in[8] = {0}, *own[8] = {0};
    size_t n = c->n->n_inputs;
    int all = n > 0 && n <= 8;
    for (size_t k = 0; all && k < n; k++)
        if (c->n->inputs[k][0] && !(in[k] = const_in(c, k, &own[k]))) all = 0;
    konst *o = NULL;
    if (!all) *handled = 0;
    else if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div")) o = fold_binary(op, in[0], in[1]);
    else if (!strcmp(op, "Gather")) o = fold_gather(c, in[0], in[1]);
    else if (!strcmp(op, "Identity") || !strcmp(op, "Cast") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") ||
             !strcmp(op, "Reshape")) {
        int64_t d[BRISK_MAX_DIMS * 2];
        int r = in[0]->rank;
        memcpy(d, in[0]->d, sizeof in[0]->d);
        if (op[0] == 'U' || op[0] == 'S') r = squeeze_shape(c, op[0] == 'U', in[0]->d, in[0]->rank, d);
        if (op[0] == 'R') {
            int64_t known = 1, neg = -1;
            r = (int)in[1]->numel;
            for (int k = 0; k < r && k < BRISK_MAX_DIMS; k++) {
                d[k] = (int64_t)in[1]->v[k];
                if (!d[k] && k < in[0]->rank) d[k] = in[0]->d[k];
                if (d[k] == -1) neg = k;
                else known *= d[k];
            }
            if (neg >= 0) d[neg] = known ? in[0]->numel / known : 0;
        }
        int to = (int)attr_i(c, "to", 0);
        o = r < 0 ? NULL : konst_new(r, d, op[0] == 'C' ? to == BRISK_ONNX_FLOAT || to == BRISK_ONNX_DOUBLE : in[0]->is_float);
        for (int64_t i = 0; o && i < o->numel && i < in[0]->numel; i++) o->v[i] = o->is_float ? in[0]->v[i] : trunc(in[0]->v[i]);
    } else if (!strcmp(op, "Concat")) {
        int64_t total = 0;
        for (size_t k = 0; k < n; k++) total += in[k]->numel;
        if (in[0]->rank != 1) failf(c, "Concat of constants of rank %d (1 folded)", in[0]->rank);
        else if ((o = konst_new(1, &total, in[0]->is_float)))
            for (size_t k = 0, at = 0; k < n; at += (size_t)in[k]->numel, k++)
                memcpy(o->v + at, in[k]->v, (size_t)in[k]->numel * sizeof *o->v);
    } else {
        *handled = 0;
    }
    for (size_t k = 0; k < 8; k++) konst_free(own[k]);
    if (*handled && !o && !c->g->err.code) failf(c, "out of memory");
    return o;
}

int brisk_onnx_net_build(const brisk_onnx_net *net, brisk_graph *g, const char *const *in_names, const int *in_nodes,
                         int n_in, int *node_out) {
    if (!g || g->err.code) return -1;
    const brisk_onnx_graph *og = &net->m->graph;
    ctx c = {net, net->m, g, calloc(og->n_nodes + 1, sizeof(val *)), calloc(og->n_initializers + 1, sizeof(int)),
             in_names, in_nodes, n_in, NULL};
    int rc = 0;
    if (!c.out || !c.init_node) rc = brisk_graph_fail(g, BRISK_ERR_NOMEM, "onnx import: out of memory");
    for (size_t i = 0; !rc && i < og->n_initializers; i++) c.init_node[i] = -1;
    for (size_t i = 0; !rc && i < og->n_nodes; i++) {
        c.out[i] = calloc(og->nodes[i].n_outputs + 1, sizeof(val));
        if (!c.out[i]) rc = brisk_graph_fail(g, BRISK_ERR_NOMEM, "onnx import: out of memory");
        for (size_t j = 0; c.out[i] && j < og->nodes[i].n_outputs; j++) c.out[i][j].node = -1;
    }
    for (size_t k = 0; !rc && k < og->n_nodes; k++) {
        size_t i = og->order[k];
        c.n = &og->nodes[i];
        int handled;
        konst *kc = fold(&c, &handled);
        if (kc) c.out[i][0].c = kc;
        else if (!handled && !g->err.code) c.out[i][0].node = build_tensor_op(&c);
        if (g->err.code || (!kc && c.out[i][0].node < 0)) {
            if (!g->err.code) failf(&c, "not built");
            brisk_error e = g->err;
            brisk_error_prefix(&e, "%s: node '%s' (%s)", net->m->path, c.n->name, c.n->op_type);
            g->err = e;
            rc = -1;
        }
        if (node_out) node_out[i] = c.out[i][0].node;
    }
    for (size_t i = 0; c.out && i < og->n_nodes; i++) {
        for (size_t j = 0; c.out[i] && j < og->nodes[i].n_outputs; j++) konst_free(c.out[i][j].c);
        free(c.out[i]);
    }
    free(c.out), free(c.init_node);
    return rc;
}
