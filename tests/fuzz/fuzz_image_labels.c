/* libFuzzer target: the image dataset's labels, CSV (file[,category][,x0,y0,v0,...]) and JSON
 * ({"images": [{"file", "category", "keypoints"}]}): both parsers on every input. */
#include "data/image_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_image_labels l;
    if (brisk_image_labels_parse((const char *)data, size, "fuzz.csv", &l, &err) == BRISK_OK) brisk_image_labels_free(&l);
    if (brisk_image_labels_parse_json((const char *)data, size, "fuzz.json", &l, &err) == BRISK_OK)
        brisk_image_labels_free(&l);
    return 0;
}
