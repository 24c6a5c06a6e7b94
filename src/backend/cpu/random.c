/* Random ops and dropout, from Philox 4x32-10 (core.h's convention, shared with
 * every backend so that CUDA can reproduce these bits):
 *   key     = {seed lo, seed hi}
 *   counter = {block lo, block hi, attr.rng (the op's stream), st->rng_step}
 *   element i uses word i % 4 of block i / 4, where i counts from st->rng_shard * numel
 *   (a rank's slice of a global batch draws that slice of the global tensor's numbers).
 * Per op, with u the element's word and unit(u) = brisk_u32_to_unit(u) in (0, 1]:
 *   RANDN        (): shape2; element i = brisk_philox_normal4(block)[i % 4]
 *   RAND_UNIFORM (): shape2; f0 + (f1 - f0) * (1 - unit(u)), in [f0, f1) (a value that
 *                rounds up to f1 is replaced by the largest float below f1)
 *   RANDINT      (): shape2, i32; i0 + floor(u * (i1 - i0) / 2^32) (multiply-shift;
 *                needs 1 <= i1 - i0 <= 2^32)
 *   DROPOUT      (x): p = f0 in [0, 1]; element kept iff unit(u) > p, and then
 *                out = x * scale with scale = 1.0f / (1.0f - p) computed in f32,
 *                else out = 0. Identity when !st->training. Its backward is DROPOUT
 *                of dy with the same stream and step, hence the same mask.
 * The 4-word blocks are generated 64 at a time by a loop GCC vectorises,
 * bit-identical to brisk_philox4x32
 * (tests/backend/test_cpu_random.c checks that); threads take static ranges of
 * blocks, so a value depends on its index only. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

#define PHILOX_BATCH 64

/* Words of blocks b0 .. b0 + nb - 1 (nb <= PHILOX_BATCH), element-major: u[4 j + w]. On
 * AVX2, written with vpmuludq, which multiplies the low 32 bits of each 64-bit lane into all
 * 64: the words live in the low halves of 64-bit lanes and are never masked (what lies above
 * them never reaches a low half). GCC vectorises the portable form below with a full 64-bit
 * multiply emulated in 3 vpmuludq and shifts each: the GRU regressor's dropout (983,040
 * elements) took 1.8 ms a pass on 2 threads. The blocks go 4 at a time, so up to 3 blocks
 * past b0 + nb are computed too: u must hold 4 (nb rounded up to 4) words. */
#if defined(__AVX2__)
#include <immintrin.h>

static void philox_blocks(uint64_t b0, int nb, uint32_t stream, uint32_t step, uint32_t k0,
                          uint32_t k1, uint32_t *restrict u) {
    const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
    __m256i ka[10], kb[10];
    for (int r = 0; r < 10; r++) {
        ka[r] = _mm256_set1_epi64x((uint32_t)(k0 + (uint32_t)r * 0x9E3779B9u));
        kb[r] = _mm256_set1_epi64x((uint32_t)(k1 + (uint32_t)r * 0xBB67AE85u));
    }
    const __m256i c2_0 = _mm256_set1_epi64x(stream), c3_0 = _mm256_set1_epi64x(step);
    for (int j = 0; j < nb; j += 4) {
        uint64_t b = b0 + (uint64_t)j;
        __m256i ctr = _mm256_set_epi64x((long long)(b + 3), (long long)(b + 2), (long long)(b + 1), (long long)b);
        __m256i c0 = ctr, c1 = _mm256_srli_epi64(ctr, 32), c2 = c2_0, c3 = c3_0;
        for (int r = 0; r < 10; r++) {
            __m256i p0 = _mm256_mul_epu32(c0, m0), p1 = _mm256_mul_epu32(c2, m1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), ka[r]);
            c2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), kb[r]);
            c1 = p1;
            c3 = p0;
        }
        /* block l's words (w0 w1 w2 w3) = the low halves of lane l of c0 .. c3 */
        __m256i w01 = _mm256_blend_epi32(c0, _mm256_slli_epi64(c1, 32), 0xAA);
        __m256i w23 = _mm256_blend_epi32(c2, _mm256_slli_epi64(c3, 32), 0xAA);
        __m256i lo = _mm256_unpacklo_epi64(w01, w23), hi = _mm256_unpackhi_epi64(w01, w23); /* blocks 0 2, 1 3 */
        _mm256_storeu_si256((__m256i *)(u + 4 * j), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(u + 4 * j + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
}
#else
static void philox_blocks(uint64_t b0, int nb, uint32_t stream, uint32_t step, uint32_t k0,
                          uint32_t k1, uint32_t *restrict u) {
    uint32_t w0[PHILOX_BATCH], w1[PHILOX_BATCH], w2[PHILOX_BATCH], w3[PHILOX_BATCH];
#pragma omp simd
    for (int j = 0; j < nb; j++) {
        /* every word lives in a 64-bit lane, masked to 32 bits: GCC then keeps the
         * whole round in 8-lane 64-bit vectors (2.2x faster than the uint32_t
         * form, which it vectorises with a widen/narrow shuffle per multiply) */
        const uint64_t L = 0xffffffffu;
        uint64_t b = b0 + (uint64_t)j;
        uint64_t c0 = b & L, c1 = b >> 32, c2 = stream, c3 = step, ka = k0, kb = k1;
        for (int r = 0; r < 10; r++) {
            uint64_t p0 = c0 * 0xD2511F53u, p1 = c2 * 0xCD9E8D57u;
            uint64_t n0 = (p1 >> 32) ^ c1 ^ ka, n2 = (p0 >> 32) ^ c3 ^ kb;
            c1 = p1 & L;
            c3 = p0 & L;
            c0 = n0 & L;
            c2 = n2 & L;
            ka = (ka + 0x9E3779B9u) & L;
            kb = (kb + 0xBB67AE85u) & L;
        }
        w0[j] = (uint32_t)c0; w1[j] = (uint32_t)c1; w2[j] = (uint32_t)c2; w3[j] = (uint32_t)c3;
    }
    for (int j = 0; j < nb; j++) {
        u[4 * j] = w0[j];
        u[4 * j + 1] = w1[j];
        u[4 * j + 2] = w2[j];
        u[4 * j + 3] = w3[j];
    }
}
#endif

typedef struct rng_ctx {
    brisk_op op;
    uint32_t k0, k1, stream, step;
    int64_t n;          /* elements */
    int64_t e_off;      /* global index of element 0 (the rank's slice of the global batch) */
    int64_t blk0;       /* first block: e_off / 4 */
    const float *x;
    void *out;
    float a, b, p, scale;
    int64_t lo;
    uint64_t range;
} rng_ctx;

static float unit_to_uniform(uint32_t u, float a, float b) {
    float v = a + (b - a) * (1.0f - brisk_u32_to_unit(u));
    return v < b ? v : nextafterf(b, a);
}

/* blocks [blk0 + b0, blk0 + b1) of the global numbering; the elements of this slice in them */
static void rng_range(const void *vctx, int64_t b0, int64_t b1) {
    const rng_ctx *c = vctx;
    uint32_t u[4 * PHILOX_BATCH];
    for (int64_t lb = b0; lb < b1; lb += PHILOX_BATCH) {
        int nb = (int)(b1 - lb < PHILOX_BATCH ? b1 - lb : PHILOX_BATCH);
        int64_t bb = c->blk0 + lb; /* global block */
        int64_t g0 = bb * 4 > c->e_off ? bb * 4 : c->e_off, g1 = (bb + nb) * 4;
        if (g1 > c->e_off + c->n) g1 = c->e_off + c->n;
        int64_t e0 = g0 - c->e_off; /* local element of global g0 */
        int ne = (int)(g1 - g0), w0 = (int)(g0 - bb * 4); /* word of u holding element g0 */
        philox_blocks((uint64_t)bb, nb, c->stream, c->step, c->k0, c->k1, u);
        if (c->op == BRISK_OP_RANDN) {
            /* the Box-Muller of brisk_philox_normal4, on the words computed above */
            float *o = (float *)c->out + e0;
            for (int j = 0; j < nb; j++) {
                float v[4];
                for (int i = 0; i < 4; i += 2) {
                    float r = sqrtf(-2.0f * logf(brisk_u32_to_unit(u[4 * j + i])));
                    float th = 6.2831853071795864f * brisk_u32_to_unit(u[4 * j + i + 1]);
                    v[i] = r * cosf(th);
                    v[i + 1] = r * sinf(th);
                }
                for (int i = 0; i < 4; i++) {
                    int k = 4 * j + i - w0;
                    if (k >= 0 && k < ne) o[k] = v[i];
                }
            }
            continue;
        }
        const uint32_t *restrict uw = u + w0;
        if (c->op == BRISK_OP_DROPOUT) {
            const float *restrict x = c->x + e0;
            float *restrict o = (float *)c->out + e0;
            float p = c->p, s = c->scale;
#pragma omp simd
            for (int i = 0; i < ne; i++) o[i] = brisk_u32_to_unit(uw[i]) > p ? x[i] * s : 0.0f;
        } else if (c->op == BRISK_OP_RAND_UNIFORM) {
            float *o = (float *)c->out + e0;
            for (int i = 0; i < ne; i++) o[i] = unit_to_uniform(uw[i], c->a, c->b);
        } else { /* RANDINT */
            int32_t *o = (int32_t *)c->out + e0;
            for (int i = 0; i < ne; i++) o[i] = (int32_t)(c->lo + (int64_t)(((uint64_t)uw[i] * c->range) >> 32));
        }
    }
}

/* Elements e0 .. e0 + n - 1 of a dropout stream: x NULL, the factors into out; else
 * out = DROPOUT(x), the same select as rng_range's (x may be out). */
static void dropout_span(uint32_t k0, uint32_t k1, uint32_t stream, uint32_t step, uint64_t e0, int64_t n, float p,
                         const float *x, float *out) {
    uint32_t u[4 * PHILOX_BATCH];
    float scale = 1.0f / (1.0f - p);
    for (int64_t i = 0; i < n;) {
        uint64_t e = e0 + (uint64_t)i;
        int w0 = (int)(e % 4);
        int64_t need = (w0 + (n - i) + 3) / 4;
        int nb = (int)(need < PHILOX_BATCH ? need : PHILOX_BATCH);
        int take = 4 * nb - w0;
        if (take > n - i) take = (int)(n - i);
        philox_blocks(e / 4, nb, stream, step, k0, k1, u);
        const uint32_t *restrict uw = u + w0;
        float *o = out + i;
        if (x) {
            const float *xi = x + i;
#pragma omp simd
            for (int k = 0; k < take; k++) o[k] = brisk_u32_to_unit(uw[k]) > p ? xi[k] * scale : 0.0f;
        } else {
#pragma omp simd
            for (int k = 0; k < take; k++) o[k] = brisk_u32_to_unit(uw[k]) > p ? scale : 0.0f;
        }
        i += take;
    }
}

void cpu_dropout_factors(uint32_t k0, uint32_t k1, uint32_t stream, uint32_t step, uint64_t e0, int64_t n, float p,
                         float *out) {
    dropout_span(k0, k1, stream, step, e0, n, p, NULL, out);
}

brisk_status cpu_dropout_draw_of(const brisk_graph *g, int id, const brisk_step_state *st, cpu_dropout_draw *dr,
                                 brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    float p = n->attr.f0;
    if (!(p >= 0.0f && p <= 1.0f))
        return brisk_errorf(err, BRISK_ERR_INVALID, "dropout (node %d): p = %g is outside [0, 1]", id, p);
    *dr = (cpu_dropout_draw){.on = st->training && p != 0.0f, .p = p, .k0 = (uint32_t)st->seed,
                             .k1 = (uint32_t)(st->seed >> 32), .stream = n->attr.rng, .step = st->rng_step,
                             .e_off = (uint64_t)st->rng_shard * (uint64_t)cpu_numel(&n->shape)};
    return BRISK_OK;
}

void cpu_dropout_apply(const cpu_dropout_draw *dr, uint64_t i0, int64_t n, const float *x, float *out) {
    if (dr->on) dropout_span(dr->k0, dr->k1, dr->stream, dr->step, dr->e_off + i0, n, dr->p, x, out);
    else if (out != x) memcpy(out, x, (size_t)n * sizeof(float));
}

brisk_status cpu_random(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, const brisk_step_state *st, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    rng_ctx c = {.op = n->op, .k0 = (uint32_t)st->seed, .k1 = (uint32_t)(st->seed >> 32),
                 .stream = n->attr.rng, .step = st->rng_step, .n = cpu_numel(&n->shape), .out = out};
    if (n->op == BRISK_OP_DROPOUT) {
        cpu_dropout_draw dr;
        brisk_status s = cpu_dropout_draw_of(g, id, st, &dr, err);
        if (s) return s;
        if (cpu_numel(&IN_NODE(g, id, 0)->shape) != c.n)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "dropout: input and output sizes differ");
        if (!dr.on) {
            if (out != in[0]) memmove(out, in[0], (size_t)c.n * sizeof(float));
            return BRISK_OK;
        }
        c.x = in[0];
        c.p = dr.p;
        c.scale = 1.0f / (1.0f - dr.p);
    } else {
        if (!brisk_shape_equal(&n->attr.shape2, &n->shape))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: shape2 must equal the output shape",
                                brisk_op_name(n->op));
        if (n->op == BRISK_OP_RAND_UNIFORM) {
            c.a = n->attr.f0;
            c.b = n->attr.f1;
            if (!(c.a < c.b) || !isfinite(c.a) || !isfinite(c.b))
                return brisk_errorf(err, BRISK_ERR_INVALID, "rand_uniform (node %d): need finite f0 < f1, "
                                    "got [%g, %g)", id, c.a, c.b);
        } else if (n->op == BRISK_OP_RANDINT) {
            int64_t r = n->attr.i1 - n->attr.i0;
            if (r < 1 || r > ((int64_t)1 << 32) || n->attr.i0 < INT32_MIN || n->attr.i1 - 1 > INT32_MAX)
                return brisk_errorf(err, BRISK_ERR_INVALID, "randint (node %d): range [%lld, %lld) must be "
                                    "non-empty, at most 2^32 wide and within i32", id,
                                    (long long)n->attr.i0, (long long)n->attr.i1);
            c.lo = n->attr.i0;
            c.range = (uint64_t)r;
        }
    }
    c.e_off = (int64_t)st->rng_shard * c.n;
    c.blk0 = c.e_off / 4;
    int64_t blocks = (c.e_off + c.n + 3) / 4 - c.blk0;
    int64_t grain = n->op == BRISK_OP_RANDN ? 256 : CPU_PAR_MIN_HEAVY / 4;
    cpu_parallel(cb, blocks, grain, rng_range, &c);
    return BRISK_OK;
}
