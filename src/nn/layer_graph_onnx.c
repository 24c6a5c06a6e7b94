/* A model imported from ONNX: "model": {"type": "onnx", "file": "net.onnx", "inputs": [...],
 * "outputs": [...], "losses": [...]}. It is a layer graph whose layers are the ONNX nodes
 * (each named as its first output, so outputs and losses name ONNX values) built together by
 * src/onnx/onnx_import.c; inputs, outputs and losses are a graph model's, inputs and outputs
 * defaulting to the ONNX graph's. Everything that takes a graph model (training, checkpoints,
 * predict, sessions, export) takes it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "nn/layer_graph.h"
#include "onnx/onnx_import.h"

static int build_alone(const lg_build *b, const lg_attrs *a) {
    (void)a;
    return brisk_graph_fail(b->g, BRISK_ERR_INTERNAL, "an ONNX node is built with its model");
}

const lg_op lg_onnx_op = {"onnx", 0, LG_MAX_IN, NULL, build_alone, "a node of an imported ONNX model"};

/* The per-sample shape of ONNX graph input `vi` (its first dim is the batch). */
static void default_input(brisk_json_reader *r, const char *file, const brisk_onnx_value_info *vi, lg_input *in) {
    snprintf(in->name, sizeof in->name, "%s", vi->name);
    in->dtype = vi->elem_type == BRISK_ONNX_INT64 || vi->elem_type == BRISK_ONNX_INT32 ? BRISK_I32 : BRISK_F32;
    int known = vi->is_tensor && vi->rank >= 2 && vi->rank <= BRISK_MAX_DIMS && strlen(vi->name) < LG_NAME;
    int64_t d[BRISK_MAX_DIMS];
    for (int k = 1; known && k < vi->rank; k++) known = (d[k - 1] = vi->dims[k].value) > 0;
    if (!known) {
        char shape[200] = "";
        for (int k = 0; k < vi->rank && k < 8; k++) {
            size_t at = strlen(shape);
            if (vi->dims[k].value >= 0) snprintf(shape + at, sizeof shape - at, "%s%lld", k ? ", " : "", (long long)vi->dims[k].value);
            else snprintf(shape + at, sizeof shape - at, "%s%.20s", k ? ", " : "", vi->dims[k].param ? vi->dims[k].param : "?");
        }
        brisk_json_fail(r, "inputs",
                        "%s: the per-sample shape of input '%s' is not known from the file (%s%s%s); give it as "
                        "\"inputs\": [{\"name\": \"%s\", \"shape\": [...]}]",
                        file, vi->name, vi->rank < 0 ? "no shape" : "[", shape, vi->rank < 0 ? "" : "]", vi->name);
        return;
    }
    in->sample = brisk_shape_make(vi->rank - 1, d);
}

/* "file": relative to the working directory, else beside the config (as data paths); the
 * config keeps the path found, so a checkpoint's copy of it opens the same file. */
static const char *model_file(brisk_json_reader *r, const char *config_path, char *buf, size_t cap) {
    const char *file = NULL;
    if (brisk_json_string(r, "file", &file) != BRISK_OK || !file) return NULL;
    snprintf(buf, cap, "%s", file);
    const char *slash = config_path ? strrchr(config_path, '/') : NULL;
    if (file[0] != '/' && access(file, F_OK) != 0 && slash)
        snprintf(buf, cap, "%.*s/%s", (int)(slash - config_path), config_path, file);
    char real[PATH_MAX];
    if (realpath(buf, real)) {
        snprintf(buf, cap, "%s", real);
        cJSON *item = r->obj ? cJSON_GetObjectItemCaseSensitive(r->obj, "file") : NULL;
        if (item) cJSON_SetValuestring(item, real);
    }
    return buf;
}

void brisk_layer_graph_read_onnx(brisk_json_reader *model, const char *config_path, brisk_layer_graph **out) {
    *out = NULL;
    brisk_layer_graph *lg = calloc(1, sizeof *lg);
    if (!lg) return (void)brisk_json_fail(model, NULL, "out of memory");
    atomic_init(&lg->refs, 1);
    *out = lg;
    char path[4096];
    const char *file = model_file(model, config_path, path, sizeof path);
    brisk_error err;
    if (!file) return;
    if (brisk_onnx_net_open(file, &lg->onnx, &err)) {
        brisk_json_fail(model, "file", "%s", err.msg);
        if (brisk_json_has(model, "inputs")) lg_read_inputs(model, lg); /* every key asked for (the reference's walk) */
        lg_read_outputs_and_losses(model, lg, 0);
        return;
    }
    const brisk_onnx_model *m = brisk_onnx_net_model(lg->onnx);
    const brisk_onnx_graph *og = &m->graph;
    int n_data = brisk_onnx_net_n_inputs(lg->onnx);
    if (brisk_json_has(model, "inputs")) { /* the ONNX graph's, and targets the losses read */
        lg_read_inputs(model, lg);
    } else {
        if (n_data < 1 || n_data > BRISK_MAX_FIELDS)
            return (void)brisk_json_fail(model, "inputs", "%s has %d inputs (1 to %d taken)", file, n_data, BRISK_MAX_FIELDS);
        if (!(lg->inputs = calloc((size_t)n_data, sizeof *lg->inputs))) return (void)brisk_json_fail(model, "inputs", "out of memory");
        for (int k = 0; k < n_data; k++) default_input(model, file, brisk_onnx_net_input(lg->onnx, k), &lg->inputs[lg->n_inputs++]);
    }
    for (int k = 0; k < n_data; k++)
        if (lg_find_input(lg, brisk_onnx_net_input(lg->onnx, k)->name) < 0)
            brisk_json_fail(model, "inputs", "%s's input '%s' is not given", file, brisk_onnx_net_input(lg->onnx, k)->name);
    lg->layers = calloc(og->n_nodes + 1, sizeof *lg->layers);
    lg->order = calloc(og->n_nodes + 1, sizeof *lg->order);
    if (!lg->layers || !lg->order) return (void)brisk_json_fail(model, NULL, "out of memory");
    for (size_t i = 0; i < og->n_nodes; i++) {
        const brisk_onnx_node *n = &og->nodes[i];
        lg_layer *l = &lg->layers[i];
        snprintf(l->name, sizeof l->name, "%s", n->n_outputs ? n->outputs[0] : n->name);
        l->op = &lg_onnx_op;
        for (size_t k = 0; k < n->n_inputs && l->n_in < LG_MAX_IN; k++) { /* for the modes' input lists */
            int in = lg_find_input(lg, n->inputs[k]);
            int64_t p = brisk_onnx_producer(m, n->inputs[k]);
            if (in >= 0) l->in[l->n_in++] = (lg_ref){0, in};
            else if (p >= 0) l->in[l->n_in++] = (lg_ref){1, (int)p};
        }
        lg->order[i] = (int)og->order[i];
    }
    lg->n_layers = (int)og->n_nodes;
    lg_read_outputs_and_losses(model, lg, 0);
    for (size_t k = 0; !brisk_json_has(model, "outputs") && k < og->n_outputs && lg->n_outputs < BRISK_MAX_FIELDS; k++) {
        int64_t p = brisk_onnx_producer(m, og->outputs[k].name);
        if (p >= 0) lg->outputs[lg->n_outputs++] = (lg_ref){1, (int)p};
    }
    if (!lg->n_outputs) brisk_json_fail(model, "outputs", "%s: no output computed by a node", file);
    if (brisk_json_status(model->doc, NULL) == BRISK_OK) lg_check_inputs_used(model, lg);
}

const char *brisk_model_note(const brisk_model_spec *spec) {
    const brisk_layer_graph *lg = spec && spec->type == BRISK_MODEL_GRAPH ? spec->graph : NULL;
    const char *note = lg && lg->onnx ? brisk_onnx_net_note(lg->onnx) : NULL;
    return note && note[0] ? note : NULL;
}
