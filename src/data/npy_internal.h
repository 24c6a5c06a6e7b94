/* data-internal: NPY pieces the NPZ reader and writer share with npy.c. */
#ifndef BRISK_DATA_NPY_INTERNAL_H
#define BRISK_DATA_NPY_INTERNAL_H

#include "brisk/data.h"

/* NumPy's name for a dtype: "float32", "uint8", "bool". */
const char *brisk_npy_type_name(const brisk_npy_dtype *dt);
/* Writes the version 1.0 magic + header of an F32/I32 tensor (64-byte aligned, as NumPy
 * does) into buf; returns its length, or 0 when cap is too small. */
size_t brisk_npy_header(const brisk_tensor *t, char *buf, size_t cap);

#endif
