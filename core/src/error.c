/* error.c: the thread-local last error, and shape formatting for messages. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *ember_last_error(void) { return last_error; }

void ember_set_error(const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg ? msg : "");
}

int ember__fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int ember__fail_prefix(int status, const char *op)
{
    size_t n = strlen(op);
    if (strncmp(last_error, op, n) == 0 && last_error[n] == ':') return status;
    char tmp[sizeof last_error];
    memcpy(tmp, last_error, sizeof tmp);
    int k = snprintf(last_error, sizeof last_error, "%s: ", op);
    if (k > 0 && (size_t)k < sizeof last_error)
        snprintf(last_error + k, sizeof last_error - (size_t)k, "%.*s", (int)(sizeof last_error) - k - 1, tmp);
    return status;
}

const char *ember__shape_str(char *buf, int ndim, const int64_t *shape)
{
    char *p = buf;
    *p++ = '{';
    for (int i = 0; i < ndim; i++)
        p += sprintf(p, i ? ", %lld" : "%lld", (long long)shape[i]);
    *p++ = '}';
    *p = 0;
    return buf;
}

const char *ember__tshape(char *buf, const ember_tensor *t)
{
    return ember__shape_str(buf, t->ndim, t->shape);
}
