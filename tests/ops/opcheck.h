/* Op test harness: builds a one-op graph over random parameters, runs it on the CPU
 * backend, and checks
 *   - the forward output against a float64 reference the test computes, and
 *   - every parameter's gradient against central finite differences of
 *     loss = sum(out * W), W a random const, evaluated in float64 on the host from
 *     the op's f32 output (so the difference quotient sees only the op's rounding).
 * Parameters stand for the op's differentiable inputs; integer inputs are consts. */
#ifndef BRISK_TEST_OPCHECK_H
#define BRISK_TEST_OPCHECK_H

#include "brisk/graph.h"
#include "test.h"

#include <stdint.h>

#define OC_MAX_PARAMS 8

typedef struct oc {
    brisk_graph *g;
    uint64_t rng;
    int n_p;
    int pnode[OC_MAX_PARAMS];
    float *pval[OC_MAX_PARAMS];
    int64_t pn[OC_MAX_PARAMS];
    /* tolerances */
    double fwd_rtol;           /* |got - ref| <= fwd_rtol * (|ref| + max|ref|) */
    double fd_eps, fd_rtol, fd_atol;
    int max_fd;                /* finite differences per parameter (sampled beyond) */
    double fd_worst;           /* after the check: the largest |numeric - analytic| / tolerance */
    /* after oc_run */
    brisk_exec *ex;
    brisk_plan plan;
    brisk_backend *be;
    float *w;                  /* the loss weights */
    int out, loss;
} oc;

static inline double oc_unit(oc *c) { /* uniform in [0, 1) */
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(c->rng >> 11) * (1.0 / 9007199254740992.0);
}
static inline double oc_uniform(oc *c, double lo, double hi) { return lo + (hi - lo) * oc_unit(c); }
static inline int oc_randint(oc *c, int n) { return (int)(oc_unit(c) * n); }

static inline void oc_init(oc *c, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->g = brisk_graph_new();
    c->rng = seed * 0x9E3779B97F4A7C15ull + 12345;
    c->fwd_rtol = 1e-5;
    c->fd_eps = 1e-3;
    c->fd_rtol = 1e-2;
    c->fd_atol = 1e-3;
    c->max_fd = 24;
    c->out = c->loss = -1;
}

static inline void oc_fill(oc *c, float *v, int64_t n, double lo, double hi, double avoid) {
    for (int64_t i = 0; i < n; i++) {
        double x;
        do x = oc_uniform(c, lo, hi); while (fabs(x) < avoid); /* keep clear of kinks */
        v[i] = (float)x;
    }
}

/* A parameter with values uniform in [lo, hi), |value| >= avoid. Returns its node. */
static inline int oc_param_avoid(oc *c, const char *name, brisk_shape s, double lo, double hi, double avoid) {
    int id = brisk_param(c->g, name, s, BRISK_INIT_ZEROS, 0, 0);
    if (id < 0 || c->n_p == OC_MAX_PARAMS) return -1;
    int64_t n = brisk_shape_numel(&s);
    float *v = malloc((size_t)n * sizeof *v);
    oc_fill(c, v, n, lo, hi, avoid);
    c->pnode[c->n_p] = id;
    c->pval[c->n_p] = v;
    c->pn[c->n_p] = n;
    c->n_p++;
    return id;
}
static inline int oc_param(oc *c, const char *name, brisk_shape s) { return oc_param_avoid(c, name, s, -1, 1, 0); }
/* Host values of a parameter node (for the test's reference). */
static inline const float *oc_val(const oc *c, int node) {
    for (int k = 0; k < c->n_p; k++)
        if (c->pnode[k] == node) return c->pval[k];
    return NULL;
}

static inline int oc_const_i32(oc *c, brisk_shape s, const int32_t *v) { return brisk_const(c->g, NULL, BRISK_I32, s, v); }
static inline int oc_const_f32(oc *c, brisk_shape s, const float *v) { return brisk_const(c->g, NULL, BRISK_F32, s, v); }

static inline int oc_param_index(const oc *c, int node) {
    const brisk_graph *g = c->g;
    for (int k = 0; k < g->n_params; k++)
        if (g->params[k].node == node) return k;
    return -1;
}

static inline int oc_upload_param(oc *c, int k, brisk_error *e) {
    int pk = oc_param_index(c, c->pnode[k]);
    return c->be->upload(c->be, (char *)c->ex->params + c->g->params[pk].offset * sizeof(float), c->pval[k],
                         (size_t)c->pn[k] * sizeof(float), e) != BRISK_OK;
}

/* Host-side loss: sum(out * W) in float64 from the op's output as the device made it. */
static inline double oc_host_loss(oc *c, float *buf, int64_t n) {
    brisk_error e;
    if (brisk_exec_run(c->ex, BRISK_RUN_TRAIN, &e) != BRISK_OK) {
        fprintf(stderr, "run: %s\n", e.msg);
        return NAN;
    }
    if (brisk_exec_read(c->ex, c->out, buf, &e) != BRISK_OK) return NAN;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)buf[i] * c->w[i];
    return s;
}

/* Builds loss, backward, plan and executor for output `out`, uploads the parameters
 * and runs one training step. 0 on success. */
static inline int oc_build(oc *c, int out) {
    brisk_graph *g = c->g;
    brisk_error e;
    if (out < 0 || brisk_graph_error(g, &e) != BRISK_OK) {
        fprintf(stderr, "build: %s\n", brisk_graph_error(g, &e) ? e.msg : "no output");
        return -1;
    }
    c->out = out;
    const brisk_node *on = &g->nodes[out];
    int64_t n = brisk_shape_numel(&on->shape);
    int do_grad = on->dtype == BRISK_F32;
    if (do_grad) {
        c->w = malloc((size_t)n * sizeof *c->w);
        oc_fill(c, c->w, n, -1, 1, 0);
        brisk_shape os = on->shape;
        int wn = oc_const_f32(c, os, c->w);
        int prod = brisk_mul(g, out, wn);
        c->loss = os.ndim ? brisk_sum(g, prod, (1u << os.ndim) - 1u, 0) : prod;
        if (brisk_backward(g, c->loss, &e) != BRISK_OK) { fprintf(stderr, "backward: %s\n", e.msg); return -1; }
    }
    g->output = out;
    if (brisk_plan_build(g, &c->plan, &e) != BRISK_OK) { fprintf(stderr, "plan: %s\n", e.msg); return -1; }
    c->be = brisk_backend_cpu_new(0);
    if (!c->be) { fprintf(stderr, "no cpu backend\n"); return -1; }
    if (brisk_exec_create(g, &c->plan, c->be, &c->ex, &e) != BRISK_OK) { fprintf(stderr, "exec: %s\n", e.msg); return -1; }
    if (brisk_exec_init_params(c->ex, 1, &e) != BRISK_OK) { fprintf(stderr, "init: %s\n", e.msg); return -1; }
    for (int k = 0; k < c->n_p; k++)
        if (oc_upload_param(c, k, &e)) { fprintf(stderr, "upload: %s\n", e.msg); return -1; }
    brisk_status st = brisk_exec_run(c->ex, do_grad ? BRISK_RUN_TRAIN : BRISK_RUN_PREDICT, &e);
    if (st != BRISK_OK) { fprintf(stderr, "run: %s\n", e.msg); return -1; }
    return 0;
}

/* Output as f32 into a fresh buffer. */
static inline float *oc_read(oc *c, int node) {
    brisk_error e;
    const brisk_node *nd = &c->g->nodes[node];
    float *v = malloc(nd->bytes ? nd->bytes : 4);
    if (brisk_exec_read(c->ex, node, v, &e) != BRISK_OK) { fprintf(stderr, "read: %s\n", e.msg); free(v); return NULL; }
    return v;
}

static inline int oc_compare(const char *what, const float *got, const double *ref, int64_t n, double rtol) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double tol = rtol * (fabs(ref[i]) + scale) + 1e-30;
        if (!(fabs((double)got[i] - ref[i]) <= tol)) {
            if (bad < 5) fprintf(stderr, "  %s[%lld]: got %.9g, want %.9g\n", what, (long long)i, (double)got[i], ref[i]);
            bad++;
        }
    }
    return bad;
}

/* Analytic gradients (the GRAD_ACCUM outputs) vs central differences. */
static inline void oc_check_grads(oc *c, const char *what) {
    brisk_error e;
    int64_t n = brisk_shape_numel(&c->g->nodes[c->out].shape);
    float *buf = malloc((size_t)n * sizeof *buf);
    /* All analytic gradients first: the finite differences rerun the graph, and the last
     * run of one parameter's loop leaves it at value - eps, so a gradient read after that
     * loop would be of a perturbed point (2% off for BatchNorm's gamma after x's loop). */
    float *anas[OC_MAX_PARAMS];
    for (int k = 0; k < c->n_p; k++) anas[k] = oc_read(c, c->g->params[oc_param_index(c, c->pnode[k])].grad_node);
    for (int k = 0; k < c->n_p; k++) {
        int pk = oc_param_index(c, c->pnode[k]);
        float *ana = anas[k];
        CHECK(ana != NULL);
        if (!ana) continue;
        int bad = 0;
        int64_t count = c->pn[k] < c->max_fd ? c->pn[k] : c->max_fd;
        for (int64_t t = 0; t < count; t++) {
            int64_t i = c->pn[k] <= c->max_fd ? t : (int64_t)(oc_unit(c) * (double)c->pn[k]);
            float keep = c->pval[k][i];
            c->pval[k][i] = keep + (float)c->fd_eps;
            double hp = (double)c->pval[k][i] - keep;   /* the step f32 actually took */
            oc_upload_param(c, k, &e);
            double lp = oc_host_loss(c, buf, n);
            c->pval[k][i] = keep - (float)c->fd_eps;
            double hm = keep - (double)c->pval[k][i];
            oc_upload_param(c, k, &e);
            double lm = oc_host_loss(c, buf, n);
            c->pval[k][i] = keep;
            oc_upload_param(c, k, &e);
            double num = (lp - lm) / (hp + hm), a = ana[i];
            double tol = c->fd_atol + c->fd_rtol * fmax(fabs(num), fabs(a));
            if (fabs(num - a) / tol > c->fd_worst) c->fd_worst = fabs(num - a) / tol;
            if (!(fabs(num - a) <= tol)) {
                if (bad < 5)
                    fprintf(stderr, "  %s: d loss / d %s[%lld]: analytic %.6g, numeric %.6g\n", what,
                            c->g->params[pk].name, (long long)i, a, num);
                bad++;
            }
        }
        CHECKF(bad == 0, "%s: %d of %lld gradient entries of %s off", what, bad, (long long)count,
               c->g->params[pk].name);
        free(ana);
    }
    free(buf);
}

static inline void oc_free(oc *c) {
    if (c->ex) brisk_exec_free(c->ex);
    if (c->be) c->be->destroy(c->be);
    brisk_plan_free(&c->plan);
    for (int k = 0; k < c->n_p; k++) free(c->pval[k]);
    free(c->w);
    brisk_graph_free(c->g);
    memset(c, 0, sizeof *c);
}

/* The whole check: forward vs ref (numel of out doubles), then gradients. */
static inline void oc_check(oc *c, int out, const double *ref, const char *what) {
    if (oc_build(c, out)) {
        CHECKF(0, "%s: could not build or run", what);
        return;
    }
    int64_t n = brisk_shape_numel(&c->g->nodes[out].shape);
    float *got = oc_read(c, out);
    CHECK(got != NULL);
    if (got) {
        int bad = oc_compare(what, got, ref, n, c->fwd_rtol);
        CHECKF(bad == 0, "%s: %d of %lld forward values off", what, bad, (long long)n);
    }
    free(got);
    if (c->g->nodes[out].dtype == BRISK_F32) oc_check_grads(c, what);
}

/* ---- reference helpers */

/* Offset into a tensor of shape `in` for flat index `i` of the broadcast shape `out`. */
static inline int64_t oc_bcast(const brisk_shape *in, const brisk_shape *out, int64_t i) {
    int64_t off = 0, stride = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t idx = i % out->d[d];
        i /= out->d[d];
        int di = d - (out->ndim - in->ndim);
        if (di >= 0) {
            if (in->d[di] != 1) off += idx * stride;
            stride *= in->d[di];
        }
    }
    return off;
}

#endif
