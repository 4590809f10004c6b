/* Tokenizer speed, brigade against llama.cpp, in the same process on the
 * same text: a few megabytes of generated mixed text (English-like prose,
 * code, numbers, CJK, Cyrillic, emoji, whitespace runs). Each repetition
 * tokenizes the whole text once with each tokenizer, alternating, both as
 * one call and as 4 KiB chunks (prompt-sized calls); the ids are compared.
 *
 *   bench/tokenize_speed [VOCAB.gguf] [--mb N] [--reps N]
 *
 * VOCAB defaults to llama.cpp's ggml-vocab-qwen35.gguf. Prints tokens per
 * second for each and the ratio brigade / llama.cpp (above 1: brigade is
 * faster). Not part of `make test`. */
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

static uint64_t rng = 42;

static uint32_t below(uint32_t n)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2;
        t->p = realloc(t->p, t->cap);
        if (!t->p)
            exit(1);
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
}

static void put_cp(text *t, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 63));
        u[2] = (char)(0x80 | (cp & 63));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 63));
        u[2] = (char)(0x80 | ((cp >> 6) & 63));
        u[3] = (char)(0x80 | (cp & 63));
        n = 4;
    }
    put(t, u, n);
}

static const char *const words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
    "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but",
    "have", "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her",
    "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
    "model", "tokenizer", "inference", "expert", "mixture", "attention", "layer",
    "quantization", "throughput", "latency", "memory", "bandwidth", "kernel", "matrix",
    "Transformer", "Qwen", "GPU", "CPU", "don't", "it's", "we're", "they've", "I'll",
    "internationalization", "unbelievably", "characteristically", "reproducibility",
};
static const char *const code[] = {
    "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n",
    "def forward(self, x):\n    return self.proj(torch.relu(x))\n",
    "#include <stdio.h>\nint main(void) { printf(\"hello\\n\"); return 0; }\n",
    "{\"name\": \"brigade\", \"version\": [0, 1, 0], \"ok\": true}\n",
    "    if (err != NULL) {\n        return -EINVAL;\n    }\n",
};

static void paragraph(text *t)
{
    uint32_t kind = below(20);
    if (kind < 12) { /* prose */
        uint32_t n = 20 + below(80);
        for (uint32_t i = 0; i < n; i++) {
            const char *w = words[below(sizeof words / sizeof *words)];
            if (i)
                put(t, " ", 1);
            put(t, w, strlen(w));
            uint32_t r = below(30);
            if (r == 0)
                put(t, ",", 1);
            else if (r == 1)
                put(t, ".", 1);
            else if (r == 2) {
                char num[32];
                int k = snprintf(num, sizeof num, " %u", below(1000000));
                put(t, num, (size_t)k);
            }
        }
        put(t, ".\n\n", 3);
    } else if (kind < 15) { /* code */
        const char *c = code[below(sizeof code / sizeof *code)];
        put(t, c, strlen(c));
    } else if (kind < 17) { /* CJK */
        uint32_t n = 20 + below(100);
        for (uint32_t i = 0; i < n; i++)
            put_cp(t, below(15) ? 0x4E00 + below(0x5000) : 0x3002);
        put(t, "\n", 1);
    } else if (kind < 19) { /* Cyrillic */
        uint32_t n = 10 + below(40);
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t k = 3 + below(6); k > 0; k--)
                put_cp(t, 0x430 + below(32));
            put(t, " ", 1);
        }
        put(t, "\n", 1);
    } else { /* emoji and whitespace */
        for (uint32_t i = 5 + below(10); i > 0; i--) {
            put_cp(t, 0x1F600 + below(0x50));
            put(t, "   \t", 1 + below(4));
        }
        put(t, "\n", 1);
    }
}

int main(int argc, char **argv)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/ggml-vocab-qwen35.gguf", ORACLE_SRC_DIR);
    double mb = 4;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc)
            mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else
            snprintf(path, sizeof path, "%s", argv[i]);
    }
    text t = {0};
    while ((double)t.n < mb * 1024 * 1024)
        paragraph(&t);

    brigade_gguf *f;
    brigade_vocab *mine;
    brigade_error err;
    if (brigade_gguf_open(path, NULL, &f, &err) || brigade_vocab_load(f, &mine, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    oracle_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "llama.cpp cannot load %s\n", path);
        return 1;
    }
    const struct llama_vocab *theirs = llama_model_get_vocab(model);

    size_t cap = t.n + 16;
    int32_t *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    printf("vocabulary %s (%s), text %.2f MiB, %d repetitions\n", path, brigade_vocab_pre(mine),
           (double)t.n / (1024 * 1024), reps);

    static const size_t chunk_sizes[] = {0, 4096};
    int status = 0;
    for (int c = 0; c < 2; c++) {
        size_t chunk = chunk_sizes[c] ? chunk_sizes[c] : t.n;
        double best_mine = 1e30, best_theirs = 1e30;
        size_t n_mine = 0, n_theirs = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            n_mine = 0;
            for (size_t off = 0; off < t.n; off += chunk) {
                size_t len = t.n - off < chunk ? t.n - off : chunk, n;
                if (brigade_tokenize(mine, t.p + off, len, false, false, a + n_mine,
                                     cap - n_mine, &n, &err)) {
                    fprintf(stderr, "%s\n", err.message);
                    return 1;
                }
                n_mine += n;
            }
            double t1 = now();
            n_theirs = 0;
            for (size_t off = 0; off < t.n; off += chunk) {
                size_t len = t.n - off < chunk ? t.n - off : chunk;
                int32_t n = llama_tokenize(theirs, t.p + off, (int32_t)len, b + n_theirs,
                                           (int32_t)(cap - n_theirs), false, false);
                if (n < 0) {
                    fprintf(stderr, "llama_tokenize failed\n");
                    return 1;
                }
                n_theirs += (size_t)n;
            }
            double t2 = now();
            if (t1 - t0 < best_mine)
                best_mine = t1 - t0;
            if (t2 - t1 < best_theirs)
                best_theirs = t2 - t1;
        }
        bool same = n_mine == n_theirs && memcmp(a, b, n_mine * sizeof *a) == 0;
        if (!same)
            status = 1;
        double rm = (double)n_mine / best_mine, rt = (double)n_theirs / best_theirs;
        printf("%-16s brigade %10.0f tokens/s (%.3fs)   llama.cpp %10.0f tokens/s (%.3fs)   "
               "ratio %.2f   %zu tokens, ids %s\n",
               chunk_sizes[c] ? "4 KiB chunks" : "one call", rm, best_mine, rt, best_theirs,
               rm / rt, n_mine, same ? "identical" : "DIFFER");
    }
    free(a);
    free(b);
    free(t.p);
    llama_model_free(model);
    llama_backend_free();
    brigade_vocab_free(mine);
    brigade_gguf_close(f);
    return status;
}
