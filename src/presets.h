/* Geometries of real models (and tiny test versions): the hyperparameters
 * that fix every tensor's shape. Shared by `synth` and, later, `fit`. */
#ifndef BG_PRESETS_H
#define BG_PRESETS_H

#include <stdint.h>

typedef enum bg_arch { BG_ARCH_QWEN35MOE, BG_ARCH_QWEN3MOE } bg_arch;

typedef struct bg_preset {
    const char *name;
    const char *display_name; /* general.name */
    bg_arch arch;
    uint32_t n_layers;
    uint32_t n_embd;
    uint32_t n_vocab; /* 0: whatever the tokenizer has */
    uint32_t n_ctx_train;
    uint32_t n_head, n_head_kv, head_dim;
    uint32_t n_ff;    /* dense feed_forward_length (qwen3moe), 0 if none */
    uint32_t n_expert, n_expert_used, n_ff_exp;
    uint32_t n_ff_shexp; /* shared expert, 0 if none */
    uint32_t rope_dims;
    int32_t rope_sections[4];
    float rope_freq_base, rms_eps;
    /* Gated DeltaNet (qwen35moe) */
    uint32_t ssm_conv_kernel, ssm_state_size, ssm_group_count, ssm_time_step_rank;
    uint32_t ssm_inner_size, full_attention_interval;
} bg_preset;

const bg_preset *bg_preset_find(const char *name);
const char *bg_arch_name(bg_arch arch);
/* True if layer il of a qwen35moe model is a DeltaNet (recurrent) layer. */
static inline int bg_preset_is_recurrent(const bg_preset *p, uint32_t il)
{
    return p->arch == BG_ARCH_QWEN35MOE && (il + 1) % p->full_attention_interval != 0;
}

#endif
