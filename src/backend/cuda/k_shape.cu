/* Data movement and index ops, matching src/backend/cpu/shape.c and gather.c:
 *   cuk_strided_copy  one kernel behind TRANSPOSE, EXPAND, SLICE, SLICE_GRAD and CONCAT: the
 *                     host describes both sides as strided views of one index space (dims
 *                     collapsed); when the innermost run is contiguous on both sides and
 *                     16-byte aligned, elements move as 16-byte words;
 *   cuk_cast          every dtype pair, through the CPU's conversions (bf16/f16 round to
 *                     nearest even, float to int truncates and saturates, NaN gives 0);
 *   cuk_gather        whole rows, 16 bytes at a time where rows allow;
 *   cuk_scatter_add   blocks over (column tile, range of output rows): each block reads
 *                     every index (in tiles through shared memory) and its threads add the
 *                     rows that fall in its range, each output element in index order:
 *                     deterministic, no atomics, the same sums as the CPU, and parallel over
 *                     rows as well as columns (a thread per column alone left a 64-wide
 *                     embedding gradient to 64 threads);
 *   SINUSOIDAL(_GRAD) with the frequency table computed on the host exactly as the CPU
 *                     does (libm's expf), so both sides take sin/cos of the same arguments. */
#include <math.h>

#include "backend/cuda/k_common.cuh"

/* ---------------------------------------------------------------- strided copy */

#define STRIDED_KERNEL(NAME, T)                                                                 \
    __global__ void NAME(T *dst, const T *src, cuda_strides v, cuk_view_div dv, int64_t n) {     \
        GRID_STRIDE(i, n) {                                                                      \
            int64_t so, dof;                                                                     \
            view_offsets(v, dv, i, so, dof);                                                     \
            dst[dof] = src[so];                                                                  \
        }                                                                                        \
    }
STRIDED_KERNEL(k_copy1, uint8_t)
STRIDED_KERNEL(k_copy2, uint16_t)
STRIDED_KERNEL(k_copy4, uint32_t)
STRIDED_KERNEL(k_copy8, uint2)
STRIDED_KERNEL(k_copy16, uint4)

/* ---------------------------------------------------------------- cast */

__device__ __forceinline__ double cast_load(const void *p, int t, int64_t i) {
    switch (t) {
    case BRISK_F32: return ((const float *)p)[i];
    case BRISK_I32: return ((const int32_t *)p)[i];
    case BRISK_F16: return dev_f16_to_f32(((const uint16_t *)p)[i]);
    case BRISK_BF16: return dev_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const uint8_t *)p)[i];
    }
}

__device__ __forceinline__ double cast_sat(double v, double lo, double hi) {
    if (v != v) return 0.0;
    v = trunc(v);
    return v < lo ? lo : v > hi ? hi : v;
}

__device__ __forceinline__ void cast_store(void *p, int t, int64_t i, double v) {
    switch (t) {
    case BRISK_F32: ((float *)p)[i] = (float)v; break;
    case BRISK_I32: ((int32_t *)p)[i] = (int32_t)cast_sat(v, -2147483648.0, 2147483647.0); break;
    case BRISK_F16: ((uint16_t *)p)[i] = dev_f32_to_f16((float)v); break;
    case BRISK_BF16: ((uint16_t *)p)[i] = dev_f32_to_bf16((float)v); break;
    default: ((uint8_t *)p)[i] = (uint8_t)cast_sat(v, 0.0, 255.0); break;
    }
}

__global__ void k_cast(const void *x, int from, void *o, int to, int64_t n) {
    GRID_STRIDE(i, n) cast_store(o, to, i, cast_load(x, from, i));
}

/* ---------------------------------------------------------------- gather / scatter */

#define GATHER_KERNEL(NAME, T)                                                                    \
    __global__ void NAME(const T *table, const int32_t *idx, T *out, int64_t nidx, int64_t v,     \
                         int64_t units, cuk_div du, int fast, cuda_errors *e, int node) {         \
        GRID_STRIDE(i, nidx * units) {                                                            \
            uint32_t q32 = 0;                                                                     \
            int64_t u = fast ? (int64_t)cuk_div_qr(du, (uint32_t)i, &q32) : i % units;            \
            int64_t row = fast ? (int64_t)q32 : i / units;                                        \
            int32_t k = idx[row];                                                                 \
            if (k < 0 || (int64_t)k >= v) {                                                       \
                if (u == 0) dev_report(e, CUK_ERR_INDEX, node, row, k, v);                        \
                memset(&out[i], 0, sizeof(T));                                                    \
            } else {                                                                              \
                out[i] = table[(int64_t)k * units + u];                                           \
            }                                                                                     \
        }                                                                                         \
    }
GATHER_KERNEL(k_gather1, uint8_t)
GATHER_KERNEL(k_gather4, uint32_t)
GATHER_KERNEL(k_gather16, uint4)

#define SCATTER_TILE 512
#define SCATTER_BLOCKS 512 /* enough blocks to fill the GPU; each one reads every index */

__global__ void k_scatter_add(const float *dy, const int32_t *idx, float *out, int64_t nidx, int64_t v, int64_t d,
                              int64_t rows_per, cuda_errors *e, int node) {
    __shared__ int32_t tile[SCATTER_TILE];
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * rows_per, r1 = r0 + rows_per < v ? r0 + rows_per : v;
    int col = j < d, reporter = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0;
    if (col)
        for (int64_t r = r0; r < r1; r++) out[r * d + j] = 0.0f;
    for (int64_t t0 = 0; t0 < nidx; t0 += SCATTER_TILE) {
        int cnt = nidx - t0 < SCATTER_TILE ? (int)(nidx - t0) : SCATTER_TILE;
        __syncthreads();
        for (int k = threadIdx.x; k < cnt; k += blockDim.x) tile[k] = idx[t0 + k];
        __syncthreads();
        for (int k = 0; k < cnt; k++) {
            int64_t row = tile[k]; /* the same for the whole block: no divergence */
            if (row < 0 || row >= v) {
                if (reporter) dev_report(e, CUK_ERR_INDEX, node, t0 + k, row, v);
                continue;
            }
            if (row >= r0 && row < r1 && col) out[row * d + j] += dy[(t0 + k) * d + j];
        }
    }
}

/* ---------------------------------------------------------------- sinusoidal embedding */

__device__ __forceinline__ float t_at(const void *t, int t_i32, int64_t r) {
    return t_i32 ? (float)((const int32_t *)t)[r] : ((const float *)t)[r];
}

__global__ void k_sinusoidal(const void *t, int t_i32, const float *freq, float *out, int64_t n, int64_t dim,
                             cuk_div dh, int fast) {
    int64_t half = dim / 2;
    GRID_STRIDE(i, n * half) {
        uint32_t q32 = 0;
        int64_t k = fast ? (int64_t)cuk_div_qr(dh, (uint32_t)i, &q32) : i % half;
        int64_t r = fast ? (int64_t)q32 : i / half;
        float a = t_at(t, t_i32, r) * freq[k];
        out[r * dim + k] = sinf(a);
        out[r * dim + half + k] = cosf(a);
    }
}

/* tpr lanes (a power of two <= 32) per row of dim / 2 terms: several rows per warp for the
 * short embeddings diffusion models use. Lanes past the last row stay for the shuffles. */
__global__ void k_sinusoidal_grad(const float *dy, const void *t, int t_i32, const float *freq, float *out, int64_t n,
                                  int64_t dim, int tpr) {
    int64_t r = (int64_t)blockIdx.x * (CUK_THREADS / tpr) + threadIdx.x / tpr;
    int lane = (int)(threadIdx.x & (tpr - 1)), valid = r < n;
    int64_t half = valid ? dim / 2 : 0;
    if (!valid) r = 0;
    float tv = valid ? t_at(t, t_i32, r) : 0.0f;
    double s = 0.0;
    for (int64_t k = lane; k < half; k += tpr) {
        float a = tv * freq[k];
        s += (double)freq[k] * ((double)dy[r * dim + k] * cosf(a) - (double)dy[r * dim + half + k] * sinf(a));
    }
    for (int o = tpr >> 1; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0 && valid) out[r] = (float)s;
}

extern "C" {

cudaError_t cuk_strided_copy(void *dst, const void *src, size_t esize, const cuda_strides *v, cudaStream_t s) {
    cuda_strides w = *v;
    int64_t n = 1;
    for (int k = 0; k < w.nd; k++) n *= w.d[k];
    if (n <= 0) return cudaSuccess;
    /* 16-byte words when the innermost run is contiguous on both sides and every offset
     * stays a multiple of 16 bytes */
    int last = w.nd - 1;
    if (esize < 16 && w.nd > 0 && w.s[0][last] == 1 && w.s[1][last] == 1 && (w.d[last] * esize) % 16 == 0 &&
        cuk_aligned16(dst) && cuk_aligned16(src)) {
        int ok = 1;
        for (int k = 0; k < last; k++) ok &= (w.s[0][k] * esize) % 16 == 0 && (w.s[1][k] * esize) % 16 == 0;
        if (ok) {
            int64_t per = 16 / (int64_t)esize;
            w.d[last] /= per;
            for (int k = 0; k < last; k++) w.s[0][k] /= per, w.s[1][k] /= per;
            n /= per;
            esize = 16;
        }
    }
    unsigned b = cuk_blocks(n, 4);
    cuk_view_div dv = cuk_view_div_make(&w, n);
    switch (esize) {
    case 1: k_copy1<<<b, CUK_THREADS, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, w, dv, n); break;
    case 2: k_copy2<<<b, CUK_THREADS, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, w, dv, n); break;
    case 4: k_copy4<<<b, CUK_THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, w, dv, n); break;
    case 8: k_copy8<<<b, CUK_THREADS, 0, s>>>((uint2 *)dst, (const uint2 *)src, w, dv, n); break;
    case 16: k_copy16<<<b, CUK_THREADS, 0, s>>>((uint4 *)dst, (const uint4 *)src, w, dv, n); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t cuk_cast(const void *x, int from, void *out, int to, int64_t n, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_cast<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(x, from, out, to, n);
    return cudaGetLastError();
}

cudaError_t cuk_gather(const void *table, const int32_t *idx, void *out, int64_t nidx, int64_t v,
                       size_t row_bytes, cuda_errors *e, int node, cudaStream_t s) {
    if (nidx <= 0 || row_bytes == 0) return cudaSuccess;
#define DIVS(u) cuk_div_make(nidx * (u) <= CUK_FAST_MAX ? (uint32_t)(u) : 1u), nidx * (u) <= CUK_FAST_MAX
    if (row_bytes % 16 == 0 && cuk_aligned16(table) && cuk_aligned16(out)) {
        int64_t u = (int64_t)(row_bytes / 16);
        k_gather16<<<cuk_blocks(nidx * u, 2), CUK_THREADS, 0, s>>>((const uint4 *)table, idx, (uint4 *)out, nidx, v, u,
                                                                   DIVS(u), e, node);
    } else if (row_bytes % 4 == 0 && ((uintptr_t)table & 3u) == 0 && ((uintptr_t)out & 3u) == 0) {
        int64_t u = (int64_t)(row_bytes / 4);
        k_gather4<<<cuk_blocks(nidx * u, 4), CUK_THREADS, 0, s>>>((const uint32_t *)table, idx, (uint32_t *)out, nidx,
                                                                  v, u, DIVS(u), e, node);
    } else {
        int64_t u = (int64_t)row_bytes;
        k_gather1<<<cuk_blocks(nidx * u, 4), CUK_THREADS, 0, s>>>((const uint8_t *)table, idx, (uint8_t *)out, nidx,
                                                                  v, u, DIVS(u), e, node);
    }
#undef DIVS
    return cudaGetLastError();
}

cudaError_t cuk_scatter_add(const float *dy, const int32_t *idx, float *out, int64_t nidx, int64_t v, int64_t d,
                            cuda_errors *e, int node, cudaStream_t s) {
    if (d <= 0 || v <= 0) return cudaSuccess;
    unsigned threads = d <= 32 ? 32 : d <= 64 ? 64 : 128;
    int64_t tiles = (d + threads - 1) / threads, groups = (SCATTER_BLOCKS + tiles - 1) / tiles;
    if (groups > v) groups = v;
    if (groups > 65535) groups = 65535;
    int64_t rows_per = (v + groups - 1) / groups;
    groups = (v + rows_per - 1) / rows_per;
    dim3 grid((unsigned)tiles, (unsigned)groups);
    k_scatter_add<<<grid, threads, 0, s>>>(dy, idx, out, nidx, v, d, rows_per, e, node);
    return cudaGetLastError();
}

cudaError_t cuk_sinusoidal(const void *t, int t_i32, const float *freq, float *out, int64_t n, int64_t dim,
                           cudaStream_t s) {
    if (n <= 0 || dim <= 0) return cudaSuccess;
    int64_t half = dim / 2, fast = n * half <= CUK_FAST_MAX;
    if (half == 0) return cudaSuccess;
    k_sinusoidal<<<cuk_blocks(n * half, 4), CUK_THREADS, 0, s>>>(t, t_i32, freq, out, n, dim,
                                                                 cuk_div_make(fast ? (uint32_t)half : 1u), (int)fast);
    return cudaGetLastError();
}

cudaError_t cuk_sinusoidal_grad(const float *dy, const void *t, int t_i32, const float *freq, float *out,
                                int64_t n, int64_t dim, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    int tpr = 1;
    while (tpr < 32 && (int64_t)tpr * 4 < dim / 2) tpr <<= 1;
    int per = CUK_THREADS / tpr;
    k_sinusoidal_grad<<<(unsigned)((n + per - 1) / per), CUK_THREADS, 0, s>>>(dy, t, t_i32, freq, out, n, dim, tpr);
    return cudaGetLastError();
}

} /* extern "C" */
