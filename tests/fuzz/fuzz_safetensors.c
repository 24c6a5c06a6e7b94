/* libFuzzer target for the safetensors reader. Each input is tried twice: as a whole
 * file image, and as "header JSON, NUL, data bytes" with a correct length prefix put
 * in front, so that mutations of the header text reach the validation behind the
 * length check. Every tensor of an accepted file is looked up and copied out. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/safetensors.h"
#include "st_image.h"

static void exercise(const uint8_t *buf, size_t len) {
    brisk_safetensors *st = NULL;
    brisk_error err;
    if (brisk_safetensors_parse(buf, len, "fuzz.safetensors", &st, &err) != BRISK_OK) return;
    const unsigned char *lo = buf, *hi = buf + len;
    for (size_t i = 0; i < brisk_safetensors_count(st); i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        const unsigned char *p = t->data;
        if (p < lo || p > hi || t->nbytes > (size_t)(hi - p)) __builtin_trap();
        const brisk_st_tensor *f = brisk_safetensors_find(st, t->name);
        if (!f || strcmp(f->name, t->name) != 0) __builtin_trap();
        brisk_tensor out;
        if (brisk_safetensors_load(st, t->name, &out, &err) == BRISK_OK) {
            if (brisk_tensor_bytes(&out) != t->nbytes) __builtin_trap();
            brisk_tensor_free(&out);
        }
    }
    for (size_t i = 0; i < brisk_safetensors_meta_count(st); i++) {
        const char *k, *v;
        brisk_safetensors_meta_at(st, i, &k, &v);
        if (brisk_safetensors_meta(st, k) == NULL) __builtin_trap();
    }
    brisk_safetensors_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_st_both_forms(data, size, exercise); }
