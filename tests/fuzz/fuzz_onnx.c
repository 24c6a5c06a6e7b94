/* libFuzzer target for the ONNX model reader (src/onnx). Any input is parsed as a model; a
 * refusal must be a message naming the file. An accepted model is walked whole: the order must
 * be a permutation with producers first, every lookup must find what the arrays hold, every
 * attribute getter runs (right type and wrong), and every tensor byte is read, so a pointer or
 * size the reader got wrong shows under AddressSanitizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_model.h"

static volatile unsigned char sink;

static void touch(const brisk_onnx_tensor *t) {
    if (!t) return;
    if (t->nbytes != (size_t)t->numel * brisk_onnx_dtype_size(t->dtype)) __builtin_trap();
    if (t->nbytes && !t->data) __builtin_trap();
    const unsigned char *p = t->data;
    unsigned char acc = 0;
    for (size_t i = 0; i < t->nbytes; i++) acc ^= p[i];
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) __builtin_trap();
    sink = acc;
}

static void exercise(const brisk_onnx_model *m) {
    const brisk_onnx_graph *g = &m->graph;
    brisk_error err;
    unsigned char *seen = calloc(g->n_nodes + 1, 1);
    if (!seen) return;
    for (size_t k = 0; k < g->n_nodes; k++) {
        size_t i = g->order[k];
        if (i >= g->n_nodes || seen[i]) __builtin_trap();
        seen[i] = 1;
        const brisk_onnx_node *n = &g->nodes[i];
        for (size_t j = 0; j < n->n_inputs; j++) {
            int64_t p = brisk_onnx_producer(m, n->inputs[j]);
            if (p >= 0 && !seen[p]) __builtin_trap(); /* a producer not placed before */
        }
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j][0] && brisk_onnx_producer(m, n->outputs[j]) != (int64_t)i) __builtin_trap();
        for (size_t j = 0; j < n->n_attrs; j++) {
            const brisk_onnx_attr *a = &n->attrs[j];
            int64_t iv;
            float fv;
            const char *s;
            const int64_t *is;
            const float *fs;
            const brisk_onnx_tensor *t;
            size_t c;
            if (brisk_onnx_attr_find(n, a->name) == NULL) __builtin_trap();
            int ok = !brisk_onnx_attr_int(m, n, a->name, 0, &iv, &err) + !brisk_onnx_attr_float(m, n, a->name, 0, &fv, &err) +
                     !brisk_onnx_attr_string(m, n, a->name, "", &s, &err) +
                     !brisk_onnx_attr_ints(m, n, a->name, &is, &c, &err) +
                     !brisk_onnx_attr_floats(m, n, a->name, &fs, &c, &err) +
                     !brisk_onnx_attr_tensor(m, n, a->name, &t, &err);
            /* exactly one getter fits, except for strings lists, which have none */
            if (ok != (a->type == BRISK_ONNX_ATTR_STRINGS ? 0 : 1)) __builtin_trap();
            if (a->type == BRISK_ONNX_ATTR_TENSOR) touch(a->t);
            if (a->type == BRISK_ONNX_ATTR_STRINGS)
                for (size_t q = 0; q < a->n; q++) sink = (unsigned char)strlen(a->strings[q]);
            if (a->type == BRISK_ONNX_ATTR_STRING && a->s[a->s_len] != 0) __builtin_trap();
        }
    }
    for (size_t i = 0; i < g->n_initializers; i++) {
        const brisk_onnx_tensor *t = &g->initializers[i];
        if (brisk_onnx_initializer(m, t->name) != t) __builtin_trap();
        touch(t);
    }
    for (size_t i = 0; i < g->n_inputs + g->n_outputs + g->n_value_info; i++) {
        const brisk_onnx_value_info *v = &g->inputs[i];
        if (!brisk_onnx_value_info_find(m, v->name)) __builtin_trap();
        for (int d = 0; d < v->rank; d++) sink = (unsigned char)(v->dims[d].value + (v->dims[d].param ? 1 : 0));
    }
    sink = (unsigned char)brisk_onnx_opset_version(m, "");
    free(seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_onnx_model *m = NULL;
    brisk_error err = {0};
    if (brisk_onnx_parse(data, size, "fuzz.onnx", &m, &err) != BRISK_OK) {
        if (m || strncmp(err.msg, "fuzz.onnx: ", 11) != 0) __builtin_trap();
        return 0;
    }
    exercise(m);
    brisk_onnx_free(m);
    return 0;
}
