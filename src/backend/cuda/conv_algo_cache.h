/* The cuDNN convolution algorithm cache: which algorithm cudnnFind*AlgorithmEx timed fastest
 * for one convolution pass, kept on disk beside the GEMM autotune cache (autotune.c) so the
 * next run starts without re-timing. Free of CUDA and cuDNN types: it builds in every build,
 * and CI's test (tests/backend/test_cuda_conv_cache.c) round-trips it without a GPU.
 *
 * The file is text: a header line, then one "key<TAB>algorithm" per line, where the
 * algorithm is the cuDNN enum value (cudnnConvolutionFwdAlgo_t, BwdDataAlgo_t or
 * BwdFilterAlgo_t, as the key's pass says). The key names the GPU (name, compute capability,
 * SM count), the cuDNN version and the shape (pass, sizes, window, precision, layout,
 * deterministic), so entries of other GPUs or cuDNN versions never apply. Unlike the GEMM
 * cache a malformed file is refused whole, with the file and line: a half-read file would
 * silently re-time some shapes and overwrite the rest on save. */
#ifndef BRISK_CUDA_CONV_ALGO_CACHE_H
#define BRISK_CUDA_CONV_ALGO_CACHE_H

#include "brisk/graph.h"

#include <stddef.h>
#include <stdint.h>

#define CONV_CACHE_HEADER "# brisk cuDNN convolution algorithm cache v1: key<TAB>algorithm"
#define CONV_CACHE_FILE "cudnn-conv-algos.txt"
#define CONV_CACHE_KEY_MAX 384
#define CONV_CACHE_ALGO_MAX 63 /* above every cuDNN 9 algorithm enum (the largest has 8 values) */

typedef enum conv_pass { CONV_PASS_FWD = 0, CONV_PASS_BWD_DATA, CONV_PASS_BWD_FILTER } conv_pass;

/* The compute a convolution runs under: fp32 (FMA), TF32 tensor cores on fp32 data, or
 * 16-bit data with fp32 accumulation. */
typedef enum conv_math { CONV_MATH_FP32 = 0, CONV_MATH_TF32, CONV_MATH_BF16, CONV_MATH_FP16 } conv_math;

/* The key's layout field: the layout cuDNN runs in (an algorithm's entry), or the graph's
 * layout the choice was made from (a layout choice's entry, conv_layout.h: its value is the
 * chosen layout, 0 NCHW or 1 NHWC). */
enum { CONV_KEY_NCHW = 0, CONV_KEY_NHWC = 1, CONV_KEY_CHOICE_FROM_NCHW = 2, CONV_KEY_CHOICE_FROM_NHWC = 3 };

/* Everything that decides which algorithm (or layout) is fastest for one pass. */
typedef struct conv_algo_shape {
    conv_pass pass;
    int64_t n, c, h, w, co;   /* x [N, C, H, W], w [Co, C/groups, kh, kw] (logical dims in either layout) */
    brisk_window win;         /* its layout field is not part of the key: nhwc is */
    conv_math math;
    int nhwc;                 /* CONV_KEY_* */
    int deterministic;
} conv_algo_shape;

/* The device part of a key. */
typedef struct conv_algo_device {
    const char *gpu_name;
    int cc_major, cc_minor, sms;
    size_t cudnn_version;
} conv_algo_device;

typedef struct conv_algo_cache {
    char path[1100];       /* "" = no file */
    char (*keys)[CONV_CACHE_KEY_MAX];
    int *algos;
    int n, cap;
    int dirty;
} conv_algo_cache;

/* The cache file's path beside the GEMM cache file gemm_path ("" = no file, then none). */
void conv_cache_path_beside(const char *gemm_path, char *out, size_t out_size);

/* The key's text; tabs and newlines in the GPU name become spaces. BRISK_ERR_INVALID when it
 * would not fit CONV_CACHE_KEY_MAX. */
brisk_status conv_cache_key(const conv_algo_device *dev, const conv_algo_shape *s, char *out, size_t out_size,
                            brisk_error *err);

/* Replaces the entries with those in text (a whole file's contents); `path` names it in
 * errors. A bad header or line leaves the cache empty and says which line and what was
 * expected. */
brisk_status conv_cache_parse(conv_algo_cache *c, const char *text, const char *path, brisk_error *err);

/* Reads c->path: a missing file is an empty cache; an unreadable or malformed one an error. */
brisk_status conv_cache_load(conv_algo_cache *c, brisk_error *err);

/* The file's text for the entries (header first); NULL when out of memory. Caller frees. */
char *conv_cache_format(const conv_algo_cache *c);

/* Writes c->path (temporary file, then rename; folders made) when entries changed. */
brisk_status conv_cache_save(conv_algo_cache *c, brisk_error *err);

/* The algorithm cached for key, or -1. */
int conv_cache_get(const conv_algo_cache *c, const char *key);

/* Adds or replaces key's algorithm (0..CONV_CACHE_ALGO_MAX); marks the cache dirty. */
brisk_status conv_cache_put(conv_algo_cache *c, const char *key, int algo, brisk_error *err);

void conv_cache_free(conv_algo_cache *c);

/* cuDNN's documented non-deterministic algorithms (cudnn_ops.h): backward data ALGO_0 and
 * backward filter ALGO_0 and ALGO_3, which sum with atomics (every forward algorithm is
 * deterministic). cudnn_conv.c checks these values against cuDNN's header when it builds. */
int conv_algo_atomic(conv_pass pass, int algo);

/* Whether one of cuDNN's perf results may be chosen: it ran (or the heuristic lists it as
 * supported: status_ok), its workspace fits limit and, under deterministic, both its own
 * determinism flag says so and it is not one of the atomic algorithms above (a mislabelled
 * result cannot break --deterministic's promise). */
int conv_algo_usable(conv_pass pass, int algo, int status_ok, size_t memory, int flagged_deterministic,
                     int deterministic, size_t limit);

#endif
