/* Helpers for the image tests: encoders for what brisk itself never writes (JPEG in RGB,
 * gray and CMYK; 16-bit and RGBA PNG), through the same libraries, and a PNG of given
 * pixels. Built only when the libraries are found (tests/data/images.cmake). */
#ifndef BRISK_IMAGE_TEST_UTIL_H
#define BRISK_IMAGE_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BRISK_HAVE_PNG
#include <png.h>
/* format: a PNG_FORMAT_* of the simplified API; pixels in that layout. Returns malloc'd bytes. */
static inline uint8_t *png_encode(const void *pixels, int w, int h, unsigned format, size_t *len) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = format;
    png_alloc_size_t n = 0;
    if (!png_image_write_to_memory(&im, NULL, &n, 0, pixels, 0, NULL)) return NULL;
    uint8_t *b = malloc(n);
    if (b && !png_image_write_to_memory(&im, b, &n, 0, pixels, 0, NULL)) { free(b); return NULL; }
    *len = n;
    return b;
}
#endif

#ifdef BRISK_HAVE_JPEG
#include <jpeglib.h>
/* components 1 (gray), 3 (RGB) or 4 (CMYK); progressive when asked. Returns malloc'd bytes. */
static inline uint8_t *jpeg_encode(const uint8_t *px, int w, int h, int components, int progressive, size_t *len) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *mem = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &mem, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = components;
    c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW r = (JSAMPROW)(px + (size_t)c.next_scanline * w * components);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    uint8_t *b = malloc(n);
    if (b) memcpy(b, mem, n);
    free(mem);
    *len = n;
    return b;
}
#endif

/* A smooth test picture: channel c of pixel (x, y). */
static inline uint8_t test_pixel(int x, int y, int c) { return (uint8_t)(20 + 3 * x + 2 * y + 40 * c); }

#endif
