/* brigade run -m MODEL -p PROMPT: one answer, streamed. The chat template
 * is applied unless --raw; the answer's text goes to stdout, its reasoning
 * to stderr (dimmed on a terminal), timings to stderr at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "generate.h"

static void run_usage(FILE *out)
{
    fprintf(out, "usage: brigade run -m MODEL -p PROMPT [options]\n"
                 "  -p, --prompt TEXT         the prompt\n"
                 "  -f, --file FILE           read the prompt from a file\n"
                 "  --raw                     plain completion: no chat template\n");
    gen_flags_usage(out);
}

typedef struct run_output {
    brigade_chat_parser *parser; /* NULL in --raw mode */
    gen_view view;
} run_output;

static void on_text(void *user, const char *text, size_t len)
{
    run_output *o = user;
    if (!o->parser) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        return;
    }
    brigade_chat_delta d;
    if (brigade_chat_parser_feed(o->parser, text, len, &d, NULL) == BRIGADE_OK)
        gen_view_show(&o->view, &d);
}

int cmd_run(int argc, char **argv)
{
    gen_flags f;
    gen_flags_init(&f);
    const char *prompt = NULL, *prompt_file = NULL;
    bool raw = false;
    for (int i = 1; i < argc; i++) {
        int taken = gen_parse_flag(&f, argc, argv, &i);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            run_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--raw"))
            raw = true;
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc)
            prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && i + 1 < argc)
            prompt_file = argv[++i];
        else {
            fprintf(stderr, "run: unknown option or missing value: %s\n", a);
            run_usage(stderr);
            return 2;
        }
    }
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    char *file_text = NULL;
    if (prompt_file) {
        if (!(file_text = cli_read_file(prompt_file, &prompt_len, NULL))) {
            fprintf(stderr, "run: cannot read %s\n", prompt_file);
            return 1;
        }
        prompt = file_text;
    }
    if (!f.model_path || !prompt) {
        run_usage(stderr);
        free(file_text);
        return 2;
    }

    gen_engine e;
    if (!gen_engine_open(&e, &f)) {
        free(file_text);
        return 1;
    }
    int rc = 1;
    brigade_error err = {0};
    brigade_chat_prompt rendered = {0};
    run_output out = {.view = {.reasoning_out = stderr, .dim = isatty(STDERR_FILENO),
                               .open_mark = "", .close_mark = "\n"}};
    brigade_chat_options copts = {.add_generation_prompt = true, .disable_thinking = f.no_think};
    const char *text = prompt;
    size_t text_len = prompt_len;
    if (!raw) {
        char *user_text = strndup(prompt, prompt_len);
        brigade_chat_message msgs[2];
        size_t n_msgs = 0;
        if (f.system)
            msgs[n_msgs++] = (brigade_chat_message){.role = "system", .content = f.system};
        msgs[n_msgs++] = (brigade_chat_message){.role = "user", .content = user_text};
        brigade_status st = brigade_chat_render(e.tmpl, msgs, n_msgs, &copts, &rendered, &err);
        free(user_text);
        if (st || brigade_chat_parser_new(e.tmpl, &copts, &out.parser, &err)) {
            fprintf(stderr, "run: %s\n", err.message);
            goto done;
        }
        text = rendered.text;
        text_len = rendered.len;
    }
    size_t n_tokens = 0;
    int32_t *tokens = gen_tokenize(&e, text, text_len, true, &n_tokens, &err);
    if (!tokens) {
        fprintf(stderr, "run: %s\n", err.message);
        goto done;
    }
    gen_stats stats;
    gen_stop stop = gen_run(&e, tokens, n_tokens, f.n_predict, on_text, &out, NULL, &stats, &err);
    free(tokens);
    if (out.parser) {
        brigade_chat_delta d;
        if (brigade_chat_parser_finish(out.parser, &d, NULL) == BRIGADE_OK)
            gen_view_show(&out.view, &d);
    }
    gen_view_end(&out.view);
    if (stop == GEN_STOP_ERROR) {
        fprintf(stderr, "run: %s\n", err.message);
        goto done;
    }
    gen_print_stats(&e, &stats);
    fprintf(stderr, "stopped:    %s\n", gen_stop_name(stop));
    rc = 0;
done:
    brigade_chat_parser_free(out.parser);
    brigade_chat_prompt_free(&rendered);
    gen_engine_close(&e);
    free(file_text);
    return rc;
}
