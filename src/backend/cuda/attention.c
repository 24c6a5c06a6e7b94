/* ATTENTION and ATTENTION_GRAD on the CUDA backend: the node checks of the CPU backend
 * (src/backend/cpu/attention.c, the same errors for the same bad graphs), then the fused
 * kernels of k_attention.cu. The dropout decision (p > 0 and training) is made on the
 * device from the per-step values, so one captured graph serves training and eval. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cuda_attention_supported(const brisk_node *n) {
    /* ATTENTION: [B, T, D]; ATTENTION_GRAD: [B, T, 3D]; both carry the forward's heads */
    int64_t heads = n->attr.i0, w = n->shape.ndim == 3 ? n->shape.d[2] : 0;
    if (n->op == BRISK_OP_ATTENTION_GRAD) w /= 3;
    return heads >= 1 && w % heads == 0 && w / heads <= CUK_ATTN_MAX_DH;
}

brisk_status cuda_run_attention(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                brisk_error *err) {
    const brisk_node *n = &g->nodes[id];
    int fwd = n->op == BRISK_OP_ATTENTION;
    int qi = fwd ? 0 : 1, mi = fwd ? 1 : 3;
    const brisk_node *at = fwd ? n : &g->nodes[n->in[2]], *q = &g->nodes[n->in[qi]];
    int has_mask = n->n_in > mi;
    cuk_attn_args a;
    memset(&a, 0, sizeof a);
    a.heads = at->attr.i0;
    int ok = q->shape.ndim == 3 && at->shape.ndim == 3 && at->op == BRISK_OP_ATTENTION && a.heads >= 1;
    if (ok) {
        a.B = q->shape.d[0];
        a.T = q->shape.d[1];
        a.D = q->shape.d[2] / 3;
        ok = q->shape.d[2] == 3 * a.D && a.D % a.heads == 0 && at->shape.d[0] == a.B && at->shape.d[1] == a.T &&
             at->shape.d[2] == a.D && at->bytes >= (size_t)(a.B * a.T * (a.D + a.heads)) * sizeof(float);
    }
    if (ok && has_mask) {
        const brisk_shape *ms = &g->nodes[n->in[mi]].shape;
        ok = ms->ndim == 2 && ms->d[0] == a.B && ms->d[1] == a.T;
    }
    if (ok && !fwd)
        ok = brisk_shape_equal(&g->nodes[n->in[0]].shape, &at->shape) && brisk_shape_equal(&n->shape, &q->shape);
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): expected qkv [B, T, 3D], heads dividing D, "
                            "a mask [B, T] and an attention node [B, T, D] with its workspace", brisk_op_name(n->op), id);
    if (a.B * a.T * a.D == 0) return BRISK_OK;
    a.dh = a.D / a.heads;
    if (a.dh > CUK_ATTN_MAX_DH)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s (node %d): head dim %lld (the CUDA kernel takes at most %d)",
                            brisk_op_name(n->op), id, (long long)a.dh, CUK_ATTN_MAX_DH);
    a.p = at->attr.f0;
    if (!(a.p >= 0.0f && a.p < 1.0f))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): dropout p = %g (expected 0 <= p < 1)",
                            brisk_op_name(n->op), id, (double)a.p);
    a.causal = at->attr.kind != 0;
    a.scale = 1.0f / sqrtf((float)a.dh);
    a.keep_scale = 1.0f / (1.0f - a.p);
    a.stream = at->attr.rng;
    a.qkv = in[qi];
    a.mask = has_mask ? in[mi] : NULL;
    char what[64];
    snprintf(what, sizeof what, "%s (node %d)", brisk_op_name(n->op), id);
    if (fwd) {
        a.out = out;
        a.lse = (float *)out + a.B * a.T * a.D;
        CU(cuk_attention(&a, cb->vals, cb->compute), what);
    } else {
        a.dy = in[0];
        a.out = (float *)in[2];
        a.lse = (float *)in[2] + a.B * a.T * a.D;
        a.dqkv = out;
        CU(cuk_attention_grad(&a, cb->vals, cb->compute), what);
    }
    return BRISK_OK;
}
