/* The synthetic keypoint image set (brisk synth images DIR): 64 x 64 RGB PNGs of one
 * filled quadrilateral each on a noisy gradient, in three categories (0 rectangle,
 * 1 trapezoid narrower at the top, 2 narrower at the bottom), with K = 4 keypoints at its
 * corners (top-left, top-right, bottom-right, bottom-left: flip pairs 0-1 and 2-3). One
 * corner in five is hidden under a grey patch (v = 1, labelled but occluded) and one in
 * twenty is unlabelled (v = 0). Image i depends only on (seed, i). */
#include "brisk/data.h"
#include "data/bytes.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { SIDE = 64, KP = 4, CATS = 3 };
enum { S_SHAPE = 0x53485045u /* "SHPE" */, S_NOISE = 0x4e4f4953u /* "NOIS" */ };

/* 4 uniforms in (0, 1] for draw block b of image i. */
static void uniforms(uint64_t seed, uint64_t i, uint32_t b, float u[4]) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), S_SHAPE, b};
    uint32_t w[4];
    brisk_philox4x32(ctr, key, w);
    for (int k = 0; k < 4; k++) u[k] = brisk_u32_to_unit(w[k]);
}

/* One image into px [SIDE, SIDE, 3]; its category and keypoints (x, y, v). */
static void draw_image(uint64_t seed, uint64_t i, uint8_t *px, int *cat, float kp[KP][3]) {
    float u[4], g[4], c[4], o[4];
    uniforms(seed, i, 0, u);
    uniforms(seed, i, 1, g);
    uniforms(seed, i, 2, c);
    uniforms(seed, i, 3, o);
    *cat = (int)(u[0] * CATS) % CATS;
    float cx = 22 + 20 * u[1], cy = 22 + 20 * u[2], b = 8 + 10 * u[3];
    float a = 8 + 10 * g[0];
    float at = *cat == 1 ? a * 0.5f : a, ab = *cat == 2 ? a * 0.5f : a; /* half-widths top and bottom */
    float bg0[3] = {40 + 80 * g[1], 40 + 80 * g[2], 40 + 80 * g[3]};
    float fg[3] = {120 + 130 * c[0], 255 - 200 * c[1], 60 + 190 * c[2]};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x += 4) {
            const uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), S_NOISE, (uint32_t)(y * SIDE + x)};
            uint32_t w[4];
            brisk_philox4x32(ctr, key, w);
            for (int k = 0; k < 4; k++) {
                float px_x = x + k + 0.5f, px_y = y + 0.5f, t = (px_y - (cy - b)) / (2 * b);
                float hw = at + (ab - at) * t;
                int in = t >= 0 && t <= 1 && fabsf(px_x - cx) <= hw;
                for (int ch = 0; ch < 3; ch++) {
                    float v = in ? fg[ch] : bg0[ch] + 0.5f * (float)(x + k + y);
                    v += (float)((w[k] >> (8 * ch)) & 31) - 16.0f;
                    px[((size_t)y * SIDE + x + k) * 3 + ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
        }
    const float corners[KP][2] = {{cx - at, cy - b}, {cx + at, cy - b}, {cx + ab, cy + b}, {cx - ab, cy + b}};
    for (int k = 0; k < KP; k++) kp[k][0] = corners[k][0], kp[k][1] = corners[k][1], kp[k][2] = 2;
    if (o[0] <= 0.2f) { /* occlude one corner under a grey patch */
        int k = (int)(o[1] * KP) % KP;
        kp[k][2] = 1;
        int x0 = (int)kp[k][0] - 4, y0 = (int)kp[k][1] - 4;
        for (int y = y0; y < y0 + 8; y++)
            for (int x = x0; x < x0 + 8; x++)
                if (x >= 0 && x < SIDE && y >= 0 && y < SIDE) memset(px + ((size_t)y * SIDE + x) * 3, 128, 3);
    }
    if (o[2] <= 0.05f) { /* one corner left unlabelled */
        int k = (int)(o[3] * KP) % KP;
        kp[k][0] = kp[k][1] = kp[k][2] = 0;
    }
}

brisk_status brisk_synth_images(const char *dir, int64_t n, uint64_t seed, brisk_error *err) {
    if (n < 1 || n > 10000000)
        return brisk_errorf(err, BRISK_ERR_INVALID, "synth images: %lld images; expected 1 to 10000000", (long long)n);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create the folder: %s", dir, strerror(errno));
    uint8_t *px = malloc(SIDE * SIDE * 3);
    char *csv = malloc(256 * (size_t)n + 256);
    if (!px || !csv) {
        free(px), free(csv);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "synth images: out of memory");
    }
    size_t len = (size_t)sprintf(csv, "file,category");
    for (int k = 0; k < KP; k++) len += (size_t)sprintf(csv + len, ",x%d,y%d,v%d", k, k, k);
    csv[len++] = '\n';
    brisk_status st = BRISK_OK;
    char path[1200];
    for (int64_t i = 0; i < n && !st; i++) {
        int cat;
        float kp[KP][3];
        draw_image(seed, (uint64_t)i, px, &cat, kp);
        char name[32];
        snprintf(name, sizeof name, "img_%06lld.png", (long long)i);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        st = brisk_png_write(path, px, SIDE, SIDE, 3, err);
        len += (size_t)sprintf(csv + len, "%s,%d", name, cat);
        for (int k = 0; k < KP; k++)
            len += (size_t)sprintf(csv + len, ",%.3f,%.3f,%d", (double)kp[k][0], (double)kp[k][1], (int)kp[k][2]);
        csv[len++] = '\n';
    }
    if (!st) {
        snprintf(path, sizeof path, "%s/labels.csv", dir);
        brisk_out o;
        if (!(st = brisk_out_open(&o, path, err))) {
            brisk_out_write(&o, csv, len);
            st = brisk_out_commit(&o, err);
        }
    }
    free(px);
    free(csv);
    return st;
}
