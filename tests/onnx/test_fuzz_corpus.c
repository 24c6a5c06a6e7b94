/* Replays the ONNX fuzz seed corpus (tests/fuzz/corpus/onnx) through the fuzz target's own
 * code in every ordinary build, so inputs that once crashed stay covered by ctest, sanitizer
 * builds included, without clang or libFuzzer. */
#include <stdint.h>

#include "fuzz/replay.h"
#include "test.h"

#define LLVMFuzzerTestOneInput fuzz_onnx_one
#include "fuzz/fuzz_onnx.c"
#undef LLVMFuzzerTestOneInput

static void test_onnx_corpus(void) { CHECK(fuzz_replay("onnx", fuzz_onnx_one) > 0); }

TEST_MAIN(T(test_onnx_corpus))
