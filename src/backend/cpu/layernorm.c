/* Layer normalisation over the last dim of x [rows, N], f32, eps = attr.f0:
 *   mean = sum x / N, var = sum (x - mean)^2 / N (biased, as PyTorch),
 *   rstd = 1 / sqrt(var + eps), xhat = (x - mean) rstd
 *   LAYERNORM        (x, gamma [N], beta [N]): y = xhat * gamma + beta
 *   LAYERNORM_GRAD_X (dy, x [, gamma]): g = dy * gamma (dy without gamma: the gradient of
 *                    LAYERNORM_XHAT, group norm's);
 *                    dx = rstd (g - mean(g) - xhat mean(g xhat))
 *   LAYERNORM_XHAT   (x): xhat (the graph multiplies it by dy and sums for dgamma)
 * Statistics are recomputed per row rather than saved: the op table has one output
 * per node, and a row of a few hundred floats is in L1 when its stats are needed.
 * Two passes (mean, then centred squares) rather than E[x^2] - E[x]^2, which
 * cancels badly when |mean| >> std. Rows are independent and run in parallel. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

typedef struct ln_ctx {
    brisk_op op;
    const float *x, *dy, *gamma, *beta;
    float *out;
    int64_t N;
    float eps;
} ln_ctx;

/* mean as hi + lo floats: x - hi is exact for x near the mean (Sterbenz), so
 * (x - hi) - lo keeps the centring accurate even when |mean| >> std, where a
 * single f32 mean would shift every xhat by up to half an ulp of the mean */
typedef struct ln_stats { float hi, lo, rstd; } ln_stats;

static ln_stats row_stats(const float *restrict x, int64_t N, float eps) {
    /* the sum in double: an f32 sum of N values near 1000 is off by ~sqrt(N) ulps
     * of the sum; the centred squares are small and sum fine in f32 */
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < N; j++) s += x[j];
    double mu = s / (double)N;
    ln_stats st = {(float)mu, 0.0f, 0.0f};
    st.lo = (float)(mu - (double)st.hi);
    float hi = st.hi, lo = st.lo, q = 0.0f;
#pragma omp simd reduction(+ : q)
    for (int64_t j = 0; j < N; j++) {
        float d = (x[j] - hi) - lo;
        q += d * d;
    }
    st.rstd = 1.0f / sqrtf(q / (float)N + eps);
    return st;
}

/* One row; not inlined, so the fused residual passes (fuse.c) run the very same code. */
__attribute__((noinline)) void cpu_ln_row(brisk_op op, const float *restrict x, const float *restrict dy,
                                          const float *restrict ga, const float *restrict be, float *restrict o,
                                          int64_t N, float eps) {
    ln_stats st = row_stats(x, N, eps);
    float hi = st.hi, lo = st.lo, rs = st.rstd;
    if (op == BRISK_OP_LAYERNORM) {
#pragma omp simd
        for (int64_t j = 0; j < N; j++) o[j] = ((x[j] - hi) - lo) * rs * ga[j] + be[j];
    } else if (op == BRISK_OP_LAYERNORM_XHAT) {
#pragma omp simd
        for (int64_t j = 0; j < N; j++) o[j] = ((x[j] - hi) - lo) * rs;
    } else if (!ga) { /* LAYERNORM_XHAT's gradient: gamma = 1, the loop below without its product */
        float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < N; j++) {
            sg += dy[j];
            sgx += dy[j] * ((x[j] - hi) - lo) * rs;
        }
        float mg = sg / (float)N, mgx = sgx / (float)N;
#pragma omp simd
        for (int64_t j = 0; j < N; j++) o[j] = rs * (dy[j] - mg - ((x[j] - hi) - lo) * rs * mgx);
    } else {
        float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t j = 0; j < N; j++) {
            float gj = dy[j] * ga[j];
            sg += gj;
            sgx += gj * ((x[j] - hi) - lo) * rs;
        }
        float mg = sg / (float)N, mgx = sgx / (float)N;
#pragma omp simd
        for (int64_t j = 0; j < N; j++) o[j] = rs * (dy[j] * ga[j] - mg - ((x[j] - hi) - lo) * rs * mgx);
    }
}

static void ln_range(const void *vctx, int64_t r0, int64_t r1) {
    const ln_ctx *c = vctx;
    int64_t N = c->N;
    for (int64_t r = r0; r < r1; r++)
        cpu_ln_row(c->op, c->x + r * N, c->dy ? c->dy + r * N : NULL, c->gamma, c->beta, c->out + r * N, N, c->eps);
}

brisk_status cpu_layernorm(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                           void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t N = n->shape.ndim ? n->shape.d[n->shape.ndim - 1] : 1, len = cpu_numel(&n->shape);
    int xi = n->op == BRISK_OP_LAYERNORM_GRAD_X ? 1 : 0;
    if (cpu_numel(&IN_NODE(g, id, xi)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input and output sizes differ", brisk_op_name(n->op));
    if (n->op == BRISK_OP_LAYERNORM_GRAD_X && cpu_numel(&IN_NODE(g, id, 0)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "layernorm_grad_x: dy and x sizes differ");
    if (n->op != BRISK_OP_LAYERNORM_XHAT) {
        int gi = n->op == BRISK_OP_LAYERNORM ? 1 : 2;
        if (n->n_in != 3 && !(n->op == BRISK_OP_LAYERNORM_GRAD_X && n->n_in == 2))
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %d inputs", brisk_op_name(n->op), id, n->n_in);
        for (int k = gi; k < n->n_in; k++)
            if (cpu_numel(&IN_NODE(g, id, k)->shape) != N)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input %d has %lld elements, expected %lld",
                                    brisk_op_name(n->op), k, (long long)cpu_numel(&IN_NODE(g, id, k)->shape),
                                    (long long)N);
    }
    if (N == 0 || len == 0) return BRISK_OK;
    ln_ctx c = {.op = n->op, .N = N, .eps = n->attr.f0, .out = out};
    if (n->op == BRISK_OP_LAYERNORM) { c.x = in[0]; c.gamma = in[1]; c.beta = in[2]; }
    else if (n->op == BRISK_OP_LAYERNORM_XHAT) { c.x = in[0]; }
    else { c.dy = in[0]; c.x = in[1]; c.gamma = n->n_in > 2 ? in[2] : NULL; }
    cpu_parallel(cb, len / N, (CPU_PAR_MIN + N - 1) / N, ln_range, &c);
    return BRISK_OK;
}
