/* libFuzzer target for checkpoint loading (src/run/checkpoint_verify.c and the tensor
 * reading of checkpoint.c): a file image -> safetensors validation -> brisk checkpoint
 * verification (format, checksum) -> the training state in the metadata -> the config
 * it carries (-> brisk_config) -> the diff against itself -> for a small model, every
 * parameter and moment read into the model's arenas as a resume does. Each stage runs
 * whatever the previous one said, so that images the checksum refuses (nearly all
 * mutations) still reach the parsers behind it. Like fuzz_safetensors, each input is
 * also tried as "header JSON, NUL, data bytes" with a correct length prefix. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "st_image.h"
#include "train/trainer_internal.h"

#define FUZZ_MAX_PARAMS 200000

static void read_model_tensors(const brisk_safetensors *st, const brisk_config *cfg, int sgd) {
    if (brisk_model_param_count(&cfg->model) > FUZZ_MAX_PARAMS) return;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error err;
    if (g && !brisk_model_build(&cfg->model, 1, BRISK_BUILD_TRAIN, g, &io, &err)) {
        size_t n = (size_t)g->n_param_floats + 1;
        float *p = calloc(n, sizeof *p), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
        if (p && m && v) brisk_checkpoint_read_tensors(st, g, p, m, v, sgd, &err);
        free(p), free(m), free(v);
    }
    if (g) brisk_graph_free(g);
}

static void exercise(const uint8_t *buf, size_t len) {
    brisk_safetensors *st = NULL;
    brisk_error err;
    if (brisk_safetensors_parse(buf, len, "fuzz.safetensors", &st, &err) != BRISK_OK) return;
    brisk_checkpoint_verify(st, &err);
    brisk_ckpt_state cs;
    brisk_config cfg;
    if (brisk_checkpoint_state(st, &cs, &err) == BRISK_OK &&
        brisk_config_parse(cs.config, "fuzz.safetensors:config", NULL, 0, &cfg, &err) == BRISK_OK) {
        char diff[512];
        brisk_config_diff(cs.config, cfg.json, NULL, NULL, diff, sizeof diff);
        brisk_config_diff(cs.config, "{\"model\":{\"hidden\":[1]}}", "model", NULL, diff, sizeof diff);
        read_model_tensors(st, &cfg, cs.sgd);
        brisk_config_free(&cfg);
    }
    brisk_safetensors_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_st_both_forms(data, size, exercise); }
