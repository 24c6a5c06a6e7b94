/* libFuzzer target: brisk_npy_parse on arbitrary bytes, then both conversions. */
#include "brisk/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_npy_array a;
    if (brisk_npy_parse(data, size, "fuzz.npy", &a, &err) == BRISK_OK) {
        brisk_tensor t;
        if (brisk_npy_to_tensor(&a, BRISK_F32, "fuzz.npy", &t, &err) == BRISK_OK) brisk_tensor_free(&t);
        if (brisk_npy_to_tensor(&a, BRISK_I32, "fuzz.npy", &t, &err) == BRISK_OK) brisk_tensor_free(&t);
        brisk_npy_free(&a);
    }
    return 0;
}
