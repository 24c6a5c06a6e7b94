/* libFuzzer target: brisk_csv_parse, all columns as f32 and as i32, and two columns
 * selected by name (the first two header cells, when the input has them). */
#include "brisk/data.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_tensor t;
    if (brisk_csv_parse(data, size, "fuzz.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_OK) brisk_tensor_free(&t);
    if (brisk_csv_parse(data, size, "fuzz.csv", NULL, 0, BRISK_I32, &t, &err) == BRISK_OK) brisk_tensor_free(&t);
    const char *cols[2] = {"a", "b"};
    if (brisk_csv_parse(data, size, "fuzz.csv", cols, 2, BRISK_F32, &t, &err) == BRISK_OK) brisk_tensor_free(&t);
    return 0;
}
