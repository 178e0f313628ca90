/* matmul.cpp: matmul through cuBLAS. The core plans the shapes (1-D
   operands, batch broadcasting, the errors: ember__matmul_plan); each
   batch's product is one cublasGemmEx on operands laid out by
   gemm_layout.h. float32 computes in float32 (CUBLAS_COMPUTE_32F: no TF32,
   so results agree with the CPU's sgemm), float64 in double; float16 and
   bfloat16 are read and written in their own dtype and accumulate in
   float32, as the CPU computes them. Integer products (cuBLAS has no
   wrapping int64 one) run matmul_int.cu's kernel on the strided operands. */
#include <cublas_v2.h>
#include <pthread.h>

#include "cuda_backend.h"
#include "gemm_layout.h"
#include "kernels/matmul_int.h"

static cublasHandle_t handle;
static cublasStatus_t handle_status;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;

/* one handle for the process, on the legacy default stream like every other
   kernel of the backend (cuBLAS handles are thread-safe for this use) */
static void make_handle(void) { handle_status = cublasCreate(&handle); }

static int cublas_check(cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS) return EMBER_OK;
    return ecu_core->fail(st == CUBLAS_STATUS_ALLOC_FAILED ? EMBER_ERR_OOM : EMBER_ERR_DEVICE, "%s: %s (%s)", what,
                          cublasGetStatusString(st), cublasGetStatusName(st));
}

typedef struct {
    cudaDataType type;
    cublasComputeType_t compute;
    double one_f64, zero_f64;
    float one_f32, zero_f32;
} gemm_types;

static bool types_of(int dt, gemm_types *g)
{
    *g = gemm_types{CUDA_R_32F, CUBLAS_COMPUTE_32F, 1.0, 0.0, 1.0f, 0.0f};
    switch (dt) {
    case EMBER_FLOAT32: return true;
    case EMBER_FLOAT64: g->type = CUDA_R_64F; g->compute = CUBLAS_COMPUTE_64F; return true;
    case EMBER_FLOAT16: g->type = CUDA_R_16F; return true;
    case EMBER_BFLOAT16: g->type = CUDA_R_16BF; return true;
    default: return false;
    }
}

/* *t replaced by a contiguous copy of itself (on the device) */
static int make_contiguous(ember_tensor **t)
{
    ember_tensor *c;
    EMBER_TRY(ecu_fwd_to_dtype(EMBER_OP_CLONE, 1, t, NULL, &c));
    ecu_core->release(*t);
    *t = c;
    return EMBER_OK;
}

/* *t in dtype dt (itself when it has it) */
static int as_dtype(ember_tensor **t, int dt)
{
    if ((*t)->dtype == dt) return EMBER_OK;
    ember_attrs at = {};
    at.i[0] = dt;
    ember_tensor *c;
    EMBER_TRY(ecu_fwd_to_dtype(EMBER_OP_TO_DTYPE, 1, t, &at, &c));
    ecu_core->release(*t);
    *t = c;
    return EMBER_OK;
}

/* the layout of batch matrix `off` of t (rows x cols), or a contiguous copy of t first
   (copied set) */
static int layout(ember_tensor **t, int64_t off, int64_t rows, int64_t cols, ecu_gemm_operand *o, bool *copied)
{
    const ember_tensor *x = *t;
    if (ecu_gemm_layout(off, rows, cols, x->strides[x->ndim - 2], x->strides[x->ndim - 1], o) && o->ld <= INT32_MAX)
        return EMBER_OK;   /* cuBLAS takes an int ld */
    EMBER_TRY(make_contiguous(t));
    *copied = true;
    return EMBER_OK;
}

static int run_batches(const ember__matmul_plan *p, ember_tensor **a, ember_tensor **b, ember_tensor *o)
{
    gemm_types g;
    types_of(p->dtype, &g);
    const void *one = p->dtype == EMBER_FLOAT64 ? (const void *)&g.one_f64 : &g.one_f32;
    const void *zero = p->dtype == EMBER_FLOAT64 ? (const void *)&g.zero_f64 : &g.zero_f32;
    int64_t es = ecu_core->dtype_size(p->dtype), nbat = 1, idx[EMBER_MAX_DIMS] = {0};
    for (int d = 0; d < p->nbatch; d++) nbat *= p->bshape[d];
    for (int64_t bi = 0; bi < nbat; bi++) {
        int64_t aoff, boff;
        ember__matmul_offsets(p->nbatch, idx, *a, *b, &aoff, &boff);
        ecu_gemm_operand la, lb;
        bool copied = false;
        EMBER_TRY(layout(a, aoff, p->M, p->K, &la, &copied));
        EMBER_TRY(layout(b, boff, p->K, p->N, &lb, &copied));
        if (copied) {   /* redo this batch with the contiguous operands */
            bi--;
            continue;
        }
        const char *pa = (const char *)(*a)->storage->data + la.offset * es;
        const char *pb = (const char *)(*b)->storage->data + lb.offset * es;
        char *pc = (char *)o->storage->data + (o->offset + bi * p->M * p->N) * es;
        /* C^T (N x M) = B^T (N x K) A^T (K x M), column-major */
        EMBER_TRY(cublas_check(cublasGemmEx(handle, lb.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            la.transpose ? CUBLAS_OP_T : CUBLAS_OP_N, (int)p->N, (int)p->M,
                                            (int)p->K, one, pb, g.type, (int)lb.ld, pa, g.type, (int)la.ld, zero, pc,
                                            g.type, (int)p->N, g.compute, CUBLAS_GEMM_DEFAULT),
                               "matmul"));
        ember__index_next(p->nbatch, p->bshape, idx);
    }
    return EMBER_OK;
}

/* an integer product, one launch per batch matrix, on the operands as they are strided */
static int run_int_batches(const ember__matmul_plan *p, const ember_tensor *a, const ember_tensor *b, ember_tensor *o)
{
    int es = ecu_core->dtype_size(p->dtype);
    int64_t nbat = 1, idx[EMBER_MAX_DIMS] = {0};
    for (int d = 0; d < p->nbatch; d++) nbat *= p->bshape[d];
    for (int64_t bi = 0; bi < nbat; bi++) {
        int64_t aoff, boff;
        ember__matmul_offsets(p->nbatch, idx, a, b, &aoff, &boff);
        ecu_int_gemm g = {(const char *)a->storage->data + aoff * es, (const char *)b->storage->data + boff * es,
                          (char *)o->storage->data + (o->offset + bi * p->M * p->N) * es, p->M, p->N, p->K,
                          a->strides[a->ndim - 2], a->strides[a->ndim - 1], b->strides[b->ndim - 2],
                          b->strides[b->ndim - 1], p->dtype, es};
        EMBER_TRY(ecu_check(ecu_launch_int_gemm(&g), "matmul"));
        ember__index_next(p->nbatch, p->bshape, idx);
    }
    return EMBER_OK;
}

/* cuBLAS takes int dims and leading dims */
static bool fits_int(const ember__matmul_plan *p)
{
    const int64_t lim = INT32_MAX;
    return p->M <= lim && p->N <= lim && p->K <= lim;
}

int ecu_fwd_matmul(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    ember__matmul_plan p;
    gemm_types g;
    EMBER_TRY(ecu_core->matmul_plan(in, &p));
    int rc = EMBER_OK;
    if (!types_of(p.dtype, &g)) {
        rc = ecu_core->new_tensor(p.ond, p.oshape, p.dtype, in[0]->storage->device, out);
        if (rc == EMBER_OK && (*out)->numel > 0 && (rc = as_dtype(&p.a, p.dtype)) == EMBER_OK &&
            (rc = as_dtype(&p.b, p.dtype)) == EMBER_OK)
            rc = run_int_batches(&p, p.a, p.b, *out);
        ecu_core->release(p.a);
        ecu_core->release(p.b);
        return rc;
    }
    if (!fits_int(&p)) {
        rc = ecu_core->fail(EMBER_ERR_SHAPE, "matmul: dims M %lld, N %lld, K %lld pass cuBLAS's int range",
                            (long long)p.M, (long long)p.N, (long long)p.K);
    }
    pthread_once(&handle_once, make_handle);
    if (rc == EMBER_OK) rc = cublas_check(handle_status, "matmul: cublasCreate");
    if (rc == EMBER_OK) rc = ecu_core->new_tensor(p.ond, p.oshape, p.dtype, in[0]->storage->device, out);
    if (rc == EMBER_OK && (*out)->numel > 0) {
        if (p.K == 0) rc = ecu_fill(*out, 0);
        else if ((rc = as_dtype(&p.a, p.dtype)) == EMBER_OK && (rc = as_dtype(&p.b, p.dtype)) == EMBER_OK)
            rc = run_batches(&p, &p.a, &p.b, *out);
    }
    ecu_core->release(p.a);
    ecu_core->release(p.b);
    return rc;
}
