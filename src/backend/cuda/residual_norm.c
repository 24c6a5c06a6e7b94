/* run_node's residual add fused with the layer norm next to it, where prepare.c planned
 * the pair (plan_norm there says when that is safe): at the ADD's place, one kernel of
 * k_layernorm_residual.cu writes the sum and the norm's output (forward), or the sum of
 * the residual gradient and the norm's input gradient, which is never stored (backward). */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>

brisk_status cuda_run_add_norm(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               int *done, brisk_error *err) {
    *done = 0;
    const cuda_prep *p = cuda_prep_of(cb, g);
    cuda_node_plan np;
    if (!p) return BRISK_OK;
    cuda_prep_node(p, id, &np);
    if (np.norm_ln < 0 && np.norm_grad < 0) return BRISK_OK;
    void *const *ptr = cuda_prep_ptrs(p);
    const brisk_node *n = &g->nodes[id];
    int64_t C = n->shape.d[n->shape.ndim - 1], rows = brisk_shape_numel(&n->shape) / C;
    char what[80];
    if (np.norm_grad >= 0) {
        const brisk_node *q = &g->nodes[np.norm_grad];
        if (brisk_shape_numel(&g->nodes[q->in[2]].shape) != C)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "layernorm_grad_x (node %d): gamma is not [%lld]", np.norm_grad,
                                (long long)C);
        const float *r = in[n->in[0] == np.norm_grad ? 1 : 0];
        snprintf(what, sizeof what, "add (node %d) + layernorm_grad_x (node %d)", id, np.norm_grad);
        CU(cuk_layernorm_grad_add(ptr[q->in[0]], ptr[q->in[1]], ptr[q->in[2]], r, out, rows, C, q->attr.f0,
                                  cb->compute), what);
    } else {
        const brisk_node *ln = &g->nodes[np.norm_ln];
        if (brisk_shape_numel(&g->nodes[ln->in[1]].shape) != C || brisk_shape_numel(&g->nodes[ln->in[2]].shape) != C)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "layernorm (node %d): gamma and beta are not [%lld]", np.norm_ln,
                                (long long)C);
        snprintf(what, sizeof what, "add (node %d) + layernorm (node %d)", id, np.norm_ln);
        CU(cuk_add_layernorm(in[0], in[1], out, ptr[ln->in[1]], ptr[ln->in[2]], ptr[np.norm_ln], rows, C,
                             ln->attr.f0, cb->compute), what);
        brisk_status st = cuda_prep_after(cb, g, np.norm_ln, err); /* the norm's 16-bit copy, if a GEMM reads it */
        if (st) return st;
    }
    *done = 1;
    return BRISK_OK;
}
