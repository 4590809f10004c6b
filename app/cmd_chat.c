/* brigade chat -m MODEL: an interactive conversation. /exit, /clear and
 * /regen; Ctrl+C stops the current answer, a second one exits. Reasoning is
 * shown dimmed (or marked, when not on a terminal), apart from the answer. */
#define _GNU_SOURCE /* strndup, getline */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "generate.h"

static volatile sig_atomic_t interrupts;

static void on_sigint(int sig)
{
    (void)sig;
    if (++interrupts >= 2) {
        static const char msg[] = "\n";
        if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) {
            /* nothing to do: exiting anyway */
        }
        _exit(130);
    }
}

/* The conversation, each string owned. */
typedef struct history {
    brigade_chat_message *msgs;
    size_t n, cap;
} history;

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void free_message(brigade_chat_message *m)
{
    free((char *)m->role);
    free((char *)m->content);
    free((char *)m->reasoning_content);
    for (size_t i = 0; i < m->n_tool_calls; i++) {
        free((char *)m->tool_calls[i].id);
        free((char *)m->tool_calls[i].name);
        free((char *)m->tool_calls[i].arguments);
    }
    free((void *)m->tool_calls);
    memset(m, 0, sizeof *m);
}

static bool push(history *h, const brigade_chat_message *src)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        brigade_chat_message *grown = realloc(h->msgs, cap * sizeof *grown);
        if (!grown)
            return false;
        h->msgs = grown;
        h->cap = cap;
    }
    brigade_chat_message *m = &h->msgs[h->n];
    memset(m, 0, sizeof *m);
    m->role = dup_or_null(src->role);
    m->content = dup_or_null(src->content);
    m->reasoning_content = dup_or_null(src->reasoning_content);
    if (src->n_tool_calls) {
        brigade_chat_tool_call *calls = calloc(src->n_tool_calls, sizeof *calls);
        if (!calls)
            return false;
        for (size_t i = 0; i < src->n_tool_calls; i++) {
            calls[i].id = dup_or_null(src->tool_calls[i].id);
            calls[i].name = dup_or_null(src->tool_calls[i].name);
            calls[i].arguments = dup_or_null(src->tool_calls[i].arguments);
        }
        m->tool_calls = calls;
        m->n_tool_calls = src->n_tool_calls;
    }
    h->n++;
    return true;
}

static void pop_to(history *h, size_t n)
{
    while (h->n > n)
        free_message(&h->msgs[--h->n]);
}

typedef struct chat_view {
    brigade_chat_parser *parser;
    gen_view view;
} chat_view;

static void on_text(void *user, const char *text, size_t len)
{
    chat_view *v = user;
    brigade_chat_delta d;
    if (brigade_chat_parser_feed(v->parser, text, len, &d, NULL) == BRIGADE_OK)
        gen_view_show(&v->view, &d);
}

/* Renders the history, generates the assistant's answer and appends it. */
static bool answer(gen_engine *e, const gen_flags *f, history *h)
{
    brigade_chat_options copts = {.add_generation_prompt = true, .disable_thinking = f->no_think};
    brigade_chat_prompt prompt = {0};
    brigade_error err = {0};
    chat_view view = {.view = {.reasoning_out = stdout, .dim = isatty(STDOUT_FILENO),
                               .open_mark = "[thinking] ", .close_mark = "\n[answer] "}};
    bool ok = false;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    if (brigade_chat_render(e->tmpl, h->msgs, h->n, &copts, &prompt, &err) ||
        brigade_chat_parser_new(e->tmpl, &copts, &view.parser, &err) ||
        !(tokens = gen_tokenize(e, prompt.text, prompt.len, true, &n_tokens, &err))) {
        fprintf(stderr, "error: %s\n", err.message);
        goto done;
    }
    interrupts = 0;
    gen_stats stats;
    gen_stop stop = gen_run(e, tokens, n_tokens, f->n_predict, on_text, &view, &interrupts,
                            &stats, &err);
    brigade_chat_delta d;
    if (brigade_chat_parser_finish(view.parser, &d, NULL) == BRIGADE_OK)
        gen_view_show(&view.view, &d);
    gen_view_end(&view.view);
    if (stop == GEN_STOP_ERROR) {
        fprintf(stderr, "error: %s\n", err.message);
        goto done;
    }
    if (stop == GEN_STOP_LENGTH)
        fprintf(stderr, "[the context is full: /clear to start over]\n");
    if (stop == GEN_STOP_INTERRUPT)
        fprintf(stderr, "[stopped]\n");
    if (f->verbose)
        gen_print_stats(e, &stats);
    ok = push(h, brigade_chat_parser_message(view.parser));
done:
    free(tokens);
    brigade_chat_parser_free(view.parser);
    brigade_chat_prompt_free(&prompt);
    return ok;
}

static void chat_usage(FILE *out)
{
    fprintf(out, "usage: brigade chat -m MODEL [options]\n");
    gen_flags_usage(out);
    fprintf(out, "in the chat: /exit, /clear (forget the conversation), /regen (answer again);\n"
                 "Ctrl+C stops an answer, a second Ctrl+C exits\n");
}

int cmd_chat(int argc, char **argv)
{
    gen_flags f;
    gen_flags_init(&f);
    for (int i = 1; i < argc; i++) {
        int taken = gen_parse_flag(&f, argc, argv, &i);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            chat_usage(stdout);
            return 0;
        }
        fprintf(stderr, "chat: unknown option or missing value: %s\n", argv[i]);
        chat_usage(stderr);
        return 2;
    }
    if (!f.model_path) {
        chat_usage(stderr);
        return 2;
    }
    gen_engine e;
    if (!gen_engine_open(&e, &f))
        return 1;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl+C at the prompt ends the read */
    sigaction(SIGINT, &sa, NULL);

    history h = {0};
    size_t base = 0;
    if (f.system) {
        push(&h, &(brigade_chat_message){.role = "system", .content = f.system});
        base = 1;
    }
    bool tty = isatty(STDIN_FILENO);
    fprintf(stderr, "brigade chat: %s (%s template). /exit, /clear, /regen; Ctrl+C stops an "
                    "answer.\n",
            brigade_model_arch(e.model),
            brigade_chat_family_name(brigade_chat_template_family(e.tmpl)));
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        interrupts = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0)
            break; /* end of input, or Ctrl+C at the prompt */
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (n == 0)
            continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
            break;
        if (!strcmp(line, "/clear")) {
            pop_to(&h, base);
            e.n_evaluated = 0;
            brigade_session_reset(e.session);
            fprintf(stderr, "[conversation cleared]\n");
            continue;
        }
        if (!strcmp(line, "/regen")) {
            if (h.n > base && !strcmp(h.msgs[h.n - 1].role, "assistant")) {
                pop_to(&h, h.n - 1);
                answer(&e, &f, &h);
            } else {
                fprintf(stderr, "[nothing to regenerate]\n");
            }
            continue;
        }
        if (line[0] == '/') {
            fprintf(stderr, "[unknown command %s: /exit, /clear, /regen]\n", line);
            continue;
        }
        if (!push(&h, &(brigade_chat_message){.role = "user", .content = line}))
            break;
        if (!answer(&e, &f, &h))
            pop_to(&h, h.n - 1); /* forget the question the model could not answer */
    }
    free(line);
    pop_to(&h, 0);
    free(h.msgs);
    gen_engine_close(&e);
    return 0;
}
