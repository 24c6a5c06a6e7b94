/* The cuDNN convolution algorithm cache file (src/backend/cuda/conv_algo_cache.h), in every
 * build and without a GPU: keys, the path beside the GEMM cache, a save/load round trip,
 * and malformed files refused whole with the file, the line and what was expected; the
 * layout decision (conv_layout.h): timings -> choice, the rule, forced modes, which
 * operands are converted, and the layout choice's own cache entry; which of cuDNN's
 * algorithms a plan may use (workspace, deterministic mode). In CUDA builds where
 * cuDNN 9 is installed (no GPU needed), cuDNN accepts the descriptors the convolution plans
 * set up, for each precision (fp32, bf16 and fp16 data), layout and window. */
#include "backend/cuda/conv_algo_cache.h"
#include "backend/cuda/conv_layout.h"
#include "test.h"
#if BRISK_HAVE_CUDA
#include "backend/cuda/cudnn_conv.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const conv_algo_device dev = {.gpu_name = "NVIDIA H100\t80GB", .cc_major = 9, .cc_minor = 0, .sms = 132,
                                     .cudnn_version = 90100};

static conv_algo_shape shape(conv_pass pass, int groups, conv_math math, int det) {
    conv_algo_shape s = {.pass = pass, .n = 32, .c = 64, .h = 56, .w = 56, .co = 128, .math = math, .nhwc = 1,
                         .deterministic = det};
    s.win = brisk_window_2d(3, 2, 1);
    s.win.groups = groups;
    return s;
}

static void test_path_beside_gemm_cache(void) {
    char p[1100];
    conv_cache_path_beside("/home/u/.cache/brisk/gemm-autotune.txt", p, sizeof p);
    CHECKF(strcmp(p, "/home/u/.cache/brisk/" CONV_CACHE_FILE) == 0, "%s", p);
    conv_cache_path_beside("tune.txt", p, sizeof p);
    CHECKF(strcmp(p, CONV_CACHE_FILE) == 0, "%s", p);
    conv_cache_path_beside("", p, sizeof p); /* --autotune-cache - : no file for either cache */
    CHECK(p[0] == 0);
}

static void test_keys(void) {
    char a[CONV_CACHE_KEY_MAX], b[CONV_CACHE_KEY_MAX];
    brisk_error err = {0};
    CHECK(conv_cache_key(&dev, &(conv_algo_shape){0}, a, sizeof a, &err) == BRISK_OK);
    conv_algo_shape s = shape(CONV_PASS_FWD, 1, CONV_MATH_BF16, 0);
    CHECK(conv_cache_key(&dev, &s, a, sizeof a, &err) == BRISK_OK);
    CHECKF(!strchr(a, '\t') && strstr(a, "H100 80GB") && strstr(a, "cudnn 90100") && strstr(a, "bf16 nhwc"), "%s", a);
    /* every field that changes the choice changes the key */
    conv_algo_shape v[6] = {shape(CONV_PASS_BWD_DATA, 1, CONV_MATH_BF16, 0), shape(CONV_PASS_FWD, 2, CONV_MATH_BF16, 0),
                            shape(CONV_PASS_FWD, 1, CONV_MATH_FP16, 0), shape(CONV_PASS_FWD, 1, CONV_MATH_BF16, 1), s,
                            s};
    v[4].nhwc = 0;
    v[5].win.dh = 2;
    for (int i = 0; i < 6; i++) {
        CHECK(conv_cache_key(&dev, &v[i], b, sizeof b, &err) == BRISK_OK);
        CHECKF(strcmp(a, b) != 0, "variant %d: %s", i, b);
    }
    conv_algo_device other = dev;
    other.cudnn_version = 90200;
    CHECK(conv_cache_key(&other, &s, b, sizeof b, &err) == BRISK_OK && strcmp(a, b) != 0);
    char small[16];
    CHECK(conv_cache_key(&dev, &s, small, sizeof small, &err) == BRISK_ERR_INVALID && strstr(err.msg, "key"));
}

static void test_round_trip(void) {
    char dir[] = "/tmp/brisk_conv_cache_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    conv_algo_cache c = {0};
    snprintf(c.path, sizeof c.path, "%s/sub/%s", dir, CONV_CACHE_FILE);
    brisk_error err = {0};
    CHECKF(conv_cache_load(&c, &err) == BRISK_OK && c.n == 0, "%s", err.msg); /* no file yet: empty */
    char keys[3][CONV_CACHE_KEY_MAX];
    for (int p = 0; p < 3; p++) {
        conv_algo_shape s = shape((conv_pass)p, 1, CONV_MATH_TF32, p == 2);
        CHECK(conv_cache_key(&dev, &s, keys[p], sizeof keys[p], &err) == BRISK_OK);
        CHECK(conv_cache_put(&c, keys[p], 7 - p, &err) == BRISK_OK);
    }
    CHECK(conv_cache_put(&c, keys[0], 1, &err) == BRISK_OK && c.n == 3); /* replaced, not added */
    CHECK(conv_cache_put(&c, "a\tb", 1, &err) == BRISK_ERR_INVALID);
    CHECK(conv_cache_put(&c, keys[1], CONV_CACHE_ALGO_MAX + 1, &err) == BRISK_ERR_INVALID);
    CHECK(c.dirty);
    CHECKF(conv_cache_save(&c, &err) == BRISK_OK && !c.dirty, "%s", err.msg);
    char *first = conv_cache_format(&c);
    conv_algo_cache d = {0};
    memcpy(d.path, c.path, sizeof d.path);
    CHECKF(conv_cache_load(&d, &err) == BRISK_OK && d.n == 3 && !d.dirty, "%s", err.msg);
    CHECK(conv_cache_get(&d, keys[0]) == 1 && conv_cache_get(&d, keys[1]) == 6 && conv_cache_get(&d, keys[2]) == 5);
    CHECK(conv_cache_get(&d, "nothing") == -1);
    char *second = conv_cache_format(&d);
    CHECK(first && second && strcmp(first, second) == 0);
    free(first);
    free(second);
    remove(d.path);
    char sub[1200];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    rmdir(sub);
    rmdir(dir);
    conv_cache_free(&c);
    conv_cache_free(&d);
}

static void test_bad_files(void) {
    const char *h = CONV_CACHE_HEADER "\n";
    struct {
        const char *tail, *want;
        int line;
    } bad[] = {
        {"", "empty", 0},
        {"key\t3\n", "header", 1},
        {NULL, "no tab", 2},
        {NULL, "algorithm number", 2},
        {NULL, "algorithm number", 2},
        {NULL, "algorithm number", 2},
        {NULL, "each key once", 3},
        {NULL, "no newline", 2},
        {NULL, "key of", 2},
    };
    const char *bodies[] = {"k 3\n", "k\t64\n", "k\t-1\n", "k\t\n", "k\t1\nk\t2\n", "k\t1", "\t1\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        if (bad[i].tail) snprintf(text, sizeof text, "%s", bad[i].tail);
        else snprintf(text, sizeof text, "%s%s", h, bodies[i - 2]);
        conv_algo_cache c = {0};
        brisk_error err = {0};
        brisk_status s = conv_cache_parse(&c, text, "/x/cache.txt", &err);
        char line[32];
        snprintf(line, sizeof line, "line %d", bad[i].line);
        CHECKF(s == BRISK_ERR_FORMAT && c.n == 0 && strstr(err.msg, "/x/cache.txt") && strstr(err.msg, bad[i].want) &&
                   (bad[i].line == 0 || strstr(err.msg, line)),
               "case %zu: %s", i, err.msg);
        conv_cache_free(&c);
    }
    conv_algo_cache c = {0};
    brisk_error err = {0};
    CHECK(conv_cache_parse(&c, h, "ok", &err) == BRISK_OK && c.n == 0); /* header only */
    CHECK(conv_cache_parse(&c, CONV_CACHE_HEADER "\nk\t63\n", "ok", &err) == BRISK_OK && conv_cache_get(&c, "k") == 63);
    conv_cache_free(&c);

    /* a file on disk with a NUL byte, and one that cannot be read */
    char path[] = "/tmp/brisk_conv_cache_bad_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "# x\0y\n", 6) == 6);
    close(fd);
    snprintf(c.path, sizeof c.path, "%s", path);
    CHECKF(conv_cache_load(&c, &err) == BRISK_ERR_FORMAT && strstr(err.msg, path) && strstr(err.msg, "NUL"), "%s",
           err.msg);
    remove(path);
    snprintf(c.path, sizeof c.path, "/tmp");
    CHECKF(conv_cache_load(&c, &err) != BRISK_OK && strstr(err.msg, "/tmp"), "%s", err.msg);
    conv_cache_free(&c);
}

static void test_layout_pick(void) {
    char why[96];
    /* timed: the sum of convolution and conversions decides; a tie keeps the graph's layout */
    conv_layout_costs c = {.conv_ms = {1.0, 0.6}, .convert_ms = {0.0, 0.3}};
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &c, 0, why, sizeof why) == 1 && strstr(why, "timed"));
    c.convert_ms[1] = 0.5; /* 1.1 > 1.0: the transposes eat NHWC's gain */
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &c, 0, why, sizeof why) == 0);
    c.convert_ms[1] = 0.4; /* exactly 1.0 each: the graph's layout, either way */
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &c, 0, why, sizeof why) == 0);
    conv_layout_costs t = {.conv_ms = {0.5, 0.5}, .convert_ms = {0.0, 0.0}};
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &t, 1, why, sizeof why) == 1);
    /* an NHWC graph: NCHW costs the transposes now */
    conv_layout_costs n = {.conv_ms = {0.5, 0.7}, .convert_ms = {0.3, 0.0}};
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &n, 1, why, sizeof why) == 1);
    /* no algorithm in one layout: the other; in neither: -1 */
    conv_layout_costs m = {.conv_ms = {-1, 5.0}, .convert_ms = {0, 9.0}};
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &m, 0, why, sizeof why) == 1 && strstr(why, "no algorithm"));
    m.conv_ms[1] = -1;
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_AUTO, &m, 0, why, sizeof why) == -1);
    /* a forced mode wins over timings, unless its layout has no algorithm */
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_NCHW, &c, 0, why, sizeof why) == 0);
    c.convert_ms[1] = 9;
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_NHWC, &c, 0, why, sizeof why) == 1 && strstr(why, "conv_layout"));
    conv_layout_costs f = {.conv_ms = {1.0, -1}};
    CHECK(conv_layout_pick(BRISK_CONV_LAYOUT_NHWC, &f, 0, why, sizeof why) == 0 && strstr(why, "no algorithm"));
}

static void test_layout_rule(void) {
    char why[96];
    /* 16-bit data with channels in multiples of 8: NHWC, from either graph layout */
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_AUTO, 1, 0, 64, 128, why, sizeof why) == 1 && strstr(why, "16-bit"));
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_AUTO, 2, 1, 64, 128, why, sizeof why) == 1);
    /* the RGB stem (C = 3) and fp32 keep the graph's layout */
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_AUTO, 1, 0, 3, 64, why, sizeof why) == 0 && strstr(why, "graph"));
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_AUTO, 0, 0, 64, 64, why, sizeof why) == 0);
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_AUTO, 0, 1, 64, 64, why, sizeof why) == 1);
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_NHWC, 0, 0, 3, 5, why, sizeof why) == 1);
    CHECK(conv_layout_rule(BRISK_CONV_LAYOUT_NCHW, 1, 1, 64, 64, why, sizeof why) == 0);
    /* names, and the precision's data type and key math */
    CHECK(conv_layout_parse("auto") == BRISK_CONV_LAYOUT_AUTO && conv_layout_parse("nhwc") == BRISK_CONV_LAYOUT_NHWC &&
          conv_layout_parse("nchw") == BRISK_CONV_LAYOUT_NCHW && conv_layout_parse("NHWC") == -1 &&
          conv_layout_parse(NULL) == -1);
    CHECK(!strcmp(conv_layout_name(BRISK_CONV_LAYOUT_NHWC), "nhwc"));
    CHECK(conv_data_type(BRISK_GEMM_FP32) == 0 && conv_data_type(BRISK_GEMM_TF32) == 0 &&
          conv_data_type(BRISK_GEMM_BF16) == 1 && conv_data_type(BRISK_GEMM_FP16) == 2);
    CHECK(conv_math_of(BRISK_GEMM_FP32) == CONV_MATH_FP32 && conv_math_of(BRISK_GEMM_TF32) == CONV_MATH_TF32 &&
          conv_math_of(BRISK_GEMM_BF16) == CONV_MATH_BF16 && conv_math_of(BRISK_GEMM_FP16) == CONV_MATH_FP16);
    /* the form a plan runs in keys its algorithms as the precision of that form would */
    for (int p = BRISK_GEMM_FP32; p <= BRISK_GEMM_FP16; p++)
        CHECKF(conv_math_of_form(conv_data_type(p), p == BRISK_GEMM_FP32) == conv_math_of(p), "precision %d", p);
    CHECK(conv_math_of_form(0, 0) == CONV_MATH_TF32 && conv_math_of_form(0, 1) == CONV_MATH_FP32);
}

/* Under 16-bit precision, fp32 with TF32 math only where strictly faster. */
static void test_precision_pick(void) {
    CHECK(conv_precision_pick(0.48, 0.11) == 1);
    CHECK(conv_precision_pick(0.10, 0.11) == 0);
    CHECK(conv_precision_pick(0.11, 0.11) == 0);  /* a tie keeps the precision asked for */
    CHECK(conv_precision_pick(-1, 0.2) == 1);     /* no 16-bit algorithm runs */
    CHECK(conv_precision_pick(0.2, -1) == 0);
    CHECK(conv_precision_pick(-1, -1) == 0);
}

static void test_converted_operands(void) {
    /* fp32 in the graph's layout: nothing converted (w is OIHW = cuDNN's NCHW filter) */
    CHECK(!conv_operand_converted(0, 0, 0, 0) && !conv_operand_converted(1, 0, 0, 0));
    /* fp32, NCHW graph in NHWC: activations and w transposed */
    CHECK(conv_operand_converted(0, 0, 1, 0) && conv_operand_converted(1, 0, 1, 0));
    /* fp32, NHWC graph in NHWC: only w (OIHW -> KRSC) */
    CHECK(!conv_operand_converted(0, 0, 1, 1) && conv_operand_converted(1, 0, 1, 1));
    /* NHWC graph in NCHW: the activations */
    CHECK(conv_operand_converted(0, 0, 0, 1) && !conv_operand_converted(1, 0, 0, 1));
    /* 16 bits: everything is cast */
    for (int l = 0; l < 4; l++)
        CHECK(conv_operand_converted(0, 1, l & 1, l >> 1) && conv_operand_converted(1, 2, l & 1, l >> 1));
}

/* The layout choice has its own entry: differs from both layouts' algorithm keys and by the
 * graph's layout; it round-trips through the file like an algorithm (value 0 or 1). */
static void test_layout_keys(void) {
    conv_algo_shape s = shape(CONV_PASS_FWD, 1, CONV_MATH_BF16, 0);
    char k[4][CONV_CACHE_KEY_MAX];
    brisk_error err = {0};
    s.nhwc = CONV_KEY_NCHW;
    CHECK(conv_cache_key(&dev, &s, k[0], sizeof k[0], &err) == BRISK_OK);
    s.nhwc = CONV_KEY_NHWC;
    CHECK(conv_cache_key(&dev, &s, k[1], sizeof k[1], &err) == BRISK_OK);
    CHECK(conv_cache_layout_key(&dev, &s, 0, k[2], sizeof k[2], &err) == BRISK_OK);
    CHECK(conv_cache_layout_key(&dev, &s, 1, k[3], sizeof k[3], &err) == BRISK_OK);
    CHECKF(strstr(k[2], "bf16 form from nchw") && strstr(k[3], "form from nhwc"), "%s / %s", k[2], k[3]);
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) CHECKF(strcmp(k[i], k[j]) != 0, "keys %d and %d: %s", i, j, k[i]);
    conv_algo_cache c = {0};
    CHECK(conv_cache_put(&c, k[2], 1, &err) == BRISK_OK && conv_cache_put(&c, k[1], 7, &err) == BRISK_OK);
    char *text = conv_cache_format(&c);
    conv_algo_cache d = {0};
    CHECK(text && conv_cache_parse(&d, text, "mem", &err) == BRISK_OK);
    CHECK(conv_cache_get(&d, k[2]) == 1 && conv_cache_get(&d, k[1]) == 7 && conv_cache_get(&d, k[3]) == -1);
    free(text);
    conv_cache_free(&c);
    conv_cache_free(&d);
}

/* Which of cuDNN's perf results a plan may choose: --deterministic refuses the atomic
 * algorithms even when a result calls them deterministic. */
static void test_algo_usable(void) {
    const size_t lim = (size_t)256 << 20;
    CHECK(conv_algo_atomic(CONV_PASS_BWD_DATA, 0) && !conv_algo_atomic(CONV_PASS_BWD_DATA, 1));
    CHECK(conv_algo_atomic(CONV_PASS_BWD_FILTER, 0) && conv_algo_atomic(CONV_PASS_BWD_FILTER, 3) &&
          !conv_algo_atomic(CONV_PASS_BWD_FILTER, 1));
    for (int a = 0; a < 8; a++) CHECKF(!conv_algo_atomic(CONV_PASS_FWD, a), "forward algorithm %d", a);
    /* outside deterministic mode anything that ran and fits */
    CHECK(conv_algo_usable(CONV_PASS_BWD_DATA, 0, 1, 1024, 0, 0, lim));
    CHECK(!conv_algo_usable(CONV_PASS_BWD_DATA, 1, 0, 1024, 1, 0, lim)); /* did not run */
    CHECK(!conv_algo_usable(CONV_PASS_FWD, 1, 1, lim + 1, 1, 0, lim));   /* too much workspace */
    CHECK(conv_algo_usable(CONV_PASS_FWD, 1, 1, lim, 1, 0, lim));
    CHECK(!conv_algo_usable(CONV_PASS_FWD, -1, 1, 0, 1, 0, lim) &&
          !conv_algo_usable(CONV_PASS_FWD, CONV_CACHE_ALGO_MAX + 1, 1, 0, 1, 0, lim));
    /* deterministic: the result's flag and the algorithm both */
    CHECK(!conv_algo_usable(CONV_PASS_BWD_DATA, 1, 1, 0, 0, 1, lim));
    CHECK(!conv_algo_usable(CONV_PASS_BWD_DATA, 0, 1, 0, 1, 1, lim));   /* mislabelled atomics */
    CHECK(!conv_algo_usable(CONV_PASS_BWD_FILTER, 3, 1, 0, 1, 1, lim));
    CHECK(conv_algo_usable(CONV_PASS_BWD_DATA, 1, 1, 0, 1, 1, lim));
    CHECK(conv_algo_usable(CONV_PASS_BWD_FILTER, 1, 1, 0, 1, 1, lim));
}

/* $BRISK_CUDA_REFUSE_CONV_LAYOUTS's values, and one clear error for anything else. */
static void test_refused_layouts(void) {
    unsigned m = 9;
    brisk_error err = {0};
    CHECK(conv_layout_parse_refused(NULL, &m, &err) == BRISK_OK && m == 0);
    CHECK(conv_layout_parse_refused("", &m, &err) == BRISK_OK && m == 0);
    CHECK(conv_layout_parse_refused("nchw", &m, &err) == BRISK_OK && m == 1);
    CHECK(conv_layout_parse_refused("nhwc", &m, &err) == BRISK_OK && m == 2);
    CHECK(conv_layout_parse_refused("nhwc,nchw", &m, &err) == BRISK_OK && m == 3);
    CHECK(conv_layout_parse_refused("nhwc,", &m, &err) == BRISK_OK && m == 2); /* a trailing comma ends it */
    const char *bad[] = {"NHWC", "nchw,nhw", "all", ",nchw", "nchw;nhwc"};
    for (int i = 0; i < 5; i++) {
        err.msg[0] = 0;
        CHECKF(conv_layout_parse_refused(bad[i], &m, &err) == BRISK_ERR_INVALID && m == 0 &&
                   strstr(err.msg, CONV_REFUSE_LAYOUTS_ENV),
               "\"%s\": %s", bad[i], err.msg);
    }
}

static void test_cudnn_on_host(void) {
#if BRISK_HAVE_CUDA
    const char *why = cuda_conv_missing();
    if (why) {
        printf("note: cuDNN descriptors not checked: %s\n", why);
        return;
    }
    brisk_window wins[4] = {brisk_window_2d(3, 1, 1), brisk_window_2d(3, 2, 1), brisk_window_2d(1, 1, 0),
                            brisk_window_2d(7, 2, 3)};
    wins[1].groups = 4;
    wins[2].dh = wins[2].dw = 2;
    brisk_gemm_precision precs[4] = {BRISK_GEMM_FP32, BRISK_GEMM_TF32, BRISK_GEMM_BF16, BRISK_GEMM_FP16};
    for (int p = 0; p < 4; p++)
        for (int nhwc = 0; nhwc < 2; nhwc++)
            for (int i = 0; i < 4; i++) {
                brisk_error err = {0};
                CHECKF(cuda_conv_check_descs(precs[p], nhwc, 2, 8, 17, 15, 16, wins[i], &err) == BRISK_OK,
                       "precision %d nhwc %d window %d: %s", p, nhwc, i, err.msg);
            }
#endif
}

TEST_MAIN(T(test_path_beside_gemm_cache), T(test_keys), T(test_round_trip), T(test_bad_files), T(test_layout_pick),
          T(test_layout_rule), T(test_precision_pick), T(test_converted_operands), T(test_layout_keys), T(test_algo_usable),
          T(test_refused_layouts), T(test_cudnn_on_host))
