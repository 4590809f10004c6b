/* Streaming parser of model output: reasoning, content and tool calls.
 *
 * Input accumulates in `in`; each step consumes what can be decided and
 * keeps back a tail that could still be the start of a tag ("<thi", "</to")
 * or of a UTF-8 character. States:
 *   START      leading whitespace; an optional "<think>" opens reasoning
 *   REASONING  until "</think>" (qwen3.5 with tools: also "<tool_call>",
 *              as llama.cpp accepts a call that ends the thinking)
 *   CONTENT    until "<tool_call>" when tools are enabled
 *   TOOL       until "</tool_call>"; the body then parses into a call, or
 *              the whole raw text goes to content
 * Reasoning and content are trimmed: whitespace is held back until text
 * follows it, and dropped at a tag or at the end (whitespace on both sides
 * of a tool call becomes the whitespace after it). The result depends only
 * on the bytes fed, never on how they were split into chunks. */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "error.h"

typedef enum pstate { ST_START, ST_REASONING, ST_CONTENT, ST_TOOL } pstate;

/* One output stream (reasoning or content). */
typedef struct segment {
    bg_buf text;  /* everything released so far */
    bg_buf held;  /* whitespace waiting to see whether text follows */
    bool started; /* non-whitespace released: later whitespace is held, not dropped */
} segment;

struct brigade_chat_parser {
    brigade_chat_family family;
    json_t *tools; /* non-empty array: tool calls enabled */
    bool raw;      /* ChatML: everything is content, untouched */
    pstate st;
    bool saw_reasoning;
    bool finished;
    bool broken; /* an allocation failed: the parser refuses further work */
    bg_buf in;
    size_t pos; /* consumed bytes of in */
    segment reasoning, content;
    bg_buf tool_raw; /* "<tool_call>" and what followed, while in ST_TOOL */
    bg_buf call_ws;  /* content whitespace held before the call: back if it fails */
    brigade_chat_tool_call *calls;
    size_t n_calls, cap_calls;
    brigade_chat_message msg;
};

#define TAG_THINK "<think>"
#define TAG_THINK_END "</think>"
#define TAG_CALL "<tool_call>"
#define TAG_CALL_END "</tool_call>"

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bg_str trim_ascii(bg_str s)
{
    while (s.n && is_ws(s.p[0])) {
        s.p++;
        s.n--;
    }
    while (s.n && is_ws(s.p[s.n - 1]))
        s.n--;
    return s;
}

/* -------------------------------------------------------------- segments */

static void seg_emit(segment *s, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && is_ws(p[j]))
            j++;
        if (j > i) {
            if (s->started)
                bg_buf_put(&s->held, p + i, j - i);
            i = j;
            continue;
        }
        while (j < n && !is_ws(p[j]))
            j++;
        if (s->held.len) {
            bg_buf_put(&s->text, s->held.p, s->held.len);
            s->held.len = 0;
        }
        bg_buf_put(&s->text, p + i, j - i);
        s->started = true;
        i = j;
    }
}

static void seg_drop_held(segment *s) { s->held.len = 0; }

static void seg_free(segment *s)
{
    bg_buf_free(&s->text);
    bg_buf_free(&s->held);
}

/* ------------------------------------------------------------ scanning */

/* Looks for the earliest of tags in b[pos, end). Returns its position and
 * sets *which; with none found, returns where a possible partial tag (or an
 * incomplete UTF-8 character) starts at the end, or end when final. */
static size_t scan(const char *b, size_t pos, size_t end, const char *const *tags, int n_tags,
                   bool final, int *which)
{
    *which = -1;
    size_t best = end;
    bg_str s = {b + pos, end - pos};
    size_t longest = 0;
    for (int t = 0; t < n_tags; t++) {
        size_t i = bg_str_find(s, tags[t]);
        if (i != (size_t)-1 && pos + i < best) {
            best = pos + i;
            *which = t;
        }
        if (strlen(tags[t]) > longest)
            longest = strlen(tags[t]);
    }
    if (*which >= 0 || final)
        return best;
    size_t from = end - pos >= longest ? end - longest + 1 : pos;
    for (size_t i = from; i < end; i++) {
        if (b[i] != '<')
            continue;
        for (int t = 0; t < n_tags; t++)
            if (strncmp(tags[t], b + i, end - i) == 0 && strlen(tags[t]) > end - i)
                return i;
    }
    /* Do not split a UTF-8 character: back up over an incomplete one. */
    for (size_t k = 1; k <= 3 && k <= end - pos; k++) {
        unsigned char c = (unsigned char)b[end - k];
        if ((c & 0xc0) == 0x80)
            continue; /* continuation byte: keep looking for the lead */
        size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need > k ? end - k : end;
    }
    return end;
}

/* ------------------------------------------------------------ tool calls */

enum {
    T_STRING = 1,
    T_NUMBER = 2,
    T_INTEGER = 4,
    T_BOOLEAN = 8,
    T_NULL = 16,
    T_OBJECT = 32,
    T_ARRAY = 64,
};

static unsigned type_bit(const char *name)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"string", T_STRING},   {"number", T_NUMBER}, {"integer", T_INTEGER},
                 {"boolean", T_BOOLEAN}, {"null", T_NULL},     {"object", T_OBJECT},
                 {"array", T_ARRAY}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].bit;
    return 0;
}

static unsigned value_bit(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING: return T_STRING;
    case JSON_INTEGER: return T_INTEGER;
    case JSON_REAL: return T_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOLEAN;
    case JSON_NULL: return T_NULL;
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    }
    return 0;
}

/* The JSON types a schema allows; 0 when it does not say. */
static unsigned schema_types(const json_t *schema, int depth)
{
    if (!json_is_object(schema) || depth > 16)
        return 0;
    unsigned bits = 0;
    const json_t *type = json_object_get(schema, "type");
    if (json_is_string(type))
        bits |= type_bit(json_string_value(type));
    for (size_t i = 0; json_is_array(type) && i < json_array_size(type); i++)
        if (json_is_string(json_array_get(type, i)))
            bits |= type_bit(json_string_value(json_array_get(type, i)));
    if (bits)
        return bits;
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2; u++) {
        const json_t *alts = json_object_get(schema, unions[u]);
        for (size_t i = 0; json_is_array(alts) && i < json_array_size(alts); i++) {
            unsigned b = schema_types(json_array_get(alts, i), depth + 1);
            if (!b)
                return 0;
            bits |= b;
        }
    }
    const json_t *values = json_object_get(schema, "enum");
    for (size_t i = 0; json_is_array(values) && i < json_array_size(values); i++)
        bits |= value_bit(json_array_get(values, i));
    if (json_object_get(schema, "const"))
        bits |= value_bit(json_object_get(schema, "const"));
    if (!bits && json_object_get(schema, "properties"))
        bits = T_OBJECT;
    if (!bits && json_object_get(schema, "items"))
        bits = T_ARRAY;
    return bits;
}

/* The types of parameter pname of function fname in the tools, 0 if unknown. */
static unsigned param_types(const json_t *tools, bg_str fname, bg_str pname)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *tool = json_array_get(tools, i);
        const json_t *fn = json_object_get(tool, "function");
        if (!json_is_object(fn))
            fn = tool;
        const json_t *name = json_object_get(fn, "name");
        if (!json_is_string(name) || json_string_length(name) != fname.n ||
            memcmp(json_string_value(name), fname.p, fname.n) != 0)
            continue;
        const json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
        if (!json_is_object(props))
            return 0;
        return schema_types(json_object_getn(props, pname.p, pname.n), 0);
    }
    return 0;
}

/* Appends a parameter value as JSON: the value's own text when the schema
 * allows a non-string JSON value and the text is one, else a string. */
static void put_typed_value(bg_buf *b, bg_str v, unsigned types)
{
    if (types != T_STRING) {
        bg_str t = trim_ascii(v);
        bool any = types == 0;
        static const struct {
            const char *py, *json;
            unsigned bit;
        } literals[] = {{"True", "true", T_BOOLEAN},
                        {"False", "false", T_BOOLEAN},
                        {"None", "null", T_NULL}};
        for (size_t i = 0; i < sizeof literals / sizeof *literals; i++) {
            if ((any || (types & literals[i].bit)) && t.n == strlen(literals[i].py) &&
                memcmp(t.p, literals[i].py, t.n) == 0) {
                bg_buf_puts(b, literals[i].json);
                return;
            }
        }
        json_t *j = t.n ? bg_json_parse(t.p, t.n) : NULL;
        unsigned bit = j ? value_bit(j) : 0;
        json_decref(j);
        if (bit == T_INTEGER && (types & T_NUMBER))
            bit = T_NUMBER; /* an integer is a number */
        if (bit && bit != T_STRING && (any || (types & bit))) {
            bg_buf_str(b, t);
            return;
        }
    }
    bg_json_quote(b, v.p, v.n);
}

static bool push_call(brigade_chat_parser *p, bg_str name, const char *args, size_t args_len)
{
    if (p->n_calls == p->cap_calls) {
        size_t cap = p->cap_calls ? 2 * p->cap_calls : 4;
        brigade_chat_tool_call *c = realloc(p->calls, cap * sizeof *c);
        if (!c)
            return false;
        p->calls = c;
        p->cap_calls = cap;
    }
    char *n = malloc(name.n + 1), *a = malloc(args_len + 1);
    if (!n || !a) {
        free(n);
        free(a);
        return false;
    }
    memcpy(n, name.p, name.n);
    n[name.n] = '\0';
    memcpy(a, args, args_len);
    a[args_len] = '\0';
    p->calls[p->n_calls++] = (brigade_chat_tool_call){.id = NULL, .name = n, .arguments = a};
    return true;
}

/* Index just past the JSON value that starts at s[i], for text that jansson
 * has already accepted; n + 1 if it runs off the end. */
static size_t skip_json_value(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return n + 1;
    if (s[i] == '"') {
        for (i++; i < n && s[i] != '"'; i++)
            if (s[i] == '\\')
                i++;
        return i < n ? i + 1 : n + 1;
    }
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = skip_json_value(s, n, i);
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return i + 1;
            i++;
        }
        return n + 1;
    }
    while (i < n && !strchr(",}] \t\r\n", s[i]))
        i++;
    return i;
}

static size_t skip_spaces(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

/* The text of the top-level "arguments" member of a JSON object (the last
 * one, as jansson keeps), so numbers keep the model's own spelling. */
static bool find_arguments_text(bg_str obj, bg_str *out)
{
    const char *s = obj.p;
    size_t n = obj.n, i = skip_spaces(s, n, 0);
    bool found = false;
    if (i >= n || s[i] != '{')
        return false;
    i = skip_spaces(s, n, i + 1);
    while (i < n && s[i] == '"') {
        size_t kend = skip_json_value(s, n, i);
        if (kend > n)
            return false;
        bool is_args = kend - i == 11 && memcmp(s + i, "\"arguments\"", 11) == 0;
        i = skip_spaces(s, n, kend);
        if (i >= n || s[i] != ':')
            return false;
        i = skip_spaces(s, n, i + 1);
        size_t vend = skip_json_value(s, n, i);
        if (vend > n)
            return false;
        if (is_args) {
            *out = (bg_str){s + i, vend - i};
            found = true;
        }
        i = skip_spaces(s, n, vend);
        if (i < n && s[i] == ',')
            i = skip_spaces(s, n, i + 1);
    }
    return found;
}

/* qwen3: {"name": "...", "arguments": {...}} */
static bool parse_json_call(brigade_chat_parser *p, bg_str body, bool *oom)
{
    bg_str t = trim_ascii(body);
    json_t *v = bg_json_parse(t.p, t.n);
    const json_t *name = json_object_get(v, "name");
    const json_t *args = json_object_get(v, "arguments");
    bool ok = json_is_object(v) && json_is_string(name) && json_string_length(name) > 0;
    bg_buf text = {0};
    if (ok && !args) {
        bg_buf_puts(&text, "{}");
    } else if (ok && json_is_object(args)) {
        bg_str raw;
        if (find_arguments_text(t, &raw))
            bg_buf_str(&text, raw);
        else
            bg_json_dump_py(&text, args);
    } else if (ok && json_is_string(args)) {
        /* arguments sent as a JSON-encoded string: accept an object inside */
        bg_str inner = trim_ascii((bg_str){json_string_value(args), json_string_length(args)});
        json_t *obj = bg_json_parse(inner.p, inner.n);
        ok = json_is_object(obj);
        json_decref(obj);
        if (ok)
            bg_buf_str(&text, inner);
    } else {
        ok = false;
    }
    if (ok && !text.oom) {
        bg_str nm = {json_string_value(name), json_string_length(name)};
        if (!push_call(p, nm, text.p, text.len))
            *oom = true;
    }
    if (text.oom)
        *oom = true;
    bg_buf_free(&text);
    json_decref(v);
    return ok;
}

/* qwen3.5: <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function> */
static bool parse_xml_call(brigade_chat_parser *p, bg_str body, bool closed, bool *oom)
{
    const char *s = body.p;
    size_t n = body.n, i = skip_spaces(s, n, 0);
    bg_str rest = {s + i, n - i};
    if (!bg_str_starts(rest, "<function="))
        return false;
    i += 10;
    const char *gt = memchr(s + i, '>', n - i);
    if (!gt)
        return false;
    bg_str fname = trim_ascii((bg_str){s + i, (size_t)(gt - s) - i});
    if (!fname.n)
        return false;
    i = (size_t)(gt - s) + 1;

    bg_buf args = {0};
    bg_buf_putc(&args, '{');
    bool ok = false, first = true;
    for (;;) {
        i = skip_spaces(s, n, i);
        rest = (bg_str){s + i, n - i};
        if (bg_str_starts(rest, "</function>")) {
            i = skip_spaces(s, n, i + 11);
            ok = i == n;
            break;
        }
        if (i == n) { /* </function> missing: fine if </tool_call> closed it */
            ok = closed;
            break;
        }
        if (!bg_str_starts(rest, "<parameter="))
            break;
        i += 11;
        gt = memchr(s + i, '>', n - i);
        if (!gt)
            break;
        bg_str pname = trim_ascii((bg_str){s + i, (size_t)(gt - s) - i});
        i = (size_t)(gt - s) + 1;
        size_t vend = bg_str_find((bg_str){s + i, n - i}, "</parameter>");
        if (vend == (size_t)-1)
            break;
        bg_str value = {s + i, vend};
        if (value.n && value.p[0] == '\n') {
            value.p++;
            value.n--;
        }
        if (value.n && value.p[value.n - 1] == '\n')
            value.n--;
        if (!first)
            bg_buf_putc(&args, ',');
        first = false;
        bg_json_quote(&args, pname.p, pname.n);
        bg_buf_putc(&args, ':');
        put_typed_value(&args, value, param_types(p->tools, fname, pname));
        i += vend + 12;
    }
    bg_buf_putc(&args, '}');
    if (args.oom)
        *oom = true;
    else if (ok && !push_call(p, fname, args.p, args.len))
        *oom = true;
    bg_buf_free(&args);
    return ok;
}

static void begin_tool(brigade_chat_parser *p)
{
    p->call_ws.len = 0;
    bg_buf_put(&p->call_ws, p->content.held.p, p->content.held.len);
    seg_drop_held(&p->content);
    p->tool_raw.len = 0;
    bg_buf_puts(&p->tool_raw, TAG_CALL);
    p->st = ST_TOOL;
}

/* The call's text is complete (closed: "</tool_call>" was seen). */
static void end_tool(brigade_chat_parser *p, bool closed)
{
    size_t open = strlen(TAG_CALL);
    bg_str body = {p->tool_raw.p + open, p->tool_raw.len - open};
    bool oom = false, ok;
    if (p->family == BRIGADE_CHAT_QWEN35)
        ok = parse_xml_call(p, body, closed, &oom);
    else
        ok = parse_json_call(p, body, &oom);
    if (oom)
        p->broken = true;
    if (!ok) {
        if (closed)
            bg_buf_puts(&p->tool_raw, TAG_CALL_END);
        seg_emit(&p->content, p->call_ws.p, p->call_ws.len);
        seg_emit(&p->content, p->tool_raw.p, p->tool_raw.len);
    }
    p->call_ws.len = 0;
    p->tool_raw.len = 0;
    p->st = ST_CONTENT;
}

/* ----------------------------------------------------------------- steps */

static void step(brigade_chat_parser *p, bool final)
{
    for (;;) {
        const char *b = p->in.p;
        size_t end = p->in.len, pos = p->pos;
        int which;
        size_t h;
        switch (p->st) {
        case ST_START: {
            pos = skip_spaces(b, end, pos);
            p->pos = pos;
            size_t m = end - pos, k = strlen(TAG_THINK);
            if (m == 0)
                return;
            if (m >= k && memcmp(b + pos, TAG_THINK, k) == 0) {
                p->pos += k;
                p->st = ST_REASONING;
                p->saw_reasoning = true;
                continue;
            }
            if (!final && m < k && memcmp(b + pos, TAG_THINK, m) == 0)
                return;
            p->st = p->saw_reasoning ? ST_REASONING : ST_CONTENT;
            continue;
        }
        case ST_REASONING: {
            static const char *const tags[] = {TAG_THINK_END, TAG_CALL};
            int n_tags = p->family == BRIGADE_CHAT_QWEN35 && p->tools ? 2 : 1;
            h = scan(b, pos, end, tags, n_tags, final, &which);
            seg_emit(&p->reasoning, b + pos, h - pos);
            p->pos = h;
            if (which < 0)
                return;
            seg_drop_held(&p->reasoning);
            p->pos += strlen(tags[which]);
            if (which == 0)
                p->st = ST_CONTENT;
            else
                begin_tool(p);
            continue;
        }
        case ST_CONTENT: {
            static const char *const tags[] = {TAG_CALL};
            h = scan(b, pos, end, tags, p->tools ? 1 : 0, final, &which);
            if (p->raw)
                bg_buf_put(&p->content.text, b + pos, h - pos);
            else
                seg_emit(&p->content, b + pos, h - pos);
            p->pos = h;
            if (which < 0)
                return;
            p->pos += strlen(TAG_CALL);
            begin_tool(p);
            continue;
        }
        case ST_TOOL: {
            static const char *const tags[] = {TAG_CALL_END};
            h = scan(b, pos, end, tags, 1, true, &which);
            if (which < 0 && !final) { /* keep back a possible partial closing tag */
                size_t keep = strlen(TAG_CALL_END) - 1;
                h = end - pos > keep ? end - keep : pos;
            }
            bg_buf_put(&p->tool_raw, b + pos, h - pos);
            p->pos = h;
            if (which < 0)
                return;
            p->pos += strlen(TAG_CALL_END);
            end_tool(p, true);
            continue;
        }
        }
    }
}

/* -------------------------------------------------------------- public API */

static void update_message(brigade_chat_parser *p)
{
    p->msg.role = "assistant";
    p->msg.content = p->content.text.p ? p->content.text.p : "";
    p->msg.reasoning_content =
        p->saw_reasoning ? (p->reasoning.text.p ? p->reasoning.text.p : "") : NULL;
    p->msg.tool_calls = p->calls;
    p->msg.n_tool_calls = p->n_calls;
}

brigade_status brigade_chat_parser_new(const brigade_chat_template *tmpl,
                                       const brigade_chat_options *opts,
                                       brigade_chat_parser **out, brigade_error *err)
{
    if (!tmpl || !out)
        return bg_fail(err, BRIGADE_ERR_ARG, "chat parser: missing template or output pointer");
    *out = NULL;
    static const brigade_chat_options no_options;
    if (!opts)
        opts = &no_options;
    brigade_chat_parser *p = calloc(1, sizeof *p);
    if (!p)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "chat parser: out of memory");
    p->family = tmpl->family;
    if (opts->tools && p->family != BRIGADE_CHAT_CHATML) {
        p->tools = bg_json_parse(opts->tools, strlen(opts->tools));
        if (!json_is_array(p->tools)) {
            brigade_chat_parser_free(p);
            return bg_fail(err, BRIGADE_ERR_ARG,
                           "chat parser: options.tools must be a JSON array of tools");
        }
        if (json_array_size(p->tools) == 0) {
            json_decref(p->tools);
            p->tools = NULL;
        }
    }
    p->raw = p->family == BRIGADE_CHAT_CHATML;
    p->st = p->raw ? ST_CONTENT : ST_START;
    /* qwen3.5's generation prompt ends inside "<think>\n" unless thinking is off */
    p->saw_reasoning = p->family == BRIGADE_CHAT_QWEN35 && opts->add_generation_prompt &&
                       !opts->disable_thinking;
    update_message(p);
    *out = p;
    return BRIGADE_OK;
}

static brigade_status run(brigade_chat_parser *p, const char *text, size_t len, bool final,
                          brigade_chat_delta *delta, brigade_error *err)
{
    if (delta)
        *delta = (brigade_chat_delta){.reasoning = "", .content = ""};
    if (!p)
        return bg_fail(err, BRIGADE_ERR_ARG, "chat parser: no parser");
    if (p->finished)
        return bg_fail(err, BRIGADE_ERR_ARG, "chat parser: output fed after finish");
    if (p->broken)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "chat parser: out of memory earlier");
    if (len && !text)
        return bg_fail(err, BRIGADE_ERR_ARG, "chat parser: no text");

    size_t r0 = p->reasoning.text.len, c0 = p->content.text.len, t0 = p->n_calls;
    /* drop consumed input before appending */
    if (p->pos) {
        memmove(p->in.p, p->in.p + p->pos, p->in.len - p->pos);
        p->in.len -= p->pos;
        p->pos = 0;
    }
    bg_buf_put(&p->in, text, len);
    step(p, final);
    if (final) {
        if (p->st == ST_TOOL)
            end_tool(p, false);
        seg_drop_held(&p->reasoning);
        seg_drop_held(&p->content);
        p->finished = true;
    }
    if (p->in.oom || p->reasoning.text.oom || p->reasoning.held.oom || p->content.text.oom ||
        p->content.held.oom || p->tool_raw.oom || p->call_ws.oom)
        p->broken = true;
    if (p->broken)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "chat parser: out of memory");
    update_message(p);
    if (delta) {
        if (p->reasoning.text.len > r0) {
            delta->reasoning = p->reasoning.text.p + r0;
            delta->reasoning_len = p->reasoning.text.len - r0;
        }
        if (p->content.text.len > c0) {
            delta->content = p->content.text.p + c0;
            delta->content_len = p->content.text.len - c0;
        }
        if (p->n_calls > t0) {
            delta->tool_calls = p->calls + t0;
            delta->n_tool_calls = p->n_calls - t0;
        }
    }
    return BRIGADE_OK;
}

brigade_status brigade_chat_parser_feed(brigade_chat_parser *parser, const char *text,
                                        size_t len, brigade_chat_delta *delta,
                                        brigade_error *err)
{
    return run(parser, text, len, false, delta, err);
}

brigade_status brigade_chat_parser_finish(brigade_chat_parser *parser,
                                          brigade_chat_delta *delta, brigade_error *err)
{
    return run(parser, NULL, 0, true, delta, err);
}

const brigade_chat_message *brigade_chat_parser_message(const brigade_chat_parser *parser)
{
    return parser ? &parser->msg : NULL;
}

void brigade_chat_parser_free(brigade_chat_parser *parser)
{
    if (!parser)
        return;
    json_decref(parser->tools);
    bg_buf_free(&parser->in);
    seg_free(&parser->reasoning);
    seg_free(&parser->content);
    bg_buf_free(&parser->tool_raw);
    bg_buf_free(&parser->call_ws);
    for (size_t i = 0; i < parser->n_calls; i++) {
        free((char *)parser->calls[i].name);
        free((char *)parser->calls[i].arguments);
    }
    free(parser->calls);
    free(parser);
}
