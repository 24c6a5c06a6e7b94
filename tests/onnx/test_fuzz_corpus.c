/* Replays the ONNX fuzz seed corpora (tests/fuzz/corpus/onnx: the reader; onnx_import: the
 * importer) through the fuzz targets' own code in every ordinary build, so inputs that once
 * crashed stay covered by ctest, sanitizer builds included, without clang or libFuzzer. */
#include <stdint.h>

#include "fuzz/replay.h"
#include "test.h"

#define LLVMFuzzerTestOneInput fuzz_onnx_one
#include "fuzz/fuzz_onnx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_onnx_import_one
#include "fuzz/fuzz_onnx_import.c"
#undef LLVMFuzzerTestOneInput

static void test_onnx_corpus(void) { CHECK(fuzz_replay("onnx", fuzz_onnx_one) > 0); }
static void test_onnx_import_corpus(void) { CHECK(fuzz_replay("onnx_import", fuzz_onnx_import_one) > 0); }

TEST_MAIN(T(test_onnx_corpus), T(test_onnx_import_corpus))
