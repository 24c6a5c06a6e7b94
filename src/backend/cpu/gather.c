/* Index-driven ops, C-contiguous:
 *   GATHER          (table [V, D...] any dtype, idx i32 [I...]): out [I..., D...],
 *                   out[i] = table[idx[i]] (a row of D = prod(D...) elements)
 *   SCATTER_ADD     (dy [I..., D...] f32, idx i32 [I...]): out = attr.shape2 = [V, D...],
 *                   zeros, then out[idx[i]] += dy[i] for i in order
 *   SEGMENT_SUM     (x [I, D...] f32, idx i32 [I] non-decreasing): out = shape2 = [V, D...],
 *                   out[v] = sum of rows idx[i] = v in order of i
 *   SINUSOIDAL      (t [N] i32 or f32): i0 = dim; half = dim / 2,
 *                   f_k = exp(-ln(10000) k / half), out [N, dim] = [sin(t f_k) | cos(t f_k)]
 *   SINUSOIDAL_GRAD (dy [N, dim], t f32 [N]): dt[n] = sum_k f_k (dy[n,k] cos(t f_k)
 *                   - dy[n,half+k] sin(t f_k))
 * Every index is checked before anything is written; one outside [0, V) is an
 * error naming the op, the position, the value and the range. Scatter-add splits
 * the row width D between threads (each thread adds all i in order into its own
 * columns), so repeated indices accumulate in the same order on any thread count.
 * Segment sum splits the segments between threads instead: each output row is summed
 * whole by one thread from a contiguous run of input rows, so the arithmetic (and every
 * bit) is that of a sequential loop, and each thread streams its own rows in and out.
 * Over sorted indices both give the same bits; SCATTER_ADD stands in on the CPU for the
 * unordered ("atomic") segment sum, which needs no atomics here because threads own
 * disjoint columns.
 * Sinusoidal frequencies are computed in f32 as PyTorch's torch.exp(-ln(1e4) *
 * arange(half) / half) does. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static brisk_status check_indices(const brisk_graph *g, int id, const int32_t *idx, int64_t n,
                                  int64_t V, brisk_error *err) {
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || (int64_t)idx[i] >= V)
            return brisk_errorf(err, BRISK_ERR_INVALID,
                                "%s (node %d): index %d at position %lld is outside the valid range [0, %lld)",
                                brisk_op_name(NODE(g, id)->op), id, (int)idx[i], (long long)i, (long long)V);
    return BRISK_OK;
}

typedef struct scatter_ctx {
    const float *dy;
    const int32_t *idx;
    float *out;
    int64_t n, D;
} scatter_ctx;

static void scatter_range(const void *vctx, int64_t j0, int64_t j1) {
    const scatter_ctx *c = vctx;
    for (int64_t i = 0; i < c->n; i++) {
        const float *restrict s = c->dy + i * c->D;
        float *restrict o = c->out + (int64_t)c->idx[i] * c->D;
#pragma omp simd
        for (int64_t j = j0; j < j1; j++) o[j] += s[j];
    }
}

typedef struct segsum_ctx {
    const float *x;
    const int32_t *idx;
    float *out;
    int64_t n, D;
} segsum_ctx;

static void segsum_range(const void *vctx, int64_t v0, int64_t v1) {
    const segsum_ctx *c = vctx;
    int64_t lo = 0, hi = c->n; /* the first row of segment v0 */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (c->idx[mid] < v0) lo = mid + 1;
        else hi = mid;
    }
    int64_t i = lo, D = c->D;
    for (int64_t v = v0; v < v1; v++) {
        float *restrict o = c->out + v * D;
        memset(o, 0, (size_t)D * sizeof(float));
        for (; i < c->n && c->idx[i] == v; i++) {
            const float *restrict s = c->x + i * D;
#pragma omp simd
            for (int64_t j = 0; j < D; j++) o[j] += s[j];
        }
    }
}

static brisk_status segment_sum(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    const brisk_shape *ts = &n->attr.shape2;
    const brisk_node *nx = IN_NODE(g, id, 0), *ni = IN_NODE(g, id, 1);
    if (ts->ndim < 1 || !brisk_shape_equal(ts, &n->shape) || ni->shape.ndim != 1 || nx->shape.ndim < 1 ||
        nx->shape.d[0] != ni->shape.d[0])
        return brisk_errorf(err, BRISK_ERR_SHAPE, "segment_sum (node %d): expected x [I, ...], idx [I] and "
                            "shape2 = the output shape [V, ...]", id);
    int64_t V = ts->d[0], nidx = ni->shape.d[0], D = V ? cpu_numel(ts) / V : 0;
    if (cpu_numel(&nx->shape) != nidx * D)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "segment_sum (node %d): x has %lld elements, expected %lld", id,
                            (long long)cpu_numel(&nx->shape), (long long)(nidx * D));
    const int32_t *idx = in[1];
    brisk_status s = check_indices(g, id, idx, nidx, V, err);
    if (s != BRISK_OK) return s;
    for (int64_t i = 1; i < nidx; i++)
        if (idx[i] < idx[i - 1])
            return brisk_errorf(err, BRISK_ERR_INVALID, "segment_sum (node %d): index %d at position %lld follows %d "
                                "(the indices must be sorted)", id, (int)idx[i], (long long)i, (int)idx[i - 1]);
    segsum_ctx c = {in[0], idx, out, nidx, D};
    int64_t per_segment = (nidx * D) / (V ? V : 1) + D + 1;
    if (V > 0) cpu_parallel(cb, V, (CPU_PAR_MIN + per_segment - 1) / per_segment, segsum_range, &c);
    return BRISK_OK;
}

static void freqs(int64_t half, float *f) {
    for (int64_t k = 0; k < half; k++) f[k] = expf(-9.210340371976184f * (float)k / (float)half);
}

static brisk_status sinusoidal(const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err) {
    const brisk_node *n = NODE(g, id), *nt = IN_NODE(g, id, n->op == BRISK_OP_SINUSOIDAL ? 0 : 1);
    int64_t dim = n->attr.i0, half = dim / 2, N = cpu_numel(&nt->shape);
    if (dim <= 0 || dim % 2 || dim > 1 << 20)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: dim %lld must be even and positive",
                            brisk_op_name(n->op), (long long)dim);
    if (nt->dtype != BRISK_F32 && nt->dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: t must be f32 or i32", brisk_op_name(n->op));
    float fbuf[512], *f = half <= 512 ? fbuf : malloc((size_t)half * sizeof(float));
    if (!f) return brisk_errorf(err, BRISK_ERR_NOMEM, "sinusoidal: %lld frequencies", (long long)half);
    freqs(half, f);
    if (n->op == BRISK_OP_SINUSOIDAL) {
        if (cpu_numel(&n->shape) != N * dim) {
            if (f != fbuf) free(f);
            return brisk_errorf(err, BRISK_ERR_SHAPE, "sinusoidal: output is not [%lld, %lld]",
                                (long long)N, (long long)dim);
        }
        float *o = out;
        for (int64_t r = 0; r < N; r++) {
            float t = nt->dtype == BRISK_I32 ? (float)((const int32_t *)in[0])[r] : ((const float *)in[0])[r];
            for (int64_t k = 0; k < half; k++) {
                float a = t * f[k];
                o[r * dim + k] = sinf(a);
                o[r * dim + half + k] = cosf(a);
            }
        }
    } else {
        const float *dy = in[0];
        if (cpu_numel(&IN_NODE(g, id, 0)->shape) != N * dim || cpu_numel(&n->shape) != N) {
            if (f != fbuf) free(f);
            return brisk_errorf(err, BRISK_ERR_SHAPE, "sinusoidal_grad: dy is not [%lld, %lld]",
                                (long long)N, (long long)dim);
        }
        float *o = out;
        for (int64_t r = 0; r < N; r++) {
            float t = nt->dtype == BRISK_I32 ? (float)((const int32_t *)in[1])[r] : ((const float *)in[1])[r];
            double s = 0.0;
            for (int64_t k = 0; k < half; k++) {
                float a = t * f[k];
                s += (double)f[k] * ((double)dy[r * dim + k] * cosf(a) - (double)dy[r * dim + half + k] * sinf(a));
            }
            o[r] = (float)s;
        }
    }
    if (f != fbuf) free(f);
    return BRISK_OK;
}

brisk_status cpu_gather_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                           void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    if (n->op == BRISK_OP_SINUSOIDAL || n->op == BRISK_OP_SINUSOIDAL_GRAD) return sinusoidal(g, id, in, out, err);
    if (n->op == BRISK_OP_SEGMENT_SUM) return segment_sum(cb, g, id, in, out, err);
    const brisk_node *ni = IN_NODE(g, id, 1);
    if (ni->dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: indices must be i32, got %s", brisk_op_name(n->op),
                            brisk_dtype_name(ni->dtype));
    const int32_t *idx = in[1];
    int64_t nidx = cpu_numel(&ni->shape);
    if (n->op == BRISK_OP_GATHER) {
        const brisk_node *nt = IN_NODE(g, id, 0);
        if (nt->shape.ndim < 1 || nt->dtype != n->dtype)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "gather: table must be [V, ...] of the output dtype");
        int64_t V = nt->shape.d[0], D = V ? cpu_numel(&nt->shape) / V : 0;
        if (cpu_numel(&n->shape) != nidx * D)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "gather: output has %lld elements, expected %lld",
                                (long long)cpu_numel(&n->shape), (long long)(nidx * D));
        brisk_status s = check_indices(g, id, idx, nidx, V, err);
        if (s != BRISK_OK) return s;
        size_t row = (size_t)D * brisk_dtype_size(n->dtype);
        const unsigned char *t = in[0];
        unsigned char *o = out;
        for (int64_t i = 0; i < nidx; i++) memcpy(o + (size_t)i * row, t + (size_t)idx[i] * row, row);
        return BRISK_OK;
    }
    /* SCATTER_ADD */
    const brisk_shape *ts = &n->attr.shape2;
    if (ts->ndim < 1 || !brisk_shape_equal(ts, &n->shape))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "scatter_add: shape2 must be the output shape [V, ...]");
    int64_t V = ts->d[0], D = V ? cpu_numel(ts) / V : 0;
    if (cpu_numel(&IN_NODE(g, id, 0)->shape) != nidx * D)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "scatter_add: dy has %lld elements, expected %lld",
                            (long long)cpu_numel(&IN_NODE(g, id, 0)->shape), (long long)(nidx * D));
    brisk_status s = check_indices(g, id, idx, nidx, V, err);
    if (s != BRISK_OK) return s;
    memset(out, 0, (size_t)cpu_numel(ts) * sizeof(float));
    scatter_ctx c = {in[0], idx, out, nidx, D};
    if (D > 0) cpu_parallel(cb, D, (CPU_PAR_MIN + nidx - 1) / (nidx ? nidx : 1), scatter_range, &c);
    return BRISK_OK;
}
