/* Multi-head scaled dot-product self-attention, f32 (graph.h, BRISK_OP_ATTENTION):
 *   ATTENTION      (qkv [B, T, 3D] [, mask [B, T]]) -> out [B, T, D] + lse [B, heads, T]
 *   ATTENTION_GRAD (dy [B, T, D], qkv, attention [, mask]) -> dqkv [B, T, 3D]
 * Head h of sample b reads Q, K, V as the T x dh column blocks at h dh of qkv's three
 * D-wide thirds (row stride 3D, no transposes) and writes its T x dh block of out at
 * column h dh, so heads end side by side as the output projection wants them.
 *
 *   S = Q K^T / sqrt(dh), keys masked (causal: j > i; padding: mask[b, j] == 0) -> -inf
 *   P = softmax(S) by rows, lse = max + log(sum exp) per row;  Pd = P * dropout factors
 *   out = Pd V
 * Backward recomputes P from S and the saved lse (cheaper than keeping the T x T
 * weights of every head), then
 *   dV = Pd^T dO;  dPd = dO V^T;  dS = P (dPd * factors - rowsum(dPd Pd)) / sqrt(dh)
 *   dQ = dS K;  dK = dS^T Q
 * The dropout factors come from Philox exactly as DROPOUT draws them, element
 * ((b heads + h) T + i) T + j of the op's stream at the step (the CUDA kernels draw the
 * same). The forward keeps them as bits in the node's workspace after the lse
 * (brisk_attention_keep_words per item), so the backward unpacks them instead of
 * running Philox again (it was 6 % of the small Transformer's step). Softmax, the
 * dropout product and, in the backward, Pd are one pass per row, each element computed
 * in the order the separate passes had. A query with no key left to attend to gets
 * zeros (and zero gradients), where PyTorch would give NaN.
 *
 * The T x T buffers have rows padded to ldp, a multiple of 16 floats, and the row loops
 * run over the whole padded row, the padding and (causal) the keys past the query
 * biased to -inf: at T = 60 a 16-wide loop over 60 left 12 columns to a scalar tail
 * (scalar exps), half the time of the softmax and the dS pass. (The biases are added,
 * not selected by index, as GCC splits a loop at an index test and so brings the tail
 * back.) The padding of every buffer stays finite (zeroed at allocation, then only
 * written with exp(-inf) = 0 or 0 products), and what it adds to a row's sums is 0;
 * the row sums' vector order differs from the unpadded loops' (last bits of lse, P, dS).
 * The dropout factors keep rows of T (Philox's order); the padded loops read past a row
 * into the next one's finite factors, times a zero weight.
 *
 * Work items are (sample, head) pairs in chunks handed to threads as they come free,
 * each thread with its own T x ldp buffers and GEMM scratch; every value is computed by
 * one thread in a fixed order, so the results do not depend on the thread count. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* (sample, head) items per chunk a thread takes at a time */
#define ITEM_CHUNK 16

typedef struct attn_ctx {
    int64_t B, T, D, heads, dh;
    int64_t ldp; /* row stride of the T x T buffers: T rounded up to 16 */
    float *cbias; /* 2 ldp: 0 for the first ldp, then -inf; row i reads it from ldp - 1 - i */
    int64_t b_off; /* this rank's first sample in the global batch (dropout numbering) */
    int causal, dropout;
    float scale, p;
    uint32_t k0, k1, stream, step;
    const float *qkv, *mask, *dy;
    float *out, *lse, *dqkv;
    uint32_t *keep; /* the dropout bits, brisk_attention_keep_words(T) per item */
    size_t keep_words;
    float *work, *gemm_scratch;
    size_t work_per, gemm_per;
} attn_ctx;

/* kb[j] = 0 for the keys of sample b that may be attended to, -inf for padding and for
 * the row padding past T. */
static void key_bias(const attn_ctx *c, int64_t b, float *kb) {
    for (int64_t j = 0; j < c->T; j++) kb[j] = !c->mask || c->mask[b * c->T + j] != 0.0f ? 0.0f : -INFINITY;
    for (int64_t j = c->T; j < c->ldp; j++) kb[j] = -INFINITY;
}

/* S <- softmax rows of S * scale + kb (keys past the query masked when causal; masked
 * entries 0), writing lse when given, or, with lse_in, P = exp(S * scale + kb - lse) as
 * the forward computed it. With dropout factors F (rows of T): the forward leaves P * F
 * in S, the backward P in S and P * F in Pd. Branch-free rows over the padded width, so
 * the exps vectorise without a scalar tail. */
static void softmax_rows(const attn_ctx *c, const float *kb, float *S, float *lse, const float *lse_in,
                         const float *F, float *Pd) {
    const int T = (int)c->T, n = (int)c->ldp;
    const float sc = c->scale;
    for (int i = 0; i < T; i++) {
        float *restrict r = S + (int64_t)i * n;
        const float *restrict cb = c->cbias + (c->causal ? n - 1 - i : 0); /* all 0 unless causal */
        float m = -INFINITY;
        if (lse_in) m = lse_in[i];
        else {
#pragma omp simd reduction(max : m)
            for (int j = 0; j < n; j++) {
                float v = r[j] * sc + kb[j] + cb[j];
                m = v > m ? v : m;
            }
        }
        if (m == -INFINITY) { /* no key to attend to */
            memset(r, 0, (size_t)n * sizeof(float));
            if (Pd) memset(Pd + (int64_t)i * n, 0, (size_t)n * sizeof(float));
            if (lse) lse[i] = -INFINITY;
            continue;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < n; j++) {
            float e = cpu_expf(r[j] * sc + kb[j] + cb[j] - m);
            r[j] = e;
            sum += e;
        }
        const float *restrict f = F ? F + (int64_t)i * T : NULL;
        if (lse) {
            float inv = 1.0f / sum;
            if (f) {
#pragma omp simd
                for (int j = 0; j < n; j++) r[j] = r[j] * inv * f[j];
            } else {
#pragma omp simd
                for (int j = 0; j < n; j++) r[j] *= inv;
            }
            lse[i] = m + logf(sum);
        } else if (Pd) {
            float *restrict pd = Pd + (int64_t)i * n;
#pragma omp simd
            for (int j = 0; j < n; j++) pd[j] = r[j] * f[j];
        }
    }
}

/* Item it's dropout factors as bits: bit k % 32 of keep[k / 32] = F[k] != 0. */
static void pack_keep(const float *F, int64_t n, uint32_t *keep) {
    for (int64_t k0 = 0; k0 < n; k0 += 32) {
        int64_t m = n - k0 < 32 ? n - k0 : 32;
        uint32_t w = 0;
#pragma omp simd reduction(| : w)
        for (int64_t j = 0; j < m; j++) w |= (uint32_t)(F[k0 + j] != 0.0f) << j;
        keep[k0 / 32] = w;
    }
}

/* The factors back from the bits: scale where kept, 0 elsewhere (as cpu_dropout_factors). */
static void unpack_keep(const uint32_t *keep, int64_t n, float p, float *F) {
    float scale = 1.0f / (1.0f - p);
    for (int64_t k0 = 0; k0 < n; k0 += 32) {
        int64_t m = n - k0 < 32 ? n - k0 : 32;
        uint32_t w = keep[k0 / 32];
#pragma omp simd
        for (int64_t j = 0; j < m; j++) F[k0 + j] = (w >> j) & 1u ? scale : 0.0f;
    }
}

/* The dropout factors of (b, h)'s T x T weights into F. */
static void dropout_factors(const attn_ctx *c, int64_t b, int64_t h, float *F) {
    uint64_t e0 = (uint64_t)(((b + c->b_off) * c->heads + h) * c->T) * (uint64_t)c->T;
    cpu_dropout_factors(c->k0, c->k1, c->stream, c->step, e0, c->T * c->T, c->p, F);
}

/* Loads one float of every cache line of an item's rows of Q, K, V (from Q, the three
 * D-wide thirds of a qkv row) and of dO (the backward's; NULL in the forward) before the
 * products read them. A head's rows are dh floats a 3D-float row
 * apart, and the item's first touch comes from memory: in the GEMMs' packing each miss
 * held up the stores behind it, while this loop has nothing but loads to overlap.
 * Software prefetches of the next item, tried first, did not help. */
#define LINE_FLOATS 16 /* a 64-byte cache line */
static void touch_rows(const attn_ctx *c, const float *Q, const float *dO) {
    const int64_t D = c->D, ld = 3 * D;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int64_t i = 0; i < c->T; i++)
        for (int64_t k = 0; k < c->dh; k += LINE_FLOATS) {
            const float *r = Q + i * ld + k;
            a0 += r[0];
            a1 += r[D];
            a2 += r[2 * D];
            if (dO) a3 += dO[i * D + k];
        }
    volatile float sink = a0 + a1 + a2 + a3; /* the loads must happen; their values do not matter */
    (void)sink;
}

static void forward_items(const void *vctx, int64_t i0, int64_t i1) {
    const attn_ctx *c = vctx;
    const int64_t T = c->T, D = c->D, dh = c->dh, ld = 3 * D, n = c->ldp;
    int tid = cpu_worker_id();
    float *S = c->work + c->work_per * (size_t)tid, *F = S + T * n, *kb = F + T * n;
    float *scratch = c->gemm_scratch + c->gemm_per * (size_t)tid;
    for (int64_t it = i0; it < i1; it++) {
        int64_t b = it / c->heads, h = it % c->heads;
        const float *Q = c->qkv + b * T * ld + h * dh, *K = Q + D, *V = Q + 2 * D;
        touch_rows(c, Q, NULL);
        cpu_gemm_local(0, 1, T, T, dh, Q, ld, K, ld, S, n, scratch);
        if (it == i0 || h == 0) key_bias(c, b, kb);
        if (c->dropout) {
            dropout_factors(c, b, h, F);
            pack_keep(F, T * T, c->keep + (size_t)it * c->keep_words);
        }
        softmax_rows(c, kb, S, c->lse + it * T, NULL, c->dropout ? F : NULL, NULL);
        cpu_gemm_local(0, 0, T, dh, T, S, n, V, ld, c->out + b * T * D + h * dh, D, scratch);
    }
}

static void backward_items(const void *vctx, int64_t i0, int64_t i1) {
    const attn_ctx *c = vctx;
    const int64_t T = c->T, D = c->D, dh = c->dh, ld = 3 * D, n = c->ldp;
    int tid = cpu_worker_id();
    float *P = c->work + c->work_per * (size_t)tid, *dP = P + T * n, *Pd = dP + T * n, *F = Pd + T * n;
    float *kb = F + T * n;
    float *scratch = c->gemm_scratch + c->gemm_per * (size_t)tid;
    for (int64_t it = i0; it < i1; it++) {
        int64_t b = it / c->heads, h = it % c->heads;
        const float *Q = c->qkv + b * T * ld + h * dh, *K = Q + D, *V = Q + 2 * D;
        const float *dO = c->dy + b * T * D + h * dh;
        float *dQ = c->dqkv + b * T * ld + h * dh, *dK = dQ + D, *dV = dQ + 2 * D;
        touch_rows(c, Q, dO);
        cpu_gemm_local(0, 1, T, T, dh, Q, ld, K, ld, P, n, scratch);
        if (it == i0 || h == 0) key_bias(c, b, kb);
        if (c->dropout) unpack_keep(c->keep + (size_t)it * c->keep_words, T * T, c->p, F);
        softmax_rows(c, kb, P, NULL, c->lse + it * T, c->dropout ? F : NULL, c->dropout ? Pd : NULL);
        const float *Pw = c->dropout ? Pd : P; /* the weights out was made from */
        cpu_gemm_local(1, 0, T, dh, T, Pw, n, dO, D, dV, ld, scratch);  /* dV = Pd^T dO */
        cpu_gemm_local(0, 1, T, T, dh, dO, D, V, ld, dP, n, scratch);   /* dPd = dO V^T */
        /* over the padded rows: there P and Pd are 0 and dP finite, so the padding adds
         * exactly 0 to di and leaves dS 0 (the GEMMs below read only T columns) */
        for (int64_t i = 0; i < T; i++) {
            float *restrict g = dP + i * n;
            const float *restrict pr = P + i * n, *restrict pw = Pw + i * n;
            float di = 0.0f, sc = c->scale;
#pragma omp simd reduction(+ : di)
            for (int64_t j = 0; j < n; j++) di += g[j] * pw[j];
            if (c->dropout) {
                const float *restrict f = F + i * T;
#pragma omp simd
                for (int64_t j = 0; j < n; j++) g[j] = pr[j] * (g[j] * f[j] - di) * sc;
            } else {
#pragma omp simd
                for (int64_t j = 0; j < n; j++) g[j] = pr[j] * (g[j] - di) * sc;
            }
        }
        cpu_gemm_local(0, 0, T, dh, T, dP, n, K, ld, dQ, ld, scratch); /* dQ = dS K */
        cpu_gemm_local(1, 0, T, dh, T, dP, n, Q, ld, dK, ld, scratch); /* dK = dS^T Q */
    }
}

brisk_status cpu_attention_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              const brisk_step_state *st, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int fwd = n->op == BRISK_OP_ATTENTION;
    int qi = fwd ? 0 : 1, mi = fwd ? 1 : 3;
    const brisk_node *a = fwd ? n : IN_NODE(g, id, 2), *q = IN_NODE(g, id, qi);
    attn_ctx c;
    memset(&c, 0, sizeof c);
    c.heads = a->attr.i0;
    int has_mask = n->n_in > mi;
    int ok = q->shape.ndim == 3 && a->shape.ndim == 3 && a->op == BRISK_OP_ATTENTION && c.heads >= 1;
    if (ok) {
        c.B = q->shape.d[0];
        c.T = q->shape.d[1];
        c.D = q->shape.d[2] / 3;
        ok = q->shape.d[2] == 3 * c.D && c.D % c.heads == 0 && a->shape.d[0] == c.B && a->shape.d[1] == c.T &&
             a->shape.d[2] == c.D && a->bytes >= (size_t)(c.B * c.T * (c.D + c.heads)) * sizeof(float);
    }
    if (ok && has_mask) {
        const brisk_shape *ms = &IN_NODE(g, id, mi)->shape;
        ok = ms->ndim == 2 && ms->d[0] == c.B && ms->d[1] == c.T;
    }
    if (ok && !fwd) ok = brisk_shape_equal(&IN_NODE(g, id, 0)->shape, &a->shape) && brisk_shape_equal(&n->shape, &q->shape);
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): expected qkv [B, T, 3D], heads dividing D, "
                            "a mask [B, T] and an attention node [B, T, D] with its workspace", brisk_op_name(n->op), id);
    if (c.B * c.T * c.D == 0) return BRISK_OK;
    c.dh = c.D / c.heads;
    c.causal = a->attr.kind != 0;
    c.scale = 1.0f / sqrtf((float)c.dh);
    c.p = a->attr.f0;
    c.dropout = st->training && c.p > 0.0f;
    if (c.dropout && !(c.p < 1.0f))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): dropout p = %g (expected p < 1)", brisk_op_name(n->op),
                            id, (double)c.p);
    c.k0 = (uint32_t)st->seed;
    c.k1 = (uint32_t)(st->seed >> 32);
    c.stream = a->attr.rng;
    c.step = st->rng_step;
    c.b_off = (int64_t)st->rng_shard * c.B;
    if (c.dropout) {
        /* the mask bits after the lse; graphs built before they were kept lack the room */
        c.keep_words = brisk_attention_keep_words(c.T);
        size_t need = (size_t)(c.B * c.T * c.D) * sizeof(float) + brisk_attention_workspace_bytes(c.B, c.T, c.heads, 1);
        if (a->bytes < need)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): the attention node's workspace has %zu bytes, "
                                "dropout needs %zu (build it with brisk_attention)", brisk_op_name(n->op), id,
                                a->bytes, need);
    }
    c.qkv = in[qi];
    c.mask = has_mask ? in[mi] : NULL;
    c.ldp = (c.T + 15) / 16 * 16;
    /* P, dP, Pd, factors (T x T rows, read up to ldp - T past the last), key bias; zeroed,
     * so that the padding is finite from the start */
    c.work_per = (size_t)(4 * c.T * c.ldp + c.ldp);
    size_t work_floats = c.work_per * (size_t)cb->threads + 2 * (size_t)c.ldp; /* a multiple of 16 */
    c.work = aligned_alloc(64, work_floats * sizeof(float));
    if (!c.work) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s (node %d): out of memory", brisk_op_name(n->op), id);
    memset(c.work, 0, work_floats * sizeof(float));
    c.cbias = c.work + c.work_per * (size_t)cb->threads;
    for (int64_t k = c.ldp; k < 2 * c.ldp; k++) c.cbias[k] = -INFINITY;
    c.gemm_scratch = cb->gemm_scratch;
    c.gemm_per = cpu_sgemm_scratch_floats();
    if (fwd) {
        c.out = out;
        c.lse = (float *)out + c.B * c.T * c.D;
        c.keep = (uint32_t *)(c.lse + c.B * c.heads * c.T);
        cpu_parallel_dynamic(cb, c.B * c.heads, ITEM_CHUNK, forward_items, &c);
    } else {
        c.dy = in[0];
        c.lse = (float *)in[2] + c.B * c.T * c.D;
        c.keep = (uint32_t *)(c.lse + c.B * c.heads * c.T);
        c.dqkv = out;
        cpu_parallel_dynamic(cb, c.B * c.heads, ITEM_CHUNK, backward_items, &c);
    }
    free(c.work);
    return BRISK_OK;
}
