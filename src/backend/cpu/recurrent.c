/* What the recurrent kernels (lstm.c, gru.c) share: the recurrent node's dims, the
 * packing of w_hh for the per-step GEMMs, how a batch is cut into chunks of rows, and the
 * walk of a chunk through every step, a block of rows at a time (the per-step GEMM, and the
 * cell's pass over the block while its rows are in L1/L2). */
#include "backend/cpu/cpu_internal.h"

#include <stdlib.h>

int cpu_shape_is(const brisk_node *n, int ndim, int64_t a, int64_t b, int64_t c) {
    int64_t want[3] = {a, b, c};
    if (n->shape.ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (n->shape.d[i] != want[i]) return 0;
    return 1;
}

brisk_status cpu_rnn_node(const brisk_graph *g, int id, brisk_op op, int planes, cpu_rnn_dims *d, brisk_error *err) {
    const char *name = brisk_op_name(op), *what = op == BRISK_OP_LSTM ? "an LSTM" : "a GRU";
    if (id < 0 || id >= g->n_nodes || g->nodes[id].op != op || g->nodes[id].shape.ndim != 3)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: node %d is not %s [B, T, H]", name, id, what);
    const brisk_node *l = NODE(g, id);
    d->B = l->shape.d[0];
    d->T = l->shape.d[1];
    d->H = l->shape.d[2];
    d->reverse = l->attr.kind != 0;
    if (l->bytes < (size_t)(planes * d->B * d->T * d->H) * sizeof(float))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %zu bytes leave no room for the workspace", name,
                            id, l->bytes);
    return BRISK_OK;
}

float *cpu_rnn_pack(const float *w_hh, int64_t G, int64_t H, int forward) {
    float *packed = NULL; /* the micro-kernel loads whole aligned vectors from it */
    int64_t K = forward ? H : G, N = forward ? G : H;
    if (posix_memalign((void **)&packed, 64, cpu_sgemm_packed_b_floats(K, N) * sizeof(float))) return NULL;
    cpu_sgemm_pack_b(forward, K, N, w_hh, H, packed);
    return packed;
}

/* The longest any thread works when the pool hands out m chunks of cs strips (the last
 * `last`) in order, each to the thread that is free first, all threads equally fast. */
static int64_t makespan(int64_t threads, int64_t m, int64_t cs, int64_t last) {
    int64_t busy[64] = {0}, worst = 0;
    if (threads > 64) threads = 64;
    for (int64_t c = 0; c < m; c++) {
        int64_t t = 0;
        for (int64_t i = 1; i < threads; i++)
            if (busy[i] < busy[t]) t = i;
        busy[t] += c == m - 1 ? last : cs;
        if (busy[t] > worst) worst = busy[t];
    }
    return worst;
}

/* Sequences in chunks of rows, each run through every step by one thread (in row blocks of
 * row_block). A step's work goes by the GEMM's strips of MR rows, so the chunks are whole
 * strips, as many per thread as keep the threads' shares as even as one chunk per thread
 * would (none much smaller than a row block): 256 rows on 2 threads as 9 chunks of 30 rows left
 * one thread 23 strips against 20 (43 in all; now 4 chunks of 66, 66, 66, 58 rows: 22 and
 * 21), and more chunks than threads let a thread that is descheduled hold up less. A row's
 * arithmetic does not depend on the rows beside it in its GEMM, so neither do the bits
 * (test_cpu_sequence's 1 vs 2 threads). */
int64_t cpu_rnn_chunk(const cpu_backend *cb, int64_t B, int64_t row_block) {
    const int64_t T = cb->threads > 1 ? cb->threads : 1, mr = CPU_SGEMM_MR;
    const int64_t strips = (B + mr - 1) / mr, block = row_block / mr > 0 ? row_block / mr : 1;
    if (T == 1 || strips <= 1) return row_block;
    const int64_t best = (strips + T - 1) / T;
    int64_t kmax = (strips + T * block - 1) / (T * block);
    if (kmax > 16) kmax = 16;
    for (int64_t k = kmax; k > 1; k--) {
        int64_t cs = (strips + T * k - 1) / (T * k), m = (strips + cs - 1) / cs;
        if (makespan(T, m, cs, strips - (m - 1) * cs) == best) return cs * mr;
    }
    return best * mr;
}

void cpu_rnn_walk_rows(const cpu_rnn_walk *w, int64_t b0, int64_t b1, cpu_rnn_cell_fn cell, const void *ctx) {
    const int64_t T = w->T, H = w->H, G = w->G;
    int fwd = w->dhh == NULL;
    for (int64_t s = 0; s < T; s++)
    for (int64_t r0 = b0; r0 < b1; r0 += w->row_block) {
        cpu_rnn_block k = {r0, r0 + w->row_block < b1 ? r0 + w->row_block : b1, s, 0, 0, -1};
        k.t = cpu_rnn_step_t(T, w->reverse, s, fwd);
        if (s + 1 < T) k.tn = cpu_rnn_step_t(T, w->reverse, s + 1, fwd);
        k.tp = w->reverse ? k.t + 1 : k.t - 1;
        if (fwd && s > 0) /* the recurrent term h_prev w_hh^T straight into the gate plane */
            cpu_sgemm_prepacked(0, k.r1 - r0, G, H, w->h + (r0 * T + k.tp) * H, T * H, w->packed,
                                w->gates + (r0 * T + k.t) * G, T * G, 0, w->scratch);
        cell(ctx, &k);
        if (!fwd && s < T - 1) { /* dh_rec for the step before: the block's d hh rows times w_hh */
            int64_t lda;
            const float *a = w->dhh(ctx, &k, &lda);
            cpu_sgemm_prepacked(0, k.r1 - r0, H, G, a, lda, w->packed, w->rec + r0 * H, H, w->accumulate,
                                w->scratch);
        }
    }
}
