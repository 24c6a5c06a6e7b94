/* The CPU backend's prepare: fusions planned by graph/fusion.c (the patterns and lifetime
 * checks the CUDA backend uses), run here as one pass where the unfused nodes made several:
 *   GEMM + bias (+ ReLU, GELU in either form, SiLU, tanh, sigmoid, leaky ReLU, ELU,
 *     softplus): the bias and activation
 *     applied to each band of C right after the band is computed (cpu_sgemm_epi), while it
 *     is in cache; C is the BIAS_ADD's buffer (the matmul's own is never written), the
 *     activation writes its own, but a ReLU's (its gradient reads its output, so B is never
 *     written: the band goes to A's buffer, made positive in place, as on the GPU); a dropout
 *     of the activation writes its output from the band too;
 *   GEMM (+ dropout backward) + ACT_GRAD: the band of C, written in the gradient's buffer,
 *     turned into the gradient in place (the FFN's backward: its 15360 x 512 gradient was
 *     made by three passes over memory, the GEMM's, the dropout's and the act-grad's);
 *   ACT_GRAD + SUM over rows (the bias gradient): one pass down column blocks that writes the
 *     gradient and sums it, in the order reduce.c's column sums use (a sum whose buffer is not
 *     free that early is kept and copied at its own place);
 *   ADD + LAYERNORM: per row, the sum then its norm, while the row is in L1;
 *   ADD(r, LAYERNORM_GRAD_X): per row, the norm gradient into a scratch row, then the add
 *     (the norm gradient's buffer is never written);
 *   CONV2D + ADD of a [Co] bias (+ an activation): the Winograd convolutions (conv_winograd.c)
 *     add the bias in their output transform, a ReLU too (writing only A), another activation
 *     to each row of a block of outputs while it is in cache (the 1-D CNN: 0.56 ms of separate
 *     add and ReLU a step).
 * Every fused pass does the same float operations in the same order as the nodes it
 * replaces (unary.c's per-element spans, layernorm.c's own row function),
 * so fused and unfused runs give the same bits, on any thread count (tested). The nodes
 * fused away return at once from run_node. BRISK_CPU_FUSE=0 (or speed.fuse = false, through
 * brisk_backend_cpu_set_fuse) turns the pass off. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"
#include "graph/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu_prep {
    const brisk_exec *ex;
    const brisk_graph *g;
    int n_nodes;
    brisk_fusion_plan plan;
    float **kept; /* per fusion: a deferred sum's values, from Q's place to S's (sum_deferred); a
                     broadcast's source where its ReLU gradient takes its bytes */
};

/* ---------------------------------------------------------------- GEMM epilogue */

void cpu_epilogue_apply(const cpu_epilogue *e, float *C, int64_t ldc, int64_t m0, int64_t m1, int64_t n0,
                        int64_t n1) {
    if (e->grad.op) {
        for (int64_t i = m0; i < m1; i++) {
            int64_t o = i * ldc + n0;
            cpu_dropout_apply(&e->drop, (uint64_t)o, n1 - n0, C + o, C + o);
            cpu_act_grad_span(&e->grad, C + o, e->gx + o, e->gy + o, C + o, n1 - n0);
        }
        return;
    }
    const float *b = e->bias;
    for (int64_t i = m0; i < m1; i++) {
        float *c = C + i * ldc;
#pragma omp simd
        for (int64_t j = n0; j < n1; j++) c[j] = c[j] + b[j];
        if (e->relu_in_place)
#pragma omp simd
            for (int64_t j = n0; j < n1; j++) c[j] = cpu_relu(c[j]);
        float *a = c; /* what a dropout reads */
        if (e->act_out) {
            a = e->act_out + i * ldc;
            cpu_act_span(&e->act, c + n0, a + n0, n1 - n0);
        }
        if (e->drop_out)
            cpu_dropout_apply(&e->drop, (uint64_t)(i * ldc + n0), n1 - n0, a + n0, e->drop_out + i * ldc + n0);
    }
}

/* A MATMUL as cpu_matmul runs it when that is one 2-D product (batch 1, or a shared 2-D
 * b folded into one tall product): its arguments, else 0. */
typedef struct mm2d {
    int ta, tb;
    int64_t M, N, K, lda, ldb;
} mm2d;

static int matmul_2d(const brisk_graph *g, int id, mm2d *a) {
    const brisk_node *n = NODE(g, id), *na = IN_NODE(g, id, 0), *nb = IN_NODE(g, id, 1);
    if (n->dtype != BRISK_F32 || na->dtype != BRISK_F32 || nb->dtype != BRISK_F32 || n->shape.ndim < 2 ||
        na->shape.ndim < 2 || nb->shape.ndim < 2)
        return 0;
    int ta = n->attr.trans_a, tb = n->attr.trans_b;
    int64_t M = n->shape.d[n->shape.ndim - 2], N = n->shape.d[n->shape.ndim - 1];
    int64_t K = ta ? na->shape.d[na->shape.ndim - 2] : na->shape.d[na->shape.ndim - 1];
    int64_t kb = tb ? nb->shape.d[nb->shape.ndim - 1] : nb->shape.d[nb->shape.ndim - 2];
    int64_t ma = ta ? na->shape.d[na->shape.ndim - 1] : na->shape.d[na->shape.ndim - 2];
    int64_t nbn = tb ? nb->shape.d[nb->shape.ndim - 2] : nb->shape.d[nb->shape.ndim - 1];
    if (kb != K || ma != M || nbn != N || M <= 0 || N <= 0 || K <= 0) return 0;
    int64_t batch = cpu_numel(&n->shape) / (M * N);
    int64_t sa = na->shape.ndim > 2 ? M * K : 0, sb = nb->shape.ndim > 2 ? K * N : 0;
    if (cpu_numel(&na->shape) != (sa ? batch : 1) * M * K || cpu_numel(&nb->shape) != (sb ? batch : 1) * K * N)
        return 0;
    *a = (mm2d){ta, tb, M, N, K, ta ? M : K, tb ? K : N};
    if (batch > 1 && sb == 0 && !ta) {
        a->M *= batch;
        batch = 1;
    }
    return batch == 1;
}

static int gemm_2d(const brisk_graph *g, int m, int64_t *n_out) {
    mm2d a;
    if (!matmul_2d(g, m, &a)) return 0;
    *n_out = a.N;
    return 1;
}

/* e's dropout: DROPOUT node d's draw at st, over the len elements the fused GEMM makes */
static brisk_status epilogue_dropout(const brisk_graph *g, int d, int64_t len, const brisk_step_state *st,
                                     cpu_epilogue *e, brisk_error *err) {
    if (cpu_numel(&g->nodes[d].shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "dropout (node %d): %lld elements, the fused GEMM makes %lld", d,
                            (long long)cpu_numel(&g->nodes[d].shape), (long long)len);
    return cpu_dropout_draw_of(g, d, st, &e->drop, err);
}

static brisk_status run_gemm(cpu_backend *cb, const brisk_graph *g, const brisk_fusion *f, const void *const *in,
                             void *const *ptr, const brisk_step_state *st, brisk_error *err) {
    mm2d a;
    const brisk_node *nb = &g->nodes[f->bias];
    if (!matmul_2d(g, f->matmul, &a) || cpu_numel(&IN_NODE(g, f->bias, 1)->shape) != a.N ||
        cpu_numel(&nb->shape) != a.M * a.N)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: fused matmul (node %d) + bias_add (node %d): shapes "
                            "changed since prepare", f->matmul, f->bias);
    /* a ReLU's input is not written: the product goes to the ReLU's buffer, made positive there */
    int relu = f->kind == BRISK_FUSE_GEMM_BIAS_RELU;
    cpu_epilogue e = {.bias = ptr[nb->in[1]], .act_out = f->act >= 0 && !relu ? ptr[f->act] : NULL,
                      .relu_in_place = relu};
    if (f->act >= 0) e.act = cpu_act_of(&g->nodes[f->act]);
    if (f->drop >= 0) {
        e.drop_out = ptr[f->drop];
        brisk_status s = epilogue_dropout(g, f->drop, a.M * a.N, st, &e, err);
        if (s) return s;
    }
    cpu_gemm_epi(cb, a.ta, a.tb, a.M, a.N, a.K, in[0], a.lda, in[1], a.ldb, relu ? ptr[f->act] : ptr[f->bias], a.N,
                 &e);
    return BRISK_OK;
}

/* H = MATMUL; [D = DROPOUT(H)]; Q = ACT_GRAD(H or D, x, y), per band of the GEMM, which
 * writes Q's buffer (the plan keeps it apart from x's and y's: graph/fusion.c). */
/* whether [a, a + na) and [b, b + nb) share a byte */
static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    const char *x = a, *y = b;
    return x < y + nb && y < x + na;
}

static brisk_status run_gemm_actgrad(cpu_backend *cb, const brisk_graph *g, const brisk_fusion *f,
                                     const void *const *in, void *const *ptr, const brisk_step_state *st,
                                     brisk_error *err) {
    mm2d a;
    const brisk_node *nq = &g->nodes[f->grad];
    int64_t len = cpu_numel(&nq->shape);
    if (!matmul_2d(g, f->matmul, &a) || a.M * a.N != len || cpu_numel(&IN_NODE(g, f->grad, 1)->shape) != len ||
        cpu_numel(&IN_NODE(g, f->grad, 2)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: fused matmul (node %d) + act_grad (node %d): shapes "
                            "changed since prepare", f->matmul, f->grad);
    int kind = nq->attr.kind;
    if (!brisk_act_grad_kind_ok(kind))
        return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad (node %d): attr.kind %d is not an activation op",
                            f->grad, kind);
    float *q = ptr[f->grad];
    const float *x = ptr[nq->in[1]], *y = ptr[nq->in[2]];
    size_t bytes = (size_t)len * sizeof(float);
    if (overlaps(q, bytes, x, bytes) || overlaps(q, bytes, y, bytes))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: fused matmul (node %d) + act_grad (node %d): the "
                            "gradient's buffer overlaps its inputs'", f->matmul, f->grad);
    cpu_epilogue e = {.grad = cpu_act_of(nq), .gx = x, .gy = y};
    if (f->drop >= 0) {
        brisk_status s = epilogue_dropout(g, f->drop, len, st, &e, err);
        if (s) return s;
    }
    cpu_gemm_epi(cb, a.ta, a.tb, a.M, a.N, a.K, in[0], a.lda, in[1], a.ldb, q, a.N, &e);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- convolution epilogue */

/* Y = CONV2D; B = ADD(Y, bias); [A = act(B)]: the Winograd convolution writes B with the bias
 * added in its output transform, and A from B a row at a time while the block is in cache
 * (Y is never written). */
static brisk_status run_conv(cpu_backend *cb, const brisk_graph *g, const brisk_fusion *f, const void *const *in,
                             void *const *ptr, brisk_error *err) {
    const brisk_node *nb = &g->nodes[f->bias], *nm = &g->nodes[f->matmul];
    int o = nb->in[0] == f->matmul ? nb->in[1] : nb->in[0];
    if (cpu_numel(&g->nodes[o].shape) != nm->shape.d[1] || !brisk_shape_equal(&nb->shape, &nm->shape))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: fused conv2d (node %d) + add (node %d): shapes changed "
                            "since prepare", f->matmul, f->bias);
    cpu_conv_epi e = {.bias = ptr[o]};
    if (f->act >= 0) {
        e.act = cpu_act_of(&g->nodes[f->act]);
        e.relu = e.act.op == BRISK_OP_RELU; /* straight into the ReLU's buffer, its input unwritten */
        if (!e.relu) e.act_out = ptr[f->act];
    }
    return cpu_conv_epilogue_run(cb, g, f->matmul, in[0], in[1], e.relu ? ptr[f->act] : ptr[f->bias], &e, err);
}

/* ---------------------------------------------------------------- broadcast + ReLU gradient */

/* Q = y > 0 ? E : 0 with E = s repeated over runs of `run` elements (unary.c's ReLU gradient
 * on the broadcast's values), E never written */
typedef struct eg_ctx {
    const float *s, *y;
    float *q;
    int64_t run;
} eg_ctx;

static void eg_runs(const void *vctx, int64_t k0, int64_t k1) {
    const eg_ctx *c = vctx;
    for (int64_t k = k0; k < k1; k++) {
        const float v = c->s[k], *restrict y = c->y + k * c->run;
        float *restrict q = c->q + k * c->run;
#pragma omp simd
        for (int64_t i = 0; i < c->run; i++) q[i] = y[i] > 0.0f ? v : 0.0f;
    }
}

/* at E's place: Q from s (a copy of s where Q takes its bytes, in *copy, made once) */
static brisk_status run_expand_actgrad(cpu_backend *cb, const brisk_graph *g, const brisk_fusion *f,
                                       void *const *ptr, float **copy, brisk_error *err) {
    const brisk_node *nq = NODE(g, f->grad), *ne = NODE(g, f->matmul);
    int64_t ns = cpu_numel(&NODE(g, ne->in[0])->shape), nq_ = cpu_numel(&nq->shape);
    if (ns <= 0 || nq_ % ns != 0 || cpu_numel(&ne->shape) != nq_ || cpu_numel(&NODE(g, nq->in[2])->shape) != nq_)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: fused expand (node %d) + act_grad (node %d): shapes changed "
                            "since prepare", f->matmul, f->grad);
    eg_ctx c = {.s = ptr[ne->in[0]], .y = ptr[nq->in[2]], .q = ptr[f->grad], .run = nq_ / ns};
    if (overlaps(c.s, (size_t)ns * sizeof(float), c.q, (size_t)nq_ * sizeof(float))) {
        if (!*copy && !(*copy = malloc((size_t)ns * sizeof(float))))
            return brisk_errorf(err, BRISK_ERR_NOMEM, "cpu: expand (node %d): out of memory", f->matmul);
        memcpy(*copy, c.s, (size_t)ns * sizeof(float));
        c.s = *copy;
    }
    cpu_parallel(cb, ns, CPU_PAR_MIN / c.run + 1, eg_runs, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- act grad + bias grad */

/* Columns summed per sweep down the rows. Each column's sum runs over the rows in order, as
 * reduce.c's column sums do, whatever the block: a block of whole rows (up to 1024 columns)
 * streams Q's inputs row by row as the unfused act_grad did; 256 columns (reduce.c's block)
 * read half of each 512-wide row per sweep, and the fused pass was 27 % slower than the two
 * it replaced (the transformer workload's FFN gradient, 15360 x 512). */
#define COL_BLOCK 1024

typedef struct ag_ctx {
    cpu_act act;
    const float *dy, *x, *y;
    float *q, *s;
    int64_t R, N;
} ag_ctx;

/* Q rows of one column block, each added to the column sums as it is made; the sums run
 * over rows in order in double, as red_cols_range's do. */
static void ag_cols(const void *vctx, int64_t j0, int64_t j1) {
    const ag_ctx *c = vctx;
    int64_t N = c->N;
    double acc[COL_BLOCK];
    for (int64_t b0 = j0; b0 < j1; b0 += COL_BLOCK) {
        int64_t nb = j1 - b0 < COL_BLOCK ? j1 - b0 : COL_BLOCK;
        memset(acc, 0, sizeof acc);
        for (int64_t r = 0; r < c->R; r++) {
            int64_t o = r * N + b0;
            const float *restrict dy = c->dy + o, *restrict x = c->x + o, *restrict y = c->y + o;
            float *restrict q = c->q + o;
            cpu_act_grad_span(&c->act, dy, x, y, q, nb);
#pragma omp simd
            for (int64_t j = 0; j < nb; j++) acc[j] += q[j];
        }
        for (int64_t j = 0; j < nb; j++) c->s[b0 + j] = (float)acc[j];
    }
}

static brisk_status run_actgrad_sum(cpu_backend *cb, const brisk_graph *g, const brisk_fusion *f,
                                    const void *const *in, void *out, float *sum_out, brisk_error *err) {
    const brisk_node *n = NODE(g, f->grad), *ns = NODE(g, f->sum);
    int64_t len = cpu_numel(&n->shape), N = n->shape.d[n->shape.ndim - 1];
    int64_t R = N ? len / N : 0;
    int kind = n->attr.kind;
    uint32_t mask = (1u << (n->shape.ndim - 1)) - 1u;
    /* the column-sum path of reduce.c needs at least 2 rows and 2 columns (size-1 dims
     * drop out of its plan); elsewhere the two kernels run one after the other, here */
    if (R < 2 || N < 2 || !brisk_act_grad_kind_ok(kind)) {
        brisk_status st = cpu_act_grad(cb, g, f->grad, in, out, err);
        if (!st) cpu_reduce_sum(cb, out, &n->shape, mask, 1.0f, sum_out);
        return st;
    }
    for (int k = 0; k < 3; k++)
        if (cpu_numel(&IN_NODE(g, f->grad, k)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "act_grad: input %d size differs from the output", k);
    if (cpu_numel(&ns->shape) != N)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "sum (node %d): output has %lld elements, expected %lld", f->sum,
                            (long long)cpu_numel(&ns->shape), (long long)N);
    ag_ctx c = {cpu_act_of(n), in[0], in[1], in[2], out, sum_out, R, N};
    /* wide column chunks, two per thread, so each sweep reads long runs of every row */
    int64_t per = kind == BRISK_OP_RELU ? CPU_PAR_MIN : CPU_PAR_MIN_HEAVY, grain = (per + R - 1) / R;
    int64_t wide = (N + 2 * cb->threads - 1) / (2 * cb->threads);
    cpu_parallel(cb, N, grain > wide ? grain : wide, ag_cols, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- residual + layernorm */

typedef struct an_ctx {
    const float *a, *b, *gamma, *beta, *r, *dy, *x;
    float *sum, *y, *scratch;
    size_t per;
    int64_t N;
    float eps;
} an_ctx;

static void add_norm_rows(const void *vctx, int64_t r0, int64_t r1) {
    const an_ctx *c = vctx;
    int64_t N = c->N;
    for (int64_t r = r0; r < r1; r++) {
        const float *a = c->a + r * N, *b = c->b + r * N;
        float *s = c->sum + r * N; /* may be a or b itself: each element read before it is written */
#pragma omp simd
        for (int64_t j = 0; j < N; j++) s[j] = a[j] + b[j];
        cpu_ln_row(BRISK_OP_LAYERNORM, s, NULL, c->gamma, c->beta, c->y + r * N, N, c->eps);
    }
}

static void add_norm_grad_rows(const void *vctx, int64_t r0, int64_t r1) {
    const an_ctx *c = vctx;
    int64_t N = c->N;
    float *t = c->scratch + c->per * (size_t)cpu_worker_id();
    for (int64_t r = r0; r < r1; r++) {
        cpu_ln_row(BRISK_OP_LAYERNORM_GRAD_X, c->x + r * N, c->dy + r * N, c->gamma, NULL, t, N, c->eps);
        const float *rr = c->r + r * N;
        float *s = c->sum + r * N; /* may be r itself */
#pragma omp simd
        for (int64_t j = 0; j < N; j++) s[j] = rr[j] + t[j];
    }
}

static brisk_status run_norm(cpu_backend *cb, const brisk_graph *g, const brisk_fusion *f, const void *const *in,
                             void *out, void *const *ptr, brisk_error *err) {
    const brisk_node *na = NODE(g, f->at);
    int64_t len = cpu_numel(&na->shape), N = na->shape.d[na->shape.ndim - 1];
    int ln = f->grad >= 0 ? f->grad : f->ln;
    const brisk_node *nl = NODE(g, ln);
    int gi = f->grad >= 0 ? 2 : 1;
    for (int k = gi; k < 3; k++)
        if (cpu_numel(&IN_NODE(g, ln, k)->shape) != N)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): input %d has %lld elements, expected %lld",
                                brisk_op_name(nl->op), ln, k, (long long)cpu_numel(&IN_NODE(g, ln, k)->shape),
                                (long long)N);
    if (N == 0 || len == 0) return BRISK_OK;
    an_ctx c = {.N = N, .eps = nl->attr.f0, .sum = out};
    int64_t rows = len / N, grain = (CPU_PAR_MIN + N - 1) / N;
    if (f->grad < 0) {
        c.a = in[0], c.b = in[1], c.gamma = ptr[nl->in[1]], c.beta = ptr[nl->in[2]], c.y = ptr[ln];
        cpu_parallel(cb, rows, grain, add_norm_rows, &c);
        return BRISK_OK;
    }
    c.r = in[na->in[0] == f->grad ? 1 : 0];
    c.dy = ptr[nl->in[0]], c.x = ptr[nl->in[1]], c.gamma = ptr[nl->in[2]];
    c.per = cpu_sgemm_scratch_floats();
    float *own = NULL;
    if ((size_t)N <= c.per) {
        c.scratch = cb->gemm_scratch; /* per-thread rows; no GEMM runs meanwhile */
    } else { /* a row longer than a thread's GEMM scratch: one thread, its own row */
        if (!(own = malloc((size_t)N * sizeof(float))))
            return brisk_errorf(err, BRISK_ERR_NOMEM, "cpu: add + layernorm_grad_x (node %d): no memory for a row",
                                f->at);
        c.scratch = own;
        add_norm_grad_rows(&c, 0, rows);
        free(own);
        return BRISK_OK;
    }
    cpu_parallel(cb, rows, grain, add_norm_grad_rows, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- prepare / run */

static const struct cpu_prep *prep_for(const cpu_backend *cb, const brisk_graph *g) {
    return cb->prep && cb->prep->g == g && cb->prep->n_nodes == g->n_nodes ? cb->prep : NULL;
}

void cpu_forget(brisk_backend *be, const brisk_exec *ex) {
    cpu_backend *cb = be->impl;
    if (!cb->prep || (ex && cb->prep->ex != ex)) return;
    for (int i = 0; cb->prep->kept && i < cb->prep->plan.n; i++) free(cb->prep->kept[i]);
    free(cb->prep->kept);
    brisk_fusion_plan_free(&cb->prep->plan);
    free(cb->prep);
    cb->prep = NULL;
}

brisk_status cpu_prepare(brisk_backend *be, const brisk_exec *ex, brisk_error *err) {
    cpu_backend *cb = be->impl;
    cpu_forget(be, NULL);
    cpu_conv_count_passes(cb, ex); /* the report's Winograd row */
    if (!cb->fuse) return BRISK_OK;
    /* the ReLU's gradient reads its output (unary.c), as on CUDA: its input need not be written */
    const brisk_fusion_rules rules = {.gemm_2d = gemm_2d, .gelu_n_multiple = 1, .gelu_erf = 1,
                                      .other_acts = 1, .relu_writes_pre = 0, .act_dropout = 1,
                                      .gemm_actgrad = 1, .actgrad_sum = 1, .actgrad_sum_deferred = 1, .norms = 1,
                                      .expand_actgrad = 1,
                                      .conv_epilogue = cb->conv_winograd ? cpu_conv_epilogue_ok : NULL};
    struct cpu_prep *p = calloc(1, sizeof *p);
    if (!p || brisk_fusion_plan_build(ex, &rules, &p->plan)) {
        free(p);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cpu prepare: out of memory");
    }
    if (!(p->kept = calloc((size_t)p->plan.n + 1, sizeof *p->kept))) {
        brisk_fusion_plan_free(&p->plan);
        free(p);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cpu prepare: out of memory");
    }
    p->ex = ex;
    p->g = ex->g;
    p->n_nodes = ex->g->n_nodes;
    cb->prep = p;
    return BRISK_OK;
}

brisk_status cpu_prep_run(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                          const brisk_step_state *st, int *done, brisk_error *err) {
    const struct cpu_prep *p = prep_for(cb, g);
    *done = 0;
    /* another executor of the same graph (its own buffers) runs unfused */
    if (!p || out != p->ex->ptr[id]) return BRISK_OK;
    if (p->plan.skip[id]) {
        *done = 1; /* computed by a fusion at an earlier node */
        return BRISK_OK;
    }
    int k = p->plan.fusion_at[id];
    if (k < 0) return BRISK_OK;
    *done = 1;
    const brisk_fusion *f = &p->plan.list[k];
    void *const *ptr = p->ex->ptr;
    switch (f->kind) {
    case BRISK_FUSE_GEMM_BIAS: case BRISK_FUSE_GEMM_BIAS_RELU: case BRISK_FUSE_GEMM_BIAS_GELU:
    case BRISK_FUSE_GEMM_BIAS_ACT:
        return run_gemm(cb, g, f, in, ptr, st, err);
    case BRISK_FUSE_GEMM_ACTGRAD: return run_gemm_actgrad(cb, g, f, in, ptr, st, err);
    case BRISK_FUSE_ACTGRAD_BGRAD: {
        size_t bytes = (size_t)cpu_numel(&g->nodes[f->sum].shape) * sizeof(float);
        if (!f->sum_deferred) return run_actgrad_sum(cb, g, f, in, out, ptr[f->sum], err);
        float **kept = &((struct cpu_prep *)p)->kept[k];
        if (id == f->sum) { /* S's own place: the sums kept since Q's */
            if (!*kept)
                return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: sum (node %d) ran before its act_grad (node %d)",
                                    f->sum, f->grad);
            memcpy(out, *kept, bytes);
            return BRISK_OK;
        }
        if (!*kept && !(*kept = malloc(bytes ? bytes : 1)))
            return brisk_errorf(err, BRISK_ERR_NOMEM, "cpu: act_grad (node %d): out of memory", id);
        return run_actgrad_sum(cb, g, f, in, out, *kept, err);
    }
    case BRISK_FUSE_ADD_NORM: case BRISK_FUSE_ADD_NORM_GRAD: return run_norm(cb, g, f, in, out, ptr, err);
    case BRISK_FUSE_CONV_BIAS: case BRISK_FUSE_CONV_BIAS_ACT: return run_conv(cb, g, f, in, ptr, err);
    case BRISK_FUSE_EXPAND_ACTGRAD: return run_expand_actgrad(cb, g, f, ptr, &((struct cpu_prep *)p)->kept[k], err);
    default:
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cpu: fusion kind %d at node %d has no CPU pass", (int)f->kind,
                            id);
    }
}

void cpu_note(brisk_backend *be, const brisk_graph *g, int id, char *buf, size_t n) {
    static const char *const kinds[] = {
        [BRISK_FUSE_GEMM_BIAS] = "GEMM + bias",
        [BRISK_FUSE_GEMM_BIAS_RELU] = "GEMM + bias + ReLU",
        [BRISK_FUSE_GEMM_BIAS_GELU] = "GEMM + bias + GELU",
        [BRISK_FUSE_GEMM_BIAS_ACT] = "GEMM + bias + activation",
        [BRISK_FUSE_GEMM_DGELU_BGRAD] = "GEMM + GELU gradient + bias gradient",
        [BRISK_FUSE_ACTGRAD_BGRAD] = "activation gradient + bias gradient",
        [BRISK_FUSE_GEMM_ACTGRAD] = "GEMM + activation gradient",
        [BRISK_FUSE_ADD_NORM] = "residual add + layernorm",
        [BRISK_FUSE_ADD_NORM_GRAD] = "residual add + layernorm gradient",
        [BRISK_FUSE_CONV_BIAS] = "convolution + bias",
        [BRISK_FUSE_CONV_BIAS_ACT] = "convolution + bias + activation",
        [BRISK_FUSE_EXPAND_ACTGRAD] = "broadcast + ReLU gradient",
    };
    if (!n) return;
    buf[0] = 0;
    const struct cpu_prep *p = prep_for(be->impl, g);
    if (!p || id < 0 || id >= g->n_nodes) return;
    int k = p->plan.fusion_at[id];
    if (p->plan.skip[id]) snprintf(buf, n, "computed by a fused neighbour (nothing run here)");
    else if (k >= 0 && p->plan.list[k].sum_deferred && p->plan.list[k].sum == id)
        snprintf(buf, n, "sums made by a fused neighbour, copied here");
    else if (k >= 0 && (unsigned)p->plan.list[k].kind < sizeof kinds / sizeof kinds[0] && kinds[p->plan.list[k].kind])
        snprintf(buf, n, "fused pass: %s%s", kinds[p->plan.list[k].kind],
                 p->plan.list[k].drop < 0 ? "" : p->plan.list[k].kind == BRISK_FUSE_GEMM_ACTGRAD ? " (after dropout)"
                                                                                              : " + dropout");
}

void brisk_backend_cpu_set_fuse(brisk_backend *be, int on) {
    if (be && be->name && strcmp(be->name, "cpu") == 0) ((cpu_backend *)be->impl)->fuse = on != 0;
}

void brisk_backend_cpu_fusions(const brisk_backend *be, char *buf, size_t n) {
    if (!n) return;
    buf[0] = 0;
    if (!be || !be->name || strcmp(be->name, "cpu") != 0) return;
    const cpu_backend *cb = be->impl;
    if (!cb->fuse) {
        snprintf(buf, n, "off");
        return;
    }
    if (!cb->prep) {
        snprintf(buf, n, "on (nothing prepared)");
        return;
    }
    static const struct { brisk_fusion_kind kind; const char *name; } kinds[] = {
        {BRISK_FUSE_GEMM_BIAS_GELU, "GEMM+bias+GELU"},
        {BRISK_FUSE_GEMM_BIAS_RELU, "GEMM+bias+ReLU"},
        {BRISK_FUSE_GEMM_BIAS_ACT, "GEMM+bias+activation"},
        {BRISK_FUSE_GEMM_BIAS, "GEMM+bias"},
        {BRISK_FUSE_GEMM_ACTGRAD, "GEMM+act-grad"},
        {BRISK_FUSE_ACTGRAD_BGRAD, "act-grad+bias-grad"},
        {BRISK_FUSE_ADD_NORM, "residual+layernorm"},
        {BRISK_FUSE_ADD_NORM_GRAD, "residual+layernorm-grad"},
        {BRISK_FUSE_CONV_BIAS_ACT, "conv+bias+activation"},
        {BRISK_FUSE_CONV_BIAS, "conv+bias"},
        {BRISK_FUSE_EXPAND_ACTGRAD, "broadcast+ReLU-grad"},
    };
    size_t used = (size_t)snprintf(buf, n, "on (");
    int any = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && used < n; i++) {
        int c = brisk_fusion_count(&cb->prep->plan, kinds[i].kind);
        if (!c) continue;
        used += (size_t)snprintf(buf + used, n - used, "%s%d %s", any ? ", " : "", c, kinds[i].name);
        any = 1;
    }
    int drops = 0; /* dropouts run inside the GEMM epilogues above */
    for (int i = 0; i < cb->prep->plan.n; i++) drops += cb->prep->plan.list[i].drop >= 0;
    if (drops && used < n) used += (size_t)snprintf(buf + used, n - used, ", %d dropouts", drops);
    if (used < n) snprintf(buf + used, n - used, "%s)", any ? "" : "no pattern in this model");
}
