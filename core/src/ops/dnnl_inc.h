/* dnnl_inc.h: oneDNN's header where the build has it (EMBER_HAVE_DNNL), and
   DNNL_OMP where that oneDNN runs on OpenMP, whose team size conv_dnnl.c and
   matmul_dnnl.c set for each call. */
#ifndef EMBER_DNNL_INC_H
#define EMBER_DNNL_INC_H

#ifdef EMBER_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#define DNNL_OMP 1
#endif
#endif

#endif
