/* CSV: column selection, number syntax, quoting, line ends, and errors that name file,
 * line and column. */
#include "brisk/data.h"
#include "data_test_util.h"
#include "test.h"

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static brisk_status parse(const char *text, const char *const *cols, int n, brisk_dtype dt, brisk_tensor *t,
                          brisk_error *err) {
    return brisk_csv_parse(text, strlen(text), "data/t.csv", cols, n, dt, t, err);
}

static void test_fixture(void) {
    brisk_error err;
    char p[1200];
    brisk_tensor t;
    const char *cols[] = {"volume", "price"};
    REQUIRE_OK(brisk_csv_read(fixture(p, sizeof p, "table.csv"), cols, 2, BRISK_F32, &t, &err), &err);
    REQUIRE(t.shape.ndim == 2 && t.shape.d[0] == 3 && t.shape.d[1] == 2);
    const float *v = (const float *)t.data;
    CHECK(v[0] == 1000.0f && v[1] == 2.5f && v[2] == 4.0f && v[3] == -3.25f && v[4] == 5.0f);
    CHECK_NEAR(v[5], 0.01, 1e-9);
    brisk_tensor_free(&t);
    const char *lab[] = {"label"};
    REQUIRE_OK(brisk_csv_read(p, lab, 1, BRISK_I32, &t, &err), &err);
    CHECK(t.shape.d[0] == 3 && ((int32_t *)t.data)[1] == 2 && ((int32_t *)t.data)[2] == 1);
    brisk_tensor_free(&t);
    REQUIRE_OK(brisk_csv_read(p, NULL, 0, BRISK_F32, &t, &err), &err);
    CHECK(t.shape.d[0] == 3 && t.shape.d[1] == 4 && ((float *)t.data)[8] == 3.0f);
    brisk_tensor_free(&t);
}

static void test_syntax(void) {
    brisk_error err;
    brisk_tensor t;
    /* BOM, quoted header, quoted fields with commas/quotes/newlines, spaces, exponents,
     * signs, nan and inf, LF without a final newline. */
    const char *text = "\xEF\xBB\xBF" "a,\"b, the second\",\"c \"\"q\"\"\"\n"
                       " 1 ,  -2.5e-3 ,+3\n"
                       "\"4\",\"5\",\"6\"\n"
                       "7e2,\"8\n\",.5\n"
                       "nan,inf,-Infinity";
    const char *cols[] = {"c \"q\"", "a", "b, the second"};
    REQUIRE_OK(parse(text, cols, 3, BRISK_F32, &t, &err), &err);
    REQUIRE(t.shape.d[0] == 4 && t.shape.d[1] == 3);
    const float *v = (const float *)t.data;
    CHECK(v[0] == 3 && v[1] == 1 && v[2] == -2.5e-3f);
    CHECK(v[3] == 6 && v[4] == 4 && v[5] == 5);
    CHECK(v[6] == 0.5f && v[7] == 700 && v[8] == 8);
    CHECK(isinf(v[9]) && v[9] < 0 && isnan(v[10]) && isinf(v[11]) && v[11] > 0);
    brisk_tensor_free(&t);
    /* CRLF, blank lines anywhere, an empty trailing line, CR-only line ends. */
    REQUIRE_OK(parse("x,y\r\n\r\n1,2\r\n   \r\n3,4\r\n\r\n", NULL, 0, BRISK_F32, &t, &err), &err);
    CHECK(t.shape.d[0] == 2 && ((float *)t.data)[3] == 4);
    brisk_tensor_free(&t);
    REQUIRE_OK(parse("x,y\r1,2\r3,4\r", NULL, 0, BRISK_I32, &t, &err), &err);
    CHECK(t.shape.d[0] == 2 && ((int32_t *)t.data)[2] == 3);
    brisk_tensor_free(&t);
    /* Integral floats and exponents are fine as labels. */
    const char *yc[] = {"y"};
    REQUIRE_OK(parse("y\n1.0\n2e0\n-2147483648\n2147483647\n", yc, 1, BRISK_I32, &t, &err), &err);
    CHECK(((int32_t *)t.data)[1] == 2 && ((int32_t *)t.data)[2] == INT32_MIN && ((int32_t *)t.data)[3] == INT32_MAX);
    brisk_tensor_free(&t);
}

static void test_errors(void) {
    brisk_error err;
    brisk_tensor t;
    const char *price[] = {"price"};
    const struct { const char *text; const char *const *cols; int n; brisk_dtype dt; brisk_status want;
                          const char *msg; } cases[] = {
        {"id,price\n1,2\n2,abc\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT,
         "data/t.csv: line 3, column 'price': expected a number, got 'abc'"},
        {"id,price\n1,\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 2, column 'price': expected a number, got ''"},
        {"id,price\n1,\"2\n3\"\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 2, column 'price': expected a number, got '2?3'"},
        {"id,price\n1,2x\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "got '2x'"},
        {"id,price\n1,\"2\n\n\"\n5,\"x\"\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 5, column 'price'"},
        {"id,prize,volume\n1,2,3\n", price, 1, BRISK_F32, BRISK_ERR_INVALID,
         "data/t.csv: no column 'price' in the header (available: 'id', 'prize', 'volume')"},
        {"id,price,price\n1,2,3\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "column 'price' appears twice"},
        {"id,price\n1,2\n3\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 3: expected 2 fields as in the header, got 1"},
        {"id,price\n1,2,\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 2: expected 2 fields"},
        {"id,price\n1,\"2\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 2: unterminated quoted field"},
        {"id,price\n1,\"2\"x\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "line 2: text after a closing quote"},
        {"", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "data/t.csv: empty file; expected a header row"},
        {"\n\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "empty file"},
        {"id,price\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "no data rows"},
        {"id,price\n1,1.5\n", price, 1, BRISK_I32, BRISK_ERR_FORMAT,
         "line 2, column 'price': expected an integer label (i32), got '1.5'"},
        {"id,price\n1,3e9\n", price, 1, BRISK_I32, BRISK_ERR_FORMAT, "got '3e9'"},
        {"id,price\n1,nan\n", NULL, 0, BRISK_I32, BRISK_ERR_FORMAT, "line 2, column 'price': expected an integer"},
        /* strtod's other forms: a cell is decimal (on the previous code 0x10 read as 16) */
        {"id,price\n1,0x10\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT,
         "line 2, column 'price': expected a number, got '0x10' (cells are read as decimal numbers only)"},
        {"id,price\n1,0x1p3\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "got '0x1p3' (cells are read as decimal"},
        {"id,price\n1,0x10\n", price, 1, BRISK_I32, BRISK_ERR_FORMAT, "got '0x10' (cells are read as decimal"},
        {"id,price\n1,1e\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "expected a number, got '1e'"},
        {"id,price\n1,nanx\n", price, 1, BRISK_F32, BRISK_ERR_FORMAT, "expected a number, got 'nanx'"},
        {"id,price\n1,2\n", price, 0, BRISK_F32, BRISK_ERR_INVALID, "no columns selected"},
        {"id,price\n1,2\n", price, 1, BRISK_BF16, BRISK_ERR_INVALID, "f32 or i32"},
    };
    for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memset(&err, 0, sizeof err);
        brisk_status st = parse(cases[k].text, cases[k].cols, cases[k].n, cases[k].dt, &t, &err);
        CHECKF(st == cases[k].want, "case %u -> %s (%s)", k, brisk_status_name(st), err.msg);
        if (st == BRISK_OK) brisk_tensor_free(&t);
        else CHECKF(has(&err, cases[k].msg), "case %u", k);
    }
    /* Not NUL-terminated: the parser must stop at len. */
    char buf[16];
    memcpy(buf, "a\n1\n2222222222", 14);
    REQUIRE_OK(brisk_csv_parse(buf, 4, "n.csv", NULL, 0, BRISK_F32, &t, &err), &err);
    CHECK(t.shape.d[0] == 1 && ((float *)t.data)[0] == 1);
    brisk_tensor_free(&t);
    CHECK(brisk_csv_read(T_ABSENT "/t.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_ERR_IO);
    CHECK(has(&err, T_ABSENT "/t.csv: cannot open"));
}

/* Many rows and columns: growth paths, and a stable result. */
static void test_large(void) {
    enum { R = 5000, C = 12 };
    size_t cap = (size_t)R * C * 16 + 256, k = 0;
    char *text = malloc(cap);
    for (int c = 0; c < C; c++) k += (size_t)snprintf(text + k, cap - k, "%scol%d", c ? "," : "", c);
    k += (size_t)snprintf(text + k, cap - k, "\n");
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            k += (size_t)snprintf(text + k, cap - k, "%d.25%s", r * C + c, c + 1 < C ? "," : "\r\n");
    brisk_error err;
    brisk_tensor t;
    const char *cols[] = {"col11", "col0"};
    REQUIRE_OK(brisk_csv_parse(text, k, "big.csv", cols, 2, BRISK_F32, &t, &err), &err);
    CHECK(t.shape.d[0] == R && ((float *)t.data)[2 * (R - 1)] == (float)((R - 1) * C + 11) + 0.25f);
    CHECK(((float *)t.data)[2 * (R - 1) + 1] == (float)((R - 1) * C) + 0.25f);
    brisk_tensor_free(&t);
    free(text);
}

/* A NUL byte in a cell is an error, not a cut; a record past the bounds is refused with its
 * line before it takes memory; a data row longer than the header stops at once. */
static void test_bounds(void) {
    brisk_error err;
    brisk_tensor t;
    const char nul[] = "a,b\n1,2\n3,4\0" "5\n";
    CHECK(brisk_csv_parse(nul, sizeof nul - 1, "n.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "n.csv: line 3, field 2: a NUL byte; expected text"));
    const char qnul[] = "a,b\n\"x\0y\",2\n";
    CHECK(brisk_csv_parse(qnul, sizeof qnul - 1, "q.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "q.csv: line 2, field 1: a NUL byte"));
    size_t n = (64u << 10) + 16;
    char *big = malloc(n + 16);
    REQUIRE(big);
    memcpy(big, "a\n", 2);
    memset(big + 2, '1', n - 3);
    big[n - 1] = '\n';
    CHECK(brisk_csv_parse(big, n, "long.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "long.csv: line 2: a record over the limits"));
    /* a row of a million commas after a 2-column header */
    size_t m = 4 + 2 + (1u << 20) + 1;
    char *wide = realloc(big, m);
    REQUIRE(wide);
    memcpy(wide, "a,b\n", 4);
    memset(wide + 4, ',', m - 5);
    wide[m - 1] = '\n';
    CHECK(brisk_csv_parse(wide, m, "w.csv", NULL, 0, BRISK_F32, &t, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "w.csv: line 2: more than the header's 2 fields"));
    free(wide);
}

TEST_MAIN(T(test_fixture), T(test_syntax), T(test_errors), T(test_large), T(test_bounds))
