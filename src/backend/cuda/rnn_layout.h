/* Index and layout arithmetic of the CUDA LSTM and GRU (cudnn_rnn.c, k_rnn.cu), kept free
 * of CUDA and cuDNN headers so that tests/backend/test_cuda_rnn_layout.c replays it on the
 * host in CI, where no GPU runs it.
 *
 * The node's buffer (src/ops/sequence.c) is h [B, T, H] and then a workspace sized for the
 * CPU's planes: 7 BTH floats for an LSTM, 6 for a GRU. The CUDA backend uses that workspace
 * its own way:
 *   LSTM  [BTH, 6BTH)   cuDNN's reserve space (256-byte aligned) when it fits there, else a
 *                       buffer the plan owns
 *         [6BTH, 7BTH)  h_prev, at the CPU's offset: the h each step started from
 *   GRU   [BTH, 4BTH)   cuDNN's reserve space, as the LSTM's
 *         [4BTH, 5BTH)  r, the reset gate of every step (GRU_GRAD's d hh_n = d xp_n r)
 *         [5BTH, 6BTH)  h_prev, at the CPU's offset
 * cuDNN's weight space holds, per gate k (LSTM i, f, g, o; GRU r, z, n: PyTorch's orders), an
 * input matrix [H, G], a recurrent matrix [H, H] and two bias vectors [H], G = gates x H,
 * wherever cudnnGetRNNWeightParams says; brisk's w_hh [G, H] and biases [G] hold gate k at
 * rows / elements k H .. (k+1) H. */
#ifndef BRISK_CUDA_RNN_LAYOUT_H
#define BRISK_CUDA_RNN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define RNN_HD __host__ __device__
#else
#define RNN_HD
#endif

/* Element i of a [B, T, F] tensor flipped in time: the source element it comes from. */
RNN_HD static inline int64_t rnn_flip_src(int64_t i, int64_t T, int64_t F) {
    int64_t f = i % F, bt = i / F, t = bt % T, b = bt / T;
    return (b * T + (T - 1 - t)) * F + f;
}

/* Element i of h_prev [B, T, H]: the element of h it copies, or -1 for the zeros of the
 * first step (t = 0 running forward, t = T-1 in reverse). */
RNN_HD static inline int64_t rnn_hprev_src(int64_t i, int64_t T, int64_t H, int reverse) {
    int64_t t = (i / H) % T;
    if (reverse) return t == T - 1 ? -1 : i + H;
    return t == 0 ? -1 : i - H;
}

/* Element i of a [B, T, H] plane of the GRU: its gate-k element in a [B, T, 3H] tensor (xp,
 * d xp) whose rows hold the gates side by side. */
RNN_HD static inline int64_t rnn_gate_at(int64_t i, int64_t H, int k) {
    return (i / H) * 3 * H + k * H + i % H;
}

/* [B, T, H] planes in the node's buffer (the output and the CPU's workspace), and where
 * cuDNN's reserve space must end: before h_prev (LSTM) or before r (GRU). */
static inline int rnn_planes(int gates) { return gates == 4 ? 7 : 6; }
static inline int rnn_reserve_end(int gates) { return gates == 4 ? 6 : 4; }

/* Byte offsets from `base`, the node buffer's address: h_prev (the last plane) and the
 * GRU's r plane (the one before it). */
static inline int64_t rnn_hprev_at(int64_t B, int64_t T, int64_t H, int gates) {
    return (rnn_planes(gates) - 1) * B * T * H * (int64_t)sizeof(float);
}
static inline int64_t rnn_gru_r_at(int64_t B, int64_t T, int64_t H) { return 4 * B * T * H * (int64_t)sizeof(float); }

/* The reserve space of `bytes`, 256-byte aligned after h, or -1 when it does not fit
 * before rnn_reserve_end's plane. */
static inline int64_t rnn_reserve_at(uintptr_t base, int64_t B, int64_t T, int64_t H, int gates, size_t bytes) {
    uintptr_t at = (base + (uintptr_t)(B * T * H) * sizeof(float) + 255u) & ~(uintptr_t)255u;
    uintptr_t hi = base + (uintptr_t)(rnn_reserve_end(gates) * B * T * H) * sizeof(float);
    if (at > hi || hi - at < bytes) return -1;
    return (int64_t)(at - base);
}

/* Whether a reserve space of `bytes` fits in the node buffer wherever that is placed
 * (its address a multiple of 4). */
static inline int rnn_reserve_fits(int64_t B, int64_t T, int64_t H, int gates, size_t bytes) {
    size_t room = (size_t)((rnn_reserve_end(gates) - 1) * B * T * H) * sizeof(float);
    return room >= 256 && bytes <= room - 256;
}

/* One contiguous copy: count floats from src + src_off to dst + dst_off. */
typedef struct rnn_run {
    int64_t dst_off, src_off, count;
} rnn_run;

/* Copies of n (<= 4) gate blocks of `count` floats, source block k at k count, destination
 * block k at dst[k], merged where both sides continue: returns how many runs. */
static inline int rnn_runs(const int64_t *dst, int n_blocks, int64_t count, rnn_run runs[4]) {
    int n = 0;
    for (int k = 0; k < n_blocks; k++) {
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
 * gate k (of `gates`, 4 or 3) the input matrix, recurrent matrix, input bias and recurrent
 * bias. */
typedef struct rnn_weight_map {
    int gates;
    int64_t w_in[4], w_rec[4], b_in[4], b_rec[4];
} rnn_weight_map;

/* 0 when every block lies inside a weight space of ws_floats and no two overlap; else 1
 * with what (the first bad block) named in why. */
static inline int rnn_map_check(const rnn_weight_map *m, int64_t H, int64_t ws_floats, const char **why) {
    int64_t at[16], len[16];
    static const char *names[4] = {"an input matrix", "a recurrent matrix", "an input bias", "a recurrent bias"};
    int g = m->gates;
    for (int k = 0; k < g; k++) {
        at[k] = m->w_in[k], len[k] = g * H * H;
        at[g + k] = m->w_rec[k], len[g + k] = H * H;
        at[2 * g + k] = m->b_in[k], len[2 * g + k] = H;
        at[3 * g + k] = m->b_rec[k], len[3 * g + k] = H;
    }
    for (int i = 0; i < 4 * g; i++) {
        if (at[i] < 0 || at[i] > ws_floats - len[i]) {
            *why = names[i / g];
            return 1;
        }
        for (int j = 0; j < i; j++)
            if (at[i] < at[j] + len[j] && at[j] < at[i] + len[i]) {
                *why = names[i / g];
                return 1;
            }
    }
    return 0;
}

/* The identity input matrix: gate k's [H, G] block has its ones at row r, column k H + r,
 * i.e. floats w_in[k] + k H + r (G + 1). */
static inline int64_t rnn_eye_at(const rnn_weight_map *m, int k, int64_t H, int64_t r) {
    return m->w_in[k] + k * H + r * (m->gates * H + 1);
}

#endif
