/* core-internal: the "what to do next" half of a message about a file that could not be
 * opened, by errno, for the readers of every module (not public API). */
#ifndef BRISK_CORE_ERROR_HINT_H
#define BRISK_CORE_ERROR_HINT_H

/* "; check the path (...)" for a missing file, "; check its permissions" for a refused one,
 * else "". */
const char *brisk_open_hint(int errnum);

#endif
