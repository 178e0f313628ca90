/* tensor.c: tensors and storages: creation, refcounts, views, versions and the
   accessors the FFI reads. Kernels live in ops/; autograd state in autograd.c. */
#include "internal.h"
#include "backend.h"
#include "plan/plan.h"
#include "dtr.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensor headers are recycled through a free list: a loop of small ops should
   not call malloc for every result. The list holds up to 16384 (3 MiB): the
   Lua GC frees a training loop's dead wrappers in bursts of thousands (a
   tiny step leaves five), which a shorter list sent back to free() and the
   next steps fetched again from malloc. A pooled header keeps refcount 0 (the
   free list runs through `base`), so an API call handed a released tensor
   that was not reused yet is refused. */
static EMBER_TLS void *header_pool;
static EMBER_TLS int header_pool_len;
#define HEADER_LINK offsetof(ember_tensor, base)
static EMBER_TLS int thread_registered;
#define HEADER_POOL_MAX 16384

int ember__tensor_alloc(ember_tensor **out)
{
    ember_tensor *t = ember__freelist_get(&header_pool, &header_pool_len, HEADER_LINK);
    if (!t) {
        t = malloc(sizeof *t);
        if (!t) return ember__fail(EMBER_ERR_OOM, "out of memory allocating a tensor");
        if (EMBER_UNLIKELY(!thread_registered)) {   /* this thread's pools are freed when it exits */
            thread_registered = 1;
            ember__thread_uses_state();
        }
    }
    memset(t, 0, offsetof(ember_tensor, shape));
    t->refcount = 1;
    ember__stats_tensor(1);
    if (EMBER_UNLIKELY(ember__trace_on)) ember__trace_header(t);
    *out = t;
    return EMBER_OK;
}

static void header_free(ember_tensor *t)
{
    ember__stats_tensor(-1);
    t->refcount = 0;
    if (!ember__freelist_put(&header_pool, &header_pool_len, HEADER_LINK, t, HEADER_POOL_MAX))
        free(t);
}

/* Storage structs are recycled like tensor headers. */
static EMBER_TLS void *storage_pool;
static EMBER_TLS int storage_pool_len;

void ember__freelist_drain(void **head, int *len, size_t link)
{
    for (void *b; (b = ember__freelist_get(head, len, link));) free(b);
}

void ember__free_thread_pools(void)
{
    ember__freelist_drain(&header_pool, &header_pool_len, HEADER_LINK);
    ember__freelist_drain(&storage_pool, &storage_pool_len, 0);
    thread_registered = 0;
}

static ember_storage *storage_alloc(void)
{
    ember_storage *s = ember__freelist_get(&storage_pool, &storage_pool_len, 0);
    if (!s && !(s = malloc(sizeof *s))) return NULL;
    memset(s, 0, sizeof *s);
    return s;
}

static void storage_free(ember_storage *s)
{
    if (!ember__freelist_put(&storage_pool, &storage_pool_len, 0, s, HEADER_POOL_MAX)) free(s);
}

bool ember__derived_keepable(const ember_tensor *w)
{
    const ember_storage *s = w ? w->storage : NULL;
    return s && !s->release && s->device == EMBER_CPU && !ember_is_tracked(w) && !ember__dtr_on;
}

void ember__derived_key(ember__derived *d, const ember_tensor *w)
{
    d->version = w->storage->version;
    d->offset = w->offset;
    d->dtype = w->dtype;
    d->ndim = w->ndim;
    memcpy(d->shape, w->shape, sizeof d->shape);
    memcpy(d->strides, w->strides, sizeof d->strides);
}

static bool derived_same_view(const ember__derived *d, const ember_tensor *w)
{
    return d->offset == w->offset && d->dtype == w->dtype && d->ndim == w->ndim &&
           memcmp(d->shape, w->shape, (size_t)w->ndim * sizeof *d->shape) == 0 &&
           memcmp(d->strides, w->strides, (size_t)w->ndim * sizeof *d->strides) == 0;
}

ember__derived *ember__derived_find(const ember_tensor *w, void (*kind)(ember__derived *),
                                    bool (*same)(const ember__derived *d, const void *ctx), const void *ctx,
                                    int *others)
{
    ember__derived *found = NULL;
    int n = 0;
    for (ember__derived *d = w->storage->derived; d; d = d->next) {
        if (d->free != kind) continue;
        if (!found && derived_same_view(d, w) && (!same || same(d, ctx))) found = d;
        else n++;
    }
    if (others) *others = n;
    return found;
}

void ember__derived_add(ember_storage *s, ember__derived *d)
{
    d->next = s->derived;
    s->derived = d;
}

void ember__derived_remove(ember_storage *s, ember__derived *d)
{
    ember__derived **p = &s->derived;
    while (*p && *p != d) p = &(*p)->next;
    if (*p) *p = d->next;
}

static void storage_release(ember_storage *s)
{
    if (!s) return;
    if (--s->refcount > 0) {
        if (EMBER_UNLIKELY(s->dtr_holds) && s->refcount == s->dtr_holds) ember__dtr_orphaned(s);
        return;
    }
    if (EMBER_UNLIKELY(s->dtr != NULL)) ember__dtr_storage_freed(s);
    for (ember__derived *d = s->derived, *next; d; d = next) next = d->next, d->free(d);
    if (s->release) {
        s->release(s->release_ctx, s->data);
    } else if (s->data) {
        ember__stats_bytes(-(int64_t)s->nbytes);
        if (s->device == EMBER_CPU) ember__free(s->data, s->nbytes);
        else ember__backend(s->device)->free(s->data, s->nbytes);
    }
    storage_free(s);
}

void ember_tensor_retain(ember_tensor *t)
{
    if (t && t->refcount > 0) t->refcount++;
}

/* set by every new autograd key (always to the same function): atomic, since
   keys are made on any host thread while others release tensors */
static _Atomic(ember__release_hook) release_hook;

void ember__on_release(ember__release_hook hook) { atomic_store_explicit(&release_hook, hook, memory_order_relaxed); }

void ember_tensor_release(ember_tensor *t)
{
    if (!t || t->refcount <= 0) return;   /* NULL, or released already (a pooled header) */
    if (--t->refcount > 0) return;
    if (t->ag) atomic_load_explicit(&release_hook, memory_order_relaxed)(t);   /* the tape drops its entries */
    storage_release(t->storage);
    ember_tensor *base = t->base;
    header_free(t);
    ember_tensor_release(base);   /* a view's root: one level, roots have no base */
}

void ember__release_list(ember_tensor *const *ts, int n)
{
    for (int i = 0; i < n; i++) ember_tensor_release(ts[i]);
}

int ember_tensor_refcount(const ember_tensor *t) { return t ? t->refcount : 0; }
int32_t ember_tensor_lua_slot(const ember_tensor *t) { return t ? t->lua_slot : 0; }
void ember_tensor_set_lua_slot(ember_tensor *t, int32_t slot)
{
    if (t) t->lua_slot = slot;
}

/* ------------------------------------------------------------------ accessors */
/* Accessors tolerate NULL (0 / NULL results) so a host's mistake is not a crash. */
int ember_tensor_ndim(const ember_tensor *t) { return t ? t->ndim : 0; }
const int64_t *ember_tensor_shape(const ember_tensor *t) { return t ? t->shape : NULL; }
const int64_t *ember_tensor_strides(const ember_tensor *t) { return t ? t->strides : NULL; }
int64_t ember_tensor_offset(const ember_tensor *t) { return t ? t->offset : 0; }
int64_t ember_tensor_numel(const ember_tensor *t) { return t ? t->numel : 0; }
int ember_tensor_dtype(const ember_tensor *t) { return t ? t->dtype : -1; }
int ember_tensor_device(const ember_tensor *t) { return t ? t->storage->device : -1; }
int ember_tensor_is_contiguous(const ember_tensor *t) { return t ? t->is_contiguous : 0; }
/* The caller may write through the pointer: under DTR the data is remade if
   evicted and no recipe relies on it any more (NULL if that fails). */
static bool dtr_exposed(const ember_tensor *t)
{
    return !ember__dtr_on || ember__dtr_write((ember_tensor *)t, NULL) == EMBER_OK;
}
void *ember_tensor_data(const ember_tensor *t)
{
    return t && t->storage->device == EMBER_CPU && dtr_exposed(t) ? ember__ptr(t) : NULL;
}
void *ember_tensor_device_data(const ember_tensor *t) { return t && dtr_exposed(t) ? ember__ptr(t) : NULL; }
int ember_tensor_same_storage(const ember_tensor *a, const ember_tensor *b)
{
    return a && b && a->storage == b->storage;
}
int64_t ember_tensor_version(const ember_tensor *t) { return t ? t->storage->version : 0; }
void ember_tensor_bump_version(ember_tensor *t)
{
    if (t) t->storage->version++;
}

/* ------------------------------------------------------------------ geometry */
void ember__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

void ember__refresh_geometry(ember_tensor *t)
{
    int64_t n = 1, expect = 1;
    bool contig = true;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) contig = false;
        expect *= t->shape[i];
    }
    t->numel = n;
    t->is_contiguous = contig || n == 0;
}

int ember__check_shape(const char *op, int ndim, const int64_t *shape, int64_t *numel)
{
    char buf[200];
    if (ndim < 0 || ndim > EMBER_MAX_DIMS)
        return ember__fail(EMBER_ERR_SHAPE, "%s: %d dims requested, at most %d are supported", op,
                           ndim, EMBER_MAX_DIMS);
    if (ndim > 0 && !shape) return ember__fail(EMBER_ERR_ARG, "%s: shape is NULL", op);
    /* The sizes (a zero counted as one) must multiply to at most 2^50: that
       bounds every stride and byte count below, and a zero-size tensor is
       refused or made the same way whichever of its dims is zero. */
    int64_t n = 1, span = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return ember__fail(EMBER_ERR_SHAPE, "%s: negative size in shape %s", op,
                               ember__shape_str(buf, ndim, shape));
        int64_t s = shape[i] > 0 ? shape[i] : 1;
        if (span > ((int64_t)1 << 50) / s)
            return ember__fail(EMBER_ERR_OOM, "%s: shape %s is too large: its sizes multiply past 2^50 elements",
                               op, ember__shape_str(buf, ndim, shape));
        span *= s;
        n *= shape[i];
    }
    if (numel) *numel = n;
    return EMBER_OK;
}

/* a new header over the fresh storage s with dtype and shape (the strides are the caller's
   to set); when no header can be had, s goes too: released with its data, or for a
   foreign block freed alone, the data staying the caller's */
static int header_over(ember_storage *s, bool foreign, int dtype, int ndim, const int64_t *shape, ember_tensor **out)
{
    ember_tensor *t = NULL;
    int rc = ember__tensor_alloc(&t);
    if (rc < 0) {
        if (foreign) storage_free(s);
        else storage_release(s);
        return rc;
    }
    t->storage = s;
    t->dtype = (int8_t)dtype;
    t->ndim = (int8_t)ndim;
    if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    *out = t;
    return EMBER_OK;
}

int ember__new(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out)
{
    int64_t n;
    *out = NULL;
    EMBER_TRY(ember__check_shape("empty", ndim, shape, &n));
    if (!ember__valid_dtype(dtype)) return ember__fail(EMBER_ERR_DTYPE, "empty: unknown dtype %d", dtype);
    const ember_backend *be = NULL;
    if (device != EMBER_CPU) EMBER_TRY(ember__backend_get(device, &be));
    size_t nbytes = (size_t)n * (size_t)ember_dtype_size(dtype);
    ember_storage *s = storage_alloc();
    if (!s) return ember__fail(EMBER_ERR_OOM, "out of memory allocating a storage");
    s->refcount = 1;
    s->device = device;
    s->nbytes = nbytes;
    /* a plan's run: its memory plan's region for this output (plan/arena.c) */
    if (EMBER_UNLIKELY(ember__plan_offer != NULL) && !be && nbytes) ember__plan_claim(s);
    if (!s->data) {
        if (ember__reserve(nbytes) < 0) {
            storage_free(s);
            char buf[200], msg[300];
            snprintf(msg, sizeof msg, "%s", ember_last_error());
            return ember__fail(EMBER_ERR_OOM, "%s for a %s tensor of shape %s", msg, ember_dtype_name(dtype),
                               ember__shape_str(buf, ndim, shape));
        }
        s->data = be ? be->alloc(nbytes) : ember__alloc(nbytes);
        if (!s->data) {
            storage_free(s);
            char buf[200];
            return ember__fail(EMBER_ERR_OOM, "out of memory: %zu bytes for a %s tensor of shape %s",
                               nbytes, ember_dtype_name(dtype), ember__shape_str(buf, ndim, shape));
        }
        ember__stats_bytes((int64_t)nbytes);
    }
    ember_tensor *t = NULL;
    EMBER_TRY(header_over(s, false, dtype, ndim, shape, &t));
    ember__contiguous_strides(ndim, shape, t->strides);
    t->numel = n;
    t->is_contiguous = 1;
    if (EMBER_UNLIKELY(ember__trace_on)) ember__trace_born(t);
    *out = t;
    return EMBER_OK;
}

int ember__make_view(const ember_tensor *a, int ndim, const int64_t *shape, const int64_t *strides,
                     int64_t offset, ember_tensor **out)
{
    ember_tensor *t = NULL;
    EMBER_TRY(ember__tensor_alloc(&t));
    t->storage = a->storage;
    t->storage->refcount++;
    t->dtype = a->dtype;
    t->ndim = (int8_t)ndim;
    if (ndim) {
        memmove(t->shape, shape, (size_t)ndim * sizeof *shape);
        memmove(t->strides, strides, (size_t)ndim * sizeof *strides);
    }
    t->offset = offset;
    t->is_view = 1;
    ember__refresh_geometry(t);
    *out = t;
    if (EMBER_UNLIKELY(ember__trace_on)) ember__trace_view(a, t);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ creation */
int ember_empty(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "empty: out is NULL");
    int rc = ember__new(ndim, shape, dtype, device, out);
    return rc == EMBER_ERR_OOM ? ember__fail_prefix(rc, "empty") : rc;
}

int ember_full(int ndim, const int64_t *shape, double value, int dtype, int device,
               ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "full: out is NULL");
    *out = NULL;
    if (ember__valid_dtype(dtype)) EMBER_TRY(ember__check_value("full", value, dtype));
    int rc = ember__new(ndim, shape, dtype, device, out);
    if (rc < 0) return rc == EMBER_ERR_OOM ? ember__fail_prefix(rc, "full") : rc;
    ember_tensor *t = *out;
    if (device == EMBER_CPU && t->numel <= 1024 && (dtype == EMBER_FLOAT32 || dtype == EMBER_FLOAT64) &&
        !ember__trace_on) {
        /* small float tensors (backward's seed of ones) are written here, as
           ember__store writes the value, without a scalar and the copy kernel */
        if (dtype == EMBER_FLOAT32) {
            float *p = (float *)ember__ptr(t), v = (float)value;
            for (int64_t i = 0; i < t->numel; i++) p[i] = v;
        } else {
            double *p = (double *)ember__ptr(t);
            for (int64_t i = 0; i < t->numel; i++) p[i] = value;
        }
        return EMBER_OK;
    }
    rc = ember__fill_raw(t, value);   /* a new tensor starts at version 0 */
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

int ember_scalar(double value, int dtype, int wrapped, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "scalar: out is NULL");
    *out = NULL;
    if (ember__valid_dtype(dtype)) EMBER_TRY(ember__check_value("scalar", value, dtype));
    EMBER_TRY(ember__new(0, NULL, dtype, EMBER_CPU, out));
    ember__store(ember__ptr(*out), dtype, value);
    (*out)->wrapped_number = wrapped != 0;
    return EMBER_OK;
}

int ember_from_data(const void *src, int src_dtype, int ndim, const int64_t *shape, int dtype,
                    int device, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "tensor: out is NULL");
    *out = NULL;
    if (!ember__valid_dtype(src_dtype) || !ember__valid_dtype(dtype))
        return ember__fail(EMBER_ERR_DTYPE, "tensor: unknown dtype");
    ember_tensor *t = NULL;
    int rc = ember__new(ndim, shape, dtype, EMBER_CPU, &t);
    if (rc < 0) return rc == EMBER_ERR_OOM ? ember__fail_prefix(rc, "tensor") : rc;
    if (t->numel && !src) {
        ember_tensor_release(t);
        return ember__fail(EMBER_ERR_ARG, "tensor: source data is NULL");
    }
    ember__convert(ember__ptr(t), dtype, 1, src, src_dtype, 1, t->numel);
    if (device == EMBER_CPU) {
        *out = t;
        return EMBER_OK;
    }
    rc = ember_to_device(t, device, out);
    ember_tensor_release(t);
    return rc;
}

int ember_from_blob(void *data, int ndim, const int64_t *shape, const int64_t *strides, int dtype,
                    void (*release)(void *ctx, void *data), void *ctx, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "from_blob: out is NULL");
    *out = NULL;
    int64_t n = 0;
    EMBER_TRY(ember__check_shape("from_blob", ndim, shape, &n));
    if (!ember__valid_dtype(dtype)) return ember__fail(EMBER_ERR_DTYPE, "from_blob: unknown dtype %d", dtype);
    if (!data && n) return ember__fail(EMBER_ERR_ARG, "from_blob: data is NULL");
    ember_storage *s = storage_alloc();
    if (!s) return ember__fail(EMBER_ERR_OOM, "out of memory allocating a storage");
    s->refcount = 1;
    s->device = EMBER_CPU;
    s->data = data;
    s->release = release ? release : NULL;
    s->release_ctx = ctx;
    /* a foreign block with no release function must not be freed by us */
    if (!release) s->release = ember__noop_release;
    ember_tensor *t = NULL;
    EMBER_TRY(header_over(s, true, dtype, ndim, shape, &t));
    if (strides) {
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0) {
                storage_release(s);
                header_free(t);
                return ember__fail(EMBER_ERR_ARG, "from_blob: negative strides are not supported");
            }
        }
        if (ndim) memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
    } else {
        ember__contiguous_strides(ndim, shape, t->strides);
    }
    ember__refresh_geometry(t);
    *out = t;
    return EMBER_OK;
}

void ember__noop_release(void *ctx, void *data)
{
    EMBER_UNUSED(ctx);
    EMBER_UNUSED(data);
}

/* ------------------------------------------------------------------ reading values */
int ember_item(const ember_tensor *t, double *out)
{
    char buf[200];
    if (EMBER_UNLIKELY(ember__trace_on)) EMBER_TRY(ember__trace_read("item"));
    if (!t || !out) return ember__fail(EMBER_ERR_ARG, "item: NULL argument");
    if (t->numel != 1)
        return ember__fail(EMBER_ERR_SHAPE,
                           "item: only one-element tensors can be converted, got shape %s",
                           ember__tshape(buf, t));
    if (ember__dtr_on) EMBER_TRY(ember__dtr_ready(t));
    if (t->storage->device != EMBER_CPU) {
        double v = 0;
        EMBER_TRY(ember__backend(t->storage->device)->read_scalar(t, &v));
        *out = v;
        return EMBER_OK;
    }
    *out = ember__load(ember__ptr(t), t->dtype);
    return EMBER_OK;
}

int ember_copy_to_buffer(const ember_tensor *t, void *dst, int dst_dtype)
{
    if (!t || (!dst && t->numel)) return ember__fail(EMBER_ERR_ARG, "copy_to_buffer: NULL argument");
    if (!ember__valid_dtype(dst_dtype)) return ember__fail(EMBER_ERR_DTYPE, "copy_to_buffer: unknown dtype");
    if (EMBER_UNLIKELY(ember__trace_on)) EMBER_TRY(ember__trace_read("copy_to_buffer"));
    if (ember__dtr_on) EMBER_TRY(ember__dtr_ready(t));
    if (t->storage->device != EMBER_CPU) {
        ember_tensor *c;
        EMBER_TRY(ember_to_device((ember_tensor *)t, EMBER_CPU, &c));
        int rc = ember_copy_to_buffer(c, dst, dst_dtype);
        ember_tensor_release(c);
        return rc;
    }
    ember_tensor *d;
    int64_t flat = t->numel;
    EMBER_TRY(ember_from_blob(dst, 1, &flat, NULL, dst_dtype, NULL, NULL, &d));
    /* view d with t's shape, then a strided copy does the conversion */
    d->ndim = t->ndim;
    memcpy(d->shape, t->shape, sizeof d->shape);
    ember__contiguous_strides(d->ndim, d->shape, d->strides);
    ember__refresh_geometry(d);
    int rc = ember__copy_kernel(d, t);
    ember_tensor_release(d);
    return rc;
}
