/* CONV2D, CONV2D_GRAD_X, CONV2D_GRAD_W (NCHW and NHWC), BATCHNORM(_GRAD_GB, _GRAD_X) and
 * POOL2D(_GRAD) on the CPU backend: against float64 references, NHWC against NCHW, with outputs poisoned and guarded, with the
 * column block limit lowered so that the blocks of several images, of one image, and of
 * bands of one image's pixels are all taken; one thread and two give the same bits; shapes
 * that do not agree are errors. */
#include "backend/cpu/cpu_internal.h"
#include "cpu_test_util.h"
#include "ops/vision_ref.h"

static brisk_backend *be1, *be2;

static void set_col_limit(int64_t floats) {
    ((cpu_backend *)be1->impl)->conv_col_floats = floats;
    ((cpu_backend *)be2->impl)->conv_col_floats = floats;
}

typedef struct conv_case {
    int64_t N, C, H, W, Co, kh, kw;
    brisk_window w;
} conv_case;

static void conv_run(brisk_backend *be, tgraph *t, const conv_case *k, const vref_conv *r, int ids[3]) {
    int x = tg_input(t, BRISK_F32, brisk_shape4(k->N, k->C, k->H, k->W));
    int w = tg_input(t, BRISK_F32, brisk_shape4(k->Co, k->C / k->w.groups, k->kh, k->kw));
    int dy = tg_input(t, BRISK_F32, brisk_shape4(k->N, k->Co, r->Ho, r->Wo));
    brisk_attr at = tg_attr0();
    at.win = k->w;
    at.win.kh = (int)k->kh, at.win.kw = (int)k->kw;
    int in0[2] = {x, w}, in1[2] = {dy, w}, in2[2] = {dy, x};
    ids[0] = tg_node(t, BRISK_OP_CONV2D, BRISK_F32, t->nodes[dy].shape, &at, 2, in0);
    ids[1] = tg_node(t, BRISK_OP_CONV2D_GRAD_X, BRISK_F32, t->nodes[x].shape, &at, 2, in1);
    ids[2] = tg_node(t, BRISK_OP_CONV2D_GRAD_W, BRISK_F32, t->nodes[w].shape, &at, 2, in2);
    brisk_error err = {0};
    for (int i = 0; i < 3; i++) REQUIRE_OK(tg_run(be, t, ids[i], &err), &err);
}

static void conv_case_run(conv_case k, int64_t limit) {
    set_col_limit(limit);
    vref_conv r;
    vref_conv_init(&r, k.N, k.C, k.H, k.W, k.Co, k.kh, k.kw, k.w);
    tgraph t[2];
    int ids[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
    for (int b = 0; b < 2; b++) {
        tg_rng_state = 0xC0FFEEull + (uint64_t)(k.N * 1000 + k.C * 100 + k.H + k.w.groups + limit);
        tg_init(&t[b]);
        conv_run(b ? be2 : be1, &t[b], &k, &r, ids[b]);
    }
    set_col_limit(CPU_CONV_COL_FLOATS);
    REQUIRE(ids[0][2] >= 0 && ids[1][2] >= 0);
    tgraph *g = &t[0];
    int64_t ny = k.N * k.Co * r.Ho * r.Wo, nx = k.N * k.C * k.H * k.W, nw = k.Co * (k.C / k.w.groups) * k.kh * k.kw;
    double *y = malloc(8 * (size_t)ny), *dx = malloc(8 * (size_t)nx), *dw = malloc(8 * (size_t)nw);
    vref_conv_fwd(&r, tg_f(g, 0), tg_f(g, 1), y);
    vref_conv_dx(&r, tg_f(g, 2), tg_f(g, 1), dx);
    vref_conv_dw(&r, tg_f(g, 2), tg_f(g, 0), dw);
    double e[3] = {tg_rel_err(tg_f(g, ids[0][0]), y, ny), tg_rel_err(tg_f(g, ids[0][1]), dx, nx),
                   tg_rel_err(tg_f(g, ids[0][2]), dw, nw)};
    for (int i = 0; i < 3; i++)
        CHECKF(e[i] <= 2e-6, "conv N %lld C %lld %lldx%lld Co %lld k %lldx%lld s %d p %d d %d g %d limit %lld: %s relative "
               "error %.3g", (long long)k.N, (long long)k.C, (long long)k.H, (long long)k.W, (long long)k.Co,
               (long long)k.kh, (long long)k.kw, k.w.sh, k.w.ph, k.w.dh, k.w.groups, (long long)limit,
               (const char *[]){"y", "dx", "dw"}[i], e[i]);
    for (int i = 0; i < 3; i++)
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
               "conv (limit %lld): 1 and 2 threads differ in %s", (long long)limit, (const char *[]){"y", "dx", "dw"}[i]);
    free(y), free(dx), free(dw);
    tg_free(&t[0]);
    tg_free(&t[1]);
}

static brisk_window wnd(int s, int p, int d, int g) {
    brisk_window w = {.sh = s, .sw = s, .ph = p, .pw = p, .dh = d, .dw = d, .groups = g};
    return w;
}

static void test_conv(void) {
    /* ResNet's shapes in small: the 7x7 stride-2 stem, 3x3 blocks, 1x1 stride-2 downsampling */
    conv_case cases[] = {
        {3, 3, 20, 18, 8, 7, 7, wnd(2, 3, 1, 1)},
        {5, 16, 9, 9, 16, 3, 3, wnd(1, 1, 1, 1)},
        {5, 16, 9, 9, 32, 1, 1, wnd(2, 0, 1, 1)},
        {4, 24, 6, 7, 12, 1, 1, wnd(1, 0, 1, 1)},   /* pointwise: no im2col */
        {3, 8, 11, 10, 12, 3, 3, wnd(2, 2, 2, 4)},  /* dilation and groups */
        {2, 6, 8, 8, 6, 3, 3, wnd(1, 1, 1, 6)},     /* depthwise */
    };
    /* the default limit: several images per block; 4096 floats: one image or a band of it;
     * 200: bands of a single output row */
    int64_t limits[3] = {CPU_CONV_COL_FLOATS, 4096, 200};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int l = 0; l < 3; l++) conv_case_run(cases[i], limits[l]);
}

/* [N, C, H, W] <-> [N, H, W, C] (to_nhwc 0: the reverse), as doubles or floats */
static void transpose_nc(const float *src, float *dst, int64_t N, int64_t C, int64_t H, int64_t W, int to_nhwc) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < H * W; p++) {
                int64_t a = (n * C + c) * H * W + p, b = (n * H * W + p) * C + c;
                if (to_nhwc) dst[b] = src[a];
                else dst[a] = src[b];
            }
}

/* The same case in NHWC, on inputs that are NCHW's transposed: y and dx equal NCHW's
 * transposed, dw equals NCHW's, to 1e-5; each against float64; 1 and 2 threads agree. */
static void nhwc_case_run(conv_case k, int64_t limit) {
    set_col_limit(limit);
    vref_conv r;
    vref_conv_init(&r, k.N, k.C, k.H, k.W, k.Co, k.kh, k.kw, k.w);
    tgraph t[2];
    int ids[2][3], nids[2][3];
    for (int b = 0; b < 2; b++) {
        tg_rng_state = 0xFACADEull + (uint64_t)(k.N * 1000 + k.C * 100 + k.H + k.w.groups + limit);
        tg_init(&t[b]);
        conv_run(b ? be2 : be1, &t[b], &k, &r, ids[b]);
        int x = tg_input(&t[b], BRISK_F32, brisk_shape4(k.N, k.H, k.W, k.C));
        int dy = tg_input(&t[b], BRISK_F32, brisk_shape4(k.N, r.Ho, r.Wo, k.Co));
        transpose_nc(tg_f(&t[b], 0), tg_f(&t[b], x), k.N, k.C, k.H, k.W, 1);
        transpose_nc(tg_f(&t[b], 2), tg_f(&t[b], dy), k.N, k.Co, r.Ho, r.Wo, 1);
        brisk_attr at = tg_attr0();
        at.win = k.w;
        at.win.kh = (int)k.kh, at.win.kw = (int)k.kw, at.win.layout = BRISK_LAYOUT_NHWC;
        int in0[2] = {x, 1}, in1[2] = {dy, 1}, in2[2] = {dy, x};
        nids[b][0] = tg_node(&t[b], BRISK_OP_CONV2D, BRISK_F32, t[b].nodes[dy].shape, &at, 2, in0);
        nids[b][1] = tg_node(&t[b], BRISK_OP_CONV2D_GRAD_X, BRISK_F32, t[b].nodes[x].shape, &at, 2, in1);
        nids[b][2] = tg_node(&t[b], BRISK_OP_CONV2D_GRAD_W, BRISK_F32, t[b].nodes[1].shape, &at, 2, in2);
        brisk_error err = {0};
        for (int i = 0; i < 3; i++) REQUIRE_OK(tg_run(b ? be2 : be1, &t[b], nids[b][i], &err), &err);
    }
    set_col_limit(CPU_CONV_COL_FLOATS);
    tgraph *g = &t[0];
    int64_t n[3] = {k.N * k.Co * r.Ho * r.Wo, k.N * k.C * k.H * k.W, k.Co * (k.C / k.w.groups) * k.kh * k.kw};
    vref_conv rn = r;
    rn.w.layout = BRISK_LAYOUT_NHWC;
    for (int i = 0; i < 3; i++) {
        float *nchw = malloc(4 * (size_t)n[i]);
        double *ref = malloc(8 * (size_t)n[i]), *ref64 = malloc(8 * (size_t)n[i]);
        if (i == 2) memcpy(nchw, tg_f(g, ids[0][2]), 4 * (size_t)n[i]);
        else if (i == 0) transpose_nc(tg_f(g, ids[0][0]), nchw, k.N, k.Co, r.Ho, r.Wo, 1);
        else transpose_nc(tg_f(g, ids[0][1]), nchw, k.N, k.C, k.H, k.W, 1);
        for (int64_t e = 0; e < n[i]; e++) ref[e] = nchw[e];
        int x = nids[0][0] - 2, dy = x + 1; /* the NHWC inputs, appended just before the nodes */
        if (i == 0) vref_conv_fwd(&rn, tg_f(g, x), tg_f(g, 1), ref64);
        else if (i == 1) vref_conv_dx(&rn, tg_f(g, dy), tg_f(g, 1), ref64);
        else vref_conv_dw(&rn, tg_f(g, dy), tg_f(g, x), ref64);
        double e1 = tg_rel_err(tg_f(g, nids[0][i]), ref, n[i]), e2 = tg_rel_err(tg_f(g, nids[0][i]), ref64, n[i]);
        CHECKF(e1 <= 1e-5 && e2 <= 2e-6, "nhwc conv N %lld C %lld %lldx%lld Co %lld k %lldx%lld s %d p %d d %d g %d "
               "limit %lld: %s differs from NCHW by %.3g, from float64 by %.3g", (long long)k.N, (long long)k.C,
               (long long)k.H, (long long)k.W, (long long)k.Co, (long long)k.kh, (long long)k.kw, k.w.sh, k.w.ph,
               k.w.dh, k.w.groups, (long long)limit, (const char *[]){"y", "dx", "dw"}[i], e1, e2);
        CHECKF(memcmp(t[0].buf[nids[0][i]], t[1].buf[nids[1][i]], t[0].nodes[nids[0][i]].bytes) == 0,
               "nhwc conv (limit %lld): 1 and 2 threads differ in %s", (long long)limit,
               (const char *[]){"y", "dx", "dw"}[i]);
        free(nchw), free(ref), free(ref64);
    }
    tg_free(&t[0]);
    tg_free(&t[1]);
}

static void test_conv_nhwc(void) {
    conv_case cases[] = {
        {3, 3, 20, 18, 8, 7, 7, wnd(2, 3, 1, 1)},
        {5, 16, 9, 9, 16, 3, 3, wnd(1, 1, 1, 1)},
        {5, 16, 9, 9, 32, 1, 1, wnd(2, 0, 1, 1)},   /* 1x1 stride 2: im2col */
        {4, 24, 6, 7, 12, 1, 1, wnd(1, 0, 1, 1)},   /* pointwise: one GEMM */
        {4, 24, 6, 7, 12, 1, 1, wnd(1, 0, 1, 3)},   /* pointwise, grouped */
        {3, 8, 11, 10, 12, 3, 3, wnd(2, 2, 2, 4)},  /* dilation and groups */
        {2, 6, 8, 8, 6, 3, 3, wnd(1, 1, 1, 6)},     /* depthwise */
    };
    /* the default limit: one block; 4096 and 200 floats: many blocks, a few rows each */
    int64_t limits[3] = {CPU_CONV_COL_FLOATS, 4096, 200};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int l = 0; l < 3; l++) nhwc_case_run(cases[i], limits[l]);
}

/* 1-D convolutions by Winograd F(4, r) (conv_winograd.c): kernels of 2 to 5 taps, paddings
 * from 0 to r - 1, rows of several tiles with a partial last one, H > 1, and batches of many
 * blocks (dw's sums over several chunks) against float64; 1 and 2 threads give the same bits;
 * the same layer with Winograd turned off (im2col) differs in its bits, so Winograd ran. */
static void winograd_case_run(conv_case k) {
    vref_conv r;
    vref_conv_init(&r, k.N, k.C, k.H, k.W, k.Co, k.kh, k.kw, k.w);
    tgraph t[3];
    int ids[3][3];
    for (int b = 0; b < 3; b++) {
        tg_rng_state = 0xBEEFull + (uint64_t)(k.N * 1000 + k.C * 100 + k.W + k.kw);
        tg_init(&t[b]);
        ((cpu_backend *)be1->impl)->conv_winograd = b < 2;
        conv_run(b == 1 ? be2 : be1, &t[b], &k, &r, ids[b]);
    }
    ((cpu_backend *)be1->impl)->conv_winograd = 1;
    tgraph *g = &t[0];
    int64_t ny = k.N * k.Co * r.Ho * r.Wo, nx = k.N * k.C * k.H * k.W, nw = k.Co * k.C * k.kh * k.kw, nn[3] = {ny, nx, nw};
    double *ref[3] = {malloc(8 * (size_t)ny), malloc(8 * (size_t)nx), malloc(8 * (size_t)nw)};
    vref_conv_fwd(&r, tg_f(g, 0), tg_f(g, 1), ref[0]);
    vref_conv_dx(&r, tg_f(g, 2), tg_f(g, 1), ref[1]);
    vref_conv_dw(&r, tg_f(g, 2), tg_f(g, 0), ref[2]);
    for (int i = 0; i < 3; i++) {
        double e = tg_rel_err(tg_f(g, ids[0][i]), ref[i], nn[i]), e_off = tg_rel_err(tg_f(&t[2], ids[2][i]), ref[i], nn[i]);
        CHECKF(e <= 2e-6 && e_off <= 2e-6, "winograd conv N %lld C %lld H %lld W %lld Co %lld k %lld p %d: %s relative "
               "error %.3g (im2col %.3g)", (long long)k.N, (long long)k.C, (long long)k.H, (long long)k.W,
               (long long)k.Co, (long long)k.kw, k.w.pw, (const char *[]){"y", "dx", "dw"}[i], e, e_off);
        size_t bytes = t[0].nodes[ids[0][i]].bytes;
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], bytes) == 0,
               "winograd conv C %lld k %lld: 1 and 2 threads differ in %s", (long long)k.C, (long long)k.kw,
               (const char *[]){"y", "dx", "dw"}[i]);
        CHECKF(memcmp(t[0].buf[ids[0][i]], t[2].buf[ids[2][i]], bytes) != 0,
               "winograd conv C %lld k %lld: %s is im2col's to the bit (did Winograd run?)", (long long)k.C,
               (long long)k.kw, (const char *[]){"y", "dx", "dw"}[i]);
        free(ref[i]);
    }
    for (int b = 0; b < 3; b++) tg_free(&t[b]);
}

static brisk_window wnd1(int p) {
    brisk_window w = {.sh = 1, .sw = 1, .ph = 0, .pw = p, .dh = 1, .dw = 1, .groups = 1};
    return w;
}

static void test_conv_winograd(void) {
    conv_case cases[] = {
        {4, 32, 1, 60, 64, 1, 5, wnd1(2)},  /* examples/cnn1d.json's layers, 4 windows */
        {3, 64, 1, 30, 64, 1, 5, wnd1(2)},
        {64, 32, 1, 60, 48, 1, 5, wnd1(2)}, /* 960 tiles: 12 blocks, dw in 6 chunks */
        {2, 16, 3, 13, 24, 1, 3, wnd1(1)},  /* H 3, a last tile of 1 output */
        {2, 24, 2, 9, 16, 1, 2, wnd1(0)},
        {3, 16, 1, 11, 20, 1, 4, wnd1(3)},  /* padding r - 1 */
        {5, 16, 1, 23, 16, 1, 5, wnd1(4)},  /* padding 4: three tiles of a row past its end */
        {9, 16, 1, 7, 16, 1, 3, wnd1(1)},   /* rows shorter than a vector: every tile gathered */
        {3, 20, 1, 17, 28, 1, 3, wnd1(1)},  /* channels not a multiple of 8: dw's last groups partial */
        {2, 20, 1, 6, 16, 1, 5, wnd1(0)},   /* Wo 2 < 4: im2col */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].W + 2 * cases[i].w.pw - cases[i].kw + 1 < 4) {
            conv_case_run(cases[i], CPU_CONV_COL_FLOATS); /* not Winograd's: checked as any other */
            continue;
        }
        winograd_case_run(cases[i]);
    }
}

/* The tiles at a row's ends read no inputs of the rows beside it (another channel's, in
 * memory): a NaN at the start of one channel's row and at the end of another's reaches only
 * the outputs of their own row's tiles (Winograd mixes a tile's 8 inputs: all 4 of its
 * outputs), never the edge tiles of the rows beside them. */
static void test_conv_winograd_row_edges(void) {
    conv_case k = {2, 4, 1, 60, 3, 1, 5, wnd1(2)};
    vref_conv r;
    vref_conv_init(&r, k.N, k.C, k.H, k.W, k.Co, k.kh, k.kw, k.w);
    tgraph t;
    tg_rng_state = 0xED6Eull;
    tg_init(&t);
    int ids[3];
    conv_run(be2, &t, &k, &r, ids);
    float *x = tg_f(&t, 0);
    x[(1 * 4 + 2) * 60 + 0] = NAN;  /* image 1, channel 2, the first input: its tile 0 */
    x[(0 * 4 + 1) * 60 + 59] = NAN; /* image 0, channel 1, the last: its tile 14 */
    brisk_error err = {0};
    REQUIRE_OK(tg_run(be2, &t, ids[0], &err), &err);
    const float *y = tg_f(&t, ids[0]);
    int wrong = 0;
    for (int64_t n = 0; n < 2; n++)
        for (int64_t co = 0; co < 3; co++)
            for (int64_t wo = 0; wo < 60; wo++) {
                int own = (n == 1 && wo < 4) || (n == 0 && wo >= 56), nan = isnan(y[(n * 3 + co) * 60 + wo]);
                int needed = (n == 1 && wo < 3) || (n == 0 && wo >= 57); /* windows that hold the NaN */
                wrong += needed ? !nan : !own && nan;
            }
    CHECKF(wrong == 0, "%d outputs NaN where no window or tile holds the NaN, or finite where one does", wrong);
    tg_free(&t);
}

/* The column scratch is bounded by the block limit, not by the batch: a fresh backend with
 * a 4096-float limit runs a layer whose whole-batch column matrix is 100x that. */
static void test_conv_scratch_bound(void) {
    conv_case k = {8, 16, 16, 16, 8, 3, 3, wnd(1, 1, 1, 1)}; /* K = 144, 8 x 256 pixels: 295K floats */
    brisk_backend *be = brisk_backend_cpu_new(2);
    cpu_backend *cb = be->impl;
    cb->conv_col_floats = 4096;
    vref_conv r;
    vref_conv_init(&r, k.N, k.C, k.H, k.W, k.Co, k.kh, k.kw, k.w);
    tgraph t;
    tg_init(&t);
    int ids[3];
    conv_run(be, &t, &k, &r, ids);
    int64_t K = k.C * 9, whole = K * k.N * r.Ho * r.Wo;
    /* a band of 4096 / 144 = 28 pixels: col 144 x 28, plus dw's [8, 144] partial sums */
    CHECKF(cb->conv_scratch_cap <= (size_t)(4096 + k.Co * K) && cb->conv_scratch_cap > 0,
           "scratch %zu floats (limit 4096, whole batch %lld)", cb->conv_scratch_cap, (long long)whole);
    double *y = malloc(8 * (size_t)(k.N * k.Co * r.Ho * r.Wo));
    vref_conv_fwd(&r, tg_f(&t, 0), tg_f(&t, 1), y);
    CHECK_REL(tg_f(&t, ids[0]), y, k.N * k.Co * r.Ho * r.Wo, 2e-6);
    free(y);
    tg_free(&t);
    be->destroy(be);
}

static void test_conv_bad_layout(void) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape4(2, 5, 5, 4)), w = tg_input(&t, BRISK_F32, brisk_shape4(3, 4, 3, 3));
    brisk_attr at = tg_attr0();
    at.win = wnd(1, 0, 1, 1);
    at.win.kh = at.win.kw = 3, at.win.layout = BRISK_LAYOUT_NHWC;
    int in[2] = {x, w};
    brisk_error err = {0};
    int ok = tg_node(&t, BRISK_OP_CONV2D, BRISK_F32, brisk_shape4(2, 3, 3, 3), &at, 2, in);
    REQUIRE_OK(tg_run(be1, &t, ok, &err), &err);
    int wrong = tg_node(&t, BRISK_OP_CONV2D, BRISK_F32, brisk_shape4(2, 3, 3, 4), &at, 2, in); /* NHWC y: Co last */
    CHECK(tg_run(be1, &t, wrong, &err) == BRISK_ERR_SHAPE);
    at.win.layout = 9;
    int bad = tg_node(&t, BRISK_OP_CONV2D, BRISK_F32, brisk_shape4(2, 3, 3, 3), &at, 2, in);
    CHECK(tg_run(be1, &t, bad, &err) == BRISK_ERR_SHAPE && strstr(err.msg, "layout"));
    brisk_attr pa = tg_attr0(); /* an NHWC pool's channels are last: 4, not 3 */
    pa.kind = BRISK_POOL_AVG, pa.win = wnd(1, 0, 1, 1), pa.win.kh = pa.win.kw = 2, pa.win.layout = BRISK_LAYOUT_NHWC;
    int pool = tg_node(&t, BRISK_OP_POOL2D, BRISK_F32, brisk_shape4(2, 4, 4, 3), &pa, 1, &x);
    CHECK(tg_run(be1, &t, pool, &err) == BRISK_ERR_SHAPE);
    int pool_ok = tg_node(&t, BRISK_OP_POOL2D, BRISK_F32, brisk_shape4(2, 4, 4, 4), &pa, 1, &x);
    REQUIRE_OK(tg_run(be1, &t, pool_ok, &err), &err);
    tg_free(&t);
}

static void test_conv_bad(void) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape4(2, 4, 5, 5)), w = tg_input(&t, BRISK_F32, brisk_shape4(3, 4, 3, 3));
    brisk_attr at = tg_attr0();
    at.win = wnd(1, 0, 1, 1);
    at.win.kh = at.win.kw = 3;
    int in[2] = {x, w};
    int wrong = tg_node(&t, BRISK_OP_CONV2D, BRISK_F32, brisk_shape4(2, 3, 4, 3), &at, 2, in); /* want 3x3 */
    brisk_error err = {0};
    CHECK(tg_run(be1, &t, wrong, &err) == BRISK_ERR_SHAPE);
    at.win.groups = 2; /* w's 4 input channels are not C / 2 */
    int grouped = tg_node(&t, BRISK_OP_CONV2D, BRISK_F32, brisk_shape4(2, 3, 3, 3), &at, 2, in);
    CHECK(tg_run(be1, &t, grouped, &err) == BRISK_ERR_SHAPE);
    /* a max-pool gradient must read a max pool's argmax workspace, not any tensor */
    brisk_attr pa = tg_attr0();
    pa.kind = BRISK_POOL_MAX, pa.win = wnd(2, 0, 1, 1), pa.win.kh = pa.win.kw = 2;
    int dy = tg_input(&t, BRISK_F32, brisk_shape4(2, 4, 2, 2)), pin[2] = {dy, dy};
    int pg = tg_node(&t, BRISK_OP_POOL2D_GRAD, BRISK_F32, brisk_shape4(2, 4, 5, 5), &pa, 2, pin);
    CHECK(tg_run(be1, &t, pg, &err) == BRISK_ERR_SHAPE);
    tg_free(&t);
}

/* BATCHNORM forward (train and eval), its two gradients, 1 vs 2 threads, on sizes that
 * split unevenly */
static void bn_run(brisk_backend *be, tgraph *t, int64_t N, int64_t C, int64_t S, int training, int ids[3]) {
    brisk_shape s = brisk_shape4(N, C, S, 1), sc = brisk_shape1(C);
    int x = tg_input(t, BRISK_F32, s), gm = tg_input(t, BRISK_F32, sc), bt = tg_input(t, BRISK_F32, sc);
    int rm = tg_input(t, BRISK_F32, sc), rv = tg_input(t, BRISK_F32, sc), res = tg_input(t, BRISK_F32, s);
    int dy = tg_input(t, BRISK_F32, s);
    for (int64_t c = 0; c < C; c++) tg_f(t, rv)[c] = 0.5f + tg_f(t, rv)[c] * tg_f(t, rv)[c];
    brisk_attr at = tg_attr0();
    at.f0 = 1e-5f, at.f1 = 0.1f, at.kind = 1;
    int in[6] = {x, gm, bt, rm, rv, res};
    ids[0] = tg_node_ws(t, BRISK_OP_BATCHNORM, BRISK_F32, s, &at, 6, in, (size_t)(2 * C) * 4);
    int gin[3] = {dy, ids[0], x};
    ids[1] = tg_node(t, BRISK_OP_BATCHNORM_GRAD_GB, BRISK_F32, brisk_shape2(2, C), &at, 3, gin);
    int xin[5] = {dy, ids[0], x, gm, ids[1]};
    ids[2] = tg_node(t, BRISK_OP_BATCHNORM_GRAD_X, BRISK_F32, s, &at, 5, xin);
    brisk_step_state st = tg_state(training);
    brisk_error err = {0};
    for (int i = 0; i < 3; i++) REQUIRE_OK(tg_run_st(be, t, ids[i], &st, &err), &err);
}

static void test_batchnorm_threads(void) {
    const int64_t shapes[3][3] = {{7, 37, 9}, {4, 3, 1500}, {2, 64, 16}};
    for (int k = 0; k < 3; k++)
        for (int training = 0; training < 2; training++) {
            tgraph t[2];
            int ids[2][3];
            for (int b = 0; b < 2; b++) {
                tg_rng_state = 0xBADC0DEull + (uint64_t)k;
                tg_init(&t[b]);
                bn_run(b ? be2 : be1, &t[b], shapes[k][0], shapes[k][1], shapes[k][2], training, ids[b]);
            }
            for (int i = 0; i < 3; i++)
                CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
                       "batchnorm case %d training %d: 1 and 2 threads differ in node %d", k, training, i);
            /* the running statistics moved identically, and only when training */
            CHECK(memcmp(t[0].buf[3], t[1].buf[3], (size_t)shapes[k][1] * 4) == 0);
            /* the forward against float64 with the statistics it reports in its workspace */
            tgraph *g = &t[0];
            int64_t N = shapes[k][0], C = shapes[k][1], S = shapes[k][2], n = N * C * S;
            const float *ws = tg_f(g, ids[0][0]) + n, *x = tg_f(g, 0), *res = tg_f(g, 5);
            double *ref = malloc(8 * (size_t)n);
            for (int64_t i = 0; i < n; i++) {
                int64_t c = i / S % C;
                double v = (x[i] - (double)ws[c]) * ws[C + c] * tg_f(g, 1)[c] + tg_f(g, 2)[c] + res[i];
                ref[i] = v < 0 ? 0 : v;
            }
            CHECK_REL(tg_f(g, ids[0][0]), ref, n, 2e-6);
            free(ref);
            tg_free(&t[0]);
            tg_free(&t[1]);
        }
}

static void test_pool_kernels(void) {
    const int64_t N = 3, C = 5;
    /* the last six max pools have every window inside: NCHW takes the tap-at-a-time rows
     * (vectors of 8 outputs at strides 1 and 2), NHWC the window loop; ties and a NaN in them.
     * The last three tile their rows exactly, so NCHW runs across the planes, writing each
     * input of the gradient once: [1, 2] over 13 rows of 44 (286 outputs a plane: vectors
     * cross planes), [1, 2] over one row of 6 (3 outputs a plane: plane by plane, scalar
     * gradient) and [1, 3] over 13 rows of 39 (scalar); NHWC's zeroes and scatters */
    brisk_window ws[9] = {{3, 3, 2, 2, 1, 1, 1, 1, 1, 0}, {2, 3, 1, 2, 0, 1, 2, 1, 1, 0}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 0},
                          {1, 2, 1, 2, 0, 0, 1, 1, 1, 0}, {2, 2, 2, 2, 0, 0, 1, 1, 1, 0}, {1, 3, 1, 1, 0, 0, 1, 1, 1, 0},
                          {1, 2, 1, 2, 0, 0, 1, 1, 1, 0}, {1, 2, 1, 2, 0, 0, 1, 1, 1, 0}, {1, 3, 1, 3, 0, 0, 1, 1, 1, 0}};
    int kinds[9] = {BRISK_POOL_MAX, BRISK_POOL_MAX, BRISK_POOL_AVG, BRISK_POOL_MAX, BRISK_POOL_MAX, BRISK_POOL_MAX,
                    BRISK_POOL_MAX, BRISK_POOL_MAX, BRISK_POOL_MAX};
    for (int k = 0; k < 9; k++) {
        const int64_t W = k == 6 ? 44 : k == 7 ? 6 : k == 8 ? 39 : 37, H = k == 7 ? 1 : 13;
        brisk_window w = ws[k];
        int64_t Ho = (H + 2 * w.ph - w.dh * (w.kh - 1) - 1) / w.sh + 1, Wo = (W + 2 * w.pw - w.dw * (w.kw - 1) - 1) / w.sw + 1;
        tgraph t[2];
        int ids[2][4];
        for (int b = 0; b < 2; b++) {
            tg_rng_state = 0x5EEDull + (uint64_t)k;
            tg_init(&t[b]);
            int x = tg_input(&t[b], BRISK_F32, brisk_shape4(N, C, H, W));
            int dy = tg_input(&t[b], BRISK_F32, brisk_shape4(N, C, Ho, Wo));
            if (k == 0 || k >= 3) tg_f(&t[b], x)[17] = NAN; /* NaN wins its windows, as in PyTorch */
            for (int64_t q = 40; q < 48 && k >= 3; q++) tg_f(&t[b], x)[q] = 0.5f; /* ties: the first wins */
            brisk_attr at = tg_attr0();
            at.kind = kinds[k], at.win = w;
            size_t argb = kinds[k] == BRISK_POOL_MAX ? (size_t)(N * C * Ho * Wo) * 4 : 0; /* the argmax */
            ids[b][0] = tg_node_ws(&t[b], BRISK_OP_POOL2D, BRISK_F32, brisk_shape4(N, C, Ho, Wo), &at, 1, &x, argb);
            int gin[2] = {dy, ids[b][0]};
            ids[b][1] = tg_node(&t[b], BRISK_OP_POOL2D_GRAD, BRISK_F32, brisk_shape4(N, C, H, W), &at,
                                kinds[k] == BRISK_POOL_MAX ? 2 : 1, gin);
            /* the same in NHWC, on the inputs transposed */
            int xn = tg_input(&t[b], BRISK_F32, brisk_shape4(N, H, W, C));
            int dyn = tg_input(&t[b], BRISK_F32, brisk_shape4(N, Ho, Wo, C));
            transpose_nc(tg_f(&t[b], x), tg_f(&t[b], xn), N, C, H, W, 1);
            transpose_nc(tg_f(&t[b], dy), tg_f(&t[b], dyn), N, C, Ho, Wo, 1);
            at.win.layout = BRISK_LAYOUT_NHWC;
            ids[b][2] = tg_node_ws(&t[b], BRISK_OP_POOL2D, BRISK_F32, brisk_shape4(N, Ho, Wo, C), &at, 1, &xn, argb);
            int gn[2] = {dyn, ids[b][2]};
            ids[b][3] = tg_node(&t[b], BRISK_OP_POOL2D_GRAD, BRISK_F32, brisk_shape4(N, H, W, C), &at,
                                kinds[k] == BRISK_POOL_MAX ? 2 : 1, gn);
            brisk_error err = {0};
            for (int i = 0; i < 4; i++) REQUIRE_OK(tg_run(b ? be2 : be1, &t[b], ids[b][i], &err), &err);
        }
        /* NHWC: NCHW's y, argmax and dx transposed, bit for bit (the same sums in the same order) */
        float *tr = malloc(4 * (size_t)(N * C * H * W));
        transpose_nc(tg_f(&t[0], ids[0][0]), tr, N, C, Ho, Wo, 1);
        CHECKF(memcmp(tr, tg_f(&t[0], ids[0][2]), 4 * (size_t)(N * C * Ho * Wo)) == 0, "pool case %d: NHWC y", k);
        if (kinds[k] == BRISK_POOL_MAX) {
            transpose_nc(tg_f(&t[0], ids[0][0]) + N * C * Ho * Wo, tr, N, C, Ho, Wo, 1);
            CHECKF(memcmp(tr, tg_f(&t[0], ids[0][2]) + N * C * Ho * Wo, 4 * (size_t)(N * C * Ho * Wo)) == 0,
                   "pool case %d: NHWC argmax", k);
        }
        transpose_nc(tg_f(&t[0], ids[0][1]), tr, N, C, H, W, 1);
        CHECKF(memcmp(tr, tg_f(&t[0], ids[0][3]), 4 * (size_t)(N * C * H * W)) == 0, "pool case %d: NHWC dx", k);
        free(tr);
        for (int i = 2; i < 4; i++)
            CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
                   "pool case %d: NHWC, 1 and 2 threads differ in node %d", k, i);
        double *y = malloc(8 * (size_t)(N * C * Ho * Wo)), *dx = malloc(8 * (size_t)(N * C * H * W));
        vref_pool(kinds[k] == BRISK_POOL_MAX, N * C, H, W, w, tg_f(&t[0], 0), y, tg_f(&t[0], 1), dx);
        const float *got = tg_f(&t[0], ids[0][0]);
        int bad = 0;
        for (int64_t i = 0; i < N * C * Ho * Wo; i++)
            bad += isnan(y[i]) ? !isnan(got[i]) : fabs(got[i] - y[i]) > 1e-6 * (1 + fabs(y[i]));
        CHECKF(bad == 0, "pool case %d: %d outputs off", k, bad);
        bad = 0;
        got = tg_f(&t[0], ids[0][1]);
        for (int64_t i = 0; i < N * C * H * W; i++) bad += fabs(got[i] - dx[i]) > 1e-6 * (1 + fabs(dx[i]));
        CHECKF(bad == 0, "pool case %d: %d gradients off", k, bad);
        for (int i = 0; i < 2; i++)
            CHECKF(memcmp(t[0].buf[ids[0][i]], t[1].buf[ids[1][i]], t[0].nodes[ids[0][i]].bytes) == 0,
                   "pool case %d: 1 and 2 threads differ in node %d", k, i);
        free(y), free(dx);
        tg_free(&t[0]);
        tg_free(&t[1]);
    }
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_conv), T(test_conv_nhwc), T(test_conv_winograd), T(test_conv_winograd_row_edges), T(test_conv_scratch_bound), T(test_conv_bad), T(test_conv_bad_layout),
                  T(test_batchnorm_threads), T(test_pool_kernels)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
