/* A residual add fused with the layer norm next to it (prepare.c finds the pairs), one
 * warp per row of [rows, n]:
 *   add_layernorm      s = x + r (written: the residual stream), y = layernorm(s) gamma + beta
 *                      (the add of a post-LN block and the norm after it, or a pre-LN
 *                      block's add and the next block's norm);
 *   layernorm_grad_add out = r + layernorm_grad_x(dy, x, gamma) (the norm's input gradient
 *                      summed with the residual branch's, without writing the former).
 * The arithmetic is k_rows.cu's k_layernorm step for step (the mean summed in double and
 * split into hi + lo floats, centred squares in f32, the same lane order), then the same
 * f32 add, so a fused pair gives the bits of the two unfused kernels. Each lane re-reads
 * its own elements of s between passes (its own writes: no synchronisation needed). */
#include <math.h>

#include "backend/cuda/k_common.cuh"

#define ROWS_PER_BLOCK (CUK_THREADS / 32)

typedef struct ln_stats {
    float hi, lo, rs;
} ln_stats;

/* mean (hi + lo) and 1 / sqrt(var + eps) of the warp's row x, as k_layernorm computes them */
__device__ __forceinline__ ln_stats row_stats(const float *x, int64_t n, float eps, int lane) {
    double s = 0.0;
    for (int64_t j = lane; j < n; j += 32) s += x[j];
    double mu = warp_sum_d(s) / (double)n;
    ln_stats st;
    st.hi = (float)mu;
    st.lo = (float)(mu - (double)st.hi);
    float q = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
        float d = (x[j] - st.hi) - st.lo;
        q += d * d;
    }
    st.rs = 1.0f / sqrtf(warp_sum(q) / (float)n + eps);
    return st;
}

__global__ void k_add_layernorm(const float *x, const float *r, float *s, const float *gamma, const float *beta,
                                float *y, int64_t rows, int64_t n, float eps) {
    int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float *xr = x + row * n, *rr = r + row * n;
    float *sr = s + row * n, *yr = y + row * n;
    for (int64_t j = lane; j < n; j += 32) sr[j] = xr[j] + rr[j];
    ln_stats st = row_stats(sr, n, eps, lane);
    for (int64_t j = lane; j < n; j += 32) yr[j] = ((sr[j] - st.hi) - st.lo) * st.rs * gamma[j] + beta[j];
}

__global__ void k_layernorm_grad_add(const float *dy, const float *x, const float *gamma, const float *r, float *out,
                                     int64_t rows, int64_t n, float eps) {
    int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float *xr = x + row * n, *d = dy + row * n, *rr = r + row * n;
    float *o = out + row * n;
    ln_stats st = row_stats(xr, n, eps, lane);
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
        float gj = d[j] * gamma[j];
        sg += gj;
        sgx += gj * ((xr[j] - st.hi) - st.lo) * st.rs;
    }
    float mg = warp_sum(sg) / (float)n, mgx = warp_sum(sgx) / (float)n;
    for (int64_t j = lane; j < n; j += 32) {
        float q = st.rs * (d[j] * gamma[j] - mg - ((xr[j] - st.hi) - st.lo) * st.rs * mgx);
        o[j] = rr[j] + q;
    }
}

static unsigned row_blocks(int64_t rows) { return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK); }

/* cudaLaunchKernel rather than <<< >>>, so the file also compiles as C++ for the host
 * replay (tests/backend/replay) */
extern "C" cudaError_t cuk_add_layernorm(const float *x, const float *r, float *s, const float *gamma,
                                         const float *beta, float *y, int64_t rows, int64_t n, float eps,
                                         cudaStream_t st) {
    if (rows <= 0 || n <= 0) return cudaSuccess;
    void *args[] = {&x, &r, &s, &gamma, &beta, &y, &rows, &n, &eps};
    return cudaLaunchKernel((const void *)k_add_layernorm, dim3(row_blocks(rows)), dim3(CUK_THREADS), args, 0, st);
}

extern "C" cudaError_t cuk_layernorm_grad_add(const float *dy, const float *x, const float *gamma, const float *r,
                                              float *out, int64_t rows, int64_t n, float eps, cudaStream_t st) {
    if (rows <= 0 || n <= 0) return cudaSuccess;
    void *args[] = {&dy, &x, &gamma, &r, &out, &rows, &n, &eps};
    return cudaLaunchKernel((const void *)k_layernorm_grad_add, dim3(row_blocks(rows)), dim3(CUK_THREADS), args, 0,
                            st);
}
