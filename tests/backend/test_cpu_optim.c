/* The CPU backend's fused optimizer and gradient norm against float64 scalar
 * references: AdamW (torch.optim.AdamW semantics) and SGD (plain, momentum,
 * Nesterov, weight decay) over one and several steps, with grad_scale, clipping by
 * global norm, a per-element weight-decay mask, sizes that run on 2 threads, and
 * grad_sumsq equal bit for bit on 1 and 2 threads. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

typedef struct state {
    int64_t n;
    float *p, *g, *m, *v;
    uint8_t *mask;
    double *rp, *rm, *rv;
} state;

static void state_init(state *s, int64_t n, int with_mask) {
    s->n = n;
    s->p = malloc(n * 4); s->g = malloc(n * 4); s->m = calloc(n, 4); s->v = calloc(n, 4);
    s->rp = malloc(n * 8); s->rm = calloc(n, 8); s->rv = calloc(n, 8);
    s->mask = NULL;
    if (with_mask) {
        s->mask = malloc(n);
        for (int64_t i = 0; i < n; i++) s->mask[i] = (i / 7) % 2;
    }
    for (int64_t i = 0; i < n; i++) { s->p[i] = tg_randf(-1, 1); s->rp[i] = s->p[i]; }
}

static void state_free(state *s) {
    free(s->p); free(s->g); free(s->m); free(s->v); free(s->rp); free(s->rm); free(s->rv); free(s->mask);
}

static double ref_sumsq(const float *g, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    return s;
}

/* one step of the reference on doubles, gradient g (f32) */
static void ref_step(state *s, const brisk_optim_args *a) {
    double gs = a->grad_scale;
    if (a->clip_norm > 0) {
        double norm = sqrt(ref_sumsq(s->g, s->n)) * a->grad_scale;
        double c = a->clip_norm / (norm + 1e-6);
        if (c < 1) gs *= c;
    }
    for (int64_t i = 0; i < s->n; i++) {
        double g = s->g[i] * gs, p = s->rp[i];
        int dec = !s->mask || s->mask[i];
        if (a->kind == BRISK_OPTIM_ADAMW) {
            if (dec) p -= (double)a->lr * a->weight_decay * p;
            s->rm[i] = a->beta1 * s->rm[i] + (1.0 - a->beta1) * g;
            s->rv[i] = a->beta2 * s->rv[i] + (1.0 - a->beta2) * g * g;
            double mh = s->rm[i] / (1.0 - pow(a->beta1, (double)a->t));
            double vh = s->rv[i] / (1.0 - pow(a->beta2, (double)a->t));
            p -= a->lr * mh / (sqrt(vh) + a->eps);
        } else {
            double d = g + (dec ? a->weight_decay * p : 0.0);
            if (a->momentum != 0) {
                s->rm[i] = a->momentum * s->rm[i] + d;
                d = a->nesterov ? d + a->momentum * s->rm[i] : s->rm[i];
            }
            p -= a->lr * d;
        }
        s->rp[i] = p;
    }
}

static void run_steps(brisk_backend *be, int64_t n, brisk_optim_args a, int steps, int with_mask, const char *what) {
    state s;
    state_init(&s, n, with_mask);
    float *sumsq;
    REQUIRE(be->alloc(be, 4, (void **)&sumsq, NULL) == BRISK_OK);
    brisk_error err_s = {0}, *err = &err_s;
    for (int k = 1; k <= steps; k++) {
        for (int64_t i = 0; i < n; i++) s.g[i] = tg_randf(-1, 1) * (i % 3 == 0 ? 0.01f : 1.0f);
        a.t = k;
        REQUIRE_OK(be->grad_sumsq(be, s.g, n, sumsq, err), err);
        REQUIRE_OK(be->optim_update(be, s.p, s.g, s.m, s.v, n, &a, sumsq, s.mask, err), err);
        ref_step(&s, &a);
    }
    double ep = tg_rel_err(s.p, s.rp, n), em = tg_rel_err(s.m, s.rm, n);
    double ev = a.kind == BRISK_OPTIM_ADAMW ? tg_rel_err(s.v, s.rv, n) : 0;
    CHECKF(ep <= 1e-6 && em <= 1e-5 && ev <= 1e-5, "%s n=%lld steps=%d: p %.3g m %.3g v %.3g", what, (long long)n,
           steps, ep, em, ev);
    be->free(be, sumsq);
    state_free(&s);
}

static brisk_optim_args adamw(void) {
    brisk_optim_args a = {.kind = BRISK_OPTIM_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = 0.01f, .grad_scale = 1.0f};
    return a;
}

static void test_adamw(void) {
    for (int bi = 0; bi < 2; bi++) {
        brisk_backend *be = bi ? be2 : be1;
        brisk_optim_args a = adamw();
        run_steps(be, 5, a, 1, 0, "adamw");
        run_steps(be, 273155, a, 1, 0, "adamw");
        run_steps(be, 273155, a, 6, 1, "adamw masked");
        a.grad_scale = 0.25f;
        a.clip_norm = 1.0f; /* the norm of these gradients is ~ 150: clipping engages */
        run_steps(be, 100003, a, 4, 0, "adamw scaled+clipped");
        a.clip_norm = 1e6f; /* and here it does not */
        run_steps(be, 1003, a, 3, 0, "adamw clip inactive");
        a = adamw();
        a.lr = 0.1f;
        a.weight_decay = 0.1f;
        run_steps(be, 999, a, 10, 1, "adamw large lr");
    }
}

static void test_sgd(void) {
    for (int bi = 0; bi < 2; bi++) {
        brisk_backend *be = bi ? be2 : be1;
        brisk_optim_args a = {.kind = BRISK_OPTIM_SGD, .lr = 0.05f, .grad_scale = 1.0f};
        run_steps(be, 70001, a, 3, 0, "sgd");
        a.momentum = 0.9f;
        run_steps(be, 70001, a, 5, 0, "sgd momentum");
        a.nesterov = 1;
        a.weight_decay = 1e-2f;
        run_steps(be, 70001, a, 5, 1, "sgd nesterov wd masked");
        a.grad_scale = 0.5f;
        a.clip_norm = 2.0f;
        run_steps(be, 1001, a, 4, 0, "sgd clipped");
    }
}

static void test_grad_sumsq(void) {
    const int64_t sizes[] = {1, 1000, 273152};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        float *g = malloc(n * 4), r1, r2;
        for (int64_t i = 0; i < n; i++) g[i] = tg_randf(-3, 3);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(be1->grad_sumsq(be1, g, n, &r1, err), err);
        REQUIRE_OK(be2->grad_sumsq(be2, g, n, &r2, err), err);
        CHECK(memcmp(&r1, &r2, 4) == 0);
        double ref = ref_sumsq(g, n);
        CHECK_NEAR(r1, ref, 1e-6 * ref);
        free(g);
    }
}

static void test_optim_errors(void) {
    float p = 1, g = 1, m = 0, v = 0;
    brisk_optim_args a = adamw();
    a.t = 0;
    brisk_error err = {0};
    CHECK(be1->optim_update(be1, &p, &g, &m, &v, 1, &a, NULL, NULL, &err) == BRISK_ERR_INVALID);
    a.t = 1;
    a.clip_norm = 1.0f;
    CHECK(be1->optim_update(be1, &p, &g, &m, &v, 1, &a, NULL, NULL, &err) == BRISK_ERR_INVALID);
    CHECK(p == 1.0f);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_adamw), T(test_sgd), T(test_grad_sumsq), T(test_optim_errors)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
