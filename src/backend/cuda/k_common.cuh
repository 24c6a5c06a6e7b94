/* Device helpers shared by the kernel files: launch geometry, warp and block sums, the
 * activation math (the same formulas as the CPU backend's elementwise.c), Philox 4x32-10
 * (bit-identical to core/philox.c), and the 16-bit float conversions of core/dtype.c. */
#ifndef BRISK_CUDA_K_COMMON_CUH
#define BRISK_CUDA_K_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "backend/cuda/fastdiv.h"
#include "backend/cuda/kernels.h"
#include "brisk/graph.h"

#define CUK_THREADS 256

/* Blocks for a grid-stride loop over n items of `per` items per thread. */
static inline unsigned cuk_blocks(int64_t n, int per) {
    int64_t b = (n + (int64_t)CUK_THREADS * per - 1) / ((int64_t)CUK_THREADS * per);
    if (b < 1) b = 1;
    if (b > 65536) b = 65536;
    return (unsigned)b;
}

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static inline int cuk_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---------------------------------------------------------------- strided views */

/* A view's dims as divisors (fastdiv.h), built on the host; fast when its n elements
 * fit 31 bits, so the per-element index math is 32-bit. */
typedef struct cuk_view_div {
    int fast;
    cuk_div d[CUK_MAX_DIMS];
} cuk_view_div;

static inline cuk_view_div cuk_view_div_make(const cuda_strides *v, int64_t n) {
    cuk_view_div dv;
    dv.fast = n <= CUK_FAST_MAX;
    for (int k = 0; k < CUK_MAX_DIMS; k++) dv.d[k] = cuk_div_make(k < v->nd && dv.fast ? (uint32_t)v->d[k] : 1u);
    return dv;
}

/* Element i of the view: its offset in operands 0 and 1 (v.s[0], v.s[1]). */
__device__ __forceinline__ void view_offsets(const cuda_strides &v, const cuk_view_div &dv, int64_t i, int64_t &o0,
                                             int64_t &o1) {
    o0 = o1 = 0;
    if (dv.fast) {
        uint32_t r = (uint32_t)i, q;
        for (int k = v.nd - 1; k >= 0; k--) {
            uint32_t m = cuk_div_qr(dv.d[k], r, &q);
            r = q;
            o0 += (int64_t)m * v.s[0][k];
            o1 += (int64_t)m * v.s[1][k];
        }
        return;
    }
    int64_t r = i;
    for (int k = v.nd - 1; k >= 0; k--) {
        int64_t q = r % v.d[k];
        r /= v.d[k];
        o0 += q * v.s[0][k];
        o1 += q * v.s[1][k];
    }
}

/* ---------------------------------------------------------------- sums */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over a block of up to 1024 threads, in a fixed order; every thread gets the result.
 * sh: 32 doubles of shared memory. */
__device__ __forceinline__ double block_sum_d(double v, double *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : 0.0;
    return warp_sum_d(t);
}

/* Records the first error a kernel finds; the host reads it at its next synchronisation. */
static __device__ __forceinline__ void dev_report(cuda_errors *e, int code, int node, long long pos,
                                                  long long value, long long limit) {
    if (atomicCAS(&e->code, 0, -1) == 0) { /* the first reporter fills the record */
        e->node = node;
        e->pos = pos;
        e->value = value;
        e->limit = limit;
        __threadfence();
        atomicExch(&e->code, code);
    }
}

/* ---------------------------------------------------------------- activations */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f
#define INV_SQRT_2PI 0.3989422804014327f

__device__ __forceinline__ float dev_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* P(N(0,1) <= x) from erfc so that the x < 0 tail keeps its relative accuracy */
__device__ __forceinline__ float dev_phi(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }

__device__ __forceinline__ float dev_act(int op, int gelu_tanh, float v) {
    switch (op) {
    case BRISK_OP_RELU: return v < 0.0f ? 0.0f : v; /* keeps NaN, as torch.relu */
    case BRISK_OP_GELU:
        return gelu_tanh ? v * dev_sigmoid(2.0f * GELU_K * (v + GELU_C * v * v * v)) : v * dev_phi(v);
    case BRISK_OP_SILU: return v / (1.0f + expf(-v));
    case BRISK_OP_TANH: return tanhf(v);
    case BRISK_OP_SIGMOID: return dev_sigmoid(v);
    default: return v;
    }
}

/* The elementwise math ops and the activations with a parameter (src/backend/cpu/unary.c's
 * formulas, with CUDA's libm): a, b are the op's attr.f0, f1. */
__device__ __forceinline__ float dev_pow_const(float x, float p) {
    /* PyTorch's special exponents (its pow kernel takes them apart from powf) */
    if (p == 2.0f) return x * x;
    if (p == 3.0f) return x * x * x;
    if (p == 1.0f) return x;
    if (p == 0.0f) return 1.0f;
    if (p == 0.5f) return sqrtf(x);
    if (p == -0.5f) return 1.0f / sqrtf(x);
    if (p == -1.0f) return 1.0f / x;
    if (p == -2.0f) return 1.0f / (x * x);
    return powf(x, p);
}

__device__ __forceinline__ float dev_math(int op, float a, float b, float v) {
    switch (op) {
    case BRISK_OP_EXP: return expf(v);
    case BRISK_OP_LOG: return logf(v);
    case BRISK_OP_SQRT: return sqrtf(v);
    case BRISK_OP_ABS: return fabsf(v);
    case BRISK_OP_ERF: return erff(v);
    case BRISK_OP_POW: return dev_pow_const(v, a);
    case BRISK_OP_CLAMP: {
        float u = v < a ? a : v; /* keeps a NaN */
        return u > b ? b : u;
    }
    case BRISK_OP_LEAKY_RELU: return v > 0.0f ? v : v * a;
    case BRISK_OP_ELU: return v > 0.0f ? v : (expf(v) - 1.0f) * a;
    case BRISK_OP_SOFTPLUS: {
        float z = v * a; /* beta x; past 30, z + log1p(e^-z) rounds to z (cpu_softplus) */
        return z > b ? v : (z > 30.0f ? z : log1pf(expf(z))) / a;
    }
    default: return v;
    }
}

/* ---------------------------------------------------------------- Philox 4x32-10 */

__device__ __forceinline__ uint4 dev_philox(uint4 c, uint32_t k0, uint32_t k1) {
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t lo0 = c.x * 0xD2511F53u, hi0 = __umulhi(c.x, 0xD2511F53u);
        uint32_t lo1 = c.z * 0xCD9E8D57u, hi1 = __umulhi(c.z, 0xCD9E8D57u);
        c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

/* core.h's brisk_u32_to_unit: (0, 1], exact in f32 */
__device__ __forceinline__ float dev_unit(uint32_t x) { return ((float)(x >> 8) + 1.0f) * (1.0f / 16777216.0f); }

/* ---------------------------------------------------------------- 16-bit floats (core/dtype.c) */

__device__ __forceinline__ float dev_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t dev_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ __forceinline__ float dev_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (ex == 0) {
        if (man == 0) return __uint_as_float(sign);
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (ex == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    return __uint_as_float(sign | ((ex + 112) << 23) | (man << 13));
}

__device__ __forceinline__ uint16_t dev_f32_to_f16(float f) {
    uint32_t u = __float_as_uint(f), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        float v = __fmul_rn(__uint_as_float(a), 16777216.0f);
        uint32_t m = (uint32_t)v;
        float rem = __fsub_rn(v, (float)m);
        if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

#endif
