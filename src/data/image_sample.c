/* One sample of an image dataset (dataset.make, called from the loader's threads): the
 * image decoded (or taken from the array), cropped and flipped when augmenting, resized
 * bilinearly and normalised into "x", and its keypoints mapped the same way into "y" and
 * "visible". With skip_bad, a file whose pixels fail to decode (the check at load reads
 * only headers, and a truncated file's header is intact) is recorded once and replaced by
 * the next sample that decodes: the step's graph has a fixed batch, so a sample cannot
 * just be dropped, and the next one in the list (not a random one) gives the same batch
 * whatever the thread count and on a resume. */
#include "data/image_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_AUGMENT = 0x41554720u /* "AUG " */ };

void brisk_image_box(const brisk_image_spec *sp, int w, int h, int box[4]) {
    const int W = sp->width, H = sp->height;
    box[0] = 0, box[1] = 0, box[2] = W, box[3] = H;
    if (!sp->pad) return;
    double s = fmin((double)W / w, (double)H / h);
    int bw = (int)lround(w * s), bh = (int)lround(h * s);
    bw = bw < 1 ? 1 : bw > W ? W : bw;
    bh = bh < 1 ? 1 : bh > H ? H : bh;
    box[0] = (W - bw) / 2, box[1] = (H - bh) / 2, box[2] = bw, box[3] = bh;
}

/* Bilinear taps along one axis: output o of `out` samples, inside the box [b0, b0 + bn),
 * reads source positions [start, start + len) (the crop), mirrored when flip; outside the
 * box, i0 is -1 (padding). align_corners=False. */
static void taps(int out, int b0, int bn, int start, int len, int flip, int *i0, int *i1, float *w1) {
    double scale = (double)len / bn;
    for (int o = 0; o < out; o++) {
        int oo = (flip ? out - 1 - o : o) - b0;
        if (oo < 0 || oo >= bn) {
            i0[o] = i1[o] = -1, w1[o] = 0;
            continue;
        }
        double s = (oo + 0.5) * scale - 0.5;
        if (s < 0) s = 0;
        if (s > len - 1) s = len - 1;
        int a = (int)floor(s);
        int b = a + 1 < len ? a + 1 : a;
        i0[o] = start + a;
        i1[o] = start + b;
        w1[o] = (float)(s - a);
    }
}

static brisk_status make_one(const brisk_image_source *s, int64_t index, uint64_t epoch, int augment, void *const *dst,
                             brisk_error *err) {
    const brisk_image_spec *sp = &s->spec;
    brisk_image im = {0};
    const uint8_t *px;
    int w, h, ch;
    if (s->paths) {
        brisk_status st = brisk_image_read(s->paths[index], &sp->decode, &im, err);
        if (st) return st;
        px = im.data, w = im.width, h = im.height, ch = im.channels;
        if (!sp->resize && (w != sp->width || h != sp->height)) {
            brisk_image_free(&im);
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: image of %d x %d pixels; expected %d x %d (data.images.size), "
                                "or set resize", s->paths[index], w, h, sp->width, sp->height);
        }
    } else {
        px = s->array + (size_t)index * (size_t)s->aw * s->ah * s->ac, w = s->aw, h = s->ah, ch = s->ac;
    }
    /* The augmentation's draws: flip, crop scale, crop x, crop y. */
    int flip = 0, cx = 0, cy = 0, cw = w, chh = h;
    if (augment) {
        const uint32_t key[2] = {(uint32_t)sp->seed, (uint32_t)(sp->seed >> 32)};
        const uint32_t ctr[4] = {(uint32_t)index, (uint32_t)((uint64_t)index >> 32), STREAM_AUGMENT, (uint32_t)epoch};
        uint32_t u[4];
        brisk_philox4x32(ctr, key, u);
        flip = sp->flip > 0 && brisk_u32_to_unit(u[0]) <= sp->flip;
        if (sp->crop > 0 && sp->crop < 1) {
            double frac = sp->crop + (1.0 - sp->crop) * (1.0 - brisk_u32_to_unit(u[1])); /* in [crop, 1) */
            cw = (int)lround(frac * w), chh = (int)lround(frac * h);
            if (cw < 1) cw = 1;
            if (chh < 1) chh = 1;
            cx = (int)((1.0 - brisk_u32_to_unit(u[2])) * (w - cw + 1));
            cy = (int)((1.0 - brisk_u32_to_unit(u[3])) * (h - chh + 1));
            if (cx > w - cw) cx = w - cw;
            if (cy > h - chh) cy = h - chh;
        }
    }
    int W = sp->width, H = sp->height, box[4];
    brisk_image_box(sp, cw, chh, box);
    float *out = (float *)dst[s->f_x];
    if (!flip && cx == 0 && cy == 0 && cw == W && chh == H) {
        /* Same size, no augmentation: a table of the 256 normalised values, the same
         * numbers the general path computes for whole pixels. */
        for (int c = 0; c < 3; c++) {
            float lut[256];
            for (int v = 0; v < 256; v++) lut[v] = ((float)v / 255.0f - sp->mean[c]) / sp->std[c];
            const uint8_t *p = px + (ch == 1 ? 0 : c);
            float *o = out + (size_t)c * H * W;
            for (size_t i = 0; i < (size_t)W * H; i++) o[i] = lut[p[i * (size_t)ch]];
        }
        brisk_image_free(&im);
        goto labels;
    }
    int *xi = malloc(sizeof(int) * 2 * (size_t)(W + H));
    float *xw = malloc(sizeof(float) * (size_t)(W + H));
    if (!xi || !xw) {
        free(xi), free(xw), brisk_image_free(&im);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "image sample %lld: out of memory", (long long)index);
    }
    int *x0 = xi, *x1 = xi + W, *y0 = xi + 2 * W, *y1 = xi + 2 * W + H;
    float *wx = xw, *wy = xw + W;
    taps(W, box[0], box[2], cx, cw, flip, x0, x1, wx);
    taps(H, box[1], box[3], cy, chh, 0, y0, y1, wy);
    size_t row = (size_t)w * ch;
    for (int c = 0; c < 3; c++) {
        int sc = ch == 1 ? 0 : c;
        float m = sp->mean[c], sd = sp->std[c]; /* as torchvision: x / 255, then (x - mean) / std */
        for (int oy = 0; oy < H; oy++) {
            float *o = out + ((size_t)c * H + oy) * W;
            if (y0[oy] < 0) { /* a letterbox's padding: the mean colour, 0 once normalised */
                memset(o, 0, sizeof(float) * (size_t)W);
                continue;
            }
            const uint8_t *ra = px + (size_t)y0[oy] * row, *rb = px + (size_t)y1[oy] * row;
            float b = wy[oy], a = 1.0f - b;
            for (int ox = 0; ox < W; ox++) {
                if (x0[ox] < 0) {
                    o[ox] = 0;
                    continue;
                }
                float r = wx[ox], l = 1.0f - r;
                float v = a * (l * ra[(size_t)x0[ox] * ch + sc] + r * ra[(size_t)x1[ox] * ch + sc]) +
                          b * (l * rb[(size_t)x0[ox] * ch + sc] + r * rb[(size_t)x1[ox] * ch + sc]);
                o[ox] = (v / 255.0f - m) / sd;
            }
        }
    }
    free(xi);
    free(xw);
    brisk_image_free(&im);
labels:
    if (s->f_y >= 0) {
        float *y = (float *)dst[s->f_y], *vis = (float *)dst[s->f_vis];
        const float *kp = s->kp + (size_t)index * s->k * 3;
        for (int k = 0; k < s->k; k++) {
            double kx = (kp[3 * k] - cx) * (double)box[2] / cw + box[0];
            double ky = (kp[3 * k + 1] - cy) * (double)box[3] / chh + box[1];
            int in = kp[3 * k + 2] > 0 && kx >= box[0] && kx < box[0] + box[2] && ky >= box[1] && ky < box[1] + box[3];
            if (flip) kx = W - kx;
            y[2 * k] = in ? (float)(kx / W) : 0.0f;
            y[2 * k + 1] = in ? (float)(ky / H) : 0.0f;
            vis[k] = in ? 1.0f : 0.0f;
        }
        for (int p = 0; flip && p < sp->nflip_pairs; p++) {
            int a = sp->flip_pairs[p][0], b = sp->flip_pairs[p][1];
            float t0 = y[2 * a], t1 = y[2 * a + 1], tv = vis[a];
            y[2 * a] = y[2 * b], y[2 * a + 1] = y[2 * b + 1], vis[a] = vis[b];
            y[2 * b] = t0, y[2 * b + 1] = t1, vis[b] = tv;
        }
    }
    if (s->f_cat >= 0) *(int32_t *)dst[s->f_cat] = s->category[index];
    return BRISK_OK;
}

static int is_bad(brisk_image_source *s, int64_t i) {
    pthread_mutex_lock(&s->mu);
    int bad = s->bad[i];
    pthread_mutex_unlock(&s->mu);
    return bad;
}

/* Marks sample i as failing and records why, the first time only (loader threads race). */
static int mark_bad(brisk_image_source *s, int64_t i, const char *msg) {
    pthread_mutex_lock(&s->mu);
    int first = !s->bad[i];
    s->bad[i] = 1;
    pthread_mutex_unlock(&s->mu);
    return first ? brisk_image_skip_add(s, i, s->paths[i], msg) : 0;
}

brisk_status brisk_image_make(void *user, int64_t index, uint64_t epoch, int augment, void *const *dst,
                              brisk_error *err) {
    brisk_image_source *s = (brisk_image_source *)user;
    if (!s->paths || s->spec.no_replace) return make_one(s, index, epoch, augment, dst, err);
    if (!s->spec.skip_bad) {
        brisk_status st = make_one(s, index, epoch, augment, dst, err);
        size_t n = strlen(err->msg);
        if (st && st != BRISK_ERR_NOMEM)
            snprintf(err->msg + n, sizeof err->msg - n, " (data.images.on_error \"skip\" replaces such an image by the "
                     "next one that decodes)");
        return st;
    }
    /* the next sample of the list, of the same category when there are categories (an
     * episode's batch is one category) */
    for (int64_t d = 0; d < s->n; d++) {
        int64_t j = (index + d) % s->n;
        if ((d && s->has_category && s->category[j] != s->category[index]) || is_bad(s, j)) continue;
        brisk_error e;
        e.msg[0] = 0;
        brisk_status st = make_one(s, j, epoch, augment, dst, &e);
        if (!st) return BRISK_OK;
        if (st == BRISK_ERR_NOMEM || mark_bad(s, j, e.msg)) {
            *err = e;
            return st;
        }
    }
    return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the image of sample %lld (%s) and every other%s failed to decode "
                        "(data.images.on_error \"skip\" left them out): nothing is left to replace it", s->spec.labels,
                        (long long)index, s->paths[index], s->has_category ? " of its category" : "");
}

brisk_status brisk_image_dataset_size(const brisk_dataset *ds, int64_t i, int *width, int *height, brisk_error *err) {
    const brisk_image_source *s = brisk_image_source_of(ds);
    if (!s || i < 0 || i >= s->n)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no image sample %lld", ds ? ds->source : "(none)", (long long)i);
    *width = s->paths ? s->wh[2 * i] : s->aw;
    *height = s->paths ? s->wh[2 * i + 1] : s->ah;
    return BRISK_OK;
}

brisk_status brisk_image_dataset_to_pixels(const brisk_dataset *ds, int64_t i, int k, const float *frac, float *px,
                                           brisk_error *err) {
    int w, h;
    brisk_status st = brisk_image_dataset_size(ds, i, &w, &h, err);
    if (st) return st;
    const brisk_image_source *s = brisk_image_source_of(ds);
    int box[4];
    brisk_image_box(&s->spec, w, h, box);
    for (int j = 0; j < k; j++) { /* as the sample maps a keypoint, backwards */
        px[2 * j] = (float)(((double)frac[2 * j] * s->spec.width - box[0]) * w / box[2]);
        px[2 * j + 1] = (float)(((double)frac[2 * j + 1] * s->spec.height - box[1]) * h / box[3]);
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- files left out */

int brisk_image_skip_add(brisk_image_source *s, int64_t index, const char *file, const char *msg) {
    char *copy = strdup(msg), *name = strdup(file);
    if (!copy || !name) {
        free(copy), free(name);
        return -1;
    }
    pthread_mutex_lock(&s->mu);
    int fail = 0;
    if (s->nskips == s->cap_skips) {
        int64_t cap = s->cap_skips ? 2 * s->cap_skips : 16;
        brisk_image_skip *t = realloc(s->skips, (size_t)cap * sizeof *t);
        if (t) s->skips = t, s->cap_skips = cap;
        else fail = 1;
    }
    if (!fail) s->skips[s->nskips++] = (brisk_image_skip){copy, name, index};
    pthread_mutex_unlock(&s->mu);
    if (fail) free(copy), free(name);
    return fail ? -1 : 0;
}

int64_t brisk_image_dataset_skips(const brisk_dataset *ds) {
    brisk_image_source *s = brisk_image_source_of(ds);
    if (!s) return 0;
    pthread_mutex_lock(&s->mu);
    int64_t n = s->nskips;
    pthread_mutex_unlock(&s->mu);
    return n;
}

const char *brisk_image_dataset_skip(const brisk_dataset *ds, int64_t i, int64_t *sample, const char **file) {
    brisk_image_source *s = brisk_image_source_of(ds);
    const char *msg = NULL;
    if (!s) return NULL;
    pthread_mutex_lock(&s->mu);
    if (i >= 0 && i < s->nskips) {
        msg = s->skips[i].msg;
        if (sample) *sample = s->skips[i].index;
        if (file) *file = s->skips[i].file;
    }
    pthread_mutex_unlock(&s->mu);
    return msg;
}
