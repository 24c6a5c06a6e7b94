/* Text grown by appending (reports, the config reference, the layer table). Memory running
 * out sets oom and drops further appends, so a writer checks once, at the end. */
#ifndef BRISK_CORE_STRBUF_H
#define BRISK_CORE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct brisk_strbuf {
    char *s; /* NUL-terminated once anything was appended; NULL before */
    size_t len, cap;
    int oom;
} brisk_strbuf;

/* Room for `more` bytes beyond len and the NUL; 0 when there is none (oom set). */
int brisk_strbuf_reserve(brisk_strbuf *b, size_t more);
void brisk_strbuf_printf(brisk_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void brisk_strbuf_vprintf(brisk_strbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void brisk_strbuf_free(brisk_strbuf *b);

#endif
