/* metrics.jsonl, written a record at a time (metrics_file.c). Each record reaches the file in
 * one write(2) as it is made (O_APPEND, no stdio buffer): `tail -f` shows it at once, and a
 * run killed at any moment keeps every record but the one being written. A failed write (a
 * full disk, `ulimit -f`) is one warning naming the file and the error; training goes on,
 * and the next record written starts on a line of its own, as does the first record of a
 * run appending to a file whose last line was cut short (a resume after such a failure or
 * a kill), so that no record is ever glued onto a partial one. Internal to the trainer. */
#ifndef BRISK_TRAIN_METRICS_FILE_H
#define BRISK_TRAIN_METRICS_FILE_H

#include "brisk/core.h"

typedef struct brisk_metrics_file brisk_metrics_file;

/* Opens path for appending (creating it); log is kept for the warnings. */
brisk_status brisk_metrics_file_open(brisk_metrics_file **out, const char *path, const brisk_logger *log,
                                    brisk_error *err);
/* Appends line (one JSON record, without its newline) and the newline. */
void brisk_metrics_file_put(brisk_metrics_file *m, const char *line);
void brisk_metrics_file_close(brisk_metrics_file *m);

#endif
