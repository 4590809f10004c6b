#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "generate.h"

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void gen_flags_init(gen_flags *f)
{
    memset(f, 0, sizeof *f);
    f->sampling = brigade_sampling_defaults();
    f->n_predict = -1;
}

void gen_flags_usage(FILE *out)
{
    fprintf(out,
            "  -m, --model FILE          GGUF model\n"
            "  -c, --ctx-size N          context size (default: min(model's, 4096))\n"
            "  -t, --threads N           threads (default: all cores)\n"
            "  -n, --n-predict N         tokens to generate (default -1: until the end)\n"
            "  -ctk, -ctv TYPE           KV cache types: f16 (default), f32, q8_0, q4_0\n"
            "  -ub, --ubatch-size N      prompt tokens evaluated together (default 512)\n"
            "  -b, --batch-size N        accepted for llama.cpp compatibility\n"
            "  --no-mmap                 read the weights into memory\n"
            CLI_GPU_USAGE
            "  --temp T                  temperature (default 0.8; 0: greedy)\n"
            "  --top-k K, --top-p P, --min-p P\n"
            "  --repeat-penalty R, --repeat-last-n N, --presence-penalty P,\n"
            "  --frequency-penalty F     sampling, llama.cpp's meanings and defaults\n"
            "  --seed S                  random seed (default 0)\n"
            "  -sys, --system TEXT       system prompt\n"
            "  --no-think                ask the model not to think (enable_thinking=false)\n"
            "  --verbose                 more details on stderr\n");
}

static bool parse_float(const char *flag, const char *text, float *out)
{
    char *end;
    float v = strtof(text, &end);
    if (end == text || *end) {
        fprintf(stderr, "%s: '%s' is not a number\n", flag, text);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_int(const char *flag, const char *text, int32_t *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < INT32_MIN || v > INT32_MAX) {
        fprintf(stderr, "%s: '%s' is not an integer\n", flag, text);
        return false;
    }
    *out = (int32_t)v;
    return true;
}

int gen_parse_flag(gen_flags *f, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    bool ok = true;
#define IS(x) (!strcmp(a, x))
    if (IS("--no-mmap")) {
        f->model.no_mmap = true;
        return 1;
    }
    if (IS("--no-think")) {
        f->no_think = true;
        return 1;
    }
    if (IS("--verbose")) {
        f->verbose = true;
        return 1;
    }
    if (!v)
        return 0;
    int gpu = cli_parse_gpu_flag(a, v, &f->session);
    if (gpu) {
        ++*i;
        return gpu;
    }
    if (IS("-m") || IS("--model"))
        f->model_path = v;
    else if (IS("-sys") || IS("--system") || IS("--system-prompt"))
        f->system = v;
    else if (IS("-c") || IS("--ctx-size"))
        ok = cli_parse_u32(a, v, &f->session.n_ctx);
    else if (IS("-t") || IS("--threads"))
        ok = cli_parse_u32(a, v, &f->session.n_threads);
    else if (IS("-ctk") || IS("--cache-type-k"))
        ok = cli_parse_cache_type(a, v, &f->session.cache_type_k);
    else if (IS("-ctv") || IS("--cache-type-v"))
        ok = cli_parse_cache_type(a, v, &f->session.cache_type_v);
    else if (IS("-ub") || IS("--ubatch-size"))
        ok = cli_parse_u32(a, v, &f->session.n_ubatch);
    else if (IS("-b") || IS("--batch-size")) {
        uint32_t logical; /* prompts go through in micro-batches of -ub */
        ok = cli_parse_u32(a, v, &logical);
    } else if (IS("-n") || IS("--n-predict"))
        ok = parse_int(a, v, &f->n_predict);
    else if (IS("--temp"))
        ok = parse_float(a, v, &f->sampling.temp);
    else if (IS("--top-k"))
        ok = parse_int(a, v, &f->sampling.top_k);
    else if (IS("--top-p"))
        ok = parse_float(a, v, &f->sampling.top_p);
    else if (IS("--min-p"))
        ok = parse_float(a, v, &f->sampling.min_p);
    else if (IS("--repeat-penalty"))
        ok = parse_float(a, v, &f->sampling.repeat_penalty);
    else if (IS("--repeat-last-n"))
        ok = parse_int(a, v, &f->sampling.penalty_last_n);
    else if (IS("--presence-penalty"))
        ok = parse_float(a, v, &f->sampling.presence_penalty);
    else if (IS("--frequency-penalty"))
        ok = parse_float(a, v, &f->sampling.frequency_penalty);
    else if (IS("--seed"))
        ok = cli_parse_u64(a, v, &f->sampling.seed);
    else
        return 0;
#undef IS
    ++*i;
    return ok ? 1 : -1;
}

static void load_progress(void *user, uint64_t done, uint64_t total)
{
    cli_progress_update(user, done, total);
}

bool gen_engine_open(gen_engine *e, const gen_flags *f)
{
    memset(e, 0, sizeof *e);
    brigade_error err = {0};
    double t0 = seconds();
    cli_progress progress = {.label = "loading", .last_decile = -1};
    brigade_model_options mo = f->model;
    mo.progress = load_progress;
    mo.progress_user = &progress;
    brigade_status st = brigade_model_load(f->model_path, &mo, &e->model, &err);
    cli_progress_end(&progress);
    const brigade_gguf *file = st ? NULL : brigade_model_file(e->model);
    if (!st)
        st = brigade_session_new(e->model, &f->session, &e->session, &err);
    if (!st)
        st = brigade_vocab_load(file, &e->vocab, &err);
    if (!st)
        st = brigade_chat_template_from_gguf(file, &e->tmpl, &err);
    if (!st)
        st = brigade_sampler_new(&f->sampling, (int32_t)brigade_model_n_vocab(e->model),
                                 &e->sampler, &err);
    uint32_t n_ctx = st ? 0 : brigade_session_n_ctx(e->session);
    if (!st && (!(e->logits = brigade_logits_alloc(e->session, 1)) ||
                !(e->evaluated = malloc((size_t)n_ctx * sizeof(int32_t)))))
        st = BRIGADE_ERR_NOMEM, snprintf(err.message, sizeof err.message, "out of memory");
    if (st) {
        fprintf(stderr, "error: %s\n", err.message);
        gen_engine_close(e);
        return false;
    }
    cli_print_gpu(e->session);
    const char *warning = brigade_chat_template_warning(e->tmpl);
    if (warning)
        fprintf(stderr, "warning: %s\n", warning);
    e->load_seconds = seconds() - t0;
    if (f->verbose)
        fprintf(stderr, "loaded %s: %s, %u layers, %u tokens, context %u, template %s\n",
                f->model_path, brigade_model_arch(e->model), brigade_model_n_layers(e->model),
                brigade_model_n_vocab(e->model), n_ctx,
                brigade_chat_family_name(brigade_chat_template_family(e->tmpl)));
    if (f->verbose) {
        /* the session allocates buffer by buffer from the plan: planned vs allocated */
        brigade_memory m;
        brigade_session_memory(e->session, &m);
        uint64_t planned = m.kv_bytes + m.recurrent_bytes + m.compute_bytes;
        fprintf(stderr,
                "memory: weights %.2f MiB (mapped from the file), KV cache %.2f MiB, recurrent "
                "state %.2f MiB, compute %.2f MiB: planned %.2f MiB, allocated %.2f MiB\n",
                m.weights_bytes / 1048576.0, m.kv_bytes / 1048576.0,
                m.recurrent_bytes / 1048576.0, m.compute_bytes / 1048576.0,
                planned / 1048576.0, m.allocated_bytes / 1048576.0);
    }
    return true;
}

void gen_engine_close(gen_engine *e)
{
    brigade_sampler_free(e->sampler);
    brigade_chat_template_free(e->tmpl);
    brigade_vocab_free(e->vocab);
    brigade_logits_free(e->logits);
    brigade_session_free(e->session);
    brigade_model_free(e->model);
    free(e->evaluated);
    memset(e, 0, sizeof *e);
}

int32_t *gen_tokenize(const gen_engine *e, const char *text, size_t len, bool add_special,
                      size_t *n, brigade_error *err)
{
    if (brigade_tokenize(e->vocab, text, len, add_special, true, NULL, 0, n, err))
        return NULL;
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    if (!ids) {
        snprintf(err->message, sizeof err->message, "out of memory for %zu tokens", *n);
        return NULL;
    }
    if (brigade_tokenize(e->vocab, text, len, add_special, true, ids, *n, n, err)) {
        free(ids);
        return NULL;
    }
    return ids;
}

/* Evaluates what the session does not hold yet; the recurrent state cannot
 * be rolled back, so anything but an extension starts over. */
static brigade_status eval_prompt(gen_engine *e, const int32_t *prompt, size_t n, size_t *reused,
                                  brigade_error *err)
{
    size_t have = e->n_evaluated;
    bool extends = have < n && memcmp(e->evaluated, prompt, have * sizeof *prompt) == 0;
    if (!extends) {
        brigade_session_reset(e->session);
        have = 0;
    }
    *reused = have;
    e->n_evaluated = have;
    brigade_status st =
        brigade_session_eval(e->session, prompt + have, n - have, false, e->logits, err);
    if (st) {
        brigade_session_reset(e->session);
        e->n_evaluated = 0;
        return st;
    }
    memcpy(e->evaluated + have, prompt + have, (n - have) * sizeof *prompt);
    e->n_evaluated = n;
    return BRIGADE_OK;
}

gen_stop gen_run(gen_engine *e, const int32_t *prompt, size_t n_prompt, int32_t n_predict,
                 gen_text_fn on_text, void *user, volatile sig_atomic_t *interrupt,
                 gen_stats *stats, brigade_error *err)
{
    memset(stats, 0, sizeof *stats);
    stats->n_prompt = n_prompt;
    uint32_t n_ctx = brigade_session_n_ctx(e->session);
    if (n_prompt == 0) {
        snprintf(err->message, sizeof err->message, "the prompt is empty");
        return GEN_STOP_ERROR;
    }
    if (n_prompt >= n_ctx) {
        snprintf(err->message, sizeof err->message,
                 "the prompt has %zu tokens, the context %u: raise -c or shorten the prompt",
                 n_prompt, n_ctx);
        return GEN_STOP_ERROR;
    }
    double t0 = seconds();
    if (eval_prompt(e, prompt, n_prompt, &stats->n_reused, err))
        return GEN_STOP_ERROR;
    stats->prompt_seconds = seconds() - t0;

    /* The penalty window fills with the latest prompt tokens; the random
     * stream goes on, so asking again gives another answer. */
    for (size_t i = 0; i < n_prompt; i++)
        brigade_sampler_accept(e->sampler, prompt[i], NULL);
    brigade_detok *detok = NULL;
    if (brigade_detok_create(e->vocab, false, &detok, err))
        return GEN_STOP_ERROR;
    gen_stop stop = GEN_STOP_LIMIT;
    double t1 = seconds();
    for (int32_t i = 0; n_predict < 0 || i < n_predict; i++) {
        if (interrupt && *interrupt) {
            stop = GEN_STOP_INTERRUPT;
            break;
        }
        int32_t tok;
        if (brigade_sampler_sample(e->sampler, e->logits, &tok, err)) {
            stop = GEN_STOP_ERROR;
            break;
        }
        if (brigade_vocab_is_eog(e->vocab, tok)) {
            stop = GEN_STOP_EOG;
            break;
        }
        brigade_sampler_accept(e->sampler, tok, NULL);
        const char *text;
        size_t len;
        if (brigade_detok_push(detok, tok, &text, &len, err)) {
            stop = GEN_STOP_ERROR;
            break;
        }
        if (len)
            on_text(user, text, len);
        stats->n_generated++;
        if (brigade_session_n_past(e->session) >= n_ctx) {
            stop = GEN_STOP_LENGTH;
            break;
        }
        if (brigade_session_eval(e->session, &tok, 1, false, e->logits, err)) {
            stop = GEN_STOP_ERROR;
            break;
        }
        e->evaluated[e->n_evaluated++] = tok;
    }
    const char *rest;
    size_t rest_len;
    brigade_detok_flush(detok, &rest, &rest_len);
    if (rest_len)
        on_text(user, rest, rest_len);
    brigade_detok_free(detok);
    stats->gen_seconds = seconds() - t1;
    return stop;
}

const char *gen_stop_name(gen_stop stop)
{
    switch (stop) {
    case GEN_STOP_EOG: return "stop";
    case GEN_STOP_LIMIT: return "limit";
    case GEN_STOP_LENGTH: return "length";
    case GEN_STOP_INTERRUPT: return "interrupted";
    case GEN_STOP_ERROR: return "error";
    }
    return "?";
}

void gen_print_stats(const gen_engine *e, const gen_stats *s)
{
    size_t evaluated = s->n_prompt - s->n_reused;
    fprintf(stderr, "\nload:       %8.2f s\n", e->load_seconds);
    fprintf(stderr, "prompt:     %8zu tokens (%zu reused) in %.2f s, %.2f tokens/s\n", s->n_prompt,
            s->n_reused, s->prompt_seconds,
            s->prompt_seconds > 0 ? (double)evaluated / s->prompt_seconds : 0.0);
    fprintf(stderr, "generation: %8zu tokens in %.2f s, %.2f tokens/s\n", s->n_generated,
            s->gen_seconds, s->gen_seconds > 0 ? (double)s->n_generated / s->gen_seconds : 0.0);
}

static void close_reasoning(gen_view *v)
{
    if (!v->in_reasoning)
        return;
    fputs(v->dim ? "\033[0m\n" : v->close_mark, v->reasoning_out);
    fflush(v->reasoning_out);
    v->in_reasoning = false;
}

void gen_view_show(gen_view *v, const brigade_chat_delta *d)
{
    if (d->reasoning_len) {
        if (!v->in_reasoning)
            fputs(v->dim ? "\033[2m" : v->open_mark, v->reasoning_out);
        v->in_reasoning = true;
        fwrite(d->reasoning, 1, d->reasoning_len, v->reasoning_out);
        fflush(v->reasoning_out);
    }
    if (d->content_len || d->n_tool_calls)
        close_reasoning(v);
    if (d->content_len)
        fwrite(d->content, 1, d->content_len, stdout);
    for (size_t i = 0; i < d->n_tool_calls; i++)
        printf("\n[tool call] %s %s\n", d->tool_calls[i].name, d->tool_calls[i].arguments);
    fflush(stdout);
}

void gen_view_end(gen_view *v)
{
    close_reasoning(v);
    putchar('\n');
    fflush(stdout);
}
