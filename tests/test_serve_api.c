/* The server's answers built from generated text, without a model or a
 * socket: the API and scheduler sources are compiled into this test. A
 * Qwen3.5 answer with reasoning and a tool call becomes reasoning_content
 * and tool_calls with JSON arguments, whole and as SSE chunks; stop strings
 * cut the text even when split across tokens; bytes that are not UTF-8
 * become U+FFFD in the JSON. */
#include "../app/serve_api.c"
#include "../app/serve_json.c"
#include "../app/serve_sched.c"

#include "check.h"

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}}}}}]";

static const char *ANSWER = "Let me look.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n"
                            "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
                            "</parameter>\n</function>\n</tool_call>";

static brigade_chat_template *load_qwen35(void)
{
    const char *dir = getenv("ORACLE_SRC_DIR") ? getenv("ORACLE_SRC_DIR") : ".oracle/llama.cpp";
    char path[1024];
    snprintf(path, sizeof path, "%s/models/templates/Qwen3.5-4B.jinja", dir);
    FILE *f = fopen(path, "rb");
    srv_buf text = {0};
    char chunk[4096];
    size_t n;
    while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        srv_buf_add(&text, chunk, n);
    if (f)
        fclose(f);
    brigade_chat_template *t = NULL;
    brigade_error err;
    CHECK(text.len && brigade_chat_template_from_string(text.data, text.len, &t, &err) == BRIGADE_OK,
          "cannot load %s", path);
    srv_buf_free(&text);
    return t;
}

/* A finished task holding text, in a stream as generate() makes one. */
static srv_stream *finished(srv_state *st, const char *text, srv_finish why, bool tools)
{
    srv_stream *s = calloc(1, sizeof *s);
    s->st = st;
    s->task = srv_task_new();
    s->g.kind = API_CHAT;
    s->g.chat.add_generation_prompt = true;
    s->g.chat.tools = tools ? TOOLS : NULL;
    s->g.include_usage = true;
    snprintf(s->id, sizeof s->id, "chatcmpl-test");
    brigade_error err;
    CHECK(brigade_chat_parser_new(st->tmpl, &s->g.chat, &s->parser, &err) == BRIGADE_OK, "parser: %s",
          err.message);
    srv_buf_adds(&s->task->text, text);
    s->task->n_prompt = 10;
    s->task->n_cached = 4;
    s->task->n_tokens_out = 7;
    s->task->finish = why;
    s->task->done = true;
    return s;
}

static void check_whole(srv_state *st)
{
    srv_stream *s = finished(st, ANSWER, SRV_FINISH_STOP, true);
    srv_response r = {0};
    complete_response(s, &r);
    stream_free_parts(s);
    json_t *j = json_loadb(r.body.data, r.body.len, 0, NULL);
    CHECK(r.status == 200 && j, "whole answer: %u %s", r.status, r.body.data);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *m = json_object_get(c, "message");
    json_t *call = json_array_get(json_object_get(m, "tool_calls"), 0);
    json_t *fn = json_object_get(call, "function");
    CHECK(!strcmp(json_string_value(json_object_get(c, "finish_reason")), "tool_calls"),
          "finish_reason: %s", r.body.data);
    CHECK(!strcmp(json_string_value(json_object_get(m, "reasoning_content")), "Let me look."),
          "reasoning_content: %s", r.body.data);
    CHECK(!strcmp(json_string_value(json_object_get(m, "content")), "Checking."), "content: %s",
          r.body.data);
    CHECK(!strcmp(json_string_value(json_object_get(fn, "name")), "get_weather"), "name: %s",
          r.body.data);
    json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
    CHECK(args && !strcmp(json_string_value(json_object_get(args, "city")), "Paris") &&
              json_integer_value(json_object_get(args, "days")) == 3,
          "arguments: %s", r.body.data);
    CHECK(!strncmp(json_string_value(json_object_get(call, "id")), "call_", 5) &&
              !strcmp(json_string_value(json_object_get(call, "type")), "function"),
          "call id and type: %s", r.body.data);
    json_t *u = json_object_get(j, "usage");
    CHECK(json_integer_value(json_object_get(u, "prompt_tokens")) == 10 &&
              json_integer_value(json_object_get(u, "completion_tokens")) == 7 &&
              json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"),
                                                 "cached_tokens")) == 4,
          "usage: %s", r.body.data);
    json_t *tm = json_object_get(j, "timings");
    CHECK(json_integer_value(json_object_get(tm, "prompt_n")) == 6 &&
              json_integer_value(json_object_get(tm, "cache_n")) == 4 &&
              json_object_get(tm, "predicted_per_second"),
          "timings: %s", r.body.data);
    json_decref(args);
    json_decref(j);
    srv_buf_free(&r.body);
}

static void check_stream(srv_state *st)
{
    srv_stream *s = finished(st, ANSWER, SRV_FINISH_STOP, true);
    srv_buf out = {0};
    int calls = 0;
    while (srv_stream_next(s, &out, 10) && ++calls < 100)
        ;
    stream_free_parts(s);
    srv_buf reasoning = {0}, content = {0};
    const char *finish = NULL;
    json_t *tool = NULL;
    bool usage = false, done = false;
    for (char *line = strtok(out.data, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strcmp(line, "data: [DONE]")) {
            done = true;
            continue;
        }
        json_t *j = json_loads(line + 6, 0, NULL);
        CHECK(!strncmp(line, "data: ", 6) && j, "not an SSE JSON line: %s", line);
        if (!j)
            continue;
        usage |= json_object_get(j, "usage") != NULL;
        json_t *c = json_array_get(json_object_get(j, "choices"), 0);
        json_t *d = json_object_get(c, "delta");
        if (json_is_string(json_object_get(c, "finish_reason")))
            finish = strdup(json_string_value(json_object_get(c, "finish_reason")));
        json_t *v;
        if ((v = json_object_get(d, "reasoning_content")))
            srv_buf_adds(&reasoning, json_string_value(v));
        if ((v = json_object_get(d, "content")) && json_is_string(v))
            srv_buf_adds(&content, json_string_value(v));
        if ((v = json_object_get(d, "tool_calls")))
            tool = json_deep_copy(json_array_get(v, 0));
        json_decref(j);
    }
    CHECK(reasoning.data && !strcmp(reasoning.data, "Let me look."), "streamed reasoning: %s",
          reasoning.data);
    CHECK(content.data && !strcmp(content.data, "Checking."), "streamed content: %s", content.data);
    CHECK(tool && json_integer_value(json_object_get(tool, "index")) == 0 &&
              !strcmp(json_string_value(json_object_get(json_object_get(tool, "function"), "name")),
                      "get_weather"),
          "streamed tool call");
    CHECK(finish && !strcmp(finish, "tool_calls"), "streamed finish_reason %s", finish);
    CHECK(usage && done, "usage chunk and [DONE]");
    free((char *)finish);
    json_decref(tool);
    srv_buf_free(&reasoning);
    srv_buf_free(&content);
    srv_buf_free(&out);
}

static void check_errors(srv_state *st)
{
    srv_stream *s = finished(st, "", SRV_FINISH_SHUTDOWN, false);
    srv_response r = {0};
    complete_response(s, &r);
    stream_free_parts(s);
    CHECK(r.status == 503 && strstr(r.body.data, "\"error\""), "shutdown answer: %u %s", r.status,
          r.body.data);
    srv_buf_free(&r.body);
    /* length, without tools: plain content */
    s = finished(st, "just text", SRV_FINISH_LENGTH, false);
    r = (srv_response){0};
    complete_response(s, &r);
    stream_free_parts(s);
    CHECK(strstr(r.body.data, "\"finish_reason\":\"length\"") && strstr(r.body.data, "just text"),
          "length answer: %s", r.body.data);
    srv_buf_free(&r.body);
}

static void check_stop_strings(void)
{
    srv_task *t = srv_task_new();
    t->stop = calloc(2, sizeof *t->stop);
    t->stop[t->n_stop++] = strdup("END");
    t->stop[t->n_stop++] = strdup("<|x|>");
    CHECK(!emit(t, "abcE", 4), "no stop yet");
    CHECK(t->text.len == 3 && !strcmp(t->text.data, "abc"), "held back a possible start: %s",
          t->text.data);
    CHECK(!emit(t, "Nd", 2), "ENd is not END");
    CHECK(!strcmp(t->text.data, "abcENd"), "released: %s", t->text.data);
    CHECK(emit(t, "--<|", 4) == false && !strcmp(t->text.data, "abcENd--"), "partial: %s",
          t->text.data);
    CHECK(emit(t, "x|> after", 9), "stop string across pieces");
    CHECK(!strcmp(t->text.data, "abcENd--"), "text before the stop string only: %s", t->text.data);
    srv_task_unref(t);

    /* At the end, held text is released unless a stop string ended it. */
    srv_sched sched = {0};
    t = srv_task_new();
    t->stop = calloc(1, sizeof *t->stop);
    t->stop[t->n_stop++] = strdup("STOP");
    slot sl = {.task = t};
    t->refs = 2; /* the scheduler's reference, released by task_finish */
    CHECK(!emit(t, "tail ST", 7) && !strcmp(t->text.data, "tail "), "held: %s", t->text.data);
    sched.active = 1;
    task_finish(&sched, &sl, SRV_FINISH_LENGTH, NULL);
    CHECK(t->done && !strcmp(t->text.data, "tail ST"), "released at the end: %s", t->text.data);
    srv_task_unref(t);
}

static void check_utf8(void)
{
    json_t *j = jstr("a\xff" "b\xc3\xa9\xe2\x82", 7);
    CHECK(j && !strcmp(json_string_value(j), "a\xef\xbf\xbd" "b\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"),
          "invalid bytes replaced: %s", j ? json_string_value(j) : "(null)");
    json_decref(j);
}

static bool json_ok(const char *text)
{
    srv_json j = {0};
    return srv_json_feed(&j, text, strlen(text));
}

static bool json_whole(const char *text)
{
    srv_json j = {0};
    return srv_json_feed(&j, text, strlen(text)) && srv_json_done(&j);
}

static void check_json_mode(void)
{
    const char *prefixes[] = {"", " {", "{\"a", "{\"a\": [1, -2.5e+3, tr", "{\"k\":\"\\u00e9\\n",
                              "{\"a\":{\"b\":[{}, []]}", "{\"a\": -", "{\"a\": 1.", "{\"x\": nul"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        CHECK(json_ok(prefixes[i]) && !json_whole(prefixes[i]), "JSON prefix refused: %s", prefixes[i]);
    const char *wrong[] = {"[", "\"a\"", "{a", "{\"a\" 1", "{\"a\":01", "{\"a\":1,}", "{\"a\":tru}",
                           "{\"a\":\"\\x\"", "{\"a\":1}}", "{\"a\":1} x", "{\"a\":\"\n\"}", "{]"};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++)
        CHECK(!json_ok(wrong[i]), "not JSON accepted: %s", wrong[i]);
    const char *whole[] = {"{}", " {\"a\": [1, 2, {\"b\": null}], \"c\": false} ", "{\"n\":-0.5E-2}",
                           "{\"s\":\"\\\"q\\\"\"}"};
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++)
        CHECK(json_whole(whole[i]), "complete object not recognized: %s", whole[i]);
    /* piece by piece, as tokens come */
    srv_json j = {0};
    const char *pieces[] = {"{\"", "val", "ue\":", " 12", "3", "}"};
    bool ok = true;
    for (size_t i = 0; i < 6; i++)
        ok &= srv_json_feed(&j, pieces[i], strlen(pieces[i]));
    CHECK(ok && srv_json_done(&j), "object fed in pieces");
}

int main(void)
{
    srv_state st = {.alias = "test-model"};
    st.tmpl = load_qwen35();
    if (st.tmpl) {
        check_whole(&st);
        check_stream(&st);
        check_errors(&st);
    }
    check_stop_strings();
    check_utf8();
    check_json_mode();
    brigade_chat_template_free(st.tmpl);
    return check_summary("test_serve_api");
}
