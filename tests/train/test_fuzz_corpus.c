/* Replays the seed corpora of the config, checkpoint and metrics fuzz targets
 * (tests/fuzz/corpus/{config,checkpoint,metrics}) through the targets' own code in every ordinary
 * build, so inputs that once crashed stay covered by ctest, sanitizer builds included,
 * without clang or libFuzzer. */
#include <dirent.h>
#include <stdint.h>

#include "fuzz/replay.h"
#include "test.h"

#define LLVMFuzzerTestOneInput fuzz_config_one
#include "fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_checkpoint_one
#include "fuzz/fuzz_checkpoint.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_metrics_one
#include "fuzz/fuzz_metrics.c"
#undef LLVMFuzzerTestOneInput

static void test_config_corpus(void) { CHECK(fuzz_replay("config", fuzz_config_one) >= 5); }
static void test_checkpoint_corpus(void) { CHECK(fuzz_replay("checkpoint", fuzz_checkpoint_one) >= 3); }
static void test_metrics_corpus(void) { CHECK(fuzz_replay("metrics", fuzz_metrics_one) >= 4); }

/* The seed checkpoints are intact, so the harness reaches the tensor reading with them. */
static void test_seed_checkpoints_verify(void) {
    const char *names[] = {"mlp", "reg", "diff"};
    for (int i = 0; i < 3; i++) {
        char path[512];
        brisk_error err = {0};
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/checkpoint/%s.safetensors", BRISK_SOURCE_DIR, names[i]);
        CHECKF(brisk_checkpoint_check(path, NULL, &err) == BRISK_OK, "%s", err.msg);
    }
}

TEST_MAIN(T(test_config_corpus), T(test_checkpoint_corpus), T(test_metrics_corpus), T(test_seed_checkpoints_verify))
