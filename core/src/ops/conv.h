/* conv.h: what conv.c (im2col + GEMM, the fallback and the oracle) and
   conv_dnnl.c (oneDNN's primitives) share: a convolution's geometry and the
   three products it takes part in. */
#ifndef EMBER_CONV_H
#define EMBER_CONV_H

#include "nn.h"

typedef ember__conv_geom conv_geom;   /* ops.h */

/* FWD (x, w) -> y;  BWD_INPUT (gy, w) -> gx;  BWD_WEIGHT (x, gy) -> gw */
typedef enum { CONV_FWD, CONV_BWD_INPUT, CONV_BWD_WEIGHT } conv_kind;

/* conv.c's checks, shared with conv_fused.c: the geometry of input shape xs
   and weight shape ws at stride st, padding pd, dilation dl and groups
   (failing naming op on any bad value); the attrs' stride, padding and
   dilation; a conv2d_relu bias (one per output channel, in x's dtype). */
int ember__conv_geom_init(const char *op, const int64_t *xs, const int64_t *ws, const int64_t *st,
                          const int64_t *pd, const int64_t *dl, int64_t groups, conv_geom *g);
void ember__conv_attrs_unpack(const ember_attrs *at, const int64_t **st, const int64_t **pd, const int64_t **dl);
int ember__conv_bias_check(const char *name, const ember_tensor *b, const ember_tensor *x, int64_t O);
/* the output columns ow whose input column ow sw - pw + j dw lies inside [0, W): [*lo, *hi) */
void ember__conv_valid_cols(const conv_geom *g, int64_t j, int64_t *lo, int64_t *hi);

/* conv_taps.c: whether some of g's taps only ever read padding, and then
   gc, the geometry of the live taps' sub-kernel from tap (*i0, *j0), which
   gives the same output; and the copy of those taps between a weight of g
   (w) and one of gc (wc): into wc, or (to_full) back into w. */
bool ember__conv_live_taps(const conv_geom *g, conv_geom *gc, int64_t *i0, int64_t *j0);
void ember__conv_crop(const conv_geom *g, const conv_geom *gc, int64_t i0, int64_t j0, int es, char *w, char *wc,
                      bool to_full);
/* into *wc (a new reference) the live taps' weight of g's weight w (its
   contents at cb, contiguous in cdt; w NULL: none to keep it on), kept on
   w's storage while its version lasts where no recording tracks w (*kept) */
int ember__conv_live_weight(const conv_geom *g, const conv_geom *gc, int64_t i0, int64_t j0, int cdt,
                            const ember_tensor *w, ember_tensor *cb, ember_tensor **wc, bool *kept);

/* conv_depthwise.c: whether g is a depthwise convolution (C / groups == 1,
   groups > 1) on planes of 16 outputs or fewer, which its direct kernels
   run (ember_set_conv_kernels_enabled),
   and the product of kind on contiguous float32 or float64 (cdt) operands
   a and b into res (contiguous, the product's shape), as conv_run's are. */
bool ember__conv_is_depthwise(const conv_geom *g);
int ember__conv_depthwise(conv_kind kind, const conv_geom *g, int cdt, const ember_tensor *a,
                          const ember_tensor *b, ember_tensor *res);

/* Runs one product through oneDNN on contiguous float32 operands a and b,
   writing all of res (contiguous float32 of the product's shape); with a
   bias (FWD only, one per output channel) res is relu(a * b + bias), the
   bias and the ReLU applied by the convolution as it writes. Returns
   false, having written nothing that matters, when oneDNN is not built in,
   is switched off (ember_set_dnnl_enabled), deterministic mode is on,
   ember's kernels are faster at the shape, or oneDNN declines or fails: the
   caller then runs ember's own kernels. w (FWD, BWD_INPUT; NULL: none) is
   the weight tensor as the caller holds it, b its contents (w itself or a
   contiguous float32 copy): oneDNN's layout of it is kept on its storage
   while its version lasts (conv_dnnl_wcache.c). */
bool ember__dnnl_conv(conv_kind kind, const conv_geom *g, const float *a, const float *b, const ember_tensor *w,
                      const float *bias, float *res);

/* The same on contiguous bfloat16 operands a and b (no bias), res float32:
   oneDNN's bfloat16 kernels, on CPUs with AVX-512 BF16 or AMX only; false
   as above, and on other CPUs. */
bool ember__dnnl_conv_bf16(conv_kind kind, const conv_geom *g, const void *a, const void *b, const ember_tensor *w,
                           float *res);

/* conv2d_relu's backward on contiguous float32 operands: from g and the
   output y, gx (NULL: not wanted), gw and gb (O), with relu's mask applied
   while the gradient is written in the layout the adjoints' primitives
   read, which they then share. false as above, and where the two
   primitives want that gradient in different layouts. */
bool ember__dnnl_conv_relu_backward(const conv_geom *g, const float *gy, const float *y, const float *x,
                                    const float *w, float *gx, float *gw, float *gb);

/* conv2d_relu_max_pool2d on contiguous float32 operands: p and idx (N, O,
   Hp, Wp) of max pooling relu(conv2d(x, w) + bias) in windows of kh x kw at
   a stride of the same (no padding; the caller checked Ho >= kh, Wo >= kw
   and that a plane's positions fit in int32), the convolution's output
   pooled in the primitive's blocked layout.
   false as above, and where oneDNN's output is not aBcd16b. */
bool ember__dnnl_conv_relu_pool(const conv_geom *g, const float *x, const float *w, const float *bias, int64_t kh,
                                int64_t kw, float *p, int32_t *idx);

/* its backward from the pooled gradient gp, values p and positions idx:
   gx (NULL: not wanted), gw and gb, the convolution's gradient written in
   aBcd16b, which both adjoints then read. false as above, and where a
   position is not in its window. */
bool ember__dnnl_conv_relu_pool_backward(const conv_geom *g, int64_t kh, int64_t kw, const float *gp,
                                         const float *p, const int32_t *idx, const float *x, const float *w,
                                         float *gx, float *gw, float *gb);

#endif
