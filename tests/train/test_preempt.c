/* Preemption: SIGTERM, SIGINT and SIGUSR1 at random steps make the trainer stop (a step in
 * progress cut short and not applied), write a checkpoint and return (the brisk command
 * with exit status 75); resuming with --resume auto then gives the uninterrupted run's
 * losses and final checkpoint,
 * bit for bit. In this process the signal is raised from the progress line of step k,
 * so the stop point is exact; from outside, the brisk command gets a real kill() while
 * it runs, and a second trainer started on its run directory meanwhile is refused.
 *
 * The steps are drawn from a seed printed at the start (BRISK_TEST_SEED repeats one). */
#include <time.h>

#include "test.h"
#include "train_test_util.h"

static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
static unsigned seed;

static int64_t draw(int64_t lo, int64_t hi) {
    seed = seed * 1103515245u + 12345u;
    return lo + (int64_t)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

static void init_seed(void) {
    if (seed) return;
    const char *s = getenv("BRISK_TEST_SEED");
    seed = s ? (unsigned)atol(s) : (unsigned)time(NULL) ^ (unsigned)getpid();
    if (!seed) seed = 1;
    fprintf(stderr, "BRISK_TEST_SEED=%u\n", seed);
}

/* A scratch directory with a tabular data set of n samples, and the paths the tests use. */
typedef struct {
    char dir[512], data[600], cfg[600], last[700], ref[700];
} paths;

static brisk_status make_paths(paths *p, const char *name, int64_t n, brisk_error *err) {
    init_seed();
    tu_scratch(p->dir, sizeof p->dir, name);
    snprintf(p->data, sizeof p->data, "%s/tab.npz", p->dir);
    snprintf(p->cfg, sizeof p->cfg, "%s/c.json", p->dir);
    snprintf(p->last, sizeof p->last, "%s/run/last.safetensors", p->dir);
    snprintf(p->ref, sizeof p->ref, "%s/reference.safetensors", p->dir);
    return brisk_synth_write("tabular", p->data, n, (uint64_t)n, err);
}

/* ---------------------------------------------------------------- in this process */

typedef struct {
    int64_t raise_at;
    int sig;
    char warning[1024];
} hook;

static void on_log(void *user, brisk_log_level level, const char *msg) {
    hook *h = user;
    const char *p = strstr(msg, "  step ");
    if (p && h->sig && atoll(p + 7) == h->raise_at) raise(h->sig);
    if (level == BRISK_LOG_WARN) snprintf(h->warning, sizeof h->warning, "%s", msg);
}

static brisk_status run(const char *config, const char *resume, hook *h, brisk_run_summary *sum, float **losses,
                        int64_t *n, brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_config_load(config, NULL, 0, &cfg, err);
    if (st) return st;
    brisk_logger lg = {on_log, h, BRISK_LOG_INFO};
    brisk_trainer *t = NULL;
    int resumed;
    st = brisk_trainer_create(&cfg, &lg, &t, err);
    if (!st && resume) st = brisk_trainer_resume_auto(t, &resumed, err);
    if (!st) st = brisk_trainer_run(t, sum, err);
    if (!st) {
        const float *l = brisk_trainer_losses(t, n);
        *losses = malloc(sizeof(float) * (size_t)(*n + 1));
        if (*n) memcpy(*losses, l, sizeof(float) * (size_t)*n);
    }
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

static void test_signal_at_random_steps_in_process(void) {
    paths p;
    brisk_error err = {0};
    REQUIRE_OK(make_paths(&p, "preempt", 1024, &err), &err);
    char *dir = p.dir, *data = p.data, *cfg = p.cfg, *last = p.last, *ref = p.ref, json[2048];
    /* Dropout, accumulation and a cosine schedule: everything a resume must restore. */
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3, \"dropout\": 0.2},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.1},"
             " \"optim\": {\"clip_norm\": 1.0, \"schedule\": {\"type\": \"cosine\", \"warmup_steps\": 3}},"
             " \"train\": {\"batch_size\": 32, \"epochs\": 3, \"accumulate\": 2, \"log_every\": 1, \"out_dir\": \"%s/run\"},"
             " \"speed\": {\"threads\": 1}}", data, dir);
    tu_write(cfg, json);
    hook h = {0};
    brisk_run_summary s;
    float *full = NULL;
    int64_t nfull = 0;
    REQUIRE_OK(brisk_signals_install(&err), &err);
    REQUIRE_OK(run(cfg, NULL, &h, &s, &full, &nfull, &err), &err);
    REQUIRE(nfull == 42 && s.stopped_by_signal == 0);
    tu_sh("cp '%s' '%s'", last, ref);
    for (int i = 0; i < 4; i++) {
        /* Three signals at random steps, and one that is already pending when the run starts. */
        int sig = sigs[i % 3];
        int64_t k = i < 3 ? draw(1, nfull - 1) : 0;
        tu_sh("rm -rf '%s/run'", dir);
        REQUIRE_OK(brisk_signals_install(&err), &err);
        h = (hook){.raise_at = k, .sig = sig};
        if (k == 0) brisk_signal_request(sig);
        float *first = NULL, *second = NULL;
        int64_t n1 = 0, n2 = 0, at = -1;
        REQUIRE_OK(run(cfg, NULL, &h, &s, &first, &n1, &err), &err);
        CHECKF(s.stopped_by_signal == sig && s.steps == k && n1 == k, "signal %d at step %lld: stopped by %d at %lld",
               sig, (long long)k, s.stopped_by_signal, (long long)s.steps);
        CHECK(strstr(h.warning, "stopped by") && strstr(h.warning, "--resume auto"));
        REQUIRE_OK(brisk_checkpoint_check(last, &at, &err), &err);
        CHECK(at == k);
        REQUIRE_OK(brisk_signals_install(&err), &err);
        h = (hook){0};
        REQUIRE_OK(run(cfg, "auto", &h, &s, &second, &n2, &err), &err);
        CHECK(n1 + n2 == nfull && s.stopped_by_signal == 0);
        int same = n1 + n2 == nfull;
        for (int64_t j = 0; same && j < n1; j++) same = memcmp(&first[j], &full[j], sizeof(float)) == 0;
        for (int64_t j = 0; same && j < n2; j++) same = memcmp(&second[j], &full[n1 + j], sizeof(float)) == 0;
        CHECKF(same, "%s at step %lld: the resumed losses differ from the uninterrupted run's",
               sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGUSR1", (long long)k);
        CHECK(tu_same_checkpoint(last, ref));
        fprintf(stderr, "signal %d at step %lld: stopped, resumed, identical: %s\n", sig, (long long)k, same ? "yes" : "no");
        free(first), free(second);
    }
    free(full);
}

/* A stop asked for in the middle of a step (here by the driving program, after the first of
 * step 4's four micro-batches) cuts it short: its other micro-batches are not run, nothing of
 * it is applied, the checkpoint holds step 3, and the run resumed from it repeats step 4 and
 * the rest exactly. */
typedef struct {
    brisk_trainer *t;
    int polls; /* while step 4 is in progress */
} mid_step;

static int stop_in_step_4(void *user) {
    mid_step *m = user;
    if (brisk_trainer_steps_done(m->t) != 3) return 0;
    return ++m->polls >= 3 ? BRISK_STOP_REQUESTED : 0; /* before the step, micro-batch 0, micro-batch 1 */
}

static void test_stop_mid_step(void) {
    paths p;
    brisk_error err = {0};
    REQUIRE_OK(make_paths(&p, "preempt_mid_step", 1024, &err), &err);
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3, \"dropout\": 0.2},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.1},"
             " \"train\": {\"batch_size\": 16, \"epochs\": 1, \"accumulate\": 4, \"log_every\": 1, \"out_dir\": \"%s/run\"},"
             " \"speed\": {\"threads\": 1}}", p.data, p.dir);
    tu_write(p.cfg, json);
    hook h = {0};
    brisk_run_summary s;
    float *full = NULL, *rest = NULL;
    int64_t nfull = 0, nrest = 0, at = -1;
    REQUIRE_OK(run(p.cfg, NULL, &h, &s, &full, &nfull, &err), &err);
    REQUIRE(nfull == 14);
    tu_sh("cp '%s' '%s' && rm -rf '%s/run'", p.last, p.ref, p.dir);

    brisk_config cfg;
    REQUIRE_OK(brisk_config_load(p.cfg, NULL, 0, &cfg, &err), &err);
    brisk_logger lg = {on_log, &h, BRISK_LOG_INFO};
    brisk_trainer *t = NULL;
    REQUIRE_OK(brisk_trainer_create(&cfg, &lg, &t, &err), &err);
    mid_step m = {t, 0};
    brisk_trainer_set_control(t, &(brisk_trainer_control){.stop_requested = stop_in_step_4, .user = &m});
    REQUIRE_OK(brisk_trainer_run(t, &s, &err), &err);
    int64_t n = 0;
    const float *first = brisk_trainer_losses(t, &n);
    CHECKF(s.stopped_by_signal == BRISK_STOP_REQUESTED && s.steps == 3 && n == 3,
           "stopped by %d after step %lld, %lld losses", s.stopped_by_signal, (long long)s.steps, (long long)n);
    CHECK(n == 3 && memcmp(first, full, 3 * sizeof(float)) == 0);
    CHECKF(strstr(h.warning, "stopped by a stop request after step 3 (step 4, in progress, was cut short and not "
                  "applied)"), "%s", h.warning);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    REQUIRE_OK(brisk_checkpoint_check(p.last, &at, &err), &err);
    CHECK(at == 3);
    h = (hook){0};
    REQUIRE_OK(run(p.cfg, "auto", &h, &s, &rest, &nrest, &err), &err);
    CHECKF(nrest == nfull - 3 && memcmp(rest, full + 3, (size_t)nrest * sizeof(float)) == 0,
           "%lld losses after the resume; the uninterrupted run's from step 4 on: %s", (long long)nrest,
           nrest == nfull - 3 ? "different" : "-");
    CHECK(tu_same_checkpoint(p.last, p.ref));
    free(full), free(rest);
}

/* A second signal while the first is being handled acts as the default would. */
static void test_second_signal_is_not_caught(void) {
    pid_t pid = fork();
    if (pid == 0) {
        brisk_error err;
        if (brisk_signals_install(&err)) _exit(3);
        raise(SIGINT);
        if (brisk_signal_pending() != SIGINT) _exit(4);
        raise(SIGINT);
        _exit(5);
    }
    int status = 0;
    REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "status %d", status);
}

/* ---------------------------------------------------------------- the brisk command */

/* Reads progress lines from the child until step k's. The pipe holds one page (64 KiB
 * where it cannot be shrunk: some 550 progress lines of 120 bytes) and a child that
 * fills it waits, so the run cannot get that far beyond step k <= 600 before the signal
 * arrives: with 1200 steps it is still running. */
static int wait_for_step(FILE *f, int64_t k) {
    char line[512], want[48];
    snprintf(want, sizeof want, "  step %lld/", (long long)k);
    while (fgets(line, sizeof line, f))
        if (strstr(line, want)) return 1;
    return 0;
}

static void test_signal_to_the_command(void) {
    paths p;
    brisk_error err = {0};
    REQUIRE_OK(make_paths(&p, "preempt_cli", 4096, &err), &err);
    char *dir = p.dir, *data = p.data, *cfg = p.cfg, *last = p.last, *ref = p.ref, json[2048], log[700], log2[700];
    snprintf(log, sizeof log, "%s/stderr.log", dir);
    snprintf(log2, sizeof log2, "%s/second.log", dir);
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3, \"dropout\": 0.1},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.1},"
             " \"train\": {\"batch_size\": 32, \"epochs\": 100, \"max_steps\": 1200, \"log_every\": 1,"
             " \"out_dir\": \"%s/run\"}, \"speed\": {\"threads\": 1, \"prefetch\": 2}}", data, dir);
    tu_write(cfg, json);
    const char *argv[] = {BRISK_EXE, "train", cfg, NULL};
    const char *argv_resume[] = {BRISK_EXE, "train", cfg, "--quiet", "--resume", "auto", NULL};
    tu_child plain = {argv, NULL, log, NULL, 0, 0};
    REQUIRE(tu_run(&plain) == 0);
    tu_sh("cp '%s' '%s'", last, ref);
    for (int i = 0; i < 3; i++) {
        int64_t k = draw(1, 600), at = -1;
        tu_sh("rm -rf '%s/run'", dir);
        int fd = -1;
        pid_t pid = tu_spawn(&plain, &fd);
        REQUIRE(pid > 0);
        FILE *f = fdopen(fd, "r");
        int reached = wait_for_step(f, k);
        if (i == 0 && reached) {
            /* The run directory is taken: a second trainer must refuse, naming the first. */
            tu_child second = {argv, NULL, log2, NULL, 0, 0};
            int rc2 = tu_run(&second);
            char *out = tu_read(log2, NULL), pidtxt[32];
            snprintf(pidtxt, sizeof pidtxt, "pid %d on host", (int)pid);
            CHECKF(rc2 == 1 && out && strstr(out, "in use by another trainer") && strstr(out, pidtxt),
                   "second trainer: exit %d: %s", rc2, out ? out : "");
            free(out);
        }
        kill(pid, sigs[i]);
        while (fgetc(f) != EOF) {}
        fclose(f);
        int status = 0;
        waitpid(pid, &status, 0);
        char *out = tu_read(log, NULL);
        CHECKF(reached && WIFEXITED(status) && WEXITSTATUS(status) == BRISK_EXIT_PREEMPTED && out &&
                   strstr(out, "stopped by") && strstr(out, "--resume auto"),
               "signal %d at step %lld: status %d: %s", sigs[i], (long long)k, status, out ? out : "");
        free(out);
        REQUIRE_OK(brisk_checkpoint_check(last, &at, &err), &err);
        CHECK(at >= k && at < 1200);
        tu_child resume = {argv_resume, NULL, log, NULL, 0, 0};
        CHECK(tu_run(&resume) == 0);
        CHECK(tu_same_checkpoint(last, ref));
        fprintf(stderr, "signal %d sent at step %lld, checkpoint at step %lld, resumed to the identical end\n", sigs[i],
                (long long)k, (long long)at);
    }
}

TEST_MAIN(T(test_signal_at_random_steps_in_process), T(test_stop_mid_step), T(test_second_signal_is_not_caught),
          T(test_signal_to_the_command))
