/* Which layout (NCHW or NHWC) and data type a cuDNN convolution node runs in: the decision,
 * free of CUDA and cuDNN types, so that it builds in every build and CI tests it without a
 * GPU (tests/backend/test_cuda_conv_cache.c). cudnn_conv.c measures, this file decides.
 *
 * A node's operands are fp32 in the graph's layout (win.layout); w is [Co, C/g, kh, kw]
 * (OIHW) in both. Running cuDNN in another layout or in 16 bits means converting at the
 * node's boundaries: x (or dy) and w in, y (or dx, dw) out, each conversion one cast and/or
 * transpose kernel (k_conv_layout.cu). Those conversions are part of a layout's cost: with
 * autotuning, AUTO keeps the layout whose best algorithm plus conversions is faster, ties
 * going to the graph's layout (no transposes); without timings (autotuning off, or
 * --deterministic, where no choice may depend on timing) a rule decides: NHWC for 16-bit
 * data with C and Co multiples of 8 (cuDNN's tensor-core kernels read channels-last there,
 * and the operands are cast anyway, so transposing in the same pass costs little), else the
 * graph's layout. Under a 16-bit precision the timed choice also weighs fp32 operands with
 * TF32 math in both layouts, and keeps them where they are strictly faster
 * (conv_precision_pick). The choice is cached beside the algorithms (conv_algo_cache.h, the
 * key's layout field "form from nchw/nhwc"). */
#ifndef BRISK_CUDA_CONV_LAYOUT_H
#define BRISK_CUDA_CONV_LAYOUT_H

#include "backend/cuda/conv_algo_cache.h"
#include "brisk/cuda.h"

#include <stddef.h>
#include <stdint.h>

/* What a layout costs one node, in milliseconds; index 0 NCHW, 1 NHWC. */
typedef struct conv_layout_costs {
    double conv_ms[2];     /* the fastest usable algorithm; < 0: cuDNN has none in that layout */
    double convert_ms[2];  /* the casts and transposes that layout needs at the node's boundaries */
} conv_layout_costs;

/* The operand types cuDNN sees under a precision: 0 fp32 (fp32 and tf32), 1 bf16, 2 fp16. */
int conv_data_type(brisk_gemm_precision precision);
/* The cache key's math field for a precision. */
conv_math conv_math_of(brisk_gemm_precision precision);

/* The cache key's math field for the form a plan runs in: data type dt (as conv_data_type)
 * and, for fp32 data, whether the math is plain FMA (else TF32 tensor cores). */
conv_math conv_math_of_form(int dt, int fma);

/* Under a 16-bit precision, with timings: whether the node runs on fp32 data with TF32
 * math instead (1), given the best time (convolution + conversions) of each, < 0 for none.
 * Only when strictly faster: cuDNN's legacy API has no fast 16-bit kernel for some passes
 * (on the H200, bf16 backward filter took 0.48 ms where TF32 took 0.11), and TF32 keeps more
 * bits than bf16 or fp16, so the faster form is also the more accurate one. */
int conv_precision_pick(double narrow_ms, double wide_ms);

/* "auto", "nchw", "nhwc" -> the mode; -1 for anything else. And its name. */
int conv_layout_parse(const char *name);
const char *conv_layout_name(brisk_conv_layout mode);

/* The rule without timings: 1 for NHWC. why (may be NULL) says which rule decided. */
int conv_layout_rule(brisk_conv_layout mode, int data_type, int data_nhwc, int64_t c, int64_t co, char *why,
                     size_t why_size);

/* The timed choice: 1 for NHWC; -1 when neither layout has an algorithm. A forced mode
 * takes its layout when that has an algorithm, else the other (why says so). */
int conv_layout_pick(brisk_conv_layout mode, const conv_layout_costs *c, int data_nhwc, char *why, size_t why_size);

/* Whether operand `role` (0 x or dy-side activation in the graph's layout, 1 w) needs a
 * conversion kernel when cuDNN runs in layout nhwc with data type dt. */
int conv_operand_converted(int role, int dt, int nhwc, int data_nhwc);

/* The key of a layout choice: s's key with its layout field "form from nchw" or "form
 * from nhwc" (data_nhwc); the cached value is the chosen layout, 0 or 1, plus 2 when a
 * 16-bit precision's node runs in fp32 with TF32 math (conv_precision_pick). */
brisk_status conv_cache_layout_key(const conv_algo_device *dev, const conv_algo_shape *s, int data_nhwc, char *out,
                                   size_t out_size, brisk_error *err);

/* The test switch that exercises the other-layout fallback on any GPU: $BRISK_CUDA_REFUSE_CONV_LAYOUTS,
 * a comma-separated list of nchw and nhwc, makes every cuDNN algorithm in those layouts count
 * as refused. Parses spec (NULL or "": none) into *mask (bit 0 NCHW, bit 1 NHWC); anything
 * else is BRISK_ERR_INVALID naming the variable. */
#define CONV_REFUSE_LAYOUTS_ENV "BRISK_CUDA_REFUSE_CONV_LAYOUTS"
brisk_status conv_layout_parse_refused(const char *spec, unsigned *mask, brisk_error *err);

#endif
