/* The executor over a recording fake backend (host memory, no kernels): buffer
 * resolution, parameter initialisation from the seed, inputs, the schedules each
 * run kind walks and the step state it passes, error propagation, and the gradient and node
 * hooks. */
#include "brisk/graph.h"
#include "test.h"

#include <stdint.h>

typedef struct fake {
    int calls[4096], n_calls;
    uint32_t training[4096];
    const void *in0[4096];
    void *out[4096];
    int refuse_op;   /* supports_op says no to this op (-1: none) */
    int fail_node;   /* run_node fails on this node (-1: none) */
    int allocs;
} fake;

static brisk_status f_alloc(brisk_backend *be, size_t bytes, void **out, brisk_error *err) {
    ((fake *)be->impl)->allocs++;
    *out = malloc(bytes);
    return *out ? BRISK_OK : brisk_errorf(err, BRISK_ERR_NOMEM, "fake alloc");
}
static void f_free(brisk_backend *be, void *p) { ((fake *)be->impl)->allocs--; free(p); }
static brisk_status f_copy(brisk_backend *be, void *dst, const void *src, size_t n, brisk_error *err) {
    memcpy(dst, src, n);
    return BRISK_OK;
}
static brisk_status f_memset0(brisk_backend *be, void *dst, size_t n, brisk_error *err) {
    memset(dst, 0, n);
    return BRISK_OK;
}
static brisk_status f_run(brisk_backend *be, const brisk_graph *g, int id, const void *const *in, void *out,
                          const brisk_step_state *st, brisk_error *err) {
    fake *f = be->impl;
    if (id == f->fail_node) return brisk_errorf(err, BRISK_ERR_NUMERIC, "fake failure");
    f->calls[f->n_calls] = id;
    f->training[f->n_calls] = st->training;
    f->in0[f->n_calls] = g->nodes[id].n_in ? in[0] : NULL;
    f->out[f->n_calls] = out;
    f->n_calls++;
    return BRISK_OK;
}
static int f_supports(brisk_backend *be, const brisk_node *n, char *why, size_t why_size) {
    if ((int)n->op != ((fake *)be->impl)->refuse_op) return 1;
    snprintf(why, why_size, "the fake has no kernel for it");
    return 0;
}

static brisk_backend fake_backend(fake *f) {
    memset(f, 0, sizeof *f);
    f->refuse_op = -1;
    f->fail_node = -1;
    brisk_backend be;
    memset(&be, 0, sizeof be);
    be.name = "fake";
    be.impl = f;
    be.alloc = f_alloc;
    be.free = f_free;
    be.upload = f_copy;
    be.download = f_copy;
    be.memset0 = f_memset0;
    be.run_node = f_run;
    be.supports_op = f_supports;
    return be;
}

typedef struct { brisk_graph *g; int x, w, b, u, c, h, r, out, loss; } model;

static model build(void) {
    model m;
    m.g = brisk_graph_new();
    brisk_graph *g = m.g;
    m.x = brisk_input(g, "x", BRISK_F32, brisk_shape2(4, 6));
    m.w = brisk_param(g, "w", brisk_shape2(6, 3), BRISK_INIT_UNIFORM, 0.5f, 1);
    m.b = brisk_param(g, "b", brisk_shape1(3), BRISK_INIT_ONES, 0, 0);
    m.u = brisk_param(g, "u", brisk_shape1(4001), BRISK_INIT_NORMAL, 2.0f, 1);
    float cv[3] = {1, 2, 3};
    m.c = brisk_const(g, "c", BRISK_F32, brisk_shape1(3), cv);
    m.h = brisk_bias_add(g, brisk_matmul(g, m.x, m.w, 0, 0), m.b);
    m.r = brisk_reshape(g, m.h, brisk_shape1(12));
    m.out = brisk_mul(g, brisk_relu(g, m.h), m.c);
    m.loss = brisk_mean(g, brisk_sum(g, m.out, 2, 0), 1, 0);
    g->output = m.out;
    brisk_error e;
    if (brisk_backward(g, m.loss, &e)) fprintf(stderr, "backward: %s\n", e.msg);
    return m;
}

/* g planned into *p, and an executor for it on the fake backend *be over *f. */
static brisk_status on_fake(brisk_graph *g, brisk_plan *p, fake *f, brisk_backend *be, brisk_exec **ex, brisk_error *e) {
    brisk_status st = brisk_plan_build(g, p, e);
    *be = fake_backend(f);
    return st ? st : brisk_exec_create(g, p, be, ex, e);
}

static void test_buffers_and_runs(void) {
    model m = build();
    brisk_graph *g = m.g;
    brisk_plan p;
    brisk_error e, *ep = &e;
    fake f;
    brisk_backend be;
    brisk_exec *ex;
    REQUIRE_OK(on_fake(g, &p, &f, &be, &ex, &e), ep);
    CHECK(f.allocs == 7);
    CHECK(ex->ptr[m.w] == (char *)ex->params && ex->ptr[m.b] == (char *)ex->params + 4 * 32);
    CHECK(ex->ptr[m.x] == ex->inputs && ex->ptr[m.c] == ex->consts);
    CHECK(memcmp(ex->consts, g->const_data, g->const_bytes) == 0);
    CHECK(ex->ptr[m.h] == (char *)ex->arena + g->nodes[m.h].offset);
    CHECK(ex->ptr[m.r] == ex->ptr[m.h]);
    int ga = g->params[1].grad_node;
    CHECK(ex->ptr[ga] == (char *)ex->grads + 4 * 32);
    CHECK(ex->step.training == 1 && ex->step.first_micro == 1);

    float xin[24];
    for (int i = 0; i < 24; i++) xin[i] = (float)i;
    REQUIRE_OK(brisk_exec_set_input(ex, 0, xin, &e), ep);
    CHECK(memcmp(ex->inputs, xin, sizeof xin) == 0);
    CHECK(brisk_exec_set_input(ex, 1, xin, &e) == BRISK_ERR_INVALID);

    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    CHECK(f.n_calls == p.n_train);
    for (int s = 0; s < f.n_calls && s < p.n_train; s++) {
        CHECK(f.calls[s] == p.train_order[s] && f.training[s] == 1);
        CHECK(f.out[s] == ex->ptr[f.calls[s]]);
        if (g->nodes[f.calls[s]].n_in) CHECK(f.in0[s] == ex->ptr[g->nodes[f.calls[s]].in[0]]);
    }
    f.n_calls = 0;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_EVAL, &e), ep);
    CHECK(f.n_calls == p.n_eval && p.n_eval > 0);
    for (int s = 0; s < f.n_calls; s++) CHECK(f.calls[s] == p.eval_order[s] && f.training[s] == 0);
    CHECK(ex->step.training == 1); /* eval does not change the stored step state */
    f.n_calls = 0;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_PREDICT, &e), ep);
    CHECK(f.n_calls == p.n_predict && f.calls[f.n_calls - 1] == m.out);

    float o[12];
    memset((char *)ex->arena + g->nodes[m.out].offset, 0x3f, 48);
    REQUIRE_OK(brisk_exec_read(ex, m.out, o, &e), ep);
    CHECK(memcmp(o, (char *)ex->arena + g->nodes[m.out].offset, 48) == 0);

    f.fail_node = p.train_order[2];
    brisk_status st = brisk_exec_run(ex, BRISK_RUN_TRAIN, &e);
    CHECK(st == BRISK_ERR_NUMERIC && strstr(e.msg, "fake failure") && strstr(e.msg, "node "));

    brisk_exec_free(ex);
    CHECK(f.allocs == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

/* brisk_exec_use_input: on a host-memory backend an aligned batch is read in place, by the input
 * node and by a view of it, until released; elsewhere (or misaligned) it is copied. */
static void test_use_input(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(4, 6));
    int v = brisk_reshape(g, x, brisk_shape1(24));
    int r = brisk_relu(g, v);
    g->output = r;
    brisk_plan p;
    brisk_error e, *ep = &e;
    fake f;
    brisk_backend be;
    brisk_exec *ex;
    REQUIRE_OK(on_fake(g, &p, &f, &be, &ex, &e), ep);
    REQUIRE(g->nodes[v].storage == BRISK_STORE_ALIAS && ex->ptr[v] == ex->inputs);
    float *buf = NULL;
    REQUIRE(posix_memalign((void **)&buf, 64, 32 * sizeof(float)) == 0);
    for (int i = 0; i < 32; i++) buf[i] = (float)i;
    /* a device backend (host_memory 0): copied */
    REQUIRE_OK(brisk_exec_use_input(ex, 0, buf, &e), ep);
    CHECK(ex->ptr[x] == ex->inputs && memcmp(ex->inputs, buf, 24 * sizeof(float)) == 0);
    be.host_memory = 1;
    REQUIRE_OK(brisk_exec_use_input(ex, 0, buf, &e), ep);
    CHECK(ex->ptr[x] == buf && ex->ptr[v] == buf);
    f.n_calls = 0;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_PREDICT, &e), ep);
    CHECK(f.n_calls == 1 && f.calls[0] == r && f.in0[0] == buf);
    brisk_exec_release_inputs(ex);
    CHECK(ex->ptr[x] == ex->inputs && ex->ptr[v] == ex->inputs);
    /* misaligned: copied; a copy after a binding puts the node back on the input area */
    REQUIRE_OK(brisk_exec_use_input(ex, 0, buf + 1, &e), ep);
    CHECK(ex->ptr[x] == ex->inputs && memcmp(ex->inputs, buf + 1, 24 * sizeof(float)) == 0);
    REQUIRE_OK(brisk_exec_use_input(ex, 0, buf, &e), ep);
    REQUIRE_OK(brisk_exec_set_input(ex, 0, buf + 8, &e), ep);
    CHECK(ex->ptr[x] == ex->inputs && ex->ptr[v] == ex->inputs && memcmp(ex->inputs, buf + 8, 24 * sizeof(float)) == 0);
    CHECK(brisk_exec_use_input(ex, 1, buf, &e) == BRISK_ERR_INVALID);
    CHECK(brisk_exec_use_input(ex, 0, NULL, &e) == BRISK_ERR_INVALID);
    free(buf);
    brisk_exec_free(ex);
    CHECK(f.allocs == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

static void test_init_params(void) {
    model m = build();
    brisk_graph *g = m.g;
    brisk_plan p;
    brisk_error e, *ep = &e;
    fake f;
    brisk_backend be;
    brisk_exec *ex;
    REQUIRE_OK(on_fake(g, &p, &f, &be, &ex, &e), ep);
    memset(ex->grads, 0x7f, p.param_bytes);
    REQUIRE_OK(brisk_exec_init_params(ex, 0x123456789abcull, &e), ep);
    const float *pw = (const float *)ex->params, *pb = pw + g->params[1].offset, *pu = pw + g->params[2].offset;
    uint32_t key[2] = {0x56789abcu, 0x1234u};
    for (int i = 0; i < 18; i++) {
        uint32_t ctr[4] = {(uint32_t)i / 4, 0, 0, 0xFFFFFFFFu}, r[4];
        brisk_philox4x32(ctr, key, r);
        float want = (2.0f * brisk_u32_to_unit(r[i % 4]) - 1.0f) * 0.5f;
        CHECK(pw[i] == want && pw[i] > -0.5f && pw[i] <= 0.5f);
    }
    for (int i = 0; i < 3; i++) CHECK(pb[i] == 1.0f);
    uint32_t ctr[4] = {1000, 0, 2, 0xFFFFFFFFu};
    float nv[4];
    brisk_philox_normal4(ctr, key, nv);
    CHECK(pu[4000] == nv[0] * 2.0f);
    double s = 0, s2 = 0;
    for (int i = 0; i < 4001; i++) s += pu[i], s2 += (double)pu[i] * pu[i];
    CHECK_NEAR(s / 4001, 0.0, 0.15);
    CHECK_NEAR(sqrt(s2 / 4001), 2.0, 0.15);
    for (size_t i = 0; i < p.param_bytes; i++) CHECK(((unsigned char *)ex->grads)[i] == 0);
    CHECK(ex->step.seed == 0x123456789abcull);
    /* The same seed gives the same values; another seed does not. */
    float first = pw[0];
    REQUIRE_OK(brisk_exec_init_params(ex, 0x123456789abcull, &e), ep);
    CHECK(pw[0] == first);
    REQUIRE_OK(brisk_exec_init_params(ex, 7, &e), ep);
    CHECK(pw[0] != first);
    brisk_exec_free(ex);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

static void test_create_errors(void) {
    model m = build();
    brisk_plan p;
    brisk_error e, *ep = &e;
    REQUIRE_OK(brisk_plan_build(m.g, &p, &e), ep);
    fake f;
    brisk_backend be = fake_backend(&f);
    f.refuse_op = BRISK_OP_MATMUL;
    brisk_exec *ex = (brisk_exec *)&f;
    CHECK(brisk_exec_create(m.g, &p, &be, &ex, &e) == BRISK_ERR_UNSUPPORTED);
    CHECK(ex == NULL && strstr(e.msg, "matmul") && strstr(e.msg, "fake") && strstr(e.msg, "the fake has no kernel"));
    CHECK(f.allocs == 0);
    /* A graph changed after planning is refused rather than run out of bounds. */
    f.refuse_op = -1;
    brisk_plan stale = p;
    stale.arena_bytes = 64;
    CHECK(brisk_exec_create(m.g, &stale, &be, &ex, &e) == BRISK_ERR_INVALID && strstr(e.msg, "re-plan"));
    brisk_plan_free(&p);
    brisk_graph_free(m.g);
}

/* The gradient-ready hook (data parallel's overlap): every range is announced once its last
 * writer has run and not before, in order, the first ones before backward ends; nothing when
 * not armed or not training. */
typedef struct { fake *f; int calls, k[64], at[64]; } hook_log;
static void on_ready(void *user, int n_complete) {
    hook_log *h = user;
    if (h->calls < 64) h->k[h->calls] = n_complete, h->at[h->calls] = h->f->n_calls;
    h->calls++;
}

static void test_grad_hook(void) {
    model m = build();
    brisk_graph *g = m.g;
    brisk_plan p;
    brisk_error e, *ep = &e;
    fake f;
    brisk_backend be;
    brisk_exec *ex;
    REQUIRE_OK(on_fake(g, &p, &f, &be, &ex, &e), ep);
    /* ranges: u in two halves, w, b, and an empty range */
    const brisk_param_info *w = &g->params[0], *b = &g->params[1], *u = &g->params[2];
    int64_t off[5] = {(int64_t)u->offset, (int64_t)u->offset + 2000, (int64_t)w->offset, (int64_t)b->offset, 0};
    int64_t cnt[5] = {2000, u->numel - 2000, w->numel, b->numel, 0};
    int order[5], last[5];
    hook_log h = {.f = &f};
    REQUIRE_OK(brisk_exec_set_grad_hook(ex, off, cnt, 5, order, on_ready, &h, &e), ep);
    brisk_plan_grad_ready(g, &p, off, cnt, 5, last);
    CHECK(last[4] == -1 && last[0] == last[1] && last[0] >= 0 && last[2] >= 0 && last[3] >= 0);
    CHECK(g->nodes[p.train_order[last[2]]].op == BRISK_OP_GRAD_ACCUM && p.train_order[last[2]] == w->grad_node);
    for (int i = 1; i < 5; i++) CHECK(last[order[i - 1]] <= last[order[i]]);
    CHECK(order[0] == 4); /* no writer: complete from the start */
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    CHECK(h.calls == 0); /* not armed */
    brisk_exec_arm_grad_hook(ex, 1);
    f.n_calls = 0;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    CHECK(h.calls >= 2 && h.calls <= 5 && h.k[0] == 1 && h.at[0] == 0 && h.k[h.calls - 1] == 5);
    for (int c = 1; c < h.calls && c < 64; c++) CHECK(h.k[c] > h.k[c - 1] && h.at[c] >= h.at[c - 1]);
    /* at each call, the announced ranges' last writers had run; the next range's had not */
    for (int c = 0; c < h.calls && c < 64; c++) {
        for (int r = 0; r < h.k[c]; r++) CHECK(last[order[r]] < h.at[c]);
        if (h.k[c] < 5) CHECK(last[order[h.k[c]]] >= h.at[c]);
    }
    CHECK(h.at[1] < p.n_train); /* a range announced before the schedule's end: overlap */
    int before = h.calls;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_EVAL, &e), ep);
    CHECK(h.calls == before);
    brisk_exec_arm_grad_hook(ex, 0);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    CHECK(h.calls == before);
    off[0] = -1;
    CHECK(brisk_exec_set_grad_hook(ex, off, cnt, 5, order, on_ready, &h, &e) == BRISK_ERR_INVALID);
    brisk_exec_free(ex);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

/* The node hook (brisk profile's timing marks): in a training run, before each node with its
 * schedule position and id, and once after the last (id -1), each before the node's run_node;
 * never in eval or predict runs; an error from it stops the run there. */
typedef struct node_log {
    fake *f;
    int pos[256], id[256], ran_before[256], n, fail_at;
} node_log;

static brisk_status on_node(void *user, int pos, int id, brisk_error *err) {
    node_log *l = user;
    if (pos == l->fail_at) return brisk_errorf(err, BRISK_ERR_INTERNAL, "hook failed at %d", pos);
    if (l->n < 256) l->pos[l->n] = pos, l->id[l->n] = id, l->ran_before[l->n] = l->f->n_calls, l->n++;
    return BRISK_OK;
}

static void test_node_hook(void) {
    model m = build();
    brisk_graph *g = m.g;
    brisk_plan p;
    brisk_error e, *ep = &e;
    fake f;
    brisk_backend be;
    brisk_exec *ex;
    REQUIRE_OK(on_fake(g, &p, &f, &be, &ex, &e), ep);
    node_log l = {.f = &f, .fail_at = -1};
    brisk_exec_set_node_hook(ex, on_node, &l);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    CHECKF(l.n == p.n_train + 1, "%d hook calls for %d nodes", l.n, p.n_train);
    for (int s = 0; s < l.n && s <= p.n_train; s++) {
        CHECK(l.pos[s] == s && l.ran_before[s] == s);
        CHECK(l.id[s] == (s < p.n_train ? p.train_order[s] : -1));
    }
    l.n = 0;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_EVAL, &e), ep);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_PREDICT, &e), ep);
    CHECK(l.n == 0);
    l.fail_at = 2;
    f.n_calls = 0;
    CHECK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e) == BRISK_ERR_INTERNAL && strstr(e.msg, "hook failed at 2"));
    CHECK(f.n_calls == 2 && l.n == 2);
    l.fail_at = p.n_train; /* the mark after the last node */
    CHECK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e) == BRISK_ERR_INTERNAL);
    brisk_exec_set_node_hook(ex, NULL, &l);
    l.n = 0;
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    CHECK(l.n == 0 && ex->node_user == NULL);
    brisk_exec_free(ex);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

TEST_MAIN(T(test_buffers_and_runs), T(test_use_input), T(test_init_params), T(test_create_errors), T(test_grad_hook), T(test_node_hook))
