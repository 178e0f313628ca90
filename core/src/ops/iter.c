/* iter.c: the CPU elementwise iterator shared by every elementwise kernel, the
   layout of the results it writes, and the strided copy with dtype conversion
   built on it. */
#include "ops.h"
#include "../backend.h"

#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_STREAM 1
#endif

/* ------------------------------------------------------------------ streaming stores
   The last-level cache of one core's complex on common x86-64 parts (Zen's
   32 MiB; Intel's desktop parts 24-36 MiB). A fixed figure, not a query:
   glibc reports a VM host's whole L3 (384 MiB on this project's AMD EPYC
   guest), and the bits of a result never depend on it. A working set of
   the L3's size still stays in the caches (the cores' L2s, 1-2 MiB each, hold
   some of it), so streaming starts an eighth past it: a 2048 x 2048 add of a
   row (32 MiB and a row) streamed took 0.207 ms on two threads in the quiet
   sweep of stop 29 where PyTorch's cached stores took 0.169. */
#define STREAM_BYTES ((int64_t)32 << 20)

bool ember__stream_worth(int64_t bytes) { return bytes > STREAM_BYTES + STREAM_BYTES / 8; }

#ifdef HAVE_STREAM
__attribute__((target("avx512f"))) static void stream_copy_512(char *dst, const char *buf, size_t nb)
{
    size_t head = (64 - ((uintptr_t)dst & 63)) & 63;
    if (head > nb) head = nb;
    memcpy(dst, buf, head);
    size_t i = head;
    for (; i + 64 <= nb; i += 64)
        _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512((const void *)(buf + i)));
    memcpy(dst + i, buf + i, nb - i);
}
#endif

void ember__stream_copy(char *dst, const char *buf, size_t nb)
{
#ifdef HAVE_STREAM
    if (__builtin_cpu_supports("avx512f")) {   /* a line a store: 10-20% faster than four 16-byte ones here */
        stream_copy_512(dst, buf, nb);
        return;
    }
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > nb) head = nb;
    memcpy(dst, buf, head);
    size_t i = head;
    for (; i + 16 <= nb; i += 16) _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(buf + i)));
    memcpy(dst + i, buf + i, nb - i);
#else
    memcpy(dst, buf, nb);
#endif
}

void ember__stream_fence(void)
{
#ifdef HAVE_STREAM
    _mm_sfence();
#endif
}

/* ------------------------------------------------------------------ dim order
   PyTorch's TensorIterator rule (reorder_dimensions): dims sorted by stride,
   operand by operand, the first operand that tells two dims apart deciding
   (a 0 stride tells nothing; equal strides put the smaller dim first). The
   result, perm, lists the dims fastest first. st[k][d] are operand k's strides
   over the broadcast shape (0 on a broadcast dim). */
static int order_cmp(int n, const int64_t (*st)[EMBER_MAX_DIMS], const int64_t *shape, int d0, int d1)
{
    for (int k = 0; k < n; k++) {
        int64_t s0 = st[k][d0], s1 = st[k][d1];
        if (s0 == 0 || s1 == 0) continue;
        if (s0 < s1) return -1;
        if (s0 > s1) return 1;
        if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
}

static void order_dims(int nd, int n, const int64_t (*st)[EMBER_MAX_DIMS], const int64_t *shape, int *perm)
{
    for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
    for (int i = 1; i < nd; i++) {   /* insertion sort that stops at an undecided pair, as PyTorch's */
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int c = order_cmp(n, st, shape, perm[d0], perm[d1]);
            if (c > 0) {
                int t = perm[d0];
                perm[d0] = perm[d1];
                perm[d1] = t;
                d1 = d0;
            } else if (c < 0) {
                break;
            }
        }
    }
}

/* t's strides over the broadcast shape, in elements (PyTorch's compute_strides:
   0 where t has size 1 and the shape does not, and on leading dims t lacks) */
static void broadcast_strides(const ember_tensor *t, int nd, const int64_t *shape, int64_t *st, int64_t scale)
{
    for (int d = 0; d < nd; d++) {
        int td = d - (nd - t->ndim);
        st[d] = td < 0 || (t->shape[td] == 1 && shape[d] != 1) ? 0 : t->strides[td] * scale;
    }
}

static bool same_shape(const ember_tensor *t, int nd, const int64_t *shape)
{
    if (t->ndim != nd) return false;
    for (int d = 0; d < nd; d++)
        if (t->shape[d] != shape[d]) return false;
    return true;
}

/* PyTorch's is_non_overlapping_and_dense: sorted by stride (dims of size < 2
   last), each stride is the product of the sizes before it */
bool ember__dense(const ember_tensor *t)
{
    if (t->is_contiguous) return true;
    int nd = t->ndim, perm[EMBER_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    for (int i = 1; i < nd; i++)
        for (int j = i; j > 0; j--) {
            int a = perm[j - 1], b = perm[j];
            bool after = t->shape[a] < 2 ? t->shape[b] >= 2 : t->shape[b] >= 2 && t->strides[b] < t->strides[a];
            if (!after) break;
            perm[j - 1] = b;
            perm[j] = a;
        }
    int64_t need = 1;
    for (int i = 0; i < nd; i++) {
        int64_t sz = t->shape[perm[i]];
        if (sz < 2) return true;
        if (t->strides[perm[i]] != need) return false;
        need *= sz;
    }
    return true;
}

void ember__result_strides(int nd, const int64_t *shape, int n, ember_tensor *const *ins, int64_t *strides)
{
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) numel *= shape[d];
    ember__contiguous_strides(nd, shape, strides);
    if (numel == 0 || nd < 2) return;
    /* the fast setups: operands of the output's shape, all contiguous, all
       channels-last, or all dense with one set of strides (the last input's) */
    bool same = true, contig = true, cl = true, dense = true;
    for (int k = 0; k < n; k++) {
        const ember_tensor *t = ins[k];
        same = same && same_shape(t, nd, shape);
        contig = contig && t->is_contiguous;
        cl = cl && ember__nhwc_dense(t)   /* nhwc.c */;
        dense = dense && ember__dense(t);
    }
    if (same) {
        if (contig) return;
        if (cl) {
            strides[1] = 1;
            strides[3] = shape[1];
            strides[2] = strides[3] * shape[3];
            strides[0] = strides[2] * shape[2];
            return;
        }
        bool equal = dense;
        for (int k = 0; equal && k + 1 < n; k++)
            equal = memcmp(ins[k]->strides, ins[n - 1]->strides, (size_t)nd * sizeof *strides) == 0;
        if (equal) {
            memcpy(strides, ins[n - 1]->strides, (size_t)nd * sizeof *strides);
            return;
        }
    }
    /* the general rule: dense in the order of the inputs' strides */
    int64_t st[ITER_MAX][EMBER_MAX_DIMS];
    int perm[EMBER_MAX_DIMS];
    for (int k = 0; k < n; k++) broadcast_strides(ins[k], nd, shape, st[k], 1);
    order_dims(nd, n, (const int64_t (*)[EMBER_MAX_DIMS])st, shape, perm);
    int64_t s = 1;
    for (int i = 0; i < nd; i++) {
        strides[perm[i]] = s;
        s *= shape[perm[i]];
    }
}

int ember__new_result(int nd, const int64_t *shape, int dtype, int n, ember_tensor *const *ins, ember_tensor **out)
{
    EMBER_TRY(ember__new(nd, shape, dtype, EMBER_CPU, out));
    ember__result_strides(nd, shape, n, ins, (*out)->strides);
    ember__refresh_geometry(*out);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ the iterator */
void ember__iter_init(ember_iter *it, int n, ember_tensor *const *ts)
{
    const ember_tensor *out = ts[0];
    int nd = out->ndim;
    it->ntensors = n;
    it->out_size = ember_dtype_size(out->dtype);
    it->numel = out->numel;
    int64_t st[ITER_MAX][EMBER_MAX_DIMS], shape[EMBER_MAX_DIMS] = {0};
    for (int k = 0; k < n; k++) {
        it->ptr[k] = ember__ptr(ts[k]);
        broadcast_strides(ts[k], nd, out->shape, st[k], ember_dtype_size(ts[k]->dtype));
    }
    /* drop size-1 dims, order the rest by stride (the output's first, then the
       inputs'), then merge neighbours that are contiguous for every operand */
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (out->shape[d] == 1) continue;
        shape[m] = out->shape[d];
        for (int k = 0; k < n; k++) st[k][m] = st[k][d];
        m++;
    }
    int perm[EMBER_MAX_DIMS];
    order_dims(m, n, (const int64_t (*)[EMBER_MAX_DIMS])st, shape, perm);
    int w = 0;
    for (int i = m - 1; i >= 0; i--) {   /* slowest first: the innermost dim is it->ndim - 1 */
        int d = perm[i];
        if (w > 0) {
            bool merge = true;
            for (int k = 0; k < n; k++)
                if (it->strides[k][w - 1] != st[k][d] * shape[d]) merge = false;
            if (merge) {
                it->shape[w - 1] *= shape[d];
                for (int k = 0; k < n; k++) it->strides[k][w - 1] = st[k][d];
                continue;
            }
        }
        it->shape[w] = shape[d];
        for (int k = 0; k < n; k++) it->strides[k][w] = st[k][d];
        w++;
    }
    if (w == 0) {   /* a single element */
        it->shape[0] = 1;
        for (int k = 0; k < n; k++) it->strides[k][0] = 0;
        w = 1;
    }
    it->ndim = w;
}

typedef struct {
    const ember_iter *it;
    ember__loop_fn fn;
    const void *ctx;
    bool stream;
} range_ctx;

/* n elements of fn with the output (its inner stride the element size)
   written to an L1 buffer a piece at a time and streamed from there: the
   same fn on the same values, so the same bits */
static void stream_run(const range_ctx *rc, char *const *p, const int64_t *inner, int64_t n)
{
    enum { PIECE = 4096 };
    _Alignas(64) char buf[PIECE];
    int nt = rc->it->ntensors;
    int64_t es = inner[0], step = PIECE / es;
    char *q[ITER_MAX];
    for (int k = 0; k < nt; k++) q[k] = p[k];
    for (int64_t j = 0; j < n; j += step) {
        int64_t m = n - j < step ? n - j : step;
        char *o = q[0];
        q[0] = buf;
        rc->fn(q, inner, m, rc->ctx);
        ember__stream_copy(o, buf, (size_t)(m * es));
        q[0] = o;
        for (int k = 0; k < nt; k++) q[k] += m * inner[k];
    }
}

static void iter_range(void *vctx, int64_t b, int64_t e)
{
    const range_ctx *rc = vctx;
    const ember_iter *it = rc->it;
    int nd = it->ndim, nt = it->ntensors;
    int64_t idx[EMBER_MAX_DIMS], rem = b;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    char *p[ITER_MAX];
    int64_t inner[ITER_MAX];
    for (int k = 0; k < nt; k++) {
        p[k] = it->ptr[k];
        for (int d = 0; d < nd; d++) p[k] += idx[d] * it->strides[k][d];
        inner[k] = it->strides[k][nd - 1];
    }
    while (b < e) {
        int64_t n = it->shape[nd - 1] - idx[nd - 1];
        if (n > e - b) n = e - b;
        if (rc->stream) stream_run(rc, p, inner, n);
        else rc->fn(p, inner, n, rc->ctx);
        b += n;
        idx[nd - 1] += n;
        for (int k = 0; k < nt; k++) p[k] += n * inner[k];
        for (int d = nd - 1; d > 0 && idx[d] == it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < nt; k++)
                p[k] += it->strides[k][d - 1] - it->shape[d] * it->strides[k][d];
        }
    }
    if (rc->stream) ember__stream_fence();   /* before the join: the stores are weakly ordered */
}

void ember__iter_run(ember_iter *it, ember__loop_fn fn, const void *ctx)
{
    if (it->numel == 0) return;
    /* an output of unit inner stride (no gaps between its elements there:
       the buffer is copied whole) streamed past the cache when the
       operands' bytes pass it: 2048 x 2048 adds 5-25% faster, one thread.
       Each operand counts its own elements (a broadcast row its row, not the
       output's count) times its smallest stride, up to a line. An output in
       place of an input is not streamed: its lines are in the cache already. */
    int nd = it->ndim;
    int64_t s0 = it->strides[0][nd - 1], touched = 0;
    bool in_place = false;
    for (int k = 0; k < it->ntensors; k++) {
        int64_t elems = 1, unit = 64;   /* at most a line an element */
        for (int d = 0; d < nd; d++) {
            int64_t sk = it->strides[k][d] < 0 ? -it->strides[k][d] : it->strides[k][d];
            if (sk == 0) continue;   /* broadcast along d */
            elems *= it->shape[d];
            unit = sk < unit ? sk : unit;
        }
        touched += elems * unit;
        in_place = in_place || (k > 0 && it->ptr[k] == it->ptr[0]);
    }
    range_ctx rc = {it, fn, ctx, s0 == it->out_size && !in_place && ember__stream_worth(touched)};
    ember__parallel_for(it->numel, EMBER_PARALLEL_GRAIN, iter_range, &rc);
}

typedef struct {
    int ddt, sdt;
} conv_ctx;

/* n copies of the es bytes at v into dst: a broadcast made contiguous (the
   gradient of a sum reaches most adjoints this way), at the vector width
   where the strided move went one element at a time */
EMBER_SIMD static void fill_run(char *restrict dst, const char *restrict v, int64_t n, int es)
{
    switch (es) {
    case 4: {
        uint32_t x;
        memcpy(&x, v, 4);
        for (int64_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = x;
        return;
    }
    case 8: {
        uint64_t x;
        memcpy(&x, v, 8);
        for (int64_t i = 0; i < n; i++) ((uint64_t *)dst)[i] = x;
        return;
    }
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * es, v, (size_t)es);
        return;
    }
}

static void copy_loop(char **p, const int64_t *s, int64_t n, const void *vctx)
{
    const conv_ctx *c = vctx;
    int ds = ember_dtype_size(c->ddt), ss = ember_dtype_size(c->sdt);
    if (c->ddt == c->sdt && s[1] == 0 && s[0] == ds && (ds == 4 || ds == 8)) {
        fill_run(p[0], p[1], n, ds);
        return;
    }
    if (s[0] % ds == 0 && s[1] % ss == 0) {
        ember__convert(p[0], c->ddt, s[0] / ds, p[1], c->sdt, s[1] / ss, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)   /* unaligned strides cannot happen, but stay correct */
        ember__store(p[0] + i * s[0], c->ddt, ember__load(p[1] + i * s[1], c->sdt));
}

/* A copy whose source walks its innermost dim with a large stride while the
   destination is contiguous there (a transpose made contiguous) touches a new
   source cache line per element. It goes by 16 x 16 tiles instead, each tile
   reading its source lines whole while they are in L1 (16, not 32: fewer
   cache-set conflicts when rows lie a power of two apart). */
#define TILE 16

typedef struct {
    const ember_iter *it;
    int64_t row_tiles;   /* tiles down the last-but-one dim */
    int es;
} tile_ctx;

#define TILE_COPY(T)                                                                       \
    for (int64_t i = i0; i < i1; i++)                                                      \
        for (int64_t j = j0; j < j1; j++)                                                  \
            *(T *)(d + i * dr + j * dc) = *(const T *)(s + i * sr + j * sc)

static void tile_range(void *vctx, int64_t b, int64_t e)
{
    const tile_ctx *c = vctx;
    const ember_iter *it = c->it;
    const int nd = it->ndim;
    const int64_t R = it->shape[nd - 2], Cn = it->shape[nd - 1];
    const int64_t dr = it->strides[0][nd - 2], dc = it->strides[0][nd - 1];
    const int64_t sr = it->strides[1][nd - 2], sc = it->strides[1][nd - 1];
    for (int64_t t = b; t < e; t++) {
        int64_t outer = t / c->row_tiles, i0 = (t % c->row_tiles) * TILE;
        int64_t i1 = i0 + TILE < R ? i0 + TILE : R;
        char *d = it->ptr[0];
        const char *s = it->ptr[1];
        for (int k = nd - 3; k >= 0; k--) {   /* the outer dims' offsets */
            int64_t idx = outer % it->shape[k];
            outer /= it->shape[k];
            d += idx * it->strides[0][k];
            s += idx * it->strides[1][k];
        }
        for (int64_t j0 = 0; j0 < Cn; j0 += TILE) {
            int64_t j1 = j0 + TILE < Cn ? j0 + TILE : Cn;
            switch (c->es) {
            case 1: TILE_COPY(uint8_t); break;
            case 2: TILE_COPY(uint16_t); break;
            case 4: TILE_COPY(uint32_t); break;
            default: TILE_COPY(uint64_t); break;
            }
        }
    }
}

static bool tiled_copy(const ember_iter *it, int es)
{
    int nd = it->ndim;
    if (nd < 2 || it->strides[0][nd - 1] != es) return false;
    int64_t sc = it->strides[1][nd - 1];
    if (sc >= -64 && sc <= 64) return false;   /* the source's inner walk stays within a line or two */
    if (it->shape[nd - 1] < TILE / 2 || it->shape[nd - 2] < TILE / 2) return false;
    tile_ctx c = {it, (it->shape[nd - 2] + TILE - 1) / TILE, es};
    int64_t tasks = it->numel / (it->shape[nd - 2] * it->shape[nd - 1]) * c.row_tiles;
    int64_t per_task = TILE * it->shape[nd - 1];
    int64_t grain = EMBER_PARALLEL_GRAIN / per_task;
    ember__parallel_for(tasks, grain < 1 ? 1 : grain, tile_range, &c);
    return true;
}

int ember__copy_kernel(ember_tensor *dst, const ember_tensor *src)
{
    if (dst->numel == 0) return EMBER_OK;
    if (dst->is_contiguous && src->is_contiguous && dst->dtype == src->dtype &&
        dst->numel == src->numel && dst->ndim == src->ndim) {
        memmove(ember__ptr(dst), ember__ptr(src), (size_t)(dst->numel * ember_dtype_size(dst->dtype)));
        return EMBER_OK;
    }
    ember_iter it;
    ember_tensor *ts[2] = {dst, (ember_tensor *)src};
    ember__iter_init(&it, 2, ts);
    int es = ember_dtype_size(dst->dtype);
    if (dst->dtype == src->dtype && (es == 1 || es == 2 || es == 4 || es == 8) && tiled_copy(&it, es))
        return EMBER_OK;
    conv_ctx c = {dst->dtype, src->dtype};
    ember__iter_run(&it, copy_loop, &c);
    return EMBER_OK;
}

int ember__as_dtype(ember_tensor *t, int dtype, ember_tensor **out)
{
    if (t->dtype == dtype) {
        ember_tensor_retain(t);
        *out = t;
        return EMBER_OK;
    }
    ember_attrs at = {{dtype}, {0}};
    return ember__run_nograd(EMBER_OP_TO_DTYPE, 1, &t, &at, out);
}

int ember__contiguous_as(ember_tensor *t, int dtype, ember_tensor **out)
{
    if (t->dtype == dtype && t->is_contiguous) {
        ember_tensor_retain(t);
        *out = t;
        return EMBER_OK;
    }
    ember_tensor *c = NULL;
    EMBER_TRY(ember__new(t->ndim, t->shape, dtype, t->storage->device, &c));
    int rc = ember__copy_into(c, t);
    if (rc < 0) {
        ember_tensor_release(c);
        return rc;
    }
    *out = c;
    return EMBER_OK;
}
