/* A pipeline's comparison page (<out_dir>/report.html): every model's training loss on one
 * chart (read back from its metrics.jsonl, validation losses as dots), the models side by
 * side as bars (best validation loss, throughput, planned memory, wall time) and the table
 * pipeline.c logs, each model's name linking to its own run report, written here too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_log.h"
#include "report/report_svg.h"

enum { CHART_W = 570, GAP = 20, HEAD_H = 70, LOSS_W = 1160, LOSS_H = 340 };

static const char *const palette[BRISK_MAX_MODELS] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* The models' training losses against the step, one colour each. */
static void loss_overlay(brisk_html *b, const char *out_dir, const brisk_pipeline_result *res, int n) {
    run_log logs[BRISK_MAX_MODELS];
    int ok[BRISK_MAX_MODELS];
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY, lo, hi;
    for (int i = 0; i < n; i++) {
        char dir[BRISK_PATH_MAX + 40];
        brisk_error ignored; /* a model without metrics is left out of the chart; its row says why */
        snprintf(dir, sizeof dir, "%s/%s", out_dir, res[i].name);
        ok[i] = brisk_run_log_read(dir, &logs[i], &ignored) == BRISK_OK;
        const log_table *s = &logs[i].steps, *e = &logs[i].epochs;
        if (!ok[i] || s->n == 0) continue;
        x0 = fmin(x0, s->col[S_STEP][0]), x1 = fmax(x1, s->col[S_STEP][s->n - 1]);
        if (e->n) x0 = fmin(x0, e->col[E_STEP][0]), x1 = fmax(x1, e->col[E_STEP][e->n - 1]); /* the dots */
        if (brisk_svg_range(s->col[S_LOSS], s->n, &lo, &hi)) y0 = fmin(y0, lo), y1 = fmax(y1, hi);
        if (e->n && brisk_svg_range(e->col[E_VAL], e->n, &lo, &hi)) y0 = fmin(y0, lo), y1 = fmax(y1, hi);
    }
    double xs[2] = {x0, x1}, ys[2] = {y0, y1};
    brisk_svg_range(xs, 2, &x0, &x1);
    brisk_chart_pad_x(&x0, &x1, LOSS_W);
    brisk_svg_range(ys, 2, &y0, &y1);
    brisk_chart c;
    brisk_html_box_begin(b, 0, HEAD_H, LOSS_W, LOSS_H);
    brisk_chart_begin(b, &c, "loss", palette[0], LOSS_W, LOSS_H, "Training loss by model (dots: validation)", "step",
                      "loss", x0, x1, y0, y1);
    int drawn = 0;
    const char *names[BRISK_MAX_MODELS];
    for (int i = 0; i < n; i++) {
        names[i] = res[i].name;
        if (!ok[i]) continue;
        const log_table *s = &logs[i].steps, *e = &logs[i].epochs;
        drawn += brisk_chart_line(b, &c, s->col[S_STEP], s->col[S_LOSS], s->n, palette[i]);
        if (e->n) drawn += brisk_chart_dots(b, &c, e->col[E_STEP], e->col[E_VAL], e->n, palette[i]);
    }
    if (drawn) brisk_chart_legend(b, &c, names, palette, n);
    else brisk_chart_note(b, &c, "no finite loss logged");
    brisk_chart_end(b);
    brisk_html_box_end(b);
    for (int i = 0; i < n; i++) brisk_run_log_free(&logs[i]); /* also after a failed read */
}

static void cell(brisk_html *b, const char *fmt, double v) {
    brisk_html_printf(b, "<td class=\"num\">");
    if (isfinite(v)) brisk_html_printf(b, fmt, v);
    else brisk_html_printf(b, "-");
    brisk_html_printf(b, "</td>");
}

brisk_status brisk_report_pipeline(const char *out_dir, const brisk_pipeline_result *res, int n, brisk_error *err) {
    if (n < 1 || n > BRISK_MAX_MODELS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d pipeline models; expected 1 to %d", out_dir, n,
                            BRISK_MAX_MODELS);
    const char *labels[BRISK_MAX_MODELS];
    double val[BRISK_MAX_MODELS], sps[BRISK_MAX_MODELS], mem[BRISK_MAX_MODELS], wall[BRISK_MAX_MODELS];
    char model_err[BRISK_MAX_MODELS][sizeof err->msg];
    for (int i = 0; i < n; i++) {
        const brisk_run_summary *s = &res[i].summary;
        labels[i] = res[i].name;
        val[i] = s->best_val_loss, sps[i] = s->samples_per_s, wall[i] = s->wall_s;
        mem[i] = (double)s->total_bytes / 1048576.0;
        /* each model's own report, linked from the table */
        char dir[BRISK_PATH_MAX + 40];
        brisk_error e = {0};
        snprintf(dir, sizeof dir, "%s/%s", out_dir, res[i].name);
        model_err[i][0] = 0;
        if (brisk_report_run(dir, NULL, NULL, 0, NULL, &e)) snprintf(model_err[i], sizeof model_err[i], "%s", e.msg);
    }
    int h = brisk_bars_height(n);
    brisk_html b = {0};
    brisk_html_page_begin(&b, "brisk pipeline report");
    const int top = HEAD_H + LOSS_H + GAP; /* the bars' first row */
    brisk_html_printf(&b, "<div class=\"page\" style=\"height:%dpx\">\n<div class=\"head\" style=\"height:%dpx\">\n"
                      "<h1>brisk pipeline: %d models on the same data</h1>\n<div class=\"path\">", top + 2 * (h + GAP),
                      HEAD_H, n);
    char *full = realpath(out_dir, NULL);
    brisk_html_escape(&b, full ? full : out_dir);
    free(full);
    brisk_html_printf(&b, "</div>\n</div>\n");
    loss_overlay(&b, out_dir, res, n);
    brisk_html_box_begin(&b, 0, top, CHART_W, h);
    brisk_bars(&b, "val_loss", "#ff7f0e", CHART_W, "Best validation loss (lower is better)", "", labels, val, n,
               "no validation");
    brisk_html_box_end(&b);
    brisk_html_box_begin(&b, CHART_W + GAP, top, CHART_W, h);
    brisk_bars(&b, "throughput", "#2ca02c", CHART_W, "Throughput", "samples/s", labels, sps, n, "-");
    brisk_html_box_end(&b);
    brisk_html_box_begin(&b, 0, top + h + GAP, CHART_W, h);
    brisk_bars(&b, "memory", "#8c564b", CHART_W, "Planned memory", "MiB", labels, mem, n, "-");
    brisk_html_box_end(&b);
    brisk_html_box_begin(&b, CHART_W + GAP, top + h + GAP, CHART_W, h);
    brisk_bars(&b, "wall", "#9467bd", CHART_W, "Wall time", "s", labels, wall, n, "-");
    brisk_html_box_end(&b);
    brisk_html_printf(&b, "</div>\n<h2>Models (best validation epoch)</h2>\n<table id=\"models\">\n<tr><th>model</th>"
                      "<th>type</th><th>parameters</th><th>val loss</th><th>accuracy</th><th>MAE</th><th>RMSE</th>"
                      "<th>epochs</th><th>wall s</th><th>samples/s</th><th>memory MiB</th></tr>\n");
    for (int i = 0; i < n; i++) {
        const brisk_run_summary *s = &res[i].summary;
        brisk_html_printf(&b, "<tr><td>");
        if (model_err[i][0]) {
            brisk_html_escape(&b, res[i].name);
            brisk_html_printf(&b, " <span class=\"off\" title=\"");
            brisk_html_escape(&b, model_err[i]);
            brisk_html_printf(&b, "\">no report</span>");
        } else {
            brisk_html_printf(&b, "<a href=\"");
            brisk_html_escape(&b, res[i].name);
            brisk_html_printf(&b, "/report.html\">");
            brisk_html_escape(&b, res[i].name);
            brisk_html_printf(&b, "</a>");
        }
        brisk_html_printf(&b, "</td><td>");
        brisk_html_escape(&b, brisk_model_type_name(res[i].type));
        brisk_html_printf(&b, "</td>");
        cell(&b, "%.0f", (double)s->params);
        cell(&b, "%.5f", s->best_val_loss);
        cell(&b, "%.4f", s->best.accuracy);
        cell(&b, "%.4g", s->best.mae);
        cell(&b, "%.4g", s->best.rmse);
        cell(&b, "%.0f", (double)s->epochs_done);
        cell(&b, "%.3g", s->wall_s);
        cell(&b, "%.0f", s->samples_per_s);
        cell(&b, "%.2f", mem[i]);
        brisk_html_printf(&b, "</tr>\n");
    }
    brisk_html_printf(&b, "</table>\n");
    for (int i = 0; i < n; i++)
        if (model_err[i][0]) {
            brisk_html_printf(&b, "<p class=\"notes\">");
            brisk_html_escape(&b, model_err[i]);
            brisk_html_printf(&b, "</p>\n");
        }
    brisk_html_page_end(&b);
    char path[BRISK_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/report.html", out_dir);
    brisk_status st = brisk_html_write(&b, path, err);
    brisk_html_free(&b);
    return st;
}
