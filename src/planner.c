#include "planner.h"

#include "gpu.h"
#include "matmul.h"
#include "types.h"

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

void bg_plan_session(const bg_hparams *hp, uint32_t n_ctx, uint32_t n_ubatch, uint32_t n_seq,
                     uint32_t type_k, uint32_t type_v, bg_session_plan *p)
{
    *p = (bg_session_plan){.n_seq = n_seq};
    const uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    const uint64_t S = hp->ssm_state_size;
    const uint64_t key_dim = S * hp->ssm_group_count, value_dim = S * hp->ssm_time_step_rank;
    const uint64_t conv_dim = 2 * key_dim + value_dim;
    const uint64_t qh = (uint64_t)hp->n_head * hp->head_dim, ub = n_ubatch;
    const uint64_t K = hp->n_expert_used, F = sizeof(float);

    uint64_t k_row = 0, v_row = 0;
    bg_type_row_bytes((bg_type)type_k, kv_dim, &k_row);
    bg_type_row_bytes((bg_type)type_v, kv_dim, &v_row);
    p->k_layer_bytes = (uint64_t)n_ctx * k_row;
    p->v_layer_bytes = (uint64_t)n_ctx * v_row;
    p->conv_layer_bytes = conv_dim * (hp->ssm_conv_kernel - 1) * F;
    p->ssm_layer_bytes = (uint64_t)hp->ssm_time_step_rank * S * S * F;
    for (uint32_t il = 0; il < hp->n_layers; il++) {
        if (bg_hparams_is_recurrent(hp, il))
            p->n_recurrent_layers++;
        else
            p->n_attention_layers++;
    }
    p->checkpoint_bytes = p->n_recurrent_layers * (p->conv_layer_bytes + p->ssm_layer_bytes);
    p->kv_bytes = (uint64_t)n_seq * p->n_attention_layers * (p->k_layer_bytes + p->v_layer_bytes);
    p->recurrent_bytes = (uint64_t)n_seq * p->checkpoint_bytes;

    p->q_width = max3(2 * qh, conv_dim, 1);
    p->a_width = max3(qh, value_dim, 1);
    p->ff_width = max3(hp->n_ff_exp, hp->n_ff_shexp, 1);
    uint64_t *b = p->buf_bytes;
    b[BG_BUF_X] = b[BG_BUF_XN] = b[BG_BUF_OUT] = ub * hp->n_embd * F;
    b[BG_BUF_Q] = ub * p->q_width * F;
    b[BG_BUF_KV] = ub * 2 * kv_dim * F;
    b[BG_BUF_ATTN] = b[BG_BUF_GATE] = ub * p->a_width * F;
    b[BG_BUF_ROUTER] = ub * hp->n_expert * F;
    b[BG_BUF_HEADS] = (ub * 2 * hp->ssm_time_step_rank + 2) * F;
    b[BG_BUF_FF_GATE] = b[BG_BUF_FF_UP] = ub * p->ff_width * F;
    /* gx: the CPU gathers one expert's token rows here, the GPU keeps every
     * (token, rank) slot's hidden row of n_ff_exp, and the shared expert's
     * (one more slot per token) when it has the routed experts' width */
    const uint64_t tok_slots = K + (bg_plan_shared_slot(hp) ? 1 : 0);
    b[BG_BUF_GX] = ub * max3(hp->n_embd, tok_slots * hp->n_ff_exp, 1) * F;
    b[BG_BUF_GY] = ub * hp->n_embd * F;
    /* slot_out: the experts' rows of each slot; on the GPU, before them,
     * a decode step's split attention (gpu.h) */
    const uint64_t split_tok = ub < BG_GPU_ATT_SPLIT_TOKENS ? ub : BG_GPU_ATT_SPLIT_TOKENS;
    b[BG_BUF_SLOT_OUT] = max3(ub * tok_slots * hp->n_embd * F,
                              BG_GPU_ATT_SPLIT_BYTES(split_tok, hp->n_head, hp->head_dim), 1);
    b[BG_BUF_CHOSEN] = ub * K * sizeof(int32_t);
    b[BG_BUF_CHOSEN_W] = ub * K * F;
    /* members: the CPU's token list of one expert; the GPU's slots grouped
     * by expert */
    b[BG_BUF_MEMBERS] = max3(ub, BG_GPU_MOE_GROUP_INTS(ub * K, hp->n_expert), 1) * sizeof(int32_t);
    uint64_t max_in = max3(hp->n_embd, max3(qh, value_dim, hp->n_ff_exp), hp->n_ff_shexp);
    /* xq: the CPU's packed activations (a decode step's K hidden rows at
     * once, blocks.c); on the GPU, the normed rows coded by their norm,
     * then the backend's counters and the activations a product codes for
     * itself (every token's row, or every slot's for the experts' down
     * rows) */
    p->xn_code_bytes = ub * BG_GPU_ACT_CODE_BYTES(hp->n_embd);
    const uint64_t cpu_xq = max3(bg_matmul_scratch(max_in, ub), bg_matmul_scratch(hp->n_ff_exp, K), 1);
    const uint64_t gpu_xq = p->xn_code_bytes + BG_GPU_COUNTER_BYTES;
    b[BG_BUF_XQ] = max3(cpu_xq, gpu_xq + ub * BG_GPU_ACT_CODE_BYTES(max_in),
                        gpu_xq + ub * tok_slots * BG_GPU_ACT_CODE_BYTES(hp->n_ff_exp));
    b[BG_BUF_TOK_SEQ] = b[BG_BUF_TOK_POS] = ub * sizeof(uint32_t);
    b[BG_BUF_SEQ_PAST] = b[BG_BUF_SEQ_COUNT] = (uint64_t)n_seq * sizeof(uint32_t);
    for (int i = 0; i < BG_BUF_COUNT; i++)
        p->compute_bytes += b[i];
}
