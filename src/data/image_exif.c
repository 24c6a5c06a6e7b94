/* EXIF orientation (tag 0x0112) of a JPEG (its APP1 "Exif" segment) or a PNG (its eXIf
 * chunk), read from the file's bytes by hand: libjpeg keeps markers only when asked and
 * libpng's simplified API does not expose eXIf at all. Phones store the sensor's frame
 * and say in this tag how to turn it; viewers and labelling tools show the turned image,
 * so the labels drawn on it are in that frame, and brisk turns the pixels to match.
 * Everything read is bounded by the buffer: a damaged tag means "no orientation" (1),
 * never an error, as viewers treat it. */
#include "data/image_internal.h"

#include <stdlib.h>
#include <string.h>

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t rd16(const uint8_t *p, int le) { return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] << 8 | p[1]; }
static uint32_t rd32(const uint8_t *p, int le) { return le ? rd16(p, 1) | rd16(p + 2, 1) << 16 : rd16(p, 0) << 16 | rd16(p + 2, 0); }

/* The orientation in a TIFF structure (EXIF's body): IFD0's tag 0x0112, a SHORT. */
static int tiff_orientation(const uint8_t *t, size_t n) {
    if (n < 8) return 1;
    int le = t[0] == 'I' && t[1] == 'I';
    if (!le && !(t[0] == 'M' && t[1] == 'M')) return 1;
    if (rd16(t + 2, le) != 42) return 1;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd > n - 2) return 1;
    uint32_t count = rd16(t + ifd, le);
    for (uint32_t i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + 12 * (size_t)i;
        if (e + 12 > n) break;
        if (rd16(t + e, le) != 0x0112) continue;
        uint32_t v = rd16(t + e + 8, le);
        return rd16(t + e + 2, le) == 3 && rd32(t + e + 4, le) >= 1 && v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

/* JPEG: segments from SOI up to the scan; APP1 holding "Exif\0\0" then TIFF. */
static int jpeg_orientation(const uint8_t *b, size_t n) {
    size_t p = 2;
    while (p + 4 <= n) {
        if (b[p] != 0xFF) return 1;
        uint8_t m = b[p + 1];
        if (m == 0xFF) { p++; continue; } /* fill byte */
        if (m == 0xD9 || m == 0xDA) return 1; /* end of image, start of scan: no EXIF before the pixels */
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { p += 2; continue; } /* markers without a length */
        size_t len = rd16(b + p + 2, 0);
        if (len < 2 || len > n - p - 2) return 1;
        if (m == 0xE1 && len >= 8 + 6 && memcmp(b + p + 4, "Exif\0\0", 6) == 0)
            return tiff_orientation(b + p + 10, len - 8);
        p += 2 + len;
    }
    return 1;
}

/* PNG: chunks (length, type, data, CRC) after the signature, up to IEND. */
static int png_orientation(const uint8_t *b, size_t n) {
    size_t p = 8;
    while (p + 12 <= n) {
        size_t len = be32(b + p);
        if (len > n - p - 12) return 1;
        if (memcmp(b + p + 4, "eXIf", 4) == 0) return tiff_orientation(b + p + 8, len);
        if (memcmp(b + p + 4, "IEND", 4) == 0) return 1;
        p += 12 + len;
    }
    return 1;
}

int brisk_image_orientation(const void *buf, size_t len) {
    int fmt = brisk_image_sniff(buf, len);
    return fmt == BRISK_IMAGE_PNG ? png_orientation(buf, len) : fmt == BRISK_IMAGE_JPEG ? jpeg_orientation(buf, len) : 1;
}

brisk_status brisk_image_orient(brisk_image *im, int orientation, const char *name, brisk_error *err) {
    if (orientation < 2 || orientation > 8) return BRISK_OK;
    const int w = im->width, h = im->height, ch = im->channels;
    const int swap = orientation >= 5, dw = swap ? h : w, dh = swap ? w : h;
    uint8_t *out = malloc((size_t)w * h * ch);
    if (!out) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes to turn it upright", name,
                                  (size_t)w * h * ch);
    /* Displayed pixel (x, y) reads stored pixel (sx, sy): EXIF's eight cases (the stored
     * 0th row and column at the displayed top/bottom/left/right). */
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
            int sx, sy;
            switch (orientation) {
            case 2: sx = w - 1 - x, sy = y; break;
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;
            case 4: sx = x, sy = h - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = h - 1 - x; break;
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;
            default: sx = w - 1 - y, sy = x; break; /* 8 */
            }
            memcpy(out + ((size_t)y * dw + x) * ch, im->data + ((size_t)sy * w + sx) * ch, (size_t)ch);
        }
    free(im->data);
    im->data = out;
    im->width = dw, im->height = dh;
    return BRISK_OK;
}
