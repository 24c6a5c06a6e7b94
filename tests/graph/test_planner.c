/* The memory planner: exact arena sizes on small graphs worked out by hand, and on
 * random graphs a simulation of the schedule over the planned arena showing that
 * no node's output is overwritten before its last use. */
#include "brisk/graph.h"
#include "test.h"

#include <stdint.h>

/* Simulates a schedule over the arena in 64-byte cells: each node stamps its cells
 * when it runs; an input whose cells carry another stamp was overwritten while
 * still needed. Returns the number of violations. */
static int simulate_roots(const brisk_graph *g, const brisk_plan *p, const int *order, int n, int check_loss) {
    size_t cells = p->arena_bytes / 64 + 1;
    int *owner = malloc(cells * sizeof *owner);
    int bad = 0;
    for (size_t c = 0; c < cells; c++) owner[c] = -1;
    #define BASE(i) (g->nodes[i].storage == BRISK_STORE_ALIAS ? g->nodes[i].alias_of : (i))
    #define CHECK_INTACT(b) do { const brisk_node *nb_ = &g->nodes[b]; \
        if (nb_->storage == BRISK_STORE_ARENA) \
            for (size_t c_ = nb_->offset / 64; c_ < (nb_->offset + nb_->bytes + 63) / 64; c_++) \
                if (owner[c_] != (b)) { bad++; break; } } while (0)
    for (int s = 0; s < n; s++) {
        int id = order[s];
        const brisk_node *nd = &g->nodes[id];
        for (int j = 0; j < nd->n_in; j++) CHECK_INTACT(BASE(nd->in[j]));
        if (nd->storage == BRISK_STORE_ARENA) {
            if (nd->offset % 64 || nd->offset + nd->bytes > p->arena_bytes) bad++;
            else
                for (size_t c = nd->offset / 64; c < (nd->offset + nd->bytes + 63) / 64; c++) owner[c] = id;
        }
    }
    if (check_loss && g->loss >= 0) CHECK_INTACT(BASE(g->loss));
    if (g->output >= 0) CHECK_INTACT(BASE(g->output));
    free(owner);
    return bad;
}
/* Predict never computes the loss, so only its output must survive to the end. */
static int simulate(const brisk_graph *g, const brisk_plan *p, const int *order, int n) {
    return simulate_roots(g, p, order, n, order != p->predict_order);
}

static void plan_ok(brisk_graph *g, brisk_plan *p) {
    brisk_error e;
    e.msg[0] = 0;
    brisk_status st = brisk_plan_build(g, p, &e);
    if (st != BRISK_OK) fprintf(stderr, "plan: %s\n", e.msg);
    CHECK(st == BRISK_OK);
}

/* x -> a -> b -> c -> loss, each [256] f32 (1 KiB): at most two live at once. */
static void test_chain(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape1(256));
    int a = brisk_relu(g, x), b = brisk_tanh(g, a), c = brisk_sigmoid(g, b);
    g->loss = brisk_sum(g, c, 1, 0);
    brisk_plan p;
    plan_ok(g, &p);
    CHECK(p.n_train == 4 && p.train_order[0] == a && p.train_order[3] == g->loss);
    CHECK(p.n_eval == 4 && p.n_predict == 0);
    CHECK_NEAR(p.peak_live_bytes, 2048, 0);
    CHECK_NEAR(p.arena_bytes, 2048, 0);
    CHECK(p.input_bytes == 1024 && p.param_bytes == 0 && brisk_plan_total_bytes(&p) == 2048 + 1024);
    CHECK(simulate(g, &p, p.train_order, p.n_train) == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

/* a feeds b and c, which meet in d: a, b, c live together (3 KiB). */
static void test_diamond(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape1(256));
    int a = brisk_relu(g, x), b = brisk_tanh(g, a), c = brisk_sigmoid(g, a), d = brisk_add(g, b, c);
    g->loss = brisk_sum(g, d, 1, 0);
    brisk_plan p;
    plan_ok(g, &p);
    CHECK(p.n_train == 5);
    CHECK_NEAR(p.peak_live_bytes, 3072, 0);
    CHECK_NEAR(p.arena_bytes, 3072, 0);
    CHECK(g->nodes[d].offset == g->nodes[a].offset); /* d reuses a's slot: a died at c */
    CHECK(simulate(g, &p, p.train_order, p.n_train) == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

/* A 64 KiB buffer at the start, then a chain of 64-byte buffers: the peak is the
 * big buffer plus its first consumer's output, and the small ones reuse its space. */
static void test_big_early_buffer_dies(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(16, 1024));
    int big = brisk_relu(g, x);
    int small = brisk_sum(g, big, 0x2, 0);        /* [16]: 64 bytes */
    int r1 = brisk_tanh(g, small), r2 = brisk_tanh(g, r1);
    g->loss = brisk_sum(g, r2, 1, 0);
    brisk_plan p;
    plan_ok(g, &p);
    CHECK_NEAR(p.peak_live_bytes, 65536 + 64, 0);
    CHECK_NEAR(p.arena_bytes, 65536 + 64, 0);
    CHECK(g->nodes[r1].offset < 65536 && g->nodes[r2].offset < 65536);
    CHECK(simulate(g, &p, p.train_order, p.n_train) == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

/* A reshape is a view: it has no buffer, and a use through it keeps its base alive. */
static void test_alias(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(4, 256));
    int a = brisk_relu(g, x);                        /* step 0, lives to step 3 through r2 */
    int r1 = brisk_reshape(g, a, brisk_shape1(1024));
    int r2 = brisk_reshape(g, r1, brisk_shape2(256, 4));
    int b = brisk_tanh(g, x), c = brisk_sigmoid(g, x); /* steps 1, 2 */
    int d = brisk_relu(g, r2);                       /* step 3 */
    int e = brisk_add(g, b, brisk_add(g, c, brisk_reshape(g, d, brisk_shape2(4, 256))));
    g->loss = brisk_sum(g, e, 3, 0);
    g->output = r2; /* an alias as the output keeps its base to the end */
    brisk_plan p;
    plan_ok(g, &p);
    for (int s = 0; s < p.n_train; s++) CHECK(g->nodes[p.train_order[s]].op != BRISK_OP_RESHAPE);
    CHECK(g->nodes[r1].storage == BRISK_STORE_ALIAS && g->nodes[r2].alias_of == a);
    /* a, b, c, d are all live at step 3: 16 KiB. */
    CHECK(p.peak_live_bytes >= 4 * 4096);
    size_t oa = g->nodes[a].offset;
    int others[] = {b, c, d, e};
    for (int i = 0; i < 4; i++) {
        size_t o = g->nodes[others[i]].offset;
        CHECKF(o + 4096 <= oa || oa + 4096 <= o, "node %d at %zu overlaps a at %zu", others[i], o, oa);
    }
    CHECK(p.n_predict == 1 && p.predict_order[0] == a);
    CHECK(simulate(g, &p, p.train_order, p.n_train) == 0);
    CHECK(simulate(g, &p, p.predict_order, p.n_predict) == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

/* Nodes nothing needs are not scheduled. */
static void test_pruning(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape1(64));
    int w = brisk_param(g, "w", brisk_shape1(64), BRISK_INIT_ONES, 0, 0);
    int dead = brisk_tanh(g, x);
    int h = brisk_mul(g, x, w);
    int out = brisk_relu(g, h);
    int loss = brisk_sum(g, h, 1, 0);
    g->output = out;
    brisk_error e, *ep = &e;
    REQUIRE_OK(brisk_backward(g, loss, &e), ep);
    brisk_plan p;
    plan_ok(g, &p);
    for (int s = 0; s < p.n_train; s++) CHECK(p.train_order[s] != dead);
    CHECK(p.n_predict == 2 && p.predict_order[0] == h && p.predict_order[1] == out);
    CHECK(p.n_eval == 3); /* h, out, loss */
    for (int s = 0; s < p.n_eval; s++) CHECK(p.eval_order[s] < g->n_forward);
    /* GRAD_ACCUM runs as soon as its gradient exists, not at the end. */
    int ga = g->params[0].grad_node, src = g->nodes[ga].in[0], pos_ga = -1, pos_src = -1;
    for (int s = 0; s < p.n_train; s++) {
        if (p.train_order[s] == ga) pos_ga = s;
        if (p.train_order[s] == src) pos_src = s;
    }
    CHECK(pos_ga >= 0 && pos_ga == pos_src + 1);
    CHECK(p.param_bytes == 64 * 4);
    CHECK(simulate(g, &p, p.train_order, p.n_train) == 0);
    CHECK(simulate(g, &p, p.eval_order, p.n_eval) == 0);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

typedef struct { uint64_t s; } rng;
static uint32_t rnd(rng *r, uint32_t n) {
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(r->s >> 33) % n;
}

/* A random graph of ~200 nodes over params of shape [rows, 32], rows varying through
 * concat, slice and sums; differentiated, so the plan covers a full training step. */
static brisk_graph *random_graph(uint64_t seed, int n_ops) {
    rng r = {seed * 2654435761u + 1};
    brisk_graph *g = brisk_graph_new();
    int pool[512], np = 0;
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        pool[np++] = brisk_param(g, name, brisk_shape2(1 + rnd(&r, 48), 32), BRISK_INIT_NORMAL, 1, 1);
    }
    pool[np++] = brisk_input(g, "x", BRISK_F32, brisk_shape2(16, 32));
    while (g->n_nodes < n_ops && np < 500) {
        int x = pool[rnd(&r, (uint32_t)np)];
        /* Prefer recent nodes so chains get long and lifetimes vary. */
        if (rnd(&r, 2)) x = pool[np - 1 - (int)rnd(&r, np < 8 ? (uint32_t)np : 8u)];
        brisk_shape sx = g->nodes[x].shape;
        int64_t rows = sx.ndim == 2 ? sx.d[0] : 1;
        int y = -1;
        switch (rnd(&r, 8)) {
        case 0: y = brisk_relu(g, x); break;
        case 1: y = brisk_tanh(g, x); break;
        case 2: {
            int z = pool[rnd(&r, (uint32_t)np)];
            y = brisk_shape_equal(&g->nodes[z].shape, &sx) || g->nodes[z].shape.d[0] == 1 ? brisk_mul(g, x, z)
                                                                                        : brisk_sigmoid(g, x);
            break;
        }
        case 3: {
            int z = pool[rnd(&r, (uint32_t)np)];
            int xs[2] = {x, z};
            y = sx.ndim == 2 && g->nodes[z].shape.ndim == 2 && sx.d[0] + g->nodes[z].shape.d[0] <= 128
                    ? brisk_concat(g, xs, 2, 0) : brisk_relu(g, x);
            break;
        }
        case 4: y = sx.ndim == 2 && rows > 1 ? brisk_slice(g, x, 0, rnd(&r, (uint32_t)rows / 2), rows / 2) : brisk_tanh(g, x); break;
        case 5: y = sx.ndim == 2 ? brisk_sum(g, x, 1, 1) : brisk_relu(g, x); break;
        case 6: y = brisk_reshape(g, brisk_relu(g, x), brisk_shape2(brisk_shape_numel(&sx) / 32, 32)); break;
        case 7: y = brisk_scale(g, brisk_add(g, x, x), 0.5f, 1.0f); break;
        }
        if (y < 0) break;
        pool[np++] = y;
    }
    /* The loss sums every node nothing else uses, so nothing is pruned by accident. */
    uint8_t *used = calloc((size_t)g->n_nodes, 1);
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) used[g->nodes[i].in[j]] = 1;
    int loss = -1, n = g->n_nodes;
    for (int i = 0; i < n; i++) {
        if (used[i] || g->nodes[i].op == BRISK_OP_INPUT) continue;
        int s = brisk_sum(g, i, (1u << g->nodes[i].shape.ndim) - 1u, 0);
        loss = loss < 0 ? s : brisk_add(g, loss, s);
    }
    free(used);
    g->output = pool[np / 2];
    brisk_error e;
    if (brisk_backward(g, loss, &e) != BRISK_OK) {
        fprintf(stderr, "random graph %llu: %s\n", (unsigned long long)seed, e.msg);
        brisk_graph_free(g);
        return NULL;
    }
    return g;
}

/* Buffers whose lifetimes (recomputed here) intersect never share bytes. */
static int overlaps(const brisk_graph *g, const brisk_plan *p) {
    int n = g->n_nodes, bad = 0;
    int *def = malloc((size_t)n * sizeof *def), *last = malloc((size_t)n * sizeof *last);
    for (int i = 0; i < n; i++) def[i] = last[i] = -1;
    for (int s = 0; s < p->n_train; s++) {
        int id = p->train_order[s];
        def[id] = last[id] = s;
        for (int j = 0; j < g->nodes[id].n_in; j++) last[BASE(g->nodes[id].in[j])] = s;
    }
    int roots[2] = {g->loss, g->output};
    for (int k = 0; k < 2; k++) if (roots[k] >= 0) last[BASE(roots[k])] = p->n_train - 1;
    for (int i = 0; i < n; i++) {
        if (g->nodes[i].storage != BRISK_STORE_ARENA || def[i] < 0) continue;
        for (int j = i + 1; j < n; j++) {
            if (g->nodes[j].storage != BRISK_STORE_ARENA || def[j] < 0) continue;
            if (def[i] > last[j] || def[j] > last[i]) continue;
            size_t oi = g->nodes[i].offset, oj = g->nodes[j].offset;
            if (oi < oj + g->nodes[j].bytes && oj < oi + g->nodes[i].bytes) bad++;
        }
    }
    free(def);
    free(last);
    return bad;
}

static void test_random_graphs(void) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
        brisk_graph *g = random_graph(seed, 200);
        REQUIRE(g);
        brisk_plan p;
        plan_ok(g, &p);
        CHECKF(overlaps(g, &p) == 0, "seed %llu: live buffers overlap", (unsigned long long)seed);
        CHECKF(simulate(g, &p, p.train_order, p.n_train) == 0, "seed %llu: train", (unsigned long long)seed);
        CHECKF(simulate(g, &p, p.eval_order, p.n_eval) == 0, "seed %llu: eval", (unsigned long long)seed);
        CHECKF(simulate(g, &p, p.predict_order, p.n_predict) == 0, "seed %llu: predict", (unsigned long long)seed);
        CHECK(p.arena_bytes >= p.peak_live_bytes);
        CHECK(p.n_train > 200);
        /* Every scheduled arena node was placed. */
        for (int s = 0; s < p.n_train; s++) {
            const brisk_node *nd = &g->nodes[p.train_order[s]];
            if (nd->storage == BRISK_STORE_ARENA) CHECK(nd->offset + nd->bytes <= p.arena_bytes);
        }
        brisk_plan_free(&p);
        brisk_graph_free(g);
    }
}

static void test_plan_errors(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape1(4));
    brisk_relu(g, 99);
    brisk_plan p;
    brisk_error e;
    CHECK(brisk_plan_build(g, &p, &e) != BRISK_OK);
    CHECK(strstr(e.msg, "plan") && strstr(e.msg, "not a node"));
    CHECK(p.train_order == NULL);
    brisk_graph_free(g);
    (void)x;
}

TEST_MAIN(T(test_chain), T(test_diamond), T(test_big_early_buffer_dies), T(test_alias), T(test_pruning),
          T(test_random_graphs), T(test_plan_errors))
