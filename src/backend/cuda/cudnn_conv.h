/* What cudnn_conv.c offers outside the backend's own files, free of CUDA and cuDNN types so
 * that the dispatcher and the CI test (tests/backend/test_cuda_conv_cache.c) can ask. */
#ifndef BRISK_CUDA_CUDNN_CONV_H
#define BRISK_CUDA_CUDNN_CONV_H

#include "brisk/cuda.h"
#include "brisk/graph.h"

/* NULL when cuDNN's convolution API is loaded (once per process), else why CONV2D and its
 * gradients cannot run on CUDA. */
const char *cuda_conv_missing(void);

/* Sets up the cuDNN descriptors of a convolution of x [n, c, h, w] into co channels with
 * window win (kernel, stride, padding, dilation, groups) for a precision (its data type:
 * fp32, bf16 or fp16) in layout NCHW or NHWC (nhwc), without a GPU: CI's check that the
 * installed cuDNN accepts what the plans ask of it. */
brisk_status cuda_conv_check_descs(brisk_gemm_precision precision, int nhwc, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t co, brisk_window win, brisk_error *err);

/* For the tests (tests/backend/test_cuda_conv.c): the shared workspace and staging buffer
 * of be, a CUDA backend, as they are now (NULL and 0 before any convolution). */
void cuda_conv_buffers(const brisk_backend *be, const void **work, size_t *work_bytes, const void **stage,
                       size_t *stage_bytes);

/* For the tests: 1 when p is still a device allocation (not freed), 0 when not. */
int cuda_conv_device_live(const void *p);

#endif
