/* gen_ops_lua.c: writes lua/ember/optable.lua, the op list of the Lua binding,
   from core/src/ops/ops.def (run at build time, as the cdef is extracted from
   ember.h). Every op gets a record; `lua` names the generated wrapper that
   lua/ember/ops.lua makes for BINARY and UNARY lines, `inplace` its t:<name>_(). */
#include "ops/ops.h"

#include <stdio.h>

static void op(FILE *f, const char *name, int nin, int nout, unsigned flags, const char *kind)
{
    fprintf(f, "  { name = \"%s\", nin = %d, nout = %d", name, nin, nout);
    if (flags & OPF_LUA) fprintf(f, ", lua = \"%s\"", kind);
    if (flags & OPF_INPLACE) fprintf(f, ", inplace = true");
    fprintf(f, " },\n");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_ops_lua OUT\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fprintf(f, "-- Generated from core/src/ops/ops.def by cmake/gen_ops_lua.c; do not edit.\nreturn {\n");
#define OP(E, n, ni, no, fwd, grad, flags, save) op(f, #n, ni, no, flags, "");
#define BINARY(E, n, grad, flags, save, ...) op(f, #n, 2, 1, (flags) | OPF_LUA, "binary");
#define UNARY(E, n, grad, flags, save, f32, f64) op(f, #n, 1, 1, (flags) | OPF_LUA | OPF_INPLACE, "unary");
#include "ops/ops.def"
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : 1;
}
