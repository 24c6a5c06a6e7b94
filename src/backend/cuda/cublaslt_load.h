/* cuBLASLt, loaded at run time when a GPU backend is made (or a GPU is probed), never at
 * program start: its 540 MB library mapped at load kept a CUDA build of brisk from starting
 * at all under an address-space limit (ulimit -v) a CPU run fits in. One dlopen per process,
 * one table of entry points, as cuDNN (cudnn_load.h). */
#ifndef BRISK_CUDA_CUBLASLT_LOAD_H
#define BRISK_CUDA_CUBLASLT_LOAD_H

#include <cublasLt.h>

#define CUBLASLT_FNS(X)                                                                                 \
    X(cublasLtGetVersion) X(cublasLtGetStatusString) X(cublasLtCreate) X(cublasLtDestroy)               \
    X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate)                     \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate)    \
    X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                          \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)

/* Written once under pthread_once (cuda_lt_missing), read-only afterwards. */
typedef struct cuda_lt_table {
#define LT_FIELD(f) __typeof__(&f) f;
    CUBLASLT_FNS(LT_FIELD)
#undef LT_FIELD
} cuda_lt_table;
extern cuda_lt_table cuda_lt;

/* NULL when cuBLASLt loaded (tried once per process), else why not, starting with "cuBLASLt". */
const char *cuda_lt_missing(void);

#endif
