/* Sum reductions, deterministic (fixed partitions, partial sums combined in index order,
 * no atomics), matching src/backend/cpu/reduce.c:
 *   cuk_reduce      SUM / MEAN / SUM_TO over a mask of x's collapsed dims. The host passes
 *                   x's dims with size-1 dims dropped and neighbours of the same kind merged
 *                   (alternating kept/reduced groups). Two shapes of work:
 *                   - the last group reduced (row sums): a warp per output, or a block when
 *                     the reduced count is large;
 *                   - the last group kept (column sums, bias gradients): a thread per output
 *                     (coalesced along the last dim), the reduced range cut into chunks when
 *                     there are few outputs, chunks written to scratch and summed in order.
 *   cuk_sum_global  sums of x, x^2 or (x - y)^2 over a flat array in double: per-block
 *                   partials over fixed contiguous ranges, then one block sums them in order
 *                   (losses, the gradient norm). */
#include "backend/cuda/k_common.cuh"

#define RED_MAX_CHUNKS 1024
#define GLOBAL_MAX_BLOCKS 1024

typedef struct red_index {
    int nk, nr;                          /* kept and reduced groups */
    int64_t kd[CUK_MAX_DIMS], ks[CUK_MAX_DIMS]; /* sizes and x strides, outermost first */
    int64_t rd[CUK_MAX_DIMS], rs[CUK_MAX_DIMS];
    int kfast, rfast;                    /* output / reduced counts fit 31 bits: kdiv, rdiv */
    cuk_div kdiv[CUK_MAX_DIMS], rdiv[CUK_MAX_DIMS];
} red_index;

/* x's offset of flat index i over n groups (sizes d, strides st; divisors dv when fast) */
__device__ __forceinline__ int64_t red_off(int n, const int64_t *d, const int64_t *st, const cuk_div *dv, int fast,
                                           int64_t i) {
    int64_t off = 0;
    if (fast) {
        uint32_t r = (uint32_t)i, q;
        for (int k = n - 1; k >= 0; k--) {
            off += (int64_t)cuk_div_qr(dv[k], r, &q) * st[k];
            r = q;
        }
        return off;
    }
    for (int k = n - 1; k >= 0; k--) {
        off += (i % d[k]) * st[k];
        i /= d[k];
    }
    return off;
}
#define KEPT_OFF(ix, o) red_off((ix).nk, (ix).kd, (ix).ks, (ix).kdiv, (ix).kfast, (o))
#define RED_OFF(ix, r) red_off((ix).nr, (ix).rd, (ix).rs, (ix).rdiv, (ix).rfast, (r))

/* outputs [o0, ...): `per` threads per output (32 or blockDim.x) */
__global__ void k_red_inner(const float *x, float *out, red_index ix, int64_t n_out, int64_t n_red, float scale,
                            int per) {
    __shared__ double sh[32];
    int64_t o = per == 32 ? (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32 : blockIdx.x;
    int lane = per == 32 ? (threadIdx.x & 31) : threadIdx.x;
    if (per == 32 && o >= n_out) return;
    int64_t base = KEPT_OFF(ix, o);
    double s = 0.0;
    /* one reduced group: the inner run is contiguous */
    if (ix.nr == 1 && ix.rs[0] == 1)
        for (int64_t r = lane; r < n_red; r += per) s += x[base + r];
    else
        for (int64_t r = lane; r < n_red; r += per) s += x[base + RED_OFF(ix, r)];
    if (per == 32) s = warp_sum_d(s);
    else s = block_sum_d(s, sh);
    if (lane == 0) out[o] = (float)s * scale;
}

/* chunk c of the reduced range for output o: writes part[c * n_out + o] (or out when chunks == 1) */
__global__ void k_red_outer(const float *x, float *out, float *part, red_index ix, int64_t n_out, int64_t n_red,
                            int chunks, float scale) {
    int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= n_out) return;
    int c = blockIdx.y;
    int64_t per = (n_red + chunks - 1) / chunks, r0 = c * per, r1 = r0 + per < n_red ? r0 + per : n_red;
    int64_t base = KEPT_OFF(ix, o);
    float s = 0.0f;
    for (int64_t r = r0; r < r1; r++) s += x[base + RED_OFF(ix, r)];
    if (chunks == 1) out[o] = s * scale;
    else part[(int64_t)c * n_out + o] = s;
}

__global__ void k_red_chunks(const float *part, float *out, int64_t n_out, int chunks, float scale) {
    int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= n_out) return;
    float s = 0.0f;
    for (int c = 0; c < chunks; c++) s += part[(int64_t)c * n_out + o];
    out[o] = s * scale;
}

static int outer_chunks(int64_t n_out, int64_t n_red) {
    int64_t c = (65536 + n_out - 1) / n_out, most = (n_red + 31) / 32;
    if (c > most) c = most;
    if (c > RED_MAX_CHUNKS) c = RED_MAX_CHUNKS;
    return c < 1 ? 1 : (int)c;
}

/* ---------------------------------------------------------------- global sums */

__device__ __forceinline__ double global_term(int kind, const float *x, const float *y, int64_t i) {
    if (kind == 0) return (double)x[i];
    if (kind == 1) return (double)x[i] * (double)x[i];
    double d = (double)x[i] - (double)y[i];
    return d * d;
}

__global__ void k_global_partials(int kind, const float *x, const float *y, int64_t n, int64_t chunk, double *part) {
    __shared__ double sh[32];
    int64_t i0 = (int64_t)blockIdx.x * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double s = 0.0;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) s += global_term(kind, x, y, i);
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void k_global_final(const double *part, int nb, double scale, double *out_d, float *out_f) {
    __shared__ double sh[32];
    double s = threadIdx.x < nb ? part[threadIdx.x] : 0.0;
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) {
        if (out_d) *out_d = s;
        if (out_f) *out_f = (float)(s * scale);
    }
}

extern "C" {

size_t cuk_reduce_scratch_bytes(int64_t n_out, int64_t n_red) {
    size_t outer = n_out > 0 ? (size_t)outer_chunks(n_out, n_red) * (size_t)n_out * sizeof(float) : 0;
    size_t global = GLOBAL_MAX_BLOCKS * sizeof(double);
    return (outer > global ? outer : global) + 256;
}

cudaError_t cuk_sum_global(int kind, const float *x, const float *y, int64_t n, double scale, double *out_d,
                           float *out_f, void *scratch, cudaStream_t s) {
    int64_t nb = (n + 4095) / 4096;
    if (nb > GLOBAL_MAX_BLOCKS) nb = GLOBAL_MAX_BLOCKS;
    if (nb < 1) nb = 1;
    int64_t chunk = (n + nb - 1) / nb;
    if (chunk < 1) chunk = 1;
    double *part = (double *)scratch;
    k_global_partials<<<(unsigned)nb, CUK_THREADS, 0, s>>>(kind, x, y, n, chunk, part);
    k_global_final<<<1, GLOBAL_MAX_BLOCKS, 0, s>>>(part, (int)nb, scale, out_d, out_f);
    return cudaGetLastError();
}

cudaError_t cuk_reduce(const float *x, float *out, int nd, const int64_t *d, const int *red, float scale,
                       void *scratch, cudaStream_t s) {
    red_index ix;
    ix.nk = ix.nr = 0;
    int64_t st = 1, n_out = 1, n_red = 1;
    int64_t strides[CUK_MAX_DIMS];
    for (int i = nd - 1; i >= 0; i--) {
        strides[i] = st;
        st *= d[i];
    }
    for (int i = 0; i < nd; i++) {
        if (red[i]) {
            ix.rd[ix.nr] = d[i], ix.rs[ix.nr++] = strides[i];
            n_red *= d[i];
        } else {
            ix.kd[ix.nk] = d[i], ix.ks[ix.nk++] = strides[i];
            n_out *= d[i];
        }
    }
    ix.kfast = n_out <= CUK_FAST_MAX;
    ix.rfast = n_red <= CUK_FAST_MAX;
    for (int k = 0; k < CUK_MAX_DIMS; k++) {
        ix.kdiv[k] = cuk_div_make(k < ix.nk && ix.kfast ? (uint32_t)ix.kd[k] : 1u);
        ix.rdiv[k] = cuk_div_make(k < ix.nr && ix.rfast ? (uint32_t)ix.rd[k] : 1u);
    }
    if (n_out <= 0) return cudaSuccess;
    if (n_red == 0 || nd == 0) { /* nothing reduced away: a copy (scaled), or zeros */
        return n_red == 0 ? cuk_fill(out, 0.0f, n_out, s) : cuk_unary(BRISK_OP_SCALE, 0, scale, 0.0f, x, out, n_out, s);
    }
    if (n_out == 1) {
        /* everything: the chunked global sum, then the scale in f32 as the CPU does */
        double *part = (double *)scratch;
        cudaError_t e = cuk_sum_global(0, x, NULL, n_red, 1.0, NULL, out, part, s);
        if (e == cudaSuccess && scale != 1.0f) e = cuk_unary(BRISK_OP_SCALE, 0, scale, 0.0f, out, out, 1, s);
        return e;
    }
    if (red[nd - 1]) {
        int per = n_red >= 4096 && n_out < 4096 ? CUK_THREADS : 32;
        unsigned blocks = per == 32 ? (unsigned)((n_out + CUK_THREADS / 32 - 1) / (CUK_THREADS / 32)) : (unsigned)n_out;
        k_red_inner<<<blocks, CUK_THREADS, 0, s>>>(x, out, ix, n_out, n_red, scale, per);
        return cudaGetLastError();
    }
    int chunks = outer_chunks(n_out, n_red);
    dim3 grid((unsigned)((n_out + CUK_THREADS - 1) / CUK_THREADS), (unsigned)chunks);
    float *part = (float *)scratch;
    k_red_outer<<<grid, CUK_THREADS, 0, s>>>(x, out, part, ix, n_out, n_red, chunks, scale);
    if (chunks > 1)
        k_red_chunks<<<(unsigned)((n_out + CUK_THREADS - 1) / CUK_THREADS), CUK_THREADS, 0, s>>>(part, out, n_out,
                                                                                             chunks, scale);
    return cudaGetLastError();
}

} /* extern "C" */
