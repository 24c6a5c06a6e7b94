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

#include "data_test_util.h"
#include "test.h"

static int replay(const char *target, int (*one)(const uint8_t *, size_t)) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", BRISK_SOURCE_DIR, target);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1500];
        size_t n;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint8_t *buf = read_file(path, &n);
        if (!buf) continue;
        /* An exact-size copy, so a sanitizer build catches a read one past the end. */
        uint8_t *exact = malloc(n ? n : 1);
        memcpy(exact, buf, n);
        one(exact, n);
        free(exact);
        free(buf);
        files++;
    }
    closedir(d);
    return files;
}

static void test_replay(void) {
    int a = replay("npy", fuzz_npy_one), b = replay("npz", fuzz_npz_one), c = replay("csv", fuzz_csv_one);
    printf("replayed %d npy, %d npz, %d csv corpus files\n", a, b, c);
    CHECK(a > 0 && b > 0 && c > 0);
}

TEST_MAIN(T(test_replay))
