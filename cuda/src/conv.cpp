/* conv.cpp: conv2d and its two adjoints through cuDNN 9's legacy
   convolution calls. The core plans the geometry and the errors
   (ember__conv_plan_make, as on the CPU); conv_plan.h turns it into
   descriptors and picks the algorithm from cuDNN's heuristics (the first
   that succeeds, keeps to the allowed math, and whose workspace the caching
   allocator can give). One cuDNN handle, made on first use, on the legacy
   default stream like every other kernel of the backend; the descriptors
   live for one call and are destroyed on every path. */
#include <pthread.h>

#include "conv_plan.h"
#include "cuda_backend.h"

static cudnnHandle_t handle;
static cudnnStatus_t handle_status;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;

static void make_handle(void) { handle_status = cudnnCreate(&handle); }

static int cudnn_check(cudnnStatus_t st, const char *op, const char *call)
{
    if (st == CUDNN_STATUS_SUCCESS) return EMBER_OK;
    return ecu_core->fail(st == CUDNN_STATUS_ALLOC_FAILED ? EMBER_ERR_OOM : EMBER_ERR_DEVICE, "%s: %s: %s", op, call,
                          cudnnGetErrorString(st));
}

/* fn(...), failing with the op, fn's name and cuDNN's message */
#define CUDNN_TRY(op, fn, ...) EMBER_TRY(cudnn_check(fn(__VA_ARGS__), op, #fn))

namespace {

/* one call's descriptors, destroyed with it */
struct conv_descriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    conv_descriptors() = default;
    conv_descriptors(const conv_descriptors &) = delete;
    conv_descriptors &operator=(const conv_descriptors &) = delete;
    ~conv_descriptors()
    {
        if (x) cudnnDestroyTensorDescriptor(x);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
    }
};

/* the workspace of the algorithm being tried, given back with the call */
struct workspace {
    void *p = nullptr;
    size_t bytes = 0;
    workspace() = default;
    workspace(const workspace &) = delete;
    workspace &operator=(const workspace &) = delete;
    ~workspace() { release(); }
    void release()
    {
        if (p) ecu_free(p, bytes);
        p = nullptr;
        bytes = 0;
    }
    bool take(size_t n)
    {
        release();
        if (n == 0) return true;
        p = ecu_alloc(n);
        if (p) bytes = n;
        return p != nullptr;
    }
};

}   // namespace

static int describe(const char *op, const ecu_conv_desc &d, conv_descriptors *s)
{
    CUDNN_TRY(op, cudnnCreateTensorDescriptor, &s->x);
    CUDNN_TRY(op, cudnnCreateTensorDescriptor, &s->y);
    CUDNN_TRY(op, cudnnCreateFilterDescriptor, &s->w);
    CUDNN_TRY(op, cudnnCreateConvolutionDescriptor, &s->conv);
    CUDNN_TRY(op, cudnnSetTensor4dDescriptor, s->x, CUDNN_TENSOR_NCHW, d.data, d.x[0], d.x[1], d.x[2], d.x[3]);
    CUDNN_TRY(op, cudnnSetTensor4dDescriptor, s->y, CUDNN_TENSOR_NCHW, d.data, d.y[0], d.y[1], d.y[2], d.y[3]);
    CUDNN_TRY(op, cudnnSetFilter4dDescriptor, s->w, d.data, CUDNN_TENSOR_NCHW, d.w[0], d.w[1], d.w[2], d.w[3]);
    CUDNN_TRY(op, cudnnSetConvolution2dDescriptor, s->conv, d.pad[0], d.pad[1], d.stride[0], d.stride[1],
              d.dilation[0], d.dilation[1], CUDNN_CROSS_CORRELATION, d.compute);
    CUDNN_TRY(op, cudnnSetConvolutionGroupCount, s->conv, d.groups);
    CUDNN_TRY(op, cudnnSetConvolutionMathType, s->conv, d.math);
    return EMBER_OK;
}

/* what one call's algorithms run with */
struct conv_call {
    const char *op;
    cudnnMathType_t math;           /* the math allowed */
    bool deterministic;             /* only deterministic algorithms */
    cudnnConvolutionDescriptor_t conv;
    const void *one, *zero;         /* alpha and beta, in the compute type */
    void *res;
};

/* the most algorithms cuDNN ranks for one of the three products */
constexpr int MAX_ALGOS = 8;
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= MAX_ALGOS && CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= MAX_ALGOS &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= MAX_ALGOS, "MAX_ALGOS");

/* One of the three products, which cuDNN's calls share the shape of: rank
   (handle, d1, d2, conv, d3, ...) ranks the algorithms, run (handle, alpha,
   d1, p1, d2, p2, conv, algo, workspace, bytes, beta, d3, res) runs one.
   Takes the first that fits (conv_plan.h) and runs it. */
template <class D1, class D2, class D3, class Perf, class Algo>
static int run_best(const conv_call &c,
                    cudnnStatus_t (*rank)(cudnnHandle_t, D1, D2, cudnnConvolutionDescriptor_t, D3, int, int *, Perf *),
                    cudnnStatus_t (*run)(cudnnHandle_t, const void *, D1, const void *, D2, const void *,
                                         cudnnConvolutionDescriptor_t, Algo, void *, size_t, const void *, D3, void *),
                    D1 d1, const void *p1, D2 d2, const void *p2, D3 d3)
{
    Perf perf[MAX_ALGOS];
    int n = 0;
    EMBER_TRY(cudnn_check(rank(handle, d1, d2, c.conv, d3, MAX_ALGOS, &n, perf), c.op, "ranking the algorithms"));
    workspace ws;
    bool short_of_memory = false;
    int k = ecu_conv_pick(perf, n, c.math, c.deterministic, [&](size_t bytes) {
        bool got = ws.take(bytes);
        short_of_memory |= !got;
        return got;
    });
    if (k < 0)
        return ecu_core->fail(short_of_memory ? EMBER_ERR_OOM : EMBER_ERR_DEVICE,
                              "%s: none of cuDNN's %d ranked algorithms runs %s", c.op, n,
                              short_of_memory ? "with a workspace the device can give"
                              : c.deterministic ? "deterministically under the allowed math"
                                                : "under the allowed math");
    CUDNN_TRY(c.op, cudnnSetConvolutionMathType, c.conv, perf[k].mathType);
    return cudnn_check(run(handle, c.one, d1, p1, d2, p2, c.conv, perf[k].algo, ws.p, ws.bytes, c.zero, d3, c.res),
                       c.op, "running the algorithm");
}

/* res = the op over a and b, all contiguous (conv.h's roles: FWD (x, w) -> y,
   BWD_INPUT (gy, w) -> gx, BWD_WEIGHT (x, gy) -> gw) */
static int convolve(int op, const ecu_conv_desc &d, const void *a, const void *b, void *res)
{
    const char *name = ecu_core->op_names[op];
    conv_descriptors s;
    EMBER_TRY(describe(name, d, &s));
    const double one64 = 1, zero64 = 0;
    const float one32 = 1, zero32 = 0;
    const bool f64 = d.data == CUDNN_DATA_DOUBLE;
    const conv_call c = {name, d.math, ecu_core->deterministic() != 0, s.conv, f64 ? (const void *)&one64 : &one32,
                         f64 ? (const void *)&zero64 : &zero32, res};
    switch (op) {
    case EMBER_OP_CONV2D:
        return run_best(c, cudnnGetConvolutionForwardAlgorithm_v7, cudnnConvolutionForward, s.x, a, s.w, b, s.y);
    case EMBER_OP_CONV2D_BACKWARD_INPUT:
        return run_best(c, cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnConvolutionBackwardData, s.w, b, s.y, a,
                        s.x);
    case EMBER_OP_CONV2D_BACKWARD_WEIGHT:
        return run_best(c, cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnConvolutionBackwardFilter, s.x, a, s.y,
                        b, s.w);
    default: return ecu_core->fail(EMBER_ERR_UNSUPPORTED, "%s: not a convolution", name);
    }
}

/* conv2d, conv2d_backward_input, conv2d_backward_weight */
int ecu_fwd_conv(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ecu_core->op_names[op];
    ember__conv_geom g;
    int64_t rs[4];
    EMBER_TRY(ecu_core->conv_plan(op, in, at, &g, rs));
    ecu_conv_desc d;
    int dt = in[0]->dtype;
    if (!ecu_conv_describe(g, dt, ecu_core->allow_tf32() != 0, &d))
        return ecu_core->fail(EMBER_ERR_SHAPE, "%s: a %s operand passes cuDNN's int range (input {%lld, %lld, %lld, "
                              "%lld}, output {%lld, %lld, %lld, %lld})", name, ecu_core->dtype_name(dt),
                              (long long)g.N, (long long)g.C, (long long)g.H, (long long)g.W, (long long)g.N,
                              (long long)g.O, (long long)g.Ho, (long long)g.Wo);
    EMBER_TRY(ecu_core->new_tensor(4, rs, dt, in[0]->storage->device, out));
    if ((*out)->numel == 0) return EMBER_OK;
    if (g.N == 0 || g.K == 0 || g.Og == 0) return ecu_fill(*out, 0);   /* an empty sum */
    pthread_once(&handle_once, make_handle);
    EMBER_TRY(cudnn_check(handle_status, name, "cudnnCreate"));
    ecu_operand a, b;
    int rc = ecu_operand_init(&a, in[0]);
    if (rc == EMBER_OK) rc = ecu_operand_init(&b, in[1]);
    if (rc == EMBER_OK) rc = convolve(op, d, a.data, b.data, ecu_data(*out));
    return rc;
}
