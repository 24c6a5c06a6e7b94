/* POINTWISE_LOSS and its gradient (src/backend/cpu/loss.c is the reference): the terms
 * l(p, t) of MSE, L1, Huber and BCE with logits in f32, and sum(w l) and sum(w) in double
 * over fixed contiguous ranges per block, then one block sums the partials in index
 * order (cuk_sum_global's scheme): the same loss on every run, no atomics. The gradient
 * kernel reads sum(w) from where the sums left it, so nothing returns to the host. */
#include <math.h>

#include "backend/cuda/k_common.cuh"

#define LOSS_MAX_BLOCKS 1024

__device__ __forceinline__ float loss_term(int kind, float p, float t, float delta) {
    float d = p - t, a = fabsf(d);
    switch (kind) {
    case BRISK_LOSS_MSE: return d * d;
    case BRISK_LOSS_L1: return a;
    case BRISK_LOSS_HUBER: return a < delta ? 0.5f * d * d : delta * (a - 0.5f * delta);
    default: return (p > 0.0f ? p : 0.0f) - p * t + log1pf(expf(-fabsf(p)));
    }
}

__device__ __forceinline__ float loss_slope(int kind, float p, float t, float delta) {
    float d = p - t;
    switch (kind) {
    case BRISK_LOSS_MSE: return 2.0f * d;
    case BRISK_LOSS_L1: return d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
    case BRISK_LOSS_HUBER: return d < -delta ? -delta : d > delta ? delta : d;
    default: return 1.0f / (1.0f + expf(-p)) - t;
    }
}

/* block b: part[2 b] = sum of w l, part[2 b + 1] = sum of w over its range (terms_too 0:
 * the weights alone) */
__global__ void k_loss_partials(int kind, float delta, int terms_too, const float *p, const float *t, const float *w,
                                int64_t n, int64_t chunk, double *part) {
    __shared__ double sh[32];
    int64_t i0 = (int64_t)blockIdx.x * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double s = 0.0, sw = 0.0;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        float wi = w ? w[i] : 1.0f;
        if (terms_too) s += (double)(w ? wi * loss_term(kind, p[i], t[i], delta) : loss_term(kind, p[i], t[i], delta));
        sw += (double)wi;
    }
    s = block_sum_d(s, sh);
    sw = block_sum_d(sw, sh);
    if (threadIdx.x == 0) part[2 * blockIdx.x] = s, part[2 * blockIdx.x + 1] = sw;
}

/* sums = {sum w l, sum w} over nb partials, each thread over a fixed stride of them */
__global__ void k_loss_final(const double *part, int nb, int weighted, int64_t n, float *out, double *sums) {
    __shared__ double sh[32];
    double s = 0.0, sw = 0.0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) s += part[2 * b], sw += part[2 * b + 1];
    s = block_sum_d(s, sh);
    sw = block_sum_d(sw, sh);
    if (threadIdx.x) return;
    if (sums) sums[0] = s, sums[1] = weighted ? sw : (double)n;
    /* a mean over nothing is NaN (as MSE's); a masked mean with nothing kept is 0 */
    if (out) *out = weighted ? (sw != 0.0 ? (float)(s / sw) : 0.0f) : n ? (float)(s / (double)n) : nanf("");
}

__global__ void k_loss_grad(int kind, int which, float delta, const float *dloss, const double *sums, const float *p,
                            const float *t, const float *w, float *o, int64_t n) {
    double ws = sums[1];
    float k = ws != 0.0 ? (float)((double)*dloss / ws) : 0.0f;
    if (which) k = -k; /* d/dt: minus d/dp, and for BCE -p */
    int bce_t = which && kind == BRISK_LOSS_BCE_LOGITS;
    GRID_STRIDE(i, n) {
        float g = bce_t ? p[i] : loss_slope(kind, p[i], t[i], delta);
        o[i] = g * (w ? k * w[i] : k);
    }
}

static void loss_blocks(int64_t n, int *nb, int64_t *chunk) {
    int64_t b = (n + 4095) / 4096;
    if (b > LOSS_MAX_BLOCKS) b = LOSS_MAX_BLOCKS;
    if (b < 1) b = 1;
    *nb = (int)b;
    *chunk = (n + b - 1) / b;
    if (*chunk < 1) *chunk = 1;
}

extern "C" {

size_t cuk_loss_scratch_bytes(void) { return (2 * LOSS_MAX_BLOCKS + 2) * sizeof(double) + 256; }

cudaError_t cuk_pointwise_loss(int kind, float delta, const float *p, const float *t, const float *w, int64_t n,
                               float *out, void *scratch, cudaStream_t s) {
    int nb;
    int64_t chunk;
    loss_blocks(n, &nb, &chunk);
    double *part = (double *)scratch;
    k_loss_partials<<<(unsigned)nb, CUK_THREADS, 0, s>>>(kind, delta, 1, p, t, w, n, chunk, part);
    k_loss_final<<<1, 1024, 0, s>>>(part, nb, w != NULL, n, out, NULL);
    return cudaGetLastError();
}

cudaError_t cuk_pointwise_loss_grad(int kind, int which, float delta, const float *dloss, const float *p,
                                    const float *t, const float *w, float *out, int64_t n, void *scratch,
                                    cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    int nb;
    int64_t chunk;
    loss_blocks(n, &nb, &chunk);
    double *part = (double *)scratch, *sums = part + 2 * LOSS_MAX_BLOCKS;
    /* sum(w) as the forward made it (the weights alone; n without them) */
    k_loss_partials<<<(unsigned)nb, CUK_THREADS, 0, s>>>(kind, delta, 0, p, t, w, n, chunk, part);
    k_loss_final<<<1, 1024, 0, s>>>(part, nb, w != NULL, n, NULL, sums);
    k_loss_grad<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(kind, which, delta, dloss, sums, p, t, w, out, n);
    return cudaGetLastError();
}

} /* extern "C" */
