/* repl.c: the interactive loop of the ember command. Line editing, history
   (~/.ember_history) and tab completion come from libedit's readline
   interface when stdin is a terminal; otherwise lines are read plainly, so
   input can be piped. Compiling, printing and the completion candidates are
   Lua (repl.lua, compiled in). */
#include "cli.h"

#include <editline/readline.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "repl_lua.h"   /* generated from repl.lua: repl_lua[], repl_lua_len */

static lua_State *repl_L;
static int repl_ref = LUA_NOREF;   /* registry reference of repl.lua's table */
static char history_path[4096];

/* Pushes repl.lua's function `name`. */
static void push_fn(lua_State *L, const char *name)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, repl_ref);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

/* ------------------------------------------------------------------ completion */
static char **matches;
static int nmatches, next_match;

static void clear_matches(void)
{
    for (int i = 0; i < nmatches; i++) free(matches[i]);
    free(matches);
    matches = NULL;
    nmatches = next_match = 0;
}

/* repl.lua's complete(text), into matches[] */
static void compute_matches(const char *text)
{
    lua_State *L = repl_L;
    clear_matches();
    if (!L || !lua_checkstack(L, 8)) return;
    int top = lua_gettop(L);
    push_fn(L, "complete");
    lua_pushstring(L, text);
    if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
        int n = (int)lua_objlen(L, -1);
        matches = n > 0 ? calloc((size_t)n, sizeof *matches) : NULL;
        for (int i = 1; matches && i <= n; i++) {
            lua_rawgeti(L, -1, i);
            const char *s = lua_tostring(L, -1);
            if (s && (matches[nmatches] = strdup(s))) nmatches++;
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
}

static char *generator(const char *text, int state)
{
    if (state == 0) compute_matches(text);
    return next_match < nmatches ? strdup(matches[next_match++]) : NULL;
}

static char **complete(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1;   /* never fall back to file names */
    return rl_completion_matches(text, generator);
}

/* ------------------------------------------------------------------ history */
static void save_history(void)
{
    if (history_path[0] && write_history(history_path) == 0)
        history_truncate_file(history_path, 1000);
}

static void init_readline(void)
{
    rl_readline_name = "ember";
    rl_attempted_completion_function = complete;
    /* '.' and ':' are not breaks: "ember.nn.Li" is completed as one word */
    rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,+-*/%^~#[]";
    rl_completion_append_character = '\0';
    using_history();
    stifle_history(1000);
    const char *env = getenv("EMBER_HISTORY");
    const char *home = getenv("HOME");
    if (env) snprintf(history_path, sizeof history_path, "%s", env);   /* "" turns it off */
    else if (home && home[0]) snprintf(history_path, sizeof history_path, "%s/.ember_history", home);
    if (history_path[0]) {
        read_history(history_path);
        atexit(save_history);   /* also when a line calls os.exit */
    }
}

/* ------------------------------------------------------------------ reading */
/* One line without its newline (malloc'd), or NULL at the end of input or
   after Ctrl-C (*interrupted set). */
static char *read_line(int tty, const char *prompt, int *interrupted)
{
    *interrupted = 0;
    if (tty) {
        char *line = readline(prompt);
        if (cli_take_interrupt()) {
            free(line);
            *interrupted = 1;
            return NULL;
        }
        return line;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        if (cli_take_interrupt()) {
            clearerr(stdin);
            *interrupted = 1;
        }
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
    return line;
}

static char *append_line(char *chunk, const char *line)
{
    if (!chunk) return strdup(line);
    size_t a = strlen(chunk), b = strlen(line);
    char *s = realloc(chunk, a + b + 2);
    if (!s) {
        free(chunk);
        return NULL;
    }
    s[a] = '\n';
    memcpy(s + a + 1, line, b + 1);
    return s;
}

static void remember(int tty, const char *chunk)
{
    if (tty && chunk[strspn(chunk, " \t")] != '\0') add_history(chunk);
}

/* ------------------------------------------------------------------ evaluating */
/* Runs the compiled chunk on top of the stack and prints what it returns. */
static void eval_and_print(lua_State *L)
{
    int base = lua_gettop(L) - 1;
    int status = cli_docall(L, 0, LUA_MULTRET);
    if (status != 0) {
        cli_report(L, status);
    } else if (lua_gettop(L) > base) {
        int nres = lua_gettop(L) - base;
        push_fn(L, "show");
        lua_insert(L, base + 1);
        if (lua_pcall(L, nres, 1, 0) == 0) {
            const char *s = lua_tostring(L, -1);
            if (s && s[0]) printf("%s\n", s);
        } else {
            cli_report(L, 1);
        }
    }
    lua_settop(L, base);
    fflush(stdout);
}

int cli_repl(lua_State *L)
{
    repl_L = L;
    if (luaL_loadbuffer(L, (const char *)repl_lua, repl_lua_len, "=[ember repl]") != 0 ||
        lua_pcall(L, 0, 1, 0) != 0)
        return cli_report(L, 1);
    repl_ref = luaL_ref(L, LUA_REGISTRYINDEX);

    int tty = isatty(STDIN_FILENO);
    if (tty) {
        lua_getglobal(L, "jit");
        if (lua_istable(L, -1)) lua_getfield(L, -1, "version");
        printf("ember %s on %s; `ember` is loaded. Ctrl-D exits, Ctrl-C stops a computation.\n",
               ember_version(), lua_isstring(L, -1) ? lua_tostring(L, -1) : "LuaJIT");
        lua_settop(L, 0);
        init_readline();
    }
    cli_catch_sigint();

    char *chunk = NULL;
    for (;;) {
        int interrupted;
        char *line = read_line(tty, chunk ? ">> " : "> ", &interrupted);
        if (!line) {
            if (!interrupted) break;   /* end of input: Ctrl-D */
            if (tty) fputs("\n", stdout);   /* Ctrl-C at the prompt drops the pending lines */
            free(chunk);
            chunk = NULL;
            continue;
        }
        chunk = append_line(chunk, line);
        free(line);
        if (!chunk) {
            fprintf(stderr, "ember: out of memory\n");
            continue;
        }

        push_fn(L, "compile");
        lua_pushstring(L, chunk);
        if (lua_pcall(L, 1, 3, 0) != 0) {   /* compile itself failing: report, go on */
            cli_report(L, 1);
            free(chunk);
            chunk = NULL;
            continue;
        }
        if (lua_isnil(L, -3)) {
            int incomplete = lua_toboolean(L, -1);
            if (incomplete) {
                lua_pop(L, 3);
                continue;
            }
            remember(tty, chunk);
            lua_pop(L, 1);
            cli_report(L, 1);   /* the syntax error */
            lua_pop(L, 1);
        } else {
            remember(tty, chunk);
            lua_pop(L, 2);
            eval_and_print(L);
        }
        free(chunk);
        chunk = NULL;
    }
    free(chunk);
    clear_matches();
    if (tty) {
        fputs("\n", stdout);
        save_history();
        history_path[0] = '\0';   /* saved; the atexit call has nothing to do */
    }
    fflush(stdout);
    luaL_unref(L, LUA_REGISTRYINDEX, repl_ref);
    repl_ref = LUA_NOREF;
    repl_L = NULL;
    return 0;
}
