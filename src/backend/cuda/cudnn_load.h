/* cuDNN 9, loaded at run time once per process for every user in the backend (the LSTM in
 * cudnn_rnn.c, convolution in cudnn_conv.c): one dlopen, one table of entry points, and
 * per sub-library a reason when it cannot be used. Included only where cudnn.h was found
 * at build time (BRISK_HAVE_CUDNN_H). */
#ifndef BRISK_CUDA_CUDNN_LOAD_H
#define BRISK_CUDA_CUDNN_LOAD_H

#include "brisk/core.h"

#include <cudnn.h>

#define CUDNN_FNS(X)                                                                                     \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnAdvVersionCheck) X(cudnnCnnVersionCheck)            \
    X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnCreateRNNDescriptor)                         \
    X(cudnnDestroyRNNDescriptor) X(cudnnSetRNNDescriptor_v8) X(cudnnCreateRNNDataDescriptor)             \
    X(cudnnDestroyRNNDataDescriptor) X(cudnnSetRNNDataDescriptor) X(cudnnCreateTensorDescriptor)         \
    X(cudnnDestroyTensorDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnGetTensorNdDescriptor)          \
    X(cudnnCreateDropoutDescriptor) X(cudnnDestroyDropoutDescriptor) X(cudnnSetDropoutDescriptor)        \
    X(cudnnGetRNNWeightSpaceSize) X(cudnnGetRNNTempSpaceSizes) X(cudnnGetRNNWeightParams)                \
    X(cudnnRNNForward) X(cudnnRNNBackwardData_v8)                                                        \
    X(cudnnSetTensor4dDescriptor) X(cudnnCreateFilterDescriptor) X(cudnnDestroyFilterDescriptor)         \
    X(cudnnSetFilter4dDescriptor) X(cudnnCreateConvolutionDescriptor)                                    \
    X(cudnnDestroyConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                              \
    X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType)                                      \
    X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnFindConvolutionBackwardDataAlgorithmEx)             \
    X(cudnnFindConvolutionBackwardFilterAlgorithmEx) X(cudnnGetConvolutionForwardAlgorithm_v7)           \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)      \
    X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnGetConvolutionBackwardDataWorkspaceSize)             \
    X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                                                    \
    X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter)

/* Written once under pthread_once (cuda_dnn_missing), read-only afterwards. */
typedef struct cuda_dnn_table {
#define DNN_FIELD(f) __typeof__(&f) f;
    CUDNN_FNS(DNN_FIELD)
#undef DNN_FIELD
} cuda_dnn_table;
extern cuda_dnn_table cuda_dnn;

/* Which part of cuDNN a user needs: the RNN API (libcudnn_adv) or convolution (libcudnn_cnn). */
typedef enum cuda_dnn_part { CUDA_DNN_RNN = 0, CUDA_DNN_CNN } cuda_dnn_part;

/* NULL when cuDNN and that part loaded (tried once per process), else why not, starting
 * with "cuDNN 9". */
const char *cuda_dnn_missing(cuda_dnn_part part);

brisk_status cuda_dnn_fail(brisk_error *err, cudnnStatus_t s, const char *call, const char *what);
#define DNN(call, what)                                                                         \
    do {                                                                                        \
        cudnnStatus_t s_ = (cuda_dnn.call);                                                     \
        if (s_ != CUDNN_STATUS_SUCCESS) return cuda_dnn_fail(err, s_, #call, (what));           \
    } while (0)

#endif
