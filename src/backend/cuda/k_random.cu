/* Random ops and dropout from Philox 4x32-10 under core.h's convention (key = seed,
 * counter = {block lo, block hi, stream, rng_step}; element i takes word i % 4 of block
 * i / 4), one thread per block of 4, matching src/backend/cpu/random.c:
 *   DROPOUT       kept iff unit(u) > p, then x * scale (scale = 1 / (1 - p) in f32 on the
 *                 host): the words, the comparison and the product are exact, so masks and
 *                 outputs are bit-identical to the CPU's. Identity when values.training == 0
 *                 or p == 0 (decided on the device: a captured graph serves both).
 *   RANDN         Box-Muller on word pairs with CUDA's logf/sqrtf/cosf/sinf: the uniforms
 *                 are identical, the normals may differ from glibc's in the last ulps.
 *   RAND_UNIFORM  a + (b - a)(1 - unit(u)), below b (FMA contraction may move the last ulp).
 *   RANDINT       lo + (u * range) >> 32: bit-identical.
 * seed and rng_step are read from the per-step values, so replays draw fresh numbers. */
#include <math.h>

#include "backend/cuda/k_common.cuh"

__global__ void k_random(int op, const float *x, void *out, int64_t n, uint32_t stream, float p, float scale,
                         float a, float b, int64_t lo, uint64_t range, const cuda_values *vals) {
    int64_t blocks = (n + 3) / 4;
    uint64_t seed = vals->seed;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32), step = vals->rng_step;
    int identity = op == BRISK_OP_DROPOUT && (!vals->training || p == 0.0f);
    GRID_STRIDE(blk, blocks) {
        int64_t e0 = blk * 4;
        int ne = n - e0 < 4 ? (int)(n - e0) : 4;
        if (identity) {
            for (int w = 0; w < ne; w++) ((float *)out)[e0 + w] = x[e0 + w];
            continue;
        }
        uint4 c = dev_philox(make_uint4((uint32_t)blk, (uint32_t)((uint64_t)blk >> 32), stream, step), k0, k1);
        uint32_t u[4] = {c.x, c.y, c.z, c.w};
        if (op == BRISK_OP_RANDN) {
            float v[4];
            for (int i = 0; i < 4; i += 2) {
                float r = sqrtf(-2.0f * logf(dev_unit(u[i])));
                float th = 6.2831853071795864f * dev_unit(u[i + 1]);
                v[i] = r * cosf(th);
                v[i + 1] = r * sinf(th);
            }
            for (int w = 0; w < ne; w++) ((float *)out)[e0 + w] = v[w];
        } else if (op == BRISK_OP_DROPOUT) {
            for (int w = 0; w < ne; w++) ((float *)out)[e0 + w] = dev_unit(u[w]) > p ? x[e0 + w] * scale : 0.0f;
        } else if (op == BRISK_OP_RAND_UNIFORM) {
            for (int w = 0; w < ne; w++) {
                float v = a + (b - a) * (1.0f - dev_unit(u[w]));
                ((float *)out)[e0 + w] = v < b ? v : nextafterf(b, a);
            }
        } else { /* RANDINT */
            for (int w = 0; w < ne; w++)
                ((int32_t *)out)[e0 + w] = (int32_t)(lo + (int64_t)(((uint64_t)u[w] * range) >> 32));
        }
    }
}

extern "C" cudaError_t cuk_random(int op, const float *x, void *out, int64_t n, uint32_t stream, float p,
                                  float scale, float a, float b, int64_t lo, uint64_t range, const cuda_values *v,
                                  cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_random<<<cuk_blocks((n + 3) / 4, 1), CUK_THREADS, 0, s>>>(op, x, out, n, stream, p, scale, a, b, lo, range, v);
    return cudaGetLastError();
}
