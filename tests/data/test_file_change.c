/* A data file changed by another program while brisk reads it (np.savez over it, truncate,
 * a writer still appending) is one error naming the file, BRISK_ERR_IO, never a crash
 * (a mapped file cut under the reader is SIGBUS) and never a mix of two versions.
 *
 * changeshim.c, preloaded into a child process, changes the file before the N-th read (or
 * the fstat after the reads) the child makes on it; the sweep repeats the load once per
 * operation and per change (cut to half, rewritten at the same size, grown), for every
 * reader: .npy, .npz (whole, one member, a shard, a header; stored and deflated), CSV, PNG,
 * safetensors. Then the brisk command: train on an .npz, and predict from a checkpoint
 * and an input that change. Deterministic: the shim changes the file at the operation it is
 * told, where a real writer would race. */
#include "brisk/brisk.h"
#include "data_test_util.h"
#include "test.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#define SHIM BRISK_BINARY_DIR "/tests/libbrisk_changeshim.so"
#define BRISK_EXE BRISK_BINARY_DIR "/brisk"

static const char *self_exe;

/* ---------------------------------------------------------------- the child: one load */

static int child_load(const char *kind, const char *path) {
    brisk_error e = {0};
    brisk_status st;
    if (!strcmp(kind, "npy")) {
        brisk_npy_array a;
        if (!(st = brisk_npy_read(path, &a, &e))) brisk_npy_free(&a);
    } else if (!strcmp(kind, "npz") || !strcmp(kind, "npz_deflated")) {
        brisk_npz z;
        if (!(st = brisk_npz_read(path, &z, &e))) brisk_npz_free(&z);
    } else if (!strcmp(kind, "npz_one") || !strcmp(kind, "npz_rows") || !strcmp(kind, "npz_peek")) {
        brisk_npy_array a;
        st = kind[4] == 'o' ? brisk_npz_read_one(path, "x", &a, &e)
           : kind[4] == 'r' ? brisk_npz_read_rows(path, "x", 100, 900, &a, &e)
                            : brisk_npz_peek(path, "x", &a, &e);
        if (!st) brisk_npy_free(&a);
    } else if (!strcmp(kind, "csv")) {
        const char *cols[] = {"c0", "c1"};
        brisk_tensor t;
        if (!(st = brisk_csv_read(path, cols, 2, BRISK_F32, &t, &e))) brisk_tensor_free(&t);
    } else if (!strcmp(kind, "png")) {
        brisk_image im;
        st = brisk_image_read(path, NULL, &im, &e);
        brisk_image_free(&im);
    } else {
        brisk_safetensors *s;
        if (!(st = brisk_safetensors_open(path, &s, &e))) brisk_safetensors_free(s);
    }
    printf("%s %s\n", brisk_status_name(st), st ? e.msg : "");
    return st ? 1 : 0;
}

/* ---------------------------------------------------------------- the parent */

/* Runs argv with the shim changing `file` (how, at; at 0: count only, into count_file);
 * returns the exit status, or 128 + the signal; the output into out. */
static int run_changed(const char *const *argv, const char *file, const char *how, long at, const char *count_file,
                       char *out, size_t cap) {
    char log[1200];
    tpath(log, sizeof log, "child.log");
    pid_t pid = fork();
    if (pid == 0) {
        char e_at[64];
        snprintf(e_at, sizeof e_at, "%ld", at);
        setenv("LD_PRELOAD", SHIM, 1);
        setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
        setenv("BRISK_CHANGE_FILE", file, 1);
        setenv("BRISK_CHANGE_HOW", how, 1);
        setenv("BRISK_CHANGE_AT", e_at, 1);
        setenv("BRISK_CHANGE_COUNT", count_file ? count_file : "/dev/null", 1);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
    size_t n = 0;
    uint8_t *b = read_file(log, &n);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), b ? (const char *)b : "");
    free(b);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The output is one line (the command's one error line). */
static int one_line(const char *out) {
    const char *nl = strchr(out, '\n');
    return nl && nl[1] == 0;
}

static long read_count(const char *count_file) {
    size_t n;
    uint8_t *b = read_file(count_file, &n);
    long c = b && n ? atol((const char *)b) : -1;
    free(b);
    return c;
}

/* An hour old, as a data file is: a rewrite now shows in its modification time. */
static void age(const char *path) {
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= 3600;
    t[1] = t[0];
    utimensat(AT_FDCWD, path, t, 0);
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    uint8_t *b = read_file(from, &n);
    if (!b || write_file(to, b, n)) fprintf(stderr, "cannot copy %s\n", from);
    free(b);
    age(to);
}

/* Every operation, every change: the load fails with the one message, never a crash or
 * a success. `orig` is kept; `path` is the copy the child reads. */
static void sweep(const char *kind, const char *orig) {
    char path[1200], count_file[1200], out[4096], want[1400];
    snprintf(path, sizeof path, "%s.read", orig);
    tpath(count_file, sizeof count_file, "count.txt");
    const char *argv[] = {self_exe, "load", kind, path, NULL};
    copy_file(orig, path);
    int rc = run_changed(argv, path, "cut", 0, count_file, out, sizeof out);
    long n = read_count(count_file);
    CHECKF(rc == 0 && n > 0, "%s unchanged: exit %d, %ld operations: %s", kind, rc, n, out);
    snprintf(want, sizeof want, "%s %s: changed while being read (size ", brisk_status_name(BRISK_ERR_IO), path);
    static const char *hows[] = {"cut", "rewrite", "grow"};
    for (int h = 0; h < 3; h++)
        for (long at = 1; at <= n; at++) {
            copy_file(orig, path);
            rc = run_changed(argv, path, hows[h], at, NULL, out, sizeof out);
            CHECKF(rc == 1 && strstr(out, want), "%s, %s at operation %ld of %ld: exit %d: %s", kind, hows[h], at, n, rc,
                   out);
        }
}

static void make_npy(const char *path) {
    brisk_tensor t;
    brisk_error e = {0};
    if (brisk_tensor_alloc(&t, BRISK_F32, brisk_shape2(2000, 10), &e)) return;
    for (int i = 0; i < 20000; i++) ((float *)t.data)[i] = (float)i * 0.5f;
    if (brisk_npy_write(path, &t, &e)) fprintf(stderr, "%s\n", e.msg);
    brisk_tensor_free(&t);
}

static void readers(void) {
    char p[1200], q[1200];
    brisk_error e = {0};
    make_npy(tpath(p, sizeof p, "a.npy"));
    sweep("npy", p);

    brisk_tensor t[2];
    REQUIRE_OK(brisk_tensor_alloc(&t[0], BRISK_F32, brisk_shape2(2000, 10), &e), &e);
    REQUIRE_OK(brisk_tensor_alloc(&t[1], BRISK_I32, brisk_shape1(2000), &e), &e);
    for (int i = 0; i < 20000; i++) ((float *)t[0].data)[i] = (float)i;
    for (int i = 0; i < 2000; i++) ((int32_t *)t[1].data)[i] = i % 3;
    const char *names[] = {"x", "y"};
    REQUIRE_OK(brisk_npz_write(tpath(p, sizeof p, "s.npz"), 2, names, t, &e), &e);
    sweep("npz", p);
    sweep("npz_one", p);
    sweep("npz_rows", p);
    sweep("npz_peek", p);

    brisk_tensor two = {BRISK_F32, brisk_shape2(4000, 2), t[0].data};
    REQUIRE_OK(brisk_csv_write(tpath(p, sizeof p, "t.csv"), &two, "c", &e), &e);
    sweep("csv", p);

    brisk_st_entry st = {"w", BRISK_F32, brisk_shape2(2000, 10), t[0].data};
    REQUIRE_OK(brisk_safetensors_write(tpath(p, sizeof p, "w.safetensors"), &st, 1, NULL, 0, &e), &e);
    sweep("safetensors", p);
    brisk_tensor_free(&t[0]);
    brisk_tensor_free(&t[1]);

    uint8_t px[96 * 96 * 3];
    uint32_t r = 12345;
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)((r = r * 1103515245u + 12345u) >> 24); /* noise: no compression */
    brisk_status ps = brisk_png_write(tpath(p, sizeof p, "i.png"), px, 96, 96, 3, &e);
    if (ps == BRISK_ERR_UNSUPPORTED) printf("SKIP: PNG (built without libpng)\n");
    else if (!ps) sweep("png", p);
    else CHECKF(0, "%s", e.msg);

    if (!have_numpy()) return;
    REQUIRE(run_python("import numpy as np\nnp.savez_compressed('d.npz', x=np.arange(40000, dtype='<f4').reshape(4000, 10),"
                       " y=np.arange(4000) % 3)\n") == 0);
    tpath(q, sizeof q, "d.npz");
    sweep("npz_deflated", q);
}

/* The brisk command: a training run whose data file is cut while it loads, and predict
 * from a checkpoint, then an input, that are cut: exit 1 and one line saying so. */
static void command(void) {
    char data[1200], cfg[1200], run[1200], ckpt[1400], json[2400], out[4096], count_file[1200], pred[1200], want[1400];
    brisk_error e = {0};
    REQUIRE_OK(brisk_synth_write("tabular", tpath(data, sizeof data, "tab.npz"), 160, 3, &e), &e);
    age(data);
    tpath(run, sizeof run, "run");
    tpath(cfg, sizeof cfg, "c.json");
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [8], \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.2},"
             " \"train\": {\"batch_size\": 32, \"epochs\": 1, \"max_steps\": 2, \"out_dir\": \"%s\"},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}}", data, run);
    REQUIRE(write_file(cfg, json, strlen(json)) == 0);
    tpath(count_file, sizeof count_file, "count.txt");
    const char *train[] = {BRISK_EXE, "train", cfg, "--quiet", "--overwrite", NULL};
    int rc = run_changed(train, data, "cut", 0, count_file, out, sizeof out);
    long n = read_count(count_file);
    REQUIRE(rc == 0 && n > 0);
    snprintf(want, sizeof want, "%s: changed while being read", data);
    for (long at = 1; at <= n; at += n > 4 ? n / 4 : 1) {
        REQUIRE_OK(brisk_synth_write("tabular", data, 160, 3, &e), &e);
        age(data);
        rc = run_changed(train, data, "cut", at, NULL, out, sizeof out);
        CHECKF(rc == 1 && strstr(out, want) && one_line(out), "train, cut at %ld of %ld: exit %d: %s", at, n, rc, out);
    }

    REQUIRE_OK(brisk_synth_write("tabular", data, 160, 3, &e), &e);
    rc = run_changed(train, "", "cut", 0, NULL, out, sizeof out); /* "": no file watched */
    REQUIRE(rc == 0);
    snprintf(ckpt, sizeof ckpt, "%s/last.safetensors", run);
    tpath(pred, sizeof pred, "pred.npy");
    const char *predict[] = {BRISK_EXE, "predict", ckpt, "--input", data, "--output", pred, "--quiet", NULL};
    const char *watched[] = {ckpt, data};
    for (int k = 0; k < 2; k++) {
        age(ckpt);
        age(data);
        rc = run_changed(predict, watched[k], "cut", 0, count_file, out, sizeof out);
        n = read_count(count_file);
        CHECKF(rc == 0 && n > 0, "predict unchanged: exit %d: %s", rc, out);
        char keep[1400];
        snprintf(keep, sizeof keep, "%s.keep", watched[k]);
        copy_file(watched[k], keep);
        snprintf(want, sizeof want, "%s: changed while being read", watched[k]);
        rc = run_changed(predict, watched[k], "cut", n, NULL, out, sizeof out);
        CHECKF(rc == 1 && strstr(out, want) && one_line(out), "predict, %s cut: exit %d: %s", watched[k], rc, out);
        copy_file(keep, watched[k]);
    }
}

int main(int argc, char **argv) {
    self_exe = "/proc/self/exe";
    if (argc == 4 && !strcmp(argv[1], "load")) return child_load(argv[2], argv[3]);
    static char exe[1024];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) exe[k] = 0, self_exe = exe;
    t_case c[] = {T(readers), T(command)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
