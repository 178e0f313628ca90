-- API reference: the tensor library and ember.linalg (see lua/ember/doc/init.lua for the format)
return [==[
## `tensorlib`: sorting, scans, logic, splitting, products

PyTorch's everyday tensor functions, each as `ember.<name>` and, where
PyTorch has one, `t:<name>()`. Dims, index arguments and index results are
1-based, as everywhere in ember. `cumsum`, `cumprod`, `prod`, `sort`, `topk`
and `searchsorted` are ops of the table (CPU kernels; on a GPU they run on the host), the rest are composed
from ops and so run on every device. Gradients flow wherever PyTorch defines
one. A call with an unknown option or one argument too many raises, naming
it. Details and the behaviour at the edges: docs/tensorlib.md.

### `Tensor:cumsum(dim, opts?)`, `ember.cumsum(t, dim, opts?)`
The running sums along `dim`; `{dtype =}` casts first. Integer and bool
tensors give int64.

### `Tensor:cumprod(dim, opts?)`, `ember.cumprod(t, dim, opts?)`
The running products along `dim`, as `cumsum`; the gradient, and its own
gradient, are exact with any number of zeros in the input.

### `Tensor:logcumsumexp(dim)`, `ember.logcumsumexp(t, dim)`
`log(cumsum(exp(t)))` along `dim`, computed stably over any range of values.

### `Tensor:sort(dim?, descending?)`, `ember.sort(t, dim?, descending?)`
Values and int64 indices (1-based) sorted along `dim` (default the last),
ascending unless `descending`; also `t:sort({dim =, descending =, stable =})`.
Always stable; NaN sorts as the largest value. The gradient flows to where
each value came from.

### `Tensor:argsort(dim?, descending?)`, `ember.argsort(t, dim?, descending?)`
The indices of `sort`.

### `Tensor:topk(k, opts?)`, `ember.topk(t, k, opts?)`
The `k` largest values along `{dim =}` (default the last) and their indices,
in order (the front of `sort`'s, ties by position); `{largest = false}` the
smallest. `opts` may be the dim itself.

### `Tensor:kthvalue(k, dim?, keepdim?)`, `ember.kthvalue(t, k, dim?, keepdim?)`
The `k`-th smallest value along `dim` (default the last) and its index.

### `Tensor:median(dim?, keepdim?)`, `ember.median(t, dim?, keepdim?)`
Without `dim` the lower median of all elements (0-d); with `dim` the lower
medians and their indices. A row holding NaN gives NaN.

### `Tensor:mode(dim?, keepdim?)`, `ember.mode(t, dim?, keepdim?)`
The most frequent value along `dim` (ties: the smallest) and the index of
its last occurrence.

### `Tensor:unique(opts?)`, `ember.unique(t, opts?)`
The sorted distinct values of `t` (flattened), or with `{dim =}` its
distinct slices along `dim` in lexicographic order; `{return_inverse = true}`
adds each element's (slice's) 1-based position among them and
`{return_counts = true}` their counts, returned in that order.

### `ember.searchsorted(sorted, values, opts?)`
The 1-based insertion points of `values` that keep `sorted`'s last dim in
order: before equal values, after them with `{right = true}` or
`{side = "right"}`. `sorted` 1-D, or N-D with `values` matching its leading
dims; a number gives a 0-d result.

### `ember.bucketize(t, boundaries, opts?)`
The bucket (1-based) of each element among the sorted 1-D `boundaries`:
`boundaries[i-1] < x <= boundaries[i]`, or `<=` and `<` with `{right = true}`;
`n + 1` past the last.

### `Tensor:any(dim?, keepdim?)`, `ember.any(t, dim?, keepdim?)`, `Tensor:all(dim?, keepdim?)`, `ember.all(t, dim?, keepdim?)`
Whether any / every element (along `dim`) is nonzero, as a bool tensor.

### `Tensor:isnan()`, `ember.isnan(t)`, `Tensor:isinf()`, `ember.isinf(t)`, `Tensor:isfinite()`, `ember.isfinite(t)`
Elementwise tests as bool tensors (integer tensors are always finite).

### `Tensor:logical_and(b)`, `ember.logical_and(a, b)`, `Tensor:logical_or(b)`, `ember.logical_or(a, b)`, `Tensor:logical_xor(b)`, `ember.logical_xor(a, b)`, `Tensor:logical_not()`, `ember.logical_not(t)`
Logic on "nonzero is true", broadcasting, as bool tensors.

### `Tensor:isclose(b, rtol?, atol?, equal_nan?)`, `ember.isclose(a, b, rtol?, atol?, equal_nan?)`
`|a - b| <= atol + rtol |b|` elementwise (rtol 1e-5, atol 1e-8); also
`(b, {rtol =, atol =, equal_nan =})`.

### `Tensor:allclose(b, rtol?, atol?, equal_nan?)`, `ember.allclose(a, b, rtol?, atol?, equal_nan?)`
Whether `isclose` holds everywhere, as a Lua boolean.

### `Tensor:equal(b)`, `ember.equal(a, b)`
Whether `a` and `b` have one shape and the same values, as a Lua boolean.

### `Tensor:chunk(chunks, dim?)`, `ember.chunk(t, chunks, dim?)`
A list of at most `chunks` views of `ceil(n / chunks)` along `dim` (default 1).

### `Tensor:split(size, dim?)`, `ember.split(t, size, dim?)`
A list of views of `size` along `dim` (the last smaller), or of the sizes of
the list `size`, which must sum to the dim's size.

### `Tensor:flip(dims)`, `ember.flip(t, dims)`, `Tensor:fliplr()`, `ember.fliplr(t)`, `Tensor:flipud()`, `ember.flipud(t)`
`t` reversed along `dims` (a number or a list); `fliplr` along dim 2,
`flipud` along dim 1.

### `Tensor:roll(shifts, dims?)`, `ember.roll(t, shifts, dims?)`
Elements shifted by `shifts` along `dims`, wrapping around; without `dims`
over the flattened tensor.

### `Tensor:repeat(sizes)`
`t` repeated `sizes[i]` times along dim `i` (sizes a list or numbers, at
least `t`'s dims; more add leading dims). `repeat` is a Lua keyword: call it
as `t["repeat"](t, 2, 1)`, or use `tile`.

### `Tensor:tile(reps)`, `ember.tile(t, reps)`
`repeat` with `reps` padded with leading ones to `t`'s dims.

### `Tensor:repeat_interleave(repeats, dim?)`, `ember.repeat_interleave(t, repeats, dim?)`
Each slice along `dim` (without `dim`, each element of the flattened tensor)
repeated `repeats` times, or `repeats[i]` times for a list or integer tensor.

### `Tensor:triu(diagonal?)`, `ember.triu(t, diagonal?)`, `Tensor:tril(diagonal?)`, `ember.tril(t, diagonal?)`
The upper / lower triangle of the last two dims, from diagonal `diagonal`
(0 the main one, > 0 above it); the rest zero.

### `Tensor:diagonal(offset?, dim1?, dim2?)`, `ember.diagonal(t, offset?, dim1?, dim2?)`
The diagonal at `offset` of the plane of `dim1` and `dim2` (1 and 2), as the
result's last dim: a view, as PyTorch's (an `as_strided` of `t`), so writes
through it reach `t`, of a contiguous or a strided `t` alike.

### `Tensor:as_strided(size, stride, offset?)`, `ember.as_strided(t, size, stride, offset?)`
A view of `t`'s elements taken in row-major order: `size[i]` elements
`stride[i]` apart along dim `i`, starting at element `offset` (0-based,
default 0). For a contiguous `t` it is PyTorch's `as_strided` with the
storage offset counted from `t`'s first element; for a strided `t` it is a
view of `t`'s memory where those steps are a strided pattern of it, and
raises otherwise (`contiguous()` first). Strides and offset are >= 0 and
every element reached must lie in `t`, or it raises naming the geometry.
Differentiable; under recording, elements may repeat only along dims of
stride 0 (others that may overlap raise).

### `Tensor:diag(k?)`, `ember.diag(t, k?)`
Of a 1-D tensor the square matrix with it on diagonal `k`; of a 2-D one its
diagonal `k`, a copy (as PyTorch's; `diagonal` is the view).

### `Tensor:trace()`, `ember.trace(t)`
The sum of a matrix's diagonal.

### `ember.meshgrid(t1, t2, ..., opts?)`
Coordinate grids of 1-D tensors, returned as several values; `{indexing =
"ij"}` (the default) or `"xy"`.

### `Tensor:nonzero(opts?)`, `ember.nonzero(t, opts?)`
The 1-based positions of the nonzero elements as an int64 (count, ndim)
tensor, or with `{as_tuple = true}` one 1-D tensor per dim.

### `Tensor:scatter(dim, index, src, opts?)`, `ember.scatter(t, dim, index, src, opts?)`
`t` with `src`'s values (a tensor at least index's size, or a number)
written at the 1-based `index` along `dim`; `{reduce = "add"}` adds them. An
index writing one place twice raises. Differentiable in `t` and `src`.

### `Tensor:scatter_add(dim, index, src)`, `ember.scatter_add(t, dim, index, src)`
`t` with `src` added at the 1-based `index` along `dim`.

### `Tensor:index_fill(dim, index, value)`, `ember.index_fill(t, dim, index, value)`
`t` with the slices at the 1-based indices along `dim` set to `value`.

### `Tensor:prod(dim?, keepdim?, opts?)`, `ember.prod(t, dim?, keepdim?, opts?)`
The product of all elements (0-d) or along `dim` (`keepdim` keeps it as
size 1), a reduction of its own (threads as `sum`'s); `{dtype =}` casts
first; floats keep their dtype, integers and bools give int64 (wrapping, as
PyTorch's), the product of nothing is 1. The gradient is PyTorch's (`g y /
x` without zeros, the product of the others at a lone zero, 0 with two or
more) and differentiates again exactly with any zeros.

### `Tensor:bmm(b)`, `ember.bmm(a, b)`
Batched matrix products `(b, n, m) x (b, m, p)`, shapes checked.

### `Tensor:baddbmm(a, b, opts?)`, `ember.baddbmm(input, a, b, opts?)`
`beta input + alpha bmm(a, b)` with `{beta =, alpha =}` (both 1); beta 0
ignores `input`.

### `Tensor:addmm(a, b, opts?)`, `ember.addmm(input, a, b, opts?)`
`beta input + alpha a @ b` for matrices, as `baddbmm`.

### `Tensor:outer(b)`, `ember.outer(a, b)`, `ember.ger(a, b)`
The outer product of two vectors.

### `ember.einsum(equation, t1, t2, ...)`
Einstein summation: `"bij,bjk->bik"`, the implicit form `"ij,jk"`, repeated
labels (`"ii->i"`), `"..."` for shared leading dims; operands may also come
as one list. Contracted pairwise by matrix products.

### `ember.tensordot(a, b, dims?)`
The sum of products over `a`'s last `dims` dims and `b`'s first (default 2),
or over the dims of `{{a's}, {b's}}`.

### `ember.cdist(x1, x2, p?)`
The `p`-norm distances (default 2) between the rows of `(..., P, M)` and
`(..., R, M)`: `(..., P, R)`; zero distances have gradient 0.

### `Tensor:bincount(opts?)`, `ember.bincount(t, opts?)`
Counts of each value of a 1-D tensor of positive integers, 1-based like
index tensors: `result[v]` counts the entries equal to `v`, or sums their
`{weights =}`; length `max(t)` or `{minlength =}`.

### `Tensor:histc(bins?, min?, max?)`, `ember.histc(t, bins?, min?, max?)`
A histogram of `bins` (100) equal bins over `[min, max]` (both 0: the data's
finite range); elements outside and NaN are left out.

## `ember.linalg`: linear algebra

LAPACK (through OpenBLAS) on matrices or batches of them `(..., m, n)`,
float32 and float64, with gradients (and second derivatives) wherever
PyTorch defines them. A singular or not positive-definite matrix raises
naming its batch element. On a GPU the factorisations run on the host. The
top-level names `ember.inverse`, `det`, `slogdet`, `solve`, `cholesky`,
`eigh`, `qr`, `lstsq`, `matrix_power`, `pinverse` and the methods
`t:inverse()`, `t:det()`, `t:slogdet()`, `t:cholesky()`, `t:qr()`,
`t:matrix_power(n)`, `t:pinverse()` are the same functions.

### `ember.linalg.inv(A)`, `ember.inverse(A)`, `Tensor:inverse()`
`A^-1`.

### `ember.linalg.det(A)`, `ember.det(A)`, `Tensor:det()`
The determinant: the product of the LU pivots, exactly 0 for a singular
matrix. Its gradient is the transposed adjugate at every rank (through the
SVD where `det A = 0`: nonzero for rank `n - 1`, where PyTorch 1.13 returns
zero).

### `ember.linalg.inv_ex(A, opts?)`, `ember.linalg.solve_ex(A, B, opts?)`
`inv` and `solve` that report a singular matrix instead of raising: they
return the result and an int32 `info` of the batch shape (0, or `i` where
`U[i, i]` of the LU is zero); the result of a singular matrix is NaN (PyTorch
leaves LAPACK's infinities or NaN there). `{check_errors = true}` raises as
`inv` and `solve` do.

### `ember.linalg.cholesky_ex(A, opts?)`
`cholesky` that reports a matrix that is not positive-definite instead of
raising: `L` (or `U` with `{upper = true}`) and an int32 `info` of the batch
shape (0, or the order of the first leading minor that is not
positive-definite); `L` of such a matrix is NaN (PyTorch leaves the partial
factor). `{check_errors = true}` raises as `cholesky` does.

### `ember.linalg.slogdet(A)`, `ember.slogdet(A)`, `Tensor:slogdet()`
The sign and the log of the absolute value of the determinant (`0, -inf`
for a singular matrix); the gradient flows through the second.

### `ember.linalg.solve(A, B, opts?)`, `ember.solve(A, B, opts?)`
`X` with `A X = B`, or `X A = B` with `{left = false}`: `B` `(..., n, k)`
(`(..., k, n)` with `left = false`), or a vector: `(n)` or `A`'s shape
without its last dim (PyTorch's rule); batch dims broadcast.

### `ember.linalg.cholesky(A, opts?)`, `ember.cholesky(A, opts?)`, `Tensor:cholesky(opts?)`
The lower triangular `L` with `A = L L^T` of a symmetric positive-definite
`A` (its lower triangle is read); with `{upper = true}` `U = L^T`.

### `ember.linalg.solve_triangular(A, B, opts)`
`X` with `A X = B`, or `X A = B` with `{left = false}`, for a triangular
`A`: `opts.upper` (required, as PyTorch's) says which triangle is read, the
other is ignored; `{unitriangular = true}` takes the diagonal as ones. `B`
is `(..., n, k)` (`(..., k, n)` with `left = false`), batch dims broadcast;
`A` and `B` have one dtype. `A`'s gradient lies in the triangle read.
LAPACK's trtrs; a zero on the diagonal read raises as singular, naming the
batch element.

### `ember.linalg.eigh(A, UPLO?)`, `ember.eigh(A, UPLO?)`
The eigenvalues (ascending) and eigenvectors (as columns) of a symmetric
`A`, as two values; its lower triangle is read, or the upper one with
`UPLO = "U"`. Gradients as PyTorch's (degenerate eigenvalues give
infinities there too).

### `ember.linalg.eigvalsh(A, UPLO?)`
The eigenvalues of `eigh`.

### `ember.linalg.qr(A, mode?)`, `ember.qr(A, mode?)`, `Tensor:qr(mode?)`
The QR of `(..., m, n)`, `k = min(m, n)`: `mode = "reduced"` (the default)
gives `Q (..., m, k)` and `R (..., k, n)`, `"complete"` `Q (..., m, m)` and
`R (..., m, n)`, `"r"` `R` alone. Differentiable as PyTorch's: for every
shape in `"reduced"` mode and for `m <= n` in `"complete"`; backward raises
PyTorch's error for `"complete"` with `m > n` and for `"r"`.

### `ember.linalg.svd(A, opts?)`
The SVD `A = U diag(S) Vh` as `U`, `S (..., k)` descending and `Vh`, `k =
min(m, n)`: the full `U (..., m, m)` and `Vh (..., n, n)` (the default, as
PyTorch's) or with `{full_matrices = false}` the reduced `U (..., m, k)` and
`Vh (..., k, n)`. PyTorch's gradients (repeated singular values give
infinities there too); the full factors' extra columns get none, as
PyTorch's.

### `ember.linalg.svdvals(A)`
The singular values of `svd`.

### `ember.svd(A, some?)`, `Tensor:svd(some?)`
PyTorch's `torch.svd`: `U, S, V` (`V`, not `Vh`), reduced unless `some =
false`.

### `ember.linalg.lstsq(A, B, opts?)`, `ember.lstsq(A, B, opts?)`
The least-squares solution of `A X = B` for any `A (..., m, n)` (tall,
wide, rank-deficient: the minimum-norm solution), `B` `(..., m, k)` or
`(..., m)`, batch dims broadcast. `opts.driver`: `"gelsy"` (the default),
`"gelsd"`, `"gelss"` (rank-revealing) or `"gels"` (QR, full rank only);
`opts.rcond`: singular values below `rcond` times the largest count as zero
(default `eps * max(m, n)`). Returns `{solution =, residuals =, rank =,
singular_values =}` as PyTorch's: `residuals` (squared residual norm per
column of `B`) when `m > n`, every `A` has full rank and the driver is not
gelsy, else empty; `rank` (int64) except with gels; `singular_values` with
gelsd and gelss. The gradient of `solution` is that of `pinv(A) B`, as
PyTorch's; `residuals` are differentiable too.

### `ember.linalg.pinv(A, opts?)`, `ember.pinverse(A, rcond?)`, `Tensor:pinverse(rcond?)`
The Moore-Penrose pseudo-inverse `(..., n, m)` through the SVD (through
`eigh` with `{hermitian = true}`): singular values at or below `max(atol,
rtol * largest)` count as zero (`opts.atol`, `opts.rtol`; `rtol` defaults to
`eps * max(m, n)`, or 0 when only `atol` is given). `pinverse` is
`torch.pinverse`: `rtol = rcond` (default `1e-15`). Differentiable where the
rank is constant.

### `ember.linalg.matrix_rank(A, opts?)`
The number of singular values above the cutoff of `pinv` (same options), as
int64 of the batch shape.

### `ember.linalg.matrix_power(A, n)`, `ember.matrix_power(A, n)`, `Tensor:matrix_power(n)`
`A^n` for an integer `n` by repeated squaring: the identity for `n = 0`,
`inv(A)^-n` for `n < 0`.

### `ember.linalg.cross(x, y, dim?)`
The cross product of 3-vectors along `dim` (default -1, which must have
size 3); `x` and `y` have the same number of dims, the others broadcast.

### `ember.linalg.lu(A, opts?)`
`P, L, U` with `A = P L U` for `A (..., m, n)`, `k = min(m, n)`: `P (...,
m, m)` a permutation, `L (..., m, k)` unit lower triangular, `U (..., k, n)`
upper triangular (getrf, partial pivoting; a singular `A` is factored too).
Differentiable in `L` and `U` as PyTorch's, for every shape. `{pivot =
false}` raises, as PyTorch's on the CPU.

### `ember.linalg.lu_factor(A, opts?)`, `ember.linalg.lu_factor_ex(A, opts?)`
The packed `LU (..., m, n)` (`L`'s strict lower part and `U`) and the int32
1-based `pivots (..., k)` (row `i` was swapped with row `pivots[i]`, in
order); `lu_factor_ex` adds the int32 `info (...)` (0, or `i` where `U[i,
i] = 0`), while `lu_factor` raises there, naming the batch element.

### `ember.linalg.lu_solve(LU, pivots, B, opts?)`
`X` with `A X = B` from `lu_factor`'s `LU` and `pivots` of a square `A`;
`{left = false}` solves `X A = B`, `{adjoint = true}` uses `A^T`.
Differentiable in `LU` and `B`.

### `ember.lu_unpack(LU, pivots)`
`P, L, U` of a packed `LU` and its pivots, as `torch.lu_unpack`.

### `ember.linalg.householder_product(A, tau)`
The first `n` columns of `H_1 ... H_k`, `H_i = I - tau_i v_i v_i^T`, `v_i`
column `i` of `A (..., m, n)` below the diagonal with 1 on it (the
reflectors LAPACK's geqrf leaves), `tau (..., k)`, `k <= n <= m`;
differentiable in `A` and `tau`.

### `ember.linalg.cond(A, p?)`
The condition number: `S_max / S_min` for `p` nil or 2 (`S_min / S_max`
for -2, any shape), else `norm(A, p) * norm(inv(A), p)` for a square `A`,
`p` one of `"fro"`, `"nuc"`, 1, -1, `"inf"`, `"-inf"`.

### `ember.linalg.multi_dot(list)`
The product of a list of 2-D tensors, the first and the last of which may be
1-D (a row and a column vector; the result drops their dims).

### `ember.linalg.vecdot(x, y, dim?)`
`sum(x * y)` along `dim` (default -1), shapes broadcast.

### `ember.linalg.diagonal(A, offset?)`
`ember.diagonal(A, offset, -2, -1)`: the diagonals of the last two dims.

### `ember.linalg.matrix_exp(A)`
`exp(A)` of a square matrix or batch, by scaling and squaring a Taylor
series; differentiable to any order.

### `ember.linalg.tensorinv(A, ind?)`
The inverse of `A` read as a map from its dims after `ind` (default 2) to
its first `ind`: shape `A`'s last dims, then its first `ind`.

### `ember.linalg.tensorsolve(A, B, dims?)`
`X` with `tensordot(A, X, X:dim()) = B`: `A`'s shape is `B`'s followed by
`X`'s, after moving the dims listed in `dims` (1-based) to the end.

### `ember.linalg.vander(x, opts?)`
The Vandermonde matrix `(..., n, N)` of `x (..., n)`: columns `x^0`, ...,
`x^(N-1)`, `opts.N` defaulting to `n`.

### `ember.linalg.norm(A, ord?, dim?, keepdim?)`
Vector norms (`ord` a number, `"inf"`, `"-inf"`; default 2 over every
element) and, for a matrix or two `dim`s, the matrix norms `"fro"` (the
default), `"nuc"`, 1, -1, 2, -2, `"inf"`, `"-inf"`.

### `ember.linalg.vector_norm(x, ord?, dim?, keepdim?)`
The vector norm of every element (or of each slice over `dim`, a dim or a
list of them): `ord` 2 by default, any number (0 counts the nonzeros,
negative ones are `sum(|x|^ord)^(1/ord)`), `"inf"` or `"-inf"`.

### `ember.linalg.matrix_norm(A, ord?, dim?, keepdim?)`
The matrix norms of `norm` (`"fro"` by default) over `dim` (two dims,
default `{-2, -1}`).
]==]
