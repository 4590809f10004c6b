/* qwen3moe (Qwen3-30B-A3B): pre-norm attention with QK-norm and NEOX rope,
 * then a pre-norm routed mixture of experts. */
#include "session.h"

void bg_qwen3moe_layer(brigade_session *s, uint32_t il)
{
    const bg_layer *L = &s->model->layers[il];
    bg_norm_tokens(s, L->t[BG_ROLE_ATTN_NORM]);
    bg_block_attention(s, il, false);
    bg_add_residual(s);
    bg_norm_tokens(s, L->t[BG_ROLE_FFN_NORM]);
    bg_block_moe(s, il);
    bg_add_residual(s);
}
