/* run_node's data-movement and index families: CONCAT, SLICE(_GRAD), TRANSPOSE, EXPAND
 * as strided views of one index space (collapsed on the host, copied by
 * cuk_strided_copy), and GATHER, SCATTER_ADD, SEGMENT_SUM, SINUSOIDAL(_GRAD). Checks as the CPU's
 * shape.c and gather.c. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])
#define LAUNCH(call, what) CU((call), (what))

static int64_t numel(const brisk_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

/* a two-level copy view: [outer, run] with source and destination row strides */
static cuda_strides rows_view(int64_t outer, int64_t run, int64_t src_row, int64_t dst_row) {
    cuda_strides v;
    memset(&v, 0, sizeof v);
    v.nd = 2;
    v.d[0] = outer, v.d[1] = run;
    v.s[0][0] = src_row, v.s[0][1] = 1;
    v.s[1][0] = dst_row, v.s[1][1] = 1;
    return v;
}

static void outer_inner(const brisk_shape *s, int axis, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->d[i];
    for (int i = axis + 1; i < s->ndim; i++) *inner *= s->d[i];
}

brisk_status cuda_run_movement(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    size_t es = brisk_dtype_size(n->dtype);
    cudaStream_t s = cb->compute;
    for (int k = 0; k < n->n_in; k++)
        if (IN_NODE(g, id, k)->dtype != n->dtype)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: input %d is %s, output %s", brisk_op_name(n->op), k,
                                brisk_dtype_name(IN_NODE(g, id, k)->dtype), brisk_dtype_name(n->dtype));
    if (n->op == BRISK_OP_CONCAT) {
        int axis = n->attr.axis;
        if (axis < 0 || axis >= n->shape.ndim)
            return brisk_errorf(err, BRISK_ERR_INVALID, "concat: axis %d outside [0, %d)", axis, n->shape.ndim);
        int64_t outer, inner, total = 0, at = 0;
        outer_inner(&n->shape, axis, &outer, &inner);
        for (int k = 0; k < n->n_in; k++) {
            if (IN_NODE(g, id, k)->shape.ndim != n->shape.ndim)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "concat: input %d rank differs", k);
            total += IN_NODE(g, id, k)->shape.d[axis];
        }
        if (total != n->shape.d[axis])
            return brisk_errorf(err, BRISK_ERR_SHAPE, "concat: inputs sum to %lld on axis %d, output %lld",
                                (long long)total, axis, (long long)n->shape.d[axis]);
        for (int k = 0; k < n->n_in; k++) {
            int64_t run = IN_NODE(g, id, k)->shape.d[axis] * inner;
            cuda_strides v = rows_view(outer, run, run, n->shape.d[axis] * inner);
            LAUNCH(cuk_strided_copy((char *)out + (size_t)at * es, in[k], es, &v, s), "concat");
            at += run;
        }
        return BRISK_OK;
    }
    if (n->op == BRISK_OP_SLICE || n->op == BRISK_OP_SLICE_GRAD) {
        int grad = n->op == BRISK_OP_SLICE_GRAD;
        const brisk_shape *full = grad ? &n->attr.shape2 : &IN_NODE(g, id, 0)->shape;
        const brisk_shape *part = grad ? &IN_NODE(g, id, 0)->shape : &n->shape;
        int axis = n->attr.axis;
        if (axis < 0 || axis >= full->ndim || full->ndim != part->ndim)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: axis %d outside [0, %d) or rank mismatch",
                                brisk_op_name(n->op), axis, full->ndim);
        int64_t start = n->attr.i0, len = part->d[axis], outer, inner;
        if (start < 0 || start + len > full->d[axis])
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: [%lld, %lld) is outside [0, %lld) on axis %d",
                                brisk_op_name(n->op), (long long)start, (long long)(start + len),
                                (long long)full->d[axis], axis);
        outer_inner(full, axis, &outer, &inner);
        int64_t frow = full->d[axis] * inner, prow = len * inner, off = start * inner;
        if (grad) {
            CU(cudaMemsetAsync(out, 0, (size_t)(outer * frow) * es, s), "slice_grad");
            cuda_strides v = rows_view(outer, prow, prow, frow);
            LAUNCH(cuk_strided_copy((char *)out + (size_t)off * es, in[0], es, &v, s), "slice_grad");
        } else {
            cuda_strides v = rows_view(outer, prow, frow, prow);
            LAUNCH(cuk_strided_copy(out, (const char *)in[0] + (size_t)off * es, es, &v, s), "slice");
        }
        return BRISK_OK;
    }
    const brisk_shape *xs = &IN_NODE(g, id, 0)->shape, *os = &n->shape;
    int nd = os->ndim;
    cuda_strides v;
    memset(&v, 0, sizeof v);
    if (n->op == BRISK_OP_TRANSPOSE) {
        if (xs->ndim != nd)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "transpose: input rank %d, output rank %d", xs->ndim, nd);
        int64_t xstride[BRISK_MAX_DIMS], stv = 1;
        int seen = 0;
        for (int i = nd - 1; i >= 0; i--) xstride[i] = stv, stv *= xs->d[i];
        for (int i = 0; i < nd; i++) {
            int p = n->attr.perm[i];
            if (p < 0 || p >= nd || (seen >> p) & 1 || xs->d[p] != os->d[i])
                return brisk_errorf(err, BRISK_ERR_INVALID, "transpose: perm[%d] = %d is not a valid permutation of "
                                    "%d dims for these shapes", i, p, nd);
            seen |= 1 << p;
        }
        /* out dims with their x strides, size-1 dropped, neighbours adjacent in x merged */
        for (int i = 0; i < nd; i++) {
            int64_t d = os->d[i], sx = xstride[n->attr.perm[i]];
            if (d == 1) continue;
            if (v.nd && v.s[0][v.nd - 1] == sx * d) v.d[v.nd - 1] *= d, v.s[0][v.nd - 1] = sx;
            else v.d[v.nd] = d, v.s[0][v.nd] = sx, v.nd++;
        }
    } else { /* EXPAND */
        if (xs->ndim > nd) return brisk_errorf(err, BRISK_ERR_SHAPE, "expand: input has more dims than the target");
        for (int i = 0; i < xs->ndim; i++)
            if (xs->d[i] != 1 && xs->d[i] != os->d[nd - xs->ndim + i])
                return brisk_errorf(err, BRISK_ERR_SHAPE, "expand: input dim %d is %lld, target %lld", i,
                                    (long long)xs->d[i], (long long)os->d[nd - xs->ndim + i]);
        const brisk_shape *ops[1] = {xs};
        cuda_bcast_view(&v, os, ops, 1);
    }
    if (v.nd == 0) v.nd = 1, v.d[0] = 1, v.s[0][0] = 1;
    int64_t stv = 1; /* the destination is contiguous over the collapsed dims */
    for (int i = v.nd - 1; i >= 0; i--) v.s[1][i] = stv, stv *= v.d[i];
    LAUNCH(cuk_strided_copy(out, in[0], es, &v, s), brisk_op_name(n->op));
    return BRISK_OK;
}

/* The CPU's frequency table (libm expf, f32), uploaded once per dim. */
static brisk_status freq_table(cuda_backend *cb, int64_t dim, const float **out, brisk_error *err) {
    for (int i = 0; i < cb->n_freqs; i++)
        if (cb->freqs[i].dim == dim) { *out = cb->freqs[i].dev; return BRISK_OK; }
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "sinusoidal: table built while capturing");
    int64_t half = dim / 2;
    float *host = malloc((size_t)half * sizeof(float) + 4), *dev = NULL;
    cuda_freq *grown = realloc(cb->freqs, (size_t)(cb->n_freqs + 1) * sizeof *grown);
    if (!host || !grown) {
        free(host);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "sinusoidal: out of memory");
    }
    cb->freqs = grown;
    for (int64_t k = 0; k < half; k++) host[k] = expf(-9.210340371976184f * (float)k / (float)half);
    cudaError_t e = cudaMalloc((void **)&dev, (size_t)half * sizeof(float) + 4);
    if (e == cudaSuccess) e = cudaMemcpy(dev, host, (size_t)half * sizeof(float), cudaMemcpyHostToDevice);
    free(host);
    if (e != cudaSuccess) {
        if (dev) cudaFree(dev);
        return cuda_fail(err, e, "cudaMalloc/cudaMemcpy", "sinusoidal frequency table");
    }
    cb->freqs[cb->n_freqs++] = (cuda_freq){dim, dev};
    *out = dev;
    return BRISK_OK;
}

brisk_status cuda_run_index(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    cudaStream_t s = cb->compute;
    if (n->op == BRISK_OP_SINUSOIDAL || n->op == BRISK_OP_SINUSOIDAL_GRAD) {
        int grad = n->op == BRISK_OP_SINUSOIDAL_GRAD;
        const brisk_node *nt = IN_NODE(g, id, grad ? 1 : 0);
        int64_t dim = n->attr.i0, N = numel(&nt->shape);
        if (dim <= 0 || dim % 2 || dim > 1 << 20)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: dim %lld must be even and positive", brisk_op_name(n->op),
                                (long long)dim);
        if ((grad ? numel(&IN_NODE(g, id, 0)->shape) : numel(&n->shape)) != N * dim ||
            (grad && numel(&n->shape) != N))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: expected [%lld, %lld]", brisk_op_name(n->op), (long long)N,
                                (long long)dim);
        const float *freq = NULL;
        brisk_status st = freq_table(cb, dim, &freq, err);
        if (st) return st;
        int ti = nt->dtype == BRISK_I32;
        if (grad) LAUNCH(cuk_sinusoidal_grad(in[0], in[1], ti, freq, out, N, dim, s), "sinusoidal_grad");
        else LAUNCH(cuk_sinusoidal(in[0], ti, freq, out, N, dim, s), "sinusoidal");
        return BRISK_OK;
    }
    const brisk_node *ni = IN_NODE(g, id, 1);
    if (ni->dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: indices must be i32, got %s", brisk_op_name(n->op),
                            brisk_dtype_name(ni->dtype));
    int64_t nidx = numel(&ni->shape);
    if (n->op == BRISK_OP_GATHER) {
        const brisk_node *nt = IN_NODE(g, id, 0);
        if (nt->shape.ndim < 1 || nt->dtype != n->dtype)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "gather: table must be [V, ...] of the output dtype");
        int64_t V = nt->shape.d[0], D = V ? numel(&nt->shape) / V : 0;
        if (numel(&n->shape) != nidx * D)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "gather: output has %lld elements, expected %lld",
                                (long long)numel(&n->shape), (long long)(nidx * D));
        LAUNCH(cuk_gather(in[0], in[1], out, nidx, V, (size_t)D * brisk_dtype_size(n->dtype), cb->errors, id, s),
               "gather");
        return BRISK_OK;
    }
    const char *name = brisk_op_name(n->op);
    const brisk_shape *ts = &n->attr.shape2;
    if (ts->ndim < 1 || !brisk_shape_equal(ts, &n->shape))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: shape2 must be the output shape [V, ...]", name);
    if (n->op == BRISK_OP_SEGMENT_SUM && ni->shape.ndim != 1)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "segment_sum (node %d): idx must be [I]", id);
    int64_t V = ts->d[0], D = V ? numel(ts) / V : 0;
    if (numel(&IN_NODE(g, id, 0)->shape) != nidx * D)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: the rows have %lld elements, expected %lld", name,
                            (long long)numel(&IN_NODE(g, id, 0)->shape), (long long)(nidx * D));
    /* Under --deterministic both keep a fixed order of additions (the CPU's bits); otherwise
     * both take the atomic kernel, whose order is the hardware's. */
    if (cb->opt.deterministic && n->op == BRISK_OP_SCATTER_ADD)
        LAUNCH(cuk_scatter_add(in[0], in[1], out, nidx, V, D, cb->errors, id, s), "scatter_add");
    else
        LAUNCH(cuk_segment_sum(in[0], in[1], out, nidx, V, D, cb->opt.deterministic, cb->errors, id, s), name);
    return BRISK_OK;
}

