/* Elementwise ops on the CPU backend against float64: broadcasting binary ops
 * (equal shapes, row and column vectors, scalars, interleaved size-1 dims, sizes
 * that run in parallel), SCALE, every activation and ACT_GRAD form, BIAS_ADD,
 * GRAD_ACCUM's first/later micro-batch rule, NaN propagation, and the output
 * guards. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static int64_t shape_of(const int64_t *d, int nd, brisk_shape *s) {
    *s = brisk_shape_make(nd, d);
    return brisk_shape_numel(s);
}

static double ref_binary(brisk_op op, double a, double b) {
    switch (op) {
    case BRISK_OP_ADD: return a + b;
    case BRISK_OP_SUB: return a - b;
    case BRISK_OP_MUL: return a * b;
    default: return a / b;
    }
}

typedef struct { int ox, oy, on; int64_t x[4], y[4], o[4]; } bcase;

static void test_binary_broadcast(void) {
    const bcase cs[] = {
        {1, 1, 1, {37}, {37}, {37}},
        {2, 1, 2, {5, 37}, {37}, {5, 37}},
        {2, 2, 2, {5, 1}, {5, 37}, {5, 37}},
        {3, 2, 3, {4, 1, 6}, {3, 1}, {4, 3, 6}},
        {2, 0, 2, {3, 5}, {0}, {3, 5}},              /* y a 0-d scalar */
        {1, 2, 2, {1}, {7, 9}, {7, 9}},              /* x a [1] */
        {3, 4, 4, {3, 1, 5}, {2, 1, 4, 1}, {2, 3, 4, 5}},
        {1, 1, 1, {70001}, {70001}, {70001}},        /* parallel, odd length */
        {2, 1, 2, {300, 257}, {257}, {300, 257}},    /* parallel rows */
        {2, 2, 2, {300, 257}, {300, 1}, {300, 257}},
        {2, 2, 2, {1, 257}, {300, 1}, {300, 257}},   /* outer product */
    };
    const brisk_op ops[] = {BRISK_OP_ADD, BRISK_OP_SUB, BRISK_OP_MUL, BRISK_OP_DIV};
    for (int bi = 0; bi < 2; bi++)
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
            for (int k = 0; k < 4; k++) {
                tgraph t;
                tg_init(&t);
                brisk_shape xs, ys, os;
                shape_of(cs[c].x, cs[c].ox, &xs);
                shape_of(cs[c].y, cs[c].oy, &ys);
                int64_t n = shape_of(cs[c].o, cs[c].on, &os);
                int x = tg_input(&t, BRISK_F32, xs), y = tg_input(&t, BRISK_F32, ys);
                if (ops[k] == BRISK_OP_DIV) /* keep divisors away from 0 */
                    for (int64_t i = 0; i < brisk_shape_numel(&ys); i++) tg_f(&t, y)[i] = (i % 2 ? -1 : 1) * tg_randf(0.5f, 2.0f);
                int ins[2] = {x, y};
                int o = tg_node(&t, ops[k], BRISK_F32, os, NULL, 2, ins);
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(bi ? be2 : be1, &t, o, err), err);
                double *ref = malloc((size_t)n * sizeof(double));
                int64_t idx[6];
                for (int64_t i = 0; i < n; i++) {
                    tg_unflatten(&os, i, idx);
                    ref[i] = ref_binary(ops[k], tg_f(&t, x)[tg_bcast_index(&xs, &os, idx)],
                                        tg_f(&t, y)[tg_bcast_index(&ys, &os, idx)]);
                }
                double e = tg_rel_err(tg_f(&t, o), ref, n);
                CHECKF(e <= 1e-6, "case %zu op %d threads %d: rel err %.3g", c, (int)ops[k], bi + 1, e);
                free(ref);
                tg_free(&t);
            }
}

static void test_binary_shape_error(void) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(3, 4)), y = tg_input(&t, BRISK_F32, brisk_shape1(5));
    int ins[2] = {x, y};
    int o = tg_node(&t, BRISK_OP_ADD, BRISK_F32, brisk_shape2(3, 4), NULL, 2, ins);
    brisk_error err = {0};
    CHECK(tg_run(be1, &t, o, &err) == BRISK_ERR_SHAPE);
    tg_free(&t);
}

static double phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static double ref_act(brisk_op op, int kind, double x, double a, double b) {
    switch (op) {
    case BRISK_OP_SCALE: return a * x + b;
    case BRISK_OP_RELU: return x > 0 ? x : 0;
    case BRISK_OP_GELU:
        if (kind == BRISK_GELU_TANH) /* 0.5 x (1 + tanh u) without its cancellation for x << 0 */
            return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        return x * phi(x);
    case BRISK_OP_SILU: return x / (1 + exp(-x));
    case BRISK_OP_TANH: return tanh(x);
    default: return 1 / (1 + exp(-x));
    }
}

static double ref_dact(int fwd, int form, double x) {
    switch (fwd) {
    case BRISK_OP_RELU: return x > 0 ? 1 : 0;
    case BRISK_OP_GELU:
        if (form == BRISK_GELU_TANH) {
            double k = sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), s = 1 / (1 + exp(-2 * u));
            return s + 2 * x * s * (1 - s) * k * (1 + 3 * 0.044715 * x * x);
        }
        return phi(x) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    case BRISK_OP_SILU: {
        double s = 1 / (1 + exp(-x));
        return s * (1 + x * (1 - s));
    }
    case BRISK_OP_TANH: { double th = tanh(x); return 1 - th * th; }
    default: { double s = 1 / (1 + exp(-x)); return s * (1 - s); }
    }
}

typedef struct { brisk_op op; int kind; } act;
static const act acts[] = {
    {BRISK_OP_RELU, 0}, {BRISK_OP_GELU, BRISK_GELU_ERF}, {BRISK_OP_GELU, BRISK_GELU_TANH},
    {BRISK_OP_SILU, 0}, {BRISK_OP_TANH, 0}, {BRISK_OP_SIGMOID, 0}, {BRISK_OP_SCALE, 0},
};

static void test_activations(void) {
    const int64_t sizes[] = {1, 17, 4096, 70001};
    for (int bi = 0; bi < 2; bi++)
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                tgraph t;
                tg_init(&t);
                int64_t n = sizes[s];
                int x = tg_input(&t, BRISK_F32, brisk_shape1(n));
                for (int64_t i = 0; i < n; i++) tg_f(&t, x)[i] = tg_randf(-9.0f, 9.0f);
                brisk_attr at = tg_attr0();
                at.kind = acts[a].kind;
                at.f0 = 1.75f;
                at.f1 = -0.5f;
                int o = tg_node(&t, acts[a].op, BRISK_F32, brisk_shape1(n), &at, 1, &x);
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(bi ? be2 : be1, &t, o, err), err);
                double *ref = malloc((size_t)n * sizeof(double));
                for (int64_t i = 0; i < n; i++) ref[i] = ref_act(acts[a].op, acts[a].kind, tg_f(&t, x)[i], 1.75, -0.5);
                double e = tg_rel_err(tg_f(&t, o), ref, n);
                CHECKF(e <= 1e-5, "op %d kind %d n %lld: rel err %.3g", (int)acts[a].op, acts[a].kind, (long long)n, e);
                /* elementwise too, where the value is not tiny */
                for (int64_t i = 0; i < n; i++)
                    if (fabs(ref[i]) > 1e-3)
                        CHECKF(fabs(tg_f(&t, o)[i] - ref[i]) <= 2e-6 * fabs(ref[i]) + 1e-7,
                               "op %d x=%.9g: %.9g vs %.9g", (int)acts[a].op, tg_f(&t, x)[i], tg_f(&t, o)[i], ref[i]);
                free(ref);
                tg_free(&t);
            }
}

static void test_activation_special_values(void) {
    const float xs[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 100.0f, -100.0f, 1e-30f, -1e-30f};
    const int n = sizeof xs / sizeof xs[0];
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        tgraph t;
        tg_init(&t);
        int x = tg_input(&t, BRISK_F32, brisk_shape1(n));
        memcpy(tg_f(&t, x), xs, sizeof xs);
        brisk_attr at = tg_attr0();
        at.kind = acts[a].kind;
        at.f0 = 1.0f;
        int o = tg_node(&t, acts[a].op, BRISK_F32, brisk_shape1(n), &at, 1, &x);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be1, &t, o, err), err);
        const float *y = tg_f(&t, o);
        CHECKF(isnan(y[0]), "op %d: NaN in, %g out", (int)acts[a].op, y[0]);
        for (int i = 3; i < n; i++) {
            double r = ref_act(acts[a].op, acts[a].kind, xs[i], 1.0, 0.0);
            CHECKF(fabs(y[i] - r) <= 1e-6 * fabs(r) + 1e-30, "op %d kind %d x=%g: %.9g vs %.9g", (int)acts[a].op,
                   acts[a].kind, xs[i], y[i], r);
        }
        if (acts[a].op == BRISK_OP_TANH || acts[a].op == BRISK_OP_SIGMOID) {
            CHECK(y[1] == 1.0f);
            CHECK(y[2] == (acts[a].op == BRISK_OP_TANH ? -1.0f : 0.0f));
        }
        tg_free(&t);
    }
}

static void test_act_grad(void) {
    const int64_t sizes[] = {19, 70001};
    for (int bi = 0; bi < 2; bi++)
        for (size_t a = 0; a + 1 < sizeof acts / sizeof acts[0]; a++) /* all but SCALE */
            for (size_t s = 0; s < 2; s++) {
                tgraph t;
                tg_init(&t);
                int64_t n = sizes[s];
                brisk_shape sh = brisk_shape2(1, n);
                int dy = tg_input(&t, BRISK_F32, sh), x = tg_input(&t, BRISK_F32, sh), y = tg_input(&t, BRISK_F32, sh);
                for (int64_t i = 0; i < n; i++) {
                    float v = tg_randf(-7.0f, 7.0f);
                    if (acts[a].op == BRISK_OP_RELU && fabsf(v) < 1e-3f) v = 0.5f;
                    tg_f(&t, x)[i] = v;
                    tg_f(&t, y)[i] = (float)ref_act(acts[a].op, acts[a].kind, v, 1, 0);
                }
                brisk_attr at = tg_attr0();
                at.kind = (int)acts[a].op;
                at.i1 = acts[a].kind;
                int ins[3] = {dy, x, y};
                int o = tg_node(&t, BRISK_OP_ACT_GRAD, BRISK_F32, sh, &at, 3, ins);
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(bi ? be2 : be1, &t, o, err), err);
                double *ref = malloc((size_t)n * sizeof(double));
                for (int64_t i = 0; i < n; i++) {
                    double xv = tg_f(&t, x)[i];
                    double d = ref_dact((int)acts[a].op, acts[a].kind, xv);
                    if (acts[a].op == BRISK_OP_TANH) d = 1.0 - (double)tg_f(&t, y)[i] * tg_f(&t, y)[i];
                    if (acts[a].op == BRISK_OP_SIGMOID) d = (double)tg_f(&t, y)[i] * (1.0 - tg_f(&t, y)[i]);
                    ref[i] = tg_f(&t, dy)[i] * d;
                }
                double e = tg_rel_err(tg_f(&t, o), ref, n);
                CHECKF(e <= 1e-5, "act_grad of op %d form %d n %lld: rel err %.3g", (int)acts[a].op, acts[a].kind,
                       (long long)n, e);
                free(ref);
                tg_free(&t);
            }
    /* an unknown forward op is an error, not a guess */
    tgraph t;
    tg_init(&t);
    int v = tg_input(&t, BRISK_F32, brisk_shape1(4));
    brisk_attr at = tg_attr0();
    at.kind = BRISK_OP_MATMUL;
    int ins[3] = {v, v, v};
    int o = tg_node(&t, BRISK_OP_ACT_GRAD, BRISK_F32, brisk_shape1(4), &at, 3, ins);
    brisk_error err = {0};
    CHECK(tg_run(be1, &t, o, &err) == BRISK_ERR_INVALID);
    tg_free(&t);
}

static void test_bias_add(void) {
    const int64_t shapes[][3] = {{1, 1, 1}, {2, 33, 47}, {1, 600, 257}};
    for (int bi = 0; bi < 2; bi++)
        for (int s = 0; s < 3; s++) {
            tgraph t;
            tg_init(&t);
            brisk_shape sh = brisk_shape3(shapes[s][0], shapes[s][1], shapes[s][2]);
            int64_t N = shapes[s][2], n = brisk_shape_numel(&sh);
            int x = tg_input(&t, BRISK_F32, sh), b = tg_input(&t, BRISK_F32, brisk_shape1(N));
            int ins[2] = {x, b};
            int o = tg_node(&t, BRISK_OP_BIAS_ADD, BRISK_F32, sh, NULL, 2, ins);
            brisk_error err_s = {0}, *err = &err_s;
            REQUIRE_OK(tg_run(bi ? be2 : be1, &t, o, err), err);
            double *ref = malloc((size_t)n * sizeof(double));
            for (int64_t i = 0; i < n; i++) ref[i] = (double)tg_f(&t, x)[i] + tg_f(&t, b)[i % N];
            CHECK_REL(tg_f(&t, o), ref, n, 1e-6);
            free(ref);
            tg_free(&t);
        }
}

static void test_grad_accum(void) {
    tgraph t;
    tg_init(&t);
    int64_t n = 40003;
    int g1 = tg_input(&t, BRISK_F32, brisk_shape1(n)), g2 = tg_input(&t, BRISK_F32, brisk_shape1(n));
    int o = tg_node(&t, BRISK_OP_GRAD_ACCUM, BRISK_F32, brisk_shape1(n), NULL, 1, &g1);
    brisk_step_state st = tg_state(1);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run_st(be2, &t, o, &st, err), err);
    CHECK(memcmp(tg_f(&t, o), tg_f(&t, g1), (size_t)n * 4) == 0);
    st.first_micro = 0;
    t.nodes[o].in[0] = g2;
    REQUIRE_OK(tg_run_st(be2, &t, o, &st, err), err);
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) ref[i] = (double)tg_f(&t, g1)[i] + tg_f(&t, g2)[i];
    CHECK_REL(tg_f(&t, o), ref, n, 1e-7);
    free(ref);
    tg_free(&t);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_binary_broadcast), T(test_binary_shape_error), T(test_activations),
                  T(test_activation_special_values), T(test_act_grad), T(test_bias_add), T(test_grad_accum)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
