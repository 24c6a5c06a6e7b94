/* libFuzzer target: the image dataset's labels, CSV (file[,category][,x0,y0,v0,...]) and JSON
 * ({"images": [{"file", "category", "keypoints"}]}): both parsers on every input, then the
 * check for rows naming one file twice (files identified by their names here, so that
 * repeated names reach it). */
#include "data/image_internal.h"

#include <stdlib.h>
#include <string.h>

static void duplicates(const brisk_image_labels *l) {
    uint64_t *ids = malloc((size_t)l->rows * 2 * sizeof *ids);
    uint8_t *dup = malloc((size_t)l->rows);
    if (ids && dup) {
        for (int64_t r = 0; r < l->rows; r++) { /* FNV-1a of the name */
            uint64_t h = 1469598103934665603u;
            for (const char *c = l->files[r]; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211u;
            ids[2 * r] = 1, ids[2 * r + 1] = h;
        }
        brisk_image_report rep;
        brisk_error err;
        memset(&rep, 0, sizeof rep);
        brisk_image_find_duplicates(l, ids, "fuzz.csv", dup, &rep, &err);
    }
    free(ids);
    free(dup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_image_labels l;
    if (brisk_image_labels_parse((const char *)data, size, "fuzz.csv", &l, &err) == BRISK_OK) {
        duplicates(&l);
        brisk_image_labels_free(&l);
    }
    if (brisk_image_labels_parse_json((const char *)data, size, "fuzz.json", &l, &err) == BRISK_OK) {
        duplicates(&l);
        brisk_image_labels_free(&l);
    }
    return 0;
}
