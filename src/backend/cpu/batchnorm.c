/* BATCHNORM, BATCHNORM_GRAD_GB, BATCHNORM_GRAD_X over dim 1 of [N, C, S...] (S = the
 * product of the trailing dims, H W for images): channel c's M = N S values are the N
 * planes x[n, c, :]. Statistics are summed in double (plane_sum's lanes), per channel by one
 * thread in a fixed order, so every thread count gives the same bits.
 *
 * Forward: y = x scale + shift (+ residual), scale = gamma invstd, shift = beta - mean
 * scale, then ReLU when fused (x < 0 ? 0 : x, NaN kept, as RELU). Workspace after y:
 * mean [C], invstd [C], the statistics used (batch when training, running in eval).
 * Training also updates the running buffers in place (inputs 3 and 4). */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

typedef struct bn_ctx {
    int64_t N, C, S, M;
    const float *x, *gamma, *beta, *res, *dy, *y, *gb;
    float *rmean, *rvar, *out, *ws;
    float eps, momentum;
    int relu, training;
} bn_ctx;

/* Sums over one plane in LANES double partial sums (each lane adds its elements in index
 * order, the lanes are combined in order): the compiler vectorizes the lanes, and the
 * result depends only on the plane's length. */
#define LANES 8

static double plane_sum(const float *x, int64_t n) {
    double acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
    for (; i < n; i++) acc[i % LANES] += x[i];
    double s = 0;
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

static double plane_sq_dev(const float *x, double m, int64_t n) {
    double acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (x[i + j] - m) * (x[i + j] - m);
    for (; i < n; i++) acc[i % LANES] += (x[i] - m) * (x[i] - m);
    double s = 0;
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

/* sum dy' and sum dy' (x - m), dy' = dy where the fused ReLU's output y is positive. The
 * mask goes through a small buffer in its own loop, which vectorizes; inside the lanes'
 * loop it compiled to a branch per element that mispredicts on half of them (40x slower). */
#define MASK_CHUNK 256 /* a multiple of LANES, so each element keeps its lane */

static void plane_grad_sums(const float *restrict dy, const float *restrict y, const float *restrict x, double m,
                            int relu, int64_t n, double *sdy, double *sdyx) {
    double a[LANES] = {0}, b[LANES] = {0};
    float t[MASK_CHUNK];
    for (int64_t c0 = 0; c0 < n; c0 += MASK_CHUNK) {
        int64_t len = n - c0 < MASK_CHUNK ? n - c0 : MASK_CHUNK;
        const float *d = dy + c0, *xc = x + c0;
        if (relu) {
            const float *yc = y + c0;
#pragma omp simd
            for (int64_t i = 0; i < len; i++) t[i] = yc[i] > 0.0f ? d[i] : 0.0f;
            d = t;
        }
        int64_t i = 0;
        for (; i + LANES <= len; i += LANES)
            for (int j = 0; j < LANES; j++) {
                a[j] += d[i + j];
                b[j] += d[i + j] * (xc[i + j] - m);
            }
        for (; i < len; i++) {
            a[i % LANES] += d[i];
            b[i % LANES] += d[i] * (xc[i] - m);
        }
    }
    for (int j = 0; j < LANES; j++) *sdy += a[j], *sdyx += b[j];
}

static void bn_forward_channels(const void *vctx, int64_t c0, int64_t c1) {
    const bn_ctx *b = vctx;
    for (int64_t c = c0; c < c1; c++) {
        double mean, var;
        if (b->training) {
            double s = 0, q = 0;
            for (int64_t n = 0; n < b->N; n++) s += plane_sum(b->x + (n * b->C + c) * b->S, b->S);
            mean = s / (double)b->M;
            for (int64_t n = 0; n < b->N; n++) q += plane_sq_dev(b->x + (n * b->C + c) * b->S, mean, b->S);
            var = q / (double)b->M;
            double m = b->momentum;
            b->rmean[c] = (float)((1.0 - m) * b->rmean[c] + m * mean);
            b->rvar[c] = (float)((1.0 - m) * b->rvar[c] + m * var * (double)b->M / (double)(b->M - 1));
        } else {
            mean = b->rmean[c];
            var = b->rvar[c];
        }
        double invstd = 1.0 / sqrt(var + b->eps);
        b->ws[c] = (float)mean;
        b->ws[b->C + c] = (float)invstd;
        float scale = (float)(b->gamma[c] * invstd), shift = (float)(b->beta[c] - mean * b->gamma[c] * invstd);
        int relu = b->relu;
        for (int64_t n = 0; n < b->N; n++) {
            int64_t o = (n * b->C + c) * b->S;
            const float *restrict xp = b->x + o;
            float *restrict yp = b->out + o;
            if (b->res) {
                const float *restrict rp = b->res + o;
                for (int64_t i = 0; i < b->S; i++) {
                    float v = xp[i] * scale + shift + rp[i];
                    yp[i] = relu && v < 0.0f ? 0.0f : v;
                }
            } else {
                for (int64_t i = 0; i < b->S; i++) {
                    float v = xp[i] * scale + shift;
                    yp[i] = relu && v < 0.0f ? 0.0f : v;
                }
            }
        }
    }
}

static void bn_grad_gb_channels(const void *vctx, int64_t c0, int64_t c1) {
    const bn_ctx *b = vctx;
    for (int64_t c = c0; c < c1; c++) {
        double sdy = 0, sdyx = 0, mean = b->ws[c], invstd = b->ws[b->C + c];
        for (int64_t n = 0; n < b->N; n++) {
            int64_t o = (n * b->C + c) * b->S;
            plane_grad_sums(b->dy + o, b->y + o, b->x + o, mean, b->relu, b->S, &sdy, &sdyx);
        }
        b->out[c] = (float)(sdyx * invstd);
        b->out[b->C + c] = (float)sdy;
    }
}

static void bn_grad_x_channels(const void *vctx, int64_t c0, int64_t c1) {
    const bn_ctx *b = vctx;
    for (int64_t c = c0; c < c1; c++) {
        float mean = b->ws[c], invstd = b->ws[b->C + c], k = b->gamma[c] * invstd;
        /* training: dx = k (dy' - mean(dy') - xhat mean(dy' xhat)) */
        float mdy = b->training ? (float)(b->gb[b->C + c] / (double)b->M) : 0.0f;
        float mdyx = b->training ? (float)(b->gb[c] / (double)b->M) : 0.0f;
        int relu = b->relu;
        for (int64_t n = 0; n < b->N; n++) {
            int64_t o = (n * b->C + c) * b->S;
            const float *restrict x = b->x + o, *restrict dy = b->dy + o, *restrict y = b->y + o;
            float *restrict dx = b->out + o;
            for (int64_t i = 0; i < b->S; i++) {
                float d = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
                dx[i] = k * (d - mdy - (x[i] - mean) * invstd * mdyx);
            }
        }
    }
}

brisk_status cpu_batchnorm_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              const brisk_step_state *st, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    /* x is input 0 of the forward and input 2 of the gradients */
    const brisk_node *xn = n->op == BRISK_OP_BATCHNORM ? IN_NODE(g, id, 0) : IN_NODE(g, id, 2);
    const brisk_shape *xs = &xn->shape;
    if (xs->ndim < 2) return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: x must be [N, C, ...]");
    bn_ctx b = {.N = xs->d[0], .C = xs->d[1], .eps = n->attr.f0, .momentum = n->attr.f1, .relu = n->attr.kind != 0,
                .training = st->training != 0};
    b.M = cpu_numel(xs) / (b.C ? b.C : 1);
    b.S = b.N ? b.M / b.N : 0;
    if (b.C == 0 || b.M == 0) return BRISK_OK;
    int64_t grain = CPU_PAR_MIN / b.M + 1;
    switch (n->op) {
    case BRISK_OP_BATCHNORM: {
        if (n->n_in != 5 && n->n_in != 6)
            return brisk_errorf(err, BRISK_ERR_INVALID, "batchnorm: %d inputs (expected 5 or 6)", n->n_in);
        for (int i = 1; i < 5; i++)
            if (cpu_numel(&IN_NODE(g, id, i)->shape) != b.C)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: input %d must have %lld values", i, (long long)b.C);
        if (!brisk_shape_equal(&n->shape, xs) || n->bytes < (size_t)(cpu_numel(xs) + 2 * b.C) * 4 ||
            (n->n_in > 5 && !brisk_shape_equal(&IN_NODE(g, id, 5)->shape, xs)))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: output, workspace or residual do not match x");
        if (b.training && b.M < 2)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: training needs more than 1 value per channel (got %lld)",
                                (long long)b.M);
        b.x = in[0], b.gamma = in[1], b.beta = in[2], b.res = n->n_in > 5 ? in[5] : NULL;
        /* the running statistics are buffers this op owns (see BRISK_OP_BATCHNORM) */
        b.rmean = (float *)in[3], b.rvar = (float *)in[4];
        b.out = out, b.ws = (float *)out + cpu_numel(xs);
        cpu_parallel(cb, b.C, grain, bn_forward_channels, &b);
        return BRISK_OK;
    }
    case BRISK_OP_BATCHNORM_GRAD_GB: case BRISK_OP_BATCHNORM_GRAD_X: {
        int gx = n->op == BRISK_OP_BATCHNORM_GRAD_X;
        if (n->n_in != (gx ? 5 : 3))
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d inputs", brisk_op_name(n->op), n->n_in);
        const brisk_node *bn = IN_NODE(g, id, 1);
        if (bn->op != BRISK_OP_BATCHNORM || !brisk_shape_equal(&bn->shape, xs) ||
            !brisk_shape_equal(&IN_NODE(g, id, 0)->shape, xs) || n->n_in != (gx ? 5 : 3) ||
            cpu_numel(&n->shape) != (gx ? cpu_numel(xs) : 2 * b.C) ||
            (gx && (cpu_numel(&IN_NODE(g, id, 3)->shape) != b.C || cpu_numel(&IN_NODE(g, id, 4)->shape) != 2 * b.C)))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: inputs do not match a batchnorm of x", brisk_op_name(n->op));
        b.dy = in[0], b.y = in[1], b.x = in[2], b.ws = (float *)in[1] + cpu_numel(xs), b.out = out;
        b.relu = bn->attr.kind != 0;
        if (gx) b.gamma = in[3], b.gb = in[4];
        cpu_parallel(cb, b.C, grain, gx ? bn_grad_x_channels : bn_grad_gb_channels, &b);
        return BRISK_OK;
    }
    default: return brisk_errorf(err, BRISK_ERR_INTERNAL, "batchnorm: not a batchnorm op");
    }
}
