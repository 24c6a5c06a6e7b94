/* train-internal: the ONNX writer's state and its protobuf helpers (ONNX's field numbers),
 * shared by export_onnx.c (the model around the graph, the file) and export_onnx_ops.c (each
 * brisk op as ONNX nodes). */
#ifndef BRISK_TRAIN_EXPORT_ONNX_H
#define BRISK_TRAIN_EXPORT_ONNX_H

#include <stdio.h>
#include <string.h>

#include "core/protowire.h"
#include "brisk/brisk.h"

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
    char batch[BRISK_NAME_MAX + 8];   /* the batch size at run time, int64 [1], once emitted ("": not yet) */
} ox;

typedef struct attrs {
    brisk_pb pb[6];
    int n;
} attrs;

static inline brisk_pb *attr(attrs *a, const char *name, int type) {
    brisk_pb *p = &a->pb[a->n++];
    brisk_pb_string(p, 1, name);
    brisk_pb_uint(p, 20, (uint64_t)type);
    return p;
}
static inline void attr_int(attrs *a, const char *name, int64_t v) { brisk_pb_int(attr(a, name, A_INT), 3, v); }
static inline void attr_float(attrs *a, const char *name, float v) { brisk_pb_float(attr(a, name, A_FLOAT), 2, v); }
static inline void attr_str(attrs *a, const char *name, const char *v) { brisk_pb_string(attr(a, name, A_STRING), 4, v); }
static inline void attr_ints(attrs *a, const char *name, const int64_t *v, int n) {
    brisk_pb_packed_int(attr(a, name, A_INTS), 8, v, (size_t)n);
}

/* A fresh value name in out (size BRISK_NAME_MAX + 8). */
static inline const char *fresh(ox *o, char *out) {
    snprintf(out, BRISK_NAME_MAX + 8, "t%d", o->tmp++);
    return out;
}

/* Appends node op(in...) -> out, with attributes a (may be NULL; freed). */
static inline void node(ox *o, const char *op, const char *const *in, int n_in, const char *out, attrs *a) {
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

static inline void initializer(ox *o, const char *name, int type, const int64_t *dims, int nd, const void *data, size_t bytes) {
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
static inline const char *const_i64(ox *o, char *out, const int64_t *v, int n) {
    int64_t d = n;
    initializer(o, fresh(o, out), T_INT64, &d, 1, v, sizeof(int64_t) * (size_t)n);
    return out;
}

static inline const char *const_f32(ox *o, char *out, const float *v, int64_t n) {
    initializer(o, fresh(o, out), T_FLOAT, &n, 1, v, sizeof(float) * (size_t)n);
    return out;
}

static inline const char *scalar(ox *o, char *out, float v) {
    initializer(o, fresh(o, out), T_FLOAT, NULL, 0, &v, sizeof v);
    return out;
}

/* What brisk predict does around the graph. */
typedef struct brisk_onnx_post {
    int softmax;             /* a classifier: probabilities */
    float tmean, tstd;       /* a regression's target units */
    const float *mean, *std; /* windowed inputs' normalisation (n features), or n = 0 */
    int n;
    const float *cmean, *cstd; /* per channel of the output's last axis (nc), or nc = 0: a meshgnn's change */
    int nc;
} brisk_onnx_post;

/* export_onnx_ops.c: node id of o->g as ONNX nodes writing the value o->name[id]. */
brisk_status brisk_onnx_emit(ox *o, int id);
/* export_onnx_graphnet.c: a shape whose batch dimension (2u at batch 2, 3u at batch 3) is B u
 * at run time, as an int64 [ndim] value named fresh into out; */
brisk_status brisk_onnx_runtime_shape(ox *o, const brisk_shape *s2, const brisk_shape *s3, char *out);
/* CONST id of B copies of graph indices, copy b offset by b times the graph's size, into out; */
brisk_status brisk_onnx_batched_indices(ox *o, int id, char *out);
/* SEGMENT_SUM or SCATTER_ADD id as ScatterND(reduction add) writing out. */
brisk_status brisk_onnx_segment_sum(ox *o, int id, const char *out);
/* export_onnx.c: the graph g (built for batch 2; g3 the same model for batch 3) with its
 * parameters (g's layout) as an ONNX model file, its inputs io's fields, its output "output"
 * = io->output with post applied; *bytes (may be NULL) gets the file's size. */
brisk_status brisk_onnx_write(const brisk_graph *g, const brisk_graph *g3, const float *params, const brisk_model_io *io,
                              const brisk_onnx_post *post, int fp16, const char *name, const char *path, size_t *bytes,
                              brisk_error *err);

#endif
