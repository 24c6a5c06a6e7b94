/* Image datasets: synth -> load -> samples equal the decoded pixels and labels; the flip
 * mirrors pixels and swaps keypoint pairs; crops move keypoints with the pixels; batches
 * are identical for any worker count and change between epochs; every bad input (missing
 * file, a FIFO, wrong size, corrupt or grayscale file, bad labels) is one error naming the file,
 * or with skip_bad a sample left out and counted; image arrays from .npy; episodes; a folder
 * of images without labels and the keypoints CSV `brisk predict` writes. */
#include <math.h>
#include <sys/stat.h>

#include "brisk/data.h"
#include "data_test_util.h"
#include "image_test_util.h"
#include "test.h"

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static brisk_image_spec base_spec(const char *labels) {
    brisk_image_spec s;
    memset(&s, 0, sizeof s);
    s.labels = labels;
    s.width = s.height = 64;
    s.seed = 7;
    return s;
}

/* DIR/labels.csv holding csv; its path into p. */
static const char *labels_in(char *p, size_t cap, const char *dir, const char *csv) {
    snprintf(p, cap, "%s/labels.csv", dir);
    write_file(p, csv, strlen(csv));
    return p;
}

/* One sample, made as the loader makes it. */
static void sample(const brisk_dataset *ds, int64_t i, uint64_t epoch, int augment, float *x, float *y, float *vis,
                   int32_t *cat) {
    void *dst[4] = {x, y, vis, cat};
    brisk_error err;
    REQUIRE_OK(ds->make(ds->make_user, i, epoch, augment, dst, &err), &err);
}

static char synth_dir[1200];
static const char *synth_labels(char *buf, size_t cap) {
    if (!synth_dir[0]) {
        brisk_error err;
        tpath(synth_dir, sizeof synth_dir, "synth");
        if (brisk_synth_images(synth_dir, 24, 3, &err)) fprintf(stderr, "%s\n", err.msg);
    }
    snprintf(buf, cap, "%s/labels.csv", synth_dir);
    return buf;
}

static void test_synth_roundtrip(void) {
#ifdef BRISK_HAVE_PNG
    char lp[1300], p[1300];
    brisk_error err;
    brisk_image_spec s = base_spec(synth_labels(lp, sizeof lp));
    brisk_dataset ds;
    brisk_image_report rep;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, &rep, &err), &err);
    CHECK(ds.count == 24 && rep.listed == 24 && rep.kept == 24 && rep.keypoints == 4 && rep.categories == 3);
    REQUIRE(ds.nfields == 4 && !strcmp(ds.fields[0].name, "x") && !strcmp(ds.fields[1].name, "y") &&
            !strcmp(ds.fields[2].name, "visible") && !strcmp(ds.fields[3].name, "category"));
    static float x[3 * 64 * 64];
    float y[8], vis[4];
    int32_t cat;
    sample(&ds, 5, 0, 0, x, y, vis, &cat);
    snprintf(p, sizeof p, "%s/img_000005.png", synth_dir);
    brisk_image im;
    REQUIRE_OK(brisk_image_read(p, NULL, &im, &err), &err);
    int same = 1;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 64 * 64; i++) same &= x[c * 4096 + i] == im.data[3 * i + c] / 255.0f;
    CHECK(same);
    brisk_image_free(&im);
    /* labels: the CSV's row 5 (line 7) */
    size_t n;
    char *csv = (char *)read_file(lp, &n);
    char *line = csv;
    for (int k = 0; k < 6; k++) line = strchr(line, '\n') + 1;
    int fcat;
    float kp[12];
    CHECK(sscanf(line, "img_000005.png,%d,%f,%f,%f,%f,%f,%f,%f,%f,%f,%f,%f,%f", &fcat, &kp[0], &kp[1], &kp[2], &kp[3],
                 &kp[4], &kp[5], &kp[6], &kp[7], &kp[8], &kp[9], &kp[10], &kp[11]) == 13);
    CHECK(cat == fcat);
    for (int k = 0; k < 4; k++) {
        CHECK(vis[k] == (kp[3 * k + 2] > 0 ? 1.0f : 0.0f));
        if (vis[k]) {
            CHECK_NEAR(y[2 * k], kp[3 * k] / 64.0, 1e-6);
            CHECK_NEAR(y[2 * k + 1], kp[3 * k + 1] / 64.0, 1e-6);
        }
    }
    free(csv);
    /* normalisation */
    brisk_dataset ds2;
    s.mean[0] = 0.5f, s.mean[1] = 0.25f, s.mean[2] = 0;
    s.std[0] = 0.5f, s.std[1] = 2, s.std[2] = 1;
    REQUIRE_OK(brisk_image_dataset_load(&ds2, &s, NULL, &err), &err);
    static float xn[3 * 64 * 64];
    sample(&ds2, 5, 0, 0, xn, y, vis, &cat);
    for (int c = 0; c < 3; c++) CHECK_NEAR(xn[c * 4096 + 77], (x[c * 4096 + 77] - s.mean[c]) / s.std[c], 1e-5);
    brisk_dataset_free(&ds2);
    brisk_dataset_free(&ds);
#endif
}

static void test_flip_swaps_keypoints(void) {
#ifdef BRISK_HAVE_PNG
    char lp[1300];
    brisk_error err;
    brisk_image_spec s = base_spec(synth_labels(lp, sizeof lp));
    s.flip = 1;
    s.nflip_pairs = 2;
    s.flip_pairs[0][0] = 0, s.flip_pairs[0][1] = 1, s.flip_pairs[1][0] = 2, s.flip_pairs[1][1] = 3;
    brisk_dataset ds;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    static float a[3 * 4096], b[3 * 4096];
    float ya[8], yb[8], va[4], vb[4];
    int32_t c;
    for (int64_t i = 0; i < 6; i++) {
        sample(&ds, i, 0, 0, a, ya, va, &c);
        sample(&ds, i, 3, 1, b, yb, vb, &c);
        int mirrored = 1;
        for (int ch = 0; ch < 3; ch++)
            for (int r = 0; r < 64; r++)
                for (int col = 0; col < 64; col++) mirrored &= b[ch * 4096 + r * 64 + col] == a[ch * 4096 + r * 64 + 63 - col];
        CHECK(mirrored);
        const int partner[4] = {1, 0, 3, 2};
        for (int k = 0; k < 4; k++) {
            int q = partner[k];
            CHECK(vb[k] == va[q]);
            if (va[q]) {
                CHECK_NEAR(yb[2 * k], 1.0 - ya[2 * q], 1e-6);
                CHECK_NEAR(yb[2 * k + 1], ya[2 * q + 1], 1e-6);
            }
        }
        /* the flipped top-left is still left of the flipped top-right (what the pairs are for) */
        if (vb[0] && vb[1]) CHECK(yb[0] < yb[2]);
    }
    brisk_dataset_free(&ds);
#endif
}

/* A picture of one bright pixel per keypoint: after crop, resize and flip, each visible
 * keypoint must sit on the brightest output pixel near it. */
static void test_crop_moves_keypoints(void) {
#ifdef BRISK_HAVE_PNG
    brisk_error err;
    char dir[1200], p[1300];
    tpath(dir, sizeof dir, "dots");
    mkdir(dir, 0755);
    static uint8_t px[64 * 64 * 3];
    const int kx[3] = {20, 40, 31}, ky[3] = {22, 30, 45};
    memset(px, 0, sizeof px);
    for (int k = 0; k < 3; k++) memset(px + ((size_t)ky[k] * 64 + kx[k]) * 3, 255, 3);
    snprintf(p, sizeof p, "%s/d.png", dir);
    REQUIRE_OK(brisk_png_write(p, px, 64, 64, 3, &err), &err);
    snprintf(p, sizeof p, "%s/labels.csv", dir);
    char csv[400];
    snprintf(csv, sizeof csv, "file,x0,y0,v0,x1,y1,v1,x2,y2,v2\nd.png,%d.5,%d.5,2,%d.5,%d.5,2,%d.5,%d.5,2\n", kx[0],
             ky[0], kx[1], ky[1], kx[2], ky[2]);
    write_file(p, csv, strlen(csv));
    brisk_image_spec s = base_spec(p);
    s.crop = 0.6f;
    s.flip = 0.5f;
    brisk_dataset ds;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    static float x[3 * 4096];
    float y[6], vis[3];
    int moved = 0, seen = 0;
    for (uint64_t e = 0; e < 40; e++) {
        void *dst[3] = {x, y, vis};
        REQUIRE_OK(ds.make(ds.make_user, 0, e, 1, dst, &err), &err);
        for (int k = 0; k < 3; k++) {
            if (!vis[k]) continue;
            seen++;
            int ox = (int)(y[2 * k] * 64), oy = (int)(y[2 * k + 1] * 64);
            moved += ox != kx[k] || oy != ky[k];
            /* brightest pixel within 2 of the keypoint's pixel */
            float best = -1;
            int bx = -1, by = -1;
            for (int r = oy - 2; r <= oy + 2; r++)
                for (int c = ox - 2; c <= ox + 2; c++)
                    if (r >= 0 && r < 64 && c >= 0 && c < 64 && x[r * 64 + c] > best) best = x[r * 64 + c], bx = c, by = r;
            CHECKF(abs(bx - ox) <= 1 && abs(by - oy) <= 1 && best > 0.2f,
                   "epoch %llu keypoint %d at (%d, %d) but the dot is at (%d, %d) (%.2f)", (unsigned long long)e, k, ox,
                   oy, bx, by, (double)best);
        }
    }
    CHECK(seen > 40 && moved > 20);
    brisk_dataset_free(&ds);
#endif
}

/* Batches of two epochs with `workers` threads. */
static float *run_loader(const brisk_dataset *ds, int workers, int prefetch, int plain, size_t *floats) {
    brisk_loader_config c = {.dataset = ds, .batch_size = 8, .seed = 11, .shuffle = 1, .prefetch = prefetch,
                             .workers = workers, .plain = plain};
    brisk_loader *l;
    brisk_error err;
    if (brisk_loader_create(&l, &c, &err)) { fprintf(stderr, "%s\n", err.msg); return NULL; }
    int64_t nb = 2 * brisk_loader_batches_per_epoch(l);
    size_t per = 8 * (3 * 4096 + 8 + 4);
    float *out = malloc((size_t)nb * per * sizeof *out);
    for (int64_t b = 0; b < nb; b++) {
        brisk_batch bt;
        if (brisk_loader_next(l, &bt, &err)) { fprintf(stderr, "%s\n", err.msg); break; }
        float *o = out + (size_t)b * per;
        memcpy(o, bt.fields[0].data, 8 * 3 * 4096 * sizeof(float));
        memcpy(o + 8 * 3 * 4096, bt.fields[1].data, 8 * 8 * sizeof(float));
        memcpy(o + 8 * (3 * 4096 + 8), bt.fields[2].data, 8 * 4 * sizeof(float));
        brisk_loader_release(l, &bt);
    }
    brisk_loader_destroy(l);
    *floats = (size_t)nb * per;
    return out;
}

static void test_loader_threads_deterministic(void) {
#ifdef BRISK_HAVE_PNG
    char lp[1300];
    brisk_error err;
    brisk_image_spec s = base_spec(synth_labels(lp, sizeof lp));
    s.flip = 0.5f, s.crop = 0.7f;
    brisk_dataset ds;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    size_t n1, n3, n4, np;
    float *a = run_loader(&ds, 1, 0, 0, &n1), *b = run_loader(&ds, 3, 2, 0, &n3), *c = run_loader(&ds, 4, 1, 0, &n4);
    float *plain = run_loader(&ds, 2, 1, 1, &np);
    REQUIRE(a && b && c && plain && n1 == n3 && n1 == n4);
    CHECK(memcmp(a, b, n1 * sizeof *a) == 0 && memcmp(a, c, n1 * sizeof *a) == 0);
    CHECK(memcmp(a, plain, n1 * sizeof *a) != 0); /* augmentation happened */
    /* epoch 2 revisits the same samples (another order) with other augmentation: the sum
     * of all pixels of an epoch differs, while without augmentation it is the same */
    size_t half = n1 / 2;
    double ea = 0, eb = 0, pa = 0, pb = 0;
    for (size_t i = 0; i < half; i++) ea += a[i], eb += a[half + i], pa += plain[i], pb += plain[half + i];
    CHECK(fabs(ea - eb) > 1.0 && fabs(pa - pb) < 1e-3 * fabs(pa));
    free(a), free(b), free(c), free(plain);
    brisk_dataset_free(&ds);
#endif
}

/* A folder with one bad thing in it, labels naming 3 good images and the bad one. */
static const char *bad_folder(char *lp, size_t cap, const char *name, const char *kind) {
    char dir[1200], p[1300];
    brisk_error err;
    tpath(dir, sizeof dir, name);
    mkdir(dir, 0755);
    static uint8_t px[64 * 64 * 3];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/ok%d.png", dir, i);
        brisk_png_write(p, px, 64, 64, 3, &err);
    }
    snprintf(p, sizeof p, "%s/bad.png", dir);
    if (!strcmp(kind, "size")) brisk_png_write(p, px, 32, 48, 3, &err);
    if (!strcmp(kind, "gray")) brisk_png_write(p, px, 64, 64, 1, &err);
    if (!strcmp(kind, "header")) write_file(p, "\x89PNG\r\n\x1a\n\0\0", 10);
    if (!strcmp(kind, "fifo")) mkfifo(p, 0644); /* opening it for reading waits for a writer */
    if (!strcmp(kind, "pixels")) { /* header intact, pixel data corrupt */
        char q[1300];
        snprintf(q, sizeof q, "%s/ok0.png", dir);
        size_t n;
        uint8_t *b = read_file(q, &n);
        b[n - 20] ^= 0x55;
        write_file(p, b, n);
        free(b);
    }
    snprintf(lp, cap, "%s/labels.csv", dir);
    const char *csv = "file,category\nok0.png,0\nbad.png,1\nok1.png,0\nok2.png,1\n";
    write_file(lp, csv, strlen(csv));
    return lp;
}

static void test_bad_inputs(void) {
#ifdef BRISK_HAVE_PNG
    /* a FIFO hung the loader in open() before: the alarm turns a hang into a failure */
    alarm(120);
    const char *kinds[] = {"missing", "size", "gray", "header", "fifo"};
    const char *msgs[] = {"cannot open", "image of 32 x 48 pixels; expected 64 x 64", "grayscale",
                          "corrupt or truncated PNG", "not a regular file (a FIFO)"};
    for (int i = 0; i < 5; i++) {
        char lp[1300], name[32];
        snprintf(name, sizeof name, "bad_%s", kinds[i]);
        brisk_image_spec s = base_spec(bad_folder(lp, sizeof lp, name, kinds[i]));
        brisk_dataset ds;
        brisk_error err;
        CHECKF(brisk_image_dataset_load(&ds, &s, NULL, &err) != BRISK_OK && has(&err, "bad.png") && has(&err, msgs[i]) &&
                   has(&err, "line 3") && has(&err, "labels.csv"), "case %s", kinds[i]);
        s.skip_bad = 1;
        brisk_image_report r;
        REQUIRE_OK(brisk_image_dataset_load(&ds, &s, &r, &err), &err);
        int64_t counts[5] = {r.missing, r.wrong_size, r.unsupported, r.corrupt, r.missing};
        CHECKF(ds.count == 3 && r.listed == 4 && r.kept == 3 && counts[i] == 1 && strstr(r.first_skipped, "bad.png"),
               "case %s: count %lld kept %lld first '%s'", kinds[i], (long long)ds.count, (long long)r.kept, r.first_skipped);
        CHECK(r.missing + r.wrong_size + r.unsupported + r.corrupt == 1);
        brisk_dataset_free(&ds);
    }
    /* the labels file itself a FIFO */
    char fifo[1300];
    tpath(fifo, sizeof fifo, "labels_fifo.csv");
    mkfifo(fifo, 0644);
    brisk_image_spec fs = base_spec(fifo);
    brisk_error ferr;
    brisk_dataset fds;
    CHECK(brisk_image_dataset_load(&fds, &fs, NULL, &ferr) == BRISK_ERR_IO && has(&ferr, "labels_fifo.csv") &&
          has(&ferr, "not a regular file (a FIFO)"));
    alarm(0);
    /* a wrong size is fine when resizing */
    char lp[1300];
    brisk_image_spec s = base_spec(bad_folder(lp, sizeof lp, "resized", "size"));
    s.resize = 1;
    brisk_dataset ds;
    brisk_error err;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    CHECK(ds.count == 4);
    brisk_dataset_free(&ds);
    /* corrupt pixels behind a good header: found by the loader (naming the file), or at
     * load with verify */
    s = base_spec(bad_folder(lp, sizeof lp, "pixels", "pixels"));
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    brisk_loader_config c = {.dataset = &ds, .batch_size = 4, .workers = 2, .plain = 1};
    brisk_loader *l;
    REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
    brisk_batch b;
    CHECK(brisk_loader_next(l, &b, &err) != BRISK_OK && has(&err, "bad.png") && has(&err, "corrupt or truncated PNG") &&
          has(&err, "loader: batch at epoch 0"));
    brisk_loader_destroy(l);
    brisk_dataset_free(&ds);
    /* with skip_bad the sample is replaced by the next one of its category (ok2.png, sample
     * 3; bad.png is sample 1, category 1), recorded once however often it is asked for */
    s.skip_bad = 1;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    static float xa[3 * 64 * 64], xb[3 * 64 * 64];
    int32_t ca = -1, cb = -1;
    void *da[2] = {xa, &ca}, *db[2] = {xb, &cb}; /* fields x, category */
    for (int rep = 0; rep < 2; rep++) REQUIRE_OK(ds.make(ds.make_user, 1, 0, 0, da, &err), &err);
    REQUIRE_OK(ds.make(ds.make_user, 3, 0, 0, db, &err), &err);
    int64_t which = -1;
    const char *file = NULL, *why = brisk_image_dataset_skip(&ds, 0, &which, &file);
    CHECK(memcmp(xa, xb, sizeof xa) == 0 && ca == 1 && cb == 1);
    CHECK(brisk_image_dataset_skips(&ds) == 1 && which == 1 && why && strstr(why, "bad.png: corrupt or truncated PNG") &&
          file && strstr(file, "/bad.png"));
    brisk_dataset_free(&ds);
    s.skip_bad = 0;
    s.verify = 1;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) != BRISK_OK && has(&err, "bad.png"));
    s.skip_bad = 1;
    brisk_image_report r;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, &r, &err), &err);
    CHECK(ds.count == 3 && r.corrupt == 1);
    brisk_dataset_free(&ds);
#endif
}

static void test_bad_labels(void) {
    const char *csv[] = {"name,category\na.png,1\n", "file,category\na.png,x\n", "file,category\na.png,-1\n",
                         "file,x0,y0,v0\na.png,1,2,3\n", "file,x0,y0,v0\na.png,1,2\n", "file,x0,y0\n",
                         "file,x0,y1,v0\na.png,1,2,1\n", "file,category\n", "", "file,x0,y0,v0\na.png,1,nan,1\n"};
    const char *msg[] = {"header starting with 'file'", "line 2, column 'category': expected an integer >= 0",
                         "expected an integer >= 0", "column 'v0': expected 0, 1 or 2", "3 fields; the header has 4",
                         "2 keypoint columns", "expected 'y0'", "a header but no images", "empty",
                         "column 'y0': expected a finite number"};
    for (int i = 0; i < 10; i++) {
        char p[1200];
        tpath(p, sizeof p, "bad_labels.csv");
        write_file(p, csv[i], strlen(csv[i]));
        brisk_image_spec s = base_spec(p);
        brisk_dataset ds;
        brisk_error err;
        CHECKF(brisk_image_dataset_load(&ds, &s, NULL, &err) != BRISK_OK && has(&err, "bad_labels.csv") && has(&err, msg[i]),
               "labels case %d", i);
    }
    /* bad settings */
    brisk_image_spec s = base_spec("x.csv");
    brisk_dataset ds;
    brisk_error err;
    s.width = 0;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_INVALID && has(&err, "sample size"));
    s = base_spec("x.csv"), s.flip = 2;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_INVALID && has(&err, "flip probability"));
    s = base_spec("x.csv"), s.std[0] = -1;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_INVALID && has(&err, "std[0]"));
#ifdef BRISK_HAVE_PNG
    char lp[1300];
    s = base_spec(synth_labels(lp, sizeof lp)), s.nflip_pairs = 1, s.flip_pairs[0][1] = 4;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_INVALID && has(&err, "names keypoint 4"));
#else
    /* without libpng a PNG named by the labels is one clear error naming it */
    char p[1200], lp[1200];
    tpath(p, sizeof p, "a.png");
    write_file(p, "\x89PNG\r\n\x1a\n\0\0\0\0", 12);
    tpath(lp, sizeof lp, "nolib.csv");
    write_file(lp, "file\na.png\n", 11);
    s = base_spec(lp);
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "a.png") &&
          has(&err, "without libpng"));
#endif
}

/* An NPY of u8 images [N, H, W, 3], written by hand (brisk writes only f32/i32 arrays). */
static void test_npy_images(void) {
    char p[1200];
    tpath(p, sizeof p, "imgs.npy");
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '|u1', 'fortran_order': False, 'shape': (5, 64, 64, 3), }");
    while ((10 + n + 1) % 64) hdr[n++] = ' ';
    hdr[n++] = '\n';
    size_t pix = 5 * 64 * 64 * 3, len = 10 + (size_t)n + pix;
    uint8_t *b = malloc(len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)n, b[9] = 0;
    memcpy(b + 10, hdr, (size_t)n);
    for (size_t i = 0; i < pix; i++) b[10 + n + i] = (uint8_t)(i * 7);
    write_file(p, b, len);
    brisk_image_spec s = base_spec(p);
    brisk_dataset ds;
    brisk_error err;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    CHECK(ds.count == 5 && ds.nfields == 1);
    static float x[3 * 4096];
    void *dst[1] = {x};
    REQUIRE_OK(ds.make(ds.make_user, 2, 0, 0, dst, &err), &err);
    const uint8_t *img = b + 10 + n + 2 * 64 * 64 * 3;
    CHECK(x[0] == img[0] / 255.0f && x[4096 + 5] == img[5 * 3 + 1] / 255.0f && x[2 * 4096 + 4095] == img[4095 * 3 + 2] / 255.0f);
    brisk_dataset_free(&ds);
    s.width = 32;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_SHAPE && has(&err, "imgs.npy") &&
          has(&err, "64 x 64 pixels; expected 32 x 64"));
    free(b);
}

static void test_episodes(void) {
    enum { N = 60 };
    int32_t cat[N];
    for (int i = 0; i < N; i++) cat[i] = i < 50 ? i % 5 : 9; /* 5 categories of 10, category 9 of 10 */
    cat[0] = 7;                                                /* category 7: one sample, never eligible */
    brisk_episodes e;
    brisk_error err;
    REQUIRE_OK(brisk_episodes_init(&e, cat, NULL, N, 3, 4, &err), &err);
    CHECK(e.ncat == 6);
    int drawn[10] = {0};
    for (uint64_t ep = 0; ep < 600; ep++) {
        int64_t sup[3], qry[4], sup2[3], qry2[4];
        int32_t c, c2;
        brisk_episodes_draw(&e, 5, ep, sup, qry, &c);
        brisk_episodes_draw(&e, 5, ep, sup2, qry2, &c2);
        CHECK(c == c2 && !memcmp(sup, sup2, sizeof sup) && !memcmp(qry, qry2, sizeof qry));
        drawn[c]++;
        int64_t all[7] = {sup[0], sup[1], sup[2], qry[0], qry[1], qry[2], qry[3]};
        for (int i = 0; i < 7; i++) {
            CHECK(all[i] >= 0 && all[i] < N && cat[all[i]] == c);
            for (int j = 0; j < i; j++) CHECK(all[i] != all[j]);
        }
    }
    CHECK(drawn[7] == 0);
    for (int c = 0; c < 10; c++)
        if (c != 7 && (c < 5 || c == 9)) CHECKF(drawn[c] > 60 && drawn[c] < 140, "category %d drawn %d of 600", c, drawn[c]);
    int64_t s1[3], q1[4], s2[3], q2[4];
    int32_t c1, c2;
    brisk_episodes_draw(&e, 5, 1, s1, q1, &c1);
    brisk_episodes_draw(&e, 6, 1, s2, q2, &c2);
    CHECK(c1 != c2 || memcmp(s1, s2, sizeof s1) || memcmp(q1, q2, sizeof q1));
    brisk_episodes_free(&e);
    CHECK(brisk_episodes_init(&e, cat, NULL, N, 8, 4, &err) == BRISK_ERR_INVALID && has(&err, "no category has 12 samples") &&
          has(&err, "largest has 10"));
    CHECK(brisk_episodes_init(&e, cat, NULL, N, 0, 4, &err) == BRISK_ERR_INVALID);
}

/* Episodic batches from the loader: each batch one category, its support then query samples
 * from the training subset only, the same after a resume mid-epoch. */
static void test_episode_batches(void) {
#ifdef BRISK_HAVE_PNG
    char lp[1300];
    brisk_error err;
    brisk_image_spec s = base_spec(synth_labels(lp, sizeof lp));
    brisk_dataset ds;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    const int32_t *cat = (const int32_t *)brisk_dataset_get(&ds, "category")->data;
    int64_t subset[20];
    for (int i = 0; i < 20; i++) subset[i] = i + 4; /* samples 0-3 held out */
    brisk_episodes e;
    REQUIRE_OK(brisk_episodes_init(&e, cat, subset, 20, 2, 1, &err), &err);
    int32_t got[2][12][3];
    for (int run = 0; run < 2; run++) {
        /* run 1 resumes at epoch 1, position 3 (the second batch of epoch 1) */
        brisk_loader_config c = {.dataset = &ds, .indices = subset, .nindices = 20, .batch_size = 3, .seed = 4,
                                 .episodes = &e, .workers = 2, .prefetch = 1, .plain = 1,
                                 .start_epoch = run ? 1 : 0, .start_position = run ? 3 : 0};
        brisk_loader *l;
        REQUIRE_OK(brisk_loader_create(&l, &c, &err), &err);
        CHECK(brisk_loader_batches_per_epoch(l) == 6);
        for (int b = 0; b < (run ? 5 : 12); b++) {
            brisk_batch bt;
            REQUIRE_OK(brisk_loader_next(l, &bt, &err), &err);
            const int32_t *bc = (const int32_t *)bt.fields[3].data;
            memcpy(got[run][run ? b + 7 : b], bc, sizeof got[0][0]);
            CHECK(bc[0] == bc[1] && bc[1] == bc[2]);
            brisk_loader_release(l, &bt);
        }
        brisk_loader_destroy(l);
    }
    CHECK(memcmp(got[0][7], got[1][7], 5 * sizeof got[0][0]) == 0);
    int64_t sup[2], qry[1];
    brisk_episodes_draw(&e, 4, 0, sup, qry, NULL);
    CHECK(sup[0] >= 4 && sup[1] >= 4 && qry[0] >= 4 && sup[0] != sup[1] && sup[0] != qry[0] && sup[1] != qry[0]);
    brisk_loader_config bad = {.dataset = &ds, .batch_size = 4, .episodes = &e};
    brisk_loader *l;
    CHECK(brisk_loader_create(&l, &bad, &err) == BRISK_ERR_INVALID && has(&err, "expected 3"));
    brisk_episodes_free(&e);
    brisk_dataset_free(&ds);
#endif
}

/* A folder mixing JPEG and PNG, grayscale converted by option, resized to the output. */
static void test_jpeg_gray_resize(void) {
#if defined(BRISK_HAVE_PNG) && defined(BRISK_HAVE_JPEG)
    char dir[1200], p[1300];
    brisk_error err;
    tpath(dir, sizeof dir, "mixed");
    mkdir(dir, 0755);
    static uint8_t px[48 * 40 * 3];
    for (int i = 0; i < 48 * 40 * 3; i++) px[i] = (uint8_t)(100 + (i % 7));
    size_t n;
    uint8_t *j = jpeg_encode(px, 48, 40, 3, 0, &n);
    snprintf(p, sizeof p, "%s/a.jpg", dir);
    write_file(p, j, n);
    free(j);
    j = jpeg_encode(px, 48, 40, 1, 1, &n); /* gray, progressive */
    snprintf(p, sizeof p, "%s/g.jpg", dir);
    write_file(p, j, n);
    free(j);
    snprintf(p, sizeof p, "%s/b.png", dir);
    REQUIRE_OK(brisk_png_write(p, px, 48, 40, 3, &err), &err);
    brisk_image_spec s = base_spec(labels_in(p, sizeof p, dir, "file,category\na.jpg,0\ng.jpg,1\nb.png,0\n"));
    s.width = 24, s.height = 20;
    brisk_dataset ds;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_SHAPE && has(&err, "a.jpg") &&
          has(&err, "48 x 40"));
    s.resize = 1;
    CHECK(brisk_image_dataset_load(&ds, &s, NULL, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "g.jpg") &&
          has(&err, "grayscale"));
    s.decode.gray_to_rgb = 1;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    static float x[3 * 24 * 20];
    int32_t c;
    for (int64_t i = 0; i < 3; i++) {
        void *dst[2] = {x, &c};
        REQUIRE_OK(ds.make(ds.make_user, i, 0, 0, dst, &err), &err);
        float lo = 1, hi = 0;
        for (int k = 0; k < 3 * 24 * 20; k++) lo = x[k] < lo ? x[k] : lo, hi = x[k] > hi ? x[k] : hi;
        CHECKF(lo > 90 / 255.0f && hi < 116 / 255.0f, "sample %lld in [%g, %g]", (long long)i, (double)lo, (double)hi);
        CHECK(c == (i == 1));
    }
    brisk_dataset_free(&ds);
#endif
}

/* A folder as the dataset (what predict reads): its PNG files in name order, x only, the same
 * samples as through the labels CSV; and the keypoints CSV predict writes. */
static void test_folder_and_keypoints_csv(void) {
#ifdef BRISK_HAVE_PNG
    char lp[1300], out[1300];
    brisk_error err;
    brisk_image_spec s = base_spec(synth_labels(lp, sizeof lp));
    brisk_dataset csv, dir;
    REQUIRE_OK(brisk_image_dataset_load(&csv, &s, NULL, &err), &err);
    s.labels = synth_dir;
    brisk_image_report rep;
    REQUIRE_OK(brisk_image_dataset_load(&dir, &s, &rep, &err), &err);
    CHECK(dir.count == 24 && rep.listed == 24 && dir.nfields == 1 && rep.keypoints == 0);
    CHECK(strstr(brisk_image_dataset_path(&dir, 5), "/img_000005.png") && !brisk_image_dataset_path(&dir, 24) &&
          !brisk_image_dataset_path(&dir, -1));
    static float a[3 * 64 * 64], b[3 * 64 * 64];
    float y[8], vis[4];
    int32_t cat;
    sample(&csv, 5, 0, 0, a, y, vis, &cat);
    void *dst[1] = {b};
    REQUIRE_OK(dir.make(dir.make_user, 5, 0, 0, dst, &err), &err);
    CHECK(memcmp(a, b, sizeof a) == 0);
    brisk_dataset_free(&dir);
    brisk_dataset_free(&csv);
    tpath(out, sizeof out, "empty_folder");
    mkdir(out, 0755);
    s.labels = out;
    CHECK(brisk_image_dataset_load(&dir, &s, NULL, &err) == BRISK_ERR_INVALID && has(&err, "no usable .png"));
    const char *files[2] = {"/some/where/a.png", "b.jpg"};
    const float xy[8] = {1, 2, 3, 4, 5.5f, 6.25f, 7, 8};
    tpath(out, sizeof out, "kp.csv");
    REQUIRE_OK(brisk_keypoints_csv_write(out, files, 2, 2, xy, &err), &err);
    size_t n;
    char *text = (char *)read_file(out, &n);
    static const char want[] = "file,x0,y0,x1,y1\na.png,1.000,2.000,3.000,4.000\nb.jpg,5.500,6.250,7.000,8.000\n";
    CHECKF(text && n == strlen(want) && memcmp(text, want, n) == 0, "%.*s", (int)n, text ? text : "");
    free(text);
    files[1] = "b,c.png";
    CHECK(brisk_keypoints_csv_write(out, files, 2, 2, xy, &err) == BRISK_ERR_INVALID && has(&err, "'b,c.png'"));
#endif
}

/* data.images.fit "pad": a 64 x 32 image in a 32 x 32 sample is the 32 x 16 stretched
 * sample in rows 8..23 and padding (0, the mean) above and below; a keypoint lands where
 * the picture put it, and brisk_image_dataset_to_pixels maps the fractions back. A flip
 * mirrors the whole sample, padding included. */
static void test_letterbox(void) {
#ifdef BRISK_HAVE_PNG
    char dir[1200], p[1300];
    brisk_error err;
    tpath(dir, sizeof dir, "letterbox");
    mkdir(dir, 0755);
    static uint8_t px[32 * 64 * 3];
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 64; x++)
            for (int c = 0; c < 3; c++) px[(y * 64 + x) * 3 + c] = test_pixel(x, y, c);
    snprintf(p, sizeof p, "%s/wide.png", dir);
    REQUIRE_OK(brisk_png_write(p, px, 64, 32, 3, &err), &err);
    brisk_image_spec s = base_spec(labels_in(p, sizeof p, dir, "file,x0,y0,v0,x1,y1,v1\nwide.png,32,16,2,8.5,4,2\n"));
    s.width = 32, s.height = 16, s.resize = 1;
    brisk_dataset ds;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    static float stretched[3 * 16 * 32], boxed[3 * 32 * 32];
    float y[4], vis[2];
    sample(&ds, 0, 0, 0, stretched, y, vis, NULL);
    brisk_dataset_free(&ds);
    s.height = 32, s.pad = 1;
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    sample(&ds, 0, 0, 0, boxed, y, vis, NULL);
    int same = 1, padded = 1;
    for (int c = 0; c < 3; c++)
        for (int r = 0; r < 32; r++)
            for (int x = 0; x < 32; x++) {
                float v = boxed[(c * 32 + r) * 32 + x];
                if (r < 8 || r >= 24) padded &= v == 0;
                else same &= v == stretched[(c * 16 + r - 8) * 32 + x];
            }
    CHECK(same && padded);
    CHECKF(y[0] == 0.5f && y[1] == 0.5f && vis[0] == 1 && fabsf(y[2] - 4.25f / 32) < 1e-6f && y[3] == 10.0f / 32,
           "keypoints at (%g, %g) and (%g, %g)", (double)y[0], (double)y[1], (double)y[2], (double)y[3]);
    float back[4];
    REQUIRE_OK(brisk_image_dataset_to_pixels(&ds, 0, 2, y, back, &err), &err);
    CHECKF(fabsf(back[0] - 32) < 1e-4f && fabsf(back[1] - 16) < 1e-4f && fabsf(back[2] - 8.5f) < 1e-4f &&
           fabsf(back[3] - 4) < 1e-4f, "back (%g, %g), (%g, %g)", (double)back[0], (double)back[1], (double)back[2],
           (double)back[3]);
    /* flipped: the sample mirrored as a whole, the keypoint's x mirrored */
    s.flip = 1;
    brisk_dataset_free(&ds);
    REQUIRE_OK(brisk_image_dataset_load(&ds, &s, NULL, &err), &err);
    static float flipped[3 * 32 * 32];
    sample(&ds, 0, 0, 1, flipped, y, vis, NULL);
    int mirrored = 1;
    for (int c = 0; c < 3; c++)
        for (int r = 0; r < 32; r++)
            for (int x = 0; x < 32; x++) mirrored &= flipped[(c * 32 + r) * 32 + x] == boxed[(c * 32 + r) * 32 + 31 - x];
    CHECK(mirrored && y[0] == 0.5f && fabsf(y[2] - (1 - 4.25f / 32)) < 1e-6f);
    brisk_dataset_free(&ds);
#endif
}

TEST_MAIN(T(test_synth_roundtrip), T(test_flip_swaps_keypoints), T(test_crop_moves_keypoints),
          T(test_loader_threads_deterministic), T(test_bad_inputs), T(test_bad_labels), T(test_npy_images),
          T(test_episodes), T(test_episode_batches), T(test_jpeg_gray_resize),
          T(test_folder_and_keypoints_csv), T(test_letterbox))
