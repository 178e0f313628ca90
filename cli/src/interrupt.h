/* interrupt.h: where a Ctrl-C may be raised. Shared by the ember command
   (main.c) and the ember_sigint module (sigint_module.c, which the package
   loads under the plain luajit binary). A hook raising at any instruction
   could strand the C references ember's own Lua code hands around, so the
   hook raises only while the user's code runs (docs/hardening.md, "Ctrl-C"). */
#ifndef EMBER_CLI_INTERRUPT_H
#define EMBER_CLI_INTERRUPT_H

#include <lua.h>
#include <string.h>

/* chunk names of the package's files start with this (ember.errors.source_prefix) */
static char interrupt_pkg_prefix[4096];

static void interrupt_set_prefix(const char *s)
{
    if (s && s[0] == '@' && strlen(s) < sizeof interrupt_pkg_prefix) strcpy(interrupt_pkg_prefix, s);
}

/* Whether the innermost Lua function running is ember's own: the package's
   files, the functions it generates (=ember/...), the command's and
   ember_lua's chunks (=[ember ...]). C functions (collectgarbage, say) count
   as their Lua caller. */
static int interrupt_in_ember_code(lua_State *L)
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

#endif
