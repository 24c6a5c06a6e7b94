/* run_node: checks a node's inputs as the CPU backend does (the same errors for the same
 * bad graphs), then one switch from op to launcher. Shapes are collapsed here, on the
 * host, into the strided views the kernels take. Before a run's first kernel the per-step
 * values are written and staged inputs committed (step.c); nodes a fused GEMM already
 * computed return at once; after each node its low-precision copy is refreshed when a
 * GEMM reads it (prepare.c). */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every view the host builds here has at most BRISK_MAX_DIMS dims and the kernels' structs
 * hold CUK_MAX_DIMS: the core limit must never outgrow the kernels'. */
_Static_assert(CUK_MAX_DIMS >= BRISK_MAX_DIMS, "kernels.h CUK_MAX_DIMS must be at least core.h BRISK_MAX_DIMS");

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])
#define LAUNCH(call, what) CU((call), (what))

static int64_t numel(const brisk_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

static int64_t last_dim(const brisk_shape *s) { return s->ndim ? s->d[s->ndim - 1] : 1; }

/* The one place that says which ops have no CUDA kernel (yet), and why. An op listed here
 * makes supports_op answer no, so the trainer decides at setup (CPU under device auto, an
 * error naming the op under device cuda) instead of failing at step 1. Whoever adds a
 * kernel deletes its line here and adds its case to run_op. */
static const char *missing_kernel(brisk_op op) {
    switch (op) {
    default:
        return NULL;
    }
}

/* The shared dtype rule, then whether this backend has the kernel. */
int cuda_supports_op(brisk_backend *be, const brisk_node *node, char *why, size_t why_size) {
    (void)be;
    return brisk_cuda_op_supported(node, why, why_size);
}

int brisk_cuda_op_supported(const brisk_node *node, char *why, size_t why_size) {
    if (!brisk_op_dtype_ok(node, why, why_size)) return 0;
    const char *missing = missing_kernel(node->op);
    int rnn = node->op == BRISK_OP_LSTM || node->op == BRISK_OP_LSTM_GRAD || node->op == BRISK_OP_LSTM_GRAD_W ||
              node->op == BRISK_OP_GRU || node->op == BRISK_OP_GRU_GRAD || node->op == BRISK_OP_GRU_GRAD_W;
    if (!missing && rnn) missing = cuda_rnn_missing(); /* cudnn_rnn.c: NULL when cuDNN loads */
    int conv = node->op == BRISK_OP_CONV2D || node->op == BRISK_OP_CONV2D_GRAD_X || node->op == BRISK_OP_CONV2D_GRAD_W;
    if (!missing && conv) missing = cuda_conv_missing(); /* cudnn_conv.c */
    int attn = node->op == BRISK_OP_ATTENTION || node->op == BRISK_OP_ATTENTION_GRAD;
    if (!missing && attn && !cuda_attention_supported(node))
        missing = "the fused attention kernel takes heads of dimension up to 128 (attention.c)";
    if (missing && why && why_size) snprintf(why, why_size, "%s", missing);
    return missing == NULL;
}

/* ---------------------------------------------------------------- views */

/* NumPy broadcast of operands xs[k] to os, size-1 dims dropped and mergeable dims merged
 * (src/backend/cpu/elementwise.c's bcast_build): v->s[k] per operand. */
void cuda_bcast_view(cuda_strides *v, const brisk_shape *os, const brisk_shape *const *xs, int nops) {
    int64_t st[3][CUK_MAX_DIMS];
    for (int k = 0; k < nops; k++) {
        int off = os->ndim - xs[k]->ndim;
        int64_t s = 1;
        for (int i = os->ndim - 1; i >= 0; i--) {
            int j = i - off;
            if (j < 0 || xs[k]->d[j] == 1) st[k][i] = 0;
            else { st[k][i] = s; s *= xs[k]->d[j]; }
        }
    }
    v->nd = 0;
    for (int i = 0; i < os->ndim; i++) {
        if (os->d[i] == 1) continue;
        int merge = v->nd > 0;
        for (int k = 0; k < nops && merge; k++)
            if (v->s[k][v->nd - 1] != st[k][i] * os->d[i]) merge = 0;
        if (merge) {
            v->d[v->nd - 1] *= os->d[i];
            for (int k = 0; k < nops; k++) v->s[k][v->nd - 1] = st[k][i];
        } else {
            v->d[v->nd] = os->d[i];
            for (int k = 0; k < nops; k++) v->s[k][v->nd] = st[k][i];
            v->nd++;
        }
    }
    if (v->nd == 0) {
        v->nd = 1;
        v->d[0] = 1;
        for (int k = 0; k < nops; k++) v->s[k][0] = 0;
    }
}

int cuda_reduce_dims(const brisk_shape *xs, uint32_t mask, int64_t *d, int *red) {
    int nd = 0;
    for (int i = 0; i < xs->ndim; i++) {
        if (xs->d[i] == 1) continue;
        int r = (mask >> i) & 1;
        if (nd && red[nd - 1] == r) d[nd - 1] *= xs->d[i];
        else d[nd] = xs->d[i], red[nd] = r, nd++;
    }
    return nd;
}

/* ---------------------------------------------------------------- op families */

brisk_status cuda_matmul_args(const brisk_graph *g, int id, cuda_gemm_args *a, int *empty, brisk_error *err) {
    const brisk_node *n = NODE(g, id), *na = IN_NODE(g, id, 0), *nb = IN_NODE(g, id, 1);
    int ta = n->attr.trans_a, tb = n->attr.trans_b;
    memset(a, 0, sizeof *a);
    *empty = 0;
    if (n->shape.ndim < 2 || na->shape.ndim < 2 || nb->shape.ndim < 2)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul: operands need at least 2 dims");
    int64_t M = n->shape.d[n->shape.ndim - 2], N = n->shape.d[n->shape.ndim - 1];
    int64_t K = ta ? na->shape.d[na->shape.ndim - 2] : na->shape.d[na->shape.ndim - 1];
    int64_t kb = tb ? nb->shape.d[nb->shape.ndim - 1] : nb->shape.d[nb->shape.ndim - 2];
    int64_t ma = ta ? na->shape.d[na->shape.ndim - 1] : na->shape.d[na->shape.ndim - 2];
    int64_t nbn = tb ? nb->shape.d[nb->shape.ndim - 2] : nb->shape.d[nb->shape.ndim - 1];
    if (kb != K || ma != M || nbn != N)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul (node %d): [%lld, %lld] x [%lld, %lld] does not give "
                            "[%lld, %lld]", id, (long long)ma, (long long)K, (long long)kb, (long long)nbn,
                            (long long)M, (long long)N);
    if (M == 0 || N == 0 || numel(&n->shape) == 0) {
        *empty = 1;
        return BRISK_OK;
    }
    int64_t batch = numel(&n->shape) / (M * N);
    int64_t sa = na->shape.ndim > 2 ? M * K : 0, sb = nb->shape.ndim > 2 ? K * N : 0;
    if (numel(&na->shape) != (sa ? batch : 1) * M * K || numel(&nb->shape) != (sb ? batch : 1) * K * N)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "matmul: batch dims of the operands do not match the output");
    if (batch > 1 && sb == 0 && !ta) { /* a shared 2-D b: one tall GEMM */
        M *= batch;
        batch = 1;
        sa = 0;
    }
    *a = (cuda_gemm_args){.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .batch = batch, .sa = sa, .sb = sb,
                          .epi = EPI_NONE};
    return BRISK_OK;
}

static brisk_status run_matmul(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err) {
    const brisk_node *n = NODE(g, id), *na = IN_NODE(g, id, 0), *nb = IN_NODE(g, id, 1);
    cuda_gemm_args a;
    int empty;
    brisk_status st = cuda_matmul_args(g, id, &a, &empty, err);
    if (st || empty) return st;
    if (a.K == 0) {
        CU(cudaMemsetAsync(out, 0, (size_t)numel(&n->shape) * sizeof(float), cb->compute), "matmul with K = 0");
        return BRISK_OK;
    }
    int done = 0;
    if ((st = cuda_prep_fused(cb, g, id, in, out, &done, err)) || done) return st;
    char what[64];
    snprintf(what, sizeof what, "matmul (node %d)", id);
    a.what = what;
    a.A = in[0], a.B = in[1], a.C = out;
    a.in_type = cuda_in_type(cb);
    if (a.in_type) {
        /* a prepared graph has a 16-bit copy of every GEMM operand; a lone node casts into scratch */
        void *scratch = NULL;
        size_t half = ((size_t)numel(&na->shape) * 2 + 255) / 256 * 256;
        if ((!cuda_prep_covers(cb, g) &&
             (st = cuda_scratch(cb, half + (size_t)numel(&nb->shape) * 2 + 256, &scratch, err))) ||
            (st = cuda_prep_operand(cb, g, id, 0, in[0], &a.A, scratch, err)) ||
            (st = cuda_prep_operand(cb, g, id, 1, in[1], &a.B, scratch ? (char *)scratch + half : NULL, err)))
            return st;
    }
    return cuda_gemm(cb, &a, err);
}

static brisk_status run_reduce(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    const brisk_shape *xs = &IN_NODE(g, id, 0)->shape;
    uint32_t mask = 0;
    float scale = 1.0f;
    if (n->op == BRISK_OP_SUM_TO) {
        const brisk_shape *t = &n->attr.shape2;
        int off = xs->ndim - t->ndim;
        if (off < 0) return brisk_errorf(err, BRISK_ERR_SHAPE, "sum_to: target has more dims than the input");
        for (int i = 0; i < xs->ndim; i++) {
            int j = i - off;
            if (j < 0 || (t->d[j] == 1 && xs->d[i] != 1)) mask |= 1u << i;
            else if (t->d[j] != xs->d[i])
                return brisk_errorf(err, BRISK_ERR_SHAPE, "sum_to: input dim %d is %lld, target %lld", i,
                                    (long long)xs->d[i], (long long)t->d[j]);
        }
    } else {
        mask = n->attr.axes & (xs->ndim >= 32 ? 0xffffffffu : ((1u << xs->ndim) - 1));
        if (n->op == BRISK_OP_MEAN) {
            double cnt = 1.0;
            for (int i = 0; i < xs->ndim; i++)
                if ((mask >> i) & 1) cnt *= (double)xs->d[i];
            scale = (float)(1.0 / cnt);
        }
    }
    int64_t n_out = 1, n_red = 1;
    for (int i = 0; i < xs->ndim; i++) {
        if ((mask >> i) & 1) n_red *= xs->d[i];
        else n_out *= xs->d[i];
    }
    if (n_out != numel(&n->shape))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: output has %lld elements, expected %lld", brisk_op_name(n->op),
                            (long long)numel(&n->shape), (long long)n_out);
    if (n_red == 0) { /* an empty axis: SUM 0, MEAN 0 / 0 = NaN (src/ops/reduce.c) */
        if (n_out) LAUNCH(cuk_fill(out, n->op == BRISK_OP_MEAN ? NAN : 0.0f, n_out, cb->compute), brisk_op_name(n->op));
        return BRISK_OK;
    }
    int64_t d[BRISK_MAX_DIMS];
    int red[BRISK_MAX_DIMS];
    int nd = cuda_reduce_dims(xs, mask, d, red);
    void *scratch;
    brisk_status st = cuda_scratch(cb, cuk_reduce_scratch_bytes(n_out, n_red), &scratch, err);
    if (st) return st;
    LAUNCH(cuk_reduce(in[0], out, nd, d, red, scale, scratch, cb->compute), brisk_op_name(n->op));
    return BRISK_OK;
}

static brisk_status run_random(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t len = numel(&n->shape), lo = 0;
    float p = 0.0f, scale = 1.0f, a = 0.0f, b = 0.0f;
    uint64_t range = 0;
    if (n->op == BRISK_OP_DROPOUT) {
        p = n->attr.f0;
        if (!(p >= 0.0f && p <= 1.0f))
            return brisk_errorf(err, BRISK_ERR_INVALID, "dropout (node %d): p = %g is outside [0, 1]", id, p);
        if (numel(&IN_NODE(g, id, 0)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "dropout: input and output sizes differ");
        scale = 1.0f / (1.0f - p);
    } else {
        if (!brisk_shape_equal(&n->attr.shape2, &n->shape))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: shape2 must equal the output shape", brisk_op_name(n->op));
        if (n->op == BRISK_OP_RAND_UNIFORM) {
            a = n->attr.f0, b = n->attr.f1;
            if (!(a < b) || !isfinite(a) || !isfinite(b))
                return brisk_errorf(err, BRISK_ERR_INVALID, "rand_uniform (node %d): need finite f0 < f1, got [%g, %g)",
                                    id, a, b);
        } else if (n->op == BRISK_OP_RANDINT) {
            int64_t r = n->attr.i1 - n->attr.i0;
            if (r < 1 || r > ((int64_t)1 << 32) || n->attr.i0 < INT32_MIN || n->attr.i1 - 1 > INT32_MAX)
                return brisk_errorf(err, BRISK_ERR_INVALID, "randint (node %d): range [%lld, %lld) must be non-empty, "
                                    "at most 2^32 wide and within i32", id, (long long)n->attr.i0, (long long)n->attr.i1);
            lo = n->attr.i0;
            range = (uint64_t)r;
        }
    }
    LAUNCH(cuk_random(n->op, n->op == BRISK_OP_DROPOUT ? in[0] : NULL, out, len, n->attr.rng, p, scale, a, b, lo,
                      range, cb->vals, cb->compute), brisk_op_name(n->op));
    return BRISK_OK;
}

static brisk_status run_rows(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t len = numel(&n->shape), C = last_dim(&n->shape);
    brisk_op op = n->op;
    int xi = op == BRISK_OP_LAYERNORM_GRAD_X || op == BRISK_OP_SOFTMAX_GRAD || op == BRISK_OP_LOG_SOFTMAX_GRAD;
    for (int k = 0; k <= xi; k++)
        if (numel(&IN_NODE(g, id, k)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d size differs from the output", brisk_op_name(op), k);
    if (C == 0 || len == 0) return BRISK_OK;
    int64_t rows = len / C;
    cudaStream_t s = cb->compute;
    switch (op) {
    case BRISK_OP_SOFTMAX: case BRISK_OP_LOG_SOFTMAX:
        LAUNCH(cuk_softmax(op == BRISK_OP_LOG_SOFTMAX, in[0], out, rows, C, s), brisk_op_name(op));
        return BRISK_OK;
    case BRISK_OP_SOFTMAX_GRAD: case BRISK_OP_LOG_SOFTMAX_GRAD:
        LAUNCH(cuk_softmax_grad(op == BRISK_OP_LOG_SOFTMAX_GRAD, in[0], in[1], out, rows, C, s), brisk_op_name(op));
        return BRISK_OK;
    default: break;
    }
    int gi = op == BRISK_OP_LAYERNORM ? 1 : 2;
    if (op != BRISK_OP_LAYERNORM_XHAT && n->n_in != 3 && !(op == BRISK_OP_LAYERNORM_GRAD_X && n->n_in == 2))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %d inputs", brisk_op_name(op), id, n->n_in);
    if (op != BRISK_OP_LAYERNORM_XHAT)
        for (int k = gi; k < n->n_in; k++)
            if (numel(&IN_NODE(g, id, k)->shape) != C)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d has %lld elements, expected %lld",
                                    brisk_op_name(op), k, (long long)numel(&IN_NODE(g, id, k)->shape), (long long)C);
    const float *x = in[xi], *dy = xi ? in[0] : NULL;
    const float *gamma = op == BRISK_OP_LAYERNORM ? in[1] : op == BRISK_OP_LAYERNORM_GRAD_X && n->n_in > 2 ? in[2] : NULL;
    const float *beta = op == BRISK_OP_LAYERNORM ? in[2] : NULL;
    LAUNCH(cuk_layernorm(op, x, dy, gamma, beta, out, rows, C, n->attr.f0, s), brisk_op_name(op));
    return BRISK_OK;
}

static brisk_status run_loss(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_CROSS_ENTROPY_GRAD || n->op == BRISK_OP_MSE_GRAD;
    const brisk_node *n0 = IN_NODE(g, id, grad ? 1 : 0), *n1 = IN_NODE(g, id, grad ? 2 : 1);
    int64_t len = numel(&n0->shape);
    void *scratch;
    brisk_status st;
    if (n->op == BRISK_OP_MSE || n->op == BRISK_OP_MSE_GRAD) {
        if (numel(&n1->shape) != len || (grad && numel(&n->shape) != len))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: pred, target (and output) sizes differ", brisk_op_name(n->op));
        if (grad) {
            LAUNCH(cuk_mse_grad(in[0], in[1], in[2], out, len, cb->compute), "mse_grad");
        } else if (len == 0) {
            LAUNCH(cuk_fill(out, NAN, 1, cb->compute), "mse");
        } else {
            if ((st = cuda_scratch(cb, cuk_reduce_scratch_bytes(1, len), &scratch, err))) return st;
            LAUNCH(cuk_sum_global(2, in[0], in[1], len, 1.0 / (double)len, NULL, out, scratch, cb->compute), "mse");
        }
        return BRISK_OK;
    }
    if (n1->dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: labels must be i32, got %s", brisk_op_name(n->op),
                            brisk_dtype_name(n1->dtype));
    int64_t C = last_dim(&n0->shape), rows = C ? len / C : 0;
    if (numel(&n1->shape) != rows)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %lld labels for %lld rows", brisk_op_name(n->op),
                            (long long)numel(&n1->shape), (long long)rows);
    if (grad) {
        if (numel(&n->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "cross_entropy_grad: output size differs from logits");
        LAUNCH(cuk_cross_entropy_grad(in[0], in[1], in[2], out, rows, C, cb->errors, id, cb->compute),
               "cross_entropy_grad");
        return BRISK_OK;
    }
    if ((st = cuda_scratch(cb, (size_t)(rows + 1) * sizeof(double), &scratch, err))) return st;
    LAUNCH(cuk_cross_entropy(in[0], in[1], out, rows, C, scratch, cb->errors, id, cb->compute), "cross_entropy");
    return BRISK_OK;
}

/* The loss or its gradient; inputs, sizes and attributes checked by brisk_node_check_inputs. */
static brisk_status run_pointwise_loss(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in,
                                       void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_POINTWISE_LOSS_GRAD, off = grad ? 1 : 0;
    int64_t len = numel(&IN_NODE(g, id, off)->shape);
    void *scratch;
    brisk_status st = cuda_scratch(cb, cuk_loss_scratch_bytes(), &scratch, err);
    if (st) return st;
    const float *w = n->n_in == 3 + off ? in[off + 2] : NULL;
    if (grad)
        LAUNCH(cuk_pointwise_loss_grad(n->attr.kind, (int)n->attr.i0, n->attr.f0, in[0], in[1], in[2], w, out, len,
                                       scratch, cb->compute), brisk_op_name(n->op));
    else
        LAUNCH(cuk_pointwise_loss(n->attr.kind, n->attr.f0, in[0], in[1], w, len, out, scratch, cb->compute),
               brisk_op_name(n->op));
    return BRISK_OK;
}

/* ---------------------------------------------------------------- run_node */

static brisk_status run_op(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                           const brisk_step_state *st, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    cudaStream_t s = cb->compute;
    int64_t len = numel(&n->shape);
    switch (n->op) {
    case BRISK_OP_RESHAPE:
        if (out != in[0]) CU(cudaMemcpyAsync(out, in[0], (size_t)len * brisk_dtype_size(n->dtype),
                                             cudaMemcpyDeviceToDevice, s), "reshape");
        return BRISK_OK;
    case BRISK_OP_MATMUL: return run_matmul(cb, g, id, in, out, err);
    case BRISK_OP_BIAS_ADD: {
        int64_t N = last_dim(&n->shape);
        if (numel(&IN_NODE(g, id, 1)->shape) != N || numel(&IN_NODE(g, id, 0)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "bias_add: bias has %lld elements, last dim is %lld",
                                (long long)numel(&IN_NODE(g, id, 1)->shape), (long long)N);
        if (N) LAUNCH(cuk_bias_act(in[0], in[1], out, len / N, N, 0, 0, s), "bias_add");
        return BRISK_OK;
    }
    case BRISK_OP_ADD: case BRISK_OP_SUB: case BRISK_OP_MUL: case BRISK_OP_DIV: case BRISK_OP_MINIMUM:
    case BRISK_OP_MAXIMUM: case BRISK_OP_POW_XY: case BRISK_OP_BINARY_GRAD: {
        int grad = n->op == BRISK_OP_BINARY_GRAD; /* (dy, x, y): x and y broadcast as the forward's */
        const brisk_shape *xs[2] = {&IN_NODE(g, id, grad)->shape, &IN_NODE(g, id, grad + 1)->shape};
        for (int k = 0; k < 2; k++) {
            if (xs[k]->ndim > n->shape.ndim)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d has more dims than the output",
                                    brisk_op_name(n->op), k + grad);
            int off = n->shape.ndim - xs[k]->ndim;
            for (int i = 0; i < xs[k]->ndim; i++)
                if (xs[k]->d[i] != 1 && xs[k]->d[i] != n->shape.d[off + i])
                    return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d dim %d is %lld, output %lld",
                                        brisk_op_name(n->op), k + grad, i, (long long)xs[k]->d[i],
                                        (long long)n->shape.d[off + i]);
        }
        int done = 0;
        brisk_status fs = n->op == BRISK_OP_ADD ? cuda_run_add_norm(cb, g, id, in, out, &done, err) : BRISK_OK;
        if (fs || done) return fs; /* a residual add fused with its layer norm */
        cuda_strides v;
        cuda_bcast_view(&v, &n->shape, xs, 2);
        if (!grad) {
            LAUNCH(cuk_binary(n->op, in[0], in[1], out, &v, len, s), brisk_op_name(n->op));
            return BRISK_OK;
        }
        int kind = n->attr.kind; /* inputs, kind and dy's shape: brisk_node_check_inputs */
        LAUNCH(cuk_binary_grad(kind, (int)n->attr.i0, in[0], in[1], in[2], out, &v, len, s), "binary_grad");
        return BRISK_OK;
    }
    case BRISK_OP_SCALE: case BRISK_OP_RELU: case BRISK_OP_GELU: case BRISK_OP_SILU: case BRISK_OP_TANH:
    case BRISK_OP_SIGMOID: case BRISK_OP_EXP: case BRISK_OP_LOG: case BRISK_OP_SQRT: case BRISK_OP_ABS:
    case BRISK_OP_POW: case BRISK_OP_CLAMP: case BRISK_OP_LEAKY_RELU: case BRISK_OP_ELU: case BRISK_OP_SOFTPLUS:
    case BRISK_OP_ERF:
        if (numel(&IN_NODE(g, id, 0)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input and output sizes differ", brisk_op_name(n->op));
        LAUNCH(cuk_unary(n->op, n->attr.kind == BRISK_GELU_TANH, n->attr.f0, n->attr.f1, in[0], out, len, s),
               brisk_op_name(n->op));
        return BRISK_OK;
    case BRISK_OP_ACT_GRAD: {
        int kind = n->attr.kind;
        if (!brisk_act_grad_kind_ok(kind))
            return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad: attr.kind %d is not an activation op", kind);
        if (n->n_in < 3)
            return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad: needs (dy, x, y), got %d inputs", n->n_in);
        for (int k = 0; k < 3; k++)
            if (numel(&IN_NODE(g, id, k)->shape) != len)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "act_grad: input %d size differs from the output", k);
        LAUNCH(cuk_act_grad(kind, n->attr.i1 == BRISK_GELU_TANH, n->attr.f0, n->attr.f1, in[0], in[1], in[2], out, len,
                            s), "act_grad");
        return BRISK_OK;
    }
    case BRISK_OP_DROPOUT: case BRISK_OP_RANDN: case BRISK_OP_RAND_UNIFORM: case BRISK_OP_RANDINT:
        return run_random(cb, g, id, in, out, err);
    case BRISK_OP_SUM: case BRISK_OP_MEAN: case BRISK_OP_SUM_TO: return run_reduce(cb, g, id, in, out, err);
    case BRISK_OP_SOFTMAX: case BRISK_OP_LOG_SOFTMAX: case BRISK_OP_SOFTMAX_GRAD: case BRISK_OP_LOG_SOFTMAX_GRAD:
    case BRISK_OP_LAYERNORM: case BRISK_OP_LAYERNORM_GRAD_X: case BRISK_OP_LAYERNORM_XHAT:
        return run_rows(cb, g, id, in, out, err);
    case BRISK_OP_CROSS_ENTROPY: case BRISK_OP_CROSS_ENTROPY_GRAD: case BRISK_OP_MSE: case BRISK_OP_MSE_GRAD:
        return run_loss(cb, g, id, in, out, err);
    case BRISK_OP_POINTWISE_LOSS: case BRISK_OP_POINTWISE_LOSS_GRAD: return run_pointwise_loss(cb, g, id, in, out, err);
    case BRISK_OP_UPSAMPLE2D: case BRISK_OP_UPSAMPLE2D_GRAD: return cuda_run_upsample(cb, g, id, in, out, err);
    case BRISK_OP_EXPAND: case BRISK_OP_CONCAT: case BRISK_OP_SLICE: case BRISK_OP_SLICE_GRAD:
    case BRISK_OP_TRANSPOSE:
        return cuda_run_movement(cb, g, id, in, out, err);
    case BRISK_OP_CAST: {
        const brisk_node *x = IN_NODE(g, id, 0);
        if (numel(&x->shape) != len) return brisk_errorf(err, BRISK_ERR_SHAPE, "cast: input and output sizes differ");
        if (x->dtype == n->dtype) {
            if (out != in[0]) CU(cudaMemcpyAsync(out, in[0], (size_t)len * brisk_dtype_size(n->dtype),
                                                 cudaMemcpyDeviceToDevice, s), "cast");
        } else {
            LAUNCH(cuk_cast(in[0], x->dtype, out, n->dtype, len, s), "cast");
        }
        return BRISK_OK;
    }
    case BRISK_OP_GATHER: case BRISK_OP_SCATTER_ADD: case BRISK_OP_SEGMENT_SUM: case BRISK_OP_SINUSOIDAL:
    case BRISK_OP_SINUSOIDAL_GRAD:
        return cuda_run_index(cb, g, id, in, out, err);
    case BRISK_OP_LSTM: case BRISK_OP_LSTM_GRAD: case BRISK_OP_LSTM_GRAD_W:
    case BRISK_OP_GRU: case BRISK_OP_GRU_GRAD: case BRISK_OP_GRU_GRAD_W:
        return cuda_run_rnn(cb, g, id, in, out, err);
    case BRISK_OP_CONV2D: case BRISK_OP_CONV2D_GRAD_X: case BRISK_OP_CONV2D_GRAD_W:
        return cuda_run_conv(cb, g, id, in, out, err);
    case BRISK_OP_POOL2D: case BRISK_OP_POOL2D_GRAD: return cuda_run_pool(cb, g, id, in, out, err);
    case BRISK_OP_BATCHNORM: case BRISK_OP_BATCHNORM_GRAD_GB: case BRISK_OP_BATCHNORM_GRAD_X:
        return cuda_run_batchnorm(cb, g, id, in, out, st, err);
    case BRISK_OP_ATTENTION: case BRISK_OP_ATTENTION_GRAD: return cuda_run_attention(cb, g, id, in, out, err);
    case BRISK_OP_GRAD_ACCUM:
        if (numel(&IN_NODE(g, id, 0)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "grad_accum: gradient and parameter sizes differ");
        if (!st->first_micro && in[0] == out)
            return brisk_errorf(err, BRISK_ERR_INVALID, "grad_accum: input aliases the gradient buffer on a later "
                                "micro-batch");
        if (in[0] == out) return BRISK_OK; /* planned in place (grads_in_place): no kernel */
        LAUNCH(cuk_grad_accum(in[0], out, len, cb->vals, s), "grad_accum");
        return BRISK_OK;
    default:
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda backend: no kernel for %s (node %d)",
                            brisk_op_name(n->op), id);
    }
}

brisk_status cuda_run_node(brisk_backend *be, const brisk_graph *g, int id, const void *const *in, void *out,
                           const brisk_step_state *st, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (!g || id < 0 || id >= g->n_nodes)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda backend: node %d out of range", id);
    brisk_status s = brisk_node_check_inputs(g, id, err);
    if (s) return s;
    const brisk_node *n = NODE(g, id);
    char why[160];
    if (!cuda_supports_op(be, n, why, sizeof why))
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda backend: %s (node %d) in %s: %s", brisk_op_name(n->op), id,
                            brisk_dtype_name(n->dtype), why);
    if (n->op == BRISK_OP_INPUT || n->op == BRISK_OP_PARAM || n->op == BRISK_OP_CONST) return BRISK_OK;
    int ok = out != NULL && (n->n_in == 0 || in != NULL);
    for (int i = 0; ok && i < n->n_in; i++) ok = in[i] != NULL;
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): NULL input or output buffer", brisk_op_name(n->op), id);
    static const brisk_step_state eval_state = {.first_micro = 1};
    if (!st) st = &eval_state;
    if ((s = cuda_begin_work(cb, st, err))) return s;
    if (cuda_prep_skips(cb, g, id)) return BRISK_OK; /* a fused GEMM computed it */
    if ((s = run_op(cb, g, id, in, out, st, err))) return s;
    return cuda_prep_after(cb, g, id, err);
}
