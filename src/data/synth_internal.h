/* data-internal: the synthetic series of synth_series.c, for synth.c. */
#ifndef BRISK_DATA_SYNTH_INTERNAL_H
#define BRISK_DATA_SYNTH_INTERNAL_H

#include "brisk/data.h"

/* Adds the series' columns to ds as fields [n] each (close, ret_*, dev_*, vol_*, ...). */
brisk_status brisk_synth_series(int64_t n, uint64_t seed, brisk_dataset *ds, brisk_error *err);
/* The column names in order; returns how many (33). */
int brisk_synth_series_columns(char names[][16]);

#endif
