/* data-internal: an image dataset's state (image_dataset.c loads it, image_sample.c makes
 * its samples), its labels (image_labels.c, image_labels_json.c), and EXIF orientation
 * (image_exif.c) for image.c. */
#ifndef BRISK_DATA_IMAGE_INTERNAL_H
#define BRISK_DATA_IMAGE_INTERNAL_H

#include "brisk/data.h"

#include <pthread.h>

/* A file left out: at load (index -1), or a sample whose pixels failed to decode later. */
typedef struct brisk_image_skip {
    char *msg;                 /* "FILE: why" */
    char *file;
    int64_t index;
} brisk_image_skip;

typedef struct brisk_image_source {
    brisk_image_spec spec;
    int64_t n;
    char **paths;              /* [n] full paths; NULL for an array */
    int32_t *wh;               /* [n, 2] each file's width and height as decoded (files only) */
    uint8_t *array;            /* [n, ah, aw, ac] for an image array */
    int aw, ah, ac;
    int k;
    float *kp;                 /* [n, k, 3] source pixels */
    int has_category;
    int32_t *category;         /* [n] */
    int f_x, f_y, f_vis, f_cat; /* field indices, -1 when absent */
    uint64_t *file_id;         /* [n, 2] device and inode of each file: one listed twice, or in
                                  both the training and the validation labels, is one file */
    /* Guards bad and skips: the loader's threads record, the trainer reads. */
    pthread_mutex_t mu;
    uint8_t *bad;              /* [n] 1 once the sample's pixels failed to decode */
    brisk_image_skip *skips;
    int64_t nskips, cap_skips;
} brisk_image_source;

/* dataset.make of an image dataset (image_sample.c). */
brisk_status brisk_image_make(void *user, int64_t index, uint64_t epoch, int augment, void *const *dst,
                              brisk_error *err);
/* The state of an image dataset; NULL for any other. */
static inline brisk_image_source *brisk_image_source_of(const brisk_dataset *ds) {
    return ds && ds->make == brisk_image_make ? (brisk_image_source *)ds->make_user : NULL;
}
/* Where an image of w x h (a crop of it) lands in the sample: the box x0, y0, width,
 * height. The whole sample (stretched), or with spec.pad the largest box of the image's
 * aspect ratio, centred (a letterbox). */
void brisk_image_box(const brisk_image_spec *sp, int w, int h, int box[4]);
/* Records a file left out (index -1 at load); 0, or -1 when out of memory. */
int brisk_image_skip_add(brisk_image_source *s, int64_t index, const char *file, const char *msg);

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

/* image_checks.c: dup[r] = 1 for each row naming a file (ids: [rows, 2] device and inode;
 * 0, 0 unknown) that an earlier row names with the same labels, counted in rep; one with
 * other labels is an error naming both rows. */
brisk_status brisk_image_find_duplicates(const brisk_image_labels *L, const uint64_t *ids, const char *name,
                                         uint8_t *dup, brisk_image_report *rep, brisk_error *err);
/* Counts the labelled keypoints and those outside their image into rep; an error when
 * they are most. */
brisk_status brisk_image_check_keypoints(const brisk_image_source *s, brisk_image_report *rep, brisk_error *err);

/* The EXIF orientation (1 to 8; 1 when absent or unreadable) of a JPEG or PNG in memory. */
int brisk_image_orientation(const void *buf, size_t len);
/* Turns decoded pixels from the stored frame into the displayed one (orientation 2 to 8:
 * mirrored and/or rotated; 5 to 8 swap width and height); 1 leaves them. */
brisk_status brisk_image_orient(brisk_image *im, int orientation, const char *name, brisk_error *err);

#endif
