/* plan.h: traces and plans (docs/plans.md). A trace records every op that
   runs on the tracing thread while it is open: the ops of the dispatch funnel
   (forward ops and the ops grad rules run), the in-place writes, the fused
   optimizer updates and the random draws, each as one entry over slots. A
   plan replays the entries in C: slots are the call's inputs, the live
   tensors the traced function closed over (parameters, optimizer state:
   read and written in place), constants made during the trace (snapshots)
   and temporaries, released after their last use. */
#ifndef EMBER_PLAN_H
#define EMBER_PLAN_H

#include "../ops/ops.h"

/* What an entry does: an op of the funnel, or one of the calls that write or
   make tensor data outside it. */
enum {
    PE_OP = 0,     /* ember__run_nograd(op, ...) */
    PE_BINARY_,    /* add_ ... pow_ (op): slots a, b */
    PE_UNARY_,     /* the unary in-place ops and clamp_ (op, attrs): slot a */
    PE_COPY_,      /* copy_: slots a, src */
    PE_FILL_,      /* fill_ (f[0]): slot a */
    PE_SGD,        /* sgd_step_: slots p, g, buf (-1: none); f lr, momentum, dampening, wd; i nesterov, maximize */
    PE_ADAM,       /* adam_step_: slots p, g, m, v, vmax (-1); f lr, b1, b2, eps, wd; i decoupled, maximize,
                      the step counter's index */
    PE_RANDOM,     /* a random tensor of the default generator: i dist, dtype, device, ndim, shape...; f a, b;
                      one output */
    PE_RANDOM_,    /* a random fill in place of the default generator: i dist; f a, b; slot t */
    PE_VIEW,       /* a view made outside the ops (detach): i ndim, offset, shape, strides; slot t, one output */
    PE_FUSED,      /* an elementwise chain in one loop (fuse.c): i nsteps, then op, operand, operand per step;
                      sub: the entries it replaced (what a saved plan holds) */
    PE_COUNT
};

/* The arguments of an entry that is not an op of the funnel. */
typedef struct ember__call_args {
    int64_t i[4 + 2 * EMBER_MAX_DIMS];
    double f[6];
} ember__call_args;

/* While this thread traces: nonzero. The hooks below do nothing otherwise. */
extern EMBER_TLS int ember__trace_on;

/* A traced call: ember__trace_enter before the call's work (its own ops are
   then not recorded), ember__trace_leave after it with the call's status;
   the entry is recorded when the call was the outermost one and succeeded.
   ins / outs: the call's tensor operands and its new results. */
int ember__trace_enter(void);
int ember__trace_leave(int depth, int rc, int kind, int op, int nin, ember_tensor *const *in, int nout,
                       ember_tensor *const *out, const ember_attrs *at, const ember__call_args *args);
/* A tensor with new memory made on the tracing thread (ember__new): outside
   any traced call a constant of the trace (a factory, a Lua number). */
void ember__trace_born(const ember_tensor *t);
/* Any new tensor header on the tracing thread (tensor.c): what the trace
   knew of a freed tensor at the same address is forgotten. */
void ember__trace_header(const ember_tensor *t);
/* A view made outside the ops (ember_detach): recorded as an entry. A
   failure fails the trace (ember_trace_end reports it). */
void ember__trace_view(const ember_tensor *a, ember_tensor *view);
/* Fails naming `what` when called outside a traced call while tracing: a
   read of a value inside the traced function. */
int ember__trace_read(const char *what);

/* Which operands an entry of `kind` writes in place (a bit per input). */
unsigned ember__plan_written(int kind);

/* The in-place forms and the random draws, for the replay (inplace.c, random.c). */
int ember__binary_inplace(int op, ember_tensor *a, ember_tensor *b);
int ember__unary_inplace(int op, ember_tensor *a, const ember_attrs *at);
int ember__random_new(int dist, double a, double b, int ndim, const int64_t *shape, int dtype, int device,
                      ember_tensor **out);
int ember__random_fill(int dist, double a, double b, ember_tensor *t);

/* ------------------------------------------------------------------ the arena (arena.c) */
typedef struct plan_arena plan_arena;
enum { EMBER__OFFER_MAX = 8 };
/* The regions of the arena the running entry's outputs are planned in. */
typedef struct ember__arena_offer {
    int n;
    struct plan_region *r[EMBER__OFFER_MAX];
    int32_t slot[EMBER__OFFER_MAX];
    uint8_t taken[EMBER__OFFER_MAX];
} ember__arena_offer;
/* Set while a plan's entry runs on this thread (NULL otherwise). */
extern EMBER_TLS ember__arena_offer *ember__plan_offer;
/* ember__new: gives the new CPU storage s (s->nbytes set, no data yet) a
   region of the offer of its exact size, if one is free: s->data and its
   release set; s->data stays NULL otherwise. */
void ember__plan_claim(ember_storage *s);

/* ------------------------------------------------------------------ the plan */
enum { SLOT_INPUT = 0, SLOT_LIVE, SLOT_CONST, SLOT_TEMP };

typedef struct plan_slot {
    int kind;
    int index;              /* SLOT_INPUT: which input */
    ember_tensor *tensor;   /* SLOT_LIVE: the live tensor; SLOT_CONST: the snapshot */
    int written;            /* SLOT_CONST: written in place by the plan: a fresh copy per run */
    int last_use;           /* the last entry that reads it (-1: none) */
    int is_output;
} plan_slot;

typedef struct plan_entry {
    int16_t kind, op;
    int32_t nin, nout;
    int32_t *slots;   /* nin inputs, then nout outputs (-1: an absent optional operand) */
    int32_t *release; /* slots whose last use this entry is, ended by -1 */
    ember_attrs at;
    ember__call_args args;
    struct plan_entry *sub;   /* PE_FUSED: the entries it replaced */
    int nsub;
} plan_entry;

struct ember_plan {
    int nslots, nentries, ninputs, noutputs, ncounters;
    plan_slot *slots;
    plan_entry *entries;
    int32_t *outputs;        /* slot per output */
    int32_t *inputs_dtype;   /* the example inputs' dtype, ndim, shape */
    int32_t *inputs_ndim;
    int64_t (*inputs_shape)[EMBER_MAX_DIMS];
    int32_t *inputs_device;
    int64_t (*inputs_strides)[EMBER_MAX_DIMS];   /* and, for an input whose memory the plan views */
    int64_t *inputs_offset;                      /* (inputs_viewed), its layout */
    uint8_t *inputs_viewed;
    int64_t *counters;       /* the optimizer step counters (Adam's step), one per PE_ADAM */
    int64_t arena_bytes, peak_bytes, removed, patterns;
    uint8_t *owned;          /* per slot: a run holds a reference of its own (temporaries, written constants) */
    /* an open run (ember_plan_start): the slots' tensors and the next entry */
    ember_tensor **vals;
    int next, running;
    int checked;             /* loaded from a file: each entry is checked before it runs */
    /* the memory plan (arena.c): per slot, the region its storage is planned in (-1: none) */
    int32_t *region_of;
    int64_t *region_off, *region_bytes;
    int nregions;
    int arena_off;           /* a storage was found where the plan did not put it: no arena from then on */
    plan_arena *arena;       /* allocated at the first run */
    /* a loaded plan's memory plan, worked out from its first complete run: while it is pending, a run keeps
       each slot's tensor (first_held) until its end, then lays the arena out over them */
    int arena_pending;
    ember_tensor **first_held;
    char **names;            /* per slot: a weight's or constant's name in the file (NULL: w<slot>, c<slot>) */
    /* entries run once and their results kept (hoist.c): per entry whether; per slot the kept tensor; the
       live slots they read and those slots' storage versions when the kept results were made */
    uint8_t *hoisted;
    ember_tensor **kept;
    int32_t *hoist_live;
    int64_t *hoist_version;
    int nhoisted, nhoist_live;
    int kept_ok;             /* the kept results are complete and the live tensors unchanged */
    int32_t *group;          /* per entry: how many entries from it a whole run runs as one job (updates.c) */
};

/* What a trace hands the plan builder (replay.c); the builder takes the
   entries and the slots' tensors. */
typedef struct tracer_view {
    plan_slot *slots;
    ember_tensor **held;   /* the slots' tensors in the trace */
    int nslots;
    plan_entry *entries;
    int nentries, ninputs, nadam;
    const int32_t *outputs;
    int noutputs;
} tracer_view;
int ember__plan_build(const tracer_view *v, ember_plan **out);
/* The parts the builder and the file reader (plan_io.c) share (replay.c). */
ember_plan *ember__plan_alloc(int nslots, int nentries, int ninputs, int noutputs, int ncounters);
int ember__plan_finish(ember_plan *p, ember_tensor *const *held);
void ember__plan_free_parts(ember_plan *p);
/* A plan from an open safetensors file (path names it in messages). */
int ember__plan_from_st(ember_st_file *f, const char *path, ember_plan **out);
/* Fuses the elementwise chains of a traced plan (held: its slots' tensors
   in the trace); runs a fused entry (fuse.c). */
int ember__plan_fuse(ember_plan *p, ember_tensor *const *held);
/* Substitutes the existing fused ops for the chains they compute to the
   bit (linear, add, relu: linear_relu) (fuse.c). */
int ember__plan_patterns(ember_plan *p, ember_tensor *const *held);
int ember__fused_run(const plan_entry *e, ember_tensor *const *in, ember_tensor **out);
/* The memory plan of a traced plan: each temporary's offset in the arena
   by its lifetime (held: the slots' tensors in the trace). */
int ember__plan_arena_layout(ember_plan *p, ember_tensor *const *held);
/* A run's start: the arena allocated (at the first run). */
int ember__plan_arena_begin(ember_plan *p);
/* An entry's offer (its outputs' regions): how many; after the entry, the
   regions checked against its outputs' storages (vals: the slots' tensors). */
int ember__plan_arena_offer(const ember_plan *p, const plan_entry *e, ember__arena_offer *o);
void ember__plan_arena_check(ember_plan *p, const ember__arena_offer *o, ember_tensor *const *vals);
void ember__plan_arena_free(ember_plan *p);
/* Entries of a forward's plan that read only unwritten live tensors and
   constants (hoist.c): marked at build (before the arena's layout: their
   results stay outside it), kept at the first run, taken by later runs
   while the live tensors they read keep their versions. */
int ember__plan_hoist(ember_plan *p);
void ember__plan_hoist_begin(ember_plan *p);      /* a run's start: the kept results still valid? */
int ember__plan_hoist_take(ember_plan *p, int e);  /* 1: entry e's outputs set from the kept results */
void ember__plan_hoist_keep(ember_plan *p, int e); /* after entry e ran: its outputs kept */
void ember__plan_hoist_free(ember_plan *p);
/* A traced forward's convolutions whose kernels have taps that read only
   padding: their weight cropped to the live taps by a view and a copy
   before them (hoisted), the convolution's padding to match (taps.c);
   *held_out: held and the new slots' tensors in the trace (NULL: none). */
int ember__plan_crop_taps(ember_plan *p, ember_tensor *const *held, ember_tensor ***held_out);
/* Consecutive SGD updates marked as groups (at build), and a group run as
   one job on the pool (updates.c): the number of entries it ran from e0, or
   0 where they must run one by one (not a group, or an update exec would
   refuse; vals: the run's slots). */
int ember__plan_group_updates(ember_plan *p);
int ember__plan_updates_run(ember_plan *p, int e0, ember_tensor *const *vals);
/* A loaded plan's op: its attributes against its inputs (plan_io.c). */
int ember__plan_check_entry(const plan_entry *e, ember_tensor *const *in);

#endif
