/* ONNX's ops that pick parts of a tensor: Slice, Split, Gather (rows of a table by an index
 * tensor: an embedding; or constant indices along any axis), and the index arithmetic they
 * share with onnx_fold.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

int ox_slice_range(ctx *c, int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *lo, int64_t *n) {
    if (step == 0) return ox_fail(c, "a step of 0");
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *n = end > start ? (end - start + step - 1) / step : 0;
    } else {
        start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        *n = start > end ? (start - end - step - 1) / -step : 0;
    }
    *lo = start;
    return 0;
}

int ox_slice_spec(ctx *c, int rank, int64_t *lo, int64_t *n, int64_t *step, const int64_t *dims) {
    for (int a = 0; a < rank; a++) lo[a] = 0, n[a] = dims[a], step[a] = 1;
    konst *o1, *o2, *o3, *o4;
    konst *st = ox_const_in(c, 1, &o1), *en = ox_const_in(c, 2, &o2), *ax = ox_const_in(c, 3, &o3),
          *sp = ox_const_in(c, 4, &o4);
    int rc = 0;
    if (!st || !en) rc = ox_fail(c, "starts and ends computed from tensors (constants taken)");
    else if (st->numel != en->numel || (ax && ax->numel != st->numel) || (sp && sp->numel != st->numel))
        rc = ox_fail(c, "starts, ends, axes and steps of different lengths");
    else if ((ox_has_in(c, 3) && !ax) || (ox_has_in(c, 4) && !sp))
        rc = ox_fail(c, "axes or steps computed from tensors (constants taken)");
    for (int64_t k = 0; !rc && k < st->numel; k++) {
        int a = ox_axis(c, ax ? ox_i64(ax->v[k]) : k, rank);
        if (a < 0) rc = -1;
        else {
            step[a] = sp ? ox_i64(sp->v[k]) : 1;
            /* INT64_MAX and INT64_MIN ("to the end") arrive as doubles beyond any dim */
            double s = st->v[k], e = en->v[k], big = 9e18;
            rc = ox_slice_range(c, dims[a], s > big ? INT64_MAX / 2 : s < -big ? -INT64_MAX / 2 : (int64_t)s,
                                e > big ? INT64_MAX / 2 : e < -big ? -INT64_MAX / 2 : (int64_t)e, step[a], &lo[a], &n[a]);
        }
    }
    ox_konst_free(o1), ox_konst_free(o2), ox_konst_free(o3), ox_konst_free(o4);
    return rc;
}

int ox_build_slice(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    brisk_shape s = *ox_shape(c, x);
    int64_t lo[BRISK_MAX_DIMS], n[BRISK_MAX_DIMS], step[BRISK_MAX_DIMS];
    if (ox_slice_spec(c, s.ndim, lo, n, step, s.d)) return -1;
    for (int a = 0; a < s.ndim && x >= 0; a++) {
        if (n[a] == s.d[a] && step[a] == 1) continue;
        if (step[a] != 1) return ox_fail(c, "a step of %lld on axis %d (1 taken for tensors)", (long long)step[a], a);
        if (n[a] < 1) return ox_fail(c, "an empty slice of axis %d", a);
        x = brisk_slice(c->g, x, a, lo[a], n[a]);
    }
    return x;
}

int ox_build_split(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    const brisk_shape *s = ox_shape(c, x);
    int a = ox_axis(c, ox_attr_i(c, "axis", 0), s->ndim);
    if (a < 0) return -1;
    size_t outs = c->n->n_outputs;
    int64_t len[64];
    if (outs < 1 || outs > 64) return ox_fail(c, "%zu outputs (1 to 64 taken)", outs);
    const int64_t *at;
    size_t na = ox_attr_ints(c, "split", &at);
    konst *own, *sp = ox_const_in(c, 1, &own);
    if (ox_has_in(c, 1) && !sp) return ox_fail(c, "split sizes computed from tensors (constants taken)");
    int64_t total = 0;
    for (size_t k = 0; k < outs; k++) {
        len[k] = sp && (size_t)sp->numel == outs ? ox_i64(sp->v[k]) : na == outs ? at[k]
                 : (s->d[a] + (int64_t)outs - 1) / (int64_t)outs; /* equal parts, the last smaller */
        if (!sp && na != outs && k == outs - 1) len[k] = s->d[a] - total;
        if (len[k] < 0 || len[k] > s->d[a]) {
            ox_konst_free(own);
            return ox_fail(c, "a part of %lld of an axis of %lld", (long long)len[k], (long long)s->d[a]);
        }
        total += len[k];
    }
    ox_konst_free(own);
    if (total != s->d[a]) return ox_fail(c, "parts of %lld in all for an axis of %lld", (long long)total, (long long)s->d[a]);
    int first = -1;
    for (size_t k = 0, at0 = 0; k < outs; at0 += (size_t)len[k], k++) {
        int y = brisk_slice(c->g, x, a, (int64_t)at0, len[k]);
        if (y < 0) return -1;
        if (k == 0) first = y;
        else ox_set_out(c, k, y);
    }
    return first;
}

/* Gather of a tensor: rows of an f32 table by an index tensor (an embedding, axis 0), or
 * constant indices along any axis (slices: a scalar index drops the axis, as x[:, -1]). */
int ox_build_gather(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    brisk_shape s = *ox_shape(c, x);
    int a = ox_axis(c, ox_attr_i(c, "axis", 0), s.ndim);
    if (a < 0) return -1;
    konst *own, *ix = ox_const_in(c, 1, &own);
    if (!ix) {
        int idx = ox_in(c, 1, 0);
        if (idx < 0) return -1;
        if (a != 0) return ox_fail(c, "indices from a tensor along axis %d (axis 0 taken: an embedding)", a);
        if (c->g->nodes[idx].dtype != BRISK_I32) idx = brisk_cast(c->g, idx, BRISK_I32);
        return brisk_gather(c->g, x, idx);
    }
    int parts[64], np = 0, y = -1, ok = 1;
    if (ix->numel < 1 || ix->numel > 64) ok = 0, ox_fail(c, "%lld constant indices (1 to 64 taken)", (long long)ix->numel);
    for (int64_t k = 0; ok && k < ix->numel; k++) {
        int64_t i = ox_i64(ix->v[k]);
        if (i < 0) i += s.d[a];
        if (i < 0 || i >= s.d[a])
            ok = 0, ox_fail(c, "index %lld out of range for axis %d of %lld", (long long)ix->v[k], a, (long long)s.d[a]);
        else if ((parts[np++] = brisk_slice(c->g, x, a, i, 1)) < 0)
            ok = 0;
    }
    if (ok) {
        y = np == 1 ? parts[0] : brisk_concat(c->g, parts, np, a);
        /* the axis becomes the index's shape */
        int64_t d[BRISK_MAX_DIMS * 2];
        int r = 0;
        for (int k = 0; k < a; k++) d[r++] = s.d[k];
        for (int k = 0; k < ix->rank; k++) d[r++] = ix->d[k];
        for (int k = a + 1; k < s.ndim; k++) d[r++] = s.d[k];
        if (r > BRISK_MAX_DIMS) y = ox_fail(c, "rank %d is more than brisk's %d", r, BRISK_MAX_DIMS);
        else if (y >= 0) y = brisk_reshape(c->g, y, ox_shape_of(d, r));
    }
    ox_konst_free(own);
    return ok ? y : -1;
}
