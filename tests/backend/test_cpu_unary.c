/* The elementwise math ops and the activations with a parameter on the CPU backend (EXP,
 * LOG, SQRT, ABS, POW, CLAMP, ERF, LEAKY_RELU, ELU, SOFTPLUS, their ACT_GRAD; MINIMUM, MAXIMUM,
 * POW_XY and BINARY_GRAD with broadcasting): against float64 at sizes that run in parallel,
 * bit-identical on 1, 2 and 3 threads, exactly in place, NaN kept; and a GEMM + bias +
 * leaky ReLU / ELU / softplus MLP trained fused and unfused to the same bits. */
#include "brisk/brisk.h"
#include "cpu_test_util.h"

static brisk_backend *be[3]; /* 1, 2 and 3 threads */

typedef struct { brisk_op op; float a, b; double lo, hi; } ucase;
static const ucase ucases[] = {
    {BRISK_OP_EXP, 0, 0, -80, 80},        {BRISK_OP_LOG, 0, 0, 1e-3, 1e4},     {BRISK_OP_SQRT, 0, 0, 0, 100},
    {BRISK_OP_ABS, 0, 0, -5, 5},          {BRISK_OP_POW, 2, 0, -4, 4},         {BRISK_OP_POW, 3, 0, -4, 4},
    {BRISK_OP_POW, 0.5f, 0, 0, 9},        {BRISK_OP_POW, -1, 0, 0.1, 9},       {BRISK_OP_POW, 2.5f, 0, 0, 9},
    {BRISK_OP_POW, 0, 0, -3, 3},          {BRISK_OP_CLAMP, -1, 0.5f, -3, 3},   {BRISK_OP_LEAKY_RELU, 0.02f, 0, -5, 5},
    {BRISK_OP_ELU, 1.3f, 0, -20, 5},      {BRISK_OP_SOFTPLUS, 1, 20, -90, 90}, {BRISK_OP_SOFTPLUS, 3, 2, -10, 10},
    {BRISK_OP_ERF, 0, 0, -5, 5},
};

static double ref_f(const ucase *u, double x) {
    switch (u->op) {
    case BRISK_OP_EXP: return exp(x);
    case BRISK_OP_LOG: return log(x);
    case BRISK_OP_SQRT: return sqrt(x);
    case BRISK_OP_ABS: return fabs(x);
    case BRISK_OP_POW: return pow(x, u->a);
    case BRISK_OP_CLAMP: return x < u->a ? u->a : x > u->b ? u->b : x;
    case BRISK_OP_LEAKY_RELU: return x > 0 ? x : u->a * x;
    case BRISK_OP_ELU: return x > 0 ? x : u->a * expm1(x);
    case BRISK_OP_ERF: return erf(x);
    default: return (float)(x * u->a) > u->b ? x : log1p(exp(u->a * x)) / u->a;
    }
}

/* f'(x); y is f(x) as the kernel made it, for the derivatives PyTorch takes from it */
static double ref_df(const ucase *u, double x, double y) {
    switch (u->op) {
    case BRISK_OP_EXP: return y;
    case BRISK_OP_LOG: return 1 / x;
    case BRISK_OP_SQRT: return 1 / (2 * y);
    case BRISK_OP_ABS: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case BRISK_OP_POW: return u->a == 0 ? 0 : u->a * pow(x, u->a - 1);
    case BRISK_OP_CLAMP: return x >= u->a && x <= u->b;
    case BRISK_OP_LEAKY_RELU: return x > 0 ? 1 : u->a;
    case BRISK_OP_ELU: return x > 0 ? 1 : u->a * exp(x);
    case BRISK_OP_ERF: return 1.1283791670955126 * exp(-x * x); /* 2/sqrt(pi) e^(-x^2) */
    default: return (float)(x * u->a) > u->b ? 1 : 1 / (1 + exp(-u->a * x));
    }
}

/* forward and ACT_GRAD of every case on each thread count: float64 within 1e-5 (relative
 * norm) and 3e-6 per element where the value is not tiny; the same bits on every count */
static void test_unary_and_grad(void) {
    const int64_t n = 70001;
    for (size_t k = 0; k < sizeof ucases / sizeof ucases[0]; k++) {
        const ucase *u = &ucases[k];
        float *first[2] = {NULL, NULL};
        for (int bi = 0; bi < 3; bi++) {
            tgraph t;
            tg_init(&t);
            tg_rng_state = 0x1234 + k; /* the same inputs on each thread count */
            brisk_shape sh = brisk_shape2(7, n / 7);
            int64_t len = brisk_shape_numel(&sh);
            int x = tg_input(&t, BRISK_F32, sh), dy = tg_input(&t, BRISK_F32, sh);
            for (int64_t i = 0; i < len; i++) tg_f(&t, x)[i] = tg_randf((float)u->lo, (float)u->hi);
            brisk_attr at = tg_attr0();
            at.f0 = u->a, at.f1 = u->b;
            int y = tg_node(&t, u->op, BRISK_F32, sh, &at, 1, &x);
            at.kind = (int)u->op;
            int ins[3] = {dy, x, y};
            int g = tg_node(&t, BRISK_OP_ACT_GRAD, BRISK_F32, sh, &at, 3, ins);
            brisk_error err_s = {0}, *err = &err_s;
            REQUIRE_OK(tg_run(be[bi], &t, y, err), err);
            REQUIRE_OK(tg_run(be[bi], &t, g, err), err);
            double *ry = malloc(sizeof(double) * (size_t)len), *rg = malloc(sizeof(double) * (size_t)len);
            int bad = 0;
            for (int64_t i = 0; i < len; i++) {
                double xv = tg_f(&t, x)[i];
                ry[i] = ref_f(u, xv);
                rg[i] = tg_f(&t, dy)[i] * ref_df(u, xv, tg_f(&t, y)[i]);
                float got = tg_f(&t, y)[i];
                /* ELU is PyTorch's (e^x - 1) alpha, not expm1: within an ulp of alpha near 0 */
                double abs_tol = u->op == BRISK_OP_ELU ? 1.2e-7 * u->a : 0;
                if (fabs(ry[i]) > 1e-3 && isfinite(ry[i]) && !(fabs(got - ry[i]) <= 3e-6 * fabs(ry[i]) + abs_tol) &&
                    bad++ < 3)
                    fprintf(stderr, "  %s(%.9g) = %.9g, want %.9g\n", brisk_op_name(u->op), xv, got, ry[i]);
            }
            CHECKF(bad == 0, "%s a=%g: %d values off", brisk_op_name(u->op), (double)u->a, bad);
            CHECKF(tg_rel_err(tg_f(&t, y), ry, len) <= 1e-5, "%s a=%g: forward rel err %.3g", brisk_op_name(u->op),
                   (double)u->a, tg_rel_err(tg_f(&t, y), ry, len));
            CHECKF(tg_rel_err(tg_f(&t, g), rg, len) <= 1e-5, "%s a=%g: gradient rel err %.3g", brisk_op_name(u->op),
                   (double)u->a, tg_rel_err(tg_f(&t, g), rg, len));
            for (int o = 0; o < 2; o++) {
                float *got = tg_f(&t, o ? g : y);
                if (!bi) {
                    first[o] = malloc(sizeof(float) * (size_t)len);
                    memcpy(first[o], got, sizeof(float) * (size_t)len);
                } else {
                    CHECKF(memcmp(first[o], got, sizeof(float) * (size_t)len) == 0, "%s a=%g: %s on %d threads differs "
                           "from 1 thread", brisk_op_name(u->op), (double)u->a, o ? "gradient" : "forward", bi + 1);
                }
            }
            /* in place: out == x gives the same bits */
            REQUIRE_OK(be[bi]->run_node(be[bi], &t.g, y, (const void *[]){tg_f(&t, x)}, tg_f(&t, x), NULL, err), err);
            CHECKF(memcmp(tg_f(&t, x), tg_f(&t, y), sizeof(float) * (size_t)len) == 0, "%s in place",
                   brisk_op_name(u->op));
            free(ry), free(rg);
            tg_free(&t);
        }
        free(first[0]), free(first[1]);
    }
}

static void test_nan(void) {
    for (size_t k = 0; k < sizeof ucases / sizeof ucases[0]; k++) {
        const ucase *u = &ucases[k];
        tgraph t;
        tg_init(&t);
        int x = tg_input(&t, BRISK_F32, brisk_shape1(3));
        memcpy(tg_f(&t, x), (float[]){NAN, 1.0f, -NAN}, 12);
        brisk_attr at = tg_attr0();
        at.f0 = u->a, at.f1 = u->b;
        int y = tg_node(&t, u->op, BRISK_F32, brisk_shape1(3), &at, 1, &x);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be[1], &t, y, err), err);
        int pow0 = u->op == BRISK_OP_POW && u->a == 0; /* NaN^0 = 1, as torch */
        CHECKF(pow0 ? tg_f(&t, y)[0] == 1.0f : isnan(tg_f(&t, y)[0]) && isnan(tg_f(&t, y)[2]), "%s a=%g of NaN: %g",
               brisk_op_name(u->op), (double)u->a, (double)tg_f(&t, y)[0]);
        tg_free(&t);
    }
}

/* MINIMUM, MAXIMUM, POW_XY and each input's BINARY_GRAD over broadcast shapes */
static void test_binary(void) {
    const brisk_op ops[3] = {BRISK_OP_MINIMUM, BRISK_OP_MAXIMUM, BRISK_OP_POW_XY};
    const brisk_shape cases[][3] = {
        {{1, {70001}}, {1, {70001}}, {1, {70001}}},
        {{2, {300, 257}}, {1, {257}}, {2, {300, 257}}},
        {{3, {4, 1, 6}}, {2, {3, 1}}, {3, {4, 3, 6}}},
        {{2, {1, 257}}, {2, {300, 1}}, {2, {300, 257}}},
    };
    for (int o = 0; o < 3; o++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            float *first[3] = {NULL, NULL, NULL};
            for (int bi = 0; bi < 3; bi++) {
                tgraph t;
                tg_init(&t);
                tg_rng_state = 0x777 + c * 3 + (uint64_t)o;
                brisk_shape xs = cases[c][0], ys = cases[c][1], os = cases[c][2];
                int64_t n = brisk_shape_numel(&os);
                int x = tg_input(&t, BRISK_F32, xs), y = tg_input(&t, BRISK_F32, ys), dy = tg_input(&t, BRISK_F32, os);
                if (ops[o] == BRISK_OP_POW_XY)
                    for (int64_t i = 0; i < brisk_shape_numel(&xs); i++) tg_f(&t, x)[i] = tg_randf(0.0f, 3.0f);
                else /* ties on purpose: both inputs from a few values */
                    for (int k = 0; k < 2; k++)
                        for (int64_t i = 0; i < brisk_shape_numel(k ? &ys : &xs); i++)
                            tg_f(&t, k ? y : x)[i] = (float)(int)tg_randf(-3.0f, 3.0f);
                int ins[2] = {x, y};
                int out = tg_node(&t, ops[o], BRISK_F32, os, NULL, 2, ins);
                int g3[3] = {dy, x, y}, gn[2];
                for (int w = 0; w < 2; w++) {
                    brisk_attr at = tg_attr0();
                    at.kind = (int)ops[o], at.i0 = w;
                    gn[w] = tg_node(&t, BRISK_OP_BINARY_GRAD, BRISK_F32, os, &at, 3, g3);
                }
                brisk_error err_s = {0}, *err = &err_s;
                int nodes[3] = {out, gn[0], gn[1]};
                for (int k = 0; k < 3; k++) REQUIRE_OK(tg_run(be[bi], &t, nodes[k], err), err);
                double *ref[3];
                for (int k = 0; k < 3; k++) ref[k] = malloc(sizeof(double) * (size_t)n);
                int64_t idx[6];
                for (int64_t i = 0; i < n; i++) {
                    tg_unflatten(&os, i, idx);
                    double a = tg_f(&t, x)[tg_bcast_index(&xs, &os, idx)], b = tg_f(&t, y)[tg_bcast_index(&ys, &os, idx)];
                    double d = tg_f(&t, dy)[i];
                    if (ops[o] == BRISK_OP_POW_XY) {
                        ref[0][i] = pow(a, b);
                        ref[1][i] = b == 0 ? 0 : d * b * pow(a, b - 1);
                        ref[2][i] = a == 0 && b >= 0 ? 0 : d * pow(a, b) * log(a);
                    } else {
                        int mx = ops[o] == BRISK_OP_MAXIMUM;
                        ref[0][i] = mx ? fmax(a, b) : fmin(a, b);
                        ref[1][i] = a == b ? d / 2 : (mx ? a > b : a < b) ? d : 0;
                        ref[2][i] = a == b ? d / 2 : (mx ? b > a : b < a) ? d : 0;
                    }
                }
                for (int k = 0; k < 3; k++) {
                    float *got = tg_f(&t, nodes[k]);
                    double e = tg_rel_err(got, ref[k], n);
                    CHECKF(e <= 2e-6, "%s case %zu output %d, %d threads: rel err %.3g", brisk_op_name(ops[o]), c, k,
                           bi + 1, e);
                    if (!bi) {
                        first[k] = malloc(sizeof(float) * (size_t)n);
                        memcpy(first[k], got, sizeof(float) * (size_t)n);
                    } else {
                        CHECKF(memcmp(first[k], got, sizeof(float) * (size_t)n) == 0, "%s case %zu output %d: %d threads "
                               "differ from 1", brisk_op_name(ops[o]), c, k, bi + 1);
                    }
                    free(ref[k]);
                }
                tg_free(&t);
            }
            for (int k = 0; k < 3; k++) free(first[k]);
        }
}

/* ---- fused vs unfused: x [96, 40] -> linear 64 -> act -> linear 48 -> act -> linear 8 -> MSE, one step */

static int train_mlp(brisk_op act, int threads, int fuse, float *loss, float **grads, size_t *bytes, char *fusions,
                     size_t fn) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(96, 40)), t = brisk_input(g, "t", BRISK_F32, brisk_shape2(96, 8));
    int w1 = brisk_param(g, "w1", brisk_shape2(64, 40), BRISK_INIT_UNIFORM, 0.3f, 1);
    int b1 = brisk_param(g, "b1", brisk_shape1(64), BRISK_INIT_UNIFORM, 0.3f, 0);
    int w2 = brisk_param(g, "w2", brisk_shape2(48, 64), BRISK_INIT_UNIFORM, 0.3f, 1);
    int b2 = brisk_param(g, "b2", brisk_shape1(48), BRISK_INIT_UNIFORM, 0.3f, 0);
    int w3 = brisk_param(g, "w3", brisk_shape2(8, 48), BRISK_INIT_UNIFORM, 0.3f, 1);
    int b3 = brisk_param(g, "b3", brisk_shape1(8), BRISK_INIT_UNIFORM, 0.3f, 0);
    int h = x, ws[2] = {w1, w2}, bs[2] = {b1, b2};
    for (int k = 0; k < 2; k++) {
        h = brisk_bias_add(g, brisk_matmul(g, h, ws[k], 0, 1), bs[k]); /* weights [out, in], as nn's */
        h = act == BRISK_OP_LEAKY_RELU ? brisk_leaky_relu(g, h, 0.1f) : act == BRISK_OP_ELU ? brisk_elu(g, h, 0.8f)
                                                                       : brisk_softplus(g, h, 1.5f, 4.0f);
    }
    int l = brisk_mse(g, brisk_bias_add(g, brisk_matmul(g, h, w3, 0, 1), b3), t);
    brisk_error e;
    brisk_plan plan;
    brisk_backend *b = brisk_backend_cpu_new(threads);
    brisk_backend_cpu_set_fuse(b, fuse);
    brisk_exec *ex = NULL;
    int rc = -1;
    g->grads_in_place = 1; /* the trainer's plan at one micro-batch a step */
    if (!brisk_graph_error(g, &e) && !brisk_backward(g, l, &e) && !brisk_plan_build(g, &plan, &e) &&
        !brisk_exec_create(g, &plan, b, &ex, &e) && !brisk_exec_init_params(ex, 3, &e)) {
        for (int i = 0; i < 2; i++) {
            int64_t n = brisk_shape_numel(&g->inputs[i].shape);
            float *v = malloc(sizeof(float) * (size_t)n);
            tg_rng_state = 99 + (uint64_t)i;
            for (int64_t k = 0; k < n; k++) v[k] = tg_randf(-2, 2);
            brisk_exec_set_input(ex, i, v, &e);
            free(v);
        }
        if (!brisk_exec_run(ex, BRISK_RUN_TRAIN, &e) && !brisk_exec_read(ex, l, loss, &e)) {
            *bytes = (size_t)g->n_param_floats * sizeof(float);
            *grads = malloc(*bytes);
            memcpy(*grads, ex->grads, *bytes);
            brisk_backend_cpu_fusions(b, fusions, fn);
            rc = 0;
        }
    }
    if (rc) fprintf(stderr, "train_mlp: %s\n", e.msg);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    b->destroy(b);
    brisk_graph_free(g);
    return rc;
}

static void test_fused_epilogues(void) {
    const brisk_op acts[3] = {BRISK_OP_LEAKY_RELU, BRISK_OP_ELU, BRISK_OP_SOFTPLUS};
    for (int a = 0; a < 3; a++) {
        float l0, l1;
        float *g0 = NULL, *g1 = NULL;
        size_t n0, n1;
        char f0[256], f1[256];
        REQUIRE(train_mlp(acts[a], 1, 0, &l0, &g0, &n0, f0, sizeof f0) == 0);
        for (int threads = 1; threads <= 3; threads += 2) {
            REQUIRE(train_mlp(acts[a], threads, 1, &l1, &g1, &n1, f1, sizeof f1) == 0);
            CHECKF(strstr(f1, "GEMM+bias+activation") && strstr(f1, "act-grad"), "%s: fusions %s", brisk_op_name(acts[a]), f1);
            if (threads == 1) fprintf(stderr, "%s: fusions %s\n", brisk_op_name(acts[a]), f1);
            CHECKF(l0 == l1 && n0 == n1 && memcmp(g0, g1, n0) == 0, "%s, %d threads: fused loss %.9g, unfused %.9g, "
                   "gradients %s", brisk_op_name(acts[a]), threads, (double)l1, (double)l0,
                   memcmp(g0, g1, n0) ? "differ" : "equal");
            free(g1);
        }
        free(g0);
    }
}

int main(void) {
    for (int i = 0; i < 3; i++) be[i] = brisk_backend_cpu_new(i + 1);
    t_case c[] = {T(test_unary_and_grad), T(test_nan), T(test_binary), T(test_fused_epilogues)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    for (int i = 0; i < 3; i++) be[i]->destroy(be[i]);
    return r;
}
