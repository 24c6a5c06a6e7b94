/* The per-executor plan (be->prepare), made once over the whole training schedule. The
 * patterns and lifetime checks are graph/fusion.c's, shared with the CPU backend (rules:
 * N a multiple of 8 for GELU epilogues, the backward GEMM pattern); this file keeps what
 * is CUDA's: the epilogue per fusion, the decomposed fallback, the 16-bit copies.
 *
 * Epilogue fusion. Two patterns become one cuBLASLt call with an epilogue:
 *   forward   M = MATMUL(x, W); B = BIAS_ADD(M, b); A = RELU(B) or GELU_tanh(B)
 *             -> RELU_BIAS (writes A; B unwritten: every reader of B is then the ReLU or a
 *                ReLU ACT_GRAD, which reads y), GELU_AUX_BIAS (writes A and B as aux), or
 *                BIAS alone (writes B) when no such activation follows;
 *   backward  H = MATMUL(dZ, W'); Q = ACT_GRAD_gelu_tanh(H, B, A); S = SUM_rows(Q)
 *             -> DGELU_BGRAD (writes Q, and S as the bias gradient).
 *   The intermediate (M, H) must have no other reader and must not be read after a run.
 *   The fused GEMM runs at the matmul's place in the schedule, so it writes the later
 *   nodes' buffers early; the memory plan reuses buffers by lifetime, so that is allowed
 *   only when no other buffer sharing those bytes is live in between (checked by graph/fusion.c on the
 *   planned offsets; eval and predict run subsequences of the training schedule, so what
 *   holds for it holds for them). The fused-away nodes then return at once from run_node.
 *   When cuBLASLt has no algorithm for an epilogue (or BRISK_CUDA_REFUSE_EPILOGUES refuses
 *   it, to test this path), the same work runs decomposed at the same place (GEMM into the
 *   matmul's own buffer, then bias/activation kernels), writing the same buffers. That path
 *   writes and reads the matmul's buffer, which the fused GEMM does not touch, so a later
 *   node's buffer may share bytes with it only exactly (an elementwise kernel in place).
 *
 * Residual + layernorm. An ADD of two same-shape tensors fused with the layer norm next
 * to it (k_layernorm_residual.cu): forward, ADD then a LAYERNORM of its output runs as one
 * kernel at the ADD's place, writing both (the norm's buffer early, checked as above);
 * backward, ADD(r, LAYERNORM_GRAD_X(dy, x, gamma)) with the ADD the norm gradient's only
 * reader runs at the ADD's place, the norm gradient never written: its inputs are then
 * read after their planned last use, so nothing scheduled in between may overwrite them
 * (checked), and their lifetimes are extended before the GEMM fusions are planned. A
 * pass over the graph rather than an op: every model with the pattern (post-LN, pre-LN,
 * a residual MLP) gets it, the CPU graph and its results are untouched, and the node
 * table keeps one output per node.
 *
 * Precision. In bf16/fp16 every GEMM operand is read as a 16-bit copy made once per step:
 * weights from a copy of the whole parameter arena that the fused optimizer rewrites with
 * each update; activations by their producer right after it runs (one cast however many
 * GEMMs read them); inputs and consts when a GEMM reads them. The master weights, moments
 * and every other op stay fp32.
 *
 * fp16 loss scaling: the loss gradient seed (the const 1.0 autodiff feeds the loss's
 * backward) is overwritten with the loss scale, on the device, by the optimizer. */
#include "backend/cuda/cuda_internal.h"
#include "graph/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LP_ALIGN 256

typedef struct cuda_fusion {
    cuda_epilogue epi;
    int matmul, bias_node, act_node, grad_node, sum_node;
    int failed;        /* cuBLASLt has no algorithm (or refused by option): run decomposed */
} cuda_fusion;

/* residual + layernorm: at node add, with the LAYERNORM (forward) or the LAYERNORM_GRAD_X
 * it consumes (backward, grad >= 0) */
typedef struct cuda_norm_fusion {
    int add, ln, grad;
} cuda_norm_fusion;

struct cuda_prep {
    const brisk_exec *ex;
    const brisk_graph *g;
    int n_nodes;
    uint8_t *skip;     /* computed by a fused GEMM or a fused add */
    int *norm_of;      /* ADD node -> index into norms, else -1 */
    cuda_norm_fusion *norms;
    int n_norms;
    int *fusion_of;    /* matmul node -> index into fusions, else -1 */
    cuda_fusion *fusions;
    int n_fusions;
    void **lp;         /* per base node read by a GEMM: its 16-bit copy */
    uint8_t *lp_leaf;  /* input/const/grad storage: cast when a GEMM reads it */
    void *lp_arena;
    void *params_lp;
    int params_stale;
    float *seed;
    int in_type;
};

int cuda_in_type(const cuda_backend *cb) {
    return cb->opt.precision == BRISK_GEMM_BF16 ? 1 : cb->opt.precision == BRISK_GEMM_FP16 ? 2 : 0;
}

void cuda_prep_free(cuda_prep *p) {
    if (!p) return;
    free(p->skip);
    free(p->norm_of);
    free(p->norms);
    free(p->fusion_of);
    free(p->fusions);
    free(p->lp);
    free(p->lp_leaf);
    if (p->lp_arena) cudaFree(p->lp_arena);
    if (p->params_lp) cudaFree(p->params_lp);
    free(p);
}

static const cuda_prep *prep_for(const cuda_backend *cb, const brisk_graph *g) {
    return cb->prep && cb->prep->g == g && cb->prep->n_nodes == g->n_nodes ? cb->prep : NULL;
}

static int base_of(const brisk_graph *g, int i) {
    return g->nodes[i].storage == BRISK_STORE_ALIAS ? g->nodes[i].alias_of : i;
}

/* ---------------------------------------------------------------- fusion patterns */

/* an unfolded (batch 1) 2-D product whose output rows carry a bias over N */
static int gemm_2d(const brisk_graph *g, int m, int64_t *n_out) {
    cuda_gemm_args a;
    int empty;
    brisk_error e;
    if (cuda_matmul_args(g, m, &a, &empty, &e) || empty || a.batch != 1 || a.K == 0) return 0;
    *n_out = a.N;
    return 1;
}

static int add_fusion(cuda_prep *p, cuda_fusion f) {
    cuda_fusion *grown = realloc(p->fusions, (size_t)(p->n_fusions + 1) * sizeof *grown);
    if (!grown) return -1;
    p->fusions = grown;
    p->fusion_of[f.matmul] = p->n_fusions;
    p->fusions[p->n_fusions++] = f;
    return 0;
}

static int add_norm(cuda_prep *p, cuda_norm_fusion f) {
    cuda_norm_fusion *grown = realloc(p->norms, (size_t)(p->n_norms + 1) * sizeof *grown);
    if (!grown) return -1;
    p->norms = grown;
    p->norm_of[f.add] = p->n_norms;
    p->norms[p->n_norms++] = f;
    return 0;
}

/* cuda_epilogue -> BRISK_CUDA_EPI_* bit */
static unsigned epi_bit(cuda_epilogue e) { return e == EPI_NONE ? 0u : 1u << (e - 1); }

/* ---------------------------------------------------------------- low precision */

static brisk_status plan_lp(cuda_backend *cb, const brisk_exec *ex, cuda_prep *p, brisk_error *err) {
    const brisk_graph *g = ex->g;
    const brisk_plan *pl = ex->plan;
    size_t total = 0;
    size_t *off = calloc((size_t)g->n_nodes + 1, sizeof *off);
    if (!off) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda prepare: out of memory");
    for (int s = 0; s < pl->n_train; s++) {
        const brisk_node *nd = &g->nodes[pl->train_order[s]];
        if (nd->op != BRISK_OP_MATMUL) continue;
        for (int j = 0; j < 2; j++) {
            int b = base_of(g, nd->in[j]);
            brisk_storage st = g->nodes[b].storage;
            if (st == BRISK_STORE_PARAM || off[b]) continue;
            off[b] = total + 1;
            total += ((size_t)g->nodes[b].bytes / 2 + LP_ALIGN - 1) / LP_ALIGN * LP_ALIGN;
            p->lp_leaf[b] = st != BRISK_STORE_ARENA;
        }
    }
    brisk_status rs = BRISK_OK;
    if (total) {
        cudaError_t e = cudaMalloc(&p->lp_arena, total);
        if (e != cudaSuccess) rs = cuda_fail(err, e, "cudaMalloc", "16-bit GEMM operand copies");
    }
    for (int i = 0; i < g->n_nodes && !rs; i++)
        if (off[i]) p->lp[i] = (char *)p->lp_arena + off[i] - 1;
    free(off);
    if (rs) return rs;
    size_t pbytes = (size_t)g->n_param_floats * 2;
    CU(cudaMalloc(&p->params_lp, pbytes ? pbytes : 256), "16-bit copy of the parameters");
    p->params_stale = 1;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- prepare / forget */

void cuda_forget(brisk_backend *be, const brisk_exec *ex) {
    cuda_backend *cb = be->impl;
    if (!cb->prep || cb->prep->ex != ex) return;
    cuda_use_device(cb);
    cudaStreamSynchronize(cb->compute);
    cuda_programs_clear(cb); /* captured programs point into this executor's buffers */
    cuda_retired_free(cb);   /* what only those programs still used */
    cuda_rnn_forget(cb);
    cuda_conv_forget(cb);
    cuda_prep_free(cb->prep);
    cb->prep = NULL;
    cb->inputs = NULL;
    cb->input_bytes = 0;
    brisk_error e;
    cuda_scaler_init(cb, 0, &e);
}

static size_t scratch_need(const brisk_graph *g, const brisk_plan *pl) {
    size_t most = cuk_reduce_scratch_bytes(1, g->n_param_floats);
    for (int s = 0; s < pl->n_train; s++) {
        const brisk_node *n = &g->nodes[pl->train_order[s]];
        const brisk_node *x = n->n_in ? &g->nodes[n->in[0]] : n;
        int64_t len = brisk_shape_numel(&x->shape), out = brisk_shape_numel(&n->shape), need = 0;
        if (n->op == BRISK_OP_SUM || n->op == BRISK_OP_MEAN || n->op == BRISK_OP_SUM_TO ||
            (n->op == BRISK_OP_GRU_GRAD_W && n->shape.ndim == 1)) /* d b_hh: sums as wide as d xp's */
            need = (int64_t)cuk_reduce_scratch_bytes(out, out ? len / out : 0);
        else if (n->op == BRISK_OP_CROSS_ENTROPY || n->op == BRISK_OP_MSE)
            need = (int64_t)cuk_reduce_scratch_bytes(1, len) + (len + 1) * 8;
        else if (n->op == BRISK_OP_POINTWISE_LOSS || n->op == BRISK_OP_POINTWISE_LOSS_GRAD)
            need = (int64_t)cuk_loss_scratch_bytes();
        if ((size_t)need > most) most = (size_t)need;
    }
    return most;
}

/* The host half of a plan: node tables, nothing on the device. */
static cuda_prep *prep_alloc(const brisk_exec *ex) {
    const brisk_graph *g = ex->g;
    cuda_prep *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->ex = ex;
    p->g = g;
    p->n_nodes = g->n_nodes;
    p->skip = calloc((size_t)g->n_nodes + 1, 1);
    p->norm_of = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    p->fusion_of = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    p->lp = calloc((size_t)g->n_nodes + 1, sizeof *p->lp);
    p->lp_leaf = calloc((size_t)g->n_nodes + 1, 1);
    if (!p->skip || !p->norm_of || !p->fusion_of || !p->lp || !p->lp_leaf) {
        cuda_prep_free(p);
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++) p->fusion_of[i] = p->norm_of[i] = -1;
    return p;
}

/* The shared plan (graph/fusion.c) in this backend's tables: GEMMs with a cuBLASLt
 * epilogue (N a multiple of 8 for the GELU ones), residual + layernorm pairs. */
static int plan_fusions(const brisk_exec *ex, cuda_prep *p) {
    static const brisk_fusion_rules rules = {.gemm_2d = gemm_2d, .gelu_n_multiple = 8, .gemm_backward = 1, .norms = 1};
    brisk_fusion_plan fp;
    if (brisk_fusion_plan_build(ex, &rules, &fp)) return -1;
    int rc = 0;
    memcpy(p->skip, fp.skip, (size_t)ex->g->n_nodes);
    for (int i = 0; i < fp.n && !rc; i++) {
        const brisk_fusion *f = &fp.list[i];
        if (f->kind == BRISK_FUSE_ADD_NORM || f->kind == BRISK_FUSE_ADD_NORM_GRAD) {
            rc = add_norm(p, (cuda_norm_fusion){.add = f->at, .ln = f->ln, .grad = f->grad});
            continue;
        }
        cuda_epilogue epi = f->kind == BRISK_FUSE_GEMM_BIAS_RELU ? EPI_RELU_BIAS
                            : f->kind == BRISK_FUSE_GEMM_BIAS_GELU ? EPI_GELU_AUX_BIAS
                            : f->kind == BRISK_FUSE_GEMM_DGELU_BGRAD ? EPI_DGELU_BGRAD : EPI_BIAS;
        rc = add_fusion(p, (cuda_fusion){.epi = epi, .matmul = f->matmul, .bias_node = f->bias, .act_node = f->act,
                                         .grad_node = f->grad, .sum_node = f->sum});
    }
    brisk_fusion_plan_free(&fp);
    return rc;
}

cuda_prep *cuda_prep_plan_host(const brisk_exec *ex) {
    cuda_prep *p = prep_alloc(ex);
    if (p && plan_fusions(ex, p)) {
        cuda_prep_free(p);
        p = NULL;
    }
    return p;
}

void cuda_prep_node(const cuda_prep *p, int id, cuda_node_plan *np) {
    memset(np, 0, sizeof *np);
    np->skip = p->skip[id];
    np->bias_node = np->act_node = np->grad_node = np->sum_node = np->norm_ln = np->norm_grad = -1;
    if (p->fusion_of[id] >= 0) {
        const cuda_fusion *f = &p->fusions[p->fusion_of[id]];
        np->epi = f->epi;
        np->bias_node = f->bias_node, np->act_node = f->act_node, np->grad_node = f->grad_node;
        np->sum_node = f->sum_node;
    }
    if (p->norm_of[id] >= 0) {
        np->norm_ln = p->norms[p->norm_of[id]].ln;
        np->norm_grad = p->norms[p->norm_of[id]].grad;
    }
}

brisk_status cuda_prepare(brisk_backend *be, const brisk_exec *ex, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (cb->prep) cuda_forget(be, cb->prep->ex);
    const brisk_graph *g = ex->g;
    cuda_prep *p = prep_alloc(ex);
    brisk_status st = BRISK_OK;
    if (!p) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda prepare: out of memory");
    p->in_type = cuda_in_type(cb);
    if (cb->opt.fuse && plan_fusions(ex, p)) goto nomem;
    int refused = 0;
    for (int i = 0; i < p->n_fusions; i++)
        if (cb->opt.refuse_epilogues & epi_bit(p->fusions[i].epi)) p->fusions[i].failed = 1, refused++;
    if (refused)
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %d of %d planned epilogue fusions run decomposed (GEMM, then "
                  "kernels): refused by %s", refused, p->n_fusions, BRISK_CUDA_REFUSE_ENV);
    if (p->in_type && (st = plan_lp(cb, ex, p, err))) goto fail;
    if ((st = cuda_rnn_prepare(cb, g, err))) goto fail;
    if ((st = cuda_conv_prepare(cb, g, err))) goto fail;
    void *scratch;
    if ((st = cuda_scratch(cb, scratch_need(g, ex->plan), &scratch, err))) goto fail;
    cb->prep = p;
    cb->inputs = ex->inputs;
    cb->input_bytes = ex->plan->input_bytes;
    /* fp16: the loss gradient seed carries the loss scale */
    int scaler = cb->opt.precision == BRISK_GEMM_FP16 && g->grad_of && g->loss >= 0 && g->grad_of[g->loss] >= 0 &&
                 g->nodes[g->grad_of[g->loss]].op == BRISK_OP_CONST;
    if (scaler) p->seed = ex->ptr[g->grad_of[g->loss]];
    return cuda_scaler_init(cb, scaler, err);
nomem:
    st = brisk_errorf(err, BRISK_ERR_NOMEM, "cuda prepare: out of memory");
fail:
    cuda_prep_free(p);
    return st;
}

/* ---------------------------------------------------------------- run-time queries */

int cuda_prep_covers(const cuda_backend *cb, const brisk_graph *g) { return prep_for(cb, g) != NULL; }

int cuda_prep_skips(const cuda_backend *cb, const brisk_graph *g, int id) {
    const cuda_prep *p = prep_for(cb, g);
    return p && p->skip[id];
}

void cuda_prep_fusions(const cuda_backend *cb, int *active, int *decomposed) {
    *active = *decomposed = 0;
    for (int i = 0; cb->prep && i < cb->prep->n_fusions; i++) {
        if (cb->prep->fusions[i].failed) ++*decomposed;
        else ++*active;
    }
}

int cuda_prep_norm_fusions(const cuda_backend *cb) { return cb->prep ? cb->prep->n_norms : 0; }

const cuda_prep *cuda_prep_of(const cuda_backend *cb, const brisk_graph *g) { return prep_for(cb, g); }

void *const *cuda_prep_ptrs(const cuda_prep *p) { return p->ex->ptr; }

float *cuda_prep_seed(const cuda_backend *cb) { return cb->prep ? cb->prep->seed : NULL; }

/* any float of the arena, not only its start: ZeRO-1 updates (and casts) a shard of it */
void *cuda_prep_params_lp(const cuda_backend *cb, const float *params) {
    const cuda_prep *p = cb->prep;
    if (!p || !p->params_lp) return NULL;
    const char *a = (const char *)params, *lo = p->ex->params, *hi = lo + p->ex->plan->param_bytes;
    return a >= lo && a < hi ? (char *)p->params_lp + (a - lo) / 2 : NULL;
}

void cuda_prep_touch(cuda_backend *cb, const void *dst, size_t bytes) {
    cuda_prep *p = cb->prep;
    if (!p || !p->params_lp) return;
    const char *a = dst, *lo = p->ex->params, *hi = lo + p->ex->plan->param_bytes;
    if (a < hi && a + bytes > lo) p->params_stale = 1;
}

static brisk_status refresh_params(cuda_backend *cb, cuda_prep *p, brisk_error *err) {
    if (!p->params_stale) return BRISK_OK;
    CU(cuk_cast_lp(p->ex->params, p->params_lp, p->g->n_param_floats, p->in_type == 2, cb->compute),
       "casting the parameters to 16 bits");
    p->params_stale = 0;
    return BRISK_OK;
}

brisk_status cuda_prep_refresh_params(cuda_backend *cb, brisk_error *err) {
    return cb->prep && cb->prep->params_lp ? refresh_params(cb, cb->prep, err) : BRISK_OK;
}

brisk_status cuda_prep_operand(cuda_backend *cb, const brisk_graph *g, int id, int i, const void *f32,
                               const void **out, void *scratch, brisk_error *err) {
    cuda_prep *p = cb->prep && prep_for(cb, g) ? cb->prep : NULL;
    int fp16 = cuda_in_type(cb) == 2;
    int b = base_of(g, g->nodes[id].in[i]);
    if (p && g->nodes[b].storage == BRISK_STORE_PARAM) {
        brisk_status st = refresh_params(cb, p, err);
        if (st) return st;
        *out = (const char *)p->params_lp + ((const char *)f32 - (const char *)p->ex->params) / 2;
        return BRISK_OK;
    }
    if (p && p->lp[b]) {
        if (p->lp_leaf[b])
            CU(cuk_cast_lp(f32, p->lp[b], brisk_shape_numel(&g->nodes[b].shape), fp16, cb->compute), "GEMM operand cast");
        *out = p->lp[b];
        return BRISK_OK;
    }
    /* not prepared (a lone node): cast into scratch */
    if (!scratch) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: no 16-bit copy planned for input %d of node %d", i, id);
    CU(cuk_cast_lp(f32, scratch, brisk_shape_numel(&g->nodes[g->nodes[id].in[i]].shape), fp16, cb->compute),
       "GEMM operand cast");
    *out = scratch;
    return BRISK_OK;
}

brisk_status cuda_prep_after(cuda_backend *cb, const brisk_graph *g, int id, brisk_error *err) {
    cuda_prep *p = cb->prep && prep_for(cb, g) ? cb->prep : NULL;
    if (!p || !p->lp[id] || p->lp_leaf[id]) return BRISK_OK;
    CU(cuk_cast_lp(p->ex->ptr[id], p->lp[id], brisk_shape_numel(&g->nodes[id].shape), p->in_type == 2, cb->compute),
       "16-bit copy of a GEMM operand");
    return BRISK_OK;
}

/* The fused GEMM, or its decomposition at the same place when cuBLASLt has no algorithm. */
brisk_status cuda_prep_fused(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             int *done, brisk_error *err) {
    *done = 0;
    cuda_prep *p = cb->prep && prep_for(cb, g) ? cb->prep : NULL;
    if (!p || p->fusion_of[id] < 0) return BRISK_OK;
    cuda_fusion *f = &p->fusions[p->fusion_of[id]];
    void *const *ptr = p->ex->ptr;
    cuda_gemm_args a;
    int empty;
    brisk_status st = cuda_matmul_args(g, id, &a, &empty, err);
    if (st) return st;
    char what[64];
    snprintf(what, sizeof what, "fused matmul (node %d)", id);
    a.what = what;
    a.in_type = p->in_type;
    a.A = in[0], a.B = in[1];
    if (a.in_type && ((st = cuda_prep_operand(cb, g, id, 0, in[0], &a.A, NULL, err)) ||
                      (st = cuda_prep_operand(cb, g, id, 1, in[1], &a.B, NULL, err))))
        return st;
    int64_t rows = a.M, N = a.N;
    const float *bias = f->bias_node >= 0 ? ptr[g->nodes[f->bias_node].in[1]] : NULL;
    float *outB = f->bias_node >= 0 ? ptr[f->bias_node] : NULL, *outA = f->act_node >= 0 ? ptr[f->act_node] : NULL;
    if (!f->failed) {
        a.epi = f->epi;
        a.bias = bias;
        if (f->epi == EPI_DGELU_BGRAD) {
            const brisk_node *q = &g->nodes[f->grad_node];
            a.C = ptr[f->grad_node];
            a.aux = ptr[q->in[1]];
            a.bias_grad = ptr[f->sum_node];
        } else {
            a.C = f->epi == EPI_BIAS ? outB : outA;
            a.aux = f->epi == EPI_GELU_AUX_BIAS ? outB : NULL;
        }
        st = cuda_gemm(cb, &a, err);
        if (st == BRISK_ERR_UNSUPPORTED) {
            f->failed = 1; /* so this is said once per fusion */
            brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: cuBLASLt has no algorithm for the epilogue of %s "
                      "([%lld, %lld] x [%lld, %lld]); it runs decomposed (GEMM, then kernels)", what, (long long)a.M,
                      (long long)a.K, (long long)a.K, (long long)a.N);
        } else if (st) {
            return st;
        }
    }
    if (f->failed) { /* the same buffers written by GEMM + kernels, still at this step */
        a.epi = EPI_NONE;
        a.C = out;
        if ((st = cuda_gemm(cb, &a, err))) return st;
        cudaStream_t s = cb->compute;
        if (f->epi == EPI_DGELU_BGRAD) {
            const brisk_node *q = &g->nodes[f->grad_node];
            int64_t d[2] = {rows, N};
            int red[2] = {1, 0};
            void *scratch;
            if ((st = cuda_scratch(cb, cuk_reduce_scratch_bytes(N, rows), &scratch, err))) return st;
            CU(cuk_act_grad(BRISK_OP_GELU, 1, 0.0f, 0.0f, out, ptr[q->in[1]], ptr[q->in[2]], ptr[f->grad_node],
                            rows * N, s), what);
            CU(cuk_reduce(ptr[f->grad_node], ptr[f->sum_node], 2, d, red, 1.0f, scratch, s), what);
        } else if (f->epi == EPI_RELU_BIAS) {
            CU(cuk_bias_act(out, bias, outA, rows, N, BRISK_OP_RELU, 0, s), what);
        } else {
            CU(cuk_bias_act(out, bias, outB, rows, N, 0, 0, s), what);
            if (f->epi == EPI_GELU_AUX_BIAS) CU(cuk_unary(BRISK_OP_GELU, 1, 0, 0, outB, outA, rows * N, s), what);
        }
    }
    /* the nodes this GEMM produced: their 16-bit copies */
    int made[3] = {f->bias_node, f->act_node, f->grad_node};
    for (int k = 0; k < 3; k++)
        if (made[k] >= 0 && !(f->epi == EPI_RELU_BIAS && made[k] == f->bias_node) &&
            (st = cuda_prep_after(cb, g, made[k], err)))
            return st;
    *done = 1;
    return BRISK_OK;
}
