/* Helpers for the CUDA backend tests: skip without a GPU (exit 77, which ctest reports as
 * skipped), GPU backends per precision, and "run this graph on the CPU and on the GPU from
 * the same inputs and compare" with the GPU's output poisoned (NaN bytes) first, so an
 * element a kernel never writes fails, and its inputs checked afterwards, so a kernel
 * that writes past its output into them fails too. */
#ifndef BRISK_CUDA_TEST_UTIL_H
#define BRISK_CUDA_TEST_UTIL_H

#include "brisk/brisk.h"
#include "brisk/cuda.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_SKIP 77

static inline int cuda_present(void) {
    brisk_cuda_info i;
    brisk_cuda_probe(0, &i);
    if (!i.built || !i.usable) {
        printf("SKIP: no GPU to test the CUDA backend on: %s\n", i.reason);
        return 0;
    }
    printf("GPU: %s (cc %d.%d)\n", i.name, i.cc_major, i.cc_minor);
    return 1;
}

#define CUDA_TEST_MAIN(...)                                                  \
    int main(void) {                                                         \
        if (!cuda_present()) return CUDA_SKIP;                               \
        t_case c_[] = {__VA_ARGS__};                                         \
        return t_run(c_, (int)(sizeof c_ / sizeof c_[0]));                   \
    }

static inline brisk_backend *cuda_backend_for(brisk_gemm_precision p, int fuse, int deterministic) {
    brisk_cuda_options o;
    brisk_cuda_options_default(&o);
    o.precision = p;
    o.fuse = fuse;
    o.autotune = 0;
    o.deterministic = deterministic;
    snprintf(o.autotune_cache, sizeof o.autotune_cache, "-");
    brisk_backend *be = NULL;
    brisk_error err = {0};
    if (brisk_backend_cuda_create(&o, &be, &err)) fprintf(stderr, "cuda backend: %s\n", err.msg);
    return be;
}

/* ---------------------------------------------------------------- random inputs */

static uint64_t ct_rng = 0x243F6A8885A308D3ull;
static inline uint32_t ct_u32(void) {
    ct_rng ^= ct_rng << 13;
    ct_rng ^= ct_rng >> 7;
    ct_rng ^= ct_rng << 17;
    return (uint32_t)(ct_rng >> 16);
}
static inline float ct_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((ct_u32() >> 8) * (1.0 / 16777216.0));
}

/* per input node: the value range its data is drawn from ([lo, hi), integers for i32/u8) */
#define CT_MAX_NODES 4096
static float ct_lo[CT_MAX_NODES], ct_hi[CT_MAX_NODES];
static int ct_names;

static inline int ct_input(brisk_graph *g, brisk_dtype dt, brisk_shape s, float lo, float hi) {
    char name[32];
    snprintf(name, sizeof name, "in%d", ct_names++);
    int id = brisk_input(g, name, dt, s);
    if (id >= 0 && id < CT_MAX_NODES) ct_lo[id] = lo, ct_hi[id] = hi;
    return id;
}

static inline void ct_fill(void *p, brisk_dtype dt, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) {
        float v = ct_uniform(lo, hi);
        switch (dt) {
        case BRISK_F32: ((float *)p)[i] = v; break;
        case BRISK_I32: ((int32_t *)p)[i] = (int32_t)floorf(v); break;
        case BRISK_U8: ((uint8_t *)p)[i] = (uint8_t)floorf(v); break;
        case BRISK_BF16: ((uint16_t *)p)[i] = brisk_f32_to_bf16(v); break;
        default: ((uint16_t *)p)[i] = brisk_f32_to_f16(v); break;
        }
    }
}

/* ||a - b|| / ||b|| over f32 arrays; NaN where b has none is infinite error */
static inline double ct_rel_err(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY;
        if (isnan(b[i]) || (isinf(b[i]) && a[i] == b[i])) continue;
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---------------------------------------------------------------- CPU vs GPU */

typedef struct ct_pair {
    brisk_plan plan_c, plan_g;
    brisk_exec *cpu, *gpu;
    brisk_backend *be_cpu;
} ct_pair;

static inline void ct_pair_free(ct_pair *p) {
    memset(ct_lo, 0, sizeof ct_lo); /* ranges belong to the graph just used */
    memset(ct_hi, 0, sizeof ct_hi);
    if (p->cpu) brisk_exec_free(p->cpu);
    if (p->gpu) brisk_exec_free(p->gpu);
    brisk_plan_free(&p->plan_c);
    brisk_plan_free(&p->plan_g);
    if (p->be_cpu) p->be_cpu->destroy(p->be_cpu);
    memset(p, 0, sizeof *p);
}

/* The labels an integer input may hold: below the class count of every cross entropy that
 * reads it (the CPU rejects the others, as it should), else 5. */
static inline float ct_label_bound(const brisk_graph *g, int input) {
    int64_t bound = 5;
    for (int k = 0; k < g->n_nodes; k++) {
        const brisk_node *n = &g->nodes[k];
        if (n->op != BRISK_OP_CROSS_ENTROPY) continue;
        int lab = n->in[1];
        while (g->nodes[lab].op == BRISK_OP_RESHAPE) lab = g->nodes[lab].in[0];
        const brisk_shape *s = &g->nodes[n->in[0]].shape;
        if (lab == input && s->ndim >= 1 && s->d[s->ndim - 1] < bound) bound = s->d[s->ndim - 1];
    }
    return (float)bound;
}

/* Plans g (once: both executors share the placement) and creates both executors with the
 * same parameters (init from seed 5) and the same random inputs. */
static inline brisk_status ct_pair_make(brisk_graph *g, brisk_backend *gpu, ct_pair *p, brisk_error *err) {
    memset(p, 0, sizeof *p);
    p->be_cpu = brisk_backend_cpu_new(2);
    brisk_status st = brisk_plan_build(g, &p->plan_c, err);
    if (!st) st = brisk_exec_create(g, &p->plan_c, p->be_cpu, &p->cpu, err);
    if (!st) st = brisk_exec_create(g, &p->plan_c, gpu, &p->gpu, err);
    if (!st) st = brisk_exec_init_params(p->cpu, 5, err);
    if (!st) st = brisk_exec_init_params(p->gpu, 5, err);
    for (int i = 0; i < g->n_inputs && !st; i++) {
        const brisk_input_info *in = &g->inputs[i];
        void *host = malloc(in->bytes + 16);
        int id = in->node;
        float lo = id < CT_MAX_NODES ? ct_lo[id] : 0, hi = id < CT_MAX_NODES ? ct_hi[id] : 0;
        if (lo == hi) /* not made by ct_input: floats in [-2, 2), labels below the class count */
            lo = in->dtype == BRISK_F32 ? -2.0f : 0.0f, hi = in->dtype == BRISK_F32 ? 2.0f : ct_label_bound(g, id);
        ct_fill(host, in->dtype, brisk_shape_numel(&in->shape), lo, hi);
        st = brisk_exec_set_input(p->cpu, i, host, err);
        if (!st) st = brisk_exec_set_input(p->gpu, i, host, err);
        free(host);
    }
    brisk_step_state s = {.seed = 0x1234567890abcdefull, .rng_step = 11, .first_micro = 1, .training = 1};
    if (p->cpu) p->cpu->step = s;
    if (p->gpu) p->gpu->step = s;
    return st;
}

/* Fills a node's GPU buffer with 0xFF bytes (NaN for floats). */
static inline brisk_status ct_poison(brisk_exec *ex, int node, brisk_error *err) {
    const brisk_node *n = &ex->g->nodes[node];
    unsigned char *junk = malloc(n->bytes + 1);
    memset(junk, 0xFF, n->bytes + 1);
    brisk_status st = ex->be->upload(ex->be, ex->ptr[node], junk, n->bytes, err);
    free(junk);
    return st;
}

/* Compares node `id` of both runs: f32 by relative norm error, other dtypes bit for bit. */
static inline int ct_compare(ct_pair *p, int id, double tol, const char *what) {
    const brisk_node *n = &p->cpu->g->nodes[id];
    brisk_error err = {0};
    void *a = malloc(n->bytes + 16), *b = malloc(n->bytes + 16);
    int ok = 1;
    if (brisk_exec_read(p->gpu, id, a, &err) || brisk_exec_read(p->cpu, id, b, &err)) {
        fprintf(stderr, "%s: read failed: %s\n", what, err.msg);
        ok = 0;
    } else if (n->dtype == BRISK_F32) {
        double e = ct_rel_err(a, b, (int64_t)(n->bytes / 4));
        if (!(e <= tol)) {
            fprintf(stderr, "%s: node %d (%s) relative error %.3g > %.3g\n", what, id, brisk_op_name(n->op), e, tol);
            int64_t cnt = 0;
            for (int64_t i = 0; i < (int64_t)(n->bytes / 4) && cnt < 4; i++)
                if (fabsf(((float *)a)[i] - ((float *)b)[i]) > tol * (fabsf(((float *)b)[i]) + 1e-3f) ||
                    isnan(((float *)a)[i]) != isnan(((float *)b)[i]))
                    fprintf(stderr, "  [%lld] gpu %.9g cpu %.9g\n", (long long)i, ((float *)a)[i], ((float *)b)[i]), cnt++;
            ok = 0;
        }
    } else if (memcmp(a, b, n->bytes) != 0) {
        fprintf(stderr, "%s: node %d (%s, %s) differs from the CPU's\n", what, id, brisk_op_name(n->op),
                brisk_dtype_name(n->dtype));
        ok = 0;
    }
    free(a);
    free(b);
    return ok;
}

/* The inputs, as the GPU holds them after the run, must still be what was uploaded. */
static inline int ct_inputs_intact(ct_pair *p) {
    const brisk_graph *g = p->cpu->g;
    brisk_error err = {0};
    int ok = 1;
    for (int i = 0; i < g->n_inputs; i++) {
        const brisk_input_info *in = &g->inputs[i];
        void *a = malloc(in->bytes + 1), *b = malloc(in->bytes + 1);
        if (brisk_exec_read(p->gpu, in->node, a, &err) || brisk_exec_read(p->cpu, in->node, b, &err) ||
            memcmp(a, b, in->bytes) != 0) {
            fprintf(stderr, "input %s was overwritten on the GPU\n", in->name);
            ok = 0;
        }
        free(a);
        free(b);
    }
    return ok;
}

/* First n floats of node id on both backends: relative error (INFINITY if a read fails). */
static inline double ct_prefix_err(ct_pair *p, int id, int64_t n, brisk_error *err) {
    const brisk_node *nd = &p->cpu->g->nodes[id];
    float *a = malloc(nd->bytes + 16), *b = malloc(nd->bytes + 16);
    double e = INFINITY;
    if (!brisk_exec_read(p->gpu, id, a, err) && !brisk_exec_read(p->cpu, id, b, err)) e = ct_rel_err(a, b, n);
    free(a);
    free(b);
    return e;
}

/* The loss and every parameter's gradient of both runs within tol; under fp16 the GPU's
 * gradients carry the loss scale, divided out here. */
static inline void ct_check_grads(ct_pair *p, brisk_backend *be, brisk_gemm_precision prec, double tol,
                                  const char *what) {
    const brisk_graph *g = p->cpu->g;
    brisk_error err = {0};
    CHECKF(ct_compare(p, g->loss, tol, what), "%s: loss", what);
    float scale = 1.0f;
    brisk_backend_stats st;
    if (prec == BRISK_GEMM_FP16 && !be->stats(be, &st, &err) && st.loss_scale > 0) scale = st.loss_scale;
    for (int k = 0; k < g->n_params; k++) {
        const brisk_param_info *pi = &g->params[k];
        size_t n = (size_t)pi->numel;
        float *a = malloc(n * 4 + 4), *b = malloc(n * 4 + 4);
        if (!brisk_exec_read(p->gpu, pi->grad_node, a, &err) && !brisk_exec_read(p->cpu, pi->grad_node, b, &err)) {
            for (size_t i = 0; i < n; i++) a[i] /= scale;
            double e = ct_rel_err(a, b, (int64_t)n);
            CHECKF(e <= tol, "%s: gradient of %s: relative error %.3g > %.3g", what, pi->name, e, tol);
        } else {
            CHECKF(0, "%s: %s", what, err.msg);
        }
        free(a);
        free(b);
    }
}

/* One training step of g (backward built) on the CPU and on `be` from the same parameters and
 * inputs, every gradient poisoned on the GPU first: the loss and gradients within tol. */
static inline void ct_step_and_check_grads(brisk_graph *g, brisk_backend *be, brisk_gemm_precision prec, double tol,
                                           const char *what) {
    brisk_error err = {0};
    ct_pair p;
    if (ct_pair_make(g, be, &p, &err)) {
        CHECKF(0, "%s: %s", what, err.msg);
    } else {
        for (int k = 0; k < g->n_params; k++) ct_poison(p.gpu, g->params[k].grad_node, &err);
        if (brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) || brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) ||
            be->sync(be, &err))
            CHECKF(0, "%s: %s", what, err.msg);
        else
            ct_check_grads(&p, be, prec, tol, what);
    }
    ct_pair_free(&p);
}

/* Node id's whole buffer (workspace included) from ex, malloc'd; NULL when the read fails. */
static inline void *ct_read_node(brisk_exec *ex, int id, brisk_error *err) {
    void *a = malloc(ex->g->nodes[id].bytes + 16);
    if (a && brisk_exec_read(ex, id, a, err)) {
        free(a);
        return NULL;
    }
    return a;
}

/* The GPU run again: captured into a CUDA graph and replayed (capture), or eagerly; synced. */
static inline brisk_status ct_run_again(brisk_backend *be, brisk_exec *gpu, int capture, brisk_error *err) {
    brisk_status st;
    if (capture) {
        int prog = -1;
        st = be->capture_begin(be, err);
        if (!st) st = brisk_exec_run(gpu, BRISK_RUN_TRAIN, err);
        brisk_error e2 = {0};
        brisk_status end = be->capture_end(be, &prog, st ? &e2 : err);
        if (!st) st = end;
        if (!st) st = be->replay(be, prog, err);
    } else {
        st = brisk_exec_run(gpu, BRISK_RUN_TRAIN, err);
    }
    return st ? st : be->sync(be, err);
}

/* A GPU run of p, then the same again captured and replayed (det 0) or eagerly with the
 * backend's deterministic mode (det 1): nodes ids[0 .. n) must keep their bits, the first
 * bytes[i] of each (the whole node where 0: a fused op's workspace may hold cuDNN's reserve
 * space, whose bytes are its own). */
static inline void ct_check_rerun(brisk_backend *be, ct_pair *p, const int *ids, const size_t *bytes, int n, int det,
                                  const char *what) {
    brisk_error err = {0};
    void *eager[8] = {0}, *again[8] = {0};
    if (n > 8 || brisk_exec_run(p->gpu, BRISK_RUN_TRAIN, &err) || be->sync(be, &err)) {
        CHECKF(0, "%s: %s", what, n > 8 ? "more than 8 nodes" : err.msg);
        return;
    }
    for (int i = 0; i < n; i++) eager[i] = ct_read_node(p->gpu, ids[i], &err), ct_poison(p->gpu, ids[i], &err);
    brisk_status st = ct_run_again(be, p->gpu, !det, &err);
    CHECKF(!st, "%s: %s", what, err.msg);
    for (int i = 0; i < n && !st; i++) {
        again[i] = ct_read_node(p->gpu, ids[i], &err);
        size_t len = bytes[i] ? bytes[i] : p->gpu->g->nodes[ids[i]].bytes;
        CHECKF(eager[i] && again[i] && memcmp(eager[i], again[i], len) == 0, "%s: node %d differs between runs",
               what, ids[i]);
    }
    for (int i = 0; i < n; i++) free(eager[i]), free(again[i]);
}

#endif
