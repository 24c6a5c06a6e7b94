/* Loader: synchronous and prefetching modes yield the same batches in the same order
 * across epoch boundaries; resume from (epoch, position) continues the same sequence;
 * errors from the loader thread reach next(); destroy mid-epoch returns. */
#include "brisk/data.h"
#include "test.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Waddress" /* REQUIRE_OK(call, &err) */

enum { N = 103, B = 10, FEAT = 3 };

/* x [N, 3] = 10 i + j, y [N] = i: every value says which sample it came from. */
static void make_dataset(brisk_dataset *ds) {
    brisk_error err;
    memset(ds, 0, sizeof *ds);
    brisk_tensor x, y;
    brisk_tensor_alloc(&x, BRISK_F32, brisk_shape2(N, FEAT), &err);
    brisk_tensor_alloc(&y, BRISK_I32, brisk_shape1(N), &err);
    for (int i = 0; i < N; i++) {
        ((int32_t *)y.data)[i] = i;
        for (int j = 0; j < FEAT; j++) ((float *)x.data)[i * FEAT + j] = (float)(10 * i + j);
    }
    brisk_dataset_add(ds, "x", &x, &err);
    brisk_dataset_add(ds, "y", &y, &err);
}

typedef struct rec { int64_t epoch, position, next_epoch, next_position; int32_t y[B]; } rec;

/* Takes `count` batches, checking each batch's fields agree, into out. */
static int run(const brisk_dataset *ds, int prefetch, int64_t e0, int64_t p0, int shuffle, int count, rec *out,
               const int64_t *subset, int64_t nsubset) {
    brisk_error err;
    brisk_loader *l;
    brisk_loader_config c = {0};
    c.dataset = ds;
    c.indices = subset;
    c.nindices = nsubset;
    c.batch_size = B;
    c.seed = 1234;
    c.shuffle = shuffle;
    c.start_epoch = e0;
    c.start_position = p0;
    c.prefetch = prefetch;
    if (brisk_loader_create(&l, &c, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    int ok = brisk_loader_batches_per_epoch(l) == (subset ? nsubset : N) / B;
    double waits = 0;
    for (int k = 0; k < count && ok; k++) {
        brisk_batch b;
        if (brisk_loader_next(l, &b, &err)) { fprintf(stderr, "%s\n", err.msg); ok = 0; break; }
        ok &= b.nfields == 2 && b.fields[0].shape.d[0] == B && b.fields[0].shape.d[1] == FEAT &&
              b.fields[1].shape.ndim == 1 && b.fields[1].dtype == BRISK_I32;
        ok &= ((uintptr_t)b.fields[0].data % 64) == 0;
        const float *x = (const float *)b.fields[0].data;
        const int32_t *y = (const int32_t *)b.fields[1].data;
        for (int j = 0; j < B; j++) {
            out[k].y[j] = y[j];
            for (int f = 0; f < FEAT; f++) ok &= x[j * FEAT + f] == (float)(10 * y[j] + f);
        }
        out[k].epoch = b.epoch;
        out[k].position = b.position;
        out[k].next_epoch = b.next_epoch;
        out[k].next_position = b.next_position;
        waits += b.wait_s;
        ok &= b.wait_s >= 0;
        brisk_loader_release(l, &b);
    }
    ok &= fabs(brisk_loader_wait_seconds(l) - waits) < 1e-9;
    brisk_loader_destroy(l);
    return ok ? 0 : -1;
}

static void test_sync_equals_prefetch(void) {
    brisk_dataset ds;
    make_dataset(&ds);
    enum { K = 35 }; /* 3.5 epochs of 10 batches */
    rec a[K], b[K], c[K];
    REQUIRE(run(&ds, 0, 0, 0, 1, K, a, NULL, 0) == 0);
    REQUIRE(run(&ds, 4, 0, 0, 1, K, b, NULL, 0) == 0);
    REQUIRE(run(&ds, 1, 0, 0, 1, K, c, NULL, 0) == 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) == 0);
    /* Epochs of 10 batches, positions step by B, the 3 leftover samples dropped, each
     * epoch's 100 samples distinct and in an epoch-specific order. */
    for (int k = 0; k < K; k++) {
        CHECK(a[k].epoch == k / 10 && a[k].position == (k % 10) * B);
        CHECK(a[k].next_epoch == (k + 1) / 10 && a[k].next_position == ((k + 1) % 10) * B);
    }
    for (int e = 0; e < 3; e++) {
        char seen[N] = {0};
        for (int k = e * 10; k < e * 10 + 10; k++)
            for (int j = 0; j < B; j++) seen[a[k].y[j]]++;
        int distinct = 0;
        for (int i = 0; i < N; i++) distinct += seen[i] == 1;
        CHECK(distinct == 100);
    }
    CHECK(memcmp(a[0].y, a[10].y, sizeof a[0].y) != 0);
    /* The order is the sampler's: batch k of epoch e is order_e[k*B ..]. */
    int64_t order[N];
    brisk_error err;
    REQUIRE_OK(brisk_sampler_order(NULL, N, 1234, 2, 1, order, &err), &err);
    for (int j = 0; j < B; j++) CHECK(a[23].y[j] == order[3 * B + j]);
    brisk_dataset_free(&ds);
}

static void test_resume(void) {
    brisk_dataset ds;
    make_dataset(&ds);
    enum { K = 30 };
    rec full[K], rest[K];
    REQUIRE(run(&ds, 3, 0, 0, 1, K, full, NULL, 0) == 0);
    int stops[] = {0, 4, 9, 10, 17};
    for (unsigned s = 0; s < sizeof stops / sizeof stops[0]; s++) {
        int k = stops[s];
        int prefetch = s % 2 ? 0 : 2;
        REQUIRE(run(&ds, prefetch, full[k].next_epoch, full[k].next_position, 1, K - k - 1, rest, NULL, 0) == 0);
        CHECKF(memcmp(rest, full + k + 1, (size_t)(K - k - 1) * sizeof *rest) == 0, "resume after batch %d", k);
    }
    /* Resuming at a position past the epoch's last whole batch starts the next epoch. */
    REQUIRE(run(&ds, 0, 1, 95, 1, 1, rest, NULL, 0) == 0);
    CHECK(rest[0].epoch == 2 && rest[0].position == 0 && memcmp(rest[0].y, full[20].y, sizeof rest[0].y) == 0);
    brisk_dataset_free(&ds);
}

static void test_subset_and_no_shuffle(void) {
    brisk_dataset ds;
    make_dataset(&ds);
    int64_t subset[25];
    for (int i = 0; i < 25; i++) subset[i] = 100 - 4 * i;
    rec a[5], b[5];
    REQUIRE(run(&ds, 0, 0, 0, 0, 5, a, subset, 25) == 0);
    REQUIRE(run(&ds, 2, 0, 0, 0, 5, b, subset, 25) == 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    for (int j = 0; j < B; j++) CHECK(a[0].y[j] == 100 - 4 * j && a[1].y[j] == 100 - 4 * (B + j));
    CHECK(a[2].epoch == 1 && a[2].y[0] == 100); /* 2 batches per epoch, 5 dropped */
    REQUIRE(run(&ds, 2, 0, 0, 1, 5, a, subset, 25) == 0);
    for (int k = 0; k < 5; k++)
        for (int j = 0; j < B; j++) CHECK(a[k].y[j] <= 100 && (100 - a[k].y[j]) % 4 == 0);
    brisk_dataset_free(&ds);
}

typedef struct counter { int allocs, frees; size_t live; } counter;
static void *count_alloc(void *u, size_t n) { ((counter *)u)->allocs++; ((counter *)u)->live += n; return malloc(n); }
static void count_free(void *u, void *p, size_t n) { ((counter *)u)->frees++; ((counter *)u)->live -= n; free(p); }

static brisk_status fail_at_7(void *user, brisk_batch *b, brisk_error *err) {
    int *calls = (int *)user;
    if (++*calls == 7) return brisk_errorf(err, BRISK_ERR_IO, "disk went away");
    ((float *)b->fields[0].data)[0] = -1; /* transforms may write the batch */
    return BRISK_OK;
}

static void test_errors_allocator_destroy(void) {
    brisk_error err;
    brisk_dataset ds;
    make_dataset(&ds);
    for (int prefetch = 0; prefetch <= 3; prefetch += 3) {
        int calls = 0;
        counter cnt = {0};
        brisk_loader_config c = {0};
        c.dataset = &ds;
        c.batch_size = B;
        c.prefetch = prefetch;
        c.transform = fail_at_7;
        c.transform_user = &calls;
        c.allocator = (brisk_host_allocator){count_alloc, count_free, &cnt};
        brisk_loader *l;
        REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
        CHECK(cnt.allocs == 2 * (prefetch ? prefetch : 1));
        brisk_batch b;
        for (int k = 0; k < 6; k++) {
            REQUIRE_OK(brisk_loader_next(l, &b, &err), &err);
            CHECK(((float *)b.fields[0].data)[0] == -1);
            brisk_loader_release(l, &b);
        }
        CHECK(brisk_loader_next(l, &b, &err) == BRISK_ERR_IO);
        CHECKF(strstr(err.msg, "loader: batch at epoch 0, position 60: disk went away") != NULL, "%s", err.msg);
        CHECK(brisk_loader_next(l, &b, &err) == BRISK_ERR_IO); /* and it stays failed */
        brisk_loader_destroy(l);
        CHECK(cnt.frees == cnt.allocs && cnt.live == 0);
    }
    /* Holding every slot: next() says so instead of waiting forever. */
    brisk_loader_config c = {0};
    c.dataset = &ds;
    c.batch_size = B;
    c.prefetch = 2;
    brisk_loader *l;
    REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
    brisk_batch b1, b2, b3;
    REQUIRE_OK(brisk_loader_next(l, &b1, &err), &err);
    REQUIRE_OK(brisk_loader_next(l, &b2, &err), &err);
    CHECK(b2.position == b1.position + B);
    CHECK(brisk_loader_next(l, &b3, &err) == BRISK_ERR_INVALID && strstr(err.msg, "all 2 batch slots are held"));
    brisk_loader_release(l, &b2); /* out of order is fine */
    brisk_loader_release(l, &b2); /* and a second release is ignored */
    brisk_loader_release(l, &b1);
    REQUIRE_OK(brisk_loader_next(l, &b3, &err), &err);
    CHECK(b3.position == 2 * B);
    /* Destroy mid-epoch with a batch still held and the thread blocked on a full ring. */
    usleep(20000);
    brisk_loader_destroy(l);
    c.prefetch = 0;
    REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
    REQUIRE_OK(brisk_loader_next(l, &b1, &err), &err);
    CHECK(brisk_loader_next(l, &b2, &err) == BRISK_ERR_INVALID && strstr(err.msg, "release the previous batch"));
    brisk_loader_destroy(l);
    /* Destroy right after create, many times (races with the thread's start). */
    c.prefetch = 4;
    for (int i = 0; i < 200; i++) {
        REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
        if (i % 2) { REQUIRE_OK(brisk_loader_next(l, &b1, &err), &err); }
        brisk_loader_destroy(l);
    }
    /* Bad configurations. */
    c.batch_size = N + 1;
    CHECK(brisk_loader_create(&l, &c, &err) == BRISK_ERR_INVALID && strstr(err.msg, "batch size 104 with 103 samples"));
    c.batch_size = B;
    int64_t bad[2] = {0, N};
    c.indices = bad;
    c.nindices = 2;
    c.batch_size = 1;
    CHECK(brisk_loader_create(&l, &c, &err) == BRISK_ERR_INVALID && strstr(err.msg, "index 103 at subset position 1"));
    c.indices = NULL;
    c.start_position = N + 1;
    CHECK(brisk_loader_create(&l, &c, &err) == BRISK_ERR_INVALID);
    c.start_position = 0;
    c.allocator.alloc = count_alloc;
    CHECK(brisk_loader_create(&l, &c, &err) == BRISK_ERR_INVALID && strstr(err.msg, "allocator"));
    brisk_dataset empty = {0};
    c.dataset = &empty;
    CHECK(brisk_loader_create(&l, &c, &err) == BRISK_ERR_INVALID);
    brisk_dataset_free(&ds);
}

/* A slow consumer never waits once the ring is full; a slow producer makes it wait,
 * and the wait is reported. */
static brisk_status slow(void *user, brisk_batch *b, brisk_error *err) {
    usleep(*(int *)user);
    return BRISK_OK;
}

static void test_wait_accounting(void) {
    brisk_error err;
    brisk_dataset ds;
    make_dataset(&ds);
    int us = 5000;
    brisk_loader_config c = {0};
    c.dataset = &ds;
    c.batch_size = B;
    c.prefetch = 2;
    c.transform = slow;
    c.transform_user = &us;
    brisk_loader *l;
    REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
    brisk_batch b;
    for (int k = 0; k < 6; k++) {
        REQUIRE_OK(brisk_loader_next(l, &b, &err), &err);
        brisk_loader_release(l, &b);
    }
    CHECKF(brisk_loader_wait_seconds(l) > 0.02, "waited %.4f s", brisk_loader_wait_seconds(l));
    brisk_loader_destroy(l);
    us = 30000; /* 30 ms a batch, but both slots are filled before the consumer comes */
    REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
    usleep(150000);
    for (int k = 0; k < 2; k++) {
        REQUIRE_OK(brisk_loader_next(l, &b, &err), &err);
        CHECKF(b.wait_s < 0.015, "waited %.4f s on a full ring", b.wait_s);
        brisk_loader_release(l, &b);
    }
    brisk_loader_destroy(l);
    brisk_dataset_free(&ds);
}

TEST_MAIN(T(test_sync_equals_prefetch), T(test_resume), T(test_subset_and_no_shuffle), T(test_errors_allocator_destroy),
          T(test_wait_accounting))
