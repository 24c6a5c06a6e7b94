/* Elementwise kernels, f32, C-contiguous, matching src/backend/cpu/elementwise.c and unary.c:
 *   binary ADD/SUB/MUL/DIV, MINIMUM/MAXIMUM, POW_XY with NumPy broadcasting (host collapses
 *   dims to a strided view) and BINARY_GRAD, BIAS_ADD (optionally fused with ReLU/GELU: the
 *   fallback of a GEMM epilogue), SCALE, the activations and the elementwise math ops,
 *   ACT_GRAD, GRAD_ACCUM, MSE_GRAD,
 * and the step plumbing: per-step values, GEMM operand casts to bf16/fp16, input staging,
 * the loss log. Contiguous equal-shape operands go 4 floats (16 bytes) per load when the
 * pointers and length allow. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/k_common.cuh"

extern "C" {

__global__ void k_set_values(cuda_values *d, cuda_values v) { *d = v; }

cudaError_t cuk_set_values(cuda_values *dst, cuda_values v, cudaStream_t s) {
    k_set_values<<<1, 1, 0, s>>>(dst, v);
    return cudaGetLastError();
}

__global__ void k_empty(void) {}

cudaError_t cuk_empty(cudaStream_t s) {
    k_empty<<<1, 1, 0, s>>>();
    return cudaGetLastError();
}

__global__ void k_fill(float *x, float value, int64_t n) {
    GRID_STRIDE(i, n) x[i] = value;
}

cudaError_t cuk_fill(float *x, float value, int64_t n, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_fill<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(x, value, n);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- binary */

__device__ __forceinline__ float dev_binary(int op, float a, float c) {
    switch (op) {
    case BRISK_OP_ADD: return a + c;
    case BRISK_OP_SUB: return a - c;
    case BRISK_OP_MUL: return a * c;
    /* max and min keep a NaN of either side, as torch.maximum (fmaxf would drop it) */
    case BRISK_OP_MAXIMUM: return a != a ? a : a > c ? a : c;
    case BRISK_OP_MINIMUM: return a != a ? a : a < c ? a : c;
    case BRISK_OP_POW_XY: return powf(a, c);
    default: return a / c;
    }
}

/* d out / d input `which` times d: PyTorch's formulas, as the CPU's binary_grad */
__device__ __forceinline__ float dev_binary_grad(int kind, int which, float d, float a, float c) {
    switch (kind) {
    case BRISK_OP_MAXIMUM: return (which ? a > c : a < c) ? 0.0f : a == c ? d * 0.5f : d;
    case BRISK_OP_MINIMUM: return (which ? a < c : a > c) ? 0.0f : a == c ? d * 0.5f : d;
    default:
        if (which == 0) return c == 0.0f ? 0.0f : d * (c * powf(a, c - 1.0f));
        return a == 0.0f && c >= 0.0f ? 0.0f : d * (powf(a, c) * logf(a));
    }
}

__global__ void k_binary_same4(int op, const float4 *x, const float4 *y, float4 *o, int64_t n4) {
    GRID_STRIDE(i, n4) {
        float4 a = x[i], c = y[i];
        o[i] = make_float4(dev_binary(op, a.x, c.x), dev_binary(op, a.y, c.y), dev_binary(op, a.z, c.z),
                           dev_binary(op, a.w, c.w));
    }
}

/* general view: element i of the output, offsets per operand from the strides */
__global__ void k_binary(int op, const float *x, const float *y, float *o, cuda_strides v, cuk_view_div dv,
                         int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t ox, oy;
        view_offsets(v, dv, i, ox, oy);
        o[i] = dev_binary(op, x[ox], y[oy]);
    }
}

/* dy and out are contiguous in the view's (the output's) index space; x and y broadcast */
__global__ void k_binary_grad(int kind, int which, const float *dy, const float *x, const float *y, float *o,
                              cuda_strides v, cuk_view_div dv, int64_t n) {
    GRID_STRIDE(i, n) {
        int64_t ox, oy;
        view_offsets(v, dv, i, ox, oy);
        o[i] = dev_binary_grad(kind, which, dy[i], x[ox], y[oy]);
    }
}

cudaError_t cuk_binary_grad(int kind, int which, const float *dy, const float *x, const float *y, float *out,
                            const cuda_strides *v, int64_t n, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_binary_grad<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(kind, which, dy, x, y, out, *v, cuk_view_div_make(v, n), n);
    return cudaGetLastError();
}

cudaError_t cuk_binary(int op, const float *x, const float *y, float *out, const cuda_strides *v, int64_t n,
                       cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    int same = v->nd == 1 && v->s[0][0] == 1 && v->s[1][0] == 1;
    if (same && n % 4 == 0 && cuk_aligned16(x) && cuk_aligned16(y) && cuk_aligned16(out))
        k_binary_same4<<<cuk_blocks(n / 4, 2), CUK_THREADS, 0, s>>>(op, (const float4 *)x, (const float4 *)y,
                                                                   (float4 *)out, n / 4);
    else
        k_binary<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(op, x, y, out, *v, cuk_view_div_make(v, n), n);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- bias (+ activation) */

/* the bias column of element i: 32-bit when the count allows (fastdiv.h) */
__device__ __forceinline__ int64_t col_of(int64_t i, int64_t cols, cuk_div dc, int fast) {
    uint32_t q;
    return fast ? (int64_t)cuk_div_qr(dc, (uint32_t)i, &q) : i % cols;
}

__global__ void k_bias_act4(const float4 *x, const float4 *b, float4 *o, int64_t n4, int64_t cols4, cuk_div dc,
                            int fast, int act, int gt) {
    GRID_STRIDE(i, n4) {
        float4 a = x[i], c = b[col_of(i, cols4, dc, fast)];
        o[i] = make_float4(dev_act(act, gt, a.x + c.x), dev_act(act, gt, a.y + c.y), dev_act(act, gt, a.z + c.z),
                           dev_act(act, gt, a.w + c.w));
    }
}

__global__ void k_bias_act(const float *x, const float *b, float *o, int64_t n, int64_t cols, cuk_div dc, int fast,
                           int act, int gt) {
    GRID_STRIDE(i, n) o[i] = dev_act(act, gt, x[i] + b[col_of(i, cols, dc, fast)]);
}

cudaError_t cuk_bias_act(const float *x, const float *b, float *out, int64_t rows, int64_t n, int act,
                         int gelu_tanh, cudaStream_t s) {
    int64_t total = rows * n;
    if (total <= 0) return cudaSuccess;
    int fast = total <= CUK_FAST_MAX;
    if (n % 4 == 0 && cuk_aligned16(x) && cuk_aligned16(b) && cuk_aligned16(out))
        k_bias_act4<<<cuk_blocks(total / 4, 2), CUK_THREADS, 0, s>>>(
            (const float4 *)x, (const float4 *)b, (float4 *)out, total / 4, n / 4,
            cuk_div_make(fast ? (uint32_t)(n / 4) : 1u), fast, act, gelu_tanh);
    else
        k_bias_act<<<cuk_blocks(total, 4), CUK_THREADS, 0, s>>>(x, b, out, total, n, cuk_div_make(fast ? (uint32_t)n : 1u),
                                                                fast, act, gelu_tanh);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- unary */

__device__ __forceinline__ float dev_unary(int op, int gt, float a, float b, float v) {
    switch (op) {
    case BRISK_OP_SCALE: return a * v + b;
    case BRISK_OP_RELU: case BRISK_OP_GELU: case BRISK_OP_SILU: case BRISK_OP_TANH: case BRISK_OP_SIGMOID:
        return dev_act(op, gt, v);
    default: return dev_math(op, a, b, v);
    }
}

__global__ void k_unary4(int op, int gt, float a, float b, const float4 *x, float4 *o, int64_t n4) {
    GRID_STRIDE(i, n4) {
        float4 v = x[i];
        o[i] = make_float4(dev_unary(op, gt, a, b, v.x), dev_unary(op, gt, a, b, v.y), dev_unary(op, gt, a, b, v.z),
                           dev_unary(op, gt, a, b, v.w));
    }
}

__global__ void k_unary(int op, int gt, float a, float b, const float *x, float *o, int64_t n) {
    GRID_STRIDE(i, n) o[i] = dev_unary(op, gt, a, b, x[i]);
}

cudaError_t cuk_unary(int op, int gelu_tanh, float a, float b, const float *x, float *out, int64_t n,
                      cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    if (n % 4 == 0 && cuk_aligned16(x) && cuk_aligned16(out))
        k_unary4<<<cuk_blocks(n / 4, 2), CUK_THREADS, 0, s>>>(op, gelu_tanh, a, b, (const float4 *)x, (float4 *)out,
                                                              n / 4);
    else
        k_unary<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(op, gelu_tanh, a, b, x, out, n);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- activation gradients */

/* dy * f'(x), as the CPU's cpu_act_grad_span (PyTorch's backward formulas); a, b the
 * forward's attributes */
__device__ __forceinline__ float dev_act_grad(int kind, int gt, float a, float b, float dy, float x, float y) {
    switch (kind) {
    case BRISK_OP_LEAKY_RELU: return x > 0.0f ? dy : dy * a;
    case BRISK_OP_ELU: return x > 0.0f ? dy : dy * a * expf(x);
    case BRISK_OP_SOFTPLUS: return x * a > b ? dy : dy * dev_sigmoid(x * a);
    case BRISK_OP_EXP: return dy * y;
    case BRISK_OP_LOG: return dy / x;
    case BRISK_OP_SQRT: return dy / (2.0f * y);
    case BRISK_OP_ABS: return x > 0.0f ? dy : x < 0.0f ? -dy : 0.0f;
    case BRISK_OP_ERF: return dy * (1.1283791670955126f * expf(-x * x)); /* 2/sqrt(pi) e^(-x^2) */
    case BRISK_OP_POW: return a == 0.0f ? 0.0f : dy * (a * dev_pow_const(x, a - 1.0f));
    case BRISK_OP_CLAMP: return x >= a && x <= b ? dy : 0.0f;
    case BRISK_OP_RELU: return y > 0.0f ? dy : 0.0f; /* y = relu(x) > 0 iff x > 0, NaN too */
    case BRISK_OP_GELU:
        if (gt) {
            float x2 = x * x, sg = dev_sigmoid(2.0f * GELU_K * (x + GELU_C * x2 * x));
            return dy * (sg + 2.0f * x * sg * (1.0f - sg) * GELU_K * (1.0f + 3.0f * GELU_C * x2));
        } else {
            float pdf = INV_SQRT_2PI * expf(-0.5f * x * x);
            return dy * (dev_phi(x) + x * pdf);
        }
    case BRISK_OP_SILU: {
        float sg = dev_sigmoid(x);
        return dy * sg * (1.0f + x * (1.0f - sg));
    }
    case BRISK_OP_TANH: return dy * (1.0f - y * y);
    default: return dy * y * (1.0f - y); /* SIGMOID */
    }
}

__global__ void k_act_grad(int kind, int gt, float a, float b, const float *dy, const float *x, const float *y,
                           float *o, int64_t n) {
    /* read only what the formula uses: a fused forward may leave the other unwritten */
    int need_y = kind == BRISK_OP_RELU || kind == BRISK_OP_TANH || kind == BRISK_OP_SIGMOID || kind == BRISK_OP_EXP ||
                 kind == BRISK_OP_SQRT;
    GRID_STRIDE(i, n) o[i] = dev_act_grad(kind, gt, a, b, dy[i], need_y ? 0.0f : x[i], need_y ? y[i] : 0.0f);
}

cudaError_t cuk_act_grad(int kind, int gelu_tanh, float a, float b, const float *dy, const float *x, const float *y,
                         float *out, int64_t n, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_act_grad<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(kind, gelu_tanh, a, b, dy, x, y, out, n);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- accumulation, losses */

__global__ void k_grad_accum(const float *g, float *o, int64_t n, const cuda_values *v) {
    int first = v->first_micro != 0;
    GRID_STRIDE(i, n) o[i] = first ? g[i] : o[i] + g[i];
}

cudaError_t cuk_grad_accum(const float *g, float *out, int64_t n, const cuda_values *v, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_grad_accum<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(g, out, n, v);
    return cudaGetLastError();
}

__global__ void k_mse_grad(const float *dloss, const float *p, const float *t, float *o, int64_t n) {
    float k = 2.0f * *dloss / (float)n;
    GRID_STRIDE(i, n) o[i] = k * (p[i] - t[i]);
}

cudaError_t cuk_mse_grad(const float *dloss, const float *p, const float *t, float *out, int64_t n,
                         cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    k_mse_grad<<<cuk_blocks(n, 4), CUK_THREADS, 0, s>>>(dloss, p, t, out, n);
    return cudaGetLastError();
}

/* ring: n slots of BRISK_LOSS_LOG_WIDTH floats; thread j logs loss[j] */
__global__ void k_loss_log(const float *loss, int width, float *ring, int n, float w, const cuda_values *v) {
    int j = (int)threadIdx.x;
    if (j >= width) return;
    float *slot = ring + (size_t)(v->loss_slot % (uint32_t)n) * BRISK_LOSS_LOG_WIDTH + j;
    float add = w * loss[j];
    *slot = v->first_micro ? add : *slot + add;
}

cudaError_t cuk_loss_log(const float *loss, int width, float *ring, int n, float w, const cuda_values *v, cudaStream_t s) {
    k_loss_log<<<1, 32, 0, s>>>(loss, width, ring, n, w, v);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- casts for GEMM operands */

__global__ void k_cast_bf16(const float4 *x, __nv_bfloat162 *o, int64_t n4) {
    GRID_STRIDE(i, n4) {
        float4 v = x[i];
        o[2 * i] = __floats2bfloat162_rn(v.x, v.y);
        o[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
    }
}
__global__ void k_cast_f16(const float4 *x, __half2 *o, int64_t n4) {
    GRID_STRIDE(i, n4) {
        float4 v = x[i];
        o[2 * i] = __floats2half2_rn(v.x, v.y);
        o[2 * i + 1] = __floats2half2_rn(v.z, v.w);
    }
}
__global__ void k_cast_lp_tail(const float *x, void *o, int64_t from, int64_t n, int fp16) {
    for (int64_t i = from + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (fp16) ((__half *)o)[i] = __float2half_rn(x[i]);
        else ((__nv_bfloat16 *)o)[i] = __float2bfloat16_rn(x[i]);
    }
}

cudaError_t cuk_cast_lp(const float *x, void *out, int64_t n, int fp16, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    int64_t n4 = (cuk_aligned16(x) && ((uintptr_t)out & 7u) == 0) ? n / 4 : 0;
    if (n4) {
        if (fp16) k_cast_f16<<<cuk_blocks(n4, 2), CUK_THREADS, 0, s>>>((const float4 *)x, (__half2 *)out, n4);
        else k_cast_bf16<<<cuk_blocks(n4, 2), CUK_THREADS, 0, s>>>((const float4 *)x, (__nv_bfloat162 *)out, n4);
    }
    if (4 * n4 < n) k_cast_lp_tail<<<cuk_blocks(n - 4 * n4, 4), CUK_THREADS, 0, s>>>(x, out, 4 * n4, n, fp16);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- input staging */

__global__ void k_stage(uint4 *dst, const uint4 *s0, const uint4 *s1, int64_t n16, const cuda_values *v) {
    const uint4 *src = v->parity ? s1 : s0;
    GRID_STRIDE(i, n16) dst[i] = src[i];
}

cudaError_t cuk_stage_inputs(void *dst, const void *s0, const void *s1, size_t bytes, const cuda_values *v,
                             cudaStream_t s) {
    /* the buffers are allocated in 64-byte units, so copying whole 16-byte words is in bounds */
    int64_t n16 = (int64_t)((bytes + 15) / 16);
    if (n16 == 0) return cudaSuccess;
    k_stage<<<cuk_blocks(n16, 2), CUK_THREADS, 0, s>>>((uint4 *)dst, (const uint4 *)s0, (const uint4 *)s1, n16, v);
    return cudaGetLastError();
}

} /* extern "C" */
