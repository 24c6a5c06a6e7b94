/* Synthetic data: shapes, determinism from the seed, the structure each workload
 * relies on (coarse = block means of fine; labels learnable well above chance with
 * balanced classes), and the npz written for the examples. */
#include "brisk/data.h"
#include "data_test_util.h"
#include "test.h"

static void test_diffusion(void) {
    brisk_error err;
    brisk_dataset a, b, c;
    REQUIRE_OK(brisk_synth_make("diffusion", 64, 11, &a, &err), &err);
    REQUIRE_OK(brisk_synth_make("diffusion", 16, 11, &b, &err), &err);
    REQUIRE_OK(brisk_synth_make("diffusion", 16, 12, &c, &err), &err);
    const brisk_tensor *fine = brisk_dataset_get(&a, "fine"), *coarse = brisk_dataset_get(&a, "coarse");
    REQUIRE(fine && coarse);
    CHECK(fine->shape.d[0] == 64 && fine->shape.d[1] == 256 && coarse->shape.d[1] == 7);
    /* A sample depends on (seed, index) only. */
    CHECK(memcmp(fine->data, brisk_dataset_get(&b, "fine")->data, 16 * 256 * 4) == 0);
    CHECK(memcmp(fine->data, brisk_dataset_get(&c, "fine")->data, 16 * 256 * 4) != 0);
    const float *f = (const float *)fine->data, *k = (const float *)coarse->data;
    double rough = 0, var = 0, mean = 0;
    for (int s = 0; s < 64; s++) {
        for (int blk = 0; blk < 7; blk++) {
            int lo = blk * 256 / 7, hi = (blk + 1) * 256 / 7;
            double m = 0;
            for (int i = lo; i < hi; i++) m += f[s * 256 + i];
            CHECK_NEAR(k[s * 7 + blk], m / (hi - lo), 1e-5);
        }
        for (int i = 0; i < 256; i++) mean += f[s * 256 + i] / (64.0 * 256);
        for (int i = 1; i < 256; i++) rough += fabs(f[s * 256 + i] - f[s * 256 + i - 1]) / (64.0 * 255);
    }
    for (int i = 0; i < 64 * 256; i++) var += (f[i] - mean) * (f[i] - mean) / (64.0 * 256);
    /* Smooth at the large scale with visible small-scale structure: neighbours differ
     * by a fraction of the field's spread, but not by nothing. */
    CHECKF(var > 0.2 && rough > 0.02 && rough < 0.5 * sqrt(var), "var %.3f rough %.3f", var, rough);
    brisk_dataset_free(&a);
    brisk_dataset_free(&b);
    brisk_dataset_free(&c);
}

/* Softmax regression by plain gradient descent on half, accuracy on the other half. */
static double linear_accuracy(const float *x, const int32_t *y, int n) {
    double w[64 * 3] = {0}, bias[3] = {0};
    int half = n / 2;
    for (int epoch = 0; epoch < 30; epoch++) {
        double gw[64 * 3] = {0}, gb[3] = {0};
        for (int s = 0; s < half; s++) {
            double z[3], m = -1e30, sum = 0;
            for (int c = 0; c < 3; c++) {
                z[c] = bias[c];
                for (int i = 0; i < 64; i++) z[c] += w[i * 3 + c] * x[s * 64 + i];
                if (z[c] > m) m = z[c];
            }
            for (int c = 0; c < 3; c++) sum += (z[c] = exp(z[c] - m));
            for (int c = 0; c < 3; c++) {
                double g = z[c] / sum - (y[s] == c);
                gb[c] += g;
                for (int i = 0; i < 64; i++) gw[i * 3 + c] += g * x[s * 64 + i];
            }
        }
        for (int i = 0; i < 64 * 3; i++) w[i] -= 1.0 * gw[i] / half;
        for (int c = 0; c < 3; c++) bias[c] -= 1.0 * gb[c] / half;
    }
    int right = 0;
    for (int s = half; s < n; s++) {
        double best = -1e30;
        int arg = 0;
        for (int c = 0; c < 3; c++) {
            double z = bias[c];
            for (int i = 0; i < 64; i++) z += w[i * 3 + c] * x[s * 64 + i];
            if (z > best) { best = z; arg = c; }
        }
        right += arg == y[s];
    }
    return (double)right / (n - half);
}

static void test_tabular(void) {
    brisk_error err;
    brisk_dataset a, b;
    enum { N = 4000 };
    REQUIRE_OK(brisk_synth_make("tabular", N, 3, &a, &err), &err);
    REQUIRE_OK(brisk_synth_make("tabular", 100, 3, &b, &err), &err);
    const brisk_tensor *x = brisk_dataset_get(&a, "x"), *y = brisk_dataset_get(&a, "y");
    REQUIRE(x && y && x->shape.d[1] == 64 && y->dtype == BRISK_I32 && y->shape.ndim == 1);
    CHECK(memcmp(y->data, brisk_dataset_get(&b, "y")->data, 100 * 4) == 0);
    const float *xv = (const float *)x->data;
    const int32_t *yv = (const int32_t *)y->data;
    int counts[3] = {0};
    double m = 0, v = 0;
    for (int i = 0; i < N; i++) {
        REQUIRE(yv[i] >= 0 && yv[i] <= 2);
        counts[yv[i]]++;
    }
    for (int i = 0; i < N * 64; i++) m += xv[i] / (N * 64.0);
    for (int i = 0; i < N * 64; i++) v += (xv[i] - m) * (xv[i] - m) / (N * 64.0);
    CHECK_NEAR(m, 0, 0.02);
    CHECK_NEAR(v, 1, 0.03);
    for (int c = 0; c < 3; c++) CHECKF(counts[c] > N / 5, "class %d: %d of %d", c, counts[c], N);
    /* Even a linear model beats chance (1/3) by far; an MLP can do better still, up to the
     * ~95% the label noise allows. */
    double acc = linear_accuracy(xv, yv, N);
    printf("tabular: classes %d/%d/%d, held-out accuracy of softmax regression %.3f\n", counts[0], counts[1],
           counts[2], acc);
    CHECKF(acc > 0.6, "accuracy %.3f", acc);
    brisk_dataset_free(&a);
    brisk_dataset_free(&b);
    CHECK(brisk_synth_make("imagenet", 10, 1, &a, &err) == BRISK_ERR_INVALID && strstr(err.msg, "unknown kind 'imagenet'"));
    CHECK(brisk_synth_make("tabular", 0, 1, &a, &err) == BRISK_ERR_INVALID);
}

static void test_write(void) {
    brisk_error err;
    char p[1200];
    REQUIRE_OK(brisk_synth_write("diffusion", tpath(p, sizeof p, "diffusion.npz"), 40, 7, &err), &err);
    brisk_field_spec specs[] = {{"fine", BRISK_F32, NULL, NULL, 0}, {"coarse", BRISK_F32, NULL, NULL, 0}};
    brisk_dataset ds, mem;
    REQUIRE_OK(brisk_dataset_load_npz(&ds, p, specs, 2, &err), &err);
    REQUIRE_OK(brisk_synth_make("diffusion", 40, 7, &mem, &err), &err);
    CHECK(ds.count == 40 && memcmp(ds.fields[0].tensor.data, mem.fields[0].tensor.data, 40 * 256 * 4) == 0);
    brisk_dataset_free(&ds);
    brisk_dataset_free(&mem);
    REQUIRE_OK(brisk_synth_write("tabular", tpath(p, sizeof p, "tabular.npz"), 50, 7, &err), &err);
    brisk_field_spec ts[] = {{"x", BRISK_F32, NULL, NULL, 0}, {"y", BRISK_I32, NULL, NULL, 0}};
    REQUIRE_OK(brisk_dataset_load_npz(&ds, p, ts, 2, &err), &err);
    CHECK(ds.count == 50);
    brisk_dataset_free(&ds);
    if (have_numpy())
        CHECK(run_python("import numpy as np\n"
                         "d = np.load('diffusion.npz'); f, c = d['fine'], d['coarse']\n"
                         "assert f.shape == (40, 256) and c.shape == (40, 7) and f.dtype == np.float32\n"
                         "edges = [k * 256 // 7 for k in range(8)]\n"
                         "m = np.stack([f[:, edges[k]:edges[k+1]].mean(1) for k in range(7)], 1)\n"
                         "assert np.allclose(m, c, atol=1e-5)\n"
                         "t = np.load('tabular.npz'); assert t['y'].dtype == np.int32 and set(t['y']) <= {0, 1, 2}\n") == 0);
}

TEST_MAIN(T(test_diffusion), T(test_tabular), T(test_write))
