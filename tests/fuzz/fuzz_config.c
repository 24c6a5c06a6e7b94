/* libFuzzer target for the whole config path (src/config/config.c): JSON text ->
 * brisk_config, every section validated; a first line "key=value" is taken as a --set
 * override of the config that follows it. What it checks besides not crashing:
 *   - the effective config (what checkpoints store) parses back to the same config, and
 *     its dump is a fixed point;
 *   - an accepted model (when small enough to build quickly) builds, differentiates and
 *     plans at a small batch, and plans the same bytes twice (the batch-size search
 *     relies on plans being pure). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"

#define FUZZ_MAX_PARAMS 200000

static void build_model(const brisk_config *cfg) {
    if (brisk_model_param_count(&cfg->model) > FUZZ_MAX_PARAMS) return;
    size_t bytes[2] = {0, 0};
    for (int rep = 0; rep < 2; rep++) {
        brisk_graph *g = brisk_graph_new();
        brisk_model_io io;
        brisk_plan plan;
        brisk_error err;
        memset(&plan, 0, sizeof plan);
        int64_t batch = cfg->train.batch_size > 0 && cfg->train.batch_size < 4 ? cfg->train.batch_size : 4;
        if (g && !brisk_model_build(&cfg->model, batch, BRISK_BUILD_TRAIN, g, &io, &err) &&
            !brisk_backward(g, io.loss, &err) && !brisk_plan_build(g, &plan, &err))
            bytes[rep] = brisk_plan_total_bytes(&plan);
        brisk_plan_free(&plan);
        if (g) brisk_graph_free(g);
    }
    if (bytes[0] != bytes[1]) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1), set[160];
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    size_t k = 0;
    while (k < size && k + 1 < sizeof set && data[k] != '\n' && data[k]) { set[k] = (char)data[k]; k++; }
    set[k] = 0;
    const char *overrides[] = {set};
    brisk_config cfg, again;
    brisk_error err;
    /* A first line "key=value" is a --set override, and the config follows it. */
    int n_over = strchr(set, '=') && set[0] != '{' && set[0] != ' ' && k < size;
    const char *json = n_over ? text + k + 1 : text;
    if (brisk_config_parse(json, "fuzz.json", overrides, n_over, &cfg, &err) == BRISK_OK) {
        if (brisk_config_parse(cfg.json, "fuzz.json", NULL, 0, &again, &err) != BRISK_OK) __builtin_trap();
        if (strcmp(cfg.json, again.json) != 0 || memcmp(&cfg.model, &again.model, sizeof cfg.model) != 0 ||
            memcmp(&cfg.train, &again.train, sizeof cfg.train) != 0 ||
            memcmp(&cfg.speed, &again.speed, sizeof cfg.speed) != 0 ||
            memcmp(&cfg.data, &again.data, sizeof cfg.data) != 0)
            __builtin_trap();
        brisk_config_free(&again);
        build_model(&cfg);
        brisk_config_free(&cfg);
    }
    free(text);
    return 0;
}
