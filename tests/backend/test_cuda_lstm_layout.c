/* The CUDA LSTM's index and layout arithmetic (src/backend/cuda/lstm_layout.h), replayed on
 * the host in every build, since no GPU runs it here:
 *   - what the reverse path relies on: the CPU's reverse LSTM equals its forward LSTM run
 *     on the time-flipped input, flipped back (h and the gate gradients, bit for bit);
 *   - h_prev rebuilt from h by the kernel's index map is the CPU's h_prev plane, at the
 *     offset LSTM_GRAD_W's GEMM reads;
 *   - the weight-space map: copy runs (merged only where both sides continue), the bounds
 *     and overlap check, and the identity input matrix, whose GEMM must return xp;
 *   - the reserve space inside the node's workspace: aligned, inside, never over h_prev;
 *   - in CUDA builds, cuDNN itself where its library is installed (no GPU needed): the
 *     entry points load and it accepts the plans' descriptors for every precision. */
#include "cpu_test_util.h"

#include "backend/cuda/lstm_layout.h"

#if BRISK_HAVE_CUDA
#include "backend/cuda/cudnn_rnn.h"

#include <dlfcn.h>
#endif

static brisk_backend *be;

static void test_flip(void) {
    const int64_t shapes[3][3] = {{1, 1, 1}, {2, 3, 5}, {3, 7, 4}};
    for (int s = 0; s < 3; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], F = shapes[s][2];
        int ok = 1;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t f = 0; f < F; f++) {
                    int64_t i = (b * T + t) * F + f, src = lstm_flip_src(i, T, F);
                    ok &= src == (b * T + (T - 1 - t)) * F + f && lstm_flip_src(src, T, F) == i;
                }
        CHECKF(ok, "flip of [%lld, %lld, %lld]", (long long)B, (long long)T, (long long)F);
    }
}

static void flip(const float *src, float *dst, int64_t B, int64_t T, int64_t F) {
    for (int64_t i = 0; i < B * T * F; i++) dst[i] = src[lstm_flip_src(i, T, F)];
}

/* The three LSTM ops on the CPU for direction rev; ids[] = lstm, dgates, dw. xp and dh are
 * given (copied in), w_hh and bias shared. */
static void run_lstm(tgraph *t, int64_t B, int64_t T, int64_t H, int rev, const float *xp, const float *w,
                     const float *bias, const float *dh, int ids[3]) {
    int64_t G = 4 * H;
    tg_init(t);
    int x = tg_input(t, BRISK_F32, brisk_shape3(B, T, G)), wi = tg_input(t, BRISK_F32, brisk_shape2(G, H));
    int bi = tg_input(t, BRISK_F32, brisk_shape1(G)), dhi = tg_input(t, BRISK_F32, brisk_shape3(B, T, H));
    memcpy(tg_f(t, x), xp, (size_t)(B * T * G) * 4);
    memcpy(tg_f(t, wi), w, (size_t)(G * H) * 4);
    memcpy(tg_f(t, bi), bias, (size_t)G * 4);
    memcpy(tg_f(t, dhi), dh, (size_t)(B * T * H) * 4);
    brisk_attr at = tg_attr0();
    at.kind = rev;
    int fin[3] = {x, wi, bi};
    int l = tg_node_ws(t, BRISK_OP_LSTM, BRISK_F32, brisk_shape3(B, T, H), &at, 3, fin, (size_t)(6 * B * T * H) * 4);
    int gin[3] = {dhi, l, wi};
    int dg = tg_node(t, BRISK_OP_LSTM_GRAD, BRISK_F32, brisk_shape3(B, T, G), &at, 3, gin);
    int win[2] = {dg, l};
    int dw = tg_node(t, BRISK_OP_LSTM_GRAD_W, BRISK_F32, brisk_shape2(G, H), &at, 2, win);
    brisk_error err = {0};
    REQUIRE_OK(tg_run(be, t, l, &err), &err);
    REQUIRE_OK(tg_run(be, t, dg, &err), &err);
    REQUIRE_OK(tg_run(be, t, dw, &err), &err);
    ids[0] = l, ids[1] = dg, ids[2] = dw;
}

static void direction_case(int64_t B, int64_t T, int64_t H) {
    int64_t G = 4 * H, n = B * T * H;
    float *xp = malloc((size_t)(n * 4) * 4), *w = malloc((size_t)(G * H) * 4), *bias = malloc((size_t)G * 4);
    float *dh = malloc((size_t)n * 4), *xpf = malloc((size_t)(n * 4) * 4), *dhf = malloc((size_t)n * 4);
    float *back = malloc((size_t)(n * 4) * 4);
    for (int64_t i = 0; i < 4 * n; i++) xp[i] = tg_randf(-1.5f, 1.5f);
    for (int64_t i = 0; i < G * H; i++) w[i] = tg_randf(-0.5f, 0.5f);
    for (int64_t i = 0; i < G; i++) bias[i] = tg_randf(-0.5f, 0.5f);
    for (int64_t i = 0; i < n; i++) dh[i] = tg_randf(-1.0f, 1.0f);
    flip(xp, xpf, B, T, G);
    flip(dh, dhf, B, T, H);
    tgraph tr, tf;
    int r[3], f[3];
    run_lstm(&tr, B, T, H, 1, xp, w, bias, dh, r);  /* what the op defines */
    run_lstm(&tf, B, T, H, 0, xpf, w, bias, dhf, f); /* what cuDNN computes for it */
    char what[80];
    snprintf(what, sizeof what, "B %lld T %lld H %lld", (long long)B, (long long)T, (long long)H);
    flip(tg_f(&tf, f[0]), back, B, T, H);
    CHECKF(memcmp(back, tg_f(&tr, r[0]), (size_t)n * 4) == 0, "%s: reverse h != flip(forward h of flipped xp)", what);
    flip(tg_f(&tf, f[1]), back, B, T, G);
    CHECKF(memcmp(back, tg_f(&tr, r[1]), (size_t)(4 * n) * 4) == 0, "%s: reverse gate gradients differ", what);
    /* h_prev from h by the kernel's map, both directions, against the CPU's plane */
    tgraph *ts[2] = {&tf, &tr};
    int lid[2] = {f[0], r[0]};
    for (int rev = 0; rev < 2; rev++) {
        const float *buf = tg_f(ts[rev], lid[rev]);
        const float *plane = (const float *)((const char *)buf + lstm_hprev_at(B, T, H));
        int ok = 1;
        for (int64_t i = 0; i < n; i++) {
            int64_t j = lstm_hprev_src(i, T, H, rev);
            float want = j < 0 ? 0.0f : buf[j];
            ok &= memcmp(&want, &plane[i], 4) == 0;
        }
        CHECKF(ok, "%s: h_prev map (reverse %d) differs from the CPU's plane", what, rev);
    }
    free(xp), free(w), free(bias), free(dh), free(xpf), free(dhf), free(back);
    tg_free(&tr);
    tg_free(&tf);
}

static void test_direction_and_hprev(void) {
    direction_case(1, 1, 1);
    direction_case(3, 5, 4);
    direction_case(37, 9, 19);
}

static void test_runs(void) {
    lstm_run r[4];
    int64_t cont[4] = {100, 110, 120, 130};
    CHECK(lstm_runs(cont, 10, r) == 1 && r[0].dst_off == 100 && r[0].src_off == 0 && r[0].count == 40);
    int64_t gaps[4] = {0, 20, 40, 60};
    int n = lstm_runs(gaps, 10, r);
    CHECK(n == 4);
    for (int k = 0; k < n; k++) CHECK(r[k].dst_off == 20 * k && r[k].src_off == 10 * k && r[k].count == 10);
    int64_t pairs[4] = {0, 10, 50, 60};
    n = lstm_runs(pairs, 10, r);
    CHECK(n == 2 && r[0].count == 20 && r[1].dst_off == 50 && r[1].src_off == 20 && r[1].count == 20);
    /* destination in another order: never merged across the source's order */
    int64_t swapped[4] = {10, 0, 20, 30};
    n = lstm_runs(swapped, 10, r);
    CHECK(n == 3 && r[0].dst_off == 10 && r[1].dst_off == 0 && r[1].src_off == 10 && r[2].count == 20);
}

/* PyTorch's layout of one cuDNN LSTM layer: w_ih, w_hh, b_ih, b_hh, each gate-major. */
static lstm_weight_map torch_map(int64_t H, int64_t *floats) {
    lstm_weight_map m;
    for (int k = 0; k < 4; k++) {
        m.w_in[k] = k * 4 * H * H;
        m.w_rec[k] = 16 * H * H + k * H * H;
        m.b_in[k] = 20 * H * H + k * H;
        m.b_rec[k] = 20 * H * H + 4 * H + k * H;
    }
    *floats = 20 * H * H + 8 * H;
    return m;
}

static void test_weight_map(void) {
    const char *why = NULL;
    for (int64_t H = 1; H <= 9; H += 4) {
        int64_t ws;
        lstm_weight_map m = torch_map(H, &ws);
        CHECK(lstm_map_check(&m, H, ws, &why) == 0);
        lstm_run r[4];
        CHECK(lstm_runs(m.w_rec, H * H, r) == 1 && r[0].dst_off == 16 * H * H && r[0].count == 4 * H * H);
        CHECK(lstm_runs(m.b_in, H, r) == 1 && r[0].dst_off == 20 * H * H && r[0].count == 4 * H);
        /* the identity: per gate [H, 4H] with ones where column = k H + row; its GEMM gives xp */
        float *w = calloc((size_t)ws, 4);
        for (int k = 0; k < 4; k++)
            for (int64_t row = 0; row < H; row++) w[lstm_eye_at(&m, k, H, row)] = 1.0f;
        int ok = 1;
        float xp[36];
        for (int64_t c = 0; c < 4 * H; c++) xp[c] = tg_randf(-2.0f, 2.0f);
        for (int k = 0; k < 4; k++)
            for (int64_t row = 0; row < H; row++) {
                float pre = 0;
                for (int64_t c = 0; c < 4 * H; c++) {
                    float v = w[m.w_in[k] + row * 4 * H + c];
                    ok &= v == (c == k * H + row ? 1.0f : 0.0f);
                    pre += v * xp[c];
                }
                ok &= pre == xp[k * H + row];
            }
        for (int64_t i = 16 * H * H; i < ws; i++) ok &= w[i] == 0.0f; /* nothing outside the input matrices */
        CHECKF(ok, "identity input matrix, H %lld", (long long)H);
        free(w);
        /* out of bounds, negative, overlapping */
        lstm_weight_map bad = m;
        bad.b_rec[3] = ws - H + 1;
        CHECK(lstm_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "a recurrent bias") == 0);
        bad = m;
        bad.w_in[0] = -1;
        CHECK(lstm_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "an input matrix") == 0);
        bad = m;
        bad.w_rec[2] = m.w_rec[1] + H * H - 1;
        CHECK(lstm_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "a recurrent matrix") == 0);
        bad = m;
        bad.b_in[1] = m.w_in[3];
        CHECK(lstm_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "an input bias") == 0);
    }
}

static void test_reserve(void) {
    const int64_t shapes[3][3] = {{1, 1, 1}, {3, 5, 7}, {64, 60, 128}};
    for (int s = 0; s < 3; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], H = shapes[s][2], n = B * T * H;
        size_t room = (size_t)(5 * n) * 4; /* [BTH, 6BTH) floats */
        size_t sizes[6] = {0, 16, (size_t)n * 4, room > 256 ? room - 256 : 0, room, SIZE_MAX - 100};
        for (int k = 0; k < 6; k++)
            for (uintptr_t base = 4096; base < 4096 + 512; base += 4) {
                int64_t at = lstm_reserve_at(base, B, T, H, sizes[k]);
                if (lstm_reserve_fits(B, T, H, sizes[k]))
                    CHECKF(at >= 0, "reserve of %zu bytes, B %lld T %lld H %lld, base %% 256 = %u: not placed",
                           sizes[k], (long long)B, (long long)T, (long long)H, (unsigned)(base % 256));
                if (at < 0) continue;
                int ok = (base + (uintptr_t)at) % 256 == 0 && at >= n * 4 &&
                         at + (int64_t)sizes[k] <= lstm_hprev_at(B, T, H);
                CHECKF(ok, "reserve at %lld of %zu bytes outside [%lld, %lld)", (long long)at, sizes[k],
                       (long long)(n * 4), (long long)lstm_hprev_at(B, T, H));
            }
        CHECK(lstm_reserve_at(4096, B, T, H, (size_t)(5 * n) * 4 + 1) < 0);
        CHECK(!lstm_reserve_fits(B, T, H, (size_t)(5 * n) * 4));
    }
}

#if BRISK_HAVE_CUDA
static void test_cudnn_on_host(void) {
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    const char *why = cuda_rnn_missing();
    if (!lib) {
        CHECKF(why && strstr(why, "cuDNN 9"), "no libcudnn.so.9, yet the reason is \"%s\"", why ? why : "(none)");
        printf("no libcudnn.so.9 here: \"%s\"; descriptors not checked\n", why ? why : "");
        return;
    }
    dlclose(lib);
    if (why && strstr(why, "cudnn.h")) { /* built without cuDNN's headers */
        printf("%s; descriptors not checked\n", why);
        return;
    }
    CHECKF(!why, "libcudnn.so.9 is here, yet: %s", why);
    CHECK(cuda_rnn_missing() == why); /* loaded once: the same answer */
    brisk_gemm_precision ps[4] = {BRISK_GEMM_FP32, BRISK_GEMM_TF32, BRISK_GEMM_BF16, BRISK_GEMM_FP16};
    const int64_t shapes[3][3] = {{1, 1, 1}, {37, 9, 19}, {256, 60, 128}};
    brisk_error err = {0};
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < 3; s++)
            CHECKF(cuda_rnn_check_descs(ps[k], shapes[s][0], shapes[s][1], shapes[s][2], &err) == BRISK_OK,
                   "%s: %s", brisk_gemm_precision_name(ps[k]), err.msg);
    CHECK(cuda_rnn_check_descs(BRISK_GEMM_FP32, 4, 5, (int64_t)1 << 30, &err) == BRISK_ERR_UNSUPPORTED &&
          strstr(err.msg, "int sizes"));
}
#endif

int main(void) {
    be = brisk_backend_cpu_new(2);
    if (!be) return 1;
    t_case c[] = {T(test_flip), T(test_direction_and_hprev), T(test_runs), T(test_weight_map), T(test_reserve),
#if BRISK_HAVE_CUDA
                  T(test_cudnn_on_host),
#endif
    };
    int rc = t_run(c, (int)(sizeof c / sizeof c[0]));
    be->destroy(be);
    return rc;
}
