/* Datasets: loading named fields from NPZ and CSV with dtype conversion, and the checks:
 * equal sample counts, finite floats (the message names file, field, row and column). */
#include "brisk/data.h"
#include "data_test_util.h"
#include "test.h"

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static void test_npz_fields(void) {
    brisk_error err;
    char p[1200];
    brisk_dataset ds;
    /* stored.npz: x f32 [4, 3], y i64 [4]. */
    brisk_field_spec specs[] = {{"features", BRISK_F32, "x", NULL, 0}, {"y", BRISK_I32, NULL, NULL, 0}};
    REQUIRE_OK(brisk_dataset_load_npz(&ds, fixture(p, sizeof p, "stored.npz"), specs, 2, &err), &err);
    CHECK(ds.nfields == 2 && ds.count == 4);
    const brisk_tensor *x = brisk_dataset_get(&ds, "features"), *y = brisk_dataset_get(&ds, "y");
    REQUIRE(x && y && !brisk_dataset_get(&ds, "x"));
    CHECK(x->dtype == BRISK_F32 && x->shape.d[1] == 3 && ((float *)x->data)[7] == 7.0f);
    CHECK(y->dtype == BRISK_I32 && y->shape.ndim == 1 && ((int32_t *)y->data)[2] == 2);
    brisk_dataset_free(&ds);
    /* The i64 labels as f32 (a regression target) work too; f32 as i32 does not. */
    brisk_field_spec as_f32[] = {{"y", BRISK_F32, NULL, NULL, 0}};
    REQUIRE_OK(brisk_dataset_load_npz(&ds, p, as_f32, 1, &err), &err);
    CHECK(((float *)ds.fields[0].tensor.data)[3] == 1.0f);
    brisk_dataset_free(&ds);
    brisk_field_spec as_i32[] = {{"x", BRISK_I32, NULL, NULL, 0}};
    CHECK(brisk_dataset_load_npz(&ds, p, as_i32, 1, &err) == BRISK_ERR_SHAPE);
    CHECK(has(&err, "stored.npz: field 'x' (member 'x') holds float32 values [4, 3], but the model takes class labels"));
    CHECK(ds.nfields == 0 && ds.fields == NULL);
    brisk_field_spec missing[] = {{"x", BRISK_F32, NULL, NULL, 0}, {"t", BRISK_F32, "target", NULL, 0}};
    CHECK(brisk_dataset_load_npz(&ds, p, missing, 2, &err) == BRISK_ERR_INVALID);
    CHECK(has(&err, "field 't': ") && has(&err, "stored.npz: no member 'target' (members: x, y)"));
    brisk_field_spec twice[] = {{"x", BRISK_F32, NULL, NULL, 0}, {"x", BRISK_F32, NULL, NULL, 0}};
    CHECK(brisk_dataset_load_npz(&ds, p, twice, 2, &err) == BRISK_ERR_INVALID && has(&err, "field 'x' defined twice"));
    brisk_field_spec bad_dt[] = {{"x", BRISK_F16, NULL, NULL, 0}};
    CHECK(brisk_dataset_load_npz(&ds, p, bad_dt, 1, &err) == BRISK_ERR_INVALID && has(&err, "expected f32 or i32"));
}

static void test_counts_and_nan(void) {
    brisk_error err;
    char p[1200];
    float a[4 * 6];
    int32_t lab[3] = {0, 1, 2};
    for (int i = 0; i < 24; i++) a[i] = (float)i;
    brisk_tensor t[2] = {{BRISK_F32, brisk_shape3(4, 2, 3), a}, {BRISK_I32, brisk_shape1(3), lab}};
    const char *names[2] = {"x", "y"};
    REQUIRE_OK(brisk_npz_write(tpath(p, sizeof p, "mismatch.npz"), 2, names, t, &err), &err);
    brisk_dataset ds;
    brisk_field_spec specs[] = {{"x", BRISK_F32, NULL, NULL, 0}, {"y", BRISK_I32, NULL, NULL, 0}};
    CHECK(brisk_dataset_load_npz(&ds, p, specs, 2, &err) == BRISK_ERR_SHAPE);
    CHECK(has(&err, "mismatch.npz: field 'y' has 3 samples (shape [3]) but field 'x' has 4"));

    a[1 * 6 + 4] = NAN; /* sample 1, feature (1, 1) = flat 4 */
    REQUIRE_OK(brisk_npz_write(tpath(p, sizeof p, "nan.npz"), 1, names, t, &err), &err);
    CHECK(brisk_dataset_load_npz(&ds, p, specs, 1, &err) == BRISK_ERR_NUMERIC);
    CHECK(has(&err, "nan.npz: field 'x': NaN at row 1 (sample index), column 4 (flat feature index)"));
    a[1 * 6 + 4] = 0;
    a[3 * 6 + 5] = -INFINITY;
    REQUIRE_OK(brisk_npz_write(tpath(p, sizeof p, "inf.npz"), 1, names, t, &err), &err);
    CHECK(brisk_dataset_load_npz(&ds, p, specs, 1, &err) == BRISK_ERR_NUMERIC);
    CHECK(has(&err, "inf.npz: field 'x': inf at row 3 (sample index), column 5 (flat feature index)"));

    /* f8 values beyond f32's range become inf and are caught too. */
    if (have_numpy()) {
        REQUIRE(run_python("import numpy as np\nnp.savez('f8.npz', x=np.array([[1.0, 1e300]]))\n") == 0);
        CHECK(brisk_dataset_load_npz(&ds, tpath(p, sizeof p, "f8.npz"), specs, 1, &err) == BRISK_ERR_NUMERIC);
        CHECK(has(&err, "f8.npz: field 'x': inf at row 0 (sample index), column 1"));
    }

    /* Built in memory. */
    memset(&ds, 0, sizeof ds);
    brisk_tensor m;
    REQUIRE_OK(brisk_tensor_alloc(&m, BRISK_F32, brisk_shape2(5, 2), &err), &err);
    memset(m.data, 0, 40);
    REQUIRE_OK(brisk_dataset_add(&ds, "a", &m, &err), &err);
    REQUIRE_OK(brisk_tensor_alloc(&m, BRISK_I32, brisk_shape1(4), &err), &err);
    CHECK(brisk_dataset_add(&ds, "b", &m, &err) == BRISK_ERR_SHAPE && has(&err, "field 'b' has 4 samples"));
    REQUIRE_OK(brisk_tensor_alloc(&m, BRISK_F32, brisk_shape_make(0, NULL), &err), &err);
    CHECK(brisk_dataset_add(&ds, "s", &m, &err) == BRISK_ERR_SHAPE && has(&err, "scalar"));
    REQUIRE_OK(brisk_tensor_alloc(&m, BRISK_F32, brisk_shape1(5), &err), &err);
    for (int i = 0; i < 5; i++) ((float *)m.data)[i] = i == 2 ? NAN : 0;
    CHECK(brisk_dataset_add(&ds, "c", &m, &err) == BRISK_ERR_NUMERIC && has(&err, "(memory): field 'c': NaN at row 2"));
    CHECK(ds.nfields == 1 && ds.count == 5);
    brisk_dataset_free(&ds);
}

static void test_csv_fields(void) {
    brisk_error err;
    char p[1200];
    const char *text = "date,open,close,volume,label\n"
                       "d1,1,2,300,0\n"
                       "d2,1.5,2.5,400,2\n"
                       "d3,2,3,500,1\n";
    REQUIRE(write_file(tpath(p, sizeof p, "prices.csv"), text, strlen(text)) == 0);
    const char *xc[] = {"open", "close", "volume"}, *yc[] = {"label"}, *both[] = {"close", "label"};
    brisk_field_spec specs[] = {
        {"x", BRISK_F32, NULL, xc, 3}, {"y", BRISK_I32, NULL, yc, 1}, {"z", BRISK_F32, NULL, both, 2}};
    brisk_dataset ds;
    REQUIRE_OK(brisk_dataset_load_csv(&ds, p, specs, 3, &err), &err);
    CHECK(ds.count == 3 && ds.nfields == 3);
    const brisk_tensor *x = brisk_dataset_get(&ds, "x"), *y = brisk_dataset_get(&ds, "y"), *z = brisk_dataset_get(&ds, "z");
    REQUIRE(x && y && z);
    CHECK(x->shape.ndim == 2 && x->shape.d[1] == 3 && ((float *)x->data)[4] == 2.5f && ((float *)x->data)[8] == 500);
    CHECK(y->dtype == BRISK_I32 && y->shape.ndim == 1 && ((int32_t *)y->data)[1] == 2);
    CHECK(z->shape.d[1] == 2 && ((float *)z->data)[5] == 1.0f);
    brisk_dataset_free(&ds);

    const char *bad[] = {"open", "high"};
    brisk_field_spec s2[] = {{"x", BRISK_F32, NULL, bad, 2}};
    CHECK(brisk_dataset_load_csv(&ds, p, s2, 1, &err) == BRISK_ERR_INVALID);
    CHECK(has(&err, "prices.csv: no column 'high' in the header (available: 'date', 'open', 'close', 'volume', 'label')"));
    brisk_field_spec s3[] = {{"x", BRISK_F32, NULL, NULL, 0}};
    CHECK(brisk_dataset_load_csv(&ds, p, s3, 1, &err) == BRISK_ERR_INVALID && has(&err, "no CSV columns"));
    const char *dc[] = {"date"};
    brisk_field_spec s4[] = {{"d", BRISK_F32, NULL, dc, 1}};
    CHECK(brisk_dataset_load_csv(&ds, p, s4, 1, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "prices.csv: line 2, column 'date': expected a number, got 'd1'"));

    const char *nan_text = "a,b,c\n1,2,3\n4, nan ,6\n";
    REQUIRE(write_file(tpath(p, sizeof p, "nan.csv"), nan_text, strlen(nan_text)) == 0);
    const char *cb[] = {"c", "b"};
    brisk_field_spec s5[] = {{"feat", BRISK_F32, NULL, cb, 2}};
    CHECK(brisk_dataset_load_csv(&ds, p, s5, 1, &err) == BRISK_ERR_NUMERIC);
    CHECK(has(&err, "nan.csv: field 'feat': NaN at row 1 (sample index), column 1 (flat feature index) = CSV column "
                    "'b', line 3"));
    const char *lb[] = {"b"};
    brisk_field_spec s6[] = {{"lab", BRISK_I32, NULL, lb, 1}};
    CHECK(brisk_dataset_load_csv(&ds, p, s6, 1, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "nan.csv: line 3, column 'b': expected an integer label (i32), got 'nan'"));
}

/* Wide CSV fields: 100 columns by a range "f0:f99" (header order), a list of any length,
 * ranges mixed with names, and the errors a bad range gives. */
static void test_csv_ranges(void) {
    brisk_error err;
    char p[1200];
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    REQUIRE(text);
    for (int c = 0; c < 100; c++) n += (size_t)snprintf(text + n, cap - n, "f%d,", c);
    n += (size_t)snprintf(text + n, cap - n, "label\n");
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 100; c++) n += (size_t)snprintf(text + n, cap - n, "%d,", r * 1000 + c);
        n += (size_t)snprintf(text + n, cap - n, "%d\n", r);
    }
    REQUIRE(write_file(tpath(p, sizeof p, "wide.csv"), text, n) == 0);
    free(text);
    const char *range[] = {"f0:f99"}, *yc[] = {"label"};
    brisk_field_spec specs[] = {{"x", BRISK_F32, NULL, range, 1}, {"y", BRISK_I32, NULL, yc, 1}};
    brisk_dataset ds;
    REQUIRE_OK(brisk_dataset_load_csv(&ds, p, specs, 2, &err), &err);
    const brisk_tensor *x = brisk_dataset_get(&ds, "x");
    REQUIRE(x && x->shape.ndim == 2 && x->shape.d[0] == 3 && x->shape.d[1] == 100);
    CHECK(((float *)x->data)[0] == 0 && ((float *)x->data)[99] == 99 && ((float *)x->data)[2 * 100 + 57] == 2057);
    brisk_dataset_free(&ds);
    /* a list of 100 names, and a mix of ranges and names */
    const char *list[100];
    char names[100][8];
    for (int c = 0; c < 100; c++) snprintf(names[c], sizeof names[c], "f%d", 99 - c), list[c] = names[c];
    const char *mix[] = {"f10:f12", "label", "f98:f99"};
    brisk_field_spec s2[] = {{"x", BRISK_F32, NULL, list, 100}, {"z", BRISK_F32, NULL, mix, 3}};
    REQUIRE_OK(brisk_dataset_load_csv(&ds, p, s2, 2, &err), &err);
    x = brisk_dataset_get(&ds, "x");
    const brisk_tensor *z = brisk_dataset_get(&ds, "z");
    REQUIRE(x && z && x->shape.d[1] == 100 && z->shape.d[1] == 6);
    CHECK(((float *)x->data)[100 + 0] == 1099 && ((float *)x->data)[100 + 99] == 1000);
    const float want[] = {1010, 1011, 1012, 1, 1098, 1099};
    for (int c = 0; c < 6; c++) CHECK(((float *)z->data)[6 + c] == want[c]);
    brisk_dataset_free(&ds);
    const char *missing[] = {"f0:f100"}, *reversed[] = {"f5:f2"};
    brisk_field_spec s3[] = {{"x", BRISK_F32, NULL, missing, 1}};
    CHECK(brisk_dataset_load_csv(&ds, p, s3, 1, &err) == BRISK_ERR_INVALID);
    CHECK(has(&err, "field 'x': ") && has(&err, "wide.csv: column range 'f0:f100': no column 'f100' in the header"));
    brisk_field_spec s4[] = {{"x", BRISK_F32, NULL, reversed, 1}};
    CHECK(brisk_dataset_load_csv(&ds, p, s4, 1, &err) == BRISK_ERR_INVALID);
    CHECK(has(&err, "column range 'f5:f2': 'f5' comes after 'f2' in the header (column 5 > 2)"));
    /* a header name with a ':' is a name, not a range */
    const char *colon_text = "a:b,a,b\n1,2,3\n";
    REQUIRE(write_file(tpath(p, sizeof p, "colon.csv"), colon_text, strlen(colon_text)) == 0);
    const char *ab[] = {"a:b"};
    brisk_field_spec s5[] = {{"x", BRISK_F32, NULL, ab, 1}};
    REQUIRE_OK(brisk_dataset_load_csv(&ds, p, s5, 1, &err), &err);
    CHECK(brisk_dataset_get(&ds, "x")->shape.d[1] == 1 && ((float *)brisk_dataset_get(&ds, "x")->data)[0] == 1);
    brisk_dataset_free(&ds);
}

/* Shard-only loading (data parallel): rank r of N holds and converts only its rows, 1/N of
 * the file's samples and bytes, equal to those rows of a whole load; stored, deflated, CSV. */
static int64_t held_bytes(const brisk_dataset *ds) {
    int64_t b = 0;
    for (int i = 0; i < ds->nfields; i++)
        b += brisk_shape_numel(&ds->fields[i].tensor.shape) * (int64_t)brisk_dtype_size(ds->fields[i].tensor.dtype);
    return b;
}

static void check_shards(const char *path, const brisk_field_spec *specs, int nspecs, int csv, int64_t rows) {
    brisk_error err;
    brisk_dataset all, part;
    REQUIRE_OK(csv ? brisk_dataset_load_csv(&all, path, specs, nspecs, &err)
                   : brisk_dataset_load_npz(&all, path, specs, nspecs, &err), &err);
    REQUIRE(all.count == rows);
    for (int world = 2; world <= 3; world++) {
        int64_t sum = 0;
        for (int r = 0; r < world; r++) {
            int64_t lo = rows * r / world, hi = rows * (r + 1) / world, file_rows = 0;
            REQUIRE_OK(csv ? brisk_dataset_load_csv_rows(&part, path, specs, nspecs, lo, hi, &file_rows, &err)
                           : brisk_dataset_load_npz_rows(&part, path, specs, nspecs, lo, hi, &file_rows, &err), &err);
            CHECK(file_rows == rows && part.count == hi - lo && part.nfields == all.nfields);
            /* bytes held: the shard's share of the whole load's, within one row */
            double share = (double)held_bytes(&part) / (double)held_bytes(&all);
            CHECKF(fabs(share - 1.0 / world) <= 1.0 / (double)rows + 1e-12, "%s: rank %d of %d holds %.4f of the bytes",
                   path, r, world, share);
            for (int f = 0; f < all.nfields; f++) {
                const brisk_tensor *a = &all.fields[f].tensor, *b = &part.fields[f].tensor;
                size_t row = (size_t)(brisk_shape_numel(&a->shape) / rows) * brisk_dtype_size(a->dtype);
                CHECK(b->shape.d[0] == hi - lo &&
                      memcmp((const char *)a->data + (size_t)lo * row, b->data, (size_t)(hi - lo) * row) == 0);
            }
            sum += part.count;
            brisk_dataset_free(&part);
        }
        CHECK(sum == rows);
    }
    /* past the end: clamped, then refused for CSV (no rows) and empty for NPZ */
    int64_t fr = 0;
    if (csv) CHECK(brisk_dataset_load_csv_rows(&part, path, specs, nspecs, rows + 5, rows + 9, &fr, &err) ==
                   BRISK_ERR_INVALID && has(&err, "no data rows in the rows"));
    brisk_dataset_free(&all);
}

static void test_shard_rows(void) {
    brisk_error err;
    char p[1200];
    /* the committed fixtures: x f32 [4, 3], y i64 [4], stored and deflated */
    brisk_field_spec specs[] = {{"x", BRISK_F32, NULL, NULL, 0}, {"y", BRISK_I32, NULL, NULL, 0}};
    check_shards(fixture(p, sizeof p, "stored.npz"), specs, 2, 0, 4);
    brisk_npy_array a;
    brisk_status st = brisk_npz_read_rows(fixture(p, sizeof p, "compressed.npz"), "x", 1, 3, &a, &err);
    if (st && strstr(err.msg, "without zlib")) {
        printf("SKIP: deflated shards: %s\n", err.msg);
    } else {
        REQUIRE_OK(st, &err);
        CHECK(a.shape.d[0] == 2 && a.shape.d[1] == 3 && ((float *)a.data)[0] == 3.0f && ((float *)a.data)[5] == 8.0f);
        brisk_npy_free(&a);
        check_shards(p, specs, 2, 0, 4);
    }
    /* a larger file of brisk's own: 1001 samples (shards of unequal size), stored */
    REQUIRE_OK(brisk_synth_write("tabular", tpath(p, sizeof p, "tab.npz"), 1001, 0, &err), &err);
    brisk_field_spec tab[] = {{"x", BRISK_F32, NULL, NULL, 0}, {"y", BRISK_I32, NULL, NULL, 0}};
    check_shards(p, tab, 2, 0, 1001);
    /* CSV: 1001 rows, the shard's rows alone converted */
    FILE *fp = fopen(tpath(p, sizeof p, "shard.csv"), "w");
    REQUIRE(fp);
    fprintf(fp, "a,b,label\n");
    for (int i = 0; i < 1001; i++) fprintf(fp, "%d,%g,%d\n", i, i * 0.5, i % 3);
    fclose(fp);
    const char *xc[] = {"a", "b"}, *yc[] = {"label"};
    brisk_field_spec cs[] = {{"x", BRISK_F32, NULL, xc, 2}, {"y", BRISK_I32, NULL, yc, 1}};
    check_shards(p, cs, 2, 1, 1001);
}

TEST_MAIN(T(test_npz_fields), T(test_counts_and_nan), T(test_csv_fields), T(test_csv_ranges), T(test_shard_rows))
