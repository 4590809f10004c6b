/* brigade eval -m MODEL --tokens IDS.txt --logits-out OUT.bin: evaluates a
 * token sequence and writes float32 logits for every position, row-major
 * [n_tokens][n_vocab]: how quality is compared with other engines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "cli.h"
#include "commands.h"

static void eval_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade eval -m MODEL --tokens IDS.txt --logits-out OUT.bin [options]\n"
            "  -m, --model FILE       GGUF model\n"
            "  --tokens FILE          token ids, whitespace separated\n"
            "  --logits-out FILE      float32 logits, [n_tokens][n_vocab], row-major\n"
            "  -c, --ctx-size N       context size (default: the number of tokens)\n"
            "  -t, --threads N        threads (default: all cores)\n"
            "  -ub, --ubatch-size N   tokens evaluated together (default 512)\n"
            "  -ctk, --cache-type-k T KV cache type for K: f16 (default), f32, q8_0, q4_0\n"
            "  -ctv, --cache-type-v T KV cache type for V: f16 (default), f32, q8_0, q4_0\n"
            "  --no-mmap              read the weights into memory\n");
}

/* Reads whitespace-separated non-negative integers; rejects anything else
 * with the byte offset. */
static int32_t *read_ids(const char *path, size_t *n_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "eval: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 1024;
    int32_t *ids = malloc(cap * sizeof *ids);
    int c = 0;
    long offset = 0;
    bool ok = ids != NULL;
    while (ok && (c = fgetc(f)) != EOF) {
        offset++;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (c < '0' || c > '9') {
            fprintf(stderr, "eval: %s: byte %ld: '%c' is not part of a token id\n", path,
                    offset - 1, c);
            ok = false;
            break;
        }
        int64_t v = c - '0';
        while ((c = fgetc(f)) != EOF && c >= '0' && c <= '9') {
            offset++;
            v = v * 10 + (c - '0');
            if (v > INT32_MAX) {
                fprintf(stderr, "eval: %s: byte %ld: token id too large\n", path, offset);
                ok = false;
                break;
            }
        }
        if (c != EOF)
            ungetc(c, f);
        if (ok && n == cap) {
            int32_t *grown = realloc(ids, (cap *= 2) * sizeof *ids);
            ok = grown != NULL;
            if (grown)
                ids = grown;
        }
        if (ok)
            ids[n++] = (int32_t)v;
    }
    fclose(f);
    if (ok && n == 0) {
        fprintf(stderr, "eval: %s holds no token ids\n", path);
        ok = false;
    }
    if (!ok) {
        free(ids);
        return NULL;
    }
    *n_out = n;
    return ids;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cmd_eval(int argc, char **argv)
{
    const char *model_path = NULL, *tokens_path = NULL, *out_path = NULL;
    brigade_session_options so = {0};
    brigade_model_options mo = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            eval_usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_value)
            model_path = argv[++i];
        else if (!strcmp(a, "--tokens") && has_value)
            tokens_path = argv[++i];
        else if (!strcmp(a, "--logits-out") && has_value)
            out_path = argv[++i];
        else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) && has_value) {
            if (!cli_parse_u32(a, argv[++i], &so.n_ctx))
                return 2;
        } else if ((!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) && has_value) {
            if (!cli_parse_u32(a, argv[++i], &so.n_ubatch))
                return 2;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has_value) {
            if (!cli_parse_u32(a, argv[++i], &so.n_threads))
                return 2;
        } else if ((!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) && has_value) {
            if (!cli_parse_cache_type(a, argv[++i], &so.cache_type_k))
                return 2;
        } else if ((!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) && has_value) {
            if (!cli_parse_cache_type(a, argv[++i], &so.cache_type_v))
                return 2;
        } else if (!strcmp(a, "--no-mmap"))
            mo.no_mmap = true;
        else if (has_value && cli_parse_gpu_flag(a, argv[i + 1], &so)) {
            if (cli_parse_gpu_flag(a, argv[++i], &so) < 0)
                return 2;
        } else {
            fprintf(stderr, "eval: unknown option or missing value: %s\n", a);
            eval_usage(stderr);
            return 2;
        }
    }
    if (!model_path || !tokens_path || !out_path) {
        eval_usage(stderr);
        return 2;
    }
    size_t n = 0;
    int32_t *ids = read_ids(tokens_path, &n);
    if (!ids)
        return 1;
    if (so.n_ctx == 0)
        so.n_ctx = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    brigade_error err = {0};
    brigade_model *model = NULL;
    brigade_session *session = NULL;
    float *logits = NULL;
    FILE *out = NULL;
    int rc = 1;
    double t0 = seconds();
    if (brigade_model_load(model_path, &mo, &model, &err) ||
        brigade_session_new(model, &so, &session, &err)) {
        fprintf(stderr, "eval: %s\n", err.message);
        goto done;
    }
    double t_load = seconds() - t0;
    size_t n_vocab = brigade_model_n_vocab(model);
    if (n > SIZE_MAX / sizeof(float) / n_vocab || !(logits = malloc(n * n_vocab * sizeof(float)))) {
        fprintf(stderr, "eval: cannot allocate logits for %zu tokens x %zu\n", n, n_vocab);
        goto done;
    }
    double t1 = seconds();
    if (brigade_session_eval(session, ids, n, true, logits, &err)) {
        fprintf(stderr, "eval: %s\n", err.message);
        goto done;
    }
    double t_eval = seconds() - t1;
    if (!(out = fopen(out_path, "wb")) || fwrite(logits, sizeof(float) * n_vocab, n, out) != n ||
        fclose(out) != 0) {
        out = NULL;
        fprintf(stderr, "eval: cannot write %s: %s\n", out_path, strerror(errno));
        goto done;
    }
    out = NULL;
    fprintf(stderr, "eval: %zu tokens, %zu logits each, written to %s\n", n, n_vocab, out_path);
    fprintf(stderr, "eval: load %.2f s, eval %.2f s (%.1f tokens/s)\n", t_load, t_eval,
            (double)n / t_eval);
    rc = 0;
done:
    if (out)
        fclose(out);
    free(logits);
    free(ids);
    brigade_session_free(session);
    brigade_model_free(model);
    return rc;
}
