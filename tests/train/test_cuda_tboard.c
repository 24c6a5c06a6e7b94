/* The TensorBoard event file of a GPU run (fp16, so that the loss scaler is on): the
 * step records of metrics.jsonl carry the device's memory, the loss scale and the skipped
 * steps, the event file is whole (every record's masked CRCs check) and holds those scalars
 * and histograms of parameters read back from the device. TensorBoard's own reader checks
 * the same file format on the CPU (tests/train/tensorboard.sh); the GPU machine lacks the
 * package. Skips without a GPU. */
#include <dirent.h>
#include <unistd.h>

#include "backend/cuda_test_util.h"
#include "core/protowire.h"

static char dir[256];

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* The whole file, or NULL. */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    if (b) b[*n] = 0;
    fclose(f);
    return b;
}

/* Records whose masked CRCs check, -1 at the first bad one; *tags counts records holding each
 * of the n strings given (tags appear as raw bytes in the protobuf). */
static int scan(const uint8_t *b, size_t n, const char *const *want, int nwant, int *found) {
    size_t at = 0;
    int records = 0;
    while (at + 12 <= n) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)b[at + i] << (8 * i);
        if (le32(b + at + 8) != brisk_crc32c_masked(b + at, 8) || at + 16 + len > n) return -1;
        if (le32(b + at + 12 + len) != brisk_crc32c_masked(b + at + 12, len)) return -1;
        for (int w = 0; w < nwant; w++) {
            size_t L = strlen(want[w]);
            for (size_t i = at + 12; i + L <= at + 12 + len; i++)
                if (!memcmp(b + i, want[w], L)) { found[w]++; break; }
        }
        at += 16 + len;
        records++;
    }
    return at == n ? records : -1;
}

static void test_gpu_event_file(void) {
    snprintf(dir, sizeof dir, "%s/cuda_tboard_%d", BRISK_BINARY_DIR, (int)getpid());
    char cmd[600], path[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    REQUIRE(system(cmd) == 0);
    brisk_error err = {0};
    snprintf(path, sizeof path, "%s/tab.npz", dir);
    REQUIRE_OK(brisk_synth_write("tabular", path, 2048, 0, &err), &err);
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [64], \"outputs\": 3}, "
             "\"data\": {\"train\": \"%s/tab.npz\", \"validation_fraction\": 0.1}, "
             "\"train\": {\"batch_size\": 64, \"epochs\": 2, \"log_every\": 4, \"out_dir\": \"%s/run\"}, "
             "\"speed\": {\"device\": \"cuda\", \"precision\": \"fp16\", \"autotune\": false}, "
             "\"log\": {\"histogram_every\": 4}}",
             dir, dir);
    brisk_config cfg;
    REQUIRE_OK(brisk_config_parse(json, "<test>", NULL, 0, &cfg, &err), &err);
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    brisk_run_summary sum;
    brisk_status st = brisk_trainer_create(&cfg, &quiet, &t, &err);
    if (!st) st = brisk_trainer_run(t, &sum, &err);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    REQUIRE_OK(st, &err);

    size_t n = 0;
    snprintf(path, sizeof path, "%s/run/metrics.jsonl", dir);
    uint8_t *m = slurp(path, &n);
    REQUIRE(m != NULL);
    CHECKF(strstr((char *)m, "\"loss_scale\": ") && strstr((char *)m, "\"skipped_steps\": ") &&
           strstr((char *)m, "\"mem_mib\": ") && strstr((char *)m, "\"compute_ms\": "), "%s", (char *)m);
    free(m);

    snprintf(path, sizeof path, "%s/run", dir);
    DIR *d = opendir(path);
    REQUIRE(d != NULL);
    char ev[600] = "";
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) snprintf(ev, sizeof ev, "%s/run/%.200s", dir, e->d_name);
    closedir(d);
    REQUIRE(ev[0]);
    uint8_t *b = slurp(ev, &n);
    REQUIRE(b != NULL);
    const char *want[] = {"loss_scale", "skipped_steps", "mem_mib", "params/net.0.weight", "val_loss", "brain.Event:2"};
    int found[6] = {0};
    int records = scan(b, n, want, 6, found);
    free(b);
    CHECKF(records > 10, "%d records", records);
    for (int w = 0; w < 6; w++) CHECKF(found[w] > 0, "no record holds '%s'", want[w]);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

CUDA_TEST_MAIN(T(test_gpu_event_file))
