/* The CUDA backend's options that need no GPU (they run in every build): the
 * BRISK_CUDA_REFUSE_EPILOGUES list that forces the epilogue fallbacks, good and bad. */
#include "brisk/cuda.h"
#include "test.h"

static void test_refuse_list(void) {
    brisk_error err = {0};
    unsigned m = 99;
    CHECK(brisk_cuda_parse_refused_epilogues(NULL, &m, &err) == BRISK_OK && m == 0);
    CHECK(brisk_cuda_parse_refused_epilogues("", &m, &err) == BRISK_OK && m == 0);
    CHECK(brisk_cuda_parse_refused_epilogues("none", &m, &err) == BRISK_OK && m == 0);
    CHECK(brisk_cuda_parse_refused_epilogues("all", &m, &err) == BRISK_OK && m == BRISK_CUDA_EPI_ALL);
    CHECK(brisk_cuda_parse_refused_epilogues("bias,dgelu_bgrad", &m, &err) == BRISK_OK &&
          m == (BRISK_CUDA_EPI_BIAS | BRISK_CUDA_EPI_DGELU_BGRAD));
    CHECK(brisk_cuda_parse_refused_epilogues("relu_bias,gelu_aux_bias,", &m, &err) == BRISK_OK &&
          m == (BRISK_CUDA_EPI_RELU_BIAS | BRISK_CUDA_EPI_GELU_AUX_BIAS));
    const char *bad[] = {"relu", "bias,,gelu", "ALL", "bias, relu_bias", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = 99;
        brisk_status s = brisk_cuda_parse_refused_epilogues(bad[i], &m, &err);
        if (strcmp(bad[i], "bias,,gelu") == 0) {
            CHECKF(s == BRISK_ERR_INVALID && strstr(err.msg, "\"gelu\""), "%s: %s", bad[i], err.msg);
            continue;
        }
        CHECKF(s == BRISK_ERR_INVALID && m == 0 && strstr(err.msg, BRISK_CUDA_REFUSE_ENV), "%s: %s", bad[i], err.msg);
    }
}

/* A backend is refused with that error when the variable is bad, GPU or not. */
static void test_bad_env_refuses_the_backend(void) {
    setenv(BRISK_CUDA_REFUSE_ENV, "bogus", 1);
    brisk_cuda_info info;
    brisk_cuda_probe(0, &info);
    brisk_backend *be = NULL;
    brisk_error err = {0};
    brisk_status s = brisk_backend_cuda_create(NULL, &be, &err);
    CHECK(s != BRISK_OK && be == NULL);
    if (info.built) CHECKF(strstr(err.msg, BRISK_CUDA_REFUSE_ENV) && strstr(err.msg, "bogus"), "%s", err.msg);
    unsetenv(BRISK_CUDA_REFUSE_ENV);
}

TEST_MAIN(T(test_refuse_list), T(test_bad_env_refuses_the_backend))
