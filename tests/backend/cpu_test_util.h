/* Helpers for the CPU backend tests: a hand-built graph (no dependency on
 * src/graph's builders), guarded buffers, random data and float64 comparisons.
 *
 * Every output buffer is poisoned with NaN before a run and followed by 64 guard
 * floats holding a bit pattern; tg_run checks the guard afterwards, so a kernel
 * that writes past its output fails the test that ran it. */
#ifndef BRISK_CPU_TEST_UTIL_H
#define BRISK_CPU_TEST_UTIL_H

#include "brisk/graph.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TG_MAX_NODES 32
#define TG_GUARD 64
#define TG_GUARD_BITS 0x7fa5a5a5u /* a NaN payload no kernel produces */

typedef struct tgraph {
    brisk_graph g;
    brisk_node nodes[TG_MAX_NODES];
    void *buf[TG_MAX_NODES];      /* host buffers, each followed by TG_GUARD guard floats */
} tgraph;

static uint64_t tg_rng_state = 0x9E3779B97F4A7C15ull;
static inline uint32_t tg_rand_u32(void) {
    tg_rng_state ^= tg_rng_state << 13;
    tg_rng_state ^= tg_rng_state >> 7;
    tg_rng_state ^= tg_rng_state << 17;
    return (uint32_t)(tg_rng_state >> 16);
}
/* uniform in [lo, hi) */
static inline float tg_randf(float lo, float hi) {
    return lo + (hi - lo) * (float)((tg_rand_u32() >> 8) * (1.0 / 16777216.0));
}

static inline void tg_init(tgraph *t) {
    memset(t, 0, sizeof *t);
    t->g.nodes = t->nodes;
    t->g.cap_nodes = TG_MAX_NODES;
    t->g.loss = t->g.output = -1;
}

static inline void tg_free(tgraph *t) {
    for (int i = 0; i < t->g.n_nodes; i++) free(t->buf[i]);
    memset(t->buf, 0, sizeof t->buf);
}

/* (memcpy: u8 and 16-bit tensors leave the guard unaligned) */
static inline void tg_guard_fill(void *p, size_t bytes) {
    const uint32_t w = TG_GUARD_BITS;
    for (int i = 0; i < TG_GUARD; i++) memcpy((unsigned char *)p + bytes + 4 * i, &w, 4);
}

static inline int tg_guard_ok(const void *p, size_t bytes) {
    for (int i = 0; i < TG_GUARD; i++) {
        uint32_t w;
        memcpy(&w, (const unsigned char *)p + bytes + 4 * i, 4);
        if (w != TG_GUARD_BITS) return 0;
    }
    return 1;
}

/* Appends a node and its guarded buffer, with ws_bytes of workspace after the output
 * (the fused sequence ops keep one). Leaves (n_in == 0 and op INPUT) get random data in
 * [-2, 2) for f32; outputs are poisoned with NaN, workspace included. */
static inline int tg_node_ws(tgraph *t, brisk_op op, brisk_dtype dt, brisk_shape s, const brisk_attr *attr,
                             int n_in, const int *in, size_t ws_bytes) {
    int id = t->g.n_nodes++;
    brisk_node *n = &t->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->dtype = dt;
    n->shape = s;
    if (attr) n->attr = *attr;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->bytes = (size_t)brisk_shape_numel(&s) * brisk_dtype_size(dt) + ws_bytes;
    size_t alloc = (n->bytes + TG_GUARD * 4 + 63) / 64 * 64;
    t->buf[id] = aligned_alloc(64, alloc);
    if (dt == BRISK_F32) {
        float *f = t->buf[id];
        for (size_t i = 0; i < n->bytes / 4; i++) f[i] = op == BRISK_OP_INPUT ? tg_randf(-2.0f, 2.0f) : NAN;
    } else {
        memset(t->buf[id], op == BRISK_OP_INPUT ? 0 : 0xCD, n->bytes);
    }
    tg_guard_fill(t->buf[id], n->bytes);
    return id;
}

static inline int tg_node(tgraph *t, brisk_op op, brisk_dtype dt, brisk_shape s, const brisk_attr *attr,
                          int n_in, const int *in) {
    return tg_node_ws(t, op, dt, s, attr, n_in, in, 0);
}

static inline int tg_input(tgraph *t, brisk_dtype dt, brisk_shape s) {
    return tg_node(t, BRISK_OP_INPUT, dt, s, NULL, 0, NULL);
}
static inline float *tg_f(tgraph *t, int id) { return (float *)t->buf[id]; }
static inline int32_t *tg_i(tgraph *t, int id) { return (int32_t *)t->buf[id]; }

static inline brisk_step_state tg_state(int training) {
    brisk_step_state st = {.seed = 0x123456789abcdefull, .rng_step = 7, .first_micro = 1, .training = (uint32_t)training};
    return st;
}

/* Runs node id on the backend with the buffers of its inputs; checks the guard. */
static inline brisk_status tg_run_st(brisk_backend *be, tgraph *t, int id, const brisk_step_state *st,
                                     brisk_error *err) {
    const void *in[BRISK_MAX_INPUTS] = {0};
    for (int i = 0; i < t->nodes[id].n_in; i++) in[i] = t->buf[t->nodes[id].in[i]];
    brisk_status s = be->run_node(be, &t->g, id, in, t->buf[id], st, err);
    for (int i = 0; i < t->g.n_nodes; i++)
        CHECKF(tg_guard_ok(t->buf[i], t->nodes[i].bytes), "guard after node %d overwritten (running node %d)", i, id);
    return s;
}
static inline brisk_status tg_run(brisk_backend *be, tgraph *t, int id, brisk_error *err) {
    brisk_step_state st = tg_state(1);
    return tg_run_st(be, t, id, &st, err);
}

/* ||out - ref|| / ||ref|| (absolute when ref is all zero); NaN in out counts as failure. */
static inline double tg_rel_err(const float *out, const double *ref, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(out[i]) && !isnan(ref[i])) return INFINITY;
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define CHECK_REL(out, ref, n, tol) do { double e_ = tg_rel_err((out), (ref), (n)); \
    CHECKF(e_ <= (tol), "relative error %.3g > %.3g", e_, (double)(tol)); } while (0)

static inline brisk_attr tg_attr0(void) {
    brisk_attr a;
    memset(&a, 0, sizeof a);
    return a;
}

/* Row-major strides of s, and the flat index of multi-index idx broadcast into s
 * (dims right-aligned; size-1 dims read index 0). */
static inline int64_t tg_bcast_index(const brisk_shape *s, const brisk_shape *os, const int64_t *idx) {
    int off = os->ndim - s->ndim;
    int64_t f = 0;
    for (int i = 0; i < s->ndim; i++) f = f * s->d[i] + (s->d[i] == 1 ? 0 : idx[off + i]);
    return f;
}
static inline void tg_unflatten(const brisk_shape *s, int64_t flat, int64_t *idx) {
    for (int i = s->ndim - 1; i >= 0; i--) {
        idx[i] = flat % s->d[i];
        flat /= s->d[i];
    }
}

#endif
