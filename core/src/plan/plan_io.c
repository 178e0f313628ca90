/* plan_io.c: a plan in one safetensors file (docs/plans.md, "The file"):
   the live tensors and constants as entries, the graph as JSON in the
   metadata under "ember.plan", the format version under
   "ember.plan.version". A file is untrusted: the reader checks every
   number, slot and op before it builds anything, and a loaded plan checks
   each op's attributes against its inputs before it runs it. Only the ops
   of a forward and of a training step (SAVE_OPS, SGD's and Adam's updates,
   the in-place writes of RMSprop's) are written and read. A file that holds
   an Adam update or an in-place write is format version 2; one without is
   written as version 1, which the ember before them could read. */
#include "plan.h"
#include "../io/json.h"
#include "../ops/norm_act.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PLAN_VERSION = 2, PLAN_MAX_SLOTS = 1 << 20, PLAN_MAX_IO = 64 };

/* The ops a saved plan may hold: their forwards check their inputs, and
   check_attrs below checks the attributes of the ones that take any. */
static const char *const SAVE_OPS[] = {
    "add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "sqrt", "rsqrt", "abs", "sigmoid",
    "tanh", "relu", "silu", "linear", "linear_relu", "matmul", "reshape", "view", "transpose", "softmax",
    "log_softmax", "clone", "conv2d", "conv2d_relu", "max_pool2d", "avg_pool2d", "channel_affine", "mean",
    "lt", "le", "gt", "ge", "where",
    /* and a training step's: the loss, the backward's ops (an SGD step's entries are written apart) */
    "cross_entropy", "cross_entropy_backward", "relu_backward", "relu_bias_backward", "sum", "sum_to", "expand",
    "select", NULL};

/* The in-place writes a saved plan may hold (version 2): RMSprop's update,
   a binary op's in-place form (a, b: a op= b) or a unary one without
   attributes (a = op(a)). */
static const char *const INPLACE_BINARY[] = {"add", "sub", "mul", "div", NULL};
static const char *const INPLACE_UNARY[] = {"sqrt", "rsqrt", "neg", "abs", "relu", "exp", "log", "sigmoid", "tanh", NULL};

static int listed(const char *const *list, int op)
{
    for (int k = 0; list[k]; k++)
        if (strcmp(list[k], ember__ops[op].name) == 0) return 1;
    return 0;
}

static int savable(int op) { return listed(SAVE_OPS, op); }

/* an in-place entry's op and attributes are of the lists above */
static int inplace_savable(const plan_entry *en)
{
    static const ember_attrs none;
    if (en->kind == PE_BINARY_) return listed(INPLACE_BINARY, en->op);
    return en->kind == PE_UNARY_ && listed(INPLACE_UNARY, en->op) && memcmp(&en->at, &none, sizeof none) == 0;
}

/* ------------------------------------------------------------------ writing */
static void put_ints(json_text *b, const int64_t *v, int n)
{
    json_printf(b, "[");
    for (int k = 0; k < n; k++) json_printf(b, "%s%lld", k ? "," : "", (long long)v[k]);
    json_printf(b, "]");
}

/* Whether an entry (a fused one: each it replaced) can be written. */
static int check_savable(const plan_entry *en, int e)
{
    if (en->kind == PE_FUSED) {
        for (int k = 0; k < en->nsub; k++) EMBER_TRY(check_savable(&en->sub[k], e));
        return EMBER_OK;
    }
    if (en->kind == PE_VIEW || en->kind == PE_SGD || en->kind == PE_ADAM || (en->kind == PE_OP && savable(en->op)) ||
        inplace_savable(en))
        return EMBER_OK;
    char what[48];
    snprintf(what, sizeof what, "%s%s", en->kind == PE_OP || en->kind == PE_BINARY_ || en->kind == PE_UNARY_ ?
             ember__ops[en->op].name : "a copy, fill or random entry", en->kind == PE_BINARY_ || en->kind == PE_UNARY_ ? "_" : "");
    return ember__fail(EMBER_ERR_UNSUPPORTED,
                       "plan save: entry %d (%s) cannot be saved: a saved plan holds the ops of a forward and of "
                       "an SGD, Adam or RMSprop step (%s..., add_ sub_ mul_ div_ sqrt_ ...), not other in-place "
                       "writes, other optimizers' updates or random draws",
                       e + 1, what, SAVE_OPS[0]);
}

static void put_entry(json_text *b, const ember_plan *p, const plan_entry *en, int *count)
{
    if (en->kind == PE_FUSED) {   /* the entries it replaced */
        for (int k = 0; k < en->nsub; k++) put_entry(b, p, &en->sub[k], count);
        return;
    }
    int64_t sl[72];
    int ns = en->nin + en->nout;
    for (int k = 0; k < ns && k < 72; k++) sl[k] = en->slots[k];
    if (en->kind == PE_VIEW) {
        json_printf(b, "%s{\"view\":", *count ? "," : "");
        put_ints(b, en->args.i, 2 + 2 * EMBER_MAX_DIMS);
    } else if (en->kind == PE_SGD) {   /* f: lr, momentum, dampening, weight decay; flags: nesterov, maximize */
        const double *f = en->args.f;
        json_printf(b, "%s{\"sgd\":[%.17g,%.17g,%.17g,%.17g],\"flags\":", *count ? "," : "", f[0], f[1], f[2], f[3]);
        put_ints(b, en->args.i, 2);
    } else if (en->kind == PE_BINARY_ || en->kind == PE_UNARY_) {
        json_printf(b, "%s{\"inplace\":\"%s\"", *count ? "," : "", ember__ops[en->op].name);
    } else if (en->kind == PE_ADAM) {   /* f: lr, b1, b2, eps, weight decay; flags: decoupled, maximize; the next step */
        const double *f = en->args.f;
        json_printf(b, "%s{\"adam\":[%.17g,%.17g,%.17g,%.17g,%.17g],\"flags\":", *count ? "," : "", f[0], f[1], f[2],
                    f[3], f[4]);
        put_ints(b, en->args.i, 2);
        json_printf(b, ",\"step\":%lld", (long long)p->counters[en->args.i[2]]);
    } else {
        ember_attrs at = en->at;
        json_printf(b, "%s{\"op\":\"%s\",\"i\":", *count ? "," : "", ember__ops[en->op].name);
        if (en->op == EMBER_OP_CHANNEL_AFFINE) ember__act_set_bounds(&at, 0, 0);   /* the bounds: "act" below */
        put_ints(b, at.i, EMBER_MAX_ATTRS);
        json_printf(b, ",\"f\":[%.17g,%.17g]", en->at.f[0], en->at.f[1]);
        if (en->op == EMBER_OP_CHANNEL_AFFINE)   /* its activation's bounds, doubles kept in i[1], i[2] */
            json_printf(b, ",\"act\":[%.17g,%.17g]", ember__act_bound(&en->at, 1), ember__act_bound(&en->at, 2));
    }
    json_printf(b, ",\"nin\":%d,\"slots\":", en->nin);
    put_ints(b, sl, ns > 72 ? 72 : ns);
    json_printf(b, "}");
    (*count)++;
}

int ember_plan_save(const ember_plan *p, const char *path)
{
    if (!p || !path) return ember__fail(EMBER_ERR_ARG, "plan save: NULL argument");
    for (int e = 0; e < p->nentries; e++) EMBER_TRY(check_savable(&p->entries[e], e));
    for (int s = 0; s < p->nslots; s++)
        if ((p->slots[s].kind == SLOT_LIVE || p->slots[s].kind == SLOT_CONST) && p->slots[s].tensor->storage->device != EMBER_CPU)
            return ember__fail(EMBER_ERR_UNSUPPORTED, "plan save: slot %d is on a device; a saved plan runs on the CPU", s);
    int version = p->ncounters > 0 ? 2 : 1;   /* version 1: what the ember before Adam's updates reads */
    for (int e = 0; e < p->nentries; e++)
        if (p->entries[e].kind == PE_BINARY_ || p->entries[e].kind == PE_UNARY_) version = 2;
    json_text b = {0};
    json_printf(&b, "{\"version\":%d,\"inputs\":[", version);
    for (int i = 0; i < p->ninputs; i++) {
        json_printf(&b, "%s{\"dtype\":%d,\"shape\":", i ? "," : "", p->inputs_dtype[i]);
        put_ints(&b, p->inputs_shape[i], p->inputs_ndim[i]);
        json_printf(&b, "}");
    }
    json_printf(&b, "],\"slots\":[");
    ember_st_named *named = calloc((size_t)p->nslots + 1, sizeof *named);
    char (*names)[24] = calloc((size_t)p->nslots + 1, sizeof *names);
    int nt = 0;
    if (!named || !names) b.oom = 1;
    for (int s = 0; s < p->nslots && !b.oom; s++) {
        const plan_slot *sl = &p->slots[s];
        if (sl->kind == SLOT_INPUT) json_printf(&b, "%s[\"in\",%d]", s ? "," : "", sl->index);
        else if (sl->kind == SLOT_TEMP) json_printf(&b, "%s[\"t\"]", s ? "," : "");
        else {
            const char *nm = p->names && p->names[s] ? p->names[s] : names[nt];
            snprintf(names[nt], sizeof names[nt], "%c%d", sl->kind == SLOT_LIVE ? 'w' : 'c', s);
            named[nt] = (ember_st_named){nm, strlen(nm), sl->tensor};
            /* a name is printable ASCII with no quote or backslash (ember_plan_name) */
            json_printf(&b, "%s[\"%s\",\"%s\",%d]", s ? "," : "", sl->kind == SLOT_LIVE ? "w" : "c", nm, sl->written);
            nt++;
        }
    }
    json_printf(&b, "],\"entries\":[");
    int count = 0;
    for (int e = 0; e < p->nentries; e++) put_entry(&b, p, &p->entries[e], &count);
    json_printf(&b, "],\"outputs\":[");
    for (int k = 0; k < p->noutputs; k++) json_printf(&b, "%s%d", k ? "," : "", p->outputs[k]);
    json_printf(&b, "]}");
    int rc;
    if (b.oom) rc = ember__fail(EMBER_ERR_OOM, "plan save: out of memory");
    else {
        ember_st_kv meta[2] = {{"ember.plan", 10, b.p, b.len}, {"ember.plan.version", 18, version == 2 ? "2" : "1", 1}};
        rc = ember_st_save(path, nt, named, 2, meta);
    }
    free(b.p);
    free(named);
    free(names);
    return rc;
}

/* ------------------------------------------------------------------ reading */
typedef struct reader {
    const char *path;
    ember_st_file *f;
    int version;   /* the file's format version (1 or 2) */
    int nadam;     /* the Adam updates read so far: their step counters' indices */
} reader;

#define BAD(...) (ember__fail(EMBER_ERR_IO, "plan load: %s: " __VA_ARGS__))

/* a JSON number that is a whole number in [lo, hi] */
static int whole(const json_node *n, double lo, double hi, int64_t *out)
{
    if (!n || n->type != JSON_NUMBER || !(n->num >= lo && n->num <= hi) || n->num != floor(n->num)) return 0;
    *out = (int64_t)n->num;
    return 1;
}

static int read_tensor(reader *r, const char *name, ember_tensor **out)
{
    int n = ember_st_count(r->f);
    for (int i = 0; i < n; i++) {
        const char *nm;
        size_t len;
        EMBER_TRY(ember_st_entry(r->f, i, &nm, &len, NULL, NULL, NULL, NULL, NULL));
        if (len == strlen(name) && memcmp(nm, name, len) == 0) return ember_st_read(r->f, i, out);
    }
    return BAD("the graph names a tensor '%s' the file does not hold", r->path, name);
}

/* an optimizer update's operand k: a weight of the file marked written */
static int updated_weight(const reader *r, const ember_plan *p, const json_node *sl, int k, int e, const char *what)
{
    int64_t w;
    if (!whole(&sl->items[k], 0, p->nslots - 1, &w) || p->slots[w].kind != SLOT_LIVE || !p->slots[w].written)
        return BAD("entry %d: %s updates slot %d, which is not a weight of the file marked written", r->path, e + 1,
                   what, sl->items[k].type == JSON_NUMBER ? (int)sl->items[k].num : -1);
    return EMBER_OK;
}

/* an Adam update: {"adam": [lr, b1, b2, eps, wd], "flags": [decoupled, maximize], "step": the next step,
   "slots": [p, g, exp_avg, exp_avg_sq, max_exp_avg_sq or -1]}; the state is weights of the file of the
   parameter's dtype and shape */
static int read_adam(reader *r, ember_plan *p, const json_node *en, const json_node *adam, const json_node *sl,
                     int64_t nin, int e, plan_entry *pe)
{
    static const char *const state[5] = {"the parameter", "", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    const json_node *fl = json_get(en, "flags");
    int64_t step;
    if (r->version < 2) return BAD("entry %d: an adam update in a version 1 file", r->path, e + 1);
    if (adam->type != JSON_ARRAY || adam->n != 5 || !fl || fl->type != JSON_ARRAY || fl->n != 2 || nin != 5 ||
        sl->n != 5 || !whole(json_get(en, "step"), 1, (double)(1ll << 53), &step))
        return BAD("entry %d: a bad adam update (its hyperparameters, flags, step count or slots)", r->path, e + 1);
    pe->kind = PE_ADAM;
    for (int k = 0; k < 5; k++) {
        if (adam->items[k].type != JSON_NUMBER || !isfinite(adam->items[k].num))
            return BAD("entry %d: adam's hyperparameter %d is not a finite number", r->path, e + 1, k + 1);
        pe->args.f[k] = adam->items[k].num;
    }
    if (!(pe->args.f[1] >= 0 && pe->args.f[1] < 1 && pe->args.f[2] >= 0 && pe->args.f[2] < 1 && pe->args.f[3] >= 0))
        return BAD("entry %d: adam's betas (%g, %g) are not in [0, 1) or its eps %g is negative", r->path, e + 1,
                   pe->args.f[1], pe->args.f[2], pe->args.f[3]);
    for (int k = 0; k < 2; k++)
        if (!whole(&fl->items[k], 0, 1, &pe->args.i[k])) return BAD("entry %d: adam's flags are not 0 or 1", r->path, e + 1);
    pe->args.i[2] = r->nadam++;   /* its counter, set to the saved step by ember__plan_finish */
    pe->args.i[3] = step - 1;
    int64_t w;
    const ember_tensor *param = NULL;
    for (int k = 0; k < 5; k++) {
        if (k == 1 || (k == 4 && whole(&sl->items[4], -1, -1, &w))) continue;   /* the gradient; no max_exp_avg_sq */
        EMBER_TRY(updated_weight(r, p, sl, k, e, "adam"));
        const ember_tensor *t = p->slots[(int)sl->items[k].num].tensor;
        char a[200], b[200];
        if (!param) param = t;
        else if (t->dtype != param->dtype || t->ndim != param->ndim ||
                 memcmp(t->shape, param->shape, (size_t)t->ndim * sizeof *t->shape) != 0)
            return BAD("entry %d: adam's %s is %s %s, its parameter %s %s", r->path, e + 1, state[k],
                       ember_dtype_name(t->dtype), ember__tshape(a, t), ember_dtype_name(param->dtype),
                       ember__tshape(b, param));
    }
    return EMBER_OK;
}

/* an in-place write: {"inplace": op, "slots": [a, b]} (binary) or [a] (unary); a is a temporary made
   before, or a tensor of the file marked written */
static int read_inplace(reader *r, ember_plan *p, const json_node *ip, const json_node *sl, int64_t nin, int e,
                        const uint8_t *defined, plan_entry *pe)
{
    if (r->version < 2) return BAD("entry %d: an in-place write in a version 1 file", r->path, e + 1);
    int op = -1;
    for (int k = 0; k < EMBER_OP_COUNT && op < 0 && ip->type == JSON_STRING; k++)
        if (strcmp(ember__ops[k].name, ip->str) == 0) op = k;
    int binary = op >= 0 && listed(INPLACE_BINARY, op), unary = op >= 0 && listed(INPLACE_UNARY, op);
    if (!binary && !unary)
        return BAD("entry %d: unknown in-place op '%s'", r->path, e + 1, ip->type == JSON_STRING ? ip->str : "?");
    if (nin != (binary ? 2 : 1) || sl->n != nin)
        return BAD("entry %d (%s_): %lld inputs and %d slots for an in-place op of %d", r->path, e + 1, ip->str,
                   (long long)nin, sl->n, binary ? 2 : 1);
    int64_t a;
    if (!whole(&sl->items[0], 0, p->nslots - 1, &a)) return BAD("entry %d: slot out of range", r->path, e + 1);
    const plan_slot *ps = &p->slots[a];
    if (ps->kind == SLOT_INPUT || ((ps->kind == SLOT_LIVE || ps->kind == SLOT_CONST) && !ps->written) ||
        !defined[a])
        return BAD("entry %d (%s_) writes slot %lld, which is not a temporary made before it or a tensor of the file "
                   "marked written", r->path, e + 1, ip->str, (long long)a);
    pe->kind = binary ? PE_BINARY_ : PE_UNARY_;
    pe->op = (int16_t)op;
    return EMBER_OK;
}

static int load_graph(reader *r, const json_node *g, ember_plan *p, uint8_t *defined)
{
    const char *path = r->path;
    const json_node *ins = json_get(g, "inputs"), *slots = json_get(g, "slots"), *ents = json_get(g, "entries"),
                    *outs = json_get(g, "outputs");
    if (!ins || ins->type != JSON_ARRAY || !slots || slots->type != JSON_ARRAY || !ents || ents->type != JSON_ARRAY ||
        !outs || outs->type != JSON_ARRAY)
        return BAD("the graph lacks inputs, slots, entries or outputs", path);
    if (ins->n > PLAN_MAX_IO || outs->n > PLAN_MAX_IO || slots->n > PLAN_MAX_SLOTS || ents->n > PLAN_MAX_SLOTS)
        return BAD("absurd sizes: %d inputs, %d outputs, %d slots, %d entries", path, ins->n, outs->n, slots->n,
                   ents->n);
    for (int i = 0; i < ins->n; i++) {
        const json_node *in = &ins->items[i], *sh = json_get(in, "shape");
        int64_t dt, d;
        if (!whole(json_get(in, "dtype"), 0, 7, &dt) || !sh || sh->type != JSON_ARRAY || sh->n > EMBER_MAX_DIMS)
            return BAD("input %d: a bad dtype or shape", path, i + 1);
        p->inputs_dtype[i] = (int)dt;
        p->inputs_ndim[i] = sh->n;
        p->inputs_device[i] = EMBER_CPU;
        for (int k = 0; k < sh->n; k++) {
            if (!whole(&sh->items[k], 0, (double)(1ll << 40), &d)) return BAD("input %d: a bad size", path, i + 1);
            p->inputs_shape[i][k] = d;
        }
        int64_t numel;
        if (ember__check_shape("plan load", sh->n, p->inputs_shape[i], &numel) < 0)
            return BAD("input %d: %s", path, i + 1, ember_last_error());
        ember__contiguous_strides(sh->n, p->inputs_shape[i], p->inputs_strides[i]);   /* a loaded plan's inputs */
    }
    for (int s = 0; s < slots->n; s++) {
        const json_node *sl = &slots->items[s];
        plan_slot *ps = &p->slots[s];
        *ps = (plan_slot){SLOT_TEMP, 0, NULL, 0, -1, 0};
        if (sl->type != JSON_ARRAY || sl->n < 1 || sl->items[0].type != JSON_STRING) return BAD("slot %d is malformed", path, s);
        const char *k = sl->items[0].str;
        int64_t v;
        if (strcmp(k, "in") == 0) {
            if (sl->n != 2 || !whole(&sl->items[1], 0, ins->n - 1, &v)) return BAD("slot %d: a bad input index", path, s);
            ps->kind = SLOT_INPUT;
            ps->index = (int)v;
            defined[s] = 1;
        } else if (strcmp(k, "w") == 0 || strcmp(k, "c") == 0) {
            if (sl->n != 3 || sl->items[1].type != JSON_STRING || !whole(&sl->items[2], 0, 1, &v))
                return BAD("slot %d: a bad tensor slot", path, s);
            ps->kind = k[0] == 'w' ? SLOT_LIVE : SLOT_CONST;
            ps->written = (int)v;
            EMBER_TRY(read_tensor(r, sl->items[1].str, &ps->tensor));
            if (!(p->names[s] = strdup(sl->items[1].str))) return ember__fail(EMBER_ERR_OOM, "plan load: out of memory");
            defined[s] = 1;
        } else if (strcmp(k, "t") != 0 || sl->n != 1) {
            return BAD("slot %d: unknown kind", path, s);
        }
        p->nslots = s + 1;
    }
    for (int e = 0; e < ents->n; e++) {
        const json_node *en = &ents->items[e], *sl = json_get(en, "slots"), *view = json_get(en, "view"),
                        *opn = json_get(en, "op");
        plan_entry *pe = &p->entries[e];
        memset(pe, 0, sizeof *pe);
        int64_t nin;
        const json_node *sgd = json_get(en, "sgd"), *adam = json_get(en, "adam"), *ip = json_get(en, "inplace");
        if (!sl || sl->type != JSON_ARRAY || !whole(json_get(en, "nin"), 0, 64, &nin) ||
            (!!view + !!opn + !!sgd + !!adam + !!ip) != 1)
            return BAD("entry %d is malformed", path, e + 1);
        if (ip) {
            EMBER_TRY(read_inplace(r, p, ip, sl, nin, e, defined, pe));
        } else if (adam) {
            EMBER_TRY(read_adam(r, p, en, adam, sl, nin, e, pe));
        } else if (sgd) {   /* p, g, the momentum buffer or -1; p and the buffer the file's weights, written */
            const json_node *fl = json_get(en, "flags");
            if (sgd->type != JSON_ARRAY || sgd->n != 4 || !fl || fl->type != JSON_ARRAY || fl->n != 2 || nin != 3 ||
                sl->n != 3)
                return BAD("entry %d: a bad sgd update", path, e + 1);
            pe->kind = PE_SGD;
            for (int k = 0; k < 4; k++) {
                if (sgd->items[k].type != JSON_NUMBER || !isfinite(sgd->items[k].num))
                    return BAD("entry %d: a bad sgd update", path, e + 1);
                pe->args.f[k] = sgd->items[k].num;
            }
            for (int k = 0; k < 2; k++)
                if (!whole(&fl->items[k], 0, 1, &pe->args.i[k])) return BAD("entry %d: a bad sgd update", path, e + 1);
            for (int k = 0; k < 3; k += 2) {
                int64_t w;
                if (k == 2 && whole(&sl->items[2], -1, -1, &w)) continue;   /* no momentum buffer */
                EMBER_TRY(updated_weight(r, p, sl, k, e, "sgd"));
            }
        } else if (view) {
            if (view->type != JSON_ARRAY || view->n != 2 + 2 * EMBER_MAX_DIMS || nin != 1 || sl->n != 2)
                return BAD("entry %d: a bad view", path, e + 1);
            pe->kind = PE_VIEW;
            for (int k = 0; k < view->n; k++)
                if (!whole(&view->items[k], k == 0 ? 0 : -(double)(1ll << 50), k == 0 ? EMBER_MAX_DIMS : (double)(1ll << 50),
                           &pe->args.i[k]))
                    return BAD("entry %d: a bad view geometry", path, e + 1);
        } else {
            if (opn->type != JSON_STRING) return BAD("entry %d: a bad op", path, e + 1);
            int op = -1;
            for (int k = 0; k < EMBER_OP_COUNT && op < 0; k++)
                if (strcmp(ember__ops[k].name, opn->str) == 0) op = k;
            if (op < 0 || !savable(op)) return BAD("entry %d: unknown op '%s'", path, e + 1, opn->str);
            const json_node *ai = json_get(en, "i"), *af = json_get(en, "f");
            if (!ai || ai->type != JSON_ARRAY || ai->n != EMBER_MAX_ATTRS || !af || af->type != JSON_ARRAY || af->n != 2 ||
                af->items[0].type != JSON_NUMBER || af->items[1].type != JSON_NUMBER)
                return BAD("entry %d (%s): bad attributes", path, e + 1, opn->str);
            for (int k = 0; k < EMBER_MAX_ATTRS; k++)
                if (!whole(&ai->items[k], -(double)(1ll << 50), (double)(1ll << 50), &pe->at.i[k]))
                    return BAD("entry %d (%s): bad attributes", path, e + 1, opn->str);
            pe->at.f[0] = af->items[0].num;
            pe->at.f[1] = af->items[1].num;
            if (op == EMBER_OP_CHANNEL_AFFINE) {   /* the activation's bounds (lo <= hi checked by the op) */
                const json_node *act = json_get(en, "act");
                if (!act || act->type != JSON_ARRAY || act->n != 2 || act->items[0].type != JSON_NUMBER ||
                    act->items[1].type != JSON_NUMBER || pe->at.i[1] != 0 || pe->at.i[2] != 0)
                    return BAD("entry %d (%s): bad activation bounds", path, e + 1, opn->str);
                ember__act_set_bounds(&pe->at, act->items[0].num, act->items[1].num);
            }
            if ((ember__ops[op].nin >= 0 && nin != ember__ops[op].nin) || sl->n != nin + ember__ops[op].nout)
                return BAD("entry %d (%s): %lld inputs and %d slots for an op of %d inputs and %d outputs", path, e + 1,
                           opn->str, (long long)nin, sl->n, ember__ops[op].nin, ember__ops[op].nout);
            pe->kind = PE_OP;
            pe->op = (int16_t)op;
        }
        pe->nin = (int32_t)nin;
        pe->nout = sl->n - (int)nin;
        pe->slots = malloc((size_t)sl->n * sizeof *pe->slots);
        if (!pe->slots) return ember__fail(EMBER_ERR_OOM, "plan load: out of memory");
        p->nentries = e + 1;
        for (int k = 0; k < sl->n; k++) {
            int64_t s;
            if (((pe->kind == PE_SGD && k == 2) || (pe->kind == PE_ADAM && k == 4)) && whole(&sl->items[k], -1, -1, &s)) {
                pe->slots[k] = -1;
                continue;
            }
            if (!whole(&sl->items[k], 0, slots->n - 1, &s)) return BAD("entry %d: slot out of range", path, e + 1);
            pe->slots[k] = (int32_t)s;
            if (k < nin && !defined[s]) return BAD("entry %d reads slot %lld before anything writes it", path, e + 1, (long long)s);
            if (k >= nin && (defined[s] || p->slots[s].kind != SLOT_TEMP))
                return BAD("entry %d writes slot %lld, which is not a new temporary", path, e + 1, (long long)s);
        }
        for (int k = (int)nin; k < sl->n; k++) defined[pe->slots[k]] = 1;
    }
    for (int k = 0; k < outs->n; k++) {
        int64_t s;
        if (!whole(&outs->items[k], 0, slots->n - 1, &s) || !defined[s]) return BAD("output %d: a bad slot", path, k + 1);
        p->outputs[k] = (int32_t)s;
    }
    p->ninputs = ins->n;
    p->noutputs = outs->n;
    return EMBER_OK;
}

int ember_plan_load(const char *path, ember_plan **out)
{
    if (!path || !out) return ember__fail(EMBER_ERR_ARG, "plan load: NULL argument");
    *out = NULL;
    ember_st_file *f = NULL;
    EMBER_TRY(ember_st_open(path, &f));
    int rc = ember__plan_from_st(f, path, out);
    ember_st_close(f);
    return rc;
}

int ember__plan_from_st(ember_st_file *f, const char *path, ember_plan **out)
{
    reader r = {path, f, 0, 0};
    *out = NULL;
    const char *graph = NULL, *version = NULL;
    size_t glen = 0, vlen = 0;
    for (int i = 0; i < ember_st_meta_count(r.f); i++) {
        const char *k, *v;
        size_t kl, vl;
        if (ember_st_meta(r.f, i, &k, &kl, &v, &vl) < 0) continue;
        if (kl == 10 && memcmp(k, "ember.plan", 10) == 0) graph = v, glen = vl;
        if (kl == 18 && memcmp(k, "ember.plan.version", 18) == 0) version = v, vlen = vl;
    }
    int rc = EMBER_OK;
    json_node root = {0};
    char msg[200];
    ember_plan *p = NULL;
    uint8_t *defined = NULL;
    if (!graph || !version) {
        rc = BAD("not a plan (no \"ember.plan\" in the metadata)", path);
        goto done;
    }
    if (vlen != 1 || version[0] < '1' || version[0] > '0' + PLAN_VERSION) {
        rc = BAD("plan format version '%.*s'; this ember reads versions 1 to %d", path, (int)(vlen > 20 ? 20 : vlen),
                 version, PLAN_VERSION);
        goto done;
    }
    r.version = version[0] - '0';
    int jr = json_parse(graph, glen, &root, msg, sizeof msg);
    if (jr < 0) {
        rc = jr == -2 ? ember__fail(EMBER_ERR_OOM, "plan load: out of memory") : BAD("the graph: %s", path, msg);
        goto done;
    }
    const json_node *ins = json_get(&root, "inputs"), *slots = json_get(&root, "slots"),
                    *ents = json_get(&root, "entries"), *outs = json_get(&root, "outputs");
    int64_t ver;
    if (root.type != JSON_OBJECT || !whole(json_get(&root, "version"), r.version, r.version, &ver) || !ins ||
        !slots || !ents || !outs || ins->type != JSON_ARRAY || slots->type != JSON_ARRAY ||
        ents->type != JSON_ARRAY || outs->type != JSON_ARRAY) {
        rc = BAD("the graph is not a version %d plan", path, r.version);
        goto done;
    }
    if (ins->n > PLAN_MAX_IO || outs->n > PLAN_MAX_IO || slots->n > PLAN_MAX_SLOTS || ents->n > PLAN_MAX_SLOTS) {
        rc = BAD("absurd sizes: %d inputs, %d outputs, %d slots, %d entries", path, ins->n, outs->n, slots->n, ents->n);
        goto done;
    }
    int nadam = 0;   /* the Adam updates: a step counter each */
    for (int e = 0; e < ents->n; e++) nadam += json_get(&ents->items[e], "adam") != NULL;
    p = ember__plan_alloc(slots->n, ents->n, ins->n, outs->n, nadam);
    defined = calloc((size_t)slots->n + 1, 1);
    if (!p || !defined) {
        rc = ember__fail(EMBER_ERR_OOM, "plan load: out of memory");
        goto done;
    }
    rc = load_graph(&r, &root, p, defined);
    if (rc >= 0) {
        /* every input read somewhere is one of the declared inputs, each once */
        uint8_t seen[PLAN_MAX_IO] = {0};
        for (int s = 0; s < p->nslots && rc >= 0; s++)
            if (p->slots[s].kind == SLOT_INPUT && seen[p->slots[s].index]++)
                rc = BAD("input %d has two slots", path, p->slots[s].index + 1);
    }
    if (rc >= 0) {
        p->checked = 1;
        rc = ember__plan_finish(p, NULL);   /* frees p on failure */
        if (rc >= 0) *out = p;
        p = NULL;
    }
done:
    if (p) ember__plan_free_parts(p);
    free(defined);
    json_free(&root);
    return rc;
}

/* the elements a view of this geometry reaches lie inside t's storage */
static int view_fits(const int64_t *a, const ember_tensor *t)
{
    int nd = (int)a[0];
    int64_t lo = a[1], hi = a[1], cap = (int64_t)(t->storage->nbytes / (size_t)ember_dtype_size(t->dtype)), numel;
    if (nd < 0 || nd > EMBER_MAX_DIMS || ember__check_shape("plan", nd, &a[2], &numel) < 0) return 0;
    for (int d = 0; d < nd && numel > 0; d++) {
        int64_t st = a[2 + EMBER_MAX_DIMS + d], reach = (a[2 + d] - 1);
        if (st < -(1ll << 40) || st > (1ll << 40)) return 0;
        if (st >= 0) hi += reach * st;
        else lo += reach * st;
    }
    return numel == 0 ? a[1] >= 0 && a[1] <= cap : lo >= 0 && hi < cap;
}

int ember__plan_check_entry(const plan_entry *e, ember_tensor *const *in)
{
    char sh[200];
    if (e->kind == PE_VIEW) {
        if (!view_fits(e->args.i, in[0]))
            return ember__fail(EMBER_ERR_IO, "plan: a view reaches outside the tensor of shape %s it views",
                               ember__tshape(sh, in[0]));
        return EMBER_OK;
    }
    if (e->kind != PE_OP) return EMBER_OK;   /* sgd_step_ checks its operands */
    const char *name = ember__ops[e->op].name;
    const int64_t *a = e->at.i;
    int nd = in[0]->ndim;
    if (e->op == EMBER_OP_RESHAPE || e->op == EMBER_OP_VIEW) {
        int64_t numel;
        if (a[0] < 0 || a[0] > EMBER_MAX_DIMS || ember__check_shape(name, (int)a[0], &a[1], &numel) < 0 ||
            numel != in[0]->numel)
            return ember__fail(EMBER_ERR_SHAPE, "plan: %s to a shape that does not fit %s", name, ember__tshape(sh, in[0]));
    } else if (e->op == EMBER_OP_TRANSPOSE) {
        if (a[0] < 0 || a[0] >= nd || a[1] < 0 || a[1] >= nd)
            return ember__fail(EMBER_ERR_SHAPE, "plan: transpose of dims %lld and %lld of %s", (long long)a[0] + 1,
                               (long long)a[1] + 1, ember__tshape(sh, in[0]));
    } else if (e->op == EMBER_OP_SELECT) {
        if (a[0] < 0 || a[0] >= nd || a[1] < 0 || a[1] >= in[0]->shape[a[0]])
            return ember__fail(EMBER_ERR_SHAPE, "plan: select of index %lld of dim %lld of %s", (long long)a[1] + 1,
                               (long long)a[0] + 1, ember__tshape(sh, in[0]));
    } else if (e->op == EMBER_OP_EXPAND) {
        int ok = a[0] >= nd && a[0] <= EMBER_MAX_DIMS;
        for (int d = 0; ok && d < a[0]; d++) {
            int ad = d - (int)(a[0] - nd);
            ok = a[1 + d] >= 0 && a[1 + d] <= (1ll << 40) &&
                 (ad < 0 || in[0]->shape[ad] == a[1 + d] || in[0]->shape[ad] == 1);
        }
        if (!ok || ember__check_shape(name, ok ? (int)a[0] : 0, &a[1], NULL) < 0)
            return ember__fail(EMBER_ERR_SHAPE, "plan: expand of %s to a shape it does not broadcast to",
                               ember__tshape(sh, in[0]));
    } else if (e->op == EMBER_OP_SUM_TO) {
        if (a[0] < 0 || a[0] > nd)
            return ember__fail(EMBER_ERR_SHAPE, "plan: sum_to of %s to %lld dims", ember__tshape(sh, in[0]),
                               (long long)a[0]);
    } else if (e->op == EMBER_OP_SUM || e->op == EMBER_OP_MEAN) {
        if (a[0] < 0 || a[0] > 1 || a[1] < 0 || a[1] >= (1ll << nd))
            return ember__fail(EMBER_ERR_SHAPE, "plan: %s over dims %#llx of %s", name, (unsigned long long)a[1],
                               ember__tshape(sh, in[0]));
    } else if (e->op == EMBER_OP_SOFTMAX || e->op == EMBER_OP_LOG_SOFTMAX) {
        if (nd > 0 && (a[0] < 0 || a[0] >= nd))
            return ember__fail(EMBER_ERR_SHAPE, "plan: %s over dim %lld of %s", name, (long long)a[0] + 1,
                               ember__tshape(sh, in[0]));
    }
    return EMBER_OK;
}

/* ------------------------------------------------------------------ names */
static int slot_named(const ember_plan *p, const char *name)
{
    char dflt[24];
    for (int s = 0; s < p->nslots; s++) {
        const plan_slot *sl = &p->slots[s];
        if (sl->kind != SLOT_LIVE && sl->kind != SLOT_CONST) continue;
        const char *nm = p->names[s];
        if (!nm) {
            snprintf(dflt, sizeof dflt, "%c%d", sl->kind == SLOT_LIVE ? 'w' : 'c', s);
            nm = dflt;
        }
        if (strcmp(nm, name) == 0) return s;
    }
    return -1;
}

int ember_plan_name(ember_plan *p, const ember_tensor *t, const char *name)
{
    if (!p || !t || !name) return ember__fail(EMBER_ERR_ARG, "plan name: NULL argument");
    size_t n = strlen(name);
    int ok = n > 0 && n <= 200;
    for (size_t k = 0; ok && k < n; k++) ok = name[k] >= 0x20 && name[k] < 0x7f && name[k] != '"' && name[k] != '\\';
    if (!ok)
        return ember__fail(EMBER_ERR_ARG, "plan name: '%.40s' is not a name of 1 to 200 printable ASCII characters "
                                          "without quotes or backslashes", name);
    if ((name[0] == 'w' || name[0] == 'c') && n > 1 && strspn(name + 1, "0123456789") == n - 1)
        return ember__fail(EMBER_ERR_ARG, "plan name: '%s' is of the form the plan's unnamed tensors have", name);
    int slot = -1;
    for (int s = 0; s < p->nslots && slot < 0; s++) {   /* t, or a header of the same memory (a detached one) */
        const ember_tensor *h = p->slots[s].tensor;
        if (p->slots[s].kind == SLOT_LIVE && (h == t || (h->storage == t->storage && h->offset == t->offset &&
                                                         h->ndim == t->ndim && h->is_contiguous && t->is_contiguous &&
                                                         memcmp(h->shape, t->shape, (size_t)t->ndim * sizeof *t->shape) == 0)))
            slot = s;
    }
    if (slot < 0) return 0;   /* a tensor the plan does not hold */
    int other = slot_named(p, name);
    if (other >= 0 && other != slot)
        return ember__fail(EMBER_ERR_ARG, "plan name: '%s' names another tensor of the plan already", name);
    char *copy = strdup(name);
    if (!copy) return ember__fail(EMBER_ERR_OOM, "plan name: out of memory");
    free(p->names[slot]);
    p->names[slot] = copy;
    return 1;
}

int ember_plan_tensor(ember_plan *p, const char *name, ember_tensor **out)
{
    if (!p || !name || !out) return ember__fail(EMBER_ERR_ARG, "plan tensor: NULL argument");
    *out = NULL;
    int s = slot_named(p, name);
    if (s < 0) return ember__fail(EMBER_ERR_ARG, "plan tensor: the plan holds no tensor named '%.200s'", name);
    *out = p->slots[s].tensor;
    ember_tensor_retain(*out);
    return EMBER_OK;
}
