/* cuBLASLt loaded once per process (cublaslt_load.h). */
#include "backend/cuda/cublaslt_load.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define STR2(x) #x
#define STR(x) STR2(x)
/* the major version the build's header is of: its library's soname */
#define LT_SONAME "libcublasLt.so." STR(CUBLAS_VER_MAJOR)

cuda_lt_table cuda_lt;
static char missing[256] = "cuBLASLt (not loaded)";
static int loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *h = dlopen(LT_SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef BRISK_CUDA_LIBDIR
    /* the toolkit brisk was built with, where the loader's paths do not list it */
    if (!h) h = dlopen(BRISK_CUDA_LIBDIR "/" LT_SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) {
        const char *e = dlerror();
        snprintf(missing, sizeof missing, "cuBLASLt (%s not loaded: %s)", LT_SONAME, e ? e : "dlopen failed");
        return;
    }
#define LT_LOAD(f)                                                                                  \
    if (!(cuda_lt.f = (__typeof__(cuda_lt.f))dlsym(h, #f))) {                                       \
        snprintf(missing, sizeof missing, "cuBLASLt (%s lacks %s)", LT_SONAME, #f);                 \
        dlclose(h);                                                                                 \
        return;                                                                                     \
    }
    CUBLASLT_FNS(LT_LOAD)
#undef LT_LOAD
    loaded = 1; /* never closed: the entry points live as long as the process */
}

const char *cuda_lt_missing(void) {
    pthread_once(&once, load);
    return loaded ? NULL : missing;
}
