/* Every op of the CPU backend on the CUDA backend, against the CPU on the same random
 * inputs: fp32 relative norm error <= 1e-5 (the kernels use CUDA's libm where the CPU has
 * its own vectorised math), other dtypes and the Philox-driven dropout/randint bit for
 * bit. Outputs are poisoned before each run and inputs checked after it. GEMMs per
 * precision: fp32 <= 1e-5, TF32 <= 1e-3, bf16 and fp16 <= 1e-2. Skips without a GPU. */
#include "backend/cuda_test_util.h"

static brisk_backend *gpu_fp32(void) {
    static brisk_backend *b;
    if (!b) b = cuda_backend_for(BRISK_GEMM_FP32, 1, 0);
    return b;
}

/* Runs node `out` of g (as a one-node "training" schedule) on both backends and compares. */
static void run_case_on(brisk_backend *gpu, brisk_graph *g, int out, double tol, const char *what) {
    brisk_error err = {0};
    ct_pair p;
    if (!g || brisk_graph_error(g, &err) || out < 0) {
        CHECKF(0, "%s: building the graph: %s", what, err.msg);
        if (g) brisk_graph_free(g);
        return;
    }
    g->loss = g->output = out;
    if (!gpu) {
        CHECKF(0, "%s: no GPU backend", what);
    } else if (ct_pair_make(g, gpu, &p, &err) || ct_poison(p.gpu, out, &err) ||
               brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) || brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) ||
               gpu->sync(gpu, &err)) {
        CHECKF(0, "%s: %s", what, err.msg);
        ct_pair_free(&p);
    } else {
        CHECKF(ct_compare(&p, out, tol, what), "%s", what);
        CHECKF(ct_inputs_intact(&p), "%s", what);
        ct_pair_free(&p);
    }
    brisk_graph_free(g);
}

static void run_case(brisk_graph *g, int out, double tol, const char *what) {
    run_case_on(gpu_fp32(), g, out, tol, what);
}

/* SCATTER_ADD keeps the CPU's order of additions only under --deterministic (otherwise it
 * takes the atomic kernel, tested in test_cuda_gnn.c). */
static brisk_backend *gpu_deterministic(void) {
    static brisk_backend *b;
    if (!b) b = cuda_backend_for(BRISK_GEMM_FP32, 1, 1);
    return b;
}

static int op1(brisk_graph *g, brisk_op op, int x, brisk_dtype dt, brisk_shape s, const brisk_attr *a) {
    return brisk_graph_append(g, op, &x, 1, dt, s, a);
}

static brisk_attr attr0(void) {
    brisk_attr a;
    memset(&a, 0, sizeof a);
    return a;
}

/* ---------------------------------------------------------------- GEMM */

static void matmul_case(brisk_gemm_precision prec, brisk_shape sa, brisk_shape sb, int ta, int tb, double tol) {
    static brisk_backend *be[4];
    if (!be[prec]) be[prec] = cuda_backend_for(prec, 1, 0);
    brisk_graph *g = brisk_graph_new();
    int a = ct_input(g, BRISK_F32, sa, -1, 1), b = ct_input(g, BRISK_F32, sb, -1, 1);
    int m = brisk_matmul(g, a, b, ta, tb);
    char what[160], s1[64], s2[64];
    snprintf(what, sizeof what, "matmul %s %s x %s ta %d tb %d", brisk_gemm_precision_name(prec),
             brisk_shape_str(&sa, s1, sizeof s1), brisk_shape_str(&sb, s2, sizeof s2), ta, tb);
    run_case_on(be[prec], g, m, tol, what);
}

static void test_matmul(void) {
    const double tol[4] = {1e-5, 1e-3, 1e-2, 1e-2};
    for (int p = 0; p < 4; p++) {
        matmul_case(p, brisk_shape2(37, 53), brisk_shape2(53, 29), 0, 0, tol[p]);
        matmul_case(p, brisk_shape2(53, 37), brisk_shape2(53, 29), 1, 0, tol[p]);
        matmul_case(p, brisk_shape2(37, 53), brisk_shape2(29, 53), 0, 1, tol[p]);
        matmul_case(p, brisk_shape2(53, 37), brisk_shape2(29, 53), 1, 1, tol[p]);
        matmul_case(p, brisk_shape2(256, 512), brisk_shape2(384, 512), 0, 1, tol[p]);
        matmul_case(p, brisk_shape3(3, 17, 24), brisk_shape3(3, 24, 9), 0, 0, tol[p]);
        matmul_case(p, brisk_shape3(3, 24, 17), brisk_shape3(3, 9, 24), 1, 1, tol[p]);
        matmul_case(p, brisk_shape3(4, 16, 32), brisk_shape2(32, 8), 0, 0, tol[p]);  /* shared b: folded */
        matmul_case(p, brisk_shape3(4, 32, 16), brisk_shape2(8, 32), 1, 1, tol[p]);  /* shared b, batched */
    }
}

/* ---------------------------------------------------------------- elementwise */

static void test_bias_and_binary(void) {
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape2(33, 40), -2, 2), b = ct_input(g, BRISK_F32, brisk_shape1(40), -2, 2);
    run_case(g, brisk_bias_add(g, x, b), 1e-6, "bias_add [33, 40]");
    g = brisk_graph_new();
    x = ct_input(g, BRISK_F32, brisk_shape2(7, 13), -2, 2), b = ct_input(g, BRISK_F32, brisk_shape1(13), -2, 2);
    run_case(g, brisk_bias_add(g, x, b), 1e-6, "bias_add [7, 13]");
    const brisk_shape pairs[][2] = {
        {{2, {64, 32}}, {2, {64, 32}}}, {{3, {5, 1, 7}}, {3, {1, 6, 7}}}, {{2, {8, 16}}, {1, {16}}},
        {{2, {8, 16}}, {2, {8, 1}}},    {{0, {0}}, {2, {4, 4}}},         {{1, {1001}}, {1, {1001}}},
    };
    brisk_op ops[] = {BRISK_OP_ADD, BRISK_OP_SUB, BRISK_OP_MUL, BRISK_OP_DIV};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        for (int o = 0; o < 4; o++) {
            g = brisk_graph_new();
            int a = ct_input(g, BRISK_F32, pairs[k][0], -2, 2);
            int c = ct_input(g, BRISK_F32, pairs[k][1], 0.5f, 2); /* away from 0 for DIV */
            int r = ops[o] == BRISK_OP_ADD ? brisk_add(g, a, c) : ops[o] == BRISK_OP_SUB ? brisk_sub(g, a, c)
                  : ops[o] == BRISK_OP_MUL ? brisk_mul(g, a, c) : brisk_div(g, a, c);
            char what[64];
            snprintf(what, sizeof what, "%s case %zu", brisk_op_name(ops[o]), k);
            run_case(g, r, 1e-6, what);
        }
}

static int act(brisk_graph *g, int kind, int form, int x) {
    switch (kind) {
    case BRISK_OP_RELU: return brisk_relu(g, x);
    case BRISK_OP_GELU: return brisk_gelu(g, x, form);
    case BRISK_OP_SILU: return brisk_silu(g, x);
    case BRISK_OP_TANH: return brisk_tanh(g, x);
    default: return brisk_sigmoid(g, x);
    }
}

static void test_activations(void) {
    const int kinds[] = {BRISK_OP_RELU, BRISK_OP_GELU, BRISK_OP_GELU, BRISK_OP_SILU, BRISK_OP_TANH, BRISK_OP_SIGMOID};
    for (int n = 1000; n <= 1001; n++)
        for (int k = 0; k < 6; k++) {
            int form = k == 2 ? BRISK_GELU_TANH : BRISK_GELU_ERF;
            char what[64];
            snprintf(what, sizeof what, "%s%s [%d]", brisk_op_name(kinds[k]), k == 2 ? " tanh" : "", n);
            brisk_graph *g = brisk_graph_new();
            int x = ct_input(g, BRISK_F32, brisk_shape1(n), -6, 6);
            run_case(g, act(g, kinds[k], form, x), 1e-5, what);
            /* the gradient, with y = f(x) computed on each side */
            g = brisk_graph_new();
            x = ct_input(g, BRISK_F32, brisk_shape1(n), -6, 6);
            int dy = ct_input(g, BRISK_F32, brisk_shape1(n), -1, 1), y = act(g, kinds[k], form, x);
            brisk_attr a = attr0();
            a.kind = kinds[k];
            a.i1 = form;
            int in[3] = {dy, x, y};
            snprintf(what, sizeof what, "act_grad %s%s [%d]", brisk_op_name(kinds[k]), k == 2 ? " tanh" : "", n);
            run_case(g, brisk_graph_append(g, BRISK_OP_ACT_GRAD, in, 3, BRISK_F32, brisk_shape1(n), &a), 1e-5, what);
        }
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape2(9, 7), -3, 3);
    run_case(g, brisk_scale(g, x, 1.5f, -0.25f), 1e-6, "scale");
}

/* ---------------------------------------------------------------- random */

static void test_random(void) {
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape1(1003), -2, 2);
    run_case(g, brisk_dropout(g, x, 0.3f), 0.0, "dropout p 0.3 (bit-identical mask)");
    g = brisk_graph_new();
    run_case(g, brisk_randn(g, brisk_shape1(2050)), 1e-5, "randn");
    g = brisk_graph_new();
    run_case(g, brisk_rand_uniform(g, brisk_shape2(41, 50), -1.0f, 3.0f), 1e-6, "rand_uniform");
    g = brisk_graph_new();
    run_case(g, brisk_randint(g, brisk_shape1(2051), -5, 7), 0.0, "randint (bit-identical)");
}

/* ---------------------------------------------------------------- reductions */

static void test_reduce(void) {
    brisk_shape s = brisk_shape3(6, 7, 8);
    for (uint32_t axes = 1; axes < 8; axes++)
        for (int keep = 0; keep < 2; keep++) {
            char what[64];
            snprintf(what, sizeof what, "sum axes %u keepdim %d", axes, keep);
            brisk_graph *g = brisk_graph_new();
            int x = ct_input(g, BRISK_F32, s, -2, 2);
            run_case(g, brisk_sum(g, x, axes, keep), 1e-5, what);
            g = brisk_graph_new();
            x = ct_input(g, BRISK_F32, s, -2, 2);
            snprintf(what, sizeof what, "mean axes %u keepdim %d", axes, keep);
            run_case(g, brisk_mean(g, x, axes, keep), 1e-5, what);
        }
    struct { brisk_shape x; uint32_t axes; const char *what; } big[] = {
        {{1, {300001}}, 1, "sum of 300001 (global)"},
        {{2, {5000, 64}}, 1, "column sums [5000, 64] (chunked)"},
        {{2, {64, 5000}}, 2, "row sums [64, 5000]"},
        {{2, {3, 70000}}, 2, "long rows [3, 70000] (a block per row)"},
    };
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        brisk_graph *g = brisk_graph_new();
        int x = ct_input(g, BRISK_F32, big[k].x, -1, 1);
        run_case(g, brisk_sum(g, x, big[k].axes, 0), 1e-5, big[k].what);
    }
    /* no empty axis: the graph refuses a dim <= 0 at the input, so no kernel sees one */
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape3(4, 5, 6), -2, 2);
    run_case(g, brisk_sum_to(g, x, brisk_shape2(5, 1)), 1e-5, "sum_to [4,5,6] -> [5,1]");
    g = brisk_graph_new();
    x = ct_input(g, BRISK_F32, brisk_shape3(4, 5, 6), -2, 2);
    run_case(g, brisk_sum_to(g, x, brisk_shape1(6)), 1e-5, "sum_to [4,5,6] -> [6]");
}

/* ---------------------------------------------------------------- rows: softmax, losses, layernorm */

/* Every way a row is spread over threads (k_rows.cu: 1 to 32 lanes of a warp, a warp, a
 * block of 256 or 1024): widths on both sides of each switch, rows that leave a warp's
 * lane groups partly empty (37, 5), every row op against the CPU. */
static void test_rows_every_width(void) {
    const int64_t widths[] = {1, 2, 5, 8, 9, 31, 64, 129, 1024, 1025, 5000, 16384, 20000};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        int64_t c = widths[w], R = c > 4096 ? 5 : 37;
        brisk_shape s = brisk_shape2(R, c);
        char what[96];
        for (int lg = 0; lg < 2; lg++) {
            brisk_graph *g = brisk_graph_new();
            int x = ct_input(g, BRISK_F32, s, -5, 5);
            snprintf(what, sizeof what, "%s [%lld, %lld]", lg ? "log_softmax" : "softmax", (long long)R, (long long)c);
            run_case(g, lg ? brisk_log_softmax(g, x) : brisk_softmax(g, x), 1e-5, what);
            g = brisk_graph_new();
            x = ct_input(g, BRISK_F32, s, -5, 5);
            int dy = ct_input(g, BRISK_F32, s, -1, 1), y = lg ? brisk_log_softmax(g, x) : brisk_softmax(g, x);
            int in[2] = {dy, y};
            snprintf(what, sizeof what, "%s_grad [%lld, %lld]", lg ? "log_softmax" : "softmax", (long long)R, (long long)c);
            run_case(g, brisk_graph_append(g, lg ? BRISK_OP_LOG_SOFTMAX_GRAD : BRISK_OP_SOFTMAX_GRAD, in, 2, BRISK_F32, s,
                                           NULL), 1e-5, what);
        }
        brisk_graph *g = brisk_graph_new();
        int x = ct_input(g, BRISK_F32, s, -4, 4), y = ct_input(g, BRISK_I32, brisk_shape1(R), 0, (float)c);
        snprintf(what, sizeof what, "cross_entropy [%lld, %lld]", (long long)R, (long long)c);
        run_case(g, brisk_cross_entropy(g, x, y), 1e-6, what);
        g = brisk_graph_new();
        int d = ct_input(g, BRISK_F32, brisk_shape_make(0, NULL), 0.5f, 2);
        x = ct_input(g, BRISK_F32, s, -4, 4), y = ct_input(g, BRISK_I32, brisk_shape1(R), 0, (float)c);
        int in3[3] = {d, x, y};
        snprintf(what, sizeof what, "cross_entropy_grad [%lld, %lld]", (long long)R, (long long)c);
        run_case(g, brisk_graph_append(g, BRISK_OP_CROSS_ENTROPY_GRAD, in3, 3, BRISK_F32, s, NULL), 1e-5, what);
        if (c < 2) continue; /* layernorm over one element is 0 / eps: compared elsewhere */
        g = brisk_graph_new();
        x = ct_input(g, BRISK_F32, s, -2, 2);
        int ga = ct_input(g, BRISK_F32, brisk_shape1(c), 0.5f, 1.5f), be = ct_input(g, BRISK_F32, brisk_shape1(c), -1, 1);
        snprintf(what, sizeof what, "layernorm [%lld, %lld]", (long long)R, (long long)c);
        run_case(g, brisk_layernorm(g, x, ga, be, 1e-5f), 1e-5, what);
        brisk_attr a = attr0();
        a.f0 = 1e-5f;
        g = brisk_graph_new();
        int dy = ct_input(g, BRISK_F32, s, -1, 1);
        x = ct_input(g, BRISK_F32, s, -2, 2);
        ga = ct_input(g, BRISK_F32, brisk_shape1(c), 0.5f, 1.5f);
        int in4[3] = {dy, x, ga};
        snprintf(what, sizeof what, "layernorm_grad_x [%lld, %lld]", (long long)R, (long long)c);
        run_case(g, brisk_graph_append(g, BRISK_OP_LAYERNORM_GRAD_X, in4, 3, BRISK_F32, s, &a), 1e-5, what);
    }
}

static void test_rows(void) {
    const brisk_shape shapes[] = {brisk_shape2(37, 100), brisk_shape2(5, 3), brisk_shape3(2, 3, 1000)};
    for (int k = 0; k < 3; k++)
        for (int lg = 0; lg < 2; lg++) {
            char what[64];
            snprintf(what, sizeof what, "%s case %d", lg ? "log_softmax" : "softmax", k);
            brisk_graph *g = brisk_graph_new();
            int x = ct_input(g, BRISK_F32, shapes[k], -5, 5);
            run_case(g, lg ? brisk_log_softmax(g, x) : brisk_softmax(g, x), 1e-5, what);
            g = brisk_graph_new();
            x = ct_input(g, BRISK_F32, shapes[k], -5, 5);
            int dy = ct_input(g, BRISK_F32, shapes[k], -1, 1), y = lg ? brisk_log_softmax(g, x) : brisk_softmax(g, x);
            int in[2] = {dy, y};
            snprintf(what, sizeof what, "%s_grad case %d", lg ? "log_softmax" : "softmax", k);
            run_case(g, brisk_graph_append(g, lg ? BRISK_OP_LOG_SOFTMAX_GRAD : BRISK_OP_SOFTMAX_GRAD, in, 2, BRISK_F32,
                                           shapes[k], NULL),
                     1e-5, what);
        }
    for (int c = 3; c <= 1000; c += 997) {
        brisk_graph *g = brisk_graph_new();
        int x = ct_input(g, BRISK_F32, brisk_shape2(37, c), -4, 4), y = ct_input(g, BRISK_I32, brisk_shape1(37), 0, (float)c);
        run_case(g, brisk_cross_entropy(g, x, y), 1e-6, "cross_entropy");
        g = brisk_graph_new();
        int d = ct_input(g, BRISK_F32, brisk_shape_make(0, NULL), 0.5f, 2);
        x = ct_input(g, BRISK_F32, brisk_shape2(37, c), -4, 4), y = ct_input(g, BRISK_I32, brisk_shape1(37), 0, (float)c);
        int in[3] = {d, x, y};
        run_case(g, brisk_graph_append(g, BRISK_OP_CROSS_ENTROPY_GRAD, in, 3, BRISK_F32, brisk_shape2(37, c), NULL), 1e-5,
                 "cross_entropy_grad");
    }
    brisk_graph *g = brisk_graph_new();
    int p = ct_input(g, BRISK_F32, brisk_shape2(37, 13), -2, 2), t = ct_input(g, BRISK_F32, brisk_shape2(37, 13), -2, 2);
    run_case(g, brisk_mse(g, p, t), 1e-6, "mse");
    g = brisk_graph_new();
    int d = ct_input(g, BRISK_F32, brisk_shape_make(0, NULL), 0.5f, 2);
    p = ct_input(g, BRISK_F32, brisk_shape2(37, 13), -2, 2), t = ct_input(g, BRISK_F32, brisk_shape2(37, 13), -2, 2);
    int in[3] = {d, p, t};
    run_case(g, brisk_graph_append(g, BRISK_OP_MSE_GRAD, in, 3, BRISK_F32, brisk_shape2(37, 13), NULL), 1e-6, "mse_grad");
    for (int off = 0; off <= 100; off += 100) {
        char what[64];
        brisk_attr a = attr0();
        a.f0 = 1e-5f;
        g = brisk_graph_new();
        int x = ct_input(g, BRISK_F32, brisk_shape2(37, 96), off - 2.0f, off + 2.0f);
        int ga = ct_input(g, BRISK_F32, brisk_shape1(96), 0.5f, 1.5f), be = ct_input(g, BRISK_F32, brisk_shape1(96), -1, 1);
        snprintf(what, sizeof what, "layernorm mean %d", off);
        run_case(g, brisk_layernorm(g, x, ga, be, 1e-5f), 1e-5, what);
        g = brisk_graph_new();
        x = ct_input(g, BRISK_F32, brisk_shape2(37, 96), off - 2.0f, off + 2.0f);
        snprintf(what, sizeof what, "layernorm_xhat mean %d", off);
        run_case(g, op1(g, BRISK_OP_LAYERNORM_XHAT, x, BRISK_F32, brisk_shape2(37, 96), &a), 1e-5, what);
        g = brisk_graph_new();
        int dy = ct_input(g, BRISK_F32, brisk_shape2(37, 96), -1, 1);
        x = ct_input(g, BRISK_F32, brisk_shape2(37, 96), off - 2.0f, off + 2.0f);
        ga = ct_input(g, BRISK_F32, brisk_shape1(96), 0.5f, 1.5f);
        int in3[3] = {dy, x, ga};
        snprintf(what, sizeof what, "layernorm_grad_x mean %d", off);
        run_case(g, brisk_graph_append(g, BRISK_OP_LAYERNORM_GRAD_X, in3, 3, BRISK_F32, brisk_shape2(37, 96), &a), 1e-5,
                 what);
    }
    test_rows_every_width();
}

/* ---------------------------------------------------------------- data movement */

static void test_shape(void) {
    const brisk_dtype dts[] = {BRISK_F32, BRISK_F16, BRISK_U8, BRISK_I32};
    for (int k = 0; k < 4; k++) {
        brisk_dtype dt = dts[k];
        float hi = dt == BRISK_U8 ? 255 : dt == BRISK_I32 ? 1000 : 2;
        char what[64];
        brisk_graph *g = brisk_graph_new();
        int xs[3] = {ct_input(g, dt, brisk_shape3(4, 3, 5), 0, hi), ct_input(g, dt, brisk_shape3(4, 2, 5), 0, hi),
                     ct_input(g, dt, brisk_shape3(4, 8, 5), 0, hi)};
        snprintf(what, sizeof what, "concat axis 1 %s", brisk_dtype_name(dt));
        run_case(g, brisk_concat(g, xs, 3, 1), 0.0, what);
        g = brisk_graph_new();
        int x = ct_input(g, dt, brisk_shape3(4, 12, 5), 0, hi);
        snprintf(what, sizeof what, "slice axis 1 %s", brisk_dtype_name(dt));
        run_case(g, brisk_slice(g, x, 1, 3, 7), 0.0, what);
        g = brisk_graph_new();
        x = ct_input(g, dt, brisk_shape3(4, 7, 5), 0, hi);
        brisk_attr a = attr0();
        a.axis = 1, a.i0 = 3, a.shape2 = brisk_shape3(4, 12, 5);
        snprintf(what, sizeof what, "slice_grad %s", brisk_dtype_name(dt));
        run_case(g, op1(g, BRISK_OP_SLICE_GRAD, x, dt, a.shape2, &a), 0.0, what);
        const int perms[3][3] = {{2, 0, 1}, {0, 2, 1}, {1, 0, 2}};
        for (int p = 0; p < 3; p++) {
            g = brisk_graph_new();
            x = ct_input(g, dt, brisk_shape3(5, 33, 17), 0, hi);
            snprintf(what, sizeof what, "transpose (%d %d %d) %s", perms[p][0], perms[p][1], perms[p][2],
                     brisk_dtype_name(dt));
            run_case(g, brisk_transpose(g, x, perms[p]), 0.0, what);
        }
    }
    /* expand and gather take f32 alone (the graph refuses other dtypes) */
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape3(1, 6, 1), -2, 2);
    run_case(g, brisk_expand(g, x, brisk_shape3(4, 6, 5)), 0.0, "expand f32");
    g = brisk_graph_new();
    x = ct_input(g, BRISK_F32, brisk_shape2(64, 32), -2, 2);
    run_case(g, brisk_expand(g, brisk_reshape(g, x, brisk_shape3(1, 64, 32)), brisk_shape3(3, 64, 32)), 0.0,
             "expand 16-byte rows");
}

static void test_index(void) {
    const int64_t widths[] = {8, 6, 3};
    for (int k = 0; k < 3; k++) {
        brisk_graph *g = brisk_graph_new();
        int t = ct_input(g, BRISK_F32, brisk_shape2(50, widths[k]), 0, 100);
        int i = ct_input(g, BRISK_I32, brisk_shape2(3, 4), 0, 50);
        char what[64];
        snprintf(what, sizeof what, "gather f32 rows of %lld", (long long)widths[k]);
        run_case(g, brisk_gather(g, t, i), 0.0, what);
    }
    brisk_graph *g = brisk_graph_new();
    int dy = ct_input(g, BRISK_F32, brisk_shape2(40, 8), -1, 1), i = ct_input(g, BRISK_I32, brisk_shape1(40), 0, 5);
    brisk_attr a = attr0();
    a.shape2 = brisk_shape2(5, 8);
    int in[2] = {dy, i};
    run_case_on(gpu_deterministic(), g, brisk_graph_append(g, BRISK_OP_SCATTER_ADD, in, 2, BRISK_F32, a.shape2, &a),
                0.0, "scatter_add (same order: bit-identical)");
    /* several column tiles, row ranges and index tiles: still each row in index order */
    const int64_t sc[][3] = {{1500, 700, 130}, {3000, 3, 64}, {700, 4000, 1}};
    for (int k = 0; k < 3; k++) {
        g = brisk_graph_new();
        dy = ct_input(g, BRISK_F32, brisk_shape2(sc[k][0], sc[k][2]), -1, 1);
        i = ct_input(g, BRISK_I32, brisk_shape1(sc[k][0]), 0, (float)sc[k][1]);
        a.shape2 = brisk_shape2(sc[k][1], sc[k][2]);
        int in2[2] = {dy, i};
        char what[80];
        snprintf(what, sizeof what, "scatter_add %lld rows into [%lld, %lld]", (long long)sc[k][0], (long long)sc[k][1],
                 (long long)sc[k][2]);
        run_case_on(gpu_deterministic(), g, brisk_graph_append(g, BRISK_OP_SCATTER_ADD, in2, 2, BRISK_F32, a.shape2, &a),
                    0.0, what);
    }
    for (int ti = 0; ti < 2; ti++) {
        g = brisk_graph_new();
        int t = ct_input(g, ti ? BRISK_I32 : BRISK_F32, brisk_shape1(16), 0, 1000);
        run_case(g, brisk_sinusoidal(g, t, 32), 1e-5, ti ? "sinusoidal i32" : "sinusoidal f32");
    }
    /* lanes per row follow dim / 2 (1 to 32, several rows per warp; 37 rows leave lane groups empty) */
    const int64_t sg[][2] = {{16, 32}, {37, 2}, {37, 10}, {37, 512}};
    for (int k = 0; k < 4; k++) {
        g = brisk_graph_new();
        dy = ct_input(g, BRISK_F32, brisk_shape2(sg[k][0], sg[k][1]), -1, 1);
        int t = ct_input(g, BRISK_F32, brisk_shape1(sg[k][0]), 0, 50);
        brisk_attr sa = attr0();
        sa.i0 = sg[k][1];
        int in2[2] = {dy, t};
        char what[64];
        snprintf(what, sizeof what, "sinusoidal_grad [%lld, %lld]", (long long)sg[k][0], (long long)sg[k][1]);
        run_case(g, brisk_graph_append(g, BRISK_OP_SINUSOIDAL_GRAD, in2, 2, BRISK_F32, brisk_shape1(sg[k][0]), &sa),
                 1e-5, what);
    }
}

static void test_cast(void) {
    const brisk_dtype all[] = {BRISK_F32, BRISK_I32, BRISK_F16, BRISK_BF16, BRISK_U8};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) {
            brisk_graph *g = brisk_graph_new();
            float lo = all[a] == BRISK_U8 ? 0 : -300, hi = all[a] == BRISK_U8 ? 255 : 300;
            int x = ct_input(g, all[a], brisk_shape1(1001), lo, hi);
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", brisk_dtype_name(all[a]), brisk_dtype_name(all[b]));
            run_case(g, brisk_cast(g, x, all[b]), 0.0, what);
        }
}

/* Bad labels and indices are errors at the next synchronisation, naming the node. */
static void test_bad_indices(void) {
    brisk_backend *be = gpu_fp32();
    REQUIRE(be);
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape2(4, 3), -1, 1), y = ct_input(g, BRISK_I32, brisk_shape1(4), 0, 3);
    int l = brisk_cross_entropy(g, x, y);
    g->loss = g->output = l;
    ct_pair p;
    brisk_error err = {0};
    REQUIRE_OK(ct_pair_make(g, be, &p, &err), &err);
    int32_t bad[4] = {0, 1, 7, 2};
    REQUIRE_OK(brisk_exec_set_input(p.gpu, 1, bad, &err), &err);
    brisk_status st = brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err);
    if (!st) st = be->sync(be, &err);
    CHECK(st == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "label 7 at row 2") != NULL, "message: %s", err.msg);
    /* the error is reported once; the backend keeps working */
    int32_t good[4] = {0, 1, 2, 2};
    REQUIRE_OK(brisk_exec_set_input(p.gpu, 1, good, &err), &err);
    REQUIRE_OK(brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err), &err);
    REQUIRE_OK(be->sync(be, &err), &err);
    ct_pair_free(&p);
    brisk_graph_free(g);
}

CUDA_TEST_MAIN(T(test_matmul), T(test_bias_and_binary), T(test_activations), T(test_random), T(test_reduce),
               T(test_rows), T(test_shape), T(test_index), T(test_cast), T(test_bad_indices))
