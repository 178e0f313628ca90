/* interrupt.h: where a Ctrl-C may be raised. Shared by the ember command
   (main.c) and the ember_sigint module (sigint_module.c, which the package
   loads under the plain luajit binary). A hook raising at any instruction
   could strand the C references ember's own Lua code hands around, so the
   hook raises only while the user's code runs (docs/hardening.md, "Ctrl-C"). */
#ifndef EMBER_CLI_INTERRUPT_H
#define EMBER_CLI_INTERRUPT_H

#include <lauxlib.h>
#include <lua.h>
#include <string.h>

/* chunk names of the package's files start with this (ember.errors.source_prefix) */
static char interrupt_pkg_prefix[4096];

static inline void interrupt_set_prefix(const char *s)
{
    if (s && s[0] == '@' && strlen(s) < sizeof interrupt_pkg_prefix) strcpy(interrupt_pkg_prefix, s);
}

/* Whether the innermost Lua function running is ember's own: the package's
   files, the functions it generates (=ember/...), the command's and
   ember_lua's chunks (=[ember ...]). C functions (collectgarbage, say) count
   as their Lua caller. */
static inline int interrupt_in_ember_code(lua_State *L)
{
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "S", &ar)) return 0;
        if (ar.what && strcmp(ar.what, "C") == 0) continue;
        const char *src = ar.source ? ar.source : "";
        return strncmp(src, "=ember/", 7) == 0 || strncmp(src, "=[ember", 7) == 0 ||
               (interrupt_pkg_prefix[0] &&
                strncmp(src, interrupt_pkg_prefix, strlen(interrupt_pkg_prefix)) == 0);
    }
    return 0;
}

/* The package's chunk-name prefix (ember.errors.source_prefix), read once
   the package is loaded in L. */
static inline void interrupt_find_prefix(lua_State *L)
{
    if (interrupt_pkg_prefix[0]) return;
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "ember.errors");
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "source_prefix");
            interrupt_set_prefix(lua_tostring(L, -1));
        }
    }
    lua_settop(L, top);
}

/* The body of an interrupting hook: returns 0 while ember's own code runs
   (the hook stays armed and fires again at the next instruction); else
   clears the hook and raises "<where>msg" at the user's line (a C hook adds
   no frame: level 0 is the interrupted function). */
static inline int interrupt_raise(lua_State *L, const char *msg)
{
    if (interrupt_in_ember_code(L)) return 0;
    lua_sethook(L, NULL, 0, 0);
    luaL_where(L, 0);
    lua_pushfstring(L, "%s%s", lua_tostring(L, -1), msg);
    return lua_error(L);
}

/* What arms the hook: every call, return and instruction. */
#define INTERRUPT_HOOK_MASK (LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT)

#endif
