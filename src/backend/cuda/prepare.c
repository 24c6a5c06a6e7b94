/* The per-executor plan (be->prepare), made once over the whole training schedule:
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
 *   only when no other buffer sharing those bytes is live in between (checked here on the
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

/* ---------------------------------------------------------------- lifetimes */

typedef struct life {
    int *pos, *last;   /* schedule position of each node (-1: not run) and its base's last use */
    int *readers;      /* scheduled readers of each node's own output (aliases count as many) */
} life;

static void life_free(life *l) {
    free(l->pos);
    free(l->last);
    free(l->readers);
}

static int life_build(const brisk_exec *ex, life *l) {
    const brisk_graph *g = ex->g;
    const brisk_plan *pl = ex->plan;
    int n = g->n_nodes, T = pl->n_train;
    l->pos = malloc(sizeof(int) * (size_t)(n + 1));
    l->last = malloc(sizeof(int) * (size_t)(n + 1));
    l->readers = calloc((size_t)n + 1, sizeof(int));
    if (!l->pos || !l->last || !l->readers) return -1;
    for (int i = 0; i < n; i++) l->pos[i] = l->last[i] = -1;
    for (int s = 0; s < T; s++) l->pos[pl->train_order[s]] = l->last[pl->train_order[s]] = s;
    for (int s = 0; s < T; s++) {
        const brisk_node *nd = &g->nodes[pl->train_order[s]];
        for (int j = 0; j < nd->n_in; j++) {
            int b = base_of(g, nd->in[j]);
            if (l->last[b] < s) l->last[b] = s;
            l->readers[nd->in[j]]++;
        }
    }
    for (int i = 0; i < n; i++) {
        if (g->nodes[i].storage == BRISK_STORE_ALIAS) l->readers[g->nodes[i].alias_of] += 1000; /* viewed: never fuse */
        if (i == g->loss || i == g->output || g->nodes[i].keep) {
            l->readers[i] += 1000;
            l->last[base_of(g, i)] = T;
        }
    }
    return 0;
}

/* Writing node y's buffer at step s (before its own step) is safe when no other arena
 * buffer overlapping it is live at any step in [s, pos(y)). `gone` is the fused matmul,
 * whose own buffer the fused GEMM neither writes nor anyone reads; but the decomposed
 * fallback writes it and then computes y from it elementwise (from_gone), so then y may
 * share its bytes only exactly (in place), never shifted. */
static int early_write_ok(const brisk_exec *ex, const life *l, int y, int s, int gone, int from_gone) {
    const brisk_graph *g = ex->g;
    const brisk_node *ny = &g->nodes[y];
    if (ny->storage != BRISK_STORE_ARENA || l->pos[y] < 0 || ny->offset == SIZE_MAX) return 0;
    size_t lo = ny->offset, hi = ny->offset + ny->bytes;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (t == y || nt->storage != BRISK_STORE_ARENA || nt->offset == SIZE_MAX || l->pos[t] < 0) continue;
        if (nt->offset >= hi || nt->offset + nt->bytes <= lo) continue;
        if (t == gone) {
            if (from_gone && (nt->offset != lo || nt->bytes != ny->bytes)) return 0;
            continue;
        }
        if (l->last[t] >= s && l->pos[t] < l->pos[y]) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- fusion patterns */

static int only_reader_is(const brisk_graph *g, const life *l, int x, int reader) {
    if (l->readers[x] != 1) return 0;
    const brisk_node *r = &g->nodes[reader];
    int hits = 0;
    for (int j = 0; j < r->n_in; j++) hits += r->in[j] == x;
    return hits == 1;
}

/* an unfolded (batch 1) 2-D product whose output rows carry a bias over N */
static int gemm_2d(const brisk_graph *g, int m, int64_t *n_out) {
    cuda_gemm_args a;
    int empty;
    brisk_error e;
    if (cuda_matmul_args(g, m, &a, &empty, &e) || empty || a.batch != 1 || a.K == 0) return 0;
    *n_out = a.N;
    return 1;
}

/* cuda_epilogue -> BRISK_CUDA_EPI_* bit */
static unsigned epi_bit(cuda_epilogue e) { return e == EPI_NONE ? 0u : 1u << (e - 1); }

static int add_fusion(cuda_prep *p, cuda_fusion f) {
    cuda_fusion *grown = realloc(p->fusions, (size_t)(p->n_fusions + 1) * sizeof *grown);
    if (!grown) return -1;
    p->fusions = grown;
    p->fusion_of[f.matmul] = p->n_fusions;
    p->fusions[p->n_fusions++] = f;
    return 0;
}

static int plan_forward(const brisk_exec *ex, const life *l, cuda_prep *p, int m) {
    const brisk_graph *g = ex->g;
    int64_t N;
    if (!gemm_2d(g, m, &N) || l->readers[m] != 1) return 0;
    int b = -1;
    for (int t = 0; t < g->n_nodes && b < 0; t++)
        if (l->pos[t] >= 0 && g->nodes[t].op == BRISK_OP_BIAS_ADD && g->nodes[t].in[0] == m && g->nodes[t].in[1] != m)
            b = t;
    if (b < 0 || !only_reader_is(g, l, m, b)) return 0;
    int s = l->pos[m];
    if (l->pos[base_of(g, g->nodes[b].in[1])] >= s) return 0; /* the bias must exist when the GEMM runs */
    /* an activation reading B, every other reader of B a matching ACT_GRAD */
    int act = -1, others_ok = 1, n_act = 0;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (l->pos[t] < 0) continue;
        for (int j = 0; j < nt->n_in; j++) {
            if (nt->in[j] != b) continue;
            if ((nt->op == BRISK_OP_RELU || (nt->op == BRISK_OP_GELU && nt->attr.kind == BRISK_GELU_TANH)) && j == 0)
                act = t, n_act++;
            else if (!(nt->op == BRISK_OP_ACT_GRAD && j == 1)) others_ok = 0;
        }
    }
    cuda_fusion f = {.epi = EPI_BIAS, .matmul = m, .bias_node = b, .act_node = -1, .grad_node = -1, .sum_node = -1};
    if (act >= 0 && n_act == 1 && others_ok && l->readers[b] < 1000) {
        const brisk_node *na = &g->nodes[act];
        int grads_match = 1;
        for (int t = 0; t < g->n_nodes; t++) {
            const brisk_node *nt = &g->nodes[t];
            if (l->pos[t] >= 0 && nt->op == BRISK_OP_ACT_GRAD && nt->in[1] == b)
                grads_match &= nt->attr.kind == (int)na->op &&
                               (na->op == BRISK_OP_RELU || nt->attr.i1 == BRISK_GELU_TANH) && nt->in[2] == act;
        }
        if (grads_match && na->op == BRISK_OP_RELU && early_write_ok(ex, l, act, s, m, 1)) {
            f.epi = EPI_RELU_BIAS;
            f.act_node = act;
        } else if (grads_match && na->op == BRISK_OP_GELU && N % 8 == 0 && early_write_ok(ex, l, act, s, m, 0) &&
                   early_write_ok(ex, l, b, s, m, 1)) {
            f.epi = EPI_GELU_AUX_BIAS;
            f.act_node = act;
        }
    }
    if (f.epi == EPI_BIAS && !early_write_ok(ex, l, b, s, m, 1)) return 0;
    if (add_fusion(p, f)) return -1;
    p->skip[b] = 1;
    if (f.act_node >= 0) p->skip[f.act_node] = 1;
    return 0;
}

static int plan_backward(const brisk_exec *ex, const life *l, cuda_prep *p, int q) {
    const brisk_graph *g = ex->g;
    const brisk_node *nq = &g->nodes[q];
    if (nq->attr.kind != BRISK_OP_GELU || nq->attr.i1 != BRISK_GELU_TANH || nq->n_in < 3) return 0;
    int h = nq->in[0];
    int64_t N;
    if (g->nodes[h].op != BRISK_OP_MATMUL || l->pos[h] < 0 || p->fusion_of[h] >= 0 || !gemm_2d(g, h, &N) ||
        N % 8 != 0 || !only_reader_is(g, l, h, q) || nq->in[1] == h || nq->in[2] == h)
        return 0;
    int sum = -1;
    for (int t = 0; t < g->n_nodes && sum < 0; t++) {
        const brisk_node *nt = &g->nodes[t];
        int nd = g->nodes[q].shape.ndim;
        if (l->pos[t] >= 0 && nt->op == BRISK_OP_SUM && nt->in[0] == q && nd >= 2 && !nt->attr.keepdim &&
            nt->attr.axes == (1u << (nd - 1)) - 1u && l->readers[t] < 1000)
            sum = t;
    }
    int s = l->pos[h];
    if (l->pos[base_of(g, nq->in[1])] >= s || l->pos[base_of(g, nq->in[2])] >= s) return 0;
    if (sum < 0 || !early_write_ok(ex, l, q, s, h, 1) || !early_write_ok(ex, l, sum, s, h, 0)) return 0;
    cuda_fusion f = {.epi = EPI_DGELU_BGRAD, .matmul = h, .bias_node = -1, .act_node = -1, .grad_node = q,
                     .sum_node = sum};
    if (add_fusion(p, f)) return -1;
    p->skip[q] = p->skip[sum] = 1;
    return 0;
}

/* ---------------------------------------------------------------- residual + layernorm */

/* an ADD with both operands of its own shape (no broadcast) over rows of its last dim */
static int plain_add(const brisk_graph *g, const life *l, int a) {
    const brisk_node *n = &g->nodes[a];
    if (n->op != BRISK_OP_ADD || n->dtype != BRISK_F32 || l->pos[a] < 0 || n->shape.ndim < 1 ||
        brisk_shape_numel(&n->shape) == 0)
        return 0;
    for (int k = 0; k < 2; k++)
        if (!brisk_shape_equal(&g->nodes[n->in[k]].shape, &n->shape)) return 0;
    return 1;
}

/* Nothing scheduled in (from, to] writes over v's buffer, so v can be read at `to`. */
static int intact_until(const brisk_exec *ex, const life *l, int v, int from, int to) {
    const brisk_graph *g = ex->g;
    const brisk_node *nv = &g->nodes[base_of(g, v)];
    if (nv->storage != BRISK_STORE_ARENA) /* inputs, params, consts: nothing writes them during a run */
        return nv->storage == BRISK_STORE_INPUT || nv->storage == BRISK_STORE_PARAM || nv->storage == BRISK_STORE_CONST;
    if (nv->offset == SIZE_MAX) return 0;
    size_t lo = nv->offset, hi = nv->offset + nv->bytes;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (nt->storage != BRISK_STORE_ARENA || nt->offset == SIZE_MAX || l->pos[t] <= from || l->pos[t] > to) continue;
        if (nt->offset < hi && nt->offset + nt->bytes > lo) return 0;
    }
    return 1;
}

static int add_norm(cuda_prep *p, cuda_norm_fusion f) {
    cuda_norm_fusion *grown = realloc(p->norms, (size_t)(p->n_norms + 1) * sizeof *grown);
    if (!grown) return -1;
    p->norms = grown;
    p->norm_of[f.add] = p->n_norms;
    p->norms[p->n_norms++] = f;
    p->skip[f.grad >= 0 ? f.grad : f.ln] = 1;
    return 0;
}

static int plan_norm(const brisk_exec *ex, life *l, cuda_prep *p, int a) {
    const brisk_graph *g = ex->g;
    if (!plain_add(g, l, a)) return 0;
    const brisk_node *na = &g->nodes[a];
    int s = l->pos[a];
    /* backward: the add consumes a norm gradient it alone reads */
    for (int k = 1; k >= 0; k--) {
        int q = na->in[k];
        const brisk_node *nq = &g->nodes[q];
        if (nq->op != BRISK_OP_LAYERNORM_GRAD_X || nq->n_in < 3 || p->skip[q] || l->pos[q] < 0 ||
            na->in[1 - k] == q || !only_reader_is(g, l, q, a) || !brisk_shape_equal(&nq->shape, &na->shape))
            continue;
        int ok = 1;
        for (int j = 0; j < 3 && ok; j++) ok = intact_until(ex, l, nq->in[j], l->pos[q], s);
        if (!ok) continue;
        for (int j = 0; j < 3; j++) {
            int b = base_of(g, nq->in[j]);
            if (l->last[b] < s) l->last[b] = s;
        }
        return add_norm(p, (cuda_norm_fusion){.add = a, .ln = -1, .grad = q});
    }
    /* forward: a layer norm of the sum, written early; no GEMM in between, whose fused
     * epilogue could write early over it in turn. The norm may take the very buffer of an
     * operand the add reads last: the kernel reads each element before it writes it. */
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (nt->op != BRISK_OP_LAYERNORM || nt->n_in < 3 || nt->in[0] != a || l->pos[t] <= s || p->skip[t] ||
            !brisk_shape_equal(&nt->shape, &na->shape) || l->pos[base_of(g, nt->in[1])] >= s ||
            l->pos[base_of(g, nt->in[2])] >= s)
            continue;
        int reused = -1;
        for (int k = 0; k < 2; k++) {
            const brisk_node *op = &g->nodes[na->in[k]];
            if (op->storage == BRISK_STORE_ARENA && op->offset == nt->offset && op->bytes == nt->bytes &&
                l->last[na->in[k]] == s && l->readers[na->in[k]] < 1000)
                reused = na->in[k];
        }
        if (!early_write_ok(ex, l, t, s, reused, 1)) continue;
        int gemm_between = 0;
        for (int k = s + 1; k < l->pos[t] && !gemm_between; k++)
            gemm_between = g->nodes[ex->plan->train_order[k]].op == BRISK_OP_MATMUL;
        if (gemm_between) continue;
        return add_norm(p, (cuda_norm_fusion){.add = a, .ln = t, .grad = -1});
    }
    return 0;
}

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
        if (n->op == BRISK_OP_SUM || n->op == BRISK_OP_MEAN || n->op == BRISK_OP_SUM_TO)
            need = (int64_t)cuk_reduce_scratch_bytes(out, out ? len / out : 0);
        else if (n->op == BRISK_OP_CROSS_ENTROPY || n->op == BRISK_OP_MSE)
            need = (int64_t)cuk_reduce_scratch_bytes(1, len) + (len + 1) * 8;
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

static int plan_fusions(const brisk_exec *ex, life *l, cuda_prep *p) {
    const brisk_graph *g = ex->g;
    /* first: the backward pairs extend lifetimes the GEMM fusions' checks then respect */
    for (int s = 0; s < ex->plan->n_train; s++)
        if (plan_norm(ex, l, p, ex->plan->train_order[s])) return -1;
    for (int s = 0; s < ex->plan->n_train; s++) {
        int id = ex->plan->train_order[s];
        if (g->nodes[id].op == BRISK_OP_MATMUL && plan_forward(ex, l, p, id)) return -1;
    }
    for (int s = 0; s < ex->plan->n_train; s++) {
        int id = ex->plan->train_order[s];
        if (g->nodes[id].op == BRISK_OP_ACT_GRAD && !p->skip[id] && plan_backward(ex, l, p, id)) return -1;
    }
    return 0;
}

cuda_prep *cuda_prep_plan_host(const brisk_exec *ex) {
    cuda_prep *p = prep_alloc(ex);
    life l = {0};
    if (!p || life_build(ex, &l) || plan_fusions(ex, &l, p)) {
        cuda_prep_free(p);
        p = NULL;
    }
    life_free(&l);
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
    life l = {0};
    brisk_status st = BRISK_OK;
    if (!p) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda prepare: out of memory");
    p->in_type = cuda_in_type(cb);
    if (life_build(ex, &l) || (cb->opt.fuse && plan_fusions(ex, &l, p))) goto nomem;
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
    life_free(&l);
    /* fp16: the loss gradient seed carries the loss scale */
    int scaler = cb->opt.precision == BRISK_GEMM_FP16 && g->grad_of && g->loss >= 0 && g->grad_of[g->loss] >= 0 &&
                 g->nodes[g->grad_of[g->loss]].op == BRISK_OP_CONST;
    if (scaler) p->seed = ex->ptr[g->grad_of[g->loss]];
    return cuda_scaler_init(cb, scaler, err);
nomem:
    st = brisk_errorf(err, BRISK_ERR_NOMEM, "cuda prepare: out of memory");
fail:
    life_free(&l);
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
            CU(cuk_act_grad(BRISK_OP_GELU, 1, out, ptr[q->in[1]], ptr[q->in[2]], ptr[f->grad_node], rows * N, s),
               what);
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
