/* A session used from several threads at once, as simulation hosts and Python thread pools
 * do: destroy while another thread trains (it waits; nothing runs on freed memory: this test
 * runs under ASan in `make sanitize` and TSan in tests/api/api.cmake's tsan build), two
 * threads predicting (each gets the single-threaded answer), two threads training (every
 * step asked for is done), a solver thread pushing while another trains (the next call sees
 * the rows), calls from inside the log callback (BRISK_BUSY for those that would wait on
 * themselves, without touching the running call's message), and messages kept per thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"

#define IN 16
#define OUT 3
static const char *cfg = "{\"model\": {\"type\": \"mlp\", \"inputs\": 16, \"hidden\": [64, 64], \"outputs\": 3},"
                         " \"data\": {\"validation_fraction\": 0, \"buffer\": {\"capacity\": 8192}},"
                         " \"train\": {\"batch_size\": 32, \"seed\": 5}, \"speed\": {\"threads\": 2, \"prefetch\": 0}}";

#define OK(call, s) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            brisk_session_error(s)); t_failed_checks++; t_cur_failed = 1; return; } } while (0)

static void rows(int64_t n, uint64_t seed, float *x, float *y) {
    uint64_t v = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n * IN; i++) {
        v = v * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((v >> 40) % 2001) / 1000.0f - 1.0f;
    }
    for (int64_t i = 0; i < n; i++) y[i] = (float)(i % OUT);
}

/* A session holding n rows. */
static brisk_session *filled(int64_t n, brisk_log_fn log, void *user) {
    brisk_session *s = NULL;
    float *x = malloc(sizeof(float) * (size_t)(n * IN)), *y = malloc(sizeof(float) * (size_t)n);
    rows(n, 1, x, y);
    if (brisk_session_create(cfg, log, user, &s) || brisk_session_push(s, n, x, 0, y, 0)) {
        fprintf(stderr, "setup: %s\n", brisk_session_error(s));
        brisk_session_destroy(s);
        s = NULL;
    }
    free(x);
    free(y);
    return s;
}

typedef struct job {
    brisk_session *s;
    int64_t n;
    brisk_status st;
    atomic_int started, done;
    float *x, *out; /* predict */
} job;

static void *train_job(void *p) {
    job *j = p;
    atomic_store(&j->started, 1);
    j->st = brisk_session_train_steps(j->s, j->n);
    atomic_store(&j->done, 1);
    return NULL;
}

/* The train call's log: whether its closing summary came, and any message after destroy. */
typedef struct watch {
    atomic_int summary, after_destroy, destroyed;
} watch;

static void watch_log(void *user, brisk_log_level level, const char *msg) {
    (void)level;
    watch *w = user;
    if (atomic_load(&w->destroyed)) atomic_store(&w->after_destroy, 1);
    if (strstr(msg, "checkpoints       none")) atomic_store(&w->summary, 1);
}

/* Destroy while another thread trains: destroy waits for the train call, which completes
 * every step and its summary before destroy returns; the handle is "destroyed" for every
 * call from the moment destroy begins. */
static void test_destroy_waits_for_train(void) {
    watch w = {0};
    brisk_session *s = filled(2048, watch_log, &w);
    REQUIRE(s);
    job j = {.s = s, .n = 20000};
    pthread_t t;
    pthread_create(&t, NULL, train_job, &j);
    while (!atomic_load(&j.started)) usleep(100);
    usleep(20000);
    CHECKF(!atomic_load(&j.done), "the train call ended before destroy began: the test proves nothing");
    CHECK(brisk_session_destroy(s) == BRISK_OK);
    atomic_store(&w.destroyed, 1);
    CHECKF(atomic_load(&w.summary), "destroy returned before the train call's summary");
    pthread_join(t, NULL);
    CHECKF(j.st == BRISK_OK, "train during destroy -> %s", brisk_status_name(j.st));
    CHECK(!atomic_load(&w.after_destroy));
    double v;
    CHECK(brisk_session_query(s, "steps", &v) == BRISK_ERR_INVALID);
    CHECK(strstr(brisk_session_error(s), "destroyed") != NULL);
}

static void *predict_job(void *p) {
    job *j = p;
    for (int k = 0; k < 300 && j->st == BRISK_OK; k++) j->st = brisk_session_predict(j->s, j->n, j->x, 0, j->out, 0);
    return NULL;
}

/* Two threads predicting on one session get what one thread gets. */
static void test_concurrent_predict(void) {
    brisk_session *s = filled(512, NULL, NULL);
    REQUIRE(s);
    OK(brisk_session_train_steps(s, 5), s);
    enum { N = 40 };
    float x[N * IN], ref[N * OUT], out[2][N * OUT];
    rows(N, 9, x, ref);
    OK(brisk_session_predict(s, N, x, 0, ref, 0), s);
    job j[2] = {{.s = s, .n = N, .x = x, .out = out[0]}, {.s = s, .n = N, .x = x, .out = out[1]}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, predict_job, &j[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECKF(j[i].st == BRISK_OK, "thread %d: %s", i, brisk_status_name(j[i].st));
        CHECKF(memcmp(out[i], ref, sizeof ref) == 0, "thread %d's predictions differ from one thread's", i);
    }
    brisk_session_destroy(s);
}

/* Two threads training one session: the calls run one after the other, every step done. */
static void test_concurrent_train(void) {
    brisk_session *s = filled(1024, NULL, NULL);
    REQUIRE(s);
    job j[2] = {{.s = s, .n = 30}, {.s = s, .n = 45}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, train_job, &j[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(j[0].st == BRISK_OK && j[1].st == BRISK_OK);
    double steps = 0;
    OK(brisk_session_query(s, "steps", &steps), s);
    CHECKF(steps == 75, "%g steps; expected 30 + 45", steps);
    brisk_session_destroy(s);
}

typedef struct pusher {
    brisk_session *s;
    atomic_int *stop;
    int64_t pushed;
    brisk_status st;
} pusher;

static void *push_job(void *p) {
    pusher *u = p;
    float x[8 * IN], y[8];
    for (uint64_t k = 0; !atomic_load(u->stop) && u->st == BRISK_OK; k++) {
        rows(8, k + 100, x, y);
        u->st = brisk_session_push(u->s, 8, x, 0, y, 0);
        if (u->st == BRISK_OK) u->pushed += 8;
    }
    return NULL;
}

/* The host's pattern: the solver's thread pushes while a worker trains. Pushes are never
 * refused or lost; the next train call trains on them. */
static void test_push_while_training(void) {
    brisk_session *s = filled(512, NULL, NULL);
    REQUIRE(s);
    atomic_int stop = 0;
    pusher u = {s, &stop, 0, BRISK_OK};
    job j = {.s = s, .n = 600};
    pthread_t tp, tt;
    pthread_create(&tp, NULL, push_job, &u);
    pthread_create(&tt, NULL, train_job, &j);
    pthread_join(tt, NULL);
    atomic_store(&stop, 1);
    pthread_join(tp, NULL);
    CHECKF(j.st == BRISK_OK, "train -> %s", brisk_status_name(j.st));
    CHECKF(u.st == BRISK_OK, "push -> %s", brisk_status_name(u.st));
    double pushed = 0, buffered = 0;
    OK(brisk_session_query(s, "pushed", &pushed), s);
    OK(brisk_session_query(s, "buffered", &buffered), s);
    CHECKF(pushed == 512 + (double)u.pushed, "pushed %g, expected %lld", pushed, 512 + (long long)u.pushed);
    CHECK(buffered == (pushed < 8192 ? pushed : 8192));
    CHECK(u.pushed > 0);
    OK(brisk_session_train_epochs(s, 1), s);
    double steps = 0;
    OK(brisk_session_query(s, "steps", &steps), s);
    CHECKF(steps == 600 + (double)((int64_t)buffered / 32), "%g steps; the epoch after the pushes should have %lld",
           steps - 600, (long long)buffered / 32);
    brisk_session_destroy(s);
}

/* Calls made from the log callback, on the thread of the call that logs. */
typedef struct inside {
    brisk_session *s;
    int calls;
    brisk_status train, destroy, query, push;
    double steps;
} inside;

static void log_and_call(void *user, brisk_log_level level, const char *msg) {
    (void)level, (void)msg;
    inside *in = user;
    if (!in->s || in->calls++) return;
    in->train = brisk_session_train_steps(in->s, 1);
    in->destroy = brisk_session_destroy(in->s);
    in->query = brisk_session_query(in->s, "steps", &in->steps);
    float x[IN] = {0}, y[1] = {1};
    in->push = brisk_session_push(in->s, 1, x, 0, y, 0);
}

static void test_calls_from_the_log_callback(void) {
    inside in = {0};
    brisk_session *s = filled(256, log_and_call, &in);
    REQUIRE(s);
    in.s = s;
    OK(brisk_session_train_steps(s, 3), s);
    CHECK(in.calls > 0);
    CHECKF(in.train == BRISK_BUSY, "train inside the callback -> %s", brisk_status_name(in.train));
    CHECKF(in.destroy == BRISK_BUSY, "destroy inside the callback -> %s", brisk_status_name(in.destroy));
    CHECK(in.query == BRISK_OK && in.push == BRISK_OK);
    double v;
    OK(brisk_session_query(s, "steps", &v), s);
    CHECK(v == 3);
    OK(brisk_session_query(s, "pushed", &v), s);
    CHECK(v == 257);
    /* a failed call's message survives a call made inside its callback */
    in.calls = 0;
    CHECK(brisk_session_save(s, T_ABSENT "-dir/x/m.safetensors") != BRISK_OK);
    CHECKF(strstr(brisk_session_error(s), "absent-never-created-dir") != NULL, "'%s'", brisk_session_error(s));
    in.s = NULL;
    brisk_session_destroy(s);
}

typedef struct failer {
    brisk_session *s;
    brisk_status st;
    char msg[1024];
} failer;

static void *fail_push(void *p) {
    failer *f = p;
    float x[IN] = {0}, y[1] = {7}; /* label 7 of 3 classes */
    f->st = brisk_session_push(f->s, 1, x, 0, y, 0);
    usleep(50000); /* another thread succeeds meanwhile */
    snprintf(f->msg, sizeof f->msg, "%s", brisk_session_error(f->s));
    return NULL;
}

/* brisk_session_error is this thread's last message: another thread's success keeps it. */
static void test_errors_per_thread(void) {
    brisk_session *s = filled(256, NULL, NULL);
    REQUIRE(s);
    failer f = {s, BRISK_OK, ""};
    pthread_t t;
    pthread_create(&t, NULL, fail_push, &f);
    usleep(10000);
    OK(brisk_session_train_steps(s, 2), s);
    CHECK(strcmp(brisk_session_error(s), "") == 0);
    pthread_join(t, NULL);
    CHECK(f.st == BRISK_ERR_INVALID);
    CHECKF(strstr(f.msg, "class label") != NULL, "'%s'", f.msg);
    brisk_session_destroy(s);
}

/* A host thread with a small stack (96 KiB of its own: some runtimes give their workers little)
 * can create, train and predict: brisk's kernels keep their buffers off the stack. */
static void *small_stack_job(void *p) {
    job *j = p;
    brisk_session *s = filled(512, NULL, NULL);
    if (!s) {
        j->st = BRISK_ERR_INTERNAL;
        return NULL;
    }
    float x[40 * IN], out[40 * OUT];
    rows(40, 3, x, out);
    j->st = brisk_session_train_steps(s, 20);
    if (!j->st) j->st = brisk_session_predict(s, 40, x, 0, out, 0);
    brisk_session_destroy(s);
    return NULL;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STACK_SCALE 4 /* the sanitizers' redzones and shadow frames take room of their own */
#define PROBE_FROM (256 * 1024) /* and a thread of a few pages crashes in their start-up, not EINVAL */
#else
#define STACK_SCALE 1
#define PROBE_FROM (16 * 1024)
#endif

static void *noop(void *p) { return p; }

/* glibc puts the static TLS of every loaded library at the top of a thread's stack and refuses a
 * stack that cannot hold it; a CUDA build loads more of it (the CUDA runtime, cuBLASLt) than a
 * CPU one. The smallest stack it accepts is that floor; the host's room is on top of it. */
static size_t stack_floor(void) {
    for (size_t sz = PROBE_FROM; sz <= 8u << 20; sz += 4096) {
        pthread_attr_t a;
        pthread_t t;
        pthread_attr_init(&a);
        int ok = pthread_attr_setstacksize(&a, sz) == 0 && pthread_create(&t, &a, noop, NULL) == 0;
        pthread_attr_destroy(&a);
        if (ok) {
            pthread_join(t, NULL);
            return sz;
        }
    }
    return 0;
}

static void test_small_host_stack(void) {
    size_t floor = stack_floor();
    REQUIRE(floor > 0);
    printf("     the smallest stack glibc accepts here (its static TLS): %zu KiB\n", floor / 1024);
    pthread_attr_t a;
    pthread_attr_init(&a);
    REQUIRE(pthread_attr_setstacksize(&a, floor + STACK_SCALE * 96 * 1024) == 0);
    job j = {0};
    pthread_t t;
    REQUIRE(pthread_create(&t, &a, small_stack_job, &j) == 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
    CHECKF(j.st == BRISK_OK, "%s (stack %zu KiB above the TLS floor of %zu KiB)", brisk_status_name(j.st),
           (size_t)STACK_SCALE * 96, floor / 1024);
}

TEST_MAIN(T(test_small_host_stack), T(test_destroy_waits_for_train), T(test_concurrent_predict), T(test_concurrent_train),
          T(test_push_while_training), T(test_calls_from_the_log_callback), T(test_errors_per_thread))
