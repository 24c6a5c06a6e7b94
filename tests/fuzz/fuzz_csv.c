/* libFuzzer target: brisk_csv_parse, all columns as f32 and as i32, two columns selected by
 * name, and the dataset loader's header read and column-range expansion. */
#include "brisk/data.h"
#include "data/csv_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brisk_error err;
    brisk_tensor t;
    if (brisk_csv_parse(data, size, "fuzz.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_OK) brisk_tensor_free(&t);
    if (brisk_csv_parse(data, size, "fuzz.csv", NULL, 0, BRISK_I32, &t, &err) == BRISK_OK) brisk_tensor_free(&t);
    const char *cols[2] = {"a", "b"};
    if (brisk_csv_parse(data, size, "fuzz.csv", cols, 2, BRISK_F32, &t, &err) == BRISK_OK) brisk_tensor_free(&t);
    char **header = NULL;
    int nh = 0;
    if (brisk_csv_header(data, size, "fuzz.csv", &header, &nh, &err) == BRISK_OK) {
        const char *sel[3] = {"a:b", "a", "b:a"}, **out = NULL;
        int nout = 0;
        if (brisk_csv_expand_columns(header, nh, "fuzz.csv", sel, 3, &out, &nout, &err) == BRISK_OK)
            for (int i = 0; i < nout; i++) (void)strlen(out[i]);
        free(out);
        free(header);
    }
    return 0;
}
