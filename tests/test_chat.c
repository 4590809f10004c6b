/* Chat templates and output parsing.
 *
 * Rendering: every conversation of tests/data/chat/conversations.json is
 * rendered by brigade and by Python jinja2 running the real template files
 * ($ORACLE_SRC_DIR/models/templates/, via tests/chat_reference.py); the
 * outputs must be identical byte for byte, and where the template raises,
 * brigade must fail with the template's message. Without python3 + jinja2
 * this test fails: it never skips.
 *
 * Recognition: the official templates are known exactly; edited ones are
 * recognized by their markers with a warning; others (and a missing one)
 * fall back to ChatML with a warning, also from a GGUF file.
 *
 * Parsing: each model output is parsed whole, then in every chunk size from
 * 1 to 7 bytes and in random splits; deltas must add up to the expected
 * reasoning, content and tool calls every time, never split a UTF-8
 * character, and the result rendered again must give back the prompt plus
 * the output. Malformed markup must come out as content. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "gguf_writer.h"

/* Overridable by the first argument, to check other conversation sets. */
static const char *g_conversations = "tests/data/chat/conversations.json";
static char g_templates[1024];

static char *read_all(FILE *fp, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 4096 + 1 > cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) {
                free(buf);
                return NULL;
            }
            buf = p;
        }
        size_t got = fread(buf + n, 1, 4096, fp);
        n += got;
        if (got == 0)
            break;
    }
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

static char *read_path(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    char *s = read_all(fp, len);
    fclose(fp);
    return s;
}

static brigade_chat_template *load_template(const char *file)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", g_templates, file);
    size_t len = 0;
    char *text = read_path(path, &len);
    CHECK(text != NULL, "cannot read template %s", path);
    if (!text)
        return NULL;
    brigade_chat_template *t = NULL;
    brigade_error err = {0};
    brigade_status st = brigade_chat_template_from_string(text, len, &t, &err);
    CHECK(st == BRIGADE_OK, "%s: %s", file, err.message);
    free(text);
    return t;
}

/* Where two byte strings first differ, with some context, on stderr. */
static void show_difference(const char *what, const char *got, size_t glen, const char *want,
                            size_t wlen)
{
    size_t i = 0;
    while (i < glen && i < wlen && got[i] == want[i])
        i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s: first difference at byte %zu (got %zu bytes, want %zu)\n", what, i,
            glen, wlen);
    fprintf(stderr, "  got:  \"");
    for (size_t k = from; k < glen && k < i + 40; k++)
        fprintf(stderr, got[k] == '\n' ? "\\n" : "%c", got[k]);
    fprintf(stderr, "\"\n  want: \"");
    for (size_t k = from; k < wlen && k < i + 40; k++)
        fprintf(stderr, want[k] == '\n' ? "\\n" : "%c", want[k]);
    fprintf(stderr, "\"\n");
}

/* ------------------------------------------------ conversations -> C API */

typedef struct conv_c {
    brigade_chat_message *msgs;
    size_t n;
    brigade_chat_tool_call *calls; /* all messages' calls */
    char **owned;                  /* strings to free */
    size_t n_owned;
    char *tools;
    brigade_chat_options opts;
} conv_c;

static const char *own(conv_c *c, char *s)
{
    c->owned = realloc(c->owned, (c->n_owned + 1) * sizeof *c->owned);
    c->owned[c->n_owned++] = s;
    return s;
}

static const char *str_or_null(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void conv_build(conv_c *c, const json_t *conv, const json_t *toolsets)
{
    memset(c, 0, sizeof *c);
    const json_t *msgs = json_object_get(conv, "messages");
    c->n = json_array_size(msgs);
    c->msgs = calloc(c->n + 1, sizeof *c->msgs);
    size_t total_calls = 0;
    for (size_t i = 0; i < c->n; i++)
        total_calls += json_array_size(json_object_get(json_array_get(msgs, i), "tool_calls"));
    c->calls = calloc(total_calls + 1, sizeof *c->calls);
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        const json_t *m = json_array_get(msgs, i);
        brigade_chat_message *bm = &c->msgs[i];
        bm->role = str_or_null(m, "role");
        bm->content = str_or_null(m, "content");
        bm->reasoning_content = str_or_null(m, "reasoning_content");
        bm->tool_call_id = str_or_null(m, "tool_call_id");
        bm->name = str_or_null(m, "name");
        const json_t *tcs = json_object_get(m, "tool_calls");
        if (json_array_size(tcs)) {
            bm->tool_calls = c->calls + k;
            bm->n_tool_calls = json_array_size(tcs);
        }
        for (size_t j = 0; j < json_array_size(tcs); j++, k++) {
            const json_t *tc = json_array_get(tcs, j);
            const json_t *fn = json_object_get(tc, "function");
            if (!fn)
                fn = tc;
            c->calls[k].id = str_or_null(tc, "id");
            c->calls[k].name = str_or_null(fn, "name");
            const json_t *args = json_object_get(fn, "arguments");
            if (json_is_string(args))
                c->calls[k].arguments = json_string_value(args);
            else if (args)
                c->calls[k].arguments = own(c, json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY));
        }
    }
    const json_t *tools = json_object_get(conv, "tools");
    if (json_is_string(tools))
        tools = json_object_get(toolsets, json_string_value(tools));
    if (tools)
        c->opts.tools = own(c, json_dumps(tools, JSON_COMPACT));
    c->opts.add_generation_prompt = json_is_true(json_object_get(conv, "add_generation_prompt"));
    c->opts.disable_thinking = json_is_false(json_object_get(conv, "enable_thinking"));
}

static void conv_free(conv_c *c)
{
    for (size_t i = 0; i < c->n_owned; i++)
        free(c->owned[i]);
    free(c->owned);
    free(c->msgs);
    free(c->calls);
}

/* ------------------------------------------------ rendering vs jinja2 */

static void test_reference(void)
{
    brigade_chat_template *qwen3 = load_template("Qwen-Qwen3-0.6B.jinja");
    brigade_chat_template *qwen35 = load_template("Qwen3.5-4B.jinja");
    if (!qwen3 || !qwen35)
        goto out_templates;
    CHECK(brigade_chat_template_family(qwen3) == BRIGADE_CHAT_QWEN3, "Qwen3 template: family %s",
          brigade_chat_family_name(brigade_chat_template_family(qwen3)));
    CHECK(brigade_chat_template_family(qwen35) == BRIGADE_CHAT_QWEN35,
          "Qwen3.5 template: family %s",
          brigade_chat_family_name(brigade_chat_template_family(qwen35)));
    CHECK(!brigade_chat_template_warning(qwen3) && !brigade_chat_template_warning(qwen35),
          "official templates must be known exactly (warning: %s)",
          brigade_chat_template_warning(qwen3) ? brigade_chat_template_warning(qwen3)
                                               : brigade_chat_template_warning(qwen35));

    char cmd[2400];
    const char *python = getenv("PYTHON");
    snprintf(cmd, sizeof cmd, "%s tests/chat_reference.py '%s' '%s'",
             python && *python ? python : "python3", g_templates,
             g_conversations);
    FILE *pp = popen(cmd, "r");
    CHECK(pp != NULL, "cannot run: %s", cmd);
    if (!pp)
        goto out_templates;
    size_t len = 0;
    char *text = read_all(pp, &len);
    int status = pclose(pp);
    bool ran = text && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECK(ran,
          "the jinja2 reference failed (exit status %d): `%s` needs python3 with jinja2 >= 3.1 "
          "(pip install jinja2); this test does not skip",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1, cmd);
    json_error_t jerr;
    json_t *expected = ran ? json_loadb(text, len, JSON_ALLOW_NUL, &jerr) : NULL;
    free(text);
    size_t conv_len = 0;
    char *conv_text = read_path(g_conversations, &conv_len);
    json_t *data = conv_text ? json_loadb(conv_text, conv_len, JSON_ALLOW_NUL, &jerr) : NULL;
    free(conv_text);
    CHECK(!ran || expected, "reference output is not JSON");
    CHECK(data != NULL, "cannot read %s", g_conversations);
    if (!expected || !data) {
        json_decref(expected);
        json_decref(data);
        goto out_templates;
    }

    const json_t *convs = json_object_get(data, "conversations");
    const json_t *toolsets = json_object_get(data, "toolsets");
    const json_t *results = json_object_get(expected, "results");
    size_t compared = 0, mismatches = 0, errors_matched = 0;
    for (size_t r = 0; r < json_array_size(results); r++) {
        const json_t *res = json_array_get(results, r);
        const char *name = str_or_null(res, "name");
        const char *family = str_or_null(res, "family");
        const json_t *conv = NULL;
        for (size_t i = 0; i < json_array_size(convs) && !conv; i++)
            if (strcmp(str_or_null(json_array_get(convs, i), "name"), name) == 0)
                conv = json_array_get(convs, i);
        CHECK(conv != NULL, "reference result for unknown conversation %s", name);
        if (!conv)
            continue;
        conv_c c;
        conv_build(&c, conv, toolsets);
        const brigade_chat_template *t = strcmp(family, "qwen3") == 0 ? qwen3 : qwen35;
        brigade_chat_prompt prompt;
        brigade_error err = {0};
        brigade_status st = brigade_chat_render(t, c.msgs, c.n, &c.opts, &prompt, &err);
        const json_t *want = json_object_get(res, "output");
        compared++;
        if (want) {
            size_t wlen = json_string_length(want);
            bool same = st == BRIGADE_OK && prompt.len == wlen &&
                        memcmp(prompt.text, json_string_value(want), wlen) == 0;
            CHECK(same, "%s [%s]: brigade differs from jinja2%s%s", name, family,
                  st == BRIGADE_OK ? "" : ": brigade failed: ",
                  st == BRIGADE_OK ? "" : err.message);
            if (!same) {
                mismatches++;
                if (st == BRIGADE_OK)
                    show_difference(name, prompt.text, prompt.len, json_string_value(want),
                                    wlen);
            }
            CHECK(st != BRIGADE_OK || prompt.warning == NULL, "%s: unexpected warning", name);
        } else {
            const char *want_err = str_or_null(res, "error");
            const char *type = str_or_null(res, "error_type");
            bool failed = st != BRIGADE_OK;
            /* raise_exception() messages must come through word for word */
            bool same_words = strcmp(type, "TemplateError") != 0 || strstr(err.message, want_err);
            CHECK(failed && same_words, "%s [%s]: jinja2 fails (%s: %s), brigade %s%s", name,
                  family, type, want_err, failed ? "fails with: " : "renders",
                  failed ? err.message : "");
            if (failed && same_words)
                errors_matched++;
            else
                mismatches++;
        }
        brigade_chat_prompt_free(&prompt);
        conv_free(&c);
    }
    printf("rendered %zu conversation/template pairs from %zu conversations against jinja2 %s: "
           "%zu mismatches; %zu pairs are template errors that brigade reproduces\n",
           compared, json_array_size(convs), str_or_null(expected, "jinja2"), mismatches,
           errors_matched);
    CHECK(json_array_size(convs) >= 30 && compared >= 60, "too few conversations compared");
    json_decref(expected);
    json_decref(data);
out_templates:
    brigade_chat_template_free(qwen3);
    brigade_chat_template_free(qwen35);
}

/* ------------------------------------------------------- recognition */

static void expect_family(const char *what, const char *text, size_t len,
                          brigade_chat_family family, bool warning)
{
    brigade_chat_template *t = NULL;
    brigade_error err = {0};
    CHECK(brigade_chat_template_from_string(text, len, &t, &err) == BRIGADE_OK, "%s: %s", what,
          err.message);
    if (!t)
        return;
    CHECK(brigade_chat_template_family(t) == family, "%s: family %s, expected %s", what,
          brigade_chat_family_name(brigade_chat_template_family(t)),
          brigade_chat_family_name(family));
    CHECK((brigade_chat_template_warning(t) != NULL) == warning, "%s: warning %s", what,
          brigade_chat_template_warning(t) ? brigade_chat_template_warning(t) : "(none)");
    brigade_chat_template_free(t);
}

static void expect_file_family(const char *file, brigade_chat_family family, bool warning,
                               const char *edit)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", g_templates, file);
    size_t len = 0;
    char *text = read_path(path, &len);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text)
        return;
    if (edit) { /* a local edit at the start: same markers, other hash */
        size_t elen = strlen(edit);
        char *t2 = malloc(len + elen + 1);
        memcpy(t2, edit, elen);
        memcpy(t2 + elen, text, len + 1);
        free(text);
        text = t2;
        len += elen;
    }
    expect_family(file, text, len, family, warning);
    free(text);
}

static bool write_gguf(const char *path, const char *tmpl, bool as_number)
{
    brigade_error err = {0};
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    bool ok = w && bg_gguf_set_str(w, "general.architecture", "qwen35moe", &err) == BRIGADE_OK;
    if (ok && tmpl)
        ok = bg_gguf_set_str(w, "tokenizer.chat_template", tmpl, &err) == BRIGADE_OK;
    if (ok && as_number)
        ok = bg_gguf_set_u32(w, "tokenizer.chat_template", 7, &err) == BRIGADE_OK;
    ok = ok && bg_gguf_writer_begin(w, path, &err) == BRIGADE_OK &&
         bg_gguf_writer_finish(w, &err) == BRIGADE_OK;
    CHECK(ok, "writing %s: %s", path, err.message);
    bg_gguf_writer_free(w);
    return ok;
}

static void test_recognition(void)
{
    expect_file_family("Qwen3.5-4B.jinja", BRIGADE_CHAT_QWEN35, false, NULL);
    expect_file_family("Qwen-Qwen3-0.6B.jinja", BRIGADE_CHAT_QWEN3, false, NULL);
    expect_file_family("Qwen3.5-4B.jinja", BRIGADE_CHAT_QWEN35, true, "{#- edited #}");
    expect_file_family("Qwen-Qwen3-0.6B.jinja", BRIGADE_CHAT_QWEN3, true, "{#- edited #}");
    /* Qwen3-Coder has XML tool calls but no thinking; Qwen2.5 and QwQ lack
     * enable_thinking: none of them is rendered by a Qwen renderer. */
    expect_file_family("Qwen3-Coder.jinja", BRIGADE_CHAT_CHATML, true, NULL);
    expect_file_family("Qwen-Qwen2.5-7B-Instruct.jinja", BRIGADE_CHAT_CHATML, true, NULL);
    expect_file_family("Qwen-QwQ-32B.jinja", BRIGADE_CHAT_CHATML, true, NULL);
    expect_family("no template", NULL, 0, BRIGADE_CHAT_CHATML, true);
    expect_family("empty template", "", 0, BRIGADE_CHAT_CHATML, true);
    expect_family("llama-ish", "{{ bos_token }}{% for m in messages %}[INST]{% endfor %}", 52,
                  BRIGADE_CHAT_CHATML, true);

    /* Trailing whitespace does not change the hash. */
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", g_templates, "Qwen3.5-4B.jinja");
    size_t len = 0;
    char *text = read_path(path, &len);
    if (text) {
        char *t2 = malloc(len + 3);
        memcpy(t2, text, len);
        memcpy(t2 + len, "\n\n", 3);
        expect_family("Qwen3.5 + newlines", t2, len + 2, BRIGADE_CHAT_QWEN35, false);
        free(t2);
    }

    /* From GGUF files: with the template, without one, with a wrong type. */
    char dir[] = "/tmp/brigade_test_chat_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    char gpath[128];
    snprintf(gpath, sizeof gpath, "%s/t.gguf", dir);
    for (int variant = 0; variant < 3 && text; variant++) {
        if (!write_gguf(gpath, variant == 0 ? text : NULL, variant == 2))
            continue;
        brigade_gguf *g = NULL;
        brigade_error err = {0};
        brigade_status st = brigade_gguf_open(gpath, NULL, &g, &err);
        if (variant == 2) { /* the reader checks the type of this known key */
            CHECK(st == BRIGADE_ERR_FORMAT && strstr(err.message, "tokenizer.chat_template"),
                  "GGUF with a numeric template must be refused: %s", err.message);
            brigade_gguf_close(g);
            unlink(gpath);
            continue;
        }
        CHECK(st == BRIGADE_OK, "open: %s", err.message);
        brigade_chat_template *t = NULL;
        st = brigade_chat_template_from_gguf(g, &t, &err);
        if (variant == 0) {
            CHECK(st == BRIGADE_OK && brigade_chat_template_family(t) == BRIGADE_CHAT_QWEN35 &&
                      !brigade_chat_template_warning(t),
                  "GGUF with the Qwen3.5 template: %s", err.message);
        } else {
            CHECK(st == BRIGADE_OK && brigade_chat_template_family(t) == BRIGADE_CHAT_CHATML &&
                      brigade_chat_template_warning(t) &&
                      strstr(brigade_chat_template_warning(t), "tokenizer.chat_template"),
                  "GGUF without a template: ChatML with a warning");
        }
        brigade_chat_template_free(t);
        brigade_gguf_close(g);
        unlink(gpath);
    }
    rmdir(dir);
    free(text);
}

/* ------------------------------------------------------- render API */

static void test_render_api(void)
{
    brigade_chat_template *chatml = NULL;
    brigade_error err = {0};
    brigade_chat_template_from_string(NULL, 0, &chatml, &err);
    brigade_chat_tool_call call = {.name = "f", .arguments = "{\"a\": 1}"};
    brigade_chat_message msgs[] = {
        {.role = "system", .content = "S"},
        {.role = "user", .content = "Hi <b>"},
        {.role = "assistant", .content = "Yo", .reasoning_content = "dropped"},
        {.role = "tool", .content = "r"},
    };
    brigade_chat_options opts = {.add_generation_prompt = true};
    brigade_chat_prompt p;
    brigade_status st = brigade_chat_render(chatml, msgs, 4, &opts, &p, &err);
    const char *want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi <b><|im_end|>\n"
                       "<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>tool\nr<|im_end|>\n"
                       "<|im_start|>assistant\n";
    CHECK(st == BRIGADE_OK && strcmp(p.text, want) == 0 && p.len == strlen(want),
          "ChatML rendering: %s", st == BRIGADE_OK ? p.text : err.message);
    CHECK(st == BRIGADE_OK && p.warning && strstr(p.warning, "ChatML"),
          "ChatML rendering carries the template's warning");
    brigade_chat_prompt_free(&p);
    CHECK(p.text == NULL, "prompt_free clears the prompt");

    opts.tools = "[{\"name\": \"f\"}]";
    st = brigade_chat_render(chatml, msgs, 2, &opts, &p, &err);
    CHECK(st == BRIGADE_ERR_UNSUPPORTED && strstr(err.message, "tools"),
          "ChatML with tools must fail: %s", err.message);
    opts.tools = "[]";
    st = brigade_chat_render(chatml, msgs, 2, &opts, &p, &err);
    CHECK(st == BRIGADE_OK, "ChatML with an empty tool list renders: %s", err.message);
    brigade_chat_prompt_free(&p);
    st = brigade_chat_render(chatml, NULL, 0, NULL, &p, &err);
    CHECK(st == BRIGADE_OK && p.text && p.len == 0, "ChatML of nothing is an empty string");
    brigade_chat_prompt_free(&p);
    brigade_chat_template_free(chatml);

    brigade_chat_template *q35 = load_template("Qwen3.5-4B.jinja");
    brigade_chat_template *q3 = load_template("Qwen-Qwen3-0.6B.jinja");
    if (!q35 || !q3)
        goto out;
    opts.tools = "{\"not\": \"an array\"}";
    CHECK(brigade_chat_render(q35, msgs + 1, 1, &opts, &p, &err) == BRIGADE_ERR_ARG,
          "tools that are not an array are refused");
    opts.tools = "[{";
    CHECK(brigade_chat_render(q35, msgs + 1, 1, &opts, &p, &err) == BRIGADE_ERR_ARG,
          "tools that are not JSON are refused");
    opts.tools = NULL;
    brigade_chat_message bad = {.role = NULL, .content = "x"};
    CHECK(brigade_chat_render(q35, &bad, 1, &opts, &p, &err) == BRIGADE_ERR_ARG,
          "a message without a role is refused");
    CHECK(brigade_chat_render(NULL, msgs, 1, &opts, &p, &err) == BRIGADE_ERR_ARG,
          "no template is refused");

    /* A call without a name: qwen3 prints "" (jinja2 prints undefined as
     * nothing), qwen3.5 fails (it concatenates undefined). */
    brigade_chat_tool_call noname = {.name = NULL, .arguments = "{}"};
    brigade_chat_message with_call[] = {
        {.role = "user", .content = "q"},
        {.role = "assistant", .content = "", .tool_calls = &noname, .n_tool_calls = 1},
    };
    st = brigade_chat_render(q3, with_call, 2, NULL, &p, &err);
    CHECK(st == BRIGADE_OK && strstr(p.text, "{\"name\": \"\", \"arguments\": {}}"),
          "qwen3 call without a name");
    brigade_chat_prompt_free(&p);
    st = brigade_chat_render(q35, with_call, 2, NULL, &p, &err);
    CHECK(st == BRIGADE_ERR_ARG && strstr(err.message, "no name"), "qwen3.5 call without a name");
    /* NULL arguments: qwen3 "{}", qwen3.5 no parameters. */
    with_call[1].tool_calls = &call;
    call.arguments = NULL;
    st = brigade_chat_render(q3, with_call, 2, NULL, &p, &err);
    CHECK(st == BRIGADE_OK && strstr(p.text, "{\"name\": \"f\", \"arguments\": {}}"),
          "qwen3 call without arguments");
    brigade_chat_prompt_free(&p);
    st = brigade_chat_render(q35, with_call, 2, NULL, &p, &err);
    CHECK(st == BRIGADE_OK && strstr(p.text, "<function=f>\n</function>"),
          "qwen3.5 call without arguments");
    brigade_chat_prompt_free(&p);
    /* tojson's float layout and |string's Python spellings, directly. */
    call.arguments = "{\"x\": [1e-5, 1e16, 1e15, 0.5, -0.0, 12345.678, 1e300, 2.5e-300, 0.0001],"
                     " \"t\": true, \"n\": null, \"f\": 1E2, \"s\": \"\\u0001\\\"\"}";
    st = brigade_chat_render(q35, with_call, 2, NULL, &p, &err);
    CHECK(st == BRIGADE_OK &&
              strstr(p.text, "<parameter=x>\n[1e-05, 1e+16, 1000000000000000.0, 0.5, -0.0, "
                             "12345.678, 1e+300, 2.5e-300, 0.0001]\n</parameter>\n"
                             "<parameter=t>\nTrue\n</parameter>\n<parameter=n>\nNone\n"
                             "</parameter>\n<parameter=f>\n100.0\n</parameter>\n"
                             "<parameter=s>\n\001\"\n</parameter>\n"),
          "qwen3.5 parameter spellings: %s", st == BRIGADE_OK ? p.text : err.message);
    brigade_chat_prompt_free(&p);
    st = brigade_chat_render(q3, with_call, 2, NULL, &p, &err);
    CHECK(st == BRIGADE_OK &&
              strstr(p.text, "\"arguments\": {\"x\": [1e-05, 1e+16, 1000000000000000.0, 0.5, "
                             "-0.0, 12345.678, 1e+300, 2.5e-300, 0.0001], \"t\": true, \"n\": "
                             "null, \"f\": 100.0, \"s\": \"\\u0001\\\"\"}}"),
          "qwen3 tojson spellings: %s", st == BRIGADE_OK ? p.text : err.message);
    brigade_chat_prompt_free(&p);
out:
    brigade_chat_template_free(q35);
    brigade_chat_template_free(q3);
}

/* ------------------------------------------------------- output parsing */

typedef struct growing {
    char *p;
    size_t n;
} growing;

static void grow(growing *g, const char *s, size_t n)
{
    g->p = realloc(g->p, g->n + n + 1);
    memcpy(g->p + g->n, s, n);
    g->n += n;
    g->p[g->n] = '\0';
}

typedef struct parse_case {
    const char *name;
    const char *tmpl; /* template file */
    bool gen, no_think;
    const char *tools;
    const char *output;
    const char *reasoning; /* NULL: no reasoning block */
    const char *content;
    int n_calls;
    const char *calls[8][2]; /* name, arguments */
} parse_case;

static const char *const TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"location\": {\"type\": \"string\"}, \"unit\": "
    "{\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"set_alarm\", \"parameters\": {\"type\": "
    "\"object\", \"properties\": {\"hour\": {\"type\": \"integer\"}, \"label\": {\"type\": "
    "\"string\"}, \"enabled\": {\"type\": \"boolean\"}, \"days\": {\"type\": \"array\"}, "
    "\"meta\": {\"type\": \"object\"}, \"ratio\": {\"type\": \"number\"}, \"opt\": {\"type\": "
    "[\"string\", \"null\"]}, \"code\": {\"type\": \"string\"}, \"num\": {\"anyOf\": [{\"type\": "
    "\"integer\"}, {\"type\": \"null\"}]}, \"free\": {}}}}}]";

#define Q35 "Qwen3.5-4B.jinja"
#define Q3 "Qwen-Qwen3-0.6B.jinja"
#define W_PARIS                                                                                \
    "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis, France\n</parameter>\n" \
    "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>"
#define W_PARIS_ARGS "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}"

static const parse_case parse_cases[] = {
    {"q35 reasoning then content", Q35, true, false, NULL,
     "Let me think.\nStep 2.\n</think>\n\nThe answer is 4.", "Let me think.\nStep 2.",
     "The answer is 4.", 0, {{0}}},
    {"q35 thinking off", Q35, true, true, NULL, "The answer is 4.", NULL, "The answer is 4.", 0,
     {{0}}},
    {"q35 reasoning, content, call", Q35, true, false, TOOLS,
     "I need weather.\n</think>\n\nLet me check.\n\n" W_PARIS, "I need weather.",
     "Let me check.", 1, {{"get_weather", W_PARIS_ARGS}}},
    {"q35 call ends reasoning", Q35, true, false, TOOLS,
     "thinking...\n<tool_call>\n<function=get_weather>\n<parameter=location>\nRome\n</parameter>"
     "\n</function>\n</tool_call>",
     "thinking...", "", 1, {{"get_weather", "{\"location\":\"Rome\"}"}}},
    {"q35 typed parameters, two calls", Q35, true, true, TOOLS,
     "<tool_call>\n<function=set_alarm>\n<parameter=hour>\n7\n</parameter>\n<parameter=label>\n"
     "Wake up\nnow\n</parameter>\n<parameter=enabled>\nTrue\n</parameter>\n<parameter=days>\n"
     "[1, 2]\n</parameter>\n<parameter=meta>\n{\"a\": {\"b\": [null]}}\n</parameter>\n"
     "<parameter=ratio>\n0.5\n</parameter>\n<parameter=opt>\nNone\n</parameter>\n"
     "<parameter=num>\n12\n</parameter>\n<parameter=free>\n{\"x\":1}\n</parameter>\n"
     "<parameter=undeclared>\nfalse\n</parameter>\n</function>\n</tool_call>\n"
     "<tool_call>\n<function=set_alarm>\n<parameter=hour>\nseven\n</parameter>\n"
     "<parameter=label>\n123\n</parameter>\n<parameter=opt>\n\"quoted\"\n</parameter>\n"
     "<parameter=free>\nplain text\n</parameter>\n<parameter=ratio>\n3\n</parameter>\n"
     "</function>\n</tool_call>",
     NULL, "", 2,
     {{"set_alarm", "{\"hour\":7,\"label\":\"Wake up\\nnow\",\"enabled\":true,\"days\":[1, 2],"
                    "\"meta\":{\"a\": {\"b\": [null]}},\"ratio\":0.5,\"opt\":null,\"num\":12,"
                    "\"free\":{\"x\":1},\"undeclared\":false}"},
      {"set_alarm", "{\"hour\":\"seven\",\"label\":\"123\",\"opt\":\"\\\"quoted\\\"\","
                    "\"free\":\"plain text\",\"ratio\":3}"}}},
    {"q35 multi-line value keeps inner newlines", Q35, true, true, TOOLS,
     "<tool_call>\n<function=set_alarm>\n<parameter=code>\n\nprint(1)\n\tx = \"<b>\" \\ y\n\n"
     "</parameter>\n</function>\n</tool_call>",
     NULL, "", 1, {{"set_alarm", "{\"code\":\"\\nprint(1)\\n\\tx = \\\"<b>\\\" \\\\ y\\n\"}"}}},
    {"q35 missing </parameter> is content", Q35, true, true, TOOLS,
     "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</tool_call>",
     NULL,
     "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</tool_call>", 0,
     {{0}}},
    {"q35 malformed call keeps the whitespace before it", Q35, true, true, TOOLS,
     "Sure.\n\n<tool_call>\n<function=>\n</tool_call>\n\nThen.", NULL,
     "Sure.\n\n<tool_call>\n<function=>\n</tool_call>\n\nThen.", 0, {{0}}},
    {"q35 no <function= is content", Q35, true, true, TOOLS,
     "<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>", NULL,
     "<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>", 0, {{0}}},
    {"q35 unclosed but complete call", Q35, true, true, TOOLS,
     "<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n"
     "</function>\n",
     NULL, "", 1, {{"get_weather", "{\"location\":\"Oslo\"}"}}},
    {"q35 truncated call is content", Q35, true, true, TOOLS,
     "Checking <tool_call>\n<function=get_weather>\n<parameter=loc", NULL,
     "Checking <tool_call>\n<function=get_weather>\n<parameter=loc", 0, {{0}}},
    {"q35 missing </function> closed by </tool_call>", Q35, true, true, TOOLS,
     "<tool_call>\n<function=get_weather>\n<parameter=location>\nLima\n</parameter>\n"
     "</tool_call>",
     NULL, "", 1, {{"get_weather", "{\"location\":\"Lima\"}"}}},
    {"q35 without tools calls stay text", Q35, true, false, NULL,
     "I could call <tool_call> here\n</think>\n\n" W_PARIS, "I could call <tool_call> here",
     W_PARIS, 0, {{0}}},
    {"q35 text after the call", Q35, true, true, TOOLS,
     "Before.\n\n" W_PARIS "\n\nAfter.", NULL, "Before.\n\nAfter.", 1,
     {{"get_weather", W_PARIS_ARGS}}},
    {"q35 truncated reasoning", Q35, true, false, NULL, "still thinking about it\n",
     "still thinking about it", "", 0, {{0}}},
    {"q35 model repeats <think>", Q35, true, false, NULL, "\n<think>\nfoo\n</think>\n\nbar",
     "foo", "bar", 0, {{0}}},
    {"q35 unicode", Q35, true, false, NULL,
     "思考中…\n</think>\n\n答案是 4 🚀 — done\u00a0ok", "思考中…",
     "答案是 4 🚀 — done\u00a0ok", 0, {{0}}},
    {"q35 stray </think> in content", Q35, true, false, NULL, "a\n</think>\nb</think>c", "a",
     "b</think>c", 0, {{0}}},
    {"q35 partial tags at the end", Q35, true, true, TOOLS, "x < y and <tool_ca", NULL,
     "x < y and <tool_ca", 0, {{0}}},
    {"q35 empty output", Q35, true, false, NULL, "", "", "", 0, {{0}}},
    {"q35 continuation without generation prompt", Q35, false, false, NULL, "plain text", NULL,
     "plain text", 0, {{0}}},
    {"q3 reasoning then content", Q3, true, false, NULL,
     "<think>\nReason.\n\nMore.\n</think>\n\nAnswer.", "Reason.\n\nMore.", "Answer.", 0, {{0}}},
    {"q3 no think block", Q3, true, false, NULL, "Answer directly.", NULL, "Answer directly.", 0,
     {{0}}},
    {"q3 thinking off", Q3, true, true, NULL, "\n\nAnswer.\n", NULL, "Answer.", 0, {{0}}},
    {"q3 leading whitespace before <think>", Q3, true, false, NULL, " \n<think>x</think>y", "x",
     "y", 0, {{0}}},
    {"q3 call keeps the model's JSON text", Q3, true, false, TOOLS,
     "<think>\nNeed tool.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"location\": \"Paris\", \"n\": 1.50, \"s\": \"a}b\\\"\"}}\n</tool_call>",
     "Need tool.", "", 1,
     {{"get_weather", "{\"location\": \"Paris\", \"n\": 1.50, \"s\": \"a}b\\\"\"}"}}},
    {"q3 two calls after content", Q3, true, true, TOOLS,
     "Checking both.\n<tool_call>\n{\"arguments\": {\"location\": \"A\"}, \"name\": "
     "\"get_weather\"}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{}}\n</tool_call>",
     NULL, "Checking both.", 2, {{"get_weather", "{\"location\": \"A\"}"}, {"get_weather", "{}"}}},
    {"q3 arguments as a string", Q3, true, true, TOOLS,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"location\\\":\\\"Oslo\\\"}\"}"
     "\n</tool_call>",
     NULL, "", 1, {{"get_weather", "{\"location\":\"Oslo\"}"}}},
    {"q3 arguments missing", Q3, true, true, TOOLS,
     "<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>", NULL, "", 1,
     {{"get_weather", "{}"}}},
    {"q3 malformed JSON is content", Q3, true, true, TOOLS,
     "Hmm <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": }\n</tool_call> ok",
     NULL, "Hmm <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": }\n"
     "</tool_call> ok", 0, {{0}}},
    {"q3 call without name is content", Q3, true, true, TOOLS,
     "<tool_call>\n{\"arguments\": {}}\n</tool_call>", NULL,
     "<tool_call>\n{\"arguments\": {}}\n</tool_call>", 0, {{0}}},
    {"q3 <tool_call> inside reasoning stays reasoning", Q3, true, false, TOOLS,
     "<think>maybe <tool_call> later</think>done", "maybe <tool_call> later", "done", 0, {{0}}},
    {"q3 partial <thi at the end", Q3, true, false, NULL, "<thi", NULL, "<thi", 0, {{0}}},
    {"chatml passes everything through", NULL, true, false, NULL,
     "  <think>x</think>\n<tool_call>{}</tool_call>\n", NULL,
     "  <think>x</think>\n<tool_call>{}</tool_call>\n", 0, {{0}}},
};

typedef struct parse_result {
    growing reasoning, content; /* from deltas */
    int n_calls;
    char *calls[8][2];
    bool utf8_ok;
    bool ok;
    brigade_chat_message msg; /* copied fields below */
    char *msg_content, *msg_reasoning;
} parse_result;

static bool utf8_complete(const char *s, size_t n)
{
    /* true if s does not end inside a multi-byte character */
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xc0) == 0x80)
            continue;
        size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need <= k;
    }
    return true;
}

static void take_delta(parse_result *r, const brigade_chat_delta *d)
{
    grow(&r->reasoning, d->reasoning, d->reasoning_len);
    grow(&r->content, d->content, d->content_len);
    if ((d->reasoning_len && !utf8_complete(d->reasoning, d->reasoning_len)) ||
        (d->content_len && !utf8_complete(d->content, d->content_len)))
        r->utf8_ok = false;
    for (size_t i = 0; i < d->n_tool_calls && r->n_calls < 8; i++, r->n_calls++) {
        r->calls[r->n_calls][0] = strdup(d->tool_calls[i].name);
        r->calls[r->n_calls][1] = strdup(d->tool_calls[i].arguments);
    }
}

/* Parses output split at the given cut points. */
static void run_parser(const brigade_chat_template *t, const brigade_chat_options *opts,
                       const char *out, const size_t *cuts, size_t n_cuts, parse_result *r)
{
    memset(r, 0, sizeof *r);
    r->utf8_ok = true;
    grow(&r->reasoning, "", 0);
    grow(&r->content, "", 0);
    brigade_chat_parser *p = NULL;
    brigade_error err = {0};
    if (brigade_chat_parser_new(t, opts, &p, &err) != BRIGADE_OK) {
        fprintf(stderr, "parser_new: %s\n", err.message);
        return;
    }
    size_t len = strlen(out), prev = 0;
    brigade_chat_delta d;
    r->ok = true;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t cut = i < n_cuts ? cuts[i] : len;
        if (brigade_chat_parser_feed(p, out + prev, cut - prev, &d, &err) != BRIGADE_OK)
            r->ok = false;
        else
            take_delta(r, &d);
        prev = cut;
    }
    if (brigade_chat_parser_finish(p, &d, &err) != BRIGADE_OK)
        r->ok = false;
    else
        take_delta(r, &d);
    const brigade_chat_message *m = brigade_chat_parser_message(p);
    r->msg_content = strdup(m->content);
    r->msg_reasoning = m->reasoning_content ? strdup(m->reasoning_content) : NULL;
    r->msg.n_tool_calls = m->n_tool_calls;
    /* feeding after finish is refused */
    if (brigade_chat_parser_feed(p, "x", 1, NULL, &err) != BRIGADE_ERR_ARG)
        r->ok = false;
    brigade_chat_parser_free(p);
}

static void free_result(parse_result *r)
{
    free(r->reasoning.p);
    free(r->content.p);
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i][0]);
        free(r->calls[i][1]);
    }
    free(r->msg_content);
    free(r->msg_reasoning);
}

static bool check_result(const parse_case *c, const parse_result *r, const char *how)
{
    bool ok = r->ok && r->utf8_ok;
    ok = ok && strcmp(r->content.p, c->content) == 0 && strcmp(r->msg_content, c->content) == 0;
    ok = ok && strcmp(r->reasoning.p, c->reasoning ? c->reasoning : "") == 0;
    ok = ok && (c->reasoning ? r->msg_reasoning && strcmp(r->msg_reasoning, c->reasoning) == 0
                             : r->msg_reasoning == NULL);
    ok = ok && r->n_calls == c->n_calls && (int)r->msg.n_tool_calls == c->n_calls;
    for (int i = 0; ok && i < c->n_calls; i++)
        ok = strcmp(r->calls[i][0], c->calls[i][0]) == 0 &&
             strcmp(r->calls[i][1], c->calls[i][1]) == 0;
    CHECK(ok, "parse '%s' (%s): reasoning [%s] content [%s] calls %d%s%s%s%s", c->name, how,
          r->reasoning.p, r->content.p, r->n_calls, r->n_calls ? " first: " : "",
          r->n_calls ? r->calls[0][1] : "", r->utf8_ok ? "" : " (split UTF-8)",
          r->ok ? "" : " (call failed)");
    return ok;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Renders the conversation with the parsed message appended: it must equal
 * the prompt followed by the output and the end of the turn. */
static void check_round_trip(const brigade_chat_template *t, const brigade_chat_options *opts,
                             const char *output)
{
    brigade_chat_message user = {.role = "user", .content = "Question?"};
    brigade_chat_prompt prompt, again;
    brigade_error err = {0};
    if (brigade_chat_render(t, &user, 1, opts, &prompt, &err) != BRIGADE_OK) {
        CHECK(0, "round trip render: %s", err.message);
        return;
    }
    brigade_chat_parser *p = NULL;
    brigade_chat_parser_new(t, opts, &p, &err);
    brigade_chat_parser_feed(p, output, strlen(output), NULL, &err);
    brigade_chat_parser_finish(p, NULL, &err);
    brigade_chat_message conv[2] = {user, *brigade_chat_parser_message(p)};
    brigade_chat_options o2 = *opts;
    o2.add_generation_prompt = false;
    brigade_status st = brigade_chat_render(t, conv, 2, &o2, &again, &err);
    growing want = {0};
    grow(&want, prompt.text, prompt.len);
    grow(&want, output, strlen(output));
    grow(&want, "<|im_end|>\n", 11);
    bool same = st == BRIGADE_OK && again.len == want.n && memcmp(again.text, want.p, want.n) == 0;
    CHECK(same, "round trip of a parsed message: rendering it again differs");
    if (!same && st == BRIGADE_OK)
        show_difference("round trip", again.text, again.len, want.p, want.n);
    free(want.p);
    brigade_chat_prompt_free(&prompt);
    if (st == BRIGADE_OK)
        brigade_chat_prompt_free(&again);
    brigade_chat_parser_free(p);
}

static void test_parser(void)
{
    brigade_chat_template *q35 = load_template(Q35), *q3 = load_template(Q3), *chatml = NULL;
    brigade_error err = {0};
    brigade_chat_template_from_string(NULL, 0, &chatml, &err);
    if (!q35 || !q3)
        goto out;
    size_t n_runs = 0, n_cases = sizeof parse_cases / sizeof *parse_cases;
    for (size_t ci = 0; ci < n_cases; ci++) {
        const parse_case *c = &parse_cases[ci];
        const brigade_chat_template *t =
            !c->tmpl ? chatml : strcmp(c->tmpl, Q35) == 0 ? q35 : q3;
        brigade_chat_options opts = {
            .add_generation_prompt = c->gen, .disable_thinking = c->no_think, .tools = c->tools};
        size_t len = strlen(c->output);
        size_t *cuts = malloc((len + 1) * sizeof *cuts);
        parse_result r;

        run_parser(t, &opts, c->output, NULL, 0, &r);
        bool ok = check_result(c, &r, "whole");
        free_result(&r);
        n_runs++;
        for (size_t step = 1; step <= 7 && ok; step++) {
            size_t n = 0;
            for (size_t at = step; at < len; at += step)
                cuts[n++] = at;
            run_parser(t, &opts, c->output, cuts, n, &r);
            char how[32];
            snprintf(how, sizeof how, "chunks of %zu", step);
            ok = check_result(c, &r, how);
            free_result(&r);
            n_runs++;
        }
        for (int trial = 0; trial < 40 && ok && len > 1; trial++) {
            size_t n = 1 + rnd() % (len < 12 ? len : 12);
            for (size_t i = 0; i < n; i++)
                cuts[i] = rnd() % (len + 1);
            qsort(cuts, n, sizeof *cuts, cmp_size);
            run_parser(t, &opts, c->output, cuts, n, &r);
            ok = check_result(c, &r, "random split");
            free_result(&r);
            n_runs++;
        }
        free(cuts);
    }
    printf("parsed %zu outputs %zu ways (whole, chunks of 1..7 bytes, random splits)\n", n_cases,
           n_runs);

    /* Random tag soup: whatever the chunking, the same result as whole. */
    static const char *const frags[] = {
        "<think>", "</think>", "<tool_call>", "</tool_call>", "<function=get_weather>",
        "<function=set_alarm>", "<parameter=location>", "<parameter=hour>", "</parameter>",
        "</function>", "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"x\"}}",
        "{\"name\": 1}", "\n", "\n\n", " ", "\t", "text", "7", "True", "<", "</", "<tool",
        "\xc3\xa9", "\xf0\x9f\x9a\x80", "\xe2\x80", W_PARIS, W_PARIS,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"n\": 1.0}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"n\": 1.0}}\n</tool_call>"};
    size_t n_frags = sizeof frags / sizeof *frags, soup_runs = 0, soup_bad = 0, soup_calls = 0;
    size_t soup_reasoning = 0;
    for (int trial = 0; trial < 400; trial++) {
        char out[512] = "";
        size_t len = 0;
        for (int k = 0, n = 1 + (int)(rnd() % 24); k < n; k++) {
            const char *f = frags[rnd() % n_frags];
            if (len + strlen(f) >= sizeof out)
                break;
            memcpy(out + len, f, strlen(f) + 1);
            len += strlen(f);
        }
        const brigade_chat_template *t = trial % 2 ? q35 : q3;
        brigade_chat_options opts = {.add_generation_prompt = true,
                                     .disable_thinking = trial % 3 == 0,
                                     .tools = trial % 5 ? TOOLS : NULL};
        parse_result whole;
        run_parser(t, &opts, out, NULL, 0, &whole);
        soup_calls += whole.n_calls > 0;
        soup_reasoning += whole.reasoning.n > 0;
        parse_case expect = {.name = "soup", .content = whole.content.p,
                             .reasoning = whole.msg_reasoning, .n_calls = whole.n_calls};
        for (int i = 0; i < whole.n_calls && i < 8; i++) {
            expect.calls[i][0] = whole.calls[i][0];
            expect.calls[i][1] = whole.calls[i][1];
        }
        CHECK(strcmp(whole.reasoning.p, whole.msg_reasoning ? whole.msg_reasoning : "") == 0,
              "soup: reasoning deltas add up to the message");
        size_t cuts[sizeof out];
        for (int way = 0; way < 6 && whole.ok && whole.n_calls < 8; way++) {
            size_t n = 0;
            if (way < 3) {
                for (size_t at = (size_t)way + 1; at < len; at += (size_t)way + 1)
                    cuts[n++] = at;
            } else {
                n = 1 + rnd() % 8;
                for (size_t i = 0; i < n; i++)
                    cuts[i] = rnd() % (len + 1);
                qsort(cuts, n, sizeof *cuts, cmp_size);
            }
            parse_result r;
            run_parser(t, &opts, out, cuts, n, &r);
            r.utf8_ok = true; /* the soup itself splits characters on purpose */
            if (!check_result(&expect, &r, "soup, split"))
                soup_bad++;
            free_result(&r);
            soup_runs++;
        }
        free_result(&whole);
    }
    printf("tag soup: 400 outputs (%zu with tool calls, %zu with reasoning), %zu chunked parses "
           "compared with whole ones, %zu differ\n",
           soup_calls, soup_reasoning, soup_runs, soup_bad);

    /* What the parser returns renders back to exactly what the model wrote. */
    brigade_chat_options on = {.add_generation_prompt = true, .tools = TOOLS};
    check_round_trip(q35, &on, "I need weather.\n</think>\n\nLet me check.\n\n" W_PARIS);
    check_round_trip(q35, &on, "Just thinking.\n</think>\n\nThe answer.");
    check_round_trip(q3, &on,
                     "<think>\nReason.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
                     "\"arguments\": {\"location\": \"Paris\"}}\n</tool_call>");
    brigade_chat_options off = {.add_generation_prompt = true, .disable_thinking = true};
    check_round_trip(q35, &off, "Plain answer.");

    /* Misuse. */
    brigade_chat_parser *p = NULL;
    brigade_chat_options bad = {.tools = "not json"};
    CHECK(brigade_chat_parser_new(q35, &bad, &p, &err) == BRIGADE_ERR_ARG && !p,
          "parser with invalid tools is refused");
    CHECK(brigade_chat_parser_new(NULL, NULL, &p, &err) == BRIGADE_ERR_ARG,
          "parser without template is refused");
    CHECK(brigade_chat_parser_new(q35, NULL, &p, &err) == BRIGADE_OK, "parser with NULL options");
    CHECK(brigade_chat_parser_feed(p, NULL, 3, NULL, &err) == BRIGADE_ERR_ARG,
          "feeding NULL text is refused");
    brigade_chat_parser_free(p);
out:
    brigade_chat_template_free(q35);
    brigade_chat_template_free(q3);
    brigade_chat_template_free(chatml);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_conversations = argv[1];
    const char *src = getenv("ORACLE_SRC_DIR");
    snprintf(g_templates, sizeof g_templates, "%s/models/templates",
             src && *src ? src : ".oracle/llama.cpp");
    test_reference();
    test_recognition();
    test_render_api();
    test_parser();
    return check_summary("test_chat");
}
