/* cli.h: what main.c and repl.c of the ember command share. */
#ifndef EMBER_CLI_H
#define EMBER_CLI_H

struct lua_State;

/* Calls the function below its narg arguments with a traceback handler, with
   Ctrl-C turned into a Lua error ("interrupted") while it runs. Leaves nres
   results (LUA_MULTRET: all) or the error message; returns lua_pcall's status. */
int cli_docall(struct lua_State *L, int narg, int nres);
/* Prints the error message on top of the stack (if status != 0) to stderr,
   prefixed with "ember: ", and pops it. Returns status. */
int cli_report(struct lua_State *L, int status);
/* Whether a SIGINT arrived since the last call (and clears it). */
int cli_take_interrupt(void);
/* Installs the prompt-time SIGINT handler (sets the flag cli_take_interrupt reads). */
void cli_catch_sigint(void);
/* The interactive loop; returns the exit status. */
int cli_repl(struct lua_State *L);

#endif
