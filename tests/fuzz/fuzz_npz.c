/* libFuzzer target: brisk_npz_parse (zip directory, ZIP64, inflate, CRC, NPY members). */
#include "brisk/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_npz z;
    if (brisk_npz_parse(data, size, "fuzz.npz", &z, &err) == BRISK_OK) {
        for (int i = 0; i < z.count; i++) {
            brisk_tensor t;
            if (brisk_npy_to_tensor(&z.members[i].array, BRISK_F32, z.members[i].name, &t, &err) == BRISK_OK)
                brisk_tensor_free(&t);
        }
        brisk_npz_free(&z);
    }
    return 0;
}
