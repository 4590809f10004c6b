/* brigade_quantize against llama_model_quantize: for synthetic models in
 * f32, f16 and bf16, every file type brigade writes has, tensor by tensor,
 * the names, types, shapes and data bytes of llama.cpp's output, the same
 * general.file_type, and loads and runs in both engines. Also: --pure and
 * type overrides, requantization only when allowed, and a cancelled run
 * leaves no file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"

static char dir[256];

static void path_in(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* Same tensors, types and bytes, in llama.cpp's order; same file type. */
static void compare_files(const char *ours, const char *theirs, const char *what)
{
    brigade_gguf *a = NULL, *b = NULL;
    brigade_error err;
    CHECK(brigade_gguf_open(ours, NULL, &a, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    CHECK(brigade_gguf_open(theirs, NULL, &b, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    if (!a || !b) {
        brigade_gguf_close(a);
        brigade_gguf_close(b);
        return;
    }
    int64_t n = brigade_gguf_tensor_count(a);
    CHECK(n == brigade_gguf_tensor_count(b), "%s: %lld tensors vs %lld", what, (long long)n,
          (long long)brigade_gguf_tensor_count(b));
    int64_t differ = 0;
    for (int64_t i = 0; i < n && i < brigade_gguf_tensor_count(b); i++) {
        const brigade_tensor_info *x = brigade_gguf_tensor(a, i), *y = brigade_gguf_tensor(b, i);
        bool same = strcmp(x->name, y->name) == 0 && x->type == y->type &&
                    x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne) &&
                    x->n_bytes == y->n_bytes && memcmp(x->data, y->data, x->n_bytes) == 0;
        if (!same && differ++ < 3)
            CHECK(same, "%s: tensor %lld: ours %s %s, llama.cpp's %s %s%s", what, (long long)i,
                  x->name, brigade_type_name(x->type), y->name, brigade_type_name(y->type),
                  x->type == y->type ? " (different bytes)" : "");
    }
    CHECK(differ == 0, "%s: %lld tensors differ from llama.cpp's", what, (long long)differ);
    uint32_t fa = 0, fb = 1;
    brigade_gguf_get_u32(a, "general.file_type", true, &fa, NULL);
    brigade_gguf_get_u32(b, "general.file_type", true, &fb, NULL);
    CHECK(fa == fb, "%s: general.file_type %u vs %u", what, fa, fb);
    brigade_gguf_close(a);
    brigade_gguf_close(b);
}

/* Both engines load the file and compute finite logits for a few tokens. */
static void runs_in_both(const char *path, const char *what)
{
    static const int32_t tokens[] = {1, 17, 42, 99, 7, 3, 250, 64};
    const size_t n = sizeof tokens / sizeof *tokens;
    brigade_model *m = NULL;
    brigade_session *s = NULL;
    brigade_error err;
    CHECK(brigade_model_load(path, NULL, &m, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    brigade_session_options so = {.n_ctx = 64, .n_threads = 1};
    if (m)
        CHECK(brigade_session_new(m, &so, &s, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    uint32_t n_vocab = m ? brigade_model_n_vocab(m) : 0;
    float *logits = calloc(n_vocab ? n_vocab : 1, sizeof *logits);
    if (s) {
        CHECK(brigade_session_eval(s, tokens, n, false, logits, &err) == BRIGADE_OK, "%s: %s",
              what, err.message);
        bool finite = true;
        for (uint32_t i = 0; i < n_vocab; i++)
            finite &= isfinite(logits[i]);
        CHECK(finite, "%s: brigade's logits are not finite", what);
    }
    brigade_session_free(s);
    brigade_model_free(m);
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = oracle_no_progress;
    struct llama_model *lm = llama_model_load_from_file(path, mp);
    CHECK(lm != NULL, "%s: llama.cpp cannot load it", what);
    if (lm) {
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.n_threads = cp.n_threads_batch = 1;
        struct llama_context *ctx = llama_init_from_model(lm, cp);
        CHECK(ctx != NULL, "%s: llama.cpp cannot make a context", what);
        if (ctx) {
            struct llama_batch b = llama_batch_get_one((llama_token *)tokens, (int32_t)n);
            CHECK(llama_decode(ctx, b) == 0, "%s: llama.cpp cannot evaluate it", what);
            const float *l = llama_get_logits_ith(ctx, -1);
            bool finite = l != NULL;
            for (uint32_t i = 0; l && i < n_vocab; i++)
                finite &= isfinite(l[i]);
            CHECK(finite, "%s: llama.cpp's logits are not finite", what);
            llama_free(ctx);
        }
        llama_model_free(lm);
    }
    free(logits);
}

static brigade_status ours(const char *in, const char *out, brigade_quantize_options o,
                           brigade_error *err)
{
    o.n_threads = 2;
    brigade_quantize_report rep;
    return brigade_quantize(in, out, &o, &rep, err);
}

static bool theirs(const char *in, const char *out, struct llama_model_quantize_params qp)
{
    qp.nthread = 2;
    return llama_model_quantize(in, out, &qp) == 0;
}

static const brigade_ftype ftypes[] = {
    BRIGADE_FTYPE_Q4_0,   BRIGADE_FTYPE_Q4_1,   BRIGADE_FTYPE_Q5_0, BRIGADE_FTYPE_Q5_1,
    BRIGADE_FTYPE_Q8_0,   BRIGADE_FTYPE_Q2_K,   BRIGADE_FTYPE_Q3_K_S, BRIGADE_FTYPE_Q3_K_M,
    BRIGADE_FTYPE_Q3_K_L, BRIGADE_FTYPE_Q4_K_S, BRIGADE_FTYPE_Q4_K_M, BRIGADE_FTYPE_Q5_K_S,
    BRIGADE_FTYPE_Q5_K_M, BRIGADE_FTYPE_Q6_K,   BRIGADE_FTYPE_F16,  BRIGADE_FTYPE_BF16,
};

static void check_source(const char *preset, uint32_t src_type, const char *src_name)
{
    char src[512], a[512], b[512], what[160];
    snprintf(what, sizeof what, "%s-%s.gguf", preset, src_name);
    path_in(src, sizeof src, what);
    path_in(a, sizeof a, "brigade-q.gguf");
    path_in(b, sizeof b, "llama-q.gguf");
    brigade_error err;
    brigade_synth_options so = {.preset = preset, .type = src_type, .seed = 7};
    CHECK(brigade_synth(src, &so, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    for (size_t k = 0; k < sizeof ftypes / sizeof *ftypes; k++) {
        snprintf(what, sizeof what, "%s %s -> %s", preset, src_name, brigade_ftype_name(ftypes[k]));
        brigade_quantize_options o = {.ftype = ftypes[k], .output_type = -1, .token_embd_type = -1};
        struct llama_model_quantize_params qp = llama_model_quantize_default_params();
        qp.ftype = (enum llama_ftype)ftypes[k];
        CHECK(ours(src, a, o, &err) == BRIGADE_OK, "%s: %s", what, err.message);
        CHECK(theirs(src, b, qp), "%s: llama.cpp failed", what);
        compare_files(a, b, what);
        if (ftypes[k] == BRIGADE_FTYPE_Q4_K_M || ftypes[k] == BRIGADE_FTYPE_Q4_0 ||
            ftypes[k] == BRIGADE_FTYPE_Q3_K_M)
            runs_in_both(a, what);
    }
    /* --pure, and explicit output / token-embedding types */
    snprintf(what, sizeof what, "%s %s -> Q4_K_M --pure --output-type q8_0 "
                                "--token-embedding-type q5_0", preset, src_name);
    brigade_quantize_options o = {.ftype = BRIGADE_FTYPE_Q4_K_M, .pure = true,
                                  .output_type = 8 /* q8_0 */, .token_embd_type = 6 /* q5_0 */};
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
    qp.pure = true;
    qp.output_tensor_type = GGML_TYPE_Q8_0;
    qp.token_embedding_type = GGML_TYPE_Q5_0;
    CHECK(ours(src, a, o, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    CHECK(theirs(src, b, qp), "%s: llama.cpp failed", what);
    compare_files(a, b, what);
    remove(src);
}

/* Quantized input: refused unless allowed, then as llama.cpp does it. */
static void check_requantize(void)
{
    char src[512], a[512], b[512];
    path_in(src, sizeof src, "tiny-q8_0.gguf");
    path_in(a, sizeof a, "brigade-rq.gguf");
    path_in(b, sizeof b, "llama-rq.gguf");
    brigade_error err;
    brigade_synth_options so = {.preset = "tiny-qwen3moe", .type = 8 /* q8_0 */, .seed = 3};
    CHECK(brigade_synth(src, &so, &err) == BRIGADE_OK, "requantize source: %s", err.message);
    brigade_quantize_options o = {.ftype = BRIGADE_FTYPE_Q4_K_M, .output_type = -1,
                                  .token_embd_type = -1};
    CHECK(ours(src, a, o, &err) == BRIGADE_ERR_ARG && strstr(err.message, "--allow-requantize") &&
              access(a, F_OK) != 0,
          "quantized input must be refused without --allow-requantize: %s", err.message);
    o.allow_requantize = true;
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
    qp.allow_requantize = true;
    CHECK(ours(src, a, o, &err) == BRIGADE_OK, "requantize: %s", err.message);
    CHECK(theirs(src, b, qp), "requantize: llama.cpp failed");
    compare_files(a, b, "tiny-qwen3moe q8_0 -> Q4_K_M (requantized)");
    remove(src);
    remove(a);
    remove(b);
}

static int calls;
static bool stop_after_three(void *user, const brigade_quantize_progress *p)
{
    (void)user;
    (void)p;
    return ++calls < 3;
}

/* A cancelled run and bad inputs leave nothing behind. */
static void check_failures(void)
{
    char src[512], out[512], partial[600];
    path_in(src, sizeof src, "tiny-cancel.gguf");
    path_in(out, sizeof out, "cancelled.gguf");
    snprintf(partial, sizeof partial, "%s.partial", out);
    brigade_error err;
    brigade_synth_options so = {.preset = "tiny-qwen35moe", .type = 1 /* f16 */, .seed = 5};
    CHECK(brigade_synth(src, &so, &err) == BRIGADE_OK, "cancel source: %s", err.message);
    brigade_quantize_options o = {.ftype = BRIGADE_FTYPE_Q4_K_M, .output_type = -1,
                                  .token_embd_type = -1, .progress = stop_after_three};
    CHECK(ours(src, out, o, &err) == BRIGADE_ERR_CANCELLED, "a cancelled run must say so");
    CHECK(access(out, F_OK) != 0 && access(partial, F_OK) != 0,
          "a cancelled run must leave no file");
    o.progress = NULL;
    CHECK(ours(src, src, o, &err) == BRIGADE_ERR_ARG, "the output must not overwrite the input");
    FILE *f = fopen(out, "wb");
    if (f) {
        fputs("not a gguf file", f);
        fclose(f);
    }
    CHECK(ours(out, partial, o, &err) == BRIGADE_ERR_FORMAT && access(partial, F_OK) != 0,
          "a bad input must be refused: %s", err.message);
    o.ftype = (brigade_ftype)99;
    CHECK(ours(src, out, o, &err) == BRIGADE_ERR_ARG, "an unknown file type must be refused");
    remove(out);
    remove(src);
}

int main(void)
{
    oracle_init();
    snprintf(dir, sizeof dir, "%s/brigade-quantize-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    check_source("tiny-qwen35moe", 0, "f32");
    check_source("tiny-qwen35moe", 30, "bf16");
    check_source("tiny-qwen3moe", 1, "f16");
    check_requantize();
    check_failures();
    char a[512];
    path_in(a, sizeof a, "brigade-q.gguf");
    remove(a);
    path_in(a, sizeof a, "llama-q.gguf");
    remove(a);
    rmdir(dir);
    return check_summary("oracle_quantize");
}
