/* TensorBoard event files (tboard.c): the run's scalars, texts and parameter histograms as
 * Event protobufs in TFRecord framing, written without TensorFlow. Records are built in
 * memory and reach the file at brisk_tboard_flush (each epoch end, each checkpoint and the
 * run's end), when the buffer passes 1 MiB, or 30 s after the last write, so the step loop
 * never waits on the disk and a long epoch still shows as it goes. A write error is
 * reported once through the logger; the run goes on without the event file. Internal to
 * the trainer. */
#ifndef BRISK_TRAIN_TBOARD_H
#define BRISK_TRAIN_TBOARD_H

#include <stdint.h>

#include "brisk/core.h"

typedef struct brisk_tboard brisk_tboard;

/* What ends the name of brisk's event files: TensorBoard reads any name holding "tfevents",
 * and a run directory's --overwrite removes only files so named, never another program's. */
#define BRISK_TBOARD_SUFFIX ".brisk"

/* Creates dir/events.out.tfevents.<seconds>.<host>.<pid>.brisk and buffers its first record
 * (file_version "brain.Event:2"); NULL (reported through log) when it cannot. */
brisk_tboard *brisk_tboard_open(const char *dir, const brisk_logger *log);
/* Scalars are float32 in TensorBoard; NaN and infinities are left out. */
void brisk_tboard_scalar(brisk_tboard *tb, int64_t step, const char *tag, double v);
/* A text-plugin summary (a string tensor), shown as Markdown by TensorBoard. */
void brisk_tboard_text(brisk_tboard *tb, int64_t step, const char *tag, const char *text);
/* A histogram of n values: min, max, count, sum, sum of squares and 30 equal buckets. */
void brisk_tboard_histogram(brisk_tboard *tb, int64_t step, const char *tag, const float *v, int64_t n);
/* Writes the buffered records and flushes the file. */
void brisk_tboard_flush(brisk_tboard *tb);
/* Flushes, closes and frees (NULL: nothing). */
void brisk_tboard_close(brisk_tboard *tb);
/* The file's path ("" after a failed open). */
const char *brisk_tboard_path(const brisk_tboard *tb);

#endif
