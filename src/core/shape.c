/* Shapes and host tensors. */
#include "brisk/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

brisk_shape brisk_shape_make(int ndim, const int64_t *dims) {
    brisk_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < BRISK_MAX_DIMS; i++) s.d[i] = dims[i];
    return s;
}
brisk_shape brisk_shape1(int64_t a) { int64_t d[] = {a}; return brisk_shape_make(1, d); }
brisk_shape brisk_shape2(int64_t a, int64_t b) { int64_t d[] = {a, b}; return brisk_shape_make(2, d); }
brisk_shape brisk_shape3(int64_t a, int64_t b, int64_t c) { int64_t d[] = {a, b, c}; return brisk_shape_make(3, d); }
brisk_shape brisk_shape4(int64_t a, int64_t b, int64_t c, int64_t e) {
    int64_t d[] = {a, b, c, e};
    return brisk_shape_make(4, d);
}

/* Shapes can come from files: a zero dimension makes the product 0 whatever the others
 * are, and a product past int64 saturates instead of overflowing (callers that size
 * buffers check their byte counts against what is available). */
int64_t brisk_shape_numel(const brisk_shape *s) {
    for (int i = 0; i < s->ndim; i++)
        if (s->d[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        if (__builtin_mul_overflow(n, s->d[i], &n)) return INT64_MAX;
    return n;
}

int brisk_shape_equal(const brisk_shape *a, const brisk_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

int brisk_shape_broadcast(const brisk_shape *a, const brisk_shape *b, brisk_shape *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    brisk_shape r;
    memset(&r, 0, sizeof r);
    r.ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return -1;
        r.d[i] = da == 1 ? db : da;
    }
    *out = r;
    return 0;
}

char *brisk_shape_str(const brisk_shape *s, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n > k ? n - k : 0, "[");
    for (int i = 0; i < s->ndim; i++)
        k += (size_t)snprintf(buf + k, n > k ? n - k : 0, i ? ", %lld" : "%lld", (long long)s->d[i]);
    snprintf(buf + k, n > k ? n - k : 0, "]");
    return buf;
}

size_t brisk_tensor_bytes(const brisk_tensor *t) {
    return (size_t)brisk_shape_numel(&t->shape) * brisk_dtype_size(t->dtype);
}

brisk_status brisk_tensor_alloc(brisk_tensor *t, brisk_dtype dt, brisk_shape s, brisk_error *err) {
    t->dtype = dt;
    t->shape = s;
    size_t bytes = (size_t)brisk_shape_numel(&s) * brisk_dtype_size(dt);
    t->data = malloc(bytes ? bytes : 1);
    if (!t->data) return brisk_errorf(err, BRISK_ERR_NOMEM, "cannot allocate %zu bytes for a tensor", bytes);
    return BRISK_OK;
}

void brisk_tensor_free(brisk_tensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}
