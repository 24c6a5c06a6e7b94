/* Checkpoint integrity: every single-bit flip and every truncation of a checkpoint is
 * refused (or, for the few bytes whose change means nothing, yields the very same
 * contents); keep-last-K rotation; --resume auto skipping damaged checkpoints; the
 * run directory's lock; and a resume with a changed model refused with what changed. */
#include <sys/stat.h>

#include "test.h"
#include "train_test_util.h"
#include "train/trainer_internal.h"

static char dir[512], cfg_path[600], run_dir[600], last_path[700], data_path[600];

static void setup(void) {
    if (dir[0]) return;
    tu_scratch(dir, sizeof dir, "ckpt_integrity");
    snprintf(data_path, sizeof data_path, "%s/tab.npz", dir);
    brisk_error err = {0};
    if (brisk_synth_write("tabular", data_path, 256, 4, &err)) fprintf(stderr, "%s\n", err.msg);
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    snprintf(last_path, sizeof last_path, "%s/last.safetensors", run_dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/c.json", dir);
}

static void write_config(const char *model, const char *train_extra) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"outputs\": 3%s},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.25},"
             " \"train\": {\"batch_size\": 32, \"out_dir\": \"%s\"%s},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}}", model, data_path, run_dir, train_extra);
    tu_write(cfg_path, json);
}

/* Same tensors (names, dtypes, shapes, bytes) and metadata. */
static int same_contents(const brisk_safetensors *a, const brisk_safetensors *b) {
    if (brisk_safetensors_count(a) != brisk_safetensors_count(b) ||
        brisk_safetensors_meta_count(a) != brisk_safetensors_meta_count(b))
        return 0;
    for (size_t i = 0; i < brisk_safetensors_count(a); i++) {
        const brisk_st_tensor *x = brisk_safetensors_at(a, i), *y = brisk_safetensors_find(b, x->name);
        if (!y || x->dtype != y->dtype || !brisk_shape_equal(&x->shape, &y->shape) || x->nbytes != y->nbytes ||
            memcmp(x->data, y->data, x->nbytes) != 0)
            return 0;
    }
    for (size_t i = 0; i < brisk_safetensors_meta_count(a); i++) {
        const char *k, *v, *w;
        brisk_safetensors_meta_at(a, i, &k, &v);
        if (!(w = brisk_safetensors_meta(b, k)) || strcmp(v, w) != 0) return 0;
    }
    return 1;
}

/* Accepted as a checkpoint: parses, format and checksum hold, the state reads. */
static brisk_safetensors *accept(const uint8_t *buf, size_t len) {
    brisk_safetensors *st = NULL;
    brisk_ckpt_state cs;
    brisk_error err;
    if (brisk_safetensors_parse(buf, len, "mutated", &st, &err)) return NULL;
    if (brisk_checkpoint_verify(st, &err) || brisk_checkpoint_state(st, &cs, &err)) {
        brisk_safetensors_free(st);
        return NULL;
    }
    return st;
}

static void test_every_bit_flip_and_truncation_is_refused(void) {
    setup();
    write_config(", \"hidden\": [8]", ", \"checkpoint_every\": 1, \"max_steps\": 5");
    tu_sh("rm -rf '%s'", run_dir);
    brisk_error err = {0};
    REQUIRE_OK(tu_train(cfg_path, NULL, 3, NULL, NULL, &err), &err);
    size_t len = 0;
    uint8_t *orig = (uint8_t *)tu_read(last_path, &len);
    REQUIRE(orig && len > 1000);
    brisk_safetensors *ref = accept(orig, len);
    REQUIRE(ref);
    /* The code version is recorded with the config. */
    CHECK(strcmp(brisk_safetensors_meta(ref, "brisk_commit"), brisk_build_commit) == 0);
    CHECK(brisk_safetensors_meta(ref, "brisk_version") && brisk_safetensors_meta(ref, "config"));
    uint8_t *buf = malloc(len);
    long flips = 0, refused = 0, harmless = 0, wrong = 0;
    size_t step = TU_SANITIZED ? 3 : 1;
    for (size_t i = 0; i < len; i += step)
        for (int b = 0; b < 8; b++) {
            memcpy(buf, orig, len);
            buf[i] ^= (uint8_t)(1u << b);
            flips++;
            brisk_safetensors *st = accept(buf, len);
            if (!st) { refused++; continue; }
            if (same_contents(st, ref)) harmless++;
            else if (wrong++ < 5) fprintf(stderr, "a flip of bit %d of byte %zu was accepted with other contents\n", b, i);
            brisk_safetensors_free(st);
        }
    fprintf(stderr, "%ld single-bit flips of a %zu-byte checkpoint: %ld refused, %ld accepted with identical "
            "contents (JSON escapes and layout), %ld accepted with other contents\n", flips, len, refused, harmless, wrong);
    CHECK(wrong == 0);
    long cut_refused = 0;
    for (size_t n = 0; n < len; n++) {
        brisk_safetensors *st = accept(orig, n);
        cut_refused += st == NULL;
        brisk_safetensors_free(st);
    }
    CHECKF(cut_refused == (long)len, "%ld of %zu truncations refused", cut_refused, len);
    /* On disk, with messages that say what is wrong. */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/flipped.safetensors", dir);
    memcpy(buf, orig, len);
    buf[len - 5] ^= 0x10; /* in a tensor's data */
    FILE *f = fopen(bad, "wb");
    fwrite(buf, 1, len, f);
    fclose(f);
    brisk_status s = brisk_checkpoint_check(bad, NULL, &err);
    CHECKF(s == BRISK_ERR_FORMAT && strstr(err.msg, "checksum mismatch") && strstr(err.msg, "flipped.safetensors"),
           "%s", err.msg);
    f = fopen(bad, "wb");
    fwrite(orig, 1, len / 2, f);
    fclose(f);
    s = brisk_checkpoint_check(bad, NULL, &err);
    CHECKF(s && strstr(err.msg, "truncated or damaged") && strstr(err.msg, "flipped.safetensors"), "%s", err.msg);
    brisk_safetensors_free(ref);
    free(buf);
    free(orig);
}

static int count_numbered(const char *d) {
    DIR *dd = opendir(d);
    int n = 0;
    for (struct dirent *e; dd && (e = readdir(dd));) n += strncmp(e->d_name, "step-", 5) == 0;
    if (dd) closedir(dd);
    return n;
}

static void test_keep_last_k(void) {
    setup();
    write_config(", \"hidden\": [8]", ", \"keep_checkpoints\": 2, \"checkpoint_every\": 1, \"max_steps\": 5");
    tu_sh("rm -rf '%s'", run_dir);
    brisk_error err = {0};
    REQUIRE_OK(tu_train(cfg_path, NULL, 0, NULL, NULL, &err), &err);
    char p4[700], p5[700];
    snprintf(p4, sizeof p4, "%s/step-00000004.safetensors", run_dir);
    snprintf(p5, sizeof p5, "%s/step-00000005.safetensors", run_dir);
    struct stat a, b;
    CHECK(count_numbered(run_dir) == 2 && access(p4, F_OK) == 0);
    /* last is the newest numbered checkpoint under a second name: written once. */
    CHECK(stat(p5, &a) == 0 && stat(last_path, &b) == 0 && a.st_ino == b.st_ino);
    write_config(", \"hidden\": [8]", ", \"keep_checkpoints\": 0, \"checkpoint_every\": 1, \"max_steps\": 5");
    tu_sh("rm -rf '%s'", run_dir);
    REQUIRE_OK(tu_train(cfg_path, NULL, 0, NULL, NULL, &err), &err);
    CHECK(count_numbered(run_dir) == 0 && access(last_path, F_OK) == 0);
    /* By time: with a period of a microsecond, every step is due. */
    write_config(", \"hidden\": [8]",
                 ", \"keep_checkpoints\": 9, \"max_steps\": 5, \"checkpoint_every\": 0, \"checkpoint_minutes\": 1e-8");
    tu_sh("rm -rf '%s'", run_dir);
    REQUIRE_OK(tu_train(cfg_path, NULL, 0, NULL, NULL, &err), &err);
    CHECK(count_numbered(run_dir) == 5);
    write_config(", \"hidden\": [8]", ", \"keep_checkpoints\": 9, \"max_steps\": 5, \"checkpoint_every\": 0");
    tu_sh("rm -rf '%s'", run_dir);
    REQUIRE_OK(tu_train(cfg_path, NULL, 0, NULL, NULL, &err), &err);
    CHECK(count_numbered(run_dir) == 1);
}

typedef struct { char warn[1024], info[4096]; } captured;
static void capture(void *user, brisk_log_level level, const char *msg) {
    captured *c = user;
    char *dst = level == BRISK_LOG_WARN ? c->warn : c->info;
    size_t cap = level == BRISK_LOG_WARN ? sizeof c->warn : sizeof c->info, n = strlen(dst);
    if (level <= BRISK_LOG_WARN || level == BRISK_LOG_INFO) snprintf(dst + n, cap - n, "%s\n", msg);
}

static void flip_byte(const char *path, long from_end) {
    FILE *f = fopen(path, "r+b");
    if (!f) return;
    fseek(f, -from_end, SEEK_END);
    int c = fgetc(f);
    fseek(f, -from_end, SEEK_END);
    fputc(c ^ 0x01, f);
    fclose(f);
}

static void test_resume_auto_skips_damaged(void) {
    setup();
    write_config(", \"hidden\": [8]", ", \"keep_checkpoints\": 2, \"checkpoint_every\": 1, \"max_steps\": 6");
    tu_sh("rm -rf '%s'", run_dir);
    brisk_error err = {0};
    REQUIRE_OK(tu_train(cfg_path, NULL, 5, NULL, NULL, &err), &err);
    /* A writer that died left a temporary file; last (= step 5) gets a flipped bit. */
    char stale[700];
    snprintf(stale, sizeof stale, "%s/step-00000006.safetensors.tmp.99999", run_dir);
    tu_write(stale, "half a checkpoint");
    flip_byte(last_path, 3);
    captured c = {{0}, {0}};
    brisk_logger lg = {capture, &c, BRISK_LOG_INFO};
    REQUIRE_OK(tu_train(cfg_path, "auto", 0, &lg, NULL, &err), &err);
    CHECKF(strstr(c.warn, "skipping a damaged checkpoint") && strstr(c.warn, "checksum mismatch"), "%s", c.warn);
    CHECKF(strstr(c.info, "step-00000004.safetensors: step 4"), "%s", c.info);
    CHECK(access(stale, F_OK) != 0);
    int64_t at = -1;
    REQUIRE_OK(brisk_checkpoint_check(last_path, &at, &err), &err);
    CHECK(at == 6);
    /* Nothing intact at all: an error, not a silent fresh start. Each file once: last
     * and the newest numbered one are one file under two names. */
    DIR *dd = opendir(run_dir);
    char p[1024];
    ino_t seen[16];
    int nseen = 0;
    for (struct dirent *e; dd && (e = readdir(dd));) {
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", run_dir, e->d_name);
        if (!strstr(e->d_name, ".safetensors") || stat(p, &sb) != 0) continue;
        int dup = 0;
        for (int i = 0; i < nseen; i++) dup |= seen[i] == sb.st_ino;
        if (dup || nseen == 16) continue;
        seen[nseen++] = sb.st_ino;
        flip_byte(p, 3);
    }
    if (dd) closedir(dd);
    brisk_status s = tu_train(cfg_path, "auto", 0, NULL, NULL, &err);
    CHECKF(s && strstr(err.msg, "no intact checkpoint"), "%s", err.msg);
    /* No run directory yet: a fresh start. */
    tu_sh("rm -rf '%s'", run_dir);
    REQUIRE_OK(tu_train(cfg_path, "auto", 0, NULL, NULL, &err), &err);
}

static void test_changed_model_is_refused_with_a_diff(void) {
    setup();
    write_config(", \"hidden\": [8], \"dropout\": 0.1", ", \"checkpoint_every\": 1, \"max_steps\": 5");
    tu_sh("rm -rf '%s'", run_dir);
    brisk_error err = {0};
    REQUIRE_OK(tu_train(cfg_path, NULL, 2, NULL, NULL, &err), &err);
    write_config(", \"hidden\": [8, 8], \"dropout\": 0.1", ", \"checkpoint_every\": 1, \"max_steps\": 5");
    brisk_status s = tu_train(cfg_path, "auto", 0, NULL, NULL, &err);
    CHECKF(s == BRISK_ERR_SHAPE && strstr(err.msg, "model.hidden: [8] -> [8,8]") && strstr(err.msg, "another shape"),
           "%s", err.msg);
    /* The same shapes with another dropout and learning rate: resumed, and said so. */
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"outputs\": 3, \"hidden\": [8], \"dropout\": 0.3},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.25}, \"optim\": {\"lr\": 0.0005},"
             " \"train\": {\"batch_size\": 32, \"max_steps\": 5, \"checkpoint_every\": 1, \"out_dir\": \"%s\"},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}}", data_path, run_dir);
    tu_write(cfg_path, json);
    captured c = {{0}, {0}};
    brisk_logger lg = {capture, &c, BRISK_LOG_INFO};
    REQUIRE_OK(tu_train(cfg_path, "auto", 0, &lg, NULL, &err), &err);
    CHECKF(strstr(c.warn, "model.dropout: 0.1 -> 0.3"), "%s", c.warn);
    CHECKF(strstr(c.info, "optim: absent -> {\"lr\":0.0005}"), "%s", c.info);
}

static void test_two_trainers_one_run_dir(void) {
    setup();
    write_config(", \"hidden\": [8]", ", \"checkpoint_every\": 1, \"max_steps\": 5");
    tu_sh("rm -rf '%s'", run_dir);
    brisk_error err = {0};
    brisk_config cfg;
    REQUIRE_OK(brisk_config_load(cfg_path, NULL, 0, &cfg, &err), &err);
    brisk_trainer *a = NULL, *b = NULL;
    brisk_logger quiet = {0};
    brisk_run_summary s;
    int resumed;
    REQUIRE_OK(brisk_trainer_create(&cfg, &quiet, &a, &err), &err);
    REQUIRE_OK(brisk_trainer_create(&cfg, &quiet, &b, &err), &err);
    REQUIRE_OK(brisk_trainer_resume_auto(a, &resumed, &err), &err);
    brisk_status st = brisk_trainer_run_steps(b, 1, &s, &err);
    char pid[64];
    snprintf(pid, sizeof pid, "pid %d on host", (int)getpid());
    CHECKF(st && strstr(err.msg, "in use by another trainer") && strstr(err.msg, pid), "%s", err.msg);
    st = brisk_trainer_resume_auto(b, &resumed, &err);
    CHECKF(st && strstr(err.msg, "in use by another trainer"), "%s", err.msg);
    REQUIRE_OK(brisk_trainer_run_steps(a, 2, &s, &err), &err);
    brisk_trainer_free(a);
    /* Released with the first trainer. */
    REQUIRE_OK(brisk_trainer_resume_auto(b, &resumed, &err), &err);
    CHECK(resumed);
    REQUIRE_OK(brisk_trainer_run_steps(b, 1, &s, &err), &err);
    CHECK(s.steps == 3);
    brisk_trainer_free(b);
    brisk_config_free(&cfg);
}

TEST_MAIN(T(test_every_bit_flip_and_truncation_is_refused), T(test_keep_last_k), T(test_resume_auto_skips_damaged),
          T(test_changed_model_is_refused_with_a_diff), T(test_two_trainers_one_run_dir))
