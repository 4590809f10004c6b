/* The chat renderers: each one follows its family's official template
 * statement by statement (the template's jinja is quoted in the comments),
 * so the output matches jinja2's byte for byte. Where the template raises,
 * the renderer fails with the template's own message.
 *
 * Template semantics reproduced here, per jinja2 + transformers:
 *   `x|trim` is Python's str.strip() (Unicode whitespace, bg_py_strip);
 *   `x|tojson` is json.dumps(x, ensure_ascii=False) (bg_json_dump_py);
 *   `x|string` is str(x): True / False / None for JSON literals (bg_py_str);
 *   an absent content is "" (qwen3.5's render_content; qwen3 would fail on
 *   it, brigade renders "" as llama.cpp does). */
#include <string.h>

#include "chat.h"
#include "error.h"

static bool role_is(const brigade_chat_message *m, const char *role)
{
    return strcmp(m->role, role) == 0;
}

static void put(bg_render_ctx *c, const char *s) { bg_buf_puts(&c->out, s); }
static void put_str(bg_render_ctx *c, bg_str s) { bg_buf_str(&c->out, s); }

static brigade_status raise_error(bg_render_ctx *c, const char *family, const char *msg)
{
    return bg_fail(c->err, BRIGADE_ERR_ARG, "%s chat template: %s", family, msg);
}

static void put_tools(bg_render_ctx *c)
{
    /* {%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %} */
    for (size_t i = 0; i < json_array_size(c->tools); i++) {
        put(c, "\n");
        bg_json_dump_py(&c->out, json_array_get(c->tools, i));
    }
}

/* ------------------------------------------------------------------ ChatML */

brigade_status bg_render_chatml(bg_render_ctx *c)
{
    if (c->tools)
        return bg_fail(c->err, BRIGADE_ERR_UNSUPPORTED,
                       "chat template: tools need a recognized template (Qwen3 or Qwen3.5); "
                       "the ChatML fallback cannot describe them");
    for (size_t i = 0; i < c->n; i++) {
        const brigade_chat_message *m = &c->msgs[i];
        put(c, "<|im_start|>");
        put(c, m->role);
        put(c, "\n");
        put_str(c, bg_str_of(m->content));
        put(c, "<|im_end|>\n");
    }
    if (c->add_generation_prompt)
        put(c, "<|im_start|>assistant\n");
    return BRIGADE_OK;
}

/* ------------------------------------------------------------------- Qwen3 */

static const char qwen3_tools_head[] =
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>";

static const char qwen3_tools_tail[] =
    "\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n";

/* {%- if tool_call.arguments is string %}{{- tool_call.arguments }}
 * {%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
 * JSON text is the value it holds; other text is a string. */
static void qwen3_arguments(bg_render_ctx *c, const char *args)
{
    if (!args) {
        put(c, "{}");
        return;
    }
    json_t *v = bg_json_parse(args, strlen(args));
    if (!v)
        put(c, args);
    else if (json_is_string(v))
        bg_buf_put(&c->out, json_string_value(v), json_string_length(v));
    else
        bg_json_dump_py(&c->out, v);
    json_decref(v);
}

static void qwen3_assistant(bg_render_ctx *c, size_t i, size_t last_query_index)
{
    const brigade_chat_message *m = &c->msgs[i];
    bg_str content = bg_str_of(m->content);
    bg_str reasoning = {"", 0};
    if (m->reasoning_content) {
        reasoning = bg_str_of(m->reasoning_content);
    } else if (bg_str_find(content, "</think>") != (size_t)-1) {
        /* content = message.content.split('</think>')[-1].lstrip('\n');
         * reasoning = message.content.split('</think>')[0].rstrip('\n')
         *             .split('<think>')[-1].lstrip('\n') */
        bg_str whole = content;
        content = bg_lstrip_char(bg_split_last(whole, "</think>"), '\n');
        reasoning = bg_rstrip_char(bg_split_first(whole, "</think>"), '\n');
        reasoning = bg_lstrip_char(bg_split_last(reasoning, "<think>"), '\n');
    }
    bool last = i + 1 == c->n;
    if (i > last_query_index && (last || reasoning.n)) {
        put(c, "<|im_start|>assistant\n<think>\n");
        put_str(c, bg_rstrip_char(bg_lstrip_char(reasoning, '\n'), '\n'));
        put(c, "\n</think>\n\n");
        put_str(c, bg_lstrip_char(content, '\n'));
    } else {
        put(c, "<|im_start|>assistant\n");
        put_str(c, content);
    }
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const brigade_chat_tool_call *tc = &m->tool_calls[k];
        if ((k == 0 && content.n) || k > 0)
            put(c, "\n");
        put(c, "<tool_call>\n{\"name\": \"");
        put(c, tc->name ? tc->name : ""); /* an undefined name prints as "" */
        put(c, "\", \"arguments\": ");
        qwen3_arguments(c, tc->arguments);
        put(c, "}\n</tool_call>");
    }
    put(c, "<|im_end|>\n");
}

brigade_status bg_render_qwen3(bg_render_ctx *c)
{
    const brigade_chat_message *msgs = c->msgs;
    size_t n = c->n;
    if (n == 0) /* messages[0].role on an empty list */
        return raise_error(c, "qwen3", "list object has no element 0 (no messages)");

    bool system_first = role_is(&msgs[0], "system");
    if (c->tools) {
        put(c, "<|im_start|>system\n");
        if (system_first) {
            put(c, msgs[0].content ? msgs[0].content : "");
            put(c, "\n\n");
        }
        put(c, qwen3_tools_head);
        put_tools(c);
        put(c, qwen3_tools_tail);
    } else if (system_first) {
        put(c, "<|im_start|>system\n");
        put(c, msgs[0].content ? msgs[0].content : "");
        put(c, "<|im_end|>\n");
    }

    /* The last user message that is not a wrapped tool response. */
    size_t last_query_index = n - 1;
    for (size_t i = n; i-- > 0;) {
        bg_str content = bg_str_of(msgs[i].content);
        if (role_is(&msgs[i], "user") && !(bg_str_starts(content, "<tool_response>") &&
                                           bg_str_ends(content, "</tool_response>"))) {
            last_query_index = i;
            break;
        }
    }

    for (size_t i = 0; i < n; i++) {
        const brigade_chat_message *m = &msgs[i];
        if (role_is(m, "user") || (role_is(m, "system") && i > 0)) {
            put(c, "<|im_start|>");
            put(c, m->role);
            put(c, "\n");
            put(c, m->content ? m->content : "");
            put(c, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            qwen3_assistant(c, i, last_query_index);
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool"))
                put(c, "<|im_start|>user");
            put(c, "\n<tool_response>\n");
            put(c, m->content ? m->content : "");
            put(c, "\n</tool_response>");
            if (i + 1 == n || !role_is(&msgs[i + 1], "tool"))
                put(c, "<|im_end|>\n");
        }
        /* other roles: the template writes nothing */
    }
    if (c->add_generation_prompt) {
        put(c, "<|im_start|>assistant\n");
        if (c->disable_thinking)
            put(c, "<think>\n\n</think>\n\n");
    }
    return BRIGADE_OK;
}

/* ----------------------------------------------------------------- Qwen3.5 */

static const char qwen35_tools_head[] =
    "# Tools\n\nYou have access to the following functions:\n\n<tools>";

static const char qwen35_tools_tail[] =
    "\n"
    "</tools>"
    "\n"
    "\n"
    "If you choose to call a function ONLY reply in the following format with NO suffix:\n"
    "\n"
    "<tool_call>\n"
    "<function=example_function_name>\n"
    "<parameter=example_parameter_1>\n"
    "value_1\n"
    "</parameter>\n"
    "<parameter=example_parameter_2>\n"
    "This is the value for the second parameter\n"
    "that can span\n"
    "multiple lines\n"
    "</parameter>\n"
    "</function>\n"
    "</tool_call>\n"
    "\n"
    "<IMPORTANT>\n"
    "Reminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> "
    "block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE "
    "the function call, but NOT after\n"
    "- If there is no function call available, answer the question like normal with your "
    "current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>";

/* render_content(message.content, ...)|trim */
static bg_str qwen35_content(const brigade_chat_message *m)
{
    return bg_py_strip(bg_str_of(m->content));
}

/* {%- for args_name, args_value in tool_call.arguments|items %} ... */
static brigade_status qwen35_parameters(bg_render_ctx *c, const char *args, size_t msg,
                                        size_t call)
{
    json_t *v = bg_json_parse(args, strlen(args));
    if (!json_is_object(v)) {
        json_decref(v);
        return bg_fail(c->err, BRIGADE_ERR_ARG,
                       "qwen3.5 chat template: message %zu, tool call %zu: arguments must be a "
                       "JSON object (Can only get item pairs from a mapping.)",
                       msg, call);
    }
    for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
        const json_t *value = json_object_iter_value(it);
        put(c, "<parameter=");
        bg_buf_put(&c->out, json_object_iter_key(it), json_object_iter_key_len(it));
        put(c, ">\n");
        /* mapping or non-string sequence: tojson; anything else: |string */
        if (json_is_object(value) || json_is_array(value))
            bg_json_dump_py(&c->out, value);
        else
            bg_py_str(&c->out, value);
        put(c, "\n</parameter>\n");
    }
    json_decref(v);
    return BRIGADE_OK;
}

static brigade_status qwen35_assistant(bg_render_ctx *c, size_t i, size_t last_query_index)
{
    const brigade_chat_message *m = &c->msgs[i];
    bg_str content = qwen35_content(m);
    bg_str reasoning = {"", 0};
    if (m->reasoning_content) {
        reasoning = bg_str_of(m->reasoning_content);
    } else if (bg_str_find(content, "</think>") != (size_t)-1) {
        bg_str whole = content;
        reasoning = bg_rstrip_char(bg_split_first(whole, "</think>"), '\n');
        reasoning = bg_lstrip_char(bg_split_last(reasoning, "<think>"), '\n');
        content = bg_lstrip_char(bg_split_last(whole, "</think>"), '\n');
    }
    reasoning = bg_py_strip(reasoning);
    if (i > last_query_index) {
        put(c, "<|im_start|>assistant\n<think>\n");
        put_str(c, reasoning);
        put(c, "\n</think>\n\n");
        put_str(c, content);
    } else {
        put(c, "<|im_start|>assistant\n");
        put_str(c, content);
    }
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const brigade_chat_tool_call *tc = &m->tool_calls[k];
        if (!tc->name) /* '<function=' + undefined */
            return bg_fail(c->err, BRIGADE_ERR_ARG,
                           "qwen3.5 chat template: message %zu, tool call %zu has no name", i, k);
        if (k == 0)
            put(c, bg_py_strip(content).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
        else
            put(c, "\n<tool_call>\n<function=");
        put(c, tc->name);
        put(c, ">\n");
        if (tc->arguments) {
            brigade_status st = qwen35_parameters(c, tc->arguments, i, k);
            if (st != BRIGADE_OK)
                return st;
        }
        put(c, "</function>\n</tool_call>");
    }
    put(c, "<|im_end|>\n");
    return BRIGADE_OK;
}

brigade_status bg_render_qwen35(bg_render_ctx *c)
{
    const brigade_chat_message *msgs = c->msgs;
    size_t n = c->n;
    if (n == 0)
        return raise_error(c, "qwen3.5", "No messages provided.");

    bool system_first = role_is(&msgs[0], "system");
    if (c->tools) {
        put(c, "<|im_start|>system\n");
        put(c, qwen35_tools_head);
        put_tools(c);
        put(c, qwen35_tools_tail);
        if (system_first) {
            bg_str content = qwen35_content(&msgs[0]);
            if (content.n) {
                put(c, "\n\n");
                put_str(c, content);
            }
        }
        put(c, "<|im_end|>\n");
    } else if (system_first) {
        put(c, "<|im_start|>system\n");
        put_str(c, qwen35_content(&msgs[0]));
        put(c, "<|im_end|>\n");
    }

    /* The last user message that is not a wrapped tool response; there
     * must be one. */
    size_t last_query_index = n - 1;
    bool found = false;
    for (size_t i = n; i-- > 0 && !found;) {
        bg_str content = qwen35_content(&msgs[i]);
        if (role_is(&msgs[i], "user") && !(bg_str_starts(content, "<tool_response>") &&
                                           bg_str_ends(content, "</tool_response>"))) {
            last_query_index = i;
            found = true;
        }
    }
    if (!found)
        return raise_error(c, "qwen3.5", "No user query found in messages.");

    for (size_t i = 0; i < n; i++) {
        const brigade_chat_message *m = &msgs[i];
        bg_str content = qwen35_content(m);
        if (role_is(m, "system")) {
            if (i > 0)
                return raise_error(c, "qwen3.5", "System message must be at the beginning.");
        } else if (role_is(m, "user")) {
            put(c, "<|im_start|>user\n");
            put_str(c, content);
            put(c, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            brigade_status st = qwen35_assistant(c, i, last_query_index);
            if (st != BRIGADE_OK)
                return st;
        } else if (role_is(m, "tool")) {
            /* loop.previtem is undefined for the first message */
            if (i > 0 && !role_is(&msgs[i - 1], "tool"))
                put(c, "<|im_start|>user");
            put(c, "\n<tool_response>\n");
            put_str(c, content);
            put(c, "\n</tool_response>");
            if (i + 1 == n || !role_is(&msgs[i + 1], "tool"))
                put(c, "<|im_end|>\n");
        } else {
            return raise_error(c, "qwen3.5", "Unexpected message role.");
        }
    }
    if (c->add_generation_prompt) {
        put(c, "<|im_start|>assistant\n");
        put(c, c->disable_thinking ? "<think>\n\n</think>\n\n" : "<think>\n");
    }
    return BRIGADE_OK;
}
