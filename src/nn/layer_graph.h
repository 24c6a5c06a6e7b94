/* Internal to nn: the layer graph of a "graph" model (layer_graph.c) and its op table
 * (layer_ops.c, one entry per layer op, tract style: an op name, its attributes' reader and
 * its builder). */
#ifndef BRISK_NN_LAYER_GRAPH_H
#define BRISK_NN_LAYER_GRAPH_H

#include <stdatomic.h>

#include "brisk/json.h"
#include "brisk/nn.h"

#define LG_MAX_IN 8  /* inputs of one layer */
#define LG_NAME 64   /* a layer's or input's name (parameters are "<name>.weight") */

/* One layer's attributes, as its op reads them (each op documents which slots it uses). */
typedef struct lg_attrs {
    int64_t i[8];
    double f[4];
    int64_t dims[BRISK_MAX_DIMS]; /* a shape attribute (reshape) */
    int ndims;
    char s[32];                   /* an enum attribute's name */
} lg_attrs;

/* What a layer's builder is given: the graph, the batch size, the layer's name (its
 * parameters' prefix) and its inputs' node ids. */
typedef struct lg_build {
    brisk_graph *g;
    int64_t batch;
    const char *name;
    const int *in;
    int n_in;
    int train;
} lg_build;

typedef struct lg_op {
    const char *name;
    int min_in, max_in;
    /* reads the op's attribute keys from the layer object (errors through the reader) */
    void (*read)(brisk_json_reader *r, lg_attrs *a);
    /* the layer's output node (-1 with the graph's error set) */
    int (*build)(const lg_build *b, const lg_attrs *a);
    const char *doc;  /* one line: what it computes, its inputs and attributes */
} lg_op;

extern const lg_op lg_ops[];
extern const int lg_n_ops;
const lg_op *lg_op_find(const char *name);

typedef struct lg_input {
    char name[LG_NAME];
    brisk_dtype dtype;
    brisk_shape sample; /* per sample, no batch dimension */
} lg_input;

/* A name in the graph: a model input (index) or a layer (index). */
typedef struct lg_ref {
    int layer; /* 1: a layer, 0: an input */
    int index;
} lg_ref;

typedef struct lg_layer {
    char name[LG_NAME];
    const lg_op *op;
    lg_ref in[LG_MAX_IN];
    int n_in;
    lg_attrs a;
} lg_layer;

typedef enum { LG_LOSS_CROSS_ENTROPY = 0, LG_LOSS_MSE, LG_LOSS_L1, LG_LOSS_HUBER, LG_LOSS_BCE, LG_LOSS_COUNT } lg_loss_kind;

typedef struct lg_loss {
    char name[LG_NAME]; /* in the log: "name" or the output layer's name */
    lg_ref output, target;
    int mask;        /* an input holding a weight per element, or -1 */
    lg_loss_kind kind;
    double weight;
    double delta;    /* huber */
} lg_loss;

struct brisk_layer_graph {
    atomic_int refs;
    lg_input *inputs;
    int n_inputs;
    lg_layer *layers;
    int n_layers;
    lg_ref outputs[BRISK_MAX_FIELDS];
    int n_outputs;
    lg_loss *losses;
    int n_losses;
    int *order;      /* the layers in an order where each comes after its inputs */
    /* an imported ONNX model ("type": "onnx"): it builds every layer at once (one layer per
     * ONNX node, named as its first output; their op is lg_onnx_op, never built alone) */
    struct brisk_onnx_net *onnx;
};

extern const lg_op lg_onnx_op;
/* shared by the two readers (layer_graph.c, layer_graph_onnx.c) */
void lg_read_inputs(brisk_json_reader *model, brisk_layer_graph *lg);
void lg_read_outputs_and_losses(brisk_json_reader *model, brisk_layer_graph *lg, int outputs_required);
void lg_check_inputs_used(brisk_json_reader *model, const brisk_layer_graph *lg);
int lg_find_input(const brisk_layer_graph *lg, const char *name);

#endif
