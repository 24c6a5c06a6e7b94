/* The LSTM's data movement around cuDNN (cudnn_rnn.c): a reverse node's sequences flipped
 * in time on the way in and out, and the h_prev plane LSTM_GRAD_W's GEMM reads. The
 * index arithmetic is lstm_layout.h's, replayed on the host by test_cuda_lstm_layout. */
#include "backend/cuda/k_common.cuh"
#include "backend/cuda/lstm_layout.h"

__global__ void k_lstm_flip(float *dst, const float *src, int64_t T, int64_t F, int64_t n) {
    GRID_STRIDE(i, n) dst[i] = src[lstm_flip_src(i, T, F)];
}

__global__ void k_lstm_hprev(const float *h, float *hprev, int64_t T, int64_t H, int reverse, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t j = lstm_hprev_src(i, T, H, reverse);
        hprev[i] = j < 0 ? 0.0f : h[j];
    }
}

extern "C" cudaError_t cuk_lstm_flip(const float *src, float *dst, int64_t B, int64_t T, int64_t F, cudaStream_t s) {
    int64_t n = B * T * F;
    if (n <= 0) return cudaSuccess;
    k_lstm_flip<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(dst, src, T, F, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_lstm_hprev(const float *h, float *hprev, int64_t B, int64_t T, int64_t H, int reverse,
                                      cudaStream_t s) {
    int64_t n = B * T * H;
    if (n <= 0) return cudaSuccess;
    k_lstm_hprev<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(h, hprev, T, H, reverse, n);
    return cudaGetLastError();
}
