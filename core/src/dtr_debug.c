/* dtr_debug.c: EMBER_DTR_DEBUG's diagnostics for DTR (docs/dtr.md,
   "Diagnostics"): evictions and recomputations counted by op, printed to
   stderr at disable; and, when nothing is left to evict, what holds the
   bytes in use: each resident storage an op running reads (locked), the
   ones under min_size by op, and the bytes with no recipe at all. */
#include "dtr_impl.h"
#include "tape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ember__dtr_debug;

#define NAMES (EMBER_OP_COUNT + 1)   /* [0]: a random draw, [op + 1]: op */
static int64_t counts[2][NAMES];
static double remade_s[NAMES];   /* the CPU seconds of the ops remade (their recipes' cost) */

static const char *name_of(int op) { return op < 0 ? "random draw" : ember__ops[op].name; }

void ember__dtr_debug_reset(void)
{
    const char *env = getenv("EMBER_DTR_DEBUG");
    ember__dtr_debug = env && *env && strcmp(env, "0") != 0;
    memset(counts, 0, sizeof counts);
    memset(remade_s, 0, sizeof remade_s);
}

void ember__dtr_debug_count(const dtr_entry *e, int recompute)
{
    if (e->op + 1 < 0 || e->op + 1 >= NAMES) return;
    counts[recompute != 0][e->op + 1]++;
    if (recompute) remade_s[e->op + 1] += e->cost;
}

void ember__dtr_debug_print_counts(void)
{
    fprintf(stderr, "dtr: evictions and recomputations by op since enable\n");
    for (int i = 0; i < NAMES; i++)
        if (counts[0][i] || counts[1][i])
            fprintf(stderr, "dtr:   %-28s evicted %6lld  remade %6lld  (%.4f s of CPU)\n", name_of(i - 1),
                    (long long)counts[0][i], (long long)counts[1][i], remade_s[i]);
}

static void describe(const dtr_entry *e, const char *why)
{
    fprintf(stderr, "dtr:   %-10s %-28s %10zu bytes%s%s%s\n", why, name_of(e->op), e->s->nbytes,
            e->late ? " (a grad rule's)" : "", e->in_bwd ? " (made in backward)" : "",
            e->s->refcount > e->s->dtr_holds ? "" : " (only recipes hold it)");
}

void ember__dtr_debug_oom(const dtr_entry *head, size_t nbytes, int64_t budget, int64_t min_size, int in_rule,
                          int depth)
{
    int64_t in_use = ember_bytes_in_use(), recipes = 0, small = 0, evicted = 0;
    int64_t small_by_op[NAMES] = {0}, small_n[NAMES] = {0};
    fprintf(stderr,
            "dtr: out of budget making %zu bytes (budget %lld, %lld in use; %s, %d grad rules running, %d ops "
            "and recomputations nested)\n",
            nbytes, (long long)budget, (long long)in_use,
            ag_state()->run_depth > 0 ? "in a backward run" : "outside backward", in_rule, depth);
    for (const dtr_entry *e = head->next; e != head; e = e->next) {
        if (e->evicted) {
            evicted++;
            continue;
        }
        recipes += (int64_t)e->s->nbytes;
        if (e->s->dtr_locks > 0) describe(e, "read now");
        else if ((int64_t)e->s->nbytes < min_size) {
            small += (int64_t)e->s->nbytes;
            small_by_op[e->op + 1] += (int64_t)e->s->nbytes;
            small_n[e->op + 1]++;
        } else describe(e, "resident");
    }
    for (int i = 0; i < NAMES; i++)
        if (small_n[i])
            fprintf(stderr, "dtr:   under min_size: %-28s %4lld storages %10lld bytes\n", name_of(i - 1),
                    (long long)small_n[i], (long long)small_by_op[i]);
    fprintf(stderr,
            "dtr:   %lld bytes resident with a recipe (%lld under min_size %lld), %lld evicted recipes; %lld bytes "
            "with no recipe (parameters, gradients accumulated, optimizer state, the batch, what the op running "
            "allocated)\n",
            (long long)recipes, (long long)small, (long long)min_size, (long long)evicted,
            (long long)(in_use - recipes));
}
