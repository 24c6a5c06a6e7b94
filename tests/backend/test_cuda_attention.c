/* ATTENTION and ATTENTION_GRAD on the CUDA backend (k_attention.cu) against the CPU
 * backend on the same random inputs: the output with its saved log-sum-exp, and dqkv,
 * over T in {1, 7, 60, 128, 129, 512} (one key tile, several, a partial last tile, the
 * backward's query tiles), head dims {8, 32, 64, 128} (one to four values per lane; 128
 * takes the 2-warp backward), causal or not, with and without dropout, with a padding
 * mask that leaves some queries no key at all. fp32: relative norm error <= 2e-5 for the
 * forward, 1e-4 for the gradient (exp and the sums run in another order); under a bf16
 * backend (attention stays fp32 there: no GEMM reads qkv) <= 1e-3 / 1e-2.
 * Dropout masks: with Q = K = 0 every kept weight of a row is equal and V one-hot per key,
 * so out[i][j] != 0 exactly when the mask keeps (i, j): the GPU's zeros must be the
 * CPU's, element for element. Deterministic: two GPU runs give the same bits.
 * BRISK_TEST_QUICK=1 runs an eighth of the sweeps (for compute-sanitizer). Skips without a GPU. */
#include "backend/cuda_test_util.h"
#include "ops/ops_internal.h"

typedef struct attn_graph {
    brisk_graph *g;
    int qkv, mask, dy, att, grad;
} attn_graph;

static attn_graph attn_build(int64_t B, int64_t T, int64_t D, int heads, int causal, int masked, float p) {
    attn_graph a = {.g = brisk_graph_new(), .mask = -1};
    brisk_graph *g = a.g;
    a.qkv = ct_input(g, BRISK_F32, brisk_shape3(B, T, 3 * D), -1.5f, 1.5f);
    if (masked) a.mask = ct_input(g, BRISK_F32, brisk_shape2(B, T), 0, 1);
    a.dy = ct_input(g, BRISK_F32, brisk_shape3(B, T, D), -1, 1);
    a.att = brisk_attention(g, a.qkv, a.mask, heads, causal, p);
    a.grad = a.att >= 0 ? brisk_bw_attention(g, a.att, a.dy, 0) : -1;
    if (a.grad >= 0) {
        g->nodes[a.att].keep = 1;
        g->loss = g->output = a.grad;
    }
    return a;
}

/* Padding: key j of sample b is padding when (7 j + 3 b) % 5 == 0 (key 0 of sample 0,
 * so under causal its query 0 has nothing to attend to); sample 1 is all padding. */
static brisk_status set_mask(ct_pair *p, const attn_graph *a, int64_t B, int64_t T, brisk_error *err) {
    int idx = -1;
    for (int i = 0; i < a->g->n_inputs; i++)
        if (a->g->inputs[i].node == a->mask) idx = i;
    float *m = malloc((size_t)(B * T) * sizeof(float) + 4);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < T; j++) m[b * T + j] = b == 1 || (7 * j + 3 * b) % 5 == 0 ? 0.0f : 1.0f;
    brisk_status st = brisk_exec_set_input(p->cpu, idx, m, err);
    if (!st) st = brisk_exec_set_input(p->gpu, idx, m, err);
    free(m);
    return st;
}

/* The attention node's output and, behind it in the same buffer, its lse workspace
 * (brisk_exec_read returns the output only), as one host array. */
static float *read_att(brisk_exec *ex, int att, size_t *n, brisk_error *err) {
    const brisk_node *a = &ex->g->nodes[att];
    size_t out = (size_t)brisk_shape_numel(&a->shape), lse = (size_t)(a->shape.d[0] * a->attr.i0 * a->shape.d[1]);
    float *h = malloc((out + lse) * sizeof(float) + 4);
    if (ex->be->download(ex->be, h, ex->ptr[att], (out + lse) * sizeof(float), err)) {
        free(h);
        return NULL;
    }
    *n = out + lse;
    return h;
}

static int att_compare(ct_pair *p, int att, double tol, const char *what) {
    brisk_error err = {0};
    size_t n = 0, m = 0;
    float *g = read_att(p->gpu, att, &n, &err), *c = read_att(p->cpu, att, &m, &err);
    int ok = g && c && n == m;
    if (!ok) fprintf(stderr, "%s: reading the attention output: %s\n", what, err.msg);
    const brisk_node *a = &p->cpu->g->nodes[att];
    size_t out = (size_t)brisk_shape_numel(&a->shape);
    if (ok) {
        double eo = ct_rel_err(g, c, (int64_t)out), el = ct_rel_err(g + out, c + out, (int64_t)(n - out));
        ok = eo <= tol && el <= tol;
        if (!ok) fprintf(stderr, "%s: out relative error %.3g, lse %.3g (tolerance %.3g)\n", what, eo, el, tol);
    }
    free(g);
    free(c);
    return ok;
}

static int read_bits_equal(brisk_exec *ex, int node, const void *ref, size_t bytes) {
    void *b = malloc(bytes + 4);
    brisk_error err = {0};
    int eq = !brisk_exec_read(ex, node, b, &err) && memcmp(b, ref, bytes) == 0;
    free(b);
    return eq;
}

static void attn_case(brisk_backend *gpu, int64_t B, int64_t T, int64_t dh, int heads, int causal, int masked,
                      float drop, double tol_out, double tol_grad, int twice) {
    char what[160];
    snprintf(what, sizeof what, "attention B %lld T %lld dh %lld heads %d causal %d mask %d dropout %g",
             (long long)B, (long long)T, (long long)dh, heads, causal, masked, (double)drop);
    attn_graph a = attn_build(B, T, dh * heads, heads, causal, masked, drop);
    brisk_error err = {0};
    ct_pair p;
    if (a.grad < 0 || brisk_graph_error(a.g, &err)) {
        CHECKF(0, "%s: building: %s", what, err.msg);
        brisk_graph_free(a.g);
        return;
    }
    brisk_status st = ct_pair_make(a.g, gpu, &p, &err);
    if (!st && masked) st = set_mask(&p, &a, B, T, &err);
    if (st || ct_poison(p.gpu, a.att, &err) || ct_poison(p.gpu, a.grad, &err) ||
        brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) || brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) ||
        gpu->sync(gpu, &err)) {
        CHECKF(0, "%s: %s", what, err.msg);
    } else {
        CHECKF(att_compare(&p, a.att, tol_out, what), "%s: out + lse", what);
        CHECKF(ct_compare(&p, a.grad, tol_grad, what), "%s: dqkv", what);
        CHECKF(ct_inputs_intact(&p), "%s", what);
        if (twice) { /* the same bits again: no atomics, a fixed order */
            size_t nb = a.g->nodes[a.grad].bytes, na = 0, na2 = 0;
            void *g1 = malloc(nb + 4);
            float *o1 = read_att(p.gpu, a.att, &na, &err), *o2 = NULL;
            if (!o1 || brisk_exec_read(p.gpu, a.grad, g1, &err) || brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) ||
                gpu->sync(gpu, &err) || !(o2 = read_att(p.gpu, a.att, &na2, &err)))
                CHECKF(0, "%s: second run: %s", what, err.msg);
            else
                CHECKF(read_bits_equal(p.gpu, a.grad, g1, nb) && na == na2 && !memcmp(o1, o2, na * sizeof(float)),
                       "%s: a second run gave other bits", what);
            free(g1);
            free(o1);
            free(o2);
        }
    }
    ct_pair_free(&p);
    brisk_graph_free(a.g);
}

static brisk_backend *backend(brisk_gemm_precision prec, int deterministic) {
    static brisk_backend *be[4][2];
    if (!be[prec][deterministic]) be[prec][deterministic] = cuda_backend_for(prec, 1, deterministic);
    return be[prec][deterministic];
}

static const int64_t Ts[] = {1, 7, 60, 128, 129, 512};
static const int64_t dhs[] = {8, 32, 64, 128};

/* every T x dh x variant (step 1), or every other one (step 2) */
static void sweep(brisk_gemm_precision prec, double tol_out, double tol_grad, int step) {
    brisk_backend *be = backend(prec, 0);
    REQUIRE(be);
    if (getenv("BRISK_TEST_QUICK")) step *= 8;
    int k = 0;
    for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
        for (size_t d = 0; d < sizeof dhs / sizeof dhs[0]; d++)
            for (int v = 0; v < 4; v++) {
                if (k++ % step) continue;
                int64_t T = Ts[t], B = T >= 128 ? 2 : 3;
                int causal = v & 1, masked = v == 3;
                float drop = v >= 2 ? 0.25f : 0.0f;
                attn_case(be, B, T, dhs[d], 2, causal, masked, drop, tol_out, tol_grad, 0);
            }
}

static void test_fp32(void) { sweep(BRISK_GEMM_FP32, 2e-5, 1e-4, 1); }
static void test_bf16(void) { sweep(BRISK_GEMM_BF16, 1e-3, 1e-2, 3); }

/* odd head dims and head counts, a width the lanes split unevenly */
static void test_odd_shapes(void) {
    brisk_backend *be = backend(BRISK_GEMM_FP32, 0);
    REQUIRE(be);
    attn_case(be, 2, 33, 12, 3, 1, 1, 0.1f, 2e-5, 1e-4, 0);
    attn_case(be, 1, 17, 100, 1, 0, 0, 0.3f, 2e-5, 1e-4, 0);
    attn_case(be, 5, 9, 1, 4, 0, 0, 0.0f, 2e-5, 1e-4, 0);
    attn_case(be, 1, 65, 127, 2, 1, 0, 0.0f, 2e-5, 1e-4, 0);
}

static void test_deterministic(void) {
    brisk_backend *be = backend(BRISK_GEMM_FP32, 1);
    REQUIRE(be);
    attn_case(be, 3, 129, 32, 4, 0, 1, 0.2f, 2e-5, 1e-4, 1);
    attn_case(be, 2, 512, 64, 2, 1, 0, 0.0f, 2e-5, 1e-4, 1);
}

/* The dropout mask, exactly: Q = K = 0 and V_j = e_j (dh = D = T <= 128), so
 * out[i][j] = F_ij / n_i with n_i the keys row i sees: zero exactly where dropped. */
static void mask_case(int64_t T, int causal, float drop) {
    brisk_backend *be = backend(BRISK_GEMM_FP32, 0);
    REQUIRE(be);
    char what[96];
    snprintf(what, sizeof what, "dropout mask T %lld causal %d p %g", (long long)T, causal, (double)drop);
    int64_t D = 128;
    attn_graph a = attn_build(2, T, D, 1, causal, 0, drop);
    brisk_error err = {0};
    ct_pair p;
    REQUIRE_OK(brisk_graph_error(a.g, &err), &err);
    REQUIRE_OK(ct_pair_make(a.g, be, &p, &err), &err);
    float *qkv = calloc((size_t)(2 * T * 3 * D), sizeof(float));
    for (int64_t b = 0; b < 2; b++)
        for (int64_t j = 0; j < T; j++) qkv[(b * T + j) * 3 * D + 2 * D + j] = 1.0f;
    REQUIRE_OK(brisk_exec_set_input(p.cpu, 0, qkv, &err), &err);
    REQUIRE_OK(brisk_exec_set_input(p.gpu, 0, qkv, &err), &err);
    REQUIRE_OK(brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err), &err);
    REQUIRE_OK(brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err), &err);
    REQUIRE_OK(be->sync(be, &err), &err);
    size_t n = (size_t)(2 * T * D);
    float *c = malloc(a.g->nodes[a.att].bytes), *gq = malloc(a.g->nodes[a.att].bytes);
    REQUIRE_OK(brisk_exec_read(p.cpu, a.att, c, &err), &err);
    REQUIRE_OK(brisk_exec_read(p.gpu, a.att, gq, &err), &err);
    int64_t diff = 0, zeros = 0;
    for (size_t k = 0; k < n; k++) {
        diff += (c[k] == 0.0f) != (gq[k] == 0.0f);
        zeros += c[k] == 0.0f;
    }
    CHECKF(diff == 0, "%s: %lld of %zu weights dropped on one backend only", what, (long long)diff, n);
    CHECKF(zeros > 0 && (size_t)zeros < n, "%s: the mask dropped %lld of %zu (expected some, not all)", what,
           (long long)zeros, n);
    CHECKF(att_compare(&p, a.att, 1e-6, what), "%s: values", what);
    free(qkv);
    free(c);
    free(gq);
    ct_pair_free(&p);
    brisk_graph_free(a.g);
}

static void test_dropout_mask(void) {
    mask_case(7, 0, 0.5f);
    mask_case(60, 1, 0.5f);
    mask_case(128, 0, 0.1f);
    mask_case(128, 1, 0.9f);
}

/* Eval runs (training = 0) ignore dropout on the device, as the CPU does. */
static void test_eval_no_dropout(void) {
    brisk_backend *be = backend(BRISK_GEMM_FP32, 0);
    REQUIRE(be);
    attn_graph a = attn_build(2, 60, 64, 2, 0, 0, 0.5f);
    brisk_error err = {0};
    ct_pair p;
    REQUIRE_OK(brisk_graph_error(a.g, &err), &err);
    REQUIRE_OK(ct_pair_make(a.g, be, &p, &err), &err);
    p.cpu->step.training = p.gpu->step.training = 0;
    REQUIRE_OK(brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err), &err);
    REQUIRE_OK(brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err), &err);
    REQUIRE_OK(be->sync(be, &err), &err);
    CHECK(att_compare(&p, a.att, 2e-5, "eval attention"));
    CHECK(ct_compare(&p, a.grad, 1e-4, "eval attention grad"));
    ct_pair_free(&p);
    brisk_graph_free(a.g);
}

/* A head dim past the kernel's registers is not claimed: under device auto the graph
 * runs on the CPU rather than failing in its first step. */
static void test_capability(void) {
    brisk_backend *be = backend(BRISK_GEMM_FP32, 0);
    REQUIRE(be);
    attn_graph ok = attn_build(1, 4, 256, 2, 0, 0, 0), big = attn_build(1, 4, 258, 1, 0, 0, 0);
    char why[160] = "";
    CHECK(be->supports_op(be, &ok.g->nodes[ok.att], why, sizeof why) &&
          be->supports_op(be, &ok.g->nodes[ok.grad], why, sizeof why));
    CHECK(!be->supports_op(be, &big.g->nodes[big.att], why, sizeof why) && strstr(why, "128"));
    CHECK(!be->supports_op(be, &big.g->nodes[big.grad], why, sizeof why) && strstr(why, "128"));
    brisk_graph_free(ok.g);
    brisk_graph_free(big.g);
}

CUDA_TEST_MAIN(T(test_capability), T(test_fp32), T(test_odd_shapes), T(test_dropout_mask), T(test_eval_no_dropout),
               T(test_deterministic), T(test_bf16))
