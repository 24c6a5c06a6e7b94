/* ONNX graph -> brisk graph (onnx_import.h): the op table, the check of every node before
 * anything is built, and the walk in topological order that folds each node on the host
 * (onnx_fold.c) or appends it with its builder (onnx_build_*.c), with the same graph ops the
 * layer graphs use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "onnx/onnx_import_internal.h"

/* the op types brisk imports, each with its builder (fold-only ops fold on constants and
 * fail on tensors) */
static const struct {
    const char *name;
    ox_build_fn build;
} ops[] = {
    {"Gemm", ox_build_gemm},
    {"MatMul", ox_build_matmul},
    {"Add", ox_build_binary},
    {"Sub", ox_build_binary},
    {"Mul", ox_build_binary},
    {"Div", ox_build_binary},
    {"Relu", ox_build_relu},
    {"LeakyRelu", ox_build_leaky_relu},
    {"Sigmoid", ox_build_sigmoid},
    {"Tanh", ox_build_tanh},
    {"Softmax", ox_build_softmax},
    {"LogSoftmax", ox_build_log_softmax},
    {"Conv", ox_build_conv},
    {"BatchNormalization", ox_build_batchnorm},
    {"LayerNormalization", ox_build_layernorm},
    {"MaxPool", ox_build_maxpool},
    {"AveragePool", ox_build_avgpool},
    {"GlobalAveragePool", ox_build_global_avgpool},
    {"Flatten", ox_build_flatten},
    {"Reshape", ox_build_reshape},
    {"Transpose", ox_build_transpose},
    {"Concat", ox_build_concat},
    {"Identity", ox_build_identity},
    {"Dropout", ox_build_dropout},
    {"Constant", ox_build_fold_only},
    {"Shape", ox_build_fold_only},
    {"Gather", ox_build_gather},
    {"Slice", ox_build_slice},
    {"Split", ox_build_split},
    {"ConstantOfShape", ox_build_fold_only},
    {"Unsqueeze", ox_build_squeeze},
    {"Squeeze", ox_build_squeeze},
    {"Cast", ox_build_cast},
    {"LSTM", ox_build_lstm},
    {"GRU", ox_build_gru},
    {"ConvTranspose", ox_build_conv_transpose},
    {"Resize", ox_build_resize},
    {"Pow", ox_build_pow},
    {"Sqrt", ox_build_math},
    {"Exp", ox_build_math},
    {"Log", ox_build_math},
    {"Abs", ox_build_math},
    {"Neg", ox_build_math},
    {"Reciprocal", ox_build_math},
    {"Erf", ox_build_math},
    {"Clip", ox_build_clip},
    {"ReduceMean", ox_build_reduce},
    {"ReduceSum", ox_build_reduce},
    {"Where", ox_build_where},
    {"Expand", ox_build_expand},
    {"Pad", ox_build_pad},
    {"Equal", ox_build_fold_only},
    {"Less", ox_build_fold_only},
    {"Greater", ox_build_fold_only},
    {"Not", ox_build_fold_only},
};
enum { N_OPS = sizeof ops / sizeof ops[0] };

const char *brisk_onnx_import_ops(void) {
    static char list[1024];
    if (!list[0])
        for (int k = 0; k < N_OPS; k++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", ops[k].name);
    return list;
}

static ox_build_fn builder(const char *op) {
    for (int k = 0; k < N_OPS; k++)
        if (!strcmp(ops[k].name, op)) return ops[k].build;
    return NULL;
}

/* Whether node n reads a float initializer: a parameter, which stays a graph value that its
 * gradient reaches rather than a host constant folded away (torch's LSTM and GRU export
 * slices and joins weight_ih_l0 and the like). Shape reads only its shape. */
static int reads_param(const brisk_onnx_model *m, const brisk_onnx_node *n) {
    for (size_t k = 0; strcmp(n->op_type, "Shape") && k < n->n_inputs; k++) {
        const brisk_onnx_tensor *t = n->inputs[k][0] ? brisk_onnx_initializer(m, n->inputs[k]) : NULL;
        if (t && ox_is_param(t)) return 1;
    }
    return 0;
}

void brisk_onnx_net_free(brisk_onnx_net *net) {
    if (!net) return;
    brisk_onnx_free(net->m);
    free(net->data_inputs);
    free(net);
}

/* The nodes brisk cannot build, by op type: each type once, with its count and its first
 * node names, so that a model of 40 unsupported Slices and one Pad names both types. At most
 * MAX_TYPES types are listed, so a file of many node types costs MAX_TYPES passes, not one
 * per node. */
#define MAX_TYPES 16
static int same_type(const brisk_onnx_node *a, const brisk_onnx_node *b) {
    return !strcmp(a->op_type, b->op_type) && !strcmp(a->domain, b->domain);
}

static brisk_status unsupported(const brisk_onnx_model *m, const char *path, brisk_error *err) {
    const brisk_onnx_graph *g = &m->graph;
    int64_t opset = brisk_onnx_opset_version(m, "");
    brisk_strbuf b = {0};
    size_t n_bad = 0, n_types = 0, listed[MAX_TYPES];
    int more = 0; /* types beyond MAX_TYPES */
    for (size_t i = 0; i < g->n_nodes; i++) {
        const brisk_onnx_node *n = &g->nodes[i];
        int std = !n->domain[0] || !strcmp(n->domain, "ai.onnx");
        if (std && builder(n->op_type)) continue;
        n_bad++;
        int seen = 0; /* an earlier node of this type listed it already */
        for (size_t k = 0; k < n_types && !seen; k++) seen = same_type(&g->nodes[listed[k]], n);
        if (seen) continue;
        if (n_types == MAX_TYPES) {
            more = 1;
            continue;
        }
        listed[n_types] = i;
        size_t count = 0;
        brisk_strbuf names = {0};
        for (size_t k = i; k < g->n_nodes; k++) {
            const brisk_onnx_node *o = &g->nodes[k];
            if (!same_type(o, n)) continue;
            if (count++ < 3) brisk_strbuf_printf(&names, "%s'%s'", count > 1 ? ", " : "", o->name);
        }
        brisk_strbuf_printf(&b, "%s%s%s%s (%zu node%s: %s%s)", n_types++ ? "; " : "", std ? "" : n->domain, std ? "" : ".",
                            n->op_type, count, count > 1 ? "s" : "", names.s ? names.s : "", count > 3 ? ", ..." : "");
        brisk_strbuf_free(&names);
    }
    if (more) brisk_strbuf_printf(&b, "; and nodes of other types");
    brisk_status st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: %zu node%s of %s%zu op type%s brisk does not import "
                                   "(opset %lld): %s. It imports %s", path, n_bad, n_bad > 1 ? "s" : "",
                                   more ? "more than " : "", n_types, n_types > 1 || more ? "s" : "", (long long)opset,
                                   b.oom || !b.s ? "(out of memory)" : b.s, brisk_onnx_import_ops());
    brisk_strbuf_free(&b);
    return st;
}

/* An export for inference (torch's default, eval mode with constant folding) trains, but not
 * as the module would: BatchNorm folded into the convolutions' weights (named onnx::Conv_16,
 * not state_dict keys), Dropout gone, or BatchNormalization nodes marked training_mode 0. */
static void inference_note(brisk_onnx_net *net) {
    const brisk_onnx_graph *g = &net->m->graph;
    size_t made_up = 0, bn = 0, bn_eval = 0;
    const char *first = "";
    for (size_t i = 0; i < g->n_initializers; i++) {
        const brisk_onnx_tensor *t = &g->initializers[i];
        if (ox_is_param(t) && !strncmp(t->name, "onnx::", 6) && !made_up++) first = t->name;
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (strcmp(g->nodes[i].op_type, "BatchNormalization")) continue;
        bn++;
        int64_t mode = 0;
        brisk_error e;
        if (!brisk_onnx_attr_int(net->m, &g->nodes[i], "training_mode", 0, &mode, &e) && !mode &&
            g->nodes[i].n_outputs < 3)
            bn_eval++;
    }
    brisk_strbuf b = {0};
    if (made_up)
        brisk_strbuf_printf(&b, "%zu parameter%s named by the export, not by the module ('%s'%s): the file was exported "
                            "for inference (eval mode, constant folding), so BatchNorm is folded into the "
                            "convolutions, Dropout is gone and a checkpoint's names are not the state_dict's",
                            made_up, made_up > 1 ? "s" : "", first, made_up > 1 ? ", ..." : "");
    if (bn_eval)
        brisk_strbuf_printf(&b, "%s%zu of %zu BatchNormalization node%s exported for inference (training_mode 0): brisk "
                            "trains them as train() does, on each batch's statistics, updating the running ones",
                            b.s ? "; " : "", bn_eval, bn, bn > 1 ? "s" : "");
    if (b.s && !b.oom)
        snprintf(net->note, sizeof net->note, "%s: %s. To train the module as it is, export with "
                 "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False", net->m->path, b.s);
    brisk_strbuf_free(&b);
}

brisk_status brisk_onnx_net_wrap(brisk_onnx_model *m, const char *path, brisk_onnx_net **out, brisk_error *err) {
    *out = NULL;
    brisk_onnx_net *net = calloc(1, sizeof *net);
    if (!net) return brisk_onnx_free(m), brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    net->m = m;
    const brisk_onnx_graph *g = &m->graph;
    /* every node first: one error naming each node brisk cannot build */
    for (size_t i = 0; i < g->n_nodes; i++) {
        const brisk_onnx_node *n = &g->nodes[i];
        if ((!n->domain[0] || !strcmp(n->domain, "ai.onnx")) && builder(n->op_type)) continue;
        brisk_status st = unsupported(m, path, err);
        brisk_onnx_net_free(net);
        return st;
    }
    net->data_inputs = calloc(g->n_inputs + 1, sizeof *net->data_inputs);
    if (!net->data_inputs) return brisk_onnx_net_free(net), brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < g->n_inputs; i++)
        if (!brisk_onnx_initializer(m, g->inputs[i].name)) net->data_inputs[net->n_data++] = (int)i;
    inference_note(net);
    *out = net;
    return BRISK_OK;
}

brisk_status brisk_onnx_net_open(const char *path, brisk_onnx_net **out, brisk_error *err) {
    *out = NULL;
    brisk_onnx_model *m = NULL;
    brisk_status st = brisk_onnx_open(path, &m, err);
    return st ? st : brisk_onnx_net_wrap(m, path, out, err);
}

const brisk_onnx_model *brisk_onnx_net_model(const brisk_onnx_net *net) { return net->m; }
const char *brisk_onnx_net_note(const brisk_onnx_net *net) { return net->note; }
int brisk_onnx_net_n_inputs(const brisk_onnx_net *net) { return net->n_data; }
const brisk_onnx_value_info *brisk_onnx_net_input(const brisk_onnx_net *net, int k) {
    return &net->m->graph.inputs[net->data_inputs[k]];
}

int brisk_onnx_net_build(const brisk_onnx_net *net, brisk_graph *g, const char *const *in_names, const int *in_nodes,
                         int n_in, int *node_out) {
    if (!g || g->err.code) return -1;
    const brisk_onnx_graph *og = &net->m->graph;
    ctx c = {net, net->m, g, calloc(og->n_nodes + 1, sizeof(val *)), calloc(og->n_initializers + 1, sizeof(int)),
             in_names, in_nodes, n_in, NULL, 0};
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
        c.n = &og->nodes[i], c.ni = i;
        int handled = 0;
        konst *kc = reads_param(c.m, c.n) ? NULL : ox_fold(&c, &handled);
        if (kc) c.out[i][0].c = kc;
        else if (!handled && !g->err.code) c.out[i][0].node = builder(c.n->op_type)(&c);
        if (g->err.code || (!kc && c.out[i][0].node < 0)) {
            if (!g->err.code) ox_fail(&c, "not built");
            brisk_error e = g->err;
            brisk_error_prefix(&e, "%s: node '%s' (%s)", net->m->path, c.n->name, c.n->op_type);
            g->err = e;
            rc = -1;
        }
        if (node_out) node_out[i] = c.out[i][0].node;
    }
    for (size_t i = 0; c.out && i < og->n_nodes; i++) {
        for (size_t j = 0; c.out[i] && j < og->nodes[i].n_outputs; j++) ox_konst_free(c.out[i][j].c);
        free(c.out[i]);
    }
    free(c.out), free(c.init_node);
    return rc;
}
