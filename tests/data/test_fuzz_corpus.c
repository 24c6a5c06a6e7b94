/* Replays every file under tests/fuzz/corpus/<target>/ through that fuzz target's own
 * entry point, so seeds and saved crashers run in every ctest (and sanitizer) build,
 * not only in a clang fuzzing build. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LLVMFuzzerTestOneInput fuzz_npy_one
#include "fuzz/fuzz_npy.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_npz_one
#include "fuzz/fuzz_npz.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_csv_one
#include "fuzz/fuzz_csv.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_image_one
#include "fuzz/fuzz_image.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_image_labels_one
#include "fuzz/fuzz_image_labels.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_netcdf_one
#include "fuzz/fuzz_netcdf.c"
#undef LLVMFuzzerTestOneInput

#include "data_test_util.h"
#include "fuzz/replay.h"
#include "test.h"

static void test_replay(void) {
    int a = fuzz_replay("npy", fuzz_npy_one), b = fuzz_replay("npz", fuzz_npz_one), c = fuzz_replay("csv", fuzz_csv_one);
    int d = fuzz_replay("image", fuzz_image_one), e = fuzz_replay("image_labels", fuzz_image_labels_one);
    int f = fuzz_replay("netcdf", fuzz_netcdf_one);
    printf("replayed %d npy, %d npz, %d csv, %d image, %d image_labels, %d netcdf corpus files\n", a, b, c, d, e, f);
    CHECK(a > 0 && b > 0 && c > 0 && d > 0 && e > 0 && f > 0);
}

TEST_MAIN(T(test_replay))
