/* Every file `brigade synth` writes must load and run in llama.cpp: synthetic
 * tiny models of both architectures in every weight type are loaded by the
 * oracle, which must agree on the parameter count and weight bytes, and a
 * short prompt is decoded with finite logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"
#include "ggml-backend.h"
#include "llama.h"

typedef struct totals {
    uint64_t params, bytes;
} totals;

static bool brigade_totals(const char *path, totals *t)
{
    brigade_gguf *f;
    brigade_error err;
    if (brigade_gguf_open(path, NULL, &f, &err) != BRIGADE_OK) {
        fprintf(stderr, "%s\n", err.message);
        return false;
    }
    t->params = t->bytes = 0;
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        t->params += brigade_gguf_tensor(f, i)->n_elements;
        t->bytes += brigade_gguf_tensor(f, i)->n_bytes;
    }
    brigade_gguf_close(f);
    return true;
}

/* Loads path in llama.cpp, compares totals, decodes a few tokens. */
static void run_in_oracle(const char *path, const char *what, bool decode)
{
    totals mine = {0, 0};
    CHECK(brigade_totals(path, &mine), "%s: brigade cannot read its own file", what);
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = oracle_no_progress;
    /* Map the file and use the weights in place: no repacked copies, so a
     * sparse full-size file loads without touching its data. */
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    mp.use_extra_bufts = decode;

    struct llama_model *model = llama_model_load_from_file(path, mp);
    CHECK(model != NULL, "%s: llama.cpp refused to load the file", what);
    if (!model)
        return;
    CHECK(llama_model_n_params(model) == mine.params,
          "%s: params llama.cpp %llu vs brigade %llu", what,
          (unsigned long long)llama_model_n_params(model), (unsigned long long)mine.params);
    CHECK(llama_model_size(model) == mine.bytes, "%s: bytes llama.cpp %llu vs brigade %llu", what,
          (unsigned long long)llama_model_size(model), (unsigned long long)mine.bytes);
    if (decode) {
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        cp.n_batch = 16;
        cp.n_threads = cp.n_threads_batch = 2;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        CHECK(ctx != NULL, "%s: llama.cpp cannot create a context", what);
        if (ctx) {
            const struct llama_vocab *vocab = llama_model_get_vocab(model);
            int n_vocab = llama_vocab_n_tokens(vocab);
            llama_token tokens[8];
            for (int i = 0; i < 8; i++)
                tokens[i] = (llama_token)((i * 37 + 11) % n_vocab);
            int rc = llama_decode(ctx, llama_batch_get_one(tokens, 8));
            CHECK(rc == 0, "%s: llama_decode failed (%d)", what, rc);
            if (rc == 0) {
                const float *logits = llama_get_logits_ith(ctx, -1);
                int bad = 0;
                double sum_sq = 0;
                for (int i = 0; i < n_vocab; i++) {
                    bad += !isfinite(logits[i]);
                    sum_sq += (double)logits[i] * logits[i];
                }
                CHECK(bad == 0, "%s: %d non-finite logits", what, bad);
                CHECK(sum_sq > 0, "%s: all logits are zero", what);
            }
            llama_free(ctx);
        }
    }
    llama_model_free(model);
}

/* decode == false writes a sparse file (the header of a full-size model over
 * a hole) that llama.cpp loads but does not run. */
static void synth_and_check(const char *preset, const char *type_name, uint32_t type,
                            uint32_t layers, const char *vocab, bool decode)
{
    char path[256], what[160];
    snprintf(path, sizeof path, "/tmp/brigade-oracle-synth-%d.gguf", (int)getpid());
    snprintf(what, sizeof what, "%s/%s%s%s", preset, type_name, vocab ? " with vocab " : "",
             vocab ? strrchr(vocab, '/') + 1 : "");
    brigade_synth_options o = {.preset = preset, .type = type, .seed = 7, .n_layers = layers,
                               .vocab_path = vocab, .sparse = !decode};
    brigade_error err;
    brigade_status st = brigade_synth(path, &o, &err);
    CHECK(st == BRIGADE_OK, "%s: synth failed: %s", what, err.message);
    if (st == BRIGADE_OK)
        run_in_oracle(path, what, decode);
    remove(path);
}

int main(void)
{
    oracle_init();

    static const struct {
        const char *name;
        uint32_t id;
    } types[] = {
        {"f32", 0},     {"f16", 1},     {"bf16", 30},   {"q8_0", 8},    {"q4_0", 2},
        {"q4_1", 3},    {"q5_0", 6},    {"q5_1", 7},    {"q4_K", 12},   {"q5_K", 13},
        {"q6_K", 14},   {"iq4_nl", 20}, {"iq4_xs", 23},
    };
    const char *presets[] = {"tiny-qwen35moe", "tiny-qwen3moe"};
    for (size_t p = 0; p < 2; p++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++)
            synth_and_check(presets[p], types[t].name, types[t].id, 0, NULL, true);

    /* Real vocabularies, padded to the preset's size (qwen3.6 geometry,
     * 4 layers so one is full attention). Loading checks every tensor name
     * and shape against llama.cpp's expectations for the real model. */
    char vocab[512];
    snprintf(vocab, sizeof vocab, "%s/models/ggml-vocab-qwen35.gguf", ORACLE_SRC_DIR);
    synth_and_check("tiny-qwen35moe", "q8_0", 8, 0, vocab, true);
    snprintf(vocab, sizeof vocab, "%s/models/ggml-vocab-qwen2.gguf", ORACLE_SRC_DIR);
    synth_and_check("tiny-qwen3moe", "q4_K", 12, 0, vocab, true);

    /* Full-size geometries, every layer, as sparse files: llama.cpp checks
     * each tensor's name and shape against the real architecture, and the
     * parameter count and size must agree. */
    snprintf(vocab, sizeof vocab, "%s/models/ggml-vocab-qwen35.gguf", ORACLE_SRC_DIR);
    synth_and_check("qwen3.6-35b-a3b", "q4_K", 12, 0, vocab, false);
    snprintf(vocab, sizeof vocab, "%s/models/ggml-vocab-qwen2.gguf", ORACLE_SRC_DIR);
    synth_and_check("qwen3-30b-a3b", "q4_K", 12, 0, vocab, false);

    llama_backend_free();
    return check_summary("oracle_synth");
}
