/* `brisk report RUN_DIR`: one self-contained page from a run directory's metrics.jsonl
 * (loop.c and rundir.c write it; report_log.c reads it): training and validation loss,
 * learning rate, throughput and the time split per logged window, memory, and the
 * optimizations the run had on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_log.h"
#include "report/report_svg.h"

/* the page's grid: two columns of fixed-size charts below a fixed-height header, whose
 * cards stand in rows of CARD_COLS (at most two rows: the charts begin at HEAD_H) */
enum { CHART_W = 570, CHART_H = 300, GAP = 20, CARD_COLS = 6, CARD_ROWS = 2, CARD_H = 56, CARD_GAP = 8 };
enum { TITLE_H = 66, HEAD_H = TITLE_H + CARD_ROWS * CARD_H + (CARD_ROWS - 1) * CARD_GAP + 14 };

static double end_num(const run_log *r, const char *key) { return brisk_run_log_end(r, key); }

static double last_finite(const double *v, int n) {
    for (int i = n - 1; i >= 0; i--)
        if (isfinite(v[i])) return v[i];
    return NAN;
}

static double min_finite(const double *v, int n) {
    double m = NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]) && !(v[i] >= m)) m = v[i];
    return m;
}

static double max_finite(const double *v, int n) {
    double m = NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]) && !(v[i] <= m)) m = v[i];
    return m;
}

/* A classifier's best validation accuracy: the epochs logged here, and run_end's best over
 * every resumed part; NaN for other models. */
static double best_accuracy(const run_log *r) {
    const log_table *e = &r->epochs;
    double best = e->n ? max_finite(e->col[E_ACC], e->n) : NAN, ended = end_num(r, "best_val_accuracy");
    if (isfinite(ended) && !(best >= ended)) best = ended;
    return best;
}

/* fmt NULL: the short form (12.3k, 4.5M) */
static void stat_box(brisk_html *b, const char *label, const char *fmt, double v) {
    char val[64];
    if (!isfinite(v)) snprintf(val, sizeof val, "-");
    else if (!fmt) brisk_svg_format(v, val, sizeof val);
    else snprintf(val, sizeof val, fmt, v);
    brisk_html_printf(b, "<div class=\"stat\"><span>%s</span><b>%s</b></div>\n", label, val);
}

static void header(brisk_html *b, const char *dir, const run_log *r) {
    const log_table *s = &r->steps, *e = &r->epochs;
    double steps = end_num(r, "steps");
    if (!isfinite(steps)) steps = fmax(s->n ? s->col[S_STEP][s->n - 1] : NAN, e->n ? e->col[E_STEP][e->n - 1] : NAN);
    double final = end_num(r, "final_loss");
    if (!isfinite(final) && s->n) final = last_finite(s->col[S_LOSS], s->n);
    brisk_html_printf(b, "<div class=\"head\" style=\"height:%dpx\">\n<h1>brisk run report</h1>\n<div class=\"path\">",
                      HEAD_H);
    char *full = realpath(dir, NULL); /* "." or "run" say little once the page is opened elsewhere */
    brisk_html_escape(b, full ? full : dir);
    free(full);
    if (r->started[0]) {
        brisk_html_printf(b, " &middot; started ");
        brisk_html_escape(b, r->started);
    }
    if (r->runs > 1) brisk_html_printf(b, " &middot; resumed %d time%s", r->runs - 1, r->runs == 2 ? "" : "s");
    /* a grid of fixed rows, not a row that wraps wherever the fonts say: the charts below
     * stand at a fixed height, and a card wrapped past it would hide under them */
    brisk_html_printf(b, "</div>\n<div class=\"stats\" style=\"grid-template-columns:repeat(%d,1fr);"
                      "grid-auto-rows:%dpx;gap:%dpx\">\n", CARD_COLS, CARD_H, CARD_GAP);
    stat_box(b, "steps", "%.0f", steps);
    stat_box(b, "final train loss", "%.5g", final);
    /* the epochs logged here, and run_end's best over every resumed part of the run (a run
     * resumed from another directory's checkpoint logged its earlier epochs there) */
    double best = e->n ? min_finite(e->col[E_VAL], e->n) : NAN, ended = end_num(r, "best_val_loss");
    if (isfinite(ended) && !(best <= ended)) best = ended;
    stat_box(b, "best val loss", "%.5g", best);
    double acc = best_accuracy(r);
    if (isfinite(acc)) stat_box(b, "best val accuracy", "%.4f", acc); /* a classifier's */
    stat_box(b, "samples/s", NULL, end_num(r, "samples_per_s"));
    stat_box(b, "ms/step (median)", "%.3f", end_num(r, "ms_per_step_median"));
    stat_box(b, "GFLOP/s (products)", "%.1f", end_num(r, "gflops")); /* "-" for runs before it was logged */
    stat_box(b, "wall time (s)", "%.2f", end_num(r, "wall_s"));
    stat_box(b, "parameters", NULL, end_num(r, "params"));
    stat_box(b, "planned memory (MiB)", "%.3g", end_num(r, "total_bytes") / 1048576.0);
    brisk_html_printf(b, "</div>\n</div>\n");
}

/* The chart slot (col, row) of the grid. */
static void slot_begin(brisk_html *b, int col, int row, int h) {
    brisk_html_box_begin(b, col * (CHART_W + GAP), HEAD_H + row * (CHART_H + GAP), CHART_W, h);
}

static void slot_end(brisk_html *b) { brisk_html_box_end(b); }

/* The x domain of every step chart: the first to the last step logged, and room for a dot
 * at either end. */
static void step_domain(const run_log *r, double *x0, double *x1) {
    double lo = INFINITY, hi = -INFINITY;
    const log_table *t[2] = {&r->steps, &r->epochs};
    for (int k = 0; k < 2; k++)
        if (t[k]->n) lo = fmin(lo, t[k]->col[0][0]), hi = fmax(hi, t[k]->col[0][t[k]->n - 1]);
    if (lo == hi) lo -= 1, hi += 1; /* a single step: one step either side */
    double v[2] = {lo, hi};
    brisk_svg_range(v, 2, x0, x1);
    brisk_chart_pad_x(x0, x1, CHART_W);
}

static void loss_chart(brisk_html *b, const run_log *r, double x0, double x1) {
    const log_table *s = &r->steps, *e = &r->epochs;
    double lo = INFINITY, hi = -INFINITY, a, z;
    if (brisk_svg_range(s->col[S_LOSS], s->n, &a, &z)) lo = a, hi = z;
    if (e->n && brisk_svg_range(e->col[E_VAL], e->n, &a, &z)) lo = fmin(lo, a), hi = fmax(hi, z);
    if (!(lo <= hi)) lo = 0, hi = 1;
    double v[2] = {lo, hi};
    brisk_svg_range(v, 2, &lo, &hi);
    /* windows whose every step was skipped for a NaN/inf loss (train.skip_nan_steps) log null */
    int missing = 0;
    for (int i = 0; i < s->n; i++) missing += !isfinite(s->col[S_LOSS][i]);
    char title[96] = "Loss";
    if (missing && missing < s->n)
        snprintf(title, sizeof title, "Loss (%d of %d logged windows without a finite loss)", missing, s->n);
    brisk_chart c;
    slot_begin(b, 0, 0, CHART_H);
    brisk_chart_begin(b, &c, "loss", "#1f77b4", CHART_W, CHART_H, title, "step", "loss", x0, x1, lo, hi);
    int drawn = brisk_chart_line(b, &c, s->col[S_STEP], s->col[S_LOSS], s->n, "#1f77b4");
    int val = e->n ? brisk_chart_dots(b, &c, e->col[E_STEP], e->col[E_VAL], e->n, "#ff7f0e") : 0;
    const char *names[] = {"train (window mean)", "validation"}, *colours[] = {"#1f77b4", "#ff7f0e"};
    if (!drawn && !val) brisk_chart_note(b, &c, s->n ? "no finite loss logged (NaN or inf)" : "no steps logged");
    else brisk_chart_legend(b, &c, names, colours, val ? 2 : 1);
    brisk_chart_end(b);
    slot_end(b);
}

/* A one-series chart of a step column. */
static void series_chart(brisk_html *b, const run_log *r, int col, int row, const char *id, const char *colour,
                         const char *title, const char *ylabel, int column, double x0, double x1, const char *empty) {
    const log_table *s = &r->steps;
    double lo, hi;
    brisk_svg_range(s->col[column], s->n, &lo, &hi);
    if (lo > 0 && lo < 0.5 * hi) lo = 0; /* from zero unless that flattens the curve */
    brisk_chart c;
    slot_begin(b, col, row, CHART_H);
    brisk_chart_begin(b, &c, id, colour, CHART_W, CHART_H, title, "step", ylabel, x0, x1, lo, hi);
    if (!brisk_chart_line(b, &c, s->col[S_STEP], s->col[column], s->n, colour)) brisk_chart_note(b, &c, empty);
    brisk_chart_end(b);
    slot_end(b);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of the finite values (NaN when there are none). */
static double percentile(const double *v, int n, double q) {
    double *f = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)), out = NAN;
    int k = 0;
    if (!f) return NAN;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) f[k++] = v[i];
    if (k > 0) {
        qsort(f, (size_t)k, sizeof *f, cmp_double);
        out = f[(int)(q * (k - 1))];
    }
    free(f);
    return out;
}

static void time_split_chart(brisk_html *b, const run_log *r, double x0, double x1) {
    const log_table *s = &r->steps;
    int n = s->n;
    double *layer[3];
    for (int k = 0; k < 3; k++) layer[k] = calloc((size_t)(n ? n : 1), sizeof(double));
    double top = 0;
    if (layer[0] && layer[1] && layer[2])
        for (int i = 0; i < n; i++) {
            double ms = s->col[S_MS][i], data = s->col[S_DATA][i], copy = s->col[S_COPY][i];
            double compute = s->col[S_COMPUTE][i];
            data = isfinite(data) ? data : 0, copy = isfinite(copy) ? copy : 0;
            /* the trainer's compute_ms (brisk_time_split); logs older than it: the same rule */
            if (!isfinite(compute)) compute = isfinite(ms) ? ms - data - copy : 0;
            layer[0][i] = data, layer[1][i] = copy;
            layer[2][i] = compute > 0 ? compute : 0;
            if (isfinite(ms) && ms > top) top = ms;
        }
    double lo = 0, hi = top > 0 ? top : 1;
    /* A few windows many times slower than the rest (another program took the CPUs, a
     * checkpoint) would flatten every other one: the scale stops at twice the 90th
     * percentile, and the title says how many went past it. */
    char title[96] = "Time per step";
    double p90 = percentile(s->col[S_MS], n, 0.9);
    if (isfinite(p90) && p90 > 0 && top > 4 * p90) {
        int over = 0;
        hi = 2 * p90;
        for (int i = 0; i < n; i++) over += s->col[S_MS][i] > hi;
        snprintf(title, sizeof title, "Time per step (%d window%s above %.3g ms cut off)", over, over == 1 ? "" : "s",
                 hi);
    }
    brisk_chart c;
    const char *names[] = {"data wait", "copy to device", "compute"}, *colours[] = {"#d62728", "#e6ab02", "#17becf"};
    slot_begin(b, 1, 1, CHART_H);
    brisk_chart_begin(b, &c, "time_split", colours[2], CHART_W, CHART_H, title, "step", "ms", x0, x1, lo, hi);
    if (layer[0] && layer[1] && layer[2] && n > 0)
        brisk_chart_stack(b, &c, s->col[S_STEP], (const double *const *)layer, 3, n, colours);
    else brisk_chart_note(b, &c, "no steps logged");
    brisk_chart_legend(b, &c, names, colours, 3);
    brisk_chart_end(b);
    slot_end(b);
    for (int k = 0; k < 3; k++) free(layer[k]);
}

static void memory_chart(brisk_html *b, const run_log *r) {
    const char *labels[5];
    double v[5], top = 0;
    int n = 0;
    double arena = end_num(r, "arena_bytes"), params = end_num(r, "state_bytes"), total = end_num(r, "total_bytes");
    double device = end_num(r, "device_mem_used");
    if (isfinite(arena)) labels[n] = "activations (planned arena)", v[n++] = arena;
    if (isfinite(params)) labels[n] = "parameters, gradients, moments", v[n++] = params;
    if (isfinite(total)) labels[n] = "planned in all", v[n++] = total;
    if (isfinite(device) && device > 0) { /* a GPU run: its progress lines logged the device's memory in use */
        double peak = NAN;
        for (int i = 0; i < r->steps.n; i++)
            if (isfinite(r->steps.col[S_MEM][i]) && !(r->steps.col[S_MEM][i] * 1048576.0 <= peak))
                peak = r->steps.col[S_MEM][i] * 1048576.0;
        if (isfinite(peak)) labels[n] = "device in use, highest logged", v[n++] = peak;
        labels[n] = "device in use at the end", v[n++] = device;
    }
    for (int i = 0; i < n; i++) top = fmax(top, v[i]);
    /* the unit that gives the largest bar a few digits before the point */
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && top >= 1024.0 * 0.5) top /= 1024, u++;
    for (int i = 0; i < n; i++) v[i] = ldexp(v[i], -10 * u);
    slot_begin(b, 0, 2, brisk_bars_height(n));
    brisk_bars(b, "memory", "#8c564b", CHART_W, n ? "Memory" : "Memory (no run_end line: the run is going on, or was killed)",
               units[u], labels, v, n, "failed");
    slot_end(b);
}

static void time_total_chart(brisk_html *b, const run_log *r) {
    double wall = end_num(r, "wall_s"), data = end_num(r, "data_wait_s"), copy = end_num(r, "copy_s");
    double compute = end_num(r, "compute_s"), ckpt = end_num(r, "checkpoint_s"), val = end_num(r, "validation_s");
    /* runs written before checkpoint_s and validation_s existed: one "other" bar */
    int split = isfinite(ckpt) && isfinite(val);
    double other = wall - data - copy - compute;
    const char *labels[] = {"data wait", "copy to device", "compute",
                            split ? "checkpoints" : "other (validation, checkpoints)", "validation", "other"};
    double v[6] = {data, copy, compute, split ? ckpt : other, val, other - ckpt - val};
    int n = isfinite(wall) ? (split ? 6 : 4) : 0;
    if (n && v[n - 1] < 0) v[n - 1] = 0;
    slot_begin(b, 1, 2, brisk_bars_height(n));
    brisk_bars(b, "time_total", "#e377c2", CHART_W, n ? "Time over the run" : "Time over the run (no run_end line yet)",
               "s", labels, v, n, "failed");
    slot_end(b);
}

/* The optimizations the run had on, and why any was off (rundir.c writes them). */
static void optimization_table(brisk_html *b, const run_log *r) {
    brisk_html_printf(b, "<h2>Optimizations</h2>\n");
    int n = cJSON_GetArraySize(r->optimizations);
    if (!cJSON_IsArray(r->optimizations) || n == 0) {
        brisk_html_printf(b, "<p class=\"notes\">The run logged no optimization list (written by brisk from this "
                          "version on).</p>\n");
        return;
    }
    brisk_html_printf(b, "<table id=\"optimizations\">\n<tr><th>optimization</th><th>state</th><th>detail (why "
                      "off)</th></tr>\n");
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(r->optimizations, i);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(it, "state");
        const cJSON *detail = cJSON_GetObjectItemCaseSensitive(it, "detail");
        const char *st = cJSON_IsString(state) ? state->valuestring : "";
        const char *cls = strcmp(st, "on") == 0 ? "on" : strcmp(st, "off") == 0 ? "off" : "info";
        brisk_html_printf(b, "<tr><td>");
        brisk_html_escape(b, cJSON_IsString(name) ? name->valuestring : "?");
        brisk_html_printf(b, "</td><td><span class=\"%s\">", cls);
        brisk_html_escape(b, st);
        brisk_html_printf(b, "</span></td><td>");
        brisk_html_escape(b, cJSON_IsString(detail) ? detail->valuestring : "");
        brisk_html_printf(b, "</td></tr>\n");
    }
    brisk_html_printf(b, "</table>\n");
}

/* A table cell: the number with fmt, "-" when not finite. */
static void num_cell(brisk_html *b, const char *fmt, double v) {
    char s[400] = "-"; /* "%.0f" of a step logged as 1e300 */
    if (isfinite(v)) snprintf(s, sizeof s, fmt, v);
    brisk_html_printf(b, "<td class=\"num\">%s</td>", s);
}

static void epoch_table(brisk_html *b, const run_log *r) {
    const log_table *e = &r->epochs;
    if (!e->n) return;
    int classifier = isfinite(max_finite(e->col[E_ACC], e->n)); /* a classifier logs its accuracy */
    brisk_html_printf(b, "<h2>Epochs</h2>\n<table id=\"epochs\">\n<tr><th>epoch</th><th>step</th>"
                      "<th>train loss</th><th>validation loss</th>%s</tr>\n",
                      classifier ? "<th>validation accuracy</th>" : "");
    for (int i = 0; i < e->n; i++) {
        brisk_html_printf(b, "<tr><td class=\"num\">%d</td>", i + 1);
        num_cell(b, "%.0f", e->col[E_STEP][i]);
        num_cell(b, "%.6g", e->col[E_TRAIN][i]);
        num_cell(b, "%.6g", e->col[E_VAL][i]);
        if (classifier) num_cell(b, "%.4f", e->col[E_ACC][i]);
        brisk_html_printf(b, "</tr>\n");
    }
    brisk_html_printf(b, "</table>\n");
}

/* data.images.on_error "skip": every image file the run left out, and when */
static void skipped_table(brisk_html *b, const run_log *r) {
    int n = cJSON_GetArraySize(r->skipped);
    if (n == 0) return;
    brisk_html_printf(b, "<h2>Images left out (%d)</h2>\n<table id=\"skipped\">\n<tr><th>file</th><th>when</th>"
                      "<th>why</th></tr>\n", n);
    const cJSON *it;
    cJSON_ArrayForEach(it, r->skipped) {
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(it, "file");
        const cJSON *when = cJSON_GetObjectItemCaseSensitive(it, "when");
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(it, "step");
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(it, "reason");
        brisk_html_printf(b, "<tr><td>");
        brisk_html_escape(b, cJSON_IsString(file) ? file->valuestring : "?");
        if (cJSON_IsString(when) && strcmp(when->valuestring, "run") == 0 && cJSON_IsNumber(step))
            brisk_html_printf(b, "</td><td>at step %.0f (replaced in its batches)</td><td>", step->valuedouble);
        else
            brisk_html_printf(b, "</td><td>at load</td><td>");
        brisk_html_escape(b, cJSON_IsString(why) ? why->valuestring : "");
        brisk_html_printf(b, "</td></tr>\n");
    }
    brisk_html_printf(b, "</table>\n");
}

void brisk_report_run_render(brisk_html *b, const char *dir, const run_log *r) {
    char title[BRISK_PATH_MAX + 32];
    snprintf(title, sizeof title, "brisk report: %s", dir);
    brisk_html_page_begin(b, title);
    double x0, x1;
    step_domain(r, &x0, &x1);
    int height = HEAD_H + 2 * (CHART_H + GAP) + brisk_bars_height(5);
    brisk_html_printf(b, "<div class=\"page\" style=\"height:%dpx\">\n", height);
    header(b, dir, r);
    loss_chart(b, r, x0, x1);
    series_chart(b, r, 1, 0, "lr", "#2ca02c", "Learning rate", "learning rate", S_LR, x0, x1, "no steps logged");
    series_chart(b, r, 0, 1, "throughput", "#9467bd", "Throughput", "samples/s", S_SPS, x0, x1, "no steps logged");
    time_split_chart(b, r, x0, x1);
    memory_chart(b, r);
    time_total_chart(b, r);
    brisk_html_printf(b, "</div>\n");
    optimization_table(b, r);
    epoch_table(b, r);
    skipped_table(b, r);
    if (r->truncated)
        brisk_html_printf(b, "<p class=\"notes\">The last line of metrics.jsonl was cut short (the run was stopped "
                          "while writing it) and is left out.</p>\n");
    if (r->damaged) {
        /* The reason quotes the damaged line itself: markup in it must stay text. */
        brisk_html_printf(b, "<p class=\"notes\">%d damaged line%s of metrics.jsonl %s left out (the first, line %d: ",
                          r->damaged, r->damaged == 1 ? "" : "s", r->damaged == 1 ? "is" : "are",
                          r->first_damaged_line);
        brisk_html_escape(b, r->first_damaged);
        brisk_html_printf(b, ").</p>\n");
    }
    brisk_html_page_end(b);
}

brisk_status brisk_report_run(const char *run_dir, const char *out_path, char *written, size_t written_size,
                              const brisk_logger *log, brisk_error *err) {
    run_log r;
    memset(&r, 0, sizeof r);
    brisk_status st = brisk_run_log_read(run_dir, &r, err);
    if (!st && r.damaged)
        brisk_log(log, BRISK_LOG_WARN, "%s/metrics.jsonl: %d damaged line%s left out of the report (the first, line %d: "
                  "%s)", run_dir, r.damaged, r.damaged == 1 ? "" : "s", r.first_damaged_line, r.first_damaged);
    char path[BRISK_PATH_MAX + 32];
    if (out_path) snprintf(path, sizeof path, "%s", out_path);
    else snprintf(path, sizeof path, "%s/report.html", run_dir);
    if (!st) {
        brisk_html b = {0};
        brisk_report_run_render(&b, run_dir, &r);
        st = brisk_html_write(&b, path, err);
        brisk_html_free(&b);
    }
    if (!st && written) snprintf(written, written_size, "%s", path);
    brisk_run_log_free(&r);
    return st;
}
