/* json.h: the strict JSON reader (RFC 8259) under the safetensors codec
   (safetensors.c): no comments, no trailing commas, no NaN, no leading
   zeros, no control characters in strings, no lone surrogates, no duplicate
   keys, at most 64 levels. The text is read into a tree of nodes; strings
   are decoded to UTF-8 with their lengths (a \u0000 stays). Its messages read
   as ember.json.decode's (lua/ember/json.lua, which stays for the Lua values
   ember.save keeps in the metadata): "invalid JSON: <what> at byte <k>". */
#ifndef EMBER_IO_JSON_H
#define EMBER_IO_JSON_H

#include <stddef.h>

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_node {
    json_type type;
    double num;                 /* JSON_NUMBER */
    char *str;                  /* JSON_STRING: decoded, NUL-terminated */
    size_t len;                 /* its length (it may hold NULs) */
    int n;                      /* JSON_ARRAY, JSON_OBJECT: how many items */
    struct json_node *items;    /* the items; an object's keys are their `key` */
    char *key;                  /* an object item's key, decoded */
    size_t key_len;
    size_t key_pos;             /* where the key's opening quote is in the source */
    const char *text;           /* where the value starts in the source */
    size_t text_len;            /* and how long it is there */
} json_node;

/* Parses text[0, len) into *root (freed with json_free). On failure returns
   -1 with the message "invalid JSON: <what> at byte <k>" (k counts from 1)
   in msg, or -2 when memory ran out. */
int json_parse(const char *text, size_t len, json_node *root, char *msg, size_t msg_cap);
void json_free(json_node *node);
/* The item of an object under key (a NUL-terminated key), or NULL. */
const json_node *json_get(const json_node *obj, const char *key);
/* Whether s[0, n) is valid UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
int json_valid_utf8(const char *s, size_t n);

/* The writers' side (safetensors_write.c, plan_io.c): JSON text appended to
   a growable buffer. Appends do not fail one by one: a failed allocation
   sets oom and the appends after it do nothing, so a writer checks oom once
   at the end. p holds len bytes (NUL-terminated); the writer frees p. */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} json_text;
void json_put(json_text *t, const char *s, size_t n);
void json_puts(json_text *t, const char *s);   /* a NUL-terminated s */
void json_printf(json_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0, n) as a JSON string literal: '"' and '\' escaped, \n \t \r as such,
   other bytes below 0x20 as \u00XX; everything else (UTF-8 included) as it is */
void json_put_string(json_text *t, const char *s, size_t n);

#endif
