/* Sampling schedules: the visited timesteps, DDIM with eta 1 over all steps equal to DDPM
 * (the identity nn.h states), eta 0 drawing no noise, the x0-prediction rewrite giving the
 * same update, and the step graph computing a x + b eps + c z. */
#include <math.h>
#include <string.h>

#include "brisk/brisk.h"
#include "test.h"

static brisk_model_spec spec(int T, int x0) {
    brisk_model_spec m = {.type = BRISK_MODEL_DIFFUSION, .fine = 8, .coarse = 2, .time_embedding = 4, .n_hidden = 1,
                          .activation = BRISK_ACT_SILU, .noise_steps = T, .beta_start = 1e-4f, .beta_end = 0.02f,
                          .predict_x0 = x0};
    m.hidden[0] = 16;
    return m;
}

static void test_timesteps(void) {
    brisk_model_spec m = spec(50, 0);
    brisk_sample_schedule s;
    brisk_error err = {0};
    REQUIRE_OK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 10, 0.0f, &s, &err), &err);
    CHECK(s.steps == 10 && s.t[0] == 49 && s.t[9] == 0);
    for (int k = 1; k < 10; k++) CHECK(s.t[k] < s.t[k - 1]);
    CHECK(!s.stochastic); /* eta 0: no noise node */
    for (int t = 0; t < 50; t++) CHECK(s.c[t] == 0.0f);
    brisk_sample_schedule_free(&s);
    REQUIRE_OK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 1, 0.5f, &s, &err), &err);
    CHECK(s.steps == 1 && s.t[0] == 49);
    brisk_sample_schedule_free(&s);
    REQUIRE_OK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDPM, 0, 0.0f, &s, &err), &err);
    CHECK(s.steps == 50 && s.stochastic);
    for (int k = 0; k < 50; k++) CHECK(s.t[k] == 49 - k);
    CHECK(s.c[0] == 0.0f); /* the last step adds no noise */
    brisk_sample_schedule_free(&s);
}

static void test_ddim_eta1_is_ddpm(void) {
    brisk_model_spec m = spec(50, 0);
    brisk_sample_schedule p, d;
    brisk_error err = {0};
    REQUIRE_OK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDPM, 50, 0.0f, &p, &err), &err);
    REQUIRE_OK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 50, 1.0f, &d, &err), &err);
    for (int t = 0; t < 50; t++) {
        CHECK_NEAR(p.a[t], d.a[t], 1e-5 * fabs(p.a[t]));
        CHECK_NEAR(p.b[t], d.b[t], 1e-4 * fabs(p.b[t]) + 1e-7);
        CHECK_NEAR(p.c[t], d.c[t], 1e-4 * fabs(p.c[t]) + 1e-7);
    }
    brisk_sample_schedule_free(&p);
    brisk_sample_schedule_free(&d);
}

/* For x_t, eps and x0 = (x_t - sqrt(1 - abar) eps) / sqrt(abar), the x0 tables applied to x0
 * give the update the noise tables give to eps. */
static void test_x0_rewrite(void) {
    brisk_model_spec me = spec(50, 0), mx = spec(50, 1);
    float abar[50];
    brisk_ddpm_alpha_bar(50, me.beta_start, me.beta_end, abar);
    brisk_error err = {0};
    for (int kind = 0; kind < 2; kind++) {
        brisk_sample_schedule e, x;
        REQUIRE_OK(brisk_sample_schedule_make(&me, (brisk_sampler_kind)kind, kind ? 10 : 50, 0.3f, &e, &err), &err);
        REQUIRE_OK(brisk_sample_schedule_make(&mx, (brisk_sampler_kind)kind, kind ? 10 : 50, 0.3f, &x, &err), &err);
        for (int k = 0; k < e.steps; k++) {
            int t = e.t[k];
            double xt = 0.7, eps = -1.3, x0 = (xt - sqrt(1.0 - abar[t]) * eps) / sqrt(abar[t]);
            double ve = e.a[t] * xt + e.b[t] * eps, vx = x.a[t] * xt + x.b[t] * x0;
            CHECK_NEAR(ve, vx, 2e-4 * (fabs(ve) + 1));
            CHECK(e.c[t] == x.c[t]);
        }
        brisk_sample_schedule_free(&e);
        brisk_sample_schedule_free(&x);
    }
}

static void test_errors(void) {
    brisk_model_spec m = spec(20, 0);
    brisk_sample_schedule s;
    brisk_error err = {0};
    CHECK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDPM, 10, 0.0f, &s, &err) == BRISK_ERR_INVALID);
    CHECK(strstr(err.msg, "all 20"));
    CHECK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 21, 0.0f, &s, &err) == BRISK_ERR_INVALID);
    CHECK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, -1, 0.0f, &s, &err) == BRISK_ERR_INVALID);
    CHECK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 5, -0.1f, &s, &err) == BRISK_ERR_INVALID);
    CHECK(brisk_sample_schedule_make(&m, (brisk_sampler_kind)5, 5, 0.0f, &s, &err) == BRISK_ERR_INVALID);
    m.type = BRISK_MODEL_MLP;
    CHECK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 5, 0.0f, &s, &err) == BRISK_ERR_INVALID);
    brisk_sample_schedule_free(NULL);
}

/* The step graph: x_prev = a[t] x + b[t] eps_net + c[t] z, against the predict graph's eps. */
static void test_step_graph(void) {
    brisk_model_spec m = spec(20, 0);
    brisk_error err = {0};
    brisk_sample_schedule s;
    REQUIRE_OK(brisk_sample_schedule_make(&m, BRISK_SAMPLER_DDIM, 5, 0.0f, &s, &err), &err);
    const int B = 4;
    brisk_graph *gs = brisk_graph_new(), *gp = brisk_graph_new();
    brisk_model_io ios, iop;
    brisk_plan ps, pp;
    brisk_exec *es = NULL, *ep = NULL;
    brisk_backend *be = brisk_backend_cpu_new(1);
    REQUIRE_OK(brisk_diffusion_build_sample_step(&m, &s, B, gs, &ios, &err), &err);
    REQUIRE_OK(brisk_model_build(&m, B, BRISK_BUILD_PREDICT, gp, &iop, &err), &err);
    REQUIRE_OK(brisk_plan_build(gs, &ps, &err), &err);
    REQUIRE_OK(brisk_plan_build(gp, &pp, &err), &err);
    REQUIRE_OK(brisk_exec_create(gs, &ps, be, &es, &err), &err);
    REQUIRE_OK(brisk_exec_create(gp, &pp, be, &ep, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(es, 9, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ep, 9, &err), &err);
    float c[B * 2], x[B * 8], y[B * 8], eps[B * 8];
    int32_t t[B];
    for (int i = 0; i < B * 8; i++) x[i] = sinf((float)i);
    for (int i = 0; i < B * 2; i++) c[i] = cosf((float)i);
    for (int i = 0; i < B; i++) t[i] = s.t[1];
    for (int i = 0; i < 3; i++) {
        REQUIRE_OK(brisk_exec_set_input(es, ios.input_node[i], i == 0 ? (void *)c : i == 1 ? (void *)x : (void *)t, &err), &err);
        REQUIRE_OK(brisk_exec_set_input(ep, iop.input_node[i], i == 0 ? (void *)c : i == 1 ? (void *)x : (void *)t, &err), &err);
    }
    REQUIRE_OK(brisk_exec_run(es, BRISK_RUN_PREDICT, &err), &err);
    REQUIRE_OK(brisk_exec_run(ep, BRISK_RUN_PREDICT, &err), &err);
    REQUIRE_OK(brisk_exec_read(es, ios.output, y, &err), &err);
    REQUIRE_OK(brisk_exec_read(ep, iop.output, eps, &err), &err);
    for (int i = 0; i < B * 8; i++) CHECK_NEAR(y[i], s.a[s.t[1]] * x[i] + s.b[s.t[1]] * eps[i], 1e-5);
    brisk_exec_free(es), brisk_exec_free(ep);
    brisk_plan_free(&ps), brisk_plan_free(&pp);
    brisk_graph_free(gs), brisk_graph_free(gp);
    be->destroy(be);
    brisk_sample_schedule_free(&s);
}

TEST_MAIN(T(test_timesteps), T(test_ddim_eta1_is_ddpm), T(test_x0_rewrite), T(test_errors), T(test_step_graph))
