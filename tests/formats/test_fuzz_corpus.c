/* Replays the fuzz seed corpora (tests/fuzz/corpus/{json,safetensors}) through the
 * fuzz targets' own code in every ordinary build, so inputs that once crashed stay
 * covered by ctest, sanitizer builds included, without clang or libFuzzer. */
#include <dirent.h>
#include <stdint.h>

#include "test.h"

#define LLVMFuzzerTestOneInput fuzz_json_one
#include "fuzz/fuzz_json.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput

/* Feeds every file of corpus/<name> to fn; returns how many. */
static int replay(const char *name, int (*fn)(const uint8_t *, size_t)) {
    char dirpath[512], path[1024];
    snprintf(dirpath, sizeof dirpath, "%s/tests/fuzz/corpus/%s", BRISK_SOURCE_DIR, name);
    DIR *d = opendir(dirpath);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dirpath, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        uint8_t *buf = malloc(1 << 20);
        size_t len = fread(buf, 1, 1 << 20, f);
        fclose(f);
        fn(buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

static void test_json_corpus(void) { CHECK(replay("json", fuzz_json_one) > 0); }
static void test_safetensors_corpus(void) { CHECK(replay("safetensors", fuzz_safetensors_one) > 0); }

TEST_MAIN(T(test_json_corpus), T(test_safetensors_corpus))
