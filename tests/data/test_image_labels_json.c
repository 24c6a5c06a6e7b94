/* Image labels as JSON: the same labels as the equivalent CSV; a dataset loaded from
 * labels.json gives the samples the CSV gives; every malformed entry is one error naming
 * the file and the entry. */
#include <math.h>

#include "brisk/data.h"
#include "data/image_internal.h"
#include "data_test_util.h"
#include "test.h"

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static brisk_status parse_json(const char *text, brisk_image_labels *l, brisk_error *e) {
    return brisk_image_labels_parse_json(text, strlen(text), "l.json", l, e);
}

static void test_same_as_csv(void) {
    const char *csv = "file,category,x0,y0,v0,x1,y1,v1\na.png,1,1,2,2,3.5,4,0\nsub/b.jpg,0,5,6,1,7,8,2\n";
    const char *json = "{\"images\": [{\"file\": \"a.png\", \"category\": 1, \"keypoints\": [1, 2, 2, 3.5, 4, 0]},\n"
                       " {\"keypoints\": [5, 6, 1, 7, 8, 2], \"file\": \"sub/b.jpg\", \"category\": 0}]}";
    brisk_image_labels a, b;
    brisk_error e;
    REQUIRE_OK(brisk_image_labels_parse(csv, strlen(csv), "l.csv", &a, &e), &e);
    REQUIRE_OK(parse_json(json, &b, &e), &e);
    CHECK(a.rows == 2 && b.rows == 2 && a.k == 2 && b.k == 2 && a.has_category && b.has_category && b.json && !a.json);
    for (int r = 0; r < 2; r++) CHECK(!strcmp(a.files[r], b.files[r]) && a.category[r] == b.category[r]);
    CHECK(memcmp(a.kp, b.kp, 2 * 2 * 3 * sizeof(float)) == 0);
    brisk_image_labels_free(&a);
    brisk_image_labels_free(&b);
    REQUIRE_OK(parse_json("{\"images\": [{\"file\": \"x.png\"}]}", &b, &e), &e); /* no labels at all */
    CHECK(b.rows == 1 && b.k == 0 && !b.has_category);
    brisk_image_labels_free(&b);
}

static void test_errors(void) {
    static const struct { const char *json, *want; } bad[] = {
        {"", "l.json: not valid JSON"},
        {"[1, 2]", "expected {\"images\": [...]}"},
        {"{\"images\": []}", "at least one image"},
        {"{\"images\": [{}]}", "images[0].file: expected a path"},
        {"{\"images\": [{\"file\": 3}]}", "images[0].file: expected a path"},
        {"{\"images\": [{\"file\": \"a\", \"extra\": 1}]}", "images[0]: unknown key \"extra\""},
        {"{\"images\": [{\"file\": \"a\"}], \"info\": {}}", "unknown key \"info\""},
        {"{\"images\": [{\"file\": \"a\", \"category\": 1}, {\"file\": \"b\"}]}", "images[1]: lacks \"category\""},
        {"{\"images\": [{\"file\": \"a\", \"category\": -1}]}", "images[0].category: expected an integer >= 0"},
        {"{\"images\": [{\"file\": \"a\", \"category\": 1.5}]}", "images[0].category: expected an integer >= 0"},
        {"{\"images\": [{\"file\": \"a\", \"keypoints\": [1, 2]}]}", "images[0].keypoints: 2 numbers"},
        {"{\"images\": [{\"file\": \"a\", \"keypoints\": [1, 2, 2]}, {\"file\": \"b\", \"keypoints\": []}]}",
         "images[1].keypoints: 0 numbers; expected 3"},
        {"{\"images\": [{\"file\": \"a\", \"keypoints\": [1, 2, 3]}]}", "images[0].keypoints[2] (v0): expected 0, 1 or 2"},
        {"{\"images\": [{\"file\": \"a\", \"keypoints\": [1, \"2\", 1]}]}", "images[0].keypoints[1] (y0): expected a finite"},
        {"{\"images\": [{\"file\": \"a\", \"keypoints\": {}}]}", "images[0].keypoints"},
        {"{\"images\": [7]}", "images[0]: expected an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        brisk_image_labels l;
        brisk_error e = {0};
        CHECKF(parse_json(bad[i].json, &l, &e) == BRISK_ERR_FORMAT, "case %zu parsed", i);
        CHECKF(has(&e, bad[i].want), "case %zu", i);
    }
    brisk_image_labels l;
    brisk_error e;
    CHECK(brisk_image_labels_parse_json("{\"images\": [{\"file\": \"a\"}]}", 30, "l.json", &l, &e) == BRISK_ERR_FORMAT);
}

/* A dataset from labels.json equal to synth's labels.csv gives the same samples. */
static void test_dataset(void) {
#ifdef BRISK_HAVE_PNG
    char dir[1200], csv[1300], json[1300];
    brisk_error err;
    tpath(dir, sizeof dir, "synth_json");
    REQUIRE_OK(brisk_synth_images(dir, 6, 5, &err), &err);
    snprintf(csv, sizeof csv, "%s/labels.csv", dir);
    snprintf(json, sizeof json, "%s/labels.json", dir);
    brisk_image_labels L;
    size_t n;
    char *text = (char *)read_file(csv, &n);
    REQUIRE(text != NULL);
    REQUIRE_OK(brisk_image_labels_parse(text, n, csv, &L, &err), &err);
    free(text);
    FILE *f = fopen(json, "w");
    REQUIRE(f != NULL);
    fputs("{\"images\": [", f);
    for (int64_t r = 0; r < L.rows; r++) {
        fprintf(f, "%s{\"file\": \"%s\", \"category\": %d, \"keypoints\": [", r ? ", " : "", L.files[r], L.category[r]);
        for (int j = 0; j < 3 * L.k; j++) fprintf(f, "%s%.9g", j ? ", " : "", (double)L.kp[r * 3 * L.k + j]);
        fputs("]}", f);
    }
    fputs("]}\n", f);
    fclose(f);
    brisk_image_labels_free(&L);
    brisk_image_spec s;
    memset(&s, 0, sizeof s);
    s.width = s.height = 64;
    brisk_dataset a, b;
    s.labels = csv;
    REQUIRE_OK(brisk_image_dataset_load(&a, &s, NULL, &err), &err);
    s.labels = json;
    REQUIRE_OK(brisk_image_dataset_load(&b, &s, NULL, &err), &err);
    REQUIRE(a.count == 6 && b.count == 6 && a.nfields == 4 && b.nfields == 4);
    static float xa[3 * 64 * 64], xb[3 * 64 * 64];
    float ya[8], yb[8], va[4], vb[4];
    int32_t ca, cb;
    for (int64_t i = 0; i < 6; i++) {
        void *da[4] = {xa, ya, va, &ca}, *db[4] = {xb, yb, vb, &cb};
        REQUIRE_OK(a.make(a.make_user, i, 0, 0, da, &err), &err);
        REQUIRE_OK(b.make(b.make_user, i, 0, 0, db, &err), &err);
        CHECK(!memcmp(xa, xb, sizeof xa) && !memcmp(ya, yb, sizeof ya) && !memcmp(va, vb, sizeof va) && ca == cb);
    }
    brisk_dataset_free(&a);
    brisk_dataset_free(&b);
    /* a missing image is named with its entry */
    f = fopen(json, "w");
    fputs("{\"images\": [{\"file\": \"img_000000.png\"}, {\"file\": \"gone.png\"}]}", f);
    fclose(f);
    CHECK(brisk_image_dataset_load(&b, &s, NULL, &err) != BRISK_OK && has(&err, "gone.png") &&
          has(&err, "labels.json: images[1] names an image that cannot be used"));
#endif
}

TEST_MAIN(T(test_same_as_csv), T(test_errors), T(test_dataset))
