/* ember/autograd.h: autograd: grad mode, recording keys, nodes, Lua rules and custom Functions,
   the backward pull loop, deterministic mode.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/autograd.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
/* ---------------------------------------------------------------- autograd
   A "key" is one recording of a GradManager (MegEngine's GradKey): while it
   records, every op on a tensor it tracks adds a node to its tape. Keys are
   small integers. While key K runs backward, its grad rules' ops are recorded
   by the active keys that started recording before K and are not in K's
   group, so an outer manager differentiates an inner one's backward. */
typedef struct ember_node ember_node;   /* a grad function; owned by its key's tape */

EMBER_API void ember_set_grad_enabled(int enabled);
EMBER_API int ember_is_grad_enabled(void);
/* How many keys record on this thread now (0 while grad mode is off): with
   one, nothing will record the backward of what is recorded now. */
EMBER_API int ember_num_recording(void);
/* A number that changes whenever what a new op would record may change on
   this thread: grad mode, a key starting or stopping to record or running
   backward, a tensor attached while recording. A result made while it had
   one value is recorded as a new one would be for as long as it keeps it
   (autocast's cast cache relies on this). */
EMBER_API uint64_t ember_autograd_serial(void);
/* A new key in `group` (0: a group of its own). */
EMBER_API int ember_key_new(int group, int *key);
EMBER_API void ember_key_free(int key);
/* Puts a key in a group (group > 0): members do not record each other's backward. */
EMBER_API void ember_key_set_group(int key, int group);
/* Starts recording (fails with EMBER_ERR_STATE when already recording). */
EMBER_API int ember_key_record(int key);
EMBER_API int ember_key_is_recording(int key);
/* Drops the tape and stops recording; safe to call any number of times. */
EMBER_API void ember_key_release(int key);
/* Tracks t from now on (attach): its gradient is accumulated by an
   AccumulateGrad node. t must be floating point. */
EMBER_API int ember_key_track(int key, ember_tensor *t);
EMBER_API int ember_key_tracks(int key, const ember_tensor *t);
/* Whether any active recording tracks t. */
EMBER_API int ember_is_tracked(const ember_tensor *t);
/* The node that produced t under the most recently started key tracking it
   (NULL for leaves and untracked tensors); output_nr gets the 0-based output. */
EMBER_API ember_node *ember_grad_fn(const ember_tensor *t, int *output_nr);
EMBER_API ember_node *ember_grad_fn_key(int key, const ember_tensor *t, int *output_nr);

/* The node t's gradient flows into under the most recent key tracking it:
   its grad_fn, or the AccumulateGrad node of an attached tensor. */
EMBER_API ember_node *ember_gradient_edge(const ember_tensor *t, int *output_nr);
/* A node stays valid while its key's generation is unchanged. */
EMBER_API int ember_node_key(const ember_node *n);
EMBER_API uint32_t ember_key_generation(int key);
/* While on, every node created is also appended to a journal the caller drains
   (saved-tensor hooks and anomaly mode look at each new node). */
EMBER_API void ember_set_node_journal(int on);
EMBER_API int ember_drain_node_journal(ember_node **nodes, int cap);

/* Node inspection. */
EMBER_API const char *ember_node_name(const ember_node *n);   /* "MulBackward", "AccumulateGrad" */
/* The op's or Function's own name, as written, then the node's name:
   "log_softmax (LogSoftmaxBackward)", "my_op (MyOpBackward)", "AccumulateGrad".
   Error messages name a node by it. */
EMBER_API const char *ember_node_label(const ember_node *n);
EMBER_API uint64_t ember_node_id(const ember_node *n);         /* unique for the process */
EMBER_API int ember_node_num_inputs(const ember_node *n);
EMBER_API int ember_node_num_outputs(const ember_node *n);
/* Input i's edge: the node its gradient flows to (NULL for untracked inputs). */
EMBER_API ember_node *ember_node_next(const ember_node *n, int i, int *output_nr);
EMBER_API int ember_node_needs_input_grad(const ember_node *n, int i);
/* The shape input i had when the op ran; returns its ndim. */
EMBER_API int ember_node_input_shape(const ember_node *n, int i, int64_t *shape);
/* The leaf tensor of an AccumulateGrad node (borrowed; NULL once freed). */
EMBER_API ember_tensor *ember_node_leaf(const ember_node *n);
/* Saved input i / output k of a node whose rule kept it (borrowed; NULL otherwise). */
EMBER_API ember_tensor *ember_node_saved_input(const ember_node *n, int i);
EMBER_API ember_tensor *ember_node_saved_output(const ember_node *n, int k);
/* Marks a node so backward stops at it and asks the caller (hooks). */
EMBER_API void ember_node_set_intercept(ember_node *n, int on);
/* Every node stops and asks the caller (debug logging, anomaly detection). */
EMBER_API void ember_set_intercept_all(int on);
/* Replaces a node's saved input i / output k (saved-tensor hooks: NULL drops
   it after packing; a tensor puts the unpacked value back, version unchecked). */
EMBER_API int ember_node_set_saved_input(ember_node *n, int i, ember_tensor *t);
EMBER_API int ember_node_set_saved_output(ember_node *n, int k, ember_tensor *t);
/* While on, nodes save copies of what they keep, so later in-place writes do
   not affect backward (allow_mutation_on_saved_tensors). */
EMBER_API void ember_set_save_copies(int on);
EMBER_API int ember_get_save_copies(void);

/* Lua rules: ops whose rule is replaced (register_grad_rule) and custom
   Functions. rule_id > 0 names the caller's rule; 0 restores the built-in. */
EMBER_API int ember_set_rule_override(const char *op, int rule_id);
/* Records a custom op on every visible key that tracks one of the inputs.
   ctx_id identifies the caller's saved state; the node's rule is rule_id.
   Returns the number of nodes made (one per such key, all holding ctx_id),
   or a status < 0. The node keeps a copy of name, at most
   EMBER_NODE_NAME_MAX bytes (a longer one is an error). */
enum { EMBER_NODE_NAME_MAX = 48 };
EMBER_API int ember_record_custom(const char *name, int rule_id, int ctx_id, int nin,
                                  ember_tensor *const *in, int nout, ember_tensor *const *out);
/* ctx ids of nodes freed since the last call (up to cap): an id comes back
   once for each node ember_record_custom made with it. */
EMBER_API int ember_drain_freed_ctx(int *ids, int cap);

/* Backward is a pull loop: begin, then step until EMBER_DONE; a step that
   returns EMBER_NEED_LUA leaves a request in *req for the caller. */
typedef struct ember_backward_run ember_backward_run;
enum { EMBER_REQ_NODE = 1, EMBER_REQ_LEAF = 2 };
typedef struct ember_backward_req {
    int kind;               /* EMBER_REQ_NODE: compute a node's input grads;
                               EMBER_REQ_LEAF: an attached tensor's gradient is complete */
    int rule_id;            /* NODE: the Lua rule (0: built-in, intercepted for hooks);
                               LEAF: nonzero when the AccumulateGrad node is intercepted
                               (node hooks, debug logging, anomaly mode) */
    int ctx_id;
    ember_node *node;
    int num_grads;          /* NODE: one per output (NULL where none); LEAF: 1 */
    ember_tensor **grads;   /* borrowed */
    ember_tensor *tensor;   /* LEAF: the attached tensor (borrowed) */
} ember_backward_req;

/* ys and dys: n tensors each; a dy may be NULL for a one-element y (ones). */
EMBER_API int ember_backward_begin(int key, int n, ember_tensor *const *ys, ember_tensor *const *dys,
                                   ember_backward_run **run);
EMBER_API int ember_backward_step(ember_backward_run *run, ember_backward_req *req);
/* ember_backward_step with a deadline on ember_clock() (a host's frame
   budget): it runs at least one node (or hands out one request), then returns
   EMBER_PAUSED once the deadline has passed; call it again to go on. While a
   run is open, an in-place write into a tensor one of its unfinished nodes
   saved fails (EMBER_ERR_STATE) instead of spoiling the run. */
EMBER_API int ember_backward_step_until(ember_backward_run *run, ember_backward_req *req, double deadline);
/* Seconds on a monotonic clock: what deadlines are measured on. */
EMBER_API double ember_clock(void);

/* Deterministic mode (off by default): every op's result is the same to the
   bit for any ember_set_num_threads and from run to run. It costs speed in
   matrix products and convolutions (docs/design.md has the figures); every
   op of the CPU backend is covered, none has to refuse. */
EMBER_API void ember_set_deterministic(int on);
EMBER_API int ember_is_deterministic(void);
/* Answers a NODE request with one gradient per input (NULL: none). */
EMBER_API int ember_backward_supply(ember_backward_run *run, int n, ember_tensor *const *grads);
/* Runs the built-in rule of the request's node on the given output grads
   without routing: grad_in gets one new reference per input (NULL: none). */
EMBER_API int ember_backward_builtin_grads(ember_backward_run *run, int n, ember_tensor *const *grads,
                                           ember_tensor **grad_in);
/* Answers a NODE request with the built-in rule on the given output grads. */
EMBER_API int ember_backward_builtin(ember_backward_run *run, int n, ember_tensor *const *grads);
/* Ends the run (also after an error) and releases the key's history. */
EMBER_API void ember_backward_end(ember_backward_run *run);

typedef struct {
    int64_t live_nodes;
    int64_t saved_tensors;
    int64_t bwd_cache_hits;
    int64_t bwd_cache_misses;
} ember_autograd_stats_t;
EMBER_API void ember_autograd_stats(ember_autograd_stats_t *out);
/* ffi:end */
