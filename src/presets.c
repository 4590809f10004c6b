#include "presets.h"

#include <stddef.h>
#include <string.h>

#include "brigade.h"

/* Figures from the published configs, as llama.cpp's converter writes them. */
static const bg_preset presets[] = {
    {
        .name = "qwen3.6-35b-a3b", .display_name = "Qwen3.6-35B-A3B (synthetic)",
        .arch = BG_ARCH_QWEN35MOE, .n_layers = 40, .n_embd = 2048, .n_vocab = 248320,
        .n_ctx_train = 262144, .n_head = 16, .n_head_kv = 2, .head_dim = 256,
        .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .n_ff_shexp = 512,
        .rope_dims = 64, .rope_sections = {11, 11, 10, 0}, .rope_freq_base = 10000000.0f,
        .rms_eps = 1e-6f, .ssm_conv_kernel = 4, .ssm_state_size = 128,
        .ssm_group_count = 16, .ssm_time_step_rank = 32, .ssm_inner_size = 4096,
        .full_attention_interval = 4,
    },
    {
        .name = "qwen3-30b-a3b", .display_name = "Qwen3-30B-A3B (synthetic)",
        .arch = BG_ARCH_QWEN3MOE, .n_layers = 48, .n_embd = 2048, .n_vocab = 151936,
        .n_ctx_train = 40960, .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_ff = 6144,
        .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768, .rope_dims = 128,
        .rope_freq_base = 1000000.0f, .rms_eps = 1e-6f,
    },
    /* Tiny versions keep every structural feature (both layer kinds, top-k
     * below the expert count, GQA, partial rope with sections) at sizes a
     * test runs in milliseconds; rows stay multiples of 256 so every
     * quantized type applies. */
    {
        .name = "tiny-qwen35moe", .display_name = "tiny qwen35moe (synthetic)",
        .arch = BG_ARCH_QWEN35MOE, .n_layers = 4, .n_embd = 256, .n_ctx_train = 4096,
        .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_expert = 8, .n_expert_used = 2,
        .n_ff_exp = 256, .n_ff_shexp = 256, .rope_dims = 16, .rope_sections = {3, 3, 2, 0},
        .rope_freq_base = 10000000.0f, .rms_eps = 1e-6f, .ssm_conv_kernel = 4,
        .ssm_state_size = 64, .ssm_group_count = 2, .ssm_time_step_rank = 4,
        .ssm_inner_size = 256, .full_attention_interval = 4,
    },
    {
        .name = "tiny-qwen3moe", .display_name = "tiny qwen3moe (synthetic)",
        .arch = BG_ARCH_QWEN3MOE, .n_layers = 4, .n_embd = 256, .n_ctx_train = 4096,
        .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_ff = 768, .n_expert = 8,
        .n_expert_used = 2, .n_ff_exp = 256, .rope_dims = 64, .rope_freq_base = 1000000.0f,
        .rms_eps = 1e-6f,
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

const char *bg_arch_name(bg_arch arch)
{
    return arch == BG_ARCH_QWEN35MOE ? "qwen35moe" : "qwen3moe";
}
