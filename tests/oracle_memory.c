/* The memory plan against llama.cpp and against brigade's own sessions:
 * KV-cache and recurrent-state bytes equal what llama.cpp's context
 * creation reports for the same context and cache types (it prints MiB to
 * two decimals, so agreement is to half its last digit, with the cell count
 * exact),
 * and a session allocates exactly the planned bytes. Models: 8-layer
 * slices of the real geometries as sparse files (every per-layer size is
 * the full model's) and the tiny presets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"

/* What llama.cpp's log said about its caches. */
typedef struct reported {
    double kv_mib, k_mib, v_mib, rs_mib, r_mib, s_mib;
    unsigned kv_cells;
    bool kv_seen, rs_seen;
} reported;

static reported rep;

static void capture_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)user;
    const char *p;
    char tk[16], tv[16];
    if ((p = strstr(text, "llama_kv_cache: size =")) &&
        sscanf(p, "llama_kv_cache: size = %lf MiB (%u cells, %*d layers, %*u/%*u seqs), K (%15[^)]): "
                  "%lf MiB, V (%15[^)]): %lf MiB",
               &rep.kv_mib, &rep.kv_cells, tk, &rep.k_mib, tv, &rep.v_mib) == 6)
        rep.kv_seen = true;
    if ((p = strstr(text, "llama_memory_recurrent: size =")) &&
        sscanf(p, "llama_memory_recurrent: size = %lf MiB (%*u cells, %*d layers, %*u seqs %*u "
                  "rs_seq), R (%15[^)]): %lf MiB, S (%15[^)]): %lf MiB",
               &rep.rs_mib, tk, &rep.r_mib, tv, &rep.s_mib) == 5)
        rep.rs_seen = true;
}

static const char *cache_names[] = {"f16", "q8_0", "q4_0"};
static const enum ggml_type cache_ggml[] = {GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};

/* Creates (and frees) a llama.cpp context; what it logs lands in rep. */
static bool llama_allocates(struct llama_model *lm, uint32_t n_ctx, uint32_t n_seq,
                            enum ggml_type cache_type)
{
    memset(&rep, 0, sizeof rep);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = cp.n_ubatch = 64;
    cp.n_seq_max = n_seq;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = cache_type;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    struct llama_context *ctx = llama_init_from_model(lm, cp);
    if (ctx)
        llama_free(ctx);
    return ctx != NULL;
}

static void check_model(const char *path, const char *what, bool recurrent)
{
    brigade_model *m = NULL;
    brigade_error err;
    CHECK(brigade_model_load(path, NULL, &m, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = oracle_no_progress;
    mp.use_extra_bufts = false;
    struct llama_model *lm = llama_model_load_from_file(path, mp);
    CHECK(lm != NULL, "%s: llama.cpp cannot load it", what);
    static const uint32_t contexts[] = {256, 4096, 32768};
    for (size_t c = 0; m && lm && c < sizeof contexts / sizeof *contexts; c++)
        for (int t = 0; t < 3; t++) {
            brigade_cache_type ct;
            brigade_cache_type_from_name(cache_names[t], &ct);
            brigade_session_options so = {.n_ctx = contexts[c], .n_ubatch = 64, .n_threads = 1,
                                          .cache_type_k = ct, .cache_type_v = ct};
            brigade_memory plan;
            CHECK(brigade_memory_plan(m, &so, &plan, &err) == BRIGADE_OK, "%s: %s", what,
                  err.message);

            CHECK(llama_allocates(lm, contexts[c], 1, cache_ggml[t]),
                  "%s: llama.cpp cannot create a context", what);
            const double mib = 1024.0 * 1024.0;
            CHECK(rep.kv_seen, "%s: llama.cpp reported no KV cache", what);
            CHECK(rep.kv_cells == contexts[c], "%s: llama.cpp has %u cells for a context of %u",
                  what, rep.kv_cells, contexts[c]);
            CHECK(fabs(plan.kv_bytes / mib - rep.kv_mib) <= 0.00501,
                  "%s ctx %u %s: KV plan %.4f MiB, llama.cpp %.2f MiB", what, contexts[c],
                  cache_names[t], plan.kv_bytes / mib, rep.kv_mib);
            if (recurrent) {
                CHECK(rep.rs_seen, "%s: llama.cpp reported no recurrent state", what);
                CHECK(fabs(plan.recurrent_bytes / mib - rep.rs_mib) <= 0.00501,
                      "%s: recurrent plan %.4f MiB, llama.cpp %.2f MiB", what,
                      plan.recurrent_bytes / mib, rep.rs_mib);
            } else {
                CHECK(plan.recurrent_bytes == 0, "%s: recurrent bytes for a model without", what);
            }
            if (c == 1)
                printf("  %-28s ctx %5u %-4s KV %9.2f MiB (llama.cpp %9.2f), recurrent %6.2f "
                       "MiB (llama.cpp %6.2f)\n",
                       what, contexts[c], cache_names[t], plan.kv_bytes / mib, rep.kv_mib,
                       plan.recurrent_bytes / mib, rep.rs_mib);

            /* brigade's own session allocates exactly the plan */
            if (contexts[c] <= 4096) {
                brigade_session *s = NULL;
                CHECK(brigade_session_new(m, &so, &s, &err) == BRIGADE_OK, "%s: %s", what,
                      err.message);
                if (s) {
                    brigade_memory used;
                    brigade_session_memory(s, &used);
                    uint64_t planned = plan.kv_bytes + plan.recurrent_bytes + plan.compute_bytes;
                    CHECK(used.allocated_bytes == planned,
                          "%s: session allocated %llu bytes, plan %llu", what,
                          (unsigned long long)used.allocated_bytes, (unsigned long long)planned);
                    brigade_session_free(s);
                }
            }
        }
    /* Parallel sequences (-np 4 with -c 4096): llama.cpp splits the context
     * among them, so the KV cache stays the size of 4096 cells, while each
     * sequence has its own recurrent state. brigade plans the same for
     * n_seq_max 4 sequences of 1024 positions each. */
    if (m && lm) {
        brigade_session_options so = {.n_ctx = 1024, .n_ubatch = 64, .n_threads = 1,
                                      .n_seq_max = 4};
        brigade_memory plan;
        CHECK(brigade_memory_plan(m, &so, &plan, &err) == BRIGADE_OK, "%s: %s", what, err.message);
        CHECK(llama_allocates(lm, 4096, 4, GGML_TYPE_F16),
              "%s: llama.cpp cannot create a 4-sequence context", what);
        const double mib = 1024.0 * 1024.0;
        CHECK(rep.kv_seen && fabs(plan.kv_bytes / mib - rep.kv_mib) <= 0.00501,
              "%s -np 4: KV plan %.4f MiB, llama.cpp %.2f MiB", what, plan.kv_bytes / mib,
              rep.kv_mib);
        if (recurrent)
            CHECK(rep.rs_seen && fabs(plan.recurrent_bytes / mib - rep.rs_mib) <= 0.00501,
                  "%s -np 4: recurrent plan %.4f MiB, llama.cpp %.2f MiB", what,
                  plan.recurrent_bytes / mib, rep.rs_mib);
        printf("  %-28s -c 4096 -np 4: KV %9.2f MiB (llama.cpp %9.2f), recurrent %6.2f MiB "
               "(llama.cpp %6.2f)\n",
               what, plan.kv_bytes / mib, rep.kv_mib, plan.recurrent_bytes / mib, rep.rs_mib);
    }
    if (lm)
        llama_model_free(lm);
    brigade_model_free(m);
}

int main(void)
{
    oracle_init();
    llama_log_set(capture_log, NULL);
    char path[256], vocab[512];
    snprintf(path, sizeof path, "/tmp/brigade-memory-%d.gguf", (int)getpid());
    const struct {
        const char *preset, *vocab;
        uint32_t layers;
        bool sparse, recurrent;
    } models[] = {
        {"qwen3.6-35b-a3b", "qwen35", 8, true, true},
        {"qwen3-30b-a3b", "qwen2", 8, true, false},
        {"tiny-qwen35moe", NULL, 0, false, true},
        {"tiny-qwen3moe", NULL, 0, false, false},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        if (models[i].vocab)
            snprintf(vocab, sizeof vocab, "%s/models/ggml-vocab-%s.gguf", ORACLE_SRC_DIR,
                     models[i].vocab);
        brigade_synth_options o = {.preset = models[i].preset, .type = 12, .seed = 1,
                                   .n_layers = models[i].layers,
                                   .vocab_path = models[i].vocab ? vocab : NULL,
                                   .sparse = models[i].sparse};
        brigade_error err;
        CHECK(brigade_synth(path, &o, &err) == BRIGADE_OK, "synth: %s", err.message);
        check_model(path, models[i].preset, models[i].recurrent);
        remove(path);
    }
    llama_backend_free();
    return check_summary("oracle_memory");
}
