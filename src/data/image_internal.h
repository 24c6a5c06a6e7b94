/* data-internal: the labels of an image dataset (image_labels.c, image_labels_json.c) for
 * image_dataset.c. */
#ifndef BRISK_DATA_IMAGE_INTERNAL_H
#define BRISK_DATA_IMAGE_INTERNAL_H

#include "brisk/data.h"

typedef struct brisk_image_labels {
    int64_t rows;
    char **files;         /* [rows] paths as written in the CSV */
    int64_t *lines;       /* [rows] the CSV line of each (JSON: its index in "images"), for messages */
    int json;             /* parsed from JSON */
    int has_category;
    int32_t *category;    /* [rows] when has_category */
    int k;                /* keypoints per row */
    float *kp;            /* [rows, k, 3]: x, y, v in source pixels */
} brisk_image_labels;

/* Parses the labels CSV (see data.h) from buf; `name` prefixes errors. */
brisk_status brisk_image_labels_parse(const char *buf, size_t len, const char *name, brisk_image_labels *out,
                                      brisk_error *err);
/* The same labels as JSON (image_labels_json.c): {"images": [{"file", "category", "keypoints":
 * [x0, y0, v0, ...]}, ...]}. */
brisk_status brisk_image_labels_parse_json(const char *buf, size_t len, const char *name, brisk_image_labels *out,
                                           brisk_error *err);
void brisk_image_labels_free(brisk_image_labels *l);

#endif
