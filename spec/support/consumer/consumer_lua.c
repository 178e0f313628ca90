/* A C host of ember's Lua layer (libember_lua), built like consumer.c: it
   runs a Lua chunk with ember loaded and prints what it returns (6). */
#include <stdio.h>
#include "ember_lua.h"

int main(void)
{
    ember_lua *E = ember_lua_open();
    if (!E) {
        fprintf(stderr, "consumer_lua: %s\n", ember_lua_error(NULL));
        return 1;
    }
    int rc = ember_lua_dostring(E, "print(ember.arange(4):sum():item()) io.stdout:flush()");
    if (rc != EMBER_OK) fprintf(stderr, "consumer_lua: %s\n", ember_lua_error(E));
    ember_lua_close(E);
    return rc == EMBER_OK ? 0 : 1;
}
