/* Errors as values: a status code plus one line of context. */
#include "brisk/core.h"
#include "core/error_hint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

brisk_status brisk_errorf(brisk_error *err, brisk_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

brisk_status brisk_error_prefix(brisk_error *err, const char *fmt, ...) {
    if (!err) return BRISK_ERR_INTERNAL;
    char head[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
    return err->code;
}

const char *brisk_status_name(brisk_status s) {
    switch (s) {
    case BRISK_OK: return "ok";
    case BRISK_ERR_INVALID: return "invalid";
    case BRISK_ERR_IO: return "i/o error";
    case BRISK_ERR_FORMAT: return "format error";
    case BRISK_ERR_SHAPE: return "shape error";
    case BRISK_ERR_NOMEM: return "out of memory";
    case BRISK_ERR_UNSUPPORTED: return "unsupported";
    case BRISK_ERR_NUMERIC: return "numeric error";
    case BRISK_ERR_INTERNAL: return "internal error";
    case BRISK_ERR_FULL: return "buffer full";
    case BRISK_STOPPED: return "stopped";
    case BRISK_BUSY: return "busy";
    }
    return "unknown status";
}

const char *brisk_open_hint(int errnum) {
    if (errnum == ENOENT || errnum == ENOTDIR)
        return "; check the path (a relative one starts from the current directory; in a config, from the "
               "directory the command runs in)";
    if (errnum == EACCES || errnum == EPERM) return "; check its permissions (ls -l) or run as a user who may read it";
    if (errnum == EISDIR) return "; name a file, not a directory";
    return "";
}
