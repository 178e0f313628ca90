/* conv_dnnl.h: what conv_dnnl.c (the engine, the primitives' table, running
   one product) lends conv_dnnl_fused.c (the fused ops) and
   conv_dnnl_wgrad.c (the weight gradient in fixed sample groups).
   Built only with oneDNN (EMBER_HAVE_DNNL). */
#ifndef EMBER_CONV_DNNL_H
#define EMBER_CONV_DNNL_H

#include <stdatomic.h>

#include "conv.h"
#include "dnnl_inc.h"

#ifdef EMBER_HAVE_DNNL

/* a product's operands: ARG_A and ARG_B in, ARG_RES out */
enum { ARG_A, ARG_B, ARG_RES, NARGS };
enum { KEY_LEN = 18, MAX_CACHED = 256 };
/* a primitive's variant: float32, float32 with a bias and a ReLU post-op,
   or bfloat16 operands with a float32 result (conv_dnnl.c's conv_create) */
enum { DNNL_F32, DNNL_F32_RELU, DNNL_BF16 };

typedef struct {
    int64_t key[KEY_LEN];
    dnnl_primitive_t conv;
    bool fused;                   /* a forward with a bias and a ReLU post-op */
    dnnl_memory_desc_t bias;
    /* ember's layout and the primitive's for a, b and res; a reorder between
       them where they differ (into the primitive for a and b, out of it for res) */
    dnnl_memory_desc_t user[NARGS], inner[NARGS];
    dnnl_primitive_t reorder[NARGS];
    size_t inner_bytes[NARGS];
    dnnl_memory_desc_t scratch;   /* the primitive's scratchpad, taken from ember's blocks */
    size_t scratch_bytes;
    /* a stream and memory objects over these descriptors, kept for the next
       call (conv_dnnl.c's execute): whichever call takes busy first uses
       them, pointed at its buffers; a call finding them taken makes its own */
    atomic_flag busy;
    struct dnnl_conv_mems *kept;
} dnnl_conv;

/* the layouts a gradient writer may be asked for */
enum { GZ_NCHW = 1 << 0, GZ_BLOCKED = 1 << 1 };

/* A product's key in the table of primitives: its kind, its variant, the
   geometry and the thread count the primitive is made for. */
void ember__dnnl_conv_key(conv_kind kind, int variant, const conv_geom *g, int nthr, int64_t *key);
/* The primitive for the key (conv NULL where oneDNN declined the geometry:
   it is not asked again), and whether the caller must destroy it. */
dnnl_conv *ember__dnnl_conv_get(conv_kind kind, int variant, const conv_geom *g, const int64_t *key, bool *owned);
void ember__dnnl_conv_destroy(dnnl_conv *c);
/* Runs the product on user[] (ember's layouts), reordering what the
   primitive wants in another layout; an operand given in inner[] is in the
   primitive's layout already and is read as it is (the result, written so
   and left there). */
bool ember__dnnl_conv_execute(const dnnl_conv *c, conv_kind kind, void *const *user, void *const *inner,
                              const float *bias);
/* Every call into oneDNN's convolutions starts with ember__dnnl_enter (false:
   oneDNN is off; else *nthr the primitives' thread count, the caller's
   OpenMP team set to it) and ends with ember__dnnl_leave. */
bool ember__dnnl_enter(const conv_geom *g, int *nthr, int *omp_before);
void ember__dnnl_leave(int nthr, int omp_before);
/* Whether relu's post-op gives relu's values on these operands (no NaN can
   arise in the sums). */
bool ember__dnnl_relu_exact(const conv_geom *g, const float *x, const float *w, const float *bias);
/* md is the convolution's output (N, O, Ho, Wo) in aBcd16b (conv_dnnl_fused.c) */
bool ember__dnnl_blocked16(const dnnl_memory_desc_t *md, const conv_geom *g);
/* gw (float32) from x and gy (float32, or bfloat16 in variant DNNL_BF16),
   gy in ember's layout (gy_layout 0) or in GZ_NCHW /
   GZ_BLOCKED as the full batch's primitive reads it; false where a group's
   primitive is missing or wants gy in another layout. The groups run as
   one job of ember's pool, each on one thread (conv_dnnl_wgrad.c). */
bool ember__dnnl_weight_grad(const conv_geom *g, int variant, const void *x, const void *gy, int gy_layout, float *gw);

/* the engine every primitive is made on (conv_dnnl.c) */
dnnl_engine_t ember__dnnl_engine(void);
/* conv_dnnl_wcache.c: weight w of the product c (its contents at wdata in
   c->user[ARG_B]) in c->inner[ARG_B], kept on w's storage while its version
   lasts, or NULL where it is not kept; read ember__dnnl_wcache_data, then
   give it back (ember__dnnl_wcache_done, which takes NULL). */
typedef struct ember__dnnl_wentry ember__dnnl_wentry;
ember__dnnl_wentry *ember__dnnl_wcache_get(const dnnl_conv *c, const ember_tensor *w, const void *wdata);
const void *ember__dnnl_wcache_data(const ember__dnnl_wentry *e);
void ember__dnnl_wcache_done(ember__dnnl_wentry *e);

#endif
#endif
