/* onnx-internal: the ONNX model reader. Bytes of a .onnx file (a protobuf ModelProto) become a
 * validated, read-only brisk_onnx_model: its graph's nodes with their attributes, initializers
 * with their data, the graph's inputs, outputs and value_info with shapes, opset imports. The
 * converter to brisk's layer graphs (issue 32) reads this; it never sees protobuf.
 *
 *     brisk_onnx_model *m;
 *     if (brisk_onnx_open("net.onnx", &m, &err)) fail(err.msg);
 *     int64_t opset = brisk_onnx_opset_version(m, "");  // 13 .. 17 from torch 1.13
 *     const brisk_onnx_graph *g = &m->graph;
 *     for (size_t k = 0; k < g->n_nodes; k++) {
 *         const brisk_onnx_node *n = &g->nodes[g->order[k]];  // producers before consumers
 *         if (!strcmp(n->op_type, "Gemm")) {
 *             int64_t tb;
 *             if (brisk_onnx_attr_int(m, n, "transB", 0, &tb, &err)) fail(err.msg);
 *             const brisk_onnx_tensor *w = brisk_onnx_initializer(m, n->inputs[1]);  // NULL: not constant
 *             ...
 *     }
 *     brisk_onnx_free(m);
 *
 * What the reader promises of a model it returns (each breach is one error naming the file and
 * the field, e.g. "net.onnx: initializer 'fc.weight': dims [64, 32] of float need 8192 bytes,
 * raw_data has 8000"):
 *   - the file is a ModelProto (its first field one of ModelProto's, so a JPEG, JSON or a
 *     torch.save zip is told apart from a damaged model), not truncated, every varint, length
 *     and wire type well formed; unknown fields are skipped, as protobuf does;
 *   - ir_version and a graph are present; no model-local functions, subgraphs (If, Loop, Scan),
 *     sparse tensors or type-proto attributes, which brisk cannot run (each a clear refusal);
 *   - every tensor (initializer or attribute) has dims >= 0 whose product does not overflow, a
 *     fixed-size element type (float, double, float16, bfloat16, (u)int8/16/32/64, bool; not
 *     string or complex), and exactly dims x element size bytes of data, from raw_data, from the
 *     typed field its type uses (float_data, int32_data, int64_data, double_data, uint64_data,
 *     packed or not; int32_data values in range of the narrower type) or from external data;
 *   - names: initializers unique; graph inputs unique; every non-empty node output produced
 *     once and by nothing else; every non-empty node input and every graph output produced by
 *     a node, a graph input or an initializer; no cycle (graph.order is a topological order);
 *   - external data (data_location EXTERNAL, keys "location", "offset", "length") is read from
 *     a relative path inside the model's folder: absolute paths, ".." and symlinks leading out
 *     are refused, as are offset/length past the end of that file; models parsed from memory
 *     have no folder and refuse external data.
 * It does not check what ops mean (arity, attribute presence, types flowing between nodes):
 * that is the converter's, which knows each op.
 *
 * Why brisk's own protobuf reader (core/protowire.h) and not protobuf-c with onnx.proto, both of
 * which Debian has (libprotobuf-c-dev, protobuf-c-compiler; onnx.proto in libonnx-dev):
 *   - onnx.proto ships only in libonnx-dev, which pulls the ONNX C++ runtime libraries
 *     (libonnx1, libonnxifi) to build brisk, and protoc-c (protobuf-c-compiler) pulls protoc's
 *     C++ libraries; brisk's build would grow a code generator and a C++ toolchain's libraries
 *     for a reader of about 20 message fields. The writer already does without them.
 *   - protobuf_c_message_unpack copies every bytes field (do_alloc + memcpy of raw_data), so a
 *     model's weights would sit in memory twice; here raw_data points into the file's buffer.
 *   - protobuf-c's unpack recurses into nested messages without a depth limit, and onnx.proto
 *     is recursive (GraphProto > NodeProto > AttributeProto > GraphProto, TypeProto), so a small
 *     crafted file can exhaust the stack; this reader reads a fixed depth and refuses subgraphs.
 *   - protobuf-c reports a failed unpack as NULL, with no reason (PROTOBUF_C_UNPACK_ERROR is
 *     empty by default); brisk's errors name the file, the message path and the field.
 *   - The validation above is most of the work and is needed either way.
 *
 * Lifetimes: everything a model points to (strings, arrays, tensor data) lives until
 * brisk_onnx_free. A tensor's data may point into the file's bytes: brisk_onnx_open keeps its
 * own copy; brisk_onnx_parse borrows the caller's buffer, which must outlive the model. Data may
 * be unaligned for its type: read it with memcpy. Strings are NUL-terminated copies (names
 * holding a NUL byte are refused). A model is read-only and may be shared between threads. */
#ifndef BRISK_ONNX_MODEL_H
#define BRISK_ONNX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/core.h"

/* TensorProto.DataType, as ONNX numbers them. */
typedef enum brisk_onnx_dtype {
    BRISK_ONNX_UNDEFINED = 0,
    BRISK_ONNX_FLOAT = 1,
    BRISK_ONNX_UINT8 = 2,
    BRISK_ONNX_INT8 = 3,
    BRISK_ONNX_UINT16 = 4,
    BRISK_ONNX_INT16 = 5,
    BRISK_ONNX_INT32 = 6,
    BRISK_ONNX_INT64 = 7,
    BRISK_ONNX_STRING = 8,
    BRISK_ONNX_BOOL = 9,
    BRISK_ONNX_FLOAT16 = 10,
    BRISK_ONNX_DOUBLE = 11,
    BRISK_ONNX_UINT32 = 12,
    BRISK_ONNX_UINT64 = 13,
    BRISK_ONNX_COMPLEX64 = 14,
    BRISK_ONNX_COMPLEX128 = 15,
    BRISK_ONNX_BFLOAT16 = 16
} brisk_onnx_dtype;

/* "float", "int64", "float16", ...; "undefined"; "type N" for a number ONNX does not define. */
const char *brisk_onnx_dtype_name(int dtype);
/* Bytes per element, or 0 for the types a tensor here cannot hold (string, complex, unknown). */
size_t brisk_onnx_dtype_size(int dtype);

/* AttributeProto.AttributeType. The reader returns only the first seven kinds: it refuses a
 * node holding a graph, sparse tensor, tensor list or type proto. */
typedef enum brisk_onnx_attr_type {
    BRISK_ONNX_ATTR_FLOAT = 1,
    BRISK_ONNX_ATTR_INT = 2,
    BRISK_ONNX_ATTR_STRING = 3,
    BRISK_ONNX_ATTR_TENSOR = 4,
    BRISK_ONNX_ATTR_GRAPH = 5,
    BRISK_ONNX_ATTR_FLOATS = 6,
    BRISK_ONNX_ATTR_INTS = 7,
    BRISK_ONNX_ATTR_STRINGS = 8,
    BRISK_ONNX_ATTR_TENSORS = 9,
    BRISK_ONNX_ATTR_GRAPHS = 10,
    BRISK_ONNX_ATTR_SPARSE_TENSOR = 11,
    BRISK_ONNX_ATTR_SPARSE_TENSORS = 12,
    BRISK_ONNX_ATTR_TYPE_PROTO = 13,
    BRISK_ONNX_ATTR_TYPE_PROTOS = 14
} brisk_onnx_attr_type;
/* "float", "ints", ... as the messages spell them. */
const char *brisk_onnx_attr_type_name(int type);

/* A constant: an initializer, or a node attribute's tensor (Constant's "value"). */
typedef struct brisk_onnx_tensor {
    const char *name;     /* "" when the file gives none (attribute tensors may not) */
    int dtype;            /* brisk_onnx_dtype with a size (brisk_onnx_dtype_size > 0) */
    int rank;             /* 0 for a scalar */
    const int64_t *dims;  /* rank entries, each >= 0 */
    int64_t numel;        /* product of dims; 1 for a scalar */
    const void *data;     /* numel x element size bytes, row-major, host order (little-endian);
                           * may be unaligned; NULL when numel is 0 */
    size_t nbytes;
    int external;         /* 1: read from an external data file */
} brisk_onnx_tensor;

typedef struct brisk_onnx_attr {
    const char *name;
    int type;                   /* brisk_onnx_attr_type, FLOAT .. INTS .. STRINGS */
    float f;                    /* FLOAT */
    int64_t i;                  /* INT */
    const char *s;              /* STRING: NUL-terminated; may itself hold NULs (s_len counts all) */
    size_t s_len;
    const brisk_onnx_tensor *t; /* TENSOR */
    const float *floats;        /* FLOATS: n values */
    const int64_t *ints;        /* INTS: n values */
    const char *const *strings; /* STRINGS: n NUL-terminated strings */
    size_t n;
} brisk_onnx_attr;

typedef struct brisk_onnx_node {
    const char *name;                /* "" when unnamed */
    const char *op_type;
    const char *domain;              /* "" (or "ai.onnx") for the standard operators */
    const char *const *inputs;       /* value names; "" marks an optional input left out */
    size_t n_inputs;
    const char *const *outputs;      /* value names; "" marks an optional output not wanted */
    size_t n_outputs;
    const brisk_onnx_attr *attrs;
    size_t n_attrs;
} brisk_onnx_node;

/* One dimension of a declared shape. */
typedef struct brisk_onnx_dim {
    int64_t value;      /* >= 0, or -1 when not fixed */
    const char *param;  /* a symbolic name ("N", "batch_size"), or NULL */
} brisk_onnx_dim;

/* A graph input, output or value_info entry. */
typedef struct brisk_onnx_value_info {
    const char *name;
    int is_tensor;               /* 0: a sequence, map, optional or sparse type, or no type */
    int elem_type;               /* brisk_onnx_dtype; 0 when not given */
    int rank;                    /* -1 when no shape is given (any rank) */
    const brisk_onnx_dim *dims;  /* rank entries */
} brisk_onnx_value_info;

typedef struct brisk_onnx_graph {
    const char *name;
    const brisk_onnx_node *nodes;
    size_t n_nodes;
    const size_t *order;  /* n_nodes indices into nodes: every node after those producing its
                           * inputs, and the file's own order where that already is one */
    const brisk_onnx_tensor *initializers;
    size_t n_initializers;
    /* Graph inputs; models of IR version < 4 also list each initializer here. */
    const brisk_onnx_value_info *inputs;
    size_t n_inputs;
    const brisk_onnx_value_info *outputs;
    size_t n_outputs;
    const brisk_onnx_value_info *value_info;  /* shapes of intermediate values, when given */
    size_t n_value_info;
} brisk_onnx_graph;

typedef struct brisk_onnx_opset {
    const char *domain;  /* "" or "ai.onnx": the standard operators */
    int64_t version;
} brisk_onnx_opset;

typedef struct brisk_onnx_model {
    const char *path;  /* the file as named to brisk_onnx_open (or parse), for messages */
    int64_t ir_version;
    const char *producer_name, *producer_version;  /* "" when absent */
    const brisk_onnx_opset *opsets;
    size_t n_opsets;
    brisk_onnx_graph graph;
    struct brisk_onnx_priv *priv;  /* the reader's memory and name index */
} brisk_onnx_model;

/* Reads and validates the model at `path`; external data files are looked up in its folder. */
brisk_status brisk_onnx_open(const char *path, brisk_onnx_model **out, brisk_error *err);
/* Validates a model's bytes in memory (borrowed: they must outlive *out). `name` stands for
 * the file in messages ("<memory>" if NULL). External data is refused: there is no folder. */
brisk_status brisk_onnx_parse(const void *buf, size_t len, const char *name, brisk_onnx_model **out,
                              brisk_error *err);
void brisk_onnx_free(brisk_onnx_model *m);

/* The opset version imported for `domain` ("" and NULL both mean the standard operators, as
 * does "ai.onnx"), or 0 when the model imports none. */
int64_t brisk_onnx_opset_version(const brisk_onnx_model *m, const char *domain);

/* Lookups by value name, in O(1); NULL (or -1) when there is none. */
const brisk_onnx_tensor *brisk_onnx_initializer(const brisk_onnx_model *m, const char *name);
/* The index of the node producing value `name`, or -1 (a graph input, an initializer, unknown). */
int64_t brisk_onnx_producer(const brisk_onnx_model *m, const char *name);
/* The declared type and shape of value `name`: a graph input, output or value_info entry. */
const brisk_onnx_value_info *brisk_onnx_value_info_find(const brisk_onnx_model *m, const char *name);

/* A node's attribute by name, or NULL. */
const brisk_onnx_attr *brisk_onnx_attr_find(const brisk_onnx_node *n, const char *name);
/* Typed attribute getters: *out = the attribute's value, or `dflt` (NULL/0 for lists and
 * tensors) when the node has no such attribute. An attribute of another type is an error
 * naming the file, the node, the attribute and both types ("net.onnx: node 3 '/conv/Conv'
 * (Conv): attribute 'group' is floats, expected int"). */
brisk_status brisk_onnx_attr_int(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                 int64_t dflt, int64_t *out, brisk_error *err);
brisk_status brisk_onnx_attr_float(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                   float dflt, float *out, brisk_error *err);
brisk_status brisk_onnx_attr_string(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                    const char *dflt, const char **out, brisk_error *err);
brisk_status brisk_onnx_attr_ints(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                  const int64_t **out, size_t *count, brisk_error *err);
brisk_status brisk_onnx_attr_floats(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                    const float **out, size_t *count, brisk_error *err);
brisk_status brisk_onnx_attr_tensor(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                    const brisk_onnx_tensor **out, brisk_error *err);

#endif
