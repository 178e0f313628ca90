/* last_error.h: the last error of one of dist/'s libraries. Each includes it
   once, so the buffer and fail() are that library's own. */
#include <stdarg.h>
#include <stdio.h>

static char g_err[512];

/* Keeps the message of a failure; returns -1, what the failing call returns. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return -1;
}
