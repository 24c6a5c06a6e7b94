/* ONNX's ops that move or view data: Identity, Flatten, Reshape, Transpose, Concat, Squeeze,
 * Unsqueeze, Cast, Expand (and NumPy's broadcast of dims), Pad; and the fold-only ops met with a
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
    if (r > BRISK_MAX_DIMS) return ox_fail(c, "rank %d is more than brisk's %d", r, BRISK_MAX_DIMS);
    brisk_shape ba = ox_shape_of(a, ra), bb = ox_shape_of(b, rb), t;
    if (brisk_shape_broadcast(&ba, &bb, &t)) {
        char sa[BRISK_SHAPE_STR], sb[BRISK_SHAPE_STR];
        return ox_fail(c, "shapes %s and %s do not broadcast", brisk_shape_str(&ba, sa, sizeof sa),
                       brisk_shape_str(&bb, sb, sizeof sb));
    }
    memcpy(o, t.d, (size_t)r * sizeof *o);
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

/* A block of the constant `value` shaped as x with `n` along `axis`: what Pad joins on. */
static int pad_block(ctx *c, const brisk_shape *s, int axis, int64_t n, float value) {
    brisk_shape b = *s;
    b.d[axis] = n;
    int64_t numel = brisk_shape_numel(&b);
    float *v = malloc((size_t)numel * sizeof *v + 1);
    if (!v) return ox_fail(c, "out of memory");
    for (int64_t i = 0; i < numel; i++) v[i] = value;
    int id = brisk_const(c->g, NULL, BRISK_F32, b, v);
    free(v);
    return id;
}

/* Pad, mode constant (torch's AvgPool2d exports one before its AveragePool, often of zeros):
 * each axis's blocks of the value joined on by CONCAT, negative pads cut by SLICE, so the
 * gradient is CONCAT's and SLICE's. Pads before opset 11 are an attribute, then an input. */
int ox_build_pad(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    const char *mode = "constant";
    brisk_error e;
    brisk_onnx_attr_string(c->m, c->n, "mode", "constant", &mode, &e);
    if (strcmp(mode, "constant")) return ox_fail(c, "mode %s (constant taken)", mode);
    brisk_shape s = *ox_shape(c, x);
    int r = s.ndim;
    int64_t pads[2 * BRISK_MAX_DIMS];
    const int64_t *at;
    size_t na = ox_attr_ints(c, "pads", &at);
    konst *own = NULL, *kp = na ? NULL : ox_const_in(c, 1, &own);
    size_t np = na ? na : kp ? (size_t)kp->numel : 0;
    konst *own_v, *kv = ox_const_in(c, 2, &own_v), *own_a, *ka = ox_const_in(c, 3, &own_a);
    double value = kv && kv->numel == 1 ? kv->v[0] : ox_attr_f(c, "value", 0.0f);
    int rc = 0, axes[BRISK_MAX_DIMS], n_axes = r;
    for (int k = 0; k < r; k++) axes[k] = k;
    char src[300];
    if (!na && !kp) rc = ox_fail(c, "pads computed from tensors (constants taken): %s", ox_from_node(c, 1, src, sizeof src));
    if (!rc && ka) { /* opset 18: the axes the pads are for */
        n_axes = (int)ka->numel;
        for (int k = 0; k < n_axes && !rc && k < BRISK_MAX_DIMS; k++)
            if ((axes[k] = ox_axis(c, ox_i64(ka->v[k]), r)) < 0) rc = -1;
    }
    if (!rc && np != 2 * (size_t)n_axes) rc = ox_fail(c, "%zu pads for %d axes", np, n_axes);
    for (size_t k = 0; !rc && k < np; k++) pads[k] = na ? at[k] : ox_i64(kp->v[k]);
    ox_konst_free(own), ox_konst_free(own_v), ox_konst_free(own_a);
    if (rc) return -1;
    for (int k = 0; k < n_axes && x >= 0; k++) {
        int a = axes[k];
        int64_t lo = pads[k], hi = pads[k + n_axes], d = ox_shape(c, x)->d[a];
        if (lo < 0 || hi < 0) { /* a crop */
            int64_t from = lo < 0 ? -lo : 0, len = d - from - (hi < 0 ? -hi : 0);
            if (len < 1) return ox_fail(c, "pads %lld and %lld leave nothing of an axis of %lld", (long long)lo,
                                        (long long)hi, (long long)d);
            x = brisk_slice(c->g, x, a, from, len);
            lo = lo < 0 ? 0 : lo, hi = hi < 0 ? 0 : hi;
        }
        if (x < 0 || (!lo && !hi)) continue;
        if (lo > (1 << 20) || hi > (1 << 20)) return ox_fail(c, "a pad of %lld", (long long)(lo > hi ? lo : hi));
        brisk_shape cur = *ox_shape(c, x);
        int parts[3], n = 0;
        if (lo && (parts[n++] = pad_block(c, &cur, a, lo, (float)value)) < 0) return -1;
        parts[n++] = x;
        if (hi && (parts[n++] = pad_block(c, &cur, a, hi, (float)value)) < 0) return -1;
        x = brisk_concat(c->g, parts, n, a);
    }
    return x;
}
