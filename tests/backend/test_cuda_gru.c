/* GRU, GRU_GRAD and GRU_GRAD_W on the CUDA backend (cuDNN's CUDNN_GRU through the RNN API,
 * src/backend/cuda/cudnn_rnn.c) against the CPU backend on the same random inputs:
 *   - the ops alone, forward and reverse, odd and workload-sized shapes: h (the output; the
 *     workspace after it is each backend's own but for h_prev), d xp with d hh_n after it
 *     (the GPU's from its recomputed reset gate), d w_hh and d b_hh;
 *   - GRU stacks (torch.nn.GRU's: 1 and 2 layers, uni- and bidirectional, a linear head, MSE)
 *     trained one step: the loss and every parameter's gradient;
 *   - a captured CUDA graph replays to the eager run's bits; deterministic mode gives the
 *     same bits twice.
 * A wrong linear-layer id for a gate (cuDNN's r, z, n against PyTorch's) or a wrong bias slot
 * shows as an h error of order 1. Tolerances (relative norm) as test_cuda_lstm's: fp32 1e-4;
 * TF32, bf16 and fp16 3e-2 for the ops, 5e-2 for the stacks. Skips without a GPU and without
 * cuDNN 9. */
#include "backend/cuda_test_util.h"
#include "brisk/nn.h"
#include "ops/ops_internal.h" /* brisk_bw_gru: the gradient nodes autodiff builds */
#if BRISK_HAVE_CUDA
#include "backend/cuda/cudnn_rnn.h" /* cuda_rnn_missing: why a skip */
#endif

static int gru_on_gpu(brisk_backend *be) {
    brisk_node n;
    memset(&n, 0, sizeof n);
    n.op = BRISK_OP_GRU;
    n.dtype = BRISK_F32;
    return be->supports_op(be, &n, NULL, 0);
}

typedef struct op_graph {
    brisk_graph *g;
    int gru, dg, dw, db;
    int64_t n_h;
} op_graph;

static op_graph op_build(int64_t B, int64_t T, int64_t H, int reverse) {
    op_graph o = {brisk_graph_new(), -1, -1, -1, -1, B * T * H};
    brisk_graph *g = o.g;
    float k = 1.0f / sqrtf((float)H);
    int xp = ct_input(g, BRISK_F32, brisk_shape3(B, T, 3 * H), -1.5f, 1.5f);
    int w = ct_input(g, BRISK_F32, brisk_shape2(3 * H, H), -k, k);
    int bi = ct_input(g, BRISK_F32, brisk_shape1(3 * H), -0.5f, 0.5f);
    int bh = ct_input(g, BRISK_F32, brisk_shape1(3 * H), -0.5f, 0.5f);
    int dh = ct_input(g, BRISK_F32, brisk_shape3(B, T, H), -1.0f, 1.0f);
    o.gru = brisk_gru(g, xp, w, bi, bh, reverse);
    o.dg = brisk_bw_gru(g, o.gru, dh, 0);
    o.dw = brisk_bw_gru(g, o.gru, dh, 1);
    o.db = brisk_bw_gru(g, o.gru, dh, 3);
    int parts[2] = {brisk_reshape(g, o.dw, brisk_shape1(3 * H * H)), o.db};
    g->loss = g->output = brisk_concat(g, parts, 2, 0); /* the schedule runs all four */
    return o;
}

static void op_case(brisk_gemm_precision prec, int64_t B, int64_t T, int64_t H, int reverse, double tol) {
    brisk_backend *be = cuda_backend_for(prec, 1, 0);
    REQUIRE(be);
    op_graph o = op_build(B, T, H, reverse);
    brisk_error err = {0};
    ct_pair p;
    char what[160];
    snprintf(what, sizeof what, "gru ops B %lld T %lld H %lld %s, %s", (long long)B, (long long)T, (long long)H,
             reverse ? "reverse" : "forward", brisk_gemm_precision_name(prec));
    if (brisk_graph_error(o.g, &err) || ct_pair_make(o.g, be, &p, &err) || ct_poison(p.gpu, o.gru, &err) ||
        ct_poison(p.gpu, o.dg, &err) || ct_poison(p.gpu, o.dw, &err) || ct_poison(p.gpu, o.db, &err) ||
        brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) || brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) ||
        be->sync(be, &err)) {
        CHECKF(0, "%s: %s", what, err.msg);
    } else {
        double e = ct_prefix_err(&p, o.gru, o.n_h, &err);
        CHECKF(e <= tol, "%s: h relative error %.3g > %.3g", what, e, tol);
        CHECKF(ct_compare(&p, o.dg, tol, what), "%s: d xp and d hh_n", what);
        CHECKF(ct_compare(&p, o.dw, tol, what), "%s: d w_hh", what);
        CHECKF(ct_compare(&p, o.db, tol, what), "%s: d b_hh", what);
        CHECKF(ct_inputs_intact(&p), "%s", what);
    }
    ct_pair_free(&p);
    brisk_graph_free(o.g);
    be->destroy(be);
}

static const struct { int64_t B, T, H; } shapes[] = {{1, 1, 1}, {3, 5, 4}, {37, 9, 19}, {256, 60, 64}};

static void test_ops_fp32(void) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int rev = 0; rev < 2; rev++) op_case(BRISK_GEMM_FP32, shapes[s].B, shapes[s].T, shapes[s].H, rev, 1e-4);
}

static void test_ops_low_precision(void) {
    brisk_gemm_precision ps[3] = {BRISK_GEMM_TF32, BRISK_GEMM_BF16, BRISK_GEMM_FP16};
    for (int k = 0; k < 3; k++)
        for (int rev = 0; rev < 2; rev++) {
            op_case(ps[k], 37, 9, 19, rev, 3e-2);
            op_case(ps[k], 256, 60, 64, rev, 3e-2);
        }
}

/* ---------------------------------------------------------------- GRU stacks */

/* torch.nn.GRU(12, 24, layers, batch_first, bidirectional) over [16, 11, 12], the last step
 * through Linear(., 3), MSE against a target. */
static brisk_graph *stack_build(int layers, int bidirectional, brisk_error *err) {
    brisk_graph *g = brisk_graph_new();
    const int64_t B = 16, T = 11, F = 12, H = 24, W = H * (bidirectional ? 2 : 1);
    int x = ct_input(g, BRISK_F32, brisk_shape3(B, T, F), -2.0f, 2.0f);
    int y = ct_input(g, BRISK_F32, brisk_shape2(B, 3), -1.0f, 1.0f);
    int h = brisk_nn_gru(g, x, F, H, layers, bidirectional, 0.0f, "gru");
    int last = brisk_reshape(g, brisk_slice(g, h, 1, T - 1, 1), brisk_shape2(B, W));
    int out = brisk_nn_linear(g, last, W, 3, "head");
    g->output = out;
    g->loss = brisk_mse(g, out, y);
    if (brisk_backward(g, g->loss, err)) {
        brisk_graph_free(g);
        return NULL;
    }
    return g;
}

static void stack_case(brisk_gemm_precision prec, int layers, int bidirectional, double tol) {
    brisk_backend *be = cuda_backend_for(prec, 1, 0);
    REQUIRE(be);
    brisk_error err = {0};
    char what[160];
    snprintf(what, sizeof what, "gru stack, %d layer%s, %s, %s", layers, layers > 1 ? "s" : "",
             bidirectional ? "bidirectional" : "unidirectional", brisk_gemm_precision_name(prec));
    brisk_graph *g = stack_build(layers, bidirectional, &err);
    if (g) ct_step_and_check_grads(g, be, prec, tol, what);
    else CHECKF(0, "%s: %s", what, err.msg);
    brisk_graph_free(g);
    be->destroy(be);
}

static void test_stacks_fp32(void) {
    for (int layers = 1; layers <= 2; layers++)
        for (int bi = 0; bi < 2; bi++) stack_case(BRISK_GEMM_FP32, layers, bi, 1e-4);
}

static void test_stacks_low_precision(void) {
    for (int bi = 0; bi < 2; bi++) {
        stack_case(BRISK_GEMM_TF32, 2, bi, 5e-2);
        stack_case(BRISK_GEMM_BF16, 2, bi, 5e-2);
        stack_case(BRISK_GEMM_FP16, 2, bi, 5e-2);
    }
}

/* ---------------------------------------------------------------- capture, determinism */

/* The ops of one reverse layer: an eager run, then a captured one replayed, must give the
 * same bits; with deterministic on, a second run must too. The GRU node's h only: its
 * workspace also holds cuDNN's reserve space. */
static void test_capture_and_determinism(void) {
    for (int det = 0; det < 2; det++) {
        brisk_backend *be = cuda_backend_for(BRISK_GEMM_FP32, 1, det);
        REQUIRE(be);
        op_graph o = op_build(29, 13, 40, 1);
        brisk_error err = {0};
        ct_pair p = {0};
        const char *what = det ? "gru: deterministic" : "gru: capture";
        int ids[4] = {o.gru, o.dg, o.dw, o.db};
        size_t bytes[4] = {(size_t)o.n_h * 4};
        if (brisk_graph_error(o.g, &err) || ct_pair_make(o.g, be, &p, &err)) CHECKF(0, "%s: %s", what, err.msg);
        else ct_check_rerun(be, &p, ids, bytes, 4, det, what);
        ct_pair_free(&p);
        brisk_graph_free(o.g);
        be->destroy(be);
    }
}

int main(void) {
    if (!cuda_present()) return CUDA_SKIP;
    brisk_backend *be = cuda_backend_for(BRISK_GEMM_FP32, 1, 0);
    if (!be) return 1;
    int on = gru_on_gpu(be);
    be->destroy(be);
    if (!on) {
#if BRISK_HAVE_CUDA
        const char *why = cuda_rnn_missing();
#else
        const char *why = NULL;
#endif
        printf("SKIP: the CUDA backend does not run GRU here: %s\n", why ? why : "(no reason given)");
        return CUDA_SKIP;
    }
    t_case c[] = {T(test_ops_fp32), T(test_ops_low_precision), T(test_stacks_fp32), T(test_stacks_low_precision),
                  T(test_capture_and_determinism)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
