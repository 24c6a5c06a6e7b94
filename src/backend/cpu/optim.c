/* The fused optimizer over the parameter arena: p, g, m, v are flat f32 arrays of
 * n floats (all parameters back to back), updated in one vectorised pass split
 * statically between threads.
 *
 * Gradient used: g' = g * grad_scale * clip, where clip = min(1, clip_norm /
 * (norm + 1e-6)) with norm = sqrt(*sumsq) * grad_scale when clip_norm > 0
 * (torch.nn.utils.clip_grad_norm_), else 1.
 *
 * AdamW, in torch.optim.AdamW's (single-tensor, foreach) operation order:
 *   p *= 1 - lr wd                          (decoupled decay, masked elements only)
 *   m += (1 - b1) (g' - m)                  (torch: exp_avg.lerp_(grad, 1 - b1))
 *   v  = b2 v + (1 - b2) g'^2
 *   p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - b_i^t
 * with bc1, bc2 and lr / bc1 in double as Python computes them, then rounded to f32.
 *
 * SGD as torch.optim.SGD (dampening 0):
 *   d = g' + wd p (masked elements); with momentum: m = mu m + d (m starts at 0, so
 *   the first step gives m = d exactly as torch's clone), d = nesterov ? d + mu m : m;
 *   p -= lr d.
 *
 * grad_sumsq: sum of g^2 over fixed 16K-float chunks, each summed in double, chunks
 * combined in index order - the same bits for any thread count. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

typedef struct sq_ctx { const float *g; } sq_ctx;

static double sumsq_range(const void *vctx, int64_t i0, int64_t i1) {
    const float *restrict g = ((const sq_ctx *)vctx)->g;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; i++) s += (double)g[i] * (double)g[i];
    return s;
}

brisk_status cpu_grad_sumsq(brisk_backend *be, const float *g, int64_t n, float *sumsq_out,
                            brisk_error *err) {
    (void)err;
    sq_ctx c = {g};
    *sumsq_out = (float)cpu_chunk_sum(be->impl, n, 16384, sumsq_range, &c);
    return BRISK_OK;
}

typedef struct opt_ctx {
    float *p, *m, *v;
    const float *g;
    const uint8_t *mask;
    float gs;          /* grad_scale * clip */
    float lr, decay;   /* AdamW: decay = 1 - lr wd; SGD: decay = wd */
    float b1, b2, omb1, omb2, step_size, bc2_sqrt, eps;
    float mu;
    int nesterov;
} opt_ctx;

/* The loops come in two copies, with and without the decay mask, because a
 * `mask == NULL ||` test inside the loop stops GCC from vectorising it (control
 * flow); with the mask the choice is a select: x * (mask ? decay : 1), exact. */
#define ADAMW_LOOP(DECAY)                                                         \
    _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                       \
        float gi = g[i] * gs;                                                     \
        float pi = p[i] * (DECAY);                                                \
        float mi = m[i] + omb1 * (gi - m[i]);                                     \
        float vi = b2 * v[i] + omb2 * (gi * gi);                                  \
        m[i] = mi;                                                                \
        v[i] = vi;                                                                \
        p[i] = pi - ss * (mi / (sqrtf(vi) / bc2s + eps));                         \
    }

static void adamw_range(const void *vctx, int64_t i0, int64_t i1) {
    const opt_ctx *c = vctx;
    float *restrict p = c->p, *restrict m = c->m, *restrict v = c->v;
    const float *restrict g = c->g;
    const uint8_t *restrict mask = c->mask;
    float gs = c->gs, decay = c->decay, b2 = c->b2, omb1 = c->omb1, omb2 = c->omb2;
    float ss = c->step_size, bc2s = c->bc2_sqrt, eps = c->eps;
    if (mask) ADAMW_LOOP(mask[i] ? decay : 1.0f)
    else ADAMW_LOOP(decay)
}

/* d = g' + wd p (masked), then momentum / Nesterov, p -= lr d */
#define SGD_LOOP(WD)                                                              \
    if (mu == 0.0f) {                                                             \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                   \
            float d = g[i] * gs + (WD) * p[i];                                    \
            p[i] -= lr * d;                                                       \
        }                                                                         \
    } else if (!nesterov) {                                                       \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                   \
            float d = g[i] * gs + (WD) * p[i];                                    \
            float b = mu * m[i] + d;                                              \
            m[i] = b;                                                             \
            p[i] -= lr * b;                                                       \
        }                                                                         \
    } else {                                                                      \
        _Pragma("omp simd") for (int64_t i = i0; i < i1; i++) {                   \
            float d = g[i] * gs + (WD) * p[i];                                    \
            float b = mu * m[i] + d;                                              \
            m[i] = b;                                                             \
            p[i] -= lr * (d + mu * b);                                            \
        }                                                                         \
    }

static void sgd_range(const void *vctx, int64_t i0, int64_t i1) {
    const opt_ctx *c = vctx;
    float *restrict p = c->p, *restrict m = c->m;
    const float *restrict g = c->g;
    const uint8_t *restrict mask = c->mask;
    float gs = c->gs, wd = c->decay, lr = c->lr, mu = c->mu;
    int nesterov = c->nesterov;
    if (mask) {
        SGD_LOOP(mask[i] ? wd : 0.0f)
    } else {
        SGD_LOOP(wd)
    }
}

brisk_status cpu_optim_update(brisk_backend *be, float *p, const float *g, float *m, float *v,
                              int64_t n, const brisk_optim_args *a, const float *sumsq,
                              const uint8_t *decay_mask, brisk_error *err) {
    cpu_backend *cb = be->impl;
    if (!a) return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: no arguments");
    if (n <= 0) return BRISK_OK;
    opt_ctx c = {.p = p, .m = m, .v = v, .g = g, .mask = decay_mask, .lr = a->lr};
    double gs = a->grad_scale;
    if (a->clip_norm > 0.0f) {
        if (!sumsq)
            return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: clip_norm %g needs the gradient "
                                "sum of squares", a->clip_norm);
        /* torch computes the norm of the already-scaled gradients, in f32 */
        float norm = sqrtf(*sumsq) * a->grad_scale;
        float coef = a->clip_norm / (norm + 1e-6f);
        if (coef < 1.0f) gs *= coef;
    }
    c.gs = (float)gs;
    if (a->kind == BRISK_OPTIM_ADAMW) {
        if (a->t < 1)
            return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: AdamW step t = %lld, must be >= 1",
                                (long long)a->t);
        if (!v) return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: AdamW needs the v buffer");
        double bc1 = 1.0 - pow((double)a->beta1, (double)a->t);
        double bc2 = 1.0 - pow((double)a->beta2, (double)a->t);
        c.decay = (float)(1.0 - (double)a->lr * (double)a->weight_decay);
        c.b1 = a->beta1;
        c.b2 = a->beta2;
        c.omb1 = 1.0f - a->beta1;
        c.omb2 = 1.0f - a->beta2;
        c.step_size = (float)((double)a->lr / bc1);
        c.bc2_sqrt = (float)sqrt(bc2);
        c.eps = a->eps;
        cpu_parallel(cb, n, CPU_PAR_MIN, adamw_range, &c);
    } else if (a->kind == BRISK_OPTIM_SGD) {
        if (a->momentum != 0.0f && !m)
            return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: SGD momentum needs the m buffer");
        c.decay = a->weight_decay;
        c.mu = a->momentum;
        c.nesterov = a->nesterov;
        cpu_parallel(cb, n, CPU_PAR_MIN, sgd_range, &c);
    } else {
        return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: unknown optimizer kind %d", (int)a->kind);
    }
    return BRISK_OK;
}
