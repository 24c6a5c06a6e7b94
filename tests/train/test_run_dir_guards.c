/* What a run directory may be and what replacing a run there removes: the root and the home
 * directory are refused as run directories; --overwrite removes the previous run's files,
 * names every one, and keeps event files another program wrote; a run without a run
 * directory (train.out_dir "") says that it writes no checkpoint (issue 37, item 20); a
 * resume from another run's checkpoint into a directory holding a run is refused unless
 * --overwrite (item 14). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train/trainer_internal.h"
#include "train_test_util.h"

static char dir[512], data[600];

static void make_data(void) {
    if (dir[0]) return;
    tu_scratch(dir, sizeof dir, "run_dir_guards");
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    brisk_error err = {0};
    if (brisk_synth_write("tabular", data, 600, 3, &err)) fprintf(stderr, "%s\n", err.msg);
}

/* every message at or above info, one per line */
/* A short run into out_dir (absolute, or "" for none); extra: more "train" members. */
static brisk_status run_from(const char *out_dir, const char *extra, int overwrite, const char *resume, tu_log_text *c,
                             brisk_error *err) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 100, \"out_dir\": \"%s\"%s%s},"
             " \"speed\": {\"threads\": 1}}", data, out_dir, extra && strstr(extra, "epochs") ? "" : ", \"epochs\": 1",
             extra ? extra : "");
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "guards.json", NULL, 0, &cfg, err);
    if (st) return st;
    cfg.train.overwrite = overwrite;
    brisk_trainer *t = NULL;
    brisk_logger lg = {tu_log_capture, c, BRISK_LOG_INFO};
    brisk_run_summary s;
    if (c) c->text[0] = 0;
    st = brisk_trainer_create(&cfg, c ? &lg : NULL, &t, err);
    if (!st && resume) st = brisk_trainer_resume(t, resume, err);
    if (!st) st = brisk_trainer_run(t, &s, err);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

static brisk_status run(const char *out_dir, const char *extra, int overwrite, tu_log_text *c, brisk_error *err) {
    return run_from(out_dir, extra, overwrite, NULL, c, err);
}

/* The check itself (no run: on the previous code a run into "/" wrote its lock, checkpoints
 * and metrics there), then a whole run into a home directory of the test's own. */
static void test_root_and_home_refused(void) {
    make_data();
    brisk_trainer t;
    memset(&t, 0, sizeof t);
    snprintf(t.cfg.path, sizeof t.cfg.path, "guards.json");
    brisk_error err = {0};
    const char *roots[] = {"/", "//", "/.", "/tmp/.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        snprintf(t.cfg.train.out_dir, sizeof t.cfg.train.out_dir, "%s", roots[i]);
        CHECKF(brisk_run_dir_check_place(&t, &err) == BRISK_ERR_INVALID &&
                   strstr(err.msg, "is the root directory (/)") && strstr(err.msg, "--out runs/NAME"),
               "%s: %s", roots[i], err.msg);
    }
    snprintf(t.cfg.train.out_dir, sizeof t.cfg.train.out_dir, "%s/new/run", dir);
    CHECK(brisk_run_dir_check_place(&t, &err) == BRISK_OK); /* not there yet: made for this run */

    char home[700], old_home[4096] = "";
    const char *h = getenv("HOME");
    if (h) snprintf(old_home, sizeof old_home, "%s", h);
    snprintf(home, sizeof home, "%s/home", dir);
    tu_sh("mkdir -p '%s' && touch '%s/notes.txt'", home, home);
    setenv("HOME", home, 1);
    brisk_status st = run(home, NULL, 1, NULL, &err);
    CHECKF(st == BRISK_ERR_INVALID && strstr(err.msg, "is your home directory"), "%s", err.msg);
    char path[800];
    snprintf(path, sizeof path, "%s/last.safetensors", home);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/brisk.lock", home);
    CHECK(access(path, F_OK) != 0);
    if (old_home[0]) setenv("HOME", old_home, 1);
    else unsetenv("HOME");
}

static int count_files(const char *d, const char *prefix) {
    DIR *dp = opendir(d);
    int n = 0;
    for (struct dirent *e; dp && (e = readdir(dp));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (dp) closedir(dp);
    return n;
}

/* --overwrite lists all it removes and only removes brisk's own event files (on the previous
 * code it removed any events.out.tfevents.* there, TensorFlow's or PyTorch's, unnamed). */
static void test_overwrite_names_and_keeps_foreign_events(void) {
    make_data();
    char out[700], foreign[800], removed[200];
    snprintf(out, sizeof out, "%s/over", dir);
    brisk_error err = {0};
    tu_log_text c;
    REQUIRE_OK(run(out, ", \"keep_checkpoints\": 5, \"checkpoint_every\": 2", 0, &c, &err), &err);
    CHECK(count_files(out, "events.out.tfevents.") == 1);
    snprintf(foreign, sizeof foreign, "%s/events.out.tfevents.1700000000.otherhost.123.0.v2", out);
    tu_write(foreign, "written by another program");
    REQUIRE_OK(run(out, NULL, 1, &c, &err), &err);
    CHECKF(access(foreign, F_OK) == 0, "%s was removed", foreign);
    const char *line = strstr(c.text, "overwrite removed the previous run in ");
    REQUIRE(line);
    /* every file by name: last, the numbered ones (2, 4, 5), metrics.jsonl, the event file */
    const char *want[] = {"last.safetensors", "step-00000002.safetensors", "step-00000004.safetensors",
                          "step-00000005.safetensors", "metrics.jsonl", ".brisk"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(removed, sizeof removed, "%s", want[i]);
        const char *eol = strchr(line, '\n');
        const char *at = strstr(line, removed);
        CHECKF(at && eol && at < eol, "%s not named in: %.*s", removed, eol ? (int)(eol - line) : 200, line);
    }
    CHECKF(strstr(c.text, "W overwrite kept 1 event file that brisk did not write") &&
               strstr(c.text, "events.out.tfevents.1700000000.otherhost.123.0.v2"), "%s", c.text);
    CHECK(count_files(out, "events.out.tfevents.") == 2); /* the foreign one and this run's */
}

/* train.out_dir "": said once, as a warning when the run comes from a config's files (the
 * previous code only said "checkpoints none" in the summary at the end) */
static void test_no_run_dir_is_said(void) {
    make_data();
    brisk_error err = {0};
    tu_log_text c;
    REQUIRE_OK(run("", NULL, 0, &c, &err), &err);
    const char *w = strstr(c.text, "W checkpoints off: train.out_dir is \"\": no checkpoints");
    CHECKF(w && strstr(w, "loses this run's work"), "%s", c.text);
    CHECK(strstr(c.text, "checkpoints off") == strstr(c.text, "W checkpoints off") + 2);
}

/* Which run a directory holds: --resume with another run's checkpoint would replace it (on the
 * previous code it did, with only a "settings changed" line), a checkpoint of its own run
 * continues it, wherever the file lies. */
static void test_resume_of_another_run_refused(void) {
    make_data();
    char a[700], b[700], a_last[800], b_last[800], b_metrics[800], copy[800], b_step[800];
    snprintf(a, sizeof a, "%s/run_a", dir);
    snprintf(b, sizeof b, "%s/run_b", dir);
    snprintf(a_last, sizeof a_last, "%s/last.safetensors", a);
    snprintf(b_last, sizeof b_last, "%s/last.safetensors", b);
    snprintf(b_metrics, sizeof b_metrics, "%s/metrics.jsonl", b);
    snprintf(b_step, sizeof b_step, "%s/step-00000005.safetensors", b);
    snprintf(copy, sizeof copy, "%s/a_copy.safetensors", dir);
    brisk_error err = {0};
    tu_log_text c;
    REQUIRE_OK(run(a, ", \"epochs\": 1", 0, &c, &err), &err);
    REQUIRE_OK(run(b, ", \"epochs\": 1, \"seed\": 7", 0, &c, &err), &err);
    tu_sh("cp '%s' '%s' && cp '%s' '%s.before' && cp '%s' '%s.before'", a_last, copy, b_last, b_last, b_metrics, b_metrics);
    /* A's checkpoint into B: refused, B untouched */
    brisk_status st = run_from(b, ", \"epochs\": 2", 0, a_last, &c, &err);
    CHECKF(st == BRISK_ERR_INVALID && strstr(err.msg, "holds another run") && strstr(err.msg, a_last) &&
               strstr(err.msg, "--resume auto") && strstr(err.msg, "--overwrite"), "%s", err.msg);
    char before[900];
    snprintf(before, sizeof before, "%s.before", b_last);
    CHECK(tu_same_file(b_last, before));
    snprintf(before, sizeof before, "%s.before", b_metrics);
    CHECK(tu_same_file(b_metrics, before));
    /* B's own numbered checkpoint into B, and A's checkpoint copied elsewhere into A: the same runs */
    REQUIRE_OK(run_from(b, ", \"epochs\": 2", 0, b_step, &c, &err), &err);
    REQUIRE_OK(run_from(a, ", \"epochs\": 2", 0, copy, &c, &err), &err);
    /* --overwrite removes B's run and continues A's there; not when it is B's own */
    st = run_from(b, ", \"epochs\": 3", 1, b_last, &c, &err);
    CHECKF(st == BRISK_ERR_INVALID && strstr(err.msg, "--overwrite would remove the run that"), "%s", err.msg);
    REQUIRE_OK(run_from(b, ", \"epochs\": 2", 1, copy, &c, &err), &err);
    CHECKF(strstr(c.text, "overwrite removed the previous run in") && strstr(c.text, "step-00000005.safetensors"), "%s",
           c.text);
    char *m = tu_read(b_metrics, NULL);
    CHECKF(m && strstr(m, "\"resumed_from\":\"") && !strstr(strstr(m, "run_start") + 1, "run_start"), "%s", m);
    free(m);
}

TEST_MAIN(T(test_root_and_home_refused), T(test_overwrite_names_and_keeps_foreign_events), T(test_no_run_dir_is_said),
          T(test_resume_of_another_run_refused))
