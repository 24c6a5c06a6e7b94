/* Checks of an image dataset's labels against its files, at load (and, across two
 * datasets, the files they share: brisk_image_dataset_shared):
 *  - one file listed twice (by device and inode, so "a.png", "./a.png" and a symlink to it
 *    are one file): with the same labels the later rows are dropped, since a split could put
 *    the copies on both sides and validation would score a memorised image; with other
 *    labels the rows contradict each other (one image, two answers) and are refused;
 *  - keypoints outside their image, which the samples treat as not labelled: counted, and
 *    refused when they are most of the labelled ones (the labels are then in another frame,
 *    and training would learn nothing from them). */
#include "data/image_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row_id {
    uint64_t dev, ino;
    int64_t row;
} row_id;

static int cmp_row_id(const void *a, const void *b) {
    const row_id *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static int same_labels(const brisk_image_labels *L, int64_t a, int64_t b) {
    if (L->has_category && L->category[a] != L->category[b]) return 0;
    return memcmp(L->kp + (size_t)a * L->k * 3, L->kp + (size_t)b * L->k * 3, (size_t)L->k * 3 * sizeof(float)) == 0;
}

static void where(const brisk_image_labels *L, int64_t r, char *buf, size_t n) {
    snprintf(buf, n, L->json ? "images[%lld]" : "line %lld", (long long)L->lines[r]);
}

brisk_status brisk_image_find_duplicates(const brisk_image_labels *L, const uint64_t *ids, const char *name,
                                         uint8_t *dup, brisk_image_report *rep, brisk_error *err) {
    memset(dup, 0, (size_t)L->rows);
    row_id *r = malloc((size_t)(L->rows ? L->rows : 1) * sizeof *r);
    if (!r) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    int64_t n = 0;
    for (int64_t i = 0; i < L->rows; i++) /* a file that cannot be found is reported as such later */
        if (ids[2 * i] || ids[2 * i + 1]) r[n++] = (row_id){ids[2 * i], ids[2 * i + 1], i};
    qsort(r, (size_t)n, sizeof *r, cmp_row_id);
    brisk_status st = BRISK_OK;
    for (int64_t i = 1, group = 0; i < n && !st; i++) {
        if (r[i].dev != r[i - 1].dev || r[i].ino != r[i - 1].ino) {
            group = i;
            continue;
        }
        int64_t first = r[group].row; /* the file's first row: the one kept */
        char a[48], b[48];
        where(L, first, a, sizeof a), where(L, r[i].row, b, sizeof b);
        if (!same_labels(L, first, r[i].row)) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s and %s name the same image (%s, %s) with different labels; "
                              "a model gives one answer per image, so the two contradict each other: keep one row "
                              "(or crop each labelled instance into its own file)", name, a, b, L->files[first],
                              L->files[r[i].row]);
            break;
        }
        dup[r[i].row] = 1;
        if (!rep->duplicates++)
            snprintf(rep->first_duplicate, sizeof rep->first_duplicate, "%s (%s) repeats %s", L->files[r[i].row], b, a);
    }
    free(r);
    return st;
}

brisk_status brisk_image_check_keypoints(const brisk_image_source *s, brisk_image_report *rep, brisk_error *err) {
    for (int64_t i = 0; i < s->n; i++) {
        int w = s->paths ? s->wh[2 * i] : s->aw, h = s->paths ? s->wh[2 * i + 1] : s->ah;
        for (int k = 0; k < s->k; k++) {
            const float *p = s->kp + ((size_t)i * s->k + k) * 3;
            if (!(p[2] > 0)) continue;
            rep->keypoints_labelled++;
            /* as the sample treats it: pixel (i, j) spans [i, i+1) x [j, j+1) */
            if (p[0] >= 0 && p[0] < w && p[1] >= 0 && p[1] < h) continue;
            if (!rep->keypoints_outside++) {
                char who[64];
                if (!s->paths) snprintf(who, sizeof who, "sample %lld", (long long)i);
                snprintf(rep->first_outside, sizeof rep->first_outside, "%s: keypoint %d at (%g, %g), outside its %d x "
                         "%d pixels", s->paths ? s->paths[i] : who, k, (double)p[0], (double)p[1], w, h);
            }
        }
    }
    if (2 * rep->keypoints_outside <= rep->keypoints_labelled) return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %lld of the %lld labelled keypoints lie outside their images (the "
                        "first: %s), and training would leave them out as not labelled. The labels are likely in another "
                        "frame: fractions of the image instead of pixels, x and y swapped, another image size, or the "
                        "stored frame of EXIF-rotated photos (brisk reads the displayed one unless "
                        "data.images.orientation is \"raw\")", s->spec.labels, (long long)rep->keypoints_outside,
                        (long long)rep->keypoints_labelled, rep->first_outside);
}

static int cmp_id(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

int64_t brisk_image_dataset_shared(const brisk_dataset *a, const brisk_dataset *b, char *first, size_t n) {
    const brisk_image_source *sa = brisk_image_source_of(a), *sb = brisk_image_source_of(b);
    if (n) first[0] = 0;
    if (!sa || !sb || !sa->file_id || !sb->file_id || sa->n == 0) return 0;
    uint64_t *ids = malloc((size_t)sa->n * 2 * sizeof *ids);
    if (!ids) return 0;
    memcpy(ids, sa->file_id, (size_t)sa->n * 2 * sizeof *ids);
    qsort(ids, (size_t)sa->n, 2 * sizeof *ids, cmp_id);
    int64_t shared = 0;
    for (int64_t i = 0; i < sb->n; i++)
        if (bsearch(sb->file_id + 2 * i, ids, (size_t)sa->n, 2 * sizeof *ids, cmp_id) && !shared++ && n)
            snprintf(first, n, "%s", sb->paths[i]);
    free(ids);
    return shared;
}
