#include "presets.h"

#include <stddef.h>
#include <string.h>

#include "brigade.h"

/* Figures from the published configs, as llama.cpp's converter writes them. */
static const bg_preset presets[] = {
    {
        .name = "qwen3.6-35b-a3b", .display_name = "Qwen3.6-35B-A3B (synthetic)",
        .hp.arch = BG_ARCH_QWEN35MOE, .hp.n_layers = 40, .hp.n_embd = 2048, .hp.n_vocab = 248320,
        .hp.n_ctx_train = 262144, .hp.n_head = 16, .hp.n_head_kv = 2, .hp.head_dim = 256,
        .hp.n_expert = 256, .hp.n_expert_used = 8, .hp.n_ff_exp = 512, .hp.n_ff_shexp = 512,
        .hp.rope_dims = 64, .hp.rope_sections = {11, 11, 10, 0}, .hp.rope_freq_base = 10000000.0f,
        .hp.rms_eps = 1e-6f, .hp.ssm_conv_kernel = 4, .hp.ssm_state_size = 128,
        .hp.ssm_group_count = 16, .hp.ssm_time_step_rank = 32, .hp.ssm_inner_size = 4096,
        .hp.full_attention_interval = 4,
    },
    {
        .name = "qwen3.5-122b-a10b", .display_name = "Qwen3.5-122B-A10B (synthetic)",
        .hp.arch = BG_ARCH_QWEN35MOE, .hp.n_layers = 48, .hp.n_embd = 3072, .hp.n_vocab = 248320,
        .hp.n_ctx_train = 262144, .hp.n_head = 32, .hp.n_head_kv = 2, .hp.head_dim = 256,
        .hp.n_expert = 256, .hp.n_expert_used = 8, .hp.n_ff_exp = 1024, .hp.n_ff_shexp = 1024,
        .hp.rope_dims = 64, .hp.rope_sections = {11, 11, 10, 0}, .hp.rope_freq_base = 10000000.0f,
        .hp.rms_eps = 1e-6f, .hp.ssm_conv_kernel = 4, .hp.ssm_state_size = 128,
        .hp.ssm_group_count = 16, .hp.ssm_time_step_rank = 64, .hp.ssm_inner_size = 8192,
        .hp.full_attention_interval = 4,
    },
    {
        .name = "qwen3.5-397b-a17b", .display_name = "Qwen3.5-397B-A17B (synthetic)",
        .hp.arch = BG_ARCH_QWEN35MOE, .hp.n_layers = 60, .hp.n_embd = 4096, .hp.n_vocab = 248320,
        .hp.n_ctx_train = 262144, .hp.n_head = 32, .hp.n_head_kv = 2, .hp.head_dim = 256,
        .hp.n_expert = 512, .hp.n_expert_used = 10, .hp.n_ff_exp = 1024, .hp.n_ff_shexp = 1024,
        .hp.rope_dims = 64, .hp.rope_sections = {11, 11, 10, 0}, .hp.rope_freq_base = 10000000.0f,
        .hp.rms_eps = 1e-6f, .hp.ssm_conv_kernel = 4, .hp.ssm_state_size = 128,
        .hp.ssm_group_count = 16, .hp.ssm_time_step_rank = 64, .hp.ssm_inner_size = 8192,
        .hp.full_attention_interval = 4,
    },
    {
        .name = "qwen3-30b-a3b", .display_name = "Qwen3-30B-A3B (synthetic)",
        .hp.arch = BG_ARCH_QWEN3MOE, .hp.n_layers = 48, .hp.n_embd = 2048, .hp.n_vocab = 151936,
        .hp.n_ctx_train = 40960, .hp.n_head = 32, .hp.n_head_kv = 4, .hp.head_dim = 128, .hp.n_ff = 6144,
        .hp.n_expert = 128, .hp.n_expert_used = 8, .hp.n_ff_exp = 768, .hp.rope_dims = 128,
        .hp.rope_freq_base = 1000000.0f, .hp.rms_eps = 1e-6f,
    },
    {
        .name = "qwen3-235b-a22b", .display_name = "Qwen3-235B-A22B (synthetic)",
        .hp.arch = BG_ARCH_QWEN3MOE, .hp.n_layers = 94, .hp.n_embd = 4096, .hp.n_vocab = 151936,
        .hp.n_ctx_train = 40960, .hp.n_head = 64, .hp.n_head_kv = 4, .hp.head_dim = 128,
        .hp.n_ff = 12288, .hp.n_expert = 128, .hp.n_expert_used = 8, .hp.n_ff_exp = 1536,
        .hp.rope_dims = 128, .hp.rope_freq_base = 1000000.0f, .hp.rms_eps = 1e-6f,
    },
    /* Tiny versions keep every structural feature (both layer kinds, top-k
     * below the expert count, GQA, partial rope with sections) at sizes a
     * test runs in milliseconds; rows stay multiples of 256 so every
     * quantized type applies. */
    {
        .name = "tiny-qwen35moe", .display_name = "tiny qwen35moe (synthetic)",
        .hp.arch = BG_ARCH_QWEN35MOE, .hp.n_layers = 4, .hp.n_embd = 256, .hp.n_ctx_train = 4096,
        .hp.n_head = 4, .hp.n_head_kv = 2, .hp.head_dim = 64, .hp.n_expert = 8, .hp.n_expert_used = 2,
        .hp.n_ff_exp = 256, .hp.n_ff_shexp = 256, .hp.rope_dims = 16, .hp.rope_sections = {3, 3, 2, 0},
        .hp.rope_freq_base = 10000000.0f, .hp.rms_eps = 1e-6f, .hp.ssm_conv_kernel = 4,
        .hp.ssm_state_size = 64, .hp.ssm_group_count = 2, .hp.ssm_time_step_rank = 4,
        .hp.ssm_inner_size = 256, .hp.full_attention_interval = 4,
    },
    {
        .name = "tiny-qwen3moe", .display_name = "tiny qwen3moe (synthetic)",
        .hp.arch = BG_ARCH_QWEN3MOE, .hp.n_layers = 4, .hp.n_embd = 256, .hp.n_ctx_train = 4096,
        .hp.n_head = 4, .hp.n_head_kv = 2, .hp.head_dim = 64, .hp.n_ff = 768, .hp.n_expert = 8,
        .hp.n_expert_used = 2, .hp.n_ff_exp = 256, .hp.rope_dims = 64, .hp.rope_freq_base = 1000000.0f,
        .hp.rms_eps = 1e-6f,
    },
};

enum { N_PRESETS = sizeof presets / sizeof *presets };

const bg_preset *bg_preset_find(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *const *brigade_synth_presets(void)
{
    static const char *names[N_PRESETS + 1];
    for (size_t i = 0; i < N_PRESETS; i++)
        names[i] = presets[i].name;
    return names;
}

