/* `brisk bench`'s ablation table as a page: the median ms/step of each configuration
 * and its throughput as bars (failed rows named, without a bar), then the table with
 * the spread, p95, GPU utilisation and speedup over the first row. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/train.h"
#include "report/report_svg.h"

enum { WIDTH = 1160, GAP = 20, HEAD_H = 70, MAX_ROWS = 64 };

static void cell(brisk_html *b, const char *fmt, double v) {
    brisk_html_printf(b, "<td class=\"num\">");
    if (isfinite(v)) brisk_html_printf(b, fmt, v);
    else brisk_html_printf(b, "-");
    brisk_html_printf(b, "</td>");
}

brisk_status brisk_report_bench(const char *out_path, const char *title, const brisk_bench_row *rows, int n,
                                brisk_error *err) {
    if (n < 0 || n > MAX_ROWS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d bench rows; expected 0 to %d", out_path, n, MAX_ROWS);
    const char *labels[MAX_ROWS];
    double ms[MAX_ROWS], sps[MAX_ROWS];
    for (int i = 0; i < n; i++) {
        labels[i] = rows[i].name ? rows[i].name : "?";
        ms[i] = rows[i].ms_per_step;
        sps[i] = isfinite(rows[i].ms_per_step) ? rows[i].samples_per_s : NAN;
    }
    brisk_html b = {0};
    brisk_html_page_begin(&b, title);
    int h = brisk_bars_height(n);
    brisk_html_printf(&b, "<div class=\"page\" style=\"height:%dpx\">\n<div class=\"head\" style=\"height:%dpx\">\n"
                      "<h1>brisk bench</h1>\n<div class=\"path\">", HEAD_H + 2 * (h + GAP), HEAD_H);
    brisk_html_escape(&b, title);
    brisk_html_printf(&b, "</div>\n</div>\n");
    brisk_html_box_begin(&b, 0, HEAD_H, WIDTH, h);
    brisk_bars(&b, "ms_per_step", "#1f77b4", WIDTH, "Median ms per step (lower is faster)", "ms", labels, ms, n,
               "failed");
    brisk_html_box_end(&b);
    brisk_html_box_begin(&b, 0, HEAD_H + h + GAP, WIDTH, h);
    brisk_bars(&b, "samples_per_s", "#2ca02c", WIDTH, "Throughput (samples/s, higher is faster)", "samples/s", labels,
               sps, n, "failed");
    brisk_html_box_end(&b);
    brisk_html_printf(&b, "</div>\n<h2>Rows</h2>\n<table id=\"rows\">\n<tr><th>configuration</th><th>ms/step</th>"
                      "<th>spread</th><th>p95 ms (max)</th><th>samples/s</th><th>GPU util</th><th>speedup</th></tr>\n");
    for (int i = 0; i < n; i++) {
        const brisk_bench_row *r = &rows[i];
        brisk_html_printf(&b, "<tr><td>");
        brisk_html_escape(&b, labels[i]);
        brisk_html_printf(&b, "</td>");
        if (!isfinite(r->ms_per_step)) {
            brisk_html_printf(&b, "<td colspan=\"6\"><span class=\"off\">failed</span> ");
            brisk_html_escape(&b, r->why ? r->why : "");
            brisk_html_printf(&b, "</td></tr>\n");
            continue;
        }
        cell(&b, "%.4f", r->ms_per_step);
        cell(&b, "%.1f%%", 100 * r->spread);
        cell(&b, "%.4f", r->p95_ms);
        cell(&b, "%.0f", r->samples_per_s);
        cell(&b, "%.0f%%", r->gpu_util >= 0 ? r->gpu_util : NAN);
        cell(&b, "%.2fx", r->speedup);
        brisk_html_printf(&b, "</tr>\n");
    }
    brisk_html_printf(&b, "</table>\n<p class=\"notes\">spread: max - min of the rounds' median ms/step, over their "
                      "median; p95: the worst round's.</p>\n");
    brisk_html_page_end(&b);
    brisk_status st = brisk_html_write(&b, out_path, err);
    brisk_html_free(&b);
    return st;
}
