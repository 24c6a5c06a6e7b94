/* core: status values, dtypes, shapes, host tensors, the Philox RNG.
 * Knows nothing about graphs or devices. */
#ifndef BRISK_CORE_H
#define BRISK_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors
 * Errors are values. A function that can fail returns a brisk_status and, when
 * given a non-NULL brisk_error*, fills its message: one line that names the file,
 * the field and what was expected. Library code never aborts. */
typedef enum brisk_status {
    BRISK_OK = 0,
    BRISK_ERR_INVALID,     /* a bad argument, config value or flag */
    BRISK_ERR_IO,          /* open/read/write/rename failed */
    BRISK_ERR_FORMAT,      /* a malformed file */
    BRISK_ERR_SHAPE,       /* shapes or dtypes that do not fit */
    BRISK_ERR_NOMEM,       /* an allocation failed or a plan does not fit */
    BRISK_ERR_UNSUPPORTED, /* valid but not implemented here (dtype, backend) */
    BRISK_ERR_NUMERIC,     /* NaN or inf where a number was needed */
    BRISK_ERR_INTERNAL,
    BRISK_ERR_FULL,        /* a bounded buffer is full and its policy is to refuse */
    BRISK_STOPPED,         /* not an error: a stop was requested; the work done is kept */
    BRISK_BUSY             /* the call cannot run now (it would wait for the call it is made from) */
} brisk_status;

typedef struct brisk_error {
    brisk_status code;
    char msg[1024];
} brisk_error;

/* Fills err (when non-NULL) with a printf-formatted message and returns code. */
brisk_status brisk_errorf(brisk_error *err, brisk_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "prefix: " to an error already filled (adds context on the way up). */
brisk_status brisk_error_prefix(brisk_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *brisk_status_name(brisk_status s);

/* ---------------------------------------------------------------- dtypes */
typedef enum brisk_dtype {
    BRISK_F32 = 0,
    BRISK_I32,
    BRISK_F16,  /* storage type, declared for mixed precision */
    BRISK_BF16, /* storage type, declared for mixed precision */
    BRISK_U8,
    BRISK_DTYPE_COUNT
} brisk_dtype;

size_t brisk_dtype_size(brisk_dtype t);
const char *brisk_dtype_name(brisk_dtype t); /* "f32", "i32", ... */
/* safetensors spelling: "F32", "I32", "F16", "BF16", "U8". */
const char *brisk_dtype_st_name(brisk_dtype t);
int brisk_dtype_from_st_name(const char *s, brisk_dtype *out); /* 0 on success */

float brisk_bf16_to_f32(uint16_t h);
uint16_t brisk_f32_to_bf16(float f); /* round to nearest even */
float brisk_f16_to_f32(uint16_t h);
uint16_t brisk_f32_to_f16(float f);

/* ---------------------------------------------------------------- shapes */
#define BRISK_MAX_DIMS 6

typedef struct brisk_shape {
    int ndim;                       /* 0 is a scalar */
    int64_t d[BRISK_MAX_DIMS];
} brisk_shape;

brisk_shape brisk_shape_make(int ndim, const int64_t *dims);
brisk_shape brisk_shape1(int64_t a);
brisk_shape brisk_shape2(int64_t a, int64_t b);
brisk_shape brisk_shape3(int64_t a, int64_t b, int64_t c);
brisk_shape brisk_shape4(int64_t a, int64_t b, int64_t c, int64_t e);
/* The element count; 0 when any dimension is 0, INT64_MAX when the product overflows. */
int64_t brisk_shape_numel(const brisk_shape *s);
int brisk_shape_equal(const brisk_shape *a, const brisk_shape *b);
/* NumPy broadcast of a and b into out (each dim equal, or 1 on one side); -1 when they do not
 * broadcast. */
int brisk_shape_broadcast(const brisk_shape *a, const brisk_shape *b, brisk_shape *out);
/* Room for one printed shape: "[" + 6 x "-9223372036854775808, " + "]". */
#define BRISK_SHAPE_STR 160
/* "[16, 256]" into buf; returns buf. */
char *brisk_shape_str(const brisk_shape *s, char *buf, size_t n);

/* ---------------------------------------------------------------- host tensors
 * A named host array as readers produce it and checkpoints consume it. Always
 * C-contiguous. `data` is owned by whoever allocated it (brisk_tensor_free frees
 * data allocated by brisk_tensor_alloc). */
typedef struct brisk_tensor {
    brisk_dtype dtype;
    brisk_shape shape;
    void *data;
} brisk_tensor;

brisk_status brisk_tensor_alloc(brisk_tensor *t, brisk_dtype dt, brisk_shape s, brisk_error *err);
void brisk_tensor_free(brisk_tensor *t);
size_t brisk_tensor_bytes(const brisk_tensor *t);

/* ---------------------------------------------------------------- Philox 4x32-10
 * Counter-based RNG: the same (key, counter) gives the same numbers on every
 * backend and thread, so dropout masks and diffusion noise are reproducible from
 * the seed and the step alone (resume needs no RNG state beyond the step).
 *
 * Convention for random ops (shared by every backend): key = seed (lo, hi);
 * counter = {block lo, block hi, stream, rng_step} where block = element / 4,
 * stream is the op's own id and rng_step the micro-step counter. Element i takes
 * word i % 4 of its block. */
void brisk_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* Uniform in (0, 1]: never 0, so log() is safe. */
static inline float brisk_u32_to_unit(uint32_t x) {
    return ((float)(x >> 8) + 1.0f) * (1.0f / 16777216.0f);
}
/* One block of 4 normals from one block of 4 uniforms (Box-Muller on pairs). */
void brisk_philox_normal4(const uint32_t ctr[4], const uint32_t key[2], float out[4]);
/* n normals for one item (a sample, a row): key = seed, counter = {index lo, index hi, stream,
 * block}, value j from block j / 4. What the example data and the sampler's start draw. */
void brisk_philox_normals(uint64_t seed, uint64_t index, uint32_t stream, float *out, int64_t n);

/* ---------------------------------------------------------------- logging
 * Library code never writes to stdout; it reports through a sink. NULL sink: silent. */
typedef enum { BRISK_LOG_ERROR, BRISK_LOG_WARN, BRISK_LOG_INFO, BRISK_LOG_DEBUG } brisk_log_level;
typedef void (*brisk_log_fn)(void *user, brisk_log_level level, const char *msg);
typedef struct brisk_logger {
    brisk_log_fn fn;
    void *user;
    brisk_log_level max_level;
} brisk_logger;
void brisk_log(const brisk_logger *lg, brisk_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- text (text.c) */
/* The length of the valid UTF-8 character at s (1 to 4), or 0 when s[0..n) does not start
 * with one (overlong forms and surrogates are not valid). */
size_t brisk_utf8_char_len(const unsigned char *s, size_t n);
/* The offset of the first byte that is not valid UTF-8, or (size_t)-1 when all n are. */
size_t brisk_utf8_bad(const void *s, size_t n);

/* ---------------------------------------------------------------- caches (cache_dir.c)
 * Choices brisk measured once (GEMM kernels, cuBLASLt and cuDNN algorithms per shape) are kept
 * in BRISK_CACHE_DIR, else $XDG_CACHE_HOME/brisk, else $HOME/.cache/brisk; BRISK_CACHE_DIR=-
 * turns them off. brisk_cache_file: that folder's file `name` ("" when off). */
void brisk_cache_file(const char *name, char *out, size_t n);
/* Creates the missing folders of path's directory: for a cache file, only those below the
 * base (BRISK_CACHE_DIR, $XDG_CACHE_HOME, $HOME), which must exist; 0 on success. */
int brisk_cache_prepare(const char *path);

/* Monotonic wall clock in seconds. */
double brisk_now(void);
/* Sorts v[0, n) ascending in place and returns its median (the mean of the middle two for
 * an even n; NaN for none). */
double brisk_median(double *v, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
