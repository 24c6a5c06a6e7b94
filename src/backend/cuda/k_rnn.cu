/* The LSTM's and GRU's data movement around cuDNN (cudnn_rnn.c): a reverse node's sequences
 * flipped in time on the way in and out, the h_prev plane the d w_hh GEMM reads, and the
 * GRU's reset gate r (for d hh_n = d xp_n r, which cuDNN does not hand back). The index
 * arithmetic is rnn_layout.h's, replayed on the host by test_cuda_rnn_layout. */
#include "backend/cuda/k_common.cuh"
#include "backend/cuda/rnn_layout.h"

__global__ void k_rnn_flip(float *dst, const float *src, int64_t T, int64_t F, int64_t n) {
    GRID_STRIDE(i, n) dst[i] = src[rnn_flip_src(i, T, F)];
}

__global__ void k_rnn_hprev(const float *h, float *hprev, int64_t T, int64_t H, int reverse, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t j = rnn_hprev_src(i, T, H, reverse);
        hprev[i] = j < 0 ? 0.0f : h[j];
    }
}

/* r holds h_prev w_hr^T; becomes sigmoid(that + xp_r + b_ir + b_hr), as cuDNN's reset gate */
__global__ void k_gru_r(float *r, const float *xp, const float *b_ih, const float *b_hh, int64_t H, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t j = i % H;
        float v = r[i] + xp[rnn_gate_at(i, H, 0)] + (b_ih[j] + b_hh[j]);
        r[i] = 1.0f / (1.0f + expf(-v));
    }
}

__global__ void k_gru_dhn(const float *dxp, const float *r, float *dhn, int64_t H, int64_t n) {
    GRID_STRIDE(i, n) dhn[i] = dxp[rnn_gate_at(i, H, 2)] * r[i];
}

extern "C" cudaError_t cuk_rnn_flip(const float *src, float *dst, int64_t B, int64_t T, int64_t F, cudaStream_t s) {
    int64_t n = B * T * F;
    if (n <= 0) return cudaSuccess;
    k_rnn_flip<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(dst, src, T, F, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_rnn_hprev(const float *h, float *hprev, int64_t B, int64_t T, int64_t H, int reverse,
                                     cudaStream_t s) {
    int64_t n = B * T * H;
    if (n <= 0) return cudaSuccess;
    k_rnn_hprev<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(h, hprev, T, H, reverse, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_gru_r(float *r, const float *xp, const float *b_ih, const float *b_hh, int64_t B,
                                 int64_t T, int64_t H, cudaStream_t s) {
    int64_t n = B * T * H;
    if (n <= 0) return cudaSuccess;
    k_gru_r<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(r, xp, b_ih, b_hh, H, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_gru_dhn(const float *dxp, const float *r, float *dhn, int64_t B, int64_t T, int64_t H,
                                   cudaStream_t s) {
    int64_t n = B * T * H;
    if (n <= 0) return cudaSuccess;
    k_gru_dhn<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(dxp, r, dhn, H, n);
    return cudaGetLastError();
}
