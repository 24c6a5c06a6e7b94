/* The ops a graph model's layers name: one entry each (name, inputs, attribute reader,
 * builder, one line of documentation), like tract's op registry. A layer with parameters
 * names them as the PyTorch module of the same name does (Linear: "<layer>.weight" [out,
 * in], "<layer>.bias"; BatchNorm2d adds running_mean and running_var), initialised as
 * PyTorch initialises that module, so a graph model trains from the same start as its
 * torch twin given the same weights. Shapes are per sample in the attributes; dims count
 * the batch as PyTorch does (dim 1 is a sample's first). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "nn/layer_graph.h"

/* ---- attribute readers (slot use documented per op) */

static void read_linear(brisk_json_reader *r, lg_attrs *a) {
    bool bias = true;
    brisk_json_int64(r, "out", 1, INT64_C(1) << 24, &a->i[0]);
    brisk_json_bool_or(r, "bias", true, &bias);
    a->i[1] = bias;
}

/* A size of the two spatial dims: one number for both, or [height, width]. def < 0: required. */
static void read_pair(brisk_json_reader *r, const char *key, int64_t def, int64_t lo, int64_t *hw) {
    if (r->obj && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r->obj, key))) {
        int *v = NULL;
        size_t n = 0;
        brisk_json_ints(r, key, true, (int)lo, 64, &v, &n);
        if (n == 2) hw[0] = v[0], hw[1] = v[1];
        else brisk_json_fail(r, key, "expected one number or [height, width], got %zu numbers", n);
        free(v);
    } else if (def < 0) {
        brisk_json_int64(r, key, lo, 64, &hw[0]);
        hw[1] = hw[0];
    } else {
        brisk_json_int64_or(r, key, def, lo, 64, &hw[0]);
        hw[1] = hw[0];
    }
}

/* conv2d: i[0] out, i[1..2] kernel, i[3..4] stride, i[5..6] padding, i[7] groups; s[0] bias */
static void read_conv(brisk_json_reader *r, lg_attrs *a) {
    bool bias = true;
    brisk_json_int64(r, "out", 1, INT64_C(1) << 20, &a->i[0]);
    read_pair(r, "kernel", -1, 1, &a->i[1]);
    read_pair(r, "stride", 1, 1, &a->i[3]);
    read_pair(r, "padding", 0, 0, &a->i[5]);
    brisk_json_int64_or(r, "groups", 1, 1, 1 << 16, &a->i[7]);
    brisk_json_bool_or(r, "bias", true, &bias);
    a->s[0] = bias;
}

/* pools: i[0..1] kernel, i[2..3] stride (the kernel by default), i[4..5] padding */
static void read_pool(brisk_json_reader *r, lg_attrs *a) {
    read_pair(r, "kernel", -1, 1, &a->i[0]);
    if (brisk_json_has(r, "stride")) read_pair(r, "stride", 1, 1, &a->i[2]);
    else a->i[2] = a->i[0], a->i[3] = a->i[1];
    read_pair(r, "padding", 0, 0, &a->i[4]);
}

static void read_norm(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_number_or(r, "eps", 1e-5, BRISK_GT(0), &a->f[0]);
    brisk_json_number_or(r, "momentum", 0.1, BRISK_IN(0.0, 1.0), &a->f[1]);
}

/* batchnorm: a norm's, and i[0] relu after (the residual, a second input, added before it) */
static void read_batchnorm(brisk_json_reader *r, lg_attrs *a) {
    bool relu = false;
    read_norm(r, a);
    brisk_json_bool_or(r, "relu", false, &relu);
    a->i[0] = relu;
}

static void read_p(brisk_json_reader *r, lg_attrs *a) { brisk_json_number(r, "p", BRISK_IN(0.0, 0.99), &a->f[0]); }

static void read_dim(brisk_json_reader *r, lg_attrs *a) { brisk_json_int64_or(r, "dim", -1, -6, 5, &a->i[0]); }

static void read_flatten(brisk_json_reader *r, lg_attrs *a) { brisk_json_int64_or(r, "start_dim", 1, 1, 5, &a->i[0]); }

static void read_gelu(brisk_json_reader *r, lg_attrs *a) {
    static const char *const forms[] = {"none", "tanh", NULL};
    int v = 0;
    brisk_json_enum_or(r, "approximate", forms, 0, &v);
    a->i[0] = v;
}

static void read_shape(brisk_json_reader *r, lg_attrs *a) {
    int *d = NULL;
    size_t n = 0;
    brisk_json_ints(r, "shape", true, -1, 1 << 24, &d, &n);
    if (n >= BRISK_MAX_DIMS) brisk_json_fail(r, "shape", "at most %d dimensions per sample", BRISK_MAX_DIMS - 1);
    for (size_t k = 0; k < n && k < BRISK_MAX_DIMS - 1; k++) a->dims[a->ndims++] = d[k];
    free(d);
}

/* permute: dims (a sample's, 1-based as torch counts with the batch first) */
static void read_permute(brisk_json_reader *r, lg_attrs *a) {
    int *d = NULL;
    size_t n = 0;
    brisk_json_ints(r, "dims", true, 1, BRISK_MAX_DIMS - 1, &d, &n);
    if (n >= BRISK_MAX_DIMS) brisk_json_fail(r, "dims", "at most %d dims", BRISK_MAX_DIMS - 1);
    for (size_t k = 0; k < n && k < BRISK_MAX_DIMS - 1; k++) a->dims[a->ndims++] = d[k];
    free(d);
}

static void read_slice(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_int64(r, "dim", -6, 5, &a->i[0]);
    brisk_json_int64(r, "start", 0, INT64_C(1) << 40, &a->i[1]);
    brisk_json_int64(r, "length", 1, INT64_C(1) << 40, &a->i[2]);
}

static void read_embedding(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_int64(r, "num", 1, INT64_C(1) << 30, &a->i[0]);
    brisk_json_int64(r, "dim", 1, INT64_C(1) << 20, &a->i[1]);
}

/* lstm, gru: i[0] hidden, i[1] layers, i[2] bidirectional; f[0] dropout */
static void read_recurrent(brisk_json_reader *r, lg_attrs *a) {
    bool bi = false;
    brisk_json_int64(r, "hidden", 1, INT64_C(1) << 16, &a->i[0]);
    brisk_json_int64_or(r, "layers", 1, 1, 16, &a->i[1]);
    brisk_json_bool_or(r, "bidirectional", false, &bi);
    a->i[2] = bi;
    brisk_json_number_or(r, "dropout", 0.0, BRISK_IN(0.0, 0.99), &a->f[0]);
}

static void read_encoder(brisk_json_reader *r, lg_attrs *a) {
    static const char *const acts[] = {"relu", "gelu", NULL};
    bool first = false, causal = false;
    int act = 0;
    brisk_json_int64(r, "heads", 1, 1024, &a->i[0]);
    brisk_json_int64(r, "ffn", 1, INT64_C(1) << 20, &a->i[1]);
    brisk_json_bool_or(r, "norm_first", false, &first);
    brisk_json_bool_or(r, "causal", false, &causal);
    brisk_json_enum_or(r, "activation", acts, 0, &act);
    brisk_json_number_or(r, "dropout", 0.1, BRISK_IN(0.0, 0.99), &a->f[0]);
    a->i[2] = first, a->i[3] = causal, a->i[4] = act;
}

static void read_scale(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_number_or(r, "mul", 1.0, BRISK_ANY, &a->f[0]);
    brisk_json_number_or(r, "add", 0.0, BRISK_ANY, &a->f[1]);
}

/* conv1d: i[0] out, i[1] kernel, i[2] stride, i[3] padding, i[4] dilation, i[5] groups; s[0] bias */
static void read_conv1d(brisk_json_reader *r, lg_attrs *a) {
    bool bias = true;
    brisk_json_int64(r, "out", 1, INT64_C(1) << 20, &a->i[0]);
    brisk_json_int64(r, "kernel", 1, 1 << 16, &a->i[1]);
    brisk_json_int64_or(r, "stride", 1, 1, 1 << 16, &a->i[2]);
    brisk_json_int64_or(r, "padding", 0, 0, 1 << 16, &a->i[3]);
    brisk_json_int64_or(r, "dilation", 1, 1, 1 << 16, &a->i[4]);
    brisk_json_int64_or(r, "groups", 1, 1, 1 << 16, &a->i[5]);
    brisk_json_bool_or(r, "bias", true, &bias);
    a->s[0] = bias;
}

/* conv_transpose2d: conv2d's slots, and dims[0..1] output_padding */
static void read_conv_transpose(brisk_json_reader *r, lg_attrs *a) {
    read_conv(r, a);
    read_pair(r, "output_padding", 0, 0, a->dims);
}

/* upsample: i[0..1] scale, i[2] mode */
static void read_upsample(brisk_json_reader *r, lg_attrs *a) {
    static const char *const modes[] = {"nearest", "bilinear", NULL};
    int m = 0;
    read_pair(r, "scale", -1, 1, a->i);
    brisk_json_enum_or(r, "mode", modes, 0, &m);
    a->i[2] = m == 1 ? BRISK_UPSAMPLE_BILINEAR : BRISK_UPSAMPLE_NEAREST;
}

static void read_group_norm(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_int64(r, "groups", 1, 1 << 16, &a->i[0]);
    brisk_json_number_or(r, "eps", 1e-5, BRISK_GT(0), &a->f[0]);
}

static void read_pow(brisk_json_reader *r, lg_attrs *a) { brisk_json_number(r, "exponent", BRISK_ANY, &a->f[0]); }

static void read_clamp(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_number_or(r, "min", -INFINITY, BRISK_ANY, &a->f[0]);
    brisk_json_number_or(r, "max", INFINITY, BRISK_ANY, &a->f[1]);
}

static void read_leaky_relu(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_number_or(r, "negative_slope", 0.01, BRISK_ANY, &a->f[0]);
}

static void read_elu(brisk_json_reader *r, lg_attrs *a) { brisk_json_number_or(r, "alpha", 1.0, BRISK_ANY, &a->f[0]); }

static void read_softplus(brisk_json_reader *r, lg_attrs *a) {
    brisk_json_number_or(r, "beta", 1.0, BRISK_GT(0), &a->f[0]);
    brisk_json_number_or(r, "threshold", 20.0, BRISK_ANY, &a->f[1]);
}

/* ---- helpers */

static const brisk_shape *shape_of(const lg_build *b, int k) { return &b->g->nodes[b->in[k]].shape; }

static int fail(const lg_build *b, const char *fmt, const char *what) {
    return brisk_graph_fail(b->g, BRISK_ERR_SHAPE, fmt, what);
}

/* a dim in PyTorch's numbering (negative from the end) as an index of x's shape */
static int axis(const lg_build *b, int64_t dim, int ndim) {
    int d = (int)(dim < 0 ? dim + ndim : dim);
    if (d < 1 || d >= ndim) {
        brisk_graph_fail(b->g, BRISK_ERR_SHAPE, "dim %lld of a %d-dimensional input (batch first): expected a sample's "
                         "dim, 1 to %d or negative", (long long)dim, ndim, ndim - 1);
        return -1;
    }
    return d;
}

static int param(const lg_build *b, const char *what, brisk_shape s, brisk_init_kind init, float scale, int decay) {
    char name[BRISK_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", b->name, what);
    return brisk_param(b->g, name, s, init, scale, decay);
}

/* y + bias per channel (dim 1 of [N, C, ...] with `spatial` dims after it), the bias U(+-bound),
 * when the layer has one (s[0]) */
static int channel_bias(const lg_build *b, const lg_attrs *a, int y, int64_t c, int spatial, float bound) {
    if (!a->s[0] || y < 0) return y;
    int64_t d[BRISK_MAX_DIMS] = {c, 1, 1, 1};
    int bias = param(b, "bias", brisk_shape1(c), BRISK_INIT_UNIFORM, bound, 0);
    return brisk_add(b->g, y, brisk_reshape(b->g, bias, brisk_shape_make(1 + spatial, d)));
}

/* ---- builders */

/* torch.nn.Linear over the last dim: weight [out, in], bias [out], both U(+-1/sqrt(in)) */
static int build_linear(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim < 2) return fail(b, "%s: expected an input of at least one dim per sample", "linear");
    int64_t in = s->d[s->ndim - 1], rows = brisk_shape_numel(s) / in, out = a->i[0];
    float bound = 1.0f / sqrtf((float)in);
    int w = param(b, "weight", brisk_shape2(out, in), BRISK_INIT_UNIFORM, bound, 1);
    int x = s->ndim == 2 ? b->in[0] : brisk_reshape(b->g, b->in[0], brisk_shape2(rows, in));
    int y = brisk_matmul(b->g, x, w, 0, 1);
    if (a->i[1]) y = brisk_bias_add(b->g, y, param(b, "bias", brisk_shape1(out), BRISK_INIT_UNIFORM, bound, 0));
    if (s->ndim == 2) return y;
    brisk_shape o = *s;
    o.d[o.ndim - 1] = out;
    return brisk_reshape(b->g, y, o);
}

static brisk_window window(const int64_t *k, const int64_t *stride, const int64_t *pad, int groups) {
    brisk_window w = brisk_window_2d((int)k[0], (int)stride[0], (int)pad[0]);
    w.kw = (int)k[1], w.sw = (int)stride[1], w.pw = (int)pad[1], w.groups = groups;
    return w;
}

/* torch.nn.Conv2d on [N, C, H, W]: weight [out, C / groups, k, k] and bias, U(+-1/sqrt(fan_in)) */
static int build_conv2d(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim != 4) return fail(b, "%s: expected [N, C, H, W]", "conv2d");
    int64_t c = s->d[1], out = a->i[0], kh = a->i[1], kw = a->i[2], groups = a->i[7];
    if (c % groups || out % groups) return fail(b, "%s: groups must divide the input's and the output's channels", "conv2d");
    float bound = 1.0f / sqrtf((float)(c / groups * kh * kw));
    int w = param(b, "weight", brisk_shape4(out, c / groups, kh, kw), BRISK_INIT_UNIFORM, bound, 1);
    int y = brisk_conv2d(b->g, b->in[0], w, window(a->i + 1, a->i + 3, a->i + 5, (int)groups));
    return channel_bias(b, a, y, out, 2, bound);
}

/* torch.nn.Conv1d on [N, C, L]: weight [out, C / groups, k] and bias, U(+-1/sqrt(fan_in)) */
static int build_conv1d(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim != 3) return fail(b, "%s: expected [N, C, L]", "conv1d");
    int64_t c = s->d[1], out = a->i[0], k = a->i[1], groups = a->i[5];
    if (c % groups || out % groups) return fail(b, "%s: groups must divide the input's and the output's channels", "conv1d");
    float bound = 1.0f / sqrtf((float)(c / groups * k));
    int w = param(b, "weight", brisk_shape3(out, c / groups, k), BRISK_INIT_UNIFORM, bound, 1);
    int y = brisk_conv1d(b->g, b->in[0], w, (int)a->i[2], (int)a->i[3], (int)a->i[4], (int)groups);
    return channel_bias(b, a, y, out, 1, bound);
}

/* torch.nn.ConvTranspose2d on [N, C, H, W]: weight [C, out / groups, kh, kw] and bias,
 * U(+-1/sqrt(fan_in)) with PyTorch's fan_in of that weight, out / groups kh kw */
static int build_conv_transpose2d(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim != 4) return fail(b, "%s: expected [N, C, H, W]", "conv_transpose2d");
    int64_t c = s->d[1], out = a->i[0], kh = a->i[1], kw = a->i[2], groups = a->i[7];
    if (c % groups || out % groups)
        return fail(b, "%s: groups must divide the input's and the output's channels", "conv_transpose2d");
    if (a->dims[0] >= a->i[3] || a->dims[1] >= a->i[4])
        return fail(b, "%s: output_padding must be smaller than the stride", "conv_transpose2d");
    float bound = 1.0f / sqrtf((float)(out / groups * kh * kw));
    int w = param(b, "weight", brisk_shape4(c, out / groups, kh, kw), BRISK_INIT_UNIFORM, bound, 1);
    int y = brisk_conv_transpose2d(b->g, b->in[0], w, window(a->i + 1, a->i + 3, a->i + 5, (int)groups), (int)a->dims[0],
                                   (int)a->dims[1]);
    return channel_bias(b, a, y, out, 2, bound);
}

static int build_upsample(const lg_build *b, const lg_attrs *a) {
    if (shape_of(b, 0)->ndim != 4) return fail(b, "%s: expected [N, C, H, W]", "upsample");
    return brisk_upsample2d(b->g, b->in[0], (int)a->i[2], (int)a->i[0], (int)a->i[1]);
}

/* torch.nn.GroupNorm: weight ones, bias zeros [C] */
static int build_group_norm(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim < 3) return fail(b, "%s: expected [N, C, ...]", "group_norm");
    int64_t c = s->d[1];
    if (c % a->i[0]) return fail(b, "%s: groups must divide the channels", "group_norm");
    int gamma = param(b, "weight", brisk_shape1(c), BRISK_INIT_ONES, 0.0f, 0);
    int beta = param(b, "bias", brisk_shape1(c), BRISK_INIT_ZEROS, 0.0f, 0);
    return brisk_group_norm(b->g, b->in[0], gamma, beta, (int)a->i[0], (float)a->f[0]);
}

static int build_exp(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_exp(b->g, b->in[0]); }
static int build_log(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_ln(b->g, b->in[0]); }
static int build_sqrt(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_sqrt(b->g, b->in[0]); }
static int build_abs(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_abs(b->g, b->in[0]); }
static int build_pow(const lg_build *b, const lg_attrs *a) { return brisk_pow(b->g, b->in[0], (float)a->f[0]); }
static int build_clamp(const lg_build *b, const lg_attrs *a) {
    return brisk_clamp(b->g, b->in[0], (float)a->f[0], (float)a->f[1]);
}
static int build_minimum(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_minimum(b->g, b->in[0], b->in[1]); }
static int build_maximum(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_maximum(b->g, b->in[0], b->in[1]); }
static int build_leaky_relu(const lg_build *b, const lg_attrs *a) {
    return brisk_leaky_relu(b->g, b->in[0], (float)a->f[0]);
}
static int build_elu(const lg_build *b, const lg_attrs *a) { return brisk_elu(b->g, b->in[0], (float)a->f[0]); }
static int build_softplus(const lg_build *b, const lg_attrs *a) {
    return brisk_softplus(b->g, b->in[0], (float)a->f[0], (float)a->f[1]);
}

/* torch.nn.BatchNorm2d on [N, C, H, W]: weight ones, bias zeros, running_mean zeros,
 * running_var ones */
static int build_batchnorm(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim < 2) return fail(b, "%s: expected [N, C, ...]", "batchnorm");
    int64_t c = s->d[1];
    char n[BRISK_NAME_MAX];
    int gamma = param(b, "weight", brisk_shape1(c), BRISK_INIT_ONES, 0.0f, 0);
    int beta = param(b, "bias", brisk_shape1(c), BRISK_INIT_ZEROS, 0.0f, 0);
    snprintf(n, sizeof n, "%s.running_mean", b->name);
    int rm = brisk_buffer(b->g, n, brisk_shape1(c), BRISK_INIT_ZEROS);
    snprintf(n, sizeof n, "%s.running_var", b->name);
    int rv = brisk_buffer(b->g, n, brisk_shape1(c), BRISK_INIT_ONES);
    return brisk_batchnorm(b->g, b->in[0], gamma, beta, rm, rv, b->n_in > 1 ? b->in[1] : -1, (float)a->f[0],
                           (float)a->f[1], (int)a->i[0]);
}

/* torch.nn.LayerNorm over the last dim: weight ones, bias zeros */
static int build_layernorm(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    int64_t n = s->d[s->ndim - 1];
    int gamma = param(b, "weight", brisk_shape1(n), BRISK_INIT_ONES, 0.0f, 0);
    int beta = param(b, "bias", brisk_shape1(n), BRISK_INIT_ZEROS, 0.0f, 0);
    return brisk_layernorm(b->g, b->in[0], gamma, beta, (float)a->f[0]);
}

static int build_pool(const lg_build *b, const lg_attrs *a, int kind) {
    if (shape_of(b, 0)->ndim != 4) return fail(b, "%s: expected [N, C, H, W]", kind ? "avgpool2d" : "maxpool2d");
    return brisk_pool2d(b->g, b->in[0], kind, window(a->i, a->i + 2, a->i + 4, 1));
}
static int build_maxpool(const lg_build *b, const lg_attrs *a) { return build_pool(b, a, BRISK_POOL_MAX); }
static int build_avgpool(const lg_build *b, const lg_attrs *a) { return build_pool(b, a, BRISK_POOL_AVG); }

/* the mean over every dim after the channels: [N, C, H, W] -> [N, C] */
static int build_global_avgpool(const lg_build *b, const lg_attrs *a) {
    (void)a;
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim < 3) return fail(b, "%s: expected [N, C, ...]", "global_avgpool");
    uint32_t axes = 0;
    for (int d = 2; d < s->ndim; d++) axes |= 1u << d;
    return brisk_mean(b->g, b->in[0], axes, 0);
}

static int build_relu(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_relu(b->g, b->in[0]); }
static int build_gelu(const lg_build *b, const lg_attrs *a) {
    return brisk_gelu(b->g, b->in[0], a->i[0] ? BRISK_GELU_TANH : BRISK_GELU_ERF);
}
static int build_silu(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_silu(b->g, b->in[0]); }
static int build_tanh(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_tanh(b->g, b->in[0]); }
static int build_sigmoid(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_sigmoid(b->g, b->in[0]); }
static int build_softmax(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_softmax(b->g, b->in[0]); }
static int build_log_softmax(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_log_softmax(b->g, b->in[0]); }
static int build_dropout(const lg_build *b, const lg_attrs *a) { return brisk_dropout(b->g, b->in[0], (float)a->f[0]); }
static int build_scale(const lg_build *b, const lg_attrs *a) {
    return brisk_scale(b->g, b->in[0], (float)a->f[0], (float)a->f[1]);
}

static int build_add(const lg_build *b, const lg_attrs *a) {
    (void)a;
    int y = b->in[0];
    for (int k = 1; k < b->n_in; k++) y = brisk_add(b->g, y, b->in[k]);
    return y;
}
static int build_sub(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_sub(b->g, b->in[0], b->in[1]); }
static int build_mul(const lg_build *b, const lg_attrs *a) { return (void)a, brisk_mul(b->g, b->in[0], b->in[1]); }

static int build_concat(const lg_build *b, const lg_attrs *a) {
    int d = axis(b, a->i[0], shape_of(b, 0)->ndim);
    return d < 0 ? -1 : brisk_concat(b->g, b->in, b->n_in, d);
}

static int build_mean(const lg_build *b, const lg_attrs *a) {
    int d = axis(b, a->i[0], shape_of(b, 0)->ndim);
    return d < 0 ? -1 : brisk_mean(b->g, b->in[0], 1u << d, 0);
}

static int build_sum(const lg_build *b, const lg_attrs *a) {
    int d = axis(b, a->i[0], shape_of(b, 0)->ndim);
    return d < 0 ? -1 : brisk_sum(b->g, b->in[0], 1u << d, 0);
}

static int build_flatten(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (a->i[0] >= s->ndim) return fail(b, "%s: start_dim past the input's dims", "flatten");
    int64_t d[BRISK_MAX_DIMS], rest = 1;
    for (int k = 0; k < a->i[0]; k++) d[k] = s->d[k];
    for (int k = (int)a->i[0]; k < s->ndim; k++) rest *= s->d[k];
    d[a->i[0]] = rest;
    return brisk_reshape(b->g, b->in[0], brisk_shape_make((int)a->i[0] + 1, d));
}

/* to [batch, shape...]; one dim of the shape may be -1 (what the others leave) */
static int build_reshape(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    int64_t d[BRISK_MAX_DIMS] = {s->d[0]}, known = 1, per = brisk_shape_numel(s) / s->d[0];
    int free_dim = -1;
    for (int k = 0; k < a->ndims; k++) {
        d[k + 1] = a->dims[k];
        if (a->dims[k] == -1) free_dim = k + 1;
        else known *= a->dims[k];
    }
    if (free_dim >= 0) d[free_dim] = known > 0 && per % known == 0 ? per / known : 0;
    return brisk_reshape(b->g, b->in[0], brisk_shape_make(a->ndims + 1, d));
}

/* x.permute(0, dims...): the batch stays first */
static int build_permute(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    int perm[BRISK_MAX_DIMS] = {0}, seen = 1;
    if (a->ndims != s->ndim - 1) return fail(b, "%s: dims must name every dim of a sample once", "permute");
    for (int k = 0; k < a->ndims; k++) {
        perm[k + 1] = (int)a->dims[k];
        if (a->dims[k] >= s->ndim || (seen & (1 << a->dims[k])))
            return fail(b, "%s: dims must name every dim of a sample once (1 to ndim - 1)", "permute");
        seen |= 1 << a->dims[k];
    }
    return brisk_transpose(b->g, b->in[0], perm);
}

static int build_slice(const lg_build *b, const lg_attrs *a) {
    int d = axis(b, a->i[0], shape_of(b, 0)->ndim);
    return d < 0 ? -1 : brisk_slice(b->g, b->in[0], d, a->i[1], a->i[2]);
}

/* torch.nn.Embedding: weight [num, dim] N(0, 1); i32 indices of any shape */
static int build_embedding(const lg_build *b, const lg_attrs *a) {
    if (b->g->nodes[b->in[0]].dtype != BRISK_I32) return fail(b, "%s: expected i32 indices", "embedding");
    int w = param(b, "weight", brisk_shape2(a->i[0], a->i[1]), BRISK_INIT_NORMAL, 1.0f, 1);
    return brisk_gather(b->g, w, b->in[0]);
}

/* torch.nn.LSTM(batch_first=True) over [N, T, F]: the last layer's h [N, T, hidden x dirs] */
static int build_lstm(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim != 3) return fail(b, "%s: expected [N, T, features]", "lstm");
    return brisk_nn_lstm(b->g, b->in[0], s->d[2], a->i[0], (int)a->i[1], (int)a->i[2], (float)a->f[0], b->name);
}

/* torch.nn.GRU(batch_first=True) over [N, T, F], with the LSTM's attributes */
static int build_gru(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim != 3) return fail(b, "%s: expected [N, T, features]", "gru");
    return brisk_nn_gru(b->g, b->in[0], s->d[2], a->i[0], (int)a->i[1], (int)a->i[2], (float)a->f[0], b->name);
}

/* torch.nn.TransformerEncoderLayer(batch_first=True) over [N, T, d]; an optional second
 * input is a key mask [N, T] (0 = padding) */
static int build_encoder(const lg_build *b, const lg_attrs *a) {
    const brisk_shape sv = *shape_of(b, 0), *s = &sv; /* a copy: parameters grow the node array */
    if (s->ndim != 3) return fail(b, "%s: expected [N, T, d]", "encoder_layer");
    if (s->d[2] % a->i[0]) return fail(b, "%s: heads must divide d", "encoder_layer");
    return brisk_nn_encoder_layer(b->g, b->in[0], b->n_in > 1 ? b->in[1] : -1, s->d[2], (int)a->i[0], a->i[1],
                                  a->i[4] ? BRISK_ACT_GELU : BRISK_ACT_RELU, (float)a->f[0], (int)a->i[2],
                                  (int)a->i[3], b->name);
}

const lg_op lg_ops[] = {
    {"linear", 1, 1, read_linear, build_linear, "torch.nn.Linear over the last dim: out, bias (true)"},
    {"conv2d", 1, 1, read_conv, build_conv2d,
     "torch.nn.Conv2d on [N, C, H, W]: out, kernel, stride (1), padding (0) (each a number or [height, width]), "
     "groups (1), bias (true)"},
    {"conv1d", 1, 1, read_conv1d, build_conv1d,
     "torch.nn.Conv1d on [N, C, L]: out, kernel, stride (1), padding (0), dilation (1), groups (1), bias (true)"},
    {"conv_transpose2d", 1, 1, read_conv_transpose, build_conv_transpose2d,
     "torch.nn.ConvTranspose2d on [N, C, H, W]: out, kernel, stride (1), padding (0), output_padding (0) (each a "
     "number or [height, width]), groups (1), bias (true)"},
    {"upsample", 1, 1, read_upsample, build_upsample,
     "torch.nn.Upsample on [N, C, H, W]: scale (an integer, or [height, width]), mode (\"nearest\" or \"bilinear\", "
     "align_corners false)"},
    {"group_norm", 1, 1, read_group_norm, build_group_norm, "torch.nn.GroupNorm on [N, C, ...]: groups, eps (1e-5)"},
    {"batchnorm", 1, 2, read_batchnorm, build_batchnorm,
     "torch.nn.BatchNorm2d (or 1d) on [N, C, ...], running statistics kept: eps (1e-5), momentum (0.1), relu (false): "
     "a ReLU after it; a second input is added before the ReLU (a residual block's end, in one op)"},
    {"layernorm", 1, 1, read_norm, build_layernorm, "torch.nn.LayerNorm over the last dim: eps (1e-5)"},
    {"maxpool2d", 1, 1, read_pool, build_maxpool,
     "torch.nn.MaxPool2d: kernel, stride (kernel), padding (0), each a number or [height, width]"},
    {"avgpool2d", 1, 1, read_pool, build_avgpool,
     "torch.nn.AvgPool2d (count_include_pad): kernel, stride (kernel), padding (0), each a number or [height, width]"},
    {"global_avgpool", 1, 1, NULL, build_global_avgpool, "the mean over every dim after the channels: [N, C, ...] -> [N, C]"},
    {"relu", 1, 1, NULL, build_relu, "max(x, 0)"},
    {"gelu", 1, 1, read_gelu, build_gelu, "torch.nn.GELU: approximate (\"none\" erf, or \"tanh\")"},
    {"silu", 1, 1, NULL, build_silu, "x sigmoid(x)"},
    {"tanh", 1, 1, NULL, build_tanh, "tanh(x)"},
    {"sigmoid", 1, 1, NULL, build_sigmoid, "1 / (1 + exp(-x))"},
    {"softmax", 1, 1, NULL, build_softmax, "softmax over the last dim"},
    {"log_softmax", 1, 1, NULL, build_log_softmax, "log-softmax over the last dim"},
    {"leaky_relu", 1, 1, read_leaky_relu, build_leaky_relu, "torch.nn.LeakyReLU: negative_slope (0.01)"},
    {"elu", 1, 1, read_elu, build_elu, "torch.nn.ELU: alpha (1)"},
    {"softplus", 1, 1, read_softplus, build_softplus, "torch.nn.Softplus: beta (1), threshold (20)"},
    {"exp", 1, 1, NULL, build_exp, "exp(x)"},
    {"log", 1, 1, NULL, build_log, "the natural log"},
    {"sqrt", 1, 1, NULL, build_sqrt, "sqrt(x)"},
    {"abs", 1, 1, NULL, build_abs, "|x|"},
    {"pow", 1, 1, read_pow, build_pow, "x to a constant power: exponent"},
    {"clamp", 1, 1, read_clamp, build_clamp, "torch.clamp: min (none), max (none)"},
    {"minimum", 2, 2, NULL, build_minimum, "torch.minimum (broadcast)"},
    {"maximum", 2, 2, NULL, build_maximum, "torch.maximum (broadcast)"},
    {"dropout", 1, 1, read_p, build_dropout, "torch.nn.Dropout in training, the identity otherwise: p"},
    {"scale", 1, 1, read_scale, build_scale, "mul x + add: mul (1), add (0)"},
    {"add", 2, LG_MAX_IN, NULL, build_add, "the sum of its inputs (broadcast as NumPy)"},
    {"sub", 2, 2, NULL, build_sub, "first minus second (broadcast)"},
    {"mul", 2, 2, NULL, build_mul, "elementwise product (broadcast)"},
    {"concat", 2, LG_MAX_IN, read_dim, build_concat, "torch.cat along dim (-1)"},
    {"mean", 1, 1, read_dim, build_mean, "the mean over dim (-1), which goes"},
    {"sum", 1, 1, read_dim, build_sum, "the sum over dim (-1), which goes"},
    {"flatten", 1, 1, read_flatten, build_flatten, "torch.flatten from start_dim (1) on"},
    {"reshape", 1, 1, read_shape, build_reshape, "to [N, shape...] (a view): shape per sample, one dim may be -1"},
    {"slice", 1, 1, read_slice, build_slice, "x.narrow(dim, start, length)"},
    {"permute", 1, 1, read_permute, build_permute,
     "x.permute(0, dims...): dims lists every dim of a sample (1-based, the batch first and staying)"},
    {"embedding", 1, 1, read_embedding, build_embedding, "torch.nn.Embedding on i32 indices: num, dim"},
    {"lstm", 1, 1, read_recurrent, build_lstm,
     "torch.nn.LSTM(batch_first=True) on [N, T, F] -> [N, T, hidden x dirs]: hidden, layers (1), bidirectional "
     "(false), dropout (0)"},
    {"gru", 1, 1, read_recurrent, build_gru,
     "torch.nn.GRU(batch_first=True) on [N, T, F] -> [N, T, hidden x dirs]: hidden, layers (1), bidirectional "
     "(false), dropout (0)"},
    {"encoder_layer", 1, 2, read_encoder, build_encoder,
     "torch.nn.TransformerEncoderLayer(batch_first=True) on [N, T, d] (second input: a key mask [N, T], 0 = padding): "
     "heads, ffn, dropout (0.1), activation (relu), norm_first (false), causal (false)"},
};
const int lg_n_ops = (int)(sizeof lg_ops / sizeof lg_ops[0]);

const lg_op *lg_op_find(const char *name) {
    for (int k = 0; k < lg_n_ops; k++)
        if (strcmp(lg_ops[k].name, name) == 0) return &lg_ops[k];
    return NULL;
}

char *brisk_layer_ops_reference(void) {
    size_t cap = 256;
    for (int k = 0; k < lg_n_ops; k++) cap += strlen(lg_ops[k].name) + strlen(lg_ops[k].doc) + 16;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t at = (size_t)snprintf(s, cap, "| op | inputs | what it computes, and its attributes (defaults) |\n|---|---|---|\n");
    for (int k = 0; k < lg_n_ops; k++) {
        const lg_op *o = &lg_ops[k];
        char n[16];
        if (o->max_in == o->min_in) snprintf(n, sizeof n, "%d", o->min_in);
        else if (o->max_in == LG_MAX_IN) snprintf(n, sizeof n, "%d or more", o->min_in);
        else snprintf(n, sizeof n, "%d or %d", o->min_in, o->max_in);
        at += (size_t)snprintf(s + at, cap - at, "| `%s` | %s | %s |\n", o->name, n, o->doc);
    }
    return s;
}
