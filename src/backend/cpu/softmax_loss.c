/* Softmax family and losses, f32, over the last dim of [rows, C] (rows = leading
 * dims flattened):
 *   SOFTMAX           y = exp(x - max) / sum exp(x - max)
 *   LOG_SOFTMAX       y = x - max - log(sum exp(x - max))
 *   SOFTMAX_GRAD      (dy, y): dx = y * (dy - sum(dy * y))
 *   LOG_SOFTMAX_GRAD  (dy, y): dx = dy - exp(y) * sum(dy)
 *   CROSS_ENTROPY     (logits, labels i32 [rows]): mean over rows of logsumexp - x[label]
 *   CROSS_ENTROPY_GRAD(dloss, logits, labels): (softmax - onehot) * dloss / rows
 *   MSE               (pred, target): mean((pred - target)^2)
 *   MSE_GRAD          (dloss, pred, target): 2 (pred - target) dloss / n
 * Rows run in parallel (each row is independent); the scalar losses sum per-row or
 * per-element terms in double through cpu_chunk_sum, so the loss is the same for
 * any thread count. Labels are checked before anything is written: one outside
 * [0, C) is an error naming the row and the value. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <math.h>

typedef struct sm_ctx {
    brisk_op op;
    const float *x, *dy, *y;
    const int32_t *labels;
    float *out;
    int64_t C;
    float scale;
} sm_ctx;

static float row_max(const float *restrict x, int64_t C) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < C; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* sum_j exp(x_j - m) */
static float row_sumexp(const float *restrict x, int64_t C, float m) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; j++) s += cpu_expf(x[j] - m);
    return s;
}

static void softmax_range(const void *vctx, int64_t r0, int64_t r1) {
    const sm_ctx *c = vctx;
    int64_t C = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict x = c->x + r * C;
        float *restrict o = c->out + r * C;
        float m = row_max(x, C);
        if (m == -INFINITY) m = 0.0f; /* an all -inf row: exp gives 0, result NaN as in torch */
        if (c->op == BRISK_OP_SOFTMAX) {
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < C; j++) {
                float e = cpu_expf(x[j] - m);
                o[j] = e;
                s += e;
            }
            float inv = 1.0f / s;
#pragma omp simd
            for (int64_t j = 0; j < C; j++) o[j] *= inv;
        } else {
            float lse = m + logf(row_sumexp(x, C, m));
#pragma omp simd
            for (int64_t j = 0; j < C; j++) o[j] = x[j] - lse;
        }
    }
}

brisk_status cpu_softmax(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                         void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t C = n->shape.ndim ? n->shape.d[n->shape.ndim - 1] : 1, len = cpu_numel(&n->shape);
    if (cpu_numel(&IN_NODE(g, id, 0)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input and output sizes differ", brisk_op_name(n->op));
    if (C == 0 || len == 0) return BRISK_OK;
    sm_ctx c = {.op = n->op, .x = in[0], .out = out, .C = C};
    cpu_parallel(cb, len / C, (CPU_PAR_MIN_HEAVY + C - 1) / C, softmax_range, &c);
    return BRISK_OK;
}

static void softmax_grad_range(const void *vctx, int64_t r0, int64_t r1) {
    const sm_ctx *c = vctx;
    int64_t C = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict dy = c->dy + r * C, *restrict y = c->y + r * C;
        float *restrict o = c->out + r * C;
        float s = 0.0f;
        if (c->op == BRISK_OP_SOFTMAX_GRAD) {
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < C; j++) s += dy[j] * y[j];
#pragma omp simd
            for (int64_t j = 0; j < C; j++) o[j] = y[j] * (dy[j] - s);
        } else {
#pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < C; j++) s += dy[j];
#pragma omp simd
            for (int64_t j = 0; j < C; j++) o[j] = dy[j] - cpu_expf(y[j]) * s;
        }
    }
}

brisk_status cpu_softmax_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                              void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t C = n->shape.ndim ? n->shape.d[n->shape.ndim - 1] : 1, len = cpu_numel(&n->shape);
    for (int k = 0; k < 2; k++)
        if (cpu_numel(&IN_NODE(g, id, k)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d size differs from the output",
                                brisk_op_name(n->op), k);
    if (C == 0 || len == 0) return BRISK_OK;
    sm_ctx c = {.op = n->op, .dy = in[0], .y = in[1], .out = out, .C = C};
    cpu_parallel(cb, len / C, (CPU_PAR_MIN_HEAVY + C - 1) / C, softmax_grad_range, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- cross-entropy */

static double ce_rows(const void *vctx, int64_t r0, int64_t r1) {
    const sm_ctx *c = vctx;
    int64_t C = c->C;
    double s = 0.0;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * C;
        float m = row_max(x, C);
        float lse = m + logf(row_sumexp(x, C, m));
        s += (double)lse - (double)x[c->labels[r]];
    }
    return s;
}

static void ce_grad_range(const void *vctx, int64_t r0, int64_t r1) {
    const sm_ctx *c = vctx;
    int64_t C = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict x = c->x + r * C;
        float *restrict o = c->out + r * C;
        float m = row_max(x, C);
        float k = c->scale / row_sumexp(x, C, m);
#pragma omp simd
        for (int64_t j = 0; j < C; j++) o[j] = cpu_expf(x[j] - m) * k;
        o[c->labels[r]] -= c->scale;
    }
}

brisk_status cpu_cross_entropy(cpu_backend *cb, const brisk_graph *g, int id,
                               const void *const *in, void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_CROSS_ENTROPY_GRAD;
    const brisk_node *nl = IN_NODE(g, id, grad ? 1 : 0), *nlab = IN_NODE(g, id, grad ? 2 : 1);
    if (nlab->dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: labels must be i32, got %s",
                            brisk_op_name(n->op), brisk_dtype_name(nlab->dtype));
    int64_t len = cpu_numel(&nl->shape);
    int64_t C = nl->shape.ndim ? nl->shape.d[nl->shape.ndim - 1] : 1;
    int64_t rows = C ? len / C : 0;
    if (cpu_numel(&nlab->shape) != rows)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %lld labels for %lld rows", brisk_op_name(n->op),
                            (long long)cpu_numel(&nlab->shape), (long long)rows);
    const int32_t *lab = in[grad ? 2 : 1];
    for (int64_t r = 0; r < rows; r++)
        if (lab[r] < 0 || (int64_t)lab[r] >= C)
            return brisk_errorf(err, BRISK_ERR_INVALID,
                                "%s (node %d): label %d at row %lld is outside the valid range [0, %lld)",
                                brisk_op_name(n->op), id, (int)lab[r], (long long)r, (long long)C);
    sm_ctx c = {.op = n->op, .x = in[grad ? 1 : 0], .labels = lab, .out = out, .C = C};
    if (!grad) {
        double s = rows ? cpu_chunk_sum(cb, rows, 64, ce_rows, &c) / (double)rows : NAN;
        *(float *)out = (float)s;
        return BRISK_OK;
    }
    if (cpu_numel(&n->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "cross_entropy_grad: output size differs from logits");
    c.scale = rows ? *(const float *)in[0] / (float)rows : 0.0f;
    if (rows) cpu_parallel(cb, rows, (CPU_PAR_MIN_HEAVY + C - 1) / C, ce_grad_range, &c);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- mean squared error */

typedef struct mse_ctx {
    const float *p, *t;
    float *out;
    float k;
} mse_ctx;

static double mse_terms(const void *vctx, int64_t i0, int64_t i1) {
    const mse_ctx *c = vctx;
    const float *restrict p = c->p, *restrict t = c->t;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; i++) {
        double d = (double)p[i] - (double)t[i];
        s += d * d;
    }
    return s;
}

static void mse_grad_range(const void *vctx, int64_t i0, int64_t i1) {
    const mse_ctx *c = vctx;
    const float *restrict p = c->p, *restrict t = c->t;
    float *restrict o = c->out;
    float k = c->k;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) o[i] = k * (p[i] - t[i]);
}

brisk_status cpu_mse(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                     void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_MSE_GRAD;
    const brisk_node *np = IN_NODE(g, id, grad ? 1 : 0), *nt = IN_NODE(g, id, grad ? 2 : 1);
    int64_t len = cpu_numel(&np->shape);
    if (cpu_numel(&nt->shape) != len || (grad && cpu_numel(&n->shape) != len))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: pred, target (and output) sizes differ",
                            brisk_op_name(n->op));
    mse_ctx c = {in[grad ? 1 : 0], in[grad ? 2 : 1], out, 0.0f};
    if (!grad) {
        *(float *)out = len ? (float)(cpu_chunk_sum(cb, len, 16384, mse_terms, &c) / (double)len) : NAN;
        return BRISK_OK;
    }
    c.k = len ? 2.0f * *(const float *)in[0] / (float)len : 0.0f;
    cpu_parallel(cb, len, CPU_PAR_MIN, mse_grad_range, &c);
    return BRISK_OK;
}
