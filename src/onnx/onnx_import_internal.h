/* onnx-internal: the importer's working state (onnx_import.c's driver, onnx_fold.c's host
 * constants, the onnx_build_*.c builders). Each ONNX value is a brisk node or a host constant
 * (doubles: int64 shapes and indices are exact below 2^53). */
#ifndef BRISK_ONNX_IMPORT_INTERNAL_H
#define BRISK_ONNX_IMPORT_INTERNAL_H

#include "onnx/onnx_import.h"

struct brisk_onnx_net {
    brisk_onnx_model *m;
    int *data_inputs; /* indices into graph.inputs of those not initializers */
    int n_data;
    char note[700]; /* what an inference-mode export means for training; "" when none */
};

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
    size_t ni;                /* its index */
} ctx;


/* A builder appends node c->n to the graph and returns its first output's node (further
 * outputs through ox_set_out), -1 with the graph's error set. */
typedef int (*ox_build_fn)(ctx *c);

/* Host constants are shapes, indices and small tables: at most this many values each. */
#define OX_KONST_MAX ((int64_t)1 << 24)

/* ---- onnx_import_util.c */
int ox_fail(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NULL when out of memory, or beyond OX_KONST_MAX values or a negative dim */
konst *ox_konst_new(int rank, const int64_t *d, int is_float);
void ox_konst_free(konst *k);
/* a constant's value as an integer (shapes, axes, indices): NaN 0, beyond +-2^62 clamped */
int64_t ox_i64(double v);
double ox_elem(const brisk_onnx_tensor *t, int64_t i);
konst *ox_from_tensor(const brisk_onnx_tensor *t);
/* a float initializer (float, double, float16): a parameter, trained, never a host constant */
int ox_is_param(const brisk_onnx_tensor *t);
/* a float array of an initializer (any float type converted) */
float *ox_floats_of(const brisk_onnx_tensor *t);
brisk_shape ox_shape_of(const int64_t *d, int rank);
/* An initializer as a parameter (or a buffer) named as it is, from its values. */
int ox_init_param(ctx *c, const brisk_onnx_tensor *t, int buffer);
/* value `name` (NULL: not found) */
val *ox_lookup(ctx *c, const char *name, val *tmp);
/* input k of the node as a host constant, or NULL (a tensor, a float initializer: a
 * parameter, or absent); *owned is freed by the caller */
konst *ox_const_in(ctx *c, size_t k, konst **owned);
/* input k as a brisk node (initializers become parameters, or buffers with buffer = 1;
 * constants become consts) */
int ox_in(ctx *c, size_t k, int buffer);
/* a host constant as a brisk const node (f32, or i32 for integers; a scalar as [1]) */
int ox_const_node(ctx *c, const konst *kc);
/* "input k, from node 'NAME' (OP)": where a value brisk needed as a constant came from */
const char *ox_from_node(ctx *c, size_t k, char *buf, size_t cap);
/* whether input k is given (ONNX marks a skipped optional input by an empty name) */
int ox_has_in(ctx *c, size_t k);
/* output j of the node being built (j = 0 is the builder's return value) */
int ox_set_out(ctx *c, size_t j, int node);
const brisk_shape *ox_shape(ctx *c, int id);
int64_t ox_attr_i(ctx *c, const char *name, int64_t dflt);
float ox_attr_f(ctx *c, const char *name, float dflt);
size_t ox_attr_ints(ctx *c, const char *name, const int64_t **v);
/* axis a (negative: from the end) of a rank-r value, or -1 with the error set */
int ox_axis(ctx *c, int64_t a, int rank);
int ox_scalar(const konst *k, double *v);
/* ONNX Reshape's target shape d (0 copies the input's dim, one -1 takes the rest) for an
 * input of shape in[rank] and numel values; its rank, or -1 with the error set */
int ox_reshape_dims(ctx *c, const int64_t *in, int rank, int64_t numel, const konst *shape, int64_t *d);
/* the axes of Unsqueeze or Squeeze: input 1 from opset 13, else the attribute */
int ox_axes(ctx *c, int64_t *axes);
/* the shape after Unsqueeze (1) or Squeeze (0) of a value of shape d[rank] */
int ox_squeeze_shape(ctx *c, int unsq, const int64_t *d, int rank, int64_t *o);

/* ---- onnx_build_index.c: ONNX's slice rules (negative and out-of-range bounds clamped):
 * the first index and the count along an axis of dim, and of every axis of a rank-dims value
 * from node c->n's starts, ends, axes and steps inputs (constants) */
int ox_slice_range(ctx *c, int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *lo, int64_t *n);
int ox_slice_spec(ctx *c, int rank, int64_t *lo, int64_t *n, int64_t *step, const int64_t *dims);

/* ---- onnx_build_nn.c: Conv's window from the node's attributes (spatial 1: the width of a
 * height-1 window), and y + b per channel of y [N, C, spatial...] */
int ox_conv_window(ctx *c, int spatial, brisk_window *w);
int ox_channel_add(ctx *c, int y, int b, int spatial);

/* ---- onnx_build_shape.c: NumPy's broadcast of dims a[ra] and b[rb] into o: its rank, or -1
 * with the error set */
int ox_broadcast(ctx *c, const int64_t *a, int ra, const int64_t *b, int rb, int64_t *o);

/* ---- onnx_fold.c: ONNX's elementwise op `op` (Add, Sub, Mul, Div, Pow, Equal, Less, Greater,
 * Where, and the unary math ops) of n broadcast constants, evaluated on the host (floats
 * rounded to f32 as the tensors would be) */
konst *ox_fold_elementwise(ctx *c, const char *op, konst *const *in, int n);
/* the node's first output as a host constant when every input is one (or
 * the op is Constant or Shape), else NULL with *handled = 0 */
konst *ox_fold(ctx *c, int *handled);

/* ---- the builders, by op type (onnx_import.c's table names them) */
int ox_build_conv(ctx *c);
int ox_build_maxpool(ctx *c);
int ox_build_avgpool(ctx *c);
int ox_build_global_avgpool(ctx *c);
int ox_build_gemm(ctx *c);
int ox_build_matmul(ctx *c);
int ox_build_batchnorm(ctx *c);
int ox_build_layernorm(ctx *c);
int ox_build_binary(ctx *c); /* Add, Sub, Mul, Div */
int ox_build_relu(ctx *c);
int ox_build_leaky_relu(ctx *c);
int ox_build_sigmoid(ctx *c);
int ox_build_tanh(ctx *c);
int ox_build_softmax(ctx *c);
int ox_build_log_softmax(ctx *c);
int ox_build_dropout(ctx *c);
int ox_build_identity(ctx *c);
int ox_build_flatten(ctx *c);
int ox_build_reshape(ctx *c);
int ox_build_transpose(ctx *c);
int ox_build_concat(ctx *c);
int ox_build_squeeze(ctx *c); /* and Unsqueeze */
int ox_build_cast(ctx *c);
int ox_build_pad(ctx *c);
int ox_build_slice(ctx *c);
int ox_build_split(ctx *c);
int ox_build_gather(ctx *c);
int ox_build_lstm(ctx *c);           /* onnx_build_rnn.c */
int ox_build_gru(ctx *c);
int ox_build_conv_transpose(ctx *c); /* onnx_build_vision.c */
int ox_build_resize(ctx *c);
int ox_build_fold_only(ctx *c); /* Constant, Shape, ConstantOfShape, Equal, ...: an error */
int ox_build_math(ctx *c);      /* Sqrt, Exp, Log, Abs, Neg, Reciprocal, Erf */
int ox_build_pow(ctx *c);
int ox_build_clip(ctx *c);
int ox_build_reduce(ctx *c);    /* ReduceMean, ReduceSum */
int ox_build_where(ctx *c);
int ox_build_expand(ctx *c);

#endif
