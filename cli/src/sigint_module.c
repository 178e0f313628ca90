/* sigint_module.c: the ember_sigint Lua C module. Under the plain luajit
   binary, luajit.c's SIGINT handler sets a hook that raises "interrupted!"
   at any instruction, ember's own Lua code included, where it strands the C
   references that code hands around (an op's result between its C call and
   its wrapper). When the package loads in luajit while that handler is
   installed, it calls take_over(prefix), which puts this handler in its
   place: the same behaviour (the hook raises "interrupted!", a second
   Ctrl-C before it did ends the process) except that the raise waits for
   the user's code (interrupt.h). Any other handler (the ember command's, a
   host's own, none) is left alone.
   Built without linking LuaJIT: its symbols come from the program that
   loads it (luajit exports them). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "interrupt.h"

static lua_State *hook_L;   /* a thread pinned in the registry; hooks are per global state */
static pthread_t lua_thread;

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    interrupt_raise(L, "interrupted!");   /* as luajit's own */
}

static void on_sigint(int sig)
{
    if (!pthread_equal(pthread_self(), lua_thread)) {   /* a worker thread caught it */
        pthread_kill(lua_thread, sig);
        return;
    }
    signal(sig, SIG_DFL);   /* as luajit: another Ctrl-C before the hook raised ends the process */
    lua_sethook(hook_L, stop_hook, INTERRUPT_HOOK_MASK, 1);
}

/* Whether h is the luajit binary's own handler: a function of the main
   program, which is the program LuaJIT is linked into, called luajit. */
static int is_luajit_handler(void (*h)(int))
{
    Dl_info hi, li;
    void *self = dlopen(NULL, RTLD_LAZY);
    void *sethook = self ? dlsym(self, "lua_sethook") : NULL;
    if (self) dlclose(self);
    if (!sethook || !dladdr((void *)h, &hi) || !dladdr(sethook, &li)) return 0;
    if (hi.dli_fbase != li.dli_fbase) return 0;
#if defined(__APPLE__) || defined(__FreeBSD__)
    const char *name = getprogname();   /* <stdlib.h>'s there; glibc's name below */
#else
    const char *name = program_invocation_short_name;
#endif
    return name && strncmp(name, "luajit", 6) == 0;
}

/* take_over(prefix) -> true when this module's handler is (now) installed */
static int take_over(lua_State *L)
{
    const char *prefix = luaL_checkstring(L, 1);
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (cur.sa_handler == on_sigint) {
        lua_pushboolean(L, 1);
        return 1;
    }
    if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN || !is_luajit_handler(cur.sa_handler)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    interrupt_set_prefix(prefix);
    if (!hook_L) {
        lua_pushthread(L);
        luaL_ref(L, LUA_REGISTRYINDEX);   /* never collected */
        hook_L = L;
    }
    lua_thread = pthread_self();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = cur.sa_flags & SA_RESTART;   /* what luajit's signal() chose */
    lua_pushboolean(L, sigaction(SIGINT, &sa, NULL) == 0);
    return 1;
}

int luaopen_ember_sigint(lua_State *L);
__attribute__((visibility("default"))) int luaopen_ember_sigint(lua_State *L)
{
    lua_newtable(L);
    lua_pushcfunction(L, take_over);
    lua_setfield(L, -2, "take_over");
    return 1;
}
