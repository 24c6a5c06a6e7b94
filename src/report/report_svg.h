/* The plotting helper behind the HTML reports (report_run.c, report_bench.c,
 * report_pipeline.c): a growing text buffer, HTML escaping, nice axis ticks, and SVG
 * charts drawn with fixed pixel sizes, so a page's layout (and a test's screenshot
 * check) knows where every chart is. No JavaScript: the page is static HTML with
 * inline SVG. */
#ifndef BRISK_REPORT_SVG_H
#define BRISK_REPORT_SVG_H

#include <stddef.h>

#include "brisk/core.h"
#include "core/strbuf.h"

/* A page's text: a brisk_strbuf (core/strbuf.h). */
typedef brisk_strbuf brisk_html;

void brisk_html_free(brisk_html *b);
void brisk_html_printf(brisk_html *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends text with & < > " ' as entities, and control characters other than tab and
 * newline dropped, so any file name or config string is safe in an element or attribute. */
void brisk_html_escape(brisk_html *b, const char *text);
/* The page's start (doctype, title, the shared style sheet, a fixed-width body) and end. */
void brisk_html_page_begin(brisk_html *b, const char *title);
void brisk_html_page_end(brisk_html *b);
/* A chart's box at (left, top) of the page's fixed-layout area (class "page"), w x h pixels;
 * data-box gives it in screenshot pixels (the body's 20px margin added) for the test's check. */
void brisk_html_box_begin(brisk_html *b, int left, int top, int w, int h);
void brisk_html_box_end(brisk_html *b);
/* Writes the page to path as every brisk output is written (data/bytes.h): a file replaced
 * atomically, a device or FIFO written in place, "-" standard output. */
brisk_status brisk_html_write(const brisk_html *b, const char *path, brisk_error *err);
/* "1.23e-04", "0.5", "1200", "12k", "3.4M": short tick and value labels, "-" for NaN. */
void brisk_svg_format(double v, char *buf, size_t n);

/* The finite range of v[0..n) into *lo, *hi, widened when empty (0..1) or a single
 * value (v +- 1, or +-10% of it), so a scale never divides by zero. Returns how many
 * finite values there are. */
int brisk_svg_range(const double *v, int n, double *lo, double *hi);
/* Round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten), at most
 * max ticks; *lo and *hi are widened to the outer ticks. Returns the count (2 or more). */
int brisk_svg_ticks(double *lo, double *hi, int max, double *ticks);

/* A chart: an <svg> of width x height pixels with its plot area inset for the axes. */
typedef struct brisk_chart {
    int width, height;
    int title_len;               /* characters: the legend keeps clear of the title */
    double px, py, pw, ph;       /* plot area in pixels */
    double x0, x1, y0, y1;       /* data domain (after the ticks widened it) */
} brisk_chart;

/* Data x or y to pixels; NaN stays NaN. */
double brisk_chart_x(const brisk_chart *c, double x);
double brisk_chart_y(const brisk_chart *c, double y);

/* Opens the <svg> (id and data-colour for the test's check: the main series' colour),
 * draws the title, grid, ticks and axis labels for the domain [x0, x1] x [y0, y1]. y is
 * widened to round ticks; x is kept (a run's steps end where it ended) and, being a step
 * count, gets whole-number ticks only. */
void brisk_chart_begin(brisk_html *b, brisk_chart *c, const char *id, const char *colour, int width, int height,
                       const char *title, const char *xlabel, const char *ylabel, double x0, double x1, double y0,
                       double y1);
/* Widens a step domain [*x0, *x1] for a chart `width` pixels wide by a dot's width at each
 * end, so that a dot at the first or last step (a validation loss at the run's last step)
 * is drawn whole inside the plot's frame, not cut in half by it. */
void brisk_chart_pad_x(double *x0, double *x1, int width);
/* A line through the finite points (x[i], y[i]); a non-finite y breaks it; a lone point
 * is drawn as a dot. Returns the points drawn. */
int brisk_chart_line(brisk_html *b, const brisk_chart *c, const double *x, const double *y, int n, const char *colour);
/* Dots at each finite point (validation losses, one per epoch). */
int brisk_chart_dots(brisk_html *b, const brisk_chart *c, const double *x, const double *y, int n,
                     const char *colour);
/* Stacked areas: layer k's band lies between the sum of layers 0..k-1 and 0..k at each x. */
void brisk_chart_stack(brisk_html *b, const brisk_chart *c, const double *x, const double *const *layers, int k, int n,
                       const char *const *colours);
/* A centred note in the plot area ("no finite losses"). */
void brisk_chart_note(brisk_html *b, const brisk_chart *c, const char *text);
/* The series' names and colours: a row right of the title, or where they do not fit there,
 * a column in the plot's top right corner. */
void brisk_chart_legend(brisk_html *b, const brisk_chart *c, const char *const *names, const char *const *colours,
                        int k);
void brisk_chart_end(brisk_html *b);

/* A horizontal bar chart: one labelled bar per row, value printed at its end; a
 * non-finite value gets the text `missing` ("failed", "no validation") and no bar. */
void brisk_bars(brisk_html *b, const char *id, const char *colour, int width, const char *title, const char *unit,
                const char *const *labels, const double *values, int n, const char *missing);
/* The height brisk_bars gives n rows. */
int brisk_bars_height(int n);

#endif
