/* brisk_train_run: a whole run from a JSON text or a file, the summary as JSON, the progress
 * callback (and a stop asked through it), errors as messages; nothing printed. */
#include <unistd.h>

#include <cjson/cJSON.h>

#include "test.h"
#include "brisk/api.h"
#include "brisk/brisk.h"

static char dir[512], data[600];

static void setup(void) {
    T_MAKE_DIR(dir, "api_run");
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    brisk_error err = {0};
    if (brisk_synth_write("tabular", data, 512, 1, &err)) fprintf(stderr, "%s\n", err.msg);
}

typedef struct { int calls; int64_t last, total; int stop_at; } prog;

static int on_progress(void *user, int64_t step, int64_t total, double loss) {
    prog *p = user;
    p->calls++, p->last = step, p->total = total;
    return p->stop_at && step >= p->stop_at && isfinite(loss);
}

static void config(char *buf, size_t n, const char *out, int epochs) {
    snprintf(buf, n, "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 64, \"epochs\": %d, \"log_every\": 1,"
             " \"out_dir\": \"%s/%s\"}, \"speed\": {\"threads\": 1}}", data, epochs, dir, out);
}

/* The last line of out/metrics.jsonl, whose event is run_end. */
static cJSON *run_end_line(const char *out) {
    char path[700], line[8192], last[8192] = "";
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, out);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"event\":\"run_end\"")) memcpy(last, line, sizeof last);
    fclose(f);
    return cJSON_Parse(last);
}

/* One serialiser: the summary brisk_train_run hands back carries the run_end line's keys and
 * numbers, plus out_dir; run_end adds the optimization list as decided by the run's end. */
static void check_same_as_run_end(const char *res, const char *out) {
    cJSON *api = cJSON_Parse(res), *end = run_end_line(out);
    REQUIRE(api && end);
    cJSON_DeleteItemFromObjectCaseSensitive(api, "out_dir");
    cJSON_DeleteItemFromObjectCaseSensitive(end, "event");
    CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(end, "optimizations")));
    cJSON_DeleteItemFromObjectCaseSensitive(end, "optimizations");
    char *a = cJSON_PrintUnformatted(api), *e = cJSON_PrintUnformatted(end);
    CHECKF(a && e && strcmp(a, e) == 0, "\n  api     %s\n  run_end %s", a, e);
    CHECK(cJSON_GetArraySize(api) > 20);
    cJSON_free(a);
    cJSON_free(e);
    cJSON_Delete(api);
    cJSON_Delete(end);
}

static void test_run_json(void) {
    setup();
    char cfg[1024], res[4096], msg[512];
    config(cfg, sizeof cfg, "a", 2);
    prog p = {0};
    const char *over[] = {"optim.lr=0.003"};
    brisk_status st = brisk_train_run(cfg, 0, over, 1, NULL, 0, NULL, NULL, on_progress, &p, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_OK, "%s", msg);
    /* 512 samples, 10% validation: 460 training rows, 7 batches of 64 per epoch */
    CHECK(p.calls == 14 && p.last == 14 && p.total == 14);
    CHECKF(strstr(res, "\"steps\":14") && strstr(res, "\"epochs\":2") && strstr(res, "last.safetensors") &&
           strstr(res, "\"stopped_by_signal\":0,") && strstr(res, "\"best_val_loss\":") &&
           strstr(res, "\"ms_per_step_median\":"), "%s", res);
    check_same_as_run_end(res, "a");
    /* a progress callback returning nonzero stops the run after that step, with a checkpoint */
    config(cfg, sizeof cfg, "b", 50);
    prog q = {0, 0, 0, 3};
    st = brisk_train_run(cfg, 0, NULL, 0, NULL, 0, NULL, NULL, on_progress, &q, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_STOPPED, "%s", msg);
    CHECKF(strstr(res, "\"steps\":3,") && strstr(res, "\"stopped_by_signal\":-1,") && !strstr(res, "\"checkpoint\":\"\""), "%s", res);
    /* resume auto continues it */
    config(cfg, sizeof cfg, "b", 1);
    st = brisk_train_run(cfg, 0, NULL, 0, "auto", 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_OK && strstr(res, "\"steps\":7,"), "%s %s", msg, res);
    check_same_as_run_end(res, "b");
}

static void test_run_errors(void) {
    setup();
    char cfg[1024], res[4096], msg[512], path[700];
    config(cfg, sizeof cfg, "c", 1);
    /* the run directory of a finished run is refused without resume or overwrite */
    brisk_status st = brisk_train_run(cfg, 0, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_OK, "%s", msg);
    st = brisk_train_run(cfg, 0, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st != BRISK_OK && strstr(msg, "holds a previous run"), "%s", msg);
    st = brisk_train_run(cfg, 0, NULL, 0, "auto", 1, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_ERR_INVALID && strstr(msg, "give one of them"), "%s", msg);
    st = brisk_train_run(cfg, 0, NULL, 0, NULL, 1, NULL, NULL, NULL, NULL, res, 16, msg, sizeof msg);
    CHECKF(st == BRISK_ERR_INVALID && strstr(msg, "result_size is 16"), "%s", msg);
    const char *bad[] = {"train.batch_size=-1"};
    st = brisk_train_run(cfg, 0, bad, 1, NULL, 1, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_ERR_INVALID && strstr(msg, "train.batch_size"), "%s", msg);
    st = brisk_train_run("{\"model\": ", 0, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st != BRISK_OK && msg[0], "%s", msg);
    snprintf(path, sizeof path, "%s/absent.json", dir);
    st = brisk_train_run(path, 1, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st != BRISK_OK && strstr(msg, "absent.json"), "%s", msg);
    st = brisk_train_run(NULL, 0, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_ERR_INVALID && strstr(msg, "required"), "%s", msg);
    /* from a file, with a config of several models: each one's summary */
    snprintf(path, sizeof path, "%s/p.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "{\"models\": [{\"name\": \"small\", \"type\": \"mlp\", \"inputs\": 64, \"hidden\": [8], \"outputs\": 3},"
            " {\"name\": \"big\", \"type\": \"mlp\", \"inputs\": 64, \"hidden\": [32], \"outputs\": 3}],"
            " \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 64, \"epochs\": 1, \"out_dir\": \"%s/pipe\"}}",
            data, dir);
    fclose(f);
    st = brisk_train_run(path, 1, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, res, sizeof res, msg, sizeof msg);
    CHECKF(st == BRISK_OK && strstr(res, "\"models\":{\"small\":{") && strstr(res, "\"big\":{"), "%s %s", msg, res);
}

TEST_MAIN(T(test_run_json), T(test_run_errors))
