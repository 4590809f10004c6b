#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

brigade_status bg_fail(brigade_error *err, brigade_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void bg_error_prefix(brigade_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[BRIGADE_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* Keep the prefix and as much of the old message as still fits. */
    size_t plen = (size_t)n < sizeof prefix ? (size_t)n : sizeof prefix - 1;
    size_t room = sizeof err->message - 1 - plen;
    size_t mlen = strnlen(err->message, sizeof err->message - 1);
    if (mlen > room)
        mlen = room;
    memmove(err->message + plen, err->message, mlen);
    memcpy(err->message, prefix, plen);
    err->message[plen + mlen] = '\0';
}

const char *brigade_status_name(brigade_status status)
{
    switch (status) {
    case BRIGADE_OK: return "ok";
    case BRIGADE_ERR_IO: return "I/O error";
    case BRIGADE_ERR_FORMAT: return "format error";
    case BRIGADE_ERR_UNSUPPORTED: return "unsupported";
    case BRIGADE_ERR_NOMEM: return "out of memory";
    case BRIGADE_ERR_ARG: return "invalid argument";
    case BRIGADE_ERR_CANCELLED: return "cancelled";
    }
    return "unknown status";
}
