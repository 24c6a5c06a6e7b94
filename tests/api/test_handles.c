/* Session handles used after destroy: every call through a destroyed handle, or a copy of
 * one, is refused with "destroyed" and touches no freed memory (this test runs under
 * ASan/UBSan in `make sanitize`, and tests/api/api.cmake runs it under valgrind when
 * found); a handle of a slot that was reused names the old session, not the new one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"
#include "test.h"

#define OK(call, s) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            brisk_session_error(s)); t_failed_checks++; t_cur_failed = 1; return; } } while (0)

static const char *cfg = "{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2},"
                         " \"data\": {\"validation_fraction\": 0}, \"train\": {\"batch_size\": 4},"
                         " \"speed\": {\"device\": \"cpu\", \"threads\": 1, \"prefetch\": 0}}";

#define DESTROYED(call, h) do { brisk_status s_ = (call); \
    CHECKF(s_ == BRISK_ERR_INVALID, "%s -> %s", #call, brisk_status_name(s_)); \
    CHECKF(strstr(brisk_session_error(h), "destroyed") != NULL, "%s: '%s'", #call, brisk_session_error(h)); } while (0)

static void test_use_after_destroy(void) {
    brisk_session *s = NULL;
    OK(brisk_session_create(cfg, NULL, NULL, &s), s);
    brisk_session *copy = s; /* what Fortran assignment does */
    float x[8 * 4] = {0}, y[8] = {0}, out[8 * 2];
    OK(brisk_session_push(copy, 8, x, 0, y, 0), copy);
    OK(brisk_session_destroy(s), s);
    double v;
    int64_t a, b;
    DESTROYED(brisk_session_push(copy, 8, x, 0, y, 0), copy);
    DESTROYED(brisk_session_clear(copy), copy);
    DESTROYED(brisk_session_sizes(copy, &a, &b), copy);
    DESTROYED(brisk_session_train_epochs(copy, 1), copy);
    DESTROYED(brisk_session_train_steps(copy, 1), copy);
    DESTROYED(brisk_session_save(copy, "x.safetensors"), copy);
    DESTROYED(brisk_session_load(copy, "x.safetensors"), copy);
    DESTROYED(brisk_session_predict(copy, 1, x, 0, out, 0), copy);
    DESTROYED(brisk_session_sample(copy, 1, x, 0, out, 0, 0, 0, 0.0, 0), copy);
    DESTROYED(brisk_session_sample_guided(copy, 1, x, 0, x, 0, out, 0, 0, 0, 0.0, 0), copy);
    DESTROYED(brisk_session_query(copy, "steps", &v), copy);
    DESTROYED(brisk_session_destroy(copy), copy); /* a second destroy */
    DESTROYED(brisk_session_destroy(s), s);
    CHECK(brisk_session_request_stop(copy) == BRISK_ERR_INVALID);
    CHECK(strstr(brisk_session_error(s), "creation") == NULL);
}

/* A session whose creation failed: its handle reports that error until destroyed, then
 * "destroyed". */
static void test_failed_creation(void) {
    brisk_session *s = NULL;
    CHECK(brisk_session_create("{\"model\": {\"type\": \"unet\"}}", NULL, NULL, &s) == BRISK_ERR_INVALID);
    CHECK(brisk_session_train_steps(s, 1) == BRISK_ERR_INVALID);
    CHECKF(strstr(brisk_session_error(s), "model.type") != NULL, "%s", brisk_session_error(s));
    OK(brisk_session_destroy(s), s);
    DESTROYED(brisk_session_train_steps(s, 1), s);
}

/* Something that is no handle at all: an address, or an odd number never handed out. */
static void test_not_a_handle(void) {
    int64_t a, b;
    int local;
    brisk_session *fake = (brisk_session *)(void *)&local;
    CHECK(brisk_session_sizes(fake, &a, &b) == BRISK_ERR_INVALID);
    CHECKF(strstr(brisk_session_error(fake), "not a brisk session handle") != NULL, "%s", brisk_session_error(fake));
    brisk_session *never = (brisk_session *)(uintptr_t)((UINTPTR_MAX >> 2) | 1);
    CHECK(brisk_session_sizes(never, &a, &b) == BRISK_ERR_INVALID);
    CHECK(strstr(brisk_session_error(never), "not a brisk session handle") != NULL);
    CHECK(brisk_session_destroy(never) == BRISK_ERR_INVALID);
    CHECK(brisk_session_request_stop(fake) == BRISK_ERR_INVALID);
    CHECK(brisk_session_destroy(NULL) == BRISK_OK);
    CHECK(strstr(brisk_session_error(NULL), "NULL") != NULL);
}

/* Slots are reused round robin; after 4096 sessions the first slot holds a new one. Its old
 * handle stays destroyed, and a stop asked through it does not reach the new session. */
static void test_slot_reuse(void) {
    brisk_session *old = NULL, *s = NULL;
    OK(brisk_session_create(cfg, NULL, NULL, &old), old);
    OK(brisk_session_destroy(old), old);
    const uintptr_t slot_mask = (uintptr_t)4095 << 1;
    int reused = 0;
    for (int i = 0; i < 5000 && !reused; i++) {
        brisk_session *f = NULL;
        /* failed creations are cheap and still take a slot */
        brisk_session_create("{", NULL, NULL, &f);
        reused = ((uintptr_t)(void *)f & slot_mask) == ((uintptr_t)(void *)old & slot_mask);
        if (reused) { /* this slot: destroy, and create a real session in it next */
            OK(brisk_session_destroy(f), f);
            for (int k = 0; k < 4095; k++) {
                brisk_session *g = NULL;
                brisk_session_create("{", NULL, NULL, &g);
                brisk_session_destroy(g);
            }
            OK(brisk_session_create(cfg, NULL, NULL, &s), s);
        } else {
            brisk_session_destroy(f);
        }
    }
    REQUIRE(reused && s);
    CHECK(((uintptr_t)(void *)s & slot_mask) == ((uintptr_t)(void *)old & slot_mask));
    CHECK(s != old);
    int64_t a, b;
    DESTROYED(brisk_session_sizes(old, &a, &b), old);
    CHECK(brisk_session_request_stop(old) == BRISK_ERR_INVALID);
    double v;
    OK(brisk_session_query(s, "stop_requested", &v), s);
    CHECK(v == 0);
    OK(brisk_session_sizes(s, &a, &b), s);
    CHECK(a == 4 && b == 1); /* a classifier: one label per sample */
    OK(brisk_session_destroy(s), s);
}

TEST_MAIN(T(test_use_after_destroy), T(test_failed_creation), T(test_not_a_handle), T(test_slot_reuse))
