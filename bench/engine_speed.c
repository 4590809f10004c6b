/* Prefill and decode speed of brigade next to llama.cpp on the same GGUF
 * file, alternating runs; prints tokens/s and brigade/llama.cpp ratios.
 * Not a test: `make bench && build/bench/engine_speed MODEL [-p 64] [-n 32]
 * [-t 2] [-r 3]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "oracle.h"
#include "ggml-backend.h"
#include "llama.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

typedef struct speeds {
    double pp, tg; /* tokens per second */
} speeds;

static speeds run_llama(struct llama_model *model, const int32_t *prompt, int n_p, int n_g, int t)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_p + n_g + 8);
    cp.n_batch = cp.n_ubatch = (uint32_t)n_p;
    cp.n_threads = cp.n_threads_batch = t;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int32_t tok;
    double t0 = now();
    llama_decode(ctx, llama_batch_get_one((int32_t *)prompt, n_p));
    double t1 = now();
    tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    for (int i = 0; i < n_g; i++) {
        llama_decode(ctx, llama_batch_get_one(&tok, 1));
        tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }
    double t2 = now();
    llama_free(ctx);
    return (speeds){n_p / (t1 - t0), n_g / (t2 - t1)};
}

static speeds run_brigade(brigade_model *m, const int32_t *prompt, int n_p, int n_g, int t)
{
    brigade_session_options so = {.n_ctx = (uint32_t)(n_p + n_g + 8), .n_threads = (uint32_t)t,
                                  .n_ubatch = (uint32_t)n_p};
    brigade_session *s;
    brigade_error err;
    if (brigade_session_new(m, &so, &s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    int n_vocab = (int)brigade_model_n_vocab(m);
    float *logits = malloc((size_t)n_vocab * sizeof(float));
    double t0 = now();
    brigade_session_eval(s, prompt, (size_t)n_p, false, logits, &err);
    double t1 = now();
    int32_t tok = argmax(logits, n_vocab);
    for (int i = 0; i < n_g; i++) {
        brigade_session_eval(s, &tok, 1, false, logits, &err);
        tok = argmax(logits, n_vocab);
    }
    double t2 = now();
    free(logits);
    brigade_session_free(s);
    return (speeds){n_p / (t1 - t0), n_g / (t2 - t1)};
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: engine_speed MODEL [-p N] [-n N] [-t N] [-r N]\n");
        return 2;
    }
    int n_p = 64, n_g = 32, threads = 2, reps = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "-p")) n_p = v;
        else if (!strcmp(argv[i], "-n")) n_g = v;
        else if (!strcmp(argv[i], "-t")) threads = v;
        else if (!strcmp(argv[i], "-r")) reps = v;
    }
    oracle_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = oracle_no_progress;
    struct llama_model *lm = llama_model_load_from_file(argv[1], mp);
    brigade_model *bm;
    brigade_error err;
    if (!lm || brigade_model_load(argv[1], NULL, &bm, &err)) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    int32_t *prompt = malloc((size_t)n_p * sizeof *prompt);
    for (int i = 0; i < n_p; i++)
        prompt[i] = (int32_t)((i * 7919 + 13) % 256);
    run_brigade(bm, prompt, 4, 2, threads); /* warm-up, not counted */
    run_llama(lm, prompt, 4, 2, threads);
    double b_pp = 0, b_tg = 0, l_pp = 0, l_tg = 0;
    for (int r = 0; r < reps; r++) {
        speeds b = run_brigade(bm, prompt, n_p, n_g, threads);
        speeds l = run_llama(lm, prompt, n_p, n_g, threads);
        fprintf(stderr, "rep %d: brigade pp %.2f tg %.2f | llama.cpp pp %.2f tg %.2f\n", r, b.pp,
                b.tg, l.pp, l.tg);
        b_pp += b.pp / reps, b_tg += b.tg / reps, l_pp += l.pp / reps, l_tg += l.tg / reps;
    }
    printf("| test | brigade t/s | llama.cpp t/s | ratio |\n|---|---|---|---|\n");
    printf("| pp%d | %.2f | %.2f | %.2f |\n", n_p, b_pp, l_pp, b_pp / l_pp);
    printf("| tg%d | %.2f | %.2f | %.2f |\n", n_g, b_tg, l_tg, b_tg / l_tg);
    free(prompt);
    brigade_model_free(bm);
    llama_model_free(lm);
    llama_backend_free();
    return 0;
}
