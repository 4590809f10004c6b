/* The memory plan: every byte a session will allocate, as a pure function
 * of the hyperparameters and the session's settings. The session allocates
 * from this plan, so prediction and use cannot drift apart. */
#ifndef BG_PLANNER_H
#define BG_PLANNER_H

#include <stdint.h>

#include "hparams.h"

/* The micro-batch scratch buffers of a session (see session.h). */
typedef enum bg_buf {
    BG_BUF_X, BG_BUF_XN, BG_BUF_OUT, BG_BUF_Q, BG_BUF_KV, BG_BUF_ATTN, BG_BUF_GATE,
    BG_BUF_ROUTER, BG_BUF_HEADS, BG_BUF_FF_GATE, BG_BUF_FF_UP, BG_BUF_GX, BG_BUF_GY,
    BG_BUF_SLOT_OUT, BG_BUF_CHOSEN, BG_BUF_CHOSEN_W, BG_BUF_MEMBERS,
    BG_BUF_XQ, BG_BUF_TOK_SEQ, BG_BUF_TOK_POS, BG_BUF_SEQ_PAST, BG_BUF_SEQ_COUNT, BG_BUF_COUNT
} bg_buf;

typedef struct bg_session_plan {
    uint64_t q_width, a_width, ff_width; /* per-token row widths, in floats */
    uint32_t n_seq;                             /* sequences, each with its own state */
    uint64_t k_layer_bytes, v_layer_bytes;      /* per attention layer and sequence */
    uint64_t conv_layer_bytes, ssm_layer_bytes; /* per DeltaNet layer and sequence */
    uint32_t n_attention_layers, n_recurrent_layers;
    uint64_t buf_bytes[BG_BUF_COUNT];
    uint64_t xn_code_bytes; /* on the GPU, xq's first part: the normed rows' codes */
    uint64_t kv_bytes, recurrent_bytes, compute_bytes; /* all sequences together */
    uint64_t checkpoint_bytes; /* one sequence's recurrent state */
} bg_session_plan;

/* Whether the GPU runs the shared expert as one more expert slot per token
 * (it has the routed experts' width); gx, slot_out and xq are sized for it. */
static inline bool bg_plan_shared_slot(const bg_hparams *hp)
{
    return hp->n_ff_shexp && hp->n_ff_shexp == hp->n_ff_exp;
}

/* type_k/type_v: GGUF type ids of the cache. n_seq sequences of n_ctx
 * positions each. */
void bg_plan_session(const bg_hparams *hp, uint32_t n_ctx, uint32_t n_ubatch, uint32_t n_seq,
                     uint32_t type_k, uint32_t type_v, bg_session_plan *plan);

#endif
