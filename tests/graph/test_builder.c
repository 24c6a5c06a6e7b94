/* The graph builder: leaves and their placement, the op table, and the errors
 * builders give for wrong shapes (first error wins, later calls return -1). */
#include "brisk/graph.h"
#include "test.h"

static int has(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

/* Builds a graph, runs `expr` and expects -1 and an error message with each part. */
#define EXPECT_FAIL(g, expr, ...) do { \
    int r_ = (expr); brisk_error e_; \
    CHECKF(r_ == -1, "%s returned %d", #expr, r_); \
    CHECK(brisk_graph_error(g, &e_) != BRISK_OK); \
    const char *parts_[] = {__VA_ARGS__}; \
    for (size_t p_ = 0; p_ < sizeof parts_ / sizeof parts_[0]; p_++) \
        CHECKF(has(e_.msg, parts_[p_]), "message \"%s\" lacks \"%s\"", e_.msg, parts_[p_]); \
} while (0)

static void test_op_table_complete(void) {
    for (int op = 0; op < BRISK_OP_COUNT; op++) {
        CHECKF(strcmp(brisk_op_name((brisk_op)op), "?") != 0, "op %d has no name", op);
    }
    CHECK(strcmp(brisk_op_name(BRISK_OP_MATMUL), "matmul") == 0);
    CHECK(strcmp(brisk_op_name(BRISK_OP_COUNT), "?") == 0);
    /* Every differentiable forward op has a rule; the fused _GRAD ops have none yet. */
    brisk_op need[] = {BRISK_OP_MATMUL, BRISK_OP_BIAS_ADD, BRISK_OP_ADD, BRISK_OP_SUB, BRISK_OP_MUL,
                       BRISK_OP_DIV, BRISK_OP_SCALE, BRISK_OP_RELU, BRISK_OP_GELU, BRISK_OP_SILU,
                       BRISK_OP_TANH, BRISK_OP_SIGMOID, BRISK_OP_DROPOUT, BRISK_OP_SUM, BRISK_OP_MEAN,
                       BRISK_OP_SUM_TO, BRISK_OP_EXPAND, BRISK_OP_SOFTMAX, BRISK_OP_LOG_SOFTMAX,
                       BRISK_OP_CROSS_ENTROPY, BRISK_OP_MSE, BRISK_OP_LAYERNORM, BRISK_OP_CONCAT,
                       BRISK_OP_SLICE, BRISK_OP_RESHAPE, BRISK_OP_TRANSPOSE, BRISK_OP_GATHER,
                       BRISK_OP_SINUSOIDAL, BRISK_OP_CAST};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        CHECKF(brisk_op_table[need[i]].backward != NULL, "%s has no backward", brisk_op_name(need[i]));
    CHECK(brisk_op_table[BRISK_OP_RANDN].backward == NULL);
}

static void test_leaves_placement(void) {
    brisk_graph *g = brisk_graph_new();
    REQUIRE(g);
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(3, 5));  /* 60 bytes */
    int y = brisk_input(g, "y", BRISK_I32, brisk_shape1(7));
    int w = brisk_param(g, "w", brisk_shape2(5, 3), BRISK_INIT_UNIFORM, 0.5f, 1); /* 15 floats */
    int b = brisk_param(g, "b", brisk_shape1(3), BRISK_INIT_ZEROS, 0, 0);
    float cd[5] = {1, 2, 3, 4, 5};
    int c1 = brisk_const(g, "c1", BRISK_F32, brisk_shape1(5), cd);
    int c2 = brisk_const(g, "c2", BRISK_F32, brisk_shape1(2), cd + 3);
    int c3 = brisk_const(g, NULL, BRISK_F32, brisk_shape1(1), cd);
    int c4 = brisk_const(g, "", BRISK_F32, brisk_shape1(1), cd + 1); /* anonymous consts may repeat */
    REQUIRE(brisk_graph_error(g, NULL) == BRISK_OK);
    CHECK(x == 0 && y == 1 && w == 2 && b == 3 && c1 == 4 && c2 == 5 && c3 == 6 && c4 == 7);
    CHECK(g->nodes[x].storage == BRISK_STORE_INPUT && g->nodes[x].offset == 0 && g->nodes[x].bytes == 60);
    CHECK(g->nodes[y].offset == 64 && g->input_bytes == 64 + 28);
    CHECK(g->n_inputs == 2 && g->inputs[1].node == y && g->inputs[1].offset == 64 && g->inputs[1].bytes == 28);
    CHECK(g->nodes[w].storage == BRISK_STORE_PARAM && g->params[0].offset == 0 && g->nodes[w].offset == 0);
    CHECK(g->params[1].offset == 16 && g->nodes[b].offset == 64 && g->n_param_floats == 19);
    CHECK(g->params[0].grad_node == -1 && g->params[0].decay == 1 && g->params[1].decay == 0);
    CHECK(g->nodes[w].requires_grad && !g->nodes[x].requires_grad && !g->nodes[c1].requires_grad);
    CHECK(g->nodes[c1].storage == BRISK_STORE_CONST && g->nodes[c1].offset == 0);
    CHECK(g->nodes[c2].offset == 64 && g->nodes[c2].attr.i0 == 64);
    CHECK(g->nodes[c4].offset == 192 && g->const_bytes == 196);
    float got[2];
    memcpy(got, g->const_data + 64, sizeof got);
    CHECK(got[0] == 4 && got[1] == 5);
    CHECK(strcmp(g->nodes[w].name, "w") == 0 && strcmp(g->params[0].name, "w") == 0);

    /* requires_grad flows from params; integer outputs never need it. */
    int h = brisk_matmul(g, x, w, 0, 0);
    int hb = brisk_bias_add(g, h, b);
    int xc = brisk_relu(g, x);
    int ci = brisk_cast(g, hb, BRISK_I32);
    REQUIRE(brisk_graph_error(g, NULL) == BRISK_OK);
    CHECK(g->nodes[h].requires_grad && g->nodes[hb].requires_grad && !g->nodes[xc].requires_grad);
    CHECK(!g->nodes[ci].requires_grad && g->nodes[ci].dtype == BRISK_I32);
    CHECK(g->nodes[h].storage == BRISK_STORE_ARENA && g->nodes[h].bytes == 36 && g->nodes[h].alias_of == -1);
    int r1 = brisk_reshape(g, hb, brisk_shape1(9));
    int r2 = brisk_reshape(g, r1, brisk_shape2(9, 1));
    CHECK(g->nodes[r1].storage == BRISK_STORE_ALIAS && g->nodes[r1].alias_of == hb);
    CHECK(g->nodes[r2].alias_of == hb); /* chains point at the owner */
    brisk_graph_free(g);
}

static void test_leaf_errors(void) {
    brisk_graph *g = brisk_graph_new();
    CHECK(brisk_param(g, "w", brisk_shape1(4), BRISK_INIT_ZEROS, 0, 0) == 0);
    EXPECT_FAIL(g, brisk_param(g, "w", brisk_shape1(4), BRISK_INIT_ZEROS, 0, 0), "w", "already used");
    brisk_graph_free(g);

    g = brisk_graph_new();
    CHECK(brisk_input(g, "x", BRISK_F32, brisk_shape1(4)) == 0);
    EXPECT_FAIL(g, brisk_input(g, "x", BRISK_F32, brisk_shape1(4)), "input", "x", "already used");
    brisk_graph_free(g);

    g = brisk_graph_new();
    float d = 0;
    CHECK(brisk_const(g, "k", BRISK_F32, brisk_shape1(1), &d) == 0);
    EXPECT_FAIL(g, brisk_const(g, "k", BRISK_F32, brisk_shape1(1), &d), "const", "k", "already used");
    brisk_graph_free(g);

    g = brisk_graph_new();
    EXPECT_FAIL(g, brisk_input(g, "x", BRISK_F32, brisk_shape2(4, 0)), "input \"x\"", "[4, 0]");
    brisk_graph_free(g);

    g = brisk_graph_new();
    EXPECT_FAIL(g, brisk_param(g, "", brisk_shape1(4), BRISK_INIT_ZEROS, 0, 0), "empty name");
    brisk_graph_free(g);
}

static void test_shape_errors(void) {
    brisk_graph *g = brisk_graph_new();
    int a = brisk_input(g, "a", BRISK_F32, brisk_shape2(16, 295));
    int b = brisk_param(g, "b", brisk_shape2(256, 300), BRISK_INIT_ZEROS, 0, 0);
    EXPECT_FAIL(g, brisk_matmul(g, a, b, 0, 0), "matmul", "inner dims differ", "a [16, 295]", "b [256, 300]");
    /* Later calls fail at once and the first message stays. */
    int ok = brisk_relu(g, a);
    CHECK(ok == -1);
    brisk_error e;
    brisk_graph_error(g, &e);
    CHECK(has(e.msg, "matmul: inner dims differ: a [16, 295] x b [256, 300]"));
    CHECK(e.code == BRISK_ERR_SHAPE);
    CHECK(brisk_input(g, "z", BRISK_F32, brisk_shape1(3)) == -1);
    brisk_graph_free(g);

    g = brisk_graph_new();
    a = brisk_input(g, "a", BRISK_F32, brisk_shape3(2, 4, 8));
    b = brisk_input(g, "b", BRISK_F32, brisk_shape3(3, 8, 5));
    EXPECT_FAIL(g, brisk_matmul(g, a, b, 0, 0), "matmul", "batch dims differ", "[2, 4, 8]", "[3, 8, 5]");
    brisk_graph_free(g);

    g = brisk_graph_new();
    a = brisk_input(g, "a", BRISK_F32, brisk_shape2(4, 8));
    b = brisk_input(g, "b", BRISK_F32, brisk_shape2(4, 5));
    CHECK(brisk_matmul(g, a, b, 1, 0) >= 0); /* transposed a: [8, 4] x [4, 5] */
    EXPECT_FAIL(g, brisk_matmul(g, a, b, 0, 1), "inner dims differ", "a [4, 8] x b [4, 5]", "trans_b 1");
    brisk_graph_free(g);

    g = brisk_graph_new();
    int xs[3];
    xs[0] = brisk_input(g, "x0", BRISK_F32, brisk_shape2(4, 3));
    xs[1] = brisk_input(g, "x1", BRISK_F32, brisk_shape2(4, 5));
    xs[2] = brisk_input(g, "x2", BRISK_F32, brisk_shape2(2, 5));
    int c = brisk_concat(g, xs, 2, 1);
    CHECK(c >= 0 && g->nodes[c].shape.d[1] == 8);
    CHECK(brisk_concat(g, xs + 1, 2, 0) >= 0);
    EXPECT_FAIL(g, brisk_concat(g, xs, 3, 1), "concat", "input 2", "[2, 5]", "[4, 3]", "axis 1");
    brisk_graph_free(g);

    g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape3(2, 7, 16));
    int bias = brisk_param(g, "bias", brisk_shape1(15), BRISK_INIT_ZEROS, 0, 0);
    EXPECT_FAIL(g, brisk_bias_add(g, x, bias), "bias_add", "[15]", "[2, 7, 16]");
    brisk_graph_free(g);

    g = brisk_graph_new();
    int logits = brisk_input(g, "logits", BRISK_F32, brisk_shape2(8, 10));
    int labels = brisk_input(g, "labels", BRISK_I32, brisk_shape1(9));
    int flabels = brisk_input(g, "flabels", BRISK_F32, brisk_shape1(8));
    EXPECT_FAIL(g, brisk_cross_entropy(g, logits, labels), "cross_entropy", "labels [9]", "logits [8, 10]", "[8]");
    brisk_graph_free(g);
    g = brisk_graph_new();
    logits = brisk_input(g, "logits", BRISK_F32, brisk_shape2(8, 10));
    flabels = brisk_input(g, "flabels", BRISK_F32, brisk_shape1(8));
    EXPECT_FAIL(g, brisk_cross_entropy(g, logits, flabels), "cross_entropy", "f32 [8]", "i32 labels");
    brisk_graph_free(g);

    g = brisk_graph_new();
    int table = brisk_param(g, "emb", brisk_shape2(100, 16), BRISK_INIT_NORMAL, 1, 0);
    int fidx = brisk_input(g, "fidx", BRISK_F32, brisk_shape2(4, 6));
    EXPECT_FAIL(g, brisk_gather(g, table, fidx), "gather", "[100, 16]", "f32 [4, 6]", "i32");
    brisk_graph_free(g);
    g = brisk_graph_new();
    table = brisk_param(g, "emb", brisk_shape2(100, 16), BRISK_INIT_NORMAL, 1, 0);
    int idx = brisk_input(g, "idx", BRISK_I32, brisk_shape4(2, 2, 2, 2));
    int t3 = brisk_param(g, "t3", brisk_shape4(5, 2, 2, 2), BRISK_INIT_NORMAL, 1, 0);
    int gg = brisk_gather(g, table, idx);
    CHECK(gg >= 0 && g->nodes[gg].shape.ndim == 5 && g->nodes[gg].shape.d[4] == 16);
    EXPECT_FAIL(g, brisk_gather(g, t3, idx), "gather", "7 dims");
    brisk_graph_free(g);
}

static void test_other_shape_rules(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape3(2, 3, 4));
    int y = brisk_input(g, "y", BRISK_F32, brisk_shape2(1, 4));
    int s = brisk_add(g, x, y);
    CHECK(s >= 0 && brisk_shape_equal(&g->nodes[s].shape, &g->nodes[x].shape));
    int r = brisk_sum(g, x, 0x5, 0);
    CHECK(r >= 0 && g->nodes[r].shape.ndim == 1 && g->nodes[r].shape.d[0] == 3);
    int rk = brisk_mean(g, x, 0x2, 1);
    CHECK(rk >= 0 && g->nodes[rk].shape.ndim == 3 && g->nodes[rk].shape.d[1] == 1);
    int st = brisk_sum_to(g, x, brisk_shape2(3, 1));
    CHECK(st >= 0 && g->nodes[st].shape.ndim == 2);
    int perm[3] = {2, 0, 1};
    int t = brisk_transpose(g, x, perm);
    CHECK(t >= 0 && g->nodes[t].shape.d[0] == 4 && g->nodes[t].shape.d[1] == 2 && g->nodes[t].shape.d[2] == 3);
    int sl = brisk_slice(g, x, -1, 1, 2);
    CHECK(sl >= 0 && g->nodes[sl].shape.d[2] == 2 && g->nodes[sl].attr.axis == 2);
    int tt = brisk_input(g, "t", BRISK_I32, brisk_shape1(5));
    int se = brisk_sinusoidal(g, tt, 8);
    CHECK(se >= 0 && g->nodes[se].shape.d[0] == 5 && g->nodes[se].shape.d[1] == 8);
    int d1 = brisk_dropout(g, x, 0.1f), d2 = brisk_dropout(g, x, 0.1f), rn = brisk_randn(g, brisk_shape1(3));
    CHECK(d1 >= 0 && d2 >= 0 && rn >= 0);
    CHECK(g->nodes[d1].attr.rng != g->nodes[d2].attr.rng && g->nodes[d2].attr.rng != g->nodes[rn].attr.rng);
    int ce = brisk_cross_entropy(g, x, brisk_input(g, "lab", BRISK_I32, brisk_shape2(2, 3)));
    CHECK(ce >= 0 && g->nodes[ce].shape.ndim == 0 && g->nodes[ce].bytes == 4);
    REQUIRE(brisk_graph_error(g, NULL) == BRISK_OK);
    brisk_graph_free(g);

    struct { const char *want; int which; } cases[] = {
        {"add: shapes do not broadcast: x [2, 3, 4], y [3, 3]", 0},
        {"sum: axes 0x8 do not name dims of x [2, 3, 4]", 1},
        {"expand: x [2, 3, 4] does not broadcast to [3, 4]", 2},
        {"sum_to: target [2, 4] does not broadcast to x [2, 3, 4]", 3},
        {"transpose: perm (0, 0, 1) is not a permutation", 4},
        {"slice: [3, 5) is outside axis 2 of x [2, 3, 4]", 5},
        {"reshape: x [2, 3, 4] cannot be viewed as [5, 5]", 6},
        {"mse: pred [2, 3, 4] and target [1, 4] differ", 7},
        {"layernorm: gamma [3] and beta [1, 4] must be [4]", 8},
        {"dropout: p = 1", 9},
        {"sinusoidal: dim 7", 10},
        {"randint: range [3, 3)", 11},
        {"scale: input 0 i32", 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g = brisk_graph_new();
        x = brisk_input(g, "x", BRISK_F32, brisk_shape3(2, 3, 4));
        y = brisk_input(g, "y", BRISK_F32, brisk_shape2(1, 4));
        int bad = brisk_input(g, "z", BRISK_F32, brisk_shape2(3, 3));
        int iv = brisk_input(g, "iv", BRISK_I32, brisk_shape1(3));
        int p0[3] = {0, 0, 1};
        int r2 = 0;
        switch (cases[i].which) {
        case 0: r2 = brisk_add(g, x, bad); break;
        case 1: r2 = brisk_sum(g, x, 0x8, 0); break;
        case 2: r2 = brisk_expand(g, x, brisk_shape2(3, 4)); break;
        case 3: r2 = brisk_sum_to(g, x, brisk_shape2(2, 4)); break;
        case 4: r2 = brisk_transpose(g, x, p0); break;
        case 5: r2 = brisk_slice(g, x, 2, 3, 2); break;
        case 6: r2 = brisk_reshape(g, x, brisk_shape2(5, 5)); break;
        case 7: r2 = brisk_mse(g, x, y); break;
        case 8: r2 = brisk_layernorm(g, x, brisk_input(g, "gm", BRISK_F32, brisk_shape1(3)), y, 1e-5f); break;
        case 9: r2 = brisk_dropout(g, x, 1.0f); break;
        case 10: r2 = brisk_sinusoidal(g, iv, 7); break;
        case 11: r2 = brisk_randint(g, brisk_shape1(3), 3, 3); break;
        case 12: r2 = brisk_scale(g, iv, 2, 0); break;
        }
        brisk_error e;
        CHECKF(r2 == -1, "case %zu returned %d", i, r2);
        brisk_graph_error(g, &e);
        CHECKF(has(e.msg, cases[i].want), "case %zu: \"%s\" lacks \"%s\"", i, e.msg, cases[i].want);
        brisk_graph_free(g);
    }
}

static void test_bad_ids(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape1(4));
    EXPECT_FAIL(g, brisk_add(g, x, 42), "add", "not a node");
    brisk_graph_free(g);
    g = brisk_graph_new();
    EXPECT_FAIL(g, brisk_relu(g, -1), "relu", "not a node");
    brisk_graph_free(g);
    CHECK(brisk_relu(NULL, 0) == -1);
}

TEST_MAIN(T(test_op_table_complete), T(test_leaves_placement), T(test_leaf_errors), T(test_shape_errors),
          T(test_other_shape_rules), T(test_bad_ids))
