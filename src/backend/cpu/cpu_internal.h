/* The CPU backend's internal interface: the backend's private state and the
 * kernel entry points each family file (matmul.c, elementwise.c, ...) exports to
 * backend.c's dispatch switch. Not a public header.
 *
 * Conventions shared by every kernel here:
 * - tensors are C-contiguous, row-major; "rows" = all leading dims flattened;
 * - a kernel receives the graph and the node id, reads its inputs' shapes from
 *   g->nodes[in[i]] and its own shape/attr from g->nodes[id];
 * - parallel loops run in the backend's pool (pool.c) over chunks fixed by the data
 *   sizes, taken one at a time by whichever thread is free, never with a reduction
 *   clause, and no result depends on the thread count or schedule: every output element is
 *   computed by the same sequence of operations whichever thread owns it (GEMM
 *   elements by the same FMA chain over k, tested), and global sums go through
 *   fixed-size chunks combined in index order (cpu_chunk_sum). A run resumed on
 *   another thread count gives the same bits;
 * - exact in-place (out == in[0]) is safe for elementwise and row-wise kernels
 *   (each reads an element, or its row, before writing it); not for MATMUL,
 *   TRANSPOSE, CONCAT, GATHER or the reductions;
 * - loops with fewer than 2 * CPU_PAR_MIN elements (CPU_PAR_MIN_HEAVY for exp-like
 *   work) stay serial: a 4K-float elementwise op takes 0.1-1.2 us, about what a
 *   fork/join costs. */
#ifndef BRISK_CPU_INTERNAL_H
#define BRISK_CPU_INTERNAL_H

#include "backend/cpu/pool.h"
#include "brisk/graph.h"

#include <stddef.h>
#include <stdint.h>

/* Minimum items per thread of an elementwise loop (cpu_parallel's grain), so smaller
 * loops run inline with no fork/join. Measured with bench/cpu_kernels.c on the
 * 2-core Zen 5 box with the OpenMP regions pool.c replaced (warm pool): an empty
 * parallel region cost 0.26 us; ReLU over
 * 16K floats takes 0.65 us on one thread and 0.62 on two, over 32K 1.27 vs 0.95;
 * SiLU (cpu_expf) over 4K takes 1.2 vs 0.9 us, over 16K 4.7 vs 2.7. Under load
 * from other processes a region costs far more (a descheduled worker stalls the
 * barrier), so the grains sit at or above the break-even points, not below. */
#define CPU_PAR_MIN 16384
/* Heavier per-element work (exp, erf, Philox) pays for threads earlier. */
#define CPU_PAR_MIN_HEAVY 4096

/* Private state behind brisk_backend.impl. */
typedef struct cpu_backend {
    int threads;            /* fixed at creation: the pool's threads, caller included */
    cpu_pool *pool;         /* NULL when threads == 1 */
    /* Scratch grown on demand and kept (run_node is never called concurrently on
     * one backend): per-thread sgemm packing buffers and per-chunk partial sums. */
    float *gemm_scratch;    /* threads * cpu_sgemm_scratch_floats() floats */
    double *partials;
    size_t partials_cap;    /* in doubles */
    float *conv_scratch;    /* conv.c's column matrix and staging, grown on demand */
    size_t conv_scratch_cap;  /* in floats */
    int64_t conv_col_floats;  /* bound on a column block (CPU_CONV_COL_FLOATS; tests lower it) */
    int conv_winograd;      /* 1-D convolutions by Winograd (conv_winograd.c); tests turn it off */
    int convs, convs_winograd; /* the prepared training step's convolution passes, and those that
                                  Winograd runs (the report's row) */
    int fuse;               /* plan fusions in prepare (fuse.c); BRISK_CPU_FUSE=0 turns it off */
    struct cpu_prep *prep;  /* the prepared executor's fusions, or NULL */
} cpu_backend;

/* conv.c's column blocks: whole images while they fit in this many floats (4 MiB, about
 * the L2 of two cores), else bands of one image's output pixels. */
#define CPU_CONV_COL_FLOATS (1 << 20)

/* Returns a buffer of at least n doubles from the backend's scratch, or NULL. */
double *cpu_partials(cpu_backend *cb, size_t n);

/* Runs fn over [0, n) in chunks of `grain` items (rounded up to a multiple of 16, so
 * threads do not share a cache line of f32 output) taken dynamically by the pool's
 * threads; n < 2 * grain runs inline, with no fork/join. A thread descheduled by
 * another program holds up one chunk, not a static share of the loop. */
typedef cpu_chunk_fn cpu_range_fn;
void cpu_parallel(const cpu_backend *cb, int64_t n, int64_t grain, cpu_range_fn fn, const void *ctx);

/* Runs fn over [0, n) in chunks of exactly `chunk` items handed out one at a time to
 * the pool's threads, however small the chunk (independent sequences, attention
 * heads, GEMM bands): per-thread scratch is indexed by cpu_worker_id(). */
void cpu_parallel_dynamic(const cpu_backend *cb, int64_t n, int64_t chunk, cpu_range_fn fn, const void *ctx);

/* Shorthands for kernels. */
#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])

static inline int64_t cpu_numel(const brisk_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

/* ---- matmul.c: C[M,N] (+)= op(A)[M,K] op(B)[K,N], row-major with leading dims.
 * brisk's own packed, cache-blocked kernel; with a pool (NULL: this thread) C is cut
 * into column (or row) bands, as many as its size gives, taken dynamically. scratch:
 * cpu_pool_threads(pool) * cpu_sgemm_scratch_floats() floats, 64-byte aligned, or
 * NULL to allocate (tests only; the backend passes its own). */
size_t cpu_sgemm_scratch_floats(void);
void cpu_sgemm(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
               const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
               int accumulate, float *scratch);
/* The same product through the BLAS when built with one (returns 0 if not). */
int cpu_sgemm_blas(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc);
/* The first of the bands that cpu_sgemm (blas 0) or cpu_sgemm_blas (1) cut this product
 * into, over the first min(K, kmax) of K only, on this thread; returns the number of bands.
 * What a thread of either runs per chunk, at a fraction of the cost: gemm_choice.c times
 * this. C's band gets that partial product. */
int cpu_sgemm_one_band(int blas, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, int64_t kmax,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                       float *scratch);
/* The compiled rule between the two (the fixed mode of gemm_choice.c). */
int cpu_sgemm_use_blas(int64_t M, int64_t N, int64_t K);
/* C = op(A) op(B) as MATMUL computes it: BLAS or brisk's own by cpu_gemm_choose_blas, on the
 * backend's threads and scratch (call it outside any parallel region). */
void cpu_gemm(cpu_backend *cb, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
              int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc);
/* gemm_choice.c: 1 when C = op(A) op(B) of this shape and these leading dims should run
 * on the BLAS, 0 for brisk's own sgemm. The first call for a shape may time both kernels
 * on these operands (overwriting C); scratch: cpu_sgemm_scratch_floats() for this thread,
 * or NULL to allocate. Safe from any thread. */
int cpu_gemm_choose_blas(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float *C, int64_t ldc, float *scratch);
void cpu_gemm_choice_reset(void); /* tests: forget all decisions */
/* The same product on the calling thread alone (inside a parallel chunk: attention's
 * per-head products), by the per-shape choice; scratch: this thread's. */
void cpu_gemm_local(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch);
/* op(B) [K, N] packed once for many products with the same B (a recurrent weight,
 * applied at every time step), then products on the calling thread with it: the same
 * arithmetic, element for element, as cpu_sgemm. packed: cpu_sgemm_packed_b_floats(),
 * 64-byte aligned; scratch: cpu_sgemm_scratch_floats(). */
size_t cpu_sgemm_packed_b_floats(int64_t K, int64_t N);
/* Products on the calling thread whose operands are already laid out for the kernel, so
 * nothing is packed (Winograd's per-point products, conv_winograd.c):
 *  - C[M, N] = A[M, K] B[K, N], B's rows read in place: ldb and B 16-float aligned, each row
 *    readable to N rounded up to 16 (or 32 with AVX-512); scratch: cpu_sgemm_scratch_floats().
 *  - C[M, N] (+)= A^T B, A [K, M] and B [K, N] row after row: B's rows as above, A's any;
 *    scratch: cpu_sgemm_scratch_floats() (K at most its MC * KC / CPU_SGEMM_MR). */
void cpu_sgemm_b_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float *C, int64_t ldc, float *scratch);
void cpu_sgemm_atb_rows(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                        float *C, int64_t ldc, int add, float *scratch);
void cpu_sgemm_pack_b(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed);
void cpu_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *packed, float *C, int64_t ldc, int accumulate, float *scratch);
brisk_status cpu_matmul(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err);
/* How a DROPOUT node draws at a step (random.c): on 0 where it is the identity (outside
 * training, or p = 0); element i of the node draws as element e_off + i of its stream. */
typedef struct cpu_dropout_draw {
    int on;
    float p;
    uint32_t k0, k1, stream, step;
    uint64_t e_off;
} cpu_dropout_draw;
brisk_status cpu_dropout_draw_of(const brisk_graph *g, int id, const brisk_step_state *st, cpu_dropout_draw *dr,
                                 brisk_error *err);
/* Elements i0 .. i0 + n - 1 of the node's output from its input x, bit for bit as the DROPOUT
 * op computes them: x / (1 - p) where kept, else 0 (dr->on); out may be x. */
void cpu_dropout_apply(const cpu_dropout_draw *dr, uint64_t i0, int64_t n, const float *x, float *out);

/* ---- unary.c: an elementwise unary op with its attributes, as the UNARY kernels run it
 * (op) and ACT_GRAD differentiates it (op = ACT_GRAD's kind). */
typedef struct cpu_act {
    int op;         /* BRISK_OP_SCALE, RELU, GELU, ..., CLAMP */
    int gelu_tanh;  /* GELU's tanh form, else erf */
    float a, b;     /* the op's attr.f0 and f1 */
} cpu_act;
/* Of a forward node, or of an ACT_GRAD node (its kind, i1, f0 and f1). */
cpu_act cpu_act_of(const brisk_node *n);
/* o = f(x) over n elements; o may be x. */
void cpu_act_span(const cpu_act *a, const float *x, float *o, int64_t n);
/* ACT_GRAD's arithmetic over n elements (a kind brisk_act_grad_kind_ok takes): o = dy f'(x)
 * (y = f(x)); o may be dy. */
void cpu_act_grad_span(const cpu_act *a, const float *dy, const float *x, const float *y, float *o, int64_t n);

/* A GEMM epilogue (fuse.c), over each band of C right after the band is computed, while it
 * is in cache. Forward: C += bias per row, then act_out = act(C) (leading dim ldc), then
 * drop_out = DROPOUT(act_out) where drop_out is set. Backward (grad.op set):
 * C = DROPOUT(C) where drop.on (the dropout's backward), then C = ACT_GRAD(C, gx, gy).
 * C's element i is the dropout's element i. */
typedef struct cpu_epilogue {
    const float *bias;  /* [N] */
    float *act_out;     /* NULL: bias only (or relu_in_place) */
    int relu_in_place;  /* C = relu(C + bias): C is the ReLU's buffer, its input never written */
    cpu_act act;        /* the activation (RELU, GELU, SILU, TANH, SIGMOID, LEAKY_RELU, ELU, SOFTPLUS) */
    float *drop_out;
    cpu_act grad;       /* op 0, or the activation whose gradient this is */
    const float *gx, *gy;
    cpu_dropout_draw drop;
} cpu_epilogue;
void cpu_epilogue_apply(const cpu_epilogue *e, float *C, int64_t ldc, int64_t m0, int64_t m1, int64_t n0,
                        int64_t n1);
/* cpu_sgemm / cpu_sgemm_blas / cpu_gemm with an epilogue per band (NULL: none). */
void cpu_sgemm_epi(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                   int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int accumulate, float *scratch,
                   const cpu_epilogue *epi);
void cpu_gemm_epi(cpu_backend *cb, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const cpu_epilogue *epi);
int cpu_sgemm_blas_epi(cpu_pool *pool, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const cpu_epilogue *epi);

/* ---- fuse.c: the prepare hook (fusions planned by graph/fusion.c) and their passes.
 * cpu_prep_run runs node id's part of the prepared plan: *done = 1 when the node was
 * fused away (nothing to do) or the fused pass ran at its place; 0: run it as usual. */
brisk_status cpu_prepare(brisk_backend *be, const brisk_exec *ex, brisk_error *err);
void cpu_forget(brisk_backend *be, const brisk_exec *ex); /* ex NULL: whatever is prepared */
/* How node id of the prepared graph runs (the fusion it is part of), for brisk profile ("": unfused). */
void cpu_note(brisk_backend *be, const brisk_graph *g, int id, char *buf, size_t n);
brisk_status cpu_prep_run(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                          const brisk_step_state *st, int *done, brisk_error *err);

/* ---- unary.c: SCALE, the activations and the elementwise math ops; ACT_GRAD */
brisk_status cpu_unary(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                       void *out, brisk_error *err);
brisk_status cpu_act_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err);

/* ---- elementwise.c: broadcasting binary ops and BINARY_GRAD, BIAS_ADD, GRAD_ACCUM */
brisk_status cpu_binary(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err);
brisk_status cpu_binary_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                             void *out, brisk_error *err);
brisk_status cpu_bias_add(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err);
brisk_status cpu_grad_accum(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                            void *out, const brisk_step_state *st, brisk_error *err);
/* Strided broadcast copy used by EXPAND (and binary ops): out[shape] = x broadcast,
 * elements of esize bytes. xs: x's shape right-aligned to out's. */
void cpu_broadcast_copy(const void *x, const brisk_shape *xs, void *out, const brisk_shape *os,
                        size_t esize);

/* ---- reduce.c: SUM, MEAN, SUM_TO over a dimension mask */
brisk_status cpu_reduce(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, brisk_error *err);
/* Sums x (shape xs) over the dims whose bit is set in mask, into out (those dims
 * of size 1, others as in xs), times `scale`. */
void cpu_reduce_sum(cpu_backend *cb, const float *x, const brisk_shape *xs, uint32_t mask,
                    float scale, float *out);
/* Deterministic sum of f(i) over [0, n) in fixed chunks of `chunk` (independent of
 * the thread count); fn fills partial[c] for chunk c. */
double cpu_chunk_sum(cpu_backend *cb, int64_t n, int64_t chunk,
                     double (*fn)(const void *ctx, int64_t i0, int64_t i1), const void *ctx);

/* ---- layernorm.c: one row of LAYERNORM (x, gamma, beta), LAYERNORM_XHAT (x) or
 * LAYERNORM_GRAD_X (dy, x, gamma) into o; the kernel's own code, for the fused passes. */
void cpu_ln_row(brisk_op op, const float *restrict x, const float *restrict dy, const float *restrict ga,
                const float *restrict be, float *restrict o, int64_t N, float eps);

/* ---- softmax_loss.c */
brisk_status cpu_softmax(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                         void *out, brisk_error *err);
brisk_status cpu_softmax_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                              void *out, brisk_error *err);
brisk_status cpu_cross_entropy(cpu_backend *cb, const brisk_graph *g, int id,
                               const void *const *in, void *out, brisk_error *err);
brisk_status cpu_mse(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                     void *out, brisk_error *err);

/* ---- layernorm.c */
brisk_status cpu_layernorm(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                           void *out, brisk_error *err);

/* ---- shape.c */
brisk_status cpu_shape_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err);
brisk_status cpu_cast(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                      void *out, brisk_error *err);

/* ---- gather.c: GATHER, SCATTER_ADD, SEGMENT_SUM, SINUSOIDAL(_GRAD) */
brisk_status cpu_gather_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                           void *out, brisk_error *err);

/* ---- random.c: RANDN, RAND_UNIFORM, RANDINT, DROPOUT */
brisk_status cpu_random(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                        void *out, const brisk_step_state *st, brisk_error *err);

/* ---- optim.c */
brisk_status cpu_grad_sumsq(brisk_backend *be, const float *g, int64_t n, float *sumsq_out,
                            brisk_error *err);
brisk_status cpu_optim_update(brisk_backend *be, float *p, const float *g, float *m, float *v,
                              int64_t n, const brisk_optim_args *args, const float *sumsq,
                              const uint8_t *decay_mask, brisk_error *err);

/* ---- recurrent.c: what lstm.c and gru.c share */
typedef struct cpu_rnn_dims {
    int64_t B, T, H;
    int reverse;
} cpu_rnn_dims;
/* 1 when n's shape is [a] (ndim 1), [a, b] (2) or [a, b, c] (3). */
int cpu_shape_is(const brisk_node *n, int ndim, int64_t a, int64_t b, int64_t c);
/* The dims of recurrent node id (op LSTM or GRU, [B, T, H]), checking that its buffer holds
 * `planes` [B, T, H] planes (the output and its workspace). */
brisk_status cpu_rnn_node(const brisk_graph *g, int id, brisk_op op, int planes, cpu_rnn_dims *d, brisk_error *err);
/* The time index of processing step s of T: in the recurrence's own order (forward_order;
 * reverse runs T-1 .. 0), or in the backward's, which runs it the other way. */
static inline int64_t cpu_rnn_step_t(int64_t T, int reverse, int64_t s, int forward_order) {
    int rev = forward_order ? reverse : !reverse;
    return rev ? T - 1 - s : s;
}
/* w_hh [G, H] packed as the GEMM's B: w_hh^T ([H, G]) for the forward, w_hh for the
 * backward; 64-byte aligned (free()), NULL when out of memory. */
float *cpu_rnn_pack(const float *w_hh, int64_t G, int64_t H, int forward);
/* Rows per cpu_parallel_dynamic chunk over a batch of B sequences. */
int64_t cpu_rnn_chunk(const cpu_backend *cb, int64_t B, int64_t row_block);
/* A block of rows r0 .. r1 at processing step s: time t, and tp the time of the step before
 * in the recurrence's order (meaningful from the second step on). */
typedef struct cpu_rnn_block {
    int64_t r0, r1, s, t, tp;
    int64_t tn; /* the step this walk takes next, -1 after the last: its rows prefetched */
} cpu_rnn_block;
/* A row of a later step, asked for ahead of its turn: a chunk's rows at one step lie a
 * whole sequence (T rows) apart, which the hardware's prefetchers do not follow, and the
 * cells waited on memory for each (the GRU's forward and backward cells: 7 ns an element) */
static inline void cpu_prefetch_read(const float *p, int64_t floats) {
    for (int64_t i = 0; i < floats; i += 16) __builtin_prefetch(p + i, 0, 3);
}
static inline void cpu_prefetch_write(float *p, int64_t floats) {
    for (int64_t i = 0; i < floats; i += 16) __builtin_prefetch(p + i, 1, 3);
}
typedef void (*cpu_rnn_cell_fn)(const void *ctx, const cpu_rnn_block *k);
/* The height of the sgemm's register tile (matmul.c): 6 rows with AVX2, 8 with AVX-512. */
#if defined(__AVX512F__)
#define CPU_SGEMM_MR 8
#else
#define CPU_SGEMM_MR 6
#endif
/* Rows per block a thread runs through a step of a recurrence (the GEMM, then the cell pass
 * over the block's rows while they are in cache): whole register tiles. 32 rows left a tile of
 * 2 rows that costs a whole one (6 % of the rows; the GRU regressor's forward and backward
 * passes ran 8 to 15 % slower than with 30). */
#define CPU_RNN_ROW_BLOCK (5 * CPU_SGEMM_MR)
/* How a chunk of rows walks the steps: G = gates x H, rows row_block at a time, w_hh packed
 * by cpu_rnn_pack for the direction, this thread's GEMM scratch. Forward: the GEMM's A is h
 * [B, T, H] at the step before, its C the gate plane [B, T, G]. Backward: the GEMM's A is
 * the block's d hh rows (dhh gives them and their stride), its C dh_rec [B, H], added to
 * what the cell pass left there (accumulate) or written; dhh NULL: the forward. */
typedef struct cpu_rnn_walk {
    int64_t T, H, G, row_block;
    int reverse;
    const float *packed;
    float *scratch;
    const float *h;
    float *gates;
    float *rec;
    int accumulate;
    const float *(*dhh)(const void *ctx, const cpu_rnn_block *k, int64_t *lda);
} cpu_rnn_walk;
/* Every step of rows [b0, b1) a block at a time. Forward (dhh NULL), in the recurrence's
 * order: the GEMM (from the second step), then cell(ctx, block). Backward, the other way:
 * cell(ctx, block), then the GEMM (but at the last step). */
void cpu_rnn_walk_rows(const cpu_rnn_walk *w, int64_t b0, int64_t b1, cpu_rnn_cell_fn cell, const void *ctx);

/* ---- lstm.c: LSTM, LSTM_GRAD, LSTM_GRAD_W */
brisk_status cpu_lstm_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                         brisk_error *err);

/* ---- gru.c: GRU, GRU_GRAD, GRU_GRAD_W */
brisk_status cpu_gru_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                        brisk_error *err);

/* ---- conv.c: CONV2D, CONV2D_GRAD_X, CONV2D_GRAD_W */
brisk_status cpu_conv_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                         brisk_error *err);
/* A forward convolution's epilogue (fuse.c): out = conv + bias[c] (a [Co] bias over N, H, W),
 * and act_out = act(out) when act_out is not NULL. Only where cpu_conv_epilogue_ok says so
 * (the Winograd convolutions, whose output transform applies it in cache). */
typedef struct cpu_conv_epi {
    const float *bias;
    float *act_out;
    cpu_act act;
    int relu; /* out = relu(conv + bias), act_out unused: the ReLU's input never written */
} cpu_conv_epi;
int cpu_conv_epilogue_ok(const brisk_graph *g, int id);
/* cb->convs and cb->convs_winograd for ex's training step (cpu_prepare) */
void cpu_conv_count_passes(cpu_backend *cb, const brisk_exec *ex);
brisk_status cpu_conv_epilogue_run(cpu_backend *cb, const brisk_graph *g, int id, const float *x, const float *w,
                                   float *out, const cpu_conv_epi *epi, brisk_error *err);
/* ---- batchnorm.c: BATCHNORM, BATCHNORM_GRAD_GB, BATCHNORM_GRAD_X */
brisk_status cpu_batchnorm_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              const brisk_step_state *st, brisk_error *err);
/* ---- loss.c: POINTWISE_LOSS, POINTWISE_LOSS_GRAD */
brisk_status cpu_pointwise_loss(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                brisk_error *err);
/* ---- upsample.c: UPSAMPLE2D, UPSAMPLE2D_GRAD */
brisk_status cpu_upsample_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             brisk_error *err);
/* ---- pool.c: POOL2D, POOL2D_GRAD */
brisk_status cpu_pool_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                         brisk_error *err);

/* ---- attention.c: ATTENTION, ATTENTION_GRAD */
brisk_status cpu_attention_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                              const brisk_step_state *st, brisk_error *err);
/* DROPOUT's mask for elements e0 .. e0 + n - 1 of a stream and step, as the factors it
 * multiplies by: out[i] = 1 / (1 - p) where kept, else 0 (random.c). */
void cpu_dropout_factors(uint32_t k0, uint32_t k1, uint32_t stream, uint32_t step, uint64_t e0, int64_t n, float p,
                         float *out);


#endif
