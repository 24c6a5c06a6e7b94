/* safetensors internals shared by the reader (safetensors.c) and the writer
 * (safetensors_write.c). Not a public header. */
#ifndef BRISK_SAFETENSORS_INTERNAL_H
#define BRISK_SAFETENSORS_INTERNAL_H

#include <stddef.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; brisk reads and writes it in place"
#endif

/* Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code
 * points past U+10FFFF included), or (size_t)-1 when all of s[0..n) is valid. */
size_t brisk_st_utf8_bad(const unsigned char *s, size_t n);

/* A tensor name or metadata key fit for a one-line message: at most ~80 bytes,
 * control bytes shown as '?'. Returns buf. */
const char *brisk_st_printable(const char *s, char *buf, size_t cap);

#endif
