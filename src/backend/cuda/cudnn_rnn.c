/* LSTM, LSTM_GRAD, LSTM_GRAD_W and GRU, GRU_GRAD, GRU_GRAD_W (src/ops/sequence.c) on the GPU,
 * the recurrence through cuDNN's RNN API (CUDNN_LSTM, CUDNN_GRU). cuDNN is loaded at run time,
 * once per process; without it (or without cudnn.h at build time) cuda_rnn_missing says why
 * and the backend answers no for these ops.
 *
 * The op is one direction of one layer run on xp = x w_ih^T (one GEMM outside the op), and
 * its backward must hand back the pre-activation gradients of the input side (d xp), which
 * cuDNN exposes only as the input gradient dx = W_in^T d pre. So cuDNN sees a one-layer RNN
 * of input size G = gates x H whose input matrix is the identity: forward pre = I xp + b +
 * w_hh h, and cudnnRNNBackwardData_v8's dx is exactly LSTM_GRAD's and GRU_GRAD's d xp. The
 * identity costs a [BT, G] x [G, G] GEMM each way, one large GEMM off the sequential path.
 * Biases, in CUDNN_RNN_DOUBLE_BIAS (PyTorch's mode): the LSTM's summed bias in the input-bias
 * slots, the recurrent ones 0; the GRU's b_ih and b_hh in theirs, since cuDNN's GRU is
 * PyTorch's (n = tanh(W_n x + b_Wn + r (R_n h + b_Rn)), linear layers 0-2 and 3-5 the gates
 * r, z, n). A reverse node flips xp in time on the way in and h on the way out (k_rnn.cu).
 *
 * d w_hh (LSTM_GRAD_W, GRU_GRAD_W) = d hh^T h_prev over every (b, t) is cuBLASLt GEMMs as on
 * the CPU, reading the h_prev plane the forward writes: cudnnRNNBackwardWeights_v8 would also
 * compute the identity's gradient, 4x the wanted work. The GRU's recurrent side differs from
 * d xp in its n part, d hh_n = d xp_n r, and cuDNN keeps r in its reserve space, which is
 * opaque: the forward computes r again for every step (one [BT, H] x [H, H] GEMM of h_prev
 * and w_hr, and a pass adding xp_r and the biases, k_rnn.cu) into a plane of its workspace,
 * and GRU_GRAD writes d hh_n from it after cuDNN's dx. d b_hh: d b_ih's r and z parts, and
 * the column sums of d hh_n (k_reduce.cu).
 *
 * Memory (rnn_layout.h): per node a plan made at prepare (or, for a graph run without one,
 * at its first eager run) owns the descriptors, the weight space (identity written once;
 * w_hh and the biases copied in by each forward, device to device), devSeqLengths, cuDNN's
 * workspace and, for reverse nodes, the flipped sequences. cuDNN's reserve space lives in the
 * node's own workspace when it fits, else in the plan. A step allocates and synchronises
 * nothing, so it can be captured into a CUDA graph.
 *
 * Precision: the data, weights and state are fp32 throughout. fp32: CUDNN_FMA_MATH (no
 * tensor cores). TF32 and bf16: CUDNN_DEFAULT_MATH, cuDNN's TF32 tensor-core GEMMs: the one
 * 16-bit mode cuDNN offers fp32 data, ALLOW_CONVERSION, rounds to fp16, whose range would
 * flush small gate gradients when, as under bf16, no loss scale lifts them. fp16:
 * CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, fp16 tensor-core GEMMs on the loss-scaled values,
 * the cell state kept in fp32.
 *
 * Determinism: CUDNN_RNN_ALGO_STANDARD; no atomics in what brisk asks of it (no
 * cudnnRNNBackwardWeights), and the d w_hh GEMMs follow the backend's deterministic mode. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/rnn_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])

static int is_gru_op(brisk_op op) {
    return op == BRISK_OP_GRU || op == BRISK_OP_GRU_GRAD || op == BRISK_OP_GRU_GRAD_W;
}

/* B, T, H and direction of recurrent node id (op LSTM or GRU), checked as the CPU backend
 * checks them. */
static brisk_status rnn_dims(const brisk_graph *g, int id, brisk_op op, int64_t d[3], int *reverse,
                             brisk_error *err) {
    int gates = op == BRISK_OP_GRU ? 3 : 4;
    d[0] = d[1] = d[2] = 0;
    *reverse = 0;
    if (id < 0 || id >= g->n_nodes || g->nodes[id].op != op || g->nodes[id].shape.ndim != 3)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: node %d is not %s [B, T, H]", brisk_op_name(op), id,
                            gates == 3 ? "a GRU" : "an LSTM");
    const brisk_node *l = NODE(g, id);
    for (int i = 0; i < 3; i++) d[i] = l->shape.d[i];
    *reverse = l->attr.kind != 0;
    if (l->bytes < (size_t)(rnn_planes(gates) * d[0] * d[1] * d[2]) * sizeof(float))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %zu bytes leave no room for the workspace",
                            brisk_op_name(op), id, l->bytes);
    return BRISK_OK;
}

static int shape_is(const brisk_shape *s, int ndim, int64_t a, int64_t b, int64_t c) {
    int64_t want[3] = {a, b, c};
    if (s->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (s->d[i] != want[i]) return 0;
    return 1;
}

/* GRU_GRAD's node (GRU_GRAD_W's input 0): d xp [B, T, 3H] and d hh_n after it */
static int gru_grad_is(const brisk_node *n, int64_t B, int64_t T, int64_t H) {
    return shape_is(&n->shape, 3, B, T, 3 * H) && n->bytes >= (size_t)(4 * B * T * H) * sizeof(float);
}

/* The node's shapes against its recurrent node's; *rnn_id = that node. */
static brisk_status check_node(const brisk_graph *g, int id, int *rnn_id, int64_t d[3], int *reverse,
                               brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int gru = is_gru_op(n->op), fwd = n->op == BRISK_OP_LSTM || n->op == BRISK_OP_GRU;
    *rnn_id = -1, *reverse = 0;
    d[0] = d[1] = d[2] = 0;
    if (!fwd && n->n_in < 2)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): needs the %s node as input 1, got %d inputs",
                            brisk_op_name(n->op), id, gru ? "GRU" : "LSTM", n->n_in);
    *rnn_id = fwd ? id : n->in[1];
    brisk_status st = rnn_dims(g, *rnn_id, gru ? BRISK_OP_GRU : BRISK_OP_LSTM, d, reverse, err);
    if (st) return st;
    int64_t B = d[0], T = d[1], H = d[2], G = (gru ? 3 : 4) * H;
    int ok;
    if (fwd)
        ok = n->n_in == (gru ? 4 : 3) && shape_is(&IN_NODE(g, id, 0)->shape, 3, B, T, G) &&
             shape_is(&IN_NODE(g, id, 1)->shape, 2, G, H, 0) && shape_is(&IN_NODE(g, id, 2)->shape, 1, G, 0, 0) &&
             (!gru || shape_is(&IN_NODE(g, id, 3)->shape, 1, G, 0, 0));
    else if (n->op == BRISK_OP_LSTM_GRAD || n->op == BRISK_OP_GRU_GRAD)
        ok = n->n_in == 3 && shape_is(&IN_NODE(g, id, 0)->shape, 3, B, T, H) &&
             shape_is(&IN_NODE(g, id, 2)->shape, 2, G, H, 0) &&
             (gru ? gru_grad_is(n, B, T, H) : shape_is(&n->shape, 3, B, T, G));
    else if (gru) /* d w_hh from (dxp, gru); d b_hh from (dxp, gru, d b_ih) */
        ok = gru_grad_is(IN_NODE(g, id, 0), B, T, H) &&
             ((n->n_in == 2 && shape_is(&n->shape, 2, G, H, 0)) ||
              (n->n_in == 3 && shape_is(&n->shape, 1, G, 0, 0) && shape_is(&IN_NODE(g, id, 2)->shape, 1, G, 0, 0)));
    else
        ok = n->n_in == 2 && shape_is(&IN_NODE(g, id, 0)->shape, 3, B, T, G) && shape_is(&n->shape, 2, G, H, 0);
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): shapes do not fit %s of B %lld, T %lld, H %lld",
                            brisk_op_name(n->op), id, gru ? "a GRU" : "an LSTM", (long long)B, (long long)T,
                            (long long)H);
    return BRISK_OK;
}

/* LSTM_GRAD_W, GRU_GRAD_W: d w_hh = d hh^T h_prev, or (GRU, out [3H]) d b_hh = d hh's row
 * sums; needs no cuDNN, only the h_prev plane the forward wrote. The GRU's d hh is d xp but
 * for its n part, d hh_n after d xp: one GEMM over all of d xp, then the n rows again; d b_hh
 * is d b_ih's r and z parts (input 2: the same sums) and the sums of d hh_n. */
static brisk_status run_grad_w(cuda_backend *cb, const brisk_graph *g, int id, const int64_t d[3],
                               const void *const *in, void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int gru = n->op == BRISK_OP_GRU_GRAD_W, gates = gru ? 3 : 4;
    int64_t B = d[0], T = d[1], H = d[2], BT = B * T, G = gates * H;
    char what[64];
    snprintf(what, sizeof what, "%s (node %d)", brisk_op_name(n->op), id);
    int64_t len = brisk_shape_numel(&n->shape);
    if (len == 0) return BRISK_OK;
    if (BT == 0) {
        CU(cudaMemsetAsync(out, 0, (size_t)len * sizeof(float), cb->compute), what);
        return BRISK_OK;
    }
    const float *dhn = (const float *)in[0] + BT * G;
    if (n->shape.ndim == 1) { /* GRU's d b_hh */
        void *scratch;
        brisk_status st = cuda_scratch(cb, cuk_reduce_scratch_bytes(H, BT), &scratch, err);
        if (st) return st;
        int64_t d1[2] = {BT, H};
        int red[2] = {1, 0};
        CU(cudaMemcpyAsync(out, in[2], (size_t)(2 * H) * sizeof(float), cudaMemcpyDeviceToDevice, cb->compute), what);
        CU(cuk_reduce(dhn, (float *)out + 2 * H, 2, d1, red, 1.0f, scratch, cb->compute), what);
        return BRISK_OK;
    }
    const void *hprev = (const char *)in[1] + rnn_hprev_at(B, T, H, gates);
    cuda_gemm_args a = {.ta = 1, .tb = 0, .M = G, .N = H, .K = BT, .batch = 1, .A = in[0], .B = hprev, .C = out,
                        .in_type = 0, .epi = EPI_NONE, .what = what};
    brisk_status st = cuda_gemm(cb, &a, err);
    if (st || !gru) return st;
    a.M = H, a.A = dhn, a.C = (float *)out + 2 * H * H;
    return cuda_gemm(cb, &a, err);
}

#if BRISK_HAVE_CUDNN_H

#include "backend/cuda/cudnn_load.h"

#include <pthread.h>

/* ---------------------------------------------------------------- cuDNN (cudnn_load.c) */

static char rnn_missing[300];
static pthread_once_t rnn_once = PTHREAD_ONCE_INIT;
static void rnn_why(void) {
    const char *m = cuda_dnn_missing(CUDA_DNN_RNN);
    if (m) snprintf(rnn_missing, sizeof rnn_missing, "LSTM and GRU on CUDA need %s", m);
}

const char *cuda_rnn_missing(void) {
    pthread_once(&rnn_once, rnn_why);
    return rnn_missing[0] ? rnn_missing : NULL;
}

/* ---------------------------------------------------------------- plans */

typedef struct rnn_plan {
    const brisk_graph *g;
    int node;
    int gates;                  /* 4: LSTM, 3: GRU */
    int64_t B, T, H;
    int reverse, math;
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd;
    cudnnDropoutDescriptor_t drop;
    void *wspace;
    size_t wbytes;
    rnn_run rec[4], bias[4], bias_rec[4]; /* w_hh and the biases into the weight space, in floats */
    int n_rec, n_bias, n_bias_rec;        /* (bias_rec: the GRU's b_hh) */
    void *work;
    size_t work_bytes;
    void *reserve;              /* NULL: in the node's workspace */
    size_t reserve_bytes;
    int32_t *seq;               /* devSeqLengths: T for every sequence */
    char *flip;                 /* reverse: x or dx [B, T, G] | dy [B, T, H] | y [B, T, H] */
    size_t flip_dy, flip_y;     /* their byte offsets, 256-byte aligned */
} rnn_plan;

struct cuda_rnn {
    cudnnHandle_t handle;
    rnn_plan *plans;
    int n, cap;
};

static const char *cell_name(const rnn_plan *p) { return p->gates == 3 ? "GRU" : "LSTM"; }

static void descs_free(rnn_plan *p) {
    if (p->rnn) cuda_dnn.cudnnDestroyRNNDescriptor(p->rnn);
    if (p->xd) cuda_dnn.cudnnDestroyRNNDataDescriptor(p->xd);
    if (p->yd) cuda_dnn.cudnnDestroyRNNDataDescriptor(p->yd);
    if (p->hd) cuda_dnn.cudnnDestroyTensorDescriptor(p->hd);
    if (p->drop) cuda_dnn.cudnnDestroyDropoutDescriptor(p->drop);
    p->rnn = NULL, p->xd = p->yd = NULL, p->hd = NULL, p->drop = NULL;
}

static void plan_free(rnn_plan *p) {
    descs_free(p);
    void *bufs[5] = {p->wspace, p->work, p->reserve, p->seq, p->flip};
    for (int i = 0; i < 5; i++)
        if (bufs[i]) cudaFree(bufs[i]);
    memset(p, 0, sizeof *p);
}

static int math_type(brisk_gemm_precision precision) {
    switch (precision) {
    case BRISK_GEMM_FP32: return CUDNN_FMA_MATH;
    case BRISK_GEMM_FP16: return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    default: return CUDNN_DEFAULT_MATH;
    }
}

/* Where linLayerID's matrix (or bias) starts in floats from the weight space, checking its
 * dims are rows x cols (bias: rows). */
static brisk_status param_at(cudnnHandle_t h, rnn_plan *p, int lin, int bias, int64_t rows, int64_t cols, int64_t *at,
                             const char *what, brisk_error *err) {
    cudnnTensorDescriptor_t md = NULL, bd = NULL;
    void *ma = NULL, *ba = NULL;
    brisk_status st = BRISK_OK;
    cudnnStatus_t s;
    if ((s = cuda_dnn.cudnnCreateTensorDescriptor(&md)) || (s = cuda_dnn.cudnnCreateTensorDescriptor(&bd)) ||
        (s = cuda_dnn.cudnnGetRNNWeightParams(h, p->rnn, 0, p->wbytes, p->wspace, lin, md, &ma, bd, &ba))) {
        st = cuda_dnn_fail(err, s, "cudnnGetRNNWeightParams", what);
        goto out;
    }
    cudnnDataType_t dt;
    int nd = 0, dims[8] = {0}, strides[8] = {0};
    if ((s = cuda_dnn.cudnnGetTensorNdDescriptor(bias ? bd : md, 8, &dt, &nd, dims, strides))) {
        st = cuda_dnn_fail(err, s, "cudnnGetTensorNdDescriptor", what);
        goto out;
    }
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= dims[i];
    void *addr = bias ? ba : ma;
    int ok = addr && nd >= 2 && dt == CUDNN_DATA_FLOAT && numel == rows * cols && strides[nd - 1] == 1 &&
             (bias || (dims[nd - 2] == rows && dims[nd - 1] == cols && strides[nd - 2] == cols));
    if (!ok) {
        st = brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: cuDNN's %s %s %d is %d-D [%d, %d, %d], not [%lld, %lld] "
                          "fp32 row-major (%s)", cell_name(p), bias ? "bias" : "matrix", lin, nd, dims[0], dims[1],
                          dims[2], (long long)rows, (long long)cols, what);
        goto out;
    }
    ptrdiff_t off = (const char *)addr - (const char *)p->wspace;
    if (off < 0 || off % (ptrdiff_t)sizeof(float)) {
        st = brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: cuDNN placed %s parameter %d at byte %td (%s)", cell_name(p),
                          lin, off, what);
        goto out;
    }
    *at = off / (ptrdiff_t)sizeof(float);
out:
    if (md) cuda_dnn.cudnnDestroyTensorDescriptor(md);
    if (bd) cuda_dnn.cudnnDestroyTensorDescriptor(bd);
    return st;
}

/* The weight space: zeros, the identity input matrix, and the copy runs for w_hh and the
 * biases. */
static brisk_status plan_weights(cuda_backend *cb, rnn_plan *p, const char *what, brisk_error *err) {
    cudnnHandle_t h = cb->rnn->handle;
    int64_t H = p->H, gates = p->gates, G = gates * H;
    rnn_weight_map m;
    memset(&m, 0, sizeof m);
    m.gates = (int)gates;
    brisk_status st;
    for (int k = 0; k < gates; k++) {
        /* linLayerID 0 .. gates-1: the input GEMM's gates (LSTM i, f, g, o; GRU r, z, n), then
         * the recurrent GEMM's in the same order */
        if ((st = param_at(h, p, k, 0, H, G, &m.w_in[k], what, err)) ||
            (st = param_at(h, p, (int)gates + k, 0, H, H, &m.w_rec[k], what, err)) ||
            (st = param_at(h, p, k, 1, H, 1, &m.b_in[k], what, err)) ||
            (st = param_at(h, p, (int)gates + k, 1, H, 1, &m.b_rec[k], what, err)))
            return st;
    }
    const char *bad = NULL;
    if (rnn_map_check(&m, H, (int64_t)(p->wbytes / sizeof(float)), &bad))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: cuDNN's %s weight space (%zu bytes) has %s outside it "
                            "or overlapping another (%s)", cell_name(p), p->wbytes, bad, what);
    p->n_rec = rnn_runs(m.w_rec, (int)gates, H * H, p->rec);
    p->n_bias = rnn_runs(m.b_in, (int)gates, H, p->bias);
    p->n_bias_rec = gates == 3 ? rnn_runs(m.b_rec, (int)gates, H, p->bias_rec) : 0;
    float *ones = malloc((size_t)H * sizeof(float));
    if (!ones) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (%s)", what);
    for (int64_t r = 0; r < H; r++) ones[r] = 1.0f;
    cudaError_t e = cudaMemsetAsync(p->wspace, 0, p->wbytes, cb->compute);
    /* gate k's ones sit (G + 1) floats apart: one strided copy per gate */
    for (int k = 0; k < gates && e == cudaSuccess; k++)
        e = cudaMemcpy2DAsync((float *)p->wspace + rnn_eye_at(&m, k, H, 0), (size_t)(G + 1) * sizeof(float), ones,
                              sizeof(float), sizeof(float), (size_t)H, cudaMemcpyHostToDevice, cb->compute);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->compute); /* before ones goes */
    free(ones);
    CU(e, "writing the identity input matrix of an LSTM or GRU");
    return BRISK_OK;
}

/* The part of a plan that needs no handle or GPU: the RNN, sequence and state
 * descriptors (p->gates, B, T, H, math and drop set; drop may be NULL). */
static brisk_status plan_descs(rnn_plan *p, const char *what, brisk_error *err) {
    int64_t B = p->B, T = p->T, H = p->H, G = p->gates * H;
    if (B < 1 || T < 1 || H < 1 || B > INT32_MAX || T > INT32_MAX || G > INT32_MAX || B * H > INT32_MAX)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: B %lld, T %lld, H %lld do not fit cuDNN's int sizes",
                            what, (long long)B, (long long)T, (long long)H);
    DNN(cudnnCreateRNNDescriptor(&p->rnn), what);
    DNN(cudnnSetRNNDescriptor_v8(p->rnn, CUDNN_RNN_ALGO_STANDARD, p->gates == 3 ? CUDNN_GRU : CUDNN_LSTM,
                                 CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                 CUDNN_DATA_FLOAT, (cudnnMathType_t)p->math, (int32_t)G, (int32_t)H, (int32_t)H, 1,
                                 p->drop, CUDNN_RNN_PADDED_IO_ENABLED),
        what);
    int *lens = malloc((size_t)B * sizeof(int));
    if (!lens) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (%s)", what);
    for (int64_t b = 0; b < B; b++) lens[b] = (int)T;
    cudnnStatus_t s;
    if ((s = cuda_dnn.cudnnCreateRNNDataDescriptor(&p->xd)) || (s = cuda_dnn.cudnnCreateRNNDataDescriptor(&p->yd)) ||
        (s = cuda_dnn.cudnnSetRNNDataDescriptor(p->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, (int)T,
                                           (int)B, (int)G, lens, NULL)) ||
        (s = cuda_dnn.cudnnSetRNNDataDescriptor(p->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, (int)T,
                                           (int)B, (int)H, lens, NULL))) {
        free(lens);
        return cuda_dnn_fail(err, s, "cudnnSetRNNDataDescriptor", what);
    }
    free(lens);
    /* initial and final states: none (zeros in, not read out), but cuDNN checks their shape */
    int hdim[3] = {1, (int)B, (int)H}, hstr[3] = {(int)(B * H), (int)H, 1};
    DNN(cudnnCreateTensorDescriptor(&p->hd), what);
    DNN(cudnnSetTensorNdDescriptor(p->hd, CUDNN_DATA_FLOAT, 3, hdim, hstr), what);
    return BRISK_OK;
}

brisk_status cuda_rnn_check_descs(brisk_gemm_precision precision, int gates, int64_t B, int64_t T, int64_t H,
                                  brisk_error *err) {
    const char *why = cuda_rnn_missing();
    if (why) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", why);
    rnn_plan p;
    memset(&p, 0, sizeof p);
    p.gates = gates == 3 ? 3 : 4;
    p.B = B, p.T = T, p.H = H, p.math = math_type(precision);
    brisk_status st = plan_descs(&p, p.gates == 3 ? "gru descriptors" : "lstm descriptors", err);
    descs_free(&p);
    return st;
}

static brisk_status plan_build(cuda_backend *cb, const brisk_graph *g, int node, int gates, const int64_t d[3],
                               int reverse, rnn_plan *p, brisk_error *err) {
    char what[64];
    snprintf(what, sizeof what, "%s (node %d)", gates == 3 ? "gru" : "lstm", node);
    memset(p, 0, sizeof *p);
    p->g = g, p->node = node, p->gates = gates, p->B = d[0], p->T = d[1], p->H = d[2], p->reverse = reverse;
    p->math = math_type(cb->opt.precision);
    int64_t B = p->B, T = p->T, H = p->H;
    cudnnHandle_t h = cb->rnn->handle;
    DNN(cudnnCreateDropoutDescriptor(&p->drop), what);
    /* no dropout inside one layer: cuDNN needs no RNG state for p = 0 */
    DNN(cudnnSetDropoutDescriptor(p->drop, h, 0.0f, NULL, 0, 0), what);
    brisk_status st = plan_descs(p, what, err);
    if (st) return st;
    int32_t *lens = malloc((size_t)B * sizeof(int32_t));
    if (!lens) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (%s)", what);
    for (int64_t b = 0; b < B; b++) lens[b] = (int32_t)T;
    cudaError_t e = cudaMalloc((void **)&p->seq, (size_t)B * sizeof(int32_t));
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(p->seq, lens, (size_t)B * sizeof(int32_t), cudaMemcpyHostToDevice, cb->compute);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->compute); /* before lens goes */
    free(lens);
    CU(e, "the RNN's sequence lengths");
    DNN(cudnnGetRNNWeightSpaceSize(h, p->rnn, &p->wbytes), what);
    CU(cudaMalloc(&p->wspace, p->wbytes), "the RNN's weight space");
    st = plan_weights(cb, p, what, err);
    if (st) return st;
    DNN(cudnnGetRNNTempSpaceSizes(h, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd, &p->work_bytes, &p->reserve_bytes), what);
    if (p->work_bytes) CU(cudaMalloc(&p->work, p->work_bytes), "the RNN's cuDNN workspace");
    if (!rnn_reserve_fits(B, T, H, gates, p->reserve_bytes))
        CU(cudaMalloc(&p->reserve, p->reserve_bytes), "the RNN's cuDNN reserve space");
    if (reverse) {
        size_t part = (size_t)(B * T * H) * sizeof(float);
        p->flip_dy = (gates * part + 255) / 256 * 256;
        p->flip_y = (p->flip_dy + part + 255) / 256 * 256;
        CU(cudaMalloc((void **)&p->flip, p->flip_y + part), "the reversed RNN's sequences");
    }
    return BRISK_OK;
}

/* The plan for recurrent node `node` (op LSTM or GRU) of g, made now when there is none
 * (never while capturing). */
static brisk_status plan_get(cuda_backend *cb, const brisk_graph *g, int node, rnn_plan **out, brisk_error *err) {
    int64_t d[3];
    int reverse;
    brisk_op op = g->nodes[node].op;
    int gates = op == BRISK_OP_GRU ? 3 : 4;
    brisk_status st = rnn_dims(g, node, op == BRISK_OP_GRU ? BRISK_OP_GRU : BRISK_OP_LSTM, d, &reverse, err);
    if (st) return st;
    const char *why = cuda_rnn_missing();
    if (why) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", why);
    if (!cb->rnn && !(cb->rnn = calloc(1, sizeof *cb->rnn)))
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (%s)", brisk_op_name(op));
    struct cuda_rnn *r = cb->rnn;
    rnn_plan *p = NULL;
    int free_slot = -1;
    for (int i = 0; i < r->n && !p; i++) {
        if (r->plans[i].g == g && r->plans[i].node == node) p = &r->plans[i];
        if (!r->plans[i].g && free_slot < 0) free_slot = i;
    }
    /* a plan from a freed graph at the same address: rebuilt when the shape differs */
    if (p && p->gates == gates && p->B == d[0] && p->T == d[1] && p->H == d[2] && p->reverse == reverse &&
        p->math == math_type(cb->opt.precision)) {
        *out = p;
        return BRISK_OK;
    }
    if (cb->capturing)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): no cuDNN plan while capturing a CUDA graph (the "
                            "executor was not prepared)", brisk_op_name(op), node);
    if (!r->handle) {
        CU(cudaSetDevice(cb->opt.device), "selecting the device for cuDNN");
        cudnnStatus_t s = cuda_dnn.cudnnCreate(&r->handle);
        if (s == CUDNN_STATUS_SUCCESS && (s = cuda_dnn.cudnnSetStream(r->handle, cb->compute)) != CUDNN_STATUS_SUCCESS) {
            cuda_dnn.cudnnDestroy(r->handle);
            r->handle = NULL;
        }
        if (s != CUDNN_STATUS_SUCCESS) {
            r->handle = NULL;
            return cuda_dnn_fail(err, s, "cudnnCreate", "the RNN's cuDNN handle");
        }
    }
    if (p) {
        CU(cudaStreamSynchronize(cb->compute), "replacing an RNN plan");
        plan_free(p);
    } else if (free_slot >= 0) {
        p = &r->plans[free_slot];
    } else {
        if (r->n == r->cap) {
            int cap = r->cap ? 2 * r->cap : 8;
            rnn_plan *np = realloc(r->plans, (size_t)cap * sizeof *np);
            if (!np) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (%s)", brisk_op_name(op));
            r->plans = np;
            r->cap = cap;
        }
        p = &r->plans[r->n++];
        memset(p, 0, sizeof *p);
    }
    if ((st = plan_build(cb, g, node, gates, d, reverse, p, err))) {
        plan_free(p); /* a free slot now */
        return st;
    }
    *out = p;
    return BRISK_OK;
}

brisk_status cuda_rnn_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != BRISK_OP_LSTM && g->nodes[i].op != BRISK_OP_GRU) continue;
        rnn_plan *p;
        brisk_status st = plan_get(cb, g, i, &p, err);
        if (st) return st;
    }
    return BRISK_OK;
}

void cuda_rnn_note(const cuda_backend *cb, const brisk_graph *g, int id, char *buf, size_t n) {
    if (!n) return;
    buf[0] = 0;
    const brisk_node *nd = NODE(g, id);
    if (nd->op == BRISK_OP_LSTM_GRAD_W || nd->op == BRISK_OP_GRU_GRAD_W) {
        snprintf(buf, n, "%s", nd->shape.ndim == 1 ? "two column sums (d hh)"
                               : nd->op == BRISK_OP_LSTM_GRAD_W ? "one cuBLASLt GEMM (dgates^T h_prev)"
                                                                  : "two cuBLASLt GEMMs (d hh^T h_prev)");
        return;
    }
    int64_t d[3];
    int rnn_id, reverse;
    brisk_error e = {0};
    if (check_node(g, id, &rnn_id, d, &reverse, &e)) return;
    for (int i = 0; cb->rnn && i < cb->rnn->n; i++) {
        const rnn_plan *p = &cb->rnn->plans[i];
        if (p->g != g || p->node != rnn_id) continue;
        const char *math = p->math == CUDNN_FMA_MATH ? "FMA (no tensor cores)"
                           : p->math == CUDNN_DEFAULT_MATH ? "default (TF32 tensor cores)"
                                                           : "fp16 tensor cores (allow conversion)";
        int fwd = nd->op == BRISK_OP_LSTM || nd->op == BRISK_OP_GRU;
        snprintf(buf, n, "cuDNN %s %s, B %lld T %lld H %lld%s, math %s, workspace %zu B%s", cell_name(p),
                 fwd ? "forward (training)" : "backward data", (long long)p->B, (long long)p->T, (long long)p->H,
                 p->reverse ? ", reversed" : "", math, p->work_bytes,
                 p->gates == 3 ? (fwd ? "; r again (a GEMM)" : "; d hh_n = d xp_n r") : "");
        return;
    }
}

void cuda_rnn_forget(cuda_backend *cb) {
    if (!cb->rnn) return;
    for (int i = 0; i < cb->rnn->n; i++) plan_free(&cb->rnn->plans[i]);
    cb->rnn->n = 0;
}

void cuda_rnn_free(cuda_backend *cb) {
    if (!cb->rnn) return;
    cuda_rnn_forget(cb);
    free(cb->rnn->plans);
    if (cb->rnn->handle) cuda_dnn.cudnnDestroy(cb->rnn->handle);
    free(cb->rnn);
    cb->rnn = NULL;
}

/* ---------------------------------------------------------------- run */

static brisk_status copy_runs(cuda_backend *cb, float *ws, const rnn_run *runs, int n, const float *src,
                              const char *what, brisk_error *err) {
    for (int i = 0; src && i < n; i++)
        CU(cudaMemcpyAsync(ws + runs[i].dst_off, src + runs[i].src_off, (size_t)runs[i].count * sizeof(float),
                           cudaMemcpyDeviceToDevice, cb->compute), what);
    return BRISK_OK;
}

/* w_hh and the biases (NULL: not needed) into the weight space: device-to-device copies on
 * the compute stream. bias_rec: the GRU's b_hh. */
static brisk_status load_weights(cuda_backend *cb, const rnn_plan *p, const float *w_hh, const float *bias,
                                 const float *bias_rec, const char *what, brisk_error *err) {
    brisk_status st;
    if ((st = copy_runs(cb, p->wspace, p->rec, p->n_rec, w_hh, what, err)) ||
        (st = copy_runs(cb, p->wspace, p->bias, p->n_bias, bias, what, err)))
        return st;
    return copy_runs(cb, p->wspace, p->bias_rec, p->n_bias_rec, bias_rec, what, err);
}

static void *reserve_of(const rnn_plan *p, const void *buf) {
    if (p->reserve) return p->reserve;
    int64_t at = rnn_reserve_at((uintptr_t)buf, p->B, p->T, p->H, p->gates, p->reserve_bytes);
    return at < 0 ? NULL : (char *)buf + at;
}

/* The GRU's r plane: h_prev w_hr^T (w_hh's first H rows) by cuBLASLt, then the gate itself. */
static brisk_status gru_r(cuda_backend *cb, const rnn_plan *p, const void *const *in, void *out, const char *what,
                          brisk_error *err) {
    int64_t B = p->B, T = p->T, H = p->H;
    float *r = (float *)((char *)out + rnn_gru_r_at(B, T, H));
    cuda_gemm_args a = {.ta = 0, .tb = 1, .M = B * T, .N = H, .K = H, .batch = 1,
                        .A = (const char *)out + rnn_hprev_at(B, T, H, 3), .B = in[1], .C = r, .in_type = 0,
                        .epi = EPI_NONE, .what = what};
    brisk_status st = cuda_gemm(cb, &a, err);
    if (st) return st;
    CU(cuk_gru_r(r, in[0], in[2], in[3], B, T, H, cb->compute), what);
    return BRISK_OK;
}

brisk_status cuda_run_rnn(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                          brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t d[3];
    int rnn_id, reverse;
    brisk_status st = check_node(g, id, &rnn_id, d, &reverse, err);
    if (st) return st;
    int64_t B = d[0], T = d[1], H = d[2], BTH = B * T * H;
    if (n->op == BRISK_OP_LSTM_GRAD_W || n->op == BRISK_OP_GRU_GRAD_W) return run_grad_w(cb, g, id, d, in, out, err);
    if (BTH == 0) return BRISK_OK;
    rnn_plan *p;
    if ((st = plan_get(cb, g, rnn_id, &p, err))) return st;
    int gru = p->gates == 3;
    int64_t G = p->gates * H;
    char what[64];
    snprintf(what, sizeof what, "%s (node %d)", brisk_op_name(n->op), id);
    cudaStream_t s = cb->compute;
    cudnnHandle_t h = cb->rnn->handle;
    /* reverse: cuDNN runs flipped copies; flip = x or dx | dy | y, each [B, T, *] */
    float *fx = (float *)p->flip, *fdy = NULL, *fy = NULL;
    if (p->flip) fdy = (float *)(p->flip + p->flip_dy), fy = (float *)(p->flip + p->flip_y);
    if (n->op == BRISK_OP_LSTM || n->op == BRISK_OP_GRU) {
        void *reserve = reserve_of(p, out);
        if (!reserve) return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: no room for cuDNN's reserve space", what);
        if ((st = load_weights(cb, p, in[1], in[2], gru ? in[3] : NULL, what, err))) return st;
        const float *x = in[0];
        float *y = out;
        if (reverse) {
            CU(cuk_rnn_flip(in[0], fx, B, T, G, s), what);
            x = fx, y = fy;
        }
        DNN(cudnnRNNForward(h, p->rnn, CUDNN_FWD_MODE_TRAINING, p->seq, p->xd, x, p->yd, y, p->hd, NULL, NULL,
                            p->hd, NULL, NULL, p->wbytes, p->wspace, p->work_bytes, p->work, p->reserve_bytes,
                            reserve),
            what);
        if (reverse) CU(cuk_rnn_flip(fy, out, B, T, H, s), what);
        CU(cuk_rnn_hprev(out, (float *)((char *)out + rnn_hprev_at(B, T, H, p->gates)), B, T, H, reverse, s), what);
        return gru ? gru_r(cb, p, in, out, what, err) : BRISK_OK;
    }
    /* LSTM_GRAD, GRU_GRAD (dh, rnn, w_hh) -> dx of the identity input = d xp */
    void *reserve = reserve_of(p, in[1]);
    if (!reserve) return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: no room for cuDNN's reserve space", what);
    if ((st = load_weights(cb, p, in[2], NULL, NULL, what, err))) return st;
    const float *y = in[1], *dy = in[0];
    float *dx = out;
    if (reverse) {
        CU(cuk_rnn_flip(in[0], fdy, B, T, H, s), what);
        y = fy, dy = fdy, dx = fx;
    }
    DNN(cudnnRNNBackwardData_v8(h, p->rnn, p->seq, p->yd, y, dy, p->xd, dx, p->hd, NULL, NULL, NULL, p->hd, NULL,
                                NULL, NULL, p->wbytes, p->wspace, p->work_bytes, p->work, p->reserve_bytes, reserve),
        what);
    if (reverse) CU(cuk_rnn_flip(fx, out, B, T, G, s), what);
    if (gru) /* d hh_n = d xp_n r, after d xp */
        CU(cuk_gru_dhn(out, (const float *)((const char *)in[1] + rnn_gru_r_at(B, T, H)), (float *)out + B * T * G, B,
                       T, H, s),
           what);
    return BRISK_OK;
}

#else /* no cudnn.h at build time */

const char *cuda_rnn_missing(void) {
    return "LSTM and GRU on CUDA need cuDNN 9 (this build found no cudnn.h: configure with cuDNN's headers "
           "installed)";
}

brisk_status cuda_rnn_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err) {
    (void)cb, (void)g, (void)err;
    return BRISK_OK;
}

brisk_status cuda_rnn_check_descs(brisk_gemm_precision precision, int gates, int64_t B, int64_t T, int64_t H,
                                  brisk_error *err) {
    (void)precision, (void)gates, (void)B, (void)T, (void)H;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", cuda_rnn_missing());
}

void cuda_rnn_note(const cuda_backend *cb, const brisk_graph *g, int id, char *buf, size_t n) {
    (void)cb, (void)g, (void)id;
    if (n) buf[0] = 0;
}

void cuda_rnn_forget(cuda_backend *cb) { (void)cb; }
void cuda_rnn_free(cuda_backend *cb) { (void)cb; }

brisk_status cuda_run_rnn(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                          brisk_error *err) {
    int64_t d[3];
    int rnn_id, reverse;
    brisk_status st = check_node(g, id, &rnn_id, d, &reverse, err);
    if (st) return st;
    brisk_op op = g->nodes[id].op;
    if (op == BRISK_OP_LSTM_GRAD_W || op == BRISK_OP_GRU_GRAD_W) return run_grad_w(cb, g, id, d, in, out, err);
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", cuda_rnn_missing());
}

#endif
