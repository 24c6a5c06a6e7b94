/* The importer's math, reduction and broadcast ops on small models built field by field
 * (onnx_build.h): each imported over a parameter x, its output against a float64 reference
 * and its gradient against finite differences (ops/opcheck.h) where torch's exports do not
 * reach (1-D MatMul sides, broadcast batch dims, opset-11 Softmax, opset-10 Clip, ReduceSum's
 * noop_with_empty_axes, Expand both ways, Where's constant branch, torch's GELU chain as one
 * GELU op and its Erf as ERF otherwise), and the refusals, each an error naming the node. */
#include <unistd.h>

#include "core/protowire.h"
#include "onnx/onnx_build.h"
#include "onnx/onnx_import.h"
#include "ops/opcheck.h"

static char path[600];

/* graph g (y its output) as a model of `opset`, x [xd] its input, opened; NULL with the error shown */
static brisk_onnx_net *open_net(brisk_pb *g, int64_t opset, const int64_t *xd, int xr) {
    brisk_pb m = {0};
    if (!path[0]) snprintf(path, sizeof path, "%s/onnx_import_ops_%d.onnx", BRISK_BINARY_DIR, (int)getpid());
    brisk_pb_string(g, 2, "ops");
    ob_value(g, 11, "x", xd, xr);
    ob_value(g, 12, "y", (const int64_t[]){1}, 1);
    ob_model(&m, 8, opset, g);
    FILE *f = fopen(path, "wb");
    int wrote = f && fwrite(m.p, 1, m.n, f) == m.n;
    if (f) fclose(f);
    brisk_pb_free(&m), brisk_pb_free(g);
    CHECKF(wrote, "cannot write %s", path);
    brisk_onnx_net *net = NULL;
    brisk_error err;
    if (brisk_onnx_net_open(path, &net, &err)) fprintf(stderr, "open: %s\n", err.msg);
    return net;
}

/* the net built over x: the node of ONNX value y, or -1 with the graph's error */
static int build_net(brisk_onnx_net *net, brisk_graph *g, int x) {
    const brisk_onnx_graph *og = &brisk_onnx_net_model(net)->graph;
    int *node = calloc(og->n_nodes + 1, sizeof *node), y = -1;
    const char *names[1] = {"x"};
    if (node && brisk_onnx_net_build(net, g, names, &x, 1, node) == 0)
        for (size_t i = 0; i < og->n_nodes; i++)
            if (!strcmp(og->nodes[i].outputs[0], "y")) y = node[i];
    free(node);
    return y;
}

/* model g over x [xs] (values in [lo, hi)) against ref(x values, out) of shape want; y_op:
 * the op that makes y (BRISK_OP_COUNT: any) */
static void check_model_op(brisk_pb *g, int64_t opset, brisk_shape xs, double lo, double hi, brisk_shape want,
                           void (*ref)(const float *x, double *out), brisk_op y_op, const char *what) {
    brisk_onnx_net *net = open_net(g, opset, xs.d, xs.ndim);
    CHECKF(net != NULL, "%s: not opened", what);
    if (!net) return;
    oc c;
    oc_init(&c, 77);
    int x = oc_param_avoid(&c, "x", xs, lo, hi, 0.05);
    int y = build_net(net, c.g, x);
    brisk_error e;
    if (y < 0) fprintf(stderr, "%s: %s\n", what, brisk_graph_error(c.g, &e) ? e.msg : "no y");
    CHECKF(y >= 0 && brisk_shape_equal(&c.g->nodes[y].shape, &want), "%s: output shape", what);
    CHECKF(y < 0 || y_op == BRISK_OP_COUNT || c.g->nodes[y].op == y_op, "%s: y made by %s", what,
           brisk_op_name(c.g->nodes[y].op));
    if (y >= 0 && brisk_shape_equal(&c.g->nodes[y].shape, &want)) {
        double *r = calloc((size_t)brisk_shape_numel(&want), sizeof *r);
        ref(oc_val(&c, x), r);
        c.max_fd = 40;
        oc_check(&c, y, r, what);
        free(r);
    }
    oc_free(&c);
    brisk_onnx_net_free(net);
    unlink(path);
}

static void check_model(brisk_pb *g, int64_t opset, brisk_shape xs, double lo, double hi, brisk_shape want,
                        void (*ref)(const float *x, double *out), const char *what) {
    check_model_op(g, opset, xs, lo, hi, want, ref, BRISK_OP_COUNT, what);
}

/* the model over x [xs] must fail to build, its error naming node `node` and holding `want` */
static void check_refused(brisk_pb *g, int64_t opset, brisk_shape xs, const char *node, const char *want) {
    brisk_onnx_net *net = open_net(g, opset, xs.d, xs.ndim);
    REQUIRE(net);
    brisk_graph *bg = brisk_graph_new();
    int x = brisk_param(bg, "x", xs, BRISK_INIT_ZEROS, 0, 0);
    int y = build_net(net, bg, x);
    brisk_error e = {0};
    CHECKF(y < 0 && brisk_graph_error(bg, &e) && strstr(e.msg, node) && strstr(e.msg, want),
           "%s: built %d, error '%s' (want '%s')", node, y, e.msg, want);
    brisk_graph_free(bg);
    brisk_onnx_net_free(net);
    unlink(path);
}

static void i64_const(brisk_pb *g, const char *name, const int64_t *v, int n) {
    ob_constant(g, name, BRISK_ONNX_INT64, (const int64_t[]){n}, 1, v, (size_t)n * sizeof *v);
}

static void f32_const(brisk_pb *g, const char *name, const int64_t *dims, int rank, const float *v, size_t n) {
    ob_constant(g, name, BRISK_ONNX_FLOAT, dims, rank, v, n * sizeof *v);
}

/* ---- MatMul: x [2, 1, 3, 4] @ w [3, 4, 5] (batch dims broadcast), then @ v [5] (1-D) */
static const float W[60] = {0.5f, -1, 0.25f, 2, -0.75f, 1.5f, 0.1f, -0.3f, 0.7f, -1.2f, 0.9f, 0.4f, -0.6f, 1.1f, 0.2f,
                            -0.9f, 0.3f, 0.8f, -0.4f, 1.3f, 0.6f, -0.2f, 1.4f, -1.1f, 0.35f, -0.5f, 1.2f, -0.8f, 0.45f,
                            0.15f, 1.0f, -0.65f, 0.55f, -0.35f, 0.85f, -1.3f, 0.05f, 0.95f, -0.15f, 0.65f, -0.45f, 1.25f,
                            -0.05f, 0.75f, -0.85f, 0.25f, -1.05f, 0.35f, 1.15f, -0.25f, 0.6f, -0.7f, 0.8f, -0.9f, 1.0f,
                            -0.1f, 0.2f, -0.3f, 0.4f, -0.5f};
static const float V[5] = {1, -2, 0.5f, 3, -1};

static void ref_matmul(const float *x, double *o) { /* o [2, 3, 3] */
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 3; h++)
            for (int i = 0; i < 3; i++) {
                double s = 0;
                for (int n = 0; n < 5; n++) {
                    double t = 0;
                    for (int k = 0; k < 4; k++) t += (double)x[(b * 3 + i) * 4 + k] * W[(h * 4 + k) * 5 + n];
                    s += t * V[n];
                }
                o[(b * 3 + h) * 3 + i] = s;
            }
}

static void test_matmul(void) {
    brisk_pb g = {0};
    f32_const(&g, "w", (const int64_t[]){3, 4, 5}, 3, W, 60);
    f32_const(&g, "v", (const int64_t[]){5}, 1, V, 5);
    ob_node(&g, "MatMul", OB_LIST("x", "w"), OB_LIST("h"), NULL);
    ob_node(&g, "MatMul", OB_LIST("h", "v"), OB_LIST("y"), NULL);
    check_model(&g, 17, brisk_shape_make(4, (const int64_t[]){2, 1, 3, 4}), -1, 1,
                brisk_shape_make(3, (const int64_t[]){2, 3, 3}), ref_matmul, "matmul broadcast + 1-D");
    brisk_pb_reset(&g);
    f32_const(&g, "w", (const int64_t[]){3, 5, 4}, 3, W, 60);
    ob_node(&g, "MatMul", OB_LIST("x", "w"), OB_LIST("y"), NULL);
    check_refused(&g, 17, brisk_shape_make(4, (const int64_t[]){2, 1, 3, 4}), "node 'MatMul'", "[.., 3, 4] and [.., 5, 4]");
}

/* ---- Softmax before opset 13: over the dims from axis 1 on, flattened */
static void ref_softmax11(const float *x, double *o) { /* x [2, 3, 4] */
    for (int b = 0; b < 2; b++) {
        double m = -INFINITY, s = 0;
        for (int i = 0; i < 12; i++) m = fmax(m, x[b * 12 + i]);
        for (int i = 0; i < 12; i++) s += exp(x[b * 12 + i] - m);
        for (int i = 0; i < 12; i++) o[b * 12 + i] = exp(x[b * 12 + i] - m) / s;
    }
}

/* ---- Softmax from opset 13 on axis 0 (transposed around) */
static void ref_softmax13(const float *x, double *o) { /* x [2, 3, 4] over axis 0 */
    for (int i = 0; i < 12; i++) {
        double a = x[i], b = x[12 + i], m = fmax(a, b), s = exp(a - m) + exp(b - m);
        o[i] = exp(a - m) / s, o[12 + i] = exp(b - m) / s;
    }
}

static void test_softmax(void) {
    brisk_shape s = brisk_shape_make(3, (const int64_t[]){2, 3, 4});
    for (int v = 0; v < 2; v++) {
        brisk_pb g = {0}, a = {0};
        ob_attr_int(&a, "axis", v ? 0 : 1);
        ob_node(&g, "Softmax", OB_LIST("x"), OB_LIST("y"), &a);
        brisk_pb_free(&a);
        check_model(&g, v ? 13 : 11, s, -2, 2, s, v ? ref_softmax13 : ref_softmax11, v ? "softmax axis 0" : "softmax opset 11");
    }
}

/* ---- Clip of opset 10 (attributes), then Neg, Reciprocal, Pow by a tensor exponent */
static const float E[4] = {2, 0.5f, -1, 3};

static void ref_clip(const float *x, double *o) { /* x [3, 4] in [0.5, 3) */
    for (int i = 0; i < 12; i++) {
        double c = fmin(fmax(x[i], 0.75), 2.5);
        o[i] = pow(1.0 / c, E[i % 4]); /* -(1 / -c) */
    }
}

static void test_clip_pow(void) {
    brisk_pb g = {0}, a = {0};
    ob_attr_float(&a, "min", 0.75f);
    ob_attr_float(&a, "max", 2.5f);
    ob_node(&g, "Clip", OB_LIST("x"), OB_LIST("c"), &a);
    ob_node(&g, "Neg", OB_LIST("c"), OB_LIST("n"), NULL);
    ob_node(&g, "Reciprocal", OB_LIST("n"), OB_LIST("r"), NULL);
    ob_node(&g, "Neg", OB_LIST("r"), OB_LIST("p"), NULL);
    f32_const(&g, "e", (const int64_t[]){4}, 1, E, 4);
    ob_node(&g, "Pow", OB_LIST("p", "e"), OB_LIST("y"), NULL);
    brisk_pb_free(&a);
    brisk_shape s = brisk_shape2(3, 4);
    check_model(&g, 10, s, 0.5, 3, s, ref_clip, "clip opset 10, neg, reciprocal, pow");
    brisk_pb_reset(&g); /* opset 13: bounds are inputs, and must be constants */
    ob_node(&g, "Clip", OB_LIST("x", "x"), OB_LIST("y"), NULL);
    check_refused(&g, 13, s, "node 'Clip'", "min computed from tensors");
}

/* ---- ReduceSum: no axes with noop_with_empty_axes is the input; keepdims 0 over axes
 * [0, -1] from a constant; ReduceMean with the axes attribute */
static void ref_reduce(const float *x, double *o) { /* x [2, 3, 4] -> [3]: sum over 0, 2 of x, + mean over 1 of x */
    for (int j = 0; j < 3; j++) {
        double s = 0;
        for (int b = 0; b < 2; b++)
            for (int k = 0; k < 4; k++) {
                s += x[(b * 3 + j) * 4 + k];
                double m = 0;
                for (int jj = 0; jj < 3; jj++) m += x[(b * 3 + jj) * 4 + k];
                s += m / 3;
            }
        o[j] = s;
    }
}

static void test_reduce(void) {
    brisk_pb g = {0}, a = {0}, b = {0};
    ob_attr_int(&a, "noop_with_empty_axes", 1);
    ob_node(&g, "ReduceSum", OB_LIST("x"), OB_LIST("same"), &a);
    ob_attr_ints(&b, "axes", (const int64_t[]){1}, 1);
    ob_node(&g, "ReduceMean", OB_LIST("same"), OB_LIST("m"), &b); /* [2, 1, 4] */
    ob_node(&g, "Add", OB_LIST("same", "m"), OB_LIST("s"), NULL);
    i64_const(&g, "axes", (const int64_t[]){0, -1}, 2);
    brisk_pb_reset(&a);
    ob_attr_int(&a, "keepdims", 0);
    ob_node(&g, "ReduceSum", OB_LIST("s", "axes"), OB_LIST("y"), &a);
    brisk_pb_free(&a), brisk_pb_free(&b);
    check_model(&g, 13, brisk_shape_make(3, (const int64_t[]){2, 3, 4}), -1, 1, brisk_shape1(3), ref_reduce, "reduce");
}

/* ---- Expand both ways: x [3, 1] to [2, 1, 4] gives [2, 3, 4]; Where under a constant
 * condition [4] with a constant branch: x where taken, 0.5 elsewhere, times 1 + the
 * position */
static const uint8_t COND[4] = {1, 0, 0, 1};

static void ref_expand_where(const float *x, double *o) {
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) o[(b * 3 + j) * 4 + k] = COND[k] ? x[j] : 0.5;
}

static void test_expand_where(void) {
    brisk_pb g = {0};
    i64_const(&g, "shape", (const int64_t[]){2, 1, 4}, 3);
    ob_node(&g, "Expand", OB_LIST("x", "shape"), OB_LIST("e"), NULL);
    ob_constant(&g, "cond", BRISK_ONNX_BOOL, (const int64_t[]){4}, 1, COND, 4);
    f32_const(&g, "half", NULL, 0, (const float[]){0.5f}, 1);
    ob_node(&g, "Where", OB_LIST("cond", "e", "half"), OB_LIST("y"), NULL);
    brisk_shape out = brisk_shape_make(3, (const int64_t[]){2, 3, 4});
    check_model(&g, 17, brisk_shape2(3, 1), -1, 1, out, ref_expand_where, "expand, where");
    /* a tensor condition under which a constant branch is infinite: inf 0 would be NaN */
    brisk_pb_reset(&g);
    f32_const(&g, "inf", NULL, 0, (const float[]){-INFINITY}, 1);
    ob_node(&g, "Where", OB_LIST("x", "x", "inf"), OB_LIST("y"), NULL);
    check_refused(&g, 17, brisk_shape2(3, 1), "node 'Where'", "an infinite constant branch");
    brisk_pb_reset(&g);
    i64_const(&g, "shape", (const int64_t[]){2, 5}, 2);
    ob_node(&g, "Expand", OB_LIST("x", "shape"), OB_LIST("y"), NULL);
    check_refused(&g, 17, brisk_shape2(3, 2), "node 'Expand'", "shapes [3, 2] and [2, 5] do not broadcast");
}

/* ---- torch's GELU, x (1 + erf(x / sqrt 2)) 0.5: one GELU op; with 0.25 for 0.5 it is no
 * GELU, and its Erf is the ERF op */
static void ref_gelu(const float *x, double *o) {
    for (int i = 0; i < 12; i++) o[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
}

static void ref_gelu_quarter(const float *x, double *o) {
    for (int i = 0; i < 12; i++) o[i] = 0.25 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
}

static void test_gelu_erf(void) {
    brisk_shape s = brisk_shape2(3, 4);
    for (int v = 0; v < 2; v++) {
        brisk_pb g = {0};
        f32_const(&g, "s2", NULL, 0, (const float[]){1.4142135381698608f}, 1);
        f32_const(&g, "one", NULL, 0, (const float[]){1.0f}, 1);
        f32_const(&g, "half", NULL, 0, (const float[]){v ? 0.25f : 0.5f}, 1);
        ob_node(&g, "Div", OB_LIST("x", "s2"), OB_LIST("d"), NULL);
        ob_node(&g, "Erf", OB_LIST("d"), OB_LIST("e"), NULL);
        ob_node(&g, "Add", OB_LIST("one", "e"), OB_LIST("a"), NULL);
        ob_node(&g, "Mul", OB_LIST("a", "x"), OB_LIST("m"), NULL);
        ob_node(&g, "Mul", OB_LIST("half", "m"), OB_LIST("y"), NULL);
        check_model_op(&g, 17, s, -3, 3, s, v ? ref_gelu_quarter : ref_gelu, v ? BRISK_OP_SCALE : BRISK_OP_GELU,
                       v ? "erf chain" : "gelu");
    }
}

TEST_MAIN(T(test_gelu_erf), T(test_matmul), T(test_softmax), T(test_clip_pow), T(test_reduce), T(test_expand_where))
