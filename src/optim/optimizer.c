/* The optimizer step over the parameter arena: optional global-norm clipping
 * (sum of squares into backend memory), then one fused update launch. */
#include "brisk/optim.h"

#include <stdlib.h>
#include <string.h>

brisk_status brisk_optimizer_create(brisk_optimizer *o, const brisk_optim_spec *spec, brisk_exec *ex,
                                    brisk_error *err) {
    memset(o, 0, sizeof *o);
    o->spec = *spec;
    o->ex = ex;
    brisk_backend *be = ex->be;
    brisk_status st = be->alloc(be, sizeof(float), (void **)&o->sumsq, err);
    if (st) return st;
    /* Buffers (running statistics) have zero gradients, so only weight decay could move
     * them: they are always masked out. */
    int buffers = 0;
    for (int i = 0; i < ex->g->n_params; i++) buffers |= ex->g->params[i].buffer;
    if ((!spec->decay_all || buffers) && spec->weight_decay != 0.0f) {
        /* Biases and norm parameters are excluded: one mask byte per parameter float. */
        int64_t n = ex->g->n_param_floats;
        uint8_t *mask = calloc((size_t)n ? (size_t)n : 1, 1);
        if (!mask) return brisk_errorf(err, BRISK_ERR_NOMEM, "optimizer: cannot allocate the decay mask");
        for (int i = 0; i < ex->g->n_params; i++) {
            const brisk_param_info *p = &ex->g->params[i];
            if ((p->decay || spec->decay_all) && !p->buffer) memset(mask + p->offset, 1, (size_t)p->numel);
        }
        st = be->alloc(be, (size_t)n ? (size_t)n : 1, (void **)&o->decay_mask, err);
        if (!st) st = be->upload(be, o->decay_mask, mask, (size_t)n, err);
        free(mask);
        if (st) return st;
    }
    return BRISK_OK;
}

void brisk_optimizer_free(brisk_optimizer *o) {
    if (!o->ex) return;
    brisk_backend *be = o->ex->be;
    if (o->sumsq) be->free(be, o->sumsq);
    if (o->decay_mask) be->free(be, o->decay_mask);
    memset(o, 0, sizeof *o);
}

brisk_optim_args brisk_optimizer_args(const brisk_optimizer *o, int64_t t, float lr, int accumulate) {
    const brisk_optim_spec *s = &o->spec;
    brisk_optim_args a = {.kind = s->kind, .lr = lr, .beta1 = s->beta1, .beta2 = s->beta2,
                          .eps = s->eps, .momentum = s->momentum, .nesterov = s->nesterov,
                          .weight_decay = s->weight_decay, .t = t,
                          .grad_scale = 1.0f / (float)(accumulate > 0 ? accumulate : 1),
                          .clip_norm = s->clip_norm, .skip_nonfinite = o->skip_nonfinite};
    return a;
}

brisk_status brisk_optimizer_step(brisk_optimizer *o, int64_t t, float lr, int accumulate,
                                  brisk_error *err) {
    brisk_exec *ex = o->ex;
    brisk_backend *be = ex->be;
    int64_t n = ex->g->n_param_floats;
    if (o->spec.clip_norm > 0) {
        brisk_status st = be->grad_sumsq(be, ex->grads, n, o->sumsq, err);
        if (st) return st;
    }
    return brisk_optimizer_update_range(o, t, lr, accumulate, 0, n, err);
}

brisk_status brisk_optimizer_update_range(brisk_optimizer *o, int64_t t, float lr, int accumulate, int64_t off,
                                          int64_t n, brisk_error *err) {
    brisk_exec *ex = o->ex;
    brisk_backend *be = ex->be;
    brisk_optim_args a = brisk_optimizer_args(o, t, lr, accumulate);
    if (off < ex->moments_off || off + n > ex->moments_off + ex->moments_n)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "optimizer: update of [%lld, +%lld) outside the moments held",
                            (long long)off, (long long)n);
    /* the arenas are void * (backend memory): offsets in floats; the moments may be a shard */
    float *p = (float *)ex->params + off, *g = (float *)ex->grads + off;
    float *m = (float *)ex->m + (off - ex->moments_off), *v = ex->v ? (float *)ex->v + (off - ex->moments_off) : NULL;
    return be->optim_update(be, p, g, m, v, n, &a, o->sumsq,
                            o->decay_mask ? o->decay_mask + off : NULL, err);
}
