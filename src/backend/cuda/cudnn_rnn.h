/* What cudnn_rnn.c offers outside the backend's own files, free of CUDA and cuDNN types so
 * that the dispatcher and the CI test (tests/backend/test_cuda_rnn_layout.c) can ask. */
#ifndef BRISK_CUDA_CUDNN_RNN_H
#define BRISK_CUDA_CUDNN_RNN_H

#include "brisk/cuda.h"

/* NULL when cuDNN's RNN API is loaded (once per process), else why the LSTM and GRU cannot
 * run on CUDA, e.g. "LSTM and GRU on CUDA need cuDNN 9 (libcudnn.so.9 not found: ...)". */
const char *cuda_rnn_missing(void);

/* Sets up the cuDNN descriptors of a [B, T, H] LSTM (gates 4) or GRU (3) for a precision,
 * without a GPU: CI's check that the installed cuDNN accepts what the plans ask of it. */
brisk_status cuda_rnn_check_descs(brisk_gemm_precision precision, int gates, int64_t B, int64_t T, int64_t H,
                                  brisk_error *err);

#endif
