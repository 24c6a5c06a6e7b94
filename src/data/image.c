/* Image decoding: PNG through libpng's simplified API (which catches libpng's own longjmp
 * inside libpng and returns 0 with a message, so no jump ever crosses a brisk frame) and
 * JPEG through libjpeg(-turbo) with an error manager whose error_exit longjmps back into
 * the one function that called setjmp (jpeg_run below; everything it must free after the
 * jump is reached through a pointer, never a local changed after setjmp). Warnings about
 * corrupt data, which libjpeg would otherwise decode past as grey, are errors too.
 * Dimensions are checked against max_pixels from the header, before pixel memory. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/image_internal.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef BRISK_HAVE_PNG
#include <png.h>
#endif
#ifdef BRISK_HAVE_JPEG
#include <jpeglib.h>
#endif

/* Each side at most this: JPEG's own limit is 65500, and libpng's row stride is an int. */
enum { MAX_SIDE = 65535 };

int brisk_image_sniff(const void *buf, size_t len) {
    const uint8_t *b = (const uint8_t *)buf;
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 8 && memcmp(b, png_sig, 8) == 0) return BRISK_IMAGE_PNG;
    if (len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return BRISK_IMAGE_JPEG;
    return 0;
}

void brisk_image_free(brisk_image *im) {
    if (!im) return;
    free(im->data);
    memset(im, 0, sizeof *im);
}

static brisk_status check_dims(const char *name, int64_t w, int64_t h, const brisk_image_options *o,
                               brisk_error *err) {
    int64_t maxp = o->max_pixels > 0 ? o->max_pixels : BRISK_IMAGE_MAX_PIXELS_DEFAULT;
    if (w < 1 || h < 1 || w > MAX_SIDE || h > MAX_SIDE || w * h > maxp)
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: image of %lld x %lld pixels; brisk reads images of at most "
                            "%lld pixels and %d pixels a side", name, (long long)w, (long long)h, (long long)maxp,
                            MAX_SIDE);
    return BRISK_OK;
}

static brisk_status gray_refused(const char *name, brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: grayscale image; expected RGB (set gray_to_rgb, "
                        "data.images.gray_to_rgb in a config, to replicate it to 3 channels)", name);
}

/* ---------------------------------------------------------------- PNG */

#ifdef BRISK_HAVE_PNG
static brisk_status png_run(const void *buf, size_t len, const char *name, const brisk_image_options *o,
                            brisk_image *out, int *w, int *h, brisk_error *err) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, buf, len)) {
        brisk_status st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: corrupt or truncated PNG (libpng: %s)", name,
                                       im.message[0] ? im.message : "unreadable header");
        png_image_free(&im);
        return st;
    }
    brisk_status st = BRISK_OK;
    int gray = !(im.format & PNG_FORMAT_FLAG_COLOR);
    if (im.format & PNG_FORMAT_FLAG_LINEAR)
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: 16-bit PNG; brisk reads 8-bit images (convert it, e.g. "
                          "with ImageMagick: convert IN -depth 8 OUT)", name);
    else if (gray && !o->gray_to_rgb && !o->keep_gray) st = gray_refused(name, err);
    else st = check_dims(name, im.width, im.height, o, err);
    if (st || !out) {
        *w = (int)im.width;
        *h = (int)im.height;
        png_image_free(&im);
        return st;
    }
    int ch = gray && o->keep_gray ? 1 : 3;
    im.format = ch == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    size_t bytes = (size_t)im.width * im.height * (size_t)ch;
    /* Zeroed: libpng composites alpha onto what the buffer holds, i.e. black. */
    uint8_t *px = calloc(bytes, 1);
    if (!px) {
        png_image_free(&im);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes for its pixels", name, bytes);
    }
    if (!png_image_finish_read(&im, NULL, px, (png_int_32)(im.width * (unsigned)ch), NULL)) {
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: corrupt or truncated PNG (libpng: %s)", name, im.message);
        png_image_free(&im);
        free(px);
        return st;
    }
    out->width = (int)im.width;
    out->height = (int)im.height;
    out->channels = ch;
    out->data = px;
    return BRISK_OK;
}
#endif

/* ---------------------------------------------------------------- JPEG */

#ifdef BRISK_HAVE_JPEG
typedef struct jpeg_job {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
    uint8_t *px;      /* freed after a jump */
} jpeg_job;

static void jpeg_fail(j_common_ptr c) {
    jpeg_job *j = (jpeg_job *)c->err;
    c->err->format_message(c, j->msg);
    longjmp(j->jump, 1);
}

/* Level -1 is a warning about corrupt data (a truncated file, a bad Huffman code): libjpeg
 * would go on and fill the rest with grey. brisk refuses the file instead. */
static void jpeg_message(j_common_ptr c, int level) {
    if (level < 0) jpeg_fail(c);
}

static void jpeg_quiet(j_common_ptr c) { (void)c; }

static brisk_status jpeg_run(const void *buf, size_t len, const char *name, const brisk_image_options *o,
                             brisk_image *out, int *w, int *h, brisk_error *err) {
    struct jpeg_decompress_struct cinfo;
    jpeg_job job;
    memset(&job, 0, sizeof job);
    cinfo.err = jpeg_std_error(&job.pub);
    job.pub.error_exit = jpeg_fail;
    job.pub.emit_message = jpeg_message;
    job.pub.output_message = jpeg_quiet;
    if (setjmp(job.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(job.px);
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: corrupt or truncated JPEG (libjpeg: %s)", name, job.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, (const unsigned char *)buf, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    *w = (int)cinfo.image_width;
    *h = (int)cinfo.image_height;
    brisk_status st = BRISK_OK;
    J_COLOR_SPACE cs = cinfo.jpeg_color_space;
    int gray = cs == JCS_GRAYSCALE;
    if (cs == JCS_CMYK || cs == JCS_YCCK)
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: CMYK JPEG; brisk reads RGB and grayscale JPEGs (converting "
                          "CMYK needs the file's colour profile: convert it to RGB first)", name);
    else if (cs != JCS_GRAYSCALE && cs != JCS_RGB && cs != JCS_YCbCr)
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: JPEG colour space %d; expected RGB, YCbCr or grayscale",
                          name, (int)cs);
    else if (gray && !o->gray_to_rgb && !o->keep_gray) st = gray_refused(name, err);
    else st = check_dims(name, cinfo.image_width, cinfo.image_height, o, err);
    if (st || !out) {
        jpeg_destroy_decompress(&cinfo);
        return st;
    }
    int ch = gray && o->keep_gray ? 1 : 3;
    cinfo.out_color_space = ch == 1 ? JCS_GRAYSCALE : JCS_RGB; /* libjpeg replicates gray to RGB */
    jpeg_start_decompress(&cinfo);
    size_t row = (size_t)cinfo.output_width * (size_t)ch, bytes = row * cinfo.output_height;
    if (cinfo.output_components != ch || !(job.px = malloc(bytes))) {
        jpeg_destroy_decompress(&cinfo);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %zu bytes for its pixels", name, bytes);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW r = job.px + (size_t)cinfo.output_scanline * row;
        jpeg_read_scanlines(&cinfo, &r, 1);
    }
    jpeg_finish_decompress(&cinfo);
    out->width = (int)cinfo.output_width;
    out->height = (int)cinfo.output_height;
    out->channels = ch;
    out->data = job.px;
    jpeg_destroy_decompress(&cinfo);
    return BRISK_OK;
}
#endif

/* ---------------------------------------------------------------- API */

static brisk_status decode(const void *buf, size_t len, const char *name, const brisk_image_options *o,
                           brisk_image *out, int *w, int *h, brisk_error *err) {
    int fmt = brisk_image_sniff(buf, len);
    if (fmt == BRISK_IMAGE_PNG) {
#ifdef BRISK_HAVE_PNG
        return png_run(buf, len, name, o, out, w, h, err);
#else
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: a PNG, but brisk was built without libpng (install "
                            "libpng-dev and rebuild)", name);
#endif
    }
    if (fmt == BRISK_IMAGE_JPEG) {
#ifdef BRISK_HAVE_JPEG
        return jpeg_run(buf, len, name, o, out, w, h, err);
#else
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: a JPEG, but brisk was built without libjpeg (install "
                            "libjpeg62-turbo-dev and rebuild)", name);
#endif
    }
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a PNG or JPEG file (%zu bytes; the first bytes are neither "
                        "signature)", name, len);
}

/* The pixels (or, with out NULL, the size) in the frame a viewer shows: EXIF orientation
 * applied unless raw_orientation (image_exif.c). */
static brisk_status run(const void *buf, size_t len, const char *name, const brisk_image_options *opt,
                        brisk_image *out, int *w, int *h, brisk_error *err) {
    brisk_image_options def = {0};
    const brisk_image_options *o = opt ? opt : &def;
    brisk_status st = decode(buf, len, name, o, out, w, h, err);
    int orientation = st || o->raw_orientation ? 1 : brisk_image_orientation(buf, len);
    if (orientation >= 5) {
        int t = *w;
        *w = *h, *h = t;
    }
    if (!st && out && (st = brisk_image_orient(out, orientation, name, err))) brisk_image_free(out);
    return st;
}

brisk_status brisk_image_info(const void *buf, size_t len, const char *name, const brisk_image_options *opt,
                              int *width, int *height, brisk_error *err) {
    int w = 0, h = 0;
    brisk_status st = run(buf, len, name, opt, NULL, &w, &h, err);
    if (width) *width = w;
    if (height) *height = h;
    return st;
}

brisk_status brisk_image_decode(const void *buf, size_t len, const char *name, const brisk_image_options *opt,
                                brisk_image *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    int w, h;
    return run(buf, len, name, opt, out, &w, &h, err);
}

brisk_status brisk_image_read(const char *path, const brisk_image_options *opt, brisk_image *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    brisk_file f;
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    st = brisk_image_decode(f.data, f.len, path, opt, out, err);
    brisk_file_release(&f);
    return st;
}

brisk_status brisk_png_write(const char *path, const uint8_t *pixels, int width, int height, int channels,
                             brisk_error *err) {
    if (width < 1 || height < 1 || width > MAX_SIDE || height > MAX_SIDE || (channels != 1 && channels != 3))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: cannot write a %d x %d x %d PNG; expected 1 or 3 channels "
                            "and sides of 1 to %d", path, width, height, channels, MAX_SIDE);
#ifdef BRISK_HAVE_PNG
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)width;
    im.height = (png_uint_32)height;
    im.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&im, NULL, &size, 0, pixels, width * channels, NULL))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: libpng cannot encode: %s", path, im.message);
    void *mem = malloc(size);
    if (!mem) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    if (!png_image_write_to_memory(&im, mem, &size, 0, pixels, width * channels, NULL)) {
        free(mem);
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: libpng cannot encode: %s", path, im.message);
    }
    brisk_out o;
    brisk_status st = brisk_out_open(&o, path, err);
    if (!st) {
        brisk_out_write(&o, mem, size);
        st = brisk_out_commit(&o, err);
    }
    free(mem);
    return st;
#else
    (void)pixels;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: brisk was built without libpng, which writing PNG needs "
                        "(install libpng-dev and rebuild)", path);
#endif
}
