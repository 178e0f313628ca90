/* ember_lua.c: libember_lua, a LuaJIT state with ember loaded, for C hosts and
   for the ember command. The tensor work stays in libember; this file only
   finds the Lua package, runs Lua code under a traceback handler, and moves
   tensor pointers across (the Lua half is bridge.lua). It is not a Lua C
   module: ember's Lua layer itself uses the FFI only. */
#define _GNU_SOURCE   /* dladdr */
#include "ember_lua.h"

#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot_lua.h"     /* generated from boot.lua: boot_lua[], boot_lua_len */
#include "interrupt.h"
#include "bridge_lua.h"   /* generated from bridge.lua */

#ifndef EMBER_LUA_SOURCE_DIR
#define EMBER_LUA_SOURCE_DIR ""
#endif
#ifndef EMBER_LUA_INSTALL_DIR
#define EMBER_LUA_INSTALL_DIR ""
#endif
#ifndef EMBER_LUA_REL_DIRS   /* from libember_lua's dir to the package dir, ':'-separated */
#define EMBER_LUA_REL_DIRS "../share/lua/5.1"
#endif

#define EMBER_LUA_TRY(expr)                                                                \
    do {                                                                                   \
        int ember_lua__rc = (expr);                                                        \
        if (ember_lua__rc < 0) return ember_lua__rc;                                       \
    } while (0)

struct ember_lua {
    lua_State *L;
    char *err;           /* the last failure's message (malloc'd), NULL if none */
    atomic_int running;  /* a call into Lua is under way (ember_lua_interrupt arms only then) */
};

static const char BRIDGE_KEY[] = "ember_lua.bridge";   /* registry: bridge.lua's table */

/* ------------------------------------------------------------------ errors */
static int set_error(ember_lua *E, int status, const char *msg)
{
    if (!msg) msg = "(no message)";
    ember_set_error(msg);
    if (E) {
        free(E->err);
        E->err = strdup(msg);
    }
    return status;
}

const char *ember_lua_error(const ember_lua *E)
{
    if (!E) return ember_last_error();
    return E->err ? E->err : "";
}

/* A Lua error's message with its traceback (the message handler of every call). */
static int traceback(lua_State *L)
{
    if (lua_istable(L, 1)) return 1;   /* { arg = msg } from bridge.lua: no traceback */
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) msg = lua_tostring(L, -1);
        else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Turns the error value a failed pcall left on top into a status and message. */
static int lua_failure(ember_lua *E, lua_State *L, int lrc)
{
    int status = lrc == LUA_ERRMEM ? EMBER_ERR_OOM : EMBER_ERR_LUA;
    const char *msg;
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "arg");
        msg = lua_tostring(L, -1);
        status = EMBER_ERR_ARG;
        lua_remove(L, -2);
    } else {
        msg = lua_tostring(L, -1);
    }
    set_error(E, status, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
    return status;
}

/* ------------------------------------------------------------------ finding things */
static void dirname_of(char *path)
{
    char *slash = strrchr(path, '/');
    if (slash == path) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else strcpy(path, ".");
}

static int has_package(const char *dir)
{
    char path[PATH_MAX + 32];
    if (!dir[0]) return 0;
    snprintf(path, sizeof path, "%s/ember/init.lua", dir);
    return access(path, R_OK) == 0;
}

static char package_dir[PATH_MAX];
static char searched[4 * PATH_MAX];
static char libember_path[PATH_MAX];
static pthread_once_t paths_once = PTHREAD_ONCE_INIT;

static void add_searched(const char *dir)
{
    size_t n = strlen(searched);
    snprintf(searched + n, sizeof searched - n, "%s%s", n ? ", " : "", dir);
}

static void try_dir(const char *dir)
{
    char real[PATH_MAX];
    if (package_dir[0] || !dir[0]) return;
    add_searched(dir);
    if (has_package(dir)) {
        if (!realpath(dir, real)) snprintf(real, sizeof real, "%s", dir);
        snprintf(package_dir, sizeof package_dir, "%s", real);
    }
}

/* The package: installed (relative to this library), then the source tree,
   then the configured prefix. libember: the file this process has loaded. */
static void find_paths(void)
{
    Dl_info info;
    char self[PATH_MAX];
    if (dladdr((void *)&ember_lua_package_dir, &info) && info.dli_fname &&
        realpath(info.dli_fname, self)) {
        dirname_of(self);
        char rels[] = EMBER_LUA_REL_DIRS;
        for (char *save = NULL, *rel = strtok_r(rels, ":", &save); rel;
             rel = strtok_r(NULL, ":", &save)) {
            char dir[2 * PATH_MAX + 2];
            snprintf(dir, sizeof dir, "%s/%s", self, rel);
            try_dir(dir);
        }
    }
    try_dir(EMBER_LUA_SOURCE_DIR);
    try_dir(EMBER_LUA_INSTALL_DIR);
    if (!(dladdr((void *)&ember_version, &info) && info.dli_fname &&
          realpath(info.dli_fname, libember_path)))
        libember_path[0] = '\0';
}

const char *ember_lua_package_dir(void)
{
    pthread_once(&paths_once, find_paths);
    return package_dir;
}

static const char *linked_libember(void)
{
    pthread_once(&paths_once, find_paths);
    return libember_path;
}

/* ------------------------------------------------------------------ the bridge */
/* Pushes bridge.lua's table for L, running it the first time. Returns a status
   (message in ember_last_error) and pushes nothing on failure. */
static int push_bridge(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, BRIDGE_KEY);
    if (lua_istable(L, -1)) return EMBER_OK;
    lua_pop(L, 1);
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");   /* package.loaded */
    if (lua_istable(L, -1)) lua_getfield(L, -1, "ember");
    else lua_pushnil(L);
    if (!lua_istable(L, -1)) {
        lua_settop(L, top);
        ember_set_error("ember_lua: this Lua state has not loaded ember (require \"ember\" first)");
        return EMBER_ERR_STATE;
    }
    if (luaL_loadbuffer(L, (const char *)bridge_lua, bridge_lua_len, "=[ember_lua bridge]") != 0) {
        ember_set_error(lua_tostring(L, -1));
        lua_settop(L, top);
        return EMBER_ERR_LUA;
    }
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 1, 0) != 0) {
        ember_set_error(lua_tostring(L, -1));
        lua_settop(L, top);
        return EMBER_ERR_LUA;
    }
    /* a state that loaded ember by itself may have loaded another libember */
    char probe[64];
    snprintf(probe, sizeof probe, "ember_lua bridge probe %p", (void *)L);
    lua_getfield(L, -1, "probe");
    lua_pushstring(L, probe);
    if (lua_pcall(L, 1, 0, 0) != 0 || strcmp(ember_last_error(), probe) != 0) {
        lua_settop(L, top);
        ember_set_error("ember_lua: this Lua state's ember uses another copy of libember than "
                        "this program links; tensors cannot pass between them");
        return EMBER_ERR_STATE;
    }
    ember_set_error("");
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, BRIDGE_KEY);
    lua_replace(L, top + 1);
    lua_settop(L, top + 1);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ interrupts */
static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    interrupt_raise(L, "interrupted (ember_lua_interrupt)");
}

int ember_lua_interrupt(ember_lua *E)
{
    if (!E) return EMBER_ERR_ARG;   /* no message: this may run in a signal handler */
    if (atomic_load(&E->running)) lua_sethook(E->L, interrupt_hook, INTERRUPT_HOOK_MASK, 1);
    return EMBER_OK;
}

/* lua_pcall, interruptible by ember_lua_interrupt while it runs. A hook left
   armed by an interrupt that came as the last call ended is cleared first. */
static int pcall(ember_lua *E, int nargs, int handler)
{
    lua_sethook(E->L, NULL, 0, 0);
    atomic_store(&E->running, 1);
    int lrc = lua_pcall(E->L, nargs, 0, handler);
    atomic_store(&E->running, 0);
    lua_sethook(E->L, NULL, 0, 0);
    return lrc;
}

/* Pushes the traceback handler and bridge function `name`; returns the
   handler's index, or a status < 0 with nothing pushed. */
static int prepare(ember_lua *E, const char *name)
{
    lua_State *L = E->L;
    if (!lua_checkstack(L, 32)) return set_error(E, EMBER_ERR_OOM, "ember_lua: Lua stack overflow");
    lua_pushcfunction(L, traceback);
    int handler = lua_gettop(L);
    int rc = push_bridge(L);
    if (rc < 0) {
        lua_pop(L, 1);
        return set_error(E, rc, ember_last_error());
    }
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    return handler;
}

/* Runs the prepared call with nargs arguments and clears the stack down to
   the handler. */
static int finish(ember_lua *E, int handler, int nargs)
{
    lua_State *L = E->L;
    int lrc = pcall(E, nargs, handler);
    int rc = lrc == 0 ? EMBER_OK : lua_failure(E, L, lrc);
    lua_settop(L, handler - 1);
    return rc;
}

/* A freed header goes back to the core's pool (or to malloc) and loses these
   fields, so this catches a tensor the host already released in practice. It
   cannot be a guarantee: the core has no liveness tag to check. */
static int plausible(const ember_tensor *t)
{
    int refs = ember_tensor_refcount(t), dtype = ember_tensor_dtype(t), nd = ember_tensor_ndim(t);
    return refs > 0 && dtype >= 0 && dtype < EMBER_DTYPE_COUNT && nd >= 0 && nd <= EMBER_MAX_DIMS &&
           ember_tensor_numel(t) >= 0;
}

static int check_tensor(ember_lua *E, const char *api, const char *what, int i, const ember_tensor *t)
{
    if (!t || plausible(t)) return EMBER_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s %d is not a live tensor (released already?)", api, what, i);
    return set_error(E, EMBER_ERR_ARG, msg);
}

static int check_handle(const ember_lua *E, const char *api)
{
    char msg[128];
    if (E && E->L) return EMBER_OK;
    snprintf(msg, sizeof msg, "%s: the ember_lua handle is NULL", api);
    ember_set_error(msg);
    return EMBER_ERR_ARG;
}

/* ------------------------------------------------------------------ open and close */
ember_lua *ember_lua_open(void) { return ember_lua_open_ex(0); }

ember_lua *ember_lua_open_ex(int flags)
{
    ember_lua *E = calloc(1, sizeof *E);
    lua_State *L = E ? luaL_newstate() : NULL;
    if (!L) {
        free(E);
        ember_set_error("ember_lua_open: out of memory creating a Lua state");
        return NULL;
    }
    E->L = L;
    luaL_openlibs(L);

    char probe[64];
    snprintf(probe, sizeof probe, "ember_lua probe %p", (void *)E);
    const char *dir = ember_lua_package_dir();
    const char *libpath = linked_libember();
    /* no traceback here: boot errors are about set-up, and carry file:line */
    if (luaL_loadbuffer(L, (const char *)boot_lua, boot_lua_len, "=[ember_lua boot]") != 0)
        goto fail;
    lua_pushstring(L, dir);
    lua_pushstring(L, libpath);
    lua_pushstring(L, probe);
    lua_pushstring(L, searched[0] ? searched : "(nowhere)");
    if (lua_pcall(L, 4, 1, 0) != 0) goto fail;
    if (strcmp(ember_last_error(), probe) != 0 && !(flags & EMBER_LUA_ANY_LIBRARY)) {
        lua_pushfstring(L,
                        "require(\"ember\") loaded %s but this program is linked with %s (is "
                        "EMBER_LIB set?): tensors cannot pass between two copies of libember",
                        lua_tostring(L, -1), libpath[0] ? libpath : "another libember");
        goto fail;
    }
    ember_set_error("");
    lua_settop(L, 0);
    interrupt_find_prefix(L);
    return E;

fail: {
        const char *msg = lua_tostring(L, -1);
        char buf[4096];
        snprintf(buf, sizeof buf, "ember_lua_open: %s", msg ? msg : "(unknown error)");
        ember_set_error(buf);
        lua_close(L);
        free(E->err);
        free(E);
        return NULL;
    }
}

void ember_lua_close(ember_lua *E)
{
    if (!E) return;
    if (E->L) lua_close(E->L);
    free(E->err);
    free(E);
}

struct lua_State *ember_lua_state(ember_lua *E) { return E ? E->L : NULL; }

/* ------------------------------------------------------------------ running code */
int ember_lua_dofile(ember_lua *E, const char *path)
{
    int rc = check_handle(E, "ember_lua_dofile");
    if (rc < 0) return rc;
    if (!path) return set_error(E, EMBER_ERR_ARG, "ember_lua_dofile: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) {
        char msg[PATH_MAX + 64];
        snprintf(msg, sizeof msg, "ember_lua_dofile: cannot open %s", path);
        return set_error(E, EMBER_ERR_IO, msg);
    }
    fclose(f);
    lua_State *L = E->L;
    lua_pushcfunction(L, traceback);
    int handler = lua_gettop(L);
    int lrc = luaL_loadfile(L, path);
    if (lrc == 0) lrc = pcall(E, 0, handler);
    rc = lrc == 0 ? EMBER_OK : lua_failure(E, L, lrc);
    lua_settop(L, handler - 1);
    return rc;
}

int ember_lua_dostring(ember_lua *E, const char *code)
{
    int rc = check_handle(E, "ember_lua_dostring");
    if (rc < 0) return rc;
    if (!code) return set_error(E, EMBER_ERR_ARG, "ember_lua_dostring: code is NULL");
    lua_State *L = E->L;
    lua_pushcfunction(L, traceback);
    int handler = lua_gettop(L);
    int lrc = luaL_loadbuffer(L, code, strlen(code), "=(ember_lua_dostring)");
    if (lrc == 0) lrc = pcall(E, 0, handler);
    rc = lrc == 0 ? EMBER_OK : lua_failure(E, L, lrc);
    lua_settop(L, handler - 1);
    return rc;
}

/* ------------------------------------------------------------------ tensors across */
int ember_lua_call(ember_lua *E, const char *fn, int nin, ember_tensor *const *in, int nout,
                   ember_tensor **out)
{
    static const char api[] = "ember_lua_call";
    if (out)
        for (int i = 0; i < nout; i++) out[i] = NULL;
    int rc = check_handle(E, api);
    if (rc < 0) return rc;
    if (!fn) return set_error(E, EMBER_ERR_ARG, "ember_lua_call: fn is NULL");
    if (nin < 0 || nout < 0 || nin > 200 || nout > 200)
        return set_error(E, EMBER_ERR_ARG, "ember_lua_call: nin and nout must be in 0..200");
    if (nin > 0 && !in) return set_error(E, EMBER_ERR_ARG, "ember_lua_call: in is NULL");
    if (nout > 0 && !out) return set_error(E, EMBER_ERR_ARG, "ember_lua_call: out is NULL");
    for (int i = 0; i < nin; i++) EMBER_LUA_TRY(check_tensor(E, api, "argument", i + 1, in[i]));
    if (!lua_checkstack(E->L, nin + 40)) return set_error(E, EMBER_ERR_OOM, "ember_lua_call: Lua stack overflow");

    int handler = prepare(E, "call");
    if (handler < 0) return handler;
    lua_State *L = E->L;
    lua_pushstring(L, fn);
    lua_pushlightuserdata(L, out);
    lua_pushinteger(L, nout);
    for (int i = 0; i < nin; i++) {
        if (in[i]) lua_pushlightuserdata(L, in[i]);
        else lua_pushnil(L);
    }
    rc = finish(E, handler, 3 + nin);
    if (rc < 0 && out) {
        for (int i = 0; i < nout; i++) {
            ember_tensor_release(out[i]);
            out[i] = NULL;
        }
    }
    return rc;
}

int ember_lua_set_tensor(ember_lua *E, const char *name, ember_tensor *t)
{
    static const char api[] = "ember_lua_set_tensor";
    int rc = check_handle(E, api);
    if (rc < 0) return rc;
    if (!name) return set_error(E, EMBER_ERR_ARG, "ember_lua_set_tensor: name is NULL");
    EMBER_LUA_TRY(check_tensor(E, api, "tensor", 1, t));
    int handler = prepare(E, "set");
    if (handler < 0) return handler;
    lua_pushstring(E->L, name);
    if (t) lua_pushlightuserdata(E->L, t);
    else lua_pushnil(E->L);
    return finish(E, handler, 2);
}

int ember_lua_get_tensor(ember_lua *E, const char *name, ember_tensor **out)
{
    if (out) *out = NULL;
    int rc = check_handle(E, "ember_lua_get_tensor");
    if (rc < 0) return rc;
    if (!name || !out) return set_error(E, EMBER_ERR_ARG, "ember_lua_get_tensor: name or out is NULL");
    int handler = prepare(E, "get");
    if (handler < 0) return handler;
    lua_pushstring(E->L, name);
    lua_pushlightuserdata(E->L, out);
    return finish(E, handler, 2);
}

int ember_lua_push_tensor(struct lua_State *L, ember_tensor *t)
{
    if (!L) {
        ember_set_error("ember_lua_push_tensor: L is NULL");
        return EMBER_ERR_ARG;
    }
    if (!lua_checkstack(L, 8)) {
        ember_set_error("ember_lua_push_tensor: Lua stack overflow");
        return EMBER_ERR_OOM;
    }
    if (!t) {
        lua_pushnil(L);
        return EMBER_OK;
    }
    if (!plausible(t)) {
        ember_set_error("ember_lua_push_tensor: not a live tensor (released already?)");
        return EMBER_ERR_ARG;
    }
    int top = lua_gettop(L);
    lua_pushcfunction(L, traceback);
    int rc = push_bridge(L);
    if (rc < 0) {
        lua_settop(L, top);
        return rc;
    }
    lua_getfield(L, -1, "wrap");
    lua_remove(L, -2);
    lua_pushliteral(L, "ember_lua_push_tensor");
    lua_pushlightuserdata(L, t);
    int lrc = lua_pcall(L, 2, 1, top + 1);
    if (lrc != 0) {
        ember_lua tmp = { .L = L };
        rc = lua_failure(&tmp, L, lrc);
        free(tmp.err);
        lua_settop(L, top);
        return rc;
    }
    lua_remove(L, top + 1);   /* the handler; the tensor stays */
    return EMBER_OK;
}

ember_tensor *ember_lua_to_tensor(struct lua_State *L, int idx)
{
    ember_tensor *p = NULL;
    if (!L || !lua_checkstack(L, 8)) return NULL;
    int top = lua_gettop(L);
    if (idx < 0 && idx > LUA_REGISTRYINDEX) idx = top + idx + 1;
    if (idx <= 0 || idx > top || lua_type(L, idx) != LUA_TTABLE) return NULL;
    if (push_bridge(L) < 0) return NULL;
    lua_getfield(L, -1, "peek");
    lua_remove(L, -2);
    lua_pushvalue(L, idx);
    lua_pushlightuserdata(L, &p);
    if (lua_pcall(L, 2, 0, 0) != 0) p = NULL;
    lua_settop(L, top);
    return p;
}
