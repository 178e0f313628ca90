/* grad_rules_linalg.c: the grad rules of the scans, sort and linear algebra
   (see grad_rules.c), the adjoints PyTorch uses. */
#include "grad_rules_impl.h"

#include <stdlib.h>

/* ------------------------------------------------------------------ scans, sort, linalg */
static ember_tensor *t_cumsum(arena *s, ember_tensor *a, int dim, int reverse)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_cumsum(a, dim, reverse, &o), &o);
}

static ember_tensor *t_cumprod(arena *s, ember_tensor *a, int dim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_cumprod(a, dim, &o), &o);
}

static ember_tensor *t_inv(arena *s, ember_tensor *a)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_linalg_inv(a, &o), &o);
}

/* a rows x cols constant in like's dtype and on its device, by kind: the
   lower-triangular mask (0: ones on and below the diagonal; 1: below only),
   2: diag(1, ..., n), 3: the upper-triangular mask (on and above), 4: the
   (rectangular) identity */
static ember_tensor *const_matrix(arena *s, int64_t rows, int64_t cols, int kind, const ember_tensor *like)
{
    ember_tensor *o = NULL, *d = NULL;
    int64_t sh[2] = {rows, cols};
    if (!OK(s)) return NULL;
    ember_tensor *m = keep(s, ember_full(2, sh, 0, EMBER_FLOAT64, EMBER_CPU, &o), &o);
    if (!m) return NULL;
    double *p = (double *)ember__ptr(m);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            p[i * cols + j] = kind == 2 ? (i == j ? (double)(i + 1) : 0)
                            : kind == 3 ? (j >= i) : kind == 4 ? (j == i) : (j < i || (kind == 0 && j == i));
    m = keep(s, ember_to_dtype(m, ember_tensor_dtype(like), &d), &d);
    if (m && ember_tensor_device(like) != EMBER_CPU) {
        ember_tensor *dv = NULL;
        m = keep(s, ember_to_device(m, ember_tensor_device(like), &dv), &dv);
    }
    return m;
}

static ember_tensor *lower_mask(arena *s, int64_t n, bool strict, const ember_tensor *like)
{
    return const_matrix(s, n, n, strict ? 1 : 0, like);
}

RULE(cumsum)
{
    RULE_LOCALS;
    give(s, &gi[0], t_cumsum(s, g, (int)at->i[0], !at->i[1]));
}

/* The k-th zero (k = 1, 2) of each run of x along dim (every dim: in
   row-major order) as a bool mask, from zf (x == 0 in g's dtype). */
static ember_tensor *kth_zero(arena *s, ember_tensor *zf, int dim, int nd, const int64_t *in, int k)
{
    ember_tensor *seen;
    if (dim >= 0) {
        seen = t_cumsum(s, zf, dim, 0);
    } else {
        int64_t n = ember_tensor_numel(zf);
        seen = reshape(s, t_cumsum(s, reshape(s, zf, 1, &n), 0, 0), nd, in);
    }
    return t_eq(s, t_mul(s, zf, seen), num(s, k));
}

/* Whether zf (x == 0 in g's dtype) has a one: read back, as PyTorch's rules
   do, to take the plain formula when x has no zero. */
static bool any_zero(arena *s, ember_tensor *zf)
{
    if (!OK(s) || !zf) return false;
    ember_tensor *o = NULL, *count = keep(s, ember_sum(zf, 0, NULL, 0, &o), &o);
    double n = 0;
    if (OK(s) && count) {
        int rc = ember_item(count, &n);
        if (rc < 0) s->rc = rc;
    }
    return n != 0;
}

/* top / x, the whole gradient when x has no zero; else top / x at the nonzero x
   and 0 at its zeros z (zf: z in g's dtype), *zeros saying so for the caller to
   fill a row's first and second zero */
static ember_tensor *div_off_zeros(arena *s, ember_tensor *top, ember_tensor *x, ember_tensor *z, ember_tensor *zf,
                                   bool *zeros)
{
    *zeros = any_zero(s, zf);
    if (!*zeros) return t_div(s, top, x);
    return where3(s, z, num(s, 0), t_div(s, top, where3(s, z, num(s, 1), x)));
}

/* x_i != 0: sum_{j >= i} g_j y_j / x_i (the whole rule when x has no
   zero). At a row's first and second zero, the products that skip it: with that zero alone made one (x'),
   sum_{j >= i} g_j cumprod(x')_j, which still reads the other zeros, so its
   derivative in them is the mixed second derivative; 0 at later zeros,
   whose every product holds two zeros. Exact twice with any zeros. */
RULE(cumprod)
{
    RULE_LOCALS;
    int dim = (int)at->i[0];
    ember_tensor *x = IN(0), *y = OUT(0);
    if (!have(s, x, y)) return;
    ember_tensor *z = t_eq(s, x, num(s, 0)), *zf = as(s, z, g), *rev = t_cumsum(s, t_mul(s, g, y), dim, 1);
    bool zeros;
    ember_tensor *res = div_off_zeros(s, rev, x, z, zf, &zeros);
    for (int k = 1; zeros && k <= 2; k++) {
        ember_tensor *first = kth_zero(s, zf, dim, nd, in, k);
        ember_tensor *skip = t_cumsum(s, t_mul(s, g, t_cumprod(s, where3(s, first, num(s, 1), x), dim)), dim, 1);
        res = where3(s, first, skip, res);
    }
    give(s, &gi[0], res);
}

static ember_tensor *t_prod(arena *s, ember_tensor *a, int dim, int keepdim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_prod(a, dim, keepdim, &o), &o);
}

/* PyTorch's: g y / x when x has no zero. Else g y / x at the nonzero x; at
   a slice's first and second zero the product of the others: prod of x with
   that zero alone made one, which still reads the other zeros (so the
   second derivative is exact); 0 at later zeros. */
RULE(prod)
{
    RULE_LOCALS;
    unsigned mask = (unsigned)at->i[1];
    int dim = nd > 0 && mask != (1u << nd) - 1 ? __builtin_ctz(mask) : -1;
    ember_tensor *x = IN(0), *y = OUT(0);
    if (!have(s, x, y)) return;
    ember_tensor *gy = expand_back(s, t_mul(s, g, y), nd, in, mask);
    ember_tensor *z = t_eq(s, x, num(s, 0)), *zf = as(s, z, g);
    bool zeros;
    ember_tensor *res = div_off_zeros(s, gy, x, z, zf, &zeros);
    for (int k = 1; zeros && k <= 2; k++) {
        ember_tensor *kth = kth_zero(s, zf, dim, nd, in, k);
        ember_tensor *others = t_prod(s, where3(s, kth, num(s, 1), x), dim, 1);
        res = where3(s, kth, t_mul(s, expand_back(s, g, nd, in, mask), expand(s, others, nd, in)), res);
    }
    give(s, &gi[0], res);
}

/* the values' gradient goes back to where each came from */
RULE(sort)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *idx = OUT(1);
    if (!have(s, idx, g)) return;
    give(s, &gi[0], keep(s, ember_scatter_add(nd, in, (int)at->i[0], idx, g, &o), &o));
}

/* -Y^T g Y^T, Y = A^-1 */
RULE(linalg_inv)
{
    RULE_LOCALS;
    ember_tensor *yt = transpose_last(s, OUT(0));
    give(s, &gi[0], t_neg(s, t_matmul(s, t_matmul(s, yt, g), yt)));
}

/* g_logabsdet A^-T (the sign has no gradient) */
RULE(linalg_slogdet)
{
    RULE_LOCALS;
    ember_tensor *gl = r->go[1];
    int64_t sh[EMBER_MAX_DIMS];
    memcpy(sh, in, sizeof sh);
    sh[nd - 1] = sh[nd - 2] = 1;
    give(s, &gi[0], t_mul(s, reshape(s, gl, nd, sh), transpose_last(s, t_inv(s, IN(0)))));
}

/* gB = solve(A^T, g), gA = -gB X^T */
RULE(linalg_solve)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *gb = NULL, *at_ = transpose_last(s, IN(0));
    if (OK(s) && at_) gb = keep(s, ember_linalg_solve(at_, g, &o), &o);
    if (NEED(0)) give(s, &gi[0], t_neg(s, t_matmul(s, gb, transpose_last(s, OUT(0)))));
    if (NEED(1)) give(s, &gi[1], gb);
}

/* PyTorch's: X = tril(L^T g), made symmetric with its diagonal halved,
   then L^-T X L^-1 */
RULE(linalg_cholesky)
{
    RULE_LOCALS;
    ember_tensor *L = OUT(0);
    if (!have(s, L, g)) return;
    int64_t sz = in[nd - 1];
    ember_tensor *x = t_mul(s, t_matmul(s, transpose_last(s, L), g), lower_mask(s, sz, false, g));
    x = t_mul(s, t_add(s, x, transpose_last(s, t_mul(s, x, lower_mask(s, sz, true, g)))), num(s, 0.5));
    ember_tensor *li = t_inv(s, L);
    give(s, &gi[0], t_matmul(s, t_matmul(s, transpose_last(s, li), x), li));
}

/* gB = solve_triangular(A^T, g) (the other triangle), gA = -gB X^T in the
   triangle read (strictly, for a unit diagonal), as PyTorch's */
RULE(linalg_solve_triangular)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *gb = NULL, *at_ = transpose_last(s, IN(0));
    bool upper = at->i[0] != 0, unit = at->i[1] != 0;
    if (OK(s) && at_) gb = keep(s, ember_linalg_solve_triangular(at_, g, !upper, unit, &o), &o);
    if (NEED(0)) {
        ember_tensor *mask = lower_mask(s, in[nd - 1], unit, g);
        if (upper) mask = transpose_last(s, mask);
        give(s, &gi[0], t_mul(s, t_neg(s, t_matmul(s, gb, transpose_last(s, OUT(0)))), mask));
    }
    if (NEED(1)) give(s, &gi[1], gb);
}

/* the n x n identity in like's dtype and on its device */
static ember_tensor *eye_like(arena *s, int64_t n, const ember_tensor *like)
{
    ember_tensor *o = NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_eye(n, n, ember_tensor_dtype(like), ember_tensor_device(like), &o), &o);
}

static ember_tensor *unsqueeze_at(arena *s, ember_tensor *a, int dim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_unsqueeze(a, dim, &o), &o);
}

/* PyTorch's: with the skew part K of V^T gV, E_ij = L_j - L_i,
   gA = V (K / E off the diagonal, gL on it) V^T */
RULE(linalg_eigh)
{
    RULE_LOCALS;
    ember_tensor *L = OUT(0), *V = OUT(1), *gL = r->go[0], *gV = r->go[1];
    if (!have(s, L, V) || !have(s, gL, gV)) return;
    int64_t sz = in[nd - 1];
    ember_tensor *I = eye_like(s, sz, V), *off = t_sub(s, num(s, 1), I);
    ember_tensor *vg = t_matmul(s, transpose_last(s, V), gV);
    ember_tensor *k = t_mul(s, t_sub(s, vg, transpose_last(s, vg)), num(s, 0.5));
    ember_tensor *e = t_add(s, t_sub(s, unsqueeze_at(s, L, nd - 2), unsqueeze_at(s, L, nd - 1)), I);
    ember_tensor *mid = t_add(s, t_mul(s, t_div(s, k, e), off), t_mul(s, I, unsqueeze_at(s, gL, nd - 2)));
    give(s, &gi[0], t_matmul(s, t_matmul(s, V, mid), transpose_last(s, V)));
}

/* m >= n (Liao et al. 2019): M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^-T,
   copyltu(M) the symmetric matrix of M's lower triangle */
static ember_tensor *qr_tall(arena *s, ember_tensor *Q, ember_tensor *R, ember_tensor *gQ, ember_tensor *gR, int64_t n)
{
    ember_tensor *M = t_sub(s, t_matmul(s, R, transpose_last(s, gR)), t_matmul(s, transpose_last(s, gQ), Q));
    ember_tensor *c = t_add(s, t_mul(s, M, lower_mask(s, n, false, M)),
                            transpose_last(s, t_mul(s, M, lower_mask(s, n, true, M))));
    ember_tensor *lhs = t_add(s, gQ, t_matmul(s, Q, c));
    return t_matmul(s, lhs, transpose_last(s, t_inv(s, R)));
}

/* the reduced QR's (PyTorch's): m >= n as qr_tall; m < n with A = (X Y), R =
   (R1 R2), X = Q R1 square: gY = Q gR2, gX = qr_tall(Q, R1, gQ + Y gR2^T,
   gR1). None for mode "r" nor for the complete Q of m > n, as PyTorch's */
RULE(linalg_qr)
{
    RULE_LOCALS;
    ember_tensor *Q = OUT(0), *R = OUT(1), *gQ = r->go[0], *gR = r->go[1];
    int64_t m = in[nd - 2], sz = in[nd - 1];
    if (at->i[0] == 2) {
        s->rc = ember__fail(EMBER_ERR_UNSUPPORTED, "backward: the derivative of linalg.qr depends on Q, which is not "
                            "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                            "differentiate through linalg.qr.");
        return;
    }
    if (at->i[0] == 1 && m > sz) {
        s->rc = ember__fail(EMBER_ERR_UNSUPPORTED, "backward: the QR decomposition is not differentiable when "
                            "mode='complete' and nrows > ncols (got a %lld x %lld matrix)", (long long)m, (long long)sz);
        return;
    }
    if (!have(s, Q, R) || !have(s, gQ, gR)) return;
    if (m >= sz) {
        give(s, &gi[0], qr_tall(s, Q, R, gQ, gR, sz));
        return;
    }
    ember_tensor *A = IN(0);
    if (!have(s, A, A)) return;
    ember_tensor *Y = slice(s, A, nd - 1, m, sz - m), *gR2 = slice(s, gR, nd - 1, m, sz - m);
    ember_tensor *gX = qr_tall(s, Q, slice(s, R, nd - 1, 0, m), t_add(s, gQ, t_matmul(s, Y, transpose_last(s, gR2))),
                               slice(s, gR, nd - 1, 0, m), m);
    ember_tensor *parts[2] = {gX, t_matmul(s, Q, gR2)};
    if (!have(s, parts[0], parts[1])) return;
    give(s, &gi[0], cat_of(s, 2, parts, nd - 1));
}

/* PyTorch's svd_backward, with S = diag(U^T A Vh^T) read from the input:
   only gS: U diag(gS) Vh; else with skew(X) = X - X^T and E_jk = S_k^2 - S_j^2,
   G = (skew(U^T gU) S + S skew(Vh gV)) / E + diag(gS), gA = U G Vh plus, for
   m > n, (I - U U^T) gU S^-1 Vh, for m < n, U S^-1 gVh (I - V Vh) */
RULE(linalg_svd)
{
    RULE_LOCALS;
    ember_tensor *A = IN(0), *U = OUT(0), *Vh = OUT(1), *gU = r->go[0], *gVh = r->go[1], *gS = r->go[2];
    if (!have(s, A, U) || !have(s, Vh, gS) || !have(s, gU, gVh)) return;
    int64_t m = in[nd - 2], sz = in[nd - 1], k = m < sz ? m : sz;
    int last = nd - 1;
    if (at->i[0]) {   /* full_matrices: the first k columns of U and rows of Vh, as PyTorch's */
        U = slice(s, U, nd - 1, 0, k);
        gU = slice(s, gU, nd - 1, 0, k);
        Vh = slice(s, Vh, nd - 2, 0, k);
        gVh = slice(s, gVh, nd - 2, 0, k);
        if (!have(s, U, gU) || !have(s, Vh, gVh)) return;
    }
    ember_tensor *S = sum_dims(s, t_mul(s, t_matmul(s, transpose_last(s, U), A), Vh), 1, &last, 0);
    if (all_zero(gU) && all_zero(gVh)) {
        give(s, &gi[0], t_matmul(s, U, t_mul(s, unsqueeze_at(s, gS, nd - 1), Vh)));
        return;
    }
    ember_tensor *I = eye_like(s, k, U), *V = transpose_last(s, Vh), *gV = transpose_last(s, gVh);
    ember_tensor *x = t_matmul(s, transpose_last(s, U), gU), *y = t_matmul(s, Vh, gV);
    ember_tensor *uu = t_sub(s, x, transpose_last(s, x)), *vv = t_sub(s, y, transpose_last(s, y));
    ember_tensor *s2 = t_mul(s, S, S);
    ember_tensor *e = t_add(s, t_sub(s, unsqueeze_at(s, s2, nd - 2), unsqueeze_at(s, s2, nd - 1)), I);
    ember_tensor *G = t_div(s, t_add(s, t_mul(s, uu, unsqueeze_at(s, S, nd - 2)), t_mul(s, unsqueeze_at(s, S, nd - 1), vv)), e);
    G = t_add(s, G, t_mul(s, I, unsqueeze_at(s, gS, nd - 2)));
    ember_tensor *gA;
    if (m > sz) {
        ember_tensor *gus = t_div(s, gU, unsqueeze_at(s, S, nd - 2));
        gA = t_add(s, t_matmul(s, U, G), t_sub(s, gus, t_matmul(s, U, t_matmul(s, transpose_last(s, U), gus))));
        gA = t_matmul(s, gA, Vh);
    } else if (m < sz) {
        ember_tensor *sgv = t_div(s, gVh, unsqueeze_at(s, S, nd - 1));
        gA = t_add(s, t_matmul(s, G, Vh), t_sub(s, sgv, t_matmul(s, t_matmul(s, sgv, V), Vh)));
        gA = t_matmul(s, U, gA);
    } else {
        gA = t_matmul(s, U, t_matmul(s, G, Vh));
    }
    give(s, &gi[0], gA);
}


static int64_t count_zeros(const ember_tensor *t)
{
    if (!t || ember_tensor_device(t) != EMBER_CPU || !ember_tensor_is_contiguous(t)) return 1;   /* unknown: maybe */
    int64_t n = ember_tensor_numel(t), z = 0;
    const char *p = ember_tensor_data(t);
    int dt = ember_tensor_dtype(t), es = ember_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) z += ember__load(p + i * es, dt) == 0;
    return z;
}

/* g times the adjugate's transpose: g det(A) A^-T = (solve(A, g det(A) I))^T
   where det A != 0, PyTorch's; where det A = 0, from A = U diag(S) Vh: g
   det(U) det(Vh) U diag(prod_{j != i} S_j) Vh, correct at any rank (PyTorch
   1.13 gives zero there, its det = 0 factor). Matrices of the other kind go
   through each branch as I (solve) or diag(1..n) (SVD), so that no branch
   sees a singular or degenerate input. The solve is with A itself, not A^T:
   it factors the same matrix as the forward's LU, so a zero pivot there is
   one here and its det is exactly 0 (LU of A^T can differ: OpenBLAS's armv8
   kernels gave an exact zero pivot for one and a rounding residue for the
   other) */
RULE(linalg_det)
{
    RULE_LOCALS;
    ember_tensor *A = IN(0), *d = OUT(0), *o = NULL;
    if (!have(s, A, d)) return;
    int64_t sz = in[nd - 1], sh[EMBER_MAX_DIMS];
    memcpy(sh, in, sizeof sh);
    sh[nd - 1] = sh[nd - 2] = 1;
    ember_tensor *I = eye_like(s, sz, A);
    ember_tensor *zero = reshape(s, t_eq(s, d, num(s, 0)), nd, sh);
    ember_tensor *gd = reshape(s, t_mul(s, g, d), nd, sh);
    ember_tensor *an = expand(s, where3(s, zero, I, A), nd, in);
    ember_tensor *gn = NULL;
    if (OK(s) && an) gn = transpose_last(s, keep(s, ember_linalg_solve(an, expand(s, t_mul(s, gd, I), nd, in), &o), &o));
    if (!OK(s) || count_zeros(d) == 0) {
        give(s, &gi[0], gn);
        return;
    }
    ember_tensor *as_ = expand(s, where3(s, zero, A, const_matrix(s, sz, sz, 2, A)), nd, in);
    ember_tensor *u = NULL, *sv = NULL, *vh = NULL, *su = NULL, *lu = NULL, *sw = NULL, *lw = NULL;
    if (!OK(s) || !as_) return;
    if ((s->rc = ember_linalg_svd(as_, &u, &sv, &vh)) < 0) return;
    keep(s, 0, &u), keep(s, 0, &sv), keep(s, 0, &vh);
    if (!OK(s)) return;
    if ((s->rc = ember_linalg_slogdet(u, &su, &lu)) < 0) return;
    keep(s, 0, &su), keep(s, 0, &lu);
    if (!OK(s)) return;
    if ((s->rc = ember_linalg_slogdet(vh, &sw, &lw)) < 0) return;
    keep(s, 0, &sw), keep(s, 0, &lw);
    /* row i of M: S with S_i made 1; the product of its row by cumprod */
    ember_tensor *M = t_add(s, t_mul(s, unsqueeze_at(s, sv, nd - 2), t_sub(s, num(s, 1), I)), I);
    ember_tensor *p = slice(s, t_cumprod(s, M, nd - 1), nd - 1, sz - 1, 1);   /* (..., n, 1) */
    ember_tensor *coef = t_mul(s, reshape(s, t_mul(s, g, t_mul(s, su, sw)), nd, sh), transpose_last(s, p));
    ember_tensor *gsing = t_matmul(s, t_mul(s, u, coef), vh);
    give(s, &gi[0], where3(s, zero, gsing, gn));
}

/* the triangle (kind of const_matrix) of the last two dims of x */
static ember_tensor *tri(arena *s, ember_tensor *x, int kind)
{
    if (!OK(s) || !x) return NULL;
    int nd = ember_tensor_ndim(x);
    const int64_t *sh = ember_tensor_shape(x);
    return t_mul(s, x, const_matrix(s, sh[nd - 2], sh[nd - 1], kind, x));
}

/* X with A X = B (left) or X A = B for the triangular A */
static ember_tensor *tri_solve(arena *s, ember_tensor *a, ember_tensor *b, bool upper, bool unit, bool left)
{
    ember_tensor *o = NULL;
    if (!have(s, a, b)) return NULL;
    if (left) return keep(s, ember_linalg_solve_triangular(a, b, upper, unit, &o), &o);
    ember_tensor *at_ = transpose_last(s, a), *bt = transpose_last(s, b);
    if (!have(s, at_, bt)) return NULL;
    return transpose_last(s, keep(s, ember_linalg_solve_triangular(at_, bt, !upper, unit, &o), &o));
}

/* the permutation matrices P (..., m, m) with A = P L U of getrf's 1-based
   pivots (..., k): row j of L U is row perm[j] of A */
static ember_tensor *pivot_matrix(arena *s, ember_tensor *piv, int64_t m, const ember_tensor *like)
{
    ember_tensor *o = NULL, *c = NULL;
    if (!OK(s) || !piv) return NULL;
    int nd = ember_tensor_ndim(piv);
    int64_t sh[EMBER_MAX_DIMS], k = ember_tensor_shape(piv)[nd - 1];
    memcpy(sh, ember_tensor_shape(piv), (size_t)nd * sizeof *sh);
    sh[nd - 1] = m;
    sh[nd] = m;
    if (ember_tensor_device(piv) != EMBER_CPU) piv = keep(s, ember_to_device(piv, EMBER_CPU, &c), &c);
    if (piv && !ember_tensor_is_contiguous(piv)) piv = keep(s, ember_contiguous(piv, &c), &c);
    ember_tensor *p = piv ? keep(s, ember_full(nd + 1, sh, 0, EMBER_FLOAT64, EMBER_CPU, &o), &o) : NULL;
    int64_t *perm = p ? malloc((size_t)(m ? m : 1) * sizeof *perm) : NULL;
    if (p && !perm) s->rc = ember__fail(EMBER_ERR_OOM, "backward: out of memory");
    if (!OK(s) || !p) {
        free(perm);
        return NULL;
    }
    int64_t B = ember_tensor_numel(piv) / (k ? k : 1);
    if (k == 0) B = ember_tensor_numel(p) / (m ? m * m : 1);
    const int32_t *pv = ember_tensor_data(piv);
    double *pp = (double *)ember__ptr(p);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t j = 0; j < m; j++) perm[j] = j;
        for (int64_t i = 0; i < k; i++) {
            int64_t r = pv[b * k + i] - 1, t = perm[i];
            if (r < 0 || r >= m) continue;
            perm[i] = perm[r];
            perm[r] = t;
        }
        for (int64_t j = 0; j < m; j++) pp[b * m * m + perm[j] * m + j] = 1;
    }
    free(perm);
    ember_tensor *d = NULL;
    p = keep(s, ember_to_dtype(p, ember_tensor_dtype(like), &d), &d);
    if (p && ember_tensor_device(like) != EMBER_CPU) {
        ember_tensor *dv = NULL;
        p = keep(s, ember_to_device(p, ember_tensor_device(like), &dv), &dv);
    }
    return p;
}

/* PyTorch's linalg_lu_backward on the packed LU, with L = tril(LU, -1) + I
   (m x k), U = triu(LU) (k x n), gL and gU the same parts of g:
   m = n: P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T;
   m < n: P L^-T (tril(L^T gL - gU U^T, -1) U1^-T + triu(gU1), gU2);
   m > n: P ((L1^-T triu(gU U^T - L^T gL) + gL1) ; gL2) U^-T */
RULE(linalg_lu)
{
    RULE_LOCALS;
    ember_tensor *LU = OUT(0), *piv = OUT(1), *gLU = r->go[0];
    if (!have(s, LU, piv) || !have(s, gLU, gLU)) return;
    int64_t m = in[nd - 2], sz = in[nd - 1], k = m < sz ? m : sz;
    ember_tensor *L = t_add(s, slice(s, tri(s, LU, 1), nd - 1, 0, k), const_matrix(s, m, k, 4, LU));
    ember_tensor *U = slice(s, tri(s, LU, 3), nd - 2, 0, k);
    ember_tensor *gL = slice(s, tri(s, gLU, 1), nd - 1, 0, k), *gU = slice(s, tri(s, gLU, 3), nd - 2, 0, k);
    ember_tensor *Lt = transpose_last(s, L), *Ut = transpose_last(s, U), *x;
    if (m == sz) {
        x = t_add(s, tri(s, t_matmul(s, Lt, gL), 1), tri(s, t_matmul(s, gU, Ut), 3));
        x = tri_solve(s, Ut, x, false, false, false);
        x = tri_solve(s, Lt, x, true, true, true);
    } else if (m < sz) {
        x = tri(s, t_sub(s, t_matmul(s, Lt, gL), t_matmul(s, gU, Ut)), 1);
        x = tri_solve(s, transpose_last(s, slice(s, U, nd - 1, 0, k)), x, false, false, false);
        ember_tensor *parts[2] = {t_add(s, x, slice(s, gU, nd - 1, 0, k)), slice(s, gU, nd - 1, k, sz - k)};
        if (!have(s, parts[0], parts[1])) return;
        x = tri_solve(s, Lt, cat_of(s, 2, parts, nd - 1), true, true, true);
    } else {
        x = tri(s, t_sub(s, t_matmul(s, gU, Ut), t_matmul(s, Lt, gL)), 3);
        x = tri_solve(s, transpose_last(s, slice(s, L, nd - 2, 0, k)), x, true, true, true);
        ember_tensor *parts[2] = {t_add(s, x, slice(s, gL, nd - 2, 0, k)), slice(s, gL, nd - 2, k, m - k)};
        if (!have(s, parts[0], parts[1])) return;
        x = tri_solve(s, Ut, cat_of(s, 2, parts, nd - 2), false, false, false);
    }
    give(s, &gi[0], t_matmul(s, pivot_matrix(s, piv, m, LU), x));
}
