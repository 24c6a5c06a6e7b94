/* GRU, GRU_GRAD and GRU_GRAD_W on the CPU backend against a float64 reference (the forward
 * and every workspace plane, then the backward by hand-written BPTT: d xp, d hh_n, d w_hh
 * and d b_hh), on odd sizes that split into uneven thread bands, with outputs and
 * workspaces poisoned with NaN and guarded; one thread and two give the same bits. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static double sgm(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct gru_ref {
    double *h, *gates, *hhn, *hprev, *dxp, *dhn, *dw, *db;
} gru_ref;

static void gru_reference(const float *xp, const float *w, const float *bi, const float *bh, const float *dh,
                          int64_t B, int64_t T, int64_t H, int rev, gru_ref *r) {
    int64_t G = 3 * H, n = B * T;
    r->h = calloc((size_t)(n * H), 8), r->hhn = calloc((size_t)(n * H), 8), r->hprev = calloc((size_t)(n * H), 8);
    r->gates = calloc((size_t)(n * G), 8), r->dxp = calloc((size_t)(n * G), 8), r->dhn = calloc((size_t)(n * H), 8);
    r->dw = calloc((size_t)(G * H), 8), r->db = calloc((size_t)G, 8);
    double *dhr = calloc((size_t)H, 8), *hh = calloc((size_t)G, 8), *dhh = calloc((size_t)G, 8);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t s = 0; s < T; s++) {
            int64_t t = rev ? T - 1 - s : s, tp = rev ? t + 1 : t - 1, row = b * T + t;
            for (int64_t j = 0; j < G; j++) {
                double v = bh[j];
                for (int64_t k = 0; k < H && s > 0; k++) v += r->h[(b * T + tp) * H + k] * w[j * H + k];
                hh[j] = v;
            }
            double *gt = r->gates + row * G;
            for (int64_t j = 0; j < H; j++) {
                const float *x = xp + row * G;
                double hp = s > 0 ? r->h[(b * T + tp) * H + j] : 0;
                gt[j] = sgm((double)x[j] + bi[j] + hh[j]);
                gt[H + j] = sgm((double)x[H + j] + bi[H + j] + hh[H + j]);
                gt[2 * H + j] = tanh((double)x[2 * H + j] + bi[2 * H + j] + gt[j] * hh[2 * H + j]);
                r->hhn[row * H + j] = hh[2 * H + j];
                r->hprev[row * H + j] = hp;
                r->h[row * H + j] = (1 - gt[H + j]) * gt[2 * H + j] + gt[H + j] * hp;
            }
        }
        memset(dhr, 0, (size_t)H * 8);
        for (int64_t s = T - 1; s >= 0; s--) {
            int64_t t = rev ? T - 1 - s : s, row = b * T + t;
            const double *gt = r->gates + row * G;
            double *d = r->dxp + row * G;
            for (int64_t j = 0; j < H; j++) {
                double rg = gt[j], zg = gt[H + j], ng = gt[2 * H + j], dht = dh[row * H + j] + dhr[j];
                double dn = dht * (1 - zg) * (1 - ng * ng);
                d[j] = dn * r->hhn[row * H + j] * rg * (1 - rg);
                d[H + j] = dht * (r->hprev[row * H + j] - ng) * zg * (1 - zg);
                d[2 * H + j] = dn;
                r->dhn[row * H + j] = dn * rg;
                dhh[j] = d[j], dhh[H + j] = d[H + j], dhh[2 * H + j] = dn * rg;
                dhr[j] = dht * zg;
            }
            for (int64_t k = 0; k < H; k++)
                for (int64_t j = 0; j < G; j++) dhr[k] += dhh[j] * w[j * H + k];
            for (int64_t j = 0; j < G; j++) {
                r->db[j] += dhh[j];
                for (int64_t k = 0; k < H; k++) r->dw[j * H + k] += dhh[j] * r->hprev[row * H + k];
            }
        }
    }
    free(dhr);
    free(hh);
    free(dhh);
}

static void gru_ref_free(gru_ref *r) {
    free(r->h); free(r->gates); free(r->hhn); free(r->hprev); free(r->dxp); free(r->dhn); free(r->dw); free(r->db);
}

/* Runs the GRU kernels on `be`: ids = gru, d xp, d w_hh, d b_hh. */
static void gru_run(brisk_backend *be, tgraph *t, int64_t B, int64_t T, int64_t H, int rev, int ids[4]) {
    int64_t G = 3 * H;
    int xp = tg_input(t, BRISK_F32, brisk_shape3(B, T, G)), w = tg_input(t, BRISK_F32, brisk_shape2(G, H));
    int bi = tg_input(t, BRISK_F32, brisk_shape1(G)), bh = tg_input(t, BRISK_F32, brisk_shape1(G));
    int dh = tg_input(t, BRISK_F32, brisk_shape3(B, T, H));
    for (int64_t i = 0; i < G * H; i++) tg_f(t, w)[i] *= 0.4f; /* keep the recurrence from saturating */
    brisk_attr at = tg_attr0();
    at.kind = rev;
    int fin[4] = {xp, w, bi, bh};
    int l = tg_node_ws(t, BRISK_OP_GRU, BRISK_F32, brisk_shape3(B, T, H), &at, 4, fin, (size_t)(5 * B * T * H) * 4);
    int gin[3] = {dh, l, w};
    int dg = tg_node_ws(t, BRISK_OP_GRU_GRAD, BRISK_F32, brisk_shape3(B, T, G), &at, 3, gin, (size_t)(B * T * H) * 4);
    brisk_attr sum = tg_attr0();
    sum.axes = 3u; /* d b_ih: d xp summed over (b, t) */
    int dbi = tg_node(t, BRISK_OP_SUM, BRISK_F32, brisk_shape1(G), &sum, 1, &dg);
    int win[3] = {dg, l, dbi};
    int dw = tg_node(t, BRISK_OP_GRU_GRAD_W, BRISK_F32, brisk_shape2(G, H), &at, 2, win);
    int db = tg_node(t, BRISK_OP_GRU_GRAD_W, BRISK_F32, brisk_shape1(G), &at, 3, win);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, t, l, err), err);
    REQUIRE_OK(tg_run(be, t, dg, err), err);
    REQUIRE_OK(tg_run(be, t, dw, err), err);
    REQUIRE_OK(tg_run(be, t, dbi, err), err);
    REQUIRE_OK(tg_run(be, t, db, err), err);
    ids[0] = l, ids[1] = dg, ids[2] = dw, ids[3] = db;
}

static void gru_case(int64_t B, int64_t T, int64_t H, int rev) {
    tgraph t[2];
    int ids[2][4] = {{-1}, {-1}};
    for (int k = 0; k < 2; k++) {
        tg_rng_state = 0x7654321ull + (uint64_t)(B * 1000 + T * 10 + rev); /* the same inputs for both */
        tg_init(&t[k]);
        gru_run(k ? be2 : be1, &t[k], B, T, H, rev, ids[k]);
    }
    REQUIRE(ids[0][0] >= 0 && ids[1][0] >= 0);
    tgraph *g = &t[0];
    gru_ref r;
    gru_reference(tg_f(g, 0), tg_f(g, 1), tg_f(g, 2), tg_f(g, 3), tg_f(g, 4), B, T, H, rev, &r);
    int64_t n = B * T * H;
    const float *ws = tg_f(g, ids[0][0]), *dg = tg_f(g, ids[0][1]);
    double e[8] = {tg_rel_err(ws, r.h, n), tg_rel_err(ws + n, r.gates, 3 * n), tg_rel_err(ws + 4 * n, r.hhn, n),
                   tg_rel_err(ws + 5 * n, r.hprev, n), tg_rel_err(dg, r.dxp, 3 * n), tg_rel_err(dg + 3 * n, r.dhn, n),
                   tg_rel_err(tg_f(g, ids[0][2]), r.dw, 3 * H * H), tg_rel_err(tg_f(g, ids[0][3]), r.db, 3 * H)};
    static const char *what[8] = {"h", "gates", "hh_n", "h_prev", "d xp", "d hh_n", "d w_hh", "d b_hh"};
    for (int i = 0; i < 8; i++)
        CHECKF(e[i] <= 2e-6, "gru B %lld T %lld H %lld rev %d: %s relative error %.3g", (long long)B, (long long)T,
               (long long)H, rev, what[i], e[i]);
    for (int i = 0; i < 4; i++)
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
               "gru: 1 and 2 threads differ in node %d", i);
    gru_ref_free(&r);
    tg_free(&t[0]);
    tg_free(&t[1]);
}

static void test_gru(void) {
    gru_case(1, 1, 1, 0);
    gru_case(3, 5, 4, 1);
    gru_case(37, 9, 19, 0); /* bands of 16 and 21 rows; H crosses the register tiles */
    gru_case(70, 6, 33, 1); /* ROW_BLOCK blocks and a remainder per band */
}

static void test_gru_bad(void) {
    tgraph t;
    tg_init(&t);
    int xp = tg_input(&t, BRISK_F32, brisk_shape3(2, 3, 6)), w = tg_input(&t, BRISK_F32, brisk_shape2(6, 2));
    int b6 = tg_input(&t, BRISK_F32, brisk_shape1(6)), b7 = tg_input(&t, BRISK_F32, brisk_shape1(7));
    int in[4] = {xp, w, b6, b6};
    brisk_error err = {0};
    /* no room for the workspace */
    int l = tg_node(&t, BRISK_OP_GRU, BRISK_F32, brisk_shape3(2, 3, 2), NULL, 4, in);
    CHECK(tg_run(be1, &t, l, &err) == BRISK_ERR_INVALID && strstr(err.msg, "workspace"));
    /* a recurrent bias of the wrong length */
    int in2[4] = {xp, w, b6, b7};
    l = tg_node_ws(&t, BRISK_OP_GRU, BRISK_F32, brisk_shape3(2, 3, 2), NULL, 4, in2, 5 * 2 * 3 * 2 * 4);
    CHECK(tg_run(be1, &t, l, &err) == BRISK_ERR_SHAPE && strstr(err.msg, "GRU of B 2, T 3, H 2"));
    /* a gradient without room for d hh_n */
    int good = tg_node_ws(&t, BRISK_OP_GRU, BRISK_F32, brisk_shape3(2, 3, 2), NULL, 4, in, 5 * 2 * 3 * 2 * 4);
    int dh = tg_input(&t, BRISK_F32, brisk_shape3(2, 3, 2));
    int gin[3] = {dh, good, w};
    int dg = tg_node(&t, BRISK_OP_GRU_GRAD, BRISK_F32, brisk_shape3(2, 3, 6), NULL, 3, gin);
    CHECK(tg_run(be1, &t, dg, &err) == BRISK_ERR_SHAPE);
    /* GRU_GRAD_W whose second input is not a GRU; d b_hh without d b_ih */
    int win[2] = {dg, xp};
    int dw = tg_node(&t, BRISK_OP_GRU_GRAD_W, BRISK_F32, brisk_shape2(6, 2), NULL, 2, win);
    CHECK(tg_run(be1, &t, dw, &err) == BRISK_ERR_INVALID && strstr(err.msg, "not a GRU"));
    int dg2 = tg_node_ws(&t, BRISK_OP_GRU_GRAD, BRISK_F32, brisk_shape3(2, 3, 6), NULL, 3, gin, 2 * 3 * 2 * 4);
    int win2[2] = {dg2, good};
    int db = tg_node(&t, BRISK_OP_GRU_GRAD_W, BRISK_F32, brisk_shape1(6), NULL, 2, win2);
    CHECK(tg_run(be1, &t, db, &err) == BRISK_ERR_SHAPE);
    tg_free(&t);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_gru), T(test_gru_bad)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
