/* The conversions at a cuDNN convolution's boundaries (cudnn_conv.c, conv_layout.h): a
 * tensor [N, C, S] (NCHW, S = H W) or [N, S, C] (NHWC) of fp32, bf16 or fp16 copied into
 * the other (or the same) layout and type in one pass. A transpose goes through a 32x33
 * shared tile per (n, 32 channels, 32 pixels), so both the reads and the writes are
 * coalesced; a same-layout conversion is a plain elementwise cast. Rounding to 16 bits is
 * core/dtype.c's (nearest even), as the GEMM operands' casts. */
#include "backend/cuda/k_common.cuh"

#define TILE 32

__device__ __forceinline__ float load_as_f32(const void *p, int64_t i, int t) {
    if (t == 0) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == 1 ? dev_bf16_to_f32(h) : dev_f16_to_f32(h);
}

__device__ __forceinline__ void store_from_f32(void *p, int64_t i, int t, float v) {
    if (t == 0) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == 1 ? dev_f32_to_bf16(v) : dev_f32_to_f16(v);
}

/* Same layout: elementwise. */
__global__ void k_conv_cast(const void *src, int st, void *dst, int dt, int64_t n) {
    GRID_STRIDE(i, n) store_from_f32(dst, i, dt, load_as_f32(src, i, st));
}

/* [N, R, K] -> [N, K, R] (R, K = C, S for NCHW -> NHWC; S, C the other way). Block
 * (TILE, 8); grid (K tiles, R tiles, N) with N folded into z up to 65535 and looped. */
__global__ void k_conv_transpose(const void *src, int st, void *dst, int dt, int64_t N, int64_t R, int64_t K) {
    __shared__ float tile[TILE][TILE + 1];
    int64_t k0 = (int64_t)blockIdx.x * TILE, r0 = (int64_t)blockIdx.y * TILE;
    for (int64_t n = blockIdx.z; n < N; n += gridDim.z) {
        int64_t base = n * R * K;
        for (int j = threadIdx.y; j < TILE; j += blockDim.y) {
            int64_t r = r0 + j, k = k0 + threadIdx.x;
            if (r < R && k < K) tile[j][threadIdx.x] = load_as_f32(src, base + r * K + k, st);
        }
        __syncthreads();
        for (int j = threadIdx.y; j < TILE; j += blockDim.y) {
            int64_t k = k0 + j, r = r0 + threadIdx.x;
            if (r < R && k < K) store_from_f32(dst, base + k * R + r, dt, tile[threadIdx.x][j]);
        }
        __syncthreads();
    }
}

cudaError_t cuk_conv_relayout(const void *src, int src_type, int src_nhwc, void *dst, int dst_type, int dst_nhwc,
                              int64_t N, int64_t C, int64_t S, cudaStream_t s) {
    int64_t n = N * C * S;
    if (n <= 0) return cudaSuccess;
    if ((src_nhwc != 0) == (dst_nhwc != 0) || C == 1 || S == 1) {
        k_conv_cast<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(src, src_type, dst, dst_type, n);
        return cudaGetLastError();
    }
    int64_t R = src_nhwc ? S : C, K = src_nhwc ? C : S;
    int64_t gx = (K + TILE - 1) / TILE, gy = (R + TILE - 1) / TILE;
    if (gx > 2147483647 || gy > 65535) return cudaErrorInvalidValue;
    dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)(N < 65535 ? N : 65535)), block(TILE, 8);
    k_conv_transpose<<<grid, block, 0, s>>>(src, src_type, dst, dst_type, N, R, K);
    return cudaGetLastError();
}
