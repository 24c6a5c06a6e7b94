/* LSTM, LSTM_GRAD, LSTM_GRAD_W, ATTENTION and ATTENTION_GRAD on the CPU backend against
 * float64 references (forward, the workspace planes, and the backward by hand-written
 * BPTT and attention gradients), on odd sizes that split into uneven thread bands,
 * with outputs and workspaces poisoned with NaN and guarded; one thread and two give
 * the same bits. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static double sgm(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ---------------------------------------------------------------- LSTM */

typedef struct lstm_ref {
    double *h, *gates, *c, *hprev, *dg, *dw;
} lstm_ref;

static void lstm_reference(const float *xp, const float *w, const float *bias, const float *dh, int64_t B, int64_t T,
                           int64_t H, int rev, lstm_ref *r) {
    int64_t G = 4 * H, n = B * T;
    r->h = calloc((size_t)(n * H), 8), r->c = calloc((size_t)(n * H), 8), r->hprev = calloc((size_t)(n * H), 8);
    r->gates = calloc((size_t)(n * G), 8), r->dg = calloc((size_t)(n * G), 8), r->dw = calloc((size_t)(G * H), 8);
    double *dhr = calloc((size_t)H, 8), *dc = calloc((size_t)H, 8);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t s = 0; s < T; s++) {
            int64_t t = rev ? T - 1 - s : s, tp = rev ? t + 1 : t - 1, row = b * T + t;
            for (int64_t j = 0; j < G; j++) {
                double v = (double)xp[row * G + j] + bias[j];
                for (int64_t k = 0; k < H && s > 0; k++) v += r->h[(b * T + tp) * H + k] * w[j * H + k];
                r->gates[row * G + j] = j >= 2 * H && j < 3 * H ? tanh(v) : sgm(v);
            }
            for (int64_t j = 0; j < H; j++) {
                const double *gt = r->gates + row * G;
                double cp = s > 0 ? r->c[(b * T + tp) * H + j] : 0;
                r->hprev[row * H + j] = s > 0 ? r->h[(b * T + tp) * H + j] : 0;
                r->c[row * H + j] = gt[H + j] * cp + gt[j] * gt[2 * H + j];
                r->h[row * H + j] = gt[3 * H + j] * tanh(r->c[row * H + j]);
            }
        }
        memset(dhr, 0, (size_t)H * 8);
        memset(dc, 0, (size_t)H * 8);
        for (int64_t s = T - 1; s >= 0; s--) {
            int64_t t = rev ? T - 1 - s : s, tp = rev ? t + 1 : t - 1, row = b * T + t;
            const double *gt = r->gates + row * G;
            double *d = r->dg + row * G;
            for (int64_t j = 0; j < H; j++) {
                double tc = tanh(r->c[row * H + j]), dht = dh[row * H + j] + dhr[j];
                double cp = s > 0 ? r->c[(b * T + tp) * H + j] : 0;
                double dcv = dc[j] + dht * gt[3 * H + j] * (1 - tc * tc);
                d[j] = dcv * gt[2 * H + j] * gt[j] * (1 - gt[j]);
                d[H + j] = dcv * cp * gt[H + j] * (1 - gt[H + j]);
                d[2 * H + j] = dcv * gt[j] * (1 - gt[2 * H + j] * gt[2 * H + j]);
                d[3 * H + j] = dht * tc * gt[3 * H + j] * (1 - gt[3 * H + j]);
                dc[j] = dcv * gt[H + j];
            }
            for (int64_t k = 0; k < H; k++) {
                double v = 0;
                for (int64_t j = 0; j < G; j++) v += d[j] * w[j * H + k];
                dhr[k] = v;
            }
        }
    }
    for (int64_t row = 0; row < n; row++)
        for (int64_t j = 0; j < G; j++)
            for (int64_t k = 0; k < H; k++) r->dw[j * H + k] += r->dg[row * G + j] * r->hprev[row * H + k];
    free(dhr);
    free(dc);
}

static void lstm_ref_free(lstm_ref *r) {
    free(r->h); free(r->gates); free(r->c); free(r->hprev); free(r->dg); free(r->dw);
}

/* Runs the three LSTM kernels on `be`; returns the graph (caller frees) for comparison. */
static void lstm_run(brisk_backend *be, tgraph *t, int64_t B, int64_t T, int64_t H, int rev, int ids[3]) {
    int64_t G = 4 * H;
    int xp = tg_input(t, BRISK_F32, brisk_shape3(B, T, G)), w = tg_input(t, BRISK_F32, brisk_shape2(G, H));
    int bias = tg_input(t, BRISK_F32, brisk_shape1(G)), dh = tg_input(t, BRISK_F32, brisk_shape3(B, T, H));
    for (int64_t i = 0; i < G * H; i++) tg_f(t, w)[i] *= 0.4f; /* keep the recurrence from saturating */
    brisk_attr at = tg_attr0();
    at.kind = rev;
    int fin[3] = {xp, w, bias};
    int l = tg_node_ws(t, BRISK_OP_LSTM, BRISK_F32, brisk_shape3(B, T, H), &at, 3, fin, (size_t)(6 * B * T * H) * 4);
    int gin[3] = {dh, l, w};
    int dg = tg_node(t, BRISK_OP_LSTM_GRAD, BRISK_F32, brisk_shape3(B, T, G), &at, 3, gin);
    int win[2] = {dg, l};
    int dw = tg_node(t, BRISK_OP_LSTM_GRAD_W, BRISK_F32, brisk_shape2(G, H), &at, 2, win);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, t, l, err), err);
    REQUIRE_OK(tg_run(be, t, dg, err), err);
    REQUIRE_OK(tg_run(be, t, dw, err), err);
    ids[0] = l, ids[1] = dg, ids[2] = dw;
}

static void lstm_case(int64_t B, int64_t T, int64_t H, int rev) {
    tgraph t[2];
    int ids[2][3] = {{-1}, {-1}};
    for (int k = 0; k < 2; k++) {
        tg_rng_state = 0x1234567ull + (uint64_t)(B * 1000 + T * 10 + rev); /* the same inputs for both */
        tg_init(&t[k]);
        lstm_run(k ? be2 : be1, &t[k], B, T, H, rev, ids[k]);
    }
    REQUIRE(ids[0][0] >= 0 && ids[1][0] >= 0);
    tgraph *g = &t[0];
    lstm_ref r;
    lstm_reference(tg_f(g, 0), tg_f(g, 1), tg_f(g, 2), tg_f(g, 3), B, T, H, rev, &r);
    int64_t n = B * T * H;
    const float *ws = tg_f(g, ids[0][0]);
    double e[6] = {tg_rel_err(ws, r.h, n), tg_rel_err(ws + n, r.gates, 4 * n), tg_rel_err(ws + 5 * n, r.c, n),
                   tg_rel_err(ws + 6 * n, r.hprev, n), tg_rel_err(tg_f(g, ids[0][1]), r.dg, 4 * n),
                   tg_rel_err(tg_f(g, ids[0][2]), r.dw, 4 * H * H)};
    for (int i = 0; i < 6; i++)
        CHECKF(e[i] <= 2e-6, "lstm B %lld T %lld H %lld rev %d: %s relative error %.3g", (long long)B, (long long)T,
               (long long)H, rev, (const char *[]){"h", "gates", "c", "h_prev", "dgates", "dw_hh"}[i], e[i]);
    for (int i = 0; i < 3; i++)
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
               "lstm: 1 and 2 threads differ in node %d", i);
    lstm_ref_free(&r);
    tg_free(&t[0]);
    tg_free(&t[1]);
}

static void test_lstm(void) {
    lstm_case(1, 1, 1, 0);
    lstm_case(3, 5, 4, 1);
    lstm_case(37, 9, 19, 0);  /* bands of 16 and 21 rows; H crosses the register tiles */
    lstm_case(40, 6, 33, 1);
}

static void test_lstm_bad(void) {
    tgraph t;
    tg_init(&t);
    int xp = tg_input(&t, BRISK_F32, brisk_shape3(2, 3, 8)), w = tg_input(&t, BRISK_F32, brisk_shape2(8, 2));
    int bias = tg_input(&t, BRISK_F32, brisk_shape1(8));
    int in[3] = {xp, w, bias};
    brisk_error err = {0};
    /* no room for the workspace */
    int l = tg_node(&t, BRISK_OP_LSTM, BRISK_F32, brisk_shape3(2, 3, 2), NULL, 3, in);
    CHECK(tg_run(be1, &t, l, &err) == BRISK_ERR_INVALID && strstr(err.msg, "workspace"));
    /* a bias of the wrong length */
    int b2 = tg_input(&t, BRISK_F32, brisk_shape1(7));
    int in2[3] = {xp, w, b2};
    l = tg_node_ws(&t, BRISK_OP_LSTM, BRISK_F32, brisk_shape3(2, 3, 2), NULL, 3, in2, 6 * 2 * 3 * 2 * 4);
    CHECK(tg_run(be1, &t, l, &err) == BRISK_ERR_SHAPE);
    tg_free(&t);
}

/* ---------------------------------------------------------------- attention */

/* float64 forward and backward of one (b, h) over qkv [B, T, 3D]. */
static void attention_reference(const float *qkv, const float *mask, const float *dy, int64_t B, int64_t T, int64_t D,
                                int heads, int causal, double *out, double *dqkv) {
    int64_t dh = D / heads, ld = 3 * D;
    double sc = 1.0 / sqrt((double)dh);
    double *P = calloc((size_t)(T * T), 8), *dP = calloc((size_t)(T * T), 8);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < heads; h++) {
            const float *q = qkv + b * T * ld + h * dh, *k = q + D, *v = q + 2 * D;
            const float *dO = dy + b * T * D + h * dh;
            for (int64_t i = 0; i < T; i++) {
                double m = -INFINITY, s = 0;
                for (int64_t j = 0; j < T; j++) {
                    double x = 0;
                    for (int64_t d = 0; d < dh; d++) x += (double)q[i * ld + d] * k[j * ld + d];
                    int ok = (!causal || j <= i) && (!mask || mask[b * T + j] != 0);
                    P[i * T + j] = ok ? x * sc : -INFINITY;
                    if (P[i * T + j] > m) m = P[i * T + j];
                }
                for (int64_t j = 0; j < T; j++) s += (P[i * T + j] = m == -INFINITY ? 0 : exp(P[i * T + j] - m));
                for (int64_t j = 0; j < T; j++) P[i * T + j] = s > 0 ? P[i * T + j] / s : 0;
                for (int64_t d = 0; d < dh; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < T; j++) o += P[i * T + j] * v[j * ld + d];
                    out[(b * T + i) * D + h * dh + d] = o;
                }
            }
            double *dq = dqkv + b * T * ld + h * dh, *dk = dq + D, *dv = dq + 2 * D;
            for (int64_t i = 0; i < T; i++) {
                double di = 0;
                for (int64_t j = 0; j < T; j++) {
                    double x = 0;
                    for (int64_t d = 0; d < dh; d++) x += (double)dO[i * D + d] * v[j * ld + d];
                    dP[i * T + j] = x;
                    di += x * P[i * T + j];
                }
                for (int64_t j = 0; j < T; j++) dP[i * T + j] = P[i * T + j] * (dP[i * T + j] - di) * sc;
            }
            for (int64_t i = 0; i < T; i++)
                for (int64_t d = 0; d < dh; d++) {
                    double a = 0, bk = 0, cv = 0;
                    for (int64_t j = 0; j < T; j++) {
                        a += dP[i * T + j] * k[j * ld + d];
                        bk += dP[j * T + i] * q[j * ld + d];
                        cv += P[j * T + i] * dO[j * D + d];
                    }
                    dq[i * ld + d] = a, dk[i * ld + d] = bk, dv[i * ld + d] = cv;
                }
        }
    free(P);
    free(dP);
}

static void attention_case(int64_t B, int64_t T, int64_t D, int heads, int causal, int masked) {
    tgraph t[2];
    int ids[2][2];
    for (int k = 0; k < 2; k++) {
        tg_rng_state = 0xabcdefull + (uint64_t)(B * 100 + T * 10 + causal * 2 + masked);
        tg_init(&t[k]);
        tgraph *g = &t[k];
        int qkv = tg_input(g, BRISK_F32, brisk_shape3(B, T, 3 * D)), dy = tg_input(g, BRISK_F32, brisk_shape3(B, T, D));
        int mask = masked ? tg_input(g, BRISK_F32, brisk_shape2(B, T)) : -1;
        for (int64_t i = 0; masked && i < B * T; i++) tg_f(g, mask)[i] = (i % T) % 3 == 2 ? 0.0f : 1.0f;
        brisk_attr at = tg_attr0();
        at.i0 = heads;
        at.kind = causal;
        int fin[2] = {qkv, mask};
        int a = tg_node_ws(g, BRISK_OP_ATTENTION, BRISK_F32, brisk_shape3(B, T, D), &at, masked ? 2 : 1, fin,
                           (size_t)(B * heads * T) * 4);
        int gin[4] = {dy, qkv, a, mask};
        int da = tg_node(g, BRISK_OP_ATTENTION_GRAD, BRISK_F32, brisk_shape3(B, T, 3 * D), &at, masked ? 4 : 3, gin);
        brisk_error err = {0};
        REQUIRE_OK(tg_run(k ? be2 : be1, g, a, &err), &err);
        REQUIRE_OK(tg_run(k ? be2 : be1, g, da, &err), &err);
        ids[k][0] = a, ids[k][1] = da;
    }
    tgraph *g = &t[0];
    double *out = malloc((size_t)(B * T * D) * 8), *dq = malloc((size_t)(B * T * 3 * D) * 8);
    attention_reference(tg_f(g, 0), masked ? tg_f(g, 2) : NULL, tg_f(g, 1), B, T, D, heads, causal, out, dq);
    double e1 = tg_rel_err(tg_f(g, ids[0][0]), out, B * T * D), e2 = tg_rel_err(tg_f(g, ids[0][1]), dq, B * T * 3 * D);
    CHECKF(e1 <= 2e-6 && e2 <= 2e-6, "attention B %lld T %lld D %lld heads %d causal %d mask %d: out %.3g dqkv %.3g",
           (long long)B, (long long)T, (long long)D, heads, causal, masked, e1, e2);
    for (int i = 0; i < 2; i++)
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
               "attention: 1 and 2 threads differ in node %d", i);
    free(out);
    free(dq);
    tg_free(&t[0]);
    tg_free(&t[1]);
}

static void test_attention(void) {
    attention_case(1, 1, 3, 1, 0, 0);
    attention_case(3, 7, 12, 3, 0, 0);
    attention_case(5, 33, 16, 2, 1, 0);  /* T past the GEMM tiles; 10 items on 2 threads */
    attention_case(4, 9, 8, 2, 0, 1);
    attention_case(2, 17, 20, 4, 1, 1);
    /* T x T x dh past GEMM_PAR_MIN: the per-head GEMMs split into bands inside a worker's chunk,
     * on that worker's own scratch (a 2-thread transformer at width 256 crashed there) */
    attention_case(2, 64, 64, 2, 0, 0);
    /* heads of 32, 16 and 48 (whole vectors, where the tests above have 2-8 floats), with
     * padded rows of 80, 16 and 16 */
    attention_case(2, 70, 64, 2, 1, 0);
    attention_case(3, 13, 32, 2, 1, 1);
    attention_case(2, 5, 48, 1, 0, 1);
}

/* With dropout the forward keeps its mask as bits after the lse: they must be DROPOUT's
 * Philox draws (element ((b heads + h) T + i) T + j of the stream at the step, the same
 * numbers the CUDA kernels use), the same on 1 and 2 threads, and the backward built on
 * them must not depend on the thread count either (the float64 check with dropout is
 * tests/ops/test_sequence.c's). */
static void attention_dropout_case(int64_t B, int64_t T, int64_t D, int heads, int causal, float p) {
    tgraph t[2];
    int ids[2][2];
    size_t words = brisk_attention_keep_words(T);
    for (int k = 0; k < 2; k++) {
        tg_rng_state = 0x5eedull + (uint64_t)(B * 100 + T);
        tg_init(&t[k]);
        tgraph *g = &t[k];
        int qkv = tg_input(g, BRISK_F32, brisk_shape3(B, T, 3 * D)), dy = tg_input(g, BRISK_F32, brisk_shape3(B, T, D));
        brisk_attr at = tg_attr0();
        at.i0 = heads;
        at.kind = causal;
        at.f0 = p;
        at.rng = 5;
        int a = tg_node_ws(g, BRISK_OP_ATTENTION, BRISK_F32, brisk_shape3(B, T, D), &at, 1, &qkv,
                           brisk_attention_workspace_bytes(B, T, heads, 1));
        int gin[3] = {dy, qkv, a};
        int da = tg_node(g, BRISK_OP_ATTENTION_GRAD, BRISK_F32, brisk_shape3(B, T, 3 * D), &at, 3, gin);
        brisk_error err = {0};
        REQUIRE_OK(tg_run(k ? be2 : be1, g, a, &err), &err);
        REQUIRE_OK(tg_run(k ? be2 : be1, g, da, &err), &err);
        ids[k][0] = a, ids[k][1] = da;
    }
    brisk_step_state st = tg_state(1);
    const uint32_t *keep = (const uint32_t *)(tg_f(&t[0], ids[0][0]) + B * T * (D + heads));
    uint32_t key[2] = {(uint32_t)st.seed, (uint32_t)(st.seed >> 32)};
    int64_t bad = 0, kept = 0, n = T * T;
    for (int64_t it = 0; it < B * heads; it++)
        for (int64_t k = 0; k < n; k++) {
            uint64_t e = (uint64_t)(it * n + k);
            uint32_t ctr[4] = {(uint32_t)(e / 4), (uint32_t)(e >> 34), 5, st.rng_step}, u[4];
            brisk_philox4x32(ctr, key, u);
            int want = brisk_u32_to_unit(u[e % 4]) > p, got = (int)((keep[it * (int64_t)words + k / 32] >> (k % 32)) & 1u);
            bad += want != got;
            kept += got;
        }
    CHECKF(bad == 0, "attention dropout B %lld T %lld: %lld mask bits differ from Philox", (long long)B, (long long)T,
           (long long)bad);
    CHECKF(kept > 0 && kept < B * heads * n, "attention dropout: %lld of %lld kept", (long long)kept,
           (long long)(B * heads * n));
    for (int i = 0; i < 2; i++)
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
               "attention dropout: 1 and 2 threads differ in node %d", i);
    tg_free(&t[0]);
    tg_free(&t[1]);
}

static void test_attention_dropout(void) {
    attention_dropout_case(3, 7, 12, 3, 0, 0.3f);  /* 49 weights a head: words end mid-item */
    attention_dropout_case(5, 33, 16, 2, 1, 0.1f); /* 10 items on 2 threads */
    attention_dropout_case(3, 29, 64, 4, 1, 0.1f); /* heads of 16 */
}

static void test_attention_bad(void) {
    tgraph t;
    tg_init(&t);
    int qkv = tg_input(&t, BRISK_F32, brisk_shape3(2, 4, 12));
    brisk_attr at = tg_attr0();
    at.i0 = 3; /* D = 4: three heads do not divide it */
    int a = tg_node_ws(&t, BRISK_OP_ATTENTION, BRISK_F32, brisk_shape3(2, 4, 4), &at, 1, &qkv, 2 * 3 * 4 * 4);
    brisk_error err = {0};
    CHECK(tg_run(be1, &t, a, &err) == BRISK_ERR_SHAPE);
    /* dropout on a node without room for its mask bits: an error, not a write past it */
    at.i0 = 2;
    at.f0 = 0.5f;
    a = tg_node_ws(&t, BRISK_OP_ATTENTION, BRISK_F32, brisk_shape3(2, 4, 4), &at, 1, &qkv, 2 * 2 * 4 * 4);
    CHECK(tg_run(be1, &t, a, &err) == BRISK_ERR_SHAPE && strstr(err.msg, "dropout needs"));
    tg_free(&t);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_lstm), T(test_lstm_bad), T(test_attention), T(test_attention_dropout), T(test_attention_bad)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
