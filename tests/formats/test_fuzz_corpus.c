/* Replays the fuzz seed corpora (tests/fuzz/corpus/{json,safetensors}) through the
 * fuzz targets' own code in every ordinary build, so inputs that once crashed stay
 * covered by ctest, sanitizer builds included, without clang or libFuzzer. */
#include <dirent.h>
#include <stdint.h>

#include "fuzz/replay.h"
#include "test.h"

#define LLVMFuzzerTestOneInput fuzz_json_one
#include "fuzz/fuzz_json.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput

static void test_json_corpus(void) { CHECK(fuzz_replay("json", fuzz_json_one) > 0); }
static void test_safetensors_corpus(void) { CHECK(fuzz_replay("safetensors", fuzz_safetensors_one) > 0); }

TEST_MAIN(T(test_json_corpus), T(test_safetensors_corpus))
