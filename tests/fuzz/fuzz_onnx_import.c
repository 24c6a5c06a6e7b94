/* libFuzzer target for the ONNX importer (src/onnx/onnx_import.c and its builders): any input
 * that the reader takes as a model is built into a brisk graph at batch 2, each data input
 * from its declared shape (unknown dims as 3), and when that succeeds the backward graph of
 * the mean of the first float output is built too. Hostile attributes, shapes and constant
 * chains must end in the graph's error, never in a crash or undefined behaviour; an error
 * must name the file. Seeds: corpus/onnx_import (make_onnx_corpus.sh). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/graph.h"
#include "onnx/onnx_import.h"

/* shapes the importer may meet are capped so that one input does not build for minutes */
#define MAX_ELEMS ((int64_t)1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_onnx_model *m = NULL;
    brisk_error err = {0};
    if (brisk_onnx_parse(data, size, "fuzz.onnx", &m, &err) != BRISK_OK) return 0;
    brisk_onnx_net *net = NULL;
    if (brisk_onnx_net_wrap(m, "fuzz.onnx", &net, &err) != BRISK_OK) {
        if (net || strncmp(err.msg, "fuzz.onnx: ", 11) != 0) __builtin_trap();
        return 0;
    }
    brisk_graph *g = brisk_graph_new();
    int n = brisk_onnx_net_n_inputs(net), ok = g && n <= 16;
    const char *names[16];
    int nodes[16];
    for (int k = 0; ok && k < n; k++) {
        const brisk_onnx_value_info *vi = brisk_onnx_net_input(net, k);
        int64_t d[BRISK_MAX_DIMS], elems = 1;
        int rank = vi->rank < 1 ? 1 : vi->rank > BRISK_MAX_DIMS ? BRISK_MAX_DIMS : vi->rank;
        for (int j = 0; j < rank; j++) {
            d[j] = j == 0 ? 2 : j < vi->rank && vi->dims[j].value > 0 && vi->dims[j].value <= 64 ? vi->dims[j].value : 3;
            elems *= d[j];
        }
        brisk_dtype dt = vi->elem_type == 6 || vi->elem_type == 7 ? BRISK_I32 : BRISK_F32; /* INT32, INT64 */
        names[k] = vi->name;
        nodes[k] = elems <= MAX_ELEMS ? brisk_input(g, vi->name, dt, brisk_shape_make(rank, d)) : -1;
        ok = nodes[k] >= 0;
    }
    size_t n_nodes = brisk_onnx_net_model(net)->graph.n_nodes;
    int *out = ok ? calloc(n_nodes + 1, sizeof *out) : NULL;
    if (out && brisk_onnx_net_build(net, g, names, nodes, n, out) == 0) {
        int y = -1;
        for (size_t i = 0; i < n_nodes && y < 0; i++)
            if (out[i] >= 0 && g->nodes[out[i]].dtype == BRISK_F32) y = out[i];
        if (y >= 0) {
            int loss = brisk_mean(g, y, (1u << g->nodes[y].shape.ndim) - 1, 0);
            if (loss >= 0) (void)brisk_backward(g, loss, &err);
        }
    } else if (out && !g->err.code) {
        __builtin_trap(); /* a failed build says why */
    } else if (out && !strstr(g->err.msg, "fuzz.onnx")) {
        __builtin_trap(); /* and names the file */
    }
    free(out);
    if (g) brisk_graph_free(g);
    brisk_onnx_net_free(net);
    return 0;
}
