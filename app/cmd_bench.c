/* brigade bench: prompt-processing and generation speed in llama-bench's
 * conventions (-p, -n, -pg, -r, -t, -ub, -ctk/-ctv, -d, -o md|json|csv,
 * comma lists for sweeps). Timings exclude model load; each test has one
 * uncounted warm-up run; progress goes to stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"

enum { MAX_LIST = 16 };

typedef struct u32_list {
    uint32_t v[MAX_LIST];
    int n;
} u32_list;

enum { MAX_SEQ = 256 };

typedef struct bench_flags {
    const char *models[MAX_LIST];
    int n_models;
    u32_list prompt, gen, threads, ubatch, depth;
    uint32_t pg[MAX_LIST][2];
    int n_pg;
    brigade_cache_type ctk[MAX_LIST], ctv[MAX_LIST];
    int n_ctk, n_ctv;
    uint32_t reps;
    const char *output;
    bool no_mmap;
    u32_list n_seq;                /* -np: sequences decoding together in tg tests */
    brigade_session_options gpu;   /* -ngl, --n-cpu-moe, --gpu-budget */
} bench_flags;

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "1,2,4" into a list; false (reported) on anything else. */
static bool parse_list(const char *flag, const char *text, u32_list *out)
{
    out->n = 0;
    char *copy = strdup(text), *save = NULL;
    bool ok = copy != NULL;
    for (char *tok = ok ? strtok_r(copy, ",", &save) : NULL; ok && tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) {
            fprintf(stderr, "%s: at most %d values\n", flag, MAX_LIST);
            ok = false;
        } else {
            ok = cli_parse_u32(flag, tok, &out->v[out->n++]);
        }
    }
    free(copy);
    return ok && out->n > 0;
}

static bool parse_cache_list(const char *flag, const char *text, brigade_cache_type *out, int *n)
{
    *n = 0;
    char *copy = strdup(text), *save = NULL;
    bool ok = copy != NULL;
    for (char *tok = ok ? strtok_r(copy, ",", &save) : NULL; ok && tok;
         tok = strtok_r(NULL, ",", &save))
        ok = *n < MAX_LIST && cli_parse_cache_type(flag, tok, &out[(*n)++]);
    free(copy);
    return ok && *n > 0;
}

static void bench_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade bench -m MODEL [options]   (comma lists sweep: -t 1,2)\n"
            "  -m, --model FILE      GGUF model (repeat or comma-separate for several)\n"
            "  -p, --n-prompt N      prompt-processing test of N tokens (default 512; 0: none)\n"
            "  -n, --n-gen N         generation test of N tokens (default 128; 0: none)\n"
            "  -pg P,N               prompt of P then N generated, timed together\n"
            "  -d, --n-depth N       tokens already in the context (default 0)\n"
            "  -r, --repetitions N   timed runs per test (default 5)\n"
            "  -t, --threads N       threads (default: all cores)\n"
            "  -ub, --ubatch-size N  prompt micro-batch (default 512)\n"
            "  -ctk, -ctv TYPE       KV cache types (default f16)\n"
            "  -o, --output FORMAT   md (default), json or csv\n"
            "  --no-mmap             read the weights into memory\n"
            "  -np, --parallel LIST  tg tests with N sequences decoding together (default 1)\n"
            CLI_GPU_USAGE);
}

static int parse_flags(int argc, char **argv, bench_flags *f)
{
    memset(f, 0, sizeof *f);
    f->prompt = (u32_list){{512}, 1};
    f->gen = (u32_list){{128}, 1};
    f->threads = (u32_list){{0}, 1};
    f->ubatch = (u32_list){{512}, 1};
    f->depth = (u32_list){{0}, 1};
    f->ctk[0] = f->ctv[0] = BRIGADE_CACHE_F16;
    f->n_ctk = f->n_ctv = 1;
    f->reps = 5;
    f->output = "md";
    f->n_seq = (u32_list){{1}, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
#define IS(x) (!strcmp(a, x))
        if (IS("-h") || IS("--help")) {
            bench_usage(stdout);
            return 0;
        } else if (IS("--no-mmap")) {
            f->no_mmap = true;
            continue;
        } else if (!v) {
            ok = false;
        } else if (cli_parse_gpu_flag(a, v, &f->gpu)) {
            ok = cli_parse_gpu_flag(a, v, &f->gpu) > 0;
        } else if (IS("-np") || IS("--parallel")) {
            ok = parse_list(a, v, &f->n_seq);
            for (int k = 0; ok && k < f->n_seq.n; k++)
                ok = f->n_seq.v[k] > 0 && f->n_seq.v[k] <= MAX_SEQ;
        } else if (IS("-m") || IS("--model")) {
            char *copy = strdup(v), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok && f->n_models < MAX_LIST;
                 tok = strtok_r(NULL, ",", &save))
                f->models[f->n_models++] = strdup(tok);
            free(copy);
        } else if (IS("-p") || IS("--n-prompt"))
            ok = parse_list(a, v, &f->prompt);
        else if (IS("-n") || IS("--n-gen"))
            ok = parse_list(a, v, &f->gen);
        else if (IS("-d") || IS("--n-depth"))
            ok = parse_list(a, v, &f->depth);
        else if (IS("-t") || IS("--threads"))
            ok = parse_list(a, v, &f->threads);
        else if (IS("-ub") || IS("--ubatch-size"))
            ok = parse_list(a, v, &f->ubatch);
        else if (IS("-ctk") || IS("--cache-type-k"))
            ok = parse_cache_list(a, v, f->ctk, &f->n_ctk);
        else if (IS("-ctv") || IS("--cache-type-v"))
            ok = parse_cache_list(a, v, f->ctv, &f->n_ctv);
        else if (IS("-r") || IS("--repetitions"))
            ok = cli_parse_u32(a, v, &f->reps) && f->reps > 0;
        else if (IS("-o") || IS("--output")) {
            f->output = v;
            ok = !strcmp(v, "md") || !strcmp(v, "json") || !strcmp(v, "csv");
        } else if (IS("-pg")) {
            u32_list pair;
            ok = parse_list(a, v, &pair) && pair.n == 2 && f->n_pg < MAX_LIST;
            if (ok) {
                f->pg[f->n_pg][0] = pair.v[0];
                f->pg[f->n_pg++][1] = pair.v[1];
            }
        } else {
            fprintf(stderr, "bench: unknown option: %s\n", a);
            bench_usage(stderr);
            return 2;
        }
#undef IS
        if (!ok) {
            fprintf(stderr, "bench: bad or missing value for %s\n", a);
            return 2;
        }
        i++;
    }
    if (!f->n_models) {
        bench_usage(stderr);
        return 2;
    }
    return -1; /* go on */
}

/* One test: n_prompt tokens in micro-batches, then n_gen one at a time.
 * Each evaluation computes the last token's logits, as llama-bench's
 * llama_decode calls do (the output matrix is part of a token's cost). */
typedef struct test {
    uint32_t n_prompt, n_gen, depth;
    uint32_t n_seq; /* tg only: sequences decoding together, one token each per step */
} test;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static int32_t random_token(uint32_t n_vocab)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int32_t)(rng % n_vocab);
}

static bool run_once(brigade_session *s, const test *t, uint32_t n_vocab, int32_t *tokens,
                     float *logits, double *elapsed, brigade_error *err)
{
    brigade_session_reset(s);
    for (uint32_t i = 0; i < t->depth + t->n_prompt; i++)
        tokens[i] = random_token(n_vocab);
    if (t->depth && brigade_session_eval(s, tokens, t->depth, false, NULL, err))
        return false;
    double t0 = seconds();
    if (t->n_prompt &&
        brigade_session_eval(s, tokens + t->depth, t->n_prompt, false, logits, err))
        return false;
    if (t->n_seq > 1) {
        /* n_seq sequences, each with logits, as a server's decode step */
        int32_t toks[MAX_SEQ];
        uint32_t seq[MAX_SEQ];
        bool want[MAX_SEQ];
        for (uint32_t q = 0; q < t->n_seq; q++)
            seq[q] = q, want[q] = true;
        for (uint32_t i = 0; i < t->n_gen; i++) {
            for (uint32_t q = 0; q < t->n_seq; q++)
                toks[q] = random_token(n_vocab);
            brigade_batch b = {toks, seq, want, t->n_seq};
            if (brigade_session_eval_batch(s, &b, logits, err))
                return false;
        }
    }
    for (uint32_t i = 0; t->n_seq <= 1 && i < t->n_gen; i++) {
        int32_t tok = random_token(n_vocab);
        if (brigade_session_eval(s, &tok, 1, false, logits, err))
            return false;
    }
    *elapsed = seconds() - t0;
    return true;
}

typedef struct result {
    char model[96], test[48];
    double size_gib, params_b;
    uint32_t threads, ubatch;
    const char *ctk, *ctv;
    const char *backend; /* "CPU" or "CUDA" */
    double mean, sd; /* tokens per second */
} result;

static void describe(const brigade_model *m, char *out, size_t size)
{
    /* architecture, parameter count, most common weight type */
    const brigade_gguf *f = brigade_model_file(m);
    uint64_t bytes_by_type[64] = {0};
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        if (t->type < 64)
            bytes_by_type[t->type] += t->n_bytes;
    }
    uint32_t top = 0;
    for (uint32_t t = 1; t < 64; t++)
        if (bytes_by_type[t] > bytes_by_type[top])
            top = t;
    double p = (double)brigade_model_n_params(m);
    if (p >= 1e9)
        snprintf(out, size, "%s %.*fB %s", brigade_model_arch(m), p < 1e10 ? 1 : 0, p / 1e9,
                 brigade_type_name(top));
    else
        snprintf(out, size, "%s %.0fM %s", brigade_model_arch(m), p / 1e6, brigade_type_name(top));
}

static void print_results(const char *format, const result *r, int n)
{
    if (!strcmp(format, "json")) {
        printf("[\n");
        for (int i = 0; i < n; i++)
            printf("  {\"model\": \"%s\", \"size_gib\": %.4f, \"params_b\": %.4f, \"backend\": "
                   "\"%s\", \"threads\": %u, \"n_ubatch\": %u, \"type_k\": \"%s\", \"type_v\": "
                   "\"%s\", \"test\": \"%s\", \"avg_ts\": %.4f, \"stddev_ts\": %.4f}%s\n",
                   r[i].model, r[i].size_gib, r[i].params_b, r[i].backend, r[i].threads,
                   r[i].ubatch, r[i].ctk, r[i].ctv, r[i].test, r[i].mean, r[i].sd,
                   i + 1 < n ? "," : "");
        printf("]\n");
    } else if (!strcmp(format, "csv")) {
        printf("model,size_gib,params_b,backend,threads,n_ubatch,type_k,type_v,test,avg_ts,"
               "stddev_ts\n");
        for (int i = 0; i < n; i++)
            printf("\"%s\",%.4f,%.4f,%s,%u,%u,%s,%s,%s,%.4f,%.4f\n", r[i].model, r[i].size_gib,
                   r[i].params_b, r[i].backend, r[i].threads, r[i].ubatch, r[i].ctk, r[i].ctv, r[i].test,
                   r[i].mean, r[i].sd);
    } else {
        printf("| model | size | params | backend | threads | n_ubatch | type_k | type_v | test "
               "| t/s |\n| --- | ---: | ---: | --- | ---: | ---: | --- | --- | ---: | ---: |\n");
        for (int i = 0; i < n; i++)
            printf("| %s | %.2f GiB | %.2f B | %s | %u | %u | %s | %s | %s | %.2f ± %.2f |\n",
                   r[i].model, r[i].size_gib, r[i].params_b, r[i].backend, r[i].threads, r[i].ubatch, r[i].ctk,
                   r[i].ctv, r[i].test, r[i].mean, r[i].sd);
    }
}

static void test_name(const test *t, char *out, size_t size)
{
    int k;
    if (t->n_prompt && t->n_gen)
        k = snprintf(out, size, "pp%u+tg%u", t->n_prompt, t->n_gen);
    else if (t->n_prompt)
        k = snprintf(out, size, "pp%u", t->n_prompt);
    else
        k = snprintf(out, size, "tg%u", t->n_gen);
    if (t->n_seq > 1 && k > 0 && (size_t)k < size)
        k += snprintf(out + k, size - (size_t)k, " x%u", t->n_seq);
    if (t->depth && k > 0 && (size_t)k < size)
        snprintf(out + k, size - (size_t)k, " @ d%u", t->depth);
}

int cmd_bench(int argc, char **argv)
{
    bench_flags f;
    int rc = parse_flags(argc, argv, &f);
    if (rc >= 0)
        return rc;
    test tests[(2 + MAX_LIST) * MAX_LIST * MAX_LIST];
    int n_tests = 0;
    for (int d = 0; d < f.depth.n; d++) {
        for (int i = 0; i < f.prompt.n; i++)
            if (f.prompt.v[i])
                tests[n_tests++] = (test){f.prompt.v[i], 0, f.depth.v[d], 1};
        for (int i = 0; i < f.gen.n; i++)
            for (int q = 0; f.gen.v[i] && q < f.n_seq.n; q++)
                tests[n_tests++] = (test){0, f.gen.v[i], f.depth.v[d], f.n_seq.v[q]};
        for (int i = 0; i < f.n_pg; i++)
            tests[n_tests++] = (test){f.pg[i][0], f.pg[i][1], f.depth.v[d], 1};
    }
    int cap = f.n_models * f.threads.n * f.ubatch.n * f.n_ctk * f.n_ctv * n_tests;
    result *results = calloc(cap ? (size_t)cap : 1, sizeof *results);
    int n_results = 0;
    rc = 0;
    for (int mi = 0; mi < f.n_models && !rc; mi++) {
        brigade_model *m = NULL;
        brigade_error err = {0};
        brigade_model_options mo = {.no_mmap = f.no_mmap};
        fprintf(stderr, "bench: loading %s\n", f.models[mi]);
        if (brigade_model_load(f.models[mi], &mo, &m, &err)) {
            fprintf(stderr, "bench: %s\n", err.message);
            rc = 1;
            break;
        }
        char desc[96];
        describe(m, desc, sizeof desc);
        uint32_t n_vocab = brigade_model_n_vocab(m);
        uint32_t max_seq = 1;
        for (int q = 0; q < f.n_seq.n; q++)
            max_seq = f.n_seq.v[q] > max_seq ? f.n_seq.v[q] : max_seq;
        for (int ti = 0; ti < f.threads.n && !rc; ti++)
            for (int ui = 0; ui < f.ubatch.n && !rc; ui++)
                for (int ki = 0; ki < f.n_ctk && !rc; ki++)
                    for (int vi = 0; vi < f.n_ctv && !rc; vi++)
                        for (int t = 0; t < n_tests && !rc; t++) {
                            const test *te = &tests[t];
                            uint32_t need = te->depth + te->n_prompt + te->n_gen;
                            brigade_session_options so = f.gpu;
                            so.n_ctx = need;
                            so.n_threads = f.threads.v[ti];
                            so.n_ubatch = f.ubatch.v[ui];
                            so.cache_type_k = f.ctk[ki];
                            so.cache_type_v = f.ctv[vi];
                            so.n_seq_max = te->n_seq > 1 ? te->n_seq : 1;
                            brigade_session *s = NULL;
                            float *logits = NULL; /* as the session's device writes them */
                            int32_t *tokens = malloc(((size_t)need + 1) * sizeof *tokens);
                            result *r = &results[n_results];
                            test_name(te, r->test, sizeof r->test);
                            if (!tokens || brigade_session_new(m, &so, &s, &err)) {
                                fprintf(stderr, "bench: %s\n", tokens ? err.message : "out of memory");
                                rc = 1;
                            } else if (!(logits = brigade_logits_alloc(s, max_seq))) {
                                fprintf(stderr, "bench: out of memory\n");
                                rc = 1;
                            }
                            double sum = 0, sum2 = 0, el;
                            /* the first run warms caches and pages, uncounted */
                            for (uint32_t rep = 0; !rc && rep <= f.reps; rep++) {
                                fprintf(stderr, "bench: %s %s, run %u/%u\r", desc, r->test, rep,
                                        f.reps);
                                if (!run_once(s, te, n_vocab, tokens, logits, &el, &err)) {
                                    fprintf(stderr, "\nbench: %s\n", err.message);
                                    rc = 1;
                                } else if (rep > 0) {
                                    double ts =
                                        (te->n_prompt + te->n_gen * (te->n_seq > 1 ? te->n_seq : 1)) /
                                        el;
                                    sum += ts;
                                    sum2 += ts * ts;
                                }
                            }
                            fprintf(stderr, "\n");
                            if (!rc) {
                                snprintf(r->model, sizeof r->model, "%s", desc);
                                r->size_gib = (double)brigade_model_weight_bytes(m) / (1u << 30);
                                r->params_b = (double)brigade_model_n_params(m) / 1e9;
                                r->threads = f.threads.v[ti] ? f.threads.v[ti]
                                                             : cli_cores();
                                r->ubatch = f.ubatch.v[ui];
                                r->ctk = brigade_cache_type_name(f.ctk[ki]);
                                r->ctv = brigade_cache_type_name(f.ctv[vi]);
                                brigade_gpu_report gr;
                                brigade_session_gpu(s, &gr);
                                r->backend = gr.active ? "CUDA" : "CPU";
                                cli_print_gpu(s);
                                r->mean = sum / f.reps;
                                double var = sum2 / f.reps - r->mean * r->mean;
                                r->sd = f.reps > 1 && var > 0 ? sqrt(var * f.reps / (f.reps - 1)) : 0;
                                n_results++;
                            }
                            brigade_logits_free(logits);
                            brigade_session_free(s);
                            free(tokens);
                        }
        brigade_model_free(m);
    }
    if (n_results)
        print_results(f.output, results, n_results);
    free(results);
    for (int i = 0; i < f.n_models; i++)
        free((char *)f.models[i]);
    return rc;
}
