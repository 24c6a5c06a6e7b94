/* safetensors internals shared by the reader (safetensors.c) and the writer
 * (safetensors_write.c). Not a public header. */
#ifndef BRISK_SAFETENSORS_INTERNAL_H
#define BRISK_SAFETENSORS_INTERNAL_H

#include <stddef.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; brisk reads and writes it in place"
#endif

/* A tensor name or metadata key fit for a one-line message: at most ~80 bytes,
 * control bytes shown as '?'. Returns buf. */
const char *brisk_st_printable(const char *s, char *buf, size_t cap);

#endif
