/* How far llama.cpp is from itself on quantized weights: its token-by-token
 * logits from two of its own CPU builds (e.g. haswell = AVX2 and icelake =
 * AVX-512), next to brigade's distance from each. The parity suite's
 * quantized bound is judged against this spread: kernels that sum in a
 * different order (both of llama.cpp's do) move activations across rounding
 * ties, and a random network amplifies that.
 * Not a test:
 *   build/bench/parity_spread dump VARIANT OUT.bin   (llama.cpp logits, only that CPU build)
 *   build/bench/parity_spread compare A.bin B.bin    (table: A vs B, brigade vs A and B) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "oracle.h"

enum { N_TOKENS = 64 };

typedef struct model_case {
    const char *preset, *type_name;
    uint32_t type; /* GGUF type id; with mix, a file type */
    bool mix;
} model_case;

static const model_case cases[] = {
    {"tiny-qwen3moe", "q8_0", 8, false},     {"tiny-qwen3moe", "q4_0", 2, false},
    {"tiny-qwen3moe", "q4_K", 12, false},    {"tiny-qwen3moe", "q5_K", 13, false},
    {"tiny-qwen3moe", "q6_K", 14, false},    {"tiny-qwen3moe", "Q4_K_M", 15, true},
    {"tiny-qwen35moe", "q8_0", 8, false},    {"tiny-qwen35moe", "q4_0", 2, false},
    {"tiny-qwen35moe", "q4_K", 12, false},   {"tiny-qwen35moe", "q5_K", 13, false},
    {"tiny-qwen35moe", "q6_K", 14, false},   {"tiny-qwen35moe", "Q4_K_M", 15, true},
};
enum { N_CASES = sizeof cases / sizeof *cases };

static void make_model(const model_case *c, const char *path)
{
    brigade_synth_options o = {.preset = c->preset, .type = c->type, .seed = 11,
                               .n_experts_used = 8, .mix = c->mix,
                               .ftype = (brigade_ftype)c->type};
    brigade_error err;
    if (brigade_synth(path, &o, &err)) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
}

static void make_tokens(int32_t *tokens)
{
    uint64_t r = 12345;
    for (int i = 0; i < N_TOKENS; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((r >> 33) % 256);
    }
}

static float *llama_tokenwise(const char *path, const int32_t *tokens, int *n_vocab)
{
    return oracle_logits_of(path, tokens, N_TOKENS, 1, false, 0, GGML_TYPE_F16, GGML_TYPE_F16, 2, n_vocab);
}

static float *brigade_tokenwise(const char *path, const int32_t *tokens, int n_vocab)
{
    brigade_model *m;
    brigade_session *s;
    brigade_error err;
    float *out = malloc((size_t)N_TOKENS * n_vocab * sizeof(float));
    brigade_session_options so = {.n_ctx = 2 * N_TOKENS, .n_threads = 2, .n_ubatch = 1};
    if (brigade_model_load(path, NULL, &m, &err) || brigade_session_new(m, &so, &s, &err) ||
        brigade_session_eval(s, tokens, N_TOKENS, true, out, &err)) {
        fprintf(stderr, "%s\n", err.message);
        exit(1);
    }
    brigade_session_free(s);
    brigade_model_free(m);
    return out;
}

static double nmse(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        e += d * d;
        s += (double)a[i] * a[i];
    }
    return s > 0 ? e / s : INFINITY;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "dump") && strcmp(argv[1], "compare"))) {
        fprintf(stderr, "usage: %s dump VARIANT OUT.bin | compare A.bin B.bin\n", argv[0]);
        return 2;
    }
    llama_log_set(oracle_quiet_log, NULL);
    llama_backend_init();
    char path[256];
    snprintf(path, sizeof path, "/tmp/brigade-spread-%d.gguf", (int)getpid());
    int32_t tokens[N_TOKENS];
    make_tokens(tokens);
    if (!strcmp(argv[1], "dump")) {
        char lib[512];
        snprintf(lib, sizeof lib, "%s/libggml-cpu-%s.so", ORACLE_LIB_DIR, argv[2]);
        if (!ggml_backend_load(lib)) {
            fprintf(stderr, "cannot load %s\n", lib);
            return 1;
        }
        FILE *f = fopen(argv[3], "wb");
        for (int c = 0; f && c < N_CASES; c++) {
            make_model(&cases[c], path);
            int n_vocab = 0;
            float *l = llama_tokenwise(path, tokens, &n_vocab);
            if (!l)
                return 1;
            fwrite(&n_vocab, sizeof n_vocab, 1, f);
            fwrite(l, sizeof *l, (size_t)N_TOKENS * n_vocab, f);
            free(l);
        }
        if (f)
            fclose(f);
        remove(path);
        return f ? 0 : 1;
    }
    FILE *fa = fopen(argv[2], "rb"), *fb = fopen(argv[3], "rb");
    if (!fa || !fb)
        return 1;
    printf("| model | weights | llama.cpp A vs B | brigade vs A | brigade vs B |\n"
           "|---|---|---:|---:|---:|\n");
    for (int c = 0; c < N_CASES; c++) {
        int va = 0, vb = 0;
        if (fread(&va, sizeof va, 1, fa) != 1 || fread(&vb, sizeof vb, 1, fb) != 1 || va != vb)
            return 1;
        size_t n = (size_t)N_TOKENS * va;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        if (fread(a, sizeof *a, n, fa) != n || fread(b, sizeof *b, n, fb) != n)
            return 1;
        make_model(&cases[c], path);
        float *mine = brigade_tokenwise(path, tokens, va);
        printf("| %s | %s | %.2e | %.2e | %.2e |\n", cases[c].preset, cases[c].type_name,
               nmse(a, b, n), nmse(a, mine, n), nmse(b, mine, n));
        free(a);
        free(b);
        free(mine);
    }
    remove(path);
    return 0;
}
