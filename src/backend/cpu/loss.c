/* POINTWISE_LOSS (pred, target [, weight]) and its gradient, f32, every operand of one
 * size n. Terms l(p, t), with d = p - t (kind BRISK_LOSS_*, delta = attr.f0):
 *   MSE     d^2
 *   L1      |d|
 *   Huber   0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
 *   BCE     max(p, 0) - p t + log(1 + e^-|p|), p the logit: the stable form of
 *           -t log sigmoid(p) - (1 - t) log(1 - sigmoid(p)), as torch's BCEWithLogitsLoss
 * loss = sum(w l) / sum(w) with a weight, 0 when sum(w) = 0 (every element masked out);
 * without one, sum(l) / n. Gradients, k = dloss w / sum(w) (or dloss / n):
 *   d/dp    2 d k, sign(d) k (0 at d = 0), clamp(d, -delta, delta) k, (sigmoid(p) - t) k
 *   d/dt    minus those, and for BCE -p k
 * as PyTorch's backward kernels. The terms are f32 (cpu_math.h's vectorised exp and log)
 * and are summed in double over fixed chunks in index order (cpu_chunk_sum): the same loss
 * for any thread count. The gradient recomputes sum(w) the same way rather than keeping
 * it from the forward. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#define LOSS_CHUNK 16384

typedef struct loss_ctx {
    int kind, which;
    float delta, scale; /* scale: dloss / sum(w) (or / n) */
    const float *p, *t, *w;
    float *out;
} loss_ctx;

static inline float loss_term(int kind, float p, float t, float delta) {
    float d = p - t, a = fabsf(d);
    switch (kind) {
    case BRISK_LOSS_MSE: return d * d;
    case BRISK_LOSS_L1: return a;
    case BRISK_LOSS_HUBER: return a < delta ? 0.5f * d * d : delta * (a - 0.5f * delta);
    default: return (p > 0.0f ? p : 0.0f) - p * t + cpu_log1p_pos(cpu_expf(-fabsf(p)));
    }
}

/* d l / d p */
static inline float loss_slope(int kind, float p, float t, float delta) {
    float d = p - t;
    switch (kind) {
    case BRISK_LOSS_MSE: return 2.0f * d;
    case BRISK_LOSS_L1: return d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
    case BRISK_LOSS_HUBER: return d < -delta ? -delta : d > delta ? delta : d;
    default: return cpu_sigmoidf(p) - t;
    }
}

static double terms(const void *vctx, int64_t i0, int64_t i1) {
    const loss_ctx *c = vctx;
    const float *restrict p = c->p, *restrict t = c->t, *restrict w = c->w;
    int kind = c->kind;
    float delta = c->delta;
    double s = 0.0;
    if (w) {
#pragma omp simd reduction(+ : s)
        for (int64_t i = i0; i < i1; i++) s += (double)(w[i] * loss_term(kind, p[i], t[i], delta));
    } else {
#pragma omp simd reduction(+ : s)
        for (int64_t i = i0; i < i1; i++) s += (double)loss_term(kind, p[i], t[i], delta);
    }
    return s;
}

static double weights(const void *vctx, int64_t i0, int64_t i1) {
    const float *restrict w = ((const loss_ctx *)vctx)->w;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; i++) s += (double)w[i];
    return s;
}

static void grad_range(const void *vctx, int64_t i0, int64_t i1) {
    const loss_ctx *c = vctx;
    const float *restrict p = c->p, *restrict t = c->t, *restrict w = c->w;
    float *restrict o = c->out;
    int kind = c->kind;
    float delta = c->delta, k = c->scale;
    if (c->which == 1) k = -k; /* d/dt: minus d/dp, but for BCE's -p (k's sign flips it back) */
#pragma omp simd
    for (int64_t i = i0; i < i1; i++) {
        float g = c->which == 1 && kind == BRISK_LOSS_BCE_LOGITS ? p[i] : loss_slope(kind, p[i], t[i], delta);
        o[i] = g * (w ? k * w[i] : k);
    }
}

brisk_status cpu_pointwise_loss(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                brisk_error *err) {
    (void)err;
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_POINTWISE_LOSS_GRAD, off = grad ? 1 : 0;
    int weighted = n->n_in == 3 + off; /* inputs, sizes and attributes: brisk_node_check_inputs */
    int64_t len = cpu_numel(&IN_NODE(g, id, off)->shape);
    loss_ctx c = {.kind = n->attr.kind, .which = (int)n->attr.i0, .delta = n->attr.f0, .p = in[off],
                  .t = in[off + 1], .w = weighted ? in[off + 2] : NULL, .out = out};
    double wsum = c.w ? cpu_chunk_sum(cb, len, LOSS_CHUNK, weights, &c) : (double)len;
    if (!grad) {
        double s = len ? cpu_chunk_sum(cb, len, LOSS_CHUNK, terms, &c) : 0.0;
        /* a mean over nothing is NaN (as MSE's); a masked mean over nothing kept is 0 */
        *(float *)out = c.w ? (wsum != 0.0 ? (float)(s / wsum) : 0.0f) : len ? (float)(s / wsum) : NAN;
        return BRISK_OK;
    }
    float dloss = *(const float *)in[0];
    c.scale = wsum != 0.0 ? (float)((double)dloss / wsum) : 0.0f;
    cpu_parallel(cb, len, CPU_PAR_MIN_HEAVY, grad_range, &c);
    return BRISK_OK;
}
