/* The reports' SVG helper (report_svg.c): escaping, ranges, ticks, scales, lines broken at
 * NaN, empty series, bars; and brisk_report_run over small hand-written run directories
 * (NaN losses, a single step, resumed runs, damaged and missing files). */
#include <unistd.h>

#include "brisk/train.h"
#include "test.h"
#include "report/report_log.h"
#include "report/report_svg.h"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void escaping(void) {
    brisk_html b = {0};
    brisk_html_escape(&b, "<a href=\"x\">Tom & Jerry's</a>\x01\x1b[31m\tok\n");
    REQUIRE(b.s);
    CHECKF(strcmp(b.s, "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;[31m\tok\n") == 0, "%s", b.s);
    brisk_html_escape(&b, NULL); /* nothing, no crash */
    size_t len = b.len;
    brisk_html_printf(&b, "%d", 42);
    CHECK(b.len == len + 2 && strcmp(b.s + len, "42") == 0);
    brisk_html_free(&b);
    CHECK(b.s == NULL && b.len == 0);
}

static void ranges(void) {
    double lo, hi;
    double none[3] = {NAN, INFINITY, -INFINITY};
    CHECK(brisk_svg_range(none, 3, &lo, &hi) == 0 && lo == 0 && hi == 1);
    CHECK(brisk_svg_range(NULL, 0, &lo, &hi) == 0 && lo == 0 && hi == 1);
    double one[2] = {NAN, 5};
    CHECK(brisk_svg_range(one, 2, &lo, &hi) == 1);
    CHECK_NEAR(lo, 4.5, 1e-12);
    CHECK_NEAR(hi, 5.5, 1e-12);
    double zero[1] = {0};
    CHECK(brisk_svg_range(zero, 1, &lo, &hi) == 1 && lo == -1 && hi == 1);
    double mixed[4] = {3, NAN, -2, 7};
    CHECK(brisk_svg_range(mixed, 4, &lo, &hi) == 3 && lo == -2 && hi == 7);
}

static void ticks(void) {
    double t[12], lo = 0.13, hi = 2.71;
    int n = brisk_svg_ticks(&lo, &hi, 6, t);
    CHECKF(n >= 2 && n <= 6, "%d ticks", n);
    CHECK(lo <= 0.13 && hi >= 2.71 && t[0] == lo && fabs(t[n - 1] - hi) < 1e-9);
    double step = t[1] - t[0];
    for (int i = 2; i < n; i++) CHECK_NEAR(t[i] - t[i - 1], step, 1e-9);
    double m = step / pow(10, floor(log10(step))); /* 1, 2 or 5 times a power of ten */
    CHECKF(fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9, "step %g", step);
    lo = -3e-5, hi = 1e-4; /* small values: a zero tick is exactly 0 */
    n = brisk_svg_ticks(&lo, &hi, 8, t);
    int zero = 0;
    for (int i = 0; i < n; i++) zero += t[i] == 0;
    CHECK(zero == 1 && n <= 8);
    lo = 5, hi = 5; /* empty or bad domain: 0..1 */
    n = brisk_svg_ticks(&lo, &hi, 5, t);
    CHECK(lo == 0 && hi == 1 && n >= 2);
    lo = -1e308, hi = 1e308; /* a span past the largest double: finite ticks */
    n = brisk_svg_ticks(&lo, &hi, 5, t);
    CHECK(n >= 2 && n <= 5 && isfinite(lo) && isfinite(hi) && isfinite(t[n - 1]) && lo <= -1e307 && hi >= 1e307);
    lo = 0, hi = 1e9; /* huge: still at most max */
    CHECK(brisk_svg_ticks(&lo, &hi, 3, t) <= 3);
}

static void formatting(void) {
    char s[32];
    brisk_svg_format(NAN, s, sizeof s);
    CHECKF(strcmp(s, "-") == 0, "%s", s);
    brisk_svg_format(0, s, sizeof s);
    CHECKF(strcmp(s, "0") == 0, "%s", s);
    brisk_svg_format(12000, s, sizeof s);
    CHECKF(strcmp(s, "12k") == 0, "%s", s);
    brisk_svg_format(3.4e6, s, sizeof s);
    CHECKF(strcmp(s, "3.4M") == 0, "%s", s);
    brisk_svg_format(1.05e30, s, sizeof s);
    CHECKF(strcmp(s, "1.05e30") == 0, "%s", s);
    brisk_svg_format(0.5, s, sizeof s);
    CHECKF(strcmp(s, "0.5") == 0, "%s", s);
    brisk_svg_format(1.5e-4, s, sizeof s);
    CHECKF(strcmp(s, "1.50e-4") == 0, "%s", s);
    brisk_svg_format(-2e-7, s, sizeof s);
    CHECKF(strcmp(s, "-2.00e-7") == 0, "%s", s);
}

static void scales_and_lines(void) {
    brisk_html b = {0};
    brisk_chart c;
    brisk_chart_begin(&b, &c, "t<1>", "#123456", 500, 300, "A & B", "step", "loss", 0, 100, 0, 10);
    CHECK(c.x0 == 0 && c.x1 == 100 && c.y0 == 0 && c.y1 == 10);
    CHECK_NEAR(brisk_chart_x(&c, 0), c.px, 1e-9);
    CHECK_NEAR(brisk_chart_x(&c, 100), c.px + c.pw, 1e-9);
    CHECK_NEAR(brisk_chart_y(&c, 0), c.py + c.ph, 1e-9); /* y grows upwards */
    CHECK_NEAR(brisk_chart_y(&c, 10), c.py, 1e-9);
    CHECK_NEAR(brisk_chart_x(&c, 50), c.px + c.pw / 2, 1e-9);
    double x[6] = {0, 20, 40, 60, 80, 100}, y[6] = {1, 2, NAN, 4, 5, 50};
    /* a NaN breaks the line into two; 50 is beyond the domain and clamped to the top */
    CHECK(brisk_chart_line(&b, &c, x, y, 6, "#ff0000") == 5);
    double lone[6] = {NAN, 3, NAN, NAN, NAN, NAN}; /* a single finite point: a dot */
    CHECK(brisk_chart_line(&b, &c, x, lone, 6, "#00ff00") == 1);
    double none[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    CHECK(brisk_chart_line(&b, &c, x, none, 6, "#0000ff") == 0);
    CHECK(brisk_chart_line(&b, &c, NULL, NULL, 0, "#0000ff") == 0); /* an empty series */
    brisk_chart_end(&b);
    const char *few[2] = {"a", "b"}, *many[8] = {"model <one>", "model two", "model three", "model four",
                                                "model five", "model six", "model seven", "model eight"};
    const char *cols[8] = {"#000001", "#000002", "#000003", "#000004", "#000005", "#000006", "#000007", "#000008"};
    size_t before = b.len;
    brisk_chart_legend(&b, &c, few, cols, 2); /* fits beside the title: the top margin's row */
    CHECK(count(b.s + before, " y=\"10\"") == 2);
    before = b.len;
    brisk_chart_legend(&b, &c, many, cols, 8); /* too wide: a column inside the plot */
    CHECK(count(b.s + before, " y=\"10\"") == 0 && count(b.s + before, "class=\"legend\"") == 8);
    CHECK(strstr(b.s + before, "model &lt;one&gt;") != NULL);
    REQUIRE(b.s && !b.oom);
    CHECK(strstr(b.s, "id=\"t&lt;1&gt;\"") && strstr(b.s, "data-colour=\"#123456\"") && strstr(b.s, "A &amp; B"));
    CHECK(count(b.s, "stroke=\"#ff0000\"") == 2 && count(b.s, "fill=\"#00ff00\"") == 1 && !strstr(b.s, "#0000ff"));
    CHECKF(!strstr(b.s, "nan") && !strstr(b.s, "inf"), "%s", b.s);
    char top[64];
    snprintf(top, sizeof top, "%.1f,%.1f\"", c.px + c.pw, c.py);
    CHECKF(strstr(b.s, top) != NULL, "clamped point %s", top);
    CHECK(count(b.s, "<svg") == 1 && count(b.s, "</svg>") == 1);
    brisk_html_free(&b);
}

static void empty_and_bars(void) {
    brisk_html b = {0};
    brisk_chart c;
    /* empty domain (NaN) and stacking no rows: a chart frame, no crash, no NaN in the SVG */
    brisk_chart_begin(&b, &c, "e", "#111111", 400, 200, "", "", "", NAN, NAN, 3, 3);
    brisk_chart_stack(&b, &c, NULL, NULL, 0, 0, NULL);
    brisk_chart_note(&b, &c, "no <data>");
    brisk_chart_end(&b);
    const char *labels[3] = {"fast", "a \"quoted\" row", "failed"};
    double v[3] = {2, 8, NAN};
    brisk_bars(&b, "bars", "#abcdef", 600, "ms/step", "ms", labels, v, 3, "failed");
    brisk_bars(&b, "none", "#abcdef", 600, "nothing", "ms", NULL, NULL, 0, "failed");
    REQUIRE(b.s && !b.oom);
    CHECK(!strstr(b.s, "nan") && strstr(b.s, "no &lt;data&gt;") && strstr(b.s, "a &quot;quoted&quot; row"));
    CHECK(count(b.s, "fill=\"#abcdef\"") == 2 && strstr(b.s, ">failed<") && strstr(b.s, "no rows"));
    CHECK(brisk_bars_height(3) > brisk_bars_height(1) && brisk_bars_height(0) == brisk_bars_height(1));
    brisk_html_free(&b);
}

/* A long run logged every step: the page stays small, a one-step spike still shows. */
static void dense_series(void) {
    enum { N = 200000 };
    double *x = malloc(sizeof(double) * N), *y = malloc(sizeof(double) * N), *z = malloc(sizeof(double) * N);
    REQUIRE(x && y && z);
    for (int i = 0; i < N; i++) x[i] = i, y[i] = 1.0 + 0.001 * (i % 7), z[i] = 2;
    y[123457] = 9; /* the spike */
    brisk_html b = {0};
    brisk_chart c;
    brisk_chart_begin(&b, &c, "d", "#123456", 600, 300, "", "", "", 0, N - 1, 0, 10);
    size_t before = b.len;
    CHECK(brisk_chart_line(&b, &c, x, y, N, "#ff0000") == N);
    size_t line_bytes = b.len - before;
    CHECKF(line_bytes < 4 * 4 * 600 * 12, "%zu bytes for the line", line_bytes);
    char spike[32];
    snprintf(spike, sizeof spike, ",%.1f", brisk_chart_y(&c, 9));
    CHECKF(strstr(b.s + before, spike) != NULL, "the spike %s is kept", spike);
    const double *layers[2] = {y, z};
    const char *colours[2] = {"#00ff00", "#0000ff"};
    before = b.len;
    brisk_chart_stack(&b, &c, x, layers, 2, N, colours);
    CHECKF(b.len - before < 2 * 2 * 600 * 14 + 400, "%zu bytes for the stack", b.len - before);
    CHECK(count(b.s + before, "<polygon") == 2 && !strstr(b.s + before, "nan"));
    brisk_html_free(&b);
    free(x), free(y), free(z);
}

static char dir[512];

/* a logger keeping the last warning in user (1024 bytes) */
static void keep_warning(void *user, brisk_log_level level, const char *msg) {
    if (level == BRISK_LOG_WARN) snprintf(user, 1024, "%s", msg);
}

static void write_file(const char *name, const char *text) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

static char *read_report(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/report.html", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = calloc(1, 1 << 20);
    if (s) (void)!fread(s, 1, (1 << 20) - 1, f);
    fclose(f);
    return s;
}

static void run_reports(void) {
    T_MAKE_DIR(dir, "report_svg");
    brisk_error err = {0};
    char written[1200];
    /* NaN losses (null), a resumed run repeating steps 3-4, a truncated last line */
    write_file("metrics.jsonl",
               "{\"event\": \"run_start\", \"time\": \"2026-01-01T00:00:00Z\", \"step\": 0, \"optimizations\": "
               "[{\"name\": \"prefetch\", \"state\": \"off\", \"detail\": \"speed.prefetch 0 <no thread>\"}]}\n"
               "{\"step\": 1, \"epoch\": 0, \"loss\": 2.5, \"lr\": 0.001, \"ms_per_step\": 3, \"data_ms\": 1, "
               "\"samples_per_s\": 100}\n"
               "{\"step\": 2, \"epoch\": 0, \"loss\": null, \"lr\": 0.001, \"ms_per_step\": 3, \"data_ms\": 1, "
               "\"samples_per_s\": 100}\n"
               "{\"step\": 3, \"epoch\": 0, \"loss\": 9e9, \"lr\": 0.001, \"ms_per_step\": 3, \"data_ms\": 1, "
               "\"samples_per_s\": 100}\n"
               "{\"event\": \"run_start\", \"time\": \"2026-01-01T01:00:00Z\", \"step\": 2}\n"
               "{\"step\": 3, \"epoch\": 0, \"loss\": 1.25, \"lr\": 0.0005, \"ms_per_step\": 3, \"data_ms\": 1, "
               "\"samples_per_s\": 100}\n"
               "{\"epoch\": 1, \"step\": 3, \"train_loss\": 1.5, \"val_loss\": null}\n"
               "{\"step\": 4, \"lo");
    REQUIRE_OK(brisk_report_run(dir, NULL, written, sizeof written, NULL, &err), &err);
    CHECK(strstr(written, "/report.html") != NULL);
    char *html = read_report();
    REQUIRE(html);
    CHECK(strstr(html, "resumed 1 time") && strstr(html, "cut short") && !strstr(html, "9e9"));
    CHECK(strstr(html, "&lt;no thread&gt;") && strstr(html, "class=\"off\""));
    CHECK(!strstr(html, "<script")); /* no script; no address but the SVG namespace: */
    CHECK(count(html, "http") == count(html, "http://www.w3.org/2000/svg"));
    CHECK(count(html, "data-box=") == 6 && !strstr(html, "nan"));
    free(html);

    /* one step, every loss NaN: still a page, with a note in the loss chart */
    write_file("metrics.jsonl", "{\"step\": 1, \"epoch\": 0, \"loss\": null, \"lr\": 0.1, \"ms_per_step\": 2, "
                                "\"data_ms\": 0.5, \"samples_per_s\": 10}\n");
    REQUIRE_OK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err), &err);
    html = read_report();
    REQUIRE(html);
    CHECK(strstr(html, "no finite loss logged") && count(html, "data-box=") == 6 && !strstr(html, "nan"));
    free(html);

    /* one window far slower than the rest: the time scale stops at twice the 90th percentile */
    char spiky[4096] = "";
    for (int i = 1; i <= 20; i++)
        snprintf(spiky + strlen(spiky), sizeof spiky - strlen(spiky),
                 "{\"step\": %d, \"loss\": 1, \"ms_per_step\": %d, \"data_ms\": 0.25}\n", i, i == 7 ? 100 : 1);
    write_file("metrics.jsonl", spiky);
    REQUIRE_OK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err), &err);
    html = read_report();
    REQUIRE(html);
    CHECKF(strstr(html, "Time per step (1 window above 2 ms cut off)") != NULL, "%.200s", strstr(html, "Time per"));
    free(html);

    /* damaged lines (a record glued onto one a failed write cut short, a value that is not a
     * number) are left out, counted, the first named, in a warning and in the page */
    write_file("metrics.jsonl", "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"lo{\"event\": \"run_start\", \"step\": 1}\n"
                                "{\"step\": 2, \"loss\": 0.5}\n{\"step\": 3, \"loss\": \"low\"}\n{\"step\": 4, \"loss\": 0.25}\n");
    char warned[1024] = "";
    brisk_logger wl = {keep_warning, warned, BRISK_LOG_WARN};
    REQUIRE_OK(brisk_report_run(dir, NULL, NULL, 0, &wl, &err), &err);
    CHECKF(strstr(warned, "metrics.jsonl: 2 damaged lines left out of the report (the first, line 2: not a JSON "
                          "object (\"{\"step\": 2, \"lo{\"event\"") != NULL, "%s", warned);
    html = read_report();
    REQUIRE(html);
    CHECKF(strstr(html, "2 damaged lines of metrics.jsonl are left out (the first, line 2: not a JSON object") &&
           count(html, "data-box=") == 6, "%.300s", strstr(html, "damaged") ? strstr(html, "damaged") : html);
    free(html);
    run_log rl;
    REQUIRE_OK(brisk_run_log_read(dir, &rl, &err), &err);
    CHECKF(rl.steps.n == 3 && rl.damaged == 2 && rl.first_damaged_line == 2 &&
           strstr(rl.first_damaged, "not a JSON object"), "%d steps, %d damaged", rl.steps.n, rl.damaged);
    brisk_run_log_free(&rl);
    write_file("metrics.jsonl", "{\"step\": 1, \"loss\": \"low\"}\nnot json\n");
    CHECK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err) == BRISK_ERR_FORMAT); /* nothing left */
    CHECKF(strstr(err.msg, "metrics.jsonl: no readable record: 2 damaged lines (the first, line 1: \"loss\" is not a "
                  "number)"), "%s", err.msg);
    write_file("metrics.jsonl", "");
    CHECK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err) == BRISK_ERR_FORMAT);
    CHECKF(strstr(err.msg, "metrics.jsonl: empty"), "%s", err.msg);
    /* missing */
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    unlink(path);
    CHECK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err) == BRISK_ERR_IO);
    CHECKF(strstr(err.msg, "metrics.jsonl: cannot open it") && strstr(err.msg, "--out"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/nonexistent", dir);
    CHECK(brisk_report_run(path, NULL, NULL, 0, NULL, &err) == BRISK_ERR_IO);
    CHECKF(strstr(err.msg, "no such directory"), "%s", err.msg);

    /* the bench page: a failed row named with its reason, names escaped */
    brisk_bench_row rows[3] = {{"base <fp32>", 2.0, 0.01, 2.5, 1000, -1, 1, ""},
                               {"+ graph", 1.0, 0.02, 1.2, 2000, 80, 2, ""},
                               {"+ bf16", NAN, 0, 0, 0, -1, 0, "no bf16 & no fp16"}};
    snprintf(path, sizeof path, "%s/bench.html", dir);
    REQUIRE_OK(brisk_report_bench(path, "x.json on <GPU>", rows, 3, &err), &err);
    FILE *f = fopen(path, "rb");
    REQUIRE(f);
    char *page = calloc(1, 1 << 16);
    REQUIRE(page);
    (void)!fread(page, 1, (1 << 16) - 1, f);
    fclose(f);
    CHECK(strstr(page, "base &lt;fp32&gt;") && strstr(page, "x.json on &lt;GPU&gt;") && !strstr(page, "<GPU>"));
    CHECK(strstr(page, "no bf16 &amp; no fp16") && strstr(page, ">failed<") && strstr(page, "2.00x"));
    CHECK(count(page, "data-box=") == 2 && !strstr(page, "nan"));
    free(page);
    CHECK(brisk_report_bench(path, "t", rows, -1, &err) == BRISK_ERR_INVALID);
    /* a folder that does not exist, or a file in the way of one: named, never the temporary file
     * (the library makes no folders; the brisk command does) */
    snprintf(path, sizeof path, "%s/no/such/dir/bench.html", dir);
    CHECK(brisk_report_bench(path, "t", rows, 3, &err) == BRISK_ERR_IO);
    CHECKF(strstr(err.msg, "no/such/dir/bench.html: cannot create it: the folder ") &&
           strstr(err.msg, "/no/such/dir does not exist") && !strstr(err.msg, ".tmp"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/no", dir);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/bench.html/dir/bench.html", dir);
    CHECK(brisk_report_bench(path, "t", rows, 3, &err) == BRISK_ERR_IO);
    CHECKF(strstr(err.msg, "bench.html/dir/bench.html: cannot create it: ") &&
           strstr(err.msg, "/bench.html is not a folder") && !strstr(err.msg, ".tmp"), "%s", err.msg);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    CHECK(system(path) == 0);
}

/* The number after `key` at the first place it follows `after` in s; NaN when absent. */
static double number_after(const char *s, const char *after, const char *key) {
    const char *p = s ? strstr(s, after) : NULL;
    p = p ? strstr(p, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* A classifier's run as brisk train logs it: epochs with val_accuracy, validated at the last
 * step. The header's cards fit its fixed height (a card wrapped past it hid under the charts),
 * every validation dot lies whole inside the loss plot's frame (the last one sat on it, half
 * cut), and the validation accuracy is shown: the best in a card, each epoch's in the table. */
static void run_report_layout(void) {
    dir[0] = 0; /* run_reports removed its folder */
    T_MAKE_DIR(dir, "report_layout");
    char log[4096] = "{\"event\": \"run_start\", \"time\": \"2026-01-01T00:00:00Z\", \"step\": 0}\n";
    for (int e = 1; e <= 5; e++) {
        for (int k = 1; k <= 4; k++)
            snprintf(log + strlen(log), sizeof log - strlen(log), "{\"step\": %d, \"loss\": %g, \"ms_per_step\": 2}\n",
                     (e - 1) * 36 + 9 * k, 1.0 / (e + k));
        snprintf(log + strlen(log), sizeof log - strlen(log), "{\"epoch\": %d, \"step\": %d, \"train_loss\": 0.5, "
                 "\"val_loss\": %g, \"val_accuracy\": %g}\n", e, e * 36, 0.6 - 0.01 * e, e == 4 ? 0.8125 : 0.5 + 0.01 * e);
    }
    strcat(log, "{\"event\": \"run_end\", \"steps\": 180, \"wall_s\": 1, \"best_val_accuracy\": 0.8125, "
                "\"params\": 1000, \"total_bytes\": 1048576, \"samples_per_s\": 1e4, \"gflops\": 1}\n");
    write_file("metrics.jsonl", log);
    brisk_error err = {0};
    REQUIRE_OK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err), &err);
    char *html = read_report();
    REQUIRE(html);
    /* the cards: a grid of fixed rows inside the header's height */
    int cards = count(html, "class=\"stat\""), cols = (int)number_after(html, "class=\"stats\"", "repeat(");
    double row = number_after(html, "class=\"stats\"", "grid-auto-rows:"), gap = number_after(html, "class=\"stats\"", "gap:");
    double head = number_after(html, "class=\"head\"", "height:"), first_chart = number_after(html, "data-box=", ",");
    CHECKF(cards == 10 && cols > 0 && row > 0 && head > 0, "%d cards, %d columns, rows %g px, head %g px", cards, cols, row,
           head);
    int rows = cols > 0 ? (cards + cols - 1) / cols : 99;
    /* the title and path above the cards take 66 px (22 px heading, 14 px path, their margins) */
    CHECKF(66 + rows * row + (rows - 1) * gap <= head, "%d rows of %g px do not fit a header of %g px", rows, row, head);
    CHECKF(first_chart >= 20 + head, "the first chart at %g px, inside the header (%g px)", first_chart, head);
    CHECK(!strstr(html, "flex-wrap"));
    /* the validation dots: whole inside the frame */
    const char *loss = strstr(html, "id=\"loss\"");
    REQUIRE(loss);
    double fx = number_after(loss, "class=\"frame\"", " x=\""), fw = number_after(loss, "class=\"frame\"", " width=\"");
    int dots = 0;
    const char *end = strstr(loss, "</svg>");
    for (const char *c = loss; (c = strstr(c, "<circle")) && c < end; c++, dots++) {
        double cx = number_after(c, "<circle", "cx=\""), r = number_after(c, "<circle", " r=\"");
        CHECKF(cx - r >= fx && cx + r <= fx + fw, "a dot at %g (r %g) outside the frame %g..%g", cx, r, fx, fx + fw);
    }
    CHECKF(dots == 5, "%d validation dots", dots);
    /* the accuracy: the best in a card, each epoch's in the table */
    CHECKF(strstr(html, "<span>best val accuracy</span><b>0.8125</b>"), "%.300s", strstr(html, "class=\"stats\""));
    CHECK(strstr(html, "<th>validation accuracy</th>") && strstr(html, "<td class=\"num\">0.5300</td>"));
    free(html);
    /* a regression logs no accuracy: no such card or column */
    write_file("metrics.jsonl", "{\"step\": 1, \"loss\": 1}\n{\"epoch\": 1, \"step\": 1, \"train_loss\": 1, \"val_loss\": 1}\n");
    REQUIRE_OK(brisk_report_run(dir, NULL, NULL, 0, NULL, &err), &err);
    html = read_report();
    REQUIRE(html);
    CHECK(!strstr(html, "accuracy") && count(html, "class=\"stat\"") == 9 && strstr(html, "<th>validation loss</th>"));
    free(html);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* The time-per-step chart draws the trainer's compute_ms (brisk_time_split's one definition);
 * a log older than compute_ms has none (NaN), and the chart works it out by the same rule. */
static void compute_column(void) {
    const char log[] = "{\"step\": 1, \"loss\": 1, \"ms_per_step\": 5, \"data_ms\": 1, \"copy_ms\": 1, \"compute_ms\": 2.5}\n"
                       "{\"step\": 2, \"loss\": 1, \"ms_per_step\": 5, \"data_ms\": 1, \"copy_ms\": 1}\n";
    run_log r;
    brisk_error err = {0};
    REQUIRE_OK(brisk_run_log_parse(log, sizeof log - 1, "m.jsonl", &r, &err), &err);
    CHECK(r.steps.n == 2 && r.steps.col[S_COMPUTE][0] == 2.5 && isnan(r.steps.col[S_COMPUTE][1]));
    brisk_run_log_free(&r);
}

TEST_MAIN(T(escaping), T(ranges), T(ticks), T(formatting), T(scales_and_lines), T(empty_and_bars), T(dense_series), T(run_reports), T(run_report_layout), T(compute_column))
