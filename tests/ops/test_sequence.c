/* LSTM, GRU and ATTENTION (and through them LSTM_GRAD, LSTM_GRAD_W, GRU_GRAD, GRU_GRAD_W,
 * ATTENTION_GRAD): forward vs float64 references written out here, every input's gradient
 * vs finite differences. Both directions of the recurrences; attention plain, causal, with a padding
 * mask (one sample fully padded but for its first key) and with dropout. */
#include "ops/opcheck.h"

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

static void check_lstm(int64_t B, int64_t T, int64_t H, int reverse, uint64_t seed) {
    oc c;
    oc_init(&c, seed);
    int xp = oc_param(&c, "xp", brisk_shape3(B, T, 4 * H));
    int w = oc_param_avoid(&c, "w_hh", brisk_shape2(4 * H, H), -0.8, 0.8, 0);
    int bias = oc_param(&c, "bias", brisk_shape1(4 * H));
    int out = brisk_lstm(c.g, xp, w, bias, reverse);
    const float *vx = oc_val(&c, xp), *vw = oc_val(&c, w), *vb = oc_val(&c, bias);
    double *ref = calloc((size_t)(B * T * H), sizeof *ref), *h = calloc((size_t)H, sizeof *h),
           *cs = calloc((size_t)H, sizeof *cs), *pre = calloc((size_t)(4 * H), sizeof *pre);
    for (int64_t b = 0; b < B; b++) {
        memset(h, 0, (size_t)H * sizeof *h);
        memset(cs, 0, (size_t)H * sizeof *cs);
        for (int64_t s = 0; s < T; s++) {
            int64_t t = reverse ? T - 1 - s : s;
            for (int64_t j = 0; j < 4 * H; j++) {
                double v = (double)vx[(b * T + t) * 4 * H + j] + vb[j];
                for (int64_t k = 0; k < H; k++) v += h[k] * vw[j * H + k];
                pre[j] = v;
            }
            for (int64_t j = 0; j < H; j++) {
                double ig = sigm(pre[j]), fg = sigm(pre[H + j]), gg = tanh(pre[2 * H + j]), og = sigm(pre[3 * H + j]);
                cs[j] = fg * cs[j] + ig * gg;
                h[j] = og * tanh(cs[j]);
                ref[(b * T + t) * H + j] = h[j];
            }
        }
    }
    char what[64];
    snprintf(what, sizeof what, "lstm B %lld T %lld H %lld%s", (long long)B, (long long)T, (long long)H,
             reverse ? " reverse" : "");
    c.max_fd = 32;
    oc_check(&c, out, ref, what);
    free(ref); free(h); free(cs); free(pre);
    oc_free(&c);
}

static void test_lstm(void) { check_lstm(3, 5, 4, 0, 1); }
static void test_lstm_reverse(void) { check_lstm(2, 6, 5, 1, 2); }
/* 20 rows run in two bands on two threads; H = 17 crosses the GEMM's register tiles */
static void test_lstm_wide(void) { check_lstm(20, 4, 17, 0, 3); }
static void test_lstm_one_step(void) { check_lstm(2, 1, 3, 1, 4); }

static void test_lstm_bad_shapes(void) {
    brisk_graph *g = brisk_graph_new();
    int xp = brisk_input(g, "xp", BRISK_F32, brisk_shape3(2, 3, 8));
    int w = brisk_input(g, "w", BRISK_F32, brisk_shape2(8, 3)); /* 4H = 8 needs H = 2 */
    int b = brisk_input(g, "b", BRISK_F32, brisk_shape1(8));
    CHECK(brisk_lstm(g, xp, w, b, 0) < 0);
    brisk_error e;
    CHECK(brisk_graph_error(g, &e) == BRISK_ERR_SHAPE && strstr(e.msg, "w_hh [4H, H]"));
    brisk_graph_free(g);
}

/* torch.nn.GRU's cell in float64: gates r, z, n; b_hh's n part inside the reset product. */
static void check_gru(int64_t B, int64_t T, int64_t H, int reverse, uint64_t seed) {
    oc c;
    oc_init(&c, seed);
    int xp = oc_param(&c, "xp", brisk_shape3(B, T, 3 * H));
    int w = oc_param_avoid(&c, "w_hh", brisk_shape2(3 * H, H), -0.8, 0.8, 0);
    int bi = oc_param(&c, "b_ih", brisk_shape1(3 * H));
    int bh = oc_param(&c, "b_hh", brisk_shape1(3 * H));
    int out = brisk_gru(c.g, xp, w, bi, bh, reverse);
    const float *vx = oc_val(&c, xp), *vw = oc_val(&c, w), *vi = oc_val(&c, bi), *vh = oc_val(&c, bh);
    double *ref = calloc((size_t)(B * T * H), sizeof *ref), *h = calloc((size_t)H, sizeof *h),
           *hh = calloc((size_t)(3 * H), sizeof *hh);
    for (int64_t b = 0; b < B; b++) {
        memset(h, 0, (size_t)H * sizeof *h);
        for (int64_t s = 0; s < T; s++) {
            int64_t t = reverse ? T - 1 - s : s;
            const float *x = vx + (b * T + t) * 3 * H;
            for (int64_t j = 0; j < 3 * H; j++) {
                double v = vh[j];
                for (int64_t k = 0; k < H; k++) v += h[k] * vw[j * H + k];
                hh[j] = v;
            }
            for (int64_t j = 0; j < H; j++) {
                double r = sigm((double)x[j] + vi[j] + hh[j]), z = sigm((double)x[H + j] + vi[H + j] + hh[H + j]);
                double n = tanh((double)x[2 * H + j] + vi[2 * H + j] + r * hh[2 * H + j]);
                h[j] = (1 - z) * n + z * h[j];
                ref[(b * T + t) * H + j] = h[j];
            }
        }
    }
    char what[64];
    snprintf(what, sizeof what, "gru B %lld T %lld H %lld%s", (long long)B, (long long)T, (long long)H,
             reverse ? " reverse" : "");
    c.max_fd = 32;
    oc_check(&c, out, ref, what);
    free(ref); free(h); free(hh);
    oc_free(&c);
}

static void test_gru(void) { check_gru(3, 5, 4, 0, 11); }
static void test_gru_reverse(void) { check_gru(2, 6, 5, 1, 12); }
/* 20 rows run in two bands on two threads; H = 17 crosses the GEMM's register tiles */
static void test_gru_wide(void) { check_gru(20, 4, 17, 0, 13); }
static void test_gru_one_step(void) { check_gru(2, 1, 3, 1, 14); }

static void test_gru_bad_shapes(void) {
    brisk_graph *g = brisk_graph_new();
    int xp = brisk_input(g, "xp", BRISK_F32, brisk_shape3(2, 3, 6));
    int w = brisk_input(g, "w", BRISK_F32, brisk_shape2(6, 2));
    int bi = brisk_input(g, "bi", BRISK_F32, brisk_shape1(6));
    int bh = brisk_input(g, "bh", BRISK_F32, brisk_shape1(8)); /* 3H = 6 */
    CHECK(brisk_gru(g, xp, w, bi, bh, 0) < 0);
    brisk_error e;
    CHECK(brisk_graph_error(g, &e) == BRISK_ERR_SHAPE && strstr(e.msg, "b_hh [3H]") && strstr(e.msg, "b_hh [8]"));
    brisk_graph_free(g);
}

/* Attention reference in float64: out [B, T, D] from qkv [B, T, 3D]; keep[b][i][j] the
 * dropout factor (NULL: none). */
static void attention_ref(const float *qkv, const float *mask, int64_t B, int64_t T, int64_t D, int heads, int causal,
                          const float *factors, double *out) {
    int64_t dh = D / heads;
    double *p = malloc((size_t)T * sizeof *p);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < heads; h++)
            for (int64_t i = 0; i < T; i++) {
                const float *q = qkv + (b * T + i) * 3 * D + h * dh;
                double m = -INFINITY, sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    const float *k = qkv + (b * T + j) * 3 * D + D + h * dh;
                    double s = 0;
                    for (int64_t d = 0; d < dh; d++) s += (double)q[d] * k[d];
                    s /= sqrt((double)dh);
                    int ok = (!causal || j <= i) && (!mask || mask[b * T + j] != 0);
                    p[j] = ok ? s : -INFINITY;
                    if (p[j] > m) m = p[j];
                }
                for (int64_t j = 0; j < T; j++) sum += (p[j] = m == -INFINITY ? 0 : exp(p[j] - m));
                for (int64_t d = 0; d < dh; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < T; j++) {
                        double w = sum > 0 ? p[j] / sum : 0;
                        if (factors) w *= factors[((b * heads + h) * T + i) * T + j];
                        o += w * qkv[(b * T + j) * 3 * D + 2 * D + h * dh + d];
                    }
                    out[(b * T + i) * D + h * dh + d] = o;
                }
            }
    free(p);
}

static void check_attention(int64_t B, int64_t T, int64_t D, int heads, int causal, int masked, float dropout,
                            uint64_t seed, const char *what) {
    oc c;
    oc_init(&c, seed);
    int qkv = oc_param_avoid(&c, "qkv", brisk_shape3(B, T, 3 * D), -1.5, 1.5, 0);
    float *mask = NULL;
    int mn = -1;
    if (masked) {
        mask = malloc((size_t)(B * T) * sizeof *mask);
        for (int64_t i = 0; i < B * T; i++) mask[i] = (i % T) < T - 1 - (i / T) % 3 ? 1.0f : 0.0f;
        for (int64_t j = 1; j < T; j++) mask[j] = 0.0f; /* sample 0 keeps only key 0 */
        mn = oc_const_f32(&c, brisk_shape2(B, T), mask);
    }
    int out = brisk_attention(c.g, qkv, mn, heads, causal, dropout);
    float *factors = NULL;
    if (dropout > 0) { /* DROPOUT's mask, drawn here from core Philox: seed 1 (oc_build), step 0 */
        int64_t n = B * heads * T * T;
        factors = malloc((size_t)n * sizeof *factors);
        uint32_t key[2] = {1, 0};
        for (int64_t e = 0; e < n; e++) {
            uint32_t ctr[4] = {(uint32_t)(e / 4), 0, c.g->nodes[out].attr.rng, 0}, u[4];
            brisk_philox4x32(ctr, key, u);
            factors[e] = brisk_u32_to_unit(u[e % 4]) > dropout ? 1.0f / (1.0f - dropout) : 0.0f;
        }
    }
    double *ref = malloc((size_t)(B * T * D) * sizeof *ref);
    attention_ref(oc_val(&c, qkv), mask, B, T, D, heads, causal, factors, ref);
    c.max_fd = 40;
    oc_check(&c, out, ref, what);
    free(ref); free(mask); free(factors);
    oc_free(&c);
}

static void test_attention(void) { check_attention(2, 5, 8, 2, 0, 0, 0, 11, "attention"); }
static void test_attention_causal(void) { check_attention(2, 6, 6, 3, 1, 0, 0, 12, "attention causal"); }
static void test_attention_masked(void) { check_attention(3, 5, 4, 1, 0, 1, 0, 13, "attention padding mask"); }
static void test_attention_causal_masked(void) { check_attention(3, 6, 8, 2, 1, 1, 0, 14, "attention causal+mask"); }
static void test_attention_dropout(void) {
    check_attention(2, 7, 8, 2, 0, 0, 0.3f, 15, "attention dropout");
    /* rows of 17 padded to 32 in the CPU backend, the causal keys and the padding biased away */
    check_attention(2, 17, 8, 2, 1, 1, 0.2f, 17, "attention causal+mask+dropout");
    /* heads of whole vectors (16 and 48 floats), where the cases above have 2-4 */
    check_attention(2, 13, 32, 2, 1, 1, 0.2f, 18, "attention dh 16");
    check_attention(2, 5, 48, 1, 0, 1, 0.1f, 19, "attention dh 48");
}

/* a query whose every key is padding gets zeros (PyTorch: NaN), and no gradient */
static void test_attention_all_masked(void) {
    oc c;
    oc_init(&c, 16);
    int qkv = oc_param(&c, "qkv", brisk_shape3(1, 3, 6));
    float mask[3] = {0, 0, 0};
    int out = brisk_attention(c.g, qkv, oc_const_f32(&c, brisk_shape2(1, 3), mask), 1, 0, 0);
    double ref[6] = {0};
    oc_check(&c, out, ref, "attention all masked");
    oc_free(&c);
}

static void test_attention_bad(void) {
    brisk_graph *g = brisk_graph_new();
    brisk_error e;
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape3(2, 4, 12));
    CHECK(brisk_attention(g, x, -1, 3, 0, 0) < 0); /* D = 4: 3 heads do not divide it */
    CHECK(brisk_graph_error(g, &e) == BRISK_ERR_INVALID && strstr(e.msg, "heads"));
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape3(2, 4, 12));
    int m = brisk_input(g, "m", BRISK_F32, brisk_shape2(2, 5));
    CHECK(brisk_attention(g, x, m, 2, 0, 0) < 0);
    CHECK(brisk_graph_error(g, &e) == BRISK_ERR_SHAPE && strstr(e.msg, "mask"));
    brisk_graph_free(g);
}

TEST_MAIN(T(test_lstm), T(test_lstm_reverse), T(test_lstm_wide), T(test_lstm_one_step), T(test_lstm_bad_shapes),
          T(test_gru), T(test_gru_reverse), T(test_gru_wide), T(test_gru_one_step), T(test_gru_bad_shapes),
          T(test_attention), T(test_attention_causal), T(test_attention_masked), T(test_attention_causal_masked),
          T(test_attention_dropout), T(test_attention_all_masked), T(test_attention_bad))
