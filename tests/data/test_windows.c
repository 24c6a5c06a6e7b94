/* Windowed time-series datasets: exact windows and targets on a small series checked by
 * hand, the chronological split (no validation window touches a training window's rows
 * or target, for many sizes), normalisation fitted on the training rows only, the three
 * column sources, and clear errors for bad input. */
#include "brisk/data.h"
#include "test.h"

#include <unistd.h>

static char dir[256];

static const char *path_of(const char *name) {
    static char buf[4][512];
    static int k;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/windows_%d", BRISK_BINARY_DIR, (int)getpid());
        char cmd[300];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
        if (system(cmd) != 0) fprintf(stderr, "cannot create %s\n", dir);
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* 16 rows: t = row, v = 10 row, price as listed. */
static const double price[16] = {100, 101, 99, 102, 102, 103, 101, 100, 104, 105, 103, 106, 106, 107, 100, 101};

static const char *series_csv(void) {
    const char *p = path_of("series.csv");
    FILE *f = fopen(p, "w");
    if (!f) return p;
    fprintf(f, "t,v,price\n");
    for (int r = 0; r < 16; r++) fprintf(f, "%d,%d,%g\n", r, 10 * r, price[r]);
    fclose(f);
    return p;
}

static const char *feats[] = {"t", "v"};

static brisk_window_spec spec3(void) {
    brisk_window_spec s = {.features = feats, .nfeatures = 2, .target = "price", .kind = BRISK_TARGET_CLASSES,
                           .change = BRISK_CHANGE_RELATIVE, .thresholds = {-0.005, 0.005}, .nthresholds = 2,
                           .length = 3, .stride = 2, .horizon = 1, .validation_fraction = 0.25, .normalize = 0};
    return s;
}

/* All windows of `idx` through the loader, in order. */
static void gather(const brisk_windows *w, const int64_t *idx, int64_t n, float *x, int32_t *yi, float *yf) {
    brisk_loader_config lc = {.dataset = &w->ds, .indices = idx, .nindices = n, .batch_size = n, .shuffle = 0};
    brisk_loader *l = NULL;
    brisk_batch b;
    brisk_error e;
    if (brisk_loader_create(&l, &lc, &e) || brisk_loader_next(l, &b, &e)) {
        fprintf(stderr, "loader: %s\n", e.msg);
        CHECK(0);
        brisk_loader_destroy(l);
        return;
    }
    const brisk_tensor *tx = &b.fields[1], *ty = &b.fields[0]; /* "y" was added first */
    CHECK(tx->shape.ndim == 3 && tx->shape.d[0] == n && tx->shape.d[1] == 3 && tx->shape.d[2] == 2);
    memcpy(x, tx->data, brisk_tensor_bytes(tx));
    if (yi) memcpy(yi, ty->data, brisk_tensor_bytes(ty));
    if (yf) memcpy(yf, ty->data, brisk_tensor_bytes(ty));
    brisk_loader_release(l, &b);
    brisk_loader_destroy(l);
}

static void test_exact_windows(void) {
    brisk_window_spec s = spec3();
    brisk_windows w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_windows_load(series_csv(), &s, &w, &e), &e);
    /* 7 windows start at rows 0, 2, .., 12; targets at start + 3. The split row is
     * 16 - 4 = 12: windows 0-4 (targets 3 .. 11) train, window 5 (rows 10-12, target 13)
     * straddles it and is left out, window 6 (rows 12-14) validates. */
    CHECK(w.ds.count == 7 && w.split_row == 12);
    REQUIRE(w.split.ntrain == 5 && w.split.nval == 1);
    CHECK(w.split.val[0] == 6);
    float x[5 * 3 * 2];
    int32_t y[5];
    gather(&w, w.split.train, 5, x, y, NULL);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 3; i++) {
            CHECK(x[(k * 3 + i) * 2] == (float)(2 * k + i));
            CHECK(x[(k * 3 + i) * 2 + 1] == (float)(10 * (2 * k + i)));
        }
    /* change from the window's last row (2k + 2) to the target (2k + 3), relative:
     * 99 -> 102 up, 102 -> 103 up, 101 -> 100 down (-0.0099), 104 -> 105 up, 103 -> 106 up */
    int want[5] = {2, 2, 0, 2, 2};
    for (int k = 0; k < 5; k++) CHECKF(y[k] == want[k], "window %d: class %d, want %d", k, y[k], want[k]);
    float xv[6];
    int32_t yv;
    gather(&w, w.split.val, 1, xv, &yv, NULL);
    CHECK(xv[0] == 12 && xv[4] == 14 && xv[5] == 140);
    CHECK(yv == 2); /* window 6 ends at row 14 (100), its target is row 15 (101): +1%, up */
    brisk_windows_free(&w);
}

static void test_flat_class_and_targets(void) {
    brisk_window_spec s = spec3();
    brisk_error e = {0};
    brisk_windows w;
    /* wide thresholds: every change within +-5% is "flat" (class 1) */
    s.thresholds[0] = -0.05, s.thresholds[1] = 0.05;
    REQUIRE_OK(brisk_windows_load(series_csv(), &s, &w, &e), &e);
    int32_t y[5];
    float x[30];
    gather(&w, w.split.train, 5, x, y, NULL);
    for (int k = 0; k < 5; k++) CHECK(y[k] == 1);
    brisk_windows_free(&w);
    /* regression targets: the value at the target row, and the difference */
    s.kind = BRISK_TARGET_VALUE;
    REQUIRE_OK(brisk_windows_load(series_csv(), &s, &w, &e), &e);
    float yf[5];
    gather(&w, w.split.train, 5, x, NULL, yf);
    for (int k = 0; k < 5; k++) CHECK(yf[k] == (float)price[2 * k + 3]);
    brisk_windows_free(&w);
    s.kind = BRISK_TARGET_CHANGE, s.change = BRISK_CHANGE_DIFFERENCE;
    REQUIRE_OK(brisk_windows_load(series_csv(), &s, &w, &e), &e);
    gather(&w, w.split.train, 5, x, NULL, yf);
    for (int k = 0; k < 5; k++) CHECK(yf[k] == (float)(price[2 * k + 3] - price[2 * k + 2]));
    brisk_windows_free(&w);
}

static void test_normalisation_from_training_rows(void) {
    brisk_window_spec s = spec3();
    s.normalize = 1;
    brisk_windows w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_windows_load(series_csv(), &s, &w, &e), &e);
    /* t over rows 0..11: mean 5.5, population std sqrt(143 / 12) */
    CHECK_NEAR(w.mean[0], 5.5, 1e-6);
    CHECK_NEAR(w.std[0], sqrt(143.0 / 12.0), 1e-5);
    CHECK_NEAR(w.mean[1], 55.0, 1e-5);
    float x[30];
    int32_t y[5];
    gather(&w, w.split.train, 5, x, y, NULL);
    CHECK_NEAR(x[0], (0 - 5.5) / sqrt(143.0 / 12.0), 1e-6);
    brisk_windows_free(&w);
    /* changing the validation rows changes nothing fitted */
    float tab[16 * 3];
    for (int r = 0; r < 16; r++) tab[r * 3] = (float)r, tab[r * 3 + 1] = r >= 12 ? 1e6f : (float)(10 * r), tab[r * 3 + 2] = (float)price[r];
    brisk_tensor t = {BRISK_F32, brisk_shape2(16, 3), tab};
    const char *names[3] = {"t", "v", "price"};
    REQUIRE_OK(brisk_windows_from_table(&t, names, 3, "table", &s, &w, &e), &e);
    CHECK_NEAR(w.mean[1], 55.0, 1e-5);
    brisk_windows_free(&w);
}

/* For many sizes: every validation window starts after every training window's target,
 * all at or past the split row, and the windows partition as documented. */
static void test_no_leakage(void) {
    enum { ROWS = 97 };
    float tab[ROWS * 2];
    for (int r = 0; r < ROWS; r++) tab[2 * r] = (float)sin(r * 0.3), tab[2 * r + 1] = 10.0f + (float)r;
    brisk_tensor t = {BRISK_F32, brisk_shape2(ROWS, 2), tab};
    const char *names[2] = {"f", "p"}, *fs[1] = {"f"};
    int checked = 0;
    for (int64_t L = 1; L <= 9; L += 4)
        for (int64_t S = 1; S <= 4; S++)
            for (int64_t H = 1; H <= 7; H += 3)
                for (int v = 0; v < 4; v++) {
                    brisk_window_spec s = {.features = fs, .nfeatures = 1, .target = "p", .kind = BRISK_TARGET_VALUE,
                                           .length = L, .stride = S, .horizon = H,
                                           .validation_fraction = (double[]){0, 0.1, 0.3, 0.6}[v], .normalize = 1};
                    brisk_windows w;
                    brisk_error e = {0};
                    REQUIRE_OK(brisk_windows_from_table(&t, names, 2, "t", &s, &w, &e), &e);
                    int64_t last_target = -1, first_val = ROWS;
                    for (int64_t i = 0; i < w.split.ntrain; i++) {
                        int64_t k = w.split.train[i], r = k * S + L - 1 + H;
                        if (r > last_target) last_target = r;
                        CHECK(r < w.split_row);
                    }
                    for (int64_t i = 0; i < w.split.nval; i++) {
                        int64_t a = w.split.val[i] * S;
                        if (a < first_val) first_val = a;
                        CHECK(a >= w.split_row && a + L - 1 + H < ROWS);
                    }
                    CHECK(last_target < first_val);
                    /* nothing that could be used is left out but the straddling windows */
                    int64_t K = (ROWS - L - H) / S + 1, gap = K - w.split.ntrain - w.split.nval;
                    CHECK(gap >= 0 && gap <= (L + H + S - 1) / S);
                    if (v == 0) CHECK(w.split.nval == 0 && w.split.ntrain == K);
                    checked++;
                    brisk_windows_free(&w);
                }
    CHECK(checked == 3 * 4 * 3 * 4);
}

static void test_sources(void) {
    /* the same columns from an .npz (one member each) and an .npy (by index) */
    brisk_error e = {0};
    float c0[16], c1[16], c2[16], all[16 * 3];
    for (int r = 0; r < 16; r++) c0[r] = (float)r, c1[r] = 10.0f * r, c2[r] = (float)price[r];
    for (int r = 0; r < 16; r++) all[3 * r] = c0[r], all[3 * r + 1] = c1[r], all[3 * r + 2] = c2[r];
    brisk_tensor ts[3] = {{BRISK_F32, brisk_shape1(16), c0}, {BRISK_F32, brisk_shape1(16), c1},
                          {BRISK_F32, brisk_shape1(16), c2}};
    const char *names[3] = {"t", "v", "price"};
    const char *npz = path_of("series.npz"), *npy = path_of("series.npy");
    REQUIRE_OK(brisk_npz_write(npz, 3, names, ts, &e), &e);
    brisk_tensor t = {BRISK_F32, brisk_shape2(16, 3), all};
    REQUIRE_OK(brisk_npy_write(npy, &t, &e), &e);
    brisk_window_spec s = spec3();
    brisk_windows w;
    int32_t y[5], y2[5];
    float x[30], x2[30];
    REQUIRE_OK(brisk_windows_load(series_csv(), &s, &w, &e), &e);
    gather(&w, w.split.train, 5, x, y, NULL);
    brisk_windows_free(&w);
    REQUIRE_OK(brisk_windows_load(npz, &s, &w, &e), &e);
    gather(&w, w.split.train, 5, x2, y2, NULL);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    brisk_windows_free(&w);
    const char *idx[2] = {"0", "1"};
    s.features = idx, s.target = "2";
    REQUIRE_OK(brisk_windows_load(npy, &s, &w, &e), &e);
    gather(&w, w.split.train, 5, x2, y2, NULL);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    brisk_windows_free(&w);
    s.target = "3";
    CHECK(brisk_windows_load(npy, &s, &w, &e) == BRISK_ERR_INVALID && strstr(e.msg, "named by index"));
}

static void expect_error(const brisk_window_spec *s, const char *path, brisk_status code, const char *text) {
    brisk_windows w;
    brisk_error e = {0};
    brisk_status st = brisk_windows_load(path, s, &w, &e);
    CHECKF(st == code && strstr(e.msg, text), "expected %s with '%s', got %s: %s", brisk_status_name(code), text,
           brisk_status_name(st), e.msg);
    if (st == BRISK_OK) brisk_windows_free(&w);
}

static void test_bad_input(void) {
    const char *csv = series_csv();
    brisk_window_spec s = spec3();
    s.length = 16; /* 16 rows cannot hold 16 + a horizon of 1 */
    expect_error(&s, csv, BRISK_ERR_SHAPE, "need at least 17");
    s = spec3();
    s.validation_fraction = 0.9; /* 2 training rows */
    expect_error(&s, csv, BRISK_ERR_SHAPE, "training part");
    s = spec3();
    const char *bad[2] = {"t", "volume"};
    s.features = bad;
    expect_error(&s, csv, BRISK_ERR_INVALID, "volume");
    s = spec3();
    s.target = "close";
    expect_error(&s, csv, BRISK_ERR_INVALID, "close");
    s = spec3();
    s.thresholds[1] = -0.01;
    expect_error(&s, csv, BRISK_ERR_INVALID, "ascend");
    s = spec3();
    s.horizon = 0;
    expect_error(&s, csv, BRISK_ERR_INVALID, "horizon");
    const char *cell = path_of("cell.csv");
    write_file(cell, "t,v,price\n0,0,100\n1,10,abc\n2,20,101\n3,30,102\n4,40,103\n");
    s = spec3();
    expect_error(&s, cell, BRISK_ERR_FORMAT, "line 3, column 'price'");
    const char *nan = path_of("nan.csv");
    write_file(nan, "t,v,price\n0,0,100\n1,10,nan\n2,20,101\n3,30,102\n4,40,103\n5,1,1\n6,1,1\n7,1,1\n");
    s = spec3();
    s.validation_fraction = 0;
    expect_error(&s, nan, BRISK_ERR_NUMERIC, "row 1");
    const char *zero = path_of("zero.csv");
    write_file(zero, "t,v,price\n0,0,100\n1,10,0\n2,20,0\n3,30,102\n4,40,103\n5,1,1\n6,1,1\n7,1,1\n");
    expect_error(&s, zero, BRISK_ERR_NUMERIC, "undefined");
    expect_error(&s, path_of("missing.csv"), BRISK_ERR_IO, "missing.csv");
}

TEST_MAIN(T(test_exact_windows), T(test_flat_class_and_targets), T(test_normalisation_from_training_rows),
          T(test_no_leakage), T(test_sources), T(test_bad_input))
