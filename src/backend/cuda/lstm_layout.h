/* Index and layout arithmetic of the CUDA LSTM (cudnn_rnn.c, k_lstm.cu), kept free of
 * CUDA and cuDNN headers so that tests/backend/test_cuda_lstm_layout.c replays it on the
 * host in CI, where no GPU runs it.
 *
 * The LSTM node's buffer (src/ops/sequence.c) is 7 BTH floats: h [B, T, H], then a
 * workspace sized for the CPU's planes. The CUDA backend uses that workspace its own way:
 *   [BTH, 6BTH)   cuDNN's reserve space (256-byte aligned) when it fits there, else a
 *                 buffer the plan owns
 *   [6BTH, 7BTH)  h_prev, at the CPU's offset: the h each step started from (zeros first)
 * cuDNN's weight space holds, per gate k (i, f, g, o), an input matrix [H, 4H], a
 * recurrent matrix [H, H] and two bias vectors [H], wherever cudnnGetRNNWeightParams says;
 * brisk's w_hh [4H, H] and bias [4H] hold gate k at rows / elements k H .. (k+1) H. */
#ifndef BRISK_CUDA_LSTM_LAYOUT_H
#define BRISK_CUDA_LSTM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define LSTM_HD __host__ __device__
#else
#define LSTM_HD
#endif

/* Element i of a [B, T, F] tensor flipped in time: the source element it comes from. */
LSTM_HD static inline int64_t lstm_flip_src(int64_t i, int64_t T, int64_t F) {
    int64_t f = i % F, bt = i / F, t = bt % T, b = bt / T;
    return (b * T + (T - 1 - t)) * F + f;
}

/* Element i of h_prev [B, T, H]: the element of h it copies, or -1 for the zeros of the
 * first step (t = 0 running forward, t = T-1 in reverse). */
LSTM_HD static inline int64_t lstm_hprev_src(int64_t i, int64_t T, int64_t H, int reverse) {
    int64_t t = (i / H) % T;
    if (reverse) return t == T - 1 ? -1 : i + H;
    return t == 0 ? -1 : i - H;
}

/* Byte offsets from `base`, the node buffer's address. */
static inline int64_t lstm_hprev_at(int64_t B, int64_t T, int64_t H) {
    return 6 * B * T * H * (int64_t)sizeof(float);
}

/* The reserve space of `bytes`, 256-byte aligned after h, or -1 when it does not fit
 * before h_prev. */
static inline int64_t lstm_reserve_at(uintptr_t base, int64_t B, int64_t T, int64_t H, size_t bytes) {
    uintptr_t at = (base + (uintptr_t)(B * T * H) * sizeof(float) + 255u) & ~(uintptr_t)255u;
    uintptr_t hi = base + (uintptr_t)lstm_hprev_at(B, T, H);
    if (at > hi || hi - at < bytes) return -1;
    return (int64_t)(at - base);
}

/* Whether a reserve space of `bytes` fits in the node buffer wherever that is placed
 * (its address a multiple of 4). */
static inline int lstm_reserve_fits(int64_t B, int64_t T, int64_t H, size_t bytes) {
    size_t room = (size_t)(5 * B * T * H) * sizeof(float);
    return room >= 256 && bytes <= room - 256;
}

/* One contiguous copy: count floats from src + src_off to dst + dst_off. */
typedef struct lstm_run {
    int64_t dst_off, src_off, count;
} lstm_run;

/* Copies of four gate blocks of `count` floats, source block k at k count, destination
 * block k at dst[k], merged where both sides continue: returns how many runs. */
static inline int lstm_runs(const int64_t dst[4], int64_t count, lstm_run runs[4]) {
    int n = 0;
    for (int k = 0; k < 4; k++) {
        if (n > 0 && runs[n - 1].dst_off + runs[n - 1].count == dst[k] &&
            runs[n - 1].src_off + runs[n - 1].count == k * count) {
            runs[n - 1].count += count;
            continue;
        }
        runs[n].dst_off = dst[k];
        runs[n].src_off = k * count;
        runs[n].count = count;
        n++;
    }
    return n;
}

/* Where cuDNN put one layer's parameters, in floats from the weight space's start: per
 * gate k the input matrix, recurrent matrix, input bias and recurrent bias. */
typedef struct lstm_weight_map {
    int64_t w_in[4], w_rec[4], b_in[4], b_rec[4];
} lstm_weight_map;

/* 0 when every block lies inside a weight space of ws_floats and no two overlap; else 1
 * with what (the first bad block) named in why. */
static inline int lstm_map_check(const lstm_weight_map *m, int64_t H, int64_t ws_floats, const char **why) {
    int64_t at[16], len[16];
    static const char *names[4] = {"an input matrix", "a recurrent matrix", "an input bias", "a recurrent bias"};
    for (int k = 0; k < 4; k++) {
        at[k] = m->w_in[k], len[k] = 4 * H * H;
        at[4 + k] = m->w_rec[k], len[4 + k] = H * H;
        at[8 + k] = m->b_in[k], len[8 + k] = H;
        at[12 + k] = m->b_rec[k], len[12 + k] = H;
    }
    for (int i = 0; i < 16; i++) {
        if (at[i] < 0 || at[i] > ws_floats - len[i]) {
            *why = names[i / 4];
            return 1;
        }
        for (int j = 0; j < i; j++)
            if (at[i] < at[j] + len[j] && at[j] < at[i] + len[i]) {
                *why = names[i / 4];
                return 1;
            }
    }
    return 0;
}

/* The identity input matrix: gate k's [H, 4H] block has its ones at row r, column k H + r,
 * i.e. floats w_in[k] + k H + r (4H + 1). */
static inline int64_t lstm_eye_at(const lstm_weight_map *m, int k, int64_t H, int64_t r) {
    return m->w_in[k] + k * H + r * (4 * H + 1);
}

#endif
