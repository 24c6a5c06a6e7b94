/* onnx-internal: an ONNX model as a brisk model ("model": {"type": "onnx", "file": ...}).
 * brisk_onnx_net_open reads the file and checks every node before anything is built (one
 * error lists each unsupported node); brisk_onnx_net_build appends the network to a brisk
 * graph for a batch size, with the graph builders the layer graphs use. Initializers become
 * parameters under their own names (torch's state_dict keys), starting from their values
 * (brisk_param_given); BatchNormalization's mean and variance become buffers. Constant
 * subgraphs (Shape, Gather, Unsqueeze, Concat, Cast, ... of constants and of shapes) are
 * evaluated while building, where every shape is known. */
#ifndef BRISK_ONNX_IMPORT_H
#define BRISK_ONNX_IMPORT_H

#include "brisk/graph.h"
#include "onnx/onnx_model.h"

typedef struct brisk_onnx_net brisk_onnx_net;

brisk_status brisk_onnx_net_open(const char *path, brisk_onnx_net **out, brisk_error *err);
/* The same from a parsed model, which the net then owns (freed on failure too); path names it
 * in errors. */
brisk_status brisk_onnx_net_wrap(brisk_onnx_model *m, const char *path, brisk_onnx_net **out, brisk_error *err);
void brisk_onnx_net_free(brisk_onnx_net *net);
const brisk_onnx_model *brisk_onnx_net_model(const brisk_onnx_net *net);
/* What training this file means when it was exported for inference (eval mode: BatchNorm
 * folded, Dropout gone, parameters named onnx::...), naming the file; "" for a training export. */
const char *brisk_onnx_net_note(const brisk_onnx_net *net);
/* The ONNX graph inputs that are data (not initializers): count, and the k-th's value info. */
int brisk_onnx_net_n_inputs(const brisk_onnx_net *net);
const brisk_onnx_value_info *brisk_onnx_net_input(const brisk_onnx_net *net, int k);
/* Appends the network: in_nodes[k] feeds the graph input named in_names[k]; node_out[i] gets
 * the brisk node of ONNX node i's first output (-1 for a folded constant). -1 with the
 * graph's error set (naming the node) on failure. */
int brisk_onnx_net_build(const brisk_onnx_net *net, brisk_graph *g, const char *const *in_names, const int *in_nodes,
                         int n_in, int *node_out);
/* The op types the importer takes, comma-separated (the docs' list). */
const char *brisk_onnx_import_ops(void);

#endif
