/* cuDNN 9 loaded once per process (cudnn_load.h). */
#include "backend/cuda/cudnn_load.h"

#if BRISK_HAVE_CUDNN_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

cuda_dnn_table cuda_dnn;
static struct {
    int loaded;                 /* the entry points */
    char missing[256];          /* why not */
    char part_missing[2][256];  /* per part: "" when its sub-library loaded */
} state;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(state.missing, sizeof state.missing, "cuDNN 9 (libcudnn.so.9 not found: %s)",
                 e ? e : "dlopen failed");
        return;
    }
#define DNN_LOAD(f)                                                                                 \
    if (!(cuda_dnn.f = (__typeof__(cuda_dnn.f))dlsym(h, #f))) {                                     \
        snprintf(state.missing, sizeof state.missing, "cuDNN 9 (libcudnn.so.9 lacks %s)", #f);      \
        dlclose(h);                                                                                 \
        return;                                                                                     \
    }
    CUDNN_FNS(DNN_LOAD)
#undef DNN_LOAD
    size_t v = cuda_dnn.cudnnGetVersion();
    if (v < 90000) {
        snprintf(state.missing, sizeof state.missing, "cuDNN 9 (libcudnn.so.9 reports version %zu)", v);
        dlclose(h);
        return;
    }
    /* loads the sub-libraries now rather than at the first step */
    cudnnStatus_t s = cuda_dnn.cudnnAdvVersionCheck();
    if (s != CUDNN_STATUS_SUCCESS)
        snprintf(state.part_missing[CUDA_DNN_RNN], sizeof state.part_missing[0],
                 "cuDNN 9's RNN library (libcudnn_adv.so.9): %s", cuda_dnn.cudnnGetErrorString(s));
    s = cuda_dnn.cudnnCnnVersionCheck();
    if (s != CUDNN_STATUS_SUCCESS)
        snprintf(state.part_missing[CUDA_DNN_CNN], sizeof state.part_missing[0],
                 "cuDNN 9's convolution library (libcudnn_cnn.so.9): %s", cuda_dnn.cudnnGetErrorString(s));
    state.loaded = 1; /* never closed: the entry points live as long as the process */
}

const char *cuda_dnn_missing(cuda_dnn_part part) {
    pthread_once(&once, load);
    if (!state.loaded) return state.missing;
    return state.part_missing[part][0] ? state.part_missing[part] : NULL;
}

brisk_status cuda_dnn_fail(brisk_error *err, cudnnStatus_t s, const char *call, const char *what) {
    return brisk_errorf(err, s == CUDNN_STATUS_ALLOC_FAILED ? BRISK_ERR_NOMEM : BRISK_ERR_INTERNAL,
                        "cuda: %s failed: %s (%s)", call, cuda_dnn.cudnnGetErrorString(s), what);
}

#endif
