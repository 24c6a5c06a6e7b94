/* Row-wise ops over the last dim of [rows, C], matching src/backend/cpu/softmax_loss.c and
 * layernorm.c:
 *   SOFTMAX, LOG_SOFTMAX (max-shifted), their gradients,
 *   CROSS_ENTROPY (per-row logsumexp - x[label] in double, summed in row order by one
 *   block: the same loss on every run), CROSS_ENTROPY_GRAD,
 *   LAYERNORM / _GRAD_X (gamma NULL: 1) / _XHAT: the mean summed in double and split into hi + lo floats
 *   as the CPU does, so centring stays accurate when |mean| >> std.
 * A label outside [0, C) is reported through cuda_errors (the host names it at its next
 * synchronisation) and makes the loss NaN.
 *
 * Threads per row follow the row's length (row_threads): short rows share a warp (2 to
 * 32 lanes each, reduced with shuffles inside their lane group), rows up to 1024 take a
 * warp, longer rows a whole block (256 or 1024 threads, reduced through shared memory).
 * The choice depends on C only, so sums are combined in the same order on every run. */
#include <math.h>

#include "backend/cuda/k_common.cuh"

/* the threads for one row of c elements: a power of two <= 32, or a block (256 / 1024) */
static int row_threads(int64_t c) {
    if (c > 1024) return c >= 16384 ? 1024 : 256;
    int t = 1;
    while (t < 32 && (int64_t)t * 4 < c) t <<= 1;
    return t;
}

/* launch geometry for rows of c: blocks of CUK_THREADS holding CUK_THREADS / tpr rows, or
 * one block of tpr threads per row */
static void row_launch(int64_t rows, int64_t c, int *tpr, unsigned *blocks, unsigned *threads) {
    *tpr = row_threads(c);
    if (*tpr > 32) {
        *blocks = (unsigned)rows;
        *threads = (unsigned)*tpr;
    } else {
        int per = CUK_THREADS / *tpr;
        *blocks = (unsigned)((rows + per - 1) / per);
        *threads = CUK_THREADS;
    }
}

/* This thread's row and lane. Threads past the last row keep going (their lane group's
 * shuffles need every lane of the warp) with nothing to read (n = 0) or write (valid 0). */
#define ROW_SETUP(rows, c)                                                                                  \
    int64_t r = tpr > 32 ? (int64_t)blockIdx.x : (int64_t)blockIdx.x * (blockDim.x / tpr) + threadIdx.x / tpr; \
    const int lane = tpr > 32 ? (int)threadIdx.x : (int)(threadIdx.x & (tpr - 1));                          \
    const int valid = r < (rows);                                                                            \
    if (!valid) r = 0;                                                                                       \
    const int64_t n = valid ? (c) : 0;                                                                       \
    __shared__ double sh_[32];

/* Sums and max over a row's threads; every one of them gets the result. sh: 32 doubles of
 * shared memory (block rows only). */
__device__ __forceinline__ double row_sum_d(double v, int tpr, double *sh) {
    if (tpr <= 32) {
        for (int o = tpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    }
    return block_sum_d(v, sh);
}

__device__ __forceinline__ float row_sum(float v, int tpr, double *sh) {
    if (tpr <= 32) {
        for (int o = tpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    }
    float *shf = (float *)sh;
    int w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) shf[w] = v;
    __syncthreads();
    float t = 0.0f;
    for (int k = 0; k < nw; k++) t += shf[k];
    return t;
}

__device__ __forceinline__ float row_max_of(float v, int tpr, double *sh) {
    if (tpr <= 32) {
        for (int o = tpr >> 1; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
        return v;
    }
    float *shf = (float *)sh;
    int w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) shf[w] = v;
    __syncthreads();
    float t = shf[0];
    for (int k = 1; k < nw; k++) t = fmaxf(t, shf[k]);
    return t;
}

/* all threads of the row see each other's global writes */
__device__ __forceinline__ void row_sync(int tpr) {
    if (tpr > 32) __syncthreads();
    else __syncwarp();
}

__device__ __forceinline__ float row_max(const float *x, int64_t c, int lane, int tpr, double *sh) {
    float m = -INFINITY;
    for (int64_t j = lane; j < c; j += tpr) m = x[j] > m ? x[j] : m;
    return row_max_of(m, tpr, sh);
}

__device__ __forceinline__ float row_sumexp(const float *x, int64_t c, float m, int lane, int tpr, double *sh) {
    float s = 0.0f;
    for (int64_t j = lane; j < c; j += tpr) s += expf(x[j] - m);
    return row_sum(s, tpr, sh);
}

__global__ void k_softmax(int log, const float *x, float *out, int64_t rows, int64_t c, int tpr) {
    ROW_SETUP(rows, c);
    const float *xr = x + r * c;
    float *o = out + r * c;
    float m = row_max(xr, n, lane, tpr, sh_);
    if (m == -INFINITY) m = 0.0f; /* an all -inf row: NaN results, as in torch */
    if (!log) {
        float s = 0.0f;
        for (int64_t j = lane; j < n; j += tpr) {
            float e = expf(xr[j] - m);
            o[j] = e;
            s += e;
        }
        float inv = 1.0f / row_sum(s, tpr, sh_);
        for (int64_t j = lane; j < n; j += tpr) o[j] *= inv;
    } else {
        float lse = m + logf(row_sumexp(xr, n, m, lane, tpr, sh_));
        for (int64_t j = lane; j < n; j += tpr) o[j] = xr[j] - lse;
    }
}

__global__ void k_softmax_grad(int log, const float *dy, const float *y, float *out, int64_t rows, int64_t c, int tpr) {
    ROW_SETUP(rows, c);
    const float *d = dy + r * c, *yr = y + r * c;
    float *o = out + r * c;
    float s = 0.0f;
    for (int64_t j = lane; j < n; j += tpr) s += log ? d[j] : d[j] * yr[j];
    s = row_sum(s, tpr, sh_);
    for (int64_t j = lane; j < n; j += tpr) o[j] = log ? d[j] - expf(yr[j]) * s : yr[j] * (d[j] - s);
}

__global__ void k_ce_rows(const float *x, const int32_t *labels, double *terms, int64_t rows, int64_t c,
                          cuda_errors *e, int node, int tpr) {
    ROW_SETUP(rows, c);
    const float *xr = x + r * c;
    int32_t lab = labels[r];
    float m = row_max(xr, n, lane, tpr, sh_);
    float lse = m + logf(row_sumexp(xr, n, m, lane, tpr, sh_));
    if (lane == 0 && valid) {
        if (lab < 0 || (int64_t)lab >= c) {
            dev_report(e, CUK_ERR_LABEL, node, r, lab, c);
            terms[r] = nan("");
        } else {
            terms[r] = (double)lse - (double)xr[lab];
        }
    }
}

__global__ void k_ce_final(const double *terms, int64_t rows, float *loss) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) s += terms[i];
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) *loss = rows ? (float)(s / (double)rows) : nanf("");
}

__global__ void k_ce_grad(const float *dloss, const float *x, const int32_t *labels, float *out, int64_t rows,
                          int64_t c, cuda_errors *e, int node, int tpr) {
    ROW_SETUP(rows, c);
    const float *xr = x + r * c;
    float *o = out + r * c;
    float scale = *dloss / (float)rows;
    float m = row_max(xr, n, lane, tpr, sh_);
    float k = scale / row_sumexp(xr, n, m, lane, tpr, sh_);
    for (int64_t j = lane; j < n; j += tpr) o[j] = expf(xr[j] - m) * k;
    row_sync(tpr);
    int32_t lab = labels[r];
    if (lane == 0 && valid) {
        if (lab < 0 || (int64_t)lab >= c) dev_report(e, CUK_ERR_LABEL, node, r, lab, c);
        else o[lab] -= scale;
    }
}

/* ---------------------------------------------------------------- layernorm */

__global__ void k_layernorm(int op, const float *x, const float *dy, const float *gamma, const float *beta,
                            float *out, int64_t rows, int64_t c, float eps, int tpr) {
    ROW_SETUP(rows, c);
    const float *xr = x + r * c;
    float *o = out + r * c;
    double s = 0.0;
    for (int64_t j = lane; j < n; j += tpr) s += xr[j];
    double mu = row_sum_d(s, tpr, sh_) / (double)c;
    float hi = (float)mu, lo = (float)(mu - (double)hi), q = 0.0f;
    for (int64_t j = lane; j < n; j += tpr) {
        float d = (xr[j] - hi) - lo;
        q += d * d;
    }
    float rs = 1.0f / sqrtf(row_sum(q, tpr, sh_) / (float)c + eps);
    if (op == BRISK_OP_LAYERNORM) {
        for (int64_t j = lane; j < n; j += tpr) o[j] = ((xr[j] - hi) - lo) * rs * gamma[j] + beta[j];
    } else if (op == BRISK_OP_LAYERNORM_XHAT) {
        for (int64_t j = lane; j < n; j += tpr) o[j] = ((xr[j] - hi) - lo) * rs;
    } else {
        const float *d = dy + r * c;
        float sg = 0.0f, sgx = 0.0f;
        /* without gamma (LAYERNORM_XHAT's gradient) g is dy itself, as gamma = 1 would give */
        for (int64_t j = lane; j < n; j += tpr) {
            float gj = gamma ? d[j] * gamma[j] : d[j];
            sg += gj;
            sgx += gj * ((xr[j] - hi) - lo) * rs;
        }
        float mg = row_sum(sg, tpr, sh_) / (float)c, mgx = row_sum(sgx, tpr, sh_) / (float)c;
        for (int64_t j = lane; j < n; j += tpr)
            o[j] = rs * ((gamma ? d[j] * gamma[j] : d[j]) - mg - ((xr[j] - hi) - lo) * rs * mgx);
    }
}

extern "C" {

#define ROWS_LAUNCH(rows, c) \
    int tpr;                 \
    unsigned blocks, threads; \
    row_launch((rows), (c), &tpr, &blocks, &threads)

cudaError_t cuk_softmax(int log, const float *x, float *out, int64_t rows, int64_t c, cudaStream_t s) {
    if (rows <= 0 || c <= 0) return cudaSuccess;
    ROWS_LAUNCH(rows, c);
    k_softmax<<<blocks, threads, 0, s>>>(log, x, out, rows, c, tpr);
    return cudaGetLastError();
}

cudaError_t cuk_softmax_grad(int log, const float *dy, const float *y, float *out, int64_t rows, int64_t c,
                             cudaStream_t s) {
    if (rows <= 0 || c <= 0) return cudaSuccess;
    ROWS_LAUNCH(rows, c);
    k_softmax_grad<<<blocks, threads, 0, s>>>(log, dy, y, out, rows, c, tpr);
    return cudaGetLastError();
}

cudaError_t cuk_cross_entropy(const float *x, const int32_t *labels, float *loss, int64_t rows, int64_t c,
                              void *scratch, cuda_errors *e, int node, cudaStream_t s) {
    if (rows > 0 && c > 0) {
        ROWS_LAUNCH(rows, c);
        k_ce_rows<<<blocks, threads, 0, s>>>(x, labels, (double *)scratch, rows, c, e, node, tpr);
    }
    k_ce_final<<<1, 1024, 0, s>>>((const double *)scratch, c > 0 ? rows : 0, loss);
    return cudaGetLastError();
}

cudaError_t cuk_cross_entropy_grad(const float *dloss, const float *x, const int32_t *labels, float *out,
                                   int64_t rows, int64_t c, cuda_errors *e, int node, cudaStream_t s) {
    if (rows <= 0 || c <= 0) return cudaSuccess;
    ROWS_LAUNCH(rows, c);
    k_ce_grad<<<blocks, threads, 0, s>>>(dloss, x, labels, out, rows, c, e, node, tpr);
    return cudaGetLastError();
}

cudaError_t cuk_layernorm(int op, const float *x, const float *dy, const float *gamma, const float *beta,
                          float *out, int64_t rows, int64_t n, float eps, cudaStream_t s) {
    if (rows <= 0 || n <= 0) return cudaSuccess;
    ROWS_LAUNCH(rows, n);
    k_layernorm<<<blocks, threads, 0, s>>>(op, x, dy, gamma, beta, out, rows, n, eps, tpr);
    return cudaGetLastError();
}

} /* extern "C" */
