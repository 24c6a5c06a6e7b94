/* BATCHNORM, BATCHNORM_GRAD_GB and BATCHNORM_GRAD_X over dim 1 of [N, C, S] (S = H W), as
 * src/backend/cpu/batchnorm.c computes them: one block per channel for the statistics and
 * the per-channel sums (in double, combined in a fixed order: the same bits every run),
 * elementwise for the rest. Forward workspace after y: mean [C], invstd [C]; training
 * also moves the running buffers (unbiased variance), eval normalises by them. The fused
 * ReLU masks dy where y is not positive; the residual add has no backward here (its
 * gradient is dy', an ACT_GRAD). */
#include "backend/cuda/k_common.cuh"

#define BN_THREADS 512

/* Per channel: the statistics (training: the batch's, moving the running ones; eval: the
 * running ones) into ws = mean [C] | invstd [C]. */
__global__ void k_bn_stats(const float *x, float *rmean, float *rvar, float *ws, int64_t N, int64_t C, int64_t S,
                           float eps, float momentum, int training) {
    __shared__ double sh[32];
    int64_t c = blockIdx.x, M = N * S;
    double mean, var;
    if (training) {
        double s = 0;
        for (int64_t e = threadIdx.x; e < M; e += blockDim.x) s += x[((e / S) * C + c) * S + e % S];
        mean = block_sum_d(s, sh) / (double)M;
        double q = 0;
        for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
            double d = x[((e / S) * C + c) * S + e % S] - mean;
            q += d * d;
        }
        var = block_sum_d(q, sh) / (double)M;
    } else {
        mean = rmean[c];
        var = rvar[c];
    }
    if (threadIdx.x == 0) {
        if (training) {
            double m = momentum;
            rmean[c] = (float)((1.0 - m) * rmean[c] + m * mean);
            rvar[c] = (float)((1.0 - m) * rvar[c] + m * var * (double)M / (double)(M - 1));
        }
        ws[c] = (float)mean;
        ws[C + c] = (float)(1.0 / sqrt(var + eps));
    }
}

__global__ void k_bn_apply(const float *x, const float *gamma, const float *beta, const float *res, const float *ws,
                           float *y, int64_t C, int64_t S, int relu, int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t c = (e / S) % C;
        double invstd = ws[C + c], mean = ws[c];
        float scale = (float)(gamma[c] * invstd), shift = (float)(beta[c] - mean * gamma[c] * invstd);
        float v = x[e] * scale + shift;
        if (res) v += res[e];
        y[e] = relu && v < 0.0f ? 0.0f : v;
    }
}

/* gb = [sum dy' (x - mean) invstd | sum dy'] per channel. */
__global__ void k_bn_grad_gb(const float *dy, const float *y, const float *x, const float *ws, float *gb, int64_t N,
                             int64_t C, int64_t S, int relu) {
    __shared__ double sh[32];
    int64_t c = blockIdx.x, M = N * S;
    double mean = ws[c], a = 0, b = 0;
    for (int64_t e = threadIdx.x; e < M; e += blockDim.x) {
        int64_t i = ((e / S) * C + c) * S + e % S;
        float d = relu && !(y[i] > 0.0f) ? 0.0f : dy[i];
        a += d;
        b += d * (x[i] - mean);
    }
    a = block_sum_d(a, sh);
    b = block_sum_d(b, sh);
    if (threadIdx.x == 0) {
        gb[c] = (float)(b * ws[C + c]);
        gb[C + c] = (float)a;
    }
}

__global__ void k_bn_grad_x(const float *dy, const float *y, const float *x, const float *ws, const float *gamma,
                            const float *gb, float *dx, int64_t C, int64_t S, int64_t M, int relu, int training,
                            int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t c = (e / S) % C;
        float mean = ws[c], invstd = ws[C + c], k = gamma[c] * invstd;
        float mdy = training ? (float)(gb[C + c] / (double)M) : 0.0f;
        float mdyx = training ? (float)(gb[c] / (double)M) : 0.0f;
        float d = relu && !(y[e] > 0.0f) ? 0.0f : dy[e];
        dx[e] = k * (d - mdy - (x[e] - mean) * invstd * mdyx);
    }
}

extern "C" cudaError_t cuk_bn_forward(const float *x, const float *gamma, const float *beta, const float *res,
                                      float *rmean, float *rvar, float *y, float *ws, int64_t N, int64_t C,
                                      int64_t S, float eps, float momentum, int relu, int training, cudaStream_t s) {
    int64_t n = N * C * S;
    if (n <= 0 || C <= 0) return cudaSuccess;
    k_bn_stats<<<(unsigned)C, BN_THREADS, 0, s>>>(x, rmean, rvar, ws, N, C, S, eps, momentum, training);
    k_bn_apply<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(x, gamma, beta, res, ws, y, C, S, relu, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_bn_grad_gb(const float *dy, const float *y, const float *x, const float *ws, float *gb,
                                      int64_t N, int64_t C, int64_t S, int relu, cudaStream_t s) {
    if (N * C * S <= 0 || C <= 0) return cudaSuccess;
    k_bn_grad_gb<<<(unsigned)C, BN_THREADS, 0, s>>>(dy, y, x, ws, gb, N, C, S, relu);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_bn_grad_x(const float *dy, const float *y, const float *x, const float *ws,
                                     const float *gamma, const float *gb, float *dx, int64_t N, int64_t C, int64_t S,
                                     int relu, int training, cudaStream_t s) {
    int64_t n = N * C * S;
    if (n <= 0) return cudaSuccess;
    k_bn_grad_x<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(dy, y, x, ws, gamma, gb, dx, C, S, N * S, relu, training, n);
    return cudaGetLastError();
}
