/* inplace.c: the in-place forms of the elementwise ops (add_ ... pow_, the
   unary ones through ember_unary_, clamp_), copy_ and fill_. Untracked, they
   run elementwise.c's kernels into self; under recording they compute the
   value out of place as an ordinary op and write it in (autograd_ops.h). */
#include "ops.h"
#include "../autograd_ops.h"
#include "../backend.h"
#include "../plan/plan.h"

#include <string.h>

static int category(int dt) { return dt == EMBER_BOOL ? 0 : ember__is_int(dt) ? 1 : 2; }

/* The recorded form of an in-place op (see autograd_ops.h): `r` is the value
   computed out of place since `mark`; it is copied into a, whose history
   moves to r's. */
static int inplace_finish(ember_tensor *a, ember_tensor *r, uint64_t mark)
{
    ember_tensor *src = r, *tmp = NULL;
    int rc = ember__ag_protect(a, mark);
    if (rc == EMBER_OK && r->storage == a->storage) {   /* the value still reads a's memory */
        rc = ember__run_nograd(EMBER_OP_CLONE, 1, &r, NULL, &tmp);
        src = tmp;
    }
    if (rc == EMBER_OK) rc = ember__copy_into(a, src);
    if (rc == EMBER_OK) {
        a->storage->version++;
        rc = ember__ag_commit(a, r);
    }
    ember_tensor_release(tmp);
    ember_tensor_release(r);
    return rc;
}

int ember__check_writable(const char *name, const ember_tensor *t)
{
    char sh[200], st[200];
    if (t->storage->pins > 0)
        return ember__fail(EMBER_ERR_STATE,
                           "%s_: the tensor (shape %s) is needed by a backward run that has not finished "
                           "(gm:backward_steps); finish or cancel the run first", name, ember__tshape(sh, t));
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1)
            return ember__fail(EMBER_ERR_ARG,
                               "%s_: more than one element of the written-to tensor (shape %s, strides %s) "
                               "refers to a single memory location (an expand() view); clone() it first",
                               name, ember__tshape(sh, t), ember__shape_str(st, t->ndim, t->strides));
    return EMBER_OK;
}

/* "add_", "sub_", ...: the names the in-place forms report, made by the
   compiler rather than formatted on every call */
static const char *const INPLACE_NAMES[EMBER_OP_COUNT] = {
#define OP(E, n, ...) #n "_",
#include "ops.def"
};

int ember__binary_inplace(int op, ember_tensor *a, ember_tensor *b)
{
    const char *name = ember__ops[op].name, *iname = INPLACE_NAMES[op];
    char sa[200], sb[200];
    if (!a || !b) return ember__fail(EMBER_ERR_ARG, "%s_: argument is NULL", name);
    if (a->refcount <= 0 || b->refcount <= 0) return ember__fail(EMBER_ERR_ARG, "%s_: a tensor that was released", name);
    ember_tensor *in[2] = {a, b};
    EMBER_TRY(ember__same_device(iname, 2, in));
    int nd, ct;
    int64_t shape[EMBER_MAX_DIMS];
    EMBER_TRY(ember__broadcast_shape(iname, 2, in, &nd, shape));
    if (nd != a->ndim || memcmp(shape, a->shape, (size_t)nd * sizeof *shape) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s_: shape %s cannot be broadcast to the shape %s of self",
                           name, ember__tshape(sb, b), ember__tshape(sa, a));
    int odt = ember__binary_types(op, a, b, &ct);
    if (category(odt) > category(a->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "%s_: result type %s can't be cast to the dtype %s of self",
                           name, ember_dtype_name(odt), ember_dtype_name(a->dtype));
    EMBER_TRY(ember__check_numbers(iname, 1, &b, ct));
    EMBER_TRY(ember__check_writable(name, a));
    int rec = ember__ag_write_recorded(name, a, b);
    EMBER_TRY(rec);
    if (rec || a->storage->device != EMBER_CPU || ct != a->dtype) {
        ember_tensor *r;
        uint64_t mark = ember__ag_mark();
        EMBER_TRY(ember__dispatch(op, 2, in, NULL, &r));
        return inplace_finish(a, r, mark);
    }
    ember_tensor *cb;
    EMBER_TRY(ember__as_dtype(b, ct, &cb));
    if (op == EMBER_OP_POW && ember__is_int(ct)) {
        int rc = ember__no_negative_exponent(cb);
        if (rc < 0) {
            ember_tensor_release(cb);
            return rc;
        }
    }
    int rc = ember__run_binary(op, ct, a, a, cb);
    ember_tensor_release(cb);
    if (rc < 0) return rc;
    a->storage->version++;
    return EMBER_OK;
}

/* the in-place forms as a trace records them (plan.h) */
static int binary_inplace(int op, ember_tensor *a, ember_tensor *b)
{
    if (EMBER_LIKELY(!ember__trace_on)) return ember__binary_inplace(op, a, b);
    int depth = ember__trace_enter();
    ember_tensor *in[2] = {a, b};
    return ember__trace_leave(depth, ember__binary_inplace(op, a, b), PE_BINARY_, op, 2, in, 0, NULL, NULL, NULL);
}

int ember_add_(ember_tensor *a, ember_tensor *b) { return binary_inplace(EMBER_OP_ADD, a, b); }
int ember_sub_(ember_tensor *a, ember_tensor *b) { return binary_inplace(EMBER_OP_SUB, a, b); }
int ember_mul_(ember_tensor *a, ember_tensor *b) { return binary_inplace(EMBER_OP_MUL, a, b); }
int ember_div_(ember_tensor *a, ember_tensor *b) { return binary_inplace(EMBER_OP_DIV, a, b); }
int ember_pow_(ember_tensor *a, ember_tensor *b) { return binary_inplace(EMBER_OP_POW, a, b); }

int ember__unary_inplace(int op, ember_tensor *a, const ember_attrs *at)
{
    const char *name = ember__ops[op].name;
    if (!a) return ember__fail(EMBER_ERR_ARG, "%s_: argument is NULL", name);
    int dt = ember__unary_dtype(op, a->dtype);
    if (dt != a->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "%s_: result type %s can't be cast to the dtype %s of self",
                           name, ember_dtype_name(dt), ember_dtype_name(a->dtype));
    EMBER_TRY(ember__check_writable(name, a));
    int rec = ember__ag_write_recorded(name, a, NULL);
    EMBER_TRY(rec);
    if (rec || a->storage->device != EMBER_CPU) {
        ember_tensor *r;
        uint64_t mark = ember__ag_mark();
        EMBER_TRY(ember__dispatch(op, 1, &a, at, &r));
        return inplace_finish(a, r, mark);
    }
    EMBER_TRY(ember__run_unary(op, at, a, a));
    a->storage->version++;
    return EMBER_OK;
}

static int unary_inplace(int op, ember_tensor *a, const ember_attrs *at)
{
    if (EMBER_LIKELY(!ember__trace_on)) return ember__unary_inplace(op, a, at);
    int depth = ember__trace_enter();
    return ember__trace_leave(depth, ember__unary_inplace(op, a, at), PE_UNARY_, op, 1, &a, 0, NULL, at, NULL);
}

int ember_unary_(ember_tensor *a, const char *op)
{
    if (!op) return ember__fail(EMBER_ERR_ARG, "unary_: op name is NULL");
    for (int k = 0; k < EMBER_OP_COUNT; k++)
        if (ember__ops[k].nin == 1 && (ember__ops[k].flags & OPF_INPLACE) && strcmp(ember__ops[k].name, op) == 0)
            return unary_inplace(k, a, NULL);
    return ember__fail(EMBER_ERR_ARG, "unary_: unknown in-place op '%s'", op);
}

int ember_clamp_(ember_tensor *a, int has_lo, double lo, int has_hi, double hi)
{
    ember_attrs at = {{has_lo != 0, has_hi != 0}, {lo, hi}};
    EMBER_TRY(ember__clamp_bounds("clamp_", a, &at));
    return unary_inplace(EMBER_OP_CLAMP, a, &at);
}

static int copy_inplace(ember_tensor *a, ember_tensor *src);

int ember_copy_(ember_tensor *a, ember_tensor *src)
{
    if (EMBER_LIKELY(!ember__trace_on)) return copy_inplace(a, src);
    int depth = ember__trace_enter();
    ember_tensor *in[2] = {a, src};
    return ember__trace_leave(depth, copy_inplace(a, src), PE_COPY_, 0, 2, in, 0, NULL, NULL, NULL);
}

static int copy_inplace(ember_tensor *a, ember_tensor *src)
{
    char sa[200], sb[200];
    if (!a || !src) return ember__fail(EMBER_ERR_ARG, "copy_: argument is NULL");
    ember_tensor *in[2] = {a, src};
    int nd;
    int64_t shape[EMBER_MAX_DIMS];
    EMBER_TRY(ember__broadcast_shape("copy_", 2, in, &nd, shape));
    if (nd != a->ndim || memcmp(shape, a->shape, (size_t)nd * sizeof *shape) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "copy_: shape %s cannot be broadcast to the shape %s of self",
                           ember__tshape(sb, src), ember__tshape(sa, a));
    EMBER_TRY(ember__check_writable("copy", a));
    int rec = ember__ag_write_recorded("copy", a, src);
    EMBER_TRY(rec);
    if (rec) {
        /* the new value is src broadcast (and converted): record it as such */
        ember_tensor *e = NULL, *r = NULL;
        int rc;
        uint64_t mark = ember__ag_mark();
        EMBER_CHECK(ember_expand(src, a->ndim, a->shape, &e));
        EMBER_CHECK(ember_to_dtype(e, a->dtype, &r));
        rc = inplace_finish(a, ember__take(&r), mark);
    done:
        EMBER_RELEASE(e, r);
        return rc;
    }
    if (a->storage->device != EMBER_CPU || src->storage->device != EMBER_CPU) {
        ember_tensor *moved;
        EMBER_TRY(ember_to_device(src, a->storage->device, &moved));
        int rc = ember__copy_into(a, moved);
        ember_tensor_release(moved);
        if (rc == EMBER_OK) a->storage->version++;
        return rc;
    }
    if (ember_tensor_same_storage(a, src)) {   /* overlapping views: go through a copy */
        ember_tensor *c;
        EMBER_TRY(ember_clone(src, &c));
        ember__copy_kernel(a, c);
        ember_tensor_release(c);
    } else {
        ember__copy_kernel(a, src);
    }
    a->storage->version++;
    return EMBER_OK;
}

int ember__fill_raw(ember_tensor *a, double value)
{
    if (a->storage->device != EMBER_CPU) return ember__backend(a->storage->device)->fill(a, value);
    ember_tensor *s;
    EMBER_TRY(ember_scalar(value, a->dtype, 0, &s));
    ember__copy_kernel(a, s);
    ember_tensor_release(s);
    return EMBER_OK;
}

static int fill_inplace(ember_tensor *a, double value);

int ember_fill_(ember_tensor *a, double value)
{
    if (EMBER_LIKELY(!ember__trace_on)) return fill_inplace(a, value);
    int depth = ember__trace_enter();
    ember__call_args args = {{0}, {value}};
    return ember__trace_leave(depth, fill_inplace(a, value), PE_FILL_, 0, 1, &a, 0, NULL, NULL, &args);
}

static int fill_inplace(ember_tensor *a, double value)
{
    if (!a) return ember__fail(EMBER_ERR_ARG, "fill_: argument is NULL");
    EMBER_TRY(ember__check_writable("fill", a));
    EMBER_TRY(ember__check_value("fill_", value, a->dtype));
    int rec = ember__ag_write_recorded("fill", a, NULL);
    EMBER_TRY(rec);
    if (rec) {
        ember_tensor *s;
        EMBER_TRY(ember_scalar(value, a->dtype, 0, &s));
        int rc = ember_copy_(a, s);
        ember_tensor_release(s);
        return rc;
    }
    EMBER_TRY(ember__fill_raw(a, value));
    a->storage->version++;
    return EMBER_OK;
}
