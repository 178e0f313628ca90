/* hd.h: EMBER_HD marks the kernel arithmetic (cuda/kernels/, and the core's
   element.h and philox.h, which default it to static inline) as functions for
   both the host and the device: nvcc compiles them into the kernels, the host
   compiler into cuda/tests/, so the arithmetic is tested without a GPU. It
   must be seen before the core's headers. */
#ifndef EMBER_CUDA_HD_H
#define EMBER_CUDA_HD_H

#if defined(EMBER_HD) || defined(EMBER_FORMULA)
#error "cuda/kernels/hd.h must be included before the core's element.h, philox.h and formulas.h"
#endif

#ifdef __CUDACC__
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD inline
#endif
/* the core's formulas.h, optim_math.h and cell_math.h (always_inline on the CPU) */
#define EMBER_FORMULA EMBER_HD

#endif
