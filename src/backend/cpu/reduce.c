/* Sum reductions over a set of dims, f32, C-contiguous:
 *   SUM, MEAN  (x): attr.axes = bitmask of x's dims reduced (keepdim changes the
 *              shape only, not the layout); MEAN divides by the reduced count
 *   SUM_TO     (x): attr.shape2 = the target shape x broadcasts from; sums x over
 *              its leading extra dims and the dims where the target has size 1
 *              (the backward of broadcasting: bias gradients, [R, C] + [R, 1])
 * and cpu_chunk_sum, the thread-count-independent sum every global reduction
 * (losses, gradient norm) goes through.
 *
 * Layout: dims of size 1 are dropped and neighbours with the same reduced/kept flag
 * merged, so x reads as alternating kept/reduced groups. Output element order is x's
 * with reduced dims removed, which is also the order of the target/keepdim shape.
 * Row sums ([K, R]) and column sums ([R, K], bias gradients) accumulate in double,
 * vectorised over the contiguous dim. */
#include "backend/cpu/cpu_internal.h"

#include <string.h>

typedef struct red_plan {
    int nd;
    int64_t d[BRISK_MAX_DIMS], xs[BRISK_MAX_DIMS], os[BRISK_MAX_DIMS];
    int red[BRISK_MAX_DIMS];
} red_plan;

static void red_plan_build(red_plan *p, const brisk_shape *xs, uint32_t mask) {
    p->nd = 0;
    for (int i = 0; i < xs->ndim; i++) {
        if (xs->d[i] == 1) continue;
        int r = (mask >> i) & 1;
        if (p->nd && p->red[p->nd - 1] == r) {
            p->d[p->nd - 1] *= xs->d[i];
        } else {
            p->d[p->nd] = xs->d[i];
            p->red[p->nd] = r;
            p->nd++;
        }
    }
    int64_t sx = 1, so = 1;
    for (int i = p->nd - 1; i >= 0; i--) {
        p->xs[i] = sx;
        sx *= p->d[i];
        p->os[i] = p->red[i] ? 0 : so;
        if (!p->red[i]) so *= p->d[i];
    }
}

/* s + the sum of x[0, n) in double: 8 floats a step into two 4-double accumulators, one
 * horizontal sum at the end. The compiler's reduction of the same loop peeled, and summed
 * across lanes, per call, and the rows it gets are short (a 1-D CNN's 30 or 60 pixels): its
 * global-average pool took 0.22 ms that way, 0.115 this way. */
typedef float rv8 __attribute__((vector_size(32), aligned(4)));
typedef double rv4d __attribute__((vector_size(32)));
static inline double row_sum_d(const float *x, int64_t n, double s) {
    rv4d a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        rv8 v = *(const rv8 *)(x + i);
        a += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), rv4d);
        b += __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), rv4d);
    }
    a += b;
    double t = (a[0] + a[2]) + (a[1] + a[3]);
    for (; i < n; i++) t += x[i];
    return s + t;
}

/* out (already zeroed) += x summed over the reduced groups, from group `lv` down. */
static void red_serial(const red_plan *p, int lv, const float *x, float *o) {
    int64_t n = p->d[lv];
    if (lv == p->nd - 1) {
        if (p->red[lv]) {
            *o += (float)row_sum_d(x, n, 0.0);
        } else {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) o[j] += x[j];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) red_serial(p, lv + 1, x + i * p->xs[lv], o + i * p->os[lv]);
}

typedef struct red_ctx {
    const red_plan *p;
    const float *x;
    float *out;
    int64_t inner_out; /* output elements per index of group 0 */
} red_ctx;

/* group 0 kept: each index of it owns a disjoint block of the output */
static void red_outer_range(const void *vctx, int64_t i0, int64_t i1) {
    const red_ctx *c = vctx;
    const red_plan *p = c->p;
    for (int64_t i = i0; i < i1; i++) {
        float *o = c->out + i * p->os[0];
        if (p->nd == 1) o[0] = c->x[i];
        else if (p->nd == 2) o[0] = (float)row_sum_d(c->x + i * p->xs[0], p->d[1], 0.0); /* [R, K] row sums */
        else {
            memset(o, 0, (size_t)c->inner_out * sizeof(float));
            red_serial(p, 1, c->x + i * p->xs[0], o);
        }
    }
}

/* [R, K]: a range of columns, summing every row into it in row order, in double: a
 * bias gradient sums thousands of rows that largely cancel (a transformer's 720-row
 * sums were off by 5e-6 relative in f32), and the loop is bound by reading x anyway.
 * Columns go in blocks of COL_BLOCK so the accumulators stay in registers and L1. */
#define COL_BLOCK 256
static void red_cols_range(const void *vctx, int64_t j0, int64_t j1) {
    const red_ctx *c = vctx;
    int64_t R = c->p->d[0], K = c->p->d[1];
    float *restrict o = c->out;
    double acc[COL_BLOCK];
    for (int64_t b0 = j0; b0 < j1; b0 += COL_BLOCK) {
        int64_t nb = j1 - b0 < COL_BLOCK ? j1 - b0 : COL_BLOCK;
        memset(acc, 0, sizeof acc);
        for (int64_t r = 0; r < R; r++) {
            const float *restrict x = c->x + r * K + b0;
#pragma omp simd
            for (int64_t j = 0; j < nb; j++) acc[j] += x[j];
        }
        for (int64_t j = 0; j < nb; j++) o[b0 + j] = (float)acc[j];
    }
}

/* [R, K] with many rows (a bias gradient over B T rows): fixed chunks of ROW_CHUNK rows, each
 * summed into its own partial row in double, then the partials in chunk order. Every element
 * is read once, in memory order, with the accumulators of a 32-column block in registers (the
 * column blocks above read each row R / COL_BLOCK times over with their accumulators spilled:
 * 1.0 ms for a GRU's [15360, 192] d b_ih, 0.2 ms this way), and the sums do not depend on the
 * thread count. */
#define ROW_CHUNK 64
#define ROW_COLS 32
typedef struct rows_ctx {
    const float *x;
    double *part; /* [chunks, K] */
    int64_t R, K;
} rows_ctx;

static void red_rows_range(const void *vctx, int64_t c0, int64_t c1) {
    const rows_ctx *c = vctx;
    const int64_t K = c->K;
    for (int64_t k = c0; k < c1; k++) {
        int64_t r0 = k * ROW_CHUNK, r1 = r0 + ROW_CHUNK < c->R ? r0 + ROW_CHUNK : c->R;
        for (int64_t b0 = 0; b0 < K; b0 += ROW_COLS) {
            int64_t nb = K - b0 < ROW_COLS ? K - b0 : ROW_COLS;
            double a[ROW_COLS] = {0};
            for (int64_t r = r0; r < r1; r++) {
                const float *restrict x = c->x + r * K + b0;
#pragma omp simd
                for (int64_t j = 0; j < nb; j++) a[j] += x[j];
            }
            memcpy(c->part + k * K + b0, a, (size_t)nb * sizeof(double));
        }
    }
}

/* 0 when the partials do not fit (the caller then sums by column blocks) */
static int red_rows(cpu_backend *cb, const float *x, int64_t R, int64_t K, float *out) {
    int64_t chunks = (R + ROW_CHUNK - 1) / ROW_CHUNK;
    double *part = cpu_partials(cb, (size_t)((chunks + 1) * K));
    if (!part) return 0;
    rows_ctx c = {x, part, R, K};
    cpu_parallel(cb, chunks, (CPU_PAR_MIN + ROW_CHUNK * K - 1) / (ROW_CHUNK * K), red_rows_range, &c);
    double *tot = part + chunks * K;
    memcpy(tot, part, (size_t)K * sizeof(double));
    for (int64_t k = 1; k < chunks; k++) {
        const double *restrict pk = part + k * K;
#pragma omp simd
        for (int64_t j = 0; j < K; j++) tot[j] += pk[j];
    }
    for (int64_t j = 0; j < K; j++) out[j] = (float)tot[j];
    return 1;
}

/* [A, K, I] summed over A and I (a convolution's bias gradient over N and the pixels): fixed
 * chunks of CHANNEL_CHUNK along A, each summed into its own K partials in double (the chunk's
 * memory in order), then the partials in chunk order, so the bits do not depend on the thread
 * count. (It ran serially: a 1-D CNN's [256, 64, 60] took 0.25 ms; by chunks 0.12. Fusing it
 * with the activation gradient before it, a chunk made and summed while in cache, was no
 * faster than the two passes: 0.65-0.83 ms against 0.63-0.69 for the CNN's two.) */
#define CHANNEL_CHUNK 16

static void channel_sum_chunk(const float *x, int64_t K, int64_t I, int64_t a0, int64_t a1, double *part) {
    for (int64_t k = 0; k < K; k++) part[k] = 0.0;
    for (int64_t a = a0; a < a1; a++)
        for (int64_t k = 0; k < K; k++) part[k] = row_sum_d(x + (a * K + k) * I, I, part[k]);
}

typedef struct mid_ctx {
    const float *x;
    double *part;
    int64_t A, K, I;
} mid_ctx;

static void red_mid_range(const void *vctx, int64_t c0, int64_t c1) {
    const mid_ctx *c = vctx;
    for (int64_t ch = c0; ch < c1; ch++) {
        int64_t a0 = ch * CHANNEL_CHUNK, a1 = a0 + CHANNEL_CHUNK < c->A ? a0 + CHANNEL_CHUNK : c->A;
        channel_sum_chunk(c->x, c->K, c->I, a0, a1, c->part + ch * c->K);
    }
}

/* 0 when the partials do not fit (the caller then sums serially) */
static int red_mid(cpu_backend *cb, const float *x, int64_t A, int64_t K, int64_t I, float *out) {
    int64_t chunks = (A + CHANNEL_CHUNK - 1) / CHANNEL_CHUNK;
    double *part = cpu_partials(cb, (size_t)(chunks * K));
    if (!part) return 0;
    mid_ctx c = {x, part, A, K, I};
    cpu_parallel_dynamic(cb, chunks, 1, red_mid_range, &c); /* one chunk at a time (cpu_parallel: 16) */
    for (int64_t k = 0; k < K; k++) {
        double s = 0.0;
        for (int64_t ch = 0; ch < chunks; ch++) s += part[ch * K + k];
        out[k] = (float)s;
    }
    return 1;
}

typedef struct flat_ctx { const float *x; } flat_ctx;

static double sum_range(const void *vctx, int64_t i0, int64_t i1) {
    const float *x = ((const flat_ctx *)vctx)->x;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; i++) s += x[i];
    return s;
}

void cpu_reduce_sum(cpu_backend *cb, const float *x, const brisk_shape *xs, uint32_t mask,
                    float scale, float *out) {
    red_plan p;
    red_plan_build(&p, xs, mask);
    int64_t total = cpu_numel(xs), outn = 1;
    for (int i = 0; i < p.nd; i++)
        if (!p.red[i]) outn *= p.d[i];
    if (total == 0) {
        for (int64_t i = 0; i < outn; i++) out[i] = 0.0f * scale;
        return;
    }
    red_ctx c = {&p, x, out, 0};
    if (p.nd == 0) { /* one element */
        out[0] = x[0];
    } else if (p.nd == 1 && p.red[0]) { /* everything: a fixed-chunk sum */
        flat_ctx f = {x};
        out[0] = (float)cpu_chunk_sum(cb, total, 16384, sum_range, &f);
    } else if (!p.red[0]) {
        c.inner_out = p.d[0] ? outn / p.d[0] : 0;
        int64_t per = total / p.d[0];
        cpu_parallel(cb, p.d[0], (CPU_PAR_MIN + per - 1) / per, red_outer_range, &c);
    } else if (p.nd == 2) {
        if (p.d[0] < 4 * ROW_CHUNK || !red_rows(cb, x, p.d[0], p.d[1], out))
            cpu_parallel(cb, p.d[1], (CPU_PAR_MIN + p.d[0] - 1) / p.d[0], red_cols_range, &c);
    } else if (p.nd == 3 && !p.red[1] && red_mid(cb, x, p.d[0], p.d[1], p.d[2], out)) {
    } else {
        memset(out, 0, (size_t)outn * sizeof(float));
        red_serial(&p, 0, x, out);
    }
    if (scale != 1.0f)
        for (int64_t i = 0; i < outn; i++) out[i] *= scale;
}

/* ---------------------------------------------------------------- chunked global sums */

typedef struct chunk_ctx {
    double (*fn)(const void *, int64_t, int64_t);
    const void *ctx;
    double *part;
    int64_t n, chunk;
} chunk_ctx;

static void chunk_range(const void *vctx, int64_t c0, int64_t c1) {
    const chunk_ctx *c = vctx;
    for (int64_t k = c0; k < c1; k++) {
        int64_t i0 = k * c->chunk, i1 = i0 + c->chunk < c->n ? i0 + c->chunk : c->n;
        c->part[k] = c->fn(c->ctx, i0, i1);
    }
}

double cpu_chunk_sum(cpu_backend *cb, int64_t n, int64_t chunk,
                     double (*fn)(const void *ctx, int64_t i0, int64_t i1), const void *ctx) {
    if (n <= 0) return 0.0;
    int64_t nchunks = (n + chunk - 1) / chunk;
    double *part = cpu_partials(cb, (size_t)nchunks);
    double s = 0.0;
    if (!part) { /* same chunks, same order, one thread */
        for (int64_t k = 0; k < nchunks; k++)
            s += fn(ctx, k * chunk, (k + 1) * chunk < n ? (k + 1) * chunk : n);
        return s;
    }
    chunk_ctx c = {fn, ctx, part, n, chunk};
    cpu_parallel(cb, nchunks, (CPU_PAR_MIN + chunk - 1) / chunk, chunk_range, &c);
    for (int64_t k = 0; k < nchunks; k++) s += part[k];
    return s;
}

/* ---------------------------------------------------------------- ops */

brisk_status cpu_reduce(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id), *nx = IN_NODE(g, id, 0);
    const brisk_shape *xs = &nx->shape;
    uint32_t mask = 0;
    float scale = 1.0f;
    if (n->op == BRISK_OP_SUM_TO) {
        const brisk_shape *t = &n->attr.shape2;
        int off = xs->ndim - t->ndim;
        if (off < 0)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "sum_to: target has more dims than the input");
        for (int i = 0; i < xs->ndim; i++) {
            int j = i - off;
            if (j < 0 || (t->d[j] == 1 && xs->d[i] != 1)) mask |= 1u << i;
            else if (t->d[j] != xs->d[i])
                return brisk_errorf(err, BRISK_ERR_SHAPE, "sum_to: input dim %d is %lld, target %lld",
                                    i, (long long)xs->d[i], (long long)t->d[j]);
        }
    } else {
        mask = n->attr.axes & ((xs->ndim >= 32) ? 0xffffffffu : ((1u << xs->ndim) - 1));
        if (n->op == BRISK_OP_MEAN) {
            double cnt = 1.0;
            for (int i = 0; i < xs->ndim; i++)
                if ((mask >> i) & 1) cnt *= (double)xs->d[i];
            scale = (float)(1.0 / cnt);
        }
    }
    int64_t outn = 1;
    for (int i = 0; i < xs->ndim; i++)
        if (!((mask >> i) & 1)) outn *= xs->d[i];
    if (outn != cpu_numel(&n->shape))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: output has %lld elements, expected %lld",
                            brisk_op_name(n->op), (long long)cpu_numel(&n->shape), (long long)outn);
    cpu_reduce_sum(cb, in[0], xs, mask, scale, out);
    return BRISK_OK;
}
