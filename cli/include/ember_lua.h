/*
 * ember_lua.h: embedding ember's Lua layer in a C or C++ host (libember_lua).
 *
 * A host that only needs tensors and autograd links libember and uses ember.h;
 * no Lua is involved. A host that wants models and training loops written in
 * Lua (a game, a tool) links libember_lua, which runs LuaJIT with
 * require("ember") done, and passes tensors between C and Lua without copying:
 *
 *     ember_lua *E = ember_lua_open();
 *     if (!E) { fprintf(stderr, "%s\n", ember_lua_error(NULL)); return 1; }
 *     if (ember_lua_dofile(E, "model.lua") != EMBER_OK)
 *         fprintf(stderr, "%s\n", ember_lua_error(E));
 *     ember_tensor *frame = NULL, *loss = NULL;
 *     ember_from_blob(pixels, 2, shape, NULL, EMBER_FLOAT32, NULL, NULL, &frame);
 *     if (ember_lua_call(E, "step", 1, &frame, 1, &loss) == EMBER_OK) { ... }
 *     ember_tensor_release(loss);
 *     ember_tensor_release(frame);
 *     ember_lua_close(E);
 *
 * Conventions (those of ember.h):
 *   - Tensor arguments are borrowed. A tensor handed to Lua gets its own
 *     reference (ember_tensor_retain), so the host may release its own at any
 *     time; Lua drops its reference when the Lua object is collected or the
 *     state closes. Tensors returned through `ember_tensor **out` carry one new
 *     reference the caller owns; on failure every *out is NULL.
 *   - Every function that can fail returns EMBER_OK (0) or a negative status
 *     and leaves a message for ember_lua_error(E): EMBER_ERR_ARG (a NULL or an
 *     out-of-range argument, a value that is not a tensor), EMBER_ERR_IO (a
 *     file that cannot be read), EMBER_ERR_LUA (a Lua error: syntax or run
 *     time; the message carries the Lua traceback), EMBER_ERR_OOM. Nothing here
 *     aborts the host: Lua errors are caught at the boundary. (A script that
 *     calls os.exit does end the process, as it would in luajit.)
 *   - A handle is used from one thread at a time. Several handles may be open
 *     at once; a tensor may be shared with one of them at a time (handing it to
 *     a second one fails with EMBER_ERR_ARG).
 *   - A tensor wrapped around host memory (ember_from_blob) is seen by Lua
 *     without a copy. Bump its version (ember_tensor_bump_version) after the
 *     host writes into it, so that autograd's checks see the change.
 *
 * Where the Lua package is found, without environment variables: next to the
 * library after install (<prefix>/share/lua/5.1, relative to where
 * libember_lua is), then the source tree it was built from, then the
 * configured install prefix. require("ember") then loads the very libember
 * this process is linked with; if $EMBER_LIB names another copy,
 * ember_lua_open fails (two copies cannot share tensors).
 */
#ifndef EMBER_LUA_H
#define EMBER_LUA_H

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define EMBER_LUA_API __declspec(dllexport)
#else
#define EMBER_LUA_API __attribute__((visibility("default")))
#endif

struct lua_State;
typedef struct ember_lua ember_lua;   /* opaque: one LuaJIT state with ember loaded */

/* A Lua error (syntax or run time), beside ember.h's EMBER_ERR_* codes. */
enum { EMBER_ERR_LUA = -20 };

/* Flags of ember_lua_open_ex. */
enum {
    /* Accept a libember other than the one this process links (the ember
       command uses it: it never passes tensors between C and Lua). */
    EMBER_LUA_ANY_LIBRARY = 1
};

/* A new LuaJIT state with the standard libraries, package.path set up,
   require("ember") done and the global `ember` set. Returns NULL when the
   state cannot be created or ember cannot be loaded; ember_lua_error(NULL)
   then says why. */
EMBER_LUA_API ember_lua *ember_lua_open(void);
EMBER_LUA_API ember_lua *ember_lua_open_ex(int flags);
/* Closes the state; every tensor Lua still holds is released. NULL is a no-op. */
EMBER_LUA_API void ember_lua_close(ember_lua *E);
/* The underlying lua_State, for hosts that use the Lua C API directly. */
EMBER_LUA_API struct lua_State *ember_lua_state(ember_lua *E);

/* The message of E's last failure, with the Lua traceback when there is one
   ("" if none); it stays valid until the next call on E. With E == NULL:
   ember_last_error(), which says why ember_lua_open (or a call given a NULL
   handle) failed until the next ember call on this thread. */
EMBER_LUA_API const char *ember_lua_error(const ember_lua *E);

/* Runs a Lua file / a chunk of Lua source in E's global environment. */
EMBER_LUA_API int ember_lua_dofile(ember_lua *E, const char *path);
EMBER_LUA_API int ember_lua_dostring(ember_lua *E, const char *code);

/* Calls the Lua function named `fn` (a global, or a dotted path such as
   "model.step") with nin tensors (a NULL entry is passed as nil) and stores
   its first nout results in out[0..nout-1]. Each result must be a tensor or
   a number (which becomes a 0-d float32 tensor); a missing or other result
   fails with EMBER_ERR_ARG, naming it. Extra results are ignored. */
EMBER_LUA_API int ember_lua_call(ember_lua *E, const char *fn, int nin, ember_tensor *const *in,
                                 int nout, ember_tensor **out);

/* Sets the global `name` (dotted paths allowed: "model.input") to a Lua
   tensor sharing t (nil when t is NULL). */
/* Stops the Lua code E is running (in ember_lua_dofile, _dostring or _call)
   at its next instruction outside ember's own Lua code: that call then
   returns EMBER_ERR_LUA with "interrupted (ember_lua_interrupt)" at the
   user's line, and E stays usable. Safe from a signal handler (a host's
   Ctrl-C) and from any thread. When E runs nothing it does nothing. Like
   the ember command's Ctrl-C, it cannot reach a JIT-compiled loop or a
   long C call until they end. Returns EMBER_OK, or EMBER_ERR_ARG for NULL
   (with no message, to stay signal-safe). */
EMBER_LUA_API int ember_lua_interrupt(ember_lua *E);

EMBER_LUA_API int ember_lua_set_tensor(ember_lua *E, const char *name, ember_tensor *t);
/* The tensor held by the global `name` (dotted paths allowed); *out gets a
   new reference. Fails with EMBER_ERR_ARG if it is not a live tensor. */
EMBER_LUA_API int ember_lua_get_tensor(ember_lua *E, const char *name, ember_tensor **out);

/* For hosts working on the lua_State directly. These work on any state in
   which require("ember") has been done with the library this process links.
   push: pushes the Lua tensor sharing t (nil for NULL) and returns EMBER_OK,
   or pushes nothing and returns a status (message in ember_last_error()):
   EMBER_ERR_STATE when the state has not loaded ember, or loaded another copy
   of libember than this program links.
   to: the tensor at stack index idx, borrowed (NULL if it is not a live
   tensor); it stays valid while the Lua value is reachable. */
EMBER_LUA_API int ember_lua_push_tensor(struct lua_State *L, ember_tensor *t);
EMBER_LUA_API ember_tensor *ember_lua_to_tensor(struct lua_State *L, int idx);

/* The directory holding ember/init.lua that this library uses ("" if none). */
EMBER_LUA_API const char *ember_lua_package_dir(void);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_LUA_H */
