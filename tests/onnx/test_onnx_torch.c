/* The ONNX reader on models the torch of this machine exports (tests/onnx/export_torch.py, run
 * with /usr/bin/python3): node count and op types, initializer names equal to the module's
 * state_dict keys, their shapes and values equal to the module's weights bit for bit, the
 * declared input and output, attributes through the getters, and a valid topological order.
 * Exits 77 (skip) without PyTorch, unless BRISK_REQUIRE_PYTHON_TESTS=1 makes that a failure. */
#include <stdint.h>
#include <unistd.h>

#include "brisk/data.h"
#include "onnx/onnx_model.h"
#include "test.h"

static char dir[600];
static brisk_error err;

/* Every initializer is a state_dict entry with the module's values, and every entry is one. */
static void check_weights(const brisk_onnx_model *m, const char *name) {
    char path[900], key[256];
    snprintf(path, sizeof path, "%s/%s.keys", dir, name);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    size_t keys = 0;
    while (fgets(key, sizeof key, f)) {
        key[strcspn(key, "\n")] = 0;
        keys++;
        const brisk_onnx_tensor *t = brisk_onnx_initializer(m, key);
        CHECKF(t != NULL, "%s: state_dict key '%s' is no initializer", name, key);
        if (!t) continue;
        brisk_npy_array a;
        snprintf(path, sizeof path, "%s/%s.%s.npy", dir, name, key);
        REQUIRE_OK(brisk_npy_read(path, &a, &err), &err);
        CHECK(t->dtype == BRISK_ONNX_FLOAT && t->rank == a.shape.ndim && t->nbytes == a.nbytes);
        for (int d = 0; d < t->rank && d < a.shape.ndim; d++) CHECK(t->dims[d] == a.shape.d[d]);
        CHECKF(t->nbytes == a.nbytes && !memcmp(t->data, a.data, a.nbytes), "%s: '%s' differs from the module's", name,
               key);
        brisk_npy_free(&a);
    }
    fclose(f);
    CHECKF(keys == m->graph.n_initializers, "%s: %zu state_dict keys, %zu initializers", name, keys,
           m->graph.n_initializers);
}

/* Every node after the producers of its inputs, each node once. */
static void check_order(const brisk_onnx_model *m) {
    const brisk_onnx_graph *g = &m->graph;
    size_t *pos = calloc(g->n_nodes + 1, sizeof *pos);
    REQUIRE(pos);
    for (size_t k = 0; k < g->n_nodes; k++) pos[g->order[k]] = k + 1;
    for (size_t i = 0; i < g->n_nodes; i++) {
        CHECK(pos[i] > 0);
        for (size_t j = 0; j < g->nodes[i].n_inputs; j++) {
            int64_t p = brisk_onnx_producer(m, g->nodes[i].inputs[j]);
            CHECK(p < 0 || pos[p] < pos[i]);
        }
    }
    free(pos);
}

static brisk_onnx_model *open_model(const char *name) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    brisk_onnx_model *m = NULL;
    if (brisk_onnx_open(path, &m, &err) != BRISK_OK) fprintf(stderr, "%s\n", err.msg);
    return m;
}

static void check_io(const brisk_onnx_model *m, int rank, int64_t features, int64_t outputs) {
    const brisk_onnx_graph *g = &m->graph;
    REQUIRE(g->n_inputs == 1 && g->n_outputs == 1);
    const brisk_onnx_value_info *x = &g->inputs[0], *y = &g->outputs[0];
    CHECK(!strcmp(x->name, "x") && x->is_tensor && x->elem_type == BRISK_ONNX_FLOAT && x->rank == rank);
    CHECK(x->rank > 1 && x->dims[0].value == -1 && x->dims[0].param && !strcmp(x->dims[0].param, "N"));
    CHECK(x->rank > 1 && x->dims[1].value == features);
    CHECK(!strcmp(y->name, "y") && y->elem_type == BRISK_ONNX_FLOAT && y->rank == 2 && y->dims[1].value == outputs);
    CHECK(!strcmp(m->producer_name, "pytorch"));
}

static void test_mlp(void) {
    brisk_onnx_model *m = open_model("mlp");
    REQUIRE(m);
    const brisk_onnx_graph *g = &m->graph;
    CHECK(m->ir_version == 7 && brisk_onnx_opset_version(m, "") == 13);
    REQUIRE(g->n_nodes == 3);
    static const char *const ops[] = {"Gemm", "Relu", "Gemm"};
    for (size_t k = 0; k < 3; k++) CHECK(!strcmp(g->nodes[g->order[k]].op_type, ops[k]));
    for (size_t k = 0; k < 3; k += 2) {
        const brisk_onnx_node *n = &g->nodes[k];
        int64_t ta, tb;
        float alpha, beta;
        CHECK(brisk_onnx_attr_int(m, n, "transA", 0, &ta, &err) == BRISK_OK && ta == 0);
        CHECK(brisk_onnx_attr_int(m, n, "transB", 0, &tb, &err) == BRISK_OK && tb == 1);
        CHECK(brisk_onnx_attr_float(m, n, "alpha", 0, &alpha, &err) == BRISK_OK && alpha == 1.0f);
        CHECK(brisk_onnx_attr_float(m, n, "beta", 0, &beta, &err) == BRISK_OK && beta == 1.0f);
        CHECK(brisk_onnx_initializer(m, n->inputs[1]) != NULL && brisk_onnx_initializer(m, n->inputs[0]) == NULL);
    }
    check_io(m, 2, 6, 3);
    check_weights(m, "mlp");
    check_order(m);
    brisk_onnx_free(m);
}

static void test_cnn(void) {
    brisk_onnx_model *m = open_model("cnn");
    REQUIRE(m);
    const brisk_onnx_graph *g = &m->graph;
    CHECK(m->ir_version == 8 && brisk_onnx_opset_version(m, "") == 17);
    size_t conv = 0, pool = 0, reshape = 0, gemm = 0, constants = 0;
    for (size_t k = 0; k < g->n_nodes; k++) {
        const brisk_onnx_node *n = &g->nodes[g->order[k]];
        const int64_t *v;
        size_t c;
        if (!strcmp(n->op_type, "Conv")) {
            conv++;
            CHECK(brisk_onnx_attr_ints(m, n, "kernel_shape", &v, &c, &err) == BRISK_OK && c == 2 && v[0] == 3 && v[1] == 3);
            CHECK(brisk_onnx_attr_ints(m, n, "pads", &v, &c, &err) == BRISK_OK && c == 4 && v[0] == 1 && v[3] == 1);
            int64_t group;
            CHECK(brisk_onnx_attr_int(m, n, "group", 1, &group, &err) == BRISK_OK && group == 1);
            CHECK(!strcmp(n->inputs[1], "conv.weight") && !strcmp(n->inputs[2], "conv.bias"));
        } else if (!strcmp(n->op_type, "MaxPool")) {
            pool++;
            CHECK(brisk_onnx_attr_ints(m, n, "kernel_shape", &v, &c, &err) == BRISK_OK && c == 2 && v[0] == 2);
        } else if (!strcmp(n->op_type, "Reshape")) {
            reshape++;
        } else if (!strcmp(n->op_type, "Gemm")) {
            gemm++;
            CHECK(!strcmp(n->inputs[1], "head.weight"));
        } else if (!strcmp(n->op_type, "Constant")) {
            const brisk_onnx_tensor *t;
            CHECK(brisk_onnx_attr_tensor(m, n, "value", &t, &err) == BRISK_OK && t && t->dtype == BRISK_ONNX_INT64);
            constants++;
        }
    }
    CHECK(conv == 1 && pool == 1 && reshape == 1 && gemm == 1 && constants >= 1);
    check_io(m, 4, 2, 5);
    check_weights(m, "cnn");
    check_order(m);
    brisk_onnx_free(m);
}

int main(void) {
    int require = getenv("BRISK_REQUIRE_PYTHON_TESTS") && !strcmp(getenv("BRISK_REQUIRE_PYTHON_TESTS"), "1");
    if (system("/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null") != 0) {
        printf("SKIP: /usr/bin/python3 cannot import torch and numpy (apt-get install python3-torch)\n");
        return require ? 1 : 77;
    }
    T_MAKE_DIR(dir, "onnx_torch");
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/onnx/export_torch.py' '%s' >&2", BRISK_SOURCE_DIR, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "export_torch.py failed\n");
        return 1;
    }
    t_case c[] = {T(test_mlp), T(test_cnn)};
    int rc = t_run(c, (int)(sizeof c / sizeof c[0]));
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    return rc;
}
