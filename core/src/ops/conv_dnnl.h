/* conv_dnnl.h: conv_dnnl.c's primitives (made per geometry and thread
   count, cached), as conv_dnnl_wgrad.c uses them too. */
#ifndef EMBER_CONV_DNNL_H
#define EMBER_CONV_DNNL_H

#include "conv.h"
#include "dnnl_inc.h"

#ifdef EMBER_HAVE_DNNL
enum { ARG_A, ARG_B, ARG_RES, NARGS };
enum { KEY_LEN = 17, MAX_CACHED = 256 };

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
} dnnl_conv;

/* the layouts a gradient writer may be asked for */
enum { GZ_NCHW = 1 << 0, GZ_BLOCKED = 1 << 1 };

/* the cache key of a primitive for kind, geometry and thread count */
void ember__dnnl_conv_key(conv_kind kind, bool fused, const conv_geom *g, int nthr, int64_t *key);
/* the primitive for the key (conv NULL where oneDNN declined the geometry:
   it is not asked again), and whether the caller must destroy it */
dnnl_conv *ember__dnnl_conv_get(conv_kind kind, bool fused, const conv_geom *g, const int64_t *key, bool *owned);
void ember__dnnl_conv_destroy(dnnl_conv *c);
/* Runs the product on user[] (ember's layouts), reordering what the
   primitive wants in another layout; an operand given in inner[] is in the
   primitive's layout already and is read as it is. */
bool ember__dnnl_conv_execute(const dnnl_conv *c, conv_kind kind, void *const *user, void *const *inner,
                              const float *bias);
/* md is the convolution's output (N, O, Ho, Wo) in aBcd16b */
bool ember__dnnl_blocked16(const dnnl_memory_desc_t *md, const conv_geom *g);

/* gw from x and gy, gy in ember's layout (gy_layout 0) or in GZ_NCHW /
   GZ_BLOCKED as the full batch's primitive reads it; false where a group's
   primitive is missing or wants gy in another layout. The groups run as
   one job of ember's pool, each on one thread. */
bool ember__dnnl_weight_grad(const conv_geom *g, const float *x, const void *gy, int gy_layout, float *gw);
#endif

#endif
