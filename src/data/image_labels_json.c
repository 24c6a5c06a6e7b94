/* The labels of an image dataset as JSON, the same content as the CSV (image_labels.c):
 *   {"images": [{"file": "a.png", "category": 1, "keypoints": [x0, y0, v0, x1, y1, v1, ...]}, ...]}
 * keypoints flat as COCO writes them. "category" and "keypoints" are optional, but given for
 * every image or none, and every image has the same number of keypoints. Strict: unknown
 * keys and wrong types are errors naming the entry ("labels.json: images[3].keypoints[5]"). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/image_internal.h"

#define FAIL(...) (st = brisk_errorf(err, BRISK_ERR_FORMAT, __VA_ARGS__))

/* One entry of "images" into row r of l (allocated for it). */
static brisk_status entry(const cJSON *e, int64_t r, const char *name, brisk_image_labels *l, brisk_error *err) {
    brisk_status st = BRISK_OK;
    long long i = (long long)r;
    if (!cJSON_IsObject(e)) return FAIL("%s: images[%lld]: expected an object {\"file\", ...}", name, i);
    for (const cJSON *c = e->child; c; c = c->next)
        if (strcmp(c->string, "file") && strcmp(c->string, "category") && strcmp(c->string, "keypoints"))
            return FAIL("%s: images[%lld]: unknown key \"%.40s\" (known: file, category, keypoints)", name, i, c->string);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "file");
    if (!cJSON_IsString(f) || !f->valuestring[0])
        return FAIL("%s: images[%lld].file: expected a path (a non-empty string)", name, i);
    if (!(l->files[r] = strdup(f->valuestring))) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "category");
    if ((c != NULL) != l->has_category)
        return FAIL("%s: images[%lld]: %s \"category\"; images[0] %s (give it for every image or none)", name, i,
                    c ? "has" : "lacks", l->has_category ? "has one" : "does not");
    if (c) {
        double v = cJSON_IsNumber(c) ? c->valuedouble : -1;
        if (!(v >= 0 && v <= 2147483647.0 && v == floor(v)))
            return FAIL("%s: images[%lld].category: expected an integer >= 0", name, i);
        l->category[r] = (int32_t)v;
    }
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "keypoints");
    int n = k ? cJSON_GetArraySize(k) : 0;
    if (k && !cJSON_IsArray(k)) return FAIL("%s: images[%lld].keypoints: expected an array [x0, y0, v0, ...]", name, i);
    if (n != 3 * l->k)
        return FAIL("%s: images[%lld].keypoints: %d numbers; expected %d (%d keypoints as x, y, v, as images[0])", name, i,
                    n, 3 * l->k, l->k);
    int j = 0;
    for (const cJSON *v = k ? k->child : NULL; v; v = v->next, j++) {
        int isv = j % 3 == 2;
        double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!isfinite(x) || (isv && x != 0 && x != 1 && x != 2))
            return FAIL("%s: images[%lld].keypoints[%d] (%c%d): expected %s", name, i, j, "xyv"[j % 3], j / 3,
                        isv ? "0, 1 or 2" : "a finite number");
        l->kp[r * 3 * l->k + j] = (float)x;
    }
    return st;
}

brisk_status brisk_image_labels_parse_json(const char *buf, size_t len, const char *name, brisk_image_labels *l,
                                           brisk_error *err) {
    memset(l, 0, sizeof *l);
    l->json = 1;
    brisk_status st = BRISK_OK;
    if (len && memchr(buf, 0, len)) return FAIL("%s: a NUL byte; expected JSON text", name);
    cJSON *doc = cJSON_ParseWithLength(buf, len);
    if (!doc) return FAIL("%s: not valid JSON (expected {\"images\": [{\"file\": ..., \"keypoints\": [...]}, ...]})", name);
    const cJSON *im = cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "images") : NULL;
    int64_t n = cJSON_IsArray(im) ? cJSON_GetArraySize(im) : 0;
    for (const cJSON *c = cJSON_IsObject(doc) ? doc->child : NULL; c && !st; c = c->next)
        if (strcmp(c->string, "images")) FAIL("%s: unknown key \"%.40s\" (known: images)", name, c->string);
    if (!st && n < 1) FAIL("%s: expected {\"images\": [...]} with at least one image", name);
    if (!st) {
        const cJSON *first = im->child;
        const cJSON *k = cJSON_IsObject(first) ? cJSON_GetObjectItemCaseSensitive(first, "keypoints") : NULL;
        int nk = cJSON_IsArray(k) ? cJSON_GetArraySize(k) : 0;
        if (nk % 3 || nk / 3 > BRISK_MAX_KEYPOINTS)
            FAIL("%s: images[0].keypoints: %d numbers; expected x, y, v for each of at most %d keypoints", name, nk,
                 BRISK_MAX_KEYPOINTS);
        l->k = nk / 3;
        l->has_category = cJSON_IsObject(first) && cJSON_GetObjectItemCaseSensitive(first, "category") != NULL;
    }
    if (!st) {
        l->files = calloc((size_t)n, sizeof *l->files);
        l->lines = malloc((size_t)n * sizeof *l->lines);
        l->category = malloc((size_t)n * sizeof *l->category);
        l->kp = malloc((size_t)n * (size_t)(l->k ? l->k : 1) * 3 * sizeof *l->kp);
        if (!l->files || !l->lines || !l->category || !l->kp) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    }
    int64_t r = 0;
    for (const cJSON *e = st ? NULL : im->child; e && !st; e = e->next, r++) {
        l->lines[r] = r;
        l->rows = r + 1; /* so that free releases this row's file */
        st = entry(e, r, name, l, err);
    }
    cJSON_Delete(doc);
    if (st) brisk_image_labels_free(l);
    return st;
}
