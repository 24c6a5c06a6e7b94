/* POINTWISE_LOSS (+GRAD), UPSAMPLE2D (+GRAD) and LAYERNORM_GRAD_X without gamma on the CPU
 * backend: against float64, over sizes that span many chunks and planes, bit-identical on
 * 1, 2 and 3 threads; an all-zero mask; layernorm's gradient without gamma is the same bits
 * as with a gamma of ones. */
#include "cpu_test_util.h"
#include "ops/loss_ref.h"
#include "ops/vision_ref.h"

static brisk_backend *be[3];

static void test_losses(void) {
    const int64_t n = 100003; /* 7 chunks of the fixed 16384 */
    const float delta = 0.6f;
    for (int kind = 0; kind < 4; kind++)
        for (int weighted = 0; weighted < 2; weighted++) {
            if (kind == BRISK_LOSS_MSE && !weighted) continue; /* that is BRISK_OP_MSE */
            float first[4] = {0};
            float *firstg = NULL;
            for (int bi = 0; bi < 3; bi++) {
                tgraph t;
                tg_init(&t);
                tg_rng_state = 0x51 + (uint64_t)(kind * 2 + weighted);
                brisk_shape s = brisk_shape2(7, n / 7 + 1);
                int64_t len = brisk_shape_numel(&s);
                int p = tg_input(&t, BRISK_F32, s), tt = tg_input(&t, BRISK_F32, s), w = tg_input(&t, BRISK_F32, s);
                int dl = tg_input(&t, BRISK_F32, brisk_shape_make(0, NULL));
                tg_f(&t, dl)[0] = 0.75f;
                for (int64_t i = 0; i < len; i++) {
                    if (kind == BRISK_LOSS_BCE_LOGITS) tg_f(&t, p)[i] *= 10, tg_f(&t, tt)[i] = tg_randf(0, 1);
                    tg_f(&t, w)[i] = i % 5 == 0 ? 0.0f : tg_randf(0, 2);
                }
                brisk_attr at = tg_attr0();
                at.kind = kind, at.f0 = delta;
                int ins[4] = {p, tt, w}, gin[4] = {dl, p, tt, w};
                int l = tg_node(&t, BRISK_OP_POINTWISE_LOSS, BRISK_F32, brisk_shape_make(0, NULL), &at, 2 + weighted, ins);
                int gn[2];
                for (int which = 0; which < 2; which++) {
                    at.i0 = which;
                    gn[which] = tg_node(&t, BRISK_OP_POINTWISE_LOSS_GRAD, BRISK_F32, s, &at, 3 + weighted, gin);
                }
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(be[bi], &t, l, err), err);
                REQUIRE_OK(tg_run(be[bi], &t, gn[0], err), err);
                REQUIRE_OK(tg_run(be[bi], &t, gn[1], err), err);
                double sum = 0, wsum = 0;
                for (int64_t i = 0; i < len; i++) {
                    double wi = weighted ? tg_f(&t, w)[i] : 1;
                    sum += wi * lref_term(kind, tg_f(&t, p)[i], tg_f(&t, tt)[i], delta);
                    wsum += wi;
                }
                double *rg[2] = {malloc(sizeof(double) * (size_t)len), malloc(sizeof(double) * (size_t)len)};
                for (int64_t i = 0; i < len; i++) {
                    double pv = tg_f(&t, p)[i], k = 0.75 * (weighted ? tg_f(&t, w)[i] : 1) / wsum;
                    rg[0][i] = lref_slope(kind, pv, tg_f(&t, tt)[i], delta) * k;
                    rg[1][i] = kind == BRISK_LOSS_BCE_LOGITS ? -pv * k : -rg[0][i];
                }
                float got = tg_f(&t, l)[0];
                CHECKF(fabs(got - sum / wsum) <= 1e-6 * fabs(sum / wsum), "kind %d weighted %d: loss %.9g, want %.9g",
                       kind, weighted, (double)got, sum / wsum);
                for (int k = 0; k < 2; k++)
                    CHECKF(tg_rel_err(tg_f(&t, gn[k]), rg[k], len) <= 1e-6, "kind %d weighted %d: gradient %d rel err "
                           "%.3g", kind, weighted, k, tg_rel_err(tg_f(&t, gn[k]), rg[k], len));
                if (!bi) {
                    first[0] = got;
                    firstg = malloc(sizeof(float) * (size_t)len);
                    memcpy(firstg, tg_f(&t, gn[0]), sizeof(float) * (size_t)len);
                } else {
                    CHECKF(memcmp(&first[0], &got, 4) == 0 && memcmp(firstg, tg_f(&t, gn[0]), sizeof(float) * (size_t)len) == 0,
                           "kind %d weighted %d: %d threads differ from 1", kind, weighted, bi + 1);
                }
                free(rg[0]), free(rg[1]);
                tg_free(&t);
            }
            free(firstg);
        }
}

/* sum(w) = 0: the loss and the gradient are 0, not NaN; bad input counts are errors */
static void test_loss_edges(void) {
    tgraph t;
    tg_init(&t);
    int p = tg_input(&t, BRISK_F32, brisk_shape1(5)), tt = tg_input(&t, BRISK_F32, brisk_shape1(5));
    int w = tg_input(&t, BRISK_F32, brisk_shape1(5)), dl = tg_input(&t, BRISK_F32, brisk_shape_make(0, NULL));
    memset(tg_f(&t, w), 0, 20);
    tg_f(&t, dl)[0] = 1;
    brisk_attr at = tg_attr0();
    at.kind = BRISK_LOSS_L1;
    int l = tg_node(&t, BRISK_OP_POINTWISE_LOSS, BRISK_F32, brisk_shape_make(0, NULL), &at, 3, (int[]){p, tt, w});
    int gd = tg_node(&t, BRISK_OP_POINTWISE_LOSS_GRAD, BRISK_F32, brisk_shape1(5), &at, 4, (int[]){dl, p, tt, w});
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be[1], &t, l, err), err);
    REQUIRE_OK(tg_run(be[1], &t, gd, err), err);
    CHECK(tg_f(&t, l)[0] == 0.0f);
    for (int i = 0; i < 5; i++) CHECK(tg_f(&t, gd)[i] == 0.0f);
    at.kind = 9;
    int bad = tg_node(&t, BRISK_OP_POINTWISE_LOSS, BRISK_F32, brisk_shape_make(0, NULL), &at, 2, (int[]){p, tt});
    CHECK(tg_run(be[1], &t, bad, err) == BRISK_ERR_INVALID);
    tg_free(&t);
}

/* ---- upsampling */

static void test_upsample(void) {
    const struct { int64_t N, C, H, W; int sh, sw; } cs[] = {{3, 5, 17, 23, 2, 2}, {2, 40, 9, 7, 3, 1}, {1, 2, 1, 1, 4, 4},
                                                              {2, 3, 12, 5, 1, 5}, {4, 16, 32, 30, 2, 2},
                                                              {2, 24, 20, 20, 3, 3}}; /* the last two: in parallel */
    for (int bil = 0; bil < 2; bil++)
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            float *first[2] = {NULL, NULL};
            for (int bi = 0; bi < 3; bi++) {
                tgraph t;
                tg_init(&t);
                tg_rng_state = 0x99 + c;
                brisk_shape xs = brisk_shape4(cs[c].N, cs[c].C, cs[c].H, cs[c].W);
                brisk_shape ys = brisk_shape4(cs[c].N, cs[c].C, cs[c].H * cs[c].sh, cs[c].W * cs[c].sw);
                int64_t nx = brisk_shape_numel(&xs), ny = brisk_shape_numel(&ys);
                int x = tg_input(&t, BRISK_F32, xs), dy = tg_input(&t, BRISK_F32, ys);
                brisk_attr at = tg_attr0();
                at.kind = bil, at.i0 = cs[c].sh, at.i1 = cs[c].sw;
                int y = tg_node(&t, BRISK_OP_UPSAMPLE2D, BRISK_F32, ys, &at, 1, &x);
                int dx = tg_node(&t, BRISK_OP_UPSAMPLE2D_GRAD, BRISK_F32, xs, &at, 1, &dy);
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(be[bi], &t, y, err), err);
                REQUIRE_OK(tg_run(be[bi], &t, dx, err), err);
                double *ry = malloc(sizeof(double) * (size_t)ny), *rx = malloc(sizeof(double) * (size_t)nx);
                vref_upsample(bil, cs[c].N * cs[c].C, cs[c].H, cs[c].W, cs[c].sh, cs[c].sw, tg_f(&t, x), tg_f(&t, dy), ry, rx);
                CHECKF(tg_rel_err(tg_f(&t, y), ry, ny) <= 1e-6 && tg_rel_err(tg_f(&t, dx), rx, nx) <= 1e-6,
                       "%s case %zu: rel err %.3g forward, %.3g gradient", bil ? "bilinear" : "nearest", c,
                       tg_rel_err(tg_f(&t, y), ry, ny), tg_rel_err(tg_f(&t, dx), rx, nx));
                for (int k = 0; k < 2; k++) {
                    int64_t len = k ? nx : ny;
                    float *got = tg_f(&t, k ? dx : y);
                    if (!bi) {
                        first[k] = malloc(sizeof(float) * (size_t)len);
                        memcpy(first[k], got, sizeof(float) * (size_t)len);
                    } else {
                        CHECKF(memcmp(first[k], got, sizeof(float) * (size_t)len) == 0, "%s case %zu %s: %d threads "
                               "differ from 1", bil ? "bilinear" : "nearest", c, k ? "gradient" : "forward", bi + 1);
                    }
                }
                free(ry), free(rx);
                tg_free(&t);
            }
            free(first[0]), free(first[1]);
        }
    /* shapes that do not agree with the scales are an error naming the op */
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape4(1, 2, 3, 3));
    brisk_attr at = tg_attr0();
    at.i0 = at.i1 = 2;
    int y = tg_node(&t, BRISK_OP_UPSAMPLE2D, BRISK_F32, brisk_shape4(1, 2, 6, 5), &at, 1, &x);
    brisk_error err = {0};
    CHECK(tg_run(be[0], &t, y, &err) == BRISK_ERR_SHAPE && strstr(err.msg, "upsample2d"));
    tg_free(&t);
}

/* LAYERNORM_GRAD_X (dy, x): the same bits as (dy, x, ones), on any thread count */
static void test_layernorm_grad_no_gamma(void) {
    for (int bi = 0; bi < 3; bi++) {
        tgraph t;
        tg_init(&t);
        brisk_shape s = brisk_shape2(37, 1500);
        int dy = tg_input(&t, BRISK_F32, s), x = tg_input(&t, BRISK_F32, s), ones = tg_input(&t, BRISK_F32, brisk_shape1(1500));
        for (int i = 0; i < 1500; i++) tg_f(&t, ones)[i] = 1.0f;
        brisk_attr at = tg_attr0();
        at.f0 = 1e-5f;
        int a = tg_node(&t, BRISK_OP_LAYERNORM_GRAD_X, BRISK_F32, s, &at, 2, (int[]){dy, x});
        int b = tg_node(&t, BRISK_OP_LAYERNORM_GRAD_X, BRISK_F32, s, &at, 3, (int[]){dy, x, ones});
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be[bi], &t, a, err), err);
        REQUIRE_OK(tg_run(be[bi], &t, b, err), err);
        CHECKF(memcmp(tg_f(&t, a), tg_f(&t, b), sizeof(float) * 37 * 1500) == 0, "%d threads", bi + 1);
        tg_free(&t);
    }
}

int main(void) {
    for (int i = 0; i < 3; i++) be[i] = brisk_backend_cpu_new(i + 1);
    t_case c[] = {T(test_losses), T(test_loss_edges), T(test_upsample), T(test_layernorm_grad_no_gamma)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    for (int i = 0; i < 3; i++) be[i]->destroy(be[i]);
    return r;
}
