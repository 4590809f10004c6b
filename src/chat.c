/* Chat templates: recognizing a model's template, the public render call,
 * and the text and JSON helpers that reproduce what Python and jinja2 do to
 * strings (strip, split, tojson, |string), so the renderers in chat_render.c
 * can follow the templates line by line. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "error.h"
#include "keys.h"

/* ------------------------------------------------------------ text buffer */

static bool buf_reserve(bg_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra > SIZE_MAX - b->len - 1) {
        b->oom = true;
        return false;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void bg_buf_put(bg_buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void bg_buf_puts(bg_buf *b, const char *s) { bg_buf_put(b, s, strlen(s)); }

void bg_buf_putc(bg_buf *b, char c) { bg_buf_put(b, &c, 1); }

void bg_buf_free(bg_buf *b)
{
    free(b->p);
    *b = (bg_buf){0};
}

/* ------------------------------------------------- Python string semantics */

bg_str bg_str_of(const char *s) { return (bg_str){s ? s : "", s ? strlen(s) : 0}; }

void bg_buf_str(bg_buf *b, bg_str s) { bg_buf_put(b, s.p, s.n); }

size_t bg_str_find(bg_str s, const char *needle)
{
    size_t m = strlen(needle);
    if (m == 0)
        return 0;
    if (m > s.n)
        return (size_t)-1;
    for (size_t i = 0; i + m <= s.n; i++) {
        const char *hit = memchr(s.p + i, needle[0], s.n - m + 1 - i);
        if (!hit)
            break;
        i = (size_t)(hit - s.p);
        if (memcmp(hit, needle, m) == 0)
            return i;
    }
    return (size_t)-1;
}

size_t bg_str_rfind(bg_str s, const char *needle)
{
    size_t m = strlen(needle);
    if (m > s.n)
        return (size_t)-1;
    for (size_t i = s.n - m + 1; i-- > 0;)
        if (memcmp(s.p + i, needle, m) == 0)
            return i;
    return (size_t)-1;
}

bool bg_str_starts(bg_str s, const char *prefix)
{
    size_t m = strlen(prefix);
    return m <= s.n && memcmp(s.p, prefix, m) == 0;
}

bool bg_str_ends(bg_str s, const char *suffix)
{
    size_t m = strlen(suffix);
    return m <= s.n && memcmp(s.p + s.n - m, suffix, m) == 0;
}

/* Length of the whitespace character (per Python's str.isspace) that starts
 * at p, or 0. Bytes that are not valid UTF-8 are not whitespace. */
static size_t space_at(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20))
        return 1;
    if (c == 0xc2 && n >= 2 && (p[1] == 0x85 || p[1] == 0xa0))
        return 2;
    if (c == 0xe1 && n >= 3 && p[1] == 0x9a && p[2] == 0x80) /* U+1680 */
        return 3;
    if (c == 0xe2 && n >= 3) {
        if (p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 ||
                             p[2] == 0xaf))
            return 3; /* U+2000-U+200A, U+2028, U+2029, U+202F */
        if (p[1] == 0x81 && p[2] == 0x9f) /* U+205F */
            return 3;
    }
    if (c == 0xe3 && n >= 3 && p[1] == 0x80 && p[2] == 0x80) /* U+3000 */
        return 3;
    return 0;
}

/* Length of the whitespace character that ends at p + n, or 0. */
static size_t space_before(const unsigned char *p, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t w = space_at(p + n - k, k);
        if (w == k)
            return k;
    }
    return 0;
}

bg_str bg_py_strip(bg_str s)
{
    const unsigned char *p = (const unsigned char *)s.p;
    size_t a = 0, e = s.n, w;
    while (a < e && (w = space_at(p + a, e - a)) > 0)
        a += w;
    while (e > a && (w = space_before(p + a, e - a)) > 0)
        e -= w;
    return (bg_str){s.p + a, e - a};
}

bg_str bg_lstrip_char(bg_str s, char c)
{
    while (s.n && s.p[0] == c) {
        s.p++;
        s.n--;
    }
    return s;
}

bg_str bg_rstrip_char(bg_str s, char c)
{
    while (s.n && s.p[s.n - 1] == c)
        s.n--;
    return s;
}

bg_str bg_split_first(bg_str s, const char *sep)
{
    size_t i = bg_str_find(s, sep);
    return i == (size_t)-1 ? s : (bg_str){s.p, i};
}

bg_str bg_split_last(bg_str s, const char *sep)
{
    size_t i = bg_str_rfind(s, sep);
    if (i == (size_t)-1)
        return s;
    size_t m = strlen(sep);
    return (bg_str){s.p + i + m, s.n - i - m};
}

/* --------------------------------------------------- JSON, Python flavour */

json_t *bg_json_parse(const char *text, size_t len)
{
    json_error_t e;
    return json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
}

void bg_json_quote(bg_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    bg_buf_putc(b, '"');
    size_t run = 0; /* bytes copied as they are, flushed before an escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = '\0';
                esc = u;
            }
        }
        if (!esc)
            continue;
        bg_buf_put(b, s + run, i - run);
        bg_buf_puts(b, esc);
        run = i + 1;
    }
    bg_buf_put(b, s + run, n - run);
    bg_buf_putc(b, '"');
}

void bg_py_float(bg_buf *b, double d)
{
    if (isnan(d)) {
        bg_buf_puts(b, "NaN");
        return;
    }
    if (isinf(d)) {
        bg_buf_puts(b, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    /* The shortest %e text that reads back as d gives Python's digits. */
    char sci[40];
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec, d);
        if (strtod(sci, NULL) == d)
            break;
    }
    const char *p = sci;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd < sizeof digits - 1)
            digits[nd++] = *p;
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';

    if (neg)
        bg_buf_putc(b, '-');
    int decpt = exp + 1; /* digits before the decimal point */
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            bg_buf_puts(b, "0.");
            for (int i = 0; i < -decpt; i++)
                bg_buf_putc(b, '0');
            bg_buf_put(b, digits, nd);
        } else if ((size_t)decpt >= nd) {
            bg_buf_put(b, digits, nd);
            for (size_t i = nd; i < (size_t)decpt; i++)
                bg_buf_putc(b, '0');
            bg_buf_puts(b, ".0");
        } else {
            bg_buf_put(b, digits, (size_t)decpt);
            bg_buf_putc(b, '.');
            bg_buf_put(b, digits + decpt, nd - (size_t)decpt);
        }
    } else {
        bg_buf_putc(b, digits[0]);
        if (nd > 1) {
            bg_buf_putc(b, '.');
            bg_buf_put(b, digits + 1, nd - 1);
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        bg_buf_puts(b, e);
    }
}

static void put_int(bg_buf *b, json_int_t v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, v);
    bg_buf_puts(b, tmp);
}

void bg_json_dump_py(bg_buf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        bg_buf_putc(b, '{');
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                bg_buf_puts(b, ", ");
            first = false;
            bg_json_quote(b, json_object_iter_key(it), json_object_iter_key_len(it));
            bg_buf_puts(b, ": ");
            bg_json_dump_py(b, json_object_iter_value(it));
        }
        bg_buf_putc(b, '}');
        break;
    }
    case JSON_ARRAY:
        bg_buf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                bg_buf_puts(b, ", ");
            bg_json_dump_py(b, json_array_get(v, i));
        }
        bg_buf_putc(b, ']');
        break;
    case JSON_STRING:
        bg_json_quote(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER: put_int(b, json_integer_value(v)); break;
    case JSON_REAL: bg_py_float(b, json_real_value(v)); break;
    case JSON_TRUE: bg_buf_puts(b, "true"); break;
    case JSON_FALSE: bg_buf_puts(b, "false"); break;
    case JSON_NULL: bg_buf_puts(b, "null"); break;
    }
}

void bg_py_str(bg_buf *b, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING: bg_buf_put(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: put_int(b, json_integer_value(v)); break;
    case JSON_REAL: bg_py_float(b, json_real_value(v)); break;
    case JSON_TRUE: bg_buf_puts(b, "True"); break;
    case JSON_FALSE: bg_buf_puts(b, "False"); break;
    case JSON_NULL: bg_buf_puts(b, "None"); break;
    default: bg_json_dump_py(b, v); break;
    }
}

/* ------------------------------------------------- template recognition */

/* Official templates brigade renders exactly, by FNV-1a 64 of the text with
 * trailing whitespace removed. Files from llama.cpp's models/templates,
 * which come from the models' Hugging Face tokenizer configurations. */
typedef struct known_template {
    brigade_chat_family family;
    uint64_t hash;
    const char *what;
} known_template;

static const known_template known_templates[] = {
    {BRIGADE_CHAT_QWEN3, 0x2bfdb7aa9754484eULL, "Qwen3 (Qwen-Qwen3-0.6B.jinja)"},
    {BRIGADE_CHAT_QWEN35, 0xf07c510f47fbaca0ULL, "Qwen3.5 (Qwen3.5-4B.jinja)"},
};

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static bool has_all(bg_str text, const char *const *markers)
{
    for (; *markers; markers++)
        if (bg_str_find(text, *markers) == (size_t)-1)
            return false;
    return true;
}

const char *brigade_chat_family_name(brigade_chat_family family)
{
    switch (family) {
    case BRIGADE_CHAT_CHATML: return "chatml";
    case BRIGADE_CHAT_QWEN3: return "qwen3";
    case BRIGADE_CHAT_QWEN35: return "qwen3.5";
    }
    return "unknown";
}

static brigade_status make_template(brigade_chat_family family, const char *warning,
                                    brigade_chat_template **out, brigade_error *err)
{
    brigade_chat_template *t = calloc(1, sizeof *t);
    if (!t || (warning && !(t->warning = strdup(warning)))) {
        free(t);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "chat template: out of memory");
    }
    t->family = family;
    *out = t;
    return BRIGADE_OK;
}

brigade_status brigade_chat_template_from_string(const char *text, size_t len,
                                                 brigade_chat_template **out,
                                                 brigade_error *err)
{
    if (!out)
        return bg_fail(err, BRIGADE_ERR_ARG, "chat template: no output pointer");
    *out = NULL;
    if (!text)
        return make_template(BRIGADE_CHAT_CHATML,
                             "no chat template given; using plain ChatML", out, err);

    bg_str s = {text, len};
    while (s.n && strchr(" \t\r\n", s.p[s.n - 1]))
        s.n--;
    uint64_t h = fnv1a(s.p, s.n);
    for (size_t i = 0; i < sizeof known_templates / sizeof *known_templates; i++)
        if (known_templates[i].hash == h)
            return make_template(known_templates[i].family, NULL, out, err);

    static const char *const qwen35_markers[] = {
        "<|im_start|>", "<think>", "enable_thinking", "reasoning_content",
        "<tool_call>",  "<function=", "<parameter=", NULL};
    static const char *const qwen3_markers[] = {"<|im_start|>", "<think>", "enable_thinking",
                                                "reasoning_content", "<tool_call>", NULL};
    brigade_chat_family family = BRIGADE_CHAT_CHATML;
    if (has_all(s, qwen35_markers))
        family = BRIGADE_CHAT_QWEN35;
    else if (has_all(s, qwen3_markers) && bg_str_find(s, "<function=") == (size_t)-1)
        family = BRIGADE_CHAT_QWEN3;

    char warning[BRIGADE_ERROR_MAX];
    if (family == BRIGADE_CHAT_CHATML)
        snprintf(warning, sizeof warning,
                 "chat template not recognized (%zu bytes, FNV-1a %016llx); using plain "
                 "ChatML, which may not be the format the model was trained on",
                 len, (unsigned long long)h);
    else
        snprintf(warning, sizeof warning,
                 "chat template differs from the known %s one (%zu bytes, FNV-1a %016llx) but "
                 "has its markers; rendering it as %s",
                 brigade_chat_family_name(family), len, (unsigned long long)h,
                 brigade_chat_family_name(family));
    return make_template(family, warning, out, err);
}

brigade_status brigade_chat_template_from_gguf(const brigade_gguf *file,
                                               brigade_chat_template **out,
                                               brigade_error *err)
{
    if (!file || !out)
        return bg_fail(err, BRIGADE_ERR_ARG, "chat template: no file or output pointer");
    *out = NULL;
    brigade_string s = {0};
    brigade_status st = brigade_gguf_get_str(file, KEY_CHAT_TEMPLATE, false, &s, err);
    if (st != BRIGADE_OK)
        return st;
    if (!s.ptr)
        return make_template(BRIGADE_CHAT_CHATML,
                             "the model has no chat template (" KEY_CHAT_TEMPLATE
                             "); using plain ChatML",
                             out, err);
    if (s.len > SIZE_MAX)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s is too large", KEY_CHAT_TEMPLATE);
    return brigade_chat_template_from_string(s.ptr, (size_t)s.len, out, err);
}

void brigade_chat_template_free(brigade_chat_template *tmpl)
{
    if (!tmpl)
        return;
    free(tmpl->warning);
    free(tmpl);
}

brigade_chat_family brigade_chat_template_family(const brigade_chat_template *tmpl)
{
    return tmpl ? tmpl->family : BRIGADE_CHAT_CHATML;
}

const char *brigade_chat_template_warning(const brigade_chat_template *tmpl)
{
    return tmpl ? tmpl->warning : NULL;
}

/* ------------------------------------------------------------- rendering */

brigade_status brigade_chat_render(const brigade_chat_template *tmpl,
                                   const brigade_chat_message *messages, size_t n_messages,
                                   const brigade_chat_options *opts, brigade_chat_prompt *out,
                                   brigade_error *err)
{
    if (!tmpl || !out || (n_messages && !messages))
        return bg_fail(err, BRIGADE_ERR_ARG, "chat render: missing template, messages or output");
    *out = (brigade_chat_prompt){0};
    for (size_t i = 0; i < n_messages; i++) {
        if (!messages[i].role)
            return bg_fail(err, BRIGADE_ERR_ARG, "chat render: message %zu has no role", i);
        if (messages[i].n_tool_calls && !messages[i].tool_calls)
            return bg_fail(err, BRIGADE_ERR_ARG,
                           "chat render: message %zu counts %zu tool calls but has none", i,
                           messages[i].n_tool_calls);
    }

    static const brigade_chat_options no_options;
    if (!opts)
        opts = &no_options;
    json_t *tools = NULL;
    if (opts->tools) {
        tools = bg_json_parse(opts->tools, strlen(opts->tools));
        if (!tools)
            return bg_fail(err, BRIGADE_ERR_ARG, "chat render: options.tools is not valid JSON");
        if (!json_is_array(tools)) {
            json_decref(tools);
            return bg_fail(err, BRIGADE_ERR_ARG,
                           "chat render: options.tools must be a JSON array of tools");
        }
        if (json_array_size(tools) == 0) {
            json_decref(tools);
            tools = NULL;
        }
    }

    bg_render_ctx c = {
        .msgs = messages,
        .n = n_messages,
        .add_generation_prompt = opts->add_generation_prompt,
        .disable_thinking = opts->disable_thinking,
        .tools = tools,
        .err = err,
    };
    brigade_status st;
    switch (tmpl->family) {
    case BRIGADE_CHAT_QWEN3: st = bg_render_qwen3(&c); break;
    case BRIGADE_CHAT_QWEN35: st = bg_render_qwen35(&c); break;
    default: st = bg_render_chatml(&c); break;
    }
    json_decref(tools);
    if (st == BRIGADE_OK && c.out.oom)
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "chat render: out of memory");
    if (st == BRIGADE_OK && !c.out.p) {
        bg_buf_put(&c.out, "", 0);
        if (c.out.oom)
            st = bg_fail(err, BRIGADE_ERR_NOMEM, "chat render: out of memory");
    }
    if (st != BRIGADE_OK) {
        bg_buf_free(&c.out);
        return st;
    }
    out->text = c.out.p;
    out->len = c.out.len;
    out->warning = tmpl->warning;
    return BRIGADE_OK;
}

void brigade_chat_prompt_free(brigade_chat_prompt *prompt)
{
    if (!prompt)
        return;
    free(prompt->text);
    *prompt = (brigade_chat_prompt){0};
}
