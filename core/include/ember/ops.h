/* ember/ops.h: the ops: elementwise, reductions, sorting and scans, linear algebra, softmax,
   matmul and linear, shapes and views, indexing, and their in-place forms.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/ops.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
/* ---------------------------------------------------------------- ops
   Every op below records on the autograd tape when an input is tracked by an
   active recording. Binary ops broadcast as numpy does and promote dtypes as
   PyTorch does. */

/* elementwise, binary */
EMBER_API int ember_add(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_sub(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_mul(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_div(ember_tensor *a, ember_tensor *b, ember_tensor **out);   /* true division */
EMBER_API int ember_pow(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_maximum(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_minimum(ember_tensor *a, ember_tensor *b, ember_tensor **out);
/* comparisons give bool tensors */
EMBER_API int ember_eq(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_ne(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_lt(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_le(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_gt(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_ge(ember_tensor *a, ember_tensor *b, ember_tensor **out);
/* cond ? a : b, all three broadcast; cond is bool (or any dtype, nonzero = true) */
EMBER_API int ember_where(ember_tensor *cond, ember_tensor *a, ember_tensor *b, ember_tensor **out);

/* elementwise, unary (float ops promote integer inputs to float32) */
EMBER_API int ember_neg(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_exp(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_log(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_log1p(ember_tensor *a, ember_tensor **out);   /* log(1 + a), exact near 0 */
EMBER_API int ember_sqrt(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_rsqrt(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_abs(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_sign(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_sin(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_cos(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_tanh(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_sigmoid(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_relu(ember_tensor *a, ember_tensor **out);
/* relu's adjoint: g where y > 0, else 0, with y = relu(x) (0 also where g is NaN) */
EMBER_API int ember_relu_backward(ember_tensor *g, ember_tensor *y, ember_tensor **out);
EMBER_API int ember_gelu(ember_tensor *a, int approximate_tanh, ember_tensor **out);
/* gelu's adjoint: g gelu'(x) for g and x of one shape (differentiable) */
EMBER_API int ember_gelu_backward(ember_tensor *g, ember_tensor *x, int approximate_tanh, ember_tensor **out);
EMBER_API int ember_silu(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_erf(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_lgamma(ember_tensor *a, ember_tensor **out);     /* log|Gamma(a)| */
EMBER_API int ember_digamma(ember_tensor *a, ember_tensor **out);    /* Gamma'(a) / Gamma(a) */
EMBER_API int ember_trigamma(ember_tensor *a, ember_tensor **out);   /* digamma'(a), polygamma(1, a) */
/* mish: a tanh(log(1 + e^a)) */
EMBER_API int ember_mish(ember_tensor *a, ember_tensor **out);
/* clamp to [lo, hi]; has_lo / has_hi say which bounds apply */
EMBER_API int ember_clamp(ember_tensor *a, int has_lo, double lo, int has_hi, double hi,
                          ember_tensor **out);
/* Converts to another dtype (a new tensor, also when the dtype is the same). */
EMBER_API int ember_to_dtype(ember_tensor *a, int dtype, ember_tensor **out);
/* Moves to another device (a new tensor; a reference to a when already there). */
EMBER_API int ember_to_device(ember_tensor *a, int device, ember_tensor **out);
/* As ember_to_device, except that a copy from pinned host memory to a GPU is
   queued without waiting for it: work queued on the device after it sees the
   data; the host must not write the source until ember_cuda_synchronize().
   Other copies wait, as ember_to_device's do. */
EMBER_API int ember_to_device_async(ember_tensor *a, int device, ember_tensor **out);
/* A contiguous copy of a CPU tensor in pinned (page-locked) host memory from
   the CUDA backend (a itself, a new reference, when it is pinned already);
   fails with the backend's reason without CUDA. Not recorded by autograd. */
EMBER_API int ember_pin_memory(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_is_pinned(const ember_tensor *a);
/* A contiguous copy. */
EMBER_API int ember_clone(ember_tensor *a, ember_tensor **out);
/* a itself (new reference) when contiguous, else a contiguous copy. */
EMBER_API int ember_contiguous(ember_tensor *a, ember_tensor **out);
/* A tensor sharing a's storage that no recording tracks. */
EMBER_API int ember_detach(ember_tensor *a, ember_tensor **out);

/* reductions: `dims` lists ndims distinct dims (0-based); dims == NULL or
   ndims == 0 reduces every dim. keepdim keeps reduced dims with size 1. */
EMBER_API int ember_sum(ember_tensor *a, int ndims, const int *dims, int keepdim, ember_tensor **out);
EMBER_API int ember_mean(ember_tensor *a, int ndims, const int *dims, int keepdim, ember_tensor **out);
EMBER_API int ember_var(ember_tensor *a, int ndims, const int *dims, int keepdim, int unbiased,
                        ember_tensor **out);
EMBER_API int ember_logsumexp(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
/* p-norm over dims (p = 2 by default in the Lua API; p = inf is the max of |a|) */
EMBER_API int ember_norm(ember_tensor *a, double p, int ndims, const int *dims, int keepdim,
                         ember_tensor **out);
/* The max / min of every element (0-d). */
EMBER_API int ember_amax_all(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_amin_all(ember_tensor *a, ember_tensor **out);
/* Max / min along dim: values and int64 0-based indices. */
EMBER_API int ember_max_dim(ember_tensor *a, int dim, int keepdim, ember_tensor **values,
                            ember_tensor **indices);
EMBER_API int ember_min_dim(ember_tensor *a, int dim, int keepdim, ember_tensor **values,
                            ember_tensor **indices);
/* int64 0-based index of the max / min along dim; dim = -1 means of the flattened tensor. */
EMBER_API int ember_argmax(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
EMBER_API int ember_argmin(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
/* Cumulative sum / product along dim (reverse: the sums from the end);
   integer and bool inputs give int64. */
EMBER_API int ember_cumsum(ember_tensor *a, int dim, int reverse, ember_tensor **out);
EMBER_API int ember_cumprod(ember_tensor *a, int dim, ember_tensor **out);
/* The product of every element (dim -1) or along dim (0-based), keepdim
   keeping it as size 1; integers and bools give int64 (wrapping), floats
   their dtype. The product of nothing is 1. */
EMBER_API int ember_prod(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
/* The n-th derivative of digamma (n >= 0), elementwise: floats keep their
   dtype, integers and bools give float32. */
EMBER_API int ember_polygamma(int n, ember_tensor *a, ember_tensor **out);
/* Stable sort along dim: values and int64 0-based indices; NaN sorts largest. */
EMBER_API int ember_sort(ember_tensor *a, int dim, int descending, ember_tensor **values,
                         ember_tensor **indices);
/* The first k values along dim in sort's order (descending when largest)
   and their int64 0-based indices. */
EMBER_API int ember_topk(ember_tensor *a, int64_t k, int dim, int largest, ember_tensor **values,
                         ember_tensor **indices);
/* int64 0-based insertion points of values in the last dim of sorted
   ((..., n) with values (..., m), or (n) with values of any shape): the
   count of elements < v, or <= v when right. */
EMBER_API int ember_searchsorted(ember_tensor *sorted, ember_tensor *values, int right, ember_tensor **out);
/* Batched linear algebra on (..., n, n) float32/float64 matrices (LAPACK);
   a singular or not positive-definite matrix fails naming its batch element.
   solve: B is (..., n, k) with A's batch dims. */
EMBER_API int ember_linalg_inv(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_linalg_slogdet(ember_tensor *a, ember_tensor **sign, ember_tensor **logabsdet);
/* det A (exactly 0 where an LU pivot is); its gradient is the adjugate's
   transpose, correct at singular matrices too */
EMBER_API int ember_linalg_det(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_linalg_solve(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_linalg_cholesky(ember_tensor *a, ember_tensor **out);
/* int32 (...): 0 where A (its lower triangle) is positive-definite, else the
   order of its first leading minor that is not (no error) */
EMBER_API int ember_linalg_cholesky_info(ember_tensor *a, ember_tensor **info);
/* X with A X = B (B (..., n, k), A's batch dims) for the triangular A read
   from its upper (upper != 0) or lower triangle; unitriangular != 0 takes its
   diagonal as ones. A zero on the diagonal fails naming the batch element. */
EMBER_API int ember_linalg_solve_triangular(ember_tensor *a, ember_tensor *b, int upper, int unitriangular,
                                            ember_tensor **out);
/* eigh: eigenvalues (..., n) ascending and eigenvectors (..., n, n) as columns
   of a symmetric matrix (its lower triangle is read); qr: the reduced Q
   (..., m, k) and R (..., k, n) of (..., m, n), k = min(m, n). */
EMBER_API int ember_linalg_eigh(ember_tensor *a, ember_tensor **eigenvalues, ember_tensor **eigenvectors);
EMBER_API int ember_linalg_qr(ember_tensor *a, ember_tensor **q, ember_tensor **r);
/* mode 0: as ember_linalg_qr; 1 (complete): Q (..., m, m), R (..., m, n);
   2 ("r"): the reduced factors, whose backward fails as PyTorch's */
EMBER_API int ember_linalg_qr_mode(ember_tensor *a, int mode, ember_tensor **q, ember_tensor **r);
/* The reduced SVD A = U diag(S) Vh: U (..., m, k), S (..., k) descending,
   Vh (..., k, n), k = min(m, n). */
EMBER_API int ember_linalg_svd(ember_tensor *a, ember_tensor **u, ember_tensor **s, ember_tensor **vh);
/* full_matrices != 0: U (..., m, m) and Vh (..., n, n) */
EMBER_API int ember_linalg_svd_full(ember_tensor *a, int full_matrices, ember_tensor **u, ember_tensor **s,
                                    ember_tensor **vh);
/* The LU factorisation with partial pivoting A = P L U of A (..., m, n):
   the packed LU (..., m, n) (L's strict lower part, its unit diagonal
   implied, and U), the int32 1-based pivots (..., min(m, n)) (row i was
   swapped with row pivots[i], in order) and the int32 info (...): 0, or i >
   0 where U[i, i] is zero (not an error). */
EMBER_API int ember_linalg_lu_factor(ember_tensor *a, ember_tensor **lu, ember_tensor **pivots, ember_tensor **info);
/* least squares: X (..., n, k) minimising ||A X - B|| for A (..., m, n), B
   (..., m, k) (A's batch dims), the rank (int64 (...)) and singular values
   (..., min(m, n)) of A; driver 0 gels (full rank; rank min(m, n)), 1 gelsy,
   2 gelsd, 3 gelss (singular values from gelsd and gelss only, else zero);
   singular values below rcond times the largest count as zero */
EMBER_API int ember_linalg_lstsq(ember_tensor *a, ember_tensor *b, int driver, double rcond, ember_tensor **solution,
                                 ember_tensor **rank, ember_tensor **singular_values);
EMBER_API int ember_softmax(ember_tensor *a, int dim, ember_tensor **out);
EMBER_API int ember_log_softmax(ember_tensor *a, int dim, ember_tensor **out);
/* their adjoints: g, the gradient of y = softmax(a, dim) (log_softmax(a, dim)),
   and y -> y (g - sum(g y)) (g - exp(y) sum(g)), sums along dim; g and y of one
   shape. Differentiable (second derivatives go through them). */
EMBER_API int ember_softmax_backward(ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out);
EMBER_API int ember_log_softmax_backward(ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out);

/* linear algebra: matmul of 1-D, 2-D and batched (broadcast) operands */
EMBER_API int ember_matmul(ember_tensor *a, ember_tensor *b, ember_tensor **out);
/* x (..., in) w^T for w (out, in): nn's linear layer without the bias */
EMBER_API int ember_linear(ember_tensor *x, ember_tensor *w, ember_tensor **out);
/* relu(x w^T + b) with b (out): the bias and the ReLU in the product's output
   pass (float32 / float64 on the CPU) */
EMBER_API int ember_linear_relu(ember_tensor *x, ember_tensor *w, ember_tensor *b, ember_tensor **out);
/* linear_relu's adjoint from its output y: gz = g where y > 0, else 0 (as
   ember_relu_backward), and gb = gz summed over all dims but the last */
EMBER_API int ember_relu_bias_backward(ember_tensor *g, ember_tensor *y, ember_tensor **gz, ember_tensor **gb);

/* shape and views (views share storage with their base) */
EMBER_API int ember_reshape(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);
EMBER_API int ember_view(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);
EMBER_API int ember_transpose(ember_tensor *a, int d0, int d1, ember_tensor **out);
EMBER_API int ember_permute(ember_tensor *a, int ndim, const int *perm, ember_tensor **out);
EMBER_API int ember_squeeze(ember_tensor *a, int dim, ember_tensor **out);   /* dim -1: all size-1 */
EMBER_API int ember_unsqueeze(ember_tensor *a, int dim, ember_tensor **out);
EMBER_API int ember_expand(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);
EMBER_API int ember_narrow(ember_tensor *a, int dim, int64_t start, int64_t length, ember_tensor **out);
EMBER_API int ember_select(ember_tensor *a, int dim, int64_t index, ember_tensor **out);
/* A view of a's elements taken in row-major order (a's contiguous layout):
   size[d] elements `stride[d]` apart along dim d, from element `offset`;
   strides and offset >= 0 and every element reached inside a. Of a
   contiguous a it shares a's memory, as PyTorch's as_strided with the
   storage offset counted from a's; of a non-contiguous a too where those
   steps are a strided pattern of a's memory (else EMBER_ERR_UNSUPPORTED). */
EMBER_API int ember_as_strided(ember_tensor *a, int ndim, const int64_t *size, const int64_t *stride,
                               int64_t offset, ember_tensor **out);
/* idx: int64 or int32, 0-based */
EMBER_API int ember_index_select(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out);
EMBER_API int ember_gather(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out);
/* Adds src into a zero tensor of `shape` at the positions idx names along dim
   (the adjoint of gather / index_select). */
EMBER_API int ember_scatter_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx,
                                ember_tensor *src, ember_tensor **out);
EMBER_API int ember_index_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx,
                              ember_tensor *src, ember_tensor **out);
/* The same four with the indices counted from base (Lua's are 1-based: base
   1 reads them as they are, with no shifted copy) */
EMBER_API int ember_index_select_base(ember_tensor *a, int dim, ember_tensor *idx, int64_t base,
                                      ember_tensor **out);
EMBER_API int ember_gather_base(ember_tensor *a, int dim, ember_tensor *idx, int64_t base, ember_tensor **out);
EMBER_API int ember_scatter_add_base(int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                                     ember_tensor *src, ember_tensor **out);
EMBER_API int ember_index_add_base(int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                                   ember_tensor *src, ember_tensor **out);
EMBER_API int ember_cat(int n, ember_tensor *const *ts, int dim, ember_tensor **out);
EMBER_API int ember_stack(int n, ember_tensor *const *ts, int dim, ember_tensor **out);
/* Sums a (broadcast) tensor back down to `shape` (the adjoint of expand). */
EMBER_API int ember_sum_to(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);

/* in place: write into a, bump its version. b broadcasts to a's shape and its
   dtype must cast to a's. */
EMBER_API int ember_add_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_sub_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_mul_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_div_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_pow_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_copy_(ember_tensor *a, ember_tensor *src);
EMBER_API int ember_fill_(ember_tensor *a, double value);
/* unary in place: op is the name of a unary op ("exp", "relu", "neg", ...) */
EMBER_API int ember_unary_(ember_tensor *a, const char *op);
EMBER_API int ember_clamp_(ember_tensor *a, int has_lo, double lo, int has_hi, double hi);
/* ffi:end */
