/* The CPU backend's vtable beyond the kernels: 64-byte aligned allocation (2 MiB for big
 * buffers, asked onto huge pages),
 * upload/download/memset0, supports_op for every op, leaves as no-ops, RESHAPE
 * copying when it is not aliased, and errors (not crashes) for wrong dtypes, bad
 * input ids and unknown ops. */
#include "backend/cpu/cpu_internal.h"
#include "cpu_test_util.h"

#include <stdint.h>

static void test_memory(void) {
    brisk_backend *be = brisk_backend_cpu_new(0);
    REQUIRE(be && strcmp(be->name, "cpu") == 0);
    brisk_error err_s = {0}, *err = &err_s;
    const size_t sizes[] = {0, 1, 63, 64, 1000003, (size_t)9 << 20}; /* the last on 2 MiB pages */
    for (int k = 0; k < 6; k++) {
        void *p = NULL;
        REQUIRE_OK(be->alloc(be, sizes[k], &p, err), err);
        CHECK(p != NULL && ((uintptr_t)p % (sizes[k] >= (4u << 20) ? 2u << 20 : 64)) == 0);
        unsigned char *host = malloc(sizes[k] + 1), *back = malloc(sizes[k] + 1);
        for (size_t i = 0; i < sizes[k]; i++) host[i] = (unsigned char)(i * 7);
        REQUIRE_OK(be->upload(be, p, host, sizes[k], err), err);
        REQUIRE_OK(be->download(be, back, p, sizes[k], err), err);
        CHECK(memcmp(host, back, sizes[k]) == 0);
        REQUIRE_OK(be->memset0(be, p, sizes[k], err), err);
        REQUIRE_OK(be->download(be, back, p, sizes[k], err), err);
        for (size_t i = 0; i < sizes[k]; i++) if (back[i]) { CHECK(back[i] == 0); break; }
        if (sizes[k] >= (4u << 20)) { /* Linux says how much is on huge pages, and the kernel's setting */
            char note[160];
            CHECK(brisk_backend_cpu_huge_pages(note, sizeof note, NULL) >= 0 && strstr(note, "MiB on 2 MiB pages"));
        }
        REQUIRE_OK(be->sync(be, err), err);
        be->free(be, p);
        free(host);
        free(back);
    }
    be->destroy(be);
}

static void test_supports_and_names(void) {
    brisk_backend *be = brisk_backend_cpu_new(1);
    for (int op = 0; op < BRISK_OP_COUNT; op++) {
        CHECKF(strcmp(brisk_op_name((brisk_op)op), "?") != 0, "op %d has no name", op);
        brisk_node n = {0};
        n.op = (brisk_op)op;
        n.dtype = op == BRISK_OP_RANDINT ? BRISK_I32 : BRISK_F32;
        CHECKF(be->supports_op(be, &n, NULL, 0), "op %s not supported in f32", brisk_op_name((brisk_op)op));
    }
    brisk_node n = {0};
    n.op = BRISK_OP_ADD;
    n.dtype = BRISK_I32;
    char why[64] = "";
    CHECK(!be->supports_op(be, &n, why, sizeof why));
    CHECK(strstr(why, "f32") != NULL);
    n.op = BRISK_OP_COUNT;
    n.dtype = BRISK_F32;
    CHECK(!be->supports_op(be, &n, NULL, 0));
    n.op = BRISK_OP_TRANSPOSE;
    n.dtype = BRISK_BF16;
    CHECK(be->supports_op(be, &n, NULL, 0));
    be->destroy(be);
}

static void test_leaves_and_reshape(void) {
    brisk_backend *be = brisk_backend_cpu_new(1);
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(3, 5));
    brisk_attr at = tg_attr0();
    at.shape2 = brisk_shape1(15);
    int r = tg_node(&t, BRISK_OP_RESHAPE, BRISK_F32, brisk_shape1(15), &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    float before = tg_f(&t, x)[0];
    REQUIRE_OK(tg_run(be, &t, x, err), err); /* a leaf: nothing happens */
    CHECK(tg_f(&t, x)[0] == before);
    REQUIRE_OK(tg_run(be, &t, r, err), err);
    CHECK(memcmp(t.buf[r], t.buf[x], 60) == 0);
    tg_free(&t);
    be->destroy(be);
}

static void test_errors(void) {
    brisk_backend *be = brisk_backend_cpu_new(1);
    tgraph t;
    tg_init(&t);
    int xi = tg_input(&t, BRISK_I32, brisk_shape1(4)), xf = tg_input(&t, BRISK_F32, brisk_shape1(4));
    int ins[2] = {xf, xi};
    int add = tg_node(&t, BRISK_OP_ADD, BRISK_F32, brisk_shape1(4), NULL, 2, ins);
    brisk_error err = {0};
    CHECK(tg_run(be, &t, add, &err) == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "add") && strstr(err.msg, "i32"), "message: %s", err.msg);
    t.nodes[add].in[1] = 99;
    const void *in[2] = {t.buf[xf], t.buf[xf]};
    CHECK(be->run_node(be, &t.g, add, in, t.buf[add], NULL, &err) == BRISK_ERR_INVALID);
    CHECK(be->run_node(be, &t.g, 77, in, t.buf[add], NULL, &err) == BRISK_ERR_INVALID);
    t.nodes[add].in[1] = xf;
    t.nodes[add].op = BRISK_OP_COUNT;
    CHECK(be->run_node(be, &t.g, add, in, t.buf[add], NULL, &err) == BRISK_ERR_UNSUPPORTED);
    /* a NULL step state means eval: dropout is the identity */
    t.nodes[add].op = BRISK_OP_DROPOUT;
    t.nodes[add].n_in = 1;
    t.nodes[add].attr.f0 = 0.5f;
    brisk_error e2 = {0};
    CHECK(be->run_node(be, &t.g, add, in, t.buf[add], NULL, &e2) == BRISK_OK);
    CHECK(memcmp(t.buf[add], t.buf[xf], 16) == 0);
    tg_free(&t);
    be->destroy(be);
}

TEST_MAIN(T(test_memory), T(test_supports_and_names), T(test_leaves_and_reshape), T(test_errors))
