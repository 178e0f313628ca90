/* test_ember_lua.c: the embedding API (ember_lua.h) from a C host: running
   code, statuses and messages for bad input (NULL handles and arguments, Lua
   errors, a released or freed tensor, a tensor shared with two states),
   tensors across without copies in both directions, and no leak at the end. */
#include "ember_lua.h"

#include <lauxlib.h>
#include <lua.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../../core/tests/check.h"
#define HAS(E, text) CHECK(strstr(ember_lua_error(E), (text)) != NULL)

static int released;
static void on_release(void *ctx, void *data)
{
    (void)data;
    (*(int *)ctx)++;
}

static ember_tensor *blob(float *buf, int64_t n)
{
    ember_tensor *t = NULL;
    CHECK(ember_from_blob(buf, 1, &n, NULL, EMBER_FLOAT32, on_release, &released, &t) == EMBER_OK);
    return t;
}

static void test_running_code(ember_lua *E)
{
    CHECK(ember_lua_dostring(E, "x = 40 + 2") == EMBER_OK);
    CHECK(ember_lua_dostring(E, "x = = 1") == EMBER_ERR_LUA);
    HAS(E, "unexpected symbol");
    CHECK(ember_lua_dostring(E, "local function f() error('boom') end f()") == EMBER_ERR_LUA);
    HAS(E, "boom");
    HAS(E, "stack traceback");
    CHECK(ember_lua_dostring(E, "return ember.ones({2}) + ember.ones({3})") == EMBER_ERR_LUA);
    HAS(E, "cannot be broadcast");
    CHECK(ember_lua_dofile(E, "/nonexistent/model.lua") == EMBER_ERR_IO);
    HAS(E, "/nonexistent/model.lua");
    CHECK(ember_lua_dostring(E, "assert(x == 42 and ember.tensor ~= nil)") == EMBER_OK);
}

static void test_null_arguments(ember_lua *E)
{
    ember_tensor *out[2] = { (ember_tensor *)&out, (ember_tensor *)&out };
    CHECK(ember_lua_dostring(NULL, "x = 1") == EMBER_ERR_ARG);
    CHECK(strstr(ember_lua_error(NULL), "NULL") != NULL);
    CHECK(ember_lua_dofile(NULL, "a.lua") == EMBER_ERR_ARG);
    CHECK(ember_lua_call(NULL, "f", 0, NULL, 2, out) == EMBER_ERR_ARG);
    CHECK(out[0] == NULL && out[1] == NULL);
    CHECK(ember_lua_dostring(E, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_dofile(E, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_call(E, NULL, 0, NULL, 0, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_call(E, "print", 1, NULL, 0, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_call(E, "print", 0, NULL, 1, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_call(E, "print", -1, NULL, 0, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_set_tensor(E, NULL, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_get_tensor(E, "x", NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_state(NULL) == NULL);
    ember_lua_close(NULL);
    CHECK(ember_lua_push_tensor(NULL, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_to_tensor(NULL, 1) == NULL);
}

/* the host's buffer is the tensor Lua sees; Lua's result is the same tensor */
static void test_zero_copy(ember_lua *E)
{
    float buf[3] = { 1, 2, 3 };
    ember_tensor *t = blob(buf, 3), *out = NULL;
    CHECK(ember_lua_dostring(E, "function double_it(x) return x:mul_(2) end") == EMBER_OK);
    CHECK(ember_lua_call(E, "double_it", 1, &t, 1, &out) == EMBER_OK);
    CHECK(buf[0] == 2 && buf[2] == 6);
    CHECK(out == t);
    CHECK(ember_tensor_refcount(t) >= 3);   /* host, Lua's wrapper, out */
    ember_tensor_release(out);

    /* dotted names, numbers as results, several results */
    ember_tensor *two[2] = { NULL, NULL };
    CHECK(ember_lua_dostring(E, "model = { stats = function(x) return x:sum(), 7 end }") == EMBER_OK);
    CHECK(ember_lua_call(E, "model.stats", 1, &t, 2, two) == EMBER_OK);
    double v = 0;
    CHECK(two[0] && ember_item(two[0], &v) == EMBER_OK && v == 12);
    CHECK(two[1] && ember_item(two[1], &v) == EMBER_OK && v == 7);
    ember_tensor_release(two[0]);
    ember_tensor_release(two[1]);

    /* set and get a global: the same tensor */
    CHECK(ember_lua_set_tensor(E, "frame", t) == EMBER_OK);
    CHECK(ember_lua_get_tensor(E, "frame", &out) == EMBER_OK && out == t);
    ember_tensor_release(out);
    CHECK(ember_lua_set_tensor(E, "model.input", t) == EMBER_OK);
    CHECK(ember_lua_dostring(E, "assert(rawequal(model.input, frame))") == EMBER_OK);
    CHECK(ember_lua_set_tensor(E, "frame", NULL) == EMBER_OK);
    CHECK(ember_lua_dostring(E, "assert(frame == nil)") == EMBER_OK);

    /* the host lets go first: Lua's reference keeps the memory wrapped */
    int before = released;
    ember_tensor_release(t);
    CHECK(released == before);
    CHECK(ember_lua_dostring(E, "assert(model.input:sum():item() == 12)") == EMBER_OK);
    CHECK(ember_lua_dostring(E, "model.input = nil; collectgarbage(); collectgarbage(); "
                                "ember._sweep()") == EMBER_OK);
    CHECK(released == before + 1);
}

static void test_bad_results(ember_lua *E)
{
    ember_tensor *out[2] = { NULL, NULL };
    CHECK(ember_lua_dostring(E, "function none() end; function str() return 'a' end; "
                                "function fails(x) return x + ember.ones({5}) end; notfn = 3") ==
          EMBER_OK);
    CHECK(ember_lua_call(E, "none", 0, NULL, 1, out) == EMBER_ERR_ARG);
    HAS(E, "result 1 of 'none' is missing");
    CHECK(out[0] == NULL);
    CHECK(ember_lua_call(E, "str", 0, NULL, 1, out) == EMBER_ERR_ARG);
    HAS(E, "is a string, not a tensor");
    CHECK(ember_lua_call(E, "nosuch", 0, NULL, 0, NULL) == EMBER_ERR_ARG);
    HAS(E, "'nosuch' is not defined");
    CHECK(ember_lua_call(E, "notfn", 0, NULL, 0, NULL) == EMBER_ERR_ARG);
    HAS(E, "not a function");
    CHECK(ember_lua_call(E, "no.such.thing", 0, NULL, 0, NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_call(E, "bad name!", 0, NULL, 0, NULL) == EMBER_ERR_ARG);
    HAS(E, "bad name");

    float buf[2] = { 1, 2 };
    ember_tensor *t = blob(buf, 2);
    CHECK(ember_lua_call(E, "fails", 1, &t, 1, out) == EMBER_ERR_LUA);
    HAS(E, "cannot be broadcast");
    HAS(E, "stack traceback");
    CHECK(out[0] == NULL);
    /* a NULL argument arrives as nil */
    ember_tensor *null_arg = NULL;
    CHECK(ember_lua_call(E, "fails", 1, &null_arg, 1, out) == EMBER_ERR_LUA);

    /* a tensor Lua freed cannot come back */
    CHECK(ember_lua_dostring(E, "gone = ember.zeros({2}); gone:free()") == EMBER_OK);
    CHECK(ember_lua_get_tensor(E, "gone", out) == EMBER_ERR_ARG);
    HAS(E, "freed tensor");
    CHECK(ember_lua_get_tensor(E, "missing", out) == EMBER_ERR_ARG);
    HAS(E, "'missing' is nil");

#ifndef UNDER_ASAN
    /* a tensor the host already released (reading it is what ASan forbids) */
    ember_tensor *dead = NULL;
    int64_t n = 4;
    CHECK(ember_empty(1, &n, EMBER_FLOAT32, EMBER_CPU, &dead) == EMBER_OK);
    ember_tensor_release(dead);
    CHECK(ember_lua_call(E, "print", 1, &dead, 0, NULL) == EMBER_ERR_ARG);
    HAS(E, "not a live tensor");
#endif
    ember_tensor_release(t);
}

/* one tensor, two states: refused, not confused */
static void test_two_states(ember_lua *E)
{
    ember_lua *F = ember_lua_open();
    CHECK(F != NULL);
    if (!F) return;
    float a[2] = { 1, 2 }, b[2] = { 3, 4 };
    ember_tensor *ta = blob(a, 2), *tb = blob(b, 2), *out = NULL;
    CHECK(ember_lua_set_tensor(E, "shared", ta) == EMBER_OK);
    CHECK(ember_lua_set_tensor(F, "shared", ta) == EMBER_ERR_ARG);
    HAS(F, "another ember Lua state");
    CHECK(ember_lua_set_tensor(F, "own", tb) == EMBER_OK);
    CHECK(ember_lua_get_tensor(F, "own", &out) == EMBER_OK && out == tb);
    ember_tensor_release(out);
    ember_lua_close(F);
    CHECK(ember_lua_set_tensor(E, "shared", NULL) == EMBER_OK);
    ember_tensor_release(ta);
    ember_tensor_release(tb);
}

static void test_raw_state(ember_lua *E)
{
    lua_State *L = ember_lua_state(E);
    float buf[2] = { 5, 6 };
    ember_tensor *t = blob(buf, 2);
    int top = lua_gettop(L);
    CHECK(ember_lua_push_tensor(L, t) == EMBER_OK);
    CHECK(lua_gettop(L) == top + 1);
    CHECK(ember_lua_to_tensor(L, -1) == t);
    lua_setglobal(L, "pushed");
    CHECK(ember_lua_dostring(E, "assert(pushed:sum():item() == 11)") == EMBER_OK);
    lua_pushnumber(L, 3);
    CHECK(ember_lua_to_tensor(L, -1) == NULL);
    lua_pop(L, 1);
    CHECK(ember_lua_push_tensor(L, NULL) == EMBER_OK && lua_isnil(L, -1));
    lua_pop(L, 1);
    CHECK(lua_gettop(L) == top);

    /* a plain LuaJIT state without ember: a status, nothing pushed */
    lua_State *bare = luaL_newstate();
    CHECK(ember_lua_push_tensor(bare, t) == EMBER_ERR_STATE);
    CHECK(lua_gettop(bare) == 0);
    lua_close(bare);
    ember_tensor_release(t);
}

/* ------------------------------------------------------------------ interrupts */
/* A training-like loop that would run for 30 s; the interrupt must end it. */
static const char LONG_LOOP[] =
    "local a, t0 = ember.randn({32, 32}), os.time()\n"
    "steps = 0\n"
    "while os.time() - t0 < 30 do\n"
    "  a = (a:matmul(a) * 0.03):tanh()\n"
    "  steps = steps + 1\n"
    "end\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    ember_lua *E;
    int rc;
    double seconds;
} loop_run;

static void *run_loop(void *arg)
{
    loop_run *r = arg;
    double t0 = now();
    r->rc = ember_lua_dostring(r->E, LONG_LOOP);
    r->seconds = now() - t0;
    return NULL;
}

static ember_lua *alarm_target;
static void on_alarm(int sig)
{
    (void)sig;
    ember_lua_interrupt(alarm_target);
}

/* Another thread, then a signal handler, stop a running loop; the state
   keeps working, and an interrupt while nothing runs changes nothing. */
static void test_interrupt(ember_lua *E)
{
    CHECK(ember_lua_interrupt(NULL) == EMBER_ERR_ARG);
    CHECK(ember_lua_interrupt(E) == EMBER_OK);   /* nothing runs: no effect on the next call */
    CHECK(ember_lua_dostring(E, "x = 1") == EMBER_OK);

    for (int round = 0; round < 3; round++) {
        loop_run r = {E, 0, 0};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, run_loop, &r) == 0);
        nanosleep(&(struct timespec){0, 300000000}, NULL);
        CHECK(ember_lua_interrupt(E) == EMBER_OK);
        pthread_join(th, NULL);
        CHECK(r.rc == EMBER_ERR_LUA);
        HAS(E, "interrupted (ember_lua_interrupt)");
        HAS(E, "ember_lua_dostring");   /* the user's chunk, not ember's files */
        CHECK(r.seconds < 10);
        CHECK(ember_lua_dostring(E, "assert(steps > 0); y = (ember.ones({3}) * 2):sum():item()") == EMBER_OK);
        CHECK(ember_lua_dostring(E, "assert(y == 6)") == EMBER_OK);
    }

    /* from a signal handler, on the thread running Lua */
    alarm_target = E;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, &old) == 0);
    struct itimerval it = {{0, 0}, {0, 300000}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    double t0 = now();
    CHECK(ember_lua_dostring(E, LONG_LOOP) == EMBER_ERR_LUA);
    CHECK(now() - t0 < 10);
    HAS(E, "interrupted (ember_lua_interrupt)");
    sigaction(SIGALRM, &old, NULL);
    CHECK(ember_lua_dostring(E, "collectgarbage(); assert(ember.ones({2}):sum():item() == 2)") == EMBER_OK);
}

int main(void)
{
    CHECK(ember_lua_error(NULL) != NULL);
    ember_lua *E = ember_lua_open();
    if (!E) {
        fprintf(stderr, "ember_lua_open failed: %s\n", ember_lua_error(NULL));
        return 1;
    }
    test_running_code(E);
    test_null_arguments(E);
    test_zero_copy(E);
    test_bad_results(E);
    test_two_states(E);
    test_raw_state(E);
    test_interrupt(E);
    ember_lua_close(E);

    ember_memory_stats_t m;
    ember_memory_stats(&m);
    CHECK(m.live_tensors == 0);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("test_ember_lua: all checks passed\n");
    return failures != 0;
}
