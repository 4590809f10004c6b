/* The tensors each supported architecture has: name, shape and what kind of
 * weight each is, derived from the hyperparameters. The loader binds a file
 * against this list and synth writes it, so the two cannot disagree. */
#ifndef BG_ARCH_H
#define BG_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "hparams.h"

typedef enum bg_role {
    BG_ROLE_TOKEN_EMBD,
    BG_ROLE_OUTPUT_NORM,
    BG_ROLE_OUTPUT,
    /* per layer */
    BG_ROLE_ATTN_NORM,
    BG_ROLE_POST_NORM, /* qwen35moe: before the MoE */
    BG_ROLE_FFN_NORM,  /* qwen3moe: before the MoE */
    BG_ROLE_ATTN_Q,    /* qwen35moe: query and output gate interleaved per head */
    BG_ROLE_ATTN_K,
    BG_ROLE_ATTN_V,
    BG_ROLE_ATTN_OUT,
    BG_ROLE_ATTN_Q_NORM,
    BG_ROLE_ATTN_K_NORM,
    BG_ROLE_SSM_QKV, /* DeltaNet: q, k, v projections, convolved together */
    BG_ROLE_SSM_GATE,
    BG_ROLE_SSM_CONV1D,
    BG_ROLE_SSM_DT,
    BG_ROLE_SSM_A,
    BG_ROLE_SSM_BETA,
    BG_ROLE_SSM_ALPHA,
    BG_ROLE_SSM_NORM,
    BG_ROLE_SSM_OUT,
    BG_ROLE_FFN_GATE_INP, /* router */
    BG_ROLE_FFN_GATE_EXPS,
    BG_ROLE_FFN_UP_EXPS,
    BG_ROLE_FFN_DOWN_EXPS,
    BG_ROLE_FFN_GATE_INP_SHEXP,
    BG_ROLE_FFN_GATE_SHEXP,
    BG_ROLE_FFN_UP_SHEXP,
    BG_ROLE_FFN_DOWN_SHEXP,
    BG_ROLE_COUNT
} bg_role;

/* What a tensor is, which decides how it may be stored and how synth draws
 * it. */
typedef enum bg_weight_kind {
    BG_KIND_MATRIX, /* projection: any weight type */
    BG_KIND_DENSE,  /* kept f32 by llama.cpp's quantizer (router, convolution) */
    BG_KIND_NORM,   /* 1-d scale near one */
    BG_KIND_VECTOR, /* other 1-d values (shared-expert gate, ssm_a, ssm_dt) */
} bg_weight_kind;

typedef struct bg_tensor_spec {
    bg_role role;
    int32_t layer; /* -1 for model-wide tensors */
    char name[64];
    uint32_t n_dims;
    uint64_t ne[4]; /* unused dimensions are 1 */
    bg_weight_kind kind;
    bool optional; /* output.weight: absent means tied to token_embd */
} bg_tensor_spec;

/* Fills up to cap specs in file order (embeddings, each layer, output) and
 * returns how many the architecture has; call with cap 0 to count. */
size_t bg_arch_tensor_specs(const bg_hparams *hp, bg_tensor_spec *out, size_t cap);

#endif
