/* The CUDA LSTM's and GRU's index and layout arithmetic (src/backend/cuda/rnn_layout.h),
 * replayed on the host in every build, since no GPU runs it here:
 *   - what the reverse path relies on: the CPU's reverse LSTM (GRU) equals its forward one
 *     run on the time-flipped input, flipped back (h, d xp and the GRU's d hh_n, bit for bit);
 *   - h_prev rebuilt from h by the kernel's index map is the CPU's h_prev plane, at the
 *     offset the d w_hh GEMM reads;
 *   - the GRU's reset gate recomputed as k_gru_r does (h_prev w_hr^T + xp_r + b_ir + b_hr),
 *     and d hh_n = d xp_n r by k_gru_dhn's index map, against the CPU's planes;
 *   - the weight-space map: copy runs (merged only where both sides continue), the bounds
 *     and overlap check, and the identity input matrix, whose GEMM must return xp;
 *   - the reserve space inside the node's workspace: aligned, inside, never over h_prev
 *     (LSTM) or r (GRU);
 *   - in CUDA builds, cuDNN itself where its library is installed (no GPU needed): the
 *     entry points load and it accepts the plans' descriptors for every precision. */
#include "cpu_test_util.h"

#include "backend/cuda/rnn_layout.h"

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
                    int64_t i = (b * T + t) * F + f, src = rnn_flip_src(i, T, F);
                    ok &= src == (b * T + (T - 1 - t)) * F + f && rnn_flip_src(src, T, F) == i;
                }
        CHECKF(ok, "flip of [%lld, %lld, %lld]", (long long)B, (long long)T, (long long)F);
    }
}

static void flip(const float *src, float *dst, int64_t B, int64_t T, int64_t F) {
    for (int64_t i = 0; i < B * T * F; i++) dst[i] = src[rnn_flip_src(i, T, F)];
}

/* The recurrent ops on the CPU for direction rev, an LSTM (gates 4) or a GRU (3); ids[] =
 * node, d xp, d w_hh. xp and dh are given (copied in), w_hh and the biases shared. */
static void run_rnn(tgraph *t, int gates, int64_t B, int64_t T, int64_t H, int rev, const float *xp, const float *w,
                    const float *bias, const float *dh, int ids[3]) {
    int64_t G = gates * H, n = B * T * H;
    int gru = gates == 3;
    tg_init(t);
    int x = tg_input(t, BRISK_F32, brisk_shape3(B, T, G)), wi = tg_input(t, BRISK_F32, brisk_shape2(G, H));
    int bi = tg_input(t, BRISK_F32, brisk_shape1(G)), bh = tg_input(t, BRISK_F32, brisk_shape1(G));
    int dhi = tg_input(t, BRISK_F32, brisk_shape3(B, T, H));
    memcpy(tg_f(t, x), xp, (size_t)(B * T * G) * 4);
    memcpy(tg_f(t, wi), w, (size_t)(G * H) * 4);
    memcpy(tg_f(t, bi), bias, (size_t)G * 4);
    memcpy(tg_f(t, bh), bias + G, (size_t)G * 4);
    memcpy(tg_f(t, dhi), dh, (size_t)n * 4);
    brisk_attr at = tg_attr0();
    at.kind = rev;
    int fin[4] = {x, wi, bi, bh};
    int l = tg_node_ws(t, gru ? BRISK_OP_GRU : BRISK_OP_LSTM, BRISK_F32, brisk_shape3(B, T, H), &at, gru ? 4 : 3, fin,
                       (size_t)((rnn_planes(gates) - 1) * n) * 4);
    int gin[3] = {dhi, l, wi};
    int dg = tg_node_ws(t, gru ? BRISK_OP_GRU_GRAD : BRISK_OP_LSTM_GRAD, BRISK_F32, brisk_shape3(B, T, G), &at, 3,
                        gin, gru ? (size_t)n * 4 : 0);
    int win[2] = {dg, l};
    int dw = tg_node(t, gru ? BRISK_OP_GRU_GRAD_W : BRISK_OP_LSTM_GRAD_W, BRISK_F32, brisk_shape2(G, H), &at, 2, win);
    brisk_error err = {0};
    REQUIRE_OK(tg_run(be, t, l, &err), &err);
    REQUIRE_OK(tg_run(be, t, dg, &err), &err);
    REQUIRE_OK(tg_run(be, t, dw, &err), &err);
    ids[0] = l, ids[1] = dg, ids[2] = dw;
}

static double sgm(double v) { return 1.0 / (1.0 + exp(-v)); }

/* k_gru_r and k_gru_dhn on the host, against the CPU GRU's r and d hh_n. */
static void check_gru_r(const tgraph *t, const int ids[3], const float *xp, const float *w, const float *bias,
                        int64_t B, int64_t T, int64_t H, const char *what) {
    int64_t n = B * T * H;
    const float *buf = t->buf[ids[0]], *dxp = t->buf[ids[1]];
    const float *hprev = (const float *)((const char *)buf + rnn_hprev_at(B, T, H, 3));
    const float *gates = buf + n, *dhn = dxp + 3 * n;
    double worst = 0;
    int same = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t row = i / H, j = i % H;
        double v = (double)xp[rnn_gate_at(i, H, 0)] + bias[j] + bias[3 * H + j];
        for (int64_t k = 0; k < H; k++) v += (double)hprev[row * H + k] * w[j * H + k];
        float r_cpu = gates[row * 3 * H + j]; /* the CPU's gate plane: r, z, n per row */
        double e = fabs(sgm(v) - r_cpu);
        if (e > worst) worst = e;
        float want = dxp[rnn_gate_at(i, H, 2)] * r_cpu;
        same &= memcmp(&want, &dhn[i], 4) == 0;
    }
    CHECKF(worst < 1e-6, "%s: r recomputed from h_prev differs from the CPU's by %.3g", what, worst);
    CHECKF(same, "%s: d hh_n by k_gru_dhn's map differs from the CPU's plane", what);
}

static void direction_case(int gates, int64_t B, int64_t T, int64_t H) {
    int64_t G = gates * H, n = B * T * H;
    float *xp = malloc((size_t)(n * gates) * 4), *w = malloc((size_t)(G * H) * 4), *bias = malloc((size_t)(2 * G) * 4);
    float *dh = malloc((size_t)n * 4), *xpf = malloc((size_t)(n * gates) * 4), *dhf = malloc((size_t)n * 4);
    float *back = malloc((size_t)(n * gates) * 4);
    for (int64_t i = 0; i < gates * n; i++) xp[i] = tg_randf(-1.5f, 1.5f);
    for (int64_t i = 0; i < G * H; i++) w[i] = tg_randf(-0.5f, 0.5f);
    for (int64_t i = 0; i < 2 * G; i++) bias[i] = tg_randf(-0.5f, 0.5f);
    for (int64_t i = 0; i < n; i++) dh[i] = tg_randf(-1.0f, 1.0f);
    flip(xp, xpf, B, T, G);
    flip(dh, dhf, B, T, H);
    tgraph tr, tf;
    int r[3], f[3];
    run_rnn(&tr, gates, B, T, H, 1, xp, w, bias, dh, r);  /* what the op defines */
    run_rnn(&tf, gates, B, T, H, 0, xpf, w, bias, dhf, f); /* what cuDNN computes for it */
    char what[80];
    snprintf(what, sizeof what, "%s B %lld T %lld H %lld", gates == 3 ? "gru" : "lstm", (long long)B, (long long)T,
             (long long)H);
    flip(tg_f(&tf, f[0]), back, B, T, H);
    CHECKF(memcmp(back, tg_f(&tr, r[0]), (size_t)n * 4) == 0, "%s: reverse h != flip(forward h of flipped xp)", what);
    flip(tg_f(&tf, f[1]), back, B, T, G);
    CHECKF(memcmp(back, tg_f(&tr, r[1]), (size_t)(gates * n) * 4) == 0, "%s: reverse d xp differs", what);
    if (gates == 3) {
        flip(tg_f(&tf, f[1]) + 3 * n, back, B, T, H);
        CHECKF(memcmp(back, tg_f(&tr, r[1]) + 3 * n, (size_t)n * 4) == 0, "%s: reverse d hh_n differs", what);
        check_gru_r(&tr, r, xp, w, bias, B, T, H, what);
        check_gru_r(&tf, f, xpf, w, bias, B, T, H, what);
    }
    /* h_prev from h by the kernel's map, both directions, against the CPU's plane */
    tgraph *ts[2] = {&tf, &tr};
    int lid[2] = {f[0], r[0]};
    for (int rev = 0; rev < 2; rev++) {
        const float *buf = tg_f(ts[rev], lid[rev]);
        const float *plane = (const float *)((const char *)buf + rnn_hprev_at(B, T, H, gates));
        int ok = 1;
        for (int64_t i = 0; i < n; i++) {
            int64_t j = rnn_hprev_src(i, T, H, rev);
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
    for (int gates = 3; gates <= 4; gates++) {
        direction_case(gates, 1, 1, 1);
        direction_case(gates, 3, 5, 4);
        direction_case(gates, 37, 9, 19);
    }
}

static void test_runs(void) {
    rnn_run r[4];
    int64_t cont[4] = {100, 110, 120, 130};
    CHECK(rnn_runs(cont, 4, 10, r) == 1 && r[0].dst_off == 100 && r[0].src_off == 0 && r[0].count == 40);
    int64_t gaps[4] = {0, 20, 40, 60};
    int n = rnn_runs(gaps, 4, 10, r);
    CHECK(n == 4);
    for (int k = 0; k < n; k++) CHECK(r[k].dst_off == 20 * k && r[k].src_off == 10 * k && r[k].count == 10);
    int64_t pairs[4] = {0, 10, 50, 60};
    n = rnn_runs(pairs, 4, 10, r);
    CHECK(n == 2 && r[0].count == 20 && r[1].dst_off == 50 && r[1].src_off == 20 && r[1].count == 20);
    /* destination in another order: never merged across the source's order */
    int64_t swapped[4] = {10, 0, 20, 30};
    n = rnn_runs(swapped, 4, 10, r);
    CHECK(n == 3 && r[0].dst_off == 10 && r[1].dst_off == 0 && r[1].src_off == 10 && r[2].count == 20);
    /* three blocks (a GRU's gates): the fourth destination is never read */
    int64_t three[4] = {100, 110, 120, 0};
    CHECK(rnn_runs(three, 3, 10, r) == 1 && r[0].dst_off == 100 && r[0].count == 30);
}

/* PyTorch's layout of one cuDNN layer of `gates` gates: w_ih, w_hh, b_ih, b_hh, each gate-major. */
static rnn_weight_map torch_map(int gates, int64_t H, int64_t *floats) {
    rnn_weight_map m;
    memset(&m, 0, sizeof m);
    m.gates = gates;
    int64_t g = gates, in = g * g * H * H, rec = g * H * H;
    for (int k = 0; k < gates; k++) {
        m.w_in[k] = k * g * H * H;
        m.w_rec[k] = in + k * H * H;
        m.b_in[k] = in + rec + k * H;
        m.b_rec[k] = in + rec + g * H + k * H;
    }
    *floats = in + rec + 2 * g * H;
    return m;
}

static void weight_map_case(int gates) {
    const char *why = NULL;
    for (int64_t H = 1; H <= 9; H += 4) {
        int64_t ws, G = gates * H, in = G * G, rec = gates * H * H;
        rnn_weight_map m = torch_map(gates, H, &ws);
        CHECK(rnn_map_check(&m, H, ws, &why) == 0);
        rnn_run r[4];
        CHECK(rnn_runs(m.w_rec, gates, H * H, r) == 1 && r[0].dst_off == in && r[0].count == rec);
        CHECK(rnn_runs(m.b_in, gates, H, r) == 1 && r[0].dst_off == in + rec && r[0].count == G);
        CHECK(rnn_runs(m.b_rec, gates, H, r) == 1 && r[0].dst_off == in + rec + G && r[0].count == G);
        /* the identity: per gate [H, G] with ones where column = k H + row; its GEMM gives xp */
        float *w = calloc((size_t)ws, 4);
        for (int k = 0; k < gates; k++)
            for (int64_t row = 0; row < H; row++) w[rnn_eye_at(&m, k, H, row)] = 1.0f;
        int ok = 1;
        float xp[36];
        for (int64_t c = 0; c < G; c++) xp[c] = tg_randf(-2.0f, 2.0f);
        for (int k = 0; k < gates; k++)
            for (int64_t row = 0; row < H; row++) {
                float pre = 0;
                for (int64_t c = 0; c < G; c++) {
                    float v = w[m.w_in[k] + row * G + c];
                    ok &= v == (c == k * H + row ? 1.0f : 0.0f);
                    pre += v * xp[c];
                }
                ok &= pre == xp[k * H + row];
            }
        for (int64_t i = in; i < ws; i++) ok &= w[i] == 0.0f; /* nothing outside the input matrices */
        CHECKF(ok, "identity input matrix, %d gates, H %lld", gates, (long long)H);
        free(w);
        /* out of bounds, negative, overlapping */
        rnn_weight_map bad = m;
        bad.b_rec[gates - 1] = ws - H + 1;
        CHECK(rnn_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "a recurrent bias") == 0);
        bad = m;
        bad.w_in[0] = -1;
        CHECK(rnn_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "an input matrix") == 0);
        bad = m;
        bad.w_rec[2] = m.w_rec[1] + H * H - 1;
        CHECK(rnn_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "a recurrent matrix") == 0);
        bad = m;
        bad.b_in[1] = m.w_in[gates - 1];
        CHECK(rnn_map_check(&bad, H, ws, &why) == 1 && strcmp(why, "an input bias") == 0);
    }
}

static void test_weight_map(void) {
    weight_map_case(4);
    weight_map_case(3);
}

static void reserve_case(int gates) {
    const int64_t shapes[3][3] = {{1, 1, 1}, {3, 5, 7}, {64, 60, 128}};
    for (int s = 0; s < 3; s++) {
        int64_t B = shapes[s][0], T = shapes[s][1], H = shapes[s][2], n = B * T * H;
        int64_t end = rnn_reserve_end(gates) * n * 4; /* h_prev (LSTM) or r (GRU) starts here */
        size_t room = (size_t)(end - n * 4);
        size_t sizes[6] = {0, 16, (size_t)n * 4, room > 256 ? room - 256 : 0, room, SIZE_MAX - 100};
        for (int k = 0; k < 6; k++)
            for (uintptr_t base = 4096; base < 4096 + 512; base += 4) {
                int64_t at = rnn_reserve_at(base, B, T, H, gates, sizes[k]);
                if (rnn_reserve_fits(B, T, H, gates, sizes[k]))
                    CHECKF(at >= 0, "%d gates: reserve of %zu bytes, B %lld T %lld H %lld, base %% 256 = %u: not "
                           "placed", gates, sizes[k], (long long)B, (long long)T, (long long)H, (unsigned)(base % 256));
                if (at < 0) continue;
                int ok = (base + (uintptr_t)at) % 256 == 0 && at >= n * 4 && at + (int64_t)sizes[k] <= end;
                CHECKF(ok, "%d gates: reserve at %lld of %zu bytes outside [%lld, %lld)", gates, (long long)at,
                       sizes[k], (long long)(n * 4), (long long)end);
            }
        CHECK(rnn_reserve_at(4096, B, T, H, gates, room + 1) < 0);
        CHECK(!rnn_reserve_fits(B, T, H, gates, room));
    }
    /* the planes after the reserve: the GRU's r, then h_prev last */
    CHECK(rnn_hprev_at(2, 3, 5, gates) == (rnn_planes(gates) - 1) * 30 * 4);
    if (gates == 3) CHECK(rnn_gru_r_at(2, 3, 5) == rnn_reserve_end(3) * 30 * 4 && rnn_hprev_at(2, 3, 5, 3) == 5 * 30 * 4);
}

static void test_reserve(void) {
    reserve_case(4);
    reserve_case(3);
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
    for (int gates = 3; gates <= 4; gates++)
        for (int k = 0; k < 4; k++)
            for (int s = 0; s < 3; s++)
                CHECKF(cuda_rnn_check_descs(ps[k], gates, shapes[s][0], shapes[s][1], shapes[s][2], &err) == BRISK_OK,
                       "%d gates, %s: %s", gates, brisk_gemm_precision_name(ps[k]), err.msg);
    CHECK(cuda_rnn_check_descs(BRISK_GEMM_FP32, 3, 4, 5, (int64_t)1 << 30, &err) == BRISK_ERR_UNSUPPORTED &&
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
