/* The OpenAI API (and llama-server's extras) over JSON: a request body is
 * checked field by field into a task, the task's text becomes a response
 * or a stream of SSE chunks. Bad input is a 400 with an OpenAI-style error
 * body naming the field. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "serve.h"

/* ---------------------------------------------------------------- errors */

typedef struct req_error {
    unsigned status;
    const char *type;
    char message[BRIGADE_ERROR_MAX + 64];
    json_t *extra; /* more fields of the error object, or NULL */
} req_error;

static bool bad(req_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->status = 400;
    e->type = "invalid_request_error";
    return false;
}

static void set_json(srv_response *out, unsigned status, json_t *body)
{
    out->status = status;
    out->content_type = "application/json";
    char *text = json_dumps(body, JSON_COMPACT);
    if (text)
        srv_buf_adds(&out->body, text);
    else
        out->body.failed = true;
    free(text);
    json_decref(body);
}

static void error_response(srv_response *out, const req_error *e)
{
    json_t *err = json_pack("{s:i,s:s,s:s}", "code", (int)e->status, "message", e->message,
                            "type", e->type);
    if (e->extra)
        json_object_update(err, e->extra);
    set_json(out, e->status, json_pack("{s:o}", "error", err));
}

void srv_api_error(srv_response *out, unsigned status, const char *type, const char *message)
{
    req_error e = {.status = status, .type = type};
    snprintf(e.message, sizeof e.message, "%s", message);
    error_response(out, &e);
}

/* ------------------------------------------------------------- UTF-8 text */

/* Length of the valid UTF-8 character at s (n bytes left), 0 if invalid. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n || (len == 2 && c < 0xc2))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (len == 3) {
        unsigned cp = ((c & 15u) << 12) | ((s[1] & 63u) << 6) | (s[2] & 63u);
        if (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))
            return 0;
    } else if (len == 4) {
        unsigned cp = ((c & 7u) << 18) | ((s[1] & 63u) << 12) | ((s[2] & 63u) << 6) | (s[3] & 63u);
        if (cp < 0x10000 || cp > 0x10ffff)
            return 0;
    }
    return len;
}

/* A JSON string of text, with bytes that are not UTF-8 replaced by U+FFFD. */
static json_t *jstr(const char *s, size_t n)
{
    srv_buf b = {0};
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (k) {
            srv_buf_add(&b, s + i, k);
            i += k;
        } else {
            srv_buf_add(&b, "\xef\xbf\xbd", 3);
            i++;
        }
    }
    json_t *j = json_stringn(b.data ? b.data : "", b.len);
    srv_buf_free(&b);
    return j ? j : json_string("");
}

static json_t *jstr0(const char *s) { return s ? jstr(s, strlen(s)) : json_null(); }

/* --------------------------------------------------------- field checking */

static json_t *field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool opt_float(json_t *o, const char *key, double lo, double hi, float *out, req_error *e)
{
    json_t *v = field(o, key);
    if (!v)
        return true;
    if (!json_is_number(v))
        return bad(e, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return bad(e, "'%s' is %g, outside [%g, %g]", key, d, lo, hi);
    *out = (float)d;
    return true;
}

static bool opt_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, req_error *e)
{
    json_t *v = field(o, key);
    if (!v)
        return true;
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        d = json_real_value(v);
    else
        return bad(e, "'%s' must be an integer", key);
    if (!(d >= (double)lo && d <= (double)hi))
        return bad(e, "'%s' is %.0f, outside [%lld, %lld]", key, d, (long long)lo, (long long)hi);
    *out = json_is_integer(v) ? json_integer_value(v) : (int64_t)d;
    return true;
}

static bool opt_bool(json_t *o, const char *key, bool *out, req_error *e)
{
    json_t *v = field(o, key);
    if (!v)
        return true;
    if (!json_is_boolean(v))
        return bad(e, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return true;
}

/* ------------------------------------------------------- generation input */

typedef enum api_kind { API_CHAT, API_COMPLETION } api_kind;

/* What one generation request asked for, beyond the task itself. */
typedef struct gen_request {
    api_kind kind;
    bool stream, include_usage;
    brigade_chat_options chat;
    char *tools_json;
    bool json_mode;
} gen_request;

/* The sampling and length fields both endpoints share. */
static bool parse_sampling(const srv_state *st, json_t *body, api_kind kind, srv_task *t,
                           brigade_sampling_options *so, req_error *e)
{
    *so = st->sampling;
    int64_t v;
    if (!opt_float(body, "temperature", 0, 100, &so->temp, e) ||
        !opt_float(body, "top_p", 0, 1, &so->top_p, e) ||
        !opt_float(body, "min_p", 0, 1, &so->min_p, e) ||
        !opt_float(body, "presence_penalty", -2, 2, &so->presence_penalty, e) ||
        !opt_float(body, "frequency_penalty", -2, 2, &so->frequency_penalty, e) ||
        !opt_float(body, "repeat_penalty", 0, 100, &so->repeat_penalty, e))
        return false;
    v = so->top_k;
    if (!opt_int(body, "top_k", 0, brigade_model_n_vocab(st->model), &v, e))
        return false;
    so->top_k = (int32_t)v;
    v = so->penalty_last_n;
    if (!opt_int(body, "repeat_last_n", 0, st->n_ctx, &v, e))
        return false;
    so->penalty_last_n = (int32_t)v;
    v = -1;
    if (!opt_int(body, "seed", INT64_MIN, INT64_MAX, &v, e))
        return false;
    if (v < 0) { /* none given: a fresh seed per request, as OpenAI does */
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = (uint64_t)time(NULL);
        so->seed = r;
    } else {
        so->seed = (uint64_t)v;
    }
    v = 1;
    if (!opt_int(body, "n", 1, 128, &v, e))
        return false;
    if (v != 1)
        return bad(e, "'n' is %lld: only one choice per request is supported", (long long)v);
    bool logprobs = false;
    if (!opt_bool(body, "logprobs", &logprobs, e))
        return false;
    if (logprobs)
        return bad(e, "'logprobs' is not supported");
    /* max_tokens (max_completion_tokens, llama.cpp's n_predict) */
    int64_t max = st->n_predict >= 0 ? st->n_predict : kind == API_COMPLETION ? 16 : -1;
    if (!opt_int(body, "n_predict", -1, INT32_MAX, &max, e) ||
        !opt_int(body, "max_tokens", 0, INT32_MAX, &max, e) ||
        !opt_int(body, "max_completion_tokens", 0, INT32_MAX, &max, e))
        return false;
    t->max_tokens = (int32_t)max;
    json_t *stop = field(body, "stop");
    if (stop) {
        size_t n = json_is_string(stop) ? 1 : json_is_array(stop) ? json_array_size(stop) : 0;
        if (!json_is_string(stop) && !json_is_array(stop))
            return bad(e, "'stop' must be a string or an array of strings");
        if (n > 16)
            return bad(e, "'stop' has %zu strings, at most 16 are allowed", n);
        if (!(t->stop = calloc(n ? n : 1, sizeof *t->stop)))
            return bad(e, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_is_string(stop) ? stop : json_array_get(stop, i);
            if (!json_is_string(s))
                return bad(e, "'stop' must be a string or an array of strings");
            if (!json_string_length(s))
                continue;
            if (!(t->stop[t->n_stop++] = strndup(json_string_value(s), json_string_length(s))))
                return bad(e, "out of memory");
        }
    }
    return true;
}

static bool parse_stream(json_t *body, gen_request *g, req_error *e)
{
    if (!opt_bool(body, "stream", &g->stream, e))
        return false;
    json_t *so = field(body, "stream_options");
    if (so && !json_is_object(so))
        return bad(e, "'stream_options' must be an object");
    return !so || opt_bool(so, "include_usage", &g->include_usage, e);
}

/* Text of a message's content: a string, null, or an array of text parts. */
static bool content_text(json_t *c, size_t idx, srv_buf *out, bool *present, req_error *e)
{
    *present = c != NULL;
    if (!c)
        return true;
    if (json_is_string(c)) {
        srv_buf_add(out, json_string_value(c), json_string_length(c));
        return true;
    }
    if (!json_is_array(c))
        return bad(e, "messages[%zu].content must be a string, null or an array of parts", idx);
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part)
    {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return bad(e, "messages[%zu].content[%zu] must be an object with a type", idx, i);
        if (strcmp(json_string_value(type), "text") != 0)
            return bad(e, "messages[%zu].content[%zu]: parts of type '%s' are not supported", idx,
                       i, json_string_value(type));
        if (!json_is_string(text))
            return bad(e, "messages[%zu].content[%zu].text must be a string", idx, i);
        srv_buf_add(out, json_string_value(text), json_string_length(text));
    }
    return true;
}

/* Converted messages and the strings they point at. */
typedef struct chat_input {
    brigade_chat_message *msgs;
    size_t n;
    srv_buf *texts;              /* [n] contents */
    brigade_chat_tool_call **calls; /* [n] */
    char **owned;                /* argument texts made here */
    size_t n_owned;
} chat_input;

static void chat_input_free(chat_input *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->texts)
            srv_buf_free(&c->texts[i]);
        if (c->calls)
            free(c->calls[i]);
    }
    for (size_t i = 0; i < c->n_owned; i++)
        free(c->owned[i]);
    free(c->owned);
    free(c->texts);
    free(c->calls);
    free(c->msgs);
}

static const char *opt_string(json_t *o, const char *key, size_t idx, bool *ok, req_error *e)
{
    json_t *v = field(o, key);
    if (v && !json_is_string(v)) {
        *ok = bad(e, "messages[%zu].%s must be a string", idx, key);
        return NULL;
    }
    return v ? json_string_value(v) : NULL;
}

static bool parse_tool_calls(json_t *arr, size_t idx, chat_input *c, req_error *e)
{
    if (!json_is_array(arr))
        return bad(e, "messages[%zu].tool_calls must be an array", idx);
    size_t n = json_array_size(arr);
    brigade_chat_tool_call *calls = calloc(n ? n : 1, sizeof *calls);
    char **owned = realloc(c->owned, (c->n_owned + n + 1) * sizeof *owned);
    if (owned)
        c->owned = owned;
    if (!calls || !owned) {
        free(calls);
        return bad(e, "out of memory");
    }
    c->calls[idx] = calls;
    c->msgs[idx].tool_calls = calls;
    c->msgs[idx].n_tool_calls = n;
    for (size_t i = 0; i < n; i++) {
        json_t *call = json_array_get(arr, i);
        json_t *fn = json_is_object(call) ? json_object_get(call, "function") : NULL;
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        json_t *args = json_is_object(fn) ? field(fn, "arguments") : NULL;
        json_t *id = json_is_object(call) ? field(call, "id") : NULL;
        if (!json_is_string(name))
            return bad(e, "messages[%zu].tool_calls[%zu].function.name must be a string", idx, i);
        if (id && !json_is_string(id))
            return bad(e, "messages[%zu].tool_calls[%zu].id must be a string", idx, i);
        calls[i].name = json_string_value(name);
        calls[i].id = id ? json_string_value(id) : NULL;
        if (json_is_string(args)) {
            calls[i].arguments = json_string_value(args);
        } else if (args) {
            char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!text)
                return bad(e, "out of memory");
            c->owned[c->n_owned++] = text;
            calls[i].arguments = text;
        }
    }
    return true;
}

static bool parse_messages(json_t *body, chat_input *c, req_error *e)
{
    json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || !json_array_size(msgs))
        return bad(e, "'messages' must be a non-empty array");
    size_t n = json_array_size(msgs);
    c->n = n;
    c->msgs = calloc(n, sizeof *c->msgs);
    c->texts = calloc(n, sizeof *c->texts);
    c->calls = calloc(n, sizeof *c->calls);
    if (!c->msgs || !c->texts || !c->calls)
        return bad(e, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m))
            return bad(e, "messages[%zu] must be an object", i);
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return bad(e, "messages[%zu].role must be a string", i);
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer"))
            r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
            return bad(e, "messages[%zu].role '%s' is not one of system, developer, user, "
                          "assistant, tool",
                       i, json_string_value(role));
        brigade_chat_message *cm = &c->msgs[i];
        cm->role = r;
        bool present, ok = true;
        if (!content_text(field(m, "content"), i, &c->texts[i], &present, e))
            return false;
        cm->content = present ? (c->texts[i].data ? c->texts[i].data : "") : NULL;
        cm->reasoning_content = opt_string(m, "reasoning_content", i, &ok, e);
        cm->tool_call_id = opt_string(m, "tool_call_id", i, &ok, e);
        cm->name = opt_string(m, "name", i, &ok, e);
        if (!ok)
            return false;
        json_t *calls = field(m, "tool_calls");
        if (calls && strcmp(r, "assistant"))
            return bad(e, "messages[%zu]: only assistant messages have tool_calls", i);
        if (calls && !parse_tool_calls(calls, i, c, e))
            return false;
    }
    return true;
}

static bool parse_tools(json_t *body, gen_request *g, req_error *e)
{
    json_t *tools = field(body, "tools");
    json_t *choice = field(body, "tool_choice");
    if (tools && !json_is_array(tools))
        return bad(e, "'tools' must be an array");
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        json_t *fn = json_is_object(tool) ? json_object_get(tool, "function") : NULL;
        json_t *type = json_is_object(tool) ? json_object_get(tool, "type") : NULL;
        if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
            return bad(e, "tools[%zu].type must be \"function\"", i);
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return bad(e, "tools[%zu].function.name must be a string", i);
        json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_object(params))
            return bad(e, "tools[%zu].function.parameters must be an object", i);
    }
    bool use = tools && json_array_size(tools);
    if (choice) {
        if (json_is_string(choice)) {
            const char *c = json_string_value(choice);
            if (strcmp(c, "none") && strcmp(c, "auto") && strcmp(c, "required"))
                return bad(e, "'tool_choice' must be \"none\", \"auto\", \"required\" or an object");
            if (!strcmp(c, "none"))
                use = false;
        } else if (!json_is_object(choice)) {
            return bad(e, "'tool_choice' must be \"none\", \"auto\", \"required\" or an object");
        }
    }
    if (use) {
        g->tools_json = json_dumps(tools, JSON_COMPACT);
        if (!g->tools_json)
            return bad(e, "out of memory");
        g->chat.tools = g->tools_json;
    }
    return true;
}

static bool parse_response_format(json_t *body, gen_request *g, req_error *e)
{
    json_t *rf = field(body, "response_format");
    if (!rf)
        return true;
    json_t *type = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
    if (!json_is_string(type))
        return bad(e, "'response_format' must be an object with a type");
    const char *t = json_string_value(type);
    if (!strcmp(t, "json_object"))
        g->json_mode = true;
    else if (strcmp(t, "text"))
        return bad(e, "response_format type '%s' is not supported (text, json_object)", t);
    return true;
}

static bool parse_kwargs(json_t *body, gen_request *g, req_error *e)
{
    json_t *kw = field(body, "chat_template_kwargs");
    if (kw && !json_is_object(kw))
        return bad(e, "'chat_template_kwargs' must be an object");
    bool thinking = !g->chat.disable_thinking;
    if (kw && !opt_bool(kw, "enable_thinking", &thinking, e))
        return false;
    g->chat.disable_thinking = !thinking;
    return true;
}

static int32_t *tokenize(const srv_state *st, const char *text, size_t len, bool add_special,
                         size_t *n, req_error *e)
{
    brigade_error err = {0};
    int32_t *ids = NULL;
    if (brigade_tokenize(st->vocab, text, len, add_special, true, NULL, 0, n, &err) == BRIGADE_OK &&
        (ids = malloc((*n ? *n : 1) * sizeof *ids)) &&
        brigade_tokenize(st->vocab, text, len, add_special, true, ids, *n, n, &err) == BRIGADE_OK)
        return ids;
    free(ids);
    bad(e, "cannot tokenize the prompt: %s", err.message[0] ? err.message : "out of memory");
    return NULL;
}

/* Where the conversation before the assistant's new turn ends, in tokens:
 * the next turn's prompt shares everything up to there (0: unknown). */
static uint32_t history_end(const srv_state *st, const chat_input *ci,
                            const brigade_chat_options *opts, const srv_task *t)
{
    brigade_chat_options o = *opts;
    o.add_generation_prompt = false;
    brigade_chat_prompt p = {0};
    brigade_error err;
    uint32_t at = 0;
    size_t n = 0;
    req_error e = {0};
    if (brigade_chat_render(st->tmpl, ci->msgs, ci->n, &o, &p, &err) == BRIGADE_OK) {
        int32_t *ids = tokenize(st, p.text, p.len, true, &n, &e);
        if (ids && n < t->n_prompt && !memcmp(ids, t->prompt, n * sizeof *ids))
            at = (uint32_t)n;
        free(ids);
    }
    brigade_chat_prompt_free(&p);
    return at;
}

/* The prompt of /v1/completions: a string, an array of token ids, or an
 * array holding one string. */
static bool completion_prompt(const srv_state *st, json_t *body, srv_task *t, req_error *e)
{
    json_t *p = json_object_get(body, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        t->prompt = tokenize(st, json_string_value(p), json_string_length(p), true, &t->n_prompt, e);
        return t->prompt != NULL;
    }
    if (!json_is_array(p))
        return bad(e, "'prompt' must be a string or an array of token ids");
    size_t n = json_array_size(p);
    if (!(t->prompt = malloc((n ? n : 1) * sizeof *t->prompt)))
        return bad(e, "out of memory");
    uint32_t V = brigade_model_n_vocab(st->model);
    for (size_t i = 0; i < n; i++) {
        json_t *id = json_array_get(p, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= V)
            return bad(e, "prompt[%zu] must be a token id in [0, %u)", i, V);
        t->prompt[i] = (int32_t)json_integer_value(id);
    }
    t->n_prompt = n;
    return true;
}

/* -------------------------------------------------------------- responses */

static void random_id(char *out, size_t size, const char *prefix)
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[24];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = (unsigned char)rand();
    size_t k = (size_t)snprintf(out, size, "%s", prefix);
    for (size_t i = 0; i < sizeof r && k + 1 < size; i++)
        out[k++] = abc[r[i] % (sizeof abc - 1)];
    out[k] = 0;
}

/* What a finished or running task reports. */
typedef struct task_report {
    size_t n_prompt, n_cached, n_generated;
    double prompt_s, gen_s;
    srv_finish finish;
    char error[BRIGADE_ERROR_MAX];
} task_report;

static void report_of(srv_task *t, task_report *r)
{
    pthread_mutex_lock(&t->mu);
    r->n_prompt = t->n_prompt;
    r->n_cached = t->n_cached;
    r->n_generated = t->n_tokens_out;
    r->prompt_s = t->t_prompt_end - t->t_start;
    r->gen_s = t->t_end - t->t_prompt_end;
    r->finish = t->finish;
    snprintf(r->error, sizeof r->error, "%s", t->error);
    pthread_mutex_unlock(&t->mu);
}

static json_t *usage_json(const task_report *r)
{
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)r->n_prompt,
                     "completion_tokens", (json_int_t)r->n_generated, "total_tokens",
                     (json_int_t)(r->n_prompt + r->n_generated), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)r->n_cached);
}

/* llama-server's timings object. */
static json_t *timings_json(const task_report *r)
{
    size_t pn = r->n_prompt - r->n_cached;
    double pms = r->prompt_s * 1e3, gms = r->gen_s * 1e3;
    return json_pack("{s:I,s:I,s:f,s:f,s:f,s:I,s:f,s:f,s:f}", "cache_n", (json_int_t)r->n_cached,
                     "prompt_n", (json_int_t)pn, "prompt_ms", pms, "prompt_per_token_ms",
                     pn ? pms / (double)pn : 0.0, "prompt_per_second",
                     pms > 0 ? (double)pn * 1e3 / pms : 0.0, "predicted_n",
                     (json_int_t)r->n_generated, "predicted_ms", gms, "predicted_per_token_ms",
                     r->n_generated ? gms / (double)r->n_generated : 0.0, "predicted_per_second",
                     gms > 0 ? (double)r->n_generated * 1e3 / gms : 0.0);
}

static const char *finish_name(srv_finish f, bool tool_calls)
{
    if (f == SRV_FINISH_LENGTH)
        return "length";
    return tool_calls ? "tool_calls" : "stop";
}

static json_t *tool_calls_json(const brigade_chat_tool_call *calls, size_t n, size_t first,
                               bool with_index)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char id[40];
        random_id(id, sizeof id, "call_");
        json_t *c = json_pack("{s:s,s:s,s:{s:o,s:o}}", "id", id, "type", "function", "function",
                              "name", jstr0(calls[i].name), "arguments",
                              jstr0(calls[i].arguments ? calls[i].arguments : "{}"));
        if (with_index)
            json_object_set_new(c, "index", json_integer((json_int_t)(first + i)));
        json_array_append_new(arr, c);
    }
    return arr;
}

/* A generation in flight, as the connection sees it. */
struct srv_stream {
    srv_state *st;
    srv_task *task;
    gen_request g;
    brigade_chat_parser *parser; /* chat only */
    char id[48];
    long long created;
    size_t consumed;  /* bytes of task->text already handled */
    size_t n_calls;   /* tool calls sent */
    bool started, ended;
};

static void stream_free_parts(srv_stream *s)
{
    brigade_chat_parser_free(s->parser);
    free(s->g.tools_json);
    srv_task_unref(s->task);
    free(s);
}

void srv_stream_free(srv_stream *s)
{
    if (!s)
        return;
    atomic_store(&s->task->cancel, true);
    stream_free_parts(s);
}

static json_t *chunk_base(const srv_stream *s)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", s->id, "object",
                     s->g.kind == API_CHAT ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)s->created, "model", s->st->alias,
                     "system_fingerprint", "brigade");
}

static void sse(srv_buf *out, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text) {
        out->failed = true;
        return;
    }
    srv_buf_adds(out, "data: ");
    srv_buf_adds(out, text);
    srv_buf_adds(out, "\n\n");
    free(text);
}

/* One chunk with a delta (chat) or text (completions). */
static void sse_delta(srv_stream *s, srv_buf *out, json_t *delta, const char *finish)
{
    json_t *c = chunk_base(s);
    json_t *choice = json_pack("{s:i,s:n}", "index", 0, "logprobs");
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    if (s->g.kind == API_CHAT)
        json_object_set_new(choice, "delta", delta);
    else
        json_object_set_new(choice, "text", delta);
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    sse(out, c);
}

static void sse_chat_delta(srv_stream *s, srv_buf *out, const brigade_chat_delta *d)
{
    if (d->reasoning_len)
        sse_delta(s, out, json_pack("{s:o}", "reasoning_content", jstr(d->reasoning, d->reasoning_len)),
                  NULL);
    if (d->content_len)
        sse_delta(s, out, json_pack("{s:o}", "content", jstr(d->content, d->content_len)), NULL);
    if (d->n_tool_calls) {
        sse_delta(s, out,
                  json_pack("{s:o}", "tool_calls",
                            tool_calls_json(d->tool_calls, d->n_tool_calls, s->n_calls, true)),
                  NULL);
        s->n_calls += d->n_tool_calls;
    }
}

static void sse_error(srv_buf *out, unsigned code, const char *type, const char *message)
{
    sse(out, json_pack("{s:{s:i,s:s,s:s}}", "error", "code", (int)code, "message", message, "type",
                       type));
}

bool srv_stream_next(srv_stream *s, srv_buf *out, int timeout_ms)
{
    if (s->ended)
        return false;
    if (!s->started) {
        s->started = true;
        if (s->g.kind == API_CHAT) {
            sse_delta(s, out, json_pack("{s:s,s:n}", "role", "assistant", "content"), NULL);
            return true;
        }
    }
    srv_task *t = s->task;
    bool done = srv_task_wait(t, s->consumed, timeout_ms);
    pthread_mutex_lock(&t->mu);
    size_t n = t->text.len - s->consumed;
    char *text = n ? malloc(n) : NULL;
    if (text)
        memcpy(text, t->text.data + s->consumed, n);
    s->consumed = t->text.len;
    pthread_mutex_unlock(&t->mu);
    if (n && !text)
        out->failed = true;
    if (text) {
        if (s->parser) {
            brigade_chat_delta d;
            if (brigade_chat_parser_feed(s->parser, text, n, &d, NULL) == BRIGADE_OK)
                sse_chat_delta(s, out, &d);
        } else if (s->g.kind == API_CHAT) {
            sse_delta(s, out, json_pack("{s:o}", "content", jstr(text, n)), NULL);
        } else {
            sse_delta(s, out, jstr(text, n), NULL);
        }
        free(text);
    }
    if (!done)
        return true;
    task_report r;
    report_of(t, &r);
    if (s->parser) {
        brigade_chat_delta d;
        if (brigade_chat_parser_finish(s->parser, &d, NULL) == BRIGADE_OK)
            sse_chat_delta(s, out, &d);
    }
    if (r.finish == SRV_FINISH_ERROR || r.finish == SRV_FINISH_SHUTDOWN) {
        bool down = r.finish == SRV_FINISH_SHUTDOWN;
        sse_error(out, down ? 503 : 500, down ? "unavailable_error" : "server_error", r.error);
    } else {
        json_t *last = chunk_base(s);
        json_t *choice = json_pack("{s:i,s:n,s:s}", "index", 0, "logprobs", "finish_reason",
                                   finish_name(r.finish, s->n_calls > 0));
        json_object_set_new(choice, s->g.kind == API_CHAT ? "delta" : "text",
                            s->g.kind == API_CHAT ? json_object() : json_string(""));
        json_object_set_new(last, "choices", json_pack("[o]", choice));
        json_object_set_new(last, "timings", timings_json(&r));
        sse(out, last);
        if (s->g.include_usage) {
            json_t *u = chunk_base(s);
            json_object_set_new(u, "choices", json_array());
            json_object_set_new(u, "usage", usage_json(&r));
            json_object_set_new(u, "timings", timings_json(&r));
            sse(out, u);
        }
    }
    srv_buf_adds(out, "data: [DONE]\n\n");
    s->ended = true;
    return true;
}

/* The whole answer at once. */
static void complete_response(srv_stream *s, srv_response *out)
{
    task_report r;
    report_of(s->task, &r);
    if (r.finish == SRV_FINISH_ERROR || r.finish == SRV_FINISH_SHUTDOWN) {
        bool down = r.finish == SRV_FINISH_SHUTDOWN;
        srv_api_error(out, down ? 503 : 500, down ? "unavailable_error" : "server_error", r.error);
        return;
    }
    pthread_mutex_lock(&s->task->mu);
    const char *text = s->task->text.data ? s->task->text.data : "";
    size_t len = s->task->text.len;
    json_t *choice = json_pack("{s:i,s:n}", "index", 0, "logprobs");
    bool calls = false;
    if (s->g.kind == API_COMPLETION) {
        json_object_set_new(choice, "text", jstr(text, len));
    } else {
        json_t *msg = json_pack("{s:s}", "role", "assistant");
        const brigade_chat_message *m = NULL;
        if (s->parser && brigade_chat_parser_feed(s->parser, text, len, NULL, NULL) == BRIGADE_OK &&
            brigade_chat_parser_finish(s->parser, NULL, NULL) == BRIGADE_OK)
            m = brigade_chat_parser_message(s->parser);
        if (m) {
            json_object_set_new(msg, "content", m->content && (*m->content || !m->n_tool_calls)
                                                    ? jstr0(m->content)
                                                    : json_null());
            if (m->reasoning_content)
                json_object_set_new(msg, "reasoning_content", jstr0(m->reasoning_content));
            if (m->n_tool_calls) {
                json_object_set_new(msg, "tool_calls",
                                    tool_calls_json(m->tool_calls, m->n_tool_calls, 0, false));
                calls = true;
            }
        } else {
            json_object_set_new(msg, "content", jstr(text, len));
        }
        json_object_set_new(choice, "message", msg);
    }
    pthread_mutex_unlock(&s->task->mu);
    json_object_set_new(choice, "finish_reason", json_string(finish_name(r.finish, calls)));
    json_t *body = json_pack("{s:s,s:s,s:I,s:s,s:s,s:[o]}", "id", s->id, "object",
                             s->g.kind == API_CHAT ? "chat.completion" : "text_completion",
                             "created", (json_int_t)s->created, "model", s->st->alias,
                             "system_fingerprint", "brigade", "choices", choice);
    json_object_set_new(body, "usage", usage_json(&r));
    json_object_set_new(body, "timings", timings_json(&r));
    set_json(out, 200, body);
}

/* ----------------------------------------------------------- generation */

static void generate(srv_state *st, api_kind kind, json_t *body, srv_alive_fn alive, void *user,
                     srv_response *out)
{
    req_error e = {0};
    srv_stream *s = calloc(1, sizeof *s);
    srv_task *t = srv_task_new();
    chat_input ci = {0};
    brigade_chat_prompt rendered = {0};
    if (!s || !t) {
        free(s);
        srv_task_unref(t);
        srv_api_error(out, 500, "server_error", "out of memory");
        return;
    }
    s->st = st;
    s->task = t;
    s->g.kind = kind;
    s->g.chat.add_generation_prompt = true;
    s->g.chat.disable_thinking = st->no_think;
    s->created = (long long)time(NULL);
    random_id(s->id, sizeof s->id, kind == API_CHAT ? "chatcmpl-" : "cmpl-");
    brigade_sampling_options so;
    brigade_error err = {0};
    bool ok = parse_sampling(st, body, kind, t, &so, &e) && parse_stream(body, &s->g, &e);
    if (ok && kind == API_CHAT) {
        ok = parse_messages(body, &ci, &e) && parse_tools(body, &s->g, &e) &&
             parse_response_format(body, &s->g, &e) && parse_kwargs(body, &s->g, &e);
        if (s->g.json_mode) /* the object is the answer, not something after thinking */
            s->g.chat.disable_thinking = true;
        if (ok && brigade_chat_render(st->tmpl, ci.msgs, ci.n, &s->g.chat, &rendered, &err))
            ok = bad(&e, "%s", err.message);
        if (ok)
            ok = (t->prompt = tokenize(st, rendered.text, rendered.len, true, &t->n_prompt, &e)) !=
                 NULL;
        if (ok)
            t->ckpt_at = history_end(st, &ci, &s->g.chat, t);
        if (ok && brigade_chat_parser_new(st->tmpl, &s->g.chat, &s->parser, &err))
            ok = bad(&e, "%s", err.message);
    } else if (ok) {
        ok = completion_prompt(st, body, t, &e);
    }
    if (ok && t->n_prompt == 0)
        ok = bad(&e, "the prompt is empty");
    if (ok && t->n_prompt >= st->n_ctx) {
        ok = bad(&e, "the request has %zu prompt tokens, more than the context of %u allows",
                 t->n_prompt, st->n_ctx);
        e.type = "exceed_context_size_error";
        e.extra = json_pack("{s:I,s:I}", "n_prompt_tokens", (json_int_t)t->n_prompt, "n_ctx",
                            (json_int_t)st->n_ctx);
    }
    t->json_mode = s->g.json_mode;
    if (ok && brigade_sampler_new(&so, (int32_t)brigade_model_n_vocab(st->model), &t->sampler, &err))
        ok = bad(&e, "%s", err.message);
    if (ok && brigade_detok_create(st->vocab, false, &t->detok, &err))
        ok = bad(&e, "%s", err.message);
    chat_input_free(&ci);
    brigade_chat_prompt_free(&rendered);
    if (!ok) {
        error_response(out, &e);
        json_decref(e.extra);
        stream_free_parts(s);
        return;
    }
    srv_submit sub = srv_sched_submit(st->sched, t);
    if (sub != SRV_SUBMIT_OK) {
        srv_api_error(out, 503, "unavailable_error",
                      sub == SRV_SUBMIT_FULL ? "the server is busy: every slot is taken and the "
                                               "queue is full"
                                             : "the server is shutting down");
        stream_free_parts(s);
        return;
    }
    if (s->g.stream) {
        out->status = 200;
        out->content_type = "text/event-stream";
        out->stream = s;
        return;
    }
    while (!srv_task_wait(t, SIZE_MAX, 50))
        if (!alive(user)) {
            srv_stream_free(s); /* cancels */
            out->status = 0;
            return;
        }
    complete_response(s, out);
    stream_free_parts(s);
}

/* -------------------------------------------------------- other endpoints */

static void models(srv_state *st, srv_response *out)
{
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:{s:s,s:I,s:I,s:I,s:I}}", "id", st->alias, "object",
                          "model", "created", (json_int_t)st->started, "owned_by", "brigade",
                          "meta", "arch", brigade_model_arch(st->model), "n_vocab",
                          (json_int_t)brigade_model_n_vocab(st->model), "n_ctx",
                          (json_int_t)st->n_ctx, "n_params",
                          (json_int_t)brigade_model_n_params(st->model), "size",
                          (json_int_t)brigade_model_weight_bytes(st->model));
    set_json(out, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

static void do_tokenize(srv_state *st, json_t *body, srv_response *out)
{
    req_error e = {0};
    json_t *content = json_object_get(body, "content");
    bool add_special = false, with_pieces = false;
    if (!json_is_string(content)) {
        bad(&e, "'content' must be a string");
    } else if (opt_bool(body, "add_special", &add_special, &e) &&
               opt_bool(body, "with_pieces", &with_pieces, &e)) {
        size_t n;
        int32_t *ids = tokenize(st, json_string_value(content), json_string_length(content),
                                add_special, &n, &e);
        if (ids) {
            json_t *arr = json_array();
            for (size_t i = 0; i < n; i++) {
                if (!with_pieces) {
                    json_array_append_new(arr, json_integer(ids[i]));
                    continue;
                }
                brigade_string p = brigade_token_piece(st->vocab, ids[i], true);
                json_array_append_new(arr, json_pack("{s:i,s:o}", "id", ids[i], "piece",
                                                     jstr(p.ptr, p.len)));
            }
            free(ids);
            set_json(out, 200, json_pack("{s:o}", "tokens", arr));
            return;
        }
    }
    error_response(out, &e);
}

static void do_detokenize(srv_state *st, json_t *body, srv_response *out)
{
    req_error e = {0};
    json_t *tokens = json_object_get(body, "tokens");
    if (!json_is_array(tokens)) {
        bad(&e, "'tokens' must be an array of token ids");
        error_response(out, &e);
        return;
    }
    srv_buf text = {0};
    int32_t V = (int32_t)brigade_model_n_vocab(st->model);
    size_t i;
    json_t *id;
    json_array_foreach(tokens, i, id)
    {
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= V) {
            srv_buf_free(&text);
            bad(&e, "tokens[%zu] must be a token id in [0, %d)", i, V);
            error_response(out, &e);
            return;
        }
        brigade_string p = brigade_token_piece(st->vocab, (int32_t)json_integer_value(id), true);
        srv_buf_add(&text, p.ptr, p.len);
    }
    set_json(out, 200, json_pack("{s:o}", "content", jstr(text.data ? text.data : "", text.len)));
    srv_buf_free(&text);
}

static void metrics(srv_state *st, srv_response *out)
{
    srv_metrics m;
    srv_sched_metrics(st->sched, &m);
    char buf[4096];
    snprintf(buf, sizeof buf,
             "# HELP brigade_requests_total Generation requests that reached a slot.\n"
             "# TYPE brigade_requests_total counter\nbrigade_requests_total %llu\n"
             "# HELP brigade_http_requests_total HTTP requests received.\n"
             "# TYPE brigade_http_requests_total counter\nbrigade_http_requests_total %llu\n"
             "# HELP brigade_prompt_tokens_total Prompt tokens evaluated (cached ones aside).\n"
             "# TYPE brigade_prompt_tokens_total counter\nbrigade_prompt_tokens_total %llu\n"
             "# HELP brigade_prompt_tokens_cached_total Prompt tokens reused from a slot's cache.\n"
             "# TYPE brigade_prompt_tokens_cached_total counter\n"
             "brigade_prompt_tokens_cached_total %llu\n"
             "# HELP brigade_tokens_predicted_total Tokens generated.\n"
             "# TYPE brigade_tokens_predicted_total counter\nbrigade_tokens_predicted_total %llu\n"
             "# HELP brigade_prompt_seconds_total Time requests spent reading prompts.\n"
             "# TYPE brigade_prompt_seconds_total counter\nbrigade_prompt_seconds_total %.6f\n"
             "# HELP brigade_tokens_predicted_seconds_total Time requests spent generating.\n"
             "# TYPE brigade_tokens_predicted_seconds_total counter\n"
             "brigade_tokens_predicted_seconds_total %.6f\n"
             "# HELP brigade_prompt_tokens_seconds Prompt tokens per second, per request.\n"
             "# TYPE brigade_prompt_tokens_seconds gauge\nbrigade_prompt_tokens_seconds %.3f\n"
             "# HELP brigade_predicted_tokens_seconds Generated tokens per second, per request.\n"
             "# TYPE brigade_predicted_tokens_seconds gauge\nbrigade_predicted_tokens_seconds %.3f\n"
             "# HELP brigade_decode_steps_total Batched evaluation steps.\n"
             "# TYPE brigade_decode_steps_total counter\nbrigade_decode_steps_total %llu\n"
             "# HELP brigade_requests_processing Requests in a slot.\n"
             "# TYPE brigade_requests_processing gauge\nbrigade_requests_processing %u\n"
             "# HELP brigade_requests_deferred Requests waiting for a slot.\n"
             "# TYPE brigade_requests_deferred gauge\nbrigade_requests_deferred %u\n"
             "# HELP brigade_slots Slots (sequences decoded together).\n"
             "# TYPE brigade_slots gauge\nbrigade_slots %u\n",
             (unsigned long long)m.requests, (unsigned long long)atomic_load(&st->http_requests),
             (unsigned long long)m.prompt_tokens, (unsigned long long)m.cached_tokens,
             (unsigned long long)m.generated_tokens, m.prompt_seconds, m.gen_seconds,
             m.prompt_seconds > 0 ? (double)m.prompt_tokens / m.prompt_seconds : 0.0,
             m.gen_seconds > 0 ? (double)m.generated_tokens / m.gen_seconds : 0.0,
             (unsigned long long)m.steps, m.processing, m.deferred, m.n_slots);
    out->status = 200;
    out->content_type = "text/plain; version=0.0.4";
    srv_buf_adds(&out->body, buf);
}

void srv_api_route(srv_state *st, const char *method, const char *path, const char *body,
                   size_t body_len, srv_alive_fn alive, void *alive_user, srv_response *out)
{
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(path, "/health") || !strcmp(path, "/v1/health")) {
        if (!atomic_load(&st->ready))
            srv_api_error(out, 503, "unavailable_error", "Loading model");
        else
            set_json(out, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    static const struct {
        const char *path;
        bool post;
    } routes[] = {
        {"/v1/chat/completions", true}, {"/chat/completions", true}, {"/v1/completions", true},
        {"/completions", true},         {"/v1/models", false},       {"/models", false},
        {"/tokenize", true},            {"/detokenize", true},       {"/metrics", false},
    };
    size_t r = 0, n_routes = sizeof routes / sizeof *routes;
    while (r < n_routes && strcmp(routes[r].path, path))
        r++;
    if (r == n_routes) {
        srv_api_error(out, 404, "not_found_error", "no such endpoint");
        return;
    }
    if (routes[r].post ? !post : !get) {
        srv_api_error(out, 405, "invalid_request_error",
                      routes[r].post ? "use POST for this endpoint" : "use GET for this endpoint");
        return;
    }
    if (!atomic_load(&st->ready)) {
        srv_api_error(out, 503, "unavailable_error", "Loading model");
        return;
    }
    if (strstr(path, "models")) {
        models(st, out);
        return;
    }
    if (!strcmp(path, "/metrics")) {
        if (st->metrics)
            metrics(st, out);
        else
            srv_api_error(out, 501, "not_supported_error",
                          "the metrics endpoint is off: start the server with --metrics");
        return;
    }
    json_error_t jerr;
    json_t *j = json_loadb(body ? body : "", body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j || !json_is_object(j)) {
        char msg[300];
        if (j)
            snprintf(msg, sizeof msg, "the request body must be a JSON object");
        else
            snprintf(msg, sizeof msg, "the request body is not valid JSON: %s (line %d, column %d)",
                     jerr.text, jerr.line, jerr.column);
        json_decref(j);
        srv_api_error(out, 400, "invalid_request_error", msg);
        return;
    }
    if (!strcmp(path, "/tokenize"))
        do_tokenize(st, j, out);
    else if (!strcmp(path, "/detokenize"))
        do_detokenize(st, j, out);
    else
        generate(st, strstr(path, "chat") ? API_CHAT : API_COMPLETION, j, alive, alive_user, out);
    json_decref(j);
}
