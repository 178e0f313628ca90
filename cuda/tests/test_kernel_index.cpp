/* test_kernel_index.cpp: the arithmetic of the index and dim-reduction
   kernels (kernels/index.h, kernels/reduce_dim.h), compiled for the host
   and checked against libember's CPU results, so it is tested on machines
   without a GPU. The walks are iter.cpp's (ecu_index_init, ecu_reduce_init)
   over strided operands of every dtype. Checked bit for bit: index_select,
   gather, scatter_add and index_add along each dim with repeated int32 and
   int64 indices (the host adds in the walk's order, which is the CPU's; on
   the device the float adds are atomic and their order is not fixed); the
   first index out of range; max/min along each dim with values and indices,
   argmax and argmin (ties, two NaNs), each slice split over three "threads"
   whose candidates are combined. Within rounding: var, logsumexp and norm
   (p = 1, 2, 3, 0.5, inf) over one, two and all dims, with a NaN and a row
   of -inf; the two-pass sum, mean, max, min, var, norm and logsumexp of few
   long slices (chunks of 256 threads, then their partials); lstm_cell and gru_cell (float64 bit
   for bit, float32 within the ulps of the CPU's polynomial tanh and exp). What it cannot check is the device's atomics and shared memory. */
#include "kernels/cells.h"
#include "kernels/reduce_dim.h"
#include "tests/kernel_test.h"

#include <math.h>
#include <vector>

using namespace ember_cuda;

enum { THREADS = 3 };   /* the simulated block: each slice split in three */

/* a {4, 3, 5}-like operand: values laid out for the reversed shape, then
   transposed (dims 1 and 3), so every walk meets strides */
static ember_tensor *strided(const std::vector<double> &v, int dt, const int64_t *shape)
{
    int64_t rev[3] = {shape[2], shape[1], shape[0]};
    ember_tensor *c, *t;
    OK(ember_from_data(v.data(), EMBER_FLOAT64, 3, rev, dt, EMBER_CPU, &c));
    OK(ember_transpose(c, 0, 2, &t));
    ember_tensor_release(c);
    return t;
}

static std::vector<double> values(int dt, int64_t n, int seed)
{
    std::vector<double> v((size_t)n);
    for (int64_t i = 0; i < n; i++) v[(size_t)i] = (double)((i * 29 + seed) % 31) * 0.75 - 9;
    if (dt == EMBER_UINT8 || dt == EMBER_BOOL)
        for (double &x : v) x = fabs(x);
    return v;
}

static ember_tensor *index_tensor(int idt, int nd, const int64_t *shape, int64_t size, int seed)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    std::vector<double> v((size_t)n);
    for (int64_t i = 0; i < n; i++) v[(size_t)i] = (double)((i * 7 + seed) % size);
    ember_tensor *t;
    OK(ember_from_data(v.data(), EMBER_FLOAT64, nd, shape, idt, EMBER_CPU, &t));
    return t;
}

static ember_tensor *like(const ember_tensor *t, int dt)
{
    ember_tensor *r;
    OK(ember_full(ember_tensor_ndim(t), ember_tensor_shape(t), 0, dt, EMBER_CPU, &r));
    return r;
}

/* mine against the CPU's within rtol (0: exactly; NaN equals NaN) */
static void agree(ember_tensor *cpu, ember_tensor *mine, double rtol, const char *what, int dt, int dim)
{
    ember_tensor *c = converted(cpu, EMBER_FLOAT64), *m = converted(mine, EMBER_FLOAT64);
    const double *pc = (const double *)ember_tensor_data(c), *pm = (const double *)ember_tensor_data(m);
    CHECK(ember_tensor_numel(cpu) == ember_tensor_numel(mine), "%s: sizes", what);
    for (int64_t i = 0; i < ember_tensor_numel(cpu); i++)
        CHECK((pc[i] != pc[i] && pm[i] != pm[i]) || pc[i] == pm[i] || fabs(pc[i] - pm[i]) <= rtol * (1 + fabs(pc[i])),
              "%s of %s along dim %d [%lld]: cpu %.17g, kernel %.17g", what, ember_dtype_name(dt), dim, (long long)i,
              pc[i], pm[i]);
    for (ember_tensor *t : {c, m}) ember_tensor_release(t);
}

/* ------------------------------------------------------------------ gathers and scatters */
static const int64_t SHAPE[3] = {4, 3, 5};

static void walk(const ecu_index &x, bool scatter)
{
    for (int64_t i = 0; i < x.it.numel; i++) {
        if (scatter) scatter_add_at(x, i);
        else gather_at(x, (int32_t)i);   /* the 32-bit index path */
    }
}

static void check_gathers(int dt, int idt, int dim)
{
    ember_tensor *a = strided(values(dt, 60, 3), dt, SHAPE), *cpu, *mine;
    /* index_select: a 1-D index of 6 with repeats */
    int64_t n = 6;
    ember_tensor *ix = index_tensor(idt, 1, &n, SHAPE[dim], dim);
    OK(ember_index_select(a, dim, ix, &cpu));
    mine = like(cpu, dt);
    ecu_index x;
    ecu_index_init(&x, ember_tensor_shape(cpu), mine, a, ix, dim, false, false);
    walk(x, false);
    agree(cpu, mine, 0, "index_select", dt, dim);
    for (ember_tensor *t : {ix, cpu, mine}) ember_tensor_release(t);
    /* gather: an index longer along dim and shorter along the others */
    int64_t gs[3];
    for (int d = 0; d < 3; d++) gs[d] = d == dim ? 6 : SHAPE[d] > 1 ? SHAPE[d] - 1 : 1;
    ix = index_tensor(idt, 3, gs, SHAPE[dim], dim + 1);
    OK(ember_gather(a, dim, ix, &cpu));
    mine = like(cpu, dt);
    ecu_index_init(&x, gs, mine, a, ix, dim, true, false);
    walk(x, false);
    agree(cpu, mine, 0, "gather", dt, dim);
    for (ember_tensor *t : {ix, cpu, mine, a}) ember_tensor_release(t);
}

static void check_scatters(int dt, int idt, int dim)
{
    int64_t ss[3];
    for (int d = 0; d < 3; d++) ss[d] = d == dim ? 7 : SHAPE[d];
    ember_tensor *src = strided(values(dt, 7 * 60 / SHAPE[dim], 5), dt, ss), *cpu, *mine;
    /* index_add: 7 source rows into SHAPE[dim] result rows, repeated */
    int64_t n = 7;
    ember_tensor *ix = index_tensor(idt, 1, &n, SHAPE[dim], dim);
    OK(ember_index_add(3, SHAPE, dim, ix, src, &cpu));
    mine = like(cpu, dt);
    ecu_index x;
    ecu_index_init(&x, ss, mine, src, ix, dim, false, true);
    walk(x, true);
    agree(cpu, mine, 0, "index_add", dt, dim);
    for (ember_tensor *t : {ix, cpu, mine}) ember_tensor_release(t);
    /* scatter_add: an index of the source's shape */
    ix = index_tensor(idt, 3, ss, SHAPE[dim], dim + 2);
    OK(ember_scatter_add(3, SHAPE, dim, ix, src, &cpu));
    mine = like(cpu, dt);
    ecu_index_init(&x, ss, mine, src, ix, dim, true, true);
    walk(x, true);
    agree(cpu, mine, 0, "scatter_add", dt, dim);
    for (ember_tensor *t : {ix, cpu, mine, src}) ember_tensor_release(t);
}

/* the first index outside [0, size) in the index's order, as the CPU names it */
static void check_index_range(void)
{
    int64_t shape[2] = {3, 4};
    std::vector<double> v = {0, 1, 2, 3, 1, 7, 0, -1, 2, 9, 0, 0};
    for (int idt : {EMBER_INT32, EMBER_INT64}) {
        ember_tensor *c, *t;
        OK(ember_from_data(v.data(), EMBER_FLOAT64, 2, shape, idt, EMBER_CPU, &c));
        OK(ember_transpose(c, 0, 1, &t));   /* in t's order: 0, 1, 2, 1, 7, 9, 2, 0, 0, 3, -1, 0 */
        ecu_iter it;
        ecu_iter_init(&it, 1, &t);
        int64_t first = -1;
        for (int64_t i = it.numel - 1; i >= 0; i--)
            if (outside(it, i, 3)) first = i;
        CHECK(first == 4, "first index out of range: %lld, not 4", (long long)first);
        int64_t off[1];
        iter_offsets(it, first, off);
        CHECK(load<int64_t>(it.data[0] + off[0], idt) == 7, "the value there");
        bool any = false;
        for (int64_t i = 0; i < it.numel; i++) any = any || outside(it, i, INT64_MAX);
        CHECK(any, "-1 is outside [0, INT64_MAX]");
        for (ember_tensor *x : {c, t}) ember_tensor_release(x);
    }
}

/* ------------------------------------------------------------------ var, logsumexp, norm */
static void stat_one(const ecu_stat &s, int dt, int ndims, const int *dims, int keepdim, bool special)
{
    std::vector<double> v = values(dt, 60, 1);
    if (special) {
        v[7] = NAN;
        if (s.op == EMBER_OP_LOGSUMEXP) v[0] = v[20] = v[40] = -INFINITY;
    }
    ember_tensor *a = strided(v, dt, SHAPE), *cpu;
    unsigned mask = 0;
    for (int k = 0; k < ndims; k++) mask |= 1u << dims[k];
    switch (s.op) {
    case EMBER_OP_VAR: OK(ember_var(a, ndims, dims, keepdim, s.unbiased, &cpu)); break;
    case EMBER_OP_LOGSUMEXP: OK(ember_logsumexp(a, dims[0], keepdim, &cpu)); break;
    default: OK(ember_norm(a, s.p, ndims, dims, keepdim, &cpu)); break;
    }
    if (ndims == 0) mask = 7;
    ember_tensor *mine = like(cpu, ember_tensor_dtype(cpu));
    ecu_reduce r;
    ecu_reduce_init(&r, a, mask, mine, false);
    for (int64_t o = 0; o < r.outer.numel; o++) {
        double pass[2] = {0, 0}, c = 0;
        for (int k = 0; k < stat_passes(s); k++) {
            pass[k] = stat_identity(s, k);
            for (int64_t t = 0; t < THREADS; t++) pass[k] = stat_combine(s, k, pass[k], stat_slice(r, s, k, c, o, t, (int64_t)THREADS));
            c = stat_center(s, pass[0], r.len);
        }
        reduce_store(r, s.op, o, stat_finish(s, pass[0], pass[1], r.len));
    }
    int odt = ember_tensor_dtype(cpu);
    double rtol = odt == EMBER_FLOAT32 ? 2e-6 : odt == EMBER_FLOAT64 ? 1e-13 : 1e-2;
    agree(cpu, mine, rtol, s.op == EMBER_OP_VAR ? "var" : s.op == EMBER_OP_NORM ? "norm" : "logsumexp", dt,
          ndims ? dims[0] : -1);
    for (ember_tensor *t : {a, cpu, mine}) ember_tensor_release(t);
}

static void check_stats(void)
{
    const int one[1] = {1}, two[2] = {0, 2}, last[1] = {2};
    for (int dt : {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_FLOAT16, EMBER_BFLOAT16, EMBER_INT32, EMBER_UINT8}) {
        for (int special = 0; special < 2; special++) {
            if (special && !is_float_dtype(dt)) continue;
            for (int keepdim = 0; keepdim < 2; keepdim++) {
                for (int unbiased = 0; unbiased < 2; unbiased++) {
                    ecu_stat var = {EMBER_OP_VAR, unbiased, 0};
                    stat_one(var, dt, 0, NULL, keepdim, special);
                    stat_one(var, dt, 1, one, keepdim, special);
                    stat_one(var, dt, 2, two, keepdim, special);
                }
                ecu_stat lse = {EMBER_OP_LOGSUMEXP, 0, 0};
                stat_one(lse, dt, 1, one, keepdim, special);
                stat_one(lse, dt, 1, last, keepdim, special);
                for (double p : {1.0, 2.0, 3.0, 0.5, (double)INFINITY}) {
                    ecu_stat norm = {EMBER_OP_NORM, 0, p};
                    stat_one(norm, dt, 0, NULL, keepdim, special);
                    stat_one(norm, dt, 2, two, keepdim, special);
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ max/min along a dim, argmax, argmin */
template <class Acc> static void arg_walk(const ecu_reduce &r, int sign, char *values, int esize)
{
    for (int64_t o = 0; o < r.outer.numel; o++) {
        ecu_arg<Acc> best = {Acc(0), -1};
        for (int64_t t = 0; t < THREADS; t++) best = arg_combine(sign, best, arg_slice<Acc>(r, sign, o, t, (int64_t)THREADS));
        arg_store(r, o, best.i, values, esize);
    }
}

static void arg_one(int op, int dt, int dim, int keepdim)
{
    std::vector<double> v = values(dt, 60, 2);
    if (is_float_dtype(dt)) v[31] = v[13] = NAN;
    ember_tensor *a = strided(v, dt, SHAPE), *vals = NULL, *idx;
    bool with_values = op == EMBER_OP_MAX_DIM || op == EMBER_OP_MIN_DIM;
    switch (op) {
    case EMBER_OP_MAX_DIM: OK(ember_max_dim(a, dim, keepdim, &vals, &idx)); break;
    case EMBER_OP_MIN_DIM: OK(ember_min_dim(a, dim, keepdim, &vals, &idx)); break;
    case EMBER_OP_ARGMAX: OK(ember_argmax(a, dim, keepdim, &idx)); break;
    default: OK(ember_argmin(a, dim, keepdim, &idx)); break;
    }
    ember_tensor *mine = like(idx, EMBER_INT64), *mvals = with_values ? like(vals, dt) : NULL;
    ecu_reduce r;
    ecu_reduce_init(&r, a, dim < 0 ? 7u : 1u << dim, mine, false);
    int sign = op == EMBER_OP_MAX_DIM || op == EMBER_OP_ARGMAX ? 1 : -1;
    char *vp = mvals ? (char *)ember_tensor_data(mvals) : NULL;
    if (reduce_compute(EMBER_OP_AMAX_ALL, dt) == ECU_INT64) arg_walk<int64_t>(r, sign, vp, ember_dtype_size(dt));
    else arg_walk<double>(r, sign, vp, ember_dtype_size(dt));
    agree(idx, mine, 0, op == EMBER_OP_ARGMAX || op == EMBER_OP_ARGMIN ? "arg index" : "index", dt, dim);
    if (with_values) agree(vals, mvals, 0, "values", dt, dim);
    for (ember_tensor *t : {a, vals, idx, mine, mvals})
        if (t) ember_tensor_release(t);
}

static void check_args(void)
{
    for (int dt = 0; dt < EMBER_DTYPE_COUNT; dt++)
        for (int keepdim = 0; keepdim < 2; keepdim++)
            for (int dim = -1; dim < 3; dim++) {
                arg_one(EMBER_OP_ARGMAX, dt, dim, keepdim);
                arg_one(EMBER_OP_ARGMIN, dt, dim, keepdim);
                if (dim < 0) continue;
                arg_one(EMBER_OP_MAX_DIM, dt, dim, keepdim);
                arg_one(EMBER_OP_MIN_DIM, dt, dim, keepdim);
            }
}

/* ------------------------------------------------------------------ two-pass reductions */
/* sum, mean, max and min of few long slices as the two kernels compute them:
   each chunk's 256 threads over their elements, then the chunks' partials */
template <class Acc> static void two_pass(const ecu_reduce &r, int op, int64_t chunks)
{
    const int64_t threads = 256;
    std::vector<Acc> partial((size_t)(r.outer.numel * chunks));
    for (int64_t b = 0; b < r.outer.numel * chunks; b++) {
        Acc v = reduce_identity<Acc>(op);
        for (int64_t t = 0; t < threads; t++)
            v = reduce_combine(op, v, reduce_slice<Acc>(r, op, b / chunks, (b % chunks) * threads + t, chunks * threads));
        partial[(size_t)b] = v;
    }
    for (int64_t o = 0; o < r.outer.numel; o++) {
        Acc v = reduce_identity<Acc>(op);
        for (int64_t t = 0; t < threads; t++) v = reduce_combine(op, v, combine_partials(op, partial.data(), o, chunks, t, threads));
        reduce_store(r, op, o, v);
    }
}

static void stat_two_pass(const ecu_reduce &r, const ecu_stat &s, int64_t chunks)
{
    const int64_t threads = 256, n = r.outer.numel;
    std::vector<double> partial((size_t)(n * chunks)), first((size_t)n);
    for (int pass = 0; pass < stat_passes(s); pass++) {
        for (int64_t b = 0; b < n * chunks; b++) {
            double v = stat_identity(s, pass);
            for (int64_t t = 0; t < threads; t++)
                v = stat_combine(s, pass, v, stat_chunk(r, s, pass, first.data(), chunks, b, t, threads));
            partial[(size_t)b] = v;
        }
        for (int64_t o = 0; o < n; o++) {
            double v = stat_identity(s, pass);
            for (int64_t t = 0; t < threads; t++)
                v = stat_combine(s, pass, v, stat_partials(s, pass, partial.data(), o, chunks, t, threads));
            stat_pass_done(r, s, pass, first.data(), o, v);
        }
    }
}

/* var, norm and logsumexp of the same long slices, two-pass */
static void check_stat_two_pass(ember_tensor *a, int dt, int all)
{
    const int last[1] = {1};
    const ecu_stat stats[4] = {{EMBER_OP_VAR, 1, 0}, {EMBER_OP_NORM, 0, 2}, {EMBER_OP_NORM, 0, INFINITY},
                               {EMBER_OP_LOGSUMEXP, 0, 0}};
    for (const ecu_stat &s : stats) {
        if (s.op == EMBER_OP_LOGSUMEXP && all) continue;   /* one dim only */
        ember_tensor *cpu;
        if (s.op == EMBER_OP_VAR) OK(ember_var(a, all ? 0 : 1, last, 0, 1, &cpu));
        else if (s.op == EMBER_OP_NORM) OK(ember_norm(a, s.p, all ? 0 : 1, last, 0, &cpu));
        else OK(ember_logsumexp(a, 1, 0, &cpu));
        ember_tensor *mine = like(cpu, ember_tensor_dtype(cpu));
        ecu_reduce r;
        ecu_reduce_init(&r, a, all ? 3u : 2u, mine, false);
        int64_t chunks = reduce_chunks(r.outer.numel, r.len, 256);
        CHECK(chunks > 1, "two passes");
        stat_two_pass(r, s, chunks);
        int odt = ember_tensor_dtype(cpu);
        agree(cpu, mine, odt == EMBER_FLOAT64 ? 1e-13 : 2e-6, "two-pass statistic", dt, all ? -1 : s.op);
        for (ember_tensor *t : {cpu, mine}) ember_tensor_release(t);
    }
}

static void check_two_pass(void)
{
    const int64_t n = 3 * 120000;
    std::vector<double> v((size_t)n);
    for (int64_t i = 0; i < n; i++) v[(size_t)i] = (double)((i * 7919) % 1013) * 0.125 - 60;
    for (int dt : {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_INT64, EMBER_FLOAT16}) {
        for (int all = 0; all < 2; all++) {
            int64_t shape[2] = {3, n / 3};
            ember_tensor *a, *cpu[4];
            OK(ember_from_data(v.data(), EMBER_FLOAT64, 2, shape, dt, EMBER_CPU, &a));
            const int last[1] = {1};
            OK(ember_sum(a, all ? 0 : 1, last, 0, &cpu[0]));
            OK(ember_mean(a, all ? 0 : 1, last, 0, &cpu[1]));
            OK(ember_amax_all(a, &cpu[2]));
            OK(ember_amin_all(a, &cpu[3]));
            const int ops[4] = {EMBER_OP_SUM, EMBER_OP_MEAN, EMBER_OP_AMAX_ALL, EMBER_OP_AMIN_ALL};
            for (int k = 0; k < 4; k++) {
                int op = ops[k];
                ember_tensor *mine = like(cpu[k], ember_tensor_dtype(cpu[k]));
                ecu_reduce r;
                ecu_reduce_init(&r, a, all || k >= 2 ? 3u : 2u, mine, false);
                int64_t chunks = reduce_chunks(r.outer.numel, r.len, 256);
                CHECK(chunks > 1, "%lld results of %lld take two passes", (long long)r.outer.numel, (long long)r.len);
                if (reduce_compute(op, dt) == ECU_INT64) two_pass<int64_t>(r, op, chunks);
                else two_pass<double>(r, op, chunks);
                agree(cpu[k], mine, dt == EMBER_FLOAT32 || dt == EMBER_FLOAT16 ? 1e-6 : 1e-14, "two-pass reduction", dt, all ? -1 : 1);
                ember_tensor_release(mine);
            }
            check_stat_two_pass(a, dt, all);
            for (ember_tensor *t : {a, cpu[0], cpu[1], cpu[2], cpu[3]}) ember_tensor_release(t);
        }
    }
    CHECK(reduce_chunks(5000, 1 << 20, 256) == 1, "many results keep a block each");
    CHECK(reduce_chunks(1, 4096, 256) == 1, "a short slice keeps one block");
}

/* ------------------------------------------------------------------ recurrent cells */
/* lstm_cell and gru_cell of N = 3 rows, H = 5 units against the CPU's:
   float64 bit for bit (both call libm), float32 within the few ulps between
   the CPU's polynomial tanh and exp and libm's */
static void check_cells(void)
{
    const int64_t N = 3, H = 5;
    for (int dt : {EMBER_FLOAT32, EMBER_FLOAT64}) {
        for (int gates : {4, 3}) {
            int64_t gs[2] = {N, gates * H}, hs[2] = {N, H};
            std::vector<double> va((size_t)(N * gates * H)), vb(va.size()), vs((size_t)(N * H));
            for (size_t i = 0; i < va.size(); i++) {
                va[i] = sin(0.7 * (double)i) * 2.5;
                vb[i] = cos(1.3 * (double)i) * 1.5;
            }
            for (size_t i = 0; i < vs.size(); i++) vs[i] = sin(2.1 * (double)i);
            ember_tensor *gi, *gh, *st, *cpu[2] = {NULL, NULL}, *mine[2] = {NULL, NULL};
            OK(ember_from_data(va.data(), EMBER_FLOAT64, 2, gs, dt, EMBER_CPU, &gi));
            OK(ember_from_data(vb.data(), EMBER_FLOAT64, 2, gs, dt, EMBER_CPU, &gh));
            OK(ember_from_data(vs.data(), EMBER_FLOAT64, 2, hs, dt, EMBER_CPU, &st));
            if (gates == 4) OK(ember_lstm_cell(gi, gh, st, &cpu[0], &cpu[1]));
            else OK(ember_gru_cell(gi, gh, st, &cpu[0]));
            for (int o = 0; o < (gates == 4 ? 2 : 1); o++) mine[o] = like(cpu[o], dt);
            ecu_cell c = {(const char *)ember_tensor_data(gi), (const char *)ember_tensor_data(gh),
                          (const char *)ember_tensor_data(st), (char *)ember_tensor_data(mine[0]),
                          mine[1] ? (char *)ember_tensor_data(mine[1]) : NULL, N * H, H};
            for (int64_t j = 0; j < N * H; j++) {
                if (gates == 4) dt == EMBER_FLOAT32 ? lstm_at<float>(c, j) : lstm_at<double>(c, j);
                else dt == EMBER_FLOAT32 ? gru_at<float>(c, j) : gru_at<double>(c, j);
            }
            for (int o = 0; o < (gates == 4 ? 2 : 1); o++)
                agree(cpu[o], mine[o], dt == EMBER_FLOAT32 ? 2e-6 : 0, gates == 4 ? "lstm_cell" : "gru_cell", dt, o);
            for (ember_tensor *t : {gi, gh, st, cpu[0], cpu[1], mine[0], mine[1]})
                if (t) ember_tensor_release(t);
        }
    }
}

int main(void)
{
    for (int dt = 0; dt < EMBER_DTYPE_COUNT; dt++)
        for (int idt : {EMBER_INT32, EMBER_INT64})
            for (int dim = 0; dim < 3; dim++) {
                check_gathers(dt, idt, dim);
                check_scatters(dt, idt, dim);
            }
    check_index_range();
    check_stats();
    check_args();
    check_two_pass();
    check_cells();
    return report("test_kernel_index");
}
