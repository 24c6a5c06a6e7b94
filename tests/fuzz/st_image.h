/* For the fuzz targets that read safetensors files (fuzz_safetensors, fuzz_checkpoint):
 * each input is tried twice, as a whole file image, and as "header JSON, NUL, data
 * bytes" with a correct length prefix put in front, so that mutations of the header
 * text reach the validation behind the length check. */
#ifndef BRISK_FUZZ_ST_IMAGE_H
#define BRISK_FUZZ_ST_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int fuzz_st_both_forms(const uint8_t *data, size_t size, void (*exercise)(const uint8_t *, size_t)) {
    exercise(data, size);
    const uint8_t *nul = memchr(data, 0, size);
    size_t hn = nul ? (size_t)(nul - data) : size;
    size_t rest = nul ? size - hn - 1 : 0;
    uint8_t *img = malloc(8 + hn + rest + 1);
    if (!img) return 0;
    for (int i = 0; i < 8; i++) img[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    memcpy(img + 8, data, hn);
    if (rest) memcpy(img + 8 + hn, nul + 1, rest);
    exercise(img, 8 + hn + rest);
    free(img);
    return 0;
}

#endif
