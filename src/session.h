/* A session's state and scratch, shared by the per-architecture forward
 * passes in src/models/. Shapes are noted per buffer. */
#ifndef BG_SESSION_H
#define BG_SESSION_H

#include "matmul.h"
#include "model.h"
#include "pool.h"

typedef struct bg_layer_state {
    uint8_t *k_cache, *v_cache; /* attention: [n_ctx] rows of n_head_kv * head_dim in the cache types */
    float *conv;              /* DeltaNet: [conv_dim][conv_kernel - 1], oldest first */
    float *ssm;               /* DeltaNet: [n_v_heads][state][state], row i = value dim */
} bg_layer_state;

struct brigade_session {
    const brigade_model *model;
    const bg_hparams *hp;
    uint32_t n_ctx, n_past;
    uint32_t type_k, type_v;        /* cache types */
    uint64_t k_row_bytes, v_row_bytes; /* one position of one layer */
    uint32_t k_rotation, v_rotation;   /* Hadamard size for quantized caches, 0: none */
    bg_pool *pool;
    bg_layer_state *layers;
    /* scratch, sized at creation */
    float *x;       /* [n_embd] residual stream */
    float *xn;      /* [n_embd] normed input of a block */
    float *out;     /* [n_embd] block output */
    float *q;       /* [max(n_head * head_dim * 2, conv_dim)] */
    float *k, *v;   /* [n_head_kv * head_dim] */
    float *attn;    /* [max(n_head * head_dim, value_dim)] */
    float *gate;    /* [max(n_head * head_dim, value_dim)] output gates */
    float *acc;     /* [head_dim] attention accumulator (f32, or f16 bits) */
    float *vrow;    /* [head_dim] a V row as f32 */
    float *kv_tmp;  /* [2 * n_head_kv * head_dim] this token's K and V before caching */
    float *router;  /* [n_expert] */
    float *ff_gate, *ff_up; /* [max(n_ff_exp, n_ff_shexp)] */
    float *heads;   /* [4 * n_v_heads] DeltaNet beta, alpha, g */
    void *xq;       /* converted activations for bg_matvec */
    int32_t *chosen; /* [n_expert_used] */
};

/* One layer of token at position pos: s->x is updated in place. */
void bg_qwen3moe_layer(brigade_session *s, uint32_t il, uint32_t pos);
void bg_qwen35moe_layer(brigade_session *s, uint32_t il, uint32_t pos);

/* Blocks shared by both architectures (src/models/blocks.c). */
void bg_block_attention(brigade_session *s, uint32_t il, uint32_t pos, bool gated_q);
void bg_block_moe(brigade_session *s, uint32_t il);
/* y = W x for the weight of role in layer il. */
void bg_project(brigade_session *s, const brigade_tensor_info *w, const float *x, float *y);

#endif
