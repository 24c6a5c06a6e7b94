/* Image decoding: PNG and JPEG round trips, the conversions brisk makes (palette, alpha,
 * gray by option) and refuses (16-bit, CMYK, gray without the option), every truncation
 * and a corrupted byte of each format as an error naming the file (never a crash), and
 * the pixel limit checked before allocating; EXIF orientation in Pillow's files. BRISK_WRITE_IMAGE_CORPUS=DIR also writes the
 * fuzz seed corpus (tests/fuzz/corpus/image) from the same encoders. */
#include <math.h>

#include "brisk/data.h"
#include "data_test_util.h"
#include "image_test_util.h"
#include "test.h"

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static uint8_t *picture(int w, int h, int ch) {
    uint8_t *p = malloc((size_t)w * h * ch);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < ch; c++) p[((size_t)y * w + x) * ch + c] = test_pixel(x, y, c);
    return p;
}

/* Every truncation of buf decodes to an error naming `name` (or, for a file whose tail
 * holds no pixels, to the full image). */
static void truncations(const uint8_t *buf, size_t len, const char *name, const char *format) {
    int errors = 0;
    for (size_t n = 0; n < len; n++) {
        brisk_error err = {0};
        brisk_image im;
        brisk_status st = brisk_image_decode(buf, n, name, NULL, &im, &err);
        if (st) {
            errors++;
            if (!strstr(err.msg, name)) CHECKF(0, "truncated at %zu: '%s' does not name the file", n, err.msg);
        } else brisk_image_free(&im);
    }
    CHECKF(errors >= (int)len - 16, "%s: only %d of %zu truncations were errors", format, errors, len);
}

static void test_png_roundtrip(void) {
#ifdef BRISK_HAVE_PNG
    brisk_error err;
    char p[1200];
    uint8_t *px = picture(13, 7, 3);
    REQUIRE_OK(brisk_png_write(tpath(p, sizeof p, "rt.png"), px, 13, 7, 3, &err), &err);
    brisk_image im;
    REQUIRE_OK(brisk_image_read(p, NULL, &im, &err), &err);
    CHECK(im.width == 13 && im.height == 7 && im.channels == 3 && memcmp(im.data, px, 13 * 7 * 3) == 0);
    brisk_image_free(&im);
    size_t len;
    uint8_t *file = read_file(p, &len);
    int w, h;
    REQUIRE_OK(brisk_image_info(file, len, "rt.png", NULL, &w, &h, &err), &err);
    CHECK(w == 13 && h == 7 && brisk_image_sniff(file, len) == BRISK_IMAGE_PNG);
    truncations(file, len, "rt.png", "png");
    /* a flipped byte in the pixel data: libpng's CRC check */
    file[len - 20] ^= 0x40;
    CHECK(brisk_image_decode(file, len, "bad.png", NULL, &im, &err) == BRISK_ERR_FORMAT && has(&err, "bad.png") &&
          has(&err, "corrupt or truncated PNG"));
    free(file);
    free(px);
#else
    brisk_error err;
    CHECK(brisk_png_write("/tmp/x.png", (const uint8_t *)"abc", 1, 1, 3, &err) == BRISK_ERR_UNSUPPORTED &&
          has(&err, "without libpng"));
#endif
}

static void test_png_conversions(void) {
#ifdef BRISK_HAVE_PNG
    brisk_error err;
    brisk_image im;
    size_t len;
    /* gray: refused, replicated by option, kept by option */
    uint8_t *g = picture(5, 4, 1);
    uint8_t *buf = png_encode(g, 5, 4, PNG_FORMAT_GRAY, &len);
    REQUIRE(buf);
    CHECK(brisk_image_decode(buf, len, "g.png", NULL, &im, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "g.png") &&
          has(&err, "grayscale") && has(&err, "gray_to_rgb"));
    brisk_image_options o = {.gray_to_rgb = 1};
    REQUIRE_OK(brisk_image_decode(buf, len, "g.png", &o, &im, &err), &err);
    int same = im.channels == 3;
    for (int i = 0; i < 20 && same; i++) same = im.data[3 * i] == g[i] && im.data[3 * i + 1] == g[i] && im.data[3 * i + 2] == g[i];
    CHECK(same);
    brisk_image_free(&im);
    o.keep_gray = 1;
    REQUIRE_OK(brisk_image_decode(buf, len, "g.png", &o, &im, &err), &err);
    CHECK(im.channels == 1 && memcmp(im.data, g, 20) == 0);
    brisk_image_free(&im);
    free(buf);
    /* 16-bit: refused */
    uint16_t w16[12];
    for (int i = 0; i < 12; i++) w16[i] = (uint16_t)(i * 5000);
    buf = png_encode(w16, 2, 2, PNG_FORMAT_LINEAR_RGB, &len);
    REQUIRE(buf);
    CHECK(brisk_image_decode(buf, len, "deep.png", NULL, &im, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "deep.png") &&
          has(&err, "16-bit"));
    free(buf);
    /* alpha: composited onto black (transparent -> 0, opaque -> the colour) */
    uint8_t rgba[8] = {200, 100, 50, 0, 200, 100, 50, 255};
    buf = png_encode(rgba, 2, 1, PNG_FORMAT_RGBA, &len);
    REQUIRE_OK(brisk_image_decode(buf, len, "a.png", NULL, &im, &err), &err);
    CHECK(im.channels == 3 && im.data[0] == 0 && im.data[1] == 0 && im.data[2] == 0 && im.data[3] == 200 &&
          im.data[4] == 100 && im.data[5] == 50);
    brisk_image_free(&im);
    /* the pixel limit, before allocating */
    brisk_image_options small = {.max_pixels = 1};
    CHECK(brisk_image_decode(buf, len, "a.png", &small, &im, &err) == BRISK_ERR_NOMEM && has(&err, "2 x 1 pixels") &&
          has(&err, "at most 1 pixels"));
    free(buf);
    free(g);
#endif
}

static void test_jpeg(void) {
#ifdef BRISK_HAVE_JPEG
    brisk_error err;
    brisk_image im;
    size_t len;
    for (int prog = 0; prog < 2; prog++) {
        uint8_t *px = picture(24, 16, 3);
        uint8_t *buf = jpeg_encode(px, 24, 16, 3, prog, &len);
        REQUIRE(buf);
        CHECK(brisk_image_sniff(buf, len) == BRISK_IMAGE_JPEG);
        REQUIRE_OK(brisk_image_decode(buf, len, "rt.jpg", NULL, &im, &err), &err);
        int worst = 0;
        for (int i = 0; i < 24 * 16 * 3; i++) worst = abs(im.data[i] - px[i]) > worst ? abs(im.data[i] - px[i]) : worst;
        CHECKF(im.width == 24 && im.height == 16 && worst <= 8, "JPEG round trip off by %d", worst);
        brisk_image_free(&im);
        truncations(buf, len, "rt.jpg", "jpeg");
        free(buf);
        free(px);
    }
    uint8_t *g = picture(8, 8, 1);
    uint8_t *buf = jpeg_encode(g, 8, 8, 1, 0, &len);
    CHECK(brisk_image_decode(buf, len, "g.jpg", NULL, &im, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "grayscale"));
    brisk_image_options o = {.gray_to_rgb = 1};
    REQUIRE_OK(brisk_image_decode(buf, len, "g.jpg", &o, &im, &err), &err);
    CHECK(im.channels == 3 && im.data[0] == im.data[1] && im.data[1] == im.data[2]);
    brisk_image_free(&im);
    free(buf);
    free(g);
    uint8_t *k = picture(8, 8, 4);
    buf = jpeg_encode(k, 8, 8, 4, 0, &len);
    CHECK(brisk_image_decode(buf, len, "k.jpg", NULL, &im, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "k.jpg") &&
          has(&err, "CMYK"));
    free(buf);
    free(k);
#endif
}

static void test_not_an_image(void) {
    brisk_error err;
    brisk_image im;
    CHECK(brisk_image_decode("hello", 5, "x.png", NULL, &im, &err) == BRISK_ERR_FORMAT && has(&err, "x.png") &&
          has(&err, "not a PNG or JPEG"));
    CHECK(brisk_image_decode("", 0, "e.png", NULL, &im, &err) == BRISK_ERR_FORMAT);
    CHECK(brisk_image_read(T_ABSENT "/a.png", NULL, &im, &err) == BRISK_ERR_IO && has(&err, T_ABSENT "/a.png"));
    /* a bare JPEG start-of-image marker: libjpeg's error_exit path */
    const uint8_t soi[4] = {0xFF, 0xD8, 0xFF, 0xD9};
    CHECK(brisk_image_decode(soi, 4, "soi.jpg", NULL, &im, &err) != BRISK_OK && has(&err, "soi.jpg"));
}

/* EXIF orientation, in files Pillow wrote (tests/data/fixtures/exif/make_exif.py): each of
 * the 8 orientations of a 7 x 5 picture as PNG (eXIf chunk) and JPEG (APP1) decodes to the
 * pixels Pillow's exif_transpose shows, sides swapped for 5 to 8 (the header-only size
 * too); raw_orientation gives the stored frame. On code that ignored the tag every case
 * but 1 differs. */
static void test_exif_orientation(void) {
#if defined(BRISK_HAVE_PNG) && defined(BRISK_HAVE_JPEG)
    const char *fmts[2] = {"png", "jpg"};
    char p[1200], name[64];
    for (int f = 0; f < 2; f++)
        for (int o = 1; o <= 8; o++) {
            brisk_error err;
            brisk_image got, want, raw;
            snprintf(name, sizeof name, "exif/o%d_%s_up.png", o, fmts[f]);
            REQUIRE_OK(brisk_image_read(fixture(p, sizeof p, name), NULL, &want, &err), &err);
            snprintf(name, sizeof name, "exif/o%d.%s", o, fmts[f]);
            REQUIRE_OK(brisk_image_read(fixture(p, sizeof p, name), NULL, &got, &err), &err);
            brisk_image_options keep = {.raw_orientation = 1};
            REQUIRE_OK(brisk_image_read(p, &keep, &raw, &err), &err);
            size_t n;
            uint8_t *bytes = read_file(p, &n);
            int w = 0, h = 0;
            REQUIRE_OK(brisk_image_info(bytes, n, name, NULL, &w, &h, &err), &err);
            int same = got.width == want.width && got.height == want.height &&
                       memcmp(got.data, want.data, (size_t)want.width * want.height * 3) == 0;
            CHECKF(same && w == want.width && h == want.height, "%s: decoded %d x %d (header %d x %d), Pillow shows "
                   "%d x %d%s", name, got.width, got.height, w, h, want.width, want.height, same ? "" : ", pixels differ");
            CHECKF(raw.width == 7 && raw.height == 5, "%s raw: %d x %d, stored 7 x 5", name, raw.width, raw.height);
            free(bytes);
            brisk_image_free(&got), brisk_image_free(&want), brisk_image_free(&raw);
        }
    /* A big-endian ("MM") TIFF body, as cameras write it, in a JPEG: orientation 8. */
    uint8_t *px = picture(3, 2, 3);
    size_t n;
    uint8_t *jpg = jpeg_encode(px, 3, 2, 3, 0, &n);
    static const uint8_t app1[] = {0xFF, 0xE1, 0, 34, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8,
                                   0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0};
    uint8_t *with = malloc(n + sizeof app1);
    memcpy(with, jpg, 2), memcpy(with + 2, app1, sizeof app1), memcpy(with + 2 + sizeof app1, jpg + 2, n - 2);
    int w = 0, h = 0;
    brisk_error err;
    CHECK(brisk_image_info(with, n + sizeof app1, "mm.jpg", NULL, &w, &h, &err) == BRISK_OK && w == 2 && h == 3);
    /* damaged tags (an IFD offset past the end, a wrong type) mean no orientation, never an error */
    for (int bad = 0; bad < 2; bad++) {
        memcpy(with + 2, app1, sizeof app1);
        with[2 + (bad ? 23 : 17)] = 0x7F;
        CHECK(brisk_image_info(with, n + sizeof app1, "bad.jpg", NULL, &w, &h, &err) == BRISK_OK && w == 3 && h == 2);
    }
    free(with), free(jpg), free(px);
#endif
}

/* The fuzz seed corpus, when asked: tiny valid files of each kind the decoder handles. */
static void test_write_corpus(void) {
    const char *dir = getenv("BRISK_WRITE_IMAGE_CORPUS");
    if (!dir) return;
    char p[1200];
    brisk_error err;
    uint8_t *px = picture(4, 3, 4);
    snprintf(p, sizeof p, "%s/rgb.png", dir);
    REQUIRE_OK(brisk_png_write(p, px, 4, 3, 3, &err), &err);
    snprintf(p, sizeof p, "%s/gray.png", dir);
    REQUIRE_OK(brisk_png_write(p, px, 4, 3, 1, &err), &err);
#if defined(BRISK_HAVE_PNG) && defined(BRISK_HAVE_JPEG)
    struct { const char *name; uint8_t *b; size_t n; } f[5];
    f[0].name = "rgba.png", f[0].b = png_encode(px, 4, 3, PNG_FORMAT_RGBA, &f[0].n);
    f[1].name = "rgb.jpg", f[1].b = jpeg_encode(px, 4, 3, 3, 0, &f[1].n);
    f[2].name = "progressive.jpg", f[2].b = jpeg_encode(px, 4, 3, 3, 1, &f[2].n);
    f[3].name = "gray.jpg", f[3].b = jpeg_encode(px, 4, 3, 1, 0, &f[3].n);
    f[4].name = "cmyk.jpg", f[4].b = jpeg_encode(px, 4, 3, 4, 0, &f[4].n);
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, f[i].name);
        CHECK(f[i].b && write_file(p, f[i].b, f[i].n) == 0);
        free(f[i].b);
    }
#endif
    free(px);
}

TEST_MAIN(T(test_png_roundtrip), T(test_png_conversions), T(test_jpeg), T(test_not_an_image), T(test_exif_orientation),
          T(test_write_corpus))
