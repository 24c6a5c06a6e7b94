/* data-internal: NPY pieces the NPZ reader and writer share with npy.c. */
#ifndef BRISK_DATA_NPY_INTERNAL_H
#define BRISK_DATA_NPY_INTERNAL_H

#include "brisk/data.h"
#include "data/bytes.h"

/* NumPy's name for a dtype: "float32", "uint8", "bool". */
const char *brisk_npy_type_name(const brisk_npy_dtype *dt);
/* Writes the version 1.0 magic + header of an F32/I32 tensor (64-byte aligned, as NumPy
 * does) into buf; returns its length, or 0 when cap is too small. */
size_t brisk_npy_header(const brisk_tensor *t, char *buf, size_t cap);

/* Pieces of brisk_npy_parse, for readers that stream the data in (the NPZ inflater):
 * the whole header's length from its first 10 to 12 bytes; the header itself (buf holds at
 * least all of it: dtype, shape and nbytes set, data NULL; *swap when the data's bytes are
 * to be reversed; *data_off where the data starts); the check that `have` data bytes are
 * what the header says; and the in-place fix-up of the data once read (byte order, bools
 * as 0/1). */
brisk_status brisk_npy_header_len(const void *buf, size_t len, const char *name, uint64_t *total, brisk_error *err);
brisk_status brisk_npy_parse_header(const void *buf, size_t len, const char *name, brisk_npy_array *out, int *swap,
                                    size_t *data_off, brisk_error *err);
brisk_status brisk_npy_check_size(const brisk_npy_array *a, const char *name, uint64_t have, brisk_error *err);
void brisk_npy_fix_in_place(brisk_npy_array *a, int swap);

/* The longest .npy header read (NumPy's own are under 1 KiB; np.load refuses 10 000). */
#define BRISK_NPY_MAX_HEADER (1u << 20)

/* The .npy in bytes [off, off + len) of s, its data read straight into out->data
 * (malloc'd): all of it; with header_only, its header (data NULL); with rows, the rows
 * [rows[0], rows[1]) of its leading dimension, clamped (out's shape and nbytes the
 * shard's). crc, when non-NULL, continues over the bytes read (the whole member's when
 * neither header_only nor rows). */
brisk_status brisk_npy_read_src(const brisk_src *s, uint64_t off, uint64_t len, const char *name, int header_only,
                                const int64_t *rows, uint32_t *crc, brisk_npy_array *out, brisk_error *err);
/* The bytes of one row of the leading dimension; a shard [r[0], r[1]) clamped to the array,
 * and the array's shape and nbytes made the shard's. */
size_t brisk_npy_row_bytes(const brisk_npy_array *a);
void brisk_npy_shard_rows(brisk_npy_array *a, int64_t *r);

#endif
