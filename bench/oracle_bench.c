/* llama.cpp's speed on a GGUF file, measured as `brigade bench` measures
 * brigade's, for bench/compare:
 *   ppN: one llama_decode of N tokens from an empty context (n_batch and
 *        n_ubatch N), logits of the last token only;
 *   tgN: N single-token decodes from an empty context; with -np S (S > 1),
 *        N steps of S sequences decoding together, one token each a step,
 *        every one with logits (as brigade bench -np: a server's decode
 *        step), named "tgN xS", S * N tokens counted (not with -d);
 *   with -d D, D random tokens decoded first (in batches of up to 512,
 *   untimed), as llama-bench's -d and brigade bench's -d; -ctk/-ctv set
 *   the KV cache types (f16, q8_0, q4_0; default f16).
 * Load time is excluded; one uncounted run of each test warms caches and
 * pages first. Tokens are random ids of the vocabulary.
 *
 * usage: oracle_bench MODEL [-p 512] [-n 128] [-d 0] [-ctk T] [-ctv T]
 *                     [-t THREADS] [-r REPS] [-np S] [-ngl N] [--n-cpu-moe N]
 * -ngl and --n-cpu-moe are llama.cpp's (layers offloaded; routed experts of
 * the first N layers kept in host memory) for a GPU build of the library
 * (scripts/gpu-check.sh); the CPU build ignores them.
 * prints one machine-readable line per timed run on stdout:
 *   llama.cpp pp512 <tokens/s>
 *   llama.cpp tg128 <tokens/s>
 * (the name ends in "@dD" at a depth D). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "oracle.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static int32_t random_token(int32_t n_vocab)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int32_t)(rng % (uint64_t)n_vocab);
}

/* One run of n_prompt tokens as a single batch, or of n_gen tokens one at
 * a time, from an empty context; returns tokens per second, or a negative
 * number when a decode fails. */
static double run_once(struct llama_context *ctx, int32_t n_vocab, int depth, int n_prompt,
                       int n_gen, int n_seq, int32_t *tokens, struct llama_batch *step)
{
    llama_memory_clear(llama_get_memory(ctx), true);
    for (int i = 0; i < depth; i++)
        tokens[i] = random_token(n_vocab);
    for (int i = 0; i < depth; i += 512) {
        int n = depth - i < 512 ? depth - i : 512;
        if (llama_decode(ctx, llama_batch_get_one(tokens + i, n)))
            return -1;
    }
    int n = n_prompt ? n_prompt : n_gen;
    for (int i = 0; i < n; i++)
        tokens[i] = random_token(n_vocab);
    llama_synchronize(ctx);
    double t0 = now();
    if (n_prompt) {
        if (llama_decode(ctx, llama_batch_get_one(tokens, n_prompt)))
            return -1;
    } else if (n_seq > 1) {
        for (int i = 0; i < n_gen; i++) {
            step->n_tokens = n_seq;
            for (int q = 0; q < n_seq; q++) {
                step->token[q] = random_token(n_vocab);
                step->pos[q] = depth + i;
                step->n_seq_id[q] = 1;
                step->seq_id[q][0] = q;
                step->logits[q] = 1;
            }
            if (llama_decode(ctx, *step))
                return -1;
        }
        n *= n_seq;
    } else {
        for (int i = 0; i < n_gen; i++)
            if (llama_decode(ctx, llama_batch_get_one(&tokens[i], 1)))
                return -1;
    }
    llama_synchronize(ctx);
    return n / (now() - t0);
}

/* A KV cache type by llama.cpp's name for it. */
static bool cache_type(const char *name, enum ggml_type *out)
{
    static const struct {
        const char *name;
        enum ggml_type type;
    } known[] = {{"f16", GGML_TYPE_F16}, {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(name, known[i].name)) {
            *out = known[i].type;
            return true;
        }
    return false;
}

static int usage(void)
{
    fprintf(stderr, "usage: oracle_bench MODEL [-p N] [-n N] [-d N] [-ctk T] [-ctv T] "
                    "[-t THREADS] [-r REPS] [-np S] [-ngl N] [--n-cpu-moe N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return usage();
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n_prompt = 512, n_gen = 128, depth = 0, threads = n_cpu > 0 ? (int)n_cpu : 1, reps = 1;
    int ngl = -2, n_cpu_moe = 0, n_seq = 1; /* -2: the library's default */
    enum ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "-ctk") || !strcmp(argv[i], "-ctv")) {
            enum ggml_type *t = argv[i][3] == 'k' ? &type_k : &type_v;
            if (!cache_type(argv[i + 1], t))
                return usage();
            continue;
        }
        int v = atoi(argv[i + 1]);
        if (v < 0)
            return usage();
        if (!strcmp(argv[i], "-p")) n_prompt = v;
        else if (!strcmp(argv[i], "-n")) n_gen = v;
        else if (!strcmp(argv[i], "-d") && v <= 1 << 20) depth = v;
        else if (!strcmp(argv[i], "-t") && v > 0) threads = v;
        else if (!strcmp(argv[i], "-r") && v > 0) reps = v;
        else if (!strcmp(argv[i], "-np") && v > 0 && v <= 256) n_seq = v;
        else if (!strcmp(argv[i], "-ngl")) ngl = v;
        else if (!strcmp(argv[i], "--n-cpu-moe") && v < 4096) n_cpu_moe = v;
        else return usage();
    }
    if (n_seq > 1 && depth) /* the depth's tokens would fill sequence 0 only */
        return usage();
    oracle_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = oracle_no_progress;
    if (ngl != -2)
        mp.n_gpu_layers = ngl;
    /* --n-cpu-moe as llama.cpp's common arguments do it: the expert
     * tensors of layers 0..N-1 in a host buffer */
    static char patterns[4096][48];
    static struct llama_model_tensor_buft_override overrides[4097];
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (n_cpu_moe && cpu) {
        for (int il = 0; il < n_cpu_moe; il++) {
            snprintf(patterns[il], sizeof patterns[il], "blk\\.%d\\.ffn_(up|down|gate)_exps", il);
            overrides[il] = (struct llama_model_tensor_buft_override){
                patterns[il], ggml_backend_dev_buffer_type(cpu)};
        }
        overrides[n_cpu_moe] = (struct llama_model_tensor_buft_override){NULL, NULL};
        mp.tensor_buft_overrides = overrides;
    }
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "oracle_bench: cannot load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)depth + (uint32_t)(n_prompt > n_gen ? n_prompt : n_gen) + 16;
    /* -np: every sequence its own n_ctx cells and recurrent state */
    cp.n_seq_max = (uint32_t)n_seq;
    cp.n_ctx *= (uint32_t)n_seq;
    /* one micro-batch of the prompt; the depth's batches fit too */
    cp.n_batch = cp.n_ubatch = (uint32_t)(n_prompt > 1 ? n_prompt : 1);
    if (depth && cp.n_batch < 512)
        cp.n_batch = cp.n_ubatch = 512;
    if (cp.n_batch < (uint32_t)n_seq)
        cp.n_batch = cp.n_ubatch = (uint32_t)n_seq;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.no_perf = true;
    cp.type_k = type_k, cp.type_v = type_v;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int32_t *tokens = malloc(sizeof *tokens * ((size_t)depth + (size_t)n_prompt + (size_t)n_gen + 1));
    struct llama_batch step = llama_batch_init(n_seq, 0, 1);
    int rc = 0;
    if (!ctx || !tokens) {
        fprintf(stderr, "oracle_bench: cannot create a context\n");
        rc = 1;
    }
    static const char *const name[2] = {"pp", "tg"};
    for (int test = 0; test < 2 && !rc; test++) {
        int p = test == 0 ? n_prompt : 0, g = test == 1 ? n_gen : 0;
        if (!p && !g)
            continue;
        for (int r = 0; r <= reps && !rc; r++) { /* run 0 is the warm-up */
            double ts = run_once(ctx, n_vocab, depth, p, g, test == 1 ? n_seq : 1, tokens, &step);
            if (ts < 0) {
                fprintf(stderr, "oracle_bench: llama_decode failed\n");
                rc = 1;
            } else if (r > 0) {
                char seqs[16] = "";
                if (test == 1 && n_seq > 1)
                    snprintf(seqs, sizeof seqs, " x%d", n_seq);
                if (depth)
                    printf("llama.cpp %s%d%s@d%d %.4f\n", name[test], p ? p : g, seqs, depth, ts);
                else
                    printf("llama.cpp %s%d%s %.4f\n", name[test], p ? p : g, seqs, ts);
                fflush(stdout);
            }
        }
    }
    free(tokens);
    llama_batch_free(step);
    if (ctx)
        llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
