/* libFuzzer target for config JSON: parsing (comments, error location), every reader
 * getter over a config-shaped schema, unknown-key checks, --set overrides built from
 * the input, and the dump -> parse -> dump round trip, which must be a fixed point. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/json.h"

static void read_config(brisk_json *doc) {
    static const char *const kinds[] = {"mlp", "lstm", "diffusion", NULL};
    brisk_json_reader root = brisk_json_root(doc), m, noise, d, layer;
    int type, i, *ints;
    int64_t i64;
    double x, *nums;
    bool b, present;
    const char *s, **strs;
    size_t n;
    brisk_json_object_opt(&root, "model", &m, &present);
    brisk_json_enum_or(&m, "type", kinds, 0, &type);
    brisk_json_int_or(&m, "inputs", 1, 1, 1 << 20, &i);
    brisk_json_ints(&m, "hidden", false, 1, 1 << 16, &ints, &n);
    free(ints);
    brisk_json_number_or(&m, "dropout", 0, BRISK_IN(0, 1), &x);
    brisk_json_object_opt(&m, "noise", &noise, NULL);
    brisk_json_int64_or(&noise, "steps", 50, 1, INT64_MAX, &i64);
    brisk_json_number_or(&noise, "beta_start", 1e-4, BRISK_GT(0), &x);
    brisk_json_numbers(&m, "mean", false, BRISK_ANY, &nums, &n);
    free(nums);
    brisk_json_array_len(&m, "layers", false, &n);
    for (size_t k = 0; k < n && k < 8; k++) {
        brisk_json_object_at(&m, "layers", k, &layer);
        brisk_json_int_or(&layer, "width", 8, 1, 4096, &i);
        brisk_json_unknown_keys(&layer);
    }
    brisk_json_object_opt(&root, "data", &d, NULL);
    brisk_json_string_or(&d, "train", "x.npz", &s);
    brisk_json_strings(&d, "columns", false, &strs, &n);
    free(strs);
    brisk_json_bool_or(&d, "shuffle", true, &b);
    brisk_json_has(&d, "fields");
    brisk_json_ignore(&root, "optim", "train", "speed", NULL);
    brisk_error err;
    brisk_json_finish(doc, &err);
}

/* The dump of a parsed document parses back to the same dump. */
static void round_trip(brisk_json *doc) {
    char *a = NULL, *b = NULL;
    brisk_json *again = NULL;
    brisk_error err;
    if (brisk_json_dump(doc, &a, &err)) return;
    if (brisk_json_parse(a, strlen(a), "dump", &again, &err)) __builtin_trap();
    if (brisk_json_dump(again, &b, &err) == BRISK_OK && strcmp(a, b) != 0) __builtin_trap();
    free(a);
    free(b);
    brisk_json_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_json *doc = NULL;
    brisk_error err;
    if (brisk_json_parse((const char *)data, size, "fuzz.json", &doc, &err) == BRISK_OK) {
        /* The input's first line, taken as an override, exercises the path parser. */
        char set[128];
        size_t k = 0;
        while (k < size && k + 1 < sizeof set && data[k] != '\n' && data[k]) { set[k] = (char)data[k]; k++; }
        set[k] = 0;
        brisk_json_override(doc, set, &err);
        brisk_json_override(doc, "model.noise.steps=7", &err);
        brisk_json_set_number(doc, "optim.lr", 3e-4, &err);
        brisk_json_set_int(doc, "train.batch_size", 64, &err);
        round_trip(doc);
        read_config(doc);
        brisk_json_free(doc);
    }
    return 0;
}
