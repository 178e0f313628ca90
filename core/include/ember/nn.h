/* ember/nn.h: neural-network kernels (convolution, pooling, recurrent cells, batch and layer
   normalisation, cross-entropy) and the fused optimizer updates.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/nn.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
/* neural-network kernels. x (N, C, H, W), w (O, C/groups, kH, kW) -> (N, O, H', W').
   stride, padding and dilation are {h, w} pairs; groups divides C and O. */
EMBER_API int ember_conv2d(ember_tensor *x, ember_tensor *w, const int64_t *stride,
                           const int64_t *padding, const int64_t *dilation, int64_t groups,
                           ember_tensor **out);
/* relu(conv2d(x, w) + b), b of shape (O): conv2d, its bias and a ReLU in one op
   (and one pass over the output where oneDNN runs it) */
EMBER_API int ember_conv2d_relu(ember_tensor *x, ember_tensor *w, ember_tensor *b, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, int64_t groups,
                                ember_tensor **out);
/* max_pool2d(relu(conv2d(x, w) + b)) in one op, the pool's windows of
   `kernel` at `pool_stride` with no padding: values and indices as
   ember_max_pool2d gives them over the convolution's output, the indices
   int32 (may be NULL; a plane of 2^31 positions or more is refused). Backward keeps x, w and the pooled results, not the convolution's
   output; on the CPU in float32 with pool_stride equal to kernel the output
   is pooled in the layout oneDNN writes it in. */
EMBER_API int ember_conv2d_relu_max_pool2d(ember_tensor *x, ember_tensor *w, ember_tensor *b,
                                           const int64_t *stride, const int64_t *padding,
                                           const int64_t *dilation, int64_t groups, const int64_t *kernel,
                                           const int64_t *pool_stride, ember_tensor **values,
                                           ember_tensor **indices);
/* The adjoints of conv2d: the gradient for x of shape x_shape given g and w,
   and the gradient for w of shape w_shape given x and g. */
EMBER_API int ember_conv2d_backward_input(ember_tensor *g, ember_tensor *w, const int64_t *x_shape,
                                          const int64_t *stride, const int64_t *padding,
                                          const int64_t *dilation, int64_t groups, ember_tensor **out);
EMBER_API int ember_conv2d_backward_weight(ember_tensor *x, ember_tensor *g, const int64_t *w_shape,
                                           const int64_t *stride, const int64_t *padding,
                                           const int64_t *dilation, int64_t groups,
                                           ember_tensor **out);
/* x (N, C, H, W) -> values and int64 indices (flat h * W + w within each plane).
   With indices NULL, the positions a recording saves for the backward are
   int32; max_pool2d_backward takes int64 indices, or int32 ones on the CPU. */
EMBER_API int ember_max_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride,
                               const int64_t *padding, ember_tensor **values, ember_tensor **indices);
EMBER_API int ember_max_pool2d_backward(ember_tensor *g, ember_tensor *indices, const int64_t *x_shape,
                                        ember_tensor **out);
/* averages count the padding as zeros (PyTorch's count_include_pad = true) */
EMBER_API int ember_avg_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride,
                               const int64_t *padding, ember_tensor **out);
EMBER_API int ember_avg_pool2d_backward(ember_tensor *g, const int64_t *x_shape, const int64_t *kernel,
                                        const int64_t *stride, const int64_t *padding,
                                        ember_tensor **out);

/* recurrent cells (nn.LSTM, nn.GRU), one step for a batch of N with hidden size H:
   gi and gh are the gate pre-activations from the input and from the hidden
   state (x W_ih^T + b_ih and h W_hh^T + b_hh), one dtype, float32 or float64.
   lstm_cell: gi, gh (N, 4H) in PyTorch's gate order i, f, g, o, c (N, H) ->
   h = o tanh(c'), c' = f c + i g. gru_cell: gi, gh (N, 3H), order r, z, n, h (N, H)
   -> h' = (1 - z) n + z h with n = tanh(gi_n + r gh_n). Fail with EMBER_ERR_SHAPE
   or EMBER_ERR_DTYPE. */
EMBER_API int ember_lstm_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *c, ember_tensor **h_out,
                              ember_tensor **c_out);
EMBER_API int ember_gru_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *h, ember_tensor **out);

/* batch normalisation in training (nn.BatchNorm*d, F.batch_norm): x (N, C, ...),
   w and b (C) -> y = (x - mean) / sqrt(var + eps) w + b and stats (2, C): the
   mean and the biased variance over every dim but 1. The adjoint takes the
   gradient of y, x, w and those stats -> gx and gwb (2, C): w's gradient and
   b's (the adjoint records no node of its own: it is not differentiable). */
EMBER_API int ember_batch_norm(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, ember_tensor **y,
                               ember_tensor **stats);
EMBER_API int ember_batch_norm_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                        double eps, ember_tensor **gx, ember_tensor **gwb);
/* batch_norm with an activation applied to y as it is written: activation
   1 relu (NaN and -0 kept), 2 hardtanh between lo and hi (relu6: 0, 6),
   as where(y <= lo, lo, where(y >= hi, hi, y)); the adjoint takes y too
   and passes g where relu's (y > 0 or NaN) or hardtanh's (lo < y < hi or
   NaN) gradient is 1, 0 elsewhere, before batch_norm_backward's formulas.
   nn.Sequential runs it for a BatchNorm in training followed by ReLU or
   ReLU6; results are batch_norm's then the activation's, bit for bit. */
EMBER_API int ember_batch_norm_act(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, int activation,
                                   double lo, double hi, ember_tensor **y, ember_tensor **stats);
EMBER_API int ember_batch_norm_act_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                            ember_tensor *y, double eps, int activation, double lo, double hi,
                                            ember_tensor **gx, ember_tensor **gwb);
/* y = act(x scale[c] + shift[c]) over x (N, C, ...), scale and shift (C),
   act 0 (none) or as ember_batch_norm_act's: batch normalisation in eval
   mode (F.batch_norm with running statistics) in one pass. */
EMBER_API int ember_channel_affine(ember_tensor *x, ember_tensor *scale, ember_tensor *shift, int activation,
                                   double lo, double hi, ember_tensor **out);

/* layer normalisation (nn.LayerNorm, F.layer_norm) over x's last k =
   normalized_dims dims, w and b of their shape -> y = (x - mean) rstd w + b
   and stats (2, R) for R rows of normalised values: each row's mean and
   rstd = 1 / sqrt(var + eps), var biased. With rms set (F.rms_norm) no mean
   is subtracted (row 0 of stats is zeros) and var is the mean of x^2. One
   float dtype, float32 or float64. The adjoint takes the gradient of y, x, w
   and those stats -> gx and, where gwb is not NULL, gwb (2, w's shape): w's
   gradient and b's (it records no node of its own: it is not differentiable). */
EMBER_API int ember_layer_norm(ember_tensor *x, ember_tensor *w, ember_tensor *b, int normalized_dims, int rms,
                               double eps, ember_tensor **y, ember_tensor **stats);
EMBER_API int ember_layer_norm_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                        int normalized_dims, int rms, double eps, ember_tensor **gx,
                                        ember_tensor **gwb);
/* cross-entropy of logits x (M, C) against labels (M), int64 or int32 class
   indices counting from first_class (0 here, 1 from Lua), with class weights
   w (C) and label smoothing ls in [0, 1] -> rows (M), each row's
   (1 - ls) w_l (lse - x_l) + ls / C sum_c w_c (lse - x_c) with lse its
   log-sum-exp and l its label (0 where the label is ignore_index), and stats
   (2, M): each row's lse and weight w_l (0 where ignored; a mean divides by
   their sum). A label out of range fails (EMBER_ERR_ARG, naming it). The
   adjoint takes the rows' gradient g (M) -> gx (M, C); it records no node
   of its own (it is not differentiable); w gets no gradient. */
EMBER_API int ember_cross_entropy(ember_tensor *x, ember_tensor *labels, ember_tensor *w, int64_t first_class,
                                  int64_t ignore_index, double label_smoothing, ember_tensor **rows,
                                  ember_tensor **stats);
EMBER_API int ember_cross_entropy_backward(ember_tensor *g, ember_tensor *x, ember_tensor *labels, ember_tensor *w,
                                           ember_tensor *stats, int64_t first_class, int64_t ignore_index,
                                           double label_smoothing, ember_tensor **gx);

/* ---- fused optimizer updates ----
   One pass per parameter, in place, PyTorch's formulas (see docs/optim.md).
   p, g and the state tensors: one float32/float64 dtype, one shape,
   contiguous, on the CPU, not sharing memory; anything else returns
   EMBER_ERR_UNSUPPORTED (compose tensor ops instead). Not recorded by
   autograd; the versions of the written tensors are bumped.
   SGD: buf NULL means no momentum; first_step copies d into buf. */
EMBER_API int ember_sgd_step_(ember_tensor *p, ember_tensor *g, ember_tensor *buf, double lr, double momentum,
                              double dampening, double weight_decay, int nesterov, int maximize,
                              int first_step);
/* Adam (decoupled = 0: L2 added to g) and AdamW (decoupled = 1: p *= 1 - lr wd).
   vmax non-NULL turns on amsgrad. step counts from 1. */
EMBER_API int ember_adam_step_(ember_tensor *p, ember_tensor *g, ember_tensor *m, ember_tensor *v,
                               ember_tensor *vmax, double lr, double beta1, double beta2, double eps,
                               double weight_decay, int decoupled, int maximize, int64_t step);
/* ffi:end */
