#include "core/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int brisk_strbuf_reserve(brisk_strbuf *b, size_t more) {
    if (b->oom) return 0;
    if (b->s && b->len + more + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return 0;
    }
    if (!b->s) s[0] = 0;
    b->s = s, b->cap = cap;
    return 1;
}

void brisk_strbuf_vprintf(brisk_strbuf *b, const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0) b->oom = 1;
    if (n > 0 && brisk_strbuf_reserve(b, (size_t)n)) {
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
    }
}

void brisk_strbuf_printf(brisk_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    brisk_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void brisk_strbuf_free(brisk_strbuf *b) {
    free(b->s);
    memset(b, 0, sizeof *b);
}
