/* data-internal: the CSV table the dataset loader builds fields from. */
#ifndef BRISK_DATA_CSV_INTERNAL_H
#define BRISK_DATA_CSV_INTERNAL_H

#include "brisk/core.h"

typedef struct brisk_csv_table {
    int64_t rows;
    int ncols;
    double *v;       /* [rows, ncols]; doubles hold every i32 exactly */
    int64_t *lines;  /* [rows]: the line each row starts on, for messages */
    int64_t file_rows; /* data rows in the file (rows: those kept) */
} brisk_csv_table;

/* Reads the header and the selected columns (columns NULL: all). A column with
 * integral[c] set (or every column when all_integral) must hold integers in i32's
 * range; the error names line and column. */
brisk_status brisk_csv_table_parse(const void *buf, size_t len, const char *name, const char *const *columns,
                                   int ncolumns, const int *integral, int all_integral, brisk_csv_table *out,
                                   brisk_error *err);
/* The same for data rows [lo, hi) only (0-based after the header, clamped to the file): the
 * other records are split, to find where rows end, but neither parsed as numbers nor kept. */
brisk_status brisk_csv_table_parse_rows(const void *buf, size_t len, const char *name, const char *const *columns,
                                        int ncolumns, const int *integral, int all_integral, int64_t lo, int64_t hi,
                                        brisk_csv_table *out, brisk_error *err);
void brisk_csv_table_free(brisk_csv_table *t);

/* Whether s is a decimal number as a CSV cell holds one ([+-]digits[.digits][e[+-]digits], or
 * NaN/inf, which the readers refuse by name later); 0x10 and other strtod forms are not. */
int brisk_csv_decimal(const char *s);

/* The header's column names, trimmed, in *names (one malloc'd block: free(*names)). */
brisk_status brisk_csv_header(const void *buf, size_t len, const char *name, char ***names, int *n, brisk_error *err);
/* Column selections with ranges expanded against the header: "FIRST:LAST" is every column
 * from FIRST through LAST in header order (a header name containing ':' is taken as it is).
 * *out (malloc'd; free it) points into header and sel. Names the header lacks pass through,
 * for the table reader to report. */
brisk_status brisk_csv_expand_columns(char *const *header, int nh, const char *name, const char *const *sel, int nsel,
                                      const char ***out, int *nout, brisk_error *err);

#endif
