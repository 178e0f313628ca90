/* info.c: version strings. */
#include "internal.h"

#include <stdio.h>

#ifdef EMBER_HAVE_BLAS
#include <cblas.h>
extern char *openblas_get_config(void);
extern char *openblas_get_corename(void);
#endif

const char *ember_version(void) { return EMBER_VERSION; }

const char *ember_blas_info(void)
{
#ifdef EMBER_HAVE_BLAS
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "%s (core %s)", openblas_get_config(), openblas_get_corename());
    return buf;
#else
    return "none (reference loops)";
#endif
}
