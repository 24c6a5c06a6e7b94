/* Sessions take graph models: a graph of one f32 input, one target and one output trains on
 * pushed rows and predicts rows (a sample of any shape as its values in C order), and an MLP
 * written as a graph trains and predicts bit for bit as the built-in mlp does; a graph that a
 * row cannot feed is refused at create, naming what sessions take. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"
#include "test.h"

#define IN 16
#define N 256

static const char *common = "\"optim\": {\"type\": \"adamw\", \"lr\": 0.003}, \"train\": {\"batch_size\": 32, \"seed\": 3},"
                            " \"data\": {\"buffer\": {\"capacity\": 1024}}, \"speed\": {\"threads\": 2, \"prefetch\": 0}}";

static void rows(float *x, int32_t *y) {
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < IN; j++) s += (x[i * IN + j] = (float)sin(0.37 * i + 1.3 * j + 0.01 * i * j));
        y[i] = s > 0.8 ? 2 : s > -0.8 ? 1 : 0;
    }
}

static brisk_session *make(const char *model) {
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "{\"model\": %s, %s", model, common);
    brisk_session *s = NULL;
    brisk_status st = brisk_session_create(cfg, NULL, NULL, &s);
    CHECKF(st == BRISK_OK, "%s", brisk_session_error(s));
    return st == BRISK_OK ? s : (brisk_session_destroy(s), NULL);
}

/* train 30 steps on the rows, then predict them; labels pushed as floats (class numbers) */
static int train_predict(brisk_session *s, const float *x, const int32_t *y, float *out) {
    float *yf = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) yf[i] = (float)y[i];
    int ok = brisk_session_push(s, N, x, 0, yf, 0) == BRISK_OK && brisk_session_train_steps(s, 30) == BRISK_OK &&
             brisk_session_predict(s, N, x, 0, out, 0) == BRISK_OK;
    if (!ok) fprintf(stderr, "%s\n", brisk_session_error(s));
    free(yf);
    return ok;
}

static void test_graph_equals_mlp(void) {
    float *x = malloc(sizeof(float) * N * IN), *a = malloc(sizeof(float) * N * 3), *b = malloc(sizeof(float) * N * 3);
    int32_t *y = malloc(sizeof(int32_t) * N);
    rows(x, y);
    brisk_session *m = make("{\"type\": \"mlp\", \"inputs\": 16, \"hidden\": [32], \"outputs\": 3}");
    brisk_session *g = make("{\"type\": \"graph\", \"inputs\": [{\"name\": \"x\", \"shape\": [16]}, "
                            "{\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}], \"layers\": ["
                            "{\"name\": \"net.0\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 32},"
                            "{\"name\": \"net.1\", \"op\": \"relu\", \"inputs\": [\"net.0\"]},"
                            "{\"name\": \"net.2\", \"op\": \"linear\", \"inputs\": [\"net.1\"], \"out\": 3}],"
                            "\"outputs\": [\"net.2\"], \"losses\": [{\"output\": \"net.2\", \"target\": \"y\", "
                            "\"type\": \"cross_entropy\"}]}");
    REQUIRE(m && g);
    double w = 0;
    CHECK(brisk_session_query(g, "output_width", &w) == BRISK_OK && w == 3);
    REQUIRE(train_predict(m, x, y, a) && train_predict(g, x, y, b));
    int64_t first = -1, right = 0;
    for (int i = 0; i < N * 3 && first < 0; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) first = i;
    CHECKF(first < 0, "value %lld: mlp %.9g, graph %.9g", (long long)first, first >= 0 ? a[first] : 0.0,
           first >= 0 ? b[first] : 0.0);
    for (int i = 0; i < N; i++) {
        int k = b[3 * i + 1] > b[3 * i] ? 1 : 0;
        if (b[3 * i + 2] > b[3 * i + k]) k = 2;
        right += k == y[i];
    }
    CHECKF(right > N / 2, "%lld of %d right after 30 steps", (long long)right, N);
    brisk_session_destroy(m);
    brisk_session_destroy(g);
    free(x), free(y), free(a), free(b);
}

/* an input of shape [2, 8] (a row of 16 values, C order) through permute and reshape */
static void test_shaped_input(void) {
    float *x = malloc(sizeof(float) * N * IN), *out = malloc(sizeof(float) * N * 3);
    int32_t *y = malloc(sizeof(int32_t) * N);
    rows(x, y);
    brisk_session *g = make("{\"type\": \"graph\", \"inputs\": [{\"name\": \"x\", \"shape\": [2, 8]}, "
                            "{\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}], \"layers\": ["
                            "{\"name\": \"t\", \"op\": \"permute\", \"inputs\": [\"x\"], \"dims\": [2, 1]},"
                            "{\"name\": \"f\", \"op\": \"flatten\", \"inputs\": [\"t\"]},"
                            "{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"f\"], \"out\": 3}],"
                            "\"outputs\": [\"h\"], \"losses\": [{\"output\": \"h\", \"target\": \"y\", "
                            "\"type\": \"cross_entropy\"}]}");
    REQUIRE(g);
    double w = 0;
    CHECK(brisk_session_query(g, "input_width", &w) == BRISK_OK && w == 16);
    CHECK(train_predict(g, x, y, out));
    for (int i = 0; i < N; i++) /* probabilities */
        CHECKF(fabsf(out[3 * i] + out[3 * i + 1] + out[3 * i + 2] - 1) < 1e-5f, "row %d", i);
    brisk_session_destroy(g);
    free(x), free(y), free(out);
}

static void test_two_inputs_refused(void) {
    brisk_session *s = NULL;
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"model\": {\"type\": \"graph\", \"inputs\": [{\"name\": \"a\", \"shape\": [4]}, "
             "{\"name\": \"b\", \"shape\": [4]}, {\"name\": \"y\", \"shape\": [4]}], \"layers\": ["
             "{\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]}], \"outputs\": [\"s\"], \"losses\": "
             "[{\"output\": \"s\", \"target\": \"y\", \"type\": \"mse\"}]}, %s", common);
    CHECK(brisk_session_create(cfg, NULL, NULL, &s) == BRISK_ERR_UNSUPPORTED);
    CHECKF(strstr(brisk_session_error(s), "one f32 input, one target and one output"), "%s", brisk_session_error(s));
    brisk_session_destroy(s);
}

TEST_MAIN(T(test_graph_equals_mlp), T(test_shaped_input), T(test_two_inputs_refused))
