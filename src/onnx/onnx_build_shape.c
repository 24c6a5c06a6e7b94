/* ONNX's ops that move or view data: Identity, Flatten, Reshape, Transpose, Concat, Squeeze,
 * Unsqueeze, Cast, Expand (and NumPy's broadcast of dims); and the fold-only ops met with a
 * tensor input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

static int reshape_to(ctx *c, int x, const konst *shape) {
    const brisk_shape *s = ox_shape(c, x);
    int64_t d[BRISK_MAX_DIMS];
    int r = ox_reshape_dims(c, s->d, s->ndim, brisk_shape_numel(s), shape, d);
    return r < 0 ? -1 : brisk_reshape(c->g, x, ox_shape_of(d, r));
}

int ox_broadcast(ctx *c, const int64_t *a, int ra, const int64_t *b, int rb, int64_t *o) {
    int r = ra > rb ? ra : rb;
    int64_t t[BRISK_MAX_DIMS];
    if (r > BRISK_MAX_DIMS) return ox_fail(c, "rank %d is more than brisk's %d", r, BRISK_MAX_DIMS);
    for (int k = 0; k < r; k++) {
        int64_t x = k >= r - ra ? a[k - (r - ra)] : 1, y = k >= r - rb ? b[k - (r - rb)] : 1;
        if (x != y && x != 1 && y != 1) {
            char sa[BRISK_SHAPE_STR], sb[BRISK_SHAPE_STR];
            brisk_shape ba = ox_shape_of(a, ra), bb = ox_shape_of(b, rb);
            return ox_fail(c, "shapes %s and %s do not broadcast", brisk_shape_str(&ba, sa, sizeof sa),
                           brisk_shape_str(&bb, sb, sizeof sb));
        }
        t[k] = x == 1 ? y : x;
    }
    memcpy(o, t, (size_t)r * sizeof *o);
    return r;
}

/* Expand of a tensor to a constant shape, broadcast both ways as ONNX's */
int ox_build_expand(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    konst *own, *sh = ox_const_in(c, 1, &own);
    if (!sh) return ox_fail(c, "a shape computed from tensors (a constant shape taken)");
    int64_t d[BRISK_MAX_DIMS];
    int r = -1;
    if (sh->rank != 1 || sh->numel > BRISK_MAX_DIMS) ox_fail(c, "a shape of rank %d and %lld dims (rank 1, at most %d taken)",
                                                             sh->rank, (long long)sh->numel, BRISK_MAX_DIMS);
    else {
        int neg = 0;
        for (int64_t k = 0; k < sh->numel; k++) neg |= (d[k] = ox_i64(sh->v[k])) < 0;
        const brisk_shape *s = ox_shape(c, x);
        r = neg ? ox_fail(c, "a negative dim in the shape") : ox_broadcast(c, s->d, s->ndim, d, (int)sh->numel, d);
    }
    ox_konst_free(own);
    if (r < 0) return -1;
    brisk_shape t = ox_shape_of(d, r);
    return brisk_shape_equal(&t, ox_shape(c, x)) ? x : brisk_expand(c->g, x, t);
}

int ox_build_identity(ctx *c) { return ox_in(c, 0, 0); }

int ox_build_flatten(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    const brisk_shape *s = ox_shape(c, x);
    int a = (int)ox_attr_i(c, "axis", 1);
    if (a < 0) a += s->ndim;
    int64_t outer = 1;
    for (int k = 0; k < a && k < s->ndim; k++) outer *= s->d[k];
    return brisk_reshape(c->g, x, brisk_shape2(outer, brisk_shape_numel(s) / (outer ? outer : 1)));
}

int ox_build_reshape(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    konst *own, *sh = ox_const_in(c, 1, &own);
    if (!sh) return ox_fail(c, "a shape computed from tensors (a constant shape taken)");
    int y = reshape_to(c, x, sh);
    ox_konst_free(own);
    return y;
}

int ox_build_transpose(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    int r = ox_shape(c, x)->ndim, perm[BRISK_MAX_DIMS];
    const int64_t *p;
    size_t n = ox_attr_ints(c, "perm", &p);
    if (n && n != (size_t)r) return ox_fail(c, "perm of %zu axes for a rank-%d input", n, r);
    for (int k = 0; k < r; k++) perm[k] = n ? (int)p[k] : r - 1 - k;
    return brisk_transpose(c->g, x, perm);
}

int ox_build_concat(ctx *c) {
    int xs[64], n = (int)c->n->n_inputs;
    if (n > 64) return ox_fail(c, "%d inputs (64 taken)", n);
    for (int k = 0; k < n; k++)
        if ((xs[k] = ox_in(c, (size_t)k, 0)) < 0) return -1;
    int a = ox_axis(c, ox_attr_i(c, "axis", 0), ox_shape(c, xs[0])->ndim);
    return a < 0 ? -1 : brisk_concat(c->g, xs, n, a);
}

int ox_build_squeeze(ctx *c) { /* and Unsqueeze */
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    const brisk_shape *s = ox_shape(c, x);
    int64_t d[BRISK_MAX_DIMS * 2];
    int r = ox_squeeze_shape(c, c->n->op_type[0] == 'U', s->d, s->ndim, d);
    return r < 0 ? -1 : brisk_reshape(c->g, x, ox_shape_of(d, r));
}

int ox_build_cast(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    int64_t to = ox_attr_i(c, "to", BRISK_ONNX_FLOAT);
    brisk_dtype dt = to == BRISK_ONNX_FLOAT ? BRISK_F32 : to == BRISK_ONNX_INT32 || to == BRISK_ONNX_INT64 ? BRISK_I32 : (brisk_dtype)-1;
    if ((int)dt < 0) return ox_fail(c, "Cast to %s", brisk_onnx_dtype_name((int)to));
    return c->g->nodes[x].dtype == dt ? x : brisk_cast(c->g, x, dt);
}

int ox_build_fold_only(ctx *c) { return ox_fail(c, "%s of a tensor (brisk folds it on constants only)", c->n->op_type); }
