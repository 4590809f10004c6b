/* Starting the llama.cpp oracle in tests and benchmarks: errors only in the
 * log, no progress dots, CPU backends loaded from the pinned build. */
#ifndef BG_ORACLE_H
#define BG_ORACLE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static inline bool oracle_no_progress(float progress, void *user)
{
    (void)progress;
    (void)user;
    return true;
}

static inline void oracle_quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

/* Whether llama.cpp's icelake (AVX-512) CPU build can run on this CPU: it
 * was built for AVX-512 F, BW, VL, DQ, VBMI and VNNI and stops on an
 * illegal instruction without them; ggml then loads its AVX2 build. */
static inline bool oracle_cpu_runs_icelake(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
}

static inline void oracle_init(void)
{
    llama_log_set(oracle_quiet_log, NULL);
    llama_backend_init();
    ggml_backend_load_all_from_path(ORACLE_LIB_DIR);
}

/* llama.cpp's logits for every position of tokens[0..n) in sequence 0,
 * micro-batches of n_ubatch (1: token by token on the plain CPU path, no
 * repacked weights, so activations are quantized the plain way, unless
 * `repacked`: its default, which decodes Q4_0 and IQ4_NL matrices through
 * weights repacked eight rows at a time, as brigade's rows dots sum), n_gpu
 * layers on a GPU backend (0: none, and no host operation sent to one),
 * KV types k and v (f32: without flash attention, which would cast the
 * cache to f16; otherwise with it, as quantized V requires). Returns n *
 * n_vocab floats to free, or NULL. */
static inline float *oracle_logits_of(const char *path, const int32_t *tokens, int n,
                                      int n_ubatch, bool repacked, int n_gpu,
                                      enum ggml_type k, enum ggml_type v, int n_threads,
                                      int *n_vocab)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.progress_callback = oracle_no_progress;
    mp.use_extra_bufts = n_ubatch > 1 || repacked;
    mp.n_gpu_layers = n_gpu;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model)
        return NULL;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2 * (uint32_t)n;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_ubatch;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.type_k = k;
    cp.type_v = v;
    cp.flash_attn_type = k == GGML_TYPE_F32 && v == GGML_TYPE_F32
                             ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                             : LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cp.op_offload = n_gpu > 0;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    *n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    float *out = ctx ? malloc((size_t)n * (size_t)*n_vocab * sizeof(float)) : NULL;
    struct llama_batch batch = llama_batch_init(n_ubatch, 0, 1);
    for (int start = 0; out && start < n; start += n_ubatch) {
        const int count = n - start < n_ubatch ? n - start : n_ubatch;
        batch.n_tokens = count;
        for (int i = 0; i < count; i++) {
            batch.token[i] = tokens[start + i];
            batch.pos[i] = start + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        if (llama_decode(ctx, batch) != 0) {
            free(out);
            out = NULL;
            break;
        }
        for (int i = 0; i < count; i++)
            memcpy(out + (size_t)(start + i) * *n_vocab, llama_get_logits_ith(ctx, i),
                   (size_t)*n_vocab * sizeof(float));
    }
    llama_batch_free(batch);
    if (ctx)
        llama_free(ctx);
    llama_model_free(model);
    return out;
}

#endif
