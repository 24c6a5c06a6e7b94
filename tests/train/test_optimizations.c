/* The optimization list of the run report (optimizations.c): on the CPU, the GPU's
 * optimizations off with the reason and the config's switches with theirs; on a device,
 * the backend's description taken apart into rows. The device case runs here with the
 * CPU backend's describe hook replaced by one returning the CUDA backend's format (as
 * src/backend/cuda/info.c writes it), so it needs no GPU. */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train/trainer_internal.h"

static char dir[512], data[600];

#define MLP "{\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [8], \"outputs\": 3}"

static brisk_trainer *make_model(const char *model, const char *extra, brisk_config *cfg, brisk_error *err) {
    T_MAKE_DIR(dir, "optimizations");
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    if (access(data, F_OK) != 0 && brisk_synth_write("tabular", data, 256, 2, err)) return NULL;
    char json[4096];
    snprintf(json, sizeof json,
             "{\"model\": %s,"
             " \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 32, \"out_dir\": \"\"%s},"
             " \"speed\": {\"threads\": 1, \"device\": \"cpu\"}}", model, data, extra);
    if (brisk_config_parse(json, "<test>", NULL, 0, cfg, err)) return NULL;
    brisk_logger quiet = {0};
    brisk_trainer *t = NULL;
    if (brisk_trainer_create(cfg, &quiet, &t, err)) {
        brisk_config_free(cfg);
        return NULL;
    }
    return t;
}

static brisk_trainer *make_trainer(const char *extra, brisk_config *cfg, brisk_error *err) {
    return make_model(MLP, extra, cfg, err);
}

/* The row named name: its state and detail, or NULL. */
static const cJSON *row(const cJSON *list, const char *name) {
    for (const cJSON *it = list ? list->child : NULL; it; it = it->next) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return it;
    }
    return NULL;
}

static const char *field(const cJSON *r, const char *key) {
    const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void cpu_rows(void) {
    brisk_error err = {0};
    brisk_config cfg;
    brisk_trainer *t = make_trainer(", \"accumulate\": 2", &cfg, &err);
    REQUIRE(t);
    cJSON *list = brisk_trainer_optimizations(t);
    REQUIRE(list);
    const cJSON *gpu = row(list, "CUDA graph, mixed precision, fused epilogues, autotune");
    CHECK(strcmp(field(gpu, "state"), "off") == 0 && strstr(field(gpu, "detail"), "speed.device is cpu"));
    CHECK(strcmp(field(row(list, "gradient accumulation"), "state"), "on") == 0);
    CHECK(strstr(field(row(list, "gradient accumulation"), "detail"), "2 micro-batches") != NULL);
    CHECK(strcmp(field(row(list, "gradient clipping"), "state"), "off") == 0);
    CHECK(strcmp(field(row(list, "gradient clipping"), "detail"), "optim.clip_norm is 0") == 0);
    CHECK(strstr(field(row(list, "fused optimizer"), "detail"), "AdamW") != NULL);
    /* the CPU backend's own rows (brisk_backend.optimizations), each with its own text: the
     * GEMM row once showed the 2 MiB pages row's, written over it in a shared buffer */
    const cJSON *gemm = row(list, "GEMM kernel per shape");
    CHECK(gemm != NULL);
    CHECKF(strstr(field(gemm, "detail"), "2 MiB") == NULL && strstr(field(gemm, "detail"), "pages") == NULL,
           "GEMM kernel per shape: %s", field(gemm, "detail"));
    cJSON_Delete(list);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
}

/* A 1-D convolution over the 64 features seen as 16 channels of 4 steps: its forward and
 * weight gradient run by Winograd, and the report says so; BRISK_CPU_WINOGRAD=0 turns it off,
 * said too; a model without convolutions has no such row. */
static void winograd_row(void) {
    static const char *model =
        "{\"type\": \"graph\", \"inputs\": [{\"name\": \"x\", \"shape\": [64]},"
        " {\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}], \"layers\": ["
        " {\"name\": \"im\", \"op\": \"reshape\", \"inputs\": [\"x\"], \"shape\": [16, 1, 4]},"
        " {\"name\": \"c\", \"op\": \"conv2d\", \"inputs\": [\"im\"], \"out\": 16, \"kernel\": [1, 3],"
        " \"padding\": [0, 1]},"
        " {\"name\": \"g\", \"op\": \"global_avgpool\", \"inputs\": [\"c\"]},"
        " {\"name\": \"head\", \"op\": \"linear\", \"inputs\": [\"g\"], \"out\": 3}],"
        " \"outputs\": [\"head\"], \"losses\": [{\"output\": \"head\", \"target\": \"y\","
        " \"type\": \"cross_entropy\"}]}";
    for (int off = 0; off < 3; off++) {
        if (off == 1) setenv("BRISK_CPU_WINOGRAD", "0", 1);
        brisk_error err = {0};
        brisk_config cfg;
        brisk_trainer *t = off < 2 ? make_model(model, "", &cfg, &err) : make_trainer("", &cfg, &err);
        unsetenv("BRISK_CPU_WINOGRAD");
        CHECKF(t != NULL, "%s", err.msg);
        REQUIRE(t);
        cJSON *list = brisk_trainer_optimizations(t);
        REQUIRE(list);
        const cJSON *w = row(list, "Winograd convolutions");
        if (off == 0)
            CHECKF(strcmp(field(w, "state"), "on") == 0 && strstr(field(w, "detail"), "2 of the step's 2 convolution"),
                   "%s: %s", field(w, "state"), field(w, "detail"));
        else if (off == 1)
            CHECKF(strcmp(field(w, "state"), "off") == 0 && strstr(field(w, "detail"), "0 of the step's 2") &&
                       strstr(field(w, "detail"), "BRISK_CPU_WINOGRAD=0"),
                   "%s: %s", field(w, "state"), field(w, "detail"));
        else
            CHECKF(w == NULL, "an MLP has a Winograd row: %s", field(w, "detail"));
        cJSON_Delete(list);
        brisk_trainer_free(t);
        brisk_config_free(&cfg);
    }
}

static void fake_cuda_describe(brisk_backend *be, char *buf, size_t n) {
    (void)be;
    snprintf(buf, n, "NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs, 79.1 GiB), driver 13.0, runtime 13.0, cuBLASLt 13.0.0; "
                     "GEMM bf16 operands, fp32 accumulate; epilogue fusion on (4 GEMMs fused, 1 decomposed); "
                     "autotune off (--no-autotune: the heuristic's first choice); deterministic off; "
                     "residual adds fused with layernorm: 2");
}

static void described_rows(void) {
    brisk_error err = {0};
    brisk_config cfg;
    brisk_trainer *t = make_trainer("", &cfg, &err);
    REQUIRE(t);
    void (*saved)(brisk_backend *, char *, size_t) = t->be->describe;
    t->be->describe = fake_cuda_describe;
    cJSON *list = brisk_trainer_optimizations(t);
    t->be->describe = saved;
    REQUIRE(list);
    CHECK(strstr(field(row(list, "device"), "detail"), "NVIDIA H100 80GB HBM3 (cc 9.0") != NULL);
    CHECK(strcmp(field(row(list, "GEMM"), "state"), "info") == 0);
    CHECK(strcmp(field(row(list, "GEMM"), "detail"), "bf16 operands, fp32 accumulate") == 0);
    const cJSON *fusion = row(list, "epilogue fusion");
    CHECK(strcmp(field(fusion, "state"), "on") == 0 && strcmp(field(fusion, "detail"), "4 GEMMs fused, 1 decomposed") == 0);
    const cJSON *tune = row(list, "autotune");
    CHECK(strcmp(field(tune, "state"), "off") == 0);
    CHECKF(strcmp(field(tune, "detail"), "--no-autotune: the heuristic's first choice") == 0, "%s", field(tune, "detail"));
    CHECK(strcmp(field(row(list, "deterministic"), "state"), "off") == 0);
    CHECK(strcmp(field(row(list, "residual adds fused with layernorm"), "detail"), "2") == 0);
    CHECK(strcmp(field(row(list, "CUDA graph"), "state"), "on") == 0); /* speed.cuda_graph's default */
    cJSON_Delete(list);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

TEST_MAIN(T(cpu_rows), T(winograd_row), T(described_rows))
