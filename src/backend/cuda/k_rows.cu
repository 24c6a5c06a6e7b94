/* Row-wise ops over the last dim of [rows, C], one warp per row (rows are independent, a
 * warp's shuffles need no shared memory), matching src/backend/cpu/softmax_loss.c and
 * layernorm.c:
 *   SOFTMAX, LOG_SOFTMAX (max-shifted), their gradients,
 *   CROSS_ENTROPY (per-row logsumexp - x[label] in double, summed in row order by one
 *   block: the same loss on every run), CROSS_ENTROPY_GRAD,
 *   LAYERNORM / _GRAD_X / _XHAT: the mean summed in double and split into hi + lo floats
 *   as the CPU does, so centring stays accurate when |mean| >> std.
 * A label outside [0, C) is reported through cuda_errors (the host names it at its next
 * synchronisation) and makes the loss NaN. */
#include <math.h>

#include "backend/cuda/k_common.cuh"

#define ROWS_PER_BLOCK (CUK_THREADS / 32)

static unsigned row_blocks(int64_t rows) { return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK); }

__device__ __forceinline__ float row_max(const float *x, int64_t c, int lane) {
    float m = -INFINITY;
    for (int64_t j = lane; j < c; j += 32) m = x[j] > m ? x[j] : m;
    return warp_max(m);
}

__device__ __forceinline__ float row_sumexp(const float *x, int64_t c, float m, int lane) {
    float s = 0.0f;
    for (int64_t j = lane; j < c; j += 32) s += expf(x[j] - m);
    return warp_sum(s);
}

__global__ void k_softmax(int log, const float *x, float *out, int64_t rows, int64_t c) {
    int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float *xr = x + r * c;
    float *o = out + r * c;
    float m = row_max(xr, c, lane);
    if (m == -INFINITY) m = 0.0f; /* an all -inf row: NaN results, as in torch */
    if (!log) {
        float s = 0.0f;
        for (int64_t j = lane; j < c; j += 32) {
            float e = expf(xr[j] - m);
            o[j] = e;
            s += e;
        }
        float inv = 1.0f / warp_sum(s);
        for (int64_t j = lane; j < c; j += 32) o[j] *= inv;
    } else {
        float lse = m + logf(row_sumexp(xr, c, m, lane));
        for (int64_t j = lane; j < c; j += 32) o[j] = xr[j] - lse;
    }
}

__global__ void k_softmax_grad(int log, const float *dy, const float *y, float *out, int64_t rows, int64_t c) {
    int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float *d = dy + r * c, *yr = y + r * c;
    float *o = out + r * c;
    float s = 0.0f;
    for (int64_t j = lane; j < c; j += 32) s += log ? d[j] : d[j] * yr[j];
    s = warp_sum(s);
    for (int64_t j = lane; j < c; j += 32) o[j] = log ? d[j] - expf(yr[j]) * s : yr[j] * (d[j] - s);
}

__global__ void k_ce_rows(const float *x, const int32_t *labels, double *terms, int64_t rows, int64_t c,
                          cuda_errors *e, int node) {
    int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float *xr = x + r * c;
    int32_t lab = labels[r];
    float m = row_max(xr, c, lane);
    float lse = m + logf(row_sumexp(xr, c, m, lane));
    if (lane == 0) {
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
                          int64_t c, cuda_errors *e, int node) {
    int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float *xr = x + r * c;
    float *o = out + r * c;
    float scale = *dloss / (float)rows;
    float m = row_max(xr, c, lane);
    float k = scale / row_sumexp(xr, c, m, lane);
    for (int64_t j = lane; j < c; j += 32) o[j] = expf(xr[j] - m) * k;
    __syncwarp();
    int32_t lab = labels[r];
    if (lane == 0) {
        if (lab < 0 || (int64_t)lab >= c) dev_report(e, CUK_ERR_LABEL, node, r, lab, c);
        else o[lab] -= scale;
    }
}

/* ---------------------------------------------------------------- layernorm */

__global__ void k_layernorm(int op, const float *x, const float *dy, const float *gamma, const float *beta,
                            float *out, int64_t rows, int64_t n, float eps) {
    int64_t r = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const float *xr = x + r * n;
    float *o = out + r * n;
    double s = 0.0;
    for (int64_t j = lane; j < n; j += 32) s += xr[j];
    double mu = warp_sum_d(s) / (double)n;
    float hi = (float)mu, lo = (float)(mu - (double)hi), q = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
        float d = (xr[j] - hi) - lo;
        q += d * d;
    }
    float rs = 1.0f / sqrtf(warp_sum(q) / (float)n + eps);
    if (op == BRISK_OP_LAYERNORM) {
        for (int64_t j = lane; j < n; j += 32) o[j] = ((xr[j] - hi) - lo) * rs * gamma[j] + beta[j];
    } else if (op == BRISK_OP_LAYERNORM_XHAT) {
        for (int64_t j = lane; j < n; j += 32) o[j] = ((xr[j] - hi) - lo) * rs;
    } else {
        const float *d = dy + r * n;
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = lane; j < n; j += 32) {
            float gj = d[j] * gamma[j];
            sg += gj;
            sgx += gj * ((xr[j] - hi) - lo) * rs;
        }
        float mg = warp_sum(sg) / (float)n, mgx = warp_sum(sgx) / (float)n;
        for (int64_t j = lane; j < n; j += 32) o[j] = rs * (d[j] * gamma[j] - mg - ((xr[j] - hi) - lo) * rs * mgx);
    }
}

extern "C" {

cudaError_t cuk_softmax(int log, const float *x, float *out, int64_t rows, int64_t c, cudaStream_t s) {
    if (rows <= 0 || c <= 0) return cudaSuccess;
    k_softmax<<<row_blocks(rows), CUK_THREADS, 0, s>>>(log, x, out, rows, c);
    return cudaGetLastError();
}

cudaError_t cuk_softmax_grad(int log, const float *dy, const float *y, float *out, int64_t rows, int64_t c,
                             cudaStream_t s) {
    if (rows <= 0 || c <= 0) return cudaSuccess;
    k_softmax_grad<<<row_blocks(rows), CUK_THREADS, 0, s>>>(log, dy, y, out, rows, c);
    return cudaGetLastError();
}

cudaError_t cuk_cross_entropy(const float *x, const int32_t *labels, float *loss, int64_t rows, int64_t c,
                              void *scratch, cuda_errors *e, int node, cudaStream_t s) {
    if (rows > 0 && c > 0)
        k_ce_rows<<<row_blocks(rows), CUK_THREADS, 0, s>>>(x, labels, (double *)scratch, rows, c, e, node);
    k_ce_final<<<1, 1024, 0, s>>>((const double *)scratch, c > 0 ? rows : 0, loss);
    return cudaGetLastError();
}

cudaError_t cuk_cross_entropy_grad(const float *dloss, const float *x, const int32_t *labels, float *out,
                                   int64_t rows, int64_t c, cuda_errors *e, int node, cudaStream_t s) {
    if (rows <= 0 || c <= 0) return cudaSuccess;
    k_ce_grad<<<row_blocks(rows), CUK_THREADS, 0, s>>>(dloss, x, labels, out, rows, c, e, node);
    return cudaGetLastError();
}

cudaError_t cuk_layernorm(int op, const float *x, const float *dy, const float *gamma, const float *beta,
                          float *out, int64_t rows, int64_t n, float eps, cudaStream_t s) {
    if (rows <= 0 || n <= 0) return cudaSuccess;
    k_layernorm<<<row_blocks(rows), CUK_THREADS, 0, s>>>(op, x, dy, gamma, beta, out, rows, n, eps);
    return cudaGetLastError();
}

} /* extern "C" */
