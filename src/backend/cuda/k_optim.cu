/* The fused optimizer over the parameter arena (or a ZeRO-1 shard of it), matching
 * src/backend/cpu/optim.c (torch.optim.AdamW / SGD operation order), plus the dynamic loss
 * scaler:
 *
 *   cuk_optim_finalize (one thread) reads this step's sum of g^2 (when clipping, scaling or
 *     skipping non-finite steps), decides `skip` (the sum not finite: an inf/NaN somewhere,
 *     with the scaler on, or on any precision under train.skip_nan_steps), sets the
 *     gradient multiplier coef = grad_scale / scale * min(1, clip / (norm + 1e-6)) with the
 *     norm of the unscaled gradients, the AdamW constants for this step from the per-step
 *     values (lr, t; t counts applied updates only, as PyTorch's GradScaler skips
 *     optimizer.step()), then updates the scaler: inf -> halve the scale, count the skip;
 *     growth_interval clean steps in a row -> double it. The new scale goes to the loss
 *     gradient seed, so the next backward is scaled by it. All on the device: no host sync.
 *   cuk_optim_update: one launch over all n floats, 4 per thread (16-byte loads when
 *     aligned), which also refreshes the bf16/fp16 copy of the weights the GEMMs read (lp:
 *     the copy of p's first float, so a shard writes its own part of it). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "backend/cuda/k_common.cuh"

__global__ void k_optim_finalize(cuda_optim_consts c, const cuda_values *v, cuda_optim_state *st, float *seed) {
    float scale = st->scaler ? st->scale : 1.0f;
    double sumsq = st->sumsq;
    int nonfinite = c.use_sumsq && !isfinite(sumsq);
    int found_inf = st->scaler && nonfinite;
    /* the multiplier, computed as the CPU does: norm of the (unscaled) gradients in f32 */
    float gsc = c.grad_scale / scale;
    double gs = (double)gsc;
    if (c.clip_norm > 0.0f && c.use_sumsq && !found_inf) {
        float norm = st->scaler ? (float)(sqrt(sumsq) * (double)gsc) : sqrtf((float)sumsq) * gsc;
        float coef = c.clip_norm / (norm + 1e-6f);
        if (coef < 1.0f) gs *= coef;
    }
    st->coef = (float)gs;
    st->skip = found_inf || (nonfinite && c.skip_nonfinite);
    if (st->skip && !found_inf) st->nonfinite_skipped++;
    float lr = v->lr;
    st->lr = lr;
    if (c.adamw) {
        long long t = (long long)v->t - st->skipped;
        if (t < 1) t = 1;
        double bc1 = 1.0 - pow((double)c.beta1, (double)t), bc2 = 1.0 - pow((double)c.beta2, (double)t);
        st->step_size = (float)((double)lr / bc1);
        st->bc2_sqrt = (float)sqrt(bc2);
        st->decay = (float)(1.0 - (double)lr * (double)c.weight_decay);
    } else {
        st->decay = c.weight_decay;
    }
    if (st->scaler) {
        if (found_inf) {
            st->scale = scale * 0.5f;
            st->growth = 0;
            st->skipped++;
        } else if (++st->growth >= st->growth_interval) {
            st->scale = scale * 2.0f;
            st->growth = 0;
        }
        if (seed) *seed = st->scale;
    }
}

struct optim_args {
    float *p, *m, *v;
    const float *g;
    const uint8_t *mask;
    void *lp;
    int lp_fp16;
};

__device__ __forceinline__ void store_lp(void *lp, int fp16, int64_t i, float x) {
    if (fp16) ((__half *)lp)[i] = __float2half_rn(x);
    else ((__nv_bfloat16 *)lp)[i] = __float2bfloat16_rn(x);
}

/* One element; p, m, v passed by reference. Every operation is rounded on its own
 * (__f*_rn): nvcc may contract a * b + c into an FMA, and which product it fuses depends on
 * the code around it. The float4 loop and the scalar loop (unaligned arrays, the tail)
 * contracted v = b2 v + (1 - b2) g^2 differently, so an update in two ranges (ZeRO-1 shards
 * starting at an odd float) gave other bits than the whole arena's. Unfused, an element's
 * result no longer depends on the path that updates it (the CPU's order of operations). */
__device__ __forceinline__ void adamw_one(const cuda_optim_consts &c, const cuda_optim_state &s, float g,
                                          float decay, float &p, float &m, float &v) {
    float gi = __fmul_rn(g, s.coef);
    float pi = __fmul_rn(p, decay);
    float mi = __fadd_rn(m, __fmul_rn(__fsub_rn(1.0f, c.beta1), __fsub_rn(gi, m)));
    float vi = __fadd_rn(__fmul_rn(c.beta2, v), __fmul_rn(__fsub_rn(1.0f, c.beta2), __fmul_rn(gi, gi)));
    m = mi;
    v = vi;
    float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), c.eps);
    p = __fsub_rn(pi, __fmul_rn(s.step_size, __fdiv_rn(mi, den)));
}

__device__ __forceinline__ void sgd_one(const cuda_optim_consts &c, const cuda_optim_state &s, float g, float wd,
                                        float &p, float &m) {
    float d = __fadd_rn(__fmul_rn(g, s.coef), __fmul_rn(wd, p));
    if (c.momentum == 0.0f) {
        p = __fsub_rn(p, __fmul_rn(s.lr, d));
    } else {
        float b = __fadd_rn(__fmul_rn(c.momentum, m), d);
        m = b;
        p = __fsub_rn(p, __fmul_rn(s.lr, c.nesterov ? __fadd_rn(d, __fmul_rn(c.momentum, b)) : b));
    }
}

__device__ __forceinline__ void update_one(const optim_args &a, const cuda_optim_consts &c, const cuda_optim_state &s,
                                           int64_t i) {
    float p = a.p[i], m = a.m ? a.m[i] : 0.0f;
    int decays = !a.mask || a.mask[i];
    if (c.adamw) {
        float v = a.v[i];
        adamw_one(c, s, a.g[i], decays ? s.decay : 1.0f, p, m, v);
        a.v[i] = v;
        a.m[i] = m;
    } else {
        sgd_one(c, s, a.g[i], decays ? s.decay : 0.0f, p, m);
        if (a.m && c.momentum != 0.0f) a.m[i] = m;
    }
    a.p[i] = p;
    if (a.lp) store_lp(a.lp, a.lp_fp16, i, p);
}

__global__ void k_optim_update(optim_args a, cuda_optim_consts c, const cuda_optim_state *stp, int64_t n, int vec) {
    const cuda_optim_state s = *stp;
    if (s.skip) return;
    int64_t n4 = vec ? n / 4 : 0;
    GRID_STRIDE(q, n4) {
        /* 16-byte loads of p, g, m, v; the arithmetic per element as above */
        float4 p4 = ((float4 *)a.p)[q], g4 = ((const float4 *)a.g)[q];
        float4 m4 = a.m ? ((float4 *)a.m)[q] : make_float4(0, 0, 0, 0);
        float4 v4 = c.adamw ? ((float4 *)a.v)[q] : make_float4(0, 0, 0, 0);
        float pp[4] = {p4.x, p4.y, p4.z, p4.w}, gg[4] = {g4.x, g4.y, g4.z, g4.w};
        float mm[4] = {m4.x, m4.y, m4.z, m4.w}, vv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int decays = !a.mask || a.mask[4 * q + k];
            if (c.adamw) adamw_one(c, s, gg[k], decays ? s.decay : 1.0f, pp[k], mm[k], vv[k]);
            else sgd_one(c, s, gg[k], decays ? s.decay : 0.0f, pp[k], mm[k]);
        }
        ((float4 *)a.p)[q] = make_float4(pp[0], pp[1], pp[2], pp[3]);
        if (c.adamw) {
            ((float4 *)a.m)[q] = make_float4(mm[0], mm[1], mm[2], mm[3]);
            ((float4 *)a.v)[q] = make_float4(vv[0], vv[1], vv[2], vv[3]);
        } else if (a.m && c.momentum != 0.0f) {
            ((float4 *)a.m)[q] = make_float4(mm[0], mm[1], mm[2], mm[3]);
        }
        if (a.lp)
#pragma unroll
            for (int k = 0; k < 4; k++) store_lp(a.lp, a.lp_fp16, 4 * q + k, pp[k]);
    }
    for (int64_t i = 4 * n4 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        update_one(a, c, s, i);
}

extern "C" {

cudaError_t cuk_optim_finalize(cuda_optim_consts c, const cuda_values *v, cuda_optim_state *st, float *seed,
                               cudaStream_t s) {
    k_optim_finalize<<<1, 1, 0, s>>>(c, v, st, seed);
    return cudaGetLastError();
}

cudaError_t cuk_optim_update(float *p, const float *g, float *m, float *v, const uint8_t *mask, int64_t n,
                             cuda_optim_consts c, const cuda_optim_state *st, void *lp, int lp_fp16,
                             cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    optim_args a = {p, m, v, g, mask, lp, lp_fp16};
    int vec = cuk_aligned16(p) && cuk_aligned16(g) && (!m || cuk_aligned16(m)) && (!v || cuk_aligned16(v));
    k_optim_update<<<cuk_blocks((n + 3) / 4, 1), CUK_THREADS, 0, s>>>(a, c, st, n, vec);
    return cudaGetLastError();
}

} /* extern "C" */
