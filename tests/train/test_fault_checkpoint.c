/* Crash-safe checkpoints, proven by injecting the faults. A short run of the brisk
 * command writes checkpoints every 2 steps, a best checkpoint at the epoch end and
 * rotates numbered ones; faultshim.c counts every file operation it makes on
 * checkpoints (about a hundred), and the sweeps repeat the run once per operation:
 *
 *   kill:   SIGKILL at that operation (an fwrite torn in half first)
 *   enospc: that operation fails with "No space left on device"
 *
 * After each, every complete checkpoint file left in the run directory must pass its
 * checksum, and `--resume auto` must finish the run with a final checkpoint identical,
 * byte for byte, to an uninterrupted run's. A real file-size limit (RLIMIT_FSIZE, as
 * `ulimit -f`) must give a clear error and leave the previous checkpoint intact. */
#include "test.h"
#include "train_test_util.h"

static char dir[512], cfg_path[600], run_dir[600], ref_path[600], last_path[700];

static void setup(void) {
    if (dir[0]) return;
    tu_scratch(dir, sizeof dir, "fault_ckpt");
    char data[700], json[2048];
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    brisk_error err = {0};
    if (brisk_synth_write("tabular", data, 160, 3, &err)) fprintf(stderr, "%s\n", err.msg);
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    snprintf(last_path, sizeof last_path, "%s/last.safetensors", run_dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/c.json", dir);
    snprintf(ref_path, sizeof ref_path, "%s/reference.safetensors", dir);
    /* 128 training samples in batches of 32: an epoch (validation, best.safetensors) every
     * 4 steps; checkpoints at steps 2, 4 and 6, two numbered ones kept. */
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [8], \"outputs\": 3, \"dropout\": 0.1},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.2},"
             " \"train\": {\"batch_size\": 32, \"epochs\": 100, \"max_steps\": 6, \"checkpoint_every\": 2,"
             " \"keep_checkpoints\": 2, \"out_dir\": \"%s\"},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}}", data, run_dir);
    tu_write(cfg_path, json);
    /* The uninterrupted run. */
    if (tu_train(cfg_path, NULL, 0, NULL, NULL, &err)) fprintf(stderr, "reference run: %s\n", err.msg);
    tu_sh("cp '%s' '%s'", last_path, ref_path);
}

/* The brisk command on the config, with the shim injecting `fault` at operation `at`. */
static int run_cli(const char *fault, long at, const char *count_file, const char *log, long fsize_limit,
                   const char *resume) {
    char e_at[64], e_fault[64], e_count[700], e_pre[600];
    snprintf(e_at, sizeof e_at, "BRISK_SHIM_AT=%ld", at);
    snprintf(e_fault, sizeof e_fault, "BRISK_SHIM_FAULT=%s", fault ? fault : "kill");
    snprintf(e_count, sizeof e_count, "BRISK_SHIM_COUNT=%s", count_file ? count_file : "/dev/null");
    snprintf(e_pre, sizeof e_pre, "LD_PRELOAD=%s", FAULT_SHIM);
    const char *env_shim[] = {e_pre, e_at, e_fault, e_count, "ASAN_OPTIONS=verify_asan_link_order=0", NULL};
    const char *argv_plain[] = {BRISK_EXE, "train", cfg_path, "--quiet", NULL};
    const char *argv_resume[] = {BRISK_EXE, "train", cfg_path, "--quiet", "--resume", resume, NULL};
    tu_child c = {resume ? argv_resume : argv_plain, fault || count_file ? env_shim : NULL, log, NULL, fsize_limit, 0};
    return tu_run(&c);
}

static long count_operations(void) {
    char count_file[700];
    snprintf(count_file, sizeof count_file, "%s/count.txt", dir);
    tu_sh("rm -rf '%s'", run_dir);
    int rc = run_cli(NULL, 0, count_file, NULL, 0, NULL);
    char *s = tu_read(count_file, NULL);
    long n = s ? atol(s) : 0;
    free(s);
    fprintf(stderr, "the run makes %ld checkpoint file operations (exit %d)\n", n, rc);
    return rc == 0 ? n : 0;
}

/* After a fault: what is on disk is intact, and resuming reaches the uninterrupted end. */
static int survived(long at, const char *what) {
    int n = tu_check_checkpoints(run_dir);
    brisk_error err = {0};
    brisk_status st = tu_train(cfg_path, "auto", 0, NULL, NULL, &err);
    int same = !st && tu_same_checkpoint(last_path, ref_path);
    if (n < 0 || st || !same)
        fprintf(stderr, "%s at operation %ld: %s%s%s\n", what, at, n < 0 ? "a damaged checkpoint was left; " : "",
                st ? err.msg : "", !st && !same ? "the resumed run ended elsewhere than the uninterrupted one" : "");
    return n >= 0 && !st && same;
}

static void sweep(const char *fault) {
    setup();
    long total = count_operations();
    REQUIRE(total > 40);
    long stride = TU_SANITIZED ? 3 : 1;
    int trials = 0, ok = 0, failed_runs = 0;
    char log[700], lock[700];
    snprintf(log, sizeof log, "%s/trial.log", dir);
    snprintf(lock, sizeof lock, "%s/brisk.lock", run_dir);
    for (long at = 1; at <= total; at += stride) {
        tu_sh("rm -rf '%s'", run_dir);
        int rc = run_cli(fault, at, NULL, log, 0, NULL);
        trials++;
        char *out = tu_read(log, NULL);
        int as_expected;
        if (strcmp(fault, "kill") == 0) {
            /* Killed, and the dead trainer's lock file does not keep the next one out. */
            as_expected = rc == 128 + SIGKILL && access(lock, F_OK) == 0;
        } else {
            /* Failing to write is an error with its reason, or (removing an old numbered
             * checkpoint) a warning; never a crash. */
            as_expected = (rc == 1 && out && strstr(out, "brisk: ") &&
                           (strstr(out, "No space left on device") || strstr(out, "Input/output error"))) ||
                          (rc == 0);
            failed_runs += rc == 1;
        }
        if (!as_expected) fprintf(stderr, "%s at operation %ld: exit %d: %s\n", fault, at, rc, out ? out : "");
        free(out);
        ok += as_expected && survived(at, fault);
    }
    fprintf(stderr, "%s: %d of %d injected faults survived (%d stopped the run with an error)\n", fault, ok, trials,
            failed_runs);
    CHECK(ok == trials);
    if (strcmp(fault, "enospc") == 0) CHECK(failed_runs > trials / 2);
}

static void test_sigkill_at_every_checkpoint_operation(void) { sweep("kill"); }
static void test_disk_full_at_every_checkpoint_operation(void) { sweep("enospc"); }

static void test_file_size_limit(void) {
    setup();
    tu_sh("rm -rf '%s'", run_dir);
    brisk_error err = {0};
    REQUIRE_OK(tu_train(cfg_path, NULL, 2, NULL, NULL, &err), &err);
    int64_t step = -1;
    REQUIRE_OK(brisk_checkpoint_check(last_path, &step, &err), &err);
    REQUIRE(step == 2);
    char log[700];
    snprintf(log, sizeof log, "%s/fsize.log", dir);
    /* Enough for the metrics and the lock file, not for a checkpoint (about 7 KB). */
    int rc = run_cli(NULL, 0, NULL, log, 4096, "auto");
    char *out = tu_read(log, NULL);
    CHECKF(rc == 1 && out && strstr(out, "File too large") && strstr(out, "step 2"), "exit %d: %s", rc, out ? out : "");
    free(out);
    step = -1;
    REQUIRE_OK(brisk_checkpoint_check(last_path, &step, &err), &err);
    CHECK(step == 2);
    CHECK(tu_check_checkpoints(run_dir) >= 1);
    REQUIRE_OK(tu_train(cfg_path, "auto", 0, NULL, NULL, &err), &err);
    CHECK(tu_same_checkpoint(last_path, ref_path));
}

TEST_MAIN(T(test_file_size_limit), T(test_sigkill_at_every_checkpoint_operation),
          T(test_disk_full_at_every_checkpoint_operation))
