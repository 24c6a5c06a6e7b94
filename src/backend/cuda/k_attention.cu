/* Fused multi-head self-attention, forward and backward, with the semantics of
 * src/backend/cpu/attention.c (read its header for the math). Per (sample b, head h),
 * Q, K, V are the T x dh column blocks at h dh of qkv's three D-wide thirds (row stride
 * 3D); out is [B, T, D] with head h at column h dh; lse [B, heads, T].
 *
 * Layout of the work. A block of `nw` warps takes one (b, h) and a tile of nw x AT_ROWS
 * rows (queries, or keys for dK/dV); each warp carries AT_ROWS of them at once. The other
 * side streams through shared memory in tiles of AT_TILE = 32, one per lane, so a lane
 * computes the scores of its key (query) against the warp's rows, and the warp's
 * shuffles make the softmax statistics. Head-dim values are split across lanes (d =
 * lane + 32 k, k < AT_DPL) for the products that sum over the tile. Nothing T x T is
 * stored anywhere: the forward keeps a running max and sum per query (online softmax),
 * the backward recomputes P = exp(S scale + key bias - lse) from the saved lse.
 *
 *   forward  (block: queries)  out = sum_j Pd_ij V_j / l_i, lse_i = m_i + log l_i
 *   dQ       (block: queries)  dQ_i = sum_j dS_ij K_j
 *   dK, dV   (block: keys)     dV_j = sum_i Pd_ij dO_i, dK_j = sum_i dS_ij Q_i
 * with dS_ij = P_ij (dPd_ij F_ij - Delta_i) scale, dPd_ij = dO_i . V_j and
 * Delta_i = dO_i . O_i (= sum_j dPd_ij Pd_ij, as the CPU sums it, since O_i = sum_j Pd_ij V_j).
 * Each output element is written by one thread that summed its terms in a fixed order:
 * no atomics, the same bits on every run.
 *
 * Dropout factor of weight (i, j): element ((b heads + h) T + i) T + j of the op's Philox
 * stream at the step (word e % 4 of block e / 4), kept iff unit(u) > p, then 1 / (1 - p):
 * exactly the CPU's cpu_dropout_factors, so both backends drop the same weights.
 *
 * Shared memory stays under the 48 KiB a block gets without opting in (dh <= 128: the
 * backward drops to 2 warps per block above dh 64); cuk_attention_smem says how much. */
#include <math.h>

#include "backend/cuda/k_common.cuh"

#define AT_ROWS 4          /* rows a warp carries */
#define AT_TILE 32         /* streamed rows per shared tile: one per lane */
#define AT_DPL 4           /* head-dim values per lane: dh <= 32 AT_DPL = CUK_ATTN_MAX_DH */
#define AT_MAX_WARPS 4
#define AT_SMEM_LIMIT 49152
#define FULL 0xffffffffu

/* ---------------------------------------------------------------- helpers */

/* Rows [r0, r0 + n) of a [T, ld] matrix's dh-wide column block at base into sh (row
 * pitch `pitch`), rows past T as zeros. All threads of the block take part. */
__device__ __forceinline__ void at_load(float *sh, int pitch, const float *base, int64_t ld, int64_t r0, int n,
                                        int64_t T, int dh) {
    for (int t = threadIdx.x; t < n * dh; t += blockDim.x) {
        int r = t / dh, d = t - r * dh;
        int64_t i = r0 + r;
        sh[r * pitch + d] = i < T ? base[i * ld + d] : 0.0f;
    }
}

/* 0 for a key of sample b that may be attended to, -inf for padding or past T. */
__device__ __forceinline__ float at_key_bias(const cuk_attn_args &a, int64_t b, int64_t j) {
    return j < a.T && (!a.mask || a.mask[b * a.T + j] != 0.0f) ? 0.0f : -INFINITY;
}

/* The dropout factor of Philox element e of the stream (cpu_dropout_factors' rule). */
__device__ __forceinline__ float at_factor(uint64_t e, uint32_t stream, uint32_t step, uint32_t k0, uint32_t k1,
                                           float p, float keep) {
    uint64_t blk = e >> 2;
    uint4 c = dev_philox(make_uint4((uint32_t)blk, (uint32_t)(blk >> 32), stream, step), k0, k1);
    uint32_t w = e & 3u;
    uint32_t u = w == 0 ? c.x : w == 1 ? c.y : w == 2 ? c.z : c.w;
    return dev_unit(u) > p ? keep : 0.0f;
}

typedef struct at_rng {
    int on;
    uint32_t k0, k1, step;
} at_rng;

__device__ __forceinline__ at_rng at_rng_of(const cuk_attn_args &a, const cuda_values *v) {
    at_rng r;
    r.on = a.p > 0.0f && v->training;
    r.k0 = (uint32_t)v->seed;
    r.k1 = (uint32_t)(v->seed >> 32);
    r.step = v->rng_step;
    return r;
}

/* ---------------------------------------------------------------- forward */

/* grid (B heads, query tiles); shared: Q [bq][dh], K [32][dh|1], V [32][dh], key bias [32]. */
__global__ void __launch_bounds__(AT_MAX_WARPS * 32) k_attn_fwd(cuk_attn_args a, const cuda_values *vals) {
    extern __shared__ float sh[];
    const int dh = (int)a.dh, kp = dh | 1, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int bq = (int)(blockDim.x >> 5) * AT_ROWS;
    const int64_t bh = blockIdx.x, b = bh / a.heads, h = bh - b * a.heads, T = a.T, ld = 3 * a.D;
    const int64_t q0 = (int64_t)blockIdx.y * bq, qw = q0 + warp * AT_ROWS;
    float *sQ = sh, *sK = sQ + bq * dh, *sV = sK + AT_TILE * kp, *sB = sV + AT_TILE * dh;
    const float *Q = a.qkv + b * T * ld + h * dh, *K = Q + a.D, *V = Q + 2 * a.D;
    const at_rng rng = at_rng_of(a, vals);
    at_load(sQ, dh, Q, ld, q0, bq, T, dh);
    float m[AT_ROWS], l[AT_ROWS], acc[AT_ROWS][AT_DPL];
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < AT_DPL; k++) acc[r][k] = 0.0f;
    }
    /* causal: keys past the tile's last query are masked for all of it */
    const int64_t kend = a.causal ? (q0 + bq < T ? q0 + bq : T) : T;
    for (int64_t j0 = 0; j0 < kend; j0 += AT_TILE) {
        __syncthreads(); /* the previous tile is consumed */
        at_load(sK, kp, K, ld, j0, AT_TILE, T, dh);
        at_load(sV, dh, V, ld, j0, AT_TILE, T, dh);
        if (threadIdx.x < AT_TILE) sB[threadIdx.x] = at_key_bias(a, b, j0 + threadIdx.x);
        __syncthreads();
        const int nk = kend - j0 < AT_TILE ? (int)(kend - j0) : AT_TILE;
        const int64_t j = j0 + lane;
        float s[AT_ROWS];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) s[r] = 0.0f;
        for (int d = 0; d < dh; d++) {
            float kv = sK[lane * kp + d];
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) s[r] += sQ[(warp * AT_ROWS + r) * dh + d] * kv;
        }
        const float kb = sB[lane];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) {
            const int64_t i = qw + r;
            const int ok = lane < nk && i < T && (!a.causal || j <= i);
            const float x = ok ? s[r] * a.scale + kb : -INFINITY;
            const float mn = fmaxf(m[r], warp_max(x));
            float pr = 0.0f, corr = 1.0f;
            if (mn != -INFINITY) { /* warp-uniform */
                pr = ok ? expf(x - mn) : 0.0f;
                corr = expf(m[r] - mn);
            }
            l[r] = l[r] * corr + warp_sum(pr);
            m[r] = mn;
            if (rng.on && pr != 0.0f)
                pr *= at_factor(((uint64_t)(bh * T + i)) * (uint64_t)T + (uint64_t)j, a.stream, rng.step, rng.k0,
                                rng.k1, a.p, a.keep_scale);
#pragma unroll
            for (int k = 0; k < AT_DPL; k++) acc[r][k] *= corr;
            s[r] = pr;
        }
        for (int jj = 0; jj < nk; jj++) {
            float v[AT_DPL];
#pragma unroll
            for (int k = 0; k < AT_DPL; k++) v[k] = lane + 32 * k < dh ? sV[jj * dh + lane + 32 * k] : 0.0f;
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) {
                float pj = __shfl_sync(FULL, s[r], jj);
#pragma unroll
                for (int k = 0; k < AT_DPL; k++) acc[r][k] += pj * v[k];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        const int64_t i = qw + r;
        if (i >= T) continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f; /* no key to attend to: zeros */
        float *o = a.out + (b * T + i) * a.D + h * dh;
#pragma unroll
        for (int k = 0; k < AT_DPL; k++)
            if (lane + 32 * k < dh) o[lane + 32 * k] = acc[r][k] * inv;
        if (lane == 0) a.lse[bh * T + i] = m[r] == -INFINITY ? -INFINITY : m[r] + logf(l[r]);
    }
}

/* ---------------------------------------------------------------- backward: dQ */

/* Delta_i = dO_i . O_i for the warp's rows (zeros past T), summed by lanes over d. */
__device__ __forceinline__ float at_delta(const cuk_attn_args &a, int64_t b, int64_t h, int64_t i, int lane) {
    float t = 0.0f;
    if (i < a.T) {
        const float *go = a.dy + (b * a.T + i) * a.D + h * a.dh, *o = a.out + (b * a.T + i) * a.D + h * a.dh;
        for (int d = lane; d < (int)a.dh; d += 32) t += go[d] * o[d];
    }
    return warp_sum(t);
}

/* grid (B heads, query tiles); shared: Q, dO [bq][dh], K, V [32][dh|1], key bias [32]. */
__global__ void __launch_bounds__(AT_MAX_WARPS * 32) k_attn_dq(cuk_attn_args a, const cuda_values *vals) {
    extern __shared__ float sh[];
    const int dh = (int)a.dh, kp = dh | 1, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int bq = (int)(blockDim.x >> 5) * AT_ROWS;
    const int64_t bh = blockIdx.x, b = bh / a.heads, h = bh - b * a.heads, T = a.T, ld = 3 * a.D;
    const int64_t q0 = (int64_t)blockIdx.y * bq, qw = q0 + warp * AT_ROWS;
    float *sQ = sh, *sO = sQ + bq * dh, *sK = sO + bq * dh, *sV = sK + AT_TILE * kp, *sB = sV + AT_TILE * kp;
    const float *Q = a.qkv + b * T * ld + h * dh, *K = Q + a.D, *V = Q + 2 * a.D;
    const at_rng rng = at_rng_of(a, vals);
    at_load(sQ, dh, Q, ld, q0, bq, T, dh);
    at_load(sO, dh, a.dy + b * T * a.D + h * dh, a.D, q0, bq, T, dh);
    float delta[AT_ROWS], lse[AT_ROWS], dq[AT_ROWS][AT_DPL];
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        delta[r] = at_delta(a, b, h, qw + r, lane);
        lse[r] = qw + r < T ? a.lse[bh * T + qw + r] : -INFINITY;
#pragma unroll
        for (int k = 0; k < AT_DPL; k++) dq[r][k] = 0.0f;
    }
    const int64_t kend = a.causal ? (q0 + bq < T ? q0 + bq : T) : T;
    for (int64_t j0 = 0; j0 < kend; j0 += AT_TILE) {
        __syncthreads();
        at_load(sK, kp, K, ld, j0, AT_TILE, T, dh);
        at_load(sV, kp, V, ld, j0, AT_TILE, T, dh);
        if (threadIdx.x < AT_TILE) sB[threadIdx.x] = at_key_bias(a, b, j0 + threadIdx.x);
        __syncthreads();
        const int nk = kend - j0 < AT_TILE ? (int)(kend - j0) : AT_TILE;
        const int64_t j = j0 + lane;
        float s[AT_ROWS], dp[AT_ROWS];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) s[r] = dp[r] = 0.0f;
        for (int d = 0; d < dh; d++) {
            float kv = sK[lane * kp + d], vv = sV[lane * kp + d];
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) {
                s[r] += sQ[(warp * AT_ROWS + r) * dh + d] * kv;
                dp[r] += sO[(warp * AT_ROWS + r) * dh + d] * vv;
            }
        }
        const float kb = sB[lane];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) {
            const int64_t i = qw + r;
            const int ok = lane < nk && i < T && (!a.causal || j <= i) && lse[r] != -INFINITY;
            const float pr = ok ? expf(s[r] * a.scale + kb - lse[r]) : 0.0f;
            float f = 1.0f;
            if (rng.on && pr != 0.0f)
                f = at_factor(((uint64_t)(bh * T + i)) * (uint64_t)T + (uint64_t)j, a.stream, rng.step, rng.k0, rng.k1,
                              a.p, a.keep_scale);
            s[r] = pr * (dp[r] * f - delta[r]) * a.scale;
        }
        for (int jj = 0; jj < nk; jj++) {
            float kv[AT_DPL];
#pragma unroll
            for (int k = 0; k < AT_DPL; k++) kv[k] = lane + 32 * k < dh ? sK[jj * kp + lane + 32 * k] : 0.0f;
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) {
                float g = __shfl_sync(FULL, s[r], jj);
#pragma unroll
                for (int k = 0; k < AT_DPL; k++) dq[r][k] += g * kv[k];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        const int64_t i = qw + r;
        if (i >= T) continue;
        float *o = a.dqkv + (b * T + i) * ld + h * dh;
#pragma unroll
        for (int k = 0; k < AT_DPL; k++)
            if (lane + 32 * k < dh) o[lane + 32 * k] = dq[r][k];
    }
}

/* ---------------------------------------------------------------- backward: dK, dV */

/* grid (B heads, key tiles); shared: K, V [bk][dh], Q, dO [32][dh|1], lse, Delta [32]. */
__global__ void __launch_bounds__(AT_MAX_WARPS * 32) k_attn_dkv(cuk_attn_args a, const cuda_values *vals) {
    extern __shared__ float sh[];
    const int dh = (int)a.dh, kp = dh | 1, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nw = (int)(blockDim.x >> 5), bk = nw * AT_ROWS;
    const int64_t bh = blockIdx.x, b = bh / a.heads, h = bh - b * a.heads, T = a.T, ld = 3 * a.D;
    const int64_t k0 = (int64_t)blockIdx.y * bk, kw = k0 + warp * AT_ROWS;
    float *sK = sh, *sV = sK + bk * dh, *sQ = sV + bk * dh, *sO = sQ + AT_TILE * kp, *sL = sO + AT_TILE * kp;
    float *sD = sL + AT_TILE;
    const float *Q = a.qkv + b * T * ld + h * dh, *K = Q + a.D, *V = Q + 2 * a.D;
    const at_rng rng = at_rng_of(a, vals);
    at_load(sK, dh, K, ld, k0, bk, T, dh);
    at_load(sV, dh, V, ld, k0, bk, T, dh);
    float kb[AT_ROWS], dk[AT_ROWS][AT_DPL], dv[AT_ROWS][AT_DPL];
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        kb[r] = at_key_bias(a, b, kw + r);
#pragma unroll
        for (int k = 0; k < AT_DPL; k++) dk[r][k] = dv[r][k] = 0.0f;
    }
    /* causal: queries before the tile's first key see none of it */
    const int64_t istart = a.causal ? k0 : 0;
    for (int64_t i0 = istart; i0 < T; i0 += AT_TILE) {
        __syncthreads();
        at_load(sQ, kp, Q, ld, i0, AT_TILE, T, dh);
        at_load(sO, kp, a.dy + b * T * a.D + h * dh, a.D, i0, AT_TILE, T, dh);
        for (int t = warp; t < AT_TILE; t += nw) { /* each warp the Delta and lse of some rows */
            float dlt = at_delta(a, b, h, i0 + t, lane);
            if (lane == 0) {
                sD[t] = dlt;
                sL[t] = i0 + t < T ? a.lse[bh * T + i0 + t] : -INFINITY;
            }
        }
        __syncthreads();
        const int ni = T - i0 < AT_TILE ? (int)(T - i0) : AT_TILE;
        const int64_t i = i0 + lane;
        const float li = sL[lane], di = sD[lane];
        float s[AT_ROWS], dp[AT_ROWS];
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) s[r] = dp[r] = 0.0f;
        for (int d = 0; d < dh; d++) {
            float qv = sQ[lane * kp + d], ov = sO[lane * kp + d];
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) {
                s[r] += qv * sK[(warp * AT_ROWS + r) * dh + d];
                dp[r] += ov * sV[(warp * AT_ROWS + r) * dh + d];
            }
        }
#pragma unroll
        for (int r = 0; r < AT_ROWS; r++) {
            const int64_t j = kw + r;
            const int ok = lane < ni && j < T && (!a.causal || j <= i) && li != -INFINITY;
            const float pr = ok ? expf(s[r] * a.scale + kb[r] - li) : 0.0f;
            float f = 1.0f;
            if (rng.on && pr != 0.0f)
                f = at_factor(((uint64_t)(bh * T + i)) * (uint64_t)T + (uint64_t)j, a.stream, rng.step, rng.k0, rng.k1,
                              a.p, a.keep_scale);
            s[r] = rng.on ? pr * f : pr;                     /* Pd_ij */
            dp[r] = pr * (dp[r] * f - di) * a.scale;         /* dS_ij */
        }
        for (int ii = 0; ii < ni; ii++) {
            float qv[AT_DPL], ov[AT_DPL];
#pragma unroll
            for (int k = 0; k < AT_DPL; k++) {
                int d = lane + 32 * k;
                qv[k] = d < dh ? sQ[ii * kp + d] : 0.0f;
                ov[k] = d < dh ? sO[ii * kp + d] : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < AT_ROWS; r++) {
                float pd = __shfl_sync(FULL, s[r], ii), g = __shfl_sync(FULL, dp[r], ii);
#pragma unroll
                for (int k = 0; k < AT_DPL; k++) {
                    dv[r][k] += pd * ov[k];
                    dk[r][k] += g * qv[k];
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < AT_ROWS; r++) {
        const int64_t j = kw + r;
        if (j >= T) continue;
        float *o = a.dqkv + (b * T + j) * ld + h * dh;
#pragma unroll
        for (int k = 0; k < AT_DPL; k++) {
            int d = lane + 32 * k;
            if (d < dh) {
                o[a.D + d] = dk[r][k];
                o[2 * a.D + d] = dv[r][k];
            }
        }
    }
}

/* ---------------------------------------------------------------- launchers */

static size_t smem_floats(int kernel, int64_t dh, int nw) {
    int64_t rows = (int64_t)nw * AT_ROWS, kp = dh | 1;
    if (kernel == 0) return (size_t)(rows * dh + AT_TILE * kp + AT_TILE * dh + AT_TILE);
    return (size_t)(2 * rows * dh + 2 * AT_TILE * kp + 2 * AT_TILE);
}

extern "C" size_t cuk_attention_smem(int kernel, int64_t dh, int *warps) {
    int nw = AT_MAX_WARPS;
    while (nw > 1 && smem_floats(kernel, dh, nw) * sizeof(float) > AT_SMEM_LIMIT) nw /= 2;
    if (warps) *warps = nw;
    return smem_floats(kernel, dh, nw) * sizeof(float);
}

static cudaError_t launch(int kernel, const cuk_attn_args *a, const cuda_values *v, cudaStream_t s) {
    int nw;
    size_t smem = cuk_attention_smem(kernel, a->dh, &nw);
    int64_t rows = (int64_t)nw * AT_ROWS, tiles = (a->T + rows - 1) / rows, items = a->B * a->heads;
    if (a->dh < 1 || a->dh > CUK_ATTN_MAX_DH || smem > AT_SMEM_LIMIT || tiles > 65535 || items > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
    /* cudaLaunchKernel rather than <<< >>>: the file then compiles as plain C++ too, which
     * is how tests/backend/replay runs these kernels on the host */
    cuk_attn_args args = *a;
    const cuda_values *vals = v;
    void *params[2] = {&args, &vals};
    const void *fn = kernel == 0 ? (const void *)k_attn_fwd : kernel == 1 ? (const void *)k_attn_dq
                                                                          : (const void *)k_attn_dkv;
    return cudaLaunchKernel(fn, dim3((unsigned)items, (unsigned)tiles), dim3((unsigned)(nw * 32)), params, smem, s);
}

extern "C" cudaError_t cuk_attention(const cuk_attn_args *a, const cuda_values *v, cudaStream_t s) {
    if (a->B * a->T * a->D == 0) return cudaSuccess;
    return launch(0, a, v, s);
}

extern "C" cudaError_t cuk_attention_grad(const cuk_attn_args *a, const cuda_values *v, cudaStream_t s) {
    if (a->B * a->T * a->D == 0) return cudaSuccess;
    cudaError_t e = launch(1, a, v, s);
    return e != cudaSuccess ? e : launch(2, a, v, s);
}
