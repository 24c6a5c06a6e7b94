/* ZeRO-1 on a device, the trainer's side without a GPU: the CPU backend dressed as a device
 * backend whose collectives (one rank) log their calls.
 * - Setup (brisk_dist_device_shard_check, at set_dist): bf16, fp16 and auto precision are
 *   no longer refused; a step needs the whole gradient's norm on every rank under clipping,
 *   the NaN skip or an active fp16 loss scaler, and a backend that cannot sum it over the
 *   ranks is refused then, naming why, never first at a step.
 * - The step (brisk_dist_device_shard_update): reduce-scatter, then (when the norm is
 *   needed) the shard's sum of squares and its all-reduce, the shard's update, the
 *   all-gather, in that order; without a norm, no sum and no collective for it. */
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train/trainer_internal.h"

static struct {
    char calls[256];
    int scaler_active;
    brisk_status (*grad_sumsq)(brisk_backend *, const float *, int64_t, float *, brisk_error *);
    int64_t sumsq_n;
} fk;

static void called(const char *what) {
    size_t k = strlen(fk.calls);
    snprintf(fk.calls + k, sizeof fk.calls - k, "%s%s", k ? " " : "", what);
}
static brisk_status f_loss_log(brisk_backend *be, const float *loss, int width, float w, brisk_error *err) {
    (void)be, (void)loss, (void)width, (void)w, (void)err;
    return BRISK_OK;
}
static brisk_status f_reduce_scatter(brisk_backend *be, float *g, const int64_t *bounds, brisk_error *err) {
    (void)be, (void)g, (void)bounds, (void)err;
    called("reduce_scatter");
    return BRISK_OK;
}
static brisk_status f_all_gather(brisk_backend *be, float *p, const int64_t *bounds, brisk_error *err) {
    (void)be, (void)p, (void)bounds, (void)err;
    called("all_gather");
    return BRISK_OK;
}
static brisk_status f_sumsq_allreduce(brisk_backend *be, brisk_error *err) {
    (void)be, (void)err;
    called("sumsq_allreduce");
    return BRISK_OK;
}
static brisk_status f_grad_sumsq(brisk_backend *be, const float *g, int64_t n, float *out, brisk_error *err) {
    called("sumsq");
    fk.sumsq_n = n;
    return fk.grad_sumsq(be, g, n, out, err);
}
static brisk_status f_update(brisk_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                             const brisk_optim_args *a, const float *sumsq, const uint8_t *mask, brisk_error *err) {
    (void)be, (void)p, (void)g, (void)m, (void)v, (void)n, (void)a, (void)sumsq, (void)mask, (void)err;
    called("update");
    return BRISK_OK;
}
static brisk_status f_scaler_get(brisk_backend *be, brisk_scaler_state *s, brisk_error *err) {
    (void)be, (void)err;
    *s = (brisk_scaler_state){.active = fk.scaler_active, .scale = 65536.0f};
    return BRISK_OK;
}
static void quiet(void *user, brisk_log_level level, const char *msg) { (void)user, (void)level, (void)msg; }

/* A trainer whose backend looks like a device's; allreduce 0: it cannot sum the norm. */
static brisk_status make(const char *precision, float clip, int skip_nan, int allreduce, brisk_trainer **out,
                         brisk_error *err) {
    static char dir[256];
    T_MAKE_DIR(dir, "device_shard");
    char data[300], json[1024];
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    if (access(data, F_OK) != 0 && brisk_synth_write("tabular", data, 256, 0, err)) return BRISK_ERR_IO;
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3}, \"data\": {\"train\": "
             "\"%s\"}, \"optim\": {\"clip_norm\": %g}, \"train\": {\"batch_size\": 32, \"epochs\": 1, \"skip_nan_steps\": "
             "%d, \"out_dir\": \"%s/out\"}, \"speed\": {\"device\": \"cpu\", \"precision\": \"%s\"}, \"dist\": "
             "{\"shard_optimizer\": true}}", data, (double)clip, skip_nan, dir, precision);
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    brisk_logger log = {quiet, NULL, BRISK_LOG_INFO};
    st = brisk_trainer_create(&cfg, &log, out, err);
    brisk_config_free(&cfg);
    if (st) return st;
    brisk_backend *be = (*out)->be;
    memset(fk.calls, 0, sizeof fk.calls);
    fk.grad_sumsq = be->grad_sumsq;
    be->loss_log = f_loss_log;
    be->grad_reduce_scatter = f_reduce_scatter;
    be->param_all_gather = f_all_gather;
    be->grad_sumsq_allreduce = allreduce ? f_sumsq_allreduce : NULL;
    be->grad_sumsq = f_grad_sumsq;
    be->optim_update = f_update;
    be->scaler_get = f_scaler_get;
    return BRISK_OK;
}

static void test_setup_any_precision(void) {
    const char *precs[] = {"auto", "fp32", "tf32", "bf16", "fp16"};
    brisk_error e = {0};
    for (int i = 0; i < 5; i++) {
        fk.scaler_active = strcmp(precs[i], "fp16") == 0;
        brisk_trainer *t = NULL;
        REQUIRE_OK(make(precs[i], 0, 0, 1, &t, &e), &e);
        brisk_status st = brisk_dist_device_shard_check(t, &e);
        CHECKF(st == BRISK_OK, "precision %s: %s", precs[i], e.msg);
        CHECKF(t->shard_norm == fk.scaler_active, "precision %s: shard_norm %d", precs[i], t->shard_norm);
        brisk_trainer_free(t);
    }
}

/* What needs the norm, and the refusal (at setup) when the backend cannot sum it */
static void test_setup_norm_needs_allreduce(void) {
    struct {
        float clip;
        int skip, scaler;
        const char *why;
    } cases[] = {{0, 0, 0, NULL},
                 {1.0f, 0, 0, "optim.clip_norm"},
                 {0, 2, 0, "train.skip_nan_steps"},
                 {0, 0, 1, "the fp16 loss scaler"},
                 {0.5f, 0, 1, "optim.clip_norm"}};
    brisk_error e = {0};
    for (int i = 0; i < 5; i++) {
        const char *why = brisk_dist_shard_norm_need(cases[i].clip, cases[i].skip > 0, cases[i].scaler);
        CHECKF(cases[i].why ? why && strcmp(why, cases[i].why) == 0 : why == NULL, "case %d: %s", i, why ? why : "none");
        for (int allreduce = 0; allreduce < 2; allreduce++) {
            fk.scaler_active = cases[i].scaler;
            brisk_trainer *t = NULL;
            REQUIRE_OK(make(cases[i].scaler ? "fp16" : "bf16", cases[i].clip, cases[i].skip, allreduce, &t, &e), &e);
            memset(&e, 0, sizeof e);
            brisk_status st = brisk_dist_device_shard_check(t, &e);
            if (cases[i].why && !allreduce)
                CHECKF(st == BRISK_ERR_UNSUPPORTED && strstr(e.msg, cases[i].why) &&
                           strstr(e.msg, "cannot sum the gradient norm over the shards") && strstr(e.msg, "<test>"),
                       "case %d: status %d: %s", i, (int)st, e.msg);
            else
                CHECKF(st == BRISK_OK && t->shard_norm == (cases[i].why != NULL), "case %d, allreduce %d: status %d "
                       "(%s), shard_norm %d", i, allreduce, (int)st, e.msg, t->shard_norm);
            brisk_trainer_free(t);
        }
    }
}

/* The step's order, with and without the norm */
static void test_step_order(void) {
    brisk_error e = {0};
    for (int scaler = 0; scaler < 2; scaler++) {
        fk.scaler_active = scaler;
        brisk_trainer *t = NULL;
        REQUIRE_OK(make(scaler ? "fp16" : "bf16", 0, 0, 1, &t, &e), &e);
        REQUIRE_OK(brisk_dist_device_shard_check(t, &e), &e);
        int64_t n = t->g->n_param_floats, bounds[2];
        brisk_dist_shard_bounds(n, 1, bounds);
        t->shard_bounds = malloc(sizeof bounds);
        REQUIRE(t->shard_bounds);
        memcpy(t->shard_bounds, bounds, sizeof bounds);
        t->shard_off = 0, t->shard_n = n;
        brisk_optim_args a = brisk_optimizer_args(&t->opt, 1, 1e-3f, 1);
        memset(fk.calls, 0, sizeof fk.calls);
        fk.sumsq_n = -1;
        REQUIRE_OK(brisk_dist_device_shard_update(t, &a, &e), &e);
        const char *want = scaler ? "reduce_scatter sumsq sumsq_allreduce update all_gather"
                                  : "reduce_scatter update all_gather";
        CHECKF(strcmp(fk.calls, want) == 0, "scaler %d: calls \"%s\", expected \"%s\"", scaler, fk.calls, want);
        if (scaler) CHECKF(fk.sumsq_n == n, "the shard's norm over %lld floats; the shard has %lld",
                           (long long)fk.sumsq_n, (long long)n);
        brisk_trainer_free(t); /* frees shard_bounds */
    }
}

TEST_MAIN(T(test_setup_any_precision), T(test_setup_norm_needs_allreduce), T(test_step_order))
