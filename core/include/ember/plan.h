/* ember/plan.h: plans: trace to a plan, replay, save and load (docs/plans.md).
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/plan.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
/* ---- plans: trace to a plan, replay (docs/plans.md) ----
   ember_trace_begin opens a trace on the calling thread: every op run on it
   until ember_trace_end (the ops of the dispatch funnel, the ones backward's
   rules run, in-place writes, fused optimizer steps, random draws of the
   default generator) is recorded over slots: the n example inputs, the
   tensors that existed before the trace (live: a replay reads and writes
   them in place), constants made during the trace (their value when first
   used) and temporaries. Reading a value (ember_item, ember_copy_to_buffer)
   while tracing fails. ember_trace_end makes the plan, whose outputs are
   the given tensors; ember_trace_abort drops an open trace. One trace at a
   time. A plan replays the recorded ops in C: ember_plan_run, or a run
   opened by ember_plan_start, advanced by ember_plan_step (at least one op,
   then until `seconds` have passed; seconds < 0: to the end) and read by
   ember_plan_result (nout new references). Inputs must have the example's
   shape, dtype and device. */
typedef struct ember_plan ember_plan;
typedef struct {
    int64_t ops;           /* entries replayed */
    int64_t fused;         /* of them, fused ones */
    int64_t removed;       /* entries dropped as dead */
    int64_t arena_bytes;   /* bytes of the plan's arena, its CPU temporaries' memory (0: none; a loaded plan's is
                              laid out by its first complete run) */
    int64_t peak_bytes;    /* the most bytes of temporaries a run holds at once */
    int64_t inputs, outputs;
    int64_t patterns;      /* of the fused ones, existing fused ops chosen by pattern (linear_relu) */
    int64_t hoisted;       /* entries reading only weights and constants: run once, results kept while the
                              weights keep their versions (a forward's plan) */
} ember_plan_stats_t;
EMBER_API int ember_trace_begin(int n, ember_tensor *const *inputs);
EMBER_API int ember_trace_end(int nout, ember_tensor *const *outputs, ember_plan **out);
EMBER_API void ember_trace_abort(void);
EMBER_API int ember_is_tracing(void);
/* +1 / -1 around a library's check whose value reads only decide whether it
   raises (a label out of range): they are allowed while tracing. */
EMBER_API void ember_trace_allow_reads(int delta);
EMBER_API int ember_plan_run(ember_plan *p, ember_tensor *const *in, int nin, ember_tensor **out, int nout);
EMBER_API int ember_plan_start(ember_plan *p, ember_tensor *const *in, int nin);
EMBER_API int ember_plan_step(ember_plan *p, double seconds, int *done);
EMBER_API int ember_plan_result(ember_plan *p, ember_tensor **out, int nout);
EMBER_API void ember_plan_cancel(ember_plan *p);
EMBER_API void ember_plan_free(ember_plan *p);
EMBER_API void ember_plan_stats(const ember_plan *p, ember_plan_stats_t *out);
/* A plan in one safetensors file: the live tensors and constants as
   entries, the graph in the metadata ("ember.plan", JSON) with its format
   version ("ember.plan.version": "2" with an Adam update or an in-place
   write, else "1"). The ops of a forward and of an SGD, Adam, AdamW or
   RMSprop training step are saved
   (docs/plans.md lists them), Adam's state and step counts (the step the
   next run takes) included; a loaded plan runs on the CPU, its weights and
   optimizer state its own copies, updated in place by a saved training
   step's runs, its step counts advanced by each run. The reader refuses, naming what, a file that is truncated,
   of another version, with an unknown op, a slot read before it is
   written, absurd sizes; each op's attributes are checked against its
   inputs before it runs. */
EMBER_API int ember_plan_save(const ember_plan *p, const char *path);
EMBER_API int ember_plan_load(const char *path, ember_plan **out);
/* Names the plan's live tensor t (a parameter, optimizer state) for
   ember_plan_save, which writes it under that name (unnamed ones as
   w<slot>, constants as c<slot>): 1 to 200 printable ASCII characters, no
   quote or backslash, not of the form w<digits> or c<digits>, one tensor a
   name. t may be another header of the same memory (a detached one, as a
   state_dict gives). Returns 1 when named, 0 when the plan does not hold t. */
EMBER_API int ember_plan_name(ember_plan *p, const ember_tensor *t, const char *name);
/* A new reference to the plan's tensor of that name (a loaded plan's: the
   file's names): a weight a saved training step's runs update in place. */
EMBER_API int ember_plan_tensor(ember_plan *p, const char *name, ember_tensor **out);
/* The step counts of the plan's Adam updates, one per update in trace order:
   the step the next run uses (each completed run adds one). */
EMBER_API int64_t *ember_plan_counters(ember_plan *p, int *n);
/* ffi:end */
