/* Model hyperparameters: the figures that fix every tensor's shape, read
 * from and written to GGUF metadata in one place. */
#ifndef BG_HPARAMS_H
#define BG_HPARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade.h"
#include "gguf_writer.h"

typedef enum bg_arch { BG_ARCH_QWEN35MOE, BG_ARCH_QWEN3MOE } bg_arch;

/* Limits that keep size arithmetic far from overflow; real models are far
 * below them. */
#define BG_MAX_LAYERS 1024u
#define BG_MAX_DIM (1u << 20)
#define BG_MAX_EXPERTS 4096u

typedef struct bg_hparams {
    bg_arch arch;
    uint32_t n_layers;
    uint32_t n_embd;
    uint32_t n_vocab; /* from the token_embd shape when read; 0 in a preset: the tokenizer's */
    uint32_t n_ctx_train;
    uint32_t n_head, n_head_kv, head_dim;
    uint32_t n_ff; /* dense feed_forward_length (qwen3moe metadata), 0 if absent */
    uint32_t n_expert, n_expert_used, n_ff_exp;
    uint32_t n_ff_shexp; /* shared expert width, 0 if none */
    uint32_t rope_dims;
    int32_t rope_sections[4]; /* qwen35moe's multi-section rope */
    float rope_freq_base, rms_eps;
    /* Gated DeltaNet (qwen35moe) */
    uint32_t ssm_conv_kernel, ssm_state_size, ssm_group_count, ssm_time_step_rank;
    uint32_t ssm_inner_size, full_attention_interval;
} bg_hparams;

const char *bg_arch_name(bg_arch arch);

/* True if layer il is a Gated DeltaNet (recurrent) layer. */
bool bg_hparams_is_recurrent(const bg_hparams *hp, uint32_t il);

/* Query heads per KV head (llama.cpp's n_gqa); 0 without KV heads. */
uint32_t bg_hparams_gqa(const bg_hparams *hp);

/* Reads "<arch>.*" keys; unknown architectures are refused with the list of
 * supported ones, missing or out-of-range values with the key's name. */
brigade_status bg_hparams_read(const brigade_gguf *file, bg_hparams *hp, brigade_error *err);

/* Consistency of the figures with each other (head sizes, rope sections,
 * expert counts, DeltaNet geometry) and the limits above. */
brigade_status bg_hparams_check(const bg_hparams *hp, brigade_error *err);

brigade_status bg_hparams_write(bg_gguf_writer *w, const bg_hparams *hp, brigade_error *err);

#endif
