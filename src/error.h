/* Filling brigade_error: one place formats every library error. */
#ifndef BG_ERROR_H
#define BG_ERROR_H

#include "brigade.h"

/* Sets err (if not NULL) and returns status, so callers can
 * `return bg_fail(err, BRIGADE_ERR_FORMAT, "...", ...)`. */
brigade_status bg_fail(brigade_error *err, brigade_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with context ("file.gguf: ..."). */
void bg_error_prefix(brigade_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
