/* safetensors: brisk's checkpoint and weight-exchange format, readable by the
 * Python `safetensors` package (and so by PyTorch) and the reverse.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * then the raw little-endian data buffer; offsets count from the buffer's start.
 *
 * Writing is atomic: PATH.tmp.<pid> is written, flushed, fsynced and renamed over
 * PATH, then the directory is fsynced, so a crash leaves either the old file or the
 * new one under PATH, never half of one.
 *
 * Reading validates everything before handing out a tensor (a file is untrusted
 * input): header length against the file size and a 100 MB cap, UTF-8, JSON, dtypes
 * brisk knows (F32, I32, F16, BF16, U8), shape x dtype size against the offsets (with
 * overflow checks), offsets inside the data buffer, no two tensors overlapping, no
 * duplicate names, metadata values strings. Messages name the file and the tensor. */
#ifndef BRISK_SAFETENSORS_H
#define BRISK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The header cap the reference implementation uses too. */
#define BRISK_ST_MAX_HEADER 100000000u

/* ---------------------------------------------------------------- writing */

/* One tensor to write: C-contiguous little-endian data of shape x dtype size bytes. */
typedef struct brisk_st_entry {
    const char *name;
    brisk_dtype dtype;
    brisk_shape shape;
    const void *data; /* may be NULL only when the tensor has no elements */
} brisk_st_entry;

typedef struct brisk_st_meta {
    const char *key, *value;
} brisk_st_meta;

/* Writes the entries and metadata atomically to `path` (see above). Tensors are laid
 * out in the given order, except that a stable sort puts larger element sizes first
 * (F32/I32, then F16/BF16, then U8) so each tensor starts aligned to its element size
 * (the header is padded with spaces to a multiple of 8); offsets are contiguous, which
 * the reference reader requires. Names must be unique, non-empty and not
 * "__metadata__". On any error the temporary file is removed and an existing `path`
 * is left as it was. */
brisk_status brisk_safetensors_write(const char *path, const brisk_st_entry *entries, size_t n,
                                     const brisk_st_meta *meta, size_t n_meta, brisk_error *err);

/* ---------------------------------------------------------------- reading */

/* A validated file, opaque. */
typedef struct brisk_safetensors brisk_safetensors;

/* One tensor of an open file. `data` points into the file's buffer and may be
 * unaligned for the dtype in files brisk did not write: copy it out (memcpy,
 * brisk_safetensors_read) rather than casting. */
typedef struct brisk_st_tensor {
    const char *name;
    brisk_dtype dtype;
    brisk_shape shape;
    uint64_t begin, end; /* data_offsets, relative to the data buffer */
    const void *data;
    size_t nbytes;
} brisk_st_tensor;

/* Reads the whole file at `path` and validates it. */
brisk_status brisk_safetensors_open(const char *path, brisk_safetensors **out, brisk_error *err);
/* Validates a file image in memory (borrowed: it must outlive the result). `name`
 * stands for the file in messages ("<memory>" if NULL). */
brisk_status brisk_safetensors_parse(const void *buf, size_t len, const char *name,
                                     brisk_safetensors **out, brisk_error *err);
void brisk_safetensors_free(brisk_safetensors *st);

const char *brisk_safetensors_name(const brisk_safetensors *st);
/* Tensors in file order (by data offset). */
size_t brisk_safetensors_count(const brisk_safetensors *st);
const brisk_st_tensor *brisk_safetensors_at(const brisk_safetensors *st, size_t i);
/* NULL when absent. */
const brisk_st_tensor *brisk_safetensors_find(const brisk_safetensors *st, const char *name);

/* Metadata, in file order; brisk_safetensors_meta gives NULL for an absent key. */
size_t brisk_safetensors_meta_count(const brisk_safetensors *st);
const char *brisk_safetensors_meta(const brisk_safetensors *st, const char *key);
void brisk_safetensors_meta_at(const brisk_safetensors *st, size_t i, const char **key,
                               const char **value);

/* Copies tensor `name` into dst, which holds `shape` x `dtype`. A missing tensor or a
 * different dtype or shape is an error naming the file and tensor ("...: tensor
 * 'net.0.weight': file has [256, 295] F32, expected [256, 300] F32"). */
brisk_status brisk_safetensors_read(const brisk_safetensors *st, const char *name,
                                    brisk_dtype dtype, brisk_shape shape, void *dst,
                                    brisk_error *err);
/* Allocates *out (brisk_tensor_alloc) with the tensor's own dtype and shape, and copies. */
brisk_status brisk_safetensors_load(const brisk_safetensors *st, const char *name,
                                    brisk_tensor *out, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
