/* thread_states.c: a host whose threads come and go, each with a Lua state of
   its own (LÖVE's love.thread, Neovim's vim.loop.new_thread). Each thread
   makes a LuaJIT state, requires ember, runs a few ops (a matmul, a recorded
   backward), checks the numbers, closes the state and exits; that is done
   `rounds` times over `threads` threads at once. The program links LuaJIT
   only: libember comes and goes with the threads' states (LuaJIT's ffi.load
   and lua_close), unless the main thread keeps a state of its own with ember
   loaded ("main"), which then checks that the threads left no tensor and no
   byte behind. Under ASan with leak checking it also shows that the
   per-thread state ember keeps (block caches, the autograd tape's pools) is
   freed when a thread exits.

   Run:  thread_states [threads [rounds [main|nomain]]]   (defaults 4 20 nomain)
   The Lua package is found in EMBER_LUA_DIR (compiled in), libember at
   EMBER_LIB_PATH (compiled in: the build's own, so an ASan build runs its
   ASan library). Exits 0 when every thread got the right numbers. */
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x (8, 16) with x[i][k] = (i + 1) / (k + 1), w (16, 4) all 0.5; loss =
   sum(x w). d loss / d w[k][j] = sum_i x[i][k] = 36 / (k + 1) for every j,
   and the loss is 4 * 0.5 * sum_k 36 / (k + 1). Both are checked against
   these sums in double, to float32's rounding (relative 1e-5). */
static const char script[] =
    "local lua_dir = ...\n"
    "package.path = lua_dir .. '/?.lua;' .. lua_dir .. '/?/init.lua;' .. package.path\n"
    "local ember = require('ember')\n"
    "local x = ember.empty({ 8, 16 })\n"
    "for i = 1, 8 do for k = 1, 16 do x[{ i, k }] = i / k end end\n"
    "local w = ember.full({ 16, 4 }, 0.5)\n"
    "local gm = ember.autodiff.GradManager():attach({ w })\n"
    "gm:record()\n"
    "local loss = x:matmul(w):sum()\n"
    "gm:backward(loss)\n"
    "local want_loss = 0\n"
    "for k = 1, 16 do want_loss = want_loss + 2 * 36 / k end\n"
    "local function close(a, b) return math.abs(a - b) <= 1e-5 * math.abs(b) end\n"
    "assert(close(loss:item(), want_loss), ('loss %.9g, want %.9g'):format(loss:item(), want_loss))\n"
    "for k = 1, 16 do for j = 1, 4 do\n"
    "  local g = w.grad[{ k, j }]\n"
    "  assert(close(g, 36 / k), ('grad[%d][%d] %.9g, want %.9g'):format(k, j, g, 36 / k))\n"
    "end end\n"
    "return ember\n";

static const char *lua_dir = EMBER_LUA_DIR;

/* a fresh state that has run the script; NULL with the message in err */
static lua_State *run_state(char *err, size_t cap)
{
    lua_State *L = luaL_newstate();
    if (!L) {
        snprintf(err, cap, "luaL_newstate failed");
        return NULL;
    }
    luaL_openlibs(L);
    if (luaL_loadbuffer(L, script, sizeof script - 1, "=thread_states") != 0 ||
        (lua_pushstring(L, lua_dir), lua_pcall(L, 1, 1, 0) != 0)) {
        const char *msg = lua_tostring(L, -1);
        snprintf(err, cap, "%s", msg ? msg : "(no message)");
        lua_close(L);
        return NULL;
    }
    return L;
}

typedef struct {
    int id;
    char err[512];
    int ok;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    lua_State *L = run_state(j->err, sizeof j->err);
    if (L) {
        j->ok = 1;
        lua_close(L);   /* with no other state holding it, libember is unloaded here */
    }
    return NULL;        /* and the thread exits: its TSD destructors run now */
}

/* ember.memory_stats() of the main state: live tensors and bytes in use */
static int main_stats(lua_State *L, double *tensors, double *bytes)
{
    static const char code[] =
        "local ember = ...\n"
        "collectgarbage() collectgarbage()\n"
        "local s = ember.memory_stats()\n"
        "return s.live_tensors, s.bytes_in_use\n";
    lua_pushvalue(L, -1);   /* the ember table, kept on the stack */
    if (luaL_loadbuffer(L, code, sizeof code - 1, "=stats") != 0) return -1;
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 2, 0) != 0) {
        fprintf(stderr, "thread_states: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    *tensors = lua_tonumber(L, -2);
    *bytes = lua_tonumber(L, -1);
    lua_pop(L, 2);
    return 0;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 20;
    int with_main = argc > 3 && strcmp(argv[3], "main") == 0;
    if (nthreads < 1 || nthreads > 64 || rounds < 1 || (argc > 3 && !with_main && strcmp(argv[3], "nomain") != 0) ||
        argc > 4) {
        fprintf(stderr, "usage: thread_states [threads (1-64) [rounds (>= 1) [main|nomain]]]\n");
        return 2;
    }
    /* the build's libember, whatever EMBER_LIB the caller has */
    if (setenv("EMBER_LIB", EMBER_LIB_PATH, 1) != 0) return 1;

    lua_State *M = NULL;
    double tensors0 = 0, bytes0 = 0;
    char err[512];
    if (with_main) {
        M = run_state(err, sizeof err);
        if (!M) {
            fprintf(stderr, "thread_states: main thread: %s\n", err);
            return 1;
        }
        if (main_stats(M, &tensors0, &bytes0) != 0) return 1;
    }

    int failed = 0;
    job jobs[64];
    pthread_t tid[64];
    for (int r = 0; r < rounds && !failed; r++) {
        int started = 0;
        for (int i = 0; i < nthreads; i++) {
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].id = i;
            if (pthread_create(&tid[i], NULL, worker, &jobs[i]) != 0) {
                fprintf(stderr, "thread_states: pthread_create failed\n");
                failed = 1;
                break;
            }
            started++;
        }
        for (int i = 0; i < started; i++) {
            pthread_join(tid[i], NULL);
            if (!jobs[i].ok) {
                fprintf(stderr, "thread_states: round %d thread %d: %s\n", r, i, jobs[i].err);
                failed = 1;
            }
        }
    }

    if (M) {
        double tensors, bytes;
        if (main_stats(M, &tensors, &bytes) != 0) failed = 1;
        else if (tensors != tensors0 || bytes != bytes0) {
            fprintf(stderr, "thread_states: the threads left %.0f tensors and %.0f bytes behind\n",
                    tensors - tensors0, bytes - bytes0);
            failed = 1;
        }
        lua_close(M);
    }
    if (failed) return 1;
    printf("thread_states: %d rounds of %d threads (%s): OK\n", rounds, nthreads,
           with_main ? "the main thread keeps ember loaded" : "ember loaded by the threads only");
    return 0;
}
