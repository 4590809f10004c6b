/* llama.cpp's logits for a token file, in brigade eval --logits-out's
 * format (float32, every token's row of n_vocab in order), so that
 * scripts/gpu-check.sh can put llama.cpp's own distances beside brigade's
 * on the same file: its batched against its token-by-token CPU logits
 * (the CPU parity suite's scale for another summation order) and its GPU's
 * against its CPU's. Not a test:
 *   oracle_logits MODEL TOKENS.txt OUT [-ctk T] [-ctv T] [-t N] [--gpu]
 * writes OUT.tok.bin (token by token on the plain CPU path), OUT.bat.bin
 * (the tokens as one batch on the CPU, repacked weights as llama.cpp
 * loads them by default) and, with --gpu (the CUDA build's libraries),
 * OUT.gpu.bin (one batch, every layer on the GPU). TOKENS.txt:
 * whitespace-separated token ids; T: f32, f16, q8_0 or q4_0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oracle.h"

enum { MAX_TOKENS = 4096 };

static int usage(void)
{
    fprintf(stderr, "usage: oracle_logits MODEL TOKENS.txt OUT [-ctk T] [-ctv T] [-t N] [--gpu]\n");
    return 2;
}

static bool cache_type(const char *name, enum ggml_type *t)
{
    static const struct {
        const char *name;
        enum ggml_type type;
    } types[] = {{"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"q8_0", GGML_TYPE_Q8_0},
                 {"q4_0", GGML_TYPE_Q4_0}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(name, types[i].name)) {
            *t = types[i].type;
            return true;
        }
    return false;
}

static bool write_floats(const char *path, const float *x, size_t n)
{
    FILE *o = fopen(path, "wb");
    bool ok = o && fwrite(x, sizeof *x, n, o) == n;
    ok = o && fclose(o) == 0 && ok;
    if (!ok)
        fprintf(stderr, "oracle_logits: cannot write %s\n", path);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = n_cpu > 0 ? (int)n_cpu : 1;
    bool gpu = false;
    enum ggml_type k = GGML_TYPE_F16, v = GGML_TYPE_F16;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu")) {
            gpu = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        const char *val = argv[++i];
        char *end;
        long x = strtol(val, &end, 10);
        if (!strcmp(argv[i - 1], "-t") && *val && !*end && x > 0 && x <= 1024) threads = (int)x;
        else if (!strcmp(argv[i - 1], "-ctk") && cache_type(val, &k)) continue;
        else if (!strcmp(argv[i - 1], "-ctv") && cache_type(val, &v)) continue;
        else return usage();
    }
    if (strlen(argv[3]) > 4000)
        return usage();
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "oracle_logits: cannot open %s\n", argv[2]);
        return 1;
    }
    static int32_t tokens[MAX_TOKENS];
    int n = 0;
    long id;
    while (n < MAX_TOKENS && fscanf(f, "%ld", &id) == 1) {
        if (id < 0 || id > INT32_MAX) {
            fprintf(stderr, "oracle_logits: %s: token %d is %ld\n", argv[2], n, id);
            fclose(f);
            return 1;
        }
        tokens[n++] = (int32_t)id;
    }
    bool rest = !feof(f) && fscanf(f, " %*s") != EOF;
    fclose(f);
    if (!n || rest) {
        fprintf(stderr, "oracle_logits: %s: %s\n", argv[2],
                n ? "more than 4096 tokens, or not a number" : "no tokens");
        return 1;
    }
    oracle_init();
    bool have_gpu = false;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++)
        have_gpu |= ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU;
    if (gpu && !have_gpu) {
        fprintf(stderr, "oracle_logits: --gpu, but llama.cpp found no GPU backend in %s\n",
                ORACLE_LIB_DIR);
        return 1;
    }
    static const struct {
        const char *suffix;
        bool batched, gpu;
    } runs[] = {{"tok", false, false}, {"bat", true, false}, {"gpu", true, true}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        if (runs[r].gpu && !gpu)
            continue;
        int n_vocab = 0;
        float *logits = oracle_logits_of(argv[1], tokens, n, runs[r].batched ? n : 1, false,
                                         runs[r].gpu ? 999 : 0, k, v, threads, &n_vocab);
        if (!logits) {
            fprintf(stderr, "oracle_logits: llama.cpp could not evaluate %s (%s; a token outside "
                            "its vocabulary of %d?)\n", argv[1], runs[r].suffix, n_vocab);
            return 1;
        }
        char path[4096 + 16];
        snprintf(path, sizeof path, "%s.%s.bin", argv[3], runs[r].suffix);
        bool ok = write_floats(path, logits, (size_t)n * n_vocab);
        free(logits);
        if (!ok)
            return 1;
    }
    return 0;
}
