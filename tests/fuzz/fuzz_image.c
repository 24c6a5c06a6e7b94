/* libFuzzer target: PNG/JPEG decoding (brisk_image_info, then brisk_image_decode) of
 * arbitrary bytes, with gray conversion on so the gray paths are reached too, and the EXIF
 * orientation read and applied (the seeds exif_o5.png and exif_o6.jpg were written by
 * Pillow). The pixel limit keeps a header's claimed size from exhausting the fuzzer's
 * memory. */
#include "brisk/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_image_options o = {.gray_to_rgb = 1, .max_pixels = 1 << 20};
    int w, h;
    if (brisk_image_info(data, size, "fuzz.img", &o, &w, &h, &err) == BRISK_OK) {
        brisk_image im;
        if (brisk_image_decode(data, size, "fuzz.img", &o, &im, &err) == BRISK_OK) brisk_image_free(&im);
    }
    o.keep_gray = 1;
    brisk_image im;
    if (brisk_image_decode(data, size, "fuzz.img", &o, &im, &err) == BRISK_OK) brisk_image_free(&im);
    return 0;
}
