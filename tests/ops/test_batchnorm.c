/* BATCHNORM (and through it BATCHNORM_GRAD_GB, BATCHNORM_GRAD_X): training forward vs
 * float64 with batch statistics and gradients of x, gamma, beta and the residual vs
 * finite differences, with and without the fused ReLU and residual add; eval forward and
 * gradient with the running statistics; the running buffers after several steps vs
 * PyTorch's update rule; buffers taking no gradient, no weight decay and not counting as
 * parameters; the builder's errors. */
#include "brisk/optim.h"
#include "ops/opcheck.h"

typedef struct bn_case {
    brisk_shape s;
    int relu, residual;
    float eps, momentum;
    int nhwc; /* channels last: brisk_batchnorm_nhwc */
} bn_case;

static int64_t bn_channels(const bn_case *k) { return k->s.d[k->nhwc ? k->s.ndim - 1 : 1]; }

/* The channel of element o. */
static int64_t bn_channel(const bn_case *k, int64_t o) {
    int64_t C = bn_channels(k), S = brisk_shape_numel(&k->s) / (k->s.d[0] * C);
    return k->nhwc ? o % C : o / S % C;
}

/* ref = bn(x) with the given per-channel mean/var (+ res), ReLU'd when relu. */
static void bn_reference(const bn_case *k, const float *x, const float *gm, const float *bt, const float *res,
                         const double *mean, const double *var, double *ref) {
    for (int64_t o = 0; o < brisk_shape_numel(&k->s); o++) {
        int64_t c = bn_channel(k, o);
        double v = (x[o] - mean[c]) / sqrt(var[c] + k->eps) * gm[c] + bt[c] + (res ? res[o] : 0);
        ref[o] = k->relu && v < 0 ? 0 : v;
    }
}

static void batch_stats(const bn_case *k, const float *x, double *mean, double *var) {
    int64_t n = brisk_shape_numel(&k->s), C = bn_channels(k);
    for (int64_t c = 0; c < C; c++) mean[c] = var[c] = 0;
    for (int64_t o = 0; o < n; o++) mean[bn_channel(k, o)] += x[o];
    for (int64_t c = 0; c < C; c++) mean[c] /= (double)(n / C);
    for (int64_t o = 0; o < n; o++) var[bn_channel(k, o)] += pow(x[o] - mean[bn_channel(k, o)], 2);
    for (int64_t c = 0; c < C; c++) var[c] /= (double)(n / C);
}

/* Builds bn over params x, gamma, beta (, residual) and buffers; returns the bn node. */
static int build_bn(oc *c, const bn_case *k, int *x, int *gm, int *bt, int *res, int *rm, int *rv) {
    int64_t C = bn_channels(k);
    *x = oc_param(c, "x", k->s);
    *gm = oc_param_avoid(c, "gamma", brisk_shape1(C), 0.5, 1.5, 0);
    *bt = oc_param(c, "beta", brisk_shape1(C));
    *res = k->residual ? oc_param(c, "residual", k->s) : -1;
    *rm = brisk_buffer(c->g, "running_mean", brisk_shape1(C), BRISK_INIT_ZEROS);
    *rv = brisk_buffer(c->g, "running_var", brisk_shape1(C), BRISK_INIT_ONES);
    return (k->nhwc ? brisk_batchnorm_nhwc : brisk_batchnorm)(c->g, *x, *gm, *bt, *rm, *rv, *res, k->eps, k->momentum,
                                                             k->relu);
}

/* Resamples x until every pre-ReLU value is at least `margin` from 0. A finite difference
 * whose step carries an output across the kink measures neither side's slope, and here no
 * step is local: gamma and beta move every output of their channel, x its channel's
 * statistics. The margin must exceed the largest move of one step (about 3 fd_eps: the
 * step times gamma invstd for x, times |xhat| for gamma). Returns the resamples left. */
static int clear_of_kink(oc *c, const bn_case *k, int x, int gm, int bt, int res, double margin) {
    int64_t n = brisk_shape_numel(&k->s), C = bn_channels(k);
    float *xv = (float *)oc_val(c, x);
    double *v = malloc(sizeof(double) * (size_t)n), *mean = malloc(sizeof(double) * (size_t)C),
           *var = malloc(sizeof(double) * (size_t)C);
    bn_case lin = *k;
    lin.relu = 0;
    int budget = 1000, moved = 1;
    while (moved && budget > 0) {
        batch_stats(k, xv, mean, var);
        bn_reference(&lin, xv, oc_val(c, gm), oc_val(c, bt), res >= 0 ? oc_val(c, res) : NULL, mean, var, v);
        moved = 0;
        for (int64_t o = 0; o < n && budget > 0; o++)
            if (fabs(v[o]) < margin) xv[o] = (float)oc_uniform(c, -1, 1), moved = 1, budget--;
    }
    free(v), free(mean), free(var);
    return budget;
}

static double check_train_seed(bn_case k, const char *what, uint64_t seed) {
    oc c;
    oc_init(&c, seed);
    /* as layernorm, moving one x moves its channel's statistics, which a wide step keeps
     * above f32 noise; with the ReLU the inputs keep clear of its kink instead */
    c.fd_eps = 1e-2;
    c.max_fd = 32;
    int x, gm, bt, res, rm, rv;
    int out = build_bn(&c, &k, &x, &gm, &bt, &res, &rm, &rv);
    if (k.relu) CHECKF(clear_of_kink(&c, &k, x, gm, bt, res, 5 * c.fd_eps) > 0, "%s: no x clear of the kink", what);
    int64_t n = brisk_shape_numel(&k.s), C = bn_channels(&k);
    double *ref = malloc(sizeof(double) * (size_t)n), *mean = malloc(sizeof(double) * (size_t)C),
           *var = malloc(sizeof(double) * (size_t)C);
    batch_stats(&k, oc_val(&c, x), mean, var);
    bn_reference(&k, oc_val(&c, x), oc_val(&c, gm), oc_val(&c, bt), res >= 0 ? oc_val(&c, res) : NULL, mean, var, ref);
    oc_check(&c, out, ref, what);
    double worst = c.fd_worst;
    free(ref), free(mean), free(var);
    oc_free(&c);
    return worst;
}

/* Over many seeds, so that the check holds for the inputs, not for lucky ones (with
 * -DBN_SEEDS=500 every case stayed under 0.44 of the tolerance, all but [N, C] under 0.05). */
#ifndef BN_SEEDS
#define BN_SEEDS 16
#endif

static void check_train(bn_case k, const char *what) {
    double worst = 0;
    for (uint64_t seed = 1; seed <= BN_SEEDS; seed++) {
        char name[96];
        snprintf(name, sizeof name, "%s, seed %llu", what, (unsigned long long)seed);
        double w = check_train_seed(k, name, seed);
        if (w > worst) worst = w;
    }
    fprintf(stderr, "  %s: worst gradient error over %d seeds: %.3f of the tolerance\n", what, BN_SEEDS, worst);
}

static void test_train(void) {
    check_train((bn_case){brisk_shape4(3, 4, 3, 5), 0, 0, 1e-5f, 0.1f, 0}, "batchnorm2d");
    check_train((bn_case){brisk_shape2(6, 5), 0, 0, 1e-3f, 0.1f, 0}, "batchnorm1d [N, C]");
}

static void test_train_relu_residual(void) {
    check_train((bn_case){brisk_shape4(2, 3, 4, 4), 1, 0, 1e-5f, 0.1f, 0}, "batchnorm + relu");
    check_train((bn_case){brisk_shape4(2, 3, 4, 3), 0, 1, 1e-5f, 0.1f, 0}, "batchnorm + residual");
    check_train((bn_case){brisk_shape4(3, 2, 3, 3), 1, 1, 1e-5f, 0.1f, 0}, "batchnorm + residual + relu");
}

/* Channels last: the same statistics over [N H W, C] */
static void test_train_nhwc(void) {
    check_train((bn_case){brisk_shape4(3, 3, 5, 4), 0, 0, 1e-5f, 0.1f, 1}, "batchnorm nhwc");
    check_train((bn_case){brisk_shape4(3, 3, 3, 2), 1, 1, 1e-5f, 0.1f, 1}, "batchnorm nhwc + residual + relu");
}

static float *param_values(oc *c, int node) {
    const brisk_graph *g = c->g;
    for (int k = 0; k < g->n_params; k++)
        if (g->params[k].node == node) {
            float *v = malloc(sizeof(float) * (size_t)g->params[k].numel);
            brisk_error e;
            c->be->download(c->be, v, (float *)c->ex->params + g->params[k].offset,
                            sizeof(float) * (size_t)g->params[k].numel, &e);
            return v;
        }
    return NULL;
}

/* Eval: the running statistics normalise and the gradient is the affine map's. */
static void test_eval(void) {
    bn_case k = {brisk_shape4(2, 3, 3, 4), 1, 1, 1e-5f, 0.3f, 0};
    oc c;
    oc_init(&c, 7);
    int x, gm, bt, res, rm, rv;
    int out = build_bn(&c, &k, &x, &gm, &bt, &res, &rm, &rv);
    REQUIRE(oc_build(&c, out) == 0); /* one training step moves the running statistics */
    c.ex->step.training = 0;
    brisk_error e;
    REQUIRE_OK(brisk_exec_run(c.ex, BRISK_RUN_TRAIN, &e), &e);
    float *vm = param_values(&c, rm), *vv = param_values(&c, rv), *got = oc_read(&c, out);
    int64_t n = brisk_shape_numel(&k.s);
    double mean[3], var[3], *ref = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < 3; i++) {
        mean[i] = vm[i], var[i] = vv[i];
        CHECKF(vm[i] != 0.0f && vv[i] != 1.0f, "running statistics of channel %d did not move", i);
    }
    bn_reference(&k, oc_val(&c, x), oc_val(&c, gm), oc_val(&c, bt), oc_val(&c, res), mean, var, ref);
    CHECK(oc_compare("batchnorm eval", got, ref, n, 1e-5) == 0);
    oc_check_grads(&c, "batchnorm eval");
    /* eval never moves the running statistics */
    float *vm2 = param_values(&c, rm);
    CHECK(memcmp(vm, vm2, 3 * sizeof(float)) == 0);
    free(vm), free(vv), free(vm2), free(got), free(ref);
    oc_free(&c);
}

/* Running statistics after several training steps vs PyTorch's rule (momentum toward the
 * batch mean and the unbiased variance); the buffers take no gradient and no weight decay,
 * while gamma does move; buffers are not counted as parameters. */
static void test_running_stats_and_buffers(void) {
    const int64_t N = 4, C = 3, H = 2, W = 3, n = N * C * H * W;
    const float momentum = 0.25f;
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(N, C, H, W));
    int gm = brisk_param(g, "bn.weight", brisk_shape1(C), BRISK_INIT_ONES, 0, 0);
    int bt = brisk_param(g, "bn.bias", brisk_shape1(C), BRISK_INIT_ZEROS, 0, 0);
    int rm = brisk_buffer(g, "bn.running_mean", brisk_shape1(C), BRISK_INIT_ZEROS);
    int rv = brisk_buffer(g, "bn.running_var", brisk_shape1(C), BRISK_INIT_ONES);
    int y = brisk_batchnorm(g, x, gm, bt, rm, rv, -1, 1e-5f, momentum, 1);
    int loss = brisk_sum(g, brisk_mul(g, y, y), 0xF, 0);
    brisk_error e;
    REQUIRE_OK(brisk_backward(g, loss, &e), &e);
    g->output = y;
    CHECK(g->params[2].buffer && g->params[3].buffer && !g->params[0].buffer);
    CHECK(g->params[2].grad_node == -1 && g->params[3].grad_node == -1 && g->params[0].grad_node >= 0);
    CHECK(!g->nodes[rm].requires_grad && !g->nodes[rv].requires_grad);
    brisk_plan plan;
    REQUIRE_OK(brisk_plan_build(g, &plan, &e), &e);
    brisk_backend *be = brisk_backend_cpu_new(2);
    brisk_exec *ex = NULL;
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &e), &e);
    REQUIRE_OK(brisk_exec_init_params(ex, 3, &e), &e);
    brisk_optim_spec spec;
    brisk_optim_spec_default(&spec);
    spec.weight_decay = 0.5f; /* decay_all by default: buffers must still be masked out */
    brisk_optimizer opt;
    REQUIRE_OK(brisk_optimizer_create(&opt, &spec, ex, &e), &e);
    double rmean[3] = {0, 0, 0}, rvar[3] = {1, 1, 1};
    float *xv = malloc(sizeof(float) * (size_t)n);
    uint64_t s = 99;
    for (int step = 0; step < 5; step++) {
        for (int64_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            xv[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 4.0 - 1.0 + (double)(i % C));
        }
        REQUIRE_OK(brisk_exec_set_input(ex, 0, xv, &e), &e);
        REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), &e);
        /* the buffers' update happens in the forward, before the optimizer */
        bn_case k = {brisk_shape4(N, C, H, W), 1, 0, 1e-5f, momentum, 0};
        double mean[3], var[3];
        batch_stats(&k, xv, mean, var);
        for (int c = 0; c < 3; c++) {
            rmean[c] = (1 - momentum) * rmean[c] + momentum * mean[c];
            rvar[c] = (1 - momentum) * rvar[c] + momentum * var[c] * (double)(N * H * W) / (double)(N * H * W - 1);
        }
        REQUIRE_OK(brisk_optimizer_step(&opt, step + 1, 0.1f, 1, &e), &e);
    }
    const float *p = ex->params, *gr = ex->grads;
    for (int c = 0; c < 3; c++) {
        CHECK_NEAR(p[g->params[2].offset + c], rmean[c], 1e-5 * (1 + fabs(rmean[c])));
        CHECK_NEAR(p[g->params[3].offset + c], rvar[c], 1e-5 * (1 + fabs(rvar[c])));
        CHECK(gr[g->params[2].offset + c] == 0.0f && gr[g->params[3].offset + c] == 0.0f);
        CHECK(p[g->params[0].offset + c] != 1.0f); /* gamma trained */
    }
    free(xv);
    brisk_optimizer_free(&opt);
    brisk_exec_free(ex);
    be->destroy(be);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
}

static void test_errors(void) {
    const char *want[] = {"not a buffer", "gamma", "momentum", "residual", "eps"};
    for (int t = 0; t < 5; t++) {
        brisk_graph *g = brisk_graph_new();
        int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(2, 3, 4, 4));
        int gm = brisk_param(g, "g", brisk_shape1(t == 1 ? 4 : 3), BRISK_INIT_ONES, 0, 0);
        int bt = brisk_param(g, "b", brisk_shape1(3), BRISK_INIT_ZEROS, 0, 0);
        int rm = t == 0 ? brisk_param(g, "rm", brisk_shape1(3), BRISK_INIT_ZEROS, 0, 0)
                        : brisk_buffer(g, "rm", brisk_shape1(3), BRISK_INIT_ZEROS);
        int rv = brisk_buffer(g, "rv", brisk_shape1(3), BRISK_INIT_ONES);
        int res = t == 3 ? brisk_input(g, "r", BRISK_F32, brisk_shape4(2, 3, 4, 5)) : -1;
        CHECK(brisk_batchnorm(g, x, gm, bt, rm, rv, res, t == 4 ? -1.0f : 1e-5f, t == 2 ? 1.5f : 0.1f, 0) == -1);
        brisk_error e;
        CHECKF(brisk_graph_error(g, &e) != BRISK_OK && strstr(e.msg, want[t]), "case %d: %s", t, e.msg);
        brisk_graph_free(g);
    }
    brisk_graph *g = brisk_graph_new();
    CHECK(brisk_buffer(g, "b", brisk_shape1(3), BRISK_INIT_NORMAL) == -1);
    brisk_graph_free(g);
    /* channels last: C is the last dim (gamma [3] does not fit [2, 4, 4, 5]); x must have two */
    for (int t = 0; t < 2; t++) {
        g = brisk_graph_new();
        int x = brisk_input(g, "x", BRISK_F32, t ? brisk_shape1(3) : brisk_shape4(2, 4, 4, 5));
        int gm = brisk_param(g, "g", brisk_shape1(3), BRISK_INIT_ONES, 0, 0);
        int bt = brisk_param(g, "b", brisk_shape1(3), BRISK_INIT_ZEROS, 0, 0);
        int rm = brisk_buffer(g, "rm", brisk_shape1(3), BRISK_INIT_ZEROS), rv = brisk_buffer(g, "rv", brisk_shape1(3), BRISK_INIT_ONES);
        CHECK(brisk_batchnorm_nhwc(g, x, gm, bt, rm, rv, -1, 1e-5f, 0.1f, 0) == -1);
        brisk_error e;
        CHECKF(brisk_graph_error(g, &e) != BRISK_OK && strstr(e.msg, t ? "channels last" : "gamma"), "nhwc case %d: %s",
               t, e.msg);
        brisk_graph_free(g);
    }
    /* training on one value per channel has no variance: a run-time error, not a NaN */
    oc c;
    oc_init(&c, 3);
    int x, gm, bt, res, rm, rv;
    bn_case k = {brisk_shape4(1, 2, 1, 1), 0, 0, 1e-5f, 0.1f, 0};
    int out = build_bn(&c, &k, &x, &gm, &bt, &res, &rm, &rv);
    CHECK(oc_build(&c, out) != 0);
    oc_free(&c);
}

TEST_MAIN(T(test_train), T(test_train_relu_residual), T(test_train_nhwc), T(test_eval), T(test_running_stats_and_buffers),
          T(test_errors))
