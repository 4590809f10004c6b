/* brigade perplexity -m MODEL -f TEXT: perplexity over windows of -c tokens,
 * as llama-perplexity computes it; --save-logits keeps a base model's
 * distributions and --kld-base compares another model with them (KL
 * divergence, llama-perplexity --kl-divergence). The base file is
 * llama.cpp's own format: either program reads what the other wrote. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "cli.h"
#include "commands.h"

static void perplexity_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade perplexity -m MODEL -f TEXT [options]\n"
            "       brigade perplexity -m MODEL --kld-base BASE.bin [-f TEXT] [options]\n"
            "  -m, --model FILE       GGUF model\n"
            "  -f, --file FILE        the text to score\n"
            "  -c, --ctx-size N       tokens in a window (default 512); the second half is "
            "scored\n"
            "  -b, --batch-size N     tokens evaluated per call (default 2048)\n"
            "  -ub, --ubatch-size N   tokens evaluated together (default 512)\n"
            "  -t, --threads N        threads (default: all cores)\n"
            "  -ctk, --cache-type-k T KV cache type for K: f16 (default), f32, q8_0, q4_0\n"
            "  -ctv, --cache-type-v T KV cache type for V: f16 (default), f32, q8_0, q4_0\n"
            "  --chunks N             score at most N windows (default: all)\n"
            "  --save-logits FILE     keep this model's log-probabilities as a KLD base\n"
            "                         (llama-perplexity --kl-divergence-base format)\n"
            "  --kld-base FILE        KL divergence against a base saved with --save-logits;\n"
            "                         the windows are the file's (-f, if given, must match)\n"
            "  --no-mmap              read the weights into memory\n");
}

typedef struct ppl_args {
    const char *model_path, *text_path, *save_path, *base_path;
    uint32_t n_ctx, n_batch, n_chunks;
    bool ctx_given, chunks_given;
    brigade_session_options so;
    brigade_model_options mo;
} ppl_args;

/* 0: parsed; 1: --help shown; 2: bad arguments (reported). */
static int parse_args(int argc, char **argv, ppl_args *a)
{
    *a = (ppl_args){.n_ctx = 512, .n_batch = 2048};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool has_value = i + 1 < argc;
        bool ok = true;
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            perplexity_usage(stdout);
            return 1;
        } else if ((!strcmp(s, "-m") || !strcmp(s, "--model")) && has_value)
            a->model_path = argv[++i];
        else if ((!strcmp(s, "-f") || !strcmp(s, "--file")) && has_value)
            a->text_path = argv[++i];
        else if (!strcmp(s, "--save-logits") && has_value)
            a->save_path = argv[++i];
        else if (!strcmp(s, "--kld-base") && has_value)
            a->base_path = argv[++i];
        else if ((!strcmp(s, "-c") || !strcmp(s, "--ctx-size")) && has_value)
            ok = cli_parse_u32(s, argv[++i], &a->n_ctx), a->ctx_given = true;
        else if ((!strcmp(s, "-b") || !strcmp(s, "--batch-size")) && has_value)
            ok = cli_parse_u32(s, argv[++i], &a->n_batch);
        else if ((!strcmp(s, "-ub") || !strcmp(s, "--ubatch-size")) && has_value)
            ok = cli_parse_u32(s, argv[++i], &a->so.n_ubatch);
        else if ((!strcmp(s, "-t") || !strcmp(s, "--threads")) && has_value)
            ok = cli_parse_u32(s, argv[++i], &a->so.n_threads);
        else if ((!strcmp(s, "-ctk") || !strcmp(s, "--cache-type-k")) && has_value)
            ok = cli_parse_cache_type(s, argv[++i], &a->so.cache_type_k);
        else if ((!strcmp(s, "-ctv") || !strcmp(s, "--cache-type-v")) && has_value)
            ok = cli_parse_cache_type(s, argv[++i], &a->so.cache_type_v);
        else if (!strcmp(s, "--chunks") && has_value)
            ok = cli_parse_u32(s, argv[++i], &a->n_chunks), a->chunks_given = true;
        else if (!strcmp(s, "--no-mmap"))
            a->mo.no_mmap = true;
        else if (has_value && cli_parse_gpu_flag(s, argv[i + 1], &a->so))
            ok = cli_parse_gpu_flag(s, argv[++i], &a->so) > 0;
        else {
            fprintf(stderr, "perplexity: unknown option or missing value: %s\n", s);
            perplexity_usage(stderr);
            return 2;
        }
        if (!ok)
            return 2;
    }
    const char *problem = NULL;
    if (!a->model_path)
        problem = "a model (-m) is required";
    else if (!a->text_path && !a->base_path)
        problem = "a text (-f) is required";
    else if (a->save_path && a->base_path)
        problem = "--save-logits and --kld-base cannot be used together";
    else if (a->n_ctx < 3)
        problem = "-c must be at least 3 (a window scores its second half)";
    else if (a->n_batch == 0)
        problem = "-b must be positive";
    else if (a->chunks_given && a->n_chunks == 0)
        problem = "--chunks must be positive";
    if (problem) {
        fprintf(stderr, "perplexity: %s\n", problem);
        perplexity_usage(stderr);
        return 2;
    }
    return 0;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The whole text file, tokenized as llama-perplexity does (with the
 * vocabulary's BOS/EOS, special tokens as plain text). */
static int32_t *tokenize_file(const brigade_vocab *vocab, const char *path, size_t *n_out)
{
    size_t len;
    bool not_opened;
    char *text = cli_read_file(path, &len, &not_opened);
    if (!text) {
        fprintf(stderr, "perplexity: cannot %s %s: %s\n", not_opened ? "open" : "read", path,
                strerror(errno));
        return NULL;
    }
    /* A token covers at least a byte; room for BOS and EOS too. */
    brigade_error err = {0};
    size_t n = 0, room = len + 2;
    int32_t *ids = malloc(room * sizeof *ids);
    if (!ids)
        snprintf(err.message, sizeof err.message, "out of memory");
    else if (brigade_tokenize(vocab, text, len, true, false, ids, room, &n, &err) == BRIGADE_OK &&
             n > room) {
        snprintf(err.message, sizeof err.message, "more tokens (%zu) than bytes", n);
        free(ids);
        ids = NULL;
    } else if (err.status) {
        free(ids);
        ids = NULL;
    }
    free(text);
    if (!ids) {
        fprintf(stderr, "perplexity: %s: %s\n", path, err.message);
        return NULL;
    }
    *n_out = n;
    return ids;
}

/* What the windows need: the model, a session, a row buffer. */
typedef struct ppl_run {
    brigade_model *model;
    brigade_session *session;
    brigade_vocab *vocab;
    int32_t n_vocab, bos;
    float *logits; /* scored rows of the current window */
} ppl_run;

static bool run_open(const ppl_args *a, uint32_t n_ctx, ppl_run *r)
{
    brigade_error err = {0};
    brigade_session_options so = a->so;
    so.n_ctx = n_ctx;
    if (brigade_model_load(a->model_path, &a->mo, &r->model, &err) ||
        brigade_vocab_load(brigade_model_file(r->model), &r->vocab, &err) ||
        brigade_session_new(r->model, &so, &r->session, &err)) {
        fprintf(stderr, "perplexity: %s\n", err.message);
        return false;
    }
    r->n_vocab = (int32_t)brigade_model_n_vocab(r->model);
    brigade_special_tokens sp = brigade_vocab_specials(r->vocab);
    r->bos = sp.add_bos ? sp.bos : -1;
    size_t rows = brigade_ppl_n_scored(n_ctx);
    if (rows > SIZE_MAX / sizeof(float) / (size_t)r->n_vocab ||
        !(r->logits = malloc(rows * (size_t)r->n_vocab * sizeof(float)))) {
        fprintf(stderr, "perplexity: cannot allocate logits for %zu positions x %d\n", rows,
                r->n_vocab);
        return false;
    }
    return true;
}

static void run_close(ppl_run *r)
{
    free(r->logits);
    brigade_session_free(r->session);
    brigade_vocab_free(r->vocab);
    brigade_model_free(r->model);
}

/* Evaluates window i; reports the time the first one took. */
static bool run_window(ppl_run *r, const ppl_args *a, const int32_t *tokens, uint32_t n_ctx,
                       uint32_t i, uint32_t n_chunk)
{
    brigade_error err = {0};
    double t0 = seconds();
    if (brigade_ppl_eval_window(r->session, r->n_vocab, tokens + (size_t)i * n_ctx, n_ctx, r->bos,
                                a->n_batch, r->logits, &err)) {
        fprintf(stderr, "\nperplexity: window %u: %s\n", i + 1, err.message);
        return false;
    }
    if (i == 0) {
        double t = seconds() - t0;
        fprintf(stderr, "perplexity: %.2f seconds per window, about %.1f s for %u\n", t,
                t * n_chunk, n_chunk);
    }
    return true;
}

static int perplexity_run(const ppl_args *a)
{
    ppl_run r = {0};
    brigade_logprob_file *save = NULL;
    brigade_error err = {0};
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    int rc = 1;
    const uint32_t n_ctx = a->n_ctx;
    if (!run_open(a, n_ctx, &r) || !(tokens = tokenize_file(r.vocab, a->text_path, &n_tokens)))
        goto done;
    if (n_tokens < 2 * (uint64_t)n_ctx) {
        fprintf(stderr,
                "perplexity: %s tokenizes to only %zu tokens; a context of %u needs at least "
                "%llu (two windows)\n",
                a->text_path, n_tokens, n_ctx, 2 * (unsigned long long)n_ctx);
        goto done;
    }
    uint64_t n_max = n_tokens / n_ctx;
    uint32_t n_chunk = (uint32_t)(n_max > UINT32_MAX ? UINT32_MAX : n_max);
    if (a->chunks_given && a->n_chunks < n_chunk)
        n_chunk = a->n_chunks;
    const uint32_t first = n_ctx / 2, n_scored = brigade_ppl_n_scored(n_ctx);
    fprintf(stderr, "perplexity: %zu tokens, %u windows of %u, %u scored in each\n", n_tokens,
            n_chunk, n_ctx, n_scored);
    if (a->save_path &&
        brigade_logprob_create(a->save_path, n_ctx, r.n_vocab, n_chunk, tokens, &save, &err)) {
        fprintf(stderr, "perplexity: %s\n", err.message);
        goto done;
    }
    brigade_ppl_stats stats = {0};
    for (uint32_t i = 0; i < n_chunk; i++) {
        if (!run_window(&r, a, tokens, n_ctx, i, n_chunk))
            goto done;
        const int32_t *next = tokens + (size_t)i * n_ctx + first + 1;
        for (uint32_t j = 0; j < n_scored; j++) {
            const float *row = r.logits + (size_t)j * (size_t)r.n_vocab;
            brigade_ppl_add(&stats, row, r.n_vocab, next[j]);
            if (save && brigade_logprob_write(save, row, &err)) {
                fprintf(stderr, "\nperplexity: %s\n", err.message);
                goto done;
            }
        }
        fprintf(stderr, "[%u]%.4f,", i + 1, brigade_ppl_estimate(&stats).value);
        fflush(stderr);
    }
    fputc('\n', stderr);
    if (save) {
        brigade_status st = brigade_logprob_close(save, &err);
        save = NULL;
        if (st) {
            fprintf(stderr, "perplexity: %s\n", err.message);
            remove(a->save_path);
            goto done;
        }
        fprintf(stderr, "perplexity: log-probabilities of %llu positions saved to %s\n",
                (unsigned long long)stats.count, a->save_path);
    }
    brigade_estimate ppl = brigade_ppl_estimate(&stats);
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl.value, ppl.error);
    rc = 0;
done:
    if (save) {
        brigade_logprob_close(save, NULL);
        remove(a->save_path); /* an incomplete base is of no use */
    }
    free(tokens);
    run_close(&r);
    return rc;
}

static void print_kld_row(uint32_t chunk, const brigade_kld_stats *s)
{
    brigade_kld_summary m;
    brigade_kld_summarize(s, &m);
    fprintf(stderr, "%4u    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    "
                    "%6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
            chunk, m.ppl.value, m.ppl.error, m.ln_ppl_ratio.value, m.ln_ppl_ratio.error,
            m.kld.value, m.kld.error, 100 * m.dp_rms.value, 100 * m.dp_rms.error,
            100 * m.same_top.value, 100 * m.same_top.error);
}

static void print_kld_summary(const brigade_kld_stats *s, float *kld_values, float *dp_values)
{
    brigade_kld_summary m;
    brigade_kld_summarize(s, &m);
    brigade_quantiles k, d;
    brigade_quantiles_of(kld_values, s->count, &k);
    brigade_quantiles_of(dp_values, s->count, &d);
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", m.ppl.value, m.ppl.error);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", m.ppl_base.value, m.ppl_base.error);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * m.ln_ppl_correlation);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", m.ln_ppl_ratio.value,
           m.ln_ppl_ratio.error);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", m.ppl_ratio.value,
           m.ppl_ratio.error);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", m.ppl_diff.value,
           m.ppl_diff.error);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", m.kld.value, m.kld.error);
    /* llama-perplexity's rows; the quartiles only for dp */
    const struct {
        const char *label;
        bool for_kld;
        float kld, dp;
    } rows[] = {
        {"Maximum", true, k.max, d.max},       {"99.9%  ", true, k.p99_9, d.p99_9},
        {"99.0%  ", true, k.p99, d.p99},       {"95.0%  ", true, k.p95, d.p95},
        {"90.0%  ", true, k.p90, d.p90},       {"75.0%  ", false, 0, d.p75},
        {"Median ", true, k.median, d.median}, {"25.0%  ", false, 0, d.p25},
        {"10.0%  ", true, k.p10, d.p10},       {" 5.0%  ", true, k.p5, d.p5},
        {" 1.0%  ", true, k.p1, d.p1},         {" 0.1%  ", true, k.p0_1, d.p0_1},
        {"Minimum", true, k.min, d.min},
    };
    const size_t n_rows = sizeof rows / sizeof *rows;
    for (size_t i = 0; i < n_rows; i++)
        if (rows[i].for_kld)
            printf("%s KLD: %10.6f\n", rows[i].label, rows[i].kld);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * m.dp.value, 100 * m.dp.error);
    for (size_t i = 0; i < n_rows; i++)
        printf("%s Δp: %6.3f%%\n", rows[i].label, 100 * rows[i].dp);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * m.dp_rms.value, 100 * m.dp_rms.error);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100 * m.same_top.value, 100 * m.same_top.error);
}

static int kld_run(const ppl_args *a)
{
    ppl_run r = {0};
    brigade_logprob_file *base = NULL;
    brigade_error err = {0};
    int32_t *text_tokens = NULL;
    uint16_t *row = NULL;
    float *kld_values = NULL, *dp_values = NULL;
    int rc = 1;
    if (brigade_logprob_open(a->base_path, &base, &err)) {
        fprintf(stderr, "perplexity: %s\n", err.message);
        goto done;
    }
    const uint32_t n_ctx = brigade_logprob_n_ctx(base);
    if (a->ctx_given && a->n_ctx != n_ctx) {
        fprintf(stderr, "perplexity: %s was computed with windows of %u tokens, not -c %u\n",
                a->base_path, n_ctx, a->n_ctx);
        goto done;
    }
    if (!run_open(a, n_ctx, &r))
        goto done;
    if (brigade_logprob_n_vocab(base) != r.n_vocab) {
        fprintf(stderr,
                "perplexity: vocabulary mismatch: %s holds distributions over %d tokens, %s "
                "has %d\n",
                a->base_path, brigade_logprob_n_vocab(base), a->model_path, r.n_vocab);
        goto done;
    }
    uint32_t n_chunk = brigade_logprob_n_chunk(base);
    if (a->chunks_given && a->n_chunks < n_chunk)
        n_chunk = a->n_chunks;
    const int32_t *tokens = brigade_logprob_tokens(base);
    if (a->text_path) {
        size_t n_text = 0;
        if (!(text_tokens = tokenize_file(r.vocab, a->text_path, &n_text)))
            goto done;
        size_t n_used = (size_t)n_chunk * n_ctx, i = 0;
        if (n_text < n_used) {
            fprintf(stderr, "perplexity: %s tokenizes to %zu tokens; %s holds %zu\n",
                    a->text_path, n_text, a->base_path, n_used);
            goto done;
        }
        while (i < n_used && text_tokens[i] == tokens[i])
            i++;
        if (i < n_used) {
            fprintf(stderr,
                    "perplexity: %s is not the text %s was computed on: token %zu is %d, "
                    "the base has %d\n",
                    a->text_path, a->base_path, i, text_tokens[i], tokens[i]);
            goto done;
        }
    }
    const uint32_t first = n_ctx / 2, n_scored = brigade_ppl_n_scored(n_ctx);
    const size_t n_values = (size_t)n_chunk * n_scored;
    row = malloc(brigade_logprob_row_words(r.n_vocab) * sizeof *row);
    kld_values = malloc(n_values * sizeof *kld_values);
    dp_values = malloc(n_values * sizeof *dp_values);
    if (!row || !kld_values || !dp_values) {
        fprintf(stderr, "perplexity: cannot allocate the statistics of %zu positions\n", n_values);
        goto done;
    }
    fprintf(stderr, "perplexity: KL divergence over %u windows of %u, %u scored in each\n",
            n_chunk, n_ctx, n_scored);
    brigade_kld_stats stats = {0};
    for (uint32_t i = 0; i < n_chunk; i++) {
        if (!run_window(&r, a, tokens, n_ctx, i, n_chunk))
            goto done;
        if (i == 0)
            fprintf(stderr, "chunk             PPL               ln(PPL(Q)/PPL(base))          "
                            "KL Divergence              Δp RMS            Same top p\n");
        const int32_t *next = tokens + (size_t)i * n_ctx + first + 1;
        for (uint32_t j = 0; j < n_scored; j++) {
            if (brigade_logprob_read(base, row, &err)) {
                fprintf(stderr, "perplexity: %s\n", err.message);
                goto done;
            }
            size_t at = (size_t)i * n_scored + j;
            double dp;
            kld_values[at] = (float)brigade_kld_add(&stats, r.logits + (size_t)j * r.n_vocab, row,
                                                    r.n_vocab, next[j], &dp);
            dp_values[at] = (float)dp;
        }
        print_kld_row(i + 1, &stats);
    }
    fputc('\n', stderr);
    print_kld_summary(&stats, kld_values, dp_values);
    rc = 0;
done:
    free(row);
    free(kld_values);
    free(dp_values);
    free(text_tokens);
    brigade_logprob_close(base, NULL);
    run_close(&r);
    return rc;
}

int cmd_perplexity(int argc, char **argv)
{
    ppl_args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st == 1 ? 0 : 2;
    return a.base_path ? kld_run(&a) : perplexity_run(&a);
}
