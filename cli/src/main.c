/* main.c: the ember command. Runs Lua scripts with ember preloaded, the way
   luajit runs them (the same `arg` table and options order), and opens the
   REPL (repl.c) when there is nothing else to do. The Lua state comes from
   libember_lua (ember_lua.c); this file is only the command line. */
#include "cli.h"
#include "ember_lua.h"
#include "interrupt.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *progname = "ember";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [options] [script [args]]\n"
            "Runs a Lua script with ember loaded (the global `ember`); with no script\n"
            "and no -e, opens the interactive REPL.\n"
            "  -e chunk   run the string chunk\n"
            "  -l name    require library name (into the global `name`)\n"
            "  -i         open the REPL after running script and chunks\n"
            "  -v         print the versions of ember, LuaJIT, BLAS and CUDA\n"
            "  -h         print this help\n"
            "  --         stop handling options\n"
            "  -          run stdin as a script\n",
            progname);
}

/* ------------------------------------------------------------------ OpenMP threads */
/* libgomp (the team oneDNN and ember's kernels run on) reads its spin count
   in a library constructor, before main; the Lua package bounds it with
   GOMP_SPINCOUNT before it loads libember (docs/nn.md, "Threads"). This
   command links libember, so when the user has chosen no wait policy it sets
   the count and starts itself again. If exec fails it runs on with libgomp's
   default. (OpenBLAS's kernels need no such step: libember chooses them
   itself, core/src/blas.c.) */
static void choose_library_env(char **argv)
{
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") && setenv("GOMP_SPINCOUNT", "30000", 0) == 0)
        execv("/proc/self/exe", argv);
}

/* ------------------------------------------------------------------ Ctrl-C */
/* While Lua runs, SIGINT sets a count hook (lua.c's approach: lua_sethook is
   safe from a signal handler) and the hook raises "interrupted" at the next
   instruction of the user's code. Inside ember's own Lua code (the package's
   files, the functions it generates, the CLI's and ember_lua's chunks) the
   hook only returns and stays armed: that code hands C references around
   (an op's result between the C call and its wrapper, the slot table, a
   backward run between begin and end), and an error raised between two of
   its statements leaked or corrupted them. Finalizers and collection steps
   never see the hook (LuaJIT runs __gc with hooks off). JIT-compiled loops
   and C calls do not reach the hook until they end; a second Ctrl-C before
   the hook raised restores the default action, so a third one ends the
   process. The handler only touches the hook from the thread running Lua:
   caught on another thread (an OpenBLAS or OpenMP worker), the signal is
   passed on to it. */
static lua_State *volatile running_L;
static pthread_t lua_thread;
static volatile sig_atomic_t hook_pending, sigint_seen;

static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (interrupt_in_ember_code(L)) return;   /* deferred: the hook fires again at the next instruction */
    hook_pending = 0;
    interrupt_raise(L, "interrupted");
}

static void arm_hook(void)
{
    hook_pending = 1;
    lua_sethook(running_L, stop_hook, INTERRUPT_HOOK_MASK, 1);
}

static void on_sigint_running(int sig)
{
    if (!pthread_equal(pthread_self(), lua_thread)) {   /* a worker thread caught it */
        pthread_kill(lua_thread, sig);
        return;
    }
    if (hook_pending) {
        static const char msg[] =
            "\nember: busy in compiled code, C or ember's own code; Ctrl-C again ends the process\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        signal(sig, SIG_DFL);
        return;
    }
    arm_hook();
}

static void on_sigint_idle(int sig)
{
    (void)sig;
    sigint_seen = 1;
}

static void set_sigint(void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;   /* no SA_RESTART: a blocking read returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}

void cli_catch_sigint(void) { set_sigint(on_sigint_idle); }

int cli_take_interrupt(void)
{
    int seen = sigint_seen;
    sigint_seen = 0;
    return seen;
}

/* ------------------------------------------------------------------ running */
static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int cli_docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    interrupt_find_prefix(L);
    running_L = L;
    lua_thread = pthread_self();
    hook_pending = 0;
    set_sigint(on_sigint_running);
    /* a Ctrl-C since the prompt (or during start-up) interrupts this chunk */
    if (sigint_seen) {
        sigint_seen = 0;
        arm_hook();
    }
    int status = lua_pcall(L, narg, nres, base);
    set_sigint(on_sigint_idle);
    lua_sethook(L, NULL, 0, 0);   /* a Ctrl-C that came too late to raise */
    hook_pending = 0;
    sigint_seen = 0;
    lua_remove(L, base);
    return status;
}

int cli_report(lua_State *L, int status)
{
    if (status != 0) {
        const char *msg = lua_tostring(L, -1);
        fflush(stdout);
        fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}

static int dostring(lua_State *L, const char *code, const char *name)
{
    int status = luaL_loadbuffer(L, code, strlen(code), name);
    if (status == 0) status = cli_docall(L, 0, 0);
    return cli_report(L, status);
}

static int dolibrary(lua_State *L, const char *name)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    int status = cli_docall(L, 1, 1);
    if (status == 0) lua_setglobal(L, name);
    return cli_report(L, status);
}

/* arg[0] = script, arg[1..] its arguments, arg[-k] what came before (luajit's layout) */
static void create_arg_table(lua_State *L, char **argv, int argc, int script)
{
    lua_createtable(L, argc - script - 1 > 0 ? argc - script - 1 : 0, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int run_script(lua_State *L, char **argv, int argc, int script)
{
    const char *name = argv[script];
    if (strcmp(name, "-") == 0 && strcmp(argv[script - 1], "--") != 0) name = NULL;   /* stdin */
    int status = luaL_loadfile(L, name);
    if (status == 0) {
        int nargs = argc - script - 1;
        if (!lua_checkstack(L, nargs + 4)) {
            lua_pushliteral(L, "too many arguments to script");
            return cli_report(L, 1);
        }
        for (int i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
        status = cli_docall(L, nargs, 0);
    }
    return cli_report(L, status);
}

/* ------------------------------------------------------------------ -v */
static void print_version(void)
{
    printf("ember %s\n", ember_version());
    lua_State *L = luaL_newstate();
    if (L) {
        luaL_openlibs(L);
        lua_getglobal(L, "jit");
        if (lua_istable(L, -1)) lua_getfield(L, -1, "version");
        printf("%s\n", lua_isstring(L, -1) ? lua_tostring(L, -1) : "LuaJIT (unknown version)");
        lua_close(L);
    }
    printf("BLAS: %s\n", ember_blas_info());
    int ncuda = ember_cuda_device_count();
    if (ncuda > 0) printf("CUDA: %d device(s)\n", ncuda);
    else printf("CUDA: not available (%s)\n", ember_cuda_status());
    printf("Lua package: %s\n", ember_lua_package_dir()[0] ? ember_lua_package_dir() : "(not found)");
}

/* ------------------------------------------------------------------ main */
int main(int argc, char **argv)
{
    int script = 0, want_repl = 0, want_version = 0, has_chunks = 0;
    choose_library_env(argv);
    /* first pass: check the options, find the script */
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') break;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-") == 0) break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-i") == 0) {
            want_repl = 1;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
            want_version = 1;
        } else if (a[1] == 'e' || a[1] == 'l') {
            if (a[2] == '\0' && i + 1 >= argc) {
                fprintf(stderr, "%s: '%s' needs an argument\n", progname, a);
                usage(stderr);
                return 1;
            }
            if (a[2] == '\0') i++;
            has_chunks = 1;
        } else {
            fprintf(stderr, "%s: unrecognized option '%s'\n", progname, a);
            usage(stderr);
            return 1;
        }
    }
    script = i < argc ? i : 0;

    if (want_version) {
        print_version();
        if (!script && !has_chunks && !want_repl) return 0;
    }

    ember_lua *E = ember_lua_open_ex(EMBER_LUA_ANY_LIBRARY);
    if (!E) {
        fprintf(stderr, "%s: %s\n", progname, ember_lua_error(NULL));
        return 1;
    }
    lua_State *L = ember_lua_state(E);
    cli_catch_sigint();
    create_arg_table(L, argv, argc, script ? script : argc);

    int status = 0;
    /* second pass: -e and -l in order */
    for (i = 1; i < (script ? script : argc) && status == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l')) continue;
        const char *val = a[2] ? a + 2 : argv[++i];
        status = a[1] == 'e' ? dostring(L, val, "=(command line)") : dolibrary(L, val);
    }
    if (status == 0 && script) status = run_script(L, argv, argc, script);
    if (status == 0 && (want_repl || (!script && !has_chunks))) status = cli_repl(L);

    fflush(stdout);
    ember_lua_close(E);
    return status == 0 ? 0 : 1;
}
