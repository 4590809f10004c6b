/* Chat templates and output parsing: internals shared by chat.c (template
 * recognition, text and JSON helpers), chat_render.c (the hand-written
 * renderers) and chat_parse.c (the streaming output parser).
 *
 * Nothing here evaluates template text: a model's tokenizer.chat_template is
 * only hashed and searched for markers to pick one of the renderers below. */
#ifndef BG_CHAT_H
#define BG_CHAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "brigade.h"

struct brigade_chat_template {
    brigade_chat_family family;
    char *warning; /* NULL when the template is one brigade knows exactly */
};

/* ------------------------------------------------------------ text buffer */

/* A growable byte string, always NUL-terminated once non-empty. Appends
 * after an allocation failure are dropped and remembered in oom, so callers
 * check once at the end. */
typedef struct bg_buf {
    char *p;
    size_t len, cap;
    bool oom;
} bg_buf;

void bg_buf_put(bg_buf *b, const char *s, size_t n);
void bg_buf_puts(bg_buf *b, const char *s);
void bg_buf_putc(bg_buf *b, char c);
void bg_buf_free(bg_buf *b);

/* ------------------------------------------------- Python string semantics */

/* A view of bytes (UTF-8 text), not NUL-terminated. */
typedef struct bg_str {
    const char *p;
    size_t n;
} bg_str;

bg_str bg_str_of(const char *s); /* NULL gives the empty string */
void bg_buf_str(bg_buf *b, bg_str s);
/* Position of the first (or last) occurrence of needle, or (size_t)-1. */
size_t bg_str_find(bg_str s, const char *needle);
size_t bg_str_rfind(bg_str s, const char *needle);
bool bg_str_starts(bg_str s, const char *prefix);
bool bg_str_ends(bg_str s, const char *suffix);
/* str.strip() with no argument: removes what Python calls whitespace
 * (str.isspace: ASCII \t\n\v\f\r, \x1c-\x1f, space, U+0085, U+00A0, U+1680,
 * U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). jinja2's trim. */
bg_str bg_py_strip(bg_str s);
/* str.lstrip(c) / str.rstrip(c) with a one-character argument. */
bg_str bg_lstrip_char(bg_str s, char c);
bg_str bg_rstrip_char(bg_str s, char c);
/* s.split(sep)[0] and s.split(sep)[-1]. */
bg_str bg_split_first(bg_str s, const char *sep);
bg_str bg_split_last(bg_str s, const char *sep);

/* --------------------------------------------------- JSON, Python flavour */

/* Parses any JSON value (strings may hold \u0000); NULL if invalid. */
json_t *bg_json_parse(const char *text, size_t len);
/* json.dumps(v, ensure_ascii=False): ", " and ": " separators, keys in
 * insertion order, floats as Python's repr, non-ASCII text as is. This is
 * the `tojson` of transformers' and llama.cpp's template environments. */
void bg_json_dump_py(bg_buf *b, const json_t *v);
/* A JSON string literal (quotes included), escaped as json.dumps does. */
void bg_json_quote(bg_buf *b, const char *s, size_t n);
/* repr(float): the shortest text that reads back as d, Python's layout. */
void bg_py_float(bg_buf *b, double d);
/* str(v) for a scalar (jinja2's |string): strings as they are, True,
 * False, None, integers, repr of floats. Containers use bg_json_dump_py. */
void bg_py_str(bg_buf *b, const json_t *v);

/* ------------------------------------------------------------- renderers */

typedef struct bg_render_ctx {
    const brigade_chat_message *msgs;
    size_t n;
    bool add_generation_prompt;
    bool disable_thinking;
    const json_t *tools; /* a non-empty array, or NULL */
    bg_buf out;
    brigade_error *err;
} bg_render_ctx;

brigade_status bg_render_chatml(bg_render_ctx *c);
brigade_status bg_render_qwen3(bg_render_ctx *c);
brigade_status bg_render_qwen35(bg_render_ctx *c);

#endif
