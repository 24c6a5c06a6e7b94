/* Helpers for the trainer's fault tests: scratch directories, whole files, running the
 * brisk command as a child process (with extra environment, a file-size limit, output to
 * a file), and in-process runs. Header-only, like test.h. */
#ifndef BRISK_TRAIN_TEST_UTIL_H
#define BRISK_TRAIN_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#include "brisk/brisk.h"

#define BRISK_EXE BRISK_BINARY_DIR "/brisk"
#define FAULT_SHIM BRISK_BINARY_DIR "/tests/libbrisk_faultshim.so"

/* Sanitized builds run every process several times slower; fault sweeps sample. */
#if defined(__SANITIZE_ADDRESS__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

static void tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((unused)) static void tu_sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) fprintf(stderr, "command failed: %s\n", cmd);
}

/* The scratch directories of this process, removed at its exit when every test passed (a
 * forked child exits before that is known, and removes nothing); BRISK_KEEP_TEST_OUTPUT=1
 * keeps them. */
__attribute__((unused)) static char tu_scratch_dirs[8][512];
__attribute__((unused)) static int tu_n_scratch;

__attribute__((unused)) static void tu_scratch_remove(void) {
    if (!t_all_passed || getenv("BRISK_KEEP_TEST_OUTPUT")) return;
    for (int i = 0; i < tu_n_scratch; i++) tu_sh("rm -rf '%s'", tu_scratch_dirs[i]);
}

/* A fresh scratch directory under the build tree, named for the test. */
__attribute__((unused)) static void tu_scratch(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s_%d", BRISK_BINARY_DIR, name, (int)getpid());
    tu_sh("rm -rf '%s' && mkdir -p '%s'", out, out);
    if (tu_n_scratch == 0) atexit(tu_scratch_remove);
    if (tu_n_scratch < 8) snprintf(tu_scratch_dirs[tu_n_scratch++], sizeof tu_scratch_dirs[0], "%s", out);
}

__attribute__((unused)) static void tu_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); return; }
    fputs(text, f);
    fclose(f);
}

/* The whole file, malloc'd (NUL-terminated); NULL when it cannot be read. */
__attribute__((unused)) static char *tu_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = b ? fread(b, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (!b) return NULL;
    b[got] = 0;
    if (len) *len = got;
    return b;
}

__attribute__((unused)) static int tu_same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read(a, &na), *y = tu_read(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

/* Two checkpoints the same byte for byte but for their run ids and the checksums over them:
 * what a run stopped and resumed ends with against an uninterrupted run of the same config
 * (each run draws its own id, at the same place in the header when the rest is equal). */
__attribute__((unused)) static int tu_same_checkpoint(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read(a, &na), *y = tu_read(b, &nb);
    int same = x && y && na == nb;
    static const char *const keys[] = {"\"run_id\":\"", "\"checksum\":\""};
    for (int k = 0; k < 2 && same; k++) {
        const size_t kn = strlen(keys[k]);
        char *ix = NULL, *iy = NULL;
        for (size_t i = 0; !ix && i + kn <= na; i++)
            if (memcmp(x + i, keys[k], kn) == 0) ix = x + i, iy = y + i;
        same = ix && memcmp(iy, keys[k], kn) == 0;
        for (size_t i = kn; same && ix + i < x + na && ix[i] != '"'; i++) ix[i] = iy[i] = '0';
    }
    same = same && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

typedef struct tu_child {
    const char *const *argv;  /* argv[0] is the program */
    const char *const *env;   /* "K=V" added to the environment, NULL-terminated; may be NULL */
    const char *out;          /* stdout + stderr to this file; NULL: /dev/null */
    const char *cwd;          /* NULL: the test's */
    long fsize_limit;         /* > 0: RLIMIT_FSIZE in bytes */
    long as_limit;            /* > 0: RLIMIT_AS in bytes */
} tu_child;

#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031 /* Linux; <fcntl.h> shows it only with _GNU_SOURCE */
#endif

/* Starts the child; its stdout goes to *pipe_out when pipe_out is given, through a pipe
 * made as small as the system allows (one page), so that a child writing a line per
 * step blocks a few dozen steps ahead of a reader that stops reading. */
__attribute__((unused)) static pid_t tu_spawn(const tu_child *c, int *pipe_out) {
    int p[2] = {-1, -1};
    if (pipe_out && pipe(p) != 0) return -1;
    if (pipe_out) fcntl(p[1], F_SETPIPE_SZ, 4096);
    pid_t pid = fork();
    if (pid != 0) {
        if (pipe_out) { close(p[1]); *pipe_out = pid > 0 ? p[0] : (close(p[0]), -1); }
        return pid;
    }
    if (c->cwd && chdir(c->cwd) != 0) _exit(126);
    for (const char *const *e = c->env; e && *e; e++) putenv((char *)*e);
    int fd = open(c->out ? c->out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 2);
        dup2(pipe_out ? p[1] : fd, 1);
        close(fd);
    }
    if (pipe_out) close(p[0]), close(p[1]);
    if (c->fsize_limit > 0) {
        struct rlimit rl = {(rlim_t)c->fsize_limit, (rlim_t)c->fsize_limit};
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    if (c->as_limit > 0) {
        struct rlimit rl = {(rlim_t)c->as_limit, (rlim_t)c->as_limit};
        setrlimit(RLIMIT_AS, &rl);
    }
    execv(c->argv[0], (char *const *)c->argv);
    _exit(127);
}

/* Runs the child to its end: the exit status, or 128 + the signal that killed it. */
__attribute__((unused)) static int tu_run(const tu_child *c) {
    pid_t pid = tu_spawn(c, NULL);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Every complete checkpoint file in dir (temporary files left out) must be intact;
 * returns how many were checked, -1 after printing the first that is not. */
__attribute__((unused)) static int tu_check_checkpoints(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    char path[1024];
    for (struct dirent *e; (e = readdir(d));) {
        size_t L = strlen(e->d_name);
        if (L < 12 || strcmp(e->d_name + L - 12, ".safetensors") != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        brisk_error err = {0};
        if (brisk_checkpoint_check(path, NULL, &err)) {
            fprintf(stderr, "damaged checkpoint left behind: %s\n", err.msg);
            n = -1;
            break;
        }
        n++;
    }
    closedir(d);
    return n;
}

/* Trains in this process from a config file: resume "auto", a path, or NULL. */
__attribute__((unused)) static brisk_status tu_train(const char *config, const char *resume, int64_t steps, const brisk_logger *log,
                             brisk_run_summary *sum, brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_config_load(config, NULL, 0, &cfg, err);
    if (st) return st;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    brisk_run_summary local;
    int resumed;
    st = brisk_trainer_create(&cfg, log ? log : &quiet, &t, err);
    if (!st && resume && strcmp(resume, "auto") == 0) st = brisk_trainer_resume_auto(t, &resumed, err);
    else if (!st && resume) st = brisk_trainer_resume(t, resume, err);
    if (!st) st = brisk_trainer_run_steps(t, steps, sum ? sum : &local, err);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

/* Trains in this process from a config string, for at most `steps` more steps (0: the
 * whole run); the loss history is copied to *losses (malloc'd) when losses is non-NULL. */
__attribute__((unused)) static brisk_status tu_train_json(const char *json, const char *resume, int64_t steps,
                                                          brisk_run_summary *sum, float **losses, int64_t *n,
                                                          brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    st = brisk_trainer_create(&cfg, &quiet, &t, err);
    if (!st && resume) st = brisk_trainer_resume(t, resume, err);
    if (!st) st = brisk_trainer_run_steps(t, steps, sum, err);
    if (!st && losses) {
        const float *l = brisk_trainer_losses(t, n);
        *losses = malloc(sizeof(float) * (size_t)(*n ? *n : 1));
        memcpy(*losses, l, sizeof(float) * (size_t)*n);
    }
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

/* A logger's messages, one a line (warnings as "W msg"), for checks on what a run said. */
typedef struct tu_log_text {
    char text[32768];
} tu_log_text;

__attribute__((unused)) static void tu_log_capture(void *user, brisk_log_level level, const char *msg) {
    tu_log_text *c = user;
    size_t k = strlen(c->text);
    snprintf(c->text + k, sizeof c->text - k, "%s%s\n", level == BRISK_LOG_WARN ? "W " : "", msg);
}

#endif
