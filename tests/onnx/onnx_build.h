/* Small ONNX models built in the tests with brisk's protobuf writer, field by field as
 * onnx.proto numbers them, so that each bad case differs from a good model in one place.
 * Header-only, like the other tests' helpers. */
#ifndef BRISK_TEST_ONNX_BUILD_H
#define BRISK_TEST_ONNX_BUILD_H

#include <string.h>

#include "core/protowire.h"
#include "onnx/onnx_model.h"

/* TensorProto with raw_data (raw may be NULL: no data field at all). */
static inline void ob_tensor(brisk_pb *t, const char *name, int dtype, const int64_t *dims, int rank, const void *raw,
                             size_t raw_len) {
    brisk_pb_packed_int(t, 1, dims, (size_t)rank);
    brisk_pb_int(t, 2, dtype);
    if (name) brisk_pb_string(t, 8, name);
    if (raw) brisk_pb_bytes(t, 9, raw, raw_len);
}

/* StringStringEntryProto key=value into TensorProto.external_data (13). */
static inline void ob_external(brisk_pb *t, const char *key, const char *value) {
    brisk_pb e = {0};
    brisk_pb_string(&e, 1, key);
    brisk_pb_string(&e, 2, value);
    brisk_pb_message(t, 13, &e);
    brisk_pb_free(&e);
}

/* ValueInfoProto of a float tensor; a negative dim becomes dim_param "N". */
static inline void ob_value(brisk_pb *g, int field, const char *name, const int64_t *dims, int rank) {
    brisk_pb vi = {0}, type = {0}, tt = {0}, shape = {0};
    for (int i = 0; i < rank; i++) {
        brisk_pb d = {0};
        if (dims[i] < 0) brisk_pb_string(&d, 2, "N");
        else brisk_pb_int(&d, 1, dims[i]);
        brisk_pb_message(&shape, 1, &d);
        brisk_pb_free(&d);
    }
    brisk_pb_int(&tt, 1, BRISK_ONNX_FLOAT);
    brisk_pb_message(&tt, 2, &shape);
    brisk_pb_message(&type, 1, &tt);
    brisk_pb_string(&vi, 1, name);
    brisk_pb_message(&vi, 2, &type);
    brisk_pb_message(g, field, &vi);
    brisk_pb_free(&vi);
    brisk_pb_free(&type);
    brisk_pb_free(&tt);
    brisk_pb_free(&shape);
}

/* NodeProto into GraphProto.node; `in` and `out` are NULL-terminated lists; attrs (may be
 * NULL) is a buffer of whole AttributeProto fields (field 5 each). */
static inline void ob_node(brisk_pb *g, const char *op, const char *const *in, const char *const *out,
                           const brisk_pb *attrs) {
    brisk_pb n = {0};
    for (; in && *in; in++) brisk_pb_string(&n, 1, *in);
    for (; out && *out; out++) brisk_pb_string(&n, 2, *out);
    brisk_pb_string(&n, 3, op);
    brisk_pb_string(&n, 4, op);
    if (attrs) brisk_pb_raw(&n, attrs->p, attrs->n);
    brisk_pb_message(g, 1, &n);
    brisk_pb_free(&n);
}
#define OB_LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* AttributeProto a (its value set) named `name`, of `type`, appended to attrs as NodeProto
 * field 5; a is freed. */
static inline void ob_attr(brisk_pb *attrs, brisk_pb *a, const char *name, int type) {
    brisk_pb_string(a, 1, name);
    brisk_pb_uint(a, 20, (uint64_t)type);
    brisk_pb_message(attrs, 5, a);
    brisk_pb_free(a);
}

/* An AttributeProto of type INT / FLOAT / INTS appended to attrs as NodeProto field 5. */
static inline void ob_attr_int(brisk_pb *attrs, const char *name, int64_t v) {
    brisk_pb a = {0};
    brisk_pb_int(&a, 3, v);
    ob_attr(attrs, &a, name, BRISK_ONNX_ATTR_INT);
}

static inline void ob_attr_float(brisk_pb *attrs, const char *name, float v) {
    brisk_pb a = {0};
    brisk_pb_float(&a, 2, v);
    ob_attr(attrs, &a, name, BRISK_ONNX_ATTR_FLOAT);
}

static inline void ob_attr_ints(brisk_pb *attrs, const char *name, const int64_t *v, size_t n) {
    brisk_pb a = {0};
    brisk_pb_packed_int(&a, 8, v, n);
    ob_attr(attrs, &a, name, BRISK_ONNX_ATTR_INTS);
}

/* An AttributeProto of type STRING. */
static inline void ob_attr_string(brisk_pb *attrs, const char *name, const char *v) {
    brisk_pb a = {0};
    brisk_pb_string(&a, 4, v);
    ob_attr(attrs, &a, name, BRISK_ONNX_ATTR_STRING);
}

/* A Constant node making `out`: a tensor of dtype and dims with raw values v. */
static inline void ob_constant(brisk_pb *g, const char *out, int dtype, const int64_t *dims, int rank, const void *v,
                               size_t bytes) {
    brisk_pb a = {0}, t = {0}, attrs = {0};
    ob_tensor(&t, NULL, dtype, dims, rank, v, bytes);
    brisk_pb_message(&a, 5, &t);
    ob_attr(&attrs, &a, "value", BRISK_ONNX_ATTR_TENSOR);
    ob_node(g, "Constant", NULL, (const char *const[]){out, NULL}, &attrs);
    brisk_pb_free(&t), brisk_pb_free(&attrs);
}

/* ModelProto around a graph: ir_version, producer, graph, opset_import for "" at `opset`. */
static inline void ob_model(brisk_pb *m, int64_t ir, int64_t opset, const brisk_pb *graph) {
    brisk_pb op = {0};
    brisk_pb_int(m, 1, ir);
    brisk_pb_string(m, 2, "brisk-test");
    brisk_pb_message(m, 7, graph);
    brisk_pb_string(&op, 1, "");
    brisk_pb_int(&op, 2, opset);
    brisk_pb_message(m, 8, &op);
    brisk_pb_free(&op);
}

/* The good model the bad cases start from: y = x @ W + B, x [N, 4], W [4, 3], B [3], with
 * W = 0, 1, ..., 11 and B = 100, 101, 102. `w` replaces W's TensorProto when non-NULL. */
static inline void ob_linear(brisk_pb *model, const brisk_pb *w) {
    brisk_pb g = {0}, t = {0};
    float wv[12], bv[3] = {100, 101, 102};
    for (int i = 0; i < 12; i++) wv[i] = (float)i;
    ob_node(&g, "MatMul", OB_LIST("x", "W"), OB_LIST("h"), NULL);
    ob_node(&g, "Add", OB_LIST("h", "B"), OB_LIST("y"), NULL);
    brisk_pb_string(&g, 2, "linear");
    if (w) {
        brisk_pb_message(&g, 5, w);
    } else {
        ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){4, 3}, 2, wv, sizeof wv);
        brisk_pb_message(&g, 5, &t);
    }
    brisk_pb_reset(&t);
    ob_tensor(&t, "B", BRISK_ONNX_FLOAT, (const int64_t[]){3}, 1, bv, sizeof bv);
    brisk_pb_message(&g, 5, &t);
    ob_value(&g, 11, "x", (const int64_t[]){-1, 4}, 2);
    ob_value(&g, 12, "y", (const int64_t[]){-1, 3}, 2);
    ob_model(model, 8, 17, &g);
    brisk_pb_free(&g);
    brisk_pb_free(&t);
}

#endif
